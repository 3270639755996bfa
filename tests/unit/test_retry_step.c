/*
 * test_retry_step.c — the sans-I/O decision step: the policy value, its
 * validation, and the decision order of DESIGN.md §3 at every boundary.
 * No clock and no sleeping: instants are plain numbers handed in, and the
 * random source is a counter, so "this decision drew nothing" is asserted,
 * not assumed.
 */
#include "test.h"

#define T0 RESIL_S(1000) /* an arbitrary start instant */

/* A random source that counts its draws and returns a fixed value. */
typedef struct counting_rng {
    resil_rng base;
    double value;
    int draws;
} counting_rng;

static double counting_next(resil_rng *self)
{
    counting_rng *r = (counting_rng *)self;
    r->draws++;
    return r->value;
}

static counting_rng counting(double value)
{
    counting_rng r = {{counting_next}, value, 0};
    return r;
}

/* A policy whose waits are easy to read: 100 ms doubling, no jitter. */
static resil_retry_policy plain_policy(uint32_t max_attempts)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = max_attempts;
    p.backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    p.backoff.base = RESIL_MS(100);
    p.backoff.jitter = RESIL_JITTER_NONE;
    return p;
}

static resil_outcome transient(void) { return resil_fail(RESIL_TRANSIENT, 503, "unavailable"); }
static resil_outcome permanent(void) { return resil_fail(RESIL_PERMANENT, 400, "bad request"); }
static resil_outcome throttled(resil_duration hint)
{
    return resil_fail_after(RESIL_THROTTLED, 429, "slow down", hint);
}

/* One attempt through the step: before, then after at `now`. */
static resil_retry_decision step(resil_retry *r, resil_outcome o, resil_instant now,
                                 counting_rng *rng)
{
    assert_int_equal(resil_retry_before_attempt(r, false), RESIL_STOP_NONE);
    return resil_retry_after_attempt(r, NULL, &o, now, &rng->base);
}

static void start(resil_retry *r, const resil_retry_policy *p)
{
    assert_int_equal(resil_retry_begin(r, p, T0, RESIL_INSTANT_MAX, true), RESIL_STOP_NONE);
}

static void assert_wait(resil_retry_decision d, resil_duration wait, resil_wait_source src)
{
    assert_int_equal(d.stop, RESIL_STOP_NONE);
    assert_duration_equal(d.wait, wait);
    assert_int_equal(d.source, src);
}

static void assert_stop(resil_retry_decision d, resil_stop s)
{
    assert_int_equal(d.stop, s);
    assert_duration_equal(d.wait, 0);
    assert_int_equal(d.source, RESIL_WAIT_NONE);
}

/* A budget that records how it is called and answers as told. */
typedef struct spy_budget {
    int requests, tries, results;
    bool grant;
    resil_kind last_cause;
    uint32_t last_attempt;
} spy_budget;

static void spy_request(void *self) { ((spy_budget *)self)->requests++; }
static bool spy_try(void *self, const resil_outcome *cause, resil_budget_ticket *t)
{
    (void)t;
    spy_budget *s = self;
    s->tries++;
    s->last_cause = cause->kind;
    return s->grant;
}
static void spy_result(void *self, const resil_outcome *o, uint32_t attempt,
                       resil_budget_ticket *t)
{
    (void)o;
    (void)t;
    spy_budget *s = self;
    s->results++;
    s->last_attempt = attempt;
}
static double spy_level(void *self) { return ((spy_budget *)self)->tries; }
static const resil_budget_ops spy_ops = {
    .size = sizeof(resil_budget_ops),
    .name = "spy",
    .on_request = spy_request,
    .try_retry = spy_try,
    .on_result = spy_result,
    .level = spy_level,
};

static resil_budget *spy(spy_budget *s, bool grant)
{
    memset(s, 0, sizeof *s);
    s->grant = grant;
    resil_budget *b = NULL;
    assert_int_equal(resil_budget_new_custom(&spy_ops, s, &b), 0);
    return b;
}

/* ---- names ------------------------------------------------------------- */

static void stop_names_are_the_articles_words(void **state)
{
    (void)state;
    assert_string_equal(resil_stop_name(RESIL_STOP_NONE), "");
    assert_string_equal(resil_stop_name(RESIL_STOP_SUCCEEDED), "succeeded");
    assert_string_equal(resil_stop_name(RESIL_STOP_NOT_RETRYABLE), "not retryable");
    assert_string_equal(resil_stop_name(RESIL_STOP_ATTEMPTS_EXHAUSTED), "attempts exhausted");
    assert_string_equal(resil_stop_name(RESIL_STOP_BUDGET_EXHAUSTED), "budget exhausted");
    assert_string_equal(resil_stop_name(RESIL_STOP_DEADLINE), "deadline");
    assert_string_equal(resil_stop_name(RESIL_STOP_CANCELLED), "cancelled");
    assert_string_equal(resil_stop_name(RESIL_STOP_REFUSED), "refused");
    assert_string_equal(resil_stop_name((resil_stop)99), "");
}

