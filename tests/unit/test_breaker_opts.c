/*
 * test_breaker_opts.c — the breaker's documented defaults, and every option
 * refused at construction with its field named (a plug-in's table and name:
 * test_breaker_rules.c, beside its stubs). Boundaries are tested from
 * both sides: the last accepted value and the first refused one.
 */
#include <math.h>

#include "test.h"

static resil_breaker_opts defaults(void)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    return o;
}

/* Construct with o: expect success, free it. */
static void accepted(const resil_breaker_opts *o)
{
    resil_breaker *b = NULL;
    resil_err err = {0};
    int rc = resil_breaker_new(o, &b, &err);
    if (rc != 0)
        fail_msg("refused: %s", err.message);
    resil_breaker_free(b);
}

/* Construct with o: expect RESIL_EINVAL and exactly this message. */
static void refused(const resil_breaker_opts *o, const char *message)
{
    resil_breaker *b = (resil_breaker *)1;
    resil_err err = {0};
    assert_int_equal(resil_breaker_new(o, &b, &err), RESIL_EINVAL);
    assert_null(b);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_int_equal(resil_breaker_opts_validate(o, NULL), RESIL_EINVAL);
}

static void defaults_are_the_documented_values(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    assert_int_equal(o.kind, RESIL_BREAKER_RATIO);
    assert_int_equal(o.failure_threshold, 5);
    assert_near(o.failure_ratio, 0.1, 0);
    assert_int_equal(o.minimum_throughput, 100);
    assert_int_equal(o.sampling_duration, RESIL_S(30));
    assert_int_equal(o.slow_call_duration, 0);
    assert_near(o.slow_call_ratio, 1.0, 0);
    assert_int_equal(o.break_duration, RESIL_S(5));
    assert_near(o.break_growth, 1.0, 0);
    assert_int_equal(o.max_break_duration, RESIL_S(300));
    assert_int_equal(o.half_open_probes, 1);
    assert_int_equal(o.success_threshold, 1);
    assert_int_equal(o.probe_timeout, 0);
    assert_int_equal(o.window, RESIL_BREAKER_WINDOW_TIME);
    assert_int_equal(o.window_size, 100);
    assert_null(o.trip);
    assert_null(o.trip_ud);
    assert_null(o.clock);
    assert_null(o.listener);
    assert_null(o.name);
    assert_int_equal(resil_breaker_opts_validate(&o, NULL), 0);
    accepted(&o);
}

static void kind_must_be_a_known_kind(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.kind = (resil_breaker_kind)0;
    refused(&o, "breaker.kind must combine consecutive, ratio and predicate, got 0");
    o.kind = (resil_breaker_kind)8;
    refused(&o, "breaker.kind must combine consecutive, ratio and predicate, got 8");
    o.kind = (resil_breaker_kind)(RESIL_BREAKER_BOTH | 8);
    refused(&o, "breaker.kind must combine consecutive, ratio and predicate, got 11");
    o.kind = RESIL_BREAKER_BOTH;
    accepted(&o);
}

static bool never(const resil_breaker_counts *c, void *ud)
{
    (void)c, (void)ud;
    return false;
}

static void the_predicate_flag_and_its_callback_go_together(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.kind = RESIL_BREAKER_PREDICATE;
    refused(&o, "breaker.trip must be set when kind includes predicate");
    o.trip = never;
    accepted(&o);
    o.kind = (resil_breaker_kind)(RESIL_BREAKER_BOTH | RESIL_BREAKER_PREDICATE);
    accepted(&o);
    o.kind = RESIL_BREAKER_RATIO;
    refused(&o, "breaker.trip is set but kind does not include predicate");
}

static void window_must_be_time_or_count(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.window = (resil_breaker_window)2;
    refused(&o, "breaker.window must be time or count, got 2");
    o.window = (resil_breaker_window)-1;
    refused(&o, "breaker.window must be time or count, got -1");
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    accepted(&o);
}

