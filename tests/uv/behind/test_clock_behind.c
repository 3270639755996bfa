/*
 * test_clock_behind.c — a uv timer's firing runs the timer it fired for,
 * though the host's clock reads behind libuv's.
 *
 * The system clock may read up to its bound behind CLOCK_MONOTONIC, the
 * clock libuv's timers count on. This file is built with libresil-uv's
 * source and RESIL_UV_TEST_CLOCK_BEHIND, which sets the host's readings a
 * second behind libuv's: far beyond the bound, so that every firing meets
 * a reading before its instant and the outcome does not depend on how
 * long anything takes. Waits are the loop's, a few milliseconds.
 */
#include <uv.h>

#include "test.h"
#include "resil/uv.h"

static int fired;
static resil_loop *ring_loop;
static resil_instant rung_at;

static void ring(resil_timer *t)
{
    (void)t;
    fired++;
    rung_at = resil_clock_now(resil_loop_clock(ring_loop));
}

/* A timer set for libuv's millisecond two ahead, and the loop run until
 * libuv's time reaches it (or a thousand passes): its instant. */
static resil_instant run_a_timer_2ms_ahead(uv_loop_t *loop, resil_uv *host)
{
    ring_loop = resil_uv_loop(host);
    uv_update_time(loop);
    resil_instant due = (resil_instant)(uv_now(loop) + 2) * RESIL_MS(1);
    resil_timer t = {.fn = ring};
    fired = 0;
    ring_loop->ops->timer_start_at(ring_loop->self, &t, due);
    int passes = 0;
    while ((resil_instant)uv_now(loop) * RESIL_MS(1) < due && passes++ < 1000)
        uv_run(loop, UV_RUN_ONCE);
    assert_true(passes < 1000);
    return due;
}

static void open_host(uv_loop_t *loop, resil_uv **host)
{
    assert_int_equal(uv_loop_init(loop), 0);
    assert_int_equal(resil_uv_new(loop, host), 0);
}

static void close_host(uv_loop_t *loop, resil_uv *host)
{
    resil_uv_close(host);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

/* The uv timer is armed for libuv's millisecond `due` falls in; the pass
 * whose loop time reaches that millisecond runs the timer, rather than
 * finding nothing due at the host's reading and waiting for another. */
static void the_pass_that_reaches_a_timers_instant_runs_it(void **state)
{
    (void)state;
    uv_loop_t loop;
    resil_uv *host;
    open_host(&loop, &host);
    run_a_timer_2ms_ahead(&loop, host);
    assert_int_equal(fired, 1);
    close_host(&loop, host);
}

/* The pass ran the timer on libuv's reading, ahead of the host's: the
 * loop's clock then reads no earlier than that, so the timer's callback
 * does not read a time before its instant. */
static void the_timers_callback_reads_no_earlier_than_its_instant(void **state)
{
    (void)state;
    uv_loop_t loop;
    resil_uv *host;
    open_host(&loop, &host);
    resil_instant due = run_a_timer_2ms_ahead(&loop, host);
    assert_int_equal(fired, 1);
    assert_true(rung_at >= due);
    close_host(&loop, host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_pass_that_reaches_a_timers_instant_runs_it),
        cmocka_unit_test(the_timers_callback_reads_no_earlier_than_its_instant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
