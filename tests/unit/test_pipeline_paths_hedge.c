/*
 * test_pipeline_paths_hedge.c — hedging's semantics through both
 * executors, with one set of expected values: the blocking executor's
 * attempts run on the hedging pool's threads over a fake clock moved by
 * the clock driver (each jump once every thread is blocked), the
 * asynchronous one's in lanes of a virtual-time loop.
 *
 * A scenario scripts each attempt by its retry attempt and hedge index:
 * what it answers, how long it takes, and whether it is stubborn (ignores
 * its token and runs its full time, as an operation that cannot be
 * interrupted does). Besides the result, each attempt's trace must agree:
 * that it ran, with which reason it was told to stop, and the instant it
 * ended — so the losers' cancellations are checked on both paths.
 *
 * A scenario may also name a breaker key per hedged attempt
 * (resil_call.hedge_keys) and one key whose breaker is isolated before the
 * call: the pipeline then takes its breakers from a registry on the
 * scenario's clock, and the attempt records must agree too.
 */
#include <stdatomic.h>

#include "clock_driver.h"
#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)
#define ATTEMPTS 3
#define HEDGES 3

typedef void (*build_fn)(resil_pipeline_builder *b);

typedef struct step {
    resil_outcome o;
    resil_duration takes;
    bool stubborn;
} step;

typedef struct scenario {
    build_fn build;
    step script[ATTEMPTS][HEDGES]; /* [retry attempt - 1][hedge index] */
    const char *const *keys;       /* resil_call.hedge_keys; NULL = none */
    size_t nkeys;
    const char *isolated;          /* a key whose breaker refuses every call */
} scenario;

/* What one attempt did. */
typedef struct trace {
    bool ran;
    int told; /* the reason its token fired with, 0 when it never did */
    resil_instant ended;
} trace;

typedef struct ran {
    resil_pipeline_result res;
    resil_attempt_record records[ATTEMPTS];
    trace t[ATTEMPTS][HEDGES];
    atomic_int hedge_events;
    /* each hedged attempt's end as reported (HEDGE_ENDED), and its length */
    atomic_llong hedge_end[ATTEMPTS][HEDGES];
    atomic_llong hedge_took[ATTEMPTS][HEDGES];
    resil_instant end; /* once every attempt, losers included, ended */
} ran;

typedef struct player player;

/* An asynchronous attempt in flight. */
typedef struct slot {
    resil_timer timer; /* first: the timer's callback finds the slot */
    player *pl;
    resil_attempt *a;
    const step *s;
    trace *t;
    const resil_cancel *cancel;
} slot;

struct player {
    const scenario *sc;
    resil_fake_clock *fc;
    resil_pipeline *p;
    resil_registry *registry; /* with scenario keys only */
    virtual_loop *vl;
    ran *out;
    slot slots[ATTEMPTS][HEDGES];
    bool done;
};

static const step *step_of(player *pl, const resil_attempt_ctx *ctx, trace **t)
{
    assert_true(ctx->attempt >= 1 && ctx->attempt <= ATTEMPTS && ctx->hedge < HEDGES);
    *t = &pl->out->t[ctx->attempt - 1][ctx->hedge];
    (*t)->ran = true;
    return &pl->sc->script[ctx->attempt - 1][ctx->hedge];
}

static resil_outcome stopped(const resil_cancel *c)
{
    return resil_fail(RESIL_CANCELLED, resil_cancel_reason(c), "stopped");
}

static void count_hedges(const resil_event *ev, void *ud)
{
    ran *out = ud;
    if (ev->type == RESIL_EVENT_HEDGE)
        atomic_fetch_add(&out->hedge_events, 1);
    if (ev->type == RESIL_EVENT_HEDGE_ENDED && ev->attempt >= 1 && ev->attempt <= ATTEMPTS &&
        ev->hedge < HEDGES) {
        atomic_store(&out->hedge_end[ev->attempt - 1][ev->hedge], ev->at);
        atomic_store(&out->hedge_took[ev->attempt - 1][ev->hedge], ev->duration);
    }
}

