/*
 * bench.c — calibration, median timing, concurrent two-thread sampling and
 * allocation counting for the benchmarks (see bench.h for why it is shaped
 * this way).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* CPU affinity */
#endif
#include "bench.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- allocation counting ------------------------------------------------ */

/* Exported (the project builds with hidden visibility), so that the dynamic
 * linker binds libcurl's and every other shared library's calls here too. */
#define EXPORTED __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_uint_fast64_t allocs;

static void counted(void) { atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed); }

EXPORTED void *malloc(size_t n)
{
    counted();
    return __libc_malloc(n);
}

EXPORTED void *calloc(size_t a, size_t b)
{
    counted();
    return __libc_calloc(a, b);
}

EXPORTED void *realloc(void *p, size_t n)
{
    counted();
    return __libc_realloc(p, n);
}

EXPORTED void *memalign(size_t align, size_t n)
{
    counted();
    return __libc_memalign(align, n);
}

EXPORTED void *aligned_alloc(size_t align, size_t n)
{
    counted();
    return __libc_memalign(align, n);
}

EXPORTED int posix_memalign(void **out, size_t align, size_t n)
{
    counted();
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return 22; /* EINVAL */
    void *p = __libc_memalign(align, n);
    if (p == NULL)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}

uint64_t bench_alloc_count(void)
{
    return atomic_load_explicit(&allocs, memory_order_relaxed);
}

/* ---- time --------------------------------------------------------------- */

static uint64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_now_ns(void) { return read_ns(CLOCK_MONOTONIC); }

static volatile uint64_t sink;

void bench_consume(uint64_t v) { sink += v; }

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define RUN_NS 50000000u
#define MAX_RUNS 32

/* The iteration count for one run of about `ns`. */
static uint64_t calibrate(bench_fn fn, void *ud, uint64_t ns)
{
    uint64_t iters = 1;
    for (;;) {
        uint64_t t0 = bench_now_ns();
        fn(ud, iters);
        uint64_t took = bench_now_ns() - t0;
        if (took >= ns / 2 || iters >= (UINT64_C(1) << 40))
            return took >= ns / 2 && took > 0 ? iters * ns / took : iters;
        iters *= took ? (ns / 2 / took) + 2 : 100;
    }
}

bench_result bench_run_for(const char *name, bench_fn fn, void *ud, uint64_t run_ns, int runs)
{
    uint64_t iters = calibrate(fn, ud, run_ns);
    if (iters < 1)
        iters = 1;
    if (runs > MAX_RUNS)
        runs = MAX_RUNS;
    double ns[MAX_RUNS];
    uint64_t alloc_calls = 0;
    for (int r = 0; r < runs; r++) {
        uint64_t a0 = bench_alloc_count();
        uint64_t t0 = bench_now_ns();
        fn(ud, iters);
        uint64_t took = bench_now_ns() - t0;
        alloc_calls += bench_alloc_count() - a0;
        ns[r] = (double)took / (double)iters;
    }
    bench_result res = {.name = name, .iters = iters,
                        .allocs_per_op = (double)alloc_calls / ((double)iters * runs)};
    res.ns_per_op = median(ns, runs);
    res.min_ns = ns[0];
    res.max_ns = ns[runs - 1];
    return res;
}

bench_result bench_run(const char *name, bench_fn fn, void *ud)
{
    return bench_run_for(name, fn, ud, RUN_NS, BENCH_RUNS);
}

/* ---- two threads -------------------------------------------------------- */

typedef struct lane {
    bench_fn fn;
    void *ud;
    uint64_t iters;
    pthread_barrier_t *go;
    uint64_t start, end, cpu; /* wall instants and this thread's CPU time */
    int64_t queued;           /* time runnable but not running; -1 = unknown */
    int cpu_id;               /* the CPU it is pinned to; -1 = not pinned */
    pthread_t thread;
} lane;

/* The first two CPUs this process may run on, or -1 where it has fewer.
 * Each lane is pinned to one of them: two threads that wake each other
 * (through a lock) are otherwise often packed onto one core by the
 * scheduler, and then they never run at once. */
static void two_cpus(int out[2])
{
    cpu_set_t set;
    out[0] = out[1] = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &set))
            out[found++] = c;
    if (out[1] < 0)
        out[0] = -1;
}

