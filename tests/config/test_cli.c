/*
 * test_cli.c — `resil config check` and `--config FILE --policy NAME`
 * through the built tool: what it prints, where, and the exit status a
 * script branches on.
 */
#include "../integration/cli_harness.h"

#define SEED                                                                                 \
    "{\"Resilience\": {\n"                                                                   \
    "  \"Retry\": {\"orders\": {\"MaxRetryAttempts\": 3, \"BaseDelay\": \"500ms\",\n"         \
    "    \"BackoffStrategy\": \"Exponential\", \"UseJitter\": true}},\n"                      \
    "  \"Pipelines\": {\n"                                                                   \
    "    \"orders\": [\"TotalTimeout:10s\", \"Retry:orders\", \"AttemptTimeout:2s\"]}}}\n"

#define CLEAN                                                                                \
    "{\"Resilience\": {\"Retry\": {\"r\": {\"MaxRetryAttempts\": 1, \"UseJitter\": true}},\n" \
    "  \"Pipelines\": {\"p\": [\"TotalTimeout:10s\", \"Retry:r\", \"AttemptTimeout:2s\"]}}}\n"

#define BROKEN                                                                               \
    "{\"Resilience\": {\n"                                                                   \
    "  \"Retry\": {\"r\": {\"MaxRetryAttempt\": 3}},\n"                                       \
    "  \"CircuitBreakers\": {\"b\": {\"FailureRatio\": 1.5}}}}\n"

/* Commands that retry quickly: no waits. */
#define COMMANDS                                                                             \
    "{\"Resilience\": {\n"                                                                   \
    "  \"Retry\": {\"quick\": {\"MaxRetryAttempts\": 2, \"BaseDelay\": \"0s\"},\n"            \
    "             \"budget\": {\"MaxRetryAttempts\": 5, \"TimeBudget\": \"7s\"}},\n"          \
    "  \"CircuitBreakers\": {\"b\": {}},\n"                                                  \
    "  \"Pipelines\": {\"cmd\": [\"TotalTimeout:5s\", \"Retry:quick\", \"CircuitBreaker:b\",\n" \
    "                           \"AttemptTimeout:1s\"],\n"                                   \
    "                \"once\": [\"AttemptTimeout:40s\"]}}}\n"

static void contains(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("expected to find:\n%s\nin:\n%s", needle, text);
}

static void check_prints_the_analysis_and_exits_0(void **state)
{
    const char *dir = *state;
    cli_write(dir, "seed.json", SEED);
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "seed.json", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "pipeline orders\n");
    contains(r.out, "  worst case     4 attempts × 2s + 3.5s of waits = 11.5s\n");
    contains(r.out, "warning: Resilience.Pipelines.orders at 5:5: worst case 4 attempts × 2s + "
                    "3.5s of waits = 11.5s exceeds the total timeout 10s\n");
    contains(r.out, "1 pipeline, 1 warning\n");
    assert_string_equal(r.err, "");
    cli_result_free(&r);
}

static void strict_turns_warnings_into_exit_2(void **state)
{
    const char *dir = *state;
    cli_write(dir, "seed.json", SEED);
    cli_write(dir, "clean.json", CLEAN);
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "--strict", "seed.json", NULL);
    assert_int_equal(r.status, 2);
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "config", "check", "clean.json", "--strict", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "1 pipeline, 0 warnings\n");
    cli_result_free(&r);
}

static void errors_are_printed_with_file_and_position_and_exit_1(void **state)
{
    const char *dir = *state;
    cli_write(dir, "broken.json", BROKEN);
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "broken.json", NULL);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "broken.json: Resilience.Retry.r.MaxRetryAttempt at 2:19: unknown "
                               "key (did you mean MaxRetryAttempts?)\n"
                               "broken.json: Resilience.CircuitBreakers.b.FailureRatio at 3:45: "
                               "must be in (0,1], got 1.5\n"
                               "2 errors\n");
    cli_result_free(&r);
}

static void a_syntax_error_reads_like_a_compilers(void **state)
{
    const char *dir = *state;
    cli_write(dir, "bad.json", "{\"Resilience\": }");
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "bad.json", NULL);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "bad.json:1:16: invalid JSON: unexpected token near '}'\n"
                               "1 error\n");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "config", "check", "missing.json", NULL);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "missing.json: cannot open: No such file or directory\n1 error\n");
    cli_result_free(&r);
}