/* The registry of a scenario with keys, its isolated breaker already so. */
static resil_registry *registry_for(const scenario *sc, resil_clock *clock)
{
    if (sc->keys == NULL)
        return NULL;
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    o.breaker.clock = clock;
    resil_registry *r;
    assert_int_equal(resil_registry_new(&o, &r, NULL), 0);
    resil_breaker *br;
    assert_int_equal(resil_registry_get(r, sc->isolated, NULL, &br, NULL), 0);
    assert_int_equal(resil_breaker_isolate(br), 0);
    resil_breaker_free(br);
    return r;
}

static void build(player *pl, resil_clock *clock)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("hedged paths", &b, NULL), 0);
    resil_pipeline_builder_clock(b, clock);
    resil_pipeline_builder_listen(b, count_hedges, pl->out);
    pl->sc->build(b);
    pl->registry = registry_for(pl->sc, clock);
    if (pl->registry != NULL)
        assert_int_equal(resil_pipeline_use_registry(b, pl->registry), 0);
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    int rc = resil_pipeline_build(b, &p, &err);
    resil_pipeline_builder_free(b);
    if (rc != 0)
        fail_msg("build: %s", err.message);
    pl->p = p;
}

static void call_of(player *pl, resil_call *call)
{
    resil_call_default(call);
    call->user = pl;
    call->records = pl->out->records;
    call->records_cap = ATTEMPTS;
    call->hedge_keys = pl->sc->keys;
    call->hedge_keys_len = pl->sc->nkeys;
}

static void unbuild(player *pl)
{
    resil_pipeline_free(pl->p); /* joins the pool: its traces are ours to read */
    resil_registry_free(pl->registry);
}

/* ---- the blocking path: the pool's threads, the driven clock ------------------ */

static resil_outcome blocking_op(resil_attempt_ctx *ctx)
{
    player *pl = ctx->user;
    trace *t;
    const step *s = step_of(pl, ctx, &t);
    resil_outcome o = s->o;
    if (s->stubborn) {
        resil_clock_sleep(ctx->clock, s->takes, NULL);
        if (resil_cancelled(ctx->cancel))
            t->told = resil_cancel_reason(ctx->cancel);
    } else if (s->takes > 0 && resil_ctx_sleep(ctx, s->takes) != 0) {
        t->told = resil_cancel_reason(ctx->cancel);
        o = stopped(ctx->cancel);
    }
    t->ended = resil_fake_clock_now(pl->fc);
    return o;
}

static void *execute(void *arg)
{
    player *pl = arg;
    resil_call call;
    call_of(pl, &call);
    assert_int_equal(resil_pipeline_execute(pl->p, blocking_op, &call, &pl->out->res), 0);
    return NULL;
}

static void run_blocking(const scenario *sc, ran *out)
{
    memset(out, 0, sizeof *out);
    player pl = {.sc = sc, .out = out};
    assert_int_equal(resil_fake_clock_new(T0, 0, &pl.fc), 0);
    build(&pl, resil_fake_clock_clock(pl.fc));
    clock_driver_run(pl.fc, execute, &pl);
    unbuild(&pl);
    out->end = resil_fake_clock_now(pl.fc);
    resil_fake_clock_free(pl.fc);
}

/* ---- the asynchronous path: lanes on a virtual-time loop ------------------------ */

static void slot_report(slot *sl, const resil_outcome *o)
{
    sl->t->ended = resil_fake_clock_now(sl->pl->fc);
    resil_attempt *a = sl->a;
    sl->a = NULL;
    resil_attempt_done(a, o);
}

static void async_finished(resil_timer *timer)
{
    slot *sl = (slot *)timer;
    slot_report(sl, &sl->s->o);
}

