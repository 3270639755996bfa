/*
 * test_breaker.c — the circuit breaker's semantics on the fake clock: every
 * kind, every transition, the call protocol, manual control, diagnostics
 * and events. Option checks live in test_breaker_opts.c, threads in
 * test_breaker_stress.c.
 */
#include <math.h>

#include "test.h"

#define T0 RESIL_S(1000)
#define MAX_EVENTS 64

typedef struct fx {
    resil_fake_clock *fc;
    resil_breaker *b;
    resil_breaker_event ev[MAX_EVENTS];
    size_t n_ev;
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

/* Defaults wired to the fixture's clock and event log. */
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

static void make(fx *f, const resil_breaker_opts *o)
{
    resil_err err = {0};
    int rc = resil_breaker_new(o, &f->b, &err);
    if (rc != 0)
        fail_msg("resil_breaker_new: %s", err.message);
}

static void advance(fx *f, resil_duration d) { resil_fake_clock_advance(f->fc, d); }

/* One whole call: acquire, then record r. Returns acquire's code. */
static int call(fx *f, resil_breaker_result r)
{
    resil_breaker_permit p;
    int rc = resil_breaker_acquire(f->b, &p);
    if (rc == 0)
        resil_breaker_record(f->b, &p, r);
    return rc;
}

static void calls(fx *f, const char *pattern) /* 'S', 'F', 'I' */
{
    for (const char *c = pattern; *c; c++)
        call(f, *c == 'S' ? RESIL_BREAKER_SUCCESS
                : *c == 'F' ? RESIL_BREAKER_FAILURE : RESIL_BREAKER_IGNORED);
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

static void assert_event(fx *f, size_t i, resil_breaker_state from,
                         resil_breaker_state to, resil_breaker_reason why)
{
    assert_true(i < f->n_ev);
    assert_string_equal(resil_breaker_state_name(f->ev[i].from), resil_breaker_state_name(from));
    assert_string_equal(resil_breaker_state_name(f->ev[i].to), resil_breaker_state_name(to));
    assert_string_equal(resil_breaker_reason_name(f->ev[i].reason), resil_breaker_reason_name(why));
}

/* Trip a consecutive breaker (threshold 1 helpers use this). */
static resil_breaker_opts consecutive(fx *f, uint32_t threshold)
{
    resil_breaker_opts o = opts(f, RESIL_BREAKER_CONSECUTIVE);
    o.failure_threshold = threshold;
    return o;
}

static resil_breaker_opts ratio(fx *f, double r, uint32_t min)
{
    resil_breaker_opts o = opts(f, RESIL_BREAKER_RATIO);
    o.failure_ratio = r;
    o.minimum_throughput = min;
    o.sampling_duration = RESIL_S(10);
    return o;
}

/* ---- consecutive ------------------------------------------------------- */

static void consecutive_trips_on_threshold_failures_in_a_row(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 3);
    make(f, &o);
    calls(f, "FF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).consecutive_failures, 2);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_int_equal(f->n_ev, 1);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_int_equal(f->ev[0].at, T0);
    assert_int_equal(f->ev[0].break_duration, RESIL_S(5));
}

static void a_success_ends_the_failure_run(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 3);
    make(f, &o);
    calls(f, "FFSFF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).consecutive_failures, 2);
    assert_int_equal(f->n_ev, 0);
}

static void threshold_of_one_trips_on_the_first_failure(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "SSF");
    assert_state(f, RESIL_BREAKER_OPEN);
}

static void consecutive_kind_keeps_no_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 5);
    make(f, &o);
    calls(f, "SSFF");
    assert_int_equal(stats(f).window_total, 0);
}

/* ---- ratio ------------------------------------------------------------- */

static void diluted_failures_keep_ratio_closed_while_consecutive_trips(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 10);
    make(f, &o);
    calls(f, "SSSSSSSFFF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).window_failures, 3);

    resil_breaker_free(f->b);
    o = consecutive(f, 3);
    make(f, &o);
    calls(f, "SSSSSSSFFF");
    assert_state(f, RESIL_BREAKER_OPEN);
}

static void ratio_needs_exactly_minimum_throughput_calls(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 4);
    make(f, &o);
    calls(f, "FFF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).window_total, 3);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_RATIO);
    assert_int_equal(stats(f).window_total, 4);
}

