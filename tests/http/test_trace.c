/*
 * test_trace.c — W3C Trace Context through the HTTP adapter, checked on
 * what really reached the server: each attempt its own traceparent in the
 * caller's trace (the one the tracer reports for it), the caller's own
 * header taken as the parent and never sent twice, a sampled-out parent
 * passed on as it came; and the semantic-convention attributes a client's
 * metrics are labelled with.
 */
#include "http_fixture.h"

#define OK_STEP {.status = 200, .body = "ok\n"}

static const char *const parent_text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

typedef struct spans {
    resil_span s[8];
    int n;
} spans;

static void keep(const resil_span *s, void *ud)
{
    spans *k = ud;
    if (k->n < 8)
        k->s[k->n++] = *s;
}

static void trace_with(fx *f, resil_tracer *t, spans *got)
{
    resil_tracer_opts o;
    resil_tracer_opts_default(&o);
    o.on_span = keep;
    o.on_span_ud = got;
    o.clock = f->opts.clock;
    assert_int_equal(resil_tracer_init(t, &o, NULL), 0);
    f->opts.listener = resil_tracer_on_event;
    f->opts.listener_ud = t;
}

static resil_span_context sent_context(fx *f, size_t i)
{
    const http_request *r = http_server_request(f->server, "/a", i);
    assert_non_null(r);
    assert_int_equal(http_request_header_count(r, "traceparent"), 1);
    char value[128];
    assert_true(http_request_header(r, "traceparent", value, sizeof value));
    resil_span_context c;
    assert_int_equal(resil_traceparent_parse(value, strlen(value), &c, NULL), 0);
    return c;
}

