/*
 * test_pipeline_build.c — building a pipeline: every invalid option and
 * composition is refused with a message naming it, the first error sticks
 * to the builder, and a built pipeline describes itself (strategies, order,
 * options, warnings) as text and as JSON that parses.
 */
#include <ctype.h>

#include "test.h"

static resil_pipeline_builder *builder(void)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("svc", &b, NULL), 0);
    return b;
}

/* Build, expecting failure with `code` and exactly `message`. */
static void refused(resil_pipeline_builder *b, int code, const char *message)
{
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_pipeline_build(b, &p, &err), code);
    assert_null(p);
    assert_string_equal(err.message, message);
    assert_int_equal(err.code, code);
    resil_pipeline_builder_free(b);
}

/* Build, expecting failure whose message starts with `prefix`. */
static void refused_with(resil_pipeline_builder *b, const char *prefix)
{
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_pipeline_build(b, &p, &err), RESIL_EINVAL);
    if (strncmp(err.message, prefix, strlen(prefix)) != 0)
        fail_msg("expected \"%s...\", got \"%s\"", prefix, err.message);
    resil_pipeline_builder_free(b);
}

static resil_retry_policy retry_policy(void)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    return p;
}

static resil_outcome never_called(const resil_fallback_info *info, void *user, void *ud)
{
    (void)info;
    (void)user;
    (void)ud;
    fail_msg("the fallback ran");
    return resil_ok();
}

static resil_timeout_opts timeout_of(resil_duration d)
{
    resil_timeout_opts o;
    resil_timeout_opts_default(&o);
    o.timeout = d;
    return o;
}

/* ---- names and arguments -------------------------------------------------- */

static void pipeline_name_must_be_1_to_63_bytes(void **state)
{
    (void)state;
    resil_pipeline_builder *b = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_pipeline_builder_new("", &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "pipeline.name must be 1 to 63 bytes long, got 0");
    assert_int_equal(resil_pipeline_builder_new(NULL, &b, &err), RESIL_EINVAL);
    char name[65];
    memset(name, 'p', 64);
    name[64] = '\0';
    assert_int_equal(resil_pipeline_builder_new(name, &b, &err), RESIL_EINVAL);
    name[63] = '\0';
    assert_int_equal(resil_pipeline_builder_new(name, &b, &err), 0);
    resil_pipeline_builder_free(b);
    assert_int_equal(resil_pipeline_builder_new("x", NULL, &err), RESIL_EINVAL);
}

static void shared_objects_must_not_be_null(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_use_bulkhead(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "bulkhead: bulkhead must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_breaker(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "breaker: breaker must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_registry(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "breaker: registry must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_rate_limiter(b, NULL, 0), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "rate_limiter: limiter must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_degrade(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "degrade: monitor must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_chaos(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "chaos: strategy must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_adaptive_limiter(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "adaptive_limiter: limiter must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_use_throttle(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "throttle: throttle must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_add_bulkhead(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "bulkhead: options must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_add_chaos(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "chaos: options must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "adaptive_limiter: options must not be NULL");
    b = builder();
    assert_int_equal(resil_pipeline_add_throttle(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "throttle: options must not be NULL");
    assert_int_equal(resil_pipeline_add_retry(NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_pipeline_use_chaos(NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_pipeline_use_adaptive_limiter(NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_pipeline_use_throttle(NULL, NULL), RESIL_EINVAL);
}

static void listeners_are_limited_to_four_and_never_null(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_builder_listen(b, NULL, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "pipeline: listener must not be NULL");
    b = builder();
    for (int i = 0; i < 4; i++)
        assert_int_equal(resil_pipeline_builder_listen(b, resil_metrics_on_event, NULL), 0);
    assert_int_equal(resil_pipeline_builder_listen(b, resil_metrics_on_event, NULL),
                     RESIL_ERANGE);
    refused(b, RESIL_ERANGE, "pipeline: at most 4 listeners");
}

/* ---- a NULL builder, and NULL options that stick to the builder ------------ */

static void listening_needs_a_builder(void **state)
{
    (void)state;
    assert_int_equal(resil_pipeline_builder_listen(NULL, resil_metrics_on_event, NULL),
                     RESIL_EINVAL);
}

static void a_metrics_sink_needs_a_builder(void **state)
{
    (void)state;
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);
    assert_int_equal(resil_pipeline_builder_metrics(NULL, m), RESIL_EINVAL);
    resil_metrics_free(m);
}

static void a_null_metrics_sink_sticks_to_the_builder(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_builder_metrics(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "pipeline: metrics must not be NULL");
}

static void the_standard_strategies_need_a_builder(void **state)
{
    (void)state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    assert_int_equal(resil_pipeline_add_standard(NULL, &o), RESIL_EINVAL);
}

static void null_standard_options_stick_to_the_builder(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_standard(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "pipeline: standard options must not be NULL");
}

static void the_standard_hedging_strategies_need_a_builder(void **state)
{
    (void)state;
    resil_standard_hedging_opts o;
    resil_standard_hedging_opts_default(&o);
    assert_int_equal(resil_pipeline_add_standard_hedging(NULL, &o), RESIL_EINVAL);
}

static void null_standard_hedging_options_stick_to_the_builder(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_standard_hedging(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "pipeline: standard hedging options must not be NULL");
}

static void adding_chaos_needs_a_builder(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    assert_int_equal(resil_pipeline_add_chaos(NULL, &o), RESIL_EINVAL);
}

static void null_rate_limiter_options_stick_to_the_builder(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_rate_limiter(b, NULL, 0), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "rate_limiter: options must not be NULL");
}

static void null_breaker_options_stick_to_the_builder(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_breaker(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "breaker: options must not be NULL");
}

static void null_degradation_options_stick_to_the_builder(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_degrade(b, NULL), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "degrade: options must not be NULL");
}

static void a_shared_rate_limiter_waiting_below_zero_is_refused_by_name(void **state)
{
    (void)state;
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    resil_ratelimit *rl;
    assert_int_equal(resil_ratelimit_new(&o, &rl, NULL), 0);
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_use_rate_limiter(b, rl, -RESIL_MS(5)), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "rate_limiter.max_wait must be >= 0, got -5ms");
    resil_ratelimit_free(rl);
}

/* ---- one strategy of each kind but retry, whichever way it is added ---------- */

static resil_ratelimit_opts rate_opts(void)
{
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    return o;
}

static resil_bulkhead_opts bulkhead_opts(void)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    return o;
}

static void a_second_rate_limiter_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_ratelimit_opts o = rate_opts();
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, 0), 0);
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, 0), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one rate-limiter strategy per pipeline");
}

