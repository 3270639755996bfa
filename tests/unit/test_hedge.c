/*
 * test_hedge.c — hedging: the faster attempt wins and the slower is
 * cancelled, all-fail returns the primary's outcome, the budget pays for
 * hedges, the caller returns before a loser finishes (and the loser's late
 * result lands safely), and the caller's token and the deadline end it.
 *
 * The hedging delay is timed on the fake clock in manual mode: the
 * executing thread really waits, and the test moves time once the waiter
 * is in place (await_sleepers), so nothing depends on real timing. Slow
 * attempts block on their own token or on a gate the test opens.
 */
#include <pthread.h>

#include "test.h"

#define T0 RESIL_S(10)

/* A gate the test opens; attempts may wait on it. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = false;
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* What each attempt does, by its hedge index. */
enum behaviour {
    SUCCEED,
    FAIL,
    BLOCK_UNTIL_CANCELLED,
    BLOCK_THEN_GATE,
    GATE_THEN_SUCCEED,
    GATE_THEN_FAIL, /* ignores its token: fails once the gate opens */
    TAKE_3S_THEN_FAIL, /* moves the fake clock 3 s on, then fails */
    FIRE_CALLER /* fires the caller's token, then waits for its own */
};

typedef struct world {
    resil_fake_clock *fc;
    resil_pipeline *p;
    enum behaviour does[RESIL_HEDGE_MAX + 1];
    int started;              /* atomically */
    int saw_cancel[RESIL_HEDGE_MAX + 1];
    int cancel_reason[RESIL_HEDGE_MAX + 1];
    int finished[RESIL_HEDGE_MAX + 1];
    pthread_t ran_on[RESIL_HEDGE_MAX + 1];
    /* each attempt's context, as the operation and hedge_on saw it */
    resil_attempt_ctx op_ctx[RESIL_HEDGE_MAX + 1];
    resil_attempt_ctx judged_ctx[RESIL_HEDGE_MAX + 1];
    char judged_detail[RESIL_HEDGE_MAX + 1][RESIL_DETAIL_MAX];
    int judged; /* atomically */
    gate gate;
    pthread_barrier_t all_started;
    bool use_barrier;
    resil_cancel caller;
    resil_registry *registry; /* optional; freed after the pipeline */
    char opened[64];          /* the last breaker of the registry that opened */
    char ended_key[64];       /* the key of the last HEDGE_ENDED event */
    /* events */
    pthread_mutex_t ev_mu;
    resil_event_type events[32];
    uint32_t event_hedge[32];
    resil_instant event_at[32];
    resil_duration event_duration[32];
    resil_kind event_kind[32];
    int nevents;
} world;

static resil_outcome hedged_op(resil_attempt_ctx *ctx)
{
    world *w = ctx->user;
    uint32_t i = ctx->hedge;
    enum behaviour does = w->does[i]; /* read before announcing the start */
    w->ran_on[i] = pthread_self();
    w->op_ctx[i] = *ctx;
    __atomic_add_fetch(&w->started, 1, __ATOMIC_SEQ_CST);
    if (w->use_barrier)
        pthread_barrier_wait(&w->all_started);
    resil_outcome o = resil_ok();
    switch (does) {
    case SUCCEED:
        o = resil_fail_after(RESIL_SUCCESS, (int64_t)i, "won", RESIL_NO_HINT);
        break;
    case FAIL:
        o = resil_fail(RESIL_TRANSIENT, 503, i == 0 ? "primary" : "hedge");
        break;
    case BLOCK_UNTIL_CANCELLED:
    case BLOCK_THEN_GATE:
        resil_cancel_wait_until(ctx->cancel, INT64_MAX);
        __atomic_store_n(&w->saw_cancel[i], 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&w->cancel_reason[i], resil_cancel_reason(ctx->cancel),
                         __ATOMIC_SEQ_CST);
        if (does == BLOCK_THEN_GATE)
            gate_wait(&w->gate);
        o = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "cancelled");
        break;
    case GATE_THEN_SUCCEED:
        gate_wait(&w->gate);
        break;
    case GATE_THEN_FAIL:
        gate_wait(&w->gate);
        o = resil_fail(RESIL_TRANSIENT, 503, "late");
        break;
    case TAKE_3S_THEN_FAIL:
        resil_fake_clock_advance(w->fc, RESIL_S(3));
        o = resil_fail(RESIL_TRANSIENT, 503, "hedge");
        break;
    case FIRE_CALLER:
        resil_cancel_fire(&w->caller);
        resil_cancel_wait_until(ctx->cancel, INT64_MAX);
        __atomic_store_n(&w->saw_cancel[i], 1, __ATOMIC_SEQ_CST);
        o = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "gave up");
        break;
    }
    __atomic_store_n(&w->finished[i], 1, __ATOMIC_SEQ_CST);
    return o;
}

