/*
 * pipeline_async.c — a pipeline executed on an event loop.
 *
 * The blocking walk keeps one stack frame per strategy; here each strategy
 * gets a level record instead, in the execution's single allocation, and
 * the walk moves down (descend: each strategy's enter step) and up
 * (ascend: each strategy's leave step) across timers and reports. The
 * steps are the blocking ones (pipeline_steps.h, retry_exec.h): only the
 * way a wait is spent differs. A level that must wait arms its timer (a
 * retry's backoff, a rate limiter's wait, a bulkhead's queue timeout) or
 * joins a queue, notes that its lane is waiting there, and returns; the
 * timer or the grant resumes the walk where it stopped.
 *
 * Cancellation follows the tokens. Whatever fires a token here — a
 * timeout's timer, resil_exec_cancel(), a hedge's end — then pokes the
 * execution: every lane whose wait's token has fired is woken to see it,
 * and every running attempt whose token has fired is told once. Resuming
 * after a wake goes through the same steps the blocking executor takes
 * after an interrupted sleep, so a cancelled wait reads exactly as it does
 * there.
 *
 * Hedging runs attempts in lanes: each hedged attempt walks the levels
 * below the hedging strategy in a lane of its own (its own level records
 * and attempt handle), on the same loop. Everything else runs in lane 0.
 *
 * Reports from other threads are posted to the loop; a report made on the
 * loop's thread while the operation is still being started is held until
 * the start returns, so that the walk never re-enters itself.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_steps.h"
#include "retry_exec.h"
#include "resil/async.h"

typedef enum wait_kind { W_NONE, W_TIMER, W_QUEUE } wait_kind;
typedef enum step { GO, WAIT, DONE } step;

typedef struct level {
    resil_exec *x;
    uint32_t lane;
    uint32_t i;
    resil__frame f;     /* the frame this level was entered with */
    resil__frame inner; /* the frame it handed down */
    wait_kind wait;
    resil_timer timer;
    resil_work grant;
    union {
        struct {
            resil_instant deadline;
        } rate;
        struct {
            resil_bulkhead_ticket t;
            resil__bulk_waiter w;
        } bulk;
        struct {
            resil_cancel tok;
        } to;
        struct {
            resil__cursor k;
            resil__retry_exec rx;
            resil_exec_opts o;
            resil_retry_result res;
            resil_cancel own;
            bool has_own;
            resil_instant start, attempt_start;
        } retry;
        resil_breaker_permit permit;
    } u;
} level;

struct resil_attempt {
    resil_work work; /* first: a posted report comes back as the attempt */
    resil_exec *x;
    uint32_t lane;
    bool running;
    bool held;     /* the op or its cancel callback is running on the loop */
    bool reported; /* reported while held */
    bool told;
    resil_attempt_cancel_fn on_cancel;
    void *cancel_ud;
    resil_attempt_ctx ctx;
    resil_outcome outcome;
};

typedef struct lane {
    int32_t waiting; /* the level waiting in this lane, or -1 */
    resil_outcome out;
} lane;

struct resil_exec {
    const resil_pipeline *p;
    resil_loop *loop;
    resil_async_op_fn op;
    resil_async_done_fn done;
    void *done_ud;
    resil_call call;
    resil__run run;
    resil__exec ex;
    resil_pipeline_result result;
    resil_instant start;
    resil_cancel root;
    int refs;
    bool finished;
    uint32_t nlanes;
    size_t nnodes;
    lane *lanes;
    level *levels;
    resil_attempt *attempts;
};

static void descend(resil_exec *x, uint32_t ln, size_t i, const resil__frame *f);
static void ascend(resil_exec *x, uint32_t ln, size_t i);
static void poke(resil_exec *x);

static level *lvl(resil_exec *x, uint32_t ln, size_t i) { return &x->levels[ln * x->nnodes + i]; }

static const resil__run *run_of(const resil_exec *x) { return &x->run; }

/* ---- memory ------------------------------------------------------------------- */

