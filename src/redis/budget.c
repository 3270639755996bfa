/*
 * budget.c — the fleet-wide retry budget: gRPC's tokens in Redis, spent
 * through small local leases.
 *
 * A retry decision sits on the retry path and must not wait for Redis, yet
 * "retries are allowed while the fleet's tokens exceed max/2" is a fleet
 * fact. The lease reconciles the two: at each sync an instance returns what
 * it holds and takes up to `lease_tokens` of the headroom above max/2
 * (the script moves them out of the shared count, so two instances never
 * hold the same headroom). Its failures then spend the lease locally — one
 * atomic integer, in thousandths like the core's model — and a retry is
 * allowed while the lease is above zero. A lease may go negative: that debt
 * is returned at the next sync like any other remainder. Successes
 * accumulate a credit of token_ratio each, added to the fleet at the sync.
 *
 * So a drained fleet denies everyone within one sync, including instances
 * that never failed, and an instance never asks Redis anything on a call.
 * The lease is renewed at every round with activity, and at once when a
 * failure brings it below half: a busy instance is rarely starved by its
 * own lease while the fleet still has headroom.
 *
 * A local tokens budget is fed every outcome all along, so that when Redis
 * goes away the fallback starts from this instance's recent history rather
 * than from full.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

#define MILLI 1000

typedef struct fleet_budget {
    fleet_member member;
    resil_redis *client;
    resil_budget *local;
    int64_t max_milli, ratio_milli, lease_milli;
    char name[RESIL_BREAKER_NAME_MAX];
    char key[FLEET_KEY_MAX];

    _Alignas(64) _Atomic int64_t lease;  /* thousandths this instance may spend */
    _Atomic int64_t credit;              /* successes' thousandths to add */
    _Atomic int64_t fleet;               /* the shared count after the last lease */
    _Atomic bool active;                 /* outcomes since the last round */
    int64_t last_refresh;                /* sync thread only */
} fleet_budget;

static fleet_budget *of(fleet_member *m) { return (fleet_budget *)m; }

/* ---- the budget interface ------------------------------------------------ */

static void on_request(void *self)
{
    fleet_budget *b = self;
    resil_budget_on_request(b->local);
}

static bool try_retry(void *self, const resil_outcome *cause, resil_budget_ticket *t)
{
    fleet_budget *b = self;
    if (!resil__redis_up(b->client))
        return resil_budget_try_retry(b->local, cause, t);
    return atomic_load_explicit(&b->lease, memory_order_relaxed) > 0;
}

static void on_result(void *self, const resil_outcome *o, uint32_t attempt,
                      resil_budget_ticket *t)
{
    fleet_budget *b = self;
    resil_budget_on_result(b->local, o, attempt, t);
    if (!resil__redis_up(b->client))
        return;
    if (o->kind == RESIL_SUCCESS) {
        atomic_fetch_add_explicit(&b->credit, b->ratio_milli, memory_order_relaxed);
    } else if (resil_retry_on_default(o, NULL)) { /* a failure the core models count */
        int64_t left = atomic_fetch_sub_explicit(&b->lease, MILLI, memory_order_relaxed) - MILLI;
        if (left < b->lease_milli / 2)
            resil__redis_wake(b->client);
    } else {
        return;
    }
    if (!atomic_load_explicit(&b->active, memory_order_relaxed))
        atomic_store_explicit(&b->active, true, memory_order_relaxed);
}

/* The fleet's tokens as last seen, plus this instance's unspent lease. */
static double level(void *self)
{
    fleet_budget *b = self;
    if (!resil__redis_up(b->client))
        return resil_budget_level(b->local);
    int64_t milli = atomic_load_explicit(&b->fleet, memory_order_relaxed) +
                    atomic_load_explicit(&b->lease, memory_order_relaxed);
    return (double)milli / MILLI;
}

static void destroy_budget(fleet_budget *b)
{
    resil_budget_free(b->local);
    free(b);
}

/* Give back the lease and the credit on the way out, best effort. */
static void return_lease(fleet_budget *b)
{
    fleet_cmd c = {.op = FLEET_LEASE, .key = b->key, .name = b->name};
    c.arg[0] = b->max_milli;
    c.arg[1] = atomic_load(&b->lease) + atomic_load(&b->credit);
    c.arg[2] = 0;
    fleet_state s;
    if (c.arg[1] != 0)
        resil__redis_call(b->client, &c, true, &s);
}

static void destroy(void *self)
{
    fleet_budget *b = self;
    resil_redis *r = b->client;
    resil__redis_detach(r, &b->member);
    return_lease(b);
    destroy_budget(b);
    resil_redis_free(r);
}

static const resil_budget_ops budget_ops = {
    .size = sizeof(resil_budget_ops),
    .name = "redis",
    .on_request = on_request,
    .try_retry = try_retry,
    .on_result = on_result,
    .level = level,
    .destroy = destroy,
};

/* ---- member hooks ------------------------------------------------------------- */

