/*
 * stack.c — the service-stack model behind `failover`, `metastable` and
 * `layers`: user requests entering a chain of services, each retrying its
 * call to the next, down to one dependency with a capacity.
 *
 * One model serves the three scenarios because they are the same system
 * seen from three angles: the articles' 64-fold amplification is the
 * failover's load multiplier with the outage lasting forever, and Bronson's
 * retry loop is a one-layer stack whose dependency slows down above its
 * capacity. Every call in the chain is a resil_retry execution driven by the
 * sans-I/O step on virtual time; each layer's retry budget and breaker are
 * real library objects reading the engine's clock: a breaker guards each
 * layer's calls to the next, through the acquire/record protocol.
 *
 * The dependency decides each call's fate when the call arrives, from the
 * calls it received in the trailing second: below capacity it answers after
 * `latency`; above it, it either fails (failover: it falls over and refuses
 * work) or answers `slowdown` times slower (metastable). During the outage it
 * fails every call (failover, layers) or never answers (metastable's
 * trigger: the caller's timeout ends the attempt). Knowing the outcome at
 * arrival means one event per dependency call, whatever the timeout.
 *
 * The brownout's dependency is a pool of capacity × latency workers
 * serving a FIFO queue: a call starts on the first worker free and takes
 * `latency`, twice that while the brownout lasts (half the capacity). A
 * caller gives up at its timeout, but the worker still spends the time: work
 * nobody waits for anymore, which is how a queue in front of a slow
 * dependency turns into an outage. Concurrency limits (the library's
 * adaptive limiter, static or learning) and client-side throttling (the
 * library's throttle) guard each layer's calls as the breaker does, on the
 * same virtual clock.
 *
 * Calls live in a pool that grows by doubling and is reused; a run in
 * steady state allocates nothing per request.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "rand.h"

enum { ARRIVAL, ATTEMPT_DONE, RETRY };

#define NO_CALL UINT32_MAX
#define MAX_LAYERS 10
#define WINDOW_SLOTS 100
#define SLOT_WIDTH RESIL_MS(10) /* WINDOW_SLOTS × SLOT_WIDTH = 1 s */
#define PROGRESS_SLICES 100
#define HEALTHY_SUCCESS_RATIO 0.95
#define LATENCY_BUCKETS 60000 /* 1 ms each; the last holds everything slower */

typedef struct call {
    resil_retry retry;
    uint32_t parent; /* NO_CALL for a user request */
    uint32_t root;   /* the user request this call serves */
    uint32_t layer;  /* 0 = outermost */
    uint32_t calls;  /* at the root: dependency calls caused so far */
    resil_instant started; /* at the root: when the user request arrived */
    resil_kind outcome; /* the pending dependency call's outcome */
    bool admitted;      /* the layer's breaker let the current attempt run */
    bool throttled_in;  /* the layer's throttle admitted it: record its verdict */
} call;

/* The dependency's load: calls received over the trailing second. */
typedef struct window {
    int64_t head; /* absolute index of the newest slot */
    uint32_t count[WINDOW_SLOTS];
    uint64_t sum;
} window;

/* The five columns of a series, for the loops that treat them alike: a
 * run's own counts and the result they are summed into. */
#define NCOLUMNS 5

static void columns(resil_sim_series *s, double **col[NCOLUMNS])
{
    col[0] = &s->arrivals;
    col[1] = &s->offered;
    col[2] = &s->goodput;
    col[3] = &s->failed;
    col[4] = &s->retries;
}

