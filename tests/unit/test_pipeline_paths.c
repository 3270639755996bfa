/*
 * test_pipeline_paths.c — the pipeline's semantics, each scenario run
 * through both executors with one set of expected values: the blocking
 * executor on the fake clock, and the asynchronous one on a virtual-time
 * loop over the same kind of fake clock.
 *
 * A scenario is a pipeline, a script of outcomes (each attempt lasting
 * `takes` of virtual time) and what the result must be. The blocking
 * operation spends its time in resil_ctx_sleep(), which ends at the
 * attempt's deadline as a cooperative operation does; the asynchronous one
 * arms a loop timer and, when told to stop, reports what its blocking twin
 * returns. Everything else — the strategies, the records, the instants —
 * must come out the same.
 */
#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)

typedef void (*build_fn)(resil_pipeline_builder *b);

typedef struct scenario {
    build_fn build;
    const resil_outcome *outcomes; /* in turn; the last repeats */
    size_t n;
    resil_duration takes;
    bool non_idempotent;
    bool cancel_in_first_wait; /* the caller cancels during the first retry wait */
    bool no_records;           /* the call keeps no attempt records */
    int cancel_reason;         /* the caller's fire's reason; 0: RESIL_ECANCELED */
} scenario;

/* The call's priority, for a degradation gate; 0: the default. */
static int32_t call_priority;

typedef struct ran {
    resil_pipeline_result res;
    resil_attempt_record records[8];
    int calls;
    int refreshes; /* the auth-refresh retry's hook ran */
    resil_instant end;
    size_t loop_reads; /* async: the loop clock's readings */
    resil_instant deadlines[8]; /* the deadline each attempt was handed */
    int behaviors;              /* an injected behaviour ran */
} ran;

/* One path's run: the clock, the script's position and the async op's
 * timer. */
typedef struct player {
    const scenario *sc;
    int calls;
    int refreshes;
    resil_fake_clock *fc;
    resil_cancel *cancel; /* blocking: the call's token; async: the attempt's */
    resil_cancel *token;  /* async: the call's token, when the canceller fires it */
    resil_exec *x;        /* async: the execution */
    resil_attempt *a;
    resil_outcome pending;
    resil_timer finish;
    resil_timer canceller;
    virtual_loop *vl;
    bool done;
    ran *out;
} player;

static player *listening; /* the player running now, for listeners */

static resil_outcome next_outcome(player *pl, const resil_attempt_ctx *ctx)
{
    size_t i = (size_t)pl->calls < pl->sc->n ? (size_t)pl->calls : pl->sc->n - 1;
    if (pl->calls < 8)
        pl->out->deadlines[pl->calls] = ctx->deadline;
    pl->calls++;
    return pl->sc->outcomes[i];
}

static resil_outcome stopped(const resil_cancel *c)
{
    int rc = resil_cancel_reason(c) == RESIL_ETIMEDOUT ? RESIL_ETIMEDOUT : RESIL_ECANCELED;
    return resil_fail(RESIL_CANCELLED, rc, "stopped");
}

static resil_pipeline *build(const scenario *sc, resil_clock *clock)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("paths", &b, NULL), 0);
    resil_pipeline_builder_clock(b, clock);
    sc->build(b);
    resil_pipeline *p = NULL;
    resil_err err = {0, ""};
    int rc = resil_pipeline_build(b, &p, &err);
    resil_pipeline_builder_free(b);
    if (rc != 0)
        fail_msg("build: %s", err.message);
    return p;
}

static void prepare_call(resil_call *call, player *pl, ran *out, resil_rng_seeded *rng)
{
    resil_call_default(call);
    call->user = pl;
    call->records = pl->sc->no_records ? NULL : out->records;
    call->records_cap = pl->sc->no_records ? 0 : 8;
    call->non_idempotent = pl->sc->non_idempotent;
    if (call_priority != 0)
        call->priority = call_priority;
    resil_rng_seeded_init(rng, 7);
    call->rng = &rng->base;
}

/* ---- the blocking path ------------------------------------------------------ */

static resil_outcome blocking_op(resil_attempt_ctx *ctx)
{
    player *pl = ctx->user;
    resil_outcome o = next_outcome(pl, ctx);
    if (pl->sc->takes > 0 && resil_ctx_sleep(ctx, pl->sc->takes) != 0)
        return stopped(ctx->cancel);
    return o;
}

static int reason_of(const scenario *sc)
{
    return sc->cancel_reason != 0 ? sc->cancel_reason : RESIL_ECANCELED;
}

/* The first sleep that is not an attempt's is the first retry wait. */
static void cancel_on_wait(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    player *pl = ud;
    if (d != pl->sc->takes && !pl->done) {
        pl->done = true;
        resil_cancel_fire_reason(pl->cancel, reason_of(pl->sc));
    }
}

static void run_blocking(const scenario *sc, ran *out)
{
    memset(out, 0, sizeof *out);
    player pl = {.sc = sc, .out = out};
    listening = &pl;
    assert_int_equal(resil_fake_clock_new(T0, 0, &pl.fc), 0);
    resil_pipeline *p = build(sc, resil_fake_clock_clock(pl.fc));
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    pl.cancel = &token;
    resil_call call;
    resil_rng_seeded rng;
    prepare_call(&call, &pl, out, &rng);
    call.cancel = &token;
    if (sc->cancel_in_first_wait)
        resil_fake_clock_set_hook(pl.fc, cancel_on_wait, &pl);
    assert_int_equal(resil_pipeline_execute(p, blocking_op, &call, &out->res), 0);
    out->calls = pl.calls;
    out->refreshes = pl.refreshes;
    out->end = resil_fake_clock_now(pl.fc);
    resil_cancel_destroy(&token);
    resil_pipeline_free(p);
    resil_fake_clock_free(pl.fc);
}

/* ---- the asynchronous path --------------------------------------------------- */

static void async_finished(resil_timer *t)
{
    player *pl = (player *)((char *)t - offsetof(player, finish));
    resil_attempt_done(pl->a, &pl->pending);
}

static void async_told(resil_attempt *a, void *ud)
{
    player *pl = ud;
    pl->vl->loop.ops->timer_stop(pl->vl, &pl->finish);
    resil_outcome o = stopped(pl->cancel);
    resil_attempt_done(a, &o);
}

static void async_op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    player *pl = ctx->user;
    resil_outcome o = next_outcome(pl, ctx);
    if (pl->sc->takes == 0) {
        resil_attempt_done(a, &o);
        return;
    }
    pl->a = a;
    pl->cancel = ctx->cancel;
    pl->pending = o;
    pl->finish.fn = async_finished;
    resil_attempt_on_cancel(a, async_told, pl);
    pl->vl->loop.ops->timer_start(pl->vl, &pl->finish, pl->sc->takes);
}

static void async_done(const resil_pipeline_result *res, void *ud)
{
    player *pl = ud;
    pl->out->res = *res;
    pl->done = true;
}

/* Cancel once the execution is in its first retry wait: the first attempt
 * takes no time, so any instant after the start is inside the wait. The
 * caller's token, as on the blocking path, or the execution itself. */
static void async_cancel_now(player *pl)
{
    if (pl->done)
        return;
    if (pl->token != NULL)
        resil_cancel_fire_reason(pl->token, reason_of(pl->sc));
    else
        resil_exec_cancel(pl->x);
}

static void async_cancel(resil_timer *t)
{
    async_cancel_now((player *)((char *)t - offsetof(player, canceller)));
}

typedef enum canceller { BY_TOKEN, BY_EXEC_CANCEL } canceller;

static void run_async(const scenario *sc, ran *out, canceller by)
{
    memset(out, 0, sizeof *out);
    player pl = {.sc = sc, .out = out};
    listening = &pl;
    assert_int_equal(resil_fake_clock_new(T0, 0, &pl.fc), 0);
    virtual_loop vl;
    virtual_loop_init(&vl, pl.fc);
    pl.vl = &vl;
    resil_pipeline *p = build(sc, resil_loop_clock(&vl.loop));
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_call call;
    resil_rng_seeded rng;
    prepare_call(&call, &pl, out, &rng);
    call.cancel = &token;
    if (by == BY_TOKEN)
        pl.token = &token;
    if (sc->cancel_in_first_wait) {
        pl.canceller.fn = async_cancel;
        vl.loop.ops->timer_start(&vl, &pl.canceller, 1);
    }
    assert_int_equal(resil_pipeline_start(p, &vl.loop, async_op, &call, async_done, &pl, &pl.x),
                     0);
    virtual_loop_run(&vl, NULL);
    assert_true(pl.done);
    out->calls = pl.calls;
    out->refreshes = pl.refreshes;
    out->end = resil_fake_clock_now(pl.fc);
    out->loop_reads = atomic_load(&vl.reads);
    resil_cancel_destroy(&token);
    resil_pipeline_free(p);
    virtual_loop_destroy(&vl);
    resil_fake_clock_free(pl.fc);
}

