/*
 * test_fleet_limiter.c — the fleet-wide rate limiter against a real
 * redis-server: two handles on two clients (two instances) spending one
 * rate exactly, on one shared fake clock; the retry-after the script
 * computes; the local bucket while Redis is killed, and Redis deciding
 * again once it is back.
 */
#include "fleet_test.h"

/* 10 per second (one every 100 ms), 5 at once. */
static resil_redis_ratelimit_opts ten_per_second(const char *name, resil_fake_clock *fc)
{
    resil_redis_ratelimit_opts o;
    resil_redis_ratelimit_opts_default(&o);
    o.name = name;
    o.rate = 10;
    o.period = RESIL_S(1);
    o.burst = 5;
    o.instances = 2;
    o.clock = resil_fake_clock_clock(fc);
    return o;
}

static resil_ratelimit *fleet_limiter(resil_redis *r, const resil_redis_ratelimit_opts *o)
{
    resil_ratelimit *rl = NULL;
    resil_err err;
    int rc = resil_redis_ratelimit_new(r, o, &rl, &err);
    if (rc != 0)
        fprintf(stderr, "fleet_limiter: %s\n", err.message);
    assert_int_equal(rc, 0);
    return rl;
}

static resil_redis_ratelimit_stats stats_of(resil_ratelimit *rl)
{
    resil_redis_ratelimit_stats s;
    assert_int_equal(resil_redis_ratelimit_stats_get(rl, &s), 0);
    return s;
}

typedef struct pair {
    resil_fake_clock *fc;
    resil_redis *ra, *rb;
    resil_ratelimit *a, *b;
} pair;

static void pair_open(pair *p, const char *name)
{
    p->fc = fleet_clock();
    p->ra = fleet_client(NULL);
    p->rb = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second(name, p->fc);
    p->a = fleet_limiter(p->ra, &o);
    p->b = fleet_limiter(p->rb, &o);
}

static void pair_close(pair *p)
{
    resil_ratelimit_free(p->a);
    resil_ratelimit_free(p->b);
    resil_redis_free(p->ra);
    resil_redis_free(p->rb);
    resil_fake_clock_free(p->fc);
}

static void two_instances_spend_one_burst_between_them(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "burst");
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 3, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(p.b, 2, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 1, NULL), RESIL_EREJECTED);
    assert_int_equal(resil_ratelimit_try_acquire(p.b, 1, NULL), RESIL_EREJECTED);
    assert_int_equal(stats_of(p.a).fleet_admitted, 1);
    assert_int_equal(stats_of(p.a).fleet_rejected, 1);
    assert_int_equal(stats_of(p.b).fleet_admitted, 1);
    pair_close(&p);
}

static void two_instances_admit_exactly_the_rate_between_them(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "rate");
    int admitted = 0;
    /* Three seconds in 10 ms steps, both instances asking at every step:
     * the burst of 5, then one every 100 ms. */
    for (int step = 0; step < 300; step++) {
        admitted += resil_ratelimit_try_acquire(p.a, 1, NULL) == 0;
        admitted += resil_ratelimit_try_acquire(p.b, 1, NULL) == 0;
        resil_fake_clock_advance(p.fc, RESIL_MS(10));
    }
    assert_int_equal(admitted, 5 + 29);
    resil_ratelimit_stats sa, sb;
    resil_ratelimit_stats_get(p.a, &sa);
    resil_ratelimit_stats_get(p.b, &sb);
    assert_int_equal(sa.admitted + sb.admitted, 34);
    assert_int_equal(sa.rejected + sb.rejected, 600 - 34);
    pair_close(&p);
}

