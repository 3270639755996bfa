/*
 * exporter.c — the exporter's queue, its thread and its requests.
 *
 * The queue is a ring of fixed-size span records allocated when the
 * exporter is made, so queueing a span is a copy under a mutex and never
 * allocates; a full ring refuses the span and counts the drop, because a
 * call must never wait on a collector. One thread owns the network: it
 * sleeps on a condition variable until a batch is full, the schedule
 * delay or the metrics interval passes, a flush is asked for, or the
 * exporter is freed; it takes the oldest spans as a batch and
 * encodes it in place (those slots are not written again until it gives
 * them back) and sends it outside the lock, so recording threads are held
 * up only for their own copy. Flushes are numbered rounds, so a flusher waits for
 * the round it asked for and not for one that began before it.
 *
 * An export is retried as OTLP/HTTP says, by the library's own retry
 * executor under a fixed policy (export_policy): after no answer (refused,
 * dropped, reset) and after 429, 502, 503 and 504, waiting the answer's
 * Retry-After or else an exponential backoff with jitter; never after any other status
 * or a partial success (whose rejected spans are counted failed). It is
 * bounded twice: five attempts, and the timeout, which covers the export
 * with its waits (a wait that would reach it ends the export at once); a
 * flush round or the end shares one deadline, the timeout from when it was
 * asked, so a close with the collector away returns within it. The waits
 * and deadlines are on the options' clock, so tests move them on a fake one.
 * A batch leaves the queue whether it was taken or not: what the collector
 * did not take is counted, never kept to grow behind a collector that is
 * away.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "otlp_internal.h"
#include "resil/retry.h"
#include "resil/retry_after.h"

/* ---- options ---------------------------------------------------------------- */

/* A base of at most OTLP_URL_LONGEST bytes and its path always fit. */
static void join_url(char *dst, const char *base, const char *path)
{
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--;
    snprintf(dst, OTLP_URL_MAX, "%.*s%s", (int)n, base, path);
}

static int pick_url(char *dst, const char *full, const char *base, const char *path,
                    const char *field, resil_err *err)
{
    const char *url = full != NULL ? full : base;
    if (url == NULL)
        return resil_err_set(err, RESIL_EINVAL, "otlp.endpoint (or otlp.%s) must be set", field);
    char name[40];
    snprintf(name, sizeof name, "otlp.%s", full != NULL ? field : "endpoint");
    int rc = resil__otlp_url_check(name, url, err);
    if (rc != 0)
        return rc;
    if (full != NULL)
        snprintf(dst, OTLP_URL_MAX, "%s", full);
    else
        join_url(dst, base, path);
    return 0;
}

/* "FIELD must be RULE, got D" with D in the duration parser's units, as
 * the core words it (the core's helper is internal to libresil). */
static int bad_duration(resil_err *err, const char *field, const char *rule, resil_duration d)
{
    char text[32];
    resil_duration_format(d, text, sizeof text);
    return resil_err_set(err, RESIL_EINVAL, "%s must be %s, got %s", field, rule, text);
}

static int check_numbers(const resil_otlp_opts *o, resil_err *err)
{
    if (o->interval <= 0)
        return bad_duration(err, "otlp.interval", "> 0", o->interval);
    if (o->schedule_delay < 0)
        return bad_duration(err, "otlp.schedule_delay", ">= 0", o->schedule_delay);
    /* libcurl counts it in whole milliseconds, and 0 means no timeout */
    if (o->timeout < RESIL_MS(1))
        return bad_duration(err, "otlp.timeout", ">= 1ms", o->timeout);
    if (o->max_queue < 1 || o->max_queue > (1u << 20))
        return resil_err_set(err, RESIL_EINVAL, "otlp.max_queue must be in [1, 1048576], got %u",
                             (unsigned)o->max_queue);
    if (o->max_batch < 1 || o->max_batch > o->max_queue)
        return resil_err_set(err, RESIL_EINVAL,
                             "otlp.max_batch must be in [1, max_queue = %u], got %u",
                             (unsigned)o->max_queue, (unsigned)o->max_batch);
    return 0;
}