static void wait_source_names(void **state)
{
    (void)state;
    assert_string_equal(resil_wait_source_name(RESIL_WAIT_NONE), "");
    assert_string_equal(resil_wait_source_name(RESIL_WAIT_BACKOFF), "backoff");
    assert_string_equal(resil_wait_source_name(RESIL_WAIT_RETRY_AFTER), "Retry-After");
    assert_string_equal(resil_wait_source_name((resil_wait_source)99), "");
}

/* ---- the policy value ---------------------------------------------------- */

static void policy_defaults(void **state)
{
    (void)state;
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    resil_backoff b;
    resil_backoff_default(&b);
    assert_int_equal(p.max_attempts, 3);
    assert_null(p.retry_on);
    assert_int_equal(p.backoff.kind, b.kind);
    assert_duration_equal(p.backoff.base, b.base);
    assert_int_equal(p.backoff.jitter, b.jitter);
    assert_duration_equal(p.backoff.max_delay, b.max_delay);
    assert_duration_equal(p.max_total, 0);
    assert_int_equal(p.retry_after, RESIL_RETRY_AFTER_HONOR);
    assert_duration_equal(p.retry_after_max, RESIL_S(60));
    assert_null(p.budget);
    assert_int_equal(p.unsafe_mode, RESIL_UNSAFE_REFUSE);
    assert_null(p.on_retry);
    assert_int_equal(resil_retry_policy_validate(&p, NULL), 0);
}

static int never_calls;

static resil_outcome counted_op(resil_attempt_ctx *ctx)
{
    (void)ctx;
    never_calls++;
    return resil_ok();
}

/* The executor's own check on every call (a quick predicate, worded only
 * on failure) refuses every policy validate refuses, with the same words,
 * before anything runs. */
