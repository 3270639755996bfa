/*
 * gateway_response.c — an upstream's HTTP/1.1 response framed from the
 * bytes of its connection, for the gateway's own client of plain http://
 * upstreams (gateway_client.c).
 *
 * Why a pure function over a buffer. The client reads whatever the socket
 * has into one buffer and hands it here; gw_resp_parse() takes what it can
 * frame (whole lines, body bytes) and says how much it used, and the
 * client keeps the rest for the next read. So the parser holds no bytes of
 * its own, never blocks, and can be driven from a test or a fuzzer one byte
 * at a time or all at once with the same result. What it keeps between
 * calls is only where it is: the state, the body bytes or chunk bytes
 * still to come, and what the headers said about the framing.
 *
 * What it decides (RFC 9112 §6.3, and libcurl's behaviour where the
 * gateway has always relied on it):
 *   - a status line "HTTP/1.0" or "HTTP/1.1", a space, three digits from
 *     100 to 599, then a space and a reason or nothing; anything else is
 *     malformed. 1xx answers (100 Continue, 103) are skipped whole, their
 *     fields included; 101 is malformed (no upgrade is ever asked for).
 *   - each header and trailer line of the final response goes to the sink
 *     as received (its CRLF included), the way libcurl hands lines to its
 *     header callback: the gateway's filter (gw_upstream_header_line())
 *     decides what is kept, so both clients keep the same fields.
 *   - no body after HEAD, 1xx, 204 and 304; else Transfer-Encoding whose
 *     last coding is chunked means chunked (a Content-Length beside it is
 *     ignored, and the connection is not reused), any other
 *     Transfer-Encoding means the body runs to the close; else
 *     Content-Length (digits only: no sign, no overflow, copies that
 *     differ are malformed); else the body runs to the close.
 *   - chunk sizes are hex digits (at most 15), extensions after ';' are
 *     skipped, each chunk ends with CRLF (or LF), trailers end with an
 *     empty line.
 *   - a line is at most GW_RESP_LINE_MAX bytes and a response's header
 *     and trailer lines together at most GW_RESP_HEADERS_MAX (libcurl's
 *     limits): beyond, malformed.
 *   - the connection may be kept after HTTP/1.1 unless "Connection:
 *     close", after HTTP/1.0 only with "Connection: keep-alive", and never
 *     after a body that ran to the close.
 * The parser reads only within [buf, buf + len) and never past a byte it
 * has not been given.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway.h"

enum {
    ST_STATUS,
    ST_HEADERS,
    ST_BODY_LENGTH,
    ST_BODY_CLOSE,
    ST_CHUNK_SIZE,
    ST_CHUNK_DATA,
    ST_CHUNK_END,
    ST_TRAILERS,
    ST_DONE,
    ST_ERROR
};

void gw_resp_init(gw_resp *p, bool head)
{
    memset(p, 0, sizeof *p);
    p->head = head;
    p->state = ST_STATUS;
}

static gw_resp_rc fail(gw_resp *p, const char *why)
{
    p->state = ST_ERROR;
    p->error = why;
    return GW_RESP_ERROR;
}

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

static bool same_name(const char *a, size_t len, const char *lower_name)
{
    size_t n = strlen(lower_name);
    if (len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != lower_name[i])
            return false;
    return true;
}

static bool ows(char c) { return c == ' ' || c == '\t'; }

/* The line's content without its CR, LF and trailing white space. */
static size_t content_len(const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || ows(line[len - 1])))
        len--;
    return len;
}

static bool digit(char c) { return c >= '0' && c <= '9'; }

/* "HTTP/1.x DDD[ reason]" */
static gw_resp_rc status_line(gw_resp *p, const char *line, size_t len)
{
    size_t n = content_len(line, len);
    if (n < 12 || memcmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
        line[8] != ' ' || !digit(line[9]) || !digit(line[10]) || !digit(line[11]) ||
        (n > 12 && line[12] != ' '))
        return fail(p, "malformed status line");
    int status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (status < 100 || status > 599 || status == 101)
        return fail(p, "unexpected status code");
    p->status = status;
    p->minor = line[7] - '0';
    p->content_length = 0;
    p->has_length = p->chunked = p->other_coding = p->conn_close = p->conn_keep = false;
    p->state = ST_HEADERS;
    return GW_RESP_MORE;
}

