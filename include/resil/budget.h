/*
 * budget.h — retry budgets: a shared limit on how much retrying a process
 * (or, through libresil-redis, a fleet) may do.
 *
 * Per-request attempt limits cannot stop a retry storm: when everything
 * fails, every request still multiplies. A budget is shared by many
 * policies and denies retries once retrying stops paying. One interface,
 * several models:
 *
 *  - tokens (gRPC retry throttling, the default): tokens start at max (10);
 *    each failed attempt −1, each success +ratio (0.1); a retry is allowed
 *    only while tokens > max/2.
 *  - quota (AWS standard retry mode): capacity 500; a retry costs 5, or 10
 *    after a timeout; denied when the quota cannot pay. A success on the
 *    first try adds 1; a success after retries refunds its last retry's cost.
 *  - ratio (Finagle's RetryBudget): retries may be at most `percent` (20 %)
 *    of requests seen over `ttl` (10 s), plus a floor of `min_per_second`
 *    (10) retries per second.
 *
 * The protocol per execution: resil_budget_on_request() once when it starts,
 * resil_budget_on_result() after every attempt, and resil_budget_try_retry()
 * before each retry (or hedged attempt). The ticket remembers what the last
 * granted retry cost, so that a refund returns exactly that. The retry
 * executor does all of this; a caller of the sans-I/O step does it too.
 *
 * What counts: a success, and a failure whose kind is transient, throttled
 * or timeout (the kinds that say the dependency is in trouble). Permanent,
 * cancelled and rejected outcomes move no model.
 *
 * Budgets are thread-safe. The interface is a vtable so that adapters (the
 * fleet-wide Redis budget) plug in behind the same handle.
 */
#ifndef RESIL_BUDGET_H
#define RESIL_BUDGET_H

#include "outcome.h"

RESIL_BEGIN_DECLS

typedef struct resil_budget resil_budget;

typedef enum resil_budget_model {
    RESIL_BUDGET_TOKENS, /* gRPC */
    RESIL_BUDGET_QUOTA,  /* AWS standard */
    RESIL_BUDGET_RATIO   /* Finagle */
} resil_budget_model;

typedef struct resil_budget_opts {
    resil_budget_model model;
    /* tokens */
    double max_tokens;  /* default 10; > 0 and <= 1000 */
    double token_ratio; /* default 0.1; in [0.001, max_tokens]: tokens are
                           counted in thousandths, as gRPC specifies */
    /* quota */
    int32_t capacity;          /* default 500; >= 1 */
    int32_t retry_cost;        /* default 5; >= 0 */
    int32_t timeout_cost;      /* default 10; >= 0 */
    int32_t success_increment; /* default 1; >= 0 */
    /* ratio */
    resil_duration ttl;     /* default 10 s; >= 1 s and <= 60 s */
    double percent;         /* default 0.2; in [0, 1000] */
    int32_t min_per_second; /* default 10; >= 0 */
    resil_clock *clock;     /* ratio model's time source; NULL = CLOCK_MONOTONIC_COARSE
                               when its tick is at most 1 % of ttl/10, else the
                               system clock (docs/retry.md) */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_budget_opts;

typedef struct resil_budget_ticket {
    int32_t last_cost; /* what the last granted retry cost (quota model) */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_budget_ticket;

/* Fill the documented defaults (every model's fields) and set `model`.
 * resil_budget_new checks only the chosen model's fields, by name. */
RESIL_API void resil_budget_opts_default(resil_budget_opts *o,
                                         resil_budget_model model);
RESIL_API int resil_budget_new(const resil_budget_opts *o, resil_budget **out,
                               resil_err *err);
RESIL_API void resil_budget_free(resil_budget *b);

RESIL_API void resil_budget_on_request(resil_budget *b);
/* Ask for one retry after `cause`; true = granted (and paid for). */
RESIL_API bool resil_budget_try_retry(resil_budget *b, const resil_outcome *cause,
                                      resil_budget_ticket *t);
/* Report an attempt's outcome; `attempt` is 1-based. */
RESIL_API void resil_budget_on_result(resil_budget *b, const resil_outcome *o,
                                      uint32_t attempt, resil_budget_ticket *t);

/* Diagnostics: the model's current level (tokens, quota left, or retries
 * still allowed in the ratio window). */
RESIL_API double resil_budget_level(resil_budget *b);
RESIL_API const char *resil_budget_name(resil_budget *b);

/*
 * Plugging in another implementation (e.g. a fleet-wide budget): a table of
 * operations shared by every budget of that kind (keep it static const).
 * `size` comes first and versions the table: set it to
 * sizeof(resil_budget_ops); operations added later are read only from
 * tables long enough to have them (docs/abi.md).
 */
typedef struct resil_budget_ops {
    size_t size;      /* sizeof(resil_budget_ops) */
    const char *name; /* what resil_budget_name() says; NULL = "custom" */
    void (*on_request)(void *self);
    bool (*try_retry)(void *self, const resil_outcome *cause,
                      resil_budget_ticket *t);
    void (*on_result)(void *self, const resil_outcome *o, uint32_t attempt,
                      resil_budget_ticket *t);
    double (*level)(void *self);
    void (*destroy)(void *self); /* called by resil_budget_free; may be NULL */
} resil_budget_ops;

/* RESIL_EINVAL when on_request, try_retry, on_result or level is missing
 * or beyond the table's size; RESIL_ENOMEM. On failure `self` is not
 * destroyed; on success resil_budget_free() does. */
RESIL_API int resil_budget_new_custom(const resil_budget_ops *ops, void *self,
                                      resil_budget **out);

/* "tokens", "quota", "ratio"; the parser also accepts "grpc", "aws" and
 * "finagle", and returns RESIL_EINVAL for anything else. */
RESIL_API const char *resil_budget_model_name(resil_budget_model m);
RESIL_API int resil_budget_model_parse(const char *s, resil_budget_model *out);

RESIL_END_DECLS

#endif