static void async_told(resil_attempt *a, void *ud)
{
    (void)a;
    slot *sl = ud;
    sl->t->told = resil_cancel_reason(sl->cancel);
    if (sl->s->stubborn)
        return;
    sl->pl->vl->loop.ops->timer_stop(sl->pl->vl, &sl->timer);
    resil_outcome o = stopped(sl->cancel);
    slot_report(sl, &o);
}

static void async_op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    player *pl = ctx->user;
    trace *t;
    const step *s = step_of(pl, ctx, &t);
    if (s->takes == 0) {
        t->ended = resil_fake_clock_now(pl->fc);
        resil_attempt_done(a, &s->o);
        return;
    }
    slot *sl = &pl->slots[ctx->attempt - 1][ctx->hedge];
    *sl = (slot){.pl = pl, .a = a, .s = s, .t = t, .cancel = ctx->cancel};
    sl->timer.fn = async_finished;
    resil_attempt_on_cancel(a, async_told, sl);
    pl->vl->loop.ops->timer_start(pl->vl, &sl->timer, s->takes);
}

static void async_done(const resil_pipeline_result *res, void *ud)
{
    player *pl = ud;
    pl->out->res = *res;
    pl->done = true;
}

static void run_async(const scenario *sc, ran *out)
{
    memset(out, 0, sizeof *out);
    player pl = {.sc = sc, .out = out};
    assert_int_equal(resil_fake_clock_new(T0, 0, &pl.fc), 0);
    virtual_loop vl;
    virtual_loop_init(&vl, pl.fc);
    pl.vl = &vl;
    build(&pl, resil_loop_clock(&vl.loop));
    resil_call call;
    call_of(&pl, &call);
    assert_int_equal(resil_pipeline_start(pl.p, &vl.loop, async_op, &call, async_done, &pl, NULL),
                     0);
    virtual_loop_run(&vl, NULL);
    assert_true(pl.done);
    out->end = resil_fake_clock_now(pl.fc);
    unbuild(&pl);
    virtual_loop_destroy(&vl);
    resil_fake_clock_free(pl.fc);
}

static void both(const scenario *sc, void (*check)(const ran *r))
{
    static ran b, a;
    run_blocking(sc, &b);
    check(&b);
    run_async(sc, &a);
    check(&a);
    assert_int_equal(a.res.stop, b.res.stop);
    assert_int_equal(a.res.attempts, b.res.attempts);
    assert_int_equal(a.res.outcome.kind, b.res.outcome.kind);
    assert_int_equal(a.res.outcome.code, b.res.outcome.code);
    assert_string_equal(a.res.outcome.detail, b.res.outcome.detail);
    assert_int_equal(a.res.hedges, b.res.hedges);
    assert_int_equal(a.res.hedge_winner, b.res.hedge_winner);
    assert_duration_equal(a.res.elapsed, b.res.elapsed);
    assert_int_equal(a.end, b.end);
    assert_int_equal(atomic_load(&a.hedge_events), atomic_load(&b.hedge_events));
    assert_int_equal(a.res.records_len, b.res.records_len);
    assert_records_equal(a.records, b.records, b.res.records_len);
    for (int i = 0; i < ATTEMPTS; i++) {
        for (int h = 0; h < HEDGES; h++) {
            assert_int_equal(a.t[i][h].ran, b.t[i][h].ran);
            assert_int_equal(a.t[i][h].told, b.t[i][h].told);
            assert_int_equal(a.t[i][h].ended, b.t[i][h].ended);
        }
    }
}

/* ---- pipelines ------------------------------------------------------------------ */

static resil_hedge_opts hedging(resil_duration delay, uint32_t max_hedged)
{
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = delay;
    h.max_hedged = max_hedged;
    return h;
}

