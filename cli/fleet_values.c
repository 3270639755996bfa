/*
 * fleet_values.c — reading `--fleet-rate`, `--fleet-concurrency` and
 * `--fleet-timeout`; see fleet_values.h. Each value is split at its
 * separators into parts that the tool's own readers take (whole numbers,
 * durations), and any part that does not fit rejects the whole value with
 * the form it must have, since the user wrote it as one.
 */
#include <string.h>

#include "fleet_values.h"

#define DAY RESIL_S(86400)

static const char RATE_FORM[] = "RATE/PER[:BURST] (e.g. 100/s, 20/m:40, 5/10s) with RATE and "
                                "BURST in 1..1000000000, PER s, m, h or 1ms..1d, and at "
                                "most one per microsecond";
static const char CONC_FORM[] = "N[:LEASE] (e.g. 8 or 8:30s) with N in 1..2147483647 and "
                                "LEASE 10ms..1d";

/* text[0, len) as a whole number in [min, max]. */
static bool whole_in(const char *text, size_t len, uint64_t min, uint64_t max, uint64_t *out)
{
    char buf[24];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    return args_whole(buf, out) && *out >= min && *out <= max;
}

/* text[0, len) as a duration in [min, max]. */
static bool duration_in(const char *text, size_t len, resil_duration min, resil_duration max,
                        resil_duration *out)
{
    return resil_duration_parse(text, len, out, NULL) == 0 && *out >= min && *out <= max;
}

/* The period after '/': a bare unit means one of it. */
static bool period_of(const char *text, size_t len, resil_duration *out)
{
    static const struct {
        const char *unit;
        resil_duration one;
    } bare[] = {{"s", RESIL_S(1)}, {"m", RESIL_S(60)}, {"h", RESIL_S(3600)}};
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++) {
        if (len == strlen(bare[i].unit) && memcmp(text, bare[i].unit, len) == 0) {
            *out = bare[i].one;
            return true;
        }
    }
    return duration_in(text, len, RESIL_MS(1), DAY, out);
}

int fleet_rate_parse(const args *a, const char *v, fleet_limit_opts *o)
{
    const char *slash = strchr(v, '/');
    if (slash == NULL)
        return args_reject(a, "--fleet-rate", RATE_FORM, v);
    const char *colon = strchr(slash, ':');
    const char *end = colon != NULL ? colon : slash + strlen(slash);
    uint64_t rate, burst;
    resil_duration period;
    if (!whole_in(v, (size_t)(slash - v), 1, (uint64_t)FLEET_MAX_PERMITS, &rate) ||
        !period_of(slash + 1, (size_t)(end - slash - 1), &period) ||
        period / (resil_duration)rate < RESIL_US(1))
        return args_reject(a, "--fleet-rate", RATE_FORM, v);
    burst = rate;
    if (colon != NULL &&
        !whole_in(colon + 1, strlen(colon + 1), 1, (uint64_t)FLEET_MAX_PERMITS, &burst))
        return args_reject(a, "--fleet-rate", RATE_FORM, v);
    o->rate = (int64_t)rate;
    o->period = period;
    o->burst = (int64_t)burst;
    return 0;
}

int fleet_concurrency_parse(const args *a, const char *v, fleet_limit_opts *o)
{
    const char *colon = strchr(v, ':');
    size_t n_len = colon != NULL ? (size_t)(colon - v) : strlen(v);
    uint64_t n;
    resil_duration lease = FLEET_LEASE_DEFAULT;
    if (!whole_in(v, n_len, 1, INT32_MAX, &n) ||
        (colon != NULL && !duration_in(colon + 1, strlen(colon + 1), RESIL_MS(10), DAY, &lease)))
        return args_reject(a, "--fleet-concurrency", CONC_FORM, v);
    o->concurrency = (int32_t)n;
    o->lease = lease;
    return 0;
}

int fleet_limits_need_fleet(const args *a, const char *fleet, const fleet_limit_opts *o)
{
    if (fleet == NULL && (o->rate > 0 || o->concurrency > 0))
        return args_fail(a, "--fleet-rate and --fleet-concurrency need --fleet");
    return 0;
}

int fleet_timeout_parse(const args *a, const char *v, resil_duration *out)
{
    resil_duration d;
    if (args_duration(a, "--fleet-timeout", v, true, &d) != 0)
        return RESIL_EINVAL;
    if (d < FLEET_TIMEOUT_MIN || d > FLEET_TIMEOUT_MAX)
        return args_reject(a, "--fleet-timeout", "a duration from 1ms to 10s", v);
    *out = d;
    return 0;
}

int fleet_timeout_needs_fleet(const args *a, const char *fleet, resil_duration timeout)
{
    if (fleet == NULL && timeout > 0)
        return args_fail(a, "--fleet-timeout needs --fleet");
    return 0;
}
