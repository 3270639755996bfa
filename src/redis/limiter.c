/*
 * limiter.c — the fleet-wide rate limiter: GCRA in Redis, one script call
 * per acquire, a local token bucket while Redis is away.
 *
 * A rate is a fleet fact that cannot be leased out the way the budget's
 * tokens are: a lease of permits would let an idle instance sit on part of
 * the rate while a busy one is refused. So every acquire asks Redis, and
 * the one number GCRA keeps (the theoretical arrival time, TAT) makes that
 * a GET and a SET inside one atomic script. The cost is a round trip per
 * call, bounded by the client's timeout; what it buys is exactness — two
 * instances on one key admit exactly what one limiter would.
 *
 * Time is the caller's: the wall time of the limiter's clock in µs, so a
 * fake clock gives exact, repeatable sequences across instances, and
 * Redis's own TIME (which a test cannot move) is never read. The emission
 * interval period/rate is rounded up to a whole µs, so rounding can only
 * make the fleet slower than asked, never faster.
 *
 * When the client is down, or a call fails (which marks it down), the
 * local bucket decides; the client's sync thread reconnects on its own, and
 * the first call after that goes to Redis again. Nothing is cached between
 * calls, so there is nothing to go stale: an answer is as old as its call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

#define MAX_COUNT INT64_C(1000000000)
#define US_MAX_SPAN (INT64_C(1) << 50) /* burst × interval, exact in a double */

typedef struct fleet_limiter {
    resil_redis *client;
    resil_ratelimit *local;
    resil_clock *clock;
    int64_t interval_us, burst, rate;
    resil_duration period;
    char name[RESIL_BREAKER_NAME_MAX];
    char key[FLEET_KEY_MAX];
    _Atomic uint64_t fleet_admitted, fleet_rejected, local_admitted, local_rejected;
} fleet_limiter;

/* ---- the limiter interface --------------------------------------------------- */

static int decide_locally(fleet_limiter *l, int64_t n, resil_instant now, resil_duration *wait)
{
    int rc = resil_ratelimit_try_acquire_at(l->local, n, now, wait);
    if (rc == 0)
        resil__fleet_count(&l->local_admitted);
    else if (rc == RESIL_EREJECTED)
        resil__fleet_count(&l->local_rejected);
    return rc;
}

static int ask_fleet(fleet_limiter *l, int64_t n, fleet_state *s)
{
    int64_t wall_ns = resil_clock_wall_now(l->clock);
    fleet_cmd c = {.op = FLEET_GCRA, .key = l->key, .name = l->name,
                   .now_ms = wall_ns / 1000000};
    c.arg[0] = wall_ns / 1000;
    c.arg[1] = l->interval_us;
    c.arg[2] = l->burst;
    c.arg[3] = n;
    return resil__redis_call(l->client, &c, true, s);
}

static int try_acquire(void *self, int64_t n, resil_instant now, resil_duration *wait)
{
    fleet_limiter *l = self;
    if (n > l->burst)
        return RESIL_EINVAL;
    fleet_state s;
    if (!resil__redis_up(l->client) || ask_fleet(l, n, &s) != 0)
        return decide_locally(l, n, now, wait);
    if (s.code == FLEET_GRANTED) {
        resil__fleet_count(&l->fleet_admitted);
        return 0;
    }
    resil__fleet_count(&l->fleet_rejected);
    *wait = s.retry_us > INT64_MAX / 1000 ? RESIL_DURATION_MAX : s.retry_us * 1000;
    return RESIL_EREJECTED;
}

static void describe(void *self, resil_ratelimit_opts *out)
{
    fleet_limiter *l = self;
    out->kind = RESIL_RATELIMIT_TOKEN_BUCKET;
    out->rate = l->rate;
    out->period = l->period;
    out->burst = l->burst;
}

static void destroy(void *self)
{
    fleet_limiter *l = self;
    resil_redis *r = l->client;
    resil_ratelimit_free(l->local);
    free(l);
    resil_redis_free(r);
}

static const resil_ratelimit_ops limiter_ops = {
    .size = sizeof(resil_ratelimit_ops),
    .kind = "redis",
    .try_acquire = try_acquire,
    .opts = describe,
    .destroy = destroy,
};

/* ---- options and life ------------------------------------------------------------ */

void resil_redis_ratelimit_opts_default(resil_redis_ratelimit_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rate = 100;
    o->period = RESIL_S(1);
    o->burst = 100;
    o->instances = 1;
}

static int bad_count(const char *field, int64_t v, resil_err *err)
{
    return resil_err_set(err, RESIL_EINVAL, "redis_ratelimit.%s must be in [1, 1e9], got %lld",
                         field, (long long)v);
}

