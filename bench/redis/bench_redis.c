/*
 * bench_redis.c — what sharing a breaker through Redis costs, against a
 * real redis-server started for the run:
 *
 *  - calls through a shared breaker in the closed state, from 1 and 4
 *    threads, with the default sync interval, against a local breaker with
 *    the same rules in the same run (the design's target: at least half the
 *    local throughput);
 *  - Redis commands per 1000 calls, from INFO commandstats, for a busy
 *    instance and for one paced at 1000 calls/s;
 *  - staleness: from a trip on one instance to rejection on another
 *    (PUBLISH), and from failures spread over two instances to the trip
 *    they add up to (the sync interval), as p50/p99;
 *  - the bound on a call when Redis stops: a status read with Redis paused
 *    (SIGSTOP), at the default 50 ms timeout, as p50/p99/max.
 *
 * The breakers use the core's defaults (failure ratio over a 30 s window),
 * and the two sides now count alike: the shared breaker's closed path
 * counts a success in a per-thread stripe and reads its cached state, the
 * local one counts it in a per-CPU stripe of its window (one CAS, no
 * mutex) after one coarse clock read. So share_of_local compares shared
 * state against local state, not one counting algorithm against another
 * (the local baseline used to take its mutex and a precise clock read on
 * every call, which made the shared breaker look three times faster).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "redis_server.h"
#include "resil/redis.h"

static redis_server *server;

/* Set-up that fails leaves nothing worth measuring: say what, and stop. */
static void must(int rc, const resil_err *err, const char *what)
{
    if (rc == 0)
        return;
    fprintf(stderr, "bench_redis: %s: %s\n", what,
            err != NULL && err->code == rc ? err->message : resil_strerror(rc));
    exit(1);
}

/* ---- throughput in the closed state ---------------------------------------- */

typedef struct target {
    resil_breaker *local;
    resil_breaker *shared;
    int threads;
} target;

typedef struct slice {
    const target *t;
    uint64_t iters;
    pthread_t thread;
} slice;

static void *run_slice(void *arg)
{
    slice *s = arg;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < s->iters; i++) {
        if (s->t->local != NULL) {
            resil_breaker_permit p;
            ok += resil_breaker_acquire(s->t->local, &p) == 0;
            resil_breaker_record(s->t->local, &p, RESIL_BREAKER_SUCCESS);
        } else {
            resil_breaker_permit p;
            ok += resil_breaker_acquire(s->t->shared, &p) == 0;
            resil_breaker_record(s->t->shared, &p, RESIL_BREAKER_SUCCESS);
        }
    }
    bench_consume(ok);
    return NULL;
}

static void calls(void *ud, uint64_t iters)
{
    const target *t = ud;
    if (t->threads == 1) {
        slice s = {t, iters, 0};
        run_slice(&s);
        return;
    }
    slice s[8];
    for (int i = 0; i < t->threads; i++) {
        s[i] = (slice){t, iters / (uint64_t)t->threads, 0};
        pthread_create(&s[i].thread, NULL, run_slice, &s[i]);
    }
    for (int i = 0; i < t->threads; i++)
        pthread_join(s[i].thread, NULL);
}

static void throughput(resil_breaker *local, resil_breaker *shared, int threads,
                       const char *shared_name, const char *local_name)
{
    target lt = {local, NULL, threads}, st = {NULL, shared, threads};
    bench_result base = bench_run(local_name, calls, &lt);
    bench_result res = bench_run(shared_name, calls, &st);
    char extra[128];
    snprintf(extra, sizeof extra, "threads=%d calls_per_s=%.0f share_of_local=%.2f", threads,
             1e9 / res.ns_per_op, base.ns_per_op / res.ns_per_op);
    bench_report(res, base, extra);
}

/* ---- commands per 1000 calls ------------------------------------------------ */

/* Commands Redis has run, from INFO commandstats: those clients sent
 * (script calls and the rest) and all of them, counting the ones the
 * script runs inside Redis. The caller subtracts its own INFO calls. */
