/*
 * test_async_timeouts.c — when an asynchronous execution's timeouts reach
 * the loop. A timeout's timer is armed only once the execution has
 * something to wait for: an attempt that reports at once leaves the loop
 * without a single timer, while an attempt left running, a retry's wait
 * or a hedge's delay arms every timeout entered and not yet armed. A
 * timer armed later than its level was entered still falls due at the
 * level's deadline. (That it still runs before a timer the operation
 * started for the same instant is unit.pipeline_paths's
 * an_attempt_reaching_its_timeout_has_timed_out.)
 *
 * Each case runs on two loops (ON_BOTH_LOOPS): one that takes instants
 * (timer_start_at, the instant is the deadline itself) and one that takes
 * delays only (the delay is what is left of the deadline when the timer
 * is armed).
 * Both reserve timers' places (timer_reserve); on a loop that does not,
 * each timeout's timer is armed as its level is entered. The loop is the
 * virtual one behind a spy that records every timer started and stopped.
 */
#include <stddef.h>

#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)
#define MAX_STARTS 8

typedef struct spy {
    resil_fake_clock *fc;
    virtual_loop vl;
    resil_loop loop;
    bool instants;
    resil_instant due[MAX_STARTS]; /* each start's instant, in start order */
    resil_duration delay[MAX_STARTS]; /* a delay start's delay */
    int starts, stops;
    resil_pipeline *p;
    /* the call */
    resil_duration op_takes; /* the operation's time before it returns */
    bool fail_first;         /* the first attempt fails at once */
    bool hold;               /* the attempt is left running, else ok at once */
    resil_attempt *a;
    int ended;
    resil_pipeline_result res;
    resil_instant ended_at;
} spy;

static void note_start(spy *s, resil_instant due, resil_duration delay)
{
    assert_true(s->starts < MAX_STARTS);
    s->due[s->starts] = due;
    s->delay[s->starts] = delay;
    s->starts++;
}

static resil_instant spy_now(void *self)
{
    spy *s = self;
    return s->vl.loop.ops->now(&s->vl);
}

static void spy_timer_start(void *self, resil_timer *t, resil_duration d)
{
    spy *s = self;
    note_start(s, resil_dur_add(resil_fake_clock_now(s->fc), d), d);
    s->vl.loop.ops->timer_start(&s->vl, t, d);
}

static void spy_timer_start_at(void *self, resil_timer *t, resil_instant due)
{
    spy *s = self;
    note_start(s, due, -1);
    resil_timers_start(&s->vl.timers, t, due);
}

static void spy_timer_stop(void *self, resil_timer *t)
{
    spy *s = self;
    s->stops++;
    s->vl.loop.ops->timer_stop(&s->vl, t);
}

static void spy_timer_reserve(void *self, resil_timer *t)
{
    spy *s = self;
    s->vl.loop.ops->timer_reserve(&s->vl, t);
}

static void spy_post(void *self, resil_work *w)
{
    spy *s = self;
    s->vl.loop.ops->post(&s->vl, w);
}

static bool spy_in_loop(void *self)
{
    spy *s = self;
    return s->vl.loop.ops->in_loop(&s->vl);
}

static const resil_loop_ops spy_ops = {.size = sizeof(resil_loop_ops),
                                       .now = spy_now,
                                       .timer_start = spy_timer_start,
                                       .timer_stop = spy_timer_stop,
                                       .post = spy_post,
                                       .in_loop = spy_in_loop,
                                       .timer_start_at = spy_timer_start_at,
                                       .timer_reserve = spy_timer_reserve};

/* The same without timer_start_at. */
static const resil_loop_ops spy_delay_ops = {.size = sizeof(resil_loop_ops),
                                             .now = spy_now,
                                             .timer_start = spy_timer_start,
                                             .timer_stop = spy_timer_stop,
                                             .post = spy_post,
                                             .in_loop = spy_in_loop,
                                             .timer_reserve = spy_timer_reserve};

/* The first, ending before timer_reserve. */
static const resil_loop_ops spy_unreserved_ops = {.size = offsetof(resil_loop_ops, timer_reserve),
                                                  .now = spy_now,
                                                  .timer_start = spy_timer_start,
                                                  .timer_stop = spy_timer_stop,
                                                  .post = spy_post,
                                                  .in_loop = spy_in_loop,
                                                  .timer_start_at = spy_timer_start_at};