static void record_event(const resil_event *ev, void *ud)
{
    world *w = ud;
    pthread_mutex_lock(&w->ev_mu);
    if (ev->type == RESIL_EVENT_HEDGE_ENDED)
        snprintf(w->ended_key, sizeof w->ended_key, "%s", ev->key);
    if (w->nevents < 32) {
        w->events[w->nevents] = ev->type;
        w->event_hedge[w->nevents] = ev->hedge;
        w->event_at[w->nevents] = ev->at;
        w->event_duration[w->nevents] = ev->duration;
        w->event_kind[w->nevents] = ev->outcome != NULL ? ev->outcome->kind : RESIL_SUCCESS;
        w->nevents++;
    }
    pthread_mutex_unlock(&w->ev_mu);
}

static int setup(void **state)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(resil_fake_clock_new(T0, 0, &w->fc), 0);
    resil_fake_clock_set_manual(w->fc, true);
    gate_init(&w->gate);
    pthread_mutex_init(&w->ev_mu, NULL);
    assert_int_equal(resil_cancel_init(&w->caller, NULL), 0);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    gate_open(&w->gate);
    resil_pipeline_free(w->p); /* waits for every attempt still running */
    resil_registry_free(w->registry);
    resil_cancel_destroy(&w->caller);
    pthread_mutex_destroy(&w->ev_mu);
    gate_destroy(&w->gate);
    resil_fake_clock_free(w->fc);
    free(w);
    return 0;
}

static void build(world *w, const resil_hedge_opts *h, resil_duration total)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("hedged", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(w->fc));
    resil_pipeline_builder_listen(b, record_event, w);
    if (total > 0) {
        resil_timeout_opts t;
        resil_timeout_opts_default(&t);
        t.timeout = total;
        resil_pipeline_add_total_timeout(b, &t);
    }
    resil_pipeline_add_hedging(b, h);
    if (w->registry != NULL)
        resil_pipeline_use_registry(b, w->registry); /* a breaker per attempt, below */
    resil_err err = {0, ""};
    if (resil_pipeline_build(b, &w->p, &err) != 0)
        fail_msg("build: %s", err.message);
    resil_pipeline_builder_free(b);
}

static resil_hedge_opts hedging(resil_duration delay, uint32_t max_hedged)
{
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = delay;
    h.max_hedged = max_hedged;
    return h;
}

/* One execution on its own thread, so the test can drive the clock. */
typedef struct execution {
    world *w;
    pthread_t thread;
    resil_pipeline_result result;
    int rc; /* execute's; asserted by finish() on the test's thread */
    bool cancellable;
    const char *operation; /* resil_call.operation */
    int hedge_had_ended;   /* finished[1] as execute returned */
    const char *const *hedge_keys; /* resil_call.hedge_keys; NULL = none */
    size_t nkeys;
} execution;

static void *execute_thread(void *arg)
{
    execution *x = arg;
    resil_call c;
    resil_call_default(&c);
    c.user = x->w;
    if (x->cancellable)
        c.cancel = &x->w->caller;
    c.operation = x->operation;
    c.hedge_keys = x->hedge_keys;
    c.hedge_keys_len = x->nkeys;
    x->rc = resil_pipeline_execute(x->w->p, hedged_op, &c, &x->result);
    x->hedge_had_ended = __atomic_load_n(&x->w->finished[1], __ATOMIC_SEQ_CST);
    return NULL;
}

