/*
 * test_otlp.c — the OTLP/HTTP exporter against a loopback receiver: every
 * payload it receives is checked against the OTLP JSON encoding
 * (otlp_check) before its values are: the spans of a retried call with
 * their ids, parents, attributes and statuses, the metrics with their
 * names, units, points and buckets, the configured headers and resource,
 * a full queue dropping and counting (its export held by the receiver
 * until the test releases it), a refused request counted (spans or
 * metrics; the retried answers are test_failures.c's), and the
 * free and the close sending what is still queued, the close saying
 * whether it was taken.
 */
#include <curl/curl.h>
#include <stdlib.h>

#include "test.h"

#include "http_server.h"
#include "otlp_check.h"
#include "resil/otlp.h"

typedef struct world {
    http_server *receiver;
    resil_fake_clock *fc;
    resil_metrics *metrics;
    resil_pipeline *p;
    resil_tracer tracer;
    resil_otlp *x;
    resil_otlp_opts o;
    char endpoint[128];
    int calls;
} world;

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->receiver = http_server_start();
    assert_non_null(w->receiver);
    http_server_script(w->receiver, "/v1/traces", (const http_step[]){{.status = 200}}, 1);
    http_server_script(w->receiver, "/v1/metrics", (const http_step[]){{.status = 200}}, 1);
    http_server_url(w->receiver, "", w->endpoint, sizeof w->endpoint);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), INT64_C(1700000000000000000), &w->fc), 0);
    assert_int_equal(resil_metrics_new(NULL, &w->metrics, NULL), 0);
    resil_otlp_opts_default(&w->o);
    w->o.endpoint = w->endpoint;
    w->o.service_name = "checkout";
    w->o.resource_attributes = "deployment.environment=prod%20eu,service.name=ignored";
    w->o.headers = "api-key=s3cret%21";
    w->o.interval = RESIL_S(3600); /* only flushes export in these tests */
    w->o.schedule_delay = RESIL_S(3600);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    /* a test that failed with an export held must not hold the free */
    http_server_release(w->receiver);
    resil_otlp_free(w->x);
    resil_pipeline_free(w->p);
    resil_metrics_free(w->metrics);
    resil_fake_clock_free(w->fc);
    http_server_stop(w->receiver);
    free(w);
    return 0;
}

static resil_outcome flaky(resil_attempt_ctx *ctx)
{
    world *w = ctx->user;
    w->calls++;
    resil_fake_clock_advance(w->fc, RESIL_MS(10));
    return w->calls % 3 != 0 ? resil_fail(RESIL_TRANSIENT, 503, "service unavailable")
                             : resil_ok();
}

/* The exporter, and a pipeline whose tracer and metrics feed it. */
static void start(world *w)
{
    resil_err err = {0, ""};
    if (resil_otlp_new(&w->o, &w->x, &err) != 0)
        fail_msg("otlp: %s", err.message);
    resil_tracer_opts to;
    resil_tracer_opts_default(&to);
    to.on_span = resil_otlp_on_span;
    to.on_span_ud = w->x;
    to.clock = resil_fake_clock_clock(w->fc);
    assert_int_equal(resil_tracer_init(&w->tracer, &to, NULL), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(w->fc));
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = 3;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(2);
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    assert_int_equal(resil_pipeline_builder_metrics(b, w->metrics), 0);
    assert_int_equal(resil_pipeline_builder_listen(b, resil_tracer_on_event, &w->tracer), 0);
    assert_int_equal(resil_pipeline_build(b, &w->p, NULL), 0);
    resil_pipeline_builder_free(b);
}

static const char *const parent_text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

static void call(world *w)
{
    resil_span_context parent;
    assert_int_equal(resil_traceparent_parse(parent_text, strlen(parent_text), &parent, NULL), 0);
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    c.operation = "GetOrder";
    resil_call_telemetry tel = {.trace = &parent};
    c.telemetry = &tel;
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(w->p, flaky, &c, &r), 0);
}

/* The i-th body sent to path, checked against the encoding rules. */
static json_t *received(world *w, const char *path, size_t i, bool traces)
{
    const http_request *r = http_server_request(w->receiver, path, i);
    if (r == NULL)
        fail_msg("no request %zu to %s", i, path);
    assert_string_equal(r->method, "POST");
    char type[64];
    assert_true(http_request_header(r, "Content-Type", type, sizeof type));
    assert_string_equal(type, "application/json");
    char why[512];
    json_t *root = traces ? otlp_check_traces(r->body, r->body_len, why, sizeof why)
                          : otlp_check_metrics(r->body, r->body_len, why, sizeof why);
    if (root == NULL)
        fail_msg("invalid OTLP JSON: %s\n%s", why, r->body);
    return root;
}

