/*
 * test_degrade.c — the graceful-degradation monitor on the fake clock with
 * a scripted health sampler: Excalibur's levels and defaults, start-up
 * validation by name, the admission direction, which signal moves the
 * level where, the error-rate window, the minimum time at a level, manual
 * control, lazy evaluation and the level-change events.
 */
#include <math.h>

#include "test.h"

#define T0 RESIL_S(1000)

typedef struct script {
    double cpu, memory;
    int rc;
    int calls;
} script;

static int scripted(void *ud, resil_health_sample *out)
{
    script *s = ud;
    s->calls++;
    out->cpu = s->cpu;
    out->memory = s->memory;
    return s->rc;
}

#define MAX_EVENTS 16

typedef struct fixture {
    resil_fake_clock *fc;
    script health;
    resil_degrade_opts opts;
    resil_degrade *d;
    resil_degrade_event events[MAX_EVENTS];
    int nevents;
} fixture;

static void on_change(void *ud, const resil_degrade_event *ev)
{
    fixture *f = ud;
    if (f->nevents < MAX_EVENTS)
        f->events[f->nevents] = *ev;
    f->nevents++;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(T0, 0, &f->fc) != 0)
        return -1;
    f->health.cpu = f->health.memory = 10;
    resil_degrade_opts_default(&f->opts);
    f->opts.sampler = scripted;
    f->opts.sampler_ud = &f->health;
    f->opts.on_change = on_change;
    f->opts.on_change_ud = f;
    f->opts.clock = resil_fake_clock_clock(f->fc);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_degrade_free(f->d);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static resil_degrade *make(fixture *f)
{
    resil_err err;
    assert_int_equal(resil_degrade_new(&f->opts, &f->d, &err), 0);
    return f->d;
}

static void advance(fixture *f, resil_duration d) { resil_fake_clock_advance(f->fc, d); }

static void record(resil_degrade *d, int calls, int failures)
{
    for (int i = 0; i < calls; i++)
        resil_degrade_record(d, i >= failures);
}

