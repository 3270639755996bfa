/*
 * time.h — durations, instants and the injectable clock.
 *
 * Every duration and instant is a signed 64-bit count of nanoseconds: one
 * type for all arithmetic, no struct timespec juggling, and roughly 292 years
 * of range. Arithmetic that could overflow saturates instead of wrapping
 * (resil_dur_add, resil_dur_mul): a retry policy asking for attempt 10 000
 * must get its cap, never garbage.
 *
 * Nothing in resil reads the time directly. It asks a resil_clock, a small
 * vtable, so that tests substitute the fake clock: virtual time that sleeps
 * advance instantly while every requested wait is recorded. That is what
 * makes the whole suite deterministic and instant.
 */
#ifndef RESIL_TIME_H
#define RESIL_TIME_H

#include "common.h"

RESIL_BEGIN_DECLS

typedef int64_t resil_duration; /* nanoseconds */
typedef int64_t resil_instant;  /* nanoseconds since an arbitrary epoch */

#define RESIL_NS(n) ((resil_duration)(n))
#define RESIL_US(n) ((resil_duration)(n) * INT64_C(1000))
#define RESIL_MS(n) ((resil_duration)(n) * INT64_C(1000000))
#define RESIL_S(n) ((resil_duration)(n) * INT64_C(1000000000))
#define RESIL_DURATION_MAX INT64_MAX
#define RESIL_INSTANT_MAX INT64_MAX

/* Saturating arithmetic: results clamp to [INT64_MIN, INT64_MAX]. */
RESIL_API resil_duration resil_dur_add(resil_duration a, resil_duration b);
RESIL_API resil_duration resil_dur_sub(resil_duration a, resil_duration b);
/* d * f truncated toward zero, clamped to [0, RESIL_DURATION_MAX] for
 * d >= 0; NaN gives 0. */
RESIL_API resil_duration resil_dur_mul(resil_duration d, double f);
/* Convert a (possibly huge, NaN or infinite) count of seconds, rounding to
 * the nearest nanosecond and saturating; NaN gives 0. */
RESIL_API resil_duration resil_dur_from_seconds(double seconds);
RESIL_API double resil_dur_to_ms(resil_duration d);

/*
 * Parse a human duration: "250ms", "2s", "1m30s", "1h", "1.5s", "750us",
 * "10ns", "1d", "0"; or the .NET TimeSpan form "hh:mm:ss[.fffffff]" and
 * "d.hh:mm:ss[.fffffff]" used by configuration files. Units: ns, us (or µs),
 * ms, s, m, h, d; components are summed ("1h2m3.5s"); fractions are exact,
 * rounded down to whole nanoseconds. A number without a unit is accepted
 * only as "0". In the TimeSpan form minutes and seconds must be below 60,
 * hours below 24 when days are given (unbounded otherwise: "36:00:00").
 * Leading and trailing spaces are not accepted. Errors: RESIL_ESYNTAX for bad
 * text (empty, missing number, missing or unknown unit, malformed TimeSpan),
 * RESIL_ERANGE for a value beyond RESIL_DURATION_MAX or a TimeSpan field out
 * of range; a leading '-' is RESIL_ERANGE with "must not be negative". On
 * error *out is untouched. `len` bytes are read, never more (no NUL needed).
 */
RESIL_API int resil_duration_parse(const char *text, size_t len,
                                   resil_duration *out, resil_err *err);
/* Same for a NUL-terminated string. */
RESIL_API int resil_duration_parse_cstr(const char *text, resil_duration *out,
                                        resil_err *err);

/*
 * Format a duration in the parser's units: "0s", "250ms", "1m30s", "1.5s",
 * "2h", "1h5s". Hours (the largest unit) and minutes come first, then the
 * part below a minute in whichever of s, ms, us, ns writes it exactly in the
 * fewest characters. Negative values get a leading '-'; every non-negative
 * value round-trips through resil_duration_parse. At most 25 characters.
 * Always NUL-terminates when cap > 0; returns the length the full text needs
 * (like snprintf).
 */
RESIL_API size_t resil_duration_format(resil_duration d, char *buf, size_t cap);

typedef struct resil_cancel resil_cancel;
typedef struct resil_clock resil_clock;

/*
 * The clock interface. `now` is monotonic; `wall_now` is Unix time in ns
 * (used only for HTTP dates); `sleep` waits for `d`, returning 0, or
 * RESIL_ECANCELED at once when `cancel` (may be NULL) fires first. A
 * non-positive `d` returns at once (RESIL_ECANCELED if already cancelled).
 */
struct resil_clock {
    resil_instant (*now)(resil_clock *self);
    int64_t (*wall_now)(resil_clock *self);
    int (*sleep)(resil_clock *self, resil_duration d, resil_cancel *cancel);
};

