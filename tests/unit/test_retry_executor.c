/*
 * test_retry_executor.c — the blocking executor over the decision step: what
 * it hands the operation, what it records, when it calls the hooks, how it
 * sleeps and how a cancel ends it. Everything runs on the fake clock: every
 * wait is recorded instead of slept, and attempts "take time" by moving the
 * clock, so elapsed times and starts are exact.
 */
#include <math.h>

#include "retry_fixture.h"

#define T0 RESIL_S(500)

/* ---- a scripted operation --------------------------------------------------- */

typedef struct script {
    const resil_outcome *outcomes; /* returned in turn; the last repeats */
    size_t n;
    int calls;
    resil_duration takes; /* how long each attempt lasts on the fake clock */
    resil_fake_clock *fc;
    resil_attempt_ctx seen[8]; /* the contexts of the first attempts */
    resil_cancel *fire_on_call; /* fired during attempt number fire_at */
    int fire_at;
} script;

static resil_outcome scripted_op(resil_attempt_ctx *ctx)
{
    script *s = ctx->user;
    if (s->calls < 8)
        s->seen[s->calls] = *ctx;
    size_t i = (size_t)s->calls < s->n ? (size_t)s->calls : s->n - 1;
    s->calls++;
    if (s->takes > 0)
        resil_fake_clock_advance(s->fc, s->takes);
    if (s->fire_on_call != NULL && s->calls == s->fire_at)
        resil_cancel_fire(s->fire_on_call);
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
    s->fc = f->fc;
    resil_err err = {0, ""};
    int rc = resil_retry_execute(&f->policy, &f->opts, scripted_op, s, &f->result, &err);
    if (rc != 0)
        fail_msg("execute failed: %s", err.message);
}

static const resil_outcome fail503[] = {{RESIL_TRANSIENT, 503, RESIL_NO_HINT, "unavailable"}};

static script failing_then_ok(int failures)
{
    static resil_outcome seq[16];
    for (int i = 0; i < failures && i < 15; i++)
        seq[i] = fail503[0];
    seq[failures] = resil_ok();
    script s = {seq, (size_t)failures + 1, 0, 0, NULL, {{0}}, NULL, 0};
    return s;
}

static script always(const resil_outcome *o)
{
    script s = {o, 1, 0, 0, NULL, {{0}}, NULL, 0};
    return s;
}

/* ---- the happy path --------------------------------------------------------- */

static void success_on_first_try_records_one_attempt(void **state)
{
    fixture *f = *state;
    script s = failing_then_ok(0);
    s.takes = RESIL_MS(7);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.records_len, 1);
    assert_int_equal(f->result.final.kind, RESIL_SUCCESS);
    assert_duration_equal(f->result.elapsed, RESIL_MS(7));
    resil_attempt_record *r = &f->records[0];
    assert_int_equal(r->number, 1);
    assert_int_equal(r->stop, RESIL_STOP_SUCCEEDED);
    assert_duration_equal(r->wait, 0);
    assert_int_equal(r->source, RESIL_WAIT_NONE);
    assert_int_equal(r->start, T0);
    assert_duration_equal(r->duration, RESIL_MS(7));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

static void failures_then_success_sleep_each_decided_wait(void **state)
{
    fixture *f = *state;
    script s = failing_then_ok(2);
    s.takes = RESIL_MS(10);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 3);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 2);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_MS(100));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 1), RESIL_MS(200));
    assert_duration_equal(f->result.elapsed, RESIL_MS(330));
}

