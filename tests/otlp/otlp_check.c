/*
 * otlp_check.c — the OTLP JSON payload validator (otlp_check.h).
 *
 * Each message is checked by a function that knows its fields: unknown
 * fields are errors (a misspelled field would be silently dropped by a
 * collector), and each field's JSON type is the one the protobuf JSON
 * mapping gives it. The first violation is reported with its path.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "otlp_check.h"

typedef struct ctx {
    char *why;
    size_t cap;
    bool failed;
    char path[256];
} ctx;

static bool fail(ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return false;
    c->failed = true;
    int n = snprintf(c->why, c->cap, "%s: ", c->path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < c->cap)
        vsnprintf(c->why + n, c->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* Path bookkeeping: push a segment, pop it after. */
static size_t push(ctx *c, const char *seg, long index)
{
    size_t at = strlen(c->path);
    if (index >= 0)
        snprintf(c->path + at, sizeof c->path - at, "%s[%ld]", seg, index);
    else
        snprintf(c->path + at, sizeof c->path - at, ".%s", seg);
    return at;
}

static void pop(ctx *c, size_t at) { c->path[at] = '\0'; }

/* Every key of o is one of `allowed` (NULL-terminated). */
static bool only(ctx *c, json_t *o, const char *const *allowed)
{
    if (!json_is_object(o))
        return fail(c, "must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        bool ok = false;
        for (int i = 0; allowed[i] != NULL && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok)
            return fail(c, "unknown field \"%s\"", k);
    }
    return true;
}

static bool uint64_string(ctx *c, json_t *v, const char *what, unsigned long long *out)
{
    const char *s = json_string_value(v);
    if (s == NULL || s[0] == '\0')
        return fail(c, "%s must be a decimal string", what);
    unsigned long long n = 0;
    for (const char *d = s; *d; d++) {
        if (*d < '0' || *d > '9')
            return fail(c, "%s must be a decimal string, got \"%s\"", what, s);
        n = n * 10 + (unsigned)(*d - '0');
    }
    if (out != NULL)
        *out = n;
    return true;
}

static bool int64_string(ctx *c, json_t *v, const char *what)
{
    const char *s = json_string_value(v);
    if (s == NULL)
        return fail(c, "%s must be a decimal string", what);
    json_t *digits = json_string(s[0] == '-' ? s + 1 : s);
    bool ok = uint64_string(c, digits, what, NULL);
    json_decref(digits);
    return ok;
}

static bool hex_id(ctx *c, json_t *v, size_t digits, const char *what)
{
    const char *s = json_string_value(v);
    if (s == NULL || strlen(s) != digits)
        return fail(c, "%s must be %zu lower-case hex digits", what, digits);
    bool nonzero = false;
    for (const char *d = s; *d; d++) {
        if (!((*d >= '0' && *d <= '9') || (*d >= 'a' && *d <= 'f')))
            return fail(c, "%s must be %zu lower-case hex digits, got \"%s\"", what, digits, s);
        nonzero |= *d != '0';
    }
    return nonzero ? true : fail(c, "%s must not be all zero", what);
}

static bool enum_int(ctx *c, json_t *v, int lo, int hi, const char *what)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return fail(c, "%s must be an integer in [%d, %d]", what, lo, hi);
    return true;
}

static bool any_value(ctx *c, json_t *v)
{
    static const char *const fields[] = {"stringValue", "boolValue",  "intValue",
                                         "doubleValue", "arrayValue", "kvlistValue",
                                         "bytesValue",  NULL};
    if (!only(c, v, fields))
        return false;
    if (json_object_size(v) != 1)
        return fail(c, "an AnyValue holds exactly one value");
    json_t *x;
    if ((x = json_object_get(v, "stringValue")) != NULL && !json_is_string(x))
        return fail(c, "stringValue must be a string");
    if ((x = json_object_get(v, "boolValue")) != NULL && !json_is_boolean(x))
        return fail(c, "boolValue must be true or false");
    if ((x = json_object_get(v, "intValue")) != NULL && !int64_string(c, x, "intValue"))
        return false;
    if ((x = json_object_get(v, "doubleValue")) != NULL && !json_is_number(x))
        return fail(c, "doubleValue must be a number");
    return true;
}

