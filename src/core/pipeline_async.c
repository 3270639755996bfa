/*
 * pipeline_async.c — a pipeline executed on an event loop.
 *
 * The blocking walk keeps one stack frame per strategy; here each strategy
 * gets a level record instead, in the execution's single block, and
 * the walk moves down (descend: each strategy's enter step) and up
 * (ascend: each strategy's leave step) across timers and reports. The
 * steps are the blocking ones (pipeline_steps.h, retry_exec.h): only the
 * way a wait is spent differs. A level's frame is the one the level
 * above hands down, by address: only a level that changes the frame (a
 * timeout, a retry, a level after its wait) writes a frame of its own,
 * which stays put while the levels below it run. A level that must wait
 * arms its timer (a retry's backoff, a rate limiter's wait, a bulkhead's
 * queue timeout) or joins a queue, notes that its lane is waiting there,
 * and returns; the timer or the grant resumes the walk where it stopped.
 * A timeout's timer waits for the walk to stop before it is armed (owe,
 * pay_owed): most walks never stop, their operation reporting before its
 * start returns. The block, and every level's fixed fields in it, are
 * laid out once per pipeline (shape) and kept by the loop for the next
 * execution. The standard pipeline's walk is the same walk with each
 * level's kind known (walk_down_standard, ascend_standard), as the
 * blocking executor runs that shape in one step: no decision differs,
 * only the dispatch by kind is gone.
 *
 * Cancellation follows the tokens. Whatever fires a token here — a
 * timeout's timer, resil_exec_cancel(), a hedge's end, the caller's own
 * token fired from any thread (heard through the loop's post queue) —
 * then pokes the execution: every lane whose wait's token has fired is
 * woken to see it, and every running attempt whose token has fired is
 * told once. Resuming after a wake goes through the same steps the
 * blocking executor takes after an interrupted sleep, so a cancelled wait
 * reads exactly as it does there.
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

typedef enum wait_kind { W_NONE, W_TIMER, W_QUEUE, W_LOSERS } wait_kind;
typedef enum step { GO, WAIT, DONE } step;

typedef struct level {
    resil_exec *x;
    uint32_t lane;
    uint32_t i;
    resil_strategy_kind kind; /* the node's, read on every step */
    resil_outcome *out;       /* the lane's outcome */
    const resil__frame *f;    /* the frame this level was entered with */
    const resil__frame *down; /* the frame it hands down: f, or inner */
    resil__frame inner;       /* its own, for a level that changes the frame */
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
            resil_limiter_ticket lt; /* the adaptive limiter's */
        } bulk;
        struct {
            resil_instant start;
        } thr;
        struct {
            bool injected;
            bool cut; /* the wait ends at the deadline */
        } chaos;
        struct {
            resil_cancel tok;
            bool owed;               /* its timer is yet to be armed (x->owed) */
            struct level *owed_next; /* the one entered before, in x->owed */
        } to;
        struct {
            resil__cursor k;
            resil__retry_exec rx;
            resil_exec_opts o;
            resil_retry_result res;
            resil_cancel own;
            bool has_own;
            bool first; /* the first attempt runs without the executor */
            resil__reading first_end;
            resil_instant start, attempt_start;
        } retry;
        resil_breaker_permit permit;
        struct {
            resil__hedger h;
            uint32_t launched, finished;
            int winner; /* -1 until an acceptable outcome arrives */
            bool news;  /* an attempt failed since the level last looked */
            bool looking;
            bool decided;
            uint32_t race;                     /* this race's number, in its lanes */
            uint32_t lane_of[RESIL_HEDGE_MAX + 1];
        } hedge;
    } u;
} level;

struct resil_attempt {
    resil_work work; /* first: a posted report comes back as the attempt */
    resil_exec *x;  /* x and lane: fixed (shape) */
    uint32_t lane;
    bool running;
    bool held;     /* the op or its cancel callback is running on the loop */
    bool reported; /* reported while held */
    bool told;
    resil_attempt_cancel_fn on_cancel;
    void *cancel_ud;
    resil_attempt_ctx ctx;
    resil_outcome outcome; /* a report from another thread, until the loop takes it */
};

typedef struct lane {
    int32_t waiting; /* the level waiting in this lane, or -1 */
    /* a hedged attempt's lane: */
    resil_outcome out; /* its outcome (the caller's lane's is the result's, out_of) */
    bool busy;        /* launched, and not yet back at the hedging level */
    bool back;        /* back, its outcome in `out`, the race not yet decided */
    uint32_t race;    /* the race it was launched for */
    uint32_t index;   /* its hedge index in that race */
    uint32_t attempt;       /* the retry's attempt it hedges */
    resil_instant launched; /* when */
    resil_cancel tok; /* its own token, a root as a worker's is */
    resil__frame frame;     /* the frame its walk starts with */
} lane;

struct resil_exec {
    const resil_pipeline *p;
    resil_loop *loop;
    resil_async_op_fn op;
    resil_async_done_fn done;
    void *done_ud;
    resil__exec ex;
    resil_instant start;
    size_t cap; /* the block's size, for the loop's spares */
    uint64_t shaped_for; /* the serial of the pipeline shape() last laid the block out for */
    int refs;
    bool finished;
    uint32_t nlanes;
    size_t nnodes;
    size_t hedge_at; /* the hedging level, SIZE_MAX for none */
    bool at_instants; /* the pipeline's clock is the loop's, which takes instants */
    bool reserves;    /* the loop reserves timers' places: timeouts are owed */
    bool retry_last;  /* the last level is a retry: a report leaves it first (arrive) */
    bool standard;    /* the standard pipeline's levels: walked with their kinds known */
    uint32_t races;
    lane *lanes;
    level *levels;
    resil_attempt *attempts;
    resil_pipeline_result result;
    resil__run run;
    resil_cancel root;
    /* The caller's token, watched while the execution runs (heard_fire):
     * its fire is posted to the loop as `heard`, which pokes. */
    bool watching;
    resil__cancel_watch watch;
    resil_work heard;
    atomic_bool heard_posted; /* posted, and not yet run */
    /* Timeout levels entered whose timers are not armed yet, the last
     * entered first (pay_owed). */
    level *owed;
    resil__frame frame;     /* the walk's first */
    resil_exec_trace trace; /* run.trace points here when traced */
};

static void descend(resil_exec *x, uint32_t ln, size_t i, const resil__frame *f);
static void ascend(resil_exec *x, uint32_t ln, size_t i);
static void poke(resil_exec *x);
static void wake(level *L);
static resil_cancel *wait_token(const level *L);
static void let_go_of_breakers(resil_exec *x);

static level *lvl(resil_exec *x, uint32_t ln, size_t i) { return &x->levels[ln * x->nnodes + i]; }

static const resil__run *run_of(const resil_exec *x) { return &x->run; }

/* Where a lane's walk carries its outcome: the caller's lane carries it in
 * the result, as the blocking walk does, so that it arrives there without
 * a copy; a hedged attempt's lane in its own. */
static resil_outcome *out_of(resil_exec *x, uint32_t ln)
{
    return ln == 0 ? &x->result.outcome : &x->lanes[ln].out;
}

/* ---- memory ------------------------------------------------------------------- */

static void release(resil_exec *x) { resil__loop_give(x->loop, x, x->cap); }

/* The last reference went: the block goes back to the loop, unless the
 * caller's fire is still posted, in which case heard_cancel gives it
 * back. The breakers went already (let_go_of_breakers): the pipeline may
 * be gone by now. */
static void last_unref(resil_exec *x)
{
    resil__cancel_destroy(&x->root);
    if (atomic_load_explicit(&x->heard_posted, memory_order_relaxed))
        return;
    release(x);
}