static void a_shared_rate_limiter_after_one_is_refused(void **state)
{
    (void)state;
    resil_ratelimit_opts o = rate_opts();
    resil_ratelimit *rl;
    assert_int_equal(resil_ratelimit_new(&o, &rl, NULL), 0);
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, 0), 0);
    assert_int_equal(resil_pipeline_use_rate_limiter(b, rl, 0), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one rate-limiter strategy per pipeline");
    resil_ratelimit_free(rl);
}

static void a_second_bulkhead_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_bulkhead_opts o = bulkhead_opts();
    assert_int_equal(resil_pipeline_add_bulkhead(b, &o), 0);
    assert_int_equal(resil_pipeline_add_bulkhead(b, &o), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one bulkhead strategy per pipeline");
}

static void a_shared_bulkhead_after_one_is_refused(void **state)
{
    (void)state;
    resil_bulkhead_opts o = bulkhead_opts();
    resil_bulkhead *bh;
    assert_int_equal(resil_bulkhead_new(&o, &bh, NULL), 0);
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_bulkhead(b, &o), 0);
    assert_int_equal(resil_pipeline_use_bulkhead(b, bh), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one bulkhead strategy per pipeline");
    resil_bulkhead_free(bh);
}

static void a_second_total_timeout_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t = timeout_of(RESIL_S(1));
    assert_int_equal(resil_pipeline_add_total_timeout(b, &t), 0);
    assert_int_equal(resil_pipeline_add_total_timeout(b, &t), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one total-timeout strategy per pipeline");
}

static void a_second_attempt_timeout_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t = timeout_of(RESIL_S(1));
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), 0);
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one attempt-timeout strategy per pipeline");
}

static void a_shared_breaker_after_one_is_refused(void **state)
{
    (void)state;
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    resil_breaker *br;
    assert_int_equal(resil_breaker_new(&o, &br, NULL), 0);
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_breaker(b, &o), 0);
    assert_int_equal(resil_pipeline_use_breaker(b, br), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one breaker strategy per pipeline");
    resil_breaker_free(br);
}

static void a_second_hedging_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
    assert_int_equal(resil_pipeline_add_hedging(b, &h), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one hedging strategy per pipeline");
}

static void a_second_fallback_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_fallback_opts f;
    resil_fallback_opts_default(&f);
    f.action = never_called;
    assert_int_equal(resil_pipeline_add_fallback(b, &f), 0);
    assert_int_equal(resil_pipeline_add_fallback(b, &f), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one fallback strategy per pipeline");
}

static void a_second_degradation_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_degrade_opts d;
    resil_degrade_opts_default(&d);
    assert_int_equal(resil_pipeline_add_degrade(b, &d), 0);
    assert_int_equal(resil_pipeline_add_degrade(b, &d), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one degradation strategy per pipeline");
}

static void a_shared_degradation_after_one_is_refused(void **state)
{
    (void)state;
    resil_degrade_opts d;
    resil_degrade_opts_default(&d);
    resil_degrade *shared;
    assert_int_equal(resil_degrade_new(&d, &shared, NULL), 0);
    resil_pipeline_builder *b = builder();
    assert_int_equal(resil_pipeline_add_degrade(b, &d), 0);
    assert_int_equal(resil_pipeline_use_degrade(b, shared), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one degradation strategy per pipeline");
    resil_degrade_free(shared);
}

/* ---- each strategy's options, by name --------------------------------------- */

static void bad_retry_policy_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_retry_policy p = retry_policy();
    p.max_attempts = 0;
    assert_int_equal(resil_pipeline_add_retry(b, &p), RESIL_EINVAL);
    refused_with(b, "retry.max_attempts must be >= 1");
}

static void bad_timeouts_are_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t = timeout_of(0);
    assert_int_equal(resil_pipeline_add_total_timeout(b, &t), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "total_timeout.timeout must be > 0, got 0s");
    b = builder();
    t = timeout_of(-RESIL_S(1));
    resil_pipeline_add_attempt_timeout(b, &t);
    refused(b, RESIL_EINVAL, "attempt_timeout.timeout must be > 0, got -1s");
    b = builder();
    resil_pipeline_add_total_timeout(b, NULL);
    refused(b, RESIL_EINVAL, "total_timeout: options must not be NULL");
}

