/*
 * test_fleet_outage.c — Redis failing under a running fleet: killed, paused
 * (accepting but never answering), restarted empty, its scripts flushed.
 *
 * What is asserted is what the design promises: the local breaker and
 * budget take over and an event says so, no caller waits longer than the
 * command timeout (measured generously, ten times over, since a loaded CI
 * machine may stretch any wait), the client reconnects on its own and
 * re-syncs before announcing it, and a restart that lost the keys starts
 * closed. Waiting for the reconnect is by condition, never by duration.
 */
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fleet_test.h"

/* Long enough that a loaded machine is not taken for an outage: counts of
 * downs and reconnects are exact. A killed Redis is noticed at once (the
 * connection is refused or closed); only a paused one is noticed by this
 * timeout, which its test waits for once. */
#define TIMEOUT FLEET_TIMEOUT
#define GENEROUS (10 * TIMEOUT)

/* A client that reconnects quickly (from 10 ms, at most 100 ms apart) and
 * runs rounds only when asked or woken. */
static resil_redis_opts outage_opts(fleet_events *events)
{
    resil_redis_opts o = fleet_opts(events);
    o.timeout = TIMEOUT;
    o.reconnect.base = RESIL_MS(10);
    o.reconnect.max_delay = RESIL_MS(100);
    return o;
}

/* One that also notices by itself: a round every 10 ms. */
static resil_redis *watchful_client(fleet_events *events)
{
    resil_redis_opts o = outage_opts(events);
    o.sync_interval = RESIL_MS(10);
    o.refresh_interval = RESIL_MS(10);
    return fleet_client_with(&o);
}

static int64_t mono_ns(void) { return resil_clock_now(resil_clock_system()); }

/* The longest any single call took, across a test. */
typedef struct stopwatch {
    resil_duration longest;
} stopwatch;

static int timed_acquire(stopwatch *sw, resil_breaker *b, resil_breaker_permit *p)
{
    int64_t t0 = mono_ns();
    int rc = resil_breaker_acquire(b, p);
    resil_duration took = mono_ns() - t0;
    if (took > sw->longest)
        sw->longest = took;
    return rc;
}

static void timed_calls(stopwatch *sw, resil_breaker *b, int n, resil_breaker_result r)
{
    for (int i = 0; i < n; i++) {
        resil_breaker_permit p;
        if (timed_acquire(sw, b, &p) != 0)
            continue;
        int64_t t0 = mono_ns();
        resil_breaker_record(b, &p, r);
        resil_duration took = mono_ns() - t0;
        if (took > sw->longest)
            sw->longest = took;
    }
}

static void killed_redis_hands_over_to_the_local_breaker_and_resyncs_on_return(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = watchful_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("outage", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    stopwatch sw = {0};

    timed_calls(&sw, b, 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);

    redis_server_kill(fleet_server);
    fleet_wait_until(fleet_downs(&ev) == 1);
    assert_false(resil_redis_connected(r));
    assert_int_equal(resil_redis_sync(r), RESIL_EBACKEND);

    /* The break the fleet announced still holds... */
    resil_breaker_permit p;
    assert_int_equal(timed_acquire(&sw, b, &p), RESIL_EREJECTED);
    assert_duration_equal(p.retry_after, RESIL_S(5));
    /* ...then the local breaker decides, and protects on its own. */
    resil_fake_clock_advance(fc, RESIL_S(5));
    assert_int_equal(timed_acquire(&sw, b, &p), 0);
    assert_true(resil_redis_permit_fallback(&p));
    assert_int_equal(resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE), 0);
    timed_calls(&sw, b, 2, RESIL_BREAKER_FAILURE);
    assert_int_equal(timed_acquire(&sw, b, &p), RESIL_EREJECTED);
    assert_true(resil_redis_permit_fallback(&p));
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    /* The restart lost the key: the shared breaker starts closed. */
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    assert_true(fleet_saw(&ev, "outage", RESIL_BREAKER_OPEN, RESIL_BREAKER_CLOSED,
                          RESIL_BREAKER_BY_RESET));
    assert_int_equal(timed_acquire(&sw, b, &p), 0);
    assert_false(resil_redis_permit_fallback(&p));
    assert_int_equal(fleet_status(b).opens, 0);

    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(st.reconnects, 1);
    assert_true(sw.longest < GENEROUS);

    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

/* A listener that holds the sync thread at the DOWN event until the test
 * opens it, so the test can act before the thread goes on to tear down. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int downs, ups;
} gate;

static void gate_at_down(const resil_redis_event *ev, void *ud)
{
    gate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->ups += ev->type == RESIL_REDIS_UP;
    g->downs += ev->type == RESIL_REDIS_DOWN;
    while (ev->type == RESIL_REDIS_DOWN && !g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static int gate_seen(gate *g, resil_redis_event_type type)
{
    pthread_mutex_lock(&g->mu);
    int n = type == RESIL_REDIS_DOWN ? g->downs : g->ups;
    pthread_mutex_unlock(&g->mu);
    return n;
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Listen on the killed server's port: a connection there is the client's
 * next reconnect attempt, which it makes only after tearing down. */
static int take_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

static void wait_for_a_reconnect_attempt(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, FLEET_PATIENCE_MS), 1);
    close(accept(fd, NULL, NULL)); /* not Redis: the client stays down */
}

