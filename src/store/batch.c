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
 * A member may also be asynchronous (an event loop's call that must not
 * block): it lives on the heap, nobody waits on its semaphore, and once
 * its batch ran the thread that ran it calls the runner's `finish` for
 * it. Such a member cannot lead, so when one is the head and may lead,
 * the lead goes to one of the store's writer threads, started on the
 * first asynchronous call, which lead exactly as a blocking caller
 * would (the window, max, max_running). Both kinds share the one queue
 * and may share a batch. A writer is needed for each batch that may run
 * at once, so there are max_running of them.
 *
 * Nothing here writes by itself: the runner decides what a batch does.
 * The store keeps a second batcher whose runner reads (the asynchronous
 * begins' read before their claim), so reads queue, batch and hand their
 * callers back by the same rules.
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
    uint64_t arrivals;   /* calls ever queued */
    /* the writer threads, for asynchronous members */
    sem_t writer_wake;   /* posted once per lead handed to a writer, and to stop */
    unsigned writer_leads; /* leads handed to writers and not yet taken */
    unsigned n_writers;
    pthread_t writers[STORE_MAX_RUNNING];
    bool closing;
};

int resil__batcher_new(const batcher_opts *o, store_batcher **out)
{
    store_batcher *b = calloc(1, sizeof *b);
    if (b == NULL)
        return RESIL_ENOMEM;
    b->o = *o;
    if (b->o.max > STORE_MAX_BATCH)
        b->o.max = STORE_MAX_BATCH;
    if (b->o.max_running > STORE_MAX_RUNNING)
        b->o.max_running = STORE_MAX_RUNNING;
    pthread_mutex_init(&b->mu, NULL);
    sem_init(&b->writer_wake, 0, 0);
    *out = b;
    return 0;
}

/* Hand the lead to a member: a blocking one leads on its own thread, an
 * asynchronous one through a writer. */
static void hand_lead(store_batcher *b, batch_member *m)
{
    if (!m->async) {
        sem_post(&m->wake);
        return;
    }
    b->writer_leads++;
    sem_post(&b->writer_wake);
}

/* Hand the lead to the head of the queue, when one may lead now. */
static void promote(store_batcher *b)
{
    if (b->head == NULL || b->collecting || b->running >= b->o.max_running)
        return;
    b->collecting = true;
    hand_lead(b, b->head);
}

/* The leader, at the head of the queue: wait out the window unless the
 * batch fills first. Called and returns with mu held. */
static void wait_for_company(store_batcher *b)
{
    if (b->o.window <= 0 || b->queued >= b->o.max || b->closing)
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
    if (n == 0)
        return 0; /* the store is being freed: its queue was failed */
    b->batches++;
    b->calls += n;
    if (n > b->largest)
        b->largest = (uint32_t)n;
    return n;
}

/* Lead one batch, which carries the leader's own call (it is the head;
 * a writer leads with self NULL), then wake its blocking members, and
 * only then hand the lead on. Members are woken without mu held, so that
 * a dozen threads woken at once do not queue on it; each learns that it
 * is done from its semaphore alone, and may be gone the moment it is
 * posted. Waking them before the next leader lets the ones that come
 * straight back (a claim's caller with its next request) join the next
 * batch instead of waiting out a commit: measured, batches stay as full
 * as when members were woken under the lock, where handing the lead on
 * first halved them. The asynchronous members are finished last, after
 * the hand-off, so that their follow-up work (a call run alone, a
 * journaled completion, the callback) never holds up the next batch. */
static void lead(store_batcher *b, batch_member *self)
{
    batch_member *batch[STORE_MAX_BATCH], *later[STORE_MAX_BATCH];
    size_t n_later = 0;
    pthread_mutex_lock(&b->mu);
    wait_for_company(b);
    size_t n = take(b, batch);
    b->collecting = false;
    b->running++;
    promote(b); /* another batch may start while this one runs */
    pthread_mutex_unlock(&b->mu);
    if (n > 0)
        b->o.run(b->o.ud, batch, n);
    for (size_t i = 0; i < n; i++) {
        if (batch[i]->async)
            later[n_later++] = batch[i];
        batch[i]->done = true;
    }
    for (size_t i = 0; i < n; i++)
        if (batch[i] != self && !batch[i]->async)
            sem_post(&batch[i]->wake);
    pthread_mutex_lock(&b->mu);
    b->running--;
    promote(b);
    pthread_mutex_unlock(&b->mu);
    for (size_t i = 0; i < n_later; i++)
        b->o.finish(b->o.ud, later[i]);
}

