/*
 * test_analyze.c — the worst-case analysis, figure by figure: the seed's
 * own example (4 attempts × 2 s + 0.5 + 1 + 2 s of waits = 11.5 s against a
 * 10 s total) reported exactly so, and each warning the seeds ask for.
 */
#include "cfgtest.h"

typedef struct analysed {
    resil_config_report r;
    resil_config *c;
} analysed;

static analysed analyse(const char *doc, double rate)
{
    analysed a;
    a.c = cfg_load(doc);
    resil_config_analysis_opts o = {.rate = rate};
    assert_int_equal(resil_config_analyze(a.c, &o, &a.r), 0);
    return a;
}

static void done(analysed *a)
{
    resil_config_report_free(&a->r);
    resil_config_free(a->c);
}

static const resil_config_analysis *item(const analysed *a, const char *name)
{
    for (size_t i = 0; i < a->r.len; i++)
        if (strcmp(a->r.items[i].name, name) == 0)
            return &a->r.items[i];
    fail_msg("no analysis named %s", name);
    return NULL;
}

/* The warnings, one "path: message" per line. */
static const char *warnings(const analysed *a)
{
    static char out[4096];
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a->r.warnings.len; i++)
        n += (size_t)snprintf(out + n, sizeof out - n, "%s: %s\n", a->r.warnings.items[i].path,
                              a->r.warnings.items[i].message);
    return out;
}

/* The seed: per-attempt timeout 2 s, total 10 s, 3 retries, exponential
 * from 500 ms, jitter on. */
#define SEED                                                                                 \
    "{'Resilience': {\n"                                                                     \
    "  'Retry': {'orders': {'MaxRetryAttempts': 3, 'BaseDelay': '500ms',\n"                  \
    "    'BackoffStrategy': 'Exponential', 'UseJitter': true}},\n"                           \
    "  'Pipelines': {\n"                                                                     \
    "    'orders': ['TotalTimeout:10s', 'Retry:orders', 'AttemptTimeout:2s']}}}"

static void the_seeds_example_is_reported_exactly(void **state)
{
    (void)state;
    analysed a = analyse(SEED, 0);
    const resil_config_analysis *p = item(&a, "orders");
    assert_true(p->pipeline);
    assert_int_equal(p->attempts, 4);
    assert_duration_equal(p->attempt_timeout, RESIL_S(2));
    assert_duration_equal(p->attempt_bound, RESIL_S(2));
    assert_duration_equal(p->waits, RESIL_MS(3500));
    assert_string_equal(p->waits_text, "500ms + 1s + 2s = 3.5s");
    assert_duration_equal(p->worst_case, RESIL_MS(11500));
    assert_duration_equal(p->total_timeout, RESIL_S(10));
    assert_false(p->fits);
    assert_int_equal(p->max_calls, 4);
    assert_int_equal(p->retry_layers, 1);
    assert_int_equal(a.r.warnings.len, 1);
    char line[512];
    resil_config_diag_format(&a.r.warnings.items[0], line, sizeof line);
    assert_string_equal(line, "Resilience.Pipelines.orders at 5:5: worst case 4 attempts × 2s + "
                              "3.5s of waits = 11.5s exceeds the total timeout 10s");
    done(&a);
}

static void the_seeds_example_reads_so_in_the_report(void **state)
{
    (void)state;
    analysed a = analyse(SEED, 0);
    char text[4096];
    resil_config_report_write(&a.r, RESIL_CONFIG_TEXT, text, sizeof text);
    assert_string_equal(
        text,
        "pipeline orders\n"
        "  strategies     TotalTimeout 10s → Retry orders → AttemptTimeout 2s\n"
        "  attempts       4\n"
        "  waits          500ms + 1s + 2s = 3.5s (jitter can stretch them to 4.959s)\n"
        "  worst case     4 attempts × 2s + 3.5s of waits = 11.5s\n"
        "  total timeout  10s: the worst case does not fit\n"
        "  calls          at most 4 per request\n"
        "  Retry-After    honoured, each hint capped at 1m; a hint past the total timeout ends "
        "the call at once\n"
        "\n"
        "warning: Resilience.Pipelines.orders at 5:5: worst case 4 attempts × 2s + 3.5s of "
        "waits = 11.5s exceeds the total timeout 10s\n"
        "1 pipeline, 1 warning\n");
    done(&a);
}