static const char *int_attr(json_t *attrs, const char *key)
{
    json_t *v = otlp_attr(attrs, key);
    return v != NULL ? json_string_value(json_object_get(v, "intValue")) : NULL;
}

static void spans_of_a_retried_call_arrive_as_valid_otlp_with_their_values(void **state)
{
    world *w = *state;
    start(w);
    call(w);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(http_server_count(w->receiver, "/v1/traces"), 1);
    json_t *root = received(w, "/v1/traces", 0, true);
    json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
    json_t *res = json_object_get(json_object_get(rs, "resource"), "attributes");
    assert_string_equal(otlp_str_attr(res, "service.name"), "checkout");
    assert_string_equal(otlp_str_attr(res, "deployment.environment"), "prod eu");
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ss, "scope"), "name")),
                        "resil");
    json_t *spans = json_object_get(ss, "spans");
    assert_int_equal(json_array_size(spans), 4);
    json_t *exec = json_array_get(spans, 3);
    assert_string_equal(json_string_value(json_object_get(exec, "name")), "execution");
    assert_string_equal(json_string_value(json_object_get(exec, "traceId")),
                        "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_string_equal(json_string_value(json_object_get(exec, "parentSpanId")),
                        "00f067aa0ba902b7");
    assert_string_equal(json_string_value(json_object_get(exec, "startTimeUnixNano")),
                        "1700000000000000000");
    assert_string_equal(json_string_value(json_object_get(exec, "endTimeUnixNano")),
                        "1700000004030000000");
    assert_string_equal(int_attr(json_object_get(exec, "attributes"), "resil.attempts"), "3");
    const char *exec_id = json_string_value(json_object_get(exec, "spanId"));
    for (size_t i = 0; i < 3; i++) {
        json_t *a = json_array_get(spans, i);
        json_t *attrs = json_object_get(a, "attributes");
        assert_string_equal(json_string_value(json_object_get(a, "name")), "attempt");
        assert_string_equal(json_string_value(json_object_get(a, "parentSpanId")), exec_id);
        char number[4];
        snprintf(number, sizeof number, "%zu", i);
        assert_string_equal(int_attr(attrs, "attempt.number"), number);
        assert_string_equal(otlp_str_attr(attrs, "operation.key"), "GetOrder");
        json_t *status = json_object_get(a, "status");
        if (i < 2) {
            assert_int_equal(json_integer_value(json_object_get(status, "code")), 2);
            assert_string_equal(json_string_value(json_object_get(status, "message")),
                                "service unavailable");
            assert_true(json_is_true(
                json_object_get(otlp_attr(attrs, "attempt.handled"), "boolValue")));
        } else {
            assert_null(status);
            assert_string_equal(otlp_str_attr(attrs, "resil.stop"), "succeeded");
        }
        double wait = json_number_value(
            json_object_get(otlp_attr(attrs, "resil.attempt.wait_before_ms"), "doubleValue"));
        assert_true(wait == (i == 0 ? 0 : 2000));
    }
    char key[64];
    assert_true(http_request_header(http_server_request(w->receiver, "/v1/traces", 0), "api-key",
                                    key, sizeof key));
    assert_string_equal(key, "s3cret!");
    resil_otlp_stats st;
    resil_otlp_get_stats(w->x, &st);
    assert_int_equal(st.spans_queued, 4);
    assert_int_equal(st.spans_exported, 4);
    assert_int_equal(st.spans_dropped, 0);
    json_decref(root);
}

/* One call's spans exported by a flush; the resource's service.name. */
static const char *service_of_one_call(world *w, const char *path, char *out, size_t cap)
{
    start(w);
    call(w);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    json_t *root = received(w, path, 0, true);
    json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
    json_t *res = json_object_get(json_object_get(rs, "resource"), "attributes");
    snprintf(out, cap, "%s", otlp_str_attr(res, "service.name"));
    json_decref(root);
    return out;
}

static void an_endpoint_ending_in_slashes_gets_the_signals_path_once(void **state)
{
    world *w = *state;
    char base[160];
    snprintf(base, sizeof base, "%s//", w->endpoint);
    w->o.endpoint = base;
    char service[64];
    service_of_one_call(w, "/v1/traces", service, sizeof service);
    assert_int_equal(http_server_count(w->receiver, "/v1/traces"), 1);
}

