/*
 * clock.c — the system clock, the coarse clock and the fake clock behind
 * the resil_clock vtable.
 *
 * The system clock's cancellable sleep is the token's own timed wait, so a
 * fire wakes the sleeper at once and there is a single waiting mechanism in
 * the library. The fake clock reuses it too: a manual-mode sleeper waits on a
 * private child of the caller's token, and advance() fires that child when
 * virtual time reaches the sleeper's wake-up. One wait, two ways to end it
 * (the caller's fire propagates down, the clock fires it directly), no
 * polling and no second condition variable to keep consistent.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "resil/cancel.h"
#include "resil/time.h"

/* ---- system clock ------------------------------------------------------ */

static resil_instant system_now(resil_clock *self)
{
    (void)self;
    return resil__clock_monotonic();
}

static int64_t system_wall_now(resil_clock *self)
{
    (void)self;
    return resil__clock_kernel(CLOCK_REALTIME);
}

static int sleep_until_uncancellable(int64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    return 0;
}

/* The wait runs on the kernel's CLOCK_MONOTONIC and the deadline is the
 * system clock's, which may read a few microseconds behind it (tsc.h): a
 * wait that ends before the system clock reaches the deadline waits again
 * for the rest, so a sleep never ends early on the clock it was asked of. */
static int system_sleep(resil_clock *self, resil_duration d, resil_cancel *cancel)
{
    if (d <= 0)
        return resil_cancelled(cancel) ? RESIL_ECANCELED : 0;
    resil_instant deadline = resil_dur_add(system_now(self), d);
    resil_instant until = deadline;
    for (;;) {
        int rc = cancel != NULL ? resil_cancel_wait_until(cancel, until)
                                : sleep_until_uncancellable(until);
        resil_instant now = system_now(self);
        if (rc != 0 || now >= deadline)
            return rc;
        until = resil_dur_add(resil__clock_kernel(CLOCK_MONOTONIC), deadline - now);
    }
}

static resil_clock system_clock = {system_now, system_wall_now, system_sleep};

resil_clock *resil_clock_system(void) { return &system_clock; }

/* ---- the coarse clock -------------------------------------------------- */

/* CLOCK_MONOTONIC_COARSE: the same monotonic time as the system clock, as
 * of the last scheduler tick, so it never reads ahead of it and lags it by
 * less than one tick (its resolution, 1–10 ms on Linux). It costs about a
 * fifth of a precise read, which matters to a breaker whose whole success
 * path is otherwise a few nanoseconds. */
#ifdef CLOCK_MONOTONIC_COARSE
static resil_instant coarse_now(resil_clock *self)
{
    (void)self;
    return resil__clock_kernel(CLOCK_MONOTONIC_COARSE);
}

static resil_clock coarse_clock = {coarse_now, system_wall_now, system_sleep};

static resil_duration coarse_resolution(void)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0)
        return RESIL_DURATION_MAX;
    return (resil_duration)res.tv_sec * 1000000000 + res.tv_nsec;
}
#endif

resil_clock *resil_clock_coarse(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    return &coarse_clock;
#else
    return &system_clock;
#endif
}

resil_instant resil__clock_monotonic_call(void) { return resil__clock_monotonic(); }

clockid_t resil__clock_id(const resil_clock *c)
{
#ifdef CLOCK_MONOTONIC_COARSE
    if (c == &coarse_clock)
        return CLOCK_MONOTONIC_COARSE;
#endif
    return c == &system_clock ? CLOCK_MONOTONIC : RESIL__CLOCK_OTHER;
}

resil_clock *resil__clock_for(resil_duration finest)
{
#ifdef CLOCK_MONOTONIC_COARSE
    static _Atomic resil_duration resolution; /* 0 = not asked yet */
    resil_duration r = atomic_load_explicit(&resolution, memory_order_relaxed);
    if (r == 0) {
        r = coarse_resolution();
        atomic_store_explicit(&resolution, r, memory_order_relaxed);
    }
    if (r <= finest / RESIL__COARSE_SHARE)
        return &coarse_clock;
#else
    (void)finest;
#endif
    return &system_clock;
}

/* ---- fake clock -------------------------------------------------------- */

#define SLEEP_LOG_MAX 4096

