/*
 * cancel.c — the cancellation token.
 *
 * The token is checked on every hot path, created twice per pipeline
 * execution (the total timeout's and the attempt's) and fired rarely, so it
 * is built to cost nothing until it fires: making one is a handful of stores
 * and the fired check is an atomic load.
 *
 * A child is not put in its parent's list when it is made. Until something
 * waits on it (or on a child of its own, which needs it in the list so that
 * a fire from above reaches that waiter), it answers "fired?" by looking at
 * itself and then up its chain of parents, and a fire from above needs no
 * walk to reach it. Almost every child lives and dies without a waiter (an
 * attempt that succeeds), so the two lock round trips of linking and
 * unlinking — four atomic exchanges per pipeline execution — are spent only
 * when a wait can use them. The flag that says so is read before the state,
 * so a reader that finds a child linked also sees the fire the link copied
 * down from the parent; a fire aimed at an unlinked child whose parent has
 * already fired keeps the parent's reason, as a linked child would have.
 *
 * That rules out a mutex and a condition variable per token (their
 * initialisation alone cost more than the rest of the token). On Linux a
 * waiter sleeps on the token's state word itself with the futex syscall,
 * whose absolute timeout is on CLOCK_MONOTONIC, so a deadline is immune to
 * wall-clock jumps and a fire wakes every sleeper at once. The state word
 * says whether anyone sleeps (ARMED → SLEEPING by the waiter's CAS), so a
 * fire with no waiter makes no system call. Elsewhere the same protocol
 * sleeps on a mutex and condition variable kept only for that purpose.
 *
 * A watch is a child whose fire calls a function instead of waking a
 * sleeper: its armed state is WATCHED where a waited-on token's is
 * SLEEPING, so a token no one watches pays nothing for it. The function
 * runs inside the watch's lock, which is what lets its owner's destroy
 * know that the call is over (or, for a parent that had fired before the
 * watch began, in the start itself).
 *
 * Children form an intrusive list guarded by the parent's spinlock, not a
 * mutex: POSIX grants the static initialiser only to static mutexes, and a
 * spinlock's release is a plain store. Its critical sections are a few
 * pointer writes, except a fire, which walks its subtree.
 * Firing walks down, taking an ancestor's lock before a descendant's;
 * unlinking locks just the parent; linking a child late holds the child's
 * lock while it takes the parent's, but nothing walks down into a child
 * that is not yet in the list, so no two threads can wait on each other. Everything a fire does to a token — its state, its wake-up, its
 * children — happens inside that token's lock, so destroy, after waiting for
 * the lock to be free, knows no firer can still be touching the memory its
 * owner is about to reuse.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <time.h>

#include "cancel_inline.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* ARMED is 0 (cancel_inline.h); WATCHED is a watch's armed state: a fire
 * calls its function where SLEEPING's would wake sleepers. */
enum { ARMED = 0, FIRED = RESIL__CANCEL_FIRED, SLEEPING = 2, WATCHED = 3 };

static bool load_fired(const resil_cancel *c)
{
    return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == FIRED;
}

static bool is_unlinked(const resil_cancel *c)
{
    return __atomic_load_n(&c->unlinked, __ATOMIC_ACQUIRE) != 0;
}

/* The nearest token from `c` up that has fired, looking past `c` only
 * while the token looked at is not in its parent's list; NULL if none. */
static const resil_cancel *fired_from(const resil_cancel *c)
{
    for (; c != NULL; c = c->parent) {
        bool unlinked = is_unlinked(c); /* before the state: see the top */
        if (load_fired(c))
            return c;
        if (!unlinked)
            return NULL;
    }
    return NULL;
}

/* ---- the spinlock over a token's child list ------------------------------ */

static void cpu_relax(unsigned *spins)
{
    if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
        return;
    }
    sched_yield(); /* the holder may be descheduled: let it run */
}

static void spin_lock(int *lock)
{
    unsigned spins = 0;
    while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE) != 0)
        while (__atomic_load_n(lock, __ATOMIC_RELAXED) != 0)
            cpu_relax(&spins);
}

static void spin_unlock(int *lock) { __atomic_store_n(lock, 0, __ATOMIC_RELEASE); }

/* Returns once whoever held the lock has released it. Out of line: a
 * destroy finds the lock free, and should not pay this loop's frame. */
