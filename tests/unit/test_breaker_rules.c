/*
 * test_breaker_rules.c — the rules users of the peer libraries expect, on
 * the fake clock: the count window over the last N calls (resilience4j's
 * COUNT_BASED), the application's trip predicate over the window's counts
 * (gobreaker's ReadyToTrip), and results reported without a permit
 * (resilience4j's onSuccess/onError with a duration), and the time
 * window's successes counted without the lock, and a plug-in's table and
 * name checked by resil_breaker_new_custom. Their option checks live in
 * test_breaker_opts.c.
 */
#include "test.h"

#define T0 RESIL_S(1000)
#define MAX_EVENTS 16

typedef struct fx {
    resil_fake_clock *fc;
    resil_breaker *b;
    resil_breaker_event ev[MAX_EVENTS];
    size_t n_ev;
    /* what the predicate saw */
    resil_breaker_counts seen;
    unsigned asked;
    uint64_t trip_at_failures; /* the predicate trips at this many; 0 = never */
} fx;

static void record_event(resil_breaker *b, const resil_breaker_event *e, void *ud)
{
    (void)b;
    fx *f = ud;
    if (f->n_ev < MAX_EVENTS)
        f->ev[f->n_ev++] = *e;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(T0, 0, &f->fc), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    resil_breaker_free(f->b);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

static resil_breaker_opts opts(fx *f, resil_breaker_kind kind)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = kind;
    o.clock = resil_fake_clock_clock(f->fc);
    o.listener = record_event;
    o.listener_ud = f;
    return o;
}

/* A ratio breaker over the last `n` calls. */
static resil_breaker_opts count_window(fx *f, uint32_t n, double r, uint32_t min)
{
    resil_breaker_opts o = opts(f, RESIL_BREAKER_RATIO);
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    o.window_size = n;
    o.failure_ratio = r;
    o.minimum_throughput = min;
    return o;
}

static void make(fx *f, const resil_breaker_opts *o)
{
    resil_err err = {0};
    if (resil_breaker_new(o, &f->b, &err) != 0)
        fail_msg("resil_breaker_new: %s", err.message);
}

static void advance(fx *f, resil_duration d) { resil_fake_clock_advance(f->fc, d); }

static void calls(fx *f, const char *pattern) /* 'S', 'F' */
{
    for (const char *c = pattern; *c; c++) {
        resil_breaker_permit p;
        assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
        assert_int_equal(resil_breaker_record(f->b, &p, *c == 'F' ? RESIL_BREAKER_FAILURE
                                                                   : RESIL_BREAKER_SUCCESS),
                         0);
    }
}

static void repeat(fx *f, int n, const char *pattern)
{
    for (int i = 0; i < n; i++)
        calls(f, pattern);
}

static int timed_call(fx *f, resil_duration took, resil_breaker_result r)
{
    resil_breaker_permit p;
    int rc = resil_breaker_acquire(f->b, &p);
    if (rc != 0)
        return rc;
    advance(f, took);
    return resil_breaker_record(f->b, &p, r);
}

static resil_breaker_stats stats(fx *f)
{
    resil_breaker_stats s;
    assert_int_equal(resil_breaker_stats_get(f->b, &s), 0);
    return s;
}

static void assert_state(fx *f, resil_breaker_state s)
{
    assert_string_equal(resil_breaker_state_name(resil_breaker_state_of(f->b)),
                        resil_breaker_state_name(s));
}

static void assert_opened_by(fx *f, resil_breaker_reason why)
{
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_int_equal(f->n_ev, 1);
    assert_string_equal(resil_breaker_reason_name(f->ev[0].reason), resil_breaker_reason_name(why));
}

static void assert_window(fx *f, uint64_t total, uint64_t failures)
{
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.window_total, total);
    assert_int_equal(s.window_failures, failures);
}

/* ---- the count window --------------------------------------------------- */

static void count_window_trips_on_the_ratio_of_the_last_n_calls(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 4, 0.5, 4);
    make(f, &o);
    calls(f, "SSF");
    assert_state(f, RESIL_BREAKER_CLOSED); /* 3 calls < throughput 4 */
    calls(f, "F");
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
    assert_window(f, 4, 2);
}

static void a_count_window_trip_starts_the_break_at_the_clocks_now(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 2, 1.0, 2);
    o.break_duration = RESIL_S(5);
    make(f, &o);
    advance(f, RESIL_S(1));
    calls(f, "FF");
    assert_int_equal(f->ev[0].at, T0 + RESIL_S(1));
    assert_int_equal(stats(f).next_probe_at, T0 + RESIL_S(6));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_int_equal(p.retry_after, RESIL_S(5));
}

