/*
 * test_ratelimit.c — the three rate limiters on the fake clock: exact
 * admit/reject sequences and retry-after values for each kind, the blocking
 * acquire's waits, timeouts and cancellation, and option validation by
 * name. Threads are in test_ratelimit_threads.c.
 */
#include "test.h"

#define T0 RESIL_S(100)

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
    resil_ratelimit_opts opts;
    resil_ratelimit *rl;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(T0, 0, &f->fc) != 0)
        return -1;
    f->clock = resil_fake_clock_clock(f->fc);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_ratelimit_free(f->rl);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static void advance(fixture *f, resil_duration d) { resil_fake_clock_advance(f->fc, d); }

static resil_ratelimit *bucket(fixture *f, int64_t rate, resil_duration period, int64_t burst)
{
    resil_ratelimit_opts_default(&f->opts, RESIL_RATELIMIT_TOKEN_BUCKET);
    f->opts.rate = rate;
    f->opts.period = period;
    f->opts.burst = burst;
    f->opts.clock = f->clock;
    assert_int_equal(resil_ratelimit_new(&f->opts, &f->rl, NULL), 0);
    return f->rl;
}

static resil_ratelimit *window(fixture *f, resil_ratelimit_kind kind, int64_t permits,
                               resil_duration w)
{
    resil_ratelimit_opts_default(&f->opts, kind);
    f->opts.permits = permits;
    f->opts.window = w;
    f->opts.clock = f->clock;
    assert_int_equal(resil_ratelimit_new(&f->opts, &f->rl, NULL), 0);
    return f->rl;
}

/* try_acquire(n) must be admitted. */
static void admit(resil_ratelimit *rl, int64_t n)
{
    resil_duration ra = -1;
    assert_int_equal(resil_ratelimit_try_acquire(rl, n, &ra), 0);
    assert_duration_equal(ra, 0);
}

/* try_acquire(n) must be rejected with exactly this retry-after. */
static void reject(resil_ratelimit *rl, int64_t n, resil_duration retry_after)
{
    resil_duration ra = -1;
    assert_int_equal(resil_ratelimit_try_acquire(rl, n, &ra), RESIL_EREJECTED);
    assert_duration_equal(ra, retry_after);
}

