/*
 * cancel.h — the cancellation token.
 *
 * C cannot preempt a function, so cancellation is cooperative: an operation
 * polls resil_cancel_fired() or hands the token to a wait, and any waiting
 * resil does (clock sleep, bulkhead queue, rate-limiter acquire) wakes up at
 * once when the token fires.
 *
 * The token is a caller-owned struct rather than an opaque heap object so
 * that executors can keep per-attempt tokens on the stack: the execution path
 * must not allocate. Its fields are private. A token may be linked to a
 * parent: firing the parent fires every linked child (an attempt token under
 * the execution's token). Firing is idempotent and thread-safe; the fired
 * check is an atomic load per token from it up to the nearest ancestor that
 * anything waits on (a child joins its parent's list only when it is first
 * waited on or given a waited-on child).
 *
 * A fire takes the locks over the child lists (and, for a token an
 * asynchronous execution watches, the loop's post), so it is not
 * async-signal-safe: a handler that interrupted the holder of one of those
 * locks would wait for it forever. Take signals on a thread, with
 * sigwaitinfo() or a signalfd, and fire from there.
 */
#ifndef RESIL_CANCEL_H
#define RESIL_CANCEL_H

#include <pthread.h>

#include "common.h"

RESIL_BEGIN_DECLS

struct resil_cancel {
    /* private */
    int state;                   /* armed, fired, or armed with sleepers;
                                    atomic; on Linux the futex word */
    int reason;                  /* RESIL_ECANCELED or RESIL_ETIMEDOUT */
    int lock;                    /* spinlock over the child list */
    int unlinked;                /* atomic: 1 while a child is not yet in
                                    its parent's list (fills padding) */
    struct resil_cancel *parent; /* guarded by parent->lock */
    struct resil_cancel *first_child, *next_sibling, *prev_sibling;
#ifndef __linux__
    pthread_mutex_t mu;          /* sleepers wait on cv; CLOCK_MONOTONIC */
    pthread_cond_t cv;
#endif
};

typedef struct resil_cancel resil_cancel;

/* Initialise a token; `parent` may be NULL. Returns 0 or RESIL_ESYS. A child
 * of an already-fired parent starts fired. */
RESIL_API int resil_cancel_init(resil_cancel *c, resil_cancel *parent);
/* Unlink from the parent and release. Children must be destroyed first. */
RESIL_API void resil_cancel_destroy(resil_cancel *c);
/* Fire with reason RESIL_ECANCELED. */
RESIL_API void resil_cancel_fire(resil_cancel *c);
/* Fire with a reason (RESIL_ECANCELED, or RESIL_ETIMEDOUT for a deadline);
 * the first fire's reason sticks and propagates to children. */
RESIL_API void resil_cancel_fire_reason(resil_cancel *c, int reason);
RESIL_API bool resil_cancel_fired(const resil_cancel *c);
/* The reason it fired with, or 0 while not fired. */
RESIL_API int resil_cancel_reason(const resil_cancel *c);

/* NULL-tolerant check used on hot paths. */
static inline bool resil_cancelled(const resil_cancel *c)
{
    return c != NULL && resil_cancel_fired(c);
}

/*
 * Wait on the token until it fires or `deadline_ns` on CLOCK_MONOTONIC
 * passes (INT64_MAX: no deadline). Returns RESIL_ECANCELED if it fired,
 * 0 at the deadline. The system clock's sleep is built on this.
 */
RESIL_API int resil_cancel_wait_until(resil_cancel *c, int64_t deadline_ns);

RESIL_END_DECLS

#endif
