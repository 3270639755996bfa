/*
 * timeout.h — deadlines: what an operation asks about its remaining time,
 * the options of the total and attempt timeout strategies, and the table
 * of per-operation timeouts.
 *
 * C cannot interrupt a running function, so timeouts are cooperative, and
 * no thread watches the clock. A deadline fires when it is observed:
 *  - by the operation, through resil_ctx_check() or resil_ctx_sleep(), or
 *    by asking resil_ctx_remaining() and handing the figure to whatever it
 *    blocks in (resil_ctx_remaining_ms() is CURLOPT_TIMEOUT_MS's shape;
 *    the CLI turns it into a kill of the child process);
 *  - by any wait resil itself does inside the timeout (the retry backoff,
 *    the hedging delay, a rate limiter's acquire): those waits end at the
 *    deadline instead of running past it.
 * Whoever observes it fires the attempt's token with RESIL_ETIMEDOUT, which
 * wakes everything waiting on that token at once. An operation that gives
 * up because of it returns kind RESIL_CANCELLED, and the timeout strategy
 * reports that as kind RESIL_TIMEOUT (code RESIL_ETIMEDOUT), which the
 * default retry classifier retries. An operation that neither polls nor
 * blocks in something bounded runs to its end, and whatever it returns
 * late is kept as it is: a late success is still a success.
 *
 * Each timeout strategy gives the work inside it a child token of the
 * enclosing one, on the executing thread's stack: firing an attempt's token
 * ends that attempt and nothing else; firing the total one ends all.
 */
#ifndef RESIL_TIMEOUT_H
#define RESIL_TIMEOUT_H

#include "retry.h"

RESIL_BEGIN_DECLS

#define RESIL_TIMEOUT_DEFAULT RESIL_S(30)

/* Time left before ctx's deadline: 0 once it has passed, RESIL_DURATION_MAX
 * when there is none. Reads ctx->clock (NULL = the system clock). */
RESIL_API resil_duration resil_ctx_remaining(const resil_attempt_ctx *ctx);
/* The same in whole milliseconds rounded up, for APIs that take them
 * (CURLOPT_TIMEOUT_MS): 0 means "no deadline", and a deadline already
 * passed gives 1 so that the callee times out at once instead of never. */
RESIL_API long resil_ctx_remaining_ms(const resil_attempt_ctx *ctx);
/* 0 while the attempt may go on; RESIL_ETIMEDOUT once the deadline has
 * passed (firing ctx->cancel with that reason), RESIL_ECANCELED when the
 * token fired for another reason. The call an operation polls with. */
RESIL_API int resil_ctx_check(resil_attempt_ctx *ctx);
/* Sleep `d` on ctx's clock, but never past its deadline: 0 after the full
 * wait, RESIL_ETIMEDOUT when the deadline came first (the token is fired),
 * RESIL_ECANCELED when the token fired. */
RESIL_API int resil_ctx_sleep(resil_attempt_ctx *ctx, resil_duration d);

/* ---- the timeout strategies ------------------------------------------------ */

typedef struct resil_timeouts resil_timeouts;

typedef struct resil_timeout_opts {
    resil_duration timeout;          /* default 30 s; > 0 */
    const resil_timeouts *per_operation; /* optional, not owned: the call's
                                        operation name picks its own timeout */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_timeout_opts;

RESIL_API void resil_timeout_opts_default(resil_timeout_opts *o);
/* `field` names the strategy in the message ("total_timeout.timeout must be
 * > 0, got 0s"). */
RESIL_API int resil_timeout_opts_validate(const resil_timeout_opts *o, const char *field,
                                          resil_err *err);

/* ---- named per-operation timeouts ------------------------------------------ */

#define RESIL_TIMEOUTS_NAME_MAX 128 /* bytes, including the NUL */

/* A table from operation names to timeouts, with a default for the rest.
 * Thread-safe: lookups take a shared lock and never allocate. */
RESIL_API int resil_timeouts_new(resil_duration default_timeout, resil_timeouts **out,
                                 resil_err *err);
RESIL_API void resil_timeouts_free(resil_timeouts *t);
/* Add or replace `operation`'s timeout (> 0). RESIL_EINVAL names the bad
 * argument; RESIL_ENOMEM. */
RESIL_API int resil_timeouts_set(resil_timeouts *t, const char *operation,
                                 resil_duration timeout, resil_err *err);
/* Forget it: 0, or RESIL_ENOTFOUND. */
RESIL_API int resil_timeouts_remove(resil_timeouts *t, const char *operation);
/* The operation's timeout, or the default for a NULL or unknown name. */
RESIL_API resil_duration resil_timeouts_get(const resil_timeouts *t, const char *operation);
RESIL_API resil_duration resil_timeouts_default(const resil_timeouts *t);
RESIL_API size_t resil_timeouts_count(const resil_timeouts *t);

RESIL_END_DECLS

#endif
