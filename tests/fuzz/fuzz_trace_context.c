/*
 * fuzz_trace_context.c — traceparent and tracestate parsing of arbitrary
 * bytes (both parsers see every input).
 *
 * The properties: the parsers read only the bytes they are given (ASan sees
 * the rest); a refused traceparent leaves the output untouched; an accepted
 * one has non-zero ids and formats to 55 bytes that parse back to the same
 * ids and flags (for version 00, to the input itself once trimmed); a
 * refused tracestate is emptied; an accepted one is at most 512 bytes, has
 * no blank member, and parses back to itself.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resil/telemetry.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

static int zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

static void traceparent(const char *text, size_t size)
{
    static resil_span_context c, back;
    memset(&c, 0x77, sizeof c);
    if (resil_traceparent_parse(text, size, &c, NULL) != 0) {
        check(c.flags == 0x77 && c.trace_id[0] == 0x77);
        return;
    }
    check(!zero(c.trace_id, 16) && !zero(c.span_id, 8));
    char buf[RESIL_TRACEPARENT_LEN + 1];
    check(resil_traceparent_format(&c, buf, sizeof buf) == RESIL_TRACEPARENT_LEN);
    check(strlen(buf) == RESIL_TRACEPARENT_LEN);
    check(resil_traceparent_parse(buf, RESIL_TRACEPARENT_LEN, &back, NULL) == 0);
    check(memcmp(back.trace_id, c.trace_id, 16) == 0);
    check(memcmp(back.span_id, c.span_id, 8) == 0 && back.flags == c.flags);
    while (size > 0 && (*text == ' ' || *text == '\t')) {
        text++;
        size--;
    }
    if (text[0] == '0' && text[1] == '0')
        check(memcmp(text, buf, RESIL_TRACEPARENT_LEN) == 0);
}

static void tracestate(const char *text, size_t size)
{
    static resil_span_context c, back;
    if (resil_tracestate_parse(text, size, &c, NULL) != 0) {
        check(c.tracestate[0] == '\0');
        return;
    }
    size_t n = strlen(c.tracestate);
    check(n <= RESIL_TRACESTATE_MAX);
    check(strstr(c.tracestate, ",,") == NULL && c.tracestate[0] != ',');
    check(resil_tracestate_parse(c.tracestate, n, &back, NULL) == 0);
    check(strcmp(back.tracestate, c.tracestate) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    traceparent((const char *)data, size);
    tracestate((const char *)data, size);
    return 0;
}
