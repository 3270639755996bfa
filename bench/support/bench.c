/*
 * bench.c — calibration, best-of-N timing and allocation counting for the
 * benchmarks (see bench.h for why it is shaped this way).
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static atomic_uint_fast64_t allocs;

void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

uint64_t bench_alloc_count(void)
{
    return atomic_load_explicit(&allocs, memory_order_relaxed);
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

void bench_consume(uint64_t v) { sink += v; }

#define TARGET_NS 200000000u
#define RUNS 5

bench_result bench_run(const char *name, bench_fn fn, void *ud)
{
    uint64_t iters = 1000;
    for (;;) {
        uint64_t t0 = bench_now_ns();
        fn(ud, iters);
        uint64_t took = bench_now_ns() - t0;
        if (took >= TARGET_NS / 4 || iters >= (UINT64_C(1) << 40))
            break;
        iters *= took ? (TARGET_NS / 4 / took) + 2 : 100;
    }
    double best = 0;
    uint64_t alloc_calls = 0;
    for (int r = 0; r < RUNS; r++) {
        uint64_t a0 = bench_alloc_count();
        uint64_t t0 = bench_now_ns();
        fn(ud, iters);
        uint64_t took = bench_now_ns() - t0;
        uint64_t a1 = bench_alloc_count();
        double ns = (double)took / (double)iters;
        if (r == 0 || ns < best)
            best = ns;
        alloc_calls += a1 - a0;
    }
    bench_result res = {name, best, (double)alloc_calls / ((double)iters * RUNS), iters};
    return res;
}

void bench_report(bench_result r, bench_result baseline, const char *extra)
{
    printf("bench %s ns_per_op=%.2f allocs_per_op=%.4f baseline=%s baseline_ns_per_op=%.2f%s%s\n",
           r.name, r.ns_per_op, r.allocs_per_op, baseline.name, baseline.ns_per_op,
           extra ? " " : "", extra ? extra : "");
    fflush(stdout);
}

void bench_atomic_increment(void *ud, uint64_t iters)
{
    static _Atomic uint64_t counter;
    (void)ud;
    for (uint64_t i = 0; i < iters; i++)
        atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    bench_consume(atomic_load_explicit(&counter, memory_order_relaxed));
}
