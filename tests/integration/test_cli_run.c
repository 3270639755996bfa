/*
 * test_cli_run.c — `resil run`, end to end: real processes, real signals.
 *
 * Each test runs the built tool in its own scratch directory on a tiny shell
 * script that leaves a trace there (a line per run, the input it read, its
 * pid), with millisecond delays, and asserts on the trace, the exit status
 * and the attempt record — never on how long anything took.
 */
#include "cli_harness.h"

#define FAIL_TWICE "echo run >> runs; [ $(wc -l < runs) -ge 3 ]"

static void assert_contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL)
        fail_msg("expected to find \"%s\" in:\n%s", needle, haystack);
}

/* The i-th line (0-based) of text, into buf. */
static const char *line_at(const char *text, int i, char *buf, size_t cap)
{
    const char *p = text;
    for (; i > 0 && p != NULL; i--) {
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    if (p == NULL || *p == '\0')
        return NULL;
    size_t n = strcspn(p, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* ---- chaos ---------------------------------------------------------------- */

static void chaos_fail_one_fails_every_attempt_without_running_it(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--chaos-fail", "1", "--", "sh", "-c",
            "echo run >> runs", NULL);
    assert_int_equal(r.status, 1);
    assert_false(cli_exists(dir, "runs"));
    assert_contains(r.err, "#1 injected failure (exit 1, not run)");
    assert_contains(r.err, "#3 injected failure (exit 1, not run), attempts exhausted");
    cli_result_free(&r);
}

/* Seed 7 gives the fault strategy seed 8, whose first six draws are
 * 0.5 or above four times, then below: attempts 5 and 6 are injected. */
static void a_chaos_seed_replays_the_same_injections(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--attempts", "6", "--chaos-fail", "0.5",
            "--chaos-seed", "7", "--", "sh", "-c", "echo run >> runs; exit 3", NULL);
    assert_int_equal(r.status, 1);
    assert_int_equal(cli_lines(dir, "runs"), 4);
    assert_contains(r.err, "#4 exit 3");
    assert_contains(r.err, "#5 injected failure");
    cli_result_free(&r);
}

/* The largest seed gives the fault strategy seed 1 (0 would mean "from the
 * OS"), whose first six draws put attempts 4 and 5 below 0.5. */
static void the_largest_chaos_seed_replays_too(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--attempts", "6", "--chaos-fail", "0.5",
            "--chaos-seed", "18446744073709551615", "--", "sh", "-c", "echo run >> runs; exit 3",
            NULL);
    assert_int_equal(r.status, 3);
    assert_int_equal(cli_lines(dir, "runs"), 4);
    assert_contains(r.err, "#3 exit 3");
    assert_contains(r.err, "#4 injected failure");
    assert_contains(r.err, "#5 injected failure");
    assert_contains(r.err, "#6 exit 3, attempts exhausted");
    cli_result_free(&r);
}

static void a_bad_chaos_value_is_named(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--chaos-latency", "0.1", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--chaos-latency must be RATE:DURATION, such as 0.1:2s, got '0.1'");
    cli_result_free(&r);
    /* a wait of nothing is no latency injection (the library refuses it) */
    cli_run(&r, dir, NULL, "run", "--chaos-latency", "1:0", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--chaos-latency must be a duration greater than 0, got '0'");
    cli_result_free(&r);
}

/* ---- retrying and classification ---------------------------------------- */

static void fail_twice_then_succeed_exits_0_after_three_runs(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "sh", "-c", FAIL_TWICE, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_lines(dir, "runs"), 3);
    cli_result_free(&r);
}

static void always_failing_exits_with_last_code_after_three_runs(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "sh", "-c",
            "echo run >> runs; exit $(wc -l < runs)", NULL);
    assert_int_equal(r.status, 3);
    assert_int_equal(cli_lines(dir, "runs"), 3);
    cli_result_free(&r);
}

static void exit_127_is_not_retried(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "sh", "-c",
            "echo run >> runs; exit 127", NULL);
    assert_int_equal(r.status, 127);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    assert_contains(r.err, "-> stopped: not retryable");
    cli_result_free(&r);
}

static void exit_126_is_not_retried(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "sh", "-c",
            "echo run >> runs; exit 126", NULL);
    assert_int_equal(r.status, 126);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    cli_result_free(&r);
}

static void command_not_found_exits_127_after_one_attempt(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "./no-such-command", NULL);
    assert_int_equal(r.status, 127);
    assert_contains(r.err, "cannot run './no-such-command'");
    assert_contains(r.err, "#1 exit 127 (not found), not retryable");
    cli_result_free(&r);
}

static void command_not_executable_exits_126_after_one_attempt(void **state)
{
    const char *dir = *state;
    cli_write(dir, "script", "#!/bin/sh\nexit 0\n"); /* no execute bit */
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "./script", NULL);
    assert_int_equal(r.status, 126);
    assert_contains(r.err, "#1 exit 126 (cannot run), not retryable");
    cli_result_free(&r);
}

static void retry_on_makes_unlisted_codes_permanent(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--retry-on", "3", "--", "sh", "-c",
            "echo run >> runs; exit 4", NULL);
    assert_int_equal(r.status, 4);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    cli_result_free(&r);
}

static void retry_on_retries_listed_codes(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--retry-on", "2,3", "--", "sh", "-c",
            "echo run >> runs; exit 3", NULL);
    assert_int_equal(r.status, 3);
    assert_int_equal(cli_lines(dir, "runs"), 3);
    cli_result_free(&r);
}

static void stop_on_makes_listed_codes_permanent(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--stop-on", "5,9", "--", "sh", "-c",
            "echo run >> runs; exit 5", NULL);
    assert_int_equal(r.status, 5);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    cli_result_free(&r);
}

static void stop_on_leaves_other_codes_transient(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--stop-on", "5", "--", "sh", "-c",
            "echo run >> runs; exit 6", NULL);
    assert_int_equal(r.status, 6);
    assert_int_equal(cli_lines(dir, "runs"), 3);
    cli_result_free(&r);
}