static void hedge_once_after_2s(resil_pipeline_builder *b)
{
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

static void hedge_twice_every_1s(resil_pipeline_builder *b)
{
    resil_hedge_opts h = hedging(RESIL_S(1), 2);
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

static void hedge_once_after_2s_waiting_for_losers(resil_pipeline_builder *b)
{
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    h.wait_losers = true;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

/* Four places to run an attempt on either path: the pool's four workers,
 * or the execution's four hedged lanes (two races of two). */
static void retry_over_timed_hedging(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = RESIL_S(2);
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), 0);
    resil_hedge_opts h = hedging(RESIL_S(1), 1);
    h.workers = 4;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

/* A caller's own rule that hedges on every refusal, as Polly's does on
 * any exception. */
static bool failed_or_refused(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    return resil_retry_on_default(o, ud) || o->kind == RESIL_REJECTED;
}

/* Each attempt hedged once after 2 s, away from a refusing endpoint too;
 * the breaker innermost, one per endpoint when the call names keys. */
static void hedge_over_breakers(resil_pipeline_builder *b)
{
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    h.hedge_on = failed_or_refused;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

/* The same with the default hedge_on: a breaker's refusal calls for the
 * next endpoint as Microsoft's and Polly's hedging do. */
static void hedge_over_breakers_by_default(resil_pipeline_builder *b)
{
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

/* Hedging over a concurrency limiter of one permit shared by every
 * endpoint, with the default hedge_on. */
static void hedge_over_one_permit_by_default(resil_pipeline_builder *b)
{
    resil_hedge_opts h = hedging(RESIL_S(2), 1);
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
    resil_bulkhead_opts c;
    resil_bulkhead_opts_default(&c);
    c.max_concurrency = 1;
    c.max_queue = 0;
    c.queue = false;
    assert_int_equal(resil_pipeline_add_bulkhead(b, &c), 0);
}

static const char *const endpoint_keys[] = {"https://home.example.com",
                                            "https://eu.example.com"};

/* ---- scenarios -------------------------------------------------------------------- */

#define OK(code) {RESIL_SUCCESS, (code), RESIL_NO_HINT, ""}
#define FAIL503 {RESIL_TRANSIENT, 503, RESIL_NO_HINT, "busy"}

static void check_fast_primary(const ran *r)
{
    assert_int_equal(r->res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(r->res.outcome.code, 10);
    assert_int_equal(r->res.hedges, 0);
    assert_int_equal(r->res.hedge_winner, 0);
    assert_false(r->t[0][1].ran);
    assert_duration_equal(r->res.elapsed, RESIL_S(1));
    assert_int_equal(atomic_load(&r->hedge_events), 0);
}

static void primary_answering_before_the_delay_is_never_hedged(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_once_after_2s,
                   .script = {{{OK(10), RESIL_S(1), false}, {OK(11), RESIL_S(1), false}}}};
    both(&sc, check_fast_primary);
}

static void check_hedge_after_delay(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.outcome.code, 11);
    assert_int_equal(r->res.hedges, 1);
    assert_int_equal(r->res.hedge_winner, 1);
    assert_int_equal(r->res.attempts, 1);
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
    assert_int_equal(atomic_load(&r->hedge_events), 1);
    assert_int_equal(atomic_load(&r->hedge_end[0][1]), T0 + RESIL_S(3));
    assert_int_equal(atomic_load(&r->hedge_took[0][1]), RESIL_S(1));
    /* The slow primary is told to stop the moment the hedge wins. */
    assert_int_equal(r->t[0][0].told, RESIL_ECANCELED);
    assert_int_equal(r->t[0][0].ended, T0 + RESIL_S(3));
    assert_int_equal(r->t[0][1].told, 0);
    assert_int_equal(r->end, T0 + RESIL_S(3));
}

static void hedge_launched_after_the_delay_wins_and_the_primary_is_cancelled(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_once_after_2s,
                   .script = {{{OK(10), RESIL_S(10), false}, {OK(11), RESIL_S(1), false}}}};
    both(&sc, check_hedge_after_delay);
}

static void check_first_success(const ran *r)
{
    /* Launched at 0, 1 s and 2 s; the last answers first, at 2.5 s. */
    assert_int_equal(r->res.outcome.code, 12);
    assert_int_equal(r->res.hedges, 2);
    assert_int_equal(r->res.hedge_winner, 2);
    assert_duration_equal(r->res.elapsed, RESIL_MS(2500));
    assert_int_equal(atomic_load(&r->hedge_events), 2);
    for (int h = 0; h < 2; h++) {
        assert_int_equal(r->t[0][h].told, RESIL_ECANCELED);
        assert_int_equal(r->t[0][h].ended, T0 + RESIL_MS(2500));
    }
}

static void first_success_wins_and_every_loser_is_cancelled(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_twice_every_1s,
                   .script = {{{OK(10), RESIL_S(10), false},
                     {OK(11), RESIL_S(10), false},
                     {OK(12), RESIL_MS(500), false}}}};
    both(&sc, check_first_success);
}

static void check_failure_hedges_at_once(const ran *r)
{
    /* The primary fails at 0.5 s: the hedge starts then, not at 2 s. */
    assert_int_equal(r->res.outcome.code, 11);
    assert_int_equal(r->res.hedge_winner, 1);
    assert_duration_equal(r->res.elapsed, RESIL_MS(1500));
    assert_int_equal(r->t[0][0].told, 0);
}

static void failed_primary_is_hedged_without_waiting_for_the_delay(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_once_after_2s,
                   .script = {{{FAIL503, RESIL_MS(500), false}, {OK(11), RESIL_S(1), false}}}};
    both(&sc, check_failure_hedges_at_once);
}

