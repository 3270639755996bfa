/*
 * test_budget_threads.c — one budget of each model hammered by eight
 * threads at once. Run under TSan this finds races; the counts checked at
 * the end find lost updates: every scenario is arranged so that its final
 * level is exact whatever the interleaving.
 */
#include <math.h>
#include <pthread.h>

#include "test.h"

#define THREADS 8
#define ROUNDS 2000

typedef struct worker {
    resil_budget *budget;
    int granted;
    void (*body)(struct worker *w);
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    w->body(w);
    return NULL;
}

/* Run `body` on THREADS threads against one budget; the total of grants. */
static int hammer(resil_budget *b, void (*body)(worker *w))
{
    pthread_t th[THREADS];
    worker ws[THREADS];
    for (int i = 0; i < THREADS; i++) {
        ws[i] = (worker){b, 0, body};
        assert_int_equal(pthread_create(&th[i], NULL, run_worker, &ws[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += ws[i].granted;
    }
    return total;
}

static resil_outcome transient_failure(void)
{
    return resil_fail(RESIL_TRANSIENT, 503, NULL);
}

/* ---- tokens --------------------------------------------------------------- */

static void tokens_fail_and_ask(worker *w)
{
    resil_outcome f = transient_failure();
    for (int i = 0; i < ROUNDS; i++) {
        resil_budget_ticket t = {0};
        resil_budget_on_result(w->budget, &f, 1, &t);
        w->granted += resil_budget_try_retry(w->budget, &f, &t);
    }
}

static void tokens_succeed(worker *w)
{
    resil_outcome ok = resil_ok();
    for (int i = 0; i < ROUNDS; i++)
        resil_budget_on_result(w->budget, &ok, 1, NULL);
}

static void tokens_lose_no_update_under_contention(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    o.max_tokens = 1000;
    o.token_ratio = 0.001;
    resil_budget *b = NULL;
    assert_int_equal(resil_budget_new(&o, &b, NULL), 0);
    int granted = hammer(b, tokens_fail_and_ask); /* 16 000 failures */
    assert_true(resil_budget_level(b) == 0.0);
    /* A grant needs tokens > 500, so at most 499 failures had landed. Each
     * thread asks after each of its failures, so when the 499th landed at
     * most one failure per thread was still unasked. */
    assert_in_range(granted, 499 - THREADS, 499);
    hammer(b, tokens_succeed); /* 16 000 × 0.001 */
    assert_near(resil_budget_level(b), 16.0, 1e-9);
    resil_budget_free(b);
}

/* ---- quota ---------------------------------------------------------------- */

static void quota_spend(worker *w)
{
    resil_outcome f = transient_failure();
    for (int i = 0; i < ROUNDS; i++) {
        resil_budget_ticket t = {0};
        w->granted += resil_budget_try_retry(w->budget, &f, &t);
    }
}

static void quota_spend_and_refund(worker *w)
{
    resil_outcome f = transient_failure();
    resil_outcome ok = resil_ok();
    for (int i = 0; i < ROUNDS; i++) {
        resil_budget_ticket t = {0};
        if (resil_budget_try_retry(w->budget, &f, &t)) {
            w->granted++;
            resil_budget_on_result(w->budget, &ok, 2, &t);
        }
    }
}

static void quota_grants_exactly_what_capacity_pays_for(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 5000; /* 1000 retries at 5 */
    resil_budget *b = NULL;
    assert_int_equal(resil_budget_new(&o, &b, NULL), 0);
    assert_int_equal(hammer(b, quota_spend), 1000);
    assert_true(resil_budget_level(b) == 0.0);
    resil_budget_free(b);
}

static void quota_refunds_return_every_grant(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 20; /* four retries outstanding at most */
    resil_budget *b = NULL;
    assert_int_equal(resil_budget_new(&o, &b, NULL), 0);
    int granted = hammer(b, quota_spend_and_refund);
    assert_true(granted >= 1);
    assert_true(resil_budget_level(b) == 20.0);
    resil_budget_free(b);
}

/* ---- ratio ---------------------------------------------------------------- */

static void ratio_request(worker *w)
{
    for (int i = 0; i < ROUNDS; i++)
        resil_budget_on_request(w->budget);
}

static void ratio_retry(worker *w)
{
    resil_outcome f = transient_failure();
    for (int i = 0; i < ROUNDS; i++) {
        resil_budget_ticket t = {0};
        w->granted += resil_budget_try_retry(w->budget, &f, &t);
    }
}

static void ratio_request_and_retry(worker *w)
{
    resil_outcome f = transient_failure();
    for (int i = 0; i < ROUNDS; i++) {
        resil_budget_ticket t = {0};
        resil_budget_on_request(w->budget);
        w->granted += resil_budget_try_retry(w->budget, &f, &t);
        (void)resil_budget_level(w->budget);
    }
}

typedef struct ratio_fixture {
    resil_fake_clock *fc;
    resil_budget *b;
} ratio_fixture;

static ratio_fixture ratio(double percent, int32_t min_per_second)
{
    ratio_fixture f;
    assert_int_equal(resil_fake_clock_new(0, 0, &f.fc), 0);
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
    o.percent = percent;
    o.min_per_second = min_per_second;
    o.clock = resil_fake_clock_clock(f.fc);
    assert_int_equal(resil_budget_new(&o, &f.b, NULL), 0);
    return f;
}

static void ratio_done(ratio_fixture *f)
{
    resil_budget_free(f->b);
    resil_fake_clock_free(f->fc);
}

static void ratio_grants_exactly_its_share(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.25, 0);
    hammer(f.b, ratio_request); /* 16 000 requests earn 4000 retries */
    assert_true(resil_budget_level(f.b) == 4000.0);
    assert_int_equal(hammer(f.b, ratio_retry), 4000);
    assert_true(resil_budget_level(f.b) == 0.0);
    ratio_done(&f);
}

static void ratio_interleaved_grants_and_balance_add_up(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.25, 0);
    int granted = hammer(f.b, ratio_request_and_retry);
    assert_true(granted >= 1);
    assert_true((double)granted + resil_budget_level(f.b) == 4000.0);
    ratio_done(&f);
}

static void *move_time(void *arg)
{
    resil_fake_clock *fc = arg;
    for (int i = 0; i < 200; i++)
        resil_fake_clock_advance(fc, RESIL_MS(100));
    return NULL;
}

static void ratio_survives_time_moving_under_it(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 10);
    pthread_t mover;
    assert_int_equal(pthread_create(&mover, NULL, move_time, f.fc), 0);
    int granted = hammer(f.b, ratio_request_and_retry);
    pthread_join(mover, NULL);
    assert_true(granted >= 100); /* the floor of the first window at least */
    resil_fake_clock_advance(f.fc, RESIL_S(10));
    assert_true(resil_budget_level(f.b) == 100.0); /* only the floor is left */
    ratio_done(&f);
}

