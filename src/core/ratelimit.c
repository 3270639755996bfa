/*
 * ratelimit.c — token bucket, fixed window and sliding window behind one
 * handle.
 *
 * Exactness beats cleverness here: a limiter that drifts by a fraction of a
 * nanosecond per permit gives different admit/reject sequences on
 * different runs of the same test, and a Retry-After that is one tick early
 * invites a rejection. So every kind works in integers under one mutex: the
 * token bucket keeps its level in "units" where one permit is `period`
 * units and each nanosecond earns `rate` units (rate/period permits per ns,
 * exactly, with no division until a retry-after is rounded up); the windows
 * count whole permits. The critical sections are a few arithmetic
 * operations, so the mutex costs about what a lock-free CAS loop would,
 * without squeezing two values into one word.
 *
 * Each kind is three small functions over the same state (advance to now,
 * take, compute the wait), dispatched by a switch; the blocking acquire is
 * one loop over the non-blocking step and the clock's cancellable sleep.
 *
 * Another implementation (resil_ratelimit_new_custom) gets the same handle
 * with the kind OTHER and a capacity of zero, so the built-in step's first
 * check — n against the capacity, read by kind — already fails for it, and
 * only that cold branch asks whether the handle is foreign. The counters
 * and the blocking loop are the handle's and serve every implementation.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_ratelimit_ops, ops, field)
#include "resil/ratelimit.h"

typedef struct log_entry {
    resil_instant at;
    int64_t n;
} log_entry;

struct resil_ratelimit {
    resil_ratelimit_opts opts;
    resil_clock *clock;
    pthread_mutex_t mu;
    resil_instant seen; /* the latest instant observed; time never goes back */
    /* token bucket, in units: one permit = period units */
    int64_t units, capacity;
    /* fixed window */
    resil_instant window_start;
    int64_t used;
    /* sliding window: admissions still inside the window, oldest first */
    log_entry *log;
    size_t log_cap, log_head, log_len;
    int64_t live;
    _Atomic uint64_t admitted, rejected, timed_out, cancelled;
    /* another implementation: kind OTHER, permits 0 */
    const resil_ratelimit_ops *ops;
    void *self;
};

#define OTHER ((resil_ratelimit_kind)3) /* no built-in kind has it */

static bool is_other(const resil_ratelimit *rl)
{
    return rl->opts.kind == OTHER;
}

void resil_ratelimit_opts_default(resil_ratelimit_opts *o, resil_ratelimit_kind kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->rate = 100;
    o->period = RESIL_S(1);
    o->burst = 100;
    o->permits = 100;
    o->window = RESIL_S(1);
    o->clock = NULL;
}

static int check_count(const char *field, int64_t v, int64_t max, resil_err *err)
{
    if (v < 1 || v > max)
        return resil_err_set(err, RESIL_EINVAL, "ratelimit.%s must be in [1, %lld], got %lld",
                             field, (long long)max, (long long)v);
    return 0;
}

static int check_span(const char *field, resil_duration v, resil_err *err)
{
    if (v < RESIL_MS(1))
        return resil__bad_duration(err, field, ">= 1ms", v);
    return 0;
}

static int validate_bucket(const resil_ratelimit_opts *o, resil_err *err)
{
    int rc = check_count("rate", o->rate, RESIL_RATELIMIT_MAX_COUNT, err);
    if (rc == 0)
        rc = check_span("ratelimit.period", o->period, err);
    if (rc == 0)
        rc = check_count("burst", o->burst, RESIL_RATELIMIT_MAX_COUNT, err);
    /* The level is burst × period units and must leave headroom for a
     * rounding-up division by rate. */
    if (rc == 0 && o->burst > (INT64_MAX / 2) / o->period) {
        char period[32];
        resil_duration_format(o->period, period, sizeof period);
        rc = resil_err_set(err, RESIL_EINVAL,
                           "ratelimit.burst must be at most %lld with ratelimit.period %s, "
                           "got %lld",
                           (long long)((INT64_MAX / 2) / o->period), period,
                           (long long)o->burst);
    }
    return rc;
}

static int validate_window(const resil_ratelimit_opts *o, resil_err *err)
{
    int64_t max = o->kind == RESIL_RATELIMIT_SLIDING_WINDOW ? RESIL_RATELIMIT_MAX_LOG
                                                            : RESIL_RATELIMIT_MAX_COUNT;
    int rc = check_count("permits", o->permits, max, err);
    if (rc == 0)
        rc = check_span("ratelimit.window", o->window, err);
    return rc;
}

