/*
 * test_pipeline_adaptive.c — chaos, the adaptive limiter and throttling
 * inside pipelines, on the fake clock: what each injection does to an
 * execution (a fault without calling the operation, a replaced outcome, a
 * wait bounded by the attempt timeout, a behaviour before the call), the
 * kill switch reached through the pipeline, the events reported, the
 * order rules and warnings, and the two learning strategies' rejections
 * and their reading of the pipeline's outcomes; and each of the three
 * shared by its owner ("use"): one object over every pipeline using it,
 * never freed by them.
 */
#include "test.h"

#define T0 RESIL_S(1000)

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
    resil_pipeline *p;
    resil_call call;
    resil_pipeline_result result;
    int calls;
    resil_outcome answer;
    resil_duration takes;
    int behaved;
    uint32_t behaved_attempt;
    resil_event events[16];
    char reasons[16][32];
    int nevents;
} fixture;

static resil_outcome op(resil_attempt_ctx *ctx)
{
    fixture *f = ctx->user;
    f->calls++;
    if (f->takes > 0)
        resil_fake_clock_advance(f->fc, f->takes);
    return f->answer;
}

static resil_outcome polite(resil_attempt_ctx *ctx)
{
    fixture *f = ctx->user;
    f->calls++;
    return resil_ctx_sleep(ctx, RESIL_S(60)) != 0 ? resil_fail(RESIL_CANCELLED, 0, "gave up")
                                                  : f->answer;
}

static void listen(const resil_event *ev, void *ud)
{
    fixture *f = ud;
    if (f->nevents < 16) {
        f->events[f->nevents] = *ev;
        snprintf(f->reasons[f->nevents], sizeof f->reasons[0], "%s", ev->reason);
        f->events[f->nevents].outcome = NULL;
    }
    f->nevents++;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(T0, 0, &f->fc), 0);
    f->clock = resil_fake_clock_clock(f->fc);
    resil_call_default(&f->call);
    f->call.user = f;
    f->answer = resil_ok();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_pipeline_free(f->p);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static resil_pipeline_builder *builder(fixture *f)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("chaos", &b, NULL), 0);
    resil_pipeline_builder_clock(b, f->clock);
    assert_int_equal(resil_pipeline_builder_listen(b, listen, f), 0);
    return b;
}

static void build(fixture *f, resil_pipeline_builder *b)
{
    resil_err err = {0, ""};
    int rc = resil_pipeline_build(b, &f->p, &err);
    resil_pipeline_builder_free(b);
    if (rc != 0)
        fail_msg("build: %s", err.message);
}

/* A second pipeline from `b`, beside the fixture's. */
static resil_pipeline *another(resil_pipeline_builder *b)
{
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    return p;
}

/* Free the pipelines that used a shared object (`other` may be NULL), so
 * that the test can see the object outlive them. */
static void free_pipelines(fixture *f, resil_pipeline *other)
{
    resil_pipeline_free(other);
    resil_pipeline_free(f->p);
    f->p = NULL;
}

static void run(fixture *f, resil_op_fn fn)
{
    assert_int_equal(resil_pipeline_execute(f->p, fn, &f->call, &f->result), 0);
}

static void add_retry(resil_pipeline_builder *b, uint32_t attempts)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = attempts;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(1);
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
}

static resil_rng_scripted script;

static resil_chaos_opts chaos(resil_chaos_kind k, const double *draws, size_t n)
{
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, k);
    o.rate = 0.5;
    resil_rng_scripted_init(&script, draws, n);
    o.rng = &script.base;
    return o;
}

static int count_events(fixture *f, resil_event_type t)
{
    int n = 0;
    for (int i = 0; i < f->nevents && i < 16; i++)
        n += f->events[i].type == t;
    return n;
}

static const resil_event *first_event(fixture *f, resil_event_type t)
{
    for (int i = 0; i < f->nevents && i < 16; i++)
        if (f->events[i].type == t)
            return &f->events[i];
    fail_msg("no %s event", resil_event_name(t));
    return NULL;
}

/* ---- chaos ------------------------------------------------------------------------ */

static void an_injected_fault_fails_the_attempt_without_calling_the_operation(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.1, 0.9};
    resil_pipeline_builder *b = builder(f);
    add_retry(b, 3);
    resil_chaos_opts o = chaos(RESIL_CHAOS_FAULT, draws, 2);
    o.outcome = resil_fail(RESIL_TRANSIENT, 503, "chaos 503");
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    run(f, op);
    /* attempt 1: injected (0.1 < 0.5); attempt 2: 0.9, the operation runs */
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->result.attempts, 2);
    assert_int_equal(f->calls, 1);
    assert_int_equal(count_events(f, RESIL_EVENT_CHAOS_INJECTED), 1);
    const resil_event *ev = first_event(f, RESIL_EVENT_CHAOS_INJECTED);
    assert_string_equal(ev->strategy, "chaos-fault");
    assert_int_equal(ev->attempt, 1);
    assert_string_equal(f->reasons[0], "fault");
}