static void the_oldest_call_leaves_a_full_count_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 4, 0.5, 4);
    make(f, &o);
    calls(f, "FSSS");
    assert_window(f, 4, 1);
    calls(f, "S"); /* the F leaves */
    assert_window(f, 4, 0);
    calls(f, "F");
    assert_window(f, 4, 1);
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F"); /* S S F F */
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void the_count_window_does_not_age_with_time(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 3, 1.0, 3);
    make(f, &o);
    calls(f, "F");
    advance(f, RESIL_S(3600));
    calls(f, "F");
    advance(f, RESIL_S(3600));
    assert_window(f, 2, 2);
    calls(f, "F");
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void minimum_throughput_counts_up_to_the_window_size(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 2, 1.0, 100);
    make(f, &o);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F"); /* 2 of 2: the window can never hold 100 */
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void a_window_of_one_call_judges_the_last_call(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 1, 1.0, 2);
    make(f, &o);
    calls(f, "SSS");
    assert_window(f, 1, 0);
    calls(f, "F");
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
    assert_window(f, 1, 1); /* the window as it tripped, until closed */
}

static void a_window_of_the_maximum_size_holds_ten_thousand_calls(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, RESIL_BREAKER_WINDOW_SIZE_MAX, 0.5, 10000);
    make(f, &o);
    repeat(f, 5000, "S");
    repeat(f, 4999, "F");
    assert_window(f, 9999, 4999);
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "S"); /* full: 5000 of 10000 failed, but a success trips nothing */
    assert_window(f, 10000, 4999);
    calls(f, "F"); /* the oldest S leaves: 5000 of 10000 */
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void closing_empties_the_count_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 4, 0.5, 4);
    make(f, &o);
    calls(f, "SSFF");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_int_equal(resil_breaker_close(f->b), 0);
    assert_window(f, 0, 0);
    calls(f, "SSF");
    assert_window(f, 3, 1);
    assert_state(f, RESIL_BREAKER_CLOSED);
}

static void slow_calls_count_in_the_count_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 4, 1.0, 4);
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = 100;
    o.slow_call_duration = RESIL_S(1);
    o.slow_call_ratio = 0.5;
    make(f, &o);
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);
    timed_call(f, RESIL_MS(10), RESIL_BREAKER_SUCCESS);
    timed_call(f, RESIL_MS(10), RESIL_BREAKER_SUCCESS);
    timed_call(f, RESIL_MS(10), RESIL_BREAKER_SUCCESS); /* 1 of 4 slow */
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);   /* the first leaves: still 1 */
    assert_int_equal(stats(f).window_slow, 1);
    assert_state(f, RESIL_BREAKER_CLOSED);
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS); /* 2 of 4 */
    assert_opened_by(f, RESIL_BREAKER_BY_SLOW_CALLS);
}

static void the_consecutive_rule_works_beside_a_count_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = count_window(f, 100, 0.9, 100);
    o.kind = RESIL_BREAKER_BOTH;
    o.failure_threshold = 3;
    make(f, &o);
    calls(f, "SFFF");
    assert_opened_by(f, RESIL_BREAKER_BY_CONSECUTIVE);
}

/* ---- the trip predicate ------------------------------------------------- */

static bool watch(const resil_breaker_counts *c, void *ud)
{
    fx *f = ud;
    f->seen = *c;
    f->asked++;
    return f->trip_at_failures > 0 && c->failures >= f->trip_at_failures;
}

/* gobreaker's example: at least 3 requests, 60 % of them failures. */
static bool sixty_percent_of_three(const resil_breaker_counts *c, void *ud)
{
    (void)ud;
    return c->requests >= 3 && (double)c->failures / (double)c->requests >= 0.6;
}

static resil_breaker_opts predicate(fx *f, resil_breaker_trip_fn fn)
{
    resil_breaker_opts o = opts(f, RESIL_BREAKER_PREDICATE);
    o.trip = fn;
    o.trip_ud = f;
    return o;
}

static void the_predicate_sees_the_counts_of_the_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = predicate(f, watch);
    make(f, &o);
    calls(f, "SSFF");
    assert_int_equal(f->seen.requests, 4);
    assert_int_equal(f->seen.successes, 2);
    assert_int_equal(f->seen.failures, 2);
    assert_int_equal(f->seen.slow, 0);
    assert_int_equal(f->seen.consecutive_failures, 2);
    assert_int_equal(f->seen.consecutive_successes, 0);
    assert_state(f, RESIL_BREAKER_CLOSED);
}

