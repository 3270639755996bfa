/*
 * cmd_http.c — `resil http [OPTIONS] URL...`: what `curl --retry` should
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

#include "args.h"
#include "attempt_log.h"
#include "commands.h"
#include "policy_opts.h"
#include "resil/http.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

#define MAX_URLS 256
#define MAX_HINT_HEADERS 8

enum {
    EXIT_COULDNT_RESOLVE = 6,
    EXIT_COULDNT_CONNECT = 7,
    EXIT_HTTP_ERROR = 22,
    EXIT_WRITE_ERROR = 23,
    EXIT_TIMEOUT = 28,
};

typedef struct http_opts {
    policy_opts po;
    resil_http_profile profile;
    const char *method;
    struct curl_slist *headers;
    char *data;                /* the request body (heap), or NULL */
    size_t data_len;
    const char *output;        /* -o FILE */
    bool include_headers;      /* -i */
    bool silent;               /* -s */
    resil_retry_after_mode retry_after;
    resil_duration retry_after_max;
    bool retry_after_max_given;
    resil_http_key_mode key_mode;
    const char *key;
    bool retry_unsafe;
    resil_duration hedge;      /* -1: no hedging */
    uint32_t breaker_failures; /* 0: the profile's ratio rule alone */
    const char *fleet;         /* --fleet redis://...: shared breakers, or NULL */
    fleet_limit_opts limits;   /* --fleet-rate, --fleet-concurrency */
    const char *hint_headers[MAX_HINT_HEADERS + 1]; /* --retry-after-header, NULL-ended */
    int nhint;
    unsigned disable_for;      /* --disable-for: added to the profile's */
    /* [0] the request's own URL, for the primary; then --hedge-to, in order */
    resil_route_endpoint hedge_to[RESIL_HEDGE_MAX + 1];
    resil_route_group hedge_groups[RESIL_HEDGE_MAX + 1];
    resil_route_opts route;
    size_t nhedge_to;
    log_format log;
    const char *urls[MAX_URLS];
    int nurls;
} http_opts;

