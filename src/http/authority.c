/*
 * authority.c — the breaker key of a URL, and Idempotency-Key generation.
 *
 * Breakers are per authority (scheme://host:port) so that one failing host
 * cannot open the circuit for calls to another; the key must therefore be
 * the same for every spelling of one authority ("HTTP://Example.COM/a" and
 * "http://example.com:80/b"), and different for different ports. The URL is
 * read by a small scanner of our own rather than libcurl's URL API because
 * it runs on every call and must not allocate; it only has to find the
 * authority, not validate the URL — libcurl does that when it performs.
 *
 * Keys come from getrandom(): an Idempotency-Key identifies one logical
 * request among every client's, so it must not repeat across processes the
 * way a seeded generator's output would.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "resil/http.h"

static const struct {
    const char *scheme;
    const char *port;
} default_ports[] = {
    {"http", "80"}, {"https", "443"}, {"ws", "80"}, {"wss", "443"}, {"ftp", "21"},
};

/* ASCII only: a host name's case is ASCII's, and tolower() would consult
 * the locale on every character. */
static void copy_lower(char *dst, const char *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        dst[i] = c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
    }
}

static const char *default_port(const char *scheme, size_t len)
{
    char lower[8];
    if (len >= sizeof lower)
        return NULL;
    copy_lower(lower, scheme, len);
    for (size_t i = 0; i < sizeof default_ports / sizeof default_ports[0]; i++) {
        if (strlen(default_ports[i].scheme) == len &&
            memcmp(default_ports[i].scheme, lower, len) == 0)
            return default_ports[i].port;
    }
    return NULL;
}

static bool scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '-' || c == '.';
}

/* The length of the scheme the URL starts with, or 0 when it has none: a
 * letter, then letters, digits, '+', '-' or '.' (RFC 3986), then "://".
 * A "://" found anywhere else belongs to a path or query ("host/?next=
 * https://other") and must not make the text before it a scheme. */
static size_t scheme_length(const char *url)
{
    size_t n = 0;
    if ((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z'))
        while (scheme_char(url[++n]))
            ;
    return n > 0 && strncmp(url + n, "://", 3) == 0 ? n : 0;
}

/* Split "host[:port]" at its port colon: the first colon after the "]" of
 * a bracketed IPv6 literal, else the first colon. */
static void split_host_port(const char *a, size_t n, size_t *host_len,
                            const char **port, size_t *port_len)
{
    const char *from = a;
    const char *close = n > 0 && a[0] == '[' ? memchr(a, ']', n) : NULL;
    if (close != NULL)
        from = close + 1;
    const char *colon = memchr(from, ':', n - (size_t)(from - a));
    *host_len = colon != NULL ? (size_t)(colon - a) : n;
    *port = colon != NULL ? colon + 1 : NULL;
    *port_len = colon != NULL ? n - *host_len - 1 : 0;
}

int resil_http_authority(const char *url, char *buf, size_t cap)
{
    if (url == NULL || buf == NULL || cap == 0)
        return RESIL_EINVAL;
    buf[0] = '\0';
    size_t scheme_len = scheme_length(url);
    const char *scheme = url, *a = url + scheme_len + 3;
    if (scheme_len == 0) { /* http, as libcurl guesses */
        scheme = "http";
        scheme_len = 4;
        a = url;
    }
    size_t n = strcspn(a, "/?#");
    const char *at = memrchr(a, '@', n); /* user info is not part of the key */
    if (at != NULL) {
        n -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    size_t host_len, port_len;
    const char *port;
    split_host_port(a, n, &host_len, &port, &port_len);
    if (host_len == 0)
        return RESIL_ESYNTAX;
    if (port_len == 0) {
        port = default_port(scheme, scheme_len);
        port_len = port != NULL ? strlen(port) : 0;
    }
    size_t len = scheme_len + 3 + host_len + (port != NULL ? 1 + port_len : 0);
    if (len >= cap)
        return RESIL_ERANGE;
    char *o = buf;
    copy_lower(o, scheme, scheme_len);
    memcpy(o += scheme_len, "://", 3);
    copy_lower(o += 3, a, host_len);
    o += host_len;
    if (port != NULL) {
        *o++ = ':';
        copy_lower(o, port, port_len);
        o += port_len;
    }
    *o = '\0';
    return 0;
}

int resil_http_uuid4(char out[RESIL_HTTP_UUID_LEN + 1])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n <= 0)
            return RESIL_ESYS;
        got += (size_t)n;
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 10xx */
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < sizeof b; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
    return 0;
}
