/*
 * bulkhead.c — the concurrency limit with a FIFO queue.
 *
 * One 64-bit atomic word holds both counts (in flight in the low half,
 * queued in the high half), which gives the two properties the bulkhead is
 * for. The bound is hard: a permit is taken by a compare-and-swap of the
 * whole word, never by a check followed by an act. And the common case is
 * lock-free: while nobody waits, acquire and release are one CAS each. A
 * caller that must wait takes the mutex, and the invariant "queued > 0
 * implies every permit is taken" means the word then only changes under the
 * mutex, so a release that sees waiters hands its permit straight to the
 * oldest one (it never returns it to the pool where a newcomer could grab
 * it). That is what makes admission FIFO.
 *
 * A waiter's node lives on its own stack, linked into an intrusive FIFO
 * list: queueing allocates nothing, and there is no pool whose capacity
 * could disagree with the queued count (a granted waiter still owns its node
 * until it wakes). The waiter sleeps on the node's own cancellation token, a
 * child of the caller's token, so the caller's cancel wakes it, and the
 * release that grants it a permit fires it directly. One waiting mechanism
 * covers grant, cancel and (through the clock's sleep) timeout. A releaser
 * touches a node only under the mutex and only while it is queued, so the
 * node's owner may leave as soon as it has seen the verdict under the mutex.
 *
 * The word alone would be one line every caller writes, twice per call; on
 * a shared bulkhead that line moves between the callers' cores, and on many
 * cores it serialises them. So a call that ends parks its permit instead:
 * each thread has a stripe, a cache line of its own, where a release leaves
 * its permit (the word still counts it as taken) and from which the
 * thread's next acquire takes it back. A success then writes only its own
 * stripe, and reads lines that change only when something waits or the
 * limit moves. The bound stays exact because a parked permit is a taken
 * one. A thread with no parked permit takes a free one from the word, or
 * else one another thread parked (more threads than permits take turns that
 * way). Parked permits go back to the word whenever they could be missed:
 * an acquire about to be refused or to queue first holds parking off and
 * sweeps every stripe, and keeps holding it while it waits in the queue; a
 * limit coming down does the same. A release that parks and an acquire
 * about to wait each write their own word and then read the other's (a
 * Dekker handshake), so one of them always sees the other: a permit is
 * never left parked under a waiter. And a thread that takes a parked permit
 * and then sees someone about to wait gives it back and goes the slow way,
 * so nobody is admitted past a waiter: FIFO holds. The stripe is the
 * thread's, not the CPU's, so one thread alone is counted exactly (the
 * adaptive limiter, whose queue this is, relies on it); stripes are as many
 * as the CPUs, at least 16, and threads share them beyond that, correctly
 * but less cheaply. A permit taken back is counted in its stripe, so a
 * stats read adds the stripes to the admitted counter.
 *
 * Another implementation (resil_bulkhead_new_custom) gets the same handle
 * with a word that reads "every queue slot taken" and never changes: both
 * lock-free paths give up on it at their first load, and only the paths
 * that follow — which the built-in bulkhead takes only when it is full —
 * ask whether the handle is foreign; parking is held off on it for good.
 * The counters are the handle's.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_bulkhead_ops, ops, field)
#include "resil/bulkhead.h"

#define FLIGHT_MASK UINT64_C(0xffffffff)
#define QUEUED_ONE (UINT64_C(1) << 32)

static uint32_t in_flight_of(uint64_t word) { return (uint32_t)(word & FLIGHT_MASK); }
static uint32_t queued_of(uint64_t word) { return (uint32_t)(word >> 32); }

typedef resil__bulk_waiter waiter;

/* A stripe's word: a parked permit, and the parked permits taken back. */
#define PARKED UINT64_C(1)
#define TAKEN_ONE UINT64_C(2)

typedef struct stripe {
    _Alignas(RESIL__CACHE_LINE) _Atomic uint64_t word;
} stripe;

