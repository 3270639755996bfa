/*
 * test_stack.c — the service-stack scenarios: the amplification arithmetic
 * of nested retries (exact), the failover that a naive policy turns into an
 * incident, Bronson et al.'s metastable failure, which only defenses that
 * cut the retry volume recover from, and the brownout, where a dependency's
 * capacity halves and concurrency limits and throttling are compared.
 */
#include <math.h>

#include "test.h"

#include "model.h"

static resil_sim_result run(const resil_sim_config *c, const char *policy)
{
    resil_sim_config copy = *c;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_policies_parse(policy, &copy, &err), 0);
    resil_sim_result r;
    int rc = resil_sim_run(&copy, &copy.policies[0], NULL, NULL, &r, &err);
    if (rc != 0)
        fail_msg("%s: %s", policy, err.message);
    return r;
}

static double calls_for_one_request(uint32_t layers, uint32_t attempts, const char *policy,
                                    uint32_t budget_at)
{
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_LAYERS);
    c.layers = layers;
    c.attempts = attempts;
    c.requests = 1;
    c.budget_at = budget_at;
    resil_sim_result r = run(&c, policy);
    assert_int_equal(r.max_calls, (uint64_t)r.calls_per_request);
    double calls = r.calls_per_request;
    resil_sim_result_free(&r);
    return calls;
}

/* ---- layers ---------------------------------------------------------------- */

static void three_layers_of_four_attempts_make_64_calls(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(3, 4, "naive", RESIL_SIM_INNERMOST), 64, 0);
}

static void five_layers_of_three_attempts_make_243_calls(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(5, 3, "naive", RESIL_SIM_INNERMOST), 243, 0);
}

static void without_retries_a_request_makes_one_call(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(5, 3, "noretry", RESIL_SIM_INNERMOST), 1, 0);
}

/* gRPC tokens start at 10, every failure costs 1 and retrying needs more
 * than 5: the innermost layer's first execution makes 4 calls (tokens 9, 8,
 * 7 allow three retries; 6 after the fourth), the second fails at 5 and
 * stops. The other 14 of the 16 executions make 1 call: 4 + 1 + 14 = 19. */
static void a_token_budget_in_the_innermost_layer_cuts_64_to_19(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(3, 4, "tokens", RESIL_SIM_INNERMOST), 19, 0);
}

/* 81 innermost executions of up to 3 attempts: 3 calls (tokens 9, 8, then
 * exhausted at 7), 2 (6 allows, 5 denies), then 79 × 1 = 84. */
static void a_token_budget_in_the_innermost_of_five_layers_gives_84(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(5, 3, "tokens", RESIL_SIM_INNERMOST), 84, 0);
}

/* AWS quota 500 at 5 per retry pays for 100 retries: 81 first calls plus
 * 100 retries. */
static void a_quota_budget_in_the_innermost_of_five_layers_gives_181(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(5, 3, "quota", RESIL_SIM_INNERMOST), 181, 0);
}

/* Outermost budget: the outer layer's failures cost 1 token each (9, 8, 7
 * still allow a retry; the fourth attempt is the last anyway), so all 4
 * attempts run, each a full 4 × 4 below: one request alone never feels a
 * budget of 10 tokens at the top. */
static void a_token_budget_in_the_outermost_layer_does_not_bind_one_request(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(3, 4, "tokens", 1), 64, 0);
}

static void a_budget_in_one_layer_removes_that_layers_factor_in_steady_state(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_LAYERS);
    c.requests = 400;
    resil_sim_result r = run(&c, "tokens");
    /* 16 per request once the 5 spare tokens are spent. */
    assert_true(r.calls_per_request > 16 && r.calls_per_request < 16.1);
    resil_sim_result_free(&r);
}

/* Budgets in all three layers, each 10 tokens. Layer 2's first execution:
 * layer 3 makes 4 calls, then 1 each for layer 2's three retries (7 calls;
 * layer 2 left at 6 tokens). Each of layer 1's three retries then gets one
 * call from layer 2, whose failure leaves it at 5 or less: denied. 7 + 3. */
/* Four layers of 20 attempts waiting up to a day each take 300 years of
 * virtual time: the waits saturated at the largest instant, the retry
 * step then stopped the executions for a deadline nobody set, and the
 * run reported 132648 calls where every one of the 160000 is made. */
