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

enum { M_EVENTS, M_ATTEMPT, M_PIPELINE, M_COUNT };

#define L_PIPELINE RESIL_METRICS_LABEL_MAX
#define L_SHORT 24 /* strategy, event, handled, outcome: our own short names */

typedef struct series {
    uint8_t metric;
    char pipeline[L_PIPELINE];
    char strategy[L_SHORT];
    char third[L_SHORT]; /* event name, handled, or outcome */
    uint64_t count;
    int64_t sum_ns;
    uint64_t *buckets; /* histograms: per-bucket counts, not cumulative */
} series;

typedef enum watch_kind { W_BREAKER, W_REGISTRY, W_BULKHEAD, W_LIMITER } watch_kind;

typedef struct watch {
    watch_kind kind;
    char pipeline[L_PIPELINE];
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

/* A series key, truncated exactly as stored. */
typedef struct key {
    uint8_t metric;
    char pipeline[L_PIPELINE];
    char strategy[L_SHORT];
    char third[L_SHORT];
} key;

static void make_key(key *k, int metric, const char *pipeline, const char *strategy,
                     const char *third)
{
    k->metric = (uint8_t)metric;
    copy_label(k->pipeline, sizeof k->pipeline, pipeline);
    copy_label(k->strategy, sizeof k->strategy, strategy);
    copy_label(k->third, sizeof k->third, third);
}

static uint32_t fnv(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (h ^ 0xff) * 16777619u;
}

static uint32_t hash_key(const key *k)
{
    uint32_t h = (2166136261u ^ k->metric) * 16777619u;
    return fnv(fnv(fnv(h, k->pipeline), k->strategy), k->third);
}

static bool same(const series *s, const key *k)
{
    return s->metric == k->metric && strcmp(s->pipeline, k->pipeline) == 0 &&
           strcmp(s->strategy, k->strategy) == 0 && strcmp(s->third, k->third) == 0;
}

/* The key's series, created if there is room; NULL when the table is full
 * (or, with create false, when absent). Caller holds mu. */
static series *find(resil_metrics *m, const key *k, bool create)
{
    for (uint32_t i = hash_key(k) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t at = m->index[i];
        if (at != 0 && same(&m->series[at - 1], k))
            return &m->series[at - 1];
        if (at != 0)
            continue;
        if (!create || m->used == m->max)
            return NULL;
        series *s = &m->series[m->used++];
        s->metric = k->metric;
        memcpy(s->pipeline, k->pipeline, sizeof s->pipeline);
        memcpy(s->strategy, k->strategy, sizeof s->strategy);
        memcpy(s->third, k->third, sizeof s->third);
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

static void key_for(key *k, const resil_event *ev)
{
    char third[L_SHORT];
    switch (ev->type) {
    case RESIL_EVENT_ATTEMPT:
        make_key(k, M_ATTEMPT, ev->pipeline, ev->strategy, ev->handled ? "true" : "false");
        return;
    case RESIL_EVENT_EXECUTION:
        resil__lower_copy(third, sizeof third,
                          ev->outcome != NULL ? resil_kind_name(ev->outcome->kind) : "unknown");
        make_key(k, M_PIPELINE, ev->pipeline, "", third);
        return;
    default:
        make_key(k, M_EVENTS, ev->pipeline, ev->strategy, resil_event_name(ev->type));
        return;
    }
}

void resil_metrics_on_event(const resil_event *ev, void *ud)
{
    resil_metrics *m = ud;
    if (m == NULL || ev == NULL)
        return;
    key k;
    key_for(&k, ev);
    pthread_mutex_lock(&m->mu);
    series *s = find(m, &k, true);
    if (s == NULL)
        m->dropped++;
    else if (k.metric == M_EVENTS)
        s->count++;
    else
        observe(m, s, ev->duration);
    pthread_mutex_unlock(&m->mu);
}

uint64_t resil_metrics_event_count(resil_metrics *m, const char *pipeline,
                                   const char *strategy, resil_event_type t)
{
    if (m == NULL)
        return 0;
    key k;
    make_key(&k, M_EVENTS, pipeline, strategy, resil_event_name(t));
    pthread_mutex_lock(&m->mu);
    const series *s = find(m, &k, false);
    uint64_t n = s != NULL ? s->count : 0;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---- watches ------------------------------------------------------------------ */

static int add_watch(resil_metrics *m, watch_kind kind, const char *pipeline, void *object,
                     const void *owner)
{
    if (m == NULL || object == NULL)
        return RESIL_EINVAL;
    watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return RESIL_ENOMEM;
    w->kind = kind;
    copy_label(w->pipeline, sizeof w->pipeline, pipeline);
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
    return add_watch(m, W_BREAKER, pipeline, b, owner);
}

int resil_metrics_watch_registry(resil_metrics *m, const char *pipeline, resil_registry *r,
                                 const void *owner)
{
    return add_watch(m, W_REGISTRY, pipeline, r, owner);
}

int resil_metrics_watch_bulkhead(resil_metrics *m, const char *pipeline, resil_bulkhead *b,
                                 const void *owner)
{
    return add_watch(m, W_BULKHEAD, pipeline, b, owner);
}

int resil_metrics_watch_limiter(resil_metrics *m, const char *pipeline, resil_limiter *l,
                                const void *owner)
{
    return add_watch(m, W_LIMITER, pipeline, l, owner);
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

static void emit_label(writer *w, bool first, const char *name, const char *value)
{
    emits(w, first ? "{" : ",");
    emits(w, name);
    emits(w, "=\"");
    emit_value(w, value);
    emits(w, "\"");
}

/* Exact decimal seconds: 2500000 ns is "0.0025", 60 s is "60". */
static void seconds_text(int64_t ns, char *buf, size_t cap)
{
    int64_t whole = ns / 1000000000, frac = ns % 1000000000;
    if (frac == 0) {
        snprintf(buf, cap, "%lld", (long long)whole);
        return;
    }
    int n = snprintf(buf, cap, "%lld.%09lld", (long long)whole, (long long)frac);
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

static const char *const family_names[M_COUNT] = {
    "resil_strategy_events_total", "resil_attempt_duration_seconds",
    "resil_pipeline_duration_seconds"};

static void emit_series_labels(writer *w, const series *s)
{
    emit_label(w, true, "pipeline", s->pipeline);
    if (s->metric == M_PIPELINE) {
        emit_label(w, false, "outcome", s->third);
        return;
    }
    emit_label(w, false, "strategy", s->strategy);
    emit_label(w, false, s->metric == M_EVENTS ? "event" : "handled", s->third);
}

static void emit_counter(writer *w, const series *s)
{
    emits(w, family_names[M_EVENTS]);
    emit_series_labels(w, s);
    emits(w, "}");
    emit_u64(w, s->count);
}

static void emit_histogram(writer *w, const resil_metrics *m, const series *s)
{
    const char *name = family_names[s->metric];
    uint64_t cumulative = 0;
    char le[40];
    for (size_t b = 0; b <= m->nbounds; b++) {
        cumulative += b < m->nbounds ? s->buckets[b] : 0;
        if (b < m->nbounds)
            seconds_text(m->bounds[b], le, sizeof le);
        emits(w, name);
        emits(w, "_bucket");
        emit_series_labels(w, s);
        emit_label(w, false, "le", b < m->nbounds ? le : "+Inf");
        emits(w, "}");
        emit_u64(w, b < m->nbounds ? cumulative : s->count);
    }
    char sum[40];
    seconds_text(s->sum_ns, sum, sizeof sum);
    emits(w, name);
    emits(w, "_sum");
    emit_series_labels(w, s);
    emits(w, "} ");
    emits(w, sum);
    emits(w, "\n");
    emits(w, name);
    emits(w, "_count");
    emit_series_labels(w, s);
    emits(w, "}");
    emit_u64(w, s->count);
}

static int by_labels(const void *a, const void *b)
{
    const series *x = a, *y = b;
    if (x->metric != y->metric)
        return (int)x->metric - (int)y->metric;
    int c = strcmp(x->pipeline, y->pipeline);
    if (c == 0)
        c = strcmp(x->strategy, y->strategy);
    return c != 0 ? c : strcmp(x->third, y->third);
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
    static const char *const helps[M_COUNT] = {
        "Resilience events reported by pipeline strategies, by event name.",
        "Duration of each execution attempt in seconds.",
        "Duration of each pipeline execution in seconds."};
    static const char *const types[M_COUNT] = {"counter", "histogram", "histogram"};
    for (int metric = 0; metric < M_COUNT; metric++) {
        bool announced = false;
        for (uint32_t i = 0; i < snap->n; i++) {
            const series *s = &snap->series[i];
            if (s->metric != metric)
                continue;
            if (!announced)
                emit_family(w, family_names[metric], types[metric], helps[metric]);
            announced = true;
            if (metric == M_EVENTS)
                emit_counter(w, s);
            else
                emit_histogram(w, m, s);
        }
    }
}

static void emit_gauge(writer *w, const char *name, const char *pipeline,
                       const char *label, const char *value_label, long long v)
{
    char text[32];
    emits(w, name);
    emit_label(w, true, "pipeline", pipeline);
    if (label != NULL)
        emit_label(w, false, label, value_label);
    snprintf(text, sizeof text, "} %lld\n", v);
    emits(w, text);
}

static bool any_watch(const resil_metrics *m, watch_kind k)
{
    for (const watch *x = m->watches; x != NULL; x = x->next)
        if (x->kind == k)
            return true;
    return false;
}

static void emit_registry_states(writer *w, const watch *x)
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
        emit_gauge(w, "resil_breaker_state", x->pipeline, "breaker", entries[i].name,
                   (long long)entries[i].state);
    free(entries);
}

/* Caller holds m->mu. */
static void emit_limiter_gauges(writer *w, const resil_metrics *m)
{
    if (!any_watch(m, W_LIMITER))
        return;
    emit_family(w, "resil_adaptive_limit", "gauge",
                "The concurrency limit an adaptive limiter has learned.");
    for (const watch *x = m->watches; x != NULL; x = x->next)
        if (x->kind == W_LIMITER)
            emit_gauge(w, "resil_adaptive_limit", x->pipeline, NULL, NULL,
                       resil_limiter_limit(x->object));
}

/* Caller holds m->mu: watches cannot go away while they are read. The
 * writer here only appends to memory. */
static void emit_gauges(writer *w, const resil_metrics *m)
{
    if (any_watch(m, W_BREAKER) || any_watch(m, W_REGISTRY))
        emit_family(w, "resil_breaker_state", "gauge",
                    "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 isolated, "
                    "4 disabled.");
    for (const watch *x = m->watches; x != NULL; x = x->next) {
        if (x->kind == W_BREAKER)
            emit_gauge(w, "resil_breaker_state", x->pipeline, "breaker",
                       resil_breaker_name(x->object), (long long)resil_breaker_state_of(x->object));
        else if (x->kind == W_REGISTRY)
            emit_registry_states(w, x);
    }
    emit_limiter_gauges(w, m);
    if (!any_watch(m, W_BULKHEAD))
        return;
    emit_family(w, "resil_bulkhead_in_flight", "gauge", "Calls running inside the bulkhead.");
    for (const watch *x = m->watches; x != NULL; x = x->next)
        if (x->kind == W_BULKHEAD)
            emit_gauge(w, "resil_bulkhead_in_flight", x->pipeline, NULL, NULL,
                       resil_bulkhead_in_flight(x->object));
    emit_family(w, "resil_bulkhead_queued", "gauge", "Calls waiting in the bulkhead's queue.");
    for (const watch *x = m->watches; x != NULL; x = x->next)
        if (x->kind == W_BULKHEAD)
            emit_gauge(w, "resil_bulkhead_queued", x->pipeline, NULL, NULL,
                       resil_bulkhead_queued(x->object));
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
