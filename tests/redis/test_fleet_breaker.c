/*
 * test_fleet_breaker.c — the shared breaker's semantics, with several
 * instances (each its own client and connections) in one process sharing a
 * fake clock: shared trips, fleet versus per-instance counting, half-open
 * across instances, manual control, stale results and events.
 *
 * Rounds run when a test calls resil_redis_sync() (the clients' interval is
 * an hour), so "A flushed, then B looked" is a sequence the test writes,
 * not a race it hopes to win; the PUBLISH path has its own test.
 */
#include "fleet_test.h"

static resil_outcome count_call_op(resil_attempt_ctx *ctx)
{
    (*(int *)ctx->user)++;
    return resil_ok();
}

typedef struct fleet {
    resil_fake_clock *fc;
    resil_redis *r[4];
    resil_breaker *b[4];
    int n;
    fleet_events events;
} fleet;

/* n instances of breaker `o`, each on its own client; instance 1 records
 * events. */
static void fleet_up(fleet *f, int n, resil_redis_breaker_opts *o)
{
    fleet_events_init(&f->events);
    f->n = n;
    for (int i = 0; i < n; i++) {
        f->r[i] = fleet_client(i == 1 ? &f->events : NULL);
        f->b[i] = fleet_breaker(f->r[i], o);
    }
}

static void fleet_down(fleet *f)
{
    for (int i = 0; i < f->n; i++) {
        resil_breaker_free(f->b[i]);
        resil_redis_free(f->r[i]);
    }
    resil_fake_clock_free(f->fc);
    fleet_events_destroy(&f->events);
}

static void sync_all(fleet *f)
{
    for (int i = 0; i < f->n; i++)
        assert_int_equal(resil_redis_sync(f->r[i]), 0);
}

static resil_duration rejected_after(resil_breaker *b)
{
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), RESIL_EREJECTED);
    return p.retry_after;
}

/* ---- shared state ----------------------------------------------------------- */

static void a_trip_makes_b_reject_without_calling_the_dependency(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("payments", 3, f.fc);
    fleet_up(&f, 2, &o);

    fleet_calls(f.b[0], 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);

    int calls = 0;
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX,
                             .clock = resil_fake_clock_clock(f.fc), .user = &calls};
    resil_outcome out;
    assert_int_equal(resil_breaker_execute(f.b[1], count_call_op, &ctx, NULL, NULL, &out),
                     RESIL_EREJECTED);
    assert_int_equal(calls, 0);
    assert_int_equal(out.kind, RESIL_REJECTED);
    assert_string_equal(out.detail, "circuit open");
    assert_duration_equal(out.retry_after, RESIL_S(5));
    assert_int_equal(resil_breaker_state_of(f.b[0]), RESIL_BREAKER_OPEN);
    fleet_down(&f);
}

static void b_learns_of_a_trip_by_publish_without_asking(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("publish", 2, f.fc);
    fleet_up(&f, 2, &o);

    fleet_calls(f.b[0], 2, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);

    fleet_wait_until(resil_breaker_state_of(f.b[1]) == RESIL_BREAKER_OPEN);
    resil_redis_stats st;
    resil_redis_stats_get(f.r[1], &st);
    assert_true(st.messages >= 1);
    assert_duration_equal(rejected_after(f.b[1]), RESIL_S(5));
    fleet_down(&f);
}

static void a_local_threshold_flushes_without_waiting_for_the_interval(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("eager", 2, f.fc);
    fleet_up(&f, 2, &o);

    /* The clients' interval is an hour: only the would-trip wake-up can
     * have flushed these. */
    fleet_calls(f.b[0], 2, RESIL_BREAKER_FAILURE);
    fleet_wait_until(resil_breaker_state_of(f.b[1]) == RESIL_BREAKER_OPEN);
    fleet_down(&f);
}

/* ---- fleet versus per-instance counting -------------------------------------- */

