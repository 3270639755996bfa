/*
 * hedge.c — the hedging strategy and the worker pool it runs attempts on.
 *
 * The caller must be free to return the moment a winner is known, so it
 * never runs an attempt itself: it only launches attempts onto workers and
 * waits. Everything the attempts share — their tokens, their outcomes, a
 * copy of the execution's inputs — lives in a race slot preallocated with
 * the pool, and the slot is reference counted (the caller plus every
 * running attempt): whoever drops the last reference recycles it, so a
 * loser that returns after the caller has gone writes into a slot that is
 * still alive and simply never read.
 *
 * The caller waits on the injected clock with a "wake" token that workers
 * fire when an attempt ends: one sleep both times the hedging delay (so the
 * fake clock drives it in tests) and ends early on news. A token fires
 * once, so the caller arms a fresh one for each wait. Attempt tokens are
 * roots, not children of the caller's token, because they may outlive the
 * caller's stack; the caller propagates its own cancellation to them by
 * hand, and the wake token (a child of the caller's) is what tells it to.
 *
 * A loser may also run after the caller has returned, so the race keeps
 * its own copies of what the run points to in the caller's memory: the
 * key, the operation's name and the HTTP attributes its events carry.
 * Only ctx->user and the hooks' user data are left to the caller
 * (hedge.h); names too long to copy make the execution wait for its
 * losers instead. The call's generator
 * is not needed: nothing below the hedging draws (a retry must come
 * before it).
 *
 * Locks: pool->mu guards the job queue, idle count and free slots;
 * race->mu guards one race's outcomes and wake token; a thread never holds
 * both. Recycling a slot takes pool->mu after race->mu is released.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipeline_steps.h"

typedef struct race race;

struct race {
    resil__hedge_pool *pool;
    race *next_free;
    pthread_mutex_t mu;
    pthread_cond_t ended; /* signalled when an attempt ends (wait_losers) */
    int refs;
    /* the execution's inputs, as a worker sees them */
    resil__run run;
    resil_exec_trace trace; /* run.trace points here when traced */
    size_t next;
    resil__frame base;
    const resil__node *node;
    resil__hedger judge; /* what hedge_on reads: the run, the base frame, the node */
    /* the run's strings, copied (resil__run_keep) */
    _Alignas(resil_http_attrs) char kept[RESIL_HEDGE_KEPT_MAX];
    bool kept_all; /* false: they did not fit, so the caller waits */
    /* the attempts */
    uint32_t launched, finished;
    int winner; /* -1 until an acceptable outcome arrives */
    bool news;  /* an attempt failed since the caller last looked */
    resil_outcome last_failure; /* the latest of those failures */
    bool armed; /* the caller is waiting on `wake` */
    resil_cancel wake;
    resil_cancel tokens[RESIL_HEDGE_MAX + 1];
    resil_outcome outcomes[RESIL_HEDGE_MAX + 1];
    resil_instant launched_at[RESIL_HEDGE_MAX + 1]; /* written before the dispatch */
};

typedef struct job {
    race *race;
    uint32_t index;
} job;

struct resil__hedge_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;
    pthread_t *threads;
    uint32_t nthreads;
    uint32_t started; /* workers running: none until the first blocking hedge */
    bool start_tried;
    uint32_t idle; /* workers not yet promised a job */
    bool stopping;
    job *queue; /* ring of nthreads jobs */
    uint32_t head, len;
    race *races;
    uint32_t nraces;
    race *free_races;
};

/* ---- options -------------------------------------------------------------- */

void resil_hedge_opts_default(resil_hedge_opts *o)
{
    memset(o, 0, sizeof *o);
    o->delay = RESIL_S(2);
    o->max_hedged = 1;
}

