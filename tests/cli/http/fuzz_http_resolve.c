/*
 * fuzz_http_resolve.c — `--resolve HOST:PORT:ADDR[,ADDR]...` on arbitrary
 * text, judged against an oracle written here from the documented form:
 * an optional '+' (or '-' for a removal, which has no addresses), a host
 * without spaces, brackets, commas or colons, a port of 1 to 5 digits up
 * to 65535, then (unless removing) addresses separated by commas, each
 * non-empty: a bracketed IPv6 literal, or printable text without spaces,
 * colons or brackets. An accepted entry is appended as given; a rejected
 * one names --resolve and leaves the list alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "http_opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool oracle_address(const char *p, size_t n)
{
    if (n == 0)
        return false;
    if (p[0] == '[') {
        if (n < 3 || p[n - 1] != ']')
            return false;
        for (size_t i = 1; i + 1 < n; i++) {
            if (p[i] == '[' || p[i] == ']')
                return false;
        }
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= 32 || c >= 127 || c == ':' || c == '[' || c == ']')
            return false;
    }
    return true;
}

static bool oracle(const char *t)
{
    bool removal = t[0] == '-';
    if (t[0] == '+' || t[0] == '-')
        t++;
    size_t host = 0;
    while (t[host] != '\0' && t[host] != ':') {
        unsigned char c = (unsigned char)t[host];
        if (c <= 32 || c == '[' || c == ']' || c == ',')
            return false;
        host++;
    }
    if (host == 0 || t[host] != ':')
        return false;
    const char *port = t + host + 1;
    size_t digits = 0;
    unsigned long v = 0;
    while (port[digits] >= '0' && port[digits] <= '9') {
        v = v * 10 + (unsigned long)(port[digits] - '0');
        if (++digits > 5)
            return false;
    }
    if (digits == 0 || v > 65535)
        return false;
    const char *rest = port + digits;
    if (removal)
        return *rest == '\0';
    if (*rest != ':')
        return false;
    const char *p = rest + 1;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (!oracle_address(p, n))
            return false;
        if (comma == NULL)
            return true;
        p = comma + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    static char *argv[] = {"resil fuzz", NULL};
    args a;
    args_init(&a, "resil fuzz", 1, argv);
    resil_err err = {0};
    a.err = &err;
    struct curl_slist *list = NULL;
    int rc = http_resolve_parse(&a, text, &list);
    bool want = oracle(text);
    if (rc == 0) {
        check(want);
        check(list != NULL && strcmp(list->data, text) == 0 && list->next == NULL);
    } else {
        check(!want);
        check(rc == RESIL_EINVAL && list == NULL && strstr(err.message, "--resolve") != NULL);
    }
    curl_slist_free_all(list);
    free(text);
    return 0;
}