typedef struct command_counts {
    long long scripts; /* EVALSHA + EVAL: the client's round trips */
    long long all;
} command_counts;

static command_counts commands_so_far(void)
{
    const char *argv[] = {"INFO", "commandstats"};
    redisReply *r = redis_server_command(server, 2, argv);
    command_counts c = {0, 0};
    const char *text = r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "";
    for (const char *p = text; (p = strstr(p, "calls=")) != NULL; p += 6)
        c.all += strtoll(p + 6, NULL, 10);
    const char *names[] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(text, names[i]);
        if (at != NULL)
            c.scripts += strtoll(at + strlen(names[i]), NULL, 10);
    }
    if (r != NULL)
        freeReplyObject(r);
    return c;
}

static uint64_t now_ns(void) { return bench_now_ns(); }

static void sleep_until(uint64_t t)
{
    uint64_t n = now_ns();
    if (t <= n)
        return;
    struct timespec ts = {(time_t)((t - n) / 1000000000u), (long)((t - n) % 1000000000u)};
    nanosleep(&ts, NULL);
}

/* Run calls for `seconds` (paced at `per_second` when non-zero) and report
 * the commands Redis saw per 1000 of them. */
static void commands_per_calls(resil_breaker *shared, bench_result base, const char *name,
                               double seconds, uint64_t per_second)
{
    command_counts before = commands_so_far();
    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9), n = 0;
    uint64_t a0 = bench_alloc_count();
    while (now_ns() < end) {
        resil_breaker_permit p;
        resil_breaker_acquire(shared, &p);
        resil_breaker_record(shared, &p, RESIL_BREAKER_SUCCESS);
        n++;
        if (per_second != 0)
            sleep_until(start + n * 1000000000u / per_second);
    }
    uint64_t took = now_ns() - start;
    command_counts after = commands_so_far();
    long long scripts = after.scripts - before.scripts;
    long long all = after.all - before.all - 1; /* our first INFO */
    bench_result res = {.name = name, .ns_per_op = (double)took / (double)n,
                        .min_ns = (double)took / (double)n, .max_ns = (double)took / (double)n,
                        .allocs_per_op = (double)(bench_alloc_count() - a0) / (double)n,
                        .iters = n};
    char extra[256];
    snprintf(extra, sizeof extra,
             "calls=%llu round_trips=%lld round_trips_per_1000_calls=%.4f "
             "round_trips_per_s=%.1f server_commands_per_1000_calls=%.4f",
             (unsigned long long)n, scripts, 1000.0 * (double)scripts / (double)n,
             (double)scripts * 1e9 / (double)took, 1000.0 * (double)all / (double)n);
    bench_report(res, base, extra);
}

/* ---- staleness ---------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t wait_for_state(resil_breaker *b, resil_breaker_state s)
{
    uint64_t t0 = now_ns();
    while (resil_breaker_state_of(b) != s && now_ns() - t0 < 5000000000u) {
    }
    return now_ns() - t0;
}

/* Spin on acquire until the breaker rejects; the time that took. */
static uint64_t until_rejected(resil_breaker *b, uint64_t from)
{
    for (;;) {
        resil_breaker_permit p;
        if (resil_breaker_acquire(b, &p) == RESIL_EREJECTED)
            return now_ns() - from;
        resil_breaker_record(b, &p, RESIL_BREAKER_IGNORED);
        if (now_ns() - from > 5000000000u)
            return now_ns() - from;
    }
}

