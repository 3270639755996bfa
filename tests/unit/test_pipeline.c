/*
 * test_pipeline.c — the pipeline end to end on the fake clock: the standard
 * pipeline's headline scenarios (503, 503, 200; a total timeout that ends a
 * wait; a breaker opening inside the retry loop; a full bulkhead), each
 * strategy's rejection as a named outcome, the result's records, and the
 * single attempt of a pipeline without retry.
 */
#include "test.h"

#define T0 RESIL_S(1000)

/* ---- a scripted operation ------------------------------------------------ */

typedef struct script {
    const resil_outcome *outcomes; /* returned in turn; the last repeats */
    size_t n;
    int calls;
    resil_duration takes; /* virtual time each call lasts */
    resil_fake_clock *fc;
    resil_attempt_ctx seen[8];
} script;

static resil_outcome scripted(resil_attempt_ctx *ctx)
{
    script *s = ctx->user;
    if (s->calls < 8)
        s->seen[s->calls] = *ctx;
    size_t i = (size_t)s->calls < s->n ? (size_t)s->calls : s->n - 1;
    s->calls++;
    if (s->takes > 0)
        resil_fake_clock_advance(s->fc, s->takes);
    return s->outcomes[i];
}

static resil_outcome http(int status)
{
    if (status < 400)
        return resil_ok();
    return resil_fail(status >= 500 ? RESIL_TRANSIENT : RESIL_PERMANENT, status, "http");
}

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
    resil_pipeline *p;
    resil_attempt_record records[16];
    resil_call call;
    resil_pipeline_result result;
    resil_rng_seeded rng;
    script s;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(T0, 0, &f->fc), 0);
    f->clock = resil_fake_clock_clock(f->fc);
    resil_call_default(&f->call);
    f->call.records = f->records;
    f->call.records_cap = 16;
    f->call.user = &f->s;
    resil_rng_seeded_init(&f->rng, 42);
    f->call.rng = &f->rng.base;
    f->s.fc = f->fc;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_pipeline_free(f->p);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

static void script_of(fixture *f, const resil_outcome *outcomes, size_t n)
{
    f->s.outcomes = outcomes;
    f->s.n = n;
}

static void run(fixture *f)
{
    assert_int_equal(resil_pipeline_execute(f->p, scripted, &f->call, &f->result), 0);
}

static void standard(fixture *f, resil_standard_opts *o)
{
    resil_err err = {0, ""};
    o->clock = f->clock;
    int rc = resil_pipeline_standard(o, &f->p, &err);
    if (rc != 0)
        fail_msg("standard: %s", err.message);
}

static resil_pipeline_builder *builder(fixture *f, const char *name)
{
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new(name, &b, NULL), 0);
    resil_pipeline_builder_clock(b, f->clock);
    return b;
}

static void build(fixture *f, resil_pipeline_builder *b)
{
    resil_err err = {0, ""};
    int rc = resil_pipeline_build(b, &f->p, &err);
    resil_pipeline_builder_free(b);
    if (rc != 0)
        fail_msg("build: %s", err.message);
}

/* ---- the standard pipeline ---------------------------------------------------- */

static void standard_503_503_200_succeeds_after_exactly_three_attempts(void **state)
{
    fixture *f = *state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    standard(f, &o);
    resil_outcome outs[] = {http(503), http(503), http(200)};
    script_of(f, outs, 3);
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 3);
    assert_int_equal(f->s.calls, 3);
    assert_int_equal(f->result.records_len, 3);
    assert_int_equal(f->records[0].outcome.code, 503);
    assert_int_equal(f->records[1].outcome.code, 503);
    assert_int_equal(f->records[2].outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 2);
    assert_duration_equal(f->result.elapsed,
                          f->records[0].wait + f->records[1].wait);
    assert_false(f->result.fallback);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_NONE);
}