static void fleet_counting_trips_on_failures_spread_over_four_instances(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("spread", 8, f.fc);
    fleet_up(&f, 4, &o);

    for (int i = 0; i < 4; i++) {
        fleet_calls(f.b[i], 2, RESIL_BREAKER_FAILURE);
        assert_int_equal(resil_redis_sync(f.r[i]), 0);
        resil_redis_breaker_status s = fleet_status(f.b[i]);
        if (i < 3) {
            assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
            assert_int_equal(s.consecutive_failures, 2 * (i + 1));
        } else {
            assert_int_equal(s.state, RESIL_BREAKER_OPEN);
            assert_int_equal(s.reason, RESIL_BREAKER_BY_CONSECUTIVE);
        }
    }
    fleet_down(&f);
}

static void local_counting_does_not_trip_on_failures_spread_over_four_instances(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("spread-local", 8, f.fc);
    o.counting = RESIL_REDIS_COUNT_LOCAL;
    fleet_up(&f, 4, &o);

    for (int i = 0; i < 4; i++)
        fleet_calls(f.b[i], 2, RESIL_BREAKER_FAILURE);
    sync_all(&f);

    assert_int_equal(fleet_status(f.b[0]).state, RESIL_BREAKER_CLOSED);
    for (int i = 0; i < 4; i++) {
        resil_breaker_stats st;
        resil_breaker_stats_get(resil_redis_breaker_fallback(f.b[i]), &st);
        assert_int_equal(st.consecutive_failures, 2);
        assert_int_equal(resil_breaker_state_of(f.b[i]), RESIL_BREAKER_CLOSED);
    }
    fleet_down(&f);
}

static void local_counting_trip_on_one_instance_opens_it_for_all(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("local-trip", 3, f.fc);
    o.counting = RESIL_REDIS_COUNT_LOCAL;
    fleet_up(&f, 2, &o);

    fleet_calls(f.b[0], 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);

    resil_redis_breaker_status s = fleet_status(f.b[1]);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_duration_equal(rejected_after(f.b[1]), RESIL_S(5));
    fleet_down(&f);
}

static void a_success_on_another_instance_ends_the_fleet_run(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("run", 4, f.fc);
    fleet_up(&f, 2, &o);

    fleet_calls(f.b[0], 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    fleet_calls(f.b[1], 1, RESIL_BREAKER_SUCCESS);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    assert_int_equal(fleet_status(f.b[0]).consecutive_failures, 0);

    fleet_calls(f.b[0], 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    resil_redis_breaker_status s = fleet_status(f.b[0]);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.consecutive_failures, 3);
    fleet_down(&f);
}

static resil_redis_breaker_opts ratio_opts(const char *name, resil_fake_clock *fc)
{
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o);
    o.name = name;
    o.rules.kind = RESIL_BREAKER_RATIO;
    o.rules.failure_ratio = 0.5;
    o.rules.minimum_throughput = 10;
    o.rules.sampling_duration = RESIL_S(10);
    o.rules.clock = resil_fake_clock_clock(fc);
    return o;
}

static void the_ratio_rule_weighs_the_whole_fleets_window(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = ratio_opts("ratio", f.fc);
    fleet_up(&f, 2, &o);

    fleet_calls(f.b[0], 5, RESIL_BREAKER_SUCCESS);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    fleet_calls(f.b[1], 4, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    resil_redis_breaker_status s = fleet_status(f.b[1]);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED); /* 9 calls: below the throughput */
    assert_int_equal(s.window_total, 9);
    assert_int_equal(s.window_failures, 4);

    fleet_calls(f.b[1], 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    s = fleet_status(f.b[1]);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_RATIO);
    fleet_down(&f);
}

