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
 * arithmetic exact. The ratio (Finagle) model needs a sliding window, so it
 * takes a mutex around ten time-bucketed counters sized at construction:
 * nothing allocates after resil_budget_new.
 *
 * Which outcomes count against a budget: success is a success; a failure
 * counts when it signals trouble on the other side — exactly the kinds the
 * default classifier retries (transient, throttled, timeout). A permanent
 * failure, a cancellation or a rejection by another strategy says nothing
 * about the dependency's health and moves nothing, as in gRPC where only
 * retryable failures spend tokens.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "resil/budget.h"

struct resil_budget {
    const resil_budget_ops *ops;
    void *self;
};

static bool counts_as_failure(const resil_outcome *o)
{
    return o->kind == RESIL_TRANSIENT || o->kind == RESIL_THROTTLED ||
           o->kind == RESIL_TIMEOUT;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t sat_add64(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

/* a * b for a, b >= 0, saturating. */
static int64_t sat_mul64(int64_t a, int64_t b)
{
    if (a != 0 && b > INT64_MAX / a)
        return INT64_MAX;
    return a * b;
}

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
    else if (counts_as_failure(o))
        tokens_add(b, -MILLI);
}

static double tokens_level(void *self)
{
    tokens_budget *b = self;
    return (double)atomic_load_explicit(&b->milli, memory_order_relaxed) / MILLI;
}

static const resil_budget_ops tokens_ops = {
    "tokens", tokens_on_request, tokens_try_retry, tokens_on_result,
    tokens_level, free,
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
    "quota", quota_on_request, quota_try_retry, quota_on_result,
    quota_level, free,
};

/* ---- ratio: Finagle's RetryBudget --------------------------------------- */

/* Ten buckets of ttl/10, as Finagle's windowed counter: a request or retry
 * leaves the window between 0.9·ttl and ttl after it happened. Amounts are
 * in millionths of a retry so that percent × requests stays exact. */
#define RATIO_BUCKETS 10
#define UNIT INT64_C(1000000)

typedef struct ratio_budget {
    pthread_mutex_t mu;
    resil_clock *clock;
    resil_duration width;
    int64_t slot; /* absolute index of the newest bucket */
    int64_t requests[RATIO_BUCKETS], retries[RATIO_BUCKETS];
    int64_t sum_requests, sum_retries;
    int64_t deposit;  /* per request: percent × UNIT */
    int64_t reserve;  /* min_per_second × ttl seconds × UNIT */
} ratio_budget;

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static size_t bucket_of(int64_t slot)
{
    int64_t m = slot % RATIO_BUCKETS;
    return (size_t)(m < 0 ? m + RATIO_BUCKETS : m);
}

static void ratio_clear(ratio_budget *b, size_t i)
{
    b->sum_requests -= b->requests[i];
    b->sum_retries -= b->retries[i];
    b->requests[i] = 0;
    b->retries[i] = 0;
}

/* Expire the buckets that slid out of the window. A clock that steps back
 * keeps the current bucket. */
static size_t ratio_advance(ratio_budget *b)
{
    int64_t cur = floor_div(resil_clock_now(b->clock), b->width);
    if (cur > b->slot) {
        int64_t gap = cur - b->slot;
        for (int64_t i = 1; i <= gap && i <= RATIO_BUCKETS; i++)
            ratio_clear(b, bucket_of(b->slot + i));
        b->slot = cur;
    }
    return bucket_of(b->slot);
}

/* Retries still allowed, in UNITs (may be negative once spent). */
static int64_t ratio_balance(const ratio_budget *b)
{
    int64_t earned = sat_add64(sat_mul64(b->deposit, b->sum_requests), b->reserve);
    return sat_add64(earned, -sat_mul64(UNIT, b->sum_retries));
}

static void ratio_on_request(void *self)
{
    ratio_budget *b = self;
    pthread_mutex_lock(&b->mu);
    size_t i = ratio_advance(b);
    b->requests[i]++;
    b->sum_requests++;
    pthread_mutex_unlock(&b->mu);
}

static bool ratio_try_retry(void *self, const resil_outcome *cause,
                            resil_budget_ticket *t)
{
    (void)cause;
    ratio_budget *b = self;
    pthread_mutex_lock(&b->mu);
    size_t i = ratio_advance(b);
    bool granted = ratio_balance(b) >= UNIT;
    if (granted) {
        b->retries[i]++;
        b->sum_retries++;
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
    ratio_advance(b);
    int64_t balance = ratio_balance(b);
    pthread_mutex_unlock(&b->mu);
    return balance <= 0 ? 0.0 : (double)(balance / UNIT);
}

static void ratio_destroy(void *self)
{
    ratio_budget *b = self;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static const resil_budget_ops ratio_ops = {
    "ratio", ratio_on_request, ratio_try_retry, ratio_on_result,
    ratio_level, ratio_destroy,
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
        return resil_err_set(err, RESIL_EINVAL,
                             "budget.ttl must be in [1s, 60s], got %lld ns",
                             (long long)o->ttl);
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
    tokens_budget *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->max_milli = llround(o->max_tokens * MILLI);
    b->ratio_milli = llround(o->token_ratio * MILLI);
    atomic_init(&b->milli, b->max_milli);
    return b;
}

static void *new_quota(const resil_budget_opts *o)
{
    quota_budget *b = calloc(1, sizeof *b);
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
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        return NULL;
    }
    b->clock = o->clock != NULL ? o->clock : resil_clock_system();
    b->width = o->ttl / RATIO_BUCKETS;
    b->slot = floor_div(resil_clock_now(b->clock), b->width);
    b->deposit = llround(o->percent * (double)UNIT);
    /* min_per_second × ttl in seconds, in UNITs: ttl in µs times the rate. */
    b->reserve = sat_mul64(o->min_per_second, o->ttl / 1000);
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
    if (ops == NULL || out == NULL || ops->on_request == NULL ||
        ops->try_retry == NULL || ops->on_result == NULL || ops->level == NULL)
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
    if (b->ops->destroy != NULL)
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

static const struct {
    const char *name;
    resil_budget_model model;
} model_names[] = {
    {"tokens", RESIL_BUDGET_TOKENS}, {"quota", RESIL_BUDGET_QUOTA},
    {"ratio", RESIL_BUDGET_RATIO},   {"grpc", RESIL_BUDGET_TOKENS},
    {"aws", RESIL_BUDGET_QUOTA},     {"finagle", RESIL_BUDGET_RATIO},
};

const char *resil_budget_model_name(resil_budget_model m)
{
    switch (m) {
    case RESIL_BUDGET_TOKENS:
        return "tokens";
    case RESIL_BUDGET_QUOTA:
        return "quota";
    case RESIL_BUDGET_RATIO:
        return "ratio";
    }
    return "unknown";
}

int resil_budget_model_parse(const char *s, resil_budget_model *out)
{
    if (s == NULL || out == NULL)
        return RESIL_EINVAL;
    for (size_t i = 0; i < sizeof model_names / sizeof model_names[0]; i++) {
        if (strcmp(s, model_names[i].name) == 0) {
            *out = model_names[i].model;
            return 0;
        }
    }
    return RESIL_EINVAL;
}
