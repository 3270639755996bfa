/*
 * quickstart.c — the README's 30-second example, kept compiling here.
 * A flaky operation fails twice with a transient error, then succeeds; the
 * policy retries it with exponential backoff and full jitter, within a
 * 10-second budget.
 */
#include <stdio.h>

#include <resil.h>

typedef struct flaky {
    int calls;
} flaky;

static resil_outcome fetch(resil_attempt_ctx *ctx)
{
    flaky *f = ctx->user;
    if (++f->calls < 3)
        return resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    return resil_ok();
}

int main(void)
{
    resil_retry_policy policy;
    resil_retry_policy_default(&policy); /* 3 attempts, exponential from 1 s, full jitter */
    policy.max_attempts = 5;
    policy.backoff.base = RESIL_MS(100);
    policy.max_total = RESIL_S(10);

    flaky state = {0};
    resil_retry_result res;
    resil_retry_execute(&policy, NULL, fetch, &state, &res, NULL);
    printf("%s after %u attempts\n", resil_stop_name(res.stop), res.attempts);
    return res.stop == RESIL_STOP_SUCCEEDED ? 0 : 1;
}