static void a_traces_endpoint_is_used_as_given(void **state)
{
    world *w = *state;
    http_server_script(w->receiver, "/collect/spans", (const http_step[]){{.status = 200}}, 1);
    char full[160];
    http_server_url(w->receiver, "/collect/spans", full, sizeof full);
    w->o.traces_endpoint = full;
    char service[64];
    service_of_one_call(w, "/collect/spans", service, sizeof service);
    assert_int_equal(http_server_count(w->receiver, "/collect/spans"), 1);
    assert_int_equal(http_server_count(w->receiver, "/v1/traces"), 0);
}

static void a_metrics_endpoint_is_used_as_given(void **state)
{
    world *w = *state;
    http_server_script(w->receiver, "/collect/metrics", (const http_step[]){{.status = 200}}, 1);
    char full[160];
    http_server_url(w->receiver, "/collect/metrics", full, sizeof full);
    w->o.metrics_endpoint = full;
    w->o.metrics = w->metrics;
    start(w);
    call(w);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(http_server_count(w->receiver, "/collect/metrics"), 1);
    assert_int_equal(http_server_count(w->receiver, "/v1/metrics"), 0);
    json_decref(received(w, "/collect/metrics", 0, false));
}

static void without_a_service_name_option_the_resources_service_name_names_it(void **state)
{
    world *w = *state;
    w->o.service_name = NULL;
    w->o.resource_attributes = "team=payments,service.name=billing";
    char service[64];
    assert_string_equal(service_of_one_call(w, "/v1/traces", service, sizeof service), "billing");
}

static void without_either_the_service_is_unknown_service(void **state)
{
    world *w = *state;
    w->o.service_name = NULL;
    w->o.resource_attributes = NULL;
    char service[64];
    assert_string_equal(service_of_one_call(w, "/v1/traces", service, sizeof service),
                        "unknown_service");
}

static json_t *metric_named(json_t *root, const char *name)
{
    json_t *m = otlp_metric(root, name);
    if (m == NULL)
        fail_msg("no metric %s", name);
    return m;
}

static void metrics_arrive_as_valid_otlp_with_names_units_and_points(void **state)
{
    world *w = *state;
    w->o.metrics = w->metrics;
    start(w);
    call(w);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(http_server_count(w->receiver, "/v1/metrics"), 1);
    json_t *root = received(w, "/v1/metrics", 0, false);
    json_t *events = metric_named(root, "resilience.polly.strategy.events");
    assert_string_equal(json_string_value(json_object_get(events, "unit")), "{event}");
    json_t *sum = json_object_get(events, "sum");
    assert_int_equal(json_integer_value(json_object_get(sum, "aggregationTemporality")), 2);
    assert_true(json_is_true(json_object_get(sum, "isMonotonic")));
    json_t *point = json_array_get(json_object_get(sum, "dataPoints"), 0);
    assert_string_equal(json_string_value(json_object_get(point, "asInt")), "2");
    json_t *attrs = json_object_get(point, "attributes");
    assert_string_equal(otlp_str_attr(attrs, "event.name"), "OnRetry");
    assert_string_equal(otlp_str_attr(attrs, "event.severity"), "Warning");
    assert_string_equal(otlp_str_attr(attrs, "pipeline.name"), "orders");

    json_t *pipeline = metric_named(root, "resilience.polly.pipeline.duration");
    assert_string_equal(json_string_value(json_object_get(pipeline, "unit")), "ms");
    json_t *hp = json_array_get(
        json_object_get(json_object_get(pipeline, "histogram"), "dataPoints"), 0);
    assert_string_equal(json_string_value(json_object_get(hp, "count")), "1");
    assert_true(json_number_value(json_object_get(hp, "sum")) == 4030);
    json_t *bounds = json_object_get(hp, "explicitBounds");
    assert_int_equal(json_array_size(bounds), 15);
    assert_true(json_number_value(json_array_get(bounds, 0)) == 1);
    assert_true(json_number_value(json_array_get(bounds, 14)) == 60000);
    /* 4030 ms falls in the (2500, 5000] bucket, the 12th */
    assert_string_equal(json_string_value(json_array_get(json_object_get(hp, "bucketCounts"), 11)),
                        "1");
    json_decref(root);
}