static void pin(int cpu_id)
{
    if (cpu_id < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu_id, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The calling thread's time spent runnable on a run queue without a CPU
 * (the second field of the scheduler's statistics), or -1 where the
 * kernel keeps none. */
static int64_t runqueue_ns(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f == NULL)
        return -1;
    unsigned long long run, wait;
    int n = fscanf(f, "%llu %llu", &run, &wait);
    fclose(f);
    return n == 2 ? (int64_t)wait : -1;
}

static void *run_lane(void *arg)
{
    lane *l = arg;
    pin(l->cpu_id);
    pthread_barrier_wait(l->go);
    int64_t q0 = runqueue_ns();
    uint64_t c0 = read_ns(CLOCK_THREAD_CPUTIME_ID);
    l->start = bench_now_ns();
    l->fn(l->ud, l->iters);
    l->end = bench_now_ns();
    l->cpu = read_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    int64_t q1 = runqueue_ns();
    l->queued = q0 >= 0 && q1 >= q0 ? q1 - q0 : -1;
    return NULL;
}

#define SAMPLE_NS 20000000u
#define MAX_SAMPLES 60
#define CONCURRENT 1.75

/* Did both threads run at once? Either both were on a CPU for nearly the
 * whole sample, or (for work that blocks, on a lock) both ran side by side
 * from start to end and together spent at most what the first rule leaves
 * (a quarter of it) runnable without a CPU: a thread asleep on a lock is
 * not time-sliced, but one waiting for a core is. */
static bool concurrent(const lane l[2], double wall, double cpu_share)
{
    if (cpu_share >= CONCURRENT)
        return true;
    if (l[0].queued < 0 || l[1].queued < 0 || wall <= 0)
        return false;
    uint64_t late_start = l[0].start > l[1].start ? l[0].start : l[1].start;
    uint64_t early_end = l[0].end < l[1].end ? l[0].end : l[1].end;
    if (early_end <= late_start || (double)(early_end - late_start) < wall * CONCURRENT / 2)
        return false;
    return (double)(l[0].queued + l[1].queued) <= wall * (2 - CONCURRENT);
}

/* One sample: wall from the first start to the last end, the share of it
 * both threads spent on a CPU (2.0 = truly side by side), and whether
 * they ran at once. */
static double sample(bench_fn fn, void *ud0, void *ud1, uint64_t iters, double *concurrency,
                     bool *at_once)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    int cpus[2];
    two_cpus(cpus);
    cpu_set_t mine;
    bool restore = sched_getaffinity(0, sizeof mine, &mine) == 0;
    lane l[2] = {{fn, ud0, iters / 2, &go, 0, 0, 0, 0, cpus[0], 0},
                 {fn, ud1, iters - iters / 2, &go, 0, 0, 0, 0, cpus[1], 0}};
    pthread_create(&l[1].thread, NULL, run_lane, &l[1]);
    run_lane(&l[0]);
    pthread_join(l[1].thread, NULL);
    pthread_barrier_destroy(&go);
    if (restore)
        pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    uint64_t start = l[0].start < l[1].start ? l[0].start : l[1].start;
    uint64_t end = l[0].end > l[1].end ? l[0].end : l[1].end;
    double wall = (double)(end - start);
    *concurrency = wall > 0 ? (double)(l[0].cpu + l[1].cpu) / wall : 0;
    *at_once = concurrent(l, wall, *concurrency);
    return wall / (double)iters;
}

bench_result bench_run_2t(const char *name, bench_fn fn, void *ud0, void *ud1)
{
    /* Calibrated on one thread: a two-thread calibration run is mostly the
     * threads' start on a loaded machine, which left a sample a few calls
     * long. */
    uint64_t iters = calibrate(fn, ud0, SAMPLE_NS);
    if (iters < 2)
        iters = 2;
    double kept[MAX_SAMPLES], all[MAX_SAMPLES], conc[MAX_SAMPLES];
    int k = 0, n = 0;
    uint64_t a0 = bench_alloc_count();
    while (n < MAX_SAMPLES && k < BENCH_RUNS) {
        double c;
        bool at_once;
        double ns = sample(fn, ud0, ud1, iters, &c, &at_once);
        all[n++] = ns;
        if (at_once) {
            conc[k] = c;
            kept[k++] = ns;
        }
    }
    bench_result res = {.name = name, .iters = iters, .kept = k, .taken = n,
                        .allocs_per_op = (double)(bench_alloc_count() - a0) /
                                         ((double)iters * n)};
    double *v = k > 0 ? kept : all;
    int m = k > 0 ? k : n;
    res.ns_per_op = median(v, m);
    res.min_ns = v[0];
    res.max_ns = v[m - 1];
    res.concurrency = k > 0 ? median(conc, k) : 0;
    return res;
}

/* ---- reporting ---------------------------------------------------------- */

void bench_report(bench_result r, bench_result baseline, const char *extra)
{
    char spread[64] = "";
    if (r.min_ns != 0 || r.max_ns != 0) /* a figure with no runs to spread has none */
        snprintf(spread, sizeof spread, " min_ns=%.2f max_ns=%.2f", r.min_ns, r.max_ns);
    printf("bench %s ns_per_op=%.2f allocs_per_op=%.4f baseline=%s baseline_ns_per_op=%.2f%s%s%s\n",
           r.name, r.ns_per_op, r.allocs_per_op, baseline.name, baseline.ns_per_op, spread,
           extra ? " " : "", extra ? extra : "");
    fflush(stdout);
}

void bench_report_2t(bench_result r, bench_result single, bench_result baseline)
{
    char extra[160];
    if (r.kept == 0)
        snprintf(extra, sizeof extra,
                 "threads=2 concurrent_samples=0/%d throughput_vs_single=unknown "
                 "(the two threads never ran at once)",
                 r.taken);
    else
        snprintf(extra, sizeof extra,
                 "threads=2 concurrent_samples=%d/%d concurrency=%.2f throughput_vs_single=%.2f",
                 r.kept, r.taken, r.concurrency, single.ns_per_op / r.ns_per_op);
    bench_report(r, baseline, extra);
}

void bench_atomic_increment(void *ud, uint64_t iters)
{
    static _Atomic uint64_t counter;
    (void)ud;
    for (uint64_t i = 0; i < iters; i++)
        atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    bench_consume(atomic_load_explicit(&counter, memory_order_relaxed));
}
