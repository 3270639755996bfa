/*
 * test_limiter_async.c — asynchronous executions queued in an adaptive
 * limiter, on virtual time: when good latency widens the limit, the
 * waiters the wider limit has room for start at once, oldest first, and
 * no more than that. Only the permit of the call that ended could hand
 * itself over otherwise, one waiter per ended call. A waiter leaves at the
 * queue timeout, refused as the blocking limiter refuses it, its wait in
 * the elapsed time; a limiter of another implementation is tried without
 * queueing and hears each call's verdict.
 */
#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)
#define CALLS 8
#define TAKES RESIL_MS(100)

typedef struct call call;

typedef struct scene {
    virtual_loop vl;
    resil_pipeline *p;
    int order[CALLS]; /* call ids in the order they started */
    int started, ended;
    resil_instant start_at[CALLS];
    int32_t limit_at_start[CALLS];
} scene;

struct call {
    scene *s;
    int id;
    resil_attempt *a;
    resil_timer finish;
};

static void finished(resil_timer *t)
{
    call *c = (call *)((char *)t - offsetof(call, finish));
    resil_outcome ok = resil_ok();
    resil_attempt_done(c->a, &ok);
}

/* Every attempt answers well after TAKES. */
static void op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    scene *s = c->s;
    s->order[s->started] = c->id;
    s->start_at[c->id] = s->vl.loop.ops->now(&s->vl);
    s->limit_at_start[c->id] = resil_limiter_limit(resil_pipeline_adaptive_limiter(s->p));
    s->started++;
    c->a = a;
    c->finish.fn = finished;
    s->vl.loop.ops->timer_start(&s->vl, &c->finish, TAKES);
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    scene *s = ud;
    assert_int_equal(res->outcome.kind, RESIL_SUCCESS);
    s->ended++;
}

/* Gradient, one sample a window: the first sample (latency as good as the
 * long average) moves the limit from 1 to 1 × 1 + 3 headroom = 4. */
static resil_pipeline *limited_pipeline(resil_clock *clock)
{
    resil_limiter_opts o;
    resil_limiter_opts_default(&o, RESIL_LIMIT_GRADIENT);
    o.initial_limit = 1;
    o.min_limit = 1;
    o.max_limit = 100;
    o.window = 0;
    o.window_samples = 1;
    o.smoothing = 1;
    o.gradient_headroom = 3;
    o.max_queue = CALLS;
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("limited", &b, NULL), 0);
    resil_pipeline_builder_clock(b, clock);
    assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    return p;
}

static void a_raised_limit_starts_that_many_queued_executions_in_order(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(T0, 0, &fc), 0);
    scene s = {.started = 0};
    virtual_loop_init(&s.vl, fc);
    s.p = limited_pipeline(resil_loop_clock(&s.vl.loop));
    resil_limiter *l = resil_pipeline_adaptive_limiter(s.p);
    call calls[CALLS];
    for (int i = 0; i < CALLS; i++) {
        calls[i] = (call){.s = &s, .id = i};
        resil_call c;
        resil_call_default(&c);
        c.user = &calls[i];
        assert_int_equal(resil_pipeline_start(s.p, &s.vl.loop, op, &c, ended, &s, NULL), 0);
    }
    assert_int_equal(s.started, 1);
    assert_int_equal(resil_limiter_in_flight(l), 1);
    assert_int_equal(resil_limiter_queued(l), CALLS - 1);

    virtual_loop_run(&s.vl, NULL);

    assert_int_equal(s.ended, CALLS);
    for (int i = 0; i < CALLS; i++)
        assert_int_equal(s.order[i], i);
    /* The first call alone at the limit of 1. */
    assert_int_equal(s.start_at[0], T0);
    assert_int_equal(s.limit_at_start[0], 1);
    /* Its end widens the limit to 4: its own permit and three new ones
     * start the four oldest waiters at that instant. */
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(s.start_at[i], T0 + TAKES);
        assert_int_equal(s.limit_at_start[i], 4);
    }
    /* The rest waited for the next ends. */
    for (int i = 5; i < CALLS; i++)
        assert_true(s.start_at[i] == T0 + 2 * TAKES);
    assert_int_equal(resil_limiter_in_flight(l), 0);
    assert_int_equal(resil_limiter_queued(l), 0);
    resil_pipeline_free(s.p);
    virtual_loop_destroy(&s.vl);
    resil_fake_clock_free(fc);
}

/* Two calls at a limit of 1 that never moves (AIMD, a window never
 * closing within the test): the second waits in the queue. */
static resil_pipeline *pipeline_on(resil_clock *clock, resil_limiter *shared,
                                   resil_duration queue_timeout)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("limited", &b, NULL), 0);
    resil_pipeline_builder_clock(b, clock);
    if (shared != NULL) {
        assert_int_equal(resil_pipeline_use_adaptive_limiter(b, shared), 0);
    } else {
        resil_limiter_opts o;
        resil_limiter_opts_default(&o, RESIL_LIMIT_AIMD);
        o.initial_limit = 1;
        o.max_queue = 1;
        o.queue_timeout = queue_timeout;
        assert_int_equal(resil_pipeline_add_adaptive_limiter(b, &o), 0);
    }
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    return p;
}