static bool attributes(ctx *c, json_t *list)
{
    if (list == NULL)
        return true;
    if (!json_is_array(list))
        return fail(c, "attributes must be an array");
    static const char *const fields[] = {"key", "value", NULL};
    size_t i;
    json_t *kv;
    json_array_foreach(list, i, kv)
    {
        size_t at = push(c, ".attributes", (long)i);
        if (!only(c, kv, fields))
            return false;
        const char *key = json_string_value(json_object_get(kv, "key"));
        if (key == NULL || key[0] == '\0')
            return fail(c, "key must be a non-empty string");
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(list, j), "key")), key) == 0)
                return fail(c, "key \"%s\" appears twice", key);
        json_t *v = json_object_get(kv, "value");
        if (v == NULL || !any_value(c, v))
            return v == NULL ? fail(c, "value is missing") : false;
        pop(c, at);
    }
    return true;
}

static bool resource(ctx *c, json_t *r)
{
    static const char *const fields[] = {"attributes", "droppedAttributesCount", NULL};
    if (r == NULL)
        return true;
    size_t at = push(c, "resource", -1);
    bool ok = only(c, r, fields) && attributes(c, json_object_get(r, "attributes"));
    pop(c, at);
    return ok;
}

static bool scope(ctx *c, json_t *s)
{
    static const char *const fields[] = {"name", "version", "attributes",
                                         "droppedAttributesCount", NULL};
    if (s == NULL)
        return true;
    size_t at = push(c, "scope", -1);
    bool ok = only(c, s, fields) && attributes(c, json_object_get(s, "attributes"));
    if (ok && json_object_get(s, "name") != NULL && !json_is_string(json_object_get(s, "name")))
        ok = fail(c, "name must be a string");
    pop(c, at);
    return ok;
}

static json_t *array_field(ctx *c, json_t *o, const char *name, bool required)
{
    json_t *a = json_object_get(o, name);
    if (a == NULL && required)
        return fail(c, "%s is missing", name), NULL;
    if (a != NULL && !json_is_array(a))
        return fail(c, "%s must be an array", name), NULL;
    return a;
}

/* ---- traces ----------------------------------------------------------------------- */

static bool link(ctx *c, json_t *l)
{
    static const char *const fields[] = {"traceId", "spanId", "traceState", "attributes",
                                         "droppedAttributesCount", "flags", NULL};
    return only(c, l, fields) && hex_id(c, json_object_get(l, "traceId"), 32, "traceId") &&
           hex_id(c, json_object_get(l, "spanId"), 16, "spanId") &&
           attributes(c, json_object_get(l, "attributes"));
}

static bool status(ctx *c, json_t *s)
{
    static const char *const fields[] = {"message", "code", NULL};
    if (s == NULL)
        return true;
    if (!only(c, s, fields))
        return false;
    json_t *m = json_object_get(s, "message");
    if (m != NULL && !json_is_string(m))
        return fail(c, "status.message must be a string");
    json_t *code = json_object_get(s, "code");
    return code == NULL || enum_int(c, code, 0, 2, "status.code");
}

static bool span(ctx *c, json_t *s)
{
    static const char *const fields[] = {
        "traceId",    "spanId",          "traceState",  "parentSpanId",
        "flags",      "name",            "kind",        "startTimeUnixNano",
        "endTimeUnixNano", "attributes", "droppedAttributesCount", "events",
        "droppedEventsCount", "links",   "droppedLinksCount", "status", NULL};
    if (!only(c, s, fields) || !hex_id(c, json_object_get(s, "traceId"), 32, "traceId") ||
        !hex_id(c, json_object_get(s, "spanId"), 16, "spanId"))
        return false;
    json_t *parent = json_object_get(s, "parentSpanId");
    if (parent != NULL && !hex_id(c, parent, 16, "parentSpanId"))
        return false;
    if (!json_is_string(json_object_get(s, "name")))
        return fail(c, "name must be a string");
    json_t *kind = json_object_get(s, "kind");
    if (kind != NULL && !enum_int(c, kind, 0, 5, "kind"))
        return false;
    json_t *flags = json_object_get(s, "flags");
    if (flags != NULL && (!json_is_integer(flags) || json_integer_value(flags) < 0))
        return fail(c, "flags must be a non-negative integer");
    unsigned long long start, end;
    if (!uint64_string(c, json_object_get(s, "startTimeUnixNano"), "startTimeUnixNano", &start) ||
        !uint64_string(c, json_object_get(s, "endTimeUnixNano"), "endTimeUnixNano", &end))
        return false;
    if (end < start)
        return fail(c, "endTimeUnixNano is before startTimeUnixNano");
    if (!attributes(c, json_object_get(s, "attributes")) || !status(c, json_object_get(s, "status")))
        return false;
    json_t *links = array_field(c, s, "links", false);
    size_t i;
    json_t *l;
    json_array_foreach(links, i, l)
    {
        size_t at = push(c, ".links", (long)i);
        if (!link(c, l))
            return false;
        pop(c, at);
    }
    return !c->failed;
}

