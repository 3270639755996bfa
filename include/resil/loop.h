/*
 * loop.h — the small interface through which an event loop hosts resil.
 *
 * An asynchronous execution (async.h) needs three things from the loop that
 * runs it, and nothing else: the time, a one-shot timer, and a way for
 * another thread to hand work to the loop's thread. That is the whole
 * interface, so that libuv (the resil-uv adapter, uv.h), curl's multi
 * interface driven by a program's own epoll loop, an RTOS scheduler or a
 * test's virtual clock can each host resil in a few dozen lines.
 *
 * Timers and work items are caller-allocated structs with room for the
 * loop's bookkeeping, so starting a timer or posting work never allocates:
 * resil embeds them in the one allocation an execution makes. A loop
 * stores what it needs in the private fields; the two helpers below are a
 * complete implementation of that storage for a loop that has one native
 * timer and one native wake-up (as libuv's uv_timer_t and uv_async_t are):
 *
 *   resil_timers — an intrusive pairing heap ordered by due instant (ties
 *     in start order); start/stop never allocate; the loop arms its single
 *     native timer for resil_timers_next() and calls resil_timers_run().
 *   resil_posts  — a mutex-guarded FIFO of work items; resil_posts_push()
 *     says whether the queue was empty, i.e. whether the loop must be woken,
 *     and the loop calls resil_posts_run() on its own thread.
 *
 * A loop that can also watch file descriptors offers `io_start` and
 * `io_stop` (optional: they came after the first table): that is what lets
 * curl's multi interface run its transfers on the loop (http.h's
 * resil_http_multi). resil_loop_io_start() answers RESIL_EUNSUPPORTED for
 * a loop without them.
 *
 * Threads: every operation but `post` (and `in_loop`) is called on the
 * loop's thread. A loop runs timer callbacks, posted work and readiness
 * callbacks on that thread.
 *
 * The helpers take no NULL arguments (that is undefined), and a timer
 * handed to them must be zeroed (or idle as resil leaves it) before its
 * first start or stop.
 */
#ifndef RESIL_LOOP_H
#define RESIL_LOOP_H

#include <pthread.h>

#include "time.h"

RESIL_BEGIN_DECLS

typedef struct resil_timer resil_timer;
typedef void (*resil_timer_fn)(resil_timer *t);

/* A one-shot timer. Set `fn` before starting it; the other fields are the
 * loop's (resil_timers uses them). A timer is stopped when its callback
 * runs; starting a running timer moves it. */
struct resil_timer {
    resil_timer_fn fn;
    /* private to the loop */
    resil_instant due;
    uint64_t seq;
    resil_timer *child, *next, *prev; /* pairing heap links */
    bool armed;
    bool reserved; /* its place in the order was taken (timer_reserve) */
    void *loop_data;
};

typedef struct resil_work resil_work;
typedef void (*resil_work_fn)(resil_work *w);

/* A unit of work handed to the loop's thread. Set `fn`; `next` is the
 * loop's. A work item may be posted again once its callback has begun. */
struct resil_work {
    resil_work_fn fn;
    resil_work *next; /* private to the loop */
};

/* Readiness a watch asks for and reports. */
#define RESIL_IO_READ 1u
#define RESIL_IO_WRITE 2u
#define RESIL_IO_ERROR 4u /* reported only: the descriptor failed */

typedef struct resil_io resil_io;
typedef void (*resil_io_fn)(resil_io *w, int fd, unsigned events);

/* A watch on one file descriptor. Set `fn` before starting it; the rest is
 * the loop's. Caller-allocated like a timer; once io_stop has returned it
 * may be freed and its descriptor closed. */
struct resil_io {
    resil_io_fn fn;
    /* private to the loop */
    int fd;
    unsigned events;
    void *loop_data;
    resil_reserved reserved_[2];
};

/*
 * A loop implementation: a table of operations on the loop's own state
 * `self`. `size` comes first and versions the table: set it to
 * sizeof(resil_loop_ops).
 *
 *   now          the loop's monotonic time; it must be the clock of the
 *                pipelines it hosts (resil_loop_clock() makes one from it)
 *   timer_start  call t->fn on the loop thread once `delay` (>= 0) has
 *                passed; a running timer is moved
 *   timer_stop   make sure t->fn will not be called; harmless when idle
 *   post         from any thread: call w->fn on the loop thread soon
 *   in_loop      optional: is the calling thread the loop's? When present,
 *                a report made on the loop thread is handled at once
 *                instead of through post.
 *   io_start     optional: call w->fn on the loop thread whenever `fd` is
 *                ready for `events` (RESIL_IO_READ and/or WRITE, not 0),
 *                until io_stop; starting a watched `w` changes its events.
 *                A failed descriptor is reported as RESIL_IO_ERROR, and
 *                again on each pass while it stays failed and watched.
 *                0 or a negative resil error.
 *   io_stop      optional (with io_start): stop watching; harmless when
 *                idle. w->fn is not called afterwards.
 *   timer_start_at  optional: timer_start for an instant on the loop's
 *                clock rather than a delay (t->fn runs once `now` has
 *                reached `due`; a due instant already past means the next
 *                pass). resil uses it when the pipeline reads the loop's
 *                clock, handing the instant its decision was read at plus
 *                the wait, so that arming a timer needs no reading of its
 *                own.
 *   timer_reserve  optional: take t's place now in the order of timers
 *                due at one instant, for the start of t that follows
 *                (unless t is stopped first): t then runs before every
 *                timer started after the reservation and due at the same
 *                instant, as if it had been started now. A reservation
 *                holds nothing: a timer reserved and never started needs
 *                no stop, and may be reserved again. resil reserves a
 *                timeout's place as the walk enters the timeout and arms
 *                its timer only if the walk has to wait (an operation
 *                that reports at once never arms it); without this
 *                operation, each timeout's timer is armed as it is
 *                entered. resil_timers_reserve() is its whole work for a
 *                loop built on resil_timers.
 * Tables grow at their end; an operation the table's `size` does not
 * reach is absent (docs/abi.md).
 */