static void bad_bulkhead_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = 0;
    resil_pipeline_add_bulkhead(b, &o);
    refused_with(b, "bulkhead.max_concurrency");
}

static void bad_rate_limiter_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    o.rate = 0;
    resil_pipeline_add_rate_limiter(b, &o, 0);
    refused_with(b, "ratelimit.rate");
    b = builder();
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    resil_pipeline_add_rate_limiter(b, &o, -RESIL_MS(5));
    refused(b, RESIL_EINVAL, "rate_limiter.max_wait must be >= 0, got -5ms");
}

static void bad_breaker_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.failure_ratio = 1.5;
    resil_pipeline_add_breaker(b, &o);
    refused_with(b, "breaker.failure_ratio");
}

static void bad_hedging_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.max_hedged = 0;
    resil_pipeline_add_hedging(b, &h);
    refused(b, RESIL_EINVAL, "hedging.max_hedged must be in [1, 10], got 0");
}

static void fallback_needs_an_action(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_fallback_opts f;
    resil_fallback_opts_default(&f);
    resil_pipeline_add_fallback(b, &f);
    refused(b, RESIL_EINVAL, "fallback.action must not be NULL");
}

static void bad_degradation_options_are_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.check_interval = 0;
    resil_pipeline_add_degrade(b, &o);
    refused_with(b, "degrade");
}

/* The strategy's own check, its message kept whole by the builder. */
static void bad_chaos_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 1.5;
    assert_int_equal(resil_pipeline_add_chaos(b, &o), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "chaos.rate must be in [0, 1], got 1.5");
}

static void bad_adaptive_limiter_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, RESIL_LIMIT_AIMD);
    o.min_limit = 0;
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "limiter.min_limit must be >= 1, got 0");
}

static void bad_throttle_is_named(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_throttle_opts o;
    resil_throttle_opts_default(&o);
    o.k = 0.5;
    assert_int_equal(resil_pipeline_add_throttle(b, &o), RESIL_EINVAL);
    refused(b, RESIL_EINVAL, "throttle.k must be >= 1, got 0.5");
}

/* ---- composition ---------------------------------------------------------------- */

