/*
 * test_chaos.c — the chaos decision on its own: options and their
 * validation, the rate checked draw by draw with a scripted source, the
 * switch (a disabled strategy spends no draw), a seeded strategy replaying
 * its decisions exactly, and the switch flipped from another thread.
 * Injections inside a pipeline are in test_pipeline_chaos.c.
 */
#include <pthread.h>

#include "test.h"

static resil_chaos *make(resil_chaos_opts *o)
{
    resil_chaos *c = NULL;
    resil_err err = {0, ""};
    if (resil_chaos_new(o, &c, &err) != 0)
        fail_msg("chaos: %s", err.message);
    return c;
}

static void expect_invalid(const resil_chaos_opts *o, const char *message)
{
    resil_chaos *c = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_chaos_new(o, &c, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(c);
}

static void defaults_are_pollys_rate_enabled_and_one_second_of_latency(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_LATENCY);
    assert_int_equal(o.kind, RESIL_CHAOS_LATENCY);
    assert_true(o.rate == 0.001);
    assert_true(o.enabled);
    assert_int_equal(o.seed, 0);
    assert_null(o.rng);
    assert_duration_equal(o.latency, RESIL_S(1));
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    assert_int_equal(o.outcome.kind, RESIL_TRANSIENT);
    assert_string_equal(o.outcome.detail, "injected fault");
    resil_chaos_opts_default(&o, RESIL_CHAOS_OUTCOME);
    assert_string_equal(o.outcome.detail, "injected outcome");
}

static void bad_options_are_refused_by_name(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 1.5;
    expect_invalid(&o, "chaos.rate must be in [0, 1], got 1.5");
    o.rate = -0.1;
    expect_invalid(&o, "chaos.rate must be in [0, 1], got -0.1");
    o.rate = NAN;
    expect_invalid(&o, "chaos.rate must be in [0, 1], got nan");
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.outcome = resil_ok();
    expect_invalid(&o, "chaos.outcome of a fault must be a failure");
    resil_chaos_opts_default(&o, RESIL_CHAOS_LATENCY);
    o.latency = 0;
    expect_invalid(&o, "chaos.latency must be > 0, got 0s");
    resil_chaos_opts_default(&o, RESIL_CHAOS_BEHAVIOR);
    expect_invalid(&o, "chaos.behavior must not be NULL");
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.kind = (resil_chaos_kind)7;
    expect_invalid(&o, "chaos.kind must be fault, outcome, latency or behavior, got 7");
}