/* A thread blocked in a manual-mode sleep; lives on that thread's stack. */
typedef struct sleeper {
    resil_instant wake_at;
    resil_cancel wakeup; /* child of the caller's token; fired when due */
    bool due;
    struct sleeper *next;
} sleeper;

struct resil_fake_clock {
    resil_clock base; /* first: the vtable pointer is the object pointer */
    pthread_mutex_t mu;
    pthread_cond_t sleepers_changed;
    resil_instant now;
    int64_t wall;
    bool manual;
    resil_fake_sleep_hook hook;
    void *hook_ud;
    size_t sleep_count;
    resil_duration sleep_log[SLEEP_LOG_MAX];
    sleeper *sleepers;
    size_t nsleepers;
};

static resil_fake_clock *from_clock(resil_clock *c) { return (resil_fake_clock *)c; }

static resil_instant fake_now(resil_clock *self)
{
    return resil_fake_clock_now(from_clock(self));
}

static int64_t fake_wall_now(resil_clock *self)
{
    resil_fake_clock *fc = from_clock(self);
    pthread_mutex_lock(&fc->mu);
    int64_t wall = fc->wall;
    pthread_mutex_unlock(&fc->mu);
    return wall;
}

/* Caller holds fc->mu. */
static void move_time(resil_fake_clock *fc, resil_duration d)
{
    if (d <= 0)
        return;
    fc->now = resil_dur_add(fc->now, d);
    fc->wall = resil_dur_add(fc->wall, d);
}

/* Caller holds fc->mu. Fires every sleeper whose wake-up has come and
 * removes it from the list; the sleeper itself only reads `due`. A sleeper
 * whose token fired first is left alone: it was cancelled, and removes
 * itself. */
static void wake_due_sleepers(resil_fake_clock *fc)
{
    sleeper **link = &fc->sleepers;
    while (*link != NULL) {
        sleeper *s = *link;
        if (s->wake_at > fc->now || resil_cancel_fired(&s->wakeup)) {
            link = &s->next;
            continue;
        }
        *link = s->next;
        fc->nsleepers--;
        s->due = true;
        resil_cancel_fire(&s->wakeup);
    }
    pthread_cond_broadcast(&fc->sleepers_changed);
}

/* Caller holds fc->mu. */
static void remove_sleeper(resil_fake_clock *fc, sleeper *s)
{
    for (sleeper **link = &fc->sleepers; *link != NULL; link = &(*link)->next) {
        if (*link == s) {
            *link = s->next;
            fc->nsleepers--;
            pthread_cond_broadcast(&fc->sleepers_changed);
            return;
        }
    }
}

static int sleep_manual(resil_fake_clock *fc, resil_duration d, resil_cancel *cancel)
{
    sleeper s = {.due = false};
    if (resil_cancel_init(&s.wakeup, cancel) != 0)
        return RESIL_ESYS;
    pthread_mutex_lock(&fc->mu);
    s.wake_at = resil_dur_add(fc->now, d);
    s.next = fc->sleepers;
    fc->sleepers = &s;
    fc->nsleepers++;
    pthread_cond_broadcast(&fc->sleepers_changed);
    pthread_mutex_unlock(&fc->mu);

    resil_cancel_wait_until(&s.wakeup, INT64_MAX);

    pthread_mutex_lock(&fc->mu);
    if (!s.due)
        remove_sleeper(fc, &s);
    bool due = s.due;
    pthread_mutex_unlock(&fc->mu);
    resil_cancel_destroy(&s.wakeup);
    return due ? 0 : RESIL_ECANCELED;
}

static int fake_sleep(resil_clock *self, resil_duration d, resil_cancel *cancel)
{
    resil_fake_clock *fc = from_clock(self);
    pthread_mutex_lock(&fc->mu);
    if (fc->sleep_count < SLEEP_LOG_MAX)
        fc->sleep_log[fc->sleep_count] = d;
    fc->sleep_count++;
    resil_fake_sleep_hook hook = fc->hook;
    void *ud = fc->hook_ud;
    bool manual = fc->manual;
    pthread_mutex_unlock(&fc->mu);

    if (hook != NULL)
        hook(fc, d, ud);
    if (resil_cancelled(cancel))
        return RESIL_ECANCELED;
    if (d <= 0)
        return 0;
    if (manual)
        return sleep_manual(fc, d, cancel);
    pthread_mutex_lock(&fc->mu);
    move_time(fc, d);
    pthread_mutex_unlock(&fc->mu);
    return 0;
}