static void expect_invalid(fixture *f, const char *message)
{
    resil_err err = {0};
    resil_ratelimit *rl = NULL;
    assert_int_equal(resil_ratelimit_new(&f->opts, &rl, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(rl);
}

/* ---- options ------------------------------------------------------------ */

static void defaults_are_a_hundred_per_second(void **state)
{
    (void)state;
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_SLIDING_WINDOW);
    assert_int_equal(o.kind, RESIL_RATELIMIT_SLIDING_WINDOW);
    assert_int_equal(o.rate, 100);
    assert_duration_equal(o.period, RESIL_S(1));
    assert_int_equal(o.burst, 100);
    assert_int_equal(o.permits, 100);
    assert_duration_equal(o.window, RESIL_S(1));
    assert_null(o.clock);
}

static void token_bucket_options_are_validated_by_name(void **state)
{
    fixture *f = *state;
    resil_ratelimit_opts_default(&f->opts, RESIL_RATELIMIT_TOKEN_BUCKET);
    f->opts.rate = 0;
    expect_invalid(f, "ratelimit.rate must be in [1, 1000000000], got 0");
    f->opts.rate = 1000000001;
    expect_invalid(f, "ratelimit.rate must be in [1, 1000000000], got 1000000001");
    f->opts.rate = 10;
    f->opts.period = RESIL_MS(1) - 1;
    expect_invalid(f, "ratelimit.period must be >= 1ms, got 999999ns");
    f->opts.period = RESIL_S(1);
    f->opts.burst = 0;
    expect_invalid(f, "ratelimit.burst must be in [1, 1000000000], got 0");
    f->opts.burst = -3;
    expect_invalid(f, "ratelimit.burst must be in [1, 1000000000], got -3");
}

static void token_bucket_capacity_that_would_overflow_is_refused(void **state)
{
    fixture *f = *state;
    resil_ratelimit_opts_default(&f->opts, RESIL_RATELIMIT_TOKEN_BUCKET);
    f->opts.burst = 1000000000;
    f->opts.period = RESIL_S(10);
    expect_invalid(f, "ratelimit.burst must be at most 461168601 with ratelimit.period 10s, "
                      "got 1000000000");
}

static void window_options_are_validated_by_name(void **state)
{
    fixture *f = *state;
    resil_ratelimit_opts_default(&f->opts, RESIL_RATELIMIT_FIXED_WINDOW);
    f->opts.permits = 0;
    expect_invalid(f, "ratelimit.permits must be in [1, 1000000000], got 0");
    f->opts.permits = 5;
    f->opts.window = 0;
    expect_invalid(f, "ratelimit.window must be >= 1ms, got 0s");
    f->opts.window = RESIL_MS(1);
    assert_int_equal(resil_ratelimit_new(&f->opts, &f->rl, NULL), 0);
}

static void sliding_window_log_is_bounded(void **state)
{
    fixture *f = *state;
    resil_ratelimit_opts_default(&f->opts, RESIL_RATELIMIT_SLIDING_WINDOW);
    f->opts.permits = RESIL_RATELIMIT_MAX_LOG + 1;
    expect_invalid(f, "ratelimit.permits must be in [1, 1048576], got 1048577");
}

static void unknown_kind_is_refused(void **state)
{
    fixture *f = *state;
    resil_ratelimit_opts_default(&f->opts, RESIL_RATELIMIT_TOKEN_BUCKET);
    f->opts.kind = (resil_ratelimit_kind)7;
    expect_invalid(f, "ratelimit.kind is not a known kind, got 7");
}

static void null_options_are_refused(void **state)
{
    (void)state;
    resil_ratelimit *rl = NULL;
    resil_err err;
    assert_int_equal(resil_ratelimit_new(NULL, &rl, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "ratelimit: options and out must not be NULL");
    resil_ratelimit_free(NULL);
}

static void kind_names_round_trip(void **state)
{
    (void)state;
    resil_ratelimit_kind k;
    const resil_ratelimit_kind all[] = {RESIL_RATELIMIT_TOKEN_BUCKET, RESIL_RATELIMIT_FIXED_WINDOW,
                                        RESIL_RATELIMIT_SLIDING_WINDOW};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(resil_ratelimit_kind_parse(resil_ratelimit_kind_name(all[i]), &k), 0);
        assert_int_equal(k, all[i]);
    }
    assert_string_equal(resil_ratelimit_kind_name(RESIL_RATELIMIT_TOKEN_BUCKET), "token-bucket");
    assert_string_equal(resil_ratelimit_kind_name((resil_ratelimit_kind)9), "unknown");
    assert_int_equal(resil_ratelimit_kind_parse("leaky-bucket", &k), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_kind_parse(NULL, &k), RESIL_EINVAL);
}

static void requests_outside_one_to_capacity_are_invalid_not_a_hang(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 5);
    resil_duration ra = -1;
    assert_int_equal(resil_ratelimit_try_acquire(rl, 6, &ra), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 0, &ra), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_try_acquire(rl, -1, &ra), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_acquire(rl, 6, NULL, 0), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, NULL, -1), RESIL_EINVAL);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    assert_int_equal(resil_ratelimit_available(rl), 5);
}

/* ---- token bucket ------------------------------------------------------- */

static void token_bucket_starts_full_and_admits_its_burst(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 5);
    for (int i = 0; i < 5; i++)
        admit(rl, 1);
    reject(rl, 1, RESIL_MS(100));
    assert_int_equal(resil_ratelimit_available(rl), 0);
}

static void token_bucket_refills_one_permit_per_period_over_rate(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 5);
    admit(rl, 5);
    advance(f, RESIL_MS(100) - 1);
    reject(rl, 1, 1);
    advance(f, 1);
    admit(rl, 1);
    reject(rl, 1, RESIL_MS(100));
}

