/*
 * outcome.c — constructing outcomes and the default classifier.
 *
 * An outcome is a plain value copied into attempt records, so building one
 * must never allocate: the detail text is copied into the fixed array and
 * cut short (always NUL-terminated) rather than referenced or duplicated.
 * Only the text and its NUL (to the end of their last 8-byte word) are
 * written: an operation returns an outcome on every call, and the rest of
 * the array is never read. How the bytes are stored matters as much as
 * how many: see failure() below.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "resil/outcome.h"

const char *resil_kind_name(resil_kind k)
{
    switch (k) {
    case RESIL_SUCCESS:
        return "Success";
    case RESIL_TRANSIENT:
        return "Transient";
    case RESIL_THROTTLED:
        return "Throttled";
    case RESIL_TIMEOUT:
        return "Timeout";
    case RESIL_PERMANENT:
        return "Permanent";
    case RESIL_CANCELLED:
        return "Cancelled";
    case RESIL_REJECTED:
        return "Rejected";
    default:
        return "User";
    }
}

/* An outcome built field by field, with narrow stores, is then copied
 * (into the caller's slot, into an attempt record) with 16-byte loads,
 * and a load that spans several pending stores cannot be forwarded from
 * them: it waits until they reach the cache. So a failure is written in
 * the copies' own pieces: 16 bytes at offsets 0, 16, 32, 48 and 64 and
 * 8 at 80, each composed in registers and stored once. The detail's words
 * are gathered a byte at a time (nothing is read past its NUL or its 63rd
 * byte); the words after the one holding the NUL are not written, as
 * their bytes are never read. */
_Static_assert(offsetof(resil_outcome, code) == 8 && offsetof(resil_outcome, retry_after) == 16 &&
                   offsetof(resil_outcome, detail) == 24 && sizeof(resil_outcome) == 88 &&
                   RESIL_DETAIL_MAX == 64 && sizeof(resil_kind) == 4,
               "the pieces below follow resil_outcome's layout");

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BYTE_AT(c, j) ((uint64_t)(c) << (8 * (j)))
#else
#define BYTE_AT(c, j) ((uint64_t)(c) << (56 - 8 * (j)))
#endif

typedef uint64_t piece __attribute__((vector_size(16)));

static inline void put16(unsigned char *at, uint64_t lo, uint64_t hi)
{
    piece v = {lo, hi};
    memcpy(at, &v, sizeof v);
}

/* The detail's word `i` (bytes 8i to 8i+7), zero from its NUL on;
 * *ended tells whether the NUL is in it. */
static inline uint64_t detail_word(const char *src, size_t i, bool *ended)
{
    uint64_t w = 0;
#pragma GCC unroll 1
    for (size_t j = 0; j < 8; j++) {
        size_t n = 8 * i + j;
        unsigned char c = n < RESIL_DETAIL_MAX - 1 ? (unsigned char)src[n] : 0;
        if (c == 0) {
            *ended = true;
            return w;
        }
        w |= BYTE_AT(c, j);
    }
    return w;
}

/* Both constructors are this, inline in each: resil_fail() returning
 * resil_fail_after()'s value paid a second call and its frame. */
static inline resil_outcome failure(resil_kind k, int64_t code, const char *detail,
                                    resil_duration retry_after)
{
    union {
        resil_outcome o;
        unsigned char b[sizeof(resil_outcome)];
    } u;
    uint32_t kind = (uint32_t)k;
    uint64_t head = 0;
    memcpy(&head, &kind, sizeof kind); /* the kind's bytes where the field lies */
    put16(u.b, head, (uint64_t)code);
    uint64_t hint = (uint64_t)(retry_after < 0 ? RESIL_NO_HINT : retry_after);
    bool ended = detail == NULL;
    put16(u.b + 16, hint, ended ? 0 : detail_word(detail, 0, &ended));
    for (size_t i = 1; !ended && i < 7; i += 2) {
        uint64_t lo = detail_word(detail, i, &ended);
        put16(u.b + 16 + 8 * (i + 1), lo, ended ? 0 : detail_word(detail, i + 1, &ended));
    }
    if (!ended) { /* the last word: bytes 56 to 62 and the NUL */
        uint64_t last = detail_word(detail, 7, &ended);
        memcpy(u.b + 80, &last, sizeof last);
    }
    return u.o;
}

/* Copied whole, as bytes, from a constant: the copy is then made of wide
 * stores at the offsets where the caller's own copy of the result loads,
 * so those loads forward from the store buffer. Built field by field (a
 * narrow store for the kind, the padding skipped), every wide load of a
 * copy made right after would stall until the stores drained. */
static const union {
    resil_outcome o;
    unsigned char bytes[sizeof(resil_outcome)];
} ok_outcome = {.o = {.kind = RESIL_SUCCESS, .code = 0, .retry_after = RESIL_NO_HINT,
                      .detail = ""}};

resil_outcome resil_ok(void)
{
    resil_outcome o;
    memcpy(&o, ok_outcome.bytes, sizeof o);
    return o;
}

resil_outcome resil_fail(resil_kind k, int64_t code, const char *detail)
{
    return failure(k, code, detail, RESIL_NO_HINT);
}

resil_outcome resil_fail_after(resil_kind k, int64_t code, const char *detail,
                               resil_duration retry_after)
{
    return failure(k, code, detail, retry_after);
}

bool resil_retry_on_default(const resil_outcome *o, void *ud)
{
    (void)ud;
    return o != NULL && resil__retryable_kind(o->kind);
}