/* Total 10 s, a retry waiting 1 s, attempts of 2 s. */
static void timeouts_around_a_retry(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_S(10));
    test_add_retry_constant(b, 2, RESIL_S(1));
    test_add_attempt_timeout(b, RESIL_S(2));
}

/* Total 10 s, then a hedge after 1 s, attempts of 2 s. */
static void timeouts_around_a_hedge(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_S(10));
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = RESIL_S(1);
    h.max_hedged = 1;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
    test_add_attempt_timeout(b, RESIL_S(2));
}

static void spy_open(spy *s, const resil_loop_ops *ops, void (*build)(resil_pipeline_builder *b))
{
    memset(s, 0, sizeof *s);
    assert_int_equal(resil_fake_clock_new(T0, 0, &s->fc), 0);
    virtual_loop_init(&s->vl, s->fc);
    s->instants = ops->timer_start_at != NULL;
    assert_int_equal(resil_loop_init(&s->loop, ops, s), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("async timeouts", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&s->loop));
    build(b);
    assert_int_equal(resil_pipeline_build(b, &s->p, NULL), 0);
    resil_pipeline_builder_free(b);
}

static void spy_close(spy *s)
{
    resil_pipeline_free(s->p);
    resil_loop_drain(&s->loop);
    virtual_loop_destroy(&s->vl);
    resil_fake_clock_free(s->fc);
}

static void told(resil_attempt *a, void *ud)
{
    (void)ud;
    resil_outcome o = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "stopped");
    resil_attempt_done(a, &o);
}

static void op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    spy *s = ctx->user;
    resil_fake_clock_advance(s->fc, s->op_takes);
    if (ctx->attempt == 1 && s->fail_first) {
        resil_outcome busy = resil_fail(RESIL_TRANSIENT, 503, "busy");
        resil_attempt_done(a, &busy);
        return;
    }
    if (s->hold) {
        s->a = a;
        resil_attempt_on_cancel(a, told, s);
        return;
    }
    resil_outcome ok = resil_ok();
    resil_attempt_done(a, &ok);
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    spy *s = ud;
    s->res = *res;
    s->ended++;
    s->ended_at = resil_fake_clock_now(s->fc);
}

static void start(spy *s)
{
    resil_call rc;
    resil_call_default(&rc);
    rc.user = s;
    assert_int_equal(resil_pipeline_start(s->p, &s->loop, op, &rc, ended, s, NULL), 0);
}

/* The one start recorded for `due`, from `from` on: the delay it was
 * started with, -1 for an instant. */
static resil_duration started_once(const spy *s, int from, resil_instant due)
{
    int found = -1;
    for (int i = from; i < s->starts; i++)
        if (s->due[i] == due) {
            assert_int_equal(found, -1);
            found = i;
        }
    if (found < 0)
        fail_msg("no timer started for %lld", (long long)due);
    return s->delay[found];
}

/* A timer started once for `due`: for the instant, or on a delay loop
 * with `delay`. */
static void assert_started(const spy *s, int from, resil_instant due, resil_duration delay)
{
    assert_int_equal(started_once(s, from, due), s->instants ? -1 : delay);
}

/* The same for a timer resil starts with a delay on either loop. */
static void assert_started_by_delay(const spy *s, int from, resil_instant due,
                                    resil_duration delay)
{
    assert_int_equal(started_once(s, from, due), delay);
}

static void an_attempt_reporting_at_once_arms_no_timer(void **state)
{
    spy s;
    spy_open(&s, *state, timeouts_around_a_retry);
    start(&s);
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(s.res.attempts, 1);
    assert_int_equal(s.starts, 0);
    assert_int_equal(s.stops, 0);
    spy_close(&s);
}

static void a_running_attempt_arms_both_timeouts(void **state)
{
    spy s;
    spy_open(&s, *state, timeouts_around_a_retry);
    s.hold = true;
    start(&s);
    assert_int_equal(s.ended, 0);
    assert_int_equal(s.starts, 2);
    assert_started(&s, 0, T0 + RESIL_S(10), RESIL_S(10));
    assert_started(&s, 0, T0 + RESIL_S(2), RESIL_S(2));
    resil_outcome ok = resil_ok();
    resil_attempt_done(s.a, &ok);
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(s.starts, 2);
    assert_int_equal(s.stops, 2);
    spy_close(&s);
}

