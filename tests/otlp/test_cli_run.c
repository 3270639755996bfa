/*
 * test_cli_run.c — `resil run --otlp URL` against the loopback receiver:
 * a command failing twice then succeeding is exported as one trace — the
 * execution's span, a child span per attempt with its number, outcome and
 * stop — and the run's metrics, every payload checked against the OTLP
 * JSON encoding (otlp_check) before its values; each attempt of the
 * command finds its own span as TRACEPARENT; a URL that is no http(s) URL
 * is refused by name with nothing run.
 */
#include <jansson.h>

#include "../integration/cli_harness.h"
#include "http_server.h"
#include "otlp_check.h"

#define FAIL_TWICE \
    "echo \"$TRACEPARENT\" >> tp; echo run >> runs; [ $(wc -l < runs) -ge 3 ]"

typedef struct fx {
    char *dir;
    http_server *receiver;
    char endpoint[128];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->dir = test_tmpdir();
    assert_non_null(f->dir);
    f->receiver = http_server_start();
    assert_non_null(f->receiver);
    http_server_script(f->receiver, "/v1/traces", (const http_step[]){{.status = 200}}, 1);
    http_server_script(f->receiver, "/v1/metrics", (const http_step[]){{.status = 200}}, 1);
    http_server_url(f->receiver, "", f->endpoint, sizeof f->endpoint);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    http_server_stop(f->receiver);
    test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* The one body sent to path (a run exports once, at exit), checked
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

/* `resil run --otlp` on a command that fails twice, then succeeds. */
static void run_failing_twice(fx *f, cli_result *r)
{
    cli_run(r, f->dir, NULL, "run", "--delay", "1ms", "--otlp", f->endpoint, "--", "sh", "-c",
            FAIL_TWICE, NULL);
    assert_int_equal(r->status, 0);
}

static const char *str_of(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static const char *attr_str(json_t *span, const char *key, const char *type)
{
    return str_of(otlp_attr(json_object_get(span, "attributes"), key), type);
}

static json_t *first_of(json_t *o, const char *outer, const char *inner)
{
    return json_object_get(json_array_get(json_object_get(o, outer), 0), inner);
}

/* The i-th line of dir/name, without its newline. */
static void line_of(const char *dir, const char *name, int i, char *buf, size_t cap)
{
    char *text = cli_read(dir, name);
    assert_non_null(text);
    char *p = text;
    for (; i > 0 && p != NULL; i--)
        if ((p = strchr(p, '\n')) != NULL)
            p++;
    assert_non_null(p);
    snprintf(buf, cap, "%.*s", (int)strcspn(p, "\n"), p);
    free(text);
}

static void each_attempt_is_a_child_span_of_the_execution(void **state)
{
    fx *f = *state;
    cli_result r;
    run_failing_twice(f, &r);
    json_t *root = received(f, "/v1/traces", true);
    json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
    assert_string_equal(attr_str(json_object_get(rs, "resource"), "service.name", "stringValue"),
                        "resil");
    json_t *spans = first_of(rs, "scopeSpans", "spans");
    assert_int_equal(json_array_size(spans), 4);
    json_t *exec = json_array_get(spans, 3);
    assert_string_equal(str_of(exec, "name"), "execution");
    assert_null(json_object_get(exec, "parentSpanId"));
    assert_string_equal(attr_str(exec, "resil.attempts", "intValue"), "3");
    assert_string_equal(attr_str(exec, "pipeline.name", "stringValue"), "run");
    const char *trace = str_of(exec, "traceId");
    const char *exec_id = str_of(exec, "spanId");
    for (int i = 0; i < 3; i++) {
        json_t *a = json_array_get(spans, (size_t)i);
        assert_string_equal(str_of(a, "name"), "attempt");
        assert_string_equal(str_of(a, "traceId"), trace);
        assert_string_equal(str_of(a, "parentSpanId"), exec_id);
        char number[4], expected[64], seen[64];
        snprintf(number, sizeof number, "%d", i);
        assert_string_equal(attr_str(a, "attempt.number", "intValue"), number);
        assert_string_equal(attr_str(a, "operation.key", "stringValue"), "sh");
        snprintf(expected, sizeof expected, "00-%s-%s-01", trace, str_of(a, "spanId"));
        line_of(f->dir, "tp", i, seen, sizeof seen);
        assert_string_equal(seen, expected);
        json_t *status = json_object_get(a, "status");
        if (i < 2)
            assert_int_equal(json_integer_value(json_object_get(status, "code")), 2);
        else
            assert_string_equal(attr_str(a, "resil.stop", "stringValue"), "succeeded");
    }
    json_decref(root);
    cli_result_free(&r);
}

static json_t *metric_named(json_t *root, const char *name)
{
    json_t *sm = first_of(json_array_get(json_object_get(root, "resourceMetrics"), 0),
                          "scopeMetrics", "metrics");
    size_t i;
    json_t *m;
    json_array_foreach(sm, i, m)
    {
        if (strcmp(str_of(m, "name"), name) == 0)
            return m;
    }
    fail_msg("no metric %s", name);
    return NULL;
}

static void the_runs_metrics_are_exported_once_at_exit(void **state)
{
    fx *f = *state;
    cli_result r;
    run_failing_twice(f, &r);
    json_t *root = received(f, "/v1/metrics", false);
    json_t *events = metric_named(root, "resilience.polly.strategy.events");
    json_t *point = json_array_get(json_object_get(json_object_get(events, "sum"), "dataPoints"), 0);
    assert_string_equal(str_of(point, "asInt"), "2");
    json_t *attrs = json_object_get(point, "attributes");
    assert_string_equal(str_of(otlp_attr(attrs, "event.name"), "stringValue"), "OnRetry");
    assert_string_equal(str_of(otlp_attr(attrs, "pipeline.name"), "stringValue"), "run");
    assert_string_equal(str_of(otlp_attr(attrs, "operation.key"), "stringValue"), "sh");
    json_t *pipeline = metric_named(root, "resilience.polly.pipeline.duration");
    json_t *hp = json_array_get(
        json_object_get(json_object_get(pipeline, "histogram"), "dataPoints"), 0);
    assert_string_equal(str_of(hp, "count"), "1");
    json_decref(root);
    cli_result_free(&r);
}

/* A collector that refuses the export (for good: a 400 is not retried) is
 * reported; the exit status stays the command's. */
static void a_refused_export_is_reported_and_keeps_the_commands_status(void **state)
{
    fx *f = *state;
    http_server_script(f->receiver, "/v1/traces", (const http_step[]){{.status = 400}}, 1);
    cli_result r;
    cli_run(&r, f->dir, NULL, "run", "--otlp", f->endpoint, "--", "true", NULL);
    assert_int_equal(r.status, 0);
    char expected[256];
    snprintf(expected, sizeof expected, "resil run: --otlp: the export to '%s' failed\n",
             f->endpoint);
    if (strstr(r.err, expected) == NULL)
        fail_msg("expected \"%s\" in:\n%s", expected, r.err);
    cli_result_free(&r);
}

static void assert_otlp_rejected(fx *f, const char *value)
{
    cli_result r;
    cli_run(&r, f->dir, NULL, "run", "--otlp", value, "--", "sh", "-c", "echo run >> runs",
            NULL);
    assert_int_equal(r.status, 125);
    char expected[256];
    snprintf(expected, sizeof expected,
             "resil run: --otlp must be an http:// or https:// URL with a host, got '%s'\n",
             value);
    assert_string_equal(r.err, expected);
    assert_false(cli_exists(f->dir, "runs"));
    cli_result_free(&r);
}

static void a_url_without_scheme_or_host_is_rejected_by_name(void **state)
{
    fx *f = *state;
    assert_otlp_rejected(f, "localhost:4318");
    assert_otlp_rejected(f, "http://");
    assert_otlp_rejected(f, "ftp://collector:4318");
    assert_int_equal(http_server_count(f->receiver, "/v1/traces"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(each_attempt_is_a_child_span_of_the_execution, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_runs_metrics_are_exported_once_at_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_refused_export_is_reported_and_keeps_the_commands_status, setup, teardown),
        cmocka_unit_test_setup_teardown(a_url_without_scheme_or_host_is_rejected_by_name, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
