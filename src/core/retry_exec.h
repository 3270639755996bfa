/*
 * retry_exec.h — the retry executor's steps, shared by the blocking loop
 * (retry.c) and the asynchronous execution (pipeline_async.c).
 *
 * The decision is resil_retry_after_attempt(); what surrounds it — which
 * outcome a stop leaves behind, how a token fired between attempts reads,
 * which record an attempt leaves, when on_retry runs — is written here
 * once. The blocking executor strings the steps together in a loop with a
 * sleep between attempts; the asynchronous one strings the same steps
 * together across a timer and a report. They are static inline so that
 * the blocking loop compiles to what it was before the split: no call and
 * no indirection added to its success path.
 */
#ifndef RESIL_RETRY_EXEC_H
#define RESIL_RETRY_EXEC_H

#include "cancel_inline.h"
#include "internal.h"
#include "resil/retry.h"

/* The step's begin and before, inline in the executors, which run them
 * on every execution; resil_retry_begin() and resil_retry_before_attempt()
 * are the same code. */
static inline resil_stop resil__retry_step_begin(resil_retry *r, const resil_retry_policy *p,
                                                 resil_instant now, resil_instant deadline,
                                                 bool idempotent)
{
    /* Field by field rather than memset: this runs once per execution on
     * the success path, where a block clear is measurable. */
    r->policy = p;
    r->attempt = 0;
    r->max_attempts = p->max_attempts;
    r->deadline = deadline;
    r->backoff.previous = 0;
    r->backoff.polly_previous = 0;
    r->ticket.last_cost = 0;
    if (p->max_total > 0)
    {
        resil_instant own = resil_dur_add(now, p->max_total);
        r->deadline = own < deadline ? own : deadline;
    }
    if (!idempotent && r->max_attempts > 1) {
        if (p->unsafe_mode == RESIL_UNSAFE_REFUSE)
            return RESIL_STOP_REFUSED;
        r->max_attempts = 1;
    }
    if (now >= r->deadline)
        return RESIL_STOP_DEADLINE;
    if (p->budget != NULL)
        resil_budget_on_request(p->budget);
    return RESIL_STOP_NONE;
}

static inline resil_stop resil__retry_step_before(resil_retry *r, bool cancelled)
{
    if (cancelled)
        return RESIL_STOP_CANCELLED;
    if (r->attempt < UINT32_MAX)
        r->attempt++;
    return RESIL_STOP_NONE;
}

/* resil_retry_after_attempt() without building its struct: the stop, and
 * the wait and its source when the stop is NONE (retry.c). */
resil_stop resil__retry_decide(resil_retry *r, const resil_attempt_ctx *ctx,
                               const resil_outcome *o, resil_instant now, resil_rng *rng,
                               resil_duration *wait, resil_wait_source *source);

typedef struct resil__retry_exec {
    const resil_retry_policy *policy;
    const resil_exec_opts *opts;
    resil_clock *clock;
    resil_instant now; /* the latest clock reading, when timed */
    bool timed;        /* something needs the time: read the clock as it goes */
    resil_retry step;
    resil_attempt_ctx ctx; /* the current attempt's, for the op and the hooks */
    resil_retry_result *out;
    /* Where the latest attempt's outcome is kept, the run's final one once
     * it stops: out->final, or (the asynchronous walk) the lane's outcome,
     * which the attempt's report has just written, so that deciding on it
     * takes no copy of 88 bytes into the level's result. */
    resil_outcome *final;
} resil__retry_exec;

/* A token fired for a deadline (a pipeline's total timeout) ends the run as
 * "deadline"; any other fire is the caller giving up. */
static inline resil_stop resil__rx_cancel_stop(const resil_cancel *c)
{
    return c != NULL && resil_cancel_reason(c) == RESIL_ETIMEDOUT ? RESIL_STOP_DEADLINE
                                                                  : RESIL_STOP_CANCELLED;
}

/* The caller's cancellation, whenever it is seen: kind Cancelled, code
 * RESIL_ECANCELED, so that a fallback, a breaker or a log reads it as the
 * caller giving up and not as the failure that happened to come before. */
static inline resil_outcome resil__rx_cancellation(const char *detail)
{
    return resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, detail);
}

/* The token fired between attempts (during the wait, or just after it). A
 * deadline keeps the last attempt's outcome: the call failed, and ran out
 * of time to try again. The caller's cancel replaces it: the caller gave up. */
static inline resil_stop resil__rx_stopped_between(resil__retry_exec *x, const resil_cancel *c)
{
    resil_stop s = resil__rx_cancel_stop(c);
    if (s == RESIL_STOP_CANCELLED && x->out->attempts > 0)
        *x->final = resil__rx_cancellation("cancelled while waiting to retry");
    return s;
}

/* Without a deadline no decision depends on the time, so the clock is read
 * only for what reports it: records, on_attempt, and elapsed when asked. */
static inline bool resil__rx_needs_time(const resil_retry_policy *p, const resil_exec_opts *o,
                                        resil_instant deadline)
{
    return (p->max_total > 0) | (deadline != RESIL_INSTANT_MAX) |
           (o->records != NULL && o->records_cap > 0) | (o->on_attempt != NULL) |
           o->measure_elapsed;
}

/* Start: the step begins at the first reading (none when nothing needs
 * the time; `untimed`: the caller knows nothing does). RESIL_STOP_NONE to
 * go on. */