static void the_predicate_opens_the_breaker_when_it_says_so(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = predicate(f, sixty_percent_of_three);
    make(f, &o);
    calls(f, "SF");
    assert_state(f, RESIL_BREAKER_CLOSED); /* 2 requests */
    calls(f, "F");                         /* 2 of 3 */
    assert_opened_by(f, RESIL_BREAKER_BY_PREDICATE);
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_PREDICATE),
                        "trip predicate");
}

static void the_predicate_is_asked_on_failures_only(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = predicate(f, watch);
    make(f, &o);
    calls(f, "SSSFS");
    assert_int_equal(f->asked, 1);
    assert_int_equal(f->seen.requests, 4);
}

static void the_predicate_is_not_bound_by_minimum_throughput(void **state)
{
    fx *f = *state;
    f->trip_at_failures = 1;
    resil_breaker_opts o = predicate(f, watch);
    o.minimum_throughput = 100;
    make(f, &o);
    calls(f, "F");
    assert_opened_by(f, RESIL_BREAKER_BY_PREDICATE);
}

static void the_built_in_rules_are_asked_before_the_predicate(void **state)
{
    fx *f = *state;
    f->trip_at_failures = 2;
    resil_breaker_opts o = predicate(f, watch);
    o.kind = RESIL_BREAKER_CONSECUTIVE | RESIL_BREAKER_PREDICATE;
    o.failure_threshold = 2;
    make(f, &o);
    calls(f, "FF");
    assert_opened_by(f, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_int_equal(f->asked, 1); /* the first failure only */
}

static void the_predicate_judges_a_count_window(void **state)
{
    fx *f = *state;
    f->trip_at_failures = 3;
    resil_breaker_opts o = predicate(f, watch);
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    o.window_size = 3;
    make(f, &o);
    calls(f, "FFSF");
    assert_int_equal(f->seen.requests, 3);
    assert_int_equal(f->seen.failures, 2);
    calls(f, "F"); /* S F F */
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F"); /* F F F */
    assert_opened_by(f, RESIL_BREAKER_BY_PREDICATE);
}

static void the_predicate_sees_slow_calls(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = predicate(f, watch);
    o.slow_call_duration = RESIL_S(1);
    make(f, &o);
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);
    timed_call(f, RESIL_S(2), RESIL_BREAKER_FAILURE);
    assert_int_equal(f->seen.requests, 2);
    assert_int_equal(f->seen.slow, 2);
}

/* ---- results without a permit ------------------------------------------- */

static void failures_without_a_permit_count_toward_the_consecutive_rule(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    o.failure_threshold = 3;
    make(f, &o);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(5)), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(5)), 0);
    assert_int_equal(stats(f).consecutive_failures, 2);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(5)), 0);
    assert_opened_by(f, RESIL_BREAKER_BY_CONSECUTIVE);
}

static void a_success_without_a_permit_ends_the_failure_run(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    o.failure_threshold = 3;
    make(f, &o);
    calls(f, "FF");
    assert_int_equal(resil_breaker_record_success(f->b, 0), 0);
    assert_int_equal(stats(f).consecutive_failures, 0);
    calls(f, "FF");
    assert_state(f, RESIL_BREAKER_CLOSED);
}

static void results_without_a_permit_enter_the_ratio_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_RATIO);
    o.failure_ratio = 0.5;
    o.minimum_throughput = 4;
    make(f, &o);
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_MS(10)), 0);
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_MS(10)), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(10)), 0);
    assert_window(f, 3, 1);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(10)), 0);
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void the_duration_given_is_judged_by_the_slow_call_rule(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    o.failure_threshold = 100;
    o.slow_call_duration = RESIL_S(1);
    o.slow_call_ratio = 0.5;
    o.minimum_throughput = 4;
    make(f, &o);
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_S(2)), 0);
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_S(1)), 0); /* not slow */
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_MS(10)), 0);
    assert_int_equal(stats(f).window_slow, 1);
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_S(1) + 1), 0);
    assert_opened_by(f, RESIL_BREAKER_BY_SLOW_CALLS);
    assert_int_equal(resil_fake_clock_now(f->fc), T0); /* the clock never moved */
}

