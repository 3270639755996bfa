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

#define SEQ_SHIFT 40
#define LOW40 ((UINT64_C(1) << SEQ_SHIFT) - 1)
#define NO_BUCKET LOW40 /* the epoch names no bucket: every add declines */

static uint64_t epoch_seq(uint64_t e) { return e >> SEQ_SHIFT; }
static uint64_t epoch_bucket(uint64_t e) { return e & LOW40; }

int resil__window_cells_init(resil__window_cells *s, resil_duration sampling)
{
    atomic_init(&s->epoch, NO_BUCKET);
    s->width = sampling / RESIL__WINDOW_BUCKETS >= 1 ? sampling / RESIL__WINDOW_BUCKETS : 1;
    return resil__cells_init(&s->cells);
}

void resil__window_cells_free(resil__window_cells *s) { resil__cells_free(&s->cells); }

bool resil__window_cells_add(resil__window_cells *s, uint64_t epoch, resil_instant now)
{
    if (s->cells.cell == NULL || epoch_bucket(epoch) == NO_BUCKET)
        return false;
    resil_instant start = (resil_instant)epoch_bucket(epoch) * s->width;
    if (now < start || now - start >= s->width)
        return false;
    _Atomic uint64_t *c = resil__my_cell(&s->cells);
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    for (;;) {
        if (epoch_seq(v) != epoch_seq(epoch) || (v & LOW40) == LOW40)
            return false;
        if (atomic_compare_exchange_weak_explicit(c, &v, v + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    }
}

/* Take every cell's count, stamp the next sequence, and name `bucket` as
 * the one the next adds count in. What was taken belongs to the old
 * epoch's bucket; with `keep` it goes into the window there. */
static void next_epoch(resil__window_cells *s, resil__window *w, uint64_t bucket, bool keep)
{
    if (s->cells.cell == NULL)
        return;
    uint64_t e = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    uint64_t seq = (epoch_seq(e) + 1) << SEQ_SHIFT;
    uint64_t taken = 0;
    for (uint32_t i = 0; i <= s->cells.mask; i++)
        taken += atomic_exchange_explicit(&s->cells.cell[i].v, seq, memory_order_acq_rel) &
                 LOW40;
    if (keep && taken > 0 && epoch_bucket(e) != NO_BUCKET)
        resil__window_add_many(w, (resil_instant)epoch_bucket(e) * s->width, taken);
    atomic_store_explicit(&s->epoch, seq | bucket, memory_order_release);
}

void resil__window_cells_fold(resil__window_cells *s, resil__window *w)
{
    uint64_t e = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    next_epoch(s, w, epoch_bucket(e), true);
}

void resil__window_cells_follow(resil__window_cells *s, resil__window *w)
{
    if (w->empty)
        return;
    uint64_t e = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    uint64_t bucket = w->head >= 0 && (uint64_t)w->head < NO_BUCKET ? (uint64_t)w->head
                                                                    : NO_BUCKET;
    if (bucket != epoch_bucket(e))
        next_epoch(s, w, bucket, true);
}

void resil__window_cells_stop(resil__window_cells *s, resil__window *w, bool keep)
{
    next_epoch(s, w, NO_BUCKET, keep);
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