static bool has_token(const char *v, size_t len, const char *lower_token)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (ows(v[i]) || v[i] == ','))
            i++;
        size_t start = i;
        while (i < len && v[i] != ',')
            i++;
        size_t end = i;
        while (end > start && ows(v[end - 1]))
            end--;
        if (end > start && same_name(v + start, end - start, lower_token))
            return true;
    }
    return false;
}

/* Transfer-Encoding: only the last coding of the last field decides. */
static void transfer_encoding(gw_resp *p, const char *v, size_t len)
{
    size_t start = len;
    while (start > 0 && v[start - 1] != ',')
        start--;
    while (start < len && ows(v[start]))
        start++;
    size_t end = len;
    while (end > start && ows(v[end - 1]))
        end--;
    p->chunked = same_name(v + start, end - start, "chunked");
    p->other_coding = !p->chunked;
}

static gw_resp_rc content_length(gw_resp *p, const char *v, size_t len)
{
    if (len == 0)
        return fail(p, "empty Content-Length");
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (!digit(v[i]))
            return fail(p, "Content-Length is not digits");
        if (n > (UINT64_MAX / 2 - 9) / 10)
            return fail(p, "Content-Length too large");
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    if (p->has_length && n != p->content_length)
        return fail(p, "Content-Length copies differ");
    p->has_length = true;
    p->content_length = n;
    return GW_RESP_MORE;
}

/* A field that says something about the framing or the connection. */
static gw_resp_rc framing_field(gw_resp *p, const char *line, size_t len)
{
    char first = lower(line[0]);
    if (first != 'c' && first != 't')
        return GW_RESP_MORE; /* none of Content-Length, Transfer-Encoding, Connection */
    size_t n = content_len(line, len);
    const char *colon = memchr(line, ':', n);
    if (colon == NULL)
        return GW_RESP_MORE;
    size_t name_len = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = n - name_len - 1;
    while (vlen > 0 && ows(*v)) {
        v++;
        vlen--;
    }
    if (same_name(line, name_len, "content-length"))
        return content_length(p, v, vlen);
    if (same_name(line, name_len, "transfer-encoding"))
        transfer_encoding(p, v, vlen);
    else if (same_name(line, name_len, "connection")) {
        p->conn_close = p->conn_close || has_token(v, vlen, "close");
        p->conn_keep = p->conn_keep || has_token(v, vlen, "keep-alive");
    }
    return GW_RESP_MORE;
}

/* The headers ended: how the body is framed. */
static gw_resp_rc headers_end(gw_resp *p)
{
    if (p->status < 200) { /* an interim answer: the real one follows */
        p->state = ST_STATUS;
        return GW_RESP_MORE;
    }
    p->keep = p->minor == 1 ? !p->conn_close : p->conn_keep && !p->conn_close;
    if (p->head || p->status == 204 || p->status == 304) {
        p->state = ST_DONE;
        return GW_RESP_DONE;
    }
    if (p->chunked) {
        p->keep = p->keep && !p->has_length;
        p->state = ST_CHUNK_SIZE;
    } else if (p->other_coding || !p->has_length) {
        p->keep = false;
        p->state = ST_BODY_CLOSE;
    } else if (p->content_length == 0) {
        p->state = ST_DONE;
        return GW_RESP_DONE;
    } else {
        p->remaining = p->content_length;
        p->state = ST_BODY_LENGTH;
    }
    return GW_RESP_MORE;
}

/* A line (it ends with LF) that is only its end: LF or CRLF. */
static bool bare_eol(const char *line, size_t len)
{
    return len == 1 || (len == 2 && line[0] == '\r');
}

static gw_resp_rc header_line(gw_resp *p, const char *line, size_t len, const gw_resp_sink *s)
{
    if (bare_eol(line, len))
        return p->state == ST_TRAILERS ? (p->state = ST_DONE, GW_RESP_DONE) : headers_end(p);
    if (p->status >= 200 && !s->field(s->ud, line, len))
        return fail(p, "header refused by the sink");
    if (p->state == ST_TRAILERS || line[0] == ' ' || line[0] == '\t')
        return GW_RESP_MORE; /* trailers and folded lines frame nothing */
    return framing_field(p, line, len);
}

