/*
 * test_trace.c — W3C Trace Context parsing and formatting, and the spans
 * the tracer makes of a traced execution: one per execution and attempt,
 * all in the caller's trace, the attempts children of the execution, each
 * attempt's span id the one the operation propagated.
 */
#include "test.h"
#include "virtual_loop.h"

/* ---- traceparent ------------------------------------------------------------- */

static const char *const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

static void traceparent_reads_ids_and_flags(void **state)
{
    (void)state;
    resil_span_context c;
    assert_int_equal(resil_traceparent_parse(valid, strlen(valid), &c, NULL), 0);
    assert_int_equal(c.trace_id[0], 0x4b);
    assert_int_equal(c.trace_id[15], 0x36);
    assert_int_equal(c.span_id[0], 0x00);
    assert_int_equal(c.span_id[7], 0xb7);
    assert_int_equal(c.flags, RESIL_TRACE_SAMPLED);
    assert_string_equal(c.tracestate, "");
    char back[RESIL_TRACEPARENT_LEN + 1];
    assert_int_equal(resil_traceparent_format(&c, back, sizeof back), RESIL_TRACEPARENT_LEN);
    assert_string_equal(back, valid);
}

static void traceparent_allows_surrounding_spaces_and_later_versions(void **state)
{
    (void)state;
    resil_span_context c;
    const char *spaced = " \t00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ";
    assert_int_equal(resil_traceparent_parse(spaced, strlen(spaced), &c, NULL), 0);
    assert_int_equal(c.flags, 0);
    const char *later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff-what-comes";
    assert_int_equal(resil_traceparent_parse(later, strlen(later), &c, NULL), 0);
    assert_int_equal(c.flags, RESIL_TRACE_SAMPLED); /* only the bits version 00 knows */
}

static void expect_bad_traceparent(const char *text, const char *message)
{
    resil_span_context c;
    memset(&c, 0x5a, sizeof c);
    resil_err err = {0, ""};
    assert_int_equal(resil_traceparent_parse(text, strlen(text), &c, &err), RESIL_ESYNTAX);
    assert_string_equal(err.message, message);
    assert_int_equal(c.flags, 0x5a); /* untouched */
}

static void traceparent_refuses_what_the_grammar_does_not_allow(void **state)
{
    (void)state;
    expect_bad_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                           "traceparent must be 00-<32 hex>-<16 hex>-<2 hex>, got 54 bytes");
    expect_bad_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                           "traceparent trace-id must be 32 lower-case hex digits");
    expect_bad_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                           "traceparent trace-id must not be all zero");
    expect_bad_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                           "traceparent parent-id must not be all zero");
    expect_bad_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bx-01",
                           "traceparent parent-id must be 16 lower-case hex digits");
    expect_bad_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
                           "traceparent trace-flags must be 2 lower-case hex digits");
    expect_bad_traceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                           "traceparent version ff is invalid");
    expect_bad_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                           "traceparent version 00 must be 55 bytes, got 57");
    expect_bad_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
                           "traceparent: a later version's extra fields follow a '-'");
}

/* ---- tracestate ---------------------------------------------------------------------- */