static void a_rejection_says_exactly_when_the_permits_will_be_there(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "hint");
    resil_duration ra = 0;
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 5, &ra), 0);
    assert_int_equal(resil_ratelimit_try_acquire(p.b, 3, &ra), RESIL_EREJECTED);
    assert_int_equal(ra, RESIL_MS(300));
    resil_fake_clock_advance(p.fc, RESIL_MS(299));
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 3, &ra), RESIL_EREJECTED);
    assert_int_equal(ra, RESIL_MS(1));
    resil_fake_clock_advance(p.fc, RESIL_MS(1));
    assert_int_equal(resil_ratelimit_try_acquire(p.b, 3, &ra), 0);
    pair_close(&p);
}

static void more_than_the_burst_is_refused_as_invalid(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "invalid");
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 6, NULL), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 0, NULL), RESIL_EINVAL);
    pair_close(&p);
}

static void a_blocking_acquire_sleeps_the_fleet_hint(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "blocking");
    assert_int_equal(resil_ratelimit_try_acquire(p.a, 5, NULL), 0);
    resil_instant t0 = resil_clock_now(resil_fake_clock_clock(p.fc));
    assert_int_equal(resil_ratelimit_acquire(p.b, 2, NULL, 0), 0);
    assert_int_equal(resil_clock_now(resil_fake_clock_clock(p.fc)) - t0, RESIL_MS(200));
    pair_close(&p);
}