/* The asynchronous run held to the blocking one's values. */
static void async_agrees(const scenario *sc, void (*check)(const ran *r), ran *b, canceller by)
{
    ran a;
    run_async(sc, &a, by);
    check(&a);
    assert_int_equal(a.res.stop, b->res.stop);
    assert_int_equal(a.res.attempts, b->res.attempts);
    assert_int_equal(a.res.outcome.kind, b->res.outcome.kind);
    assert_int_equal(a.res.outcome.code, b->res.outcome.code);
    assert_string_equal(a.res.outcome.detail, b->res.outcome.detail);
    assert_int_equal(a.res.rejected_by, b->res.rejected_by);
    assert_int_equal(a.res.records_len, b->res.records_len);
    if (!sc->cancel_in_first_wait) {
        assert_records_equal(a.records, b->records, b->res.records_len);
        assert_duration_equal(a.res.elapsed, b->res.elapsed);
        assert_int_equal(a.end, b->end);
    } else if (b->res.records_len > 0) {
        /* The two cancel 1 ns apart (blocking: as its wait begins; async:
         * 1 ns in): the last record's duration is where that shows. */
        size_t last = b->res.records_len - 1;
        resil_duration later = a.records[last].duration - b->records[last].duration;
        assert_true(later == 0 || later == 1);
        a.records[last].duration = b->records[last].duration;
        assert_records_equal(a.records, b->records, b->res.records_len);
    }
    assert_int_equal(a.calls, b->calls);
    for (int i = 0; i < b->calls && i < 8; i++)
        assert_int_equal(a.deadlines[i], b->deadlines[i]);
    assert_int_equal(a.refreshes, b->refreshes);
    assert_int_equal(a.behaviors, b->behaviors);
}

/* Run both paths; `check` holds each to the same expectations, and the
 * two must agree on every recorded field besides. The asynchronous run
 * goes twice, cancelled (if the scenario cancels) both ways: by the
 * call's token, as the blocking run is, and by resil_exec_cancel()
 * (whose reason is always RESIL_ECANCELED). */
static void both(const scenario *sc, void (*check)(const ran *r))
{
    ran b;
    run_blocking(sc, &b);
    check(&b);
    async_agrees(sc, check, &b, BY_TOKEN);
    if (reason_of(sc) == RESIL_ECANCELED)
        async_agrees(sc, check, &b, BY_EXEC_CANCEL);
}

/* ---- pipelines --------------------------------------------------------------- */

static void standard_no_jitter(resil_pipeline_builder *b)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.retry.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_standard(b, &o), 0);
}

static void standard_jittered(resil_pipeline_builder *b)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    assert_int_equal(resil_pipeline_add_standard(b, &o), 0);
}

/* The standard pipeline whose breaker opens after two failures in a row. */
static void standard_quick_breaker(resil_pipeline_builder *b)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.retry.backoff.jitter = RESIL_JITTER_NONE;
    o.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    o.breaker.failure_threshold = 2;
    o.breaker.break_duration = RESIL_S(60);
    assert_int_equal(resil_pipeline_add_standard(b, &o), 0);
}

static void retry_with_attempt_timeout(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    test_add_attempt_timeout(b, RESIL_S(2));
}

static void total_timeout_around_retry(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_S(5));
    test_add_retry_constant(b, 10, RESIL_S(1));
}

/* The standard pipeline's order without its outer strategies: the walk
 * enters the standard's inlined tail below its first level. */
static void breaker_of_five(resil_pipeline_builder *b)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = 5;
    assert_int_equal(resil_pipeline_add_breaker(b, &o), 0);
}

static void standard_tail_from_the_total(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_S(10));
    test_add_retry_constant(b, 3, RESIL_S(1));
    breaker_of_five(b);
    test_add_attempt_timeout(b, RESIL_S(2));
}

static void standard_tail_from_the_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    breaker_of_five(b);
    test_add_attempt_timeout(b, RESIL_S(2));
}

static void retry_then_breaker(resil_pipeline_builder *b)
{
    resil_retry_policy r = test_retry_constant(5, RESIL_MS(100));
    r.retry_on = NULL;
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    o.failure_threshold = 2;
    o.break_duration = RESIL_S(10);
    assert_int_equal(resil_pipeline_add_breaker(b, &o), 0);
}

static resil_outcome fallback_answer(const resil_fallback_info *info, void *user, void *ud)
{
    (void)info;
    (void)user;
    (void)ud;
    return resil_fail(RESIL_KIND_USER, 7, "cached");
}

static void fallback_over_retry(resil_pipeline_builder *b)
{
    resil_fallback_opts fb;
    resil_fallback_opts_default(&fb);
    fb.action = fallback_answer;
    assert_int_equal(resil_pipeline_add_fallback(b, &fb), 0);
    test_add_retry_constant(b, 2, RESIL_S(1));
}

static void waiting_rate_limiter(resil_pipeline_builder *b)
{
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_FIXED_WINDOW);
    o.permits = 1;
    o.window = RESIL_S(1);
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, RESIL_S(2)), 0);
    test_add_retry_constant(b, 3, RESIL_MS(10));
}

/* The same limiter inside the retry: every attempt takes a permit. */
static void retry_over_waiting_rate_limiter(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_MS(10));
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_FIXED_WINDOW);
    o.permits = 1;
    o.window = RESIL_S(1);
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, RESIL_S(2)), 0);
}

static void plain_retry3(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
}

static void async_cancel_now(player *pl);

/* The caller cancels from inside the retry's hook, after the retry was
 * decided and before its wait: blocking, the wait finds the token fired;
 * asynchronously, in the first walk, before the caller's token is
 * watched. */
static void cancel_from_the_hook(const resil_retry_info *info, void *user, void *hook_ud)
{
    (void)info;
    (void)hook_ud;
    player *pl = user;
    if (pl->vl == NULL)
        resil_cancel_fire(pl->cancel);
    else
        async_cancel_now(pl);
}

static void retry3_cancelled_by_its_hook(resil_pipeline_builder *b)
{
    resil_retry_policy r = test_retry_constant(3, RESIL_S(1));
    r.on_retry = cancel_from_the_hook;
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
}

static void chaos_latency_inside_attempt_timeout(resil_pipeline_builder *b)
{
    test_add_attempt_timeout(b, RESIL_S(2));
    resil_chaos_opts c;
    resil_chaos_opts_default(&c, RESIL_CHAOS_LATENCY);
    c.rate = 1.0;
    c.latency = RESIL_MS(1500);
    assert_int_equal(resil_pipeline_add_chaos(b, &c), 0);
}

static void chaos_fault_under_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_chaos_opts c;
    resil_chaos_opts_default(&c, RESIL_CHAOS_FAULT);
    c.rate = 1.0;
    c.outcome = resil_fail(RESIL_TRANSIENT, 599, "injected");
    assert_int_equal(resil_pipeline_add_chaos(b, &c), 0);
}

static void retry_over_throttle(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 6, RESIL_MS(100));
    static resil_rng_seeded draws; /* the same draws on both paths */
    resil_rng_seeded_init(&draws, 11);
    resil_throttle_opts t;
    resil_throttle_opts_default(&t);
    t.rng = &draws.base;
    assert_int_equal(resil_pipeline_add_throttle(b, &t), 0);
}

static void retry_over_adaptive_limiter(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_limiter_opts l;
    resil_limiter_opts_default(&l, RESIL_LIMIT_AIMD);
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &l), 0);
}

/* A limit of one, no queue: each attempt needs the permit the last one
 * gave back (which the thread keeps parked for its next call). */
static void retry_over_a_limit_of_one(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_limiter_opts l;
    resil_limiter_opts_default(&l, RESIL_LIMIT_AIMD);
    l.initial_limit = l.min_limit = l.max_limit = 1;
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &l), 0);
}

