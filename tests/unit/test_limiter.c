/*
 * test_limiter.c — the adaptive concurrency limiter on the fake clock:
 * options and their validation, the bound and its queue (the bulkhead's),
 * and each estimator's limit trajectory against a sequence computed by
 * hand from its formula. Each sample is made by taking `in_flight`
 * permits at once and ending the last one after `rtt`, so the window sees
 * exactly that latency and that concurrency.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>

#include "test.h"

#define T0 RESIL_S(100)

typedef struct fixture {
    resil_fake_clock *fc;
    resil_limiter_opts opts;
    resil_limiter *l;
    int changes;
    int32_t from[16], to[16];
} fixture;

static void changed(void *ud, int32_t from, int32_t to, resil_instant at)
{
    fixture *f = ud;
    (void)at;
    if (f->changes < 16) {
        f->from[f->changes] = from;
        f->to[f->changes] = to;
    }
    f->changes++;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(T0, 0, &f->fc) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_limiter_free(f->l);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* Options for exact trajectories: one sample per window. */
static resil_limiter_opts *opts_for(fixture *f, resil_limit_algorithm a, int32_t initial)
{
    resil_limiter_opts_default(&f->opts, a);
    f->opts.initial_limit = initial;
    f->opts.window = 0;
    f->opts.window_samples = 1;
    f->opts.clock = resil_fake_clock_clock(f->fc);
    f->opts.on_change = changed;
    f->opts.on_change_ud = f;
    return &f->opts;
}

static resil_limiter *make(fixture *f)
{
    resil_err err = {0, ""};
    if (resil_limiter_new(&f->opts, &f->l, &err) != 0)
        fail_msg("limiter: %s", err.message);
    return f->l;
}

static void expect_invalid(fixture *f, const char *message)
{
    resil_limiter *l = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_limiter_new(&f->opts, &l, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(l);
}

/* One sample: `in_flight` calls at once, the last ending after `rtt`. */
static int32_t sample(fixture *f, int32_t in_flight, resil_duration rtt, resil_verdict v)
{
    resil_limiter_ticket t[64];
    resil_instant now = resil_fake_clock_now(f->fc);
    for (int32_t i = 0; i < in_flight; i++)
        assert_int_equal(resil_limiter_try_acquire_at(f->l, now, &t[i]), 0);
    assert_int_equal(t[in_flight - 1].in_flight, in_flight);
    for (int32_t i = 0; i < in_flight - 1; i++)
        resil_limiter_release_at(&t[i], RESIL_BREAKER_IGNORED, now);
    resil_fake_clock_advance(f->fc, rtt);
    resil_limiter_release_at(&t[in_flight - 1], v, resil_fake_clock_now(f->fc));
    return resil_limiter_limit(f->l);
}

#define OK RESIL_BREAKER_SUCCESS
#define DROP RESIL_BREAKER_FAILURE

/* ---- options ------------------------------------------------------------------ */

static void defaults_start_at_twenty_between_one_and_two_hundred(void **state)
{
    (void)state;
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, RESIL_LIMIT_GRADIENT);
    assert_int_equal(o.initial_limit, 20);
    assert_int_equal(o.min_limit, 1);
    assert_int_equal(o.max_limit, 200);
    assert_duration_equal(o.window, RESIL_S(1));
    assert_int_equal(o.window_samples, 10);
    assert_true(o.smoothing == 0.2);
    assert_true(o.gradient_tolerance == 1.5);
    assert_int_equal(o.max_queue, 0);
    resil_limiter_opts_default(&o, RESIL_LIMIT_VEGAS);
    assert_true(o.smoothing == 1.0);
    assert_true(o.vegas_alpha == 3 && o.vegas_beta == 6);
    resil_limiter_opts_default(&o, RESIL_LIMIT_AIMD);
    assert_true(o.aimd_backoff == 0.9);
}

