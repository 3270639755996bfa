/*
 * test_occ.c — Brooker's OCC contention model: its invariants, the mapping
 * of his backoff formulas onto resil_backoff, and the published findings
 * (with fewer runs than the article, so the suite stays quick).
 */
#include <math.h>

#include "test.h"

#include "model.h"

static resil_sim_result run_policy(const char *policy, uint32_t clients, uint32_t runs,
                                   uint64_t seed)
{
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_OCC);
    c.clients = clients;
    c.runs = runs;
    c.seed = seed;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_policies_parse(policy, &c, &err), 0);
    resil_sim_result r;
    int rc = resil_sim_run(&c, &c.policies[0], NULL, NULL, &r, &err);
    if (rc != 0)
        fail_msg("%s", err.message);
    return r;
}

static void every_client_makes_exactly_one_successful_write(void **state)
{
    (void)state;
    const char *policies[] = {"none", "exponential", "full", "equal", "decorrelated"};
    for (size_t i = 0; i < 5; i++) {
        resil_sim_result r = run_policy(policies[i], 25, 5, 1);
        assert_near(r.successes_per_run, 25.0, 1e-9);
        assert_true(r.calls_per_run >= 25.0);
        assert_near(r.calls_per_client, r.calls_per_run / 25.0, 1e-9);
        resil_sim_result_free(&r);
    }
}

static void one_client_writes_once_without_contention(void **state)
{
    (void)state;
    resil_sim_result r = run_policy("exponential", 1, 10, 3);
    assert_near(r.calls_per_run, 1.0, 1e-9);
    /* Four messages of about 10 ms each. */
    assert_true(r.completion_ms > 20 && r.completion_ms < 60);
    resil_sim_result_free(&r);
}

/* Brooker's expo(n) = min(cap, base·2^n) with n = 1 at the first retry; ours
 * is base'·2^(n−1) with n = failed attempts: the same waits with base' =
 * 2·base. Decorrelated starts from base itself. */
static void brookers_backoff_maps_onto_resil_backoff(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_OCC);
    resil_sim_policy p;
    assert_int_equal(resil_sim_policy_parse("exponential", &p, NULL), 0);
    resil_backoff b;
    resil__sim_backoff(&c, &p, &b);
    assert_int_equal(b.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_int_equal(b.jitter, RESIL_JITTER_NONE);
    assert_duration_equal(resil_backoff_delay(&b, 1, NULL, NULL), RESIL_MS(10));
    assert_duration_equal(resil_backoff_delay(&b, 2, NULL, NULL), RESIL_MS(20));
    assert_duration_equal(resil_backoff_delay(&b, 8, NULL, NULL), RESIL_MS(1280));
    assert_duration_equal(resil_backoff_delay(&b, 9, NULL, NULL), RESIL_S(2));

    assert_int_equal(resil_sim_policy_parse("decorrelated", &p, NULL), 0);
    resil__sim_backoff(&c, &p, &b);
    assert_int_equal(b.jitter, RESIL_JITTER_DECORRELATED);
    assert_duration_equal(b.base, RESIL_MS(5));
    assert_duration_equal(b.max_delay, RESIL_S(2));

    assert_int_equal(resil_sim_policy_parse("none", &p, NULL), 0);
    resil__sim_backoff(&c, &p, &b);
    assert_duration_equal(resil_backoff_delay(&b, 5, NULL, NULL), 0);
}

static void the_same_seed_gives_the_same_figures(void **state)
{
    (void)state;
    resil_sim_result a = run_policy("full", 50, 3, 7);
    resil_sim_result b = run_policy("full", 50, 3, 7);
    resil_sim_result c = run_policy("full", 50, 3, 8);
    assert_true(a.calls_per_run == b.calls_per_run);
    assert_true(a.completion_ms == b.completion_ms);
    assert_true(a.events == b.events);
    assert_true(a.calls_per_run != c.calls_per_run || a.completion_ms != c.completion_ms);
    resil_sim_result_free(&a);
    resil_sim_result_free(&b);
    resil_sim_result_free(&c);
}

/* The published findings at 100 clients, over 10 runs per policy. */
typedef struct findings {
    resil_sim_result exponential, full, equal, decorrelated;
} findings;

static int run_findings(void **state)
{
    findings *f = malloc(sizeof *f);
    f->exponential = run_policy("exponential", 100, 10, 1);
    f->full = run_policy("full", 100, 10, 1);
    f->equal = run_policy("equal", 100, 10, 1);
    f->decorrelated = run_policy("decorrelated", 100, 10, 1);
    *state = f;
    return 0;
}

static int free_findings(void **state)
{
    findings *f = *state;
    resil_sim_result_free(&f->exponential);
    resil_sim_result_free(&f->full);
    resil_sim_result_free(&f->equal);
    resil_sim_result_free(&f->decorrelated);
    free(f);
    return 0;
}

static void full_jitter_needs_less_than_half_the_calls_of_plain_exponential(void **state)
{
    findings *f = *state;
    assert_true(f->full.calls_per_run < 0.5 * f->exponential.calls_per_run);
}

static void full_jitter_finishes_far_sooner_than_plain_exponential(void **state)
{
    findings *f = *state;
    assert_true(f->full.completion_ms < 0.25 * f->exponential.completion_ms);
}

static void equal_jitter_does_a_little_more_work_than_full(void **state)
{
    findings *f = *state;
    assert_true(f->equal.calls_per_run > f->full.calls_per_run);
    assert_true(f->equal.calls_per_run < 1.2 * f->full.calls_per_run);
}

static void decorrelated_is_about_as_fast_as_full_with_somewhat_more_calls(void **state)
{
    findings *f = *state;
    assert_true(fabs(f->decorrelated.completion_ms - f->full.completion_ms) <
                0.25 * f->full.completion_ms);
    assert_true(f->decorrelated.calls_per_run > f->full.calls_per_run);
    assert_true(f->decorrelated.calls_per_run < 1.5 * f->full.calls_per_run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_client_makes_exactly_one_successful_write),
        cmocka_unit_test(one_client_writes_once_without_contention),
        cmocka_unit_test(brookers_backoff_maps_onto_resil_backoff),
        cmocka_unit_test(the_same_seed_gives_the_same_figures),
    };
    const struct CMUnitTest published[] = {
        cmocka_unit_test(full_jitter_needs_less_than_half_the_calls_of_plain_exponential),
        cmocka_unit_test(full_jitter_finishes_far_sooner_than_plain_exponential),
        cmocka_unit_test(equal_jitter_does_a_little_more_work_than_full),
        cmocka_unit_test(decorrelated_is_about_as_fast_as_full_with_somewhat_more_calls),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("published_findings", published, run_findings,
                                          free_findings);
    return failed;
}