static void usage(FILE *out)
{
    fputs("usage: resil http [OPTIONS] URL...\n"
          "\n"
          "Fetch each URL with libcurl through a resilience pipeline: retries with\n"
          "backoff and Retry-After, attempt and total timeouts, a circuit breaker per\n"
          "host, idempotency keys for unsafe methods, hedged GETs.\n"
          "\n"
          "request:\n"
          "  -X, --method METHOD        the request method (default GET, or POST with\n"
          "                             --data)\n"
          "  -H, --header 'NAME: VALUE' add a header (repeatable)\n"
          "  -d, --data BODY|@FILE      send BODY, or FILE's contents ('@-': standard\n"
          "                             input)\n"
          "  -o, --output FILE          write the bodies to FILE instead of standard\n"
          "                             output\n"
          "  -i, --include              write the response headers before the body\n"
          "  -s, --silent               no attempt record and no error message\n"
          "\n",
          out);
    policy_opts_usage(out);
    fputs("HTTP defaults: 4 attempts, exponential from 2s with Polly's jitter, no cap,\n"
          "attempt timeout 10s, total timeout 30s (the standard profile).\n"
          "\n"
          "resilience:\n"
          "      --profile NAME         standard, microsoft-standard, microsoft-hedging,\n"
          "                             read or write\n"
          "                             (default standard). standard: Microsoft's\n"
          "                             handler's strategies and numbers with resil's\n"
          "                             safer rules (408, 429, 500, 502-504 and path\n"
          "                             failures; POST/PATCH only with a key);\n"
          "                             microsoft-standard: that handler exactly\n"
          "                             (every status >= 500, 408, 429, any transport\n"
          "                             failure, every method); microsoft-hedging:\n"
          "                             Microsoft's standard hedging handler (one hedge\n"
          "                             after 2s instead of retries); read: total 2s,\n"
          "                             attempt 500ms, 4 attempts from 100ms, GETs\n"
          "                             hedged after 250ms, unsafe methods never\n"
          "                             retried; write: total 6s, attempt 2s, unsafe\n"
          "                             methods never retried, a stricter breaker\n"
          "      --disable-for METHODS  never retry these methods (POST,PATCH,...)\n"
          "      --retry-after honor|ignore\n"
          "                             wait as the server's Retry-After says (default\n"
          "                             honor)\n"
          "      --retry-after-max DUR  cap on a Retry-After wait (default 60s)\n"
          "      --retry-after-header NAME\n"
          "                             read the wait from NAME too, before\n"
          "                             retry-after-ms, x-ms-retry-after-ms and\n"
          "                             Retry-After; a NAME ending in -ms holds\n"
          "                             milliseconds (repeatable, up to 8)\n"
          "      --idempotency-key auto|none|KEY\n"
          "                             send an Idempotency-Key: a new UUID for each\n"
          "                             URL, or KEY; the same on every attempt (default\n"
          "                             none). POST and PATCH are retried only with one.\n"
          "      --retry-unsafe         retry POST and PATCH even without a key\n"
          "      --hedge DUR            for GET and HEAD: start a second request when\n"
          "                             the first has not answered after DUR\n"
          "      --hedge-to URL         send the next hedge to URL's scheme, host and\n"
          "                             port instead (repeatable, up to 10: one hedge\n"
          "                             each, in order; the path and query are kept);\n"
          "                             hedging after 2s unless --hedge says otherwise\n"
          "      --breaker-failures N   open a host's breaker after N failures in a\n"
          "                             row (default: the profile's ratio rule only)\n"
#ifdef RESIL_CLI_REDIS
          "      --fleet redis://HOST[:PORT][/DB]\n"
          "                             share each host's breaker through Redis with\n"
          "                             every process given the same URL; when Redis\n"
          "                             does not answer, each process counts alone\n"
          "      --fleet-rate RATE/PER[:BURST]\n"
          "                             with --fleet: at most RATE requests per PER (s,\n"
          "                             m, h or a duration) to each host across every\n"
          "                             process, bursts of BURST (default RATE); a\n"
          "                             request waits for its turn within the total\n"
          "                             timeout, else is refused (exit 7)\n"
          "      --fleet-concurrency N[:LEASE]\n"
          "                             with --fleet: at most N requests at once to each\n"
          "                             host across every process (else refused, exit\n"
          "                             7); a killed process's permit returns after\n"
          "                             LEASE (default 5s)\n"
#endif
          "      --log text|json|none   the attempt record, on standard error (default\n"
          "                             text); json adds each attempt's status\n"
          "  -h, --help                 this text\n"
          "\n"
          "exit status (as curl's with --fail):\n"
          "  0    the last response was 2xx or 3xx\n"
          "  6    the host name could not be resolved\n"
          "  7    no connection could be made (or the host's breaker is open, or a\n"
          "       fleet limit refused the request)\n"
          "  22   the last response was 400 or above\n"
          "  28   a timeout ended the request\n"
          "  125  resil's own error, such as a bad option value\n"
          "  129/130/143  cancelled by SIGHUP/SIGINT/SIGTERM\n"
          "  N    libcurl's error code N for any other transfer failure\n"
          "With several URLs, the status is that of the last URL that failed.\n",
          out);
}

/* ---- options --------------------------------------------------------------- */

static int consumed(int rc) { return rc < 0 ? rc : 1; }

static int read_stream(FILE *in, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        return RESIL_ENOMEM;
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, in)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                free(buf);
                return RESIL_ENOMEM;
            }
            buf = grown;
            cap *= 2;
        }
    }
    if (ferror(in)) {
        free(buf);
        return RESIL_EIO;
    }
    *out = buf;
    *len = n;
    return 0;
}