static void the_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    resil_ratelimit *rl = NULL;
    resil_err err;
    o.rate = 0;
    assert_int_equal(resil_redis_ratelimit_new(r, &o, &rl, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit.rate must be in [1, 1e9], got 0");
    o = ten_per_second("opts", fc);
    o.instances = 0;
    assert_int_equal(resil_redis_ratelimit_new(r, &o, &rl, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit.instances must be >= 1, got 0");
    o = ten_per_second("", fc);
    assert_int_equal(resil_redis_ratelimit_new(r, &o, &rl, &err), RESIL_EINVAL);
    o = ten_per_second("opts", fc);
    o.rate = 2000;
    o.period = RESIL_MS(1);
    assert_int_equal(resil_redis_ratelimit_new(r, &o, &rl, &err), RESIL_EINVAL);
    assert_null(rl);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

/* Construction refused with RESIL_EINVAL and exactly `message`. */
static void limiter_refused(resil_redis *r, const resil_redis_ratelimit_opts *o,
                            const char *message)
{
    resil_ratelimit *rl = (resil_ratelimit *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_ratelimit_new(r, o, &rl, &err), RESIL_EINVAL);
    assert_null(rl);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
}

static void a_period_under_a_millisecond_is_refused_by_name(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    o.period = RESIL_MS(1) - 1;
    limiter_refused(r, &o, "redis_ratelimit.period must be in [1ms, 1d], got 999999 ns");
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_fallback_the_limiter_refuses_is_refused_under_its_name(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    resil_ratelimit_opts fallback;
    resil_ratelimit_opts_default(&fallback, RESIL_RATELIMIT_TOKEN_BUCKET);
    fallback.rate = 0;
    o.fallback = &fallback;
    limiter_refused(r, &o,
                    "redis_ratelimit.fallback: ratelimit.rate must be in [1, 1000000000], got 0");
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_period_over_a_day_is_refused_by_name(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    o.period = RESIL_S(86400) + 1;
    limiter_refused(r, &o, "redis_ratelimit.period must be in [1ms, 1d], got 86400000000001 ns");
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_period_of_a_millisecond_or_a_day_is_accepted(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    o.period = RESIL_MS(1);
    resil_ratelimit_free(fleet_limiter(r, &o));
    o.period = RESIL_S(86400);
    resil_ratelimit_free(fleet_limiter(r, &o));
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

/* One a day, so each permit is 86400000000 µs apart: 13031 of them span
 * just under 2^50 µs (what a double holds exactly), 13032 just over. */
static void a_burst_spanning_more_than_2_50_us_is_refused_by_name(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    o.rate = 1;
    o.period = RESIL_S(86400);
    o.burst = 13032;
    limiter_refused(r, &o, "redis_ratelimit.burst × period/rate must be under 2^50 µs "
                           "(35 years), got 13032 × 86400000000 µs");
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void a_burst_spanning_just_under_2_50_us_is_accepted(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    o.rate = 1;
    o.period = RESIL_S(86400);
    o.burst = 13031;
    resil_ratelimit *rl = fleet_limiter(r, &o);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 13031, NULL), 0);
    assert_int_equal(stats_of(rl).fleet_admitted, 1);
    resil_ratelimit_free(rl);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void ratelimit_new_refuses_null_arguments(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_ratelimit_opts o = ten_per_second("opts", fc);
    resil_ratelimit *rl = (resil_ratelimit *)1;
    resil_err err;
    assert_int_equal(resil_redis_ratelimit_new(NULL, &o, &rl, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit: a client and options are required");
    assert_null(rl);
    assert_int_equal(resil_redis_ratelimit_new(r, NULL, &rl, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit: a client and options are required");
    assert_int_equal(resil_redis_ratelimit_new(r, &o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit: out must not be NULL");
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void it_describes_itself_as_the_token_bucket_it_is(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "describe");
    resil_ratelimit_opts o;
    resil_ratelimit_opts_get(p.a, &o);
    assert_int_equal(o.kind, RESIL_RATELIMIT_TOKEN_BUCKET);
    assert_int_equal(o.rate, 10);
    assert_int_equal(o.period, RESIL_S(1));
    assert_int_equal(o.burst, 5);
    assert_string_equal(resil_ratelimit_impl_name(p.a), "redis");
    resil_redis_ratelimit_stats s;
    resil_ratelimit *local = NULL;
    resil_ratelimit_opts lo;
    resil_ratelimit_opts_default(&lo, RESIL_RATELIMIT_FIXED_WINDOW);
    assert_int_equal(resil_ratelimit_new(&lo, &local, NULL), 0);
    assert_int_equal(resil_redis_ratelimit_stats_get(local, &s), RESIL_EINVAL);
    resil_ratelimit_free(local);
    pair_close(&p);
}

/* A client that reconnects quickly (from 10 ms, at most 100 ms apart). Its
 * timeout stays the tests' generous one: a killed Redis refuses at once. */
static resil_redis *quick_client(fleet_events *ev)
{
    resil_redis_opts o = fleet_opts(ev);
    o.reconnect.base = RESIL_MS(10);
    o.reconnect.max_delay = RESIL_MS(100);
    return fleet_client_with(&o);
}

static void killed_redis_hands_over_to_the_local_share_and_back(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = quick_client(&ev);
    resil_redis_ratelimit_opts o = ten_per_second("outage", fc);
    resil_ratelimit *rl = fleet_limiter(r, &o);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), 0);

    redis_server_kill(fleet_server);
    /* Half the fleet's burst (2) and rate (5 per second, one per 200 ms). */
    resil_duration ra = 0;
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_EREJECTED);
    assert_int_equal(ra, RESIL_MS(200));
    resil_redis_ratelimit_stats s = stats_of(rl);
    assert_int_equal(s.fleet_admitted, 1);
    assert_int_equal(s.local_admitted, 2);
    assert_int_equal(s.local_rejected, 1);
    assert_false(resil_redis_connected(r));

    assert_int_equal(redis_server_restart(fleet_server), 0);
    fleet_wait_until(fleet_ups(&ev) == 1);
    /* The restart lost the key: the fleet's bucket starts full. */
    assert_int_equal(resil_ratelimit_try_acquire(rl, 5, NULL), 0);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_EREJECTED);
    assert_int_equal(ra, RESIL_MS(100));
    s = stats_of(rl);
    assert_int_equal(s.fleet_admitted, 2);
    assert_int_equal(s.fleet_rejected, 1);
    assert_int_equal(s.local_admitted, 2);

    resil_ratelimit_free(rl);
    resil_redis_free(r);
    fleet_events_destroy(&ev);
    resil_fake_clock_free(fc);
}

static resil_outcome ok(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static void a_pipeline_takes_the_fleet_limiter(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "pipeline");
    resil_pipeline_builder *b = NULL;
    assert_int_equal(resil_pipeline_builder_new("fleet", &b, NULL), 0);
    assert_int_equal(resil_pipeline_use_rate_limiter(b, p.a, 0), 0);
    resil_pipeline *pl = NULL;
    assert_int_equal(resil_pipeline_build(b, &pl, NULL), 0);
    resil_pipeline_builder_free(b);
    assert_int_equal(resil_ratelimit_try_acquire(p.b, 5, NULL), 0);
    resil_pipeline_result res;
    assert_int_equal(resil_pipeline_execute(pl, ok, NULL, &res), 0);
    assert_int_equal(res.rejected_by, RESIL_STRATEGY_RATE_LIMITER);
    assert_int_equal(res.outcome.retry_after, RESIL_MS(100));
    resil_fake_clock_advance(p.fc, RESIL_MS(100));
    assert_int_equal(resil_pipeline_execute(pl, ok, NULL, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_SUCCESS);
    resil_pipeline_free(pl);
    pair_close(&p);
}

static void the_factory_builds_a_fleet_limiter_from_a_token_bucket(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_limits_factory f = {.client = r, .instances = 2};
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    o.rate = 10;
    o.burst = 4;
    o.clock = resil_fake_clock_clock(fc);
    resil_ratelimit *rl = NULL;
    assert_int_equal(resil_redis_ratelimit_factory("made", &o, &rl, NULL, &f), 0);
    assert_string_equal(resil_ratelimit_impl_name(rl), "redis");
    assert_int_equal(resil_ratelimit_try_acquire(rl, 4, NULL), 0);
    assert_int_equal(stats_of(rl).fleet_admitted, 1);
    resil_ratelimit_free(rl);

    resil_err err;
    o.kind = RESIL_RATELIMIT_FIXED_WINDOW;
    assert_int_equal(resil_redis_ratelimit_factory("made", &o, &rl, &err, &f), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "redis_ratelimit: made must be a token bucket to be shared, not a "
                        "fixed-window");
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void ratelimit_factory_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_limits_factory f = {.client = r};
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_TOKEN_BUCKET);
    resil_ratelimit *rl = NULL;
    resil_err err;
    assert_int_equal(resil_redis_ratelimit_factory("made", &o, &rl, &err, NULL), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit: the factory needs its client");
    assert_int_equal(resil_redis_ratelimit_factory("made", NULL, &rl, &err, &f), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_ratelimit: the factory needs its client");
    assert_null(rl);
    resil_redis_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(two_instances_spend_one_burst_between_them),
        T(two_instances_admit_exactly_the_rate_between_them),
        T(a_rejection_says_exactly_when_the_permits_will_be_there),
        T(more_than_the_burst_is_refused_as_invalid),
        T(a_blocking_acquire_sleeps_the_fleet_hint),
        T(the_options_are_checked_by_name),
        T(a_period_under_a_millisecond_is_refused_by_name),
        T(a_period_over_a_day_is_refused_by_name),
        T(a_fallback_the_limiter_refuses_is_refused_under_its_name),
        T(a_period_of_a_millisecond_or_a_day_is_accepted),
        T(a_burst_spanning_more_than_2_50_us_is_refused_by_name),
        T(a_burst_spanning_just_under_2_50_us_is_accepted),
        T(ratelimit_new_refuses_null_arguments),
        T(it_describes_itself_as_the_token_bucket_it_is),
        T(a_pipeline_takes_the_fleet_limiter),
        T(killed_redis_hands_over_to_the_local_share_and_back),
        T(the_factory_builds_a_fleet_limiter_from_a_token_bucket),
        T(ratelimit_factory_refuses_null_arguments),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
