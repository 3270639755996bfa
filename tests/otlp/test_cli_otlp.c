/*
 * test_cli_otlp.c — `resil http --otlp URL`, end to end: the built tool
 * fetches from one loopback server and exports to another, the OTLP
 * receiver of test_otlp.c, and every payload it receives is checked
 * against the OTLP JSON encoding (otlp_check) before its values are. The
 * tool exports at exit: the spans in one request, the metrics (cumulative)
 * in the flush and again as the exporter stops, so the last one is read.
 */
#include <stdlib.h>

#include "../integration/cli_harness.h"
#include "http_server.h"
#include "otlp_check.h"

typedef struct fx {
    char *dir;
    http_server *server, *receiver;
    char target[256], endpoint[128];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = test_tmpdir();
    f->server = http_server_start();
    f->receiver = http_server_start();
    http_server_script(f->receiver, "/v1/traces", (const http_step[]){{.status = 200}}, 1);
    http_server_script(f->receiver, "/v1/metrics", (const http_step[]){{.status = 200}}, 1);
    http_server_url(f->receiver, "", f->endpoint, sizeof f->endpoint);
    http_server_script(f->server, "/a",
                       (const http_step[]){{.status = 503}, {.status = 200, .body = "ok\n"}}, 2);
    http_server_url(f->server, "/a", f->target, sizeof f->target);
    unsetenv("OTEL_SERVICE_NAME");
    *state = f;
    return f->dir != NULL && f->server != NULL && f->receiver != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    fx *f = *state;
    http_server_stop(f->receiver);
    http_server_stop(f->server);
    test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* The one body sent to path (a call exports once, at exit), checked
 * against the encoding rules. */
static json_t *received(fx *f, const char *path, bool traces)
{
    assert_int_equal(http_server_count(f->receiver, path), 1);
    const http_request *r = http_server_request(f->receiver, path, 0);
    char why[512];
    json_t *root = traces ? otlp_check_traces(r->body, r->body_len, why, sizeof why)
                          : otlp_check_metrics(r->body, r->body_len, why, sizeof why);
    if (root == NULL)
        fail_msg("invalid OTLP JSON: %s\n%s", why, r->body);
    return root;
}

static json_t *resource_attrs(json_t *root, const char *list)
{
    json_t *r = json_array_get(json_object_get(root, list), 0);
    return json_object_get(json_object_get(r, "resource"), "attributes");
}

static json_t *spans_of(json_t *root)
{
    json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
    return json_object_get(json_array_get(json_object_get(rs, "scopeSpans"), 0), "spans");
}

static json_t *span_named(json_t *spans, const char *name, size_t nth)
{
    size_t i;
    json_t *s;
    json_array_foreach(spans, i, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0 && nth-- == 0)
            return s;
    }
    fail_msg("no span %s", name);
    return NULL;
}

static json_t *metric_named(json_t *root, const char *name)
{
    json_t *m = otlp_metric(root, name);
    if (m == NULL)
        fail_msg("no metric %s", name);
    return m;
}

static void a_retried_call_exports_its_spans_under_one_new_trace(void **state)
{
    fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--otlp", f->endpoint, f->target,
            NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "ok\n");
    assert_int_equal(http_server_count(f->receiver, "/v1/traces"), 1);
    json_t *root = received(f, "/v1/traces", true);
    assert_string_equal(otlp_str_attr(resource_attrs(root, "resourceSpans"), "service.name"),
                        "resil");
    json_t *spans = spans_of(root);
    assert_int_equal(json_array_size(spans), 3);
    json_t *exec = span_named(spans, "execution", 0);
    const char *trace = json_string_value(json_object_get(exec, "traceId"));
    const char *exec_id = json_string_value(json_object_get(exec, "spanId"));
    for (size_t i = 0; i < 2; i++) {
        json_t *a = span_named(spans, "attempt", i);
        assert_string_equal(json_string_value(json_object_get(a, "traceId")), trace);
        assert_string_equal(json_string_value(json_object_get(a, "parentSpanId")), exec_id);
    }
    json_t *first = json_object_get(span_named(spans, "attempt", 0), "attributes");
    assert_string_equal(otlp_str_attr(first, "http.request.method"), "GET");
    assert_string_equal(otlp_str_attr(first, "server.address"), "127.0.0.1");
    /* each attempt sent its own span as the traceparent's parent id */
    char sent[128];
    const http_request *q = http_server_request(f->server, "/a", 0);
    assert_true(http_request_header(q, "traceparent", sent, sizeof sent));
    assert_int_equal(strncmp(sent + 3, trace, 32), 0);
    json_decref(root);
    cli_result_free(&r);
}

