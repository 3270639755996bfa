/*
 * test_ratelimit_threads.c — rate limiters shared by threads: with virtual
 * time frozen, 16 threads together get exactly the capacity whatever the
 * interleaving; a blocked acquire wakes when the fake clock (manual mode)
 * reaches its retry-after, and a cancel ends it.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "test.h"

#define THREADS 16
#define TRIES 200

typedef struct shared {
    resil_ratelimit *rl;
    _Atomic int64_t admitted, rejected, unexpected;
} shared;

static void *hammer(void *p)
{
    shared *s = p;
    for (int i = 0; i < TRIES; i++) {
        int64_t n = 1 + i % 2;
        resil_duration ra;
        int rc = resil_ratelimit_try_acquire(s->rl, n, &ra);
        if (rc == 0)
            atomic_fetch_add(&s->admitted, n);
        else if (rc == RESIL_EREJECTED && ra > 0)
            atomic_fetch_add(&s->rejected, 1);
        else
            atomic_fetch_add(&s->unexpected, 1);
    }
    return NULL;
}

static void exactly_the_capacity_is_shared_out(resil_ratelimit_kind kind)
{
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, kind);
    o.burst = o.permits = 1001;
    o.clock = resil_fake_clock_clock(fc);
    shared s = {0};
    assert_int_equal(resil_ratelimit_new(&o, &s.rl, NULL), 0);

    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, hammer, &s);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    /* 4800 permits asked for in ones and twos: the limiter hands out 1000
     * or 1001 (a last odd permit can be left when only twos remain). */
    assert_int_equal(atomic_load(&s.unexpected), 0);
    int64_t got = atomic_load(&s.admitted);
    assert_true(got == 1000 || got == 1001);
    assert_int_equal(resil_ratelimit_available(s.rl), 1001 - got);
    resil_ratelimit_free(s.rl);
    resil_fake_clock_free(fc);
}

static void token_bucket_shares_exactly_its_burst_between_threads(void **state)
{
    (void)state;
    exactly_the_capacity_is_shared_out(RESIL_RATELIMIT_TOKEN_BUCKET);
}

static void fixed_window_shares_exactly_its_permits_between_threads(void **state)
{
    (void)state;
    exactly_the_capacity_is_shared_out(RESIL_RATELIMIT_FIXED_WINDOW);
}

static void sliding_window_shares_exactly_its_permits_between_threads(void **state)
{
    (void)state;
    exactly_the_capacity_is_shared_out(RESIL_RATELIMIT_SLIDING_WINDOW);
}

/* ---- blocking acquire on the manual clock ------------------------------- */

typedef struct acquirer {
    resil_ratelimit *rl;
    resil_cancel *cancel;
    int rc;
} acquirer;

static void *acquire_main(void *p)
{
    acquirer *a = p;
    a->rc = resil_ratelimit_acquire(a->rl, 1, a->cancel, 0);
    return NULL;
}

static void blocked_acquire_wakes_when_the_permit_is_earned(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_fake_clock_set_manual(fc, true);
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    o.rate = 4;
    o.burst = 1;
    o.clock = resil_fake_clock_clock(fc);
    resil_ratelimit *rl;
    assert_int_equal(resil_ratelimit_new(&o, &rl, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), 0);

    acquirer a = {.rl = rl};
    pthread_t th;
    pthread_create(&th, NULL, acquire_main, &a);
    resil_fake_clock_await_sleepers(fc, 1);
    assert_duration_equal(resil_fake_clock_sleep_at(fc, 0), RESIL_MS(250));
    resil_fake_clock_advance(fc, RESIL_MS(250) - 1);
    assert_int_equal(resil_fake_clock_sleepers(fc), 1);
    resil_fake_clock_advance(fc, 1);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(resil_ratelimit_available(rl), 0);
    resil_ratelimit_free(rl);
    resil_fake_clock_free(fc);
}

static void cancelling_a_blocked_acquire_ends_it(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_fake_clock_set_manual(fc, true);
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_SLIDING_WINDOW);
    o.permits = 1;
    o.window = RESIL_S(60);
    o.clock = resil_fake_clock_clock(fc);
    resil_ratelimit *rl;
    assert_int_equal(resil_ratelimit_new(&o, &rl, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), 0);

    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    acquirer a = {.rl = rl, .cancel = &c};
    pthread_t th;
    pthread_create(&th, NULL, acquire_main, &a);
    resil_fake_clock_await_sleepers(fc, 1);
    resil_cancel_fire(&c);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, RESIL_ECANCELED);
    resil_cancel_destroy(&c);
    resil_ratelimit_free(rl);
    resil_fake_clock_free(fc);
}

/* ---- the system clock, for the sanitizers ------------------------------- */

static void threads_on_the_system_clock_get_no_more_than_burst_plus_refill(void **state)
{
    (void)state;
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    o.rate = 1;
    o.period = RESIL_S(3600);
    o.burst = 500;
    shared s = {0};
    assert_int_equal(resil_ratelimit_new(&o, &s.rl, NULL), 0);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, hammer, &s);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s.unexpected), 0);
    /* One permit an hour: the test cannot run long enough to earn a second. */
    assert_true(atomic_load(&s.admitted) >= 499 && atomic_load(&s.admitted) <= 501);
    resil_ratelimit_free(s.rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_bucket_shares_exactly_its_burst_between_threads),
        cmocka_unit_test(fixed_window_shares_exactly_its_permits_between_threads),
        cmocka_unit_test(sliding_window_shares_exactly_its_permits_between_threads),
        cmocka_unit_test(blocked_acquire_wakes_when_the_permit_is_earned),
        cmocka_unit_test(cancelling_a_blocked_acquire_ends_it),
        cmocka_unit_test(threads_on_the_system_clock_get_no_more_than_burst_plus_refill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
