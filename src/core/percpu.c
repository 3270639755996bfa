/*
 * percpu.c — cells split by CPU, for success paths that must not write a
 * cache line every thread shares (tally.c counts in them, for a throttle's
 * successes and a window's).
 *
 * A counter every call bumps is, on a shared object, a line that bounces
 * between the cores running those calls: on two cores it costs a few
 * nanoseconds, on sixty-four it serialises them. So such a counter is a
 * set of cells, one cache line each, as many as the system has CPUs
 * (rounded up to a power of two, at most 64), and a call bumps the cell of
 * the CPU it runs on; whoever reads them takes every cell. The CPU comes from
 * the thread's rseq area, read in place where glibc registers one
 * (internal.h), else from sched_getcpu(); where that is missing too, each
 * thread takes a cell round-robin once.
 * Two threads on one cell are still correct (the cells are atomic), only
 * slower.
 *
 * Some stripes are the thread's rather than the CPU's (a bulkhead's parked
 * permits, the adaptive limiter's samples: one thread alone must find its
 * own stripe again whatever CPU it moved to), so threads get numbers here
 * too, once each, in order.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static uint32_t cell_count(void)
{
    static _Atomic uint32_t counted; /* 0 = not asked yet */
    uint32_t n = atomic_load_explicit(&counted, memory_order_relaxed);
    if (n != 0)
        return n;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    n = 1;
    while ((long)n < cpus && n < RESIL__CELLS_MAX)
        n <<= 1;
    atomic_store_explicit(&counted, n, memory_order_relaxed);
    return n;
}

int resil__cells_init(resil__cells *c)
{
    uint32_t n = cell_count();
    c->cell = resil__line_alloc(n * sizeof *c->cell);
    if (c->cell == NULL)
        return RESIL_ENOMEM;
    c->mask = n - 1;
    return 0;
}

void *resil__line_alloc(size_t size)
{
    size_t lines = (size + RESIL__CACHE_LINE - 1) / RESIL__CACHE_LINE;
    void *p = aligned_alloc(RESIL__CACHE_LINE, lines * RESIL__CACHE_LINE);
    if (p != NULL)
        memset(p, 0, lines * RESIL__CACHE_LINE);
    return p;
}

void resil__cells_free(resil__cells *c)
{
    free(c->cell);
    c->cell = NULL;
}

uint32_t resil__cpu_slot_asked(void)
{
#ifdef __GLIBC__
    int cpu = sched_getcpu();
    if (cpu >= 0)
        return (uint32_t)cpu;
#endif
    static _Atomic uint32_t next;
    static _Thread_local uint32_t mine = UINT32_MAX;
    if (mine == UINT32_MAX)
        mine = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
    return mine;
}

_Thread_local uint32_t resil__thread_no RESIL__INITIAL_EXEC;

uint32_t resil__thread_stripe_count(void)
{
    uint32_t n = cell_count();
    return n < RESIL__THREAD_STRIPES_MIN ? RESIL__THREAD_STRIPES_MIN : n;
}

uint32_t resil__thread_number_first(void)
{
    static _Atomic uint32_t next;
    uint32_t n = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % (UINT32_MAX - 1) + 1;
    resil__thread_no = n;
    return n;
}