static void retry_appears_at_most_four_times(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_retry_policy p = retry_policy();
    for (int i = 0; i < RESIL_PIPELINE_MAX_RETRIES; i++)
        assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    assert_int_equal(resil_pipeline_add_retry(b, &p), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most 4 retry strategies per pipeline");
}

static void two_retries_build_in_order(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_retry_policy p = retry_policy();
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    resil_pipeline *pl;
    assert_int_equal(resil_pipeline_build(b, &pl, NULL), 0);
    resil_pipeline_builder_free(b);
    assert_int_equal(resil_pipeline_strategy_count(pl), 2);
    assert_int_equal(resil_pipeline_strategy_at(pl, 0), RESIL_STRATEGY_RETRY);
    assert_int_equal(resil_pipeline_strategy_at(pl, 1), RESIL_STRATEGY_RETRY);
    resil_pipeline_free(pl);
}

/* A retry, a timeout added by `add_timeout`, then a second retry. */
static resil_pipeline_builder *timeout_between_retries(
    int (*add_timeout)(resil_pipeline_builder *, const resil_timeout_opts *))
{
    resil_pipeline_builder *b = builder();
    resil_retry_policy p = retry_policy();
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    resil_pipeline_add_retry(b, &p);
    add_timeout(b, &t);
    resil_pipeline_add_retry(b, &p);
    return b;
}

static void a_total_timeout_must_come_before_every_retry(void **state)
{
    (void)state;
    refused(timeout_between_retries(resil_pipeline_add_total_timeout), RESIL_EINVAL,
            "pipeline: total-timeout must come before retry");
}

static void an_attempt_timeout_must_come_after_every_retry(void **state)
{
    (void)state;
    refused(timeout_between_retries(resil_pipeline_add_attempt_timeout), RESIL_EINVAL,
            "pipeline: retry must come before attempt-timeout");
}

static void each_kind_but_retry_appears_once(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    resil_pipeline_add_breaker(b, &bo);
    resil_registry *reg;
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    assert_int_equal(resil_pipeline_use_registry(b, reg), RESIL_EEXIST);
    refused(b, RESIL_EEXIST, "pipeline: at most one breaker strategy per pipeline");
    resil_registry_free(reg);
}

static void first_error_sticks(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t = timeout_of(0);
    resil_pipeline_add_total_timeout(b, &t);
    resil_retry_policy p = retry_policy();
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_add_retry(b, &p);
    refused(b, RESIL_EINVAL, "total_timeout.timeout must be > 0, got 0s");
}

static void timeouts_sit_on_their_side_of_the_retry(void **state)
{
    (void)state;
    resil_retry_policy p = retry_policy();
    resil_timeout_opts t = timeout_of(RESIL_S(1));
    resil_pipeline_builder *b = builder();
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_add_total_timeout(b, &t);
    refused(b, RESIL_EINVAL, "pipeline: total-timeout must come before retry");
    b = builder();
    resil_pipeline_add_attempt_timeout(b, &t);
    resil_pipeline_add_retry(b, &p);
    refused(b, RESIL_EINVAL, "pipeline: retry must come before attempt-timeout");
    b = builder();
    resil_pipeline_add_attempt_timeout(b, &t);
    resil_pipeline_add_total_timeout(b, &t);
    refused(b, RESIL_EINVAL, "pipeline: total-timeout must come before attempt-timeout");
}

static void hedging_comes_after_retry_and_fallback(void **state)
{
    (void)state;
    resil_retry_policy p = retry_policy();
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    resil_pipeline_builder *b = builder();
    resil_pipeline_add_hedging(b, &h);
    resil_pipeline_add_retry(b, &p);
    refused(b, RESIL_EINVAL, "pipeline: retry must come before hedging");
    b = builder();
    resil_fallback_opts f;
    resil_fallback_opts_default(&f);
    f.action = never_called;
    resil_pipeline_add_hedging(b, &h);
    resil_pipeline_add_fallback(b, &f);
    refused(b, RESIL_EINVAL, "pipeline: fallback must come before hedging");
}

static void attempt_timeout_longer_than_the_total_is_refused(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_timeout_opts total = timeout_of(RESIL_S(30)), attempt = timeout_of(RESIL_S(40));
    resil_pipeline_add_total_timeout(b, &total);
    resil_pipeline_add_attempt_timeout(b, &attempt);
    refused(b, RESIL_EINVAL,
            "pipeline: attempt_timeout.timeout (40s) must not exceed total_timeout.timeout (30s)");
    b = builder();
    attempt = timeout_of(RESIL_S(30));
    resil_pipeline_add_total_timeout(b, &total);
    resil_pipeline_add_attempt_timeout(b, &attempt);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    resil_pipeline_free(p);
}

static void a_failed_build_stays_failed(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_retry_policy p = retry_policy();
    resil_timeout_opts t = timeout_of(RESIL_S(1));
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_add_total_timeout(b, &t);
    resil_pipeline *out = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_pipeline_build(b, &out, &err), RESIL_EINVAL);
    err.message[0] = '\0';
    assert_int_equal(resil_pipeline_build(b, &out, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "pipeline: total-timeout must come before retry");
    assert_null(out);
    resil_pipeline_builder_free(b);
}

static void a_builder_builds_once(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_err err = {0, ""};
    resil_pipeline *again = NULL;
    assert_int_equal(resil_pipeline_build(b, &again, &err), RESIL_ESTATE);
    assert_string_equal(err.message, "pipeline: the builder was already built");
    resil_retry_policy r = retry_policy();
    assert_int_equal(resil_pipeline_add_retry(b, &r), RESIL_ESTATE);
    resil_pipeline_builder_free(b);
    resil_pipeline_free(p);
    assert_int_equal(resil_pipeline_build(NULL, &p, &err), RESIL_EINVAL);
}

/* ---- the standard pipeline and describe ---------------------------------------------- */

static void standard_options_are_microsofts_defaults(void **state)
{
    (void)state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    assert_string_equal(o.name, "standard");
    assert_int_equal(o.concurrency.max_concurrency, 1000);
    assert_int_equal(o.concurrency.max_queue, 0);
    assert_duration_equal(o.total.timeout, RESIL_S(30));
    assert_int_equal(o.retry.max_attempts, 4);
    assert_int_equal(o.retry.backoff.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_duration_equal(o.retry.backoff.base, RESIL_S(2));
    assert_int_equal(o.retry.backoff.jitter, RESIL_JITTER_POLLY);
    assert_int_equal(o.retry.retry_after, RESIL_RETRY_AFTER_HONOR);
    assert_int_equal(o.breaker.kind, RESIL_BREAKER_RATIO);
    assert_true(o.breaker.failure_ratio == 0.1);
    assert_int_equal(o.breaker.minimum_throughput, 100);
    assert_duration_equal(o.breaker.sampling_duration, RESIL_S(30));
    assert_duration_equal(o.breaker.break_duration, RESIL_S(5));
    assert_duration_equal(o.attempt.timeout, RESIL_S(10));
}

static void a_standard_pipeline_name_of_64_bytes_is_refused_by_name(void **state)
{
    (void)state;
    char name[65];
    memset(name, 's', 64);
    name[64] = '\0';
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.name = name;
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_pipeline_standard(&o, &p, &err), RESIL_EINVAL);
    assert_null(p);
    assert_string_equal(err.message, "pipeline.name must be 1 to 63 bytes long, got 64");
}

static void a_standard_hedging_pipeline_name_of_64_bytes_is_refused_by_name(void **state)
{
    (void)state;
    char name[65];
    memset(name, 'h', 64);
    name[64] = '\0';
    resil_standard_hedging_opts o;
    resil_standard_hedging_opts_default(&o);
    o.name = name;
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_pipeline_standard_hedging(&o, &p, &err), RESIL_EINVAL);
    assert_null(p);
    assert_string_equal(err.message, "pipeline.name must be 1 to 63 bytes long, got 64");
}

