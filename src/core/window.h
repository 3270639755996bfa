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

#include "resil/time.h"

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