struct resil_bulkhead {
    /* Alone on its line: every call that finds no parked permit changes it. */
    _Alignas(RESIL__CACHE_LINE) _Atomic uint64_t word;
    /* Read by every call; max_concurrency moves only for an adaptive
     * limiter, no_parking when something waits or the limit comes down. */
    _Alignas(RESIL__CACHE_LINE) _Atomic uint32_t max_concurrency;
    _Atomic int32_t no_parking;
    stripe *stripes;
    uint32_t stripe_mask;
    resil_bulkhead_opts opts;
    resil_clock *clock;
    pthread_mutex_t mu;
    waiter *head, *tail; /* FIFO of waiters, oldest first; guarded by mu */
    _Atomic uint64_t admitted, queued_total, rejected, timed_out, cancelled;
    /* another implementation: word is FOREIGN_WORD for good */
    const resil_bulkhead_ops *ops;
    void *self;
};

#define FOREIGN_WORD (FLIGHT_MASK << 32)

void resil_bulkhead_opts_default(resil_bulkhead_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_concurrency = 10;
    o->max_queue = 50;
    o->queue = true;
    o->queue_timeout = 0;
    o->clock = NULL;
}

static int validate(const resil_bulkhead_opts *o, resil_err *err)
{
    if (o->max_concurrency < 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "bulkhead.max_concurrency must be >= 1, got %d",
                             (int)o->max_concurrency);
    if (o->max_queue < 0)
        return resil_err_set(err, RESIL_EINVAL, "bulkhead.max_queue must be >= 0, got %d",
                             (int)o->max_queue);
    if (o->queue_timeout < 0)
        return resil__bad_duration(err, "bulkhead.queue_timeout",
                                   ">= 0 (0 = until cancelled)", o->queue_timeout);
    return 0;
}

/* Zeroed and line-aligned, so that the word has its line to itself, with
 * empty stripes. */
static resil_bulkhead *new_handle(void)
{
    resil_bulkhead *b = resil__line_alloc(sizeof *b);
    if (b == NULL)
        return NULL;
    uint32_t n = resil__thread_stripe_count();
    b->stripes = resil__line_alloc(n * sizeof *b->stripes);
    if (b->stripes == NULL) {
        free(b);
        return NULL;
    }
    b->stripe_mask = n - 1;
    return b;
}

static void free_handle(resil_bulkhead *b)
{
    free(b->stripes);
    free(b);
}

int resil_bulkhead_new(const resil_bulkhead_opts *o, resil_bulkhead **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "bulkhead: options and out must not be NULL");
    int rc = validate(o, err);
    if (rc != 0)
        return rc;
    resil_bulkhead *b = new_handle();
    if (b == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "bulkhead: out of memory");
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free_handle(b);
        return resil_err_set(err, RESIL_ESYS, "bulkhead: pthread_mutex_init failed");
    }
    b->opts = *o;
    atomic_init(&b->max_concurrency, (uint32_t)o->max_concurrency);
    b->clock = o->clock ? o->clock : resil_clock_system();
    atomic_init(&b->word, 0);
    *out = b;
    return 0;
}

int resil_bulkhead_new_custom(const resil_bulkhead_ops *ops, void *self, resil_bulkhead **out,
                              resil_err *err)
{
    if (ops == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "bulkhead: ops and out must not be NULL");
    if (!OPS_HAS(ops, acquire) || !OPS_HAS(ops, release))
        return resil_err_set(err, RESIL_EINVAL,
                             "bulkhead: ops needs size, acquire and release");
    resil_bulkhead *b = new_handle();
    if (b == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "bulkhead: out of memory");
    atomic_init(&b->word, FOREIGN_WORD);
    atomic_init(&b->no_parking, 1);
    b->clock = resil_clock_system();
    b->ops = ops;
    b->self = self;
    *out = b;
    return 0;
}

void *resil_bulkhead_self(const resil_bulkhead *b, const resil_bulkhead_ops *ops)
{
    if (b == NULL || b->ops == NULL || b->ops != ops)
        return NULL;
    return b->self;
}