static void results_without_a_permit_count_in_the_current_generation(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    o.failure_threshold = 3;
    make(f, &o);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(resil_breaker_reset(f->b), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, 0), 0);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    assert_int_equal(stats(f).consecutive_failures, 1);
}

static void only_a_closed_breaker_takes_results_without_a_permit(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    o.failure_threshold = 1;
    o.break_duration = RESIL_S(5);
    make(f, &o);
    calls(f, "F");
    assert_int_equal(resil_breaker_record_failure(f->b, 0), RESIL_ESTATE);
    assert_int_equal(resil_breaker_record_success(f->b, 0), RESIL_ESTATE);
    advance(f, RESIL_S(5));
    resil_breaker_permit probe;
    assert_int_equal(resil_breaker_acquire(f->b, &probe), 0);
    assert_int_equal(resil_breaker_record_success(f->b, 0), RESIL_ESTATE);
    assert_state(f, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(resil_breaker_isolate(f->b), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, 0), RESIL_ESTATE);
    assert_int_equal(resil_breaker_disable(f->b), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, 0), RESIL_ESTATE);
    assert_int_equal(stats(f).opens, 1);
}

static void a_negative_duration_is_refused(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    make(f, &o);
    assert_int_equal(resil_breaker_record_failure(f->b, -1), RESIL_EINVAL);
    assert_int_equal(resil_breaker_record_success(f->b, -1), RESIL_EINVAL);
    assert_int_equal(stats(f).consecutive_failures, 0);
    assert_int_equal(resil_breaker_record_failure(NULL, 0), 0);
}

/* A plug-in built against the table before record_without_permit existed,
 * and one that offers it. */
static int plug_acquire(void *self, resil_breaker_permit *p)
{
    (void)self;
    memset(p, 0, sizeof *p);
    return 0;
}
static int plug_record(void *self, const resil_breaker_permit *p, resil_breaker_result r)
{
    (void)self, (void)p, (void)r;
    return 0;
}
static resil_breaker_state plug_state(void *self)
{
    (void)self;
    return RESIL_BREAKER_CLOSED;
}
static int plug_stats(void *self, resil_breaker_stats *out)
{
    (void)self;
    memset(out, 0, sizeof *out);
    return 0;
}
static int plug_control(void *self, resil_breaker_control op)
{
    (void)self, (void)op;
    return 0;
}
static int plug_without_permit(void *self, resil_breaker_result r, resil_duration took)
{
    fx *f = self;
    f->asked++;
    f->seen.failures = r == RESIL_BREAKER_FAILURE;
    f->seen.requests = (uint64_t)took;
    return 0;
}

static void a_plug_in_without_the_operation_refuses_results_without_a_permit(void **state)
{
    fx *f = *state;
    static const resil_breaker_ops old = {
        .size = offsetof(resil_breaker_ops, record_without_permit),
        .kind = "old", .acquire = plug_acquire, .record = plug_record,
        .state = plug_state, .stats = plug_stats, .control = plug_control,
        .record_without_permit = plug_without_permit, /* beyond its size: unread */
    };
    assert_int_equal(resil_breaker_new_custom(&old, f, "old", &f->b, NULL), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, 0), RESIL_EINVAL);
    assert_int_equal(f->asked, 0);
}

static void a_plug_in_with_the_operation_is_handed_the_result(void **state)
{
    fx *f = *state;
    static const resil_breaker_ops ops = {
        .size = sizeof(resil_breaker_ops),
        .kind = "new", .acquire = plug_acquire, .record = plug_record,
        .state = plug_state, .stats = plug_stats, .control = plug_control,
        .record_without_permit = plug_without_permit,
    };
    assert_int_equal(resil_breaker_new_custom(&ops, f, "new", &f->b, NULL), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(7)), 0);
    assert_int_equal(f->asked, 1);
    assert_int_equal(f->seen.failures, 1);
    assert_int_equal(f->seen.requests, RESIL_MS(7));
}

/* ---- a plug-in's table and name (resil_breaker_new_custom) ------------------- */

static const resil_breaker_ops plug_ops = {
    .size = sizeof(resil_breaker_ops), .kind = "plug",     .acquire = plug_acquire,
    .record = plug_record,             .state = plug_state, .stats = plug_stats,
    .control = plug_control,
};

/* new_custom with ops and name: expect RESIL_EINVAL and exactly this message. */
static void custom_refused(const resil_breaker_ops *ops, const char *name, const char *message)
{
    resil_breaker *b = (resil_breaker *)1;
    resil_err err = {0};
    assert_int_equal(resil_breaker_new_custom(ops, NULL, name, &b, &err), RESIL_EINVAL);
    assert_null(b);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
}

