/*
 * test_schema.c — every key of every section: what it sets, its default,
 * its bound, and the message each invalid value gets (naming the key by its
 * path), plus the rules between keys.
 */
#include "cfgtest.h"

/* One invalid value: the entry's body, the key the error must name, and
 * the message. */
typedef struct bad_value {
    const char *body;
    const char *key;
    const char *message;
} bad_value;

/* Check each row against a document built from `shape` (with one %s for
 * the body): the first error names Resilience.<prefix>.<key>. */
static void check_bad_values(const char *shape, const char *prefix, const bad_value *rows,
                             size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char doc[2048], path[256];
        snprintf(doc, sizeof doc, shape, rows[i].body);
        snprintf(path, sizeof path, "Resilience.%s%s%s", prefix, rows[i].key[0] ? "." : "",
                 rows[i].key);
        const char *got_path = cfg_first_path(doc);
        const char *got = cfg_first_message(doc);
        if (strcmp(got_path, path) != 0 || strcmp(got, rows[i].message) != 0)
            print_error("row %zu (%s):\n  %s: %s\n", i, rows[i].body, got_path, got);
        assert_string_equal(got_path, path);
        assert_string_equal(cfg_first_message(doc), rows[i].message);
    }
}

#define ROWS(t) (t), sizeof(t) / sizeof((t)[0])

/* ---- Retry ------------------------------------------------------------------- */

static resil_config_retry retry_of(const char *body)
{
    char doc[1024];
    snprintf(doc, sizeof doc, "{'Resilience': {'Retry': {'r': {%s}}}}", body);
    resil_config *c = cfg_load(doc);
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "r", &r), 0);
    resil_config_free(c);
    return r;
}

/* Polly v8's RetryStrategyOptions: 3 retries, 2 s, constant, UseJitter
 * false, no MaxDelay. */
static void retry_keys_absent_give_pollys_defaults(void **state)
{
    (void)state;
    resil_config_retry r = retry_of("");
    assert_int_equal(r.policy.max_attempts, 4);
    assert_int_equal(r.policy.backoff.kind, RESIL_BACKOFF_CONSTANT);
    assert_duration_equal(r.policy.backoff.base, RESIL_S(2));
    assert_int_equal(r.policy.backoff.jitter, RESIL_JITTER_NONE);
    assert_duration_equal(r.policy.backoff.max_delay, RESIL_DURATION_MAX);
    assert_duration_equal(r.policy.max_total, 0);
    assert_int_equal(r.policy.retry_after, RESIL_RETRY_AFTER_HONOR);
    assert_duration_equal(r.policy.retry_after_max, RESIL_S(60));
    assert_int_equal(r.policy.unsafe_mode, RESIL_UNSAFE_REFUSE);
    assert_false(r.retry_unsafe_methods);
    assert_false(r.idempotency_keys);
}

static void retry_reads_every_key(void **state)
{
    (void)state;
    resil_config_retry r = retry_of(
        "'MaxRetryAttempts': 3, 'BaseDelay': '500ms', 'BackoffStrategy': 'Linear',"
        " 'Jitter': 'Proportional', 'JitterFraction': 0.5, 'Factor': 3, 'MaxDelay': '10s',"
        " 'TimeBudget': '00:00:20', 'RetryAfter': 'Bounded', 'MaxRetryAfter': '2m',"
        " 'UnsafeMode': 'RunOnce', 'RetryUnsafeMethods': true, 'IdempotencyKeys': true");
    assert_int_equal(r.policy.max_attempts, 4);
    assert_duration_equal(r.policy.backoff.base, RESIL_MS(500));
    assert_int_equal(r.policy.backoff.kind, RESIL_BACKOFF_LINEAR);
    assert_int_equal(r.policy.backoff.jitter, RESIL_JITTER_PROPORTIONAL);
    assert_near(r.policy.backoff.jitter_fraction, 0.5, 0);
    assert_near(r.policy.backoff.factor, 3, 0);
    assert_duration_equal(r.policy.backoff.max_delay, RESIL_S(10));
    assert_duration_equal(r.policy.max_total, RESIL_S(20));
    assert_int_equal(r.policy.retry_after, RESIL_RETRY_AFTER_BOUNDED);
    assert_duration_equal(r.policy.retry_after_max, RESIL_S(120));
    assert_int_equal(r.policy.unsafe_mode, RESIL_UNSAFE_RUN_ONCE);
    assert_true(r.retry_unsafe_methods);
    assert_true(r.idempotency_keys);
}

static void max_retry_attempts_counts_retries_after_the_first(void **state)
{
    (void)state;
    assert_int_equal(retry_of("'MaxRetryAttempts': 0").policy.max_attempts, 1);
    assert_int_equal(retry_of("'MaxRetryAttempts': 4294967293").policy.max_attempts,
                     RESIL_ATTEMPTS_FOREVER - 1);
    assert_int_equal(retry_of("'MaxRetryAttempts': 'forever'").policy.max_attempts,
                     RESIL_ATTEMPTS_FOREVER);
}

static void backoff_strategies_name_kind_and_jitter(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        resil_backoff_kind kind;
        resil_jitter jitter;
    } rows[] = {
        {"Constant", RESIL_BACKOFF_CONSTANT, RESIL_JITTER_NONE},
        {"fixed", RESIL_BACKOFF_CONSTANT, RESIL_JITTER_NONE},
        {"Linear", RESIL_BACKOFF_LINEAR, RESIL_JITTER_NONE},
        {"Exponential", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_NONE},
        {"Fibonacci", RESIL_BACKOFF_FIBONACCI, RESIL_JITTER_NONE},
        {"ExponentialWithJitter", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_POLLY},
        {"FullJitter", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_FULL},
        {"decorrelated-jitter", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_DECORRELATED},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char body[128];
        snprintf(body, sizeof body, "'BackoffType': '%s'", rows[i].name);
        resil_config_retry r = retry_of(body);
        assert_int_equal(r.policy.backoff.kind, rows[i].kind);
        assert_int_equal(r.policy.backoff.jitter, rows[i].jitter);
    }
}

static void use_jitter_means_pollys_jitter_or_none(void **state)
{
    (void)state;
    assert_int_equal(retry_of("'UseJitter': true").policy.backoff.jitter, RESIL_JITTER_POLLY);
    assert_int_equal(retry_of("'UseJitter': false").policy.backoff.jitter, RESIL_JITTER_NONE);
    assert_int_equal(retry_of("'UseJitter': true, 'Jitter': 'Equal'").policy.backoff.jitter,
                     RESIL_JITTER_EQUAL);
    assert_int_equal(retry_of("'UseJitter': false, 'Jitter': 'None'").policy.backoff.jitter,
                     RESIL_JITTER_NONE);
}

static void retry_after_keys_and_nulls(void **state)
{
    (void)state;
    assert_int_equal(retry_of("'ShouldRetryAfterHeader': false").policy.retry_after,
                     RESIL_RETRY_AFTER_IGNORE);
    assert_int_equal(retry_of("'RetryAfter': 'honour'").policy.retry_after,
                     RESIL_RETRY_AFTER_HONOR);
    assert_int_equal(retry_of("'RetryAfter': 'Ignore', 'ShouldRetryAfterHeader': false")
                         .policy.retry_after,
                     RESIL_RETRY_AFTER_IGNORE);
    assert_duration_equal(retry_of("'MaxDelay': null").policy.backoff.max_delay,
                          RESIL_DURATION_MAX);
    assert_duration_equal(retry_of("'TimeBudget': null").policy.max_total, 0);
    assert_duration_equal(retry_of("'Delay': '00:00:02'").policy.backoff.base, RESIL_S(2));
}

static void retry_rejects_each_invalid_value_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'MaxRetryAttempts': -1", "MaxRetryAttempts",
         "must be a whole number in [0,4294967293] or \"Forever\", got -1"},
        {"'MaxRetryAttempts': 1.5", "MaxRetryAttempts",
         "must be a whole number in [0,4294967293] or \"Forever\", got 1.5"},
        {"'MaxRetryAttempts': 4294967294", "MaxRetryAttempts",
         "must be a whole number in [0,4294967293] or \"Forever\", got 4294967294"},
        {"'MaxRetryAttempts': 'lots'", "MaxRetryAttempts",
         "must be a whole number in [0,4294967293] or \"Forever\", got \"lots\""},
        {"'BaseDelay': 5", "BaseDelay",
         "must be a duration such as \"30s\" or \"00:00:30\", got 5"},
        {"'BaseDelay': '500'", "BaseDelay",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"500\": missing unit (ns, "
         "us, ms, s, m, h, d)"},
        {"'BaseDelay': '-1s'", "BaseDelay",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"-1s\": must not be "
         "negative"},
        {"'BackoffStrategy': 'Quadratic'", "BackoffStrategy",
         "must be Constant, Fixed, Linear, Exponential, Fibonacci, ExponentialWithJitter, "
         "FullJitter or DecorrelatedJitter, got \"Quadratic\""},
        {"'Jitter': 7", "Jitter",
         "must be None, Full, Equal, Decorrelated, Proportional or Polly, got 7"},
        {"'UseJitter': 'yes'", "UseJitter", "must be true or false, got \"yes\""},
        {"'JitterFraction': 1.5", "JitterFraction", "must be in [0,1], got 1.5"},
        {"'JitterFraction': -0.1", "JitterFraction", "must be in [0,1], got -0.1"},
        {"'Factor': 0.5", "Factor", "must be >= 1, got 0.5"},
        {"'Factor': '2x'", "Factor", "must be >= 1, got \"2x\""},
        {"'MaxDelay': '-1ms'", "MaxDelay",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"-1ms\": must not be "
         "negative"},
        {"'TimeBudget': true", "TimeBudget",
         "must be a duration such as \"30s\" or \"00:00:30\", got true"},
        {"'RetryAfter': 'Sometimes'", "RetryAfter",
         "must be Honor, Honour, Ignore or Bounded, got \"Sometimes\""},
        {"'ShouldRetryAfterHeader': 1", "ShouldRetryAfterHeader", "must be true or false, got 1"},
        {"'MaxRetryAfter': null", "MaxRetryAfter",
         "must be a duration such as \"30s\" or \"00:00:30\", got null"},
        {"'UnsafeMode': 'Never'", "UnsafeMode", "must be Refuse or RunOnce, got \"Never\""},
        {"'RetryUnsafeMethods': 'sure'", "RetryUnsafeMethods",
         "must be true or false, got \"sure\""},
        {"'IdempotencyKeys': {}", "IdempotencyKeys", "must be true or false, got an object"},
    };
    check_bad_values("{'Resilience': {'Retry': {'r': {%s}}}}", "Retry.r", ROWS(rows));
}