static inline resil_stop resil__rx_begin_as(resil__retry_exec *x, const resil_retry_policy *p,
                                            const resil_exec_opts *opts,
                                            resil_retry_result *out, resil_instant *start,
                                            bool untimed)
{
    static const resil_exec_opts no_opts;
    x->policy = p;
    x->opts = opts != NULL ? opts : &no_opts;
    x->clock = x->opts->clock != NULL ? x->opts->clock : resil_clock_system();
    x->out = out;
    x->final = &out->final;
    resil_instant deadline = x->opts->deadline != 0 ? x->opts->deadline : RESIL_INSTANT_MAX;
    out->attempts = 0;
    out->records_len = 0;
    x->timed = !untimed && resil__rx_needs_time(p, x->opts, deadline);
    *start = x->now = x->timed ? resil_clock_now(x->clock) : 0;
    out->stop =
        resil__retry_step_begin(&x->step, p, *start, deadline, !x->opts->non_idempotent);
    return out->stop;
}

static inline resil_stop resil__rx_begin(resil__retry_exec *x, const resil_retry_policy *p,
                                         const resil_exec_opts *opts,
                                         resil_retry_result *out, resil_instant *start)
{
    return resil__rx_begin_as(x, p, opts, out, start, false);
}

/* Before an attempt: RESIL_STOP_NONE and the attempt's context is ready,
 * or the stop a fired token means. `look` false: the attempt has run
 * already (a pipeline's first, run_first in pipeline_strategies.c), and
 * its caller looked at the token before it. */
static inline resil_stop resil__rx_next_looking(resil__retry_exec *x, void *user, bool look)
{
    resil_cancel *cancel = x->opts->cancel;
    bool cancelled = look && resil__token_fired(cancel);
    if (resil__retry_step_before(&x->step, cancelled) != RESIL_STOP_NONE)
        return resil__rx_stopped_between(x, cancel);
    resil_attempt_ctx *ctx = &x->ctx;
    ctx->attempt = x->step.attempt;
    ctx->deadline = x->step.deadline;
    ctx->cancel = cancel;
    ctx->clock = x->clock;
    ctx->user = user;
    ctx->hedge = 0;
    ctx->trace = NULL;
    return RESIL_STOP_NONE;
}

static inline resil_stop resil__rx_next(resil__retry_exec *x, void *user)
{
    return resil__rx_next_looking(x, user, true);
}

/* Build the attempt's record only when someone reads it. */
static inline void resil__rx_keep_record(resil__retry_exec *x, resil_instant start,
                                         const resil_retry_decision *d)
{
    const resil_exec_opts *o = x->opts;
    bool store = o->records != NULL && x->out->records_len < o->records_cap;
    if (!store && o->on_attempt == NULL)
        return;
    resil_attempt_record rec = {.number = x->step.attempt, .outcome = *x->final,
                                .stop = d->stop, .wait = d->wait, .source = d->source,
                                .start = start, .duration = x->now - start};
    if (store)
        o->records[x->out->records_len++] = rec;
    if (o->on_attempt != NULL)
        o->on_attempt(&rec, o->on_attempt_ud);
}

/* The attempt begun at `start` left its outcome in *x->final: decide. */
static inline resil_retry_decision resil__rx_decide(resil__retry_exec *x, resil_instant start)
{
    x->out->attempts = x->step.attempt;
    if (x->timed)
        x->now = resil_clock_now(x->clock);
    resil_duration wait = 0;
    resil_wait_source source = RESIL_WAIT_NONE;
    /* The decision's first two rules, for the common case without a call:
     * a budget hears every result first; then a success stops the run,
     * unless the policy retries on results. */
    const resil_retry_policy *p = x->policy;
    resil_stop stop = x->final->kind == RESIL_SUCCESS && p->budget == NULL &&
                              !p->retry_on_results
                          ? RESIL_STOP_SUCCEEDED
                          : resil__retry_decide(&x->step, &x->ctx, x->final, x->now,
                                                x->opts->rng, &wait, &source);
    resil_retry_decision d = {.stop = stop, .wait = wait, .source = source};
    resil__rx_keep_record(x, start, &d);
    return d;
}

/* A retry was decided: on_retry runs before the wait. */
static inline void resil__rx_announce(resil__retry_exec *x, const resil_retry_decision *d,
                                      void *user)
{
    const resil_retry_policy *p = x->policy;
    if (p->on_retry == NULL)
        return;
    resil_retry_info info = {x->step.attempt, d->wait, d->source, x->final, &x->ctx};
    p->on_retry(&info, user, p->on_retry_ud);
}

/* After the wait (`slept` is the sleep's answer): RESIL_STOP_NONE to go
 * on with the next attempt. */
static inline resil_stop resil__rx_woke(resil__retry_exec *x, int slept)
{
    if (x->timed)
        x->now = resil_clock_now(x->clock);
    if (slept == RESIL_ECANCELED)
        return resil__rx_stopped_between(x, x->opts->cancel);
    return RESIL_STOP_NONE;
}

static inline resil_outcome resil__rx_not_run(resil_stop s)
{
    if (s == RESIL_STOP_REFUSED)
        return resil_fail(RESIL_REJECTED, RESIL_ENOTIDEMPOTENT, "refused: not idempotent");
    if (s == RESIL_STOP_DEADLINE)
        return resil_fail(RESIL_REJECTED, RESIL_ETIMEDOUT,
                          "deadline passed before the first attempt");
    return resil__rx_cancellation("cancelled before the first attempt");
}

/* The run stopped with `s`: the result's last fields. */
static inline void resil__rx_end(resil__retry_exec *x, resil_stop s, resil_instant start)
{
    resil_retry_result *out = x->out;
    out->stop = s;
    if (out->attempts == 0)
        *x->final = resil__rx_not_run(out->stop);
    out->elapsed = x->now - start;
}

#endif
