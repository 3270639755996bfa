/*
 * bench_fleet_limits.c — what the fleet-wide rate limiter and concurrency
 * limit cost per call, against a real redis-server started for the run:
 * one script call for a limiter permit, two (take and give back) for a
 * concurrency permit, each against the local object with the same limits
 * in the same run. The fleet figures are Redis round trips on loopback; the
 * point is their size next to the local ones, not the local ones.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "redis_server.h"
#include "resil/redis.h"

static void must(int rc, const resil_err *err, const char *what)
{
    if (rc == 0)
        return;
    fprintf(stderr, "bench_fleet_limits: %s: %s\n", what,
            err != NULL && err->code == rc ? err->message : resil_strerror(rc));
    exit(1);
}

static void limiter_try_acquire(void *ud, uint64_t iters)
{
    resil_ratelimit *rl = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++)
        ok += resil_ratelimit_try_acquire(rl, 1, NULL) == 0;
    bench_consume(ok);
}

static void bulkhead_acquire_release(void *ud, uint64_t iters)
{
    resil_bulkhead *b = ud;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_bulkhead_ticket t;
        ok += resil_bulkhead_try_acquire(b, &t) == 0;
        resil_bulkhead_release(&t);
    }
    bench_consume(ok);
}

/* Generous enough never to reject: every call is a full admit. */
static void bench_limiter(resil_redis *r)
{
    resil_ratelimit_opts lo;
    resil_ratelimit_opts_default(&lo, RESIL_RATELIMIT_TOKEN_BUCKET);
    lo.rate = 1000000;
    lo.burst = 1000000;
    resil_ratelimit *local = NULL;
    resil_err err;
    must(resil_ratelimit_new(&lo, &local, &err), &err, "local limiter");
    resil_redis_ratelimit_opts fo;
    resil_redis_ratelimit_opts_default(&fo);
    fo.name = "bench";
    fo.rate = 1000000;
    fo.burst = 1000000;
    resil_ratelimit *fleet = NULL;
    must(resil_redis_ratelimit_new(r, &fo, &fleet, &err), &err, "fleet limiter");
    bench_result base = bench_run("ratelimit_local_try_acquire", limiter_try_acquire, local);
    bench_report(bench_run("ratelimit_fleet_try_acquire", limiter_try_acquire, fleet), base,
                 "round_trips_per_op=1");
    resil_ratelimit_free(fleet);
    resil_ratelimit_free(local);
}

static void bench_concurrency(resil_redis *r)
{
    resil_bulkhead_opts bo;
    resil_bulkhead_opts_default(&bo);
    resil_bulkhead *local = NULL;
    resil_err err;
    must(resil_bulkhead_new(&bo, &local, &err), &err, "local bulkhead");
    resil_redis_concurrency_opts co;
    resil_redis_concurrency_opts_default(&co);
    co.name = "bench";
    resil_bulkhead *fleet = NULL;
    must(resil_redis_concurrency_new(r, &co, &fleet, &err), &err, "fleet concurrency limit");
    bench_result base = bench_run("bulkhead_local_acquire_release", bulkhead_acquire_release,
                                  local);
    bench_report(bench_run("concurrency_fleet_acquire_release", bulkhead_acquire_release, fleet),
                 base, "round_trips_per_op=2");
    resil_bulkhead_free(fleet);
    resil_bulkhead_free(local);
}

int main(void)
{
    redis_server *server = redis_server_start();
    if (server == NULL)
        return 1;
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = redis_server_url(server);
    o.timeout = RESIL_S(1);
    resil_redis *r = NULL;
    resil_err err;
    must(resil_redis_new(&o, &r, &err), &err, "client");
    bench_limiter(r);
    bench_concurrency(r);
    resil_redis_free(r);
    redis_server_stop(server);
    return 0;
}