int resil_hedge_opts_validate(const resil_hedge_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "hedging: options must not be NULL");
    if (o->delay < 0)
        return resil__bad_duration(err, "hedging.delay", ">= 0", o->delay);
    if (o->max_hedged < 1 || o->max_hedged > RESIL_HEDGE_MAX)
        return resil_err_set(err, RESIL_EINVAL, "hedging.max_hedged must be in [1, %d], got %u",
                             RESIL_HEDGE_MAX, (unsigned)o->max_hedged);
    if (o->workers > RESIL_HEDGE_MAX_WORKERS)
        return resil_err_set(err, RESIL_EINVAL,
                             "hedging.workers must be at most %d (0 = automatic), got %u",
                             RESIL_HEDGE_MAX_WORKERS, (unsigned)o->workers);
    return 0;
}

/* ---- the pool --------------------------------------------------------------- */

/* The workers are started by the first blocking hedged execution, not with
 * the pipeline: a pipeline that only ever runs on a loop (async.h, where a
 * hedge is a concurrent operation) never makes a thread. */

static void finish_attempt(race *rc, uint32_t index, const resil_outcome *o);

static void *worker(void *arg)
{
    resil__hedge_pool *pool = arg;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (pool->len == 0 && !pool->stopping)
            pthread_cond_wait(&pool->work, &pool->mu);
        if (pool->len == 0)
            break;
        job j = pool->queue[pool->head];
        pool->head = (pool->head + 1) % pool->nthreads;
        pool->len--;
        pthread_mutex_unlock(&pool->mu);

        race *rc = j.race;
        resil__frame f = rc->base;
        /* The attempt's own token: the caller's stack, where the base
         * frame's tokens live, may be gone before this attempt ends. */
        f.cancel = f.deadline_token = &rc->tokens[j.index];
        f.hedge = j.index; /* the operation reads it in its ctx */
        resil_outcome o;
        resil__chain(&rc->run, rc->next, &f, &o);
        if (j.index > 0) /* reported before the caller can learn the race is over */
            resil__hedge_ended(&rc->run, rc->base.attempt, j.index, rc->launched_at[j.index],
                               &o);
        finish_attempt(rc, j.index, &o);

        pthread_mutex_lock(&pool->mu);
        pool->idle++;
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

static void stop_workers(resil__hedge_pool *pool, uint32_t started)
{
    pthread_mutex_lock(&pool->mu);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(pool->threads[i], NULL);
}

static void free_pool(resil__hedge_pool *pool)
{
    free(pool->races);
    free(pool->queue);
    free(pool->threads);
    free(pool);
}

static void destroy_pool(resil__hedge_pool *pool, uint32_t races_ready)
{
    for (uint32_t i = 0; i < races_ready; i++) {
        pthread_cond_destroy(&pool->races[i].ended);
        pthread_mutex_destroy(&pool->races[i].mu);
    }
    pthread_cond_destroy(&pool->work);
    pthread_mutex_destroy(&pool->mu);
    free_pool(pool);
}

/* The pool's memory: a race holds no worker while it waits out a delay,
 * so there are more races than workers; beyond that, executions run
 * unhedged. */
static resil__hedge_pool *alloc_pool(uint32_t nthreads)
{
    resil__hedge_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL)
        return NULL;
    pool->nthreads = nthreads;
    pool->nraces = 2 * nthreads;
    pool->threads = calloc(pool->nthreads, sizeof *pool->threads);
    pool->queue = calloc(pool->nthreads, sizeof *pool->queue);
    pool->races = calloc(pool->nraces, sizeof *pool->races);
    if (pool->threads != NULL && pool->queue != NULL && pool->races != NULL)
        return pool;
    free_pool(pool);
    return NULL;
}

static int init_races(resil__hedge_pool *pool, uint32_t *ready)
{
    for (*ready = 0; *ready < pool->nraces; (*ready)++) {
        race *rc = &pool->races[*ready];
        if (pthread_mutex_init(&rc->mu, NULL) != 0)
            return RESIL_ESYS;
        if (pthread_cond_init(&rc->ended, NULL) != 0) {
            pthread_mutex_destroy(&rc->mu);
            return RESIL_ESYS;
        }
        rc->pool = pool;
        rc->next_free = pool->free_races;
        pool->free_races = rc;
    }
    return 0;
}