static void fleet_window_counts_age_out_after_the_sampling_duration(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = ratio_opts("aging", f.fc);
    fleet_up(&f, 1, &o);

    fleet_calls(f.b[0], 9, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(fleet_status(f.b[0]).window_failures, 9);

    resil_fake_clock_advance(f.fc, RESIL_S(10));
    assert_int_equal(fleet_status(f.b[0]).window_total, 0);
    fleet_calls(f.b[0], 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    resil_redis_breaker_status s = fleet_status(f.b[0]);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.window_total, 1);
    fleet_down(&f);
}

static void slow_calls_count_toward_the_fleets_slow_rule(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = ratio_opts("slow", f.fc);
    o.rules.failure_ratio = 1.0;
    o.rules.minimum_throughput = 4;
    o.rules.slow_call_duration = RESIL_MS(100);
    o.rules.slow_call_ratio = 0.5;
    fleet_up(&f, 2, &o);

    resil_breaker_permit p[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(resil_breaker_acquire(f.b[i % 2], &p[i]), 0);
    resil_fake_clock_advance(f.fc, RESIL_MS(150));
    for (int i = 0; i < 4; i++)
        assert_int_equal(resil_breaker_record(f.b[i % 2], &p[i], RESIL_BREAKER_SUCCESS), 0);
    sync_all(&f);

    resil_redis_breaker_status s = fleet_status(f.b[0]);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_SLOW_CALLS);
    fleet_down(&f);
}

/* ---- half-open across instances ----------------------------------------------- */

static void trip_everyone(fleet *f)
{
    fleet_calls(f->b[0], (int)1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(f->r[0]), 0);
    sync_all(f);
    for (int i = 0; i < f->n; i++)
        assert_int_equal(resil_breaker_state_of(f->b[i]), RESIL_BREAKER_OPEN);
}

static void the_first_instance_past_the_break_moves_it_to_half_open(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("half-open", 1, f.fc);
    fleet_up(&f, 2, &o);
    trip_everyone(&f);

    resil_fake_clock_advance(f.fc, RESIL_MS(4999));
    assert_duration_equal(rejected_after(f.b[1]), RESIL_MS(1));
    resil_fake_clock_advance(f.fc, RESIL_MS(1));

    resil_breaker_permit probe;
    assert_int_equal(resil_breaker_acquire(f.b[1], &probe), 0);
    assert_true(probe.probe);
    assert_int_equal(probe.state, RESIL_BREAKER_HALF_OPEN);
    resil_redis_breaker_status s = fleet_status(f.b[0]);
    assert_int_equal(s.state, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_BREAK_ELAPSED);
    assert_int_equal(s.probes_in_flight, 1);

    /* The fleet's one probe slot is taken: A is refused until it times out. */
    assert_duration_equal(rejected_after(f.b[0]), RESIL_S(5));
    assert_int_equal(resil_breaker_state_of(f.b[0]), RESIL_BREAKER_HALF_OPEN);
    fleet_down(&f);
}

static void probes_from_different_instances_close_it_together(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("probes", 1, f.fc);
    o.rules.half_open_probes = 2;
    o.rules.success_threshold = 2;
    fleet_up(&f, 3, &o);
    trip_everyone(&f);
    resil_fake_clock_advance(f.fc, RESIL_S(5));

    resil_breaker_permit pa, pb;
    assert_int_equal(resil_breaker_acquire(f.b[0], &pa), 0);
    assert_int_equal(resil_breaker_acquire(f.b[1], &pb), 0);
    assert_true(pa.probe && pb.probe);
    assert_int_equal(fleet_status(f.b[2]).probes_in_flight, 2);
    assert_duration_equal(rejected_after(f.b[2]), RESIL_S(5));

    assert_int_equal(resil_breaker_record(f.b[0], &pa, RESIL_BREAKER_SUCCESS), 0);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    resil_redis_breaker_status s = fleet_status(f.b[0]);
    assert_int_equal(s.state, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(s.probe_successes, 1);

    assert_int_equal(resil_breaker_record(f.b[1], &pb, RESIL_BREAKER_SUCCESS), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    s = fleet_status(f.b[1]);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_PROBES_SUCCEEDED);

    sync_all(&f);
    for (int i = 0; i < 3; i++) {
        resil_breaker_permit p;
        assert_int_equal(resil_breaker_acquire(f.b[i], &p), 0);
        assert_false(p.probe);
        assert_int_equal(p.state, RESIL_BREAKER_CLOSED);
    }
    fleet_down(&f);
}

static void a_failed_probe_reopens_with_the_break_grown(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("regrow", 1, f.fc);
    o.rules.break_growth = 2.0;
    o.rules.max_break_duration = RESIL_S(60);
    fleet_up(&f, 2, &o);
    trip_everyone(&f);
    resil_fake_clock_advance(f.fc, RESIL_S(5));

    resil_breaker_permit probe;
    assert_int_equal(resil_breaker_acquire(f.b[0], &probe), 0);
    assert_int_equal(resil_breaker_record(f.b[0], &probe, RESIL_BREAKER_FAILURE), 0);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);

    resil_redis_breaker_status s = fleet_status(f.b[1]);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_PROBE_FAILED);
    assert_int_equal(s.opens, 2);
    assert_duration_equal(s.current_break, RESIL_S(10));
    assert_duration_equal(rejected_after(f.b[1]), RESIL_S(10));
    fleet_down(&f);
}

