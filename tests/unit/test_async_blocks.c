/*
 * test_async_blocks.c — the memory an asynchronous execution runs in.
 * An execution's block goes back to its loop when it ends and serves the
 * next one; a block laid out for one pipeline keeps its levels for the
 * next execution of that pipeline, and is laid out again for any other,
 * including a pipeline built at the address of one freed since. Each
 * execution here must end exactly as it would in a fresh block.
 */
#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)

typedef struct world {
    resil_fake_clock *fc;
    virtual_loop vl;
} world;

typedef struct run {
    uint32_t fail_first; /* attempts that fail before one succeeds */
    int ended;
    resil_pipeline_result res;
} run;

static void world_open(world *w)
{
    assert_int_equal(resil_fake_clock_new(T0, 0, &w->fc), 0);
    virtual_loop_init(&w->vl, w->fc);
}

static void world_close(world *w)
{
    resil_loop_drain(&w->vl.loop);
    virtual_loop_destroy(&w->vl);
    resil_fake_clock_free(w->fc);
}

/* A total timeout of 10 s around two attempts of 2 s each. */
static resil_pipeline *timeouts_around_a_retry(world *w)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("timeouts around a retry", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&w->vl.loop));
    test_add_total_timeout(b, RESIL_S(10));
    test_add_retry_constant(b, 2, RESIL_S(1));
    test_add_attempt_timeout(b, RESIL_S(2));
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    return p;
}

static resil_outcome cached(const resil_fallback_info *info, void *user, void *ud)
{
    (void)info, (void)user, (void)ud;
    return resil_fail(RESIL_KIND_USER, 7, "cached");
}

/* A fallback around three attempts: other kinds at each level, and fewer
 * levels, so that its executions fit in the other pipeline's blocks. */
static resil_pipeline *fallback_around_a_retry(world *w)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("fallback around a retry", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&w->vl.loop));
    resil_fallback_opts f;
    resil_fallback_opts_default(&f);
    f.action = cached;
    assert_int_equal(resil_pipeline_add_fallback(b, &f), 0);
    test_add_retry_constant(b, 3, RESIL_S(1));
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    return p;
}

static void op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    run *r = ctx->user;
    resil_outcome o = ctx->attempt <= r->fail_first ? resil_fail(RESIL_TRANSIENT, 503, "busy")
                                                    : resil_ok();
    resil_attempt_done(a, &o);
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    run *r = ud;
    r->res = *res;
    r->ended++;
}

/* `p` run to its end on the world's loop, its attempts failing
 * `fail_first` times. */
static run run_on(world *w, const resil_pipeline *p, uint32_t fail_first)
{
    run r = {.fail_first = fail_first};
    resil_call call;
    resil_call_default(&call);
    call.user = &r;
    assert_int_equal(resil_pipeline_start(p, &w->vl.loop, op, &call, ended, &r, NULL), 0);
    virtual_loop_run(&w->vl, NULL);
    assert_int_equal(r.ended, 1);
    return r;
}

static void assert_ended(const run *r, uint32_t attempts, resil_kind kind, int code,
                         resil_stop stop)
{
    assert_int_equal(r->res.attempts, attempts);
    assert_int_equal(r->res.outcome.kind, kind);
    assert_int_equal(r->res.outcome.code, code);
    assert_int_equal(r->res.stop, stop);
}

static void executions_of_two_pipelines_take_turns_in_the_loops_blocks(void **state)
{
    (void)state;
    world w;
    world_open(&w);
    resil_pipeline *a = timeouts_around_a_retry(&w);
    resil_pipeline *b = fallback_around_a_retry(&w);
    for (int round = 0; round < 3; round++) {
        run ra = run_on(&w, a, 1);
        assert_ended(&ra, 2, RESIL_SUCCESS, 0, RESIL_STOP_SUCCEEDED);
        run rb = run_on(&w, b, 3); /* every attempt fails: the fallback answers */
        assert_ended(&rb, 3, RESIL_KIND_USER, 7, RESIL_STOP_ATTEMPTS_EXHAUSTED);
        run ra_again = run_on(&w, a, 0);
        assert_ended(&ra_again, 1, RESIL_SUCCESS, 0, RESIL_STOP_SUCCEEDED);
    }
    resil_pipeline_free(a);
    resil_pipeline_free(b);
    world_close(&w);
}

/* The second pipeline is built where the first was, as a rule (the same
 * size freed just before): its executions must not take the block's
 * levels for the first's. */
static void a_pipeline_built_where_a_freed_one_was_gets_its_own_levels(void **state)
{
    (void)state;
    world w;
    world_open(&w);
    resil_pipeline *a = timeouts_around_a_retry(&w);
    run ra = run_on(&w, a, 1);
    assert_ended(&ra, 2, RESIL_SUCCESS, 0, RESIL_STOP_SUCCEEDED);
    resil_pipeline_free(a);
    resil_pipeline *b = fallback_around_a_retry(&w);
    run rb = run_on(&w, b, 3);
    assert_ended(&rb, 3, RESIL_KIND_USER, 7, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    run rb_again = run_on(&w, b, 1);
    assert_ended(&rb_again, 2, RESIL_SUCCESS, 0, RESIL_STOP_SUCCEEDED);
    resil_pipeline_free(b);
    world_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(executions_of_two_pipelines_take_turns_in_the_loops_blocks),
        cmocka_unit_test(a_pipeline_built_where_a_freed_one_was_gets_its_own_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
