/*
 * test_bulkhead.c — the bulkhead on one thread: options and their
 * validation, the concurrency bound, immediate rejection, the queue's
 * timeout on the fake clock, cancellation before admission, tickets and
 * counters. Threads racing for permits are in test_bulkhead_threads.c.
 */
#include "test.h"

typedef struct fixture {
    resil_fake_clock *fc;
    resil_bulkhead_opts opts;
    resil_bulkhead *b;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(RESIL_S(100), 0, &f->fc) != 0)
        return -1;
    resil_bulkhead_opts_default(&f->opts);
    f->opts.clock = resil_fake_clock_clock(f->fc);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_bulkhead_free(f->b);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static resil_bulkhead *make(fixture *f, int32_t max_concurrency, int32_t max_queue, bool queue)
{
    f->opts.max_concurrency = max_concurrency;
    f->opts.max_queue = max_queue;
    f->opts.queue = queue;
    resil_err err;
    assert_int_equal(resil_bulkhead_new(&f->opts, &f->b, &err), 0);
    return f->b;
}

static void expect_invalid(fixture *f, const char *message)
{
    resil_err err = {0};
    resil_bulkhead *b = NULL;
    assert_int_equal(resil_bulkhead_new(&f->opts, &b, &err), RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(b);
}

/* ---- options ------------------------------------------------------------ */

static void defaults_are_ten_running_fifty_queued_waiting_until_cancelled(void **state)
{
    (void)state;
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    assert_int_equal(o.max_concurrency, 10);
    assert_int_equal(o.max_queue, 50);
    assert_true(o.queue);
    assert_duration_equal(o.queue_timeout, 0);
    assert_null(o.clock);
}

static void max_concurrency_below_one_is_refused_by_name(void **state)
{
    fixture *f = *state;
    f->opts.max_concurrency = 0;
    expect_invalid(f, "bulkhead.max_concurrency must be >= 1, got 0");
    f->opts.max_concurrency = -5;
    expect_invalid(f, "bulkhead.max_concurrency must be >= 1, got -5");
}

static void negative_max_queue_is_refused_by_name(void **state)
{
    fixture *f = *state;
    f->opts.max_queue = -1;
    expect_invalid(f, "bulkhead.max_queue must be >= 0, got -1");
}

static void negative_queue_timeout_is_refused_by_name(void **state)
{
    fixture *f = *state;
    f->opts.queue_timeout = -1;
    expect_invalid(f, "bulkhead.queue_timeout must be >= 0 (0 = until cancelled), got -1ns");
}

static void null_options_are_refused(void **state)
{
    (void)state;
    resil_bulkhead *b = NULL;
    resil_err err;
    assert_int_equal(resil_bulkhead_new(NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "bulkhead: options and out must not be NULL");
}

static void boundary_values_are_accepted(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 0, true);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    resil_bulkhead_opts got;
    resil_bulkhead_opts_get(b, &got);
    assert_int_equal(got.max_concurrency, 1);
    assert_int_equal(got.max_queue, 0);
}

static void free_accepts_null(void **state)
{
    (void)state;
    resil_bulkhead_free(NULL);
}

/* ---- the bound ---------------------------------------------------------- */

static void admits_up_to_max_concurrency_then_rejects_at_once(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 3, 0, false);
    resil_bulkhead_ticket t[4] = {{0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(resil_bulkhead_acquire(b, NULL, &t[i]), 0);
        assert_ptr_equal(t[i].owner, b);
        assert_int_equal(resil_bulkhead_in_flight(b), i + 1);
    }
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t[3]), RESIL_EREJECTED);
    assert_null(t[3].owner);
    assert_int_equal(resil_bulkhead_in_flight(b), 3);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    for (int i = 0; i < 3; i++)
        resil_bulkhead_release(&t[i]);
}

static void queue_on_with_zero_length_rejects_at_once(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 0, true);
    resil_bulkhead_ticket held = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    resil_bulkhead_release(&held);
}

static void queue_off_ignores_max_queue(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 50, false);
    resil_bulkhead_ticket held = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    resil_bulkhead_release(&held);
}

static void release_frees_the_permit_for_the_next_caller(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 0, false);
    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), 0);
    resil_bulkhead_release(&t);
    assert_null(t.owner);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), 0);
    resil_bulkhead_release(&t);
}

static void releasing_twice_returns_one_permit(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 2, 0, false);
    resil_bulkhead_ticket a = {0}, c = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &a), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &c), 0);
    resil_bulkhead_release(&a);
    resil_bulkhead_release(&a);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    resil_bulkhead_release(&c);
    resil_bulkhead_release(NULL);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
}

static void a_failed_acquire_leaves_a_ticket_that_release_ignores(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 0, false);
    resil_bulkhead_ticket held, t, u;
    memset(&t, 0xab, sizeof t); /* garbage, as an uninitialised local would be */
    memset(&u, 0xab, sizeof u);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_try_acquire(b, &u), RESIL_EREJECTED);
    assert_null(t.owner);
    assert_null(u.owner);
    resil_bulkhead_release(&t);
    resil_bulkhead_release(&u);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    resil_bulkhead_release(&held);
}

