/*
 * test_fake_clock.c — virtual time: auto-advance sleeps that record their
 * waits, the on-sleep hook, and manual mode where threads block until time
 * is advanced past their wake-up or their token fires.
 */
#include <pthread.h>

#include "test.h"

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(RESIL_S(1000), RESIL_S(1700000000), &f->fc) != 0)
        return -1;
    f->clock = resil_fake_clock_clock(f->fc);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- auto-advance ------------------------------------------------------ */

static void starts_at_the_given_instants(void **state)
{
    fixture *f = *state;
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
    assert_duration_equal(resil_fake_clock_now(f->fc), RESIL_S(1000));
    assert_int_equal(resil_clock_wall_now(f->clock), RESIL_S(1700000000));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 0);
}

static void sleep_advances_virtual_and_wall_time_at_once(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_MS(250), NULL), 0);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000) + RESIL_MS(250));
    assert_int_equal(resil_clock_wall_now(f->clock), RESIL_S(1700000000) + RESIL_MS(250));
}

static void sleep_records_each_requested_wait_in_order(void **state)
{
    fixture *f = *state;
    resil_clock_sleep(f->clock, RESIL_MS(100), NULL);
    resil_clock_sleep(f->clock, RESIL_MS(200), NULL);
    resil_clock_sleep(f->clock, RESIL_MS(400), NULL);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 3);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_MS(100));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 1), RESIL_MS(200));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 2), RESIL_MS(400));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 3), 0);
}

static void zero_sleep_is_recorded_but_does_not_move_time(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_clock_sleep(f->clock, 0, NULL), 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), 0);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
}

static void negative_sleep_does_not_move_time(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_MS(-3), NULL), 0);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
}

static void sleep_on_fired_token_is_canceled_and_time_stays(void **state)
{
    fixture *f = *state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(1), &c), RESIL_ECANCELED);
    assert_int_equal(resil_clock_sleep(f->clock, 0, &c), RESIL_ECANCELED);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 2);
    resil_cancel_destroy(&c);
}

static void sleep_with_unfired_token_advances(void **state)
{
    fixture *f = *state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(2), &c), 0);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1002));
    resil_cancel_destroy(&c);
}

static void log_keeps_the_first_4096_waits_and_counts_all(void **state)
{
    fixture *f = *state;
    for (int i = 1; i <= 5000; i++)
        resil_clock_sleep(f->clock, RESIL_NS(i), NULL);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 5000);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 4095), 4096);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 4096), 0);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 4999), 0);
}

static void clear_log_forgets_waits_but_not_time(void **state)
{
    fixture *f = *state;
    resil_clock_sleep(f->clock, RESIL_S(1), NULL);
    resil_fake_clock_clear_log(f->fc);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), 0);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1001));
}

static void advance_moves_virtual_and_wall_time(void **state)
{
    fixture *f = *state;
    resil_fake_clock_advance(f->fc, RESIL_MS(1500));
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000) + RESIL_MS(1500));
    assert_int_equal(resil_clock_wall_now(f->clock), RESIL_S(1700000000) + RESIL_MS(1500));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

static void advance_by_non_positive_is_ignored(void **state)
{
    fixture *f = *state;
    resil_fake_clock_advance(f->fc, 0);
    resil_fake_clock_advance(f->fc, RESIL_S(-10));
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
}

static void advance_saturates_at_the_maximum_instant(void **state)
{
    fixture *f = *state;
    resil_fake_clock_advance(f->fc, RESIL_DURATION_MAX);
    resil_fake_clock_advance(f->fc, RESIL_DURATION_MAX);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_INSTANT_MAX);
    assert_int_equal(resil_clock_wall_now(f->clock), INT64_MAX);
}

/* ---- the hook ---------------------------------------------------------- */

typedef struct hook_record {
    int calls;
    resil_duration last;
    resil_cancel *fire;
    resil_fake_clock *fc;
} hook_record;