static void a_plug_in_table_without_control_is_refused_by_name(void **state)
{
    (void)state;
    resil_breaker_ops ops = plug_ops;
    ops.control = NULL;
    custom_refused(&ops, "p",
                   "breaker: ops needs size, acquire, record, state, stats and control");
}

static void a_plug_in_table_that_does_not_reach_control_is_refused(void **state)
{
    (void)state;
    resil_breaker_ops ops = plug_ops;
    ops.size = offsetof(resil_breaker_ops, control);
    custom_refused(&ops, "p",
                   "breaker: ops needs size, acquire, record, state, stats and control");
}

static void a_plug_in_name_of_256_bytes_is_refused_by_name(void **state)
{
    (void)state;
    char name[RESIL_BREAKER_NAME_MAX + 1];
    memset(name, 'n', RESIL_BREAKER_NAME_MAX);
    name[RESIL_BREAKER_NAME_MAX] = '\0';
    custom_refused(&plug_ops, name, "breaker.name must be shorter than 256 bytes, got 256");
}

static void a_plug_in_name_of_255_bytes_is_accepted(void **state)
{
    (void)state;
    char name[RESIL_BREAKER_NAME_MAX];
    memset(name, 'n', RESIL_BREAKER_NAME_MAX - 1);
    name[RESIL_BREAKER_NAME_MAX - 1] = '\0';
    resil_breaker *b = NULL;
    assert_int_equal(resil_breaker_new_custom(&plug_ops, NULL, name, &b, NULL), 0);
    assert_string_equal(resil_breaker_name(b), name);
    resil_breaker_free(b);
}

static void a_plug_in_needs_its_table_and_out(void **state)
{
    (void)state;
    custom_refused(NULL, "p", "breaker: ops needs size, acquire, record, state, stats and control");
    resil_err err = {0};
    assert_int_equal(resil_breaker_new_custom(&plug_ops, NULL, "p", NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "breaker: out must not be NULL");
}

/* ---- successes counted without the lock (time window) -------------------- */

/* A ratio breaker over the default 30 s time window (3 s buckets). */
static resil_breaker_opts time_window(fx *f, double r, uint32_t min)
{
    resil_breaker_opts o = opts(f, RESIL_BREAKER_RATIO);
    o.failure_ratio = r;
    o.minimum_throughput = min;
    return o;
}

static void successes_in_one_bucket_all_reach_the_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 10);
    make(f, &o);
    repeat(f, 1000, "S");
    assert_window(f, 1000, 0);
}

static void successes_count_toward_the_ratio_a_failure_judges(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.1, 10);
    make(f, &o);
    repeat(f, 18, "S");
    calls(f, "F"); /* 1 of 19: below a tenth */
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F"); /* 2 of 20: a tenth */
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
    assert_window(f, 20, 2);
}

static void successes_age_out_with_their_own_bucket(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 2);
    make(f, &o);
    repeat(f, 5, "S"); /* bucket 0 */
    advance(f, RESIL_S(3));
    repeat(f, 3, "S"); /* bucket 1 */
    assert_window(f, 8, 0);
    advance(f, RESIL_S(27)); /* bucket 0 has left the window */
    assert_window(f, 3, 0);
    calls(f, "FF"); /* 2 of 5: under half, although 5 old successes are gone */
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F"); /* 3 of 6 */
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void a_success_after_a_gap_counts_in_its_own_bucket(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 2);
    make(f, &o);
    repeat(f, 4, "S");
    advance(f, RESIL_S(60)); /* the window emptied */
    repeat(f, 2, "S");
    assert_window(f, 2, 0);
}

static void a_reset_forgets_the_successes_not_yet_folded(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 2);
    make(f, &o);
    repeat(f, 7, "S");
    assert_int_equal(resil_breaker_reset(f->b), 0);
    assert_window(f, 0, 0);
    repeat(f, 2, "S");
    assert_window(f, 2, 0);
}

static void a_success_of_an_earlier_generation_is_refused(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 2);
    make(f, &o);
    calls(f, "S");
    resil_breaker_permit old;
    assert_int_equal(resil_breaker_acquire(f->b, &old), 0);
    assert_int_equal(resil_breaker_reset(f->b), 0);
    assert_int_equal(resil_breaker_record(f->b, &old, RESIL_BREAKER_SUCCESS), RESIL_ESTATE);
    assert_window(f, 0, 0);
}

