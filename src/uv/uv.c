/*
 * uv.c — the loop interface on libuv.
 *
 * A libuv handle must be closed asynchronously before its memory goes,
 * which would make every resil timer a handle with a lifetime of its own.
 * Instead all of them share one uv_timer_t: resil's timers sit in a timer
 * heap (resil_timers), and the uv timer is armed for the earliest, rounded
 * up to libuv's millisecond so that it never fires early and spins. Posted
 * work goes through one uv_async_t, which libuv coalesces. Starting a timer
 * or posting therefore never allocates, and an execution frees its memory
 * the moment it ends.
 *
 * Descriptors are watched with one uv_poll_t each, taken when a watch
 * starts and handed to uv_close() when it stops: the resil_io may go (and
 * its descriptor be closed, as curl does right after CURL_POLL_REMOVE) at
 * once, while libuv finishes closing the poll handle on its own time. A
 * closed poll's memory waits for the next watch (curl removes sockets and
 * adds them back between transfers, kept-alive connections' included), so
 * watching allocates only as many polls as were ever open at once; they
 * go when the loop is closed, after the last of them has closed.
 *
 * A timer whose due instant has already come (a retry's zero wait, a
 * deadline already past) does not go through libuv's timer heap either:
 * a uv_idle_t runs it on the loop's next pass (its idle phase, which
 * also keeps that pass from blocking), as a 0 ms uv timer would, at a
 * fraction of the cost of inserting into and removing from libuv's heap.
 * Neither that pass nor a zero delay reads the clock: what is due at the
 * latest time known (the latest reading, or libuv's cached time) is due.
 * Such a timer skips resil's heap too when its place is after every timer
 * due (a retry's zero wait, as a rule): it joins a list kept in due order,
 * and a pass runs the list and the heap merged, in the heap's own order
 * (due instant, then start), so the list changes the cost, not the order.
 * A timer whose place was reserved before its start (a timeout's, taken
 * as the walk entered it) always goes to the heap: its number is older
 * than the list's last.
 *
 * Neither handle keeps the loop alive for nothing: the async handle is
 * unreferenced, the idle is referenced only while a timer waits for its
 * pass (it rests, active and unreferenced, for one pass after, so that
 * the next zero wait need not start it again), and so is the uv timer
 * whenever no resil timer is left
 * (it is left armed rather than stopped, so that the timeouts every
 * execution starts and stops do not go through libuv's own timer heap),
 * so uv_run() returns (and UV_RUN_ONCE stops blocking) when the last
 * execution is over, as it would with the program's own handles alone.
 * The executions' spare memory goes once resil_uv_close()'s handles closed.
 */
#include <stddef.h>
#include <stdlib.h>

#include "resil/uv.h"

struct resil_uv {
    resil_loop loop;
    uv_loop_t *uv;
    uv_timer_t timer;
    uv_idle_t soon; /* runs the timers due already, on the next pass */
    bool soon_held;   /* the idle is referenced: a timer waits for its pass */
    bool soon_active; /* the idle is started (held, or resting) */
    uv_async_t async;
    resil_timers timers;
    resil_timer *due_first, *due_last; /* started due already, in due order */
    resil_posts posts;
    resil_instant armed; /* the due instant the uv timer is set for */
    resil_instant read;  /* the latest reading of the clock */
    resil_clock *system;
    pthread_t thread;
    int closing;          /* the timer's, the idle's and the async's close callbacks run */
    size_t polls_closing; /* polls handed to uv_close() and not yet back */
    union idle_poll *idle_polls;
};

/* A closed poll's memory, waiting for the next watch. */
typedef union idle_poll {
    uv_poll_t poll;
    union idle_poll *next;
} idle_poll;

/* The loop's clock is the system clock (resil_clock_system()): on Linux it
 * is CLOCK_MONOTONIC's time, libuv's timescale, read from the CPU's
 * counter at about half a clock_gettime's cost (the pipeline reads it at
 * an execution's start and end). Elsewhere libuv's clock may be another
 * (uv_hrtime is mach_absolute_time on macOS), so it is libuv's own.
 * Tests build this file with RESIL_UV_TEST_CLOCK_BEHIND to read a second
 * behind libuv's clock, beyond the system clock's bound. */