typedef struct stack_model {
    const resil_sim_config *cfg;
    const resil_sim_policy *pol;
    resil__sim_engine engine;
    resil__sim_rand rand;
    uint32_t layers;
    resil_retry_policy policy[MAX_LAYERS];
    resil_budget *budget[MAX_LAYERS];
    resil_breaker *breaker[MAX_LAYERS];
    resil_limiter *limiter[MAX_LAYERS];
    resil_throttle *throttle[MAX_LAYERS];
    /* the pool of calls; with breakers and limits, each call's current permit */
    call *calls;
    resil_breaker_permit *permits;
    resil_limiter_ticket *tickets;
    uint32_t *free_list;
    uint32_t nfree, cap;
    /* the dependency */
    window win;
    resil_instant down_from, down_until;
    bool down_hangs, overload_fails, queues;
    resil_instant *worker_free; /* brownout: when each worker is next free */
    uint32_t workers;
    uint64_t *latency_ms;       /* succeeded requests by latency, every run */
    /* load */
    resil_duration period;
    uint64_t limit, started;
    /* this run's figures */
    size_t nbins;
    resil_sim_series s;
    uint64_t dep_calls, requests, succeeded, max_calls;
    resil_outcome ok, unavailable, timed_out, rejected, limited, throttled;
} stack_model;

/* ---- the pool of calls ---------------------------------------------------- */

/* Call ids travel in events, which have room for RESIL__SIM_MAX_ID + 1:
 * beyond that the run ends with RESIL_ERANGE rather than wrapping ids. */
static int pool_grow(stack_model *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 1024;
    if (cap > (uint32_t)RESIL__SIM_MAX_ID + 1)
        return RESIL_ERANGE;
    call *calls = realloc(m->calls, (size_t)cap * sizeof *calls);
    if (calls == NULL)
        return RESIL_ENOMEM;
    m->calls = calls;
    uint32_t *free_list = realloc(m->free_list, (size_t)cap * sizeof *free_list);
    if (free_list == NULL)
        return RESIL_ENOMEM;
    m->free_list = free_list;
    if (m->pol->breaker) {
        resil_breaker_permit *permits = realloc(m->permits, (size_t)cap * sizeof *permits);
        if (permits == NULL)
            return RESIL_ENOMEM;
        m->permits = permits;
    }
    if (m->pol->limit != RESIL_SIM_LIMIT_NONE) {
        resil_limiter_ticket *tickets = realloc(m->tickets, (size_t)cap * sizeof *tickets);
        if (tickets == NULL)
            return RESIL_ENOMEM;
        m->tickets = tickets;
    }
    for (uint32_t i = cap; i > m->cap; i--)
        m->free_list[m->nfree++] = i - 1;
    m->cap = cap;
    return 0;
}

static uint32_t pool_take(stack_model *m)
{
    int rc = m->nfree == 0 ? pool_grow(m) : 0;
    if (rc != 0) {
        resil__sim_fail(&m->engine, rc,
                        rc == RESIL_ERANGE ? "more than 16777216 calls in flight at once"
                                           : "the pool of calls cannot grow");
        return NO_CALL;
    }
    return m->free_list[--m->nfree];
}

static void pool_give(stack_model *m, uint32_t i)
{
    m->free_list[m->nfree++] = i;
}

static void pool_reset(stack_model *m)
{
    m->nfree = 0;
    for (uint32_t i = m->cap; i > 0; i--)
        m->free_list[m->nfree++] = i - 1;
}

/* ---- the dependency ------------------------------------------------------- */

/* Calls received in the trailing second, not counting one arriving now. */
static uint64_t window_load(window *w, resil_instant now)
{
    int64_t slot = now / SLOT_WIDTH;
    int64_t gap = slot - w->head;
    for (int64_t i = 1; i <= gap && i <= WINDOW_SLOTS; i++) {
        uint32_t *c = &w->count[(w->head + i) % WINDOW_SLOTS];
        w->sum -= *c;
        *c = 0;
    }
    if (gap > 0)
        w->head = slot;
    return w->sum;
}

static void window_add(window *w)
{
    w->count[w->head % WINDOW_SLOTS]++;
    w->sum++;
}

static size_t bin_of(const stack_model *m, resil_instant t)
{
    int64_t b = t / m->cfg->bin;
    return b < 0 || (uint64_t)b >= m->nbins ? SIZE_MAX : (size_t)b;
}

static void count(const stack_model *m, double *series)
{
    size_t b = bin_of(m, resil__sim_now(&m->engine));
    if (b != SIZE_MAX)
        series[b] += 1;
}

static bool is_down(const stack_model *m, resil_instant t)
{
    return t >= m->down_from && t < m->down_until;
}

