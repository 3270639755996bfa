/*
 * test_gateway_fleet.c — `resil gateway --fleet`: gateways in front of one
 * upstream share its circuit breaker through a real Redis, so the failures
 * one gateway saw open the breaker for another, which then answers 503
 * with Retry-After without calling the upstream; and the fleet rate limit
 * and concurrency limit (--fleet-rate, --fleet-concurrency) bound every
 * gateway together.
 */
#include "fleet_test.h"

#ifdef RESIL_TEST_GATEWAY_FLEET
#include "gateway_env.h"
#include "gateway_proc.h"
#include "upstream.h"

typedef struct env {
    char *dir;
    upstream *up;
    gateway_proc a, b;
    char name[64]; /* the breaker's: the upstream's authority */
} env;

static int env_setup(void **state)
{
    if (fleet_flush(state) != 0)
        return -1;
    env *e = calloc(1, sizeof *e);
    e->dir = test_tmpdir();
    e->up = upstream_start();
    if (e->dir == NULL || e->up == NULL)
        return -1;
    snprintf(e->name, sizeof e->name, "127.0.0.1:%d", upstream_port(e->up));
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    if (e->a.pid > 0)
        gateway_stop(&e->a);
    if (e->b.pid > 0)
        gateway_stop(&e->b);
    upstream_stop(e->up);
    test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

/* A gateway with its own store, sharing the upstream's breaker: two
 * failures in a row open it, for ten minutes. Each gateway waits up to 5 s
 * for Redis (--fleet-timeout): past the 50 ms default a loaded machine would
 * let it decide alone, which is the offline rule, not what these tests pin. */
static void start_gateway(env *e, gateway_proc *g, const char *tag)
{
    char store[600], log[600];
    snprintf(store, sizeof store, "sqlite:%s/%s.db", e->dir, tag);
    snprintf(log, sizeof log, "%s/%s.log", e->dir, tag);
    const char *args[] = {"--upstream", upstream_url(e->up), "--store", store,
                          "--fleet", redis_server_url(fleet_server), "--fleet-timeout", "5s",
                          "--breaker-failures", "2", "--breaker-break", "10m", NULL};
    if (gateway_start(g, test_build_path("resil"), log, args) != 0)
        fail_msg("gateway %s did not start", tag);
}

static resil_breaker_state fleet_state(resil_redis *r, const char *name)
{
    resil_redis_breaker_status s;
    resil_err err;
    if (resil_redis_status_get(r, name, &s, &err) != 0)
        return RESIL_BREAKER_CLOSED; /* not written yet */
    return s.state;
}

/* Two failures through gateway A; then wait until Redis holds the breaker
 * open (A's counts are flushed by its sync thread) and start gateway B. */
static void open_through_a_then_start_b(env *e)
{
    start_gateway(e, &e->a, "a");
    upstream_fail_next(e->up, 2, 503);
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->a.url);
    for (int i = 0; i < 2; i++) {
        http_reply r;
        assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
        assert_int_equal(r.status, 503);
        http_reply_free(&r);
    }
    assert_int_equal(upstream_requests(e->up), 2);
    resil_redis *r = fleet_client(NULL);
    fleet_wait_until(fleet_state(r, e->name) == RESIL_BREAKER_OPEN);
    assert_int_equal(fleet_state(r, e->name), RESIL_BREAKER_OPEN);
    resil_redis_free(r);
    start_gateway(e, &e->b, "b");
}

static void assert_refused_by_breaker(const http_reply *r)
{
    assert_int_equal(r->status, 503);
    char retry[32];
    assert_true(http_reply_header(r, "Retry-After", retry, sizeof retry));
    long s = strtol(retry, NULL, 10);
    assert_true(s >= 1 && s <= 600);
    if (r->body == NULL || strstr(r->body, "\"circuit_open\"") == NULL)
        fail_msg("not the breaker's answer: %s", r->body ? r->body : "(no body)");
}

