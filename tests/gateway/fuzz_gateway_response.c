/*
 * fuzz_gateway_response.c — the framing of an upstream's response
 * (gw_resp_parse(), cli/gateway/gateway_response.c) on arbitrary bytes, as
 * the gateway's client hands them over: in pieces, the unframed rest given
 * again with the next piece, then perhaps the connection's end.
 *
 * The first byte chooses HEAD or not, the piece size and whether the
 * connection ends; the rest is the stream. The promises: the parser never
 * takes more than it was given; the outcome (done, malformed or wanting
 * more, the status, the verdict on the connection, every field line and
 * every body byte) is the same whether the stream comes whole or in
 * pieces; the fields are whole lines ending in LF; a finished response
 * with no body (HEAD, 204, 304) delivered none, and the body never holds
 * more bytes than the stream. ASan catches any read past what was given.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

typedef struct run {
    gw_resp p;
    gw_resp_rc rc;
    uint64_t field_sum, body_sum; /* order-sensitive digests */
    size_t fields, body_len;
} run;

static uint64_t mix(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    return h;
}

static bool on_field(void *ud, const char *line, size_t len)
{
    run *r = ud;
    check(len > 0 && line[len - 1] == '\n');
    r->fields++;
    r->field_sum = mix(r->field_sum, line, len);
    return true;
}

static bool on_body(void *ud, const char *d, size_t len)
{
    run *r = ud;
    check(len > 0);
    r->body_len += len;
    r->body_sum = mix(r->body_sum, d, len);
    return true;
}

static void feed(run *r, const char *text, size_t len, bool head, size_t piece, bool eof)
{
    char *buf = malloc(len ? len : 1);
    size_t pending = 0, at = 0;
    gw_resp_sink sink = {.field = on_field, .body = on_body, .ud = r};
    memset(r, 0, sizeof *r);
    r->field_sum = r->body_sum = 14695981039346656037ULL;
    gw_resp_init(&r->p, head);
    r->rc = GW_RESP_MORE;
    while (at < len && r->rc == GW_RESP_MORE) {
        size_t n = piece < len - at ? piece : len - at;
        memcpy(buf + pending, text + at, n);
        pending += n;
        at += n;
        size_t used = (size_t)-1;
        r->rc = gw_resp_parse(&r->p, buf, pending, &used, &sink);
        check(used <= pending);
        memmove(buf, buf + used, pending - used);
        pending -= used;
    }
    if (r->rc == GW_RESP_MORE && eof)
        r->rc = gw_resp_eof(&r->p);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool head = data[0] & 1, eof = data[0] & 2;
    size_t piece = (size_t)(data[0] >> 2) + 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    run whole, parts;
    feed(&whole, text, len, head, len ? len : 1, eof);
    feed(&parts, text, len, head, piece, eof);
    check(whole.rc == parts.rc);
    check(whole.fields == parts.fields && whole.field_sum == parts.field_sum);
    check(whole.body_len == parts.body_len && whole.body_sum == parts.body_sum);
    check(whole.body_len <= len);
    if (whole.rc == GW_RESP_ERROR)
        check(whole.p.error != NULL && parts.p.error != NULL &&
              strcmp(whole.p.error, parts.p.error) == 0);
    if (whole.rc == GW_RESP_DONE) {
        check(whole.p.status >= 200 && whole.p.status <= 599);
        check(whole.p.status == parts.p.status && whole.p.keep == parts.p.keep);
        if (head || whole.p.status == 204 || whole.p.status == 304)
            check(whole.body_len == 0);
    }
    return 0;
}