static void unref(resil_exec *x)
{
    if (--x->refs > 0)
        return;
    resil_cancel_destroy(&x->root);
    if (x->p->registry != NULL)
        resil_breaker_free(x->run.breaker);
    free(x);
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static resil_exec *alloc_exec(const resil_pipeline *p, uint32_t nlanes)
{
    size_t head = align8(sizeof(resil_exec));
    size_t lanes = align8(nlanes * sizeof(lane));
    size_t levels = align8((size_t)nlanes * p->nnodes * sizeof(level));
    size_t attempts = nlanes * sizeof(resil_attempt);
    char *mem = calloc(1, head + lanes + levels + attempts);
    if (mem == NULL)
        return NULL;
    resil_exec *x = (resil_exec *)mem;
    x->nlanes = nlanes;
    x->nnodes = p->nnodes;
    x->lanes = (lane *)(mem + head);
    x->levels = (level *)(mem + head + lanes);
    x->attempts = (resil_attempt *)(mem + head + lanes + levels);
    return x;
}

/* ---- timers and waits ------------------------------------------------------------ */

static void timer_start(resil_exec *x, level *L, resil_duration d)
{
    x->loop->ops->timer_start(x->loop->self, &L->timer, d > 0 ? d : 0);
}

static void timer_stop(resil_exec *x, level *L)
{
    x->loop->ops->timer_stop(x->loop->self, &L->timer);
}

static void suspend(level *L, wait_kind w)
{
    L->wait = w;
    L->x->lanes[L->lane].waiting = (int32_t)L->i;
}

static void resume(level *L)
{
    L->wait = W_NONE;
    L->x->lanes[L->lane].waiting = -1;
}

/* The level is done waiting and the walk goes on below it. */
static void go_on(level *L) { descend(L->x, L->lane, L->i + 1, &L->inner); }

/* The level ended the walk below it with the lane's outcome. */
static void end_here(level *L)
{
    if (L->i == 0) {
        ascend(L->x, L->lane, SIZE_MAX);
        return;
    }
    ascend(L->x, L->lane, L->i - 1);
}

/* ---- rate limiter --------------------------------------------------------------- */

static step rate_round(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    resil_duration wait;
    resil_instant now = resil__ratelimit_now(n->ratelimit);
    int rc = resil__ratelimit_round(n->ratelimit, 1, L->f.cancel, now, L->u.rate.deadline, &wait);
    if (rc == RESIL__RATE_WAIT) {
        timer_start(L->x, L, wait);
        suspend(L, W_TIMER);
        return WAIT;
    }
    if (!resil__rate_admit(r, &L->f, rc, RESIL_NO_HINT, &L->x->lanes[L->lane].out))
        return DONE;
    L->inner = L->f;
    L->inner.now = resil__read_now(r);
    return GO;
}

/* The wait is over (or a token fired): the next round. */
static void rate_again(level *L)
{
    resume(L);
    step s = rate_round(L);
    if (s == GO)
        go_on(L);
    else if (s == DONE)
        end_here(L);
}

static step rate_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    resil_outcome *out = &L->x->lanes[L->lane].out;
    L->inner = L->f;
    if (n->rate_wait == 0) {
        resil_duration hint = RESIL_NO_HINT;
        int rc = resil__rate_try(n, &L->f, &hint);
        return resil__rate_admit(r, &L->f, rc, hint, out) ? GO : DONE;
    }
    resil_duration wait;
    if (resil__rate_budget(n, &L->f, &wait) != 0)
        return resil__rate_admit(r, &L->f, RESIL_ETIMEDOUT, RESIL_NO_HINT, out) ? GO : DONE;
    L->u.rate.deadline = resil_dur_add(resil__ratelimit_now(n->ratelimit), wait);
    return rate_round(L);
}

/* ---- bulkhead ---------------------------------------------------------------------- */

static void granted_on_loop(resil_work *w);

/* Under the bulkhead's lock, on whichever thread released: post only. */
static void granted(resil__bulk_waiter *w)
{
    level *L = (level *)((char *)w - offsetof(level, u.bulk.w));
    L->x->loop->ops->post(L->x->loop->self, &L->grant);
}

static step bulk_admitted(level *L)
{
    L->inner = L->f;
    if (L->u.bulk.t.queued > 0)
        L->inner.now = resil__read_now(run_of(L->x));
    return GO;
}

static void granted_on_loop(resil_work *w)
{
    level *L = (level *)((char *)w - offsetof(level, grant));
    const resil__node *n = resil__node_at(run_of(L->x), L->i);
    timer_stop(L->x, L);
    resume(L);
    resil__bulkhead_granted(n->bulkhead, &L->u.bulk.w, &L->u.bulk.t);
    bulk_admitted(L);
    go_on(L);
}

