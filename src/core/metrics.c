/*
 * metrics.c — the metrics sink: counters and histograms fed by events,
 * gauges read from watched objects, written as Prometheus text.
 *
 * Recording must not allocate, and the set of label combinations is not
 * known in advance, so every series lives in a table sized once, at
 * construction: a dense array of series (label values copied into fixed
 * buffers, histogram buckets in one preallocated block) indexed by an
 * open-addressing hash of (metric, labels). A full table drops the new
 * series and counts the drop rather than grow on the execution path.
 * Durations are kept in integer nanoseconds and printed as exact decimal
 * seconds, so sums never drift and bucket bounds print as written.
 *
 * Writing is the slow path and may allocate: it copies the series under
 * the lock, sorts the copy and writes outside the lock, so a scrape never
 * holds up the threads recording.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipeline_internal.h"

/* Every family the sink records. The first three are the resil names'
 * and Polly's both (the naming picks the spelling and the labels); the
 * HTTP ones exist under the OpenTelemetry names only. */
enum {
    M_EVENTS,        /* resilience.polly.strategy.events */
    M_ATTEMPT,       /* resilience.polly.strategy.attempt.duration */
    M_PIPELINE,      /* resilience.polly.pipeline.duration */
    M_HTTP_ATTEMPT,  /* http.client.request.resilience.attempt.duration */
    M_HTTP_RETRIES,  /* http.client.request.resilience.retry.attempts */
    M_HTTP_REJECTED, /* http.client.request.resilience.rate_limiter.rejections */
    M_IDEMPOTENCY,   /* resilience.idempotency.requests */
    M_COUNT
};

#define L_PIPELINE RESIL_METRICS_LABEL_MAX
#define L_SHORT 24 /* strategy, event, outcome, method: short names */

/* A series' labels. Which are used depends on the family and the naming;
 * the unused ones stay empty (zero), so one key type serves every family. */
typedef struct key {
    uint8_t metric;
    uint8_t severity;  /* resil_severity + 1; 0 = not a label */
    uint8_t handled;   /* 0 not a label, 1 false, 2 true */
    uint32_t attempt;  /* 1-based; 0 = not a label */
    int32_t port;      /* server.port; 0 = none */
    int32_t status;    /* http.response.status_code; 0 = none */
    char pipeline[L_PIPELINE];
    char strategy[L_SHORT];
    char event[L_SHORT];      /* event name; handled or outcome in resil naming */
    char error[L_SHORT];      /* exception.type / error.type */
    char method[L_SHORT];
    char operation[L_PIPELINE];
    char address[L_PIPELINE];
} key;

typedef struct series {
    key k;
    uint64_t count;
    int64_t sum_ns;
    uint64_t *buckets; /* histograms: per-bucket counts, not cumulative */
} series;

typedef enum watch_kind { W_BREAKER, W_REGISTRY, W_BULKHEAD, W_LIMITER } watch_kind;

typedef struct watch {
    watch_kind kind;
    char pipeline[L_PIPELINE];
    char authority[L_PIPELINE + 16]; /* W_BREAKER: its HTTP gauge's; "" = its name */
    void *object;
    const void *owner;
    struct watch *next;
} watch;

struct resil_metrics {
    pthread_mutex_t mu;
    series *series;    /* dense, `used` of `max` */
    uint32_t used, max;
    uint32_t *index;   /* open addressing: 0 empty, else series index + 1 */
    uint32_t mask;
    uint64_t *bucket_block;
    resil_duration bounds[RESIL_METRICS_MAX_BUCKETS];
    size_t nbounds;
    uint64_t dropped;
    resil_metrics_names names;
    watch *watches;
};

static const resil_duration default_bounds[] = {
    RESIL_MS(1),   RESIL_US(2500), RESIL_MS(5), RESIL_MS(10), RESIL_MS(25),
    RESIL_MS(50),  RESIL_MS(100),  RESIL_MS(250), RESIL_MS(500), RESIL_S(1),
    RESIL_MS(2500), RESIL_S(5),    RESIL_S(10),  RESIL_S(30),  RESIL_S(60)};

/* ---- construction -------------------------------------------------------- */

void resil_metrics_opts_default(resil_metrics_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_series = 1024;
}

static int check_opts(const resil_metrics_opts *o, resil_err *err)
{
    if (o->max_series < 1 || o->max_series > (1u << 20))
        return resil_err_set(err, RESIL_EINVAL,
                             "metrics.max_series must be in [1, 1048576], got %u",
                             (unsigned)o->max_series);
    if ((unsigned)o->names > RESIL_METRICS_NAMES_RESIL)
        return resil_err_set(err, RESIL_EINVAL,
                             "metrics.names must be RESIL_METRICS_NAMES_OTEL or "
                             "RESIL_METRICS_NAMES_RESIL, got %d",
                             (int)o->names);
    if (o->buckets == NULL)
        return 0;
    if (o->nbuckets < 1 || o->nbuckets > RESIL_METRICS_MAX_BUCKETS)
        return resil_err_set(err, RESIL_EINVAL, "metrics.nbuckets must be in [1, %d], got %zu",
                             RESIL_METRICS_MAX_BUCKETS, o->nbuckets);
    for (size_t i = 0; i < o->nbuckets; i++) {
        if (o->buckets[i] > 0 && (i == 0 || o->buckets[i] > o->buckets[i - 1]))
            continue;
        char text[32];
        resil_duration_format(o->buckets[i], text, sizeof text);
        return resil_err_set(err, RESIL_EINVAL,
                             "metrics.buckets must be > 0 and strictly increasing, "
                             "bucket %zu is %s",
                             i, text);
    }
    return 0;
}

static uint32_t table_size(uint32_t max)
{
    uint32_t n = 16;
    while (n < 2 * max)
        n *= 2;
    return n;
}

