/*
 * test_gateway_chaos.c — `resil gateway --chaos-*` as a user runs it: a
 * real gateway process in front of the counting upstream. An injected
 * status (with Retry-After) reaches the client and never the upstream; a
 * drop closes the connection unanswered; an injected latency delays a
 * request that then goes on (the answer arrives and the upstream saw it:
 * no timings are asserted); a key refused by chaos is a first request on
 * its retry; a seed replays the same pattern, the one the library's own
 * strategy draws for it; SIGUSR2 stops and restarts injection; /metrics
 * and the access log count every injection. The decisions themselves are
 * tested without a server in tests/gateway/test_chaos.c.
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "gateway_env.h"

typedef gateway_env env;

/* The gateway's line about a signal it acts on, on its own thread. */
static void wait_for_log(const env *e, const char *text)
{
    if (!gateway_log_shows(&e->gw, text))
        fail_msg("the gateway never logged '%s'", text);
}

static long post(const env *e, const char *key, http_reply *r)
{
    char header[300];
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
    const char *const headers[] = {header, "Content-Type: application/json", NULL};
    assert_int_equal(http_request("POST", e->orders, key ? headers : NULL, "{\"item\":1}", r),
                     0);
    return r->status;
}

static long get(const env *e)
{
    http_reply r;
    if (http_request("GET", e->orders, NULL, NULL, &r) != 0)
        fail_msg("GET %s: no answer (curl error %d)", e->orders, r.curl_code);
    long status = r.status;
    http_reply_free(&r);
    return status;
}

static void header_is(const http_reply *r, const char *name, const char *want)
{
    char got[128];
    assert_true(http_reply_header(r, name, got, sizeof got));
    assert_string_equal(got, want);
}

static void an_injected_status_reaches_the_client_with_retry_after_and_not_the_upstream(
    void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-status", "1:503:30", NULL});
    http_reply r;
    assert_int_equal(post(e, "k-status", &r), 503);
    header_is(&r, "Retry-After", "30");
    assert_non_null(r.body);
    assert_non_null(strstr(r.body, "\"error\":\"chaos_status\""));
    http_reply_free(&r);
    assert_int_equal(get(e), 503);
    assert_int_equal(upstream_requests(e->up), 0);
    assert_true(gateway_log_contains(&e->gw, "\"POST /orders\" 503 "));
    assert_true(gateway_log_contains(&e->gw, "idempotency=chaos chaos=status:503\n"));
}

static void a_status_without_retry_after_has_none(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-status", "1:429", NULL});
    http_reply r;
    assert_int_equal(post(e, NULL, &r), 429);
    char got[32];
    assert_false(http_reply_header(&r, "Retry-After", got, sizeof got));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

static void a_dropped_connection_is_closed_without_an_answer(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-drop", "1", NULL});
    static const char request[] = "POST /orders HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: k-drop"
                                  "\r\nContent-Length: 2\r\n\r\n{}";
    char reply[1024];
    bool closed = false;
    assert_int_equal(raw_exchange(e->gw.port, request, sizeof request - 1, reply, sizeof reply,
                                  5000, &closed),
                     0);
    assert_true(closed);
    assert_string_equal(reply, "");
    http_reply r;
    assert_int_not_equal(http_request("GET", e->orders, NULL, NULL, &r), 0);
    assert_int_equal(r.curl_code, CURLE_GOT_NOTHING);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
    assert_true(gateway_log_contains(&e->gw, "\"POST /orders\" - 0 "));
    assert_true(gateway_log_contains(&e->gw, "idempotency=chaos chaos=drop\n"));
}

/* The wait is the loop's timer: the answer arrives, from the upstream. */
static void an_injected_latency_delays_a_request_that_then_goes_upstream(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-latency", "1:100ms", NULL});
    http_reply r;
    assert_int_equal(post(e, "k-slow", &r), 201);
    assert_non_null(strstr(r.body, "\"n\":1"));
    http_reply_free(&r);
    assert_int_equal(get(e), 200);
    assert_int_equal(upstream_requests(e->up), 2);
    assert_true(gateway_log_contains(&e->gw, "idempotency=first chaos=latency:100ms\n"));
    assert_true(gateway_log_contains(&e->gw, "idempotency=none chaos=latency:100ms\n"));
}

static void a_latency_then_a_status_or_a_drop_never_reaches_the_upstream(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-latency", "1:50ms", "--chaos-status",
                                      "1:429:7", NULL});
    http_reply r;
    assert_int_equal(post(e, "k-slow-429", &r), 429);
    header_is(&r, "Retry-After", "7");
    http_reply_free(&r);
    assert_int_equal(gateway_stop(&e->gw), 0);
    gateway_env_start(e, (const char *[]){"--chaos-latency", "1:50ms", "--chaos-drop", "1", NULL});
    assert_int_not_equal(http_request("GET", e->orders, NULL, NULL, &r), 0);
    assert_int_equal(r.curl_code, CURLE_GOT_NOTHING);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
    assert_true(gateway_log_contains(&e->gw, "idempotency=chaos chaos=latency:50ms,drop\n"));
}