static void ratio_trips_when_the_share_equals_the_ratio(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.3, 10);
    make(f, &o);
    calls(f, "SSSSSSSFF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_OPEN);
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.window_total, 10);
    assert_int_equal(s.window_failures, 3);
    assert_near(s.failure_ratio, 0.3, 1e-12);
}

static void a_success_never_trips_the_ratio(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 4);
    make(f, &o);
    calls(f, "FFFS"); /* 3 of 4 failed, but the rule is checked on failures */
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_OPEN);
}

static void old_buckets_age_out_of_the_ratio(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 4);
    make(f, &o);
    calls(f, "FFF");
    advance(f, RESIL_S(10));
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).window_total, 1);
}

static void calls_within_the_window_still_count(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 4);
    make(f, &o);
    calls(f, "FFF");
    advance(f, RESIL_MS(9999)); /* T0 is on a bucket boundary: still 10 buckets */
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_OPEN);
}

static void ratio_kind_still_reports_consecutive_failures(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 1.0, 100);
    make(f, &o);
    calls(f, "SFFFFFFF");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).consecutive_failures, 7);
}

static void both_kind_trips_on_consecutive_first(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 10);
    o.kind = RESIL_BREAKER_BOTH;
    o.failure_threshold = 3;
    make(f, &o);
    calls(f, "FFF");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_CONSECUTIVE);
}

static void both_kind_trips_on_ratio_first(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 4);
    o.kind = RESIL_BREAKER_BOTH;
    o.failure_threshold = 3;
    make(f, &o);
    calls(f, "FSFSF");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_RATIO);
}

/* ---- slow calls -------------------------------------------------------- */

static int timed_call(fx *f, resil_duration took, resil_breaker_result r)
{
    resil_breaker_permit p;
    int rc = resil_breaker_acquire(f->b, &p);
    if (rc != 0)
        return rc;
    advance(f, took);
    return resil_breaker_record(f->b, &p, r);
}

static resil_breaker_opts slow_rule(fx *f)
{
    resil_breaker_opts o = consecutive(f, 100);
    o.slow_call_duration = RESIL_S(1);
    o.slow_call_ratio = 0.5;
    o.minimum_throughput = 4;
    return o;
}

static void slow_calls_trip_when_their_share_reaches_the_ratio(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = slow_rule(f);
    make(f, &o);
    timed_call(f, RESIL_MS(10), RESIL_BREAKER_SUCCESS);
    timed_call(f, RESIL_MS(10), RESIL_BREAKER_SUCCESS);
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);
    assert_state(f, RESIL_BREAKER_CLOSED); /* 3 calls < throughput 4 */
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_SLOW_CALLS);
    assert_int_equal(stats(f).window_slow, 2);
}

static void a_call_exactly_at_the_slow_duration_is_not_slow(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = slow_rule(f);
    make(f, &o);
    for (int i = 0; i < 4; i++)
        timed_call(f, RESIL_S(1), RESIL_BREAKER_SUCCESS);
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).window_slow, 0);
    assert_int_equal(stats(f).window_total, 4);
}

static void slow_permits_carry_their_start(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = slow_rule(f);
    make(f, &o);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(p.start, T0);
}

static void a_slow_probe_counts_as_failed(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = slow_rule(f);
    make(f, &o);
    for (int i = 0; i < 4; i++)
        timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);
    assert_state(f, RESIL_BREAKER_OPEN);
    advance(f, RESIL_S(5));
    timed_call(f, RESIL_S(2), RESIL_BREAKER_SUCCESS);
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_event(f, f->n_ev - 1, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
                 RESIL_BREAKER_BY_PROBE_FAILED);
}

/* ---- open -------------------------------------------------------------- */

static void open_rejects_with_the_time_until_the_next_probe(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "F");
    advance(f, RESIL_S(2));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_int_equal(p.retry_after, RESIL_S(3));
    assert_int_equal(p.state, RESIL_BREAKER_OPEN);
    assert_int_equal(stats(f).next_probe_at, T0 + RESIL_S(5));
}

static void state_reads_open_until_a_call_arrives(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "F");
    advance(f, RESIL_S(60));
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_int_equal(f->n_ev, 1);
}

static void the_first_call_after_the_break_is_the_probe(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "F");
    advance(f, RESIL_S(5));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_true(p.probe);
    assert_int_equal(p.state, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(p.start, T0 + RESIL_S(5));
    assert_state(f, RESIL_BREAKER_HALF_OPEN);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN,
                 RESIL_BREAKER_BY_BREAK_ELAPSED);
    assert_int_equal(stats(f).probes_in_flight, 1);
}