static void the_fallback_keeps_what_it_counted_until_redis_returns(void **state)
{
    (void)state;
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    resil_redis_opts ro = outage_opts(NULL);
    ro.listener = gate_at_down;
    ro.listener_ud = &g;
    resil_redis *r = fleet_client_with(&ro);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts o = fleet_consecutive("kept", 2, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    resil_breaker *local = resil_redis_breaker_fallback(b);

    redis_server_kill(fleet_server);
    int port = take_port(redis_server_port(fleet_server));
    fleet_wait_until(gate_seen(&g, RESIL_REDIS_DOWN) == 1);
    /* Calls fall back the moment the client is down, before its thread
     * has torn the connections down. */
    resil_breaker_permit first, second;
    assert_int_equal(resil_breaker_acquire(b, &first), 0);
    assert_int_equal(resil_breaker_acquire(b, &second), 0);
    assert_true(resil_redis_permit_fallback(&first) && resil_redis_permit_fallback(&second));
    assert_int_equal(resil_breaker_record(b, &first, RESIL_BREAKER_FAILURE), 0);
    gate_open(&g);
    wait_for_a_reconnect_attempt(port);

    assert_int_equal(resil_breaker_record(b, &second, RESIL_BREAKER_FAILURE), 0);
    assert_int_equal(resil_breaker_state_of(local), RESIL_BREAKER_OPEN);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);

    /* Back: the next outage starts from a fresh fallback. */
    close(port);
    fleet_restart();
    fleet_wait_until(gate_seen(&g, RESIL_REDIS_UP) == 1);
    resil_breaker_stats st;
    resil_breaker_stats_get(local, &st);
    assert_int_equal(st.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(st.consecutive_failures, 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_paused_redis_holds_no_caller_past_the_timeout(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    /* No rounds of its own: the probe request is the one command the pause
     * meets, so the caller is the one that notices. */
    resil_redis_opts ro = outage_opts(&ev);
    resil_redis *r = fleet_client_with(&ro);
    resil_redis_breaker_opts o = fleet_consecutive("paused", 1, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    stopwatch sw = {0};
    timed_calls(&sw, b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_fake_clock_advance(fc, RESIL_S(5)); /* the next call asks Redis for a probe */

    redis_server_pause(fleet_server);
    resil_breaker_permit p;
    assert_int_equal(timed_acquire(&sw, b, &p), 0); /* the probe request times out... */
    assert_true(resil_redis_permit_fallback(&p)); /* ...and the local breaker admits */
    assert_int_equal(resil_breaker_record(b, &p, RESIL_BREAKER_SUCCESS), 0);
    fleet_wait_until(fleet_downs(&ev) == 1);
    for (int i = 0; i < 100; i++)
        timed_calls(&sw, b, 10, RESIL_BREAKER_SUCCESS);
    assert_true(sw.longest < GENEROUS);

    redis_server_resume(fleet_server);
    fleet_wait_until(fleet_ups(&ev) == 1);
    /* Nothing was lost this time. The probe request that timed out was
     * still queued in the paused server, which ran it on resuming: that
     * ghost holds the fleet's one probe slot until the probe timeout (the
     * break, 5 s), after which the next call becomes the probe. */
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(timed_acquire(&sw, b, &p), RESIL_EREJECTED);
    assert_duration_equal(p.retry_after, RESIL_S(5));
    resil_fake_clock_advance(fc, RESIL_S(5));
    assert_int_equal(timed_acquire(&sw, b, &p), 0);
    assert_true(p.probe);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void local_counting_pushes_a_trip_made_during_the_outage_on_return(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = watchful_client(&ev);
    resil_redis_breaker_opts o = fleet_consecutive("pushed", 3, fc);
    o.counting = RESIL_REDIS_COUNT_LOCAL;
    resil_breaker *b = fleet_breaker(r, &o);

    redis_server_kill(fleet_server);
    fleet_wait_until(fleet_downs(&ev) == 1);
    fleet_calls(b, 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    resil_redis_breaker_status s = fleet_status(b);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_CONSECUTIVE);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void the_budget_decides_locally_while_redis_is_down(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_redis *r = watchful_client(&ev);
    resil_redis_budget_opts o;
    resil_redis_budget_opts_default(&o);
    o.name = "budget-outage";
    resil_budget *b = NULL;
    assert_int_equal(resil_redis_budget_new(r, &o, &b, NULL), 0);

    redis_server_kill(fleet_server);
    fleet_wait_until(fleet_downs(&ev) == 1);
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, NULL);
    resil_budget_ticket t = {0};
    for (int i = 0; i < 6; i++)
        resil_budget_on_result(b, &fail, 1, &t);
    assert_true(resil_budget_level(b) == 4.0); /* the local budget's tokens */
    assert_false(resil_budget_try_retry(b, &fail, &t));

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    assert_true(resil_budget_try_retry(b, &fail, &t)); /* a fresh, full fleet */
    resil_budget_free(b);
    resil_redis_free(r);
    fleet_events_destroy(&ev);
}

static void an_offline_start_comes_online_when_redis_appears(void **state)
{
    (void)state;
    redis_server_kill(fleet_server);
    fleet_events ev;
    fleet_events_init(&ev);
    resil_redis_opts o; /* the defaults' rounds, every 100 ms */
    resil_redis_opts_default(&o);
    o.url = redis_server_url(fleet_server);
    o.timeout = TIMEOUT;
    o.allow_offline_start = true;
    o.reconnect.base = RESIL_MS(10);
    o.reconnect.max_delay = RESIL_MS(100);
    o.listener = fleet_record_event;
    o.listener_ud = &ev;
    resil_redis *r = NULL;
    assert_int_equal(resil_redis_new(&o, &r, NULL), 0);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts bo = fleet_consecutive("late", 2, fc);
    resil_breaker *b = fleet_breaker(r, &bo);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_true(resil_redis_permit_fallback(&p));

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    assert_true(resil_redis_connected(r));
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_false(resil_redis_permit_fallback(&p));
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void after_an_offline_start_rounds_run_the_loaded_script_by_its_sha(void **state)
{
    (void)state;
    redis_server_kill(fleet_server);
    fleet_events ev;
    fleet_events_init(&ev);
    resil_redis_opts o = outage_opts(&ev);
    o.allow_offline_start = true;
    resil_redis *r = fleet_client_with(&o);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts bo = fleet_consecutive("late-sha", 3, fc);
    resil_breaker *b = fleet_breaker(r, &bo);

    fleet_restart();
    fleet_wait_until(fleet_ups(&ev) == 1);
    for (int i = 0; i < 3; i++) {
        fleet_calls(b, 1, RESIL_BREAKER_SUCCESS);
        assert_int_equal(resil_redis_sync(r), 0);
    }
    resil_fake_clock_advance(fc, RESIL_S(1));
    fleet_calls(b, 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_fake_clock_advance(fc, RESIL_S(5));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0); /* a probe, on the callers' connection */
    assert_true(p.probe);

    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.noscript, 0);
    assert_int_equal(redis_server_calls(fleet_server, "eval"), 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void a_redis_that_refuses_every_write_hands_over_to_the_local_breaker(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_opts ro = outage_opts(&ev);
    resil_redis *r = fleet_client_with(&ro);
    resil_redis_breaker_opts o = fleet_consecutive("read-only", 2, fc);
    resil_breaker *b = fleet_breaker(r, &o);

    /* As after a failover that left the address on a replica: the server
     * answers, but every script call is refused with READONLY. */
    fleet_replica_of("127.0.0.1", "1");
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), RESIL_EBACKEND);
    fleet_wait_until(fleet_downs(&ev) == 1);
    assert_false(resil_redis_connected(r));
    resil_breaker_permit p;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(resil_breaker_acquire(b, &p), 0);
        assert_true(resil_redis_permit_fallback(&p));
        assert_int_equal(resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE), 0);
    }
    assert_int_equal(resil_breaker_acquire(b, &p), RESIL_EREJECTED);
    assert_true(resil_redis_permit_fallback(&p));

    fleet_replica_of("NO", "ONE");
    fleet_wait_until(fleet_ups(&ev) == 1);
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_false(resil_redis_permit_fallback(&p));
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&ev);
}

static void noscript_after_script_flush_is_answered_by_eval(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("noscript", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    fleet_calls(b, 2, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);

    const char *flush[] = {"SCRIPT", "FLUSH"};
    freeReplyObject(redis_server_command(fleet_server, 2, flush));
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);

    /* The round's EVALSHA met NOSCRIPT, EVAL stood in, no count was lost. */
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.noscript, 1);
    assert_int_equal(st.command_errors, 0);
    resil_redis_breaker_status s = fleet_status(b);
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_CONSECUTIVE);

    /* The script was loaded again: the next rounds use EVALSHA. */
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.noscript, 1);

    /* The callers' connection falls back the same way (a probe request). */
    freeReplyObject(redis_server_command(fleet_server, 2, flush));
    resil_fake_clock_advance(fc, RESIL_S(5));
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_true(p.probe);
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.noscript, 2);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(killed_redis_hands_over_to_the_local_breaker_and_resyncs_on_return),
        T(the_fallback_keeps_what_it_counted_until_redis_returns),
        T(a_paused_redis_holds_no_caller_past_the_timeout),
        T(local_counting_pushes_a_trip_made_during_the_outage_on_return),
        T(the_budget_decides_locally_while_redis_is_down),
        T(an_offline_start_comes_online_when_redis_appears),
        T(after_an_offline_start_rounds_run_the_loaded_script_by_its_sha),
        T(a_redis_that_refuses_every_write_hands_over_to_the_local_breaker),
        T(noscript_after_script_flush_is_answered_by_eval),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
