/*
 * pipeline_strategies.c — what each strategy does at its level of the walk.
 *
 * Every strategy has the same shape: decide whether to go on (a rejection
 * becomes an outcome of kind RESIL_REJECTED whose code names the
 * strategy, so that a retry, a fallback or the caller can tell who said
 * no), adjust the frame for the levels below, call the rest, then look at
 * what came back. The rest is the next node's step (resil__chain()), or,
 * for the levels whose bodies take it as a parameter, the next body inlined
 * (see "two levels in one step" below): the walk's calls cost more than
 * most levels' work. Nothing here allocates: tokens, the retry's state and
 * the clock adapter all live in these stack frames.
 *
 * The retry strategy is the retry executor itself. It is handed a small
 * clock adapter (a "cursor") that remembers the latest reading, so the
 * levels below learn the attempt's start without reading the clock again,
 * and whose sleep ends at the enclosing deadline — the rule of timeout.h
 * applied to the backoff wait.
 */
#include <stdio.h>
#include <string.h>

#include "pipeline_steps.h"

/* A level's body, inlined into every step that runs it. */
#define RESIL__BODY static inline __attribute__((always_inline))

void resil__report_rejection(const resil__run *r, resil_event_type t, resil_strategy_kind k,
                             const resil__frame *f, const resil_outcome *o)
{
    resil_event ev;
    resil__event_init_run(&ev, r, t, k, f->now);
    ev.key = r->key != NULL ? r->key : "";
    ev.attempt = f->attempt;
    ev.delay = o->retry_after;
    ev.outcome = o;
    ev.reason = o->detail;
    resil__emit(r->p, &ev);
}

void resil__reject(const resil__run *r, resil_event_type t, resil_strategy_kind k,
                   const resil__frame *f, const char *detail, resil_duration retry_after,
                   resil_outcome *out)
{
    *out = resil__rejected(k, detail, retry_after);
    if (resil__listening(r->p))
        resil__report_rejection(r, t, k, f, out);
}

resil_instant resil__read_now(const resil__run *r)
{
    resil_instant now = resil__pipeline_now(r->p);
    if (r->ex != NULL)
        r->ex->last_now = now;
    return now;
}

/* ---- rate limiter ------------------------------------------------------------ */

void resil__run_rate_limiter(const resil__run *r, size_t i, const resil__frame *f,
                             resil_outcome *out)
{
    const resil__node *n = resil__node_at(r, i);
    resil_duration hint = RESIL_NO_HINT;
    resil_duration wait = resil__rate_wait(n, f);
    int rc = wait == 0 ? resil__rate_try(n, f, &hint)
                       : resil_ratelimit_acquire(n->ratelimit, 1, f->cancel, wait);
    if (!resil__rate_admit(r, f, rc, hint, out))
        return;
    if (wait == 0) { /* no time passed here */
        resil__chain(r, i + 1, f, out);
        return;
    }
    resil__frame inner = *f;
    inner.now = resil__read_now(r);
    resil__chain(r, i + 1, &inner, out);
}

/* ---- bulkhead ------------------------------------------------------------------ */

RESIL__BODY void bulkhead_body(const resil__run *r, size_t i, const resil__frame *f,
                               resil_outcome *out, resil__step_fn *next)
{
    const resil__node *n = resil__node_at(r, i);
    resil_bulkhead_ticket t = {.owner = NULL, .queued = 0};
    if (!resil__bulkhead_admit(r, f, resil_bulkhead_acquire(n->bulkhead, f->cancel, &t), out))
        return;
    resil__chain_admitted(r, i, f, t.queued, next, out);
    resil_bulkhead_release(&t);
}

/* ---- timeouts ----------------------------------------------------------------------- */

static void report_timeout(const resil__run *r, const resil__node *n, const resil__frame *f,
                           resil_duration t, const resil_outcome *o)
{
    resil_event ev;
    resil__event_init_run(&ev, r, RESIL_EVENT_TIMEOUT, n->kind, resil_clock_now(r->p->clock));
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = f->attempt;
    ev.duration = t;
    ev.outcome = o;
    resil__emit(r->p, &ev);
}