static void death_by_signal_is_retried_and_exits_128_plus_signal(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--", "sh", "-c",
            "echo run >> runs; kill -9 $$", NULL);
    assert_int_equal(r.status, 137);
    assert_int_equal(cli_lines(dir, "runs"), 3);
    assert_contains(r.err, "#1 killed by SIGKILL, wait ");
    cli_result_free(&r);
}

static void attempts_forever_retries_until_success(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempts", "forever", "--delay", "1ms", "--",
            "sh", "-c", "echo run >> runs; [ $(wc -l < runs) -ge 5 ]", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_lines(dir, "runs"), 5);
    cli_result_free(&r);
}

static void attempts_one_never_retries(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "-a", "1", "--", "sh", "-c", "echo run >> runs; exit 1",
            NULL);
    assert_int_equal(r.status, 1);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    cli_result_free(&r);
}

/* ---- timeouts ------------------------------------------------------------ */

/* The timeout tests run `sleep` itself, not a script, so that where the
 * command is when the deadline comes does not matter. */
static void attempt_timeout_ends_each_attempt_and_exits_124(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempt-timeout", "100ms", "--attempts", "2",
            "--delay", "1ms", "--log", "json", "--", "sleep", "5", NULL);
    assert_int_equal(r.status, 124);
    assert_contains(r.err, "\"attempt\":1,\"outcome\":\"timeout\",\"code\":143,"
                           "\"detail\":\"attempt timeout (killed by SIGTERM)\","
                           "\"decision\":\"retry\",");
    assert_contains(r.err, "\"attempt\":2,\"outcome\":\"timeout\",\"code\":143,");
    assert_contains(r.err, "\"signal\":15,\"timed_out\":true");
    assert_contains(r.err, "\"stop\":\"attempts exhausted\",\"attempts\":2}");
    cli_result_free(&r);
}

static void attempt_ignoring_sigterm_is_killed_after_kill_after(void **state)
{
    const char *dir = *state;
    cli_result r;
    /* Started with SIGTERM ignored, `sleep` ignores it from its first
     * instruction: only the SIGKILL can end it. */
    cli_run_ignoring(&r, dir, SIGTERM, "run", "--attempt-timeout", "50ms",
                     "--kill-after", "100ms", "--attempts", "1", "--log", "json", "--",
                     "sleep", "5", NULL);
    assert_int_equal(r.status, 124);
    assert_contains(r.err, "\"attempt\":1,\"outcome\":\"timeout\",\"code\":137,"
                           "\"detail\":\"attempt timeout (killed by SIGKILL)\",");
    assert_contains(r.err, "\"signal\":9,\"timed_out\":true");
    cli_result_free(&r);
}

static void total_timeout_stops_instead_of_a_wait_that_would_pass_it(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--total-timeout", "10s", "--delay", "20s", "--jitter",
            "none", "--log", "json", "--", "sh", "-c", "echo run >> runs; exit 1", NULL);
    assert_int_equal(r.status, 124);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    assert_contains(r.err, "\"decision\":\"stop\",\"reason\":\"deadline\"");
    assert_contains(r.err, "\"stop\":\"deadline\",\"attempts\":1}");
    cli_result_free(&r);
}

static void total_timeout_ends_the_running_attempt(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--total-timeout", "200ms", "--log", "json", "--",
            "sleep", "30", NULL);
    assert_int_equal(r.status, 124);
    assert_contains(r.err, "\"outcome\":\"timeout\",\"code\":143,"
                           "\"detail\":\"total timeout (killed by SIGTERM)\"");
    assert_contains(r.err, "\"stop\":\"deadline\",\"attempts\":1}");
    cli_result_free(&r);
}

/* ---- standard input -------------------------------------------------------- */

static void stdin_reaches_only_the_first_attempt(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, "hello\n", "run", "--delay", "1ms", "--attempts", "3", "--", "sh",
            "-c", "cat >> seen; echo --- >> seen; exit 1", NULL);
    assert_int_equal(r.status, 1);
    char *seen = cli_read(dir, "seen");
    assert_string_equal(seen, "hello\n---\n---\n---\n");
    free(seen);
    cli_result_free(&r);
}

/* ---- the attempt record ---------------------------------------------------- */

static void text_log_follows_the_article(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--jitter", "none", "--", "sh", "-c",
            "exit 1", NULL);
    assert_true(cli_stamped(r.err));
    assert_string_equal(cli_unstamp(r.err), "#1 exit 1, wait 1ms (backoff)\n"
                               "#2 exit 1, wait 2ms (backoff)\n"
                               "#3 exit 1, attempts exhausted\n"
                               "-> stopped: attempts exhausted\n");
    cli_result_free(&r);
}

static void text_log_of_a_success(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--jitter", "none", "--", "sh", "-c",
            FAIL_TWICE, NULL);
    assert_string_equal(cli_unstamp(r.err), "#1 exit 1, wait 1ms (backoff)\n"
                               "#2 exit 1, wait 2ms (backoff)\n"
                               "#3 ok\n"
                               "-> succeeded\n");
    cli_result_free(&r);
}

