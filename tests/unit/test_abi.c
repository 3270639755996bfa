/*
 * test_abi.c — the room public structs keep to grow under one SONAME
 * (docs/abi.md).
 *
 * Every caller-allocated struct of the core ends in `reserved_`, the last
 * member, so a member added later takes a slot and sizeof stays put. The
 * static assertions fail the build when a struct loses its room or gains a
 * member after it, or when a public struct's size or an embedded struct's
 * offset on LP64 moves from its recorded figure; the tests check that every *_default() leaves the slots
 * zeroed, since zero is what "as before" means for a member that takes one.
 */
#include "abi_room.h"

_Static_assert(sizeof(resil_reserved) == 8, "a reserved slot is 8 bytes");

/* options, filled by *_default() */
GREW_INTO_ROOM(resil_backoff, delays, 2, 4);
HAS_ROOM(resil_breaker_opts, 4);
HAS_ROOM(resil_budget_opts, 4);
HAS_ROOM(resil_bulkhead_opts, 4);
HAS_ROOM(resil_degrade_opts, 4);
HAS_ROOM(resil_fallback_opts, 4);
HAS_ROOM(resil_hedge_opts, 4);
HAS_ROOM(resil_ratelimit_opts, 4);
HAS_ROOM(resil_registry_opts, 4);
GREW_INTO_ROOM(resil_retry_policy, delay, 3, 4);
GREW_INTO_ROOM(resil_exec_opts, measure_elapsed, 1, 4);
HAS_ROOM(resil_standard_opts, 4);
GREW_INTO_ALL_ROOM(resil_call, hedge_keys, breaker, 4);
HAS_ROOM(resil_call_telemetry, 2);
GREW_INTO_ROOM(resil_http_attrs, user, 1, 2);
HAS_ROOM(resil_tracer_opts, 4);
HAS_ROOM(resil_timeout_opts, 4);
HAS_ROOM(resil_metrics_opts, 3);
HAS_ROOM(resil_log_opts, 4);
HAS_ROOM(resil_limiter_opts, 4);
HAS_ROOM(resil_throttle_opts, 4);
HAS_ROOM(resil_chaos_opts, 4);
HAS_ROOM(resil_listener, 4);
HAS_ROOM(resil_loop, 2);
HAS_ROOM(resil_route_opts, 4);
HAS_ROOM(resil_io, 2);
/* results and stats, filled by the library */
HAS_ROOM(resil_pipeline_result, 4);
HAS_ROOM(resil_retry_result, 4);
HAS_ROOM(resil_retry_decision, 4);
HAS_ROOM(resil_breaker_stats, 4);
HAS_ROOM(resil_bulkhead_stats, 4);
HAS_ROOM(resil_ratelimit_stats, 4);
HAS_ROOM(resil_limiter_stats, 4);
HAS_ROOM(resil_degrade_stats, 4);
HAS_ROOM(resil_registry_entry, 4);
/* permits, tickets and step state on the caller's stack */
HAS_ROOM(resil_budget_ticket, 2);
HAS_ROOM(resil_bulkhead_ticket, 2);
HAS_ROOM(resil_limiter_ticket, 2);
HAS_ROOM(resil_retry, 2);
HAS_ROOM(resil_backoff_state, 2);
HAS_ROOM(resil_rng_seeded, 2);
HAS_ROOM(resil_rng_mulberry32, 2);
HAS_ROOM(resil_rng_dotnet, 2);
HAS_ROOM(resil_rng_scripted, 2);
HAS_ROOM(resil_proc_sampler, 2);
HAS_ROOM(resil_cpu_times, 2);
/* array elements */
HAS_ROOM(resil_degrade_level_opts, 1);
HAS_ROOM(resil_health_sample, 1);
HAS_ROOM(resil_attempt_record, 1);
HAS_ROOM(resil_route_endpoint, 1);
HAS_ROOM(resil_route_group, 1);

/* The layout on LP64, recorded. */
PINNED(resil_backoff, 80);
PINNED(resil_breaker_opts, 176);
PINNED(resil_budget_opts, 104);
PINNED(resil_bulkhead_opts, 64);
PINNED(resil_degrade_opts, 504);
PINNED(resil_fallback_opts, 64);
PINNED(resil_hedge_opts, 80);
PINNED(resil_ratelimit_opts, 88);
PINNED(resil_registry_opts, 248);
PINNED(resil_retry_policy, 192);
PINNED(resil_exec_opts, 104);
PINNED(resil_standard_opts, 576);
PINNED(resil_call, 96);
PINNED(resil_timeout_opts, 48);
PINNED(resil_metrics_opts, 56);
PINNED(resil_log_opts, 80);
PINNED(resil_http_attrs, 40);
PINNED(resil_call_telemetry, 32);
PINNED(resil_tracer_opts, 56);
PINNED(resil_listener, 56);
PINNED(resil_pipeline_result, 248);
PINNED(resil_retry_result, 152);
PINNED(resil_retry_decision, 56);
PINNED(resil_breaker_stats, 152);
PINNED(resil_bulkhead_stats, 72);
PINNED(resil_ratelimit_stats, 64);
PINNED(resil_degrade_stats, 112);
PINNED(resil_registry_entry, 296);
PINNED(resil_budget_ticket, 24);
PINNED(resil_bulkhead_ticket, 32);
PINNED(resil_retry, 96);
PINNED(resil_backoff_state, 32);
PINNED(resil_rng_seeded, 56);
PINNED(resil_rng_mulberry32, 32);
PINNED(resil_rng_dotnet, 256);
PINNED(resil_rng_scripted, 48);
PINNED(resil_proc_sampler, 64);
PINNED(resil_cpu_times, 32);
PINNED(resil_degrade_level_opts, 48);
PINNED(resil_health_sample, 24);
PINNED(resil_attempt_record, 144);
PINNED(resil_breaker_permit, 56);
PINNED(resil_outcome, 88);
PINNED(resil_err, 260);
PINNED_AT(resil_retry_policy, backoff, 24);
PINNED_AT(resil_registry_opts, breaker, 8);
/* operations tables: size first; their operations only ever appended */
PINNED_AT(resil_breaker_ops, size, 0);
PINNED_AT(resil_bulkhead_ops, size, 0);
PINNED_AT(resil_ratelimit_ops, size, 0);
PINNED_AT(resil_budget_ops, size, 0);
PINNED(resil_breaker_ops, 80);
PINNED(resil_bulkhead_ops, 64);
PINNED(resil_ratelimit_ops, 48);
PINNED(resil_budget_ops, 56);
PINNED_AT(resil_limiter_ops, size, 0);
PINNED_AT(resil_throttle_ops, size, 0);
PINNED(resil_limiter_ops, 64);
PINNED(resil_throttle_ops, 48);
PINNED(resil_limiter_opts, 168);
PINNED(resil_limiter_ticket, 48);
PINNED(resil_limiter_stats, 80);
PINNED(resil_throttle_opts, 80);
PINNED(resil_chaos_opts, 184);
/* the loop interface (loop.h): the loop, its operations table, and the
 * timer, work item and queues a loop and resil embed in their own memory */
