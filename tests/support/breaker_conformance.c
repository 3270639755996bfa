/*
 * breaker_conformance.c — the conformance suite (see the header): each test
 * builds one breaker through the implementation's factory on a fake clock,
 * drives it through the common API only, and checks one behaviour with
 * exact values. Time moves only when a test advances the clock; results
 * that reach an implementation later are waited for by its settle hook,
 * never by sleeping here. Events may be delivered by another thread than
 * the call that caused them (breaker.h), after that call returned, so a
 * test looking at an event waits until it has arrived; the bound on that
 * wait only keeps a missing event from hanging the suite.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "breaker_conformance.h"

#define EVENTS_MAX 32
#define EVENT_PATIENCE_S 30 /* a missing event fails after this, never a late one */

typedef struct seen {
    resil_breaker_state from, to;
    resil_breaker_reason reason;
} seen;

typedef struct fx {
    const breaker_impl *impl;
    resil_fake_clock *fc;
    resil_breaker *b;
    pthread_mutex_t mu; /* events may arrive on another thread */
    pthread_cond_t arrived;
    seen events[EVENTS_MAX];
    size_t len;
} fx;

/* ---- fixture ----------------------------------------------------------- */

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    f->impl = *state;
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->arrived, &ca);
    pthread_condattr_destroy(&ca);
    if (resil_fake_clock_new(RESIL_S(1), BREAKER_WALL_START, &f->fc) != 0)
        return -1;
    if (f->impl->begin != NULL && f->impl->begin(f->impl->ud) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    resil_breaker_free(f->b);
    if (f->impl->end != NULL)
        f->impl->end(f->impl->ud);
    resil_fake_clock_free(f->fc);
    pthread_cond_destroy(&f->arrived);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return 0;
}

static void record_event(resil_breaker *b, const resil_breaker_event *ev, void *ud)
{
    (void)b;
    fx *f = ud;
    pthread_mutex_lock(&f->mu);
    if (f->len < EVENTS_MAX)
        f->events[f->len++] = (seen){ev->from, ev->to, ev->reason};
    pthread_cond_broadcast(&f->arrived);
    pthread_mutex_unlock(&f->mu);
}

/* How many events have arrived once at least `n` have (or the patience ran
 * out): the caller then asserts the exact number. */
static size_t await_events(fx *f, size_t n)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += EVENT_PATIENCE_S;
    pthread_mutex_lock(&f->mu);
    while (f->len < n && pthread_cond_timedwait(&f->arrived, &f->mu, &until) != ETIMEDOUT)
        ;
    size_t got = f->len;
    pthread_mutex_unlock(&f->mu);
    return got;
}

static seen event_at(fx *f, size_t i)
{
    await_events(f, i + 1);
    pthread_mutex_lock(&f->mu);
    seen s = i < f->len ? f->events[i] : (seen){RESIL_BREAKER_NONE, RESIL_BREAKER_NONE, 0};
    pthread_mutex_unlock(&f->mu);
    return s;
}

static void assert_event(fx *f, size_t i, resil_breaker_state from, resil_breaker_state to,
                         resil_breaker_reason reason)
{
    seen s = event_at(f, i);
    assert_int_equal(s.from, from);
    assert_int_equal(s.to, to);
    assert_int_equal(s.reason, reason);
}

/* ---- breakers ---------------------------------------------------------- */

static resil_breaker_opts consecutive(uint32_t threshold)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = threshold;
    o.break_duration = RESIL_S(5);
    return o;
}

static resil_breaker_opts ratio(uint32_t minimum, double share)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO;
    o.minimum_throughput = minimum;
    o.failure_ratio = share;
    o.sampling_duration = RESIL_S(10);
    o.break_duration = RESIL_S(5);
    return o;
}

static resil_breaker *make(fx *f, resil_breaker_opts o)
{
    o.clock = resil_fake_clock_clock(f->fc);
    o.listener = record_event;
    o.listener_ud = f;
    f->b = f->impl->make(f->impl->ud, "conformance", &o);
    assert_non_null(f->b);
    return f->b;
}