static void json_log_has_one_object_per_attempt_then_the_stop(void **state)
{
    const char *dir = *state;
    cli_result r;
    char line[512];
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--jitter", "none", "--log", "json",
            "--", "sh", "-c", "exit 1", NULL);
    assert_non_null(line_at(r.err, 0, line, sizeof line));
    assert_contains(line, "\"attempt\":1,\"outcome\":\"transient\",\"code\":1,"
                          "\"detail\":\"exit 1\",\"decision\":\"retry\","
                          "\"wait_ms\":1,\"source\":\"backoff\",\"duration_ms\":");
    assert_non_null(line_at(r.err, 1, line, sizeof line));
    assert_contains(line, "\"attempt\":2,\"outcome\":\"transient\",\"code\":1,");
    assert_contains(line, "\"decision\":\"retry\",\"wait_ms\":2,\"source\":\"backoff\",");
    assert_non_null(line_at(r.err, 2, line, sizeof line));
    assert_contains(line, "\"attempt\":3,\"outcome\":\"transient\",\"code\":1,");
    assert_contains(line, "\"decision\":\"stop\",\"reason\":\"attempts exhausted\","
                          "\"wait_ms\":0,\"source\":null,\"duration_ms\":");
    assert_contains(line, "\"signal\":0,\"timed_out\":false}");
    assert_non_null(line_at(r.err, 3, line, sizeof line));
    assert_contains(line, "\"stop\":\"attempts exhausted\",\"attempts\":3}");
    assert_null(line_at(r.err, 4, line, sizeof line));
    cli_result_free(&r);
}

static void json_log_of_a_success_ends_with_succeeded(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--log", "json", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.err, "\"attempt\":1,\"outcome\":\"success\",\"code\":0,"
                           "\"detail\":\"ok\",\"decision\":\"stop\","
                           "\"reason\":\"succeeded\",");
    assert_contains(r.err, "\"stop\":\"succeeded\",\"attempts\":1}\n");
    cli_result_free(&r);
}

static void log_none_prints_nothing(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--log", "none", "--", "sh", "-c",
            "exit 1", NULL);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "");
    cli_result_free(&r);
}

static void command_output_passes_through(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--", "echo", "hello", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "hello\n");
    cli_result_free(&r);
}

static void command_gets_no_descriptor_of_resil(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--", "ls", "/proc/self/fd", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "0\n1\n2\n3\n"); /* 3: ls reading the directory */
    cli_result_free(&r);
}

/* ---- --dry-run ------------------------------------------------------------- */

static void dry_run(void **state, const char *backoff, const char *expected)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--attempts", "5", "--backoff", backoff,
            "--delay", "100ms", "--max-delay", "700ms", "--jitter", "none", "--", "sh",
            "-c", "echo run >> runs", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, expected);
    assert_false(cli_exists(dir, "runs"));
    cli_result_free(&r);
}

static void delays_list_the_waits_and_set_the_attempts(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--delays", "1s,2s,5s", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "attempts 4, backoff list, delays 1s,2s,5s, max-delay none, "
                               "jitter none\n"
                               "#1 fails, wait 1000 ms\n"
                               "#2 fails, wait 2000 ms\n"
                               "#3 fails, wait 5000 ms\n"
                               "#4 fails, stop: attempts exhausted\n");
    cli_result_free(&r);
}

static void delays_repeat_the_last_wait_for_more_attempts(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--attempts", "5", "--delays", "250ms,1s", "--",
            "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "attempts 5, backoff list, delays 250ms,1s, max-delay none, "
                               "jitter none\n"
                               "#1 fails, wait 250 ms\n"
                               "#2 fails, wait 1000 ms\n"
                               "#3 fails, wait 1000 ms\n"
                               "#4 fails, wait 1000 ms\n"
                               "#5 fails, stop: attempts exhausted\n");
    cli_result_free(&r);
}

static void delays_run_and_wait_as_listed(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delays", "10ms,20ms", "--", "sh", "-c",
            "echo run >> runs; exit 3", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "#1 exit 3, wait 10ms (backoff)"));
    assert_non_null(strstr(r.err, "#2 exit 3, wait 20ms (backoff)"));
    assert_non_null(strstr(r.err, "#3 exit 3, attempts exhausted"));
    cli_result_free(&r);
}

static void delays_refuse_a_bad_wait_and_a_backoff(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delays", "1s,,5s", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.err, "resil run: --delays must be a comma-separated list of "
                               "durations, such as 1s,2s,5s, got '1s,,5s'\n");
    cli_result_free(&r);
    cli_run(&r, dir, NULL, "run", "--delays", "1s", "--backoff", "linear", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.err, "resil run: --delays lists the waits: it takes no --backoff\n");
    cli_result_free(&r);
}

/* "1ms,2ms,...,Nms": a --delays value of n waits, into buf. */
static const char *n_delays(int n, char *buf, size_t cap)
{
    size_t len = 0;
    for (int i = 1; i <= n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%dms", i > 1 ? "," : "", i);
    assert_true(len < cap);
    return buf;
}

static void delays_of_32_waits_are_taken(void **state)
{
    const char *dir = *state;
    char delays[512], first[1024];
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--delays", n_delays(32, delays, sizeof delays),
            "--", "true", NULL);
    assert_int_equal(r.status, 0);
    snprintf(first, sizeof first, "attempts 33, backoff list, delays %s, max-delay none, "
                                  "jitter none", delays);
    char line[1024];
    assert_string_equal(line_at(r.out, 0, line, sizeof line), first);
    assert_string_equal(line_at(r.out, 32, line, sizeof line), "#32 fails, wait 32 ms");
    assert_string_equal(line_at(r.out, 33, line, sizeof line),
                        "#33 fails, stop: attempts exhausted");
    cli_result_free(&r);
}

static void delays_past_32_waits_are_refused_by_name_with_nothing_run(void **state)
{
    const char *dir = *state;
    char delays[512];
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delays", n_delays(33, delays, sizeof delays), "--", "sh",
            "-c", "echo run >> runs", NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.err, "resil run: --delays: at most 32 waits, got 33\n");
    assert_false(cli_exists(dir, "runs"));
    cli_result_free(&r);
}

static void dry_run_prints_constant_schedule(void **state)
{
    dry_run(state, "constant",
            "attempts 5, backoff constant, delay 100ms, max-delay 700ms, jitter none\n"
            "#1 fails, wait 100 ms\n"
            "#2 fails, wait 100 ms\n"
            "#3 fails, wait 100 ms\n"
            "#4 fails, wait 100 ms\n"
            "#5 fails, stop: attempts exhausted\n");
}