static void an_injected_outcome_replaces_what_the_operation_returned(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.0};
    resil_pipeline_builder *b = builder(f);
    resil_chaos_opts o = chaos(RESIL_CHAOS_OUTCOME, draws, 1);
    o.outcome = resil_fail(RESIL_PERMANENT, 404, "chaos 404");
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    run(f, op);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->result.outcome.kind, RESIL_PERMANENT);
    assert_int_equal(f->result.outcome.code, 404);
    assert_string_equal(f->result.outcome.detail, "chaos 404");
}

static void injected_latency_waits_on_the_clock_before_the_operation(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.2};
    resil_pipeline_builder *b = builder(f);
    resil_chaos_opts o = chaos(RESIL_CHAOS_LATENCY, draws, 1);
    o.latency = RESIL_S(2);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    run(f, op);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(2));
    assert_duration_equal(f->result.elapsed, RESIL_S(2));
    assert_duration_equal(first_event(f, RESIL_EVENT_CHAOS_INJECTED)->delay, RESIL_S(2));
}

static void injected_latency_ends_at_the_attempt_timeout(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.2};
    resil_pipeline_builder *b = builder(f);
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = RESIL_S(1);
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), 0);
    resil_chaos_opts o = chaos(RESIL_CHAOS_LATENCY, draws, 1);
    o.latency = RESIL_S(5);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    run(f, op);
    assert_int_equal(f->calls, 0);
    assert_int_equal(f->result.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(f->result.outcome.detail, "attempt timeout (1s) elapsed");
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(1));
}

static void injected_latency_ends_when_the_caller_cancels(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.2};
    resil_pipeline_builder *b = builder(f);
    resil_chaos_opts o = chaos(RESIL_CHAOS_LATENCY, draws, 1);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_cancel_fire(&token);
    f->call.cancel = &token;
    run(f, op);
    assert_int_equal(f->calls, 0);
    assert_int_equal(f->result.outcome.kind, RESIL_CANCELLED);
    resil_cancel_destroy(&token);
}

static void behave(const resil_attempt_ctx *ctx, void *ud)
{
    fixture *f = ud;
    f->behaved++;
    f->behaved_attempt = ctx->attempt;
}

static void an_injected_behaviour_runs_before_the_operation(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.9, 0.3};
    resil_pipeline_builder *b = builder(f);
    add_retry(b, 3);
    resil_chaos_opts o = chaos(RESIL_CHAOS_BEHAVIOR, draws, 2);
    o.behavior = behave;
    o.behavior_ud = f;
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    f->answer = resil_fail(RESIL_TRANSIENT, 503, "down");
    run(f, op);
    /* attempt 1: 0.9, no; attempt 2 and 3: 0.3 (the script's last repeats) */
    assert_int_equal(f->calls, 3);
    assert_int_equal(f->behaved, 2);
    assert_int_equal(f->behaved_attempt, 3);
}

static void the_kill_switch_is_reached_through_the_pipeline(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.0};
    resil_pipeline_builder *b = builder(f);
    resil_chaos_opts o = chaos(RESIL_CHAOS_FAULT, draws, 1);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    run(f, op);
    assert_int_equal(f->calls, 0);
    resil_chaos *c = resil_pipeline_chaos(f->p, RESIL_CHAOS_FAULT);
    assert_non_null(c);
    assert_null(resil_pipeline_chaos(f->p, RESIL_CHAOS_LATENCY));
    resil_chaos_enable(c, false);
    run(f, op);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
}

static void a_shared_chaos_strikes_until_its_owner_switches_it_off(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.0};
    resil_chaos_opts o = chaos(RESIL_CHAOS_FAULT, draws, 1);
    resil_chaos *c;
    assert_int_equal(resil_chaos_new(&o, &c, NULL), 0);
    resil_pipeline_builder *b = builder(f);
    assert_int_equal(resil_pipeline_use_chaos(b, c), 0);
    build(f, b);
    assert_ptr_equal(resil_pipeline_chaos(f->p, RESIL_CHAOS_FAULT), c);
    run(f, op);
    assert_int_equal(f->calls, 0);
    assert_int_equal(f->result.outcome.kind, RESIL_TRANSIENT);
    assert_string_equal(f->result.outcome.detail, "injected fault");
    resil_chaos_enable(c, false);
    run(f, op);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    /* the pipeline never owned it: it outlives the pipeline, counts kept */
    free_pipelines(f, NULL);
    assert_int_equal(resil_chaos_decisions(c), 1);
    assert_int_equal(resil_chaos_injected(c), 1);
    resil_chaos_free(c);
}