const char *resil_bulkhead_impl_name(const resil_bulkhead *b)
{
    if (b == NULL)
        return "none";
    if (b->ops == NULL)
        return "builtin";
    return b->ops->kind != NULL ? b->ops->kind : "custom";
}

void resil_bulkhead_free(resil_bulkhead *b)
{
    if (b == NULL)
        return;
    if (b->ops != NULL) {
        if (OPS_HAS(b->ops, destroy))
            b->ops->destroy(b->self);
        free_handle(b);
        return;
    }
    pthread_mutex_destroy(&b->mu);
    free_handle(b);
}

/* ---- the lock-free paths ------------------------------------------------ */

static uint32_t limit_of(resil_bulkhead *b)
{
    return atomic_load_explicit(&b->max_concurrency, memory_order_relaxed);
}

/* Take a permit if one is free and nobody is queued. */
static bool take_free_permit(resil_bulkhead *b)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);
    while (queued_of(w) == 0 && in_flight_of(w) < limit_of(b)) {
        if (atomic_compare_exchange_weak_explicit(&b->word, &w, w + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    }
    return false;
}

/* Return a permit to the pool if nobody is queued. */
static bool return_permit(resil_bulkhead *b)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);
    while (queued_of(w) == 0) {
        if (atomic_compare_exchange_weak_explicit(&b->word, &w, w - 1, memory_order_release,
                                                  memory_order_relaxed))
            return true;
    }
    return false;
}

static void hand_over(resil_bulkhead *b);

/* A permit back to the word, or to the oldest waiter when there is one. */
static void give_back(resil_bulkhead *b)
{
    if (return_permit(b))
        return;
    pthread_mutex_lock(&b->mu);
    if (b->head != NULL)
        hand_over(b);
    else
        atomic_fetch_sub_explicit(&b->word, 1, memory_order_release);
    pthread_mutex_unlock(&b->mu);
}

/* ---- parked permits ------------------------------------------------------ */

static stripe *my_stripe(resil_bulkhead *b)
{
    return &b->stripes[resil__thread_number() & b->stripe_mask];
}

static bool parking_held(resil_bulkhead *b)
{
    return atomic_load_explicit(&b->no_parking, memory_order_seq_cst) != 0;
}

/* Nobody waits or is about to, the limit is not coming down, and the
 * permits taken (this one included) are within the limit. */
static bool may_park(resil_bulkhead *b)
{
    if (parking_held(b))
        return false;
    uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);
    return queued_of(w) == 0 && in_flight_of(w) <= limit_of(b);
}

/* The stripe's parked permit back to the word, if it still has one. */
static void unpark(resil_bulkhead *b, stripe *s)
{
    uint64_t w = atomic_load_explicit(&s->word, memory_order_seq_cst);
    while ((w & PARKED) != 0) {
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, w & ~PARKED,
                                                  memory_order_seq_cst, memory_order_seq_cst)) {
            give_back(b);
            return;
        }
    }
}

/* No permit parks until unhold(), and none is left parked: hold() writes
 * no_parking, then reads every stripe; a release parks (writes its
 * stripe), then reads no_parking. One of the two sees the other. */
static void hold(resil_bulkhead *b)
{
    atomic_fetch_add_explicit(&b->no_parking, 1, memory_order_seq_cst);
    for (uint32_t i = 0; i <= b->stripe_mask; i++)
        unpark(b, &b->stripes[i]);
}

static void unhold(resil_bulkhead *b)
{
    atomic_fetch_sub_explicit(&b->no_parking, 1, memory_order_seq_cst);
}

/* A stripe's parked permit, taken. The same handshake as parking: a taker
 * that then sees someone about to wait came after them, so it gives the
 * permit back (to them) and takes the way they took. */
typedef enum { TOOK_NONE, TOOK_PERMIT, TOOK_TOO_LATE } took;

