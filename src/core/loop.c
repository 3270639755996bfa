/*
 * loop.c — what a loop needs to host resil: the clock view of a loop, a
 * timer queue and a post queue.
 *
 * The timer queue is a pairing heap threaded through the timers
 * themselves: starting and stopping a timer never allocate (the timer
 * lives in the execution that owns it), insertion is O(1), and removing
 * the earliest or any armed timer is O(log n) amortised. A sequence number
 * breaks ties so that timers due at the same instant run in the order they
 * were started — which is what makes a virtual-time loop deterministic. A
 * timer may take its number ahead of its start (resil_timers_reserve): a
 * timeout's place is taken as the walk enters it, its arming left until
 * the walk waits, which most walks never do.
 *
 * The post queue is a plain FIFO under a mutex: posting happens once per
 * report from another thread, where a lock costs nothing next to the
 * wake-up the loop needs anyway, and the queue says when it went from empty
 * to non-empty so that a loop wakes itself once per batch.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resil/loop.h"

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_loop_ops, ops, field)

/* ---- the loop's clock ---------------------------------------------------- */

static resil_instant loop_now(resil_clock *c)
{
    resil_loop *l = (resil_loop *)c;
    return l->ops->now(l->self);
}

static int64_t loop_wall_now(resil_clock *c)
{
    (void)c;
    return resil_clock_wall_now(resil_clock_system());
}

static int loop_sleep(resil_clock *c, resil_duration d, resil_cancel *cancel)
{
    (void)c;
    return resil_clock_sleep(resil_clock_system(), d, cancel);
}

int resil_loop_init(resil_loop *l, const resil_loop_ops *ops, void *self)
{
    if (l == NULL || ops == NULL)
        return RESIL_EINVAL;
    if (!OPS_HAS(ops, now) || !OPS_HAS(ops, timer_start) || !OPS_HAS(ops, timer_stop) ||
        !OPS_HAS(ops, post))
        return RESIL_EINVAL;
    memset(l, 0, sizeof *l);
    l->clock.now = loop_now;
    l->clock.wall_now = loop_wall_now;
    l->clock.sleep = loop_sleep;
    l->ops = ops;
    l->self = self;
    return 0;
}

resil_clock *resil_loop_clock(resil_loop *l) { return l != NULL ? &l->clock : NULL; }

/* ---- memory kept for the next execution ------------------------------------------ */

/* A spare block: its first bytes while it waits. The list is LIFO (the
 * block last freed is the one warm in the cache). */
typedef struct spare {
    struct spare *next;
    size_t cap;
    size_t kept; /* blocks in the list from here down */
} spare;

/* Blocks kept: enough for a loop running a thousand executions at once
 * (a few hundred bytes to a few kilobytes each) to allocate none once
 * warm; an execution beyond them frees its block when it ends. */
#define SPARE_MAX 1024

void *resil__loop_take(resil_loop *l, size_t need, size_t *cap, bool *spared)
{
    spare *s = l->spare_;
    if (s == NULL || s->cap < need) {
        *cap = need < sizeof(spare) ? sizeof(spare) : need;
        *spared = false;
        return malloc(*cap);
    }
    l->spare_ = s->next;
    *cap = s->cap;
    *spared = true;
    return s;
}

void resil__loop_give(resil_loop *l, void *mem, size_t cap)
{
    spare *head = l->spare_;
    size_t kept = head != NULL ? head->kept : 0;
    if (kept >= SPARE_MAX) {
        free(mem);
        return;
    }
    spare *s = mem;
    *s = (spare){head, cap, kept + 1};
    l->spare_ = s;
}

void resil_loop_drain(resil_loop *l)
{
    if (l == NULL)
        return;
    spare *s = l->spare_;
    l->spare_ = NULL;
    while (s != NULL) {
        spare *next = s->next;
        free(s);
        s = next;
    }
}

/* ---- watching descriptors ------------------------------------------------- */

bool resil_loop_has_io(const resil_loop *l)
{
    return l != NULL && l->ops != NULL && OPS_HAS(l->ops, io_start) && OPS_HAS(l->ops, io_stop);
}

int resil_loop_io_start(resil_loop *l, resil_io *w, int fd, unsigned events)
{
    if (l == NULL || w == NULL || w->fn == NULL || fd < 0 ||
        (events & (RESIL_IO_READ | RESIL_IO_WRITE)) == 0)
        return RESIL_EINVAL;
    if (!resil_loop_has_io(l))
        return RESIL_EUNSUPPORTED;
    return l->ops->io_start(l->self, w, fd, events & (RESIL_IO_READ | RESIL_IO_WRITE));
}