static void standard_waits_grow_exponentially_from_two_seconds_without_jitter(void **state)
{
    fixture *f = *state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.retry.backoff.jitter = RESIL_JITTER_NONE;
    standard(f, &o);
    resil_outcome outs[] = {http(503)};
    script_of(f, outs, 1);
    run(f);
    /* 2 s + 4 s + 8 s = 14 s of waits fit the 30 s total: all 4 attempts run. */
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->result.attempts, 4);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(2));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 1), RESIL_S(4));
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 2), RESIL_S(8));
    assert_int_equal(f->result.outcome.code, 503);
}

static void standard_gives_each_attempt_a_ten_second_deadline_inside_the_total(void **state)
{
    fixture *f = *state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.retry.backoff.jitter = RESIL_JITTER_NONE;
    standard(f, &o);
    resil_outcome outs[] = {http(503), http(200)};
    script_of(f, outs, 2);
    f->s.takes = RESIL_S(1);
    run(f);
    /* attempt 1 starts at T0: min(T0+30s, T0+10s); attempt 2 at T0+1s+2s. */
    assert_int_equal(f->s.seen[0].deadline, T0 + RESIL_S(10));
    assert_int_equal(f->s.seen[1].deadline, T0 + RESIL_S(13));
    assert_int_equal(f->s.seen[0].attempt, 1);
    assert_int_equal(f->s.seen[1].attempt, 2);
    assert_non_null(f->s.seen[0].cancel);
    assert_ptr_equal(f->s.seen[0].clock, f->clock);
    assert_ptr_equal(f->s.seen[0].user, &f->s);
}

/* The deadlines come from the pipeline's clock read at entry: with none
 * given, the system clock (precise); given the coarse clock, a coarse
 * reading, never ahead of the precise time. Read on the real clocks, so
 * the deadline is pinned between readings of the same clock taken around
 * the call. */
static resil_outcome seen_ctx(resil_attempt_ctx *ctx)
{
    *(resil_attempt_ctx *)ctx->user = *ctx;
    return resil_ok();
}

static resil_attempt_ctx standard_attempt_on(resil_clock *clock, resil_clock *reader,
                                             resil_instant *before, resil_instant *after)
{
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    o.clock = clock;
    resil_pipeline *p;
    assert_int_equal(resil_pipeline_standard(&o, &p, NULL), 0);
    resil_attempt_ctx seen = {0};
    resil_call call;
    resil_call_default(&call);
    call.user = &seen;
    resil_pipeline_result r;
    *before = resil_clock_now(reader);
    assert_int_equal(resil_pipeline_execute(p, seen_ctx, &call, &r), 0);
    *after = resil_clock_now(reader);
    assert_int_equal(r.outcome.kind, RESIL_SUCCESS);
    resil_pipeline_free(p);
    return seen;
}

static void a_pipeline_given_no_clock_takes_its_deadlines_from_the_system_clock(void **state)
{
    (void)state;
    resil_instant before, after;
    resil_attempt_ctx c = standard_attempt_on(NULL, resil_clock_system(), &before, &after);
    assert_ptr_equal(c.clock, resil_clock_system());
    assert_true(c.deadline >= before + RESIL_S(10));
    assert_true(c.deadline <= after + RESIL_S(10));
}

static void a_pipeline_on_the_coarse_clock_takes_its_deadlines_from_a_coarse_reading(void **state)
{
    (void)state;
    resil_instant before, after;
    resil_attempt_ctx c =
        standard_attempt_on(resil_clock_coarse(), resil_clock_coarse(), &before, &after);
    assert_ptr_equal(c.clock, resil_clock_coarse());
    assert_true(c.deadline >= before + RESIL_S(10));
    assert_true(c.deadline <= after + RESIL_S(10));
    /* never later than the precise time would have put it */
    assert_true(c.deadline <= resil_clock_now(resil_clock_system()) + RESIL_S(10));
}

/* The process stalls during the first wait: the clock jumps past the total
 * timeout, and the wait ends with the deadline. */
static void stall_40s(resil_fake_clock *fc, resil_duration d, void *ud)
{
    int *fired = ud;
    if ((*fired)++ == 0)
        resil_fake_clock_advance(fc, RESIL_S(40));
}