/* The taking itself, with no call: TOOK_TOO_LATE when the permit was
 * taken while parking was held, and is to be given back (give_up). */
static inline took take_one(resil_bulkhead *b, stripe *s)
{
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    while ((w & PARKED) != 0) {
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, (w & ~PARKED) + TAKEN_ONE,
                                                  memory_order_seq_cst, memory_order_relaxed))
            return parking_held(b) ? TOOK_TOO_LATE : TOOK_PERMIT;
    }
    return TOOK_NONE;
}

static void give_up(resil_bulkhead *b, stripe *s)
{
    atomic_fetch_sub_explicit(&s->word, TAKEN_ONE, memory_order_relaxed);
    give_back(b);
}

static bool take_from(resil_bulkhead *b, stripe *s)
{
    took got = take_one(b, s);
    if (got == TOOK_TOO_LATE)
        give_up(b, s);
    return got == TOOK_PERMIT;
}

static bool take_parked(resil_bulkhead *b) { return take_from(b, my_stripe(b)); }

/* Another thread's parked permit, when every permit is taken or parked:
 * one CAS on one other line, where a sweep would write every stripe and
 * hold parking off for everyone. Tried from the stripe after the caller's. */
static bool take_any_parked(resil_bulkhead *b)
{
    uint32_t first = resil__thread_number();
    for (uint32_t i = 1; i <= b->stripe_mask; i++) {
        stripe *s = &b->stripes[(first + i) & b->stripe_mask];
        if ((atomic_load_explicit(&s->word, memory_order_relaxed) & PARKED) != 0 &&
            take_from(b, s))
            return true;
    }
    return false;
}

static void park(resil_bulkhead *b);

/* park() for a thread that has no number yet: numbered, then parked. */
__attribute__((noinline)) static void park_numbered(resil_bulkhead *b)
{
    resil__thread_number_first();
    park(b);
}

/* A permit that ends: parked in the thread's stripe when it may be. Every
 * call in it is a jump, so that the common release keeps no frame. */
static void park(resil_bulkhead *b)
{
    uint32_t n = resil__thread_no;
    if (n == 0) {
        park_numbered(b);
        return;
    }
    stripe *s = &b->stripes[n & b->stripe_mask];
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    while ((w & PARKED) == 0 && may_park(b)) {
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, w | PARKED,
                                                  memory_order_seq_cst, memory_order_relaxed)) {
            if (parking_held(b)) /* the handshake: see hold() */
                unpark(b, s);
            return;
        }
    }
    give_back(b);
}

/* A free permit from the word, counted (a parked permit taken is counted
 * in its stripe instead). */
static bool take_free_counted(resil_bulkhead *b)
{
    if (!take_free_permit(b))
        return false;
    resil__count(&b->admitted);
    return true;
}

/* A permit at once when the thread has none parked: a free one, or one
 * another thread parked. */
static bool take_at_once(resil_bulkhead *b)
{
    return take_free_counted(b) || (b->ops == NULL && take_any_parked(b));
}

static void fill_ticket(resil_bulkhead_ticket *t, resil_bulkhead *b, resil_duration queued)
{
    t->owner = b;
    t->queued = queued;
}

/* Another implementation's acquire; the handle fills the owner and counts. */
static int other_acquire(resil_bulkhead *b, resil_cancel *cancel, bool wait,
                         resil_bulkhead_ticket *t)
{
    int rc = b->ops->acquire(b->self, cancel, wait, t);
    if (rc == 0) {
        resil__count(&b->admitted);
        if (t->queued > 0)
            resil__count(&b->queued_total);
        t->owner = b;
        return 0;
    }
    fill_ticket(t, NULL, 0);
    if (rc == RESIL_EREJECTED)
        resil__count(&b->rejected);
    else if (rc == RESIL_ETIMEDOUT)
        resil__count(&b->timed_out);
    else if (rc == RESIL_ECANCELED)
        resil__count(&b->cancelled);
    return rc;
}

