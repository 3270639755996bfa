/*
 * test_bulkhead_parking.c — the permits a bulkhead parks in its callers'
 * stripes (bulkhead.c): a permit one thread parked serves another thread
 * and a waiter, never a newcomer past a waiter; the bound counts parked
 * permits as taken; in-flight and the counters count each call once; and
 * many threads (more than there are stripes) parking and taking back
 * never exceed the bound. Run under TSan with the rest of the suite.
 *
 * Each helper thread does one step when told and says when it is done, so
 * that which thread parked what is known; nothing sleeps.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "test.h"

static resil_bulkhead *make(int32_t max_concurrency, int32_t max_queue)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = max_concurrency;
    o.max_queue = max_queue;
    resil_bulkhead *b = NULL;
    assert_int_equal(resil_bulkhead_new(&o, &b, NULL), 0);
    return b;
}

static void await_queued(resil_bulkhead *b, int32_t n)
{
    while (resil_bulkhead_queued(b) != n)
        sched_yield();
}

/* ---- a thread that does what it is told, one step at a time -------------- */

typedef enum { STEP_NONE, STEP_ACQUIRE, STEP_TRY, STEP_RELEASE, STEP_QUIT } step;

typedef struct worker {
    resil_bulkhead *b;
    _Atomic int order; /* a step to do, STEP_NONE once done */
    int rc;
    resil_bulkhead_ticket t;
    pthread_t thread;
} worker;

static void *worker_main(void *p)
{
    worker *w = p;
    for (;;) {
        int s;
        while ((s = atomic_load(&w->order)) == STEP_NONE)
            sched_yield();
        if (s == STEP_QUIT)
            return NULL;
        if (s == STEP_ACQUIRE)
            w->rc = resil_bulkhead_acquire(w->b, NULL, &w->t);
        else if (s == STEP_TRY)
            w->rc = resil_bulkhead_try_acquire(w->b, &w->t);
        else
            resil_bulkhead_release(&w->t);
        atomic_store(&w->order, STEP_NONE);
    }
}

static void start(worker *w, resil_bulkhead *b)
{
    *w = (worker){.b = b};
    atomic_init(&w->order, STEP_NONE);
    pthread_create(&w->thread, NULL, worker_main, w);
}

static void order(worker *w, step s) { atomic_store(&w->order, s); }

static void await_done(worker *w)
{
    while (atomic_load(&w->order) != STEP_NONE)
        sched_yield();
}

/* Do `s` and wait until it is done; the step's return code. */
static int run(worker *w, step s)
{
    order(w, s);
    await_done(w);
    return w->rc;
}

static void stop(worker *w)
{
    order(w, STEP_QUIT);
    pthread_join(w->thread, NULL);
}

/* ---- one permit, several threads ------------------------------------------ */

static void a_permit_parked_by_one_thread_is_taken_by_another(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 0);
    worker a;
    start(&a, b);
    assert_int_equal(run(&a, STEP_TRY), 0);
    run(&a, STEP_RELEASE); /* parked in a's stripe */
    assert_int_equal(resil_bulkhead_in_flight(b), 0);

    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), 0);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    assert_int_equal(run(&a, STEP_TRY), RESIL_EREJECTED);
    resil_bulkhead_release(&t);
    stop(&a);
    resil_bulkhead_free(b);
}

static void an_acquire_takes_a_parked_permit_instead_of_queueing(void **state)
{
    (void)state;
    resil_bulkhead *b = make(2, 4);
    worker a;
    start(&a, b);
    assert_int_equal(run(&a, STEP_ACQUIRE), 0);
    run(&a, STEP_RELEASE);
    resil_bulkhead_ticket mine = {0}, second = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &mine), 0);
    /* One permit in flight, one parked by a: the second acquire takes the
     * parked one at once. */
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &second), 0);
    assert_duration_equal(second.queued, 0);
    assert_int_equal(resil_bulkhead_in_flight(b), 2);
    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(b, &s);
    assert_int_equal(s.admitted, 3);
    assert_int_equal(s.queued, 0);
    resil_bulkhead_release(&second);
    resil_bulkhead_release(&mine);
    stop(&a);
    resil_bulkhead_free(b);
}

static void a_release_under_a_waiter_hands_the_permit_over_instead_of_parking(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 4);
    worker a, waiter;
    start(&a, b);
    start(&waiter, b);
    assert_int_equal(run(&a, STEP_ACQUIRE), 0);
    order(&waiter, STEP_ACQUIRE);
    await_queued(b, 1);

    run(&a, STEP_RELEASE);
    await_done(&waiter);
    assert_int_equal(waiter.rc, 0);
    /* a's own next call finds nothing parked: the permit is the waiter's. */
    assert_int_equal(run(&a, STEP_TRY), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);

    run(&waiter, STEP_RELEASE); /* nobody waits now: parked in its stripe */
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    assert_int_equal(run(&a, STEP_TRY), 0);
    run(&a, STEP_RELEASE);

    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(b, &s);
    assert_int_equal(s.admitted, 3);
    assert_int_equal(s.queued, 1);
    assert_int_equal(s.rejected, 1);
    stop(&a);
    stop(&waiter);
    resil_bulkhead_free(b);
}

