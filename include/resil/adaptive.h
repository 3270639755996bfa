/*
 * adaptive.h — limits that find themselves: an adaptive concurrency
 * limiter and client-side adaptive throttling.
 *
 * A static limit is wrong most of the time: too high while the dependency
 * is sick, too low while it is healthy. Both strategies here learn from
 * what the calls themselves show.
 *
 * The adaptive concurrency limiter is a bulkhead whose bound moves. Every
 * call that ends gives a sample (how long it ran, how many ran beside it,
 * whether it was dropped: a failure the dependency is to blame for); the
 * samples of a smoothing window are averaged and handed to an estimator,
 * which proposes the next limit, kept between a floor and a ceiling:
 *
 *  - Vegas (TCP Vegas, as Netflix's concurrency-limits does it): compare
 *    the window's latency with the lowest ever seen; the excess estimates
 *    how many calls are queueing at the dependency, and the limit grows
 *    while that queue is short and shrinks when it is long;
 *  - gradient: the ratio of a slow-moving latency average to the window's
 *    (with a tolerance) scales the limit, plus a little headroom, so the
 *    limit follows latency trends rather than absolute values;
 *  - AIMD: grow by one while calls succeed, multiply by a ratio on a drop
 *    (and, optionally, on a window slower than a threshold).
 *
 * Every estimator leaves the limit alone while the limit is not being used
 * (fewer than half of it in flight): an idle client learns nothing. The
 * queue is the bulkhead's — FIFO, bounded, cancellable, with a timeout —
 * and a refusal is RESIL_EREJECTED like the bulkhead's, reported in a
 * pipeline with its own code (RESIL_STRATEGY_ADAPTIVE_LIMITER).
 *
 * Client-side adaptive throttling is the SRE book's: the client counts its
 * requests and the backend's accepts over a window, and refuses a new call
 * locally with probability max(0, (requests − K·accepts) / (requests + 1)).
 * While the backend accepts, K·accepts outruns requests and nothing is
 * refused; when it refuses everything, the client sends about one call in
 * K·accepts + 1 — enough to notice the recovery.
 *
 * Both take `now` on their success path where the caller has it (the
 * pipeline does), read no clock and allocate nothing. Both are interfaces:
 * an ops table plugs in another implementation (one whose state a fleet
 * shares, say) wherever the built-in one goes.
 */
#ifndef RESIL_ADAPTIVE_H
#define RESIL_ADAPTIVE_H

#include "breaker.h"
#include "cancel.h"
#include "rng.h"
#include "time.h"

RESIL_BEGIN_DECLS

/* How a call that ended counts: the breaker's verdicts, so one classifier
 * serves the breaker, the limiter and the throttle. */
typedef resil_breaker_result resil_verdict;

/* ---- the adaptive concurrency limiter ----------------------------------- */

typedef enum resil_limit_algorithm {
    RESIL_LIMIT_VEGAS = 0,
    RESIL_LIMIT_GRADIENT,
    RESIL_LIMIT_AIMD
} resil_limit_algorithm;

#define RESIL_LIMIT_ALGORITHM_COUNT 3

