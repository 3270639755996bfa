/*
 * test_telemetry.c — the events strategies report (what, in which order,
 * with which fields) and the log sink's lines in logfmt and JSON.
 */
#include "test.h"

/* ---- capturing events -------------------------------------------------------- */

typedef struct seen {
    resil_event ev; /* strings below are copies */
    char pipeline[64], strategy[32], key[64], reason[64], from[32], to[32];
    resil_outcome outcome;
    bool has_outcome;
} seen;

typedef struct capture {
    seen events[64];
    int n;
} capture;

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src != NULL ? src : "(null)");
}

static void listen(const resil_event *ev, void *ud)
{
    capture *c = ud;
    if (c->n == 64)
        return;
    seen *s = &c->events[c->n++];
    s->ev = *ev;
    copy(s->pipeline, sizeof s->pipeline, ev->pipeline);
    copy(s->strategy, sizeof s->strategy, ev->strategy);
    copy(s->key, sizeof s->key, ev->key);
    copy(s->reason, sizeof s->reason, ev->reason);
    copy(s->from, sizeof s->from, ev->from_name);
    copy(s->to, sizeof s->to, ev->to_name);
    s->has_outcome = ev->outcome != NULL;
    if (s->has_outcome)
        s->outcome = *ev->outcome;
}

static int count(const capture *c, resil_event_type t)
{
    int n = 0;
    for (int i = 0; i < c->n; i++)
        n += c->events[i].ev.type == t;
    return n;
}

static const seen *first(const capture *c, resil_event_type t)
{
    for (int i = 0; i < c->n; i++)
        if (c->events[i].ev.type == t)
            return &c->events[i];
    fail_msg("no %s event", resil_event_name(t));
    return NULL;
}

/* ---- a world ------------------------------------------------------------------- */

typedef struct world {
    resil_fake_clock *fc;
    resil_pipeline_builder *b;
    resil_pipeline *p;
    capture cap;
    const resil_outcome *script;
    size_t n;
    int calls;
    resil_pipeline_result r;
} world;

static resil_outcome op(resil_attempt_ctx *ctx)
{
    world *w = ctx->user;
    size_t i = (size_t)w->calls < w->n ? (size_t)w->calls : w->n - 1;
    w->calls++;
    resil_fake_clock_advance(w->fc, RESIL_MS(10));
    return w->script[i];
}

static resil_outcome polling_op(resil_attempt_ctx *ctx)
{
    world *w = ctx->user;
    while (resil_ctx_check(ctx) == 0)
        resil_fake_clock_advance(w->fc, RESIL_MS(100));
    return resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "gave up");
}

static int setup(void **state)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), 0, &w->fc), 0);
    assert_int_equal(resil_pipeline_builder_new("orders", &w->b, NULL), 0);
    resil_pipeline_builder_clock(w->b, resil_fake_clock_clock(w->fc));
    assert_int_equal(resil_pipeline_builder_listen(w->b, listen, &w->cap), 0);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    resil_pipeline_builder_free(w->b);
    resil_pipeline_free(w->p);
    resil_fake_clock_free(w->fc);
    free(w);
    return 0;
}

static void run_with(world *w, resil_op_fn fn, const resil_outcome *script, size_t n)
{
    if (w->p == NULL) {
        resil_err err = {0, ""};
        if (resil_pipeline_build(w->b, &w->p, &err) != 0)
            fail_msg("build: %s", err.message);
    }
    w->script = script;
    w->n = n;
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    c.operation = "GetOrder";
    assert_int_equal(resil_pipeline_execute(w->p, fn, &c, &w->r), 0);
}

static void run(world *w, const resil_outcome *script, size_t n) { run_with(w, op, script, n); }

static void add_retry(world *w, uint32_t attempts)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = attempts;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(2);
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(w->b, &p), 0);
}

/* ---- the stream of a retried execution ---------------------------------------------- */

