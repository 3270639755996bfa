/*
 * virtual_loop.c — the test loop: resil_timers and resil_posts over a fake
 * clock. Time moves only when nothing is runnable now, and then straight to
 * the earliest timer, as a real loop would find it after sleeping.
 */
#include <stdatomic.h>

#include "virtual_loop.h"

static resil_instant v_now(void *self)
{
    virtual_loop *v = self;
    return resil_fake_clock_now(v->fc);
}

static void v_timer_start(void *self, resil_timer *t, resil_duration d)
{
    virtual_loop *v = self;
    resil_timers_start(&v->timers, t, resil_dur_add(resil_fake_clock_now(v->fc), d));
}

static void v_timer_stop(void *self, resil_timer *t)
{
    virtual_loop *v = self;
    resil_timers_stop(&v->timers, t);
}

static void v_post(void *self, resil_work *w)
{
    virtual_loop *v = self;
    resil_posts_push(&v->posts, w);
    pthread_mutex_lock(&v->mu);
    v->pending++;
    pthread_cond_signal(&v->posted);
    pthread_mutex_unlock(&v->mu);
}

static bool v_in_loop(void *self)
{
    virtual_loop *v = self;
    return pthread_equal(v->thread, pthread_self());
}

static const resil_loop_ops virtual_ops = {sizeof(resil_loop_ops), v_now, v_timer_start,
                                           v_timer_stop, v_post, v_in_loop};

void virtual_loop_init(virtual_loop *v, resil_fake_clock *fc)
{
    v->fc = fc;
    v->thread = pthread_self();
    resil_timers_init(&v->timers);
    resil_posts_init(&v->posts);
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->posted, NULL);
    v->pending = 0;
    resil_loop_init(&v->loop, &virtual_ops, v);
}

void virtual_loop_destroy(virtual_loop *v)
{
    resil_loop_drain(&v->loop);
    resil_posts_destroy(&v->posts);
    pthread_cond_destroy(&v->posted);
    pthread_mutex_destroy(&v->mu);
}

static bool run_posts(virtual_loop *v)
{
    pthread_mutex_lock(&v->mu);
    size_t n = v->pending;
    pthread_mutex_unlock(&v->mu);
    if (n == 0)
        return false;
    size_t ran = resil_posts_run(&v->posts);
    pthread_mutex_lock(&v->mu);
    v->pending -= ran;
    pthread_mutex_unlock(&v->mu);
    return ran > 0;
}

static bool done(const bool *until)
{
    return atomic_load_explicit((_Atomic bool *)until, memory_order_acquire);
}

void virtual_loop_run(virtual_loop *v, const bool *until)
{
    for (;;) {
        if (run_posts(v))
            continue;
        resil_instant now = resil_fake_clock_now(v->fc);
        if (resil_timers_run(&v->timers, now) > 0)
            continue;
        if (until != NULL && done(until))
            return;
        resil_instant next = resil_timers_next(&v->timers);
        if (next != RESIL_INSTANT_MAX) {
            resil_fake_clock_advance(v->fc, next - now);
            continue;
        }
        if (until == NULL)
            return;
        pthread_mutex_lock(&v->mu);
        while (v->pending == 0)
            pthread_cond_wait(&v->posted, &v->mu);
        pthread_mutex_unlock(&v->mu);
    }
}
