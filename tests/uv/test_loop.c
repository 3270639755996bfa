/*
 * test_loop.c — resil on a real libuv loop: a retry's wait is a uv timer,
 * and the loop is released when the execution is over.
 *
 * The retry waits zero, so the timer falls due on the next pass of the
 * loop and nothing here depends on how long anything takes. Timers whose
 * order is checked take their instants from one reading of the clock, and
 * an instant that must not have come by the next pass is a second away.
 * A guard timer, unreferenced so that it never keeps the loop alive
 * itself, stops a loop that would otherwise block for ever and makes that
 * a failure instead of a hung test.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "test.h"
#include "resil/uv.h"

typedef struct world {
    uv_loop_t uv;
    uv_timer_t guard;
    bool guard_fired;
    resil_uv *host;
    resil_pipeline *p;
    resil_pipeline_result res;
    int done;
} world;

static void guard_fired(uv_timer_t *t)
{
    world *w = t->data;
    w->guard_fired = true;
    uv_stop(&w->uv);
}

static void fail_then_ok(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    resil_outcome o = ctx->attempt == 1 ? resil_fail(RESIL_TRANSIENT, 503, "busy") : resil_ok();
    resil_attempt_done(a, &o);
}

static void finished(const resil_pipeline_result *res, void *ud)
{
    world *w = ud;
    w->res = *res;
    w->done++;
}

static void open_world(world *w)
{
    memset(w, 0, sizeof *w);
    assert_int_equal(uv_loop_init(&w->uv), 0);
    assert_int_equal(uv_timer_init(&w->uv, &w->guard), 0);
    w->guard.data = w;
    assert_int_equal(uv_timer_start(&w->guard, guard_fired, 10000, 0), 0);
    uv_unref((uv_handle_t *)&w->guard);
    assert_int_equal(resil_uv_new(&w->uv, &w->host), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("uv", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(resil_uv_loop(w->host)));
    resil_retry_policy r;
    resil_retry_policy_default(&r);
    r.max_attempts = 2;
    r.backoff.kind = RESIL_BACKOFF_CONSTANT;
    r.backoff.base = 0;
    r.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &r), 0);
    assert_int_equal(resil_pipeline_build(b, &w->p, NULL), 0);
    resil_pipeline_builder_free(b);
}

static void close_world(world *w)
{
    resil_uv_close(w->host);
    uv_close((uv_handle_t *)&w->guard, NULL);
    uv_run(&w->uv, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&w->uv), 0);
    resil_pipeline_free(w->p);
}

static void check_retried_once(const world *w)
{
    assert_false(w->guard_fired);
    assert_int_equal(w->done, 1);
    assert_int_equal(w->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(w->res.attempts, 2);
    assert_int_equal(w->res.outcome.kind, RESIL_SUCCESS);
}

static void run_default_returns_once_the_retried_execution_is_over(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    assert_int_equal(
        resil_pipeline_start(w.p, resil_uv_loop(w.host), fail_then_ok, NULL, finished, &w, NULL),
        0);
    assert_int_equal(w.done, 0); /* the retry waits on the uv timer */
    uv_run(&w.uv, UV_RUN_DEFAULT);
    check_retried_once(&w);
    close_world(&w);
}

static void run_once_does_not_block_after_the_timer_ended_the_execution(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    for (int i = 0; i < 3; i++) {
        w.done = 0;
        assert_int_equal(resil_pipeline_start(w.p, resil_uv_loop(w.host), fail_then_ok, NULL,
                                              finished, &w, NULL),
                         0);
        while (w.done == 0 && !w.guard_fired)
            uv_run(&w.uv, UV_RUN_ONCE);
        check_retried_once(&w);
    }
    close_world(&w);
}

static void an_idle_host_keeps_no_loop_alive(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    assert_int_equal(uv_run(&w.uv, UV_RUN_DEFAULT), 0);
    assert_false(w.guard_fired);
    close_world(&w);
}

/* A zero wait yields to the loop exactly once: the retry is not taken
 * inside the start, and one pass that does not block runs it. */
