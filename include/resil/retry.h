/*
 * retry.h — the retry policy, the sans-I/O decision step, and the blocking
 * executor built on it.
 *
 * A policy is an immutable value: copy it, share it between threads. The
 * decision procedure is sans-I/O — it is handed the outcome of attempt n and
 * the current instant and answers "stop, for reason R" or "wait D, from
 * source S, then try again" — so a program with its own event loop drives it
 * step by step, and resil_retry_execute() is only a thin blocking loop over
 * the same step. One decision procedure, two ways to drive it.
 *
 * The decision order is fixed (DESIGN.md §3, the Retry Pattern article):
 *   before every attempt: cancelled?                    -> "cancelled"
 *   after an attempt:     success (unless retry_on_results
 *                         and retry_on retries it)      -> "succeeded"
 *                         outcome kind Cancelled        -> "cancelled"
 *                         not retryable                 -> "not retryable"
 *                         attempts used up              -> "attempts exhausted"
 *                         shared budget denies          -> "budget exhausted"
 *                         wait = the delay generator's answer, else the
 *                                server hint (Retry-After, capped), else backoff
 *                         now + wait reaches the deadline -> "deadline"
 *                         else wait (a cancel during it -> "cancelled")
 *
 * "Reaches": a wait ending exactly at the deadline also stops, since the
 * attempt after it would have no time left to run. A Retry-After wait or a
 * stop never draws a random number; only a wait computed by backoff does.
 * A budget that granted a retry has been paid even when the deadline then
 * stops the run (the order is fixed: budget before wait).
 *
 * A non-idempotent operation under a policy allowing more than one attempt
 * is refused before it runs (RESIL_UNSAFE_REFUSE, "refused"), or run exactly
 * once without retries (RESIL_UNSAFE_RUN_ONCE); the policy says which.
 *
 * Nothing here allocates: the per-execution state (resil_retry) and the
 * attempt records live in caller-provided memory.
 */
#ifndef RESIL_RETRY_H
#define RESIL_RETRY_H

#include "backoff.h"
#include "budget.h"
#include "cancel.h"
#include "outcome.h"

RESIL_BEGIN_DECLS

/* max_attempts value meaning "retry until something else stops it". It must
 * be asked for: 0 is not "forever", it is invalid. */
#define RESIL_ATTEMPTS_FOREVER UINT32_MAX

typedef enum resil_stop {
    RESIL_STOP_NONE = 0, /* not stopped: wait, then try again */
    RESIL_STOP_SUCCEEDED,
    RESIL_STOP_NOT_RETRYABLE,
    RESIL_STOP_ATTEMPTS_EXHAUSTED,
    RESIL_STOP_BUDGET_EXHAUSTED,
    RESIL_STOP_DEADLINE,
    RESIL_STOP_CANCELLED,
    RESIL_STOP_REFUSED /* non-idempotent work refused before it ran */
} resil_stop;

typedef enum resil_wait_source {
    RESIL_WAIT_NONE = 0,
    RESIL_WAIT_BACKOFF,
    RESIL_WAIT_RETRY_AFTER,
    RESIL_WAIT_GENERATOR /* the policy's delay generator chose it */
} resil_wait_source;

typedef enum resil_unsafe_mode {
    RESIL_UNSAFE_REFUSE = 0, /* refuse before running (the article) */
    RESIL_UNSAFE_RUN_ONCE    /* run once, never retry (DisableForUnsafeHttpMethods) */
} resil_unsafe_mode;

typedef enum resil_retry_after_mode {
    RESIL_RETRY_AFTER_HONOR = 0, /* use the hint, capped by retry_after_max */
    RESIL_RETRY_AFTER_IGNORE,    /* always use backoff */
    RESIL_RETRY_AFTER_BOUNDED    /* AWS-style: clamp to [backoff, backoff + 5 s] */
} resil_retry_after_mode;

/* "succeeded", "not retryable", "attempts exhausted", "budget exhausted",
 * "deadline", "cancelled", "refused" ("" for NONE). */
RESIL_API const char *resil_stop_name(resil_stop s);
/* "backoff", "Retry-After", "generator" ("" for NONE). */
RESIL_API const char *resil_wait_source_name(resil_wait_source s);

typedef struct resil_retry_info {
    uint32_t attempt;            /* the attempt that just failed, 1-based */
    resil_duration delay;        /* the wait before the next attempt */
    resil_wait_source source;
    const resil_outcome *cause;  /* the failure being retried */
    const resil_attempt_ctx *ctx; /* that attempt's context (never NULL) */
} resil_retry_info;

/* Called after a retry is decided and before the wait. `user` is the
 * execution's context pointer (resil_attempt_ctx.user, also info->ctx->user):
 * the hook may change what it points at, e.g. refresh an authorization
 * token. */
typedef void (*resil_on_retry_fn)(const resil_retry_info *info, void *user,
                                  void *hook_ud);