/* ---- half-open --------------------------------------------------------- */

static void open_then_wait(fx *f, resil_breaker_opts *o)
{
    make(f, o);
    calls(f, "F");
    advance(f, o->break_duration);
}

static void half_open_admits_exactly_n_probes(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.half_open_probes = 3;
    o.probe_timeout = RESIL_S(30);
    open_then_wait(f, &o);
    resil_breaker_permit p[4];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(resil_breaker_acquire(f->b, &p[i]), 0);
        assert_true(p[i].probe);
    }
    assert_int_equal(resil_breaker_acquire(f->b, &p[3]), RESIL_EREJECTED);
    assert_int_equal(p[3].state, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(p[3].retry_after, RESIL_S(30));
    assert_int_equal(stats(f).probes_in_flight, 3);
}

static void success_threshold_consecutive_successes_close_it(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.success_threshold = 3;
    open_then_wait(f, &o);
    calls(f, "SS");
    assert_state(f, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(stats(f).consecutive_successes, 2);
    calls(f, "S");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_event(f, 2, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_CLOSED,
                 RESIL_BREAKER_BY_PROBES_SUCCEEDED);
}

static void any_probe_failure_reopens(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.success_threshold = 3;
    open_then_wait(f, &o);
    calls(f, "SSF");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_event(f, 2, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
                 RESIL_BREAKER_BY_PROBE_FAILED);
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.opens, 2);
    assert_int_equal(s.last_opened_at, T0 + RESIL_S(5));
    assert_int_equal(s.consecutive_successes, 0);
}

static void a_failure_reopens_while_other_probes_are_out(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.half_open_probes = 2;
    open_then_wait(f, &o);
    resil_breaker_permit a, b;
    assert_int_equal(resil_breaker_acquire(f->b, &a), 0);
    assert_int_equal(resil_breaker_acquire(f->b, &b), 0);
    assert_int_equal(resil_breaker_record(f->b, &a, RESIL_BREAKER_FAILURE), 0);
    assert_state(f, RESIL_BREAKER_OPEN);
    /* the other probe's late success belongs to the old generation */
    assert_int_equal(resil_breaker_record(f->b, &b, RESIL_BREAKER_SUCCESS), RESIL_ESTATE);
    assert_state(f, RESIL_BREAKER_OPEN);
}

static void a_hung_probe_is_replaced_after_probe_timeout(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.probe_timeout = RESIL_S(2);
    open_then_wait(f, &o);
    resil_breaker_permit hung, next;
    assert_int_equal(resil_breaker_acquire(f->b, &hung), 0);
    advance(f, RESIL_MS(500));
    assert_int_equal(resil_breaker_acquire(f->b, &next), RESIL_EREJECTED);
    assert_int_equal(next.retry_after, RESIL_MS(1500));
    advance(f, RESIL_MS(1500));
    assert_int_equal(resil_breaker_acquire(f->b, &next), 0);
    assert_true(next.probe);
    /* the hung probe finally answers: too late, it was replaced */
    assert_int_equal(resil_breaker_record(f->b, &hung, RESIL_BREAKER_SUCCESS), RESIL_ESTATE);
    assert_state(f, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(resil_breaker_record(f->b, &next, RESIL_BREAKER_SUCCESS), 0);
    assert_state(f, RESIL_BREAKER_CLOSED);
}

static void probe_timeout_zero_follows_the_break_in_force(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.probe_timeout = 0;
    open_then_wait(f, &o);
    resil_breaker_permit hung, next;
    assert_int_equal(resil_breaker_acquire(f->b, &hung), 0);
    advance(f, RESIL_MS(4999));
    assert_int_equal(resil_breaker_acquire(f->b, &next), RESIL_EREJECTED);
    assert_int_equal(next.retry_after, RESIL_MS(1));
    advance(f, RESIL_MS(1));
    assert_int_equal(resil_breaker_acquire(f->b, &next), 0);
}

static void an_ignored_probe_frees_its_slot(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    open_then_wait(f, &o);
    calls(f, "I");
    assert_state(f, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(stats(f).probes_in_flight, 0);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_true(p.probe);
}

static void the_break_grows_on_each_reopen_up_to_the_cap(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    o.break_duration = RESIL_S(1);
    o.break_growth = 2.0;
    o.max_break_duration = RESIL_S(5);
    make(f, &o);
    calls(f, "F");
    resil_duration expected[] = {RESIL_S(1), RESIL_S(2), RESIL_S(4), RESIL_S(5), RESIL_S(5)};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(f->ev[f->n_ev - 1].break_duration, expected[i]);
        assert_int_equal(stats(f).current_break, expected[i]);
        advance(f, expected[i] - 1);
        assert_int_equal(call(f, RESIL_BREAKER_FAILURE), RESIL_EREJECTED);
        advance(f, 1);
        calls(f, "F"); /* the probe fails: re-open */
    }
    advance(f, RESIL_S(5));
    calls(f, "S");
    assert_state(f, RESIL_BREAKER_CLOSED);
    calls(f, "F");
    assert_int_equal(f->ev[f->n_ev - 1].break_duration, RESIL_S(1));
}

static void closing_starts_a_fresh_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.6, 2);
    make(f, &o);
    calls(f, "SFF");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_int_equal(stats(f).window_total, 3); /* kept while open: why it tripped */
    advance(f, RESIL_S(5));
    calls(f, "S");
    assert_state(f, RESIL_BREAKER_CLOSED);
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.window_total, 0);
    assert_int_equal(s.consecutive_failures, 0);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_CLOSED); /* 1 call < throughput 2 */
}

