/*
 * http_opts.c — `resil http`'s options: the help text, resil's own option
 * rows, and the walk over the command line.
 *
 * The profile is read first, wherever it stands, so that its numbers are
 * the starting point every explicit option then overrides. Short options
 * bundle as in curl ("-sSfL", "-XPOST", "-ofile"): the bundles are split
 * first, from the tables, so the walk sees one option per word. Values are
 * rejected by the option's name through args.c, as in every subcommand.
 *
 * The tool's own defaults differ from the library's standard profile in
 * one way: no attempt or total timeout unless asked, so a download may
 * take as long as it keeps moving. A transfer that receives nothing for
 * --stall-timeout, or cannot connect within --connect-timeout, still fails
 * (and is retried). Naming a profile (--profile) brings its timeouts.
 */
#include <stdlib.h>
#include <string.h>

#include "http_opts.h"
#include "route_internal.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

#define DEFAULT_CONNECT_TIMEOUT RESIL_S(10)
#define DEFAULT_STALL_TIMEOUT RESIL_S(30)

static void usage(FILE *out, const policy_opts *defaults)
{
    fputs("usage: resil http [OPTIONS] URL...\n"
          "\n"
          "Fetch each URL with libcurl through a resilience pipeline: retries with\n"
          "backoff and Retry-After, attempt and total timeouts, a circuit breaker per\n"
          "host, idempotency keys for unsafe methods, hedged GETs. curl's options\n"
          "mean what they mean in curl (docs/cli.md: coming from curl).\n"
          "\n"
          "request (as curl):\n"
          "  -X, --request METHOD       the method (default GET; POST with a body,\n"
          "                             PUT with -T); --method is the same\n"
          "  -H, --header 'NAME: VALUE' add a header (repeatable; 'NAME:' removes one)\n"
          "  -d, --data DATA|@FILE      send DATA (POST); @FILE without its CR and LF\n"
          "                             (--data-ascii is the same)\n"
          "      --data-binary DATA|@FILE   the same, FILE as it is\n"
          "      --data-raw DATA        the same, '@' not special\n"
          "      --data-urlencode [NAME=]CONTENT|[NAME]@FILE  URL-encoded\n"
          "      --json DATA|@FILE      a JSON body with its Content-Type and Accept\n"
          "  -G, --get                  put the data in the URL's query, send GET\n"
          "  -F, --form NAME=VALUE|NAME=@FILE|NAME=<FILE   a multipart form part\n"
          "  -T, --upload-file FILE     PUT FILE ('-': standard input)\n"
          "  -I, --head                 HEAD; write the response headers\n"
          "  -u, --user USER:PASSWORD   basic authentication\n"
          "  -A, --user-agent TEXT      (default resil/" RESIL_VERSION_STRING ")\n"
          "  -e, --referer URL          -b, --cookie DATA|FILE   -c, --cookie-jar FILE\n"
          "  -L, --location             follow redirects (--max-redirs N, default 50)\n"
          "  -k, --insecure             --cacert FILE  -E, --cert FILE  --key FILE\n"
          "  -x, --proxy URL            --resolve HOST:PORT:ADDR  --compressed\n"
          "      --url URL              one more URL\n"
          "\n"
          "output (as curl):\n"
          "  -o, --output FILE          write the next URL's body to FILE\n"
          "  -O, --remote-name          ... to a file named as the URL's last segment\n"
          "  -i, --include              write the response headers before the body\n"
          "  -D, --dump-header FILE     write the response headers to FILE\n"
          "  -w, --write-out FORMAT|@FILE   after each URL: curl's %{variables} and\n"
          "                             resil's %{attempts}, %{stop_reason},\n"
          "                             %{time_elapsed}, %{idempotency_key}\n"
          "  -f, --fail                 the default: a status of 400 or above exits\n"
          "                             22 and its body is not written\n"
          "      --fail-with-body       ... but write the body\n"
          "  -s, --silent               no attempt record and no error message\n"
          "  -S, --show-error           with -s: the error message all the same\n"
          "  -v, --verbose              libcurl's account of each attempt\n"
          "      --output-dir DIR       put the -o and -O files in DIR\n"
          "\n"
          "transfers (as curl):\n"
          "  -Z, --parallel             run the URLs at once on one thread, each with\n"
          "                             its own retries and the hosts' breakers; the\n"
          "                             text record names each line's URL\n"
          "      --parallel-max N       at most N at once (1 to 300, default 50)\n"
          "      --parallel-immediate   (the default: connections open at once rather\n"
          "                             than wait to share one)\n"
          "\n"
          "timeouts:\n"
          "      --connect-timeout SECS connect within this (default 10s)\n"
          "  -m, --max-time SECS        bound each attempt (--attempt-timeout)\n"
          "      --stall-timeout DUR    fail an attempt that receives nothing for DUR\n"
          "                             (default 30s); 'none' or 0 switches it off\n"
          "SECS is curl's seconds (5, 2.5) or a duration (250ms); 'none' or 0: off.\n"
          "Without --profile there is no attempt or total timeout, so a download may\n"
          "take as long as it keeps moving.\n"
          "\n",
          out);
    policy_opts_usage(out, defaults);
    fputs("curl's retry flags, onto the policy:\n"
          "      --retry N              N retries: --attempts N+1\n"
          "      --retry-delay SECS     a constant wait without jitter\n"
          "      --retry-max-time SECS  --total-timeout SECS\n"
          "      --retry-all-errors     retry any failure, 4xx included\n"
          "      --retry-connrefused    (the default)\n"
          "\n"
          "resilience:\n"
          "      --profile NAME         standard, microsoft-standard, microsoft-hedging,\n"
          "                             read or write (default: standard's retries,\n"
          "                             no attempt or total timeout). standard: total\n"
          "                             30s, attempt 10s, Microsoft's handler's\n"
          "                             strategies and numbers with resil's safer\n"
          "                             rules (408, 429, 500, 502-504 and path\n"
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
          "                             timeout (30s without one), else is refused\n"
          "                             (exit 7)\n"
          "      --fleet-concurrency N[:LEASE]\n"
          "                             with --fleet: at most N requests at once to each\n"
          "                             host across every process (else refused, exit\n"
          "                             7); a killed process's permit returns after\n"
          "                             LEASE (default 5s)\n"
          "      --fleet-timeout DUR    with --fleet: how long one Redis call may take\n"
          "                             (1ms to 10s, default 500ms) before the process\n"
          "                             counts alone until Redis answers again\n"
#endif
          "      --log text|json|none   the attempt record, on standard error (default\n"
          "                             text), each line timed (UTC) and marked\n"
          "                             'resil:'; json adds each attempt's status,\n"
          "                             \"time\" and \"url\"\n"
          "      --log-file FILE        append the attempt record to FILE instead\n"
          "      --heartbeat DUR|none   during a longer wait, a line every DUR\n"
          "                             (default: 10s on a terminal, else none)\n"
          "      --traceparent VALUE    continue this W3C trace: each attempt sends\n"
          "                             its own span id under the given trace id\n"
          "\n",
          out);
    fputs(telemetry_out_help, out);
    fputs("\n", out);
    fputs(chaos_opts_help, out);
    fputs("\n"
          "  -h, --help                 this text\n"
          "\n"
          "exit status (as curl's with --fail):\n"
          "  0    the last response was 2xx or 3xx\n"
          "  6    the host name could not be resolved\n"
          "  7    no connection could be made (or the host's breaker is open, or a\n"
          "       fleet limit refused the request)\n"
          "  22   the last response was 400 or above\n"
          "  23   an output could not be written\n"
          "  28   a timeout ended the request\n"
          "  125  resil's own error, such as a bad option value\n"
          "  129/130/143  cancelled by SIGHUP/SIGINT/SIGTERM\n"
          "  N    libcurl's error code N for any other transfer failure\n"
          "With several URLs, as curl's: the last URL's status (with -Z, that of the\n"
          "last transfer to fail, in the order the transfers ended).\n",
          out);
}