static void expect_invalid(const resil_retry_policy *p, const char *fragment)
{
    resil_err err = {0, ""};
    assert_int_equal(resil_retry_policy_validate(p, &err), RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    if (strstr(err.message, fragment) == NULL)
        fail_msg("message '%s' lacks '%s'", err.message, fragment);
    resil_err exec_err = {0, ""};
    resil_retry_result r;
    never_calls = 0;
    assert_int_equal(resil_retry_execute(p, NULL, counted_op, NULL, &r, &exec_err),
                     RESIL_EINVAL);
    assert_string_equal(exec_err.message, err.message);
    assert_int_equal(never_calls, 0);
}

static void zero_attempts_is_invalid_and_points_at_forever(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(0);
    expect_invalid(&p, "retry.max_attempts must be >= 1 (use RESIL_ATTEMPTS_FOREVER "
                       "to retry forever), got 0");
}

static void attempt_boundaries_are_valid(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(1);
    assert_int_equal(resil_retry_policy_validate(&p, NULL), 0);
    p.max_attempts = RESIL_ATTEMPTS_FOREVER;
    assert_int_equal(resil_retry_policy_validate(&p, NULL), 0);
}

static void bad_backoff_is_named_under_retry(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.backoff.factor = 0.5;
    expect_invalid(&p, "retry.backoff.factor");
    p = plain_policy(3);
    p.backoff.base = -1;
    expect_invalid(&p, "retry.backoff.base");
}

static void every_bad_backoff_field_is_refused_by_the_executor(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.backoff.kind = (resil_backoff_kind)(RESIL_BACKOFF_LIST + 1);
    expect_invalid(&p, "retry.backoff.kind");
    p = plain_policy(3);
    p.backoff.factor = __builtin_nan("");
    expect_invalid(&p, "retry.backoff.factor");
    p = plain_policy(3);
    p.backoff.factor = __builtin_inf();
    expect_invalid(&p, "retry.backoff.factor");
    p = plain_policy(3);
    p.backoff.jitter = (resil_jitter)6;
    expect_invalid(&p, "retry.backoff.jitter");
    p = plain_policy(3);
    p.backoff.jitter_fraction = 1.5;
    expect_invalid(&p, "retry.backoff.jitter_fraction");
    p = plain_policy(3);
    p.backoff.jitter_fraction = __builtin_nan("");
    expect_invalid(&p, "retry.backoff.jitter_fraction");
    p = plain_policy(3);
    p.backoff.max_delay = -1;
    expect_invalid(&p, "retry.backoff.max_delay");
    p = plain_policy(3);
    p.backoff.jitter = RESIL_JITTER_POLLY;
    p.backoff.factor = 3.0;
    expect_invalid(&p, "retry.backoff.factor must be 2 with polly jitter");
}

static void negative_max_total_is_invalid(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = -1;
    expect_invalid(&p, "retry.max_total must be >= 0 (0 = none), got -1ns");
    p.max_total = 0;
    assert_int_equal(resil_retry_policy_validate(&p, NULL), 0);
    p.max_total = RESIL_DURATION_MAX;
    assert_int_equal(resil_retry_policy_validate(&p, NULL), 0);
}

static void unknown_retry_after_mode_is_invalid(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after = (resil_retry_after_mode)3;
    expect_invalid(&p, "retry.retry_after must be honor, ignore or bounded, got 3");
    p.retry_after = (resil_retry_after_mode)-1;
    expect_invalid(&p, "retry.retry_after must be honor, ignore or bounded, got -1");
}

static void negative_retry_after_max_is_invalid(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after_max = -RESIL_S(1);
    expect_invalid(&p, "retry.retry_after_max must be >= 0, got -1s");
    p.retry_after_max = 0;
    assert_int_equal(resil_retry_policy_validate(&p, NULL), 0);
}

static void unknown_unsafe_mode_is_invalid(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.unsafe_mode = (resil_unsafe_mode)2;
    expect_invalid(&p, "retry.unsafe_mode must be refuse or run-once, got 2");
}

static void null_policy_is_invalid(void **state)
{
    (void)state;
    resil_err err;
    assert_int_equal(resil_retry_policy_validate(NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "retry: policy must not be NULL");
}

/* ---- begin and before ---------------------------------------------------- */

static void begin_counts_one_request_against_the_budget(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(3);
    p.budget = spy(&s, true);
    resil_retry r;
    start(&r, &p);
    assert_int_equal(s.requests, 1);
    assert_int_equal(resil_retry_attempt(&r), 0);
    resil_budget_free(p.budget);
}

static void non_idempotent_work_is_refused_before_anything(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(3);
    p.budget = spy(&s, true);
    resil_retry r;
    assert_int_equal(resil_retry_begin(&r, &p, T0, RESIL_INSTANT_MAX, false),
                     RESIL_STOP_REFUSED);
    assert_int_equal(s.requests, 0);
    assert_int_equal(resil_retry_attempt(&r), 0);
    resil_budget_free(p.budget);
}

static void non_idempotent_work_under_a_single_attempt_runs(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(1);
    resil_retry r;
    assert_int_equal(resil_retry_begin(&r, &p, T0, RESIL_INSTANT_MAX, false),
                     RESIL_STOP_NONE);
}

static void non_idempotent_forever_is_refused(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(RESIL_ATTEMPTS_FOREVER);
    resil_retry r;
    assert_int_equal(resil_retry_begin(&r, &p, T0, RESIL_INSTANT_MAX, false),
                     RESIL_STOP_REFUSED);
}

static void run_once_mode_allows_exactly_one_attempt(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(5);
    p.unsafe_mode = RESIL_UNSAFE_RUN_ONCE;
    resil_retry r;
    counting_rng rng = counting(0.5);
    assert_int_equal(resil_retry_begin(&r, &p, T0, RESIL_INSTANT_MAX, false),
                     RESIL_STOP_NONE);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(rng.draws, 0);
}

static void run_once_mode_leaves_idempotent_work_alone(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(5);
    p.unsafe_mode = RESIL_UNSAFE_RUN_ONCE;
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
}

static void cancel_before_an_attempt_stops_without_counting_it(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    start(&r, &p);
    assert_int_equal(resil_retry_before_attempt(&r, true), RESIL_STOP_CANCELLED);
    assert_int_equal(resil_retry_attempt(&r), 0);
}

static void before_attempt_moves_the_counter(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    start(&r, &p);
    assert_int_equal(resil_retry_before_attempt(&r, false), RESIL_STOP_NONE);
    assert_int_equal(resil_retry_attempt(&r), 1);
    assert_int_equal(resil_retry_before_attempt(&r, false), RESIL_STOP_NONE);
    assert_int_equal(resil_retry_attempt(&r), 2);
}

/* ---- the decision order -------------------------------------------------- */

static void success_stops_with_succeeded(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, resil_ok(), T0, &rng), RESIL_STOP_SUCCEEDED);
    assert_int_equal(rng.draws, 0);
}

static bool retry_everything(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)o;
    (void)ctx;
    (void)ud;
    return true;
}