/* ---- generations ------------------------------------------------------- */

static void a_stale_failure_does_not_reopen_a_freshly_closed_breaker(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_breaker_permit slow;
    assert_int_equal(resil_breaker_acquire(f->b, &slow), 0);
    calls(f, "F");
    advance(f, RESIL_S(5));
    calls(f, "S");
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(resil_breaker_record(f->b, &slow, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    assert_state(f, RESIL_BREAKER_CLOSED);
    assert_int_equal(stats(f).consecutive_failures, 0);
}

static void results_from_before_a_trip_do_not_enter_the_window(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 2);
    make(f, &o);
    resil_breaker_permit early;
    assert_int_equal(resil_breaker_acquire(f->b, &early), 0);
    calls(f, "FF");
    assert_state(f, RESIL_BREAKER_OPEN);
    assert_int_equal(resil_breaker_record(f->b, &early, RESIL_BREAKER_SUCCESS), RESIL_ESTATE);
    assert_int_equal(stats(f).window_total, 2);
}

static void every_transition_moves_the_generation_on(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    assert_int_equal(stats(f).generation, 0);
    calls(f, "F");
    advance(f, RESIL_S(5));
    calls(f, "S");
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.generation, 3);
    assert_int_equal(s.transitions, 3);
    for (size_t i = 0; i < f->n_ev; i++)
        assert_int_equal(f->ev[i].generation, i + 1);
}

/* ---- ignored results and execute -------------------------------------- */

static void ignored_results_count_as_neither(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 2);
    o.kind = RESIL_BREAKER_BOTH;
    o.failure_threshold = 2;
    make(f, &o);
    calls(f, "FII");
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.consecutive_failures, 1);
    assert_int_equal(s.window_total, 1);
    calls(f, "F");
    assert_state(f, RESIL_BREAKER_OPEN);
}

static resil_outcome scripted_outcome;

static resil_outcome scripted_op(resil_attempt_ctx *ctx)
{
    int *runs = ctx->user;
    (*runs)++;
    return scripted_outcome;
}

static int execute(fx *f, resil_outcome o, resil_outcome *out, int *runs)
{
    scripted_outcome = o;
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX,
                             .clock = resil_fake_clock_clock(f->fc), .user = runs};
    return resil_breaker_execute(f->b, scripted_op, &ctx, NULL, NULL, out);
}

static void execute_counts_a_cancelled_outcome_as_ignored(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_outcome out;
    int runs = 0;
    assert_int_equal(execute(f, resil_fail(RESIL_CANCELLED, 0, "gave up"), &out, &runs), 0);
    assert_int_equal(runs, 1);
    assert_int_equal(out.kind, RESIL_CANCELLED);
    assert_state(f, RESIL_BREAKER_CLOSED);
}

static void execute_counts_any_other_failure(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 2);
    make(f, &o);
    resil_outcome out;
    int runs = 0;
    execute(f, resil_fail(RESIL_PERMANENT, 400, NULL), &out, &runs);
    execute(f, resil_fail(RESIL_TIMEOUT, 0, NULL), &out, &runs);
    assert_int_equal(runs, 2);
    assert_state(f, RESIL_BREAKER_OPEN);
}