static void the_report_writes_as_json(void **state)
{
    (void)state;
    analysed a = analyse(SEED, 0);
    char json[4096];
    size_t n = resil_config_report_write(&a.r, RESIL_CONFIG_JSON, json, sizeof json);
    assert_int_equal(n, strlen(json));
    assert_non_null(strstr(json, "{\"pipelines\":[{\"name\":\"orders\",\"kind\":\"pipeline\","));
    assert_non_null(strstr(json, "\"attempts\":4,\"attempt_timeout_ms\":2000,"
                                 "\"attempt_bound_ms\":2000,\"waits_ms\":3500,"));
    assert_non_null(strstr(json, "\"worst_case_ms\":11500,"));
    assert_non_null(strstr(json, "\"total_timeout_ms\":10000,\"per_operation\":false,"
                                 "\"fits\":false,\"max_calls\":4,\"retry_layers\":1,"
                                 "\"retry_after\":\"honor\",\"retry_after_max_ms\":60000}"));
    assert_non_null(strstr(json, "\"warnings\":[{\"path\":\"Resilience.Pipelines.orders\","
                                 "\"line\":5,\"column\":5,\"message\":\"worst case 4 attempts × "
                                 "2s + 3.5s of waits = 11.5s exceeds the total timeout 10s\"}]}"));
    /* snprintf-like: a short buffer says how much it needed. */
    char small[16];
    assert_int_equal(resil_config_report_write(&a.r, RESIL_CONFIG_JSON, small, sizeof small), n);
    assert_int_equal(strlen(small), sizeof small - 1);
    done(&a);
}

/* A named Retry entry takes Polly's defaults (constant 2 s, no jitter);
 * these tests state the backoff they are about. */
#define EXPONENTIAL "'BackoffStrategy': 'Exponential'"
#define LIBRARY_BACKOFF "'BackoffStrategy': 'Exponential', 'BaseDelay': '1s', 'Jitter': 'Full'"

static void a_schedule_that_fits_exactly_has_no_warning(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 2,"
                         " 'BaseDelay': '100ms', 'Jitter': 'Full', " EXPONENTIAL "}},"
                         " 'Pipelines': {'p': ['TotalTimeout:1500ms', 'Retry:r',"
                         " 'AttemptTimeout:400ms']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "p");
    assert_duration_equal(p->waits, RESIL_MS(300));
    assert_duration_equal(p->waits_max, RESIL_MS(300)); /* full jitter stays under */
    assert_duration_equal(p->worst_case, RESIL_MS(1500));
    assert_true(p->fits);
    assert_string_equal(warnings(&a), "");
    done(&a);
}

static void max_delay_caps_the_waits(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 5,"
                         " 'MaxDelay': '3s', 'Jitter': 'None', " EXPONENTIAL ", 'BaseDelay': '1s'}},"
                         " 'Pipelines': {'p': ['Retry:r', 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "p");
    assert_duration_equal(p->waits, RESIL_S(12));
    assert_string_equal(p->waits_text, "1s + 2s + 3s + 3s + 3s = 12s");
    assert_duration_equal(p->worst_case, RESIL_S(18));
    assert_duration_equal(p->total_timeout, 0);
    assert_true(p->fits);
    done(&a);
}

static void many_waits_are_summarised(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 9,"
                         " 'BackoffStrategy': 'Constant', 'BaseDelay': '1s'}},"
                         " 'Pipelines': {'p': ['Retry:r', 'AttemptTimeout:1s']}}}",
                         0);
    assert_string_equal(item(&a, "p")->waits_text, "1s + 1s + 1s + 1s + … (9 waits) = 9s");
    done(&a);
}

static void jitter_above_the_formula_is_reported_beside_it(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 2,"
                         " 'BackoffStrategy': 'Constant', 'BaseDelay': '1s', 'UseJitter': true}},"
                         " 'Pipelines': {'p': ['TotalTimeout:5200ms', 'Retry:r',"
                         " 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "p");
    assert_duration_equal(p->waits, RESIL_S(2));
    assert_duration_equal(p->waits_max, RESIL_MS(2500)); /* Polly's ±25 % */
    assert_duration_equal(p->worst_case, RESIL_S(5));
    assert_duration_equal(p->worst_case_jitter, RESIL_MS(5500));
    assert_true(p->fits);
    assert_string_equal(warnings(&a),
                        "Resilience.Pipelines.p: with jitter's longest draws the worst case 3 "
                        "attempts × 1s + 2.5s of waits = 5.5s exceeds the total timeout 5.2s\n");
    done(&a);
}