static void settle(fx *f)
{
    if (f->impl->settle != NULL)
        f->impl->settle(f->impl->ud, f->b);
}

/* Acquire (asserting admission) and report `n` results of one kind. */
static void calls(fx *f, int n, resil_breaker_result r)
{
    for (int i = 0; i < n; i++) {
        resil_breaker_permit p;
        assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
        assert_int_equal(resil_breaker_record(f->b, &p, r), 0);
    }
}

static void trip(fx *f, uint32_t threshold)
{
    calls(f, (int)threshold, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
}

static void admit_probe(fx *f, resil_breaker_permit *p)
{
    assert_int_equal(resil_breaker_acquire(f->b, p), 0);
    assert_true(p->probe);
    assert_int_equal(p->state, RESIL_BREAKER_HALF_OPEN);
}

/* ---- states and rules --------------------------------------------------- */

static void a_new_breaker_is_closed_and_admits(void **state)
{
    fx *f = *state;
    make(f, consecutive(3));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(p.state, RESIL_BREAKER_CLOSED);
    assert_false(p.probe);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_SUCCESS), 0);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    assert_string_equal(resil_breaker_name(f->b), "conformance");
}

static void consecutive_failures_at_the_threshold_open_it(void **state)
{
    fx *f = *state;
    make(f, consecutive(3));
    calls(f, 2, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    calls(f, 1, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
}

static void a_success_ends_the_failure_run(void **state)
{
    fx *f = *state;
    make(f, consecutive(3));
    calls(f, 2, RESIL_BREAKER_FAILURE);
    calls(f, 1, RESIL_BREAKER_SUCCESS);
    calls(f, 2, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    resil_breaker_stats st;
    assert_int_equal(resil_breaker_stats_get(f->b, &st), 0);
    assert_int_equal(st.consecutive_failures, 2);
}

static void ignored_results_count_for_nothing(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    calls(f, 3, RESIL_BREAKER_IGNORED);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
}

static void the_ratio_rule_waits_for_minimum_throughput(void **state)
{
    fx *f = *state;
    make(f, ratio(4, 0.5));
    calls(f, 1, RESIL_BREAKER_SUCCESS);
    calls(f, 2, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
}

static void the_ratio_rule_opens_at_its_share(void **state)
{
    fx *f = *state;
    make(f, ratio(4, 0.5));
    calls(f, 2, RESIL_BREAKER_SUCCESS);
    calls(f, 2, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_RATIO);
}

static void an_open_breaker_rejects_until_the_break_ends(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(2));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_int_equal(p.state, RESIL_BREAKER_OPEN);
    assert_duration_equal(p.retry_after, RESIL_S(3));
}

/* ---- half-open ---------------------------------------------------------- */

static void after_the_break_the_next_call_is_the_probe(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit p, other;
    admit_probe(f, &p);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(resil_breaker_acquire(f->b, &other), RESIL_EREJECTED);
    assert_false(other.probe);
}

static void half_open_admits_as_many_probes_as_configured(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(1);
    o.half_open_probes = 2;
    o.success_threshold = 2;
    make(f, o);
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit a, b, c;
    admit_probe(f, &a);
    admit_probe(f, &b);
    assert_int_equal(resil_breaker_acquire(f->b, &c), RESIL_EREJECTED);
}

static void probe_successes_at_the_threshold_close_it(void **state)
{
    fx *f = *state;
    resil_breaker_opts o = consecutive(1);
    o.half_open_probes = 2;
    o.success_threshold = 2;
    make(f, o);
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit a, b;
    admit_probe(f, &a);
    admit_probe(f, &b);
    assert_int_equal(resil_breaker_record(f->b, &a, RESIL_BREAKER_SUCCESS), 0);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(resil_breaker_record(f->b, &b, RESIL_BREAKER_SUCCESS), 0);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
}

static void a_failed_probe_opens_it_again(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit p;
    admit_probe(f, &p);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), 0);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_duration_equal(p.retry_after, RESIL_S(5));
}

/* ---- generations ------------------------------------------------------- */

static void a_result_from_before_a_change_is_discarded(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(resil_breaker_isolate(f->b), 0);
    assert_int_equal(resil_breaker_close(f->b), 0);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
}

static void a_probe_result_from_before_a_change_is_discarded(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit p;
    admit_probe(f, &p);
    assert_int_equal(resil_breaker_close(f->b), 0);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
}

static void the_generation_moves_on_at_every_change(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    resil_breaker_stats before, after;
    assert_int_equal(resil_breaker_stats_get(f->b, &before), 0);
    trip(f, 1);
    assert_int_equal(resil_breaker_stats_get(f->b, &after), 0);
    assert_int_not_equal(after.generation, before.generation);
}

/* ---- events ------------------------------------------------------------ */

static void events_follow_a_trip_a_probe_and_recovery_in_order(void **state)
{
    fx *f = *state;
    make(f, consecutive(2));
    trip(f, 2);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit p;
    admit_probe(f, &p);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_SUCCESS), 0);
    settle(f);
    assert_int_equal(await_events(f, 3), 3);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN,
                 RESIL_BREAKER_BY_BREAK_ELAPSED);
    assert_event(f, 2, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_CLOSED,
                 RESIL_BREAKER_BY_PROBES_SUCCEEDED);
}

