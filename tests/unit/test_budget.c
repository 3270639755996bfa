/*
 * test_budget.c — the three retry-budget models, their exact arithmetic,
 * their options and the plug-in interface. The ratio model runs on the fake
 * clock, so "over time" means virtual seconds.
 */
#include <math.h>

#include "test.h"

static const resil_outcome *transient(void)
{
    static resil_outcome o;
    o = resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    return &o;
}

static const resil_outcome *timed_out(void)
{
    static resil_outcome o;
    o = resil_fail(RESIL_TIMEOUT, 0, "attempt timeout");
    return &o;
}

static const resil_outcome *success(void)
{
    static resil_outcome o;
    o = resil_ok();
    return &o;
}

static resil_budget *make(const resil_budget_opts *o)
{
    resil_budget *b = NULL;
    resil_err err;
    assert_int_equal(resil_budget_new(o, &b, &err), 0);
    assert_non_null(b);
    return b;
}

static resil_budget *make_default(resil_budget_model m)
{
    resil_budget_opts o;
    resil_budget_opts_default(&o, m);
    return make(&o);
}

static void fail_n(resil_budget *b, int n)
{
    for (int i = 0; i < n; i++)
        resil_budget_on_result(b, transient(), 1, NULL);
}

static void succeed_n(resil_budget *b, int n)
{
    for (int i = 0; i < n; i++)
        resil_budget_on_result(b, success(), 1, NULL);
}

static bool may_retry(resil_budget *b)
{
    resil_budget_ticket t = {0};
    return resil_budget_try_retry(b, transient(), &t);
}

/* ---- defaults ------------------------------------------------------------ */

static void defaults_are_the_documented_numbers(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    assert_int_equal(o.model, RESIL_BUDGET_QUOTA);
    assert_true(o.max_tokens == 10.0);
    assert_true(o.token_ratio == 0.1);
    assert_int_equal(o.capacity, 500);
    assert_int_equal(o.retry_cost, 5);
    assert_int_equal(o.timeout_cost, 10);
    assert_int_equal(o.success_increment, 1);
    assert_duration_equal(o.ttl, RESIL_S(10));
    assert_true(o.percent == 0.2);
    assert_int_equal(o.min_per_second, 10);
    assert_null(o.clock);
}

/* ---- tokens (gRPC) -------------------------------------------------------- */

static void tokens_start_at_max(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    assert_true(resil_budget_level(b) == 10.0);
    assert_string_equal(resil_budget_name(b), "tokens");
    resil_budget_free(b);
}

static void tokens_stop_retries_after_five_consecutive_failures(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    for (int i = 1; i <= 4; i++) {
        fail_n(b, 1);
        assert_true(may_retry(b)); /* 9, 8, 7, 6 > 5 */
    }
    fail_n(b, 1);
    assert_true(resil_budget_level(b) == 5.0);
    assert_false(may_retry(b)); /* 5 is not above max/2 */
    resil_budget_free(b);
}

static void tokens_one_success_lifts_five_back_above_half(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    fail_n(b, 5);
    succeed_n(b, 1);
    assert_near(resil_budget_level(b), 5.1, 1e-9);
    assert_true(may_retry(b));
    resil_budget_free(b);
}

static void tokens_from_empty_need_fifty_one_successes(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    fail_n(b, 10);
    assert_true(resil_budget_level(b) == 0.0);
    succeed_n(b, 50);
    assert_near(resil_budget_level(b), 5.0, 1e-9);
    assert_false(may_retry(b));
    succeed_n(b, 1);
    assert_true(may_retry(b));
    resil_budget_free(b);
}

static void tokens_floor_at_zero(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    fail_n(b, 25);
    assert_true(resil_budget_level(b) == 0.0);
    succeed_n(b, 1);
    assert_near(resil_budget_level(b), 0.1, 1e-9);
    resil_budget_free(b);
}

static void tokens_cap_at_max(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    succeed_n(b, 100);
    assert_true(resil_budget_level(b) == 10.0);
    fail_n(b, 1);
    assert_true(resil_budget_level(b) == 9.0);
    resil_budget_free(b);
}

