/*
 * pipeline_steps.h — each strategy's decision on the way in and its work
 * on the way out, shared by the two ways a pipeline executes.
 *
 * The blocking walk (pipeline_strategies.c) is enter → resil__chain() →
 * leave inside one stack frame per strategy; the asynchronous execution
 * (pipeline_async.c) calls the same enter, lets the levels below run
 * across timers and reports, and calls the same leave when their outcome
 * arrives. What differs between the two is only how a wait is spent
 * (a sleep, or a timer), so every rule — who rejects, with which words,
 * what a timeout means, what a breaker records, when a fallback answers —
 * is written here once. The steps are static inline so that the blocking
 * path compiles to the walk it was before the split.
 */
#ifndef RESIL_PIPELINE_STEPS_H
#define RESIL_PIPELINE_STEPS_H

#include "breaker_hot.h"
#include "cancel_inline.h"
#include "pipeline_internal.h"

static inline const resil__node *resil__node_at(const resil__run *r, size_t i)
{
    return &r->p->nodes[i];
}

void resil__report_rejection(const resil__run *r, resil_event_type t, resil_strategy_kind k,
                             const resil__frame *f, const resil_outcome *o);

static inline void resil__cancelled(const char *detail, resil_outcome *out)
{
    *out = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, detail);
}

/* ---- rate limiter ----------------------------------------------------------- */

/* How long a call may wait for a permit: the strategy's max_wait, never
 * past the frame's deadline. 0 (no waiting asked for, or no time left)
 * takes a permit now or is refused with the limiter's retry-after, so a
 * limiter reached with no time left admits exactly what one that never
 * waits admits. */
static inline resil_duration resil__rate_wait(const resil__node *n, const resil__frame *f)
{
    if (n->rate_wait == 0 || f->deadline == RESIL_INSTANT_MAX)
        return n->rate_wait;
    resil_duration left = resil_dur_sub(f->deadline, f->now);
    if (left <= 0)
        return 0;
    return left < n->rate_wait ? left : n->rate_wait;
}

/* The permit without waiting (resil__rate_wait 0). */
static inline int resil__rate_try(const resil__node *n, const resil__frame *f,
                                  resil_duration *hint)
{
    return n->same_clock ? resil_ratelimit_try_acquire_at(n->ratelimit, 1, f->now, hint)
                         : resil_ratelimit_try_acquire(n->ratelimit, 1, hint);
}

/* A wait for admission may have ended without it (its timeout, the
 * caller's cancel): the execution's elapsed time runs to that end, as an
 * admitted call's runs past its wait. Such a refusal takes one reading
 * even when it came at once (a fired token, a rate limiter's wait past its
 * budget); a refusal for want of room (RESIL_EREJECTED) reads nothing. */
static inline void resil__refused_after_wait(const resil__run *r, int rc)
{
    if (rc == RESIL_ETIMEDOUT || rc == RESIL_ECANCELED)
        resil__read_now(r);
}

/* The limiter said `rc`: true to go on, else *out says why not. */
static inline bool resil__rate_admit(const resil__run *r, const resil__frame *f, int rc,
                                     resil_duration hint, resil_outcome *out)
{
    if (rc == 0)
        return true;
    resil__refused_after_wait(r, rc);
    if (rc == RESIL_ECANCELED) {
        resil__cancelled("cancelled waiting for the rate limiter", out);
        return false;
    }
    resil__reject(r, RESIL_EVENT_RATE_LIMITED, RESIL_STRATEGY_RATE_LIMITER, f, "rate limited",
                  rc == RESIL_EREJECTED ? hint : RESIL_NO_HINT, out);
    return false;
}

/* ---- bulkhead ------------------------------------------------------------------ */

static inline bool resil__bulkhead_admit(const resil__run *r, const resil__frame *f, int rc,
                                         resil_outcome *out)
{
    if (rc == 0)
        return true;
    resil__refused_after_wait(r, rc);
    if (rc == RESIL_ECANCELED) {
        resil__cancelled("cancelled waiting for the bulkhead", out);
        return false;
    }
    resil__reject(r, RESIL_EVENT_BULKHEAD_REJECTED, RESIL_STRATEGY_BULKHEAD, f,
                  rc == RESIL_ETIMEDOUT ? "bulkhead queue timeout" : "bulkhead full",
                  RESIL_NO_HINT, out);
    return false;
}

