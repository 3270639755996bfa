/*
 * test_retry_schedules.c — custom delay schedules and retrying on results:
 * a delay generator (Polly v8's DelayGenerator), a provider (Polly v7's
 * sleep-duration provider: the same function, never deferring), an
 * explicit list of waits (Polly v7's WaitAndRetry with a list), and a
 * classifier that sees successes too (ShouldHandle on a result). Every
 * run is on the fake clock, so each wait is stated exactly.
 */
#include "retry_fixture.h"

#define T0 RESIL_S(100)

typedef struct script {
    const resil_outcome *outcomes; /* in turn; the last repeats */
    size_t n;
    int calls;
} script;

static resil_outcome scripted(resil_attempt_ctx *ctx)
{
    script *s = ctx->user;
    size_t i = (size_t)s->calls < s->n ? (size_t)s->calls : s->n - 1;
    s->calls++;
    return s->outcomes[i];
}

typedef test_retry_fixture fixture;

static int setup(void **state)
{
    *state = test_retry_fixture_new(T0);
    return 0;
}

static int teardown(void **state)
{
    test_retry_fixture_free(*state);
    return 0;
}

static void run(fixture *f, script *s)
{
    assert_int_equal(resil_retry_execute(&f->policy, &f->opts, scripted, s, &f->result, NULL), 0);
}

static void assert_slept(fixture *f, const resil_duration *waits, size_t n)
{
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), n);
    for (size_t i = 0; i < n; i++)
        assert_duration_equal(resil_fake_clock_sleep_at(f->fc, i), waits[i]);
}

static const resil_outcome failing[] = {
    {.kind = RESIL_TRANSIENT, .code = 503, .retry_after = RESIL_NO_HINT, .detail = ""}};

/* ---- a delay generator ------------------------------------------------------ */

typedef struct seen {
    uint32_t attempts[8];
    int64_t codes[8];
    void *users[8];
    int calls;
} seen;

/* 250 ms after a 503, "use the backoff" after anything else. */
static resil_duration after_503(const resil_delay_info *info, void *ud)
{
    seen *s = ud;
    s->attempts[s->calls] = info->attempt;
    s->codes[s->calls] = info->outcome->code;
    s->users[s->calls] = info->ctx->user;
    s->calls++;
    return info->outcome->code == 503 ? RESIL_MS(250) : RESIL_DELAY_BACKOFF;
}

static void a_generator_chooses_each_wait_from_the_outcome(void **state)
{
    fixture *f = *state;
    seen g = {0};
    f->policy.delay = after_503;
    f->policy.delay_ud = &g;
    script s = {failing, 1, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    static const resil_duration waits[] = {RESIL_MS(250), RESIL_MS(250), RESIL_MS(250)};
    assert_slept(f, waits, 3);
    assert_int_equal(g.calls, 3);
    assert_int_equal(g.attempts[0], 1);
    assert_int_equal(g.attempts[2], 3);
    assert_int_equal(g.codes[1], 503);
    assert_ptr_equal(g.users[0], &s);
    assert_int_equal(f->records[0].source, RESIL_WAIT_GENERATOR);
    assert_string_equal(resil_wait_source_name(f->records[0].source), "generator");
}

static void a_generator_deferring_leaves_the_backoff(void **state)
{
    fixture *f = *state;
    seen g = {0};
    f->policy.delay = after_503;
    f->policy.delay_ud = &g;
    static const resil_outcome timeouts[] = {
        {.kind = RESIL_TIMEOUT, .code = 0, .retry_after = RESIL_NO_HINT, .detail = ""}};
    script s = {timeouts, 1, 0};
    run(f, &s);
    static const resil_duration waits[] = {RESIL_MS(100), RESIL_MS(200), RESIL_MS(400)};
    assert_slept(f, waits, 3);
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
}

static void a_generator_deferring_leaves_the_server_hint(void **state)
{
    fixture *f = *state;
    seen g = {0};
    f->policy.delay = after_503;
    f->policy.delay_ud = &g;
    static const resil_outcome throttled[] = {
        {.kind = RESIL_THROTTLED, .code = 429, .retry_after = RESIL_S(3), .detail = ""},
        {.kind = RESIL_SUCCESS, .code = 0, .retry_after = RESIL_NO_HINT, .detail = ""}};
    script s = {throttled, 2, 0};
    run(f, &s);
    static const resil_duration waits[] = {RESIL_S(3)};
    assert_slept(f, waits, 1);
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
}

static resil_duration five_minutes(const resil_delay_info *info, void *ud)
{
    (void)info;
    (void)ud;
    return RESIL_S(300);
}

static void a_generated_wait_is_not_capped_by_max_delay_but_stops_at_the_deadline(void **state)
{
    fixture *f = *state;
    f->policy.delay = five_minutes;
    f->policy.backoff.max_delay = RESIL_S(1);
    f->policy.max_total = RESIL_S(301);
    script s = {failing, 1, 0};
    run(f, &s);
    static const resil_duration waits[] = {RESIL_S(300)};
    assert_slept(f, waits, 1);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 2);
}