static void retries_without_an_attempt_timeout_are_warned(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'Jitter': 'Full'}},"
                         " 'Pipelines': {'t': ['TotalTimeout:10s', 'Retry:r'],"
                         " 'none': ['Retry:r'], 'once': ['TotalTimeout:1s']}}}",
                         0);
    assert_duration_equal(item(&a, "t")->worst_case, RESIL_DURATION_MAX);
    assert_false(item(&a, "t")->fits);
    assert_true(item(&a, "once")->fits); /* one attempt: the total is its bound */
    assert_string_equal(warnings(&a),
                        "Resilience.Pipelines.t: no attempt timeout: one hung attempt can spend "
                        "the whole total timeout 10s, leaving no time to retry\n"
                        "Resilience.Pipelines.none: nothing bounds a call: no attempt timeout "
                        "and no total timeout\n");
    done(&a);
}

static void retrying_forever_needs_a_total_timeout(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 'Forever', 'Jitter': 'Full'}},"
                         " 'Pipelines': {'p': ['Retry:r', 'AttemptTimeout:1s'],"
                         " 'q': ['TotalTimeout:1m', 'Retry:r', 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "p");
    assert_int_equal(p->attempts, RESIL_ATTEMPTS_FOREVER);
    assert_duration_equal(p->worst_case, RESIL_DURATION_MAX);
    assert_int_equal(p->max_calls, UINT64_MAX);
    assert_string_equal(p->waits_text, "unbounded (attempts forever)");
    assert_false(item(&a, "q")->fits);
    assert_string_equal(warnings(&a), "Resilience.Pipelines.p: retries forever with no total "
                                      "timeout or TimeBudget to stop it\n");
    done(&a);
}

static void the_time_budget_is_a_total_timeout(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 3,"
                         " 'BaseDelay': '1s', 'Jitter': 'Full', 'TimeBudget': '8s', " EXPONENTIAL "}},"
                         " 'Pipelines': {'p': ['TotalTimeout:20s', 'Retry:r',"
                         " 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "p");
    assert_duration_equal(p->total_timeout, RESIL_S(8));
    assert_duration_equal(p->worst_case, RESIL_S(11)); /* 4 × 1s + 1 + 2 + 4 */
    assert_string_equal(warnings(&a), "Resilience.Pipelines.p: worst case 4 attempts × 1s + 7s "
                                      "of waits = 11s exceeds the total timeout 8s\n");
    done(&a);
}

static void per_operation_totals_are_each_checked(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Timeouts': {'DefaultTimeout': '30s',"
                         " 'OperationTimeouts': {'query': '2s', 'report': '1m'}},"
                         " 'Retry': {'r': {'MaxRetryAttempts': 1, 'Jitter': 'Equal', " EXPONENTIAL ", 'BaseDelay': '1s'}},"
                         " 'Pipelines': {'p': ['TotalTimeout', 'Retry:r', 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "p");
    assert_true(p->per_operation);
    assert_duration_equal(p->total_timeout, RESIL_S(30));
    assert_true(p->fits);
    assert_string_equal(warnings(&a), "Resilience.Pipelines.p: worst case 2 attempts × 1s + 1s "
                                      "of waits = 3s exceeds the total timeout 2s of operation "
                                      "query\n");
    done(&a);
}

/* The auth refresh around a transient retry: the inner retry's worst case
 * (4 attempts × 1s + 3s of waits = 7s) is each outer attempt's bound. */
