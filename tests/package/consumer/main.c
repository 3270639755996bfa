/*
 * main.c — the CMake consumer's program: checks that the header it compiled
 * against and the library it runs against are the same release, then runs a
 * small retry on the fake clock, so it finishes at once and prints a fixed
 * line whichever library (shared or static) it was linked with.
 */
#include <stdio.h>
#include <string.h>

#include <resil.h>

static resil_outcome fail_twice(resil_attempt_ctx *ctx)
{
    int *calls = ctx->user;
    if (++*calls < 3)
        return resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    return resil_ok();
}

int main(void)
{
    if (strcmp(resil_version(), RESIL_VERSION_STRING) != 0) {
        fprintf(stderr, "header says %s, library says %s\n", RESIL_VERSION_STRING,
                resil_version());
        return 1;
    }

    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    resil_retry_policy policy;
    resil_retry_policy_default(&policy);
    resil_exec_opts opts = {.clock = resil_fake_clock_clock(fc)};
    int calls = 0;
    resil_retry_result res;
    resil_err err;
    int rc = resil_retry_execute(&policy, &opts, fail_twice, &calls, &res, &err);
    resil_fake_clock_free(fc);
    if (rc != 0) {
        fprintf(stderr, "resil_retry_execute: %s\n", err.message);
        return 1;
    }
    printf("resil %s: %s after %u attempts\n", resil_version(), resil_stop_name(res.stop),
           res.attempts);
    return res.stop == RESIL_STOP_SUCCEEDED ? 0 : 1;
}
