/*
 * encode.c — OTLP's JSON encoding of spans and metrics.
 *
 * The encoding's rules (the OTLP specification's JSON mapping of the
 * protobuf messages): field names in lowerCamelCase, trace and span ids as
 * lower-case hex (not base64), enums as integers, 64-bit integers (times,
 * counts, intValue) as decimal strings, doubles as JSON numbers, absent
 * fields left out rather than written empty. The text is built in one
 * growing buffer on the exporter's thread, never on the call path.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_internal.h"

/* ---- text ----------------------------------------------------------------- */

static bool grow(otlp_text *t, size_t more)
{
    if (t->failed)
        return false;
    if (t->len + more + 1 <= t->cap)
        return true;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1)
        cap *= 2;
    char *p = realloc(t->p, cap);
    if (p == NULL) {
        t->failed = true;
        return false;
    }
    t->p = p;
    t->cap = cap;
    return true;
}

void resil__otlp_put(otlp_text *t, const char *s, size_t n)
{
    if (!grow(t, n))
        return;
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

void resil__otlp_puts(otlp_text *t, const char *s) { resil__otlp_put(t, s, strlen(s)); }

void resil__otlp_printf(otlp_text *t, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        resil__otlp_put(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* The length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                                              : s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
                                                                               : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, surrogate */
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0; /* overlong, beyond U+10FFFF */
    return n;
}

void resil__otlp_json_string(otlp_text *t, const char *s)
{
    resil__otlp_puts(t, "\"");
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        const unsigned char *run = u;
        while (*u >= 0x20 && *u < 0x80 && *u != '"' && *u != '\\')
            u++;
        if (u > run)
            resil__otlp_put(t, (const char *)run, (size_t)(u - run));
        if (*u == '\0')
            break;
        size_t n = utf8_len(u);
        if (n == 0) {
            resil__otlp_puts(t, "\\ufffd");
            u++;
        } else if (*u == '"' || *u == '\\') {
            resil__otlp_put(t, "\\", 1);
            resil__otlp_put(t, (const char *)u++, 1);
        } else if (*u < 0x20) {
            resil__otlp_printf(t, "\\u%04x", *u++);
        } else {
            resil__otlp_put(t, (const char *)u, n);
            u += n;
        }
    }
    resil__otlp_puts(t, "\"");
}

/* ---- common pieces ------------------------------------------------------------ */

static void hex(otlp_text *t, const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    resil__otlp_puts(t, "\"");
    for (size_t i = 0; i < n; i++) {
        char two[2] = {digits[b[i] >> 4], digits[b[i] & 15]};
        resil__otlp_put(t, two, 2);
    }
    resil__otlp_puts(t, "\"");
}

static bool zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return false;
    return true;
}

/* Attributes are written as a list; `first` tracks the commas. */
typedef struct attrs {
    otlp_text *t;
    bool first;
} attrs;

static void attr_key(attrs *a, const char *key)
{
    resil__otlp_puts(a->t, a->first ? "{\"key\":" : ",{\"key\":");
    a->first = false;
    resil__otlp_json_string(a->t, key);
}

static void attr_str(attrs *a, const char *key, const char *value)
{
    if (value == NULL || value[0] == '\0')
        return;
    attr_key(a, key);
    resil__otlp_puts(a->t, ",\"value\":{\"stringValue\":");
    resil__otlp_json_string(a->t, value);
    resil__otlp_puts(a->t, "}}");
}

static void attr_int(attrs *a, const char *key, int64_t v)
{
    attr_key(a, key);
    resil__otlp_printf(a->t, ",\"value\":{\"intValue\":\"%lld\"}}", (long long)v);
}

static void attr_bool(attrs *a, const char *key, bool v)
{
    attr_key(a, key);
    resil__otlp_printf(a->t, ",\"value\":{\"boolValue\":%s}}", v ? "true" : "false");
}

static void attr_double(attrs *a, const char *key, double v)
{
    attr_key(a, key);
    resil__otlp_printf(a->t, ",\"value\":{\"doubleValue\":%.17g}}", v);
}

static void resource(otlp_text *t, const resil_otlp *x)
{
    resil__otlp_puts(t, "\"resource\":{\"attributes\":[");
    attrs a = {t, true};
    for (int i = 0; i < x->resource.n; i++)
        attr_str(&a, x->resource.kv[i].key, x->resource.kv[i].value);
    resil__otlp_puts(t, "]},");
}

static void scope(otlp_text *t)
{
    resil__otlp_puts(t, "\"scope\":{\"name\":\"resil\",\"version\":\"" RESIL_VERSION_STRING "\"},");
}

static int finish(otlp_text *t, char **out, size_t *len)
{
    if (t->failed || t->p == NULL) {
        free(t->p);
        return RESIL_ENOMEM;
    }
    *out = t->p;
    if (len != NULL)
        *len = t->len;
    return 0;
}

