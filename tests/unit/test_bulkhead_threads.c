/*
 * test_bulkhead_threads.c — the bulkhead with real threads: FIFO admission
 * proven by queueing waiters in a known order, direct hand-over (no
 * barging), no eviction, cancellation and timeouts of queued waiters on the
 * fake clock in manual mode, and 16 threads that never exceed the bound.
 *
 * Ordering is established by waiting until the bulkhead reports the
 * expected queue length (or the fake clock the expected sleepers) before
 * the next step, never by sleeping.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "test.h"

static void await_queued(resil_bulkhead *b, int32_t n)
{
    while (resil_bulkhead_queued(b) != n)
        sched_yield();
}

typedef struct waiter_arg {
    resil_bulkhead *b;
    resil_cancel *cancel;
    int id;
    int rc;
    resil_bulkhead_ticket ticket;
    bool keep; /* hold the permit after admission (the test releases it) */
    int *order;
    _Atomic int *next_slot;
} waiter_arg;

static void *waiter_main(void *p)
{
    waiter_arg *a = p;
    a->rc = resil_bulkhead_acquire(a->b, a->cancel, &a->ticket);
    if (a->rc == 0 && a->order != NULL)
        a->order[atomic_fetch_add(a->next_slot, 1)] = a->id;
    if (a->rc == 0 && !a->keep)
        resil_bulkhead_release(&a->ticket);
    return NULL;
}

static resil_bulkhead *make(int32_t max_concurrency, int32_t max_queue, resil_duration timeout,
                            resil_clock *clock)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = max_concurrency;
    o.max_queue = max_queue;
    o.queue_timeout = timeout;
    o.clock = clock;
    resil_bulkhead *b = NULL;
    assert_int_equal(resil_bulkhead_new(&o, &b, NULL), 0);
    return b;
}

/* ---- FIFO --------------------------------------------------------------- */

#define FIFO_WAITERS 16

static void waiters_are_admitted_in_the_order_they_queued(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, FIFO_WAITERS, 0, NULL);
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);

    int order[FIFO_WAITERS];
    _Atomic int next_slot = 0;
    waiter_arg args[FIFO_WAITERS];
    pthread_t threads[FIFO_WAITERS];
    for (int i = 0; i < FIFO_WAITERS; i++) {
        args[i] = (waiter_arg){.b = b, .id = i, .order = order, .next_slot = &next_slot};
        pthread_create(&threads[i], NULL, waiter_main, &args[i]);
        await_queued(b, i + 1); /* i is in line before i + 1 starts */
    }
    resil_bulkhead_release(&held);
    for (int i = 0; i < FIFO_WAITERS; i++)
        pthread_join(threads[i], NULL);

    for (int i = 0; i < FIFO_WAITERS; i++) {
        assert_int_equal(args[i].rc, 0);
        assert_int_equal(order[i], i);
    }
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    resil_bulkhead_free(b);
}

static void release_hands_the_permit_to_the_waiter_not_to_a_newcomer(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 4, 0, NULL);
    resil_bulkhead_ticket held = {0}, newcomer = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    waiter_arg a = {.b = b, .keep = true};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    await_queued(b, 1);

    resil_bulkhead_release(&held);
    /* The permit moved to the waiter inside release: still one in flight,
     * nobody queued, and a newcomer finds nothing free. */
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    assert_int_equal(resil_bulkhead_try_acquire(b, &newcomer), RESIL_EREJECTED);

    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    resil_bulkhead_release(&a.ticket);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    resil_bulkhead_free(b);
}

static void try_acquire_does_not_jump_the_queue(void **state)
{
    (void)state;
    resil_bulkhead *b = make(2, 4, 0, NULL);
    resil_bulkhead_ticket h1 = {0}, h2 = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &h1), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &h2), 0);
    waiter_arg a = {.b = b, .keep = true};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    await_queued(b, 1);
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), RESIL_EREJECTED);
    resil_bulkhead_release(&h1);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    resil_bulkhead_release(&a.ticket);
    resil_bulkhead_release(&h2);
    resil_bulkhead_free(b);
}