static void a_failed_probe_is_reported_as_such(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    trip(f, 1);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit p;
    admit_probe(f, &p);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), 0);
    settle(f);
    assert_int_equal(await_events(f, 3), 3);
    assert_event(f, 2, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
                 RESIL_BREAKER_BY_PROBE_FAILED);
}

/* ---- manual control ---------------------------------------------------- */

static void isolate_holds_it_open_until_closed_by_hand(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    assert_int_equal(resil_breaker_isolate(f->b), 0);
    resil_fake_clock_advance(f->fc, RESIL_S(3600));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_int_equal(p.state, RESIL_BREAKER_ISOLATED);
    assert_duration_equal(p.retry_after, RESIL_DURATION_MAX);
    assert_int_equal(resil_breaker_close(f->b), 0);
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(p.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(await_events(f, 2), 2);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_ISOLATED, RESIL_BREAKER_BY_ISOLATE);
    assert_event(f, 1, RESIL_BREAKER_ISOLATED, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_CLOSE);
}

static void close_by_hand_ends_a_break(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    trip(f, 1);
    assert_int_equal(resil_breaker_close(f->b), 0);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    calls(f, 1, RESIL_BREAKER_SUCCESS);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_CLOSE);
}

static void reset_closes_it_and_starts_the_count_again(void **state)
{
    fx *f = *state;
    make(f, consecutive(2));
    trip(f, 2);
    assert_int_equal(resil_breaker_reset(f->b), 0);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    assert_event(f, 1, RESIL_BREAKER_OPEN, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_RESET);
    calls(f, 1, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
}

static void disable_admits_everything_and_counts_nothing(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    if ((f->impl->caps & BREAKER_CAN_DISABLE) == 0) {
        assert_int_equal(resil_breaker_disable(f->b), RESIL_EINVAL);
        assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
        return;
    }
    assert_int_equal(resil_breaker_disable(f->b), 0);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), 0);
    assert_int_equal(p.state, RESIL_BREAKER_DISABLED);
    assert_int_equal(resil_breaker_record(f->b, &p, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_DISABLED);
}

/* ---- rules beyond the two built-in ones --------------------------------- */

static void results_without_a_permit_count_toward_the_rules(void **state)
{
    fx *f = *state;
    make(f, consecutive(2));
    if ((f->impl->caps & BREAKER_CAN_RECORD_WITHOUT_PERMIT) == 0) {
        assert_int_equal(resil_breaker_record_failure(f->b, 0), RESIL_EINVAL);
        assert_int_equal(resil_breaker_record_success(f->b, 0), RESIL_EINVAL);
        return;
    }
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(3)), 0);
    assert_int_equal(resil_breaker_record_success(f->b, RESIL_MS(3)), 0);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(3)), 0);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    assert_int_equal(resil_breaker_record_failure(f->b, RESIL_MS(3)), 0);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_CONSECUTIVE);
}