static void timed_out(const resil__node *n, resil_duration t, resil_outcome *out)
{
    char text[32], detail[RESIL_DETAIL_MAX];
    resil_duration_format(t, text, sizeof text);
    snprintf(detail, sizeof detail, "%s (%s) elapsed",
             n->kind == RESIL_STRATEGY_TOTAL_TIMEOUT ? "total timeout" : "attempt timeout", text);
    *out = resil_fail(RESIL_TIMEOUT, RESIL_ETIMEDOUT, detail);
}

/*
 * The work inside came back without success. Was it this timeout that
 * ended it? Only if this deadline was the binding one (an enclosing,
 * earlier deadline reports for itself) and it has passed, as its token or
 * the clock says — and not if the enclosing token fired first. A cancelled
 * outcome is then the timeout's doing and is reported as one.
 */
void resil__timeout_judge(const resil__run *r, const resil__node *n, const resil__frame *f,
                          const resil__frame *inner, resil_outcome *out)
{
    resil_instant deadline = inner->deadline;
    if (deadline >= f->deadline || resil_cancelled(f->cancel))
        return;
    bool fired = resil_cancel_reason(inner->cancel) == RESIL_ETIMEDOUT;
    bool stopped = n->kind == RESIL_STRATEGY_TOTAL_TIMEOUT && r->ex != NULL &&
                   r->ex->out->stop == RESIL_STOP_DEADLINE;
    if (!fired && !stopped && resil_clock_now(r->p->clock) < deadline)
        return;
    resil_duration t = resil__timeout_for(n, r);
    if (out->kind == RESIL_CANCELLED) {
        timed_out(n, t, out);
        if (r->ex != NULL && r->ex->out->stop == RESIL_STOP_CANCELLED)
            r->ex->out->stop = RESIL_STOP_DEADLINE;
    }
    if (resil__listening(r->p))
        report_timeout(r, n, f, t, out);
}

RESIL__BODY void timeout_body(const resil__run *r, size_t i, const resil__frame *f,
                              resil_outcome *out, resil__step_fn *next)
{
    const resil__node *n = resil__node_at(r, i);
    resil_cancel tok;
    resil__frame inner;
    if (!resil__timeout_enter(r, n, f, &tok, &inner, out))
        return;
    next(r, i + 1, &inner, out);
    resil__timeout_leave(r, n, f, &inner, out);
}

/* ---- retry ---------------------------------------------------------------------------- */

static resil_instant cursor_now(resil_clock *c)
{
    resil__cursor *k = (resil__cursor *)c;
    if (k->latest.fresh)
        k->latest.fresh = false;
    else
        k->latest.now = resil_clock_now(k->inner);
    return k->latest.now;
}

static int64_t cursor_wall_now(resil_clock *c)
{
    return resil_clock_wall_now(((resil__cursor *)c)->inner);
}

static int cursor_sleep(resil_clock *c, resil_duration d, resil_cancel *cancel)
{
    resil__cursor *k = (resil__cursor *)c;
    int rc = resil__sleep_bounded(k->inner, d, cancel, k->deadline, k->deadline_token);
    return rc == 0 ? 0 : RESIL_ECANCELED;
}

void resil__cursor_init(resil__cursor *k, const resil__run *r, size_t i, const resil__frame *f)
{
    *k = (resil__cursor){{cursor_now, cursor_wall_now, cursor_sleep},
                         r->p->clock, {f->now, true}, f->deadline, f->deadline_token,
                         r, resil__node_at(r, i), i + 1, f->deadline_token, NULL, 0,
                         NULL, {0, false}};
}

static resil_outcome attempt_op(resil_attempt_ctx *ctx)
{
    resil__cursor *k = ctx->user;
    k->last = ctx;
    resil__frame f = {ctx->attempt, 0, k->latest.now, ctx->deadline, ctx->cancel,
                      k->attempt_deadline_token, &k->latest};
    resil_outcome o;
    resil__chain(k->r, k->next, &f, &o);
    return o;
}

/* The executor after a first attempt the walk already ran (run_first):
 * its attempt 1 is that one, ending with the reading it ended with. */