static void expect_invalid(fixture *f, const char *message)
{
    resil_err err = {0};
    resil_degrade *d = NULL;
    assert_int_equal(resil_degrade_new(&f->opts, &d, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(d);
}

/* ---- defaults and validation ------------------------------------------- */

static void defaults_are_excaliburs_levels_and_timings(void **state)
{
    (void)state;
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    assert_true(o.auto_adjust);
    assert_true(o.evaluate_on_call);
    assert_duration_equal(o.check_interval, RESIL_S(30));
    assert_duration_equal(o.min_level_duration, RESIL_S(60));
    assert_duration_equal(o.error_window, RESIL_S(60));
    assert_int_equal(o.error_buckets, 6);
    assert_int_equal(o.min_throughput, 10);
    assert_int_equal(o.level_count, 5);
    const char *names[] = {"Minor", "Moderate", "Major", "Severe", "Emergency"};
    const int priority[] = {10, 30, 50, 70, 100};
    const double error[] = {1, 5, 10, 25, 50}, cpu[] = {60, 70, 80, 90, 95};
    for (int i = 0; i < 5; i++) {
        assert_string_equal(o.levels[i].name, names[i]);
        assert_int_equal(o.levels[i].priority_threshold, priority[i]);
        assert_true(o.levels[i].error_rate == error[i]);
        assert_true(o.levels[i].cpu == cpu[i]);
        assert_true(o.levels[i].memory == cpu[i]);
    }
    assert_null(o.sampler);
    assert_null(o.on_change);
    assert_null(o.clock);
}

static void timing_options_are_validated_by_name(void **state)
{
    fixture *f = *state;
    f->opts.check_interval = 0;
    expect_invalid(f, "degrade.check_interval must be > 0, got 0s");
    f->opts.check_interval = -1;
    expect_invalid(f, "degrade.check_interval must be > 0, got -1ns");
    f->opts.check_interval = RESIL_S(30);
    f->opts.min_level_duration = -1;
    expect_invalid(f, "degrade.min_level_duration must be >= 0, got -1ns");
    f->opts.min_level_duration = 0;
    f->opts.error_window = 0;
    expect_invalid(f, "degrade.error_window must be > 0, got 0s");
    f->opts.error_window = RESIL_S(60);
    f->opts.error_buckets = 0;
    expect_invalid(f, "degrade.error_buckets must be in [1, 1000], got 0");
    f->opts.error_buckets = 1001;
    expect_invalid(f, "degrade.error_buckets must be in [1, 1000], got 1001");
    f->opts.error_buckets = 6;
    f->opts.error_window = RESIL_MS(5);
    expect_invalid(f, "degrade.error_window / degrade.error_buckets must be >= 1ms, got 833333ns");
    f->opts.error_window = RESIL_MS(6);
    f->opts.min_throughput = 0;
    expect_invalid(f, "degrade.min_throughput must be >= 1, got 0");
    f->opts.min_throughput = 1;
    make(f);
}

static void level_count_is_validated_by_name(void **state)
{
    fixture *f = *state;
    f->opts.level_count = 0;
    expect_invalid(f, "degrade.level_count must be in [1, 8], got 0");
    f->opts.level_count = 9;
    expect_invalid(f, "degrade.level_count must be in [1, 8], got 9");
}

static void priority_thresholds_must_increase_with_the_level(void **state)
{
    fixture *f = *state;
    f->opts.levels[2].priority_threshold = 30;
    expect_invalid(f, "degrade.levels[2].priority_threshold must be greater than "
                      "levels[1].priority_threshold (30), got 30");
}

static void health_thresholds_must_not_fall_with_the_level(void **state)
{
    fixture *f = *state;
    f->opts.levels[3].error_rate = 5;
    expect_invalid(f, "degrade.levels[3].error_rate must not be below levels[2].error_rate (10), "
                      "got 5");
    f->opts.levels[3].error_rate = 25;
    f->opts.levels[1].cpu = 59;
    expect_invalid(f, "degrade.levels[1].cpu must not be below levels[0].cpu (60), got 59");
    f->opts.levels[1].cpu = 60; /* equal is allowed */
    f->opts.levels[4].memory = 89.5;
    expect_invalid(f, "degrade.levels[4].memory must not be below levels[3].memory (90), "
                      "got 89.5");
}

static void percentages_outside_zero_to_hundred_are_refused(void **state)
{
    fixture *f = *state;
    f->opts.levels[0].error_rate = -1;
    expect_invalid(f, "degrade.levels[0].error_rate must be a percentage in [0, 100], got -1");
    f->opts.levels[0].error_rate = 1;
    f->opts.levels[4].cpu = 101;
    expect_invalid(f, "degrade.levels[4].cpu must be a percentage in [0, 100], got 101");
    f->opts.levels[4].cpu = 100;
    f->opts.levels[2].memory = NAN;
    expect_invalid(f, "degrade.levels[2].memory must be a percentage in [0, 100], got nan");
}

static void level_names_must_be_one_to_thirty_one_characters(void **state)
{
    fixture *f = *state;
    f->opts.levels[1].name = "";
    expect_invalid(f, "degrade.levels[1].name must be 1 to 31 characters");
    f->opts.levels[1].name = NULL;
    expect_invalid(f, "degrade.levels[1].name must be 1 to 31 characters");
    f->opts.levels[1].name = "abcdefghijklmnopqrstuvwxyz012345";
    expect_invalid(f, "degrade.levels[1].name must be 1 to 31 characters");
    f->opts.levels[1].name = "abcdefghijklmnopqrstuvwxyz01234";
    make(f);
    assert_string_equal(resil_degrade_level_name(f->d, 2), "abcdefghijklmnopqrstuvwxyz01234");
}

static void null_options_are_refused(void **state)
{
    (void)state;
    resil_degrade *d = NULL;
    resil_err err;
    assert_int_equal(resil_degrade_new(NULL, &d, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "degrade: options and out must not be NULL");
    resil_degrade_free(NULL);
}

static void level_names_are_copied_at_construction(void **state)
{
    fixture *f = *state;
    char name[] = "Brownout";
    f->opts.level_count = 1;
    f->opts.levels[0].name = name;
    make(f);
    name[0] = 'X';
    assert_int_equal(resil_degrade_level_count(f->d), 2);
    assert_string_equal(resil_degrade_level_name(f->d, 0), "Normal");
    assert_string_equal(resil_degrade_level_name(f->d, 1), "Brownout");
    assert_null(resil_degrade_level_name(f->d, 2));
    assert_null(resil_degrade_level_name(f->d, -1));
}

/* ---- the admission direction ------------------------------------------- */

static void normal_admits_every_priority(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_level(d), 0);
    assert_int_equal(resil_degrade_admit(d, INT32_MIN), 0);
    assert_int_equal(resil_degrade_admit(d, 0), 0);
    assert_int_equal(resil_degrade_level_threshold(d, 0), INT32_MIN);
    assert_int_equal(resil_degrade_level_threshold(d, 6), INT32_MAX);
}

static void at_major_priority_fifty_runs_and_forty_nine_is_shed(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_set_level(d, 3), 0);
    assert_string_equal(resil_degrade_level_name(d, 3), "Major");
    assert_int_equal(resil_degrade_level_threshold(d, 3), 50);
    assert_int_equal(resil_degrade_admit(d, 50), 0);
    assert_int_equal(resil_degrade_admit(d, 51), 0);
    assert_int_equal(resil_degrade_admit(d, 49), RESIL_EREJECTED);
}

static void emergency_admits_only_priority_hundred_and_above(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_set_level(d, 5), 0);
    assert_int_equal(resil_degrade_admit(d, 100), 0);
    assert_int_equal(resil_degrade_admit(d, INT32_MAX), 0);
    assert_int_equal(resil_degrade_admit(d, 99), RESIL_EREJECTED);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.rejected, 1);
}