static resil_instant read_clock(resil_uv *u)
{
#if defined(__linux__)
    resil_instant now = resil_clock_now(u->system);
#else
    resil_instant now = (resil_instant)uv_hrtime();
#endif
#ifdef RESIL_UV_TEST_CLOCK_BEHIND
    now -= RESIL_S(1);
#endif
    if (now > u->read) /* never behind a firing's look at libuv's clock */
        u->read = now;
    return u->read;
}

static resil_instant uv_now_ns(void *self) { return read_clock(self); }

/* The loop's clock (resil_loop_clock(), the pipelines' on this loop) reads
 * it too, without going through ops->now: one call fewer at each of an
 * execution's readings. */
static resil_instant loop_clock_now(resil_clock *c)
{
    return read_clock((resil_uv *)((char *)c - offsetof(resil_uv, loop.clock)));
}

static void on_timer(uv_timer_t *t);
static void on_soon(uv_idle_t *i);

/* The next pass runs the timers due already, and does not block. The idle
 * is not stopped after the pass that ran them but left active and
 * unreferenced, and stopped by the first pass that finds nothing started
 * since: back-to-back zero waits (one per execution that retries) then
 * take a reference and give it back instead of starting and stopping a
 * handle, while the loop's life is what it was (an unreferenced handle
 * keeps no loop alive) and the one pass after the last costs no wait. */
static void soon(resil_uv *u)
{
    if (u->soon_held)
        return;
    u->soon_held = true;
    uv_ref((uv_handle_t *)&u->soon);
    if (u->soon_active) /* resting */
        return;
    u->soon_active = true;
    uv_idle_start(&u->soon, on_soon);
}

/* The latest time known without reading the clock: the latest reading, or
 * libuv's cached loop time, whichever is later. */
static resil_instant latest(const resil_uv *u)
{
    resil_instant cached = (resil_instant)(uv_now(u->uv) * (uint64_t)RESIL_MS(1));
    return u->read > cached ? u->read : cached;
}

/* Keep the uv timer no later than the earliest resil timer. It is moved
 * only earlier: a timer stopped or a later one started leaves it where it
 * is, and an early firing finds nothing due and re-arms — so the common
 * case (timeouts started and stopped around every attempt) costs libuv
 * nothing.
 *
 * libuv counts a timer's milliseconds from its loop's cached time, so the
 * delay is counted here from a time no earlier than that (`from`): the
 * latest reading of the clock (the one a decision just made, usually) or
 * libuv's cached time, whichever is later. Arming then reads no clock,
 * and a due instant already reached arms for the next pass (0 ms). */
static void arm(resil_uv *u, resil_instant next, resil_instant from)
{
    u->armed = next;
    resil_duration left;
    if (__builtin_sub_overflow(next, from, &left))
        left = from < 0 ? INT64_MAX : INT64_MIN;
    if (left <= 0) {
        soon(u);
        return;
    }
    uv_timer_start(&u->timer, on_timer, (uint64_t)((left + RESIL_MS(1) - 1) / RESIL_MS(1)), 0);
}

static void rearm(resil_uv *u)
{
    const resil_timer *root = u->timers.root; /* resil_timers_next(), inline */
    if (root == NULL || root->due >= u->armed)
        return;
    arm(u, root->due, latest(u));
}

/* The uv timer holds the loop only while a timer of the heap is armed
 * (the list's are held by the active idle). */
static void heap_start(resil_uv *u, resil_timer *t, resil_instant due)
{
    resil_timers_start(&u->timers, t, due);
    if (u->timers.count == 1)
        uv_ref((uv_handle_t *)&u->timer);
}

static void heap_stop(resil_uv *u, resil_timer *t)
{
    resil_timers_stop(&u->timers, t);
    if (u->timers.count == 0)
        uv_unref((uv_handle_t *)&u->timer);
}

/* A timer's loop_data is the host exactly while it waits in the list. */
static bool in_due_list(const resil_uv *u, const resil_timer *t) { return t->loop_data == u; }

static void due_unlink(resil_uv *u, resil_timer *t)
{
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        u->due_first = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    else
        u->due_last = t->prev;
    t->armed = false;
    t->loop_data = NULL;
}

/* `t` at the list's end, numbered from the heap's counter; the idle's
 * next pass runs it. */