/* service.name first: the option (or "unknown_service"), then the rest of
 * the resource attributes without theirs. */
static int make_resource(resil_otlp *x, const resil_otlp_opts *o, resil_err *err)
{
    otlp_kvs *given = malloc(sizeof *given);
    if (given == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "otlp: out of memory");
    given->n = 0;
    int rc = o->resource_attributes == NULL
                 ? 0
                 : resil__otlp_kv_parse(o->resource_attributes, strlen(o->resource_attributes),
                                        given, "otlp.resource_attributes", err);
    const char *service = o->service_name;
    for (int i = 0; rc == 0 && i < given->n && service == NULL; i++)
        if (strcmp(given->kv[i].key, "service.name") == 0)
            service = given->kv[i].value;
    if (rc == 0 && service != NULL && strlen(service) >= OTLP_TEXT_MAX)
        rc = resil_err_set(err, RESIL_EINVAL, "otlp.service_name must be at most %d bytes, got %zu",
                           OTLP_TEXT_MAX - 1, strlen(service));
    if (rc == 0) {
        snprintf(x->resource.kv[0].key, OTLP_TEXT_MAX, "service.name");
        snprintf(x->resource.kv[0].value, OTLP_TEXT_MAX, "%s",
                 service != NULL ? service : "unknown_service");
        x->resource.n = 1;
        for (int i = 0; i < given->n && x->resource.n < OTLP_KV_MAX; i++)
            if (strcmp(given->kv[i].key, "service.name") != 0)
                x->resource.kv[x->resource.n++] = given->kv[i];
    }
    free(given);
    return rc;
}

#define OTLP_ATTEMPTS 5 /* of one export, at most */

static bool export_retries(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return o->kind == RESIL_TRANSIENT || o->kind == RESIL_THROTTLED;
}

/* OTLP/HTTP's retry policy: five attempts; the answer's Retry-After
 * however long (the export's deadline bounds it), else 1 s doubling, its
 * upper half drawn at random. */
static void export_policy(resil_retry_policy *p)
{
    resil_retry_policy_default(p);
    p->max_attempts = OTLP_ATTEMPTS;
    p->backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    p->backoff.base = RESIL_S(1);
    p->backoff.factor = 2;
    p->backoff.jitter = RESIL_JITTER_EQUAL;
    p->retry_on = export_retries;
    p->retry_after_max = RESIL_DURATION_MAX;
}

static int take_options(resil_otlp *x, const resil_otlp_opts *o, resil_err *err)
{
    int rc = pick_url(x->traces_url, o->traces_endpoint, o->endpoint, "/v1/traces",
                      "traces_endpoint", err);
    if (rc == 0)
        rc = pick_url(x->metrics_url, o->metrics_endpoint, o->endpoint, "/v1/metrics",
                      "metrics_endpoint", err);
    if (rc == 0)
        rc = check_numbers(o, err);
    if (rc == 0 && o->headers != NULL)
        rc = resil__otlp_kv_parse(o->headers, strlen(o->headers), &x->headers, "otlp.headers",
                                  err);
    if (rc == 0)
        rc = make_resource(x, o, err);
    if (rc != 0)
        return rc;
    x->metrics = o->metrics;
    x->interval = o->interval;
    x->schedule_delay = o->schedule_delay;
    x->timeout = o->timeout;
    x->max_queue = o->max_queue;
    x->max_batch = o->max_batch;
    x->clock = o->clock != NULL ? o->clock : resil_clock_system();
    export_policy(&x->policy);
    return 0;
}

/* ---- the queue ----------------------------------------------------------------------- */

static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? strnlen(src, cap - 1) : 0;
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