/* Brownout: the call waits for the first free worker, which serves it in
 * `latency`, twice that in the brownout; how long until it is answered. */
static resil_duration queue_for_worker(stack_model *m, resil_instant now)
{
    uint32_t first = 0;
    for (uint32_t i = 1; i < m->workers; i++) {
        if (m->worker_free[i] < m->worker_free[first])
            first = i;
    }
    resil_instant start = m->worker_free[first] > now ? m->worker_free[first] : now;
    resil_duration service = resil_dur_mul(m->cfg->latency, is_down(m, start) ? 2.0 : 1.0);
    m->worker_free[first] = resil_dur_add(start, service);
    return resil_dur_sub(m->worker_free[first], now);
}

/* The dependency receives a call now: decide when and how it ends. */
static void dependency_call(stack_model *m, uint32_t ci)
{
    const resil_sim_config *c = m->cfg;
    resil_instant now = resil__sim_now(&m->engine);
    uint64_t load = window_load(&m->win, now);
    window_add(&m->win);
    count(m, m->s.offered);
    m->dep_calls++;
    m->calls[m->calls[ci].root].calls++;

    resil_kind kind = RESIL_SUCCESS;
    resil_duration took = c->latency;
    if (m->queues) {
        took = queue_for_worker(m, now);
    } else if (is_down(m, now)) {
        kind = m->down_hangs ? RESIL_TIMEOUT : RESIL_TRANSIENT;
        took = m->down_hangs ? RESIL_DURATION_MAX : c->latency;
    } else if ((double)load >= c->capacity) {
        if (m->overload_fails)
            kind = RESIL_TRANSIENT;
        else
            took = resil_dur_mul(c->latency, c->slowdown);
    }
    if (c->timeout > 0 && took > c->timeout) {
        kind = RESIL_TIMEOUT;
        took = c->timeout;
    }
    m->calls[ci].outcome = kind;
    resil__sim_schedule(&m->engine, resil_dur_add(now, took), ATTEMPT_DONE, ci);
}

/* ---- calls ---------------------------------------------------------------- */

static void attempt(stack_model *m, uint32_t ci);
static void finish_attempt(stack_model *m, uint32_t ci, const resil_outcome *o);

static void call_start(stack_model *m, uint32_t layer, uint32_t parent, uint32_t root)
{
    uint32_t ci = pool_take(m);
    if (ci == NO_CALL)
        return;
    call *c = &m->calls[ci];
    c->parent = parent;
    c->root = parent == NO_CALL ? ci : root;
    c->layer = layer;
    c->calls = 0;
    c->started = resil__sim_now(&m->engine);
    resil_retry_begin(&c->retry, &m->policy[layer], resil__sim_now(&m->engine),
                      RESIL_INSTANT_MAX, true);
    attempt(m, ci);
}

static void attempt(stack_model *m, uint32_t ci)
{
    call *c = &m->calls[ci];
    resil_retry_before_attempt(&c->retry, false);
    c->throttled_in = false;
    if (m->limiter[c->layer] != NULL)
        m->tickets[ci].owner = NULL; /* no permit until the limiter grants one */
    resil_breaker *b = m->breaker[c->layer];
    if (b != NULL && resil_breaker_acquire(b, &m->permits[ci]) == RESIL_EREJECTED) {
        c->admitted = false;
        finish_attempt(m, ci, &m->rejected);
        return;
    }
    c->admitted = true;
    resil_instant now = resil__sim_now(&m->engine);
    resil_throttle *t = m->throttle[c->layer];
    if (t != NULL && resil_throttle_admit_at(t, now) == RESIL_EREJECTED) {
        finish_attempt(m, ci, &m->throttled);
        return;
    }
    c->throttled_in = t != NULL;
    resil_limiter *l = m->limiter[c->layer];
    if (l != NULL && resil_limiter_try_acquire_at(l, now, &m->tickets[ci]) != 0) {
        c->throttled_in = false; /* never sent: not a request the backend saw */
        finish_attempt(m, ci, &m->limited);
        return;
    }
    if (c->layer + 1 < m->layers)
        call_start(m, c->layer + 1, ci, c->root);
    else
        dependency_call(m, ci);
}