static void records_carry_number_outcome_decision_wait_start_and_duration(void **state)
{
    fixture *f = *state;
    script s = failing_then_ok(2);
    s.takes = RESIL_MS(10);
    run(f, &s);
    assert_int_equal(f->result.records_len, 3);
    const resil_attempt_record *r = f->records;
    assert_int_equal(r[0].number, 1);
    assert_int_equal(r[0].outcome.code, 503);
    assert_int_equal(r[0].stop, RESIL_STOP_NONE);
    assert_duration_equal(r[0].wait, RESIL_MS(100));
    assert_int_equal(r[0].source, RESIL_WAIT_BACKOFF);
    assert_int_equal(r[0].start, T0);
    assert_duration_equal(r[0].duration, RESIL_MS(10));
    assert_int_equal(r[1].number, 2);
    assert_int_equal(r[1].start, T0 + RESIL_MS(110));
    assert_duration_equal(r[1].wait, RESIL_MS(200));
    assert_int_equal(r[2].number, 3);
    assert_int_equal(r[2].start, T0 + RESIL_MS(320));
    assert_int_equal(r[2].stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(r[2].outcome.kind, RESIL_SUCCESS);
}

static void the_operation_sees_its_attempt_context(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->opts.cancel = &token;
    f->policy.max_total = RESIL_S(30);
    script s = failing_then_ok(1);
    run(f, &s);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s.seen[i].attempt, (uint32_t)i + 1);
        assert_int_equal(s.seen[i].deadline, T0 + RESIL_S(30));
        assert_ptr_equal(s.seen[i].cancel, &token);
        assert_ptr_equal(s.seen[i].clock, resil_fake_clock_clock(f->fc));
        assert_ptr_equal(s.seen[i].user, &s);
    }
    resil_cancel_destroy(&token);
}

static void without_any_deadline_the_context_says_none(void **state)
{
    fixture *f = *state;
    script s = failing_then_ok(0);
    run(f, &s);
    assert_int_equal(s.seen[0].deadline, RESIL_INSTANT_MAX);
    assert_null(s.seen[0].cancel);
}

static void an_outside_deadline_reaches_the_context(void **state)
{
    fixture *f = *state;
    f->opts.deadline = T0 + RESIL_S(3);
    f->policy.max_total = RESIL_S(30);
    script s = failing_then_ok(0);
    run(f, &s);
    assert_int_equal(s.seen[0].deadline, T0 + RESIL_S(3));
}

/* ---- stops ---------------------------------------------------------------- */

static void attempts_exhausted_keeps_the_last_failure(void **state)
{
    fixture *f = *state;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->result.attempts, 4);
    assert_int_equal(s.calls, 4);
    assert_int_equal(f->result.final.code, 503);
    assert_int_equal(f->records[3].stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_duration_equal(f->records[3].wait, 0);
    assert_duration_equal(f->result.elapsed, RESIL_MS(700));
}

static void not_retryable_stops_after_one_attempt(void **state)
{
    fixture *f = *state;
    static const resil_outcome bad[] = {{RESIL_PERMANENT, 400, RESIL_NO_HINT, "bad"}};
    script s = always(bad);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.final.code, 400);
}

static void retry_after_is_slept_and_recorded_as_its_source(void **state)
{
    fixture *f = *state;
    static resil_outcome seq[2];
    seq[0] = resil_fail_after(RESIL_THROTTLED, 429, "busy", RESIL_S(2));
    seq[1] = resil_ok();
    script s = {seq, 2, 0, 0, NULL, {{0}}, NULL, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
    assert_duration_equal(f->records[0].wait, RESIL_S(2));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(2));
}

static void a_wait_past_max_total_ends_the_run_without_sleeping(void **state)
{
    fixture *f = *state;
    f->policy.max_total = RESIL_S(1);
    static resil_outcome seq[1];
    seq[0] = resil_fail_after(RESIL_THROTTLED, 429, "busy", RESIL_S(30));
    script s = always(seq);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    assert_int_equal(f->records[0].stop, RESIL_STOP_DEADLINE);
    assert_duration_equal(f->result.elapsed, 0);
}

static void max_total_counts_attempt_time_and_waits(void **state)
{
    fixture *f = *state;
    f->policy.max_attempts = 10;
    f->policy.max_total = RESIL_S(1);
    script s = always(fail503);
    s.takes = RESIL_MS(100);
    run(f, &s);
    /* 100 a, 100 w, 100 a, 200 w, 100 a = 600; then a 400 ms wait would end at 1000 */
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 3);
    assert_duration_equal(f->result.elapsed, RESIL_MS(600));
}

static void an_outside_deadline_stops_like_max_total(void **state)
{
    fixture *f = *state;
    f->opts.deadline = T0 + RESIL_MS(250);
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 2);
}

/* A deadline already reached when the run starts: no attempt runs, and the
 * run is refused as past its deadline. */
static void an_outside_deadline_already_reached_runs_nothing(void **state)
{
    fixture *f = *state;
    f->opts.deadline = T0;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(s.calls, 0);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->result.final.kind, RESIL_REJECTED);
    assert_int_equal(f->result.final.code, RESIL_ETIMEDOUT);
    assert_string_equal(f->result.final.detail, "deadline passed before the first attempt");
}

