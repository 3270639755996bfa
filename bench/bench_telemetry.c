/*
 * bench_telemetry.c — what telemetry costs per execution of the standard
 * pipeline on its success path (two events: the attempt and the
 * execution).
 *
 * The metrics sink under the OpenTelemetry names (more labels per series:
 * operation, severity, attempt number) against the same sink under the
 * resil names, which is what the sink cost before (target: within 20 %).
 * Then tracing: a call whose parent is sampled out, against the same
 * pipeline with a listener that does nothing and no trace (target: at
 * most 5 ns more), and a sampled call whose two spans go to a sink that
 * does nothing, against the same baseline.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "resil.h"

typedef struct job {
    const resil_pipeline *p;
    const resil_call *call;
} job;

static resil_outcome succeed(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static void execute(void *ud, uint64_t iters)
{
    const job *j = ud;
    uint64_t ok = 0;
    resil_pipeline_result r;
    for (uint64_t i = 0; i < iters; i++) {
        resil_pipeline_execute(j->p, succeed, j->call, &r);
        ok += r.outcome.kind == RESIL_SUCCESS;
    }
    bench_consume(ok);
}

static void ignore(const resil_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
}

static void drop_span(const resil_span *s, void *ud)
{
    (void)ud;
    BENCH_KEEP(s->span_id[0]);
}

static resil_pipeline *standard(resil_event_fn listen, void *ud, resil_metrics *m)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    resil_pipeline_builder *b;
    resil_pipeline *p = NULL;
    if (resil_pipeline_builder_new("standard", &b, NULL) != 0)
        exit(1);
    resil_pipeline_add_standard(b, &o);
    if (listen != NULL)
        resil_pipeline_builder_listen(b, listen, ud);
    if (m != NULL)
        resil_pipeline_builder_metrics(b, m);
    if (resil_pipeline_build(b, &p, NULL) != 0)
        exit(1);
    resil_pipeline_builder_free(b);
    return p;
}

static resil_metrics *sink(resil_metrics_names names)
{
    resil_metrics_opts o;
    resil_metrics_opts_default(&o);
    o.names = names;
    resil_metrics *m;
    if (resil_metrics_new(&o, &m, NULL) != 0)
        exit(1);
    return m;
}

static bench_result run(const char *name, const resil_pipeline *p, const resil_call *c)
{
    job j = {p, c};
    return bench_run(name, execute, &j);
}

int main(void)
{
    resil_call plain;
    resil_call_default(&plain);
    plain.operation = "GetOrder";

    resil_metrics *old_names = sink(RESIL_METRICS_NAMES_RESIL);
    resil_metrics *otel_names = sink(RESIL_METRICS_NAMES_OTEL);
    resil_pipeline *p_old = standard(NULL, NULL, old_names);
    resil_pipeline *p_otel = standard(NULL, NULL, otel_names);
    bench_result before = run("metrics_resil_names", p_old, &plain);
    bench_report(before, before, "strategies=5 names=resil");
    bench_report(run("metrics_otel_names", p_otel, &plain), before,
                 "strategies=5 names=otel target=within_20_percent_of_baseline");

    resil_tracer tracer;
    resil_tracer_opts to;
    resil_tracer_opts_default(&to);
    to.on_span = drop_span;
    if (resil_tracer_init(&tracer, &to, NULL) != 0)
        return 1;
    resil_pipeline *p_noop = standard(ignore, NULL, NULL);
    resil_pipeline *p_traced = standard(resil_tracer_on_event, &tracer, NULL);
    bench_result listening = run("listener_untraced", p_noop, &plain);
    bench_report(listening, listening, "strategies=5 telemetry=noop-listener");

    resil_span_context out, in;
    resil_trace_new(NULL, false, &out);
    resil_trace_new(NULL, true, &in);
    resil_call sampled_out = plain, sampled = plain;
    resil_call_telemetry tel_out = {.trace = &out}, tel_in = {.trace = &in};
    sampled_out.telemetry = &tel_out;
    sampled.telemetry = &tel_in;
    bench_report(run("span_sampled_out", p_traced, &sampled_out), listening,
                 "strategies=5 spans=0 target=at_most_5ns_over_baseline");
    bench_report(run("spans_recorded", p_traced, &sampled), listening,
                 "strategies=5 spans=2 (execution+attempt) per_span=(ns-baseline)/2");

    resil_pipeline_free(p_old);
    resil_pipeline_free(p_otel);
    resil_pipeline_free(p_noop);
    resil_pipeline_free(p_traced);
    resil_metrics_free(old_names);
    resil_metrics_free(otel_names);
    return 0;
}