static int start_workers(resil__hedge_pool *pool, uint32_t *started)
{
    for (*started = 0; *started < pool->nthreads; (*started)++)
        if (pthread_create(&pool->threads[*started], NULL, worker, pool) != 0)
            return RESIL_ESYS;
    return 0;
}

int resil__hedge_pool_new(const resil_hedge_opts *o, resil__hedge_pool **out)
{
    resil__hedge_pool *pool = alloc_pool(resil__hedge_workers(o));
    if (pool == NULL)
        return RESIL_ENOMEM;
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        free_pool(pool);
        return RESIL_ESYS;
    }
    if (pthread_cond_init(&pool->work, NULL) != 0) {
        pthread_mutex_destroy(&pool->mu);
        free_pool(pool);
        return RESIL_ESYS;
    }
    uint32_t ready = 0;
    int rc = init_races(pool, &ready);
    if (rc != 0) {
        destroy_pool(pool, ready);
        return rc;
    }
    *out = pool;
    return 0;
}

void resil__hedge_pool_free(resil__hedge_pool *pool)
{
    if (pool == NULL)
        return;
    stop_workers(pool, pool->started);
    destroy_pool(pool, pool->nraces);
}

/* Promise a worker to the job, or fail at once: the execution path never
 * waits for a worker. */
static bool dispatch(resil__hedge_pool *pool, race *rc, uint32_t index)
{
    pthread_mutex_lock(&pool->mu);
    if (!pool->start_tried) { /* the workers start with the first blocking hedge */
        pool->start_tried = true;
        (void)start_workers(pool, &pool->started);
        pool->idle = pool->started; /* a pool short of threads hedges less */
    }
    bool ok = pool->idle > 0 && !pool->stopping;
    if (ok) {
        pool->idle--;
        pool->queue[(pool->head + pool->len) % pool->nthreads] = (job){rc, index};
        pool->len++;
        pthread_cond_signal(&pool->work);
    }
    pthread_mutex_unlock(&pool->mu);
    return ok;
}

static race *take_race(resil__hedge_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    race *rc = pool->free_races;
    if (rc != NULL)
        pool->free_races = rc->next_free;
    pthread_mutex_unlock(&pool->mu);
    return rc;
}

/* The last reference is gone: nobody else can touch the race now. */
static void recycle(race *rc)
{
    for (uint32_t i = 0; i < rc->launched; i++)
        resil_cancel_destroy(&rc->tokens[i]);
    resil__run_drop_breakers(&rc->run);
    resil__hedge_pool *pool = rc->pool;
    pthread_mutex_lock(&pool->mu);
    rc->next_free = pool->free_races;
    pool->free_races = rc;
    pthread_mutex_unlock(&pool->mu);
}

/* Drop one reference; the caller holds rc->mu, which this releases. */
static void unref_unlock(race *rc)
{
    bool last = --rc->refs == 0;
    pthread_mutex_unlock(&rc->mu);
    if (last)
        recycle(rc);
}

/* ---- the race ---------------------------------------------------------------------- */

/* The default rule: a failure worth retrying, or a breaker's refusal.
 * Hedges exist to reach another endpoint, and a breaker is the one
 * strategy below hedging that speaks for the attempt's endpoint alone
 * (resil_call.hedge_keys), so its refusal, like Microsoft's broken
 * circuit, moves on to the next hedge. A limiter's refusal is everyone's:
 * another attempt would meet the same full limiter, so it is the answer. */
static bool hedge_on_default(const resil_outcome *o)
{
    return resil_retry_on_default(o, NULL) ||
           resil__rejected_by(o) == RESIL_STRATEGY_BREAKER;
}

/* hedge_on judges attempt `index` with that attempt's context, as its
 * operation saw it. */
static bool wants_another(const resil__hedger *h, resil_cancel *token, uint32_t index,
                          const resil_outcome *o)
{
    const resil_hedge_opts *opts = &h->n->hedge;
    if (o->kind == RESIL_SUCCESS)
        return false;
    if (opts->hedge_on == NULL)
        return hedge_on_default(o);
    resil_attempt_ctx ctx = {h->f->attempt, h->f->deadline, token, h->r->p->clock, h->r->user,
                             index, h->r->trace};
    return opts->hedge_on(o, &ctx, opts->hedge_on_ud);
}