static int admit_slow(resil_bulkhead *b, resil_cancel *cancel, bool wait,
                      resil_bulkhead_ticket *t);

/* Everything after the thread's own parked permit, out of line: the
 * acquire's own admission, where a call that would queue is refused. */
__attribute__((noinline)) static int try_acquire_slow(resil_bulkhead *b,
                                                      resil_bulkhead_ticket *t)
{
    fill_ticket(t, NULL, 0); /* a failed acquire leaves a ticket release ignores */
    int rc = admit_slow(b, NULL, false, t);
    if (rc != RESIL__BULK_QUEUED)
        return rc;
    unhold(b);
    resil__count(&b->rejected);
    return RESIL_EREJECTED;
}

int resil_bulkhead_try_acquire(resil_bulkhead *b, resil_bulkhead_ticket *t)
{
    if (!take_parked(b))
        return try_acquire_slow(b, t);
    fill_ticket(t, b, 0);
    return 0;
}

/* ---- the queue (everything below runs under mu) ------------------------- */

static void fifo_push(resil_bulkhead *b, waiter *w)
{
    w->next = NULL;
    w->prev = b->tail;
    if (b->tail != NULL)
        b->tail->next = w;
    else
        b->head = w;
    b->tail = w;
}

static void fifo_remove(resil_bulkhead *b, waiter *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        b->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    else
        b->tail = w->prev;
    w->next = w->prev = NULL;
}

typedef enum { ENTER_ADMITTED, ENTER_QUEUED, ENTER_REJECTED } enter_result;

/*
 * Either take a permit (possible if the last holder left between the
 * lock-free attempt and here) or join the queue. Joining is a CAS that
 * observes "all permits taken" and bumps the queued count in one step, so
 * a release that follows must see the waiter.
 */
static enter_result enter(resil_bulkhead *b)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);
    for (;;) {
        if (queued_of(w) == 0 && in_flight_of(w) < limit_of(b)) {
            if (atomic_compare_exchange_weak_explicit(&b->word, &w, w + 1,
                                                      memory_order_acquire,
                                                      memory_order_relaxed))
                return ENTER_ADMITTED;
            continue;
        }
        if (queued_of(w) >= (uint32_t)b->opts.max_queue)
            return ENTER_REJECTED;
        if (atomic_compare_exchange_weak_explicit(&b->word, &w, w + QUEUED_ONE,
                                                  memory_order_acq_rel, memory_order_relaxed))
            return ENTER_QUEUED;
    }
}

static void leave_queue(resil_bulkhead *b, waiter *w)
{
    fifo_remove(b, w);
    atomic_fetch_sub_explicit(&b->word, QUEUED_ONE, memory_order_relaxed);
}

/* Sleep until granted, cancelled or the deadline; 0 or RESIL_ECANCELED. */
static int wait_once(resil_bulkhead *b, waiter *w, resil_instant deadline)
{
    if (b->opts.queue_timeout == 0)
        return resil_cancel_wait_until(&w->wake, INT64_MAX);
    resil_duration left = resil_dur_sub(deadline, resil_clock_now(b->clock));
    if (left <= 0)
        return 0;
    return resil_clock_sleep(b->clock, left, &w->wake);
}

/* Called with mu held; decides whether the wait is over. */
static int wait_verdict(resil_bulkhead *b, waiter *w, resil_cancel *cancel,
                        resil_instant deadline, bool *over)
{
    *over = true;
    if (w->granted)
        return 0;
    if (resil_cancelled(cancel))
        return RESIL_ECANCELED;
    if (b->opts.queue_timeout > 0 && resil_clock_now(b->clock) >= deadline)
        return RESIL_ETIMEDOUT;
    *over = false;
    return 0;
}

