/*
 * test_fleet_budget.c — the fleet-wide retry budget: gRPC's tokens kept in
 * Redis, spent through local leases. The arithmetic is exact (thousandths),
 * so after a sync every figure is known: max 10, ratio 0.1, lease 2 unless
 * a test says otherwise.
 */
#include "fleet_test.h"

static const resil_outcome *failure(void)
{
    static resil_outcome o;
    o = resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    return &o;
}

static const resil_outcome *success(void)
{
    static resil_outcome o;
    o = resil_ok();
    return &o;
}

static resil_budget *fleet_budget(resil_redis *r, const char *name)
{
    resil_redis_budget_opts o;
    resil_redis_budget_opts_default(&o);
    o.name = name;
    resil_budget *b = NULL;
    resil_err err;
    int rc = resil_redis_budget_new(r, &o, &b, &err);
    if (rc != 0)
        fprintf(stderr, "fleet_budget: %s\n", err.message);
    assert_int_equal(rc, 0);
    return b;
}

static void report(resil_budget *b, const resil_outcome *o, int n)
{
    resil_budget_ticket t = {0};
    for (int i = 0; i < n; i++)
        resil_budget_on_result(b, o, 1, &t);
}

static bool may_retry(resil_budget *b)
{
    resil_budget_ticket t = {0};
    return resil_budget_try_retry(b, failure(), &t);
}

/* The shared count in Redis, in thousandths. */
static long long fleet_milli(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "resil:budget:%s", name);
    const char *argv[] = {"GET", key};
    redisReply *r = redis_server_command(fleet_server, 2, argv);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

static void a_new_budget_takes_its_first_lease_from_a_full_fleet(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_budget *b = fleet_budget(r, "first");
    assert_int_equal(fleet_milli("first"), 8000);
    assert_true(resil_budget_level(b) == 10.0);
    assert_true(may_retry(b));
    resil_budget_free(b);
    resil_redis_free(r);
}

static void failures_spend_the_lease_and_a_low_lease_is_renewed_at_once(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL); /* rounds only when asked or woken */
    resil_budget *b = fleet_budget(r, "renew");
    report(b, failure(), 2); /* lease 2 -> 0: wakes the sync thread */
    fleet_wait_until(may_retry(b));
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(fleet_milli("renew"), 6000);
    assert_true(resil_budget_level(b) == 8.0);
    resil_budget_free(b);
    resil_redis_free(r);
}

static void the_budget_denies_retries_fleet_wide_once_drained(void **state)
{
    (void)state;
    resil_redis *ra = fleet_client(NULL), *rb = fleet_client(NULL);
    resil_budget *a = fleet_budget(ra, "drain");
    resil_budget *b = fleet_budget(rb, "drain");
    assert_true(may_retry(a) && may_retry(b));

    report(a, failure(), 6); /* 10 - 6 = 4 tokens: not above max/2 */
    assert_int_equal(resil_redis_sync(ra), 0);
    assert_int_equal(resil_redis_sync(rb), 0);

    assert_false(may_retry(a));
    assert_false(may_retry(b)); /* B never failed */
    assert_true(resil_budget_level(b) == 4.0);
    resil_budget_free(a);
    resil_budget_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
}

static void successes_anywhere_refill_the_fleet(void **state)
{
    (void)state;
    resil_redis *ra = fleet_client(NULL), *rb = fleet_client(NULL);
    resil_budget *a = fleet_budget(ra, "refill");
    resil_budget *b = fleet_budget(rb, "refill");
    report(a, failure(), 6);
    assert_int_equal(resil_redis_sync(ra), 0);
    assert_int_equal(resil_redis_sync(rb), 0);
    assert_false(may_retry(b));

    report(b, success(), 20); /* +2 tokens: 6, one above max/2 */
    assert_int_equal(resil_redis_sync(rb), 0);
    assert_true(may_retry(b));
    assert_int_equal(resil_redis_sync(ra), 0);
    assert_false(may_retry(a)); /* B holds the one token of headroom */
    assert_int_equal(fleet_milli("refill"), 5000);
    resil_budget_free(a);
    resil_budget_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
}

static void permanent_failures_and_cancellations_move_nothing(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_budget *b = fleet_budget(r, "inert");
    resil_outcome permanent = resil_fail(RESIL_PERMANENT, 400, "bad request");
    resil_outcome cancelled = resil_fail(RESIL_CANCELLED, 0, NULL);
    report(b, &permanent, 10);
    report(b, &cancelled, 10);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(fleet_milli("inert"), 8000);
    assert_true(resil_budget_level(b) == 10.0);
    resil_budget_free(b);
    resil_redis_free(r);
}

static void a_freed_budget_returns_its_lease(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_budget *b = fleet_budget(r, "give-back");
    assert_int_equal(fleet_milli("give-back"), 8000);
    resil_budget_free(b);
    assert_int_equal(fleet_milli("give-back"), 10000);
    resil_redis_free(r);
}

static resil_outcome always_unavailable(resil_attempt_ctx *ctx)
{
    (*(int *)ctx->user)++;
    return resil_fail(RESIL_TRANSIENT, 503, "unavailable");
}

static void the_retry_executor_stops_on_a_drained_fleet_budget(void **state)
{
    (void)state;
    resil_redis *ra = fleet_client(NULL), *rb = fleet_client(NULL);
    resil_budget *a = fleet_budget(ra, "executor");
    resil_budget *b = fleet_budget(rb, "executor");
    report(a, failure(), 6);
    assert_int_equal(resil_redis_sync(ra), 0);
    assert_int_equal(resil_redis_sync(rb), 0);

    resil_fake_clock *fc = fleet_clock();
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = 5;
    p.budget = b;
    resil_exec_opts eo = {.clock = resil_fake_clock_clock(fc)};
    resil_retry_result res;
    int calls = 0;
    assert_int_equal(resil_retry_execute(&p, &eo, always_unavailable, &calls, &res, NULL), 0);
    assert_int_equal(res.stop, RESIL_STOP_BUDGET_EXHAUSTED);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(calls, 1);
    resil_fake_clock_free(fc);
    resil_budget_free(a);
    resil_budget_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_new_budget_takes_its_first_lease_from_a_full_fleet),
        T(failures_spend_the_lease_and_a_low_lease_is_renewed_at_once),
        T(the_budget_denies_retries_fleet_wide_once_drained),
        T(successes_anywhere_refill_the_fleet),
        T(permanent_failures_and_cancellations_move_nothing),
        T(a_freed_budget_returns_its_lease),
        T(the_retry_executor_stops_on_a_drained_fleet_budget),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
