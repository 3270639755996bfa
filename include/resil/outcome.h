/*
 * outcome.h — what an attempt produced, and which outcomes are retryable.
 *
 * An operation reports an outcome; a separate classifier decides whether a
 * failure is worth retrying. Keeping the two apart is what lets one policy
 * serve HTTP (statuses), processes (exit codes) and databases (SQLSTATEs).
 * The outcome is a small fixed-size value with no pointers to own, so that
 * attempt records can be copied freely and the execution path never
 * allocates; the detail text is truncated to fit.
 */
#ifndef RESIL_OUTCOME_H
#define RESIL_OUTCOME_H

#include "time.h"

RESIL_BEGIN_DECLS

typedef enum resil_kind {
    RESIL_SUCCESS = 0,
    RESIL_TRANSIENT = 1, /* may succeed if tried again */
    RESIL_THROTTLED = 2, /* the server asked us to slow down */
    RESIL_TIMEOUT = 3,   /* the attempt ran out of time */
    RESIL_PERMANENT = 4, /* trying again cannot help */
    RESIL_CANCELLED = 5, /* the caller gave up */
    RESIL_REJECTED = 6,  /* a resilience strategy refused to run it */
    RESIL_KIND_USER = 64 /* first value free for a caller's own kinds */
} resil_kind;

#define RESIL_DETAIL_MAX 64
#define RESIL_NO_HINT ((resil_duration)-1)

typedef struct resil_outcome {
    resil_kind kind;
    int64_t code;               /* domain code: HTTP status, errno, exit code */
    resil_duration retry_after; /* the server's wait hint, RESIL_NO_HINT if none */
    char detail[RESIL_DETAIL_MAX]; /* short text, e.g. "connection reset"; NUL-
                                      terminated, bytes after the NUL unspecified */
} resil_outcome;

/* "Success", "Transient", "Throttled", "Timeout", "Permanent", "Cancelled",
 * "Rejected", or "User" for caller kinds. */
RESIL_API const char *resil_kind_name(resil_kind k);

RESIL_API resil_outcome resil_ok(void);
/* A failure with kind and code; detail may be NULL and is cut to
 * RESIL_DETAIL_MAX - 1 bytes. */
RESIL_API resil_outcome resil_fail(resil_kind k, int64_t code, const char *detail);
/* A failure carrying a server wait hint (typically RESIL_THROTTLED); a
 * negative retry_after means "no hint" and is stored as RESIL_NO_HINT. */
RESIL_API resil_outcome resil_fail_after(resil_kind k, int64_t code,
                                         const char *detail,
                                         resil_duration retry_after);
static inline bool resil_outcome_ok(const resil_outcome *o)
{
    return o->kind == RESIL_SUCCESS;
}

/* The attempt that produced an outcome: its number, deadline, token, the
 * hedge it was, and the call's user data (retry.h). */
typedef struct resil_attempt_ctx resil_attempt_ctx;

/* A classifier: is this failure worth another attempt? `ctx` is the
 * attempt that failed, as its operation saw it — ctx->user is the call's
 * own context, so one classifier shared by many concurrent calls can tell
 * them apart. Never NULL. */
typedef bool (*resil_retry_on_fn)(const resil_outcome *o, const resil_attempt_ctx *ctx,
                                  void *ud);

/* The default rule: transient, throttled and timeout are retryable;
 * everything else is not. A NULL classifier means this rule; a classifier
 * of your own may defer to it. */
RESIL_API bool resil_retry_on_default(const resil_outcome *o, void *ud);

RESIL_END_DECLS

#endif