static void execute_rejects_with_a_rejected_outcome_and_retry_after(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_outcome out;
    int runs = 0;
    execute(f, resil_fail(RESIL_TRANSIENT, 503, NULL), &out, &runs);
    advance(f, RESIL_S(1));
    assert_int_equal(execute(f, resil_ok(), &out, &runs), RESIL_EREJECTED);
    assert_int_equal(runs, 1);
    assert_int_equal(out.kind, RESIL_REJECTED);
    assert_int_equal(out.code, RESIL_EREJECTED);
    assert_string_equal(out.detail, "circuit open");
    assert_int_equal(out.retry_after, RESIL_S(4));
}

static void execute_without_a_breaker_just_runs(void **state)
{
    fx *f = *state;
    resil_outcome out;
    int runs = 0;
    assert_int_equal(execute(f, resil_fail(RESIL_TRANSIENT, 1, NULL), &out, &runs), 0);
    assert_int_equal(runs, 1);
    assert_int_equal(out.kind, RESIL_TRANSIENT);
}

static resil_breaker_result only_5xx_fail(const resil_outcome *o, const resil_attempt_ctx *ctx,
                                          void *ud)
{
    (void)ctx;
    (void)ud;
    return o->code >= 500 ? RESIL_BREAKER_FAILURE : RESIL_BREAKER_SUCCESS;
}

static void execute_uses_the_callers_classifier(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_outcome out;
    int runs = 0;
    scripted_outcome = resil_fail(RESIL_PERMANENT, 404, NULL);
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX, .user = &runs};
    assert_int_equal(resil_breaker_execute(f->b, scripted_op, &ctx, only_5xx_fail, NULL, &out), 0);
    assert_state(f, RESIL_BREAKER_CLOSED);
    scripted_outcome = resil_fail(RESIL_TRANSIENT, 503, NULL);
    resil_breaker_execute(f->b, scripted_op, &ctx, only_5xx_fail, NULL, &out);
    assert_state(f, RESIL_BREAKER_OPEN);
}

static resil_breaker_result keep_ctx(const resil_outcome *o, const resil_attempt_ctx *ctx,
                                     void *ud)
{
    (void)o;
    *(const resil_attempt_ctx **)ud = ctx;
    return RESIL_BREAKER_SUCCESS;
}

static void execute_hands_the_classifier_the_attempt_context(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_outcome out;
    int runs = 0;
    scripted_outcome = resil_fail(RESIL_TRANSIENT, 503, NULL);
    resil_attempt_ctx ctx = {.attempt = 3, .deadline = RESIL_INSTANT_MAX, .user = &runs, .hedge = 2};
    const resil_attempt_ctx *seen = NULL;
    assert_int_equal(resil_breaker_execute(f->b, scripted_op, &ctx, keep_ctx, &seen, &out), 0);
    assert_ptr_equal(seen, &ctx);
    assert_ptr_equal(seen->user, &runs);
    assert_int_equal(seen->attempt, 3);
    assert_int_equal(seen->hedge, 2);
}

static void default_classifier_maps_kinds(void **state)
{
    (void)state;
    resil_outcome ok = resil_ok(), cancel = resil_fail(RESIL_CANCELLED, 0, NULL);
    resil_outcome rej = resil_fail(RESIL_REJECTED, 0, NULL), user = resil_fail(RESIL_KIND_USER, 7, NULL);
    assert_int_equal(resil_breaker_classify_default(&ok, NULL, NULL), RESIL_BREAKER_SUCCESS);
    assert_int_equal(resil_breaker_classify_default(&cancel, NULL, NULL), RESIL_BREAKER_IGNORED);
    assert_int_equal(resil_breaker_classify_default(&rej, NULL, NULL), RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_breaker_classify_default(&user, NULL, NULL), RESIL_BREAKER_FAILURE);
}

/* ---- manual control ---------------------------------------------------- */

static void isolate_holds_it_open_until_closed_by_hand(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_breaker_isolate(f->b);
    advance(f, RESIL_S(3600));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_int_equal(p.retry_after, RESIL_DURATION_MAX);
    assert_int_equal(p.state, RESIL_BREAKER_ISOLATED);
    assert_int_equal(stats(f).next_probe_at, RESIL_INSTANT_MAX);
    resil_outcome out;
    int runs = 0;
    assert_int_equal(execute(f, resil_ok(), &out, &runs), RESIL_EREJECTED);
    assert_string_equal(out.detail, "circuit isolated");
    resil_breaker_close(f->b);
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_ISOLATED, RESIL_BREAKER_BY_ISOLATE);
    assert_event(f, 1, RESIL_BREAKER_ISOLATED, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_CLOSE);
}

