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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_lose_no_update_under_contention),
        cmocka_unit_test(quota_grants_exactly_what_capacity_pays_for),
        cmocka_unit_test(quota_refunds_return_every_grant),
        cmocka_unit_test(ratio_grants_exactly_its_share),
        cmocka_unit_test(ratio_interleaved_grants_and_balance_add_up),
        cmocka_unit_test(ratio_survives_time_moving_under_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