static inline void unref(resil_exec *x)
{
    if (--x->refs == 0)
        last_unref(x);
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static void level_timer(resil_timer *t);
static void granted(resil__bulk_waiter *w);
static void granted_on_loop(resil_work *w);

/* A level's fixed fields, and its timer idle as a loop first sees one
 * (its other fields are written when it is armed). */
static void level_init(level *L, resil_exec *x, uint32_t ln, size_t i, resil_strategy_kind kind,
                       resil_outcome *out)
{
    L->x = x;
    L->lane = ln;
    L->i = (uint32_t)i;
    L->kind = kind;
    L->out = out;
    L->down = &L->inner; /* a timeout's or a retry's always; the others' say on entry */
    L->timer.fn = level_timer;
    L->timer.armed = false;
    L->timer.reserved = false;
    L->timer.loop_data = NULL;
    if (kind == RESIL_STRATEGY_BULKHEAD || kind == RESIL_STRATEGY_ADAPTIVE_LIMITER) {
        L->u.bulk.w.on_grant = granted; /* the bulkhead writes neither */
        L->grant.fn = granted_on_loop;
    }
}

/* What depends on the pipeline, the loop and the block alone: where the
 * lanes, levels and attempts lie, what the executor asks of the pipeline
 * on every step, and every level's and attempt's fixed fields. A block
 * an execution of the same pipeline gave back (the loop's spares are the
 * loop's own) has all of it already, and its timers idle (an execution
 * ends with none armed; one reserved and never armed needs nothing). */
static void shape(resil_exec *x, const resil_pipeline *p, uint32_t nlanes, size_t lanes_at,
                  size_t levels_at, size_t attempts_at)
{
    char *mem = (char *)x;
    resil_loop *loop = x->loop;
    x->nlanes = nlanes;
    x->nnodes = p->nnodes;
    x->lanes = (lane *)(mem + lanes_at);
    x->levels = (level *)(mem + levels_at);
    x->attempts = (resil_attempt *)(mem + attempts_at);
    x->hedge_at = p->hedge_at;
    x->retry_last = p->nodes[p->nnodes - 1].kind == RESIL_STRATEGY_RETRY;
    x->standard = p->standard;
    x->at_instants = p->clock == &loop->clock &&
                     RESIL__OPS_HAS(resil_loop_ops, loop->ops, timer_start_at);
    x->reserves = RESIL__OPS_HAS(resil_loop_ops, loop->ops, timer_reserve);
    for (uint32_t ln = 0; ln < nlanes; ln++) {
        for (size_t i = 0; i < p->nnodes; i++)
            level_init(lvl(x, ln, i), x, ln, i, p->nodes[i].kind, out_of(x, ln));
        x->attempts[ln].x = x;
        x->attempts[ln].lane = ln;
    }
    x->shaped_for = p->serial;
}

/* The block comes from the loop's spares and is not zeroed, as the
 * blocking walk's stack is not: the head's fields are set here, in
 * shape() unless the block held an execution of the same pipeline, and
 * in resil_pipeline_start (the result's as the blocking executor sets
 * them, the trace only when the execution is traced, and nothing reads it
 * otherwise); each lane and attempt gets the fields read before its first
 * use there too; a level's strategy state is written by its enter step
 * before anything reads it, a lane's outcome by the step or the report
 * that ends its walk. After the attempts, `kept` bytes hold copies of the
 * call's names (kept_at). */
static resil_exec *alloc_exec(const resil_pipeline *p, resil_loop *loop, uint32_t nlanes,
                              size_t kept)
{
    size_t head = align8(sizeof(resil_exec));
    size_t lanes = align8(nlanes * sizeof(lane));
    size_t levels = align8((size_t)nlanes * p->nnodes * sizeof(level));
    size_t attempts = align8(nlanes * sizeof(resil_attempt));
    size_t cap;
    bool spared;
    char *mem = resil__loop_take(loop, head + lanes + levels + attempts + kept, &cap, &spared);
    if (mem == NULL)
        return NULL;
    resil_exec *x = (resil_exec *)mem;
    x->cap = cap;
    x->loop = loop; /* in the spare list's bytes */
    x->finished = false;
    x->races = 0;
    x->owed = NULL;
    if (!spared || x->shaped_for != p->serial)
        shape(x, p, nlanes, head, head + lanes, head + lanes + levels);
    return x;
}

/* The bytes the call's names take there: a hedge's loser may report after
 * `done`, when the call's memory is the caller's again (none without
 * hedging). The size is taken before the breakers: a key they change is a
 * registry breaker's name, which is not copied (resil__run_keep). */
static size_t kept_size(const resil_pipeline *p, const resil_call *call, uint32_t nlanes)
{
    return nlanes == 1 ? 0 : resil__call_kept_size(p, call);
}

static char *kept_at(resil_exec *x)
{
    return (char *)x->attempts + align8(x->nlanes * sizeof(resil_attempt));
}

/* ---- timers and waits ------------------------------------------------------------ */

static void timer_start(resil_exec *x, level *L, resil_duration d)
{
    x->loop->ops->timer_start(x->loop->self, &L->timer, d > 0 ? d : 0);
}

/* A wait of `d` from `read_at`, a reading of the pipeline's clock: when
 * that clock is the loop's and the loop takes instants, the timer is set
 * for the instant and the loop needs no reading of its own (the wait then
 * counts from the reading its decision was made on, not from the arming a
 * few instructions later). */
static void timer_from(resil_exec *x, level *L, resil_instant read_at, resil_duration d)
{
    if (!x->at_instants) {
        timer_start(x, L, d);
        return;
    }
    x->loop->ops->timer_start_at(x->loop->self, &L->timer,
                                 resil__add_sat(read_at, d > 0 ? d : 0));
}

static void timer_stop(resil_exec *x, level *L)
{
    x->loop->ops->timer_stop(x->loop->self, &L->timer);
}

/*
 * On a loop that reserves timers' places (timer_reserve), a timeout's
 * timer is armed only once the execution has something to wait for.
 * Entering a timeout level reserves its timer's place among timers due at
 * one instant and notes the level as owed; when the walk stops (a level
 * waits, or an attempt is left running) the owed timers are armed. A walk
 * that runs down and back up without stopping (an operation that reports
 * at once) leaves each owed level unarmed, and the loop's timers are not
 * touched. The reservation keeps the order a timer armed on entry would
 * have had, whatever was started before the arming: a timer the operation
 * starts for its deadline's instant still runs after the timeout's, so on
 * either path an attempt that reaches its deadline has timed out. A loop
 * without reservations has each timer armed as its level is entered.
 */
static void owe(resil_exec *x, level *L)
{
    x->loop->ops->timer_reserve(x->loop->self, &L->timer);
    L->u.to.owed = true;
    L->u.to.owed_next = x->owed;
    x->owed = L;
}

/* The level is left unarmed: no longer owed. */
static void forgive(resil_exec *x, level *L)
{
    level **p = &x->owed;
    while (*p != L)
        p = &(*p)->u.to.owed_next;
    *p = L->u.to.owed_next;
    L->u.to.owed = false;
}

/* A timeout level's timer, for its deadline counted from `from`, a
 * reading of the pipeline's clock. */
static void arm_timeout(resil_exec *x, level *L, resil_instant from)
{
    timer_from(x, L, from, resil__sub_sat(L->inner.deadline, from));
}

/* Each owed timer armed for its deadline: on a loop with instants from
 * the reading its level was entered on, as it would have been then;
 * otherwise for what is left of it now (a reading for the arming alone,
 * which no decision and no result sees). */
__attribute__((noinline)) static void arm_owed(resil_exec *x)
{
    resil_instant now = x->at_instants ? 0 : resil__pipeline_now(x->p);
    for (level *L = x->owed; L != NULL; L = L->u.to.owed_next) {
        L->u.to.owed = false;
        arm_timeout(x, L, x->at_instants ? L->f->now : now);
    }
    x->owed = NULL;
}

static inline void pay_owed(resil_exec *x)
{
    if (x->owed != NULL)
        arm_owed(x);
}

static void suspend(level *L, wait_kind w)
{
    pay_owed(L->x);
    L->wait = w;
    L->x->lanes[L->lane].waiting = (int32_t)L->i;
}

static void resume(level *L)
{
    L->wait = W_NONE;
    L->x->lanes[L->lane].waiting = -1;
}

static void start_attempt(resil_exec *x, uint32_t ln, const resil__frame *f);

/* The level is done waiting and the walk goes on below it: straight to the
 * attempt from the last level (a retry's next attempt, as a rule), without
 * the walk's frame for entering levels. */
static void go_on(level *L)
{
    resil_exec *x = L->x;
    if (L->i + 1 == x->nnodes) {
        start_attempt(x, L->lane, L->down);
        return;
    }
    descend(x, L->lane, L->i + 1, L->down);
}

/* The level ended the walk below it with the lane's outcome. */
static void end_here(level *L)
{
    if (L->i == 0) {
        ascend(L->x, L->lane, SIZE_MAX);
        return;
    }
    ascend(L->x, L->lane, L->i - 1);
}

/* The level hands down the frame it was entered with, read again at
 * `now` (after its wait). */
static void hand_down_read(level *L, resil_instant now)
{
    L->inner = *L->f;
    L->inner.now = now;
    L->down = &L->inner;
}

/* The level hands down the frame it was entered with, later (after its
 * injected latency or behaviour), as the blocking chaos step does. */
static void hand_down_later(level *L)
{
    resil__frame_later(run_of(L->x), L->f, &L->inner);
    L->down = &L->inner;
}

/* ---- rate limiter --------------------------------------------------------------- */

static step rate_round(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    resil_duration wait;
    resil_instant now = resil__ratelimit_now(n->ratelimit);
    int rc = resil__ratelimit_round(n->ratelimit, 1, L->f->cancel, now, L->u.rate.deadline, &wait);
    if (rc == RESIL__RATE_WAIT) {
        timer_start(L->x, L, wait);
        suspend(L, W_TIMER);
        return WAIT;
    }
    if (!resil__rate_admit(r, L->f, rc, RESIL_NO_HINT, L->out))
        return DONE;
    hand_down_read(L, resil__read_now(r));
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
    resil_outcome *out = L->out;
    L->down = L->f;
    resil_duration wait = resil__rate_wait(n, L->f);
    if (wait == 0) {
        resil_duration hint = RESIL_NO_HINT;
        int rc = resil__rate_try(n, L->f, &hint);
        return resil__rate_admit(r, L->f, rc, hint, out) ? GO : DONE;
    }
    L->u.rate.deadline = resil_dur_add(resil__ratelimit_now(n->ratelimit), wait);
    return rate_round(L);
}

/* ---- bulkhead ---------------------------------------------------------------------- */

/* Under the bulkhead's lock, on whichever thread released: post only. */
static void granted(resil__bulk_waiter *w)
{
    level *L = (level *)((char *)w - offsetof(level, u.bulk.w));
    L->x->loop->ops->post(L->x->loop->self, &L->grant);
}

static const resil__node *node_of(const level *L) { return resil__node_at(run_of(L->x), L->i); }

static bool is_limiter(const level *L)
{
    return L->kind == RESIL_STRATEGY_ADAPTIVE_LIMITER;
}

/* The limiter's reading of now: the frame's when it shares the pipeline's clock. */
static resil_instant limiter_now(const level *L, const resil__node *n)
{
    return n->same_clock ? L->f->now : resil_clock_now(resil__limiter_clock(n->limiter));
}

/* The queue the level waits in: a bulkhead's, or the adaptive limiter's
 * (a bulkhead whose bound moves). */
static resil_bulkhead *queue_of(const level *L)
{
    const resil__node *n = node_of(L);
    return is_limiter(L) ? resil__limiter_bulkhead(n->limiter) : n->bulkhead;
}

static bool bulk_admit(level *L, int rc)
{
    resil_outcome *out = L->out;
    if (!is_limiter(L))
        return resil__bulkhead_admit(run_of(L->x), L->f, rc, out);
    if (rc == 0)
        return true;
    resil__limiter_refuse(run_of(L->x), L->f, rc, out);
    return false;
}

static step bulk_admitted(level *L)
{
    const resil__node *n = node_of(L);
    bool queued = L->u.bulk.t.queued > 0;
    if (queued)
        hand_down_read(L, resil__read_now(run_of(L->x)));
    else
        L->down = L->f;
    if (is_limiter(L)) {
        resil_instant now =
            queued ? resil_clock_now(resil__limiter_clock(n->limiter)) : limiter_now(L, n);
        resil__limiter_granted(n->limiter, &L->u.bulk.lt, now, L->u.bulk.t.queued);
    }
    return GO;
}

/* Another implementation's limiter: tried without queueing. */
static step limiter_try(level *L)
{
    const resil__node *n = node_of(L);
    resil_instant now = limiter_now(L, n);
    int rc = resil_limiter_try_acquire_at(n->limiter, now, &L->u.bulk.lt);
    L->down = L->f;
    return bulk_admit(L, rc) ? GO : DONE;
}

/* The adaptive limiter's permit this thread parked after its last call, if
 * it has one (adaptive.c): no queue then. */
static bool limiter_parked(level *L)
{
    const resil__node *n = node_of(L);
    resil_instant now = limiter_now(L, n);
    if (!resil__limiter_take_parked(n->limiter, now, &L->u.bulk.lt))
        return false;
    L->down = L->f;
    return true;
}

static void granted_on_loop(resil_work *w)
{
    level *L = (level *)((char *)w - offsetof(level, grant));
    timer_stop(L->x, L);
    resume(L);
    resil__bulkhead_granted(queue_of(L), &L->u.bulk.w, &L->u.bulk.t);
    bulk_admitted(L);
    go_on(L);
}

static RESIL__ALWAYS_INLINE step bulk_enter(level *L)
{
    resil_bulkhead *q = queue_of(L);
    if (q == NULL)
        return limiter_try(L);
    if (is_limiter(L) && limiter_parked(L))
        return GO;
    int rc = resil__bulkhead_join(q, L->f->cancel, &L->u.bulk.w, &L->u.bulk.t);
    if (rc == RESIL__BULK_QUEUED) {
        resil_duration limit = resil__bulkhead_queue_timeout(q);
        if (limit > 0)
            timer_start(L->x, L, limit);
        suspend(L, W_QUEUE);
        return WAIT;
    }
    if (!bulk_admit(L, rc))
        return DONE;
    return bulk_admitted(L);
}

/* The queue wait ended for `why`; a grant that got there first wins and
 * arrives as posted work. */
static void bulk_give_up(level *L, int why)
{
    if (!resil__bulkhead_withdraw(queue_of(L), &L->u.bulk.w, why))
        return;
    timer_stop(L->x, L);
    resume(L);
    bulk_admit(L, why);
    end_here(L);
}

/* A level whose step ran the caller's code (a hook, a listener) between
 * looking at its token and setting its wait: a cancel made there poked
 * while nothing was waiting, so the wait ends as it begins, as a sleep on
 * a fired token does. Called once the wait is set. */
static void hear_a_cancel_before_the_wait(level *L)
{
    if (resil__token_fired(wait_token(L)))
        wake(L);
}

/* ---- chaos ------------------------------------------------------------------------------ */

/* The injected latency as a timer, bounded by the frame's deadline as the
 * blocking sleep is (resil__sleep_bounded). */
static step chaos_wait(level *L)
{
    const resil__run *r = run_of(L->x);
    resil_duration d = resil__node_at(r, L->i)->chaos_opts.latency;
    L->u.chaos.cut = false;
    if (L->f->deadline != RESIL_INSTANT_MAX) {
        resil_duration left = resil_dur_sub(L->f->deadline, resil_clock_now(r->p->clock));
        if (left <= 0) {
            if (L->f->deadline_token != NULL)
                resil_cancel_fire_reason(L->f->deadline_token, RESIL_ETIMEDOUT);
            resil__chaos_cut(L->out);
            resil__read_now(r);
            return DONE;
        }
        L->u.chaos.cut = d >= left;
        d = L->u.chaos.cut ? left : d;
    }
    timer_start(L->x, L, d);
    suspend(L, W_TIMER);
    hear_a_cancel_before_the_wait(L); /* from the injection's listener */
    return WAIT;
}

static step chaos_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    L->u.chaos.injected = resil_chaos_decide(n->chaos);
    if (!L->u.chaos.injected)
        return GO;
    resil_outcome *out = L->out;
    bool listening = resil__listening(r->p);
    switch (n->chaos_opts.kind) {
    case RESIL_CHAOS_FAULT:
        *out = n->chaos_opts.outcome;
        if (listening)
            resil__chaos_report(r, n, L->f, out);
        return DONE;
    case RESIL_CHAOS_OUTCOME:
        return GO;
    case RESIL_CHAOS_LATENCY:
        if (listening)
            resil__chaos_report(r, n, L->f, NULL);
        return chaos_wait(L);
    case RESIL_CHAOS_BEHAVIOR:
        if (listening)
            resil__chaos_report(r, n, L->f, NULL);
        resil__chaos_behave(r, n, L->f);
        hand_down_later(L);
        return GO;
    }
    return GO;
}