static void cancelled_outcome_stops_before_the_classifier(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_on = retry_everything;
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, resil_fail(RESIL_CANCELLED, 0, NULL), T0, &rng),
                RESIL_STOP_CANCELLED);
}

static void permanent_failure_is_not_retryable(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, permanent(), T0, &rng), RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(rng.draws, 0);
}

static void not_retryable_beats_attempts_exhausted(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, permanent(), T0, &rng), RESIL_STOP_NOT_RETRYABLE);
}

typedef struct only_code {
    int64_t code;
    int calls;
} only_code;

static bool retry_only_code(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    only_code *c = ud;
    c->calls++;
    return o->code == c->code;
}

static void the_policys_classifier_decides_with_its_user_data(void **state)
{
    (void)state;
    only_code c = {401, 0};
    resil_retry_policy p = plain_policy(3);
    p.retry_on = retry_only_code;
    p.retry_on_ud = &c;
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, resil_fail(RESIL_PERMANENT, 401, NULL), T0, &rng),
                RESIL_MS(100), RESIL_WAIT_BACKOFF);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(c.calls, 2);
}

/* ---- per-call context ------------------------------------------------------- */

/* One call's own data, reached through its attempt context. */
typedef struct call_state {
    const char *name;
    int64_t retries; /* the one code this call retries */
} call_state;

/* What a shared classifier was shown, call by call. */
typedef struct seen {
    const char *name;
    uint32_t attempt;
    resil_instant deadline;
    uint32_t hedge;
    int64_t code;
} seen;

typedef struct judge_log {
    seen entries[8];
    int n;
} judge_log;

static bool retry_the_calls_code(const resil_outcome *o, const resil_attempt_ctx *ctx,
                                 void *ud)
{
    judge_log *log = ud;
    const call_state *c = ctx->user;
    seen s = {c != NULL ? c->name : "(none)", ctx->attempt, ctx->deadline, ctx->hedge, o->code};
    if (log->n < 8)
        log->entries[log->n++] = s;
    return c != NULL && o->code == c->retries;
}

/* One attempt of call `c` failing with `code`, judged with the call's own
 * context, as an event loop driving the step would hand it. */
static resil_retry_decision call_step(resil_retry *r, call_state *c, int64_t code,
                                      resil_instant now, counting_rng *rng)
{
    assert_int_equal(resil_retry_before_attempt(r, false), RESIL_STOP_NONE);
    resil_attempt_ctx ctx = {.attempt = resil_retry_attempt(r),
                             .deadline = resil_retry_deadline(r), .user = c};
    resil_outcome o = resil_fail(RESIL_TRANSIENT, code, NULL);
    return resil_retry_after_attempt(r, &ctx, &o, now, &rng->base);
}

static void assert_seen(const seen *s, const char *name, uint32_t attempt,
                        resil_instant deadline, int64_t code)
{
    assert_string_equal(s->name, name);
    assert_int_equal(s->attempt, attempt);
    assert_int_equal(s->deadline, deadline);
    assert_int_equal(s->hedge, 0);
    assert_int_equal(s->code, code);
}