static void tokens_asking_costs_nothing(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    for (int i = 0; i < 100; i++)
        assert_true(may_retry(b));
    assert_true(resil_budget_level(b) == 10.0);
    resil_budget_free(b);
}

static void tokens_ignore_permanent_cancelled_and_rejected(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    resil_outcome quiet[] = {resil_fail(RESIL_PERMANENT, 400, NULL),
                             resil_fail(RESIL_CANCELLED, 0, NULL),
                             resil_fail(RESIL_REJECTED, 0, NULL)};
    for (int round = 0; round < 10; round++)
        for (size_t i = 0; i < 3; i++)
            resil_budget_on_result(b, &quiet[i], 1, NULL);
    assert_true(resil_budget_level(b) == 10.0);
    resil_budget_free(b);
}

static void tokens_count_throttled_and_timeout_failures(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_TOKENS);
    resil_outcome th = resil_fail_after(RESIL_THROTTLED, 429, NULL, RESIL_S(1));
    resil_budget_on_result(b, &th, 1, NULL);
    resil_budget_on_result(b, timed_out(), 1, NULL);
    assert_true(resil_budget_level(b) == 8.0);
    resil_budget_free(b);
}

static void tokens_with_custom_max_and_ratio(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    o.max_tokens = 4;
    o.token_ratio = 0.5;
    resil_budget *b = make(&o);
    fail_n(b, 1);
    assert_true(may_retry(b)); /* 3 > 2 */
    fail_n(b, 1);
    assert_false(may_retry(b)); /* 2 */
    succeed_n(b, 1);
    assert_true(resil_budget_level(b) == 2.5);
    assert_true(may_retry(b));
    resil_budget_free(b);
}

/* ---- quota (AWS standard) ------------------------------------------------- */

static void quota_starts_at_capacity(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_QUOTA);
    assert_true(resil_budget_level(b) == 500.0);
    assert_string_equal(resil_budget_name(b), "quota");
    resil_budget_free(b);
}

static void quota_retry_costs_five(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_QUOTA);
    resil_budget_ticket t = {0};
    assert_true(resil_budget_try_retry(b, transient(), &t));
    assert_int_equal(t.last_cost, 5);
    assert_true(resil_budget_level(b) == 495.0);
    resil_budget_free(b);
}

static void quota_retry_after_timeout_costs_ten(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_QUOTA);
    resil_budget_ticket t = {0};
    assert_true(resil_budget_try_retry(b, timed_out(), &t));
    assert_int_equal(t.last_cost, 10);
    assert_true(resil_budget_level(b) == 490.0);
    resil_budget_free(b);
}

static void quota_denies_a_retry_it_cannot_pay(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 12;
    resil_budget *b = make(&o);
    resil_budget_ticket t = {0};
    assert_true(resil_budget_try_retry(b, transient(), &t));
    assert_true(resil_budget_try_retry(b, transient(), &t));
    assert_false(resil_budget_try_retry(b, transient(), &t)); /* 2 left < 5 */
    assert_int_equal(t.last_cost, 5); /* a denial leaves the ticket alone */
    assert_true(resil_budget_level(b) == 2.0);
    assert_false(resil_budget_try_retry(b, timed_out(), &t));
    resil_budget_free(b);
}

static void quota_exact_balance_pays(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 10;
    resil_budget *b = make(&o);
    resil_budget_ticket t = {0};
    assert_true(resil_budget_try_retry(b, timed_out(), &t));
    assert_true(resil_budget_level(b) == 0.0);
    resil_budget_free(b);
}

static void quota_first_try_success_adds_increment_up_to_capacity(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_QUOTA);
    resil_budget_ticket t = {0};
    resil_budget_on_result(b, success(), 1, &t);
    assert_true(resil_budget_level(b) == 500.0); /* already full */
    assert_true(resil_budget_try_retry(b, timed_out(), &t));
    resil_budget_ticket fresh = {0};
    resil_budget_on_result(b, success(), 1, &fresh);
    resil_budget_on_result(b, success(), 1, &fresh);
    assert_true(resil_budget_level(b) == 492.0);
    resil_budget_free(b);
}

