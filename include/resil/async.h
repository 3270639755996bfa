/*
 * async.h — executing a pipeline on an event loop.
 *
 * resil_pipeline_start() runs the same pipeline resil_pipeline_execute()
 * runs, with the same decisions and the same result, but never blocks: a
 * retry's wait, a rate limiter's wait, a bulkhead's queue and the timeouts
 * are timers on the loop that hosts it (loop.h), and the operation is
 * *started* rather than called. It is handed an attempt handle and reports
 * its outcome through it later — from the loop's thread, typically in the
 * callback of the I/O it started (a curl transfer's completion, a socket's
 * readiness), or from any other thread (a worker pool's job). When the
 * execution ends, `done` receives the result resil_pipeline_execute()
 * would have returned.
 *
 * Cancelling. An attempt is cancelled when its timeout's timer fires, when
 * it loses a hedge, or when the execution is cancelled (resil_exec_cancel()
 * or the caller's token): its token (ctx->cancel) fires, and the callback
 * the operation registered with resil_attempt_on_cancel() runs on the
 * loop's thread, so that the operation can stop its I/O at once. Every
 * started attempt still reports exactly once, cancelled or not (a
 * cancelled operation reports RESIL_CANCELLED, or what it had); resil
 * waits for that report, as the blocking executor waits for the operation
 * to return — except from a hedge's losers, whose reports are taken and
 * dropped after the execution has moved on. The cancel callback may run
 * after the operation reported from another thread but before the loop
 * took the report: it must then do nothing.
 *
 * Memory. An execution keeps everything it has in flight (timers, tokens,
 * the retry's state, the attempt handles, the result) in one block, sized
 * by the pipeline, which goes back to its loop when the last of `done` and
 * the attempts' reports has happened; the loop hands it to the next
 * execution (resil_loop_drain() frees what it keeps). In the steady state
 * an execution allocates nothing.
 *
 * Threads. Start, cancel and every callback (the operation, `done`, the
 * hooks and listeners of the pipeline) happen on the loop's thread; only
 * resil_attempt_done() may be called from any thread. A pipeline may host
 * blocking and asynchronous executions at once, on any number of loops;
 * its shared objects (breakers, bulkheads, limiters, budgets) are
 * thread-safe as ever, and a bulkhead's queue holds blocking and
 * asynchronous waiters in one FIFO. The pipeline's clock should be the
 * loop's (resil_loop_clock()), so that decisions and timers read one time.
 *
 * A caller's own token (call->cancel) may be fired from any thread: the
 * fire is posted to the loop and ends a wait or tells a running attempt
 * as resil_exec_cancel() does, with the token's reason (RESIL_ETIMEDOUT
 * stops a retry at a deadline, as on the blocking path). The token is
 * watched until `done` is called; after that it is the caller's again and
 * may be destroyed. The fire calls the loop's post, so it is not for a
 * signal handler (take signals with sigwaitinfo() or a signalfd). What
 * differs from the blocking executor: a bulkhead of another
 * implementation is tried without queueing.
 *
 * Lifetimes. An execution is in flight from its start until `done` has
 * run and every attempt it started has reported (a hedge's loser may
 * report after `done`). Its pipeline and loop must outlive that:
 * resil_pipeline_free() does not wait for asynchronous executions, and
 * freeing the pipeline or closing the loop (resil_uv_close()) earlier is
 * undefined. `done` itself may free the pipeline of an execution without
 * hedging, and may start new executions on the same loop.
 */
#ifndef RESIL_ASYNC_H
#define RESIL_ASYNC_H

#include "loop.h"
#include "pipeline.h"

RESIL_BEGIN_DECLS

typedef struct resil_exec resil_exec;
typedef struct resil_attempt resil_attempt;

/* Start one attempt: begin the work described by ctx (ctx->user is the
 * call's user, ctx->deadline and ctx->cancel its limits) and report it with
 * resil_attempt_done(a, ...) — now or later, from any thread. `ctx` is
 * valid until the report. */
typedef void (*resil_async_op_fn)(resil_attempt *a, const resil_attempt_ctx *ctx);
/* The execution ended: `res` (valid during the call) is what
 * resil_pipeline_execute() returns; `ud` is start's done_ud. */
typedef void (*resil_async_done_fn)(const resil_pipeline_result *res, void *ud);
/* The attempt must stop: its token has fired (the reason is
 * resil_cancel_reason(ctx->cancel)). Runs on the loop's thread. */
typedef void (*resil_attempt_cancel_fn)(resil_attempt *a, void *ud);

/*
 * Start `op` through `p` on `loop`. Returns 0 and, when `out` is not NULL,
 * the execution's handle in *out (valid until `done` has run); or
 * RESIL_EINVAL for NULL arguments, RESIL_ENOMEM, or the registry's error
 * when the key's breaker cannot be had (nothing started, `done` not
 * called). `done` may run before this returns (a rejection, an operation
 * that reports at once). `call` is copied; the strings and the records
 * array it points at must live until `done`. On the loop's thread.
 */
RESIL_API int resil_pipeline_start(const resil_pipeline *p, resil_loop *loop,
                                   resil_async_op_fn op, const resil_call *call,
                                   resil_async_done_fn done, void *done_ud, resil_exec **out);

/* Report the attempt's outcome, exactly once, from any thread. `a` must
 * not be used afterwards: a second report is undefined (the handle is
 * reused by the lane's next attempt and its memory by later executions).
 * A NULL `a` or `o` reports nothing: the attempt is still waited for. */
RESIL_API void resil_attempt_done(resil_attempt *a, const resil_outcome *o);
/* Ask to be told when the attempt must stop (see above). Call it from the
 * operation, on the loop's thread, before reporting; a later call is
 * undefined. `fn` runs at most once per attempt, however many cancels
 * and timeouts reach it; a token already fired when the operation
 * returns calls it then. A NULL `fn` asks for nothing. */
RESIL_API void resil_attempt_on_cancel(resil_attempt *a, resil_attempt_cancel_fn fn, void *ud);

/* Cancel the execution: every wait ends and every running attempt is
 * told; `done` follows with a cancelled result once the attempts have
 * reported. On the loop's thread, until `done` has run: inside `done`,
 * and a second time, it does nothing; after `done`, or from another
 * thread (fire the call's token there instead), it is undefined. From
 * inside the operation, the cancel callback's report waits for the
 * operation to return. NULL does nothing. */
RESIL_API void resil_exec_cancel(resil_exec *x);

RESIL_END_DECLS

#endif