/* A writer: lead each batch handed to it, until the batcher closes. */
static void *writer_main(void *arg)
{
    store_batcher *b = arg;
    for (;;) {
        while (sem_wait(&b->writer_wake) != 0)
            ; /* EINTR */
        pthread_mutex_lock(&b->mu);
        bool leads = b->writer_leads > 0;
        if (leads)
            b->writer_leads--;
        bool stop = !leads && b->closing;
        pthread_mutex_unlock(&b->mu);
        if (stop)
            return NULL;
        if (leads)
            lead(b, NULL);
    }
}

/* Start the writers on the first asynchronous call. Under mu. */
static int start_writers(store_batcher *b)
{
    while (b->n_writers < b->o.max_running) {
        if (pthread_create(&b->writers[b->n_writers], NULL, writer_main, b) != 0)
            return b->n_writers > 0 ? 0 : RESIL_ENOMEM;
        b->n_writers++;
    }
    return 0;
}

/* Queue m; true when nothing holds the lead, so m's call is the head and
 * its batch may start now. Under mu. */
static bool enqueue(store_batcher *b, batch_member *m)
{
    if (b->tail != NULL)
        b->tail->next = m;
    else
        b->head = m;
    b->tail = m;
    b->queued++;
    b->arrivals++;
    if (b->wake != NULL && b->queued >= b->o.max)
        resil_cancel_fire(b->wake);
    bool leads = !b->collecting && b->running < b->o.max_running;
    if (leads)
        b->collecting = true;
    return leads;
}

int resil__batcher_submit_async(store_batcher *b, batch_member *m)
{
    m->async = true;
    m->done = false;
    m->next = NULL;
    pthread_mutex_lock(&b->mu);
    int rc = b->closing ? RESIL_ESTATE : start_writers(b);
    if (rc == 0 && enqueue(b, m))
        hand_lead(b, m);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Fail every queued member (asynchronous ones, by then: the store is
 * being freed, so no blocking call may be in it), let the batches that
 * run finish, and join the writers. */
void resil__batcher_free(store_batcher *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    b->closing = true;
    batch_member *m = b->head;
    b->head = b->tail = NULL;
    b->queued = 0;
    if (b->wake != NULL)
        resil_cancel_fire(b->wake);
    for (unsigned i = 0; i < b->n_writers; i++)
        sem_post(&b->writer_wake);
    pthread_mutex_unlock(&b->mu);
    while (m != NULL) {
        batch_member *next = m->next;
        m->rc = resil_err_set(m->err, RESIL_ECANCELED,
                              "store: the store was freed before the call's batch ran");
        b->o.finish(b->o.ud, m);
        m = next;
    }
    for (unsigned i = 0; i < b->n_writers; i++)
        pthread_join(b->writers[i], NULL);
    sem_destroy(&b->writer_wake);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

int resil__batcher_submit(store_batcher *b, store_call *call, resil_err *err)
{
    batch_member m = {.call = call, .err = err};
    sem_init(&m.wake, 0, 0);
    pthread_mutex_lock(&b->mu);
    /* The queue was empty and nothing holds the lead: this call is its
     * head, and leads. */
    bool leads = enqueue(b, &m);
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

uint64_t resil__batcher_arrivals(store_batcher *b, bool *busy)
{
    pthread_mutex_lock(&b->mu);
    if (busy != NULL)
        *busy = b->head != NULL || b->running > 0;
    uint64_t n = b->arrivals;
    pthread_mutex_unlock(&b->mu);
    return n;
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