int resil_metrics_new(const resil_metrics_opts *o, resil_metrics **out, resil_err *err)
{
    resil_metrics_opts defaults;
    if (o == NULL) {
        resil_metrics_opts_default(&defaults);
        o = &defaults;
    }
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "metrics: out must not be NULL");
    int rc = check_opts(o, err);
    if (rc != 0)
        return rc;
    resil_metrics *m = calloc(1, sizeof *m);
    if (m == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "metrics: out of memory");
    const resil_duration *bounds = o->buckets != NULL ? o->buckets : default_bounds;
    m->nbounds = o->buckets != NULL ? o->nbuckets
                                    : sizeof default_bounds / sizeof default_bounds[0];
    memcpy(m->bounds, bounds, m->nbounds * sizeof *bounds);
    m->max = o->max_series;
    m->names = o->names;
    uint32_t size = table_size(m->max);
    m->mask = size - 1;
    m->series = calloc(m->max, sizeof *m->series);
    m->index = calloc(size, sizeof *m->index);
    m->bucket_block = calloc((size_t)m->max * m->nbounds, sizeof *m->bucket_block);
    if (m->series == NULL || m->index == NULL || m->bucket_block == NULL ||
        pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m->series);
        free(m->index);
        free(m->bucket_block);
        free(m);
        return resil_err_set(err, RESIL_ENOMEM, "metrics: out of memory");
    }
    for (uint32_t i = 0; i < m->max; i++)
        m->series[i].buckets = &m->bucket_block[(size_t)i * m->nbounds];
    *out = m;
    return 0;
}

static void drop_watch(watch *w)
{
    if (w->kind == W_BREAKER)
        resil_breaker_free(w->object);
    free(w);
}

void resil_metrics_free(resil_metrics *m)
{
    if (m == NULL)
        return;
    while (m->watches != NULL) {
        watch *w = m->watches;
        m->watches = w->next;
        drop_watch(w);
    }
    pthread_mutex_destroy(&m->mu);
    free(m->series);
    free(m->index);
    free(m->bucket_block);
    free(m);
}

/* ---- recording ------------------------------------------------------------- */

static void copy_label(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src != NULL ? src : "", n);
    dst[n] = '\0';
}

static uint32_t fnv(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (h ^ 0xff) * 16777619u;
}

static uint32_t fnv_int(uint32_t h, uint32_t v) { return (h ^ v) * 16777619u; }

static uint32_t hash_key(const key *k)
{
    uint32_t h = fnv_int(2166136261u, (uint32_t)k->metric << 16 | k->severity << 8 | k->handled);
    h = fnv_int(fnv_int(fnv_int(h, k->attempt), (uint32_t)k->port), (uint32_t)k->status);
    h = fnv(fnv(fnv(h, k->pipeline), k->strategy), k->event);
    return fnv(fnv(fnv(fnv(h, k->error), k->method), k->operation), k->address);
}

static bool same(const key *a, const key *b)
{
    return a->metric == b->metric && a->severity == b->severity && a->handled == b->handled &&
           a->attempt == b->attempt && a->port == b->port && a->status == b->status &&
           strcmp(a->pipeline, b->pipeline) == 0 && strcmp(a->strategy, b->strategy) == 0 &&
           strcmp(a->event, b->event) == 0 && strcmp(a->error, b->error) == 0 &&
           strcmp(a->method, b->method) == 0 && strcmp(a->operation, b->operation) == 0 &&
           strcmp(a->address, b->address) == 0;
}

/* The key's series, created if there is room; NULL when the table is full
 * (or, with create false, when absent). Caller holds mu. */
static series *find(resil_metrics *m, const key *k, bool create)
{
    for (uint32_t i = hash_key(k) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t at = m->index[i];
        if (at != 0 && same(&m->series[at - 1].k, k))
            return &m->series[at - 1];
        if (at != 0)
            continue;
        if (!create || m->used == m->max)
            return NULL;
        series *s = &m->series[m->used++];
        s->k = *k;
        m->index[i] = m->used;
        return s;
    }
}

static void observe(resil_metrics *m, series *s, resil_duration d)
{
    if (d < 0)
        d = 0;
    s->count++;
    s->sum_ns = resil_dur_add(s->sum_ns, d);
    for (size_t b = 0; b < m->nbounds; b++) {
        if (d <= m->bounds[b]) {
            s->buckets[b]++;
            return;
        }
    }
}

/* Only the string labels need clearing: copy_label writes each one's NUL,
 * and the short ones are cleared by their first byte. */
static void key_clear(key *k, int metric)
{
    k->metric = (uint8_t)metric;
    k->severity = k->handled = 0;
    k->attempt = 0;
    k->port = k->status = 0;
    k->pipeline[0] = k->strategy[0] = k->event[0] = k->error[0] = '\0';
    k->method[0] = k->operation[0] = k->address[0] = '\0';
}

static void lower_kind(char *dst, const resil_outcome *o)
{
    resil__lower_copy(dst, L_SHORT, o != NULL ? resil_kind_name(o->kind) : "unknown");
}

/* The resil names: events by (pipeline, strategy, event), attempts by
 * handled, executions by outcome kind. */
static int resil_key(key *k, const resil_event *ev)
{
    switch (ev->type) {
    case RESIL_EVENT_ATTEMPT:
        key_clear(k, M_ATTEMPT);
        copy_label(k->event, sizeof k->event, ev->handled ? "true" : "false");
        break;
    case RESIL_EVENT_EXECUTION:
        key_clear(k, M_PIPELINE);
        lower_kind(k->event, ev->outcome);
        copy_label(k->pipeline, sizeof k->pipeline, ev->pipeline);
        return k->metric;
    default:
        key_clear(k, M_EVENTS);
        copy_label(k->event, sizeof k->event, resil_event_name(ev->type));
        break;
    }
    copy_label(k->pipeline, sizeof k->pipeline, ev->pipeline);
    copy_label(k->strategy, sizeof k->strategy, ev->strategy);
    return k->metric;
}