/* The latency's timer (or a token above it) ended the wait. */
static void chaos_woke(level *L, bool cancelled)
{
    const resil__run *r = run_of(L->x);
    resume(L);
    if (!cancelled && !L->u.chaos.cut) {
        hand_down_later(L);
        go_on(L);
        return;
    }
    if (!cancelled && L->f->deadline_token != NULL)
        resil_cancel_fire_reason(L->f->deadline_token, RESIL_ETIMEDOUT);
    resil__chaos_cut(L->out);
    resil__read_now(r);
    end_here(L);
}

static void chaos_leave(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    if (!L->u.chaos.injected || n->chaos_opts.kind != RESIL_CHAOS_OUTCOME)
        return;
    resil_outcome *out = L->out;
    *out = n->chaos_opts.outcome;
    if (resil__listening(r->p))
        resil__chaos_report(r, n, L->f, out);
}

/* ---- timeouts ------------------------------------------------------------------------ */

static RESIL__ALWAYS_INLINE step timeout_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    if (!resil__timeout_enter(r, n, L->f, &L->u.to.tok, &L->inner, L->out))
        return DONE;
    L->u.to.owed = false;
    /* An enclosing deadline that comes first has its own timer. */
    if (L->inner.deadline >= L->f->deadline)
        return GO;
    if (L->x->reserves)
        owe(L->x, L);
    else
        arm_timeout(L->x, L, L->f->now);
    return GO;
}

