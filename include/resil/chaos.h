/*
 * chaos.h — injecting failure on purpose: faults, replaced outcomes,
 * latency and arbitrary behaviour, at a chosen rate.
 *
 * Resilience that is never exercised does not work on the day it is
 * needed, so a pipeline can carry chaos strategies like any other (Polly's
 * Simmy family). Each is a shared object with three controls:
 *
 *  - an injection rate in [0, 1]: the share of calls that get the chaos;
 *  - an enable switch that any thread may flip while calls run — the kill
 *    switch of a production experiment (one relaxed atomic load on the
 *    call path, so a disabled strategy costs a load and a branch);
 *  - a seeded random source, so that an experiment replays exactly: the
 *    n-th decision of a strategy seeded S is the same in every run (the
 *    draws are a counter mixed with the seed, not a generator whose state
 *    threads would share). Seed 0 takes a seed from the OS.
 *
 * The strategy only decides; the executor acts. resil_chaos_decide() says
 * whether this call gets the chaos and the options say what it is (an
 * outcome, a delay, a callback), so the blocking pipeline and an
 * asynchronous executor run the same decision and neither has code that
 * sleeps inside a strategy. In a pipeline every injection is reported as
 * a RESIL_EVENT_CHAOS_INJECTED event naming the strategy.
 */
#ifndef RESIL_CHAOS_H
#define RESIL_CHAOS_H

#include "retry.h"
#include "rng.h"

RESIL_BEGIN_DECLS

typedef enum resil_chaos_kind {
    RESIL_CHAOS_FAULT = 0, /* the call fails with `outcome`; the operation is not called */
    RESIL_CHAOS_OUTCOME,   /* the operation runs; its outcome is replaced by `outcome` */
    RESIL_CHAOS_LATENCY,   /* wait `latency` first (cancellable, ends at the deadline) */
    RESIL_CHAOS_BEHAVIOR   /* call `behavior` first: drop a connection, fill a disk... */
} resil_chaos_kind;

#define RESIL_CHAOS_KIND_COUNT 4

/* Runs before the operation on the calling thread, with the attempt's
 * context (its deadline, token and `user`). */
typedef void (*resil_chaos_behavior_fn)(const resil_attempt_ctx *ctx, void *ud);

typedef struct resil_chaos_opts {
    resil_chaos_kind kind;
    double rate;                     /* default 0.001 (Polly's); in [0, 1] */
    bool enabled;                    /* default true: the switch's first position */
    uint64_t seed;                   /* default 0 = from the OS; else replayable */
    resil_rng *rng;                  /* optional source used instead of the seed
                                        (a scripted one for tests); the caller
                                        makes it safe for its threads */
    resil_outcome outcome;           /* FAULT, OUTCOME; default transient,
                                        detail "injected fault" */
    resil_duration latency;          /* LATENCY: > 0; default 1 s */
    resil_chaos_behavior_fn behavior;/* BEHAVIOR: required */
    void *behavior_ud;
    resil_reserved reserved_[4];     /* room to grow (docs/abi.md) */
} resil_chaos_opts;

typedef struct resil_chaos resil_chaos;

/* Defaults for `kind`. */
RESIL_API void resil_chaos_opts_default(resil_chaos_opts *o, resil_chaos_kind kind);
RESIL_API int resil_chaos_opts_validate(const resil_chaos_opts *o, resil_err *err);
/* Errors: RESIL_EINVAL naming the field ("chaos.rate must be in [0, 1],
 * got 1.5"), RESIL_ENOMEM. */
RESIL_API int resil_chaos_new(const resil_chaos_opts *o, resil_chaos **out, resil_err *err);
RESIL_API void resil_chaos_free(resil_chaos *c);

/* Should this call get the chaos? False at once when disabled (no draw is
 * spent); otherwise one draw, true below the rate. Thread-safe. */
RESIL_API bool resil_chaos_decide(resil_chaos *c);

/* The kill switch, and the rate, from any thread at any time. */
RESIL_API void resil_chaos_enable(resil_chaos *c, bool on);
RESIL_API bool resil_chaos_enabled(const resil_chaos *c);
RESIL_API int resil_chaos_set_rate(resil_chaos *c, double rate);
RESIL_API double resil_chaos_rate(const resil_chaos *c);

/* What was configured (rate and switch as they are now). */
RESIL_API void resil_chaos_opts_get(const resil_chaos *c, resil_chaos_opts *out);
/* Decisions taken while enabled, and how many of them injected. */
RESIL_API uint64_t resil_chaos_decisions(const resil_chaos *c);
RESIL_API uint64_t resil_chaos_injected(const resil_chaos *c);

/* "fault", "outcome", "latency", "behavior"; and back (-1 if unknown). */
RESIL_API const char *resil_chaos_kind_name(resil_chaos_kind k);
RESIL_API int resil_chaos_kind_parse(const char *s);

RESIL_END_DECLS

#endif
