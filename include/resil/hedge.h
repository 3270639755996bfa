/*
 * hedge.h — hedging: when an attempt is slow, start another one and take
 * whichever answers acceptably first.
 *
 * Hedging trades load for tail latency, so it is bounded three ways: at
 * most `max_hedged` extra attempts, each started only after `delay` without
 * an acceptable answer (or at once when an attempt fails), and each paid
 * for by the retry budget when one is attached. The first acceptable
 * outcome wins; the other attempts get their tokens fired and whatever
 * they return later is discarded. If every attempt fails, the primary's
 * outcome is the answer.
 *
 * Every attempt of a hedged execution, the primary included, runs on a
 * worker thread from a pool the pipeline starts when it is built, and the
 * calling thread only waits: that is what lets the caller return the
 * moment a winner is known, however long a loser takes to notice its
 * token. The state the attempts share lives in a slot preallocated with
 * the pool and is released by whoever finishes last, so a loser returning
 * after the caller has gone touches nothing freed. Executing therefore
 * allocates nothing. When no worker or slot is free, the execution runs
 * unhedged on the caller's thread rather than wait for one.
 *
 * What the operation must know: its attempts may run concurrently on other
 * threads, with the same ctx->user, and a loser may still be running after
 * the execution returned — keep ctx->user (and the user data of hedge_on,
 * classifiers and listeners) alive until the pipeline is freed, or set
 * `wait_losers`, which makes the execution return only after every attempt
 * it started has ended. The rest of the call is the caller's again when the
 * execution returns: the slot keeps its own copies of the key, the
 * operation's name and the telemetry's HTTP attributes, and references to
 * the attempts' breakers. Names that together take more than
 * RESIL_HEDGE_KEPT_MAX bytes (with the attributes' own), which the slot
 * cannot copy, make that execution wait for its losers. On a loop
 * (async.h) the execution's block keeps the same copies, whatever their
 * size.
 *
 * ctx->hedge tells an attempt which one it is (0 for the primary), e.g. to
 * write into its own result slot; hedge_on gets the same context, so it
 * knows whose outcome it judges.
 */
#ifndef RESIL_HEDGE_H
#define RESIL_HEDGE_H

#include "budget.h"
#include "outcome.h"

RESIL_BEGIN_DECLS

#define RESIL_HEDGE_MAX 10          /* most hedged attempts per execution */
#define RESIL_HEDGE_MAX_WORKERS 256
#define RESIL_HEDGE_KEPT_MAX 1024 /* bytes of the call's names a blocking race copies */

typedef struct resil_hedge_opts {
    resil_duration delay;       /* default 2 s; >= 0; 0 starts every attempt at once */
    uint32_t max_hedged;        /* default 1; in [1, RESIL_HEDGE_MAX] */
    resil_retry_on_fn hedge_on; /* which outcomes call for another attempt
                                   (ctx: the attempt that ended, its
                                   ctx->hedge included); NULL =
                                   resil_retry_on_default or a breaker's
                                   refusal (docs/pipeline.md#hedging) */
    void *hedge_on_ud;
    resil_budget *budget;       /* hedges draw from it; NULL = the pipeline's
                                   retry budget, if any. Not owned. */
    uint32_t workers;           /* pool threads, started by the first blocking
                                   hedged execution; 0 = 4 × (max_hedged + 1);
                                   at most RESIL_HEDGE_MAX_WORKERS */
    bool wait_losers;           /* default false; see above */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_hedge_opts;

RESIL_API void resil_hedge_opts_default(resil_hedge_opts *o);
/* Names the first bad field ("hedging.max_hedged must be in [1, 10], got 0"). */
RESIL_API int resil_hedge_opts_validate(const resil_hedge_opts *o, resil_err *err);

RESIL_END_DECLS

#endif