static int parse_data(http_opts *o, const args *a, const char *v)
{
    free(o->data);
    o->data = NULL;
    if (v[0] != '@') {
        o->data_len = strlen(v);
        o->data = malloc(o->data_len + 1);
        if (o->data == NULL)
            return args_fail(a, "out of memory");
        memcpy(o->data, v, o->data_len + 1);
        return 0;
    }
    bool std_in = strcmp(v, "@-") == 0;
    FILE *in = std_in ? stdin : fopen(v + 1, "rb");
    if (in == NULL)
        return args_fail(a, "--data: cannot open '%s': %s", v + 1, strerror(errno));
    int rc = read_stream(in, &o->data, &o->data_len);
    if (!std_in)
        fclose(in);
    if (rc != 0)
        return args_fail(a, "--data: cannot read '%s'", v + 1);
    return 0;
}

static int parse_header(http_opts *o, const args *a, const char *v)
{
    const char *colon = strchr(v, ':');
    if (colon == NULL || colon == v || strpbrk(v, "\r\n") != NULL)
        return args_reject(a, "--header", "'NAME: VALUE'", v);
    struct curl_slist *h = curl_slist_append(o->headers, v);
    if (h == NULL)
        return args_fail(a, "out of memory");
    o->headers = h;
    return 0;
}

static int parse_method(http_opts *o, const args *a, const char *v)
{
    if (v[0] == '\0' || strpbrk(v, " \t\r\n") != NULL)
        return args_reject(a, "--method", "a method name such as GET or POST", v);
    o->method = v;
    return 0;
}

static int parse_key(http_opts *o, const args *a, const char *v)
{
    if (strcmp(v, "auto") == 0) {
        o->key_mode = RESIL_HTTP_KEY_AUTO;
        return 0;
    }
    if (strcmp(v, "none") == 0) {
        o->key_mode = RESIL_HTTP_KEY_NONE;
        return 0;
    }
    size_t n = strlen(v);
    bool printable = n > 0 && n <= RESIL_HTTP_KEY_MAX;
    for (size_t i = 0; i < n && printable; i++)
        printable = v[i] > 0x20 && v[i] < 0x7f;
    if (!printable)
        return args_reject(a, "--idempotency-key",
                           "auto, none or a key of 1 to 255 printable characters "
                           "without spaces", v);
    o->key_mode = RESIL_HTTP_KEY_GIVEN;
    o->key = v;
    return 0;
}

static int parse_retry_after(http_opts *o, const args *a, const char *v)
{
    if (strcmp(v, "honor") == 0)
        o->retry_after = RESIL_RETRY_AFTER_HONOR;
    else if (strcmp(v, "ignore") == 0)
        o->retry_after = RESIL_RETRY_AFTER_IGNORE;
    else
        return args_reject(a, "--retry-after", "honor or ignore", v);
    return 0;
}

static int parse_profile(http_opts *o, const args *a, const char *v)
{
    if (resil_http_profile_parse(v, &o->profile) != 0)
        return args_reject(a, "--profile",
                           "one of standard, microsoft-standard, microsoft-hedging, read, write",
                           v);
    return 0;
}

static int parse_hint_header(http_opts *o, const args *a, const char *v)
{
    if (o->nhint == MAX_HINT_HEADERS)
        return args_fail(a, "--retry-after-header: at most %d names", MAX_HINT_HEADERS);
    if (v[0] == '\0' || strpbrk(v, ": \t\r\n") != NULL)
        return args_reject(a, "--retry-after-header", "a header name", v);
    o->hint_headers[o->nhint++] = v;
    return 0;
}

static int parse_hedge_to(http_opts *o, const args *a, const char *v)
{
    char authority[RESIL_BREAKER_NAME_MAX];
    if (o->nhedge_to == RESIL_HEDGE_MAX)
        return args_fail(a, "--hedge-to: at most %d endpoints", RESIL_HEDGE_MAX);
    if (resil_http_authority(v, authority, sizeof authority) != 0)
        return args_reject(a, "--hedge-to", "a URL such as https://eu.example.com", v);
    size_t k = ++o->nhedge_to;
    o->hedge_to[k] = (resil_route_endpoint){.url = v, .weight = 0};
    o->hedge_groups[k] = (resil_route_group){.endpoints = &o->hedge_to[k], .len = 1, .weight = 0};
    return 0;
}