static void a_dash_reads_standard_input(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, "{\"Resilience\": }", "config", "check", "-", NULL);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "(standard input):1:16: invalid JSON: unexpected token near '}'\n"
                               "1 error\n");
    cli_result_free(&r);
    cli_run(&r, dir, BROKEN, "config", "check", "-", NULL);
    assert_int_equal(r.status, 1);
    assert_true(strncmp(r.err, "(standard input): Resilience.Retry.r.MaxRetryAttempt at 2:19", 60)
                == 0);
    cli_result_free(&r);
}

static void json_output_for_errors_and_analysis(void **state)
{
    const char *dir = *state;
    cli_write(dir, "broken.json", BROKEN);
    cli_write(dir, "seed.json", SEED);
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "--json", "broken.json", NULL);
    assert_int_equal(r.status, 1);
    contains(r.out, "{\"errors\":[{\"path\":\"Resilience.Retry.r.MaxRetryAttempt\",\"line\":2,"
                    "\"column\":19,");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "config", "check", "seed.json", "--json", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "\"worst_case_ms\":11500,");
    contains(r.out, "\"fits\":false");
    cli_result_free(&r);
}

static void a_rate_judges_ratio_breakers(void **state)
{
    const char *dir = *state;
    cli_write(dir, "b.json", "{\"Resilience\": {\"CircuitBreakers\": {\"b\": {}}}}");
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "b.json", "--rate", "1", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "warning: Resilience.CircuitBreakers.b at 1:37: needs 100 calls in 30s to "
                    "judge its failure ratio, but 1 requests/s bring about 30: it can never "
                    "trip\n");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "config", "check", "b.json", "--rate=10", NULL);
    contains(r.out, "0 warnings");
    cli_result_free(&r);
}

static void bad_usage_exits_125(void **state)
{
    const char *dir = *state;
    cli_write(dir, "seed.json", SEED);
    static const struct {
        const char *args[4];
        const char *message;
    } rows[] = {
        {{"config", NULL}, "usage: resil config check FILE"},
        {{"config", "lint", NULL}, "resil config: unknown command 'lint'"},
        {{"config", "check", NULL}, "resil config check: no FILE given"},
        {{"config", "check", "--fast", NULL}, "unknown option '--fast'"},
        {{"config", "check", "seed.json", "seed.json"}, "one FILE at a time"},
        {{"config", "check", "--rate", "-1"}, "--rate must be a number >= 0, got '-1'"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        cli_result r;
        cli_run(&r, dir, NULL, rows[i].args[0], rows[i].args[1], rows[i].args[2],
                rows[i].args[3], NULL);
        assert_int_equal(r.status, 125);
        contains(r.err, rows[i].message);
        cli_result_free(&r);
    }
}

static void help_lists_the_options(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "config", "check", "--help", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "--rate RPS");
    contains(r.out, "--strict");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "--help", NULL);
    contains(r.out, "  config   check a configuration file and analyse its pipelines\n");
    cli_result_free(&r);
}

/* ---- --config FILE --policy NAME ----------------------------------------------- */

static void run_takes_retry_and_timeouts_from_a_named_pipeline(void **state)
{
    const char *dir = *state;
    cli_write(dir, "c.json", COMMANDS);
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--config", "c.json", "--policy", "cmd", "--dry-run", "--",
            "true", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "attempts 3, backoff constant, delay 0s");
    contains(r.out, "attempt-timeout 1s, total-timeout 5s");
    contains(r.err, "resil run: note: --policy cmd: CircuitBreaker not used by this command\n");
    cli_result_free(&r);
}

static void run_takes_a_delays_list_from_the_file(void **state)
{
    const char *dir = *state;
    cli_write(dir, "d.json",
              "{\"Resilience\": {\"Retry\": {\"listed\": {\"Delays\": [\"1s\", \"2s\", "
              "\"5s\"]}}}}\n");
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--config", "d.json", "--policy", "listed", "--dry-run", "--",
            "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "attempts 4, backoff list, delays 1s,2s,5s, max-delay none, "
                               "jitter none\n"
                               "#1 fails, wait 1000 ms\n"
                               "#2 fails, wait 2000 ms\n"
                               "#3 fails, wait 5000 ms\n"
                               "#4 fails, stop: attempts exhausted\n");
    cli_result_free(&r);
}

static void run_retries_as_the_policy_says(void **state)
{
    const char *dir = *state;
    cli_write(dir, "c.json", COMMANDS);
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--config", "c.json", "--policy", "quick", "--", "false",
            NULL);
    assert_int_equal(r.status, 1);
    contains(r.err, "#3 exit 1, attempts exhausted\n");
    cli_result_free(&r);
}

