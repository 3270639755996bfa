/*
 * backoff.h — how long to wait before the next attempt.
 *
 * Pure functions of (options, n, state, random draw): no clock, no
 * allocation, so every formula is tested with exact values. n is the number
 * of failed attempts so far, 1-based (the wait after the first failure has
 * n = 1). The base formula runs first, then jitter, then max_delay caps the
 * result. All arithmetic saturates: a huge n gives the cap, never a wrapped
 * or negative value.
 *
 *   constant     d
 *   linear       d·n
 *   exponential  d·factor^(n−1)
 *   fibonacci    d·F(n), F = 1, 1, 2, 3, 5, …
 *   list         delays[n−1] from a list the caller gives (Polly v7's
 *                WaitAndRetry with a list); past its end the last entry
 *                repeats. `base` and `factor` are not read.
 *
 * Jitter, with x the base formula's value:
 *   none          x
 *   full          U[0, x)
 *   equal         x/2 + U[0, x/2)
 *   decorrelated  min(cap, U[base, 3·previous)), previous starting at base
 *   proportional  x·U[1−f, 1+f)
 *   polly         Polly v8 parity: ±25 % for constant and linear (and
 *                 fibonacci); DecorrelatedJitterBackoffV2 for exponential
 *
 * Decorrelated and Polly's exponential jitter carry state from one wait to
 * the next inside one execution: that is resil_backoff_state, which the
 * caller (the retry executor) zero-initialises per execution.
 *
 * Where the formulas leave room, these choices hold:
 *  - max_delay caps the formula before jitter as well as the result after
 *    it, so at a huge n full jitter still spreads over [0, cap) instead of
 *    returning the cap every time. Polly's jitter keeps Polly's order: it
 *    jitters the raw formula and caps only the result.
 *  - decorrelated ignores the kind (its growth is the previous wait's); with
 *    base 0 it waits 0; a previous wait held under base by the cap draws
 *    from base again; with no cap, 3·previous saturates at
 *    RESIL_DURATION_MAX and the wait stays below it.
 *  - polly with base 0 waits 0 and leaves the state alone, as Polly does;
 *    on exponential it is Polly's fixed doubling curve, so validate requires
 *    factor 2 there. When the curve passes the double range (n > 1024), the
 *    wait is the cap, as Polly's overflow guard gives its maximum.
 *  - every call with a random jitter draws exactly one value; jitter none
 *    draws nothing. Draws outside [0, 1) are clamped into it.
 *  - on options that were never validated, a negative base or max_delay
 *    reads as 0, an unknown kind as constant and an unknown jitter as none:
 *    the result is still never negative.
 */
#ifndef RESIL_BACKOFF_H
#define RESIL_BACKOFF_H

#include "rng.h"
#include "time.h"

RESIL_BEGIN_DECLS

typedef enum resil_backoff_kind {
    RESIL_BACKOFF_CONSTANT,
    RESIL_BACKOFF_LINEAR,
    RESIL_BACKOFF_EXPONENTIAL,
    RESIL_BACKOFF_FIBONACCI,
    RESIL_BACKOFF_LIST /* `delays`, in order */
} resil_backoff_kind;

typedef enum resil_jitter {
    RESIL_JITTER_NONE,
    RESIL_JITTER_FULL,
    RESIL_JITTER_EQUAL,
    RESIL_JITTER_DECORRELATED,
    RESIL_JITTER_PROPORTIONAL,
    RESIL_JITTER_POLLY
} resil_jitter;

typedef struct resil_backoff {
    resil_backoff_kind kind;  /* default exponential */
    resil_duration base;      /* default 1 s; >= 0 */
    double factor;            /* exponential growth, default 2.0; >= 1 */
    resil_jitter jitter;      /* default full */
    double jitter_fraction;   /* proportional's f, default 0.25; in [0,1] */
    resil_duration max_delay; /* cap, default 30 s; RESIL_DURATION_MAX = none */
    /* Members added under this SONAME, each in a reserved slot (docs/abi.md). */
    union {
        const resil_duration *delays; /* RESIL_BACKOFF_LIST: the waits, each
                                         >= 0; not owned (must outlive the
                                         policy) */
        resil_reserved delays_r_;
    };
    union {
        size_t delays_len;            /* RESIL_BACKOFF_LIST: >= 1 */
        resil_reserved delays_len_r_;
    };
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_backoff;

typedef struct resil_backoff_state {
    resil_duration previous; /* decorrelated: last wait (0 = none yet) */
    double polly_previous;   /* Polly's DecorrelatedJitterBackoffV2 state */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_backoff_state;

RESIL_API void resil_backoff_default(resil_backoff *b);
/* Check every field; the message names it ("backoff.factor must be a
 * finite number >= 1, got 0.5"). */
RESIL_API int resil_backoff_validate(const resil_backoff *b, resil_err *err);

/* The wait after the n-th failure (n >= 1; n == 0 is treated as 1). `st`
 * may be NULL: each call then starts from a fresh state (decorrelated draws
 * from [base, 3·base), Polly's curve subtracts nothing). `rng` may be NULL:
 * a random jitter then draws from resil_rng_thread(). */
RESIL_API resil_duration resil_backoff_delay(const resil_backoff *b, uint32_t n,
                                             resil_backoff_state *st,
                                             resil_rng *rng);

/* The base formula alone, before jitter and cap (saturating). */
RESIL_API resil_duration resil_backoff_base_delay(const resil_backoff *b,
                                                  uint32_t n);

/* The largest wait the n-th failure can produce (for worst-case analysis
 * and --dry-run): jitter's upper bound, capped, over every draw and every
 * state. Decorrelated: base·3^n; polly exponential: Polly's curve at n
 * over 1.4, times base; proportional: x·(1+f); polly otherwise: x·1.25. */
RESIL_API resil_duration resil_backoff_max_delay(const resil_backoff *b,
                                                 uint32_t n);

/* Names used by the CLI and configuration: "constant", "linear",
 * "exponential", "fibonacci", "list"; "none", "full", "equal", "decorrelated",
 * "proportional", "polly". Parsers ignore ASCII case ("Exponential", as
 * Polly's configuration spells it) and return RESIL_EINVAL for unknown
 * names or NULL; a name function given an unknown value returns
 * "unknown". */
RESIL_API const char *resil_backoff_kind_name(resil_backoff_kind k);
RESIL_API const char *resil_jitter_name(resil_jitter j);
RESIL_API int resil_backoff_kind_parse(const char *s, resil_backoff_kind *out);
RESIL_API int resil_jitter_parse(const char *s, resil_jitter *out);

RESIL_END_DECLS

#endif
