/*
 * pipeline.h — strategies composed in order, built once, executed by many
 * threads.
 *
 * A builder takes strategies outermost first; building checks the
 * composition and freezes it. The standard order, Microsoft's, is
 *
 *   rate limiter → total timeout → retry → circuit breaker → attempt timeout → op
 *
 * so that a refused call costs nothing, the total budget covers every
 * attempt and wait, and an open breaker fails the next attempt fast
 * inside the retry loop (a rejection is an attempt's outcome, which the
 * retry policy's classifier then stops on or waits out).
 *
 * Each strategy kind appears at most once, except the retry, which may
 * appear up to RESIL_PIPELINE_MAX_RETRIES times, each with its own policy
 * and predicate (an outer retry that refreshes a token on 401 around an
 * inner one for transient failures: the outer one sees what the inner one
 * gave up on). Building refuses compositions whose meaning would be
 * muddled: a total timeout must come before every retry and an attempt
 * timeout after every retry; hedging must come after every retry and the
 * fallback; an attempt timeout longer than the total timeout is an error. A composition that is legal but cannot meet its own
 * total timeout (attempts × attempt timeout + the largest waits) builds,
 * and says so in resil_pipeline_describe().
 *
 * The retry strategy is the retry executor itself (resil_retry_execute()):
 * one retry loop in the library. A pipeline without one still runs its
 * operation through a single-attempt policy at the place a retry would
 * go, so every result has the same shape: attempt records, a stop reason,
 * and an attempt count in which rejections outside the retry count none.
 *
 * A built pipeline is immutable and may be executed from any number of
 * threads at once. Executing allocates nothing; the one exception is a
 * registry breaker created on first use of a key (docs/pipeline.md).
 * Strategies made from options belong to the pipeline; objects handed in
 * (a bulkhead, limiter, breaker, registry, monitor, budget) are shared and
 * must outlive it — breakers are retained.
 */
#ifndef RESIL_PIPELINE_H
#define RESIL_PIPELINE_H

#include "adaptive.h"
#include "chaos.h"
#include "fallback.h"
#include "hedge.h"
#include "ratelimit.h"
#include "telemetry.h"
#include "timeout.h"

RESIL_BEGIN_DECLS

typedef struct resil_pipeline resil_pipeline;
typedef struct resil_pipeline_builder resil_pipeline_builder;

#define RESIL_PIPELINE_NAME_MAX 64     /* bytes, including the NUL */
#define RESIL_PIPELINE_MAX_LISTENERS 4
#define RESIL_PIPELINE_MAX_RETRIES 4   /* retry strategies in one pipeline */

/* ---- building ------------------------------------------------------------ */

/* `name` (1..63 bytes) labels events, metrics and descriptions. */
RESIL_API int resil_pipeline_builder_new(const char *name, resil_pipeline_builder **out,
                                         resil_err *err);
RESIL_API void resil_pipeline_builder_free(resil_pipeline_builder *b);

/* The clock for the pipeline's own reads and waits, and for the objects it
 * creates from options whose clock is NULL. Set it before adding those.
 * NULL = the system clock. */
RESIL_API void resil_pipeline_builder_clock(resil_pipeline_builder *b, resil_clock *c);
/* Add a listener (up to RESIL_PIPELINE_MAX_LISTENERS). */
RESIL_API int resil_pipeline_builder_listen(resil_pipeline_builder *b, resil_event_fn fn,
                                            void *ud);
/* Listen with a metrics sink and let it watch the pipeline's breaker,
 * registry and bulkhead gauges until the pipeline is freed. The sink must
 * outlive the pipeline. */
RESIL_API int resil_pipeline_builder_metrics(resil_pipeline_builder *b, resil_metrics *m);

/*
 * Add strategies, outermost first. Each returns 0 or an error; the first
 * error also sticks to the builder and is what resil_pipeline_build()
 * reports, so a caller may check only the build. "add" makes the object
 * from options (the pipeline owns it); "use" shares one the caller owns.
 */
/* A rate limiter: a call waits at most `max_wait` for a permit (0 = take it
 * now or be rejected with the limiter's retry-after). */
RESIL_API int resil_pipeline_add_rate_limiter(resil_pipeline_builder *b,
                                              const resil_ratelimit_opts *o,
                                              resil_duration max_wait);
