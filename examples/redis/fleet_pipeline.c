/*
 * fleet_pipeline.c — the standard pipeline (rate limiter → total timeout →
 * retry → circuit breaker → attempt timeout) with its two stateful
 * strategies shared by the fleet through Redis: a fleet-wide rate limit
 * and a fleet circuit breaker.
 *
 * Two instances of a service, each with its own client and its own
 * pipeline, call a payments API. The breaker opens on the failures
 * instance A sees, and instance B's call is refused without reaching the
 * API; the calls of both count against one rate limit.
 *
 * In production each instance is its own process; here both live in one
 * process, each with its own client and connections, which is the same
 * thing as far as Redis can tell.
 *
 *     example_redis_fleet_pipeline redis://127.0.0.1:6379
 *
 * (or set RESIL_REDIS_URL). It uses the breaker "example-orders" and the
 * limiter "example-orders"; the limit is the fleet's, so a second run
 * within the minute finds it spent.
 */
#include <stdio.h>
#include <stdlib.h>

#include "resil/pipeline.h"
#include "resil/redis.h"

static bool payments_down = true;
static int payments_calls;

static resil_outcome call_payments(resil_attempt_ctx *ctx)
{
    (void)ctx;
    payments_calls++;
    return payments_down ? resil_fail(RESIL_TRANSIENT, 503, "payments unavailable")
                         : resil_ok();
}

static void check(int rc, const resil_err *err)
{
    if (rc != 0) {
        fprintf(stderr, "%s\n", err->message); /* e.g. nothing answers at the URL */
        exit(1);
    }
}

typedef struct instance {
    resil_redis *client;
    resil_ratelimit *limit;
    resil_breaker *breaker;
    resil_pipeline *pipeline;
} instance;

static instance instance_new(const char *url)
{
    instance in = {0};
    resil_err err;
    resil_redis_opts ro;
    resil_redis_opts_default(&ro);
    ro.url = url;
    ro.timeout = RESIL_S(2); /* per answer: a busy machine is not an outage */
    check(resil_redis_new(&ro, &in.client, &err), &err);

    /* Five calls a minute, all at once if need be, for the whole fleet. */
    resil_redis_ratelimit_opts lo;
    resil_redis_ratelimit_opts_default(&lo);
    lo.name = "example-orders";
    lo.rate = 5;
    lo.period = RESIL_S(60);
    lo.burst = 5;
    lo.instances = 2; /* while Redis is down, each takes half */
    check(resil_redis_ratelimit_new(in.client, &lo, &in.limit, &err), &err);

    /* Three failures in a row anywhere in the fleet open it for everyone. */
    resil_redis_breaker_opts bo;
    resil_redis_breaker_opts_default(&bo);
    bo.name = "example-orders";
    bo.rules.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.rules.failure_threshold = 3;
    bo.rules.break_duration = RESIL_S(30);
    check(resil_redis_breaker_new(in.client, &bo, &in.breaker, &err), &err);

    /* The standard order, with the fleet's limiter and breaker in it. */
    resil_standard_opts std;
    resil_standard_opts_default(&std);
    std.retry.max_attempts = 1; /* one attempt per call: the counts stay readable */
    resil_pipeline_builder *b;
    check(resil_pipeline_builder_new("orders", &b, &err), &err);
    resil_pipeline_use_rate_limiter(b, in.limit, 0);
    resil_pipeline_add_total_timeout(b, &std.total);
    resil_pipeline_add_retry(b, &std.retry);
    resil_pipeline_use_breaker(b, in.breaker);
    resil_pipeline_add_attempt_timeout(b, &std.attempt);
    check(resil_pipeline_build(b, &in.pipeline, &err), &err);
    resil_pipeline_builder_free(b);
    return in;
}

static void instance_free(instance *in)
{
    resil_pipeline_free(in->pipeline);
    resil_breaker_free(in->breaker);
    resil_ratelimit_free(in->limit);
    resil_redis_free(in->client);
}

static void call(const char *who, instance *in)
{
    resil_pipeline_result r;
    resil_pipeline_execute(in->pipeline, call_payments, NULL, &r);
    if (resil_outcome_ok(&r.outcome))
        printf("instance %s: order placed\n", who);
    else if (r.cause.kind == RESIL_REJECTED)
        printf("instance %s: refused by the %s: %s\n", who,
               r.rejected_by == RESIL_STRATEGY_BREAKER ? "breaker" : "rate limiter",
               r.outcome.detail);
    else
        printf("instance %s: failed: %s\n", who, r.outcome.detail);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : getenv("RESIL_REDIS_URL");
    if (url == NULL)
        url = "redis://127.0.0.1:6379";
    instance a = instance_new(url), b = instance_new(url);
    resil_breaker_reset(a.breaker); /* start from closed, whatever a last run left */
    resil_redis_sync(b.client);

    for (int i = 0; i < 3; i++)
        call("A", &a);
    /* Flush A's counts and re-read the shared state, as the clients'
     * sync threads do every sync_interval (100 ms by default). */
    resil_redis_sync(a.client);
    resil_redis_sync(b.client);
    printf("fleet breaker, as B sees it: %s\n",
           resil_breaker_state_name(resil_breaker_state_of(b.breaker)));
    call("B", &b);

    payments_down = false;
    resil_breaker_close(b.breaker);
    resil_redis_sync(a.client);
    call("A", &a);
    call("B", &b);
    printf("payments called %d times for 6 calls\n", payments_calls);

    instance_free(&a);
    instance_free(&b);
    return 0;
}