/* ---- executors sharing one policy and one budget ------------------------ */

typedef struct shared_run {
    const resil_retry_policy *policy;
    resil_clock *clock;
    resil_outcome answer;
    int stops[RESIL_STOP_REFUSED + 1];
    uint32_t attempts;
} shared_run;

static resil_outcome answer_op(resil_attempt_ctx *ctx)
{
    return ((shared_run *)ctx->user)->answer;
}

static void *run_executions(void *arg)
{
    shared_run *r = arg;
    resil_exec_opts opts = {0};
    opts.clock = r->clock; /* rng: each thread's own */
    for (int i = 0; i < ROUNDS / 10; i++) {
        resil_retry_result res;
        if (resil_retry_execute(r->policy, &opts, answer_op, r, &res, NULL) != 0)
            return NULL;
        r->stops[res.stop]++;
        r->attempts += res.attempts;
    }
    return NULL;
}

static void run_shared(const resil_retry_policy *p, resil_clock *clock, resil_outcome answer,
                       shared_run runs[THREADS])
{
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        runs[i] = (shared_run){p, clock, answer, {0}, 0};
        assert_int_equal(pthread_create(&th[i], NULL, run_executions, &runs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

static void executors_sharing_a_policy_drain_one_grpc_budget(void **state)
{
    (void)state;
    resil_fake_clock *fc = NULL;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.backoff.base = RESIL_MS(10);
    assert_int_equal(resil_budget_new(&o, &p.budget, NULL), 0);

    shared_run runs[THREADS];
    run_shared(&p, resil_fake_clock_clock(fc), resil_ok(), runs);
    assert_true(resil_budget_level(p.budget) == 10.0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(runs[i].stops[RESIL_STOP_SUCCEEDED], ROUNDS / 10);

    run_shared(&p, resil_fake_clock_clock(fc), resil_fail(RESIL_TRANSIENT, 503, NULL), runs);
    assert_true(resil_budget_level(p.budget) == 0.0);
    uint32_t attempts = 0;
    int executions = 0;
    for (int i = 0; i < THREADS; i++) {
        attempts += runs[i].attempts;
        executions += runs[i].stops[RESIL_STOP_BUDGET_EXHAUSTED] +
                      runs[i].stops[RESIL_STOP_ATTEMPTS_EXHAUSTED];
    }
    assert_int_equal(executions, THREADS * (ROUNDS / 10));
    /* A retry is granted only while tokens > 5, i.e. while at most four
     * failures have landed; every ask follows its own failure, so at most
     * four asks can see that. Each grant is one more attempt. */
    assert_in_range(attempts - (uint32_t)executions, 0, 4);
    resil_budget_free(p.budget);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_lose_no_update_under_contention),
        cmocka_unit_test(quota_grants_exactly_what_capacity_pays_for),
        cmocka_unit_test(quota_refunds_return_every_grant),
        cmocka_unit_test(ratio_grants_exactly_its_share),
        cmocka_unit_test(ratio_interleaved_grants_and_balance_add_up),
        cmocka_unit_test(ratio_survives_time_moving_under_it),
        cmocka_unit_test(executors_sharing_a_policy_drain_one_grpc_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