static void retry_refuses_keys_that_contradict_each_other(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'BackoffStrategy': 'FullJitter', 'Jitter': 'Equal'", "Jitter",
         "contradicts BackoffStrategy FullJitter, which means full jitter"},
        {"'UseJitter': false, 'Jitter': 'Full'", "UseJitter",
         "contradicts Jitter, which means full jitter"},
        {"'UseJitter': true, 'Jitter': 'None'", "UseJitter",
         "contradicts Jitter, which means none jitter"},
        {"'UseJitter': false, 'BackoffStrategy': 'DecorrelatedJitter'", "UseJitter",
         "contradicts BackoffStrategy, which means decorrelated jitter"},
        {"'RetryAfter': 'Ignore', 'ShouldRetryAfterHeader': true", "ShouldRetryAfterHeader",
         "contradicts RetryAfter Ignore"},
        {"'UseJitter': true, 'BackoffStrategy': 'Exponential', 'Factor': 3", "Factor",
         "must be 2 with Polly's jitter on exponential backoff (Polly's formula doubles), got 3"},
    };
    check_bad_values("{'Resilience': {'Retry': {'r': {%s}}}}", "Retry.r", ROWS(rows));
}

static void delays_list_the_waits_and_count_the_retries(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'r': {'Delays': ['1s', '2s', '5s']}}}}");
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "r", &r), 0);
    assert_int_equal(r.policy.max_attempts, 4);
    assert_int_equal(r.policy.backoff.kind, RESIL_BACKOFF_LIST);
    assert_int_equal(r.policy.backoff.delays_len, 3);
    assert_duration_equal(r.policy.backoff.delays[0], RESIL_S(1));
    assert_duration_equal(r.policy.backoff.delays[1], RESIL_S(2));
    assert_duration_equal(r.policy.backoff.delays[2], RESIL_S(5));
    assert_int_equal(r.policy.backoff.jitter, RESIL_JITTER_NONE);
    assert_int_equal(resil_retry_policy_validate(&r.policy, NULL), 0);
    assert_duration_equal(resil_backoff_delay(&r.policy.backoff, 3, NULL, NULL), RESIL_S(5));
    resil_config_free(c);
}

static void delays_keep_an_explicit_retry_count(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'r': "
                               "{'Delays': ['100ms'], 'MaxRetryAttempts': 5}}}}");
    resil_config_retry r;
    resil_config_retry_get(c, "r", &r);
    assert_int_equal(r.policy.max_attempts, 6);
    assert_duration_equal(resil_backoff_delay(&r.policy.backoff, 5, NULL, NULL), RESIL_MS(100));
    resil_config_free(c);
}

static void delays_refuse_bad_waits_and_formula_keys(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Delays': []", "Delays", "must hold 1 to 32 durations, got 0"},
        {"'Delays': '1s'", "Delays", "must be an array of 1 to 32 durations, got \"1s\""},
        {"'Delays': ['1s', 2]", "Delays[1]",
         "must be a duration such as \"30s\" or \"00:00:30\", got 2"},
        {"'Delays': ['1s'], 'BackoffStrategy': 'Linear'", "BackoffStrategy",
         "Delays lists the waits: BackoffStrategy does not apply with it"},
        {"'Delays': ['1s'], 'BaseDelay': '1s'", "BaseDelay",
         "Delays lists the waits: BaseDelay does not apply with it"},
    };
    check_bad_values("{'Resilience': {'Retry': {'r': {%s}}}}", "Retry.r", ROWS(rows));
}

static void disable_for_and_hint_headers_are_kept_for_http(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'r': {"
                               "'DisableFor': ['POST', 'PATCH'],"
                               " 'RetryAfterHeaders': ['x-wait-ms', 'X-Retry-In']}}}}");
    resil_config_retry r;
    resil_config_retry_get(c, "r", &r);
    assert_string_equal(r.disable_for, "POST,PATCH");
    assert_non_null(r.retry_after_headers);
    assert_string_equal(r.retry_after_headers[0], "x-wait-ms");
    assert_string_equal(r.retry_after_headers[1], "X-Retry-In");
    assert_null(r.retry_after_headers[2]);
    resil_config_free(c);
    resil_config_retry plain = retry_of("");
    assert_null(plain.disable_for);
    assert_null(plain.retry_after_headers);
}

static void disable_for_and_hint_headers_take_names(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'DisableFor': ['PO ST']", "DisableFor[0]",
         "must be a method name such as \"POST\", got \"PO ST\""},
        {"'DisableFor': ['']", "DisableFor[0]", "must be a method name such as \"POST\", got \"\""},
        {"'RetryAfterHeaders': ['x-wait:']", "RetryAfterHeaders[0]",
         "must be a header name such as \"retry-after-ms\", got \"x-wait:\""},
    };
    check_bad_values("{'Resilience': {'Retry': {'r': {%s}}}}", "Retry.r", ROWS(rows));
}

/* The methods are kept joined by commas in 127 bytes: a list that does not
 * fit is refused at the method that overflows it, not cut short (a POST
 * cut off would be retried). */
static void disable_for_methods_past_127_bytes_in_all_are_refused_by_key(void **state)
{
    (void)state;
    char doc[512];
    snprintf(doc, sizeof doc,
             "{'Resilience': {'Retry': {'r': {'DisableFor': ['A%062d', 'B%062d', 'POST']}}}}", 0,
             0);
    assert_string_equal(cfg_first_path(doc), "Resilience.Retry.r.DisableFor[2]");
    assert_string_equal(cfg_first_message(doc),
                        "DisableFor's methods take at most 127 bytes in all, commas included");
}

static void disable_for_methods_of_127_bytes_in_all_are_kept_whole(void **state)
{
    (void)state;
    char doc[512], want[128];
    snprintf(doc, sizeof doc,
             "{'Resilience': {'Retry': {'r': {'DisableFor': ['A%062d', 'B%062d']}}}}", 0, 0);
    snprintf(want, sizeof want, "A%062d,B%062d", 0, 0);
    resil_config *c = cfg_load(doc);
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "r", &r), 0);
    assert_string_equal(r.disable_for, want);
    resil_config_free(c);
}

/* ---- numbers past their range ------------------------------------------------ */

/* One document with one bad number: the path its first error names, and
 * the message. */
typedef struct bad_doc {
    const char *doc;
    const char *path;
    const char *message;
} bad_doc;

static void check_bad_docs(const bad_doc *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *got_path = cfg_first_path(rows[i].doc);
        const char *got = cfg_first_message(rows[i].doc);
        if (strcmp(got_path, rows[i].path) != 0 || strcmp(got, rows[i].message) != 0)
            print_error("row %zu: %s: %s\n", i, got_path, got);
        assert_string_equal(cfg_first_path(rows[i].doc), rows[i].path);
        assert_string_equal(cfg_first_message(rows[i].doc), rows[i].message);
    }
}

/* A whole number past its type's largest value is refused saying the
 * whole range it must be in: "must be >= 0, got 2147483648" would read as
 * a contradiction (the breaker's and bulkhead's tables hold more rows). */
static void a_whole_number_past_its_largest_value_is_refused_with_its_range(void **state)
{
    (void)state;
    static const bad_doc rows[] = {
        {"{'Resilience': {'Bulkheads': {'b': {'MaxQueueLength': '2147483648'}}}}",
         "Resilience.Bulkheads.b.MaxQueueLength",
         "must be a whole number in [0,2147483647], got \"2147483648\""},
        {"{'Resilience': {'GracefulDegradation': {'Levels': [{'Name': 'a',"
         " 'PriorityThreshold': 2147483648, 'ErrorRateThreshold': 1, 'CpuThreshold': 1,"
         " 'MemoryThreshold': 1}]}}}",
         "Resilience.GracefulDegradation.Levels[0].PriorityThreshold",
         "must be a whole number in [-2147483648,2147483647], got 2147483648"},
    };
    check_bad_docs(ROWS(rows));
}

/* The bounds of whole numbers are compared as whole numbers: 2^53 + 1 is
 * past a bound of 2^53, though both are the same double. */
static void a_whole_number_one_past_2_to_the_53_is_refused(void **state)
{
    (void)state;
    static const bad_doc rows[] = {
        {"{'Resilience': {'Chaos': {'c': {'Seed': 9007199254740993}}}}",
         "Resilience.Chaos.c.Seed", "must be a whole number in [0,9007199254740992], got "
                                    "9007199254740993"},
        {"{'Resilience': {'Chaos': {'c': {'Code': -9007199254740993}}}}",
         "Resilience.Chaos.c.Code", "must be a whole number >= -9007199254740992, got "
                                    "-9007199254740993"},
    };
    check_bad_docs(ROWS(rows));
    resil_config *c = cfg_load("{'Resilience': {'Chaos': {'c': {'Seed': 9007199254740992}}}}");
    resil_chaos_opts o;
    assert_int_equal(resil_config_chaos_get(c, "c", &o), 0);
    assert_true(o.seed == 9007199254740992u);
    resil_config_free(c);
}