/* ---- what moves the level ---------------------------------------------- */

static void an_error_rate_reaching_a_threshold_moves_to_that_level(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    record(d, 100, 10);
    assert_int_equal(resil_degrade_tick(d), 3); /* 10 % = Major's threshold */
    assert_int_equal(f->nevents, 1);
    assert_int_equal(f->events[0].from, 0);
    assert_int_equal(f->events[0].to, 3);
    assert_string_equal(f->events[0].from_name, "Normal");
    assert_string_equal(f->events[0].to_name, "Major");
    assert_int_equal(f->events[0].cause, RESIL_DEGRADE_CAUSE_ERROR_RATE);
    assert_true(f->events[0].error_rate == 10.0);
    assert_true(f->events[0].cpu == 10.0);
    assert_duration_equal(f->events[0].at, T0);
}

static void an_error_rate_just_below_a_threshold_stays_a_level_lower(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    record(d, 1000, 99); /* 9.9 %: Moderate (5 %), not Major (10 %) */
    assert_int_equal(resil_degrade_tick(d), 2);
}

static void fewer_calls_than_min_throughput_are_not_a_signal(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    record(d, 9, 9);
    assert_int_equal(resil_degrade_tick(d), 0);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_true(isnan(s.error_rate));
    assert_int_equal(s.window_calls, 9);
    record(d, 1, 1);
    assert_int_equal(resil_degrade_tick(d), 5); /* 10 of 10 failed */
}

static void cpu_moves_to_the_highest_level_it_reaches(void **state)
{
    fixture *f = *state;
    f->health.cpu = 75;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 2);
    assert_int_equal(f->events[0].cause, RESIL_DEGRADE_CAUSE_CPU);
    assert_true(f->events[0].cpu == 75.0);
}

static void memory_at_ninety_five_percent_is_an_emergency(void **state)
{
    fixture *f = *state;
    f->health.memory = 95;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 5);
    assert_int_equal(f->events[0].cause, RESIL_DEGRADE_CAUSE_MEMORY);
}