static int validate(resil_redis *r, const resil_redis_ratelimit_opts *o, resil_err *err)
{
    if (r == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_ratelimit: a client and options are required");
    int rc = resil__fleet_name_check("redis_ratelimit", o->name, err);
    if (rc != 0)
        return rc;
    if (o->rate < 1 || o->rate > MAX_COUNT)
        return bad_count("rate", o->rate, err);
    if (o->burst < 1 || o->burst > MAX_COUNT)
        return bad_count("burst", o->burst, err);
    if (o->period < RESIL_MS(1) || o->period > RESIL_S(86400))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_ratelimit.period must be in [1ms, 1d], got %lld ns",
                             (long long)o->period);
    if (o->period / 1000 < o->rate)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_ratelimit.rate must be at most one per microsecond of "
                             "the period, got %lld",
                             (long long)o->rate);
    if (o->instances < 1)
        return resil_err_set(err, RESIL_EINVAL, "redis_ratelimit.instances must be >= 1, got %u",
                             (unsigned)o->instances);
    return 0;
}

static int64_t interval_us(const resil_redis_ratelimit_opts *o)
{
    int64_t period_us = o->period / 1000;
    return (period_us + o->rate - 1) / o->rate;
}

static int make_local(fleet_limiter *l, const resil_redis_ratelimit_opts *o, resil_err *err)
{
    resil_ratelimit_opts lo;
    if (o->fallback != NULL) {
        lo = *o->fallback;
    } else {
        resil_ratelimit_opts_default(&lo, RESIL_RATELIMIT_TOKEN_BUCKET);
        lo.rate = resil__fleet_share(o->rate, o->instances);
        lo.period = o->period;
        lo.burst = resil__fleet_share(o->burst, o->instances);
    }
    lo.clock = l->clock;
    resil_err inner = {0, ""};
    return resil__fleet_refused_under("redis_ratelimit.fallback",
                                      resil_ratelimit_new(&lo, &l->local, &inner), &inner, err);
}

int resil_redis_ratelimit_new(resil_redis *r, const resil_redis_ratelimit_opts *o,
                              resil_ratelimit **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_ratelimit: out must not be NULL");
    *out = NULL;
    int rc = validate(r, o, err);
    if (rc != 0)
        return rc;
    if (o->burst > US_MAX_SPAN / interval_us(o))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_ratelimit.burst × period/rate must be under 2^50 µs "
                             "(35 years), got %lld × %lld µs",
                             (long long)o->burst, (long long)interval_us(o));
    fleet_limiter *l = calloc(1, sizeof *l);
    if (l == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "redis_ratelimit: out of memory");
    const fleet_config *cfg = resil__redis_config(r);
    l->clock = o->clock != NULL ? o->clock : cfg->clock;
    if ((rc = make_local(l, o, err)) != 0) {
        free(l);
        return rc;
    }
    l->client = r;
    l->interval_us = interval_us(o);
    l->burst = o->burst;
    l->rate = o->rate;
    l->period = o->period;
    snprintf(l->name, sizeof l->name, "%s", o->name);
    snprintf(l->key, sizeof l->key, "%slimit:%s", cfg->prefix, o->name);
    rc = resil_ratelimit_new_custom(&limiter_ops, l, l->clock, out, err);
    if (rc != 0) {
        resil_ratelimit_free(l->local);
        free(l);
        return rc;
    }
    resil__redis_retain(r);
    return 0;
}

int resil_redis_ratelimit_factory(const char *name, const resil_ratelimit_opts *o,
                                  resil_ratelimit **out, resil_err *err, void *ud)
{
    const resil_redis_limits_factory *f = ud;
    if (f == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_ratelimit: the factory needs its client");
    if (o->kind != RESIL_RATELIMIT_TOKEN_BUCKET)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_ratelimit: %s must be a token bucket to be shared, not a %s",
                             name, resil_ratelimit_kind_name(o->kind));
    resil_redis_ratelimit_opts ro;
    resil_redis_ratelimit_opts_default(&ro);
    ro.name = name;
    ro.rate = o->rate;
    ro.period = o->period;
    ro.burst = o->burst;
    ro.instances = f->instances > 0 ? f->instances : 1;
    ro.clock = o->clock;
    return resil_redis_ratelimit_new(f->client, &ro, out, err);
}

int resil_redis_ratelimit_stats_get(resil_ratelimit *rl, resil_redis_ratelimit_stats *out)
{
    fleet_limiter *l = resil_ratelimit_self(rl, &limiter_ops);
    if (l == NULL || out == NULL)
        return RESIL_EINVAL;
    out->fleet_admitted = atomic_load_explicit(&l->fleet_admitted, memory_order_relaxed);
    out->fleet_rejected = atomic_load_explicit(&l->fleet_rejected, memory_order_relaxed);
    out->local_admitted = atomic_load_explicit(&l->local_admitted, memory_order_relaxed);
    out->local_rejected = atomic_load_explicit(&l->local_rejected, memory_order_relaxed);
    return 0;
}