static void a_zero_wait_retries_on_the_next_pass(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    assert_int_equal(
        resil_pipeline_start(w.p, resil_uv_loop(w.host), fail_then_ok, NULL, finished, &w, NULL),
        0);
    assert_int_equal(w.done, 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    check_retried_once(&w);
    close_world(&w);
}

/* The idle that ran a zero wait rests for one pass (the next zero wait
 * need not start it again) and then stops: with the program's own handle
 * keeping the loop alive, one pass more does not block, and the one after
 * it would. Nothing spins while nothing is due. */
static void after_the_last_zero_wait_one_more_pass_does_not_block_then_the_loop_blocks(
    void **state)
{
    (void)state;
    world w;
    open_world(&w);
    uv_ref((uv_handle_t *)&w.guard); /* the program's own handle */
    assert_int_equal(
        resil_pipeline_start(w.p, resil_uv_loop(w.host), fail_then_ok, NULL, finished, &w, NULL),
        0);
    assert_int_equal(uv_backend_timeout(&w.uv), 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    check_retried_once(&w);
    assert_int_equal(uv_backend_timeout(&w.uv), 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_true(uv_backend_timeout(&w.uv) > 0);
    uv_unref((uv_handle_t *)&w.guard);
    close_world(&w);
}

typedef struct wakeup {
    resil_timer t;
    resil_loop *loop;
    resil_instant fired_at;
    int fired;
    int order; /* among the wakeups rung so far, from 1 */
} wakeup;

static int rung;

static void ring(resil_timer *t)
{
    wakeup *a = (wakeup *)t;
    a->fired_at = resil_clock_now(resil_loop_clock(a->loop));
    a->fired++;
    a->order = ++rung;
}

static void wakeup_init(wakeup *a, resil_loop *loop)
{
    a->loop = loop;
    a->t = (resil_timer){.fn = ring};
    a->fired = 0;
}

static void start_wakeup_for(resil_loop *loop, wakeup *a, resil_instant due)
{
    wakeup_init(a, loop);
    loop->ops->timer_start_at(loop->self, &a->t, due);
}

static void start_wakeup_at(world *w, wakeup *a, resil_duration from_now)
{
    resil_loop *loop = resil_uv_loop(w->host);
    resil_instant due = resil_clock_now(resil_loop_clock(loop)) + from_now;
    start_wakeup_for(loop, a, due);
    a->fired_at = due; /* the callback overwrites it with its reading */
}

static void a_timer_set_for_an_instant_does_not_run_before_it(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    wakeup a;
    start_wakeup_at(&w, &a, RESIL_MS(2));
    resil_instant due = a.fired_at;
    uv_run(&w.uv, UV_RUN_DEFAULT);
    assert_false(w.guard_fired);
    assert_int_equal(a.fired, 1);
    assert_true(a.fired_at >= due);
    close_world(&w);
}

static void a_timer_set_for_a_past_instant_runs_on_the_next_pass(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    wakeup a;
    start_wakeup_at(&w, &a, -RESIL_MS(5));
    assert_int_equal(a.fired, 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(a.fired, 1);
    close_world(&w);
}

static void a_due_timer_stopped_before_its_pass_never_runs(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    wakeup a;
    start_wakeup_at(&w, &a, 0);
    a.loop->ops->timer_stop(a.loop->self, &a.t);
    assert_int_equal(uv_run(&w.uv, UV_RUN_DEFAULT), 0);
    assert_false(w.guard_fired);
    assert_int_equal(a.fired, 0);
    close_world(&w);
}

static void start_wakeup_in(world *w, wakeup *a, resil_duration delay)
{
    wakeup_init(a, resil_uv_loop(w->host));
    a->loop->ops->timer_start(a->loop->self, &a->t, delay);
}

/* A zero delay is due at once without a reading of its own: it runs on the
 * next pass, after a timer that was already due when it was started. */
static void a_zero_delay_runs_on_the_next_pass_after_the_timers_already_due(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    rung = 0;
    wakeup past, zero;
    start_wakeup_at(&w, &past, -RESIL_MS(5));
    start_wakeup_in(&w, &zero, 0);
    assert_int_equal(zero.fired, 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(past.order, 1);
    assert_int_equal(zero.order, 2);
    assert_int_equal(zero.fired, 1);
    close_world(&w);
}

/* A delay counts from a reading taken when the timer is started. */
static void a_delay_does_not_end_before_it_has_passed_since_the_start(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    wakeup a;
    resil_instant before = resil_clock_now(resil_loop_clock(resil_uv_loop(w.host)));
    start_wakeup_in(&w, &a, RESIL_MS(2));
    uv_run(&w.uv, UV_RUN_DEFAULT);
    assert_false(w.guard_fired);
    assert_int_equal(a.fired, 1);
    assert_true(a.fired_at >= before + RESIL_MS(2));
    close_world(&w);
}

/* A timer due before the one the uv timer is armed for moves it earlier;
 * one due after it leaves it: each runs in due order. The instants count
 * from one reading, so their order is the test's, not the scheduler's. */
static void timers_run_in_due_order_whichever_was_started_first(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    rung = 0;
    resil_loop *loop = resil_uv_loop(w.host);
    resil_instant now = resil_clock_now(resil_loop_clock(loop));
    wakeup late, early, later;
    start_wakeup_for(loop, &late, now + RESIL_MS(4));
    start_wakeup_for(loop, &early, now + RESIL_MS(1));
    start_wakeup_for(loop, &later, now + RESIL_MS(6));
    uv_run(&w.uv, UV_RUN_DEFAULT);
    assert_false(w.guard_fired);
    assert_int_equal(early.order, 1);
    assert_int_equal(late.order, 2);
    assert_int_equal(later.order, 3);
    assert_int_equal(early.fired + late.fired + later.fired, 3);
    close_world(&w);
}

/* A negative delay falls due before now: before a zero delay started
 * ahead of it, both on the next pass. */
static void a_negative_delay_runs_before_a_zero_delay_started_first(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    rung = 0;
    wakeup zero, negative;
    start_wakeup_in(&w, &zero, 0);
    start_wakeup_in(&w, &negative, -RESIL_MS(5));
    assert_int_equal(zero.fired + negative.fired, 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(negative.order, 1);
    assert_int_equal(zero.order, 2);
    close_world(&w);
}

/* Timers due already run in due order, then in start order, whether the
 * host keeps them in its list of timers due (each started due no earlier
 * than every one before it) or in its heap (the later two, started due
 * before the list's last). */
static void due_timers_run_by_instant_then_start_order(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    rung = 0;
    resil_loop *loop = resil_uv_loop(w.host);
    resil_instant now = resil_clock_now(resil_loop_clock(loop));
    wakeup early, at_now, early_again, at_now_again;
    start_wakeup_for(loop, &early, now - RESIL_MS(5));
    start_wakeup_for(loop, &at_now, now);
    start_wakeup_for(loop, &early_again, now - RESIL_MS(5));
    start_wakeup_for(loop, &at_now_again, now);
    assert_int_equal(rung, 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(early.order, 1);
    assert_int_equal(early_again.order, 2);
    assert_int_equal(at_now.order, 3);
    assert_int_equal(at_now_again.order, 4);
    close_world(&w);
}

/* A timer whose place was reserved before another was started runs first
 * at their shared instant, though it was started last: due already, it
 * goes to the heap rather than the end of the list of timers due, where
 * the zero wait started after its reservation is. */
static void a_reserved_timer_runs_before_a_zero_wait_started_after_its_reservation(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    rung = 0;
    resil_loop *loop = resil_uv_loop(w.host);
    wakeup reserved, zero;
    wakeup_init(&reserved, loop);
    loop->ops->timer_reserve(loop->self, &reserved.t);
    start_wakeup_in(&w, &zero, 0);
    loop->ops->timer_start(loop->self, &reserved.t, 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(reserved.order, 1);
    assert_int_equal(zero.order, 2);
    close_world(&w);
}

/* A timer due already, moved to a later instant, runs then and once. The
 * instant is a second ahead, so that the pass right after the move comes
 * before it however long the machine stalls in between (up to that
 * second). */
static void a_due_timer_moved_later_waits_for_its_new_instant(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    wakeup a;
    start_wakeup_in(&w, &a, 0);
    resil_instant due = resil_clock_now(resil_loop_clock(a.loop)) + RESIL_S(1);
    a.loop->ops->timer_start_at(a.loop->self, &a.t, due);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(a.fired, 0);
    uv_run(&w.uv, UV_RUN_DEFAULT);
    assert_false(w.guard_fired);
    assert_int_equal(a.fired, 1);
    assert_true(a.fired_at >= due);
    close_world(&w);
}

typedef struct ordered {
    world *w;
    int id;
    int *log;
    int *n;
} ordered;

static void log_attempt(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    ordered *o = ctx->user;
    o->log[(*o->n)++] = o->id * 10 + (int)ctx->attempt;
    resil_outcome out = ctx->attempt == 1 ? resil_fail(RESIL_TRANSIENT, 503, "busy") : resil_ok();
    resil_attempt_done(a, &out);
}

static void count_done(const resil_pipeline_result *res, void *ud)
{
    ordered *o = ud;
    o->w->done += res->attempts == 2;
}

/* Two executions whose zero waits fall due at one pass retry in the order
 * their waits began. */
static void executions_waiting_zero_retry_in_the_order_they_waited(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    int log[4], n = 0;
    ordered a = {&w, 1, log, &n}, b = {&w, 2, log, &n};
    resil_call ca, cb;
    resil_call_default(&ca);
    resil_call_default(&cb);
    ca.user = &a;
    cb.user = &b;
    resil_loop *loop = resil_uv_loop(w.host);
    assert_int_equal(resil_pipeline_start(w.p, loop, log_attempt, &ca, count_done, &a, NULL), 0);
    assert_int_equal(resil_pipeline_start(w.p, loop, log_attempt, &cb, count_done, &b, NULL), 0);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(w.done, 2);
    assert_int_equal(n, 4);
    assert_int_equal(log[0], 11);
    assert_int_equal(log[1], 21);
    assert_int_equal(log[2], 12);
    assert_int_equal(log[3], 22);
    close_world(&w);
}

/* ---- watching descriptors ------------------------------------------------------------ */

/* A TCP connection on loopback whose other end resets it: the watched
 * end's descriptor fails (POLLERR). */
typedef struct reset_pair {
    int listener, client, server;
} reset_pair;

static void reset_pair_open(reset_pair *r)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    r->listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(r->listener >= 0);
    assert_int_equal(bind(r->listener, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(r->listener, 1), 0);
    assert_int_equal(getsockname(r->listener, (struct sockaddr *)&a, &len), 0);
    r->client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(r->client, (struct sockaddr *)&a, sizeof a), 0);
    r->server = accept(r->listener, NULL, NULL);
    assert_true(r->server >= 0);
}

static void reset_pair_reset(reset_pair *r)
{
    struct linger hard = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(r->server, SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
    close(r->server); /* an RST, not a FIN */
    close(r->listener);
}

typedef struct error_watch {
    resil_io io;
    int errors;
} error_watch;

static void count_errors(resil_io *io, int fd, unsigned events)
{
    (void)fd;
    error_watch *e = (error_watch *)io;
    e->errors += (events & RESIL_IO_ERROR) != 0;
}

/* libuv stops a poll on POLLERR; the watch must not stop with it. */
static void a_failed_descriptor_is_reported_on_every_pass_until_the_watch_stops(void **state)
{
    (void)state;
    world w;
    open_world(&w);
    reset_pair r;
    reset_pair_open(&r);
    error_watch e = {.io.fn = count_errors};
    resil_loop *loop = resil_uv_loop(w.host);
    assert_int_equal(resil_loop_io_start(loop, &e.io, r.client, RESIL_IO_READ), 0);
    reset_pair_reset(&r);
    while (e.errors == 0 && !w.guard_fired)
        uv_run(&w.uv, UV_RUN_ONCE);
    assert_int_equal(e.errors, 1);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(e.errors, 2);
    resil_loop_io_stop(loop, &e.io);
    uv_run(&w.uv, UV_RUN_NOWAIT);
    assert_int_equal(e.errors, 2);
    close(r.client);
    close_world(&w);
}

static void a_host_needs_a_loop_and_out(void **state)
{
    (void)state;
    uv_loop_t uv;
    assert_int_equal(uv_loop_init(&uv), 0);
    resil_uv *u = NULL;
    assert_int_equal(resil_uv_new(NULL, &u), RESIL_EINVAL);
    assert_int_equal(resil_uv_new(&uv, NULL), RESIL_EINVAL);
    assert_null(u);
    assert_int_equal(uv_loop_close(&uv), 0);
}

static resil_attempt *kept_attempt;

static void keep_the_attempt(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    (void)ctx;
    kept_attempt = a;
}

/* The caller's token fires (which the execution hears through a post to
 * the loop), the attempt reports and the execution ends before that post
 * has run, and the host is closed without another pass of the loop. The
 * close runs what is still posted, so the execution's block goes back to
 * the loop and is freed with it: LeakSanitizer (the ASan build) finds it
 * lost otherwise. */
static void a_post_still_queued_when_the_host_closes_is_run_and_frees_its_execution(
    void **state)
{
    (void)state;
    world w;
    open_world(&w);
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_call call;
    resil_call_default(&call);
    call.cancel = &token;
    assert_int_equal(resil_pipeline_start(w.p, resil_uv_loop(w.host), keep_the_attempt, &call,
                                          finished, &w, NULL),
                     0);
    resil_cancel_fire(&token);
    resil_outcome ok = resil_ok();
    resil_attempt_done(kept_attempt, &ok);
    kept_attempt = NULL; /* no pointer into the block is left for the leak check to follow */
    assert_int_equal(w.done, 1);
    assert_int_equal(w.res.stop, RESIL_STOP_SUCCEEDED);
    close_world(&w);
    resil_cancel_destroy(&token);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_default_returns_once_the_retried_execution_is_over),
        cmocka_unit_test(run_once_does_not_block_after_the_timer_ended_the_execution),
        cmocka_unit_test(an_idle_host_keeps_no_loop_alive),
        cmocka_unit_test(
            a_post_still_queued_when_the_host_closes_is_run_and_frees_its_execution),
        cmocka_unit_test(a_zero_wait_retries_on_the_next_pass),
        cmocka_unit_test(after_the_last_zero_wait_one_more_pass_does_not_block_then_the_loop_blocks),
        cmocka_unit_test(a_timer_set_for_an_instant_does_not_run_before_it),
        cmocka_unit_test(a_timer_set_for_a_past_instant_runs_on_the_next_pass),
        cmocka_unit_test(a_due_timer_stopped_before_its_pass_never_runs),
        cmocka_unit_test(a_zero_delay_runs_on_the_next_pass_after_the_timers_already_due),
        cmocka_unit_test(a_delay_does_not_end_before_it_has_passed_since_the_start),
        cmocka_unit_test(timers_run_in_due_order_whichever_was_started_first),
        cmocka_unit_test(a_negative_delay_runs_before_a_zero_delay_started_first),
        cmocka_unit_test(due_timers_run_by_instant_then_start_order),
        cmocka_unit_test(a_reserved_timer_runs_before_a_zero_wait_started_after_its_reservation),
        cmocka_unit_test(a_due_timer_moved_later_waits_for_its_new_instant),
        cmocka_unit_test(executions_waiting_zero_retry_in_the_order_they_waited),
        cmocka_unit_test(a_failed_descriptor_is_reported_on_every_pass_until_the_watch_stops),
        cmocka_unit_test(a_host_needs_a_loop_and_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