/* ---- timeouts -------------------------------------------------------------------- */

static inline resil_duration resil__timeout_for(const resil__node *n, const resil__run *r)
{
    if (n->timeout.per_operation != NULL && r->operation != NULL)
        return resil_timeouts_get(n->timeout.per_operation, r->operation);
    return n->timeout.timeout;
}

/* Make the level's token and the frame below it: false with *out when the
 * token cannot be made. */
static inline bool resil__timeout_enter(const resil__run *r, const resil__node *n,
                                        const resil__frame *f, resil_cancel *tok,
                                        resil__frame *inner, resil_outcome *out)
{
    resil_duration t = resil__timeout_for(n, r);
    resil_instant deadline = resil__earlier(f->deadline, resil__add_sat(f->now, t));
    if (resil__cancel_init(tok, f->cancel) != 0) {
        *out = resil_fail(RESIL_PERMANENT, RESIL_ESYS, "cannot make a cancel token");
        return false;
    }
    *inner = (resil__frame){f->attempt, f->hedge, f->now, deadline, tok, tok, f->reading};
    return true;
}

void resil__timeout_judge(const resil__run *r, const resil__node *n, const resil__frame *f,
                          const resil__frame *inner, resil_outcome *out);

static inline void resil__timeout_leave(const resil__run *r, const resil__node *n,
                                        const resil__frame *f, const resil__frame *inner,
                                        resil_outcome *out)
{
    if (out->kind != RESIL_SUCCESS) {
        /* Copies for the call out of line: a frame whose address leaves
         * the walk must live in memory, where the blocking walk's inlined
         * levels otherwise keep their frames in registers. */
        resil__frame outer = *f, below = *inner;
        resil__timeout_judge(r, n, &outer, &below, out);
    }
    resil__cancel_destroy(inner->cancel);
}

/* ---- breaker ---------------------------------------------------------------------------- */

void resil__breaker_refuse(const resil__run *r, const resil__frame *f,
                           const resil_breaker_permit *p, resil_outcome *out);

/* The breaker's admission and its record, inline (breaker_hot.h): the
 * level's whole cost on a closed success is theirs and the clock's. The
 * `_to` forms take the breaker the attempt meets (resil__breaker_of),
 * which the blocking walk finds once for both. */
static inline bool resil__breaker_enter_to(const resil__run *r, const resil__frame *f,
                                           resil_breaker *b, resil_breaker_permit *permit,
                                           resil_outcome *out)
{
    if (resil__breaker_admit(b, permit) != RESIL_EREJECTED)
        return true;
    resil__frame at = *f; /* a copy: see resil__timeout_leave */
    resil__breaker_refuse(r, &at, permit, out);
    return false;
}

static inline bool resil__breaker_enter(const resil__run *r, const resil__frame *f,
                                        resil_breaker_permit *permit, resil_outcome *out)
{
    return resil__breaker_enter_to(r, f, resil__breaker_of(r, f->hedge), permit, out);
}

static RESIL__ALWAYS_INLINE void resil__breaker_leave_to(const resil__run *r, size_t i,
                                                         const resil__frame *f, resil_breaker *b,
                                                         resil_breaker_permit *permit,
                                                         const resil_outcome *out)
{
    resil_breaker_result verdict;
    if (r->p->classify == resil_pipeline_classify_default) {
        verdict = resil__classify_default(out);
    } else {
        resil_attempt_ctx ctx = resil__frame_ctx(r, f);
        verdict = r->p->classify(out, &ctx, r->p->classify_ud);
    }
    if (!resil__node_at(r, i)->owned || f->reading == NULL) {
        resil__breaker_record_known(b, permit, verdict, RESIL__BRK_READ_CLOCK);
        return;
    }
    /* Our own breaker reads our clock: read it once for both of us. */
    f->reading->now = resil__pipeline_now(r->p);
    f->reading->fresh = true;
    resil__breaker_record_known(b, permit, verdict, resil__breaker_known(f->reading->now));
}

static inline void resil__breaker_leave(const resil__run *r, size_t i, const resil__frame *f,
                                        resil_breaker_permit *permit, const resil_outcome *out)
{
    resil__breaker_leave_to(r, i, f, resil__breaker_of(r, f->hedge), permit, out);
}

/* ---- fallback --------------------------------------------------------------------------- */