RESIL_API int resil_pipeline_use_rate_limiter(resil_pipeline_builder *b, resil_ratelimit *rl,
                                              resil_duration max_wait);
RESIL_API int resil_pipeline_add_bulkhead(resil_pipeline_builder *b,
                                          const resil_bulkhead_opts *o);
RESIL_API int resil_pipeline_use_bulkhead(resil_pipeline_builder *b, resil_bulkhead *bh);
RESIL_API int resil_pipeline_add_total_timeout(resil_pipeline_builder *b,
                                               const resil_timeout_opts *o);
/* The policy is copied; its budget (if any) is shared. Called again, it
 * adds another retry inside the previous one. The result's stop, attempts
 * and records are the outermost retry's (one record per attempt of it,
 * which for an outer retry is a whole run of the inner one); telemetry
 * reports every retry's attempts. */
RESIL_API int resil_pipeline_add_retry(resil_pipeline_builder *b,
                                       const resil_retry_policy *p);
RESIL_API int resil_pipeline_add_breaker(resil_pipeline_builder *b,
                                         const resil_breaker_opts *o);
RESIL_API int resil_pipeline_use_breaker(resil_pipeline_builder *b, resil_breaker *br);
/* A breaker per key: the call's key (or operation, or the pipeline's name). */
RESIL_API int resil_pipeline_use_registry(resil_pipeline_builder *b, resil_registry *r);
/* How the breaker strategy reads outcomes; NULL = resil_pipeline_classify_default. */
RESIL_API void resil_pipeline_builder_classify(resil_pipeline_builder *b,
                                               resil_breaker_classify_fn fn, void *ud);
RESIL_API int resil_pipeline_add_attempt_timeout(resil_pipeline_builder *b,
                                                 const resil_timeout_opts *o);
RESIL_API int resil_pipeline_add_hedging(resil_pipeline_builder *b,
                                         const resil_hedge_opts *o);
RESIL_API int resil_pipeline_add_fallback(resil_pipeline_builder *b,
                                          const resil_fallback_opts *o);
RESIL_API int resil_pipeline_add_degrade(resil_pipeline_builder *b,
                                         const resil_degrade_opts *o);
RESIL_API int resil_pipeline_use_degrade(resil_pipeline_builder *b, resil_degrade *d);

/* Chaos (chaos.h): one strategy per kind, placed where its chaos should
 * strike. "add" makes it from options (reach it for the kill switch with
 * resil_pipeline_chaos()); "use" shares one the caller flips. */
RESIL_API int resil_pipeline_add_chaos(resil_pipeline_builder *b, const resil_chaos_opts *o);
RESIL_API int resil_pipeline_use_chaos(resil_pipeline_builder *b, resil_chaos *c);
/* The adaptive concurrency limiter and client-side throttling
 * (adaptive.h). Outcomes count by the pipeline's classifier, as the
 * breaker's do: a failure the dependency is to blame for is a drop, and
 * not an accept. An owned limiter reports its limit changes as events. */
RESIL_API int resil_pipeline_add_adaptive_limiter(resil_pipeline_builder *b,
                                                  const resil_limiter_opts *o);
RESIL_API int resil_pipeline_use_adaptive_limiter(resil_pipeline_builder *b,
                                                  resil_limiter *l);
RESIL_API int resil_pipeline_add_throttle(resil_pipeline_builder *b,
                                          const resil_throttle_opts *o);
RESIL_API int resil_pipeline_use_throttle(resil_pipeline_builder *b, resil_throttle *t);

/* Check the composition and freeze it. On success the strategies move into
 * *out and the builder is left empty (free it). Errors: the builder's first
 * error, RESIL_EINVAL for a bad composition (err says what), RESIL_ENOMEM,
 * RESIL_ESYS (worker threads). */
RESIL_API int resil_pipeline_build(resil_pipeline_builder *b, resil_pipeline **out,
                                   resil_err *err);
/* No execution may be running, and it is never called from the pipeline's
 * own operations or callbacks (a losing hedge's operation included: its
 * worker would join itself); waits for a blocking execution's hedged
 * attempts still running. It does not wait for asynchronous executions:
 * each must have ended, its hedges' losers included, first (async.h,
 * "Lifetimes"; `done` may free an unhedged execution's pipeline). */
