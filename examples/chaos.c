/*
 * chaos.c — a chaos experiment on a pipeline: one attempt in three fails
 * without calling the dependency, one in two waits 200 ms first, the retry
 * around them absorbs the faults, and the kill switch ends the experiment.
 *
 * The clock is fake (a wait advances it at once) and the injections are
 * seeded, so the program runs instantly and prints the same thing every
 * time; with the system clock and seed 0 the code is unchanged.
 *
 *   example_chaos
 */
#include <stdio.h>

#include "resil.h"

static resil_outcome get_order(resil_attempt_ctx *ctx)
{
    int *calls = ctx->user;
    (*calls)++;
    return resil_ok();
}

static resil_pipeline *build(resil_clock *clock, resil_err *err)
{
    resil_pipeline_builder *b;
    if (resil_pipeline_builder_new("orders", &b, err) != 0)
        return NULL;
    resil_pipeline_builder_clock(b, clock);
    resil_retry_policy retry;
    resil_retry_policy_default(&retry);
    retry.max_attempts = 4;
    retry.backoff.base = RESIL_MS(100);
    retry.backoff.jitter = RESIL_JITTER_NONE;
    resil_chaos_opts fault, latency;
    resil_chaos_opts_default(&fault, RESIL_CHAOS_FAULT);
    fault.rate = 1.0 / 3;
    fault.outcome = resil_fail(RESIL_TRANSIENT, 503, "chaos 503");
    fault.seed = 42; /* the same injections every run; 0 = from the OS */
    resil_chaos_opts_default(&latency, RESIL_CHAOS_LATENCY);
    latency.rate = 0.5;
    latency.latency = RESIL_MS(200);
    latency.seed = 7;
    resil_pipeline *p = NULL;
    if (resil_pipeline_add_retry(b, &retry) == 0 &&
        resil_pipeline_add_chaos(b, &fault) == 0 && /* inside the retry: retried */
        resil_pipeline_add_chaos(b, &latency) == 0)
        resil_pipeline_build(b, &p, err);
    resil_pipeline_builder_free(b);
    return p;
}

static void calls(resil_pipeline *p, int n)
{
    for (int i = 1; i <= n; i++) {
        int reached = 0;
        resil_call call;
        resil_call_default(&call);
        call.user = &reached;
        resil_pipeline_result r;
        resil_pipeline_execute(p, get_order, &call, &r);
        char took[32];
        resil_duration_format(r.elapsed, took, sizeof took);
        printf("call %d: %s after %u attempt%s, %d reached the dependency, %s\n", i,
               r.outcome.kind == RESIL_SUCCESS ? "ok" : "failed", (unsigned)r.attempts,
               r.attempts == 1 ? "" : "s", reached, took);
    }
}

int main(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    resil_err err = {0, ""};
    resil_pipeline *p = build(resil_fake_clock_clock(fc), &err);
    if (p == NULL) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    printf("experiment on:\n");
    calls(p, 6);
    /* The kill switch, from any thread at any time. */
    resil_chaos_enable(resil_pipeline_chaos(p, RESIL_CHAOS_FAULT), false);
    resil_chaos_enable(resil_pipeline_chaos(p, RESIL_CHAOS_LATENCY), false);
    printf("experiment off:\n");
    calls(p, 2);
    resil_pipeline_free(p);
    resil_fake_clock_free(fc);
    return 0;
}
