/*
 * throttle.c — client-side adaptive throttling, as the SRE book describes
 * it: refuse locally with probability max(0, (requests − K·accepts) /
 * (requests + 1)) over a recent window.
 *
 * The window is a ring of buckets, each one 64-bit word holding a bucket's
 * requests (low half) and accepts (high half), so that a call is counted
 * with a single fetch-add and a reader never sees an accept without its
 * request. The ring turns lazily: the first call into a new bucket zeroes
 * the ones it skipped, under a lock taken once per bucket length, never on
 * the way of a call that stays in the current bucket. A healthy backend
 * keeps K·accepts above requests, so the success path reads the ring,
 * finds a probability of 0 and spends no random draw. The draws it does
 * spend are resil__draw's, a counter mixed with the seed, so a seeded run
 * refuses the same calls every time.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_throttle_ops, ops, field)
#include "pipeline_internal.h"
#include "resil/adaptive.h"

#define MAX_BUCKETS 120
#define ACCEPT_ONE (UINT64_C(1) << 32)

struct resil_throttle {
    const resil_throttle_ops *ops; /* NULL = built in */
    void *self;
    resil_throttle_opts opts;
    resil_duration bucket_len;
    uint64_t seed;
    _Atomic int64_t epoch; /* the current bucket's number: floor(now / bucket_len) */
    _Atomic uint64_t draws, rejected;
    pthread_mutex_t mu;    /* turning the ring */
    _Atomic uint64_t ring[MAX_BUCKETS];
};

void resil_throttle_opts_default(resil_throttle_opts *o)
{
    memset(o, 0, sizeof *o);
    o->k = 2.0;
    o->window = RESIL_S(120);
    o->buckets = 12;
}

static int validate(const resil_throttle_opts *o, resil_err *err)
{
    if (!(o->k >= 1.0))
        return resil_err_set(err, RESIL_EINVAL, "throttle.k must be >= 1, got %g", o->k);
    if (o->window <= 0)
        return resil__bad_duration(err, "throttle.window", "> 0", o->window);
    if (o->buckets < 1 || o->buckets > MAX_BUCKETS)
        return resil_err_set(err, RESIL_EINVAL, "throttle.buckets must be in [1, %d], got %d",
                             MAX_BUCKETS, (int)o->buckets);
    if (o->window / o->buckets <= 0)
        return resil__bad_duration(err, "throttle.window", ">= 1ns per bucket", o->window);
    return 0;
}

int resil_throttle_new(const resil_throttle_opts *o, resil_throttle **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "throttle: options and out must not be NULL");
    int rc = validate(o, err);
    if (rc != 0)
        return rc;
    resil_throttle *t = calloc(1, sizeof *t);
    if (t == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "throttle: out of memory");
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return resil_err_set(err, RESIL_ESYS, "throttle: pthread_mutex_init failed");
    }
    t->opts = *o;
    if (t->opts.clock == NULL)
        t->opts.clock = resil_clock_system();
    t->bucket_len = o->window / o->buckets;
    t->seed = o->seed != 0 ? o->seed : resil__os_seed();
    atomic_init(&t->epoch, resil__floor_div(resil_clock_now(t->opts.clock), t->bucket_len));
    *out = t;
    return 0;
}

int resil_throttle_new_custom(const resil_throttle_ops *ops, void *self, resil_throttle **out,
                              resil_err *err)
{
    if (ops == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "throttle: ops and out must not be NULL");
    if (!OPS_HAS(ops, admit) || !OPS_HAS(ops, record))
        return resil_err_set(err, RESIL_EINVAL, "throttle: ops needs size, admit and record");
    resil_throttle *t = calloc(1, sizeof *t);
    if (t == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "throttle: out of memory");
    t->ops = ops;
    t->self = self;
    *out = t;
    return 0;
}

void resil_throttle_free(resil_throttle *t)
{
    if (t == NULL)
        return;
    if (t->ops != NULL) {
        if (OPS_HAS(t->ops, destroy))
            t->ops->destroy(t->self);
    } else {
        pthread_mutex_destroy(&t->mu);
    }
    free(t);
}

const char *resil_throttle_impl_name(const resil_throttle *t)
{
    if (t == NULL)
        return "none";
    if (t->ops == NULL)
        return "builtin";
    return t->ops->kind != NULL ? t->ops->kind : "custom";
}

