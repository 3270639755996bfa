/*
 * otlp_internal.h — what the exporter's files share: the parsed options,
 * the queued span (a resil_span with its strings copied in), the JSON
 * text buffer, and the strict parsers of the OTEL_* value grammars.
 */
#ifndef RESIL_OTLP_INTERNAL_H
#define RESIL_OTLP_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "resil/otlp.h"
#include "resil/retry.h"

#define OTLP_KV_MAX 32      /* entries in a headers or resource list */
#define OTLP_TEXT_MAX 256   /* bytes of a key or value, decoded */
#define OTLP_URL_MAX 1024
/* The longest URL option, in bytes: a base endpoint and the longest path
 * appended to it ("/v1/metrics") still fit in OTLP_URL_MAX. */
#define OTLP_URL_LONGEST (OTLP_URL_MAX - 17)

/* One key=value entry, decoded. */
typedef struct otlp_kv {
    char key[OTLP_TEXT_MAX];
    char value[OTLP_TEXT_MAX];
} otlp_kv;

typedef struct otlp_kvs {
    otlp_kv kv[OTLP_KV_MAX];
    int n;
} otlp_kvs;

/* "key=value,key2=value2": optional spaces and tabs around entries and
 * around '=', empty entries skipped, keys HTTP tokens, values made of
 * baggage octets with %XX escapes decoded (a decoded control character is
 * refused: a header must not smuggle in a line). `what` names the source
 * in the error ("OTEL_EXPORTER_OTLP_HEADERS", "otlp.headers"). 0 or
 * RESIL_EINVAL. */
int resil__otlp_kv_parse(const char *text, size_t len, otlp_kvs *out, const char *what,
                         resil_err *err);
/* 0 for an http:// or https:// URL with a host, at most OTLP_URL_LONGEST
 * bytes; else RESIL_EINVAL, the refusal naming `name` (the option or the
 * variable the URL came from). */
int resil__otlp_url_check(const char *name, const char *url, resil_err *err);

/* A growing text buffer; `failed` once an allocation failed. */
typedef struct otlp_text {
    char *p;
    size_t len, cap;
    bool failed;
} otlp_text;

void resil__otlp_put(otlp_text *t, const char *s, size_t n);
void resil__otlp_puts(otlp_text *t, const char *s);
void resil__otlp_printf(otlp_text *t, const char *fmt, ...) RESIL_PRINTF(2, 3);
/* A JSON string, quoted, escaped, invalid UTF-8 replaced by U+FFFD. */
void resil__otlp_json_string(otlp_text *t, const char *s);

/* A span as queued: the strings copied in, the pointers aimed at them. */
typedef struct otlp_span {
    resil_span s;
    char name[16];
    char pipeline[RESIL_METRICS_LABEL_MAX];
    char operation[RESIL_METRICS_LABEL_MAX];
    char tracestate[RESIL_TRACESTATE_MAX + 1];
    resil_outcome outcome;
    resil_http_attrs http;
    char method[24];
    char address[256];
} otlp_span;

void resil__otlp_span_copy(otlp_span *dst, const resil_span *s);

/* The body of a collector's answer, its first OTLP_ANSWER_MAX - 1 bytes
 * (room for a partial success); the rest is read and dropped. */
#define OTLP_ANSWER_MAX 4096
typedef struct otlp_answer {
    char text[OTLP_ANSWER_MAX];
    size_t len;
} otlp_answer;

struct resil_otlp {
    char traces_url[OTLP_URL_MAX];
    char metrics_url[OTLP_URL_MAX];
    otlp_kvs headers;
    otlp_kvs resource; /* service.name first */
    resil_metrics *metrics;
    resil_duration interval, schedule_delay, timeout;
    resil_clock *clock;     /* retry waits and deadlines */
    resil_retry_policy policy; /* an export's retries, as OTLP/HTTP says */
    uint32_t max_queue, max_batch;
    int64_t started_unix_ns; /* the metrics' start time (cumulative since) */

    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the thread: work, a flush, or the end */
    pthread_cond_t flushed; /* flushers: a flush round is done */
    otlp_span *queue;       /* ring of max_queue */
    uint32_t head, count;
    uint64_t flush_asked, flush_done; /* rounds */
    int flush_rc;
    bool stopping;
    resil_otlp_stats stats;
    pthread_t thread;
    resil_instant drain_by; /* the deadline of the flush round or the end asked last */
    resil_span *batch;      /* the thread's: views of the spans being sent */
    otlp_answer answer;     /* the thread's: the last answer's body */
};

#endif
