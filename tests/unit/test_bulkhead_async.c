/*
 * test_bulkhead_async.c — asynchronous executions queued in a bulkhead, on
 * virtual time: a waiter leaves the queue at its queue timeout or when its
 * execution is cancelled (resil_exec_cancel()), with the outcome the
 * blocking bulkhead gives for the same reason, at that instant and with
 * the wait in its elapsed time, without disturbing the call that holds the
 * permit; a permit freed later goes to the oldest waiter still there. A
 * caller's own token is not watched during the wait (async.h): it is seen
 * when the permit comes, before the operation would start.
 *
 * One permit and calls of TAKES each; a call started while the permit is
 * held queues. The executions run on one virtual loop, as many calls on
 * one event loop do. The bulkhead stands alone, or first in the standard
 * pipeline's five strategies, whose walk knows its levels' kinds: a grant
 * resumes that walk below the bulkhead, a queue timeout ends it there.
 */
#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)
#define TAKES RESIL_MS(100)
#define CALLS 3

typedef struct scene scene;

typedef struct call {
    scene *s;
    int id;
    resil_attempt *a;
    resil_timer finish;
    resil_exec *x;
    resil_cancel token; /* the caller's own (call->cancel) */
    bool ended;
    resil_pipeline_result res;
    resil_instant started_at, ended_at;
} call;

struct scene {
    virtual_loop vl;
    resil_fake_clock *fc;
    resil_bulkhead *bh;
    resil_pipeline *p;
    call calls[CALLS];
    int order[CALLS]; /* ids in the order their operations started */
    int started;
    resil_timer canceller;
    int cancel_id;
    bool by_token; /* the canceller fires the caller's token, not the execution */
};

static resil_instant now_of(scene *s) { return s->vl.loop.ops->now(&s->vl); }

static void finished(resil_timer *t)
{
    call *c = (call *)((char *)t - offsetof(call, finish));
    resil_outcome ok = resil_ok();
    resil_attempt_done(c->a, &ok);
}

static void op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    scene *s = c->s;
    s->order[s->started++] = c->id;
    c->started_at = now_of(s);
    c->a = a;
    c->finish.fn = finished;
    s->vl.loop.ops->timer_start(&s->vl, &c->finish, TAKES);
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    call *c = ud;
    c->res = *res;
    c->ended = true;
    c->ended_at = now_of(c->s);
}

static void cancel_one(resil_timer *t)
{
    scene *s = (scene *)((char *)t - offsetof(scene, canceller));
    if (s->by_token)
        resil_cancel_fire(&s->calls[s->cancel_id].token);
    else
        resil_exec_cancel(s->calls[s->cancel_id].x);
}

/* The standard pipeline's order around the scene's bulkhead. */
static void standard_below(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_S(30));
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    assert_int_equal(resil_pipeline_add_breaker(b, &o), 0);
    test_add_attempt_timeout(b, RESIL_S(10));
}

static void scene_open_with(scene *s, resil_duration queue_timeout,
                            void (*below)(resil_pipeline_builder *b))
{
    *s = (scene){.started = 0};
    assert_int_equal(resil_fake_clock_new(T0, 0, &s->fc), 0);
    virtual_loop_init(&s->vl, s->fc);
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = 1;
    o.max_queue = CALLS;
    o.queue_timeout = queue_timeout;
    o.clock = resil_loop_clock(&s->vl.loop);
    assert_int_equal(resil_bulkhead_new(&o, &s->bh, NULL), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("bulkhead", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&s->vl.loop));
    assert_int_equal(resil_pipeline_use_bulkhead(b, s->bh), 0);
    if (below != NULL)
        below(b);
    assert_int_equal(resil_pipeline_build(b, &s->p, NULL), 0);
    resil_pipeline_builder_free(b);
}

static void scene_open(scene *s, resil_duration queue_timeout)
{
    scene_open_with(s, queue_timeout, NULL);
}