static bool scope_spans(ctx *c, json_t *ss)
{
    static const char *const fields[] = {"scope", "spans", "schemaUrl", NULL};
    if (!only(c, ss, fields) || !scope(c, json_object_get(ss, "scope")))
        return false;
    json_t *spans = array_field(c, ss, "spans", true);
    size_t i;
    json_t *s;
    json_array_foreach(spans, i, s)
    {
        size_t at = push(c, ".spans", (long)i);
        if (!span(c, s))
            return false;
        pop(c, at);
    }
    return !c->failed;
}

static bool resource_spans(ctx *c, json_t *rs)
{
    static const char *const fields[] = {"resource", "scopeSpans", "schemaUrl", NULL};
    if (!only(c, rs, fields) || !resource(c, json_object_get(rs, "resource")))
        return false;
    json_t *list = array_field(c, rs, "scopeSpans", true);
    size_t i;
    json_t *ss;
    json_array_foreach(list, i, ss)
    {
        size_t at = push(c, ".scopeSpans", (long)i);
        if (!scope_spans(c, ss))
            return false;
        pop(c, at);
    }
    return !c->failed;
}

/* ---- metrics ---------------------------------------------------------------------------- */

static bool number_point(ctx *c, json_t *p)
{
    static const char *const fields[] = {"attributes", "startTimeUnixNano", "timeUnixNano",
                                         "asDouble", "asInt", "exemplars", "flags", NULL};
    if (!only(c, p, fields) || !attributes(c, json_object_get(p, "attributes")))
        return false;
    json_t *start = json_object_get(p, "startTimeUnixNano");
    if (start != NULL && !uint64_string(c, start, "startTimeUnixNano", NULL))
        return false;
    if (!uint64_string(c, json_object_get(p, "timeUnixNano"), "timeUnixNano", NULL))
        return false;
    json_t *i = json_object_get(p, "asInt"), *d = json_object_get(p, "asDouble");
    if ((i == NULL) == (d == NULL))
        return fail(c, "a data point holds exactly one of asInt and asDouble");
    if (i != NULL)
        return int64_string(c, i, "asInt");
    return json_is_number(d) ? true : fail(c, "asDouble must be a number");
}

static bool histogram_point(ctx *c, json_t *p)
{
    static const char *const fields[] = {"attributes", "startTimeUnixNano", "timeUnixNano",
                                         "count", "sum", "bucketCounts", "explicitBounds",
                                         "exemplars", "flags", "min", "max", NULL};
    if (!only(c, p, fields) || !attributes(c, json_object_get(p, "attributes")))
        return false;
    unsigned long long count, total = 0;
    if (!uint64_string(c, json_object_get(p, "timeUnixNano"), "timeUnixNano", NULL) ||
        !uint64_string(c, json_object_get(p, "count"), "count", &count))
        return false;
    json_t *sum = json_object_get(p, "sum");
    if (sum != NULL && !json_is_number(sum))
        return fail(c, "sum must be a number");
    json_t *counts = array_field(c, p, "bucketCounts", true);
    json_t *bounds = array_field(c, p, "explicitBounds", true);
    if (counts == NULL || bounds == NULL)
        return false;
    if (json_array_size(counts) != json_array_size(bounds) + 1)
        return fail(c, "bucketCounts must have one more entry than explicitBounds");
    size_t i;
    json_t *v;
    json_array_foreach(counts, i, v)
    {
        unsigned long long n;
        if (!uint64_string(c, v, "a bucket count", &n))
            return false;
        total += n;
    }
    json_array_foreach(bounds, i, v)
    {
        if (!json_is_number(v))
            return fail(c, "explicitBounds must be numbers");
        if (i > 0 && json_number_value(v) <= json_number_value(json_array_get(bounds, i - 1)))
            return fail(c, "explicitBounds must be strictly increasing");
    }
    return total == count ? true : fail(c, "bucketCounts add up to %llu, count is %llu", total, count);
}

static bool points(ctx *c, json_t *data, bool histogram)
{
    json_t *list = array_field(c, data, "dataPoints", true);
    size_t i;
    json_t *p;
    json_array_foreach(list, i, p)
    {
        size_t at = push(c, ".dataPoints", (long)i);
        if (!(histogram ? histogram_point(c, p) : number_point(c, p)))
            return false;
        pop(c, at);
    }
    return !c->failed;
}

