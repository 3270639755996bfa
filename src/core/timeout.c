/*
 * timeout.c — deadlines as an operation and resil's own waits see them, and
 * the per-operation timeout table.
 *
 * No thread watches a deadline (timeout.h says why), so there is exactly one
 * rule, applied by whoever looks: a deadline found passed fires its token
 * with RESIL_ETIMEDOUT. resil__sleep_bounded() is that rule for waits — it
 * sleeps only up to the deadline and fires on reaching it — and the retry
 * backoff, the hedging delay and resil_ctx_sleep() all go through it, so
 * "no wait inside a timeout outlives it" holds in one place.
 *
 * The table is read on every execution that names an operation and written
 * rarely, so lookups take a shared lock over a sorted array and binary
 * search it: no allocation, no hashing of long keys.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipeline_internal.h"

/* ---- the context ------------------------------------------------------- */

static resil_clock *clock_of(const resil_attempt_ctx *ctx)
{
    return ctx->clock != NULL ? ctx->clock : resil_clock_system();
}

static bool has_deadline(const resil_attempt_ctx *ctx)
{
    return ctx->deadline != 0 && ctx->deadline != RESIL_INSTANT_MAX;
}

resil_duration resil_ctx_remaining(const resil_attempt_ctx *ctx)
{
    if (ctx == NULL || !has_deadline(ctx))
        return RESIL_DURATION_MAX;
    resil_duration left = resil_dur_sub(ctx->deadline, resil_clock_now(clock_of(ctx)));
    return left > 0 ? left : 0;
}

long resil_ctx_remaining_ms(const resil_attempt_ctx *ctx)
{
    resil_duration left = resil_ctx_remaining(ctx);
    if (left == RESIL_DURATION_MAX)
        return 0;
    if (left <= 0)
        return 1;
    int64_t ms = left / RESIL_MS(1) + (left % RESIL_MS(1) != 0);
    return ms > (int64_t)LONG_MAX ? LONG_MAX : (long)ms;
}

int resil_ctx_check(resil_attempt_ctx *ctx)
{
    if (ctx == NULL)
        return 0;
    if (resil_cancelled(ctx->cancel))
        return resil_cancel_reason(ctx->cancel) == RESIL_ETIMEDOUT ? RESIL_ETIMEDOUT
                                                                   : RESIL_ECANCELED;
    if (!has_deadline(ctx) || resil_clock_now(clock_of(ctx)) < ctx->deadline)
        return 0;
    if (ctx->cancel != NULL)
        resil_cancel_fire_reason(ctx->cancel, RESIL_ETIMEDOUT);
    return RESIL_ETIMEDOUT;
}

int resil_ctx_sleep(resil_attempt_ctx *ctx, resil_duration d)
{
    if (ctx == NULL)
        return RESIL_EINVAL;
    resil_instant deadline = has_deadline(ctx) ? ctx->deadline : RESIL_INSTANT_MAX;
    int rc = resil__sleep_bounded(clock_of(ctx), d, ctx->cancel, deadline, ctx->cancel);
    if (rc == RESIL_ECANCELED && ctx->cancel != NULL &&
        resil_cancel_reason(ctx->cancel) == RESIL_ETIMEDOUT)
        return RESIL_ETIMEDOUT;
    return rc;
}

static int fire_timeout(resil_cancel *token)
{
    if (token != NULL)
        resil_cancel_fire_reason(token, RESIL_ETIMEDOUT);
    return RESIL_ETIMEDOUT;
}

int resil__sleep_bounded(resil_clock *clock, resil_duration d, resil_cancel *cancel,
                         resil_instant deadline, resil_cancel *deadline_token)
{
    if (deadline == RESIL_INSTANT_MAX)
        return resil_clock_sleep(clock, d, cancel) == 0 ? 0 : RESIL_ECANCELED;
    resil_duration left = resil_dur_sub(deadline, resil_clock_now(clock));
    if (left <= 0)
        return fire_timeout(deadline_token);
    bool cut = d >= left;
    if (resil_clock_sleep(clock, cut ? left : d, cancel) != 0)
        return RESIL_ECANCELED;
    /* The clock may have moved further than asked (a stalled process, a
     * test's jump): what counts is where it is now. */
    if (cut || resil_clock_now(clock) >= deadline)
        return fire_timeout(deadline_token);
    return 0;
}

/* ---- strategy options ------------------------------------------------------ */

void resil_timeout_opts_default(resil_timeout_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout = RESIL_TIMEOUT_DEFAULT;
}

int resil_timeout_opts_validate(const resil_timeout_opts *o, const char *field,
                                resil_err *err)
{
    if (field == NULL)
        field = "timeout";
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "%s: options must not be NULL", field);
    if (o->timeout > 0)
        return 0;
    char name[128];
    snprintf(name, sizeof name, "%s.timeout", field);
    return resil__bad_duration(err, name, "> 0", o->timeout);
}

/* ---- the table ------------------------------------------------------------ */

typedef struct entry {
    char *name;
    resil_duration timeout;
} entry;