static void report_latencies(const char *name, uint64_t *ns, int n, bench_result base)
{
    qsort(ns, (size_t)n, sizeof *ns, cmp_u64);
    uint64_t p50 = ns[n / 2], p99 = ns[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
    bench_result res = {.name = name, .ns_per_op = (double)p50, .min_ns = (double)ns[0],
                        .max_ns = (double)ns[n - 1], .iters = (uint64_t)n};
    char extra[128];
    snprintf(extra, sizeof extra, "trials=%d p50_us=%.1f p99_us=%.1f max_us=%.1f", n,
             (double)p50 / 1e3, (double)p99 / 1e3, (double)ns[n - 1] / 1e3);
    bench_report(res, base, extra);
}

typedef struct pair {
    resil_redis *ra, *rb;
    resil_breaker *a, *b;
} pair;

static pair make_pair(const char *name, uint32_t threshold)
{
    pair p;
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = redis_server_url(server);
    resil_err err;
    must(resil_redis_new(&o, &p.ra, &err), &err, "client A");
    must(resil_redis_new(&o, &p.rb, &err), &err, "client B");
    resil_redis_breaker_opts bo;
    resil_redis_breaker_opts_default(&bo);
    bo.name = name;
    bo.rules.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.rules.failure_threshold = threshold;
    bo.rules.break_duration = RESIL_S(60);
    must(resil_redis_breaker_new(p.ra, &bo, &p.a, &err), &err, "breaker A");
    must(resil_redis_breaker_new(p.rb, &bo, &p.b, &err), &err, "breaker B");
    return p;
}

static void free_pair(pair *p)
{
    resil_breaker_free(p->a);
    resil_breaker_free(p->b);
    resil_redis_free(p->ra);
    resil_redis_free(p->rb);
}

static void fail(resil_breaker *b, int n)
{
    for (int i = 0; i < n; i++) {
        resil_breaker_permit p;
        resil_breaker_acquire(b, &p);
        resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE);
    }
}

/* A trips it (its local view reaches the threshold: flushed at once, then
 * PUBLISHed); how long until B rejects. */
static void trip_to_rejection(bench_result rtt)
{
    enum { TRIALS = 200 };
    static uint64_t ns[TRIALS];
    pair p = make_pair("bench-propagation", 5);
    for (int i = 0; i < TRIALS; i++) {
        resil_breaker_reset(p.a);
        wait_for_state(p.b, RESIL_BREAKER_CLOSED);
        fail(p.a, 4);
        uint64_t t0 = now_ns(); /* the fifth failure trips it */
        fail(p.a, 1);
        ns[i] = until_rejected(p.b, t0);
    }
    report_latencies("redis_trip_to_rejection", ns, TRIALS, rtt);
    free_pair(&p);
}

/* Failures spread over A and B, neither of which sees the threshold alone:
 * the trip waits for the sync interval's flushes. */
static void spread_counts_to_trip(bench_result rtt)
{
    enum { TRIALS = 40 };
    static uint64_t ns[TRIALS];
    pair p = make_pair("bench-spread", 6);
    for (int i = 0; i < TRIALS; i++) {
        resil_breaker_reset(p.a);
        wait_for_state(p.b, RESIL_BREAKER_CLOSED);
        resil_redis_sync(p.ra);
        resil_redis_sync(p.rb);
        /* Start at a random phase of the clients' rounds, or every trial
         * would begin just after a flush and measure the worst case. */
        sleep_until(now_ns() + (uint64_t)(resil_rng_next(resil_rng_thread()) * 1e8));
        uint64_t t0 = now_ns();
        fail(p.a, 3);
        fail(p.b, 3);
        ns[i] = until_rejected(p.b, t0);
    }
    report_latencies("redis_spread_counts_to_trip", ns, TRIALS, rtt);
    free_pair(&p);
}

static void ping(void *ud, uint64_t iters)
{
    redisContext *c = ud;
    for (uint64_t i = 0; i < iters; i++) {
        redisReply *r = redisCommand(c, "PING");
        if (r != NULL)
            freeReplyObject(r);
    }
}

/* ---- a call when Redis stops ----------------------------------------------- */

