/*
 * window.c — the rolling window's bucket arithmetic (see window.h).
 *
 * Everything here is O(1) per call except crossing bucket boundaries, which
 * costs at most RESIL__WINDOW_BUCKETS steps however long the window sat idle:
 * a gap of a whole window or more simply empties it.
 */
#include "window.h"

#include <string.h>

#include "internal.h"

/* Bucket numbers may be negative; the slot must not be. */
static size_t slot_of(int64_t bucket)
{
    return (size_t)resil__floor_mod(bucket, RESIL__WINDOW_BUCKETS);
}

void resil__window_init(resil__window *w, resil_duration sampling)
{
    memset(w, 0, sizeof *w);
    w->width = sampling / RESIL__WINDOW_BUCKETS;
    if (w->width < 1)
        w->width = 1;
    w->empty = true;
}

void resil__window_clear(resil__window *w)
{
    resil_duration width = w->width;
    memset(w, 0, sizeof *w);
    w->width = width;
    w->empty = true;
}

static void drop_bucket(resil__window *w, size_t slot)
{
    resil__window_counts *b = &w->bucket[slot];
    w->sum.total -= b->total;
    w->sum.failures -= b->failures;
    w->sum.slow -= b->slow;
    memset(b, 0, sizeof *b);
}

/* Make `bucket` the newest, dropping the buckets that fall out. */
static void advance(resil__window *w, int64_t bucket)
{
    if (w->empty) {
        w->head = bucket;
        w->empty = false;
        return;
    }
    if (bucket <= w->head)
        return;
    /* Both are bucket numbers of real instants, so the gap cannot overflow
     * unless the instants span more than the whole int64 range. */
    uint64_t gap = (uint64_t)bucket - (uint64_t)w->head;
    if (gap >= RESIL__WINDOW_BUCKETS) {
        resil__window_clear(w);
        w->head = bucket;
        w->empty = false;
        return;
    }
    for (uint64_t i = 1; i <= gap; i++)
        drop_bucket(w, slot_of(w->head + (int64_t)i));
    w->head = bucket;
}

void resil__window_add(resil__window *w, resil_instant now, bool failure,
                       bool slow)
{
    resil__window_add_many(w, now, 1);
    resil__window_counts *b = &w->bucket[slot_of(w->head)];
    if (failure) {
        b->failures++;
        w->sum.failures++;
    }
    if (slow) {
        b->slow++;
        w->sum.slow++;
    }
}

void resil__window_add_many(resil__window *w, resil_instant now, uint64_t n)
{
    advance(w, resil__floor_div(now, w->width));
    w->bucket[slot_of(w->head)].total += n;
    w->sum.total += n;
}

resil__window_counts resil__window_totals(const resil__window *w,
                                          resil_instant now)
{
    resil__window_counts none = {0, 0, 0};
    if (w->empty)
        return none;
    int64_t bucket = resil__floor_div(now, w->width);
    if (bucket <= w->head)
        return w->sum;
    uint64_t gap = (uint64_t)bucket - (uint64_t)w->head;
    if (gap >= RESIL__WINDOW_BUCKETS)
        return none;
    resil__window_counts c = w->sum;
    for (uint64_t i = 1; i <= gap; i++) {
        const resil__window_counts *b = &w->bucket[slot_of(w->head + (int64_t)i)];
        c.total -= b->total;
        c.failures -= b->failures;
        c.slow -= b->slow;
    }
    return c;
}

/* ---- successes counted by CPU (window.h) ------------------------------- */

/* The tally's tag is the bucket number the cells count in. */
static uint64_t cells_bucket(const resil__window_cells *s)
{
    return resil__tally_tag(resil__tally_epoch(&s->tally));
}

int resil__window_cells_init(resil__window_cells *s, resil_duration sampling)
{
    s->width = sampling / RESIL__WINDOW_BUCKETS >= 1 ? sampling / RESIL__WINDOW_BUCKETS : 1;
    atomic_init(&s->end, INT64_MIN);
    return resil__tally_init(&s->tally);
}

void resil__window_cells_free(resil__window_cells *s) { resil__tally_free(&s->tally); }


/* Where `bucket` ends; INT64_MIN for none. A bucket's start is at most
 * the instant that named it, so only its end can pass INT64_MAX. */
static int64_t bucket_end(const resil__window_cells *s, uint64_t bucket)
{
    if (bucket == RESIL__TALLY_NONE)
        return INT64_MIN;
    return resil_dur_add((resil_instant)bucket * s->width, s->width);
}

/* Close the tally and name `bucket` as the one the next adds count in.
 * What was taken belongs to the old epoch's bucket; with `keep` it goes
 * into the window there. No add passes the end check from the first store
 * until the new end, which follows the new stamps and epoch (window.h). */
static void next_epoch(resil__window_cells *s, resil__window *w, uint64_t bucket, bool keep)
{
    if (s->tally.cells.cell == NULL)
        return;
    uint64_t old = cells_bucket(s);
    atomic_store_explicit(&s->end, INT64_MIN, memory_order_relaxed);
    uint64_t taken = resil__tally_close(&s->tally, bucket);
    atomic_store_explicit(&s->end, bucket_end(s, bucket), memory_order_release);
    if (keep && taken > 0 && old != RESIL__TALLY_NONE)
        resil__window_add_many(w, (resil_instant)old * s->width, taken);
}

void resil__window_cells_fold(resil__window_cells *s, resil__window *w)
{
    next_epoch(s, w, cells_bucket(s), true);
}

void resil__window_cells_follow(resil__window_cells *s, resil__window *w)
{
    if (w->empty)
        return;
    uint64_t bucket = w->head >= 0 && (uint64_t)w->head < RESIL__TALLY_NONE
                          ? (uint64_t)w->head
                          : RESIL__TALLY_NONE;
    if (bucket != cells_bucket(s))
        next_epoch(s, w, bucket, true);
}

void resil__window_cells_stop(resil__window_cells *s, resil__window *w, bool keep)
{
    next_epoch(s, w, RESIL__TALLY_NONE, keep);
}

void resil__ring_init(resil__ring *r, uint8_t *slots, uint32_t size)
{
    memset(r, 0, sizeof *r);
    r->slot = slots;
    r->size = size;
}

void resil__ring_clear(resil__ring *r)
{
    r->next = 0;
    r->filled = 0;
    memset(&r->sum, 0, sizeof r->sum);
}

void resil__ring_add(resil__ring *r, bool failure, bool slow)
{
    uint8_t *s = &r->slot[r->next];
    if (r->filled == r->size) {
        r->sum.total--;
        r->sum.failures -= (*s & RESIL__RING_FAILURE) != 0;
        r->sum.slow -= (*s & RESIL__RING_SLOW) != 0;
    } else {
        r->filled++;
    }
    *s = (uint8_t)((failure ? RESIL__RING_FAILURE : 0u) | (slow ? RESIL__RING_SLOW : 0u));
    r->sum.total++;
    r->sum.failures += failure;
    r->sum.slow += slow;
    r->next = r->next + 1 < r->size ? r->next + 1 : 0;
}

bool resil__window_share_reached(uint64_t part, uint64_t total,
                                 uint32_t min_throughput, double ratio)
{
    if (total == 0 || total < min_throughput)
        return false;
    return (double)part / (double)total >= ratio;
}