/* A number too large for any integer (or a negative one too small) is
 * still JSON: it is refused by the key that holds it, not as text that is
 * not JSON. */
static void an_integer_past_64_bits_is_refused_by_key(void **state)
{
    (void)state;
    static const bad_doc rows[] = {
        {"{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 99999999999999999999}}}}",
         "Resilience.Retry.r.MaxRetryAttempts",
         "must be a whole number in [0,4294967293] or \"Forever\", got 99999999999999999999"},
        {"{'Resilience': {'Bulkheads': {'b': {'MaxQueueLength': -99999999999999999999}}}}",
         "Resilience.Bulkheads.b.MaxQueueLength",
         "must be a whole number >= 0, got -99999999999999999999"},
        {"{'Resilience': {'Fallbacks': {'f': {'Code': 99999999999999999999}}}}",
         "Resilience.Fallbacks.f.Code",
         "must be a whole number in [-9007199254740991,9007199254740991], got "
         "99999999999999999999"},
        {"{'Resilience': {'CircuitBreakers': {'b': {'FailureRatio': 99999999999999999999}}}}",
         "Resilience.CircuitBreakers.b.FailureRatio",
         "must be in (0,1], got 99999999999999999999"},
        {"{'Resilience': {'Hedging': {'h': {'Endpoints': ['https://a.example'],"
         " 'Routing': 'Weighted', 'Weights': [99999999999999999999]}}}}",
         "Resilience.Hedging.h.Weights[0]",
         "must be a whole number in [1,64000], got 99999999999999999999"},
    };
    check_bad_docs(ROWS(rows));
}

/* Where no bound stops it, such a number is the real it is, as 1e20 is. */
static void an_integer_past_64_bits_is_a_real_where_reals_are_taken(void **state)
{
    (void)state;
    resil_config *c =
        cfg_load("{'Resilience': {'Retry': {'r': {'Factor': 99999999999999999999}}}}");
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "r", &r), 0);
    assert_true(r.policy.backoff.factor == 1e20);
    resil_config_free(c);
}

/* A list of the wrong length says how long it was, as Levels does, not
 * "must be an array ..., got an array". */
static void a_list_of_the_wrong_length_is_refused_with_its_length(void **state)
{
    (void)state;
    static const bad_doc rows[] = {
        {"{'Resilience': {'Retry': {'r': {'Delays': []}}}}", "Resilience.Retry.r.Delays",
         "must hold 1 to 32 durations, got 0"},
        {"{'Resilience': {'Retry': {'r': {'DisableFor': ['A', 'B', 'C', 'D', 'E', 'F', 'G',"
         " 'H', 'I']}}}}",
         "Resilience.Retry.r.DisableFor", "must hold 1 to 8 method names, got 9"},
        {"{'Resilience': {'Retry': {'r': {'RetryAfterHeaders': []}}}}",
         "Resilience.Retry.r.RetryAfterHeaders", "must hold 1 to 8 header names, got 0"},
        {"{'Resilience': {'Hedging': {'h': {'Endpoints': []}}}}", "Resilience.Hedging.h.Endpoints",
         "must hold 1 to 11 endpoint URLs or groups, got 0"},
        {"{'Resilience': {'Hedging': {'h': {'Endpoints': [{'Endpoints': []}]}}}}",
         "Resilience.Hedging.h.Endpoints[0].Endpoints",
         "must hold 1 to 32 endpoint URLs (a route holds at most 32), got 0"},
    };
    check_bad_docs(ROWS(rows));
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'r': {'Delays': {}}}}}"),
                        "must be an array of 1 to 32 durations, got an object");
}

/* ---- CircuitBreakers ---------------------------------------------------------- */

static resil_breaker_opts breaker_of(const char *body)
{
    char doc[1024];
    snprintf(doc, sizeof doc, "{'Resilience': {'CircuitBreakers': {'b': {%s}}}}", body);
    resil_config *c = cfg_load(doc);
    resil_breaker_opts o;
    assert_int_equal(resil_config_breaker_get(c, "b", &o), 0);
    assert_string_equal(o.name, "b");
    o.name = NULL; /* it lives in the config */
    resil_config_free(c);
    return o;
}

static void breaker_keys_absent_give_the_library_defaults(void **state)
{
    (void)state;
    resil_breaker_opts o = breaker_of(""), d;
    resil_breaker_opts_default(&d);
    assert_int_equal(o.kind, d.kind);
    assert_near(o.failure_ratio, d.failure_ratio, 0);
    assert_int_equal(o.minimum_throughput, d.minimum_throughput);
    assert_duration_equal(o.sampling_duration, d.sampling_duration);
    assert_duration_equal(o.break_duration, d.break_duration);
    assert_int_equal(o.failure_threshold, d.failure_threshold);
}

static void breaker_reads_every_key(void **state)
{
    (void)state;
    resil_breaker_opts o = breaker_of(
        "'Kind': 'Both', 'ConsecutiveFailureThreshold': 7, 'FailureRatio': 0.25,"
        " 'MinimumThroughput': 20, 'SamplingDuration': '10s', 'BreakDuration': '00:00:15',"
        " 'BreakGrowth': 2, 'MaxBreakDuration': '2m', 'HalfOpenProbes': 3,"
        " 'SuccessThresholdToClose': 2, 'ProbeTimeout': '20s', 'SlowCallDuration': '1s',"
        " 'SlowCallRatio': 0.5");
    assert_int_equal(o.kind, RESIL_BREAKER_BOTH);
    assert_int_equal(o.failure_threshold, 7);
    assert_near(o.failure_ratio, 0.25, 0);
    assert_int_equal(o.minimum_throughput, 20);
    assert_duration_equal(o.sampling_duration, RESIL_S(10));
    assert_duration_equal(o.break_duration, RESIL_S(15));
    assert_near(o.break_growth, 2, 0);
    assert_duration_equal(o.max_break_duration, RESIL_S(120));
    assert_int_equal(o.half_open_probes, 3);
    assert_int_equal(o.success_threshold, 2);
    assert_duration_equal(o.probe_timeout, RESIL_S(20));
    assert_duration_equal(o.slow_call_duration, RESIL_S(1));
    assert_near(o.slow_call_ratio, 0.5, 0);
    assert_int_equal(breaker_of("'SuccessThreshold': 4").success_threshold, 4);
}

static void breaker_kind_follows_the_keys_given(void **state)
{
    (void)state;
    assert_int_equal(breaker_of("'ConsecutiveFailureThreshold': 3").kind,
                     RESIL_BREAKER_CONSECUTIVE);
    assert_int_equal(breaker_of("'FailureRatio': 0.5").kind, RESIL_BREAKER_RATIO);
    assert_int_equal(breaker_of("'ConsecutiveFailureThreshold': 3, 'SamplingDuration': '5s'")
                         .kind,
                     RESIL_BREAKER_BOTH);
    assert_int_equal(breaker_of("'ConsecutiveFailureThreshold': 3, 'Kind': 'Ratio'").kind,
                     RESIL_BREAKER_RATIO);
}

static void breaker_count_window_keys(void **state)
{
    (void)state;
    resil_breaker_opts o = breaker_of("'SlidingWindowType': 'Count', 'SlidingWindowSize': 50");
    assert_int_equal(o.window, RESIL_BREAKER_WINDOW_COUNT);
    assert_int_equal(o.window_size, 50);
    o = breaker_of("'SlidingWindowSize': 1"); /* a size alone means a count window */
    assert_int_equal(o.window, RESIL_BREAKER_WINDOW_COUNT);
    assert_int_equal(o.window_size, 1);
    assert_int_equal(o.kind, RESIL_BREAKER_RATIO);
    o = breaker_of("'SlidingWindowSize': 10000");
    assert_int_equal(o.window_size, 10000);
    o = breaker_of("'SlidingWindowType': 'Count'");
    assert_int_equal(o.window_size, 100);
    assert_int_equal(breaker_of("'SlidingWindowType': 'Time'").window, RESIL_BREAKER_WINDOW_TIME);
    assert_int_equal(breaker_of("'ConsecutiveFailureThreshold': 3, 'SlidingWindowSize': 20").kind,
                     RESIL_BREAKER_BOTH);
}

