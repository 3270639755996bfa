/*
 * chaos.c — the decision every chaos strategy takes: inject, or not.
 *
 * The decision is the whole strategy; what an injection does (fail, wait,
 * replace the outcome, run a callback) is the executor's part, so that a
 * blocking and an asynchronous executor share it. The call path is built
 * for a strategy left in production switched off: the switch is one
 * relaxed atomic load, and nothing else is touched until it is on. When
 * it is on, the draw is a function of a shared counter and the seed
 * (resil__draw), so threads contend on one fetch-add and a seeded run
 * replays decision for decision. The rate is kept as the bits of a double
 * in an atomic word so that it too can change while calls run.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resil/chaos.h"

struct resil_chaos {
    _Atomic bool enabled;
    _Atomic uint64_t rate_bits;
    _Atomic uint64_t draws;    /* decisions taken while enabled */
    _Atomic uint64_t injected;
    uint64_t seed;
    resil_chaos_opts opts;
};

static const char *const kind_names[RESIL_CHAOS_KIND_COUNT] = {"fault", "outcome", "latency",
                                                              "behavior"};

const char *resil_chaos_kind_name(resil_chaos_kind k)
{
    return resil__name_at(kind_names, RESIL__COUNT(kind_names), (unsigned)k);
}

int resil_chaos_kind_parse(const char *s)
{
    return resil__name_index(kind_names, RESIL__COUNT(kind_names), s);
}

void resil_chaos_opts_default(resil_chaos_opts *o, resil_chaos_kind kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->rate = 0.001;
    o->enabled = true;
    o->latency = RESIL_S(1);
    o->outcome = resil_fail(RESIL_TRANSIENT, 0,
                            kind == RESIL_CHAOS_OUTCOME ? "injected outcome" : "injected fault");
}

static bool rate_ok(double rate) { return rate >= 0.0 && rate <= 1.0; }

int resil_chaos_opts_validate(const resil_chaos_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "chaos: options must not be NULL");
    if ((unsigned)o->kind >= RESIL_CHAOS_KIND_COUNT)
        return resil_err_set(err, RESIL_EINVAL, "chaos.kind must be fault, outcome, latency "
                                                "or behavior, got %d", (int)o->kind);
    if (!rate_ok(o->rate))
        return resil_err_set(err, RESIL_EINVAL, "chaos.rate must be in [0, 1], got %g", o->rate);
    if (o->kind == RESIL_CHAOS_LATENCY && o->latency <= 0)
        return resil__bad_duration(err, "chaos.latency", "> 0", o->latency);
    if (o->kind == RESIL_CHAOS_BEHAVIOR && o->behavior == NULL)
        return resil_err_set(err, RESIL_EINVAL, "chaos.behavior must not be NULL");
    if (o->kind == RESIL_CHAOS_FAULT && o->outcome.kind == RESIL_SUCCESS)
        return resil_err_set(err, RESIL_EINVAL, "chaos.outcome of a fault must be a failure");
    return 0;
}

static uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double double_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

int resil_chaos_new(const resil_chaos_opts *o, resil_chaos **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "chaos: out must not be NULL");
    int rc = resil_chaos_opts_validate(o, err);
    if (rc != 0)
        return rc;
    resil_chaos *c = calloc(1, sizeof *c);
    if (c == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "chaos: out of memory");
    c->opts = *o;
    c->seed = o->seed != 0 ? o->seed : resil__os_seed();
    atomic_init(&c->enabled, o->enabled);
    atomic_init(&c->rate_bits, bits_of(o->rate));
    *out = c;
    return 0;
}

void resil_chaos_free(resil_chaos *c) { free(c); }

bool resil_chaos_decide(resil_chaos *c)
{
    if (!atomic_load_explicit(&c->enabled, memory_order_relaxed))
        return false;
    uint64_t n = atomic_fetch_add_explicit(&c->draws, 1, memory_order_relaxed);
    double rate = double_of(atomic_load_explicit(&c->rate_bits, memory_order_relaxed));
    double u = c->opts.rng != NULL ? resil_rng_next(c->opts.rng) : resil__draw(c->seed, n);
    if (u >= rate)
        return false;
    resil__count(&c->injected);
    return true;
}

void resil_chaos_enable(resil_chaos *c, bool on)
{
    atomic_store_explicit(&c->enabled, on, memory_order_relaxed);
}

bool resil_chaos_enabled(const resil_chaos *c)
{
    return atomic_load_explicit(&((resil_chaos *)c)->enabled, memory_order_relaxed);
}

int resil_chaos_set_rate(resil_chaos *c, double rate)
{
    if (!rate_ok(rate))
        return RESIL_ERANGE;
    atomic_store_explicit(&c->rate_bits, bits_of(rate), memory_order_relaxed);
    return 0;
}

double resil_chaos_rate(const resil_chaos *c)
{
    return double_of(atomic_load_explicit(&((resil_chaos *)c)->rate_bits, memory_order_relaxed));
}

void resil_chaos_opts_get(const resil_chaos *c, resil_chaos_opts *out)
{
    *out = c->opts;
    out->rate = resil_chaos_rate(c);
    out->enabled = resil_chaos_enabled(c);
}

uint64_t resil_chaos_decisions(const resil_chaos *c) { return resil__counted(&c->draws); }

uint64_t resil_chaos_injected(const resil_chaos *c) { return resil__counted(&c->injected); }