static void isolating_an_open_breaker_outlasts_its_break(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "F");
    resil_breaker_isolate(f->b);
    advance(f, RESIL_S(10));
    assert_int_equal(call(f, RESIL_BREAKER_SUCCESS), RESIL_EREJECTED);
    assert_state(f, RESIL_BREAKER_ISOLATED);
}

static void disable_admits_everything_and_records_nothing(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_breaker_disable(f->b);
    for (int i = 0; i < 10; i++) {
        resil_breaker_permit p;
        assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
        assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    }
    assert_state(f, RESIL_BREAKER_DISABLED);
    assert_int_equal(stats(f).consecutive_failures, 0);
    resil_breaker_close(f->b);
    assert_state(f, RESIL_BREAKER_CLOSED);
}

static void close_by_hand_keeps_the_history(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "F");
    resil_breaker_close(f->b);
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.opens, 1);
    assert_true(s.ever_opened);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_CLOSE);
}

static void reset_forgets_the_history(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    calls(f, "F");
    resil_breaker_reset(f->b);
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.opens, 0);
    assert_false(s.ever_opened);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_RESET);
}

static void reset_of_a_closed_breaker_discards_calls_in_flight(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.5, 2);
    make(f, &o);
    calls(f, "F");
    resil_breaker_permit before;
    assert_int_equal(resil_breaker_acquire(f->b, &before), 0);
    resil_breaker_reset(f->b);
    assert_int_equal(f->n_ev, 0); /* no state change, no event */
    assert_int_equal(resil_breaker_record(f->b, &before, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    assert_int_equal(stats(f).window_total, 0);
    assert_int_equal(stats(f).consecutive_failures, 0);
}

static void manual_control_to_the_current_state_is_silent(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_breaker_close(f->b);
    resil_breaker_isolate(f->b);
    resil_breaker_isolate(f->b);
    resil_breaker_disable(f->b);
    resil_breaker_disable(f->b);
    assert_int_equal(f->n_ev, 2);
}

/* ---- diagnostics and the NULL breaker ---------------------------------- */

static void no_breaker_is_distinct_from_closed(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    assert_int_equal(resil_breaker_state_of(NULL), RESIL_BREAKER_NONE);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    assert_string_equal(resil_breaker_state_name(RESIL_BREAKER_NONE), "none");
}

static void a_null_breaker_admits_and_accepts_results(void **state)
{
    (void)state;
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(NULL, &p), 0);
    assert_int_equal(p.state, RESIL_BREAKER_NONE);
    assert_int_equal(resil_breaker_record(NULL, &p, RESIL_BREAKER_FAILURE), 0);
    resil_breaker_isolate(NULL);
    resil_breaker_reset(NULL);
    resil_breaker_free(NULL);
    assert_string_equal(resil_breaker_name(NULL), "");
    resil_breaker_stats s;
    assert_int_equal(resil_breaker_stats_get(NULL, &s), RESIL_EINVAL);
}

static void bad_protocol_arguments_are_refused(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, NULL), RESIL_EINVAL);
    assert_int_equal(resil_breaker_record(f->b, NULL, RESIL_BREAKER_SUCCESS), RESIL_EINVAL);
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(resil_breaker_record(f->b, &p, (resil_breaker_result)7), RESIL_EINVAL);
    assert_int_equal(resil_breaker_stats_get(f->b, NULL), RESIL_EINVAL);
    resil_outcome out;
    resil_attempt_ctx ctx = {0};
    assert_int_equal(resil_breaker_execute(f->b, NULL, &ctx, NULL, NULL, &out), RESIL_EINVAL);
    assert_int_equal(resil_breaker_execute(f->b, scripted_op, NULL, NULL, NULL, &out), RESIL_EINVAL);
    assert_int_equal(resil_breaker_execute(f->b, scripted_op, &ctx, NULL, NULL, NULL), RESIL_EINVAL);
}