static void start(execution *x, world *w)
{
    x->w = w;
    assert_int_equal(pthread_create(&x->thread, NULL, execute_thread, x), 0);
}

static void finish(execution *x)
{
    pthread_join(x->thread, NULL);
    assert_int_equal(x->rc, 0);
}

static int count_events(world *w, resil_event_type t)
{
    pthread_mutex_lock(&w->ev_mu);
    int n = 0;
    for (int i = 0; i < w->nevents; i++)
        n += w->events[i] == t;
    pthread_mutex_unlock(&w->ev_mu);
    return n;
}

/* ---- winners and losers ------------------------------------------------------ */

static void hedge_answering_first_wins_and_the_slow_primary_is_cancelled(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    build(w, &h, 0);
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    w->does[1] = SUCCEED;
    execution x = {0};
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1); /* the caller waits out the delay */
    resil_fake_clock_advance(w->fc, RESIL_S(2));
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(x.result.outcome.code, 1);
    assert_int_equal(x.result.hedges, 1);
    assert_int_equal(x.result.hedge_winner, 1);
    assert_int_equal(x.result.attempts, 1);
    resil_pipeline_free(w->p);
    w->p = NULL;
    assert_int_equal(w->saw_cancel[0], 1);
    assert_int_equal(w->cancel_reason[0], RESIL_ECANCELED);
    assert_int_equal(count_events(w, RESIL_EVENT_HEDGE), 1);
}

/* The index of the first event of type t, or -1. */
static int event_index(world *w, resil_event_type t)
{
    pthread_mutex_lock(&w->ev_mu);
    int at = -1;
    for (int i = 0; i < w->nevents && at < 0; i++)
        if (w->events[i] == t)
            at = i;
    pthread_mutex_unlock(&w->ev_mu);
    return at;
}

/* Launched at T0+2s, the hedge runs 3 s and fails at T0+5s; the primary
 * succeeds at T0+9s. The hedge's end (its span's) is its own, T0+5s after
 * 3 s, not the execution's. */
static void a_hedge_reports_its_own_end_and_how_long_it_ran(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    build(w, &h, 0);
    w->does[0] = GATE_THEN_SUCCEED;
    w->does[1] = TAKE_3S_THEN_FAIL;
    execution x = {0};
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1); /* the caller waits out the delay */
    resil_fake_clock_advance(w->fc, RESIL_S(2));
    while (event_index(w, RESIL_EVENT_HEDGE_ENDED) < 0)
        sched_yield();
    resil_fake_clock_advance(w->fc, RESIL_S(4));
    gate_open(&w->gate);
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    int e = event_index(w, RESIL_EVENT_HEDGE_ENDED);
    assert_int_equal(w->event_hedge[e], 1);
    assert_int_equal(w->event_at[e], T0 + RESIL_S(5));
    assert_int_equal(w->event_duration[e], RESIL_S(3));
    assert_int_equal(w->event_kind[e], RESIL_TRANSIENT);
    assert_true(event_index(w, RESIL_EVENT_EXECUTION) > e);
    assert_int_equal(count_events(w, RESIL_EVENT_HEDGE_ENDED), 1); /* not the primary */
}

static void fast_primary_wins_without_any_hedge(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    build(w, &h, 0);
    w->does[0] = SUCCEED;
    execution x = {0};
    start(&x, w);
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(x.result.hedges, 0);
    assert_int_equal(x.result.hedge_winner, 0);
    assert_int_equal(w->started, 1);
    assert_int_equal(count_events(w, RESIL_EVENT_HEDGE), 0);
}

