/*
 * degrade.c — the graceful-degradation monitor.
 *
 * The admit check runs on every call and the evaluation once in a while,
 * so they are shaped differently. Admission is one atomic load of the level
 * and one comparison against a table of thresholds (plus, when evaluation
 * is lazy, one clock read to see whether a check is due). Evaluation is
 * the slow path: it may read /proc, so it runs on whichever caller finds
 * the check due and wins a try-lock — nobody waits for it — and it holds
 * the state mutex only for the arithmetic, never while sampling.
 *
 * Listeners are told outside every lock. Whoever changes the level becomes
 * the deliverer unless a delivery is already running; the deliverer loops
 * "tell delivered → current" until they agree. Deliveries are therefore
 * ordered and never concurrent, a listener may call back into the monitor,
 * and a burst of changes during one delivery is coalesced into one event.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resil/degrade.h"

#define NLEVELS_MAX (RESIL_DEGRADE_MAX_LEVELS + 1) /* with Normal */

typedef struct bucket {
    int64_t index; /* which bucket-length slice of time it counts; -1 unused */
    uint64_t calls, failures;
} bucket;

struct resil_degrade {
    resil_degrade_opts opts;
    resil_clock *clock;
    int nlevels; /* including Normal */
    char names[NLEVELS_MAX][RESIL_DEGRADE_NAME_MAX];
    int32_t threshold[NLEVELS_MAX];
    bool lazy;
    _Atomic int level;
    _Atomic bool auto_adjust;
    _Atomic int64_t next_check;
    _Atomic uint64_t rejected, evaluations;

    pthread_mutex_t eval_mu; /* one evaluation (and sampler call) at a time */
    resil_proc_sampler proc; /* the default sampler's state; under eval_mu */

    pthread_mutex_t mu; /* everything below */
    resil_instant origin;
    resil_duration bucket_len;
    bucket *buckets;
    double error_rate, cpu, memory;
    uint64_t window_calls, window_failures;
    bool moved; /* has the level ever changed? */
    resil_instant since;
    resil_degrade_cause cause; /* of the latest change */
    double cause_error, cause_cpu, cause_memory;
    int delivered;
    bool delivering;
};

static const resil_degrade_level_opts default_levels[] = {
#define LEVEL(n, p, e, c, m) \
    {.name = (n), .priority_threshold = (p), .error_rate = (e), .cpu = (c), .memory = (m)}
    LEVEL("Minor", 10, 1, 60, 60),     LEVEL("Moderate", 30, 5, 70, 70),
    LEVEL("Major", 50, 10, 80, 80),    LEVEL("Severe", 70, 25, 90, 90),
    LEVEL("Emergency", 100, 50, 95, 95),
#undef LEVEL
};

void resil_degrade_opts_default(resil_degrade_opts *o)
{
    memset(o, 0, sizeof *o);
    o->auto_adjust = true;
    o->evaluate_on_call = true;
    o->check_interval = RESIL_S(30);
    o->min_level_duration = RESIL_S(60);
    o->error_window = RESIL_S(60);
    o->error_buckets = 6;
    o->min_throughput = 10;
    o->level_count = (int32_t)(sizeof default_levels / sizeof default_levels[0]);
    memcpy(o->levels, default_levels, sizeof default_levels);
}

/* ---- validation --------------------------------------------------------- */

static int check_percent(int i, const char *field, double v, double prev, resil_err *err)
{
    if (!(v >= 0.0 && v <= 100.0))
        return resil_err_set(err, RESIL_EINVAL,
                             "degrade.levels[%d].%s must be a percentage in [0, 100], got %g",
                             i, field, v);
    if (v < prev)
        return resil_err_set(err, RESIL_EINVAL,
                             "degrade.levels[%d].%s must not be below levels[%d].%s (%g), got %g",
                             i, field, i - 1, field, prev, v);
    return 0;
}