static void quota_success_after_retries_refunds_last_cost_once(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_QUOTA);
    resil_budget_ticket t = {0};
    resil_budget_on_result(b, timed_out(), 1, &t);
    assert_true(resil_budget_try_retry(b, timed_out(), &t)); /* -10 */
    resil_budget_on_result(b, transient(), 2, &t);
    assert_true(resil_budget_try_retry(b, transient(), &t)); /* -5 */
    assert_true(resil_budget_level(b) == 485.0);
    resil_budget_on_result(b, success(), 3, &t); /* refunds 5, not 15 */
    assert_true(resil_budget_level(b) == 490.0);
    assert_int_equal(t.last_cost, 0);
    resil_budget_on_result(b, success(), 3, &t);
    assert_true(resil_budget_level(b) == 490.0);
    resil_budget_free(b);
}

static void quota_failures_move_nothing(void **state)
{
    (void)state;
    resil_budget *b = make_default(RESIL_BUDGET_QUOTA);
    resil_budget_ticket t = {0};
    for (uint32_t i = 1; i <= 10; i++)
        resil_budget_on_result(b, transient(), i, &t);
    assert_true(resil_budget_level(b) == 500.0);
    resil_budget_free(b);
}

static void quota_zero_cost_always_granted(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 1;
    o.retry_cost = 0;
    resil_budget *b = make(&o);
    for (int i = 0; i < 50; i++)
        assert_true(may_retry(b));
    assert_true(resil_budget_level(b) == 1.0);
    resil_budget_free(b);
}

/* ---- ratio (Finagle) ------------------------------------------------------- */

typedef struct ratio_fixture {
    resil_fake_clock *fc;
    resil_budget *b;
} ratio_fixture;

static ratio_fixture ratio(double percent, int32_t min_per_second, resil_duration ttl)
{
    ratio_fixture f;
    assert_int_equal(resil_fake_clock_new(0, 0, &f.fc), 0);
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
    o.percent = percent;
    o.min_per_second = min_per_second;
    o.ttl = ttl;
    o.clock = resil_fake_clock_clock(f.fc);
    f.b = make(&o);
    return f;
}

static void ratio_done(ratio_fixture *f)
{
    resil_budget_free(f->b);
    resil_fake_clock_free(f->fc);
}

static int grants(resil_budget *b, int tries)
{
    int n = 0;
    for (int i = 0; i < tries; i++)
        n += may_retry(b);
    return n;
}

static void requests_n(resil_budget *b, int n)
{
    for (int i = 0; i < n; i++)
        resil_budget_on_request(b);
}

static void ratio_floor_is_min_per_second_times_ttl(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 10, RESIL_S(10));
    assert_string_equal(resil_budget_name(f.b), "ratio");
    assert_true(resil_budget_level(f.b) == 100.0);
    assert_int_equal(grants(f.b, 150), 100);
    assert_true(resil_budget_level(f.b) == 0.0);
    ratio_done(&f);
}

static void ratio_allows_percent_of_requests(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 0, RESIL_S(10));
    assert_false(may_retry(f.b));
    requests_n(f.b, 100);
    assert_true(resil_budget_level(f.b) == 20.0);
    assert_int_equal(grants(f.b, 50), 20);
    ratio_done(&f);
}

static void ratio_floor_and_percent_add_up(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 1, RESIL_S(10));
    requests_n(f.b, 50);
    assert_int_equal(grants(f.b, 50), 20); /* 10 floor + 10 earned */
    ratio_done(&f);
}

static void ratio_fractions_of_a_retry_accumulate(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 0, RESIL_S(10));
    requests_n(f.b, 4);
    assert_false(may_retry(f.b)); /* 0.8 of a retry */
    requests_n(f.b, 1);
    assert_true(may_retry(f.b)); /* exactly 1.0 */
    assert_false(may_retry(f.b));
    ratio_done(&f);
}

static void ratio_spent_retries_return_after_ttl(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 10, RESIL_S(10));
    assert_int_equal(grants(f.b, 100), 100);
    resil_fake_clock_advance(f.fc, RESIL_S(9));
    assert_false(may_retry(f.b));
    resil_fake_clock_advance(f.fc, RESIL_S(1));
    assert_true(resil_budget_level(f.b) == 100.0);
    ratio_done(&f);
}

