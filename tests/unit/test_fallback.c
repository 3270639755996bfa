/*
 * test_fallback.c — the fallback: called on a final failure or a
 * rejection, told why (the outcome, who refused, the retry's stop reason,
 * the attempts), producing the value through the caller's context, never
 * called for a success or a cancellation unless asked, and never once the
 * caller's own token fired, whatever it is asked.
 */
#include "test.h"

typedef struct ctx {
    int op_calls;
    resil_outcome op_result;
    resil_cancel *fire_on_call; /* the caller's token, fired inside the call */
    int fallback_calls;
    resil_fallback_info seen;
    resil_outcome seen_outcome;
    resil_outcome fallback_result;
    resil_attempt_ctx action_ctx; /* info->ctx, as the action saw it */
    resil_attempt_ctx handle_ctx; /* what `handle` was shown */
    int handled;
    int value; /* what the caller reads: 1 from the operation, 2 from the fallback */
} ctx;

static resil_outcome op(resil_attempt_ctx *a)
{
    ctx *c = a->user;
    c->op_calls++;
    if (c->fire_on_call != NULL)
        resil_cancel_fire(c->fire_on_call);
    if (c->op_result.kind == RESIL_SUCCESS)
        c->value = 1;
    return c->op_result;
}

static resil_outcome fallback(const resil_fallback_info *info, void *user, void *ud)
{
    ctx *c = user;
    (void)ud;
    c->fallback_calls++;
    c->seen = *info;
    c->seen_outcome = *info->outcome;
    c->action_ctx = *info->ctx;
    c->value = 2;
    return c->fallback_result;
}

typedef struct fixture {
    resil_fake_clock *fc;
    resil_pipeline_builder *b;
    resil_pipeline *p;
    ctx c;
    resil_cancel *cancel; /* the caller's token, if any */
    resil_pipeline_result r;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(0, 0, &f->fc), 0);
    assert_int_equal(resil_pipeline_builder_new("fb", &f->b, NULL), 0);
    resil_pipeline_builder_clock(f->b, resil_fake_clock_clock(f->fc));
    f->c.fallback_result = resil_ok();
    f->c.op_result = resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder_free(f->b);
    resil_pipeline_free(f->p);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

static void add_fallback(fixture *f, resil_retry_on_fn handle)
{
    resil_fallback_opts o;
    resil_fallback_opts_default(&o);
    o.action = fallback;
    o.handle = handle;
    assert_int_equal(resil_pipeline_add_fallback(f->b, &o), 0);
}

static void add_retry(fixture *f, uint32_t attempts)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = attempts;
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(f->b, &p), 0);
}

static void run(fixture *f)
{
    resil_err err = {0, ""};
    if (f->p == NULL && resil_pipeline_build(f->b, &f->p, &err) != 0)
        fail_msg("build: %s", err.message);
    resil_call call;
    resil_call_default(&call);
    call.user = &f->c;
    call.cancel = f->cancel;
    assert_int_equal(resil_pipeline_execute(f->p, op, &call, &f->r), 0);
}

static void replaces_a_final_failure_and_keeps_it_as_the_cause(void **state)
{
    fixture *f = *state;
    add_fallback(f, NULL);
    add_retry(f, 3);
    run(f);
    assert_int_equal(f->c.op_calls, 3);
    assert_int_equal(f->c.fallback_calls, 1);
    assert_int_equal(f->c.seen_outcome.code, 503);
    assert_int_equal(f->c.seen.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->c.seen.attempts, 3);
    assert_int_equal(f->c.seen.rejected_by, RESIL_STRATEGY_NONE);
    assert_int_equal(f->r.outcome.kind, RESIL_SUCCESS);
    assert_true(f->r.fallback);
    assert_int_equal(f->r.cause.code, 503);
    assert_int_equal(f->r.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->c.value, 2);
}

static void is_not_called_for_a_success(void **state)
{
    fixture *f = *state;
    add_fallback(f, NULL);
    f->c.op_result = resil_ok();
    run(f);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_false(f->r.fallback);
    assert_int_equal(f->c.value, 1);
}

