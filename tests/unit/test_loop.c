/*
 * test_loop.c — the checks at the door of loop.h: resil_loop_init refuses
 * a table that lacks a required operation or whose size does not reach
 * one, and resil_loop_io_start refuses a watch it could not honour (no
 * events, a negative descriptor, no callback) before the loop is asked,
 * answers RESIL_EUNSUPPORTED for a loop that cannot watch descriptors,
 * and hands a good watch to the loop with only the events it knows.
 */
#include "test.h"

typedef struct spy {
    int io_starts;
    int fd;
    unsigned events;
} spy;

static resil_instant spy_now(void *self)
{
    (void)self;
    return 0;
}
static void spy_timer(void *self, resil_timer *t, resil_duration d)
{
    (void)self, (void)t, (void)d;
}
static void spy_stop(void *self, resil_timer *t) { (void)self, (void)t; }
static void spy_post(void *self, resil_work *w) { (void)self, (void)w; }
static int spy_io_start(void *self, resil_io *w, int fd, unsigned events)
{
    spy *s = self;
    (void)w;
    s->io_starts++;
    s->fd = fd;
    s->events = events;
    return 0;
}
static void spy_io_stop(void *self, resil_io *w) { (void)self, (void)w; }

static const resil_loop_ops full_ops = {.size = sizeof(resil_loop_ops),
                                        .now = spy_now,
                                        .timer_start = spy_timer,
                                        .timer_stop = spy_stop,
                                        .post = spy_post,
                                        .io_start = spy_io_start,
                                        .io_stop = spy_io_stop};

static void on_ready(resil_io *w, int fd, unsigned events) { (void)w, (void)fd, (void)events; }

/* ---- resil_loop_init ------------------------------------------------------- */

static void a_loop_needs_itself_and_a_table(void **state)
{
    (void)state;
    resil_loop l;
    assert_int_equal(resil_loop_init(NULL, &full_ops, NULL), RESIL_EINVAL);
    assert_int_equal(resil_loop_init(&l, NULL, NULL), RESIL_EINVAL);
}

static void a_table_without_post_is_refused(void **state)
{
    (void)state;
    resil_loop_ops ops = full_ops;
    ops.post = NULL;
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &ops, NULL), RESIL_EINVAL);
}

static void a_table_that_does_not_reach_post_is_refused(void **state)
{
    (void)state;
    resil_loop_ops ops = full_ops;
    ops.size = offsetof(resil_loop_ops, post);
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &ops, NULL), RESIL_EINVAL);
}

static void a_table_that_ends_at_post_is_accepted(void **state)
{
    (void)state;
    resil_loop_ops ops = full_ops;
    ops.size = offsetof(resil_loop_ops, post) + sizeof ops.post;
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &ops, NULL), 0);
    assert_false(resil_loop_has_io(&l));
}

/* ---- resil_loop_io_start --------------------------------------------------- */

static void watching_for_no_events_is_refused_before_the_loop_is_asked(void **state)
{
    (void)state;
    spy s = {0};
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &full_ops, &s), 0);
    resil_io w = {.fn = on_ready};
    assert_int_equal(resil_loop_io_start(&l, &w, 3, RESIL_IO_ERROR), RESIL_EINVAL);
    assert_int_equal(s.io_starts, 0);
}

static void watching_a_negative_descriptor_is_refused_before_the_loop_is_asked(void **state)
{
    (void)state;
    spy s = {0};
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &full_ops, &s), 0);
    resil_io w = {.fn = on_ready};
    assert_int_equal(resil_loop_io_start(&l, &w, -1, RESIL_IO_READ), RESIL_EINVAL);
    assert_int_equal(s.io_starts, 0);
}

static void a_watch_without_a_callback_is_refused_before_the_loop_is_asked(void **state)
{
    (void)state;
    spy s = {0};
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &full_ops, &s), 0);
    resil_io w = {.fn = NULL};
    assert_int_equal(resil_loop_io_start(&l, &w, 3, RESIL_IO_READ), RESIL_EINVAL);
    assert_int_equal(resil_loop_io_start(&l, NULL, 3, RESIL_IO_READ), RESIL_EINVAL);
    assert_int_equal(s.io_starts, 0);
}

static void watching_on_a_loop_without_descriptor_watches_is_unsupported(void **state)
{
    (void)state;
    resil_loop_ops ops = full_ops;
    ops.size = offsetof(resil_loop_ops, io_start);
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &ops, NULL), 0);
    resil_io w = {.fn = on_ready};
    assert_int_equal(resil_loop_io_start(&l, &w, 3, RESIL_IO_READ), RESIL_EUNSUPPORTED);
}

static void a_good_watch_reaches_the_loop_with_only_read_and_write(void **state)
{
    (void)state;
    spy s = {0};
    resil_loop l;
    assert_int_equal(resil_loop_init(&l, &full_ops, &s), 0);
    resil_io w = {.fn = on_ready};
    assert_int_equal(resil_loop_io_start(&l, &w, 0, RESIL_IO_WRITE | RESIL_IO_ERROR), 0);
    assert_int_equal(s.io_starts, 1);
    assert_int_equal(s.fd, 0);
    assert_int_equal(s.events, RESIL_IO_WRITE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_loop_needs_itself_and_a_table),
        cmocka_unit_test(a_table_without_post_is_refused),
        cmocka_unit_test(a_table_that_does_not_reach_post_is_refused),
        cmocka_unit_test(a_table_that_ends_at_post_is_accepted),
        cmocka_unit_test(watching_for_no_events_is_refused_before_the_loop_is_asked),
        cmocka_unit_test(watching_a_negative_descriptor_is_refused_before_the_loop_is_asked),
        cmocka_unit_test(a_watch_without_a_callback_is_refused_before_the_loop_is_asked),
        cmocka_unit_test(watching_on_a_loop_without_descriptor_watches_is_unsupported),
        cmocka_unit_test(a_good_watch_reaches_the_loop_with_only_read_and_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