__attribute__((noinline)) static void spin_wait_free(int *lock)
{
    unsigned spins = 0;
    while (__atomic_load_n(lock, __ATOMIC_ACQUIRE) != 0)
        cpu_relax(&spins);
}

/* ---- sleeping and waking: the platform's part ---------------------------- */

#ifdef __linux__

static int sleeper_init(resil_cancel *c)
{
    (void)c;
    return 0;
}

static void sleeper_destroy(resil_cancel *c) { (void)c; }

/* The timespec of the futex system call itself, which on every Linux that
 * has SYS_futex is two longs whatever the C library's time_t is. */
struct futex_timespec {
    long tv_sec;
    long tv_nsec;
};

static struct futex_timespec futex_deadline(int64_t ns)
{
    int64_t sec = ns / 1000000000;
    struct futex_timespec ts;
    ts.tv_sec = sec > LONG_MAX ? LONG_MAX : (long)sec;
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

/* Sleep while the state is SLEEPING. Returns ETIMEDOUT at the deadline,
 * 0 on any other return (woken, state already changed, a signal): the
 * caller looks at the state again. */
static int sleep_on(resil_cancel *c, int64_t deadline_ns)
{
    struct futex_timespec ts = futex_deadline(deadline_ns);
    long rc = syscall(SYS_futex, &c->state, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, SLEEPING,
                      deadline_ns == INT64_MAX ? NULL : &ts, NULL, FUTEX_BITSET_MATCH_ANY);
    return rc != 0 && errno == ETIMEDOUT ? ETIMEDOUT : 0;
}

static void wake_sleepers(resil_cancel *c)
{
    syscall(SYS_futex, &c->state, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

#else /* a mutex and a condition variable on CLOCK_MONOTONIC */

static int sleeper_init(resil_cancel *c)
{
    pthread_condattr_t attr;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return RESIL_ESYS;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&c->cv, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (rc == 0)
        return 0;
    pthread_mutex_destroy(&c->mu);
    return RESIL_ESYS;
}

static void sleeper_destroy(resil_cancel *c)
{
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

static int sleep_on(resil_cancel *c, int64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == SLEEPING)
        rc = deadline_ns == INT64_MAX ? pthread_cond_wait(&c->cv, &c->mu)
                                      : pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    pthread_mutex_unlock(&c->mu);
    return rc == ETIMEDOUT ? ETIMEDOUT : 0;
}

static void wake_sleepers(resil_cancel *c)
{
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

#endif

/* ---- the token ------------------------------------------------------------ */

/* Returns the state it replaced. The reason is stored first so that whoever
 * sees FIRED (acquire) sees the reason too. */
static int mark_fired(resil_cancel *c, int reason)
{
    __atomic_store_n(&c->reason, reason, __ATOMIC_RELAXED);
    return __atomic_exchange_n(&c->state, FIRED, __ATOMIC_ACQ_REL);
}

/* A child fired on its own before it was linked keeps its reason. The
 * state the child had when the link found its parent fired and marked it,
 * or FIRED when it did not (a fire from now on walks down to it). */
static int link_child(resil_cancel *parent, resil_cancel *c)
{
    int was = FIRED;
    spin_lock(&parent->lock);
    c->next_sibling = parent->first_child;
    if (parent->first_child != NULL)
        parent->first_child->prev_sibling = c;
    parent->first_child = c;
    if (load_fired(parent) && !load_fired(c))
        was = mark_fired(c, __atomic_load_n(&parent->reason, __ATOMIC_RELAXED));
    spin_unlock(&parent->lock);
    return was;
}

/* Put `c`, and every unlinked token above it, in its parent's list: from
 * now on a fire from above walks down to it. */
static void link_up(resil_cancel *c)
{
    if (c == NULL || !is_unlinked(c))
        return;
    link_up(c->parent);
    spin_lock(&c->lock);
    if (__atomic_load_n(&c->unlinked, __ATOMIC_RELAXED)) {
        link_child(c->parent, c);
        __atomic_store_n(&c->unlinked, 0, __ATOMIC_RELEASE);
    }
    spin_unlock(&c->lock);
}

int resil_cancel_init(resil_cancel *c, resil_cancel *parent)
{
    resil__cancel_fields(c, parent);
    return sleeper_init(c) != 0 ? RESIL_ESYS : 0;
}

__attribute__((noinline)) static void unlink_child(resil_cancel *c)
{
    resil_cancel *parent = c->parent;
    spin_lock(&parent->lock);
    if (c->prev_sibling != NULL)
        c->prev_sibling->next_sibling = c->next_sibling;
    else
        parent->first_child = c->next_sibling;
    if (c->next_sibling != NULL)
        c->next_sibling->prev_sibling = c->prev_sibling;
    c->parent = c->next_sibling = c->prev_sibling = NULL;
    spin_unlock(&parent->lock);
}

void resil__cancel_unlink(resil_cancel *c) { unlink_child(c); }
void resil__cancel_wait_free(int *lock) { spin_wait_free(lock); }

void resil_cancel_destroy(resil_cancel *c)
{
    if (c == NULL)
        return;
    resil__cancel_let_go(c);
    sleeper_destroy(c);
}

/* Children first, the token itself last: whoever sees a token fired (a
 * woken sleeper above all) finds everything linked below it fired too. */
static void fire_tree(resil_cancel *c, int reason)
{
    spin_lock(&c->lock);
    if (!load_fired(c)) {
        for (resil_cancel *child = c->first_child; child != NULL; child = child->next_sibling)
            fire_tree(child, reason);
        int was = mark_fired(c, reason);
        if (was == SLEEPING)
            wake_sleepers(c);
        else if (was == WATCHED)
            ((resil__cancel_watch *)c)->fn((resil__cancel_watch *)c);
    }
    spin_unlock(&c->lock);
}

/* Taking the lock even when the token has fired makes a second firer wait
 * for the first to finish its walk: when fire returns, the whole subtree has
 * fired, whoever did it. */
void resil_cancel_fire_reason(resil_cancel *c, int reason)
{
    const resil_cancel *above = fired_from(c);
    if (above != NULL && above != c)
        reason = __atomic_load_n(&above->reason, __ATOMIC_RELAXED);
    fire_tree(c, reason < 0 ? reason : RESIL_ECANCELED);
}

/* Linked at once, under every unlinked token above it, so that a fire
 * from above walks down to it. Unlike link_up(), the link does not take
 * the watch's own lock: nothing else can reach the watch before it is in
 * its parent's list. Under the parent's lock either a fire's walk comes
 * after the link (and calls the function) or the link comes after the
 * fire (and marks the watch fired, and the function is called here):
 * once either way. */
int resil__cancel_watch_start(resil__cancel_watch *w, resil_cancel *parent,
                              resil__cancel_watch_fn fn)
{
    if (resil_cancel_init(&w->tok, parent) != 0)
        return RESIL_ESYS;
    w->fn = fn;
    w->tok.state = WATCHED;
    link_up(parent);
    int was = link_child(parent, &w->tok);
    __atomic_store_n(&w->tok.unlinked, 0, __ATOMIC_RELEASE);
    if (was == WATCHED)
        fn(w);
    return 0;
}

void resil_cancel_fire(resil_cancel *c) { resil_cancel_fire_reason(c, RESIL_ECANCELED); }

bool resil_cancel_fired(const resil_cancel *c) { return fired_from(c) != NULL; }

int resil_cancel_reason(const resil_cancel *c)
{
    const resil_cancel *f = fired_from(c);
    return f != NULL ? __atomic_load_n(&f->reason, __ATOMIC_RELAXED) : 0;
}

/*
 * Announce a sleeper (ARMED → SLEEPING, so the fire knows to wake), then
 * sleep while the state stays SLEEPING. A fire between the announcement and
 * the sleep changes the word, so the sleep returns at once; wake-ups for
 * other reasons just go round again.
 */
int resil_cancel_wait_until(resil_cancel *c, int64_t deadline_ns)
{
    if (deadline_ns < 0)
        deadline_ns = 0;
    link_up(c);
    for (;;) {
        int s = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
        if (s == FIRED)
            return RESIL_ECANCELED;
        if (s == ARMED && !__atomic_compare_exchange_n(&c->state, &s, SLEEPING, false,
                                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        if (sleep_on(c, deadline_ns) == ETIMEDOUT)
            return load_fired(c) ? RESIL_ECANCELED : 0;
    }
}
