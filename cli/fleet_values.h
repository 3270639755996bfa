/*
 * fleet_values.h — the values of `--fleet-rate`, `--fleet-concurrency` and
 * `--fleet-timeout`, shared by `resil http` and `resil gateway`. Apart from fleet_opts.h,
 * which needs the Redis adapter, so that the parsers are part of the
 * option library the unit tests and fuzz targets link, and are tested
 * whether or not Redis is built.
 */
#ifndef RESIL_CLI_FLEET_VALUES_H
#define RESIL_CLI_FLEET_VALUES_H

#include "args.h"

/* The fleet-wide limits asked for; a zero rate or concurrency: none. */
typedef struct fleet_limit_opts {
    int64_t rate;          /* permits per period */
    resil_duration period;
    int64_t burst;         /* default: rate */
    int32_t concurrency;   /* calls at once across the fleet */
    resil_duration lease;  /* how long a dead process's permit outlives it */
} fleet_limit_opts;

#define FLEET_MAX_PERMITS INT64_C(1000000000)
#define FLEET_LEASE_DEFAULT RESIL_S(5)

/* --fleet-rate RATE/PER[:BURST]: RATE and BURST whole numbers in [1, 1e9],
 * PER s, m, h or a duration in [1ms, 1d], at most one permit per µs.
 * "100/s", "20/m:40", "5/10s". 0, or RESIL_EINVAL reported by name. */
int fleet_rate_parse(const args *a, const char *v, fleet_limit_opts *o);
/* --fleet-concurrency N[:LEASE]: N in [1, 2^31-1], LEASE a duration in
 * [10ms, 1d] (default 5s). 0, or RESIL_EINVAL reported by name. */
int fleet_concurrency_parse(const args *a, const char *v, fleet_limit_opts *o);
/* Both need --fleet: 0, or RESIL_EINVAL reported. */
int fleet_limits_need_fleet(const args *a, const char *fleet, const fleet_limit_opts *o);

/* --fleet-timeout DURATION: how long one Redis call may take, a duration
 * in [1ms, 10s]. 0, or RESIL_EINVAL reported by name. */
#define FLEET_TIMEOUT_MIN RESIL_MS(1)
#define FLEET_TIMEOUT_MAX RESIL_S(10)
int fleet_timeout_parse(const args *a, const char *v, resil_duration *out);
/* A timeout given (> 0) needs --fleet: 0, or RESIL_EINVAL reported. */
int fleet_timeout_needs_fleet(const args *a, const char *fleet, resil_duration timeout);

#endif