static void failed_primary_is_hedged_at_once_and_all_failing_returns_the_primarys(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    build(w, &h, 0);
    w->does[0] = FAIL;
    w->does[1] = FAIL;
    execution x = {0};
    start(&x, w);
    finish(&x); /* no clock advance: a failure starts the next hedge at once */
    assert_int_equal(x.result.outcome.kind, RESIL_TRANSIENT);
    assert_string_equal(x.result.outcome.detail, "primary");
    assert_int_equal(x.result.hedges, 1);
    assert_int_equal(w->started, 2);
}

static void zero_delay_starts_every_attempt_at_once(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(0, 2);
    build(w, &h, 0);
    w->use_barrier = true;
    pthread_barrier_init(&w->all_started, NULL, 3);
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    w->does[1] = BLOCK_UNTIL_CANCELLED;
    w->does[2] = SUCCEED;
    execution x = {0};
    start(&x, w);
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(x.result.hedge_winner, 2);
    assert_int_equal(x.result.hedges, 2);
    resil_pipeline_free(w->p);
    w->p = NULL;
    assert_int_equal(w->saw_cancel[0], 1);
    assert_int_equal(w->saw_cancel[1], 1);
    pthread_barrier_destroy(&w->all_started);
}

/* Open the gate and free the pipeline, which joins every attempt still
 * running: a late loser has ended when this returns. */
static void join_losers(world *w)
{
    gate_open(&w->gate);
    resil_pipeline_free(w->p);
    w->p = NULL;
}

/* Every attempt at once: the primary wins, the hedge loses and ends only
 * at the gate. */
static void primary_wins_while_the_hedge_holds(world *w)
{
    resil_hedge_opts h = hedging(0, 1);
    build(w, &h, 0);
    w->does[0] = SUCCEED;
    w->does[1] = BLOCK_THEN_GATE;
}

static void caller_returns_before_a_late_loser_which_lands_safely(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(1), 1);
    build(w, &h, 0);
    w->does[0] = BLOCK_THEN_GATE; /* cancelled, but cannot finish until the gate opens */
    w->does[1] = SUCCEED;
    execution x = {0};
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1);
    resil_fake_clock_advance(w->fc, RESIL_S(1));
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(__atomic_load_n(&w->finished[0], __ATOMIC_SEQ_CST), 0);
    join_losers(w); /* the loser finishes into a live slot */
    assert_int_equal(w->finished[0], 1);
}

static void remember_opened(resil_breaker *b, const resil_breaker_event *ev, void *ud)
{
    world *w = ud;
    if (ev->to != RESIL_BREAKER_OPEN)
        return;
    pthread_mutex_lock(&w->ev_mu);
    snprintf(w->opened, sizeof w->opened, "%s", resil_breaker_name(b));
    pthread_mutex_unlock(&w->ev_mu);
}

/* With a breaker per endpoint (resil_call.hedge_keys), a loser that ends
 * after the execution returned still meets its own endpoint's breaker,
 * though the caller and the registry have both let go of it: the race
 * holds a reference to each of the run's breakers until its last attempt
 * is done (under ASan, a freed breaker here is a use after free). */
static void a_late_loser_counts_on_its_endpoints_breaker_after_the_registry_dropped_it(
    void **state)
{
    world *w = *state;
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    ro.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    ro.breaker.failure_threshold = 1;
    ro.breaker.clock = resil_fake_clock_clock(w->fc);
    ro.breaker.listener = remember_opened;
    ro.breaker.listener_ud = w;
    assert_int_equal(resil_registry_new(&ro, &w->registry, NULL), 0);
    resil_hedge_opts h = hedging(RESIL_S(1), 1);
    build(w, &h, 0);
    w->does[0] = GATE_THEN_FAIL;
    w->does[1] = SUCCEED;
    static const char *const keys[] = {"primary.example", "hedge.example"};
    execution x = {.hedge_keys = keys, .nkeys = 2};
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1);
    resil_fake_clock_advance(w->fc, RESIL_S(1));
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(x.result.hedge_winner, 1);
    assert_int_equal(resil_registry_remove(w->registry, "primary.example"), 0);
    assert_string_equal(w->opened, "");
    join_losers(w);
    assert_int_equal(w->finished[0], 1);
    assert_string_equal(w->opened, "primary.example");
}