static void three_per_second_admits_at_exact_nanoseconds_without_drift(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 3, RESIL_S(1), 3);
    admit(rl, 3);
    reject(rl, 1, 333333334);
    advance(f, 333333334);
    admit(rl, 1);
    reject(rl, 1, 333333333);
    advance(f, 333333333);
    admit(rl, 1);
    reject(rl, 1, 333333333);
    advance(f, 333333333);
    admit(rl, 1); /* exactly one second after the burst: the third permit */
    /* A thousand seconds later the bucket holds exactly its burst. */
    advance(f, RESIL_S(1000));
    admit(rl, 3);
    reject(rl, 1, 333333334);
}

static void thirty_thousand_permits_at_three_per_second_take_exactly_ten_thousand_seconds(
    void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 3, RESIL_S(1), 3);
    admit(rl, 3);
    for (int i = 0; i < 30000; i++)
        assert_int_equal(resil_ratelimit_acquire(rl, 1, NULL, 0), 0);
    assert_duration_equal(resil_fake_clock_now(f->fc), T0 + RESIL_S(10000));
    assert_int_equal(resil_ratelimit_available(rl), 0);
}

static void token_bucket_never_saves_more_than_its_burst(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 5);
    admit(rl, 5);
    advance(f, RESIL_S(3600));
    assert_int_equal(resil_ratelimit_available(rl), 5);
    admit(rl, 5);
    reject(rl, 1, RESIL_MS(100));
}

static void token_bucket_waits_for_all_n_permits(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 5);
    admit(rl, 3);
    reject(rl, 4, RESIL_MS(200)); /* two held, two more to earn */
    advance(f, RESIL_MS(200));
    admit(rl, 4);
}

static void token_bucket_with_a_long_period(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 1, RESIL_S(2), 1);
    admit(rl, 1);
    reject(rl, 1, RESIL_S(2));
    advance(f, RESIL_S(1));
    reject(rl, 1, RESIL_S(1));
}

static void token_bucket_at_its_limits_does_not_overflow(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 1000000000, RESIL_MS(1), 1000000000);
    admit(rl, 1000000000);
    reject(rl, 1000000000, RESIL_MS(1));
    advance(f, INT64_MAX / 4);
    admit(rl, 1000000000);
}

/* ---- fixed window ------------------------------------------------------- */

static void fixed_window_admits_its_permits_then_waits_for_the_next_window(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_FIXED_WINDOW, 3, RESIL_S(1));
    admit(rl, 1);
    advance(f, RESIL_MS(400));
    admit(rl, 2);
    reject(rl, 1, RESIL_MS(600));
    advance(f, RESIL_MS(600) - 1);
    reject(rl, 1, 1);
    advance(f, 1);
    admit(rl, 3);
    reject(rl, 1, RESIL_S(1));
}

static void fixed_window_allows_twice_the_permits_across_a_boundary(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_FIXED_WINDOW, 3, RESIL_S(1));
    advance(f, RESIL_MS(999));
    admit(rl, 3);
    advance(f, RESIL_MS(1));
    admit(rl, 3);
}

static void fixed_window_stays_on_its_grid_after_idle_windows(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_FIXED_WINDOW, 2, RESIL_S(1));
    admit(rl, 2);
    advance(f, RESIL_MS(3500));
    admit(rl, 2);
    reject(rl, 1, RESIL_MS(500));
    assert_int_equal(resil_ratelimit_available(rl), 0);
}

static void fixed_window_rejects_n_that_does_not_fit_what_is_left(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_FIXED_WINDOW, 3, RESIL_S(1));
    admit(rl, 2);
    reject(rl, 2, RESIL_S(1));
    admit(rl, 1);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 4, NULL), RESIL_EINVAL);
}

/* ---- sliding window ----------------------------------------------------- */