static void collect(fleet_member *m, fleet_queue *q, int64_t now, bool forced)
{
    fleet_budget *b = of(m);
    bool active = atomic_exchange_explicit(&b->active, false, memory_order_relaxed);
    bool due = forced || now - b->last_refresh >= resil__redis_config(b->client)->refresh_interval;
    if (!active && !due)
        return;
    fleet_cmd c = {.op = FLEET_LEASE, .member = m, .key = b->key, .name = b->name};
    int64_t held = atomic_load_explicit(&b->lease, memory_order_relaxed);
    int64_t credit = atomic_load_explicit(&b->credit, memory_order_relaxed);
    c.arg[0] = b->max_milli;
    c.arg[1] = held + credit;
    c.arg[2] = b->lease_milli;
    c.arg[3] = held;   /* not sent: what to take back when the answer comes */
    c.arg[4] = credit;
    if (resil__fleet_queue_push(q, &c) == 0)
        b->last_refresh = now;
}

static void apply(fleet_member *m, const fleet_cmd *c, const fleet_state *s)
{
    fleet_budget *b = of(m);
    int64_t granted = s->granted < 0               ? 0
                      : s->granted > b->lease_milli ? b->lease_milli
                                                     : s->granted;
    atomic_fetch_add_explicit(&b->lease, granted - c->arg[3], memory_order_relaxed);
    atomic_fetch_sub_explicit(&b->credit, c->arg[4], memory_order_relaxed);
    atomic_store_explicit(&b->fleet, s->tokens, memory_order_relaxed);
}

/* No lost hook: a lease sent without an answer is kept; if the script did
 * run, the fleet got it back and we return it once more (at most one lease).
 * No down hook: the local budget, fed all along, simply takes over. */
static const fleet_member_ops member_ops = {.collect = collect, .apply = apply};

/* ---- options and life ----------------------------------------------------------- */

void resil_redis_budget_opts_default(resil_redis_budget_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 10;
    o->token_ratio = 0.1;
    o->lease_tokens = 2;
}

static bool in_range(double v, double lo, double hi) { return isfinite(v) && v >= lo && v <= hi; }

static int validate(resil_redis *r, const resil_redis_budget_opts *o, resil_err *err)
{
    if (r == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_budget: a client and options are required");
    int rc = resil__fleet_name_check("redis_budget", o->name, err);
    if (rc != 0)
        return rc;
    if (!in_range(o->max_tokens, 0.001, 1e6))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_budget.max_tokens must be in [0.001, 1e6], got %g", o->max_tokens);
    if (!in_range(o->token_ratio, 0.001, o->max_tokens))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_budget.token_ratio must be in [0.001, max_tokens], got %g",
                             o->token_ratio);
    if (!in_range(o->lease_tokens, 0.001, o->max_tokens))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_budget.lease_tokens must be in [0.001, max_tokens], got %g",
                             o->lease_tokens);
    return 0;
}

static int make_local(fleet_budget *b, const resil_redis_budget_opts *o, resil_err *err)
{
    resil_budget_opts lo;
    if (o->fallback != NULL) {
        lo = *o->fallback;
    } else {
        resil_budget_opts_default(&lo, RESIL_BUDGET_TOKENS);
        lo.max_tokens = o->max_tokens < 1000 ? o->max_tokens : 1000;
        lo.token_ratio = o->token_ratio < lo.max_tokens ? o->token_ratio : lo.max_tokens;
    }
    resil_err inner = {0, ""};
    return resil__fleet_refused_under("redis_budget.fallback",
                                      resil_budget_new(&lo, &b->local, &inner), &inner, err);
}

static int64_t milli(double tokens) { return (int64_t)llround(tokens * MILLI); }

int resil_redis_budget_new(resil_redis *r, const resil_redis_budget_opts *o,
                           resil_budget **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_budget: out must not be NULL");
    *out = NULL;
    int rc = validate(r, o, err);
    if (rc != 0)
        return rc;
    fleet_budget *b = resil__fleet_line_alloc(sizeof *b);
    if (b == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "redis_budget: out of memory");
    rc = make_local(b, o, err);
    if (rc != 0) {
        free(b);
        return rc;
    }
    b->client = r;
    b->max_milli = milli(o->max_tokens);
    b->ratio_milli = milli(o->token_ratio);
    b->lease_milli = milli(o->lease_tokens);
    snprintf(b->name, sizeof b->name, "%s", o->name);
    snprintf(b->key, sizeof b->key, "%sbudget:%s", resil__redis_config(r)->prefix, o->name);
    b->member.ops = &member_ops;
    b->member.name = b->name;
    rc = resil_budget_new_custom(&budget_ops, b, out);
    if (rc != 0) {
        destroy_budget(b);
        return resil_err_set(err, rc, "redis_budget: out of memory");
    }
    resil__redis_retain(r);
    resil__redis_attach(r, &b->member);
    return 0;
}
