/*
 * test_pipelines.c — Pipelines: ordered lists of named strategies. What a
 * reference may say, what it must name, the order rules the pipeline
 * builder enforces (checked here with positions), and nesting.
 */
#include "cfgtest.h"

#define NAMED                                                                              \
    "'Retry': {'orders': {}}, 'CircuitBreakers': {'orders': {}},"                          \
    " 'Bulkheads': {'db': {}}, 'RateLimiters': {'api': {}},"                               \
    " 'Timeouts': {'OperationTimeouts': {'query': '3s'}}"

static const char *with_pipeline(const char *steps)
{
    static char doc[2048];
    snprintf(doc, sizeof doc, "{'Resilience': {" NAMED ", 'Pipelines': {'p': [%s]}}}", steps);
    return doc;
}

static void steps_are_read_in_order_with_their_references(void **state)
{
    (void)state;
    resil_config *c = cfg_load(with_pipeline(
        "'RateLimiter:api', 'Bulkhead:db', 'GracefulDegradation', 'TotalTimeout:10s',"
        " 'Retry:orders', 'CircuitBreaker:orders', 'AttemptTimeout:query'"));
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "P", &p), 0);
    assert_string_equal(p.name, "p");
    assert_int_equal(p.nsteps, 7);
    static const resil_config_step_kind kinds[] = {
        RESIL_CONFIG_STEP_RATE_LIMITER, RESIL_CONFIG_STEP_BULKHEAD, RESIL_CONFIG_STEP_DEGRADE,
        RESIL_CONFIG_STEP_TOTAL_TIMEOUT, RESIL_CONFIG_STEP_RETRY, RESIL_CONFIG_STEP_BREAKER,
        RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(p.steps[i].kind, kinds[i]);
    assert_string_equal(p.steps[0].ref, "api");
    assert_string_equal(p.steps[1].ref, "db");
    assert_null(p.steps[2].ref);
    assert_null(p.steps[3].ref);
    assert_duration_equal(p.steps[3].timeout, RESIL_S(10));
    assert_false(p.steps[3].per_operation);
    assert_string_equal(p.steps[4].ref, "orders");
    assert_string_equal(p.steps[6].ref, "query");
    assert_duration_equal(p.steps[6].timeout, RESIL_S(3));
    resil_config_free(c);
}

static void a_bare_total_timeout_is_per_operation(void **state)
{
    (void)state;
    resil_config *c = cfg_load(with_pipeline("'TotalTimeout', 'Retry:orders'"));
    resil_config_pipeline p;
    resil_config_pipeline_get(c, "p", &p);
    assert_true(p.steps[0].per_operation);
    assert_duration_equal(p.steps[0].timeout, 0);
    resil_config_free(c);
}

static void kinds_take_plural_and_any_case_and_spaces(void **state)
{
    (void)state;
    resil_config *c = cfg_load(with_pipeline("'ratelimiters : api', ' CIRCUITBREAKERS:Orders ',"
                                             " 'degradation'"));
    resil_config_pipeline p;
    resil_config_pipeline_get(c, "p", &p);
    assert_int_equal(p.nsteps, 3);
    assert_string_equal(p.steps[0].ref, "api");
    assert_int_equal(p.steps[1].kind, RESIL_CONFIG_STEP_BREAKER);
    assert_string_equal(p.steps[1].ref, "orders");
    assert_int_equal(p.steps[2].kind, RESIL_CONFIG_STEP_DEGRADE);
    resil_config_free(c);
}

static void an_empty_pipeline_runs_the_operation_once(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Pipelines': {'bare': []}}}");
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "bare", &p), 0);
    assert_int_equal(p.nsteps, 0);
    resil_config_free(c);
}