static void recording_hook(resil_fake_clock *fc, resil_duration d, void *ud)
{
    hook_record *r = ud;
    r->calls++;
    r->last = d;
    r->fc = fc;
    if (r->fire != NULL)
        resil_cancel_fire(r->fire);
}

static void hook_sees_every_requested_wait(void **state)
{
    fixture *f = *state;
    hook_record r = {0};
    resil_fake_clock_set_hook(f->fc, recording_hook, &r);
    resil_clock_sleep(f->clock, RESIL_MS(30), NULL);
    resil_clock_sleep(f->clock, RESIL_MS(70), NULL);
    assert_int_equal(r.calls, 2);
    assert_duration_equal(r.last, RESIL_MS(70));
    assert_ptr_equal(r.fc, f->fc);
}

static void hook_firing_the_token_cancels_the_sleep_without_advancing(void **state)
{
    fixture *f = *state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    hook_record r = {.fire = &c};
    resil_fake_clock_set_hook(f->fc, recording_hook, &r);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(5), &c), RESIL_ECANCELED);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(5));
    resil_cancel_destroy(&c);
}

static void hook_firing_a_parent_cancels_a_sleep_on_its_child(void **state)
{
    fixture *f = *state;
    resil_cancel parent, child;
    resil_cancel_init(&parent, NULL);
    resil_cancel_init(&child, &parent);
    hook_record r = {.fire = &parent};
    resil_fake_clock_set_hook(f->fc, recording_hook, &r);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(5), &child), RESIL_ECANCELED);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&parent);
}

static void reading_hook(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)d;
    *(size_t *)ud = resil_fake_clock_sleep_count(fc);
    resil_fake_clock_advance(fc, RESIL_MS(1));
}

static void hook_may_read_the_clock_without_deadlock(void **state)
{
    fixture *f = *state;
    size_t seen = 0;
    resil_fake_clock_set_hook(f->fc, reading_hook, &seen);
    resil_clock_sleep(f->clock, RESIL_MS(10), NULL);
    assert_int_equal(seen, 1); /* the wait is logged before the hook runs */
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000) + RESIL_MS(11));
}

static void hook_can_be_removed(void **state)
{
    fixture *f = *state;
    hook_record r = {0};
    resil_fake_clock_set_hook(f->fc, recording_hook, &r);
    resil_fake_clock_set_hook(f->fc, NULL, NULL);
    resil_clock_sleep(f->clock, RESIL_MS(30), NULL);
    assert_int_equal(r.calls, 0);
}

/* ---- manual mode ------------------------------------------------------- */

typedef struct manual_sleeper {
    resil_clock *clock;
    resil_duration d;
    resil_cancel *token;
    int rc;
    resil_instant woke_at;
} manual_sleeper;

static void *manual_sleep_thread(void *p)
{
    manual_sleeper *s = p;
    s->rc = resil_clock_sleep(s->clock, s->d, s->token);
    s->woke_at = resil_clock_now(s->clock);
    return NULL;
}

static void manual_sleep_blocks_until_advanced_past_wakeup(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    manual_sleeper s = {f->clock, RESIL_S(10), NULL, 1, 0};
    pthread_t t;
    pthread_create(&t, NULL, manual_sleep_thread, &s);
    resil_fake_clock_await_sleepers(f->fc, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(4));
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 1); /* not yet due */
    resil_fake_clock_advance(f->fc, RESIL_S(6));
    pthread_join(t, NULL);
    assert_int_equal(s.rc, 0);
    assert_duration_equal(s.woke_at, RESIL_S(1010));
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 0);
}

static void manual_sleep_does_not_advance_time_itself(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    manual_sleeper s = {f->clock, RESIL_S(10), NULL, 1, 0};
    pthread_t t;
    pthread_create(&t, NULL, manual_sleep_thread, &s);
    resil_fake_clock_await_sleepers(f->fc, 1);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(10));
    resil_fake_clock_advance(f->fc, RESIL_S(30));
    pthread_join(t, NULL);
    assert_int_equal(s.rc, 0);
    assert_duration_equal(s.woke_at, RESIL_S(1030));
}