static step bulk_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    L->u.bulk.w.on_grant = granted;
    L->grant.fn = granted_on_loop;
    int rc = resil__bulkhead_join(n->bulkhead, L->f.cancel, &L->u.bulk.w, &L->u.bulk.t);
    if (rc == RESIL__BULK_QUEUED) {
        resil_duration limit = resil__bulkhead_queue_timeout(n->bulkhead);
        if (limit > 0)
            timer_start(L->x, L, limit);
        suspend(L, W_QUEUE);
        return WAIT;
    }
    if (!resil__bulkhead_admit(r, &L->f, rc, &L->x->lanes[L->lane].out))
        return DONE;
    return bulk_admitted(L);
}

/* The queue wait ended for `why`; a grant that got there first wins and
 * arrives as posted work. */
static void bulk_give_up(level *L, int why)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    if (!resil__bulkhead_withdraw(n->bulkhead, &L->u.bulk.w, why))
        return;
    timer_stop(L->x, L);
    resume(L);
    resil__bulkhead_admit(r, &L->f, why, &L->x->lanes[L->lane].out);
    end_here(L);
}

/* ---- timeouts ------------------------------------------------------------------------ */

static step timeout_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    if (!resil__timeout_enter(r, n, &L->f, &L->u.to.tok, &L->inner, &L->x->lanes[L->lane].out))
        return DONE;
    /* An enclosing deadline that comes first has its own timer. */
    if (L->inner.deadline < L->f.deadline)
        timer_start(L->x, L, resil_dur_sub(L->inner.deadline, L->f.now));
    return GO;
}

/* ---- retry ------------------------------------------------------------------------------ */

static step retry_stop(level *L, resil_stop s)
{
    const resil__run *r = run_of(L->x);
    resil__rx_end(&L->u.retry.rx, s, L->u.retry.start);
    if (L->u.retry.has_own)
        resil_cancel_destroy(&L->u.retry.own);
    if (r->ex != NULL)
        resil__retry_keep_result(r, &L->u.retry.res, &L->u.retry.k);
    L->x->lanes[L->lane].out = L->u.retry.res.final;
    return DONE;
}

/* Before each attempt: the frame below, as the blocking retry's attempt
 * hands it down. */
static step retry_attempt(level *L)
{
    resil__cursor *k = &L->u.retry.k;
    resil__retry_exec *rx = &L->u.retry.rx;
    resil_stop s = resil__rx_next(rx, k);
    if (s != RESIL_STOP_NONE)
        return retry_stop(L, s);
    L->u.retry.attempt_start = rx->now;
    k->last = &rx->ctx;
    L->inner = (resil__frame){rx->ctx.attempt, 0, k->latest.now, rx->ctx.deadline,
                              rx->ctx.cancel, k->attempt_deadline_token, &k->latest};
    return GO;
}

static step retry_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    resil__cursor *k = &L->u.retry.k;
    resil__cursor_init(k, r, L->i, &L->f);
    resil_cancel *cancel = L->f.cancel;
    L->u.retry.has_own =
        n->policy.max_total > 0 && resil_cancel_init(&L->u.retry.own, L->f.cancel) == 0;
    if (L->u.retry.has_own)
        cancel = k->attempt_deadline_token = &L->u.retry.own;
    L->u.retry.o = (resil_exec_opts){.clock = &k->base,
                                     .rng = r->rng,
                                     .cancel = cancel,
                                     .deadline = L->f.deadline,
                                     .non_idempotent = r->non_idempotent,
                                     .records = r->ex != NULL ? r->records : NULL,
                                     .records_cap = r->records_cap};
    if (resil__listening(r->p)) {
        L->u.retry.o.on_attempt = resil__retry_report_attempt;
        L->u.retry.o.on_attempt_ud = k;
    }
    resil_stop s = resil__rx_begin(&L->u.retry.rx, &n->run_policy, &L->u.retry.o,
                                   &L->u.retry.res, &L->u.retry.start);
    if (s != RESIL_STOP_NONE)
        return retry_stop(L, s);
    return retry_attempt(L);
}

/* After the wait (`slept` as a sleep would say): the next attempt, or the
 * stop. */
static void retry_woke(level *L, int slept)
{
    resume(L);
    resil_stop s = resil__rx_woke(&L->u.retry.rx, slept);
    step st = s != RESIL_STOP_NONE ? retry_stop(L, s) : retry_attempt(L);
    if (st == GO)
        go_on(L);
    else
        end_here(L);
}