static void chaos_kinds_each_appear_once_and_describe_themselves(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f);
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.2;
    o.outcome = resil_fail(RESIL_TRANSIENT, 503, "x");
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    add_retry(b, 2);
    resil_chaos_opts_default(&o, RESIL_CHAOS_LATENCY);
    o.rate = 0.1;
    o.latency = RESIL_S(2);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), RESIL_EEXIST);
    resil_err err;
    assert_int_equal(resil_pipeline_build(b, &f->p, &err), RESIL_EEXIST);
    assert_string_equal(err.message, "pipeline: at most one chaos-latency strategy per pipeline");
    resil_pipeline_builder_free(b);

    b = builder(f);
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.2;
    o.outcome = resil_fail(RESIL_TRANSIENT, 503, "x");
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    add_retry(b, 2);
    resil_chaos_opts_default(&o, RESIL_CHAOS_LATENCY);
    o.rate = 0.1;
    o.latency = RESIL_S(2);
    assert_int_equal(resil_pipeline_add_chaos(b, &o), 0);
    build(f, b);
    char text[1024];
    resil_pipeline_describe(f->p, RESIL_DESCRIBE_TEXT, text, sizeof text);
    assert_non_null(strstr(text, "  1. chaos-fault rate=0.2 enabled=true outcome=Transient code=503\n"));
    assert_non_null(strstr(text, "  3. chaos-latency rate=0.1 enabled=true latency=2s\n"));
    assert_non_null(strstr(text, "warning: chaos-fault comes before the retry: its injections "
                                 "reach the caller unretried\n"));
}

/* ---- the adaptive limiter ---------------------------------------------------------- */

static resil_limiter_opts aimd(int32_t limit)
{
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, RESIL_LIMIT_AIMD);
    o.initial_limit = limit;
    o.window = 0;
    o.window_samples = 1;
    return o;
}

static void a_full_adaptive_limiter_rejects_with_its_own_code(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f);
    resil_limiter_opts o = aimd(1);
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    build(f, b);
    resil_limiter *l = resil_pipeline_adaptive_limiter(f->p);
    resil_limiter_ticket held;
    assert_int_equal(resil_limiter_try_acquire_at(l, T0, &held), 0);
    run(f, op);
    assert_int_equal(f->calls, 0);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_ADAPTIVE_LIMITER);
    assert_string_equal(f->result.outcome.detail, "adaptive limit reached");
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_ADAPTIVE_LIMITER);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(count_events(f, RESIL_EVENT_LIMIT_REJECTED), 1);
    resil_limiter_release(&held, RESIL_BREAKER_IGNORED);
}

/* A caller whose token fired is not queued behind a full limiter: the
 * execution ends as cancelled, not as a rejection. */
static void a_cancelled_caller_at_a_full_adaptive_limiter_is_cancelled(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f);
    resil_limiter_opts o = aimd(1);
    o.max_queue = 1;
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    build(f, b);
    resil_limiter *l = resil_pipeline_adaptive_limiter(f->p);
    resil_limiter_ticket held;
    assert_int_equal(resil_limiter_try_acquire_at(l, T0, &held), 0);
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_cancel_fire(&token);
    f->call.cancel = &token;
    run(f, op);
    assert_int_equal(f->calls, 0);
    assert_int_equal(f->result.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(f->result.outcome.code, RESIL_ECANCELED);
    assert_string_equal(f->result.outcome.detail, "cancelled waiting for the adaptive limiter");
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(count_events(f, RESIL_EVENT_LIMIT_REJECTED), 0);
    resil_limiter_release(&held, RESIL_BREAKER_IGNORED);
    resil_cancel_destroy(&token);
}