/* Polly v7's provider: the wait from the attempt number alone. */
static resil_duration provider(const resil_delay_info *info, void *ud)
{
    (void)ud;
    return RESIL_MS(150) * (resil_duration)info->attempt * info->attempt;
}

static void a_provider_gives_every_wait_from_the_attempt_number(void **state)
{
    fixture *f = *state;
    f->policy.delay = provider;
    script s = {failing, 1, 0};
    run(f, &s);
    static const resil_duration waits[] = {RESIL_MS(150), RESIL_MS(600), RESIL_MS(1350)};
    assert_slept(f, waits, 3);
}

static void a_generator_wait_draws_no_random_number(void **state)
{
    fixture *f = *state;
    resil_rng_scripted rng;
    static const double draws[] = {0.5};
    resil_rng_scripted_init(&rng, draws, 1);
    f->policy.delay = provider;
    f->policy.backoff.jitter = RESIL_JITTER_FULL;
    f->opts.rng = &rng.base;
    script s = {failing, 1, 0};
    run(f, &s);
    assert_int_equal(rng.i, 0);
}

/* ---- a list of waits ---------------------------------------------------------- */

static const resil_duration listed[] = {RESIL_S(1), RESIL_S(2), RESIL_S(5)};

static void a_list_gives_the_waits_in_order(void **state)
{
    fixture *f = *state;
    f->policy.backoff.kind = RESIL_BACKOFF_LIST;
    f->policy.backoff.delays = listed;
    f->policy.backoff.delays_len = 3;
    script s = {failing, 1, 0};
    run(f, &s);
    static const resil_duration waits[] = {RESIL_S(1), RESIL_S(2), RESIL_S(5)};
    assert_slept(f, waits, 3);
    assert_int_equal(f->result.attempts, 4);
    assert_int_equal(f->records[2].source, RESIL_WAIT_BACKOFF);
}

static void past_its_end_a_list_repeats_its_last_wait(void **state)
{
    fixture *f = *state;
    f->policy.max_attempts = 6;
    f->policy.backoff.kind = RESIL_BACKOFF_LIST;
    f->policy.backoff.delays = listed;
    f->policy.backoff.delays_len = 3;
    script s = {failing, 1, 0};
    run(f, &s);
    static const resil_duration waits[] = {RESIL_S(1), RESIL_S(2), RESIL_S(5), RESIL_S(5),
                                           RESIL_S(5)};
    assert_slept(f, waits, 5);
}

static void a_list_is_capped_by_max_delay(void **state)
{
    fixture *f = *state;
    f->policy.backoff.kind = RESIL_BACKOFF_LIST;
    f->policy.backoff.delays = listed;
    f->policy.backoff.delays_len = 3;
    f->policy.backoff.max_delay = RESIL_S(2);
    assert_duration_equal(resil_backoff_delay(&f->policy.backoff, 3, NULL, NULL), RESIL_S(2));
    assert_duration_equal(resil_backoff_max_delay(&f->policy.backoff, 1), RESIL_S(1));
}

static void a_list_takes_full_jitter_like_any_formula(void **state)
{
    fixture *f = *state;
    resil_rng_scripted rng;
    static const double draws[] = {0.5};
    resil_rng_scripted_init(&rng, draws, 1);
    f->policy.backoff.kind = RESIL_BACKOFF_LIST;
    f->policy.backoff.delays = listed;
    f->policy.backoff.delays_len = 3;
    f->policy.backoff.jitter = RESIL_JITTER_FULL;
    assert_duration_equal(resil_backoff_delay(&f->policy.backoff, 2, NULL, &rng.base),
                          RESIL_S(1));
}

