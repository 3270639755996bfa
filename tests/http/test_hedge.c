/*
 * test_hedge.c — hedged GETs: a second easy handle races a slow first one
 * and its answer is the one the caller gets. These tests run on the system
 * clock with short real delays, because the race is between two real
 * connections to the server: the primary's request must reach the server
 * first (and get the slow step) before the hedge's does.
 */
#include "http_fixture.h"

static void hedge_setup_opts(fx *f)
{
    f->opts.clock = NULL; /* the race is real */
    f->opts.hedge_delay = RESIL_MS(100);
}

static void a_slow_get_is_answered_by_its_hedge(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    fx_script(f, "/h", FX_STEPS({.status = 200, .delay_ms = 1500, .body = "slow\n"},
                                {.status = 200, .body = "fast\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_string_equal(f->body.p, "fast\n");
    assert_int_equal(f->res.hedges, 1);
    assert_int_equal(f->res.hedge_winner, 1);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(fx_count(f, "/h"), 2);
}

static void a_fast_get_starts_no_hedge(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    fx_script(f, "/h", FX_STEPS({.status = 200, .body = "first\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_string_equal(f->body.p, "first\n");
    assert_int_equal(f->res.hedges, 0);
    assert_int_equal(f->res.hedge_winner, 0);
    assert_int_equal(fx_count(f, "/h"), 1);
}

static void a_failed_primary_is_hedged_at_once(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    f->opts.hedge_delay = RESIL_S(20);
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/h", FX_STEPS({.status = 503, .body = "down\n"}, {.status = 200, .body = "up\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_string_equal(f->body.p, "up\n");
    assert_int_equal(f->res.hedge_winner, 1);
    assert_int_equal(fx_count(f, "/h"), 2);
}

static void post_is_never_hedged(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/h", FX_STEPS({.status = 200, .delay_ms = 300, .body = "slow\n"},
                                {.status = 200, .body = "fast\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_string_equal(f->body.p, "slow\n");
    assert_int_equal(f->res.hedges, 0);
    assert_int_equal(fx_count(f, "/h"), 1);
}

static void the_losing_handle_leaves_the_callers_handle_usable(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    fx_script(f, "/h", FX_STEPS({.status = 200, .delay_ms = 1500, .body = "slow\n"},
                                {.status = 200, .body = "fast\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    fx_script(f, "/again", FX_STEPS({.status = 200, .body = "again\n"}));
    assert_int_equal(fx_perform(f, "/again"), 0);
    assert_string_equal(f->body.p, "again\n");
    assert_int_equal(f->res.hedge_winner, 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(a_slow_get_is_answered_by_its_hedge),
        T(a_fast_get_starts_no_hedge),
        T(a_failed_primary_is_hedged_at_once),
        T(post_is_never_hedged),
        T(the_losing_handle_leaves_the_callers_handle_usable),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
