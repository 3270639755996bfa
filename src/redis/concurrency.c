/*
 * concurrency.c — the fleet-wide concurrency limit: permits as leases in a
 * Redis sorted set, a local bulkhead while Redis is away.
 *
 * A permit counted in Redis must not outlive the instance that holds it,
 * or one crash leaks it for good. So each permit is a lease, a member
 * "INSTANCE:SEQ" scored with its expiry: the script drops lapsed leases
 * before it counts, and the instance's sync rounds push back the expiry of
 * every lease it still holds. A killed instance stops renewing, and its
 * permits come back within one lease.
 *
 * Permits are alike, so the handle's ticket needs no lease id: the
 * instance keeps the sequence numbers of the leases it holds, and a release
 * gives back the newest. Which of its permits a call gives back does not
 * matter; that the count goes down by one does. The same holds between
 * fleet leases and the permits the local bulkhead granted during an
 * outage: a release gives back a lease while Redis is up and a local permit
 * first while it is down.
 *
 * Time is the caller's, as for the breaker and the rate limiter: the wall
 * time of the limit's clock in ms, so a fake clock moves leases exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet.h"

#define INSTANCE_MAX 24

typedef struct fleet_conc {
    fleet_member member; /* first: the sync thread hands it back */
    resil_redis *client;
    resil_bulkhead *local;
    resil_clock *clock;
    int32_t max;
    int64_t lease_ms;
    char instance[INSTANCE_MAX];
    char name[RESIL_BREAKER_NAME_MAX];
    char key[FLEET_KEY_MAX];

    pthread_mutex_t mu;
    uint64_t *held; /* sequence numbers of the leases held, under mu */
    size_t held_len;
    uint64_t next_seq;
    int32_t local_held;
    int64_t last_renew; /* sync thread only */

    _Atomic uint64_t fleet_admitted, fleet_rejected, local_admitted, local_rejected;
    _Atomic int64_t fleet_in_use;
} fleet_conc;

static fleet_conc *of(fleet_member *m) { return (fleet_conc *)m; }

static int64_t wall_ms(fleet_conc *l) { return resil__fleet_wall_ms(l->clock); }

static int call(fleet_conc *l, fleet_op op, uint64_t seq, fleet_state *s)
{
    fleet_cmd c = {.op = op, .key = l->key, .name = l->instance, .now_ms = wall_ms(l)};
    c.arg[0] = op == FLEET_CACQUIRE ? l->max : (int64_t)seq;
    c.arg[1] = l->lease_ms;
    c.arg[2] = (int64_t)seq;
    int rc = resil__redis_call(l->client, &c, true, s);
    if (rc == 0)
        atomic_store_explicit(&l->fleet_in_use, s->in_use, memory_order_relaxed);
    return rc;
}

/* ---- the bulkhead interface ---------------------------------------------------- */

static int acquire_locally(fleet_conc *l, resil_cancel *cancel, bool wait,
                           resil_bulkhead_ticket *t)
{
    resil_bulkhead_ticket lt;
    int rc = wait ? resil_bulkhead_acquire(l->local, cancel, &lt)
                  : resil_bulkhead_try_acquire(l->local, &lt);
    if (rc != 0) {
        if (rc == RESIL_EREJECTED)
            resil__fleet_count(&l->local_rejected);
        return rc;
    }
    pthread_mutex_lock(&l->mu);
    l->local_held++;
    pthread_mutex_unlock(&l->mu);
    resil__fleet_count(&l->local_admitted);
    t->queued = lt.queued;
    return 0;
}

static uint64_t take_seq(fleet_conc *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t seq = ++l->next_seq;
    pthread_mutex_unlock(&l->mu);
    return seq;
}

/* The fleet keeps at most max leases live, so with max already held here
 * the oldest has lapsed (the instance stalled past it): forget it. */
static void keep_seq(fleet_conc *l, uint64_t seq)
{
    pthread_mutex_lock(&l->mu);
    if (l->held_len == (size_t)l->max) {
        memmove(l->held, l->held + 1, (l->held_len - 1) * sizeof *l->held);
        l->held_len--;
    }
    l->held[l->held_len++] = seq;
    pthread_mutex_unlock(&l->mu);
}

static int acquire(void *self, resil_cancel *cancel, bool wait, resil_bulkhead_ticket *t)
{
    fleet_conc *l = self;
    fleet_state s;
    uint64_t seq = take_seq(l);
    if (!resil__redis_up(l->client) || call(l, FLEET_CACQUIRE, seq, &s) != 0)
        return acquire_locally(l, cancel, wait, t);
    if (s.code != FLEET_GRANTED) {
        resil__fleet_count(&l->fleet_rejected);
        return RESIL_EREJECTED;
    }
    keep_seq(l, seq);
    resil__fleet_count(&l->fleet_admitted);
    t->queued = 0;
    return 0;
}