static void ratio_requests_leave_the_window_after_ttl(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.5, 0, RESIL_S(10));
    requests_n(f.b, 10); /* at t = 0, in the bucket [0 s, 1 s) */
    resil_fake_clock_advance(f.fc, RESIL_S(10) - 1);
    assert_true(resil_budget_level(f.b) == 5.0);
    resil_fake_clock_advance(f.fc, 1);
    assert_true(resil_budget_level(f.b) == 0.0);
    assert_false(may_retry(f.b));
    ratio_done(&f);
}

static void ratio_window_slides_a_tenth_at_a_time(void **state)
{
    (void)state;
    ratio_fixture f = ratio(1.0, 0, RESIL_S(10));
    for (int s = 0; s < 10; s++) {
        requests_n(f.b, 1);
        resil_fake_clock_advance(f.fc, RESIL_S(1));
    }
    /* now t = 10 s: the request made at 0 s has left, nine remain */
    assert_true(resil_budget_level(f.b) == 9.0);
    resil_fake_clock_advance(f.fc, RESIL_S(4));
    assert_true(resil_budget_level(f.b) == 5.0);
    resil_fake_clock_advance(f.fc, RESIL_S(100));
    assert_true(resil_budget_level(f.b) == 0.0);
    ratio_done(&f);
}

static void ratio_short_ttl_shrinks_the_floor(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 10, RESIL_MS(1500));
    assert_true(resil_budget_level(f.b) == 15.0);
    ratio_done(&f);
}

static void ratio_zero_percent_and_zero_floor_deny_everything(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.0, 0, RESIL_S(10));
    requests_n(f.b, 1000);
    assert_false(may_retry(f.b));
    assert_true(resil_budget_level(f.b) == 0.0);
    ratio_done(&f);
}

static void ratio_grant_marks_the_ticket(void **state)
{
    (void)state;
    ratio_fixture f = ratio(0.2, 10, RESIL_S(10));
    resil_budget_ticket t = {0};
    assert_true(resil_budget_try_retry(f.b, transient(), &t));
    assert_int_equal(t.last_cost, 1);
    resil_budget_on_result(f.b, success(), 2, &t); /* no refunds in this model */
    assert_true(resil_budget_level(f.b) == 99.0);
    ratio_done(&f);
}

/* ---- options ------------------------------------------------------------- */

static void expect_rejected(const resil_budget_opts *o, const char *fragment)
{
    static int sentinel;
    resil_budget *b = (resil_budget *)&sentinel; /* must be reset to NULL */
    resil_err err = {0, ""};
    assert_int_equal(resil_budget_new(o, &b, &err), RESIL_EINVAL);
    assert_null(b);
    assert_int_equal(err.code, RESIL_EINVAL);
    if (strstr(err.message, fragment) == NULL)
        fail_msg("message '%s' lacks '%s'", err.message, fragment);
}

static void expect_accepted(const resil_budget_opts *o)
{
    resil_budget_free(make(o));
}

static void tokens_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_budget_opts o;
    const double bad_max[] = {0, -1, 1000.5, NAN, INFINITY};
    for (size_t i = 0; i < 5; i++) {
        resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
        o.max_tokens = bad_max[i];
        expect_rejected(&o, "budget.max_tokens must be in (0, 1000]");
    }
    const double bad_ratio[] = {0, 0.0009, -0.1, 10.5, NAN};
    for (size_t i = 0; i < 5; i++) {
        resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
        o.token_ratio = bad_ratio[i];
        expect_rejected(&o, "budget.token_ratio must be in [0.001, max_tokens=10]");
    }
}

static void tokens_option_boundaries_are_accepted(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    o.max_tokens = 1000;
    o.token_ratio = 1000;
    expect_accepted(&o);
    o.max_tokens = 0.001;
    o.token_ratio = 0.001;
    expect_accepted(&o);
}

static void quota_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 0;
    expect_rejected(&o, "budget.capacity must be >= 1, got 0");
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.retry_cost = -1;
    expect_rejected(&o, "budget.retry_cost must be >= 0, got -1");
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.timeout_cost = -1;
    expect_rejected(&o, "budget.timeout_cost must be >= 0, got -1");
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.success_increment = -1;
    expect_rejected(&o, "budget.success_increment must be >= 0, got -1");
}