static void user_request_done(stack_model *m, bool ok, uint32_t calls, resil_instant started)
{
    count(m, ok ? m->s.goodput : m->s.failed);
    if (ok) {
        m->succeeded++;
        resil_duration took = resil_dur_sub(resil__sim_now(&m->engine), started);
        int64_t ms = took / RESIL_MS(1);
        m->latency_ms[ms < LATENCY_BUCKETS - 1 ? ms : LATENCY_BUCKETS - 1]++;
    }
    if (calls > m->max_calls)
        m->max_calls = calls;
}

static void call_end(stack_model *m, uint32_t ci, bool ok)
{
    uint32_t parent = m->calls[ci].parent;
    uint32_t calls = m->calls[ci].calls;
    resil_instant started = m->calls[ci].started;
    pool_give(m, ci);
    if (parent == NO_CALL) {
        user_request_done(m, ok, calls, started);
        return;
    }
    /* A service whose own call failed answers its caller with a 503. */
    finish_attempt(m, parent, ok ? &m->ok : &m->unavailable);
}

static void finish_attempt(stack_model *m, uint32_t ci, const resil_outcome *o)
{
    call *c = &m->calls[ci];
    resil_breaker *b = m->breaker[c->layer];
    resil_instant now = resil__sim_now(&m->engine);
    if (b != NULL && c->admitted)
        resil_breaker_record(b, &m->permits[ci], resil_breaker_classify_default(o, NULL, NULL));
    resil_verdict v = o->kind == RESIL_SUCCESS ? RESIL_BREAKER_SUCCESS : RESIL_BREAKER_FAILURE;
    if (m->limiter[c->layer] != NULL)
        resil_limiter_release_at(&m->tickets[ci], v, now); /* harmless when never taken */
    if (c->throttled_in)
        resil_throttle_record_at(m->throttle[c->layer], v, now);
    resil_retry_decision d =
        resil_retry_after_attempt(&c->retry, NULL, o, now, resil__sim_rng(&m->rand));
    if (d.stop == RESIL_STOP_DEADLINE) { /* no deadline is set: the wait saturated */
        resil__sim_fail(&m->engine, RESIL_ERANGE, RESIL__SIM_END_OF_TIME);
        return;
    }
    if (d.stop == RESIL_STOP_NONE) {
        count(m, m->s.retries);
        resil__sim_schedule(&m->engine, resil_dur_add(now, d.wait), RETRY, ci);
        return;
    }
    call_end(m, ci, o->kind == RESIL_SUCCESS);
}

static const resil_outcome *outcome_of(const stack_model *m, resil_kind kind)
{
    if (kind == RESIL_SUCCESS)
        return &m->ok;
    return kind == RESIL_TIMEOUT ? &m->timed_out : &m->unavailable;
}

/* ---- arrivals ------------------------------------------------------------- */

static bool more_arrivals(const stack_model *m, resil_instant next)
{
    if (m->limit != 0)
        return m->started < m->limit;
    return next < m->cfg->duration;
}

static void arrival(stack_model *m, uint32_t source)
{
    if (m->limit != 0 && m->started >= m->limit)
        return;
    m->started++;
    m->requests++;
    count(m, m->s.arrivals);
    resil_instant next = resil_dur_add(resil__sim_now(&m->engine), m->period);
    if (more_arrivals(m, next))
        resil__sim_schedule(&m->engine, next, ARRIVAL, source);
    call_start(m, 0, NO_CALL, 0);
}

static void handle(void *model, resil__sim_engine *e, const resil__sim_event *ev)
{
    stack_model *m = model;
    uint32_t id = resil__sim_event_id(ev);
    switch (resil__sim_event_kind(ev)) {
    case ARRIVAL:
        arrival(m, id);
        break;
    case ATTEMPT_DONE:
        finish_attempt(m, id, outcome_of(m, m->calls[id].outcome));
        break;
    case RETRY:
        attempt(m, id);
        break;
    }
}

