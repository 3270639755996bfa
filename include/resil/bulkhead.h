/*
 * bulkhead.h — a concurrency limit with a bounded FIFO queue.
 *
 * A bulkhead keeps one slow dependency from taking every thread: at most
 * `max_concurrency` calls run at once, up to `max_queue` more wait, and a
 * caller beyond that is turned away at once with RESIL_EREJECTED.
 *
 * The semantics are the ones a caller can plan around, so they are strict:
 *  - the bound holds under contention (one atomic word carries both the
 *    in-flight and the queued count, so there is no check-then-act gap);
 *  - admission is FIFO: a release hands its permit directly to the oldest
 *    waiter, so a newcomer can never barge in front of the queue;
 *  - a waiter is never evicted to make room for a newcomer (the newcomer is
 *    rejected instead);
 *  - a queued wait ends with RESIL_ECANCELED when the caller's token fires,
 *    or RESIL_ETIMEDOUT after `queue_timeout`; both are distinct from the
 *    immediate RESIL_EREJECTED.
 * Acquiring never allocates: a queued caller's place in the line lives on
 * its own stack. Timed waits go through the injected clock, so a test drives
 * them with the fake clock in manual mode.
 *
 * The permit is carried by a ticket, so releasing twice is harmless and the
 * ticket can say how long the call queued.
 *
 * A resil_bulkhead is a handle over an implementation: the bulkhead above is
 * one, and an application may plug in its own (a concurrency limit shared by
 * a fleet, say) with a resil_bulkhead_ops table and
 * resil_bulkhead_new_custom(). Everything that takes a bulkhead — the
 * pipeline, metrics — takes any of them through this one API. The built-in
 * bulkhead pays nothing for the seam: another implementation's handle holds
 * a word that says "a queue is waiting", which sends every call off the
 * lock-free path the built-in bulkhead takes first, and only there is the
 * handle asked whether it is foreign.
 */
#ifndef RESIL_BULKHEAD_H
#define RESIL_BULKHEAD_H

#include "cancel.h"
#include "time.h"

RESIL_BEGIN_DECLS

typedef struct resil_bulkhead resil_bulkhead;