static void the_worst_signal_decides(void **state)
{
    fixture *f = *state;
    f->health.cpu = 65;    /* Minor */
    f->health.memory = 85; /* Major */
    resil_degrade *d = make(f);
    record(d, 100, 5); /* Moderate */
    assert_int_equal(resil_degrade_tick(d), 3);
    assert_int_equal(f->events[0].cause, RESIL_DEGRADE_CAUSE_MEMORY);
}

static void unknown_readings_are_ignored(void **state)
{
    fixture *f = *state;
    f->health.cpu = NAN;
    f->health.memory = NAN;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 0);
    f->health.cpu = 99;
    f->health.rc = RESIL_EIO; /* a failing sampler makes both unknown */
    assert_int_equal(resil_degrade_tick(d), 0);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_true(isnan(s.cpu));
    assert_true(isnan(s.memory));
}

/* ---- the error-rate window ---------------------------------------------- */

static void failures_age_out_of_the_window_bucket_by_bucket(void **state)
{
    fixture *f = *state;
    f->opts.min_level_duration = 0;
    resil_degrade *d = make(f);
    record(d, 10, 10);         /* bucket [0 s, 10 s) */
    advance(f, RESIL_S(25));
    record(d, 10, 0);          /* bucket [20 s, 30 s) */
    advance(f, RESIL_S(34));   /* T0 + 59 s: both buckets still inside */
    assert_int_equal(resil_degrade_tick(d), 5);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.window_calls, 20);
    assert_int_equal(s.window_failures, 10);
    assert_true(s.error_rate == 50.0);

    advance(f, RESIL_S(1)); /* T0 + 60 s: the first bucket has left */
    assert_int_equal(resil_degrade_tick(d), 0);
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.window_calls, 10);
    assert_int_equal(s.window_failures, 0);
    assert_int_equal(f->events[1].cause, RESIL_DEGRADE_CAUSE_RECOVERY);

    advance(f, RESIL_S(30)); /* T0 + 90 s: everything has left */
    resil_degrade_tick(d);
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.window_calls, 0);
}

/* A clock whose reading the test sets, even backwards: what a thread that
 * read the time just before another thread sees when it takes the lock. */
typedef struct set_clock {
    resil_clock base;
    resil_instant now;
} set_clock;

static resil_instant set_clock_now(resil_clock *c) { return ((set_clock *)c)->now; }
static int64_t set_clock_wall(resil_clock *c) { return ((set_clock *)c)->now; }
static int set_clock_sleep(resil_clock *c, resil_duration d, resil_cancel *cancel)
{
    (void)c;
    (void)d;
    (void)cancel;
    return 0;
}

static void a_late_record_does_not_erase_a_newer_bucket(void **state)
{
    fixture *f = *state;
    set_clock clock = {{set_clock_now, set_clock_wall, set_clock_sleep}, T0};
    f->opts.clock = &clock.base;
    f->opts.error_buckets = 1;
    f->opts.error_window = RESIL_S(10);
    f->opts.min_throughput = 1;
    resil_degrade *d = make(f);
    clock.now = T0 + RESIL_S(10); /* the second bucket: [10 s, 20 s) */
    record(d, 3, 0);
    clock.now = T0 + RESIL_S(10) - 1; /* a caller that read the clock a tick earlier */
    record(d, 1, 0);
    clock.now = T0 + RESIL_S(10);
    resil_degrade_tick(d);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.window_calls, 4);
    resil_degrade_free(d);
    f->d = NULL;
}

static void a_single_bucket_window_forgets_everything_at_once(void **state)
{
    fixture *f = *state;
    f->opts.min_level_duration = 0;
    f->opts.error_buckets = 1;
    resil_degrade *d = make(f);
    record(d, 10, 10);
    advance(f, RESIL_S(60) - 1);
    assert_int_equal(resil_degrade_tick(d), 5);
    advance(f, 1);
    assert_int_equal(resil_degrade_tick(d), 0);
}

/* ---- minimum time at a level -------------------------------------------- */

