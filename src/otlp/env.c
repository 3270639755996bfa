/*
 * env.c — the exporter's options: defaults, the standard OTEL_* variables,
 * and the strict grammars their values follow.
 *
 * Every value is checked before anything is started and a bad one is
 * refused with the variable (or field) named, because an exporter that
 * silently fell back to a default would send telemetry nowhere and nobody
 * would notice. The key=value lists (headers, resource attributes) share
 * one parser, which has a fuzz target (tests/otlp/fuzz_otlp_kv.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_internal.h"

void resil_otlp_opts_default(resil_otlp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->interval = RESIL_S(60);
    o->schedule_delay = RESIL_S(5);
    o->timeout = RESIL_S(10);
    o->max_queue = 2048;
    o->max_batch = 512;
}

/* ---- key=value lists ------------------------------------------------------- */

static bool ows(char c) { return c == ' ' || c == '\t'; }

static bool token_char(char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* baggage-octet: printable ASCII but space, '"', ',', ';' and '\'. */
static bool value_char(char c)
{
    return c > 0x20 && c < 0x7f && c != '"' && c != ',' && c != ';' && c != '\\';
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int kv_fail(resil_err *err, const char *what, int entry, const char *why)
{
    return resil_err_set(err, RESIL_EINVAL, "%s: entry %d %s", what, entry, why);
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && ows(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ows((*s)[*n - 1]))
        (*n)--;
}

/* Decode a value into out (cap OTLP_TEXT_MAX); NULL on success, else why. */
static const char *decode(const char *v, size_t n, char *out)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (c == '%') {
            if (i + 2 >= n || hex(v[i + 1]) < 0 || hex(v[i + 2]) < 0)
                return "has a '%' not followed by two hex digits";
            c = (char)(hex(v[i + 1]) << 4 | hex(v[i + 2]));
            i += 2;
            if ((unsigned char)c < 0x20 || c == 0x7f)
                return "decodes to a control character";
        } else if (!value_char(c)) {
            return "value has a character that must be percent-encoded";
        }
        if (len + 1 >= OTLP_TEXT_MAX)
            return "value is longer than 255 bytes";
        out[len++] = c;
    }
    out[len] = '\0';
    return NULL;
}

static int parse_entry(const char *e, size_t n, otlp_kvs *out, const char *what, int entry,
                       resil_err *err)
{
    const char *eq = memchr(e, '=', n);
    if (eq == NULL)
        return kv_fail(err, what, entry, "has no '='");
    const char *k = e, *v = eq + 1;
    size_t kn = (size_t)(eq - e), vn = n - kn - 1;
    trim(&k, &kn);
    trim(&v, &vn);
    if (kn == 0)
        return kv_fail(err, what, entry, "has an empty key");
    if (kn >= OTLP_TEXT_MAX)
        return resil_err_set(err, RESIL_EINVAL, "%s: entry %d key is longer than %d bytes, got %zu",
                             what, entry, OTLP_TEXT_MAX - 1, kn);
    for (size_t i = 0; i < kn; i++)
        if (!token_char(k[i]))
            return kv_fail(err, what, entry, "key has a character outside an HTTP token");
    if (out->n == OTLP_KV_MAX)
        return kv_fail(err, what, entry, "is one more than the 32 allowed");
    otlp_kv *kv = &out->kv[out->n];
    const char *why = decode(v, vn, kv->value);
    if (why != NULL)
        return kv_fail(err, what, entry, why);
    memcpy(kv->key, k, kn);
    kv->key[kn] = '\0';
    out->n++;
    return 0;
}