static void breaker_rejects_each_invalid_value_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Kind': 'Sometimes'", "Kind", "must be Consecutive, Ratio or Both, got \"Sometimes\""},
        {"'ConsecutiveFailureThreshold': 0", "ConsecutiveFailureThreshold",
         "must be a whole number >= 1, got 0"},
        {"'ConsecutiveFailureThreshold': 4294967296", "ConsecutiveFailureThreshold",
         "must be a whole number in [1,4294967295], got 4294967296"},
        {"'FailureRatio': 0", "FailureRatio", "must be in (0,1], got 0"},
        {"'FailureRatio': 1.5", "FailureRatio", "must be in (0,1], got 1.5"},
        {"'MinimumThroughput': 1", "MinimumThroughput", "must be a whole number >= 2, got 1"},
        {"'SamplingDuration': '499ms'", "SamplingDuration", "must be >= 500ms, got \"499ms\""},
        {"'BreakDuration': '0s'", "BreakDuration", "must be > 0, got \"0s\""},
        {"'BreakGrowth': 0.5", "BreakGrowth", "must be >= 1, got 0.5"},
        {"'MaxBreakDuration': 60", "MaxBreakDuration",
         "must be a duration such as \"30s\" or \"00:00:30\", got 60"},
        {"'HalfOpenProbes': 0", "HalfOpenProbes", "must be a whole number in [1,65535], got 0"},
        {"'HalfOpenProbes': 65536", "HalfOpenProbes",
         "must be a whole number in [1,65535], got 65536"},
        {"'SuccessThresholdToClose': 0", "SuccessThresholdToClose",
         "must be a whole number >= 1, got 0"},
        {"'ProbeTimeout': '-1s'", "ProbeTimeout",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"-1s\": must not be "
         "negative"},
        {"'SlowCallDuration': 'slow'", "SlowCallDuration",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"slow\": missing number "
         "before unit"},
        {"'SlowCallRatio': 0", "SlowCallRatio", "must be in (0,1], got 0"},
        {"'SlidingWindowType': 'Calls'", "SlidingWindowType",
         "must be Time or Count, got \"Calls\""},
        {"'SlidingWindowSize': 0", "SlidingWindowSize",
         "must be a whole number in [1,10000], got 0"},
        {"'SlidingWindowSize': 10001", "SlidingWindowSize",
         "must be a whole number in [1,10000], got 10001"},
        {"'SlidingWindowType': 'Time', 'SlidingWindowSize': 5", "SlidingWindowSize",
         "SlidingWindowSize counts calls: it needs SlidingWindowType Count"},
        {"'BreakDuration': '5s', 'BreakGrowth': 2, 'MaxBreakDuration': '1s'", "MaxBreakDuration",
         "MaxBreakDuration (1s) must be >= BreakDuration (5s) when BreakGrowth > 1"},
        {"'BreakDuration': '10m', 'BreakGrowth': 2", "BreakGrowth",
         "MaxBreakDuration (5m) must be >= BreakDuration (10m) when BreakGrowth > 1"},
    };
    check_bad_values("{'Resilience': {'CircuitBreakers': {'b': {%s}}}}", "CircuitBreakers.b",
                     ROWS(rows));
}

/* ---- Bulkheads ------------------------------------------------------------------ */

static resil_bulkhead_opts bulkhead_of(const char *body)
{
    char doc[512];
    snprintf(doc, sizeof doc, "{'Resilience': {'Bulkheads': {'h': {%s}}}}", body);
    resil_config *c = cfg_load(doc);
    resil_bulkhead_opts o;
    assert_int_equal(resil_config_bulkhead_get(c, "h", &o), 0);
    resil_config_free(c);
    return o;
}

static void bulkhead_defaults_are_excaliburs(void **state)
{
    (void)state;
    resil_bulkhead_opts o = bulkhead_of("");
    assert_int_equal(o.max_concurrency, 10);
    assert_int_equal(o.max_queue, 50);
    assert_true(o.queue);
    assert_duration_equal(o.queue_timeout, 0);
}

static void bulkhead_reads_every_key(void **state)
{
    (void)state;
    resil_bulkhead_opts o = bulkhead_of("'MaxConcurrency': 4, 'MaxQueueLength': 0,"
                                        " 'AllowQueueing': false, 'QueueTimeout': '250ms'");
    assert_int_equal(o.max_concurrency, 4);
    assert_int_equal(o.max_queue, 0);
    assert_false(o.queue);
    assert_duration_equal(o.queue_timeout, RESIL_MS(250));
}

static void bulkhead_rejects_each_invalid_value_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'MaxConcurrency': 0", "MaxConcurrency", "must be a whole number >= 1, got 0"},
        {"'MaxConcurrency': 2147483648", "MaxConcurrency",
         "must be a whole number in [1,2147483647], got 2147483648"},
        {"'MaxQueueLength': -1", "MaxQueueLength", "must be a whole number >= 0, got -1"},
        {"'AllowQueueing': 'maybe'", "AllowQueueing", "must be true or false, got \"maybe\""},
        {"'QueueTimeout': '-5ms'", "QueueTimeout",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"-5ms\": must not be "
         "negative"},
    };
    check_bad_values("{'Resilience': {'Bulkheads': {'h': {%s}}}}", "Bulkheads.h", ROWS(rows));
}

/* ---- RateLimiters --------------------------------------------------------------- */

static resil_config_ratelimit limiter_of(const char *body)
{
    char doc[512];
    snprintf(doc, sizeof doc, "{'Resilience': {'RateLimiters': {'l': {%s}}}}", body);
    resil_config *c = cfg_load(doc);
    resil_config_ratelimit o;
    assert_int_equal(resil_config_ratelimit_get(c, "l", &o), 0);
    resil_config_free(c);
    return o;
}

static void rate_limiter_defaults_to_a_token_bucket(void **state)
{
    (void)state;
    resil_config_ratelimit l = limiter_of("");
    assert_int_equal(l.opts.kind, RESIL_RATELIMIT_TOKEN_BUCKET);
    assert_int_equal(l.opts.rate, 100);
    assert_duration_equal(l.opts.period, RESIL_S(1));
    assert_int_equal(l.opts.burst, 100);
    assert_duration_equal(l.max_wait, 0);
}

static void rate_limiter_reads_every_key(void **state)
{
    (void)state;
    resil_config_ratelimit l = limiter_of("'Kind': 'token-bucket', 'TokensPerPeriod': 3,"
                                          " 'ReplenishmentPeriod': '2s', 'TokenLimit': 9,"
                                          " 'MaxWait': '100ms'");
    assert_int_equal(l.opts.rate, 3);
    assert_duration_equal(l.opts.period, RESIL_S(2));
    assert_int_equal(l.opts.burst, 9);
    assert_duration_equal(l.max_wait, RESIL_MS(100));
    l = limiter_of("'Kind': 'FixedWindow', 'PermitLimit': 50, 'Window': '1m'");
    assert_int_equal(l.opts.kind, RESIL_RATELIMIT_FIXED_WINDOW);
    assert_int_equal(l.opts.permits, 50);
    assert_duration_equal(l.opts.window, RESIL_S(60));
    l = limiter_of("'Kind': 'sliding_window', 'PermitLimit': 1048576");
    assert_int_equal(l.opts.kind, RESIL_RATELIMIT_SLIDING_WINDOW);
    assert_int_equal(l.opts.permits, 1048576);
}

static void rate_limiter_rejects_each_invalid_value_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Kind': 'LeakyBucket'", "Kind",
         "must be TokenBucket, FixedWindow or SlidingWindow, got \"LeakyBucket\""},
        {"'TokensPerPeriod': 0", "TokensPerPeriod",
         "must be a whole number in [1,1000000000], got 0"},
        {"'TokensPerPeriod': 1000000001", "TokensPerPeriod",
         "must be a whole number in [1,1000000000], got 1000000001"},
        {"'ReplenishmentPeriod': '999us'", "ReplenishmentPeriod", "must be >= 1ms, got \"999us\""},
        {"'TokenLimit': 0", "TokenLimit", "must be a whole number in [1,1000000000], got 0"},
        {"'Kind': 'FixedWindow', 'PermitLimit': 0", "PermitLimit",
         "must be a whole number in [1,1000000000], got 0"},
        {"'Kind': 'FixedWindow', 'Window': '0s'", "Window", "must be >= 1ms, got \"0s\""},
        {"'MaxWait': 1", "MaxWait", "must be a duration such as \"30s\" or \"00:00:30\", got 1"},
        {"'PermitLimit': 10", "PermitLimit",
         "applies to FixedWindow and SlidingWindow, not to a TokenBucket limiter"},
        {"'Kind': 'SlidingWindow', 'TokenLimit': 10", "TokenLimit",
         "applies to a TokenBucket, not to a SlidingWindow limiter"},
        {"'Kind': 'SlidingWindow', 'PermitLimit': 1048577", "PermitLimit",
         "must be at most 1048576 for a SlidingWindow (it keeps one entry per permit), got "
         "1048577"},
        {"'TokenLimit': 1000000000, 'ReplenishmentPeriod': '5s'", "TokenLimit",
         "TokenLimit × ReplenishmentPeriod must be at most 4611686018427387903 permit-ns, got "
         "1000000000 × 5s"},
    };
    check_bad_values("{'Resilience': {'RateLimiters': {'l': {%s}}}}", "RateLimiters.l",
                     ROWS(rows));
}

/* ---- Keys one kind reads -------------------------------------------------------- */

/* A key only some kinds read, given with another, would be ignored: it is
 * refused where it is written, naming the kinds that read it. */
static void a_budget_key_of_another_model_is_refused_naming_its_model(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Model': 'Quota', 'MaxTokens': 5", "MaxTokens",
         "applies to the Tokens model, not to a Quota budget"},
        {"'Model': 'Ratio', 'TokenRatio': 0.5", "TokenRatio",
         "applies to the Tokens model, not to a Ratio budget"},
        {"'Capacity': 100", "Capacity", "applies to the Quota model, not to a Tokens budget"},
        {"'Model': 'Ratio', 'RetryCost': 1", "RetryCost",
         "applies to the Quota model, not to a Ratio budget"},
        {"'TimeoutCost': 1", "TimeoutCost", "applies to the Quota model, not to a Tokens budget"},
        {"'SuccessIncrement': 1", "SuccessIncrement",
         "applies to the Quota model, not to a Tokens budget"},
        {"'Model': 'Quota', 'Ttl': '5s'", "Ttl", "applies to the Ratio model, not to a Quota budget"},
        {"'Percent': 0.5", "Percent", "applies to the Ratio model, not to a Tokens budget"},
        {"'Model': 'Quota', 'MinRetriesPerSecond': 1", "MinRetriesPerSecond",
         "applies to the Ratio model, not to a Quota budget"},
    };
    check_bad_values("{'Resilience': {'RetryBudgets': {'b': {%s}}}}", "RetryBudgets.b",
                     ROWS(rows));
}