void resil__otlp_span_copy(otlp_span *d, const resil_span *s)
{
    d->s = *s;
    copy_text(d->name, sizeof d->name, s->name);
    copy_text(d->pipeline, sizeof d->pipeline, s->pipeline);
    copy_text(d->operation, sizeof d->operation, s->operation);
    copy_text(d->tracestate, sizeof d->tracestate, s->tracestate);
    d->s.name = d->name;
    d->s.pipeline = d->pipeline;
    d->s.operation = d->operation;
    d->s.tracestate = d->tracestate;
    if (s->outcome != NULL) {
        d->outcome = *s->outcome;
        d->s.outcome = &d->outcome;
    }
    if (s->http != NULL) {
        copy_text(d->method, sizeof d->method, s->http->method);
        copy_text(d->address, sizeof d->address, s->http->server_address);
        d->http = *s->http;
        d->http.method = d->method;
        d->http.server_address = d->address;
        d->s.http = &d->http;
    }
}

void resil_otlp_on_span(const resil_span *s, void *ud)
{
    resil_otlp *x = ud;
    if (x == NULL || s == NULL)
        return;
    pthread_mutex_lock(&x->mu);
    if (x->count == x->max_queue || x->stopping) {
        x->stats.spans_dropped++;
        pthread_mutex_unlock(&x->mu);
        return;
    }
    resil__otlp_span_copy(&x->queue[(x->head + x->count) % x->max_queue], s);
    x->count++;
    x->stats.spans_queued++;
    /* the thread is woken for a full batch, and for the first span after
     * an empty queue: it may be asleep until the metrics' next interval,
     * and the span's schedule delay starts now */
    if (x->count == x->max_batch || x->count == 1)
        pthread_cond_signal(&x->wake);
    pthread_mutex_unlock(&x->mu);
}

/* The oldest spans, up to max_batch, stay in the ring while they are
 * encoded: producers write only past head + count, so the slots are the
 * thread's until release_batch gives them back. Caller holds mu. */
static uint32_t peek_batch(const resil_otlp *x)
{
    return x->count < x->max_batch ? x->count : x->max_batch;
}

static void release_batch(resil_otlp *x, uint32_t n)
{
    pthread_mutex_lock(&x->mu);
    x->head = (x->head + n) % x->max_queue;
    x->count -= n;
    pthread_mutex_unlock(&x->mu);
}

/* ---- requests ---------------------------------------------------------------------------- */

static size_t keep_answer(char *p, size_t size, size_t n, void *ud)
{
    otlp_answer *a = ud;
    size_t len = size * n, room = sizeof a->text - 1 - a->len;
    size_t take = len < room ? len : room;
    memcpy(a->text + a->len, p, take);
    a->len += take;
    a->text[a->len] = '\0';
    return len;
}

/* OTLP/HTTP's retryable answers; every other 4xx and 5xx must not be. */
static bool retryable_status(long status)
{
    return status == 429 || status == 502 || status == 503 || status == 504;
}