static void each_attempt_sends_its_own_span_in_the_callers_trace(void **state)
{
    fx *f = *state;
    resil_tracer tracer;
    spans got = {0};
    trace_with(f, &tracer, &got);
    resil_span_context parent;
    assert_int_equal(resil_traceparent_parse(parent_text, strlen(parent_text), &parent, NULL), 0);
    assert_int_equal(resil_tracestate_parse("rojo=1", 6, &parent, NULL), 0);
    f->req.trace = &parent;
    fx_script(f, "/a", FX_STEPS({.status = 503}, {.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 3);
    assert_int_equal(got.n, 4); /* three attempts, then the execution */
    for (size_t i = 0; i < 3; i++) {
        resil_span_context c = sent_context(f, i);
        assert_memory_equal(c.trace_id, parent.trace_id, 16);
        assert_int_equal(c.flags, RESIL_TRACE_SAMPLED);
        assert_memory_equal(c.span_id, got.s[i].span_id, 8); /* the attempt's span */
        assert_memory_equal(got.s[i].parent_id, got.s[3].span_id, 8);
        char state_value[64];
        assert_true(http_request_header(http_server_request(f->server, "/a", i), "tracestate",
                                        state_value, sizeof state_value));
        assert_string_equal(state_value, "rojo=1");
    }
    assert_memory_equal(got.s[3].parent_id, parent.span_id, 8);
    assert_memory_not_equal(sent_context(f, 0).span_id, sent_context(f, 1).span_id, 8);
}

static void the_callers_traceparent_header_is_the_parent_and_sent_once(void **state)
{
    fx *f = *state;
    resil_tracer tracer;
    spans got = {0};
    trace_with(f, &tracer, &got);
    char line[128];
    snprintf(line, sizeof line, "traceparent: %s", parent_text);
    struct curl_slist *h = curl_slist_append(NULL, line);
    h = curl_slist_append(h, "X-Team: orders");
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, h);
    f->req.headers = h;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/a", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    resil_span_context parent;
    assert_int_equal(resil_traceparent_parse(parent_text, strlen(parent_text), &parent, NULL), 0);
    for (size_t i = 0; i < 2; i++) {
        resil_span_context c = sent_context(f, i);
        assert_int_equal(c.trace_id[0], 0x4b);
        /* the attempt's own span: random, so only all 8 bytes tell */
        assert_memory_not_equal(c.span_id, parent.span_id, 8);
        const http_request *r = http_server_request(f->server, "/a", i);
        assert_int_equal(http_request_header_count(r, "X-Team"), 1);
        assert_int_equal(http_request_header_count(r, "Idempotency-Key"), 1);
    }
    assert_int_equal(got.s[got.n - 1].parent_id[7], 0xb7);
    curl_slist_free_all(h);
}

static void a_sampled_out_parent_is_passed_on_as_it_came(void **state)
{
    fx *f = *state;
    resil_tracer tracer;
    spans got = {0};
    trace_with(f, &tracer, &got);
    const char *unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    resil_span_context parent;
    assert_int_equal(resil_traceparent_parse(unsampled, strlen(unsampled), &parent, NULL), 0);
    f->req.trace = &parent;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    char value[128];
    assert_true(http_request_header(http_server_request(f->server, "/a", 0), "traceparent", value,
                                    sizeof value));
    assert_string_equal(value, unsampled);
    assert_int_equal(got.n, 0);
}

static void an_untraced_request_sends_no_trace_context(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(http_request_header_count(http_server_request(f->server, "/a", 0),
                                               "traceparent"),
                     0);
}

/* A context of the caller's own goes onto the wire as it is: one a
 * traceparent cannot carry, or a tracestate that would end its header
 * early, is refused before any request. */
static void a_context_the_wire_cannot_carry_is_refused_before_any_request(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    resil_span_context c;
    assert_int_equal(resil_traceparent_parse(parent_text, strlen(parent_text), &c, NULL), 0);
    f->req.trace = &c;
    snprintf(c.tracestate, sizeof c.tracestate, "rojo=1\r\nX-Evil: yes");
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    c.tracestate[0] = '\0';
    memset(c.trace_id, 0, sizeof c.trace_id);
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    assert_int_equal(resil_traceparent_parse(parent_text, strlen(parent_text), &c, NULL), 0);
    memset(c.span_id, 0, sizeof c.span_id);
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    assert_int_equal(fx_count(f, "/a"), 0);
    assert_int_equal(resil_traceparent_parse(parent_text, strlen(parent_text), &c, NULL), 0);
    snprintf(c.tracestate, sizeof c.tracestate, "rojo=1");
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(http_request_header_count(http_server_request(f->server, "/a", 0),
                                               "tracestate"), 1);
}

static void client_metrics_carry_the_http_attributes(void **state)
{
    fx *f = *state;
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);
    f->opts.listener = resil_metrics_on_event;
    f->opts.listener_ud = m;
    fx_script(f, "/a", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    char *text;
    assert_int_equal(resil_metrics_prometheus_string(m, &text, NULL), 0);
    char want[256];
    snprintf(want, sizeof want,
             "http_client_request_resilience_attempt_duration_seconds_count{"
             "http_request_method=\"GET\",server_address=\"127.0.0.1\",server_port=\"%d\","
             "http_response_status_code=\"503\",error_type=\"503\"} 1\n",
             http_server_port(f->server));
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want,
             "http_client_request_resilience_retry_attempts_total{"
             "http_request_method=\"GET\",server_address=\"127.0.0.1\",server_port=\"%d\"} 1\n",
             http_server_port(f->server));
    assert_non_null(strstr(text, want));
    free(text);
    resil_http_client_free(f->client);
    f->client = NULL;
    resil_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(each_attempt_sends_its_own_span_in_the_callers_trace,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(the_callers_traceparent_header_is_the_parent_and_sent_once,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_sampled_out_parent_is_passed_on_as_it_came, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(an_untraced_request_sends_no_trace_context, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(
            a_context_the_wire_cannot_carry_is_refused_before_any_request, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(client_metrics_carry_the_http_attributes, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
