/*
 * test_timeout.c — deadlines: what an operation learns from its context,
 * how a deadline fires when observed, the per-operation table, and the two
 * timeout strategies alone on the fake clock.
 */
#include "test.h"

#define T0 RESIL_S(100)

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
    resil_cancel token;
    resil_attempt_ctx ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(T0, 0, &f->fc), 0);
    f->clock = resil_fake_clock_clock(f->fc);
    assert_int_equal(resil_cancel_init(&f->token, NULL), 0);
    f->ctx.attempt = 1;
    f->ctx.deadline = T0 + RESIL_S(2);
    f->ctx.cancel = &f->token;
    f->ctx.clock = f->clock;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_cancel_destroy(&f->token);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

/* ---- the context accessors ---------------------------------------------- */

static void remaining_counts_down_to_zero_and_stays_there(void **state)
{
    fixture *f = *state;
    assert_duration_equal(resil_ctx_remaining(&f->ctx), RESIL_S(2));
    resil_fake_clock_advance(f->fc, RESIL_MS(1500));
    assert_duration_equal(resil_ctx_remaining(&f->ctx), RESIL_MS(500));
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    assert_duration_equal(resil_ctx_remaining(&f->ctx), 0);
}

static void no_deadline_means_unbounded_remaining(void **state)
{
    fixture *f = *state;
    f->ctx.deadline = RESIL_INSTANT_MAX;
    assert_duration_equal(resil_ctx_remaining(&f->ctx), RESIL_DURATION_MAX);
    assert_int_equal(resil_ctx_remaining_ms(&f->ctx), 0);
    f->ctx.deadline = 0; /* a zeroed context: no deadline either */
    assert_duration_equal(resil_ctx_remaining(&f->ctx), RESIL_DURATION_MAX);
    assert_duration_equal(resil_ctx_remaining(NULL), RESIL_DURATION_MAX);
}

static void remaining_ms_rounds_up_and_never_says_zero_for_a_passed_deadline(void **state)
{
    fixture *f = *state;
    f->ctx.deadline = T0 + RESIL_US(1500);
    assert_int_equal(resil_ctx_remaining_ms(&f->ctx), 2);
    f->ctx.deadline = T0 + RESIL_MS(7);
    assert_int_equal(resil_ctx_remaining_ms(&f->ctx), 7);
    resil_fake_clock_advance(f->fc, RESIL_S(1));
    assert_int_equal(resil_ctx_remaining_ms(&f->ctx), 1);
}

static void check_is_quiet_before_the_deadline(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_ctx_check(&f->ctx), 0);
    assert_false(resil_cancel_fired(&f->token));
}

static void check_fires_the_token_with_timedout_once_the_deadline_passed(void **state)
{
    fixture *f = *state;
    resil_fake_clock_advance(f->fc, RESIL_S(2));
    assert_int_equal(resil_ctx_check(&f->ctx), RESIL_ETIMEDOUT);
    assert_true(resil_cancel_fired(&f->token));
    assert_int_equal(resil_cancel_reason(&f->token), RESIL_ETIMEDOUT);
    assert_int_equal(resil_ctx_check(&f->ctx), RESIL_ETIMEDOUT);
}

static void check_reports_a_plain_cancel_as_cancelled(void **state)
{
    fixture *f = *state;
    resil_cancel_fire(&f->token);
    assert_int_equal(resil_ctx_check(&f->ctx), RESIL_ECANCELED);
}

static void sleep_ends_at_the_deadline_and_fires_it(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_ctx_sleep(&f->ctx, RESIL_S(60)), RESIL_ETIMEDOUT);
    assert_int_equal(resil_fake_clock_now(f->fc), T0 + RESIL_S(2));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(2));
    assert_int_equal(resil_cancel_reason(&f->token), RESIL_ETIMEDOUT);
}

static void sleep_shorter_than_the_deadline_is_a_plain_sleep(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_ctx_sleep(&f->ctx, RESIL_MS(500)), 0);
    assert_int_equal(resil_fake_clock_now(f->fc), T0 + RESIL_MS(500));
    assert_false(resil_cancel_fired(&f->token));
}

static void sleep_on_a_cancelled_token_returns_cancelled(void **state)
{
    fixture *f = *state;
    resil_cancel_fire(&f->token);
    assert_int_equal(resil_ctx_sleep(&f->ctx, RESIL_MS(500)), RESIL_ECANCELED);
}

static void sleep_without_a_token_still_ends_at_the_deadline(void **state)
{
    fixture *f = *state;
    f->ctx.cancel = NULL;
    assert_int_equal(resil_ctx_sleep(&f->ctx, RESIL_S(5)), RESIL_ETIMEDOUT);
    assert_int_equal(resil_ctx_check(&f->ctx), RESIL_ETIMEDOUT);
    assert_int_equal(resil_ctx_sleep(NULL, 1), RESIL_EINVAL);
}