static void quota_option_boundaries_are_accepted(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    o.capacity = 1;
    o.retry_cost = 0;
    o.timeout_cost = 0;
    o.success_increment = 0;
    expect_accepted(&o);
    o.capacity = INT32_MAX;
    o.retry_cost = INT32_MAX;
    o.timeout_cost = INT32_MAX;
    o.success_increment = INT32_MAX;
    resil_budget *b = make(&o);
    resil_budget_ticket t = {0};
    assert_true(resil_budget_try_retry(b, timed_out(), &t));
    resil_budget_on_result(b, success(), 1, &t);
    resil_budget_on_result(b, success(), 1, &t);
    assert_true(resil_budget_level(b) == (double)INT32_MAX);
    resil_budget_free(b);
}

static void ratio_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_budget_opts o;
    const resil_duration bad_ttl[] = {0, RESIL_MS(999), RESIL_S(60) + 1, -RESIL_S(1)};
    for (size_t i = 0; i < 4; i++) {
        resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
        o.ttl = bad_ttl[i];
        expect_rejected(&o, "budget.ttl must be in [1s, 60s]");
    }
    const double bad_percent[] = {-0.01, 1000.01, NAN};
    for (size_t i = 0; i < 3; i++) {
        resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
        o.percent = bad_percent[i];
        expect_rejected(&o, "budget.percent must be in [0, 1000]");
    }
    resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
    o.min_per_second = -1;
    expect_rejected(&o, "budget.min_per_second must be >= 0, got -1");
}

static void a_bad_ttl_is_shown_in_the_duration_parsers_units(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
    o.ttl = RESIL_MS(999);
    expect_rejected(&o, "budget.ttl must be in [1s, 60s], got 999ms");
    o.ttl = RESIL_S(60) + 1;
    expect_rejected(&o, "budget.ttl must be in [1s, 60s], got 1m1ns");
}

static void ratio_option_boundaries_are_accepted(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_RATIO);
    o.ttl = RESIL_S(1);
    o.percent = 0;
    o.min_per_second = 0;
    expect_accepted(&o);
    o.ttl = RESIL_S(60);
    o.percent = 1000;
    o.min_per_second = INT32_MAX;
    resil_budget *b = make(&o);
    for (int i = 0; i < 1000; i++)
        resil_budget_on_request(b);
    assert_true(may_retry(b));
    assert_true(resil_budget_level(b) > 1e11);
    resil_budget_free(b);
}

static void unknown_model_is_rejected_by_name(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    o.model = (resil_budget_model)7;
    expect_rejected(&o, "budget.model must be tokens, quota or ratio, got 7");
}

static void only_the_chosen_models_fields_are_checked(void **state)
{
    (void)state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    o.ttl = 0;
    o.capacity = -5;
    expect_accepted(&o);
}

static void null_arguments_are_rejected(void **state)
{
    (void)state;
    resil_budget *b = NULL;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    assert_int_equal(resil_budget_new(NULL, &b, NULL), RESIL_EINVAL);
    assert_int_equal(resil_budget_new(&o, NULL, NULL), RESIL_EINVAL);
    resil_budget_free(NULL);
}

/* ---- names --------------------------------------------------------------- */

static void model_names_round_trip(void **state)
{
    (void)state;
    assert_string_equal(resil_budget_model_name(RESIL_BUDGET_TOKENS), "tokens");
    assert_string_equal(resil_budget_model_name(RESIL_BUDGET_QUOTA), "quota");
    assert_string_equal(resil_budget_model_name(RESIL_BUDGET_RATIO), "ratio");
    assert_string_equal(resil_budget_model_name((resil_budget_model)9), "unknown");
    resil_budget_model m;
    const char *names[] = {"tokens", "quota", "ratio"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(resil_budget_model_parse(names[i], &m), 0);
        assert_string_equal(resil_budget_model_name(m), names[i]);
    }
}

static void model_parse_accepts_the_origin_names(void **state)
{
    (void)state;
    resil_budget_model m;
    assert_int_equal(resil_budget_model_parse("grpc", &m), 0);
    assert_int_equal(m, RESIL_BUDGET_TOKENS);
    assert_int_equal(resil_budget_model_parse("aws", &m), 0);
    assert_int_equal(m, RESIL_BUDGET_QUOTA);
    assert_int_equal(resil_budget_model_parse("finagle", &m), 0);
    assert_int_equal(m, RESIL_BUDGET_RATIO);
}

