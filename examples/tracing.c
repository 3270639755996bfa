/*
 * tracing.c — a retried call as a trace: the tracer turns the pipeline's
 * events into an execution span and one span per attempt, children of the
 * caller's span given as a W3C traceparent, and this program prints them
 * as a tree. The dependency answers 503, 503, then 200, on the fake clock
 * with a seeded generator, so the output (docs/telemetry.md) is the same
 * on every run.
 */
#include <stdio.h>
#include <string.h>

#include "resil.h"

#define MAX_SPANS 8

typedef struct kept {
    resil_span s;
    resil_outcome outcome;
} kept;

typedef struct trace {
    kept spans[MAX_SPANS];
    int n;
} trace;

static void keep(const resil_span *s, void *ud)
{
    trace *t = ud;
    if (t->n == MAX_SPANS)
        return;
    kept *k = &t->spans[t->n++];
    k->s = *s;
    if (s->outcome != NULL)
        k->outcome = *s->outcome;
}

static resil_fake_clock *fc;
static int calls;

static resil_outcome dependency(resil_attempt_ctx *ctx)
{
    resil_span_context mine; /* what the attempt would send as its traceparent */
    char header[RESIL_TRACEPARENT_LEN + 1];
    if (resil_attempt_span(ctx, &mine) == 0 && resil_traceparent_format(&mine, header, sizeof header))
        printf("attempt %u sends traceparent: %s\n", ctx->attempt, header);
    resil_fake_clock_advance(fc, RESIL_MS(10));
    return ++calls < 3 ? resil_fail(RESIL_TRANSIENT, 503, "service unavailable") : resil_ok();
}

static void hex(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

static void print_span(const kept *k, int64_t t0, const char *indent)
{
    const resil_span *s = &k->s;
    char kind[16] = "";
    if (s->outcome != NULL)
        snprintf(kind, sizeof kind, "%s", resil_kind_name(k->outcome.kind));
    printf("%s%s", indent, s->name);
    if (s->type == RESIL_SPAN_ATTEMPT)
        printf(" %u", s->attempt);
    printf("  span=");
    hex(s->span_id, 8);
    printf("  %.0f-%.0f ms", ms(s->start_unix_ns - t0), ms(s->end_unix_ns - t0));
    if (s->type == RESIL_SPAN_EXECUTION)
        printf("  attempts=%u", s->attempt);
    if (s->type == RESIL_SPAN_ATTEMPT) {
        char wait[32];
        resil_duration_format(s->wait_before, wait, sizeof wait);
        printf("  wait_before=%s handled=%s", wait, s->handled ? "true" : "false");
    }
    printf("  outcome=%s", kind);
    if (k->outcome.kind != RESIL_SUCCESS)
        printf(" (%lld %s)", (long long)k->outcome.code, k->outcome.detail);
    if (s->stop != RESIL_STOP_NONE)
        printf("  stop=%s", resil_stop_name(s->stop));
    printf("\n");
}

int main(void)
{
    if (resil_fake_clock_new(0, INT64_C(1700000000) * RESIL_S(1), &fc) != 0)
        return 1;
    trace t = {.n = 0};
    resil_tracer tracer;
    resil_tracer_opts to;
    resil_tracer_opts_default(&to);
    to.on_span = keep;
    to.on_span_ud = &t;
    to.clock = resil_fake_clock_clock(fc);
    resil_tracer_init(&tracer, &to, NULL);

    resil_pipeline_builder *b;
    resil_pipeline_builder_new("orders", &b, NULL);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(fc));
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(2);
    p.backoff.jitter = RESIL_JITTER_NONE;
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_builder_listen(b, resil_tracer_on_event, &tracer);
    resil_pipeline *pipeline;
    resil_err err;
    if (resil_pipeline_build(b, &pipeline, &err) != 0) {
        fprintf(stderr, "build: %s\n", err.message);
        return 1;
    }
    resil_pipeline_builder_free(b);

    /* The caller's span, as it would arrive in a request's traceparent. */
    const char *incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    resil_span_context parent;
    resil_traceparent_parse(incoming, strlen(incoming), &parent, NULL);
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, 42);
    resil_call c;
    resil_call_default(&c);
    c.operation = "GetOrder";
    resil_call_telemetry tel = {.trace = &parent};
    c.telemetry = &tel;
    c.rng = &rng.base;
    resil_pipeline_result r;
    resil_pipeline_execute(pipeline, dependency, &c, &r);

    const kept *exec = &t.spans[t.n - 1];
    int64_t t0 = exec->s.start_unix_ns;
    printf("\ntrace ");
    hex(exec->s.trace_id, 16);
    printf("\nparent (the caller's span) ");
    hex(exec->s.parent_id, 8);
    printf("\n");
    print_span(exec, t0, "");
    for (int i = 0; i < t.n - 1; i++)
        print_span(&t.spans[i], t0, i < t.n - 2 ? "  |- " : "  `- ");

    resil_pipeline_free(pipeline);
    resil_fake_clock_free(fc);
    return 0;
}
