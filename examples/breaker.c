/*
 * breaker.c — a circuit breaker in front of a dependency that goes down for
 * a while and comes back, and a registry handing out one breaker per host.
 *
 * The clock is fake so that the example runs instantly and prints the same
 * thing every time: one second of virtual time passes between calls. With
 * the system clock (clock = NULL) the code is unchanged.
 *
 *   example_breaker
 */
#include <stdio.h>
#include <string.h>

#include "resil.h"

/* The dependency: down from t = 3 s to t = 12 s, healthy otherwise. */
static resil_outcome call_payments(resil_attempt_ctx *ctx)
{
    int *calls = ctx->user;
    ++*calls;
    resil_instant now = resil_clock_now(ctx->clock);
    if (now >= RESIL_S(3) && now < RESIL_S(12))
        return resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    return resil_ok();
}

/* State changes, kept to be printed after the call that caused them. */
static char changes[256];

static void on_change(resil_breaker *b, const resil_breaker_event *ev, void *ud)
{
    (void)b;
    (void)ud;
    size_t used = strlen(changes);
    snprintf(changes + used, sizeof changes - used, "  [%s -> %s: %s]",
             resil_breaker_state_name(ev->from), resil_breaker_state_name(ev->to),
             resil_breaker_reason_name(ev->reason));
}

static void run_breaker(resil_fake_clock *fc)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_CONSECUTIVE; /* trip on 3 failures in a row */
    o.failure_threshold = 3;
    o.break_duration = RESIL_S(2);
    o.break_growth = 2.0; /* 2 s, 4 s, 8 s ... */
    o.max_break_duration = RESIL_S(30);
    o.clock = resil_fake_clock_clock(fc);
    o.listener = on_change;

    resil_breaker *b;
    resil_err err;
    if (resil_breaker_new(&o, &b, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    int calls = 0;
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX, .clock = o.clock,
                             .user = &calls};
    for (int t = 0; t < 24; t++) {
        resil_outcome out;
        char wait[32];
        changes[0] = '\0';
        if (resil_breaker_execute(b, call_payments, &ctx, NULL, NULL, &out) == RESIL_EREJECTED) {
            resil_duration_format(out.retry_after, wait, sizeof wait);
            printf("t=%2ds  rejected (%s, next probe in %s)%s\n", t, out.detail, wait, changes);
        } else {
            printf("t=%2ds  called: %s%s\n", t, resil_kind_name(out.kind), changes);
        }
        resil_fake_clock_advance(fc, RESIL_S(1));
    }
    resil_breaker_stats s;
    resil_breaker_stats_get(b, &s);
    printf("state %s, opened %llu times, dependency called %d times of 24\n",
           resil_breaker_state_name(s.state), (unsigned long long)s.opens, calls);
    resil_breaker_free(b);
}

static void run_registry(resil_fake_clock *fc)
{
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    o.breaker.clock = resil_fake_clock_clock(fc);
    resil_registry *r;
    if (resil_registry_new(&o, &r, NULL) != 0)
        return;
    const char *hosts[] = {"https://api.example.com:443", "https://auth.example.com:443",
                           "https://api.example.com:443"};
    for (int i = 0; i < 3; i++) {
        resil_breaker *b;
        resil_registry_get(r, hosts[i], NULL, &b, NULL); /* a reference: free it */
        resil_breaker_free(b);
    }
    resil_registry_entry e[8];
    size_t n;
    resil_registry_snapshot(r, e, 8, &n);
    printf("registry holds %zu breakers:\n", n);
    for (size_t i = 0; i < n && i < 8; i++)
        printf("  %-30s %s\n", e[i].name, resil_breaker_state_name(e[i].state));
    resil_registry_free(r);
}

int main(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    run_breaker(fc);
    run_registry(fc);
    resil_fake_clock_free(fc);
    return 0;
}