static int parse_disable_for(http_opts *o, const args *a, const char *v)
{
    unsigned bits;
    if (resil_http_methods_parse(v, &bits) != 0)
        return args_reject(a, "--disable-for", "a comma-separated list of methods", v);
    o->disable_for |= bits;
    return 0;
}

static int parse_breaker_failures(http_opts *o, const args *a, const char *v)
{
    uint64_t n;
    int rc = args_uint64(a, "--breaker-failures", v, 1, UINT32_MAX, &n);
    o->breaker_failures = (uint32_t)n;
    return rc;
}

static int parse_log(http_opts *o, const args *a, const char *v)
{
    if (attempt_log_format_parse(v, &o->log) != 0)
        return args_reject(a, "--log", "one of text, json, none", v);
    return 0;
}

static bool take_flag(args *a, const char *long_name, const char *short_name, bool *flag)
{
    if (!args_flag(a, long_name, short_name))
        return false;
    *flag = true;
    return true;
}

/* One option of ours at a->i: 1 consumed, 0 unknown, <0 bad value. */
static int parse_http_option(http_opts *o, args *a)
{
    const char *v;
    int m;
#define TRY(long_name, short_name, action)                                     \
    if ((m = args_match(a, long_name, short_name, &v)) != 0)                   \
        return m < 0 ? m : consumed(action);
    TRY("--method", "-X", parse_method(o, a, v))
    TRY("--header", "-H", parse_header(o, a, v))
    TRY("--data", "-d", parse_data(o, a, v))
    TRY("--output", "-o", (o->output = v, 0))
    TRY("--profile", NULL, parse_profile(o, a, v))
    TRY("--retry-after", NULL, parse_retry_after(o, a, v))
    TRY("--retry-after-max", NULL,
        (o->retry_after_max_given = true,
         args_duration(a, "--retry-after-max", v, false, &o->retry_after_max)))
    TRY("--retry-after-header", NULL, parse_hint_header(o, a, v))
    TRY("--disable-for", NULL, parse_disable_for(o, a, v))
    TRY("--hedge-to", NULL, parse_hedge_to(o, a, v))
    TRY("--idempotency-key", NULL, parse_key(o, a, v))
    TRY("--hedge", NULL, args_duration(a, "--hedge", v, false, &o->hedge))
    TRY("--breaker-failures", NULL, parse_breaker_failures(o, a, v))
    TRY("--log", NULL, parse_log(o, a, v))
#ifdef RESIL_CLI_REDIS
    TRY("--fleet", NULL, fleet_url_parse(a, v, &o->fleet))
    TRY("--fleet-rate", NULL, fleet_rate_parse(a, v, &o->limits))
    TRY("--fleet-concurrency", NULL, fleet_concurrency_parse(a, v, &o->limits))
#endif
#undef TRY
    if (take_flag(a, "--include", "-i", &o->include_headers) ||
        take_flag(a, "--silent", "-s", &o->silent) ||
        take_flag(a, "--retry-unsafe", NULL, &o->retry_unsafe))
        return 1;
    return policy_opts_parse(&o->po, a);
}

/* A --config policy's DisableFor and RetryAfterHeaders, added to the
 * command line's (whose header names come first). */
static void take_config_http(http_opts *o)
{
    unsigned bits;
    if (o->po.disable_for[0] != '\0' && resil_http_methods_parse(o->po.disable_for, &bits) == 0)
        o->disable_for |= bits;
    for (size_t i = 0; i < o->po.nhint_headers && o->nhint < MAX_HINT_HEADERS; i++)
        o->hint_headers[o->nhint++] = o->po.hint_headers[i];
}

/* The profile's numbers as the policy options' starting point, so that an
 * explicit --attempts or --delay wins wherever it stands on the line. */
static int apply_profile_first(http_opts *o, int argc, char **argv)
{
    args a;
    args_init(&a, "resil http", argc, argv);
    for (; a.i < argc; a.i++) {
        const char *v;
        int m = args_match(&a, "--profile", NULL, &v);
        if (m < 0)
            return m;
        if (m > 0 && parse_profile(o, &a, v) != 0)
            return RESIL_EINVAL;
    }
    resil_http_opts h;
    resil_http_opts_default(&h);
    resil_http_opts_profile(&h, o->profile);
    o->po.policy = h.retry;
    o->po.policy.max_total = h.total_timeout;
    o->po.attempt_timeout = h.attempt_timeout;
    return 0;
}