static void the_options_read_back_as_they_were_given(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 7);
    f->opts.min_limit = 3;
    f->opts.max_limit = 40;
    f->opts.max_queue = 5;
    f->opts.queue_timeout = RESIL_MS(80);
    make(f);
    resil_limiter_opts got;
    resil_limiter_opts_get(f->l, &got);
    assert_int_equal(got.algorithm, RESIL_LIMIT_AIMD);
    assert_int_equal(got.initial_limit, 7);
    assert_int_equal(got.min_limit, 3);
    assert_int_equal(got.max_limit, 40);
    assert_duration_equal(got.window, 0);
    assert_int_equal(got.window_samples, 1);
    assert_true(got.smoothing == 1.0);
    assert_true(got.aimd_backoff == 0.9);
    assert_int_equal(got.max_queue, 5);
    assert_duration_equal(got.queue_timeout, RESIL_MS(80));
    assert_ptr_equal(got.clock, resil_fake_clock_clock(f->fc));
    assert_ptr_equal(got.on_change_ud, f);
    /* the options, not the state: a drop takes the limit to 7 × 0.9 */
    assert_int_equal(sample(f, 7, RESIL_MS(10), DROP), 6);
    resil_limiter_opts_get(f->l, &got);
    assert_int_equal(got.initial_limit, 7);
}

static void bad_options_are_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 10)->min_limit = 0;
    expect_invalid(f, "limiter.min_limit must be >= 1, got 0");
    opts_for(f, RESIL_LIMIT_AIMD, 10)->min_limit = 6;
    f->opts.max_limit = 5;
    expect_invalid(f, "limiter.max_limit must be >= min_limit, got 5");
    opts_for(f, RESIL_LIMIT_AIMD, 300);
    expect_invalid(f, "limiter.initial_limit must be in [min_limit, max_limit], got 300");
    opts_for(f, RESIL_LIMIT_AIMD, 10)->smoothing = 0;
    expect_invalid(f, "limiter.smoothing must be in (0, 1], got 0");
    opts_for(f, RESIL_LIMIT_AIMD, 10)->aimd_backoff = 1;
    expect_invalid(f, "limiter.aimd_backoff must be in (0, 1), got 1");
    opts_for(f, RESIL_LIMIT_VEGAS, 10)->vegas_beta = 2;
    expect_invalid(f, "limiter.vegas_beta must be > vegas_alpha, got 2");
    opts_for(f, RESIL_LIMIT_GRADIENT, 10)->gradient_tolerance = 0.5;
    expect_invalid(f, "limiter.gradient_tolerance must be >= 1, got 0.5");
    opts_for(f, RESIL_LIMIT_AIMD, 10)->window = -1;
    expect_invalid(f, "limiter.window must be >= 0, got -1ns");
    opts_for(f, RESIL_LIMIT_AIMD, 10)->window_samples = 0;
    expect_invalid(f, "limiter.window_samples must be >= 1, got 0");
    opts_for(f, RESIL_LIMIT_AIMD, 10)->max_queue = -1;
    expect_invalid(f, "limiter.max_queue must be >= 0, got -1");
}

static void aimd_latency_below_zero_is_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 10)->aimd_latency = -1;
    expect_invalid(f, "limiter.aimd_latency must be >= 0 (0 = none), got -1ns");
}

static void queue_timeout_below_zero_is_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 10)->queue_timeout = -1;
    expect_invalid(f, "limiter.queue_timeout must be >= 0 (0 = until cancelled), got -1ns");
}

static void an_algorithm_past_the_last_is_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 10)->algorithm = RESIL_LIMIT_ALGORITHM_COUNT;
    expect_invalid(f, "limiter.algorithm must be vegas, gradient or aimd, got 3");
}

static void a_vegas_alpha_not_above_zero_is_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_VEGAS, 10)->vegas_alpha = 0;
    expect_invalid(f, "limiter.vegas_alpha must be > 0, got 0");
    opts_for(f, RESIL_LIMIT_VEGAS, 10)->vegas_alpha = NAN;
    expect_invalid(f, "limiter.vegas_alpha must be > 0, got nan");
}

static void gradient_long_windows_below_one_is_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_GRADIENT, 10)->gradient_long_windows = 0;
    expect_invalid(f, "limiter.gradient_long_windows must be >= 1, got 0");
}

static void a_gradient_headroom_below_zero_is_refused_by_name(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_GRADIENT, 10)->gradient_headroom = -1;
    expect_invalid(f, "limiter.gradient_headroom must be >= 0, got -1");
    opts_for(f, RESIL_LIMIT_GRADIENT, 10)->gradient_headroom = NAN;
    expect_invalid(f, "limiter.gradient_headroom must be >= 0, got nan");
}