PINNED(resil_loop, 64);
PINNED_AT(resil_loop, clock, 0);
PINNED_AT(resil_loop_ops, size, 0);
PINNED(resil_loop_ops, 80); /* 48 before io_start/io_stop, 64 before timer_start_at,
                             * 72 before timer_reserve: tables grow at their end */
PINNED_AT(resil_loop_ops, io_start, 48);
PINNED_AT(resil_loop_ops, timer_start_at, 64);
PINNED_AT(resil_loop_ops, timer_reserve, 72);
PINNED(resil_io, 40);
PINNED_AT(resil_io, fn, 0);
PINNED(resil_timer, 64);
PINNED_AT(resil_timer, fn, 0);
PINNED_AT(resil_timer, loop_data, 56); /* `reserved` took padding beside `armed` */
PINNED(resil_work, 16);
PINNED_AT(resil_work, fn, 0);
PINNED(resil_timers, 24);
PINNED_AT(resil_posts, mu, 0); /* its size is the platform's mutex's */
static void budget_opts_default_exp(resil_budget_opts *o)
{
    resil_budget_opts_default(o, RESIL_BUDGET_TOKENS);
}

static void ratelimit_opts_default_token(resil_ratelimit_opts *o)
{
    resil_ratelimit_opts_default(o, RESIL_RATELIMIT_TOKEN_BUCKET);
}

static void limiter_opts_default_vegas(resil_limiter_opts *o)
{
    resil_limiter_opts_default(o, RESIL_LIMIT_VEGAS);
}

static void chaos_opts_default_fault(resil_chaos_opts *o)
{
    resil_chaos_opts_default(o, RESIL_CHAOS_FAULT);
}

static void defaults_zero_the_reserved_slots(void **state)
{
    (void)state;
    DEFAULTED_ZEROES_ROOM(resil_backoff, resil_backoff_default);
    DEFAULTED_ZEROES_ROOM(resil_breaker_opts, resil_breaker_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_budget_opts, budget_opts_default_exp);
    DEFAULTED_ZEROES_ROOM(resil_bulkhead_opts, resil_bulkhead_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_degrade_opts, resil_degrade_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_fallback_opts, resil_fallback_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_hedge_opts, resil_hedge_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_route_opts, resil_route_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_ratelimit_opts, ratelimit_opts_default_token);
    DEFAULTED_ZEROES_ROOM(resil_registry_opts, resil_registry_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_retry_policy, resil_retry_policy_default);
    DEFAULTED_ZEROES_ROOM(resil_standard_opts, resil_standard_opts_default);
    { /* resil_call has no room left; its slot members default to zero */
        resil_call c;
        memset(&c, 0xA5, sizeof c);
        resil_call_default(&c);
        assert_null(c.hedge_keys);
        assert_int_equal(c.hedge_keys_len, 0);
        assert_null(c.telemetry);
        assert_null(c.breaker);
    }
    DEFAULTED_ZEROES_ROOM(resil_timeout_opts, resil_timeout_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_metrics_opts, resil_metrics_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_log_opts, resil_log_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_tracer_opts, resil_tracer_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_limiter_opts, limiter_opts_default_vegas);
    DEFAULTED_ZEROES_ROOM(resil_throttle_opts, resil_throttle_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_chaos_opts, chaos_opts_default_fault);
}

/* Embedded defaults are zeroed too: the retry policy's backoff and the
 * registry's breaker options are structs with room of their own. */
static void embedded_defaults_zero_their_slots(void **state)
{
    (void)state;
    resil_retry_policy p;
    memset(&p, 0xA5, sizeof p);
    resil_retry_policy_default(&p);
    ABI_ASSERT_ROOM_ZEROED(p.backoff.reserved_);

    resil_registry_opts r;
    memset(&r, 0xA5, sizeof r);
    resil_registry_opts_default(&r);
    abi_assert_zeroed(r.breaker.reserved_, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_zero_the_reserved_slots),
        cmocka_unit_test(embedded_defaults_zero_their_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