static void due_push(resil_uv *u, resil_timer *t, resil_instant due)
{
    t->due = due;
    t->seq = u->timers.seq++;
    t->armed = true;
    t->loop_data = u;
    t->next = NULL;
    t->prev = u->due_last;
    if (u->due_last != NULL)
        u->due_last->next = t;
    else
        u->due_first = t;
    u->due_last = t;
    soon(u);
}

/* The next timer due at `now`, of the list or the heap, or NULL: the
 * earlier instant first, then the earlier start (the heap's own order;
 * both take their start's number from its counter). */
static resil_timer *next_due(resil_uv *u, resil_instant now)
{
    resil_timer *h = u->timers.root, *l = u->due_first;
    if (h != NULL && h->due > now)
        h = NULL;
    if (l != NULL && l->due > now)
        l = NULL;
    if (l == NULL || h == NULL)
        return l != NULL ? l : h;
    return h->due < l->due || (h->due == l->due && h->seq < l->seq) ? h : l;
}

/* A timer stopped, or moved: out of the list (the idle's pass then finds
 * nothing) or the heap. */
static void unstart(resil_uv *u, resil_timer *t)
{
    if (in_due_list(u, t))
        due_unlink(u, t);
    else
        heap_stop(u, t);
}

/* The uv timer or the idle fired: run what is due at `now`, in due order
 * across the list and the heap (a callback may start timers due already,
 * which run in this pass too, as the heap's own run would), and arm for
 * the rest (an early firing finds nothing due and only re-arms). */
static void run_due(resil_uv *u, resil_instant now)
{
    u->armed = RESIL_INSTANT_MAX;
    for (resil_timer *t; (t = next_due(u, now)) != NULL;) {
        unstart(u, t);
        t->fn(t);
    }
    rearm(u);
    if (u->due_first != NULL) /* fell due after `now`: the next pass */
        soon(u);
}

/* The uv timer fires once libuv's clock (CLOCK_MONOTONIC, read by the
 * kernel) has reached the millisecond it was armed for. The system clock
 * may read up to its bound behind that clock, so a firing that finds
 * nothing due at its reading asks libuv's clock before taking it for an
 * early one (the millisecond counted from a reading later than libuv's
 * cached time) and re-arming for another millisecond: a timer due by the
 * kernel's clock then runs on this firing. Both readings are of the time
 * now, so nothing runs before its instant on libuv's clock, and the loop's
 * clock reads no earlier than that look until the system clock passes it,
 * so a reading the callback takes is not before the instant either; the
 * common firing reads once. */
static void on_timer(uv_timer_t *t)
{
    resil_uv *u = t->data;
    resil_instant now = read_clock(u);
    if (next_due(u, now) == NULL) {
        resil_instant kernel = (resil_instant)uv_hrtime();
        if (kernel > now)
            now = u->read = kernel;
    }
    run_due(u, now);
}

/* The idle runs only timers that were due when it was started (the
 * list's, and the heap's that rearm() found due), at the time they were
 * found due: that time needs no new reading. A timer that fell due since
 * waits for the uv timer armed for it. */
static void on_soon(uv_idle_t *i)
{
    resil_uv *u = i->data;
    if (!u->soon_held) { /* nothing started since the pass before: rest */
        u->soon_active = false;
        uv_idle_stop(i);
        return;
    }
    u->soon_held = false;
    uv_unref((uv_handle_t *)i);
    run_due(u, latest(u));
}

/* Whether `t`, due already at `due`, has its place after every timer
 * due, none of the heap's at or before it and the list's last no later,
 * and before the uv timer's instant: the list's end is then its place.
 * A reserved timer's place is older than the list's last: the heap's. */
static bool list_takes(const resil_uv *u, const resil_timer *t, resil_instant due)
{
    const resil_timer *root = u->timers.root;
    return !t->reserved && due < u->armed && (root == NULL || root->due > due) &&
           (u->due_last == NULL || u->due_last->due <= due);
}

/* Start `t` for `due`; `from`: the latest time known, or 0 when not yet
 * looked up. The uv timer is set no later than any timer of the heap (it
 * is moved only earlier, and run_due clears it before it runs what is due
 * and re-arms after), so a timer due no earlier than it changes nothing
 * (the timeouts every execution starts) and one due earlier is the
 * earliest: neither needs the heap's earliest looked up.
 *
 * A timer due already (a retry's zero wait) whose place in the order is
 * after every timer due (none of the heap's is due at or before it, the
 * list's last no later) joins the list instead of the heap: the idle runs
 * it on the next pass, without an insertion into the heap and a removal,
 * and without the uv timer's hold on the loop (the active idle holds it). */
