/*
 * adaptive.c — the adaptive concurrency limiter: a bulkhead whose bound
 * an estimator moves.
 *
 * Admission, the FIFO queue, cancellation, the counters and the parked
 * permits are the bulkhead's own (bulkhead.c), so the limiter queues
 * exactly as the bulkhead does and a success takes and leaves its permit
 * in its thread's stripe there, writing no line another thread writes.
 * What this file adds is the learning, with the same shape for the
 * samples: each thread leaves its sample in a stripe of its own, a cache
 * line that the drain only reads or empties.
 *
 * The stripes are the thread's, not the CPU's, so one thread alone is
 * counted exactly: the calls in flight when a permit is granted are the
 * bulkhead's count, which includes only permits parked by other threads.
 * The release that finds the smoothing window over (long enough and with
 * enough samples) takes a try-lock, drains the stripes into one summary
 * and runs the estimator; everyone else carries on. A sample that races
 * the close may fall into the next window, which changes an average by one
 * sample and nothing else.
 *
 * The estimators are plain functions of (the current estimate, the
 * window's summary, their own memory) returning a target; smoothing, the
 * floor and the ceiling are applied once, after. The estimate is kept as a
 * double so that fractional steps (log10 of the limit, a gradient) add up;
 * the limit in force is its integer part.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resil/adaptive.h"
#include "pipeline_internal.h"
#include "resil/bulkhead.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_limiter_ops, ops, field)

/* The samples and their latencies have two sums each: one only the
 * stripe's first thread (its owner) adds to, with a load and a store,
 * read as a difference from the last drain; and one every other thread
 * that lands on the stripe adds to with an atomic add, emptied by the
 * drain. So the thread a stripe is usually alone with pays no locked
 * instruction for its sample. */
typedef struct stripe {
    _Alignas(64) _Atomic uint64_t samples_own; /* modulo 2^64 */
    _Atomic uint64_t rtt_own;                  /* modulo 2^64 */
    _Atomic uint64_t samples_shared;
    _Atomic int64_t rtt_shared;
    _Atomic uint32_t owner;      /* the owner's thread number; 0 = none yet */
    _Atomic int32_t max_in_flight;
    _Atomic bool dropped;
    /* the owner's sums at the last drain (written under mu) */
    _Atomic uint64_t samples_own_seen;
    uint64_t rtt_own_seen;
} stripe;

typedef struct summary {
    uint64_t count;
    resil_duration rtt; /* the average */
    int32_t max_in_flight;
    bool dropped;
} summary;

struct resil_limiter {
    _Alignas(64) _Atomic int64_t window_start;
    _Atomic int32_t limit;
    stripe *stripes;
    uint32_t stripe_mask;
    const resil_limiter_ops *ops; /* NULL = built in */
    void *self;
    resil_bulkhead *bh;
    const _Atomic uint64_t *bh_word; /* its state word: in flight, read inline */
    resil_limiter_opts opts;
    resil_clock *clock;
    pthread_mutex_t mu; /* the estimator's state and the stripes' last counts */
    double estimate;
    resil_duration best_rtt; /* vegas */
    double long_rtt;         /* gradient */
    _Atomic uint64_t windows;
};

static const char *const algorithm_names[RESIL_LIMIT_ALGORITHM_COUNT] = {"vegas", "gradient",
                                                                         "aimd"};

const char *resil_limit_algorithm_name(resil_limit_algorithm a)
{
    return resil__name_at(algorithm_names, RESIL__COUNT(algorithm_names), (unsigned)a);
}

int resil_limit_algorithm_parse(const char *s)
{
    return resil__name_index(algorithm_names, RESIL__COUNT(algorithm_names), s);
}

void resil_limiter_opts_default(resil_limiter_opts *o, resil_limit_algorithm a)
{
    memset(o, 0, sizeof *o);
    o->algorithm = a;
    o->initial_limit = 20;
    o->min_limit = 1;
    o->max_limit = 200;
    o->window = RESIL_S(1);
    o->window_samples = 10;
    o->smoothing = a == RESIL_LIMIT_GRADIENT ? 0.2 : 1.0;
    o->vegas_alpha = 3;
    o->vegas_beta = 6;
    o->gradient_tolerance = 1.5;
    o->gradient_long_windows = 60;
    o->gradient_headroom = 4;
    o->aimd_backoff = 0.9;
}