static void a_reference_must_name_something_that_exists(void **state)
{
    (void)state;
    static const struct {
        const char *steps, *message;
    } rows[] = {
        {"'Retyr:orders'", "unknown strategy \"Retyr\" (did you mean Retry?); use RateLimiter, "
                           "Bulkhead, TotalTimeout, Retry, CircuitBreaker, AttemptTimeout, "
                           "GracefulDegradation, Chaos, AdaptiveLimiter, Throttle, Hedging, "
                           "Fallback, StandardHedging or Pipeline"},
        {"'Retry'", "Retry needs a name: \"Retry:NAME\""},
        {"'Retry:order'", "no Retry named \"order\" in Resilience.Retry (did you mean orders?)"},
        {"'CircuitBreaker:payments'",
         "no CircuitBreaker named \"payments\" in Resilience.CircuitBreakers"},
        {"'Bulkhead:'", "Bulkhead needs a name: \"Bulkhead:NAME\""},
        {"'RateLimiter:ap'", "no RateLimiter named \"ap\" in Resilience.RateLimiters (did you "
                             "mean api?)"},
        {"'GracefulDegradation:x'", "GracefulDegradation takes no name: there is one monitor"},
        {"'AttemptTimeout'", "AttemptTimeout needs a duration or an operation: "
                             "\"AttemptTimeout:2s\""},
        {"'AttemptTimeout:soon'",
         "\"soon\" is neither a duration nor an operation of Timeouts.OperationTimeouts"},
        {"'TotalTimeout:0s'", "TotalTimeout must be > 0, got \"0s\""},
        {"'TotalTimeout:-1s'", "TotalTimeout: duration \"-1s\": must not be negative"},
        {"'AttemptTimeout:99999999d'", "AttemptTimeout: duration \"99999999d\": out of range "
                                       "(the maximum is 2562047h47m16.854775807s)"},
        {"'Pipeline'", "Pipeline needs a name: \"Pipeline:NAME\""},
        {"'Pipeline:q'", "no Pipeline named \"q\" in Resilience.Pipelines"},
        {"3", "must be a strategy such as \"Retry:NAME\", got 3"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *doc = with_pipeline(rows[i].steps);
        assert_string_equal(cfg_first_path(doc), "Resilience.Pipelines.p[0]");
        assert_string_equal(cfg_first_message(doc), rows[i].message);
    }
}

/* Microsoft's standard hedging handler by name: bare, its hedging is
 * Microsoft's; with a name, that Hedging entry's. */
static void standard_hedging_names_a_hedging_entry_or_none(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Hedging': {'regions': {}},"
                               " 'Pipelines': {'a': ['StandardHedging'],"
                               " 'b': [' standardhedging : Regions ']}}}");
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "a", &p), 0);
    assert_int_equal(p.nsteps, 1);
    assert_int_equal(p.steps[0].kind, RESIL_CONFIG_STEP_STANDARD_HEDGING);
    assert_null(p.steps[0].ref);
    assert_int_equal(resil_config_pipeline_get(c, "b", &p), 0);
    assert_int_equal(p.nsteps, 1);
    assert_int_equal(p.steps[0].kind, RESIL_CONFIG_STEP_STANDARD_HEDGING);
    assert_string_equal(p.steps[0].ref, "regions");
    assert_string_equal(resil_config_step_name(RESIL_CONFIG_STEP_STANDARD_HEDGING),
                        "StandardHedging");
    resil_config_free(c);
    assert_string_equal(cfg_first_message("{'Resilience': {'Hedging': {'regions': {}},"
                                          " 'Pipelines': {'p': ['StandardHedging:regoins']}}}"),
                        "no StandardHedging named \"regoins\" in Resilience.Hedging "
                        "(did you mean regions?)");
}

/* The handler brings its five strategies in Microsoft's order: nothing
 * goes before or after it. */
static void standard_hedging_stands_alone_in_its_pipeline(void **state)
{
    (void)state;
    static const char *const message =
        "StandardHedging is a whole pipeline (total timeout, hedging, concurrency limit, "
        "breaker, attempt timeout): it stands alone";
    const char *after = with_pipeline("'StandardHedging', 'Retry:orders'");
    assert_string_equal(cfg_first_path(after), "Resilience.Pipelines.p[1]");
    assert_string_equal(cfg_first_message(after), message);
    const char *before = with_pipeline("'TotalTimeout:5s', 'StandardHedging'");
    assert_string_equal(cfg_first_path(before), "Resilience.Pipelines.p[1]");
    assert_string_equal(cfg_first_message(before), message);
}

static void a_pipeline_must_be_a_list(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Pipelines': {'p': 'Retry:x'}}}"),
                        "Resilience.Pipelines.p at 1:36: must be an array of strategies, "
                        "outermost first, got \"Retry:x\"\n");
}

static void each_strategy_but_retry_appears_once(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'CircuitBreakers': {'a': {}, 'b': {}},\n"
                                   " 'Pipelines': {'p': ['CircuitBreaker:a', 'CircuitBreaker:b']}}}"),
                        "Resilience.Pipelines.p[1] at 2:42: a pipeline takes each strategy "
                        "once: CircuitBreaker is already at 2:22\n");
}

/* The seed's authorization refresh: an outer retry on 401 around the
 * retry for transient failures. */
static void a_retry_may_sit_outside_another(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'auth': {'MaxRetryAttempts': 1},"
                               " 'transient': {}},"
                               " 'Pipelines': {'p': ['TotalTimeout:30s', 'Retry:auth',"
                               " 'Retry:transient', 'AttemptTimeout:5s']}}}");
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "p", &p), 0);
    assert_int_equal(p.nsteps, 4);
    assert_int_equal(p.steps[1].kind, RESIL_CONFIG_STEP_RETRY);
    assert_int_equal(p.steps[2].kind, RESIL_CONFIG_STEP_RETRY);
    resil_config_free(c);
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'a': {}},"
                                          " 'Pipelines': {'p': ['Retry:a', 'AttemptTimeout:1s',"
                                          " 'Retry:a']}}}"),
                        "AttemptTimeout must come after Retry: it bounds one attempt");
}