static void retry_with_a_list_of_waits(resil_pipeline_builder *b)
{
    static const resil_duration waits[] = {RESIL_S(1), RESIL_S(2), RESIL_S(5)};
    resil_retry_policy r = test_retry_constant(5, 0);
    r.backoff.kind = RESIL_BACKOFF_LIST;
    r.backoff.delays = waits;
    r.backoff.delays_len = 3;
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
}

/* 300 ms after the first attempt, the backoff's 1 s after the second;
 * it sees the call's own context, at the attempt the script has reached. */
static resil_duration generated_wait(const resil_delay_info *info, void *ud)
{
    (void)ud;
    const player *pl = info->ctx->user;
    assert_int_equal((uint32_t)pl->calls, info->attempt);
    return info->attempt == 1 ? RESIL_MS(300) : RESIL_DELAY_BACKOFF;
}

static void retry_with_a_delay_generator(resil_pipeline_builder *b)
{
    resil_retry_policy r = test_retry_constant(3, RESIL_S(1));
    r.delay = generated_wait;
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
}

static bool pending(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return o->kind == RESIL_SUCCESS ? strcmp(o->detail, "pending") == 0
                                    : resil_retry_on_default(o, NULL);
}

static void retry_on_a_pending_result(resil_pipeline_builder *b)
{
    resil_retry_policy r = test_retry_constant(4, RESIL_S(1));
    r.retry_on = pending;
    r.retry_on_results = true;
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
}

static bool on_401(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return o->code == 401;
}

static void refresh_token(const resil_retry_info *info, void *user, void *ud)
{
    (void)info;
    (void)ud;
    ((player *)user)->refreshes++;
}

/* The seed's auth refresh: one retry on 401, whose hook refreshes the
 * token, outside the retry for transient failures. */
static void auth_refresh_around_transient_retry(resil_pipeline_builder *b)
{
    resil_retry_policy auth = test_retry_constant(2, RESIL_MS(100));
    auth.retry_on = on_401;
    auth.on_retry = refresh_token;
    assert_int_equal(resil_pipeline_add_retry(b, &auth), 0);
    test_add_retry_constant(b, 3, RESIL_S(1));
}

/* ---- scenarios ---------------------------------------------------------------- */

static const resil_outcome ok1[] = {{RESIL_SUCCESS, 200, RESIL_NO_HINT, ""}};
static const resil_outcome t503_t503_ok[] = {{RESIL_TRANSIENT, 503, RESIL_NO_HINT, "http"},
                                             {RESIL_TRANSIENT, 503, RESIL_NO_HINT, "http"},
                                             {RESIL_SUCCESS, 200, RESIL_NO_HINT, ""}};
static const resil_outcome t503[] = {{RESIL_TRANSIENT, 503, RESIL_NO_HINT, "http"}};
static const resil_outcome throttled_then_ok[] = {
    {RESIL_THROTTLED, 429, RESIL_S(3), "slow down"}, {RESIL_SUCCESS, 200, RESIL_NO_HINT, ""}};

static void check_success_first_time(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->res.outcome.kind, RESIL_SUCCESS);
    assert_duration_equal(r->res.elapsed, RESIL_MS(20));
    assert_int_equal(r->calls, 1);
}

static void standard_pipeline_succeeds_at_the_first_attempt(void **state)
{
    (void)state;
    scenario sc = {standard_no_jitter, ok1, 1, RESIL_MS(20), false, false, false, 0};
    both(&sc, check_success_first_time);
}

static void check_two_503_then_200(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.records_len, 3);
    assert_duration_equal(r->records[0].wait, RESIL_S(2));
    assert_duration_equal(r->records[1].wait, RESIL_S(4));
    assert_int_equal(r->records[2].start, T0 + RESIL_S(6) + RESIL_MS(20));
    assert_duration_equal(r->res.elapsed, RESIL_S(6) + RESIL_MS(30));
}

static void standard_pipeline_retries_503_503_200_with_exponential_waits(void **state)
{
    (void)state;
    scenario sc = {standard_no_jitter, t503_t503_ok, 3, RESIL_MS(10), false, false, false, 0};
    both(&sc, check_two_503_then_200);
}

static void check_tail_from_the_total(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_duration_equal(r->records[0].wait, RESIL_S(1));
    assert_duration_equal(r->records[1].wait, RESIL_S(1));
    assert_int_equal(r->records[2].start, T0 + RESIL_S(2) + RESIL_MS(20));
    assert_duration_equal(r->res.elapsed, RESIL_S(2) + RESIL_MS(30));
    /* each attempt's deadline: its own 2 s, inside the total's 10 s */
    assert_int_equal(r->deadlines[0], T0 + RESIL_S(2));
    assert_int_equal(r->deadlines[1], T0 + RESIL_S(3) + RESIL_MS(10));
    assert_int_equal(r->deadlines[2], T0 + RESIL_S(4) + RESIL_MS(20));
}

static void the_standard_order_without_a_bulkhead_retries_as_the_standard(void **state)
{
    (void)state;
    scenario sc = {standard_tail_from_the_total, t503_t503_ok, 3, RESIL_MS(10), false, false,
                   false, 0};
    both(&sc, check_tail_from_the_total);
}

static void check_tail_from_the_retry(const ran *r)
{
    /* every attempt runs into its 2 s timeout; the breaker (five in a row)
     * stays closed over three */
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_NONE);
    assert_int_equal(r->records[1].start, T0 + RESIL_S(3));
    assert_duration_equal(r->records[1].duration, RESIL_S(2));
    assert_duration_equal(r->res.elapsed, RESIL_S(8));
}

static void the_standard_order_from_the_retry_times_out_each_attempt(void **state)
{
    (void)state;
    scenario sc = {standard_tail_from_the_retry, ok1, 1, RESIL_S(3), false, false, false, 0};
    both(&sc, check_tail_from_the_retry);
}

static void check_jitter(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 4);
    assert_true(r->records[0].wait > 0);
}

static void jittered_waits_draw_the_same_numbers_on_both_paths(void **state)
{
    (void)state;
    scenario sc = {standard_jittered, t503, 1, 0, false, false, false, 0};
    both(&sc, check_jitter);
}

/* Two 503s open the breaker; the third attempt, 6 s in, is refused by it
 * inside the walk, below the retry, which then stops on the refusal. */
static void check_standard_breaker_refuses(const ran *r)
{
    assert_int_equal(r->calls, 2);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_duration_equal(r->records[0].wait, RESIL_S(2));
    assert_duration_equal(r->records[1].wait, RESIL_S(4));
    assert_int_equal(r->records[2].start, T0 + RESIL_S(6) + RESIL_MS(20));
    assert_duration_equal(r->res.elapsed, RESIL_S(6) + RESIL_MS(20));
}

static void the_standard_breaker_refuses_the_attempt_after_it_opens(void **state)
{
    (void)state;
    scenario sc = {standard_quick_breaker, t503, 1, RESIL_MS(10), false, false, false, 0};
    both(&sc, check_standard_breaker_refuses);
}

/* Attempts of 20 s: the 10 s attempt timeout cuts the first two (at 10 s
 * and 22 s); the third, begun at 26 s, meets the 30 s total first. */
static void check_standard_slow_attempts(const ran *r)
{
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_duration_equal(r->records[0].duration, RESIL_S(10));
    assert_int_equal(r->records[1].start, T0 + RESIL_S(12));
    assert_duration_equal(r->records[1].duration, RESIL_S(10));
    assert_int_equal(r->records[2].start, T0 + RESIL_S(26));
    assert_int_equal(r->deadlines[2], T0 + RESIL_S(30));
    assert_duration_equal(r->res.elapsed, RESIL_S(30));
}

static void the_standard_timeouts_cut_slow_attempts_and_then_the_whole(void **state)
{
    (void)state;
    scenario sc = {standard_no_jitter, ok1, 1, RESIL_S(20), false, false, false, 0};
    both(&sc, check_standard_slow_attempts);
}

static void check_attempt_timeout(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(r->res.outcome.detail, "attempt timeout (2s) elapsed");
    assert_duration_equal(r->records[0].duration, RESIL_S(2));
    assert_duration_equal(r->res.elapsed, 3 * RESIL_S(2) + 2 * RESIL_S(1));
}