static void is_not_called_for_a_cancellation_by_default(void **state)
{
    fixture *f = *state;
    add_fallback(f, NULL);
    f->c.op_result = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "gave up");
    run(f);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_int_equal(f->r.outcome.kind, RESIL_CANCELLED);
}

static bool only_503(const resil_outcome *o, const resil_attempt_ctx *a, void *ud)
{
    (void)a;
    (void)ud;
    return o->code == 503;
}

static void handle_predicate_chooses_which_failures_go_to_it(void **state)
{
    fixture *f = *state;
    add_fallback(f, only_503);
    f->c.op_result = resil_fail(RESIL_PERMANENT, 404, "not found");
    run(f);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_int_equal(f->r.outcome.code, 404);
    f->c.op_result = resil_fail(RESIL_TRANSIENT, 503, "unavailable");
    run(f);
    assert_int_equal(f->c.fallback_calls, 1);
}

static void its_own_failure_is_what_the_caller_gets(void **state)
{
    fixture *f = *state;
    add_fallback(f, NULL);
    f->c.fallback_result = resil_fail(RESIL_PERMANENT, 500, "no cache either");
    run(f);
    assert_true(f->r.fallback);
    assert_int_equal(f->r.outcome.code, 500);
    assert_int_equal(f->r.cause.code, 503);
}

static void hears_which_strategy_refused(void **state)
{
    fixture *f = *state;
    resil_bulkhead_opts bo;
    resil_bulkhead_opts_default(&bo);
    bo.max_concurrency = 1;
    bo.queue = false;
    resil_bulkhead *bh;
    assert_int_equal(resil_bulkhead_new(&bo, &bh, NULL), 0);
    add_fallback(f, NULL);
    resil_pipeline_use_bulkhead(f->b, bh);
    resil_bulkhead_ticket t = {.owner = NULL, .queued = 0};
    assert_int_equal(resil_bulkhead_try_acquire(bh, &t), 0);
    f->c.op_result = resil_ok();
    run(f);
    assert_int_equal(f->c.op_calls, 0);
    assert_int_equal(f->c.seen.rejected_by, RESIL_STRATEGY_BULKHEAD);
    assert_int_equal(f->c.seen.attempts, 0);
    assert_int_equal(f->c.seen.stop, RESIL_STOP_NONE);
    assert_string_equal(f->c.seen_outcome.detail, "bulkhead full");
    assert_int_equal(f->r.rejected_by, RESIL_STRATEGY_BULKHEAD);
    assert_true(f->r.fallback);
    resil_bulkhead_release(&t);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_bulkhead_free(bh);
}