static void non_idempotent_work_is_refused_and_never_runs(void **state)
{
    fixture *f = *state;
    f->opts.non_idempotent = true;
    script s = failing_then_ok(0);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_REFUSED);
    assert_int_equal(s.calls, 0);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->result.records_len, 0);
    assert_int_equal(f->result.final.kind, RESIL_REJECTED);
    assert_int_equal(f->result.final.code, RESIL_ENOTIDEMPOTENT);
}

static void run_once_mode_runs_non_idempotent_work_exactly_once(void **state)
{
    fixture *f = *state;
    f->opts.non_idempotent = true;
    f->policy.unsafe_mode = RESIL_UNSAFE_RUN_ONCE;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(s.calls, 1);
}

static void forever_runs_until_success(void **state)
{
    fixture *f = *state;
    f->policy.max_attempts = RESIL_ATTEMPTS_FOREVER;
    f->policy.backoff.kind = RESIL_BACKOFF_CONSTANT;
    f->policy.backoff.base = 0;
    static resil_outcome seq[1001];
    for (int i = 0; i < 1000; i++)
        seq[i] = fail503[0];
    seq[1000] = resil_ok();
    script s = {seq, 1001, 0, 0, NULL, {{0}}, NULL, 0};
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 1001);
    assert_int_equal(f->result.records_len, 16);
}

static void forever_stops_at_the_deadline(void **state)
{
    fixture *f = *state;
    f->policy.max_attempts = RESIL_ATTEMPTS_FOREVER;
    f->policy.backoff.kind = RESIL_BACKOFF_CONSTANT;
    f->policy.max_total = RESIL_S(10);
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 100); /* waits end at 0.1 s .. 9.9 s */
}

/* ---- cancellation --------------------------------------------------------- */

static void cancel_before_the_first_attempt_runs_nothing(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_cancel_fire(&token);
    f->opts.cancel = &token;
    script s = failing_then_ok(0);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(s.calls, 0);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->result.final.kind, RESIL_CANCELLED);
    assert_int_equal(f->result.final.code, RESIL_ECANCELED);
    assert_string_equal(f->result.final.detail, "cancelled before the first attempt");
    resil_cancel_destroy(&token);
}

static void fire_token(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    resil_cancel_fire(ud);
}

static void cancel_during_the_wait_stops_and_records_the_wait(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->opts.cancel = &token;
    resil_fake_clock_set_hook(f->fc, fire_token, &token);
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.records_len, 1);
    assert_int_equal(f->records[0].stop, RESIL_STOP_NONE);
    assert_duration_equal(f->records[0].wait, RESIL_MS(100));
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
    assert_int_equal(f->records[0].outcome.code, 503);
    resil_cancel_destroy(&token);
}

static void cancel_during_the_wait_makes_the_final_outcome_a_cancellation(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->opts.cancel = &token;
    resil_fake_clock_set_hook(f->fc, fire_token, &token);
    script s = always(fail503);
    s.takes = RESIL_MS(30);
    run(f, &s);
    assert_int_equal(f->result.final.kind, RESIL_CANCELLED);
    assert_int_equal(f->result.final.code, RESIL_ECANCELED);
    assert_string_equal(f->result.final.detail, "cancelled while waiting to retry");
    assert_int_equal(f->result.attempts, 1);
    assert_duration_equal(f->result.elapsed, RESIL_MS(30));
    resil_cancel_destroy(&token);
}

static void cancel_during_an_attempt_is_seen_before_the_next(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->opts.cancel = &token;
    script s = always(fail503);
    s.fire_on_call = &token;
    s.fire_at = 2;
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(s.calls, 2);
    assert_int_equal(f->result.attempts, 2);
    assert_int_equal(f->result.final.kind, RESIL_CANCELLED);
    assert_int_equal(f->result.final.code, RESIL_ECANCELED);
    resil_cancel_destroy(&token);
}

static void an_attempt_reporting_cancelled_stops_the_run(void **state)
{
    fixture *f = *state;
    static const resil_outcome gave_up[] = {{RESIL_CANCELLED, 0, RESIL_NO_HINT, "gave up"}};
    script s = always(gave_up);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->records[0].stop, RESIL_STOP_CANCELLED);
}