static void total_timeout_that_passes_during_a_wait_ends_with_deadline(void **state)
{
    fixture *f = *state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    standard(f, &o);
    int fired = 0;
    resil_fake_clock_set_hook(f->fc, stall_40s, &fired);
    resil_outcome outs[] = {http(503), http(200)};
    script_of(f, outs, 2);
    run(f);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->s.calls, 1);
    assert_int_equal(f->result.outcome.code, 503);
}

static void retry_after_beyond_the_total_timeout_ends_at_once(void **state)
{
    fixture *f = *state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    standard(f, &o);
    resil_outcome outs[] = {resil_fail_after(RESIL_THROTTLED, 429, "slow down", RESIL_S(45))};
    script_of(f, outs, 1);
    run(f);
    assert_int_equal(f->result.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    assert_duration_equal(f->result.elapsed, 0);
}

/* ---- the breaker inside the retry loop --------------------------------------------- */

static resil_breaker *breaker_inside_retry(fixture *f, resil_retry_policy *pol)
{
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.kind = RESIL_BREAKER_CONSECUTIVE;
    bo.failure_threshold = 2;
    bo.break_duration = RESIL_S(5);
    bo.clock = f->clock;
    resil_breaker *br;
    assert_int_equal(resil_breaker_new(&bo, &br, NULL), 0);
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_add_retry(b, pol);
    resil_pipeline_use_breaker(b, br);
    build(f, b);
    return br;
}

static void breaker_opening_inside_retry_fails_the_next_attempt_fast(void **state)
{
    fixture *f = *state;
    resil_retry_policy pol = test_retry_constant(4, RESIL_S(1));
    resil_breaker *br = breaker_inside_retry(f, &pol);
    resil_outcome outs[] = {http(503)};
    script_of(f, outs, 1);
    run(f);
    /* Two failures open it; attempt 3 is refused without a call, and the
     * default classifier does not retry a rejection. */
    assert_int_equal(f->s.calls, 2);
    assert_int_equal(f->result.attempts, 3);
    assert_int_equal(f->result.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->records[2].outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->records[2].outcome.code, RESIL_STRATEGY_BREAKER);
    assert_string_equal(f->records[2].outcome.detail, "circuit open");
    assert_duration_equal(f->records[2].outcome.retry_after, RESIL_S(4));
    assert_duration_equal(f->records[2].duration, 0);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_int_equal(resil_breaker_state_of(br), RESIL_BREAKER_OPEN);
    resil_breaker_free(br);
}

/* A breaker classifier that keeps every attempt context it was handed. */
typedef struct classified {
    resil_attempt_ctx seen[4];
    int n;
} classified;

static resil_breaker_result keep_and_classify(const resil_outcome *o,
                                              const resil_attempt_ctx *ctx, void *ud)
{
    classified *c = ud;
    if (c->n < 4)
        c->seen[c->n++] = *ctx;
    return resil_pipeline_classify_default(o, ctx, NULL);
}

static void the_breaker_classifier_sees_each_attempt_with_the_calls_user(void **state)
{
    fixture *f = *state;
    resil_retry_policy pol = test_retry_constant(2, RESIL_S(1));
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.clock = f->clock;
    resil_breaker *br;
    assert_int_equal(resil_breaker_new(&bo, &br, NULL), 0);
    classified c = {0};
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_add_retry(b, &pol);
    resil_pipeline_use_breaker(b, br);
    resil_pipeline_builder_classify(b, keep_and_classify, &c);
    build(f, b);
    resil_outcome outs[] = {http(503), http(200)};
    script_of(f, outs, 2);
    run(f);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.seen[0].attempt, 1);
    assert_int_equal(c.seen[1].attempt, 2);
    assert_ptr_equal(c.seen[0].user, &f->s);
    assert_ptr_equal(c.seen[1].user, &f->s);
    assert_ptr_equal(c.seen[1].clock, f->clock);
    assert_int_equal(c.seen[1].hedge, 0);
    resil_breaker_free(br);
}