static int queue_and_wait(resil_bulkhead *b, resil_cancel *cancel, resil_bulkhead_ticket *t)
{
    resil_instant start = resil_clock_now(b->clock);
    resil_instant deadline = resil_dur_add(start, b->opts.queue_timeout);

    pthread_mutex_lock(&b->mu);
    enter_result entered = enter(b);
    if (entered != ENTER_QUEUED) {
        pthread_mutex_unlock(&b->mu);
        unhold(b);
        if (entered == ENTER_REJECTED) {
            resil__count(&b->rejected);
            return RESIL_EREJECTED;
        }
        resil__count(&b->admitted);
        fill_ticket(t, b, 0);
        return 0;
    }
    waiter node = {.granted = false, .on_grant = NULL};
    if (resil_cancel_init(&node.wake, cancel) != 0) {
        atomic_fetch_sub_explicit(&b->word, QUEUED_ONE, memory_order_relaxed);
        pthread_mutex_unlock(&b->mu);
        unhold(b);
        return RESIL_ESYS;
    }
    fifo_push(b, &node);
    pthread_mutex_unlock(&b->mu);
    resil__count(&b->queued_total);

    int rc;
    for (;;) {
        wait_once(b, &node, deadline);
        pthread_mutex_lock(&b->mu);
        bool over;
        rc = wait_verdict(b, &node, cancel, deadline, &over);
        if (over)
            break;
        pthread_mutex_unlock(&b->mu);
    }
    if (!node.granted) /* a granted node was unlinked by its releaser */
        leave_queue(b, &node);
    pthread_mutex_unlock(&b->mu);
    unhold(b);
    resil_cancel_destroy(&node.wake);

    if (rc == 0) {
        resil__count(&b->admitted);
        fill_ticket(t, b, resil_dur_sub(resil_clock_now(b->clock), start));
    } else {
        resil__count(rc == RESIL_ECANCELED ? &b->cancelled : &b->timed_out);
    }
    return rc;
}

/* admit_or_queue when the thread has no parked permit, out of line. */
__attribute__((noinline)) static int admit_slow(resil_bulkhead *b, resil_cancel *cancel,
                                                bool wait, resil_bulkhead_ticket *t)
{
    if (take_at_once(b)) {
        fill_ticket(t, b, 0);
        return 0;
    }
    if (b->ops != NULL)
        return other_acquire(b, cancel, wait, t);
    hold(b);
    if (take_free_counted(b)) {
        unhold(b);
        fill_ticket(t, b, 0);
        return 0;
    }
    if (!b->opts.queue || b->opts.max_queue == 0) {
        unhold(b);
        resil__count(&b->rejected);
        return RESIL_EREJECTED;
    }
    return RESIL__BULK_QUEUED;
}

/* What both acquires do before a queue: RESIL__BULK_QUEUED when the call
 * is to join it (with parking held off until it leaves), else the
 * verdict, counted, with the ticket filled. */
static int admit_or_queue(resil_bulkhead *b, resil_cancel *cancel, bool wait,
                          resil_bulkhead_ticket *t)
{
    fill_ticket(t, NULL, 0);
    if (cancel != NULL && resil_cancelled(cancel)) {
        resil__count(&b->cancelled);
        return RESIL_ECANCELED;
    }
    if (!take_parked(b))
        return admit_slow(b, cancel, wait, t);
    fill_ticket(t, b, 0);
    return 0;
}

/* resil_bulkhead_acquire() past the thread's parked permit (`tried`: it
 * was looked at and none was there), out of line. */
__attribute__((noinline)) static int acquire_slow(resil_bulkhead *b, resil_cancel *cancel,
                                                  bool tried, resil_bulkhead_ticket *t)
{
    int rc;
    if (tried) {
        fill_ticket(t, NULL, 0);
        rc = admit_slow(b, cancel, true, t);
    } else {
        rc = admit_or_queue(b, cancel, true, t);
    }
    return rc == RESIL__BULK_QUEUED ? queue_and_wait(b, cancel, t) : rc;
}

/* A permit taken while parking was held: given back, and the general way. */
__attribute__((noinline)) static int acquire_too_late(resil_bulkhead *b, stripe *s,
                                                      resil_cancel *cancel,
                                                      resil_bulkhead_ticket *t)
{
    give_up(b, s);
    return acquire_slow(b, cancel, true, t);
}

