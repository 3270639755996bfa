/*
 * fuzz_redis_scan.c — the keys SCAN hands resil_redis_list, which anyone
 * with access to Redis may have set: the first byte picks how much of the
 * key is the prefix and "breaker:", the rest is the key, read as a bulk
 * string through a reader with the adapter's bounds (so it may hold NULs
 * and any byte). Beyond "no crash, no read past the key": a name taken is
 * the key's tail after the prefix, non-empty, shorter than
 * RESIL_BREAKER_NAME_MAX, free of control bytes and NULs, and does not
 * start with a space — a name a breaker could have.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../src/redis/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static redisReply *as_key(const uint8_t *data, size_t size)
{
    char head[32];
    int n = snprintf(head, sizeof head, "$%zu\r\n", size);
    char *text = malloc((size_t)n + size + 2);
    if (text == NULL)
        return NULL;
    memcpy(text, head, (size_t)n);
    memcpy(text + n, data, size);
    memcpy(text + (size_t)n + size, "\r\n", 2);
    redisReader *rd = redisReaderCreate();
    if (rd == NULL || resil__fleet_reader_bound(rd) != 0)
        abort();
    redisReaderFeed(rd, text, (size_t)n + size + 2);
    free(text);
    void *reply = NULL;
    char why[128];
    int got = resil__fleet_reader_next(rd, &reply, why, sizeof why);
    resil__fleet_reader_free(rd);
    return got > 0 ? reply : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t skip = data[0] % 96;
    redisReply *key = as_key(data + 1, size - 1);
    if (key == NULL)
        return 0;
    const char *name = resil__fleet_key_name(key, skip);
    if (name != NULL) {
        size_t len = strlen(name);
        if (name != key->str + skip || skip + len != key->len || len == 0 ||
            len >= RESIL_BREAKER_NAME_MAX || name[0] == ' ')
            abort();
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] == 0x7f)
                abort();
    }
    freeReplyObject(key);
    return 0;
}