/* The attempt's outcome came up: true when the walk goes on from here
 * (a wait began), false when the retry stopped with the lane's outcome. */
static bool retry_leave(level *L)
{
    resil__retry_exec *rx = &L->u.retry.rx;
    rx->out->final = L->x->lanes[L->lane].out;
    resil_retry_decision d = resil__rx_decide(rx, L->u.retry.attempt_start);
    if (d.stop != RESIL_STOP_NONE) {
        retry_stop(L, d.stop);
        return false;
    }
    resil__rx_announce(rx, &d, &L->u.retry.k);
    timer_start(L->x, L, d.wait);
    suspend(L, W_TIMER);
    return true;
}

/* ---- the timer of any level ------------------------------------------------------------- */

static void level_timer(resil_timer *t)
{
    level *L = (level *)((char *)t - offsetof(level, timer));
    resil_exec *x = L->x;
    switch (x->p->nodes[L->i].kind) {
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        resil_cancel_fire_reason(&L->u.to.tok, RESIL_ETIMEDOUT);
        poke(x);
        return;
    case RESIL_STRATEGY_RATE_LIMITER:
        rate_again(L);
        return;
    case RESIL_STRATEGY_BULKHEAD:
        bulk_give_up(L, RESIL_ETIMEDOUT);
        return;
    case RESIL_STRATEGY_RETRY:
        retry_woke(L, 0);
        return;
    default:
        return;
    }
}

/* The token a waiting level's wait listens to, as its blocking sleep would. */
static resil_cancel *wait_token(const level *L)
{
    if (L->x->p->nodes[L->i].kind == RESIL_STRATEGY_RETRY)
        return L->u.retry.o.cancel;
    return L->f.cancel;
}

/* A token fired above a waiting level: the wait ends as a cancelled sleep
 * ends. */
static void wake(level *L)
{
    resil_exec *x = L->x;
    switch (x->p->nodes[L->i].kind) {
    case RESIL_STRATEGY_RATE_LIMITER:
        timer_stop(x, L);
        rate_again(L); /* a round sees the fired token first */
        return;
    case RESIL_STRATEGY_BULKHEAD:
        bulk_give_up(L, RESIL_ECANCELED);
        return;
    case RESIL_STRATEGY_RETRY:
        timer_stop(x, L);
        retry_woke(L, RESIL_ECANCELED);
        return;
    default:
        return;
    }
}

/* ---- attempts ----------------------------------------------------------------------------- */

static void tell(resil_attempt *a)
{
    a->told = true;
    if (a->on_cancel == NULL)
        return;
    a->held = true;
    a->on_cancel(a, a->cancel_ud);
    a->held = false;
}

static void arrive(resil_attempt *a)
{
    resil_exec *x = a->x;
    a->running = false;
    x->lanes[a->lane].out = a->outcome;
    ascend(x, a->lane, x->nnodes - 1);
    unref(x);
}

/* After the op or its cancel callback returned: a report made meanwhile. */
static void release_hold(resil_attempt *a)
{
    if (a->reported) {
        a->reported = false;
        arrive(a);
    }
}

static void arrive_posted(resil_work *w) { arrive((resil_attempt *)w); }

static void start_attempt(resil_exec *x, uint32_t ln, const resil__frame *f)
{
    resil_attempt *a = &x->attempts[ln];
    a->x = x;
    a->lane = ln;
    a->work.fn = arrive_posted;
    a->running = true;
    a->reported = a->told = false;
    a->on_cancel = NULL;
    a->cancel_ud = NULL;
    a->ctx = (resil_attempt_ctx){f->attempt, f->deadline, f->cancel, x->p->clock, x->run.user,
                                 f->hedge};
    x->refs++;
    a->held = true;
    x->op(a, &a->ctx);
    a->held = false;
    if (a->reported) {
        release_hold(a);
        return;
    }
    if (resil_cancelled(a->ctx.cancel) && !a->told) {
        tell(a);
        release_hold(a);
    }
}

void resil_attempt_done(resil_attempt *a, const resil_outcome *o)
{
    if (a == NULL || o == NULL)
        return;
    resil_loop *loop = a->x->loop;
    a->outcome = *o;
    if (loop->ops->in_loop != NULL && loop->ops->in_loop(loop->self)) {
        if (a->held)
            a->reported = true;
        else
            arrive(a);
        return;
    }
    loop->ops->post(loop->self, &a->work);
}