static int validate_level(const resil_degrade_opts *o, int i, resil_err *err)
{
    const resil_degrade_level_opts *l = &o->levels[i];
    size_t len = l->name ? strlen(l->name) : 0;
    if (len == 0 || len >= RESIL_DEGRADE_NAME_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "degrade.levels[%d].name must be 1 to %d characters", i,
                             RESIL_DEGRADE_NAME_MAX - 1);
    const resil_degrade_level_opts *p = i > 0 ? &o->levels[i - 1] : NULL;
    if (p != NULL && l->priority_threshold <= p->priority_threshold)
        return resil_err_set(err, RESIL_EINVAL,
                             "degrade.levels[%d].priority_threshold must be greater than "
                             "levels[%d].priority_threshold (%d), got %d",
                             i, i - 1, (int)p->priority_threshold, (int)l->priority_threshold);
    int rc = check_percent(i, "error_rate", l->error_rate, p ? p->error_rate : 0, err);
    if (rc == 0)
        rc = check_percent(i, "cpu", l->cpu, p ? p->cpu : 0, err);
    if (rc == 0)
        rc = check_percent(i, "memory", l->memory, p ? p->memory : 0, err);
    return rc;
}

static int validate(const resil_degrade_opts *o, resil_err *err)
{
    if (o->check_interval <= 0)
        return resil__bad_duration(err, "degrade.check_interval", "> 0", o->check_interval);
    if (o->min_level_duration < 0)
        return resil__bad_duration(err, "degrade.min_level_duration", ">= 0",
                                   o->min_level_duration);
    if (o->error_window <= 0)
        return resil__bad_duration(err, "degrade.error_window", "> 0", o->error_window);
    if (o->error_buckets < 1 || o->error_buckets > 1000)
        return resil_err_set(err, RESIL_EINVAL, "degrade.error_buckets must be in [1, 1000], got %d",
                             (int)o->error_buckets);
    if (o->error_window / o->error_buckets < RESIL_MS(1))
        return resil__bad_duration(err, "degrade.error_window / degrade.error_buckets",
                                   ">= 1ms", o->error_window / o->error_buckets);
    if (o->min_throughput < 1)
        return resil_err_set(err, RESIL_EINVAL, "degrade.min_throughput must be >= 1, got %d",
                             (int)o->min_throughput);
    if (o->level_count < 1 || o->level_count > RESIL_DEGRADE_MAX_LEVELS)
        return resil_err_set(err, RESIL_EINVAL, "degrade.level_count must be in [1, %d], got %d",
                             RESIL_DEGRADE_MAX_LEVELS, (int)o->level_count);
    for (int i = 0; i < o->level_count; i++) {
        int rc = validate_level(o, i, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- construction ------------------------------------------------------- */

static void copy_levels(resil_degrade *d)
{
    d->nlevels = d->opts.level_count + 1;
    snprintf(d->names[0], sizeof d->names[0], "Normal");
    d->threshold[0] = INT32_MIN;
    for (int i = 1; i < d->nlevels; i++) {
        resil_degrade_level_opts *l = &d->opts.levels[i - 1];
        snprintf(d->names[i], sizeof d->names[i], "%s", l->name);
        d->threshold[i] = l->priority_threshold;
        l->name = d->names[i];
    }
    for (int i = d->nlevels - 1; i < RESIL_DEGRADE_MAX_LEVELS; i++)
        d->opts.levels[i].name = NULL;
}

static int init_locks(resil_degrade *d)
{
    if (pthread_mutex_init(&d->mu, NULL) != 0)
        return RESIL_ESYS;
    if (pthread_mutex_init(&d->eval_mu, NULL) != 0) {
        pthread_mutex_destroy(&d->mu);
        return RESIL_ESYS;
    }
    return 0;
}

int resil_degrade_new(const resil_degrade_opts *o, resil_degrade **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "degrade: options and out must not be NULL");
    int rc = validate(o, err);
    if (rc != 0)
        return rc;
    resil_degrade *d = calloc(1, sizeof *d);
    bucket *buckets = calloc((size_t)o->error_buckets, sizeof *buckets);
    if (d == NULL || buckets == NULL) {
        free(d);
        free(buckets);
        return resil_err_set(err, RESIL_ENOMEM, "degrade: out of memory");
    }
    if (init_locks(d) != 0) {
        free(d);
        free(buckets);
        return resil_err_set(err, RESIL_ESYS, "degrade: pthread_mutex_init failed");
    }
    d->opts = *o;
    copy_levels(d);
    d->clock = o->clock ? o->clock : resil_clock_system();
    d->lazy = o->evaluate_on_call;
    atomic_init(&d->auto_adjust, o->auto_adjust);
    d->buckets = buckets;
    for (int i = 0; i < o->error_buckets; i++)
        buckets[i].index = -1;
    d->bucket_len = o->error_window / o->error_buckets;
    d->origin = d->since = resil_clock_now(d->clock);
    atomic_init(&d->next_check, resil_dur_add(d->origin, o->check_interval));
    d->error_rate = d->cpu = d->memory = NAN;
    if (o->sampler == NULL) {
        resil_proc_sampler_init(&d->proc, NULL);
        resil_health_sample first;
        resil_proc_sample(&d->proc, &first); /* primes the CPU baseline */
    }
    *out = d;
    return 0;
}

void resil_degrade_free(resil_degrade *d)
{
    if (d == NULL)
        return;
    pthread_mutex_destroy(&d->eval_mu);
    pthread_mutex_destroy(&d->mu);
    free(d->buckets);
    free(d);
}

/* ---- the error-rate window (caller holds mu) ---------------------------- */

static int64_t bucket_index(const resil_degrade *d, resil_instant now)
{
    resil_duration since = resil_dur_sub(now, d->origin);
    return since > 0 ? since / d->bucket_len : 0;
}

/* The bucket a call that ended at `now` counts in. A caller that read the
 * clock just before another thread moved into a newer bucket of the same
 * slot counts in that newer bucket, as the breaker's window does; clearing
 * it for the late instant would lose the newer bucket's calls. */
static bucket *current_bucket(resil_degrade *d, resil_instant now)
{
    int64_t idx = bucket_index(d, now);
    bucket *b = &d->buckets[idx % d->opts.error_buckets];
    if (b->index < idx)
        *b = (bucket){idx, 0, 0};
    return b;
}

static void window_totals(resil_degrade *d, resil_instant now)
{
    int64_t idx = bucket_index(d, now);
    d->window_calls = d->window_failures = 0;
    for (int i = 0; i < d->opts.error_buckets; i++) {
        const bucket *b = &d->buckets[i];
        if (b->index < 0 || b->index > idx || b->index <= idx - d->opts.error_buckets)
            continue;
        d->window_calls += b->calls;
        d->window_failures += b->failures;
    }
}

/* ---- evaluation --------------------------------------------------------- */

static bool reaches(double reading, double threshold) { return reading >= threshold; }

/* The highest level any known signal reaches, and which signal did. */
static int target_level(const resil_degrade *d, bool rate_known, resil_degrade_cause *cause)
{
    double calls = (double)d->window_calls, failures100 = (double)d->window_failures * 100.0;
    for (int i = d->nlevels - 1; i >= 1; i--) {
        const resil_degrade_level_opts *l = &d->opts.levels[i - 1];
        if (rate_known && failures100 >= l->error_rate * calls)
            *cause = RESIL_DEGRADE_CAUSE_ERROR_RATE;
        else if (reaches(d->cpu, l->cpu))
            *cause = RESIL_DEGRADE_CAUSE_CPU;
        else if (reaches(d->memory, l->memory))
            *cause = RESIL_DEGRADE_CAUSE_MEMORY;
        else
            continue;
        return i;
    }
    *cause = RESIL_DEGRADE_CAUSE_RECOVERY;
    return 0;
}

/* Caller holds mu. */
static void move_to(resil_degrade *d, int level, resil_degrade_cause cause, resil_instant now)
{
    d->moved = true;
    d->since = now;
    d->cause = cause;
    d->cause_error = d->error_rate;
    d->cause_cpu = d->cpu;
    d->cause_memory = d->memory;
    atomic_store_explicit(&d->level, level, memory_order_release);
}

/* Caller holds mu. */
static bool may_move(const resil_degrade *d, resil_instant now)
{
    return !d->moved || resil_dur_sub(now, d->since) >= d->opts.min_level_duration;
}

static void deliver(resil_degrade *d);

static void take_sample(resil_degrade *d, resil_health_sample *s)
{
    memset(s, 0, sizeof *s); /* members a sampler does not know read zero */
    s->cpu = s->memory = NAN;
    int rc = d->opts.sampler ? d->opts.sampler(d->opts.sampler_ud, s)
                             : resil_proc_sample(&d->proc, s);
    if (rc != 0)
        s->cpu = s->memory = NAN;
}

/* Caller holds eval_mu. */
static void evaluate(resil_degrade *d)
{
    resil_health_sample s;
    take_sample(d, &s);
    resil_instant now = resil_clock_now(d->clock);
    atomic_store_explicit(&d->next_check, resil_dur_add(now, d->opts.check_interval),
                          memory_order_relaxed);
    resil__count(&d->evaluations);

    pthread_mutex_lock(&d->mu);
    window_totals(d, now);
    bool rate_known = d->window_calls >= (uint64_t)d->opts.min_throughput;
    d->error_rate = rate_known ? (double)d->window_failures * 100.0 / (double)d->window_calls
                               : NAN;
    d->cpu = s.cpu;
    d->memory = s.memory;
    resil_degrade_cause cause;
    int target = target_level(d, rate_known, &cause);
    int current = atomic_load_explicit(&d->level, memory_order_relaxed);
    if (atomic_load_explicit(&d->auto_adjust, memory_order_relaxed) && target != current &&
        may_move(d, now))
        move_to(d, target, target > current ? cause : RESIL_DEGRADE_CAUSE_RECOVERY, now);
    pthread_mutex_unlock(&d->mu);
}

static void maybe_evaluate(resil_degrade *d, resil_instant now)
{
    if (now < atomic_load_explicit(&d->next_check, memory_order_relaxed))
        return;
    if (pthread_mutex_trylock(&d->eval_mu) != 0)
        return; /* someone else is evaluating; use the current level */
    bool still_due = now >= atomic_load_explicit(&d->next_check, memory_order_relaxed);
    if (still_due)
        evaluate(d);
    pthread_mutex_unlock(&d->eval_mu);
    if (still_due)
        deliver(d);
}

int resil_degrade_tick(resil_degrade *d)
{
    pthread_mutex_lock(&d->eval_mu);
    evaluate(d);
    pthread_mutex_unlock(&d->eval_mu);
    deliver(d);
    return resil_degrade_level(d);
}

/* ---- the hot calls ------------------------------------------------------ */

/* Whether calls should look for a due check (and so read the clock). */
static bool evaluates_on_call(resil_degrade *d)
{
    return d->lazy && atomic_load_explicit(&d->auto_adjust, memory_order_relaxed);
}

int resil_degrade_admit_at(resil_degrade *d, int32_t priority, resil_instant now)
{
    if (evaluates_on_call(d))
        maybe_evaluate(d, now);
    int level = atomic_load_explicit(&d->level, memory_order_acquire);
    if (priority >= d->threshold[level])
        return 0;
    resil__count(&d->rejected);
    return RESIL_EREJECTED;
}

int resil_degrade_admit(resil_degrade *d, int32_t priority)
{
    resil_instant now = evaluates_on_call(d) ? resil_clock_now(d->clock) : 0;
    return resil_degrade_admit_at(d, priority, now);
}

void resil_degrade_record(resil_degrade *d, bool success)
{
    resil_instant now = resil_clock_now(d->clock);
    pthread_mutex_lock(&d->mu);
    bucket *b = current_bucket(d, now);
    b->calls++;
    if (!success)
        b->failures++;
    pthread_mutex_unlock(&d->mu);
    if (evaluates_on_call(d))
        maybe_evaluate(d, now);
}

/* ---- manual control ----------------------------------------------------- */

int resil_degrade_set_level(resil_degrade *d, int level)
{
    if (level < 0 || level >= d->nlevels)
        return RESIL_EINVAL;
    resil_instant now = resil_clock_now(d->clock);
    pthread_mutex_lock(&d->mu);
    if (atomic_load_explicit(&d->level, memory_order_relaxed) != level)
        move_to(d, level, RESIL_DEGRADE_CAUSE_MANUAL, now);
    pthread_mutex_unlock(&d->mu);
    deliver(d);
    return 0;
}

void resil_degrade_set_auto_adjust(resil_degrade *d, bool on)
{
    atomic_store_explicit(&d->auto_adjust, on, memory_order_relaxed);
}

/* ---- events ------------------------------------------------------------- */

/* Caller holds mu. */
static void describe_change(resil_degrade *d, int from, int to, resil_degrade_event *ev)
{
    *ev = (resil_degrade_event){
        .from = from,
        .to = to,
        .from_name = d->names[from],
        .to_name = d->names[to],
        .cause = d->cause,
        .error_rate = d->cause_error,
        .cpu = d->cause_cpu,
        .memory = d->cause_memory,
        .at = d->since,
    };
}

static void deliver(resil_degrade *d)
{
    if (d->opts.on_change == NULL)
        return;
    pthread_mutex_lock(&d->mu);
    if (d->delivering) {
        pthread_mutex_unlock(&d->mu);
        return; /* the running deliverer will see the change */
    }
    d->delivering = true;
    for (;;) {
        int current = atomic_load_explicit(&d->level, memory_order_relaxed);
        if (current == d->delivered)
            break;
        resil_degrade_event ev;
        describe_change(d, d->delivered, current, &ev);
        d->delivered = current;
        pthread_mutex_unlock(&d->mu);
        d->opts.on_change(d->opts.on_change_ud, &ev);
        pthread_mutex_lock(&d->mu);
    }
    d->delivering = false;
    pthread_mutex_unlock(&d->mu);
}

/* ---- observation -------------------------------------------------------- */

int resil_degrade_level(const resil_degrade *d)
{
    return atomic_load_explicit(&((resil_degrade *)d)->level, memory_order_acquire);
}

int resil_degrade_level_count(const resil_degrade *d) { return d->nlevels; }

const char *resil_degrade_level_name(const resil_degrade *d, int level)
{
    return level >= 0 && level < d->nlevels ? d->names[level] : NULL;
}

int32_t resil_degrade_level_threshold(const resil_degrade *d, int level)
{
    return level >= 0 && level < d->nlevels ? d->threshold[level] : INT32_MAX;
}

void resil_degrade_stats_get(resil_degrade *d, resil_degrade_stats *out)
{
    pthread_mutex_lock(&d->mu);
    int level = atomic_load_explicit(&d->level, memory_order_relaxed);
    *out = (resil_degrade_stats){
        .level = level,
        .level_name = d->names[level],
        .level_since = d->since,
        .error_rate = d->error_rate,
        .window_calls = d->window_calls,
        .window_failures = d->window_failures,
        .cpu = d->cpu,
        .memory = d->memory,
    };
    pthread_mutex_unlock(&d->mu);
    out->evaluations = resil__counted(&d->evaluations);
    out->rejected = resil__counted(&d->rejected);
}

static const char *const cause_names[] = {"error-rate", "cpu", "memory", "recovery", "manual"};

const char *resil_degrade_cause_name(resil_degrade_cause c)
{
    return resil__name_at(cause_names, RESIL__COUNT(cause_names), (unsigned)c);
}