static void results_without_a_permit_are_refused_unless_closed(void **state)
{
    fx *f = *state;
    make(f, consecutive(1));
    if ((f->impl->caps & BREAKER_CAN_RECORD_WITHOUT_PERMIT) == 0)
        return;
    trip(f, 1);
    assert_int_equal(resil_breaker_record_success(f->b, 0), RESIL_ESTATE);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_breaker_permit p;
    admit_probe(f, &p);
    assert_int_equal(resil_breaker_record_success(f->b, 0), RESIL_ESTATE);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_HALF_OPEN);
}

static void a_count_window_judges_the_last_calls_only(void **state)
{
    fx *f = *state;
    if ((f->impl->caps & BREAKER_CAN_COUNT_WINDOW) == 0)
        return;
    resil_breaker_opts o = ratio(4, 0.5);
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    o.window_size = 4;
    make(f, o);
    calls(f, 1, RESIL_BREAKER_FAILURE);
    calls(f, 4, RESIL_BREAKER_SUCCESS); /* the failure leaves */
    calls(f, 1, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    calls(f, 1, RESIL_BREAKER_FAILURE); /* S S F F */
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_RATIO);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_EREJECTED);
    assert_int_equal(p.retry_after, RESIL_S(5));
}

static bool two_failures(const resil_breaker_counts *c, void *ud)
{
    (void)ud;
    return c->failures >= 2;
}

static void the_trip_predicate_opens_it_when_it_says_so(void **state)
{
    fx *f = *state;
    if ((f->impl->caps & BREAKER_CAN_PREDICATE) == 0)
        return;
    resil_breaker_opts o = ratio(100, 1.0);
    o.kind = RESIL_BREAKER_PREDICATE;
    o.trip = two_failures;
    make(f, o);
    calls(f, 1, RESIL_BREAKER_FAILURE);
    calls(f, 3, RESIL_BREAKER_SUCCESS);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_CLOSED);
    calls(f, 1, RESIL_BREAKER_FAILURE);
    settle(f);
    assert_int_equal(resil_breaker_state_of(f->b), RESIL_BREAKER_OPEN);
    assert_event(f, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_PREDICATE);
}

/* ---- the run ------------------------------------------------------------ */

#define T(name) cmocka_unit_test_prestate_setup_teardown(name, setup, teardown, NULL)

int breaker_conformance_run(const breaker_impl *impl)
{
    struct CMUnitTest tests[] = {
        T(a_new_breaker_is_closed_and_admits),
        T(consecutive_failures_at_the_threshold_open_it),
        T(a_success_ends_the_failure_run),
        T(ignored_results_count_for_nothing),
        T(the_ratio_rule_waits_for_minimum_throughput),
        T(the_ratio_rule_opens_at_its_share),
        T(an_open_breaker_rejects_until_the_break_ends),
        T(after_the_break_the_next_call_is_the_probe),
        T(half_open_admits_as_many_probes_as_configured),
        T(probe_successes_at_the_threshold_close_it),
        T(a_failed_probe_opens_it_again),
        T(a_result_from_before_a_change_is_discarded),
        T(a_probe_result_from_before_a_change_is_discarded),
        T(the_generation_moves_on_at_every_change),
        T(events_follow_a_trip_a_probe_and_recovery_in_order),
        T(a_failed_probe_is_reported_as_such),
        T(isolate_holds_it_open_until_closed_by_hand),
        T(close_by_hand_ends_a_break),
        T(reset_closes_it_and_starts_the_count_again),
        T(disable_admits_everything_and_counts_nothing),
        T(results_without_a_permit_count_toward_the_rules),
        T(results_without_a_permit_are_refused_unless_closed),
        T(a_count_window_judges_the_last_calls_only),
        T(the_trip_predicate_opens_it_when_it_says_so),
    };
    size_t n = sizeof tests / sizeof tests[0];
    for (size_t i = 0; i < n; i++)
        tests[i].initial_state = (void *)impl;
    return _cmocka_run_group_tests(impl->name, tests, n, NULL, NULL);
}