/* ---- resil's own options ------------------------------------------------------ */

static int parse_header(http_opts *o, const args *a, const char *v)
{
    size_t name = strcspn(v, ":;");
    if (!args_token(v, name) || v[name] == '\0' || (v[name] == ';' && v[name + 1] != '\0') ||
        strpbrk(v, "\r\n") != NULL)
        return args_reject(a, "--header", "'NAME: VALUE', 'NAME:' or 'NAME;' with NAME a header name", v);
    struct curl_slist *h = curl_slist_append(o->headers, v);
    if (h == NULL)
        return args_fail(a, "out of memory");
    o->headers = h;
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

static int parse_retry_after_max(http_opts *o, const args *a, const char *v)
{
    o->retry_after_max_given = true;
    return args_duration(a, "--retry-after-max", v, false, &o->retry_after_max);
}

static int parse_profile(http_opts *o, const args *a, const char *v)
{
    if (resil_http_profile_parse(v, &o->profile) != 0)
        return args_reject(a, "--profile",
                           "one of standard, microsoft-standard, microsoft-hedging, read, write",
                           v);
    o->profile_given = true;
    return 0;
}

static int parse_hedge(http_opts *o, const args *a, const char *v)
{
    return args_duration(a, "--hedge", v, false, &o->hedge);
}

static int parse_hint_header(http_opts *o, const args *a, const char *v)
{
    if (o->nhint == MAX_HINT_HEADERS)
        return args_fail(a, "--retry-after-header: at most %d names; '%s' is one too many",
                         MAX_HINT_HEADERS, v);
    if (!args_token(v, strlen(v)))
        return args_reject(a, "--retry-after-header",
                           "a header name (letters, digits and !#$%&'*+-.^_`|~)", v);
    o->hint_headers[o->nhint++] = v;
    return 0;
}

/* The endpoint is checked as the client will check it when it is made
 * (libcurl reads a host from it, and its authority fits a breaker's name),
 * so that the refusal names this option. */
static int parse_hedge_to(http_opts *o, const args *a, const char *v)
{
    if (o->nhedge_to == RESIL_HEDGE_MAX)
        return args_fail(a, "--hedge-to: at most %d endpoints; '%s' is one too many",
                         RESIL_HEDGE_MAX, v);
    if (!resil__http_route_endpoint_ok(v))
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

static int parse_stall(http_opts *o, const args *a, const char *v)
{
    return args_timeout(a, "--stall-timeout", v, &o->stall_timeout);
}

static int parse_breaker_failures(http_opts *o, const args *a, const char *v)
{
    uint64_t n;
    if (args_uint64(a, "--breaker-failures", v, 1, UINT32_MAX, &n) != 0)
        return RESIL_EINVAL;
    o->breaker_failures = (uint32_t)n;
    return 0;
}

static int parse_log(http_opts *o, const args *a, const char *v)
{
    if (attempt_log_format_parse(v, &o->log) != 0)
        return args_reject(a, "--log", "one of text, json, none", v);
    return 0;
}

static int parse_heartbeat(http_opts *o, const args *a, const char *v)
{
    return args_timeout(a, "--heartbeat", v, &o->heartbeat);
}

static int parse_chaos_fail(http_opts *o, const args *a, const char *v)
{
    return chaos_opts_fail(&o->chaos, a, v);
}

static int parse_chaos_latency(http_opts *o, const args *a, const char *v)
{
    return chaos_opts_latency(&o->chaos, a, v);
}

static int parse_chaos_seed(http_opts *o, const args *a, const char *v)
{
    return chaos_opts_seed(&o->chaos, a, v);
}

static int parse_log_file(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--log-file", "a file name", v, &o->log_file);
}

static int parse_traceparent(http_opts *o, const args *a, const char *v)
{
    if (resil_traceparent_parse(v, strlen(v), &o->trace, NULL) != 0)
        return args_reject(a, "--traceparent", "a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)",
                           v);
    o->trace_given = true;
    return 0;
}

static int parse_metrics(http_opts *o, const args *a, const char *v)
{
    return telemetry_out_metrics(&o->tel, a, v);
}

static int parse_otlp(http_opts *o, const args *a, const char *v)
{
    return telemetry_out_otlp(&o->tel, a, v);
}

#ifdef RESIL_CLI_REDIS
static int parse_fleet(http_opts *o, const args *a, const char *v)
{
    return fleet_url_parse(a, v, &o->fleet);
}

static int parse_fleet_rate(http_opts *o, const args *a, const char *v)
{
    return fleet_rate_parse(a, v, &o->limits);
}

static int parse_fleet_concurrency(http_opts *o, const args *a, const char *v)
{
    return fleet_concurrency_parse(a, v, &o->limits);
}

static int parse_fleet_timeout(http_opts *o, const args *a, const char *v)
{
    return fleet_timeout_parse(a, v, &o->fleet_timeout);
}
#endif

HTTP_FLAG(flag_include, include_headers)
HTTP_FLAG(flag_silent, silent)
HTTP_FLAG(flag_retry_unsafe, retry_unsafe)

static const http_option resil_options[] = {
    {"--header", "-H", true, parse_header},
    {"--profile", NULL, true, parse_profile},
    {"--retry-after", NULL, true, parse_retry_after},
    {"--retry-after-max", NULL, true, parse_retry_after_max},
    {"--retry-after-header", NULL, true, parse_hint_header},
    {"--disable-for", NULL, true, parse_disable_for},
    {"--hedge-to", NULL, true, parse_hedge_to},
    {"--idempotency-key", NULL, true, parse_key},
    {"--hedge", NULL, true, parse_hedge},
    {"--stall-timeout", NULL, true, parse_stall},
    {"--breaker-failures", NULL, true, parse_breaker_failures},
    {"--log", NULL, true, parse_log},
    {"--log-file", NULL, true, parse_log_file},
    {"--heartbeat", NULL, true, parse_heartbeat},
    {"--traceparent", NULL, true, parse_traceparent},
    {"--metrics", NULL, true, parse_metrics},
    {"--otlp", NULL, true, parse_otlp},
    {"--chaos-fail", NULL, true, parse_chaos_fail},
    {"--chaos-latency", NULL, true, parse_chaos_latency},
    {"--chaos-seed", NULL, true, parse_chaos_seed},
#ifdef RESIL_CLI_REDIS
    {"--fleet", NULL, true, parse_fleet},
    {"--fleet-rate", NULL, true, parse_fleet_rate},
    {"--fleet-concurrency", NULL, true, parse_fleet_concurrency},
    {"--fleet-timeout", NULL, true, parse_fleet_timeout},
#endif
    {"--include", "-i", false, flag_include},
    {"--silent", "-s", false, flag_silent},
    {"--retry-unsafe", NULL, false, flag_retry_unsafe},
};

/* ---- the tables ----------------------------------------------------------------- */

typedef struct table {
    const http_option *rows;
    size_t len;
} table;

static table tables(int i)
{
    if (i == 0)
        return (table){resil_options, sizeof resil_options / sizeof resil_options[0]};
    return (table){http_curl_options, http_curl_options_len};
}

const http_option *http_options_table(int t, size_t *len)
{
    if (t < 0 || t > 1) {
        *len = 0;
        return NULL;
    }
    table tb = tables(t);
    *len = tb.len;
    return tb.rows;
}

/* The row whose short name is "-c", or NULL. */
static const http_option *short_row(char c)
{
    for (int t = 0; t < 2; t++) {
        table tb = tables(t);
        for (size_t i = 0; i < tb.len; i++) {
            const char *s = tb.rows[i].short_name;
            if (s != NULL && s[1] == c)
                return &tb.rows[i];
        }
    }
    return NULL;
}

/* Policy options' short names, which policy_opts.c reads itself. */
static bool policy_short_takes_value(char c)
{
    return c == 'a';
}

static bool short_known(char c)
{
    return short_row(c) != NULL || policy_short_takes_value(c) || c == 'h';
}

static bool short_takes_value(char c)
{
    const http_option *r = short_row(c);
    return r != NULL ? r->value : policy_short_takes_value(c);
}

/* "-sSo" "file" → "-s" "-S" "-o" "file"; "-XPOST" → "-X" "POST". A word
 * with an unknown letter is left whole for the walk to refuse. */
static int split_word(const char *arg, char **out, int *n)
{
    bool bundle = arg[0] == '-' && arg[1] != '-' && arg[1] != '\0' && arg[2] != '\0' &&
                  short_known(arg[1]);
    if (!bundle)
        return (out[(*n)++] = strdup(arg)) != NULL ? 0 : RESIL_ENOMEM;
    for (const char *p = arg + 1; *p != '\0' && !short_takes_value(p[-1]); p++) {
        if (!short_known(*p)) /* "-sq": refused whole by the walk */
            return (out[(*n)++] = strdup(arg)) != NULL ? 0 : RESIL_ENOMEM;
    }
    for (const char *p = arg + 1; *p != '\0'; p++) {
        char flag[3] = {'-', *p, '\0'};
        if ((out[(*n)++] = strdup(flag)) == NULL)
            return RESIL_ENOMEM;
        if (short_takes_value(*p) && p[1] != '\0')
            return (out[(*n)++] = strdup(p + 1)) != NULL ? 0 : RESIL_ENOMEM;
    }
    return 0;
}

void http_split_free(char **argv)
{
    if (argv == NULL)
        return;
    for (char **p = argv; *p != NULL; p++)
        free(*p);
    free(argv);
}

/* Does the word `w` (an option without "=VALUE") take the next word as
 * its value? */
static bool takes_next(const char *w)
{
    static const char *const policy_valued[] = {
        "--attempts", "--backoff", "--delay", "--delays", "--max-delay", "--factor", "--jitter",
        "--seed", "--attempt-timeout", "--total-timeout", "--config", "--policy"};
    if (w[0] != '-' || w[1] == '\0' || strchr(w, '=') != NULL)
        return false;
    if (w[1] != '-')
        return w[2] == '\0' && short_takes_value(w[1]);
    for (int t = 0; t < 2; t++) {
        table tb = tables(t);
        for (size_t i = 0; i < tb.len; i++) {
            if (strcmp(tb.rows[i].long_name, w) == 0)
                return tb.rows[i].value;
        }
    }
    for (size_t i = 0; i < sizeof policy_valued / sizeof policy_valued[0]; i++) {
        if (strcmp(policy_valued[i], w) == 0)
            return true;
    }
    return false;
}

int http_split_short(const args *a, int argc, char **argv, char ***out, int *out_argc)
{
    size_t cap = 1;
    for (int i = 0; i < argc; i++)
        cap += strlen(argv[i]) + 1; /* a word splits into at most its length */
    char **v = calloc(cap, sizeof *v);
    if (v == NULL)
        return args_fail(a, "out of memory");
    int n = 0;
    bool verbatim = true; /* argv[0], a value, or anything after "--" */
    bool after_dashes = false;
    for (int i = 0; i < argc; i++) {
        int rc = verbatim || after_dashes
                     ? ((v[n++] = strdup(argv[i])) != NULL ? 0 : RESIL_ENOMEM)
                     : split_word(argv[i], v, &n);
        if (rc != 0) {
            http_split_free(v);
            return args_fail(a, "out of memory");
        }
        after_dashes = after_dashes || (!verbatim && strcmp(argv[i], "--") == 0);
        verbatim = !verbatim && takes_next(v[n - 1]);
    }
    *out = v;
    *out_argc = n;
    return 0;
}

/* ---- the walk --------------------------------------------------------------------- */

/* One option of ours at a->i: 1 consumed, 0 unknown, <0 bad value. */
static int parse_http_option(http_opts *o, args *a)
{
    for (int t = 0; t < 2; t++) {
        table tb = tables(t);
        for (size_t i = 0; i < tb.len; i++) {
            const http_option *r = &tb.rows[i];
            const char *v = NULL;
            if (!r->value) {
                if (!args_flag(a, r->long_name, r->short_name))
                    continue;
                return r->fn(o, a, NULL) < 0 ? RESIL_EINVAL : 1;
            }
            int m = args_match(a, r->long_name, r->short_name, &v);
            if (m == 0)
                continue;
            if (m < 0)
                return m;
            return r->fn(o, a, v) < 0 ? RESIL_EINVAL : 1;
        }
    }
    return policy_opts_parse(&o->po, a);
}

/* The defaults under the profile, before any option: the profile's numbers
 * when one is named, else the standard profile's retries without its
 * attempt and total timeouts. */
static void set_defaults(http_opts *o)
{
    resil_http_opts h;
    resil_http_opts_default(&h);
    resil_http_opts_profile(&h, o->profile);
    o->po.policy = h.retry;
    o->po.policy.max_total = o->profile_given ? h.total_timeout : 0;
    o->po.attempt_timeout = o->profile_given ? h.attempt_timeout : 0;
}

/* The profile first, wherever it stands, so that an explicit --attempts or
 * --delay wins wherever it stands on the line. */
static int apply_profile_first(http_opts *o, int argc, char **argv, resil_err *err)
{
    args a;
    args_init(&a, "resil http", argc, argv);
    a.err = err;
    for (; a.i < argc; a.i++) {
        const char *v;
        if (strcmp(argv[a.i], "--") == 0)
            break;
        int m = args_match(&a, "--profile", NULL, &v);
        if (m < 0)
            return m;
        if (m > 0 && parse_profile(o, &a, v) != 0)
            return RESIL_EINVAL;
        if (m == 0 && takes_next(argv[a.i]))
            a.i++;
    }
    set_defaults(o);
    return 0;
}

void http_opts_free(http_opts *o)
{
    curl_slist_free_all(o->headers);
    curl_slist_free_all(o->resolve);
    free(o->data);
    free(o->upload);
    write_out_free(o->write_out);
    http_split_free(o->argv_owned);
    o->headers = NULL;
    o->resolve = NULL;
    o->data = NULL;
    o->upload = NULL;
    o->write_out = NULL;
    o->argv_owned = NULL;
}

/* Options that cannot go together, as curl refuses them. */
static int check_combinations(const http_opts *o, const args *a)
{
    int bodies = (o->data != NULL) + (o->nforms > 0) + (o->upload != NULL) + o->head;
    if (bodies > 1 && !(o->get && o->data != NULL && bodies == 2 && o->head))
        return args_fail(a, "choose one of -d/--data*/--json, -F, -T and -I");
    if (o->get && (o->nforms > 0 || o->upload != NULL))
        return args_fail(a, "-G puts -d's data in the query; it does not take -F or -T");
    if (o->noutputs > o->nurls)
        return args_fail(a, "more -o/-O than URLs (each names the output of one URL, "
                            "in order)");
    /* With --hedge-to a URL is the hedge route's first endpoint, held to
     * the same rule as the option's values, and refused by that rule here
     * rather than under the client's field name when it is made. */
    for (int i = 0; o->nhedge_to > 0 && i < o->nurls; i++) {
        if (!resil__http_route_endpoint_ok(o->urls[i]))
            return args_fail(a, "with --hedge-to, each URL must be one such as "
                                "https://api.example.com, got '%s'",
                             o->urls[i]);
    }
    return 0;
}

static void set_blank(http_opts *o)
{
    memset(o, 0, sizeof *o);
    policy_opts_default(&o->po);
    o->hedge = -1;
    o->log = LOG_TEXT;
    o->max_redirs = 50;
    o->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
    o->stall_timeout = DEFAULT_STALL_TIMEOUT;
    o->heartbeat = -1;
    o->parallel_max = HTTP_PARALLEL_DEFAULT;
    chaos_opts_default(&o->chaos);
}

/* A --config policy's DisableFor and RetryAfterHeaders, added to the
 * command line's (whose header names come first); together they are held
 * to --retry-after-header's limit, so that none is dropped unsaid. */
static int take_config_http(http_opts *o, const args *a)
{
    unsigned bits;
    if ((size_t)o->nhint + o->po.nhint_headers > MAX_HINT_HEADERS)
        return args_fail(a, "--retry-after-header: at most %d names with --policy %s's "
                            "RetryAfterHeaders, got %zu",
                         MAX_HINT_HEADERS, o->po.policy_name,
                         (size_t)o->nhint + o->po.nhint_headers);
    if (o->po.disable_for[0] != '\0' && resil_http_methods_parse(o->po.disable_for, &bits) == 0)
        o->disable_for |= bits;
    for (size_t i = 0; i < o->po.nhint_headers; i++)
        o->hint_headers[o->nhint++] = o->po.hint_headers[i];
    return 0;
}

/* 0 to run, 1 when --help was printed, or RESIL_EINVAL. */
static int walk(http_opts *o, int argc, char **argv, resil_err *err)
{
    args a;
    args_init(&a, "resil http", argc, argv);
    a.err = err;
    bool after_dashes = false;
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (!after_dashes && strcmp(arg, "--") == 0) {
            after_dashes = true;
            continue;
        }
        if (!after_dashes && args_flag(&a, "--help", "-h")) {
            if (err == NULL)
                usage(stdout, &o->po);
            return 1;
        }
        int rc = after_dashes ? 0 : parse_http_option(o, &a);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        if (!after_dashes && arg[0] == '-' && arg[1] != '\0')
            return args_fail(&a, "unknown option '%s' (see resil http --help)", arg);
        if (o->nurls == MAX_URLS)
            return args_fail(&a, "at most %d URLs; '%s' is one too many", MAX_URLS, arg);
        o->urls[o->nurls++] = arg;
    }
    if (o->nurls == 0)
        return args_fail(&a, "no URL given: resil http [OPTIONS] URL...");
    if (check_combinations(o, &a) != 0 || fleet_limits_need_fleet(&a, o->fleet, &o->limits) != 0 ||
        fleet_timeout_needs_fleet(&a, o->fleet, o->fleet_timeout) != 0)
        return RESIL_EINVAL;
    if (o->silent)
        o->log = LOG_NONE;
    if (policy_opts_finish(&o->po, &a) != 0 || take_config_http(o, &a) != 0)
        return RESIL_EINVAL;
    return 0;
}

int http_opts_parse(http_opts *o, int argc, char **argv, resil_err *err)
{
    set_blank(o);
    args a;
    args_init(&a, "resil http", argc, argv);
    a.err = err;
    int n;
    if (http_split_short(&a, argc, argv, &o->argv_owned, &n) != 0)
        return RESIL_EINVAL;
    int rc = apply_profile_first(o, n, o->argv_owned, err);
    if (rc != 0)
        return rc;
    return walk(o, n, o->argv_owned, err);
}

const char *http_opts_method(const http_opts *o)
{
    if (o->method != NULL)
        return o->method;
    if (o->head)
        return "HEAD";
    if (o->upload != NULL)
        return "PUT";
    if (o->get)
        return "GET";
    return o->data != NULL || o->nforms > 0 ? "POST" : "GET";
}

void http_opts_help(FILE *out)
{
    http_opts o;
    set_blank(&o);
    set_defaults(&o);
    usage(out, &o.po);
}