/* Retry may come four times; a fifth is refused saying so, not "each
 * strategy once". */
static void a_fifth_retry_is_refused_naming_the_four_allowed(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'r': {}},\n"
                                   " 'Pipelines': {'p': ['Retry:r', 'Retry:r', 'Retry:r',"
                                   " 'Retry:r', 'Retry:r']}}}"),
                        "Resilience.Pipelines.p[4] at 2:66: a pipeline takes Retry at most 4 "
                        "times\n");
}

static void timeouts_sit_on_their_side_of_the_retry(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors(with_pipeline("'Retry:orders', 'TotalTimeout:10s'")),
                        "Resilience.Pipelines.p[1] at 1:219: TotalTimeout must come before "
                        "Retry: it bounds every attempt and wait\n");
    assert_string_equal(cfg_first_message(with_pipeline("'AttemptTimeout:1s', 'Retry:orders'")),
                        "AttemptTimeout must come after Retry: it bounds one attempt");
    assert_string_equal(cfg_first_message(with_pipeline("'AttemptTimeout:1s', "
                                                        "'TotalTimeout:5s'")),
                        "AttemptTimeout must come after TotalTimeout");
}

#define HEDGED                                                                             \
    "'Retry': {'r': {}}, 'Fallbacks': {'f': {}}, 'Hedging': {'h': {}}"

static const char *hedged_pipeline(const char *steps)
{
    static char doc[1024];
    snprintf(doc, sizeof doc, "{'Resilience': {" HEDGED ", 'Pipelines': {'p': [%s]}}}", steps);
    return doc;
}

static void hedging_before_retry_is_refused_at_its_position(void **state)
{
    (void)state;
    const char *doc = hedged_pipeline("'Hedging:h', 'Retry:r'");
    assert_string_equal(cfg_first_path(doc), "Resilience.Pipelines.p[0]");
    assert_string_equal(cfg_first_message(doc),
                        "Hedging must come after Retry: each attempt is hedged");
}

static void hedging_before_fallback_is_refused_at_its_position(void **state)
{
    (void)state;
    const char *doc = hedged_pipeline("'Hedging:h', 'Fallback:f'");
    assert_string_equal(cfg_first_path(doc), "Resilience.Pipelines.p[0]");
    assert_string_equal(cfg_first_message(doc), "Hedging must come after Fallback");
}

static void hedging_after_fallback_and_retry_is_accepted(void **state)
{
    (void)state;
    resil_config *c = cfg_load(hedged_pipeline("'Fallback:f', 'Retry:r', 'Hedging:h'"));
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "p", &p), 0);
    assert_int_equal(p.nsteps, 3);
    assert_int_equal(p.steps[2].kind, RESIL_CONFIG_STEP_HEDGING);
    resil_config_free(c);
}

static void the_attempt_timeout_may_not_exceed_the_total(void **state)
{
    (void)state;
    assert_string_equal(cfg_first_message(with_pipeline("'TotalTimeout:5s', 'Retry:orders',"
                                                        " 'AttemptTimeout:6s'")),
                        "the attempt timeout 6s exceeds the total timeout 5s");
    assert_string_equal(cfg_first_message(with_pipeline("'TotalTimeout', 'AttemptTimeout:31s'")),
                        "the attempt timeout 31s exceeds the total timeout 30s "
                        "(Timeouts.DefaultTimeout)");
    resil_config_free(cfg_load(with_pipeline("'TotalTimeout:5s', 'AttemptTimeout:5s'")));
}

static void an_inner_pipeline_is_the_last_step(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'r': {}}, 'Pipelines': {"
                               "'outer': ['Retry:r', 'Pipeline:inner'], 'inner': ['Retry:r']}}}");
    resil_config_pipeline p;
    resil_config_pipeline_get(c, "outer", &p);
    assert_int_equal(p.steps[1].kind, RESIL_CONFIG_STEP_PIPELINE);
    assert_string_equal(p.steps[1].ref, "inner");
    resil_config_free(c);
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'r': {}}, 'Pipelines': {"
                                          "'outer': ['Pipeline:inner', 'Retry:r'], 'inner': []}}}"),
                        "nothing may follow Pipeline: the inner pipeline is the operation");
}

static void pipelines_may_not_contain_themselves(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Pipelines': {\n"
                                   "  'a': ['Pipeline:b'],\n"
                                   "  'b': ['Pipeline:a'],\n"
                                   "  'c': ['Pipeline:c']}}}"),
                        "Resilience.Pipelines.a[0] at 2:9: pipelines must not contain "
                        "themselves: b leads back to a\n"
                        "Resilience.Pipelines.b[0] at 3:9: pipelines must not contain "
                        "themselves: a leads back to b\n"
                        "Resilience.Pipelines.c[0] at 4:9: pipelines must not contain "
                        "themselves: c leads back to c\n");
}