static resil_outcome attempt_op_after_first(resil_attempt_ctx *ctx)
{
    resil__cursor *k = ctx->user;
    if (ctx->attempt != 1 || k->first == NULL)
        return attempt_op(ctx);
    k->last = ctx;
    k->latest = k->first_end;
    return *k->first;
}

/* The executor's context names the cursor as its user and its clock; the
 * caller's classifiers and hooks get the same attempt with the caller's
 * user and the pipeline's clock. */
static resil_attempt_ctx caller_ctx(const resil__cursor *k, const resil_attempt_ctx *inner)
{
    resil_attempt_ctx c = *inner;
    c.user = k->r->user;
    c.clock = k->inner;
    return c;
}

bool resil__retry_classify(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    const resil__node *n = ud;
    resil_attempt_ctx c = caller_ctx(ctx->user, ctx);
    return n->policy.retry_on(o, &c, n->policy.retry_on_ud);
}

resil_duration resil__retry_delay(const resil_delay_info *info, void *ud)
{
    const resil__node *n = ud;
    resil_attempt_ctx c = caller_ctx(info->ctx->user, info->ctx);
    resil_delay_info mine = *info;
    mine.ctx = &c;
    return n->policy.delay(&mine, n->policy.delay_ud);
}

static bool handled(const resil__cursor *k, const resil_outcome *o)
{
    const resil_retry_policy *p = &k->node->policy;
    if (o->kind == RESIL_SUCCESS && !p->retry_on_results)
        return false;
    if (p->retry_on == NULL)
        return resil_retry_on_default(o, NULL);
    resil_attempt_ctx c = caller_ctx(k, k->last);
    return p->retry_on(o, &c, p->retry_on_ud);
}

static resil_strategy_kind attempt_reporter(const resil__node *n)
{
    return n->implicit ? RESIL_STRATEGY_NONE : RESIL_STRATEGY_RETRY;
}

void resil__retry_report_attempt(const resil_attempt_record *rec, void *ud)
{
    resil__cursor *k = ud;
    const resil__run *r = k->r;
    resil_event ev;
    resil_instant end = resil_dur_add(rec->start, rec->duration);
    resil__event_init_run(&ev, r, RESIL_EVENT_ATTEMPT, attempt_reporter(k->node), end);
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = rec->number;
    ev.duration = rec->duration;
    ev.stop = rec->stop;
    ev.outcome = &rec->outcome;
    ev.handled = handled(k, &rec->outcome);
    ev.delay = k->waited;
    k->waited = rec->wait;
    resil__emit(r->p, &ev);
    if (rec->stop != RESIL_STOP_BUDGET_EXHAUSTED)
        return;
    resil__event_init_run(&ev, r, RESIL_EVENT_BUDGET_DENIED, RESIL_STRATEGY_RETRY, end);
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = rec->number;
    ev.outcome = &rec->outcome;
    ev.reason = resil_budget_name(k->node->policy.budget);
    resil__emit(r->p, &ev);
}

void resil__retry_announce(const resil_retry_info *info, void *user, void *hook_ud)
{
    const resil__cursor *k = user;
    const resil__node *n = hook_ud;
    const resil__run *r = k->r;
    if (resil__listening(r->p)) {
        resil_event ev;
        resil__event_init_run(&ev, r, RESIL_EVENT_RETRY, RESIL_STRATEGY_RETRY, k->latest.now);
        ev.key = r->operation != NULL ? r->operation : "";
        ev.attempt = info->attempt;
        ev.delay = info->delay;
        ev.source = info->source;
        ev.outcome = info->cause;
        resil__emit(r->p, &ev);
    }
    if (n->policy.on_retry != NULL) {
        resil_attempt_ctx c = caller_ctx(k, info->ctx);
        resil_retry_info mine = *info;
        mine.ctx = &c;
        n->policy.on_retry(&mine, r->user, n->policy.on_retry_ud);
    }
}

/* The executor's options for the retry at the cursor's node. An inner
 * retry keeps no records: the result's are the outermost retry's.
 *
 * Written field by field, the reserved words included: as one compound
 * literal the compiler clears the struct with `rep stos` first, which is
 * slow to start, and the executor's loads of the fields right after could
 * not be forwarded from it (about 10 ns of one retry on an event loop). */
