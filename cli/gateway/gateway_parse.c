/*
 * gateway_parse.c — the text `resil gateway` reads from strangers, parsed
 * without a server.
 *
 * Everything here is a pure function of its bytes (no libmicrohttpd, no
 * libcurl, no allocation), so each can be unit-tested and fuzzed on its
 * own (tests/gateway/), and the listening side only decides what to do
 * with a verdict. Every parser takes an explicit length: header values
 * may hold a NUL that a C string would hide.
 */
#include <string.h>

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
