/*
 * ratelimit.h — rate limiters: token bucket, fixed window, sliding window.
 *
 * A bulkhead bounds how many calls run at once; a rate limiter bounds how
 * many start per unit of time. Three classic shapes share one handle, the
 * kind chosen in the options:
 *
 *  - token bucket: `rate` permits are earned every `period`, continuously
 *    (one every period/rate), and up to `burst` may be saved. It starts full.
 *  - fixed window: at most `permits` per `window`; windows are consecutive,
 *    the first starting when the limiter is created. Cheap, but allows up to
 *    2 × permits across a window boundary.
 *  - sliding window: at most `permits` in ANY interval of length `window`
 *    (an exact sliding log kept in a ring of `permits` entries allocated at
 *    construction).
 *
 * All arithmetic is in integers: the token bucket counts in units of
 * 1/period of a permit per nanosecond, so an empty "3 per second" bucket
 * admits again at exactly 333 333 334 ns and never drifts; the fake clock
 * therefore gives exact, repeatable admit/reject sequences.
 *
 * A rejection says when the same request would succeed (retry_after), so a
 * caller can answer 429 with a Retry-After, and the blocking acquire sleeps
 * exactly that long. acquire() is not a fair queue: a sleeper tries again
 * when its wait is over and may lose to a newcomer; put a bulkhead in front
 * when order matters. Asking for more than the limiter can ever hold
 * (n > burst, n > permits) is RESIL_EINVAL, never a wait that cannot end.
 *
 * A resil_ratelimit is a handle over an implementation: the three built-in
 * kinds above are one, and an application may plug in its own (a fleet-wide
 * limiter shared through a store, say) with a resil_ratelimit_ops table and
 * resil_ratelimit_new_custom(). Everything that takes a limiter — the
 * pipeline first — takes any of them through this one API, and the blocking
 * acquire, the counters and the argument checks are the handle's, so an
 * implementation writes only its non-blocking step. The built-in kinds pay
 * nothing for the seam: their step already reads the kind to choose the
 * arithmetic, and another implementation's handle holds a kind no built-in
 * limiter has, so that same read finds it.
 */
#ifndef RESIL_RATELIMIT_H
#define RESIL_RATELIMIT_H

#include "cancel.h"
#include "time.h"

RESIL_BEGIN_DECLS

typedef struct resil_ratelimit resil_ratelimit;

typedef enum resil_ratelimit_kind {
    RESIL_RATELIMIT_TOKEN_BUCKET = 0,
    RESIL_RATELIMIT_FIXED_WINDOW,
    RESIL_RATELIMIT_SLIDING_WINDOW
} resil_ratelimit_kind;

/* Bounds checked by the constructor. */
#define RESIL_RATELIMIT_MAX_COUNT INT64_C(1000000000) /* rate, burst, permits */
#define RESIL_RATELIMIT_MAX_LOG (1 << 20)             /* sliding-window permits */