static void the_first_move_after_start_up_does_not_wait(void **state)
{
    fixture *f = *state;
    f->health.cpu = 82;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 3);
}

static void recovery_waits_for_the_minimum_time_then_goes_straight_down(void **state)
{
    fixture *f = *state;
    f->health.cpu = 92;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 4);
    f->health.cpu = 10;
    advance(f, RESIL_S(60) - 1);
    assert_int_equal(resil_degrade_tick(d), 4);
    advance(f, 1);
    assert_int_equal(resil_degrade_tick(d), 0);
    assert_int_equal(f->nevents, 2);
    assert_int_equal(f->events[1].from, 4);
    assert_int_equal(f->events[1].to, 0);
    assert_int_equal(f->events[1].cause, RESIL_DEGRADE_CAUSE_RECOVERY);
    assert_duration_equal(f->events[1].at, T0 + RESIL_S(60));
}

static void escalation_also_waits_for_the_minimum_time(void **state)
{
    fixture *f = *state;
    f->health.cpu = 61;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 1);
    f->health.cpu = 99;
    advance(f, RESIL_S(30));
    assert_int_equal(resil_degrade_tick(d), 1);
    advance(f, RESIL_S(30));
    assert_int_equal(resil_degrade_tick(d), 5);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_duration_equal(s.level_since, T0 + RESIL_S(60));
}

/* ---- manual control ----------------------------------------------------- */

static void with_auto_adjust_off_only_set_level_moves(void **state)
{
    fixture *f = *state;
    f->opts.auto_adjust = false;
    f->health.cpu = 99;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_tick(d), 0);
    assert_int_equal(resil_degrade_set_level(d, 2), 0);
    assert_int_equal(resil_degrade_level(d), 2);
    assert_int_equal(f->nevents, 1);
    assert_int_equal(f->events[0].cause, RESIL_DEGRADE_CAUSE_MANUAL);
    advance(f, RESIL_S(3600));
    assert_int_equal(resil_degrade_tick(d), 2);
}

static void auto_adjust_can_be_switched_at_run_time(void **state)
{
    fixture *f = *state;
    f->health.cpu = 99;
    resil_degrade *d = make(f);
    resil_degrade_set_auto_adjust(d, false);
    assert_int_equal(resil_degrade_tick(d), 0);
    resil_degrade_set_auto_adjust(d, true);
    assert_int_equal(resil_degrade_tick(d), 5);
}

static void auto_adjust_switched_on_at_run_time_evaluates_on_calls_too(void **state)
{
    fixture *f = *state;
    f->opts.auto_adjust = false;
    f->health.cpu = 99;
    resil_degrade *d = make(f);
    advance(f, RESIL_S(30));
    assert_int_equal(resil_degrade_admit(d, 0), 0);
    assert_int_equal(f->health.calls, 0);
    resil_degrade_set_auto_adjust(d, true);
    assert_int_equal(resil_degrade_admit(d, 0), RESIL_EREJECTED);
    assert_int_equal(f->health.calls, 1);
    assert_int_equal(resil_degrade_level(d), 5);
}

static void set_level_out_of_range_is_invalid(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_set_level(d, 6), RESIL_EINVAL);
    assert_int_equal(resil_degrade_set_level(d, -1), RESIL_EINVAL);
    assert_int_equal(resil_degrade_level(d), 0);
}

static void setting_the_current_level_is_not_a_change(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_set_level(d, 0), 0);
    assert_int_equal(f->nevents, 0);
}

static void a_manual_level_holds_for_the_minimum_time_under_auto_adjust(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_set_level(d, 4), 0);
    advance(f, RESIL_S(59));
    assert_int_equal(resil_degrade_tick(d), 4);
    advance(f, RESIL_S(1));
    assert_int_equal(resil_degrade_tick(d), 0);
}

/* ---- lazy evaluation ----------------------------------------------------- */

