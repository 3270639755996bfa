/*
 * bench_adaptive.c — what chaos and the learning limits cost per call.
 *
 * A chaos strategy left in a pipeline switched off must cost a load and a
 * branch: it is measured as the difference between the same pipeline with
 * and without it. The adaptive limiter and the throttle are measured on
 * their success path with the instant passed in, as the pipeline calls
 * them, against one atomic increment; then with two threads, where the
 * figure kept is the throughput over the time both threads were truly
 * running at once (each thread times its chunks of calls in wall-clock
 * and in its own CPU time, and only chunks its thread ran through that
 * overlap a chunk the other thread ran through count), so a thread that
 * was descheduled on a shared machine does not pass for contention.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

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
#define CHUNKS 200

/* One chunk of calls: its wall-clock span and the CPU time its thread got
 * in it. A chunk counts only if its thread ran through it (CPU time at
 * least 95 % of the span) and the other thread ran through a chunk that
 * overlaps it: then both threads were truly running at once. */
typedef struct chunk {
    uint64_t from, to, cpu;
} chunk;

typedef struct worker {
    bench_fn fn;
    void *ud;
    pthread_barrier_t *start; /* NULL: alone */
    chunk c[CHUNKS];
} worker;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *work(void *p)
{
    worker *w = p;
    if (w->start != NULL)
        pthread_barrier_wait(w->start);
    for (int i = 0; i < CHUNKS; i++) {
        uint64_t cpu = thread_cpu_ns();
        w->c[i].from = bench_now_ns();
        w->fn(w->ud, CHUNK);
        w->c[i].to = bench_now_ns();
        w->c[i].cpu = thread_cpu_ns() - cpu;
    }
    return NULL;
}

static bool solid(const chunk *c) { return c->cpu * 100 >= (c->to - c->from) * 95; }

static bool overlaps_solid(const chunk *c, const worker *other)
{
    for (int i = 0; i < CHUNKS; i++)
        if (solid(&other->c[i]) && other->c[i].from < c->to && c->from < other->c[i].to)
            return true;
    return false;
}

/* ns per call over one thread's chunks run at once with the other's. */
static double ns_per_call_together(const worker *w, const worker *other, uint64_t *calls)
{
    uint64_t ns = 0, n = 0;
    for (int i = 0; i < CHUNKS; i++) {
        if (!solid(&w->c[i]) || !overlaps_solid(&w->c[i], other))
            continue;
        ns += w->c[i].to - w->c[i].from;
        n += CHUNK;
    }
    *calls += n;
    return n > 0 ? (double)ns / (double)n : 0;
}

/* ns per call over the chunks one thread alone ran through. */
static double ns_per_call_alone(bench_fn fn, void *ud)
{
    static worker w;
    w.fn = fn;
    w.ud = ud;
    w.start = NULL;
    work(&w);
    uint64_t ns = 0, n = 0;
    for (int i = 0; i < CHUNKS; i++) {
        if (!solid(&w.c[i]))
            continue;
        ns += w.c[i].to - w.c[i].from;
        n += CHUNK;
    }
    return n > 0 ? (double)ns / (double)n : 0;
}

static void two_threads(const char *name, bench_fn fn, void *ud)
{
    double one = ns_per_call_alone(fn, ud);
    static worker w[2];
    pthread_t t[2];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    for (int i = 0; i < 2; i++) {
        w[i].fn = fn;
        w[i].ud = ud;
        w[i].start = &start;
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    uint64_t calls = 0;
    double a = ns_per_call_together(&w[0], &w[1], &calls);
    double b = ns_per_call_together(&w[1], &w[0], &calls);
    double speedup = a > 0 && b > 0 ? one / a + one / b : 0;
    printf("bench %s_two_threads calls_at_once=%llu ns_per_call_alone=%.2f "
           "ns_per_call_at_once=%.2f,%.2f speedup=%.2f\n",
           name, (unsigned long long)calls, one, a, b, speedup);
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
    two_threads("limiter_success", limiter_success, l);

    resil_throttle_opts th;
    resil_throttle_opts_default(&th);
    resil_throttle *t;
    resil_throttle_new(&th, &t, NULL);
    bench_result thr = bench_run("throttle_success", throttle_success, t);
    bench_report(thr, atomic, NULL);
    two_threads("throttle_success", throttle_success, t);

    resil_throttle_free(t);
    resil_limiter_free(l);
    resil_pipeline_free(plain);
    resil_pipeline_free(chaotic);
    return 0;
}