static void an_adaptive_key_of_another_algorithm_is_refused_naming_its_algorithm(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Algorithm': 'Vegas', 'BackoffRatio': 0.5", "BackoffRatio",
         "applies to an Aimd limiter, not to a Vegas limiter"},
        {"'LatencyThreshold': '100ms'", "LatencyThreshold",
         "applies to an Aimd limiter, not to a Gradient limiter"},
        {"'Algorithm': 'Aimd', 'Tolerance': 2", "Tolerance",
         "applies to a Gradient limiter, not to an Aimd limiter"},
    };
    check_bad_values("{'Resilience': {'AdaptiveLimiters': {'a': {%s}}}}", "AdaptiveLimiters.a",
                     ROWS(rows));
}

static void a_chaos_key_of_another_kind_is_refused_naming_its_kinds(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Kind': 'Fault', 'Latency': '1s'", "Latency",
         "applies to a Latency injection, not to a Fault injection"},
        {"'Kind': 'Latency', 'OutcomeKind': 'Timeout'", "OutcomeKind",
         "applies to Fault and Outcome, not to a Latency injection"},
        {"'Kind': 'Latency', 'Code': 503", "Code",
         "applies to Fault and Outcome, not to a Latency injection"},
        {"'Kind': 'Outcome', 'Latency': '1s'", "Latency",
         "applies to a Latency injection, not to an Outcome injection"},
    };
    check_bad_values("{'Resilience': {'Chaos': {'c': {%s}}}}", "Chaos.c", ROWS(rows));
}

static void keys_of_the_chosen_kind_are_taken(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {"
                               "'RetryBudgets': {'q': {'Model': 'Quota', 'Capacity': 100},"
                               " 'r': {'Model': 'Ratio', 'Percent': 0.5}, 't': {'MaxTokens': 5}},"
                               "'AdaptiveLimiters': {'a': {'Algorithm': 'Aimd', 'BackoffRatio': "
                               "0.5}, 'g': {'Tolerance': 2}},"
                               "'Chaos': {'l': {'Kind': 'Latency', 'Latency': '2s'},"
                               " 'f': {'Kind': 'Outcome', 'OutcomeKind': 'Timeout', 'Code': 504}}}}");
    assert_non_null(c);
    resil_config_free(c);
}

/* ---- Timeouts ------------------------------------------------------------------- */

static void timeouts_rejects_each_invalid_value_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'DefaultTimeout': '0s'", "DefaultTimeout", "must be > 0, got \"0s\""},
        {"'DefaultTimeout': 30", "DefaultTimeout",
         "must be a duration such as \"30s\" or \"00:00:30\", got 30"},
        {"'OperationTimeouts': {'q': '0s'}", "OperationTimeouts.q", "must be > 0, got \"0s\""},
        {"'OperationTimeouts': {'q': 10}", "OperationTimeouts.q",
         "must be a duration such as \"30s\" or \"00:00:30\", got 10"},
        {"'OperationTimeouts': ['q']", "OperationTimeouts", "must be an object, got an array"},
        {"'Default': '1s'", "Default", "unknown key (did you mean DefaultTimeout?)"},
    };
    check_bad_values("{'Resilience': {'Timeouts': {%s}}}", "Timeouts", ROWS(rows));
}

static void the_default_timeout_is_30s_unless_set(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {}}");
    assert_duration_equal(resil_config_timeout(c, NULL), RESIL_S(30));
    resil_config_free(c);
    c = cfg_load("{'Resilience': {'Timeouts': {'DefaultTimeout': '5s',"
                 " 'OperationTimeouts': {'Query': '1s'}}}}");
    assert_duration_equal(resil_config_timeout(c, "other"), RESIL_S(5));
    assert_duration_equal(resil_config_timeout(c, "query"), RESIL_S(1));
    assert_string_equal(resil_config_name_at(c, RESIL_CONFIG_OPERATION_TIMEOUTS, 0), "Query");
    resil_config_free(c);
}

/* ---- GracefulDegradation ---------------------------------------------------------- */

static void degradation_absent_gives_excaliburs_defaults(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {}}");
    resil_degrade_opts o;
    assert_false(resil_config_degrade_get(c, &o));
    assert_int_equal(o.level_count, 5);
    assert_string_equal(o.levels[4].name, "Emergency");
    assert_duration_equal(o.min_level_duration, RESIL_S(60));
    resil_config_free(c);
}

static void degradation_reads_every_key(void **state)
{
    (void)state;
    resil_config *c = cfg_load(
        "{'Resilience': {'GracefulDegradation': {'EnableAutoAdjustment': false,"
        " 'EvaluateOnCall': false, 'HealthCheckInterval': '10s', 'MinimumLevelDuration': '0s',"
        " 'ErrorRateWindow': '2m', 'ErrorRateWindowBuckets': 12, 'MinimumThroughput': 50,"
        " 'Levels': [{'Name': 'Brownout', 'PriorityThreshold': 20, 'ErrorRateThreshold': 5,"
        "   'CpuThreshold': 75, 'MemoryThreshold': 80},"
        "  {'Name': 'Blackout', 'PriorityThreshold': 90, 'ErrorRateThreshold': 40,"
        "   'CpuThreshold': 95, 'MemoryThreshold': 95}]}}}");
    resil_degrade_opts o;
    assert_true(resil_config_degrade_get(c, &o));
    assert_false(o.auto_adjust);
    assert_false(o.evaluate_on_call);
    assert_duration_equal(o.check_interval, RESIL_S(10));
    assert_duration_equal(o.min_level_duration, 0);
    assert_duration_equal(o.error_window, RESIL_S(120));
    assert_int_equal(o.error_buckets, 12);
    assert_int_equal(o.min_throughput, 50);
    assert_int_equal(o.level_count, 2);
    assert_string_equal(o.levels[0].name, "Brownout");
    assert_int_equal(o.levels[0].priority_threshold, 20);
    assert_near(o.levels[0].error_rate, 5, 0);
    assert_near(o.levels[0].cpu, 75, 0);
    assert_near(o.levels[0].memory, 80, 0);
    assert_string_equal(o.levels[1].name, "Blackout");
    assert_int_equal(o.levels[1].priority_threshold, 90);
    resil_config_free(c);
}

#define LEVEL(name, p, e, cpu, mem)                                                         \
    "{'Name': '" name "', 'PriorityThreshold': " #p ", 'ErrorRateThreshold': " #e            \
    ", 'CpuThreshold': " #cpu ", 'MemoryThreshold': " #mem "}"

static void degradation_rejects_each_invalid_value_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'EnableAutoAdjustment': 0", "EnableAutoAdjustment", "must be true or false, got 0"},
        {"'HealthCheckInterval': '0s'", "HealthCheckInterval", "must be > 0, got \"0s\""},
        {"'MinimumLevelDuration': '-1s'", "MinimumLevelDuration",
         "must be a duration such as \"30s\" or \"00:00:30\", got \"-1s\": must not be "
         "negative"},
        {"'ErrorRateWindow': '0s'", "ErrorRateWindow", "must be > 0, got \"0s\""},
        {"'ErrorRateWindowBuckets': 0", "ErrorRateWindowBuckets",
         "must be a whole number in [1,1000], got 0"},
        {"'ErrorRateWindowBuckets': 1001", "ErrorRateWindowBuckets",
         "must be a whole number in [1,1000], got 1001"},
        {"'MinimumThroughput': 0", "MinimumThroughput", "must be a whole number >= 1, got 0"},
        {"'ErrorRateWindow': '5ms', 'ErrorRateWindowBuckets': 6", "ErrorRateWindowBuckets",
         "ErrorRateWindow / ErrorRateWindowBuckets must be at least 1ms"},
        {"'Levels': {}", "Levels",
         "must be an array of 1 to 8 levels, mildest first, got an object"},
        {"'Levels': []", "Levels", "must hold 1 to 8 levels, got 0"},
        {"'Levels': [" LEVEL("A", 1, 1, 1, 1) "," LEVEL("B", 2, 2, 2, 2) "," LEVEL("C", 3, 3, 3,
                                                                                  3) ","
             LEVEL("D", 4, 4, 4, 4) "," LEVEL("E", 5, 5, 5, 5) "," LEVEL("F", 6, 6, 6, 6) ","
             LEVEL("G", 7, 7, 7, 7) "," LEVEL("H", 8, 8, 8, 8) "," LEVEL("I", 9, 9, 9, 9) "]",
         "Levels", "must hold 1 to 8 levels, got 9"},
        {"'Levels': [{'Name': 'A', 'PriorityThreshold': 1, 'ErrorRateThreshold': 1,"
         " 'CpuThreshold': 1}]",
         "Levels[0]", "a level needs MemoryThreshold"},
        {"'Levels': [" LEVEL("A", 1, 101, 1, 1) "]", "Levels[0].ErrorRateThreshold",
         "must be a percentage in [0,100], got 101"},
        {"'Levels': [" LEVEL("A", 1, 1, -1, 1) "]", "Levels[0].CpuThreshold",
         "must be a percentage in [0,100], got -1"},
        {"'Levels': [" LEVEL("A", 1, 1, 1, 100.5) "]", "Levels[0].MemoryThreshold",
         "must be a percentage in [0,100], got 100.5"},
        {"'Levels': [" LEVEL("A", 1.5, 1, 1, 1) "]", "Levels[0].PriorityThreshold",
         "must be a whole number >= -2147483648, got 1.5"},
        {"'Levels': [" LEVEL("", 1, 1, 1, 1) "]", "Levels[0].Name",
         "must be a string of 1 to 31 bytes, got \"\""},
        {"'Levels': [" LEVEL("A", 10, 1, 1, 1) "," LEVEL("B", 10, 2, 2, 2) "]",
         "Levels[1].PriorityThreshold",
         "must be greater than Levels[0].PriorityThreshold (10), got 10"},
        {"'Levels': [" LEVEL("A", 10, 5, 1, 1) "," LEVEL("B", 20, 4, 2, 2) "]",
         "Levels[1].ErrorRateThreshold", "must not be below Levels[0].ErrorRateThreshold (5), "
                                         "got 4"},
        {"'Levels': [" LEVEL("A", 10, 1, 60, 1) "," LEVEL("B", 20, 2, 50, 2) "]",
         "Levels[1].CpuThreshold", "must not be below Levels[0].CpuThreshold (60), got 50"},
        {"'Levels': [" LEVEL("A", 10, 1, 1, 70) "," LEVEL("B", 20, 2, 2, 69) "]",
         "Levels[1].MemoryThreshold", "must not be below Levels[0].MemoryThreshold (70), got 69"},
        {"'Levels': [{'Name': 'A', 'PriorityThreshold': 1, 'ErrorRateThreshold': 1,"
         " 'CpuThreshold': 1, 'MemoryThreshold': 1, 'Cpu': 2}]",
         "Levels[0].Cpu", "unknown key (did you mean CpuThreshold?)"},
    };
    check_bad_values("{'Resilience': {'GracefulDegradation': {%s}}}", "GracefulDegradation",
                     ROWS(rows));
}