static void stats_report_the_window_and_history(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = ratio(f, 0.9, 100);
    make(f, &o);
    calls(f, "SSSF");
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.window_total, 4);
    assert_int_equal(s.window_failures, 1);
    assert_near(s.failure_ratio, 0.25, 1e-12);
    assert_int_equal(s.consecutive_failures, 1);
    assert_false(s.ever_opened);
    assert_int_equal(s.opens, 0);
    assert_int_equal(s.next_probe_at, 0);
    assert_int_equal(s.current_break, RESIL_S(5));
    assert_int_equal(s.events_dropped, 0);
    advance(f, RESIL_S(10));
    assert_int_equal(stats(f).window_total, 0); /* aged out as of now */
}

static void names_of_states_and_reasons(void **state)
{
    (void)state;
    assert_string_equal(resil_breaker_state_name(RESIL_BREAKER_CLOSED), "closed");
    assert_string_equal(resil_breaker_state_name(RESIL_BREAKER_OPEN), "open");
    assert_string_equal(resil_breaker_state_name(RESIL_BREAKER_HALF_OPEN), "half-open");
    assert_string_equal(resil_breaker_state_name(RESIL_BREAKER_ISOLATED), "isolated");
    assert_string_equal(resil_breaker_state_name(RESIL_BREAKER_DISABLED), "disabled");
    assert_string_equal(resil_breaker_state_name((resil_breaker_state)42), "unknown");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_CONSECUTIVE), "consecutive failures");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_RATIO), "failure ratio");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_SLOW_CALLS), "slow calls");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_BREAK_ELAPSED), "break elapsed");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_PROBE_FAILED), "probe failed");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_PROBES_SUCCEEDED), "probes succeeded");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_ISOLATE), "isolated by hand");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_CLOSE), "closed by hand");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_RESET), "reset");
    assert_string_equal(resil_breaker_reason_name(RESIL_BREAKER_BY_DISABLE), "disabled by hand");
    assert_string_equal(resil_breaker_reason_name((resil_breaker_reason)0), "unknown");
}

static void the_name_is_copied(void **state)
{
    fx *f = *state;
    char name[] = "payments";
    resil_breaker_opts o = consecutive(f, 1);
    o.name = name;
    make(f, &o);
    name[0] = 'X';
    assert_string_equal(resil_breaker_name(f->b), "payments");
}

static void a_retained_breaker_survives_one_free(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 1);
    make(f, &o);
    assert_ptr_equal(resil_breaker_retain(f->b), f->b);
    resil_breaker_free(f->b); /* drops the extra reference */
    assert_int_equal(call(f, RESIL_BREAKER_SUCCESS), 0);
}

/* ---- events ------------------------------------------------------------ */

static void events_trace_a_full_cycle_in_order(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(f, 2);
    make(f, &o);
    calls(f, "FF");
    advance(f, RESIL_S(5));
    calls(f, "F");
    advance(f, RESIL_S(5));
    calls(f, "S");
    assert_int_equal(f->n_ev, 5);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_BY_BREAK_ELAPSED);
    assert_event(f, 2, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_PROBE_FAILED);
    assert_event(f, 3, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_BY_BREAK_ELAPSED);
    assert_event(f, 4, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_PROBES_SUCCEEDED);
    assert_int_equal(f->ev[2].at, T0 + RESIL_S(5));
    assert_int_equal(f->ev[4].at, T0 + RESIL_S(10));
    assert_int_equal(f->ev[4].break_duration, 0);
}

typedef struct reentrant {
    fx *f;
    resil_breaker_state seen[8];
    int n;
} reentrant;

static void listener_calling_back(resil_breaker *b, const resil_breaker_event *e, void *ud)
{
    reentrant *r = ud;
    resil_breaker_stats s;
    resil_breaker_stats_get(b, &s); /* would deadlock if called under the lock */
    if (r->n < 8)
        r->seen[r->n++] = s.state;
    if (e->to == RESIL_BREAKER_OPEN)
        resil_breaker_isolate(b); /* a transition from inside the listener */
}

static void the_listener_may_call_back_into_the_breaker(void **state)
{
    fx *f = *state;
    reentrant r = {f, {0}, 0};
    resil_breaker_opts o = consecutive(f, 1);
    o.listener = listener_calling_back;
    o.listener_ud = &r;
    make(f, &o);
    calls(f, "F");
    assert_int_equal(r.n, 2); /* open, then the isolation it caused */
    assert_int_equal(r.seen[0], RESIL_BREAKER_OPEN);
    assert_int_equal(r.seen[1], RESIL_BREAKER_ISOLATED);
    assert_state(f, RESIL_BREAKER_ISOLATED);
    assert_int_equal(stats(f).events_dropped, 0);
}