static const char standard_text[] =
    "pipeline standard: 5 strategies, outermost first\n"
    "  1. bulkhead max_concurrency=1000 max_queue=0 queue=false queue_timeout=none\n"
    "  2. total-timeout timeout=30s\n"
    "  3. retry max_attempts=4 retry_on=default backoff=exponential base=2s factor=2 "
    "jitter=polly max_delay=none max_total=none retry_after=honor retry_after_max=1m "
    "unsafe_mode=refuse budget=none\n"
    "  4. breaker source=options name=standard kind=ratio failure_ratio=0.1 "
    "minimum_throughput=100 sampling_duration=30s break_duration=5s half_open_probes=1 "
    "success_threshold=1\n"
    "  5. attempt-timeout timeout=10s\n"
    "warning: worst case 4 attempts x 10s + 19.836s of waits = 59.836s exceeds the total "
    "timeout 30s: later attempts will be cut short\n";

static void standard_describes_its_order_options_and_worst_case(void **state)
{
    (void)state;
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_standard(NULL, &p, NULL), 0);
    char buf[2048];
    size_t n = resil_pipeline_describe(p, RESIL_DESCRIBE_TEXT, buf, sizeof buf);
    assert_string_equal(buf, standard_text);
    assert_int_equal(n, strlen(standard_text));
    assert_int_equal(resil_pipeline_strategy_count(p), 5);
    static const resil_strategy_kind order[] = {
        RESIL_STRATEGY_BULKHEAD, RESIL_STRATEGY_TOTAL_TIMEOUT, RESIL_STRATEGY_RETRY,
        RESIL_STRATEGY_BREAKER, RESIL_STRATEGY_ATTEMPT_TIMEOUT};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(resil_pipeline_strategy_at(p, i), order[i]);
    assert_int_equal(resil_pipeline_strategy_at(p, 5), RESIL_STRATEGY_NONE);
    assert_int_equal(resil_pipeline_warning_count(p), 1);
    assert_non_null(strstr(resil_pipeline_warning(p, 0), "exceeds the total timeout 30s"));
    assert_null(resil_pipeline_warning(p, 1));
    assert_string_equal(resil_pipeline_name(p), "standard");
    resil_pipeline_free(p);
}

static void standard_hedging_options_are_microsofts_defaults(void **state)
{
    (void)state;
    resil_standard_hedging_opts o;
    resil_standard_hedging_opts_default(&o);
    assert_string_equal(o.name, "standard-hedging");
    assert_duration_equal(o.total.timeout, RESIL_S(30));
    assert_duration_equal(o.hedging.delay, RESIL_S(2));
    assert_int_equal(o.hedging.max_hedged, 1);
    assert_null(o.hedging.hedge_on);
    assert_int_equal(o.concurrency.max_concurrency, 1000);
    assert_int_equal(o.concurrency.max_queue, 0);
    assert_int_equal(o.breaker.kind, RESIL_BREAKER_RATIO);
    assert_true(o.breaker.failure_ratio == 0.1);
    assert_int_equal(o.breaker.minimum_throughput, 100);
    assert_duration_equal(o.breaker.sampling_duration, RESIL_S(30));
    assert_duration_equal(o.breaker.break_duration, RESIL_S(5));
    assert_duration_equal(o.attempt.timeout, RESIL_S(10));
}

/* Microsoft's hedging order: the single attempt goes where the retry
 * would, and every hedged attempt meets the limiter, the breaker and the
 * attempt timeout on its own. */
static void standard_hedging_builds_in_microsofts_order(void **state)
{
    (void)state;
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_standard_hedging(NULL, &p, NULL), 0);
    static const resil_strategy_kind order[] = {
        RESIL_STRATEGY_TOTAL_TIMEOUT, RESIL_STRATEGY_HEDGING, RESIL_STRATEGY_BULKHEAD,
        RESIL_STRATEGY_BREAKER, RESIL_STRATEGY_ATTEMPT_TIMEOUT};
    assert_int_equal(resil_pipeline_strategy_count(p), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(resil_pipeline_strategy_at(p, i), order[i]);
    assert_string_equal(resil_pipeline_name(p), "standard-hedging");
    assert_int_equal(resil_pipeline_warning_count(p), 0);
    resil_pipeline_free(p);
}

/* A JSON syntax checker: enough to prove the description parses. */
typedef struct json {
    const char *s;
} json;

static void ws(json *j)
{
    while (isspace((unsigned char)*j->s))
        j->s++;
}

static bool value(json *j);

static bool string(json *j)
{
    if (*j->s++ != '"')
        return false;
    for (; *j->s != '"'; j->s++) {
        if (*j->s == '\0' || (unsigned char)*j->s < 0x20)
            return false;
        if (*j->s == '\\' && *++j->s == '\0')
            return false;
    }
    j->s++;
    return true;
}

static bool members(json *j, char close, bool keyed)
{
    j->s++;
    ws(j);
    if (*j->s == close) {
        j->s++;
        return true;
    }
    for (;;) {
        ws(j);
        if (keyed) {
            if (!string(j))
                return false;
            ws(j);
            if (*j->s++ != ':')
                return false;
        }
        if (!value(j))
            return false;
        ws(j);
        if (*j->s == close) {
            j->s++;
            return true;
        }
        if (*j->s++ != ',')
            return false;
    }
}