/* Chaos acts before the store is asked: the key was never claimed, so
 * the retry runs once upstream, and its repeat is the saved answer. */
static void a_key_refused_by_chaos_is_a_first_request_on_its_retry(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-status", "1:503:1", NULL});
    http_reply r;
    assert_int_equal(post(e, "k-retry", &r), 503);
    http_reply_free(&r);
    kill(e->gw.pid, SIGUSR2);
    wait_for_log(e, "SIGUSR2: chaos off");
    assert_int_equal(post(e, "k-retry", &r), 201);
    char got[16];
    assert_false(http_reply_header(&r, "Idempotent-Replayed", got, sizeof got));
    http_reply_free(&r);
    assert_int_equal(post(e, "k-retry", &r), 201);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    assert_int_equal(upstream_key_requests(e->up, "k-retry"), 1);
    assert_true(gateway_log_contains(&e->gw, "idempotency=first\n"));
}

static void sigusr2_switches_every_injection_off_and_on_again(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-status", "1:500", "--chaos-drop", "0",
                                      "--chaos-latency", "1:10ms", NULL});
    assert_int_equal(get(e), 500);
    kill(e->gw.pid, SIGUSR2);
    wait_for_log(e, "resil gateway: SIGUSR2: chaos off (2 injected so far)");
    for (int i = 0; i < 5; i++)
        assert_int_equal(get(e), 200);
    assert_int_equal(upstream_requests(e->up), 5);
    kill(e->gw.pid, SIGUSR2);
    wait_for_log(e, "resil gateway: SIGUSR2: chaos on again (2 injected so far)");
    assert_int_equal(get(e), 500);
    assert_int_equal(upstream_requests(e->up), 5);
}

/* The statuses of n GETs through a gateway started with `args`. */
static void pattern(env *e, const char *const args[], long *out, int n)
{
    gateway_env_start(e, args);
    for (int i = 0; i < n; i++)
        out[i] = get(e);
    assert_int_equal(gateway_stop(&e->gw), 0);
}

/* The same seed, the same requests injected; and the ones the library's
 * fault strategy picks for that seed (--chaos-status draws at seed + 1, as
 * resil run's --chaos-fail does). */
static void a_seed_replays_the_same_pattern(void **state)
{
    env *e = *state;
    enum { N = 24 };
    const char *const args[] = {"--chaos-status", "0.5:503", "--chaos-seed", "11", NULL};
    long first[N], second[N];
    pattern(e, args, first, N);
    pattern(e, args, second, N);
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.5;
    o.seed = 12;
    resil_chaos *k;
    resil_err err = {0, ""};
    assert_int_equal(resil_chaos_new(&o, &k, &err), 0);
    unsigned passed = 0;
    for (int i = 0; i < N; i++) {
        long want = resil_chaos_decide(k) ? 503 : 200;
        assert_int_equal(first[i], want);
        assert_int_equal(second[i], want);
        passed += want == 200;
    }
    resil_chaos_free(k);
    assert_true(passed > 0 && passed < N);
    assert_int_equal(upstream_requests(e->up), 2 * passed);
    assert_true(gateway_log_contains(&e->gw, "resil gateway: chaos on: status 0.5:503 "
                                             "(--chaos-seed 11 replays it;"));
}

