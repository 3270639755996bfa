/*
 * test_adaptive.c — the Chaos, AdaptiveLimiters and Throttles sections:
 * what each key sets, the defaults, the message a bad value gets, and
 * pipelines built from them running their strategies.
 */
#include "cfgtest.h"

static void chaos_keys_set_the_strategy(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Chaos': {"
                               "'down': {'Kind': 'Fault', 'InjectionRate': 0.2, 'Seed': 42,"
                               " 'OutcomeKind': 'Throttled', 'Code': 429},"
                               "'slow': {'Kind': 'Latency', 'InjectionRate': 0.1,"
                               " 'Latency': '2s', 'Enabled': false}}}}");
    resil_chaos_opts o;
    assert_int_equal(resil_config_chaos_get(c, "down", &o), 0);
    assert_int_equal(o.kind, RESIL_CHAOS_FAULT);
    assert_true(o.rate == 0.2);
    assert_int_equal(o.seed, 42);
    assert_int_equal(o.outcome.kind, RESIL_THROTTLED);
    assert_int_equal(o.outcome.code, 429);
    assert_true(o.enabled);
    assert_int_equal(resil_config_chaos_get(c, "slow", &o), 0);
    assert_int_equal(o.kind, RESIL_CHAOS_LATENCY);
    assert_duration_equal(o.latency, RESIL_S(2));
    assert_false(o.enabled);
    assert_int_equal(resil_config_chaos_get(c, "nope", &o), RESIL_ENOTFOUND);
    resil_config_free(c);
}

static void bad_chaos_values_are_named(void **state)
{
    (void)state;
    assert_string_equal(cfg_first_path("{'Resilience': {'Chaos': {'x': {'InjectionRate': 2}}}}"),
                        "Resilience.Chaos.x.InjectionRate");
    assert_string_equal(cfg_first_message("{'Resilience': {'Chaos': {'x': {'InjectionRate': 2}}}}"),
                        "must be in [0,1], got 2");
    assert_string_equal(cfg_first_path("{'Resilience': {'Chaos': {'x': {'Kind': 'Behavior'}}}}"),
                        "Resilience.Chaos.x.Kind");
}

static void adaptive_limiter_keys_set_the_limiter(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'AdaptiveLimiters': {"
                               "'db': {'Algorithm': 'Vegas', 'InitialLimit': 10, 'MinLimit': 2,"
                               " 'MaxLimit': 50, 'Window': '500ms', 'WindowSamples': 5,"
                               " 'MaxQueueLength': 3, 'QueueTimeout': '1s'},"
                               "'g': {}}}}");
    resil_limiter_opts o;
    assert_int_equal(resil_config_adaptive_limiter_get(c, "db", &o), 0);
    assert_int_equal(o.algorithm, RESIL_LIMIT_VEGAS);
    assert_int_equal(o.initial_limit, 10);
    assert_int_equal(o.min_limit, 2);
    assert_int_equal(o.max_limit, 50);
    assert_duration_equal(o.window, RESIL_MS(500));
    assert_int_equal(o.window_samples, 5);
    assert_int_equal(o.max_queue, 3);
    assert_duration_equal(o.queue_timeout, RESIL_S(1));
    assert_true(o.smoothing == 1.0); /* Vegas's own default */
    assert_int_equal(resil_config_adaptive_limiter_get(c, "g", &o), 0);
    assert_int_equal(o.algorithm, RESIL_LIMIT_GRADIENT);
    assert_true(o.smoothing == 0.2);
    resil_config_free(c);
    assert_string_equal(
        cfg_first_message("{'Resilience': {'AdaptiveLimiters': {'x': {'InitialLimit': 500}}}}"),
        "limiter.initial_limit must be in [min_limit, max_limit], got 500");
}

/* The limits' consistency is checked per section, as every other section's:
 * a mistake elsewhere in the file must not hide this one. */
static void an_inconsistent_limiter_is_reported_beside_an_earlier_error(void **state)
{
    (void)state;
    assert_string_equal(
        cfg_errors("{'Resilience': {'Throttles': {'api': {'K': 0.5}},\n"
                   "'AdaptiveLimiters': {'db': {'MinLimit': 20, 'MaxLimit': 10}}}}"),
        "Resilience.Throttles.api.K at 1:44: must be in [1,1e+06], got 0.5\n"
        "Resilience.AdaptiveLimiters.db at 2:28: limiter.max_limit must be >= min_limit, got "
        "10\n");
}

static void throttle_keys_set_the_throttle(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Throttles': {"
                               "'api': {'K': 1.5, 'Window': '1m', 'Buckets': 6, 'Seed': 3}}}}");
    resil_throttle_opts o;
    assert_int_equal(resil_config_throttle_get(c, "api", &o), 0);
    assert_true(o.k == 1.5);
    assert_duration_equal(o.window, RESIL_S(60));
    assert_int_equal(o.buckets, 6);
    assert_int_equal(o.seed, 3);
    assert_int_equal(resil_config_throttle_get(c, NULL, &o), 0);
    assert_true(o.k == 2.0);
    resil_config_free(c);
    assert_string_equal(cfg_first_path("{'Resilience': {'Throttles': {'x': {'K': 0.5}}}}"),
                        "Resilience.Throttles.x.K");
}

static resil_outcome ok_op(resil_attempt_ctx *ctx)
{
    int *calls = ctx->user;
    (*calls)++;
    return resil_ok();
}

static void a_configured_pipeline_runs_its_chaos_and_learning_strategies(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_policies_opts po;
    resil_policies_opts_default(&po);
    po.clock = resil_fake_clock_clock(fc);
    resil_policies *reg;
    assert_int_equal(resil_policies_new(&po, &reg, NULL), 0);
    resil_config *c = cfg_load("{'Resilience': {"
                               "'Chaos': {'down': {'Kind': 'Fault', 'InjectionRate': 1,"
                               " 'Code': 503}},"
                               "'AdaptiveLimiters': {'db': {'Algorithm': 'Aimd'}},"
                               "'Throttles': {'api': {}},"
                               "'Pipelines': {'orders': ['Throttle:api',"
                               " 'AdaptiveLimiter:db', 'Chaos:down']}}}");
    resil_err err = {0, ""};
    int rc = resil_policies_apply(reg, c, &err);
    if (rc != 0)
        fail_msg("apply: %s", err.message);
    resil_policy p;
    assert_int_equal(resil_policies_get(reg, "orders", &p), 0);
    int calls = 0;
    resil_call call;
    resil_call_default(&call);
    call.user = &calls;
    resil_pipeline_result r;
    assert_int_equal(resil_policy_execute(&p, ok_op, &call, &r), 0);
    assert_int_equal(calls, 0);
    assert_int_equal(r.outcome.kind, RESIL_TRANSIENT);
    assert_int_equal(r.outcome.code, 503);
    resil_policy_release(&p);
    resil_config_free(c);
    resil_policies_free(reg);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chaos_keys_set_the_strategy),
        cmocka_unit_test(bad_chaos_values_are_named),
        cmocka_unit_test(adaptive_limiter_keys_set_the_limiter),
        cmocka_unit_test(an_inconsistent_limiter_is_reported_beside_an_earlier_error),
        cmocka_unit_test(throttle_keys_set_the_throttle),
        cmocka_unit_test(a_configured_pipeline_runs_its_chaos_and_learning_strategies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