static bool metric(ctx *c, json_t *m)
{
    static const char *const fields[] = {"name", "description", "unit", "sum", "gauge",
                                         "histogram", "exponentialHistogram", "summary",
                                         "metadata", NULL};
    static const char *const sum_fields[] = {"dataPoints", "aggregationTemporality",
                                             "isMonotonic", NULL};
    static const char *const gauge_fields[] = {"dataPoints", NULL};
    static const char *const histogram_fields[] = {"dataPoints", "aggregationTemporality", NULL};
    if (!only(c, m, fields))
        return false;
    if (!json_is_string(json_object_get(m, "name")) || json_string_length(json_object_get(m, "name")) == 0)
        return fail(c, "name must be a non-empty string");
    json_t *sum = json_object_get(m, "sum"), *gauge = json_object_get(m, "gauge"),
           *hist = json_object_get(m, "histogram");
    if ((sum != NULL) + (gauge != NULL) + (hist != NULL) != 1)
        return fail(c, "a metric holds exactly one of sum, gauge, histogram");
    if (sum != NULL)
        return only(c, sum, sum_fields) &&
               enum_int(c, json_object_get(sum, "aggregationTemporality"), 1, 2,
                        "aggregationTemporality") &&
               (json_object_get(sum, "isMonotonic") == NULL ||
                json_is_boolean(json_object_get(sum, "isMonotonic")) ||
                fail(c, "isMonotonic must be true or false")) &&
               points(c, sum, false);
    if (gauge != NULL)
        return only(c, gauge, gauge_fields) && points(c, gauge, false);
    return only(c, hist, histogram_fields) &&
           enum_int(c, json_object_get(hist, "aggregationTemporality"), 1, 2,
                    "aggregationTemporality") &&
           points(c, hist, true);
}

static bool scope_metrics(ctx *c, json_t *sm)
{
    static const char *const fields[] = {"scope", "metrics", "schemaUrl", NULL};
    if (!only(c, sm, fields) || !scope(c, json_object_get(sm, "scope")))
        return false;
    json_t *list = array_field(c, sm, "metrics", true);
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m)
    {
        size_t at = push(c, ".metrics", (long)i);
        if (!metric(c, m))
            return false;
        pop(c, at);
    }
    return !c->failed;
}

static bool resource_metrics(ctx *c, json_t *rm)
{
    static const char *const fields[] = {"resource", "scopeMetrics", "schemaUrl", NULL};
    if (!only(c, rm, fields) || !resource(c, json_object_get(rm, "resource")))
        return false;
    json_t *list = array_field(c, rm, "scopeMetrics", true);
    size_t i;
    json_t *sm;
    json_array_foreach(list, i, sm)
    {
        size_t at = push(c, ".scopeMetrics", (long)i);
        if (!scope_metrics(c, sm))
            return false;
        pop(c, at);
    }
    return !c->failed;
}

/* ---- entry points -------------------------------------------------------------------------- */

static json_t *check(const char *body, size_t len, char *why, size_t cap, const char *top,
                     bool (*each)(ctx *, json_t *))
{
    ctx c = {why, cap, false, ""};
    json_error_t e;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
    if (root == NULL) {
        snprintf(why, cap, "not JSON: %s (line %d)", e.text, e.line);
        return NULL;
    }
    const char *const fields[] = {top, NULL};
    json_t *list = only(&c, root, fields) ? array_field(&c, root, top, true) : NULL;
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x)
    {
        size_t at = push(&c, top, (long)i);
        if (!each(&c, x))
            break;
        pop(&c, at);
    }
    if (c.failed) {
        json_decref(root);
        return NULL;
    }
    why[0] = '\0';
    return root;
}

json_t *otlp_check_traces(const char *body, size_t len, char *why, size_t cap)
{
    return check(body, len, why, cap, "resourceSpans", resource_spans);
}

json_t *otlp_check_metrics(const char *body, size_t len, char *why, size_t cap)
{
    return check(body, len, why, cap, "resourceMetrics", resource_metrics);
}

json_t *otlp_attr(json_t *list, const char *key)
{
    size_t i;
    json_t *kv;
    json_array_foreach(list, i, kv)
    {
        if (strcmp(json_string_value(json_object_get(kv, "key")), key) == 0)
            return json_object_get(kv, "value");
    }
    return NULL;
}

const char *otlp_str_attr(json_t *attributes, const char *key)
{
    json_t *v = otlp_attr(attributes, key);
    return v != NULL ? json_string_value(json_object_get(v, "stringValue")) : NULL;
}

json_t *otlp_metric(json_t *root, const char *name)
{
    json_t *sm = json_array_get(
        json_object_get(json_array_get(json_object_get(root, "resourceMetrics"), 0),
                        "scopeMetrics"),
        0);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(sm, "metrics"), i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
            return m;
    }
    return NULL;
}