static int bad(resil_err *err, const char *field, const char *rule, double got)
{
    return resil_err_set(err, RESIL_EINVAL, "limiter.%s must be %s, got %g", field, rule, got);
}

static int validate_limits(const resil_limiter_opts *o, resil_err *err)
{
    if ((unsigned)o->algorithm >= RESIL_LIMIT_ALGORITHM_COUNT)
        return bad(err, "algorithm", "vegas, gradient or aimd", o->algorithm);
    if (o->min_limit < 1)
        return bad(err, "min_limit", ">= 1", o->min_limit);
    if (o->max_limit < o->min_limit)
        return bad(err, "max_limit", ">= min_limit", o->max_limit);
    if (o->initial_limit < o->min_limit || o->initial_limit > o->max_limit)
        return bad(err, "initial_limit", "in [min_limit, max_limit]", o->initial_limit);
    if (o->window < 0)
        return resil__bad_duration(err, "limiter.window", ">= 0", o->window);
    if (o->window_samples < 1)
        return bad(err, "window_samples", ">= 1", o->window_samples);
    if (!(o->smoothing > 0 && o->smoothing <= 1))
        return bad(err, "smoothing", "in (0, 1]", o->smoothing);
    return 0;
}

static int validate_estimators(const resil_limiter_opts *o, resil_err *err)
{
    if (!(o->vegas_alpha > 0))
        return bad(err, "vegas_alpha", "> 0", o->vegas_alpha);
    if (!(o->vegas_beta > o->vegas_alpha))
        return bad(err, "vegas_beta", "> vegas_alpha", o->vegas_beta);
    if (!(o->gradient_tolerance >= 1))
        return bad(err, "gradient_tolerance", ">= 1", o->gradient_tolerance);
    if (o->gradient_long_windows < 1)
        return bad(err, "gradient_long_windows", ">= 1", o->gradient_long_windows);
    if (!(o->gradient_headroom >= 0))
        return bad(err, "gradient_headroom", ">= 0", o->gradient_headroom);
    if (!(o->aimd_backoff > 0 && o->aimd_backoff < 1))
        return bad(err, "aimd_backoff", "in (0, 1)", o->aimd_backoff);
    if (o->aimd_latency < 0)
        return resil__bad_duration(err, "limiter.aimd_latency", ">= 0 (0 = none)",
                                   o->aimd_latency);
    if (o->max_queue < 0)
        return bad(err, "max_queue", ">= 0", o->max_queue);
    if (o->queue_timeout < 0)
        return resil__bad_duration(err, "limiter.queue_timeout", ">= 0 (0 = until cancelled)",
                                   o->queue_timeout);
    return 0;
}

static int make_queue(resil_limiter *l, resil_err *err)
{
    resil_bulkhead_opts b;
    resil_bulkhead_opts_default(&b);
    b.max_concurrency = l->opts.initial_limit;
    b.max_queue = l->opts.max_queue;
    b.queue = l->opts.max_queue > 0;
    b.queue_timeout = l->opts.queue_timeout;
    b.clock = l->clock;
    return resil_bulkhead_new(&b, &l->bh, err);
}

static resil_limiter *alloc_limiter(void) { return resil__line_alloc(sizeof(resil_limiter)); }

/* As many stripes as the bulkhead parks permits in, zeroed. */
static int alloc_stripes(resil_limiter *l)
{
    uint32_t n = resil__thread_stripe_count();
    l->stripes = resil__line_alloc(n * sizeof *l->stripes);
    if (l->stripes == NULL)
        return RESIL_ENOMEM;
    l->stripe_mask = n - 1;
    return 0;
}

