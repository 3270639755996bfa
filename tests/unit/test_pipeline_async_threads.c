/*
 * test_pipeline_async_threads.c — asynchronous executions whose attempts
 * report from worker threads: every report crosses to the loop through its
 * post queue, and every execution ends exactly once with the result its
 * script calls for. Hedged executions run their attempts in lanes whose
 * reports all come from workers, racing the loop's cancellation of the
 * losers. Run under TSan by `make tsan`.
 */
#include <stdatomic.h>

#include "test.h"
#include "virtual_loop.h"

#define CALLS 400
#define WORKERS 4

typedef struct job {
    resil_attempt *a;
    resil_outcome o;
    struct job *next;
} job;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head;
    bool stop;
} pool;

typedef struct call {
    int id;
    int attempts_seen;
    job jobs[4];
    pool *workers;
} call;

typedef struct tally {
    int ended, succeeded, attempts;
    _Atomic bool all_done;
} tally;

static tally totals;

static void *worker(void *arg)
{
    pool *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->head == NULL && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->head == NULL)
            break;
        job *j = w->head;
        w->head = j->next;
        pthread_mutex_unlock(&w->mu);
        resil_attempt_done(j->a, &j->o);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Odd calls fail their first attempt: every other execution retries. */
static void hand_to_worker(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    job *j = &c->jobs[c->attempts_seen++];
    j->a = a;
    j->o = (c->id % 2 == 1 && ctx->attempt == 1)
               ? resil_fail(RESIL_TRANSIENT, 503, "busy")
               : resil_ok();
    pthread_mutex_lock(&c->workers->mu);
    j->next = c->workers->head;
    c->workers->head = j;
    pthread_cond_signal(&c->workers->cv);
    pthread_mutex_unlock(&c->workers->mu);
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    (void)ud;
    totals.ended++;
    totals.attempts += (int)res->attempts;
    totals.succeeded += res->outcome.kind == RESIL_SUCCESS;
    if (totals.ended == CALLS)
        atomic_store(&totals.all_done, true);
}

static void every_execution_ends_once_with_reports_from_worker_threads(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), 0, &fc), 0);
    virtual_loop vl;
    virtual_loop_init(&vl, fc);
    /* No timeouts: the virtual loop moves time whenever it waits for a
     * report, and a worker's report takes no virtual time. */
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.breaker.kind = RESIL_BREAKER_CONSECUTIVE; /* half the first attempts fail */
    o.breaker.failure_threshold = CALLS;
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("threads", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&vl.loop));
    assert_int_equal(resil_pipeline_add_bulkhead(b, &o.concurrency), 0);
    assert_int_equal(resil_pipeline_add_retry(b, &o.retry), 0);
    assert_int_equal(resil_pipeline_add_breaker(b, &o.breaker), 0);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);

    pool w = {.head = NULL, .stop = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, worker, &w), 0);

    static call calls[CALLS];
    for (int i = 0; i < CALLS; i++) {
        calls[i] = (call){.id = i, .workers = &w};
        resil_call c;
        resil_call_default(&c);
        c.user = &calls[i];
        assert_int_equal(resil_pipeline_start(p, &vl.loop, hand_to_worker, &c, ended, NULL, NULL),
                         0);
    }
    virtual_loop_run(&vl, (const bool *)&totals.all_done);

    pthread_mutex_lock(&w.mu);
    w.stop = true;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(totals.ended, CALLS);
    assert_int_equal(totals.succeeded, CALLS);
    assert_int_equal(totals.attempts, CALLS + CALLS / 2);
    resil_pipeline_free(p);
    virtual_loop_destroy(&vl);
    resil_fake_clock_free(fc);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

/* ---- hedging --------------------------------------------------------------- */

#define HEDGED_CALLS 200

typedef struct hedged_call {
    pool *workers;
    job jobs[2];
    atomic_int told;
} hedged_call;

static struct {
    int ended, succeeded, hedges;
    _Atomic bool all_done;
} hedged;

static void hand_over(pool *w, job *j)
{
    pthread_mutex_lock(&w->mu);
    j->next = w->head;
    w->head = j;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Runs on the loop's thread, maybe after the worker reported: it must
 * then do nothing, and here it only counts. */
static void loser_told(resil_attempt *a, void *ud)
{
    (void)a;
    hedged_call *c = ud;
    atomic_fetch_add(&c->told, 1);
}

/* Both attempts start at once and both report success from a worker: the
 * first report the loop takes wins, the other is a loser's. */
static void hedge_to_worker(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    hedged_call *c = ctx->user;
    job *j = &c->jobs[ctx->hedge];
    j->a = a;
    j->o = resil_fail_after(RESIL_SUCCESS, (int64_t)ctx->hedge, "", RESIL_NO_HINT);
    resil_attempt_on_cancel(a, loser_told, c);
    hand_over(c->workers, j);
}

static void hedged_ended(const resil_pipeline_result *res, void *ud)
{
    (void)ud;
    hedged.ended++;
    hedged.hedges += (int)res->hedges;
    hedged.succeeded += res->outcome.kind == RESIL_SUCCESS &&
                        res->outcome.code == (int64_t)res->hedge_winner;
    if (hedged.ended == HEDGED_CALLS)
        atomic_store(&hedged.all_done, true);
}

static void hedged_attempts_reported_from_workers_race_the_losers_cancellation(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), 0, &fc), 0);
    virtual_loop vl;
    virtual_loop_init(&vl, fc);
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = 0;
    h.max_hedged = 1;
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("hedged threads", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&vl.loop));
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);

    pool w = {.head = NULL, .stop = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, worker, &w), 0);

    static hedged_call calls[HEDGED_CALLS];
    for (int i = 0; i < HEDGED_CALLS; i++) {
        calls[i] = (hedged_call){.workers = &w};
        resil_call c;
        resil_call_default(&c);
        c.user = &calls[i];
        assert_int_equal(
            resil_pipeline_start(p, &vl.loop, hedge_to_worker, &c, hedged_ended, NULL, NULL), 0);
    }
    virtual_loop_run(&vl, (const bool *)&hedged.all_done);

    pthread_mutex_lock(&w.mu);
    w.stop = true;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    virtual_loop_run(&vl, NULL); /* the losers' reports still posted */
    assert_int_equal(hedged.ended, HEDGED_CALLS);
    assert_int_equal(hedged.succeeded, HEDGED_CALLS);
    assert_int_equal(hedged.hedges, HEDGED_CALLS);
    for (int i = 0; i < HEDGED_CALLS; i++)
        assert_true(atomic_load(&calls[i].told) <= 1);
    resil_pipeline_free(p);
    virtual_loop_destroy(&vl);
    resil_fake_clock_free(fc);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_execution_ends_once_with_reports_from_worker_threads),
        cmocka_unit_test(hedged_attempts_reported_from_workers_race_the_losers_cancellation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