static void check_late_loser(const ran *r)
{
    /* The primary cannot be interrupted: the result comes at 3 s, the
     * primary ends at 10 s on its own. */
    assert_int_equal(r->res.outcome.code, 11);
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
    assert_int_equal(r->t[0][0].told, RESIL_ECANCELED);
    assert_int_equal(r->t[0][0].ended, T0 + RESIL_S(10));
    assert_int_equal(r->end, T0 + RESIL_S(10));
}

static void result_does_not_wait_for_a_loser_that_ignores_its_token(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_once_after_2s,
                   .script = {{{OK(10), RESIL_S(10), true}, {OK(11), RESIL_S(1), false}}}};
    both(&sc, check_late_loser);
}

static void check_late_hedge(const ran *r)
{
    /* The primary answers at 3 s; the hedge, launched at 2 s, cannot be
     * interrupted and ends on its own at 12 s: that end is its own, not
     * the execution's, and the primary reports none. */
    assert_int_equal(r->res.outcome.code, 10);
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
    assert_int_equal(r->t[0][1].ended, T0 + RESIL_S(12));
    assert_int_equal(atomic_load(&r->hedge_end[0][1]), T0 + RESIL_S(12));
    assert_int_equal(atomic_load(&r->hedge_took[0][1]), RESIL_S(10));
    assert_int_equal(atomic_load(&r->hedge_end[0][0]), 0);
}

static void a_hedge_ends_when_it_ends_not_when_the_execution_does(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_once_after_2s,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(10), true}}}};
    both(&sc, check_late_hedge);
}

static void check_wait_losers(const ran *r)
{
    assert_int_equal(r->res.outcome.code, 11);
    assert_int_equal(r->res.hedge_winner, 1);
    assert_duration_equal(r->res.elapsed, RESIL_S(10));
    assert_int_equal(r->t[0][0].told, RESIL_ECANCELED);
    assert_int_equal(r->t[0][0].ended, T0 + RESIL_S(10));
}

static void wait_losers_ends_the_execution_when_the_last_loser_ends(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_once_after_2s_waiting_for_losers,
                   .script = {{{OK(10), RESIL_S(10), true}, {OK(11), RESIL_S(1), false}}}};
    both(&sc, check_wait_losers);
}

