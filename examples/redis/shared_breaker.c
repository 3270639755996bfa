/*
 * shared_breaker.c — two instances of a service share one circuit breaker
 * through Redis: the failures one of them sees open it for both, and
 * closing it by hand from either reopens the way for both.
 *
 * In production each instance is its own process with one client; here
 * the two live in one process, each with its own client and connections,
 * which is the same thing as far as Redis can tell.
 *
 *     example_redis_shared_breaker redis://127.0.0.1:6379
 *
 * (or set RESIL_REDIS_URL). It uses the breaker "example-payments".
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "resil/redis.h"

static bool payments_down = true;

static resil_outcome call_payments(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return payments_down ? resil_fail(RESIL_TRANSIENT, 503, "payments unavailable")
                         : resil_ok();
}

static resil_redis *instance(const char *url)
{
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = url;
    o.timeout = RESIL_S(2); /* per answer: a busy machine is not an outage */
    resil_redis *r = NULL;
    resil_err err;
    if (resil_redis_new(&o, &r, &err) != 0) {
        fprintf(stderr, "%s\n", err.message); /* e.g. nothing answers at the URL */
        exit(1);
    }
    return r;
}

static resil_breaker *payments_breaker(resil_redis *r)
{
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o); /* counting: the fleet's totals */
    o.name = "example-payments";
    o.rules.kind = RESIL_BREAKER_CONSECUTIVE;
    o.rules.failure_threshold = 3;
    o.rules.break_duration = RESIL_S(30);
    resil_breaker *b = NULL;
    resil_err err;
    if (resil_redis_breaker_new(r, &o, &b, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    return b;
}

/* A PUBLISH takes a fraction of a millisecond; a busy machine may take
 * longer, so allow up to ten seconds. */
static void wait_for(resil_breaker *b, resil_breaker_state s)
{
    struct timespec tick = {0, 1000000};
    for (int i = 0; i < 10000 && resil_breaker_state_of(b) != s; i++)
        nanosleep(&tick, NULL);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : getenv("RESIL_REDIS_URL");
    if (url == NULL)
        url = "redis://127.0.0.1:6379";
    resil_redis *ra = instance(url), *rb = instance(url);
    resil_breaker *a = payments_breaker(ra), *b = payments_breaker(rb);
    resil_breaker_reset(a); /* start from closed, whatever a last run left */
    wait_for(b, RESIL_BREAKER_CLOSED);

    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX,
                             .clock = resil_clock_system()};
    resil_outcome out;
    for (int i = 1; i <= 3; i++) {
        resil_breaker_execute(a, call_payments, &ctx, NULL, NULL, &out);
        printf("instance A: payments failed (%d/3): %s\n", i, out.detail);
    }

    wait_for(b, RESIL_BREAKER_OPEN);
    /* The wait left is the 30 s break less the time the news took to reach
     * B: shown rounded up to ten seconds. */
    if (resil_breaker_execute(b, call_payments, &ctx, NULL, NULL, &out) == RESIL_EREJECTED)
        printf("instance B: rejected without calling payments: %s, next probe in %llds\n",
               out.detail, (long long)((out.retry_after + RESIL_S(10) - 1) / RESIL_S(10)) * 10);

    resil_redis_breaker_status st;
    if (resil_redis_breaker_status_get(b, &st) == 0)
        printf("fleet: %s (%s), opened %llu time(s)\n", resil_breaker_state_name(st.state),
               resil_breaker_reason_name(st.reason), (unsigned long long)st.opens);

    payments_down = false;
    resil_breaker_close(b);
    printf("instance B: closed it by hand\n");
    wait_for(a, RESIL_BREAKER_CLOSED);
    if (resil_breaker_execute(a, call_payments, &ctx, NULL, NULL, &out) == 0)
        printf("instance A: payments called again: %s\n",
               resil_outcome_ok(&out) ? "succeeded" : out.detail);

    resil_breaker_free(a);
    resil_breaker_free(b);
    resil_redis_free(ra);
    resil_redis_free(rb);
    return 0;
}