static void window_size_must_be_in_range_for_a_count_window(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    o.window_size = 0;
    refused(&o, "breaker.window_size must be in [1, 10000], got 0");
    o.window_size = 10001;
    refused(&o, "breaker.window_size must be in [1, 10000], got 10001");
    o.window_size = 1;
    accepted(&o);
    o.window_size = 10000;
    accepted(&o);
    o.window = RESIL_BREAKER_WINDOW_TIME; /* never looked at */
    o.window_size = 0;
    accepted(&o);
}

static void failure_threshold_must_be_at_least_one(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = 0;
    refused(&o, "breaker.failure_threshold must be >= 1, got 0");
    o.failure_threshold = 1;
    accepted(&o);
}

static void failure_ratio_must_be_in_zero_one(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.failure_ratio = 0;
    refused(&o, "breaker.failure_ratio must be in (0,1], got 0");
    o.failure_ratio = -0.5;
    refused(&o, "breaker.failure_ratio must be in (0,1], got -0.5");
    o.failure_ratio = 1.5;
    refused(&o, "breaker.failure_ratio must be in (0,1], got 1.5");
    o.failure_ratio = NAN;
    refused(&o, "breaker.failure_ratio must be in (0,1], got nan");
    o.failure_ratio = 1.0;
    accepted(&o);
    o.failure_ratio = 1e-9;
    accepted(&o);
}

static void minimum_throughput_must_be_two_when_the_window_is_used(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.minimum_throughput = 1;
    refused(&o, "breaker.minimum_throughput must be >= 2, got 1");
    o.kind = RESIL_BREAKER_BOTH;
    refused(&o, "breaker.minimum_throughput must be >= 2, got 1");
    o.kind = RESIL_BREAKER_CONSECUTIVE; /* never looked at */
    accepted(&o);
    o.slow_call_duration = RESIL_S(1); /* the slow-call rule uses the window */
    refused(&o, "breaker.minimum_throughput must be >= 2, got 1");
    o.minimum_throughput = 2;
    accepted(&o);
}

static void sampling_duration_must_be_at_least_half_a_second(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.sampling_duration = RESIL_MS(499);
    refused(&o, "breaker.sampling_duration must be >= 500ms, got 499ms");
    o.sampling_duration = -RESIL_S(1);
    refused(&o, "breaker.sampling_duration must be >= 500ms, got -1s");
    o.sampling_duration = RESIL_MS(500);
    accepted(&o);
}

static void slow_call_options_are_checked(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.slow_call_duration = -1;
    refused(&o, "breaker.slow_call_duration must be >= 0 (0 = off), got -1ns");
    o.slow_call_duration = RESIL_S(1);
    o.slow_call_ratio = 0;
    refused(&o, "breaker.slow_call_ratio must be in (0,1], got 0");
    o.slow_call_ratio = 1.01;
    refused(&o, "breaker.slow_call_ratio must be in (0,1], got 1.01");
    o.slow_call_ratio = NAN;
    refused(&o, "breaker.slow_call_ratio must be in (0,1], got nan");
    o.slow_call_ratio = 0.5;
    accepted(&o);
}

static void break_duration_must_be_positive(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.break_duration = 0;
    refused(&o, "breaker.break_duration must be > 0, got 0s");
    o.break_duration = -RESIL_MS(5);
    refused(&o, "breaker.break_duration must be > 0, got -5ms");
    o.break_duration = 1;
    accepted(&o);
}

static void break_growth_must_be_finite_and_at_least_one(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.break_growth = 0.99;
    refused(&o, "breaker.break_growth must be a finite number >= 1, got 0.99");
    o.break_growth = NAN;
    refused(&o, "breaker.break_growth must be a finite number >= 1, got nan");
    o.break_growth = INFINITY;
    refused(&o, "breaker.break_growth must be a finite number >= 1, got inf");
    o.break_growth = 1.5;
    accepted(&o);
}

