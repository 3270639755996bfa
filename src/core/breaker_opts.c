/*
 * breaker_opts.c — the breaker's defaults, option checks and names.
 *
 * Kept apart from the state machine so that breaker.c reads as the protocol
 * alone. The defaults are Polly v8's (ratio 0.1 over 30 s, throughput 100,
 * break 5 s), which the standard pipeline also uses, plus resil's own
 * additions switched to their neutral setting (no slow-call rule, a fixed
 * break, one probe closing the circuit). Every check names its field, and
 * fields that only matter to the rolling window are checked only when the
 * window is in use, so a consecutive-only breaker is not refused for a
 * throughput it never looks at.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "resil/breaker.h"

#define PROBES_MAX 65535u

void resil_breaker_opts_default(resil_breaker_opts *o)
{
    memset(o, 0, sizeof *o);
    o->kind = RESIL_BREAKER_RATIO;
    o->failure_threshold = 5;
    o->failure_ratio = 0.1;
    o->minimum_throughput = 100;
    o->sampling_duration = RESIL_S(30);
    o->slow_call_duration = 0;
    o->slow_call_ratio = 1.0;
    o->break_duration = RESIL_S(5);
    o->break_growth = 1.0;
    o->max_break_duration = RESIL_S(300);
    o->half_open_probes = 1;
    o->success_threshold = 1;
    o->probe_timeout = 0;
    o->window = RESIL_BREAKER_WINDOW_TIME;
    o->window_size = 100;
}

static bool is_ratio(double r) { return r > 0.0 && r <= 1.0; } /* false for NaN */

static int check_kind_and_thresholds(const resil_breaker_opts *o, resil_err *err)
{
    unsigned all = RESIL_BREAKER_BOTH | RESIL_BREAKER_PREDICATE;
    if (o->kind == 0 || ((unsigned)o->kind & ~all) != 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.kind must combine consecutive, ratio and predicate, "
                             "got %d",
                             (int)o->kind);
    bool predicate = (o->kind & RESIL_BREAKER_PREDICATE) != 0;
    if (predicate && o->trip == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.trip must be set when kind includes predicate");
    if (!predicate && o->trip != NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.trip is set but kind does not include predicate");
    if (o->failure_threshold < 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.failure_threshold must be >= 1, got %u",
                             o->failure_threshold);
    if (!is_ratio(o->failure_ratio))
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.failure_ratio must be in (0,1], got %g",
                             o->failure_ratio);
    return 0;
}

static int check_window(const resil_breaker_opts *o, resil_err *err)
{
    bool window_used = (o->kind & RESIL_BREAKER_RATIO) || o->slow_call_duration > 0;
    if (o->window != RESIL_BREAKER_WINDOW_TIME && o->window != RESIL_BREAKER_WINDOW_COUNT)
        return resil_err_set(err, RESIL_EINVAL, "breaker.window must be time or count, got %d",
                             (int)o->window);
    if (o->window == RESIL_BREAKER_WINDOW_COUNT &&
        (o->window_size < 1 || o->window_size > RESIL_BREAKER_WINDOW_SIZE_MAX))
        return resil_err_set(err, RESIL_EINVAL, "breaker.window_size must be in [1, %u], got %u",
                             (unsigned)RESIL_BREAKER_WINDOW_SIZE_MAX, o->window_size);
    if (window_used && o->minimum_throughput < 2)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.minimum_throughput must be >= 2, got %u",
                             o->minimum_throughput);
    if (o->sampling_duration < RESIL_MS(500))
        return resil__bad_duration(err, "breaker.sampling_duration", ">= 500ms",
                                   o->sampling_duration);
    if (o->slow_call_duration < 0)
        return resil__bad_duration(err, "breaker.slow_call_duration", ">= 0 (0 = off)",
                                   o->slow_call_duration);
    if (!is_ratio(o->slow_call_ratio))
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.slow_call_ratio must be in (0,1], got %g",
                             o->slow_call_ratio);
    return 0;
}

static int check_break(const resil_breaker_opts *o, resil_err *err)
{
    if (o->break_duration <= 0)
        return resil__bad_duration(err, "breaker.break_duration", "> 0", o->break_duration);
    if (!(o->break_growth >= 1.0) || isinf(o->break_growth))
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.break_growth must be a finite number >= 1, got %g",
                             o->break_growth);
    if (o->max_break_duration < 0)
        return resil__bad_duration(err, "breaker.max_break_duration", ">= 0",
                                   o->max_break_duration);
    if (o->break_growth > 1.0 && o->max_break_duration < o->break_duration)
        return resil__bad_duration(err, "breaker.max_break_duration",
                                   ">= break_duration when break_growth > 1",
                                   o->max_break_duration);
    return 0;
}

static int check_half_open(const resil_breaker_opts *o, resil_err *err)
{
    if (o->half_open_probes < 1 || o->half_open_probes > PROBES_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.half_open_probes must be in [1, %u], got %u",
                             PROBES_MAX, o->half_open_probes);
    if (o->success_threshold < 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.success_threshold must be >= 1, got %u",
                             o->success_threshold);
    if (o->probe_timeout < 0)
        return resil__bad_duration(err, "breaker.probe_timeout",
                                   ">= 0 (0 = the break in force)", o->probe_timeout);
    return 0;
}

int resil_breaker_opts_validate(const resil_breaker_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "breaker options must not be NULL");
    int rc;
    if ((rc = check_kind_and_thresholds(o, err)) != 0)
        return rc;
    if ((rc = check_window(o, err)) != 0)
        return rc;
    if ((rc = check_break(o, err)) != 0)
        return rc;
    if ((rc = check_half_open(o, err)) != 0)
        return rc;
    if (o->name != NULL && strlen(o->name) >= RESIL_BREAKER_NAME_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.name must be shorter than %d bytes, got %zu",
                             RESIL_BREAKER_NAME_MAX, strlen(o->name));
    return 0;
}

const char *resil_breaker_state_name(resil_breaker_state s)
{
    switch (s) {
    case RESIL_BREAKER_NONE:
        return "none";
    case RESIL_BREAKER_CLOSED:
        return "closed";
    case RESIL_BREAKER_OPEN:
        return "open";
    case RESIL_BREAKER_HALF_OPEN:
        return "half-open";
    case RESIL_BREAKER_ISOLATED:
        return "isolated";
    case RESIL_BREAKER_DISABLED:
        return "disabled";
    }
    return "unknown";
}

const char *resil_breaker_reason_name(resil_breaker_reason r)
{
    switch (r) {
    case RESIL_BREAKER_BY_CONSECUTIVE:
        return "consecutive failures";
    case RESIL_BREAKER_BY_RATIO:
        return "failure ratio";
    case RESIL_BREAKER_BY_SLOW_CALLS:
        return "slow calls";
    case RESIL_BREAKER_BY_BREAK_ELAPSED:
        return "break elapsed";
    case RESIL_BREAKER_BY_PROBE_FAILED:
        return "probe failed";
    case RESIL_BREAKER_BY_PROBES_SUCCEEDED:
        return "probes succeeded";
    case RESIL_BREAKER_BY_ISOLATE:
        return "isolated by hand";
    case RESIL_BREAKER_BY_CLOSE:
        return "closed by hand";
    case RESIL_BREAKER_BY_RESET:
        return "reset";
    case RESIL_BREAKER_BY_DISABLE:
        return "disabled by hand";
    case RESIL_BREAKER_BY_PREDICATE:
        return "trip predicate";
    }
    return "unknown";
}