void resil__fallback_answer(const resil__run *r, size_t i, const resil__frame *f,
                            resil_outcome *out);

static inline void resil__fallback_leave(const resil__run *r, size_t i, const resil__frame *f,
                                         resil_outcome *out)
{
    if (out->kind != RESIL_SUCCESS)
        resil__fallback_answer(r, i, f, out);
}

/* ---- degradation gate ------------------------------------------------------------------- */

void resil__degrade_shed(const resil__run *r, const resil__node *n, const resil__frame *f,
                         resil_outcome *out);

static inline bool resil__degrade_enter(const resil__run *r, size_t i, const resil__frame *f,
                                        resil_outcome *out)
{
    const resil__node *n = resil__node_at(r, i);
    if (resil_degrade_admit(n->degrade, r->priority) != RESIL_EREJECTED)
        return true;
    resil__degrade_shed(r, n, f, out);
    return false;
}

static inline void resil__degrade_leave(const resil__run *r, size_t i, const resil_outcome *out)
{
    if (out->kind != RESIL_CANCELLED)
        resil_degrade_record(resil__node_at(r, i)->degrade, out->kind == RESIL_SUCCESS);
}

/* ---- hedging -------------------------------------------------------------------------------- */

/* What the hedging strategy decides, whoever runs the attempts (a worker
 * pool, hedge.c; lanes on a loop, pipeline_async.c): when the next hedge
 * is due, whether the budget pays for it, which outcome wins, what a
 * cancel or a deadline leaves, what the result records. */
typedef struct resil__hedger {
    const resil__run *r;
    const resil__frame *f;
    const resil__node *n;
    uint32_t next; /* index of the next hedge to launch */
    bool no_more;  /* budget denied or nowhere to run it: stop launching */
    resil_instant last_launch;
    resil_instant primary_start;
    resil_budget_ticket ticket;
    resil_outcome last_failure;
} resil__hedger;

void resil__hedger_init(resil__hedger *h, const resil__run *r, size_t i, const resil__frame *f);
bool resil__hedger_may(const resil__hedger *h);
/* Launch the next hedge now (after a failure, or its delay is over)? */
bool resil__hedger_due(const resil__hedger *h, bool failed, resil_instant now);
/* The budget's word on the next hedge; false (and no more) when denied. */
bool resil__hedger_pay(resil__hedger *h, bool after_failure, resil_instant now);
void resil__hedger_launched(resil__hedger *h, resil_instant now);
/* The instant to look again without news: the next hedge's, or the deadline. */
resil_instant resil__hedger_alarm(const resil__hedger *h);
bool resil__hedger_acceptable(const resil__hedger *h, resil_cancel *token, uint32_t index,
                              const resil_outcome *o);
/* The race ends unfinished: the outcome, and the reason to fire every
 * attempt's token with. */
resil_outcome resil__hedger_stopped(const resil__hedger *h, int *reason);
void resil__hedger_note(const resil__run *r, uint32_t launched, int winner);
/* Hedge `index` (>= 1) of attempt `attempt`, launched at `launched`, ended
 * now with `o`: reported as HEDGE_ENDED, the end of its span. Both
 * executors call it where the hedged attempt comes back. */
void resil__hedge_ended(const resil__run *r, uint32_t attempt, uint32_t index,
                        resil_instant launched, const resil_outcome *o);

/* ---- adaptive limiter ------------------------------------------------------------------- */

void resil__limiter_refuse(const resil__run *r, const resil__frame *f, int rc,
                           resil_outcome *out);
resil_instant resil__limiter_end_of_call(const resil__run *r, const resil__frame *f);

static inline void resil__limiter_leave(const resil__run *r, const resil__node *n,
                                        const resil__frame *f, resil_limiter_ticket *t,
                                        const resil_outcome *out)
{
    resil_attempt_ctx ctx = resil__frame_ctx(r, f);
    resil_verdict v = r->p->classify(out, &ctx, r->p->classify_ud);
    if (n->same_clock)
        resil_limiter_release_at(t, v, resil__limiter_end_of_call(r, f));
    else
        resil_limiter_release(t, v);
}

/* ---- client-side throttling ------------------------------------------------------------- */