/* Polly's event.name for the events Polly has; resil's own name for the
 * rest (docs/telemetry.md lists both). */
static const char *polly_event_name(const resil_event *ev)
{
    switch (ev->type) {
    case RESIL_EVENT_RETRY:
        return "OnRetry";
    case RESIL_EVENT_BREAKER_OPENED:
        return "OnCircuitOpened";
    case RESIL_EVENT_BREAKER_HALF_OPENED:
        return "OnCircuitHalfOpened";
    case RESIL_EVENT_BREAKER_CLOSED:
        return "OnCircuitClosed";
    case RESIL_EVENT_TIMEOUT:
        return "OnTimeout";
    case RESIL_EVENT_HEDGE:
        return "OnHedging";
    case RESIL_EVENT_FALLBACK:
        return "OnFallback";
    case RESIL_EVENT_RATE_LIMITED:
        return "OnRateLimiterRejected";
    case RESIL_EVENT_ATTEMPT:
        return "ExecutionAttempt";
    case RESIL_EVENT_CHAOS_INJECTED:
        return strcmp(ev->strategy, "chaos-fault") == 0     ? "Chaos.OnFault"
               : strcmp(ev->strategy, "chaos-outcome") == 0 ? "Chaos.OnOutcome"
               : strcmp(ev->strategy, "chaos-latency") == 0 ? "Chaos.OnLatency"
                                                             : "Chaos.OnBehavior";
    default:
        return resil_event_name(ev->type);
    }
}

static bool failed(const resil_outcome *o) { return o != NULL && o->kind != RESIL_SUCCESS; }

/* Polly's labels: event name and severity, pipeline, strategy, operation
 * and, for a failed outcome, its kind as exception.type. */
static void otel_key(key *k, const resil_event *ev, int metric)
{
    key_clear(k, metric);
    copy_label(k->pipeline, sizeof k->pipeline, ev->pipeline);
    copy_label(k->operation, sizeof k->operation, ev->key);
    if (failed(ev->outcome))
        lower_kind(k->error, ev->outcome);
    if (metric == M_PIPELINE)
        return;
    copy_label(k->event, sizeof k->event, polly_event_name(ev));
    copy_label(k->strategy, sizeof k->strategy, ev->strategy);
    k->severity = (uint8_t)(ev->severity + 1);
    if (metric != M_ATTEMPT)
        return;
    k->attempt = ev->attempt;
    k->handled = ev->handled ? 2 : 1;
}

static int otel_metric(resil_event_type t)
{
    return t == RESIL_EVENT_ATTEMPT     ? M_ATTEMPT
           : t == RESIL_EVENT_EXECUTION ? M_PIPELINE
                                        : M_EVENTS;
}

/* error.type: the status code for an HTTP error status, else the outcome's
 * kind; empty on success. */
static void http_key(key *k, const resil_event *ev, int metric)
{
    key_clear(k, metric);
    copy_label(k->method, sizeof k->method, ev->http->method);
    copy_label(k->address, sizeof k->address, ev->http->server_address);
    k->port = ev->http->server_port;
    if (metric != M_HTTP_ATTEMPT || ev->outcome == NULL)
        return;
    const resil_outcome *o = ev->outcome;
    bool status = o->code >= 100 && o->code <= 599;
    if (status)
        k->status = (int32_t)o->code;
    if (!failed(o))
        return;
    if (status && o->code >= 400)
        snprintf(k->error, sizeof k->error, "%d", (int)o->code);
    else
        lower_kind(k->error, o);
}

/* The HTTP family an event feeds, or -1. */
static int http_metric(resil_event_type t)
{
    switch (t) {
    case RESIL_EVENT_ATTEMPT:
        return M_HTTP_ATTEMPT;
    case RESIL_EVENT_RETRY:
        return M_HTTP_RETRIES;
    case RESIL_EVENT_RATE_LIMITED:
    case RESIL_EVENT_BULKHEAD_REJECTED:
    case RESIL_EVENT_LIMIT_REJECTED:
        return M_HTTP_REJECTED;
    default:
        return -1;
    }
}

static void record(resil_metrics *m, const key *k, resil_duration d)
{
    series *s = find(m, k, true);
    if (s == NULL)
        m->dropped++;
    else if (k->metric == M_ATTEMPT || k->metric == M_PIPELINE || k->metric == M_HTTP_ATTEMPT)
        observe(m, s, d);
    else
        s->count++;
}

void resil_metrics_on_event(const resil_event *ev, void *ud)
{
    resil_metrics *m = ud;
    /* A hedge counts once, when launched (OnHedging); its end is its span's. */
    if (m == NULL || ev == NULL || ev->type == RESIL_EVENT_HEDGE_ENDED)
        return;
    key k, h;
    int hm = -1;
    if (m->names == RESIL_METRICS_NAMES_RESIL) {
        resil_key(&k, ev);
    } else {
        otel_key(&k, ev, otel_metric(ev->type));
        hm = ev->http != NULL ? http_metric(ev->type) : -1;
        if (hm >= 0)
            http_key(&h, ev, hm);
    }
    pthread_mutex_lock(&m->mu);
    record(m, &k, ev->duration);
    if (hm >= 0)
        record(m, &h, ev->duration);
    pthread_mutex_unlock(&m->mu);
}

void resil_metrics_count_request(resil_metrics *m, const char *method, const char *outcome,
                                 int status, const char *error_type)
{
    if (m == NULL || m->names == RESIL_METRICS_NAMES_RESIL)
        return;
    key k;
    key_clear(&k, M_IDEMPOTENCY);
    copy_label(k.method, sizeof k.method, method);
    copy_label(k.event, sizeof k.event, outcome);
    copy_label(k.error, sizeof k.error, error_type);
    k.status = status >= 100 && status <= 599 ? status : 0;
    pthread_mutex_lock(&m->mu);
    record(m, &k, 0);
    pthread_mutex_unlock(&m->mu);
}

