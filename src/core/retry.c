/*
 * retry.c — the retry policy, the sans-I/O decision step, and the blocking
 * executor that drives it.
 *
 * There is exactly one decision procedure, resil_retry_after_attempt(), and
 * it is written as the fixed order of DESIGN.md §3 read top to bottom, one
 * early return per stop reason, so that the order can be checked by eye
 * against the article. It reads no clock and draws a random number only when
 * the wait really comes from backoff: a Retry-After wait or a stop consumes
 * nothing, which is what lets seeded demos reproduce published output. The
 * executor is a thin loop over that step which adds only what needs I/O —
 * calling the operation, reading the clock, sleeping cancellably — and
 * writes into caller memory, so that no path allocates. It reads the clock
 * only when something needs the time (a deadline, a record, a hook, or
 * elapsed asked for): a clock read costs more than the rest of a successful
 * execution, and without a deadline no decision depends on it.
 */
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "resil/retry.h"
#include "cancel_inline.h"
#include "retry_exec.h"

/* ---- names -------------------------------------------------------------- */

const char *resil_stop_name(resil_stop s)
{
    switch (s) {
    case RESIL_STOP_NONE:
        return "";
    case RESIL_STOP_SUCCEEDED:
        return "succeeded";
    case RESIL_STOP_NOT_RETRYABLE:
        return "not retryable";
    case RESIL_STOP_ATTEMPTS_EXHAUSTED:
        return "attempts exhausted";
    case RESIL_STOP_BUDGET_EXHAUSTED:
        return "budget exhausted";
    case RESIL_STOP_DEADLINE:
        return "deadline";
    case RESIL_STOP_CANCELLED:
        return "cancelled";
    case RESIL_STOP_REFUSED:
        return "refused";
    }
    return "";
}

const char *resil_wait_source_name(resil_wait_source s)
{
    switch (s) {
    case RESIL_WAIT_NONE:
        return "";
    case RESIL_WAIT_BACKOFF:
        return "backoff";
    case RESIL_WAIT_RETRY_AFTER:
        return "Retry-After";
    case RESIL_WAIT_GENERATOR:
        return "generator";
    }
    return "";
}

/* ---- the policy ---------------------------------------------------------- */

void resil_retry_policy_default(resil_retry_policy *p)
{
    memset(p, 0, sizeof *p);
    p->max_attempts = 3;
    p->retry_on = NULL;
    resil_backoff_default(&p->backoff);
    p->max_total = 0;
    p->retry_after = RESIL_RETRY_AFTER_HONOR;
    p->retry_after_max = RESIL_S(60);
    p->budget = NULL;
    p->unsafe_mode = RESIL_UNSAFE_REFUSE;
}

/* Every rule resil_retry_policy_validate() words, as one predicate with
 * no messages: the executor asks it on every call, so that a policy that
 * changed since the last call is still checked, and pays the worded walk
 * only for a policy that fails it. */
static bool policy_valid(const resil_retry_policy *p)
{
    const resil_backoff *b = &p->backoff;
    bool polly_rule = b->jitter != RESIL_JITTER_POLLY || b->kind != RESIL_BACKOFF_EXPONENTIAL ||
                      b->factor == 2.0;
    return (p->max_attempts >= 1) & ((unsigned)b->kind <= RESIL_BACKOFF_FIBONACCI) &
           (b->base >= 0) & (b->factor >= 1.0) & (b->factor <= __DBL_MAX__) &
           ((unsigned)b->jitter <= RESIL_JITTER_POLLY) & (b->jitter_fraction >= 0.0) &
           (b->jitter_fraction <= 1.0) & (b->max_delay >= 0) & polly_rule &
           (p->max_total >= 0) & ((unsigned)p->retry_after <= RESIL_RETRY_AFTER_BOUNDED) &
           (p->retry_after_max >= 0) & ((unsigned)p->unsafe_mode <= RESIL_UNSAFE_RUN_ONCE);
}

int resil_retry_policy_validate(const resil_retry_policy *p, resil_err *err)
{
    if (p == NULL)
        return resil_err_set(err, RESIL_EINVAL, "retry: policy must not be NULL");
    if (p->max_attempts < 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "retry.max_attempts must be >= 1 (use "
                             "RESIL_ATTEMPTS_FOREVER to retry forever), got %u",
                             (unsigned)p->max_attempts);
    resil_err inner = {0, ""};
    int rc = resil_backoff_validate(&p->backoff, &inner);
    if (rc != 0)
        return resil_err_set(err, rc, "retry.%s", inner.message);
    if (p->max_total < 0)
        return resil__bad_duration(err, "retry.max_total", ">= 0 (0 = none)", p->max_total);
    if ((unsigned)p->retry_after > RESIL_RETRY_AFTER_BOUNDED)
        return resil_err_set(err, RESIL_EINVAL,
                             "retry.retry_after must be honor, ignore or bounded, got %d",
                             (int)p->retry_after);
    if (p->retry_after_max < 0)
        return resil__bad_duration(err, "retry.retry_after_max", ">= 0", p->retry_after_max);
    if ((unsigned)p->unsafe_mode > RESIL_UNSAFE_RUN_ONCE)
        return resil_err_set(err, RESIL_EINVAL,
                             "retry.unsafe_mode must be refuse or run-once, got %d",
                             (int)p->unsafe_mode);
    return 0;
}