/* ---- setting up a run ----------------------------------------------------- */

static uint32_t sources(const resil_sim_config *c)
{
    return c->scenario == RESIL_SIM_FAILOVER ? c->clients : 1;
}

static bool layer_has_budget(const resil_sim_config *c, const resil_sim_policy *p,
                             uint32_t layer)
{
    if (!p->has_budget || p->no_retry)
        return false;
    if (c->budget_at == 0)
        return true;
    uint32_t at = c->budget_at == RESIL_SIM_INNERMOST ? c->layers : c->budget_at;
    return layer + 1 == at;
}

static void free_guards(stack_model *m)
{
    for (uint32_t l = 0; l < m->layers; l++) {
        resil_budget_free(m->budget[l]);
        m->budget[l] = NULL;
        m->policy[l].budget = NULL;
        resil_breaker_free(m->breaker[l]);
        m->breaker[l] = NULL;
        resil_limiter_free(m->limiter[l]);
        m->limiter[l] = NULL;
        resil_throttle_free(m->throttle[l]);
        m->throttle[l] = NULL;
    }
}

static int make_budget(stack_model *m, uint32_t layer, resil_err *err)
{
    resil_budget_opts o;
    resil_budget_opts_default(&o, m->pol->budget);
    o.clock = resil__sim_clock_of(&m->engine);
    int rc = resil_budget_new(&o, &m->budget[layer], err);
    if (rc == 0)
        m->policy[layer].budget = m->budget[layer];
    return rc;
}

/* The library's default breaker (failure ratio 10 % over 30 s once 100
 * calls were seen, 5 s break), on virtual time. */
static int make_breaker(stack_model *m, uint32_t layer, resil_err *err)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.clock = resil__sim_clock_of(&m->engine);
    return resil_breaker_new(&o, &m->breaker[layer], err);
}

static const resil_limit_algorithm algorithm_of[] = {
    [RESIL_SIM_LIMIT_STATIC] = RESIL_LIMIT_AIMD, /* never moves: floor = ceiling */
    [RESIL_SIM_LIMIT_VEGAS] = RESIL_LIMIT_VEGAS,
    [RESIL_SIM_LIMIT_GRADIENT] = RESIL_LIMIT_GRADIENT,
    [RESIL_SIM_LIMIT_AIMD] = RESIL_LIMIT_AIMD,
};

/* The library's adaptive limiter with its defaults, starting at --limit (a
 * static one stays there), rejecting at once rather than queueing. */
static int make_limiter(stack_model *m, uint32_t layer, resil_err *err)
{
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, algorithm_of[m->pol->limit]);
    int32_t start = (int32_t)m->cfg->limit;
    o.initial_limit = start;
    if (o.max_limit < start)
        o.max_limit = start;
    if (m->pol->limit == RESIL_SIM_LIMIT_STATIC)
        o.min_limit = o.max_limit = start;
    o.clock = resil__sim_clock_of(&m->engine);
    return resil_limiter_new(&o, &m->limiter[layer], err);
}

/* The SRE book's throttle with the library's defaults (K = 2 over two
 * minutes), its draws seeded from the run so a seed replays it. */
static int make_throttle(stack_model *m, uint32_t layer, uint64_t run, resil_err *err)
{
    resil_throttle_opts o;
    resil_throttle_opts_default(&o);
    o.clock = resil__sim_clock_of(&m->engine);
    o.seed = (m->cfg->seed * 1000003u + run) * 16u + layer + 1u;
    return resil_throttle_new(&o, &m->throttle[layer], err);
}

/* Fresh budgets and breakers per run: a run must not inherit the last
 * one's tokens or state. */