typedef struct resil_limiter_opts {
    resil_limit_algorithm algorithm; /* default gradient */
    int32_t initial_limit;           /* default 20; in [min_limit, max_limit] */
    int32_t min_limit;               /* the floor; default 1; >= 1 */
    int32_t max_limit;               /* the ceiling; default 200; >= min_limit */
    /* The smoothing window: samples are gathered for at least `window`
     * and at least `window_samples` of them, then averaged into one. */
    resil_duration window;           /* default 1 s; >= 0 */
    int32_t window_samples;          /* default 10; >= 1 */
    double smoothing;                /* in (0, 1]: limit moves this share of the way
                                        to the estimate; default 1 (vegas, aimd), 0.2 (gradient) */
    /* Vegas: queue estimate = limit × (1 − best latency / window latency);
     * below alpha·log10(limit) it grows, above beta·log10(limit) it shrinks. */
    double vegas_alpha;              /* default 3 */
    double vegas_beta;               /* default 6; > alpha */
    /* Gradient: gradient = clamp(tolerance × long / window latency, 0.5, 1);
     * estimate = limit × gradient + headroom. */
    double gradient_tolerance;       /* default 1.5; >= 1 */
    int32_t gradient_long_windows;   /* the long average's span in windows; default 60 */
    double gradient_headroom;        /* default 4 (calls) */
    /* AIMD */
    double aimd_backoff;             /* multiply by this on a drop; default 0.9; in (0, 1) */
    resil_duration aimd_latency;     /* a window slower than this is a drop; 0 = none */
    /* The queue, as the bulkhead's: */
    int32_t max_queue;               /* default 0; >= 0 */
    resil_duration queue_timeout;    /* default 0 = until cancelled; >= 0 */
    resil_clock *clock;              /* NULL = the system clock */
    /* Told when the limit changes (the pipeline reports it as an event). */
    void (*on_change)(void *ud, int32_t from, int32_t to, resil_instant at);
    void *on_change_ud;
    resil_reserved reserved_[4];     /* room to grow (docs/abi.md) */
} resil_limiter_opts;

typedef struct resil_limiter resil_limiter;