static void dry_run_prints_linear_schedule(void **state)
{
    dry_run(state, "linear",
            "attempts 5, backoff linear, delay 100ms, max-delay 700ms, jitter none\n"
            "#1 fails, wait 100 ms\n"
            "#2 fails, wait 200 ms\n"
            "#3 fails, wait 300 ms\n"
            "#4 fails, wait 400 ms\n"
            "#5 fails, stop: attempts exhausted\n");
}

static void dry_run_prints_exponential_schedule_capped(void **state)
{
    dry_run(state, "exponential",
            "attempts 5, backoff exponential, delay 100ms, factor 2, max-delay 700ms, "
            "jitter none\n"
            "#1 fails, wait 100 ms\n"
            "#2 fails, wait 200 ms\n"
            "#3 fails, wait 400 ms\n"
            "#4 fails, wait 700 ms\n"
            "#5 fails, stop: attempts exhausted\n");
}

static void dry_run_with_jitter_and_no_seed_prints_the_bounds(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--delay", "100ms", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out,
                        "attempts 3, backoff exponential, delay 100ms, factor 2, "
                        "max-delay 30s, jitter full\n"
                        "#1 fails, wait up to 100 ms\n"
                        "#2 fails, wait up to 200 ms\n"
                        "#3 fails, stop: attempts exhausted\n");
    cli_result_free(&r);
}

static void dry_run_with_seed_prints_the_same_draws_every_time(void **state)
{
    const char *dir = *state;
    cli_result a, b;
    cli_run(&a, dir, NULL, "run", "--dry-run", "--seed", "9", "--", "true", NULL);
    cli_run(&b, dir, NULL, "run", "--dry-run", "--seed", "9", "--", "true", NULL);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.out, b.out);
    assert_null(strstr(a.out, "up to"));
    cli_result_free(&a);
    cli_result_free(&b);
}

static void dry_run_shows_where_the_total_timeout_stops(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--attempts", "10", "--delay", "1s",
            "--jitter", "none", "--attempt-timeout", "500ms", "--total-timeout", "5s",
            "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out,
                        "attempts 10, backoff exponential, delay 1s, factor 2, "
                        "max-delay 30s, jitter none, attempt-timeout 500ms, "
                        "total-timeout 5s\n"
                        "#1 fails, wait 1000 ms\n"
                        "#2 fails, wait 2000 ms\n"
                        "#3 fails, stop: deadline (at the latest)\n");
    cli_result_free(&r);
}

static void dry_run_of_forever_shows_the_first_ten_waits(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--attempts", "forever", "--backoff",
            "fibonacci", "--delay", "1ms", "--jitter", "none", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out,
                        "attempts forever, backoff fibonacci, delay 1ms, max-delay 30s, "
                        "jitter none\n"
                        "#1 fails, wait 1 ms\n"
                        "#2 fails, wait 1 ms\n"
                        "#3 fails, wait 2 ms\n"
                        "#4 fails, wait 3 ms\n"
                        "#5 fails, wait 5 ms\n"
                        "#6 fails, wait 8 ms\n"
                        "#7 fails, wait 13 ms\n"
                        "#8 fails, wait 21 ms\n"
                        "#9 fails, wait 34 ms\n"
                        "#10 fails, wait 55 ms\n"
                        "... and so on, until an attempt succeeds or is not retryable\n");
    cli_result_free(&r);
}

static void dry_run_elides_a_long_schedule(void **state)
{
    const char *dir = *state;
    cli_result r;
    char line[128];
    cli_run(&r, dir, NULL, "run", "--dry-run", "--attempts", "4000000000", "--backoff",
            "constant", "--delay", "1ms", "--jitter", "none", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(line_at(r.out, 50, line, sizeof line), "#50 fails, wait 1 ms");
    assert_string_equal(line_at(r.out, 51, line, sizeof line),
                        "... 3999999949 more waits not shown");
    assert_string_equal(line_at(r.out, 52, line, sizeof line),
                        "#4000000000 fails, stop: attempts exhausted");
    assert_null(line_at(r.out, 53, line, sizeof line));
    cli_result_free(&r);
}

/* ---- bad options: 125, naming the option ----------------------------------- */

static void assert_rejected(void **state, const char *option, const char *value,
                            const char *expected_message)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", option, value, "--", "sh", "-c", "echo run >> runs",
            NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, expected_message);
    assert_false(cli_exists(dir, "runs"));
    cli_result_free(&r);
}

static void bad_attempts_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--attempts", "0",
                    "resil run: --attempts must be a whole number in [1, 4294967294] or "
                    "'forever', got '0'");
    assert_rejected(state, "-a", "three", "--attempts must be a whole number in [1, 4294967294] "
                                          "or 'forever', got 'three'");
    assert_rejected(state, "--attempts", "-1", "got '-1'");
}

/* The largest count is one less than the number that means 'forever'. */
static void attempts_past_the_largest_count_are_rejected_with_the_bound(void **state)
{
    assert_rejected(state, "--attempts", "4294967295",
                    "resil run: --attempts must be a whole number in [1, 4294967294] or "
                    "'forever', got '4294967295'");
    assert_rejected(state, "--attempts", "99999999999999999999",
                    "resil run: --attempts must be a whole number in [1, 4294967294] or "
                    "'forever', got '99999999999999999999'");
}

static void bad_backoff_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--backoff", "quadratic",
                    "resil run: --backoff must be one of constant, linear, exponential, "
                    "fibonacci (a list of waits is --delays), got 'quadratic'");
}

static void bad_delay_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--delay", "soon", "resil run: --delay must be a duration");
    assert_rejected(state, "--delay", "-1s", "resil run: --delay must be a duration");
}

static void bad_max_delay_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--max-delay", "1x", "resil run: --max-delay must be a duration");
}