/* The thread's parked permit taken in a leaf, every call a jump (the
 * pipeline's bulkhead level pays this on every execution). A token that
 * fired or must ask its parents, and a thread not yet numbered, go the
 * general way, which looks at the token as resil_cancelled() does. */
int resil_bulkhead_acquire(resil_bulkhead *b, resil_cancel *cancel, resil_bulkhead_ticket *t)
{
    if (cancel != NULL && (__atomic_load_n(&cancel->unlinked, __ATOMIC_ACQUIRE) != 0 ||
                           __atomic_load_n(&cancel->state, __ATOMIC_ACQUIRE) != 0))
        return acquire_slow(b, cancel, false, t);
    uint32_t n = resil__thread_no;
    if (n == 0)
        return acquire_slow(b, cancel, false, t);
    stripe *s = &b->stripes[n & b->stripe_mask];
    took got = take_one(b, s);
    if (got == TOOK_TOO_LATE)
        return acquire_too_late(b, s, cancel, t);
    if (got == TOOK_NONE)
        return acquire_slow(b, cancel, true, t);
    fill_ticket(t, b, 0);
    return 0;
}

/* ---- asynchronous waiters ------------------------------------------------ */

int resil__bulkhead_join(resil_bulkhead *b, resil_cancel *cancel, resil__bulk_waiter *w,
                         resil_bulkhead_ticket *t)
{
    int rc = admit_or_queue(b, cancel, false, t);
    if (rc != RESIL__BULK_QUEUED)
        return rc;
    pthread_mutex_lock(&b->mu);
    enter_result entered = enter(b);
    if (entered == ENTER_QUEUED) {
        w->granted = false;
        w->start = resil_clock_now(b->clock);
        fifo_push(b, w);
    }
    pthread_mutex_unlock(&b->mu);
    if (entered != ENTER_QUEUED)
        unhold(b);
    if (entered == ENTER_REJECTED) {
        resil__count(&b->rejected);
        return RESIL_EREJECTED;
    }
    if (entered == ENTER_ADMITTED) {
        resil__count(&b->admitted);
        fill_ticket(t, b, 0);
        return 0;
    }
    resil__count(&b->queued_total);
    return RESIL__BULK_QUEUED;
}

void resil__bulkhead_granted(resil_bulkhead *b, resil__bulk_waiter *w, resil_bulkhead_ticket *t)
{
    unhold(b);
    resil__count(&b->admitted);
    fill_ticket(t, b, resil_dur_sub(resil_clock_now(b->clock), w->start));
}

bool resil__bulkhead_withdraw(resil_bulkhead *b, resil__bulk_waiter *w, int why)
{
    pthread_mutex_lock(&b->mu);
    bool granted = w->granted;
    if (!granted)
        leave_queue(b, w);
    pthread_mutex_unlock(&b->mu);
    if (!granted) {
        unhold(b);
        resil__count(why == RESIL_ECANCELED ? &b->cancelled : &b->timed_out);
    }
    return !granted;
}

resil_duration resil__bulkhead_queue_timeout(const resil_bulkhead *b)
{
    return b->ops == NULL ? b->opts.queue_timeout : 0;
}

/* Under mu, `w` out of the FIFO with its permit: tell its owner, a thread
 * asleep on `wake` or an asynchronous execution through on_grant. */
static void grant(waiter *w)
{
    w->granted = true;
    if (w->on_grant != NULL)
        w->on_grant(w);
    else
        resil_cancel_fire(&w->wake);
}

/* Under mu: waiters exist, so the word only changes here. The permit moves
 * to the oldest waiter; in-flight stays the same, queued drops by one. */
static void hand_over(resil_bulkhead *b)
{
    waiter *w = b->head;
    fifo_remove(b, w);
    atomic_fetch_sub_explicit(&b->word, QUEUED_ONE, memory_order_acq_rel);
    grant(w);
}