static void free_options(http_opts *o)
{
    curl_slist_free_all(o->headers);
    free(o->data);
    o->headers = NULL;
    o->data = NULL;
}

/* 0 to run, 1 when --help was printed, or RESIL_EINVAL. */
static int parse_options(http_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    policy_opts_default(&o->po);
    o->hedge = -1;
    o->log = LOG_TEXT;
    int rc = apply_profile_first(o, argc, argv);
    if (rc != 0)
        return rc;
    args a;
    args_init(&a, "resil http", argc, argv);
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (args_flag(&a, "--help", "-h")) {
            usage(stdout);
            return 1;
        }
        rc = parse_http_option(o, &a);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        if (arg[0] == '-' && arg[1] != '\0')
            return args_fail(&a, "unknown option '%s' (see resil http --help)", arg);
        if (o->nurls == MAX_URLS)
            return args_fail(&a, "at most %d URLs", MAX_URLS);
        o->urls[o->nurls++] = arg;
    }
    if (o->nurls == 0)
        return args_fail(&a, "no URL given: resil http [OPTIONS] URL...");
    if (o->silent)
        o->log = LOG_NONE;
    if (fleet_limits_need_fleet(&a, o->fleet, &o->limits) != 0)
        return RESIL_EINVAL;
    if (policy_opts_finish(&o->po, &a) != 0)
        return RESIL_EINVAL;
    take_config_http(o);
    return 0;
}

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

/* ---- --fleet: the per-authority breakers shared through Redis ------------------ */

typedef struct fleet {
#ifdef RESIL_CLI_REDIS
    resil_redis *client;
    resil_redis_factory factory;
    fleet_limits limits; /* --fleet-rate, --fleet-concurrency */
#endif
    resil_registry *registry;
} fleet;

#ifdef RESIL_CLI_REDIS
/* The fleet breaker of the authority, then one sync round so that it knows
 * the fleet's state before this short-lived process's first call: a breaker
 * another process opened refuses the call rather than learning of it a
 * sync interval later. Redis down: the round fails and the breaker counts
 * locally (its fallback) until Redis answers. */
static int fleet_breaker_for(const char *key, const resil_breaker_opts *o, resil_breaker **out,
                             resil_err *err, void *ud)
{
    fleet *f = ud;
    int rc = resil_redis_breaker_factory(key, o, out, err, &f->factory);
    if (rc == 0)
        (void)resil_redis_sync(f->client);
    return rc;
}

/* The registry for --fleet URL, with the client's breaker rules. Redis not
 * answering at start is not an error: the tool still works, each host's
 * breaker then counting in this process alone, and says so. */
static int fleet_open(fleet *f, const char *url, const fleet_limit_opts *limits,
                      const resil_http_opts *h)
{
    if (fleet_connect("http", url, RESIL_MS(500),
                      "each host's breaker counts in this process alone", &f->client) != 0)
        return RESIL_EINVAL;
    f->limits = (fleet_limits){.cmd = "http", .client = f->client, .opts = *limits};
    resil_err err;
    f->factory = (resil_redis_factory){.client = f->client};
    resil_registry_opts g;
    resil_registry_opts_default(&g);
    g.max_breakers = h->max_authorities;
    g.breaker = h->breaker;
    g.factory = fleet_breaker_for;
    g.factory_ud = f;
    if (resil_registry_new(&g, &f->registry, &err) != 0) {
        fprintf(stderr, "resil http: --fleet: %s\n", err.message);
        return RESIL_EINVAL;
    }
    return 0;
}

/* --fleet-rate, --fleet-concurrency: the host's permits before the call
 * (a rate permit waited for within the total timeout). 0, or the exit
 * status after saying why the request was not sent. */