static void bad_factor_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--factor", "0.5",
                    "resil run: --factor must be a number >= 1, got '0.5'");
    assert_rejected(state, "--factor", "nan", "--factor must be a number >= 1, got 'nan'");
    assert_rejected(state, "--factor", "2x", "--factor must be a number >= 1, got '2x'");
}

static void factor_is_a_plain_decimal_number(void **state)
{
    assert_rejected(state, "--factor", " 2", "--factor must be a number >= 1, got ' 2'");
    assert_rejected(state, "--factor", "0x2", "--factor must be a number >= 1, got '0x2'");
    assert_rejected(state, "--factor", "infinity",
                    "--factor must be a number >= 1, got 'infinity'");
}

static void bad_jitter_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--jitter", "some",
                    "resil run: --jitter must be one of none, full, equal, decorrelated, "
                    "proportional, polly, got 'some'");
}

static void bad_seed_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--seed", "-1", "resil run: --seed must be a whole number in "
                                           "[0, 18446744073709551615], got '-1'");
    assert_rejected(state, "--seed", "18446744073709551616", "--seed must be a whole number");
}

static void bad_attempt_timeout_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--attempt-timeout", "later",
                    "resil run: --attempt-timeout must be a duration like 250ms, 2s or 1m30s, "
                    "or 'none' (0 also switches it off), got 'later'");
    assert_rejected(state, "--attempt-timeout", "-1s",
                    "resil run: --attempt-timeout must be a duration");
}

static void bad_total_timeout_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--total-timeout", "soon",
                    "resil run: --total-timeout must be a duration like 250ms, 2s or 1m30s, "
                    "or 'none' (0 also switches it off), got 'soon'");
}

/* "none" and 0 switch a timeout off: the dry run prints no timeout. */
static void none_and_zero_switch_the_timeouts_off(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--dry-run", "--attempt-timeout", "none", "--total-timeout",
            "0", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "timeout"));
    cli_result_free(&r);
}

static void attempt_timeout_beyond_total_timeout_is_rejected(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempt-timeout", "2s", "--total-timeout", "1s", "--",
            "true", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--attempt-timeout must not exceed --total-timeout");
    cli_result_free(&r);
}

static void bad_kill_after_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--kill-after", "0",
                    "resil run: --kill-after must be a duration greater than 0, got '0'");
}

static void bad_retry_on_is_rejected_by_name(void **state)
{
    const char *what = "must be a comma-separated list of exit codes in [1, 255]";
    char msg[160];
    snprintf(msg, sizeof msg, "resil run: --retry-on %s, got '0'", what);
    assert_rejected(state, "--retry-on", "0", msg);
    snprintf(msg, sizeof msg, "--retry-on %s, got '256'", what);
    assert_rejected(state, "--retry-on", "256", msg);
    snprintf(msg, sizeof msg, "--retry-on %s, got '1,,2'", what);
    assert_rejected(state, "--retry-on", "1,,2", msg);
    snprintf(msg, sizeof msg, "--retry-on %s, got '1,'", what);
    assert_rejected(state, "--retry-on", "1,", msg);
}

static void bad_stop_on_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--stop-on", "x",
                    "resil run: --stop-on must be a comma-separated list of exit codes in "
                    "[1, 255], got 'x'");
}

static void bad_log_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--log", "xml",
                    "resil run: --log must be one of text, json, none, got 'xml'");
}

static void bad_heartbeat_is_rejected_by_name(void **state)
{
    static const char *const bad[] = {"", "-1s", "soon", "10", "5sx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char expected[200];
        snprintf(expected, sizeof expected,
                 "resil run: --heartbeat must be a duration like 250ms, 2s or 1m30s, or 'none' "
                 "(0 also switches it off), got '%s'",
                 bad[i]);
        assert_rejected(state, "--heartbeat", bad[i], expected);
    }
}

/* Every option that takes a value, given last with none: refused by its
 * name, and nothing run. */
static void each_option_without_its_value_is_rejected_by_name(void **state)
{
    static const char *const options[] = {
        "--attempts", "--backoff", "--delay", "--delays", "--max-delay", "--factor",
        "--jitter", "--seed", "--attempt-timeout", "--total-timeout", "--config", "--policy",
        "--kill-after", "--retry-on", "--stop-on", "--log", "--log-file", "--heartbeat",
        "--chaos-fail", "--chaos-latency", "--chaos-seed", "--metrics", "--otlp"};
    const char *dir = *state;
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        char expected[64];
        snprintf(expected, sizeof expected, "resil run: %s needs a value\n", options[i]);
        cli_result r;
        cli_run(&r, dir, NULL, "run", options[i], NULL);
        assert_int_equal(r.status, 125);
        assert_string_equal(r.err, expected);
        assert_string_equal(r.out, "");
        cli_result_free(&r);
    }
}

static void missing_value_is_rejected_by_name(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "resil run: --delay needs a value");
    cli_result_free(&r);
}

static void unknown_option_is_rejected(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--retries", "3", "--", "true", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "resil run: unknown option '--retries'");
    cli_result_free(&r);
}

static void missing_command_is_rejected(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempts", "2", "--", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "resil run: no command given");
    cli_result_free(&r);
}

