/*
 * async_uv.c — 1,000 concurrent calls on one thread: the standard
 * pipeline's retries, timeouts and circuit breaker on a libuv loop.
 *
 * Each call's "backend" is a uv timer standing for a socket: it answers
 * after 1–20 ms, fails one time in four (503), and hangs one time in
 * twenty, which the 50 ms attempt timeout cuts short through the cancel
 * callback. resil waits out its backoffs on the same loop, so the thread
 * never blocks, and the summary shows what happened to the 1,000 calls.
 *
 *   cc async_uv.c $(pkg-config --cflags --libs resil-uv) && ./a.out
 */
#include <stdio.h>
#include <stdlib.h>

#include "resil/uv.h"

#define CALLS 1000

typedef struct call {
    uv_timer_t io;           /* the pretend socket */
    resil_attempt *attempt;  /* the attempt in flight */
    resil_outcome answer;    /* what the backend will say */
    unsigned seed;
} call;

typedef struct summary {
    int finished, succeeded, failed, rejected, timed_out, attempts;
    resil_uv *uv;
} summary;

static summary totals;

static void answered(uv_timer_t *t)
{
    call *c = t->data;
    resil_attempt *a = c->attempt;
    c->attempt = NULL;
    resil_attempt_done(a, &c->answer);
}

/* The attempt timeout fired: stop the I/O and say so. */
static void stop_io(resil_attempt *a, void *ud)
{
    call *c = ud;
    uv_timer_stop(&c->io);
    c->attempt = NULL;
    resil_outcome o = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "stopped");
    resil_attempt_done(a, &o);
}

static void start_attempt(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    unsigned roll = (unsigned)rand_r(&c->seed) % 100;
    uint64_t ms = 1 + (unsigned)rand_r(&c->seed) % 20;
    c->answer = resil_ok();
    if (roll < 25)
        c->answer = resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    if (roll >= 95)
        ms = 10000; /* hangs: the attempt timeout cancels it */
    c->attempt = a;
    resil_attempt_on_cancel(a, stop_io, c);
    uv_timer_start(&c->io, answered, ms, 0);
}

static void free_call(uv_handle_t *h) { free(h->data); }

static void finished(const resil_pipeline_result *res, void *ud)
{
    call *c = ud;
    totals.attempts += (int)res->attempts;
    if (res->outcome.kind == RESIL_SUCCESS)
        totals.succeeded++;
    else if (res->outcome.kind == RESIL_REJECTED)
        totals.rejected++;
    else if (res->outcome.kind == RESIL_TIMEOUT)
        totals.timed_out++;
    else
        totals.failed++;
    uv_close((uv_handle_t *)&c->io, free_call);
    if (++totals.finished == CALLS)
        resil_uv_close(totals.uv);
}

static resil_pipeline *pipeline(resil_loop *loop)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.name = "async-demo";
    o.clock = resil_loop_clock(loop);
    o.retry.backoff.base = RESIL_MS(10);
    o.attempt.timeout = RESIL_MS(50);
    o.total.timeout = RESIL_S(2);
    o.breaker.minimum_throughput = 200;
    o.breaker.failure_ratio = 0.5;
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    if (resil_pipeline_standard(&o, &p, &err) != 0)
        fprintf(stderr, "pipeline: %s\n", err.message);
    return p;
}

int main(void)
{
    uv_loop_t *loop = uv_default_loop();
    if (resil_uv_new(loop, &totals.uv) != 0)
        return 1;
    resil_pipeline *p = pipeline(resil_uv_loop(totals.uv));
    if (p == NULL)
        return 1;
    for (int i = 0; i < CALLS; i++) {
        call *c = calloc(1, sizeof *c);
        c->seed = (unsigned)i * 2654435761u;
        uv_timer_init(loop, &c->io);
        c->io.data = c;
        resil_call opts;
        resil_call_default(&opts);
        opts.user = c;
        resil_pipeline_start(p, resil_uv_loop(totals.uv), start_attempt, &opts, finished, c, NULL);
    }
    uint64_t t0 = uv_hrtime();
    uv_run(loop, UV_RUN_DEFAULT);
    double ms = (double)(uv_hrtime() - t0) / 1e6;
    printf("%d calls: %d succeeded, %d failed, %d timed out, %d rejected; "
           "%d attempts in %.0f ms on one thread\n",
           CALLS, totals.succeeded, totals.failed, totals.timed_out, totals.rejected,
           totals.attempts, ms);
    resil_pipeline_free(p);
    uv_loop_close(loop);
    return totals.finished == CALLS ? 0 : 1;
}
