/*
 * curl_flags.c — curl's own flags, with curl's meaning, as rows of
 * `resil http`'s option table.
 *
 * Each flag sets what curl's would, so a script can swap `curl` for
 * `resil http`; only where curl and resil's policy disagree (retries) does
 * a flag map onto the nearest policy setting, and docs/cli.md says how.
 * Values are checked here, strictly, by the flag's name: curl silently
 * reads "--retry 3x" as 3, a production script should learn of the typo.
 * The body-building flags share curl's rules: pieces joined with '&'
 * (--json's without), -d @FILE dropping CR and LF, --data-urlencode's five
 * forms, -G moving the body into the query.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http_opts.h"

const char HTTP_REMOTE_NAME[] = "-O";

/* ---- reading files ------------------------------------------------------- */

/* FILE's contents ('-': standard input), NUL-terminated. */
static int read_file(const args *a, const char *option, const char *path, char **out,
                     size_t *len)
{
    bool std_in = strcmp(path, "-") == 0;
    FILE *in = std_in ? stdin : fopen(path, "rb");
    if (in == NULL)
        return args_fail(a, "%s: cannot open '%s': %s", option, path, strerror(errno));
    int rc = args_slurp(in, out, len);
    if (!std_in)
        fclose(in);
    if (rc != 0)
        return args_fail(a, "%s: cannot read '%s'", option, path);
    return 0;
}

/* ---- the request ---------------------------------------------------------- */

static int opt_request(http_opts *o, const args *a, const char *v)
{
    if (v[0] == '\0' || strpbrk(v, " \t\r\n") != NULL)
        return args_reject(a, "--request", "a method name such as GET or POST", v);
    o->method = v;
    return 0;
}

/* ---- the body --------------------------------------------------------------- */

/* Append a piece, '&' first when joined and a body is already there. */
static int add_piece(http_opts *o, const args *a, const char *p, size_t n, bool joined)
{
    bool amp = joined && o->data != NULL;
    char *grown = realloc(o->data, o->data_len + amp + n + 1);
    if (grown == NULL)
        return args_fail(a, "out of memory");
    o->data = grown;
    if (amp)
        o->data[o->data_len++] = '&';
    memcpy(o->data + o->data_len, p, n);
    o->data_len += n;
    o->data[o->data_len] = '\0';
    return 0;
}

/* A piece read from @FILE or taken as is. `strip` drops CR and LF (-d). */
static int data_piece(http_opts *o, const args *a, const char *option, const char *v,
                      bool at_file, bool strip, bool joined)
{
    if (!at_file || v[0] != '@')
        return add_piece(o, a, v, strlen(v), joined);
    char *buf;
    size_t n;
    if (read_file(a, option, v + 1, &buf, &n) != 0)
        return RESIL_EINVAL;
    size_t k = n;
    if (strip) {
        k = 0;
        for (size_t i = 0; i < n; i++) {
            if (buf[i] != '\r' && buf[i] != '\n')
                buf[k++] = buf[i];
        }
    }
    int rc = add_piece(o, a, buf, k, joined);
    free(buf);
    return rc;
}

static int opt_data(http_opts *o, const args *a, const char *v)
{
    return data_piece(o, a, "--data", v, true, true, true);
}

static int opt_data_binary(http_opts *o, const args *a, const char *v)
{
    return data_piece(o, a, "--data-binary", v, true, false, true);
}

static int opt_data_raw(http_opts *o, const args *a, const char *v)
{
    return data_piece(o, a, "--data-raw", v, false, false, true);
}

static int opt_json(http_opts *o, const args *a, const char *v)
{
    o->json = true;
    return data_piece(o, a, "--json", v, true, false, false);
}

static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

size_t http_urlencode(const char *s, size_t n, char *buf)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c)) {
            buf[k++] = (char)c;
        } else if (c == ' ') {
            buf[k++] = '+';
        } else {
            buf[k++] = '%';
            buf[k++] = hex[c >> 4];
            buf[k++] = hex[c & 15];
        }
    }
    buf[k] = '\0';
    return k;
}