typedef struct resil_loop_ops {
    size_t size;
    resil_instant (*now)(void *self);
    void (*timer_start)(void *self, resil_timer *t, resil_duration delay);
    void (*timer_stop)(void *self, resil_timer *t);
    void (*post)(void *self, resil_work *w);
    bool (*in_loop)(void *self);
    int (*io_start)(void *self, resil_io *w, int fd, unsigned events);
    void (*io_stop)(void *self, resil_io *w);
    void (*timer_start_at)(void *self, resil_timer *t, resil_instant due);
    void (*timer_reserve)(void *self, resil_timer *t);
} resil_loop_ops;

/* A loop as resil sees it: the table, the loop's state, and a resil_clock
 * reading the loop's time (for the pipelines it hosts). Caller-owned; fill
 * with resil_loop_init(), and call resil_loop_drain() when the loop is done.
 * The memory of an ended execution is kept here for the next one (up to
 * 1,024 blocks), so that a loop in its steady state allocates nothing per
 * execution. */
typedef struct resil_loop {
    resil_clock clock; /* first: resil_loop_clock() hands out its address */
    const resil_loop_ops *ops;
    void *self;
    void *spare_; /* private: ended executions' memory, for reuse */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_loop;

/* RESIL_EINVAL when a required operation is missing or ops->size is too
 * small. */
RESIL_API int resil_loop_init(resil_loop *l, const resil_loop_ops *ops, void *self);
/* Free the memory kept for reuse. On the loop's thread, once no execution
 * is left on it (the loop may go on hosting: it keeps memory again). */
RESIL_API void resil_loop_drain(resil_loop *l);
/* A clock over ops->now, for resil_pipeline_builder_clock(): decisions and
 * timers then read the same time. Its sleep is the system clock's (a
 * pipeline hosted on a loop never sleeps). */
RESIL_API resil_clock *resil_loop_clock(resil_loop *l);
/* Can the loop watch descriptors (does its table reach io_start and
 * io_stop)? */
RESIL_API bool resil_loop_has_io(const resil_loop *l);
/* Watch `fd` through the loop (see io_start). RESIL_EINVAL for NULL
 * arguments, no events or a NULL w->fn; RESIL_EUNSUPPORTED when the loop
 * cannot watch descriptors; else the loop's answer. */
RESIL_API int resil_loop_io_start(resil_loop *l, resil_io *w, int fd, unsigned events);
RESIL_API void resil_loop_io_stop(resil_loop *l, resil_io *w);

/* ---- helpers for loop implementations ------------------------------------ */

typedef struct resil_timers {
    resil_timer *root;
    uint64_t seq;
    size_t count;
} resil_timers;

RESIL_API void resil_timers_init(resil_timers *q);
/* Arm `t` to fall due at `due` (moving it if armed). */
RESIL_API void resil_timers_start(resil_timers *q, resil_timer *t, resil_instant due);
RESIL_API void resil_timers_stop(resil_timers *q, resil_timer *t);
/* Take an idle `t`'s place among timers due at one instant now: its next
 * start keeps it (a stop gives it up; a started timer has its place).
 * Sequence numbers are the queue's, so a loop that keeps due timers
 * outside the heap numbers them from q->seq too and leaves a reserved
 * timer to the heap. */
RESIL_API void resil_timers_reserve(resil_timers *q, resil_timer *t);
/* The earliest due instant, RESIL_INSTANT_MAX when no timer is armed. */
RESIL_API resil_instant resil_timers_next(const resil_timers *q);
/* Run every timer due at or before `now`, earliest first (each is
 * disarmed before its callback, which may start timers, due ones
 * included); returns how many ran. */
RESIL_API size_t resil_timers_run(resil_timers *q, resil_instant now);

typedef struct resil_posts {
    pthread_mutex_t mu;
    resil_work *head, *tail;
} resil_posts;

/* RESIL_ESYS when the mutex cannot be made. */
RESIL_API int resil_posts_init(resil_posts *q);
RESIL_API void resil_posts_destroy(resil_posts *q);
/* Any thread. True when the queue was empty: the loop must be woken. */
RESIL_API bool resil_posts_push(resil_posts *q, resil_work *w);
/* On the loop thread: run what was posted (work posted meanwhile waits
 * for the next call); returns how many ran. */
RESIL_API size_t resil_posts_run(resil_posts *q);

RESIL_END_DECLS

#endif