/* ---- spans ------------------------------------------------------------------------ */

static void lower_kind(char *dst, size_t cap, resil_kind k)
{
    const char *name = resil_kind_name(k);
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < cap; i++)
        dst[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    dst[i] = '\0';
}

static void http_attrs(attrs *a, const resil_span *s)
{
    if (s->http == NULL)
        return;
    attr_str(a, "http.request.method", s->http->method);
    attr_str(a, "server.address", s->http->server_address);
    if (s->http->server_port > 0)
        attr_int(a, "server.port", s->http->server_port);
    const resil_outcome *o = s->outcome;
    if (o == NULL || s->type == RESIL_SPAN_EXECUTION)
        return;
    if (o->code >= 100 && o->code <= 599)
        attr_int(a, "http.response.status_code", o->code);
    if (o->kind == RESIL_SUCCESS)
        return;
    char error[24];
    if (o->code >= 400 && o->code <= 599)
        snprintf(error, sizeof error, "%d", (int)o->code);
    else
        lower_kind(error, sizeof error, o->kind);
    attr_str(a, "error.type", error);
}

static void span_attrs(otlp_text *t, const resil_span *s)
{
    resil__otlp_puts(t, "\"attributes\":[");
    attrs a = {t, true};
    attr_str(&a, "pipeline.name", s->pipeline);
    attr_str(&a, "operation.key", s->operation);
    if (s->type == RESIL_SPAN_EXECUTION) {
        attr_int(&a, "resil.attempts", s->attempt);
    } else {
        attr_int(&a, "attempt.number", (int64_t)s->attempt - 1); /* Polly's: from 0 */
    }
    if (s->type == RESIL_SPAN_ATTEMPT) {
        attr_bool(&a, "attempt.handled", s->handled);
        attr_double(&a, "resil.attempt.wait_before_ms", (double)s->wait_before / 1e6);
    }
    if (s->type == RESIL_SPAN_HEDGE)
        attr_int(&a, "resil.hedge", s->hedge);
    if (s->stop != RESIL_STOP_NONE)
        attr_str(&a, "resil.stop", resil_stop_name(s->stop));
    if (s->outcome != NULL) {
        char kind[24];
        lower_kind(kind, sizeof kind, s->outcome->kind);
        attr_str(&a, "resil.outcome", kind);
    }
    http_attrs(&a, s);
    resil__otlp_puts(t, "]");
}

static void span(otlp_text *t, const resil_span *s)
{
    resil__otlp_puts(t, "{\"traceId\":");
    hex(t, s->trace_id, 16);
    resil__otlp_puts(t, ",\"spanId\":");
    hex(t, s->span_id, 8);
    if (!zero(s->parent_id, 8)) {
        resil__otlp_puts(t, ",\"parentSpanId\":");
        hex(t, s->parent_id, 8);
    }
    if (s->tracestate != NULL && s->tracestate[0] != '\0') {
        resil__otlp_puts(t, ",\"traceState\":");
        resil__otlp_json_string(t, s->tracestate);
    }
    resil__otlp_printf(t, ",\"flags\":%u,\"name\":", (unsigned)s->flags);
    resil__otlp_json_string(t, s->name);
    /* SPAN_KIND_CLIENT (3) for an attempt that is an HTTP request, else INTERNAL (1) */
    int kind = s->type != RESIL_SPAN_EXECUTION && s->http != NULL ? 3 : 1;
    resil__otlp_printf(t, ",\"kind\":%d,\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\",",
                       kind, (long long)s->start_unix_ns, (long long)s->end_unix_ns);
    span_attrs(t, s);
    if (s->linked) {
        resil__otlp_puts(t, ",\"links\":[{\"traceId\":");
        hex(t, s->trace_id, 16);
        resil__otlp_puts(t, ",\"spanId\":");
        hex(t, s->link_id, 8);
        resil__otlp_puts(t, "}]");
    }
    if (s->outcome != NULL && s->outcome->kind != RESIL_SUCCESS) {
        resil__otlp_puts(t, ",\"status\":{\"code\":2,\"message\":"); /* STATUS_CODE_ERROR */
        resil__otlp_json_string(t, s->outcome->detail);
        resil__otlp_puts(t, "}");
    }
    resil__otlp_puts(t, "}");
}

int resil_otlp_encode_spans(const resil_otlp *x, const resil_span *spans, size_t n, char **out,
                            size_t *len)
{
    if (x == NULL || (spans == NULL && n > 0) || out == NULL)
        return RESIL_EINVAL;
    otlp_text t = {NULL, 0, 0, false};
    resil__otlp_puts(&t, "{\"resourceSpans\":[{");
    resource(&t, x);
    resil__otlp_puts(&t, "\"scopeSpans\":[{");
    scope(&t);
    resil__otlp_puts(&t, "\"spans\":[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            resil__otlp_puts(&t, ",");
        span(&t, &spans[i]);
    }
    resil__otlp_puts(&t, "]}]}]}");
    return finish(&t, out, len);
}