static void tracestate_keeps_members_in_order_without_blanks(void **state)
{
    (void)state;
    resil_span_context c;
    const char *text = "rojo=00f067aa0ba902b7 ,, congo=t61rcWkgMzE\t,tenant@vendor=a b";
    assert_int_equal(resil_tracestate_parse(text, strlen(text), &c, NULL), 0);
    assert_string_equal(c.tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE,tenant@vendor=a b");
    assert_int_equal(resil_tracestate_parse("", 0, &c, NULL), 0);
    assert_string_equal(c.tracestate, "");
}

static void expect_bad_tracestate(const char *text, const char *message)
{
    resil_span_context c;
    snprintf(c.tracestate, sizeof c.tracestate, "old=1");
    resil_err err = {0, ""};
    assert_int_equal(resil_tracestate_parse(text, strlen(text), &c, &err), RESIL_ESYNTAX);
    assert_string_equal(err.message, message);
    assert_string_equal(c.tracestate, ""); /* discarded, as the specification asks */
}

static void tracestate_refuses_bad_keys_values_repeats_and_excess(void **state)
{
    (void)state;
    expect_bad_tracestate("Rojo=1",
                          "tracestate key is not lcalpha [a-z0-9_*/-] (or tenant@system) (member 1)");
    expect_bad_tracestate("a=1,b", "tracestate member has no '=' (member 2)");
    expect_bad_tracestate("a=1,b=x=y",
                          "tracestate value must be 1-256 printable bytes but ',' '=' (member 2)");
    expect_bad_tracestate("a=1,a=2", "tracestate repeats a key (member 2)");
    expect_bad_tracestate("a=", "tracestate value must be 1-256 printable bytes but ',' '=' (member 1)");
    expect_bad_tracestate("t@verylongsystemid=1",
                          "tracestate key is not lcalpha [a-z0-9_*/-] (or tenant@system) (member 1)");
    char many[400] = "";
    for (int i = 0; i < 33; i++) {
        size_t n = strlen(many);
        snprintf(many + n, sizeof many - n, "%sk%d=v", i ? "," : "", i);
    }
    expect_bad_tracestate(many, "tracestate has more than 32 members (member 33)");
    char longer[700];
    snprintf(longer, sizeof longer, "a=%0256d,b=%0256d", 0, 0);
    expect_bad_tracestate(longer, "tracestate is longer than 512 bytes (member 2)");
}

/* ---- spans of an execution ---------------------------------------------------------- */

typedef struct spans {
    resil_span s[16];
    resil_outcome outcome[16];
    char tracestate[16][RESIL_TRACESTATE_MAX + 1];
    int n;
} spans;

static void keep(const resil_span *s, void *ud)
{
    spans *k = ud;
    assert_true(k->n < 16);
    k->s[k->n] = *s;
    if (s->outcome != NULL)
        k->outcome[k->n] = *s->outcome;
    snprintf(k->tracestate[k->n], sizeof k->tracestate[0], "%s", s->tracestate);
    k->n++;
}

typedef struct world {
    resil_fake_clock *fc;
    resil_pipeline *p;
    resil_tracer tracer;
    spans got;
    int calls;
    resil_span_context sent[4]; /* what each attempt propagated */
    int sent_rc[4];
} world;

static resil_outcome flaky(resil_attempt_ctx *ctx)
{
    world *w = ctx->user;
    w->sent_rc[w->calls] = resil_attempt_span(ctx, &w->sent[w->calls]);
    w->calls++;
    resil_fake_clock_advance(w->fc, RESIL_MS(10));
    return w->calls < 3 ? resil_fail(RESIL_TRANSIENT, 503, "service unavailable") : resil_ok();
}

static int setup(void **state)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), INT64_C(1700000000000000000), &w->fc), 0);
    resil_tracer_opts o;
    resil_tracer_opts_default(&o);
    o.on_span = keep;
    o.on_span_ud = &w->got;
    o.clock = resil_fake_clock_clock(w->fc);
    assert_int_equal(resil_tracer_init(&w->tracer, &o, NULL), 0);
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
    assert_int_equal(resil_pipeline_builder_listen(b, resil_tracer_on_event, &w->tracer), 0);
    assert_int_equal(resil_pipeline_build(b, &w->p, NULL), 0);
    resil_pipeline_builder_free(b);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    resil_pipeline_free(w->p);
    resil_fake_clock_free(w->fc);
    free(w);
    return 0;
}

static void execute(world *w, const resil_span_context *parent)
{
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    c.operation = "GetOrder";
    resil_call_telemetry tel = {.trace = parent};
    c.telemetry = &tel;
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(w->p, flaky, &c, &r), 0);
}