static void model_parse_ignores_ascii_case(void **state)
{
    (void)state;
    resil_budget_model m;
    assert_int_equal(resil_budget_model_parse("Tokens", &m), 0);
    assert_int_equal(m, RESIL_BUDGET_TOKENS);
    assert_int_equal(resil_budget_model_parse("AWS", &m), 0);
    assert_int_equal(m, RESIL_BUDGET_QUOTA);
}

static void model_parse_rejects_unknown_names(void **state)
{
    (void)state;
    resil_budget_model m = RESIL_BUDGET_QUOTA;
    assert_int_equal(resil_budget_model_parse("leaky", &m), RESIL_EINVAL);
    assert_int_equal(resil_budget_model_parse("", &m), RESIL_EINVAL);
    assert_int_equal(resil_budget_model_parse(NULL, &m), RESIL_EINVAL);
    assert_int_equal(m, RESIL_BUDGET_QUOTA);
}

/* ---- plug-ins ------------------------------------------------------------- */

typedef struct spy {
    int requests, tries, results, destroyed;
    uint32_t last_attempt;
} spy;

static void spy_on_request(void *self) { ((spy *)self)->requests++; }

static bool spy_try_retry(void *self, const resil_outcome *cause, resil_budget_ticket *t)
{
    (void)cause;
    t->last_cost = 7;
    return ++((spy *)self)->tries % 2 == 1;
}

static void spy_on_result(void *self, const resil_outcome *o, uint32_t attempt,
                          resil_budget_ticket *t)
{
    (void)o;
    (void)t;
    ((spy *)self)->results++;
    ((spy *)self)->last_attempt = attempt;
}

static double spy_level(void *self) { return ((spy *)self)->tries; }

static void spy_destroy(void *self) { ((spy *)self)->destroyed++; }

static const resil_budget_ops spy_ops = {
    .size = sizeof(resil_budget_ops),
    .name = "spy",
    .on_request = spy_on_request,
    .try_retry = spy_try_retry,
    .on_result = spy_on_result,
    .level = spy_level,
    .destroy = spy_destroy,
};

static void custom_budget_receives_every_call(void **state)
{
    (void)state;
    spy s = {0};
    resil_budget *b = NULL;
    assert_int_equal(resil_budget_new_custom(&spy_ops, &s, &b), 0);
    resil_budget_ticket t = {0};
    resil_budget_on_request(b);
    assert_true(resil_budget_try_retry(b, transient(), &t));
    assert_int_equal(t.last_cost, 7);
    assert_false(resil_budget_try_retry(b, transient(), &t));
    resil_budget_on_result(b, success(), 3, &t);
    assert_true(resil_budget_level(b) == 2.0);
    assert_string_equal(resil_budget_name(b), "spy");
    assert_int_equal(s.requests, 1);
    assert_int_equal(s.results, 1);
    assert_int_equal(s.last_attempt, 3);
    resil_budget_free(b);
    assert_int_equal(s.destroyed, 1);
}

static void custom_budget_needs_every_operation(void **state)
{
    (void)state;
    spy s = {0};
    resil_budget *b = NULL;
    resil_budget_ops ops = spy_ops;
    ops.try_retry = NULL;
    assert_int_equal(resil_budget_new_custom(&ops, &s, &b), RESIL_EINVAL);
    assert_int_equal(resil_budget_new_custom(NULL, &s, &b), RESIL_EINVAL);
    ops = spy_ops;
    ops.destroy = NULL; /* optional */
    ops.name = NULL;
    assert_int_equal(resil_budget_new_custom(&ops, &s, &b), 0);
    assert_string_equal(resil_budget_name(b), "custom");
    resil_budget_free(b);
    assert_int_equal(s.destroyed, 0);
}

static void custom_budget_refuses_a_table_that_does_not_reach_level(void **state)
{
    (void)state;
    spy s = {0};
    resil_budget *b = NULL;
    resil_budget_ops ops = spy_ops;
    ops.size = offsetof(resil_budget_ops, level);
    assert_int_equal(resil_budget_new_custom(&ops, &s, &b), RESIL_EINVAL);
    ops.size = 0;
    assert_int_equal(resil_budget_new_custom(&ops, &s, &b), RESIL_EINVAL);
}