static void the_limiter_learns_from_the_pipelines_outcomes_and_reports_it(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f);
    add_retry(b, 1);
    resil_limiter_opts o = aimd(1);
    o.min_limit = 1;
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    build(f, b);
    f->takes = RESIL_MS(20);
    run(f, op); /* success with the limit used: 1 → 2 */
    assert_int_equal(resil_limiter_limit(resil_pipeline_adaptive_limiter(f->p)), 2);
    const resil_event *ev = first_event(f, RESIL_EVENT_LIMIT_CHANGED);
    assert_int_equal(ev->from, 1);
    assert_int_equal(ev->to, 2);
    assert_string_equal(ev->strategy, "adaptive-limiter");
    assert_int_equal(ev->at, T0 + RESIL_MS(20));
    f->answer = resil_fail(RESIL_PERMANENT, 404, "missing");
    run(f, op); /* the dependency answered: not a drop, but idle (1 × 2 ≥ 2): 3 */
    assert_int_equal(resil_limiter_limit(resil_pipeline_adaptive_limiter(f->p)), 3);
    f->answer = resil_fail(RESIL_TRANSIENT, 503, "down");
    run(f, op); /* a drop: 3 × 0.9 = 2.7 */
    assert_int_equal(resil_limiter_limit(resil_pipeline_adaptive_limiter(f->p)), 2);
}

/* One limiter, two pipelines: one bound over both, learning from both,
 * and no event of a limit change, since the pipeline does not own it
 * (the caller reads the limit, or sets on_change itself). */
static void a_shared_limiter_bounds_every_pipeline_using_it(void **state)
{
    fixture *f = *state;
    resil_limiter_opts o = aimd(1);
    o.clock = f->clock;
    resil_limiter *l;
    assert_int_equal(resil_limiter_new(&o, &l, NULL), 0);
    resil_pipeline_builder *b = builder(f);
    assert_int_equal(resil_pipeline_use_adaptive_limiter(b, l), 0);
    build(f, b);
    b = builder(f);
    assert_int_equal(resil_pipeline_use_adaptive_limiter(b, l), 0);
    resil_pipeline *other = another(b);
    assert_ptr_equal(resil_pipeline_adaptive_limiter(f->p), l);
    assert_ptr_equal(resil_pipeline_adaptive_limiter(other), l);

    resil_limiter_ticket held;
    assert_int_equal(resil_limiter_try_acquire_at(l, T0, &held), 0);
    assert_int_equal(resil_pipeline_execute(other, op, &f->call, &f->result), 0);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_ADAPTIVE_LIMITER);
    assert_int_equal(f->calls, 0);
    resil_limiter_release(&held, RESIL_BREAKER_IGNORED);
    f->takes = RESIL_MS(20);
    run(f, op); /* a success with the limit used: 1 → 2, for both */
    assert_int_equal(f->calls, 1);
    assert_int_equal(resil_limiter_limit(l), 2);
    assert_int_equal(count_events(f, RESIL_EVENT_LIMIT_CHANGED), 0);
    assert_int_equal(count_events(f, RESIL_EVENT_LIMIT_REJECTED), 1);

    free_pipelines(f, other);
    assert_int_equal(resil_limiter_in_flight(l), 0);
    assert_int_equal(resil_limiter_limit(l), 2);
    resil_limiter_free(l);
}

static void the_adaptive_limiter_describes_its_options(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f);
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, RESIL_LIMIT_VEGAS);
    o.initial_limit = 8;
    o.min_limit = 2;
    o.max_limit = 50;
    o.max_queue = 3;
    o.queue_timeout = RESIL_MS(250);
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    build(f, b);
    char text[512];
    resil_pipeline_describe(f->p, RESIL_DESCRIBE_TEXT, text, sizeof text);
    assert_non_null(strstr(text, "  1. adaptive-limiter algorithm=vegas initial_limit=8 "
                                 "min_limit=2 max_limit=50 window=1s window_samples=10 "
                                 "smoothing=1 max_queue=3 queue_timeout=250ms\n"));
}

static void a_timed_out_attempt_is_a_drop_so_the_timeout_must_be_inside(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f);
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = RESIL_S(1);
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), 0);
    resil_limiter_opts o = aimd(10);
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    resil_err err;
    assert_int_equal(resil_pipeline_build(b, &f->p, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "pipeline: adaptive-limiter must come before attempt-timeout");
    resil_pipeline_builder_free(b);

    b = builder(f);
    o = aimd(1);
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), 0);
    build(f, b);
    run(f, polite);
    assert_int_equal(f->result.outcome.kind, RESIL_TIMEOUT);
    /* 1 × 0.9 stays at the floor of 1, and the change is none: the drop
     * counted, a success would have made it 2 */
    assert_int_equal(resil_limiter_limit(resil_pipeline_adaptive_limiter(f->p)), 1);
    resil_limiter_stats st;
    resil_limiter_stats_get(resil_pipeline_adaptive_limiter(f->p), &st);
    assert_int_equal(st.windows, 1);
}

/* ---- throttling ------------------------------------------------------------------------- */