/* ---- DistributedCircuitBreaker ------------------------------------------------------ */

static void distributed_breaker_defaults_are_excaliburs(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'DistributedCircuitBreaker': {}}}");
    resil_config_distributed x;
    assert_true(resil_config_distributed_get(c, &x));
    assert_false(x.enabled);
    assert_duration_equal(x.sync_interval, RESIL_S(5));
    assert_int_equal(x.breaker.kind, RESIL_BREAKER_BOTH);
    assert_near(x.breaker.failure_ratio, 0.5, 0);
    assert_int_equal(x.breaker.minimum_throughput, 10);
    assert_duration_equal(x.breaker.sampling_duration, RESIL_S(30));
    assert_duration_equal(x.breaker.break_duration, RESIL_S(30));
    assert_int_equal(x.breaker.failure_threshold, 5);
    assert_int_equal(x.breaker.success_threshold, 3);
    resil_config_free(c);
    c = cfg_load("{'Resilience': {}}");
    assert_false(resil_config_distributed_get(c, &x));
    resil_config_free(c);
}

static void distributed_breaker_keeps_both_rules_unless_told(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'DistributedCircuitBreaker': {"
                               "'Enabled': true, 'ConsecutiveFailureThreshold': 9}}}");
    resil_config_distributed x;
    resil_config_distributed_get(c, &x);
    assert_true(x.enabled);
    assert_int_equal(x.breaker.kind, RESIL_BREAKER_BOTH);
    assert_int_equal(x.breaker.failure_threshold, 9);
    resil_config_free(c);
    c = cfg_load("{'Resilience': {'DistributedCircuitBreaker': {'Kind': 'Consecutive'}}}");
    resil_config_distributed_get(c, &x);
    assert_int_equal(x.breaker.kind, RESIL_BREAKER_CONSECUTIVE);
    resil_config_free(c);
}

static void distributed_breaker_rejects_invalid_values_by_key(void **state)
{
    (void)state;
    static const bad_value rows[] = {
        {"'Enabled': 'on'", "Enabled", "must be true or false, got \"on\""},
        {"'SyncInterval': '0s'", "SyncInterval", "must be > 0, got \"0s\""},
        {"'FailureRatio': 2", "FailureRatio", "must be in (0,1], got 2"},
        {"'Sync': '1s'", "Sync", "unknown key (did you mean SyncInterval?)"},
        {"'SlidingWindowSize': 20", "SlidingWindowSize",
         "the fleet breaker counts over SamplingDuration: a count window is for "
         "CircuitBreakers"},
        {"'OperationTimeout': '1s'", "OperationTimeout",
         "OperationTimeout bounds the calls of a CircuitBreakers entry; the fleet breaker's "
         "calls are bounded where it is used"},
        {"'Enabled': false, 'SyncInterval': false", "SyncInterval",
         "must be a duration such as \"30s\" or \"00:00:30\", got false"},
    };
    check_bad_values("{'Resilience': {'DistributedCircuitBreaker': {%s}}}",
                     "DistributedCircuitBreaker", ROWS(rows));
}

/* ---- names ------------------------------------------------------------------------------ */

static void the_unnamed_default_is_the_defaults_not_a_name(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'default': {'MaxRetryAttempts': 9}},"
                               " 'CircuitBreakers': {'x': {'FailureRatio': 0.9}}}}");
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, NULL, &r), 0);
    assert_int_equal(r.policy.max_attempts, 3);
    assert_int_equal(resil_config_retry_get(c, "", &r), 0);
    assert_int_equal(r.policy.max_attempts, 3);
    resil_breaker_opts b;
    assert_int_equal(resil_config_breaker_get(c, NULL, &b), 0);
    assert_near(b.failure_ratio, 0.1, 0);
    resil_config_free(c);
}

static void an_unknown_name_is_not_found_and_gives_the_defaults(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'a': {'MaxRetryAttempts': 9}},"
                               " 'Bulkheads': {'a': {'MaxConcurrency': 1}},"
                               " 'RateLimiters': {'a': {'TokenLimit': 1}}}}");
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "b", &r), RESIL_ENOTFOUND);
    assert_int_equal(r.policy.max_attempts, 3);
    resil_bulkhead_opts h;
    assert_int_equal(resil_config_bulkhead_get(c, "b", &h), RESIL_ENOTFOUND);
    assert_int_equal(h.max_concurrency, 10);
    resil_config_ratelimit l;
    assert_int_equal(resil_config_ratelimit_get(c, "b", &l), RESIL_ENOTFOUND);
    assert_int_equal(l.opts.burst, 100);
    resil_breaker_opts o;
    assert_int_equal(resil_config_breaker_get(c, "a", &o), RESIL_ENOTFOUND);
    assert_int_equal(resil_config_retry_get(NULL, "a", &r), RESIL_EINVAL);
    resil_config_free(c);
}

/* Excalibur's named breaker: FailureThreshold is the calls seen before the
 * ratio is judged. */
static void failure_threshold_is_excaliburs_minimum_throughput(void **state)
{
    (void)state;
    resil_breaker_opts o = breaker_of("'FailureThreshold': 5, 'FailureRatio': 0.5");
    assert_int_equal(o.kind, RESIL_BREAKER_RATIO);
    assert_int_equal(o.minimum_throughput, 5);
    assert_near(o.failure_ratio, 0.5, 0);
    static const bad_value rows[] = {
        {"'FailureThreshold': 1", "MinimumThroughput", "must be a whole number >= 2, got 1"},
    };
    check_bad_values("{'Resilience': {'CircuitBreakers': {'b': {%s}}}}", "CircuitBreakers.b",
                     ROWS(rows));
}

static void operation_timeout_bounds_each_call_through_the_breaker(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'CircuitBreakers': {'b': {"
                               "'FailureThreshold': 5, 'OperationTimeout': '00:00:05'}},"
                               " 'Retry': {'r': {}},"
                               " 'Pipelines': {'p': ['Retry:r', 'CircuitBreaker:b']}}}");
    assert_duration_equal(resil_config_breaker_operation_timeout(c, "B"), RESIL_S(5));
    assert_duration_equal(resil_config_breaker_operation_timeout(c, "none"), 0);
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "p", &p), 0);
    assert_int_equal(p.nsteps, 3);
    assert_int_equal(p.steps[1].kind, RESIL_CONFIG_STEP_BREAKER);
    assert_int_equal(p.steps[2].kind, RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT);
    assert_duration_equal(p.steps[2].timeout, RESIL_S(5));
    resil_config_free(c);
    assert_string_equal(
        cfg_first_message("{'Resilience': {'CircuitBreakers': {'b': {'OperationTimeout': '5s'}},"
                          " 'Pipelines': {'p': ['CircuitBreaker:b', 'AttemptTimeout:2s']}}}"),
        "CircuitBreaker:b bounds each call with its OperationTimeout: an AttemptTimeout too "
        "would be a second bound; keep one");
}

/* Eight strategies, the most a pipeline holds, one of them a breaker with
 * an OperationTimeout: `extra` is the eighth. */
static const char *full_with_breaker(const char *breaker, const char *extra)
{
    static char doc[1024];
    snprintf(doc, sizeof doc,
             "{'Resilience': {'CircuitBreakers': {'b': {%s}}, 'Retry': {'r': {}},"
             " 'Bulkheads': {'h': {}}, 'RateLimiters': {'l': {}}, 'Fallbacks': {'f': {}},"
             " 'Throttles': {'t': {}},"
             " 'Pipelines': {'p': ['RateLimiter:l', 'Bulkhead:h', 'GracefulDegradation',"
             " 'TotalTimeout:10s', 'Fallback:f', 'Retry:r', 'CircuitBreaker:b'%s]}}}",
             breaker, extra);
    return doc;
}

static void an_operation_timeout_with_no_room_in_the_pipeline_is_refused_by_name(void **state)
{
    (void)state;
    const char *doc = full_with_breaker("'OperationTimeout': '5s'", ", 'Throttle:t'");
    assert_string_equal(cfg_first_path(doc), "Resilience.Pipelines.p[6]");
    assert_string_equal(cfg_first_message(doc),
                        "CircuitBreaker:b's OperationTimeout adds an AttemptTimeout, and the "
                        "pipeline has no room for it (at most 8 strategies)");
}