/* A call has at most RESIL_HEDGE_MAX + 1 attempts, so it names at most
 * that many hedge keys: one more is refused (RESIL_EINVAL, nothing run),
 * not dropped unsaid; exactly that many is taken. */
static void more_hedge_keys_than_attempts_is_refused_and_runs_nothing(void **state)
{
    world *w = *state;
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    assert_int_equal(resil_registry_new(&ro, &w->registry, NULL), 0);
    resil_hedge_opts h = hedging(RESIL_S(1), 1);
    build(w, &h, 0);
    w->does[0] = SUCCEED;
    const char *keys[RESIL_HEDGE_MAX + 2];
    for (size_t i = 0; i < RESIL_HEDGE_MAX + 2; i++)
        keys[i] = "endpoint.example";
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    c.hedge_keys = keys;
    c.hedge_keys_len = RESIL_HEDGE_MAX + 2;
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(w->p, hedged_op, &c, &r), RESIL_EINVAL);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.outcome.kind, RESIL_PERMANENT);
    assert_string_equal(r.outcome.detail, "hedge_keys_len past RESIL_HEDGE_MAX + 1");
    assert_int_equal(__atomic_load_n(&w->started, __ATOMIC_SEQ_CST), 0);
    c.hedge_keys_len = RESIL_HEDGE_MAX + 1;
    assert_int_equal(resil_pipeline_execute(w->p, hedged_op, &c, &r), 0);
    assert_int_equal(r.outcome.kind, RESIL_SUCCESS);
}

/* The call's strings are the caller's again when the execution returns: a
 * loser that ends later reports the operation's name from the race's own
 * copy, not from memory the caller has since reused. */
static void a_late_loser_reports_the_operation_from_its_own_copy(void **state)
{
    world *w = *state;
    primary_wins_while_the_hedge_holds(w);
    char operation[32] = "checkout";
    execution x = {.operation = operation};
    start(&x, w);
    finish(&x);
    assert_int_equal(x.result.hedge_winner, 0);
    snprintf(operation, sizeof operation, "reused");
    join_losers(w);
    assert_int_equal(w->finished[1], 1);
    assert_string_equal(w->ended_key, "checkout");
}

/* A name of `size` bytes with its NUL, all `c`. */
static void fill_name(char *name, size_t size, char c)
{
    memset(name, c, size - 1);
    name[size - 1] = '\0';
}

/* An operation's name too long for the race's copy (more than
 * RESIL_HEDGE_KEPT_MAX bytes) stays the caller's: the execution then
 * returns only after its losers, as with wait_losers. */
static void a_name_too_long_to_copy_makes_the_execution_wait_for_its_losers(void **state)
{
    world *w = *state;
    primary_wins_while_the_hedge_holds(w);
    char operation[RESIL_HEDGE_KEPT_MAX + 1];
    fill_name(operation, sizeof operation, 'x'); /* with its NUL, one byte too many */
    execution x = {.operation = operation};
    start(&x, w);
    while (__atomic_load_n(&w->saw_cancel[1], __ATOMIC_SEQ_CST) == 0)
        sched_yield(); /* the hedge lost and holds at the gate */
    gate_open(&w->gate);
    finish(&x);
    assert_int_equal(x.result.hedge_winner, 0);
    assert_int_equal(x.hedge_had_ended, 1);
}

/* Names that just fit (RESIL_HEDGE_KEPT_MAX bytes with the NUL) are
 * copied: the execution returns before its loser, which reports them. */