static void retried_execution_reports_attempts_retries_and_its_end_in_order(void **state)
{
    world *w = *state;
    add_retry(w, 3);
    resil_outcome script[] = {resil_fail(RESIL_TRANSIENT, 503, "service unavailable"),
                              resil_fail(RESIL_TRANSIENT, 503, "service unavailable"),
                              resil_ok()};
    run(w, script, 3);
    static const resil_event_type order[] = {
        RESIL_EVENT_ATTEMPT, RESIL_EVENT_RETRY, RESIL_EVENT_ATTEMPT, RESIL_EVENT_RETRY,
        RESIL_EVENT_ATTEMPT, RESIL_EVENT_EXECUTION};
    assert_int_equal(w->cap.n, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(w->cap.events[i].ev.type, order[i]);

    const seen *a1 = &w->cap.events[0];
    assert_string_equal(a1->pipeline, "orders");
    assert_string_equal(a1->strategy, "retry");
    assert_string_equal(a1->key, "GetOrder");
    assert_int_equal(a1->ev.attempt, 1);
    assert_duration_equal(a1->ev.duration, RESIL_MS(10));
    assert_true(a1->ev.handled);
    assert_int_equal(a1->ev.stop, RESIL_STOP_NONE);
    assert_int_equal(a1->ev.severity, RESIL_SEVERITY_WARNING);
    assert_int_equal(a1->ev.at, RESIL_S(1) + RESIL_MS(10));

    const seen *r1 = &w->cap.events[1];
    assert_int_equal(r1->ev.attempt, 1);
    assert_duration_equal(r1->ev.delay, RESIL_S(2));
    assert_int_equal(r1->ev.source, RESIL_WAIT_BACKOFF);
    assert_int_equal(r1->outcome.code, 503);
    assert_int_equal(r1->ev.severity, RESIL_SEVERITY_WARNING);

    const seen *a3 = &w->cap.events[4];
    assert_int_equal(a3->ev.attempt, 3);
    assert_false(a3->ev.handled);
    assert_int_equal(a3->ev.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(a3->ev.severity, RESIL_SEVERITY_INFO);

    const seen *end = &w->cap.events[5];
    assert_string_equal(end->strategy, "");
    assert_int_equal(end->ev.attempt, 3);
    assert_duration_equal(end->ev.duration, RESIL_S(4) + RESIL_MS(30));
    assert_int_equal(end->ev.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(end->outcome.kind, RESIL_SUCCESS);
    assert_int_equal(end->ev.severity, RESIL_SEVERITY_DEBUG);
}

static void single_attempt_pipeline_reports_its_attempt_without_a_strategy(void **state)
{
    world *w = *state;
    resil_outcome ok = resil_ok();
    run(w, &ok, 1);
    assert_int_equal(w->cap.n, 2);
    assert_int_equal(w->cap.events[0].ev.type, RESIL_EVENT_ATTEMPT);
    assert_string_equal(w->cap.events[0].strategy, "");
}

static void budget_denial_is_reported_after_the_attempt(void **state)
{
    world *w = *state;
    resil_budget_opts bo;
    resil_budget_opts_default(&bo, RESIL_BUDGET_QUOTA);
    bo.capacity = 4; /* less than one retry's cost */
    resil_budget *budget;
    assert_int_equal(resil_budget_new(&bo, &budget, NULL), 0);
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.budget = budget;
    assert_int_equal(resil_pipeline_add_retry(w->b, &p), 0);
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, "x");
    run(w, &fail, 1);
    assert_int_equal(w->r.stop, RESIL_STOP_BUDGET_EXHAUSTED);
    const seen *d = first(&w->cap, RESIL_EVENT_BUDGET_DENIED);
    assert_string_equal(d->strategy, "retry");
    assert_string_equal(d->reason, "quota");
    assert_int_equal(d->ev.attempt, 1);
    resil_pipeline_free(w->p);
    w->p = NULL;
    resil_budget_free(budget);
}

/* ---- breakers ---------------------------------------------------------------------------- */

static void owned_breaker_reports_its_whole_cycle(void **state)
{
    world *w = *state;
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.failure_threshold = 1;
    bo.break_duration = RESIL_S(5);
    assert_int_equal(resil_pipeline_add_breaker(w->b, &bo), 0);
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, "x"), ok = resil_ok();
    run(w, &fail, 1);
    const seen *opened = first(&w->cap, RESIL_EVENT_BREAKER_OPENED);
    assert_string_equal(opened->pipeline, "orders");
    assert_string_equal(opened->strategy, "breaker");
    assert_string_equal(opened->key, "orders");
    assert_string_equal(opened->from, "closed");
    assert_string_equal(opened->to, "open");
    assert_string_equal(opened->reason, "consecutive failures");
    assert_duration_equal(opened->ev.duration, RESIL_S(5));
    assert_int_equal(opened->ev.severity, RESIL_SEVERITY_ERROR);

    run(w, &ok, 1);
    const seen *rejected = first(&w->cap, RESIL_EVENT_BREAKER_REJECTED);
    assert_duration_equal(rejected->ev.delay, RESIL_S(5));
    assert_string_equal(rejected->reason, "circuit open");
    assert_int_equal(rejected->outcome.code, RESIL_STRATEGY_BREAKER);

    resil_fake_clock_advance(w->fc, RESIL_S(5));
    run(w, &ok, 1);
    assert_int_equal(count(&w->cap, RESIL_EVENT_BREAKER_HALF_OPENED), 1);
    const seen *closed = first(&w->cap, RESIL_EVENT_BREAKER_CLOSED);
    assert_string_equal(closed->from, "half-open");
    assert_string_equal(closed->reason, "probes succeeded");
    assert_int_equal(closed->ev.severity, RESIL_SEVERITY_INFO);
}

static int caller_listener_calls;

static void caller_breaker_listener(resil_breaker *b, const resil_breaker_event *ev, void *ud)
{
    (void)b;
    (void)ev;
    (void)ud;
    caller_listener_calls++;
}

static void owned_breaker_still_calls_the_listener_its_options_named(void **state)
{
    world *w = *state;
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.failure_threshold = 1;
    bo.listener = caller_breaker_listener;
    caller_listener_calls = 0;
    assert_int_equal(resil_pipeline_add_breaker(w->b, &bo), 0);
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, "x");
    run(w, &fail, 1);
    assert_int_equal(caller_listener_calls, 1);
    assert_int_equal(count(&w->cap, RESIL_EVENT_BREAKER_OPENED), 1);
}