/* ---- retry ------------------------------------------------------------------------------ */

/* The run ended with `s`. Its final outcome is already the lane's: the
 * executor keeps it there (retry_begin). */
static step retry_stop(level *L, resil_stop s)
{
    const resil__run *r = run_of(L->x);
    resil__rx_end(&L->u.retry.rx, s, L->u.retry.start);
    if (L->u.retry.has_own)
        resil__cancel_destroy(&L->u.retry.own);
    if (r->ex != NULL)
        resil__retry_keep_result(r, &L->u.retry.res, &L->u.retry.k);
    /* An untimed run read no clock on the way: its end is read once here,
     * where the blocking executor's last reading was taken. */
    if (!L->u.retry.rx.timed && L->u.retry.res.attempts > 0 && r->ex != NULL)
        resil__read_now(r);
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

/* Whether a strategy below the retry at `i` reads the frame's time: a
 * deadline's, a limiter's or a hedge's clock, chaos's latency. The breaker
 * (which reads its own), the fallback, the degradation gate and the
 * operation do not. Without one of these, and without a deadline, a
 * record or a hook, the retry reads the clock only at its end (for the
 * result's elapsed): a zero wait then costs no reading at all. */
static bool time_read_below(const resil__run *r, size_t i)
{
    for (size_t j = i + 1; j < r->p->nnodes; j++) {
        resil_strategy_kind k = r->p->nodes[j].kind;
        if (k != RESIL_STRATEGY_BREAKER && k != RESIL_STRATEGY_FALLBACK &&
            k != RESIL_STRATEGY_DEGRADE)
            return true;
    }
    return false;
}

/* The executor's start: its cursor, token and options, and its begin. */
static resil_stop retry_begin(level *L)
{
    const resil__run *r = run_of(L->x);
    const resil__node *n = resil__node_at(r, L->i);
    resil__cursor *k = &L->u.retry.k;
    resil__cursor_init(k, r, L->i, L->f);
    resil_cancel *cancel = L->f->cancel;
    L->u.retry.has_own =
        n->policy.max_total > 0 && resil__cancel_init(&L->u.retry.own, L->f->cancel) == 0;
    if (L->u.retry.has_own)
        cancel = k->attempt_deadline_token = &L->u.retry.own;
    resil__retry_opts(&L->u.retry.o, r, L->f, cancel, k);
    if (L->f->deadline == RESIL_INSTANT_MAX)
        L->u.retry.o.measure_elapsed = time_read_below(r, L->i);
    resil_stop s = resil__rx_begin(&L->u.retry.rx, &n->run_policy, &L->u.retry.o,
                                   &L->u.retry.res, &L->u.retry.start);
    /* Each attempt's outcome arrives in the lane's, where the executor
     * decides on it and leaves the final one: no copy into the level's
     * result and back (the lane's outcome is written only by the walk below
     * this level, which runs only between a decision and the next). */
    L->u.retry.rx.final = L->out;
    return s;
}

static RESIL__ALWAYS_INLINE step retry_enter(level *L)
{
    const resil__run *r = run_of(L->x);
    L->u.retry.first = resil__retry_first_alone(r, resil__node_at(r, L->i), L->f);
    if (L->u.retry.first) {
        L->inner = resil__retry_first_frame(L->f, &L->u.retry.first_end);
        return GO;
    }
    resil_stop s = retry_begin(L);
    if (s != RESIL_STOP_NONE)
        return retry_stop(L, s);
    return retry_attempt(L);
}

/* The first attempt, run without the executor, failed: the executor
 * begins, after it as the blocking one does, and takes it as its attempt
 * 1 (the token was looked at before it). false when the executor stopped
 * before deciding on it. */
static bool retry_take_first(level *L)
{
    resil_stop s = retry_begin(L);
    if (s != RESIL_STOP_NONE) {
        retry_stop(L, s);
        return false;
    }
    resil__rx_next_looking(&L->u.retry.rx, &L->u.retry.k, false);
    L->u.retry.attempt_start = L->u.retry.rx.now;
    L->u.retry.k.last = &L->u.retry.rx.ctx;
    L->u.retry.k.latest = L->u.retry.first_end;
    return true;
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
 * (a wait began, or began and ended), false when the retry stopped with
 * the lane's outcome. */
static RESIL__ALWAYS_INLINE bool retry_leave(level *L)
{
    if (L->u.retry.first) {
        const resil__run *r = run_of(L->x);
        L->u.retry.first = false;
        if (L->out->kind == RESIL_SUCCESS) {
            resil__retry_first_succeeded(r, resil__node_at(r, L->i), L->f,
                                         &L->u.retry.first_end, L->out);
            return false;
        }
        if (!retry_take_first(L))
            return false;
    }
    resil__retry_exec *rx = &L->u.retry.rx;
    resil_retry_decision d = resil__rx_decide(rx, L->u.retry.attempt_start);
    if (d.stop != RESIL_STOP_NONE) {
        retry_stop(L, d.stop);
        return false;
    }
    resil__rx_announce(rx, &d, &L->u.retry.k);
    if (rx->timed)
        timer_from(L->x, L, rx->now, d.wait);
    else
        timer_start(L->x, L, d.wait);
    suspend(L, W_TIMER);
    if (rx->policy->on_retry != NULL) /* the hook, or a listener of the retry */
        hear_a_cancel_before_the_wait(L);
    return true;
}

/* ---- hedging ----------------------------------------------------------------------------
 *
 * The hedging level lives in lane 0; each attempt it launches walks the
 * levels below it in a lane of its own with its own root token, as a
 * worker does. A lane is busy until its walk is back at the hedging level:
 * a loser of an earlier race (a retry above goes again) may still be
 * finishing, so there are two races' worth of lanes, and a launch that
 * finds none free is refused as a busy pool refuses it. The decisions are
 * the blocking hedge's (resil__hedger, hedge.c). */

static void poke(resil_exec *x);

static level *hedge_level(resil_exec *x) { return lvl(x, 0, x->hedge_at); }

static bool hedge_launch(level *L, uint32_t index, resil_instant now)
{
    resil_exec *x = L->x;
    for (uint32_t ln = 1; ln < x->nlanes; ln++) {
        lane *l = &x->lanes[ln];
        if (l->busy)
            continue;
        if (resil__cancel_init(&l->tok, NULL) != 0)
            return false;
        l->busy = true;
        l->back = false;
        l->race = L->u.hedge.race;
        l->index = index;
        l->attempt = L->f->attempt;
        l->launched = now;
        L->u.hedge.lane_of[index] = ln;
        L->u.hedge.launched++;
        x->refs++;
        l->frame = *L->f;
        l->frame.cancel = l->frame.deadline_token = &l->tok;
        l->frame.hedge = index;
        l->frame.reading = NULL;
        descend(x, ln, L->i + 1, &l->frame);
        return true;
    }
    return false;
}

static void hedge_once(level *L, bool after_failure, resil_instant now)
{
    resil__hedger *h = &L->u.hedge.h;
    if (!resil__hedger_pay(h, after_failure, now))
        return;
    if (!hedge_launch(L, h->next, now)) {
        h->no_more = true;
        return;
    }
    resil__hedger_launched(h, now);
}

static void fire_lanes(level *L, int except, int reason)
{
    for (uint32_t k = 0; k < L->u.hedge.launched; k++)
        if ((int)k != except)
            resil_cancel_fire_reason(&L->x->lanes[L->u.hedge.lane_of[k]].tok, reason);
}

/* The race is over: free the lanes already back, then leave the level
 * (once the losers are back too, with wait_losers). */
static void hedge_end(level *L)
{
    resil_exec *x = L->x;
    if (resil__node_at(run_of(x), L->i)->hedge.wait_losers &&
        L->u.hedge.finished < L->u.hedge.launched) {
        suspend(L, W_LOSERS);
        return;
    }
    resume(L);
    resil__hedger_note(run_of(x), L->u.hedge.launched, L->u.hedge.winner);
    end_here(L);
}

static void free_lane(lane *l)
{
    l->busy = l->back = false;
    resil__cancel_destroy(&l->tok);
}

static void hedge_decide(level *L, resil_outcome o, int except, int reason)
{
    L->u.hedge.decided = true;
    for (uint32_t k = 0; k < L->u.hedge.launched; k++) {
        lane *l = &L->x->lanes[L->u.hedge.lane_of[k]];
        if (l->back)
            free_lane(l);
    }
    *out_of(L->x, 0) = o;
    fire_lanes(L, except, reason);
    poke(L->x);
    hedge_end(L);
}

/* The blocking caller's loop (hedge.c's race_on) between two waits. */
static void hedge_look(level *L, resil_instant now)
{
    resil_exec *x = L->x;
    resil__hedger *h = &L->u.hedge.h;
    L->u.hedge.looking = true;
    for (;;) {
        bool failed = L->u.hedge.news;
        L->u.hedge.news = false;
        int winner = L->u.hedge.winner;
        if (winner >= 0 ||
            (L->u.hedge.finished == L->u.hedge.launched && !resil__hedger_may(h))) {
            uint32_t from = L->u.hedge.lane_of[winner >= 0 ? winner : 0];
            L->u.hedge.looking = false;
            hedge_decide(L, x->lanes[from].out, winner, RESIL_ECANCELED);
            return;
        }
        if (resil__token_fired(L->f->cancel) || now >= L->f->deadline) {
            int reason;
            resil_outcome o = resil__hedger_stopped(h, &reason);
            L->u.hedge.looking = false;
            hedge_decide(L, o, -1, reason);
            return;
        }
        if (resil__hedger_due(h, failed, now)) {
            hedge_once(L, failed, now);
            continue;
        }
        break;
    }
    L->u.hedge.looking = false;
    resil_instant alarm = resil__hedger_alarm(h);
    if (alarm != RESIL_INSTANT_MAX)
        timer_start(x, L, resil_dur_sub(alarm, now));
    suspend(L, W_TIMER);
}

static step hedge_enter(level *L)
{
    resil_exec *x = L->x;
    resil__hedger *h = &L->u.hedge.h;
    resil__hedger_init(h, run_of(x), L->i, L->f);
    L->u.hedge.launched = L->u.hedge.finished = 0;
    L->u.hedge.winner = -1;
    L->u.hedge.news = L->u.hedge.decided = false;
    L->u.hedge.race = ++x->races;
    L->u.hedge.looking = true;
    L->wait = W_NONE; /* read on the hedging level alone */
    bool started = hedge_launch(L, 0, h->primary_start);
    if (started && h->n->hedge.delay == 0)
        while (resil__hedger_may(h))
            hedge_once(L, false, h->primary_start);
    L->u.hedge.looking = false;
    if (!started) {
        /* Nowhere to run it hedged: as with a busy pool, the walk goes
         * on unhedged, in the caller's lane. */
        L->u.hedge.decided = true;
        descend(x, 0, L->i + 1, L->f);
        return WAIT;
    }
    hedge_look(L, h->primary_start);
    return WAIT;
}

/* A lane's walk came back up to the hedging level. */
static void hedge_arrived(resil_exec *x, uint32_t ln)
{
    level *L = hedge_level(x);
    if (ln == 0) { /* the unhedged walk */
        end_here(L);
        return;
    }
    lane *l = &x->lanes[ln];
    bool current = l->race == L->u.hedge.race;
    l->back = true;
    if (l->index > 0)
        resil__hedge_ended(run_of(x), l->attempt, l->index, l->launched, &l->out);
    if (current) {
        L->u.hedge.finished++;
        if (!L->u.hedge.decided && L->u.hedge.winner < 0 &&
            resil__hedger_acceptable(&L->u.hedge.h, &l->tok, l->index, &l->out)) {
            L->u.hedge.winner = (int)l->index;
        } else if (!L->u.hedge.decided) {
            L->u.hedge.news = true;
            L->u.hedge.h.last_failure = l->out;
        }
    }
    if (!current || L->u.hedge.decided)
        free_lane(l);
    if (current && !L->u.hedge.decided && !L->u.hedge.looking && L->wait == W_TIMER) {
        timer_stop(x, L);
        resume(L);
        hedge_look(L, resil__read_now(run_of(x)));
    } else if (current && L->wait == W_LOSERS && L->u.hedge.finished == L->u.hedge.launched) {
        hedge_end(L);
    }
    if (x->finished) /* a loser, back after the end */
        let_go_of_breakers(x);
    unref(x);
}

/* ---- the timer of any level ------------------------------------------------------------- */

static void level_timer(resil_timer *t)
{
    level *L = (level *)((char *)t - offsetof(level, timer));
    resil_exec *x = L->x;
    switch (L->kind) {
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        resil_cancel_fire_reason(&L->u.to.tok, RESIL_ETIMEDOUT);
        poke(x);
        return;
    case RESIL_STRATEGY_RATE_LIMITER:
        rate_again(L);
        return;
    case RESIL_STRATEGY_BULKHEAD:
    case RESIL_STRATEGY_ADAPTIVE_LIMITER:
        bulk_give_up(L, RESIL_ETIMEDOUT);
        return;
    case RESIL_STRATEGY_RETRY:
        retry_woke(L, 0);
        return;
    case RESIL_STRATEGY_CHAOS_LATENCY:
        chaos_woke(L, false);
        return;
    case RESIL_STRATEGY_HEDGING:
        resume(L);
        hedge_look(L, resil__read_now(run_of(x)));
        return;
    default:
        return;
    }
}

/* The token a waiting level's wait listens to, as its blocking sleep would. */
static resil_cancel *wait_token(const level *L)
{
    if (L->kind == RESIL_STRATEGY_RETRY)
        return L->u.retry.o.cancel;
    return L->f->cancel;
}

/* A token fired above a waiting level: the wait ends as a cancelled sleep
 * ends. */
static void wake(level *L)
{
    resil_exec *x = L->x;
    switch (L->kind) {
    case RESIL_STRATEGY_RATE_LIMITER:
        timer_stop(x, L);
        rate_again(L); /* a round sees the fired token first */
        return;
    case RESIL_STRATEGY_BULKHEAD:
    case RESIL_STRATEGY_ADAPTIVE_LIMITER:
        bulk_give_up(L, RESIL_ECANCELED);
        return;
    case RESIL_STRATEGY_RETRY:
        timer_stop(x, L);
        retry_woke(L, RESIL_ECANCELED);
        return;
    case RESIL_STRATEGY_CHAOS_LATENCY:
        timer_stop(x, L);
        chaos_woke(L, true);
        return;
    case RESIL_STRATEGY_HEDGING:
        if (L->wait == W_LOSERS)
            return;
        timer_stop(x, L);
        resume(L);
        hedge_look(L, resil__read_now(run_of(x)));
        return;
    default:
        return;
    }
}

/* ---- attempts ----------------------------------------------------------------------------- */

/* Run the attempt's cancel callback, holding a report it makes until it
 * returns. Told from inside its own operation (which cancelled its
 * execution), the attempt stays held: the start takes the report once the
 * operation has returned. */
static void tell(resil_attempt *a)
{
    a->told = true;
    if (a->on_cancel == NULL)
        return;
    bool in_op = a->held;
    a->held = true;
    a->on_cancel(a, a->cancel_ud);
    a->held = in_op;
}

static bool retry_leave(level *L);

/* The report goes up from the last level: a retry there (the level a
 * report meets most often) leaves first, without the walk up's frame. */
static void arrive(resil_attempt *a)
{
    resil_exec *x = a->x;
    a->running = false;
    if (x->retry_last) {
        level *L = lvl(x, a->lane, x->nnodes - 1);
        if (!retry_leave(L))
            end_here(L);
        unref(x);
        return;
    }
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

/* A report from another thread: its outcome waited in the attempt. */
static void arrive_posted(resil_work *w)
{
    resil_attempt *a = (resil_attempt *)w;
    *out_of(a->x, a->lane) = a->outcome;
    arrive(a);
}

/* The attempt whose operation this thread is inside (start_attempt), or
 * NULL: a report it makes before returning, the common case of an
 * operation that finishes at once, is known to be on the loop's thread
 * without asking the loop (an indirect call and a thread-id comparison). */
static _Thread_local resil_attempt *op_running RESIL__INITIAL_EXEC;

static void start_attempt(resil_exec *x, uint32_t ln, const resil__frame *f)
{
    resil_attempt *a = &x->attempts[ln];
    a->running = true;
    a->reported = a->told = false;
    a->on_cancel = NULL; /* cancel_ud is read only beside one */
    a->ctx = resil__frame_ctx(&x->run, f);
    x->refs++;
    resil_attempt *outer = op_running; /* an operation may start another execution */
    op_running = a;
    a->held = true;
    x->op(a, &a->ctx);
    a->held = false;
    op_running = outer;
    if (a->reported) {
        release_hold(a);
        return;
    }
    pay_owed(x); /* the attempt runs on: its timeouts' timers are due */
    if (resil__token_fired(a->ctx.cancel) && !a->told) {
        tell(a);
        release_hold(a);
    }
}

/* Whether the caller is on the loop's thread, when the loop can say: a
 * table whose size stops before in_loop has none, whatever lies past its
 * end. */
static bool on_loop_thread(const resil_loop *loop)
{
    return RESIL__OPS_HAS(resil_loop_ops, loop->ops, in_loop) && loop->ops->in_loop(loop->self);
}

/* A report from outside the attempt's own operation: on the loop's
 * thread, or posted to it. Out of line, so that the report made from
 * inside the operation (the common one) runs without a frame. */
__attribute__((noinline)) static void report_outside(resil_attempt *a, const resil_outcome *o)
{
    resil_loop *loop = a->x->loop;
    if (on_loop_thread(loop)) {
        /* The lane's walk waits at the attempt: nothing else writes its
         * outcome until the attempt arrives. */
        *out_of(a->x, a->lane) = *o;
        if (a->held)
            a->reported = true;
        else
            arrive(a);
        return;
    }
    a->outcome = *o;
    a->work.fn = arrive_posted;
    loop->ops->post(loop->self, &a->work);
}

void resil_attempt_done(resil_attempt *a, const resil_outcome *o)
{
    if (a == NULL || o == NULL)
        return;
    if (a != op_running) {
        report_outside(a, o);
        return;
    }
    *out_of(a->x, a->lane) = *o; /* from inside its operation: held */
    a->reported = true;
}

void resil_attempt_on_cancel(resil_attempt *a, resil_attempt_cancel_fn fn, void *ud)
{
    if (a == NULL)
        return;
    a->on_cancel = fn;
    a->cancel_ud = ud;
}

/* ---- the walk ------------------------------------------------------------------------------ */

/* Each step says which frame it hands down: the one it was entered with
 * (L->f, no copy), or its own (L->inner), which a timeout (its deadline),
 * a retry (its attempt) and a level after its wait (a later reading)
 * write. */
static RESIL__ALWAYS_INLINE step enter_as(level *L, resil_strategy_kind kind)
{
    const resil__run *r = run_of(L->x);
    resil_outcome *out = L->out;
    switch (kind) {
    case RESIL_STRATEGY_RATE_LIMITER:
        return rate_enter(L);
    case RESIL_STRATEGY_BULKHEAD:
    case RESIL_STRATEGY_ADAPTIVE_LIMITER:
        return bulk_enter(L);
    case RESIL_STRATEGY_THROTTLE:
        L->down = L->f;
        return resil__throttle_enter(r, resil__node_at(r, L->i), L->f, &L->u.thr.start, out)
                   ? GO
                   : DONE;
    case RESIL_STRATEGY_CHAOS_FAULT:
    case RESIL_STRATEGY_CHAOS_OUTCOME:
    case RESIL_STRATEGY_CHAOS_LATENCY:
    case RESIL_STRATEGY_CHAOS_BEHAVIOR:
        L->down = L->f;
        return chaos_enter(L);
    case RESIL_STRATEGY_HEDGING:
        L->down = L->f;
        return hedge_enter(L);
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        return timeout_enter(L);
    case RESIL_STRATEGY_RETRY:
        return retry_enter(L);
    case RESIL_STRATEGY_BREAKER:
        L->down = L->f;
        return resil__breaker_enter(r, L->f, &L->u.permit, out) ? GO : DONE;
    case RESIL_STRATEGY_DEGRADE:
        L->down = L->f;
        return resil__degrade_enter(r, L->i, L->f, out) ? GO : DONE;
    default:
        L->down = L->f;
        return GO;
    }
}

/* The generic walk's entry step, out of line. The standard shape's own
 * steps (the bulkhead's, the timeouts', the retry's, and the retry's
 * leave) are always inlined: into the standard walk, where each kind is
 * known, and once here, so that the generic walk itself stays small for
 * a pipeline of few levels (one retry's, as a rule). */
static __attribute__((noinline)) step enter(level *L) { return enter_as(L, L->kind); }

/* Level *at was entered with `s` (the `last` level starts the attempt):
 * false when the walk stops there (a wait, an end, or the attempt
 * started below it), else *at is the level below. */
static RESIL__ALWAYS_INLINE bool went_down(resil_exec *x, uint32_t ln, level **at, step s,
                                           bool last)
{
    level *L = *at;
    if (s == WAIT)
        return false;
    if (s == DONE) {
        end_here(L);
        return false;
    }
    if (last) {
        start_attempt(x, ln, L->down);
        return false;
    }
    level *below = L + 1;
    below->f = L->down;
    *at = below;
    return true;
}

/* The standard pipeline's walk down from level L, the kinds known: the
 * shape's own list (resil__standard_shape), by place. */
static void walk_down_standard(resil_exec *x, uint32_t ln, level *L)
{
    switch (L->i) {
    case 0:
        if (!went_down(x, ln, &L, enter_as(L, resil__standard_shape[0]), false))
            return;
        /* fall through */
    case 1:
        if (!went_down(x, ln, &L, enter_as(L, resil__standard_shape[1]), false))
            return;
        /* fall through */
    case 2:
        if (!went_down(x, ln, &L, enter_as(L, resil__standard_shape[2]), false))
            return;
        /* fall through */
    case 3:
        if (!went_down(x, ln, &L, enter_as(L, resil__standard_shape[3]), false))
            return;
        /* fall through */
    default:
        (void)went_down(x, ln, &L, enter_as(L, resil__standard_shape[4]), true);
    }
}

/* The walk down from level L, whose frame is set: each level's frame is
 * the one the level above hands down, by address. */
static void walk_down(resil_exec *x, uint32_t ln, level *L)
{
    if (x->standard) {
        walk_down_standard(x, ln, L);
        return;
    }
    while (went_down(x, ln, &L, enter(L), L->i + 1 == x->nnodes))
        ;
}

static void descend(resil_exec *x, uint32_t ln, size_t i, const resil__frame *f)
{
    if (i == x->nnodes) {
        start_attempt(x, ln, f);
        return;
    }
    level *L = lvl(x, ln, i);
    L->f = f;
    walk_down(x, ln, L);
}

/* Leave level L with the lane's outcome: false when the walk stays here
 * (the retry waits to go again). */
static RESIL__ALWAYS_INLINE bool leave_as(level *L, resil_strategy_kind kind)
{
    const resil__run *r = run_of(L->x);
    resil_outcome *out = L->out;
    switch (kind) {
    case RESIL_STRATEGY_BULKHEAD:
        resil_bulkhead_release(&L->u.bulk.t);
        return true;
    case RESIL_STRATEGY_ADAPTIVE_LIMITER:
        resil__limiter_leave(r, resil__node_at(r, L->i), L->f, &L->u.bulk.lt, out);
        return true;
    case RESIL_STRATEGY_THROTTLE:
        resil__throttle_leave(r, resil__node_at(r, L->i), L->f, L->u.thr.start, out);
        return true;
    case RESIL_STRATEGY_CHAOS_FAULT:
    case RESIL_STRATEGY_CHAOS_OUTCOME:
    case RESIL_STRATEGY_CHAOS_LATENCY:
    case RESIL_STRATEGY_CHAOS_BEHAVIOR:
        chaos_leave(L);
        return true;
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        if (L->u.to.owed)
            forgive(L->x, L);
        else
            timer_stop(L->x, L);
        resil__timeout_leave(r, resil__node_at(r, L->i), L->f, &L->inner, out);
        return true;
    case RESIL_STRATEGY_RETRY:
        return !retry_leave(L);
    case RESIL_STRATEGY_BREAKER:
        resil__breaker_leave(r, L->i, L->f, &L->u.permit, out);
        return true;
    case RESIL_STRATEGY_FALLBACK:
        resil__fallback_leave(r, L->i, L->f, out);
        return true;
    case RESIL_STRATEGY_DEGRADE:
        resil__degrade_leave(r, L->i, out);
        return true;
    default:
        return true;
    }
}

static void finish(resil_exec *x);

static void hedge_arrived(resil_exec *x, uint32_t ln);

/* The standard pipeline's levels from L (its level `at`) up leave in
 * turn, the kinds known as walk_down_standard knows them. */
static void ascend_standard(resil_exec *x, level *L, size_t at)
{
    switch (at) {
    case 4:
        if (!leave_as(L--, resil__standard_shape[4]))
            return;
        /* fall through */
    case 3:
        if (!leave_as(L--, resil__standard_shape[3]))
            return;
        /* fall through */
    case 2:
        if (!leave_as(L--, resil__standard_shape[2]))
            return;
        /* fall through */
    case 1:
        if (!leave_as(L--, resil__standard_shape[1]))
            return;
        /* fall through */
    default:
        if (!leave_as(L, resil__standard_shape[0]))
            return;
    }
    finish(x);
}

/* Levels i, i-1, ... 0 leave in turn (SIZE_MAX: none is left); a hedged
 * attempt's walk ends at the hedging level. */
static void ascend(resil_exec *x, uint32_t ln, size_t i)
{
    if (i == SIZE_MAX) {
        finish(x);
        return;
    }
    if (x->standard) {
        ascend_standard(x, lvl(x, ln, i), i);
        return;
    }
    /* By place: a hedged attempt's lane never enters its own copy of the
     * hedging level (nor those above it), whose strategy state is
     * therefore never written. The levels left are those above the
     * hedging level up to i, or all up to i. */
    bool hedged = x->hedge_at <= i;
    level *top = lvl(x, ln, 0);
    level *last = hedged ? top + x->hedge_at + 1 : top;
    for (level *L = top + i + 1; L != last;) {
        L--;
        if (!leave_as(L, L->kind))
            return;
    }
    if (hedged)
        hedge_arrived(x, ln);
    else
        finish(x);
}

/* ---- cancelling ----------------------------------------------------------------------------- */

static void poke_lane(resil_exec *x, uint32_t ln)
{
    lane *l = &x->lanes[ln];
    if (l->waiting >= 0) {
        level *L = lvl(x, ln, (size_t)l->waiting);
        if (resil__token_fired(wait_token(L)))
            wake(L);
        return;
    }
    resil_attempt *a = &x->attempts[ln];
    if (a->running && !a->told && resil__token_fired(a->ctx.cancel)) {
        tell(a);
        if (!a->held)
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

/* On the loop's thread, after heard_fire: the caller's fire is passed on
 * as resil_exec_cancel() passes its own, with the caller's reason, or, if
 * the execution ended while this was posted, its block goes back to the
 * loop now. The root is fired here, not left to be seen through the
 * caller's token: a fire marks a token's children before the token
 * itself, so this may run before the caller's token reads fired. */
static void heard_cancel(resil_work *w)
{
    resil_exec *x = (resil_exec *)((char *)w - offsetof(resil_exec, heard));
    atomic_store_explicit(&x->heard_posted, false, memory_order_relaxed);
    if (x->refs == 0) {
        release(x);
        return;
    }
    if (x->finished)
        return;
    resil_cancel_fire_reason(&x->root, resil_cancel_reason(&x->watch.tok));
    poke(x);
}

/* The caller's token fired, on whatever thread fired it and inside the
 * watch's lock: the execution cannot be touched here (the fire may come
 * from inside the loop's own step), only posted to. The watch is stopped
 * before the execution ends, so the block is alive; heard_posted keeps it
 * so until the post has run. A token fires once: so does this. */
static void heard_fire(resil__cancel_watch *w)
{
    resil_exec *x = (resil_exec *)((char *)w - offsetof(resil_exec, watch));
    atomic_store_explicit(&x->heard_posted, true, memory_order_relaxed);
    x->heard.fn = heard_cancel;
    x->loop->ops->post(x->loop->self, &x->heard);
}

/* The first walk left the execution waiting (a timer, a queue, an
 * attempt in flight): from now on the caller's token is watched. An
 * execution that ends within its start (a success reported at once, a
 * refusal) never links one. A fire that came before (in the walk, or just
 * now on another thread) is posted by the watch's start, as a later one
 * is by the fire. A watch that cannot be made (a token's mutex, off
 * Linux) leaves the token looked at between steps only. */
static void watch_caller(resil_exec *x, resil_cancel *cancel)
{
    x->watching = resil__cancel_watch_start(&x->watch, cancel, heard_fire) == 0;
}

/* The caller's token is watched only while the execution runs: once it
 * has ended, the caller may destroy the token. */
static void stop_watching(resil_exec *x)
{
    if (!x->watching)
        return;
    x->watching = false;
    resil__cancel_destroy(&x->watch.tok);
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
    resil__event_init_run(&ev, &x->run, RESIL_EVENT_EXECUTION, RESIL_STRATEGY_NONE,
                          x->ex.last_now);
    ev.key = x->run.operation != NULL ? x->run.operation : "";
    ev.attempt = x->result.attempts;
    ev.duration = x->result.elapsed;
    ev.stop = x->result.stop;
    ev.outcome = &x->result.outcome;
    resil__emit(x->p, &ev);
}

/* Whether a hedge's attempt is still out (its walk not back). */
static bool lanes_out(const resil_exec *x)
{
    for (uint32_t ln = 1; ln < x->nlanes; ln++)
        if (x->lanes[ln].busy)
            return true;
    return false;
}

/* The registry's breakers the run holds go once nothing of the walk is
 * left to run: as the execution ends, or as the last of a hedge's losers
 * comes back after it. Then `done`, or the code after it, may free the
 * pipeline of an execution without losers out. */
static void let_go_of_breakers(resil_exec *x)
{
    if (x->p->registry != NULL && !lanes_out(x))
        resil__run_drop_registry_breakers(&x->run);
}

/* The walk came out at the top: the same epilogue as the blocking
 * executor's. */
static void finish(resil_exec *x)
{
    resil_pipeline_result *out = &x->result;
    resil__result_end(out);
    out->elapsed = resil__sub_sat(x->ex.last_now, x->start);
    if (resil__listening(x->p))
        report_execution(x);
    let_go_of_breakers(x);
    x->finished = true;
    stop_watching(x);
    x->done(out, x->done_ud);
    unref(x);
}

/* The shared breakers and the root token under the caller's: both or
 * neither. */
static int take_tokens(resil_exec *x, const resil_call *call)
{
    int rc = resil__run_take_breakers(&x->run, call);
    if (rc != 0)
        return rc;
    if (resil__cancel_init(&x->root, call->cancel) != 0) {
        resil__run_drop_breakers(&x->run);
        return RESIL_ESYS;
    }
    x->watching = false;
    return 0;
}

/* Lanes: the caller's, and two races' worth for a hedging level's
 * attempts (a loser of the race before may still be finishing). */
static uint32_t lanes_for(const resil_pipeline *p)
{
    if (p->hedge_at == SIZE_MAX)
        return 1;
    return 1 + 2 * (p->nodes[p->hedge_at].hedge.max_hedged + 1);
}

/* Every lane idle; the caller's lane's hedged-attempt fields are never
 * read. */
static void lanes_idle(resil_exec *x, uint32_t nlanes)
{
    x->lanes[0].waiting = -1;
    x->attempts[0].running = false;
    for (uint32_t ln = 1; ln < nlanes; ln++) {
        lane *l = &x->lanes[ln];
        l->waiting = -1;
        l->busy = l->back = false;
        x->attempts[ln].running = false;
    }
}

/* The walk from the first level, on the start's reading, in the frame
 * the execution keeps for it. A built pipeline has a level at least:
 * without a retry of its own it has a single-attempt one (pipeline.c,
 * insert_single_attempt). */
static void walk_first(resil_exec *x)
{
    level *L = lvl(x, 0, 0);
    x->frame = (resil__frame){0, 0, x->start, RESIL_INSTANT_MAX, &x->root, NULL, NULL};
    L->f = &x->frame;
    walk_down(x, 0, L);
}

int resil_pipeline_start(const resil_pipeline *p, resil_loop *loop, resil_async_op_fn op,
                         const resil_call *call, resil_async_done_fn done, void *done_ud,
                         resil_exec **out)
{
    if (p == NULL || loop == NULL || loop->ops == NULL || op == NULL || done == NULL)
        return RESIL_EINVAL;
    /* The run copies what it keeps of the call: the call is read only here. */
    if (call == NULL)
        call = &resil__call_defaults;
    uint32_t nlanes = lanes_for(p);
    size_t kept = kept_size(p, call, nlanes);
    resil_exec *x = alloc_exec(p, loop, nlanes, kept);
    if (x == NULL)
        return RESIL_ENOMEM;
    resil__result_begin(&x->result);
    memset(x->result.reserved_, 0, sizeof x->result.reserved_); /* none of an earlier one's */
    x->p = p;
    x->op = op;
    x->done = done;
    x->done_ud = done_ud;
    resil__run_init(&x->run, p, NULL, call, p->breaker, &x->ex);
    if (call->telemetry != NULL) {
        x->run.http = call->telemetry->http;
        x->run.trace = resil__trace_begin(call->telemetry->trace, call->rng, &x->trace);
    }
    x->ex.out = &x->result;
    atomic_init(&x->heard_posted, false); /* before the watch can fire */
    int rc = take_tokens(x, call);
    if (rc != 0) {
        release(x);
        return rc;
    }
    if (kept > 0)
        (void)resil__run_keep(&x->run, kept_at(x), kept);
    lanes_idle(x, nlanes);
    x->refs = 1;
    if (out != NULL)
        *out = x;
    x->start = x->ex.last_now = resil_clock_now(p->clock);
    bool watch = call->cancel != NULL;
    x->refs += watch; /* held across the first walk, which may end it */
    walk_first(x);
    if (watch) {
        if (!x->finished)
            watch_caller(x, call->cancel);
        unref(x);
    }
    return 0;
}
