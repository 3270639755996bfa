/*
 * trace.c — W3C Trace Context on HTTP requests, and the semantic-convention
 * attributes of a call (trace.h).
 *
 * Every attempt (and every hedge) is its own span, so each sends its own
 * traceparent: the headers are two list nodes kept in the attempt's pooled
 * state and put in front of the call's list, which libcurl reads at each
 * perform — nothing is allocated per attempt. A caller's own traceparent
 * is the parent, never sent on as well: the list is copied without it, the
 * one case that allocates, and only for a traced call whose headers carry
 * one.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "trace.h"

/* "Name: value" with the name matched case-insensitively; the value's start. */
static const char *header_value(const char *line, const char *name)
{
    size_t n = strlen(name);
    if (line == NULL || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return NULL;
    return line + n + 1;
}

static bool is_trace_header(const char *line)
{
    return header_value(line, RESIL__TRACEPARENT_HEADER) != NULL ||
           header_value(line, RESIL__TRACESTATE_HEADER) != NULL;
}

/* The first valid traceparent among the headers, and its tracestate. */
static bool parent_from_headers(const struct curl_slist *h, resil_span_context *out)
{
    const char *tp = NULL, *ts = NULL;
    for (; h != NULL; h = h->next) {
        const char *v;
        if (tp == NULL && (v = header_value(h->data, RESIL__TRACEPARENT_HEADER)) != NULL)
            tp = v;
        else if (ts == NULL && (v = header_value(h->data, RESIL__TRACESTATE_HEADER)) != NULL)
            ts = v;
    }
    if (tp == NULL || resil_traceparent_parse(tp, strlen(tp), out, NULL) != 0)
        return false;
    if (ts != NULL)
        resil_tracestate_parse(ts, strlen(ts), out, NULL); /* a bad one is dropped */
    return true;
}

static int without_trace_headers(const struct curl_slist *h, struct curl_slist **out)
{
    struct curl_slist *copy = NULL;
    for (; h != NULL; h = h->next) {
        if (is_trace_header(h->data))
            continue;
        struct curl_slist *grown = curl_slist_append(copy, h->data);
        if (grown == NULL) {
            curl_slist_free_all(copy);
            return RESIL_ENOMEM;
        }
        copy = grown;
    }
    *out = copy;
    return 0;
}

/* A caller's own context goes onto the wire as it is, so the core's
 * parsers, which decide what a received one may be, decide it here too:
 * its traceparent as it would be written (no all-zero id), and its
 * tracestate (no CR or LF to end the header early). */
static bool context_ok(const resil_span_context *c)
{
    char text[RESIL_TRACEPARENT_LEN + 1];
    resil_span_context parsed;
    resil_traceparent_format(c, text, sizeof text);
    if (resil_traceparent_parse(text, RESIL_TRACEPARENT_LEN, &parsed, NULL) != 0)
        return false;
    size_t n = strnlen(c->tracestate, sizeof c->tracestate);
    if (n == 0)
        return true;
    return n < sizeof c->tracestate && resil_tracestate_parse(c->tracestate, n, &parsed, NULL) == 0;
}

int resil__http_tel_read(resil__http_tel *t, const resil_http_request *r,
                         struct curl_slist **headers)
{
    if (r->trace != NULL && !context_ok(r->trace))
        return RESIL_EINVAL;
    if (r->trace != NULL) {
        t->parent = *r->trace;
        t->traced = true;
    } else {
        t->traced = parent_from_headers(r->headers, &t->parent);
    }
    bool carries = false;
    for (const struct curl_slist *h = r->headers; h != NULL && !carries; h = h->next)
        carries = is_trace_header(h->data);
    if (!t->traced || !carries)
        return 0;
    int rc = without_trace_headers(r->headers, &t->filtered);
    if (rc == 0)
        *headers = t->filtered;
    return rc;
}

void resil__http_tel_attrs(resil__http_tel *t, const char *authority, const char *method)
{
    t->attrs.method = method != NULL ? method : "_OTHER";
    t->attrs.server_address = t->address;
    t->attrs.server_port = 0;
    t->address[0] = '\0';
    if (authority != NULL)
        resil_authority_split(authority, t->address, sizeof t->address, &t->attrs.server_port);
}

void resil__http_tel_attempt(const resil__http_tel *t, const resil_attempt_ctx *ctx, CURL *easy,
                             resil__http_trace_hdr *h, struct curl_slist *rest)
{
    resil_span_context mine;
    const resil_span_context *c = &t->parent;
    if (resil_attempt_span(ctx, &mine) == 0)
        c = &mine;
    memcpy(h->parent, RESIL__TRACEPARENT_HEADER ": ", sizeof RESIL__TRACEPARENT_HEADER + 1);
    resil_traceparent_format(c, h->parent + sizeof RESIL__TRACEPARENT_HEADER + 1,
                             RESIL_TRACEPARENT_LEN + 1);
    h->node[0].data = h->parent;
    h->node[0].next = rest;
    if (c->tracestate[0] != '\0') {
        snprintf(h->state, sizeof h->state, RESIL__TRACESTATE_HEADER ": %s", c->tracestate);
        h->node[1].data = h->state;
        h->node[1].next = rest;
        h->node[0].next = &h->node[1];
    }
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, &h->node[0]);
}

void resil__http_tel_free(resil__http_tel *t)
{
    curl_slist_free_all(t->filtered);
    t->filtered = NULL;
}