typedef struct flooder {
    int delivered;
    bool flooded;
} flooder;

static void listener_flooding_its_queue(resil_breaker *b, const resil_breaker_event *e, void *ud)
{
    (void)e;
    flooder *fl = ud;
    fl->delivered++;
    if (fl->flooded)
        return;
    fl->flooded = true;
    for (int i = 0; i < 20; i++) { /* 40 transitions from inside the callback */
        resil_breaker_isolate(b);
        resil_breaker_close(b);
    }
}

static void a_listener_overflowing_its_own_queue_has_the_excess_counted(void **state)
{
    fx *f = *state;
    flooder fl = {0, false};
    resil_breaker_opts o = consecutive(f, 1);
    o.listener = listener_flooding_its_queue;
    o.listener_ud = &fl;
    make(f, &o);
    calls(f, "F");
    resil_breaker_stats s = stats(f);
    assert_int_equal(s.transitions, 41);
    assert_int_equal(fl.delivered, 1 + RESIL_BREAKER_EVENT_QUEUE);
    assert_int_equal(s.events_dropped, 40 - RESIL_BREAKER_EVENT_QUEUE);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(consecutive_trips_on_threshold_failures_in_a_row),
        T(a_success_ends_the_failure_run),
        T(threshold_of_one_trips_on_the_first_failure),
        T(consecutive_kind_keeps_no_window),
        T(diluted_failures_keep_ratio_closed_while_consecutive_trips),
        T(ratio_needs_exactly_minimum_throughput_calls),
        T(ratio_trips_when_the_share_equals_the_ratio),
        T(a_success_never_trips_the_ratio),
        T(old_buckets_age_out_of_the_ratio),
        T(calls_within_the_window_still_count),
        T(ratio_kind_still_reports_consecutive_failures),
        T(both_kind_trips_on_consecutive_first),
        T(both_kind_trips_on_ratio_first),
        T(slow_calls_trip_when_their_share_reaches_the_ratio),
        T(a_call_exactly_at_the_slow_duration_is_not_slow),
        T(slow_permits_carry_their_start),
        T(a_slow_probe_counts_as_failed),
        T(open_rejects_with_the_time_until_the_next_probe),
        T(state_reads_open_until_a_call_arrives),
        T(the_first_call_after_the_break_is_the_probe),
        T(half_open_admits_exactly_n_probes),
        T(success_threshold_consecutive_successes_close_it),
        T(any_probe_failure_reopens),
        T(a_failure_reopens_while_other_probes_are_out),
        T(a_hung_probe_is_replaced_after_probe_timeout),
        T(probe_timeout_zero_follows_the_break_in_force),
        T(an_ignored_probe_frees_its_slot),
        T(the_break_grows_on_each_reopen_up_to_the_cap),
        T(closing_starts_a_fresh_window),
        T(a_stale_failure_does_not_reopen_a_freshly_closed_breaker),
        T(results_from_before_a_trip_do_not_enter_the_window),
        T(every_transition_moves_the_generation_on),
        T(ignored_results_count_as_neither),
        T(execute_counts_a_cancelled_outcome_as_ignored),
        T(execute_counts_any_other_failure),
        T(execute_rejects_with_a_rejected_outcome_and_retry_after),
        T(execute_without_a_breaker_just_runs),
        T(execute_uses_the_callers_classifier),
        T(execute_hands_the_classifier_the_attempt_context),
        T(default_classifier_maps_kinds),
        T(isolate_holds_it_open_until_closed_by_hand),
        T(isolating_an_open_breaker_outlasts_its_break),
        T(disable_admits_everything_and_records_nothing),
        T(close_by_hand_keeps_the_history),
        T(reset_forgets_the_history),
        T(reset_of_a_closed_breaker_discards_calls_in_flight),
        T(manual_control_to_the_current_state_is_silent),
        T(no_breaker_is_distinct_from_closed),
        T(a_null_breaker_admits_and_accepts_results),
        T(bad_protocol_arguments_are_refused),
        T(stats_report_the_window_and_history),
        T(names_of_states_and_reasons),
        T(the_name_is_copied),
        T(a_retained_breaker_survives_one_free),
        T(events_trace_a_full_cycle_in_order),
        T(the_listener_may_call_back_into_the_breaker),
        T(a_listener_overflowing_its_own_queue_has_the_excess_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
