/*
 * test_clock.c — the system clock: monotonic now, wall time, and sleeps
 * that end at once when their token fires. No assertion here is about how
 * long anything took; only about what a sleep returned and that time moved.
 */
#include <pthread.h>
#include <time.h>

#include "test.h"

#include "../../src/core/internal.h"

static void system_clock_is_a_singleton(void **state)
{
    (void)state;
    assert_non_null(resil_clock_system());
    assert_ptr_equal(resil_clock_system(), resil_clock_system());
}

/* A span the coarse clock resolves 100 times over gets it; one it cannot
 * gets the precise system clock. */
static void a_coarse_clock_only_where_its_resolution_suffices(void **state)
{
    (void)state;
    assert_ptr_equal(resil__clock_for(RESIL_US(1)), resil_clock_system());
    resil_clock *c = resil__clock_for(RESIL_S(10));
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec res;
    assert_int_equal(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
    resil_duration r = (resil_duration)res.tv_sec * 1000000000 + res.tv_nsec;
    assert_true(r <= RESIL_MS(100)); /* a tick of at most 100 ms: 1 % of 10 s */
    assert_ptr_not_equal(c, resil_clock_system());
    /* the same monotonic time: never ahead, about a tick behind (two
     * allowed, for a tick the kernel delivered late) */
    resil_instant before = resil_clock_now(resil_clock_system());
    resil_instant coarse = resil_clock_now(c);
    resil_instant after = resil_clock_now(resil_clock_system());
    assert_true(coarse <= after);
    assert_true(coarse >= before - 2 * r);
#else
    assert_ptr_equal(c, resil_clock_system());
#endif
}

/* The coarse clock a caller may give a pipeline is the one a breaker picks
 * for itself, and both it and the system clock are read without their
 * table's call (resil__clock_id); any other clock goes through its table. */
static void the_coarse_clock_is_the_one_breakers_pick_and_is_read_directly(void **state)
{
    (void)state;
    assert_int_equal(resil__clock_id(resil_clock_system()), CLOCK_MONOTONIC);
    assert_int_not_equal(resil__clock_id(resil_clock_coarse()), RESIL__CLOCK_OTHER);
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    assert_int_equal(resil__clock_id(resil_fake_clock_clock(fc)), RESIL__CLOCK_OTHER);
    resil_fake_clock_free(fc);
#ifdef CLOCK_MONOTONIC_COARSE
    assert_int_equal(resil__clock_id(resil_clock_coarse()), CLOCK_MONOTONIC_COARSE);
    assert_ptr_equal(resil_clock_coarse(), resil__clock_for(RESIL_S(10)));
    /* the system clock's monotonic time, never ahead of it */
    resil_instant coarse = resil_clock_now(resil_clock_coarse());
    resil_instant after = resil_clock_now(resil_clock_system());
    assert_true(coarse <= after);
    assert_true(coarse > 0);
#else
    assert_ptr_equal(resil_clock_coarse(), resil_clock_system());
#endif
}

static void now_never_goes_backwards(void **state)
{
    (void)state;
    resil_clock *c = resil_clock_system();
    resil_instant prev = resil_clock_now(c);
    for (int i = 0; i < 1000; i++) {
        resil_instant t = resil_clock_now(c);
        assert_true(t >= prev);
        prev = t;
    }
}

static void wall_now_is_unix_time_in_ns(void **state)
{
    (void)state;
    int64_t wall = resil_clock_wall_now(resil_clock_system());
    int64_t secs = (int64_t)time(NULL);
    /* Same second give or take one, expressed in ns. */
    assert_true(wall / 1000000000 >= secs - 1);
    assert_true(wall / 1000000000 <= secs + 1);
}

static void zero_sleep_returns_at_once(void **state)
{
    (void)state;
    assert_int_equal(resil_clock_sleep(resil_clock_system(), 0, NULL), 0);
}

static void negative_sleep_returns_at_once(void **state)
{
    (void)state;
    assert_int_equal(resil_clock_sleep(resil_clock_system(), RESIL_S(-5), NULL), 0);
}

static void zero_sleep_on_fired_token_is_canceled(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_clock_sleep(resil_clock_system(), 0, &c), RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void sleep_on_fired_token_is_canceled(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_clock_sleep(resil_clock_system(), RESIL_S(3600), &c),
                     RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void short_sleep_lasts_at_least_its_duration(void **state)
{
    (void)state;
    resil_clock *c = resil_clock_system();
    resil_instant start = resil_clock_now(c);
    assert_int_equal(resil_clock_sleep(c, RESIL_MS(1), NULL), 0);
    assert_true(resil_clock_now(c) - start >= RESIL_MS(1));
}

static void short_sleep_with_unfired_token_returns_zero(void **state)
{
    (void)state;
    resil_clock *c = resil_clock_system();
    resil_cancel tok;
    resil_cancel_init(&tok, NULL);
    resil_instant start = resil_clock_now(c);
    assert_int_equal(resil_clock_sleep(c, RESIL_MS(1), &tok), 0);
    assert_true(resil_clock_now(c) - start >= RESIL_MS(1));
    resil_cancel_destroy(&tok);
}

static void huge_sleep_deadline_saturates_and_still_cancels(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_clock_sleep(resil_clock_system(), RESIL_DURATION_MAX, &c),
                     RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

typedef struct sleeper_arg {
    resil_cancel *token;
    int rc;
} sleeper_arg;

static void *sleep_an_hour(void *p)
{
    sleeper_arg *a = p;
    a->rc = resil_clock_sleep(resil_clock_system(), RESIL_S(3600), a->token);
    return NULL;
}

static void fire_from_another_thread_ends_an_hour_long_sleep(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    sleeper_arg a = {&c, 1};
    pthread_t t;
    pthread_create(&t, NULL, sleep_an_hour, &a);
    resil_cancel_fire(&c);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void parent_fire_ends_sleeps_on_children_in_many_threads(void **state)
{
    (void)state;
    enum { N = 6 };
    resil_cancel root, child[N];
    resil_cancel_init(&root, NULL);
    sleeper_arg a[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        resil_cancel_init(&child[i], &root);
        a[i].token = &child[i];
        a[i].rc = 1;
        pthread_create(&t[i], NULL, sleep_an_hour, &a[i]);
    }
    resil_cancel_fire(&root);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].rc, RESIL_ECANCELED);
        resil_cancel_destroy(&child[i]);
    }
    resil_cancel_destroy(&root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(system_clock_is_a_singleton),
        cmocka_unit_test(a_coarse_clock_only_where_its_resolution_suffices),
        cmocka_unit_test(the_coarse_clock_is_the_one_breakers_pick_and_is_read_directly),
        cmocka_unit_test(now_never_goes_backwards),
        cmocka_unit_test(wall_now_is_unix_time_in_ns),
        cmocka_unit_test(zero_sleep_returns_at_once),
        cmocka_unit_test(negative_sleep_returns_at_once),
        cmocka_unit_test(zero_sleep_on_fired_token_is_canceled),
        cmocka_unit_test(sleep_on_fired_token_is_canceled),
        cmocka_unit_test(short_sleep_lasts_at_least_its_duration),
        cmocka_unit_test(short_sleep_with_unfired_token_returns_zero),
        cmocka_unit_test(huge_sleep_deadline_saturates_and_still_cancels),
        cmocka_unit_test(fire_from_another_thread_ends_an_hour_long_sleep),
        cmocka_unit_test(parent_fire_ends_sleeps_on_children_in_many_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
