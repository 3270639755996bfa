/*
 * budget.c — the three retry-budget models behind one handle.
 *
 * Every model, built-in or plugged in, is a resil_budget_ops vtable and a
 * state pointer: the handle never knows which model it holds, so the retry
 * executor, hedging and the fleet-wide Redis budget all go through one path.
 *
 * The models are shared by every thread of a process, so their hot paths are
 * built to stay cheap under contention. The tokens (gRPC) and quota (AWS)
 * models are a single atomic integer each, updated by compare-and-swap: gRPC
 * counts tokens in thousandths as its specification does, which keeps the
 * arithmetic exact; that integer has its cache line to itself (a success
 * at a full budget only reads it, and must not find another object's
 * writes on its line). The ratio (Finagle) model needs a sliding window, so it
 * takes a mutex around the breaker's rolling window, held by value: nothing
 * allocates after resil_budget_new.
 *
 * Which outcomes count against a budget: success is a success; a failure
 * counts when it signals trouble on the other side — exactly the kinds the
 * default classifier retries (transient, throttled, timeout), so the budget
 * asks that classifier rather than keeping its own list. A permanent
 * failure, a cancellation or a rejection by another strategy says nothing
 * about the dependency's health and moves nothing, as in gRPC where only
 * retryable failures spend tokens.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_budget_ops, ops, field)
#include "resil/budget.h"
#include "window.h"

struct resil_budget {
    const resil_budget_ops *ops;
    void *self;
};

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- tokens: gRPC retry throttling ------------------------------------ */

#define MILLI 1000

typedef struct tokens_budget {
    _Atomic int64_t milli; /* current tokens × 1000 */
    int64_t max_milli;
    int64_t ratio_milli;
} tokens_budget;

static void tokens_on_request(void *self) { (void)self; }

/* gRPC's rule: retry only while tokens > max/2. The failure itself already
 * paid, so asking costs nothing. */
static bool tokens_try_retry(void *self, const resil_outcome *cause,
                             resil_budget_ticket *t)
{
    (void)cause;
    tokens_budget *b = self;
    int64_t now = atomic_load_explicit(&b->milli, memory_order_relaxed);
    if (t != NULL)
        t->last_cost = 0;
    return 2 * now > b->max_milli;
}

static void tokens_add(tokens_budget *b, int64_t delta)
{
    int64_t cur = atomic_load_explicit(&b->milli, memory_order_relaxed);
    int64_t next;
    do {
        next = max64(0, min64(b->max_milli, cur + delta));
        if (next == cur)
            return;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->milli, &cur, next, memory_order_relaxed, memory_order_relaxed));
}

static void tokens_on_result(void *self, const resil_outcome *o,
                             uint32_t attempt, resil_budget_ticket *t)
{
    (void)attempt;
    (void)t;
    tokens_budget *b = self;
    if (o->kind == RESIL_SUCCESS)
        tokens_add(b, b->ratio_milli);
    else if (resil_retry_on_default(o, NULL))
        tokens_add(b, -MILLI);
}

static double tokens_level(void *self)
{
    tokens_budget *b = self;
    return (double)atomic_load_explicit(&b->milli, memory_order_relaxed) / MILLI;
}

static const resil_budget_ops tokens_ops = {
    .size = sizeof(resil_budget_ops),
    .name = "tokens",
    .on_request = tokens_on_request,
    .try_retry = tokens_try_retry,
    .on_result = tokens_on_result,
    .level = tokens_level,
    .destroy = free,
};

/* ---- quota: AWS standard retry mode ------------------------------------ */

typedef struct quota_budget {
    _Atomic int64_t quota;
    int64_t capacity;
    int64_t retry_cost;
    int64_t timeout_cost;
    int64_t success_increment;
} quota_budget;

static void quota_on_request(void *self) { (void)self; }

static bool quota_try_retry(void *self, const resil_outcome *cause,
                            resil_budget_ticket *t)
{
    quota_budget *b = self;
    int64_t cost = cause != NULL && cause->kind == RESIL_TIMEOUT ? b->timeout_cost
                                                                 : b->retry_cost;
    int64_t cur = atomic_load_explicit(&b->quota, memory_order_relaxed);
    do {
        if (cur < cost)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->quota, &cur, cur - cost, memory_order_relaxed, memory_order_relaxed));
    if (t != NULL)
        t->last_cost = (int32_t)cost;
    return true;
}