static void failures_through_one_gateway_open_the_breaker_for_another(void **state)
{
    env *e = *state;
    open_through_a_then_start_b(e);
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->b.url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_refused_by_breaker(&r);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

static void a_guarded_request_the_breaker_refused_releases_its_key(void **state)
{
    env *e = *state;
    open_through_a_then_start_b(e);
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->b.url);
    const char *const key[] = {"Idempotency-Key: order-1", NULL};
    http_reply r;
    assert_int_equal(http_request("POST", url, key, "{}", &r), 0);
    assert_refused_by_breaker(&r);
    http_reply_free(&r);
    assert_int_equal(upstream_key_requests(e->up, "order-1"), 0);

    /* An operator closes it; once gateway B has heard, the same key runs
     * upstream as a first request: the refusal kept nothing. */
    resil_redis *rc = fleet_client(NULL);
    resil_err err;
    assert_int_equal(resil_redis_control(rc, e->name, RESIL_REDIS_CLOSE, &err), 0);
    resil_redis_free(rc);
    int64_t until = fleet_mono_ms() + FLEET_PATIENCE_MS;
    for (;;) {
        assert_int_equal(http_request("POST", url, key, "{}", &r), 0);
        if (r.status != 503 || fleet_mono_ms() > until)
            break;
        http_reply_free(&r);
        fleet_sleep_ms(10);
    }
    assert_int_equal(r.status, 201);
    char replayed[16];
    assert_false(http_reply_header(&r, "Idempotent-Replayed", replayed, sizeof replayed));
    http_reply_free(&r);
    assert_int_equal(upstream_key_requests(e->up, "order-1"), 1);
    assert_int_equal(upstream_requests(e->up), 3);
}

/* A gateway with its own store and the fleet limits `limits` (two args). */
static void start_limited(env *e, gateway_proc *g, const char *tag, const char *flag,
                          const char *value)
{
    char store[600], log[600];
    snprintf(store, sizeof store, "sqlite:%s/%s.db", e->dir, tag);
    snprintf(log, sizeof log, "%s/%s.log", e->dir, tag);
    const char *args[] = {"--upstream", upstream_url(e->up), "--store", store,
                          "--fleet", redis_server_url(fleet_server), "--fleet-timeout", "5s",
                          flag, value, NULL};
    if (gateway_start(g, test_build_path("resil"), log, args) != 0)
        fail_msg("gateway %s did not start", tag);
}

static void get(const gateway_proc *g, http_reply *r)
{
    char url[128];
    snprintf(url, sizeof url, "%s/orders", g->url);
    assert_int_equal(http_request("GET", url, NULL, NULL, r), 0);
}

static void assert_refused_with(const http_reply *r, const char *code, long min_s, long max_s)
{
    assert_int_equal(r->status, 503);
    char retry[32];
    assert_true(http_reply_header(r, "Retry-After", retry, sizeof retry));
    long s = strtol(retry, NULL, 10);
    if (s < min_s || s > max_s)
        fail_msg("Retry-After %ld, expected %ld..%ld", s, min_s, max_s);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", code);
    if (r->body == NULL || strstr(r->body, quoted) == NULL)
        fail_msg("not %s: %s", code, r->body ? r->body : "(no body)");
}