/* "HEX[ext]" — the size of the next chunk. */
static gw_resp_rc chunk_size(gw_resp *p, const char *line, size_t len)
{
    uint64_t n = 0;
    size_t i = 0;
    for (; i < len; i++) {
        char c = lower(line[i]);
        int d = digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        if (i == 15)
            return fail(p, "chunk size too large");
        n = n * 16 + (uint64_t)d;
    }
    if (i == 0)
        return fail(p, "bad chunk size");
    while (i < len && ows(line[i]))
        i++;
    if (i < len && line[i] != ';' && line[i] != '\r' && line[i] != '\n')
        return fail(p, "bad chunk size");
    p->remaining = n;
    p->state = n == 0 ? ST_TRAILERS : ST_CHUNK_DATA;
    return GW_RESP_MORE;
}

static gw_resp_rc line_state(gw_resp *p, const char *line, size_t len, const gw_resp_sink *s)
{
    switch (p->state) {
    case ST_STATUS:
        return status_line(p, line, len);
    case ST_HEADERS:
    case ST_TRAILERS:
        return header_line(p, line, len, s);
    case ST_CHUNK_SIZE:
        return chunk_size(p, line, len);
    default: /* ST_CHUNK_END */
        if (bare_eol(line, len)) {
            p->state = ST_CHUNK_SIZE;
            return GW_RESP_MORE;
        }
        return fail(p, "chunk not followed by CRLF");
    }
}

static bool in_body(const gw_resp *p)
{
    return p->state == ST_BODY_LENGTH || p->state == ST_BODY_CLOSE || p->state == ST_CHUNK_DATA;
}

/* Body bytes from buf: as many as the framing says are the body's. */
static gw_resp_rc body_bytes(gw_resp *p, const char *buf, size_t len, size_t *took,
                             const gw_resp_sink *s)
{
    size_t n = len;
    if (p->state != ST_BODY_CLOSE && p->remaining < n)
        n = (size_t)p->remaining;
    *took = n;
    if (n > 0 && !s->body(s->ud, buf, n))
        return fail(p, "body refused by the sink");
    p->body_bytes += n;
    if (p->state == ST_BODY_CLOSE)
        return GW_RESP_MORE;
    p->remaining -= n;
    if (p->remaining > 0)
        return GW_RESP_MORE;
    if (p->state == ST_CHUNK_DATA) {
        p->state = ST_CHUNK_END;
        return GW_RESP_MORE;
    }
    p->state = ST_DONE;
    return GW_RESP_DONE;
}

/* A line's bytes count toward the header limits while headers are read. */
static bool counts(const gw_resp *p)
{
    return p->state == ST_STATUS || p->state == ST_HEADERS || p->state == ST_TRAILERS;
}

gw_resp_rc gw_resp_parse(gw_resp *p, const char *buf, size_t len, size_t *used,
                         const gw_resp_sink *s)
{
    size_t at = 0;
    gw_resp_rc rc = p->state == ST_ERROR ? GW_RESP_ERROR
                    : p->state == ST_DONE ? GW_RESP_DONE
                                          : GW_RESP_MORE;
    while (rc == GW_RESP_MORE && at < len) {
        if (in_body(p)) {
            size_t took;
            rc = body_bytes(p, buf + at, len - at, &took, s);
            at += took;
            continue;
        }
        p->started = true;
        const char *eol = memchr(buf + at, '\n', len - at);
        size_t line_len = eol ? (size_t)(eol - (buf + at)) + 1 : len - at;
        size_t limit = GW_RESP_LINE_MAX;
        if (counts(p) && GW_RESP_HEADERS_MAX - p->header_bytes < limit)
            limit = GW_RESP_HEADERS_MAX - p->header_bytes;
        if (line_len > limit) {
            rc = fail(p, counts(p) ? "header block too large" : "chunk line too long");
            break;
        }
        if (eol == NULL)
            break; /* the rest of the line is still to come */
        if (counts(p))
            p->header_bytes += line_len;
        rc = line_state(p, buf + at, line_len, s);
        at += line_len;
    }
    *used = at;
    return rc;
}

gw_resp_rc gw_resp_eof(gw_resp *p)
{
    if (p->state == ST_DONE)
        return GW_RESP_DONE;
    if (p->state == ST_BODY_CLOSE) {
        p->state = ST_DONE;
        return GW_RESP_DONE;
    }
    if (p->state == ST_ERROR)
        return GW_RESP_ERROR;
    return fail(p, p->started ? "connection closed before the response ended"
                              : "connection closed before any response");
}