/* A cancelled attempt never wins: it is usually a loser we fired. */
bool resil__hedger_acceptable(const resil__hedger *h, resil_cancel *token, uint32_t index,
                              const resil_outcome *o)
{
    return o->kind != RESIL_CANCELLED && !wants_another(h, token, index, o);
}

static void finish_attempt(race *rc, uint32_t index, const resil_outcome *o)
{
    pthread_mutex_lock(&rc->mu);
    rc->outcomes[index] = *o;
    rc->finished++;
    if (rc->winner < 0 && resil__hedger_acceptable(&rc->judge, &rc->tokens[index], index, o)) {
        rc->winner = (int)index;
    } else {
        rc->news = true;
        rc->last_failure = *o;
    }
    if (rc->armed)
        resil_cancel_fire(&rc->wake);
    pthread_cond_broadcast(&rc->ended);
    unref_unlock(rc);
}

/* The run as the workers see it, none of it in the caller's memory but
 * ctx->user (and, when kept_all is false, what did not fit): its trace,
 * names and breakers are the race's own. */
static void keep_run(race *rc, const resil__run *r)
{
    rc->run = *r;
    rc->run.ex = NULL;
    rc->run.records = NULL;
    rc->run.records_cap = 0;
    rc->run.rng = NULL;
    if (r->trace != NULL) {
        rc->trace = *r->trace;
        rc->run.trace = &rc->trace;
    }
    rc->kept_all = resil__run_keep(&rc->run, rc->kept, sizeof rc->kept);
    resil__run_retain_breakers(r);
}

static void open_race(race *rc, const resil__run *r, size_t i, const resil__frame *f)
{
    keep_run(rc, r);
    rc->next = i + 1;
    rc->base = *f;
    rc->base.reading = NULL; /* workers never hand readings to the retry */
    rc->node = &r->p->nodes[i];
    rc->judge = (resil__hedger){.r = &rc->run, .f = &rc->base, .n = rc->node};
    rc->refs = 1;
    rc->launched = rc->finished = 0;
    rc->winner = -1;
    rc->news = rc->armed = false;
}

static bool launch(race *rc, uint32_t index, resil_instant now)
{
    if (resil_cancel_init(&rc->tokens[index], NULL) != 0)
        return false;
    rc->launched_at[index] = now;
    pthread_mutex_lock(&rc->mu);
    rc->refs++;
    rc->launched++;
    pthread_mutex_unlock(&rc->mu);
    if (dispatch(rc->pool, rc, index))
        return true;
    pthread_mutex_lock(&rc->mu);
    rc->refs--;
    rc->launched--;
    pthread_mutex_unlock(&rc->mu);
    resil_cancel_destroy(&rc->tokens[index]);
    return false;
}

/* What the caller is doing between waits: the shared part (the budget,
 * the launches, the alarm) and the race it runs on workers. */
typedef struct hedger {
    resil__hedger h;
    race *rc;
    resil_clock *clock;
} hedger;

static void report_hedge(const resil__hedger *h, uint32_t index, resil_instant now)
{
    resil_event ev;
    resil__event_init_run(&ev, h->r, RESIL_EVENT_HEDGE, RESIL_STRATEGY_HEDGING, now);
    ev.key = h->r->operation != NULL ? h->r->operation : "";
    ev.attempt = h->f->attempt;
    ev.hedge = index;
    ev.delay = resil_dur_sub(now, h->primary_start);
    resil__emit(h->r->p, &ev);
}

static void report_denied(const resil__hedger *h, const resil_outcome *cause, resil_instant now)
{
    resil_event ev;
    resil__event_init_run(&ev, h->r, RESIL_EVENT_BUDGET_DENIED, RESIL_STRATEGY_HEDGING, now);
    ev.key = h->r->operation != NULL ? h->r->operation : "";
    ev.attempt = h->f->attempt;
    ev.hedge = h->next;
    ev.outcome = cause;
    ev.reason = resil_budget_name(h->n->hedge.budget);
    resil__emit(h->r->p, &ev);
}