static void a_retried_call_is_an_execution_span_over_three_attempt_spans(void **state)
{
    world *w = *state;
    resil_span_context parent;
    assert_int_equal(resil_traceparent_parse(valid, strlen(valid), &parent, NULL), 0);
    assert_int_equal(resil_tracestate_parse("rojo=1", 6, &parent, NULL), 0);
    execute(w, &parent);
    assert_int_equal(w->got.n, 4);
    const resil_span *exec = &w->got.s[3];
    assert_int_equal(exec->type, RESIL_SPAN_EXECUTION);
    assert_string_equal(exec->name, "execution");
    assert_memory_equal(exec->trace_id, parent.trace_id, 16);
    assert_memory_equal(exec->parent_id, parent.span_id, 8);
    assert_memory_not_equal(exec->span_id, parent.span_id, 8);
    assert_int_equal(exec->attempt, 3);
    assert_int_equal(exec->end_unix_ns - exec->start_unix_ns, RESIL_MS(4030));
    assert_int_equal(exec->start_unix_ns, INT64_C(1700000000000000000));
    assert_string_equal(w->got.tracestate[3], "rojo=1");
    static const resil_duration waits[] = {0, RESIL_S(2), RESIL_S(2)};
    for (int i = 0; i < 3; i++) {
        const resil_span *a = &w->got.s[i];
        assert_int_equal(a->type, RESIL_SPAN_ATTEMPT);
        assert_int_equal(a->attempt, (uint32_t)i + 1);
        assert_memory_equal(a->trace_id, parent.trace_id, 16);
        assert_memory_equal(a->parent_id, exec->span_id, 8);
        assert_int_equal(w->sent_rc[i], 0);
        assert_memory_equal(a->span_id, w->sent[i].span_id, 8); /* what went downstream */
        assert_int_equal(a->wait_before, waits[i]);
        assert_int_equal(a->end_unix_ns - a->start_unix_ns, RESIL_MS(10));
        assert_int_equal(a->handled, i < 2);
        assert_int_equal(a->stop, i < 2 ? RESIL_STOP_NONE : RESIL_STOP_SUCCEEDED);
        assert_int_equal(w->got.outcome[i].kind, i < 2 ? RESIL_TRANSIENT : RESIL_SUCCESS);
    }
    assert_memory_not_equal(w->got.s[0].span_id, w->got.s[1].span_id, 8);
    assert_int_equal(w->got.s[1].start_unix_ns,
                     INT64_C(1700000000000000000) + RESIL_MS(10) + RESIL_S(2));
}

/* ---- the same spans from an asynchronous execution ----------------------------------------- */

static void flaky_async(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    resil_attempt_ctx copy = *ctx;
    resil_outcome o = flaky(&copy);
    resil_attempt_done(a, &o);
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    (void)res;
    *(bool *)ud = true;
}

static void an_asynchronous_execution_makes_the_same_spans(void **state)
{
    world *w = *state;
    resil_span_context parent;
    assert_int_equal(resil_traceparent_parse(valid, strlen(valid), &parent, NULL), 0);
    virtual_loop vl;
    virtual_loop_init(&vl, w->fc);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&vl.loop));
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(2);
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    assert_int_equal(resil_pipeline_builder_listen(b, resil_tracer_on_event, &w->tracer), 0);
    resil_pipeline *async;
    assert_int_equal(resil_pipeline_build(b, &async, NULL), 0);
    resil_pipeline_builder_free(b);
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    c.operation = "GetOrder";
    resil_call_telemetry tel = {.trace = &parent};
    c.telemetry = &tel;
    bool done = false;
    assert_int_equal(resil_pipeline_start(async, &vl.loop, flaky_async, &c, ended, &done, NULL), 0);
    virtual_loop_run(&vl, &done);
    assert_int_equal(w->got.n, 4);
    const resil_span *exec = &w->got.s[3];
    assert_int_equal(exec->type, RESIL_SPAN_EXECUTION);
    assert_memory_equal(exec->parent_id, parent.span_id, 8);
    assert_int_equal(exec->end_unix_ns - exec->start_unix_ns, RESIL_MS(4030));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(w->got.s[i].type, RESIL_SPAN_ATTEMPT);
        assert_memory_equal(w->got.s[i].parent_id, exec->span_id, 8);
        assert_memory_equal(w->got.s[i].span_id, w->sent[i].span_id, 8);
        assert_int_equal(w->got.s[i].wait_before, i == 0 ? 0 : RESIL_S(2));
    }
    resil_pipeline_free(async);
    virtual_loop_destroy(&vl);
}

/* ---- hedges ------------------------------------------------------------------------------------ */