/* What a delay generator is asked about: the attempt that just ended and
 * was found worth retrying. */
typedef struct resil_delay_info {
    uint32_t attempt;             /* that attempt, 1-based */
    const resil_outcome *outcome; /* its outcome (a success too, under
                                     retry_on_results) */
    const resil_attempt_ctx *ctx; /* its context (never NULL); ctx->user is
                                     the call's own context */
} resil_delay_info;

/* A delay generator's answer meaning "no opinion: use the policy's rule"
 * (the server's hint when heeded, else the backoff). Any negative answer
 * means the same. */
#define RESIL_DELAY_BACKOFF ((resil_duration)-1)

/*
 * A custom delay schedule, asked before every wait (Polly v8's
 * DelayGenerator; Polly v7's sleep-duration provider is the same function
 * that never answers RESIL_DELAY_BACKOFF). It returns the wait (>= 0, taken
 * as is: neither max_delay nor retry_after_max caps it, the deadline rule
 * still applies) or RESIL_DELAY_BACKOFF. It must not block; it runs on the
 * thread that decides. A fixed list of waits is a backoff kind instead
 * (RESIL_BACKOFF_LIST, backoff.h).
 */
typedef resil_duration (*resil_delay_fn)(const resil_delay_info *info, void *ud);

typedef struct resil_retry_policy {
    uint32_t max_attempts;        /* includes the first; default 3; >= 1 */
    resil_retry_on_fn retry_on;   /* NULL = resil_retry_on_default */
    void *retry_on_ud;
    resil_backoff backoff;        /* see backoff.h; default exponential 1 s ×2, full jitter, cap 30 s */
    resil_duration max_total;     /* time budget including waits; 0 = none */
    resil_retry_after_mode retry_after;
    resil_duration retry_after_max; /* cap on a server hint; default 60 s */
    resil_budget *budget;         /* optional, shared; not owned */
    resil_unsafe_mode unsafe_mode;
    resil_on_retry_fn on_retry;   /* optional */
    void *on_retry_ud;
    /* Members added under this SONAME, each in a reserved slot (docs/abi.md);
     * zero is the old behaviour. */
    union {
        resil_delay_fn delay;     /* optional custom delay schedule (above) */
        resil_reserved delay_r_;
    };
    union {
        void *delay_ud;
        resil_reserved delay_ud_r_;
    };
    union {
        bool retry_on_results;    /* retry_on is asked about successes too (a
                                     200 whose body says "pending"): when it
                                     answers true the success is retried like
                                     a failure, and a run that then stops
                                     ("attempts exhausted", "deadline", ...)
                                     ends with that success as its final
                                     outcome. Default false: a success stops. */
        resil_reserved retry_on_results_r_;
    };
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_retry_policy;

RESIL_API void resil_retry_policy_default(resil_retry_policy *p);
/* Check every field, naming the first bad one ("retry.max_attempts must be
 * >= 1 (use RESIL_ATTEMPTS_FOREVER to retry forever), got 0"). */
RESIL_API int resil_retry_policy_validate(const resil_retry_policy *p,
                                          resil_err *err);

/* ---- the sans-I/O step ------------------------------------------------ */

typedef struct resil_retry_decision {
    resil_stop stop;          /* RESIL_STOP_NONE: wait, then attempt again */
    resil_duration wait;      /* valid when stop == NONE */
    resil_wait_source source; /* valid when stop == NONE */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_retry_decision;

/* One execution's state. Caller-owned; fields are private. */
typedef struct resil_retry {
    const resil_retry_policy *policy;
    uint32_t attempt;      /* attempts started so far */
    uint32_t max_attempts; /* effective: 1 for a run-once unsafe operation */
    resil_instant deadline;
    resil_backoff_state backoff;
    resil_budget_ticket ticket;
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_retry;

/*
 * Start an execution at `now`. `deadline` is an outside deadline (a
 * pipeline's total timeout; RESIL_INSTANT_MAX = none), combined with the
 * policy's max_total. Returns RESIL_STOP_NONE to go ahead (and counts one
 * request against the policy's budget), RESIL_STOP_REFUSED for
 * non-idempotent work under RESIL_UNSAFE_REFUSE, or RESIL_STOP_DEADLINE when
 * the deadline has already passed; nothing may run after a stop. `p` must
 * have passed resil_retry_policy_validate() and outlive the execution.
 */
RESIL_API resil_stop resil_retry_begin(resil_retry *r,
                                       const resil_retry_policy *p,
                                       resil_instant now, resil_instant deadline,
                                       bool idempotent);
/* Before each attempt: RESIL_STOP_CANCELLED when `cancelled`, else
 * RESIL_STOP_NONE and the attempt counter moves on (saturating). */
RESIL_API resil_stop resil_retry_before_attempt(resil_retry *r, bool cancelled);
/* After each attempt: the decision on its outcome `o`. `ctx` is the
 * context the attempt ran with, handed to the policy's classifier as is
 * (the step keeps no per-call state of its own, so any number of
 * executions interleave on one thread); NULL gives the classifier one
 * holding only the step's attempt number and deadline. `rng` feeds jitter
 * (NULL = thread's). */
RESIL_API resil_retry_decision resil_retry_after_attempt(resil_retry *r,
                                                         const resil_attempt_ctx *ctx,
                                                         const resil_outcome *o,
                                                         resil_instant now,
                                                         resil_rng *rng);
RESIL_API uint32_t resil_retry_attempt(const resil_retry *r);
RESIL_API resil_instant resil_retry_deadline(const resil_retry *r);

/* ---- the blocking executor -------------------------------------------- */

/* One attempt's context: what the operation gets, and what every
 * classifier and hook of the call gets with it. Everything per call lives
 * here, on the caller's stack, and nothing in thread-local storage: an
 * attempt may run on a hedging worker, and one thread may drive many
 * calls' steps in turn. */
struct resil_attempt_ctx {
    uint32_t attempt;       /* 1-based */
    resil_instant deadline; /* RESIL_INSTANT_MAX = none */
    resil_cancel *cancel;   /* may be NULL */
    resil_clock *clock;
    void *user;             /* the caller's context */
    uint32_t hedge;         /* which attempt of a hedged execution: 0 for the
                               primary (and anything not hedged), 1 … max_hedged
                               for hedges */
    const struct resil_exec_trace *trace; /* the execution's trace when traced and
                                             sampled, else NULL (resil_attempt_span) */
};

typedef resil_outcome (*resil_op_fn)(resil_attempt_ctx *ctx);

typedef struct resil_attempt_record {
    uint32_t number;          /* 1-based */
    resil_outcome outcome;
    resil_stop stop;          /* NONE when a retry followed */
    resil_duration wait;      /* the wait decided after it (0 on stop) */
    resil_wait_source source;
    resil_instant start;
    resil_duration duration;
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_attempt_record;

typedef void (*resil_on_attempt_fn)(const resil_attempt_record *rec, void *ud);

typedef struct resil_exec_opts {
    resil_clock *clock;     /* NULL = system clock */
    resil_rng *rng;         /* NULL = the calling thread's generator */
    resil_cancel *cancel;   /* NULL = not cancellable */
    resil_instant deadline; /* outside deadline; 0 or RESIL_INSTANT_MAX = none */
    bool non_idempotent;    /* the operation must not run twice */
    resil_attempt_record *records; /* optional: the first records_cap attempts */
    size_t records_cap;
    resil_on_attempt_fn on_attempt; /* optional: every attempt, as decided */
    void *on_attempt_ud;
    union {
        bool measure_elapsed; /* measure resil_retry_result.elapsed even when
                                 nothing else needs the clock (see below) */
        resil_reserved measure_elapsed_slot_;
    };
    resil_reserved reserved_[3]; /* room to grow (docs/abi.md) */
} resil_exec_opts;

typedef struct resil_retry_result {
    resil_stop stop;
    resil_outcome final;   /* the last attempt's outcome; kind Cancelled, code
                              RESIL_ECANCELED when the caller's token stopped the
                              run (before the first attempt or between two);
                              kind Rejected when refused or past the deadline
                              before any attempt ran */
    uint32_t attempts;     /* attempts made */
    size_t records_len;    /* records written: min(attempts, records_cap) */
    resil_duration elapsed; /* from the start to the last attempt's end (or the
                               last wait's), on the execution's clock; 0 unless
                               the execution read the clock: see below */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_retry_result;

/*
 * The executor reads the clock only when something needs the time: a
 * deadline (opts->deadline or the policy's max_total), attempt records,
 * on_attempt, or measure_elapsed. Then it reads it at the start, after each
 * attempt and after each wait, exactly as the records' start and duration
 * and the result's elapsed say; otherwise it reads it never, and elapsed is
 * 0. A retry without any of these makes the same decisions either way: with
 * no deadline no decision depends on the time.
 *
 * Run `op` under `p`. Returns 0 when the execution ran to a stop (read
 * out->stop), or RESIL_EINVAL for a NULL argument or invalid policy (err
 * says which field). `opts` may be NULL for the defaults. A cancel token
 * fired with RESIL_ETIMEDOUT (a total timeout) stops the run as "deadline",
 * keeping the last attempt's outcome; any other fire as "cancelled", and
 * the final outcome is then the cancellation (kind Cancelled, code
 * RESIL_ECANCELED), not the failure before it. Hooks run on the calling thread: on_attempt
 * first, then on_retry, then the wait. Nothing here allocates.
 */
RESIL_API int resil_retry_execute(const resil_retry_policy *p,
                                  const resil_exec_opts *opts, resil_op_fn op,
                                  void *user, resil_retry_result *out,
                                  resil_err *err);

RESIL_END_DECLS

#endif