/* The accepted side of each of those bounds. */
static void the_estimators_lowest_accepted_values_make_a_limiter(void **state)
{
    fixture *f = *state;
    resil_limiter_opts *o = opts_for(f, RESIL_LIMIT_GRADIENT, 10);
    o->vegas_alpha = 1e-9;
    o->vegas_beta = 2e-9;
    o->gradient_long_windows = 1;
    o->gradient_headroom = 0;
    make(f);
    assert_int_equal(resil_limiter_limit(f->l), 10);
}

static void a_limiter_needs_its_options_and_out(void **state)
{
    fixture *f = *state;
    resil_limiter *l = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_limiter_new(NULL, &l, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "limiter: options and out must not be NULL");
    opts_for(f, RESIL_LIMIT_AIMD, 10);
    assert_int_equal(resil_limiter_new(&f->opts, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "limiter: options and out must not be NULL");
}

/* ---- the bound --------------------------------------------------------------------- */

static void calls_beyond_the_limit_are_rejected_at_once(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 2);
    make(f);
    resil_limiter_ticket a, b, c;
    assert_int_equal(resil_limiter_try_acquire_at(f->l, T0, &a), 0);
    assert_int_equal(resil_limiter_acquire(f->l, NULL, &b), 0);
    assert_int_equal(resil_limiter_acquire(f->l, NULL, &c), RESIL_EREJECTED);
    assert_null(c.owner);
    assert_int_equal(resil_limiter_in_flight(f->l), 2);
    resil_limiter_release(&a, RESIL_BREAKER_IGNORED);
    resil_limiter_release(&a, RESIL_BREAKER_IGNORED); /* harmless */
    resil_limiter_release(&b, RESIL_BREAKER_IGNORED);
    assert_int_equal(resil_limiter_in_flight(f->l), 0);
    resil_limiter_stats st;
    resil_limiter_stats_get(f->l, &st);
    assert_int_equal(st.admitted, 2);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.windows, 0); /* ignored calls are no samples */
}

typedef struct waiter_arg {
    resil_limiter *l;
    int rc;
    resil_limiter_ticket t;
} waiter_arg;

static void *wait_for_permit(void *p)
{
    waiter_arg *w = p;
    w->rc = resil_limiter_acquire(w->l, NULL, &w->t);
    return NULL;
}

/* A limit of 1 taken by `held`, and another thread queued behind it. */
static pthread_t one_queued(fixture *f, resil_limiter_ticket *held, waiter_arg *w)
{
    opts_for(f, RESIL_LIMIT_AIMD, 1)->max_queue = 1;
    make(f);
    assert_int_equal(resil_limiter_try_acquire_at(f->l, T0, held), 0);
    *w = (waiter_arg){f->l, 1, {0}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_for_permit, w), 0);
    while (resil_limiter_queued(f->l) != 1)
        sched_yield();
    return th;
}

static void a_raised_limit_admits_the_queued_caller_at_once(void **state)
{
    fixture *f = *state;
    resil_limiter_ticket held;
    waiter_arg w;
    pthread_t th = one_queued(f, &held, &w);
    /* a success with the limit fully used: AIMD adds one, and the waiter
     * gets the new permit although `held` is still out */
    resil_limiter_release_at(&held, OK, T0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(resil_limiter_limit(f->l), 2);
    resil_limiter_release(&w.t, RESIL_BREAKER_IGNORED);
}

static void *take_and_hold(void *p)
{
    waiter_arg *w = p;
    w->rc = resil_limiter_try_acquire_at(w->l, T0, &w->t);
    return NULL;
}

/* The permit a thread parks for its next call is taken back for another
 * thread that finds the limit reached. */
static void a_parked_permit_serves_another_thread_at_the_limit(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 1);
    make(f);
    resil_limiter_ticket t;
    assert_int_equal(resil_limiter_try_acquire_at(f->l, T0, &t), 0);
    resil_limiter_release_at(&t, RESIL_BREAKER_IGNORED, T0);
    waiter_arg w = {f->l, 1, {0}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take_and_hold, &w), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(w.t.in_flight, 1);
    assert_int_equal(resil_limiter_in_flight(f->l), 1);
    assert_int_equal(resil_limiter_try_acquire_at(f->l, T0, &t), RESIL_EREJECTED);
    resil_limiter_release_at(&w.t, RESIL_BREAKER_IGNORED, T0);
    assert_int_equal(resil_limiter_in_flight(f->l), 0);
    resil_limiter_stats st;
    resil_limiter_stats_get(f->l, &st);
    assert_int_equal(st.admitted, 2);
    assert_int_equal(st.rejected, 1);
}