/* The launch makes no span; the hedged attempt's end does, from its
 * launch (end minus duration) to that end, with its outcome. */
static void a_hedge_is_a_span_from_its_launch_to_its_end_linked_to_the_primary(void **state)
{
    world *w = *state;
    resil_exec_trace t;
    resil_trace_new(NULL, true, &t.span);
    memset(t.parent_id, 0, sizeof t.parent_id);
    resil_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = RESIL_EVENT_HEDGE;
    ev.pipeline = "orders";
    ev.strategy = "hedging";
    ev.key = ev.reason = ev.from_name = ev.to_name = "";
    ev.at = RESIL_S(1);
    ev.attempt = 2;
    ev.hedge = 1;
    ev.trace = &t;
    resil_tracer_on_event(&ev, &w->tracer);
    assert_int_equal(w->got.n, 0);
    resil_outcome failed = resil_fail(RESIL_TRANSIENT, 503, "hedge");
    ev.type = RESIL_EVENT_HEDGE_ENDED;
    resil_fake_clock_advance(w->fc, RESIL_S(4));
    ev.at = RESIL_S(4); /* a second before the clock's now */
    ev.duration = RESIL_MS(1500);
    ev.outcome = &failed;
    resil_tracer_on_event(&ev, &w->tracer);
    assert_int_equal(w->got.n, 1);
    const resil_span *h = &w->got.s[0];
    assert_int_equal(h->type, RESIL_SPAN_HEDGE);
    assert_string_equal(h->name, "hedge");
    assert_int_equal(h->hedge, 1);
    assert_int_equal(h->attempt, 2);
    assert_int_equal(h->end_unix_ns, INT64_C(1700000000000000000) + RESIL_S(3));
    assert_int_equal(h->start_unix_ns, INT64_C(1700000000000000000) + RESIL_MS(1500));
    assert_int_equal(w->got.outcome[0].kind, RESIL_TRANSIENT);
    assert_int_equal(w->got.outcome[0].code, 503);
    assert_true(h->linked);
    resil_span_context primary, hedged;
    resil_exec_trace_attempt(&t, 2, 0, &primary);
    resil_exec_trace_attempt(&t, 2, 1, &hedged);
    assert_memory_equal(h->link_id, primary.span_id, 8);
    assert_memory_equal(h->span_id, hedged.span_id, 8); /* what the hedged request sent */
    assert_memory_equal(h->parent_id, t.span.span_id, 8);
    assert_memory_not_equal(primary.span_id, hedged.span_id, 8);
}

static void a_sampled_out_call_makes_no_span_and_propagates_nothing(void **state)
{
    world *w = *state;
    resil_span_context parent;
    resil_trace_new(NULL, false, &parent);
    execute(w, &parent);
    assert_int_equal(w->got.n, 0);
    assert_int_equal(w->sent_rc[0], RESIL_ENOTFOUND);
}

static void an_untraced_call_makes_no_span(void **state)
{
    world *w = *state;
    execute(w, NULL);
    assert_int_equal(w->got.n, 0);
    assert_int_equal(w->sent_rc[2], RESIL_ENOTFOUND);
}

static void new_roots_have_random_nonzero_ids(void **state)
{
    (void)state;
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, 42);
    resil_span_context a, b;
    resil_trace_new(&rng.base, true, &a);
    resil_trace_new(&rng.base, true, &b);
    assert_int_equal(a.flags, RESIL_TRACE_SAMPLED);
    assert_memory_not_equal(a.trace_id, b.trace_id, 16);
    assert_memory_not_equal(a.span_id, b.span_id, 8);
    static const uint8_t zero[16];
    assert_memory_not_equal(a.trace_id, zero, 16);
    assert_memory_not_equal(a.span_id, zero, 8);
}

