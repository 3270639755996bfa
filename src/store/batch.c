/*
 * batch.c — group commit: concurrent key writes share one transaction and
 * one sync.
 *
 * A durable commit costs a sync of the disk (about 200 µs here), whatever
 * it carries, and the key store makes two per guarded request. So the
 * store queues its writes and runs them in batches: the first call of a
 * batch leads it — it waits up to the window for company (or until the
 * batch is full), takes the queue's head, runs those calls as one
 * transaction through the store's runner and hands each member its own
 * result. Nobody learns anything before the commit returned, so nothing
 * is acknowledged before it is durable.
 *
 * There is no writer thread: the leader is always a caller whose own call
 * is the queue's head (a thread arriving at an empty, idle queue, or one
 * handed the lead when the batch before it left), so no call waits for a
 * thread that is not working for it, and a store used by one thread runs
 * exactly as before. While max_running batches run, arrivals queue, and
 * the next leader takes what queued: with a window of 0 a batch is just
 * what piled up during the previous commit, which costs a lone call no
 * latency at all. Each waiter sleeps on a semaphore of its own, so a
 * commit wakes its members, not every thread in the queue, and wakes
 * them without holding the queue's lock.
 *
 * Invariant, under mu: the queue is not empty only while a leader is
 * collecting (or handed the lead) or max_running batches run. It is what
 * lets an arrival that finds neither lead at once: the queue was empty,
 * so it is the head.
 *
 * The SQLite writers' lock lives here too, for the same reason the queue
 * is first come first served: a batch must not wait behind a purge that
 * keeps taking the lock back.
 */
#include <stdlib.h>

#include "resil/cancel.h"
#include "store_internal.h"

struct store_batcher {
    batcher_opts o;
    pthread_mutex_t mu;
    batch_member *head, *tail;
    uint32_t queued;
    unsigned running;
    bool collecting;     /* a leader holds the head (waiting, or handed it) */
    resil_cancel *wake;  /* the waiting leader's token: fired when the batch fills */
    uint64_t batches, calls;
    uint32_t largest;
};

int resil__batcher_new(const batcher_opts *o, store_batcher **out)
{
    store_batcher *b = calloc(1, sizeof *b);
    if (b == NULL)
        return RESIL_ENOMEM;
    b->o = *o;
    if (b->o.max > STORE_MAX_BATCH)
        b->o.max = STORE_MAX_BATCH;
    pthread_mutex_init(&b->mu, NULL);
    *out = b;
    return 0;
}

void resil__batcher_free(store_batcher *b)
{
    if (b == NULL)
        return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Hand the lead to the head of the queue, when one may lead now. */
static void promote(store_batcher *b)
{
    if (b->head == NULL || b->collecting || b->running >= b->o.max_running)
        return;
    b->collecting = true;
    sem_post(&b->head->wake);
}

/* The leader, at the head of the queue: wait out the window unless the
 * batch fills first. Called and returns with mu held. */
static void wait_for_company(store_batcher *b)
{
    if (b->o.window <= 0 || b->queued >= b->o.max)
        return;
    resil_cancel wake;
    if (resil_cancel_init(&wake, NULL) != 0)
        return;
    b->wake = &wake;
    pthread_mutex_unlock(&b->mu);
    resil_clock_sleep(b->o.clock, b->o.window, &wake);
    pthread_mutex_lock(&b->mu);
    b->wake = NULL;
    resil_cancel_destroy(&wake);
}

/* Take up to max calls off the head into batch; returns how many. */
static size_t take(store_batcher *b, batch_member **batch)
{
    size_t n = 0;
    while (b->head != NULL && n < b->o.max) {
        batch[n++] = b->head;
        b->head = b->head->next;
    }
    if (b->head == NULL)
        b->tail = NULL;
    b->queued -= (uint32_t)n;
    b->batches++;
    b->calls += n;
    if (n > b->largest)
        b->largest = (uint32_t)n;
    return n;
}

/* Lead one batch, which carries the leader's own call (it is the head),
 * then wake its other members, and only then hand the lead on. Members
 * are woken without mu held, so that a dozen threads woken at once do
 * not queue on it; each learns that it is done from its semaphore alone,
 * and may be gone the moment it is posted. Waking them before the next
 * leader lets the ones that come straight back (a claim's caller with
 * its next request) join the next batch instead of waiting out a commit:
 * measured, batches stay as full as when members were woken under the
 * lock, where handing the lead on first halved them. */
static void lead(store_batcher *b, batch_member *self)
{
    batch_member *batch[STORE_MAX_BATCH];
    pthread_mutex_lock(&b->mu);
    wait_for_company(b);
    size_t n = take(b, batch);
    b->collecting = false;
    b->running++;
    promote(b); /* another batch may start while this one runs */
    pthread_mutex_unlock(&b->mu);
    b->o.run(b->o.ud, batch, n);
    for (size_t i = 0; i < n; i++)
        batch[i]->done = true;
    for (size_t i = 0; i < n; i++)
        if (batch[i] != self)
            sem_post(&batch[i]->wake);
    pthread_mutex_lock(&b->mu);
    b->running--;
    promote(b);
    pthread_mutex_unlock(&b->mu);
}

int resil__batcher_submit(store_batcher *b, store_call *call, resil_err *err)
{
    batch_member m = {.call = call, .err = err};
    sem_init(&m.wake, 0, 0);
    pthread_mutex_lock(&b->mu);
    if (b->tail != NULL)
        b->tail->next = &m;
    else
        b->head = &m;
    b->tail = &m;
    b->queued++;
    if (b->wake != NULL && b->queued >= b->o.max)
        resil_cancel_fire(b->wake);
    /* The queue was empty and nothing holds the lead: this call is its
     * head, and leads. */
    bool leads = !b->collecting && b->running < b->o.max_running;
    if (leads)
        b->collecting = true;
    pthread_mutex_unlock(&b->mu);
    while (!leads) {
        while (sem_wait(&m.wake) != 0)
            ; /* EINTR */
        if (m.done) {
            sem_destroy(&m.wake);
            return m.rc;
        }
        leads = true; /* not done: handed the lead */
    }
    lead(b, &m);
    sem_destroy(&m.wake);
    return m.rc;
}

void resil__batcher_stats(store_batcher *b, resil_store_batch_stats *out)
{
    pthread_mutex_lock(&b->mu);
    out->batches = b->batches;
    out->calls = b->calls;
    out->largest = b->largest;
    out->queued = b->queued;
    pthread_mutex_unlock(&b->mu);
}

/* ---- the write lock, first come first served --------------------------------- */

void resil__write_lock_init(store_write_lock *l)
{
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->turn, NULL);
    l->next = l->serving = 0;
}

void resil__write_lock_destroy(store_write_lock *l)
{
    pthread_cond_destroy(&l->turn);
    pthread_mutex_destroy(&l->mu);
}

void resil__write_lock(store_write_lock *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t ticket = l->next++;
    while (ticket != l->serving)
        pthread_cond_wait(&l->turn, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

void resil__write_unlock(store_write_lock *l)
{
    pthread_mutex_lock(&l->mu);
    l->serving++;
    pthread_cond_broadcast(&l->turn);
    pthread_mutex_unlock(&l->mu);
}