/* NAME= (name_len bytes, 0 for none) then the encoding of the n bytes at p. */
static int encode_piece(const args *a, const char *name, size_t name_len, const char *p,
                        size_t n, char **out, size_t *len)
{
    if (n > (SIZE_MAX - name_len - 2) / 3)
        return args_fail(a, "--data-urlencode: too long");
    char *buf = malloc(name_len + 1 + 3 * n + 1);
    if (buf == NULL)
        return args_fail(a, "out of memory");
    size_t k = 0;
    if (name_len > 0) {
        memcpy(buf, name, name_len);
        buf[name_len] = '=';
        k = name_len + 1;
    }
    k += http_urlencode(p, n, buf + k);
    *out = buf;
    *len = k;
    return 0;
}

int http_urlencode_piece(const args *a, const char *text, char **out, size_t *len)
{
    size_t name_len = strcspn(text, "=@");
    const char *sep = text + name_len;
    if (*sep == '=' || *sep == '\0') {
        /* "content", "=content", "name=content" */
        const char *content = *sep == '=' ? sep + 1 : text;
        size_t keep = *sep == '=' ? name_len : 0;
        return encode_piece(a, text, keep, content, strlen(content), out, len);
    }
    char *file;
    size_t n;
    if (read_file(a, "--data-urlencode", sep + 1, &file, &n) != 0)
        return RESIL_EINVAL;
    int rc = encode_piece(a, text, name_len, file, n, out, len);
    free(file);
    return rc;
}

static int opt_data_urlencode(http_opts *o, const args *a, const char *v)
{
    char *piece;
    size_t n;
    if (http_urlencode_piece(a, v, &piece, &n) != 0)
        return RESIL_EINVAL;
    int rc = add_piece(o, a, piece, n, true);
    free(piece);
    return rc;
}

static int opt_upload(http_opts *o, const args *a, const char *v)
{
    free(o->upload);
    o->upload = NULL;
    if (v[0] == '\0')
        return args_reject(a, "--upload-file", "a file name ('-': standard input)", v);
    if (read_file(a, "--upload-file", v, &o->upload, &o->upload_len) != 0)
        return RESIL_EINVAL;
    const char *slash = strrchr(v, '/');
    o->upload_name = strcmp(v, "-") == 0 ? NULL : slash != NULL ? slash + 1 : v;
    return 0;
}

/* ---- -F ----------------------------------------------------------------------- */

int http_form_check(const args *a, const char *text)
{
    const char *eq = strchr(text, '=');
    const char *what = "NAME=VALUE, NAME=@FILE or NAME=<FILE";
    if (eq == NULL || eq == text)
        return args_reject(a, "--form", what, text);
    if ((eq[1] == '@' || eq[1] == '<') && (eq[2] == '\0' || eq[2] == ';'))
        return args_reject(a, "--form", what, text);
    return 0;
}

static int opt_form(http_opts *o, const args *a, const char *v)
{
    if (http_form_check(a, v) != 0)
        return RESIL_EINVAL;
    if (o->nforms == (int)(sizeof o->forms / sizeof o->forms[0]))
        return args_fail(a, "--form: at most %zu parts; '%s' is one too many",
                         sizeof o->forms / sizeof o->forms[0], v);
    o->forms[o->nforms++] = v;
    return 0;
}

/* ---- the connection ----------------------------------------------------------- */

static bool digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
    }
    return true;
}

/* One address of --resolve: an IPv4 or bracketed IPv6 literal, or a name. */
static bool resolve_address(const char *p, size_t n)
{
    if (n == 0)
        return false;
    if (p[0] == '[')
        return n > 2 && p[n - 1] == ']' && memchr(p + 1, '[', n - 2) == NULL &&
               memchr(p + 1, ']', n - 2) == NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= ' ' || c >= 0x7f || c == '[' || c == ']' || c == ':')
            return false;
    }
    return true;
}

/* HOST:PORT, then ':' ADDR[,ADDR]... unless `removal`. */
static bool resolve_entry(const char *t, bool removal)
{
    const char *colon = strchr(t, ':');
    if (colon == NULL || colon == t)
        return false;
    for (const char *p = t; p < colon; p++) {
        if ((unsigned char)*p <= ' ' || *p == '[' || *p == ']' || *p == ',')
            return false;
    }
    const char *port = colon + 1;
    size_t port_len = strcspn(port, ":");
    if (!digits(port, port_len) || port_len > 5 || atoi(port) > 65535)
        return false;
    const char *rest = port + port_len;
    if (removal)
        return *rest == '\0';
    if (*rest != ':')
        return false;
    for (const char *p = rest + 1;; ) {
        size_t n = strcspn(p, ",");
        if (!resolve_address(p, n))
            return false;
        if (p[n] == '\0')
            return true;
        p += n + 1;
    }
}

