/*
 * test_breaker_conformance.c — the conformance suite against the fleet
 * breaker on a real redis-server, counting in Redis (FLEET) and counting
 * locally with only the state shared (LOCAL). Each test gets an
 * empty server and a client whose rounds run only when woken or asked, so
 * settle is one resil_redis_sync(): the counts reach Redis, the script
 * decides, and the instance learns the outcome. What the fleet breaker
 * does differently is declared here and in docs/breakers.md: it counts at
 * sync rounds (settle), and it has no disabled state (no
 * BREAKER_CAN_DISABLE).
 */
#include "breaker_conformance.h"
#include "fleet_test.h"

static resil_redis *client;

static int begin(void *ud)
{
    (void)ud;
    if (fleet_flush(NULL) != 0)
        return -1;
    client = fleet_client(NULL);
    return 0;
}

static void end(void *ud)
{
    (void)ud;
    resil_redis_free(client);
    client = NULL;
}

/* ud: the resil_redis_counting to use. */
static resil_breaker *make(void *ud, const char *name, const resil_breaker_opts *o)
{
    resil_redis_breaker_opts ro;
    resil_redis_breaker_opts_default(&ro);
    ro.name = name;
    ro.rules = *o;
    ro.counting = *(const resil_redis_counting *)ud;
    return fleet_breaker(client, &ro);
}

static void settle(void *ud, resil_breaker *b)
{
    (void)ud, (void)b;
    assert_int_equal(resil_redis_sync(client), 0);
}

int main(void)
{
    static const resil_redis_counting fleet_counting = RESIL_REDIS_COUNT_FLEET,
                                      local_counting = RESIL_REDIS_COUNT_LOCAL;
    const breaker_impl fleet = {.name = "redis-fleet-counting", .ud = (void *)&fleet_counting,
                                .begin = begin, .end = end, .make = make, .settle = settle};
    const breaker_impl local = {.name = "redis-local-counting", .ud = (void *)&local_counting,
                                .begin = begin, .end = end, .make = make, .settle = settle};
    if (fleet_group_setup(NULL) != 0)
        return 1;
    int failed = breaker_conformance_run(&fleet);
    failed += breaker_conformance_run(&local);
    fleet_group_teardown(NULL);
    return failed;
}