static inline resil_instant resil_clock_now(resil_clock *c) { return c->now(c); }
static inline int64_t resil_clock_wall_now(resil_clock *c) { return c->wall_now(c); }
static inline int resil_clock_sleep(resil_clock *c, resil_duration d, resil_cancel *cancel)
{
    return c->sleep(c, d, cancel);
}

/* The process-wide system clock: CLOCK_MONOTONIC's time (wall time:
 * CLOCK_REALTIME). On x86-64 with an invariant time-stamp counter that the
 * kernel's own clocksource is, it is read from the counter, scaled and
 * kept in step with clock_gettime(CLOCK_MONOTONIC): within 10 us of it in
 * steady state (typically tens of ns), for about half the cost of a
 * clock_gettime. Its first ~2 ms, everywhere else, and with RESIL_CLOCK=kernel
 * in the environment (or the build's RESIL_TSC_CLOCK=OFF), it is
 * clock_gettime itself. Its sleeps never end before its own reading reaches
 * their deadline. The bound and what it changes: docs/pipeline.md,
 * "A cheaper clock". */
RESIL_API resil_clock *resil_clock_system(void);
/* The coarse clock: CLOCK_MONOTONIC's time as of the last scheduler tick
 * (CLOCK_MONOTONIC_COARSE), never ahead of it and behind it by less than
 * one tick (1-10 ms on Linux), so never ahead of the system clock by more
 * than the system clock's bound; about a fifth of the cost of a
 * clock_gettime. Its wall time and its sleeps are the system clock's.
 * Where the system has no coarse clock, the system clock. What it changes
 * for a pipeline or a breaker: docs/pipeline.md, docs/breakers.md. */
RESIL_API resil_clock *resil_clock_coarse(void);

/*
 * The fake clock. Two modes:
 *  - auto-advance (the default): sleep(d) records d and advances virtual time
 *    by d at once; the single-threaded test's friend.
 *  - manual: sleep(d) blocks the calling thread until another thread moves
 *    virtual time past its wake-up with resil_fake_clock_advance() or the
 *    cancel token fires; for tests of threads racing a deadline.
 * Thread-safe in both modes. The on_sleep hook, when set, runs at the start
 * of every sleep (outside the clock's lock) with the requested wait: a test
 * uses it to fire a cancel token "during the wait".
 */
typedef struct resil_fake_clock resil_fake_clock;

typedef void (*resil_fake_sleep_hook)(resil_fake_clock *fc, resil_duration d,
                                      void *ud);

RESIL_API int resil_fake_clock_new(resil_instant start, int64_t wall_start,
                                   resil_fake_clock **out);
RESIL_API void resil_fake_clock_free(resil_fake_clock *fc);
RESIL_API resil_clock *resil_fake_clock_clock(resil_fake_clock *fc);
/* Affects sleeps that start afterwards; threads already blocked in a
 * manual-mode sleep still wait for advance() or their token. */
RESIL_API void resil_fake_clock_set_manual(resil_fake_clock *fc, bool manual);
RESIL_API void resil_fake_clock_set_hook(resil_fake_clock *fc,
                                         resil_fake_sleep_hook hook, void *ud);
/* Move virtual time forward (wall time too), waking due sleepers. A
 * non-positive d does not move time. Saturates at RESIL_INSTANT_MAX. */
RESIL_API void resil_fake_clock_advance(resil_fake_clock *fc, resil_duration d);
RESIL_API resil_instant resil_fake_clock_now(resil_fake_clock *fc);
/* How many sleeps were requested, and the i-th requested wait (0-based;
 * 0 when out of range). Every call is logged, including zero waits and waits
 * cancelled before or during the hook. The log keeps the first 4096 waits. */
RESIL_API size_t resil_fake_clock_sleep_count(resil_fake_clock *fc);
RESIL_API resil_duration resil_fake_clock_sleep_at(resil_fake_clock *fc, size_t i);
/* Number of threads currently blocked in a manual-mode sleep. */
RESIL_API size_t resil_fake_clock_sleepers(resil_fake_clock *fc);
/* The earliest wake-up of a manual-mode sleeper whose token has not
 * fired, RESIL_INSTANT_MAX when there is none: where a driver of several
 * sleeping threads moves time next. */
RESIL_API resil_instant resil_fake_clock_next_wake(resil_fake_clock *fc);
/* Block until at least n threads are blocked in a manual-mode sleep, so a
 * test can advance time knowing its sleepers are in place (no polling). */
RESIL_API void resil_fake_clock_await_sleepers(resil_fake_clock *fc, size_t n);
RESIL_API void resil_fake_clock_clear_log(resil_fake_clock *fc);

RESIL_END_DECLS

#endif