static resil_duration retry_after(CURL *curl, resil_clock *clock)
{
    struct curl_header *h;
    resil_duration d;
    if (curl_easy_header(curl, "Retry-After", 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
        return -1;
    if (resil_retry_after_parse(h->value, strlen(h->value), resil_clock_wall_now(clock), &d) != 0)
        return -1; /* unreadable: the backoff's wait */
    return d;
}

static void count_request(resil_otlp *x, bool taken)
{
    pthread_mutex_lock(&x->mu);
    x->stats.requests++;
    if (!taken)
        x->stats.failed_requests++;
    pthread_mutex_unlock(&x->mu);
}

/* One export's POST, as the retry executor's operation. */
typedef struct otlp_post {
    resil_otlp *x;
    CURL *curl;
} otlp_post;

/* One POST, given what is left of the export's time (libcurl's whole
 * milliseconds, rounded up). No answer is transient, and so is a
 * retryable status, with its Retry-After; a transfer that timed out had
 * all that was left (a timeout, which the export's policy does not
 * retry); any other status is permanent. */
static resil_outcome attempt_once(resil_attempt_ctx *ctx)
{
    otlp_post *op = ctx->user;
    resil_duration left = ctx->deadline - resil_clock_now(op->x->clock);
    op->x->answer.len = 0;
    op->x->answer.text[0] = '\0';
    curl_easy_setopt(op->curl, CURLOPT_TIMEOUT_MS,
                     (long)((left + RESIL_MS(1) - 1) / RESIL_MS(1)));
    CURLcode c = curl_easy_perform(op->curl);
    long status = 0;
    curl_easy_getinfo(op->curl, CURLINFO_RESPONSE_CODE, &status);
    bool taken = c == CURLE_OK && status >= 200 && status < 300;
    count_request(op->x, taken);
    if (c == CURLE_OPERATION_TIMEDOUT)
        return resil_fail(RESIL_TIMEOUT, c, "no answer within the export's timeout");
    if (c != CURLE_OK)
        return resil_fail(RESIL_TRANSIENT, c, "no answer");
    if (taken)
        return resil_ok();
    if (!retryable_status(status))
        return resil_fail(RESIL_PERMANENT, status, "refused");
    return resil_fail_after(status == 429 ? RESIL_THROTTLED : RESIL_TRANSIENT, status,
                            "unavailable", retry_after(op->curl, op->x->clock));
}

static struct curl_slist *header_list(const resil_otlp *x)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char line[2 * OTLP_TEXT_MAX + 4];
    for (int i = 0; i < x->headers.n && h != NULL; i++) {
        snprintf(line, sizeof line, "%s: %s", x->headers.kv[i].key, x->headers.kv[i].value);
        struct curl_slist *more = curl_slist_append(h, line);
        if (more == NULL)
            curl_slist_free_all(h);
        h = more;
    }
    return h;
}

/* One export: the body posted under the export policy (x->policy) until
 * it is taken, refused for good, tried OTLP_ATTEMPTS times, or the next
 * wait would reach `deadline` (on the exporter's clock); an export whose
 * deadline has passed is not sent. Every attempt sends the same bytes. 0,
 * or RESIL_EIO (RESIL_ENOMEM). */
static int post(resil_otlp *x, CURL *curl, const char *url, const char *body, size_t len,
                resil_instant deadline)
{
    struct curl_slist *h = header_list(x);
    if (h == NULL)
        return RESIL_ENOMEM;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x->answer);
    otlp_post op = {x, curl};
    resil_exec_opts eo = {.clock = x->clock, .deadline = deadline};
    resil_retry_result res;
    int rc = resil_retry_execute(&x->policy, &eo, attempt_once, &op, &res, NULL);
    curl_slist_free_all(h);
    return rc == 0 && res.stop == RESIL_STOP_SUCCEEDED ? 0 : RESIL_EIO;
}

/* The spans a partial success rejected: its "rejectedSpans", a number or
 * a decimal string; 0 when the answer has none. Inside a JSON string the
 * key's quotes would be escaped, so only the key itself matches. */
static uint64_t rejected_spans(const char *answer)
{
    static const char key[] = "\"rejectedSpans\"";
    const char *c = strstr(answer, key);
    if (c == NULL)
        return 0;
    c += sizeof key - 1;
    c += strspn(c, " \t\r\n");
    if (*c++ != ':')
        return 0;
    c += strspn(c, " \t\r\n");
    if (*c == '"')
        c++;
    uint64_t n = 0;
    for (; *c >= '0' && *c <= '9' && n < UINT64_MAX / 10; c++)
        n = n * 10 + (uint64_t)(*c - '0');
    return n;
}

static void count_spans(resil_otlp *x, uint64_t exported, uint64_t failed)
{
    pthread_mutex_lock(&x->mu);
    x->stats.spans_exported += exported;
    x->stats.spans_failed += failed;
    pthread_mutex_unlock(&x->mu);
}