static void attempt_timeout_cancels_a_slow_attempt_and_the_retry_goes_again(void **state)
{
    (void)state;
    scenario sc = {retry_with_attempt_timeout, ok1, 1, RESIL_S(5), false, false, false, 0};
    both(&sc, check_attempt_timeout);
}

/* An attempt that reaches its timeout's instant has timed out, on both
 * paths, as one that runs past it: the blocking operation's sleep ends at
 * the deadline as the timeout's, and the asynchronous timeout's timer,
 * armed once the attempt runs on but in the place it took as the walk
 * entered it, runs before the timer the operation started for the same
 * instant. */
static void an_attempt_reaching_its_timeout_has_timed_out(void **state)
{
    (void)state;
    scenario sc = {retry_with_attempt_timeout, ok1, 1, RESIL_S(2), false, false, false, 0};
    both(&sc, check_attempt_timeout);
}

static void check_total_timeout(const ran *r)
{
    /* 2 s attempts and 1 s waits: attempt 3 runs from 6 s, past the 5 s
     * total, which cancels it at 5 s. */
    assert_int_equal(r->res.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(r->res.outcome.detail, "total timeout (5s) elapsed");
    assert_duration_equal(r->res.elapsed, RESIL_S(5));
}

static void total_timeout_ends_the_retry_loop_as_deadline(void **state)
{
    (void)state;
    scenario sc = {total_timeout_around_retry, t503, 1, RESIL_S(2), false, false, false, 0};
    both(&sc, check_total_timeout);
}

static void check_breaker(const ran *r)
{
    /* Two failures open the breaker; the third attempt is its rejection,
     * which the default classifier does not retry. */
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_int_equal(r->calls, 2);
}

static void breaker_opens_inside_the_retry_loop_and_rejects_the_next_attempt(void **state)
{
    (void)state;
    scenario sc = {retry_then_breaker, t503, 1, 0, false, false, false, 0};
    both(&sc, check_breaker);
}

static void check_fallback(const ran *r)
{
    assert_true(r->res.fallback);
    assert_int_equal(r->res.outcome.code, 7);
    assert_int_equal(r->res.cause.code, 503);
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

static void fallback_answers_when_the_retries_are_used_up(void **state)
{
    (void)state;
    scenario sc = {fallback_over_retry, t503, 1, 0, false, false, false, 0};
    both(&sc, check_fallback);
}

static void check_rate_once(const ran *r)
{
    /* Outside the retry the limiter is passed once, at the entry: its one
     * permit covers every attempt, and only the retry's waits are spent. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->calls, 3);
    assert_duration_equal(r->res.elapsed, RESIL_MS(20));
}

static void a_rate_limiter_outside_the_retry_admits_the_whole_execution(void **state)
{
    (void)state;
    scenario sc = {waiting_rate_limiter, t503_t503_ok, 3, 0, false, false, false, 0};
    both(&sc, check_rate_once);
}

static void check_rate_wait(const ran *r)
{
    /* One permit a second: attempt 1 takes it at once; each retry, 10 ms
     * later, waits out the rest of the window for the next one. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->res.records_len, 3);
    assert_duration_equal(r->records[0].wait, RESIL_MS(10));
    assert_duration_equal(r->records[1].wait, RESIL_MS(10));
    assert_int_equal(r->records[1].start, T0 + RESIL_MS(10));
    assert_duration_equal(r->records[1].duration, RESIL_MS(990));
    assert_int_equal(r->records[2].start, T0 + RESIL_S(1) + RESIL_MS(10));
    assert_duration_equal(r->records[2].duration, RESIL_MS(990));
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
}

static void a_rate_limiter_inside_the_retry_spends_each_attempts_wait(void **state)
{
    (void)state;
    scenario sc = {retry_over_waiting_rate_limiter, t503_t503_ok, 3, 0, false, false, false, 0};
    both(&sc, check_rate_wait);
}

static void check_retry_after(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->records[0].source, RESIL_WAIT_RETRY_AFTER);
    assert_duration_equal(r->records[0].wait, RESIL_S(3));
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
}

static void retry_after_hint_sets_the_wait(void **state)
{
    (void)state;
    scenario sc = {plain_retry3, throttled_then_ok, 2, 0, false, false, false, 0};
    both(&sc, check_retry_after);
}

static void check_refused(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_REFUSED);
    assert_int_equal(r->res.attempts, 0);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_RETRY);
    assert_int_equal(r->calls, 0);
}

static void non_idempotent_work_is_refused_before_it_runs(void **state)
{
    (void)state;
    scenario sc = {plain_retry3, ok1, 1, 0, true, false, false, 0};
    both(&sc, check_refused);
}

/* The first attempt ran, and the wait after it ended cancelled. */
static void assert_cancelled_in_the_first_wait(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->res.outcome.kind, RESIL_CANCELLED);
    assert_string_equal(r->res.outcome.detail, "cancelled while waiting to retry");
    assert_int_equal(r->calls, 1);
}

static void check_cancelled(const ran *r)
{
    assert_cancelled_in_the_first_wait(r);
    /* The wait ended with the cancel, not after its backoff: at its start
     * (blocking) or 1 ns in (async). */
    assert_in_range(r->res.elapsed, 0, 1);
    assert_in_range(r->end, T0, T0 + 1);
}

static void cancel_during_a_retry_wait_stops_as_cancelled(void **state)
{
    (void)state;
    scenario sc = {plain_retry3, t503, 1, 0, false, true, false, 0};
    both(&sc, check_cancelled);
}

static void check_cancelled_at_the_start_of_the_wait(const ran *r)
{
    assert_cancelled_in_the_first_wait(r);
    assert_duration_equal(r->res.elapsed, 0);
    assert_int_equal(r->end, T0);
}

static void a_cancel_from_the_retry_hook_ends_the_wait_before_it_begins(void **state)
{
    (void)state;
    scenario sc = {retry3_cancelled_by_its_hook, t503, 1, 0, false, false, false, 0};
    both(&sc, check_cancelled_at_the_start_of_the_wait);
}

/* The caller's token fired for the caller's own deadline: the run stops
 * at a deadline, as under the pipeline's total timeout. */
static void check_deadline_in_the_wait(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->calls, 1);
    assert_in_range(r->end, T0, T0 + 1);
}

static void a_token_fired_for_a_deadline_during_a_retry_wait_stops_at_the_deadline(void **state)
{
    (void)state;
    scenario sc = {plain_retry3, t503, 1, 0, false, true, false, RESIL_ETIMEDOUT};
    both(&sc, check_deadline_in_the_wait);
}

/* ---- without records: the retry level's first attempt without its executor -- */

static void check_success_first_time_unrecorded(const ran *r)
{
    check_success_first_time(r);
    assert_int_equal(r->res.records_len, 0);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_NONE);
    assert_int_equal(r->end, T0 + RESIL_MS(20));
}

static void without_records_a_first_success_leaves_the_executors_result(void **state)
{
    (void)state;
    scenario sc = {standard_no_jitter, ok1, 1, RESIL_MS(20), false, false, true, 0};
    both(&sc, check_success_first_time_unrecorded);
}

static void check_two_503_then_200_unrecorded(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.records_len, 0);
    assert_int_equal(r->res.outcome.kind, RESIL_SUCCESS);
    assert_duration_equal(r->res.elapsed, RESIL_S(6) + RESIL_MS(30));
    assert_int_equal(r->calls, 3);
}

static void without_records_a_failed_first_attempt_is_the_retrys_first(void **state)
{
    (void)state;
    scenario sc = {standard_no_jitter, t503_t503_ok, 3, RESIL_MS(10), false, false, true, 0};
    both(&sc, check_two_503_then_200_unrecorded);
}

static void check_attempt_timeout_unrecorded(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(r->res.outcome.detail, "attempt timeout (2s) elapsed");
    assert_duration_equal(r->res.elapsed, 3 * RESIL_S(2) + 2 * RESIL_S(1));
    assert_int_equal(r->calls, 3);
}

static void without_records_a_first_attempt_cut_by_its_timeout_is_retried(void **state)
{
    (void)state;
    scenario sc = {retry_with_attempt_timeout, ok1, 1, RESIL_S(5), false, false, true, 0};
    both(&sc, check_attempt_timeout_unrecorded);
}

