/*
 * duration.c — saturating duration arithmetic, and the one parser and
 * formatter for human durations.
 *
 * Durations are plain int64_t nanoseconds, so every operation that could
 * overflow clamps instead: a backoff at attempt 10 000 must come out as the
 * cap, never as a wrapped negative wait, and signed overflow would be
 * undefined behaviour anyway.
 */
#include <math.h>

#include "resil/time.h"

resil_duration resil_dur_add(resil_duration a, resil_duration b)
{
    resil_duration r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

resil_duration resil_dur_sub(resil_duration a, resil_duration b)
{
    resil_duration r;
    if (!__builtin_sub_overflow(a, b, &r))
        return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
}

/* The double nearest INT64_MAX is 2^63, which does not fit: compare against
 * it with >= and clamp before converting. */
static resil_duration clamp_double(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (resil_duration)v;
}

/* Truncates toward zero, like C's own conversion: a jittered wait of
 * U * x never rounds up past x. */
resil_duration resil_dur_mul(resil_duration d, double f)
{
    resil_duration r = clamp_double((double)d * f);
    return d >= 0 && r < 0 ? 0 : r;
}

/* Rounds to the nearest nanosecond, so 0.3 s is exactly 300 ms. */
resil_duration resil_dur_from_seconds(double seconds)
{
    return clamp_double(round(seconds * 1e9));
}

double resil_dur_to_ms(resil_duration d) { return (double)d / 1e6; }