static void layers_whose_waits_pass_the_largest_instant_fail_saying_so(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_LAYERS);
    c.layers = 4;
    c.attempts = 20;
    c.base = RESIL_S(3600);
    c.cap = RESIL_S(86400);
    c.requests = 1;
    resil_err err = {0, ""};
    resil_sim_result r;
    assert_int_equal(resil_sim_run(&c, &c.policies[0], NULL, NULL, &r, &err), RESIL_ERANGE);
    assert_string_equal(err.message, "virtual time ran past 292 years; lower --requests, "
                                     "--layers, --attempts or --cap");
}

static void token_budgets_in_every_layer_cut_64_to_10(void **state)
{
    (void)state;
    assert_near(calls_for_one_request(3, 4, "tokens", 0), 10, 0);
}

/* ---- failover -------------------------------------------------------------- */

static resil_sim_config failover(void)
{
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_FAILOVER);
    c.clients = 200;
    c.capacity = 400;
    c.duration = RESIL_S(60);
    return c;
}

static void failover_with_naive_retries_stays_down_after_the_outage(void **state)
{
    (void)state;
    resil_sim_config c = failover();
    resil_sim_result r = run(&c, "naive");
    assert_int_equal(r.recovered_runs, 0);
    assert_true(r.mean_multiplier > 2);
    assert_true(r.after_multiplier > 2);
    assert_true(r.peak_multiplier >= r.mean_multiplier);
    resil_sim_result_free(&r);
}

static void failover_with_jitter_alone_still_stays_down(void **state)
{
    (void)state;
    resil_sim_config c = failover();
    resil_sim_result r = run(&c, "full");
    assert_int_equal(r.recovered_runs, 0);
    resil_sim_result_free(&r);
}

static void failover_with_a_token_budget_recovers_at_once(void **state)
{
    (void)state;
    resil_sim_config c = failover();
    resil_sim_result r = run(&c, "full+tokens");
    assert_int_equal(r.recovered_runs, 1);
    assert_near(r.recovery_s, 0, 0);
    assert_true(r.after_multiplier < 1.05);
    resil_sim_result_free(&r);
}

static void failover_without_retries_recovers_and_multiplies_nothing(void **state)
{
    (void)state;
    resil_sim_config c = failover();
    resil_sim_result r = run(&c, "noretry");
    assert_int_equal(r.recovered_runs, 1);
    assert_near(r.mean_multiplier, 1.0, 0.01);
    assert_near(r.peak_multiplier, 1.0, 0.02);
    resil_sim_result_free(&r);
}

static void failover_with_breakers_recovers(void **state)
{
    (void)state;
    resil_sim_config c = failover();
    resil_sim_result r = run(&c, "breaker");
    assert_int_equal(r.recovered_runs, 1);
    assert_true(r.mean_multiplier < 1);
    resil_sim_result_free(&r);
}

static void steady_load_is_exactly_clients_times_rate(void **state)
{
    (void)state;
    resil_sim_config c = failover();
    resil_sim_result r = run(&c, "noretry");
    for (size_t b = 1; b < r.series.nbins; b++)
        assert_near(r.series.arrivals[b], 200, 0);
    resil_sim_result_free(&r);
}

/* ---- metastable ------------------------------------------------------------ */

static resil_sim_config metastable(void)
{
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_METASTABLE);
    c.duration = RESIL_S(60);
    return c;
}

static void metastable_healthy_before_the_trigger(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "naive");
    for (size_t b = 1; b < 10; b++) {
        assert_near(r.series.goodput[b], 280, 1);
        assert_near(r.series.retries[b], 0, 0);
    }
    resil_sim_result_free(&r);
}

static void metastable_with_naive_retries_stays_failed_after_the_trigger(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "naive");
    assert_int_equal(r.recovered_runs, 0);
    /* Long after the trigger: double the offered load, no goodput. */
    for (size_t b = 40; b < r.series.nbins; b++) {
        assert_true(r.series.offered[b] >= 500);
        assert_near(r.series.goodput[b], 0, 0);
    }
    resil_sim_result_free(&r);
}

static void metastable_with_jitter_alone_stays_failed(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "full");
    assert_int_equal(r.recovered_runs, 0);
    resil_sim_result_free(&r);
}

static void metastable_recovers_with_a_token_budget(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "tokens");
    assert_int_equal(r.recovered_runs, 1);
    assert_true(r.recovery_s <= 2);
    for (size_t b = 30; b < r.series.nbins; b++)
        assert_near(r.series.goodput[b], 280, 1);
    resil_sim_result_free(&r);
}

static void metastable_recovers_with_a_ratio_budget(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "ratio");
    assert_int_equal(r.recovered_runs, 1);
    resil_sim_result_free(&r);
}

