/*
 * test_pipeline_retries.c — more than one retry in a pipeline, each with
 * its own predicate: the seed's authorization refresh (one retry on 401
 * whose hook refreshes the token) outside the retry for transient
 * failures. The outer retry sees only what the inner one gave up on.
 */
#include "test.h"

#define T0 RESIL_S(10)

/* A service that wants token "fresh": with "stale" it answers 401; its
 * first two calls with any token fail with 503. */
typedef struct service {
    char token[16];
    int calls;
    int refreshes;
    int tokens_seen_fresh;
    bool revoked; /* refreshing gets a token that is still refused */
} service;

static resil_outcome call_service(resil_attempt_ctx *ctx)
{
    service *s = ctx->user;
    s->calls++;
    if (s->calls <= 2)
        return resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    if (strcmp(s->token, "fresh") != 0)
        return resil_fail(RESIL_PERMANENT, 401, "unauthorized");
    s->tokens_seen_fresh++;
    return resil_ok();
}

static bool on_401(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return o->code == 401;
}

static void refresh_token(const resil_retry_info *info, void *user, void *ud)
{
    (void)info;
    (void)ud;
    service *s = user;
    snprintf(s->token, sizeof s->token, "%s", s->revoked ? "revoked" : "fresh");
    s->refreshes++;
}

typedef struct fixture {
    resil_fake_clock *fc;
    resil_pipeline *p;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(T0, 0, &f->fc), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("auth", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(f->fc));
    resil_retry_policy auth;
    resil_retry_policy_default(&auth);
    auth.max_attempts = 2;
    auth.retry_on = on_401;
    auth.backoff.kind = RESIL_BACKOFF_CONSTANT;
    auth.backoff.base = 0;
    auth.backoff.jitter = RESIL_JITTER_NONE;
    auth.on_retry = refresh_token;
    resil_retry_policy transient;
    resil_retry_policy_default(&transient);
    transient.max_attempts = 4;
    transient.backoff.base = RESIL_MS(100);
    transient.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &auth), 0);
    assert_int_equal(resil_pipeline_add_retry(b, &transient), 0);
    assert_int_equal(resil_pipeline_build(b, &f->p, NULL), 0);
    resil_pipeline_builder_free(b);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_pipeline_free(f->p);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

static void run(fixture *f, service *s, resil_attempt_record *records, size_t cap,
                resil_pipeline_result *out)
{
    resil_call c;
    resil_call_default(&c);
    c.user = s;
    c.records = records;
    c.records_cap = cap;
    assert_int_equal(resil_pipeline_execute(f->p, call_service, &c, out), 0);
}

static void the_inner_retry_rides_out_transient_failures_then_the_outer_refreshes(void **state)
{
    fixture *f = *state;
    service s = {.token = "stale"};
    resil_attempt_record rec[4];
    resil_pipeline_result out;
    run(f, &s, rec, 4, &out);
    assert_int_equal(out.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(s.calls, 4);      /* 503, 503, 401, then 200 */
    assert_int_equal(s.refreshes, 1);
    assert_int_equal(s.tokens_seen_fresh, 1);
    /* the transient retry's two waits; the refresh retry waits 0 */
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 3);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_MS(100));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 1), RESIL_MS(200));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 2), 0);
    assert_duration_equal(out.elapsed, RESIL_MS(300));
}

static void the_result_describes_the_outermost_retry(void **state)
{
    fixture *f = *state;
    service s = {.token = "stale"};
    resil_attempt_record rec[4];
    resil_pipeline_result out;
    run(f, &s, rec, 4, &out);
    assert_int_equal(out.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(out.attempts, 2);
    assert_int_equal(out.records_len, 2);
    assert_int_equal(rec[0].outcome.code, 401); /* the inner retry's run ended on it */
    assert_int_equal(rec[0].stop, RESIL_STOP_NONE);
    assert_int_equal(rec[1].outcome.kind, RESIL_SUCCESS);
    assert_int_equal(rec[1].stop, RESIL_STOP_SUCCEEDED);
}

static void the_outer_retry_leaves_other_failures_alone(void **state)
{
    fixture *f = *state;
    service s = {.token = "stale", .calls = -10}; /* transient every time */
    resil_pipeline_result out;
    run(f, &s, NULL, 0, &out);
    assert_int_equal(out.outcome.code, 503);
    assert_int_equal(out.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(out.attempts, 1);
    assert_int_equal(s.calls, -6); /* four calls: the inner retry's */
    assert_int_equal(s.refreshes, 0);
}

static void a_token_that_stays_refused_is_refreshed_once(void **state)
{
    fixture *f = *state;
    service s = {.token = "stale", .calls = 2, .revoked = true};
    resil_pipeline_result out;
    run(f, &s, NULL, 0, &out);
    assert_int_equal(s.refreshes, 1);
    assert_int_equal(s.calls, 4); /* 401, refresh, 401 */
    assert_int_equal(out.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(out.outcome.code, 401);
    assert_int_equal(out.attempts, 2);
}

static void nested_retries_multiply_in_the_worst_case_warning(void **state)
{
    (void)state;
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("nested", &b, NULL), 0);
    resil_timeout_opts total, attempt;
    resil_timeout_opts_default(&total);
    total.timeout = RESIL_S(30);
    resil_timeout_opts_default(&attempt);
    attempt.timeout = RESIL_S(2);
    resil_retry_policy outer, inner;
    resil_retry_policy_default(&outer);
    outer.max_attempts = 2;
    outer.backoff.kind = RESIL_BACKOFF_CONSTANT;
    outer.backoff.base = RESIL_S(1);
    outer.backoff.jitter = RESIL_JITTER_NONE;
    resil_retry_policy_default(&inner);
    inner.max_attempts = 3;
    inner.backoff.kind = RESIL_BACKOFF_CONSTANT;
    inner.backoff.base = RESIL_S(2);
    inner.backoff.jitter = RESIL_JITTER_NONE;
    resil_pipeline_add_total_timeout(b, &total);
    resil_pipeline_add_retry(b, &outer);
    resil_pipeline_add_retry(b, &inner);
    resil_pipeline_add_attempt_timeout(b, &attempt);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    /* inner: 3 × 2 s + 2 × 2 s = 10 s; outer: 2 × 10 s + 1 s = 21 s: fits */
    assert_int_equal(resil_pipeline_warning_count(p), 0);
    resil_pipeline_free(p);

    assert_int_equal(resil_pipeline_builder_new("nested", &b, NULL), 0);
    outer.max_attempts = 3;
    resil_pipeline_add_total_timeout(b, &total);
    resil_pipeline_add_retry(b, &outer);
    resil_pipeline_add_retry(b, &inner);
    resil_pipeline_add_attempt_timeout(b, &attempt);
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    /* outer: 3 × 10 s + 2 × 1 s = 32 s */
    assert_int_equal(resil_pipeline_warning_count(p), 1);
    assert_string_equal(resil_pipeline_warning(p, 0),
                        "worst case 32s over 2 nested retries exceeds the total timeout 30s: "
                        "later attempts will be cut short");
    resil_pipeline_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            the_inner_retry_rides_out_transient_failures_then_the_outer_refreshes, setup,
            teardown),
        cmocka_unit_test_setup_teardown(the_result_describes_the_outermost_retry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_outer_retry_leaves_other_failures_alone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_token_that_stays_refused_is_refreshed_once, setup,
                                        teardown),
        cmocka_unit_test(nested_retries_multiply_in_the_worst_case_warning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
