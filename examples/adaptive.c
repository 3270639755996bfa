/*
 * adaptive.c — limits that find themselves.
 *
 * First an adaptive concurrency limiter (Vegas) in front of a dependency
 * that answers in 50 ms up to 10 calls at once and slower beyond (each
 * call waits for the ones ahead of it): each second the client sends as
 * many calls as the limit allows, and the limit settles where latency
 * starts to rise. Then client-side throttling in front of a backend that
 * refuses most calls for a while: the client refuses locally in proportion,
 * and stops as soon as the backend accepts again.
 *
 * The clock is fake and the draws seeded, so the program runs instantly and
 * prints the same thing every time; with the system clock the code is
 * unchanged.
 *
 *   example_adaptive
 */
#include <stdio.h>

#include "resil.h"

#define MAX_LIMIT 64

/* The dependency: 10 workers, 50 ms a call. */
static resil_duration latency_at(int32_t in_flight)
{
    return in_flight <= 10 ? RESIL_MS(50) : RESIL_MS(50) * in_flight / 10;
}

static void limiter_demo(resil_fake_clock *fc)
{
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, RESIL_LIMIT_VEGAS);
    o.initial_limit = 4;
    o.max_limit = MAX_LIMIT;
    o.window = RESIL_S(1);
    o.window_samples = 1;
    o.clock = resil_fake_clock_clock(fc);
    resil_limiter *l;
    resil_err err;
    if (resil_limiter_new(&o, &l, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    for (int second = 1; second <= 16; second++) {
        resil_fake_clock_advance(fc, RESIL_S(1));
        resil_instant now = resil_fake_clock_now(fc);
        resil_limiter_ticket t[MAX_LIMIT];
        int32_t sent = 0;
        while (sent < MAX_LIMIT && resil_limiter_try_acquire_at(l, now, &t[sent]) == 0)
            sent++;
        resil_duration took = latency_at(sent);
        for (int32_t i = 0; i < sent; i++)
            resil_limiter_release_at(&t[i], RESIL_BREAKER_SUCCESS, now + took);
        printf("limiter: second %2d: %2d calls at once, %3lld ms each, limit now %d\n", second,
               (int)sent, (long long)(took / RESIL_MS(1)), (int)resil_limiter_limit(l));
    }
    resil_limiter_free(l);
}

static void throttle_demo(resil_fake_clock *fc)
{
    resil_throttle_opts o;
    resil_throttle_opts_default(&o); /* K = 2 over two minutes */
    o.window = RESIL_S(10);
    o.buckets = 10;
    o.seed = 42;
    o.clock = resil_fake_clock_clock(fc);
    resil_throttle *t;
    resil_err err;
    if (resil_throttle_new(&o, &t, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    for (int second = 1; second <= 16; second++) {
        resil_fake_clock_advance(fc, RESIL_S(1));
        resil_instant now = resil_fake_clock_now(fc);
        bool refusing = second > 3 && second <= 9; /* the backend's bad spell */
        int refused_locally = 0, accepted = 0;
        for (int i = 0; i < 100; i++) {
            if (resil_throttle_admit_at(t, now) != 0) {
                refused_locally++;
                continue;
            }
            bool ok = !refusing || i % 10 == 0; /* 10 % get through */
            accepted += ok;
            resil_throttle_record_at(t, ok ? RESIL_BREAKER_SUCCESS : RESIL_BREAKER_FAILURE, now);
        }
        printf("throttle: second %2d: backend %s, %3d refused locally, %3d accepted, "
               "p = %.2f\n",
               second, refusing ? "refusing" : "healthy ", refused_locally, accepted,
               resil_throttle_probability(t, now));
    }
    resil_throttle_free(t);
}

int main(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    limiter_demo(fc);
    throttle_demo(fc);
    resil_fake_clock_free(fc);
    return 0;
}