double resil_throttle_formula(uint64_t requests, uint64_t accepts, double k)
{
    double p = ((double)requests - k * (double)accepts) / ((double)requests + 1.0);
    return p > 0 ? p : 0;
}

/* ---- the ring ---------------------------------------------------------------- */

static void turn(resil_throttle *t, int64_t to)
{
    pthread_mutex_lock(&t->mu);
    int64_t from = atomic_load_explicit(&t->epoch, memory_order_relaxed);
    int64_t n = t->opts.buckets;
    for (int64_t e = from + 1; e <= to && e <= from + n; e++)
        atomic_store_explicit(&t->ring[resil__floor_mod(e, n)], 0, memory_order_relaxed);
    if (to > from)
        atomic_store_explicit(&t->epoch, to, memory_order_release);
    pthread_mutex_unlock(&t->mu);
}

/* The current bucket for an instant; an instant older than the current
 * bucket counts in it. */
static _Atomic uint64_t *bucket(resil_throttle *t, resil_instant now)
{
    int64_t e = resil__floor_div(now, t->bucket_len);
    int64_t cur = atomic_load_explicit(&t->epoch, memory_order_acquire);
    if (e > cur) {
        turn(t, e);
        cur = atomic_load_explicit(&t->epoch, memory_order_acquire);
    }
    return &t->ring[resil__floor_mod(cur, t->opts.buckets)];
}

static void sum(resil_throttle *t, resil_instant now, uint64_t *requests, uint64_t *accepts)
{
    bucket(t, now);
    uint64_t r = 0, a = 0;
    for (int32_t i = 0; i < t->opts.buckets; i++) {
        uint64_t w = atomic_load_explicit(&t->ring[i], memory_order_relaxed);
        r += w & (ACCEPT_ONE - 1);
        a += w >> 32;
    }
    *requests = r;
    *accepts = a;
}

void resil_throttle_counts(resil_throttle *t, resil_instant now, uint64_t *requests,
                           uint64_t *accepts)
{
    *requests = *accepts = 0;
    if (t->ops == NULL)
        sum(t, now, requests, accepts);
}

double resil_throttle_probability(resil_throttle *t, resil_instant now)
{
    if (t->ops != NULL)
        return OPS_HAS(t->ops, probability) ? t->ops->probability(t->self, now) : 0;
    uint64_t r, a;
    sum(t, now, &r, &a);
    return resil_throttle_formula(r, a, t->opts.k);
}

/* ---- calls ------------------------------------------------------------------------ */

static double draw(resil_throttle *t)
{
    if (t->opts.rng != NULL)
        return resil_rng_next(t->opts.rng);
    uint64_t n = atomic_fetch_add_explicit(&t->draws, 1, memory_order_relaxed);
    return resil__draw(t->seed, n);
}

int resil_throttle_admit_at(resil_throttle *t, resil_instant now)
{
    if (t->ops != NULL) {
        int rc = t->ops->admit(t->self, now);
        if (rc == RESIL_EREJECTED)
            resil__count(&t->rejected);
        return rc;
    }
    double p = resil_throttle_probability(t, now);
    if (p <= 0 || draw(t) >= p)
        return 0;
    atomic_fetch_add_explicit(bucket(t, now), 1, memory_order_relaxed);
    resil__count(&t->rejected);
    return RESIL_EREJECTED;
}

void resil_throttle_record_at(resil_throttle *t, resil_verdict v, resil_instant now)
{
    if (t->ops != NULL) {
        t->ops->record(t->self, v, now);
        return;
    }
    if (v == RESIL_BREAKER_IGNORED)
        return;
    uint64_t add = v == RESIL_BREAKER_SUCCESS ? 1 + ACCEPT_ONE : 1;
    atomic_fetch_add_explicit(bucket(t, now), add, memory_order_relaxed);
}

void resil_throttle_opts_get(const resil_throttle *t, resil_throttle_opts *out)
{
    if (t->ops != NULL) {
        resil_throttle_opts_default(out);
        return;
    }
    *out = t->opts;
}

uint64_t resil_throttle_rejected(const resil_throttle *t) { return resil__counted(&t->rejected); }

/* The throttle's clock, for the pipeline; NULL for another implementation. */
resil_clock *resil__throttle_clock(const resil_throttle *t)
{
    return t->ops == NULL ? t->opts.clock : NULL;
}