/* A table written against a header that ended at level: its destroy,
 * though set, lies beyond its size and is not called. */
static void custom_budget_reads_no_operation_beyond_the_table_size(void **state)
{
    (void)state;
    spy s = {0};
    resil_budget *b = NULL;
    resil_budget_ops ops = spy_ops;
    ops.size = offsetof(resil_budget_ops, destroy);
    assert_int_equal(resil_budget_new_custom(&ops, &s, &b), 0);
    resil_budget_free(b);
    assert_int_equal(s.destroyed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_the_documented_numbers),
        cmocka_unit_test(tokens_start_at_max),
        cmocka_unit_test(tokens_stop_retries_after_five_consecutive_failures),
        cmocka_unit_test(tokens_one_success_lifts_five_back_above_half),
        cmocka_unit_test(tokens_from_empty_need_fifty_one_successes),
        cmocka_unit_test(tokens_floor_at_zero),
        cmocka_unit_test(tokens_cap_at_max),
        cmocka_unit_test(tokens_asking_costs_nothing),
        cmocka_unit_test(tokens_ignore_permanent_cancelled_and_rejected),
        cmocka_unit_test(tokens_count_throttled_and_timeout_failures),
        cmocka_unit_test(tokens_with_custom_max_and_ratio),
        cmocka_unit_test(quota_starts_at_capacity),
        cmocka_unit_test(quota_retry_costs_five),
        cmocka_unit_test(quota_retry_after_timeout_costs_ten),
        cmocka_unit_test(quota_denies_a_retry_it_cannot_pay),
        cmocka_unit_test(quota_exact_balance_pays),
        cmocka_unit_test(quota_first_try_success_adds_increment_up_to_capacity),
        cmocka_unit_test(quota_success_after_retries_refunds_last_cost_once),
        cmocka_unit_test(quota_failures_move_nothing),
        cmocka_unit_test(quota_zero_cost_always_granted),
        cmocka_unit_test(ratio_floor_is_min_per_second_times_ttl),
        cmocka_unit_test(ratio_allows_percent_of_requests),
        cmocka_unit_test(ratio_floor_and_percent_add_up),
        cmocka_unit_test(ratio_fractions_of_a_retry_accumulate),
        cmocka_unit_test(ratio_spent_retries_return_after_ttl),
        cmocka_unit_test(ratio_requests_leave_the_window_after_ttl),
        cmocka_unit_test(ratio_window_slides_a_tenth_at_a_time),
        cmocka_unit_test(ratio_short_ttl_shrinks_the_floor),
        cmocka_unit_test(ratio_zero_percent_and_zero_floor_deny_everything),
        cmocka_unit_test(ratio_grant_marks_the_ticket),
        cmocka_unit_test(tokens_options_are_checked_by_name),
        cmocka_unit_test(tokens_option_boundaries_are_accepted),
        cmocka_unit_test(quota_options_are_checked_by_name),
        cmocka_unit_test(quota_option_boundaries_are_accepted),
        cmocka_unit_test(ratio_options_are_checked_by_name),
        cmocka_unit_test(ratio_option_boundaries_are_accepted),
        cmocka_unit_test(unknown_model_is_rejected_by_name),
        cmocka_unit_test(only_the_chosen_models_fields_are_checked),
        cmocka_unit_test(null_arguments_are_rejected),
        cmocka_unit_test(a_bad_ttl_is_shown_in_the_duration_parsers_units),
        cmocka_unit_test(model_names_round_trip),
        cmocka_unit_test(model_parse_accepts_the_origin_names),
        cmocka_unit_test(model_parse_ignores_ascii_case),
        cmocka_unit_test(model_parse_rejects_unknown_names),
        cmocka_unit_test(custom_budget_receives_every_call),
        cmocka_unit_test(custom_budget_needs_every_operation),
        cmocka_unit_test(custom_budget_refuses_a_table_that_does_not_reach_level),
        cmocka_unit_test(custom_budget_reads_no_operation_beyond_the_table_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