typedef struct ending {
    resil_pipeline_result res;
    resil_instant at;
    virtual_loop *vl;
    bool ended;
} ending;

static void keep_ending(const resil_pipeline_result *res, void *ud)
{
    ending *e = ud;
    e->res = *res;
    e->at = e->vl->loop.ops->now(e->vl);
    e->ended = true;
}

static void start_two(scene *s, call calls[2], ending ends[2])
{
    for (int i = 0; i < 2; i++) {
        calls[i] = (call){.s = s, .id = i};
        ends[i] = (ending){.vl = &s->vl};
        resil_call c;
        resil_call_default(&c);
        c.user = &calls[i];
        assert_int_equal(resil_pipeline_start(s->p, &s->vl.loop, op, &c, keep_ending, &ends[i],
                                              NULL),
                         0);
    }
}

static void a_queued_execution_gives_up_at_the_limiters_queue_timeout(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(T0, 0, &fc), 0);
    scene s = {.started = 0};
    virtual_loop_init(&s.vl, fc);
    s.p = pipeline_on(resil_loop_clock(&s.vl.loop), NULL, RESIL_MS(30));
    resil_limiter *l = resil_pipeline_adaptive_limiter(s.p);
    call calls[2];
    ending ends[2];
    start_two(&s, calls, ends);
    assert_int_equal(s.started, 1);
    assert_int_equal(resil_limiter_queued(l), 1);

    virtual_loop_run(&s.vl, NULL);

    assert_int_equal(s.started, 1);
    assert_int_equal(ends[0].res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(ends[0].at, T0 + TAKES);
    assert_int_equal(ends[1].at, T0 + RESIL_MS(30));
    assert_int_equal(ends[1].res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(ends[1].res.outcome.code, RESIL_STRATEGY_ADAPTIVE_LIMITER);
    assert_string_equal(ends[1].res.outcome.detail, "adaptive limiter queue timeout");
    assert_int_equal(ends[1].res.rejected_by, RESIL_STRATEGY_ADAPTIVE_LIMITER);
    assert_duration_equal(ends[1].res.elapsed, RESIL_MS(30));
    resil_limiter_stats st;
    resil_limiter_stats_get(l, &st);
    assert_int_equal(st.timed_out, 1);
    assert_int_equal(resil_limiter_in_flight(l), 0);
    assert_int_equal(resil_limiter_queued(l), 0);
    resil_pipeline_free(s.p);
    virtual_loop_destroy(&s.vl);
    resil_fake_clock_free(fc);
}

/* ---- another implementation ------------------------------------------------------ */

typedef struct one_at_a_time {
    int acquired, released;
    resil_verdict last;
} one_at_a_time;

static int one_acquire(void *self, resil_cancel *cancel, bool wait, resil_instant now,
                       resil_limiter_ticket *t)
{
    one_at_a_time *c = self;
    (void)cancel;
    assert_false(wait); /* the asynchronous path never asks it to block */
    if (c->acquired - c->released >= 1)
        return RESIL_EREJECTED;
    c->acquired++;
    t->start = now;
    return 0;
}

static void one_release(void *self, const resil_limiter_ticket *t, resil_verdict v,
                        resil_instant now)
{
    one_at_a_time *c = self;
    (void)t;
    (void)now;
    c->released++;
    c->last = v;
}

static void another_implementation_is_tried_without_queueing(void **state)
{
    (void)state;
    static const resil_limiter_ops ops = {sizeof ops, "one", one_acquire, one_release, NULL,
                                          NULL, NULL, NULL};
    one_at_a_time c = {0, 0, RESIL_BREAKER_IGNORED};
    resil_limiter *l;
    assert_int_equal(resil_limiter_new_custom(&ops, &c, &l, NULL), 0);
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(T0, 0, &fc), 0);
    scene s = {.started = 0};
    virtual_loop_init(&s.vl, fc);
    s.p = pipeline_on(resil_loop_clock(&s.vl.loop), l, 0);
    call calls[2];
    ending ends[2];
    start_two(&s, calls, ends);
    /* the second refused at once, before any loop pass */
    assert_true(ends[1].ended);
    assert_int_equal(ends[1].at, T0);
    assert_int_equal(ends[1].res.outcome.kind, RESIL_REJECTED);
    assert_string_equal(ends[1].res.outcome.detail, "adaptive limit reached");
    assert_duration_equal(ends[1].res.elapsed, 0);

    virtual_loop_run(&s.vl, NULL);

    assert_int_equal(s.started, 1);
    assert_int_equal(ends[0].res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(ends[0].at, T0 + TAKES);
    assert_int_equal(c.acquired, 1);
    assert_int_equal(c.released, 1);
    assert_int_equal(c.last, RESIL_BREAKER_SUCCESS);
    resil_pipeline_free(s.p);
    resil_limiter_free(l);
    virtual_loop_destroy(&s.vl);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_raised_limit_starts_that_many_queued_executions_in_order),
        cmocka_unit_test(a_queued_execution_gives_up_at_the_limiters_queue_timeout),
        cmocka_unit_test(another_implementation_is_tried_without_queueing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