typedef enum { GIVE_NOTHING, GIVE_LEASE, GIVE_LOCAL } give;

/* Which permit to give back: a lease while Redis is up, else a local one.
 * Nothing when a lapsed lease was already forgotten (keep_seq). */
static give pick(fleet_conc *l, bool up, uint64_t *seq)
{
    if (l->held_len > 0 && (up || l->local_held == 0)) {
        *seq = l->held[--l->held_len];
        return GIVE_LEASE;
    }
    if (l->local_held == 0)
        return GIVE_NOTHING;
    l->local_held--;
    return GIVE_LOCAL;
}

static void release(void *self, const resil_bulkhead_ticket *t)
{
    (void)t;
    fleet_conc *l = self;
    bool up = resil__redis_up(l->client);
    uint64_t seq = 0;
    pthread_mutex_lock(&l->mu);
    give g = pick(l, up, &seq);
    pthread_mutex_unlock(&l->mu);
    if (g == GIVE_LOCAL) {
        resil_bulkhead_ticket lt = {.owner = l->local, .queued = 0};
        resil_bulkhead_release(&lt);
        return;
    }
    fleet_state s;
    if (g == GIVE_LEASE && up)
        call(l, FLEET_CRELEASE, seq, &s); /* on failure the lease lapses */
}

static int32_t in_flight(void *self)
{
    fleet_conc *l = self;
    pthread_mutex_lock(&l->mu);
    int32_t n = (int32_t)l->held_len + l->local_held;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static void describe(void *self, resil_bulkhead_opts *out)
{
    fleet_conc *l = self;
    out->max_concurrency = l->max;
    out->max_queue = 0;
    out->queue = false;
}

static void free_conc(fleet_conc *l)
{
    resil_bulkhead_free(l->local);
    pthread_mutex_destroy(&l->mu);
    free(l->held);
    free(l);
}

static void destroy(void *self)
{
    fleet_conc *l = self;
    resil_redis *r = l->client;
    resil__redis_detach(r, &l->member);
    free_conc(l);
    resil_redis_free(r);
}

static const resil_bulkhead_ops bulkhead_ops = {
    .size = sizeof(resil_bulkhead_ops),
    .kind = "redis",
    .acquire = acquire,
    .release = release,
    .in_flight = in_flight,
    .opts = describe,
    .destroy = destroy,
};

/* ---- member hooks: renew the leases held ---------------------------------------- */

static void collect(fleet_member *m, fleet_queue *q, int64_t now, bool forced)
{
    fleet_conc *l = of(m);
    pthread_mutex_lock(&l->mu);
    bool holding = l->held_len > 0;
    pthread_mutex_unlock(&l->mu);
    bool due = forced || now - l->last_renew >= l->lease_ms * 1000000 / 3;
    if (!holding || !due)
        return;
    fleet_cmd c = {.op = FLEET_CRENEW, .member = m, .key = l->key, .name = l->instance,
                   .now_ms = wall_ms(l)};
    c.arg[0] = l->lease_ms;
    if (resil__fleet_queue_push(q, &c) == 0)
        l->last_renew = now;
}

static void apply(fleet_member *m, const fleet_cmd *c, const fleet_state *s)
{
    (void)c;
    atomic_store_explicit(&of(m)->fleet_in_use, s->in_use, memory_order_relaxed);
}

static const fleet_member_ops member_ops = {.collect = collect, .apply = apply};

/* ---- options and life ------------------------------------------------------------ */

void resil_redis_concurrency_opts_default(resil_redis_concurrency_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_concurrency = 10;
    o->lease = RESIL_S(5);
    o->instances = 1;
}

static int validate(resil_redis *r, const resil_redis_concurrency_opts *o, resil_err *err)
{
    if (r == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_concurrency: a client and options are required");
    int rc = resil__fleet_name_check("redis_concurrency", o->name, err);
    if (rc != 0)
        return rc;
    if (o->max_concurrency < 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_concurrency.max_concurrency must be >= 1, got %d",
                             (int)o->max_concurrency);
    if (o->lease < RESIL_MS(10) || o->lease > RESIL_S(86400))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_concurrency.lease must be in [10ms, 1d], got %lld ns",
                             (long long)o->lease);
    if (o->instances < 1)
        return resil_err_set(err, RESIL_EINVAL, "redis_concurrency.instances must be >= 1, got %u",
                             (unsigned)o->instances);
    return 0;
}

static int make_local(fleet_conc *l, const resil_redis_concurrency_opts *o, resil_err *err)
{
    resil_bulkhead_opts lo;
    if (o->fallback != NULL) {
        lo = *o->fallback;
    } else {
        resil_bulkhead_opts_default(&lo);
        lo.max_concurrency = (int32_t)resil__fleet_share(o->max_concurrency, o->instances);
        lo.max_queue = 0;
        lo.queue = false;
    }
    lo.clock = l->clock;
    resil_err inner = {0, ""};
    return resil__fleet_refused_under("redis_concurrency.fallback",
                                      resil_bulkhead_new(&lo, &l->local, &inner), &inner, err);
}

/* Unique enough among the instances on one key: pid, wall ns, address. */
static void name_instance(fleet_conc *l)
{
    uint64_t x = (uint64_t)resil_clock_wall_now(resil_clock_system()) ^
                 ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)l;
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    snprintf(l->instance, sizeof l->instance, "%016llx", (unsigned long long)x);
}