uint64_t resil_metrics_event_count(resil_metrics *m, const char *pipeline,
                                   const char *strategy, resil_event_type t)
{
    if (m == NULL)
        return 0;
    resil_event probe = {.type = t, .strategy = strategy != NULL ? strategy : ""};
    const char *name =
        m->names == RESIL_METRICS_NAMES_RESIL ? resil_event_name(t) : polly_event_name(&probe);
    char want_pipeline[L_PIPELINE], want_strategy[L_SHORT];
    copy_label(want_pipeline, sizeof want_pipeline, pipeline);
    copy_label(want_strategy, sizeof want_strategy, strategy);
    uint64_t n = 0;
    pthread_mutex_lock(&m->mu);
    for (uint32_t i = 0; i < m->used; i++) {
        const key *k = &m->series[i].k;
        if (k->metric == M_EVENTS && strcmp(k->pipeline, want_pipeline) == 0 &&
            strcmp(k->strategy, want_strategy) == 0 && strcmp(k->event, name) == 0)
            n += m->series[i].count;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---- watches ------------------------------------------------------------------ */

static int add_watch(resil_metrics *m, watch_kind kind, const char *pipeline, void *object,
                     const void *owner, const char *authority)
{
    if (m == NULL || object == NULL)
        return RESIL_EINVAL;
    watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return RESIL_ENOMEM;
    w->kind = kind;
    copy_label(w->pipeline, sizeof w->pipeline, pipeline);
    copy_label(w->authority, sizeof w->authority, authority);
    w->object = kind == W_BREAKER ? (void *)resil_breaker_retain(object) : object;
    w->owner = owner;
    pthread_mutex_lock(&m->mu);
    watch **tail = &m->watches;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = w;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int resil_metrics_watch_breaker(resil_metrics *m, const char *pipeline, resil_breaker *b,
                                const void *owner)
{
    return add_watch(m, W_BREAKER, pipeline, b, owner, NULL);
}

int resil_metrics_watch_http_breaker(resil_metrics *m, const char *pipeline, resil_breaker *b,
                                     const char *authority, const void *owner)
{
    char host[L_PIPELINE];
    int port;
    if (resil_authority_split(authority, host, sizeof host, &port) != 0 ||
        strlen(authority) >= L_PIPELINE + 16)
        return RESIL_EINVAL;
    return add_watch(m, W_BREAKER, pipeline, b, owner, authority);
}

int resil_metrics_watch_registry(resil_metrics *m, const char *pipeline, resil_registry *r,
                                 const void *owner)
{
    return add_watch(m, W_REGISTRY, pipeline, r, owner, NULL);
}

int resil_metrics_watch_bulkhead(resil_metrics *m, const char *pipeline, resil_bulkhead *b,
                                 const void *owner)
{
    return add_watch(m, W_BULKHEAD, pipeline, b, owner, NULL);
}

int resil_metrics_watch_limiter(resil_metrics *m, const char *pipeline, resil_limiter *l,
                                const void *owner)
{
    return add_watch(m, W_LIMITER, pipeline, l, owner, NULL);
}

void resil_metrics_unwatch(resil_metrics *m, const void *owner)
{
    if (m == NULL)
        return;
    watch *gone = NULL;
    pthread_mutex_lock(&m->mu);
    for (watch **link = &m->watches; *link != NULL;) {
        watch *w = *link;
        if (w->owner != owner) {
            link = &w->next;
            continue;
        }
        *link = w->next;
        w->next = gone;
        gone = w;
    }
    pthread_mutex_unlock(&m->mu);
    while (gone != NULL) {
        watch *w = gone;
        gone = w->next;
        drop_watch(w);
    }
}

/* ---- writing ------------------------------------------------------------------------ */

typedef struct writer {
    resil_write_fn write;
    void *ud;
    int rc;
} writer;

static void emit(writer *w, const char *text, size_t len)
{
    if (w->rc == 0 && len > 0)
        w->rc = w->write(text, len, w->ud);
}

static void emits(writer *w, const char *text) { emit(w, text, strlen(text)); }

/* Label values escape backslash, double quote and newline. */
static void emit_value(writer *w, const char *v)
{
    const char *run = v;
    for (; *v; v++) {
        const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        if (esc == NULL)
            continue;
        emit(w, run, (size_t)(v - run));
        emits(w, esc);
        run = v + 1;
    }
    emit(w, run, (size_t)(v - run));
}

/* A series' labels as written: names and values, in order. */
#define MAX_LABELS 10
typedef struct labels {
    int n;
    const char *name[MAX_LABELS];  /* OpenTelemetry's (dotted) names */
    const char *value[MAX_LABELS];
    bool is_int[MAX_LABELS];
    int64_t ints[MAX_LABELS];
    char int_text[3][16]; /* room for numeric values */
    int nints;
} labels;

static void label(labels *l, const char *name, const char *value)
{
    l->name[l->n] = name;
    l->is_int[l->n] = false;
    l->value[l->n++] = value;
}

/* OpenTelemetry's mapping leaves an empty attribute out. */
static void label_opt(labels *l, const char *name, const char *value)
{
    if (value[0] != '\0')
        label(l, name, value);
}

static void label_int(labels *l, const char *name, long v)
{
    char *text = l->int_text[l->nints++];
    snprintf(text, sizeof l->int_text[0], "%ld", v);
    label(l, name, text);
    l->is_int[l->n - 1] = true;
    l->ints[l->n - 1] = v;
}

static void resil_labels(labels *l, const series *s)
{
    label(l, "pipeline", s->k.pipeline);
    if (s->k.metric == M_PIPELINE) {
        label(l, "outcome", s->k.event);
        return;
    }
    label(l, "strategy", s->k.strategy);
    label(l, s->k.metric == M_EVENTS ? "event" : "handled", s->k.event);
}

static const char *const polly_severities[] = {"Debug", "Information", "Warning", "Error"};

static void otel_labels(labels *l, const series *s)
{
    const key *k = &s->k;
    if (k->metric >= M_HTTP_ATTEMPT) {
        label_opt(l, "http.request.method", k->method);
        if (k->metric == M_IDEMPOTENCY)
            label_opt(l, "idempotency.outcome", k->event);
        label_opt(l, "server.address", k->address);
        if (k->port > 0)
            label_int(l, "server.port", k->port);
        if (k->status > 0)
            label_int(l, "http.response.status_code", k->status);
        label_opt(l, "error.type", k->error);
        return;
    }
    label_opt(l, "event.name", k->event);
    if (k->severity > 0)
        label(l, "event.severity", polly_severities[(k->severity - 1) & 3]);
    label_opt(l, "pipeline.name", k->pipeline);
    label_opt(l, "strategy.name", k->strategy);
    label_opt(l, "operation.key", k->operation);
    label_opt(l, "exception.type", k->error);
    if (k->attempt > 0)
        label_int(l, "attempt.number", (long)k->attempt - 1); /* Polly counts from 0 */
    if (k->handled > 0)
        label(l, "attempt.handled", k->handled == 2 ? "true" : "false");
}

/* A family as one naming writes it. */
typedef struct family {
    const char *name; /* Prometheus: OpenTelemetry's mapping of otel and unit */
    const char *otel;
    const char *unit; /* UCUM, as OTLP carries it */
    const char *type;
    const char *help;
    int64_t unit_ns;  /* histograms: ns per unit of the written values */
} family;

static const family resil_families[M_COUNT] = {
    {"resil_strategy_events_total", "resil_strategy_events_total", "", "counter",
     "Resilience events reported by pipeline strategies, by event name.", 0},
    {"resil_attempt_duration_seconds", "resil_attempt_duration_seconds", "s", "histogram",
     "Duration of each execution attempt in seconds.", 1000000000},
    {"resil_pipeline_duration_seconds", "resil_pipeline_duration_seconds", "s", "histogram",
     "Duration of each pipeline execution in seconds.", 1000000000},
    {NULL, NULL, NULL, NULL, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, 0}};

static const family otel_families[M_COUNT] = {
    {"resilience_polly_strategy_events_total", "resilience.polly.strategy.events", "{event}",
     "counter", "Emitted upon the occurrence of a resilience event.", 0},
    {"resilience_polly_strategy_attempt_duration_milliseconds",
     "resilience.polly.strategy.attempt.duration", "ms", "histogram",
     "Duration of execution attempts made by the retry and hedging strategies.", 1000000},
    {"resilience_polly_pipeline_duration_milliseconds", "resilience.polly.pipeline.duration",
     "ms", "histogram", "Duration of resilience pipeline executions.", 1000000},
    {"http_client_request_resilience_attempt_duration_seconds",
     "http.client.request.resilience.attempt.duration", "s", "histogram",
     "Duration of each physical HTTP attempt.", 1000000000},
    {"http_client_request_resilience_retry_attempts_total",
     "http.client.request.resilience.retry.attempts", "{retry}", "counter",
     "Retries of HTTP requests.", 0},
    {"http_client_request_resilience_rate_limiter_rejections_total",
     "http.client.request.resilience.rate_limiter.rejections", "{request}", "counter",
     "HTTP requests refused by a rate limiter, bulkhead or concurrency limit.", 0},
    {"resilience_idempotency_requests_total", "resilience.idempotency.requests", "{request}",
     "counter", "Requests an idempotency layer answered, by what it did with the key.", 0}};

/* OpenTelemetry's Prometheus mapping: a dot in a name becomes '_'. */
static void emit_name(writer *w, const char *name)
{
    const char *run = name;
    for (; *name; name++) {
        if (*name != '.')
            continue;
        emit(w, run, (size_t)(name - run));
        emits(w, "_");
        run = name + 1;
    }
    emit(w, run, (size_t)(name - run));
}

static void emit_labels(writer *w, const labels *l, const char *le)
{
    if (l->n == 0 && le == NULL)
        return;
    for (int i = 0; i < l->n; i++) {
        emits(w, i == 0 ? "{" : ",");
        emit_name(w, l->name[i]);
        emits(w, "=\"");
        emit_value(w, l->value[i]);
        emits(w, "\"");
    }
    if (le != NULL) {
        emits(w, l->n == 0 ? "{le=\"" : ",le=\"");
        emits(w, le);
        emits(w, "\"");
    }
    emits(w, "}");
}

/* Exact decimal units: 2500000 ns in seconds is "0.0025", in ms "2.5". */
static void units_text(int64_t ns, int64_t unit_ns, char *buf, size_t cap)
{
    int64_t whole = ns / unit_ns, frac = ns % unit_ns;
    if (frac == 0) {
        snprintf(buf, cap, "%lld", (long long)whole);
        return;
    }
    int digits = unit_ns == 1000000000 ? 9 : 6;
    int n = snprintf(buf, cap, "%lld.%0*lld", (long long)whole, digits, (long long)frac);
    while (n > 0 && buf[n - 1] == '0')
        buf[--n] = '\0';
}

static void emit_u64(writer *w, uint64_t v)
{
    char text[32];
    snprintf(text, sizeof text, " %llu\n", (unsigned long long)v);
    emits(w, text);
}

static void emit_family(writer *w, const char *name, const char *type, const char *help)
{
    emits(w, "# HELP ");
    emits(w, name);
    emits(w, " ");
    emits(w, help);
    emits(w, "\n# TYPE ");
    emits(w, name);
    emits(w, " ");
    emits(w, type);
    emits(w, "\n");
}

static void series_labels(const resil_metrics *m, const series *s, labels *l)
{
    memset(l, 0, sizeof *l);
    if (m->names == RESIL_METRICS_NAMES_RESIL)
        resil_labels(l, s);
    else
        otel_labels(l, s);
}

static void emit_counter(writer *w, const family *f, const labels *l, const series *s)
{
    emits(w, f->name);
    emit_labels(w, l, NULL);
    emit_u64(w, s->count);
}

/* A histogram family's name without its unit's "_total"-free base: the
 * samples are <name>_bucket, _sum and _count. */
static void emit_histogram(writer *w, const resil_metrics *m, const family *f,
                           const labels *l, const series *s)
{
    uint64_t cumulative = 0;
    char le[40];
    for (size_t b = 0; b <= m->nbounds; b++) {
        cumulative += b < m->nbounds ? s->buckets[b] : 0;
        if (b < m->nbounds)
            units_text(m->bounds[b], f->unit_ns, le, sizeof le);
        emits(w, f->name);
        emits(w, "_bucket");
        emit_labels(w, l, b < m->nbounds ? le : "+Inf");
        emit_u64(w, b < m->nbounds ? cumulative : s->count);
    }
    char sum[40];
    units_text(s->sum_ns, f->unit_ns, sum, sizeof sum);
    emits(w, f->name);
    emits(w, "_sum");
    emit_labels(w, l, NULL);
    emits(w, " ");
    emits(w, sum);
    emits(w, "\n");
    emits(w, f->name);
    emits(w, "_count");
    emit_labels(w, l, NULL);
    emit_u64(w, s->count);
}

static int by_labels(const void *a, const void *b)
{
    const key *x = &((const series *)a)->k, *y = &((const series *)b)->k;
    if (x->metric != y->metric)
        return (int)x->metric - (int)y->metric;
    int c = strcmp(x->pipeline, y->pipeline);
    if (c == 0)
        c = strcmp(x->strategy, y->strategy);
    if (c == 0)
        c = strcmp(x->event, y->event);
    if (c == 0)
        c = strcmp(x->operation, y->operation);
    if (c == 0)
        c = strcmp(x->method, y->method);
    if (c == 0)
        c = strcmp(x->address, y->address);
    if (c == 0)
        c = strcmp(x->error, y->error);
    if (c != 0)
        return c;
    if (x->port != y->port)
        return x->port < y->port ? -1 : 1;
    if (x->status != y->status)
        return x->status < y->status ? -1 : 1;
    if (x->attempt != y->attempt)
        return x->attempt < y->attempt ? -1 : 1;
    if (x->severity != y->severity)
        return (int)x->severity - (int)y->severity;
    return (int)x->handled - (int)y->handled;
}

/* A copy of every series (with its buckets) to write without the lock. */
typedef struct snapshot {
    series *series;
    uint64_t *buckets;
    uint32_t n;
    uint64_t dropped;
} snapshot;

static int take_snapshot(resil_metrics *m, snapshot *snap)
{
    pthread_mutex_lock(&m->mu);
    uint32_t n = m->used;
    snap->series = malloc((n ? n : 1) * sizeof *snap->series);
    snap->buckets = malloc(((size_t)(n ? n : 1)) * m->nbounds * sizeof *snap->buckets);
    if (snap->series == NULL || snap->buckets == NULL) {
        pthread_mutex_unlock(&m->mu);
        free(snap->series);
        free(snap->buckets);
        return RESIL_ENOMEM;
    }
    memcpy(snap->buckets, m->bucket_block, (size_t)n * m->nbounds * sizeof *snap->buckets);
    for (uint32_t i = 0; i < n; i++) {
        snap->series[i] = m->series[i];
        snap->series[i].buckets = &snap->buckets[(size_t)i * m->nbounds];
    }
    snap->n = n;
    snap->dropped = m->dropped;
    pthread_mutex_unlock(&m->mu);
    qsort(snap->series, n, sizeof *snap->series, by_labels);
    return 0;
}

static void emit_recorded(writer *w, const resil_metrics *m, const snapshot *snap)
{
    const family *families =
        m->names == RESIL_METRICS_NAMES_RESIL ? resil_families : otel_families;
    for (int metric = 0; metric < M_COUNT; metric++) {
        const family *f = &families[metric];
        bool announced = false;
        for (uint32_t i = 0; i < snap->n && f->name != NULL; i++) {
            const series *s = &snap->series[i];
            if (s->k.metric != metric)
                continue;
            if (!announced)
                emit_family(w, f->name, f->type, f->help);
            announced = true;
            labels l;
            series_labels(m, s, &l);
            if (f->unit_ns == 0)
                emit_counter(w, f, &l, s);
            else
                emit_histogram(w, m, f, &l, s);
        }
    }
}

/* ---- gauges ---------------------------------------------------------------------------- */

/* A gauge family under one naming. Gauges are read from the watched
 * objects family by family, so each family's samples come together. */
typedef struct gauge_family {
    const char *name;  /* Prometheus */
    const char *otel;  /* OpenTelemetry */
    const char *help;
} gauge_family;

enum { G_BREAKER, G_HTTP_BREAKER, G_LIMIT, G_IN_FLIGHT, G_QUEUED, G_COUNT };

static const gauge_family resil_gauge_families[G_COUNT] = {
    {"resil_breaker_state", "resil_breaker_state",
     "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 isolated, 4 disabled."},
    {NULL, NULL, NULL},
    {"resil_adaptive_limit", "resil_adaptive_limit",
     "The concurrency limit an adaptive limiter has learned."},
    {"resil_bulkhead_in_flight", "resil_bulkhead_in_flight", "Calls running inside the bulkhead."},
    {"resil_bulkhead_queued", "resil_bulkhead_queued", "Calls waiting in the bulkhead's queue."}};

static const gauge_family otel_gauge_families[G_COUNT] = {
    {"resilience_circuit_breaker_state", "resilience.circuit_breaker.state",
     "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 isolated, 4 disabled."},
    {"http_client_request_resilience_circuit_breaker_state",
     "http.client.request.resilience.circuit_breaker.state",
     "Circuit breaker state of an HTTP authority: 0 closed, 1 open, 2 half-open, 3 isolated, "
     "4 disabled."},
    {"resilience_adaptive_limiter_limit", "resilience.adaptive_limiter.limit",
     "The concurrency limit an adaptive limiter has learned."},
    {"resilience_bulkhead_in_flight", "resilience.bulkhead.in_flight",
     "Calls running inside the bulkhead."},
    {"resilience_bulkhead_queued", "resilience.bulkhead.queued",
     "Calls waiting in the bulkhead's queue."}};

typedef void (*gauge_out)(void *ud, const gauge_family *f, const labels *l, long long v);

typedef struct gauge_walk {
    const resil_metrics *m;
    const gauge_family *families;
    gauge_out out;
    void *ud;
} gauge_walk;

static void pipeline_label(const resil_metrics *m, labels *l, const char *pipeline)
{
    memset(l, 0, sizeof *l);
    if (m->names == RESIL_METRICS_NAMES_RESIL)
        label(l, "pipeline", pipeline);
    else
        label_opt(l, "pipeline.name", pipeline);
}

static void breaker_gauge(const gauge_walk *g, int fam, const char *pipeline,
                          const char *name, long long state)
{
    labels l;
    if (fam == G_BREAKER) {
        pipeline_label(g->m, &l, pipeline);
        label(&l, g->m->names == RESIL_METRICS_NAMES_RESIL ? "breaker" : "breaker.name", name);
        g->out(g->ud, &g->families[fam], &l, state);
        return;
    }
    char host[L_PIPELINE];
    int port;
    if (resil_authority_split(name, host, sizeof host, &port) != 0)
        return;
    memset(&l, 0, sizeof l);
    label(&l, "server.address", host);
    label_int(&l, "server.port", port);
    g->out(g->ud, &g->families[fam], &l, state);
}

static void registry_gauges(const gauge_walk *g, int fam, const watch *x)
{
    size_t len = 0;
    resil_registry_entry *entries = NULL;
    for (size_t cap = 0;;) {
        if (resil_registry_snapshot(x->object, entries, cap, &len) != 0 || len <= cap)
            break;
        free(entries);
        cap = len + 8;
        entries = malloc(cap * sizeof *entries);
        if (entries == NULL)
            return;
    }
    for (size_t i = 0; i < len && entries != NULL; i++)
        breaker_gauge(g, fam, x->pipeline, entries[i].name, (long long)entries[i].state);
    free(entries);
}

/* A gauge of one object labelled by its pipeline. */
static void object_gauge(const gauge_walk *g, int fam, const watch *x, long long v)
{
    labels l;
    pipeline_label(g->m, &l, x->pipeline);
    g->out(g->ud, &g->families[fam], &l, v);
}

static void family_gauges(const gauge_walk *g, int fam)
{
    bool breakers = fam == G_BREAKER || fam == G_HTTP_BREAKER;
    for (const watch *x = g->m->watches; x != NULL; x = x->next) {
        if (breakers && x->kind == W_BREAKER)
            breaker_gauge(g, fam, x->pipeline,
                          fam == G_HTTP_BREAKER && x->authority[0] != '\0'
                              ? x->authority
                              : resil_breaker_name(x->object),
                          (long long)resil_breaker_state_of(x->object));
        else if (breakers && x->kind == W_REGISTRY)
            registry_gauges(g, fam, x);
        else if (fam == G_LIMIT && x->kind == W_LIMITER)
            object_gauge(g, fam, x, resil_limiter_limit(x->object));
        else if (fam == G_IN_FLIGHT && x->kind == W_BULKHEAD)
            object_gauge(g, fam, x, resil_bulkhead_in_flight(x->object));
        else if (fam == G_QUEUED && x->kind == W_BULKHEAD)
            object_gauge(g, fam, x, resil_bulkhead_queued(x->object));
    }
}

/* Caller holds m->mu: watches cannot go away while they are read. */
static void each_gauge(const resil_metrics *m, gauge_out out, void *ud)
{
    gauge_walk g = {m,
                    m->names == RESIL_METRICS_NAMES_RESIL ? resil_gauge_families
                                                          : otel_gauge_families,
                    out, ud};
    for (int f = 0; f < G_COUNT; f++)
        if (g.families[f].name != NULL)
            family_gauges(&g, f);
}

/* The text writer's gauge output: HELP and TYPE before a family's first. */
typedef struct gauge_text {
    writer *w;
    const gauge_family *last;
} gauge_text;

static void gauge_line(void *ud, const gauge_family *f, const labels *l, long long v)
{
    gauge_text *t = ud;
    if (t->last != f)
        emit_family(t->w, f->name, "gauge", f->help);
    t->last = f;
    char text[32];
    emits(t->w, f->name);
    emit_labels(t->w, l, NULL);
    snprintf(text, sizeof text, " %lld\n", v);
    emits(t->w, text);
}

/* The writer here only appends to memory. */
static void emit_gauges(writer *w, const resil_metrics *m)
{
    gauge_text t = {w, NULL};
    each_gauge(m, gauge_line, &t);
}

/* ---- the visitor ------------------------------------------------------------------------ */

typedef struct visit {
    resil_metric_fn fn;
    void *ud;
    int rc;
} visit;

static void point_attrs(const labels *l, resil_metric_attr *out)
{
    for (int i = 0; i < l->n; i++)
        out[i] = (resil_metric_attr){l->name[i], l->value[i], l->is_int[i], l->ints[i]};
}

static void visit_series(visit *v, const resil_metrics *m, const family *f, const series *s)
{
    labels l;
    series_labels(m, s, &l);
    resil_metric_attr attrs[MAX_LABELS];
    point_attrs(&l, attrs);
    double bounds[RESIL_METRICS_MAX_BUCKETS];
    uint64_t counts[RESIL_METRICS_MAX_BUCKETS + 1];
    resil_metric_point p = {.name = f->otel, .unit = f->unit, .description = f->help,
                            .attrs = attrs, .nattrs = (size_t)l.n};
    if (f->unit_ns == 0) {
        p.kind = RESIL_METRIC_COUNTER;
        p.value = (int64_t)s->count;
    } else {
        uint64_t below = 0;
        for (size_t b = 0; b < m->nbounds; b++) {
            bounds[b] = (double)m->bounds[b] / (double)f->unit_ns;
            counts[b] = s->buckets[b];
            below += s->buckets[b];
        }
        counts[m->nbounds] = s->count - below;
        p.kind = RESIL_METRIC_HISTOGRAM;
        p.count = s->count;
        p.sum = (double)s->sum_ns / (double)f->unit_ns;
        p.bounds = bounds;
        p.bucket_counts = counts;
        p.nbounds = m->nbounds;
    }
    v->rc = v->fn(&p, v->ud);
}

/* Gauges are read under the lock into a list of points, handed over after. */
typedef struct gauge_point {
    const gauge_family *f;
    labels l;
    char values[MAX_LABELS][L_PIPELINE]; /* the labels' values, copied */
    long long v;
} gauge_point;

typedef struct gauge_points {
    gauge_point *p;
    size_t n, cap;
    bool failed;
} gauge_points;

static void gauge_keep(void *ud, const gauge_family *f, const labels *l, long long v)
{
    gauge_points *g = ud;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        gauge_point *p = realloc(g->p, cap * sizeof *p);
        if (p == NULL) {
            g->failed = true;
            return;
        }
        g->p = p;
        g->cap = cap;
    }
    gauge_point *p = &g->p[g->n++];
    p->f = f;
    p->l = *l;
    p->v = v;
    for (int i = 0; i < l->n; i++) {
        copy_label(p->values[i], sizeof p->values[i], l->value[i]);
        p->l.value[i] = p->values[i];
    }
}

static void visit_gauge(visit *v, const gauge_point *g)
{
    resil_metric_attr attrs[MAX_LABELS];
    point_attrs(&g->l, attrs);
    resil_metric_point p = {.name = g->f->otel, .unit = "", .description = g->f->help,
                            .kind = RESIL_METRIC_GAUGE, .attrs = attrs,
                            .nattrs = (size_t)g->l.n, .value = g->v};
    v->rc = v->fn(&p, v->ud);
}

int resil_metrics_visit(resil_metrics *m, resil_metric_fn fn, void *ud)
{
    if (m == NULL || fn == NULL)
        return RESIL_EINVAL;
    snapshot snap;
    if (take_snapshot(m, &snap) != 0)
        return RESIL_ENOMEM;
    gauge_points g = {NULL, 0, 0, false};
    pthread_mutex_lock(&m->mu);
    each_gauge(m, gauge_keep, &g);
    pthread_mutex_unlock(&m->mu);
    visit v = {fn, ud, g.failed ? RESIL_ENOMEM : 0};
    const family *families =
        m->names == RESIL_METRICS_NAMES_RESIL ? resil_families : otel_families;
    for (uint32_t i = 0; i < snap.n && v.rc == 0; i++)
        visit_series(&v, m, &families[snap.series[i].k.metric], &snap.series[i]);
    for (size_t i = 0; i < g.n && v.rc == 0; i++)
        visit_gauge(&v, &g.p[i]);
    free(g.p);
    free(snap.series);
    free(snap.buckets);
    return v.rc;
}

typedef struct growing {
    char *buf;
    size_t len, cap;
} growing;

static int append(const char *text, size_t len, void *ud)
{
    growing *g = ud;
    if (g->len + len + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + len + 1)
            cap *= 2;
        char *buf = realloc(g->buf, cap);
        if (buf == NULL)
            return RESIL_ENOMEM;
        g->buf = buf;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, text, len);
    g->len += len;
    g->buf[g->len] = '\0';
    return 0;
}

int resil_metrics_write_prometheus(resil_metrics *m, resil_write_fn write, void *ud)
{
    if (m == NULL || write == NULL)
        return RESIL_EINVAL;
    snapshot snap;
    int rc = take_snapshot(m, &snap);
    if (rc != 0)
        return rc;
    /* Gauges are read under the lock (a watch must not go away meanwhile)
     * into a buffer, so that the caller's writer never runs under it. */
    growing gauges = {NULL, 0, 0};
    writer g = {append, &gauges, 0};
    pthread_mutex_lock(&m->mu);
    emit_gauges(&g, m);
    pthread_mutex_unlock(&m->mu);
    writer w = {write, ud, g.rc};
    emit_recorded(&w, m, &snap);
    if (gauges.buf != NULL)
        emit(&w, gauges.buf, gauges.len);
    emit_family(&w, "resil_metrics_dropped_series_total", "counter",
                "Series not recorded because the metrics table was full.");
    emits(&w, "resil_metrics_dropped_series_total");
    emit_u64(&w, snap.dropped);
    free(gauges.buf);
    free(snap.series);
    free(snap.buckets);
    return w.rc;
}

int resil_metrics_prometheus_string(resil_metrics *m, char **out, size_t *len)
{
    if (out == NULL)
        return RESIL_EINVAL;
    growing g = {NULL, 0, 0};
    int rc = resil_metrics_write_prometheus(m, append, &g);
    if (rc == 0 && g.buf == NULL)
        rc = append("", 0, &g);
    if (rc != 0) {
        free(g.buf);
        return rc;
    }
    *out = g.buf;
    if (len != NULL)
        *len = g.len;
    return 0;
}
