/*
 * throttle.c — client-side adaptive throttling, as the SRE book describes
 * it: refuse locally with probability max(0, (requests − K·accepts) /
 * (requests + 1)) over a recent window.
 *
 * The window is a ring of buckets, each one 64-bit word holding a bucket's
 * requests (low half) and accepts (high half); the ring, the draws and the
 * rejections change only under the lock. A success keeps requests ≤ K·accepts
 * true once it holds (it adds 1 to one side and K ≥ 1 to the other), so while
 * it holds and the bucket does not change, nothing a success does can make
 * the probability anything but 0. That state is published as a tally's tag
 * (tally.h): the current bucket's number when the window is calm, none
 * otherwise. Then a call admits after reading the tag, and a success counts
 * with one compare-and-swap on its CPU's own cell, so the success path writes
 * no line another CPU writes. Everything else — a failure, a new bucket, a
 * window where throttling may start — takes the lock, folds the cells into
 * the current bucket, decides exactly as the formula says, and publishes the
 * tag again. The draws it spends are resil__draw's, a counter mixed with the
 * seed, so a seeded run refuses the same calls every time.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_throttle_ops, ops, field)
#include "pipeline_internal.h"
#include "resil/adaptive.h"
#include "tally.h"

#define MAX_BUCKETS 120
#define ACCEPT_ONE (UINT64_C(1) << 32)

struct resil_throttle {
    const resil_throttle_ops *ops; /* NULL = built in */
    void *self;
    resil_throttle_opts opts;
    resil_duration bucket_len;
    uint64_t seed;
    resil__tally calm; /* tag: the current bucket while throttling cannot start */
    pthread_mutex_t mu; /* everything below */
    int64_t epoch;      /* the current bucket's number: floor(now / bucket_len) */
    uint64_t draws;
    _Atomic uint64_t rejected;
    uint64_t ring[MAX_BUCKETS];
};

static void publish(resil_throttle *t);

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
    if (resil__tally_init(&t->calm) != 0) {
        free(t);
        return resil_err_set(err, RESIL_ENOMEM, "throttle: out of memory");
    }
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        resil__tally_free(&t->calm);
        free(t);
        return resil_err_set(err, RESIL_ESYS, "throttle: pthread_mutex_init failed");
    }
    t->opts = *o;
    if (t->opts.clock == NULL)
        t->opts.clock = resil_clock_system();
    t->bucket_len = o->window / o->buckets;
    t->seed = o->seed != 0 ? o->seed : resil__os_seed();
    t->epoch = resil__floor_div(resil_clock_now(t->opts.clock), t->bucket_len);
    pthread_mutex_lock(&t->mu);
    publish(t);
    pthread_mutex_unlock(&t->mu);
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
        resil__tally_free(&t->calm);
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

/* ---- the ring (under mu) ------------------------------------------------------ */

/* Move the ring on to the bucket of `now`, zeroing the buckets it skips;
 * an instant older than the current bucket counts in it. */
static void turn(resil_throttle *t, resil_instant now)
{
    int64_t to = resil__floor_div(now, t->bucket_len);
    int64_t n = t->opts.buckets;
    for (int64_t e = t->epoch + 1; e <= to && e <= t->epoch + n; e++)
        t->ring[resil__floor_mod(e, n)] = 0;
    if (to > t->epoch)
        t->epoch = to;
}

static uint64_t *current(resil_throttle *t)
{
    return &t->ring[resil__floor_mod(t->epoch, t->opts.buckets)];
}

static void sum(const resil_throttle *t, uint64_t *requests, uint64_t *accepts)
{
    uint64_t r = 0, a = 0;
    for (int32_t i = 0; i < t->opts.buckets; i++) {
        r += t->ring[i] & (ACCEPT_ONE - 1);
        a += t->ring[i] >> 32;
    }
    *requests = r;
    *accepts = a;
}

/* The lock, with the lock-free successes folded into the bucket they were
 * counted in (the tag's, which is the current one) and the ring turned to
 * `now`. The tag names nothing until publish(). */
static void lock_at(resil_throttle *t, resil_instant now)
{
    pthread_mutex_lock(&t->mu);
    *current(t) += resil__tally_close(&t->calm, RESIL__TALLY_NONE) * (1 + ACCEPT_ONE);
    turn(t, now);
}

/* Let successes and admissions skip the lock while the window is calm. */
static void publish(resil_throttle *t)
{
    uint64_t r, a;
    sum(t, &r, &a);
    bool calm = resil_throttle_formula(r, a, t->opts.k) <= 0 && t->epoch >= 0 &&
                (uint64_t)t->epoch < RESIL__TALLY_NONE;
    resil__tally_close(&t->calm, calm ? (uint64_t)t->epoch : RESIL__TALLY_NONE);
}

/* The calm epoch `now` may use without the lock, or 0. */
static uint64_t calm_epoch(const resil_throttle *t, resil_instant now)
{
    uint64_t e = resil__tally_epoch(&t->calm);
    uint64_t tag = resil__tally_tag(e);
    if (tag == RESIL__TALLY_NONE || now < 0 || (uint64_t)(now / t->bucket_len) > tag)
        return 0;
    return e;
}

void resil_throttle_counts(resil_throttle *t, resil_instant now, uint64_t *requests,
                           uint64_t *accepts)
{
    *requests = *accepts = 0;
    if (t->ops != NULL)
        return;
    lock_at(t, now);
    sum(t, requests, accepts);
    publish(t);
    pthread_mutex_unlock(&t->mu);
}

double resil_throttle_probability(resil_throttle *t, resil_instant now)
{
    if (t->ops != NULL)
        return OPS_HAS(t->ops, probability) ? t->ops->probability(t->self, now) : 0;
    uint64_t r, a;
    resil_throttle_counts(t, now, &r, &a);
    return resil_throttle_formula(r, a, t->opts.k);
}

/* ---- calls ------------------------------------------------------------------------ */

/* Under mu. */
static double draw(resil_throttle *t)
{
    if (t->opts.rng != NULL)
        return resil_rng_next(t->opts.rng);
    return resil__draw(t->seed, t->draws++);
}

int resil_throttle_admit_at(resil_throttle *t, resil_instant now)
{
    if (t->ops != NULL) {
        int rc = t->ops->admit(t->self, now);
        if (rc == RESIL_EREJECTED)
            resil__count(&t->rejected);
        return rc;
    }
    if (calm_epoch(t, now) != 0)
        return 0;
    lock_at(t, now);
    uint64_t r, a;
    sum(t, &r, &a);
    double p = resil_throttle_formula(r, a, t->opts.k);
    int rc = 0;
    if (p > 0 && draw(t) < p) {
        *current(t) += 1;
        resil__count(&t->rejected);
        rc = RESIL_EREJECTED;
    }
    publish(t);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void resil_throttle_record_at(resil_throttle *t, resil_verdict v, resil_instant now)
{
    if (t->ops != NULL) {
        t->ops->record(t->self, v, now);
        return;
    }
    if (v == RESIL_BREAKER_IGNORED)
        return;
    bool success = v == RESIL_BREAKER_SUCCESS;
    uint64_t e = success ? calm_epoch(t, now) : 0;
    if (e != 0 && resil__tally_add(&t->calm, e))
        return;
    lock_at(t, now);
    *current(t) += success ? 1 + ACCEPT_ONE : 1;
    publish(t);
    pthread_mutex_unlock(&t->mu);
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