static void an_operation_timeout_fills_the_last_room_in_the_pipeline(void **state)
{
    (void)state;
    resil_config *c = cfg_load(full_with_breaker("'OperationTimeout': '5s'", ""));
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "p", &p), 0);
    assert_int_equal(p.nsteps, RESIL_CONFIG_MAX_STEPS);
    assert_int_equal(p.steps[7].kind, RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT);
    assert_duration_equal(p.steps[7].timeout, RESIL_S(5));
    resil_config_free(c);
    /* without an OperationTimeout the eighth strategy is the pipeline's own */
    c = cfg_load(full_with_breaker("", ", 'Throttle:t'"));
    assert_int_equal(resil_config_pipeline_get(c, "p", &p), 0);
    assert_int_equal(p.nsteps, RESIL_CONFIG_MAX_STEPS);
    resil_config_free(c);
}

static void hedging_takes_microsofts_defaults_and_routes_endpoints(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Hedging': {'plain': {},"
                               " 'regions': {'MaxHedgedAttempts': 2, 'Delay': '500ms',"
                               " 'Endpoints': ['https://eu.example.com', 'https://us.example.com'],"
                               " 'Routing': 'Weighted', 'Weights': [3, 1],"
                               " 'SelectionMode': 'EveryAttempt'}}}}");
    resil_config_hedge h;
    assert_int_equal(resil_config_hedge_get(c, "plain", &h), 0);
    assert_int_equal(h.opts.max_hedged, 1);
    assert_duration_equal(h.opts.delay, RESIL_S(2));
    assert_null(h.route);
    assert_int_equal(resil_config_hedge_get(c, "regions", &h), 0);
    assert_int_equal(h.opts.max_hedged, 2);
    assert_duration_equal(h.opts.delay, RESIL_MS(500));
    assert_non_null(h.route);
    assert_int_equal(h.route->kind, RESIL_ROUTE_WEIGHTED);
    assert_int_equal(h.route->selection, RESIL_ROUTE_EVERY_ATTEMPT);
    assert_int_equal(h.route->ngroups, 2);
    assert_string_equal(h.route->groups[1].endpoints[0].url, "https://us.example.com");
    assert_int_equal(h.route->groups[0].weight, 3);
    assert_int_equal(resil_route_opts_validate(h.route, NULL), 0);
    resil_config_free(c);
    static const bad_value rows[] = {
        {"'MaxHedgedAttempts': 11", "MaxHedgedAttempts", "must be a whole number in [1,10], got 11"},
        {"'Endpoints': ['eu.example.com']", "Endpoints[0]",
         "must be an endpoint URL such as \"https://eu.example.com\", got \"eu.example.com\""},
        {"'Endpoints': ['https://a'], 'Weights': [1]", "Weights", "Weights need Routing Weighted"},
        {"'Endpoints': ['https://a'], 'SelectionMode': 'EveryAttempt'", "SelectionMode",
         "SelectionMode needs Routing Weighted"},
        {"'Endpoints': ['https://a', 'https://b'], 'Routing': 'Weighted', 'Weights': [1]",
         "Weights", "must give one weight per group: 1 for 2"},
        {"'Routing': 'Ordered'", "Routing", "Routing routes Endpoints: it needs them"},
        {"'Endpoints': [{'Weights': [1]}]", "Endpoints[0]", "a group needs Endpoints"},
        {"'Endpoints': [{'Endpoints': ['https://a', 'https://b'], 'Weights': [1]}]",
         "Endpoints[0].Weights", "must give one weight per endpoint: 1 for 2"},
        {"'Endpoints': [{'Endpoints': ['https://a', 'b']}]", "Endpoints[0].Endpoints[1]",
         "must be an endpoint URL such as \"https://eu.example.com\", got \"b\""},
        {"'Endpoints': [{'Endpoints': ['https://a'], 'Weights': [0]}]",
         "Endpoints[0].Weights[0]", "must be a whole number in [1,64000], got 0"},
    };
    check_bad_values("{'Resilience': {'Hedging': {'h': {%s}}}}", "Hedging.h", ROWS(rows));
}

/* Microsoft's weighted groups: each group is drawn by its weight, and the
 * endpoint within it by the endpoints' weights. */
static void hedging_groups_hold_several_weighted_endpoints(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Hedging': {'regions': {"
                               " 'Endpoints': [{'Endpoints': ['https://eu-1.example.com',"
                               " 'https://eu-2.example.com'], 'Weights': [9, 1]},"
                               " 'https://us.example.com',"
                               " {'Endpoints': ['https://ap-1.example.com',"
                               " 'https://ap-2.example.com']}],"
                               " 'Routing': 'Weighted', 'Weights': [70, 20, 10]}}}}");
    resil_config_hedge h;
    assert_int_equal(resil_config_hedge_get(c, "regions", &h), 0);
    const resil_route_opts *r = h.route;
    assert_non_null(r);
    assert_int_equal(r->kind, RESIL_ROUTE_WEIGHTED);
    assert_int_equal(r->selection, RESIL_ROUTE_INITIAL_ATTEMPT);
    assert_int_equal(r->ngroups, 3);
    assert_int_equal(r->groups[0].weight, 70);
    assert_int_equal(r->groups[0].len, 2);
    assert_string_equal(r->groups[0].endpoints[0].url, "https://eu-1.example.com");
    assert_int_equal(r->groups[0].endpoints[0].weight, 9);
    assert_string_equal(r->groups[0].endpoints[1].url, "https://eu-2.example.com");
    assert_int_equal(r->groups[0].endpoints[1].weight, 1);
    assert_int_equal(r->groups[1].weight, 20);
    assert_int_equal(r->groups[1].len, 1);
    assert_string_equal(r->groups[1].endpoints[0].url, "https://us.example.com");
    assert_int_equal(r->groups[1].endpoints[0].weight, 0);
    assert_int_equal(r->groups[2].weight, 10);
    assert_int_equal(r->groups[2].len, 2);
    assert_string_equal(r->groups[2].endpoints[1].url, "https://ap-2.example.com");
    assert_int_equal(r->groups[2].endpoints[1].weight, 0);
    assert_int_equal(resil_route_opts_validate(r, NULL), 0);
    resil_config_free(c);
}

/* 32 endpoints at most over all of a route's groups: the 33rd is named. */
static void hedging_route_holds_at_most_32_endpoints(void **state)
{
    (void)state;
    char doc[4096];
    int n = snprintf(doc, sizeof doc, "{'Resilience': {'Hedging': {'h': {'Endpoints': [");
    for (int g = 0; g < 3; g++) {
        n += snprintf(doc + n, sizeof doc - (size_t)n, "%s{'Endpoints': [", g ? ", " : "");
        for (int e = 0; e < (g < 2 ? 16 : 1); e++)
            n += snprintf(doc + n, sizeof doc - (size_t)n, "%s'https://h%d-%d'", e ? ", " : "",
                          g, e);
        n += snprintf(doc + n, sizeof doc - (size_t)n, "]}");
    }
    snprintf(doc + n, sizeof doc - (size_t)n, "]}}}}");
    assert_string_equal(cfg_first_message(doc), "one endpoint too many: a route holds at most 32");
    assert_string_equal(cfg_first_path(doc), "Resilience.Hedging.h.Endpoints[2]");
}

static void a_fallback_is_a_static_answer(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Fallbacks': {'stale': {'Kind': 'Success',"
                               " 'Code': 200, 'Detail': 'stale but served'},"
                               " 'busy': {'Kind': 'Throttled', 'Code': 429}}}}");
    resil_outcome o;
    assert_int_equal(resil_config_fallback_get(c, "stale", &o), 0);
    assert_int_equal(o.kind, RESIL_SUCCESS);
    assert_int_equal(o.code, 200);
    assert_string_equal(o.detail, "stale but served");
    assert_int_equal(resil_config_fallback_get(c, "busy", &o), 0);
    assert_int_equal(o.kind, RESIL_THROTTLED);
    assert_int_equal(o.code, 429);
    assert_int_equal(resil_config_fallback_get(c, "none", &o), RESIL_ENOTFOUND);
    assert_int_equal(o.kind, RESIL_SUCCESS);
    resil_config_free(c);
}

static void retry_budgets_take_each_models_keys(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'RetryBudgets': {"
                               "'grpc': {'MaxTokens': 20, 'TokenRatio': 0.5},"
                               " 'aws': {'Model': 'Quota', 'Capacity': 100, 'RetryCost': 7},"
                               " 'finagle': {'Model': 'Ratio', 'Percent': 0.1, 'Ttl': '5s'}},"
                               " 'Retry': {'r': {'Budget': 'AWS'}}}}");
    resil_budget_opts b;
    assert_int_equal(resil_config_budget_get(c, "grpc", &b), 0);
    assert_int_equal(b.model, RESIL_BUDGET_TOKENS);
    assert_near(b.max_tokens, 20, 0);
    assert_near(b.token_ratio, 0.5, 0);
    assert_int_equal(resil_config_budget_get(c, "aws", &b), 0);
    assert_int_equal(b.model, RESIL_BUDGET_QUOTA);
    assert_int_equal(b.capacity, 100);
    assert_int_equal(b.retry_cost, 7);
    assert_int_equal(resil_config_budget_get(c, "finagle", &b), 0);
    assert_int_equal(b.model, RESIL_BUDGET_RATIO);
    assert_duration_equal(b.ttl, RESIL_S(5));
    resil_config_retry r;
    resil_config_retry_get(c, "r", &r);
    assert_string_equal(r.budget, "AWS");
    assert_null(r.policy.budget);
    resil_config_free(c);
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'r': {'Budget': 'nope'}}}}"),
                        "no RetryBudgets entry named \"nope\"");
}