static void every_retry_step_of_a_pipeline_is_a_layer(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {"
                         " 'auth': {'MaxRetryAttempts': 1, 'BaseDelay': '0s', 'Jitter': 'Full'},"
                         " 'transient': {'MaxRetryAttempts': 3, 'BaseDelay': '1s',"
                         " 'Jitter': 'Full'}},"
                         " 'Pipelines': {'api': ['TotalTimeout:1m', 'Retry:auth',"
                         " 'Retry:transient', 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *p = item(&a, "api");
    assert_int_equal(p->attempts, 2);
    assert_duration_equal(p->attempt_bound, RESIL_S(7));
    assert_duration_equal(p->worst_case, RESIL_S(14));
    assert_int_equal(p->max_calls, 8);
    assert_int_equal(p->retry_layers, 2);
    assert_true(p->fits);
    assert_string_equal(warnings(&a), "Resilience.Pipelines.api: 2 layers retry: one request "
                                      "can make 8 calls to the dependency; retry in one layer "
                                      "only\n");
    assert_int_equal(a.r.len, 1); /* both Retry entries are in a pipeline */
    done(&a);
}

static void layers_multiply_calls_and_are_warned(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'three': {'MaxRetryAttempts': 2, 'Jitter': 'Full'},"
                         " 'four': {'MaxRetryAttempts': 3, " LIBRARY_BACKOFF "}},"
                         " 'Pipelines': {'gateway': ['Retry:three', 'Pipeline:service'],"
                         " 'service': ['TotalTimeout:5s', 'Retry:four', 'AttemptTimeout:1s']}}}",
                         0);
    const resil_config_analysis *g = item(&a, "gateway");
    assert_int_equal(g->max_calls, 12);
    assert_int_equal(g->retry_layers, 2);
    assert_duration_equal(g->attempt_bound, RESIL_S(5)); /* the inner total */
    assert_int_equal(item(&a, "service")->retry_layers, 1);
    assert_string_equal(warnings(&a), "Resilience.Pipelines.gateway: 2 layers retry: one "
                                      "request can make 12 calls to the dependency; retry in "
                                      "one layer only\n"
                                      "Resilience.Pipelines.service: worst case 4 attempts × 1s "
                                      "+ 7s of waits = 11s exceeds the total timeout 5s\n");
    done(&a);
}

static void jitter_off_is_warned_per_retry_policy(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {\n"
                         " 'steady': {'UseJitter': false},\n"
                         " 'once': {'UseJitter': false, 'MaxRetryAttempts': 0}}}}",
                         0);
    assert_int_equal(a.r.warnings.len, 1);
    assert_string_equal(a.r.warnings.items[0].path, "Resilience.Retry.steady");
    assert_int_equal(a.r.warnings.items[0].line, 2);
    assert_string_equal(a.r.warnings.items[0].message,
                        "jitter is off: clients that failed together retry together, in waves");
    done(&a);
}

static void unsafe_methods_retried_without_keys_are_warned(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {"
                         "'bare': {'RetryUnsafeMethods': true, 'Jitter': 'Full'},"
                         " 'keyed': {'RetryUnsafeMethods': true, 'IdempotencyKeys': true,"
                         " 'Jitter': 'Full'}}}}",
                         0);
    assert_string_equal(warnings(&a), "Resilience.Retry.bare: retries unsafe methods (POST, "
                                      "PATCH) without idempotency keys: a retried write can "
                                      "happen twice\n");
    done(&a);
}

#define BREAKERS                                                                             \
    "{'Resilience': {'CircuitBreakers': {"                                                   \
    "'ratio': {'MinimumThroughput': 100, 'SamplingDuration': '30s'},"                        \
    " 'both': {'Kind': 'Both', 'MinimumThroughput': 100},"                                   \
    " 'busy': {'MinimumThroughput': 50},"                                                    \
    " 'runs': {'ConsecutiveFailureThreshold': 3}},"                                          \
    " 'DistributedCircuitBreaker': {'Enabled': true, 'MinimumThroughput': 90}}}"

static void a_ratio_breaker_the_traffic_cannot_trip_is_warned(void **state)
{
    (void)state;
    analysed a = analyse(BREAKERS, 2);
    assert_string_equal(warnings(&a),
                        "Resilience.DistributedCircuitBreaker: needs 90 calls in 30s to judge its "
                        "failure ratio, but 2 requests/s bring about 60: only its consecutive "
                        "rule can trip it\n"
                        "Resilience.CircuitBreakers.ratio: needs 100 calls in 30s to judge its "
                        "failure ratio, but 2 requests/s bring about 60: it can never trip\n"
                        "Resilience.CircuitBreakers.both: needs 100 calls in 30s to judge its "
                        "failure ratio, but 2 requests/s bring about 60: only its consecutive "
                        "rule can trip it\n");
    done(&a);
}

static void a_count_window_breaker_is_not_judged_by_the_rate(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'CircuitBreakers': {"
                         "'last100': {'MinimumThroughput': 100, 'SlidingWindowType': 'Count',"
                         " 'SlidingWindowSize': 100}}}}",
                         2);
    assert_string_equal(warnings(&a), "");
    done(&a);
}

static void without_a_rate_breakers_are_not_judged(void **state)
{
    (void)state;
    analysed a = analyse(BREAKERS, 0);
    assert_string_equal(warnings(&a), "");
    done(&a);
}

