/*
 * fuzz_redis_message.c — what anyone may PUBLISH on the fleet's channel,
 * as the subscriber receives it: the bytes are the payload of a "message"
 * push, read through a reader with the adapter's bounds, then decoded as a
 * state change. Beyond "no crash, no read past the payload": a message
 * taken has a state, epoch, time and reason within the ranges the cached
 * word and the ns conversion need, and a name a breaker could have, inside
 * the payload.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../src/redis/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static redisReply *as_message(const uint8_t *data, size_t size)
{
    char head[96];
    int n = snprintf(head, sizeof head,
                     "*3\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n$%zu\r\n", size);
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
    if (got < 0 && size <= FLEET_REPLY_STRING_MAX)
        abort(); /* a message within the bounds is always read */
    return got > 0 ? reply : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReply *m = as_message(data, size);
    if (m == NULL)
        return 0;
    fleet_state s;
    const char *name = NULL;
    if (resil__fleet_parse_message(m, &s, &name)) {
        const char *payload = m->element[2]->str;
        if (s.state > RESIL_BREAKER_ISOLATED || s.epoch > (uint64_t)FLEET_EPOCH_MAX ||
            s.until_ms < 0 || s.until_ms > FLEET_WALL_MS_MAX ||
            s.reason > RESIL_BREAKER_BY_DISABLE || !resil__fleet_name_ok(name) ||
            name <= payload || name >= payload + m->element[2]->len)
            abort();
    }
    freeReplyObject(m);
    return 0;
}
