/*
 * test_gateway_breaker.c — `resil gateway --breaker-failures N
 * --breaker-break DUR` without --fleet: the upstream gets a circuit breaker
 * of this gateway's own, which opens on the failures it sees and then
 * answers 503 with Retry-After without calling the upstream. The shared
 * breaker (--fleet) is tested with Redis in tests/redis.
 */
#include "gateway_proc.h"
#include "test.h"
#include "upstream.h"

typedef struct env {
    char *dir;
    upstream *up;
    gateway_proc gw;
    char orders[128];
} env;

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dir = test_tmpdir();
    e->up = upstream_start();
    if (e->dir == NULL || e->up == NULL)
        return -1;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    if (e->gw.pid > 0)
        gateway_stop(&e->gw);
    upstream_stop(e->up);
    test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

static void start_gateway(env *e, const char *const extra[])
{
    char store[600], log[600];
    snprintf(store, sizeof store, "sqlite:%s/gateway.db", e->dir);
    snprintf(log, sizeof log, "%s/gateway.log", e->dir);
    const char *args[16] = {"--upstream", upstream_url(e->up), "--store", store};
    size_t n = 4;
    for (size_t i = 0; extra[i] != NULL; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    if (gateway_start(&e->gw, test_build_path("resil"), log, args) != 0)
        fail_msg("the gateway did not start");
    snprintf(e->orders, sizeof e->orders, "%s/orders", e->gw.url);
}

static long get_status(const env *e, http_reply *r)
{
    assert_int_equal(http_request("GET", e->orders, NULL, NULL, r), 0);
    return r->status;
}

static void failures_in_a_row(env *e, unsigned n)
{
    upstream_fail_next(e->up, n, 503);
    for (unsigned i = 0; i < n; i++) {
        http_reply r;
        assert_int_equal(get_status(e, &r), 503);
        http_reply_free(&r);
    }
}

static void the_gateways_own_breaker_opens_and_spares_the_upstream(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--breaker-failures", "2", "--breaker-break", "10m", NULL};
    start_gateway(e, extra);
    failures_in_a_row(e, 2);
    assert_int_equal(upstream_requests(e->up), 2);

    http_reply r;
    assert_int_equal(get_status(e, &r), 503);
    char retry[32];
    assert_true(http_reply_header(&r, "Retry-After", retry, sizeof retry));
    long s = strtol(retry, NULL, 10);
    assert_true(s >= 599 && s <= 600);
    if (r.body == NULL || strstr(r.body, "\"circuit_open\"") == NULL)
        fail_msg("not the breaker's answer: %s", r.body ? r.body : "(no body)");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

static void a_success_between_failures_keeps_it_closed(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--breaker-failures", "2", NULL};
    start_gateway(e, extra);
    failures_in_a_row(e, 1);
    http_reply r;
    assert_int_equal(get_status(e, &r), 200);
    http_reply_free(&r);
    failures_in_a_row(e, 1);
    assert_int_equal(get_status(e, &r), 200);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 4);
}

static void without_a_breaker_flag_every_request_reaches_the_upstream(void **state)
{
    env *e = *state;
    const char *const extra[] = {NULL};
    start_gateway(e, extra);
    failures_in_a_row(e, 5);
    http_reply r;
    assert_int_equal(get_status(e, &r), 200);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 6);
}

/* Run `resil gateway ARGS` to completion: 125 with `text` on stderr. */
static void expect_usage(const char *text, const char *const args[])
{
    const char *argv[16] = {"gateway", "--listen", "127.0.0.1:0", "--upstream",
                            "http://127.0.0.1:9"};
    size_t n = 5;
    for (size_t i = 0; args[i] != NULL; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char err[4096];
    int rc = run_capture(test_build_path("resil"), argv, err, sizeof err);
    if (strstr(err, text) == NULL)
        fail_msg("expected '%s' in:\n%s", text, err);
    assert_int_equal(rc, 125);
}

static void breaker_flags_are_checked_by_name_without_fleet(void **state)
{
    (void)state;
    const char *const zero[] = {"--breaker-failures", "0", NULL};
    expect_usage("--breaker-failures", zero);
    const char *const word[] = {"--breaker-failures", "many", NULL};
    expect_usage("--breaker-failures", word);
    const char *const brk[] = {"--breaker-break", "0", NULL};
    expect_usage("--breaker-break", brk);
    const char *const unit[] = {"--breaker-break", "5 minutes", NULL};
    expect_usage("--breaker-break", unit);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, env_setup, env_teardown)
        T(the_gateways_own_breaker_opens_and_spares_the_upstream),
        T(a_success_between_failures_keeps_it_closed),
        T(without_a_breaker_flag_every_request_reaches_the_upstream),
#undef T
        cmocka_unit_test(breaker_flags_are_checked_by_name_without_fleet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