static void two_interleaved_calls_each_get_their_own_context_in_the_classifier(void **state)
{
    (void)state;
    judge_log log = {0};
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_S(10);
    p.retry_on = retry_the_calls_code;
    p.retry_on_ud = &log;
    call_state a = {"a", 503}, b = {"b", 429};
    resil_retry ra, rb;
    counting_rng rng = counting(0.5);
    assert_int_equal(resil_retry_begin(&ra, &p, T0, RESIL_INSTANT_MAX, true), RESIL_STOP_NONE);
    assert_int_equal(resil_retry_begin(&rb, &p, T0 + RESIL_S(1), RESIL_INSTANT_MAX, true),
                     RESIL_STOP_NONE);

    assert_wait(call_step(&ra, &a, 503, T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
    assert_wait(call_step(&rb, &b, 429, T0 + RESIL_S(1), &rng), RESIL_MS(100),
                RESIL_WAIT_BACKOFF);
    assert_stop(call_step(&ra, &a, 429, T0 + RESIL_MS(100), &rng), RESIL_STOP_NOT_RETRYABLE);
    assert_wait(call_step(&rb, &b, 429, T0 + RESIL_MS(1100), &rng), RESIL_MS(200),
                RESIL_WAIT_BACKOFF);
    assert_stop(call_step(&rb, &b, 429, T0 + RESIL_MS(1300), &rng),
                RESIL_STOP_ATTEMPTS_EXHAUSTED);

    assert_int_equal(log.n, 5);
    assert_seen(&log.entries[0], "a", 1, T0 + RESIL_S(10), 503);
    assert_seen(&log.entries[1], "b", 1, T0 + RESIL_S(11), 429);
    assert_seen(&log.entries[2], "a", 2, T0 + RESIL_S(10), 429);
    assert_seen(&log.entries[3], "b", 2, T0 + RESIL_S(11), 429);
    assert_seen(&log.entries[4], "b", 3, T0 + RESIL_S(11), 429);
}

static void without_a_context_the_classifier_sees_the_steps_attempt_and_deadline(void **state)
{
    (void)state;
    judge_log log = {0};
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_S(5);
    p.retry_on = retry_the_calls_code;
    p.retry_on_ud = &log;
    resil_retry r;
    counting_rng rng = counting(0.5);
    assert_int_equal(resil_retry_begin(&r, &p, T0, RESIL_INSTANT_MAX, true), RESIL_STOP_NONE);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(log.n, 1);
    assert_seen(&log.entries[0], "(none)", 1, T0 + RESIL_S(5), 503);
}

static void attempts_exhausted_after_max_attempts(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(200), RESIL_WAIT_BACKOFF);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(resil_retry_attempt(&r), 3);
}

static void single_attempt_never_retries(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, throttled(RESIL_S(1)), T0, &rng), RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

static void budget_is_not_consulted_on_the_last_attempt(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(2);
    p.budget = spy(&s, false);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    s.grant = true;
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
    s.grant = false;
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(s.tries, 1);
    assert_int_equal(s.results, 2);
    resil_budget_free(p.budget);
}

static void budget_is_not_consulted_for_a_non_retryable_failure(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(3);
    p.budget = spy(&s, true);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, permanent(), T0, &rng), RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(s.tries, 0);
    assert_int_equal(s.results, 1);
    resil_budget_free(p.budget);
}

static void budget_denial_stops_before_any_draw(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(3);
    p.backoff.jitter = RESIL_JITTER_FULL;
    p.budget = spy(&s, false);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_BUDGET_EXHAUSTED);
    assert_int_equal(rng.draws, 0);
    assert_int_equal(s.last_cause, RESIL_TRANSIENT);
    resil_budget_free(p.budget);
}

static void budget_hears_every_attempt_by_number(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(5);
    p.budget = spy(&s, true);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    step(&r, transient(), T0, &rng);
    step(&r, transient(), T0, &rng);
    assert_stop(step(&r, resil_ok(), T0, &rng), RESIL_STOP_SUCCEEDED);
    assert_int_equal(s.results, 3);
    assert_int_equal(s.last_attempt, 3);
    assert_int_equal(s.tries, 2);
    resil_budget_free(p.budget);
}

static void budget_grant_then_wait_then_deadline_in_that_order(void **state)
{
    (void)state;
    spy_budget s;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_MS(50);
    p.budget = spy(&s, true);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_DEADLINE);
    assert_int_equal(s.tries, 1); /* the budget was asked before the wait */
    resil_budget_free(p.budget);
}

/* ---- the wait ------------------------------------------------------------ */

static void backoff_waits_follow_the_formula(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(6);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    const resil_duration want[] = {RESIL_MS(100), RESIL_MS(200), RESIL_MS(400),
                                   RESIL_MS(800), RESIL_MS(1600)};
    for (int i = 0; i < 5; i++)
        assert_wait(step(&r, transient(), T0, &rng), want[i], RESIL_WAIT_BACKOFF);
    assert_int_equal(rng.draws, 0); /* no jitter, no draw */
}

static void full_jitter_draws_once_per_backoff_wait(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(4);
    p.backoff.jitter = RESIL_JITTER_FULL;
    resil_retry r;
    const double draws[] = {0.5, 0.25, 0.75};
    resil_rng_scripted rng;
    resil_rng_scripted_init(&rng, draws, 3);
    start(&r, &p);
    resil_outcome o = transient();
    resil_retry_decision d;
    assert_int_equal(resil_retry_before_attempt(&r, false), RESIL_STOP_NONE);
    d = resil_retry_after_attempt(&r, NULL, &o, T0, &rng.base);
    assert_wait(d, RESIL_MS(50), RESIL_WAIT_BACKOFF);
    assert_int_equal(resil_retry_before_attempt(&r, false), RESIL_STOP_NONE);
    d = resil_retry_after_attempt(&r, NULL, &o, T0, &rng.base);
    assert_wait(d, RESIL_MS(50), RESIL_WAIT_BACKOFF);
    assert_int_equal(resil_retry_before_attempt(&r, false), RESIL_STOP_NONE);
    d = resil_retry_after_attempt(&r, NULL, &o, T0, &rng.base);
    assert_wait(d, RESIL_MS(300), RESIL_WAIT_BACKOFF);
    assert_int_equal(resil_retry_before_attempt(&r, false), RESIL_STOP_NONE);
    d = resil_retry_after_attempt(&r, NULL, &o, T0, &rng.base);
    assert_stop(d, RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

static void no_stop_ever_draws(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(2);
    p.backoff.jitter = RESIL_JITTER_FULL;
    p.max_total = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(50), RESIL_WAIT_BACKOFF);
    assert_int_equal(rng.draws, 1);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_ATTEMPTS_EXHAUSTED);
    start(&r, &p);
    assert_stop(step(&r, permanent(), T0, &rng), RESIL_STOP_NOT_RETRYABLE);
    start(&r, &p);
    assert_stop(step(&r, resil_fail(RESIL_CANCELLED, 0, NULL), T0, &rng), RESIL_STOP_CANCELLED);
    start(&r, &p);
    assert_stop(step(&r, throttled(RESIL_S(5)), T0, &rng), RESIL_STOP_DEADLINE);
    assert_int_equal(rng.draws, 1);
}