static void hears_an_open_breaker(void **state)
{
    fixture *f = *state;
    add_fallback(f, NULL);
    add_retry(f, 1);
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.failure_threshold = 1;
    resil_pipeline_add_breaker(f->b, &bo);
    run(f); /* opens it */
    assert_int_equal(f->c.seen.rejected_by, RESIL_STRATEGY_NONE);
    run(f);
    assert_int_equal(f->c.op_calls, 1);
    assert_int_equal(f->c.fallback_calls, 2);
    assert_int_equal(f->c.seen.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_int_equal(f->c.seen.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->c.seen.attempts, 1);
    assert_string_equal(f->c.seen_outcome.detail, "circuit open");
}

static void hears_a_rate_limit_with_its_retry_after(void **state)
{
    fixture *f = *state;
    add_fallback(f, NULL);
    resil_ratelimit_opts r;
    resil_ratelimit_opts_default(&r, RESIL_RATELIMIT_FIXED_WINDOW);
    r.permits = 1;
    resil_pipeline_add_rate_limiter(f->b, &r, 0);
    f->c.op_result = resil_ok();
    run(f);
    run(f);
    assert_int_equal(f->c.fallback_calls, 1);
    assert_int_equal(f->c.seen.rejected_by, RESIL_STRATEGY_RATE_LIMITER);
    assert_int_equal(f->c.seen_outcome.retry_after, RESIL_S(1));
}

/* ---- the caller gave up: no substitute answer ------------------------------ */

static void fire_in_the_wait(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    resil_cancel_fire(ud);
}

static bool everything(const resil_outcome *o, const resil_attempt_ctx *a, void *ud)
{
    (void)o;
    (void)a;
    (void)ud;
    return true;
}

static void is_not_called_when_the_caller_cancelled_before_the_call(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_cancel_fire(&token);
    f->cancel = &token;
    add_fallback(f, NULL);
    test_add_retry_constant(f->b, 3, RESIL_S(1));
    run(f);
    assert_int_equal(f->c.op_calls, 0);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_false(f->r.fallback);
    assert_int_equal(f->r.attempts, 0);
    assert_int_equal(f->r.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(f->r.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(f->r.outcome.code, RESIL_ECANCELED);
    assert_string_equal(f->r.outcome.detail, "cancelled before the first attempt");
    assert_int_equal(f->r.rejected_by, RESIL_STRATEGY_NONE);
    assert_int_equal(f->c.value, 0);
    resil_cancel_destroy(&token);
}

static void is_not_called_when_the_caller_cancels_during_a_retry_wait(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->cancel = &token;
    resil_fake_clock_set_hook(f->fc, fire_in_the_wait, &token);
    add_fallback(f, NULL);
    test_add_retry_constant(f->b, 3, RESIL_S(1));
    run(f);
    assert_int_equal(f->c.op_calls, 1);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_false(f->r.fallback);
    assert_int_equal(f->r.attempts, 1);
    assert_int_equal(f->r.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(f->r.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(f->r.outcome.code, RESIL_ECANCELED);
    assert_string_equal(f->r.outcome.detail, "cancelled while waiting to retry");
    assert_int_equal(f->r.cause.kind, RESIL_CANCELLED);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(1));
    assert_duration_equal(f->r.elapsed, 0);
    resil_cancel_destroy(&token);
}

static void is_not_called_after_the_caller_cancelled_even_when_handle_takes_everything(
    void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->cancel = &token;
    resil_fake_clock_set_hook(f->fc, fire_in_the_wait, &token);
    add_fallback(f, everything);
    test_add_retry_constant(f->b, 3, RESIL_S(1));
    run(f);
    assert_int_equal(f->c.op_calls, 1);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_int_equal(f->r.outcome.kind, RESIL_CANCELLED);
    resil_cancel_destroy(&token);
}

static void is_not_called_when_the_caller_cancelled_during_the_last_attempt(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->cancel = &token;
    f->c.fire_on_call = &token; /* the operation ignores it and answers 503 */
    add_fallback(f, NULL);
    test_add_retry_constant(f->b, 1, RESIL_S(1));
    run(f);
    assert_int_equal(f->c.op_calls, 1);
    assert_int_equal(f->c.fallback_calls, 0);
    assert_false(f->r.fallback);
    assert_int_equal(f->r.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->r.outcome.code, 503);
    resil_cancel_destroy(&token);
}

/* The process stalls 800 ms in the middle of a 1 s wait: the total timeout
 * of 1.5 s passes during it. */
static void stall_in_the_wait(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)d;
    (void)ud;
    resil_fake_clock_advance(fc, RESIL_MS(800));
}

static void is_called_when_the_total_timeout_passes_during_a_retry_wait(void **state)
{
    fixture *f = *state;
    resil_fake_clock_set_hook(f->fc, stall_in_the_wait, NULL);
    add_fallback(f, NULL);
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = RESIL_MS(1500);
    assert_int_equal(resil_pipeline_add_total_timeout(f->b, &t), 0);
    test_add_retry_constant(f->b, 3, RESIL_S(1));
    run(f);
    assert_int_equal(f->c.op_calls, 1);
    assert_int_equal(f->c.fallback_calls, 1);
    assert_int_equal(f->c.seen.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->c.seen.attempts, 1);
    assert_int_equal(f->c.seen_outcome.kind, RESIL_TRANSIENT);
    assert_int_equal(f->c.seen_outcome.code, 503);
    assert_true(f->r.fallback);
    assert_int_equal(f->r.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->r.cause.code, 503);
    assert_int_equal(f->r.stop, RESIL_STOP_DEADLINE);
    assert_duration_equal(f->r.elapsed, RESIL_MS(1800));
    assert_int_equal(f->c.value, 2);
}

static bool keep_and_take(const resil_outcome *o, const resil_attempt_ctx *a, void *ud)
{
    (void)o;
    (void)ud;
    ctx *c = a->user;
    c->handle_ctx = *a;
    c->handled++;
    return true;
}

static void handle_and_action_see_the_calls_context(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->cancel = &token;
    add_fallback(f, keep_and_take);
    add_retry(f, 1);
    run(f);
    assert_int_equal(f->c.handled, 1);
    assert_int_equal(f->c.fallback_calls, 1);
    const resil_attempt_ctx *seen[] = {&f->c.handle_ctx, &f->c.action_ctx};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(seen[i]->attempt, 0); /* outside the retry */
        assert_int_equal(seen[i]->deadline, RESIL_INSTANT_MAX);
        assert_ptr_equal(seen[i]->cancel, &token);
        assert_ptr_equal(seen[i]->clock, resil_fake_clock_clock(f->fc));
        assert_ptr_equal(seen[i]->user, &f->c);
        assert_int_equal(seen[i]->hedge, 0);
    }
    resil_cancel_destroy(&token);
}

static void options_need_an_action_and_default_the_handle(void **state)
{
    (void)state;
    resil_fallback_opts o;
    resil_fallback_opts_default(&o);
    assert_null(o.action);
    assert_null(o.handle);
    resil_err err = {0, ""};
    assert_int_equal(resil_fallback_opts_validate(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "fallback.action must not be NULL");
    assert_int_equal(resil_fallback_opts_validate(NULL, &err), RESIL_EINVAL);
    o.action = fallback;
    assert_int_equal(resil_fallback_opts_validate(&o, &err), 0);
}

static void default_handle_takes_failures_and_rejections_not_cancellations(void **state)
{
    (void)state;
    resil_outcome ok = resil_ok(), cancelled = resil_fail(RESIL_CANCELLED, 0, NULL);
    resil_outcome permanent = resil_fail(RESIL_PERMANENT, 404, NULL);
    resil_outcome rejected = resil_fail(RESIL_REJECTED, RESIL_STRATEGY_BREAKER, NULL);
    resil_outcome mine = resil_fail((resil_kind)(RESIL_KIND_USER + 1), 7, NULL);
    assert_false(resil_fallback_handle_default(&ok, NULL));
    assert_false(resil_fallback_handle_default(&cancelled, NULL));
    assert_true(resil_fallback_handle_default(&permanent, NULL));
    assert_true(resil_fallback_handle_default(&rejected, NULL));
    assert_true(resil_fallback_handle_default(&mine, NULL));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(replaces_a_final_failure_and_keeps_it_as_the_cause),
        T(is_not_called_for_a_success),
        T(is_not_called_for_a_cancellation_by_default),
        T(handle_predicate_chooses_which_failures_go_to_it),
        T(its_own_failure_is_what_the_caller_gets),
        T(hears_which_strategy_refused),
        T(hears_an_open_breaker),
        T(hears_a_rate_limit_with_its_retry_after),
        T(is_not_called_when_the_caller_cancelled_before_the_call),
        T(is_not_called_when_the_caller_cancels_during_a_retry_wait),
        T(is_not_called_after_the_caller_cancelled_even_when_handle_takes_everything),
        T(is_not_called_when_the_caller_cancelled_during_the_last_attempt),
        T(is_called_when_the_total_timeout_passes_during_a_retry_wait),
        T(handle_and_action_see_the_calls_context),
        T(options_need_an_action_and_default_the_handle),
        T(default_handle_takes_failures_and_rejections_not_cancellations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