static int validate(const resil_ratelimit_opts *o, resil_err *err)
{
    switch (o->kind) {
    case RESIL_RATELIMIT_TOKEN_BUCKET:
        return validate_bucket(o, err);
    case RESIL_RATELIMIT_FIXED_WINDOW:
    case RESIL_RATELIMIT_SLIDING_WINDOW:
        return validate_window(o, err);
    }
    return resil_err_set(err, RESIL_EINVAL, "ratelimit.kind is not a known kind, got %d",
                         (int)o->kind);
}

int resil_ratelimit_new(const resil_ratelimit_opts *o, resil_ratelimit **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "ratelimit: options and out must not be NULL");
    int rc = validate(o, err);
    if (rc != 0)
        return rc;
    resil_ratelimit *rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "ratelimit: out of memory");
    if (o->kind == RESIL_RATELIMIT_SLIDING_WINDOW) {
        rl->log_cap = (size_t)o->permits;
        rl->log = calloc(rl->log_cap, sizeof *rl->log);
        if (rl->log == NULL) {
            free(rl);
            return resil_err_set(err, RESIL_ENOMEM, "ratelimit: out of memory");
        }
    }
    if (pthread_mutex_init(&rl->mu, NULL) != 0) {
        free(rl->log);
        free(rl);
        return resil_err_set(err, RESIL_ESYS, "ratelimit: pthread_mutex_init failed");
    }
    rl->opts = *o;
    rl->clock = o->clock ? o->clock : resil_clock_system();
    rl->seen = resil_clock_now(rl->clock);
    rl->window_start = rl->seen;
    if (o->kind == RESIL_RATELIMIT_TOKEN_BUCKET)
        rl->capacity = rl->units = o->burst * o->period;
    *out = rl;
    return 0;
}

int resil_ratelimit_new_custom(const resil_ratelimit_ops *ops, void *self, resil_clock *clock,
                               resil_ratelimit **out, resil_err *err)
{
    if (ops == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "ratelimit: ops and out must not be NULL");
    if (!OPS_HAS(ops, try_acquire))
        return resil_err_set(err, RESIL_EINVAL, "ratelimit: ops needs size and try_acquire");
    resil_ratelimit *rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "ratelimit: out of memory");
    rl->opts.kind = OTHER; /* and permits 0: see the note atop the file */
    rl->opts.clock = clock;
    rl->clock = clock ? clock : resil_clock_system();
    rl->ops = ops;
    rl->self = self;
    *out = rl;
    return 0;
}

void *resil_ratelimit_self(const resil_ratelimit *rl, const resil_ratelimit_ops *ops)
{
    if (rl == NULL || !is_other(rl) || rl->ops != ops)
        return NULL;
    return rl->self;
}

const char *resil_ratelimit_impl_name(const resil_ratelimit *rl)
{
    if (rl == NULL)
        return "none";
    if (!is_other(rl))
        return "builtin";
    return rl->ops->kind ? rl->ops->kind : "custom";
}

void resil_ratelimit_free(resil_ratelimit *rl)
{
    if (rl == NULL)
        return;
    if (is_other(rl)) {
        if (OPS_HAS(rl->ops, destroy))
            rl->ops->destroy(rl->self);
        free(rl);
        return;
    }
    pthread_mutex_destroy(&rl->mu);
    free(rl->log);
    free(rl);
}

/* ---- token bucket ------------------------------------------------------- */

/* Earn rate units per elapsed ns, up to capacity, without overflow:
 * rate × dt is computed only when it is known to fit below the gap. */
static void bucket_refill(resil_ratelimit *rl, resil_duration dt)
{
    int64_t gap = rl->capacity - rl->units;
    if (dt <= 0 || gap == 0)
        return;
    if (dt > gap / rl->opts.rate) {
        rl->units = rl->capacity;
        return;
    }
    rl->units += rl->opts.rate * dt;
}

static bool bucket_take(resil_ratelimit *rl, int64_t n)
{
    int64_t cost = n * rl->opts.period;
    if (rl->units < cost)
        return false;
    rl->units -= cost;
    return true;
}

static resil_duration bucket_wait(const resil_ratelimit *rl, int64_t n)
{
    int64_t deficit = n * rl->opts.period - rl->units;
    return (deficit + rl->opts.rate - 1) / rl->opts.rate;
}

/* ---- fixed window ------------------------------------------------------- */

static void fixed_roll(resil_ratelimit *rl, resil_instant now)
{
    resil_duration into = resil_dur_sub(now, rl->window_start);
    if (into < rl->opts.window)
        return;
    rl->window_start += into - into % rl->opts.window;
    rl->used = 0;
}

static bool fixed_take(resil_ratelimit *rl, int64_t n)
{
    if (rl->used + n > rl->opts.permits)
        return false;
    rl->used += n;
    return true;
}