/* ---- the table ------------------------------------------------------------ */

static void table_answers_the_default_for_unknown_operations(void **state)
{
    (void)state;
    resil_timeouts *t;
    assert_int_equal(resil_timeouts_new(RESIL_TIMEOUT_DEFAULT, &t, NULL), 0);
    assert_duration_equal(resil_timeouts_get(t, "GetUser"), RESIL_S(30));
    assert_duration_equal(resil_timeouts_get(t, NULL), RESIL_S(30));
    assert_duration_equal(resil_timeouts_default(t), RESIL_S(30));
    assert_int_equal(resil_timeouts_count(t), 0);
    resil_timeouts_free(t);
    assert_duration_equal(resil_timeouts_get(NULL, "x"), RESIL_TIMEOUT_DEFAULT);
}

static void table_keeps_one_timeout_per_operation_and_replaces_it(void **state)
{
    (void)state;
    resil_timeouts *t;
    assert_int_equal(resil_timeouts_new(RESIL_S(30), &t, NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "search", RESIL_MS(800), NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "export", RESIL_S(120), NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "auth", RESIL_S(2), NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "search", RESIL_S(1), NULL), 0);
    assert_int_equal(resil_timeouts_count(t), 3);
    assert_duration_equal(resil_timeouts_get(t, "search"), RESIL_S(1));
    assert_duration_equal(resil_timeouts_get(t, "export"), RESIL_S(120));
    assert_duration_equal(resil_timeouts_get(t, "auth"), RESIL_S(2));
    assert_int_equal(resil_timeouts_remove(t, "auth"), 0);
    assert_int_equal(resil_timeouts_remove(t, "auth"), RESIL_ENOTFOUND);
    assert_duration_equal(resil_timeouts_get(t, "auth"), RESIL_S(30));
    resil_timeouts_free(t);
}

static void table_rejects_bad_entries_by_name(void **state)
{
    (void)state;
    resil_err err = {0, ""};
    resil_timeouts *t;
    assert_int_equal(resil_timeouts_new(0, &t, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "timeouts.default must be > 0, got 0s");
    assert_int_equal(resil_timeouts_new(RESIL_S(1), NULL, &err), RESIL_EINVAL);
    assert_int_equal(resil_timeouts_new(RESIL_S(1), &t, NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "x", -RESIL_S(1), &err), RESIL_EINVAL);
    assert_string_equal(err.message, "timeouts.timeout must be > 0, got -1s");
    assert_int_equal(resil_timeouts_set(t, "", RESIL_S(1), &err), RESIL_EINVAL);
    assert_string_equal(err.message, "timeouts: operation name must not be empty");
    char longname[RESIL_TIMEOUTS_NAME_MAX + 1];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(resil_timeouts_set(t, longname, RESIL_S(1), &err), RESIL_EINVAL);
    longname[RESIL_TIMEOUTS_NAME_MAX - 1] = '\0';
    assert_int_equal(resil_timeouts_set(t, longname, RESIL_S(1), &err), 0);
    assert_int_equal(resil_timeouts_set(NULL, "x", RESIL_S(1), &err), RESIL_EINVAL);
    resil_timeouts_free(t);
}

static void an_operation_name_of_128_bytes_is_refused_by_name(void **state)
{
    (void)state;
    resil_timeouts *t;
    assert_int_equal(resil_timeouts_new(RESIL_S(1), &t, NULL), 0);
    char name[RESIL_TIMEOUTS_NAME_MAX + 1];
    memset(name, 'a', RESIL_TIMEOUTS_NAME_MAX);
    name[RESIL_TIMEOUTS_NAME_MAX] = '\0';
    resil_err err = {0, ""};
    assert_int_equal(resil_timeouts_set(t, name, RESIL_S(1), &err), RESIL_EINVAL);
    assert_string_equal(err.message, "timeouts: operation name must be shorter than 128 bytes, "
                                     "got 128");
    assert_int_equal(resil_timeouts_count(t), 0);
    resil_timeouts_free(t);
}

static void removing_needs_a_table_and_a_name(void **state)
{
    (void)state;
    resil_timeouts *t;
    assert_int_equal(resil_timeouts_new(RESIL_S(1), &t, NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "auth", RESIL_S(2), NULL), 0);
    assert_int_equal(resil_timeouts_remove(NULL, "auth"), RESIL_EINVAL);
    assert_int_equal(resil_timeouts_remove(t, NULL), RESIL_EINVAL);
    assert_int_equal(resil_timeouts_count(t), 1);
    resil_timeouts_free(t);
}

static void timeout_options_default_to_thirty_seconds_and_reject_zero(void **state)
{
    (void)state;
    resil_timeout_opts o;
    resil_timeout_opts_default(&o);
    assert_duration_equal(o.timeout, RESIL_S(30));
    assert_null(o.per_operation);
    resil_err err = {0, ""};
    assert_int_equal(resil_timeout_opts_validate(&o, "total_timeout", &err), 0);
    o.timeout = 0;
    assert_int_equal(resil_timeout_opts_validate(&o, "total_timeout", &err), RESIL_EINVAL);
    assert_string_equal(err.message, "total_timeout.timeout must be > 0, got 0s");
    o.timeout = -RESIL_MS(5);
    assert_int_equal(resil_timeout_opts_validate(&o, "attempt_timeout", &err), RESIL_EINVAL);
    assert_string_equal(err.message, "attempt_timeout.timeout must be > 0, got -5ms");
    assert_int_equal(resil_timeout_opts_validate(NULL, "x", &err), RESIL_EINVAL);
}

/* ---- the strategies alone ------------------------------------------------------ */

typedef struct op_state {
    resil_fake_clock *fc;
    int mode; /* 0 poll until told to stop, 1 sleep 60 s, 2 ignore and succeed late,
                 3 ignore and fail late */
    int calls;
    resil_instant deadline_seen;
} op_state;

static resil_outcome slow_op(resil_attempt_ctx *ctx)
{
    op_state *s = ctx->user;
    s->calls++;
    s->deadline_seen = ctx->deadline;
    switch (s->mode) {
    case 0:
        while (resil_ctx_check(ctx) == 0)
            resil_fake_clock_advance(s->fc, RESIL_MS(100));
        return resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "gave up");
    case 1:
        if (resil_ctx_sleep(ctx, RESIL_S(60)) != 0)
            return resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "gave up");
        return resil_ok();
    case 2:
        resil_fake_clock_advance(s->fc, RESIL_S(60));
        return resil_ok();
    default:
        resil_fake_clock_advance(s->fc, RESIL_S(60));
        return resil_fail(RESIL_PERMANENT, 404, "late");
    }
}