int http_resolve_parse(const args *a, const char *text, struct curl_slist **list)
{
    bool removal = text[0] == '-';
    const char *t = text[0] == '+' || removal ? text + 1 : text;
    if (!resolve_entry(t, removal))
        return args_reject(a, "--resolve", "HOST:PORT:ADDRESS[,ADDRESS]...", text);
    struct curl_slist *l = curl_slist_append(*list, text);
    if (l == NULL)
        return args_fail(a, "out of memory");
    *list = l;
    return 0;
}

static int opt_resolve(http_opts *o, const args *a, const char *v)
{
    return http_resolve_parse(a, v, &o->resolve);
}

/* "5", "2.5", ".5": seconds, at most 6 decimals, at most a year. */
static bool curl_seconds(const char *t, resil_duration *out)
{
    size_t whole = strspn(t, "0123456789");
    const char *frac = t + whole;
    size_t nfrac = 0;
    if (*frac == '.') {
        frac++;
        nfrac = strspn(frac, "0123456789");
    }
    if ((whole == 0 && nfrac == 0) || frac[nfrac] != '\0' || whole > 8 || nfrac > 6)
        return false;
    resil_duration s = 0, us = 0;
    for (size_t i = 0; i < whole; i++)
        s = s * 10 + (t[i] - '0');
    for (size_t i = 0; i < 6; i++)
        us = us * 10 + (i < nfrac ? frac[i] - '0' : 0);
    if (s > 366 * 86400)
        return false;
    *out = RESIL_S(s) + RESIL_US(us);
    return true;
}

int http_seconds_parse(const args *a, const char *option, const char *text,
                       resil_duration *out)
{
    if (curl_seconds(text, out))
        return 0;
    resil_err err;
    resil_duration d;
    if (strcmp(text, "none") == 0) {
        *out = 0;
        return 0;
    }
    if (resil_duration_parse_cstr(text, &d, &err) == 0 && d >= 0) {
        *out = d;
        return 0;
    }
    return args_reject(a, option, "seconds (such as 5 or 2.5), a duration such as 250ms, "
                                  "or 'none'", text);
}

static int opt_connect_timeout(http_opts *o, const args *a, const char *v)
{
    return http_seconds_parse(a, "--connect-timeout", v, &o->connect_timeout);
}

static int opt_max_time(http_opts *o, const args *a, const char *v)
{
    o->po.given |= POLICY_GIVEN_ATTEMPT_TIMEOUT;
    return http_seconds_parse(a, "--max-time", v, &o->po.attempt_timeout);
}

static int opt_user(http_opts *o, const args *a, const char *v)
{
    const char *colon = strchr(v, ':');
    if (colon == NULL || colon == v)
        return args_reject(a, "--user", "USER:PASSWORD (resil http does not prompt)", v);
    o->user = v;
    return 0;
}

/* A value sent as a header's: a line break would start a header of its own. */
static bool one_line(const char *v)
{
    return strpbrk(v, "\r\n") == NULL;
}

/* Data when it holds '=', else a file's name (which may hold any byte). */
static int opt_cookie(http_opts *o, const args *a, const char *v)
{
    bool data = strchr(v, '=') != NULL;
    if (v[0] == '\0' || (data && !one_line(v)))
        return args_reject(a, "--cookie",
                           "NAME=VALUE[; NAME=VALUE] on one line, or a file name", v);
    if (data)
        o->cookie = v;
    else
        o->cookie_file = v;
    return 0;
}

static int opt_cookie_jar(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--cookie-jar", "a file name", v, &o->cookie_jar);
}

static int opt_cacert(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--cacert", "a file name", v, &o->cacert);
}

static int opt_cert(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--cert", "a file name", v, &o->cert);
}

static int opt_key_file(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--key", "a file name", v, &o->cert_key);
}

static int opt_proxy(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--proxy", "a proxy URL such as http://proxy:3128", v, &o->proxy);
}

static int opt_referer(http_opts *o, const args *a, const char *v)
{
    if (!one_line(v))
        return args_reject(a, "--referer", "one line of text", v);
    o->referer = v;
    return 0;
}

