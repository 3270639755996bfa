/*
 * test_pipeline_threads.c — one pipeline shared by 16 threads: the
 * standard pipeline with telemetry on, a hedging pipeline whose race slots
 * and workers are recycled under contention, and per-key breakers from a
 * registry. Each checks an exact invariant (every operation call is
 * accounted for by an attempt record, the bulkhead bound holds, every
 * execution is reported once) and is meant to run under TSan.
 *
 * cmocka's assertions may only fail on the test's own thread (they jump
 * back into it), so the workers count what they find wrong and the test
 * asserts, once they have joined, that the count is zero.
 */
#include <pthread.h>

#include "test.h"

#define THREADS 16
#define PER_THREAD 300

typedef struct shared shared;

typedef struct worker {
    shared *s;
    int id;
} worker;

struct shared {
    resil_pipeline *p;
    resil_fake_clock *fc;
    int in_flight, max_in_flight; /* atomically */
    long calls;                   /* atomically */
    long attempts_seen;           /* attempt records that called the operation */
    long executions;
    long rejected_by_bulkhead;
    long events_execution, events_attempt; /* from the listener */
    long attempts_total;
    long ok_odd, ok_even;      /* successes by the caller's thread parity */
    long broken;               /* a worker's failed expectations */
    pthread_mutex_t mu;
    /* Each worker is its operation's ctx->user. A hedge's loser may still
     * read it after its execution returned (hedge.h), so the workers live
     * as long as the pipeline, not in run_workers()'s frame. */
    worker workers[THREADS];
};

static void expect(shared *s, bool ok)
{
    if (!ok)
        __atomic_add_fetch(&s->broken, 1, __ATOMIC_SEQ_CST);
}

static resil_outcome flaky(resil_attempt_ctx *ctx)
{
    worker *w = ctx->user;
    shared *s = w->s;
    int now = __atomic_add_fetch(&s->in_flight, 1, __ATOMIC_SEQ_CST);
    int max = __atomic_load_n(&s->max_in_flight, __ATOMIC_SEQ_CST);
    while (now > max && !__atomic_compare_exchange_n(&s->max_in_flight, &max, now, false,
                                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    long n = __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
    sched_yield();
    __atomic_sub_fetch(&s->in_flight, 1, __ATOMIC_SEQ_CST);
    if ((n + w->id) % 3 == 0)
        return resil_fail(RESIL_TRANSIENT, 503, "flaky");
    return resil_ok();
}

static void count_events(const resil_event *ev, void *ud)
{
    shared *s = ud;
    if (ev->type == RESIL_EVENT_EXECUTION)
        __atomic_add_fetch(&s->events_execution, 1, __ATOMIC_SEQ_CST);
    else if (ev->type == RESIL_EVENT_ATTEMPT)
        __atomic_add_fetch(&s->events_attempt, 1, __ATOMIC_SEQ_CST);
}

static bool called_the_operation(const resil_attempt_record *rec)
{
    return !(rec->outcome.kind == RESIL_REJECTED && rec->outcome.code == RESIL_STRATEGY_BREAKER);
}

static void *standard_worker(void *arg)
{
    worker *w = arg;
    shared *s = w->s;
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, (uint64_t)w->id + 1);
    long seen = 0, attempts = 0, bulkhead = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        resil_attempt_record records[8];
        resil_call c;
        resil_call_default(&c);
        c.user = w;
        c.rng = &rng.base;
        c.records = records;
        c.records_cap = 8;
        resil_pipeline_result r;
        expect(s, resil_pipeline_execute(s->p, flaky, &c, &r) == 0);
        expect(s, r.records_len == r.attempts);
        for (size_t k = 0; k < r.records_len; k++)
            seen += called_the_operation(&records[k]);
        attempts += r.attempts;
        if (r.rejected_by == RESIL_STRATEGY_BULKHEAD) {
            expect(s, r.attempts == 0);
            bulkhead++;
        }
    }
    pthread_mutex_lock(&s->mu);
    s->attempts_seen += seen;
    s->attempts_total += attempts;
    s->rejected_by_bulkhead += bulkhead;
    s->executions += PER_THREAD;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void shared_init(shared *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
}

static void run_workers(shared *s, void *(*fn)(void *))
{
    pthread_t t[THREADS];
    worker *w = s->workers;
    for (int i = 0; i < THREADS; i++) {
        w[i].s = s;
        w[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, fn, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

static void sixteen_threads_share_one_standard_pipeline(void **state)
{
    (void)state;
    shared s;
    shared_init(&s);
    assert_int_equal(resil_fake_clock_new(0, 0, &s.fc), 0);
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);

    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.clock = resil_fake_clock_clock(s.fc);
    o.concurrency.max_concurrency = 8; /* small enough to be reached */
    o.breaker.minimum_throughput = 20;
    o.breaker.failure_ratio = 0.5;
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("shared", &b, NULL), 0);
    assert_int_equal(resil_pipeline_add_standard(b, &o), 0);
    assert_int_equal(resil_pipeline_builder_listen(b, count_events, &s), 0);
    assert_int_equal(resil_pipeline_builder_metrics(b, m), 0);
    assert_int_equal(resil_pipeline_build(b, &s.p, NULL), 0);
    resil_pipeline_builder_free(b);

    run_workers(&s, standard_worker);

    assert_int_equal(s.broken, 0);
    assert_true(s.max_in_flight <= 8);
    assert_int_equal(s.calls, s.attempts_seen);
    assert_int_equal(s.executions, THREADS * PER_THREAD);
    assert_int_equal(s.events_execution, THREADS * PER_THREAD);
    assert_int_equal(s.events_attempt, s.attempts_total);
    char *text;
    assert_int_equal(resil_metrics_prometheus_string(m, &text, NULL), 0);
    free(text);
    resil_pipeline_free(s.p);
    resil_metrics_free(m);
    resil_fake_clock_free(s.fc);
    pthread_mutex_destroy(&s.mu);
}

/* ---- hedging under contention ------------------------------------------------------- */

static resil_outcome quick(resil_attempt_ctx *ctx)
{
    worker *w = ctx->user;
    __atomic_add_fetch(&w->s->calls, 1, __ATOMIC_SEQ_CST);
    sched_yield();
    if (resil_cancelled(ctx->cancel))
        return resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "lost");
    return ctx->hedge == 0 && w->id % 2 == 0
               ? resil_fail(RESIL_TRANSIENT, 503, "primary fails")
               : resil_ok();
}

static void *hedging_worker(void *arg)
{
    worker *w = arg;
    long won = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        resil_call c;
        resil_call_default(&c);
        c.user = w;
        resil_pipeline_result r;
        expect(w->s, resil_pipeline_execute(w->s->p, quick, &c, &r) == 0);
        /* An even thread's primary always fails: a hedge, or an unhedged
         * inline run's failure, decides; a loser's cancellation never
         * becomes the answer. */
        bool ok = r.outcome.kind == RESIL_SUCCESS;
        expect(w->s, ok || (w->id % 2 == 0 && r.outcome.code == 503));
        won += ok;
    }
    pthread_mutex_lock(&w->s->mu);
    *(w->id % 2 ? &w->s->ok_odd : &w->s->ok_even) += won;
    pthread_mutex_unlock(&w->s->mu);
    return NULL;
}