static void a_full_queue_drops_and_counts_instead_of_waiting(void **state)
{
    world *w = *state;
    /* the receiver holds the first batch: it stays in flight, and in its
     * slot of the queue, until the test releases it, so none makes room
     * while the spans are offered */
    http_server_script(w->receiver, "/v1/traces",
                       (const http_step[]){{.status = 200, .hold = true}}, 1);
    w->o.max_queue = 2;
    w->o.max_batch = 1;
    start(w);
    for (int i = 0; i < 4; i++)
        call(w); /* 16 spans offered */
    assert_true(http_server_wait_held(w->receiver, 1)); /* the first batch is in flight */
    resil_otlp_stats st;
    resil_otlp_get_stats(w->x, &st);
    assert_int_equal(st.spans_queued + st.spans_dropped, 16);
    assert_int_equal(st.spans_queued, 2); /* the one in flight and one behind it */
    assert_int_equal(st.spans_dropped, 14);
    http_server_release(w->receiver);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    resil_otlp_get_stats(w->x, &st);
    assert_int_equal(st.spans_exported, st.spans_queued);
    size_t sent = 0;
    for (size_t i = 0; i < http_server_count(w->receiver, "/v1/traces"); i++) {
        json_t *root = received(w, "/v1/traces", i, true);
        sent += json_array_size(json_object_get(
            json_array_get(json_object_get(json_array_get(json_object_get(root, "resourceSpans"), 0),
                                           "scopeSpans"),
                           0),
            "spans"));
        json_decref(root);
    }
    assert_int_equal(sent, st.spans_queued);
}

/* A 400 is refused for good (test_failures.c has the retried answers). */
static void a_refused_request_is_counted_and_reported_by_flush(void **state)
{
    world *w = *state;
    http_server_script(w->receiver, "/v1/traces", (const http_step[]){{.status = 400}}, 1);
    start(w);
    call(w);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    resil_otlp_stats st;
    resil_otlp_get_stats(w->x, &st);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.failed_requests, 1);
    assert_int_equal(st.spans_exported, 0);
    assert_int_equal(st.spans_failed, 4);
}

static void a_refused_metrics_export_is_reported_by_flush(void **state)
{
    world *w = *state;
    http_server_script(w->receiver, "/v1/metrics", (const http_step[]){{.status = 400}}, 1);
    w->o.metrics = w->metrics;
    start(w);
    call(w);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    assert_int_equal(http_server_count(w->receiver, "/v1/metrics"), 1);
    json_decref(received(w, "/v1/metrics", 0, false));
    resil_otlp_stats st;
    resil_otlp_get_stats(w->x, &st);
    assert_int_equal(st.requests, 2);
    assert_int_equal(st.failed_requests, 1);
    assert_int_equal(st.spans_exported, 4);
    assert_int_equal(st.spans_failed, 0);
}

/* A call's spans and the metrics, still queued, are sent as the exporter
 * goes (by `end`), once each; end's answer. */
static int end_with_one_call_queued(world *w, int (*end)(resil_otlp *x))
{
    w->o.metrics = w->metrics;
    start(w);
    call(w);
    int rc = end(w->x);
    w->x = NULL;
    assert_int_equal(http_server_count(w->receiver, "/v1/traces"), 1);
    assert_int_equal(http_server_count(w->receiver, "/v1/metrics"), 1);
    json_decref(received(w, "/v1/traces", 0, true));
    json_decref(received(w, "/v1/metrics", 0, false));
    return rc;
}

static int free_it(resil_otlp *x)
{
    resil_otlp_free(x);
    return 0;
}

static void freeing_sends_what_is_still_queued(void **state)
{
    end_with_one_call_queued(*state, free_it);
}

static void closing_sends_what_is_queued_once_and_says_it_was_taken(void **state)
{
    assert_int_equal(end_with_one_call_queued(*state, resil_otlp_close), 0);
}

static void closing_says_a_refused_export_was_not_taken(void **state)
{
    world *w = *state;
    http_server_script(w->receiver, "/v1/traces", (const http_step[]){{.status = 400}}, 1);
    start(w);
    call(w);
    assert_int_equal(resil_otlp_close(w->x), RESIL_EIO);
    w->x = NULL;
    assert_int_equal(http_server_count(w->receiver, "/v1/traces"), 1);
}