static void admit_evaluates_once_the_check_interval_has_passed(void **state)
{
    fixture *f = *state;
    f->health.cpu = 72;
    resil_degrade *d = make(f);
    advance(f, RESIL_S(30) - 1);
    assert_int_equal(resil_degrade_admit(d, 0), 0);
    assert_int_equal(f->health.calls, 0);
    advance(f, 1);
    /* The admit that finds the check due evaluates first, then is judged
     * at the new level (Moderate, 30). */
    assert_int_equal(resil_degrade_admit(d, 29), RESIL_EREJECTED);
    assert_int_equal(f->health.calls, 1);
    assert_int_equal(resil_degrade_admit(d, 29), RESIL_EREJECTED);
    assert_int_equal(f->health.calls, 1);
    advance(f, RESIL_S(30));
    resil_degrade_admit(d, 0);
    assert_int_equal(f->health.calls, 2);
}

static void admit_at_judges_by_the_callers_instant(void **state)
{
    fixture *f = *state;
    f->health.cpu = 81;
    resil_degrade *d = make(f);
    assert_int_equal(resil_degrade_admit_at(d, 0, T0 + RESIL_S(30) - 1), 0);
    assert_int_equal(f->health.calls, 0);
    assert_int_equal(resil_degrade_admit_at(d, 0, T0 + RESIL_S(30)), RESIL_EREJECTED);
    assert_int_equal(f->health.calls, 1);
    assert_int_equal(resil_degrade_level(d), 3);
}

static void record_also_evaluates_when_due(void **state)
{
    fixture *f = *state;
    resil_degrade *d = make(f);
    advance(f, RESIL_S(30));
    record(d, 10, 10);
    /* The first record found the check due (1 call in the window: not yet
     * a signal); the next is due 30 s later. */
    assert_int_equal(f->health.calls, 1);
    assert_int_equal(resil_degrade_level(d), 0);
    advance(f, RESIL_S(30));
    resil_degrade_record(d, true);
    assert_int_equal(resil_degrade_level(d), 5);
}

static void without_evaluate_on_call_only_tick_evaluates(void **state)
{
    fixture *f = *state;
    f->opts.evaluate_on_call = false;
    f->health.cpu = 99;
    resil_degrade *d = make(f);
    advance(f, RESIL_S(300));
    assert_int_equal(resil_degrade_admit(d, 0), 0);
    record(d, 20, 20);
    assert_int_equal(f->health.calls, 0);
    assert_int_equal(resil_degrade_tick(d), 5);
    assert_int_equal(f->health.calls, 1);
}

/* ---- events -------------------------------------------------------------- */

typedef struct reentrant {
    resil_degrade *d;
    int from[4], to[4];
    int n;
} reentrant;

static void set_level_from_listener(void *ud, const resil_degrade_event *ev)
{
    reentrant *r = ud;
    r->from[r->n] = ev->from;
    r->to[r->n] = ev->to;
    r->n++;
    if (ev->to == 1)
        resil_degrade_set_level(r->d, 2); /* delivered after this returns */
}

static void a_listener_may_change_the_level_and_events_stay_in_order(void **state)
{
    fixture *f = *state;
    reentrant r = {0};
    f->opts.on_change = set_level_from_listener;
    f->opts.on_change_ud = &r;
    resil_degrade *d = make(f);
    r.d = d;
    assert_int_equal(resil_degrade_set_level(d, 1), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.from[0], 0);
    assert_int_equal(r.to[0], 1);
    assert_int_equal(r.from[1], 1);
    assert_int_equal(r.to[1], 2);
    assert_int_equal(resil_degrade_level(d), 2);
}

static void stats_report_the_last_evaluation(void **state)
{
    fixture *f = *state;
    f->health.cpu = 42.5;
    f->health.memory = 12.25;
    resil_degrade *d = make(f);
    record(d, 40, 1);
    advance(f, RESIL_S(5));
    resil_degrade_tick(d);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.level, 1); /* 2.5 % errors: Minor (1 %), not Moderate (5 %) */
    assert_string_equal(s.level_name, "Minor");
    assert_duration_equal(s.level_since, T0 + RESIL_S(5));
    assert_true(s.error_rate == 2.5);
    assert_int_equal(s.window_calls, 40);
    assert_int_equal(s.window_failures, 1);
    assert_true(s.cpu == 42.5);
    assert_true(s.memory == 12.25);
    assert_int_equal(s.evaluations, 1);
    assert_int_equal(s.rejected, 0);
}