static void every_injection_is_counted_in_metrics(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-status", "1:503:2", "--chaos-latency",
                                      "1:10ms", NULL});
    http_reply r;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(post(e, NULL, &r), 503);
        http_reply_free(&r);
    }
    char url[160];
    snprintf(url, sizeof url, "%s/metrics", e->gw.url);
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    static const char *const want[] = {
        "resilience_polly_strategy_events_total{event_name=\"Chaos.OnFault\","
        "event_severity=\"Warning\",pipeline_name=\"gateway\",strategy_name=\"chaos-fault\","
        "exception_type=\"transient\"} 3\n",
        "resilience_polly_strategy_events_total{event_name=\"Chaos.OnLatency\","
        "event_severity=\"Warning\",pipeline_name=\"gateway\","
        "strategy_name=\"chaos-latency\"} 3\n",
        "resilience_idempotency_requests_total{http_request_method=\"POST\","
        "idempotency_outcome=\"chaos\",http_response_status_code=\"503\","
        "error_type=\"chaos_status\"} 3\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (strstr(r.body, want[i]) == NULL)
            fail_msg("missing %s in:\n%s", want[i], r.body);
    http_reply_free(&r);
}

static bool metrics_count_a_latency(void *ud)
{
    const env *e = ud;
    char url[160];
    snprintf(url, sizeof url, "%s/metrics", e->gw.url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    bool shown = strstr(r.body, "event_name=\"Chaos.OnLatency\"") != NULL;
    http_reply_free(&r);
    return shown;
}

/* Whether /metrics comes to count a Chaos.OnLatency event (test_wait_until). */
static bool metrics_show_a_latency(const env *e)
{
    return test_wait_until(metrics_count_a_latency, (void *)e, 5);
}

/* SIGTERM while a request waits out an injected latency longer than the
 * grace: it is closed unanswered, and the gateway stops cleanly. */
static void a_request_still_waiting_at_shutdown_is_closed(void **state)
{
    env *e = *state;
    gateway_env_start(e, (const char *[]){"--chaos-latency", "1:1h", "--timeout", "1s", NULL});
    int fd = raw_connect(e->gw.port, NULL);
    assert_true(fd >= 0);
    static const char request[] = "GET /orders HTTP/1.1\r\nHost: gw\r\n\r\n";
    assert_int_equal(write(fd, request, sizeof request - 1), (ssize_t)(sizeof request - 1));
    assert_true(metrics_show_a_latency(e));
    assert_int_equal(gateway_stop(&e->gw), 0);
    char reply[256];
    assert_true(raw_read_until_closed(fd, reply, sizeof reply, 5000));
    assert_string_equal(reply, "");
    close(fd);
    assert_int_equal(upstream_requests(e->up), 0);
}

static void chaos_flags_are_checked_by_name_at_start(void **state)
{
    (void)state;
    gateway_expect_usage("resil gateway: --chaos-status must be RATE:CODE[:RETRY_AFTER]",
                 (const char *[]){"--chaos-status", "0.1:200", NULL});
    gateway_expect_usage("resil gateway: --chaos-latency must be RATE:DURATION",
                 (const char *[]){"--chaos-latency", "2s", NULL});
    gateway_expect_usage("resil gateway: --chaos-drop must be a rate in [0, 1], got '-1'",
                 (const char *[]){"--chaos-drop", "-1", NULL});
    gateway_expect_usage("resil gateway: --chaos-seed needs --chaos-status, --chaos-latency or "
                 "--chaos-drop",
                 (const char *[]){"--chaos-seed", "5", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, gateway_env_setup, gateway_env_teardown)
        T(an_injected_status_reaches_the_client_with_retry_after_and_not_the_upstream),
        T(a_status_without_retry_after_has_none),
        T(a_dropped_connection_is_closed_without_an_answer),
        T(an_injected_latency_delays_a_request_that_then_goes_upstream),
        T(a_latency_then_a_status_or_a_drop_never_reaches_the_upstream),
        T(a_key_refused_by_chaos_is_a_first_request_on_its_retry),
        T(sigusr2_switches_every_injection_off_and_on_again),
        T(a_seed_replays_the_same_pattern),
        T(every_injection_is_counted_in_metrics),
        T(a_request_still_waiting_at_shutdown_is_closed),
#undef T
        cmocka_unit_test(chaos_flags_are_checked_by_name_at_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