static void a_token_fired_for_a_timeout_stops_with_deadline(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_cancel_fire_reason(&token, RESIL_ETIMEDOUT);
    f->opts.cancel = &token;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(s.calls, 0);
    resil_cancel_destroy(&token);
}

static void fire_timeout(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    resil_cancel_fire_reason(ud, RESIL_ETIMEDOUT);
}

static void a_timeout_fired_during_the_wait_stops_with_deadline(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->opts.cancel = &token;
    resil_fake_clock_set_hook(f->fc, fire_timeout, &token);
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(s.calls, 1);
    assert_int_equal(f->result.final.kind, RESIL_TRANSIENT); /* the call failed; no one gave up */
    assert_int_equal(f->result.final.code, 503);
    resil_cancel_destroy(&token);
}

/* ---- hooks ------------------------------------------------------------------ */

typedef struct hook_log {
    int attempts_seen, retries_seen;
    resil_attempt_record last;
    resil_retry_info info;
    resil_kind cause_kind;
    size_t sleeps_at_retry;
    resil_fake_clock *fc;
    int order[8]; /* 1 = attempt hook, 2 = retry hook */
    int n;
} hook_log;

static void log_attempt(const resil_attempt_record *rec, void *ud)
{
    hook_log *h = ud;
    h->attempts_seen++;
    h->last = *rec;
    if (h->n < 8)
        h->order[h->n++] = 1;
}

static void log_retry(const resil_retry_info *info, void *user, void *ud)
{
    (void)user;
    hook_log *h = ud;
    h->retries_seen++;
    h->info = *info;
    h->cause_kind = info->cause->kind;
    h->sleeps_at_retry = resil_fake_clock_sleep_count(h->fc);
    if (h->n < 8)
        h->order[h->n++] = 2;
}