static void a_full_queue_rejects_the_newcomer_and_keeps_the_waiter(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 1, 0, NULL);
    resil_bulkhead_ticket held = {0}, newcomer = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    waiter_arg a = {.b = b, .keep = true};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    await_queued(b, 1);

    assert_int_equal(resil_bulkhead_acquire(b, NULL, &newcomer), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_queued(b), 1);

    resil_bulkhead_release(&held);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    resil_bulkhead_release(&a.ticket);
    resil_bulkhead_free(b);
}

/* ---- cancellation and timeouts of queued waiters ------------------------ */

static void firing_the_token_ends_a_queued_wait_with_cancelled(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 2, 0, NULL);
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    waiter_arg a = {.b = b, .cancel = &c};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    await_queued(b, 1);

    resil_cancel_fire(&c);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, RESIL_ECANCELED);
    assert_null(a.ticket.owner);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(b, &s);
    assert_int_equal(s.cancelled, 1);
    resil_bulkhead_release(&held);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    resil_cancel_destroy(&c);
    resil_bulkhead_free(b);
}

static void a_cancelled_waiter_leaves_its_place_to_the_next(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 2, 0, NULL);
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    waiter_arg first = {.b = b, .cancel = &c}, second = {.b = b, .keep = true};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, waiter_main, &first);
    await_queued(b, 1);
    pthread_create(&t2, NULL, waiter_main, &second);
    await_queued(b, 2);

    resil_cancel_fire(&c);
    pthread_join(t1, NULL);
    await_queued(b, 1);
    resil_bulkhead_release(&held);
    pthread_join(t2, NULL);
    assert_int_equal(first.rc, RESIL_ECANCELED);
    assert_int_equal(second.rc, 0);
    resil_bulkhead_release(&second.ticket);
    resil_cancel_destroy(&c);
    resil_bulkhead_free(b);
}

static void queued_wait_on_the_manual_clock_times_out_only_at_its_deadline(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_fake_clock_set_manual(fc, true);
    resil_bulkhead *b = make(1, 1, RESIL_S(5), resil_fake_clock_clock(fc));
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    waiter_arg a = {.b = b};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    resil_fake_clock_await_sleepers(fc, 1);

    resil_fake_clock_advance(fc, RESIL_S(5) - 1);
    assert_int_equal(resil_fake_clock_sleepers(fc), 1);
    assert_int_equal(resil_bulkhead_queued(b), 1);
    resil_fake_clock_advance(fc, 1);
    pthread_join(th, NULL);

    assert_int_equal(a.rc, RESIL_ETIMEDOUT);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    assert_duration_equal(resil_fake_clock_sleep_at(fc, 0), RESIL_S(5));
    resil_bulkhead_release(&held);
    resil_bulkhead_free(b);
    resil_fake_clock_free(fc);
}

static void firing_the_token_ends_a_timed_wait_on_the_manual_clock(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_fake_clock_set_manual(fc, true);
    resil_bulkhead *b = make(1, 1, RESIL_S(5), resil_fake_clock_clock(fc));
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    waiter_arg a = {.b = b, .cancel = &c};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    resil_fake_clock_await_sleepers(fc, 1);
    resil_cancel_fire(&c);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, RESIL_ECANCELED);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    assert_duration_equal(resil_fake_clock_now(fc), 0);
    resil_bulkhead_release(&held);
    resil_cancel_destroy(&c);
    resil_bulkhead_free(b);
    resil_fake_clock_free(fc);
}

static void a_timed_waiter_granted_before_its_deadline_reports_its_queueing(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_fake_clock_set_manual(fc, true);
    resil_bulkhead *b = make(1, 1, RESIL_S(5), resil_fake_clock_clock(fc));
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    waiter_arg a = {.b = b, .keep = true};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    resil_fake_clock_await_sleepers(fc, 1);

    resil_fake_clock_advance(fc, RESIL_S(2));
    resil_bulkhead_release(&held);
    pthread_join(th, NULL);

    assert_int_equal(a.rc, 0);
    assert_duration_equal(a.ticket.queued, RESIL_S(2));
    resil_bulkhead_release(&a.ticket);
    resil_bulkhead_free(b);
    resil_fake_clock_free(fc);
}