__attribute__((noinline)) static void start_at(resil_uv *u, resil_timer *t, resil_instant due,
                                               bool known, resil_instant from)
{
    if (t->armed) /* a move */
        unstart(u, t);
    if (due >= u->armed) {
        heap_start(u, t, due);
        return;
    }
    if (!known)
        from = latest(u);
    if (due <= from && list_takes(u, t, due)) {
        due_push(u, t, due);
        return;
    }
    heap_start(u, t, due);
    arm(u, due, from);
}

static void uv_timer_start_at_op(void *self, resil_timer *t, resil_instant due)
{
    resil_uv *u = self;
    if (t->armed || due < u->armed) {
        start_at(u, t, due, false, 0);
        return;
    }
    heap_start(u, t, due); /* the common case: a timeout */
}

/* A delay counts from a fresh reading; a zero delay is due at once,
 * which the latest time known says without one (it runs on the next pass,
 * after the timers already due then). */
static void uv_timer_start_op(void *self, resil_timer *t, resil_duration d)
{
    resil_uv *u = self;
    if (d > 0) {
        resil_instant from = read_clock(u);
        start_at(u, t, resil_dur_add(from, d), false, 0);
        return;
    }
    resil_instant now = latest(u);
    if (d == 0 && !t->armed && list_takes(u, t, now)) { /* a retry's zero wait */
        due_push(u, t, now);
        return;
    }
    start_at(u, t, d == 0 ? now : resil_dur_add(now, d), true, now);
}

/* A timeout's place in the order, taken as its level is entered: the heap's
 * numbering, which a reserved timer then keeps in the heap (the list holds
 * only timers numbered as they join it, after every timer due). */
static void uv_timer_reserve_op(void *self, resil_timer *t)
{
    resil_uv *u = self;
    resil_timers_reserve(&u->timers, t);
}

/* The last resil timer stopped: the uv timer stays armed (an early firing
 * finds nothing due and costs one callback) but no longer keeps the loop
 * alive. An execution that starts and stops its timeouts then touches
 * libuv's timer heap not at all. */
static void uv_timer_stop_op(void *self, resil_timer *t)
{
    unstart(self, t);
}

static void on_async(uv_async_t *a)
{
    resil_uv *u = a->data;
    resil_posts_run(&u->posts);
}

static void uv_post_op(void *self, resil_work *w)
{
    resil_uv *u = self;
    if (resil_posts_push(&u->posts, w))
        uv_async_send(&u->async);
}

static bool uv_in_loop_op(void *self)
{
    resil_uv *u = self;
    return pthread_equal(u->thread, pthread_self());
}

static int poll_events(unsigned events)
{
    return ((events & RESIL_IO_READ) ? UV_READABLE : 0) |
           ((events & RESIL_IO_WRITE) ? UV_WRITABLE : 0);
}

/* libuv stops a poll whose descriptor failed (POLLERR) before it reports
 * the error, while a resil watch goes on until io_stop: it is started
 * again first, so that the error, or the bytes that came before it, are
 * reported on the next pass too unless the callback stops the watch (as
 * an epoll loop of one's own reports a failed descriptor on every pass). */
static void on_poll(uv_poll_t *p, int status, int events)
{
    resil_io *w = p->data;
    if (status < 0) {
        uv_poll_start(p, poll_events(w->events), on_poll);
        w->fn(w, w->fd, RESIL_IO_ERROR);
        return;
    }
    w->fn(w, w->fd,
          ((events & UV_READABLE) ? RESIL_IO_READ : 0) |
              ((events & UV_WRITABLE) ? RESIL_IO_WRITE : 0));
}

static uv_poll_t *poll_take(resil_uv *u)
{
    idle_poll *i = u->idle_polls;
    if (i == NULL)
        return malloc(sizeof(idle_poll));
    u->idle_polls = i->next;
    return &i->poll;
}

static void poll_give(resil_uv *u, uv_poll_t *p)
{
    idle_poll *i = (idle_poll *)p;
    i->next = u->idle_polls;
    u->idle_polls = i;
}