static void help_describes_every_option(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--help", NULL);
    assert_int_equal(r.status, 0);
    const char *options[] = {"--attempts", "--backoff", "--delay", "--max-delay",
                             "--factor", "--jitter", "--seed", "--attempt-timeout",
                             "--total-timeout", "--kill-after", "--retry-on", "--stop-on",
                             "--log", "--dry-run", "--metrics", "--otlp", "--help", "/dev/null", "124", "125"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        assert_contains(r.out, options[i]);
    cli_result_free(&r);
}

/* ---- telemetry ------------------------------------------------------------------ */

/* Every series's exact figure: two OnRetry events, one timed attempt per
 * number (0-based, as Polly counts), the first two handled failures, and
 * one execution; the durations vary, their counts do not. */
static void metrics_file_counts_two_retries_and_three_attempts(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--delay", "1ms", "--metrics", "metrics.txt", "--", "sh",
            "-c", FAIL_TWICE, NULL);
    assert_int_equal(r.status, 0);
    char *text = cli_read(dir, "metrics.txt");
    assert_non_null(text);
    const char *labels = "pipeline_name=\"run\",strategy_name=\"retry\",operation_key=\"sh\"";
    char series[512];
    snprintf(series, sizeof series,
             "\nresilience_polly_strategy_events_total{event_name=\"OnRetry\","
             "event_severity=\"Warning\",%s,exception_type=\"transient\"} 2\n", labels);
    assert_contains(text, series);
    for (int i = 0; i < 2; i++) {
        snprintf(series, sizeof series,
                 "\nresilience_polly_strategy_attempt_duration_milliseconds_count{"
                 "event_name=\"ExecutionAttempt\",event_severity=\"Warning\",%s,"
                 "exception_type=\"transient\",attempt_number=\"%d\",attempt_handled=\"true\"} 1\n",
                 labels, i);
        assert_contains(text, series);
    }
    snprintf(series, sizeof series,
             "\nresilience_polly_strategy_attempt_duration_milliseconds_count{"
             "event_name=\"ExecutionAttempt\",event_severity=\"Information\",%s,"
             "attempt_number=\"2\",attempt_handled=\"false\"} 1\n", labels);
    assert_contains(text, series);
    assert_contains(text, "\nresilience_polly_pipeline_duration_milliseconds_count{"
                          "pipeline_name=\"run\",operation_key=\"sh\"} 1\n");
    assert_contains(text, "\nresil_metrics_dropped_series_total 0\n");
    free(text);
    cli_result_free(&r);
}

static void an_unwritable_metrics_file_is_refused_with_nothing_run(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--metrics", "no/such/dir/m.txt", "--", "sh", "-c",
            "echo run >> runs", NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "resil run: --metrics: cannot open 'no/such/dir/m.txt'");
    assert_false(cli_exists(dir, "runs"));
    cli_result_free(&r);
}

/* A metrics file that takes nothing (a full disk) is said, with the
 * system's reason; the status stays the command's (docs/cli.md). */
static void a_metrics_file_that_cannot_take_the_metrics_is_said_with_why(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--metrics", "/dev/full", "--", "true", NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.err,
                    "resil run: --metrics: cannot write '/dev/full': No space left on device\n");
    cli_result_free(&r);
}

static void an_empty_log_file_name_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--log-file", "", "resil run: --log-file must be a file name, got ''");
}

static void a_log_file_that_cannot_be_opened_is_refused_with_nothing_run(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--log-file", "no/such/dir/log", "--", "sh", "-c",
            "echo run >> runs", NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.err, "resil run: --log-file: cannot open 'no/such/dir/log': No such "
                               "file or directory\n");
    assert_false(cli_exists(dir, "runs"));
    cli_result_free(&r);
}

/* --otlp's values are checked in tests/otlp, built with the exporter. */
static void an_empty_metrics_file_name_is_rejected_by_name(void **state)
{
    assert_rejected(state, "--metrics", "", "resil run: --metrics must be a file name, got ''");
}

/* ---- signals to resil -------------------------------------------------------- */

static void signal_while_attempt_runs(void **state, int sig, int expected_status)
{
    const char *dir = *state;
    pid_t resil = cli_start(dir, NULL, "run", "--log", "json", "--", "sh", "-c",
                            "echo $$ > pid; exec sleep 30", NULL);
    cli_await(cli_file_ready, dir, "pid");
    char *pid = cli_read(dir, "pid");
    kill(resil, sig);
    cli_result r;
    cli_wait(resil, dir, &r);
    assert_int_equal(r.status, expected_status);
    assert_contains(r.err, "\"outcome\":\"cancelled\"");
    assert_contains(r.err, "\"stop\":\"cancelled\",\"attempts\":1}");
    assert_int_equal(kill((pid_t)atoi(pid), 0), -1);
    assert_int_equal(errno, ESRCH);
    free(pid);
    cli_result_free(&r);
}

static void sigterm_while_attempt_runs_exits_143_and_ends_the_attempt(void **state)
{
    signal_while_attempt_runs(state, SIGTERM, 143);
}

static void sigint_while_attempt_runs_exits_130_and_ends_the_attempt(void **state)
{
    signal_while_attempt_runs(state, SIGINT, 130);
}

static void sighup_while_attempt_runs_exits_129_and_ends_the_attempt(void **state)
{
    signal_while_attempt_runs(state, SIGHUP, 129);
}

static void signal_ignored_by_the_parent_stays_ignored(void **state)
{
    const char *dir = *state;
    pid_t resil = cli_start_ignoring(dir, SIGINT, "run", "--", "sh", "-c",
                                     "echo $$ > pid; exec sleep 30", NULL);
    cli_await(cli_file_ready, dir, "pid");
    /* Were SIGINT taken, it would be taken first (the lower number) and give
     * 130; ignored, it is dropped and SIGTERM decides. */
    kill(resil, SIGINT);
    kill(resil, SIGTERM);
    cli_result r;
    cli_wait(resil, dir, &r);
    assert_int_equal(r.status, 143);
    cli_result_free(&r);
}

static void sigterm_reaches_the_whole_process_group(void **state)
{
    const char *dir = *state;
    /* The script's own child writes its pid; it must not outlive the run. */
    pid_t resil = cli_start(dir, NULL, "run", "--", "sh", "-c",
                            "sleep 30 & echo $! > pid; wait", NULL);
    cli_await(cli_file_ready, dir, "pid");
    char *pid = cli_read(dir, "pid");
    kill(resil, SIGTERM);
    cli_result r;
    cli_wait(resil, dir, &r);
    assert_int_equal(r.status, 143);
    cli_await(cli_process_gone, NULL, pid); /* reaped by init, not by us */
    free(pid);
    cli_result_free(&r);
}

