/*
 * test_fleet_seam.c — the fleet breaker where any breaker goes: made by a
 * registry's factory by key, run inside a standard pipeline, reported by
 * telemetry and metrics, and refused politely by the Redis-only accessors
 * when handed another breaker.
 */
#include "fleet_test.h"

static int flush_each(void **state) { return fleet_flush(state); }

static resil_registry *fleet_registry(resil_redis_factory *factory, resil_fake_clock *fc)
{
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    o.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    o.breaker.failure_threshold = 2;
    o.breaker.clock = resil_fake_clock_clock(fc);
    o.factory = resil_redis_breaker_factory;
    o.factory_ud = factory;
    resil_registry *r = NULL;
    resil_err err;
    int rc = resil_registry_new(&o, &r, &err);
    if (rc != 0)
        fprintf(stderr, "fleet_registry: %s\n", err.message);
    assert_int_equal(rc, 0);
    return r;
}

static resil_breaker *key(resil_registry *r, const char *name)
{
    resil_breaker *b = NULL;
    assert_int_equal(resil_registry_get(r, name, NULL, &b, NULL), 0);
    return b;
}

static void a_registry_with_the_redis_factory_shares_each_key_across_instances(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *ra = fleet_client(NULL), *rb = fleet_client(NULL);
    resil_redis_factory fa = {.client = ra}, fb = {.client = rb};
    resil_registry *a = fleet_registry(&fa, fc), *b = fleet_registry(&fb, fc);

    resil_breaker *orders_a = key(a, "orders"), *orders_b = key(b, "orders");
    assert_true(resil_redis_breaker_is(orders_a));
    assert_string_equal(resil_breaker_kind_name(orders_a), "redis");
    fleet_calls(orders_a, 2, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(ra), 0);
    assert_int_equal(resil_breaker_state_of(orders_a), RESIL_BREAKER_OPEN);
    fleet_wait_until(resil_breaker_state_of(orders_b) == RESIL_BREAKER_OPEN);

    resil_breaker *billing_b = key(b, "billing"); /* another key, another shared breaker */
    assert_int_equal(resil_breaker_state_of(billing_b), RESIL_BREAKER_CLOSED);

    resil_breaker_free(orders_a);
    resil_breaker_free(orders_b);
    resil_breaker_free(billing_b);
    resil_registry_free(a);
    resil_registry_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
    resil_fake_clock_free(fc);
}

static resil_outcome failing(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_fail(RESIL_TRANSIENT, 503, "unavailable");
}

static void a_pipeline_is_refused_by_the_fleet_breaker_another_instance_opened(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *ra = fleet_client(NULL), *rb = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("payments", 1, fc);
    resil_breaker *a = fleet_breaker(ra, &o), *b = fleet_breaker(rb, &o);

    resil_pipeline_builder *pb = NULL;
    assert_int_equal(resil_pipeline_builder_new("payments", &pb, NULL), 0);
    resil_pipeline_builder_clock(pb, resil_fake_clock_clock(fc));
    assert_int_equal(resil_pipeline_use_breaker(pb, b), 0);
    resil_pipeline *p = NULL;
    assert_int_equal(resil_pipeline_build(pb, &p, NULL), 0);
    resil_pipeline_builder_free(pb);

    fleet_calls(a, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(ra), 0);
    fleet_wait_until(resil_breaker_state_of(b) == RESIL_BREAKER_OPEN);

    resil_pipeline_result res;
    assert_int_equal(resil_pipeline_execute(p, failing, NULL, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(res.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_string_equal(res.outcome.detail, "circuit open");

    resil_pipeline_free(p);
    resil_breaker_free(a);
    resil_breaker_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
    resil_fake_clock_free(fc);
}

static void telemetry_and_metrics_report_a_fleet_breaker(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_metrics *m = NULL;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);
    resil_listener to_metrics = {.fn = resil_metrics_on_event, .ud = m, .pipeline = "checkout"};
    resil_redis_breaker_opts o = fleet_consecutive("payments", 1, fc);
    o.rules.listener = resil_telemetry_breaker_listener;
    o.rules.listener_ud = &to_metrics;
    resil_breaker *b = fleet_breaker(r, &o);
    assert_int_equal(resil_metrics_watch_breaker(m, "checkout", b, NULL), 0);

    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(
        resil_metrics_event_count(m, "checkout", "breaker", RESIL_EVENT_BREAKER_OPENED), 1);
    char *text = NULL;
    assert_int_equal(resil_metrics_prometheus_string(m, &text, NULL), 0);
    assert_non_null(strstr(text, "resilience_circuit_breaker_state{pipeline_name=\"checkout\",breaker_name=\"payments\"} 1\n"));
    free(text);

    resil_metrics_unwatch(m, NULL);
    resil_breaker_free(b);
    resil_metrics_free(m);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void redis_accessors_refuse_other_breakers(void **state)
{
    (void)state;
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    resil_breaker *local = NULL;
    assert_int_equal(resil_breaker_new(&o, &local, NULL), 0);
    resil_redis_breaker_status st;
    assert_int_equal(resil_redis_breaker_status_get(local, &st), RESIL_EINVAL);
    assert_null(resil_redis_breaker_fallback(local));
    assert_false(resil_redis_breaker_is(local));
    assert_false(resil_redis_breaker_is(NULL));
    resil_breaker_free(local);
}

static void a_fleet_breaker_has_no_disabled_state(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("no-disable", 1, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    assert_int_equal(resil_breaker_disable(b), RESIL_EINVAL);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

#define T(name) cmocka_unit_test_setup(name, flush_each)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_registry_with_the_redis_factory_shares_each_key_across_instances),
        T(a_pipeline_is_refused_by_the_fleet_breaker_another_instance_opened),
        T(telemetry_and_metrics_report_a_fleet_breaker),
        T(redis_accessors_refuse_other_breakers),
        T(a_fleet_breaker_has_no_disabled_state),
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