static void manual_sleep_ends_when_its_token_fires(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    manual_sleeper s = {f->clock, RESIL_S(10), &c, 1, 0};
    pthread_t t;
    pthread_create(&t, NULL, manual_sleep_thread, &s);
    resil_fake_clock_await_sleepers(f->fc, 1);
    resil_cancel_fire(&c);
    pthread_join(t, NULL);
    assert_int_equal(s.rc, RESIL_ECANCELED);
    assert_duration_equal(s.woke_at, RESIL_S(1000));
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 0);
    resil_cancel_destroy(&c);
}

static void manual_sleep_ends_when_a_parent_token_fires(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    resil_cancel parent, child;
    resil_cancel_init(&parent, NULL);
    resil_cancel_init(&child, &parent);
    manual_sleeper s = {f->clock, RESIL_S(10), &child, 1, 0};
    pthread_t t;
    pthread_create(&t, NULL, manual_sleep_thread, &s);
    resil_fake_clock_await_sleepers(f->fc, 1);
    resil_cancel_fire(&parent);
    pthread_join(t, NULL);
    assert_int_equal(s.rc, RESIL_ECANCELED);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&parent);
}

static void manual_sleep_on_fired_token_returns_at_once(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(10), &c), RESIL_ECANCELED);
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 0);
    resil_cancel_destroy(&c);
}

static void manual_zero_sleep_returns_at_once(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    assert_int_equal(resil_clock_sleep(f->clock, 0, NULL), 0);
}

static void manual_hook_firing_token_cancels_before_blocking(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    hook_record r = {.fire = &c};
    resil_fake_clock_set_hook(f->fc, recording_hook, &r);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(10), &c), RESIL_ECANCELED);
    assert_int_equal(r.calls, 1);
    resil_cancel_destroy(&c);
}

static void advance_wakes_only_the_sleepers_that_are_due(void **state)
{
    fixture *f = *state;
    enum { N = 4 };
    resil_fake_clock_set_manual(f->fc, true);
    manual_sleeper s[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        s[i] = (manual_sleeper){f->clock, RESIL_S(i + 1), NULL, 1, 0};
        pthread_create(&t[i], NULL, manual_sleep_thread, &s[i]);
    }
    resil_fake_clock_await_sleepers(f->fc, N);
    resil_fake_clock_advance(f->fc, RESIL_MS(2500)); /* wakes the 1 s and 2 s sleepers */
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 2);
    assert_int_equal(s[0].rc, 0);
    assert_int_equal(s[1].rc, 0);
    resil_fake_clock_advance(f->fc, RESIL_MS(1500));
    pthread_join(t[2], NULL);
    pthread_join(t[3], NULL);
    assert_int_equal(s[2].rc, 0);
    assert_int_equal(s[3].rc, 0);
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), N);
}

