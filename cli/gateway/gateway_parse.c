/*
 * gateway_parse.c — the text `resil gateway` reads from strangers, parsed
 * without a server: request targets, Idempotency-Key and tenant values,
 * header lines.
 *
 * Everything here is a pure function of its bytes (no libmicrohttpd, no
 * libcurl, no allocation), so each can be unit-tested and fuzzed on its
 * own (tests/gateway/), and the listening side only decides what to do
 * with a verdict. Every parser takes an explicit length: header values
 * may hold a NUL that a C string would hide.
 */
#include <string.h>

#include "args.h"
#include "gateway.h"

/* ---- request targets (RFC 9112 §3.2) ------------------------------------- */

static bool is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static bool is_hex(unsigned char c)
{
    return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* pchar without pct-encoded: unreserved / sub-delims / ":" / "@" */
static bool is_pchar(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || (c != '\0' && strchr("-._~!$&'()*+,;=:@", c) != NULL);
}

/* origin-form = absolute-path [ "?" query ]: it starts with '/', and every
 * byte is a pchar, '/', '?' (the first one starts the query) or a '%'
 * with two hex digits. No fragment, no space, no control or non-ASCII byte. Anything else
 * (absolute-form, authority-form, asterisk-form, or a path that does not
 * start with '/') names a host or means nothing to a reverse proxy. */
bool gw_target_is_origin_form(const char *target, size_t len)
{
    const unsigned char *t = (const unsigned char *)target;
    if (len == 0 || t[0] != '/')
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = t[i];
        if (c == '%') {
            if (len - i < 3 || !is_hex(t[i + 1]) || !is_hex(t[i + 2]))
                return false;
            i += 2;
        } else if (c != '/' && c != '?' && !is_pchar(c)) {
            return false;
        }
    }
    return true;
}

size_t gw_target_path_len(const char *target, size_t len)
{
    const char *q = memchr(target, '?', len);
    return q ? (size_t)(q - target) : len;
}

/* ---- Idempotency-Key and tenant values ------------------------------------ */

static bool is_printable(unsigned char c) { return c >= 0x20 && c <= 0x7e; }

/* A value taken as given: 1..RESIL_STORE_FIELD_MAX printable ASCII bytes
 * (0x20-0x7E), no space at either end. NULL, or the rule it breaks. */
static const char *bare_value_rule(const char *v, size_t len)
{
    if (len == 0 || len > RESIL_STORE_FIELD_MAX)
        return "must be 1 to 255 bytes";
    for (size_t i = 0; i < len; i++) {
        if (!is_printable((unsigned char)v[i]))
            return "must be printable ASCII (0x20-0x7E): no control, tab, DEL or "
                   "non-ASCII byte";
    }
    if (v[0] == ' ' || v[len - 1] == ' ')
        return "must not begin or end with a space";
    return NULL;
}

/* sf-string (RFC 8941 §3.3.3): DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) )
 * DQUOTE, unescaped being 0x20-0x21 / 0x23-0x5B / 0x5D-0x7E; nothing may
 * follow the closing quote. The unquoted text goes to out. */
static const char *sf_string(const char *v, size_t len, char *out, size_t cap, size_t *out_len)
{
    static const char rule[] = "as a quoted string must be \"...\" with only \\\" and \\\\ "
                               "escapes and printable ASCII inside";
    size_t n = 0;
    for (size_t i = 1; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '"') {
            if (i != len - 1)
                return rule;
            if (n == 0 || n > RESIL_STORE_FIELD_MAX)
                return "must be 1 to 255 bytes once unquoted";
            out[n] = '\0';
            *out_len = n;
            return NULL;
        }
        if (c == '\\') {
            if (++i == len || (v[i] != '"' && v[i] != '\\'))
                return rule;
            c = (unsigned char)v[i];
        } else if (!is_printable(c)) {
            return rule;
        }
        if (n + 1 < cap)
            out[n] = (char)c;
        n++;
    }
    return rule; /* no closing quote */
}

