/*
 * test_scrape.c — a real Prometheus scrapes resil's metrics: the text the
 * sink writes is parsed by Prometheus itself, and the series a dashboard
 * reads come back from its query API with the values the traffic made.
 *
 * The traffic runs on the fake clock, so what it records is exact: two
 * calls retried twice then answered, then a dependency that keeps failing
 * until a consecutive-failures breaker opens, then a call the open breaker
 * refuses. The metrics are served on a loopback port by a small endpoint
 * in this process, written as any program's /metrics handler would.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prom_server.h"
#include "test.h"

/* ---- a /metrics endpoint ------------------------------------------------------ */

typedef struct endpoint {
    resil_metrics *m;
    int fd;
    int port;
    pthread_t thread;
} endpoint;

static int send_all(const char *text, size_t len, void *ud)
{
    int fd = *(int *)ud;
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        if (n <= 0)
            return RESIL_EIO;
        text += n;
        len -= (size_t)n;
    }
    return 0;
}

static void serve(endpoint *e, int fd)
{
    char req[4096];
    size_t len = 0;
    ssize_t n;
    while (len + 1 < sizeof req && (n = read(fd, req + len, sizeof req - 1 - len)) > 0) {
        len += (size_t)n;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") != NULL)
            break;
    }
    const char *head = "HTTP/1.1 200 OK\r\n"
                       "Content-Type: text/plain; version=0.0.4\r\n"
                       "Connection: close\r\n\r\n";
    if (send_all(head, strlen(head), &fd) == 0)
        resil_metrics_write_prometheus(e->m, send_all, &fd);
    close(fd);
}

static void *accept_loop(void *arg)
{
    endpoint *e = arg;
    for (;;) {
        int fd = accept(e->fd, NULL, NULL);
        if (fd < 0)
            return NULL; /* shut down */
        serve(e, fd);
    }
}

static void endpoint_start(endpoint *e, resil_metrics *m)
{
    e->m = m;
    e->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(e->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(e->fd, 16), 0);
    assert_int_equal(getsockname(e->fd, (struct sockaddr *)&a, &len), 0);
    e->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&e->thread, NULL, accept_loop, e), 0);
}

static void endpoint_stop(endpoint *e)
{
    shutdown(e->fd, SHUT_RDWR);
    pthread_join(e->thread, NULL);
    close(e->fd);
}

/* ---- traffic ------------------------------------------------------------------------ */

typedef struct dependency {
    resil_fake_clock *fc;
    int failures_left; /* then it answers */
} dependency;

static resil_outcome call_dependency(resil_attempt_ctx *ctx)
{
    dependency *d = ctx->user;
    resil_fake_clock_advance(d->fc, RESIL_MS(20));
    if (d->failures_left != 0) {
        if (d->failures_left > 0)
            d->failures_left--;
        return resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    }
    return resil_ok();
}

static resil_pipeline *orders_pipeline(resil_fake_clock *fc, resil_metrics *m)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(fc));
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = 3;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(1);
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.failure_threshold = 3;
    bo.break_duration = RESIL_S(60);
    assert_int_equal(resil_pipeline_add_breaker(b, &bo), 0);
    assert_int_equal(resil_pipeline_builder_metrics(b, m), 0);
    resil_pipeline *pipeline;
    resil_err err = {0, ""};
    if (resil_pipeline_build(b, &pipeline, &err) != 0)
        fail_msg("build: %s", err.message);
    resil_pipeline_builder_free(b);
    return pipeline;
}

static void run(resil_pipeline *p, dependency *d, int failures)
{
    d->failures_left = failures;
    resil_call c;
    resil_call_default(&c);
    c.user = d;
    c.operation = "PlaceOrder";
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(p, call_dependency, &c, &r), 0);
}

static void prometheus_reads_retries_and_an_open_breaker_from_the_scrape(void **state)
{
    (void)state;
    dependency d = {0};
    assert_int_equal(resil_fake_clock_new(0, INT64_C(1700000000) * RESIL_S(1), &d.fc), 0);
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);
    resil_pipeline *p = orders_pipeline(d.fc, m);
    run(p, &d, 2);  /* 503, 503, then answered: two retries */
    run(p, &d, 2);
    run(p, &d, -1); /* fails on: three failures in a row open the breaker */
    run(p, &d, 0);  /* refused by the open breaker, the dependency not called */

    endpoint e;
    endpoint_start(&e, m);
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", e.port);
    prom_server *prom = prom_server_start(target);
    assert_non_null(prom);

    assert_true(prom_wait_for(prom, "sum(up{job=\"resil\"})", 1, 60));
    assert_true(prom_wait_for(
        prom,
        "sum(resilience_polly_strategy_events_total{event_name=\"OnRetry\","
        "pipeline_name=\"orders\",operation_key=\"PlaceOrder\"})",
        6, 30));
    assert_true(prom_wait_for(
        prom, "sum(resilience_polly_strategy_events_total{event_name=\"OnCircuitOpened\"})", 1,
        30));
    assert_true(prom_wait_for(
        prom, "sum(resilience_polly_strategy_events_total{event_name=\"breaker_rejected\"})", 1,
        30));
    assert_true(prom_wait_for(
        prom, "sum(resilience_circuit_breaker_state{pipeline_name=\"orders\"})", 1, 30));
    assert_true(prom_wait_for(prom,
                              "sum(resilience_polly_pipeline_duration_milliseconds_count{"
                              "pipeline_name=\"orders\"})",
                              4, 30));
    /* the two answered calls took 20 + 1000 + 20 + 1000 + 20 ms each */
    assert_true(prom_wait_for(prom,
                              "sum(resilience_polly_pipeline_duration_milliseconds_bucket{"
                              "exception_type=\"\",le=\"2500\"})",
                              2, 30));
    assert_true(prom_wait_for(prom,
                              "sum(resilience_polly_strategy_attempt_duration_milliseconds_count{"
                              "attempt_handled=\"true\"})",
                              7, 30));

    prom_server_stop(prom);
    endpoint_stop(&e);
    resil_pipeline_free(p);
    resil_metrics_free(m);
    resil_fake_clock_free(d.fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prometheus_reads_retries_and_an_open_breaker_from_the_scrape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