/* A permit, filled by every acquire (empty when it fails). */
typedef struct resil_limiter_ticket {
    resil_limiter *owner;   /* NULL when the ticket holds no permit */
    resil_instant start;    /* when the permit was granted */
    int32_t in_flight;      /* calls in flight with this one */
    resil_duration queued;  /* how long the acquire waited */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_limiter_ticket;

RESIL_API void resil_limiter_opts_default(resil_limiter_opts *o, resil_limit_algorithm a);
/* Errors: RESIL_EINVAL naming the field ("limiter.min_limit must be >= 1,
 * got 0"), RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_limiter_new(const resil_limiter_opts *o, resil_limiter **out,
                                resil_err *err);
RESIL_API void resil_limiter_free(resil_limiter *l);

/* A permit now or RESIL_EREJECTED (no queueing); `now` is the caller's
 * reading of the limiter's clock. */
RESIL_API int resil_limiter_try_acquire_at(resil_limiter *l, resil_instant now,
                                           resil_limiter_ticket *t);
/* A permit, queueing as the bulkhead does: 0, RESIL_EREJECTED (limit and
 * queue full), RESIL_ETIMEDOUT (queue_timeout), RESIL_ECANCELED. */
RESIL_API int resil_limiter_acquire(resil_limiter *l, resil_cancel *cancel,
                                    resil_limiter_ticket *t);
/* Give the permit back with the call's verdict and its end: a SUCCESS or
 * FAILURE (a drop) is a sample; IGNORED only returns the permit.
 * Idempotent. */
RESIL_API void resil_limiter_release_at(resil_limiter_ticket *t, resil_verdict v,
                                        resil_instant now);
RESIL_API void resil_limiter_release(resil_limiter_ticket *t, resil_verdict v);

RESIL_API int32_t resil_limiter_limit(const resil_limiter *l);
RESIL_API int32_t resil_limiter_in_flight(const resil_limiter *l);
RESIL_API int32_t resil_limiter_queued(const resil_limiter *l);
/* Counters: admitted, queued, rejected, timed out, cancelled (as the
 * bulkhead's), and windows closed. */
typedef struct resil_limiter_stats {
    uint64_t admitted, queued, rejected, timed_out, cancelled, windows;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_limiter_stats;
RESIL_API void resil_limiter_stats_get(const resil_limiter *l, resil_limiter_stats *out);
RESIL_API void resil_limiter_opts_get(const resil_limiter *l, resil_limiter_opts *out);

/* "vegas", "gradient", "aimd"; and back (-1 if unknown). */
RESIL_API const char *resil_limit_algorithm_name(resil_limit_algorithm a);
RESIL_API int resil_limit_algorithm_parse(const char *s);

/*
 * Another implementation, as resil_bulkhead_ops is for the bulkhead: `size`
 * first (sizeof(resil_limiter_ops)); acquire returns what
 * resil_limiter_acquire() documents (`wait` false: no queueing) and fills
 * t->start, t->in_flight, t->queued; release receives each granted ticket
 * exactly once with its verdict. The handle fills t->owner and makes a
 * second release harmless.
 */
typedef struct resil_limiter_ops {
    size_t size;
    const char *kind;
    int (*acquire)(void *self, resil_cancel *cancel, bool wait, resil_instant now,
                   resil_limiter_ticket *t);
    void (*release)(void *self, const resil_limiter_ticket *t, resil_verdict v,
                    resil_instant now);
    int32_t (*limit)(void *self);     /* NULL = 0 */
    int32_t (*in_flight)(void *self); /* NULL = 0 */
    int32_t (*queued)(void *self);    /* NULL = 0 */
    void (*destroy)(void *self);      /* may be NULL */
} resil_limiter_ops;

RESIL_API int resil_limiter_new_custom(const resil_limiter_ops *ops, void *self,
                                       resil_limiter **out, resil_err *err);
/* ops->kind, or "builtin". */
RESIL_API const char *resil_limiter_impl_name(const resil_limiter *l);

/* ---- client-side adaptive throttling ------------------------------------ */

typedef struct resil_throttle_opts {
    double k;                 /* default 2; >= 1 (1 = refuse as soon as the backend does) */
    resil_duration window;    /* the counts' span; default 2 min; > 0 */
    int32_t buckets;          /* default 12; in [1, 120] */
    uint64_t seed;            /* default 0 = from the OS; else replayable */
    resil_rng *rng;           /* optional source instead of the seed (tests) */
    resil_clock *clock;       /* NULL = the system clock */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_throttle_opts;

typedef struct resil_throttle resil_throttle;

RESIL_API void resil_throttle_opts_default(resil_throttle_opts *o);
/* Errors: RESIL_EINVAL naming the field ("throttle.k must be >= 1, got
 * 0.5"), RESIL_ENOMEM. */
RESIL_API int resil_throttle_new(const resil_throttle_opts *o, resil_throttle **out,
                                 resil_err *err);
RESIL_API void resil_throttle_free(resil_throttle *t);

/* May this call go? 0, or RESIL_EREJECTED (counted as a request the
 * backend did not accept). A draw is spent only when the probability is
 * above 0. */
RESIL_API int resil_throttle_admit_at(resil_throttle *t, resil_instant now);
/* An admitted call ended: SUCCESS is a request the backend accepted,
 * FAILURE one it did not, IGNORED is not counted. `now` is the call's
 * start (or end): it picks the bucket. */
RESIL_API void resil_throttle_record_at(resil_throttle *t, resil_verdict v, resil_instant now);
/* The current counts and the refusal probability they give. */
RESIL_API void resil_throttle_counts(resil_throttle *t, resil_instant now, uint64_t *requests,
                                     uint64_t *accepts);
RESIL_API double resil_throttle_probability(resil_throttle *t, resil_instant now);
/* The formula itself: max(0, (requests − k·accepts) / (requests + 1)). */
RESIL_API double resil_throttle_formula(uint64_t requests, uint64_t accepts, double k);
RESIL_API void resil_throttle_opts_get(const resil_throttle *t, resil_throttle_opts *out);
/* Calls refused locally since construction. */
RESIL_API uint64_t resil_throttle_rejected(const resil_throttle *t);

typedef struct resil_throttle_ops {
    size_t size;      /* sizeof(resil_throttle_ops) */
    const char *kind;
    int (*admit)(void *self, resil_instant now);
    void (*record)(void *self, resil_verdict v, resil_instant now);
    double (*probability)(void *self, resil_instant now); /* NULL = 0 */
    void (*destroy)(void *self);                          /* may be NULL */
} resil_throttle_ops;

RESIL_API int resil_throttle_new_custom(const resil_throttle_ops *ops, void *self,
                                        resil_throttle **out, resil_err *err);
RESIL_API const char *resil_throttle_impl_name(const resil_throttle *t);

RESIL_END_DECLS

#endif
