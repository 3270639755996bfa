/*
 * telemetry.h — what the strategies report, and two sinks that consume it:
 * a metrics aggregator that writes the Prometheus text format, and a log
 * sink writing logfmt or JSON lines.
 *
 * Every strategy reports through one typed event and one listener
 * signature, so a sink is a function and a pointer, a pipeline may feed
 * several, and a test observes exactly what production would. The event
 * lives on the reporter's stack and its strings are borrowed: a listener
 * copies what it keeps. Listeners run on whichever thread caused the event
 * (a hedged attempt reports from a worker), so they must be thread-safe.
 * With no listener installed a pipeline pays one branch per would-be event
 * and builds nothing.
 *
 * The metrics carry the names, instruments and tags Polly v8 emits
 * (resilience.polly.strategy.events, …strategy.attempt.duration,
 * …pipeline.duration) and, for calls that carry HTTP attributes, the
 * http.client.request.resilience.* families, spelled by OpenTelemetry's
 * Prometheus mapping (docs/telemetry.md lists them all). resil's earlier
 * names (resil_strategy_events_total, …) remain behind
 * resil_metrics_opts.names for one release.
 *
 * Counters and histograms are fed by events into a table allocated when
 * the sink is made, so recording never allocates; gauges are read from the
 * watched objects when the text is written, so they cost nothing per call.
 */
#ifndef RESIL_TELEMETRY_H
#define RESIL_TELEMETRY_H

#include <stdio.h>

#include "adaptive.h"
#include "breaker.h"
#include "bulkhead.h"
#include "degrade.h"
#include "registry.h"
#include "retry.h"

RESIL_BEGIN_DECLS

/* The strategies a pipeline composes. For an outcome of kind
 * RESIL_REJECTED made by a pipeline strategy, the outcome's code is one of
 * these, naming who refused. */
typedef enum resil_strategy_kind {
    RESIL_STRATEGY_NONE = 0,
    RESIL_STRATEGY_RATE_LIMITER = 1,
    RESIL_STRATEGY_BULKHEAD = 2,
    RESIL_STRATEGY_TOTAL_TIMEOUT = 3,
    RESIL_STRATEGY_RETRY = 4,
    RESIL_STRATEGY_BREAKER = 5,
    RESIL_STRATEGY_ATTEMPT_TIMEOUT = 6,
    RESIL_STRATEGY_HEDGING = 7,
    RESIL_STRATEGY_FALLBACK = 8,
    RESIL_STRATEGY_DEGRADE = 9,
    RESIL_STRATEGY_CHAOS_FAULT = 10,
    RESIL_STRATEGY_CHAOS_OUTCOME = 11,
    RESIL_STRATEGY_CHAOS_LATENCY = 12,
    RESIL_STRATEGY_CHAOS_BEHAVIOR = 13,
    RESIL_STRATEGY_ADAPTIVE_LIMITER = 14,
    RESIL_STRATEGY_THROTTLE = 15
} resil_strategy_kind;

#define RESIL_STRATEGY_KIND_COUNT 16

/* "rate-limiter", "bulkhead", "total-timeout", "retry", "breaker",
 * "attempt-timeout", "hedging", "fallback", "degradation", "chaos-fault",
 * "chaos-outcome", "chaos-latency", "chaos-behavior", "adaptive-limiter",
 * "throttle" ("" for NONE). */
RESIL_API const char *resil_strategy_name(resil_strategy_kind k);