static void a_name_that_just_fits_is_copied_and_the_execution_does_not_wait(void **state)
{
    world *w = *state;
    primary_wins_while_the_hedge_holds(w);
    char operation[RESIL_HEDGE_KEPT_MAX];
    fill_name(operation, sizeof operation, 'x');
    execution x = {.operation = operation};
    start(&x, w);
    finish(&x); /* the gate is still shut: only a call that did not wait returns */
    assert_int_equal(x.hedge_had_ended, 0);
    fill_name(operation, sizeof operation, 'y');
    join_losers(w);
    assert_int_equal(strlen(w->ended_key), sizeof w->ended_key - 1);
    assert_int_equal(strspn(w->ended_key, "x"), sizeof w->ended_key - 1);
}

static void wait_losers_returns_only_after_every_attempt_ended(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(1), 1);
    h.wait_losers = true;
    build(w, &h, 0);
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    w->does[1] = SUCCEED;
    execution x = {0};
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1);
    resil_fake_clock_advance(w->fc, RESIL_S(1));
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(__atomic_load_n(&w->finished[0], __ATOMIC_SEQ_CST), 1);
}

/* ---- what ends a race ------------------------------------------------------------ */

static void caller_cancel_fires_every_attempt(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    h.wait_losers = true;
    build(w, &h, 0);
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    execution x = {0};
    x.cancellable = true;
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1);
    resil_cancel_fire(&w->caller);
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(x.result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(w->saw_cancel[0], 1);
    assert_int_equal(x.result.hedges, 0);
}

/* An attempt may fire the caller's own token (it gave up for the whole
 * call): it runs on a worker while the caller waits on a token linked to
 * that one, so the caller wakes, fires every attempt and returns the
 * cancellation; the attempt that fired sees its own token fire too. */