int resil_limiter_new(const resil_limiter_opts *o, resil_limiter **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "limiter: options and out must not be NULL");
    int rc = validate_limits(o, err);
    if (rc == 0)
        rc = validate_estimators(o, err);
    if (rc != 0)
        return rc;
    resil_limiter *l = alloc_limiter();
    if (l == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "limiter: out of memory");
    l->opts = *o;
    l->clock = o->clock != NULL ? o->clock : resil_clock_system();
    if (alloc_stripes(l) != 0) {
        free(l);
        return resil_err_set(err, RESIL_ENOMEM, "limiter: out of memory");
    }
    if ((rc = make_queue(l, err)) != 0) {
        free(l->stripes);
        free(l);
        return rc;
    }
    l->bh_word = resil__bulkhead_word(l->bh);
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        resil_bulkhead_free(l->bh);
        free(l->stripes);
        free(l);
        return resil_err_set(err, RESIL_ESYS, "limiter: pthread_mutex_init failed");
    }
    l->estimate = o->initial_limit;
    atomic_init(&l->limit, o->initial_limit);
    atomic_init(&l->window_start, resil_clock_now(l->clock));
    *out = l;
    return 0;
}

int resil_limiter_new_custom(const resil_limiter_ops *ops, void *self, resil_limiter **out,
                             resil_err *err)
{
    if (ops == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "limiter: ops and out must not be NULL");
    if (!OPS_HAS(ops, acquire) || !OPS_HAS(ops, release))
        return resil_err_set(err, RESIL_EINVAL, "limiter: ops needs size, acquire and release");
    resil_limiter *l = alloc_limiter();
    if (l == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "limiter: out of memory");
    l->ops = ops;
    l->self = self;
    l->clock = resil_clock_system();
    *out = l;
    return 0;
}

void resil_limiter_free(resil_limiter *l)
{
    if (l == NULL)
        return;
    if (l->ops != NULL) {
        if (OPS_HAS(l->ops, destroy))
            l->ops->destroy(l->self);
    } else {
        resil_bulkhead_free(l->bh);
        pthread_mutex_destroy(&l->mu);
        free(l->stripes);
    }
    free(l);
}

const char *resil_limiter_impl_name(const resil_limiter *l)
{
    if (l == NULL)
        return "none";
    if (l->ops == NULL)
        return "builtin";
    return l->ops->kind != NULL ? l->ops->kind : "custom";
}

/* ---- the stripes -------------------------------------------------------------- */

static stripe *stripe_of(resil_limiter *l, uint32_t number)
{
    return &l->stripes[number & l->stripe_mask];
}

static void return_permit(resil_limiter *l) { resil__bulkhead_put_back(l->bh); }

/* ---- acquiring -------------------------------------------------------------- */

static void empty(resil_limiter_ticket *t)
{
    t->owner = NULL;
    t->start = 0;
    t->in_flight = 0;
    t->queued = 0;
}

static void granted(resil_limiter *l, resil_limiter_ticket *t, resil_instant now,
                    resil_duration queued)
{
    t->owner = l;
    t->start = now;
    t->in_flight = resil__bulkhead_word_in_flight(l->bh_word);
    t->queued = queued;
}

/* Everything but the thread's parked permit: another implementation, or
 * the bulkhead. Out of line, so that the parked permit pays no frame. */
__attribute__((noinline)) static int acquire_slow(resil_limiter *l, resil_cancel *cancel,
                                                  bool wait, resil_instant now,
                                                  resil_limiter_ticket *t)
{
    empty(t);
    if (l->ops != NULL) {
        int rc = l->ops->acquire(l->self, cancel, wait, now, t);
        t->owner = rc == 0 ? l : NULL;
        return rc;
    }
    resil_bulkhead_ticket bt;
    int rc = wait ? resil_bulkhead_acquire(l->bh, cancel, &bt)
                  : resil_bulkhead_try_acquire(l->bh, &bt);
    if (rc != 0)
        return rc;
    granted(l, t, bt.queued > 0 ? resil_clock_now(l->clock) : now, bt.queued);
    return 0;
}