/* A release while someone waits hands the permit over instead of parking. */
static void a_release_hands_its_permit_to_the_waiter(void **state)
{
    fixture *f = *state;
    resil_limiter_ticket held;
    waiter_arg w;
    pthread_t th = one_queued(f, &held, &w);
    resil_limiter_release_at(&held, RESIL_BREAKER_IGNORED, T0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(resil_limiter_in_flight(f->l), 1);
    resil_limiter_release(&w.t, RESIL_BREAKER_IGNORED);
    assert_int_equal(resil_limiter_in_flight(f->l), 0);
}

static void *calls_in_a_row(void *p)
{
    resil_limiter *l = p;
    for (int i = 0; i < 50000; i++) {
        resil_limiter_ticket t;
        if (resil_limiter_try_acquire_at(l, T0, &t) == 0)
            resil_limiter_release_at(&t, RESIL_BREAKER_IGNORED, T0);
    }
    return NULL;
}

/* Threads that each take their parked permit back are each counted. */
static void calls_from_two_threads_are_all_admitted_and_counted(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 2);
    make(f);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, calls_in_a_row, f->l), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    resil_limiter_stats st;
    resil_limiter_stats_get(f->l, &st);
    assert_int_equal(st.admitted, 100000);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(resil_limiter_in_flight(f->l), 0);
}

/* ---- estimators ------------------------------------------------------------------- */

static void *one_slow_call(void *p)
{
    resil_limiter *l = p;
    resil_limiter_ticket t;
    if (resil_limiter_try_acquire_at(l, T0, &t) == 0)
        resil_limiter_release_at(&t, RESIL_BREAKER_SUCCESS, T0 + RESIL_MS(501));
    return NULL;
}

/* More threads than stripes, one after another: some land on a stripe
 * another thread sampled first (its owner), and their latencies count as
 * fully as the owners' — one lost would bring the average under 500 ms. */
static void a_window_averages_the_latencies_of_threads_sharing_a_stripe(void **state)
{
    fixture *f = *state;
    resil_limiter_opts *o = opts_for(f, RESIL_LIMIT_AIMD, 10);
    o->aimd_latency = RESIL_MS(500);
    o->window_samples = 17;
    make(f);
    for (int i = 0; i < 17; i++) {
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, one_slow_call, f->l), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
    }
    assert_int_equal(f->changes, 1);
    assert_int_equal(resil_limiter_limit(f->l), 9); /* 10 × 0.9 */
}

static void aimd_adds_one_per_busy_window_and_multiplies_on_a_drop(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 10);
    make(f);
    assert_int_equal(sample(f, 10, RESIL_MS(100), OK), 11);
    assert_int_equal(sample(f, 11, RESIL_MS(100), OK), 12);
    assert_int_equal(sample(f, 12, RESIL_MS(100), DROP), 10); /* 12 × 0.9 = 10.8 */
    assert_int_equal(sample(f, 10, RESIL_MS(100), OK), 11);   /* 11.8 */
    assert_int_equal(sample(f, 2, RESIL_MS(100), OK), 11);    /* idle: 2 × 2 < 11.8 */
    assert_int_equal(sample(f, 11, RESIL_MS(100), DROP), 10); /* 10.62 */
    assert_int_equal(f->changes, 5);
    assert_int_equal(f->from[2], 12);
    assert_int_equal(f->to[2], 10);
}

static void aimd_treats_a_window_slower_than_its_threshold_as_a_drop(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_AIMD, 10)->aimd_latency = RESIL_MS(500);
    make(f);
    assert_int_equal(sample(f, 10, RESIL_MS(500), OK), 11);
    assert_int_equal(sample(f, 11, RESIL_MS(501), OK), 9); /* 11 × 0.9 = 9.9 */
}

static void aimd_stays_between_its_floor_and_ceiling(void **state)
{
    fixture *f = *state;
    resil_limiter_opts *o = opts_for(f, RESIL_LIMIT_AIMD, 10);
    o->min_limit = 9;
    o->max_limit = 11;
    make(f);
    assert_int_equal(sample(f, 10, RESIL_MS(100), OK), 11);
    assert_int_equal(sample(f, 11, RESIL_MS(100), OK), 11);
    assert_int_equal(sample(f, 11, RESIL_MS(100), DROP), 9); /* 9.9 */
    assert_int_equal(sample(f, 9, RESIL_MS(100), DROP), 9);  /* 8.91 → the floor */
}

