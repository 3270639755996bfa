/*
 * http_cmd.c — `resil http [OPTIONS] URL...`: what `curl --retry` should
 * have been.
 *
 * The command is the library's drop-in and nothing else: it configures an
 * easy handle the way curl's own options would, builds a client from a
 * profile and the shared policy options, and performs each URL through it.
 * So every retry, wait, key and stop it prints is the library's decision,
 * read from the pipeline's own events and written by the attempt log that
 * `resil run` uses. One client serves every URL of the command line, so a
 * host that keeps failing opens its own breaker and its remaining URLs fail
 * fast, while URLs on other hosts go on.
 *
 * Transfers: every URL is a call on the client's curl multi, on the tool's
 * own loop (http_loop.h), with or without -Z: one at a time and in order
 * without it, up to --parallel-max at once with it, started in order as
 * others end. So a retry's wait is a timer, a hedge is one more transfer
 * on the same thread, and a transfer that waits to retry holds up no
 * other. Each transfer's record goes to the one attempt log, told apart
 * by the URL (the client's listener hears every call; the request's
 * `user` says whose event it is). Outputs follow curl's rules for many
 * URLs: -o/-O per URL in order, -w after each transfer as it ends, and
 * curl's exit status: the last URL's one at a time, the last transfer to
 * fail with -Z (in the order they ended, as parallel_transfers() keeps it).
 *
 * A URL whose host's --fleet-rate permit is not there yet waits for it on
 * a loop timer too, set for when the limiter says the permit comes, and
 * asks again then: other transfers go on meanwhile, and with -Z the
 * waiting URL holds its slot as a transfer does.
 *
 * Signals: SIGINT, SIGTERM and SIGHUP are blocked in every thread and
 * taken by one thread in sigwait(), which fires the run's cancellation
 * token and posts to the loop a cancel of every call in flight, which
 * takes their transfers off curl multi and ends their waits at once (a
 * URL waiting for a rate permit starts its call then, which ends as
 * cancelled). That thread is the only one besides the loop's. SIGPIPE is
 * ignored, as curl ignores it: an output whose reader has gone is a write
 * that fails (exit 23, "Broken pipe"), and this process runs nothing that
 * could inherit the disposition.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "heartbeat.h"
#include "http_fleet.h"
#include "http_handle.h"
#include "http_loop.h"
#include "http_opts.h"
#include "http_output.h"
#include "telemetry_out.h"

enum {
    EXIT_COULDNT_RESOLVE = 6,
    EXIT_COULDNT_CONNECT = 7,
    EXIT_HTTP_ERROR = 22,
    EXIT_WRITE_ERROR = 23,
    EXIT_TIMEOUT = 28,
};

/* One URL's transfer: its handle, output and record, from its start to
 * its call's `done`. */
typedef struct transfer {
    struct http_run *run;
    int index;
    const char *url;
    CURL *e;
    http_handle_parts parts;
    http_sink sink;
    char name[1024];               /* the -o/-O file's name */
    const char *path;
    resil_http_request req;
    resil_http_xfer *x;            /* while its call is in flight */
    attempt_log log;               /* the run's, naming this URL */
    resil_attempt_record pending;  /* an attempt waiting for its retry's wait */
    bool has_pending;
    resil_bulkhead_ticket permit;  /* --fleet-concurrency's */
    resil_timer permit_due;        /* --fleet-rate: when its permit comes */
    resil_instant permit_by;       /* no rate permit after this: refused */
    bool waiting;                  /* for permit_due */
    resil_timer beat;              /* --heartbeat during a long wait */
    resil_instant wait_end;
    resil_instant beat_at;         /* when the heartbeat's next line is due */
} transfer;

typedef struct http_run {
    http_opts *o;
    http_loop loop;
    resil_http_client *client;
    resil_http_multi *multi;
    attempt_log log;
    telemetry_out *tel;            /* --metrics, --otlp: the options' */
    resil_span_context trace;      /* with --otlp and no --traceparent: the run's */
    resil_duration every;          /* the heartbeat's period; 0: none */
    fleet fleet;                   /* --fleet: shared breakers and limits */
    FILE *dump;                    /* -D's stream */
    transfer *xfers;               /* one per URL */
    int next;                      /* the next URL to start */
    uint32_t active;               /* calls in flight */
    int status;                    /* the run's exit status (note_status) */
    bool stopping;                 /* start no more: a signal or a usage error */
    resil_work cancel_all;         /* posted by the signal thread */
} http_run;