RESIL_API void resil_pipeline_free(resil_pipeline *p);

/* The breaker classifier pipelines use by default, matching Polly's
 * standard handler: a success, and a failure the dependency is not to blame
 * for (permanent, user kinds), count as SUCCESS; transient, throttled and
 * timeout as FAILURE; cancelled and rejected as IGNORED. */
RESIL_API resil_breaker_result resil_pipeline_classify_default(const resil_outcome *o,
                                                               const resil_attempt_ctx *ctx,
                                                               void *ud);

/* ---- the standard pipeline ------------------------------------------------ */

typedef struct resil_standard_opts {
    const char *name;                /* default "standard" */
    resil_bulkhead_opts concurrency; /* Microsoft's "rate limiter" is a concurrency
                                        limiter: 1000 permits, queue 0 */
    resil_timeout_opts total;        /* 30 s */
    resil_retry_policy retry;        /* 4 attempts (3 retries), exponential from 2 s,
                                        Polly's jitter, no cap, Retry-After honoured */
    resil_breaker_opts breaker;      /* ratio 0.1 over 30 s, throughput 100, break 5 s */
    resil_timeout_opts attempt;      /* 10 s */
    resil_clock *clock;              /* NULL = the system clock */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_standard_opts;

RESIL_API void resil_standard_opts_default(resil_standard_opts *o);
/* Add the five strategies to a builder, in the standard order (for adding
 * listeners or a fallback around them). */
RESIL_API int resil_pipeline_add_standard(resil_pipeline_builder *b,
                                          const resil_standard_opts *o);
/* Build the standard pipeline in one call; `o` may be NULL for the defaults. */
RESIL_API int resil_pipeline_standard(const resil_standard_opts *o, resil_pipeline **out,
                                      resil_err *err);

/* ---- the standard hedging pipeline ----------------------------------------- */

/* Microsoft's standard hedging handler (AddStandardHedgingHandler): a
 * total timeout, hedging in place of the retry, then per attempt the
 * concurrency limiter, the breaker and the attempt timeout. Each hedged
 * attempt passes the three inner strategies on its own; with a registry
 * (resil_pipeline_use_registry before or after) and resil_call.hedge_keys
 * each endpoint has its breaker, as Microsoft keeps one per endpoint. */
typedef struct resil_standard_hedging_opts {
    const char *name;                /* default "standard-hedging" */
    resil_timeout_opts total;        /* 30 s */
    resil_hedge_opts hedging;        /* 1 hedge after 2 s, the default hedge_on */
    resil_bulkhead_opts concurrency; /* 1000 permits, queue 0 */
    resil_breaker_opts breaker;      /* ratio 0.1 over 30 s, throughput 100, break 5 s */
    resil_timeout_opts attempt;      /* 10 s */
    resil_clock *clock;              /* NULL = the system clock */
    resil_reserved reserved_[4];     /* room to grow (docs/abi.md) */
} resil_standard_hedging_opts;

RESIL_API void resil_standard_hedging_opts_default(resil_standard_hedging_opts *o);
/* Add the five strategies to a builder in Microsoft's hedging order. */
RESIL_API int resil_pipeline_add_standard_hedging(resil_pipeline_builder *b,
                                                  const resil_standard_hedging_opts *o);
/* Build it in one call; `o` may be NULL for the defaults. */
RESIL_API int resil_pipeline_standard_hedging(const resil_standard_hedging_opts *o,
                                              resil_pipeline **out, resil_err *err);

/* ---- executing ------------------------------------------------------------- */

#define RESIL_PRIORITY_MAX INT32_MAX

/* Per-call options. Zero is not the default for priority: fill with
 * resil_call_default(), or pass NULL. */
typedef struct resil_call {
    void *user;               /* handed to the operation as ctx->user */
    resil_cancel *cancel;     /* the caller's token; NULL = not cancellable */
    const char *key;          /* registry key; NULL = operation, else the pipeline name */
    const char *operation;    /* picks per-operation timeouts; reported in events */
    int32_t priority;         /* for the degradation gate; default RESIL_PRIORITY_MAX
                                 (untagged work is never shed) */
    bool non_idempotent;      /* the retry policy's unsafe mode applies */
    resil_rng *rng;           /* jitter source; NULL = the thread's */
    resil_attempt_record *records; /* optional: the first records_cap attempts */
    size_t records_cap;
    /* Members added under this SONAME, each in a reserved slot (docs/abi.md). */
    union {
        const char *const *hedge_keys; /* with a registry: the breaker key of each
                                          attempt of a hedged call, [0] the
                                          primary's, [k] hedge k's (ctx->hedge),
                                          so that hedges sent to other endpoints
                                          each meet their endpoint's breaker. An
                                          attempt past the list, or a NULL or
                                          empty entry, uses `key`'s breaker. Not
                                          owned; NULL = `key`'s for all */
        resil_reserved hedge_keys_r_;
    };
    union {
        size_t hedge_keys_len;         /* at most RESIL_HEDGE_MAX + 1; more is
                                          RESIL_EINVAL from the execution */
        resil_reserved hedge_keys_len_r_;
    };
    union {
        const resil_call_telemetry *telemetry; /* the caller's span and the call's
                                                  HTTP attributes; NULL = none */
        resil_reserved telemetry_slot_;
    };
    union {
        resil_breaker *breaker;        /* with a registry: the breaker `key` names,
                                          already looked up by the caller, who
                                          holds a reference for the call; the
                                          registry is not asked. NULL = look
                                          `key` up. The last slot: resil_call
                                          has no room left (docs/abi.md) */
        resil_reserved breaker_slot_;
    };
} resil_call;

RESIL_API void resil_call_default(resil_call *c);

typedef struct resil_pipeline_result {
    resil_outcome outcome;    /* what the caller gets (the fallback's, when it ran) */
    resil_outcome cause;      /* the outcome before any fallback */
    resil_stop stop;          /* the retry's stop reason; NONE when no attempt began */
    resil_strategy_kind rejected_by; /* who refused, when cause is a rejection */
    bool fallback;            /* the fallback produced `outcome` */
    uint32_t attempts;        /* attempts begun (a rejection inside the retry counts) */
    size_t records_len;
    uint32_t hedges;          /* hedged attempts started, over all attempts */
    uint32_t hedge_winner;    /* which one answered the last attempt (0 = primary) */
    resil_duration elapsed;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_pipeline_result;

/*
 * Run `op` through the pipeline. Returns 0 when the execution ran (read
 * out->outcome; rejections and failures are outcomes, not errors), or
 * RESIL_EINVAL for NULL arguments, or the registry's error when the key's
 * breaker cannot be had. `call` may be NULL.
 */
RESIL_API int resil_pipeline_execute(const resil_pipeline *p, resil_op_fn op,
                                     const resil_call *call, resil_pipeline_result *out);

/* ---- looking at it ---------------------------------------------------------- */

RESIL_API const char *resil_pipeline_name(const resil_pipeline *p);
/* The strategies in order, outermost first (the implicit single attempt of
 * a pipeline without retry is not one). */
RESIL_API size_t resil_pipeline_strategy_count(const resil_pipeline *p);
RESIL_API resil_strategy_kind resil_pipeline_strategy_at(const resil_pipeline *p, size_t i);
/* Warnings found at build ("worst case 4 × 10s + 14s = 54s exceeds the
 * total timeout 30s"). */
RESIL_API size_t resil_pipeline_warning_count(const resil_pipeline *p);
RESIL_API const char *resil_pipeline_warning(const resil_pipeline *p, size_t i);
/* The pipeline's chaos strategy of `kind` (to flip its switch from any
 * thread), its adaptive limiter, its throttle; NULL when it has none. */
RESIL_API resil_chaos *resil_pipeline_chaos(const resil_pipeline *p, resil_chaos_kind kind);
RESIL_API resil_limiter *resil_pipeline_adaptive_limiter(const resil_pipeline *p);
RESIL_API resil_throttle *resil_pipeline_throttle(const resil_pipeline *p);

typedef enum resil_describe_format {
    RESIL_DESCRIBE_TEXT = 0,
    RESIL_DESCRIBE_JSON
} resil_describe_format;

/* The strategies, their order and options, and the warnings, as text or
 * as one JSON object. Always NUL-terminates when cap > 0; returns the
 * length the full description needs (like snprintf). */
RESIL_API size_t resil_pipeline_describe(const resil_pipeline *p, resil_describe_format f,
                                         char *buf, size_t cap);

RESIL_END_DECLS

#endif