static void next_wake_is_the_earliest_sleeper_whose_token_has_not_fired(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    assert_int_equal(resil_fake_clock_next_wake(f->fc), RESIL_INSTANT_MAX);
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    manual_sleeper s[2] = {{f->clock, RESIL_S(5), &c, 1, 0}, {f->clock, RESIL_S(8), NULL, 1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, manual_sleep_thread, &s[i]);
    resil_fake_clock_await_sleepers(f->fc, 2);
    assert_int_equal(resil_fake_clock_next_wake(f->fc), RESIL_S(1005));
    resil_cancel_fire(&c);
    assert_int_equal(resil_fake_clock_next_wake(f->fc), RESIL_S(1008));
    pthread_join(t[0], NULL);
    resil_fake_clock_advance(f->fc, RESIL_S(8));
    pthread_join(t[1], NULL);
    assert_int_equal(resil_fake_clock_next_wake(f->fc), RESIL_INSTANT_MAX);
    resil_cancel_destroy(&c);
}

static void fire_and_advance_race_and_every_sleeper_ends(void **state)
{
    fixture *f = *state;
    enum { N = 8 };
    resil_fake_clock_set_manual(f->fc, true);
    resil_cancel tokens[N];
    manual_sleeper s[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        resil_cancel_init(&tokens[i], NULL);
        s[i] = (manual_sleeper){f->clock, RESIL_S(1), &tokens[i], 1, 0};
        pthread_create(&t[i], NULL, manual_sleep_thread, &s[i]);
    }
    resil_fake_clock_await_sleepers(f->fc, N);
    for (int i = 0; i < N; i += 2)
        resil_cancel_fire(&tokens[i]);
    resil_fake_clock_advance(f->fc, RESIL_S(1));
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        if (i % 2)
            assert_int_equal(s[i].rc, 0);
        else
            assert_int_equal(s[i].rc, RESIL_ECANCELED);
        resil_cancel_destroy(&tokens[i]);
    }
    assert_int_equal(resil_fake_clock_sleepers(f->fc), 0);
}

static void *auto_sleep_many(void *p)
{
    resil_clock *c = p;
    for (int i = 0; i < 1000; i++)
        resil_clock_sleep(c, RESIL_MS(1), NULL);
    return NULL;
}

static void concurrent_auto_sleeps_all_count(void **state)
{
    fixture *f = *state;
    enum { N = 4 };
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        pthread_create(&t[i], NULL, auto_sleep_many, f->clock);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), N * 1000);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1000) + RESIL_MS(N * 1000));
}

static void switching_back_to_auto_mode_advances_again(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_manual(f->fc, true);
    resil_fake_clock_set_manual(f->fc, false);
    assert_int_equal(resil_clock_sleep(f->clock, RESIL_S(3), NULL), 0);
    assert_duration_equal(resil_clock_now(f->clock), RESIL_S(1003));
}

static void free_tolerates_null(void **state)
{
    (void)state;
    resil_fake_clock_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(starts_at_the_given_instants),
        TEST(sleep_advances_virtual_and_wall_time_at_once),
        TEST(sleep_records_each_requested_wait_in_order),
        TEST(zero_sleep_is_recorded_but_does_not_move_time),
        TEST(negative_sleep_does_not_move_time),
        TEST(sleep_on_fired_token_is_canceled_and_time_stays),
        TEST(sleep_with_unfired_token_advances),
        TEST(log_keeps_the_first_4096_waits_and_counts_all),
        TEST(clear_log_forgets_waits_but_not_time),
        TEST(advance_moves_virtual_and_wall_time),
        TEST(advance_by_non_positive_is_ignored),
        TEST(advance_saturates_at_the_maximum_instant),
        TEST(hook_sees_every_requested_wait),
        TEST(hook_firing_the_token_cancels_the_sleep_without_advancing),
        TEST(hook_firing_a_parent_cancels_a_sleep_on_its_child),
        TEST(hook_may_read_the_clock_without_deadlock),
        TEST(hook_can_be_removed),
        TEST(manual_sleep_blocks_until_advanced_past_wakeup),
        TEST(manual_sleep_does_not_advance_time_itself),
        TEST(manual_sleep_ends_when_its_token_fires),
        TEST(manual_sleep_ends_when_a_parent_token_fires),
        TEST(manual_sleep_on_fired_token_returns_at_once),
        TEST(manual_zero_sleep_returns_at_once),
        TEST(manual_hook_firing_token_cancels_before_blocking),
        TEST(advance_wakes_only_the_sleepers_that_are_due),
        TEST(next_wake_is_the_earliest_sleeper_whose_token_has_not_fired),
        TEST(fire_and_advance_race_and_every_sleeper_ends),
        TEST(concurrent_auto_sleeps_all_count),
        TEST(switching_back_to_auto_mode_advances_again),
        cmocka_unit_test(free_tolerates_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