static void options_are_checked_by_name(void **state)
{
    world *w = *state;
    resil_err err = {0, ""};
    resil_otlp *x = NULL;
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_new(&o, &x, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp.endpoint (or otlp.traces_endpoint) must be set");
    o.endpoint = "collector:4318";
    assert_int_equal(resil_otlp_new(&o, &x, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp.endpoint must be an http:// or https:// URL with a "
                                     "host, got \"collector:4318\"");
    o.endpoint = w->endpoint;
    o.max_batch = 4096;
    assert_int_equal(resil_otlp_new(&o, &x, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp.max_batch must be in [1, max_queue = 2048], got 4096");
    o.max_batch = 512;
    o.headers = "api-key=a\tb";
    assert_int_equal(resil_otlp_new(&o, &x, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp.headers: entry 1 value has a character that must be "
                                     "percent-encoded");
    o.headers = "x=%0d%0aInjected: 1";
    assert_int_equal(resil_otlp_new(&o, &x, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp.headers: entry 1 decodes to a control character");
    assert_null(x);
}

/* ---- each option's refusal, by name -------------------------------------------------- */

/* resil_otlp_new with `o`: RESIL_EINVAL and exactly `message`, nothing made. */
static void refused(const resil_otlp_opts *o, const char *message)
{
    resil_otlp *x = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_otlp_new(o, &x, &err), RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(x);
}

/* resil_otlp_new with `o` makes an exporter (freed at once: nothing is
 * queued and `o` has no metrics, so nothing is sent). */
static void accepted(const resil_otlp_opts *o)
{
    resil_otlp *x = NULL;
    resil_err err = {0, ""};
    if (resil_otlp_new(o, &x, &err) != 0)
        fail_msg("refused: %s", err.message);
    resil_otlp_stats st;
    resil_otlp_get_stats(x, &st);
    resil_otlp_free(x);
    assert_int_equal(st.requests, 0);
}

/* "http://" and `n` - 7 host bytes: a URL of n bytes. */
static char *url_of(size_t n)
{
    char *u = malloc(n + 1);
    assert_non_null(u);
    memcpy(u, "http://", 7);
    memset(u + 7, 'h', n - 7);
    u[n] = '\0';
    return u;
}

static void an_endpoint_of_1008_bytes_is_refused_by_name(void **state)
{
    world *w = *state;
    char *url = url_of(1008);
    w->o.endpoint = url;
    refused(&w->o, "otlp.endpoint must be at most 1007 bytes long, got 1008");
    free(url);
}

static void an_endpoint_of_1007_bytes_is_accepted(void **state)
{
    world *w = *state;
    char *url = url_of(1007);
    w->o.endpoint = url;
    accepted(&w->o);
    free(url);
}

static void a_traces_endpoint_of_1008_bytes_is_refused_by_name(void **state)
{
    world *w = *state;
    char *url = url_of(1008);
    w->o.traces_endpoint = url;
    refused(&w->o, "otlp.traces_endpoint must be at most 1007 bytes long, got 1008");
    free(url);
}

static void a_metrics_endpoint_of_1008_bytes_is_refused_by_name(void **state)
{
    world *w = *state;
    char *url = url_of(1008);
    w->o.metrics_endpoint = url;
    refused(&w->o, "otlp.metrics_endpoint must be at most 1007 bytes long, got 1008");
    free(url);
}

static void an_interval_of_zero_is_refused_by_name(void **state)
{
    world *w = *state;
    w->o.interval = 0;
    refused(&w->o, "otlp.interval must be > 0, got 0s");
}

static void a_schedule_delay_below_zero_is_refused_by_name(void **state)
{
    world *w = *state;
    w->o.schedule_delay = -1;
    refused(&w->o, "otlp.schedule_delay must be >= 0, got -1ns");
}

static void a_schedule_delay_of_zero_is_accepted(void **state)
{
    world *w = *state;
    w->o.schedule_delay = 0;
    accepted(&w->o);
}

/* libcurl counts the request's timeout in whole milliseconds, 0 meaning
 * none: a shorter one would not bound the request at all. */
static void a_timeout_under_a_millisecond_is_refused_by_name(void **state)
{
    world *w = *state;
    w->o.timeout = RESIL_MS(1) - 1;
    refused(&w->o, "otlp.timeout must be >= 1ms, got 999999ns");
}

static void a_timeout_of_zero_is_refused_by_name(void **state)
{
    world *w = *state;
    w->o.timeout = 0;
    refused(&w->o, "otlp.timeout must be >= 1ms, got 0s");
}

static void a_timeout_of_a_millisecond_is_accepted(void **state)
{
    world *w = *state;
    w->o.timeout = RESIL_MS(1);
    accepted(&w->o);
}

static void a_max_queue_of_zero_is_refused_by_name(void **state)
{
    world *w = *state;
    w->o.max_queue = 0;
    refused(&w->o, "otlp.max_queue must be in [1, 1048576], got 0");
}

static void a_max_queue_above_1048576_is_refused_by_name(void **state)
{
    world *w = *state;
    w->o.max_queue = (1u << 20) + 1;
    refused(&w->o, "otlp.max_queue must be in [1, 1048576], got 1048577");
}

static void a_max_queue_of_one_is_accepted(void **state)
{
    world *w = *state;
    w->o.max_queue = 1;
    w->o.max_batch = 1;
    accepted(&w->o);
}

static void a_service_name_of_256_bytes_is_refused_by_name(void **state)
{
    world *w = *state;
    char name[257];
    memset(name, 's', 256);
    name[256] = '\0';
    w->o.service_name = name;
    refused(&w->o, "otlp.service_name must be at most 255 bytes, got 256");
}

static void a_service_name_of_255_bytes_is_accepted(void **state)
{
    world *w = *state;
    char name[256];
    memset(name, 's', 255);
    name[255] = '\0';
    w->o.service_name = name;
    accepted(&w->o);
}

static void an_exporter_needs_options_and_out(void **state)
{
    world *w = *state;
    resil_otlp *x = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_otlp_new(NULL, &x, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp: options and out must not be NULL");
    assert_int_equal(resil_otlp_new(&w->o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp: options and out must not be NULL");
}

static void flushing_needs_an_exporter(void **state)
{
    (void)state;
    assert_int_equal(resil_otlp_flush(NULL), RESIL_EINVAL);
}

static void encoding_needs_an_exporter_and_out(void **state)
{
    world *w = *state;
    assert_int_equal(resil_otlp_new(&w->o, &w->x, NULL), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(resil_otlp_encode_spans(NULL, NULL, 0, &text, &len), RESIL_EINVAL);
    assert_int_equal(resil_otlp_encode_spans(w->x, NULL, 1, &text, &len), RESIL_EINVAL);
    assert_int_equal(resil_otlp_encode_spans(w->x, NULL, 0, NULL, &len), RESIL_EINVAL);
    assert_int_equal(resil_otlp_encode_metrics(NULL, w->metrics, 0, &text, &len), RESIL_EINVAL);
    assert_int_equal(resil_otlp_encode_metrics(w->x, NULL, 0, &text, &len), RESIL_EINVAL);
    assert_int_equal(resil_otlp_encode_metrics(w->x, w->metrics, 0, NULL, &len), RESIL_EINVAL);
    assert_null(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            spans_of_a_retried_call_arrive_as_valid_otlp_with_their_values, setup, teardown),
        cmocka_unit_test_setup_teardown(metrics_arrive_as_valid_otlp_with_names_units_and_points,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_full_queue_drops_and_counts_instead_of_waiting, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_refused_request_is_counted_and_reported_by_flush, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_refused_metrics_export_is_reported_by_flush, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(freeing_sends_what_is_still_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(closing_sends_what_is_queued_once_and_says_it_was_taken,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(closing_says_a_refused_export_was_not_taken, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_endpoint_ending_in_slashes_gets_the_signals_path_once,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_traces_endpoint_is_used_as_given,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_metrics_endpoint_is_used_as_given,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(without_a_service_name_option_the_resources_service_name_names_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(without_either_the_service_is_unknown_service,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(options_are_checked_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(an_endpoint_of_1008_bytes_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(an_endpoint_of_1007_bytes_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(a_traces_endpoint_of_1008_bytes_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_metrics_endpoint_of_1008_bytes_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(an_interval_of_zero_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_schedule_delay_below_zero_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_schedule_delay_of_zero_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(a_timeout_under_a_millisecond_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_timeout_of_zero_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_timeout_of_a_millisecond_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(a_max_queue_of_zero_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_max_queue_above_1048576_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_max_queue_of_one_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(a_service_name_of_256_bytes_is_refused_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(a_service_name_of_255_bytes_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(an_exporter_needs_options_and_out, setup, teardown),
        cmocka_unit_test_setup_teardown(flushing_needs_an_exporter, setup, teardown),
        cmocka_unit_test_setup_teardown(encoding_needs_an_exporter_and_out, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