/* Start every call at T0, in id order: the first holds the permit. */
static void start_all(scene *s)
{
    for (int i = 0; i < CALLS; i++) {
        call *c = &s->calls[i];
        *c = (call){.s = s, .id = i};
        assert_int_equal(resil_cancel_init(&c->token, NULL), 0);
        resil_call rc;
        resil_call_default(&rc);
        rc.user = c;
        rc.cancel = &c->token;
        assert_int_equal(resil_pipeline_start(s->p, &s->vl.loop, op, &rc, ended, c, &c->x), 0);
    }
    assert_int_equal(s->started, 1);
    assert_int_equal(resil_bulkhead_in_flight(s->bh), 1);
    assert_int_equal(resil_bulkhead_queued(s->bh), CALLS - 1);
}

static void cancel_at(scene *s, int id, resil_duration after)
{
    s->cancel_id = id;
    s->canceller.fn = cancel_one;
    s->vl.loop.ops->timer_start(&s->vl, &s->canceller, after);
}

static void scene_close(scene *s)
{
    assert_int_equal(resil_bulkhead_in_flight(s->bh), 0);
    assert_int_equal(resil_bulkhead_queued(s->bh), 0);
    resil_pipeline_free(s->p);
    resil_bulkhead_free(s->bh);
    for (int i = 0; i < CALLS; i++)
        resil_cancel_destroy(&s->calls[i].token);
    virtual_loop_destroy(&s->vl);
    resil_fake_clock_free(s->fc);
}

static void assert_succeeded(const call *c, resil_instant started_at)
{
    assert_true(c->ended);
    assert_int_equal(c->res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(c->started_at, started_at);
    assert_int_equal(c->ended_at, started_at + TAKES);
}

static void queued_executions_give_up_at_the_queue_timeout(void **state)
{
    (void)state;
    scene s;
    scene_open(&s, RESIL_MS(30));
    start_all(&s);
    virtual_loop_run(&s.vl, NULL);

    assert_succeeded(&s.calls[0], T0);
    for (int i = 1; i < CALLS; i++) {
        const call *c = &s.calls[i];
        assert_true(c->ended);
        assert_int_equal(c->ended_at, T0 + RESIL_MS(30));
        assert_int_equal(c->res.outcome.kind, RESIL_REJECTED);
        assert_int_equal(c->res.outcome.code, RESIL_STRATEGY_BULKHEAD);
        assert_string_equal(c->res.outcome.detail, "bulkhead queue timeout");
        assert_int_equal(c->res.rejected_by, RESIL_STRATEGY_BULKHEAD);
        assert_int_equal(c->res.attempts, 0);
        assert_duration_equal(c->res.elapsed, RESIL_MS(30));
    }
    assert_int_equal(s.started, 1);
    resil_bulkhead_stats st;
    resil_bulkhead_stats_get(s.bh, &st);
    assert_int_equal(st.admitted, 1);
    assert_int_equal(st.queued, CALLS - 1);
    assert_int_equal(st.timed_out, CALLS - 1);
    assert_int_equal(st.cancelled, 0);
    scene_close(&s);
}

/* Call 1 left the queue at +20 ms, cancelled, as the blocking bulkhead
 * reports a cancelled wait. */
static void assert_left_cancelled_at_20ms(const scene *s)
{
    const call *c = &s->calls[1];
    assert_true(c->ended);
    assert_int_equal(c->ended_at, T0 + RESIL_MS(20));
    assert_int_equal(c->res.outcome.kind, RESIL_CANCELLED);
    assert_string_equal(c->res.outcome.detail, "cancelled waiting for the bulkhead");
    assert_int_equal(c->res.stop, RESIL_STOP_NONE); /* no retry to stop */
    assert_int_equal(c->res.attempts, 0);
    assert_duration_equal(c->res.elapsed, RESIL_MS(20));
    resil_bulkhead_stats st;
    resil_bulkhead_stats_get(s->bh, &st);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.timed_out, 0);
}

static void a_queued_execution_that_is_cancelled_ends_at_once(void **state)
{
    (void)state;
    scene s;
    scene_open(&s, 0); /* no queue timeout: only a cancel ends a wait */
    start_all(&s);
    cancel_at(&s, 1, RESIL_MS(20));
    virtual_loop_run(&s.vl, NULL);

    assert_left_cancelled_at_20ms(&s);
    scene_close(&s);
}

/* The caller's token ends the wait as resil_exec_cancel() does: the fire
 * reaches the loop through its post queue. */