static bool value(json *j)
{
    ws(j);
    if (*j->s == '{')
        return members(j, '}', true);
    if (*j->s == '[')
        return members(j, ']', false);
    if (*j->s == '"')
        return string(j);
    if (strncmp(j->s, "true", 4) == 0 || strncmp(j->s, "null", 4) == 0) {
        j->s += 4;
        return true;
    }
    if (strncmp(j->s, "false", 5) == 0) {
        j->s += 5;
        return true;
    }
    char *end;
    strtod(j->s, &end);
    if (end == j->s)
        return false;
    j->s = end;
    return true;
}

static bool parses(const char *text)
{
    json j = {text};
    if (!value(&j))
        return false;
    ws(&j);
    return *j.s == '\0';
}

static void json_description_parses_and_names_every_strategy(void **state)
{
    (void)state;
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_standard(NULL, &p, NULL), 0);
    char buf[2048];
    resil_pipeline_describe(p, RESIL_DESCRIBE_JSON, buf, sizeof buf);
    assert_true(parses(buf));
    assert_non_null(strstr(buf, "{\"name\":\"standard\",\"strategies\":[{\"type\":\"bulkhead\","));
    assert_non_null(strstr(buf, "{\"type\":\"attempt-timeout\",\"timeout\":\"10s\"}]"));
    assert_non_null(strstr(buf, "\"warnings\":[\"worst case 4 attempts"));
    resil_pipeline_free(p);
}

static void describe_measures_like_snprintf(void **state)
{
    (void)state;
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_standard(NULL, &p, NULL), 0);
    size_t need = resil_pipeline_describe(p, RESIL_DESCRIBE_TEXT, NULL, 0);
    assert_int_equal(need, strlen(standard_text));
    char small[10];
    assert_int_equal(resil_pipeline_describe(p, RESIL_DESCRIBE_TEXT, small, sizeof small), need);
    assert_string_equal(small, "pipeline ");
    resil_pipeline_free(p);
}

static resil_pipeline *composed(uint32_t attempts, resil_duration attempt_timeout,
                                resil_duration total)
{
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t = timeout_of(total), a = timeout_of(attempt_timeout);
    resil_retry_policy p = retry_policy();
    p.max_attempts = attempts;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(1);
    p.backoff.jitter = RESIL_JITTER_NONE;
    resil_pipeline_add_total_timeout(b, &t);
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_add_attempt_timeout(b, &a);
    resil_pipeline *out;
    assert_int_equal(resil_pipeline_build(b, &out, NULL), 0);
    resil_pipeline_builder_free(b);
    return out;
}

static void worst_case_that_fits_the_total_gives_no_warning(void **state)
{
    (void)state;
    resil_pipeline *p = composed(3, RESIL_S(5), RESIL_S(17)); /* 3 x 5s + 2 x 1s = 17s */
    assert_int_equal(resil_pipeline_warning_count(p), 0);
    resil_pipeline_free(p);
    p = composed(3, RESIL_S(5), RESIL_MS(16999));
    assert_int_equal(resil_pipeline_warning_count(p), 1);
    assert_string_equal(resil_pipeline_warning(p, 0),
                        "worst case 3 attempts x 5s + 2s of waits = 17s exceeds the total "
                        "timeout 16.999s: later attempts will be cut short");
    resil_pipeline_free(p);
}

static void retrying_forever_is_flagged(void **state)
{
    (void)state;
    resil_pipeline *p = composed(RESIL_ATTEMPTS_FOREVER, RESIL_S(1), RESIL_S(60));
    assert_int_equal(resil_pipeline_warning_count(p), 1);
    assert_string_equal(resil_pipeline_warning(p, 0),
                        "retry.max_attempts is forever: the total timeout (1m) is the only bound");
    resil_pipeline_free(p);
}

static void hedging_delay_past_the_attempt_timeout_is_flagged(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_timeout_opts a = timeout_of(RESIL_S(1));
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    resil_pipeline_add_attempt_timeout(b, &a);
    resil_pipeline_add_hedging(b, &h);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    assert_int_equal(resil_pipeline_warning_count(p), 1);
    assert_string_equal(resil_pipeline_warning(p, 0),
                        "hedging.delay (2s) is not shorter than the attempt timeout (1s): "
                        "no hedge can start in time");
    resil_pipeline_free(p);
}

static void every_kind_describes_itself(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_degrade_opts d;
    resil_degrade_opts_default(&d);
    resil_pipeline_add_degrade(b, &d);
    resil_ratelimit_opts r;
    resil_ratelimit_opts_default(&r, RESIL_RATELIMIT_SLIDING_WINDOW);
    resil_pipeline_add_rate_limiter(b, &r, RESIL_MS(50));
    resil_fallback_opts f;
    resil_fallback_opts_default(&f);
    f.action = never_called;
    resil_pipeline_add_fallback(b, &f);
    resil_retry_policy p = retry_policy();
    resil_pipeline_add_retry(b, &p);
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    resil_pipeline_add_hedging(b, &h);
    resil_pipeline *pl;
    resil_err err = {0, ""};
    if (resil_pipeline_build(b, &pl, &err) != 0)
        fail_msg("%s", err.message);
    resil_pipeline_builder_free(b);
    char buf[4096];
    resil_pipeline_describe(pl, RESIL_DESCRIBE_TEXT, buf, sizeof buf);
    assert_non_null(strstr(buf, "  1. degradation levels=5 threshold.Minor=10 threshold.Moderate=30 "
                                "threshold.Major=50 threshold.Severe=70 threshold.Emergency=100\n"));
    assert_non_null(strstr(buf, "  2. rate-limiter kind=sliding-window permits=100 window=1s "
                                "max_wait=50ms\n"));
    assert_non_null(strstr(buf, "  3. fallback handle=default\n"));
    assert_non_null(strstr(buf, "  5. hedging delay=2s max_hedged=1 hedge_on=default workers=8 "
                                "wait_losers=false budget=none\n"));
    resil_pipeline_describe(pl, RESIL_DESCRIBE_JSON, buf, sizeof buf);
    assert_true(parses(buf));
    resil_pipeline_free(pl);
}