/* One hedge at once, no delay, from a pool of four workers, far fewer
 * than the callers: the inline path is taken too. Its breakers from
 * `reg` when given. */
static resil_pipeline *hedged_pipeline(const char *name, resil_registry *reg)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new(name, &b, NULL), 0);
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = 0;
    h.max_hedged = 1;
    h.workers = 4;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
    if (reg != NULL)
        assert_int_equal(resil_pipeline_use_registry(b, reg), 0);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    return p;
}

static void sixteen_threads_race_hedges_through_a_small_pool(void **state)
{
    (void)state;
    shared s;
    shared_init(&s);
    s.p = hedged_pipeline("hedged", NULL);

    run_workers(&s, hedging_worker);
    resil_pipeline_free(s.p); /* joins workers still finishing losers */
    assert_int_equal(s.broken, 0);
    /* Odd threads always succeed; even ones succeed whenever hedged. */
    assert_int_equal(s.ok_odd, (THREADS / 2) * PER_THREAD);
    assert_true(s.ok_even <= (THREADS / 2) * PER_THREAD);
    assert_true(s.calls >= THREADS * PER_THREAD);
    pthread_mutex_destroy(&s.mu);
}

/* ---- per-key breakers ------------------------------------------------------------------ */

static resil_outcome by_key(resil_attempt_ctx *ctx)
{
    worker *w = ctx->user;
    __atomic_add_fetch(&w->s->calls, 1, __ATOMIC_SEQ_CST);
    return w->id % 4 == 0 ? resil_fail(RESIL_TRANSIENT, 503, "bad host") : resil_ok();
}

static void *keyed_worker(void *arg)
{
    worker *w = arg;
    char key[16];
    snprintf(key, sizeof key, "host-%d", w->id % 4);
    long ok = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        resil_call c;
        resil_call_default(&c);
        c.user = w;
        c.key = key;
        resil_pipeline_result r;
        expect(w->s, resil_pipeline_execute(w->s->p, by_key, &c, &r) == 0);
        ok += r.outcome.kind == RESIL_SUCCESS;
    }
    pthread_mutex_lock(&w->s->mu);
    w->s->executions += ok;
    pthread_mutex_unlock(&w->s->mu);
    return NULL;
}