static void quota_add(quota_budget *b, int64_t amount)
{
    int64_t cur = atomic_load_explicit(&b->quota, memory_order_relaxed);
    int64_t next;
    do {
        next = min64(b->capacity, cur + amount);
        if (next == cur)
            return;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->quota, &cur, next, memory_order_relaxed, memory_order_relaxed));
}

/* A success on the first try earns a little; a success after retries gives
 * back what its last retry cost, once. Failures move nothing: the retry that
 * follows them pays. */
static void quota_on_result(void *self, const resil_outcome *o,
                            uint32_t attempt, resil_budget_ticket *t)
{
    quota_budget *b = self;
    if (o->kind != RESIL_SUCCESS)
        return;
    if (attempt <= 1) {
        quota_add(b, b->success_increment);
        return;
    }
    if (t == NULL)
        return;
    quota_add(b, t->last_cost);
    t->last_cost = 0;
}

static double quota_level(void *self)
{
    quota_budget *b = self;
    return (double)atomic_load_explicit(&b->quota, memory_order_relaxed);
}

static const resil_budget_ops quota_ops = {
    .size = sizeof(resil_budget_ops),
    .name = "quota",
    .on_request = quota_on_request,
    .try_retry = quota_try_retry,
    .on_result = quota_on_result,
    .level = quota_level,
    .destroy = free,
};

/* ---- ratio: Finagle's RetryBudget --------------------------------------- */

/* The breaker's rolling window (window.h), ten buckets of ttl/10 as in
 * Finagle's windowed counter, with requests counted by CPU as the breaker
 * counts successes: a request or retry leaves it between 0.9·ttl
 * and ttl after it happened. Every request and every retry is a call of the
 * window, and a retry is its "failure", so requests = total − failures.
 * Amounts are in millionths of a retry so that percent × requests stays
 * exact. */
#define UNIT INT64_C(1000000)

typedef struct ratio_budget {
    resil__window_cells requests; /* requests counted by CPU, without mu */
    pthread_mutex_t mu;
    resil_clock *clock;
    resil__window window;
    int64_t deposit; /* per request: percent × UNIT */
    int64_t reserve; /* min_per_second × ttl seconds × UNIT */
} ratio_budget;

static int64_t saturated(uint64_t n) { return n > INT64_MAX ? INT64_MAX : (int64_t)n; }

/* Retries still allowed at `now`, in UNITs (may be negative once spent).
 * Caller holds mu. */
static int64_t ratio_balance(const ratio_budget *b, resil_instant now)
{
    resil__window_counts c = resil__window_totals(&b->window, now);
    int64_t requests = saturated(c.total - c.failures), retries = saturated(c.failures);
    int64_t earned = resil__add_sat(resil__mul_sat(b->deposit, requests), b->reserve);
    return resil__add_sat(earned, -resil__mul_sat(UNIT, retries));
}

/* A request is the window's "success": counted by CPU without the mutex,
 * which only a retry, a level and the first request of a bucket take. */
static void ratio_on_request(void *self)
{
    ratio_budget *b = self;
    resil_instant now = resil_clock_now(b->clock);
    if (resil__window_cells_add(&b->requests, resil__window_cells_epoch(&b->requests), now))
        return;
    pthread_mutex_lock(&b->mu);
    resil__window_cells_fold(&b->requests, &b->window);
    resil__window_add(&b->window, now, false, false);
    resil__window_cells_follow(&b->requests, &b->window);
    pthread_mutex_unlock(&b->mu);
}

static bool ratio_try_retry(void *self, const resil_outcome *cause,
                            resil_budget_ticket *t)
{
    (void)cause;
    ratio_budget *b = self;
    pthread_mutex_lock(&b->mu);
    resil_instant now = resil_clock_now(b->clock);
    resil__window_cells_fold(&b->requests, &b->window);
    bool granted = ratio_balance(b, now) >= UNIT;
    if (granted) {
        resil__window_add(&b->window, now, true, false);
        resil__window_cells_follow(&b->requests, &b->window);
    }
    pthread_mutex_unlock(&b->mu);
    if (granted && t != NULL)
        t->last_cost = 1;
    return granted;
}