void resil_loop_io_stop(resil_loop *l, resil_io *w)
{
    if (w != NULL && resil_loop_has_io(l))
        l->ops->io_stop(l->self, w);
}

/* ---- the timer queue ------------------------------------------------------ */

static bool sooner(const resil_timer *a, const resil_timer *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

/* Join two heaps (either may be empty); the later root becomes the first
 * child of the sooner one. */
static resil_timer *meld(resil_timer *a, resil_timer *b)
{
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    if (sooner(b, a)) {
        resil_timer *t = a;
        a = b;
        b = t;
    }
    b->prev = a;
    b->next = a->child;
    if (a->child != NULL)
        a->child->prev = b;
    a->child = b;
    return a;
}

/* The children of a removed node, melded pairwise left to right, then
 * right to left: the pass that gives the heap its amortised bound. */
static resil_timer *merge_children(resil_timer *first)
{
    resil_timer *pairs = NULL; /* melded pairs, in reverse order via next */
    while (first != NULL) {
        resil_timer *a = first, *b = a->next;
        first = b != NULL ? b->next : NULL;
        a->next = a->prev = NULL;
        if (b != NULL)
            b->next = b->prev = NULL;
        resil_timer *m = meld(a, b);
        m->next = pairs;
        pairs = m;
    }
    resil_timer *root = NULL;
    while (pairs != NULL) {
        resil_timer *m = pairs;
        pairs = pairs->next;
        m->next = NULL;
        root = meld(root, m);
    }
    return root;
}

void resil_timers_init(resil_timers *q) { memset(q, 0, sizeof *q); }

/* Cut `t` and its subtree out of the heap (t is not the root). */
static void cut(resil_timer *t)
{
    if (t->prev->child == t)
        t->prev->child = t->next;
    else
        t->prev->next = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    t->next = t->prev = NULL;
}

void resil_timers_stop(resil_timers *q, resil_timer *t)
{
    t->reserved = false;
    if (!t->armed)
        return;
    t->armed = false;
    q->count--;
    resil_timer *kids = t->child;
    t->child = NULL;
    if (t == q->root) {
        q->root = merge_children(kids);
        return;
    }
    cut(t);
    q->root = meld(q->root, merge_children(kids));
}

void resil_timers_start(resil_timers *q, resil_timer *t, resil_instant due)
{
    if (t->armed) /* a move; most starts are of an idle timer */
        resil_timers_stop(q, t);
    t->due = due;
    if (!t->reserved)
        t->seq = q->seq++;
    t->reserved = false;
    t->child = t->next = t->prev = NULL;
    t->armed = true;
    q->count++;
    q->root = meld(q->root, t);
}

void resil_timers_reserve(resil_timers *q, resil_timer *t)
{
    if (t->armed) /* a started timer has its place */
        return;
    t->seq = q->seq++;
    t->reserved = true;
}

resil_instant resil_timers_next(const resil_timers *q)
{
    return q->root != NULL ? q->root->due : RESIL_INSTANT_MAX;
}

size_t resil_timers_run(resil_timers *q, resil_instant now)
{
    size_t ran = 0;
    while (q->root != NULL && q->root->due <= now) {
        resil_timer *t = q->root;
        resil_timers_stop(q, t);
        t->fn(t);
        ran++;
    }
    return ran;
}

/* ---- the post queue ---------------------------------------------------------- */

int resil_posts_init(resil_posts *q)
{
    q->head = q->tail = NULL;
    return pthread_mutex_init(&q->mu, NULL) == 0 ? 0 : RESIL_ESYS;
}

void resil_posts_destroy(resil_posts *q) { pthread_mutex_destroy(&q->mu); }

bool resil_posts_push(resil_posts *q, resil_work *w)
{
    w->next = NULL;
    pthread_mutex_lock(&q->mu);
    bool was_empty = q->head == NULL;
    if (was_empty)
        q->head = w;
    else
        q->tail->next = w;
    q->tail = w;
    pthread_mutex_unlock(&q->mu);
    return was_empty;
}

size_t resil_posts_run(resil_posts *q)
{
    pthread_mutex_lock(&q->mu);
    resil_work *w = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    size_t ran = 0;
    while (w != NULL) {
        resil_work *next = w->next;
        w->fn(w);
        w = next;
        ran++;
    }
    return ran;
}