/* ---- signals ---------------------------------------------------------------- */

static sigset_t taken_signals;  /* the cancelling ones, plus SIGUSR1 to quit */
static resil_cancel cancel_token;
static int cancel_signo;        /* read and written atomically */
static pthread_t signal_thread;
static pthread_mutex_t signal_mu = PTHREAD_MUTEX_INITIALIZER;
static http_run *signal_run;    /* the run to cancel, under signal_mu */

static void *signal_main(void *arg)
{
    (void)arg;
    int sig;
    while (sigwait(&taken_signals, &sig) == 0 && sig != SIGUSR1) {
        int none = 0; /* the first signal is the one reported */
        if (!__atomic_compare_exchange_n(&cancel_signo, &none, sig, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        resil_cancel_fire(&cancel_token);
        pthread_mutex_lock(&signal_mu);
        if (signal_run != NULL)
            signal_run->loop.loop.ops->post(signal_run->loop.loop.self, &signal_run->cancel_all);
        pthread_mutex_unlock(&signal_mu);
    }
    return NULL;
}

static void signals_reach(http_run *run)
{
    pthread_mutex_lock(&signal_mu);
    signal_run = run;
    pthread_mutex_unlock(&signal_mu);
}

static bool ignored(int signo)
{
    struct sigaction sa;
    return sigaction(signo, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

/* Block the cancelling signals (unless the parent had them ignored: nohup,
 * background jobs) before any thread exists, so every thread inherits the
 * mask, then take them on one. SIGHUP cancels too, as in `resil run`: a
 * closed terminal should not leave a transfer going. */
static int watch_signals(void)
{
    static const int cancelling[] = {SIGINT, SIGTERM, SIGHUP};
    sigemptyset(&taken_signals);
    for (size_t i = 0; i < sizeof cancelling / sizeof cancelling[0]; i++) {
        if (!ignored(cancelling[i]))
            sigaddset(&taken_signals, cancelling[i]);
    }
    sigaddset(&taken_signals, SIGUSR1);
    if (resil_cancel_init(&cancel_token, NULL) != 0)
        return RESIL_ESYS;
    if (pthread_sigmask(SIG_BLOCK, &taken_signals, NULL) != 0 ||
        pthread_create(&signal_thread, NULL, signal_main, NULL) != 0) {
        resil_cancel_destroy(&cancel_token);
        return RESIL_ESYS;
    }
    return 0;
}

static void unwatch_signals(void)
{
    pthread_kill(signal_thread, SIGUSR1);
    pthread_join(signal_thread, NULL);
    resil_cancel_destroy(&cancel_token);
}

static void end_permit_wait(transfer *t);

/* On the loop, after a signal: no new transfer, every rate permit's wait
 * ended, and every call in flight cancelled (each `done` runs from inside
 * resil_http_cancel). */
static void cancel_all(resil_work *w)
{
    http_run *run = (http_run *)((char *)w - offsetof(http_run, cancel_all));
    run->stopping = true;
    for (int i = 0; i < run->o->nurls; i++) {
        if (run->xfers[i].waiting)
            end_permit_wait(&run->xfers[i]);
        if (run->xfers[i].x != NULL)
            resil_http_cancel(run->xfers[i].x);
    }
}

/* ---- the attempt record ------------------------------------------------------ */

static long status_of(const resil_outcome *o)
{
    return o->kind != RESIL_REJECTED && o->code >= 100 && o->code <= 999 ? (long)o->code : 0;
}

static void print_attempt(const transfer *t, const resil_attempt_record *rec)
{
    char extra[32];
    snprintf(extra, sizeof extra, "\"status\":%ld", status_of(&rec->outcome));
    attempt_log_attempt(&t->log, rec, rec->outcome.detail, extra);
}

/* The heartbeat's next line, due every period from the wait's start: the
 * instants, not the timer's runs, set the count, so a loop running late
 * neither drops a line nor moves the ones after it. */
static void arm_beat(transfer *t)
{
    resil_loop *loop = &t->run->loop.loop;
    resil_duration delay = resil_dur_sub(t->beat_at, loop->ops->now(loop->self));
    loop->ops->timer_start(loop->self, &t->beat, delay > 0 ? delay : 0);
}

/* A heartbeat timer fell due during the transfer's wait. */
static void on_beat(resil_timer *tm)
{
    transfer *t = (transfer *)((char *)tm - offsetof(transfer, beat));
    resil_duration left = resil_dur_sub(t->wait_end, t->beat_at);
    if (left <= 0)
        return;
    heartbeat_beat(&t->log, left);
    if (left <= t->run->every)
        return;
    t->beat_at = resil_dur_add(t->beat_at, t->run->every);
    arm_beat(t);
}

/* A wait longer than the heartbeat's period beats every period. */
static void start_beating(transfer *t, const resil_event *ev)
{
    http_run *run = t->run;
    if (run->every <= 0 || ev->delay <= run->every)
        return;
    t->wait_end = resil_dur_add(ev->at, ev->delay);
    t->beat_at = resil_dur_add(ev->at, run->every);
    arm_beat(t);
}

/* The pipeline reports an attempt, then (when it retries) the wait: the
 * record line needs both, so an attempt that will be retried waits for its
 * RETRY event. Both arrive on the loop's thread, the transfer named by the
 * call's HTTP attributes (the request's `user`). */
static void on_event(const resil_event *ev, void *ud)
{
    http_run *run = ud;
    telemetry_out_on_event(ev, run->tel);
    transfer *t = ev->http != NULL ? ev->http->user : NULL;
    if (t == NULL)
        return;
    if (ev->type == RESIL_EVENT_ATTEMPT && ev->outcome != NULL) {
        resil_attempt_record rec = {.number = ev->attempt, .outcome = *ev->outcome,
                                    .stop = ev->stop, .wait = 0,
                                    .source = RESIL_WAIT_NONE, .start = ev->at,
                                    .duration = ev->duration};
        if (ev->stop != RESIL_STOP_NONE) {
            print_attempt(t, &rec);
            return;
        }
        t->pending = rec;
        t->has_pending = true;
    } else if (ev->type == RESIL_EVENT_RETRY && t->has_pending) {
        t->pending.wait = ev->delay;
        t->pending.source = ev->source;
        print_attempt(t, &t->pending);
        t->has_pending = false;
        start_beating(t, ev);
    }
}

/* ---- the client ----------------------------------------------------------------- */

/* --hedge-to: one ordered group per URL, one hedge each, after the
 * request's own URL for the primary (the route routes every attempt; the
 * client plans a call's endpoints when it starts, so begin() sets the URL
 * just before). */
static void route_hedges(http_opts *o, resil_http_opts *h)
{
    if (o->nhedge_to == 0)
        return;
    o->hedge_to[0] = (resil_route_endpoint){.url = o->urls[0], .weight = 0};
    o->hedge_groups[0] = (resil_route_group){.endpoints = &o->hedge_to[0], .len = 1, .weight = 0};
    resil_route_opts_default(&o->route);
    o->route.groups = o->hedge_groups;
    o->route.ngroups = o->nhedge_to + 1;
    h->hedge_route = &o->route;
    h->max_hedged = (uint32_t)o->nhedge_to;
    if (h->hedge_delay < 0)
        h->hedge_delay = RESIL_S(2); /* Microsoft's hedging delay */
}

/* The client's decisions read the loop's time, so that its waits are the
 * loop's timers. */
static int build_client(http_run *run)
{
    http_opts *o = run->o;
    resil_http_opts h;
    resil_http_opts_default(&h);
    resil_http_opts_profile(&h, o->profile);
    h.name = "resil-http";
    h.retry = o->po.policy;
    h.retry.max_total = 0;
    h.total_timeout = o->po.policy.max_total;
    h.attempt_timeout = o->po.attempt_timeout;
    h.retry.retry_after = o->retry_after;
    if (o->retry_after_max_given)
        h.retry.retry_after_max = o->retry_after_max;
    h.retry_unsafe = h.retry_unsafe || o->retry_unsafe;
    h.disable_for |= o->disable_for;
    h.retry_after_headers = o->nhint > 0 ? o->hint_headers : NULL;
    if (o->hedge >= 0)
        h.hedge_delay = o->hedge;
    route_hedges(o, &h);
    if (o->retry_all_errors)
        h.classify = http_classify_all_errors;
    if (o->breaker_failures > 0) {
        h.breaker.kind = RESIL_BREAKER_BOTH;
        h.breaker.failure_threshold = o->breaker_failures;
    }
    h.listener = on_event;
    h.listener_ud = run;
    h.clock = resil_loop_clock(&run->loop.loop);
    /* --chaos-*: resil run's strategies, innermost in the client's pipeline,
     * so an injected fault is an attempt the retry and the breaker see. */
    if (chaos_opts_finish(&o->chaos, "resil http", h.clock,
                          resil_fail(RESIL_TRANSIENT, CURLE_COULDNT_CONNECT,
                                     "injected failure (not sent)")) != 0)
        return RESIL_EINVAL;
    chaos_opts_strategies(&o->chaos, o->chaos_list);
    h.chaos = o->chaos_list;
#ifdef RESIL_CLI_REDIS
    if (o->fleet != NULL) {
        if (fleet_open(&run->fleet, o->fleet, o->fleet_timeout, &o->limits, &h) != 0)
            return RESIL_EINVAL;
        h.registry = run->fleet.registry;
    }
#endif
    resil_err err;
    if (resil_http_client_new(&h, &run->client, &err) != 0) {
        fprintf(stderr, "resil http: %s\n", err.message);
        return RESIL_EINVAL;
    }
    int rc = resil_http_multi_new(run->client, &run->loop.loop, &run->multi);
    if (rc != 0) {
        fprintf(stderr, "resil http: %s\n", resil_strerror(rc));
        return RESIL_EINVAL;
    }
    return 0;
}

static int exit_status(const resil_http_result *r)
{
    if (r->outcome.kind == RESIL_SUCCESS)
        return 0;
    int sig = __atomic_load_n(&cancel_signo, __ATOMIC_ACQUIRE);
    if (sig != 0)
        return 128 + sig;
    if (r->status >= 400 && r->curl_code == CURLE_OK)
        return EXIT_HTTP_ERROR;
    if (r->curl_code == CURLE_OPERATION_TIMEDOUT || r->outcome.kind == RESIL_TIMEOUT ||
        r->stop == RESIL_STOP_DEADLINE)
        return EXIT_TIMEOUT;
    if (r->curl_code == CURLE_COULDNT_RESOLVE_HOST)
        return EXIT_COULDNT_RESOLVE;
    if (r->curl_code == CURLE_WRITE_ERROR)
        return EXIT_WRITE_ERROR;
    if (r->curl_code != CURLE_OK)
        return (int)r->curl_code;
    return EXIT_COULDNT_CONNECT; /* refused before connecting: the breaker */
}

static void report_failure(const http_opts *o, const char *url, const resil_http_result *r)
{
    if (o->silent && !o->show_error)
        return;
    const char *why = r->stop != RESIL_STOP_NONE ? resil_stop_name(r->stop) : "not attempted";
    fprintf(stderr, "resil http: %s: %s (%s after %u attempt%s)\n", url, r->outcome.detail,
            why, r->attempts, r->attempts == 1 ? "" : "s");
}

static void log_stop(const attempt_log *log, const resil_http_result *r)
{
    resil_stop stop = r->stop;
    if (stop == RESIL_STOP_NONE) /* refused before the retry: a rejection or cancel */
        stop = r->outcome.kind == RESIL_CANCELLED ? RESIL_STOP_CANCELLED
                                                  : RESIL_STOP_NOT_RETRYABLE;
    attempt_log_stop(log, stop, r->attempts, NULL);
}

/* ---- -w: the values of one URL's call ------------------------------------------ */

typedef struct url_call {
    const http_opts *o;
    CURL *e;
    const char *url;
    const char *method;
    const char *output; /* the file written, or NULL */
    const resil_http_result *r;
    const http_sink *sink;
    int status;
} url_call;

static void seconds_text(double s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.6f", s);
}

static void info_seconds(CURL *e, CURLINFO info, char *buf, size_t cap)
{
    curl_off_t us = 0;
    curl_easy_getinfo(e, info, &us);
    seconds_text((double)us / 1e6, buf, cap);
}

static void info_string(CURL *e, CURLINFO info, char *buf, size_t cap)
{
    char *s = NULL;
    curl_easy_getinfo(e, info, &s);
    snprintf(buf, cap, "%s", s != NULL ? s : "");
}

static void info_long(CURL *e, CURLINFO info, char *buf, size_t cap)
{
    long v = 0;
    curl_easy_getinfo(e, info, &v);
    snprintf(buf, cap, "%ld", v);
}

static void info_off(CURL *e, CURLINFO info, char *buf, size_t cap)
{
    curl_off_t v = 0;
    curl_easy_getinfo(e, info, &v);
    snprintf(buf, cap, "%" CURL_FORMAT_CURL_OFF_T, v);
}

static const char *http_version_text(long v)
{
    switch (v) {
    case CURL_HTTP_VERSION_1_0: return "1";
    case CURL_HTTP_VERSION_1_1: return "1.1";
    case CURL_HTTP_VERSION_2_0: return "2";
    case CURL_HTTP_VERSION_3: return "3";
    default: return "0";
    }
}

static void scheme_text(CURL *e, char *buf, size_t cap)
{
    info_string(e, CURLINFO_SCHEME, buf, cap);
    for (char *p = buf; *p != '\0'; p++) /* curl 7.88 writes it in capitals */
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
}

static void header_value(CURL *e, const char *name, char *buf, size_t cap)
{
    struct curl_header *h = NULL;
    if (curl_easy_header(e, name, 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h != NULL)
        snprintf(buf, cap, "%s", h->value);
}

/* curl's own sentence for a status the call fails on (-f, resil's
 * default); else the failure's detail ("curl 7: Couldn't connect to
 * server"), where curl gives libcurl's longer message; empty on success. */
static void errormsg_text(const url_call *c, char *buf, size_t cap)
{
    const resil_http_result *r = c->r;
    if (c->status == EXIT_HTTP_ERROR)
        snprintf(buf, cap, "The requested URL returned error: %03ld", r->status);
    else
        snprintf(buf, cap, "%s", r->outcome.kind == RESIL_SUCCESS ? "" : r->outcome.detail);
}

static bool resil_value(wo_var var, const url_call *c, char *buf, size_t cap)
{
    const resil_http_result *r = c->r;
    switch (var) {
    case WO_ATTEMPTS: snprintf(buf, cap, "%u", r->attempts); return true;
    case WO_NUM_RETRIES: snprintf(buf, cap, "%u", r->attempts > 0 ? r->attempts - 1 : 0);
        return true;
    case WO_STOP_REASON: snprintf(buf, cap, "%s", resil_stop_name(r->stop)); return true;
    case WO_TIME_ELAPSED: seconds_text((double)r->elapsed / (double)RESIL_S(1), buf, cap);
        return true;
    case WO_IDEMPOTENCY_KEY: snprintf(buf, cap, "%s", r->key); return true;
    case WO_HTTP_CODE:
    case WO_RESPONSE_CODE: snprintf(buf, cap, "%03ld", r->status); return true;
    case WO_EXITCODE: snprintf(buf, cap, "%d", c->status); return true;
    case WO_ERRORMSG: errormsg_text(c, buf, cap); return true;
    case WO_SIZE_DOWNLOAD:
        snprintf(buf, cap, "%" CURL_FORMAT_CURL_OFF_T, c->sink->body_bytes);
        return true;
    case WO_SIZE_HEADER:
        snprintf(buf, cap, "%" CURL_FORMAT_CURL_OFF_T, c->sink->header_bytes);
        return true;
    case WO_METHOD: snprintf(buf, cap, "%s", c->method); return true;
    case WO_URL: snprintf(buf, cap, "%s", c->url); return true;
    case WO_FILENAME_EFFECTIVE: snprintf(buf, cap, "%s", c->output ? c->output : "");
        return true;
    default: return false;
    }
}

static void curl_value(wo_var var, CURL *e, char *buf, size_t cap)
{
    long v = 0;
    switch (var) {
    case WO_CONTENT_TYPE: info_string(e, CURLINFO_CONTENT_TYPE, buf, cap); break;
    case WO_HTTP_VERSION:
        curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &v);
        snprintf(buf, cap, "%s", http_version_text(v));
        break;
    case WO_LOCAL_IP: info_string(e, CURLINFO_LOCAL_IP, buf, cap); break;
    case WO_LOCAL_PORT: info_long(e, CURLINFO_LOCAL_PORT, buf, cap); break;
    case WO_NUM_CONNECTS: info_long(e, CURLINFO_NUM_CONNECTS, buf, cap); break;
    case WO_NUM_REDIRECTS: info_long(e, CURLINFO_REDIRECT_COUNT, buf, cap); break;
    case WO_REDIRECT_URL: info_string(e, CURLINFO_REDIRECT_URL, buf, cap); break;
    case WO_REMOTE_IP: info_string(e, CURLINFO_PRIMARY_IP, buf, cap); break;
    case WO_REMOTE_PORT: info_long(e, CURLINFO_PRIMARY_PORT, buf, cap); break;
    case WO_SCHEME: scheme_text(e, buf, cap); break;
    case WO_SIZE_REQUEST: info_long(e, CURLINFO_REQUEST_SIZE, buf, cap); break;
    case WO_SIZE_UPLOAD: info_off(e, CURLINFO_SIZE_UPLOAD_T, buf, cap); break;
    case WO_SPEED_DOWNLOAD: info_off(e, CURLINFO_SPEED_DOWNLOAD_T, buf, cap); break;
    case WO_SPEED_UPLOAD: info_off(e, CURLINFO_SPEED_UPLOAD_T, buf, cap); break;
    case WO_SSL_VERIFY_RESULT: info_long(e, CURLINFO_SSL_VERIFYRESULT, buf, cap); break;
    case WO_TIME_APPCONNECT: info_seconds(e, CURLINFO_APPCONNECT_TIME_T, buf, cap); break;
    case WO_TIME_CONNECT: info_seconds(e, CURLINFO_CONNECT_TIME_T, buf, cap); break;
    case WO_TIME_NAMELOOKUP: info_seconds(e, CURLINFO_NAMELOOKUP_TIME_T, buf, cap); break;
    case WO_TIME_PRETRANSFER: info_seconds(e, CURLINFO_PRETRANSFER_TIME_T, buf, cap); break;
    case WO_TIME_REDIRECT: info_seconds(e, CURLINFO_REDIRECT_TIME_T, buf, cap); break;
    case WO_TIME_STARTTRANSFER:
        info_seconds(e, CURLINFO_STARTTRANSFER_TIME_T, buf, cap);
        break;
    case WO_TIME_TOTAL: info_seconds(e, CURLINFO_TOTAL_TIME_T, buf, cap); break;
    case WO_URL_EFFECTIVE: info_string(e, CURLINFO_EFFECTIVE_URL, buf, cap); break;
    default: break;
    }
}

/* The final attempt's values: from the result where the client knows them,
 * else from the handle (after a hedged call, the caller's handle). */
static void wo_value(wo_var var, const char *header, char *buf, size_t cap, void *ud)
{
    const url_call *c = ud;
    if (var == WO_HEADER)
        header_value(c->e, header, buf, cap);
    else if (!resil_value(var, c, buf, cap))
        curl_value(var, c->e, buf, cap);
}

/* ---- one URL's transfer -------------------------------------------------------- */

/* The transfer's exit status joins the run's as curl's does: with -Z the
 * last failure's stands, in the order transfers end (parallel_transfers());
 * one at a time, the last transfer's, a success included
 * (serial_transfers()); a usage error above all. */
static void note_status(http_run *run, int status)
{
    if (status == RESIL_EXIT_USAGE)
        run->stopping = true;
    if (run->status == RESIL_EXIT_USAGE)
        return;
    if (status != 0 || !run->o->parallel)
        run->status = status;
}

static void release(transfer *t)
{
    fleet_leave(&t->permit);
    http_handle_parts_free(&t->parts);
    curl_easy_cleanup(t->e);
    t->e = NULL;
}

/* The call ended: its record's last line, its output closed, its failure
 * said, its -w written. */
static void on_done(CURL *easy, const resil_http_result *r, void *ud)
{
    (void)easy;
    transfer *t = ud;
    http_run *run = t->run;
    const http_opts *o = run->o;
    t->x = NULL;
    run->active--;
    run->loop.loop.ops->timer_stop(run->loop.loop.self, &t->beat);
    log_stop(&t->log, r);
    int status = exit_status(r);
    int written = http_sink_finish(&t->sink, status == 0);
    if (status == 0 || status == EXIT_HTTP_ERROR)
        status = written != 0 ? written : status;
    if (status != 0 && status != EXIT_WRITE_ERROR)
        report_failure(o, t->url, r);
    if (o->write_out != NULL) {
        url_call c = {.o = o, .e = t->e, .url = t->url, .method = http_opts_method(o),
                      .output = t->path, .r = r, .sink = &t->sink, .status = status};
        write_out_render(o->write_out, stdout, stderr, wo_value, &c);
    }
    release(t);
    note_status(run, status);
}

static void prepare_request(transfer *t)
{
    http_opts *o = t->run->o;
    resil_http_request *req = &t->req;
    resil_http_request_default(req);
    req->method = http_opts_method(o);
    req->headers = t->parts.headers;
    req->key_mode = o->key_mode;
    req->key = o->key;
    req->write_fn = http_sink_body;
    req->write_data = &t->sink;
    req->header_fn = http_sink_header;
    req->header_data = &t->sink;
    req->cancel = &cancel_token;
    req->rng = policy_opts_rng(&o->po);
    req->trace = o->trace_given                          ? &o->trace
                 : telemetry_out_tracing(t->run->tel) ? &t->run->trace
                                                       : NULL;
    req->user = t;
}

/* The call itself, inside the fleet's permits: 0 once started (its `done`
 * may even have run already), else the exit status of a transfer that
 * could not start. */
static int launch(transfer *t)
{
    http_run *run = t->run;
    http_opts *o = run->o;
    if ((t->e = curl_easy_init()) == NULL || http_handle_setup(t->e, o, t->url, &t->parts) != 0)
        return RESIL_EXIT_USAGE;
    prepare_request(t);
    o->hedge_to[0].url = t->url;
    t->has_pending = false;
    run->active++;
    int rc = resil_http_start(run->multi, t->e, &t->req, on_done, t, &t->x);
    if (rc != 0) {
        run->active--;
        t->x = NULL;
        fprintf(stderr, "resil http: %s: %s\n", t->url, resil_strerror(rc));
        return RESIL_EXIT_USAGE;
    }
    return 0;
}

/* Take the fleet limits' permits, when there are any, and launch the call;
 * or, when the rate permit is not there yet, wait for it on a loop timer
 * (the transfer holds its slot meanwhile). 0 when launched or waiting, else
 * the exit status of a request the limits refused. */
static int admit(transfer *t)
{
    http_run *run = t->run;
    const http_opts *o = run->o;
    resil_loop *loop = &run->loop.loop;
    resil_duration budget = resil_dur_sub(t->permit_by, loop->ops->now(loop->self));
    resil_duration wait;
    int rc = fleet_enter(&run->fleet, t->url, budget, o->silent && !o->show_error, &t->permit,
                         &wait);
    if (rc == FLEET_WAIT) {
        t->waiting = true;
        run->active++;
        loop->ops->timer_start(loop->self, &t->permit_due, wait);
        return 0;
    }
    if (rc != 0)
        return rc == RESIL_EREJECTED ? EXIT_COULDNT_CONNECT : RESIL_EXIT_USAGE;
    return launch(t);
}

/* Start URL t->index's call: 0 once started or waiting for its rate
 * permit, else the exit status of a transfer that could not start. */
static int start_call(transfer *t)
{
    http_run *run = t->run;
    http_opts *o = run->o;
    if (http_output_path(o, t->index, t->url, t->name, sizeof t->name, &t->path) != 0)
        return EXIT_WRITE_ERROR;
    http_sink_init(&t->sink, o, t->path, run->dump);
    resil_duration total = o->po.policy.max_total;
    resil_loop *loop = &run->loop.loop;
    t->permit_by = resil_dur_add(loop->ops->now(loop->self),
                                 total > 0 ? total : FLEET_RATE_WAIT_MAX);
    return admit(t);
}

/* A transfer that could not start: what it took goes back, and its status
 * joins the run's. */
static void not_started(http_run *run, transfer *t, int status)
{
    if (t->e != NULL)
        release(t);
    else
        fleet_leave(&t->permit);
    note_status(run, status);
}

static void begin(http_run *run, transfer *t)
{
    int status = start_call(t);
    if (status != 0)
        not_started(run, t, status);
}

static void leave_permit_wait(transfer *t)
{
    t->waiting = false;
    t->run->active--;
}

/* The rate permit should be there now: ask again. */
static void on_permit_due(resil_timer *tm)
{
    transfer *t = (transfer *)((char *)tm - offsetof(transfer, permit_due));
    leave_permit_wait(t);
    int status = admit(t);
    if (status != 0)
        not_started(t->run, t, status);
}

/* Cancelled while waiting for its rate permit: the call starts without it
 * and ends at once as cancelled, with the record and status of any other
 * cancelled call. */
static void end_permit_wait(transfer *t)
{
    http_loop *l = &t->run->loop;
    l->loop.ops->timer_stop(l->loop.self, &t->permit_due);
    leave_permit_wait(t);
    int status = launch(t);
    if (status != 0)
        not_started(t->run, t, status);
}

/* Start URLs in order while there is room: one at a time without -Z. */
static void pump(http_run *run)
{
    const http_opts *o = run->o;
    uint32_t most = o->parallel ? o->parallel_max : 1;
    while (!run->stopping && run->next < o->nurls && run->active < most) {
        if (resil_cancelled(&cancel_token)) {
            run->stopping = true;
            break;
        }
        begin(run, &run->xfers[run->next++]);
    }
}

static void run_transfers(http_run *run)
{
    const http_opts *o = run->o;
    for (int i = 0; i < o->nurls; i++) {
        transfer *t = &run->xfers[i];
        *t = (transfer){.run = run, .index = i, .url = o->urls[i], .log = run->log};
        t->log.subject = t->url;
        t->beat.fn = on_beat;
        t->permit_due.fn = on_permit_due;
    }
    pump(run);
    while (run->active > 0) {
        http_loop_run_once(&run->loop);
        pump(run);
    }
}

static FILE *open_log(const http_opts *o)
{
    if (o->log_file == NULL)
        return stderr;
    FILE *f = fopen(o->log_file, "a");
    if (f == NULL)
        fprintf(stderr, "resil http: --log-file: cannot open '%s': %s\n", o->log_file,
                strerror(errno));
    return f;
}

static FILE *open_dump(const http_opts *o, bool *failed)
{
    *failed = false;
    if (o->dump_header == NULL)
        return NULL;
    if (strcmp(o->dump_header, "-") == 0)
        return stdout;
    FILE *f = fopen(o->dump_header, "wb");
    if (f == NULL) {
        fprintf(stderr, "resil http: --dump-header: cannot write '%s': %s\n", o->dump_header,
                strerror(errno));
        *failed = true;
    }
    return f;
}

/* -D's stream, closed unless it is standard output: fclose's answer. */
static int close_dump(FILE *dump)
{
    return dump != NULL && dump != stdout ? fclose(dump) : 0;
}

static void close_log(FILE *log)
{
    if (log != stderr)
        fclose(log);
}

/* The run's loop, client and multi handle, and the transfers on them. */
static int run_all(http_run *run)
{
    if (http_loop_init(&run->loop) != 0) {
        fprintf(stderr, "resil http: cannot make the event loop: %s\n", strerror(errno));
        return RESIL_EXIT_USAGE;
    }
    run->cancel_all.fn = cancel_all;
    run->xfers = calloc((size_t)run->o->nurls, sizeof *run->xfers);
    int status = run->xfers == NULL || build_client(run) != 0 ? RESIL_EXIT_USAGE : 0;
    if (status == 0) {
        signals_reach(run);
        run_transfers(run);
        signals_reach(NULL);
        status = run->status;
    }
    resil_http_multi_free(run->multi);
    resil_http_client_free(run->client);
    http_loop_destroy(&run->loop);
    free(run->xfers);
    return status;
}

static int execute(http_opts *o)
{
    http_run run = {.o = o};
    bool dump_failed;
    run.dump = open_dump(o, &dump_failed);
    if (dump_failed)
        return EXIT_WRITE_ERROR;
    FILE *log = open_log(o);
    if (log == NULL) {
        close_dump(run.dump);
        return RESIL_EXIT_USAGE;
    }
    run.tel = &o->tel; /* its spans' wall times: the loop's clock is the system's */
    if (telemetry_out_open(run.tel, "resil http", resil_clock_system()) != 0) {
        close_dump(run.dump);
        close_log(log);
        return RESIL_EXIT_USAGE;
    }
    run.log = (attempt_log){.out = log, .format = o->log, .indent = "", .stamped = true,
                            .subject_key = "url",
                            .subject_in_text = o->parallel && o->nurls > 1};
    run.every = o->heartbeat >= 0 ? o->heartbeat : heartbeat_default(&run.log);
    if (telemetry_out_tracing(run.tel) && !o->trace_given)
        resil_trace_new(policy_opts_rng(&o->po), true, &run.trace);
    int status = run_all(&run);
    int sig = __atomic_load_n(&cancel_signo, __ATOMIC_ACQUIRE);
    if (sig != 0)
        status = 128 + sig;
    /* a metrics file or an export that failed is an output not written */
    if (telemetry_out_close(run.tel, "resil http") != 0 && status == 0)
        status = EXIT_WRITE_ERROR;
    chaos_opts_free(&o->chaos);
    fleet_close(&run.fleet);
    if (close_dump(run.dump) != 0 && status == 0)
        status = EXIT_WRITE_ERROR;
    close_log(log);
    return status;
}

int cmd_http(int argc, char **argv)
{
    http_opts o;
    int rc = http_opts_parse(&o, argc, argv, NULL);
    if (rc != 0) {
        http_opts_free(&o);
        return rc > 0 ? 0 : RESIL_EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN); /* see the top */
    if (watch_signals() != 0) {
        perror("resil http: watching signals");
        http_opts_free(&o);
        return RESIL_EXIT_USAGE;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int status = execute(&o);
    http_opts_free(&o);
    curl_global_cleanup();
    unwatch_signals();
    return status;
}