int resil_fake_clock_new(resil_instant start, int64_t wall_start, resil_fake_clock **out)
{
    resil_fake_clock *fc = calloc(1, sizeof *fc);
    if (fc == NULL)
        return RESIL_ENOMEM;
    if (pthread_mutex_init(&fc->mu, NULL) != 0) {
        free(fc);
        return RESIL_ESYS;
    }
    if (pthread_cond_init(&fc->sleepers_changed, NULL) != 0) {
        pthread_mutex_destroy(&fc->mu);
        free(fc);
        return RESIL_ESYS;
    }
    fc->base.now = fake_now;
    fc->base.wall_now = fake_wall_now;
    fc->base.sleep = fake_sleep;
    fc->now = start;
    fc->wall = wall_start;
    *out = fc;
    return 0;
}

void resil_fake_clock_free(resil_fake_clock *fc)
{
    if (fc == NULL)
        return;
    pthread_cond_destroy(&fc->sleepers_changed);
    pthread_mutex_destroy(&fc->mu);
    free(fc);
}

resil_clock *resil_fake_clock_clock(resil_fake_clock *fc) { return &fc->base; }

void resil_fake_clock_set_manual(resil_fake_clock *fc, bool manual)
{
    pthread_mutex_lock(&fc->mu);
    fc->manual = manual;
    pthread_mutex_unlock(&fc->mu);
}

void resil_fake_clock_set_hook(resil_fake_clock *fc, resil_fake_sleep_hook hook, void *ud)
{
    pthread_mutex_lock(&fc->mu);
    fc->hook = hook;
    fc->hook_ud = ud;
    pthread_mutex_unlock(&fc->mu);
}

void resil_fake_clock_advance(resil_fake_clock *fc, resil_duration d)
{
    pthread_mutex_lock(&fc->mu);
    move_time(fc, d);
    wake_due_sleepers(fc);
    pthread_mutex_unlock(&fc->mu);
}

resil_instant resil_fake_clock_now(resil_fake_clock *fc)
{
    pthread_mutex_lock(&fc->mu);
    resil_instant now = fc->now;
    pthread_mutex_unlock(&fc->mu);
    return now;
}

size_t resil_fake_clock_sleep_count(resil_fake_clock *fc)
{
    pthread_mutex_lock(&fc->mu);
    size_t n = fc->sleep_count;
    pthread_mutex_unlock(&fc->mu);
    return n;
}

resil_duration resil_fake_clock_sleep_at(resil_fake_clock *fc, size_t i)
{
    pthread_mutex_lock(&fc->mu);
    resil_duration d = i < fc->sleep_count && i < SLEEP_LOG_MAX ? fc->sleep_log[i] : 0;
    pthread_mutex_unlock(&fc->mu);
    return d;
}

size_t resil_fake_clock_sleepers(resil_fake_clock *fc)
{
    pthread_mutex_lock(&fc->mu);
    size_t n = fc->nsleepers;
    pthread_mutex_unlock(&fc->mu);
    return n;
}

resil_instant resil_fake_clock_next_wake(resil_fake_clock *fc)
{
    pthread_mutex_lock(&fc->mu);
    resil_instant next = RESIL_INSTANT_MAX;
    for (const sleeper *s = fc->sleepers; s != NULL; s = s->next)
        if (s->wake_at < next && !resil_cancel_fired(&s->wakeup))
            next = s->wake_at;
    pthread_mutex_unlock(&fc->mu);
    return next;
}

void resil_fake_clock_await_sleepers(resil_fake_clock *fc, size_t n)
{
    pthread_mutex_lock(&fc->mu);
    while (fc->nsleepers < n)
        pthread_cond_wait(&fc->sleepers_changed, &fc->mu);
    pthread_mutex_unlock(&fc->mu);
}

void resil_fake_clock_clear_log(resil_fake_clock *fc)
{
    pthread_mutex_lock(&fc->mu);
    fc->sleep_count = 0;
    pthread_mutex_unlock(&fc->mu);
}
