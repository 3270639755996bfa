/*
 * tally.c — see tally.h. The cells are percpu.c's; this adds only the
 * sequence that lets a locked path close them.
 */
#include "tally.h"

static uint64_t seq_of(uint64_t v) { return v >> RESIL__TALLY_SEQ_SHIFT; }

int resil__tally_init(resil__tally *t)
{
    atomic_init(&t->epoch, RESIL__TALLY_NONE);
    return resil__cells_init(&t->cells);
}

void resil__tally_free(resil__tally *t) { resil__cells_free(&t->cells); }

uint64_t resil__tally_close(resil__tally *t, uint64_t tag)
{
    uint64_t e = atomic_load_explicit(&t->epoch, memory_order_relaxed);
    uint64_t seq = (seq_of(e) + 1) << RESIL__TALLY_SEQ_SHIFT;
    uint64_t taken = 0;
    for (uint32_t i = 0; i <= t->cells.mask; i++)
        taken += atomic_exchange_explicit(&t->cells.cell[i].v, seq, memory_order_acq_rel) &
                 RESIL__TALLY_LOW;
    atomic_store_explicit(&t->epoch, seq | (tag & RESIL__TALLY_LOW), memory_order_release);
    return taken;
}