static int opt_user_agent(http_opts *o, const args *a, const char *v)
{
    if (!one_line(v))
        return args_reject(a, "--user-agent", "one line of text", v);
    o->user_agent = v;
    return 0;
}

static int opt_max_redirs(http_opts *o, const args *a, const char *v)
{
    if (strcmp(v, "-1") == 0) {
        o->max_redirs = -1;
        return 0;
    }
    uint64_t n;
    if (args_uint64(a, "--max-redirs", v, 0, 100000, &n) != 0)
        return RESIL_EINVAL;
    o->max_redirs = (long)n;
    return 0;
}

/* ---- the output --------------------------------------------------------------- */

/* One more -o or -O output (the two count together, one per URL). */
static int add_output(http_opts *o, const args *a, const char *file, const char *given)
{
    if (o->noutputs == MAX_URLS) {
        if (file == HTTP_REMOTE_NAME)
            return args_fail(a, "--remote-name: at most %d outputs (-o and -O together); "
                                "this -O is one too many", MAX_URLS);
        return args_fail(a, "--output: at most %d outputs (-o and -O together); '%s' is one "
                            "too many", MAX_URLS, given);
    }
    o->outputs[o->noutputs++] = file;
    return 0;
}

static int opt_output(http_opts *o, const args *a, const char *v)
{
    if (v[0] == '\0')
        return args_reject(a, "--output", "a file name ('-': standard output)", v);
    return add_output(o, a, strcmp(v, "-") == 0 ? NULL : v, v);
}

static int opt_remote_name(http_opts *o, const args *a, const char *v)
{
    (void)v;
    return add_output(o, a, HTTP_REMOTE_NAME, NULL);
}

static int opt_output_dir(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--output-dir", "a directory", v, &o->output_dir);
}

/* ---- the transfers ------------------------------------------------------------ */

HTTP_FLAG(opt_parallel, parallel)

/* curl 7.88 clamps a value out of range; a typo here would silently run
 * 50 or 300 transfers at once, so it is refused instead. */
static int opt_parallel_max(http_opts *o, const args *a, const char *v)
{
    uint64_t n;
    if (args_uint64(a, "--parallel-max", v, 1, HTTP_PARALLEL_MAX, &n) != 0)
        return RESIL_EINVAL;
    o->parallel_max = (uint32_t)n;
    return 0;
}

static int opt_dump_header(http_opts *o, const args *a, const char *v)
{
    return args_nonempty(a, "--dump-header", "a file name ('-': standard output)", v,
                         &o->dump_header);
}

static int opt_write_out(http_opts *o, const args *a, const char *v)
{
    char *file = NULL;
    size_t n;
    if (v[0] == '@' && read_file(a, "--write-out", v + 1, &file, &n) != 0)
        return RESIL_EINVAL;
    resil_err err;
    write_out_free(o->write_out);
    o->write_out = NULL;
    int rc = write_out_parse(file != NULL ? file : v, &o->write_out, &err);
    free(file);
    if (rc != 0)
        return args_fail(a, "--write-out: %s", err.message);
    return 0;
}

static int opt_url(http_opts *o, const args *a, const char *v)
{
    if (v[0] == '\0')
        return args_reject(a, "--url", "a URL", v);
    if (o->nurls == MAX_URLS)
        return args_fail(a, "--url: at most %d URLs; '%s' is one too many", MAX_URLS, v);
    o->urls[o->nurls++] = v;
    return 0;
}

/* ---- curl's retry flags, onto the policy -------------------------------------- */

static int opt_retry(http_opts *o, const args *a, const char *v)
{
    uint64_t n;
    if (args_uint64(a, "--retry", v, 0, RESIL_ATTEMPTS_FOREVER - 2, &n) != 0)
        return RESIL_EINVAL;
    o->po.policy.max_attempts = (uint32_t)n + 1;
    o->po.given |= POLICY_GIVEN_ATTEMPTS;
    return 0;
}