/* AWS's quota (500) pays for 50 retries after timeouts at once (10 each),
 * refills 1 per first-try success and refunds every retry that succeeds.
 * With 70 calls/s of headroom (230/s) the burst fits and the database
 * settles; with 20 (280/s) each refilled burst tips it over the cliff
 * again and it never does. */
static void metastable_recovers_with_a_quota_budget_when_its_burst_fits_the_headroom(
    void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    c.rate = 230;
    resil_sim_result r = run(&c, "quota");
    assert_int_equal(r.recovered_runs, 1);
    resil_sim_result_free(&r);
    c.rate = 280;
    r = run(&c, "quota");
    assert_int_equal(r.recovered_runs, 0);
    resil_sim_result_free(&r);
}

static void metastable_recovers_with_a_breaker(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "breaker");
    assert_int_equal(r.recovered_runs, 1);
    resil_sim_result_free(&r);
}

static void metastable_without_the_trigger_never_fails(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    c.outage = 0;
    resil_sim_result r = run(&c, "naive");
    assert_int_equal(r.recovered_runs, 1);
    assert_near(r.calls_per_request, 1.0, 0);
    resil_sim_result_free(&r);
}

static void the_same_seed_gives_the_same_series(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result a = run(&c, "full+tokens");
    resil_sim_result b = run(&c, "full+tokens");
    assert_int_equal(a.series.nbins, b.series.nbins);
    assert_memory_equal(a.series.offered, b.series.offered, a.series.nbins * sizeof(double));
    assert_memory_equal(a.series.retries, b.series.retries, a.series.nbins * sizeof(double));
    assert_true(a.events == b.events);
    resil_sim_result_free(&a);
    resil_sim_result_free(&b);
}

static void runs_are_averaged(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    c.runs = 3;
    resil_sim_result r = run(&c, "naive");
    assert_int_equal(r.runs, 3);
    assert_near(r.series.arrivals[5], 280, 1);
    assert_int_equal(r.recovered_runs, 0);
    resil_sim_result_free(&r);
}

/* Client-side throttling refuses locally once fewer than half the requests
 * are accepted over its window: the retries' load falls and the database
 * recovers, later than with a budget (the window remembers the storm). */
static void metastable_recovers_with_adaptive_throttling(void **state)
{
    (void)state;
    resil_sim_config c = metastable();
    resil_sim_result r = run(&c, "throttle");
    assert_int_equal(r.recovered_runs, 1);
    assert_true(r.recovery_s > 2 && r.recovery_s <= 30);
    for (size_t b = 55; b < r.series.nbins; b++)
        assert_true(r.series.goodput[b] >= 250);
    resil_sim_result_free(&r);
}

/* ---- brownout -------------------------------------------------------------- */

static resil_sim_result brownout(const char *policy)
{
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_BROWNOUT);
    return run(&c, policy);
}

/* 150 requests/s against 100/s of capacity: the best any policy can do in
 * the brownout is 100 requests/s. */
#define HALF_CAPACITY 100.0

static void brownout_without_a_limit_collapses_and_recovers_late(void **state)
{
    (void)state;
    resil_sim_result r = brownout("naive");
    assert_true(r.outage_goodput < 0.1 * HALF_CAPACITY); /* its queue outgrows the timeout */
    assert_int_equal(r.recovered_runs, 1);
    assert_true(r.recovery_s >= 20); /* the abandoned backlog drains first */
    resil_sim_result_free(&r);
}

static void brownout_a_static_limit_keeps_the_halved_capacity_busy(void **state)
{
    (void)state;
    resil_sim_result r = brownout("static");
    assert_true(r.outage_goodput >= 0.99 * HALF_CAPACITY);
    assert_near(r.p99_ms, 400, 1); /* 40 in flight at 100/s */
    assert_int_equal(r.recovered_runs, 1);
    assert_near(r.recovery_s, 0, 0);
    resil_sim_result_free(&r);
}

/* The gradient estimator keeps the goodput of the static limit with a
 * shorter queue. */
static void brownout_gradient_limit_matches_the_goodput_with_a_lower_p99(void **state)
{
    (void)state;
    resil_sim_result g = brownout("gradient"), s = brownout("static");
    assert_true(g.outage_goodput >= 0.99 * HALF_CAPACITY);
    assert_true(g.p99_ms < s.p99_ms);
    assert_near(g.recovery_s, 0, 0);
    resil_sim_result_free(&g);
    resil_sim_result_free(&s);
}

/* Vegas keeps the queue short and pays in goodput: it backs off further
 * than the halved capacity needs. */
