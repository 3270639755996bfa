/*
 * reload.c — named policies from a configuration file: check it, run calls
 * through a named pipeline, then reload it while a breaker is open.
 *
 *   example_config_reload [FILE]   (default: examples/config/resilience.json)
 *
 * Runs on the fake clock, so it finishes at once and prints the same lines
 * every time: the analysis `resil config check` would print, five failing
 * calls that open the "orders" breaker, a reload that changes the retry
 * policy but not the breaker — whose state therefore carries over — and a
 * rejected call after it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resil/config.h"

static resil_outcome unavailable(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
}

static void call_orders(resil_policies *reg)
{
    resil_policy p;
    if (resil_policies_get(reg, "orders", &p) != 0)
        return;
    resil_pipeline_result res;
    resil_policy_execute(&p, unavailable, NULL, &res);
    printf("call: %s after %u attempt(s), %s\n", resil_kind_name(res.outcome.kind), res.attempts,
           res.outcome.detail);
    resil_policy_release(&p);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "examples/config/resilience.json";
    resil_config *c;
    resil_config_diags d = {0};
    char text[8192];
    if (resil_config_load_file(path, &c, &d) != 0) {
        resil_config_diags_write(&d, RESIL_CONFIG_TEXT, text, sizeof text);
        fputs(text, stderr); /* every error, with its path and line:column */
        resil_config_diags_free(&d);
        return 1;
    }

    resil_config_report report;
    resil_config_analyze(c, NULL, &report);
    resil_config_report_write(&report, RESIL_CONFIG_TEXT, text, sizeof text);
    fputs(text, stdout);
    resil_config_report_free(&report);

    resil_fake_clock *fc;
    resil_fake_clock_new(0, 0, &fc);
    resil_policies_opts o;
    resil_policies_opts_default(&o);
    o.clock = resil_fake_clock_clock(fc);
    resil_policies *reg;
    resil_err err;
    if (resil_policies_new(&o, &reg, &err) != 0 || resil_policies_apply(reg, c, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    resil_config_free(c);

    printf("\n");
    call_orders(reg); /* 4 attempts, 4 failures in a row */
    call_orders(reg); /* the 5th failure opens the breaker */

    /* A new file: one retry fewer, the same breaker options. */
    const char *next =
        "{\"Resilience\": {\"Retry\": {\"orders\": {\"MaxRetryAttempts\": 2}},"
        " \"CircuitBreakers\": {\"orders\": {\"ConsecutiveFailureThreshold\": 5,"
        "  \"FailureRatio\": 0.5, \"MinimumThroughput\": 10, \"SamplingDuration\": \"30s\","
        "  \"BreakDuration\": \"30s\"}},"
        " \"Pipelines\": {\"orders\": [\"TotalTimeout:10s\", \"Retry:orders\","
        "  \"CircuitBreaker:orders\", \"AttemptTimeout:2s\"]}}}";
    if (resil_config_parse(next, strlen(next), &c, NULL) != 0 ||
        resil_policies_apply(reg, c, &err) != 0)
        return 1;
    resil_config_free(c);
    resil_breaker *b;
    resil_policies_breaker(reg, "orders", &b);
    printf("reloaded (version %llu): breaker orders is %s\n",
           (unsigned long long)resil_policies_version(reg),
           resil_breaker_state_name(resil_breaker_state_of(b)));
    resil_breaker_free(b);
    call_orders(reg); /* rejected at once: the open breaker carried over */

    resil_policies_free(reg);
    resil_fake_clock_free(fc);
    return 0;
}
