/*
 * test_fleet_values.c — the values of --fleet-rate, --fleet-concurrency and
 * --fleet-timeout (cli/fleet_values.c), in-process: the forms each accepts, the numbers it
 * makes of them, and the one sentence a bad value gets. The Redis tests
 * run the tool with them (tests/redis/test_http_fleet.c,
 * test_gateway_fleet.c).
 */
#include "test.h"

#include "fleet_values.h"

typedef struct quiet_args {
    args a;
    resil_err err;
} quiet_args;

static char *no_argv[] = {(char *)"resil test", NULL};

static void quiet(quiet_args *q)
{
    args_init(&q->a, "resil test", 1, no_argv);
    memset(&q->err, 0, sizeof q->err);
    q->a.err = &q->err;
}

static fleet_limit_opts rate_of(const char *v)
{
    quiet_args q;
    quiet(&q);
    fleet_limit_opts o = {0};
    if (fleet_rate_parse(&q.a, v, &o) != 0)
        fail_msg("'%s' refused: %s", v, q.err.message);
    return o;
}

static void a_rate_per_unit_has_a_burst_of_the_rate(void **state)
{
    (void)state;
    fleet_limit_opts o = rate_of("100/s");
    assert_int_equal(o.rate, 100);
    assert_int_equal(o.period, RESIL_S(1));
    assert_int_equal(o.burst, 100);
    o = rate_of("20/m");
    assert_int_equal(o.period, RESIL_S(60));
    o = rate_of("1/h");
    assert_int_equal(o.period, RESIL_S(3600));
}

static void a_rate_takes_a_duration_and_a_burst(void **state)
{
    (void)state;
    fleet_limit_opts o = rate_of("5/10s:40");
    assert_int_equal(o.rate, 5);
    assert_int_equal(o.period, RESIL_S(10));
    assert_int_equal(o.burst, 40);
    o = rate_of("1000000/s");
    assert_int_equal(o.rate, 1000000); /* one per microsecond: the finest */
}

static void expect_rate_refused(const char *v)
{
    quiet_args q;
    quiet(&q);
    fleet_limit_opts o = {.rate = 7};
    assert_int_equal(fleet_rate_parse(&q.a, v, &o), RESIL_EINVAL);
    assert_int_equal(o.rate, 7);
    char want[512];
    snprintf(want, sizeof want,
             "resil test: --fleet-rate must be RATE/PER[:BURST] (e.g. 100/s, 20/m:40, 5/10s) "
             "with RATE and BURST in 1..1000000000, PER s, m, h or 1ms..1d, and at most one "
             "per microsecond, got '%s'",
             v);
    assert_string_equal(q.err.message, want);
}

static void bad_rates_are_refused_whole(void **state)
{
    (void)state;
    expect_rate_refused("10");
    expect_rate_refused("0/s");
    expect_rate_refused("/s");
    expect_rate_refused("10/");
    expect_rate_refused("10/d");
    expect_rate_refused("10/2d");
    expect_rate_refused("10/0s");
    expect_rate_refused("-1/s");
    expect_rate_refused("1000000001/s");
    expect_rate_refused("2000000/s"); /* beyond one per microsecond */
    expect_rate_refused("10/s:");
    expect_rate_refused("10/s:0");
    expect_rate_refused("10/s:x");
    expect_rate_refused("10 /s");
}

static void a_concurrency_has_a_lease_of_five_seconds_unless_given(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    fleet_limit_opts o = {0};
    assert_int_equal(fleet_concurrency_parse(&q.a, "8", &o), 0);
    assert_int_equal(o.concurrency, 8);
    assert_int_equal(o.lease, RESIL_S(5));
    assert_int_equal(fleet_concurrency_parse(&q.a, "2147483647:10ms", &o), 0);
    assert_int_equal(o.concurrency, INT32_MAX);
    assert_int_equal(o.lease, RESIL_MS(10));
}