static void on_attempt_sees_every_attempt_with_its_decision(void **state)
{
    fixture *f = *state;
    hook_log h = {0};
    f->opts.on_attempt = log_attempt;
    f->opts.on_attempt_ud = &h;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(h.attempts_seen, 4);
    assert_int_equal(h.last.number, 4);
    assert_int_equal(h.last.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

static void on_retry_comes_after_the_decision_and_before_the_wait(void **state)
{
    fixture *f = *state;
    hook_log h = {0};
    h.fc = f->fc;
    f->opts.on_attempt = log_attempt;
    f->opts.on_attempt_ud = &h;
    f->policy.on_retry = log_retry;
    f->policy.on_retry_ud = &h;
    script s = failing_then_ok(1);
    run(f, &s);
    assert_int_equal(h.retries_seen, 1);
    assert_int_equal(h.info.attempt, 1);
    assert_duration_equal(h.info.delay, RESIL_MS(100));
    assert_int_equal(h.info.source, RESIL_WAIT_BACKOFF);
    assert_int_equal(h.cause_kind, RESIL_TRANSIENT);
    assert_int_equal(h.sleeps_at_retry, 0); /* not slept yet */
    int want[] = {1, 2, 1};
    assert_int_equal(h.n, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(h.order[i], want[i]);
}

static void on_retry_is_not_called_on_a_stop(void **state)
{
    fixture *f = *state;
    hook_log h = {0};
    h.fc = f->fc;
    f->policy.max_attempts = 1;
    f->policy.on_retry = log_retry;
    f->policy.on_retry_ud = &h;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(h.retries_seen, 0);
}

/* The "refresh authorization then retry" case: a 401 is retried once the
 * hook has put a fresh token where the operation reads it. */
typedef struct session {
    char token[16];
    int refreshes;
    int calls;
} session;

static resil_outcome call_with_token(resil_attempt_ctx *ctx)
{
    session *s = ctx->user;
    s->calls++;
    if (strcmp(s->token, "fresh") != 0)
        return resil_fail(RESIL_PERMANENT, 401, "token expired");
    return resil_ok();
}

static bool retry_unauthorized(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return o->code == 401 || resil_retry_on_default(o, NULL);
}

static void refresh_token(const resil_retry_info *info, void *user, void *ud)
{
    (void)ud;
    session *s = user;
    if (info->cause->code == 401) {
        strcpy(s->token, "fresh");
        s->refreshes++;
    }
}

static void on_retry_can_refresh_authorization_before_the_next_attempt(void **state)
{
    fixture *f = *state;
    f->policy.retry_on = retry_unauthorized;
    f->policy.on_retry = refresh_token;
    session s = {"stale", 0, 0};
    assert_int_equal(resil_retry_execute(&f->policy, &f->opts, call_with_token, &s,
                                         &f->result, NULL),
                     0);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.refreshes, 1);
}

/* What the classifier and the hook were shown. */
typedef struct ctx_log {
    resil_attempt_ctx judged[4];
    int njudged;
    resil_attempt_ctx announced[4];
    int nannounced;
} ctx_log;

static bool judge_and_keep(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    ctx_log *l = ud;
    if (l->njudged < 4)
        l->judged[l->njudged++] = *ctx;
    return resil_retry_on_default(o, NULL);
}

static void announce_and_keep(const resil_retry_info *info, void *user, void *ud)
{
    ctx_log *l = ud;
    assert_ptr_equal(user, info->ctx->user);
    if (l->nannounced < 4)
        l->announced[l->nannounced++] = *info->ctx;
}

static void assert_ctx(const resil_attempt_ctx *c, uint32_t attempt, resil_instant deadline,
                       const resil_cancel *cancel, const resil_clock *clock, const void *user)
{
    assert_int_equal(c->attempt, attempt);
    assert_int_equal(c->deadline, deadline);
    assert_ptr_equal(c->cancel, cancel);
    assert_ptr_equal(c->clock, clock);
    assert_ptr_equal(c->user, user);
    assert_int_equal(c->hedge, 0);
}

static void classifier_and_on_retry_see_the_failed_attempts_context(void **state)
{
    fixture *f = *state;
    ctx_log l = {0};
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->opts.cancel = &token;
    f->policy.max_total = RESIL_S(30);
    f->policy.retry_on = judge_and_keep;
    f->policy.retry_on_ud = &l;
    f->policy.on_retry = announce_and_keep;
    f->policy.on_retry_ud = &l;
    script s = failing_then_ok(2);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(l.njudged, 2);
    assert_int_equal(l.nannounced, 2);
    resil_clock *clock = resil_fake_clock_clock(f->fc);
    for (int i = 0; i < 2; i++) {
        assert_ctx(&l.judged[i], (uint32_t)i + 1, T0 + RESIL_S(30), &token, clock, &s);
        assert_ctx(&l.announced[i], (uint32_t)i + 1, T0 + RESIL_S(30), &token, clock, &s);
    }
    resil_cancel_destroy(&token);
}

/* ---- records ---------------------------------------------------------------- */

static void records_beyond_the_cap_are_counted_not_written(void **state)
{
    fixture *f = *state;
    hook_log h = {0};
    f->opts.records_cap = 2;
    f->opts.on_attempt = log_attempt;
    f->opts.on_attempt_ud = &h;
    f->records[2].number = 99;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.attempts, 4);
    assert_int_equal(f->result.records_len, 2);
    assert_int_equal(f->records[1].number, 2);
    assert_int_equal(f->records[2].number, 99);
    assert_int_equal(h.attempts_seen, 4);
}

static void no_record_array_is_fine(void **state)
{
    fixture *f = *state;
    f->opts.records = NULL;
    f->opts.records_cap = 5;
    script s = always(fail503);
    run(f, &s);
    assert_int_equal(f->result.attempts, 4);
    assert_int_equal(f->result.records_len, 0);
}

/* ---- budgets through the executor ------------------------------------------- */

static void a_shared_grpc_budget_stops_retries_across_executions(void **state)
{
    fixture *f = *state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_TOKENS);
    assert_int_equal(resil_budget_new(&o, &f->policy.budget, NULL), 0);
    f->policy.max_attempts = 3;
    script s = always(fail503);
    run(f, &s); /* 10 -> 9 retry, 8 retry, 7 exhausted */
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(s.calls, 3);
    script t = always(fail503);
    run(f, &t); /* 7 -> 6 retry, 5: denied */
    assert_int_equal(f->result.stop, RESIL_STOP_BUDGET_EXHAUSTED);
    assert_int_equal(t.calls, 2);
    script u = always(fail503);
    run(f, &u); /* 5 -> 4: denied at once */
    assert_int_equal(f->result.stop, RESIL_STOP_BUDGET_EXHAUSTED);
    assert_int_equal(u.calls, 1);
    resil_budget_free(f->policy.budget);
}