static void ratio_on_result(void *self, const resil_outcome *o,
                            uint32_t attempt, resil_budget_ticket *t)
{
    (void)self;
    (void)o;
    (void)attempt;
    (void)t;
}

static double ratio_level(void *self)
{
    ratio_budget *b = self;
    pthread_mutex_lock(&b->mu);
    resil__window_cells_fold(&b->requests, &b->window);
    int64_t balance = ratio_balance(b, resil_clock_now(b->clock));
    pthread_mutex_unlock(&b->mu);
    return balance <= 0 ? 0.0 : (double)(balance / UNIT);
}

static void ratio_destroy(void *self)
{
    ratio_budget *b = self;
    pthread_mutex_destroy(&b->mu);
    resil__window_cells_free(&b->requests);
    free(b);
}

static const resil_budget_ops ratio_ops = {
    .size = sizeof(resil_budget_ops),
    .name = "ratio",
    .on_request = ratio_on_request,
    .try_retry = ratio_try_retry,
    .on_result = ratio_on_result,
    .level = ratio_level,
    .destroy = ratio_destroy,
};

/* ---- options ------------------------------------------------------------ */

void resil_budget_opts_default(resil_budget_opts *o, resil_budget_model model)
{
    memset(o, 0, sizeof *o);
    o->model = model;
    o->max_tokens = 10;
    o->token_ratio = 0.1;
    o->capacity = 500;
    o->retry_cost = 5;
    o->timeout_cost = 10;
    o->success_increment = 1;
    o->ttl = RESIL_S(10);
    o->percent = 0.2;
    o->min_per_second = 10;
    o->clock = NULL;
}

static int validate_tokens(const resil_budget_opts *o, resil_err *err)
{
    if (!(o->max_tokens > 0 && o->max_tokens <= 1000))
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.max_tokens must be in (0, 1000], got %g",
                             o->max_tokens);
    /* Tokens are counted in thousandths, as gRPC specifies: a smaller ratio
     * would round to nothing. */
    if (!(o->token_ratio >= 0.001 && o->token_ratio <= o->max_tokens))
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.token_ratio must be in [0.001, max_tokens=%g], got %g",
                             o->max_tokens, o->token_ratio);
    return 0;
}

