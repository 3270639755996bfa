/*
 * backoff.c — the wait before the next attempt: base formula, jitter, cap.
 *
 * Every wait is computed in one direction (formula, then jitter, then cap)
 * from plain values, so tests can state exact waits. Geometric growth and
 * jitter are done in double and brought back through the one saturating,
 * truncating gate resil_dur_mul(): a double holds factor^n for any n
 * (reaching +inf, never wrapping) where int64 cannot. Integer formulas
 * (linear, fibonacci) check before they multiply.
 *
 * max_delay caps the formula before jitter as well as the result after it.
 * Capping only afterwards would make full jitter return exactly the cap
 * almost every time once d·2^n passes it, and the waits would stop spreading
 * clients apart: the point of jitter. This is the "capped exponential, then
 * jitter" shape of the AWS analysis. Polly's jitter is the one exception: it
 * keeps Polly's own order (jitter the raw formula, then cap) so that the
 * same inputs give the same waits as Polly v8.
 *
 * Every call with a random jitter draws exactly one value, whatever the
 * inputs, so a seeded generator shared by several executions stays aligned
 * with a reference that draws once per backoff wait.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "resil/backoff.h"

/* F(92) is the largest Fibonacci number that fits in an int64_t. */
#define FIB_LAST_FITTING 92u
/* The largest double below 1: a draw of 1.0 or more is clamped to it. */
#define BELOW_ONE 0x1.fffffffffffffp-1

static const char *const kind_names[] = {"constant", "linear", "exponential",
                                         "fibonacci", "list"};
static const char *const jitter_names[] = {"none",         "full",
                                           "equal",        "decorrelated",
                                           "proportional", "polly"};

/* ---- small arithmetic ----------------------------------------------------- */

static resil_duration min_dur(resil_duration a, resil_duration b)
{
    return a < b ? a : b;
}

static resil_duration non_negative(resil_duration d) { return d > 0 ? d : 0; }

/* ---- base formulas -------------------------------------------------------- */

static uint64_t fibonacci(uint32_t n)
{
    uint64_t prev = 1, cur = 1; /* F(1), F(2) */
    for (uint32_t i = 2; i < n; i++) {
        uint64_t next = prev + cur;
        prev = cur;
        cur = next;
    }
    return cur;
}

static resil_duration fibonacci_delay(resil_duration d, uint32_t n)
{
    if (d == 0)
        return 0;
    if (n > FIB_LAST_FITTING)
        return RESIL_DURATION_MAX;
    return resil__mul_sat(d, (int64_t)fibonacci(n));
}

/* d·2^k in integers: exact where a double would drop d's low bits. */
static resil_duration doubled(resil_duration d, uint32_t k)
{
    if (d <= 0)
        return 0;
    if (k >= 63 || d > (RESIL_DURATION_MAX >> k))
        return RESIL_DURATION_MAX;
    return d << k;
}

static resil_duration exponential_delay(resil_duration d, double factor, uint32_t n)
{
    if (factor == 2.0)
        return doubled(d, n - 1);
    return resil_dur_mul(d, pow(factor, (double)(n - 1)));
}

/* The caller's list: entry n−1, the last one past its end; an empty or
 * missing list (never validated) waits 0. */
static resil_duration listed_delay(const resil_backoff *b, uint32_t n)
{
    if (b->delays == NULL || b->delays_len == 0)
        return 0;
    size_t i = n - 1 < b->delays_len ? n - 1 : b->delays_len - 1;
    return non_negative(b->delays[i]);
}

resil_duration resil_backoff_base_delay(const resil_backoff *b, uint32_t n)
{
    resil_duration d = non_negative(b->base);
    n = n ? n : 1;
    switch (b->kind) {
    case RESIL_BACKOFF_LIST:
        return listed_delay(b, n);
    case RESIL_BACKOFF_LINEAR:
        return resil__mul_sat(d, n);
    case RESIL_BACKOFF_EXPONENTIAL:
        return exponential_delay(d, b->factor, n);
    case RESIL_BACKOFF_FIBONACCI:
        return fibonacci_delay(d, n);
    case RESIL_BACKOFF_CONSTANT:
    default:
        return d;
    }
}

/* ---- jitter --------------------------------------------------------------- */

static double draw(resil_rng *rng)
{
    double u = resil_rng_next(rng ? rng : resil_rng_thread());
    if (!(u > 0))
        return 0;
    return u < 1 ? u : BELOW_ONE;
}

/* U[0, x): truncation of x·u, kept strictly below x even where rounding of
 * a huge x to double would reach it. */
static resil_duration below(resil_duration x, double u)
{
    resil_duration v = resil_dur_mul(x, u);
    return v < x ? v : (x > 0 ? x - 1 : 0);
}