/* ---- the sans-I/O step --------------------------------------------------- */

static bool forever(const resil_retry *r)
{
    return r->max_attempts == RESIL_ATTEMPTS_FOREVER;
}

resil_stop resil_retry_begin(resil_retry *r, const resil_retry_policy *p,
                             resil_instant now, resil_instant deadline,
                             bool idempotent)
{
    return resil__retry_step_begin(r, p, now, deadline, idempotent);
}

resil_stop resil_retry_before_attempt(resil_retry *r, bool cancelled)
{
    return resil__retry_step_before(r, cancelled);
}

/* The classifier and the delay generator get the attempt's own context:
 * the step holds no per-call state anywhere else, so interleaved
 * executions stay apart. Without one they get a context holding only the
 * step's attempt number and deadline. */
static resil_attempt_ctx own_ctx(const resil_retry *r)
{
    resil_attempt_ctx own = {r->attempt, r->deadline, NULL, NULL, NULL, 0, NULL};
    return own;
}

static bool retryable(const resil_retry *r, const resil_attempt_ctx *ctx,
                      const resil_outcome *o)
{
    const resil_retry_policy *p = r->policy;
    if (p->retry_on == NULL)
        return resil__retryable_kind(o->kind);
    if (ctx != NULL)
        return p->retry_on(o, ctx, p->retry_on_ud);
    resil_attempt_ctx own = own_ctx(r);
    return p->retry_on(o, &own, p->retry_on_ud);
}

/* A success stops, unless the policy asks its classifier about results
 * and the classifier wants this one tried again. */
static bool success_stops(const resil_retry *r, const resil_attempt_ctx *ctx,
                          const resil_outcome *o)
{
    return !r->policy->retry_on_results || !retryable(r, ctx, o);
}

/* The delay generator's answer, or RESIL_DELAY_BACKOFF for none. */
static resil_duration generated(const resil_retry *r, const resil_attempt_ctx *ctx,
                                const resil_outcome *o)
{
    const resil_retry_policy *p = r->policy;
    if (p->delay == NULL)
        return RESIL_DELAY_BACKOFF;
    resil_attempt_ctx own = own_ctx(r);
    resil_delay_info info = {r->attempt, o, ctx != NULL ? ctx : &own};
    return p->delay(&info, p->delay_ud);
}

static bool attempts_used_up(const resil_retry *r)
{
    return !forever(r) && r->attempt >= r->max_attempts;
}

/* A NULL rng stays NULL: resil_backoff_delay() takes the thread's only
 * for a draw, and a wait without jitter draws nothing. */
static resil_duration backoff_wait(resil_retry *r, resil_rng *rng)
{
    return resil_backoff_delay(&r->policy->backoff, r->attempt, &r->backoff, rng);
}