static int make_guards(stack_model *m, uint64_t run, resil_err *err)
{
    for (uint32_t l = 0; l < m->layers; l++) {
        int rc = 0;
        if (layer_has_budget(m->cfg, m->pol, l))
            rc = make_budget(m, l, err);
        if (rc == 0 && m->pol->breaker)
            rc = make_breaker(m, l, err);
        if (rc == 0 && m->pol->limit != RESIL_SIM_LIMIT_NONE)
            rc = make_limiter(m, l, err);
        if (rc == 0 && m->pol->throttle)
            rc = make_throttle(m, l, run, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void clear_series(stack_model *m)
{
    double **col[NCOLUMNS];
    columns(&m->s, col);
    for (size_t i = 0; i < NCOLUMNS; i++)
        memset(*col[i], 0, m->nbins * sizeof(double));
}

static void start_run(stack_model *m, uint64_t run)
{
    resil__sim_engine_reset(&m->engine);
    resil__sim_rand_init(&m->rand, m->cfg->seed, run);
    memset(&m->win, 0, sizeof m->win);
    for (uint32_t i = 0; i < m->workers; i++)
        m->worker_free[i] = 0;
    pool_reset(m);
    clear_series(m);
    m->started = 0;
    m->dep_calls = m->requests = m->succeeded = m->max_calls = 0;
    uint32_t n = sources(m->cfg);
    for (uint32_t i = 0; i < n; i++) {
        resil_duration phase = resil_dur_mul(m->period, resil__sim_uniform(&m->rand));
        resil__sim_schedule(&m->engine, phase, ARRIVAL, i);
    }
}

static int run_engine(stack_model *m, resil_sim_progress_fn progress, void *ud,
                      uint64_t run)
{
    const resil_sim_config *c = m->cfg;
    if (c->scenario == RESIL_SIM_LAYERS)
        return resil__sim_run(&m->engine, RESIL_INSTANT_MAX, handle, m);
    for (int k = 1; k <= PROGRESS_SLICES; k++) {
        resil_instant until = c->duration / PROGRESS_SLICES * k;
        if (k == PROGRESS_SLICES)
            until = c->duration - 1;
        int rc = resil__sim_run(&m->engine, until, handle, m);
        if (rc != 0)
            return rc;
        if (progress != NULL)
            progress(m->pol, ((double)run + (double)k / PROGRESS_SLICES) / (double)c->runs, ud);
    }
    return 0;
}

/* ---- figures -------------------------------------------------------------- */

static bool healthy(const stack_model *m, size_t b)
{
    double ended = m->s.goodput[b] + m->s.failed[b];
    return ended > 0 && m->s.goodput[b] >= HEALTHY_SUCCESS_RATIO * ended;
}

static size_t outage_end_bin(const resil_sim_config *c)
{
    resil_instant end = resil__sim_outage_end(c);
    return (size_t)((end + c->bin - 1) / c->bin);
}

/* The first bin after the outage from which every bin is healthy, or
 * SIZE_MAX when the run ends unhealthy. */
static size_t recovery_bin(const stack_model *m)
{
    size_t first = outage_end_bin(m->cfg);
    if (first >= m->nbins)
        return SIZE_MAX;
    size_t b = m->nbins;
    while (b > first && healthy(m, b - 1))
        b--;
    return b == m->nbins ? SIZE_MAX : b;
}

static void accumulate(stack_model *m, resil_sim_result *out)
{
    out->events += m->engine.dispatched;
    out->requests += (double)m->requests;
    out->succeeded += (double)m->succeeded;
    out->calls_per_request += (double)m->dep_calls;
    if (m->max_calls > out->max_calls)
        out->max_calls = m->max_calls;
    double **from[NCOLUMNS], **to[NCOLUMNS];
    columns(&m->s, from);
    columns(&out->series, to);
    for (size_t i = 0; i < NCOLUMNS; i++) {
        for (size_t b = 0; b < m->nbins; b++)
            (*to[i])[b] += (*from[i])[b];
    }
    if (m->cfg->scenario == RESIL_SIM_LAYERS)
        return;
    size_t rb = recovery_bin(m);
    if (rb == SIZE_MAX)
        return;
    resil_instant end = resil__sim_outage_end(m->cfg);
    resil_instant at = (resil_instant)rb * m->cfg->bin;
    out->recovered_runs++;
    out->recovery_s += at > end ? (double)(at - end) / 1e9 : 0.0;
}

static double ratio(double num, double den)
{
    return den > 0 ? num / den : 0.0;
}

/* Multipliers from the averaged series: offered calls per user request
 * started, during the outage and after it. */
static void multipliers(const resil_sim_config *c, resil_sim_result *out)
{
    const resil_sim_series *s = &out->series;
    size_t from = (size_t)(c->outage_start / c->bin), to = outage_end_bin(c);
    double off = 0, arr = 0, off_after = 0, arr_after = 0;
    for (size_t b = 0; b < s->nbins; b++) {
        if (b >= from && b < to) {
            off += s->offered[b];
            arr += s->arrivals[b];
            double m = ratio(s->offered[b], s->arrivals[b]);
            if (m > out->peak_multiplier)
                out->peak_multiplier = m;
        } else if (b >= to) {
            off_after += s->offered[b];
            arr_after += s->arrivals[b];
        }
    }
    out->mean_multiplier = ratio(off, arr);
    out->after_multiplier = ratio(off_after, arr_after);
}

/* The 99th percentile of succeeded requests' latency, to the millisecond
 * above it (a request of 150.4 ms counts as 151 ms). */
static double p99_ms(const uint64_t *latency_ms)
{
    uint64_t total = 0, seen = 0;
    for (size_t i = 0; i < LATENCY_BUCKETS; i++)
        total += latency_ms[i];
    if (total == 0)
        return 0;
    uint64_t rank = (total * 99 + 99) / 100; /* ceil(0.99 · total) */
    for (size_t i = 0; i < LATENCY_BUCKETS; i++) {
        seen += latency_ms[i];
        if (seen >= rank)
            return (double)(i + 1);
    }
    return LATENCY_BUCKETS;
}

/* Succeeded requests per second over the bins the outage covers. */
static double outage_goodput(const resil_sim_config *c, const resil_sim_series *s)
{
    size_t from = (size_t)(c->outage_start / c->bin), to = outage_end_bin(c);
    double sum = 0;
    size_t bins = 0;
    for (size_t b = from; b < to && b < s->nbins; b++, bins++)
        sum += s->goodput[b];
    return ratio(sum, (double)bins * ((double)c->bin / 1e9));
}

static void finish(const resil_sim_config *c, const uint64_t *latency_ms, resil_sim_result *out)
{
    double runs = (double)c->runs;
    out->goodput = out->succeeded / runs / ((double)c->duration / 1e9);
    out->p99_ms = p99_ms(latency_ms);
    out->calls_per_request = ratio(out->calls_per_request, out->requests);
    out->requests /= runs;
    out->succeeded /= runs;
    if (out->recovered_runs > 0)
        out->recovery_s /= (double)out->recovered_runs;
    double **col[NCOLUMNS];
    columns(&out->series, col);
    for (size_t i = 0; i < NCOLUMNS; i++) {
        for (size_t b = 0; b < out->series.nbins; b++)
            (*col[i])[b] /= runs;
    }
    if (c->scenario != RESIL_SIM_LAYERS) {
        multipliers(c, out);
        out->outage_goodput = outage_goodput(c, &out->series);
    }
}

/* ---- the entry point ------------------------------------------------------ */

static int alloc_series(resil_sim_series *s, size_t nbins, resil_duration bin)
{
    double **col[NCOLUMNS];
    columns(s, col);
    s->nbins = nbins;
    s->bin = bin;
    for (size_t i = 0; i < NCOLUMNS; i++) {
        *col[i] = calloc(nbins ? nbins : 1, sizeof(double));
        if (*col[i] == NULL)
            return RESIL_ENOMEM;
    }
    return 0;
}

static void free_series(resil_sim_series *s)
{
    double **col[NCOLUMNS];
    columns(s, col);
    for (size_t i = 0; i < NCOLUMNS; i++) {
        free(*col[i]);
        *col[i] = NULL;
    }
}

static void configure(stack_model *m, const resil_sim_config *c, const resil_sim_policy *p)
{
    m->cfg = c;
    m->pol = p;
    m->layers = c->layers;
    for (uint32_t l = 0; l < m->layers; l++)
        resil__sim_retry_policy(c, p, &m->policy[l]);
    m->period = resil_dur_from_seconds(1.0 / c->rate);
    if (m->period < 1)
        m->period = 1;
    m->limit = c->requests;
    m->ok = resil_ok();
    m->unavailable = resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    m->timed_out = resil_fail(RESIL_TIMEOUT, 0, "attempt timed out");
    m->rejected = resil_fail(RESIL_REJECTED, RESIL_EREJECTED, "circuit open");
    m->limited = resil_fail(RESIL_REJECTED, RESIL_EREJECTED, "adaptive limit reached");
    m->throttled = resil_fail(RESIL_REJECTED, RESIL_EREJECTED, "throttled");
    m->queues = c->scenario == RESIL_SIM_BROWNOUT;
    m->workers = m->queues ? (uint32_t)(c->capacity * (double)c->latency / 1e9) : 0;
    m->down_hangs = c->scenario == RESIL_SIM_METASTABLE;
    m->overload_fails = c->scenario != RESIL_SIM_METASTABLE;
    m->down_from = c->outage_start;
    m->down_until = resil__sim_outage_end(c);
    if (c->scenario == RESIL_SIM_LAYERS) {
        m->down_from = 0;
        m->down_until = RESIL_INSTANT_MAX;
    }
    m->nbins = c->scenario == RESIL_SIM_LAYERS
                   ? 0
                   : (size_t)((c->duration + c->bin - 1) / c->bin);
}

static int alloc_dependency(stack_model *m)
{
    m->latency_ms = calloc(LATENCY_BUCKETS, sizeof *m->latency_ms);
    if (m->latency_ms == NULL)
        return RESIL_ENOMEM;
    if (m->workers == 0)
        return 0;
    m->worker_free = calloc(m->workers, sizeof *m->worker_free);
    return m->worker_free == NULL ? RESIL_ENOMEM : 0;
}

static int run_all(stack_model *m, resil_sim_progress_fn progress, void *ud,
                   resil_sim_result *out, resil_err *err)
{
    for (uint32_t run = 0; run < m->cfg->runs; run++) {
        start_run(m, run);
        int rc = make_guards(m, run, err);
        if (rc == 0)
            rc = run_engine(m, progress, ud, run);
        free_guards(m);
        if (rc != 0)
            return rc;
        accumulate(m, out);
        if (progress != NULL && m->cfg->scenario == RESIL_SIM_LAYERS)
            progress(m->pol, (double)(run + 1) / (double)m->cfg->runs, ud);
    }
    return 0;
}

int resil__sim_stack(const resil_sim_config *c, const resil_sim_policy *p,
                     resil_sim_progress_fn progress, void *ud,
                     resil_sim_result *out, resil_err *err)
{
    stack_model m;
    memset(&m, 0, sizeof m);
    configure(&m, c, p);
    int rc = resil_retry_policy_validate(&m.policy[0], err);
    if (rc != 0)
        return rc;
    rc = alloc_series(&m.s, m.nbins, c->bin);
    if (rc == 0)
        rc = alloc_series(&out->series, m.nbins, c->bin);
    if (rc == 0)
        rc = resil__sim_engine_init(&m.engine, 4096);
    if (rc == 0)
        rc = pool_grow(&m);
    if (rc == 0)
        rc = alloc_dependency(&m);
    if (rc == 0)
        rc = run_all(&m, progress, ud, out, err);
    if (rc == RESIL_ENOMEM)
        resil_err_set(err, rc, "out of memory");
    if (rc == RESIL_ERANGE)
        resil_err_set(err, rc, "%s; lower %s", m.engine.cause,
                      c->scenario == RESIL_SIM_LAYERS ? "--requests, --layers, --attempts or --cap"
                                                      : "--clients, --rate or --duration");
    if (rc == 0)
        finish(c, m.latency_ms, out);
    free_series(&m.s);
    free(m.worker_free);
    free(m.latency_ms);
    free(m.tickets);
    resil__sim_engine_free(&m.engine);
    free(m.calls);
    free(m.free_list);
    free(m.permits);
    return rc;
}