static void check_no_lane(const ran *r)
{
    /* Attempts 1 and 2 each time out at 2 s with both of their attempts
     * still running (for 100 s, ignoring their tokens); attempt 3, at 6 s,
     * finds nowhere to run hedged and runs unhedged. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.code, 30);
    assert_int_equal(r->res.hedges, 2);
    assert_int_equal(r->res.hedge_winner, 0);
    assert_duration_equal(r->res.elapsed, RESIL_S(6) + RESIL_MS(10));
    assert_int_equal(atomic_load(&r->hedge_events), 2);
    assert_int_equal(r->t[0][0].told, RESIL_ETIMEDOUT);
    assert_int_equal(r->t[1][1].told, RESIL_ETIMEDOUT);
    assert_false(r->t[2][1].ran);
    assert_int_equal(r->end, T0 + RESIL_S(104));
}

static void hedge_is_refused_when_no_place_to_run_it_is_free(void **state)
{
    (void)state;
    scenario sc = {.build = retry_over_timed_hedging,
                   .script = {{{OK(10), RESIL_S(100), true}, {OK(11), RESIL_S(100), true}},
                    {{OK(20), RESIL_S(100), true}, {OK(21), RESIL_S(100), true}},
                    {{OK(30), RESIL_MS(10), false}, {OK(31), RESIL_MS(10), false}}}};
    both(&sc, check_no_lane);
}

static void check_hedge_refused(const ran *r)
{
    /* The hedge at 2 s meets the isolated breaker and never runs; the
     * primary answers at 3 s. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.outcome.code, 10);
    assert_int_equal(r->res.hedges, 1);
    assert_int_equal(r->res.hedge_winner, 0);
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
    assert_true(r->t[0][0].ran);
    assert_int_equal(r->t[0][0].told, 0);
    assert_false(r->t[0][1].ran);
    assert_int_equal(r->res.records_len, 1);
    assert_int_equal(r->records[0].outcome.kind, RESIL_SUCCESS);
    assert_int_equal(r->records[0].start, T0);
    assert_duration_equal(r->records[0].duration, RESIL_S(3));
}

static void hedge_to_an_endpoint_whose_breaker_is_open_is_refused(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_over_breakers,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(1), false}}},
                   .keys = endpoint_keys, .nkeys = 2, .isolated = "https://eu.example.com"};
    both(&sc, check_hedge_refused);
}

static void check_primary_refused(const ran *r)
{
    /* The primary is refused at once, which starts the hedge at once: the
     * other endpoint answers at 1 s. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.outcome.code, 11);
    assert_int_equal(r->res.hedges, 1);
    assert_int_equal(r->res.hedge_winner, 1);
    assert_duration_equal(r->res.elapsed, RESIL_S(1));
    assert_false(r->t[0][0].ran);
    assert_true(r->t[0][1].ran);
    assert_int_equal(r->t[0][1].ended, T0 + RESIL_S(1));
    assert_int_equal(r->res.records_len, 1);
    assert_int_equal(r->records[0].outcome.code, 11);
    assert_duration_equal(r->records[0].duration, RESIL_S(1));
}

static void primary_to_an_endpoint_whose_breaker_is_open_is_refused(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_over_breakers,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(1), false}}},
                   .keys = endpoint_keys, .nkeys = 2, .isolated = "https://home.example.com"};
    both(&sc, check_primary_refused);
}

/* The default hedge_on: the hedge at 2 s is refused by its endpoint's
 * breaker, which does not end the race — there is no further hedge to
 * launch, so the primary, left running, answers at 3 s. */
static void default_hedge_on_lets_the_primary_outlive_a_refused_hedge(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_over_breakers_by_default,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(1), false}}},
                   .keys = endpoint_keys, .nkeys = 2, .isolated = "https://eu.example.com"};
    both(&sc, check_hedge_refused);
}

