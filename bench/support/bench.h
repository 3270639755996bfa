/*
 * bench.h — the benchmark harness. Speed is measured here, never in tests.
 *
 * A benchmark is a function running `iters` operations. The harness
 * calibrates the count until one run takes about 200 ms, keeps the best of
 * several runs (the least disturbed), and counts allocations during the run
 * by interposing malloc/calloc/realloc (glibc), so "0 allocations per
 * operation" is a measured figure, not a claim. Every result line has one
 * format, with its baseline measured in the same process:
 *   bench NAME ns_per_op=X allocs_per_op=Y baseline=NAME baseline_ns_per_op=Z
 */
#ifndef RESIL_BENCH_H
#define RESIL_BENCH_H

#include <stdint.h>

typedef void (*bench_fn)(void *ud, uint64_t iters);

typedef struct bench_result {
    const char *name;
    double ns_per_op;
    double allocs_per_op;
    uint64_t iters;
} bench_result;

uint64_t bench_now_ns(void);
/* Allocation calls made by this process so far (all threads). */
uint64_t bench_alloc_count(void);
/* Calibrate, run best-of-N, count allocations. */
bench_result bench_run(const char *name, bench_fn fn, void *ud);
/* Print the standard line; `extra` (may be NULL) is appended verbatim. */
void bench_report(bench_result r, bench_result baseline, const char *extra);
/* Keep a value alive so the optimiser cannot delete the work. */
void bench_consume(uint64_t v);
/* The same inside a loop, at no cost: the value must merely exist in a
 * register. */
#define BENCH_KEEP(v) __asm__ __volatile__("" : : "r"(v))

/* The baseline of every benchmark of shared state: one uncontended relaxed
 * atomic increment per operation (ud is unused). */
void bench_atomic_increment(void *ud, uint64_t iters);

#endif