static void retry_after_beats_backoff_and_draws_nothing(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.backoff.jitter = RESIL_JITTER_FULL;
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(2)), T0, &rng), RESIL_S(2),
                RESIL_WAIT_RETRY_AFTER);
    assert_int_equal(rng.draws, 0);
}

static void a_hint_on_any_retryable_kind_is_honoured(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    resil_outcome o = resil_fail_after(RESIL_TRANSIENT, 503, NULL, RESIL_S(7));
    assert_wait(step(&r, o, T0, &rng), RESIL_S(7), RESIL_WAIT_RETRY_AFTER);
}

static void retry_after_is_capped_by_retry_after_max(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(3600)), T0, &rng), RESIL_S(60),
                RESIL_WAIT_RETRY_AFTER);
    p.retry_after_max = RESIL_S(5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(5)), T0, &rng), RESIL_S(5), RESIL_WAIT_RETRY_AFTER);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(5) + 1), T0, &rng), RESIL_S(5),
                RESIL_WAIT_RETRY_AFTER);
}

static void max_delay_never_caps_a_retry_after(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.backoff.max_delay = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(10)), T0, &rng), RESIL_S(10),
                RESIL_WAIT_RETRY_AFTER);
}

static void zero_hint_means_retry_at_once(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(0), T0, &rng), 0, RESIL_WAIT_RETRY_AFTER);
}

static void ignore_mode_uses_backoff_despite_a_hint(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after = RESIL_RETRY_AFTER_IGNORE;
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(2)), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
}

static void bounded_mode_raises_a_short_hint_to_the_backoff(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after = RESIL_RETRY_AFTER_BOUNDED;
    p.backoff.base = RESIL_S(1);
    p.backoff.jitter = RESIL_JITTER_FULL;
    resil_retry r;
    counting_rng rng = counting(0.5); /* backoff = 500 ms */
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_MS(100)), T0, &rng), RESIL_MS(500),
                RESIL_WAIT_RETRY_AFTER);
    assert_int_equal(rng.draws, 1); /* the bound needs the backoff */
}

static void bounded_mode_limits_a_long_hint_to_backoff_plus_five_seconds(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after = RESIL_RETRY_AFTER_BOUNDED;
    p.backoff.base = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(30)), T0, &rng), RESIL_S(6),
                RESIL_WAIT_RETRY_AFTER);
}

static void bounded_mode_keeps_a_hint_inside_the_bounds(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after = RESIL_RETRY_AFTER_BOUNDED;
    p.backoff.base = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, throttled(RESIL_S(4)), T0, &rng), RESIL_S(4), RESIL_WAIT_RETRY_AFTER);
}

static void bounded_mode_without_a_hint_is_plain_backoff(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.retry_after = RESIL_RETRY_AFTER_BOUNDED;
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
}

static void begin_resets_the_backoff_state(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(4);
    p.backoff.jitter = RESIL_JITTER_DECORRELATED;
    p.backoff.base = RESIL_MS(100);
    resil_retry r;
    resil_duration first[3], second[3];
    for (int run = 0; run < 2; run++) {
        counting_rng rng = counting(0.9);
        start(&r, &p);
        for (int i = 0; i < 3; i++) {
            resil_retry_decision d = step(&r, transient(), T0, &rng);
            assert_int_equal(d.stop, RESIL_STOP_NONE);
            (run == 0 ? first : second)[i] = d.wait;
        }
    }
    for (int i = 0; i < 3; i++)
        assert_duration_equal(second[i], first[i]);
    assert_true(first[1] > first[0]); /* the state did carry within a run */
}