void resil_bulkhead_release(resil_bulkhead_ticket *t)
{
    if (t == NULL || t->owner == NULL)
        return;
    resil_bulkhead *b = t->owner;
    t->owner = NULL;
    if (b->ops != NULL) {
        b->ops->release(b->self, t);
        return;
    }
    park(b);
}

/* A raised limit admits waiters at once, oldest first, each with a new
 * permit (in flight +1, queued −1). A lowered one only stops new
 * admissions until the calls above it have left, and sends the parked
 * permits back first, so that none is used beyond it. The limit is stored
 * under mu so that enter() never queues against a limit about to rise. */
void resil__bulkhead_set_limit(resil_bulkhead *b, uint32_t limit)
{
    bool lower = limit < limit_of(b);
    if (lower)
        hold(b);
    pthread_mutex_lock(&b->mu);
    atomic_store_explicit(&b->max_concurrency, limit, memory_order_relaxed);
    while (b->head != NULL) {
        uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);
        if (in_flight_of(w) >= limit)
            break;
        waiter *first = b->head;
        fifo_remove(b, first);
        atomic_fetch_add_explicit(&b->word, 1 - QUEUED_ONE, memory_order_acq_rel);
        grant(first);
    }
    pthread_mutex_unlock(&b->mu);
    if (lower)
        unhold(b);
}

/* For the adaptive limiter and the asynchronous executor: the parking
 * above, seen from outside. */
bool resil__bulkhead_take_parked(resil_bulkhead *b) { return b->ops == NULL && take_parked(b); }
void resil__bulkhead_put_back(resil_bulkhead *b) { park(b); }

static uint32_t parked_count(const resil_bulkhead *b)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i <= b->stripe_mask; i++)
        n += (uint32_t)(atomic_load_explicit(&b->stripes[i].word, memory_order_relaxed) & PARKED);
    return n;
}

static uint64_t taken_back(const resil_bulkhead *b)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i <= b->stripe_mask; i++)
        n += atomic_load_explicit(&b->stripes[i].word, memory_order_relaxed) >> 1;
    return n;
}

const _Atomic uint64_t *resil__bulkhead_word(const resil_bulkhead *b) { return &b->word; }

int32_t resil_bulkhead_in_flight(const resil_bulkhead *b)
{
    if (b->ops != NULL)
        return OPS_HAS(b->ops, in_flight) ? b->ops->in_flight(b->self) : 0;
    uint64_t w = atomic_load_explicit(&((resil_bulkhead *)b)->word, memory_order_relaxed);
    uint32_t taken = in_flight_of(w), parked = parked_count(b);
    return taken > parked ? (int32_t)(taken - parked) : 0;
}

int32_t resil_bulkhead_queued(const resil_bulkhead *b)
{
    if (b->ops != NULL)
        return OPS_HAS(b->ops, queued) ? b->ops->queued(b->self) : 0;
    uint64_t w = atomic_load_explicit(&((resil_bulkhead *)b)->word, memory_order_relaxed);
    return (int32_t)queued_of(w);
}

void resil_bulkhead_stats_get(const resil_bulkhead *b, resil_bulkhead_stats *out)
{
    out->admitted = resil__counted(&b->admitted) + taken_back(b);
    out->queued = resil__counted(&b->queued_total);
    out->rejected = resil__counted(&b->rejected);
    out->timed_out = resil__counted(&b->timed_out);
    out->cancelled = resil__counted(&b->cancelled);
}

void resil_bulkhead_opts_get(const resil_bulkhead *b, resil_bulkhead_opts *out)
{
    if (b->ops == NULL) {
        *out = b->opts;
        out->max_concurrency = (int32_t)limit_of((resil_bulkhead *)b);
        return;
    }
    *out = (resil_bulkhead_opts){0};
    if (OPS_HAS(b->ops, opts))
        b->ops->opts(b->self, out);
}
