/*
 * bench_pipeline.c — what a pipeline costs on the success path, against
 * calling the operation directly in the same run.
 *
 * The headline figure is the standard pipeline (bulkhead, total timeout,
 * retry, ratio breaker, attempt timeout) on the system clock, the shape
 * Polly v8's published benchmark measures for its five-strategy pipeline
 * (766 ns, 40 B per call). Then the same with telemetry on — a listener
 * that does nothing, and the metrics sink — to show what events cost, and
 * a retry-only pipeline to separate the retry executor from the rest. A
 * call that asks for attempt records has its first attempt recorded as the
 * retry executor would record it: measured too. (A listener keeps the
 * executor on the first attempt: the telemetry lines measure that path.)
 * And the standard pipeline given the coarse clock (resil_clock_coarse()),
 * which takes the two precise clock reads off its success path.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "resil.h"

static resil_outcome succeed(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static resil_op_fn volatile op_ptr = succeed;

static void direct_call(void *ud, uint64_t iters)
{
    (void)ud;
    uint64_t ok = 0;
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX};
    for (uint64_t i = 0; i < iters; i++) {
        resil_outcome o = op_ptr(&ctx);
        ok += o.kind == RESIL_SUCCESS;
    }
    bench_consume(ok);
}

static void execute(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    uint64_t ok = 0;
    resil_pipeline_result r;
    for (uint64_t i = 0; i < iters; i++) {
        resil_pipeline_execute(p, succeed, NULL, &r);
        ok += r.outcome.kind == RESIL_SUCCESS;
    }
    bench_consume(ok);
}

/* The same with the call asking for attempt records: the first attempt's
 * record written as the executor would write it. */
static void execute_recorded(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    uint64_t ok = 0;
    resil_attempt_record records[4];
    resil_call call;
    resil_call_default(&call);
    call.records = records;
    call.records_cap = 4;
    resil_pipeline_result r;
    for (uint64_t i = 0; i < iters; i++) {
        resil_pipeline_execute(p, succeed, &call, &r);
        ok += r.outcome.kind == RESIL_SUCCESS;
    }
    bench_consume(ok);
}

static void ignore(const resil_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
}

static resil_pipeline *standard_on(resil_clock *clock, resil_event_fn listen, void *ud,
                                   resil_metrics *m)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.clock = clock;
    resil_pipeline_builder *b;
    resil_pipeline *p = NULL;
    if (resil_pipeline_builder_new("standard", &b, NULL) != 0)
        return NULL;
    resil_pipeline_add_standard(b, &o);
    if (listen != NULL)
        resil_pipeline_builder_listen(b, listen, ud);
    if (m != NULL)
        resil_pipeline_builder_metrics(b, m);
    resil_err err;
    if (resil_pipeline_build(b, &p, &err) != 0)
        fprintf(stderr, "build: %s\n", err.message);
    resil_pipeline_builder_free(b);
    return p;
}

static resil_pipeline *standard(resil_event_fn listen, void *ud, resil_metrics *m)
{
    return standard_on(NULL, listen, ud, m);
}

static resil_pipeline *retry_only(void)
{
    resil_retry_policy pol;
    resil_retry_policy_default(&pol);
    resil_pipeline_builder *b;
    resil_pipeline *p = NULL;
    if (resil_pipeline_builder_new("retry", &b, NULL) != 0)
        return NULL;
    resil_pipeline_add_retry(b, &pol);
    resil_pipeline_build(b, &p, NULL);
    resil_pipeline_builder_free(b);
    return p;
}

static void report(const char *name, const resil_pipeline *p, bench_result direct,
                   const char *extra)
{
    if (p == NULL) {
        fprintf(stderr, "%s: no pipeline\n", name);
        exit(1);
    }
    bench_report(bench_run(name, execute, (void *)p), direct, extra);
}

int main(void)
{
    bench_result direct = bench_run("direct_call", direct_call, NULL);

    resil_pipeline *off = standard(NULL, NULL, NULL);
    if (off == NULL)
        return 1;
    bench_result one = bench_run("pipeline_standard_success", execute, off);
    bench_report(one, direct,
                 "strategies=5 telemetry=off polly_v8_ns_per_op=766 polly_v8_bytes_per_op=40 "
                 "(Polly's figure is published, from another machine and runtime)");
    bench_report_2t(bench_run_2t("pipeline_standard_success_2t_shared", execute, off, off), one,
                    direct);

    bench_report(bench_run("pipeline_standard_success_recorded", execute_recorded, off), direct,
                 "strategies=5 telemetry=off records=4");

    resil_pipeline *coarse = standard_on(resil_clock_coarse(), NULL, NULL, NULL);
    report("pipeline_standard_success_coarse_clock", coarse, direct,
           "strategies=5 telemetry=off clock=coarse");

    resil_pipeline *noop = standard(ignore, NULL, NULL);
    report("pipeline_standard_success_telemetry_listener", noop, direct,
           "strategies=5 telemetry=noop-listener");

    resil_metrics *m = NULL;
    if (resil_metrics_new(NULL, &m, NULL) != 0)
        return 1;
    resil_pipeline *metered = standard(NULL, NULL, m);
    report("pipeline_standard_success_metrics", metered, direct,
           "strategies=5 telemetry=metrics-sink");

    resil_pipeline *retry = retry_only();
    report("pipeline_retry_only_success", retry, direct, "strategies=1 telemetry=off");

    resil_pipeline_free(off);
    resil_pipeline_free(coarse);
    resil_pipeline_free(noop);
    resil_pipeline_free(metered);
    resil_pipeline_free(retry);
    resil_metrics_free(m);
    return 0;
}