static void a_retry_policy_in_no_pipeline_is_analysed_alone(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'used': {}, 'spare': {'MaxRetryAttempts': 1,"
                         " 'BaseDelay': '3s'}}, 'Pipelines': {'p': ['Retry:used']}}}",
                         0);
    assert_int_equal(a.r.len, 2);
    const resil_config_analysis *s = item(&a, "spare");
    assert_false(s->pipeline);
    assert_int_equal(s->attempts, 2);
    assert_duration_equal(s->waits, RESIL_S(3));
    assert_int_equal(s->max_calls, 2);
    assert_string_equal(s->strategies, "Retry spare (in no pipeline)");
    done(&a);
}

static void retry_after_bounds_are_reported(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {'h': {'MaxRetryAfter': '5s'},"
                         " 'i': {'RetryAfter': 'Ignore'}, 'b': {'RetryAfter': 'Bounded'}},"
                         " 'Pipelines': {'ph': ['Retry:h'], 'pi': ['Retry:i'], 'pb': ['Retry:b'],"
                         " 'none': []}}}",
                         0);
    assert_duration_equal(item(&a, "ph")->retry_after_max, RESIL_S(5));
    assert_int_equal(item(&a, "ph")->retry_after, RESIL_RETRY_AFTER_HONOR);
    assert_duration_equal(item(&a, "pi")->retry_after_max, 0);
    assert_int_equal(item(&a, "pb")->retry_after, RESIL_RETRY_AFTER_BOUNDED);
    assert_int_equal(item(&a, "none")->retry_after, RESIL_RETRY_AFTER_IGNORE);
    assert_int_equal(item(&a, "none")->attempts, 1);
    assert_string_equal(item(&a, "none")->strategies, "(none: the operation runs once)");
    done(&a);
}

static void huge_schedules_saturate_instead_of_wrapping(void **state)
{
    (void)state;
    analysed a = analyse("{'Resilience': {'Retry': {"
                         "'tiny': {'MaxRetryAttempts': 4000000000, 'BackoffStrategy': 'Linear',"
                         " 'BaseDelay': '1ns', 'MaxDelay': null, 'Jitter': 'None'},"
                         " 'big': {'MaxRetryAttempts': 4000000000, 'BackoffStrategy': 'Linear',"
                         " 'BaseDelay': '1s', 'MaxDelay': null}}}}",
                         0);
    /* 1 + 2 + … + 4e9 ns = 8000000002000000000 ns, which fits. */
    assert_duration_equal(item(&a, "tiny")->waits, INT64_C(8000000002000000000));
    assert_duration_equal(item(&a, "big")->waits, RESIL_DURATION_MAX);
    assert_duration_equal(item(&a, "big")->worst_case, RESIL_DURATION_MAX);
    done(&a);
}

static void null_arguments_are_refused(void **state)
{
    (void)state;
    resil_config_report r;
    assert_int_equal(resil_config_analyze(NULL, NULL, &r), RESIL_EINVAL);
    resil_config_report_free(NULL);
    assert_int_equal(resil_config_report_write(NULL, RESIL_CONFIG_TEXT, NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_seeds_example_is_reported_exactly),
        cmocka_unit_test(the_seeds_example_reads_so_in_the_report),
        cmocka_unit_test(the_report_writes_as_json),
        cmocka_unit_test(a_schedule_that_fits_exactly_has_no_warning),
        cmocka_unit_test(max_delay_caps_the_waits),
        cmocka_unit_test(many_waits_are_summarised),
        cmocka_unit_test(jitter_above_the_formula_is_reported_beside_it),
        cmocka_unit_test(retries_without_an_attempt_timeout_are_warned),
        cmocka_unit_test(retrying_forever_needs_a_total_timeout),
        cmocka_unit_test(the_time_budget_is_a_total_timeout),
        cmocka_unit_test(per_operation_totals_are_each_checked),
        cmocka_unit_test(layers_multiply_calls_and_are_warned),
        cmocka_unit_test(every_retry_step_of_a_pipeline_is_a_layer),
        cmocka_unit_test(jitter_off_is_warned_per_retry_policy),
        cmocka_unit_test(unsafe_methods_retried_without_keys_are_warned),
        cmocka_unit_test(a_ratio_breaker_the_traffic_cannot_trip_is_warned),
        cmocka_unit_test(a_count_window_breaker_is_not_judged_by_the_rate),
        cmocka_unit_test(without_a_rate_breakers_are_not_judged),
        cmocka_unit_test(a_retry_policy_in_no_pipeline_is_analysed_alone),
        cmocka_unit_test(retry_after_bounds_are_reported),
        cmocka_unit_test(huge_schedules_saturate_instead_of_wrapping),
        cmocka_unit_test(null_arguments_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