void resil__retry_opts(resil_exec_opts *o, const resil__run *r, const resil__frame *f,
                       resil_cancel *cancel, resil__cursor *k)
{
    o->clock = &k->base;
    o->rng = r->rng;
    o->cancel = cancel;
    o->deadline = f->deadline;
    o->non_idempotent = r->non_idempotent;
    o->records = r->ex != NULL && !k->node->inner ? r->records : NULL;
    o->records_cap = r->records_cap;
    o->on_attempt = NULL;
    o->on_attempt_ud = NULL;
    o->measure_elapsed_slot_.u = 0;
    /* the strategies inside take each attempt's start from the cursor, so
     * it must be read every time */
    o->measure_elapsed = true;
    o->reserved_[0].u = o->reserved_[1].u = o->reserved_[2].u = 0;
    /* A reserved word becoming a field (docs/abi.md) must be written here. */
    _Static_assert(sizeof o->reserved_ == 3 * sizeof(resil_reserved),
                   "every field of resil_exec_opts is written above");
    if (resil__listening(r->p)) {
        o->on_attempt = resil__retry_report_attempt;
        o->on_attempt_ud = k;
    }
}

/* The outermost retry's stop, attempts and records become the result's; an
 * inner retry only moves the execution's latest reading on. */
void resil__retry_keep_result(const resil__run *r, const resil_retry_result *res,
                              const resil__cursor *k)
{
    resil_pipeline_result *out = r->ex->out;
    r->ex->last_now = k->latest.now;
    if (k->node->inner)
        return;
    out->stop = res->stop;
    out->attempts = res->attempts;
    out->records_len = res->records_len;
}

void resil__retry_first_record(const resil__run *r, resil_instant start, resil_instant end,
                               const resil_outcome *o)
{
    r->records[0] = (resil_attempt_record){.number = 1, .outcome = *o,
                                           .stop = RESIL_STOP_SUCCEEDED, .wait = 0,
                                           .source = RESIL_WAIT_NONE, .start = start,
                                           .duration = end - start};
    r->ex->out->records_len = 1;
}

/* The first attempt without the executor (resil__retry_first_alone): true
 * when it succeeded; false, with *end the reading it ended with, when the
 * executor takes it as its first (attempt_op_after_first). */
RESIL__BODY bool run_first(const resil__run *r, size_t i, const resil__frame *f,
                           resil__reading *end, resil_outcome *out, resil__step_fn *next)
{
    resil__frame inner = resil__retry_first_frame(f, end);
    next(r, i + 1, &inner, out);
    if (out->kind != RESIL_SUCCESS)
        return false;
    resil__retry_first_succeeded(r, resil__node_at(r, i), f, end, out);
    return true;
}

/* The executor over the levels below; `first_end` non-NULL: the first
 * attempt has run (run_first), its outcome in *out. Out of line, so that
 * a first attempt's success pays none of its frame. */
__attribute__((noinline)) static void run_executor(const resil__run *r, size_t i,
                                                   const resil__frame *f,
                                                   const resil__reading *first_end,
                                                   resil_outcome *out)
{
    const resil__node *n = resil__node_at(r, i);
    resil__cursor k;
    resil__cursor_init(&k, r, i, f);
    if (first_end != NULL) {
        k.first = out;
        k.first_end = *first_end;
    }
    /* The policy's own time budget is a deadline too, and a deadline comes
     * with a token: the attempts get one that fires with it. */
    resil_cancel own;
    resil_cancel *cancel = f->cancel;
    bool has_own = n->policy.max_total > 0 && resil_cancel_init(&own, f->cancel) == 0;
    if (has_own)
        cancel = k.attempt_deadline_token = &own;
    resil_exec_opts o;
    resil__retry_opts(&o, r, f, cancel, &k);
    resil_retry_result res;
    if (first_end != NULL) /* the policy was validated at build */
        resil__retry_run_after_first(&n->run_policy, &o, attempt_op_after_first, &k, &res);
    else
        resil__retry_run(&n->run_policy, &o, attempt_op, &k, &res);
    if (has_own)
        resil_cancel_destroy(&own);
    if (r->ex != NULL)
        resil__retry_keep_result(r, &res, &k);
    *out = res.final;
}

