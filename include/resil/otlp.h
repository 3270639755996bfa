/*
 * otlp.h — libresil-otlp: an OTLP/HTTP exporter (JSON encoding) for the
 * tracer's spans and the metrics sink's figures, on libcurl.
 *
 * The call path never waits on the network: resil_otlp_on_span copies the
 * span into a bounded queue allocated up front, under a mutex held for the
 * copy, and a full queue drops the span and counts it. The exporter's own
 * thread sends batches of spans (when a batch is full, or every
 * schedule_delay) and the metrics (every interval), and a flush or the
 * free (or close, which also says whether that last export was taken)
 * sends everything still queued. An export the collector does not answer,
 * or answers 429, 502, 503 or 504, is retried after its Retry-After or an
 * exponential backoff, at most five attempts within the timeout; any other
 * refusal is final and its spans are counted failed. Configuration follows the standard
 * OTEL_* environment variables (resil_otlp_opts_from_env), read strictly:
 * a bad value is refused, naming the variable, never guessed at.
 */
#ifndef RESIL_OTLP_H
#define RESIL_OTLP_H

#include "telemetry.h"

RESIL_BEGIN_DECLS

typedef struct resil_otlp resil_otlp;

typedef struct resil_otlp_opts {
    const char *endpoint;         /* base URL ("http://127.0.0.1:4318"): spans go to
                                     <endpoint>/v1/traces, metrics to /v1/metrics */
    const char *traces_endpoint;  /* full URL for spans; NULL = from endpoint */
    const char *metrics_endpoint; /* full URL for metrics; NULL = from endpoint */
    const char *headers;          /* "key=value,key2=value2", values percent-encoded
                                     (W3C Baggage style); NULL = none */
    const char *service_name;     /* service.name; NULL = "unknown_service" */
    const char *resource_attributes; /* "key=value,…" as headers; service_name wins */
    resil_metrics *metrics;       /* exported every interval; NULL = spans only */
    resil_duration interval;      /* metrics export interval; default 60 s */
    resil_duration schedule_delay;/* longest a span waits for its batch; default 5 s */
    resil_duration timeout;       /* per export, its retries included, >= 1 ms; and for
                                     a flush or the close as a whole; default 10 s */
    uint32_t max_queue;           /* spans queued at most; default 2048 */
    uint32_t max_batch;           /* spans per request at most; default 512, <= max_queue */
    union {                       /* (a member that took a reserved slot: docs/abi.md) */
        resil_clock *clock;       /* the waits between retries and the timeout's
                                     deadlines; NULL = the system clock */
        resil_reserved clock_slot_;
    };
    resil_reserved reserved_[3];  /* room to grow (docs/abi.md) */
} resil_otlp_opts;

RESIL_API void resil_otlp_opts_default(resil_otlp_opts *o);

/* Fill `o` from the environment: OTEL_EXPORTER_OTLP_ENDPOINT,
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
 * OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT (ms),
 * OTEL_EXPORTER_OTLP_PROTOCOL (only http/json is spoken), OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES, OTEL_METRIC_EXPORT_INTERVAL (ms),
 * OTEL_BSP_SCHEDULE_DELAY (ms), OTEL_BSP_MAX_QUEUE_SIZE,
 * OTEL_BSP_MAX_EXPORT_BATCH_SIZE. Unset or empty variables leave the field
 * as it was. Strings point into the environment. Returns 0 or RESIL_EINVAL
 * with the variable named in err. */
RESIL_API int resil_otlp_opts_from_env(resil_otlp_opts *o, resil_err *err);

/* Check the options and start the exporter's thread. RESIL_EINVAL (the
 * field named in err), RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_otlp_new(const resil_otlp_opts *o, resil_otlp **out, resil_err *err);
/* Send everything queued (and the metrics), wait for that (within the
 * timeout from now, as a flush), stop the thread, free. */
RESIL_API void resil_otlp_free(resil_otlp *x);
/* resil_otlp_free that answers for its last export as resil_otlp_flush
 * does: 0, or RESIL_EIO when a request failed. For a program that wants
 * that answer at exit (a flush then a free would send the metrics twice).
 * NULL: 0. */
RESIL_API int resil_otlp_close(resil_otlp *x);

/* The tracer's sink (resil_tracer_opts.on_span, ud = the exporter): copy
 * the span into the queue, or drop and count it when the queue is full. */
RESIL_API void resil_otlp_on_span(const resil_span *s, void *ud);

/* Send what is queued and the metrics now, and wait until sent (or failed),
 * within the timeout from now: what its deadline leaves unsent is counted
 * failed. Returns 0, or RESIL_EIO when an export was not taken. */
RESIL_API int resil_otlp_flush(resil_otlp *x);

typedef struct resil_otlp_stats {
    uint64_t spans_queued;    /* accepted into the queue */
    uint64_t spans_dropped;   /* refused: the queue was full */
    uint64_t spans_exported;  /* in requests the receiver accepted */
    uint64_t requests;        /* export requests sent */
    uint64_t failed_requests; /* transport errors and non-2xx answers */
    union {                   /* (a member that took a reserved slot: docs/abi.md) */
        uint64_t spans_failed; /* queued but not taken: their request refused, its
                                  retries given up, its deadline passed, or
                                  rejected by a partial success */
        resil_reserved spans_failed_slot_;
    };
    resil_reserved reserved_[3]; /* room to grow (docs/abi.md) */
} resil_otlp_stats;

RESIL_API void resil_otlp_get_stats(resil_otlp *x, resil_otlp_stats *out);

/* Encoders, for tests and other transports: the OTLP JSON body of spans
 * (ExportTraceServiceRequest) and of the metrics (ExportMetricsService-
 * Request) at `now_unix_ns`, into a new string the caller frees. */
RESIL_API int resil_otlp_encode_spans(const resil_otlp *x, const resil_span *spans, size_t n,
                                      char **out, size_t *len);
RESIL_API int resil_otlp_encode_metrics(const resil_otlp *x, resil_metrics *m,
                                        int64_t now_unix_ns, char **out, size_t *len);

RESIL_END_DECLS

#endif