static void validating_needs_the_options(void **state)
{
    (void)state;
    resil_err err = {0, ""};
    assert_int_equal(resil_chaos_opts_validate(NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "chaos: options must not be NULL");
}

static void making_one_needs_out(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    resil_err err = {0, ""};
    assert_int_equal(resil_chaos_new(&o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "chaos: out must not be NULL");
}

static void a_call_is_injected_when_its_draw_is_below_the_rate(void **state)
{
    (void)state;
    static const double draws[] = {0.05, 0.3, 0.2, 0.19999, 0.0, 0.99};
    resil_rng_scripted rng;
    resil_rng_scripted_init(&rng, draws, 6);
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.2;
    o.rng = &rng.base;
    resil_chaos *c = make(&o);
    static const bool expected[] = {true, false, false, true, true, false};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(resil_chaos_decide(c), expected[i]);
    assert_int_equal(resil_chaos_decisions(c), 6);
    assert_int_equal(resil_chaos_injected(c), 3);
    resil_chaos_free(c);
}

static void rate_zero_never_injects_and_rate_one_always_does(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.seed = 7;
    o.rate = 0;
    resil_chaos *c = make(&o);
    for (int i = 0; i < 1000; i++)
        assert_false(resil_chaos_decide(c));
    assert_int_equal(resil_chaos_set_rate(c, 1.0), 0);
    for (int i = 0; i < 1000; i++)
        assert_true(resil_chaos_decide(c));
    assert_int_equal(resil_chaos_injected(c), 1000);
    resil_chaos_free(c);
}

static void a_disabled_strategy_spends_no_draw(void **state)
{
    (void)state;
    static const double draws[] = {0.9, 0.1};
    resil_rng_scripted rng;
    resil_rng_scripted_init(&rng, draws, 2);
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.5;
    o.enabled = false;
    o.rng = &rng.base;
    resil_chaos *c = make(&o);
    assert_false(resil_chaos_enabled(c));
    assert_false(resil_chaos_decide(c));
    assert_false(resil_chaos_decide(c));
    assert_int_equal(resil_chaos_decisions(c), 0);
    resil_chaos_enable(c, true);
    assert_false(resil_chaos_decide(c)); /* 0.9: the script's first value */
    assert_true(resil_chaos_decide(c));  /* 0.1 */
    resil_chaos_free(c);
}

static void the_rate_can_change_while_running_and_a_bad_one_is_refused(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    resil_chaos *c = make(&o);
    assert_int_equal(resil_chaos_set_rate(c, 0.25), 0);
    assert_true(resil_chaos_rate(c) == 0.25);
    assert_int_equal(resil_chaos_set_rate(c, 2.0), RESIL_ERANGE);
    assert_true(resil_chaos_rate(c) == 0.25);
    resil_chaos_opts got;
    resil_chaos_opts_get(c, &got);
    assert_true(got.rate == 0.25);
    resil_chaos_free(c);
}

static void a_seeded_strategy_replays_its_decisions_exactly(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.3;
    o.seed = 42;
    resil_chaos *a = make(&o), *b = make(&o);
    char first[21] = {0};
    for (int i = 0; i < 2000; i++) {
        bool x = resil_chaos_decide(a);
        assert_int_equal(x, resil_chaos_decide(b));
        if (i < 20)
            first[i] = x ? 'x' : '.';
    }
    /* Pinned (and computed independently from the splitmix64 finalizer): the
     * same in every run, on every machine. */
    assert_string_equal(first, ".xx.x.x...x....xx.x.");
    assert_int_equal(resil_chaos_injected(a), 586);
    resil_chaos_free(a);
    resil_chaos_free(b);
}

static void *switch_off(void *c)
{
    resil_chaos_enable(c, false);
    return NULL;
}

static void the_switch_flips_from_another_thread(void **state)
{
    (void)state;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 1.0;
    o.seed = 1;
    resil_chaos *c = make(&o);
    assert_true(resil_chaos_decide(c));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, switch_off, c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_false(resil_chaos_decide(c));
    assert_int_equal(resil_chaos_decisions(c), 1);
    resil_chaos_free(c);
}

static void kinds_have_names_that_parse_back(void **state)
{
    (void)state;
    assert_string_equal(resil_chaos_kind_name(RESIL_CHAOS_BEHAVIOR), "behavior");
    assert_int_equal(resil_chaos_kind_parse("Latency"), RESIL_CHAOS_LATENCY);
    assert_int_equal(resil_chaos_kind_parse("fault"), RESIL_CHAOS_FAULT);
    assert_int_equal(resil_chaos_kind_parse("chaos"), -1);
    assert_string_equal(resil_chaos_kind_name((resil_chaos_kind)9), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_pollys_rate_enabled_and_one_second_of_latency),
        cmocka_unit_test(bad_options_are_refused_by_name),
        cmocka_unit_test(validating_needs_the_options),
        cmocka_unit_test(making_one_needs_out),
        cmocka_unit_test(a_call_is_injected_when_its_draw_is_below_the_rate),
        cmocka_unit_test(rate_zero_never_injects_and_rate_one_always_does),
        cmocka_unit_test(a_disabled_strategy_spends_no_draw),
        cmocka_unit_test(the_rate_can_change_while_running_and_a_bad_one_is_refused),
        cmocka_unit_test(a_seeded_strategy_replays_its_decisions_exactly),
        cmocka_unit_test(the_switch_flips_from_another_thread),
        cmocka_unit_test(kinds_have_names_that_parse_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