/* One export of the n oldest spans, encoded from the ring in place; the
 * batch leaves the queue taken or not. */
static int send_spans(resil_otlp *x, CURL *curl, uint32_t n, resil_instant deadline)
{
    for (uint32_t i = 0; i < n; i++)
        x->batch[i] = x->queue[(x->head + i) % x->max_queue].s;
    const resil_span *all = x->batch;
    char *body = NULL;
    size_t len = 0;
    int rc = resil_otlp_encode_spans(x, all, n, &body, &len);
    if (rc == 0)
        rc = post(x, curl, x->traces_url, body, len, deadline);
    free(body);
    release_batch(x, n);
    uint64_t rejected = rc == 0 ? rejected_spans(x->answer.text) : n;
    if (rejected > n)
        rejected = n;
    count_spans(x, n - rejected, rejected);
    return rc;
}

static int64_t wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int send_metrics(resil_otlp *x, CURL *curl, resil_instant deadline)
{
    if (x->metrics == NULL)
        return 0;
    char *body = NULL;
    size_t len = 0;
    int rc = resil_otlp_encode_metrics(x, x->metrics, wall_now(), &body, &len);
    if (rc == 0)
        rc = post(x, curl, x->metrics_url, body, len, deadline);
    free(body);
    return rc;
}

/* ---- the thread ----------------------------------------------------------------------------- */

static int64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void wait_until(resil_otlp *x, int64_t when)
{
    struct timespec ts = {(time_t)(when / 1000000000), (long)(when % 1000000000)};
    pthread_cond_timedwait(&x->wake, &x->mu, &ts);
}

/* What was queued when the round began, in batches, then the metrics, all
 * by the round's deadline: a flush round or the end. */
static int drain(resil_otlp *x, CURL *curl, resil_instant deadline)
{
    int rc = 0;
    pthread_mutex_lock(&x->mu);
    uint32_t left = x->count;
    pthread_mutex_unlock(&x->mu);
    while (left > 0) {
        pthread_mutex_lock(&x->mu);
        uint32_t n = peek_batch(x);
        pthread_mutex_unlock(&x->mu);
        if (n > left)
            n = left;
        if (send_spans(x, curl, n, deadline) != 0)
            rc = RESIL_EIO;
        left -= n;
    }
    if (send_metrics(x, curl, deadline) != 0)
        rc = RESIL_EIO;
    return rc;
}

/* The deadline of an export starting now. */
static resil_instant export_deadline(const resil_otlp *x)
{
    return resil_dur_add(resil_clock_now(x->clock), x->timeout);
}

static void *run(void *arg)
{
    resil_otlp *x = arg;
    CURL *curl = curl_easy_init();
    if (curl != NULL) {
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_answer);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    }
    int64_t next_metrics = mono_now() + x->interval;
    int64_t oldest = 0; /* when the queue last went from empty to not */
    pthread_mutex_lock(&x->mu);
    for (;;) {
        int64_t now = mono_now();
        if (x->count == 0)
            oldest = 0;
        else if (oldest == 0)
            oldest = now;
        bool flush = x->flush_asked != x->flush_done || x->stopping;
        bool batch = x->count >= x->max_batch ||
                     (x->count > 0 && now - oldest >= x->schedule_delay);
        bool metrics = now >= next_metrics;
        if (!flush && !batch && !metrics) {
            int64_t when = next_metrics;
            if (x->count > 0 && oldest + x->schedule_delay < when)
                when = oldest + x->schedule_delay;
            wait_until(x, when);
            continue;
        }
        uint64_t round = x->flush_asked;
        bool stopping = x->stopping;
        resil_instant drain_by = x->drain_by;
        pthread_mutex_unlock(&x->mu);
        int rc = 0;
        if (curl == NULL) {
            rc = RESIL_ENOMEM;
        } else if (flush) {
            rc = drain(x, curl, drain_by);
            next_metrics = mono_now() + x->interval;
        } else if (batch) {
            pthread_mutex_lock(&x->mu);
            uint32_t n = peek_batch(x);
            pthread_mutex_unlock(&x->mu);
            send_spans(x, curl, n, export_deadline(x));
        } else {
            send_metrics(x, curl, export_deadline(x));
            next_metrics = mono_now() + x->interval;
        }
        pthread_mutex_lock(&x->mu);
        oldest = 0;
        if (flush) {
            x->flush_done = round;
            x->flush_rc = rc;
            pthread_cond_broadcast(&x->flushed);
        }
        if (stopping)
            break;
    }
    pthread_mutex_unlock(&x->mu);
    curl_easy_cleanup(curl);
    return NULL;
}