static void without_records_a_cancel_in_the_first_wait_stops_as_cancelled(void **state)
{
    (void)state;
    scenario sc = {plain_retry3, t503, 1, 0, false, true, true, 0};
    both(&sc, check_cancelled);
}

static void check_first_attempt_past_the_total_timeout(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(r->res.outcome.detail, "total timeout (5s) elapsed");
    assert_duration_equal(r->res.elapsed, RESIL_S(5));
    assert_int_equal(r->calls, 1);
}

static void without_records_a_first_attempt_past_the_total_timeout_stops_as_deadline(
    void **state)
{
    (void)state;
    scenario sc = {total_timeout_around_retry, ok1, 1, RESIL_S(6), false, false, true, 0};
    both(&sc, check_first_attempt_past_the_total_timeout);
}

/* Asynchronous only (the blocking path's cancel comes in the first wait):
 * the caller cancels while the first attempt runs (its token, or the
 * execution), which hears it and reports "stopped". Without records the
 * retry ran that attempt without its executor; the run ends exactly as
 * the executor's own run does. */
static void check_cancelled_in_the_first_attempt(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(r->res.outcome.code, RESIL_ECANCELED);
    assert_string_equal(r->res.outcome.detail, "stopped");
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->end, T0 + 1);
}

static void without_records_a_cancel_during_the_first_attempt_stops_as_cancelled(void **state)
{
    (void)state;
    scenario recorded = {plain_retry3, ok1, 1, RESIL_MS(10), false, true, false, 0};
    scenario unrecorded = {plain_retry3, ok1, 1, RESIL_MS(10), false, true, true, 0};
    for (canceller by = BY_TOKEN; by <= BY_EXEC_CANCEL; by++) {
        ran with, without;
        run_async(&recorded, &with, by);
        check_cancelled_in_the_first_attempt(&with);
        assert_int_equal(with.res.records_len, 1);
        run_async(&unrecorded, &without, by);
        check_cancelled_in_the_first_attempt(&without);
        assert_int_equal(without.res.records_len, 0);
        assert_duration_equal(without.res.elapsed, 1);
    }
}

/* ---- with records: the first attempt without the executor, recorded as it
 * would record it ---------------------------------------------------------- */

/* The executor's record of a first success at T0 lasting 20 ms. */
static void check_first_success_recorded(const ran *r)
{
    check_success_first_time(r);
    assert_int_equal(r->res.records_len, 1);
    const resil_attempt_record *rec = &r->records[0];
    assert_int_equal(rec->number, 1);
    assert_int_equal(rec->outcome.kind, RESIL_SUCCESS);
    assert_int_equal(rec->stop, RESIL_STOP_SUCCEEDED);
    assert_duration_equal(rec->wait, 0);
    assert_int_equal(rec->source, RESIL_WAIT_NONE);
    assert_int_equal(rec->start, T0);
    assert_duration_equal(rec->duration, RESIL_MS(20));
}

/* The attempt's end is the reading the pipeline's own breaker took. */
static void with_records_a_first_success_is_recorded_as_the_executor_records_it(void **state)
{
    (void)state;
    scenario sc = {standard_no_jitter, ok1, 1, RESIL_MS(20), false, false, false, 0};
    both(&sc, check_first_success_recorded);
}

/* Nothing below the retry reads the clock: its end is a reading of its own. */
static void with_records_a_first_success_alone_under_the_retry_reads_its_end(void **state)
{
    (void)state;
    scenario sc = {plain_retry3, ok1, 1, RESIL_MS(20), false, false, false, 0};
    both(&sc, check_first_success_recorded);
}

static void retry_inside_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 2, RESIL_S(1));
    test_add_retry_constant(b, 3, RESIL_S(1));
}

/* The record is the outermost retry's; the inner one keeps none. */
static void with_records_a_first_success_through_two_retries_is_recorded_once(void **state)
{
    (void)state;
    scenario sc = {retry_inside_retry, ok1, 1, RESIL_MS(20), false, false, false, 0};
    both(&sc, check_first_success_recorded);
}

static void check_chaos_latency(const ran *r)
{
    /* 1.5 s injected, then a 1 s attempt: the 2 s attempt timeout cuts it. */
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(r->res.outcome.detail, "attempt timeout (2s) elapsed");
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
    assert_int_equal(r->calls, 1);
}

static void chaos_latency_is_a_wait_the_attempt_timeout_bounds(void **state)
{
    (void)state;
    scenario sc = {chaos_latency_inside_attempt_timeout,
                   ok1, 1, RESIL_S(1), false, false, false, 0};
    both(&sc, check_chaos_latency);
}

static void check_chaos_latency_cancelled(const ran *r)
{
    /* cancelled inside the injected wait: the operation never runs */
    assert_int_equal(r->res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(r->res.outcome.code, RESIL_ECANCELED);
    assert_string_equal(r->res.outcome.detail, "cancelled during injected latency");
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_NONE);
    assert_int_equal(r->calls, 0);
}

/* The caller cancels from a listener as the latency is injected, before
 * its wait begins (blocking: the sleep finds the token fired; async: the
 * walk has not reached the wait when the cancel pokes). Listeners hear
 * nothing of the call, so the running player is the file's (listening). */

static void cancel_on_injection(const resil_event *ev, void *ud)
{
    (void)ud;
    if (ev->type != RESIL_EVENT_CHAOS_INJECTED)
        return;
    if (listening->vl == NULL)
        resil_cancel_fire(listening->cancel);
    else
        async_cancel_now(listening);
}

static void chaos_latency_cancelled_by_a_listener(resil_pipeline_builder *b)
{
    chaos_latency_inside_attempt_timeout(b);
    assert_int_equal(resil_pipeline_builder_listen(b, cancel_on_injection, NULL), 0);
}

static void check_chaos_latency_cancelled_as_it_began(const ran *r)
{
    check_chaos_latency_cancelled(r);
    assert_duration_equal(r->res.elapsed, 0);
    assert_int_equal(r->end, T0);
}

static void a_cancel_as_latency_is_injected_ends_it_before_it_begins(void **state)
{
    (void)state;
    scenario sc = {chaos_latency_cancelled_by_a_listener, ok1, 1, RESIL_S(1), false, false,
                   false, 0};
    both(&sc, check_chaos_latency_cancelled_as_it_began);
}

static void a_cancel_inside_injected_latency_ends_it_without_the_call(void **state)
{
    (void)state;
    scenario sc = {chaos_latency_inside_attempt_timeout, ok1, 1, RESIL_S(1), false, true, false, 0};
    both(&sc, check_chaos_latency_cancelled);
}

static void check_chaos_fault(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.code, 599);
    assert_string_equal(r->res.outcome.detail, "injected");
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
    assert_int_equal(r->calls, 0);
}

static void chaos_fault_answers_for_the_operation_on_every_attempt(void **state)
{
    (void)state;
    scenario sc = {chaos_fault_under_retry, ok1, 1, 0, false, false, false, 0};
    both(&sc, check_chaos_fault);
}

static void check_throttle(const ran *r)
{
    /* The first attempt's failure outweighs what the throttle has seen
     * accepted: with the seeded draw it refuses the second, and the retry
     * does not retry a rejection. */
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.attempts, 2);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_THROTTLE);
    assert_int_equal(r->calls, 1);
}

static void throttle_counts_each_attempt_as_the_blocking_executor_does(void **state)
{
    (void)state;
    scenario sc = {retry_over_throttle, t503, 1, RESIL_MS(10), false, false, false, 0};
    both(&sc, check_throttle);
}

static void check_limiter(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->calls, 3);
    assert_duration_equal(r->res.elapsed, RESIL_S(2) + 3 * RESIL_MS(10));
}

static void adaptive_limiter_admits_each_attempt_and_learns_from_it(void **state)
{
    (void)state;
    scenario sc = {retry_over_adaptive_limiter,
                   t503_t503_ok, 3, RESIL_MS(10), false, false, false, 0};
    both(&sc, check_limiter);
}

static void a_limit_of_one_admits_each_attempt_after_the_last_ended(void **state)
{
    (void)state;
    scenario sc = {retry_over_a_limit_of_one,
                   t503_t503_ok, 3, RESIL_MS(10), false, false, false, 0};
    both(&sc, check_limiter);
}

