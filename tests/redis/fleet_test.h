/*
 * fleet_test.h — what the Redis adapter's tests share: one real server per
 * test program, instances built on a fake clock that several of them share
 * (so breaks and windows move only when a test says so), an event recorder,
 * and waiting for things Redis delivers on its own time (a PUBLISH, a
 * reconnect) by condition with a generous deadline — never by asserting how
 * long something took.
 *
 * A header of static functions because each test program is its own
 * executable; the server helper is the only compiled support.
 */
#ifndef RESIL_FLEET_TEST_H
#define RESIL_FLEET_TEST_H

#include <pthread.h>
#include <time.h>

#include "redis_server.h"
#include "resil/redis.h"
#include "test.h"

/* Wall time the fake clocks start at: 2023-11-14, in ns. */
#define FLEET_WALL_START (INT64_C(1700000000000) * INT64_C(1000000))
/* How long a test waits for something Redis delivers by itself. */
#define FLEET_PATIENCE_MS 10000

static redis_server *fleet_server;

static inline int fleet_group_setup(void **state)
{
    (void)state;
    fleet_server = redis_server_start();
    return fleet_server != NULL ? 0 : -1;
}

static inline int fleet_group_teardown(void **state)
{
    (void)state;
    redis_server_stop(fleet_server);
    fleet_server = NULL;
    return 0;
}

/* Every test starts from an empty server. */
static inline int fleet_flush(void **state)
{
    (void)state;
    const char *argv[] = {"FLUSHALL"};
    redisReply *r = redis_server_command(fleet_server, 1, argv);
    if (r == NULL)
        return -1;
    freeReplyObject(r);
    return 0;
}

/* The killed test server back, on its port and with its data dir. */
static inline void fleet_restart(void)
{
    assert_int_equal(redis_server_restart(fleet_server), 0);
}