typedef struct resil_ratelimit_opts {
    resil_ratelimit_kind kind;
    /* token bucket */
    int64_t rate;          /* default 100; in [1, 1e9] permits per period */
    resil_duration period; /* default 1 s; >= 1 ms */
    int64_t burst;         /* default 100; in [1, 1e9] */
    /* fixed and sliding window */
    int64_t permits;       /* default 100; in [1, 1e9], sliding: <= 1048576 */
    resil_duration window; /* default 1 s; >= 1 ms */
    resil_clock *clock;    /* NULL = the system clock */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_ratelimit_opts;

typedef struct resil_ratelimit_stats {
    uint64_t admitted;  /* calls that got their permits */
    uint64_t rejected;  /* try_acquire calls turned away */
    uint64_t timed_out; /* acquire calls that could not be served in time */
    uint64_t cancelled; /* acquire calls ended by their token */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_ratelimit_stats;

RESIL_API void resil_ratelimit_opts_default(resil_ratelimit_opts *o, resil_ratelimit_kind kind);
/* Errors: RESIL_EINVAL naming the bad field, RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_ratelimit_new(const resil_ratelimit_opts *o, resil_ratelimit **out,
                                  resil_err *err);
RESIL_API void resil_ratelimit_free(resil_ratelimit *rl);

/*
 * Take `n` permits now or not at all. Returns 0, RESIL_EREJECTED with
 * *retry_after (may be NULL) set to the wait after which the same request
 * would be admitted if nobody else took permits meanwhile, or RESIL_EINVAL
 * when n < 1 or n exceeds the capacity.
 */
RESIL_API int resil_ratelimit_try_acquire(resil_ratelimit *rl, int64_t n,
                                          resil_duration *retry_after);
/* The same at a caller-supplied instant on the limiter's clock (for a caller
 * that has just read it). An instant earlier than one already seen counts as
 * that one: time never runs backwards inside the limiter. */
RESIL_API int resil_ratelimit_try_acquire_at(resil_ratelimit *rl, int64_t n, resil_instant now,
                                             resil_duration *retry_after);
/*
 * Take `n` permits, sleeping (on the limiter's clock, cancellably) until
 * they are available. `timeout` 0 waits as long as needed; otherwise, when
 * the permits cannot be had within `timeout` the call returns RESIL_ETIMEDOUT
 * at once rather than sleep in vain. Returns 0, RESIL_ETIMEDOUT,
 * RESIL_ECANCELED or RESIL_EINVAL (bad n, negative timeout).
 */
RESIL_API int resil_ratelimit_acquire(resil_ratelimit *rl, int64_t n, resil_cancel *cancel,
                                      resil_duration timeout);

/* Permits that could be taken right now (-1: the implementation cannot
 * tell). */
RESIL_API int64_t resil_ratelimit_available(resil_ratelimit *rl);
RESIL_API void resil_ratelimit_stats_get(resil_ratelimit *rl, resil_ratelimit_stats *out);
RESIL_API void resil_ratelimit_opts_get(const resil_ratelimit *rl, resil_ratelimit_opts *out);

/* ---- other implementations ---------------------------------------------- */

/*
 * An implementation: a table of operations on its own state `self`, shared
 * by every limiter of that kind (keep it static const). `size` comes first
 * and versions the table: set it to sizeof(resil_ratelimit_ops); operations
 * added later are read only from tables long enough to have them.
 *
 * try_acquire is the whole protocol: take `n` permits at `now` (an instant
 * on the clock given to resil_ratelimit_new_custom) or none, returning 0,
 * or RESIL_EREJECTED with *retry_after set (never NULL here) to the wait
 * after which the same request would be admitted, or RESIL_EINVAL when n can
 * never be served, or another negative RESIL_E* code when the limiter could
 * not decide (the handle counts that as neither admitted nor rejected, and
 * the pipeline turns it away as a rejection without a hint). The handle
 * checks n >= 1 and does the sleeping, the timeout and the cancellation of
 * resil_ratelimit_acquire() around it. A rate limiter's permits are spent
 * when the call starts, so there is nothing to give back.
 */
typedef struct resil_ratelimit_ops {
    size_t size;      /* sizeof(resil_ratelimit_ops) */
    const char *kind; /* what resil_ratelimit_impl_name() says: "redis", ... */
    int (*try_acquire)(void *self, int64_t n, resil_instant now, resil_duration *retry_after);
    /* Permits that could be taken at `now`; NULL = unknown (the handle
     * answers -1). */
    int64_t (*available)(void *self, resil_instant now);
    /* The limit it enforces in the built-in kinds' terms (a GCRA limiter is
     * a token bucket), for descriptions; NULL = zeroed options. */
    void (*opts)(void *self, resil_ratelimit_opts *out);
    /* resil_ratelimit_free(); may be NULL. */
    void (*destroy)(void *self);
} resil_ratelimit_ops;

/*
 * A limiter handle over `self` driven by `ops`; `clock` (NULL = the system
 * clock) is the one its instants and waits are on. RESIL_EINVAL (err says
 * why) when try_acquire is missing or size is too small; RESIL_ENOMEM. On
 * failure `self` is not destroyed; on success resil_ratelimit_free() does.
 */
RESIL_API int resil_ratelimit_new_custom(const resil_ratelimit_ops *ops, void *self,
                                         resil_clock *clock, resil_ratelimit **out,
                                         resil_err *err);
/*
 * Build the limiter `name` with the limit `o`: set *out and return 0, or a
 * negative RESIL_E* code (err may say why). How an application hands its
 * configuration (config.h) a way to make limiters of another implementation
 * — resil_redis_ratelimit_factory() makes fleet ones.
 */
typedef int (*resil_ratelimit_factory_fn)(const char *name, const resil_ratelimit_opts *o,
                                          resil_ratelimit **out, resil_err *err, void *ud);
/* `self` if `rl` is driven by `ops`, else NULL: how an implementation
 * recognises its own limiters in accessors of its own. */
RESIL_API void *resil_ratelimit_self(const resil_ratelimit *rl, const resil_ratelimit_ops *ops);
/* ops->kind, or "builtin" for resil_ratelimit_new()'s limiters. */
RESIL_API const char *resil_ratelimit_impl_name(const resil_ratelimit *rl);

/* "token-bucket", "fixed-window", "sliding-window". */
RESIL_API const char *resil_ratelimit_kind_name(resil_ratelimit_kind k);
/* Parse one of those names; RESIL_EINVAL if unknown. */
RESIL_API int resil_ratelimit_kind_parse(const char *s, resil_ratelimit_kind *out);

RESIL_END_DECLS

#endif