static bool transient_or_breaker(const resil_outcome *o, const resil_attempt_ctx *ctx,
                                 void *ud)
{
    (void)ctx;
    (void)ud;
    return resil_retry_on_default(o, NULL) ||
           (o->kind == RESIL_REJECTED && o->code == RESIL_STRATEGY_BREAKER);
}

static void retry_that_handles_rejections_waits_for_the_probe(void **state)
{
    fixture *f = *state;
    resil_retry_policy pol = test_retry_constant(5, RESIL_S(1));
    pol.retry_on = transient_or_breaker;
    resil_breaker *br = breaker_inside_retry(f, &pol);
    resil_outcome outs[] = {http(503), http(503), http(200)};
    script_of(f, outs, 3);
    run(f);
    /* attempt 3 is refused with "probe in 4 s", which the retry honours as
     * a Retry-After; attempt 4 is the probe and succeeds. */
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->result.attempts, 4);
    assert_int_equal(f->s.calls, 3);
    assert_int_equal(f->records[2].source, RESIL_WAIT_RETRY_AFTER);
    assert_duration_equal(f->records[2].wait, RESIL_S(4));
    assert_int_equal(resil_breaker_state_of(br), RESIL_BREAKER_CLOSED);
    resil_breaker_free(br);
}

static void breaker_refusals_are_worded_by_state(void **state)
{
    (void)state;
    resil_outcome o = resil_breaker_rejection(RESIL_BREAKER_OPEN, RESIL_S(4));
    assert_int_equal(o.kind, RESIL_REJECTED);
    assert_int_equal(o.code, RESIL_EREJECTED);
    assert_string_equal(o.detail, "circuit open");
    assert_duration_equal(o.retry_after, RESIL_S(4));
    o = resil_breaker_rejection(RESIL_BREAKER_HALF_OPEN, RESIL_MS(1));
    assert_string_equal(o.detail, "circuit half-open");
    o = resil_breaker_rejection(RESIL_BREAKER_ISOLATED, RESIL_DURATION_MAX);
    assert_string_equal(o.detail, "circuit isolated");
    assert_duration_equal(o.retry_after, RESIL_DURATION_MAX);
}

static void isolated_breaker_refuses_in_its_own_words_coded_as_the_strategy(void **state)
{
    fixture *f = *state;
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.clock = f->clock;
    resil_breaker *br;
    assert_int_equal(resil_breaker_new(&bo, &br, NULL), 0);
    resil_breaker_isolate(br);
    resil_pipeline_builder *b = builder(f, "held");
    resil_pipeline_use_breaker(b, br);
    build(f, b);
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    run(f);
    resil_outcome own = resil_breaker_rejection(RESIL_BREAKER_ISOLATED, RESIL_DURATION_MAX);
    assert_int_equal(f->s.calls, 0);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_BREAKER);
    assert_string_equal(f->result.outcome.detail, own.detail);
    assert_duration_equal(f->result.outcome.retry_after, own.retry_after);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_BREAKER);
    resil_breaker_free(br);
}

/* ---- bulkhead, rate limiter, degradation ------------------------------------------- */

/* A bulkhead of one permit on the fixture's clock, queueing or not. */
static resil_bulkhead *one_permit(fixture *f, bool queue, resil_duration queue_timeout)
{
    resil_bulkhead_opts bo;
    resil_bulkhead_opts_default(&bo);
    bo.max_concurrency = 1;
    bo.queue = queue;
    bo.queue_timeout = queue_timeout;
    bo.clock = f->clock;
    resil_bulkhead *bh;
    assert_int_equal(resil_bulkhead_new(&bo, &bh, NULL), 0);
    return bh;
}

/* Run the fixture's pipeline (one 200 scripted, for this run and the
 * test's next: the script outlives the call) while `held` takes `bh`'s
 * one permit. */
static void run_with_the_permit_held(fixture *f, resil_bulkhead *bh,
                                     resil_bulkhead_ticket *held)
{
    static resil_outcome ok[1];
    ok[0] = http(200);
    *held = (resil_bulkhead_ticket){.owner = NULL, .queued = 0};
    assert_int_equal(resil_bulkhead_try_acquire(bh, held), 0);
    script_of(f, ok, 1);
    run(f);
}

