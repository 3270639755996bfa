/*
 * pipeline.c — the standard pipeline around an HTTP-like call, with logs
 * and metrics: what a service puts between itself and a dependency.
 *
 * The dependency answers 503, 503, then 200. The clock is fake and the
 * jitter seeded, so the program runs instantly and prints the same thing
 * every time; with the system clock (clock = NULL) and the default jitter
 * source the code is unchanged.
 *
 *   example_pipeline
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resil.h"

typedef struct dependency {
    int calls;
    int status; /* the last answer, for the caller */
} dependency;

/* The operation: one HTTP request. A real one would pass
 * resil_ctx_remaining_ms(ctx) to CURLOPT_TIMEOUT_MS. */
static resil_outcome get_order(resil_attempt_ctx *ctx)
{
    static const int answers[] = {503, 503, 200};
    dependency *d = ctx->user;
    d->status = answers[d->calls < 2 ? d->calls : 2];
    d->calls++;
    if (d->status == 200)
        return resil_ok();
    return resil_fail(RESIL_TRANSIENT, d->status, "service unavailable");
}

static int print(const char *text, size_t len, void *ud)
{
    (void)ud;
    fwrite(text, 1, len, stdout);
    return 0;
}

/* Print the counter lines of the Prometheus text, not the histograms. */
static void print_counters(resil_metrics *m)
{
    char *text;
    if (resil_metrics_prometheus_string(m, &text, NULL) != 0)
        return;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n"))
        if (strncmp(line, "resilience_polly_strategy_events_total{", 39) == 0 ||
            strncmp(line, "resilience_circuit_breaker_state{", 33) == 0)
            printf("%s\n", line);
    free(text);
}

int main(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 1700000000 * RESIL_S(1), &fc) != 0)
        return 1;

    resil_log_opts lo;
    resil_log_opts_default(&lo);
    lo.timestamps = false;
    lo.write = print;
    resil_log_sink log;
    resil_metrics *metrics;
    resil_err err;
    if (resil_log_sink_init(&log, &lo, &err) != 0 || resil_metrics_new(NULL, &metrics, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }

    /* Microsoft's standard handler, on our clock, with telemetry. */
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.name = "orders";
    o.clock = resil_fake_clock_clock(fc);
    resil_pipeline_builder *b;
    resil_pipeline *p;
    if (resil_pipeline_builder_new(o.name, &b, &err) != 0)
        return 1;
    resil_pipeline_add_standard(b, &o);
    resil_pipeline_builder_listen(b, resil_log_on_event, &log);
    resil_pipeline_builder_metrics(b, metrics);
    if (resil_pipeline_build(b, &p, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    resil_pipeline_builder_free(b);

    char description[2048];
    resil_pipeline_describe(p, RESIL_DESCRIBE_TEXT, description, sizeof description);
    fputs(description, stdout);
    printf("\n");

    /* One logical request. */
    dependency dep = {0, 0};
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, 7);
    resil_attempt_record records[4];
    resil_call call;
    resil_call_default(&call);
    call.user = &dep;
    call.operation = "GetOrder";
    call.rng = &rng.base;
    call.records = records;
    call.records_cap = 4;
    resil_pipeline_result r;
    if (resil_pipeline_execute(p, get_order, &call, &r) != 0)
        return 1;

    char elapsed[32];
    resil_duration_format(r.elapsed, elapsed, sizeof elapsed);
    printf("\nresult: %s, HTTP %d after %u attempts (%s), in %s\n",
           resil_kind_name(r.outcome.kind), dep.status, (unsigned)r.attempts,
           resil_stop_name(r.stop), elapsed);
    for (size_t i = 0; i < r.records_len; i++) {
        char wait[40] = "wait ";
        resil_duration_format(records[i].wait, wait + 5, sizeof wait - 5);
        const resil_outcome *out = &records[i].outcome;
        long long status = out->kind == RESIL_SUCCESS ? 200 : (long long)out->code;
        printf("  attempt %u: %s (%lld), then %s\n", (unsigned)records[i].number,
               resil_kind_name(out->kind), status,
               records[i].stop == RESIL_STOP_NONE ? wait : resil_stop_name(records[i].stop));
    }
    printf("\n");
    print_counters(metrics);

    resil_pipeline_free(p);
    resil_metrics_free(metrics);
    resil_fake_clock_free(fc);
    return 0;
}