static void authorities_split_into_server_address_and_port(void **state)
{
    (void)state;
    char host[16];
    int port = 0;
    assert_int_equal(resil_authority_split("https://api.example:443", host, sizeof host, &port), 0);
    assert_string_equal(host, "api.example");
    assert_int_equal(port, 443);
    assert_int_equal(resil_authority_split("http://[::1]:8080", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 8080);
    assert_int_equal(resil_authority_split("orders", host, sizeof host, &port), RESIL_ESYNTAX);
    assert_int_equal(resil_authority_split("http://h:99999", host, sizeof host, &port),
                     RESIL_ESYNTAX);
    assert_int_equal(resil_authority_split("http://h:", host, sizeof host, &port), RESIL_ESYNTAX);
    assert_int_equal(resil_authority_split("http://a-very-long-host-name:1", host, sizeof host,
                                           &port),
                     RESIL_ERANGE);
}

static void tracer_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_tracer t;
    resil_tracer_opts o;
    resil_tracer_opts_default(&o);
    resil_err err = {0, ""};
    assert_int_equal(resil_tracer_init(&t, &o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "tracer.on_span must not be NULL");
}

static void an_authority_without_a_host_does_not_split(void **state)
{
    (void)state;
    char host[16] = "";
    int port = 0;
    assert_int_equal(resil_authority_split("http://:8080", host, sizeof host, &port),
                     RESIL_ESYNTAX);
    assert_int_equal(resil_authority_split("http://[]:8080", host, sizeof host, &port),
                     RESIL_ESYNTAX);
    assert_int_equal(port, 0);
}

static void parsing_a_traceparent_needs_text_and_out(void **state)
{
    (void)state;
    resil_span_context c;
    resil_err err = {0, ""};
    assert_int_equal(resil_traceparent_parse(NULL, 0, &c, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "traceparent: text and out must not be NULL");
    assert_int_equal(resil_traceparent_parse("00", 2, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "traceparent: text and out must not be NULL");
}

static void parsing_a_tracestate_needs_text_and_out(void **state)
{
    (void)state;
    resil_span_context c;
    resil_err err = {0, ""};
    assert_int_equal(resil_tracestate_parse(NULL, 0, &c, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "tracestate: text and out must not be NULL");
    assert_int_equal(resil_tracestate_parse("a=1", 3, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "tracestate: text and out must not be NULL");
}

static void an_attempts_span_needs_its_context_and_out(void **state)
{
    (void)state;
    resil_attempt_ctx ctx = {0};
    resil_span_context c;
    assert_int_equal(resil_attempt_span(NULL, &c), RESIL_EINVAL);
    assert_int_equal(resil_attempt_span(&ctx, NULL), RESIL_EINVAL);
}

static void a_tracer_needs_itself_and_options(void **state)
{
    (void)state;
    resil_tracer t;
    resil_tracer_opts o;
    resil_tracer_opts_default(&o);
    resil_err err = {0, ""};
    assert_int_equal(resil_tracer_init(NULL, &o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "tracer: tracer and options must not be NULL");
    assert_int_equal(resil_tracer_init(&t, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "tracer: tracer and options must not be NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(traceparent_reads_ids_and_flags),
        cmocka_unit_test(traceparent_allows_surrounding_spaces_and_later_versions),
        cmocka_unit_test(traceparent_refuses_what_the_grammar_does_not_allow),
        cmocka_unit_test(tracestate_keeps_members_in_order_without_blanks),
        cmocka_unit_test(tracestate_refuses_bad_keys_values_repeats_and_excess),
        cmocka_unit_test_setup_teardown(a_retried_call_is_an_execution_span_over_three_attempt_spans,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_asynchronous_execution_makes_the_same_spans, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_hedge_is_a_span_from_its_launch_to_its_end_linked_to_the_primary, setup, teardown),
        cmocka_unit_test_setup_teardown(a_sampled_out_call_makes_no_span_and_propagates_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_untraced_call_makes_no_span, setup, teardown),
        cmocka_unit_test(new_roots_have_random_nonzero_ids),
        cmocka_unit_test(authorities_split_into_server_address_and_port),
        cmocka_unit_test(tracer_options_are_checked_by_name),
        cmocka_unit_test(an_authority_without_a_host_does_not_split),
        cmocka_unit_test(parsing_a_traceparent_needs_text_and_out),
        cmocka_unit_test(parsing_a_tracestate_needs_text_and_out),
        cmocka_unit_test(an_attempts_span_needs_its_context_and_out),
        cmocka_unit_test(a_tracer_needs_itself_and_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