/* The run the bulkhead refused: no attempt, its reason, `elapsed`. */
static void assert_refused_by_the_bulkhead(const fixture *f, const char *detail,
                                           resil_duration elapsed)
{
    assert_int_equal(f->s.calls, 0);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->result.records_len, 0);
    assert_int_equal(f->result.stop, RESIL_STOP_NONE);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_BULKHEAD);
    assert_string_equal(f->result.outcome.detail, detail);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_BULKHEAD);
    assert_duration_equal(f->result.elapsed, elapsed);
}

static void full_bulkhead_rejects_at_once_without_an_attempt(void **state)
{
    fixture *f = *state;
    resil_bulkhead *bh = one_permit(f, false, 0);
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_use_bulkhead(b, bh);
    resil_timeout_opts to;
    resil_timeout_opts_default(&to);
    resil_pipeline_add_total_timeout(b, &to);
    test_add_retry_constant(b, 3, RESIL_S(1));
    build(f, b);

    resil_bulkhead_ticket held;
    run_with_the_permit_held(f, bh, &held);
    assert_refused_by_the_bulkhead(f, "bulkhead full", 0);

    resil_bulkhead_release(&held);
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(resil_bulkhead_in_flight(bh), 0);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_bulkhead_free(bh);
}

/* A queued wait that ends without a permit: the elapsed time runs to its
 * end, the wait being the execution's time. */
static void a_queue_timeout_rejects_with_the_wait_as_its_elapsed_time(void **state)
{
    fixture *f = *state;
    resil_bulkhead *bh = one_permit(f, true, RESIL_MS(750));
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_use_bulkhead(b, bh);
    test_add_retry_constant(b, 3, RESIL_S(1));
    build(f, b);

    resil_bulkhead_ticket held;
    run_with_the_permit_held(f, bh, &held);
    assert_refused_by_the_bulkhead(f, "bulkhead queue timeout", RESIL_MS(750));

    resil_bulkhead_release(&held);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_bulkhead_free(bh);
}

static void rate_limiter(fixture *f, resil_duration max_wait)
{
    resil_ratelimit_opts ro;
    resil_ratelimit_opts_default(&ro, RESIL_RATELIMIT_TOKEN_BUCKET);
    ro.rate = 1;
    ro.period = RESIL_S(1);
    ro.burst = 1;
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_add_rate_limiter(b, &ro, max_wait);
    build(f, b);
}

static void rate_limited_call_is_rejected_with_the_limiters_retry_after(void **state)
{
    fixture *f = *state;
    rate_limiter(f, 0);
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_RATE_LIMITER);
    assert_duration_equal(f->result.outcome.retry_after, RESIL_S(1));
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_RATE_LIMITER);
    assert_int_equal(f->s.calls, 1);
}

static void rate_limiter_with_a_wait_sleeps_for_the_permit(void **state)
{
    fixture *f = *state;
    rate_limiter(f, RESIL_S(2));
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    run(f);
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->s.calls, 2);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    assert_duration_equal(resil_fake_clock_sleep_at(f->fc, 0), RESIL_S(1));
    assert_duration_equal(f->result.elapsed, RESIL_S(1));
}

static void degrade(fixture *f, resil_degrade **out)
{
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.auto_adjust = false;
    o.clock = f->clock;
    assert_int_equal(resil_degrade_new(&o, out, NULL), 0);
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_use_degrade(b, *out);
    build(f, b);
}

static void degradation_sheds_calls_below_the_levels_priority(void **state)
{
    fixture *f = *state;
    resil_degrade *d;
    degrade(f, &d);
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    assert_int_equal(resil_degrade_set_level(d, 2), 0); /* Moderate: 30 */
    f->call.priority = 29;
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_DEGRADE);
    assert_string_equal(f->result.outcome.detail, "shed at level Moderate");
    f->call.priority = 30;
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->s.calls, 1);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_degrade_free(d);
}

