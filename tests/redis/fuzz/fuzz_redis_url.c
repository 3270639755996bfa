/*
 * fuzz_redis_url.c — the Redis URL parser (resil_redis_opts.url, and
 * `resil breaker --url` or RESIL_REDIS_URL) on arbitrary bytes. Beyond "no
 * crash, no read past the string", it checks what the connecting code
 * relies on: a refusal is RESIL_EINVAL with a message, and a URL taken has
 * a non-empty host, a port in [1, 65535] and a database in [0, 100000],
 * every part NUL-terminated within its field, and a host of letters,
 * digits and "-._~" only (and ':' and '%' for a bracketed IPv6 address),
 * so free of the characters that delimit it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../../src/redis/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_field(const char *field, size_t cap)
{
    if (memchr(field, '\0', cap) == NULL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    if (url == NULL)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    fleet_url u;
    resil_err err = {0};
    int rc = resil__fleet_url_parse(url, &u, &err);
    free(url);
    if (rc != 0) {
        if (rc != RESIL_EINVAL || err.code != rc || err.message[0] == '\0')
            abort();
        return 0;
    }
    check_field(u.host, sizeof u.host);
    check_field(u.user, sizeof u.user);
    check_field(u.password, sizeof u.password);
    if (u.host[0] == '\0' || u.port < 1 || u.port > 65535 || u.db < 0 || u.db > 100000)
        abort();
    if (u.host[strspn(u.host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~:%")] !=
        '\0')
        abort();
    return 0;
}