const char *gw_parse_key(const char *value, size_t len, char *out, size_t cap, size_t *out_len)
{
    *out_len = 0;
    if (cap > 0)
        out[0] = '\0';
    if (cap < RESIL_STORE_FIELD_MAX + 1)
        return "has no room to be parsed";
    if (len > 0 && value[0] == '"')
        return sf_string(value, len, out, cap, out_len);
    const char *why = bare_value_rule(value, len);
    if (why != NULL)
        return why;
    memcpy(out, value, len);
    out[len] = '\0';
    *out_len = len;
    return NULL;
}

const char *gw_check_tenant(const char *value, size_t len)
{
    return bare_value_rule(value, len);
}

/* ---- request framing -------------------------------------------------------- */

static bool names_equal(const char *name, size_t len, const char *lower)
{
    if (strlen(lower) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if ((c >= 'A' && c <= 'Z' ? c | 0x20 : c) != (unsigned char)lower[i])
            return false;
    }
    return true;
}

/* A field value may hold any byte but NUL, CR and LF (RFC 9110 §5.5). */
static bool value_is_safe(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '\0' || v[i] == '\r' || v[i] == '\n')
            return false;
    }
    return true;
}

/* A whole decimal number of at most `digits` digits. */
static bool whole(const char *s, size_t len, size_t digits, uint64_t *out)
{
    if (len == 0 || len > digits)
        return false;
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit((unsigned char)s[i]))
            return false;
        n = n * 10 + (uint64_t)(s[i] - '0');
    }
    *out = n;
    return true;
}

void gw_framing_add(gw_framing *f, const char *name, size_t name_len, const char *value,
                    size_t value_len)
{
    if (!args_token(name, name_len) || !value_is_safe(value, value_len)) {
        f->bad_field = true;
        return;
    }
    if (names_equal(name, name_len, "host")) {
        f->hosts++;
    } else if (names_equal(name, name_len, "transfer-encoding")) {
        f->transfer_encoding = true;
    } else if (names_equal(name, name_len, "expect")) {
        if (names_equal(value, value_len, "100-continue"))
            f->expect_continue = true;
        else
            f->expect_other = true;
    } else if (names_equal(name, name_len, "content-length")) {
        uint64_t n = 0;
        /* Content-Length = 1*DIGIT, at most 19 digits (anything longer is
         * beyond every limit anyway). */
        if (!whole(value, value_len, 19, &n) ||
            (f->content_lengths > 0 && n != f->content_length))
            f->content_length_bad = true;
        f->content_length = n;
        f->content_lengths++;
    }
}

static bool refuse(gw_refusal *why, int status, const char *code, const char *message)
{
    *why = (gw_refusal){.status = status, .code = code, .message = message};
    return false;
}

bool gw_framing_check(const gw_framing *f, bool http11, size_t max_body, gw_refusal *why)
{
    if (f->bad_field)
        return refuse(why, 400, "invalid_header",
                      "a header name is not a token, or a value holds NUL, CR or LF");
    if (f->hosts > 1 || (http11 && f->hosts == 0))
        return refuse(why, 400, "invalid_host", "an HTTP/1.1 request needs exactly one Host");
    if (f->content_length_bad)
        return refuse(why, 400, "invalid_content_length",
                      "Content-Length must be digits, the same in every copy");
    if (f->content_lengths > 0 && f->transfer_encoding)
        return refuse(why, 400, "invalid_framing",
                      "a request must not carry both Content-Length and Transfer-Encoding");
    if (f->expect_other)
        return refuse(why, 417, "expectation_failed", "the only expectation is 100-continue");
    if (f->content_lengths > 0 && f->content_length > max_body)
        return refuse(why, 413, "body_too_large",
                      "the request body is larger than the gateway accepts");
    return true;
}

/* ---- header lines ------------------------------------------------------------ */

/* OWS is SP / HTAB. */
static void trim_ows(const char **v, size_t *len)
{
    while (*len > 0 && (**v == ' ' || **v == '\t')) {
        (*v)++;
        (*len)--;
    }
    while (*len > 0 && ((*v)[*len - 1] == ' ' || (*v)[*len - 1] == '\t'))
        (*len)--;
}

/* "Name: value" (no line end) as a field: a token name, a value without
 * NUL, CR or LF. */
static bool split_field(const char *line, size_t len, gw_field *f)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return false;
    f->name = line;
    f->name_len = (size_t)(colon - line);
    f->value = colon + 1;
    f->value_len = len - f->name_len - 1;
    trim_ows(&f->value, &f->value_len);
    return args_token(f->name, f->name_len) && value_is_safe(f->value, f->value_len);
}