static void untagged_calls_are_never_shed(void **state)
{
    fixture *f = *state;
    resil_degrade *d;
    degrade(f, &d);
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    assert_int_equal(resil_degrade_set_level(d, 5), 0); /* Emergency */
    run(f);
    assert_int_equal(f->result.outcome.kind, RESIL_SUCCESS);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_degrade_free(d);
}

/* ---- a pipeline without retry --------------------------------------------------------- */

static void pipeline_without_retry_makes_exactly_one_attempt_with_a_record(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f, "once");
    resil_timeout_opts to;
    resil_timeout_opts_default(&to);
    resil_pipeline_add_attempt_timeout(b, &to);
    build(f, b);
    resil_outcome outs[] = {http(503), http(200)};
    script_of(f, outs, 2);
    f->s.takes = RESIL_MS(20);
    run(f);
    assert_int_equal(f->s.calls, 1);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->result.records_len, 1);
    assert_duration_equal(f->records[0].duration, RESIL_MS(20));
    assert_int_equal(f->s.seen[0].attempt, 1);
    assert_int_equal(resil_pipeline_strategy_count(f->p), 1);
    assert_int_equal(resil_pipeline_strategy_at(f->p, 0), RESIL_STRATEGY_ATTEMPT_TIMEOUT);
}

static void empty_pipeline_runs_the_operation(void **state)
{
    fixture *f = *state;
    build(f, builder(f, "bare"));
    resil_outcome outs[] = {http(404)};
    script_of(f, outs, 1);
    run(f);
    assert_int_equal(f->s.calls, 1);
    assert_int_equal(f->result.outcome.code, 404);
    assert_int_equal(f->result.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(resil_pipeline_strategy_count(f->p), 0);
}

static void non_idempotent_call_is_refused_by_a_retrying_policy(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = builder(f, "svc");
    test_add_retry_constant(b, 3, RESIL_S(1));
    build(f, b);
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    f->call.non_idempotent = true;
    run(f);
    assert_int_equal(f->s.calls, 0);
    assert_int_equal(f->result.stop, RESIL_STOP_REFUSED);
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_RETRY);
}

static void caller_cancel_before_start_makes_no_attempt(void **state)
{
    fixture *f = *state;
    resil_standard_opts o;
    resil_standard_opts_default(&o);
    standard(f, &o);
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    resil_cancel_fire(&c);
    f->call.cancel = &c;
    resil_outcome outs[] = {http(200)};
    script_of(f, outs, 1);
    run(f);
    /* The bulkhead, outermost, sees the token first: nothing begins. */
    assert_int_equal(f->s.calls, 0);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->result.stop, RESIL_STOP_NONE);
    assert_int_equal(f->result.outcome.kind, RESIL_CANCELLED);
    resil_cancel_destroy(&c);
}

static void null_arguments_are_refused(void **state)
{
    fixture *f = *state;
    build(f, builder(f, "bare"));
    assert_int_equal(resil_pipeline_execute(NULL, scripted, NULL, &f->result), RESIL_EINVAL);
    assert_int_equal(resil_pipeline_execute(f->p, NULL, NULL, &f->result), RESIL_EINVAL);
    assert_int_equal(resil_pipeline_execute(f->p, scripted, NULL, NULL), RESIL_EINVAL);
}

/* ---- per-key breakers ------------------------------------------------------------------ */

/* A pipeline "svc" on a registry whose breakers open at the first
 * failure, over an operation that answers 503. */
static resil_registry *on_one_failure_registry(fixture *f)
{
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    ro.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    ro.breaker.failure_threshold = 1;
    ro.breaker.clock = f->clock;
    resil_registry *reg;
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    resil_pipeline_builder *b = builder(f, "svc");
    resil_pipeline_use_registry(b, reg);
    build(f, b);
    static resil_outcome outs[1]; /* the script outlives this frame */
    outs[0] = http(503);
    script_of(f, outs, 1);
    return reg;
}

