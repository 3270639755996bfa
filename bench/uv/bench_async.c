/*
 * bench_async.c — what an asynchronous execution costs on libuv, beside
 * the blocking executor and beside libuv itself, in the same run.
 *
 *  - async_standard_success: the standard pipeline started on a libuv
 *    loop with an operation that reports at once (the executor's own
 *    cost: enter and leave steps, the two timeouts' places reserved on the
 *    loop (nothing waits, so neither timer is armed), the execution's
 *    block taken from the loop's spares and given back), beside
 *    pipeline_standard_success, the blocking executor on the same
 *    pipeline, and uv_idle_callback, one pass of the loop running one
 *    callback and no timer.
 *  - async_standard_success_token: the same with a cancel token in the
 *    call (never fired), beside async_standard_success: what watching
 *    the caller's token costs (its watch linked and unlinked).
 *  - async_one_retry_uv_timer: a retry pipeline whose operation fails
 *    once and then succeeds, the retry's wait (zero) spent on a real uv
 *    timer: start, the failure, the wait's timer through one loop pass,
 *    the second attempt, done. aws-c-io's standard strategy does the same
 *    on its epoll loop in two ticks (docs/performance.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "resil/uv.h"

static resil_uv *host;
static uint64_t finished;

static resil_outcome succeed(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static void report_ok(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    (void)ctx;
    resil_outcome o = resil_ok();
    resil_attempt_done(a, &o);
}

static void count(const resil_pipeline_result *res, void *ud)
{
    (void)ud;
    finished += res->outcome.kind == RESIL_SUCCESS;
}

static resil_pipeline *standard(resil_clock *clock)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.clock = clock;
    resil_pipeline *p = NULL;
    if (resil_pipeline_standard(&o, &p, NULL) != 0)
        fprintf(stderr, "cannot build the pipeline\n");
    return p;
}

static void blocking(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    uint64_t ok = 0;
    resil_pipeline_result r;
    for (uint64_t i = 0; i < iters; i++) {
        resil_pipeline_execute(p, succeed, NULL, &r);
        ok += r.outcome.kind == RESIL_SUCCESS;
    }
    bench_consume(ok);
}

static void async_success(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    for (uint64_t i = 0; i < iters; i++)
        resil_pipeline_start(p, resil_uv_loop(host), report_ok, NULL, count, NULL, NULL);
    bench_consume(finished);
}

static void async_success_token(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    resil_cancel token;
    if (resil_cancel_init(&token, NULL) != 0)
        return;
    resil_call call;
    resil_call_default(&call);
    call.cancel = &token;
    for (uint64_t i = 0; i < iters; i++)
        resil_pipeline_start(p, resil_uv_loop(host), report_ok, &call, count, NULL, NULL);
    resil_cancel_destroy(&token);
    bench_consume(finished);
}

static void fail_then_ok(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    resil_outcome o = ctx->attempt == 1 ? resil_fail(RESIL_TRANSIENT, 503, "busy") : resil_ok();
    resil_attempt_done(a, &o);
}

static void mark_done(const resil_pipeline_result *res, void *ud)
{
    bool *done = ud;
    *done = true;
    finished += res->attempts == 2;
}

static void async_one_retry(void *ud, uint64_t iters)
{
    const resil_pipeline *p = ud;
    for (uint64_t i = 0; i < iters; i++) {
        bool done = false;
        resil_pipeline_start(p, resil_uv_loop(host), fail_then_ok, NULL, mark_done, &done, NULL);
        while (!done)
            uv_run(uv_default_loop(), UV_RUN_ONCE);
    }
    bench_consume(finished);
}

static resil_pipeline *retry_once(resil_clock *clock)
{
    resil_pipeline_builder *b;
    if (resil_pipeline_builder_new("retry-once", &b, NULL) != 0)
        return NULL;
    resil_pipeline_builder_clock(b, clock);
    resil_retry_policy r;
    resil_retry_policy_default(&r);
    r.max_attempts = 2;
    r.backoff.kind = RESIL_BACKOFF_CONSTANT;
    r.backoff.base = 0;
    r.backoff.jitter = RESIL_JITTER_NONE;
    resil_pipeline_add_retry(b, &r);
    resil_pipeline *p = NULL;
    if (resil_pipeline_build(b, &p, NULL) != 0)
        fprintf(stderr, "cannot build the retry pipeline\n");
    resil_pipeline_builder_free(b);
    return p;
}

static uint64_t idle_left;

static void on_idle(uv_idle_t *h)
{
    if (--idle_left == 0)
        uv_idle_stop(h);
}

static void idle_callbacks(void *ud, uint64_t iters)
{
    uv_idle_t *idle = ud;
    idle_left = iters;
    uv_idle_start(idle, on_idle);
    while (idle_left > 0)
        uv_run(uv_default_loop(), UV_RUN_ONCE);
}

/* `bench_async NAME N`: N operations of one benchmark, untimed, for
 * callgrind (instructions per operation from two values of N). */
static int run_counted(const char *name, uint64_t n, resil_pipeline *p, resil_pipeline *rp,
                       uv_idle_t *idle)
{
    if (strcmp(name, "uv_idle_callback") == 0)
        idle_callbacks(idle, n);
    else if (strcmp(name, "pipeline_standard_success") == 0)
        blocking(p, n);
    else if (strcmp(name, "async_standard_success") == 0)
        async_success(p, n);
    else if (strcmp(name, "async_standard_success_token") == 0)
        async_success_token(p, n);
    else if (strcmp(name, "async_one_retry_uv_timer") == 0)
        async_one_retry(rp, n);
    else
        return 2;
    return 0;
}

int main(int argc, char **argv)
{
    uv_loop_t *loop = uv_default_loop();
    if (resil_uv_new(loop, &host) != 0)
        return 1;
    resil_clock *clock = resil_loop_clock(resil_uv_loop(host));
    resil_pipeline *p = standard(clock);
    uv_idle_t idle;
    uv_idle_init(loop, &idle);
    if (argc == 3) {
        resil_pipeline *rp = retry_once(clock);
        int rc = run_counted(argv[1], strtoull(argv[2], NULL, 10), p, rp, &idle);
        uv_run(loop, UV_RUN_NOWAIT);
        uv_close((uv_handle_t *)&idle, NULL);
        resil_uv_close(host);
        uv_run(loop, UV_RUN_DEFAULT);
        resil_pipeline_free(rp);
        resil_pipeline_free(p);
        uv_loop_close(loop);
        return rc;
    }

    bench_result uv_cb = bench_run("uv_idle_callback", idle_callbacks, &idle);
    bench_result block = bench_run("pipeline_standard_success", blocking, p);
    bench_result async = bench_run("async_standard_success", async_success, p);
    char extra[160];
    snprintf(extra, sizeof extra, "blocking_ns_per_op=%.2f ratio_to_blocking=%.2f",
             block.ns_per_op, async.ns_per_op / block.ns_per_op);
    bench_report(async, uv_cb, extra);
    bench_report(block, uv_cb, NULL);
    bench_result token = bench_run("async_standard_success_token", async_success_token, p);
    bench_report(token, async, NULL);

    resil_pipeline *rp = retry_once(clock);
    bench_result retry = bench_run("async_one_retry_uv_timer", async_one_retry, rp);
    bench_report(retry, uv_cb, NULL);
    resil_pipeline_free(rp);


    uv_close((uv_handle_t *)&idle, NULL);
    resil_uv_close(host);
    uv_run(loop, UV_RUN_DEFAULT);
    resil_pipeline_free(p);
    uv_loop_close(loop);
    return 0;
}