static void a_queued_execution_whose_token_fires_ends_at_once(void **state)
{
    (void)state;
    scene s;
    scene_open(&s, 0);
    start_all(&s);
    s.by_token = true;
    cancel_at(&s, 1, RESIL_MS(20));
    virtual_loop_run(&s.vl, NULL);

    assert_left_cancelled_at_20ms(&s);
    assert_succeeded(&s.calls[0], T0);
    assert_succeeded(&s.calls[2], T0 + TAKES);
    assert_int_equal(s.started, 2);
    scene_close(&s);
}

/* The call holding the permit runs on untouched; when it ends, the permit
 * skips the waiter that left and goes to the next, oldest first. */
static void a_freed_permit_passes_over_a_waiter_that_left(void **state)
{
    (void)state;
    scene s;
    scene_open(&s, 0);
    start_all(&s);
    cancel_at(&s, 1, RESIL_MS(20));
    virtual_loop_run(&s.vl, NULL);

    assert_succeeded(&s.calls[0], T0);
    assert_int_equal(s.calls[1].res.outcome.kind, RESIL_CANCELLED);
    assert_succeeded(&s.calls[2], T0 + TAKES);
    assert_int_equal(s.started, 2);
    assert_int_equal(s.order[0], 0);
    assert_int_equal(s.order[1], 2);
    resil_bulkhead_stats st;
    resil_bulkhead_stats_get(s.bh, &st);
    assert_int_equal(st.admitted, 2);
    assert_int_equal(st.queued, 2);
    scene_close(&s);
}

/* Each grant resumes the standard walk at its total timeout: the calls
 * run one after the other, each its one attempt. */
static void queued_executions_of_the_standard_pipeline_run_in_turn(void **state)
{
    (void)state;
    scene s;
    scene_open_with(&s, RESIL_S(1), standard_below);
    start_all(&s);
    virtual_loop_run(&s.vl, NULL);

    for (int i = 0; i < CALLS; i++) {
        const call *c = &s.calls[i];
        assert_succeeded(c, T0 + i * TAKES);
        assert_int_equal(c->res.stop, RESIL_STOP_SUCCEEDED);
        assert_int_equal(c->res.attempts, 1);
        assert_duration_equal(c->res.elapsed, (i + 1) * TAKES);
        assert_int_equal(s.order[i], i);
    }
    resil_bulkhead_stats st;
    resil_bulkhead_stats_get(s.bh, &st);
    assert_int_equal(st.admitted, CALLS);
    assert_int_equal(st.queued, CALLS - 1);
    scene_close(&s);
}

/* A queue timeout ends the standard walk at its first level: the retry
 * below never runs, and no attempt is made. */
static void a_standard_pipeline_queued_past_its_timeout_is_rejected_before_its_retry(
    void **state)
{
    (void)state;
    scene s;
    scene_open_with(&s, RESIL_MS(30), standard_below);
    start_all(&s);
    virtual_loop_run(&s.vl, NULL);

    assert_succeeded(&s.calls[0], T0);
    for (int i = 1; i < CALLS; i++) {
        const call *c = &s.calls[i];
        assert_int_equal(c->ended_at, T0 + RESIL_MS(30));
        assert_int_equal(c->res.outcome.kind, RESIL_REJECTED);
        assert_int_equal(c->res.rejected_by, RESIL_STRATEGY_BULKHEAD);
        assert_int_equal(c->res.stop, RESIL_STOP_NONE);
        assert_int_equal(c->res.attempts, 0);
        assert_duration_equal(c->res.elapsed, RESIL_MS(30));
    }
    assert_int_equal(s.started, 1);
    scene_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(queued_executions_give_up_at_the_queue_timeout),
        cmocka_unit_test(a_queued_execution_that_is_cancelled_ends_at_once),
        cmocka_unit_test(a_queued_execution_whose_token_fires_ends_at_once),
        cmocka_unit_test(a_freed_permit_passes_over_a_waiter_that_left),
        cmocka_unit_test(queued_executions_of_the_standard_pipeline_run_in_turn),
        cmocka_unit_test(a_standard_pipeline_queued_past_its_timeout_is_rejected_before_its_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
