/*
 * bench_otlp.c — the OTLP exporter's costs and throughput on one core.
 *
 * What a recording thread pays to hand a span over (a copy into the
 * bounded queue under its mutex), what the exporter's thread pays to
 * encode one span as OTLP JSON, and the end-to-end throughput in spans
 * per second: a queue's worth of spans handed over by one thread, then
 * flushed, in batches of 128 to a loopback receiver (the scripted test
 * server), again and again — nothing dropped.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "http_server.h"
#include "resil/otlp.h"

#define QUEUE 16384

static resil_span example_span(void)
{
    static resil_outcome failed;
    static resil_http_attrs http = {.method = "GET", .server_address = "api.example",
                                    .server_port = 443};
    failed = resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    resil_span s;
    memset(&s, 0, sizeof s);
    s.type = RESIL_SPAN_ATTEMPT;
    s.name = "attempt";
    for (int i = 0; i < 16; i++)
        s.trace_id[i] = (uint8_t)(i + 1);
    for (int i = 0; i < 8; i++)
        s.span_id[i] = s.parent_id[i] = (uint8_t)(i + 9);
    s.flags = RESIL_TRACE_SAMPLED;
    s.tracestate = "";
    s.start_unix_ns = INT64_C(1700000000000000000);
    s.end_unix_ns = s.start_unix_ns + RESIL_MS(12);
    s.pipeline = "orders";
    s.operation = "GetOrder";
    s.attempt = 1;
    s.handled = true;
    s.outcome = &failed;
    s.http = &http;
    return s;
}

static void enqueue(void *ud, uint64_t iters)
{
    resil_otlp *x = ud;
    resil_span s = example_span();
    for (uint64_t i = 0; i < iters; i++) {
        s.span_id[7] = (uint8_t)i;
        resil_otlp_on_span(&s, x);
    }
}

static void encode(void *ud, uint64_t iters)
{
    resil_otlp *x = ud;
    static resil_span batch[512];
    for (int i = 0; i < 512; i++)
        batch[i] = example_span();
    for (uint64_t done = 0; done < iters;) {
        uint64_t n = iters - done < 512 ? iters - done : 512;
        char *body = NULL;
        if (resil_otlp_encode_spans(x, batch, (size_t)n, &body, NULL) != 0)
            exit(1);
        free(body);
        done += n;
    }
}

/* Queue a queue's worth, flush, again: nothing is dropped, and the time is
 * what it takes to hand over, encode and send every span. */
static void end_to_end(void *ud, uint64_t iters)
{
    resil_otlp *x = ud;
    for (uint64_t done = 0; done < iters;) {
        uint64_t n = iters - done < QUEUE ? iters - done : QUEUE;
        enqueue(x, n);
        resil_otlp_flush(x);
        done += n;
    }
}

static resil_otlp *exporter(const char *endpoint, uint32_t queue)
{
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    o.endpoint = endpoint;
    o.max_queue = queue;
    o.max_batch = 128; /* the test server reads a request of at most 256 KiB */
    o.schedule_delay = RESIL_S(3600);
    resil_otlp *x;
    resil_err err;
    if (resil_otlp_new(&o, &x, &err) != 0) {
        fprintf(stderr, "otlp: %s\n", err.message);
        exit(1);
    }
    return x;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    http_server *receiver = http_server_start();
    if (receiver == NULL)
        return 1;
    http_server_record(receiver, false);
    http_server_script(receiver, "/v1/traces", (const http_step[]){{.status = 200}}, 1);
    char endpoint[128];
    http_server_url(receiver, "", endpoint, sizeof endpoint);

    resil_otlp *x = exporter(endpoint, QUEUE);
    bench_result enq = bench_run("otlp_span_enqueue", enqueue, x);
    resil_otlp_stats st;
    resil_otlp_get_stats(x, &st);
    char extra[160];
    snprintf(extra, sizeof extra,
             "the recording thread's handover, the exporter draining meanwhile; dropped=%.1f%%",
             100.0 * (double)st.spans_dropped / (double)(st.spans_queued + st.spans_dropped));
    bench_report(enq, enq, extra);
    bench_result enc = bench_run("otlp_span_encode_json", encode, x);
    bench_report(enc, enc, "the exporter thread's JSON encoding per span, batches of 512");
    resil_otlp_free(x);

    x = exporter(endpoint, QUEUE);
    bench_result e2e = bench_run("otlp_spans_end_to_end", end_to_end, x);
    snprintf(extra, sizeof extra, "spans_per_second=%.0f batch=128 loopback_http",
             1e9 / e2e.ns_per_op);
    bench_report(e2e, e2e, extra);
    resil_otlp_get_stats(x, &st);
    if (st.spans_dropped > 0 || st.failed_requests > 0)
        fprintf(stderr, "otlp: %llu dropped, %llu failed requests\n",
                (unsigned long long)st.spans_dropped, (unsigned long long)st.failed_requests);
    resil_otlp_free(x);
    http_server_stop(receiver);
    return 0;
}