typedef enum resil_event_type {
    RESIL_EVENT_EXECUTION = 0,     /* a pipeline execution ended: duration, outcome, stop */
    RESIL_EVENT_ATTEMPT,           /* an attempt ended: number, duration, outcome, handled */
    RESIL_EVENT_RETRY,             /* a retry was decided: attempt, delay, source, cause */
    RESIL_EVENT_BREAKER_OPENED,    /* from, to, reason, duration = the break */
    RESIL_EVENT_BREAKER_HALF_OPENED,
    RESIL_EVENT_BREAKER_CLOSED,
    RESIL_EVENT_BREAKER_ISOLATED,  /* isolated or disabled by hand */
    RESIL_EVENT_BREAKER_REJECTED,  /* a call refused: delay = time to the next probe */
    RESIL_EVENT_TIMEOUT,           /* a timeout ended work: duration = the timeout */
    RESIL_EVENT_BUDGET_DENIED,     /* the retry budget refused a retry or a hedge */
    RESIL_EVENT_BULKHEAD_REJECTED, /* full, queue timeout: reason says which */
    RESIL_EVENT_RATE_LIMITED,      /* delay = the limiter's retry-after */
    RESIL_EVENT_HEDGE,             /* a hedged attempt started: hedge, delay since the primary */
    RESIL_EVENT_FALLBACK,          /* the fallback replaced outcome */
    RESIL_EVENT_DEGRADE_CHANGED,   /* from, to levels, reason = the cause */
    RESIL_EVENT_DEGRADE_REJECTED,  /* a call shed by the degradation gate */
    RESIL_EVENT_CHAOS_INJECTED,    /* a chaos strategy injected: outcome (fault, outcome),
                                      delay (latency); strategy says which */
    RESIL_EVENT_LIMIT_CHANGED,     /* the adaptive limit moved: from, to */
    RESIL_EVENT_LIMIT_REJECTED,    /* the adaptive limiter refused: reason says why */
    RESIL_EVENT_THROTTLED,         /* adaptive throttling refused a call locally */
    RESIL_EVENT_HEDGE_ENDED        /* a hedged attempt ended: hedge, duration since its
                                      launch, outcome; debug, and no metric (the hedge
                                      counts once, as HEDGE): its span's end */
} resil_event_type;

#define RESIL_EVENT_TYPE_COUNT 21

typedef enum resil_severity {
    RESIL_SEVERITY_DEBUG = 0,
    RESIL_SEVERITY_INFO,
    RESIL_SEVERITY_WARNING,
    RESIL_SEVERITY_ERROR
} resil_severity;

typedef struct resil_event {
    resil_event_type type;
    resil_severity severity;     /* resil_event_severity(type, outcome) */
    const char *pipeline;        /* the pipeline's name; "" from a shared object */
    const char *strategy;        /* resil_strategy_name() of the reporter */
    const char *key;             /* breaker key or name, operation; "" if none */
    resil_instant at;            /* on the pipeline's (or object's) clock */
    uint32_t attempt;            /* 1-based attempt number; 0 when not about one */
    uint32_t hedge;              /* HEDGE: index of the hedged attempt (1 = first hedge) */
    resil_duration duration;     /* EXECUTION, ATTEMPT, HEDGE_ENDED: how long;
                                    TIMEOUT: the timeout;
                                    BREAKER_OPENED: the break in force */
    resil_duration delay;        /* RETRY: the wait; HEDGE: since the primary started;
                                    *_REJECTED, RATE_LIMITED: retry-after (-1 = none);
                                    CHAOS_INJECTED: the injected latency */
    resil_wait_source source;    /* RETRY */
    resil_stop stop;             /* EXECUTION, ATTEMPT: the retry decision */
    bool handled;                /* ATTEMPT: a failure the retry strategy handles */
    const resil_outcome *outcome;/* the outcome, cause or rejection; NULL if none */
    const char *reason;          /* breaker or degradation reason, rejection detail; "" if none */
    int from, to;                /* BREAKER_*: resil_breaker_state; DEGRADE_CHANGED: levels;
                                    LIMIT_CHANGED: the adaptive limit */
    const char *from_name, *to_name; /* their names; "" when not a change */
    const struct resil_exec_trace *trace; /* the execution's place in a trace when the
                                             call is traced and sampled; else NULL */
    const struct resil_http_attrs *http;  /* the call's HTTP attributes; NULL if none */
} resil_event;

typedef void (*resil_event_fn)(const resil_event *ev, void *ud);

/* The HTTP semantic-convention attributes of a call (set by the HTTP
 * adapter through resil_call.telemetry): what the http.client.request.resilience.*
 * metrics and the spans are labelled with. The response status and
 * error.type come from each attempt's outcome. */