static resil_duration equal_jitter(resil_duration x, double u)
{
    resil_duration half = x / 2;
    return (x - half) + below(half, u);
}

static resil_duration proportional_jitter(resil_duration x, double f, double u)
{
    return resil_dur_mul(x, 1.0 - f + 2.0 * f * u);
}

/* AWS's decorrelated jitter: min(cap, U[base, 3·previous)). It ignores the
 * kind: its growth comes from the previous wait, which starts at base. A
 * previous wait below base (a cap under base) still draws from base. */
static resil_duration decorrelated_jitter(resil_duration base, resil_duration cap,
                                          resil_backoff_state *st, double u)
{
    resil_duration prev = st->previous > base ? st->previous : base;
    resil_duration high = resil__mul_sat(prev, 3);
    resil_duration v = base + below(high - base, u);
    v = min_dur(v, cap);
    st->previous = v;
    return v;
}

/* Polly v8's jitter for constant and linear (RetryHelper.ApplyJitter):
 * x + x·0.5·u − x·0.5/2, that is x·U[0.75, 1.25). */
static resil_duration polly_plus_minus_25(resil_duration x, double u)
{
    return resil_dur_mul(x, 0.75 + 0.5 * u);
}

/* Polly's DecorrelatedJitterBackoffV2 formula: the cumulative curve whose
 * successive differences are the waits. */
static double polly_curve(double t) { return pow(2.0, t) * tanh(sqrt(4.0 * t)); }

/* Polly's DecorrelatedJitterBackoffV2 with Polly's 0-based attempt index
 * (n − 1). Polly returns its maximum at once when the curve overflows to
 * infinity (t ≥ 1024), which also keeps inf − inf out of the state; a
 * difference that comes out negative (the caller reused a state across
 * executions) gives 0 where Polly would produce a negative TimeSpan. */
static resil_duration polly_exponential(resil_duration base, uint32_t n,
                                        resil_backoff_state *st, double u)
{
    double next = polly_curve((double)(n - 1) + u);
    double prev = st->polly_previous;
    st->polly_previous = next;
    if (isinf(next))
        return RESIL_DURATION_MAX;
    return resil_dur_mul(base, (next - prev) * (1.0 / 1.4));
}

static resil_duration polly_jitter(const resil_backoff *b, uint32_t n,
                                   resil_backoff_state *st, double u)
{
    resil_duration base = non_negative(b->base);
    if (base == 0)
        return 0;
    if (b->kind == RESIL_BACKOFF_EXPONENTIAL)
        return polly_exponential(base, n, st, u);
    return polly_plus_minus_25(resil_backoff_base_delay(b, n), u);
}

/* The draw and the jitters' floating point, out of line: a wait without
 * jitter (the common retry's) then runs in a function with no frame. */
__attribute__((noinline)) static resil_duration jittered(const resil_backoff *b, uint32_t n,
                                                        resil_backoff_state *st,
                                                        resil_rng *rng, resil_duration cap)
{
    resil_backoff_state scratch = {.previous = 0, .polly_previous = 0.0};
    if (st == NULL)
        st = &scratch;
    double u = draw(rng);
    if (b->jitter == RESIL_JITTER_POLLY)
        return min_dur(polly_jitter(b, n, st, u), cap);
    if (b->jitter == RESIL_JITTER_DECORRELATED)
        return decorrelated_jitter(non_negative(b->base), cap, st, u);

    resil_duration x = min_dur(resil_backoff_base_delay(b, n), cap);
    if (b->jitter == RESIL_JITTER_FULL)
        return below(x, u);
    if (b->jitter == RESIL_JITTER_EQUAL)
        return equal_jitter(x, u);
    return min_dur(proportional_jitter(x, b->jitter_fraction, u), cap);
}

resil_duration resil_backoff_delay(const resil_backoff *b, uint32_t n,
                                   resil_backoff_state *st, resil_rng *rng)
{
    resil_duration cap = non_negative(b->max_delay);
    n = n ? n : 1;
    if (b->jitter == RESIL_JITTER_NONE || (unsigned)b->jitter >= RESIL__COUNT(jitter_names))
        return min_dur(resil_backoff_base_delay(b, n), cap);
    return jittered(b, n, st, rng, cap);
}

/* ---- upper bounds --------------------------------------------------------- */

/* The sup of Polly's exponential wait for failure n over every draw and
 * every carried state: the curve is increasing and the previous value is
 * never below 0, so the wait stays under curve(n)/1.4·base. */
static resil_duration polly_bound(const resil_backoff *b, uint32_t n)
{
    resil_duration base = non_negative(b->base);
    if (base == 0)
        return 0;
    if (b->kind != RESIL_BACKOFF_EXPONENTIAL)
        return resil_dur_mul(resil_backoff_base_delay(b, n), 1.25);
    return resil_dur_mul(base, polly_curve((double)n) * (1.0 / 1.4));
}