static void an_attempt_firing_the_callers_token_cancels_the_race(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(0, 1);
    h.wait_losers = true;
    build(w, &h, 0);
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    w->does[1] = FIRE_CALLER;
    execution x = {.cancellable = true};
    start(&x, w);
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(x.result.outcome.code, RESIL_ECANCELED);
    assert_int_equal(x.result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(x.result.hedges, 1);
    assert_int_equal(w->saw_cancel[0], 1);
    assert_int_equal(w->saw_cancel[1], 1);
    assert_int_equal(w->cancel_reason[0], RESIL_ECANCELED);
}

static void total_deadline_while_hedging_times_out_every_attempt(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    h.wait_losers = true;
    build(w, &h, RESIL_S(5));
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    w->does[1] = BLOCK_UNTIL_CANCELLED;
    execution x = {0};
    start(&x, w);
    resil_fake_clock_await_sleepers(w->fc, 1);
    resil_fake_clock_advance(w->fc, RESIL_S(2)); /* the hedge starts */
    while (__atomic_load_n(&w->started, __ATOMIC_SEQ_CST) < 2 ||
           resil_fake_clock_sleepers(w->fc) < 1)
        sched_yield();
    resil_fake_clock_advance(w->fc, RESIL_S(3)); /* the total deadline */
    finish(&x);
    assert_int_equal(x.result.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(x.result.outcome.detail, "total timeout (5s) elapsed");
    assert_int_equal(x.result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(w->cancel_reason[0], RESIL_ETIMEDOUT);
    assert_int_equal(w->cancel_reason[1], RESIL_ETIMEDOUT);
}

static void budget_that_denies_stops_hedging(void **state)
{
    world *w = *state;
    resil_budget_opts bo;
    resil_budget_opts_default(&bo, RESIL_BUDGET_TOKENS);
    resil_budget *budget;
    assert_int_equal(resil_budget_new(&bo, &budget, NULL), 0);
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, "x");
    resil_budget_ticket t = {0};
    for (int i = 0; i < 6; i++) /* 10 tokens - 6 = 4: not above half any more */
        resil_budget_on_result(budget, &fail, 1, &t);
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    h.budget = budget;
    build(w, &h, 0);
    w->does[0] = FAIL;
    execution x = {0};
    start(&x, w);
    finish(&x);
    assert_string_equal(x.result.outcome.detail, "primary");
    assert_int_equal(x.result.hedges, 0);
    assert_int_equal(w->started, 1);
    assert_int_equal(count_events(w, RESIL_EVENT_BUDGET_DENIED), 1);
    resil_pipeline_free(w->p);
    w->p = NULL;
    resil_budget_free(budget);
}

static void busy_pool_runs_the_execution_unhedged_on_the_caller(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    h.workers = 1;
    build(w, &h, 0);
    w->does[0] = GATE_THEN_SUCCEED;
    execution first = {0};
    start(&first, w);
    while (__atomic_load_n(&w->started, __ATOMIC_SEQ_CST) < 1)
        sched_yield();
    /* The only worker is busy: this one runs inline, on this thread. */
    w->does[0] = SUCCEED;
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(w->p, hedged_op, &c, &r), 0);
    assert_int_equal(r.outcome.kind, RESIL_SUCCESS);
    assert_true(pthread_equal(w->ran_on[0], pthread_self()));
    assert_int_equal(r.hedges, 0);
    gate_open(&w->gate);
    resil_fake_clock_advance(w->fc, RESIL_S(2));
    finish(&first);
}

/* ---- options ------------------------------------------------------------------------ */

static void options_default_to_one_hedge_after_two_seconds(void **state)
{
    (void)state;
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    assert_duration_equal(h.delay, RESIL_S(2));
    assert_int_equal(h.max_hedged, 1);
    assert_null(h.hedge_on);
    assert_null(h.budget);
    assert_int_equal(h.workers, 0);
    assert_false(h.wait_losers);
    assert_int_equal(resil_hedge_opts_validate(&h, NULL), 0);
}

static void bad_options_are_rejected_by_name(void **state)
{
    (void)state;
    resil_err err = {0, ""};
    resil_hedge_opts h = hedging(RESIL_S(1), 0);
    assert_int_equal(resil_hedge_opts_validate(&h, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "hedging.max_hedged must be in [1, 10], got 0");
    h.max_hedged = 11;
    assert_int_equal(resil_hedge_opts_validate(&h, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "hedging.max_hedged must be in [1, 10], got 11");
    h.max_hedged = 10;
    assert_int_equal(resil_hedge_opts_validate(&h, &err), 0);
    h.delay = -RESIL_MS(250);
    assert_int_equal(resil_hedge_opts_validate(&h, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "hedging.delay must be >= 0, got -250ms");
    h.delay = 0;
    h.workers = 257;
    assert_int_equal(resil_hedge_opts_validate(&h, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "hedging.workers must be at most 256 (0 = automatic), got 257");
    assert_int_equal(resil_hedge_opts_validate(NULL, &err), RESIL_EINVAL);
}

/* ---- the hedge index in the context ------------------------------------------ */

static void every_concurrent_attempt_gets_its_own_hedge_index_and_the_calls_user(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(0, 2);
    build(w, &h, RESIL_S(30));
    w->use_barrier = true; /* all three run at once, on three workers */
    pthread_barrier_init(&w->all_started, NULL, 3);
    w->does[0] = BLOCK_UNTIL_CANCELLED;
    w->does[1] = BLOCK_UNTIL_CANCELLED;
    w->does[2] = SUCCEED;
    execution x = {0};
    start(&x, w);
    finish(&x);
    assert_int_equal(x.result.hedge_winner, 2);
    resil_pipeline_free(w->p); /* every attempt has ended */
    w->p = NULL;
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(w->op_ctx[i].hedge, i);
        assert_ptr_equal(w->op_ctx[i].user, w);
        assert_int_equal(w->op_ctx[i].attempt, 1);
        assert_int_equal(w->op_ctx[i].deadline, T0 + RESIL_S(30));
        for (uint32_t j = 0; j < i; j++)
            assert_ptr_not_equal(w->op_ctx[i].cancel, w->op_ctx[j].cancel);
    }
    assert_false(pthread_equal(w->ran_on[0], w->ran_on[1]));
    assert_false(pthread_equal(w->ran_on[1], w->ran_on[2]));
    pthread_barrier_destroy(&w->all_started);
}

static bool judge_by_index(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ud;
    world *w = ctx->user;
    w->judged_ctx[ctx->hedge] = *ctx;
    memcpy(w->judged_detail[ctx->hedge], o->detail, RESIL_DETAIL_MAX);
    __atomic_add_fetch(&w->judged, 1, __ATOMIC_SEQ_CST);
    return resil_retry_on_default(o, NULL);
}

static void hedge_on_judges_each_failure_with_that_attempts_context(void **state)
{
    world *w = *state;
    resil_hedge_opts h = hedging(0, 2);
    h.hedge_on = judge_by_index;
    build(w, &h, 0);
    w->use_barrier = true;
    pthread_barrier_init(&w->all_started, NULL, 3);
    w->does[0] = FAIL;
    w->does[1] = FAIL;
    w->does[2] = GATE_THEN_SUCCEED;
    execution x = {0};
    start(&x, w);
    while (__atomic_load_n(&w->judged, __ATOMIC_SEQ_CST) < 2)
        sched_yield(); /* both failures judged before the winner answers */
    gate_open(&w->gate);
    finish(&x);
    assert_int_equal(x.result.hedge_winner, 2);
    resil_pipeline_free(w->p);
    w->p = NULL;
    assert_string_equal(w->judged_detail[0], "primary");
    assert_string_equal(w->judged_detail[1], "hedge");
    for (uint32_t i = 0; i < 2; i++) {
        assert_int_equal(w->judged_ctx[i].hedge, i);
        assert_ptr_equal(w->judged_ctx[i].user, w);
        assert_int_equal(w->judged_ctx[i].attempt, 1);
        assert_ptr_equal(w->judged_ctx[i].cancel, w->op_ctx[i].cancel);
    }
    assert_int_equal(w->judged_ctx[2].hedge, 0); /* a success is never judged */
    assert_null(w->judged_ctx[2].user);
    pthread_barrier_destroy(&w->all_started);
}

static resil_outcome report_hedge_index(resil_attempt_ctx *ctx)
{
    return resil_fail_after(RESIL_SUCCESS, 100 + (int64_t)ctx->hedge, NULL, RESIL_NO_HINT);
}

static void an_unhedged_attempt_has_hedge_index_zero(void **state)
{
    (void)state;
    resil_pipeline_builder *b;
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_builder_new("plain", &b, NULL), 0);
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(p, report_hedge_index, NULL, &r), 0);
    assert_int_equal(r.outcome.code, 100);
    resil_pipeline_free(p);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(hedge_answering_first_wins_and_the_slow_primary_is_cancelled),
        T(a_hedge_reports_its_own_end_and_how_long_it_ran),
        T(fast_primary_wins_without_any_hedge),
        T(failed_primary_is_hedged_at_once_and_all_failing_returns_the_primarys),
        T(zero_delay_starts_every_attempt_at_once),
        T(caller_returns_before_a_late_loser_which_lands_safely),
        T(a_late_loser_counts_on_its_endpoints_breaker_after_the_registry_dropped_it),
        T(a_late_loser_reports_the_operation_from_its_own_copy),
        T(more_hedge_keys_than_attempts_is_refused_and_runs_nothing),
        T(a_name_too_long_to_copy_makes_the_execution_wait_for_its_losers),
        T(a_name_that_just_fits_is_copied_and_the_execution_does_not_wait),
        T(wait_losers_returns_only_after_every_attempt_ended),
        T(caller_cancel_fires_every_attempt),
        T(an_attempt_firing_the_callers_token_cancels_the_race),
        T(total_deadline_while_hedging_times_out_every_attempt),
        T(budget_that_denies_stops_hedging),
        T(busy_pool_runs_the_execution_unhedged_on_the_caller),
        T(options_default_to_one_hedge_after_two_seconds),
        T(bad_options_are_rejected_by_name),
        T(every_concurrent_attempt_gets_its_own_hedge_index_and_the_calls_user),
        T(hedge_on_judges_each_failure_with_that_attempts_context),
        T(an_unhedged_attempt_has_hedge_index_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
