/*
 * limits.c — the three admission checks a server puts in front of its work:
 * a bulkhead (how many at once), a rate limiter (how many per second) and
 * graceful degradation (which priorities still run when health drops).
 *
 * The clock is fake and the health readings scripted, so the example runs
 * instantly and prints the same thing every time. With the system clock
 * (clock = NULL) and the default /proc sampler the code is unchanged.
 *
 *   example_limits
 */
#include <stdio.h>

#include "resil.h"

static void bulkhead_demo(resil_clock *clock)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = 2;
    o.queue = false; /* full means "no" at once */
    o.clock = clock;
    resil_bulkhead *b;
    resil_err err;
    if (resil_bulkhead_new(&o, &b, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    resil_bulkhead_ticket t[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        int rc = resil_bulkhead_acquire(b, NULL, &t[i]);
        printf("bulkhead: call %d %s (in flight %d)\n", i + 1,
               rc == 0 ? "runs" : resil_strerror(rc), (int)resil_bulkhead_in_flight(b));
    }
    for (int i = 0; i < 3; i++)
        resil_bulkhead_release(&t[i]); /* a ticket without a permit is ignored */
    resil_bulkhead_free(b);
}

static void ratelimit_demo(resil_fake_clock *fc)
{
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    o.rate = 5; /* five per second, */
    o.burst = 3; /* at most three at once */
    o.clock = resil_fake_clock_clock(fc);
    resil_ratelimit *rl;
    resil_err err;
    if (resil_ratelimit_new(&o, &rl, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    for (int i = 0; i < 5; i++) {
        resil_duration retry_after;
        if (resil_ratelimit_try_acquire(rl, 1, &retry_after) == 0) {
            printf("ratelimit: request %d -> 200\n", i + 1);
            continue;
        }
        char wait[32];
        resil_duration_format(retry_after, wait, sizeof wait);
        printf("ratelimit: request %d -> 429, Retry-After %s\n", i + 1, wait);
    }
    resil_fake_clock_advance(fc, RESIL_MS(200));
    printf("ratelimit: 200ms later, %lld permit(s) available\n",
           (long long)resil_ratelimit_available(rl));
    resil_ratelimit_free(rl);
}

static int scripted_health(void *ud, resil_health_sample *out)
{
    out->cpu = *(double *)ud;
    out->memory = 40;
    return 0;
}

static void on_level(void *ud, const resil_degrade_event *ev)
{
    (void)ud;
    printf("degrade: %s -> %s (%s)\n", ev->from_name, ev->to_name,
           resil_degrade_cause_name(ev->cause));
}

static void degrade_demo(resil_clock *clock)
{
    double cpu = 20;
    resil_degrade_opts o;
    resil_degrade_opts_default(&o); /* Minor .. Emergency with Excalibur's thresholds */
    o.sampler = scripted_health;
    o.sampler_ud = &cpu;
    o.on_change = on_level;
    o.clock = clock;
    resil_degrade *d;
    resil_err err;
    if (resil_degrade_new(&o, &d, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    for (int i = 0; i < 100; i++) /* 12 % of calls fail: Major */
        resil_degrade_record(d, i % 25 >= 3);
    resil_degrade_tick(d);
    const int32_t priorities[] = {10, 49, 50, 100};
    for (int i = 0; i < 4; i++)
        printf("degrade: priority %3d %s\n", (int)priorities[i],
               resil_degrade_admit(d, priorities[i]) == 0 ? "runs" : "is shed");
    resil_degrade_free(d);
}

int main(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    resil_clock *clock = resil_fake_clock_clock(fc);
    bulkhead_demo(clock);
    ratelimit_demo(fc);
    degrade_demo(clock);
    resil_fake_clock_free(fc);
    return 0;
}