/* ---- deadlines ----------------------------------------------------------- */

static void max_total_sets_the_deadline_from_begin(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_S(10);
    resil_retry r;
    start(&r, &p);
    assert_int_equal(resil_retry_deadline(&r), T0 + RESIL_S(10));
}

static void the_earlier_of_outside_deadline_and_max_total_wins(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_S(10);
    resil_retry r;
    assert_int_equal(resil_retry_begin(&r, &p, T0, T0 + RESIL_S(4), true), RESIL_STOP_NONE);
    assert_int_equal(resil_retry_deadline(&r), T0 + RESIL_S(4));
    assert_int_equal(resil_retry_begin(&r, &p, T0, T0 + RESIL_S(40), true), RESIL_STOP_NONE);
    assert_int_equal(resil_retry_deadline(&r), T0 + RESIL_S(10));
    p.max_total = 0;
    assert_int_equal(resil_retry_begin(&r, &p, T0, RESIL_INSTANT_MAX, true), RESIL_STOP_NONE);
    assert_int_equal(resil_retry_deadline(&r), RESIL_INSTANT_MAX);
}

static void huge_max_total_saturates(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_DURATION_MAX;
    resil_retry r;
    start(&r, &p);
    assert_int_equal(resil_retry_deadline(&r), RESIL_INSTANT_MAX);
}

static void a_deadline_already_passed_runs_nothing(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    resil_retry r;
    assert_int_equal(resil_retry_begin(&r, &p, T0, T0, true), RESIL_STOP_DEADLINE);
    assert_int_equal(resil_retry_begin(&r, &p, T0, T0 - 1, true), RESIL_STOP_DEADLINE);
}

static void hint_past_the_deadline_stops_at_once(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_S(10);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, throttled(RESIL_S(30)), T0 + RESIL_S(1), &rng), RESIL_STOP_DEADLINE);
    assert_int_equal(rng.draws, 0);
}

static void backoff_past_the_deadline_stops(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(5);
    p.max_total = RESIL_MS(250);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
    /* at 100 ms the 200 ms wait would end at 300 ms > 250 ms */
    assert_stop(step(&r, transient(), T0 + RESIL_MS(100), &rng), RESIL_STOP_DEADLINE);
}

static void a_wait_ending_exactly_at_the_deadline_stops(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_MS(100);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, transient(), T0, &rng), RESIL_STOP_DEADLINE);
    p.max_total = RESIL_MS(100) + 1;
    start(&r, &p);
    assert_wait(step(&r, transient(), T0, &rng), RESIL_MS(100), RESIL_WAIT_BACKOFF);
}

static void an_attempt_that_ran_past_the_deadline_stops(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(3);
    p.max_total = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, throttled(0), T0 + RESIL_S(2), &rng), RESIL_STOP_DEADLINE);
}

