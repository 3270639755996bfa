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
#include "http_fleet.h"
#include "http_opts.h"

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

static int build_client(const http_opts *o, run_state *rs, fleet *f, resil_http_client **out)
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
    h.retry_unsafe = o->retry_unsafe;
    h.hedge_delay = o->hedge;
    if (o->breaker_failures > 0) {
        h.breaker.kind = RESIL_BREAKER_BOTH;
        h.breaker.failure_threshold = o->breaker_failures;
    }
    h.listener = on_event;
    h.listener_ud = rs;
#ifdef RESIL_CLI_REDIS
    if (o->fleet != NULL) {
        if (fleet_open(f, o->fleet, &h) != 0)
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

static void configure(CURL *e, const http_opts *o, const char *url)
{
    const char *m = http_opts_method(o);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, o->headers);
    if (o->data != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->data_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, o->data);
    } else if (strcmp(m, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    }
    if (strcmp(m, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    else if (strcmp(m, "GET") != 0 && strcmp(m, "POST") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    else if (strcmp(m, "GET") == 0 && o->data != NULL)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "GET");
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
    if (o->silent)
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

static int perform_url(resil_http_client *c, CURL *e, http_opts *o, run_state *rs,
                       FILE *out, const char *url)
{
    curl_easy_reset(e);
    configure(e, o, url);
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = http_opts_method(o);
    req.headers = o->headers;
    req.key_mode = o->key_mode;
    req.key = o->key;
    req.write_data = out;
    req.header_data = o->include_headers ? out : NULL;
    req.cancel = &cancel_token;
    req.rng = policy_opts_rng(&o->po);
    resil_http_result r;
    rs->has_pending = false;
    int rc = resil_http_perform(c, e, &req, &r);
    fflush(out);
    if (rc != 0) {
        fprintf(stderr, "resil http: %s: %s\n", url, resil_strerror(rc));
        return RESIL_EXIT_USAGE;
    }
    log_stop(rs, &r);
    int status = exit_status(&r);
    if (status != 0)
        report_failure(o, url, &r);
    return status;
}

static int execute(http_opts *o)
{
    FILE *out = stdout;
    if (o->output != NULL && (out = fopen(o->output, "wb")) == NULL) {
        fprintf(stderr, "resil http: cannot write '%s': %s\n", o->output, strerror(errno));
        return EXIT_WRITE_ERROR;
    }
    run_state rs = {.log = {stderr, o->log, ""}};
    resil_http_client *c = NULL;
    fleet f = {0};
    CURL *e = curl_easy_init();
    int status = e == NULL                          ? RESIL_EXIT_USAGE
                 : build_client(o, &rs, &f, &c) != 0 ? RESIL_EXIT_USAGE
                                                     : 0;
    for (int i = 0; status != RESIL_EXIT_USAGE && i < o->nurls; i++) {
        if (resil_cancelled(&cancel_token))
            break;
        int s = perform_url(c, e, o, &rs, out, o->urls[i]);
        if (s != 0)
            status = s;
    }
    int sig = __atomic_load_n(&cancel_signo, __ATOMIC_ACQUIRE);
    if (sig != 0)
        status = 128 + sig;
    resil_http_client_free(c);
    fleet_close(&f);
    curl_easy_cleanup(e);
    if (out != stdout && fclose(out) != 0 && status == 0)
        status = EXIT_WRITE_ERROR;
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