resil_duration resil_backoff_max_delay(const resil_backoff *b, uint32_t n)
{
    resil_duration cap = non_negative(b->max_delay);
    n = n ? n : 1;
    resil_duration x = min_dur(resil_backoff_base_delay(b, n), cap);
    switch (b->jitter) {
    case RESIL_JITTER_PROPORTIONAL:
        return min_dur(resil_dur_mul(x, 1.0 + b->jitter_fraction), cap);
    case RESIL_JITTER_DECORRELATED:
        /* Each wait is below 3× the previous one, which starts at base. */
        return min_dur(resil_dur_mul(non_negative(b->base), pow(3.0, (double)n)), cap);
    case RESIL_JITTER_POLLY:
        return min_dur(polly_bound(b, n), cap);
    default:
        return x;
    }
}

/* ---- options -------------------------------------------------------------- */

void resil_backoff_default(resil_backoff *b)
{
    memset(b, 0, sizeof *b);
    b->kind = RESIL_BACKOFF_EXPONENTIAL;
    b->base = RESIL_S(1);
    b->factor = 2.0;
    b->jitter = RESIL_JITTER_FULL;
    b->jitter_fraction = 0.25;
    b->max_delay = RESIL_S(30);
}

static int validate_list(const resil_backoff *b, resil_err *err)
{
    if (b->delays == NULL || b->delays_len == 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "backoff.delays must hold at least one wait with kind list");
    for (size_t i = 0; i < b->delays_len; i++) {
        if (b->delays[i] >= 0)
            continue;
        char field[40];
        snprintf(field, sizeof field, "backoff.delays[%zu]", i);
        return resil__bad_duration(err, field, ">= 0", b->delays[i]);
    }
    return 0;
}

int resil_backoff_validate(const resil_backoff *b, resil_err *err)
{
    if (b == NULL)
        return resil_err_set(err, RESIL_EINVAL, "backoff must not be NULL");
    if ((unsigned)b->kind >= RESIL__COUNT(kind_names))
        return resil_err_set(err, RESIL_EINVAL,
                             "backoff.kind must be constant, linear, exponential, "
                             "fibonacci or list, got %d",
                             (int)b->kind);
    if (b->kind == RESIL_BACKOFF_LIST) {
        int rc = validate_list(b, err);
        if (rc != 0)
            return rc;
    }
    if (b->base < 0)
        return resil__bad_duration(err, "backoff.base", ">= 0", b->base);
    if (!isfinite(b->factor) || b->factor < 1.0)
        return resil_err_set(err, RESIL_EINVAL,
                             "backoff.factor must be a finite number >= 1, got %g",
                             b->factor);
    if ((unsigned)b->jitter >= RESIL__COUNT(jitter_names))
        return resil_err_set(err, RESIL_EINVAL,
                             "backoff.jitter must be none, full, equal, decorrelated, "
                             "proportional or polly, got %d",
                             (int)b->jitter);
    if (!(b->jitter_fraction >= 0.0 && b->jitter_fraction <= 1.0))
        return resil_err_set(err, RESIL_EINVAL,
                             "backoff.jitter_fraction must be in [0,1], got %g",
                             b->jitter_fraction);
    if (b->max_delay < 0)
        return resil__bad_duration(err, "backoff.max_delay", ">= 0", b->max_delay);
    if (b->jitter == RESIL_JITTER_POLLY && b->kind == RESIL_BACKOFF_EXPONENTIAL &&
        b->factor != 2.0)
        return resil_err_set(err, RESIL_EINVAL,
                             "backoff.factor must be 2 with polly jitter on exponential "
                             "backoff (Polly's formula doubles), got %g",
                             b->factor);
    return 0;
}

/* ---- names ---------------------------------------------------------------- */

const char *resil_backoff_kind_name(resil_backoff_kind k)
{
    return resil__name_at(kind_names, RESIL__COUNT(kind_names), (unsigned)k);
}

const char *resil_jitter_name(resil_jitter j)
{
    return resil__name_at(jitter_names, RESIL__COUNT(jitter_names), (unsigned)j);
}

/* Case is ignored: Polly's configuration spells them "Exponential". */
int resil_backoff_kind_parse(const char *s, resil_backoff_kind *out)
{
    int i = resil__name_index(kind_names, RESIL__COUNT(kind_names), s);
    if (i < 0)
        return RESIL_EINVAL;
    *out = (resil_backoff_kind)i;
    return 0;
}

int resil_jitter_parse(const char *s, resil_jitter *out)
{
    int i = resil__name_index(jitter_names, RESIL__COUNT(jitter_names), s);
    if (i < 0)
        return RESIL_EINVAL;
    *out = (resil_jitter)i;
    return 0;
}
