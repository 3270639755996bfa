/*
 * http_loop.c — loop.h over poll(2): timers in resil_timers' heap, posts
 * in resil_posts with a pipe to wake poll, and a flat list of watches from
 * which each pass builds its pollfd array.
 *
 * A readiness callback may stop (and free) any watch, its own included, so
 * a pass dispatches from a copy of the list in which io_stop clears the
 * stopped watch: a callback never runs for a watch stopped earlier in the
 * same pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_loop.h"

static resil_instant loop_now(void *self)
{
    (void)self;
    return resil_clock_now(resil_clock_system());
}

static void loop_timer_start(void *self, resil_timer *t, resil_duration delay)
{
    http_loop *l = self;
    resil_timers_start(&l->timers, t, resil_dur_add(loop_now(l), delay));
}

static void loop_timer_stop(void *self, resil_timer *t)
{
    http_loop *l = self;
    resil_timers_stop(&l->timers, t);
}

static void loop_timer_reserve(void *self, resil_timer *t)
{
    http_loop *l = self;
    resil_timers_reserve(&l->timers, t);
}

static void loop_post(void *self, resil_work *w)
{
    http_loop *l = self;
    if (resil_posts_push(&l->posts, w)) {
        char b = 0;
        while (write(l->wake[1], &b, 1) < 0 && errno == EINTR) {
        }
    }
}

static bool loop_in_loop(void *self)
{
    http_loop *l = self;
    return pthread_equal(l->thread, pthread_self());
}

/* A capacity of at least `need`, doubling from `cap` (16 to start). */
static size_t grown(size_t cap, size_t need)
{
    size_t n = cap == 0 ? 16 : cap;
    while (n < need)
        n *= 2;
    return n;
}

static int grow_watches(http_loop *l, size_t need)
{
    if (need <= l->cap)
        return 0;
    size_t n = grown(l->cap, need);
    resil_io **p = realloc(l->watches, n * sizeof *p);
    if (p == NULL)
        return RESIL_ENOMEM;
    l->watches = p;
    l->cap = n;
    return 0;
}

/* Room for a pass over n watches: n entries in `pass`, and n + 1 (the
 * wake pipe first) in `fds`, kept from pass to pass. */
static int grow_pass(http_loop *l, size_t n)
{
    if (n + 1 <= l->pass_cap)
        return 0;
    size_t cap = grown(l->pass_cap, n + 1);
    resil_io **p = realloc(l->pass, cap * sizeof *p);
    if (p == NULL)
        return RESIL_ENOMEM;
    l->pass = p;
    struct pollfd *f = realloc(l->fds, cap * sizeof *f);
    if (f == NULL)
        return RESIL_ENOMEM;
    l->fds = f;
    l->pass_cap = cap;
    return 0;
}

static int loop_io_start(void *self, resil_io *w, int fd, unsigned events)
{
    http_loop *l = self;
    if (w->loop_data != l) {
        if (grow_watches(l, l->nwatches + 1) != 0)
            return RESIL_ENOMEM;
        l->watches[l->nwatches++] = w;
        w->loop_data = l;
    }
    w->fd = fd;
    w->events = events;
    return 0;
}

static void loop_io_stop(void *self, resil_io *w)
{
    http_loop *l = self;
    if (w->loop_data != l)
        return;
    w->loop_data = NULL;
    for (size_t i = 0; i < l->nwatches; i++) {
        if (l->watches[i] == w) {
            l->watches[i] = l->watches[--l->nwatches];
            break;
        }
    }
    for (size_t i = 0; i < l->npass; i++) {
        if (l->pass[i] == w)
            l->pass[i] = NULL;
    }
}

static const resil_loop_ops ops = {
    .size = sizeof(resil_loop_ops),
    .now = loop_now,
    .timer_start = loop_timer_start,
    .timer_stop = loop_timer_stop,
    .post = loop_post,
    .in_loop = loop_in_loop,
    .io_start = loop_io_start,
    .io_stop = loop_io_stop,
    .timer_reserve = loop_timer_reserve,
};

int http_loop_init(http_loop *l)
{
    memset(l, 0, sizeof *l);
    resil_timers_init(&l->timers);
    if (pipe2(l->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return RESIL_ESYS;
    if (resil_posts_init(&l->posts) != 0) {
        close(l->wake[0]);
        close(l->wake[1]);
        return RESIL_ESYS;
    }
    l->thread = pthread_self();
    return resil_loop_init(&l->loop, &ops, l);
}

void http_loop_destroy(http_loop *l)
{
    resil_loop_drain(&l->loop);
    resil_posts_destroy(&l->posts);
    close(l->wake[0]);
    close(l->wake[1]);
    free(l->watches);
    free(l->pass);
    free(l->fds);
}

/* Milliseconds until the earliest timer, rounded up; -1 for none. */
static int poll_timeout(const http_loop *l)
{
    resil_instant next = resil_timers_next(&l->timers);
    if (next == RESIL_INSTANT_MAX)
        return -1;
    resil_duration left = resil_dur_sub(next, loop_now((void *)l));
    if (left <= 0)
        return 0;
    resil_duration ms = (left + RESIL_MS(1) - 1) / RESIL_MS(1);
    return ms > 60000 ? 60000 : (int)ms;
}

static short poll_events(unsigned events)
{
    return (short)(((events & RESIL_IO_READ) ? POLLIN : 0) |
                   ((events & RESIL_IO_WRITE) ? POLLOUT : 0));
}

static unsigned io_events(short revents)
{
    return ((revents & (POLLIN | POLLHUP)) ? RESIL_IO_READ : 0) |
           ((revents & POLLOUT) ? RESIL_IO_WRITE : 0) |
           ((revents & (POLLERR | POLLNVAL)) ? RESIL_IO_ERROR : 0);
}

static void drain_wake(http_loop *l)
{
    char buf[64];
    while (read(l->wake[0], buf, sizeof buf) > 0) {
    }
}

static void dispatch(http_loop *l, const struct pollfd *fds, size_t n)
{
    l->npass = n;
    for (size_t i = 0; i < n; i++) {
        resil_io *w = l->pass[i];
        if (w != NULL && fds[i + 1].revents != 0)
            w->fn(w, w->fd, io_events(fds[i + 1].revents));
    }
    l->npass = 0;
}

void http_loop_run_once(http_loop *l)
{
    size_t n = l->nwatches;
    if (grow_pass(l, n) != 0)
        return;
    struct pollfd *fds = l->fds;
    fds[0] = (struct pollfd){.fd = l->wake[0], .events = POLLIN};
    for (size_t i = 0; i < n; i++) {
        l->pass[i] = l->watches[i];
        fds[i + 1] = (struct pollfd){.fd = l->watches[i]->fd,
                                     .events = poll_events(l->watches[i]->events)};
    }
    int ready = poll(fds, (nfds_t)(n + 1), poll_timeout(l));
    if (ready > 0) {
        if (fds[0].revents != 0)
            drain_wake(l);
        dispatch(l, fds, n);
    }
    resil_posts_run(&l->posts);
    resil_timers_run(&l->timers, loop_now(l));
}
