/*
 * window.h — the rolling time window, as pure arithmetic.
 *
 * The window counts calls, failures and slow calls over the last
 * `sampling` of time in RESIL__WINDOW_BUCKETS buckets. It reads no clock and
 * takes no lock: the instant is passed in, and the owner serialises access.
 * That keeps the aging rule testable with plain numbers and lets one
 * implementation serve the breaker, its diagnostics, the ratio retry budget
 * (requests and retries over its TTL) and their tests.
 *
 * Buckets are addressed by arithmetic on the instant (bucket number =
 * floor(now / width)), so advancing costs nothing until a bucket boundary is
 * crossed, and running sums are kept so that reading the totals never walks
 * the buckets. When the newest bucket moves on, the buckets that fall out
 * are subtracted from the sums: the window covers between 9/10 and 10/10 of
 * `sampling`, the same granularity as Polly's rolling health metrics.
 */
#ifndef RESIL_WINDOW_H
#define RESIL_WINDOW_H

#include "internal.h"
#include "resil/time.h"
#include "tally.h"

#define RESIL__WINDOW_BUCKETS 10

typedef struct resil__window_counts {
    uint64_t total;    /* calls recorded (successes and failures) */
    uint64_t failures;
    uint64_t slow;     /* calls slower than the slow-call threshold */
} resil__window_counts;

typedef struct resil__window {
    resil_duration width; /* sampling / RESIL__WINDOW_BUCKETS, >= 1 ns */
    int64_t head;         /* bucket number of the newest bucket */
    bool empty;           /* nothing recorded since init or clear */
    resil__window_counts sum;
    resil__window_counts bucket[RESIL__WINDOW_BUCKETS];
} resil__window;

/* An empty window over `sampling` (> 0). */
void resil__window_init(resil__window *w, resil_duration sampling);
/* Forget everything (the breaker closed, or was reset). */
void resil__window_clear(resil__window *w);
/* Record one call that ended at `now`. An instant older than the newest
 * bucket (a caller that read the clock just before another) counts in the
 * newest bucket. */
void resil__window_add(resil__window *w, resil_instant now, bool failure,
                       bool slow);
/* Record `n` successful calls that ended at `now`, as n calls of
 * resil__window_add would. */
void resil__window_add_many(resil__window *w, resil_instant now, uint64_t n);
/* The counts the window holds as of `now`, without changing it. */
resil__window_counts resil__window_totals(const resil__window *w,
                                          resil_instant now);
/*
 * Successes counted by CPU, for a window whose owner locks only for the
 * rest (a breaker's failures, a budget's retries) and for a new bucket.
 *
 * They are a tally (tally.h) whose tag is the bucket number. A success is
 * counted in the cell of the CPU it runs on, with one compare-and-swap on
 * a line no other CPU writes. Each cell word is
 *
 *     epoch sequence (24 bits) | successes (40 bits)
 *
 * and the epoch word, read-mostly, says where those successes belong:
 *
 *     epoch sequence (24 bits) | bucket number (40 bits)
 *
 * A success whose instant lies before the end of that bucket adds one to
 * its cell if the cell still carries that sequence; anything else (an
 * instant past the bucket, a full cell, a sequence moved on, no bucket
 * named) declines, and the owner takes its lock and adds the call to the
 * window itself. An instant before the bucket's start counts in it too:
 * the named bucket is always the window's newest, where the window puts
 * such an instant (resil__window_add). So that the check is one compare,
 * the end of the named bucket is kept beside the epoch (INT64_MIN while
 * none is named); it is written before the epoch and the cells' stamps
 * after the owner's change, and read after the epoch, so an end newer than
 * the epoch read comes with cells that refuse that epoch's sequence.
 * Under the owner's lock
 * every change of the epoch first takes every cell's count with an
 * exchange that also stamps the new sequence: a success is either in the
 * bucket its instant named or, when the owner restarted under it (a
 * breaker's new generation), dropped with what it belonged to — the CAS
 * that could have added it later fails on the new stamp. Cells are folded
 * into the window before the window is read or moved, so every success
 * lands in its own bucket and totals read under the lock are exact.
 */
typedef struct resil__window_cells {
    resil__tally tally;   /* tag: the bucket */
    _Atomic int64_t end;  /* where the tag's bucket ends; INT64_MIN: none */
    resil_duration width; /* the window's bucket width, immutable */
} resil__window_cells;

/* Cells for a window of `sampling` (as resil__window_init); RESIL_ENOMEM.
 * Only initialised cells may be added to. */
int resil__window_cells_init(resil__window_cells *s, resil_duration sampling);
void resil__window_cells_free(resil__window_cells *s);
/* The epoch an add counts in. Read it before checking whatever of the
 * owner's state must not have changed (a breaker's generation). */
static inline uint64_t resil__window_cells_epoch(const resil__window_cells *s)
{
    return resil__tally_epoch(&s->tally);
}
/* One success at `now` in `epoch`'s bucket, without a lock; false: the
 * owner must add it under its lock. Inline: it is a closed breaker's
 * success path. */
static inline bool resil__window_cells_add(resil__window_cells *s, uint64_t epoch,
                                           resil_instant now)
{
    if (now >= atomic_load_explicit(&s->end, memory_order_acquire))
        return false;
    return resil__tally_add(&s->tally, epoch);
}
/* Under the owner's lock: the cells' successes into `w`, before `w` is read
 * or moved. */
void resil__window_cells_fold(resil__window_cells *s, resil__window *w);
/* Under the owner's lock, after `w` took a call: successes may now count
 * without the lock in `w`'s newest bucket. */
void resil__window_cells_follow(resil__window_cells *s, resil__window *w);
/* Under the owner's lock: no success counts without the lock until the
 * next follow; those counted so far go into `w` (`keep`) or are dropped. */
void resil__window_cells_stop(resil__window_cells *s, resil__window *w, bool keep);

/*
 * The count window: the outcomes of the last `size` calls in a ring, one
 * byte each, with running sums. Adding a call overwrites the oldest once
 * the ring is full and subtracts what it held: O(1), no allocation (the
 * owner hands in the slots). Clearing forgets the calls in O(1): slots past
 * `filled` are never read.
 */
#define RESIL__RING_FAILURE 1u
#define RESIL__RING_SLOW 2u

typedef struct resil__ring {
    uint8_t *slot;    /* size outcomes, owned by the caller */
    uint32_t size;    /* >= 1 */
    uint32_t next;    /* the slot the next call goes to */
    uint32_t filled;  /* calls held, up to size */
    resil__window_counts sum;
} resil__ring;

void resil__ring_init(resil__ring *r, uint8_t *slots, uint32_t size);
void resil__ring_clear(resil__ring *r);
void resil__ring_add(resil__ring *r, bool failure, bool slow);

/* Does `part` out of `total` reach `ratio`, with at least `min_throughput`
 * calls seen? Division rather than multiplication, so that 3 of 10 reaches
 * a ratio of 0.3 exactly. */
bool resil__window_share_reached(uint64_t part, uint64_t total,
                                 uint32_t min_throughput, double ratio);

#endif