static void successes_before_a_trip_stay_in_the_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 4);
    make(f, &o);
    repeat(f, 3, "S");
    calls(f, "FFF");
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
    assert_window(f, 6, 3);
}

/* Counted on the CPU's cell like any success: in the newest bucket, where
 * the window puts an instant older than it. */
static void a_success_ended_before_the_newest_bucket_counts_in_it(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 2);
    make(f, &o);
    resil_instant t0 = resil_clock_now(o.clock);
    advance(f, RESIL_S(3));
    calls(f, "S"); /* bucket 1 is the newest */
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(resil_breaker_record_at(f->b, &p, RESIL_BREAKER_SUCCESS, t0 + RESIL_S(1)),
                     0);
    assert_window(f, 2, 0);
    advance(f, RESIL_S(27)); /* bucket 0 would have left the window; bucket 1 has not */
    assert_window(f, 2, 0);
}

/* The default clock is read directly, not through its table. */
static void successes_on_the_default_clock_reach_the_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.5, 2);
    o.clock = NULL;
    make(f, &o);
    repeat(f, 5, "S");
    assert_window(f, 5, 0);
    calls(f, "FFFFF");
    assert_opened_by(f, RESIL_BREAKER_BY_RATIO);
}

static void a_success_ends_a_failure_run_in_a_time_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = time_window(f, 0.9, 100);
    o.kind = RESIL_BREAKER_RATIO | RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = 3;
    make(f, &o);
    calls(f, "FFSFF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).consecutive_failures, 2);
    assert_window(f, 5, 4);
    calls(f, "F");
    assert_opened_by(f, RESIL_BREAKER_BY_CONSECUTIVE);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(count_window_trips_on_the_ratio_of_the_last_n_calls),
        T(a_count_window_trip_starts_the_break_at_the_clocks_now),
        T(the_oldest_call_leaves_a_full_count_window),
        T(the_count_window_does_not_age_with_time),
        T(minimum_throughput_counts_up_to_the_window_size),
        T(a_window_of_one_call_judges_the_last_call),
        T(a_window_of_the_maximum_size_holds_ten_thousand_calls),
        T(closing_empties_the_count_window),
        T(slow_calls_count_in_the_count_window),
        T(the_consecutive_rule_works_beside_a_count_window),
        T(the_predicate_sees_the_counts_of_the_window),
        T(the_predicate_opens_the_breaker_when_it_says_so),
        T(the_predicate_is_asked_on_failures_only),
        T(the_predicate_is_not_bound_by_minimum_throughput),
        T(the_built_in_rules_are_asked_before_the_predicate),
        T(the_predicate_judges_a_count_window),
        T(the_predicate_sees_slow_calls),
        T(failures_without_a_permit_count_toward_the_consecutive_rule),
        T(a_success_without_a_permit_ends_the_failure_run),
        T(results_without_a_permit_enter_the_ratio_window),
        T(the_duration_given_is_judged_by_the_slow_call_rule),
        T(results_without_a_permit_count_in_the_current_generation),
        T(only_a_closed_breaker_takes_results_without_a_permit),
        T(a_negative_duration_is_refused),
        T(a_plug_in_without_the_operation_refuses_results_without_a_permit),
        T(a_plug_in_with_the_operation_is_handed_the_result),
        cmocka_unit_test(a_plug_in_table_without_control_is_refused_by_name),
        cmocka_unit_test(a_plug_in_table_that_does_not_reach_control_is_refused),
        cmocka_unit_test(a_plug_in_name_of_256_bytes_is_refused_by_name),
        cmocka_unit_test(a_plug_in_name_of_255_bytes_is_accepted),
        cmocka_unit_test(a_plug_in_needs_its_table_and_out),
        T(successes_in_one_bucket_all_reach_the_window),
        T(successes_count_toward_the_ratio_a_failure_judges),
        T(successes_age_out_with_their_own_bucket),
        T(a_success_after_a_gap_counts_in_its_own_bucket),
        T(a_reset_forgets_the_successes_not_yet_folded),
        T(a_success_of_an_earlier_generation_is_refused),
        T(a_success_ended_before_the_newest_bucket_counts_in_it),
        T(successes_on_the_default_clock_reach_the_window),
        T(a_success_ends_a_failure_run_in_a_time_window),
        T(successes_before_a_trip_stay_in_the_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