/* The bytes of one line without its line end (CR LF, LF or bare CRs). */
static size_t line_content(const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    return len;
}

gw_line_kind gw_upstream_header_line(const char *data, size_t len, gw_field *f)
{
    size_t n = line_content(data, len);
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0)
        return GW_LINE_STATUS;
    if (n == 0 || data[0] == ' ' || data[0] == '\t' || memchr(data, '\n', n) != NULL ||
        memchr(data, '\r', n) != NULL)
        return GW_LINE_SKIP;
    if (!split_field(data, n, f) || gw_hop_by_hop(f->name, f->name_len))
        return GW_LINE_SKIP;
    return GW_LINE_FIELD;
}

bool gw_saved_header_next(const char *blob, size_t len, size_t *pos, gw_field *f)
{
    while (*pos < len) {
        const char *line = blob + *pos;
        const char *eol = memchr(line, '\n', len - *pos);
        size_t n = eol ? (size_t)(eol - line) : len - *pos;
        *pos += eol ? n + 1 : n;
        if (split_field(line, line_content(line, n), f))
            return true;
    }
    return false;
}

bool gw_hop_by_hop(const char *name, size_t len)
{
    static const char *const names[] = {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length", "date", "host", "expect"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names_equal(name, len, names[i]))
            return true;
    }
    return false;
}

/* ---- option values -------------------------------------------------------- */

gw_listen_error gw_parse_listen(const char *v, char *host, size_t cap, int *port)
{
    const char *colon = strrchr(v, ':');
    if (colon == NULL || colon == v)
        return GW_LISTEN_FORM;
    size_t host_len = (size_t)(colon - v);
    if (v[0] == '[' && host_len >= 2 && v[host_len - 1] == ']') {
        v++;
        host_len -= 2;
    }
    uint64_t p;
    if (!whole(colon + 1, strlen(colon + 1), 5, &p) || p > 65535)
        return GW_LISTEN_PORT;
    if (host_len == 0 || host_len >= cap)
        return GW_LISTEN_FORM;
    for (size_t i = 0; i < host_len; i++) { /* a name or an address, no brackets left */
        unsigned char c = (unsigned char)v[i];
        if (!is_printable(c) || c == ' ' || c == '[' || c == ']')
            return GW_LISTEN_FORM;
    }
    memcpy(host, v, host_len);
    host[host_len] = '\0';
    *port = (int)p;
    return GW_LISTEN_OK;
}

bool gw_parse_size(const char *v, size_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t unit;
    } units[] = {{"", 1}, {"b", 1}, {"kb", 1024}, {"k", 1024}, {"mb", 1 << 20},
                 {"m", 1 << 20}, {"gb", 1 << 30}, {"g", 1 << 30}};
    size_t n = strspn(v, "0123456789");
    uint64_t count;
    if (!whole(v, n, 19, &count) || count == 0)
        return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (names_equal(v + n, strlen(v + n), units[i].suffix)) {
            if (count > (UINT64_C(1) << 30) / units[i].unit)
                return false;
            *out = (size_t)(count * units[i].unit);
            return true;
        }
    }
    return false;
}

bool gw_parse_methods(const char *v, char (*methods)[GW_METHOD_MAX], size_t max, size_t *n)
{
    *n = 0;
    for (const char *p = v;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= GW_METHOD_MAX || *n == max)
            return false;
        char *m = methods[(*n)++];
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)p[i];
            if (!is_alpha(c))
                return false;
            m[i] = (char)(c >= 'a' ? c - 'a' + 'A' : c);
        }
        m[len] = '\0';
        p += len;
        if (*p == '\0')
            return true;
    }
}

/* ---- the header block as received ------------------------------------------- */

static bool is_separator(char c)
{
    return c == '\0' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool gw_header_block_clean(const char *block, size_t size, const gw_span *spans, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t next = i < n ? spans[i].at : size;
        if (next < at || next > size || (i < n && spans[i].len > size - next))
            return false;
        for (; at < next; at++) {
            if (!is_separator(block[at]))
                return false;
        }
        if (i < n)
            at = next + spans[i].len;
    }
    return true;
}