static resil_duration fixed_wait(const resil_ratelimit *rl, resil_instant now)
{
    return resil_dur_sub(resil_dur_add(rl->window_start, rl->opts.window), now);
}

/* ---- sliding window (a log of admissions in a ring) --------------------- */

static log_entry *log_at(resil_ratelimit *rl, size_t i)
{
    return &rl->log[(rl->log_head + i) % rl->log_cap];
}

/* An admission at `at` stops counting once now >= at + window. */
static void sliding_expire(resil_ratelimit *rl, resil_instant now)
{
    while (rl->log_len > 0) {
        log_entry *e = log_at(rl, 0);
        if (resil_dur_sub(now, e->at) < rl->opts.window)
            return;
        rl->live -= e->n;
        rl->log_head = (rl->log_head + 1) % rl->log_cap;
        rl->log_len--;
    }
}

/* Every entry holds at least one live permit, so live <= permits bounds
 * the entries by the ring's capacity. */
static bool sliding_take(resil_ratelimit *rl, int64_t n, resil_instant now)
{
    if (rl->live + n > rl->opts.permits)
        return false;
    rl->live += n;
    if (rl->log_len > 0 && log_at(rl, rl->log_len - 1)->at == now) {
        log_at(rl, rl->log_len - 1)->n += n;
        return true;
    }
    *log_at(rl, rl->log_len) = (log_entry){now, n};
    rl->log_len++;
    return true;
}

/* When enough of the oldest admissions have expired to make room for n. */
static resil_duration sliding_wait(resil_ratelimit *rl, int64_t n, resil_instant now)
{
    int64_t must_free = rl->live + n - rl->opts.permits;
    for (size_t i = 0; i < rl->log_len; i++) {
        log_entry *e = log_at(rl, i);
        must_free -= e->n;
        if (must_free <= 0)
            return resil_dur_sub(resil_dur_add(e->at, rl->opts.window), now);
    }
    return 0; /* unreachable while n <= permits */
}

/* ---- one step, any kind ------------------------------------------------- */

static int64_t capacity_of(const resil_ratelimit_opts *o)
{
    return o->kind == RESIL_RATELIMIT_TOKEN_BUCKET ? o->burst : o->permits;
}

/* Caller holds mu. Moves the state to `now` (clamped to never go back). */
static resil_instant advance(resil_ratelimit *rl, resil_instant now)
{
    if (now < rl->seen)
        now = rl->seen;
    switch (rl->opts.kind) {
    case RESIL_RATELIMIT_TOKEN_BUCKET:
        bucket_refill(rl, resil_dur_sub(now, rl->seen));
        break;
    case RESIL_RATELIMIT_FIXED_WINDOW:
        fixed_roll(rl, now);
        break;
    case RESIL_RATELIMIT_SLIDING_WINDOW:
        sliding_expire(rl, now);
        break;
    }
    rl->seen = now;
    return now;
}

/* Caller holds mu. 0, or RESIL_EREJECTED with the wait in *wait. */
static int take_locked(resil_ratelimit *rl, int64_t n, resil_instant now, resil_duration *wait)
{
    now = advance(rl, now);
    switch (rl->opts.kind) {
    case RESIL_RATELIMIT_TOKEN_BUCKET:
        if (bucket_take(rl, n))
            return 0;
        *wait = bucket_wait(rl, n);
        return RESIL_EREJECTED;
    case RESIL_RATELIMIT_FIXED_WINDOW:
        if (fixed_take(rl, n))
            return 0;
        *wait = fixed_wait(rl, now);
        return RESIL_EREJECTED;
    case RESIL_RATELIMIT_SLIDING_WINDOW:
        if (sliding_take(rl, n, now))
            return 0;
        *wait = sliding_wait(rl, n, now);
        return RESIL_EREJECTED;
    }
    return RESIL_EINVAL;
}

/* Another implementation's step; the handle only checks n and counts. */
static int take_other(resil_ratelimit *rl, int64_t n, resil_instant now, resil_duration *wait)
{
    if (n < 1)
        return RESIL_EINVAL;
    int rc = rl->ops->try_acquire(rl->self, n, now, wait);
    if (rc == 0)
        resil__count(&rl->admitted);
    return rc;
}

static int take(resil_ratelimit *rl, int64_t n, resil_instant now, resil_duration *wait)
{
    if (n < 1 || n > capacity_of(&rl->opts)) /* always true for OTHER */
        return is_other(rl) ? take_other(rl, n, now, wait) : RESIL_EINVAL;
    pthread_mutex_lock(&rl->mu);
    int rc = take_locked(rl, n, now, wait);
    pthread_mutex_unlock(&rl->mu);
    if (rc == 0)
        resil__count(&rl->admitted);
    return rc;
}