/* The call counts in the bucket of its start, *start. */
static inline bool resil__throttle_enter(const resil__run *r, const resil__node *n,
                                         const resil__frame *f, resil_instant *start,
                                         resil_outcome *out)
{
    *start = n->same_clock ? f->now : resil_clock_now(resil__throttle_clock(n->throttle));
    if (resil_throttle_admit_at(n->throttle, *start) != RESIL_EREJECTED)
        return true;
    resil__reject(r, RESIL_EVENT_THROTTLED, RESIL_STRATEGY_THROTTLE, f, "throttled by the client",
                  RESIL_NO_HINT, out);
    return false;
}

static inline void resil__throttle_leave(const resil__run *r, const resil__node *n,
                                         const resil__frame *f, resil_instant start,
                                         const resil_outcome *out)
{
    resil_attempt_ctx ctx = resil__frame_ctx(r, f);
    resil_throttle_record_at(n->throttle, r->p->classify(out, &ctx, r->p->classify_ud), start);
}

/* ---- chaos -------------------------------------------------------------------------------- */

static inline bool resil__is_chaos(resil_strategy_kind k)
{
    return k >= RESIL_STRATEGY_CHAOS_FAULT && k <= RESIL_STRATEGY_CHAOS_BEHAVIOR;
}

void resil__chaos_report(const resil__run *r, const resil__node *n, const resil__frame *f,
                         const resil_outcome *o);
/* The injected behaviour, run before the rest of the walk. */
void resil__chaos_behave(const resil__run *r, const resil__node *n, const resil__frame *f);

static inline void resil__chaos_cut(resil_outcome *out)
{
    *out = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "cancelled during injected latency");
}

/* The frame below a level that spent time: a fresh reading, and none for
 * the retry above to take. */
static inline void resil__frame_later(const resil__run *r, const resil__frame *f,
                                      resil__frame *inner)
{
    *inner = *f;
    inner->now = resil__read_now(r);
    if (f->reading != NULL)
        f->reading->fresh = false;
}

/* ---- a retry's first attempt without the executor ----------------------------------
 *
 * When nothing the retry executor would do for a success is asked for — no
 * budget to hear it, no time budget, no retry on results, no listener
 * (first_alone, fixed at build), a call that may be retried, a deadline
 * not yet passed and a token not fired — both walks run the first attempt
 * directly: it sees exactly the frame the executor would give it
 * (resil__retry_first_frame), and a success leaves exactly the executor's
 * result and record (resil__retry_first_succeeded). A failure is then the
 * executor's, which takes that attempt as its first. */
static inline bool resil__retry_first_alone(const resil__run *r, const resil__node *n,
                                            const resil__frame *f)
{
    resil_instant deadline = f->deadline != 0 ? f->deadline : RESIL_INSTANT_MAX;
    return n->first_alone && !r->non_idempotent && f->now < deadline &&
           !resil__token_fired(f->cancel);
}

/* The first attempt's frame, its end read into *end (not yet: stale). */
static inline resil__frame resil__retry_first_frame(const resil__frame *f, resil__reading *end)
{
    resil_instant deadline = f->deadline != 0 ? f->deadline : RESIL_INSTANT_MAX;
    *end = (resil__reading){f->now, false};
    return (resil__frame){1, 0, f->now, deadline, f->cancel, f->deadline_token, end};
}

/* The executor's record of a first attempt begun at `start` (the retry
 * level's frame's reading, which the executor's begin takes from it) that
 * succeeded with `o` at `end` (pipeline_strategies.c). */
void resil__retry_first_record(const resil__run *r, resil_instant start, resil_instant end,
                               const resil_outcome *o);

/* The first attempt, begun with frame `f` at the retry level, succeeded
 * with `o`: the attempt's end read as the executor reads it (the reading a
 * level below took on its way out, else the clock), and the executor's
 * result and record. */
static inline void resil__retry_first_succeeded(const resil__run *r, const resil__node *n,
                                                const resil__frame *f, resil__reading *end,
                                                const resil_outcome *o)
{
    if (!end->fresh)
        end->now = resil__pipeline_now(r->p);
    if (r->ex == NULL)
        return;
    r->ex->last_now = end->now;
    if (n->inner)
        return;
    r->ex->out->stop = RESIL_STOP_SUCCEEDED;
    r->ex->out->attempts = 1;
    r->ex->out->records_len = 0;
    if (r->records != NULL && r->records_cap > 0)
        resil__retry_first_record(r, f->now, end->now, o);
}

#endif
