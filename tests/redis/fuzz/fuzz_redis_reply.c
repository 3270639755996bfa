/*
 * fuzz_redis_reply.c — bytes from a server, read as the client reads its
 * command connection: a hiredis reader with the adapter's bounds, fed in
 * pieces (the first byte picks their size, as reads split a stream), each
 * reply then handed to every decoder an answer meets (a script answer for
 * each op, the error classes, a SCAN page's keys). Beyond "no crash, no
 * leak": no reply the reader lets through exceeds the bounds (elements,
 * nesting, string length), and a decoded answer is within the ranges the
 * cache relies on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../../src/redis/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_bounds(const redisReply *r, int depth)
{
    if (r->type == REDIS_REPLY_ARRAY) {
        if (depth > FLEET_REPLY_DEPTH_MAX || r->elements > FLEET_REPLY_ELEMENTS_MAX)
            abort();
        for (size_t i = 0; i < r->elements; i++)
            check_bounds(r->element[i], depth + 1);
    }
    if ((r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
         r->type == REDIS_REPLY_ERROR) &&
        r->len > FLEET_REPLY_STRING_MAX)
        abort();
}

static void check_state(const fleet_state *s)
{
    if (s->state > RESIL_BREAKER_ISOLATED || s->epoch > (uint64_t)FLEET_EPOCH_MAX ||
        s->until_ms < 0 || s->until_ms > FLEET_WALL_MS_MAX || s->lastopen_ms < 0 ||
        s->lastopen_ms > FLEET_WALL_MS_MAX || s->inflight > RESIL_REDIS_MAX_PROBES ||
        s->slot >= RESIL_REDIS_MAX_PROBES || s->reason > RESIL_BREAKER_BY_DISABLE)
        abort();
}

static void decode_all(const redisReply *r)
{
    static const fleet_op ops[] = {FLEET_SYNC, FLEET_PROBE, FLEET_STATUS, FLEET_LEASE};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        fleet_cmd c = {.op = ops[i]};
        fleet_state s;
        if (resil__fleet_decode(&c, r, &s) == 0 && ops[i] != FLEET_LEASE &&
            s.code != FLEET_MISSING)
            check_state(&s);
    }
    (void)resil__fleet_noscript(r);
    (void)resil__fleet_unavailable(r);
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_ARRAY) {
        const redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++)
            (void)resil__fleet_key_name(keys->element[i], 14);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL || resil__fleet_reader_bound(rd) != 0)
        abort();
    bool broken = false;
    for (size_t at = 1; at < size && !broken; at += piece) {
        size_t n = size - at < piece ? size - at : piece;
        if (redisReaderFeed(rd, (const char *)data + at, n) != REDIS_OK)
            abort();
        for (;;) {
            void *reply = NULL;
            char why[128];
            int got = resil__fleet_reader_next(rd, &reply, why, sizeof why);
            if (got < 0) {
                if (why[0] == '\0')
                    abort();
                broken = true;
            }
            if (got <= 0)
                break;
            check_bounds(reply, 1);
            decode_all(reply);
            freeReplyObject(reply);
        }
    }
    resil__fleet_reader_free(rd);
    return 0;
}
