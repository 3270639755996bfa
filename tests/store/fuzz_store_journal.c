/*
 * fuzz_store_journal.c — the journal's record decoder on arbitrary bytes.
 *
 * The journal is read back after a crash, from a file that may end in a
 * torn record or hold anything a disk returns, so its decoder is a parser
 * of untrusted bytes. The input is walked as a journal body: record after
 * record until one does not decode; then again with each record given the
 * CRC its payload has, so that the checks behind the CRC are fuzzed too.
 * The properties: the decoder reads only the bytes it is given (ASan sees
 * the rest); a failure consumes nothing;
 * a record that decodes consumed exactly its encoded size, within the
 * input, and encodes back to the very bytes it came from (so nothing is
 * misread: a bit flipped anywhere is a failure, not another record); its
 * tenant, operation and key are printable ASCII within the store's length
 * limits, the key non-empty; headers and body lie inside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/store/store_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static int printable(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

static int inside(const void *p, size_t len, const uint8_t *data, size_t size)
{
    const uint8_t *b = p;
    return len == 0 || (b >= data && b + len <= data + size);
}

static void check_record(const journal_record *r, const uint8_t *at, size_t used,
                         const uint8_t *data, size_t size)
{
    check(r->key_len >= 1 && r->key_len <= RESIL_STORE_FIELD_MAX);
    check(r->tenant_len <= RESIL_STORE_FIELD_MAX && r->operation_len <= RESIL_STORE_FIELD_MAX);
    check(printable(r->tenant, r->tenant_len) && printable(r->operation, r->operation_len) &&
          printable(r->key, r->key_len));
    check(inside(r->headers, r->headers_len, data, size) && inside(r->body, r->body_len, data, size));
    check(resil__journal_encoded_size(r) == used);
    uint8_t *again = malloc(used);
    check(again != NULL);
    resil__journal_encode(r, again);
    check(memcmp(again, at, used) == 0);
    free(again);
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Give the record at `p` (`left` bytes on) the CRC its claimed payload
 * has, when that payload lies within them. */
static void reseal(uint8_t *p, size_t left)
{
    if (left < 8 || get_be32(p) > left - 8)
        return;
    uint32_t sum = resil__journal_crc32(p + 8, get_be32(p));
    for (int i = 3; i >= 0; i--, sum >>= 8)
        p[4 + i] = (uint8_t)sum;
}

/* The input as a journal body, record after record until one does not
 * decode; with `resealed`, each record is first given its payload's CRC
 * (a fuzzer seldom guesses one, and every check behind it would go
 * unexplored). */
static void walk(uint8_t *data, size_t size, int resealed)
{
    size_t at = 0;
    while (at < size) {
        if (resealed)
            reseal(data + at, size - at);
        journal_record r;
        size_t used = 12345;
        if (resil__journal_decode(data + at, size - at, &r, &used) != 0) {
            check(used == 0);
            break;
        }
        check(used > 0 && used <= size - at);
        check_record(&r, data + at, used, data, size);
        at += used;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size > 0 ? size : 1);
    check(copy != NULL);
    memcpy(copy, data, size);
    walk(copy, size, 0);
    walk(copy, size, 1);
    free(copy);
    return 0;
}