static void shared_breaker_forwards_through_the_adapter(void **state)
{
    (void)state;
    capture cap = {.n = 0};
    resil_listener l = {.fn = listen, .ud = &cap, .pipeline = NULL};
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.failure_threshold = 1;
    bo.name = "payments";
    bo.listener = resil_telemetry_breaker_listener;
    bo.listener_ud = &l;
    resil_breaker *b;
    assert_int_equal(resil_breaker_new(&bo, &b, NULL), 0);
    resil_breaker_isolate(b);
    assert_int_equal(cap.n, 1);
    assert_int_equal(cap.events[0].ev.type, RESIL_EVENT_BREAKER_ISOLATED);
    assert_string_equal(cap.events[0].pipeline, "");
    assert_string_equal(cap.events[0].key, "payments");
    assert_string_equal(cap.events[0].reason, "isolated by hand");
    resil_breaker_free(b);
}

/* ---- the other strategies ---------------------------------------------------------------- */

static void attempt_timeout_reports_the_timeout_that_elapsed(void **state)
{
    world *w = *state;
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = RESIL_S(1);
    assert_int_equal(resil_pipeline_add_attempt_timeout(w->b, &t), 0);
    run_with(w, polling_op, NULL, 0);
    const seen *e = first(&w->cap, RESIL_EVENT_TIMEOUT);
    assert_string_equal(e->strategy, "attempt-timeout");
    assert_duration_equal(e->ev.duration, RESIL_S(1));
    assert_int_equal(e->outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(e->ev.severity, RESIL_SEVERITY_ERROR);
}

static void rejections_are_reported_by_the_strategy_that_refused(void **state)
{
    world *w = *state;
    resil_ratelimit_opts ro;
    resil_ratelimit_opts_default(&ro, RESIL_RATELIMIT_FIXED_WINDOW);
    ro.permits = 1;
    assert_int_equal(resil_pipeline_add_rate_limiter(w->b, &ro, 0), 0);
    resil_bulkhead_opts bo;
    resil_bulkhead_opts_default(&bo);
    assert_int_equal(resil_pipeline_add_bulkhead(w->b, &bo), 0);
    resil_outcome ok = resil_ok();
    run(w, &ok, 1);
    run(w, &ok, 1);
    const seen *e = first(&w->cap, RESIL_EVENT_RATE_LIMITED);
    assert_string_equal(e->strategy, "rate-limiter");
    assert_duration_equal(e->ev.delay, RESIL_MS(990)); /* the first call took 10 ms */
    assert_string_equal(e->reason, "rate limited");
    assert_int_equal(e->ev.attempt, 0);
}

static resil_outcome cached(const resil_fallback_info *info, void *user, void *ud)
{
    (void)info;
    (void)user;
    (void)ud;
    return resil_ok();
}

static void fallback_reports_what_it_replaced(void **state)
{
    world *w = *state;
    resil_fallback_opts fo;
    resil_fallback_opts_default(&fo);
    fo.action = cached;
    assert_int_equal(resil_pipeline_add_fallback(w->b, &fo), 0);
    resil_outcome fail = resil_fail(RESIL_PERMANENT, 500, "boom");
    run(w, &fail, 1);
    const seen *e = first(&w->cap, RESIL_EVENT_FALLBACK);
    assert_string_equal(e->strategy, "fallback");
    assert_int_equal(e->outcome.code, 500);
    assert_string_equal(e->reason, "boom");
    const seen *end = first(&w->cap, RESIL_EVENT_EXECUTION);
    assert_int_equal(end->outcome.kind, RESIL_SUCCESS);
}

static int hot_cpu(void *ud, resil_health_sample *out)
{
    (void)ud;
    out->cpu = 96;
    out->memory = 0;
    return 0;
}

static void owned_monitor_reports_level_changes_and_sheds(void **state)
{
    world *w = *state;
    resil_degrade_opts d;
    resil_degrade_opts_default(&d);
    d.sampler = hot_cpu;
    d.check_interval = RESIL_MS(1);
    d.min_level_duration = 0;
    assert_int_equal(resil_pipeline_add_degrade(w->b, &d), 0);
    resil_err err = {0, ""};
    if (resil_pipeline_build(w->b, &w->p, &err) != 0)
        fail_msg("%s", err.message);
    resil_fake_clock_advance(w->fc, RESIL_S(1));
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    resil_outcome ok = resil_ok();
    w->script = &ok;
    w->n = 1;
    assert_int_equal(resil_pipeline_execute(w->p, op, &c, &w->r), 0);
    const seen *e = first(&w->cap, RESIL_EVENT_DEGRADE_CHANGED);
    assert_string_equal(e->pipeline, "orders");
    assert_string_equal(e->to, "Emergency");
    assert_string_equal(e->reason, "cpu");
    assert_int_equal(w->r.outcome.kind, RESIL_SUCCESS); /* untagged: never shed */
    c.priority = 99;
    assert_int_equal(resil_pipeline_execute(w->p, op, &c, &w->r), 0);
    const seen *shed = first(&w->cap, RESIL_EVENT_DEGRADE_REJECTED);
    assert_string_equal(shed->reason, "shed at level Emergency");
    assert_string_equal(shed->strategy, "degradation");
}

static void shared_monitor_forwards_level_changes_through_the_adapter(void **state)
{
    (void)state;
    capture cap = {.n = 0};
    resil_listener l = {.fn = listen, .ud = &cap, .pipeline = "orders"};
    resil_degrade_opts d;
    resil_degrade_opts_default(&d);
    d.auto_adjust = false;
    d.on_change = resil_telemetry_degrade_listener;
    d.on_change_ud = &l;
    resil_degrade *m;
    assert_int_equal(resil_degrade_new(&d, &m, NULL), 0);
    assert_int_equal(resil_degrade_set_level(m, 3), 0);
    assert_int_equal(cap.n, 1);
    const seen *e = &cap.events[0];
    assert_int_equal(e->ev.type, RESIL_EVENT_DEGRADE_CHANGED);
    assert_string_equal(e->pipeline, "orders");
    assert_string_equal(e->strategy, "degradation");
    assert_int_equal(e->ev.from, 0);
    assert_int_equal(e->ev.to, 3);
    assert_string_equal(e->from, "Normal");
    assert_string_equal(e->to, "Major");
    assert_string_equal(e->reason, "manual");
    resil_degrade_free(m);
}

/* ---- names and severities -------------------------------------------------------------- */

static void events_and_strategies_have_stable_names(void **state)
{
    (void)state;
    static const char *const names[RESIL_EVENT_TYPE_COUNT] = {
        "execution", "attempt", "retry", "breaker_opened", "breaker_half_opened",
        "breaker_closed", "breaker_isolated", "breaker_rejected", "timeout", "budget_denied",
        "bulkhead_rejected", "rate_limited", "hedge", "fallback", "degrade_changed",
        "degrade_rejected", "chaos_injected", "limit_changed", "limit_rejected", "throttled",
        "hedge_ended"};
    for (int i = 0; i < RESIL_EVENT_TYPE_COUNT; i++)
        assert_string_equal(resil_event_name((resil_event_type)i), names[i]);
    assert_string_equal(resil_event_name((resil_event_type)99), "");
    assert_string_equal(resil_strategy_name(RESIL_STRATEGY_ATTEMPT_TIMEOUT), "attempt-timeout");
    assert_string_equal(resil_strategy_name(RESIL_STRATEGY_DEGRADE), "degradation");
    assert_string_equal(resil_strategy_name(RESIL_STRATEGY_CHAOS_BEHAVIOR), "chaos-behavior");
    assert_string_equal(resil_strategy_name(RESIL_STRATEGY_ADAPTIVE_LIMITER), "adaptive-limiter");
    assert_string_equal(resil_strategy_name(RESIL_STRATEGY_THROTTLE), "throttle");
    assert_string_equal(resil_strategy_name(RESIL_STRATEGY_NONE), "");
    assert_string_equal(resil_strategy_name((resil_strategy_kind)42), "");
    assert_string_equal(resil_severity_name(RESIL_SEVERITY_WARNING), "warning");
    assert_string_equal(resil_severity_name((resil_severity)9), "");
}

static void severities_follow_pollys_levels(void **state)
{
    (void)state;
    resil_outcome ok = resil_ok(), fail = resil_fail(RESIL_TRANSIENT, 1, NULL);
    assert_int_equal(resil_event_severity(RESIL_EVENT_ATTEMPT, &ok), RESIL_SEVERITY_INFO);
    assert_int_equal(resil_event_severity(RESIL_EVENT_ATTEMPT, &fail), RESIL_SEVERITY_WARNING);
    assert_int_equal(resil_event_severity(RESIL_EVENT_EXECUTION, &ok), RESIL_SEVERITY_DEBUG);
    assert_int_equal(resil_event_severity(RESIL_EVENT_EXECUTION, &fail), RESIL_SEVERITY_WARNING);
    assert_int_equal(resil_event_severity(RESIL_EVENT_RETRY, &fail), RESIL_SEVERITY_WARNING);
    assert_int_equal(resil_event_severity(RESIL_EVENT_BREAKER_OPENED, NULL), RESIL_SEVERITY_ERROR);
    assert_int_equal(resil_event_severity(RESIL_EVENT_BREAKER_HALF_OPENED, NULL),
                     RESIL_SEVERITY_WARNING);
    assert_int_equal(resil_event_severity(RESIL_EVENT_BREAKER_CLOSED, NULL), RESIL_SEVERITY_INFO);
    assert_int_equal(resil_event_severity(RESIL_EVENT_TIMEOUT, NULL), RESIL_SEVERITY_ERROR);
    assert_int_equal(resil_event_severity(RESIL_EVENT_HEDGE, NULL), RESIL_SEVERITY_WARNING);
    assert_int_equal(resil_event_severity(RESIL_EVENT_HEDGE_ENDED, &fail), RESIL_SEVERITY_DEBUG);
    assert_int_equal(resil_event_severity(RESIL_EVENT_FALLBACK, NULL), RESIL_SEVERITY_WARNING);
}

/* ---- the log sink --------------------------------------------------------------------------- */

static resil_event retry_event(const resil_outcome *cause)
{
    resil_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = RESIL_EVENT_RETRY;
    ev.severity = RESIL_SEVERITY_WARNING;
    ev.pipeline = "orders";
    ev.strategy = "retry";
    ev.key = "GetOrder";
    ev.reason = ev.from_name = ev.to_name = "";
    ev.attempt = 1;
    ev.delay = RESIL_S(2);
    ev.source = RESIL_WAIT_BACKOFF;
    ev.outcome = cause;
    return ev;
}

static resil_log_sink sink_of(resil_fake_clock *fc, resil_log_format format)
{
    resil_log_opts o;
    resil_log_opts_default(&o);
    o.format = format;
    o.clock = resil_fake_clock_clock(fc);
    resil_log_sink s;
    assert_int_equal(resil_log_sink_init(&s, &o, NULL), 0);
    return s;
}

static void logfmt_retry_line_carries_attempt_delay_and_cause(void **state)
{
    world *w = *state;
    resil_log_sink s = sink_of(w->fc, RESIL_LOG_LOGFMT);
    resil_outcome cause = resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    resil_event ev = retry_event(&cause);
    char line[512];
    size_t n = resil_log_format_event(&s, &ev, line, sizeof line);
    const char *want = "time=1970-01-01T00:00:00.000Z level=warning event=retry pipeline=orders "
                       "strategy=retry key=GetOrder attempt=1 delay=2s source=backoff "
                       "cause=transient code=503 detail=\"service unavailable\"\n";
    assert_string_equal(line, want);
    assert_int_equal(n, strlen(want));
}

static void json_retry_line_carries_the_same_fields(void **state)
{
    world *w = *state;
    resil_fake_clock_advance(w->fc, RESIL_MS(1500));
    resil_log_sink s = sink_of(w->fc, RESIL_LOG_JSON);
    resil_outcome cause = resil_fail_after(RESIL_THROTTLED, 429, "slow", RESIL_S(3));
    resil_event ev = retry_event(&cause);
    ev.source = RESIL_WAIT_RETRY_AFTER;
    ev.delay = RESIL_S(3);
    char line[512];
    resil_log_format_event(&s, &ev, line, sizeof line);
    assert_string_equal(line,
                        "{\"time\":\"1970-01-01T00:00:01.500Z\",\"level\":\"warning\","
                        "\"event\":\"retry\",\"pipeline\":\"orders\",\"strategy\":\"retry\","
                        "\"key\":\"GetOrder\",\"attempt\":1,\"delay\":\"3s\","
                        "\"source\":\"Retry-After\",\"cause\":\"throttled\",\"code\":429,"
                        "\"detail\":\"slow\",\"retry_after\":\"3s\"}\n");
}

static void state_change_line_says_from_to_and_why(void **state)
{
    world *w = *state;
    resil_log_opts o;
    resil_log_opts_default(&o);
    o.timestamps = false;
    resil_log_sink s;
    assert_int_equal(resil_log_sink_init(&s, &o, NULL), 0);
    resil_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = RESIL_EVENT_BREAKER_OPENED;
    ev.severity = RESIL_SEVERITY_ERROR;
    ev.pipeline = "orders";
    ev.strategy = "breaker";
    ev.key = "api.example";
    ev.duration = RESIL_S(5);
    ev.from_name = "closed";
    ev.to_name = "open";
    ev.reason = "failure ratio";
    char line[256];
    resil_log_format_event(&s, &ev, line, sizeof line);
    assert_string_equal(line, "level=error event=breaker_opened pipeline=orders strategy=breaker "
                              "key=api.example duration=5s from=closed to=open "
                              "reason=\"failure ratio\"\n");
    (void)w;
}

static void values_are_escaped_for_each_format(void **state)
{
    world *w = *state;
    resil_outcome cause = resil_fail(RESIL_TRANSIENT, 1, "a\"b\nc\x01");
    resil_event ev = retry_event(&cause);
    char line[512];
    resil_log_sink s = sink_of(w->fc, RESIL_LOG_LOGFMT);
    resil_log_format_event(&s, &ev, line, sizeof line);
    assert_non_null(strstr(line, " detail=\"a\\\"b\\nc\\x01\"\n"));
    s = sink_of(w->fc, RESIL_LOG_JSON);
    resil_log_format_event(&s, &ev, line, sizeof line);
    assert_non_null(strstr(line, ",\"detail\":\"a\\\"b\\nc\\u0001\"}"));
}

typedef struct lines {
    char text[8][RESIL_LOG_LINE_MAX];
    size_t len[8];
    int n;
} lines;

static int collect(const char *text, size_t len, void *ud)
{
    lines *l = ud;
    if (l->n < 8) {
        memcpy(l->text[l->n], text, len);
        l->text[l->n][len < RESIL_LOG_LINE_MAX ? len : RESIL_LOG_LINE_MAX - 1] = '\0';
        l->len[l->n++] = len;
    }
    return 0;
}

static void sink_logs_retries_not_attempts_unless_verbose(void **state)
{
    world *w = *state;
    lines out = {.n = 0};
    resil_log_opts o;
    resil_log_opts_default(&o);
    o.timestamps = false;
    o.write = collect;
    o.write_ud = &out;
    resil_log_sink s;
    assert_int_equal(resil_log_sink_init(&s, &o, NULL), 0);
    assert_int_equal(resil_pipeline_builder_listen(w->b, resil_log_on_event, &s), 0);
    add_retry(w, 2);
    resil_outcome script[] = {resil_fail(RESIL_TRANSIENT, 503, "x"), resil_ok()};
    run(w, script, 2);
    assert_int_equal(out.n, 1);
    assert_non_null(strstr(out.text[0], "event=retry"));
    s.opts.verbose = true;
    w->calls = 0;
    run(w, script, 2);
    /* attempt (failed: warning), retry, attempt (info); the execution is debug */
    assert_int_equal(out.n, 1 + 3);
    assert_non_null(strstr(out.text[1], "event=attempt"));
}

static void min_severity_filters(void **state)
{
    world *w = *state;
    lines out = {.n = 0};
    resil_log_opts o;
    resil_log_opts_default(&o);
    o.min_severity = RESIL_SEVERITY_ERROR;
    o.write = collect;
    o.write_ud = &out;
    resil_log_sink s;
    assert_int_equal(resil_log_sink_init(&s, &o, NULL), 0);
    resil_outcome cause = resil_fail(RESIL_TRANSIENT, 503, "x");
    resil_event ev = retry_event(&cause);
    resil_log_on_event(&ev, &s);
    assert_int_equal(out.n, 0);
    ev.type = RESIL_EVENT_TIMEOUT;
    ev.severity = RESIL_SEVERITY_ERROR;
    resil_log_on_event(&ev, &s);
    assert_int_equal(out.n, 1);
    (void)w;
}

static void overlong_line_is_cut_and_still_ends_the_line(void **state)
{
    world *w = *state;
    lines out = {.n = 0};
    resil_log_opts o;
    resil_log_opts_default(&o);
    o.write = collect;
    o.write_ud = &out;
    resil_log_sink s;
    assert_int_equal(resil_log_sink_init(&s, &o, NULL), 0);
    char key[2000];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    resil_outcome cause = resil_fail(RESIL_TRANSIENT, 503, "x");
    resil_event ev = retry_event(&cause);
    ev.key = key;
    resil_log_on_event(&ev, &s);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.len[0], RESIL_LOG_LINE_MAX - 1);
    assert_string_equal(out.text[0] + RESIL_LOG_LINE_MAX - 5, "...\n");
    (void)w;
}