void resil_attempt_on_cancel(resil_attempt *a, resil_attempt_cancel_fn fn, void *ud)
{
    if (a == NULL)
        return;
    a->on_cancel = fn;
    a->cancel_ud = ud;
}

/* ---- the walk ------------------------------------------------------------------------------ */

static step enter(level *L)
{
    const resil__run *r = run_of(L->x);
    resil_outcome *out = &L->x->lanes[L->lane].out;
    L->inner = L->f;
    switch (r->p->nodes[L->i].kind) {
    case RESIL_STRATEGY_RATE_LIMITER:
        return rate_enter(L);
    case RESIL_STRATEGY_BULKHEAD:
        return bulk_enter(L);
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        return timeout_enter(L);
    case RESIL_STRATEGY_RETRY:
        return retry_enter(L);
    case RESIL_STRATEGY_BREAKER:
        return resil__breaker_enter(r, &L->f, &L->u.permit, out) ? GO : DONE;
    case RESIL_STRATEGY_DEGRADE:
        return resil__degrade_enter(r, L->i, &L->f, out) ? GO : DONE;
    default:
        return GO;
    }
}

static void descend(resil_exec *x, uint32_t ln, size_t i, const resil__frame *f)
{
    for (; i < x->nnodes; i++) {
        level *L = lvl(x, ln, i);
        L->f = *f;
        step s = enter(L);
        if (s == WAIT)
            return;
        if (s == DONE) {
            end_here(L);
            return;
        }
        f = &L->inner;
    }
    start_attempt(x, ln, f);
}

/* Leave level L with the lane's outcome: false when the walk stays here
 * (the retry waits to go again). */
static bool leave(level *L)
{
    const resil__run *r = run_of(L->x);
    resil_outcome *out = &L->x->lanes[L->lane].out;
    switch (r->p->nodes[L->i].kind) {
    case RESIL_STRATEGY_BULKHEAD:
        resil_bulkhead_release(&L->u.bulk.t);
        return true;
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        timer_stop(L->x, L);
        resil__timeout_leave(r, resil__node_at(r, L->i), &L->f, &L->inner, out);
        return true;
    case RESIL_STRATEGY_RETRY:
        return !retry_leave(L);
    case RESIL_STRATEGY_BREAKER:
        resil__breaker_leave(r, L->i, &L->f, &L->u.permit, out);
        return true;
    case RESIL_STRATEGY_FALLBACK:
        resil__fallback_leave(r, L->i, &L->f, out);
        return true;
    case RESIL_STRATEGY_DEGRADE:
        resil__degrade_leave(r, L->i, out);
        return true;
    default:
        return true;
    }
}

static void finish(resil_exec *x);

/* Levels i, i-1, ... 0 leave in turn (SIZE_MAX: none is left). */
static void ascend(resil_exec *x, uint32_t ln, size_t i)
{
    for (; i != SIZE_MAX; i--)
        if (!leave(lvl(x, ln, i)))
            return;
    finish(x);
}

/* ---- cancelling ----------------------------------------------------------------------------- */

static void poke_lane(resil_exec *x, uint32_t ln)
{
    lane *l = &x->lanes[ln];
    if (l->waiting >= 0) {
        level *L = lvl(x, ln, (size_t)l->waiting);
        if (resil_cancelled(wait_token(L)))
            wake(L);
        return;
    }
    resil_attempt *a = &x->attempts[ln];
    if (a->running && !a->told && resil_cancelled(a->ctx.cancel)) {
        tell(a);
        release_hold(a);
    }
}

/* A token fired: every wait and attempt under it hears of it. The
 * execution is held alive meanwhile (a report inside a cancel callback may
 * end it). */
static void poke(resil_exec *x)
{
    x->refs++;
    for (uint32_t ln = 0; ln < x->nlanes && !x->finished; ln++)
        poke_lane(x, ln);
    unref(x);
}

void resil_exec_cancel(resil_exec *x)
{
    if (x == NULL || x->finished)
        return;
    resil_cancel_fire(&x->root);
    poke(x);
}

/* ---- start and finish --------------------------------------------------------------------- */