static void cancel_kills_what_the_attempt_leaves_behind(void **state)
{
    const char *dir = *state;
    /* A grandchild that ignores SIGTERM outlives the script it belongs to;
     * once the script has ended, the rest of its group is killed. */
    pid_t resil = cli_start(dir, NULL, "run", "--", "sh", "-c",
                            "sh -c 'trap \"\" TERM; echo $$ > pid; exec sleep 300' & wait",
                            NULL);
    cli_await(cli_file_ready, dir, "pid");
    char *pid = cli_read(dir, "pid");
    kill(resil, SIGTERM);
    cli_result r;
    cli_wait(resil, dir, &r);
    assert_int_equal(r.status, 143);
    cli_await(cli_process_gone, NULL, pid);
    free(pid);
    cli_result_free(&r);
}

/* ---- logs for CI and cron ------------------------------------------------- */

static void each_json_record_carries_the_time_and_the_command(void **state)
{
    const char *dir = *state;
    cli_result r;
    char line[512];
    cli_run(&r, dir, NULL, "run", "--attempts", "1", "--log", "json", "--", "sh", "-c",
            "exit 3", NULL);
    for (int i = 0; i < 2; i++) {
        assert_non_null(line_at(r.err, i, line, sizeof line));
        assert_true(strncmp(line, "{\"time\":\"", 9) == 0);
        assert_true(cli_stamped(line + 9) || strncmp(line + 33, "\",", 2) == 0);
        assert_contains(line, "\"command\":\"sh -c exit 3\",");
    }
    cli_result_free(&r);
}

static void waits_read_as_people_write_them(void **state)
{
    const char *dir = *state;
    cli_result r;
    pid_t resil = cli_start(dir, NULL, "run", "--delay", "90s", "--max-delay", "2m", "--jitter",
                            "none", "--", "sh", "-c", "exit 1", NULL);
    cli_await(cli_err_contains, dir, "wait 1m30s (backoff)");
    kill(resil, SIGTERM);
    cli_wait(resil, dir, &r);
    assert_string_equal(cli_unstamp(r.err), "#1 exit 1, wait 1m30s (backoff)\n"
                                            "-> stopped: cancelled\n");
    cli_result_free(&r);
}

static void the_command_learns_its_attempt_number(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempts", "3", "--delay", "1ms", "--", "sh", "-c",
            "echo $RESIL_ATTEMPT/$RESIL_ATTEMPTS >> seen; exit 1", NULL);
    char *seen = cli_read(dir, "seen");
    assert_string_equal(seen, "1/3\n2/3\n3/3\n");
    free(seen);
    cli_result_free(&r);
}