/* ---- Fallbacks.NAME.Detail and Retry.NAME.Budget ------------------------------------- */

static void a_fallback_detail_that_is_not_a_text_is_refused_by_key(void **state)
{
    (void)state;
    const char *doc = "{'Resilience': {'Fallbacks': {'f': {'Detail': 5}}}}";
    assert_string_equal(cfg_first_path(doc), "Resilience.Fallbacks.f.Detail");
    assert_string_equal(cfg_first_message(doc), "must be a text of at most 63 bytes, got 5");
}

static void a_fallback_detail_of_64_bytes_is_refused_by_key(void **state)
{
    (void)state;
    char doc[256];
    snprintf(doc, sizeof doc, "{'Resilience': {'Fallbacks': {'f': {'Detail': '%064d'}}}}", 0);
    assert_string_equal(cfg_first_path(doc), "Resilience.Fallbacks.f.Detail");
    assert_string_equal(cfg_first_message(doc),
                        "must be a text of at most 63 bytes, got "
                        "\"000000000000000000000000000000000000000000000000...\"");
}

static void a_fallback_detail_of_63_bytes_is_kept_whole(void **state)
{
    (void)state;
    char doc[256], want[64];
    snprintf(want, sizeof want, "%063d", 0);
    snprintf(doc, sizeof doc, "{'Resilience': {'Fallbacks': {'f': {'Detail': '%s'}}}}", want);
    resil_config *c = cfg_load(doc);
    resil_outcome o;
    assert_int_equal(resil_config_fallback_get(c, "f", &o), 0);
    assert_string_equal(o.detail, want);
    resil_config_free(c);
}

static void a_retry_budget_that_is_not_a_text_is_refused_by_key(void **state)
{
    (void)state;
    const char *doc = "{'Resilience': {'Retry': {'r': {'Budget': 7}}}}";
    assert_string_equal(cfg_first_path(doc), "Resilience.Retry.r.Budget");
    assert_string_equal(cfg_first_message(doc),
                        "must be the name of a RetryBudgets entry (1 to 63 bytes), got 7");
}

static void an_empty_retry_budget_is_refused_by_key(void **state)
{
    (void)state;
    const char *doc = "{'Resilience': {'Retry': {'r': {'Budget': ''}}}}";
    assert_string_equal(cfg_first_path(doc), "Resilience.Retry.r.Budget");
    assert_string_equal(cfg_first_message(doc),
                        "must be the name of a RetryBudgets entry (1 to 63 bytes), got \"\"");
}

static void a_retry_budget_name_of_64_bytes_is_refused_by_key(void **state)
{
    (void)state;
    char doc[256];
    snprintf(doc, sizeof doc, "{'Resilience': {'Retry': {'r': {'Budget': 'b%063d'}}}}", 0);
    assert_string_equal(cfg_first_path(doc), "Resilience.Retry.r.Budget");
    assert_string_equal(cfg_first_message(doc),
                        "must be the name of a RetryBudgets entry (1 to 63 bytes), got "
                        "\"b00000000000000000000000000000000000000000000000...\"");
}

static void a_retry_budget_name_of_63_bytes_names_its_entry(void **state)
{
    (void)state;
    char doc[512], name[64];
    snprintf(name, sizeof name, "b%062d", 0);
    snprintf(doc, sizeof doc,
             "{'Resilience': {'RetryBudgets': {'%s': {}}, 'Retry': {'r': {'Budget': '%s'}}}}",
             name, name);
    resil_config *c = cfg_load(doc);
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "r", &r), 0);
    assert_string_equal(r.budget, name);
    resil_config_free(c);
}

static void two_names_keep_their_own_settings(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {"
                               "'reads': {'MaxRetryAttempts': 5, 'BaseDelay': '100ms'},"
                               " 'writes': {'MaxRetryAttempts': 0}}}}");
    resil_config_retry a, b;
    resil_config_retry_get(c, "reads", &a);
    resil_config_retry_get(c, "WRITES", &b);
    assert_int_equal(a.policy.max_attempts, 6);
    assert_duration_equal(a.policy.backoff.base, RESIL_MS(100));
    assert_int_equal(b.policy.max_attempts, 1);
    assert_duration_equal(b.policy.backoff.base, RESIL_S(2));
    assert_int_equal(resil_config_count(c, RESIL_CONFIG_RETRY), 2);
    assert_string_equal(resil_config_name_at(c, RESIL_CONFIG_RETRY, 1), "writes");
    assert_null(resil_config_name_at(c, RESIL_CONFIG_RETRY, 2));
    assert_string_equal(resil_config_section_name(RESIL_CONFIG_BREAKERS), "CircuitBreakers");
    resil_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(retry_keys_absent_give_pollys_defaults),
        cmocka_unit_test(retry_reads_every_key),
        cmocka_unit_test(max_retry_attempts_counts_retries_after_the_first),
        cmocka_unit_test(backoff_strategies_name_kind_and_jitter),
        cmocka_unit_test(use_jitter_means_pollys_jitter_or_none),
        cmocka_unit_test(retry_after_keys_and_nulls),
        cmocka_unit_test(retry_rejects_each_invalid_value_by_key),
        cmocka_unit_test(retry_refuses_keys_that_contradict_each_other),
        cmocka_unit_test(delays_list_the_waits_and_count_the_retries),
        cmocka_unit_test(delays_keep_an_explicit_retry_count),
        cmocka_unit_test(delays_refuse_bad_waits_and_formula_keys),
        cmocka_unit_test(disable_for_and_hint_headers_are_kept_for_http),
        cmocka_unit_test(disable_for_and_hint_headers_take_names),
        cmocka_unit_test(disable_for_methods_past_127_bytes_in_all_are_refused_by_key),
        cmocka_unit_test(disable_for_methods_of_127_bytes_in_all_are_kept_whole),
        cmocka_unit_test(a_whole_number_past_its_largest_value_is_refused_with_its_range),
        cmocka_unit_test(a_whole_number_one_past_2_to_the_53_is_refused),
        cmocka_unit_test(an_integer_past_64_bits_is_refused_by_key),
        cmocka_unit_test(an_integer_past_64_bits_is_a_real_where_reals_are_taken),
        cmocka_unit_test(a_list_of_the_wrong_length_is_refused_with_its_length),
        cmocka_unit_test(failure_threshold_is_excaliburs_minimum_throughput),
        cmocka_unit_test(hedging_takes_microsofts_defaults_and_routes_endpoints),
        cmocka_unit_test(hedging_groups_hold_several_weighted_endpoints),
        cmocka_unit_test(hedging_route_holds_at_most_32_endpoints),
        cmocka_unit_test(a_fallback_is_a_static_answer),
        cmocka_unit_test(retry_budgets_take_each_models_keys),
        cmocka_unit_test(a_fallback_detail_that_is_not_a_text_is_refused_by_key),
        cmocka_unit_test(a_fallback_detail_of_64_bytes_is_refused_by_key),
        cmocka_unit_test(a_fallback_detail_of_63_bytes_is_kept_whole),
        cmocka_unit_test(a_retry_budget_that_is_not_a_text_is_refused_by_key),
        cmocka_unit_test(an_empty_retry_budget_is_refused_by_key),
        cmocka_unit_test(a_retry_budget_name_of_64_bytes_is_refused_by_key),
        cmocka_unit_test(a_retry_budget_name_of_63_bytes_names_its_entry),
        cmocka_unit_test(operation_timeout_bounds_each_call_through_the_breaker),
        cmocka_unit_test(an_operation_timeout_with_no_room_in_the_pipeline_is_refused_by_name),
        cmocka_unit_test(an_operation_timeout_fills_the_last_room_in_the_pipeline),
        cmocka_unit_test(breaker_keys_absent_give_the_library_defaults),
        cmocka_unit_test(breaker_reads_every_key),
        cmocka_unit_test(breaker_kind_follows_the_keys_given),
        cmocka_unit_test(breaker_count_window_keys),
        cmocka_unit_test(breaker_rejects_each_invalid_value_by_key),
        cmocka_unit_test(bulkhead_defaults_are_excaliburs),
        cmocka_unit_test(bulkhead_reads_every_key),
        cmocka_unit_test(bulkhead_rejects_each_invalid_value_by_key),
        cmocka_unit_test(rate_limiter_defaults_to_a_token_bucket),
        cmocka_unit_test(rate_limiter_reads_every_key),
        cmocka_unit_test(rate_limiter_rejects_each_invalid_value_by_key),
        cmocka_unit_test(a_budget_key_of_another_model_is_refused_naming_its_model),
        cmocka_unit_test(an_adaptive_key_of_another_algorithm_is_refused_naming_its_algorithm),
        cmocka_unit_test(a_chaos_key_of_another_kind_is_refused_naming_its_kinds),
        cmocka_unit_test(keys_of_the_chosen_kind_are_taken),
        cmocka_unit_test(timeouts_rejects_each_invalid_value_by_key),
        cmocka_unit_test(the_default_timeout_is_30s_unless_set),
        cmocka_unit_test(degradation_absent_gives_excaliburs_defaults),
        cmocka_unit_test(degradation_reads_every_key),
        cmocka_unit_test(degradation_rejects_each_invalid_value_by_key),
        cmocka_unit_test(distributed_breaker_defaults_are_excaliburs),
        cmocka_unit_test(distributed_breaker_keeps_both_rules_unless_told),
        cmocka_unit_test(distributed_breaker_rejects_invalid_values_by_key),
        cmocka_unit_test(the_unnamed_default_is_the_defaults_not_a_name),
        cmocka_unit_test(an_unknown_name_is_not_found_and_gives_the_defaults),
        cmocka_unit_test(two_names_keep_their_own_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