static void vegas_grows_on_a_short_queue_and_shrinks_on_a_long_one(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_VEGAS, 10);
    make(f);
    /* queue = limit × (1 − best/rtt); step = max(1, log10(limit)) */
    assert_int_equal(sample(f, 10, RESIL_MS(100), OK), 11);  /* q 0 < 3: 10 + 1 */
    assert_int_equal(sample(f, 11, RESIL_MS(100), OK), 12);  /* 11 + log10 11 = 12.041 */
    assert_int_equal(sample(f, 12, RESIL_MS(200), OK), 12);  /* q 6.02 in [3.24, 6.48] */
    assert_int_equal(sample(f, 12, RESIL_MS(400), OK), 10);  /* q 9.03 > 6.48: 10.961 */
    assert_int_equal(sample(f, 10, RESIL_MS(400), DROP), 9); /* 10.961 − 1.040 = 9.921 */
    assert_int_equal(sample(f, 9, RESIL_MS(50), OK), 10);    /* new best: 9.921 + 1 */
}

static void gradient_scales_by_long_over_short_latency_smoothed(void **state)
{
    fixture *f = *state;
    opts_for(f, RESIL_LIMIT_GRADIENT, 20);
    make(f);
    /* long += (rtt − long)·2/61; g = clamp(1.5·long/rtt, 0.5, 1);
     * limit += 0.2·(limit·g + 4 − limit) */
    assert_int_equal(sample(f, 20, RESIL_MS(100), OK), 20);   /* 20.8 */
    assert_int_equal(sample(f, 20, RESIL_MS(300), OK), 19);   /* g 0.533: 19.656 */
    assert_int_equal(sample(f, 19, RESIL_MS(300), OK), 18);   /* 18.744 */
    assert_int_equal(sample(f, 18, RESIL_MS(100), OK), 19);   /* g 1: 19.544 */
    assert_int_equal(sample(f, 19, RESIL_MS(100), DROP), 18); /* g 0.5: 18.390 */
}

static void a_window_closes_only_when_long_enough_and_full_enough(void **state)
{
    fixture *f = *state;
    resil_limiter_opts *o = opts_for(f, RESIL_LIMIT_AIMD, 10);
    o->window = RESIL_S(1);
    o->window_samples = 3;
    make(f);
    assert_int_equal(sample(f, 10, RESIL_MS(600), OK), 10); /* 1 sample, 0.6 s */
    assert_int_equal(sample(f, 10, RESIL_MS(600), OK), 10); /* 2 samples, 1.2 s */
    assert_int_equal(sample(f, 10, RESIL_MS(1), OK), 11);   /* 3 samples: closes */
    assert_int_equal(sample(f, 11, RESIL_MS(1), OK), 11);   /* a new window */
    resil_limiter_stats st;
    resil_limiter_stats_get(f->l, &st);
    assert_int_equal(st.windows, 1);
}

/* ---- another implementation ------------------------------------------------------ */

typedef struct counting {
    int acquired, released;
    resil_verdict last;
} counting;

static int c_acquire(void *self, resil_cancel *cancel, bool wait, resil_instant now,
                     resil_limiter_ticket *t)
{
    counting *c = self;
    (void)cancel;
    (void)wait;
    if (c->acquired - c->released >= 1)
        return RESIL_EREJECTED;
    c->acquired++;
    t->start = now;
    return 0;
}

static void c_release(void *self, const resil_limiter_ticket *t, resil_verdict v,
                      resil_instant now)
{
    counting *c = self;
    (void)t;
    (void)now;
    c->released++;
    c->last = v;
}

static int32_t c_limit(void *self)
{
    (void)self;
    return 1;
}