static void exhausted_is_reported_before_the_deadline(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(1);
    p.max_total = RESIL_MS(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    assert_stop(step(&r, transient(), T0 + RESIL_S(5), &rng), RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

/* ---- forever --------------------------------------------------------------- */

static void forever_is_never_exhausted(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(RESIL_ATTEMPTS_FOREVER);
    p.backoff.max_delay = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(step(&r, transient(), T0, &rng).stop, RESIL_STOP_NONE);
    assert_int_equal(resil_retry_attempt(&r), 10000);
    assert_stop(step(&r, resil_ok(), T0, &rng), RESIL_STOP_SUCCEEDED);
}

static void forever_counter_saturates_instead_of_wrapping(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(RESIL_ATTEMPTS_FOREVER);
    p.backoff.max_delay = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    r.attempt = UINT32_MAX - 1; /* as if four billion attempts had run */
    assert_int_equal(step(&r, transient(), T0, &rng).stop, RESIL_STOP_NONE);
    assert_int_equal(step(&r, transient(), T0, &rng).stop, RESIL_STOP_NONE);
    assert_int_equal(resil_retry_attempt(&r), UINT32_MAX);
}

static void forever_still_stops_at_the_deadline(void **state)
{
    (void)state;
    resil_retry_policy p = plain_policy(RESIL_ATTEMPTS_FOREVER);
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.max_total = RESIL_S(1);
    resil_retry r;
    counting_rng rng = counting(0.5);
    start(&r, &p);
    resil_instant now = T0;
    int retries = 0;
    for (;;) {
        resil_retry_decision d = step(&r, transient(), now, &rng);
        if (d.stop != RESIL_STOP_NONE) {
            assert_int_equal(d.stop, RESIL_STOP_DEADLINE);
            break;
        }
        now += d.wait;
        retries++;
    }
    assert_int_equal(retries, 9); /* waits end at 100..900 ms; 1000 ms is the deadline */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_names_are_the_articles_words),
        cmocka_unit_test(wait_source_names),
        cmocka_unit_test(policy_defaults),
        cmocka_unit_test(zero_attempts_is_invalid_and_points_at_forever),
        cmocka_unit_test(attempt_boundaries_are_valid),
        cmocka_unit_test(bad_backoff_is_named_under_retry),
        cmocka_unit_test(every_bad_backoff_field_is_refused_by_the_executor),
        cmocka_unit_test(negative_max_total_is_invalid),
        cmocka_unit_test(unknown_retry_after_mode_is_invalid),
        cmocka_unit_test(negative_retry_after_max_is_invalid),
        cmocka_unit_test(unknown_unsafe_mode_is_invalid),
        cmocka_unit_test(null_policy_is_invalid),
        cmocka_unit_test(begin_counts_one_request_against_the_budget),
        cmocka_unit_test(non_idempotent_work_is_refused_before_anything),
        cmocka_unit_test(non_idempotent_work_under_a_single_attempt_runs),
        cmocka_unit_test(non_idempotent_forever_is_refused),
        cmocka_unit_test(run_once_mode_allows_exactly_one_attempt),
        cmocka_unit_test(run_once_mode_leaves_idempotent_work_alone),
        cmocka_unit_test(cancel_before_an_attempt_stops_without_counting_it),
        cmocka_unit_test(before_attempt_moves_the_counter),
        cmocka_unit_test(success_stops_with_succeeded),
        cmocka_unit_test(cancelled_outcome_stops_before_the_classifier),
        cmocka_unit_test(permanent_failure_is_not_retryable),
        cmocka_unit_test(not_retryable_beats_attempts_exhausted),
        cmocka_unit_test(the_policys_classifier_decides_with_its_user_data),
        cmocka_unit_test(two_interleaved_calls_each_get_their_own_context_in_the_classifier),
        cmocka_unit_test(without_a_context_the_classifier_sees_the_steps_attempt_and_deadline),
        cmocka_unit_test(attempts_exhausted_after_max_attempts),
        cmocka_unit_test(single_attempt_never_retries),
        cmocka_unit_test(budget_is_not_consulted_on_the_last_attempt),
        cmocka_unit_test(budget_is_not_consulted_for_a_non_retryable_failure),
        cmocka_unit_test(budget_denial_stops_before_any_draw),
        cmocka_unit_test(budget_hears_every_attempt_by_number),
        cmocka_unit_test(budget_grant_then_wait_then_deadline_in_that_order),
        cmocka_unit_test(backoff_waits_follow_the_formula),
        cmocka_unit_test(full_jitter_draws_once_per_backoff_wait),
        cmocka_unit_test(no_stop_ever_draws),
        cmocka_unit_test(retry_after_beats_backoff_and_draws_nothing),
        cmocka_unit_test(a_hint_on_any_retryable_kind_is_honoured),
        cmocka_unit_test(retry_after_is_capped_by_retry_after_max),
        cmocka_unit_test(max_delay_never_caps_a_retry_after),
        cmocka_unit_test(zero_hint_means_retry_at_once),
        cmocka_unit_test(ignore_mode_uses_backoff_despite_a_hint),
        cmocka_unit_test(bounded_mode_raises_a_short_hint_to_the_backoff),
        cmocka_unit_test(bounded_mode_limits_a_long_hint_to_backoff_plus_five_seconds),
        cmocka_unit_test(bounded_mode_keeps_a_hint_inside_the_bounds),
        cmocka_unit_test(bounded_mode_without_a_hint_is_plain_backoff),
        cmocka_unit_test(begin_resets_the_backoff_state),
        cmocka_unit_test(max_total_sets_the_deadline_from_begin),
        cmocka_unit_test(the_earlier_of_outside_deadline_and_max_total_wins),
        cmocka_unit_test(huge_max_total_saturates),
        cmocka_unit_test(a_deadline_already_passed_runs_nothing),
        cmocka_unit_test(hint_past_the_deadline_stops_at_once),
        cmocka_unit_test(backoff_past_the_deadline_stops),
        cmocka_unit_test(a_wait_ending_exactly_at_the_deadline_stops),
        cmocka_unit_test(an_attempt_that_ran_past_the_deadline_stops),
        cmocka_unit_test(exhausted_is_reported_before_the_deadline),
        cmocka_unit_test(forever_is_never_exhausted),
        cmocka_unit_test(forever_counter_saturates_instead_of_wrapping),
        cmocka_unit_test(forever_still_stops_at_the_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