int resil_ratelimit_try_acquire_at(resil_ratelimit *rl, int64_t n, resil_instant now,
                                   resil_duration *retry_after)
{
    resil_duration wait = 0;
    int rc = take(rl, n, now, &wait);
    if (rc == RESIL_EREJECTED)
        resil__count(&rl->rejected);
    if (retry_after != NULL)
        *retry_after = rc == RESIL_EREJECTED ? wait : 0;
    return rc;
}

int resil_ratelimit_try_acquire(resil_ratelimit *rl, int64_t n, resil_duration *retry_after)
{
    return resil_ratelimit_try_acquire_at(rl, n, resil_clock_now(rl->clock), retry_after);
}

static int give_up(resil_ratelimit *rl, int rc)
{
    resil__count(rc == RESIL_ECANCELED ? &rl->cancelled : &rl->timed_out);
    return rc;
}

/* One round of the blocking acquire, also the asynchronous execution's
 * whole step: take the permits at `now`, or say how long to wait before
 * the next round (RESIL__RATE_WAIT), or give up. */
int resil__ratelimit_round(resil_ratelimit *rl, int64_t n, resil_cancel *cancel,
                           resil_instant now, resil_instant deadline, resil_duration *wait)
{
    if (resil_cancelled(cancel))
        return give_up(rl, RESIL_ECANCELED);
    *wait = 0;
    int rc = take(rl, n, now, wait);
    if (rc != RESIL_EREJECTED)
        return rc;
    if (resil_dur_add(now, *wait) > deadline)
        return give_up(rl, RESIL_ETIMEDOUT);
    return RESIL__RATE_WAIT;
}

resil_instant resil__ratelimit_now(resil_ratelimit *rl) { return resil_clock_now(rl->clock); }

int resil_ratelimit_acquire(resil_ratelimit *rl, int64_t n, resil_cancel *cancel,
                            resil_duration timeout)
{
    if (timeout < 0)
        return RESIL_EINVAL;
    resil_instant now = resil_clock_now(rl->clock);
    resil_instant deadline = timeout == 0 ? RESIL_INSTANT_MAX : resil_dur_add(now, timeout);
    for (;;) {
        resil_duration wait;
        int rc = resil__ratelimit_round(rl, n, cancel, now, deadline, &wait);
        if (rc != RESIL__RATE_WAIT)
            return rc;
        if (resil_clock_sleep(rl->clock, wait, cancel) != 0)
            return give_up(rl, RESIL_ECANCELED);
        now = resil_clock_now(rl->clock);
    }
}

int64_t resil_ratelimit_available(resil_ratelimit *rl)
{
    resil_instant now = resil_clock_now(rl->clock);
    if (is_other(rl))
        return OPS_HAS(rl->ops, available) ? rl->ops->available(rl->self, now) : -1;
    pthread_mutex_lock(&rl->mu);
    advance(rl, now);
    int64_t left = 0;
    switch (rl->opts.kind) {
    case RESIL_RATELIMIT_TOKEN_BUCKET:
        left = rl->units / rl->opts.period;
        break;
    case RESIL_RATELIMIT_FIXED_WINDOW:
        left = rl->opts.permits - rl->used;
        break;
    case RESIL_RATELIMIT_SLIDING_WINDOW:
        left = rl->opts.permits - rl->live;
        break;
    }
    pthread_mutex_unlock(&rl->mu);
    return left;
}

void resil_ratelimit_stats_get(resil_ratelimit *rl, resil_ratelimit_stats *out)
{
    out->admitted = resil__counted(&rl->admitted);
    out->rejected = resil__counted(&rl->rejected);
    out->timed_out = resil__counted(&rl->timed_out);
    out->cancelled = resil__counted(&rl->cancelled);
}

void resil_ratelimit_opts_get(const resil_ratelimit *rl, resil_ratelimit_opts *out)
{
    if (!is_other(rl)) {
        *out = rl->opts;
        return;
    }
    memset(out, 0, sizeof *out);
    if (OPS_HAS(rl->ops, opts))
        rl->ops->opts(rl->self, out);
    out->clock = rl->opts.clock;
}

static const char *const kind_names[] = {"token-bucket", "fixed-window", "sliding-window"};

const char *resil_ratelimit_kind_name(resil_ratelimit_kind k)
{
    return resil__name_at(kind_names, RESIL__COUNT(kind_names), (unsigned)k);
}

int resil_ratelimit_kind_parse(const char *s, resil_ratelimit_kind *out)
{
    int i = resil__name_index(kind_names, RESIL__COUNT(kind_names), s);
    if (i < 0)
        return RESIL_EINVAL;
    *out = (resil_ratelimit_kind)i;
    return 0;
}