static void report_execution(const resil_exec *x)
{
    resil_event ev;
    resil__event_init(&ev, x->p, RESIL_EVENT_EXECUTION, RESIL_STRATEGY_NONE, x->ex.last_now);
    ev.key = x->run.operation != NULL ? x->run.operation : "";
    ev.attempt = x->result.attempts;
    ev.duration = x->result.elapsed;
    ev.stop = x->result.stop;
    ev.outcome = &x->result.outcome;
    resil__emit(x->p, &ev);
}

/* The walk came out at the top: the same epilogue as the blocking
 * executor's. */
static void finish(resil_exec *x)
{
    resil_pipeline_result *out = &x->result;
    out->outcome = x->lanes[0].out;
    if (!out->fallback)
        out->cause = out->outcome;
    out->rejected_by = resil__rejected_by(&out->cause);
    if (out->rejected_by == RESIL_STRATEGY_NONE && out->stop == RESIL_STOP_REFUSED)
        out->rejected_by = RESIL_STRATEGY_RETRY;
    out->elapsed = resil_dur_sub(x->ex.last_now, x->start);
    if (resil__listening(x->p))
        report_execution(x);
    x->finished = true;
    x->done(out, x->done_ud);
    unref(x);
}

static int resolve_breaker(resil_exec *x)
{
    const resil_pipeline *p = x->p;
    if (p->registry == NULL)
        return 0;
    const char *key = x->call.key;
    if (key == NULL || key[0] == '\0')
        key = x->call.operation != NULL && x->call.operation[0] != '\0' ? x->call.operation
                                                                          : p->name;
    int rc = resil_registry_get(p->registry, key, NULL, &x->run.breaker, NULL);
    if (rc == 0)
        x->run.key = resil_breaker_name(x->run.breaker);
    return rc;
}

/* Strategies whose waits have no timer form yet: hedging, chaos, the
 * adaptive limiter and client-side throttling. */
static bool unsupported(const resil_pipeline *p)
{
    for (size_t i = 0; i < p->nnodes; i++) {
        switch (p->nodes[i].kind) {
        case RESIL_STRATEGY_RATE_LIMITER:
        case RESIL_STRATEGY_BULKHEAD:
        case RESIL_STRATEGY_TOTAL_TIMEOUT:
        case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        case RESIL_STRATEGY_RETRY:
        case RESIL_STRATEGY_BREAKER:
        case RESIL_STRATEGY_FALLBACK:
        case RESIL_STRATEGY_DEGRADE:
            continue;
        default:
            return true;
        }
    }
    return false;
}

int resil_pipeline_start(const resil_pipeline *p, resil_loop *loop, resil_async_op_fn op,
                         const resil_call *call, resil_async_done_fn done, void *done_ud,
                         resil_exec **out)
{
    if (p == NULL || loop == NULL || loop->ops == NULL || op == NULL || done == NULL)
        return RESIL_EINVAL;
    if (unsupported(p))
        return RESIL_EUNSUPPORTED;
    resil_exec *x = alloc_exec(p, 1);
    if (x == NULL)
        return RESIL_ENOMEM;
    if (call != NULL)
        x->call = *call;
    else
        resil_call_default(&x->call);
    x->p = p;
    x->loop = loop;
    x->op = op;
    x->done = done;
    x->done_ud = done_ud;
    x->run = (resil__run){p, NULL, x->call.user, p->breaker, x->call.key, x->call.operation,
                          x->call.priority, x->call.non_idempotent, x->call.rng,
                          x->call.records, x->call.records_cap, &x->ex};
    x->ex.out = &x->result;
    int rc = resolve_breaker(x);
    if (rc == 0 && resil_cancel_init(&x->root, x->call.cancel) != 0)
        rc = RESIL_ESYS;
    if (rc != 0) {
        if (p->registry != NULL && x->run.breaker != NULL)
            resil_breaker_free(x->run.breaker);
        free(x);
        return rc;
    }
    for (uint32_t ln = 0; ln < x->nlanes; ln++) {
        x->lanes[ln].waiting = -1;
        for (size_t i = 0; i < x->nnodes; i++) {
            level *L = lvl(x, ln, i);
            L->x = x;
            L->lane = ln;
            L->i = (uint32_t)i;
            L->timer.fn = level_timer;
        }
    }
    x->refs = 1;
    if (out != NULL)
        *out = x;
    x->start = x->ex.last_now = resil_clock_now(p->clock);
    resil__frame f = {0, 0, x->start, RESIL_INSTANT_MAX, &x->root, NULL, NULL};
    descend(x, 0, 0, &f);
    return 0;
}