static void max_break_duration_must_cover_the_break_when_growing(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.max_break_duration = -1;
    refused(&o, "breaker.max_break_duration must be >= 0, got -1ns");
    o.max_break_duration = RESIL_S(1); /* below the 5 s break, but no growth */
    accepted(&o);
    o.break_growth = 2;
    refused(&o, "breaker.max_break_duration must be >= break_duration when "
                "break_growth > 1, got 1s");
    o.max_break_duration = RESIL_S(5);
    accepted(&o);
}

static void half_open_probes_must_be_in_range(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.half_open_probes = 0;
    refused(&o, "breaker.half_open_probes must be in [1, 65535], got 0");
    o.half_open_probes = 65536;
    refused(&o, "breaker.half_open_probes must be in [1, 65535], got 65536");
    o.half_open_probes = 65535;
    accepted(&o);
}

static void success_threshold_must_be_at_least_one(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.success_threshold = 0;
    refused(&o, "breaker.success_threshold must be >= 1, got 0");
    o.success_threshold = 1000;
    accepted(&o);
}

static void probe_timeout_must_not_be_negative(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.probe_timeout = -RESIL_S(2);
    refused(&o, "breaker.probe_timeout must be >= 0 (0 = the break in force), got -2s");
    o.probe_timeout = RESIL_S(2);
    accepted(&o);
}

static void name_must_fit(void **state)
{
    (void)state;
    char name[RESIL_BREAKER_NAME_MAX + 1];
    memset(name, 'n', sizeof name);
    name[RESIL_BREAKER_NAME_MAX] = '\0';
    resil_breaker_opts o = defaults();
    o.name = name;
    refused(&o, "breaker.name must be shorter than 256 bytes, got 256");
    name[RESIL_BREAKER_NAME_MAX - 1] = '\0';
    accepted(&o);
}

static void the_first_bad_field_is_the_one_reported(void **state)
{
    (void)state;
    resil_breaker_opts o = defaults();
    o.failure_ratio = 2;
    o.half_open_probes = 0;
    refused(&o, "breaker.failure_ratio must be in (0,1], got 2");
}

static void null_arguments_are_refused(void **state)
{
    (void)state;
    resil_breaker *b;
    resil_err err = {0};
    assert_int_equal(resil_breaker_new(NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "breaker options must not be NULL");
    resil_breaker_opts o = defaults();
    assert_int_equal(resil_breaker_new(&o, NULL, &err), RESIL_EINVAL);
    assert_int_equal(resil_breaker_new(&o, &b, NULL), 0); /* err is optional */
    resil_breaker_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_the_documented_values),
        cmocka_unit_test(kind_must_be_a_known_kind),
        cmocka_unit_test(the_predicate_flag_and_its_callback_go_together),
        cmocka_unit_test(window_must_be_time_or_count),
        cmocka_unit_test(window_size_must_be_in_range_for_a_count_window),
        cmocka_unit_test(failure_threshold_must_be_at_least_one),
        cmocka_unit_test(failure_ratio_must_be_in_zero_one),
        cmocka_unit_test(minimum_throughput_must_be_two_when_the_window_is_used),
        cmocka_unit_test(sampling_duration_must_be_at_least_half_a_second),
        cmocka_unit_test(slow_call_options_are_checked),
        cmocka_unit_test(break_duration_must_be_positive),
        cmocka_unit_test(break_growth_must_be_finite_and_at_least_one),
        cmocka_unit_test(max_break_duration_must_cover_the_break_when_growing),
        cmocka_unit_test(half_open_probes_must_be_in_range),
        cmocka_unit_test(success_threshold_must_be_at_least_one),
        cmocka_unit_test(probe_timeout_must_not_be_negative),
        cmocka_unit_test(name_must_fit),
        cmocka_unit_test(the_first_bad_field_is_the_one_reported),
        cmocka_unit_test(null_arguments_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
