/*
 * bench_clock.c — what the time and randomness every executor step leans on
 * costs: reading the system clock (beside the kernel's clock_gettime and
 * the coarse clock), checking, making and linking a cancel
 * token, drawing jitter, and parsing a duration. Each is measured against
 * the cheapest thing of its kind in the same run (an empty loop iteration,
 * an atomic increment, an inline xorshift, strtoll) so the figures travel
 * between machines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "resil.h"

/* Keeps `v` in a register the optimiser must believe is used. */
static void empty_loop(void *ud, uint64_t iters)
{
    (void)ud;
    for (uint64_t i = 0; i < iters; i++)
        BENCH_KEEP(i);
}

static void clock_now(void *ud, uint64_t iters)
{
    resil_clock *c = ud;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++)
        sum += (uint64_t)resil_clock_now(c);
    bench_consume(sum);
}

/* The kernel's own reading, what the system clock read before it took
 * CLOCK_MONOTONIC's time from the CPU's counter (docs/performance.md). */
static void clock_gettime_monotonic(void *ud, uint64_t iters)
{
    clockid_t id = *(clockid_t *)ud;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        struct timespec ts;
        clock_gettime(id, &ts);
        sum += (uint64_t)ts.tv_nsec;
    }
    bench_consume(sum);
}

static void cancel_check(void *ud, uint64_t iters)
{
    resil_cancel *c = ud;
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        n += resil_cancelled(c);
        BENCH_KEEP(n);
    }
    bench_consume(n);
}

/* The pipeline makes a token per timeout per execution, the attempt's a
 * child of the total's: what making and dropping one costs. */
static void cancel_root_init_destroy(void *ud, uint64_t iters)
{
    (void)ud;
    for (uint64_t i = 0; i < iters; i++) {
        resil_cancel tok;
        resil_cancel_init(&tok, NULL);
        BENCH_KEEP(&tok);
        resil_cancel_destroy(&tok);
    }
}

static void cancel_child_init_destroy(void *ud, uint64_t iters)
{
    resil_cancel *parent = ud;
    for (uint64_t i = 0; i < iters; i++) {
        resil_cancel tok;
        resil_cancel_init(&tok, parent);
        BENCH_KEEP(&tok);
        resil_cancel_destroy(&tok);
    }
}

static void xorshift_inline(void *ud, uint64_t iters)
{
    uint64_t x = *(uint64_t *)ud;
    double sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum += (double)(x >> 11) * 0x1.0p-53;
    }
    *(uint64_t *)ud = x;
    bench_consume((uint64_t)sum);
}

static void rng_draw(void *ud, uint64_t iters)
{
    resil_rng *r = ud;
    double sum = 0;
    for (uint64_t i = 0; i < iters; i++)
        sum += resil_rng_next(r);
    bench_consume((uint64_t)sum);
}

static void strtoll_parse(void *ud, uint64_t iters)
{
    const char *text = ud;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        BENCH_KEEP(text);
        sum += (uint64_t)strtoll(text, NULL, 10);
    }
    bench_consume(sum);
}

static void duration_parse(void *ud, uint64_t iters)
{
    const char *text = ud;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_duration d = 0;
        BENCH_KEEP(text);
        resil_duration_parse(text, 8, &d, NULL);
        sum += (uint64_t)d;
    }
    bench_consume(sum);
}

int main(void)
{
    bench_result empty = bench_run("empty_loop", empty_loop, NULL);
    clockid_t mono = CLOCK_MONOTONIC;
    bench_result kernel = bench_run("clock_gettime_monotonic", clock_gettime_monotonic, &mono);
    bench_report(kernel, empty, NULL);
    bench_report(bench_run("clock_system_now", clock_now, resil_clock_system()), kernel, NULL);
    bench_report(bench_run("clock_coarse_now", clock_now, resil_clock_coarse()), kernel, NULL);

    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    bench_report(bench_run("clock_fake_now", clock_now, resil_fake_clock_clock(fc)), empty, NULL);
    resil_fake_clock_free(fc);

    resil_cancel tok;
    resil_cancel_init(&tok, NULL);
    bench_report(bench_run("cancel_check", cancel_check, &tok), empty, NULL);
    bench_result atomic = bench_run("atomic_increment", bench_atomic_increment, NULL);
    bench_result root = bench_run("cancel_root_init_destroy", cancel_root_init_destroy, NULL);
    bench_report(root, atomic, NULL);
    bench_report(bench_run("cancel_child_init_destroy", cancel_child_init_destroy, &tok), root,
                 NULL);
    resil_cancel_destroy(&tok);

    uint64_t xs = 88172645463325252u;
    bench_result xorshift = bench_run("xorshift_inline", xorshift_inline, &xs);
    resil_rng_seeded seeded;
    resil_rng_seeded_init(&seeded, 42);
    bench_report(bench_run("rng_seeded_draw", rng_draw, &seeded.base), xorshift, NULL);
    bench_report(bench_run("rng_thread_draw", rng_draw, resil_rng_thread()), xorshift, NULL);
    resil_rng_mulberry32 mb;
    resil_rng_mulberry32_init(&mb, 42);
    bench_report(bench_run("rng_mulberry32_draw", rng_draw, &mb.base), xorshift, NULL);
    resil_rng_dotnet dn;
    resil_rng_dotnet_init(&dn, 42);
    bench_report(bench_run("rng_dotnet_draw", rng_draw, &dn.base), xorshift, NULL);

    bench_result base_parse = bench_run("strtoll", strtoll_parse, (void *)"90000000");
    bench_report(bench_run("duration_parse_1h2m3.5s", duration_parse, (void *)"1h2m3.5s"),
                 base_parse, NULL);
    return 0;
}