/* The default hedge_on: the primary, refused by its endpoint's breaker,
 * is a failure to hedge at once; the other endpoint answers at 1 s. */
static void default_hedge_on_hedges_a_refused_primary_at_once(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_over_breakers_by_default,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(1), false}}},
                   .keys = endpoint_keys, .nkeys = 2, .isolated = "https://home.example.com"};
    both(&sc, check_primary_refused);
}

static void check_every_endpoint_refused(const ran *r)
{
    /* Both attempts are refused at once; with every attempt failed the
     * primary's refusal is the answer, still the breaker's. */
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.hedges, 1);
    assert_int_equal(r->res.hedge_winner, 0);
    assert_duration_equal(r->res.elapsed, 0);
    assert_false(r->t[0][0].ran);
    assert_false(r->t[0][1].ran);
    assert_int_equal(atomic_load(&r->hedge_events), 1);
}

/* When every attempt meets the one breaker: the refused
 * primary is hedged, the hedge is refused too, and nothing ran. */
static void default_hedge_on_over_one_open_breaker_ends_with_its_refusal(void **state)
{
    (void)state;
    static const char *const one_key[] = {"https://home.example.com",
                                          "https://home.example.com"};
    scenario sc = {.build = hedge_over_breakers_by_default,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(1), false}}},
                   .keys = one_key, .nkeys = 2, .isolated = "https://home.example.com"};
    both(&sc, check_every_endpoint_refused);
}

static void check_limiter_refusal_ends_the_race(const ran *r)
{
    /* The hedge at 2 s finds the one permit taken by the primary: a
     * refusal shared by every endpoint is the answer, and the primary is
     * told to stop. */
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_BULKHEAD);
    assert_int_equal(r->res.hedges, 1);
    assert_int_equal(r->res.hedge_winner, 1);
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
    assert_int_equal(r->t[0][0].told, RESIL_ECANCELED);
    assert_int_equal(r->t[0][0].ended, T0 + RESIL_S(2));
    assert_false(r->t[0][1].ran);
}

/* The default hedge_on hedges only refusals that concern the attempt's
 * own endpoint: a full concurrency limiter is everyone's. */
static void default_hedge_on_takes_a_shared_limiters_refusal_as_the_answer(void **state)
{
    (void)state;
    scenario sc = {.build = hedge_over_one_permit_by_default,
                   .script = {{{OK(10), RESIL_S(3), false}, {OK(11), RESIL_S(1), false}}}};
    both(&sc, check_limiter_refusal_ends_the_race);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(primary_answering_before_the_delay_is_never_hedged),
        cmocka_unit_test(hedge_launched_after_the_delay_wins_and_the_primary_is_cancelled),
        cmocka_unit_test(first_success_wins_and_every_loser_is_cancelled),
        cmocka_unit_test(failed_primary_is_hedged_without_waiting_for_the_delay),
        cmocka_unit_test(result_does_not_wait_for_a_loser_that_ignores_its_token),
        cmocka_unit_test(a_hedge_ends_when_it_ends_not_when_the_execution_does),
        cmocka_unit_test(wait_losers_ends_the_execution_when_the_last_loser_ends),
        cmocka_unit_test(hedge_is_refused_when_no_place_to_run_it_is_free),
        cmocka_unit_test(hedge_to_an_endpoint_whose_breaker_is_open_is_refused),
        cmocka_unit_test(primary_to_an_endpoint_whose_breaker_is_open_is_refused),
        cmocka_unit_test(default_hedge_on_lets_the_primary_outlive_a_refused_hedge),
        cmocka_unit_test(default_hedge_on_hedges_a_refused_primary_at_once),
        cmocka_unit_test(default_hedge_on_over_one_open_breaker_ends_with_its_refusal),
        cmocka_unit_test(default_hedge_on_takes_a_shared_limiters_refusal_as_the_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