static void a_rate_spent_through_one_gateway_refuses_another(void **state)
{
    env *e = *state;
    start_limited(e, &e->a, "a", "--fleet-rate", "1/h");
    start_limited(e, &e->b, "b", "--fleet-rate", "1/h");
    http_reply r;
    get(&e->a, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    get(&e->b, &r);
    assert_refused_with(&r, "fleet_rate_limited", 3500, 3600);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* The fleet's one concurrency permit for the upstream, taken by a client
 * of the test's own, outside every gateway. */
typedef struct outside {
    resil_redis *rc;
    resil_bulkhead *limit;
    resil_bulkhead_ticket t;
} outside;

static void hold_the_permit(env *e, outside *o)
{
    o->rc = fleet_client(NULL);
    resil_redis_concurrency_opts co;
    resil_redis_concurrency_opts_default(&co);
    co.name = e->name;
    co.max_concurrency = 1;
    co.lease = RESIL_S(60);
    o->limit = NULL;
    assert_int_equal(resil_redis_concurrency_new(o->rc, &co, &o->limit, NULL), 0);
    o->t = (resil_bulkhead_ticket){0};
    assert_int_equal(resil_bulkhead_try_acquire(o->limit, &o->t), 0);
}

static void outside_free(outside *o)
{
    resil_bulkhead_release(&o->t);
    resil_bulkhead_free(o->limit);
    resil_redis_free(o->rc);
}

static void a_concurrency_permit_held_elsewhere_refuses_the_gateway(void **state)
{
    env *e = *state;
    outside o;
    hold_the_permit(e, &o);

    start_limited(e, &e->a, "a", "--fleet-concurrency", "1");
    http_reply r;
    get(&e->a, &r);
    assert_refused_with(&r, "fleet_concurrency_full", 1, 1);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);

    resil_bulkhead_release(&o.t);
    get(&e->a, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
    /* the gateway gave its permit back after the call */
    assert_int_equal(resil_bulkhead_try_acquire(o.limit, &o.t), 0);
    outside_free(&o);
}

/* A keyed request goes through the fleet's concurrency limit once its key
 * is claimed: refused there, it gives the key back (the same key later runs
 * upstream as a first request); admitted, it runs once, and its answer is
 * replayed without a permit. */
static void a_keyed_request_the_fleet_limit_refused_gives_its_key_back(void **state)
{
    env *e = *state;
    outside o;
    hold_the_permit(e, &o);

    start_limited(e, &e->a, "a", "--fleet-concurrency", "1");
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->a.url);
    const char *const key[] = {"Idempotency-Key: order-9", NULL};
    http_reply r;
    assert_int_equal(http_request("POST", url, key, "{}", &r), 0);
    assert_refused_with(&r, "fleet_concurrency_full", 1, 1);
    http_reply_free(&r);
    assert_int_equal(upstream_key_requests(e->up, "order-9"), 0);

    resil_bulkhead_release(&o.t);
    assert_int_equal(http_request("POST", url, key, "{}", &r), 0);
    assert_int_equal(r.status, 201);
    char v[16];
    assert_false(http_reply_header(&r, "Idempotent-Replayed", v, sizeof v));
    http_reply_free(&r);
    /* the permit again held elsewhere: the replay needs none */
    assert_int_equal(resil_bulkhead_try_acquire(o.limit, &o.t), 0);
    assert_int_equal(http_request("POST", url, key, "{}", &r), 0);
    assert_int_equal(r.status, 201);
    assert_true(http_reply_header(&r, "Idempotent-Replayed", v, sizeof v));
    assert_string_equal(v, "true");
    http_reply_free(&r);
    assert_int_equal(upstream_key_requests(e->up, "order-9"), 1);
    outside_free(&o);
}

static void fleet_options_are_checked_by_name(void **state)
{
    (void)state;
    const char *const scheme[] = {"--fleet", "memory://here", NULL};
    gateway_expect_usage("resil gateway: --fleet must be a redis:// URL, got 'memory://here'",
                         scheme);
    const char *const zero[] = {"--fleet", "redis://127.0.0.1:1", "--breaker-failures", "0",
                                NULL};
    gateway_expect_usage("--breaker-failures", zero);
    const char *const rate_alone[] = {"--fleet-rate", "10/s", NULL};
    gateway_expect_usage("resil gateway: --fleet-rate and --fleet-concurrency need --fleet",
                         rate_alone);
    const char *const rate[] = {"--fleet", "redis://127.0.0.1:1", "--fleet-rate", "10", NULL};
    gateway_expect_usage("resil gateway: --fleet-rate must be RATE/PER[:BURST]", rate);
    const char *const conc[] = {"--fleet", "redis://127.0.0.1:1", "--fleet-concurrency", "0",
                                NULL};
    gateway_expect_usage("resil gateway: --fleet-concurrency must be N[:LEASE]", conc);
    const char *const timeout_alone[] = {"--fleet-timeout", "1s", NULL};
    gateway_expect_usage("resil gateway: --fleet-timeout needs --fleet", timeout_alone);
    const char *const too_long[] = {"--fleet", "redis://127.0.0.1:1", "--fleet-timeout", "11s",
                                    NULL};
    gateway_expect_usage("resil gateway: --fleet-timeout must be a duration from 1ms to 10s",
                         too_long);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, env_setup, env_teardown)
        T(failures_through_one_gateway_open_the_breaker_for_another),
        T(a_guarded_request_the_breaker_refused_releases_its_key),
        T(a_rate_spent_through_one_gateway_refuses_another),
        T(a_concurrency_permit_held_elsewhere_refuses_the_gateway),
        T(a_keyed_request_the_fleet_limit_refused_gives_its_key_back),
#undef T
        cmocka_unit_test(fleet_options_are_checked_by_name),
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
#else
/* Built without the gateway or the tool: nothing to run. */
static void needs_the_gateway_and_the_tool(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(needs_the_gateway_and_the_tool)};
    return cmocka_run_tests(tests);
}
#endif
