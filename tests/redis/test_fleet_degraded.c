/*
 * test_fleet_degraded.c — what a fleet breaker says and does around an
 * outage and at the edges of its shared state: an isolated or open breaker
 * keeps its word while Redis is down and its stats are the fallback's, a
 * denied probe waits without asking Redis again, a key gone from Redis
 * reads as a fresh breaker, a trip pushed into a failing round is pushed
 * again, a registry evicts only idle fleet breakers, and listeners that
 * fall behind lose events with a count of them.
 *
 * All on a real server, stopped, paused and restarted by the test; waits
 * are by condition with a generous deadline, never by duration.
 */
#include "fleet_test.h"

/* A client that reconnects quickly (from 10 ms, at most 100 ms apart) and
 * runs rounds only when asked or woken. */
static resil_redis *quick_client(fleet_events *events)
{
    resil_redis_opts o = fleet_opts(events);
    o.reconnect.base = RESIL_MS(10);
    o.reconnect.max_delay = RESIL_MS(100);
    return fleet_client_with(&o);
}

static void forget_key(const char *key)
{
    const char *argv[] = {"DEL", key};
    assert_int_equal(redis_server_integer(fleet_server, 2, argv), 1);
}

static resil_breaker_stats stats_of(resil_breaker *b)
{
    resil_breaker_stats st;
    assert_int_equal(resil_breaker_stats_get(b, &st), 0);
    return st;
}

/* ---- while Redis is down ------------------------------------------------------ */