static void sixteen_threads_share_per_key_breakers(void **state)
{
    (void)state;
    shared s;
    shared_init(&s);
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    ro.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    ro.breaker.failure_threshold = 3;
    ro.breaker.break_duration = RESIL_S(3600);
    resil_registry *reg;
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("keyed", &b, NULL), 0);
    assert_int_equal(resil_pipeline_use_registry(b, reg), 0);
    assert_int_equal(resil_pipeline_build(b, &s.p, NULL), 0);
    resil_pipeline_builder_free(b);

    run_workers(&s, keyed_worker);
    assert_int_equal(s.broken, 0);
    /* The other three hosts always succeed. host-0 opened on its third
     * failure; besides those three, only the calls its other threads had
     * in flight at that moment (one each at most) reached it. */
    long good = 3 * (THREADS / 4) * PER_THREAD;
    assert_int_equal(s.executions, good);
    assert_in_range(s.calls - good, 3, 3 + THREADS / 4 - 1);
    assert_int_equal(resil_registry_count(reg), 4);
    resil_breaker *bad;
    assert_int_equal(resil_registry_try_get(reg, "host-0", &bad), 0);
    assert_int_equal(resil_breaker_state_of(bad), RESIL_BREAKER_OPEN);
    resil_breaker_free(bad);
    resil_pipeline_free(s.p);
    resil_registry_free(reg);
    pthread_mutex_destroy(&s.mu);
}

/* ---- hedges to per-call keys while the registry evicts ---------------------------------- */

#define KEYS_MAX 8 /* far fewer breakers than keys: every call may create and evict */

static resil_outcome per_endpoint(resil_attempt_ctx *ctx)
{
    worker *w = ctx->user;
    __atomic_add_fetch(&w->s->calls, 1, __ATOMIC_SEQ_CST);
    sched_yield();
    return ctx->hedge == 0 ? resil_fail(RESIL_TRANSIENT, 503, "primary fails") : resil_ok();
}

static void *churning_worker(void *arg)
{
    worker *w = arg;
    long ok = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        char key[32], hedge_key[32];
        snprintf(key, sizeof key, "primary-%d-%d", w->id, i % 24);
        snprintf(hedge_key, sizeof hedge_key, "hedge-%d", (w->id + i) % 12);
        const char *keys[] = {key, hedge_key};
        resil_call c;
        resil_call_default(&c);
        c.user = w;
        c.key = key;
        c.hedge_keys = keys;
        c.hedge_keys_len = 2;
        resil_pipeline_result r;
        expect(w->s, resil_pipeline_execute(w->s->p, per_endpoint, &c, &r) == 0);
        ok += r.outcome.kind == RESIL_SUCCESS;
        /* The names were the caller's: a loser still running must not
         * read them now. */
        memset(key, 'x', sizeof key - 1);
        memset(hedge_key, 'y', sizeof hedge_key - 1);
    }
    pthread_mutex_lock(&w->s->mu);
    w->s->executions += PER_THREAD;
    w->s->ok_odd += ok;
    pthread_mutex_unlock(&w->s->mu);
    return NULL;
}

/* Each call names its own primary and hedge breakers, from many more keys
 * than the registry holds: lookups create, and evict breakers other calls
 * and their late losers still hold. Every execution runs, the registry
 * stays at its cap, and no breaker is used after it is freed (ASan) or
 * without its references ordered (TSan). */
static void sixteen_threads_hedge_to_per_call_keys_while_the_registry_evicts(void **state)
{
    (void)state;
    shared s;
    shared_init(&s);
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    ro.max_breakers = KEYS_MAX;
    resil_registry *reg;
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    s.p = hedged_pipeline("churn", reg);

    run_workers(&s, churning_worker);
    resil_pipeline_free(s.p); /* joins workers still finishing losers */
    assert_int_equal(s.broken, 0);
    assert_int_equal(s.executions, THREADS * PER_THREAD);
    assert_true(s.calls >= THREADS * PER_THREAD);
    assert_int_equal(resil_registry_count(reg), KEYS_MAX);
    resil_registry_free(reg);
    pthread_mutex_destroy(&s.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sixteen_threads_share_one_standard_pipeline),
        cmocka_unit_test(sixteen_threads_race_hedges_through_a_small_pool),
        cmocka_unit_test(sixteen_threads_share_per_key_breakers),
        cmocka_unit_test(sixteen_threads_hedge_to_per_call_keys_while_the_registry_evicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