static void wait_connected(resil_redis *r)
{
    uint64_t t0 = now_ns();
    while (!resil_redis_connected(r) && now_ns() - t0 < 5000000000u) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Redis paused just as a call that must ask it starts; the client comes
 * back (10 ms reconnects) before the next trial. No rounds of its own, so
 * the call is the one that meets the pause. */
static void stopped_mid_call(bench_result rtt)
{
    enum { TRIALS = 40 };
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = redis_server_url(server);
    o.sync_interval = RESIL_S(3600);
    o.refresh_interval = RESIL_S(3600);
    o.reconnect.base = RESIL_MS(10);
    o.reconnect.max_delay = RESIL_MS(10);
    resil_redis *r = NULL;
    resil_err err;
    must(resil_redis_new(&o, &r, &err), &err, "client");
    resil_redis_breaker_opts bo;
    resil_redis_breaker_opts_default(&bo);
    bo.name = "bench-stopped";
    resil_breaker *b = NULL;
    must(resil_redis_breaker_new(r, &bo, &b, &err), &err, "shared breaker");
    uint64_t took[TRIALS];
    for (int i = 0; i < TRIALS; i++) {
        wait_connected(r);
        redis_server_pause(server);
        resil_redis_breaker_status st;
        uint64_t t0 = now_ns();
        int rc = resil_redis_breaker_status_get(b, &st);
        took[i] = now_ns() - t0;
        redis_server_resume(server);
        if (rc != RESIL_EBACKEND)
            must(RESIL_ESTATE, NULL, "a call to a paused Redis did not time out");
    }
    report_latencies("redis_call_when_stopped_50ms", took, TRIALS, rtt);
    resil_breaker_free(b);
    resil_redis_free(r);
}

int main(void)
{
    server = redis_server_start();
    if (server == NULL)
        return 1;

    resil_breaker_opts rules;
    resil_breaker_opts_default(&rules);
    resil_breaker *local = NULL;
    resil_err err;
    must(resil_breaker_new(&rules, &local, &err), &err, "local breaker");

    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = redis_server_url(server);
    resil_redis *r = NULL;
    must(resil_redis_new(&o, &r, &err), &err, "client");
    resil_redis_breaker_opts fleet, per_instance;
    resil_redis_breaker_opts_default(&fleet);
    fleet.name = "bench-fleet";
    per_instance = fleet;
    per_instance.name = "bench-local-counting";
    per_instance.counting = RESIL_REDIS_COUNT_LOCAL;
    resil_breaker *shared = NULL, *shared_local = NULL;
    must(resil_redis_breaker_new(r, &fleet, &shared, &err), &err, "shared breaker");
    must(resil_redis_breaker_new(r, &per_instance, &shared_local, &err), &err,
         "shared breaker, local counting");

    throughput(local, shared, 1, "redis_breaker_closed_1t", "local_breaker_closed_1t");
    throughput(local, shared, 4, "redis_breaker_closed_4t", "local_breaker_closed_4t");
    throughput(local, shared_local, 1, "redis_breaker_local_counting_1t",
               "local_breaker_closed_1t");
    throughput(local, shared_local, 4, "redis_breaker_local_counting_4t",
               "local_breaker_closed_4t");

    resil_breaker_free(shared);
    resil_breaker_free(shared_local);
    resil_redis_free(r);

    /* One client holding one breaker: the commands are that breaker's. */
    target lt = {local, NULL, 1};
    bench_result base = bench_run("local_breaker_closed_1t", calls, &lt);
    must(resil_redis_new(&o, &r, &err), &err, "client");
    fleet.name = "bench-commands";
    must(resil_redis_breaker_new(r, &fleet, &shared, &err), &err, "shared breaker");
    commands_per_calls(shared, base, "redis_commands_busy", 2.0, 0);
    commands_per_calls(shared, base, "redis_commands_at_1000_calls_per_s", 2.0, 1000);
    resil_breaker_free(shared);
    resil_redis_free(r);

    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", redis_server_port(server), tv);
    bench_result rtt = bench_run("redis_ping_rtt", ping, c);
    redisFree(c);
    trip_to_rejection(rtt);
    spread_counts_to_trip(rtt);
    stopped_mid_call(rtt);

    resil_breaker_free(local);
    redis_server_stop(server);
    return 0;
}