static void an_aws_quota_is_refunded_when_a_retry_succeeds(void **state)
{
    fixture *f = *state;
    resil_budget_opts o;
    resil_budget_opts_default(&o, RESIL_BUDGET_QUOTA);
    assert_int_equal(resil_budget_new(&o, &f->policy.budget, NULL), 0);
    script s = failing_then_ok(2);
    run(f, &s);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_true(resil_budget_level(f->policy.budget) == 495.0); /* -5 -5 +5 */
    resil_budget_free(f->policy.budget);
}

/* ---- the article's seeded waits --------------------------------------------- */

static void the_articles_seeded_waits_come_out_of_the_executor(void **state)
{
    fixture *f = *state;
    resil_rng_dotnet rng;
    resil_rng_dotnet_init(&rng, 42);
    f->opts.rng = &rng.base;
    f->policy.backoff.jitter = RESIL_JITTER_FULL;
    f->policy.backoff.max_delay = RESIL_S(2);
    script twice = failing_then_ok(2);
    run(f, &twice);
    script every = always(fail503);
    run(f, &every);
    const int want_ms[] = {66, 28, 12, 104, 67};
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(resil_fake_clock_sleep_at(f->fc, i) / RESIL_MS(1), want_ms[i]);
}

/* ---- bad calls -------------------------------------------------------------- */

static void an_invalid_policy_is_reported_and_nothing_runs(void **state)
{
    fixture *f = *state;
    f->policy.max_attempts = 0;
    script s = failing_then_ok(0);
    resil_err err = {0, ""};
    assert_int_equal(resil_retry_execute(&f->policy, &f->opts, scripted_op, &s,
                                         &f->result, &err),
                     RESIL_EINVAL);
    assert_int_equal(s.calls, 0);
    assert_non_null(strstr(err.message, "retry.max_attempts"));
}

static void null_arguments_are_rejected(void **state)
{
    fixture *f = *state;
    resil_err err = {0, ""};
    assert_int_equal(resil_retry_execute(NULL, NULL, scripted_op, NULL, &f->result, &err),
                     RESIL_EINVAL);
    assert_string_equal(err.message, "retry: policy, operation and result must not be NULL");
    assert_int_equal(resil_retry_execute(&f->policy, NULL, NULL, NULL, &f->result, NULL),
                     RESIL_EINVAL);
    assert_int_equal(resil_retry_execute(&f->policy, NULL, scripted_op, NULL, NULL, NULL),
                     RESIL_EINVAL);
}

static resil_outcome ok_op(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static void null_options_mean_system_clock_and_no_extras(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_retry_execute(&f->policy, NULL, ok_op, NULL, &f->result, NULL), 0);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.records_len, 0);
    assert_true(f->result.elapsed >= 0);
}

/* ---- without anything timed: the first attempt outside the loop --------- */

/* Nothing reads the time: no deadline, no records, no hook, no elapsed
 * asked for, so a first attempt runs before the loop (retry.c). */
static void untimed(fixture *f, resil_cancel *token)
{
    f->opts.records = NULL;
    f->opts.records_cap = 0;
    f->opts.cancel = token;
}

static void an_untimed_first_success_is_one_attempt_without_elapsed_time(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    untimed(f, &token);
    script s = failing_then_ok(0);
    s.takes = RESIL_MS(7);
    run(f, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.records_len, 0);
    assert_int_equal(f->result.final.kind, RESIL_SUCCESS);
    assert_duration_equal(f->result.elapsed, 0);
    assert_ctx(&s.seen[0], 1, RESIL_INSTANT_MAX, &token, resil_fake_clock_clock(f->fc), &s);
    assert_null(s.seen[0].trace);
    resil_cancel_destroy(&token);
}

static void an_untimed_failed_first_attempt_is_the_loops_attempt_one(void **state)
{
    fixture *f = *state;
    ctx_log l = {0};
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    untimed(f, &token);
    f->policy.retry_on = judge_and_keep;
    f->policy.retry_on_ud = &l;
    f->policy.on_retry = announce_and_keep;
    f->policy.on_retry_ud = &l;
    script s = failing_then_ok(1);
    run(f, &s);
    assert_int_equal(s.calls, 2);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 2);
    assert_duration_equal(f->result.elapsed, 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_MS(100));
    assert_int_equal(l.njudged, 1); /* the failure; a success is not judged */
    assert_int_equal(l.nannounced, 1);
    resil_clock *clock = resil_fake_clock_clock(f->fc);
    assert_ctx(&l.judged[0], 1, RESIL_INSTANT_MAX, &token, clock, &s);
    assert_ctx(&l.announced[0], 1, RESIL_INSTANT_MAX, &token, clock, &s);
    for (int i = 0; i < 2; i++) {
        assert_ctx(&s.seen[i], (uint32_t)i + 1, RESIL_INSTANT_MAX, &token, clock, &s);
        assert_null(s.seen[i].trace);
    }
    resil_cancel_destroy(&token);
}