static void try_acquire_takes_a_free_permit_and_never_waits(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 10, true);
    resil_bulkhead_ticket t = {0}, u = {0};
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), 0);
    assert_int_equal(resil_bulkhead_try_acquire(b, &u), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_queued(b), 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    resil_bulkhead_release(&t);
}

/* ---- the queue on the auto-advancing fake clock ------------------------- */

static void queued_wait_times_out_after_exactly_queue_timeout(void **state)
{
    fixture *f = *state;
    f->opts.queue_timeout = RESIL_MS(750);
    resil_bulkhead *b = make(f, 1, 5, true);
    resil_bulkhead_ticket held = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), RESIL_ETIMEDOUT);
    assert_null(t.owner);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_MS(750));
    assert_duration_equal(resil_fake_clock_now(f->fc), RESIL_S(100) + RESIL_MS(750));
    assert_int_equal(resil_bulkhead_queued(b), 0);
    assert_int_equal(resil_bulkhead_in_flight(b), 1);
    resil_bulkhead_release(&held);
}

static void timeout_rejection_and_cancel_are_three_distinct_codes(void **state)
{
    fixture *f = *state;
    f->opts.queue_timeout = RESIL_MS(1);
    resil_bulkhead *b = make(f, 1, 1, true);
    resil_bulkhead_ticket held = {0}, t = {0};
    resil_cancel fired;
    assert_int_equal(resil_cancel_init(&fired, NULL), 0);
    resil_cancel_fire(&fired);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);
    int timed_out = resil_bulkhead_acquire(b, NULL, &t);
    int cancelled = resil_bulkhead_acquire(b, &fired, &t);
    assert_int_equal(timed_out, RESIL_ETIMEDOUT);
    assert_int_equal(cancelled, RESIL_ECANCELED);
    assert_int_not_equal(timed_out, RESIL_EREJECTED);
    assert_int_not_equal(cancelled, RESIL_EREJECTED);
    resil_bulkhead_release(&held);
    resil_cancel_destroy(&fired);
}

static void fired_token_is_refused_even_with_a_free_permit(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 4, 0, false);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    resil_cancel_fire(&c);
    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_acquire(b, &c, &t), RESIL_ECANCELED);
    assert_null(t.owner);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    resil_cancel_destroy(&c);
}

static void an_admitted_ticket_records_no_queueing(void **state)
{
    fixture *f = *state;
    resil_bulkhead *b = make(f, 1, 0, false);
    resil_bulkhead_ticket t = {.queued = 123};
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), 0);
    assert_duration_equal(t.queued, 0);
    resil_bulkhead_release(&t);
}

static void stats_count_each_ending(void **state)
{
    fixture *f = *state;
    f->opts.queue_timeout = RESIL_MS(10);
    resil_bulkhead *b = make(f, 1, 1, true);
    resil_bulkhead_ticket held = {0}, t = {0};
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    resil_cancel_fire(&c);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &held), 0);     /* admitted */
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t), RESIL_ETIMEDOUT); /* queued, timed out */
    assert_int_equal(resil_bulkhead_acquire(b, &c, &t), RESIL_ECANCELED);
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), RESIL_EREJECTED);
    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(b, &s);
    assert_int_equal(s.admitted, 1);
    assert_int_equal(s.queued, 1);
    assert_int_equal(s.timed_out, 1);
    assert_int_equal(s.cancelled, 1);
    assert_int_equal(s.rejected, 1);
    resil_bulkhead_release(&held);
    resil_cancel_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(defaults_are_ten_running_fifty_queued_waiting_until_cancelled),
        TEST(max_concurrency_below_one_is_refused_by_name),
        TEST(negative_max_queue_is_refused_by_name),
        TEST(negative_queue_timeout_is_refused_by_name),
        TEST(null_options_are_refused),
        TEST(boundary_values_are_accepted),
        TEST(free_accepts_null),
        TEST(admits_up_to_max_concurrency_then_rejects_at_once),
        TEST(queue_on_with_zero_length_rejects_at_once),
        TEST(queue_off_ignores_max_queue),
        TEST(release_frees_the_permit_for_the_next_caller),
        TEST(releasing_twice_returns_one_permit),
        TEST(a_failed_acquire_leaves_a_ticket_that_release_ignores),
        TEST(try_acquire_takes_a_free_permit_and_never_waits),
        TEST(queued_wait_times_out_after_exactly_queue_timeout),
        TEST(timeout_rejection_and_cancel_are_three_distinct_codes),
        TEST(fired_token_is_refused_even_with_a_free_permit),
        TEST(an_admitted_ticket_records_no_queueing),
        TEST(stats_count_each_ending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