static int fleet_enter(fleet *f, const http_opts *o, const char *url, resil_bulkhead_ticket *t)
{
    char authority[RESIL_BREAKER_NAME_MAX];
    memset(t, 0, sizeof *t);
    if (o->limits.rate == 0 && o->limits.concurrency == 0)
        return 0;
    if (resil_http_authority(url, authority, sizeof authority) != 0)
        return 0; /* libcurl reports the URL */
    fleet_limit *one = fleet_limit_get(&f->limits, authority);
    if (one == NULL)
        return RESIL_EXIT_USAGE;
    const char *why = NULL;
    resil_duration wait = 0;
    resil_duration total = o->po.policy.max_total; /* 0: none, so no bound on the wait */
    int rc = fleet_limit_enter(one, total > 0 ? total : RESIL_DURATION_MAX, &cancel_token, t,
                               &why, &wait);
    if (rc == 0 || rc == RESIL_ECANCELED)
        return 0; /* cancelled: the call reports it */
    if (!o->silent) {
        char hint[32] = "";
        if (wait > 0) /* in whole seconds, rounded up, as Retry-After would say */
            resil_duration_format((wait + RESIL_S(1) - 1) / RESIL_S(1) * RESIL_S(1), hint,
                                  sizeof hint);
        fprintf(stderr, "resil http: %s: refused by the %s%s%s (not attempted)\n", url, why,
                wait > 0 ? "; next permit in " : "", hint);
    }
    return EXIT_COULDNT_CONNECT;
}
#endif

/* After the client: flush this process's counts while its breakers still
 * exist, so the next process sees the failures this one saw. */
static void fleet_close(fleet *f)
{
#ifdef RESIL_CLI_REDIS
    if (f->client != NULL)
        (void)resil_redis_sync(f->client); /* before the breakers go */
#endif
    resil_registry_free(f->registry);
#ifdef RESIL_CLI_REDIS
    fleet_limits_free(&f->limits);
    resil_redis_free(f->client);
#endif
}

/* ---- the run ----------------------------------------------------------------- */

/* --hedge-to: one ordered group per URL, one hedge each, after the
 * request's own URL for the primary (the route routes every attempt; the
 * client reads it at each call, so perform_url's URL is set just before). */
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

static int build_client(http_opts *o, run_state *rs, fleet *f, resil_http_client **out)
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
    if (o->breaker_failures > 0) {
        h.breaker.kind = RESIL_BREAKER_BOTH;
        h.breaker.failure_threshold = o->breaker_failures;
    }
    h.listener = on_event;
    h.listener_ud = rs;
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

static const char *method_of(const http_opts *o)
{
    return o->method != NULL ? o->method : o->data != NULL ? "POST" : "GET";
}

static void configure(CURL *e, const http_opts *o, const char *url)
{
    const char *m = method_of(o);
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

static int perform_once(resil_http_client *c, CURL *e, http_opts *o, run_state *rs,
                        FILE *out, const char *url)
{
    curl_easy_reset(e);
    configure(e, o, url);
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = method_of(o);
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

/* One URL, inside the fleet limits' permits when there are any. */
static int perform_url(resil_http_client *c, CURL *e, http_opts *o, run_state *rs, fleet *f,
                       FILE *out, const char *url)
{
#ifdef RESIL_CLI_REDIS
    resil_bulkhead_ticket permit;
    int refused = fleet_enter(f, o, url, &permit);
    if (refused != 0)
        return refused;
    int status = perform_once(c, e, o, rs, out, url);
    fleet_limit_leave(&permit);
    return status;
#else
    (void)f;
    return perform_once(c, e, o, rs, out, url);
#endif
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
        o->hedge_to[0].url = o->urls[i];
        int s = perform_url(c, e, o, &rs, &f, out, o->urls[i]);
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
    int rc = parse_options(&o, argc, argv);
    if (rc != 0) {
        free_options(&o);
        return rc > 0 ? 0 : RESIL_EXIT_USAGE;
    }
    if (watch_signals() != 0) {
        perror("resil http: watching signals");
        free_options(&o);
        return RESIL_EXIT_USAGE;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int status = execute(&o);
    free_options(&o);
    curl_global_cleanup();
    unwatch_signals();
    return status;
}
