/*
 * bench.h — the benchmark harness. Speed is measured here, never in tests.
 *
 * A benchmark is a function running `iters` operations. The harness
 * calibrates the count until one run takes about 50 ms, then times
 * BENCH_RUNS runs and reports their median with the spread (min and max):
 * on a shared machine the best run flatters and a single run misleads, and
 * the spread says how far the weather moved the figure. It counts
 * allocations during the runs by interposing malloc, calloc, realloc and
 * the aligned family with exported symbols, so that shared libraries
 * (libcurl) are counted too and "0 allocations per operation" is a measured
 * figure, not a claim. Every result line has one format, with its baseline
 * measured in the same process:
 *   bench NAME ns_per_op=X allocs_per_op=Y baseline=NAME baseline_ns_per_op=Z
 *         min_ns=A max_ns=B [key=value ...]
 *
 * Two-thread figures run one half of the calls on each of two threads and
 * keep only samples in which both threads really ran at once: each thread's
 * CPU time against the sample's wall time. On a machine shared with other
 * work two threads are often time-sliced onto one core, and such a sample
 * reads as a collapse of throughput that no lock caused. The two threads
 * are pinned to two different CPUs (and calibrated on one thread), so the
 * scheduler cannot pack two threads that wake each other onto one core.
 * Work that blocks on a lock never keeps both threads on a CPU, so for it a
 * sample also counts when both threads ran side by side from start to end
 * and together spent at most a quarter of it runnable without a CPU (the
 * scheduler's run-queue time, /proc/thread-self/schedstat): sleeping on the
 * lock is the work's own cost, waiting for a core is the machine's. Its
 * concurrency (CPU share) is reported as measured, below 1.75.
 */
#ifndef RESIL_BENCH_H
#define RESIL_BENCH_H

#include <stdint.h>

#define BENCH_RUNS 7

typedef void (*bench_fn)(void *ud, uint64_t iters);

typedef struct bench_result {
    const char *name;
    double ns_per_op;     /* median over the runs (or the concurrent samples) */
    double min_ns, max_ns; /* the spread of the same runs */
    double allocs_per_op;
    uint64_t iters;
    /* two threads only: samples kept (both threads ran at once) and taken */
    int kept, taken;
    double concurrency;   /* median (CPU of both threads) / wall of the kept */
} bench_result;

uint64_t bench_now_ns(void);
/* Allocation calls made by this process so far (all threads, every library). */
uint64_t bench_alloc_count(void);
/* Calibrate, time BENCH_RUNS runs, report the median; count allocations. */
bench_result bench_run(const char *name, bench_fn fn, void *ud);
/* The same with a run of about `run_ns` and `runs` runs (at most 32), for
 * operations that take milliseconds. */
bench_result bench_run_for(const char *name, bench_fn fn, void *ud, uint64_t run_ns, int runs);
/* `fn(ud[0], iters/2)` and `fn(ud[1], iters/2)` on two threads at once (the
 * same ud twice for shared state). ns_per_op is wall time per call of the
 * pair, directly comparable with a single thread's figure; only samples in
 * which both threads ran concurrently count (kept of taken). */
bench_result bench_run_2t(const char *name, bench_fn fn, void *ud0, void *ud1);
/* Print the standard line; `extra` (may be NULL) is appended verbatim. */
void bench_report(bench_result r, bench_result baseline, const char *extra);
/* bench_report for a two-thread result against the single-thread `single`:
 * adds threads=2, throughput_vs_single and the concurrency kept. */
void bench_report_2t(bench_result r, bench_result single, bench_result baseline);
/* Keep a value alive so the optimiser cannot delete the work. */
void bench_consume(uint64_t v);
/* The same inside a loop, at no cost: the value must merely exist in a
 * register. */
#define BENCH_KEEP(v) __asm__ __volatile__("" : : "r"(v))

/* The baseline of every benchmark of shared state: one uncontended relaxed
 * atomic increment per operation (ud is unused). */
void bench_atomic_increment(void *ud, uint64_t iters);

#endif