static void a_probe_that_never_reports_is_replaced_after_the_probe_timeout(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("hung-probe", 1, f.fc);
    o.rules.probe_timeout = RESIL_S(1);
    fleet_up(&f, 2, &o);
    trip_everyone(&f);
    resil_fake_clock_advance(f.fc, RESIL_S(5));

    resil_breaker_permit hung, fresh;
    assert_int_equal(resil_breaker_acquire(f.b[0], &hung), 0);
    assert_duration_equal(rejected_after(f.b[1]), RESIL_S(1));
    resil_fake_clock_advance(f.fc, RESIL_S(1));
    assert_int_equal(resil_breaker_acquire(f.b[1], &fresh), 0);
    assert_true(fresh.probe);

    assert_int_equal(resil_breaker_record(f.b[1], &fresh, RESIL_BREAKER_SUCCESS), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    assert_int_equal(fleet_status(f.b[1]).state, RESIL_BREAKER_CLOSED);

    /* The hung probe's failure arrives after the fleet closed, which its
     * instance has learnt: discarded there, and by the script. */
    fleet_wait_until(resil_breaker_state_of(f.b[0]) == RESIL_BREAKER_CLOSED);
    assert_int_equal(resil_breaker_record(f.b[0], &hung, RESIL_BREAKER_FAILURE), RESIL_ESTATE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(fleet_status(f.b[0]).state, RESIL_BREAKER_CLOSED);
    fleet_down(&f);
}

/* ---- manual control, stale results, events -------------------------------------- */

static void isolate_close_and_reset_by_hand_from_any_instance(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("by-hand", 1, f.fc);
    fleet_up(&f, 2, &o);

    assert_int_equal(resil_breaker_isolate(f.b[0]), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    assert_int_equal(resil_breaker_state_of(f.b[1]), RESIL_BREAKER_ISOLATED);
    assert_duration_equal(rejected_after(f.b[1]), RESIL_DURATION_MAX);

    assert_int_equal(resil_breaker_close(f.b[1]), 0);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(resil_breaker_state_of(f.b[0]), RESIL_BREAKER_CLOSED);
    assert_int_equal(fleet_status(f.b[0]).reason, RESIL_BREAKER_BY_CLOSE);

    trip_everyone(&f);
    assert_int_equal(fleet_status(f.b[0]).opens, 1);
    assert_int_equal(resil_breaker_reset(f.b[1]), 0);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    resil_redis_breaker_status s = fleet_status(f.b[0]);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_RESET);
    assert_int_equal(s.opens, 0);
    assert_int_equal(resil_breaker_state_of(f.b[0]), RESIL_BREAKER_CLOSED);
    fleet_down(&f);
}

static void a_result_admitted_before_a_shared_change_is_discarded(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("stale", 1, f.fc);
    fleet_up(&f, 2, &o);

    resil_breaker_permit before;
    assert_int_equal(resil_breaker_acquire(f.b[0], &before), 0);
    assert_int_equal(resil_breaker_isolate(f.b[1]), 0);
    assert_int_equal(resil_breaker_close(f.b[1]), 0);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);

    assert_int_equal(resil_breaker_record(f.b[0], &before, RESIL_BREAKER_FAILURE),
                     RESIL_ESTATE);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(fleet_status(f.b[0]).state, RESIL_BREAKER_CLOSED);
    fleet_down(&f);
}

static void state_changes_are_announced_with_from_to_and_why(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("events", 1, f.fc);
    fleet_up(&f, 2, &o);
    trip_everyone(&f);
    resil_fake_clock_advance(f.fc, RESIL_S(5));
    resil_breaker_permit probe;
    assert_int_equal(resil_breaker_acquire(f.b[0], &probe), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);
    assert_int_equal(resil_breaker_record(f.b[0], &probe, RESIL_BREAKER_SUCCESS), 0);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(resil_redis_sync(f.r[1]), 0);

    fleet_events *e = &f.events; /* instance 1's listener */
    fleet_wait_until(fleet_saw(e, "events", RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_CLOSED,
                               RESIL_BREAKER_BY_PROBES_SUCCEEDED));
    assert_true(fleet_saw(e, "events", RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
                          RESIL_BREAKER_BY_CONSECUTIVE));
    assert_true(fleet_saw(e, "events", RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN,
                          RESIL_BREAKER_BY_BREAK_ELAPSED));
    fleet_down(&f);
}

static void successes_stay_local_until_a_round_sends_them_as_one_command(void **state)
{
    (void)state;
    fleet f = {.fc = fleet_clock()};
    resil_redis_breaker_opts o = fleet_consecutive("idle", 3, f.fc);
    fleet_up(&f, 1, &o);
    long long before = redis_server_calls(fleet_server, "evalsha");
    for (int i = 0; i < 1000; i++)
        fleet_calls(f.b[0], 1, RESIL_BREAKER_SUCCESS);
    assert_int_equal(redis_server_calls(fleet_server, "evalsha"), before);
    assert_int_equal(resil_redis_sync(f.r[0]), 0);
    assert_int_equal(redis_server_calls(fleet_server, "evalsha"), before + 1);
    fleet_down(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_trip_makes_b_reject_without_calling_the_dependency),
        T(b_learns_of_a_trip_by_publish_without_asking),
        T(a_local_threshold_flushes_without_waiting_for_the_interval),
        T(fleet_counting_trips_on_failures_spread_over_four_instances),
        T(local_counting_does_not_trip_on_failures_spread_over_four_instances),
        T(local_counting_trip_on_one_instance_opens_it_for_all),
        T(a_success_on_another_instance_ends_the_fleet_run),
        T(the_ratio_rule_weighs_the_whole_fleets_window),
        T(fleet_window_counts_age_out_after_the_sampling_duration),
        T(slow_calls_count_toward_the_fleets_slow_rule),
        T(the_first_instance_past_the_break_moves_it_to_half_open),
        T(probes_from_different_instances_close_it_together),
        T(a_failed_probe_reopens_with_the_break_grown),
        T(a_probe_that_never_reports_is_replaced_after_the_probe_timeout),
        T(isolate_close_and_reset_by_hand_from_any_instance),
        T(a_result_admitted_before_a_shared_change_is_discarded),
        T(state_changes_are_announced_with_from_to_and_why),
        T(successes_stay_local_until_a_round_sends_them_as_one_command),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