static void registry_gives_each_key_its_own_breaker(void **state)
{
    fixture *f = *state;
    resil_registry *reg = on_one_failure_registry(f);
    f->call.key = "a.example";
    run(f);
    run(f);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_BREAKER);
    f->call.key = "b.example";
    run(f);
    assert_int_equal(f->result.outcome.code, 503);
    assert_int_equal(resil_registry_count(reg), 2);
    assert_int_equal(f->s.calls, 2);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_registry_free(reg);
}

/* The breaker a call meets is the one held under `expected` after it. */
static void assert_keyed_under(resil_registry *reg, const char *expected)
{
    resil_breaker *br;
    assert_int_equal(resil_registry_try_get(reg, expected, &br), 0);
    assert_int_equal(resil_breaker_state_of(br), RESIL_BREAKER_OPEN);
    resil_breaker_free(br);
    assert_int_equal(resil_registry_count(reg), 1);
}

static void a_call_without_a_key_meets_its_operations_breaker(void **state)
{
    fixture *f = *state;
    resil_registry *reg = on_one_failure_registry(f);
    f->call.operation = "lookup";
    run(f);
    assert_keyed_under(reg, "lookup");
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_registry_free(reg);
}

static void a_call_with_neither_key_nor_operation_meets_the_pipelines_breaker(void **state)
{
    fixture *f = *state;
    resil_registry *reg = on_one_failure_registry(f);
    run(f);
    assert_keyed_under(reg, "svc");
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_registry_free(reg);
}

static void an_empty_key_and_operation_count_as_none(void **state)
{
    fixture *f = *state;
    resil_registry *reg = on_one_failure_registry(f);
    f->call.key = "";
    f->call.operation = "";
    run(f);
    assert_keyed_under(reg, "svc");
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_registry_free(reg);
}

/* A breaker the caller already holds is the one the attempts meet: the
 * registry is not asked (nothing is created for the key), and the caller's
 * reference is still its own afterwards. */
static void a_call_given_its_breaker_meets_that_breaker(void **state)
{
    fixture *f = *state;
    resil_registry *reg = on_one_failure_registry(f);
    resil_breaker *held;
    assert_int_equal(resil_registry_get(reg, "a.example", NULL, &held, NULL), 0);
    f->call.key = "b.example";
    f->call.breaker = held;
    run(f);
    assert_int_equal(f->result.outcome.code, 503);
    assert_int_equal(resil_breaker_state_of(held), RESIL_BREAKER_OPEN);
    assert_int_equal(resil_registry_count(reg), 1);
    run(f);
    assert_int_equal(f->result.outcome.code, RESIL_STRATEGY_BREAKER);
    assert_int_equal(f->s.calls, 1);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_registry_free(reg);
    assert_int_equal(resil_breaker_state_of(held), RESIL_BREAKER_OPEN);
    resil_breaker_free(held);
}

/* A key the registry cannot hold (256 bytes) gets no breaker: the call is
 * refused before any attempt, with the registry's code. */
static void a_key_too_long_for_the_registry_is_refused_before_any_attempt(void **state)
{
    fixture *f = *state;
    resil_registry *reg = on_one_failure_registry(f);
    char key[RESIL_BREAKER_NAME_MAX + 1];
    memset(key, 'k', RESIL_BREAKER_NAME_MAX);
    key[RESIL_BREAKER_NAME_MAX] = '\0';
    f->call.key = key;
    assert_int_equal(resil_pipeline_execute(f->p, scripted, &f->call, &f->result), RESIL_EINVAL);
    assert_int_equal(f->result.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->result.outcome.code, RESIL_EINVAL);
    assert_string_equal(f->result.outcome.detail, "no breaker for the key");
    assert_int_equal(f->result.rejected_by, RESIL_STRATEGY_BREAKER);
    assert_int_equal(f->result.attempts, 0);
    assert_int_equal(f->s.calls, 0);
    assert_int_equal(resil_registry_count(reg), 0);
    resil_pipeline_free(f->p);
    f->p = NULL;
    resil_registry_free(reg);
}

/* ---- the call's context in classifiers and hooks ------------------------------ */

