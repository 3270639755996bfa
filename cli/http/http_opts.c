/*
 * http_opts.c — `resil http`'s options: the help text, one parser per
 * value, and the walk over the command line.
 *
 * The profile is read first, wherever it stands, so that its numbers are
 * the starting point every explicit option then overrides. Values are
 * rejected by the option's name through args.c, as in every subcommand.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http_opts.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

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
          "      --profile NAME         standard, read or write (default standard):\n"
          "                             read: total 2s, attempt 600ms, 3 attempts from\n"
          "                             100ms; write: total 6s, attempt 2s, unsafe\n"
          "                             methods never retried, a stricter breaker\n"
          "      --retry-after honor|ignore\n"
          "                             wait as the server's Retry-After says (default\n"
          "                             honor)\n"
          "      --retry-after-max DUR  cap on a Retry-After wait (default 60s)\n"
          "      --idempotency-key auto|none|KEY\n"
          "                             send an Idempotency-Key: a new UUID for each\n"
          "                             URL, or KEY; the same on every attempt (default\n"
          "                             none). POST and PATCH are retried only with one.\n"
          "      --retry-unsafe         retry POST and PATCH even without a key\n"
          "      --hedge DUR            for GET and HEAD: start a second request when\n"
          "                             the first has not answered after DUR\n"
          "      --breaker-failures N   open a host's breaker after N failures in a\n"
          "                             row (default: the profile's ratio rule only)\n"
#ifdef RESIL_CLI_REDIS
          "      --fleet redis://HOST[:PORT][/DB]\n"
          "                             share each host's breaker through Redis with\n"
          "                             every process given the same URL; when Redis\n"
          "                             does not answer, each process counts alone\n"
#endif
          "      --log text|json|none   the attempt record, on standard error (default\n"
          "                             text); json adds each attempt's status\n"
          "  -h, --help                 this text\n"
          "\n"
          "exit status (as curl's with --fail):\n"
          "  0    the last response was 2xx or 3xx\n"
          "  6    the host name could not be resolved\n"
          "  7    no connection could be made (or the host's breaker is open)\n"
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
        return args_reject(a, "--profile", "one of standard, read, write", v);
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
    TRY("--idempotency-key", NULL, parse_key(o, a, v))
    TRY("--hedge", NULL, args_duration(a, "--hedge", v, false, &o->hedge))
    TRY("--breaker-failures", NULL, parse_breaker_failures(o, a, v))
    TRY("--log", NULL, parse_log(o, a, v))
#ifdef RESIL_CLI_REDIS
    TRY("--fleet", NULL, fleet_url_parse(a, v, &o->fleet))
#endif
#undef TRY
    if (take_flag(a, "--include", "-i", &o->include_headers) ||
        take_flag(a, "--silent", "-s", &o->silent) ||
        take_flag(a, "--retry-unsafe", NULL, &o->retry_unsafe))
        return 1;
    return policy_opts_parse(&o->po, a);
}

/* The profile's numbers as the policy options' starting point, so that an
 * explicit --attempts or --delay wins wherever it stands on the line. */
static int apply_profile_first(http_opts *o, int argc, char **argv, resil_err *err)
{
    args a;
    args_init(&a, "resil http", argc, argv);
    a.err = err;
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

void http_opts_free(http_opts *o)
{
    curl_slist_free_all(o->headers);
    free(o->data);
    o->headers = NULL;
    o->data = NULL;
}

/* 0 to run, 1 when --help was printed, or RESIL_EINVAL. */
int http_opts_parse(http_opts *o, int argc, char **argv, resil_err *err)
{
    memset(o, 0, sizeof *o);
    policy_opts_default(&o->po);
    o->hedge = -1;
    o->log = LOG_TEXT;
    int rc = apply_profile_first(o, argc, argv, err);
    if (rc != 0)
        return rc;
    args a;
    args_init(&a, "resil http", argc, argv);
    a.err = err;
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (args_flag(&a, "--help", "-h")) {
            if (err == NULL)
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
    return policy_opts_finish(&o->po, &a);
}

const char *http_opts_method(const http_opts *o)
{
    return o->method != NULL ? o->method : o->data != NULL ? "POST" : "GET";
}
