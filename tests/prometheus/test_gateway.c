/*
 * test_gateway.c — a real Prometheus scrapes `resil gateway`'s own
 * /metrics while traffic runs through it to the counting upstream: first
 * requests, a replay, a key reused with another body, then two upstream
 * failures that open the gateway's breaker (--breaker-failures 2) and a
 * request it refuses. Prometheus's query API must then hold exactly the
 * counts that traffic made, under the names docs/telemetry.md lists.
 */
#include "gateway_proc.h"
#include "prom_server.h"
#include "test.h"
#include "upstream.h"

static long post(const char *url, const char *key, const char *body)
{
    char header[128];
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
    const char *const headers[] = {header, "Content-Type: application/json", NULL};
    http_reply r;
    assert_int_equal(http_request("POST", url, headers, body, &r), 0);
    long status = r.status;
    http_reply_free(&r);
    return status;
}

static bool has(prom_server *prom, const char *promql, double want)
{
    if (prom_wait_for(prom, promql, want, 30))
        return true;
    double got = -1;
    bool any = prom_query(prom, promql, &got);
    print_error("%s: want %g, got %s%g\n", promql, want, any ? "" : "no sample ", got);
    return false;
}

static void prometheus_reads_the_gateways_requests_and_its_open_breaker(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    upstream *up = upstream_start();
    assert_non_null(dir);
    assert_non_null(up);
    char store[600], log[600], orders[128], target[64], authority[64];
    snprintf(store, sizeof store, "sqlite:%s/gateway.db", dir);
    snprintf(log, sizeof log, "%s/gateway.log", dir);
    const char *const args[] = {"--upstream", upstream_url(up), "--store", store,
                                "--breaker-failures", "2", "--breaker-break", "10m", NULL};
    gateway_proc gw = {0};
    assert_int_equal(gateway_start(&gw, test_build_path("resil"), log, args), 0);
    snprintf(orders, sizeof orders, "%s/orders", gw.url);

    assert_int_equal(post(orders, "a", "{\"n\":1}"), 201);
    assert_int_equal(post(orders, "a", "{\"n\":1}"), 201); /* replayed */
    assert_int_equal(post(orders, "a", "{\"n\":2}"), 422); /* the key, another body */
    assert_int_equal(post(orders, "b", "{\"n\":3}"), 201);
    upstream_fail_next(up, 2, 503);
    /* a 503 says the upstream did not process it: the key is released */
    assert_int_equal(post(orders, "c", "{}"), 503);
    assert_int_equal(post(orders, "d", "{}"), 503); /* the breaker opens */
    assert_int_equal(post(orders, "e", "{}"), 503); /* refused: the upstream not called */
    assert_int_equal(upstream_requests(up), 4);

    snprintf(target, sizeof target, "127.0.0.1:%d", gw.port);
    prom_server *prom = prom_server_start(target);
    assert_non_null(prom);
    const char *req = "sum(resilience_idempotency_requests_total{http_request_method=\"POST\"";
    char q[512];
    assert_true(has(prom, "sum(up{job=\"resil\"})", 1));
    snprintf(q, sizeof q, "%s,idempotency_outcome=\"first\",http_response_status_code=\"201\"})",
             req);
    assert_true(has(prom, q, 2));
    snprintf(q, sizeof q, "%s,idempotency_outcome=\"released\",http_response_status_code=\"503\","
                          "error_type=\"\"})", req);
    assert_true(has(prom, q, 2));
    snprintf(q, sizeof q, "%s,idempotency_outcome=\"replay\"})", req);
    assert_true(has(prom, q, 1));
    snprintf(q, sizeof q, "%s,idempotency_outcome=\"mismatch\",http_response_status_code=\"422\"})",
             req);
    assert_true(has(prom, q, 1));
    snprintf(q, sizeof q, "%s,idempotency_outcome=\"released\",error_type=\"circuit_open\"})",
             req);
    assert_true(has(prom, q, 1));
    assert_true(has(prom, "sum(resilience_idempotency_requests_total)", 7));
    /* the upstream calls: four made, two of them failures */
    snprintf(authority, sizeof authority, "server_port=\"%d\"", upstream_port(up));
    snprintf(q, sizeof q, "sum(http_client_request_resilience_attempt_duration_seconds_count{%s,"
                          "server_address=\"127.0.0.1\"})", authority);
    assert_true(has(prom, q, 4));
    snprintf(q, sizeof q, "sum(http_client_request_resilience_attempt_duration_seconds_count{%s,"
                          "error_type=\"503\",http_response_status_code=\"503\"})", authority);
    assert_true(has(prom, q, 2));
    snprintf(q, sizeof q, "sum(http_client_request_resilience_circuit_breaker_state{%s})",
             authority);
    assert_true(has(prom, q, 1)); /* open */

    prom_server_stop(prom);
    assert_int_equal(gateway_stop(&gw), 0);
    upstream_stop(up);
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prometheus_reads_the_gateways_requests_and_its_open_breaker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