static void the_throttle_counts_the_pipelines_outcomes_and_refuses_locally(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.0};
    resil_pipeline_builder *b = builder(f);
    resil_throttle_opts o;
    resil_throttle_opts_default(&o);
    resil_rng_scripted_init(&script, draws, 1);
    o.rng = &script.base;
    assert_int_equal(resil_pipeline_add_throttle(b, &o), 0);
    build(f, b);
    resil_throttle *t = resil_pipeline_throttle(f->p);
    f->answer = resil_fail(RESIL_PERMANENT, 404, "missing");
    run(f, op); /* answered: an accept */
    f->answer = resil_fail(RESIL_TRANSIENT, 503, "down");
    run(f, op); /* not accepted */
    run(f, op);
    uint64_t r, a;
    resil_throttle_counts(t, T0, &r, &a);
    assert_int_equal(r, 3);
    assert_int_equal(a, 1);
    /* p = (3 − 2) / 4 = 0.25 and the draw is 0: refused */
    run(f, op);
    assert_int_equal(f->calls, 3);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_THROTTLE);
    assert_string_equal(f->result.outcome.detail, "throttled by the client");
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_THROTTLE);
    assert_int_equal(count_events(f, RESIL_EVENT_THROTTLED), 1);
    char text[512];
    resil_pipeline_describe(f->p, RESIL_DESCRIBE_TEXT, text, sizeof text);
    assert_non_null(strstr(text, "  1. throttle k=2 window=2m buckets=12\n"));
}

/* One throttle, two pipelines: both pipelines' calls in one count, and
 * a refusal in either once the backend stops accepting. */
static void a_shared_throttle_counts_the_calls_of_every_pipeline_using_it(void **state)
{
    fixture *f = *state;
    static const double draws[] = {0.0};
    resil_throttle_opts o;
    resil_throttle_opts_default(&o);
    resil_rng_scripted_init(&script, draws, 1);
    o.rng = &script.base;
    o.clock = f->clock;
    resil_throttle *t;
    assert_int_equal(resil_throttle_new(&o, &t, NULL), 0);
    resil_pipeline_builder *b = builder(f);
    assert_int_equal(resil_pipeline_use_throttle(b, t), 0);
    build(f, b);
    b = builder(f);
    assert_int_equal(resil_pipeline_use_throttle(b, t), 0);
    resil_pipeline *other = another(b);
    assert_ptr_equal(resil_pipeline_throttle(other), t);

    f->answer = resil_fail(RESIL_PERMANENT, 404, "missing");
    run(f, op); /* answered: an accept */
    f->answer = resil_fail(RESIL_TRANSIENT, 503, "down");
    assert_int_equal(resil_pipeline_execute(other, op, &f->call, &f->result), 0);
    run(f, op);
    uint64_t r, a;
    resil_throttle_counts(t, T0, &r, &a);
    assert_int_equal(r, 3);
    assert_int_equal(a, 1);
    /* p = (3 − 2) / 4 = 0.25 and the draw is 0: the other pipeline refuses */
    assert_int_equal(resil_pipeline_execute(other, op, &f->call, &f->result), 0);
    assert_int_equal(f->calls, 3);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_THROTTLE);

    free_pipelines(f, other);
    assert_int_equal(resil_throttle_rejected(t), 1);
    resil_throttle_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(an_injected_fault_fails_the_attempt_without_calling_the_operation),
        TEST(an_injected_outcome_replaces_what_the_operation_returned),
        TEST(injected_latency_waits_on_the_clock_before_the_operation),
        TEST(injected_latency_ends_at_the_attempt_timeout),
        TEST(injected_latency_ends_when_the_caller_cancels),
        TEST(an_injected_behaviour_runs_before_the_operation),
        TEST(the_kill_switch_is_reached_through_the_pipeline),
        TEST(a_shared_chaos_strikes_until_its_owner_switches_it_off),
        TEST(chaos_kinds_each_appear_once_and_describe_themselves),
        TEST(a_full_adaptive_limiter_rejects_with_its_own_code),
        TEST(a_cancelled_caller_at_a_full_adaptive_limiter_is_cancelled),
        TEST(the_limiter_learns_from_the_pipelines_outcomes_and_reports_it),
        TEST(a_shared_limiter_bounds_every_pipeline_using_it),
        TEST(the_adaptive_limiter_describes_its_options),
        TEST(a_timed_out_attempt_is_a_drop_so_the_timeout_must_be_inside),
        TEST(the_throttle_counts_the_pipelines_outcomes_and_refuses_locally),
        TEST(a_shared_throttle_counts_the_calls_of_every_pipeline_using_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