static void a_given_traceparent_is_the_executions_parent(void **state)
{
    fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "--otlp", f->endpoint,
            f->target, NULL);
    assert_int_equal(r.status, 0);
    json_t *root = received(f, "/v1/traces", true);
    json_t *exec = span_named(spans_of(root), "execution", 0);
    assert_string_equal(json_string_value(json_object_get(exec, "traceId")),
                        "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_string_equal(json_string_value(json_object_get(exec, "parentSpanId")),
                        "00f067aa0ba902b7");
    json_decref(root);
    cli_result_free(&r);
}

static void the_metrics_are_sent_once_at_exit_with_their_counts(void **state)
{
    fx *f = *state;
    setenv("OTEL_SERVICE_NAME", "nightly-fetch", 1);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--otlp", f->endpoint, f->target,
            NULL);
    unsetenv("OTEL_SERVICE_NAME");
    assert_int_equal(r.status, 0);
    json_t *root = received(f, "/v1/metrics", false);
    assert_string_equal(otlp_str_attr(resource_attrs(root, "resourceMetrics"), "service.name"),
                        "nightly-fetch");
    json_t *events = metric_named(root, "resilience.polly.strategy.events");
    json_t *point = json_array_get(json_object_get(json_object_get(events, "sum"), "dataPoints"),
                                   0);
    assert_string_equal(json_string_value(json_object_get(point, "asInt")), "1");
    assert_string_equal(otlp_str_attr(json_object_get(point, "attributes"), "event.name"),
                        "OnRetry");
    json_t *attempts = metric_named(root, "resilience.polly.strategy.attempt.duration");
    json_t *hp = json_array_get(
        json_object_get(json_object_get(attempts, "histogram"), "dataPoints"), 0);
    assert_non_null(hp);
    json_decref(root);
    cli_result_free(&r);
}

static void a_bad_otlp_url_is_refused_by_name_with_nothing_sent(void **state)
{
    fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--otlp", "ftp://127.0.0.1/", f->target, NULL);
    assert_int_equal(r.status, 125);
    assert_non_null(strstr(r.err, "--otlp"));
    assert_int_equal(http_server_count(f->server, "/a"), 0);
    cli_result_free(&r);
}

/* An export the receiver refuses (for good: a 400 is not retried) is an
 * output not written: exit 23. */
static void a_failing_receiver_is_said_and_exits_23(void **state)
{
    fx *f = *state;
    http_server_script(f->receiver, "/v1/traces", (const http_step[]){{.status = 400}}, 1);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--otlp", f->endpoint, f->target,
            NULL);
    assert_int_equal(r.status, 23);
    assert_string_equal(r.out, "ok\n");
    assert_non_null(strstr(r.err, "--otlp: the export to"));
    cli_result_free(&r);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(a_retried_call_exports_its_spans_under_one_new_trace),
        T(a_given_traceparent_is_the_executions_parent),
        T(the_metrics_are_sent_once_at_exit_with_their_counts),
        T(a_bad_otlp_url_is_refused_by_name_with_nothing_sent),
        T(a_failing_receiver_is_said_and_exits_23),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