/* Both acquires, `wait` false without a queue. A call admitted without
 * queueing reads no clock: it started at the caller's `now`. */
static inline int acquire(resil_limiter *l, resil_cancel *cancel, bool wait, resil_instant now,
                          resil_limiter_ticket *t)
{
    if (l->ops == NULL && resil__bulkhead_take_parked(l->bh)) {
        granted(l, t, now, 0);
        return 0;
    }
    return acquire_slow(l, cancel, wait, now, t);
}

int resil_limiter_try_acquire_at(resil_limiter *l, resil_instant now, resil_limiter_ticket *t)
{
    return acquire(l, NULL, false, now, t);
}

int resil_limiter_acquire(resil_limiter *l, resil_cancel *cancel, resil_limiter_ticket *t)
{
    return resil__limiter_acquire_at(l, cancel, resil_clock_now(l->clock), t);
}

/* ---- the estimators ------------------------------------------------------------ */

static bool idle(const resil_limiter *l, const summary *s)
{
    return (double)s->max_in_flight * 2 < l->estimate;
}

static double log_step(double limit)
{
    double lg = log10(limit);
    return lg > 1 ? lg : 1;
}

/* Returns the target, or the estimate itself for "no change". */
static double vegas(resil_limiter *l, const summary *s)
{
    if (l->best_rtt == 0 || s->rtt < l->best_rtt)
        l->best_rtt = s->rtt;
    double limit = l->estimate, step = log_step(limit);
    if (s->dropped)
        return limit - step;
    if (idle(l, s) || s->rtt <= 0)
        return limit;
    double queue = limit * (1.0 - (double)l->best_rtt / (double)s->rtt);
    if (queue < l->opts.vegas_alpha * step)
        return limit + step;
    if (queue > l->opts.vegas_beta * step)
        return limit - step;
    return limit;
}

static double gradient(resil_limiter *l, const summary *s)
{
    double rtt = (double)s->rtt;
    if (l->long_rtt == 0)
        l->long_rtt = rtt;
    else
        l->long_rtt += (rtt - l->long_rtt) * 2.0 / (l->opts.gradient_long_windows + 1.0);
    double g = 0.5;
    if (!s->dropped) {
        if (idle(l, s))
            return l->estimate;
        g = rtt > 0 ? l->opts.gradient_tolerance * l->long_rtt / rtt : 1.0;
        g = g < 0.5 ? 0.5 : g > 1.0 ? 1.0 : g;
    }
    return l->estimate * g + l->opts.gradient_headroom;
}

static double aimd(resil_limiter *l, const summary *s)
{
    bool slow = l->opts.aimd_latency > 0 && s->rtt > l->opts.aimd_latency;
    if (s->dropped || slow)
        return l->estimate * l->opts.aimd_backoff;
    if (idle(l, s))
        return l->estimate;
    return l->estimate + 1;
}

static double target_of(resil_limiter *l, const summary *s)
{
    switch (l->opts.algorithm) {
    case RESIL_LIMIT_VEGAS:
        return vegas(l, s);
    case RESIL_LIMIT_GRADIENT:
        return gradient(l, s);
    default:
        return aimd(l, s);
    }
}

/* Smooth, clamp, and return the limit now in force. */
static int32_t apply(resil_limiter *l, double target)
{
    double e = l->estimate + (target - l->estimate) * l->opts.smoothing;
    if (e < l->opts.min_limit)
        e = l->opts.min_limit;
    if (e > l->opts.max_limit)
        e = l->opts.max_limit;
    l->estimate = e;
    /* 1e-9 absorbs the rounding of sums such as 18.9 + 1.1 */
    return (int32_t)(e + 1e-9);
}

/* ---- sampling ------------------------------------------------------------------- */

/* Is thread `me` the stripe's owner? The first to ask becomes it. */
static bool owns(stripe *s, uint32_t me)
{
    uint32_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (owner == 0 && atomic_compare_exchange_strong_explicit(&s->owner, &owner, me,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed))
        return true;
    return owner == me;
}

