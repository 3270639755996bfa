/*
 * trace.h — what a call tells telemetry (its HTTP attributes) and the
 * trace context it carries (read from the request, written to every
 * attempt), kept apart from perform.c so the drop-in's hot path only
 * calls in when the client listens or the request is traced.
 */
#ifndef RESIL_HTTP_TRACE_H
#define RESIL_HTTP_TRACE_H

#include "resil/http.h"

#define RESIL__TRACEPARENT_HEADER "traceparent"
#define RESIL__TRACESTATE_HEADER "tracestate"

/* One call's attributes and parent context. */
typedef struct resil__http_tel {
    resil_http_attrs attrs;
    char address[RESIL_BREAKER_NAME_MAX];
    resil_span_context parent;
    bool traced;                 /* `parent` is set: every attempt sends trace context */
    struct curl_slist *filtered; /* owned: the caller's headers without trace context */
    resil_call_telemetry call;   /* what the execution is told; lives as long as the call */
} resil__http_tel;

/* One attempt's trace headers: a traceparent node, then a tracestate node
 * when there is one, then the call's list. */
typedef struct resil__http_trace_hdr {
    struct curl_slist node[2];
    char parent[sizeof RESIL__TRACEPARENT_HEADER + 2 + RESIL_TRACEPARENT_LEN];
    char state[sizeof RESIL__TRACESTATE_HEADER + 2 + RESIL_TRACESTATE_MAX];
} resil__http_trace_hdr;

/* The parent: the request's explicit context, else a valid traceparent
 * (and tracestate) among its headers. When traced and the caller's list
 * carries trace headers, `*headers` becomes a copy without them (so no
 * request sends two). RESIL_EINVAL for an explicit context with an
 * all-zero id or a tracestate that does not parse; RESIL_ENOMEM. */
int resil__http_tel_read(resil__http_tel *t, const resil_http_request *r,
                         struct curl_slist **headers);
static inline int resil__http_tel_trace(resil__http_tel *t, const resil_http_request *r,
                                        struct curl_slist **headers)
{
    t->filtered = NULL;
    t->traced = false;
    if (r->trace == NULL && r->headers == NULL)
        return 0; /* no context to read: most requests, without a call */
    return resil__http_tel_read(t, r, headers);
}
/* The attributes from the method (NULL: "_OTHER") and the URL's authority
 * (NULL when it has none). */
void resil__http_tel_attrs(resil__http_tel *t, const char *authority, const char *method);
/* Point the attempt's handle at its trace headers in front of `rest`:
 * the attempt's own span when the execution is traced, else the parent as
 * it came. */
void resil__http_tel_attempt(const resil__http_tel *t, const resil_attempt_ctx *ctx, CURL *easy,
                             resil__http_trace_hdr *h, struct curl_slist *rest);
void resil__http_tel_free(resil__http_tel *t);
static inline void resil__http_tel_done(resil__http_tel *t)
{
    if (t->filtered != NULL)
        resil__http_tel_free(t);
}

#endif
