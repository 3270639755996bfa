/*
 * fuzz_gateway_request.c — what `resil gateway` parses from a request
 * before anything acts on it (cli/gateway/gateway_parse.c).
 *
 * The first byte picks the parser, the rest is its input. The promises:
 *  - a target accepted as origin-form starts with '/' and holds only
 *    pchar, '/', '?' and '%' HEX HEX; its path ends at its first '?';
 *  - an accepted Idempotency-Key unquotes to 1..255 printable ASCII bytes;
 *    a bare one is itself, a quoted one re-quotes (escaping '"' and '\')
 *    to exactly its input; a refusal says which rule it broke;
 *  - an accepted tenant is 1..255 printable bytes, no space at either end;
 *  - framing: the input as header lines; a refusal is 400, 413 or 417 with
 *    a code and a sentence, an acceptance has consistent lengths within
 *    the limit;
 *  - the header-block check accepts nothing it should not: with no spans,
 *    only a block of separators.
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

static int printable(unsigned char c) { return c >= 0x20 && c <= 0x7e; }

static void fuzz_target(const char *t, size_t len)
{
    if (!gw_target_is_origin_form(t, len))
        return;
    check(len > 0 && t[0] == '/');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        check(printable(c) && c != ' ' && c != '#' && c != '"' && c != '<' && c != '>' &&
              c != '\\' && c != '^' && c != '[' && c != ']' && c != '`' && c != '{' && c != '|' && c != '}');
        if (c == '%')
            check(i + 2 < len);
    }
    size_t path = gw_target_path_len(t, len);
    check(path <= len && memchr(t, '?', path) == NULL);
    check(path == len || t[path] == '?');
}

static void fuzz_key(const char *v, size_t len)
{
    char out[RESIL_STORE_FIELD_MAX + 1];
    size_t n = 99999;
    const char *why = gw_parse_key(v, len, out, sizeof out, &n);
    if (why != NULL) {
        check(why[0] != '\0' && n == 0);
        return;
    }
    check(n >= 1 && n <= RESIL_STORE_FIELD_MAX && out[n] == '\0');
    for (size_t i = 0; i < n; i++)
        check(printable((unsigned char)out[i]));
    if (len == 0 || v[0] != '"') {
        check(n == len && memcmp(out, v, n) == 0);
        return;
    }
    char quoted[2 * RESIL_STORE_FIELD_MAX + 3];
    size_t q = 0;
    quoted[q++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (out[i] == '"' || out[i] == '\\')
            quoted[q++] = '\\';
        quoted[q++] = out[i];
    }
    quoted[q++] = '"';
    check(q == len && memcmp(quoted, v, len) == 0);
}

static void fuzz_tenant(const char *v, size_t len)
{
    if (gw_check_tenant(v, len) != NULL)
        return;
    check(len >= 1 && len <= RESIL_STORE_FIELD_MAX && v[0] != ' ' && v[len - 1] != ' ');
    for (size_t i = 0; i < len; i++)
        check(printable((unsigned char)v[i]));
}

/* Lines "name:value", split at '\n'; the first byte is the body limit. */
static void fuzz_framing(const char *v, size_t len)
{
    if (len == 0)
        return;
    size_t max_body = (unsigned char)v[0];
    gw_framing f = {0};
    const char *p = v + 1, *end = v + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon != NULL)
            gw_framing_add(&f, p, (size_t)(colon - p), colon + 1,
                           (size_t)(line_end - colon - 1));
        p = eol ? eol + 1 : end;
    }
    gw_refusal why = {0};
    bool http11 = len % 2 == 0;
    if (gw_framing_check(&f, http11, max_body, &why)) {
        check(!f.bad_field && !f.content_length_bad && !f.expect_other);
        check(f.hosts <= 1 && (!http11 || f.hosts == 1));
        check(f.content_lengths == 0 || (!f.transfer_encoding && f.content_length <= max_body));
        return;
    }
    check(why.status == 400 || why.status == 413 || why.status == 417);
    check(why.code != NULL && why.message != NULL && why.message[0] != '\0');
}

/* Spans from pairs of bytes; the block is the input. */
static void fuzz_block(const char *v, size_t len)
{
    if (len < 1)
        return;
    size_t n = (unsigned char)v[0] % 8;
    gw_span spans[8] = {{0, 0}};
    if (len < 1 + 2 * n)
        return;
    for (size_t i = 0; i < n; i++)
        spans[i] = (gw_span){.at = (unsigned char)v[1 + 2 * i], .len = (unsigned char)v[2 + 2 * i]};
    const char *block = v + 1 + 2 * n;
    size_t size = len - 1 - 2 * n;
    bool clean = gw_header_block_clean(block, size, spans, n);
    if (n == 0) {
        bool separators = true;
        for (size_t i = 0; i < size; i++)
            separators = separators && strchr(" \t\r\n", block[i]) != NULL;
        check(clean == separators);
    }
    if (clean) {
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            check(spans[i].at >= at && spans[i].at + spans[i].len <= size);
            at = spans[i].at + spans[i].len;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *v = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 5) {
    case 0: fuzz_target(v, len); break;
    case 1: fuzz_key(v, len); break;
    case 2: fuzz_tenant(v, len); break;
    case 3: fuzz_framing(v, len); break;
    default: fuzz_block(v, len); break;
    }
    return 0;
}