static void bad_concurrencies_are_refused_whole(void **state)
{
    (void)state;
    static const char *const bad[] = {"0", "", "x", "2147483648", "8:", "8:9ms", "8:2d",
                                      "8:5", ":5s", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        quiet_args q;
        quiet(&q);
        fleet_limit_opts o = {.concurrency = 3};
        assert_int_equal(fleet_concurrency_parse(&q.a, bad[i], &o), RESIL_EINVAL);
        assert_int_equal(o.concurrency, 3);
        char want[256];
        snprintf(want, sizeof want,
                 "resil test: --fleet-concurrency must be N[:LEASE] (e.g. 8 or 8:30s) with N "
                 "in 1..2147483647 and LEASE 10ms..1d, got '%s'",
                 bad[i]);
        assert_string_equal(q.err.message, want);
    }
}

static void limits_need_fleet(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    fleet_limit_opts none = {0}, rate = {.rate = 1}, conc = {.concurrency = 1};
    assert_int_equal(fleet_limits_need_fleet(&q.a, NULL, &none), 0);
    assert_int_equal(fleet_limits_need_fleet(&q.a, "redis://h", &rate), 0);
    assert_int_equal(fleet_limits_need_fleet(&q.a, NULL, &conc), RESIL_EINVAL);
    assert_string_equal(q.err.message,
                        "resil test: --fleet-rate and --fleet-concurrency need --fleet");
}

static void a_fleet_timeout_is_a_duration_from_1ms_to_10s(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    resil_duration d = 0;
    assert_int_equal(fleet_timeout_parse(&q.a, "1ms", &d), 0);
    assert_int_equal(d, RESIL_MS(1));
    assert_int_equal(fleet_timeout_parse(&q.a, "10s", &d), 0);
    assert_int_equal(d, RESIL_S(10));
    assert_int_equal(fleet_timeout_parse(&q.a, "2500ms", &d), 0);
    assert_int_equal(d, RESIL_MS(2500));
}

/* `v` refused, the output untouched; the sentence it got. */
static const char *fleet_timeout_refusal(quiet_args *q, const char *v)
{
    quiet(q);
    resil_duration d = 7;
    assert_int_equal(fleet_timeout_parse(&q->a, v, &d), RESIL_EINVAL);
    assert_int_equal(d, 7);
    return q->err.message;
}

static void bad_fleet_timeouts_are_refused_by_name(void **state)
{
    (void)state;
    quiet_args q;
    static const char *const out_of_range[] = {"999us", "10001ms", "1m"};
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++) {
        char want[256];
        snprintf(want, sizeof want,
                 "resil test: --fleet-timeout must be a duration from 1ms to 10s, got '%s'",
                 out_of_range[i]);
        assert_string_equal(fleet_timeout_refusal(&q, out_of_range[i]), want);
    }
    static const char *const not_durations[] = {"0", "0s", "", "x", "-1s", "5"};
    for (size_t i = 0; i < sizeof not_durations / sizeof not_durations[0]; i++)
        assert_non_null(strstr(fleet_timeout_refusal(&q, not_durations[i]),
                               "resil test: --fleet-timeout "));
}

static void a_fleet_timeout_needs_fleet(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    assert_int_equal(fleet_timeout_needs_fleet(&q.a, NULL, 0), 0);
    assert_int_equal(fleet_timeout_needs_fleet(&q.a, "redis://h", RESIL_S(1)), 0);
    assert_int_equal(fleet_timeout_needs_fleet(&q.a, NULL, RESIL_S(1)), RESIL_EINVAL);
    assert_string_equal(q.err.message, "resil test: --fleet-timeout needs --fleet");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_rate_per_unit_has_a_burst_of_the_rate),
        cmocka_unit_test(a_rate_takes_a_duration_and_a_burst),
        cmocka_unit_test(bad_rates_are_refused_whole),
        cmocka_unit_test(a_concurrency_has_a_lease_of_five_seconds_unless_given),
        cmocka_unit_test(bad_concurrencies_are_refused_whole),
        cmocka_unit_test(limits_need_fleet),
        cmocka_unit_test(a_fleet_timeout_is_a_duration_from_1ms_to_10s),
        cmocka_unit_test(bad_fleet_timeouts_are_refused_by_name),
        cmocka_unit_test(a_fleet_timeout_needs_fleet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
