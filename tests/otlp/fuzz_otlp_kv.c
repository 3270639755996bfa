/*
 * fuzz_otlp_kv.c — the key=value list parser behind OTEL_EXPORTER_OTLP_HEADERS
 * and OTEL_RESOURCE_ATTRIBUTES, on arbitrary bytes.
 *
 * The properties: it reads only the bytes it is given (ASan sees the rest);
 * an accepted list has at most 32 entries, every key a non-empty HTTP token
 * and every value free of control characters (a header value can never
 * carry a line break); a refused one says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/otlp/otlp_internal.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static otlp_kvs kvs;
    resil_err err = {0, ""};
    if (resil__otlp_kv_parse((const char *)data, size, &kvs, "fuzz", &err) != 0) {
        check(err.code == RESIL_EINVAL && strncmp(err.message, "fuzz: entry ", 12) == 0);
        return 0;
    }
    check(kvs.n >= 0 && kvs.n <= OTLP_KV_MAX);
    for (int i = 0; i < kvs.n; i++) {
        check(kvs.kv[i].key[0] != '\0');
        for (const char *c = kvs.kv[i].key; *c; c++)
            check(*c > 0x20 && *c < 0x7f && *c != '=' && *c != ',');
        for (const char *c = kvs.kv[i].value; *c; c++)
            check((unsigned char)*c >= 0x20 && *c != 0x7f);
    }
    return 0;
}
