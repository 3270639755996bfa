/*
 * fuzz_gateway_options.c — the value parsers of `resil gateway --listen`,
 * `--max-body` and `--methods` (cmd_gateway.c reports their refusals by
 * name; the parsing is in gateway_parse.c).
 *
 * The first byte picks the parser; the rest, NUL-terminated, is the value.
 * The promises: an accepted --listen has a non-empty host that fits and a
 * port in 0..65535, and "HOST:PORT" (bracketed when the host holds ':')
 * parses back to the same; an accepted --max-body is 1 byte to 1GB and its
 * decimal form parses back to it; accepted --methods are 1..16 names of
 * upper-case letters, and the list joined by ',' parses back to them.
 * A refusal leaves no promise broken and touches nothing it should not.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void fuzz_listen(const char *v)
{
    char host[256], again[256];
    int port = -1, port2 = -1;
    if (gw_parse_listen(v, host, sizeof host, &port) != GW_LISTEN_OK)
        return;
    check(host[0] != '\0' && strlen(host) < sizeof host && port >= 0 && port <= 65535);
    char text[300];
    snprintf(text, sizeof text, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    check(gw_parse_listen(text, again, sizeof again, &port2) == GW_LISTEN_OK);
    check(strcmp(again, host) == 0 && port2 == port);
}

static void fuzz_size(const char *v)
{
    size_t n = 0, back = 0;
    if (!gw_parse_size(v, &n))
        return;
    check(n >= 1 && n <= (size_t)1 << 30);
    char text[32];
    snprintf(text, sizeof text, "%zu", n);
    check(gw_parse_size(text, &back) && back == n);
}

static void fuzz_methods(const char *v)
{
    char m[GW_MAX_METHODS][GW_METHOD_MAX], again[GW_MAX_METHODS][GW_METHOD_MAX];
    size_t n = 0, n2 = 0;
    if (!gw_parse_methods(v, m, GW_MAX_METHODS, &n))
        return;
    check(n >= 1 && n <= GW_MAX_METHODS);
    char joined[GW_MAX_METHODS * GW_METHOD_MAX + 1] = "";
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(m[i]);
        check(len >= 1 && len < GW_METHOD_MAX);
        for (size_t j = 0; j < len; j++)
            check(m[i][j] >= 'A' && m[i][j] <= 'Z');
        if (i > 0)
            strcat(joined, ",");
        strcat(joined, m[i]);
    }
    check(gw_parse_methods(joined, again, GW_MAX_METHODS, &n2) && n2 == n);
    for (size_t i = 0; i < n; i++)
        check(strcmp(again[i], m[i]) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    char *v = malloc(size);
    check(v != NULL);
    memcpy(v, data + 1, size - 1);
    v[size - 1] = '\0';
    switch (data[0] % 3) {
    case 0: fuzz_listen(v); break;
    case 1: fuzz_size(v); break;
    default: fuzz_methods(v); break;
    }
    free(v);
    return 0;
}