static void sink_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_log_opts o;
    resil_log_opts_default(&o);
    assert_int_equal(o.format, RESIL_LOG_LOGFMT);
    assert_int_equal(o.min_severity, RESIL_SEVERITY_INFO);
    assert_true(o.timestamps);
    assert_false(o.verbose);
    resil_log_sink s;
    resil_err err = {0, ""};
    o.format = (resil_log_format)7;
    assert_int_equal(resil_log_sink_init(&s, &o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "log.format must be logfmt or json, got 7");
    o.format = RESIL_LOG_JSON;
    o.min_severity = (resil_severity)9;
    assert_int_equal(resil_log_sink_init(&s, &o, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "log.min_severity must be debug, info, warning or error, got 9");
    assert_int_equal(resil_log_sink_init(NULL, &o, &err), RESIL_EINVAL);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(retried_execution_reports_attempts_retries_and_its_end_in_order),
        T(single_attempt_pipeline_reports_its_attempt_without_a_strategy),
        T(budget_denial_is_reported_after_the_attempt),
        T(owned_breaker_reports_its_whole_cycle),
        T(owned_breaker_still_calls_the_listener_its_options_named),
        T(shared_breaker_forwards_through_the_adapter),
        T(attempt_timeout_reports_the_timeout_that_elapsed),
        T(rejections_are_reported_by_the_strategy_that_refused),
        T(fallback_reports_what_it_replaced),
        T(owned_monitor_reports_level_changes_and_sheds),
        T(shared_monitor_forwards_level_changes_through_the_adapter),
        T(events_and_strategies_have_stable_names),
        T(severities_follow_pollys_levels),
        T(logfmt_retry_line_carries_attempt_delay_and_cause),
        T(json_retry_line_carries_the_same_fields),
        T(state_change_line_says_from_to_and_why),
        T(values_are_escaped_for_each_format),
        T(sink_logs_retries_not_attempts_unless_verbose),
        T(min_severity_filters),
        T(overlong_line_is_cut_and_still_ends_the_line),
        T(sink_options_are_checked_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