static void an_untimed_run_with_a_fired_token_runs_nothing(void **state)
{
    fixture *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    resil_cancel_fire(&token);
    untimed(f, &token);
    script s = failing_then_ok(0);
    run(f, &s);
    assert_int_equal(s.calls, 0);
    assert_int_equal(f->result.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->result.final.kind, RESIL_CANCELLED);
    assert_string_equal(f->result.final.detail, "cancelled before the first attempt");
    resil_cancel_destroy(&token);
}

static void an_untimed_first_failure_that_is_final_stops_after_it(void **state)
{
    fixture *f = *state;
    untimed(f, NULL);
    static const resil_outcome bad[] = {{RESIL_PERMANENT, 400, RESIL_NO_HINT, "bad request"}};
    script s = always(bad);
    run(f, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(f->result.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.final.code, 400);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

static void a_timed_run_hands_the_operation_no_trace(void **state)
{
    fixture *f = *state;
    script s = failing_then_ok(1);
    run(f, &s);
    assert_int_equal(s.calls, 2);
    assert_null(s.seen[0].trace);
    assert_null(s.seen[1].trace);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(success_on_first_try_records_one_attempt),
        T(failures_then_success_sleep_each_decided_wait),
        T(records_carry_number_outcome_decision_wait_start_and_duration),
        T(the_operation_sees_its_attempt_context),
        T(without_any_deadline_the_context_says_none),
        T(an_outside_deadline_reaches_the_context),
        T(attempts_exhausted_keeps_the_last_failure),
        T(not_retryable_stops_after_one_attempt),
        T(retry_after_is_slept_and_recorded_as_its_source),
        T(a_wait_past_max_total_ends_the_run_without_sleeping),
        T(max_total_counts_attempt_time_and_waits),
        T(an_outside_deadline_stops_like_max_total),
        T(an_outside_deadline_already_reached_runs_nothing),
        T(non_idempotent_work_is_refused_and_never_runs),
        T(run_once_mode_runs_non_idempotent_work_exactly_once),
        T(forever_runs_until_success),
        T(forever_stops_at_the_deadline),
        T(cancel_before_the_first_attempt_runs_nothing),
        T(cancel_during_the_wait_stops_and_records_the_wait),
        T(cancel_during_the_wait_makes_the_final_outcome_a_cancellation),
        T(cancel_during_an_attempt_is_seen_before_the_next),
        T(an_attempt_reporting_cancelled_stops_the_run),
        T(a_token_fired_for_a_timeout_stops_with_deadline),
        T(a_timeout_fired_during_the_wait_stops_with_deadline),
        T(on_attempt_sees_every_attempt_with_its_decision),
        T(on_retry_comes_after_the_decision_and_before_the_wait),
        T(on_retry_is_not_called_on_a_stop),
        T(on_retry_can_refresh_authorization_before_the_next_attempt),
        T(classifier_and_on_retry_see_the_failed_attempts_context),
        T(records_beyond_the_cap_are_counted_not_written),
        T(no_record_array_is_fine),
        T(a_shared_grpc_budget_stops_retries_across_executions),
        T(an_aws_quota_is_refunded_when_a_retry_succeeds),
        T(the_articles_seeded_waits_come_out_of_the_executor),
        T(an_invalid_policy_is_reported_and_nothing_runs),
        T(null_arguments_are_rejected),
        T(null_options_mean_system_clock_and_no_extras),
        T(an_untimed_first_success_is_one_attempt_without_elapsed_time),
        T(an_untimed_failed_first_attempt_is_the_loops_attempt_one),
        T(an_untimed_run_with_a_fired_token_runs_nothing),
        T(an_untimed_first_failure_that_is_final_stops_after_it),
        T(a_timed_run_hands_the_operation_no_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
