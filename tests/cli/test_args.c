/*
 * test_args.c — the tool's value parsers in-process (libresil_cli_parse):
 * what each accepts, what it refuses and in which words, without starting
 * the tool. The integration tests (tests/integration/test_cli_run.c) show
 * the same refusals as a user meets them; these pin the parsers' edges,
 * where a fuzz target's findings become specifications.
 */
#include "test.h"

#include "args.h"
#include "policy_opts.h"

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

static void a_cursor_with_err_reports_there(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    uint64_t v = 7;
    assert_int_equal(args_uint64(&q.a, "--count", "x", 1, 9, &v), RESIL_EINVAL);
    assert_int_equal(v, 7);
    assert_int_equal(q.err.code, RESIL_EINVAL);
    assert_string_equal(q.err.message,
                        "resil test: --count must be a whole number in [1, 9], got 'x'");
}

static void args_init_reports_on_stderr(void **state)
{
    (void)state;
    args a;
    args_init(&a, "resil test", 1, no_argv);
    assert_null(a.err);
}

static void whole_numbers_are_digits_that_fit(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    uint64_t v;
    assert_int_equal(args_uint64(&q.a, "--seed", "18446744073709551615", 0, UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    const char *bad[] = {"18446744073709551616", "-1", "+1", " 1", "1 ", "", "0x10", "1e3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(args_uint64(&q.a, "--seed", bad[i], 0, UINT64_MAX, &v), RESIL_EINVAL);
}

static void doubles_are_decimal_and_finite(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    double d;
    assert_int_equal(args_double(&q.a, "--factor", "2.5e1", 1.0, &d), 0);
    assert_near(d, 25.0, 0);
    const char *bad[] = {"0x2", "inf", "nan", " 2", "2 ", "1e400", "0.5", "", "."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(args_double(&q.a, "--factor", bad[i], 1.0, &d), RESIL_EINVAL);
        assert_non_null(strstr(q.err.message, "--factor must be a number >= 1"));
    }
}

static void rates_are_decimal_shares_in_0_to_1(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    double d;
    assert_int_equal(args_rate(&q.a, "--chaos-fail", "0.25", &d), 0);
    assert_near(d, 0.25, 0);
    assert_int_equal(args_rate(&q.a, "--chaos-fail", "1", &d), 0);
    assert_near(d, 1, 0);
    const char *bad[] = {"0x1p-1", " 0.5", "nan", "inf", "1.5", "-0.1", "", "0.5 ", "."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(args_rate(&q.a, "--chaos-fail", bad[i], &d), RESIL_EINVAL);
        assert_non_null(strstr(q.err.message, "--chaos-fail must be a rate in [0, 1]"));
    }
}

static void exit_codes_are_a_comma_list_in_1_to_255(void **state)
{
    (void)state;
    quiet_args q;
    quiet(&q);
    code_set set;
    assert_int_equal(exit_codes_parse(&q.a, "--retry-on", "1,75,255", &set), 0);
    assert_true(set.given && set.has[1] && set.has[75] && set.has[255] && !set.has[0]);
    assert_int_equal(exit_codes_parse(&q.a, "--retry-on", "007", &set), 0);
    assert_true(set.has[7]);
    const char *bad[] = {"", "0", "256", "2560", "1,", ",1", "1,,2", "1;2", " 1", "-1",
                         "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(exit_codes_parse(&q.a, "--stop-on", bad[i], &set), RESIL_EINVAL);
        assert_non_null(strstr(q.err.message, "--stop-on must be a comma-separated list"));
    }
}

/* policy_opts_parse on the one option in argv[1] (and its value),
 * reporting into *err: what the parser said of it. */
static int parse_policy_option(char **argv, int argc, resil_err *err)
{
    policy_opts po;
    args a;
    policy_opts_default(&po);
    args_init(&a, "resil test", argc, argv);
    memset(err, 0, sizeof *err);
    a.err = err;
    return policy_opts_parse(&po, &a);
}

static void an_empty_config_file_or_policy_name_is_refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *option, *value, *message;
    } rows[] = {
        {"--config", "", "resil test: --config must be a file name, got ''"},
        {"--config=", NULL, "resil test: --config must be a file name, got ''"},
        {"--policy", "", "resil test: --policy must be a policy name, got ''"},
        {"--policy=", NULL, "resil test: --policy must be a policy name, got ''"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *argv[] = {"t", (char *)rows[i].option, (char *)rows[i].value, NULL};
        resil_err err;
        assert_int_equal(parse_policy_option(argv, rows[i].value != NULL ? 3 : 2, &err),
                         RESIL_EINVAL);
        assert_string_equal(err.message, rows[i].message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cursor_with_err_reports_there),
        cmocka_unit_test(args_init_reports_on_stderr),
        cmocka_unit_test(whole_numbers_are_digits_that_fit),
        cmocka_unit_test(doubles_are_decimal_and_finite),
        cmocka_unit_test(rates_are_decimal_shares_in_0_to_1),
        cmocka_unit_test(exit_codes_are_a_comma_list_in_1_to_255),
        cmocka_unit_test(an_empty_config_file_or_policy_name_is_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
