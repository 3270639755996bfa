/*
 * test_abi.c — the Redis adapter's public structs keep their room and
 * their recorded layout under libresil-redis's SONAME (docs/abi.md); the
 * core's own structs are checked by unit.abi.
 */
#include "abi_room.h"
#include "resil/redis.h"

HAS_ROOM(resil_redis_opts, 4);
HAS_ROOM(resil_redis_stats, 4);
HAS_ROOM(resil_redis_breaker_opts, 4);
HAS_ROOM(resil_redis_factory, 4);
HAS_ROOM(resil_redis_breaker_status, 4);
HAS_ROOM(resil_redis_budget_opts, 4);
HAS_ROOM(resil_redis_ratelimit_opts, 4);
HAS_ROOM(resil_redis_ratelimit_stats, 4);
HAS_ROOM(resil_redis_concurrency_opts, 4);
HAS_ROOM(resil_redis_concurrency_stats, 4);
HAS_ROOM(resil_redis_limits_factory, 4);

PINNED(resil_redis_opts, 192);
PINNED(resil_redis_stats, 104);
PINNED(resil_redis_breaker_opts, 232);
PINNED(resil_redis_factory, 56);
PINNED(resil_redis_breaker_status, 128);
PINNED(resil_redis_budget_opts, 72);
PINNED(resil_redis_ratelimit_opts, 88);
PINNED(resil_redis_ratelimit_stats, 64);
PINNED(resil_redis_concurrency_opts, 80);
PINNED(resil_redis_concurrency_stats, 80);
PINNED(resil_redis_limits_factory, 48);
/* the core's breaker options embedded: a core change moves what follows */
PINNED_AT(resil_redis_breaker_opts, rules, 8);

static void defaults_zero_the_reserved_slots(void **state)
{
    (void)state;
    DEFAULTED_ZEROES_ROOM(resil_redis_opts, resil_redis_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_redis_breaker_opts, resil_redis_breaker_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_redis_budget_opts, resil_redis_budget_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_redis_ratelimit_opts, resil_redis_ratelimit_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_redis_concurrency_opts, resil_redis_concurrency_opts_default);
}

static void embedded_defaults_zero_their_slots(void **state)
{
    (void)state;
    resil_redis_breaker_opts o;
    memset(&o, 0xA5, sizeof o);
    resil_redis_breaker_opts_default(&o);
    abi_assert_zeroed(o.rules.reserved_, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_zero_the_reserved_slots),
        cmocka_unit_test(embedded_defaults_zero_their_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