RESIL__BODY void retry_body(const resil__run *r, size_t i, const resil__frame *f,
                            resil_outcome *out, resil__step_fn *next)
{
    resil__frame at = *f; /* copies: see resil__timeout_leave */
    if (!resil__retry_first_alone(r, resil__node_at(r, i), f)) {
        run_executor(r, i, &at, NULL, out);
        return;
    }
    resil__reading first_end;
    if (!run_first(r, i, f, &first_end, out, next)) {
        resil__reading end = first_end;
        run_executor(r, i, &at, &end, out);
    }
}

/* ---- breaker ------------------------------------------------------------------------------ */

/* The breaker's own wording; the code says the pipeline's breaker
 * strategy refused, as every strategy's rejection does. */
void resil__breaker_refuse(const resil__run *r, const resil__frame *f,
                           const resil_breaker_permit *p, resil_outcome *out)
{
    resil_outcome no = resil_breaker_rejection(p->state, p->retry_after);
    resil__reject(r, RESIL_EVENT_BREAKER_REJECTED, RESIL_STRATEGY_BREAKER, f, no.detail,
                  no.retry_after, out);
}

RESIL__BODY void breaker_body(const resil__run *r, size_t i, const resil__frame *f,
                              resil_outcome *out, resil__step_fn *next)
{
    resil_breaker_permit permit;
    resil_breaker *b = resil__breaker_of(r, f->hedge);
    if (!resil__breaker_enter_to(r, f, b, &permit, out))
        return;
    next(r, i + 1, f, out);
    resil__breaker_leave_to(r, i, f, b, &permit, out);
}

/* ---- the operation, past the last strategy -------------------------------------- */

RESIL__BODY void op_body(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out, resil__step_fn *next)
{
    (void)i;
    (void)next;
    resil_attempt_ctx ctx = resil__frame_ctx(r, f);
    *out = r->op(&ctx);
}

/* ---- two levels in one step ------------------------------------------------------------
 *
 * Each level of the walk is a call through the node's step: a frame
 * pushed and popped, the frame's arguments moved, an indirect call, about
 * twenty instructions a level on a success that does little else. The
 * common levels' bodies therefore take the level below as a parameter,
 * and the build gives a node whose next level is also one of them a step
 * that runs both (resil__step_pair): the compiler inlines the inner body
 * into the outer, so a walk of five levels and the operation makes three
 * calls instead of six. Every node keeps a step that starts at itself —
 * the retry executor's later attempts and hedged attempts start below the
 * retry, wherever the pairs fall — and a pair's inner level ends in the
 * step of the node after it, whatever that is. The bodies are the steps'
 * only code: a single level is its body with the next node's step after
 * it. */
RESIL__BODY void step_at(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out)
{
    resil__chain(r, i, f, out);
}

#define RESIL__SINGLE(NAME, BODY)                                                         \
    void NAME(const resil__run *r, size_t i, const resil__frame *f, resil_outcome *out)  \
    {                                                                                     \
        BODY(r, i, f, out, step_at);                                                      \
    }
RESIL__SINGLE(resil__run_bulkhead, bulkhead_body)
RESIL__SINGLE(resil__run_timeout, timeout_body)
RESIL__SINGLE(resil__run_retry, retry_body)
RESIL__SINGLE(resil__run_breaker, breaker_body)
RESIL__SINGLE(resil__run_op, op_body)

/* The inner level of a pair, ending in the step of the node after it. */
#define RESIL__INNER(BODY)                                                                \
    RESIL__BODY void BODY##_then_step(const resil__run *r, size_t i, const resil__frame *f, \
                                      resil_outcome *out)                                 \
    {                                                                                     \
        BODY(r, i, f, out, step_at);                                                      \
    }
RESIL__INNER(bulkhead_body)
RESIL__INNER(timeout_body)
RESIL__INNER(retry_body)
RESIL__INNER(breaker_body)
RESIL__INNER(op_body)