/* An owner's sum grows by `n`: only the owner writes it. */
static void own_add(_Atomic uint64_t *sum, uint64_t n, memory_order order)
{
    atomic_store_explicit(sum, atomic_load_explicit(sum, memory_order_relaxed) + n, order);
}

/* The latency first, then the count that makes the drain read it. */
static void add_sample(stripe *s, uint32_t me, resil_duration rtt, int32_t in_flight,
                       bool dropped)
{
    if (owns(s, me)) {
        own_add(&s->rtt_own, (uint64_t)rtt, memory_order_relaxed);
        own_add(&s->samples_own, 1, memory_order_release);
    } else {
        atomic_fetch_add_explicit(&s->rtt_shared, rtt, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->samples_shared, 1, memory_order_release);
    }
    int32_t m = atomic_load_explicit(&s->max_in_flight, memory_order_relaxed);
    while (in_flight > m && !atomic_compare_exchange_weak_explicit(
                                &s->max_in_flight, &m, in_flight, memory_order_relaxed,
                                memory_order_relaxed)) {
    }
    if (dropped)
        atomic_store_explicit(&s->dropped, true, memory_order_relaxed);
}

static uint64_t pending(resil_limiter *l)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i <= l->stripe_mask; i++) {
        stripe *st = &l->stripes[i];
        n += atomic_load_explicit(&st->samples_own, memory_order_relaxed) -
             atomic_load_explicit(&st->samples_own_seen, memory_order_relaxed);
        n += atomic_load_explicit(&st->samples_shared, memory_order_relaxed);
    }
    return n;
}

static summary drain(resil_limiter *l)
{
    summary s = {0, 0, 0, false};
    int64_t sum = 0;
    for (uint32_t i = 0; i <= l->stripe_mask; i++) {
        stripe *st = &l->stripes[i];
        uint64_t now = atomic_load_explicit(&st->samples_own, memory_order_acquire);
        s.count += now - atomic_load_explicit(&st->samples_own_seen, memory_order_relaxed);
        atomic_store_explicit(&st->samples_own_seen, now, memory_order_relaxed);
        s.count += atomic_exchange_explicit(&st->samples_shared, 0, memory_order_acquire);
        uint64_t own = atomic_load_explicit(&st->rtt_own, memory_order_relaxed);
        sum += (int64_t)(own - st->rtt_own_seen);
        st->rtt_own_seen = own;
        sum += atomic_exchange_explicit(&st->rtt_shared, 0, memory_order_relaxed);
        int32_t m = atomic_exchange_explicit(&st->max_in_flight, 0, memory_order_relaxed);
        s.max_in_flight = m > s.max_in_flight ? m : s.max_in_flight;
        s.dropped |= atomic_exchange_explicit(&st->dropped, false, memory_order_relaxed);
    }
    s.rtt = s.count > 0 ? sum / (int64_t)s.count : 0;
    return s;
}

static bool window_over(resil_limiter *l, resil_instant now)
{
    resil_instant start = atomic_load_explicit(&l->window_start, memory_order_relaxed);
    if (resil__sub_sat(now, start) < l->opts.window)
        return false;
    return pending(l) >= (uint64_t)l->opts.window_samples;
}

/* Under mu: the bound moves (a lower one sends the parked permits back, so
 * none is used beyond it: bulkhead.c). */
static void move_limit(resil_limiter *l, int32_t to)
{
    atomic_store_explicit(&l->limit, to, memory_order_relaxed);
    resil__bulkhead_set_limit(l->bh, (uint32_t)to);
}

/* Close the window if nobody else is: summarise, estimate, move the bound.
 * Out of line: the releases that do not close one pay no frame for it. */
__attribute__((noinline)) static void close_window(resil_limiter *l, resil_instant now)
{
    if (pthread_mutex_trylock(&l->mu) != 0)
        return;
    if (!window_over(l, now)) {
        pthread_mutex_unlock(&l->mu);
        return;
    }
    summary s = drain(l);
    atomic_store_explicit(&l->window_start, now, memory_order_relaxed);
    resil__count(&l->windows);
    int32_t from = atomic_load_explicit(&l->limit, memory_order_relaxed);
    int32_t to = apply(l, target_of(l, &s));
    if (to != from)
        move_limit(l, to);
    pthread_mutex_unlock(&l->mu);
    if (to != from && l->opts.on_change != NULL)
        l->opts.on_change(l->opts.on_change_ud, from, to, now);
}