int resil__otlp_kv_parse(const char *text, size_t len, otlp_kvs *out, const char *what,
                         resil_err *err)
{
    out->n = 0;
    int entry = 0;
    for (size_t start = 0; start <= len && text != NULL;) {
        const char *comma = memchr(text + start, ',', len - start);
        size_t end = comma != NULL ? (size_t)(comma - text) : len;
        const char *e = text + start;
        size_t n = end - start;
        start = end + 1;
        entry++;
        trim(&e, &n);
        if (n == 0)
            continue;
        int rc = parse_entry(e, n, out, what, entry, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static bool url_shape_ok(const char *url)
{
    const char *rest = strncmp(url, "http://", 7) == 0    ? url + 7
                       : strncmp(url, "https://", 8) == 0 ? url + 8
                                                           : NULL;
    if (rest == NULL || *rest == '\0' || *rest == '/')
        return false;
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f)
            return false;
    return true;
}

int resil__otlp_url_check(const char *name, const char *url, resil_err *err)
{
    if (!url_shape_ok(url))
        return resil_err_set(err, RESIL_EINVAL,
                             "%s must be an http:// or https:// URL with a host, got \"%.64s\"",
                             name, url);
    if (strlen(url) > OTLP_URL_LONGEST)
        return resil_err_set(err, RESIL_EINVAL, "%s must be at most %d bytes long, got %zu", name,
                             OTLP_URL_LONGEST, strlen(url));
    return 0;
}

/* ---- the environment ------------------------------------------------------------ */

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* A whole number in [min, max], digits only. */
static int env_uint(const char *name, uint64_t min, uint64_t max, uint64_t *out, resil_err *err)
{
    const char *v = env(name);
    if (v == NULL)
        return 1;
    uint64_t n = 0;
    const char *c = v;
    for (; *c >= '0' && *c <= '9' && n <= max; c++)
        n = n * 10 + (uint64_t)(*c - '0');
    if (*c != '\0' || c == v || n < min || n > max)
        return resil_err_set(err, RESIL_EINVAL,
                             "%s must be a whole number in [%llu, %llu], got \"%.64s\"", name,
                             (unsigned long long)min, (unsigned long long)max, v);
    *out = n;
    return 0;
}

static int env_ms(const char *name, uint64_t min, resil_duration *out, resil_err *err)
{
    uint64_t ms;
    int rc = env_uint(name, min, UINT64_C(86400000), &ms, err);
    if (rc == 0)
        *out = RESIL_MS((int64_t)ms);
    return rc < 0 ? rc : 0;
}

static int env_count(const char *name, uint32_t *out, resil_err *err)
{
    uint64_t n;
    int rc = env_uint(name, 1, 1u << 20, &n, err);
    if (rc == 0)
        *out = (uint32_t)n;
    return rc < 0 ? rc : 0;
}

/* The exporter refuses a batch larger than its queue too, but by its field's
 * name: where a variable set either, the refusal names the variable. */
static int env_batch_fits(const resil_otlp_opts *o, resil_err *err)
{
    bool batch_set = env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") != NULL;
    if (o->max_batch <= o->max_queue || (!batch_set && env("OTEL_BSP_MAX_QUEUE_SIZE") == NULL))
        return 0;
    if (batch_set)
        return resil_err_set(err, RESIL_EINVAL,
                             "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be at most "
                             "OTEL_BSP_MAX_QUEUE_SIZE (%u), got %u",
                             (unsigned)o->max_queue, (unsigned)o->max_batch);
    return resil_err_set(err, RESIL_EINVAL,
                         "OTEL_BSP_MAX_QUEUE_SIZE must be at least the export batch size (%u), "
                         "got %u",
                         (unsigned)o->max_batch, (unsigned)o->max_queue);
}

static int env_service_name(const char **out, resil_err *err)
{
    const char *v = env("OTEL_SERVICE_NAME");
    if (v == NULL)
        return 0;
    if (strlen(v) >= OTLP_TEXT_MAX)
        return resil_err_set(err, RESIL_EINVAL, "OTEL_SERVICE_NAME must be at most %d bytes, got %zu",
                             OTLP_TEXT_MAX - 1, strlen(v));
    *out = v;
    return 0;
}

static int env_url(const char *name, const char **out, resil_err *err)
{
    const char *v = env(name);
    if (v == NULL)
        return 0;
    int rc = resil__otlp_url_check(name, v, err);
    if (rc == 0)
        *out = v;
    return rc;
}

static int env_list(const char *name, const char **out, resil_err *err)
{
    const char *v = env(name);
    if (v == NULL)
        return 0;
    otlp_kvs *check = malloc(sizeof *check);
    if (check == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "%s: out of memory", name);
    int rc = resil__otlp_kv_parse(v, strlen(v), check, name, err);
    free(check);
    if (rc == 0)
        *out = v;
    return rc;
}

/* A variable with one value this exporter can honour (the encoding it
 * speaks, no compression): any other is refused by name rather than
 * ignored, for all signals and for each. */
static int env_only(const char *name, const char *value, const char *why, resil_err *err)
{
    const char *v = env(name);
    if (v == NULL || strcmp(v, value) == 0)
        return 0;
    return resil_err_set(err, RESIL_EINVAL, "%s must be %s (%s), got \"%.64s\"", name, value,
                         why, v);
}

static int env_protocol(resil_err *err)
{
    static const char *const names[][2] = {
        {"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_COMPRESSION"},
        {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"},
        {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int rc = env_only(names[i][0], "http/json", "the only encoding resil speaks", err);
        if (rc == 0)
            rc = env_only(names[i][1], "none", "resil sends uncompressed", err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int resil_otlp_opts_from_env(resil_otlp_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "otlp: options must not be NULL");
    int rc = env_protocol(err);
    if (rc == 0)
        rc = env_url("OTEL_EXPORTER_OTLP_ENDPOINT", &o->endpoint, err);
    if (rc == 0)
        rc = env_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &o->traces_endpoint, err);
    if (rc == 0)
        rc = env_url("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &o->metrics_endpoint, err);
    if (rc == 0)
        rc = env_list("OTEL_EXPORTER_OTLP_HEADERS", &o->headers, err);
    if (rc == 0)
        rc = env_list("OTEL_RESOURCE_ATTRIBUTES", &o->resource_attributes, err);
    if (rc == 0)
        rc = env_ms("OTEL_EXPORTER_OTLP_TIMEOUT", 1, &o->timeout, err);
    if (rc == 0)
        rc = env_ms("OTEL_METRIC_EXPORT_INTERVAL", 1, &o->interval, err);
    if (rc == 0)
        rc = env_ms("OTEL_BSP_SCHEDULE_DELAY", 0, &o->schedule_delay, err);
    if (rc == 0)
        rc = env_count("OTEL_BSP_MAX_QUEUE_SIZE", &o->max_queue, err);
    if (rc == 0)
        rc = env_count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &o->max_batch, err);
    if (rc == 0)
        rc = env_batch_fits(o, err);
    if (rc == 0)
        rc = env_service_name(&o->service_name, err);
    return rc;
}