typedef struct resil_bulkhead_opts {
    int32_t max_concurrency;      /* default 10; >= 1 */
    int32_t max_queue;            /* default 50; >= 0 */
    bool queue;                   /* default true; false = reject when full */
    resil_duration queue_timeout; /* default 0 = wait until cancelled; >= 0 */
    resil_clock *clock;           /* NULL = the system clock */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_bulkhead_opts;

/* A permit. Every acquire fills it (with no permit when it fails), and
 * release empties it, so releasing a ticket is always safe. */
typedef struct resil_bulkhead_ticket {
    resil_bulkhead *owner; /* NULL when the ticket holds no permit */
    resil_duration queued; /* how long the acquire waited in the queue */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_bulkhead_ticket;

/* Counters since construction; each is a count of calls. */
typedef struct resil_bulkhead_stats {
    uint64_t admitted;  /* acquires that got a permit (at once or queued) */
    uint64_t queued;    /* acquires that had to wait */
    uint64_t rejected;  /* turned away at once: full and queue full or off */
    uint64_t timed_out; /* queued waits that reached queue_timeout */
    uint64_t cancelled; /* acquires ended by the caller's token */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_bulkhead_stats;

RESIL_API void resil_bulkhead_opts_default(resil_bulkhead_opts *o);
/* Errors: RESIL_EINVAL naming the bad field, RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_bulkhead_new(const resil_bulkhead_opts *o, resil_bulkhead **out,
                                 resil_err *err);
/* No call may be in flight or queued. NULL is ignored. */
RESIL_API void resil_bulkhead_free(resil_bulkhead *b);

/*
 * Get a permit, waiting in the queue when the bulkhead is full. Returns 0
 * (the ticket holds the permit), RESIL_EREJECTED (full, queue full or off),
 * RESIL_ETIMEDOUT (queued longer than queue_timeout), RESIL_ECANCELED
 * (`cancel`, which may be NULL, fired before or during the wait; a permit
 * granted at the same moment as the fire wins) or RESIL_ESYS.
 */
RESIL_API int resil_bulkhead_acquire(resil_bulkhead *b, resil_cancel *cancel,
                                     resil_bulkhead_ticket *t);
/* Non-blocking: 0 with a permit, or RESIL_EREJECTED when none is free or
 * callers are already queued (the queue goes first). */
RESIL_API int resil_bulkhead_try_acquire(resil_bulkhead *b, resil_bulkhead_ticket *t);
/* Give the permit back (to the oldest waiter if any). Idempotent. */
RESIL_API void resil_bulkhead_release(resil_bulkhead_ticket *t);

/* Snapshots; exact at the instant they are read. */
RESIL_API int32_t resil_bulkhead_in_flight(const resil_bulkhead *b);
RESIL_API int32_t resil_bulkhead_queued(const resil_bulkhead *b);
RESIL_API void resil_bulkhead_stats_get(const resil_bulkhead *b, resil_bulkhead_stats *out);
RESIL_API void resil_bulkhead_opts_get(const resil_bulkhead *b, resil_bulkhead_opts *out);

/* ---- other implementations ---------------------------------------------- */

/*
 * An implementation: a table of operations on its own state `self`, shared
 * by every bulkhead of that kind (keep it static const). `size` comes first
 * and versions the table: set it to sizeof(resil_bulkhead_ops); operations
 * added later are read only from tables long enough to have them.
 *
 * acquire gets a permit, returning 0 with t->queued set, or RESIL_EREJECTED,
 * RESIL_ETIMEDOUT, RESIL_ECANCELED as resil_bulkhead_acquire() documents, or
 * another negative RESIL_E* code when it could not decide. `wait` false is
 * resil_bulkhead_try_acquire(): no queueing. release gives back the permit
 * a successful acquire put in `t`, exactly once (permits are alike: an
 * implementation that keeps one record per permit, a lease, may give back
 * any of its own). The handle fills
 * t->owner, keeps the counters (admitted, queued, rejected, timed out,
 * cancelled) from the return codes and makes a second release harmless.
 */
typedef struct resil_bulkhead_ops {
    size_t size;      /* sizeof(resil_bulkhead_ops) */
    const char *kind; /* what resil_bulkhead_impl_name() says: "redis", ... */
    int (*acquire)(void *self, resil_cancel *cancel, bool wait, resil_bulkhead_ticket *t);
    void (*release)(void *self, const resil_bulkhead_ticket *t);
    /* Snapshots for resil_bulkhead_in_flight() / queued(); NULL = 0. */
    int32_t (*in_flight)(void *self);
    int32_t (*queued)(void *self);
    /* The limit in the built-in bulkhead's terms, for descriptions and
     * metrics; NULL = zeroed options. */
    void (*opts)(void *self, resil_bulkhead_opts *out);
    /* resil_bulkhead_free(); may be NULL. */
    void (*destroy)(void *self);
} resil_bulkhead_ops;

/*
 * A bulkhead handle over `self` driven by `ops`. RESIL_EINVAL (err says
 * why) when acquire or release is missing or size is too small;
 * RESIL_ENOMEM, RESIL_ESYS. On failure `self` is not destroyed; on success
 * resil_bulkhead_free() does.
 */
RESIL_API int resil_bulkhead_new_custom(const resil_bulkhead_ops *ops, void *self,
                                        resil_bulkhead **out, resil_err *err);
/*
 * Build the bulkhead `name` with the limit `o`: set *out and return 0, or a
 * negative RESIL_E* code (err may say why). How an application hands its
 * configuration (config.h) a way to make bulkheads of another
 * implementation — resil_redis_concurrency_factory() makes fleet ones.
 */
typedef int (*resil_bulkhead_factory_fn)(const char *name, const resil_bulkhead_opts *o,
                                         resil_bulkhead **out, resil_err *err, void *ud);
/* `self` if `b` is driven by `ops`, else NULL. */
RESIL_API void *resil_bulkhead_self(const resil_bulkhead *b, const resil_bulkhead_ops *ops);
/* ops->kind, or "builtin" for resil_bulkhead_new()'s bulkheads. */
RESIL_API const char *resil_bulkhead_impl_name(const resil_bulkhead *b);

RESIL_END_DECLS

#endif