#define RESIL__PAIR(OUTER, INNER)                                                         \
    static void OUTER##_##INNER(const resil__run *r, size_t i, const resil__frame *f,     \
                                resil_outcome *out)                                       \
    {                                                                                     \
        OUTER(r, i, f, out, INNER##_then_step);                                           \
    }
#define RESIL__PAIRS_OF(OUTER)                                                            \
    RESIL__PAIR(OUTER, bulkhead_body)                                                     \
    RESIL__PAIR(OUTER, timeout_body)                                                      \
    RESIL__PAIR(OUTER, retry_body)                                                        \
    RESIL__PAIR(OUTER, breaker_body)                                                      \
    RESIL__PAIR(OUTER, op_body)
RESIL__PAIRS_OF(bulkhead_body)
RESIL__PAIRS_OF(timeout_body)
RESIL__PAIRS_OF(retry_body)
RESIL__PAIRS_OF(breaker_body)

/* ---- the standard shape's levels in one step ----------------------------------------
 *
 * The shape resil_pipeline_standard() builds — bulkhead, total timeout,
 * retry, breaker, attempt timeout — is the one most executions take (the
 * HTTP client's profiles are it), so a walk from any of its levels to the
 * operation is one step, its bodies inlined into each other: one call
 * where the pairs make three. A pipeline ending in a tail of it (a retry,
 * a breaker and an attempt timeout, say) runs that tail the same way. */
RESIL__BODY void std_attempt(const resil__run *r, size_t i, const resil__frame *f,
                             resil_outcome *out)
{
    timeout_body(r, i, f, out, op_body_then_step);
}

/* A level of the shape above the attempt timeout: its body inlined around
 * the next level's, and the step a walk starting at it takes. */
#define RESIL__STD_LEVEL(LEVEL, BODY, NEXT)                                               \
    RESIL__BODY void std_##LEVEL(const resil__run *r, size_t i, const resil__frame *f,    \
                                 resil_outcome *out)                                      \
    {                                                                                     \
        BODY(r, i, f, out, NEXT);                                                         \
    }                                                                                     \
    static void std_from_##LEVEL(const resil__run *r, size_t i, const resil__frame *f,    \
                                 resil_outcome *out)                                      \
    {                                                                                     \
        std_##LEVEL(r, i, f, out);                                                        \
    }
RESIL__STD_LEVEL(breaker, breaker_body, std_attempt)
RESIL__STD_LEVEL(retry, retry_body, std_breaker)
RESIL__STD_LEVEL(total, timeout_body, std_retry)
RESIL__STD_LEVEL(bulkhead, bulkhead_body, std_total)

resil__step_fn *resil__step_standard_tail(const resil__node *nodes, size_t n, size_t i)
{
    static resil__step_fn *const from[] = {std_from_bulkhead, std_from_total, std_from_retry,
                                           std_from_breaker};
    /* the attempt timeout alone is its pair with the operation */
    if (i >= n || n - i > RESIL__STANDARD_LEVELS || n - i < 2)
        return NULL;
    size_t j = RESIL__STANDARD_LEVELS - (n - i);
    for (size_t k = 0; k < n - i; k++)
        if (nodes[i + k].kind != resil__standard_shape[j + k])
            return NULL;
    return from[j];
}

/* Which body a kind's level runs: 0 for a kind with none (it keeps its
 * own step), 5 for the operation. */
static int body_of(resil_strategy_kind k)
{
    switch (k) {
    case RESIL_STRATEGY_BULKHEAD:
        return 1;
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        return 2;
    case RESIL_STRATEGY_RETRY:
        return 3;
    case RESIL_STRATEGY_BREAKER:
        return 4;
    default:
        return 0;
    }
}

resil__step_fn *resil__step_pair(const resil__node *n, const resil__node *below)
{
    static resil__step_fn *const pairs[4][5] = {
        {bulkhead_body_bulkhead_body, bulkhead_body_timeout_body, bulkhead_body_retry_body,
         bulkhead_body_breaker_body, bulkhead_body_op_body},
        {timeout_body_bulkhead_body, timeout_body_timeout_body, timeout_body_retry_body,
         timeout_body_breaker_body, timeout_body_op_body},
        {retry_body_bulkhead_body, retry_body_timeout_body, retry_body_retry_body,
         retry_body_breaker_body, retry_body_op_body},
        {breaker_body_bulkhead_body, breaker_body_timeout_body, breaker_body_retry_body,
         breaker_body_breaker_body, breaker_body_op_body},
    };
    int outer = body_of(n->kind);
    int inner = below == NULL ? 5 : body_of(below->kind);
    if (outer == 0 || inner == 0)
        return NULL;
    return pairs[outer - 1][inner - 1];
}