static void cause_names_are_stable(void **state)
{
    (void)state;
    assert_string_equal(resil_degrade_cause_name(RESIL_DEGRADE_CAUSE_ERROR_RATE), "error-rate");
    assert_string_equal(resil_degrade_cause_name(RESIL_DEGRADE_CAUSE_CPU), "cpu");
    assert_string_equal(resil_degrade_cause_name(RESIL_DEGRADE_CAUSE_MEMORY), "memory");
    assert_string_equal(resil_degrade_cause_name(RESIL_DEGRADE_CAUSE_RECOVERY), "recovery");
    assert_string_equal(resil_degrade_cause_name(RESIL_DEGRADE_CAUSE_MANUAL), "manual");
    assert_string_equal(resil_degrade_cause_name((resil_degrade_cause)42), "unknown");
}

static void the_default_sampler_reads_this_machine(void **state)
{
    fixture *f = *state;
    f->opts.sampler = NULL;
    f->opts.auto_adjust = false;
    resil_degrade *d = make(f);
    resil_degrade_tick(d);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_true(isnan(s.cpu) || (s.cpu >= 0 && s.cpu <= 100));
    assert_true(isnan(s.memory) || (s.memory >= 0 && s.memory <= 100));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(defaults_are_excaliburs_levels_and_timings),
        TEST(timing_options_are_validated_by_name),
        TEST(level_count_is_validated_by_name),
        TEST(priority_thresholds_must_increase_with_the_level),
        TEST(health_thresholds_must_not_fall_with_the_level),
        TEST(percentages_outside_zero_to_hundred_are_refused),
        TEST(level_names_must_be_one_to_thirty_one_characters),
        TEST(null_options_are_refused),
        TEST(level_names_are_copied_at_construction),
        TEST(normal_admits_every_priority),
        TEST(at_major_priority_fifty_runs_and_forty_nine_is_shed),
        TEST(emergency_admits_only_priority_hundred_and_above),
        TEST(an_error_rate_reaching_a_threshold_moves_to_that_level),
        TEST(an_error_rate_just_below_a_threshold_stays_a_level_lower),
        TEST(fewer_calls_than_min_throughput_are_not_a_signal),
        TEST(cpu_moves_to_the_highest_level_it_reaches),
        TEST(memory_at_ninety_five_percent_is_an_emergency),
        TEST(the_worst_signal_decides),
        TEST(unknown_readings_are_ignored),
        TEST(failures_age_out_of_the_window_bucket_by_bucket),
        TEST(a_late_record_does_not_erase_a_newer_bucket),
        TEST(a_single_bucket_window_forgets_everything_at_once),
        TEST(the_first_move_after_start_up_does_not_wait),
        TEST(recovery_waits_for_the_minimum_time_then_goes_straight_down),
        TEST(escalation_also_waits_for_the_minimum_time),
        TEST(with_auto_adjust_off_only_set_level_moves),
        TEST(auto_adjust_can_be_switched_at_run_time),
        TEST(auto_adjust_switched_on_at_run_time_evaluates_on_calls_too),
        TEST(set_level_out_of_range_is_invalid),
        TEST(setting_the_current_level_is_not_a_change),
        TEST(a_manual_level_holds_for_the_minimum_time_under_auto_adjust),
        TEST(admit_evaluates_once_the_check_interval_has_passed),
        TEST(admit_at_judges_by_the_callers_instant),
        TEST(record_also_evaluates_when_due),
        TEST(without_evaluate_on_call_only_tick_evaluates),
        TEST(a_listener_may_change_the_level_and_events_stay_in_order),
        TEST(stats_report_the_last_evaluation),
        TEST(cause_names_are_stable),
        TEST(the_default_sampler_reads_this_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
