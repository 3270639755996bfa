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
 * Signals: the pipeline may run attempts on worker threads (hedging), so
 * the synchronous sigtimedwait scheme of `resil run` does not fit here.
 * SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken by one
 * thread in sigwait(), which fires the call's cancellation token: that ends
 * a wait between attempts at once and aborts a running transfer at
 * libcurl's next progress check.
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
#include "http_opts.h"
#include "http_output.h"

enum {
    EXIT_COULDNT_RESOLVE = 6,
    EXIT_COULDNT_CONNECT = 7,
    EXIT_HTTP_ERROR = 22,
    EXIT_WRITE_ERROR = 23,
    EXIT_TIMEOUT = 28,
};

/* ---- signals ---------------------------------------------------------------- */

static sigset_t taken_signals;  /* the cancelling ones, plus SIGUSR1 to quit */
static resil_cancel cancel_token;
static int cancel_signo;        /* read and written atomically */
static pthread_t signal_thread;

static void *signal_main(void *arg)
{
    (void)arg;
    int sig;
    while (sigwait(&taken_signals, &sig) == 0 && sig != SIGUSR1) {
        int none = 0; /* the first signal is the one reported */
        __atomic_compare_exchange_n(&cancel_signo, &none, sig, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        resil_cancel_fire(&cancel_token);
    }
    return NULL;
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

/* ---- the attempt record ------------------------------------------------------ */

typedef struct run_state {
    attempt_log log;
    resil_attempt_record pending; /* an attempt waiting for its retry's wait */
    bool has_pending;
    resil_metrics *metrics;       /* --metrics: the calls' figures, or NULL */
} run_state;

static long status_of(const resil_outcome *o)
{
    return o->kind != RESIL_REJECTED && o->code >= 100 && o->code <= 999 ? (long)o->code : 0;
}

static void print_attempt(run_state *rs, const resil_attempt_record *rec)
{
    char extra[32];
    snprintf(extra, sizeof extra, "\"status\":%ld", status_of(&rec->outcome));
    attempt_log_attempt(&rs->log, rec, rec->outcome.detail, extra);
}

/* The pipeline reports an attempt, then (when it retries) the wait: the
 * record line needs both, so an attempt that will be retried waits for its
 * RETRY event. Both arrive on the calling thread. */
static void on_event(const resil_event *ev, void *ud)
{
    run_state *rs = ud;
    if (rs->metrics != NULL)
        resil_metrics_on_event(ev, rs->metrics);
    if (ev->type == RESIL_EVENT_ATTEMPT && ev->outcome != NULL) {
        resil_attempt_record rec = {.number = ev->attempt, .outcome = *ev->outcome,
                                    .stop = ev->stop, .wait = 0,
                                    .source = RESIL_WAIT_NONE, .start = ev->at,
                                    .duration = ev->duration};
        if (ev->stop != RESIL_STOP_NONE) {
            print_attempt(rs, &rec);
            return;
        }
        rs->pending = rec;
        rs->has_pending = true;
    } else if (ev->type == RESIL_EVENT_RETRY && rs->has_pending) {
        rs->pending.wait = ev->delay;
        rs->pending.source = ev->source;
        print_attempt(rs, &rs->pending);
        rs->has_pending = false;
    }
}

/* ---- the run ----------------------------------------------------------------- */

/* --hedge-to: one ordered group per URL, one hedge each, after the
 * request's own URL for the primary (the route routes every attempt; the
 * client reads it at each call, so perform_url sets the URL just before). */
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

static int build_client(http_opts *o, run_state *rs, fleet *f, heartbeat_clock *hb,
                        resil_http_client **out)
{
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
    h.listener_ud = rs;
    heartbeat_init(hb, resil_clock_system(),
                   o->heartbeat >= 0 ? o->heartbeat : heartbeat_default(&rs->log), &rs->log);
    h.clock = &hb->base;
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
        if (fleet_open(f, o->fleet, &o->limits, &h) != 0)
            return RESIL_EINVAL;
        h.registry = f->registry;
    }
#else
    (void)f;
#endif
    resil_err err;
    if (resil_http_client_new(&h, out, &err) != 0) {
        fprintf(stderr, "resil http: %s\n", err.message);
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

static void log_stop(const run_state *rs, const resil_http_result *r)
{
    resil_stop stop = r->stop;
    if (stop == RESIL_STOP_NONE) /* refused before the retry: a rejection or cancel */
        stop = r->outcome.kind == RESIL_CANCELLED ? RESIL_STOP_CANCELLED
                                                  : RESIL_STOP_NOT_RETRYABLE;
    attempt_log_stop(&rs->log, stop, r->attempts, NULL);
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
    case WO_ERRORMSG:
        snprintf(buf, cap, "%s", r->outcome.kind == RESIL_SUCCESS ? "" : r->outcome.detail);
        return true;
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

/* ---- one URL ------------------------------------------------------------------ */

typedef struct http_run {
    http_opts *o;
    resil_http_client *client;
    CURL *e;
    run_state rs;
    fleet fleet; /* --fleet: shared breakers and limits */
    FILE *dump;  /* -D's stream */
} http_run;

static int call_url(http_run *run, const char *url, http_sink *sink,
                    resil_http_result *r)
{
    http_opts *o = run->o;
    http_handle_parts parts;
    int rc = http_handle_setup(run->e, o, url, &parts);
    if (rc != 0) {
        http_handle_parts_free(&parts);
        return RESIL_EXIT_USAGE;
    }
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = http_opts_method(o);
    req.headers = parts.headers;
    req.key_mode = o->key_mode;
    req.key = o->key;
    req.write_fn = http_sink_body;
    req.write_data = sink;
    req.header_fn = http_sink_header;
    req.header_data = sink;
    req.cancel = &cancel_token;
    req.rng = policy_opts_rng(&o->po);
    req.trace = o->trace_given ? &o->trace : NULL;
    run->rs.has_pending = false;
    rc = resil_http_perform(run->client, run->e, &req, r);
    http_handle_parts_free(&parts);
    if (rc != 0) {
        fprintf(stderr, "resil http: %s: %s\n", url, resil_strerror(rc));
        return RESIL_EXIT_USAGE;
    }
    return 0;
}

/* Inside the fleet limits' permits, when there are any: 0 when the call
 * went on, or the exit status of a request the limits refused. */
static int fenced_call(http_run *run, const char *url, http_sink *sink, resil_http_result *r)
{
    const http_opts *o = run->o;
    resil_bulkhead_ticket permit;
    int rc = fleet_enter(&run->fleet, url, o->po.policy.max_total, &cancel_token,
                         o->silent && !o->show_error, &permit);
    if (rc != 0)
        return rc == RESIL_EREJECTED ? EXIT_COULDNT_CONNECT : RESIL_EXIT_USAGE;
    rc = call_url(run, url, sink, r);
    fleet_leave(&permit);
    return rc;
}

static int perform_url(http_run *run, int index)
{
    http_opts *o = run->o;
    const char *url = o->urls[index];
    char name[1024];
    const char *path;
    if (http_output_path(o, index, url, name, sizeof name, &path) != 0)
        return EXIT_WRITE_ERROR;
    http_sink sink;
    http_sink_init(&sink, o, path, run->dump);
    run->rs.log.subject = url;
    resil_http_result r;
    int rc = fenced_call(run, url, &sink, &r);
    if (rc != 0)
        return rc;
    log_stop(&run->rs, &r);
    int status = exit_status(&r);
    int written = http_sink_finish(&sink, status == 0);
    if (status == 0 || status == EXIT_HTTP_ERROR)
        status = written != 0 ? written : status;
    if (status != 0 && status != EXIT_WRITE_ERROR)
        report_failure(o, url, &r);
    if (o->write_out != NULL) {
        url_call c = {.o = o, .e = run->e, .url = url, .method = http_opts_method(o),
                      .output = path, .r = &r, .sink = &sink, .status = status};
        write_out_render(o->write_out, stdout, stderr, wo_value, &c);
    }
    return status;
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

/* --metrics: the file is opened before any request, so a name that cannot
 * be written is refused while nothing has been sent. */
static int open_metrics(const http_opts *o, FILE **out, resil_metrics **m)
{
    *out = NULL;
    *m = NULL;
    if (o->metrics_file == NULL)
        return 0;
    FILE *f = strcmp(o->metrics_file, "-") == 0 ? stderr : fopen(o->metrics_file, "w");
    if (f == NULL) {
        fprintf(stderr, "resil http: --metrics: cannot open '%s': %s\n", o->metrics_file,
                strerror(errno));
        return RESIL_EXIT_USAGE;
    }
    resil_err err;
    if (resil_metrics_new(NULL, m, &err) != 0) {
        fprintf(stderr, "resil http: --metrics: %s\n", err.message);
        if (f != stderr)
            fclose(f);
        return RESIL_EXIT_USAGE;
    }
    *out = f;
    return 0;
}

static int write_piece(const char *text, size_t len, void *ud)
{
    return fwrite(text, 1, len, ud) == len ? 0 : RESIL_ESYS;
}

/* The figures of every call made, then the file closed: a write that
 * fails makes the run's status EXIT_WRITE_ERROR unless it failed already. */
static int close_metrics(FILE *f, resil_metrics *m, const char *name, int status)
{
    if (f == NULL)
        return status;
    int rc = resil_metrics_write_prometheus(m, write_piece, f);
    if (f != stderr && fclose(f) != 0)
        rc = RESIL_ESYS;
    resil_metrics_free(m);
    if (rc != 0)
        fprintf(stderr, "resil http: --metrics: cannot write '%s'\n", name);
    return rc != 0 && status == 0 ? EXIT_WRITE_ERROR : status;
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
        if (run.dump != NULL && run.dump != stdout)
            fclose(run.dump);
        return RESIL_EXIT_USAGE;
    }
    FILE *metrics_out;
    resil_metrics *metrics;
    if (open_metrics(o, &metrics_out, &metrics) != 0) {
        if (run.dump != NULL && run.dump != stdout)
            fclose(run.dump);
        if (log != stderr)
            fclose(log);
        return RESIL_EXIT_USAGE;
    }
    run.rs = (run_state){
        .log = {.out = log, .format = o->log, .indent = "", .stamped = true, .subject_key = "url"},
        .metrics = metrics};
    heartbeat_clock hb;
    run.e = curl_easy_init();
    int status = run.e == NULL || build_client(o, &run.rs, &run.fleet, &hb, &run.client) != 0
                     ? RESIL_EXIT_USAGE
                     : 0;
    for (int i = 0; status != RESIL_EXIT_USAGE && i < o->nurls; i++) {
        if (resil_cancelled(&cancel_token))
            break;
        o->hedge_to[0].url = o->urls[i];
        int s = perform_url(&run, i);
        if (s != 0)
            status = s;
    }
    int sig = __atomic_load_n(&cancel_signo, __ATOMIC_ACQUIRE);
    if (sig != 0)
        status = 128 + sig;
    resil_http_client_free(run.client);
    status = close_metrics(metrics_out, metrics, o->metrics_file, status);
    chaos_opts_free(&o->chaos);
    fleet_close(&run.fleet);
    curl_easy_cleanup(run.e);
    if (run.dump != NULL && run.dump != stdout && fclose(run.dump) != 0 && status == 0)
        status = EXIT_WRITE_ERROR;
    if (log != stderr)
        fclose(log);
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
