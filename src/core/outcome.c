/*
 * outcome.c — constructing outcomes and the default classifier.
 *
 * An outcome is a plain value copied into attempt records, so building one
 * must never allocate: the detail text is copied into the fixed array and
 * cut short (always NUL-terminated) rather than referenced or duplicated.
 * Only the text and its NUL are written: an operation returns an outcome
 * on every call, and the rest of the array is never read.
 */
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

/* The text and its NUL; the bytes after it are never read, so they are
 * not cleared (a 64-byte clear used to be most of what building an
 * outcome cost). */
static void copy_detail(char *dst, const char *src)
{
    size_t n = 0;
    if (src != NULL) {
        while (n < RESIL_DETAIL_MAX - 1 && src[n] != '\0')
            n++;
        memcpy(dst, src, n);
    }
    dst[n] = '\0';
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

/* Both constructors are this, inline in each: resil_fail() returning
 * resil_fail_after()'s value paid a second call and its frame. */
static inline resil_outcome failure(resil_kind k, int64_t code, const char *detail,
                                    resil_duration retry_after)
{
    resil_outcome o;
    o.kind = k;
    o.code = code;
    o.retry_after = retry_after < 0 ? RESIL_NO_HINT : retry_after;
    copy_detail(o.detail, detail);
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