/* REPLICAOF on the test server ("NO", "ONE": a primary again). */
static inline void fleet_replica_of(const char *host, const char *port)
{
    const char *argv[] = {"REPLICAOF", host, port};
    redisReply *rep = redis_server_command(fleet_server, 3, argv);
    assert_true(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

/* What a fake server answers a client's setup with, as Redis would: the
 * script's SHA, the subscription to the fleet's channel confirmed. */
#define FLEET_FAKE_SHA "0123456789abcdef0123456789abcdef01234567"
#define FLEET_FAKE_SUBSCRIBED "*3\r\n$9\r\nsubscribe\r\n$12\r\nresil:events\r\n:1\r\n"
/* A script answer as the script gives it: a closed breaker, 18 integers
 * in 102 bytes. */
#define FLEET_FAKE_CLOSED                                                                \
    "*18\r\n:0\r\n:0\r\n:1700000000000123\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"      \
    ":5000\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:86400000\r\n"

static inline void fleet_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline int64_t fleet_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Poll `cond` every millisecond until it holds or patience runs out. */
#define fleet_wait_until(cond)                                                   \
    do {                                                                         \
        int64_t fleet_deadline_ = fleet_mono_ms() + FLEET_PATIENCE_MS;           \
        while (!(cond) && fleet_mono_ms() < fleet_deadline_)                     \
            fleet_sleep_ms(1);                                                   \
        assert_true(cond);                                                       \
    } while (0)

/* ---- events ---------------------------------------------------------------- */

#define FLEET_EVENTS_MAX 256

typedef struct fleet_seen {
    resil_redis_event_type type;
    char name[64];
    resil_breaker_state from, to;
    resil_breaker_reason reason;
} fleet_seen;

typedef struct fleet_events {
    pthread_mutex_t mu;
    fleet_seen seen[FLEET_EVENTS_MAX];
    size_t len;
    size_t downs, ups;
    char first_down[200]; /* the first DOWN's detail */
} fleet_events;

static inline void fleet_events_init(fleet_events *e)
{
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
}

static inline void fleet_events_destroy(fleet_events *e) { pthread_mutex_destroy(&e->mu); }

static inline void fleet_record_event(const resil_redis_event *ev, void *ud)
{
    fleet_events *e = ud;
    pthread_mutex_lock(&e->mu);
    if (ev->type == RESIL_REDIS_DOWN && e->downs++ == 0)
        snprintf(e->first_down, sizeof e->first_down, "%s", ev->detail);
    if (ev->type == RESIL_REDIS_UP)
        e->ups++;
    if (e->len < FLEET_EVENTS_MAX) {
        fleet_seen *s = &e->seen[e->len++];
        s->type = ev->type;
        snprintf(s->name, sizeof s->name, "%s", ev->name);
        s->from = ev->from;
        s->to = ev->to;
        s->reason = ev->reason;
    }
    pthread_mutex_unlock(&e->mu);
}

static inline size_t fleet_downs(fleet_events *e)
{
    pthread_mutex_lock(&e->mu);
    size_t n = e->downs;
    pthread_mutex_unlock(&e->mu);
    return n;
}

static inline size_t fleet_ups(fleet_events *e)
{
    pthread_mutex_lock(&e->mu);
    size_t n = e->ups;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Is there a STATE event for `name` from -> to (any reason when reason 0)? */
static inline bool fleet_saw(fleet_events *e, const char *name, resil_breaker_state from,
                      resil_breaker_state to, resil_breaker_reason reason)
{
    pthread_mutex_lock(&e->mu);
    bool found = false;
    for (size_t i = 0; i < e->len && !found; i++) {
        fleet_seen *s = &e->seen[i];
        found = s->type == RESIL_REDIS_STATE && strcmp(s->name, name) == 0 &&
                s->from == from && s->to == to && (reason == 0 || s->reason == reason);
    }
    pthread_mutex_unlock(&e->mu);
    return found;
}

/* ---- instances ------------------------------------------------------------------ */

/* How long a test client waits for each answer: long enough that a loaded
 * machine (a sanitizer build, suites running side by side) is never taken
 * for an outage. Tests of outages choose their own. */
#define FLEET_TIMEOUT RESIL_S(2)

/* Options for a client of `url`: the library's defaults, except that
 * rounds happen only when asked (resil_redis_sync) or woken, so a test
 * decides when counts reach Redis, and the timeout above. */
static inline resil_redis_opts fleet_opts_of(const char *url, fleet_events *events)
{
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = url;
    o.timeout = FLEET_TIMEOUT;
    o.sync_interval = RESIL_S(3600);
    o.refresh_interval = RESIL_S(3600);
    if (events != NULL) {
        o.listener = fleet_record_event;
        o.listener_ud = events;
    }
    return o;
}

/* ... on the test server. */
static inline resil_redis_opts fleet_opts(fleet_events *events)
{
    return fleet_opts_of(redis_server_url(fleet_server), events);
}

/* The same for a client of `url` (a fake server's, say) that reconnects
 * every `reconnect`, without jitter. */
static inline resil_redis_opts fleet_opts_at(const char *url, resil_duration reconnect,
                                             fleet_events *events)
{
    resil_redis_opts o = fleet_opts_of(url, events);
    o.reconnect.kind = RESIL_BACKOFF_CONSTANT;
    o.reconnect.base = reconnect;
    o.reconnect.max_delay = reconnect;
    o.reconnect.jitter = RESIL_JITTER_NONE;
    return o;
}

static inline resil_redis *fleet_client_with(const resil_redis_opts *o)
{
    resil_redis *r = NULL;
    resil_err err;
    int rc = resil_redis_new(o, &r, &err);
    if (rc != 0)
        fprintf(stderr, "fleet_client: %s\n", err.message);
    assert_int_equal(rc, 0);
    return r;
}

static inline resil_redis *fleet_client(fleet_events *events)
{
    resil_redis_opts o = fleet_opts(events);
    return fleet_client_with(&o);
}

/* Consecutive-failure rules on a fake clock; other fields at their defaults. */
static inline resil_redis_breaker_opts fleet_consecutive(const char *name, uint32_t threshold,
                                                  resil_fake_clock *fc)
{
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o);
    o.name = name;
    o.rules.kind = RESIL_BREAKER_CONSECUTIVE;
    o.rules.failure_threshold = threshold;
    o.rules.break_duration = RESIL_S(5);
    o.rules.clock = resil_fake_clock_clock(fc);
    return o;
}

static inline resil_breaker *fleet_breaker(resil_redis *r, const resil_redis_breaker_opts *o)
{
    resil_breaker *b = NULL;
    resil_err err;
    int rc = resil_redis_breaker_new(r, o, &b, &err);
    if (rc != 0)
        fprintf(stderr, "fleet_breaker: %s\n", err.message);
    assert_int_equal(rc, 0);
    return b;
}

static inline resil_fake_clock *fleet_clock(void)
{
    resil_fake_clock *fc = NULL;
    assert_int_equal(resil_fake_clock_new(0, FLEET_WALL_START, &fc), 0);
    return fc;
}

/* Acquire and report `n` results of one kind; asserts each was admitted. */
static inline void fleet_calls(resil_breaker *b, int n, resil_breaker_result r)
{
    for (int i = 0; i < n; i++) {
        resil_breaker_permit p;
        assert_int_equal(resil_breaker_acquire(b, &p), 0);
        assert_int_equal(resil_breaker_record(b, &p, r), 0);
    }
}

static inline resil_redis_breaker_status fleet_status(resil_breaker *b)
{
    resil_redis_breaker_status s;
    assert_int_equal(resil_redis_breaker_status_get(b, &s), 0);
    return s;
}

#endif
