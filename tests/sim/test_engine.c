/*
 * test_engine.c — the simulator's event engine: events run in (time,
 * scheduling order), the replace-the-root shortcut keeps that order, the
 * horizon stops a run, the virtual clock reads simulated time, and what
 * cannot be encoded is refused rather than wrapped.
 */
#include "test.h"

#include "engine.h"

#define MAX_SEEN 4096

typedef struct recorder {
    resil_instant at[MAX_SEEN];
    uint32_t id[MAX_SEEN];
    size_t n;
    int follow_ups; /* events each handled event schedules */
    resil_duration gap;
} recorder;

static void record(void *model, resil__sim_engine *e, const resil__sim_event *ev)
{
    recorder *r = model;
    if (r->n < MAX_SEEN) {
        r->at[r->n] = ev->at;
        r->id[r->n] = resil__sim_event_id(ev);
        r->n++;
    }
    /* Only first-generation events (ids below 1000) have children. */
    if (resil__sim_event_id(ev) >= 1000)
        return;
    for (int i = 0; i < r->follow_ups; i++)
        resil__sim_schedule(e, resil__sim_now(e) + r->gap * (i + 1), 0,
                            resil__sim_event_id(ev) + 1000);
}

static void events_run_in_time_order(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    recorder r = {.n = 0};
    resil_instant times[] = {50, 10, 40, 20, 30};
    for (uint32_t i = 0; i < 5; i++)
        resil__sim_schedule(&e, times[i], 0, i);
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(r.n, 5);
    uint32_t expected_ids[] = {1, 3, 4, 2, 0};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(r.at[i], (i + 1) * 10);
        assert_int_equal(r.id[i], expected_ids[i]);
    }
    resil__sim_engine_free(&e);
}

static void simultaneous_events_run_in_scheduling_order(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    recorder r = {.n = 0};
    for (uint32_t i = 0; i < 100; i++)
        resil__sim_schedule(&e, 7, 0, i);
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(r.n, 100);
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(r.id[i], i);
    resil__sim_engine_free(&e);
}

/* A handler that schedules one follow-up takes the root's place; with two
 * follow-ups the second is a plain push. Either way the global order holds:
 * compare against a sorted reference of every event ever scheduled. */
static void follow_ups_keep_the_heap_ordered(void **state)
{
    (void)state;
    for (int follow_ups = 1; follow_ups <= 2; follow_ups++) {
        resil__sim_engine e;
        assert_int_equal(resil__sim_engine_init(&e, 16), 0);
        recorder r = {.n = 0, .follow_ups = follow_ups, .gap = 13};
        resil_rng_seeded rng;
        resil_rng_seeded_init(&rng, 42);
        for (uint32_t i = 0; i < 200; i++)
            resil__sim_schedule(&e, (resil_instant)(resil_rng_seeded_next_u64(&rng) % 1000), 0, i);
        assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
        assert_int_equal(r.n, 200 + 200 * (size_t)follow_ups);
        for (size_t i = 1; i < r.n; i++)
            assert_true(r.at[i - 1] <= r.at[i]);
        resil__sim_engine_free(&e);
    }
}

static void the_heap_grows_past_its_initial_size(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 16), 0);
    recorder r = {.n = 0};
    for (uint32_t i = 0; i < 3000; i++)
        resil__sim_schedule(&e, 3000 - i, 0, i);
    assert_true(e.cap >= 3000);
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(r.n, 3000);
    assert_int_equal(r.at[0], 1);
    assert_int_equal(r.at[2999], 3000);
    resil__sim_engine_free(&e);
}