void resil__hedge_ended(const resil__run *r, uint32_t attempt, uint32_t index,
                        resil_instant launched, const resil_outcome *o)
{
    if (!resil__listening(r->p))
        return;
    resil_instant now = resil_clock_now(r->p->clock);
    resil_event ev;
    resil__event_init_run(&ev, r, RESIL_EVENT_HEDGE_ENDED, RESIL_STRATEGY_HEDGING, now);
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = attempt;
    ev.hedge = index;
    ev.duration = resil_dur_sub(now, launched);
    ev.outcome = o;
    resil__emit(r->p, &ev);
}

void resil__hedger_init(resil__hedger *h, const resil__run *r, size_t i, const resil__frame *f)
{
    *h = (resil__hedger){r, f, &r->p->nodes[i], 1, false, f->now, f->now, {0}, resil_ok()};
}

bool resil__hedger_may(const resil__hedger *h)
{
    return !h->no_more && h->next <= h->n->hedge.max_hedged;
}

bool resil__hedger_due(const resil__hedger *h, bool failed, resil_instant now)
{
    return resil__hedger_may(h) &&
           (failed || now >= resil_dur_add(h->last_launch, h->n->hedge.delay));
}

bool resil__hedger_pay(resil__hedger *h, bool after_failure, resil_instant now)
{
    resil_budget *budget = h->n->hedge.budget;
    resil_outcome slow = resil_fail(RESIL_TRANSIENT, 0, "hedge: no answer yet");
    const resil_outcome *cause = after_failure ? &h->last_failure : &slow;
    if (budget == NULL || resil_budget_try_retry(budget, cause, &h->ticket))
        return true;
    h->no_more = true;
    if (resil__listening(h->r->p))
        report_denied(h, cause, now);
    return false;
}

void resil__hedger_launched(resil__hedger *h, resil_instant now)
{
    if (resil__listening(h->r->p))
        report_hedge(h, h->next, now);
    h->next++;
    h->last_launch = now;
}

resil_instant resil__hedger_alarm(const resil__hedger *h)
{
    resil_instant alarm = h->f->deadline;
    if (resil__hedger_may(h))
        alarm = resil__earlier(alarm, resil_dur_add(h->last_launch, h->n->hedge.delay));
    return alarm;
}

resil_outcome resil__hedger_stopped(const resil__hedger *h, int *reason)
{
    if (resil_cancelled(h->f->cancel)) {
        *reason = resil_cancel_reason(h->f->cancel);
        return resil_fail(RESIL_CANCELLED, *reason, "cancelled while hedging");
    }
    *reason = RESIL_ETIMEDOUT;
    if (h->f->deadline_token != NULL)
        resil_cancel_fire_reason(h->f->deadline_token, RESIL_ETIMEDOUT);
    return resil_fail(RESIL_CANCELLED, RESIL_ETIMEDOUT, "deadline passed while hedging");
}

void resil__hedger_note(const resil__run *r, uint32_t launched, int winner)
{
    if (r->ex == NULL)
        return;
    r->ex->out->hedges += launched > 0 ? launched - 1 : 0;
    r->ex->out->hedge_winner = winner > 0 ? (uint32_t)winner : 0;
}

/* Start hedge h->next if the budget pays for it and a worker is free. */
static void hedge_once(hedger *hg, bool after_failure, resil_instant now)
{
    resil__hedger *h = &hg->h;
    if (!resil__hedger_pay(h, after_failure, now))
        return;
    if (!launch(hg->rc, h->next, now)) {
        h->no_more = true;
        return;
    }
    resil__hedger_launched(h, now);
}

/* The state as the caller sees it after a wait. */
typedef enum verdict { GO_ON, WON, ALL_FAILED } verdict;

