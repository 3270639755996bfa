/*
 * fuzz_http_headers.c — an attempt's response-header capture (head.c)
 * fed arbitrary header lines in sequence, as libcurl's header function
 * would be called over a transfer: status lines and fields of
 * several responses (100 Continue, redirects), over-long lines, lines
 * without CRLF or with a line feed inside, binary bytes, empty lines.
 *
 * Input: byte 0 picks the byte limit (0xff: the library's own, else
 * 16 × byte 0, so the limit is met at fuzzing sizes); byte 1 picks the
 * framing (bit 0 clear: the rest is cut after each '\n', the last piece
 * possibly without one, as text; set: records of a 2-byte big-endian length
 * and that many bytes, so any line shape is reachable), how many times
 * each line is delivered (bits 1-2, plus one: repeated responses) and
 * whether clearing frees the memory (bit 3).
 *
 * The properties: a line is kept exactly when the bytes held stay within
 * the limit, and a refusal (RESIL_ERANGE) keeps nothing of it; the lines
 * are handed back one per call, in order, each byte for byte as delivered;
 * a handler's nonzero return stops the hand-back there; a cleared capture
 * holds nothing and is reusable. Each Retry-After field's value goes to the
 * parser libcurl's copy of it would reach.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../src/http/head.h"
#include "resil/retry_after.h"

#define MAX_LINES 8192
#define NOW_NS (INT64_C(1749988800) * INT64_C(1000000000))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct piece {
    const char *p;
    size_t n;
} piece;

typedef struct replay {
    const piece *want;
    size_t count, seen, stop_at;
} replay;

static void check(int ok)
{
    if (!ok)
        abort();
}

/* The deliveries the input describes, each `repeat` times. */
static size_t cut(const uint8_t *d, size_t n, bool framed, unsigned repeat, piece *out)
{
    size_t count = 0;
    for (size_t at = 0; at < n && count + repeat <= MAX_LINES;) {
        piece one = {(const char *)d + at, 0};
        if (framed) {
            size_t len = at + 1 < n ? (size_t)d[at] << 8 | d[at + 1] : 0;
            at += at + 1 < n ? 2 : 1;
            one.p = (const char *)d + at;
            one.n = len < n - at ? len : n - at;
        } else {
            const uint8_t *nl = memchr(d + at, '\n', n - at);
            one.n = nl != NULL ? (size_t)(nl - (d + at)) + 1 : n - at;
        }
        at += one.n;
        for (unsigned r = 0; r < repeat; r++)
            out[count++] = one;
    }
    return count;
}

static int compare(char *line, size_t n, void *ud)
{
    replay *r = ud;
    check(r->seen < r->count);
    const piece *w = &r->want[r->seen++];
    check(w->n == n && (n == 0 || memcmp(w->p, line, n) == 0));
    return r->seen == r->stop_at ? 7 : 0;
}

/* "Retry-After:" then optional whitespace, the value, optional whitespace
 * and CRLF: the value as curl_easy_header would give it. */
static void parse_retry_after(const piece *l)
{
    static const char name[] = "Retry-After:";
    size_t k = sizeof name - 1;
    if (l->n < k || strncasecmp(l->p, name, k) != 0)
        return;
    const char *v = l->p + k, *end = l->p + l->n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    resil_duration d = -42;
    int rc = resil_retry_after_parse(v, (size_t)(end - v), NOW_NS, &d);
    check(rc == 0 ? d >= 0 : rc == RESIL_ESYNTAX && d == -42);
}

/* Add every piece as the header function would, stopping at the first
 * refusal (the transfer ends there); returns how many were kept. */
static size_t capture(resil__http_head *h, const piece *lines, size_t count, size_t limit)
{
    size_t held = 0;
    for (size_t i = 0; i < count; i++) {
        size_t before = h->lines, bytes = h->bytes;
        int rc = resil__http_head_add(h, lines[i].p, lines[i].n, limit);
        bool fits = lines[i].n <= limit - held;
        if (!fits) {
            check(rc == RESIL_ERANGE && h->lines == before && h->bytes == bytes);
            return i;
        }
        check(rc == 0 && h->lines == before + 1 && h->bytes == bytes + lines[i].n);
        held += lines[i].n;
    }
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static piece lines[MAX_LINES];
    if (size < 2)
        return 0;
    size_t limit = data[0] == 0xff ? RESIL__HTTP_HEAD_MAX : (size_t)data[0] * 16;
    bool framed = data[1] & 1;
    unsigned repeat = ((data[1] >> 1) & 3) + 1;
    size_t count = cut(data + 2, size - 2, framed, repeat, lines);

    resil__http_head h = {0};
    size_t kept = capture(&h, lines, count, limit);
    replay r = {lines, kept, 0, 0};
    check(resil__http_head_each(&h, compare, &r) == 0 && r.seen == kept);
    if (kept > 0) {
        replay part = {lines, kept, 0, 1 + kept / 2};
        check(resil__http_head_each(&h, compare, &part) == 7 && part.seen == part.stop_at);
    }
    for (size_t i = 0; i < kept; i++)
        parse_retry_after(&lines[i]);

    resil__http_head_clear(&h, data[1] & 8 ? 0 : SIZE_MAX);
    check(h.lines == 0 && h.bytes == 0 && h.len == 0);
    replay none = {lines, 0, 0, 0};
    check(resil__http_head_each(&h, compare, &none) == 0 && none.seen == 0);
    kept = capture(&h, lines, count < 3 ? count : 3, limit);
    replay again = {lines, kept, 0, 0};
    check(resil__http_head_each(&h, compare, &again) == 0 && again.seen == kept);
    resil__http_head_free(&h);
    return 0;
}