static void an_isolated_fleet_breaker_stays_isolated_while_redis_is_down(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = quick_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("isolated-down", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    assert_int_equal(resil_breaker_isolate(b), 0);

    redis_server_kill(fleet_server);
    fleet_wait_until(fleet_downs(&ev) == 1);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_ISOLATED);
    assert_int_equal(stats_of(b).state, RESIL_BREAKER_ISOLATED);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), RESIL_EREJECTED);
    assert_false(resil_redis_permit_fallback(&p));
    assert_int_equal(p.state, RESIL_BREAKER_ISOLATED);
    assert_duration_equal(p.retry_after, RESIL_DURATION_MAX);
    /* The fallback was never asked: it is as fresh as it was made. */
    assert_int_equal(stats_of(resil_redis_breaker_fallback(b)).window_total, 0);
    resil_redis_breaker_status st;
    assert_int_equal(resil_redis_breaker_status_get(b, &st), RESIL_EBACKEND);
    assert_int_equal(resil_breaker_close(b), RESIL_EBACKEND); /* nobody to tell */

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    /* The restart lost the key, and the isolation with it. */
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void an_open_fleet_breaker_reports_open_until_its_break_ends_while_redis_is_down(
    void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = quick_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("open-down", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    fleet_calls(b, 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);

    redis_server_kill(fleet_server);
    fleet_wait_until(fleet_downs(&ev) == 1);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);
    assert_int_equal(stats_of(b).state, RESIL_BREAKER_OPEN);
    resil_fake_clock_advance(fc, RESIL_S(5) - 1);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);
    /* The break the fleet announced is over: the fresh fallback decides. */
    resil_fake_clock_advance(fc, 1);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    assert_int_equal(stats_of(b).state, RESIL_BREAKER_CLOSED);

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void stats_while_redis_is_down_are_the_fallbacks(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = quick_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("stats-down", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    /* The run the fleet held before the outage is not the fallback's. */
    fleet_calls(b, 2, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(stats_of(b).consecutive_failures, 2);

    redis_server_kill(fleet_server);
    fleet_wait_until(fleet_downs(&ev) == 1);
    fleet_calls(b, 1, RESIL_BREAKER_SUCCESS);
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    resil_breaker_stats st = stats_of(b);
    assert_int_equal(st.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(st.consecutive_failures, 1);
    assert_int_equal(st.opens, 0);
    assert_int_equal(st.transitions, 0);
    resil_breaker_stats local = stats_of(resil_redis_breaker_fallback(b));
    assert_int_equal(st.window_total, local.window_total);
    assert_int_equal(st.window_failures, local.window_failures);
    assert_int_equal(st.generation, local.generation);

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

/* ---- the shared state's edges ------------------------------------------------------ */

static void an_isolated_fleet_breaker_reports_no_next_probe(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("isolated-stats", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    assert_int_equal(resil_breaker_isolate(b), 0);
    resil_breaker_stats st = stats_of(b);
    assert_int_equal(st.state, RESIL_BREAKER_ISOLATED);
    assert_true(st.next_probe_at == RESIL_INSTANT_MAX);
    assert_int_equal(st.transitions, 1);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_denied_probe_waits_out_the_fleets_probe_without_asking_redis_again(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *ra = fleet_client(NULL), *rb = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("probe-wait", 1, fc);
    resil_breaker *a = fleet_breaker(ra, &o), *b = fleet_breaker(rb, &o);
    fleet_calls(a, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(ra), 0);
    fleet_wait_until(resil_breaker_state_of(b) == RESIL_BREAKER_OPEN);
    resil_fake_clock_advance(fc, RESIL_S(5));

    resil_breaker_permit probe, p;
    assert_int_equal(resil_breaker_acquire(a, &probe), 0);
    assert_true(probe.probe);
    /* The one slot is taken until the probe timeout (the break, 5 s). */
    assert_int_equal(resil_breaker_acquire(b, &p), RESIL_EREJECTED);
    assert_int_equal(p.state, RESIL_BREAKER_HALF_OPEN);
    assert_duration_equal(p.retry_after, RESIL_S(5));
    long long asked = redis_server_calls(fleet_server, "evalsha");

    resil_fake_clock_advance(fc, RESIL_S(1));
    assert_int_equal(resil_breaker_acquire(b, &p), RESIL_EREJECTED);
    assert_int_equal(p.state, RESIL_BREAKER_HALF_OPEN);
    assert_duration_equal(p.retry_after, RESIL_S(4));
    assert_int_equal(redis_server_calls(fleet_server, "evalsha"), asked);

    assert_int_equal(resil_breaker_record(a, &probe, RESIL_BREAKER_SUCCESS), 0);
    resil_breaker_free(a);
    resil_breaker_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
    resil_fake_clock_free(fc);
}

static void a_probe_asked_of_a_key_gone_from_redis_admits_the_call_as_closed(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("expired", 1, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);

    /* Its TTL ran out (or an operator deleted it) while the break ran. */
    forget_key("resil:breaker:expired");
    resil_fake_clock_advance(fc, RESIL_S(5));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_false(p.probe);
    assert_false(resil_redis_permit_fallback(&p));
    assert_int_equal(p.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    fleet_wait_until(fleet_saw(&ev, "expired", RESIL_BREAKER_OPEN, RESIL_BREAKER_CLOSED,
                               RESIL_BREAKER_BY_RESET));
    assert_int_equal(resil_breaker_record(b, &p, RESIL_BREAKER_SUCCESS), 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void the_status_of_a_breaker_whose_key_is_gone_reads_as_never_used(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("gone", 1, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(fleet_status(b).opens, 1);

    forget_key("resil:breaker:gone");
    resil_redis_breaker_status s = fleet_status(b);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.epoch, 0);
    assert_int_equal(s.opens, 0);
    assert_int_equal(s.reason, 0);
    assert_int_equal(s.open_until_ms, 0);
    assert_duration_equal(s.current_break, 0);
    assert_duration_equal(s.ttl, 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_break_edited_beyond_what_nanoseconds_hold_reads_as_the_longest(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("long-break", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    /* 10^13 ms, three centuries: a count the script passes on, whose
     * nanoseconds do not fit in 64 bits. */
    const char *edit[] = {"HSET", "resil:breaker:long-break", "brk", "10000000000000"};
    assert_int_equal(redis_server_integer(fleet_server, 4, edit), 0);
    assert_duration_equal(fleet_status(b).current_break, RESIL_DURATION_MAX);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_local_trip_whose_push_met_a_refusing_redis_is_pushed_again_on_return(
    void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = quick_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("trip-again", 2, fc);
    o.counting = RESIL_REDIS_COUNT_LOCAL;
    resil_breaker *b = fleet_breaker(r, &o);

    /* Read-only: the round that pushes the trip is refused (READONLY). */
    fleet_replica_of("127.0.0.1", "1");
    fleet_calls(b, 2, RESIL_BREAKER_FAILURE);
    fleet_wait_until(fleet_downs(&ev) == 1);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN); /* the local trip */

    fleet_replica_of("NO", "ONE");
    fleet_wait_until(fleet_ups(&ev) == 1);
    resil_redis_breaker_status s = fleet_status(b);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_int_equal(s.opens, 1);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

/* ---- a registry of fleet breakers ------------------------------------------------------- */

static void a_full_registry_evicts_the_idle_fleet_breaker_not_the_one_with_failures(
    void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_factory f = {.client = r};
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    o.max_breakers = 2;
    o.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    o.breaker.failure_threshold = 2;
    o.breaker.clock = resil_fake_clock_clock(fc);
    o.factory = resil_redis_breaker_factory;
    o.factory_ud = &f;
    resil_registry *reg = NULL;
    assert_int_equal(resil_registry_new(&o, &reg, NULL), 0);

    /* The least recently used is one failure from tripping: not idle. */
    resil_breaker *b = NULL;
    assert_int_equal(resil_registry_get(reg, "failing", NULL, &b, NULL), 0);
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(stats_of(b).consecutive_failures, 1);
    resil_breaker_free(b);
    assert_int_equal(resil_registry_get(reg, "quiet", NULL, &b, NULL), 0);
    fleet_calls(b, 1, RESIL_BREAKER_SUCCESS);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_breaker_free(b);

    assert_int_equal(resil_registry_get(reg, "third", NULL, &b, NULL), 0);
    resil_breaker_free(b);
    assert_int_equal(resil_registry_count(reg), 2);
    assert_int_equal(resil_registry_try_get(reg, "failing", &b), 0);
    assert_int_equal(stats_of(b).consecutive_failures, 1);
    resil_breaker_free(b);
    assert_int_equal(resil_registry_try_get(reg, "quiet", &b), RESIL_ENOTFOUND);
    assert_null(b);
    resil_registry_free(reg);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

/* ---- listeners that fall behind ----------------------------------------------------------- */

/* A listener that holds whoever delivers its first event until opened. */
typedef struct hold {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int calls;
} hold;

static void hold_enter(hold *h)
{
    pthread_mutex_lock(&h->mu);
    h->calls++;
    pthread_cond_broadcast(&h->cv);
    while (!h->open)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static int hold_calls(hold *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->calls;
    pthread_mutex_unlock(&h->mu);
    return n;
}

static void hold_release(hold *h)
{
    pthread_mutex_lock(&h->mu);
    h->open = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void hold_breaker_event(resil_breaker *b, const resil_breaker_event *ev, void *ud)
{
    (void)b, (void)ev;
    hold_enter(ud);
}

static void hold_state_event(const resil_redis_event *ev, void *ud)
{
    if (ev->type == RESIL_REDIS_STATE)
        hold_enter(ud);
}

/* n manual transitions, alternating close and isolate from isolated. */
static void toggle(resil_breaker *b, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(i % 2 == 0 ? resil_breaker_close(b) : resil_breaker_isolate(b), 0);
}

static void *isolate_in_thread(void *b)
{
    resil_breaker_isolate(b);
    return NULL;
}

static void a_breaker_listener_that_falls_16_changes_behind_loses_the_rest_counted(
    void **state)
{
    (void)state;
    hold h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("slow-listener", 3, fc);
    o.rules.listener = hold_breaker_event;
    o.rules.listener_ud = &h;
    resil_breaker *b = fleet_breaker(r, &o);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, isolate_in_thread, b), 0);
    fleet_wait_until(hold_calls(&h) == 1);
    toggle(b, 17); /* 16 wait for the busy listener; one finds no room */
    assert_int_equal(stats_of(b).events_dropped, 1);
    assert_int_equal(stats_of(b).transitions, 18);

    hold_release(&h);
    assert_int_equal(pthread_join(t, NULL), 0);
    fleet_wait_until(hold_calls(&h) == 17);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_client_listener_that_falls_64_events_behind_loses_the_rest_counted(
    void **state)
{
    (void)state;
    hold h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    resil_redis_opts ro = fleet_opts(NULL);
    ro.listener = hold_state_event;
    ro.listener_ud = &h;
    resil_redis *r = fleet_client_with(&ro);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts o = fleet_consecutive("slow-client-listener", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);

    /* The sync thread delivers the first change and is held there. */
    assert_int_equal(resil_breaker_isolate(b), 0);
    fleet_wait_until(hold_calls(&h) == 1);
    toggle(b, 65); /* 64 queue up; one finds no room */
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.events_dropped, 1);

    hold_release(&h);
    fleet_wait_until(hold_calls(&h) == 65);
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.events_dropped, 1);
    assert_true(st.connected);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(an_isolated_fleet_breaker_stays_isolated_while_redis_is_down),
        T(an_open_fleet_breaker_reports_open_until_its_break_ends_while_redis_is_down),
        T(stats_while_redis_is_down_are_the_fallbacks),
        T(an_isolated_fleet_breaker_reports_no_next_probe),
        T(a_denied_probe_waits_out_the_fleets_probe_without_asking_redis_again),
        T(a_probe_asked_of_a_key_gone_from_redis_admits_the_call_as_closed),
        T(the_status_of_a_breaker_whose_key_is_gone_reads_as_never_used),
        T(a_break_edited_beyond_what_nanoseconds_hold_reads_as_the_longest),
        T(a_local_trip_whose_push_met_a_refusing_redis_is_pushed_again_on_return),
        T(a_full_registry_evicts_the_idle_fleet_breaker_not_the_one_with_failures),
        T(a_breaker_listener_that_falls_16_changes_behind_loses_the_rest_counted),
        T(a_client_listener_that_falls_64_events_behind_loses_the_rest_counted),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