static bool trip_on_two(const resil_breaker_counts *c, void *ud)
{
    (void)ud;
    return c->failures >= 2;
}

static void a_count_window_breaker_with_a_predicate_describes_both(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO | RESIL_BREAKER_PREDICATE;
    o.trip = trip_on_two;
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    o.window_size = 50;
    o.minimum_throughput = 20;
    resil_pipeline_add_breaker(b, &o);
    resil_pipeline *pl;
    resil_err err = {0, ""};
    if (resil_pipeline_build(b, &pl, &err) != 0)
        fail_msg("%s", err.message);
    resil_pipeline_builder_free(b);
    char buf[4096];
    resil_pipeline_describe(pl, RESIL_DESCRIBE_TEXT, buf, sizeof buf);
    assert_non_null(strstr(buf, "  1. breaker source=options name=svc kind=ratio+predicate "
                                "failure_ratio=0.1 minimum_throughput=20 window=count "
                                "window_size=50 break_duration=5s half_open_probes=1 "
                                "success_threshold=1\n"));
    assert_null(strstr(buf, "sampling_duration"));
    resil_pipeline_free(pl);
}

/* The description of a pipeline built from `b` (freed), text form. */
static void described(resil_pipeline_builder *b, char *buf, size_t cap)
{
    resil_pipeline *pl;
    resil_err err = {0, ""};
    if (resil_pipeline_build(b, &pl, &err) != 0)
        fail_msg("%s", err.message);
    resil_pipeline_builder_free(b);
    resil_pipeline_describe(pl, RESIL_DESCRIBE_TEXT, buf, cap);
    resil_pipeline_free(pl);
}

static void a_token_bucket_describes_its_rate_period_and_burst(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_ratelimit_opts r;
    resil_ratelimit_opts_default(&r, RESIL_RATELIMIT_TOKEN_BUCKET);
    r.rate = 20;
    r.period = RESIL_S(2);
    r.burst = 5;
    resil_pipeline_add_rate_limiter(b, &r, 0);
    char buf[4096];
    described(b, buf, sizeof buf);
    assert_string_equal(buf, "pipeline svc: 1 strategy, outermost first\n"
                             "  1. rate-limiter kind=token-bucket rate=20 period=2s burst=5 "
                             "max_wait=0s\n");
}

static void a_retry_forever_with_proportional_jitter_describes_both(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_retry_policy p = retry_policy();
    p.max_attempts = RESIL_ATTEMPTS_FOREVER;
    p.backoff.jitter = RESIL_JITTER_PROPORTIONAL;
    p.backoff.jitter_fraction = 0.25;
    resil_pipeline_add_retry(b, &p);
    char buf[4096];
    described(b, buf, sizeof buf);
    assert_string_equal(buf, "pipeline svc: 1 strategy, outermost first\n"
                             "  1. retry max_attempts=forever retry_on=default "
                             "backoff=exponential base=1s factor=2 jitter=proportional "
                             "jitter_fraction=0.25 max_delay=30s max_total=none "
                             "retry_after=honor retry_after_max=1m unsafe_mode=refuse "
                             "budget=none\n");
}

static void a_consecutive_breaker_with_slow_calls_and_growing_breaks_describes_them(void **state)
{
    (void)state;
    resil_pipeline_builder *b = builder();
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = 3;
    o.slow_call_duration = RESIL_MS(800);
    o.slow_call_ratio = 0.5;
    o.break_growth = 2;
    o.max_break_duration = RESIL_S(60);
    resil_pipeline_add_breaker(b, &o);
    char buf[4096];
    described(b, buf, sizeof buf);
    assert_string_equal(buf, "pipeline svc: 1 strategy, outermost first\n"
                             "  1. breaker source=options name=svc kind=consecutive "
                             "failure_threshold=3 slow_call_duration=800ms slow_call_ratio=0.5 "
                             "break_duration=5s break_growth=2 max_break_duration=1m "
                             "half_open_probes=1 success_threshold=1\n");
}

static void a_registrys_breaker_describes_only_its_source(void **state)
{
    (void)state;
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    resil_registry *reg;
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    resil_pipeline_builder *b = builder();
    resil_pipeline_use_registry(b, reg);
    char buf[4096];
    described(b, buf, sizeof buf);
    assert_string_equal(buf, "pipeline svc: 1 strategy, outermost first\n"
                             "  1. breaker source=registry\n");
    resil_registry_free(reg);
}