static void sliding_window_frees_a_permit_when_its_admission_leaves_the_window(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_SLIDING_WINDOW, 3, RESIL_S(1));
    admit(rl, 1);
    advance(f, RESIL_MS(100));
    admit(rl, 1);
    advance(f, RESIL_MS(100));
    admit(rl, 1);
    advance(f, RESIL_MS(100));
    reject(rl, 1, RESIL_MS(700));
    advance(f, RESIL_MS(700) - 1);
    reject(rl, 1, 1);
    advance(f, 1); /* T0 + 1 s: the first admission has left */
    admit(rl, 1);
    reject(rl, 1, RESIL_MS(100));
}

static void sliding_window_never_allows_more_than_its_permits_in_any_window(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_SLIDING_WINDOW, 3, RESIL_S(1));
    advance(f, RESIL_MS(999));
    admit(rl, 3);
    advance(f, RESIL_MS(1));
    reject(rl, 1, RESIL_MS(999));
}

static void sliding_window_retry_after_counts_the_oldest_admissions_n_needs(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_SLIDING_WINDOW, 4, RESIL_S(1));
    admit(rl, 1);
    advance(f, RESIL_MS(100));
    admit(rl, 2);
    advance(f, RESIL_MS(100));
    admit(rl, 1);
    reject(rl, 1, RESIL_MS(800)); /* the first admission frees one */
    reject(rl, 2, RESIL_MS(900)); /* the batch of two must go */
    reject(rl, 4, RESIL_S(1));    /* everything must go */
}

static void sliding_window_admissions_at_one_instant_share_an_entry(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_SLIDING_WINDOW, 3, RESIL_S(1));
    for (int round = 0; round < 5; round++) {
        admit(rl, 1);
        admit(rl, 1);
        admit(rl, 1);
        reject(rl, 1, RESIL_S(1));
        advance(f, RESIL_S(1));
    }
}

static void sliding_window_keeps_exact_count_over_many_windows(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_SLIDING_WINDOW, 5, RESIL_MS(10));
    int admitted = 0;
    for (int ms = 0; ms < 1000; ms++) {
        while (resil_ratelimit_try_acquire(rl, 1, NULL) == 0)
            admitted++;
        advance(f, RESIL_MS(1));
    }
    assert_int_equal(admitted, 500);
}

/* ---- try_acquire_at ----------------------------------------------------- */

static void an_instant_earlier_than_one_seen_counts_as_the_latest(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 1);
    resil_duration ra;
    assert_int_equal(resil_ratelimit_try_acquire_at(rl, 1, T0 + RESIL_MS(500), &ra), 0);
    assert_int_equal(resil_ratelimit_try_acquire_at(rl, 1, T0, &ra), RESIL_EREJECTED);
    assert_duration_equal(ra, RESIL_MS(100));
    assert_int_equal(resil_ratelimit_try_acquire_at(rl, 1, T0 + RESIL_MS(600), &ra), 0);
}

/* ---- blocking acquire --------------------------------------------------- */

static void acquire_sleeps_exactly_the_retry_after(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 1);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, NULL, 0), 0);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, NULL, 0), 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_MS(100));
    assert_duration_equal(resil_fake_clock_now(f->fc), T0 + RESIL_MS(100));
}

static void acquire_that_cannot_be_served_in_time_returns_at_once(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_FIXED_WINDOW, 1, RESIL_S(1));
    admit(rl, 1);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, NULL, RESIL_S(1) - 1), RESIL_ETIMEDOUT);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    assert_duration_equal(resil_fake_clock_now(f->fc), T0);
}

static void acquire_whose_wait_ends_exactly_at_the_timeout_succeeds(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_SLIDING_WINDOW, 1, RESIL_S(1));
    admit(rl, 1);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, NULL, RESIL_S(1)), 0);
    assert_duration_equal(resil_fake_clock_now(f->fc), T0 + RESIL_S(1));
}

static void acquire_with_a_fired_token_is_cancelled_without_waiting(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 1);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    resil_cancel_fire(&c);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, &c, 0), RESIL_ECANCELED);
    assert_int_equal(resil_ratelimit_available(rl), 1);
    resil_cancel_destroy(&c);
}

static void fire_during_sleep(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    resil_cancel_fire(ud);
}

