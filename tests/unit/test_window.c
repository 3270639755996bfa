/*
 * test_window.c — the breaker's rolling window as plain arithmetic: no
 * clock, no breaker, just instants passed in.
 */
#include "test.h"

#include "../../src/core/window.h"

#define SAMPLING RESIL_S(10) /* 10 buckets of 1 s */

static resil__window fresh(void)
{
    resil__window w;
    resil__window_init(&w, SAMPLING);
    return w;
}

static void buckets_are_a_tenth_of_the_sampling_duration(void **state)
{
    (void)state;
    resil__window w = fresh();
    assert_int_equal(w.width, RESIL_S(1));
    resil__window_init(&w, RESIL_MS(500));
    assert_int_equal(w.width, RESIL_MS(50));
}

static void an_empty_window_counts_nothing(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_counts c = resil__window_totals(&w, RESIL_S(123));
    assert_int_equal(c.total, 0);
    assert_int_equal(c.failures, 0);
    assert_int_equal(c.slow, 0);
}

static void adds_count_calls_failures_and_slow_calls(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, 0, false, false);
    resil__window_add(&w, RESIL_MS(100), true, false);
    resil__window_add(&w, RESIL_MS(1500), true, true);
    resil__window_add(&w, RESIL_MS(2500), false, true);
    resil__window_counts c = resil__window_totals(&w, RESIL_MS(2500));
    assert_int_equal(c.total, 4);
    assert_int_equal(c.failures, 2);
    assert_int_equal(c.slow, 2);
}

static void calls_stay_counted_for_the_whole_sampling_duration(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, RESIL_MS(0), true, false);
    /* bucket 0 is the oldest of the ten while now is in bucket 9 */
    assert_int_equal(resil__window_totals(&w, RESIL_MS(9999)).failures, 1);
}

static void the_oldest_bucket_ages_out_when_the_eleventh_begins(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, RESIL_MS(900), true, false);
    resil__window_add(&w, RESIL_MS(1000), false, false);
    resil__window_counts c = resil__window_totals(&w, RESIL_S(10));
    assert_int_equal(c.total, 1);
    assert_int_equal(c.failures, 0);
    /* and adding at that instant drops it for good */
    resil__window_add(&w, RESIL_S(10), false, false);
    assert_int_equal(w.sum.total, 2);
    assert_int_equal(w.sum.failures, 0);
}

static void a_gap_of_a_whole_window_empties_it(void **state)
{
    (void)state;
    resil__window w = fresh();
    for (int i = 0; i < 10; i++)
        resil__window_add(&w, RESIL_S(i), true, true);
    assert_int_equal(resil__window_totals(&w, RESIL_S(9)).total, 10);
    assert_int_equal(resil__window_totals(&w, RESIL_S(19)).total, 0);
    resil__window_add(&w, RESIL_S(25), false, false);
    assert_int_equal(w.sum.total, 1);
    assert_int_equal(w.sum.failures, 0);
    assert_int_equal(w.sum.slow, 0);
}

static void totals_read_does_not_change_the_window(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, 0, true, false);
    assert_int_equal(resil__window_totals(&w, RESIL_S(60)).total, 0);
    assert_int_equal(resil__window_totals(&w, 0).total, 1);
}

static void an_instant_older_than_the_newest_bucket_counts_in_it(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, RESIL_S(5), false, false);
    resil__window_add(&w, RESIL_S(1), true, false);
    assert_int_equal(w.head, 5);
    assert_int_equal(w.bucket[5].failures, 1);
    assert_int_equal(resil__window_totals(&w, RESIL_S(14)).failures, 1);
    assert_int_equal(resil__window_totals(&w, RESIL_S(15)).failures, 0);
}

static void negative_instants_use_floor_buckets(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, RESIL_MS(-1), true, false);
    assert_int_equal(w.head, -1);
    assert_int_equal(w.bucket[9].failures, 1);
    assert_int_equal(resil__window_totals(&w, RESIL_MS(8999)).failures, 1);
    assert_int_equal(resil__window_totals(&w, RESIL_S(9)).failures, 0);
}

static void clear_forgets_everything_but_the_width(void **state)
{
    (void)state;
    resil__window w = fresh();
    resil__window_add(&w, 0, true, true);
    resil__window_clear(&w);
    assert_int_equal(w.width, RESIL_S(1));
    assert_int_equal(resil__window_totals(&w, 0).total, 0);
    resil__window_add(&w, RESIL_S(3), false, false);
    assert_int_equal(resil__window_totals(&w, RESIL_S(3)).total, 1);
}

static void share_needs_the_minimum_throughput(void **state)
{
    (void)state;
    assert_false(resil__window_share_reached(3, 3, 4, 0.5));
    assert_true(resil__window_share_reached(4, 4, 4, 0.5));
    assert_false(resil__window_share_reached(0, 0, 0, 0.5));
}

static void share_is_reached_at_equality_without_rounding_loss(void **state)
{
    (void)state;
    /* 0.3 * 10 is 3.0000000000000004 in doubles: division avoids that */
    assert_true(resil__window_share_reached(3, 10, 2, 0.3));
    assert_false(resil__window_share_reached(2, 10, 2, 0.3));
    assert_true(resil__window_share_reached(1, 10, 2, 0.1));
    assert_true(resil__window_share_reached(7, 7, 2, 1.0));
    assert_false(resil__window_share_reached(6, 7, 2, 1.0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets_are_a_tenth_of_the_sampling_duration),
        cmocka_unit_test(an_empty_window_counts_nothing),
        cmocka_unit_test(adds_count_calls_failures_and_slow_calls),
        cmocka_unit_test(calls_stay_counted_for_the_whole_sampling_duration),
        cmocka_unit_test(the_oldest_bucket_ages_out_when_the_eleventh_begins),
        cmocka_unit_test(a_gap_of_a_whole_window_empties_it),
        cmocka_unit_test(totals_read_does_not_change_the_window),
        cmocka_unit_test(an_instant_older_than_the_newest_bucket_counts_in_it),
        cmocka_unit_test(negative_instants_use_floor_buckets),
        cmocka_unit_test(clear_forgets_everything_but_the_width),
        cmocka_unit_test(share_needs_the_minimum_throughput),
        cmocka_unit_test(share_is_reached_at_equality_without_rounding_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