static void a_retry_wait_arms_the_total_timeout_left_unarmed(void **state)
{
    spy s;
    spy_open(&s, *state, timeouts_around_a_retry);
    s.fail_first = true;
    s.hold = true;
    start(&s);
    /* the first attempt's timeout was left unarmed; the total's is armed
     * with the wait's */
    assert_int_equal(s.starts, 2);
    assert_started(&s, 0, T0 + RESIL_S(10), RESIL_S(10));
    assert_started(&s, 0, T0 + RESIL_S(1), RESIL_S(1));
    virtual_loop_run(&s.vl, NULL);
    /* the second attempt ran on: its own timeout, from its start, ended it */
    assert_int_equal(s.starts, 3);
    assert_started(&s, 2, T0 + RESIL_S(3), RESIL_S(2));
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.res.attempts, 2);
    assert_int_equal(s.res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_string_equal(s.res.outcome.detail, "attempt timeout (2s) elapsed");
    assert_int_equal(s.ended_at, T0 + RESIL_S(3));
    spy_close(&s);
}

static void a_hedged_attempt_arms_its_timeout_and_the_total_above(void **state)
{
    spy s;
    spy_open(&s, *state, timeouts_around_a_hedge);
    s.hold = true;
    start(&s);
    /* the total (the caller's lane), the first hedged attempt's timeout
     * (its lane), the hedge's delay */
    assert_int_equal(s.starts, 3);
    assert_started(&s, 0, T0 + RESIL_S(10), RESIL_S(10));
    assert_started(&s, 0, T0 + RESIL_S(2), RESIL_S(2));
    assert_started_by_delay(&s, 0, T0 + RESIL_S(1), RESIL_S(1));
    resil_outcome ok = resil_ok();
    resil_attempt_done(s.a, &ok);
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.res.outcome.kind, RESIL_SUCCESS);
    spy_close(&s);
}

static void a_timeout_armed_after_the_operation_returns_falls_due_at_its_deadline(void **state)
{
    spy s;
    spy_open(&s, *state, timeouts_around_a_retry);
    s.op_takes = RESIL_MS(500);
    s.hold = true;
    start(&s);
    /* armed 500 ms after the levels were entered: on a delay loop for
     * what is left */
    assert_int_equal(s.starts, 2);
    assert_started(&s, 0, T0 + RESIL_S(10), RESIL_MS(9500));
    assert_started(&s, 0, T0 + RESIL_S(2), RESIL_MS(1500));
    s.hold = false; /* the second attempt succeeds at once */
    virtual_loop_run(&s.vl, NULL);
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.res.attempts, 2);
    assert_int_equal(s.res.outcome.kind, RESIL_SUCCESS);
    /* the timeout at 2 s, the wait of 1 s, the second attempt's 500 ms */
    assert_int_equal(s.ended_at, T0 + RESIL_MS(3500));
    spy_close(&s);
}

static void without_reservations_each_timeout_is_armed_as_it_is_entered(void **state)
{
    (void)state;
    spy s;
    spy_open(&s, &spy_unreserved_ops, timeouts_around_a_retry);
    start(&s);
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(s.starts, 2);
    assert_started(&s, 0, T0 + RESIL_S(10), RESIL_S(10));
    assert_started(&s, 0, T0 + RESIL_S(2), RESIL_S(2));
    assert_int_equal(s.stops, 2);
    spy_close(&s);
}

/* A case on both reserving loops, named for each: its state is the
 * loop's table. */
#define ON_BOTH_LOOPS(f)                                         \
    {#f ", on instants", f, NULL, NULL, (void *)&spy_ops},       \
    {#f ", on delays", f, NULL, NULL, (void *)&spy_delay_ops}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ON_BOTH_LOOPS(an_attempt_reporting_at_once_arms_no_timer),
        ON_BOTH_LOOPS(a_running_attempt_arms_both_timeouts),
        ON_BOTH_LOOPS(a_retry_wait_arms_the_total_timeout_left_unarmed),
        ON_BOTH_LOOPS(a_hedged_attempt_arms_its_timeout_and_the_total_above),
        ON_BOTH_LOOPS(a_timeout_armed_after_the_operation_returns_falls_due_at_its_deadline),
        cmocka_unit_test(without_reservations_each_timeout_is_armed_as_it_is_entered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