static void per_operation_timeouts_are_counted_in_the_description(void **state)
{
    (void)state;
    resil_timeouts *per;
    assert_int_equal(resil_timeouts_new(RESIL_S(5), &per, NULL), 0);
    assert_int_equal(resil_timeouts_set(per, "read", RESIL_S(1), NULL), 0);
    assert_int_equal(resil_timeouts_set(per, "write", RESIL_S(3), NULL), 0);
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.per_operation = per;
    resil_pipeline_add_total_timeout(b, &t);
    char buf[4096];
    described(b, buf, sizeof buf);
    assert_string_equal(buf, "pipeline svc: 1 strategy, outermost first\n"
                             "  1. total-timeout timeout=30s per_operation=2\n");
    resil_timeouts_free(per);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipeline_name_must_be_1_to_63_bytes),
        cmocka_unit_test(shared_objects_must_not_be_null),
        cmocka_unit_test(listeners_are_limited_to_four_and_never_null),
        cmocka_unit_test(listening_needs_a_builder),
        cmocka_unit_test(a_metrics_sink_needs_a_builder),
        cmocka_unit_test(a_null_metrics_sink_sticks_to_the_builder),
        cmocka_unit_test(the_standard_strategies_need_a_builder),
        cmocka_unit_test(null_standard_options_stick_to_the_builder),
        cmocka_unit_test(the_standard_hedging_strategies_need_a_builder),
        cmocka_unit_test(null_standard_hedging_options_stick_to_the_builder),
        cmocka_unit_test(adding_chaos_needs_a_builder),
        cmocka_unit_test(null_rate_limiter_options_stick_to_the_builder),
        cmocka_unit_test(null_breaker_options_stick_to_the_builder),
        cmocka_unit_test(null_degradation_options_stick_to_the_builder),
        cmocka_unit_test(a_shared_rate_limiter_waiting_below_zero_is_refused_by_name),
        cmocka_unit_test(a_second_rate_limiter_is_refused),
        cmocka_unit_test(a_shared_rate_limiter_after_one_is_refused),
        cmocka_unit_test(a_second_bulkhead_is_refused),
        cmocka_unit_test(a_shared_bulkhead_after_one_is_refused),
        cmocka_unit_test(a_second_total_timeout_is_refused),
        cmocka_unit_test(a_second_attempt_timeout_is_refused),
        cmocka_unit_test(a_shared_breaker_after_one_is_refused),
        cmocka_unit_test(a_second_hedging_is_refused),
        cmocka_unit_test(a_second_fallback_is_refused),
        cmocka_unit_test(a_second_degradation_is_refused),
        cmocka_unit_test(a_shared_degradation_after_one_is_refused),
        cmocka_unit_test(bad_retry_policy_is_named),
        cmocka_unit_test(bad_timeouts_are_named),
        cmocka_unit_test(bad_bulkhead_is_named),
        cmocka_unit_test(bad_rate_limiter_is_named),
        cmocka_unit_test(bad_breaker_is_named),
        cmocka_unit_test(bad_hedging_is_named),
        cmocka_unit_test(fallback_needs_an_action),
        cmocka_unit_test(bad_degradation_options_are_named),
        cmocka_unit_test(bad_chaos_is_named),
        cmocka_unit_test(bad_adaptive_limiter_is_named),
        cmocka_unit_test(bad_throttle_is_named),
        cmocka_unit_test(each_kind_but_retry_appears_once),
        cmocka_unit_test(retry_appears_at_most_four_times),
        cmocka_unit_test(two_retries_build_in_order),
        cmocka_unit_test(a_total_timeout_must_come_before_every_retry),
        cmocka_unit_test(an_attempt_timeout_must_come_after_every_retry),
        cmocka_unit_test(first_error_sticks),
        cmocka_unit_test(timeouts_sit_on_their_side_of_the_retry),
        cmocka_unit_test(hedging_comes_after_retry_and_fallback),
        cmocka_unit_test(attempt_timeout_longer_than_the_total_is_refused),
        cmocka_unit_test(a_failed_build_stays_failed),
        cmocka_unit_test(a_builder_builds_once),
        cmocka_unit_test(standard_options_are_microsofts_defaults),
        cmocka_unit_test(a_standard_pipeline_name_of_64_bytes_is_refused_by_name),
        cmocka_unit_test(a_standard_hedging_pipeline_name_of_64_bytes_is_refused_by_name),
        cmocka_unit_test(standard_describes_its_order_options_and_worst_case),
        cmocka_unit_test(standard_hedging_options_are_microsofts_defaults),
        cmocka_unit_test(standard_hedging_builds_in_microsofts_order),
        cmocka_unit_test(json_description_parses_and_names_every_strategy),
        cmocka_unit_test(describe_measures_like_snprintf),
        cmocka_unit_test(worst_case_that_fits_the_total_gives_no_warning),
        cmocka_unit_test(retrying_forever_is_flagged),
        cmocka_unit_test(hedging_delay_past_the_attempt_timeout_is_flagged),
        cmocka_unit_test(every_kind_describes_itself),
        cmocka_unit_test(a_count_window_breaker_with_a_predicate_describes_both),
        cmocka_unit_test(a_token_bucket_describes_its_rate_period_and_burst),
        cmocka_unit_test(a_retry_forever_with_proportional_jitter_describes_both),
        cmocka_unit_test(a_consecutive_breaker_with_slow_calls_and_growing_breaks_describes_them),
        cmocka_unit_test(a_registrys_breaker_describes_only_its_source),
        cmocka_unit_test(per_operation_timeouts_are_counted_in_the_description),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