static void a_permit_parked_by_one_thread_reaches_a_waiter_through_another(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 4);
    worker a, waiter;
    start(&a, b);
    start(&waiter, b);
    assert_int_equal(run(&a, STEP_ACQUIRE), 0);
    run(&a, STEP_RELEASE); /* parked in a's stripe */
    resil_bulkhead_ticket mine = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &mine), 0); /* swept from a */

    order(&waiter, STEP_ACQUIRE);
    await_queued(b, 1);
    assert_int_equal(run(&a, STEP_TRY), RESIL_EREJECTED);
    resil_bulkhead_release(&mine);
    await_done(&waiter);
    assert_int_equal(waiter.rc, 0);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    assert_int_equal(resil_bulkhead_try_acquire(b, &mine), RESIL_EREJECTED);
    run(&waiter, STEP_RELEASE);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    assert_int_equal(resil_bulkhead_queued(b), 0);

    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(b, &s);
    assert_int_equal(s.admitted, 3);
    assert_int_equal(s.queued, 1);
    assert_int_equal(s.rejected, 2);
    stop(&a);
    stop(&waiter);
    resil_bulkhead_free(b);
}

/* ---- counting ---------------------------------------------------------------- */

static void stats_count_a_parked_and_retaken_permit_once_per_call(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 0);
    for (int i = 0; i < 5; i++) {
        resil_bulkhead_ticket t = {0};
        assert_int_equal(i % 2 ? resil_bulkhead_try_acquire(b, &t)
                               : resil_bulkhead_acquire(b, NULL, &t),
                         0);
        assert_int_equal(resil_bulkhead_in_flight(b), 1);
        resil_bulkhead_release(&t);
        assert_int_equal(resil_bulkhead_in_flight(b), 0);
    }
    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(b, &s);
    assert_int_equal(s.admitted, 5);
    assert_int_equal(s.queued, 0);
    assert_int_equal(s.rejected, 0);
    resil_bulkhead_free(b);
}

/* ---- the bound, with more threads than stripes ----------------------------------- */

#define MANY_THREADS 80
#define MANY_ROUNDS 500

typedef struct crowd {
    resil_bulkhead *b;
    _Atomic int running, peak;
    _Atomic uint64_t admitted, rejected, unexpected;
} crowd;

static void *crowd_main(void *p)
{
    crowd *c = p;
    for (int i = 0; i < MANY_ROUNDS; i++) {
        resil_bulkhead_ticket t = {0};
        int rc = i % 2 ? resil_bulkhead_try_acquire(c->b, &t)
                       : resil_bulkhead_acquire(c->b, NULL, &t);
        if (rc != 0) {
            atomic_fetch_add(rc == RESIL_EREJECTED ? &c->rejected : &c->unexpected, 1);
            continue;
        }
        int now = atomic_fetch_add(&c->running, 1) + 1;
        int peak = atomic_load(&c->peak);
        while (now > peak && !atomic_compare_exchange_weak(&c->peak, &peak, now))
            ;
        if (i % 5 == 0)
            sched_yield();
        atomic_fetch_sub(&c->running, 1);
        atomic_fetch_add(&c->admitted, 1);
        resil_bulkhead_release(&t);
    }
    return NULL;
}

static void threads_sharing_stripes_never_exceed_the_bound_and_are_counted_once(void **state)
{
    (void)state;
    crowd c = {.b = make(3, MANY_THREADS)};
    pthread_t threads[MANY_THREADS];
    for (int i = 0; i < MANY_THREADS; i++)
        pthread_create(&threads[i], NULL, crowd_main, &c);
    for (int i = 0; i < MANY_THREADS; i++)
        pthread_join(threads[i], NULL);

    assert_int_equal(atomic_load(&c.unexpected), 0);
    assert_in_range(atomic_load(&c.peak), 1, 3);
    assert_int_equal(atomic_load(&c.admitted) + atomic_load(&c.rejected),
                     (uint64_t)MANY_THREADS * MANY_ROUNDS);
    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(c.b, &s);
    assert_int_equal(s.admitted, atomic_load(&c.admitted));
    assert_int_equal(s.rejected, atomic_load(&c.rejected));
    assert_int_equal(resil_bulkhead_in_flight(c.b), 0);
    assert_int_equal(resil_bulkhead_queued(c.b), 0);
    resil_bulkhead_free(c.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_permit_parked_by_one_thread_is_taken_by_another),
        cmocka_unit_test(an_acquire_takes_a_parked_permit_instead_of_queueing),
        cmocka_unit_test(a_release_under_a_waiter_hands_the_permit_over_instead_of_parking),
        cmocka_unit_test(a_permit_parked_by_one_thread_reaches_a_waiter_through_another),
        cmocka_unit_test(stats_count_a_parked_and_retaken_permit_once_per_call),
        cmocka_unit_test(threads_sharing_stripes_never_exceed_the_bound_and_are_counted_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