/* ---- metrics ------------------------------------------------------------------------ */

typedef struct metric_writer {
    otlp_text *t;
    const char *open; /* the metric whose data points are being written */
    resil_metric_kind kind;
    bool first_point, first_metric;
    int64_t start_ns, now_ns;
} metric_writer;

static void close_metric(metric_writer *w)
{
    if (w->open != NULL)
        resil__otlp_puts(w->t, "]}}");
    w->open = NULL;
}

static void open_metric(metric_writer *w, const resil_metric_point *p)
{
    close_metric(w);
    otlp_text *t = w->t;
    resil__otlp_puts(t, w->first_metric ? "{\"name\":" : ",{\"name\":");
    w->first_metric = false;
    resil__otlp_json_string(t, p->name);
    resil__otlp_puts(t, ",\"description\":");
    resil__otlp_json_string(t, p->description);
    if (p->unit[0] != '\0') {
        resil__otlp_puts(t, ",\"unit\":");
        resil__otlp_json_string(t, p->unit);
    }
    /* AGGREGATION_TEMPORALITY_CUMULATIVE (2): totals since the sink was made */
    if (p->kind == RESIL_METRIC_COUNTER)
        resil__otlp_puts(t, ",\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":true,"
                            "\"dataPoints\":[");
    else if (p->kind == RESIL_METRIC_HISTOGRAM)
        resil__otlp_puts(t, ",\"histogram\":{\"aggregationTemporality\":2,\"dataPoints\":[");
    else
        resil__otlp_puts(t, ",\"gauge\":{\"dataPoints\":[");
    w->open = p->name;
    w->kind = p->kind;
    w->first_point = true;
}

static void point_attrs(otlp_text *t, const resil_metric_point *p)
{
    resil__otlp_puts(t, "{\"attributes\":[");
    attrs a = {t, true};
    for (size_t i = 0; i < p->nattrs; i++) {
        if (p->attrs[i].is_int)
            attr_int(&a, p->attrs[i].key, p->attrs[i].int_value);
        else if (p->attrs[i].value[0] != '\0')
            attr_str(&a, p->attrs[i].key, p->attrs[i].value);
    }
    resil__otlp_puts(t, "],");
}

static void histogram_point(otlp_text *t, const resil_metric_point *p)
{
    resil__otlp_printf(t, "\"count\":\"%llu\",\"sum\":%.17g,\"bucketCounts\":[",
                       (unsigned long long)p->count, p->sum);
    for (size_t b = 0; b <= p->nbounds; b++)
        resil__otlp_printf(t, "%s\"%llu\"", b ? "," : "", (unsigned long long)p->bucket_counts[b]);
    resil__otlp_puts(t, "],\"explicitBounds\":[");
    for (size_t b = 0; b < p->nbounds; b++)
        resil__otlp_printf(t, "%s%.17g", b ? "," : "", p->bounds[b]);
    resil__otlp_puts(t, "]}");
}

static int metric_point(const resil_metric_point *p, void *ud)
{
    metric_writer *w = ud;
    if (w->open == NULL || strcmp(w->open, p->name) != 0 || w->kind != p->kind)
        open_metric(w, p);
    otlp_text *t = w->t;
    if (!w->first_point)
        resil__otlp_puts(t, ",");
    w->first_point = false;
    point_attrs(t, p);
    if (p->kind != RESIL_METRIC_GAUGE)
        resil__otlp_printf(t, "\"startTimeUnixNano\":\"%lld\",", (long long)w->start_ns);
    resil__otlp_printf(t, "\"timeUnixNano\":\"%lld\",", (long long)w->now_ns);
    if (p->kind == RESIL_METRIC_HISTOGRAM)
        histogram_point(t, p);
    else
        resil__otlp_printf(t, "\"asInt\":\"%lld\"}", (long long)p->value);
    return t->failed ? RESIL_ENOMEM : 0;
}

int resil_otlp_encode_metrics(const resil_otlp *x, resil_metrics *m, int64_t now_unix_ns,
                              char **out, size_t *len)
{
    if (x == NULL || m == NULL || out == NULL)
        return RESIL_EINVAL;
    otlp_text t = {NULL, 0, 0, false};
    resil__otlp_puts(&t, "{\"resourceMetrics\":[{");
    resource(&t, x);
    resil__otlp_puts(&t, "\"scopeMetrics\":[{");
    scope(&t);
    resil__otlp_puts(&t, "\"metrics\":[");
    metric_writer w = {&t, NULL, RESIL_METRIC_COUNTER, true, true, x->started_unix_ns,
                       now_unix_ns};
    int rc = resil_metrics_visit(m, metric_point, &w);
    close_metric(&w);
    resil__otlp_puts(&t, "]}]}]}");
    if (rc != 0) {
        free(t.p);
        return rc;
    }
    return finish(&t, out, len);
}