static void check_listed_waits(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 5);
    assert_int_equal(r->res.records_len, 5);
    assert_duration_equal(r->records[0].wait, RESIL_S(1));
    assert_duration_equal(r->records[1].wait, RESIL_S(2));
    assert_duration_equal(r->records[2].wait, RESIL_S(5));
    assert_duration_equal(r->records[3].wait, RESIL_S(5)); /* the last repeats */
    assert_int_equal(r->records[3].source, RESIL_WAIT_BACKOFF);
    assert_int_equal(r->records[4].start, T0 + RESIL_S(13));
    assert_duration_equal(r->res.elapsed, RESIL_S(13));
    assert_int_equal(r->calls, 5);
}

static void a_list_of_waits_is_followed_in_order_then_its_last_repeats(void **state)
{
    (void)state;
    scenario sc = {retry_with_a_list_of_waits, t503, 1, 0, false, false, false, 0};
    both(&sc, check_listed_waits);
}

static void check_generated_waits(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_duration_equal(r->records[0].wait, RESIL_MS(300));
    assert_int_equal(r->records[0].source, RESIL_WAIT_GENERATOR);
    assert_duration_equal(r->records[1].wait, RESIL_S(1));
    assert_int_equal(r->records[1].source, RESIL_WAIT_BACKOFF);
    assert_int_equal(r->records[2].start, T0 + RESIL_MS(1300) + 2 * RESIL_MS(10));
    assert_duration_equal(r->res.elapsed, RESIL_MS(1330));
}

static void a_delay_generator_chooses_the_wait_or_leaves_it_to_the_backoff(void **state)
{
    (void)state;
    scenario sc = {retry_with_a_delay_generator, t503_t503_ok, 3, RESIL_MS(10), false, false,
                   false, 0};
    both(&sc, check_generated_waits);
}

static const resil_outcome pending_pending_done[] = {{RESIL_SUCCESS, 200, RESIL_NO_HINT, "pending"},
                                                     {RESIL_SUCCESS, 200, RESIL_NO_HINT, "pending"},
                                                     {RESIL_SUCCESS, 200, RESIL_NO_HINT, "done"}};
static const resil_outcome always_pending[] = {{RESIL_SUCCESS, 200, RESIL_NO_HINT, "pending"}};

static void check_pending_then_done(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_SUCCESS);
    assert_string_equal(r->res.outcome.detail, "done");
    assert_int_equal(r->records[0].stop, RESIL_STOP_NONE);
    assert_duration_equal(r->records[0].wait, RESIL_S(1));
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
}

static void a_success_the_predicate_wants_again_is_retried(void **state)
{
    (void)state;
    scenario sc = {retry_on_a_pending_result, pending_pending_done, 3, 0, false, false, false, 0};
    both(&sc, check_pending_then_done);
}

static void check_pending_to_the_end(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 4);
    assert_int_equal(r->res.outcome.kind, RESIL_SUCCESS);
    assert_string_equal(r->res.outcome.detail, "pending");
    assert_int_equal(r->records[3].stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
}

static void a_result_retried_to_the_last_attempt_is_the_final_outcome(void **state)
{
    (void)state;
    scenario sc = {retry_on_a_pending_result, always_pending, 1, 0, false, false, false, 0};
    both(&sc, check_pending_to_the_end);
}

static const resil_outcome t503_401_ok[] = {{RESIL_TRANSIENT, 503, RESIL_NO_HINT, "http"},
                                            {RESIL_PERMANENT, 401, RESIL_NO_HINT, "unauthorized"},
                                            {RESIL_SUCCESS, 200, RESIL_NO_HINT, ""}};

static void check_auth_refresh(const ran *r)
{
    /* Inner: 503, 1 s, 401 (not its to retry). Outer: refresh, 100 ms,
     * then the inner retry's fresh run: 200. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 2);
    assert_int_equal(r->res.records_len, 2);
    assert_int_equal(r->records[0].outcome.code, 401);
    assert_int_equal(r->records[0].stop, RESIL_STOP_NONE);
    assert_duration_equal(r->records[0].wait, RESIL_MS(100));
    assert_int_equal(r->records[0].start, T0);
    assert_duration_equal(r->records[0].duration, RESIL_S(1) + 2 * RESIL_MS(10));
    assert_int_equal(r->records[1].start, T0 + RESIL_MS(1120));
    assert_int_equal(r->records[1].outcome.kind, RESIL_SUCCESS);
    assert_duration_equal(r->res.elapsed, RESIL_MS(1130));
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->refreshes, 1);
}

static void an_auth_refresh_retry_around_a_transient_retry_refreshes_once(void **state)
{
    (void)state;
    scenario sc = {auth_refresh_around_transient_retry, t503_401_ok, 3, RESIL_MS(10), false,
                   false, false, 0};
    both(&sc, check_auth_refresh);
}

/* ---- a retry that needs no time on the way --------------------------------------- */

static void plain_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
}

static void zero_wait_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 2, 0);
}

static void check_plain_retry(const ran *r)
{
    /* 10 ms attempts, 1 s waits: the third attempt ends at 2.03 s. */
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.records_len, 0);
    assert_duration_equal(r->res.elapsed, RESIL_S(2) + 3 * RESIL_MS(10));
    assert_int_equal(r->end, T0 + RESIL_S(2) + 3 * RESIL_MS(10));
}

static void a_retry_without_deadline_or_records_reports_its_elapsed_time(void **state)
{
    (void)state;
    scenario sc = {plain_retry, t503_t503_ok, 3, RESIL_MS(10), false, false, true, 0};
    both(&sc, check_plain_retry);
}

static void check_timeout_below_a_plain_retry(const ran *r)
{
    /* Each attempt's 2 s counts from its own start (after the 1 s wait),
     * not from the execution's. */
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_duration_equal(r->res.elapsed, 3 * RESIL_S(2) + 2 * RESIL_S(1));
}

static void an_attempt_timeout_below_a_retry_without_records_counts_from_each_attempt(
    void **state)
{
    (void)state;
    scenario sc = {retry_with_attempt_timeout, ok1, 1, RESIL_S(5), false, false, true, 0};
    both(&sc, check_timeout_below_a_plain_retry);
}

static const resil_outcome t503_ok[] = {{RESIL_TRANSIENT, 503, RESIL_NO_HINT, "busy"},
                                        {RESIL_SUCCESS, 200, RESIL_NO_HINT, "ok"}};

/* The asynchronous path's run of a zero-wait retry without records: it
 * succeeds after `attempts`, having read the loop clock `reads` times. */
static void check_unrecorded_reads(const resil_outcome *script, size_t n, uint32_t attempts,
                                   size_t reads)
{
    scenario sc = {zero_wait_retry, script, n, 0, false, false, true, 0};
    ran a;
    run_async(&sc, &a, BY_TOKEN);
    assert_int_equal(a.res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(a.res.attempts, attempts);
    assert_int_equal(a.loop_reads, reads);
}

static void a_zero_wait_retry_reads_the_loop_clock_only_at_its_start_and_end(void **state)
{
    (void)state;
    check_unrecorded_reads(t503_ok, 2, 2, 2);
}

static void a_first_success_without_records_reads_the_loop_clock_at_its_start_and_end(
    void **state)
{
    (void)state;
    check_unrecorded_reads(ok1, 1, 1, 2);
}

static void a_retry_keeping_records_reads_the_loop_clock_at_each_step(void **state)
{
    (void)state;
    /* the start, each attempt's end, the wait's end */
    scenario sc = {zero_wait_retry, t503_ok, 2, 0, false, false, false, 0};
    ran a;
    run_async(&sc, &a, BY_TOKEN);
    assert_int_equal(a.res.records_len, 2);
    assert_int_equal(a.loop_reads, 4);
}

/* ---- every strategy on both paths ------------------------------------------------ */

/* A fixed-window rate limiter of one permit a second, waiting up to
 * `max_wait` for it. */
static void add_one_permit_a_second(resil_pipeline_builder *b, resil_duration max_wait)
{
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_FIXED_WINDOW);
    o.permits = 1;
    o.window = RESIL_S(1);
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, max_wait), 0);
}

/* A retry with a time budget of its own (the policy's max_total). */
static void retry_with_a_time_budget(resil_pipeline_builder *b)
{
    resil_retry_policy r = test_retry_constant(5, RESIL_S(1));
    r.max_total = RESIL_MS(2500);
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
}