static resil_duration clamp(resil_duration v, resil_duration lo, resil_duration hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The wait before the next attempt: the delay generator's when it has
 * one, else the server's hint when the policy heeds it, else backoff. Only
 * a wait that needs the backoff draws. */
static resil_duration choose_wait(resil_retry *r, const resil_attempt_ctx *ctx,
                                  const resil_outcome *o, resil_rng *rng,
                                  resil_wait_source *source)
{
    const resil_retry_policy *p = r->policy;
    resil_duration custom = generated(r, ctx, o);
    if (custom >= 0) {
        *source = RESIL_WAIT_GENERATOR;
        return custom;
    }
    bool hinted = o->retry_after >= 0 && p->retry_after != RESIL_RETRY_AFTER_IGNORE;
    *source = hinted ? RESIL_WAIT_RETRY_AFTER : RESIL_WAIT_BACKOFF;
    if (!hinted)
        return backoff_wait(r, rng);
    resil_duration hint = o->retry_after < p->retry_after_max ? o->retry_after
                                                              : p->retry_after_max;
    if (p->retry_after == RESIL_RETRY_AFTER_HONOR)
        return hint;
    resil_duration b = backoff_wait(r, rng);
    return clamp(hint, b, resil_dur_add(b, RESIL_S(5)));
}

/* The fixed order, one early return per stop; the wait and its source are
 * written only when the answer is to wait. Plain values, not the public
 * struct: the executors read them at once (retry_exec.h). */
resil_stop resil__retry_decide(resil_retry *r, const resil_attempt_ctx *ctx,
                               const resil_outcome *o, resil_instant now, resil_rng *rng,
                               resil_duration *wait_out, resil_wait_source *source_out)
{
    const resil_retry_policy *p = r->policy;
    if (p->budget != NULL)
        resil_budget_on_result(p->budget, o, r->attempt, &r->ticket);
    if (o->kind == RESIL_SUCCESS) {
        if (success_stops(r, ctx, o))
            return RESIL_STOP_SUCCEEDED;
    } else if (o->kind == RESIL_CANCELLED) {
        return RESIL_STOP_CANCELLED;
    } else if (!retryable(r, ctx, o)) {
        return RESIL_STOP_NOT_RETRYABLE;
    }
    if (attempts_used_up(r))
        return RESIL_STOP_ATTEMPTS_EXHAUSTED;
    if (p->budget != NULL && !resil_budget_try_retry(p->budget, o, &r->ticket))
        return RESIL_STOP_BUDGET_EXHAUSTED;
    resil_wait_source source;
    resil_duration wait = choose_wait(r, ctx, o, rng, &source);
    /* An attempt that would start at or after the deadline has no time to
     * run: stopping now beats sleeping for nothing. */
    if (resil__add_sat(now, wait) >= r->deadline) /* resil_dur_add(), without its call */
        return RESIL_STOP_DEADLINE;
    *wait_out = wait;
    *source_out = source;
    return RESIL_STOP_NONE;
}

/* The decision returned by value is built in a temporary and copied to
 * the caller in 16-byte pieces. Built field by field (4-byte stores), each
 * piece's load would stall on store forwarding, which cost more than the
 * decision itself; built in the same 16-byte pieces, they forward. */
#if defined(__GNUC__) && defined(__x86_64__)
typedef uint64_t pair64 __attribute__((vector_size(16)));

static resil_retry_decision decision(resil_stop stop, resil_duration wait,
                                     resil_wait_source source)
{
    _Static_assert(offsetof(resil_retry_decision, wait) == 8 &&
                       offsetof(resil_retry_decision, source) == 16 &&
                       sizeof(resil_retry_decision) == 56,
                   "the decision's layout the pieces below assume");
    union {
        resil_retry_decision d;
        pair64 piece[3];
        uint64_t word[7];
    } u;
    u.piece[0] = (pair64){(uint32_t)stop, (uint64_t)wait};
    u.piece[1] = (pair64){(uint32_t)source, 0};
    u.piece[2] = (pair64){0, 0};
    u.word[6] = 0;
    return u.d;
}
#else
static resil_retry_decision decision(resil_stop stop, resil_duration wait,
                                     resil_wait_source source)
{
    resil_retry_decision d = {.stop = stop, .wait = wait, .source = source};
    return d;
}
#endif

resil_retry_decision resil_retry_after_attempt(resil_retry *r, const resil_attempt_ctx *ctx,
                                               const resil_outcome *o, resil_instant now,
                                               resil_rng *rng)
{
    resil_duration wait = 0;
    resil_wait_source source = RESIL_WAIT_NONE;
    resil_stop stop = resil__retry_decide(r, ctx, o, now, rng, &wait, &source);
    return decision(stop, wait, source);
}

uint32_t resil_retry_attempt(const resil_retry *r) { return r->attempt; }

resil_instant resil_retry_deadline(const resil_retry *r) { return r->deadline; }

/* ---- the blocking executor ----------------------------------------------- */

/* The steps are in retry_exec.h, shared with the asynchronous execution;
 * this is the loop that strings them together around a sleep. Where the
 * first attempt stands when it starts: */
enum first_attempt {
    FIRST_TO_RUN,    /* not run: look at the token, then run it */
    FIRST_LOOKED_AT, /* the caller looked at the token before it: run it */
    FIRST_RAN        /* run (run_checked): its outcome is in out->final */
};

RESIL__ALWAYS_INLINE static resil_stop run(resil__retry_exec *x, resil_op_fn op, void *user,
                                           enum first_attempt first)
{
    for (bool later = false;; later = true) {
        resil_stop s;
        if (!later && first == FIRST_RAN) /* it ran on x->ctx: only count it */
            resil__retry_step_before(&x->step, false);
        else if ((s = resil__rx_next_looking(x, user, later || first == FIRST_TO_RUN)) !=
                 RESIL_STOP_NONE)
            return s;
        resil_instant start = x->now;
        if (later || first != FIRST_RAN)
            x->out->final = op(&x->ctx);
        resil_retry_decision d = resil__rx_decide(x, start);
        if (d.stop != RESIL_STOP_NONE)
            return d.stop;
        resil__rx_announce(x, &d, user);
        int slept = resil_clock_sleep(x->clock, d.wait, x->opts->cancel);
        if ((s = resil__rx_woke(x, slept)) != RESIL_STOP_NONE)
            return s;
    }
}

/* A policy the quick predicate refused: worded, and run if the worded
 * checks pass after all. Out of line, so the common path keeps no frame. */
__attribute__((noinline)) static int execute_checked(const resil_retry_policy *p,
                                                     const resil_exec_opts *opts,
                                                     resil_op_fn op, void *user,
                                                     resil_retry_result *out, resil_err *err)
{
    int rc = resil_retry_policy_validate(p, err);
    return rc != 0 ? rc : resil__retry_run(p, opts, op, user, out);
}

/* Inline in each entry, so that each is the loop for its case; `x` is the
 * caller's (run_checked's holds the context its first attempt ran on). */
RESIL__ALWAYS_INLINE static int run_from(resil__retry_exec *x, const resil_retry_policy *p,
                                         const resil_exec_opts *opts, resil_op_fn op,
                                         void *user, resil_retry_result *out,
                                         enum first_attempt first)
{
    resil_instant start;
    /* a first attempt run before the loop: first_alone, so nothing is timed */
    resil_stop s = resil__rx_begin_as(x, p, opts, out, &start, first == FIRST_RAN);
    if (s == RESIL_STOP_NONE)
        s = run(x, op, user, first);
    resil__rx_end(x, s, start);
    return 0;
}

int resil__retry_run(const resil_retry_policy *p, const resil_exec_opts *opts,
                     resil_op_fn op, void *user, resil_retry_result *out)
{
    resil__retry_exec x;
    return run_from(&x, p, opts, op, user, out, FIRST_TO_RUN);
}

int resil__retry_run_after_first(const resil_retry_policy *p, const resil_exec_opts *opts,
                                 resil_op_fn op, void *user, resil_retry_result *out)
{
    resil__retry_exec x;
    return run_from(&x, p, opts, op, user, out, FIRST_LOOKED_AT);
}

/* Does a first attempt's success need nothing of the loop? Nothing reads
 * the time (no deadline, records, hook or elapsed: resil__rx_needs_time),
 * no budget hears the result, no classifier is asked about a success, the
 * operation may run again (no refusal to decide) and the token has not
 * fired (the loop's look before attempt 1). */
static bool first_alone(const resil_retry_policy *p, const resil_exec_opts *o)
{
    if (!resil__retry_policy_first_alone(p))
        return false;
    if (o == NULL)
        return true;
    bool deadline = o->deadline != 0 && o->deadline != RESIL_INSTANT_MAX;
    bool records = o->records != NULL && o->records_cap > 0;
    return !deadline & !records & (o->on_attempt == NULL) & !o->measure_elapsed &
           !o->non_idempotent && !resil__token_fired(o->cancel);
}

/* resil_retry_execute()'s run. When first_alone, the first attempt runs
 * before the loop, on the context the loop would give it: a success
 * leaves exactly the loop's result (one attempt, stop "succeeded", no
 * records, elapsed 0 as nothing read the clock); a failure goes on in the
 * loop as its attempt 1, on the same context (what the operation left in
 * it is what the classifier and the hooks see, as in the loop). One frame
 * for both, so that a failure pays nothing twice. */
static int run_checked(const resil_retry_policy *p, const resil_exec_opts *o, resil_op_fn op,
                       void *user, resil_retry_result *out)
{
    resil__retry_exec x;
    if (!first_alone(p, o))
        return run_from(&x, p, o, op, user, out, FIRST_TO_RUN);
    resil_clock *clock = o != NULL && o->clock != NULL ? o->clock : resil_clock_system();
    x.ctx = (resil_attempt_ctx){.attempt = 1, .deadline = RESIL_INSTANT_MAX,
                                .cancel = o != NULL ? o->cancel : NULL, .clock = clock,
                                .user = user, .hedge = 0, .trace = NULL};
    out->final = op(&x.ctx);
    if (out->final.kind != RESIL_SUCCESS)
        return run_from(&x, p, o, op, user, out, FIRST_RAN);
    out->stop = RESIL_STOP_SUCCEEDED;
    out->attempts = 1;
    out->records_len = 0;
    out->elapsed = 0;
    return 0;
}

int resil_retry_execute(const resil_retry_policy *p, const resil_exec_opts *opts,
                        resil_op_fn op, void *user, resil_retry_result *out,
                        resil_err *err)
{
    if (p == NULL || op == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "retry: policy, operation and result must not be NULL");
    if (!policy_valid(p))
        return execute_checked(p, opts, op, user, out, err);
    return run_checked(p, opts, op, user, out);
}
