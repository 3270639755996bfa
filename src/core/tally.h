/*
 * tally.h — counts split by CPU that close by epoch, for success paths
 * that must count without writing a line every thread shares, into a
 * structure (a window's bucket, a breaker's generation) that a locked path
 * moves on from time to time.
 *
 * The epoch word names a tag (what the counts currently belong to, e.g. a
 * bucket's number) and a sequence number; each CPU's cell holds the
 * sequence it counts for and a count. A count is one compare-and-swap on
 * the running CPU's own cell, and succeeds only while the cell is in the
 * epoch's sequence. Closing the epoch (under the owner's lock) stamps
 * every cell with the next sequence and hands back what they held, so a
 * count that raced the close either was taken with it or fails its CAS
 * and goes the locked way: none is lost and none counts twice.
 */
#ifndef RESIL_TALLY_H
#define RESIL_TALLY_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"

#define RESIL__TALLY_SEQ_SHIFT 40
#define RESIL__TALLY_LOW ((UINT64_C(1) << RESIL__TALLY_SEQ_SHIFT) - 1)
/* The tag that names nothing: every count takes the locked path. */
#define RESIL__TALLY_NONE RESIL__TALLY_LOW

typedef struct resil__tally {
    _Atomic uint64_t epoch; /* seq << 40 | tag */
    resil__cells cells;     /* seq << 40 | count */
} resil__tally;

int resil__tally_init(resil__tally *t); /* tag NONE; RESIL_ENOMEM */
void resil__tally_free(resil__tally *t);

static inline uint64_t resil__tally_epoch(const resil__tally *t)
{
    return atomic_load_explicit(&((resil__tally *)t)->epoch, memory_order_acquire);
}

static inline uint64_t resil__tally_tag(uint64_t epoch) { return epoch & RESIL__TALLY_LOW; }

/* Count one in `epoch` (as read by the caller, who checked its tag): true
 * when counted, false when the epoch has moved on (or the cell is full)
 * and the caller must take its locked path. */
static inline bool resil__tally_add(resil__tally *t, uint64_t epoch)
{
    _Atomic uint64_t *cell = resil__my_cell(&t->cells);
    uint64_t empty = epoch & ~RESIL__TALLY_LOW; /* the sequence, no count */
    uint64_t v = atomic_load_explicit(cell, memory_order_relaxed);
    for (;;) {
        /* In the sequence, and below a full count: one compare. */
        if (v - empty >= RESIL__TALLY_LOW)
            return false;
        if (atomic_compare_exchange_weak_explicit(cell, &v, v + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    }
}

/* Under the owner's lock: take every cell's count (they belong to the
 * tag being closed) and publish `tag` in the next sequence. */
uint64_t resil__tally_close(resil__tally *t, uint64_t tag);

#endif