static void command_line_options_override_the_policy_wherever_they_stand(void **state)
{
    const char *dir = *state;
    cli_write(dir, "c.json", COMMANDS);
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempts", "2", "--config", "c.json", "--policy", "cmd",
            "--total-timeout", "3s", "--dry-run", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "attempts 2, backoff constant, delay 0s");
    contains(r.out, "total-timeout 3s");
    cli_result_free(&r);
}

static void a_retry_policy_name_works_too_and_its_budget_bounds_the_run(void **state)
{
    const char *dir = *state;
    cli_write(dir, "c.json", COMMANDS);
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--config", "c.json", "--policy", "budget", "--dry-run", "--",
            "true", NULL);
    assert_int_equal(r.status, 0);
    contains(r.out, "attempts 6,");
    contains(r.out, "total-timeout 7s");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "run", "--config", "c.json", "--policy", "once", "--dry-run", "--",
            "true", NULL);
    contains(r.out, "attempts 1,"); /* a pipeline without Retry runs once */
    cli_result_free(&r);
}

static void policy_mistakes_are_named_and_exit_125(void **state)
{
    const char *dir = *state;
    cli_write(dir, "c.json", COMMANDS);
    cli_write(dir, "broken.json", BROKEN);
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--config", "c.json", "--policy", "nope", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    contains(r.err, "resil run: --policy: c.json has no pipeline or retry policy named 'nope' "
                    "(pipelines: cmd, once; retry policies: quick, budget)\n");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "run", "--config", "broken.json", "--policy", "r", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    contains(r.err, "resil run: --config broken.json: Resilience.Retry.r.MaxRetryAttempt at "
                    "2:19: unknown key (did you mean MaxRetryAttempts?)\n");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "run", "--policy", "cmd", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    contains(r.err, "resil run: --config FILE and --policy NAME go together\n");
    cli_result_free(&r);
}

static void the_gateway_takes_its_upstream_timeout_from_a_policy(void **state)
{
    const char *dir = *state;
    cli_write(dir, "c.json", COMMANDS);
    cli_result r;
    /* The policy's 40s attempt timeout meets a 30s retention: refused, by its value. */
    cli_run(&r, dir, NULL, "gateway", "--listen", "127.0.0.1:0", "--upstream",
            "http://127.0.0.1:1", "--lease", "30s", "--retention", "30s", "--config", "c.json",
            "--policy", "once", NULL);
    assert_int_equal(r.status, 125);
    contains(r.err, "--timeout (40s) must be shorter than --retention (30s)");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "gateway", "--config", "c.json", NULL);
    assert_int_equal(r.status, 125);
    contains(r.err, "resil gateway: --config FILE and --policy NAME go together\n");
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(check_prints_the_analysis_and_exits_0, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(strict_turns_warnings_into_exit_2, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(errors_are_printed_with_file_and_position_and_exit_1,
                                        cli_setup, cli_teardown),
        cmocka_unit_test_setup_teardown(a_dash_reads_standard_input, cli_setup, cli_teardown),
        cmocka_unit_test_setup_teardown(a_syntax_error_reads_like_a_compilers, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(json_output_for_errors_and_analysis, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(a_rate_judges_ratio_breakers, cli_setup, cli_teardown),
        cmocka_unit_test_setup_teardown(bad_usage_exits_125, cli_setup, cli_teardown),
        cmocka_unit_test_setup_teardown(help_lists_the_options, cli_setup, cli_teardown),
        cmocka_unit_test_setup_teardown(run_takes_retry_and_timeouts_from_a_named_pipeline,
                                        cli_setup, cli_teardown),
        cmocka_unit_test_setup_teardown(run_takes_a_delays_list_from_the_file, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(run_retries_as_the_policy_says, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(
            command_line_options_override_the_policy_wherever_they_stand, cli_setup,
            cli_teardown),
        cmocka_unit_test_setup_teardown(
            a_retry_policy_name_works_too_and_its_budget_bounds_the_run, cli_setup,
            cli_teardown),
        cmocka_unit_test_setup_teardown(policy_mistakes_are_named_and_exit_125, cli_setup,
                                        cli_teardown),
        cmocka_unit_test_setup_teardown(the_gateway_takes_its_upstream_timeout_from_a_policy,
                                        cli_setup, cli_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
