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
    RESIL_BACKOFF_FIBONACCI
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
} resil_backoff;

typedef struct resil_backoff_state {
    resil_duration previous; /* decorrelated: last wait (0 = none yet) */
    double polly_previous;   /* Polly's DecorrelatedJitterBackoffV2 state */
} resil_backoff_state;

RESIL_API void resil_backoff_default(resil_backoff *b);
/* Check every field; the message names it ("backoff.factor must be >= 1,
 * got 0.5"). */
RESIL_API int resil_backoff_validate(const resil_backoff *b, resil_err *err);

/* The wait after the n-th failure (n >= 1; n == 0 is treated as 1). `st`
 * may be NULL for stateless jitter; `rng` may be NULL when jitter is none. */
RESIL_API resil_duration resil_backoff_delay(const resil_backoff *b, uint32_t n,
                                             resil_backoff_state *st,
                                             resil_rng *rng);

/* The base formula alone, before jitter and cap (saturating). */
RESIL_API resil_duration resil_backoff_base_delay(const resil_backoff *b,
                                                  uint32_t n);

/* The largest wait the n-th failure can produce (for worst-case analysis
 * and --dry-run): jitter's upper bound, capped. */
RESIL_API resil_duration resil_backoff_max_delay(const resil_backoff *b,
                                                 uint32_t n);

/* Names used by the CLI and configuration: "constant", "linear",
 * "exponential", "fibonacci"; "none", "full", "equal", "decorrelated",
 * "proportional", "polly". Parsers return RESIL_EINVAL for unknown names. */
RESIL_API const char *resil_backoff_kind_name(resil_backoff_kind k);
RESIL_API const char *resil_jitter_name(resil_jitter j);
RESIL_API int resil_backoff_kind_parse(const char *s, resil_backoff_kind *out);
RESIL_API int resil_jitter_parse(const char *s, resil_jitter *out);

RESIL_END_DECLS

#endif