static resil_pipeline *timeout_pipeline(fixture *f, bool total, resil_duration t,
                                        const resil_timeouts *table)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("t", &b, NULL), 0);
    resil_pipeline_builder_clock(b, f->clock);
    resil_timeout_opts o;
    resil_timeout_opts_default(&o);
    o.timeout = t;
    o.per_operation = table;
    if (total)
        resil_pipeline_add_total_timeout(b, &o);
    else
        resil_pipeline_add_attempt_timeout(b, &o);
    resil_pipeline *p;
    resil_err err;
    if (resil_pipeline_build(b, &p, &err) != 0)
        fail_msg("%s", err.message);
    resil_pipeline_builder_free(b);
    return p;
}

static resil_pipeline_result run_op(resil_pipeline *p, op_state *s, const char *operation)
{
    resil_call c;
    resil_call_default(&c);
    c.user = s;
    c.operation = operation;
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(p, slow_op, &c, &r), 0);
    return r;
}

static void attempt_timeout_turns_a_polling_give_up_into_a_timeout(void **state)
{
    fixture *f = *state;
    resil_pipeline *p = timeout_pipeline(f, false, RESIL_S(1), NULL);
    op_state s = {f->fc, 0, 0, 0};
    resil_pipeline_result r = run_op(p, &s, NULL);
    assert_int_equal(r.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(r.outcome.code, RESIL_ETIMEDOUT);
    assert_string_equal(r.outcome.detail, "attempt timeout (1s) elapsed");
    assert_int_equal(s.deadline_seen, T0 + RESIL_S(1));
    assert_duration_equal(r.elapsed, RESIL_S(1));
    resil_pipeline_free(p);
}

static void attempt_timeout_ends_a_sleeping_operation_at_the_deadline(void **state)
{
    fixture *f = *state;
    resil_pipeline *p = timeout_pipeline(f, false, RESIL_MS(250), NULL);
    op_state s = {f->fc, 1, 0, 0};
    resil_pipeline_result r = run_op(p, &s, NULL);
    assert_int_equal(r.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(r.outcome.code, RESIL_ETIMEDOUT);
    assert_string_equal(r.outcome.detail, "attempt timeout (250ms) elapsed");
    assert_int_equal(s.calls, 1);
    assert_int_equal(resil_fake_clock_now(f->fc), T0 + RESIL_MS(250));
    assert_duration_equal(r.elapsed, RESIL_MS(250));
    resil_pipeline_free(p);
}

static void late_success_of_an_operation_that_ignores_the_deadline_is_kept(void **state)
{
    fixture *f = *state;
    resil_pipeline *p = timeout_pipeline(f, false, RESIL_S(1), NULL);
    op_state s = {f->fc, 2, 0, 0};
    resil_pipeline_result r = run_op(p, &s, NULL);
    assert_int_equal(r.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(r.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r.attempts, 1);
    assert_duration_equal(r.elapsed, RESIL_S(60));
    resil_pipeline_free(p);
}

static void late_failure_keeps_its_own_kind(void **state)
{
    fixture *f = *state;
    resil_pipeline *p = timeout_pipeline(f, false, RESIL_S(1), NULL);
    op_state s = {f->fc, 3, 0, 0};
    resil_pipeline_result r = run_op(p, &s, NULL);
    assert_int_equal(r.outcome.kind, RESIL_PERMANENT);
    assert_int_equal(r.outcome.code, 404);
    assert_string_equal(r.outcome.detail, "late");
    assert_duration_equal(r.elapsed, RESIL_S(60));
    resil_pipeline_free(p);
}

static void total_timeout_reports_itself_as_total(void **state)
{
    fixture *f = *state;
    resil_pipeline *p = timeout_pipeline(f, true, RESIL_S(3), NULL);
    op_state s = {f->fc, 0, 0, 0};
    resil_pipeline_result r = run_op(p, &s, NULL);
    assert_int_equal(r.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(r.outcome.detail, "total timeout (3s) elapsed");
    assert_int_equal(r.stop, RESIL_STOP_DEADLINE);
    resil_pipeline_free(p);
}

static void per_operation_table_picks_the_timeout_by_operation_name(void **state)
{
    fixture *f = *state;
    resil_timeouts *t;
    assert_int_equal(resil_timeouts_new(RESIL_S(30), &t, NULL), 0);
    assert_int_equal(resil_timeouts_set(t, "search", RESIL_MS(800), NULL), 0);
    resil_pipeline *p = timeout_pipeline(f, true, RESIL_S(5), t);
    op_state s = {f->fc, 2, 0, 0};
    run_op(p, &s, "search");
    assert_int_equal(s.deadline_seen, T0 + RESIL_MS(800));
    resil_instant now = resil_fake_clock_now(f->fc);
    run_op(p, &s, "other");
    assert_int_equal(s.deadline_seen, now + RESIL_S(30));
    now = resil_fake_clock_now(f->fc);
    run_op(p, &s, NULL);
    assert_int_equal(s.deadline_seen, now + RESIL_S(5));
    resil_pipeline_free(p);
    resil_timeouts_free(t);
}

static void attempt_deadline_never_passes_the_enclosing_total_deadline(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("t", &b, NULL), 0);
    resil_pipeline_builder_clock(b, f->clock);
    resil_timeout_opts total, attempt;
    resil_timeout_opts_default(&total);
    resil_timeout_opts_default(&attempt);
    total.timeout = RESIL_S(10);
    attempt.timeout = RESIL_S(10);
    resil_pipeline_add_total_timeout(b, &total);
    resil_pipeline_add_attempt_timeout(b, &attempt);
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);
    op_state s = {f->fc, 0, 0, 0};
    resil_pipeline_result r = run_op(p, &s, NULL);
    /* Equal deadlines: the total one is the binding one. */
    assert_int_equal(s.deadline_seen, T0 + RESIL_S(10));
    assert_string_equal(r.outcome.detail, "total timeout (10s) elapsed");
    resil_pipeline_free(p);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(remaining_counts_down_to_zero_and_stays_there),
        T(no_deadline_means_unbounded_remaining),
        T(remaining_ms_rounds_up_and_never_says_zero_for_a_passed_deadline),
        T(check_is_quiet_before_the_deadline),
        T(check_fires_the_token_with_timedout_once_the_deadline_passed),
        T(check_reports_a_plain_cancel_as_cancelled),
        T(sleep_ends_at_the_deadline_and_fires_it),
        T(sleep_shorter_than_the_deadline_is_a_plain_sleep),
        T(sleep_on_a_cancelled_token_returns_cancelled),
        T(sleep_without_a_token_still_ends_at_the_deadline),
        T(table_answers_the_default_for_unknown_operations),
        T(table_keeps_one_timeout_per_operation_and_replaces_it),
        T(table_rejects_bad_entries_by_name),
        T(an_operation_name_of_128_bytes_is_refused_by_name),
        T(removing_needs_a_table_and_a_name),
        T(timeout_options_default_to_thirty_seconds_and_reject_zero),
        T(attempt_timeout_turns_a_polling_give_up_into_a_timeout),
        T(attempt_timeout_ends_a_sleeping_operation_at_the_deadline),
        T(late_success_of_an_operation_that_ignores_the_deadline_is_kept),
        T(late_failure_keeps_its_own_kind),
        T(total_timeout_reports_itself_as_total),
        T(per_operation_table_picks_the_timeout_by_operation_name),
        T(attempt_deadline_never_passes_the_enclosing_total_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