static void pipelines_nest_at_most_eight_deep(void **state)
{
    (void)state;
    char doc[1024];
    size_t n = (size_t)snprintf(doc, sizeof doc, "{'Resilience': {'Pipelines': {");
    for (int i = 0; i < 8; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n, "'p%d': ['Pipeline:p%d'], ", i, i + 1);
    snprintf(doc + n, sizeof doc - n, "'p8': []}}}");
    assert_string_equal(cfg_first_path(doc), "Resilience.Pipelines.p0[0]");
    assert_string_equal(cfg_first_message(doc), "pipelines nest at most 8 deep");
    /* p1 … p8 is eight deep: fine once p0 is gone. */
    n = (size_t)snprintf(doc, sizeof doc, "{'Resilience': {'Pipelines': {");
    for (int i = 1; i < 8; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n, "'p%d': ['Pipeline:p%d'], ", i, i + 1);
    snprintf(doc + n, sizeof doc - n, "'p8': []}}}");
    resil_config_free(cfg_load(doc));
}

/* Eight strategies fill a pipeline; a ninth is refused where it is
 * written, never dropped, and so is each one after it. */
static void a_strategy_past_the_eighth_is_refused_at_its_position(void **state)
{
    (void)state;
    assert_string_equal(
        cfg_errors("{'Resilience': {'Retry': {'r': {}}, 'Bulkheads': {'h': {}},\n"
                   " 'RateLimiters': {'l': {}}, 'Fallbacks': {'f': {}}, 'Throttles': {'t': {}},\n"
                   " 'CircuitBreakers': {'b': {}}, 'Hedging': {'g': {}},\n"
                   " 'Pipelines': {'p': ['RateLimiter:l', 'Bulkhead:h', 'GracefulDegradation',\n"
                   " 'TotalTimeout:10s', 'Fallback:f', 'Retry:r', 'CircuitBreaker:b', 'Throttle:t',\n"
                   " 'AttemptTimeout:1s', 'Hedging:g']}}}"),
        "Resilience.Pipelines.p[8] at 6:2: one strategy too many: a pipeline holds at most 8\n"
        "Resilience.Pipelines.p[9] at 6:23: one strategy too many: a pipeline holds at most 8\n");
}

static void pipeline_lookup_needs_a_known_name(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Pipelines': {'p': []}}}");
    resil_config_pipeline p;
    assert_int_equal(resil_config_pipeline_get(c, "q", &p), RESIL_ENOTFOUND);
    assert_int_equal(resil_config_pipeline_get(c, NULL, &p), RESIL_EINVAL);
    assert_int_equal(resil_config_pipeline_get(c, "", &p), RESIL_EINVAL);
    assert_string_equal(resil_config_step_name(RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT),
                        "AttemptTimeout");
    assert_string_equal(resil_config_step_name((resil_config_step_kind)99), "");
    resil_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(steps_are_read_in_order_with_their_references),
        cmocka_unit_test(a_bare_total_timeout_is_per_operation),
        cmocka_unit_test(kinds_take_plural_and_any_case_and_spaces),
        cmocka_unit_test(an_empty_pipeline_runs_the_operation_once),
        cmocka_unit_test(a_reference_must_name_something_that_exists),
        cmocka_unit_test(standard_hedging_names_a_hedging_entry_or_none),
        cmocka_unit_test(standard_hedging_stands_alone_in_its_pipeline),
        cmocka_unit_test(a_pipeline_must_be_a_list),
        cmocka_unit_test(each_strategy_but_retry_appears_once),
        cmocka_unit_test(a_retry_may_sit_outside_another),
        cmocka_unit_test(a_fifth_retry_is_refused_naming_the_four_allowed),
        cmocka_unit_test(timeouts_sit_on_their_side_of_the_retry),
        cmocka_unit_test(hedging_before_retry_is_refused_at_its_position),
        cmocka_unit_test(hedging_before_fallback_is_refused_at_its_position),
        cmocka_unit_test(hedging_after_fallback_and_retry_is_accepted),
        cmocka_unit_test(the_attempt_timeout_may_not_exceed_the_total),
        cmocka_unit_test(an_inner_pipeline_is_the_last_step),
        cmocka_unit_test(pipelines_may_not_contain_themselves),
        cmocka_unit_test(pipelines_nest_at_most_eight_deep),
        cmocka_unit_test(a_strategy_past_the_eighth_is_refused_at_its_position),
        cmocka_unit_test(pipeline_lookup_needs_a_known_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