/* curl waits exactly this long between attempts. */
static int opt_retry_delay(http_opts *o, const args *a, const char *v)
{
    resil_duration d;
    if (http_seconds_parse(a, "--retry-delay", v, &d) != 0)
        return RESIL_EINVAL;
    if (d == 0) /* curl's "0": its own backoff, here the profile's */
        return 0;
    resil_backoff *b = &o->po.policy.backoff;
    b->kind = RESIL_BACKOFF_CONSTANT;
    b->base = d;
    b->jitter = RESIL_JITTER_NONE;
    if (b->max_delay < d)
        b->max_delay = d;
    o->po.given |= POLICY_GIVEN_BACKOFF | POLICY_GIVEN_DELAY | POLICY_GIVEN_JITTER |
                   POLICY_GIVEN_MAX_DELAY;
    return 0;
}

static int opt_retry_max_time(http_opts *o, const args *a, const char *v)
{
    o->po.given |= POLICY_GIVEN_TOTAL_TIMEOUT;
    return http_seconds_parse(a, "--retry-max-time", v, &o->po.policy.max_total);
}

/* ---- flags ----------------------------------------------------------------------- */

HTTP_FLAG(opt_location, location)
HTTP_FLAG(opt_fail_with_body, fail_with_body)
HTTP_FLAG(opt_show_error, show_error)
HTTP_FLAG(opt_verbose, verbose)
HTTP_FLAG(opt_head, head)
HTTP_FLAG(opt_insecure, insecure)
HTTP_FLAG(opt_compressed, compressed)
HTTP_FLAG(opt_retry_all_errors, retry_all_errors)
HTTP_FLAG(opt_get, get)

/* The default already: accepted so that scripts written for curl run. */
static int opt_accepted(http_opts *o, const args *a, const char *v)
{
    (void)o, (void)a, (void)v;
    return 0;
}

const http_option http_curl_options[] = {
    {"--request", "-X", true, opt_request},
    {"--method", NULL, true, opt_request},
    {"--data", "-d", true, opt_data},
    {"--data-ascii", NULL, true, opt_data},
    {"--data-binary", NULL, true, opt_data_binary},
    {"--data-raw", NULL, true, opt_data_raw},
    {"--data-urlencode", NULL, true, opt_data_urlencode},
    {"--json", NULL, true, opt_json},
    {"--get", "-G", false, opt_get},
    {"--form", "-F", true, opt_form},
    {"--head", "-I", false, opt_head},
    {"--upload-file", "-T", true, opt_upload},
    {"--user", "-u", true, opt_user},
    {"--user-agent", "-A", true, opt_user_agent},
    {"--referer", "-e", true, opt_referer},
    {"--cookie", "-b", true, opt_cookie},
    {"--cookie-jar", "-c", true, opt_cookie_jar},
    {"--insecure", "-k", false, opt_insecure},
    {"--cacert", NULL, true, opt_cacert},
    {"--cert", "-E", true, opt_cert},
    {"--key", NULL, true, opt_key_file},
    {"--proxy", "-x", true, opt_proxy},
    {"--resolve", NULL, true, opt_resolve},
    {"--compressed", NULL, false, opt_compressed},
    {"--location", "-L", false, opt_location},
    {"--max-redirs", NULL, true, opt_max_redirs},
    {"--connect-timeout", NULL, true, opt_connect_timeout},
    {"--max-time", "-m", true, opt_max_time},
    {"--url", NULL, true, opt_url},
    {"--output", "-o", true, opt_output},
    {"--remote-name", "-O", false, opt_remote_name},
    {"--output-dir", NULL, true, opt_output_dir},
    {"--dump-header", "-D", true, opt_dump_header},
    {"--parallel", "-Z", false, opt_parallel},
    {"--parallel-max", NULL, true, opt_parallel_max},
    {"--parallel-immediate", NULL, false, opt_accepted},
    {"--write-out", "-w", true, opt_write_out},
    {"--fail", "-f", false, opt_accepted},
    {"--fail-with-body", NULL, false, opt_fail_with_body},
    {"--show-error", "-S", false, opt_show_error},
    {"--verbose", "-v", false, opt_verbose},
    {"--retry", NULL, true, opt_retry},
    {"--retry-delay", NULL, true, opt_retry_delay},
    {"--retry-max-time", NULL, true, opt_retry_max_time},
    {"--retry-all-errors", NULL, false, opt_retry_all_errors},
    {"--retry-connrefused", NULL, false, opt_accepted},
};
const size_t http_curl_options_len = sizeof http_curl_options / sizeof http_curl_options[0];
