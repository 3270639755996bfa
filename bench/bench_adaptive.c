/*
 * bench_adaptive.c — what chaos and the learning limits cost per call.
 *
 * A chaos strategy left in a pipeline switched off must cost a load and a
 * branch: it is measured as the difference between the same pipeline with
 * and without it. The adaptive limiter and the throttle are measured on
 * their success path with the instant passed in, as the pipeline calls
 * them, against one atomic increment; then with two threads, where the
 * figure kept is the throughput over the time both threads were truly
 * running at once (each thread timestamps its chunks of calls, and only
 * the chunks inside the overlap of the two threads count), so a thread
 * that was descheduled on a shared machine does not pass for contention.
 */
#include <pthread.h>
#include <stdio.h>

#include "bench.h"
#include "resil.h"

static resil_outcome succeed(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static void execute(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    resil_pipeline_result r;
    for (uint64_t i = 0; i < iters; i++)
        resil_pipeline_execute(p, succeed, NULL, &r);
    bench_consume((uint64_t)r.outcome.kind);
}

static void limiter_success(void *ud, uint64_t iters)
{
    resil_limiter *l = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_limiter_ticket t;
        ok += resil_limiter_try_acquire_at(l, (resil_instant)i, &t) == 0;
        resil_limiter_release_at(&t, RESIL_BREAKER_SUCCESS, (resil_instant)i + 1000);
    }
    bench_consume(ok);
}

static void throttle_success(void *ud, uint64_t iters)
{
    resil_throttle *t = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++) {
        ok += resil_throttle_admit_at(t, 1000) == 0;
        resil_throttle_record_at(t, RESIL_BREAKER_SUCCESS, 1000);
    }
    bench_consume(ok);
}

static void chaos_decide_disabled(void *ud, uint64_t iters)
{
    resil_chaos *c = ud;
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++)
        n += resil_chaos_decide(c);
    bench_consume(n);
}

/* ---- two threads -------------------------------------------------------------- */

#define CHUNK 20000
#define CHUNKS 100

typedef struct worker {
    bench_fn fn;
    void *ud;
    uint64_t start, ends[CHUNKS];
} worker;

static void *work(void *p)
{
    worker *w = p;
    w->start = bench_now_ns();
    for (int c = 0; c < CHUNKS; c++) {
        w->fn(w->ud, CHUNK);
        w->ends[c] = bench_now_ns();
    }
    return NULL;
}

/* Calls per ns of one thread's chunks lying wholly inside [from, to]. */
static uint64_t calls_inside(const worker *w, uint64_t from, uint64_t to)
{
    uint64_t n = 0, prev = w->start;
    for (int c = 0; c < CHUNKS; c++) {
        if (prev >= from && w->ends[c] <= to)
            n += CHUNK;
        prev = w->ends[c];
    }
    return n;
}

static void two_threads(const char *name, bench_fn fn, void *ud, bench_result one)
{
    worker w[2] = {{fn, ud, 0, {0}}, {fn, ud, 0, {0}}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    uint64_t from = w[0].start > w[1].start ? w[0].start : w[1].start;
    uint64_t e0 = w[0].ends[CHUNKS - 1], e1 = w[1].ends[CHUNKS - 1];
    uint64_t to = e0 < e1 ? e0 : e1;
    uint64_t calls = to > from ? calls_inside(&w[0], from, to) + calls_inside(&w[1], from, to) : 0;
    double per_ns = to > from ? (double)calls / (double)(to - from) : 0;
    printf("bench %s_two_threads calls_in_overlap=%llu overlap_ms=%.1f speedup=%.2f\n", name,
           (unsigned long long)calls, (double)(to - from) / 1e6, per_ns * one.ns_per_op);
}

int main(void)
{
    bench_result atomic = bench_run("atomic_increment", bench_atomic_increment, NULL);

    resil_pipeline_builder *b;
    resil_pipeline *plain, *chaotic;
    resil_timeout_opts to;
    resil_timeout_opts_default(&to);
    resil_pipeline_builder_new("plain", &b, NULL);
    resil_pipeline_add_attempt_timeout(b, &to);
    resil_pipeline_build(b, &plain, NULL);
    resil_pipeline_builder_free(b);
    resil_pipeline_builder_new("chaotic", &b, NULL);
    resil_pipeline_add_attempt_timeout(b, &to);
    resil_chaos_opts co;
    resil_chaos_opts_default(&co, RESIL_CHAOS_FAULT);
    co.enabled = false;
    resil_pipeline_add_chaos(b, &co);
    resil_pipeline_build(b, &chaotic, NULL);
    resil_pipeline_builder_free(b);
    bench_result base = bench_run("pipeline_without_chaos", execute, plain);
    bench_report(base, atomic, NULL);
    bench_report(bench_run("pipeline_with_disabled_chaos_fault", execute, chaotic), base, NULL);
    resil_chaos_enable(resil_pipeline_chaos(chaotic, RESIL_CHAOS_FAULT), true);
    resil_chaos_set_rate(resil_pipeline_chaos(chaotic, RESIL_CHAOS_FAULT), 0.0);
    bench_report(bench_run("pipeline_with_enabled_chaos_fault_rate_0", execute, chaotic), base,
                 NULL);
    bench_report(bench_run("chaos_decide_disabled", chaos_decide_disabled,
                           resil_pipeline_chaos(chaotic, RESIL_CHAOS_FAULT)),
                 atomic, NULL);

    resil_limiter_opts lo;
    resil_limiter_opts_default(&lo, RESIL_LIMIT_GRADIENT);
    lo.max_limit = 1000;
    lo.initial_limit = 1000;
    resil_limiter *l;
    resil_limiter_new(&lo, &l, NULL);
    bench_result lim = bench_run("limiter_success", limiter_success, l);
    bench_report(lim, atomic, NULL);
    two_threads("limiter_success", limiter_success, l, lim);

    resil_throttle_opts th;
    resil_throttle_opts_default(&th);
    resil_throttle *t;
    resil_throttle_new(&th, &t, NULL);
    bench_result thr = bench_run("throttle_success", throttle_success, t);
    bench_report(thr, atomic, NULL);
    two_threads("throttle_success", throttle_success, t, thr);

    resil_throttle_free(t);
    resil_limiter_free(l);
    resil_pipeline_free(plain);
    resil_pipeline_free(chaotic);
    return 0;
}