static int uv_io_start_op(void *self, resil_io *w, int fd, unsigned events)
{
    resil_uv *u = self;
    uv_poll_t *p = w->loop_data;
    if (p == NULL) {
        p = poll_take(u);
        if (p == NULL)
            return RESIL_ENOMEM;
        if (uv_poll_init_socket(u->uv, p, fd) != 0) {
            poll_give(u, p);
            return RESIL_ESYS;
        }
        p->data = w;
        w->loop_data = p;
        w->fd = fd;
    }
    w->events = events;
    return uv_poll_start(p, poll_events(events), on_poll) == 0 ? 0 : RESIL_ESYS;
}

static void finish_close(resil_uv *u);

static void poll_closed(uv_handle_t *h)
{
    resil_uv *u = h->data;
    u->polls_closing--;
    poll_give(u, (uv_poll_t *)h);
    finish_close(u); /* when the loop was closed meanwhile */
}

static void uv_io_stop_op(void *self, resil_io *w)
{
    resil_uv *u = self;
    uv_poll_t *p = w->loop_data;
    if (p == NULL)
        return;
    uv_poll_stop(p);
    p->data = u;
    u->polls_closing++;
    uv_close((uv_handle_t *)p, poll_closed);
    w->loop_data = NULL;
}

static const resil_loop_ops uv_ops = {.size = sizeof(resil_loop_ops),
                                      .now = uv_now_ns,
                                      .timer_start = uv_timer_start_op,
                                      .timer_stop = uv_timer_stop_op,
                                      .post = uv_post_op,
                                      .in_loop = uv_in_loop_op,
                                      .io_start = uv_io_start_op,
                                      .io_stop = uv_io_stop_op,
                                      .timer_start_at = uv_timer_start_at_op,
                                      .timer_reserve = uv_timer_reserve_op};

int resil_uv_new(uv_loop_t *loop, resil_uv **out)
{
    if (loop == NULL || out == NULL)
        return RESIL_EINVAL;
    resil_uv *u = calloc(1, sizeof *u);
    if (u == NULL)
        return RESIL_ENOMEM;
    if (resil_posts_init(&u->posts) != 0) {
        free(u);
        return RESIL_ESYS;
    }
    if (uv_timer_init(loop, &u->timer) != 0 || uv_idle_init(loop, &u->soon) != 0 ||
        uv_async_init(loop, &u->async, on_async) != 0) {
        resil_posts_destroy(&u->posts);
        free(u);
        return RESIL_ESYS;
    }
    uv_unref((uv_handle_t *)&u->async);
    u->uv = loop;
    u->timer.data = u->soon.data = u->async.data = u;
    u->armed = RESIL_INSTANT_MAX;
    u->thread = pthread_self();
    u->system = resil_clock_system();
    resil_timers_init(&u->timers);
    resil_loop_init(&u->loop, &uv_ops, u);
    u->loop.clock.now = loop_clock_now;
    *out = u;
    return 0;
}

resil_loop *resil_uv_loop(resil_uv *u) { return u != NULL ? &u->loop : NULL; }

/* The memory goes once the timer, the async and every poll have closed,
 * in whichever order libuv runs their close callbacks; the executions'
 * spares go then too, the block of one whose `done` closed the loop
 * included. */
static void finish_close(resil_uv *u)
{
    if (u->closing < 3 || u->polls_closing > 0)
        return;
    resil_loop_drain(&u->loop);
    for (idle_poll *i = u->idle_polls, *next; i != NULL; i = next) {
        next = i->next;
        free(i);
    }
    resil_posts_destroy(&u->posts);
    free(u);
}

static void closed(uv_handle_t *h)
{
    resil_uv *u = h->data;
    u->closing++;
    finish_close(u);
}

/* What is still posted runs first: the async that would have run it is
 * unreferenced, so a loop may have stopped with a post queued (a caller's
 * token that fired as its execution ended), and once the async is closing
 * libuv calls it no more — that execution's block would never go back to
 * the loop to be freed with it. */
void resil_uv_close(resil_uv *u)
{
    if (u == NULL)
        return;
    resil_posts_run(&u->posts);
    uv_close((uv_handle_t *)&u->timer, closed);
    uv_close((uv_handle_t *)&u->soon, closed);
    uv_close((uv_handle_t *)&u->async, closed);
}