void resil_limiter_release_at(resil_limiter_ticket *t, resil_verdict v, resil_instant now)
{
    if (t == NULL || t->owner == NULL)
        return;
    resil_limiter *l = t->owner;
    t->owner = NULL;
    if (l->ops != NULL) {
        l->ops->release(l->self, t, v, now);
        return;
    }
    if (v == RESIL_BREAKER_IGNORED) {
        return_permit(l);
        return;
    }
    uint32_t me = resil__thread_number();
    add_sample(stripe_of(l, me), me, resil__sub_sat(now, t->start), t->in_flight,
               v == RESIL_BREAKER_FAILURE);
    return_permit(l);
    if (window_over(l, now))
        close_window(l, now);
}

void resil_limiter_release(resil_limiter_ticket *t, resil_verdict v)
{
    if (t == NULL || t->owner == NULL)
        return;
    resil_limiter_release_at(t, v, resil_clock_now(t->owner->clock));
}

/* ---- looking at it ----------------------------------------------------------------- */

int32_t resil_limiter_limit(const resil_limiter *l)
{
    if (l->ops != NULL)
        return OPS_HAS(l->ops, limit) ? l->ops->limit(l->self) : 0;
    return atomic_load_explicit(&((resil_limiter *)l)->limit, memory_order_relaxed);
}

int32_t resil_limiter_in_flight(const resil_limiter *l)
{
    if (l->ops != NULL)
        return OPS_HAS(l->ops, in_flight) ? l->ops->in_flight(l->self) : 0;
    return resil_bulkhead_in_flight(l->bh);
}

int32_t resil_limiter_queued(const resil_limiter *l)
{
    if (l->ops != NULL)
        return OPS_HAS(l->ops, queued) ? l->ops->queued(l->self) : 0;
    return resil_bulkhead_queued(l->bh);
}

void resil_limiter_stats_get(const resil_limiter *l, resil_limiter_stats *out)
{
    memset(out, 0, sizeof *out);
    if (l->ops != NULL)
        return;
    resil_bulkhead_stats b;
    resil_bulkhead_stats_get(l->bh, &b);
    out->admitted = b.admitted;
    out->queued = b.queued;
    out->rejected = b.rejected;
    out->timed_out = b.timed_out;
    out->cancelled = b.cancelled;
    out->windows = resil__counted(&l->windows);
}

void resil_limiter_opts_get(const resil_limiter *l, resil_limiter_opts *out)
{
    *out = l->opts;
}

/* ---- for the pipeline ------------------------------------------------------------- */

resil_clock *resil__limiter_clock(const resil_limiter *l) { return l->clock; }

resil_bulkhead *resil__limiter_bulkhead(const resil_limiter *l)
{
    return l->ops == NULL ? l->bh : NULL;
}

void resil__limiter_granted(resil_limiter *l, resil_limiter_ticket *t, resil_instant now,
                            resil_duration queued)
{
    granted(l, t, now, queued);
}

/* For an executor that queues in the limiter's bulkhead itself (the
 * asynchronous one): the calling thread's parked permit, granted at `now`,
 * when it has one. */
bool resil__limiter_take_parked(resil_limiter *l, resil_instant now, resil_limiter_ticket *t)
{
    if (l->ops != NULL || !resil__bulkhead_take_parked(l->bh))
        return false;
    granted(l, t, now, 0);
    return true;
}

/* resil_limiter_acquire with the caller's reading of the limiter's clock:
 * a call admitted without queueing reads no clock. */
int resil__limiter_acquire_at(resil_limiter *l, resil_cancel *cancel, resil_instant now,
                              resil_limiter_ticket *t)
{
    return acquire(l, cancel, true, now, t);
}