static int validate_quota(const resil_budget_opts *o, resil_err *err)
{
    if (o->capacity < 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.capacity must be >= 1, got %d", (int)o->capacity);
    if (o->retry_cost < 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.retry_cost must be >= 0, got %d", (int)o->retry_cost);
    if (o->timeout_cost < 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.timeout_cost must be >= 0, got %d", (int)o->timeout_cost);
    if (o->success_increment < 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.success_increment must be >= 0, got %d",
                             (int)o->success_increment);
    return 0;
}

static int validate_ratio(const resil_budget_opts *o, resil_err *err)
{
    if (o->ttl < RESIL_S(1) || o->ttl > RESIL_S(60))
        return resil__bad_duration(err, "budget.ttl", "in [1s, 60s]", o->ttl);
    if (!(o->percent >= 0 && o->percent <= 1000))
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.percent must be in [0, 1000], got %g", o->percent);
    if (o->min_per_second < 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.min_per_second must be >= 0, got %d",
                             (int)o->min_per_second);
    return 0;
}

/* Only the chosen model's fields are checked: the others are unused. */
static int validate(const resil_budget_opts *o, resil_err *err)
{
    switch (o->model) {
    case RESIL_BUDGET_TOKENS:
        return validate_tokens(o, err);
    case RESIL_BUDGET_QUOTA:
        return validate_quota(o, err);
    case RESIL_BUDGET_RATIO:
        return validate_ratio(o, err);
    }
    return resil_err_set(err, RESIL_EINVAL,
                         "budget.model must be tokens, quota or ratio, got %d",
                         (int)o->model);
}

/* ---- construction ------------------------------------------------------- */

static void *new_tokens(const resil_budget_opts *o)
{
    tokens_budget *b = resil__line_alloc(sizeof *b);
    if (b == NULL)
        return NULL;
    b->max_milli = llround(o->max_tokens * MILLI);
    b->ratio_milli = llround(o->token_ratio * MILLI);
    atomic_init(&b->milli, b->max_milli);
    return b;
}

static void *new_quota(const resil_budget_opts *o)
{
    quota_budget *b = resil__line_alloc(sizeof *b);
    if (b == NULL)
        return NULL;
    b->capacity = o->capacity;
    b->retry_cost = o->retry_cost;
    b->timeout_cost = o->timeout_cost;
    b->success_increment = o->success_increment;
    atomic_init(&b->quota, b->capacity);
    return b;
}

static void *new_ratio(const resil_budget_opts *o)
{
    ratio_budget *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    if (resil__window_cells_init(&b->requests, o->ttl) != 0) {
        free(b);
        return NULL;
    }
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        resil__window_cells_free(&b->requests);
        free(b);
        return NULL;
    }
    /* Its own clock, else the coarse one when a tick is at most 1 % of a
     * bucket (ttl/10, at least 100 ms): a request is placed in a bucket, no
     * more (docs/retry.md, budgets). */
    b->clock = o->clock != NULL ? o->clock : resil__clock_for(o->ttl / RESIL__WINDOW_BUCKETS);
    resil__window_init(&b->window, o->ttl);
    b->deposit = llround(o->percent * (double)UNIT);
    /* min_per_second × ttl in seconds, in UNITs: ttl in µs times the rate. */
    b->reserve = resil__mul_sat(o->min_per_second, o->ttl / 1000);
    return b;
}

int resil_budget_new(const resil_budget_opts *o, resil_budget **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "budget: options and out must not be NULL");
    *out = NULL;
    int rc = validate(o, err);
    if (rc != 0)
        return rc;
    static const resil_budget_ops *const ops[] = {&tokens_ops, &quota_ops, &ratio_ops};
    void *self = o->model == RESIL_BUDGET_TOKENS  ? new_tokens(o)
                 : o->model == RESIL_BUDGET_QUOTA ? new_quota(o)
                                                  : new_ratio(o);
    if (self == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "budget: out of memory");
    rc = resil_budget_new_custom(ops[o->model], self, out);
    if (rc != 0) {
        ops[o->model]->destroy(self);
        return resil_err_set(err, rc, "budget: out of memory");
    }
    return 0;
}

int resil_budget_new_custom(const resil_budget_ops *ops, void *self,
                            resil_budget **out)
{
    if (ops == NULL || out == NULL || !OPS_HAS(ops, on_request) || !OPS_HAS(ops, try_retry) ||
        !OPS_HAS(ops, on_result) || !OPS_HAS(ops, level))
        return RESIL_EINVAL;
    resil_budget *b = malloc(sizeof *b);
    if (b == NULL)
        return RESIL_ENOMEM;
    b->ops = ops;
    b->self = self;
    *out = b;
    return 0;
}

void resil_budget_free(resil_budget *b)
{
    if (b == NULL)
        return;
    if (OPS_HAS(b->ops, destroy))
        b->ops->destroy(b->self);
    free(b);
}

/* ---- the protocol ------------------------------------------------------- */

void resil_budget_on_request(resil_budget *b) { b->ops->on_request(b->self); }

bool resil_budget_try_retry(resil_budget *b, const resil_outcome *cause,
                            resil_budget_ticket *t)
{
    return b->ops->try_retry(b->self, cause, t);
}

void resil_budget_on_result(resil_budget *b, const resil_outcome *o,
                            uint32_t attempt, resil_budget_ticket *t)
{
    b->ops->on_result(b->self, o, attempt, t);
}

double resil_budget_level(resil_budget *b) { return b->ops->level(b->self); }

const char *resil_budget_name(resil_budget *b)
{
    return b->ops->name != NULL ? b->ops->name : "custom";
}

/* ---- names -------------------------------------------------------------- */

/* In enum order; the second table names each model after its origin. */
static const char *const model_names[] = {"tokens", "quota", "ratio"};
static const char *const origin_names[] = {"grpc", "aws", "finagle"};

const char *resil_budget_model_name(resil_budget_model m)
{
    return resil__name_at(model_names, RESIL__COUNT(model_names), (unsigned)m);
}

int resil_budget_model_parse(const char *s, resil_budget_model *out)
{
    int i = resil__name_index(model_names, RESIL__COUNT(model_names), s);
    if (i < 0)
        i = resil__name_index(origin_names, RESIL__COUNT(origin_names), s);
    if (i < 0 || out == NULL)
        return RESIL_EINVAL;
    *out = (resil_budget_model)i;
    return 0;
}
