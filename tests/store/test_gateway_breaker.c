/*
 * test_gateway_breaker.c — `resil gateway --breaker-failures N
 * --breaker-break DUR` without --fleet: the upstream gets a circuit breaker
 * of this gateway's own, which opens on the failures it sees and then
 * answers 503 with Retry-After without calling the upstream. The shared
 * breaker (--fleet) is tested with Redis in tests/redis.
 */
#include "gateway_env.h"

typedef gateway_env env;

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
    gateway_env_start(e, extra);
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
    gateway_env_start(e, extra);
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
    gateway_env_start(e, extra);
    failures_in_a_row(e, 5);
    http_reply r;
    assert_int_equal(get_status(e, &r), 200);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 6);
}

static void breaker_flags_are_checked_by_name_without_fleet(void **state)
{
    (void)state;
    const char *const zero[] = {"--breaker-failures", "0", NULL};
    gateway_expect_usage("--breaker-failures", zero);
    const char *const word[] = {"--breaker-failures", "many", NULL};
    gateway_expect_usage("--breaker-failures", word);
    const char *const brk[] = {"--breaker-break", "0", NULL};
    gateway_expect_usage("--breaker-break", brk);
    const char *const unit[] = {"--breaker-break", "5 minutes", NULL};
    gateway_expect_usage("--breaker-break", unit);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, gateway_env_setup, gateway_env_teardown)
        T(the_gateways_own_breaker_opens_and_spares_the_upstream),
        T(a_success_between_failures_keeps_it_closed),
        T(without_a_breaker_flag_every_request_reaches_the_upstream),
#undef T
        cmocka_unit_test(breaker_flags_are_checked_by_name_without_fleet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