static void log_file_receives_the_record_appended(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_write(dir, "run.log", "earlier\n");
    cli_run(&r, dir, NULL, "run", "--attempts", "1", "--log-file", "run.log", "--", "true",
            NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    char *log = cli_read(dir, "run.log");
    assert_string_equal(cli_unstamp(log), "earlier\n#1 ok\n-> succeeded\n");
    free(log);
    cli_result_free(&r);
}

static void a_long_wait_beats_until_the_next_attempt(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run(&r, dir, NULL, "run", "--attempts", "2", "--delay", "350ms", "--jitter", "none",
            "--heartbeat", "100ms", "--", "sh", "-c", "exit 1", NULL);
    assert_string_equal(cli_unstamp(r.err), "#1 exit 1, wait 350ms (backoff)\n"
                                            "waiting, next attempt in 250ms\n"
                                            "waiting, next attempt in 150ms\n"
                                            "waiting, next attempt in 50ms\n"
                                            "#2 exit 1, attempts exhausted\n"
                                            "-> stopped: attempts exhausted\n");
    cli_result_free(&r);
}

static void signal_during_a_wait_ends_it_at_once(void **state)
{
    const char *dir = *state;
    pid_t resil = cli_start(dir, NULL, "run", "--delay", "1h", "--max-delay", "1h",
                            "--jitter", "none", "--", "sh", "-c",
                            "echo run >> runs; exit 1", NULL);
    cli_await(cli_err_contains, dir, "wait 1h (backoff)");
    kill(resil, SIGTERM);
    cli_result r;
    cli_wait(resil, dir, &r);
    assert_int_equal(r.status, 143);
    assert_int_equal(cli_lines(dir, "runs"), 1);
    assert_string_equal(cli_unstamp(r.err), "#1 exit 1, wait 1h (backoff)\n"
                               "-> stopped: cancelled\n");
    cli_result_free(&r);
}

/* A SIGTERM that reached resil before its first attempt (blocked in the
 * parent and pending across exec) cancels the run before the command
 * starts. */
static void a_signal_pending_at_start_cancels_before_the_first_attempt(void **state)
{
    const char *dir = *state;
    cli_result r;
    cli_run_pending(&r, dir, SIGTERM, "run", "--", "sh", "-c", "echo run >> runs", NULL);
    assert_int_equal(r.status, 143);
    assert_false(cli_exists(dir, "runs"));
    assert_string_equal(cli_unstamp(r.err), "#1 cancelled by SIGTERM before it started, "
                                            "cancelled\n"
                                            "-> stopped: cancelled\n");
    cli_result_free(&r);
}

/* ---- --otlp's exporter settings (the OTEL_* variables) ------------------------ */

/* `resil run --otlp URL` with the variable `name` set to `value` for the
 * run: nothing is run, the tool exits 125 with `expected` on standard
 * error. Skipped in a build without libresil-otlp. */
static void assert_otel_refused(const char *dir, const char *name, const char *value,
                                const char *expected)
{
    cli_result r;
    assert_int_equal(setenv(name, value, 1), 0);
    cli_run(&r, dir, NULL, "run", "--otlp", "http://127.0.0.1:1", "--", "sh", "-c",
            "echo run >> runs", NULL);
    unsetenv(name);
    if (strstr(r.err, "needs libresil-otlp") != NULL) {
        cli_result_free(&r);
        skip();
    }
    assert_int_equal(r.status, 125);
    assert_string_equal(r.err, expected);
    assert_false(cli_exists(dir, "runs"));
    cli_result_free(&r);
}

static void an_otel_variable_the_exporter_refuses_is_named_with_nothing_run(void **state)
{
    assert_otel_refused(*state, "OTEL_EXPORTER_OTLP_TIMEOUT", "soon",
                        "resil run: --otlp: OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number "
                        "in [1, 86400000], got \"soon\"\n");
}

static void an_export_batch_above_the_queue_is_refused_with_nothing_run(void **state)
{
    assert_otel_refused(*state, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096",
                        "resil run: --otlp: OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be at most "
                        "OTEL_BSP_MAX_QUEUE_SIZE (2048), got 4096\n");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, cli_setup, cli_teardown)
    const struct CMUnitTest tests[] = {
        T(chaos_fail_one_fails_every_attempt_without_running_it),
        T(a_chaos_seed_replays_the_same_injections),
        T(the_largest_chaos_seed_replays_too),
        T(a_bad_chaos_value_is_named),
        T(fail_twice_then_succeed_exits_0_after_three_runs),
        T(always_failing_exits_with_last_code_after_three_runs),
        T(exit_127_is_not_retried),
        T(exit_126_is_not_retried),
        T(command_not_found_exits_127_after_one_attempt),
        T(command_not_executable_exits_126_after_one_attempt),
        T(retry_on_makes_unlisted_codes_permanent),
        T(retry_on_retries_listed_codes),
        T(stop_on_makes_listed_codes_permanent),
        T(stop_on_leaves_other_codes_transient),
        T(death_by_signal_is_retried_and_exits_128_plus_signal),
        T(attempts_forever_retries_until_success),
        T(attempts_one_never_retries),
        T(attempt_timeout_ends_each_attempt_and_exits_124),
        T(attempt_ignoring_sigterm_is_killed_after_kill_after),
        T(total_timeout_stops_instead_of_a_wait_that_would_pass_it),
        T(total_timeout_ends_the_running_attempt),
        T(stdin_reaches_only_the_first_attempt),
        T(text_log_follows_the_article),
        T(text_log_of_a_success),
        T(json_log_has_one_object_per_attempt_then_the_stop),
        T(json_log_of_a_success_ends_with_succeeded),
        T(log_none_prints_nothing),
        T(command_output_passes_through),
        T(command_gets_no_descriptor_of_resil),
        T(dry_run_prints_constant_schedule),
        T(delays_list_the_waits_and_set_the_attempts),
        T(delays_repeat_the_last_wait_for_more_attempts),
        T(delays_run_and_wait_as_listed),
        T(delays_refuse_a_bad_wait_and_a_backoff),
        T(delays_of_32_waits_are_taken),
        T(delays_past_32_waits_are_refused_by_name_with_nothing_run),
        T(dry_run_prints_linear_schedule),
        T(dry_run_prints_exponential_schedule_capped),
        T(dry_run_with_jitter_and_no_seed_prints_the_bounds),
        T(dry_run_with_seed_prints_the_same_draws_every_time),
        T(dry_run_shows_where_the_total_timeout_stops),
        T(dry_run_of_forever_shows_the_first_ten_waits),
        T(dry_run_elides_a_long_schedule),
        T(bad_attempts_is_rejected_by_name),
        T(attempts_past_the_largest_count_are_rejected_with_the_bound),
        T(bad_backoff_is_rejected_by_name),
        T(bad_delay_is_rejected_by_name),
        T(bad_max_delay_is_rejected_by_name),
        T(bad_factor_is_rejected_by_name),
        T(factor_is_a_plain_decimal_number),
        T(bad_jitter_is_rejected_by_name),
        T(bad_seed_is_rejected_by_name),
        T(bad_attempt_timeout_is_rejected_by_name),
        T(bad_total_timeout_is_rejected_by_name),
        T(none_and_zero_switch_the_timeouts_off),
        T(attempt_timeout_beyond_total_timeout_is_rejected),
        T(bad_kill_after_is_rejected_by_name),
        T(bad_retry_on_is_rejected_by_name),
        T(bad_stop_on_is_rejected_by_name),
        T(bad_log_is_rejected_by_name),
        T(bad_heartbeat_is_rejected_by_name),
        T(each_option_without_its_value_is_rejected_by_name),
        T(missing_value_is_rejected_by_name),
        T(unknown_option_is_rejected),
        T(missing_command_is_rejected),
        T(help_describes_every_option),
        T(metrics_file_counts_two_retries_and_three_attempts),
        T(an_unwritable_metrics_file_is_refused_with_nothing_run),
        T(a_metrics_file_that_cannot_take_the_metrics_is_said_with_why),
        T(an_empty_metrics_file_name_is_rejected_by_name),
        T(an_empty_log_file_name_is_rejected_by_name),
        T(a_log_file_that_cannot_be_opened_is_refused_with_nothing_run),
        T(sigterm_while_attempt_runs_exits_143_and_ends_the_attempt),
        T(sigint_while_attempt_runs_exits_130_and_ends_the_attempt),
        T(sighup_while_attempt_runs_exits_129_and_ends_the_attempt),
        T(signal_ignored_by_the_parent_stays_ignored),
        T(sigterm_reaches_the_whole_process_group),
        T(cancel_kills_what_the_attempt_leaves_behind),
        T(signal_during_a_wait_ends_it_at_once),
        T(a_signal_pending_at_start_cancels_before_the_first_attempt),
        T(an_otel_variable_the_exporter_refuses_is_named_with_nothing_run),
        T(an_export_batch_above_the_queue_is_refused_with_nothing_run),
        T(each_json_record_carries_the_time_and_the_command),
        T(waits_read_as_people_write_them),
        T(the_command_learns_its_attempt_number),
        T(log_file_receives_the_record_appended),
        T(a_long_wait_beats_until_the_next_attempt),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