static void a_list_must_hold_a_wait(void **state)
{
    fixture *f = *state;
    f->policy.backoff.kind = RESIL_BACKOFF_LIST;
    resil_err err;
    assert_int_equal(resil_retry_policy_validate(&f->policy, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "retry.backoff.delays must hold at least one wait with kind list");
}

static void a_listed_wait_must_not_be_negative(void **state)
{
    fixture *f = *state;
    static const resil_duration bad[] = {RESIL_S(1), -RESIL_MS(5)};
    f->policy.backoff.kind = RESIL_BACKOFF_LIST;
    f->policy.backoff.delays = bad;
    f->policy.backoff.delays_len = 2;
    resil_err err;
    assert_int_equal(resil_retry_policy_validate(&f->policy, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "retry.backoff.delays[1] must be >= 0, got -5ms");
}

static void the_list_kind_has_a_name(void **state)
{
    (void)state;
    resil_backoff_kind k;
    assert_string_equal(resil_backoff_kind_name(RESIL_BACKOFF_LIST), "list");
    assert_int_equal(resil_backoff_kind_parse("List", &k), 0);
    assert_int_equal(k, RESIL_BACKOFF_LIST);
}

/* ---- retrying on a result ----------------------------------------------------------- */

/* A success whose body says "pending" (code 202 here) is worth another try. */
static bool pending_or_transient(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    if (o->kind == RESIL_SUCCESS)
        return o->code == 202;
    return resil_retry_on_default(o, NULL);
}

static const resil_outcome pending_then_done[] = {
    {.kind = RESIL_SUCCESS, .code = 202, .retry_after = RESIL_NO_HINT, .detail = "pending"},
    {.kind = RESIL_TRANSIENT, .code = 503, .retry_after = RESIL_NO_HINT, .detail = ""},
    {.kind = RESIL_SUCCESS, .code = 200, .retry_after = RESIL_NO_HINT, .detail = "done"}};

static void a_result_the_classifier_retries_is_tried_again(void **state)
{
    fixture *f = *state;
    f->policy.retry_on = pending_or_transient;
    f->policy.retry_on_results = true;
    script s = {pending_then_done, 3, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 3);
    assert_int_equal(f->result.final.code, 200);
    static const resil_duration waits[] = {RESIL_MS(100), RESIL_MS(200)};
    assert_slept(f, waits, 2);
    assert_int_equal(f->records[0].stop, RESIL_STOP_NONE);
    assert_int_equal(f->records[0].outcome.code, 202);
}

static void without_retry_on_results_a_success_always_stops(void **state)
{
    fixture *f = *state;
    f->policy.retry_on = pending_or_transient;
    script s = {pending_then_done, 3, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.final.code, 202);
}

static void a_retried_result_that_runs_out_of_attempts_is_the_final_outcome(void **state)
{
    fixture *f = *state;
    f->policy.retry_on = pending_or_transient;
    f->policy.retry_on_results = true;
    f->policy.max_attempts = 2;
    script s = {pending_then_done, 1, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->result.attempts, 2);
    assert_int_equal(f->result.final.kind, RESIL_SUCCESS);
    assert_string_equal(f->result.final.detail, "pending");
}

static void the_default_classifier_never_retries_a_success(void **state)
{
    fixture *f = *state;
    f->policy.retry_on_results = true;
    script s = {pending_then_done, 3, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_generator_chooses_each_wait_from_the_outcome, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_generator_deferring_leaves_the_backoff, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_generator_deferring_leaves_the_server_hint, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_generated_wait_is_not_capped_by_max_delay_but_stops_at_the_deadline, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_provider_gives_every_wait_from_the_attempt_number,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_generator_wait_draws_no_random_number, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_list_gives_the_waits_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(past_its_end_a_list_repeats_its_last_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_list_is_capped_by_max_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(a_list_takes_full_jitter_like_any_formula, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_list_must_hold_a_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(a_listed_wait_must_not_be_negative, setup, teardown),
        cmocka_unit_test(the_list_kind_has_a_name),
        cmocka_unit_test_setup_teardown(a_result_the_classifier_retries_is_tried_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(without_retry_on_results_a_success_always_stops, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_retried_result_that_runs_out_of_attempts_is_the_final_outcome, setup, teardown),
        cmocka_unit_test_setup_teardown(the_default_classifier_never_retries_a_success, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