static void acquire_cancelled_during_its_wait_returns_cancelled(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 1);
    admit(rl, 1);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    resil_fake_clock_set_hook(f->fc, fire_during_sleep, &c);
    assert_int_equal(resil_ratelimit_acquire(rl, 1, &c, 0), RESIL_ECANCELED);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    resil_ratelimit_stats s;
    resil_ratelimit_stats_get(rl, &s);
    assert_int_equal(s.cancelled, 1);
    resil_cancel_destroy(&c);
}

static void stats_count_calls_not_permits(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = bucket(f, 10, RESIL_S(1), 5);
    admit(rl, 4);
    reject(rl, 2, RESIL_MS(100));
    assert_int_equal(resil_ratelimit_acquire(rl, 5, NULL, RESIL_MS(10)), RESIL_ETIMEDOUT);
    assert_int_equal(resil_ratelimit_acquire(rl, 2, NULL, 0), 0);
    resil_ratelimit_stats s;
    resil_ratelimit_stats_get(rl, &s);
    assert_int_equal(s.admitted, 2);
    assert_int_equal(s.rejected, 1);
    assert_int_equal(s.timed_out, 1);
    assert_int_equal(s.cancelled, 0);
}

static void opts_get_returns_what_was_built(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = window(f, RESIL_RATELIMIT_FIXED_WINDOW, 7, RESIL_MS(250));
    resil_ratelimit_opts o;
    resil_ratelimit_opts_get(rl, &o);
    assert_int_equal(o.kind, RESIL_RATELIMIT_FIXED_WINDOW);
    assert_int_equal(o.permits, 7);
    assert_duration_equal(o.window, RESIL_MS(250));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(defaults_are_a_hundred_per_second),
        TEST(token_bucket_options_are_validated_by_name),
        TEST(token_bucket_capacity_that_would_overflow_is_refused),
        TEST(window_options_are_validated_by_name),
        TEST(sliding_window_log_is_bounded),
        TEST(unknown_kind_is_refused),
        TEST(null_options_are_refused),
        TEST(kind_names_round_trip),
        TEST(requests_outside_one_to_capacity_are_invalid_not_a_hang),
        TEST(token_bucket_starts_full_and_admits_its_burst),
        TEST(token_bucket_refills_one_permit_per_period_over_rate),
        TEST(three_per_second_admits_at_exact_nanoseconds_without_drift),
        TEST(thirty_thousand_permits_at_three_per_second_take_exactly_ten_thousand_seconds),
        TEST(token_bucket_never_saves_more_than_its_burst),
        TEST(token_bucket_waits_for_all_n_permits),
        TEST(token_bucket_with_a_long_period),
        TEST(token_bucket_at_its_limits_does_not_overflow),
        TEST(fixed_window_admits_its_permits_then_waits_for_the_next_window),
        TEST(fixed_window_allows_twice_the_permits_across_a_boundary),
        TEST(fixed_window_stays_on_its_grid_after_idle_windows),
        TEST(fixed_window_rejects_n_that_does_not_fit_what_is_left),
        TEST(sliding_window_frees_a_permit_when_its_admission_leaves_the_window),
        TEST(sliding_window_never_allows_more_than_its_permits_in_any_window),
        TEST(sliding_window_retry_after_counts_the_oldest_admissions_n_needs),
        TEST(sliding_window_admissions_at_one_instant_share_an_entry),
        TEST(sliding_window_keeps_exact_count_over_many_windows),
        TEST(an_instant_earlier_than_one_seen_counts_as_the_latest),
        TEST(acquire_sleeps_exactly_the_retry_after),
        TEST(acquire_that_cannot_be_served_in_time_returns_at_once),
        TEST(acquire_whose_wait_ends_exactly_at_the_timeout_succeeds),
        TEST(acquire_with_a_fired_token_is_cancelled_without_waiting),
        TEST(acquire_cancelled_during_its_wait_returns_cancelled),
        TEST(stats_count_calls_not_permits),
        TEST(opts_get_returns_what_was_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