static int alloc_conc(const resil_redis_concurrency_opts *o, fleet_conc **out, resil_err *err)
{
    fleet_conc *l = calloc(1, sizeof *l);
    if (l == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "redis_concurrency: out of memory");
    l->held = calloc((size_t)o->max_concurrency, sizeof *l->held);
    if (l->held == NULL) {
        free(l);
        return resil_err_set(err, RESIL_ENOMEM, "redis_concurrency: out of memory");
    }
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l->held);
        free(l);
        return resil_err_set(err, RESIL_ESYS, "redis_concurrency: pthread_mutex_init failed");
    }
    *out = l;
    return 0;
}

int resil_redis_concurrency_new(resil_redis *r, const resil_redis_concurrency_opts *o,
                                resil_bulkhead **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_concurrency: out must not be NULL");
    *out = NULL;
    fleet_conc *l = NULL;
    int rc = validate(r, o, err);
    if (rc == 0)
        rc = alloc_conc(o, &l, err);
    if (rc != 0)
        return rc;
    const fleet_config *cfg = resil__redis_config(r);
    l->clock = o->clock != NULL ? o->clock : cfg->clock;
    if ((rc = make_local(l, o, err)) != 0) {
        free_conc(l);
        return rc;
    }
    l->client = r;
    l->max = o->max_concurrency;
    l->lease_ms = o->lease / 1000000;
    name_instance(l);
    snprintf(l->name, sizeof l->name, "%s", o->name);
    snprintf(l->key, sizeof l->key, "%sconc:%s", cfg->prefix, o->name);
    l->member.ops = &member_ops;
    l->member.name = l->name;
    rc = resil_bulkhead_new_custom(&bulkhead_ops, l, out, err);
    if (rc != 0) {
        free_conc(l);
        return rc;
    }
    resil__redis_retain(r);
    resil__redis_attach(r, &l->member);
    return 0;
}

int resil_redis_concurrency_factory(const char *name, const resil_bulkhead_opts *o,
                                    resil_bulkhead **out, resil_err *err, void *ud)
{
    const resil_redis_limits_factory *f = ud;
    if (f == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_concurrency: the factory needs its client");
    resil_redis_concurrency_opts co;
    resil_redis_concurrency_opts_default(&co);
    co.name = name;
    co.max_concurrency = o->max_concurrency;
    co.instances = f->instances > 0 ? f->instances : 1;
    co.clock = o->clock;
    return resil_redis_concurrency_new(f->client, &co, out, err);
}

int resil_redis_concurrency_stats_get(resil_bulkhead *b, resil_redis_concurrency_stats *out)
{
    fleet_conc *l = resil_bulkhead_self(b, &bulkhead_ops);
    if (l == NULL || out == NULL)
        return RESIL_EINVAL;
    out->fleet_admitted = atomic_load_explicit(&l->fleet_admitted, memory_order_relaxed);
    out->fleet_rejected = atomic_load_explicit(&l->fleet_rejected, memory_order_relaxed);
    out->local_admitted = atomic_load_explicit(&l->local_admitted, memory_order_relaxed);
    out->local_rejected = atomic_load_explicit(&l->local_rejected, memory_order_relaxed);
    out->fleet_in_use = atomic_load_explicit(&l->fleet_in_use, memory_order_relaxed);
    out->held = in_flight(l);
    return 0;
}