/* ---- fallback ----------------------------------------------------------------------------- */

void resil_fallback_opts_default(resil_fallback_opts *o) { memset(o, 0, sizeof *o); }

int resil_fallback_opts_validate(const resil_fallback_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "fallback: options must not be NULL");
    if (o->action == NULL)
        return resil_err_set(err, RESIL_EINVAL, "fallback.action must not be NULL");
    return 0;
}

bool resil_fallback_handle_default(const resil_outcome *o, void *ud)
{
    (void)ud;
    return o->kind != RESIL_SUCCESS && o->kind != RESIL_CANCELLED;
}

static void report_fallback(const resil__run *r, const resil__frame *f,
                            const resil_outcome *cause)
{
    resil_event ev;
    resil__event_init_run(&ev, r, RESIL_EVENT_FALLBACK, RESIL_STRATEGY_FALLBACK,
                      resil_clock_now(r->p->clock));
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = f->attempt;
    ev.outcome = cause;
    ev.reason = cause->detail;
    resil__emit(r->p, &ev);
}

/* The caller's own token fired: not a deadline's (a timeout's token fires
 * with RESIL_ETIMEDOUT, and a timeout is a failure like any other). */
static bool caller_gave_up(const resil_cancel *c)
{
    return resil_cancelled(c) && resil_cancel_reason(c) != RESIL_ETIMEDOUT;
}

/* The work below failed: the fallback's answer, when it is wanted. */
void resil__fallback_answer(const resil__run *r, size_t i, const resil__frame *f,
                            resil_outcome *out)
{
    const resil_fallback_opts *fb = &resil__node_at(r, i)->fallback;
    /* Whatever the work below said last, and whatever `handle` would say
     * of it: a caller who gave up wants no substitute answer. */
    if (caller_gave_up(f->cancel))
        return;
    resil_attempt_ctx ctx = resil__frame_ctx(r, f);
    bool go = fb->handle != NULL ? fb->handle(out, &ctx, fb->handle_ud)
                                 : resil_fallback_handle_default(out, NULL);
    if (!go)
        return;
    resil_outcome o = *out;
    resil_fallback_info info = {&o, resil__rejected_by(&o), RESIL_STOP_NONE, 0, &ctx};
    if (r->ex != NULL) {
        info.stop = r->ex->out->stop;
        info.attempts = r->ex->out->attempts;
    }
    if (resil__listening(r->p))
        report_fallback(r, f, &o);
    *out = fb->action(&info, r->user, fb->action_ud);
    if (f->reading != NULL)
        f->reading->fresh = false;
    if (r->ex != NULL) {
        r->ex->out->fallback = true;
        r->ex->out->cause = o;
        resil__read_now(r);
    }
}

void resil__run_fallback(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out)
{
    resil__chain(r, i + 1, f, out);
    resil__fallback_leave(r, i, f, out);
}

/* ---- degradation gate --------------------------------------------------------------------- */

void resil__degrade_shed(const resil__run *r, const resil__node *n, const resil__frame *f,
                         resil_outcome *out)
{
    char detail[RESIL_DETAIL_MAX];
    int level = resil_degrade_level(n->degrade);
    snprintf(detail, sizeof detail, "shed at level %s",
             resil_degrade_level_name(n->degrade, level));
    resil__reject(r, RESIL_EVENT_DEGRADE_REJECTED, RESIL_STRATEGY_DEGRADE, f, detail,
                  RESIL_NO_HINT, out);
}

void resil__run_degrade(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out)
{
    if (!resil__degrade_enter(r, i, f, out))
        return;
    resil__chain(r, i + 1, f, out);
    resil__degrade_leave(r, i, out);
}
