/*
 * cancel.c — the cancellation token.
 *
 * The token is checked on every hot path and fired rarely, so the fired flag
 * is a lone atomic int read without a lock, while firing, linking and waiting
 * take the token's mutex. Waiters sleep on a condition variable bound to
 * CLOCK_MONOTONIC, so a deadline is immune to wall-clock jumps and a fire
 * wakes them at once instead of at their next poll.
 *
 * Children form an intrusive list owned by the parent's mutex; locks are only
 * ever taken ancestor first, descendant second (firing walks down, linking
 * and unlinking lock just the parent), so the tree cannot deadlock.
 */
#include <errno.h>
#include <time.h>

#include "resil/cancel.h"

static bool load_fired(const resil_cancel *c)
{
    return __atomic_load_n(&c->fired, __ATOMIC_ACQUIRE) != 0;
}

static int init_cond_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return RESIL_ESYS;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : RESIL_ESYS;
}

/* Caller holds c->mu. */
static void mark_fired(resil_cancel *c, int reason)
{
    __atomic_store_n(&c->reason, reason, __ATOMIC_RELAXED);
    __atomic_store_n(&c->fired, 1, __ATOMIC_RELEASE);
}

static void link_child(resil_cancel *parent, resil_cancel *c)
{
    pthread_mutex_lock(&parent->mu);
    c->next_sibling = parent->first_child;
    if (parent->first_child != NULL)
        parent->first_child->prev_sibling = c;
    parent->first_child = c;
    if (load_fired(parent))
        mark_fired(c, __atomic_load_n(&parent->reason, __ATOMIC_RELAXED));
    pthread_mutex_unlock(&parent->mu);
}

int resil_cancel_init(resil_cancel *c, resil_cancel *parent)
{
    c->fired = 0;
    c->reason = 0;
    c->parent = parent;
    c->first_child = c->next_sibling = c->prev_sibling = NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return RESIL_ESYS;
    if (init_cond_monotonic(&c->cv) != 0) {
        pthread_mutex_destroy(&c->mu);
        return RESIL_ESYS;
    }
    if (parent != NULL)
        link_child(parent, c);
    return 0;
}

static void unlink_child(resil_cancel *c)
{
    resil_cancel *parent = c->parent;
    pthread_mutex_lock(&parent->mu);
    if (c->prev_sibling != NULL)
        c->prev_sibling->next_sibling = c->next_sibling;
    else
        parent->first_child = c->next_sibling;
    if (c->next_sibling != NULL)
        c->next_sibling->prev_sibling = c->prev_sibling;
    c->parent = c->next_sibling = c->prev_sibling = NULL;
    pthread_mutex_unlock(&parent->mu);
}

void resil_cancel_destroy(resil_cancel *c)
{
    if (c == NULL)
        return;
    if (c->parent != NULL)
        unlink_child(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

void resil_cancel_fire_reason(resil_cancel *c, int reason)
{
    if (reason >= 0)
        reason = RESIL_ECANCELED;
    pthread_mutex_lock(&c->mu);
    if (load_fired(c)) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    mark_fired(c, reason);
    pthread_cond_broadcast(&c->cv);
    for (resil_cancel *child = c->first_child; child != NULL; child = child->next_sibling)
        resil_cancel_fire_reason(child, reason);
    pthread_mutex_unlock(&c->mu);
}

void resil_cancel_fire(resil_cancel *c) { resil_cancel_fire_reason(c, RESIL_ECANCELED); }

bool resil_cancel_fired(const resil_cancel *c) { return load_fired(c); }

int resil_cancel_reason(const resil_cancel *c)
{
    if (!load_fired(c))
        return 0;
    return __atomic_load_n(&c->reason, __ATOMIC_RELAXED);
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

int resil_cancel_wait_until(resil_cancel *c, int64_t deadline_ns)
{
    struct timespec ts = to_timespec(deadline_ns < 0 ? 0 : deadline_ns);
    pthread_mutex_lock(&c->mu);
    while (!load_fired(c)) {
        int rc = deadline_ns == INT64_MAX ? pthread_cond_wait(&c->cv, &c->mu)
                                          : pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (rc == ETIMEDOUT)
            break;
    }
    bool fired = load_fired(c);
    pthread_mutex_unlock(&c->mu);
    return fired ? RESIL_ECANCELED : 0;
}