static void the_horizon_stops_the_run_and_keeps_later_events(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    recorder r = {.n = 0};
    resil__sim_schedule(&e, 10, 0, 1);
    resil__sim_schedule(&e, 20, 0, 2);
    resil__sim_schedule(&e, 30, 0, 3);
    assert_int_equal(resil__sim_run(&e, 20, record, &r), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal(resil__sim_now(&e), 20);
    assert_int_equal(e.len, 1);
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(r.n, 3);
    assert_int_equal(e.dispatched, 3);
    resil__sim_engine_free(&e);
}

static void an_event_in_the_past_runs_now(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    recorder r = {.n = 0};
    resil__sim_schedule(&e, 100, 0, 1);
    assert_int_equal(resil__sim_run(&e, 100, record, &r), 0);
    resil__sim_schedule(&e, 5, 0, 2);
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(r.at[1], 100);
    resil__sim_engine_free(&e);
}

static void the_virtual_clock_reads_simulated_time(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    resil_clock *c = resil__sim_clock_of(&e);
    assert_int_equal(resil_clock_now(c), 0);
    resil__sim_schedule(&e, RESIL_S(3), 0, 0);
    recorder r = {.n = 0};
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(resil_clock_now(c), RESIL_S(3));
    assert_int_equal(resil_clock_wall_now(c) - resil_clock_now(c), RESIL_S(1600000000));
    assert_int_equal(resil_clock_sleep(c, RESIL_MS(1), NULL), RESIL_EUNSUPPORTED);
    resil__sim_engine_free(&e);
}

static void ids_and_kinds_beyond_the_encoding_are_refused(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    resil__sim_schedule(&e, 1, 0, RESIL__SIM_MAX_ID);
    assert_int_equal(e.error, 0);
    resil__sim_schedule(&e, 1, 0, RESIL__SIM_MAX_ID + 1);
    assert_int_equal(e.error, RESIL_ERANGE);
    recorder r = {.n = 0};
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), RESIL_ERANGE);
    assert_int_equal(r.n, 0);
    resil__sim_engine_reset(&e);
    resil__sim_schedule(&e, 1, RESIL__SIM_MAX_KIND + 1, 0);
    assert_int_equal(e.error, RESIL_ERANGE);
    resil__sim_engine_free(&e);
}

/* An instant at RESIL_INSTANT_MAX is a sum of waits that saturated: the
 * events after it would all run at once, so the run ends saying so. */
static void an_event_at_the_largest_instant_ends_the_run(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    resil__sim_schedule(&e, RESIL_INSTANT_MAX - 1, 0, 0);
    assert_int_equal(e.error, 0);
    resil__sim_schedule(&e, RESIL_INSTANT_MAX, 0, 1);
    assert_int_equal(e.error, RESIL_ERANGE);
    assert_string_equal(e.cause, "virtual time ran past 292 years");
    recorder r = {.n = 0};
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), RESIL_ERANGE);
    assert_int_equal(r.n, 0);
    resil__sim_engine_free(&e);
}

static void reset_forgets_pending_events_and_time(void **state)
{
    (void)state;
    resil__sim_engine e;
    assert_int_equal(resil__sim_engine_init(&e, 4), 0);
    resil__sim_schedule(&e, 10, 0, 0);
    recorder r = {.n = 0};
    assert_int_equal(resil__sim_run(&e, 5, record, &r), 0);
    resil__sim_engine_reset(&e);
    assert_int_equal(e.len, 0);
    assert_int_equal(resil__sim_now(&e), 0);
    assert_int_equal(resil__sim_run(&e, RESIL_INSTANT_MAX, record, &r), 0);
    assert_int_equal(r.n, 0);
    resil__sim_engine_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(events_run_in_time_order),
        cmocka_unit_test(simultaneous_events_run_in_scheduling_order),
        cmocka_unit_test(follow_ups_keep_the_heap_ordered),
        cmocka_unit_test(the_heap_grows_past_its_initial_size),
        cmocka_unit_test(the_horizon_stops_the_run_and_keeps_later_events),
        cmocka_unit_test(an_event_in_the_past_runs_now),
        cmocka_unit_test(the_virtual_clock_reads_simulated_time),
        cmocka_unit_test(ids_and_kinds_beyond_the_encoding_are_refused),
        cmocka_unit_test(an_event_at_the_largest_instant_ends_the_run),
        cmocka_unit_test(reset_forgets_pending_events_and_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