static void a_timed_waiter_on_the_system_clock_is_woken_by_release(void **state)
{
    (void)state;
    resil_bulkhead *b = make(1, 1, RESIL_S(60), NULL);
    resil_bulkhead_ticket held = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    waiter_arg a = {.b = b};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &a);
    await_queued(b, 1);
    resil_bulkhead_release(&held);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    resil_bulkhead_free(b);
}

/* ---- the bound under contention ----------------------------------------- */

#define STRESS_THREADS 16
#define STRESS_ROUNDS 2000

typedef struct stress {
    resil_bulkhead *b;
    int32_t max;
    _Atomic int running, peak;
    _Atomic uint64_t admitted, rejected, unexpected;
} stress;

static void note_peak(stress *s, int now)
{
    int peak = atomic_load(&s->peak);
    while (now > peak && !atomic_compare_exchange_weak(&s->peak, &peak, now))
        ;
}

static void *stress_main(void *p)
{
    stress *s = p;
    for (int i = 0; i < STRESS_ROUNDS; i++) {
        resil_bulkhead_ticket t = {0};
        int rc = (i % 3 == 0) ? resil_bulkhead_try_acquire(s->b, &t)
                              : resil_bulkhead_acquire(s->b, NULL, &t);
        if (rc != 0) { /* cmocka asserts only on the test's own thread */
            atomic_fetch_add(rc == RESIL_EREJECTED ? &s->rejected : &s->unexpected, 1);
            continue;
        }
        note_peak(s, atomic_fetch_add(&s->running, 1) + 1);
        if (i % 7 == 0)
            sched_yield();
        atomic_fetch_sub(&s->running, 1);
        atomic_fetch_add(&s->admitted, 1);
        resil_bulkhead_release(&t);
    }
    return NULL;
}

static void run_stress(int32_t max, int32_t queue)
{
    stress s = {.b = make(max, queue, 0, NULL), .max = max};
    pthread_t threads[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_create(&threads[i], NULL, stress_main, &s);
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(threads[i], NULL);

    assert_int_equal(atomic_load(&s.unexpected), 0);
    assert_true(atomic_load(&s.peak) <= max);
    assert_true(atomic_load(&s.peak) >= 1);
    assert_int_equal(atomic_load(&s.admitted) + atomic_load(&s.rejected),
                     (uint64_t)STRESS_THREADS * STRESS_ROUNDS);
    resil_bulkhead_stats st;
    resil_bulkhead_stats_get(s.b, &st);
    assert_int_equal(st.admitted, atomic_load(&s.admitted));
    assert_int_equal(st.rejected, atomic_load(&s.rejected));
    assert_int_equal(resil_bulkhead_in_flight(s.b), 0);
    assert_int_equal(resil_bulkhead_queued(s.b), 0);
    resil_bulkhead_free(s.b);
}

static void sixteen_threads_never_exceed_max_concurrency_with_room_to_queue(void **state)
{
    (void)state;
    run_stress(3, STRESS_THREADS);
}

static void sixteen_threads_never_exceed_max_concurrency_with_a_short_queue(void **state)
{
    (void)state;
    run_stress(2, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(waiters_are_admitted_in_the_order_they_queued),
        cmocka_unit_test(release_hands_the_permit_to_the_waiter_not_to_a_newcomer),
        cmocka_unit_test(try_acquire_does_not_jump_the_queue),
        cmocka_unit_test(a_full_queue_rejects_the_newcomer_and_keeps_the_waiter),
        cmocka_unit_test(firing_the_token_ends_a_queued_wait_with_cancelled),
        cmocka_unit_test(a_cancelled_waiter_leaves_its_place_to_the_next),
        cmocka_unit_test(queued_wait_on_the_manual_clock_times_out_only_at_its_deadline),
        cmocka_unit_test(firing_the_token_ends_a_timed_wait_on_the_manual_clock),
        cmocka_unit_test(a_timed_waiter_granted_before_its_deadline_reports_its_queueing),
        cmocka_unit_test(a_timed_waiter_on_the_system_clock_is_woken_by_release),
        cmocka_unit_test(sixteen_threads_never_exceed_max_concurrency_with_room_to_queue),
        cmocka_unit_test(sixteen_threads_never_exceed_max_concurrency_with_a_short_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
