/*
 * virtual_loop.c — the test loop: resil_timers and resil_posts over a fake
 * clock. Time moves only when nothing is runnable now, and then straight to
 * the earliest timer, as a real loop would find it after sleeping.
 *
 * With descriptors, "nothing runnable" is a fact the loop establishes, not
 * a quiet spell it waits out: its own bytes are all delivered, its peer
 * (when it has one) has settled, and only then are its descriptors polled
 * once more and found quiet. In that order, because each step can only be
 * undone by something the step before it would have seen: a peer settles
 * on input that has reached it, and what it sent before settling is in the
 * loop's sockets by the last poll.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "tcp_in_flight.h"
#include "virtual_loop.h"

static resil_instant v_now(void *self)
{
    virtual_loop *v = self;
    atomic_fetch_add_explicit(&v->reads, 1, memory_order_relaxed);
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

static void v_timer_reserve(void *self, resil_timer *t)
{
    virtual_loop *v = self;
    resil_timers_reserve(&v->timers, t);
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

static int grow_ios(virtual_loop *v)
{
    size_t cap = v->ios_cap > 0 ? v->ios_cap * 2 : 64;
    resil_io **ios = realloc(v->ios, cap * sizeof *ios);
    if (ios == NULL)
        return RESIL_ENOMEM;
    v->ios = ios;
    struct pollfd *pfd = realloc(v->pfd, cap * sizeof *pfd);
    if (pfd == NULL)
        return RESIL_ENOMEM;
    v->pfd = pfd;
    size_t *pslot = realloc(v->pslot, cap * sizeof *pslot);
    if (pslot == NULL)
        return RESIL_ENOMEM;
    v->pslot = pslot;
    for (size_t i = v->ios_cap; i < cap; i++)
        v->ios[i] = NULL;
    v->ios_cap = cap;
    return 0;
}

static int v_io_start(void *self, resil_io *w, int fd, unsigned events)
{
    virtual_loop *v = self;
    if (w->loop_data == NULL) {
        size_t slot = 0;
        while (slot < v->ios_cap && v->ios[slot] != NULL)
            slot++;
        if (slot == v->ios_cap && grow_ios(v) != 0)
            return RESIL_ENOMEM;
        v->ios[slot] = w;
        v->nios++;
        w->loop_data = (void *)(uintptr_t)(slot + 1);
    }
    w->fd = fd;
    w->events = events;
    return 0;
}

static void v_io_stop(void *self, resil_io *w)
{
    virtual_loop *v = self;
    if (w->loop_data == NULL)
        return;
    v->ios[(uintptr_t)w->loop_data - 1] = NULL;
    v->nios--;
    w->loop_data = NULL;
}

static const resil_loop_ops virtual_ops = {.size = sizeof(resil_loop_ops),
                                           .now = v_now,
                                           .timer_start = v_timer_start,
                                           .timer_stop = v_timer_stop,
                                           .post = v_post,
                                           .in_loop = v_in_loop,
                                           .io_start = v_io_start,
                                           .io_stop = v_io_stop,
                                           .timer_reserve = v_timer_reserve};

void virtual_loop_init(virtual_loop *v, resil_fake_clock *fc)
{
    v->fc = fc;
    v->thread = pthread_self();
    resil_timers_init(&v->timers);
    resil_posts_init(&v->posts);
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->posted, NULL);
    v->pending = 0;
    atomic_init(&v->reads, 0);
    v->ios = NULL;
    v->pfd = NULL;
    v->pslot = NULL;
    v->nios = v->ios_cap = 0;
    v->peer_settled = NULL;
    v->peer = NULL;
    resil_loop_init(&v->loop, &virtual_ops, v);
}

void virtual_loop_peer(virtual_loop *v, bool (*settled)(void *peer), void *peer)
{
    v->peer_settled = settled;
    v->peer = peer;
}

void virtual_loop_destroy(virtual_loop *v)
{
    resil_loop_drain(&v->loop);
    free(v->ios);
    free(v->pfd);
    free(v->pslot);
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

static unsigned io_events(short revents)
{
    unsigned ev = 0;
    if (revents & (POLLIN | POLLHUP))
        ev |= RESIL_IO_READ;
    if (revents & POLLOUT)
        ev |= RESIL_IO_WRITE;
    if (revents & (POLLERR | POLLNVAL))
        ev |= RESIL_IO_ERROR;
    return ev;
}

/* Poll every watched descriptor for up to `ms` of real time and call the
 * ready ones' callbacks; how many were ready. A callback may stop (and
 * free) other watches: each is looked up in its slot again before its
 * call, and a slot taken over by a new watch of the same descriptor gets
 * a readiness it can only find spurious. */
static int run_io(virtual_loop *v, int ms)
{
    nfds_t n = 0;
    for (size_t i = 0; i < v->ios_cap; i++) {
        if (v->ios[i] == NULL)
            continue;
        short ev = (short)(((v->ios[i]->events & RESIL_IO_READ) ? POLLIN : 0) |
                           ((v->ios[i]->events & RESIL_IO_WRITE) ? POLLOUT : 0));
        v->pfd[n] = (struct pollfd){.fd = v->ios[i]->fd, .events = ev, .revents = 0};
        v->pslot[n++] = i;
    }
    int ready = poll(v->pfd, n, ms);
    if (ready <= 0)
        return 0;
    for (nfds_t k = 0; k < n; k++) {
        resil_io *w = v->ios[v->pslot[k]];
        if (v->pfd[k].revents != 0 && w != NULL && w->fd == v->pfd[k].fd)
            w->fn(w, w->fd, io_events(v->pfd[k].revents));
    }
    return ready;
}

static bool own_bytes_delivered(const virtual_loop *v)
{
    for (size_t i = 0; i < v->ios_cap; i++) {
        if (v->ios[i] != NULL && tcp_in_flight(v->ios[i]->fd))
            return false;
    }
    return true;
}

/* Nothing on the descriptors can happen without the loop acting first
 * (see the top of this file). Without a peer the other ends are the
 * kernel's alone, and quiet descriptors are enough. */
static bool io_settled(virtual_loop *v)
{
    if (v->peer_settled == NULL)
        return true;
    return own_bytes_delivered(v) && v->peer_settled(v->peer);
}

void virtual_loop_run(virtual_loop *v, const bool *until)
{
    for (;;) {
        if (run_posts(v))
            continue;
        resil_instant now = resil_fake_clock_now(v->fc);
        if (resil_timers_run(&v->timers, now) > 0)
            continue;
        if (v->nios > 0 && run_io(v, 0) > 0)
            continue;
        if (until != NULL && done(until))
            return;
        if (v->nios > 0 && !io_settled(v)) {
            run_io(v, VIRTUAL_LOOP_RECHECK_MS);
            continue;
        }
        if (v->nios > 0 && run_io(v, 0) > 0)
            continue;
        resil_instant next = resil_timers_next(&v->timers);
        if (next != RESIL_INSTANT_MAX) {
            resil_fake_clock_advance(v->fc, next - now);
            continue;
        }
        if (until == NULL)
            return;
        if (v->nios > 0) {
            run_io(v, VIRTUAL_LOOP_RECHECK_MS);
            continue;
        }
        pthread_mutex_lock(&v->mu);
        while (v->pending == 0)
            pthread_cond_wait(&v->posted, &v->mu);
        pthread_mutex_unlock(&v->mu);
    }
}