/* ---- the handle ------------------------------------------------------------------------------ */

static void destroy(resil_otlp *x)
{
    free(x->queue);
    free(x->batch);
    free(x);
}

static int start(resil_otlp *x, resil_err *err)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&x->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return resil_err_set(err, RESIL_ESYS, "otlp: cannot make a condition variable");
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->flushed, NULL);
    if (pthread_create(&x->thread, NULL, run, x) != 0) {
        pthread_cond_destroy(&x->wake);
        pthread_cond_destroy(&x->flushed);
        pthread_mutex_destroy(&x->mu);
        return resil_err_set(err, RESIL_ESYS, "otlp: cannot start the exporter's thread");
    }
    return 0;
}

int resil_otlp_new(const resil_otlp_opts *o, resil_otlp **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "otlp: options and out must not be NULL");
    resil_otlp *x = calloc(1, sizeof *x);
    if (x == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "otlp: out of memory");
    int rc = take_options(x, o, err);
    if (rc != 0) {
        destroy(x);
        return rc;
    }
    x->queue = calloc(x->max_queue, sizeof *x->queue);
    x->batch = calloc(x->max_batch, sizeof *x->batch);
    if (x->queue == NULL || x->batch == NULL) {
        destroy(x);
        return resil_err_set(err, RESIL_ENOMEM, "otlp: out of memory for a queue of %u spans",
                             (unsigned)o->max_queue);
    }
    x->started_unix_ns = wall_now();
    rc = start(x, err);
    if (rc != 0) {
        destroy(x);
        return rc;
    }
    *out = x;
    return 0;
}

int resil_otlp_flush(resil_otlp *x)
{
    if (x == NULL)
        return RESIL_EINVAL;
    pthread_mutex_lock(&x->mu);
    uint64_t round = ++x->flush_asked;
    x->drain_by = export_deadline(x);
    pthread_cond_signal(&x->wake);
    while (x->flush_done < round)
        pthread_cond_wait(&x->flushed, &x->mu);
    int rc = x->flush_rc;
    pthread_mutex_unlock(&x->mu);
    return rc;
}

void resil_otlp_get_stats(resil_otlp *x, resil_otlp_stats *out)
{
    if (x == NULL || out == NULL)
        return;
    pthread_mutex_lock(&x->mu);
    *out = x->stats;
    pthread_mutex_unlock(&x->mu);
}

/* The thread's last round drains as a flush does, and leaves its answer
 * where a flush's goes. */
int resil_otlp_close(resil_otlp *x)
{
    if (x == NULL)
        return 0;
    pthread_mutex_lock(&x->mu);
    x->stopping = true;
    x->drain_by = export_deadline(x);
    pthread_cond_signal(&x->wake);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->thread, NULL);
    int rc = x->flush_rc;
    pthread_cond_destroy(&x->wake);
    pthread_cond_destroy(&x->flushed);
    pthread_mutex_destroy(&x->mu);
    destroy(x);
    return rc;
}

void resil_otlp_free(resil_otlp *x) { (void)resil_otlp_close(x); }