static void another_implementation_plugs_in_through_its_table(void **state)
{
    (void)state;
    static const resil_limiter_ops ops = {sizeof ops, "test", c_acquire, c_release, c_limit,
                                          NULL, NULL, NULL};
    counting c = {0, 0, RESIL_BREAKER_IGNORED};
    resil_limiter *l;
    assert_int_equal(resil_limiter_new_custom(&ops, &c, &l, NULL), 0);
    assert_string_equal(resil_limiter_impl_name(l), "test");
    resil_limiter_ticket a, b;
    assert_int_equal(resil_limiter_try_acquire_at(l, T0, &a), 0);
    assert_ptr_equal(a.owner, l);
    assert_int_equal(resil_limiter_try_acquire_at(l, T0, &b), RESIL_EREJECTED);
    resil_limiter_release_at(&a, DROP, T0);
    resil_limiter_release_at(&a, DROP, T0);
    assert_int_equal(c.released, 1);
    assert_int_equal(c.last, DROP);
    assert_int_equal(resil_limiter_limit(l), 1);
    assert_int_equal(resil_limiter_in_flight(l), 0);
    resil_limiter_free(l);
    static const resil_limiter_ops short_ops = {8, "x", c_acquire, c_release, NULL, NULL, NULL, NULL};
    resil_err err;
    assert_int_equal(resil_limiter_new_custom(&short_ops, &c, &l, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "limiter: ops needs size, acquire and release");
}

static void a_plug_in_limiter_needs_its_table_and_out(void **state)
{
    (void)state;
    static const resil_limiter_ops ops = {sizeof ops, "test", c_acquire, c_release, c_limit,
                                          NULL, NULL, NULL};
    resil_limiter *l = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_limiter_new_custom(NULL, NULL, &l, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "limiter: ops and out must not be NULL");
    assert_int_equal(resil_limiter_new_custom(&ops, NULL, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "limiter: ops and out must not be NULL");
}

/* A table written against a header that ended after release: its limit,
 * though set, lies beyond its size and is not asked. */
static void operations_beyond_the_table_size_are_absent(void **state)
{
    (void)state;
    static const resil_limiter_ops old = {.size = offsetof(resil_limiter_ops, limit),
                                          .kind = "old",
                                          .acquire = c_acquire,
                                          .release = c_release,
                                          .limit = c_limit};
    counting c = {0, 0, RESIL_BREAKER_IGNORED};
    resil_limiter *l;
    assert_int_equal(resil_limiter_new_custom(&old, &c, &l, NULL), 0);
    assert_int_equal(resil_limiter_limit(l), 0);
    resil_limiter_free(l);
}

static void algorithms_have_names_that_parse_back(void **state)
{
    (void)state;
    assert_string_equal(resil_limit_algorithm_name(RESIL_LIMIT_VEGAS), "vegas");
    assert_int_equal(resil_limit_algorithm_parse("Gradient"), RESIL_LIMIT_GRADIENT);
    assert_int_equal(resil_limit_algorithm_parse("aimd"), RESIL_LIMIT_AIMD);
    assert_int_equal(resil_limit_algorithm_parse("bbr"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_start_at_twenty_between_one_and_two_hundred),
        TEST(the_options_read_back_as_they_were_given),
        TEST(bad_options_are_refused_by_name),
        TEST(aimd_latency_below_zero_is_refused_by_name),
        TEST(queue_timeout_below_zero_is_refused_by_name),
        TEST(an_algorithm_past_the_last_is_refused_by_name),
        TEST(a_vegas_alpha_not_above_zero_is_refused_by_name),
        TEST(gradient_long_windows_below_one_is_refused_by_name),
        TEST(a_gradient_headroom_below_zero_is_refused_by_name),
        TEST(the_estimators_lowest_accepted_values_make_a_limiter),
        TEST(a_limiter_needs_its_options_and_out),
        TEST(calls_beyond_the_limit_are_rejected_at_once),
        TEST(a_raised_limit_admits_the_queued_caller_at_once),
        TEST(a_parked_permit_serves_another_thread_at_the_limit),
        TEST(a_release_hands_its_permit_to_the_waiter),
        TEST(calls_from_two_threads_are_all_admitted_and_counted),
        TEST(a_window_averages_the_latencies_of_threads_sharing_a_stripe),
        TEST(aimd_adds_one_per_busy_window_and_multiplies_on_a_drop),
        TEST(aimd_treats_a_window_slower_than_its_threshold_as_a_drop),
        TEST(aimd_stays_between_its_floor_and_ceiling),
        TEST(vegas_grows_on_a_short_queue_and_shrinks_on_a_long_one),
        TEST(gradient_scales_by_long_over_short_latency_smoothed),
        TEST(a_window_closes_only_when_long_enough_and_full_enough),
        cmocka_unit_test(another_implementation_plugs_in_through_its_table),
        cmocka_unit_test(a_plug_in_limiter_needs_its_table_and_out),
        cmocka_unit_test(operations_beyond_the_table_size_are_absent),
        cmocka_unit_test(algorithms_have_names_that_parse_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