static void retry_over_a_rate_limiter_that_never_waits(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_MS(10));
    add_one_permit_a_second(b, 0);
}

static void total_timeout_over_a_retry_over_a_waiting_rate_limiter(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_MS(500));
    test_add_retry_constant(b, 3, RESIL_MS(10));
    add_one_permit_a_second(b, RESIL_S(2));
}

static void zero_wait_retry_over_a_waiting_rate_limiter(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, 0);
    add_one_permit_a_second(b, RESIL_S(2));
}

static void chaos_outcome_under_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_chaos_opts c;
    resil_chaos_opts_default(&c, RESIL_CHAOS_OUTCOME);
    c.rate = 1.0;
    c.outcome = resil_fail(RESIL_TRANSIENT, 599, "injected");
    assert_int_equal(resil_pipeline_add_chaos(b, &c), 0);
}

/* The injected behaviour counts itself and, as a slow disk would, spends
 * `behaviour_takes` of the call's time. */
static resil_duration behaviour_takes;

static void behave(const resil_attempt_ctx *ctx, void *ud)
{
    (void)ud;
    player *pl = ctx->user;
    pl->out->behaviors++;
    if (behaviour_takes > 0)
        resil_fake_clock_advance(pl->fc, behaviour_takes);
}

static void add_behaviour(resil_pipeline_builder *b)
{
    resil_chaos_opts c;
    resil_chaos_opts_default(&c, RESIL_CHAOS_BEHAVIOR);
    c.rate = 1.0;
    c.behavior = behave;
    assert_int_equal(resil_pipeline_add_chaos(b, &c), 0);
}

static void chaos_behaviour_under_retry(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    add_behaviour(b);
}

static void latency_after_a_behaviour_inside_an_attempt_timeout(resil_pipeline_builder *b)
{
    test_add_attempt_timeout(b, RESIL_S(1));
    add_behaviour(b);
    resil_chaos_opts c;
    resil_chaos_opts_default(&c, RESIL_CHAOS_LATENCY);
    c.rate = 1.0;
    c.latency = RESIL_MS(100);
    assert_int_equal(resil_pipeline_add_chaos(b, &c), 0);
}

/* Each attempt's behaviour spends the whole attempt timeout and more, so
 * the waiting rate limiter below it is reached with no time left. */
static void waiting_rate_limiter_past_the_attempts_deadline(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, 0);
    test_add_attempt_timeout(b, RESIL_S(1));
    add_behaviour(b);
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_FIXED_WINDOW);
    o.permits = 1;
    o.window = RESIL_S(10);
    assert_int_equal(resil_pipeline_add_rate_limiter(b, &o, RESIL_S(2)), 0);
}

/* A degradation gate held at Major (priority threshold 50), shared by
 * both paths' pipelines. */
static resil_degrade *gate;

static void retry_over_a_degradation_gate(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 3, RESIL_S(1));
    assert_int_equal(resil_pipeline_use_degrade(b, gate), 0);
}

static void open_gate(void)
{
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.auto_adjust = false;
    o.evaluate_on_call = false;
    assert_int_equal(resil_degrade_new(&o, &gate, NULL), 0);
    assert_int_equal(resil_degrade_set_level(gate, 3), 0);
}

static void close_gate(void)
{
    resil_degrade_free(gate);
    gate = NULL;
}

static void no_strategies(resil_pipeline_builder *b) { (void)b; }

static void check_time_budget(const ran *r)
{
    /* 1 s waits under a 2.5 s budget: a third wait would end past it */
    assert_int_equal(r->res.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->deadlines[0], T0 + RESIL_MS(2500));
    assert_int_equal(r->res.records_len, 3);
    assert_duration_equal(r->records[2].wait, 0);
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
}

static void the_retrys_own_time_budget_stops_it_as_deadline_before_a_wait_past_it(void **state)
{
    (void)state;
    scenario sc = {retry_with_a_time_budget, t503, 1, 0, false, false, false, 0};
    both(&sc, check_time_budget);
}

static void check_rate_rejected(const ran *r, resil_duration retry_after)
{
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.attempts, 2);
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.outcome.code, RESIL_STRATEGY_RATE_LIMITER);
    assert_string_equal(r->res.outcome.detail, "rate limited");
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_RATE_LIMITER);
    assert_duration_equal(r->res.outcome.retry_after, retry_after);
    assert_duration_equal(r->res.elapsed, RESIL_MS(10));
}

static void check_rate_rejected_with_its_hint(const ran *r)
{
    /* the window's permit went to attempt 1; the next comes 990 ms later */
    check_rate_rejected(r, RESIL_MS(990));
}

static void a_rate_limiter_that_never_waits_rejects_the_next_attempt_with_its_retry_after(
    void **state)
{
    (void)state;
    scenario sc = {retry_over_a_rate_limiter_that_never_waits, t503_t503_ok, 3, 0, false, false,
                   false, 0};
    both(&sc, check_rate_rejected_with_its_hint);
}

static void check_rate_refused_at_the_deadline(const ran *r)
{
    check_rate_rejected(r, RESIL_NO_HINT);
    assert_int_equal(r->deadlines[0], T0 + RESIL_MS(500));
}

static void a_rate_limiters_wait_past_the_deadline_is_refused_without_waiting(void **state)
{
    (void)state;
    scenario sc = {total_timeout_over_a_retry_over_a_waiting_rate_limiter,
                   t503_t503_ok, 3, 0, false, false, false, 0};
    both(&sc, check_rate_refused_at_the_deadline);
}

static void check_no_time_left_to_wait(const ran *r)
{
    /* Attempt 1 reaches the limiter 1.5 s in, past its 1 s deadline, and
     * takes the window's permit as a limiter that never waits would;
     * attempt 2, at 3 s, finds none and is refused with the window's
     * end 7 s later, as such a limiter refuses. */
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->behaviors, 2);
    assert_int_equal(r->res.attempts, 2);
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.outcome.code, RESIL_STRATEGY_RATE_LIMITER);
    assert_duration_equal(r->res.outcome.retry_after, RESIL_S(7));
    assert_duration_equal(r->res.elapsed, RESIL_S(3));
}

static void a_rate_limiter_reached_with_no_time_left_takes_a_permit_without_waiting(
    void **state)
{
    (void)state;
    behaviour_takes = RESIL_MS(1500);
    scenario sc = {waiting_rate_limiter_past_the_attempts_deadline, t503, 1, 0, false, false,
                   false, 0};
    both(&sc, check_no_time_left_to_wait);
    behaviour_takes = 0;
}

static void check_rate_wait_cancelled(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(r->res.attempts, 2);
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(r->res.outcome.code, RESIL_ECANCELED);
    assert_string_equal(r->res.outcome.detail, "cancelled waiting for the rate limiter");
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_NONE);
}

static void a_cancel_during_a_rate_limiters_wait_stops_as_cancelled(void **state)
{
    (void)state;
    scenario sc = {zero_wait_retry_over_a_waiting_rate_limiter,
                   t503_t503_ok, 3, 0, false, true, false, 0};
    both(&sc, check_rate_wait_cancelled);
}

static void check_chaos_outcome(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->res.outcome.code, 599);
    assert_string_equal(r->res.outcome.detail, "injected");
    assert_int_equal(r->records[0].outcome.code, 599);
    assert_duration_equal(r->res.elapsed, RESIL_S(2));
}

static void chaos_outcome_replaces_what_the_operation_answered_on_every_attempt(void **state)
{
    (void)state;
    scenario sc = {chaos_outcome_under_retry, ok1, 1, 0, false, false, false, 0};
    both(&sc, check_chaos_outcome);
}

static void check_behaviour(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->behaviors, 3);
}

static void an_injected_behaviour_runs_before_each_attempt(void **state)
{
    (void)state;
    behaviour_takes = 0;
    scenario sc = {chaos_behaviour_under_retry, t503_t503_ok, 3, 0, false, false, false, 0};
    both(&sc, check_behaviour);
}