static verdict look(hedger *hg, bool *failed)
{
    race *rc = hg->rc;
    pthread_mutex_lock(&rc->mu);
    verdict v = GO_ON;
    *failed = rc->news;
    if (rc->news)
        hg->h.last_failure = rc->last_failure;
    rc->news = false;
    if (rc->winner >= 0)
        v = WON;
    else if (rc->finished == rc->launched && !resil__hedger_may(&hg->h))
        v = ALL_FAILED;
    pthread_mutex_unlock(&rc->mu);
    return v;
}

/* Wait until `until` on the clock, or news from a worker, or the caller's
 * token. */
static void wait_for_news(hedger *h, resil_instant until, resil_instant now)
{
    race *rc = h->rc;
    if (resil_cancel_init(&rc->wake, h->h.f->cancel) != 0)
        return;
    /* An attempt that ended between look() and here found nobody armed:
     * its news is already in the race, so do not sleep on it. */
    pthread_mutex_lock(&rc->mu);
    bool pending = rc->news || rc->winner >= 0;
    rc->armed = !pending;
    pthread_mutex_unlock(&rc->mu);
    if (!pending) {
        if (until == RESIL_INSTANT_MAX)
            resil_cancel_wait_until(&rc->wake, INT64_MAX);
        else
            resil_clock_sleep(h->clock, resil_dur_sub(until, now), &rc->wake);
    }
    pthread_mutex_lock(&rc->mu);
    rc->armed = false;
    pthread_mutex_unlock(&rc->mu);
    resil_cancel_destroy(&rc->wake);
}

static void fire_all(race *rc, int except, int reason)
{
    pthread_mutex_lock(&rc->mu);
    uint32_t n = rc->launched;
    pthread_mutex_unlock(&rc->mu);
    for (uint32_t i = 0; i < n; i++)
        if ((int)i != except)
            resil_cancel_fire_reason(&rc->tokens[i], reason);
}

static void await_losers(race *rc)
{
    pthread_mutex_lock(&rc->mu);
    while (rc->finished < rc->launched)
        pthread_cond_wait(&rc->ended, &rc->mu);
    pthread_mutex_unlock(&rc->mu);
}

static resil_outcome outcome_of(const race *rc, verdict v)
{
    return v == WON ? rc->outcomes[rc->winner] : rc->outcomes[0];
}

/* The caller's token fired, or the deadline passed: every attempt stops. */
static resil_outcome stopped(hedger *hg)
{
    int reason;
    resil_outcome o = resil__hedger_stopped(&hg->h, &reason);
    fire_all(hg->rc, -1, reason);
    return o;
}

static resil_outcome race_on(hedger *hg)
{
    resil__hedger *h = &hg->h;
    resil_instant now = h->primary_start;
    if (h->n->hedge.delay == 0)
        while (resil__hedger_may(h))
            hedge_once(hg, false, now);
    for (;;) {
        bool failed;
        verdict v = look(hg, &failed);
        if (v != GO_ON) {
            fire_all(hg->rc, v == WON ? hg->rc->winner : -1, RESIL_ECANCELED);
            return outcome_of(hg->rc, v);
        }
        if (resil_cancelled(h->f->cancel) || now >= h->f->deadline)
            return stopped(hg);
        if (resil__hedger_due(h, failed, now)) {
            hedge_once(hg, failed, now);
            continue;
        }
        wait_for_news(hg, resil__hedger_alarm(h), now);
        now = resil_clock_now(hg->clock);
    }
}

void resil__run_hedging(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out)
{
    const resil__node *n = &r->p->nodes[i];
    race *rc = take_race(n->pool);
    if (rc == NULL) {
        resil__chain(r, i + 1, f, out);
        return;
    }
    open_race(rc, r, i, f);
    if (!launch(rc, 0, f->now)) {
        pthread_mutex_lock(&rc->mu);
        unref_unlock(rc);
        resil__chain(r, i + 1, f, out);
        return;
    }
    hedger h = {.rc = rc, .clock = r->p->clock};
    resil__hedger_init(&h.h, r, i, f);
    *out = race_on(&h);
    if (n->hedge.wait_losers || !rc->kept_all)
        await_losers(rc);
    pthread_mutex_lock(&rc->mu);
    resil__hedger_note(r, rc->launched, rc->winner);
    unref_unlock(rc);
}