typedef struct ctx_log {
    resil_attempt_ctx judged[4];
    int njudged;
    void *announced_user[4];
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
    if (l->nannounced < 4) {
        l->announced_user[l->nannounced] = user;
        l->announced[l->nannounced++] = *info->ctx;
    }
}

static void retry_classifier_and_hook_see_the_callers_context_not_the_pipelines(void **state)
{
    fixture *f = *state;
    ctx_log l = {0};
    resil_pipeline_builder *b = builder(f, "ctx");
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = RESIL_S(10);
    resil_pipeline_add_total_timeout(b, &t);
    resil_retry_policy pol = test_retry_constant(3, RESIL_S(1));
    pol.retry_on = judge_and_keep;
    pol.retry_on_ud = &l;
    pol.on_retry = announce_and_keep;
    pol.on_retry_ud = &l;
    resil_pipeline_add_retry(b, &pol);
    t.timeout = RESIL_S(2);
    resil_pipeline_add_attempt_timeout(b, &t);
    build(f, b);
    resil_outcome outs[] = {http(503), http(502), http(200)};
    script_of(f, outs, 3);
    run(f);
    assert_int_equal(f->result.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(l.njudged, 2);
    assert_int_equal(l.nannounced, 2);
    for (int i = 0; i < 2; i++) {
        const resil_attempt_ctx *c = &l.judged[i];
        assert_int_equal(c->attempt, (uint32_t)i + 1);
        assert_int_equal(c->deadline, T0 + RESIL_S(10));
        assert_ptr_equal(c->clock, f->clock);
        assert_ptr_equal(c->user, &f->s);
        assert_int_equal(c->hedge, 0);
        assert_non_null(c->cancel);
        assert_int_equal(l.announced[i].attempt, (uint32_t)i + 1);
        assert_ptr_equal(l.announced[i].user, &f->s);
        assert_ptr_equal(l.announced_user[i], &f->s);
    }
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(standard_503_503_200_succeeds_after_exactly_three_attempts),
        T(retry_classifier_and_hook_see_the_callers_context_not_the_pipelines),
        T(standard_waits_grow_exponentially_from_two_seconds_without_jitter),
        T(standard_gives_each_attempt_a_ten_second_deadline_inside_the_total),
        cmocka_unit_test(a_pipeline_given_no_clock_takes_its_deadlines_from_the_system_clock),
        cmocka_unit_test(a_pipeline_on_the_coarse_clock_takes_its_deadlines_from_a_coarse_reading),
        T(total_timeout_that_passes_during_a_wait_ends_with_deadline),
        T(retry_after_beyond_the_total_timeout_ends_at_once),
        T(breaker_opening_inside_retry_fails_the_next_attempt_fast),
        T(the_breaker_classifier_sees_each_attempt_with_the_calls_user),
        T(retry_that_handles_rejections_waits_for_the_probe),
        T(breaker_refusals_are_worded_by_state),
        T(isolated_breaker_refuses_in_its_own_words_coded_as_the_strategy),
        T(full_bulkhead_rejects_at_once_without_an_attempt),
        T(a_queue_timeout_rejects_with_the_wait_as_its_elapsed_time),
        T(rate_limited_call_is_rejected_with_the_limiters_retry_after),
        T(rate_limiter_with_a_wait_sleeps_for_the_permit),
        T(degradation_sheds_calls_below_the_levels_priority),
        T(untagged_calls_are_never_shed),
        T(pipeline_without_retry_makes_exactly_one_attempt_with_a_record),
        T(empty_pipeline_runs_the_operation),
        T(non_idempotent_call_is_refused_by_a_retrying_policy),
        T(caller_cancel_before_start_makes_no_attempt),
        T(null_arguments_are_refused),
        T(registry_gives_each_key_its_own_breaker),
        T(a_call_without_a_key_meets_its_operations_breaker),
        T(a_call_with_neither_key_nor_operation_meets_the_pipelines_breaker),
        T(an_empty_key_and_operation_count_as_none),
        T(a_call_given_its_breaker_meets_that_breaker),
        T(a_key_too_long_for_the_registry_is_refused_before_any_attempt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