typedef struct resil_http_attrs {
    const char *method;         /* http.request.method: "GET", … */
    const char *server_address; /* server.address: host name or IP literal */
    int server_port;            /* server.port */
    union {            /* (a member that took a reserved slot: docs/abi.md) */
        void *user;    /* the request's `user` (resil_http_request): tells
                          apart the calls whose events one listener hears */
        resil_reserved user_slot_;
    };
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_http_attrs;

/* server.address and server.port of an authority "scheme://host:port" (as
 * the HTTP adapter names its breakers; an IPv6 host loses its brackets).
 * Returns 0, or RESIL_ESYNTAX for anything else, RESIL_ERANGE when the
 * host does not fit in cap. */
RESIL_API int resil_authority_split(const char *authority, char *host, size_t cap, int *port);

/* What a call tells telemetry, through resil_call.telemetry (one pointer,
 * so a call that says nothing pays nothing). An asynchronous execution
 * reads `http` until it ends: keep it alive that long. */
struct resil_span_context;
typedef struct resil_call_telemetry {
    const struct resil_span_context *trace; /* the caller's span: the execution becomes
                                               its child when sampled; NULL = untraced */
    const resil_http_attrs *http;           /* HTTP attributes; NULL = none */
    resil_reserved reserved_[2];            /* room to grow (docs/abi.md) */
} resil_call_telemetry;

/* ---- traces ----------------------------------------------------------------- */

#define RESIL_TRACE_SAMPLED 0x01      /* trace-flags bit 0 */
#define RESIL_TRACEPARENT_LEN 55      /* "00-<32 hex>-<16 hex>-<2 hex>" */
#define RESIL_TRACESTATE_MAX 512      /* the longest tracestate kept */
#define RESIL_TRACESTATE_MEMBERS 32   /* list members allowed */

/* A W3C Trace Context: the trace, one span in it, and its flags. */
typedef struct resil_span_context {
    uint8_t trace_id[16];         /* never all zero */
    uint8_t span_id[8];           /* never all zero */
    uint8_t flags;                /* RESIL_TRACE_SAMPLED */
    char tracestate[RESIL_TRACESTATE_MAX + 1]; /* validated; "" = none */
} resil_span_context;

/* An execution's place in its trace: its own span (the trace id, the
 * execution span's id, the flags and the caller's tracestate) and the
 * parent it continues (all zero for a root). */
typedef struct resil_exec_trace {
    resil_span_context span;
    uint8_t parent_id[8];
} resil_exec_trace;

/* Parse a traceparent header value (version 00, or a later version read
 * as 00 as the specification asks). Leading and trailing spaces and tabs
 * are allowed. Returns 0, or RESIL_ESYNTAX with the reason in err:
 * wrong length, upper-case or non-hex digits, an all-zero trace or span
 * id, version ff. `out->tracestate` is cleared. */
RESIL_API int resil_traceparent_parse(const char *text, size_t len, resil_span_context *out,
                                      resil_err *err);
/* Parse a tracestate header value into out->tracestate: list members
 * key=value separated by commas (empty members and optional spaces
 * allowed), keys and values as the specification's grammar, at most
 * RESIL_TRACESTATE_MEMBERS members, no key twice, at most
 * RESIL_TRACESTATE_MAX bytes once normalised. Returns 0 or RESIL_ESYNTAX; on
 * error out->tracestate is "" (the specification's "discard"). */
RESIL_API int resil_tracestate_parse(const char *text, size_t len, resil_span_context *out,
                                     resil_err *err);
/* "00-<trace>-<span>-<flags>" with its NUL: needs RESIL_TRACEPARENT_LEN + 1
 * bytes; returns RESIL_TRACEPARENT_LEN (like snprintf). */
RESIL_API size_t resil_traceparent_format(const resil_span_context *c, char *buf, size_t cap);
/* A new root: random trace and span ids from `rng` (NULL = the thread's). */
RESIL_API void resil_trace_new(resil_rng *rng, bool sampled, resil_span_context *out);
/* The span context an attempt propagates downstream (its trace id, the
 * attempt span's id, the flags, the tracestate): 0, or RESIL_ENOTFOUND when
 * the execution is not traced. Every attempt and every hedge has its own
 * span id, derived from the execution's, so the tracer names the same
 * span without the two sharing state. */
RESIL_API int resil_attempt_span(const resil_attempt_ctx *ctx, resil_span_context *out);
/* The same from an event's execution trace, attempt number and hedge. */
RESIL_API void resil_exec_trace_attempt(const resil_exec_trace *t, uint32_t attempt,
                                        uint32_t hedge, resil_span_context *out);

/* "execution", "attempt", "retry", "breaker_opened", "breaker_half_opened",
 * "breaker_closed", "breaker_isolated", "breaker_rejected", "timeout",
 * "budget_denied", "bulkhead_rejected", "rate_limited", "hedge", "fallback",
 * "degrade_changed", "degrade_rejected", "chaos_injected", "limit_changed",
 * "limit_rejected", "throttled", "hedge_ended". */
RESIL_API const char *resil_event_name(resil_event_type t);
/* "debug", "info", "warning", "error". */
RESIL_API const char *resil_severity_name(resil_severity s);
/* Polly's levels: attempts info (warning when the outcome failed),
 * executions debug (warning when failed), retry, half-open, hedge and
 * fallback warning, opened, rejections and timeouts error, closed info. */
RESIL_API resil_severity resil_event_severity(resil_event_type t,
                                              const resil_outcome *outcome);

/* A listener and its argument, for the adapters below. */
typedef struct resil_listener {
    resil_event_fn fn;
    void *ud;
    const char *pipeline; /* reported as the event's pipeline; NULL = "" */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_listener;

/* Forward a breaker's state changes as events: pass as
 * resil_breaker_opts.listener (or a registry's default breaker options)
 * with a resil_listener * as listener_ud. Pipelines do this themselves for
 * breakers they create. */
RESIL_API void resil_telemetry_breaker_listener(resil_breaker *b,
                                                const resil_breaker_event *ev,
                                                void *ud);
/* The same for a degradation monitor's level changes (on_change). */
RESIL_API void resil_telemetry_degrade_listener(void *ud, const resil_degrade_event *ev);

/* ---- the metrics sink ---------------------------------------------------- */

typedef struct resil_metrics resil_metrics;

#define RESIL_METRICS_MAX_BUCKETS 32
#define RESIL_METRICS_LABEL_MAX 64 /* bytes kept of a label value, with the NUL */

/* Which names the sink writes. */
typedef enum resil_metrics_names {
    RESIL_METRICS_NAMES_OTEL = 0, /* Polly's and the HTTP resilience instruments, by
                                     OpenTelemetry's Prometheus mapping (default) */
    RESIL_METRICS_NAMES_RESIL = 1 /* resil_strategy_events_total, … as before; kept for
                                     one release (docs/telemetry.md maps them) */
} resil_metrics_names;

typedef struct resil_metrics_opts {
    uint32_t max_series;           /* default 1024; in [1, 1048576] */
    const resil_duration *buckets; /* histogram upper bounds; NULL = the defaults
                                      (1 ms … 60 s); strictly increasing, > 0 */
    size_t nbuckets;               /* in [1, RESIL_METRICS_MAX_BUCKETS] when given */
    union {                        /* (a member that took a reserved slot: docs/abi.md) */
        resil_metrics_names names; /* default RESIL_METRICS_NAMES_OTEL */
        resil_reserved names_slot_;
    };
    resil_reserved reserved_[3]; /* room to grow (docs/abi.md) */
} resil_metrics_opts;

RESIL_API void resil_metrics_opts_default(resil_metrics_opts *o);
RESIL_API int resil_metrics_new(const resil_metrics_opts *o, resil_metrics **out,
                                resil_err *err);
/* Watched objects are forgotten, not freed. */
RESIL_API void resil_metrics_free(resil_metrics *m);

/* The listener: ud is the resil_metrics *. Counts every event in
 * resil_strategy_events_total and feeds the two histograms. A series that
 * finds the table full is counted in resil_metrics_dropped_series_total. */
RESIL_API void resil_metrics_on_event(const resil_event *ev, void *ud);

/* Gauges read at write time. `owner` groups watches for unwatch (a
 * pipeline watches its own strategies and unwatches them when freed). A
 * watched breaker is retained; a watched bulkhead, adaptive limiter or
 * registry must outlive its watch. Errors: RESIL_EINVAL, RESIL_ENOMEM. */
RESIL_API int resil_metrics_watch_breaker(resil_metrics *m, const char *pipeline,
                                          resil_breaker *b, const void *owner);
RESIL_API int resil_metrics_watch_registry(resil_metrics *m, const char *pipeline,
                                           resil_registry *r, const void *owner);
RESIL_API int resil_metrics_watch_bulkhead(resil_metrics *m, const char *pipeline,
                                           resil_bulkhead *b, const void *owner);
RESIL_API int resil_metrics_watch_limiter(resil_metrics *m, const char *pipeline,
                                          resil_limiter *l, const void *owner);
/* The same for a breaker guarding an HTTP authority ("scheme://host:port")
 * whose name is not one (resil gateway's upstream breaker): its
 * http.client.request.resilience.circuit_breaker.state is labelled by that
 * authority. RESIL_EINVAL for anything else. */
RESIL_API int resil_metrics_watch_http_breaker(resil_metrics *m, const char *pipeline,
                                               resil_breaker *b, const char *authority,
                                               const void *owner);
RESIL_API void resil_metrics_unwatch(resil_metrics *m, const void *owner);

/* One request an idempotency layer answered (resil gateway), counted in
 * resilience.idempotency.requests by method, outcome ("first", "replay",
 * "in-progress", "mismatch", …), response status (100..599, else none) and
 * error.type (NULL or "" for none). OpenTelemetry names only: nothing is
 * recorded under RESIL_METRICS_NAMES_RESIL. */
RESIL_API void resil_metrics_count_request(resil_metrics *m, const char *method,
                                           const char *outcome, int status,
                                           const char *error_type);

/* The count of one event series (0 if never seen), summed over the
 * labels the other names add (operation, severity, exception type). */
RESIL_API uint64_t resil_metrics_event_count(resil_metrics *m, const char *pipeline,
                                             const char *strategy, resil_event_type t);

/* Write the Prometheus text exposition format (version 0.0.4): families in
 * a fixed order, series sorted by labels, label values escaped. `write`
 * receives the text in pieces; a non-zero return stops and is returned. */
typedef int (*resil_write_fn)(const char *text, size_t len, void *ud);
RESIL_API int resil_metrics_write_prometheus(resil_metrics *m, resil_write_fn write,
                                             void *ud);
/* The same into a new NUL-terminated string the caller frees with free(). */
RESIL_API int resil_metrics_prometheus_string(resil_metrics *m, char **out, size_t *len);

/* The sink's figures as OpenTelemetry data points, for exporters: every
 * recorded series and every watched gauge, from one snapshot (the figures
 * the text would show at that moment). Names and attribute keys are
 * OpenTelemetry's (dotted) under RESIL_METRICS_NAMES_OTEL, the resil names
 * otherwise. Counters and histograms are cumulative since the sink was
 * made. Strings and arrays are valid during the call. */
typedef enum resil_metric_kind {
    RESIL_METRIC_COUNTER = 0, /* a monotonic sum: value */
    RESIL_METRIC_HISTOGRAM,   /* count, sum, bounds, bucket_counts */
    RESIL_METRIC_GAUGE        /* value */
} resil_metric_kind;

typedef struct resil_metric_attr {
    const char *key;   /* "pipeline.name", "server.port", ... */
    const char *value; /* as text */
    bool is_int;       /* an integer attribute (server.port, attempt.number, ...) */
    int64_t int_value;
} resil_metric_attr;

typedef struct resil_metric_point {
    const char *name;        /* "resilience.polly.strategy.events", ... */
    const char *unit;        /* UCUM: "ms", "s", "{event}"; "" for none */
    const char *description;
    resil_metric_kind kind;
    const resil_metric_attr *attrs;
    size_t nattrs;
    int64_t value;           /* COUNTER: the total; GAUGE: the reading */
    uint64_t count;          /* HISTOGRAM */
    double sum;              /* HISTOGRAM: in `unit` */
    const double *bounds;    /* HISTOGRAM: upper bounds in `unit`, nbounds of them */
    const uint64_t *bucket_counts; /* HISTOGRAM: nbounds + 1 counts, not cumulative */
    size_t nbounds;
} resil_metric_point;

typedef int (*resil_metric_fn)(const resil_metric_point *p, void *ud);
/* Call fn for every point; a non-zero return stops and is returned.
 * RESIL_EINVAL, RESIL_ENOMEM. */
RESIL_API int resil_metrics_visit(resil_metrics *m, resil_metric_fn fn, void *ud);

/* ---- the log sink --------------------------------------------------------- */

typedef enum resil_log_format {
    RESIL_LOG_LOGFMT = 0, /* time=… level=warning event=retry pipeline=… delay=2s … */
    RESIL_LOG_JSON        /* {"time":"…","level":"warning","event":"retry",…} */
} resil_log_format;

#define RESIL_LOG_LINE_MAX 1024 /* a longer line is cut and ends with "..." */

typedef struct resil_log_opts {
    resil_log_format format;     /* default logfmt */
    resil_severity min_severity; /* default info */
    bool verbose;                /* also attempts and executions; default false */
    bool timestamps;             /* default true: wall time from `clock` */
    resil_clock *clock;          /* NULL = the system clock */
    FILE *file;                  /* default stderr, used when write is NULL */
    resil_write_fn write;        /* optional: receives each line with its '\n' */
    void *write_ud;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_log_opts;

/* A sink is a plain value; it never allocates. */
typedef struct resil_log_sink {
    resil_log_opts opts; /* private */
} resil_log_sink;

RESIL_API void resil_log_opts_default(resil_log_opts *o);
RESIL_API int resil_log_sink_init(resil_log_sink *s, const resil_log_opts *o, resil_err *err);
/* The listener: ud is the resil_log_sink *. Writes one line per event that
 * passes the filter. */
RESIL_API void resil_log_on_event(const resil_event *ev, void *ud);
/* Format one event as a line (with '\n') into buf; returns the length the
 * full line needs, like snprintf. For tests and custom sinks. */
RESIL_API size_t resil_log_format_event(const resil_log_sink *s, const resil_event *ev,
                                        char *buf, size_t cap);

/* ---- the tracer ------------------------------------------------------------ */

typedef enum resil_span_type {
    RESIL_SPAN_EXECUTION = 0, /* the whole execution: parent is the caller's span */
    RESIL_SPAN_ATTEMPT,       /* one attempt: child of the execution */
    RESIL_SPAN_HEDGE          /* a hedged attempt, from its launch to its end: child
                                 of the execution, linked to the primary attempt it
                                 raced */
} resil_span_type;

/* One finished span, as the tracer hands it to its sink. Strings and the
 * outcome are borrowed for the call: copy what you keep. */
typedef struct resil_span {
    resil_span_type type;
    const char *name;            /* "execution", "attempt", "hedge" */
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_id[8];        /* all zero: a root */
    uint8_t flags;
    const char *tracestate;      /* "" if none */
    int64_t start_unix_ns, end_unix_ns;
    const char *pipeline;
    const char *operation;       /* "" if none */
    uint32_t attempt;            /* ATTEMPT, HEDGE: 1-based; EXECUTION: attempts made */
    uint32_t hedge;              /* HEDGE: 1 = first hedge */
    resil_duration wait_before;  /* ATTEMPT: the retry's wait before it (0 for the first) */
    bool handled;                /* ATTEMPT: a failure the retry handles */
    resil_stop stop;             /* the retry's stop reason (NONE when one follows) */
    const resil_outcome *outcome;/* how the attempt (or hedged attempt) ended */
    bool linked;                 /* HEDGE: link_id is the primary attempt's span */
    uint8_t link_id[8];
    const resil_http_attrs *http;/* NULL if the call had none */
} resil_span;

typedef void (*resil_span_fn)(const resil_span *s, void *ud);

typedef struct resil_tracer_opts {
    resil_span_fn on_span;  /* required: receives every finished span */
    void *on_span_ud;
    resil_clock *clock;     /* the pipeline's clock (for wall times); NULL = system */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_tracer_opts;

/* A tracer is a plain value; it never allocates. */
typedef struct resil_tracer {
    resil_tracer_opts opts; /* private */
} resil_tracer;

RESIL_API void resil_tracer_opts_default(resil_tracer_opts *o);
RESIL_API int resil_tracer_init(resil_tracer *t, const resil_tracer_opts *o, resil_err *err);
/* The listener: ud is the resil_tracer *. Events of executions that are not
 * traced, or traced but sampled out, return at the first test. */
RESIL_API void resil_tracer_on_event(const resil_event *ev, void *ud);

RESIL_END_DECLS

#endif
