/*
 * bench_limits.c — what the admission checks in front of an operation
 * cost: a bulkhead permit taken and given back, a rate-limiter permit, and
 * the degradation monitor's priority check. Each is measured against the
 * primitive it is built from, in the same run (an uncontended mutex
 * lock+unlock, one atomic increment), so the figures travel between
 * machines. All of them run on the system clock, as in production; the
 * try_acquire_at line shows the limiter without its clock read.
 */
#include <pthread.h>
#include <stdio.h>

#include "bench.h"
#include "resil.h"

static void mutex_lock_unlock(void *ud, uint64_t iters)
{
    pthread_mutex_t *mu = ud;
    for (uint64_t i = 0; i < iters; i++) {
        pthread_mutex_lock(mu);
        pthread_mutex_unlock(mu);
    }
}

static void bulkhead_acquire_release(void *ud, uint64_t iters)
{
    resil_bulkhead *b = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_bulkhead_ticket t;
        ok += resil_bulkhead_acquire(b, NULL, &t) == 0;
        resil_bulkhead_release(&t);
    }
    bench_consume(ok);
}

static void bulkhead_try_acquire_release(void *ud, uint64_t iters)
{
    resil_bulkhead *b = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_bulkhead_ticket t;
        ok += resil_bulkhead_try_acquire(b, &t) == 0;
        resil_bulkhead_release(&t);
    }
    bench_consume(ok);
}

static void ratelimit_try_acquire(void *ud, uint64_t iters)
{
    resil_ratelimit *rl = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++)
        ok += resil_ratelimit_try_acquire(rl, 1, NULL) == 0;
    bench_consume(ok);
}

static void ratelimit_try_acquire_at(void *ud, uint64_t iters)
{
    resil_ratelimit *rl = ud;
    resil_instant now = resil_clock_now(resil_clock_system());
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++)
        ok += resil_ratelimit_try_acquire_at(rl, 1, now + (resil_instant)i, NULL) == 0;
    bench_consume(ok);
}

static void degrade_admit(void *ud, uint64_t iters)
{
    resil_degrade *d = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++)
        ok += resil_degrade_admit(d, (int32_t)(i & 127)) == 0;
    bench_consume(ok);
}

static void degrade_admit_at(void *ud, uint64_t iters)
{
    resil_degrade *d = ud;
    resil_instant now = resil_clock_now(resil_clock_system());
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++)
        ok += resil_degrade_admit_at(d, (int32_t)(i & 127), now + (resil_instant)i) == 0;
    bench_consume(ok);
}

static void degrade_record(void *ud, uint64_t iters)
{
    resil_degrade *d = ud;
    for (uint64_t i = 0; i < iters; i++)
        resil_degrade_record(d, (i & 15) != 0);
}

static resil_ratelimit *limiter(resil_ratelimit_kind kind)
{
    /* Generous enough never to reject, so every call is a full admit. */
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, kind);
    o.rate = 1000000000;
    o.period = RESIL_MS(1);
    o.burst = 1000000000;
    o.permits = kind == RESIL_RATELIMIT_SLIDING_WINDOW ? RESIL_RATELIMIT_MAX_LOG : 1000000000;
    o.window = RESIL_MS(1);
    resil_ratelimit *rl = NULL;
    resil_ratelimit_new(&o, &rl, NULL);
    return rl;
}

static int healthy(void *ud, resil_health_sample *out)
{
    (void)ud;
    out->cpu = 5;
    out->memory = 5;
    return 0;
}

static resil_degrade *monitor(bool lazy)
{
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.evaluate_on_call = lazy;
    o.sampler = healthy;
    resil_degrade *d = NULL;
    resil_degrade_new(&o, &d, NULL);
    if (d != NULL)
        resil_degrade_set_level(d, 3); /* Major: priorities below 50 are shed */
    return d;
}

static void bench_bulkhead(bench_result mutex)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    resil_bulkhead *b = NULL;
    if (resil_bulkhead_new(&o, &b, NULL) != 0)
        return;
    bench_result one = bench_run("bulkhead_acquire_release", bulkhead_acquire_release, b);
    bench_report(one, mutex, NULL);
    bench_report_2t(bench_run_2t("bulkhead_acquire_release_2t_shared", bulkhead_acquire_release,
                                 b, b),
                    one, mutex);
    bench_report(bench_run("bulkhead_try_acquire_release", bulkhead_try_acquire_release, b),
                 mutex, NULL);
    resil_bulkhead_free(b);
}

static void bench_ratelimit(bench_result atomic)
{
    static const struct {
        resil_ratelimit_kind kind;
        const char *name;
    } kinds[] = {
        {RESIL_RATELIMIT_TOKEN_BUCKET, "ratelimit_token_bucket_try_acquire"},
        {RESIL_RATELIMIT_FIXED_WINDOW, "ratelimit_fixed_window_try_acquire"},
        {RESIL_RATELIMIT_SLIDING_WINDOW, "ratelimit_sliding_window_try_acquire"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        resil_ratelimit *rl = limiter(kinds[i].kind);
        if (rl == NULL)
            return;
        bench_report(bench_run(kinds[i].name, ratelimit_try_acquire, rl), atomic, NULL);
        resil_ratelimit_free(rl);
    }
    resil_ratelimit *rl = limiter(RESIL_RATELIMIT_TOKEN_BUCKET);
    if (rl == NULL)
        return;
    bench_report(bench_run("ratelimit_token_bucket_try_acquire_at", ratelimit_try_acquire_at, rl),
                 atomic, "clock=caller");
    resil_ratelimit_free(rl);
}

static void bench_degrade(bench_result atomic, bench_result mutex)
{
    resil_degrade *lazy = monitor(true), *explicit_only = monitor(false);
    if (lazy == NULL || explicit_only == NULL)
        return;
    bench_report(bench_run("degrade_admit", degrade_admit, lazy), atomic, "evaluate_on_call=1");
    bench_report(bench_run("degrade_admit_at", degrade_admit_at, lazy), atomic,
                 "evaluate_on_call=1 clock=caller");
    bench_report(bench_run("degrade_admit_tick_driven", degrade_admit, explicit_only), atomic,
                 "evaluate_on_call=0");
    bench_report(bench_run("degrade_record", degrade_record, explicit_only), mutex, NULL);
    resil_degrade_free(lazy);
    resil_degrade_free(explicit_only);
}

int main(void)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    bench_result mutex = bench_run("mutex_lock_unlock", mutex_lock_unlock, &mu);
    bench_result atomic = bench_run("atomic_increment", bench_atomic_increment, NULL);

    bench_bulkhead(mutex);
    bench_ratelimit(atomic);
    bench_degrade(atomic, mutex);
    return 0;
}