static void brownout_vegas_limit_trades_goodput_for_latency(void **state)
{
    (void)state;
    resil_sim_result v = brownout("vegas"), s = brownout("static");
    assert_true(v.p99_ms < s.p99_ms);
    assert_true(v.outage_goodput < 0.9 * HALF_CAPACITY);
    assert_true(v.outage_goodput > 0.75 * HALF_CAPACITY);
    assert_int_equal(v.recovered_runs, 1);
    assert_true(v.recovery_s <= 3);
    resil_sim_result_free(&v);
    resil_sim_result_free(&s);
}

/* AIMD without a latency threshold learns only from drops (timeouts): it
 * grows its limit until the queue is long, as loss-based TCP fills buffers. */
static void brownout_aimd_limit_grows_the_queue_until_calls_time_out(void **state)
{
    (void)state;
    resil_sim_result a = brownout("aimd"), s = brownout("static");
    assert_true(a.outage_goodput >= 0.99 * HALF_CAPACITY);
    assert_true(a.p99_ms > s.p99_ms);
    resil_sim_result_free(&a);
    resil_sim_result_free(&s);
}

/* Throttling learns from refusals; a dependency that queues instead of
 * refusing answers with timeouts once its queue is already too long, and
 * two minutes of healthy history keep the throttle open meanwhile. */
static void brownout_throttling_does_not_protect_a_queueing_dependency(void **state)
{
    (void)state;
    resil_sim_result t = brownout("throttle"), n = brownout("naive");
    assert_true(t.outage_goodput < 0.1 * HALF_CAPACITY);
    assert_int_equal(t.recovered_runs, 1);
    assert_true(t.recovery_s > n.recovery_s);
    resil_sim_result_free(&t);
    resil_sim_result_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(three_layers_of_four_attempts_make_64_calls),
        cmocka_unit_test(five_layers_of_three_attempts_make_243_calls),
        cmocka_unit_test(without_retries_a_request_makes_one_call),
        cmocka_unit_test(a_token_budget_in_the_innermost_layer_cuts_64_to_19),
        cmocka_unit_test(a_token_budget_in_the_innermost_of_five_layers_gives_84),
        cmocka_unit_test(a_quota_budget_in_the_innermost_of_five_layers_gives_181),
        cmocka_unit_test(a_token_budget_in_the_outermost_layer_does_not_bind_one_request),
        cmocka_unit_test(a_budget_in_one_layer_removes_that_layers_factor_in_steady_state),
        cmocka_unit_test(token_budgets_in_every_layer_cut_64_to_10),
        cmocka_unit_test(layers_whose_waits_pass_the_largest_instant_fail_saying_so),
        cmocka_unit_test(failover_with_naive_retries_stays_down_after_the_outage),
        cmocka_unit_test(failover_with_jitter_alone_still_stays_down),
        cmocka_unit_test(failover_with_a_token_budget_recovers_at_once),
        cmocka_unit_test(failover_without_retries_recovers_and_multiplies_nothing),
        cmocka_unit_test(failover_with_breakers_recovers),
        cmocka_unit_test(steady_load_is_exactly_clients_times_rate),
        cmocka_unit_test(metastable_healthy_before_the_trigger),
        cmocka_unit_test(metastable_with_naive_retries_stays_failed_after_the_trigger),
        cmocka_unit_test(metastable_with_jitter_alone_stays_failed),
        cmocka_unit_test(metastable_recovers_with_a_token_budget),
        cmocka_unit_test(metastable_recovers_with_a_ratio_budget),
        cmocka_unit_test(metastable_recovers_with_a_quota_budget_when_its_burst_fits_the_headroom),
        cmocka_unit_test(metastable_recovers_with_a_breaker),
        cmocka_unit_test(metastable_without_the_trigger_never_fails),
        cmocka_unit_test(metastable_recovers_with_adaptive_throttling),
        cmocka_unit_test(brownout_without_a_limit_collapses_and_recovers_late),
        cmocka_unit_test(brownout_a_static_limit_keeps_the_halved_capacity_busy),
        cmocka_unit_test(brownout_gradient_limit_matches_the_goodput_with_a_lower_p99),
        cmocka_unit_test(brownout_vegas_limit_trades_goodput_for_latency),
        cmocka_unit_test(brownout_aimd_limit_grows_the_queue_until_calls_time_out),
        cmocka_unit_test(brownout_throttling_does_not_protect_a_queueing_dependency),
        cmocka_unit_test(the_same_seed_gives_the_same_series),
        cmocka_unit_test(runs_are_averaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