struct resil_timeouts {
    pthread_rwlock_t lock;
    resil_duration fallback;
    entry *entries; /* sorted by name */
    size_t len, cap;
};

static int check_timeout(resil_duration d, const char *what, resil_err *err)
{
    if (d > 0)
        return 0;
    char name[32];
    snprintf(name, sizeof name, "timeouts.%s", what);
    return resil__bad_duration(err, name, "> 0", d);
}

int resil_timeouts_new(resil_duration default_timeout, resil_timeouts **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "timeouts: out must not be NULL");
    int rc = check_timeout(default_timeout, "default", err);
    if (rc != 0)
        return rc;
    resil_timeouts *t = calloc(1, sizeof *t);
    if (t == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "timeouts: out of memory");
    if (pthread_rwlock_init(&t->lock, NULL) != 0) {
        free(t);
        return resil_err_set(err, RESIL_ESYS, "timeouts: pthread_rwlock_init failed");
    }
    t->fallback = default_timeout;
    *out = t;
    return 0;
}

void resil_timeouts_free(resil_timeouts *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->len; i++)
        free(t->entries[i].name);
    free(t->entries);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

/* The index of `name`, or where it would go (*found says which). Caller
 * holds the lock. */
static size_t find(const resil_timeouts *t, const char *name, bool *found)
{
    size_t lo = 0, hi = t->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->entries[mid].name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static int grow(resil_timeouts *t)
{
    if (t->len < t->cap)
        return 0;
    size_t cap = t->cap ? t->cap * 2 : 8;
    entry *e = realloc(t->entries, cap * sizeof *e);
    if (e == NULL)
        return RESIL_ENOMEM;
    t->entries = e;
    t->cap = cap;
    return 0;
}

static int check_name(const char *operation, resil_err *err)
{
    if (operation == NULL || operation[0] == '\0')
        return resil_err_set(err, RESIL_EINVAL, "timeouts: operation name must not be empty");
    if (strlen(operation) >= RESIL_TIMEOUTS_NAME_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "timeouts: operation name must be shorter than %d bytes, got %zu",
                             RESIL_TIMEOUTS_NAME_MAX, strlen(operation));
    return 0;
}

static int insert(resil_timeouts *t, size_t at, const char *operation, resil_duration d)
{
    char *copy = strdup(operation);
    if (copy == NULL || grow(t) != 0) {
        free(copy);
        return RESIL_ENOMEM;
    }
    memmove(&t->entries[at + 1], &t->entries[at], (t->len - at) * sizeof *t->entries);
    t->entries[at].name = copy;
    t->entries[at].timeout = d;
    t->len++;
    return 0;
}

int resil_timeouts_set(resil_timeouts *t, const char *operation, resil_duration timeout,
                       resil_err *err)
{
    if (t == NULL)
        return resil_err_set(err, RESIL_EINVAL, "timeouts: table must not be NULL");
    int rc = check_name(operation, err);
    if (rc == 0)
        rc = check_timeout(timeout, "timeout", err);
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&t->lock);
    bool found;
    size_t at = find(t, operation, &found);
    if (found)
        t->entries[at].timeout = timeout;
    else
        rc = insert(t, at, operation, timeout);
    pthread_rwlock_unlock(&t->lock);
    if (rc != 0)
        return resil_err_set(err, rc, "timeouts: out of memory");
    return 0;
}

int resil_timeouts_remove(resil_timeouts *t, const char *operation)
{
    if (t == NULL || operation == NULL)
        return RESIL_EINVAL;
    pthread_rwlock_wrlock(&t->lock);
    bool found;
    size_t at = find(t, operation, &found);
    if (found) {
        free(t->entries[at].name);
        memmove(&t->entries[at], &t->entries[at + 1], (t->len - at - 1) * sizeof *t->entries);
        t->len--;
    }
    pthread_rwlock_unlock(&t->lock);
    return found ? 0 : RESIL_ENOTFOUND;
}

resil_duration resil_timeouts_get(const resil_timeouts *t, const char *operation)
{
    if (t == NULL)
        return RESIL_TIMEOUT_DEFAULT;
    resil_timeouts *mt = (resil_timeouts *)t; /* the lock is not part of the value */
    if (operation == NULL)
        return t->fallback;
    pthread_rwlock_rdlock(&mt->lock);
    bool found;
    size_t at = find(t, operation, &found);
    resil_duration d = found ? t->entries[at].timeout : t->fallback;
    pthread_rwlock_unlock(&mt->lock);
    return d;
}

resil_duration resil_timeouts_default(const resil_timeouts *t)
{
    return t != NULL ? t->fallback : RESIL_TIMEOUT_DEFAULT;
}

size_t resil_timeouts_count(const resil_timeouts *t)
{
    if (t == NULL)
        return 0;
    resil_timeouts *mt = (resil_timeouts *)t;
    pthread_rwlock_rdlock(&mt->lock);
    size_t n = t->len;
    pthread_rwlock_unlock(&mt->lock);
    return n;
}
