/*
 * breaker_conformance.h — what every resil_breaker implementation must do,
 * written once and run against each: the built-in breaker in tests/unit,
 * the fleet breaker on Redis in tests/redis, and a plug-in of the built-in
 * breaker behind its own table (which checks the handle's dispatch).
 *
 * The suite covers the behaviour breaker.h describes: states and the
 * consecutive and ratio rules, rejections and their retry_after, half-open
 * probes, generations (a result from before a change is discarded), events
 * and their order, manual control, stats. An implementation supplies a
 * factory for breakers on the suite's fake clock and, where it differs,
 * says so through the hooks below:
 *
 *  - settle: results reach some implementations later (the Redis breaker
 *    counts fleet-wide and learns the outcome at its next sync round); the
 *    suite calls settle after each result that may change the state, before
 *    it looks. The built-in breaker needs none.
 *  - BREAKER_CAN_DISABLE: only implementations with a disabled state run
 *    the disable test (the fleet has none; its disable is RESIL_EINVAL).
 *  - BREAKER_CAN_RECORD_WITHOUT_PERMIT: results reported without a permit
 *    (resil_breaker_record_success/failure) count; without it they must be
 *    refused with RESIL_EINVAL, which the suite checks instead.
 *  - BREAKER_CAN_COUNT_WINDOW, BREAKER_CAN_PREDICATE: the count window and
 *    the trip predicate, run only where offered (the fleet breaker counts
 *    over time, shared by instances that cannot share a callback).
 */
#ifndef RESIL_BREAKER_CONFORMANCE_H
#define RESIL_BREAKER_CONFORMANCE_H

#include "test.h"

#define BREAKER_CAN_DISABLE 1u
#define BREAKER_CAN_RECORD_WITHOUT_PERMIT 2u
#define BREAKER_CAN_COUNT_WINDOW 4u
#define BREAKER_CAN_PREDICATE 8u

/* Wall time the suite's fake clock starts at (2023-11-14, in ns): shared
 * state keeps wall time. */
#define BREAKER_WALL_START (INT64_C(1700000000000) * INT64_C(1000000))

typedef struct breaker_impl {
    const char *name;
    unsigned caps;
    void *ud;
    /* Before and after each test (a fresh server, a client); may be NULL. */
    int (*begin)(void *ud);
    void (*end)(void *ud);
    /* A breaker named `name` with the rules `o` (o->clock is the suite's
     * fake clock, o->listener the suite's recorder). */
    resil_breaker *(*make)(void *ud, const char *name, const resil_breaker_opts *o);
    /* Let the breaker learn what the results so far did; may be NULL. */
    void (*settle)(void *ud, resil_breaker *b);
} breaker_impl;

/* Run every conformance test against `impl` as one cmocka group; returns
 * the number of failed tests. */
int breaker_conformance_run(const breaker_impl *impl);

#endif