static void check_latency_past_the_deadline(const ran *r)
{
    /* the behaviour spent 1.5 s of the 1 s attempt: the latency is not
     * waited, the attempt ends as timed out, the operation never runs */
    assert_int_equal(r->res.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(r->res.outcome.code, RESIL_ETIMEDOUT);
    assert_string_equal(r->res.outcome.detail, "attempt timeout (1s) elapsed");
    assert_int_equal(r->behaviors, 1);
    assert_int_equal(r->calls, 0);
    assert_duration_equal(r->res.elapsed, RESIL_MS(1500));
}

static void injected_latency_past_the_attempts_deadline_ends_it_as_timed_out_at_once(
    void **state)
{
    (void)state;
    behaviour_takes = RESIL_MS(1500);
    scenario sc = {latency_after_a_behaviour_inside_an_attempt_timeout,
                   ok1, 1, 0, false, false, false, 0};
    both(&sc, check_latency_past_the_deadline);
    behaviour_takes = 0;
}

static void check_shed(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->calls, 0);
    assert_int_equal(r->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(r->res.outcome.code, RESIL_STRATEGY_DEGRADE);
    assert_string_equal(r->res.outcome.detail, "shed at level Major");
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_DEGRADE);
}

static uint64_t gate_rejected(void)
{
    resil_degrade_stats st;
    resil_degrade_stats_get(gate, &st);
    return st.rejected;
}

static void a_degradation_gate_sheds_work_below_its_levels_priority(void **state)
{
    (void)state;
    open_gate();
    call_priority = 40;
    scenario sc = {retry_over_a_degradation_gate, t503_t503_ok, 3, 0, false, false, false, 0};
    both(&sc, check_shed);
    assert_int_equal(gate_rejected(), 3); /* the blocking run and the two async runs */
    call_priority = 0;
    close_gate();
}

static void check_admitted(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r->res.attempts, 3);
    assert_int_equal(r->calls, 3);
    assert_int_equal(r->res.rejected_by, RESIL_STRATEGY_NONE);
}

static void a_degradation_gate_admits_and_counts_work_at_or_above_its_levels_priority(
    void **state)
{
    (void)state;
    open_gate();
    call_priority = 60;
    scenario sc = {retry_over_a_degradation_gate, t503_t503_ok, 3, 0, false, false, false, 0};
    both(&sc, check_admitted);
    assert_int_equal(gate_rejected(), 0);
    assert_int_equal(resil_degrade_tick(gate), 3); /* held at Major: no auto-adjust */
    resil_degrade_stats st;
    resil_degrade_stats_get(gate, &st);
    assert_int_equal(st.window_calls, 9); /* three runs of three attempts */
    assert_int_equal(st.window_failures, 6);
    call_priority = 0;
    close_gate();
}

static void check_single_attempt(const ran *r)
{
    assert_int_equal(r->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r->res.attempts, 1);
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->res.outcome.code, 503);
    assert_duration_equal(r->res.elapsed, RESIL_S(1));
}

static void a_pipeline_without_strategies_runs_its_operation_once(void **state)
{
    (void)state;
    scenario sc = {no_strategies, t503, 1, RESIL_S(1), false, false, false, 0};
    both(&sc, check_single_attempt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(standard_pipeline_succeeds_at_the_first_attempt),
        cmocka_unit_test(standard_pipeline_retries_503_503_200_with_exponential_waits),
        cmocka_unit_test(the_standard_order_without_a_bulkhead_retries_as_the_standard),
        cmocka_unit_test(the_standard_order_from_the_retry_times_out_each_attempt),
        cmocka_unit_test(jittered_waits_draw_the_same_numbers_on_both_paths),
        cmocka_unit_test(the_standard_breaker_refuses_the_attempt_after_it_opens),
        cmocka_unit_test(the_standard_timeouts_cut_slow_attempts_and_then_the_whole),
        cmocka_unit_test(attempt_timeout_cancels_a_slow_attempt_and_the_retry_goes_again),
        cmocka_unit_test(an_attempt_reaching_its_timeout_has_timed_out),
        cmocka_unit_test(total_timeout_ends_the_retry_loop_as_deadline),
        cmocka_unit_test(breaker_opens_inside_the_retry_loop_and_rejects_the_next_attempt),
        cmocka_unit_test(fallback_answers_when_the_retries_are_used_up),
        cmocka_unit_test(a_rate_limiter_outside_the_retry_admits_the_whole_execution),
        cmocka_unit_test(a_rate_limiter_inside_the_retry_spends_each_attempts_wait),
        cmocka_unit_test(retry_after_hint_sets_the_wait),
        cmocka_unit_test(non_idempotent_work_is_refused_before_it_runs),
        cmocka_unit_test(cancel_during_a_retry_wait_stops_as_cancelled),
        cmocka_unit_test(a_token_fired_for_a_deadline_during_a_retry_wait_stops_at_the_deadline),
        cmocka_unit_test(a_cancel_from_the_retry_hook_ends_the_wait_before_it_begins),
        cmocka_unit_test(chaos_latency_is_a_wait_the_attempt_timeout_bounds),
        cmocka_unit_test(a_cancel_inside_injected_latency_ends_it_without_the_call),
        cmocka_unit_test(a_cancel_as_latency_is_injected_ends_it_before_it_begins),
        cmocka_unit_test(chaos_fault_answers_for_the_operation_on_every_attempt),
        cmocka_unit_test(throttle_counts_each_attempt_as_the_blocking_executor_does),
        cmocka_unit_test(adaptive_limiter_admits_each_attempt_and_learns_from_it),
        cmocka_unit_test(a_limit_of_one_admits_each_attempt_after_the_last_ended),
        cmocka_unit_test(a_list_of_waits_is_followed_in_order_then_its_last_repeats),
        cmocka_unit_test(a_delay_generator_chooses_the_wait_or_leaves_it_to_the_backoff),
        cmocka_unit_test(a_success_the_predicate_wants_again_is_retried),
        cmocka_unit_test(a_result_retried_to_the_last_attempt_is_the_final_outcome),
        cmocka_unit_test(an_auth_refresh_retry_around_a_transient_retry_refreshes_once),
        cmocka_unit_test(a_retry_without_deadline_or_records_reports_its_elapsed_time),
        cmocka_unit_test(an_attempt_timeout_below_a_retry_without_records_counts_from_each_attempt),
        cmocka_unit_test(a_zero_wait_retry_reads_the_loop_clock_only_at_its_start_and_end),
        cmocka_unit_test(a_retry_keeping_records_reads_the_loop_clock_at_each_step),
        cmocka_unit_test(a_first_success_without_records_reads_the_loop_clock_at_its_start_and_end),
        cmocka_unit_test(without_records_a_first_success_leaves_the_executors_result),
        cmocka_unit_test(without_records_a_failed_first_attempt_is_the_retrys_first),
        cmocka_unit_test(without_records_a_first_attempt_cut_by_its_timeout_is_retried),
        cmocka_unit_test(without_records_a_cancel_in_the_first_wait_stops_as_cancelled),
        cmocka_unit_test(without_records_a_first_attempt_past_the_total_timeout_stops_as_deadline),
        cmocka_unit_test(without_records_a_cancel_during_the_first_attempt_stops_as_cancelled),
        cmocka_unit_test(with_records_a_first_success_is_recorded_as_the_executor_records_it),
        cmocka_unit_test(with_records_a_first_success_alone_under_the_retry_reads_its_end),
        cmocka_unit_test(with_records_a_first_success_through_two_retries_is_recorded_once),
        cmocka_unit_test(the_retrys_own_time_budget_stops_it_as_deadline_before_a_wait_past_it),
        cmocka_unit_test(
            a_rate_limiter_that_never_waits_rejects_the_next_attempt_with_its_retry_after),
        cmocka_unit_test(a_rate_limiters_wait_past_the_deadline_is_refused_without_waiting),
        cmocka_unit_test(a_cancel_during_a_rate_limiters_wait_stops_as_cancelled),
        cmocka_unit_test(
            a_rate_limiter_reached_with_no_time_left_takes_a_permit_without_waiting),
        cmocka_unit_test(chaos_outcome_replaces_what_the_operation_answered_on_every_attempt),
        cmocka_unit_test(an_injected_behaviour_runs_before_each_attempt),
        cmocka_unit_test(injected_latency_past_the_attempts_deadline_ends_it_as_timed_out_at_once),
        cmocka_unit_test(a_degradation_gate_sheds_work_below_its_levels_priority),
        cmocka_unit_test(a_degradation_gate_admits_and_counts_work_at_or_above_its_levels_priority),
        cmocka_unit_test(a_pipeline_without_strategies_runs_its_operation_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
