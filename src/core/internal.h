/*
 * internal.h — the small mechanisms several core files share and no user
 * should call: the wording of a rejected duration option, the lookup of a
 * name in an enum's table, and the integer arithmetic that must neither
 * wrap nor round toward zero; and the statistics counters.
 *
 * Each exists once so that the components cannot drift apart: every
 * constructor names a bad duration in the units the parser reads ("-5ms",
 * not "-5000000 ns"), every enum name table answers an unknown value and an
 * unknown name alike, and every saturating product and time bucket is the
 * same few lines, checked once.
 */
#ifndef RESIL_INTERNAL_H
#define RESIL_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "resil/cancel.h"
#include "resil/retry.h"
#include "resil/loop.h"
#include "resil/time.h"
#include "tsc.h"

/* An execution's memory from the loop's spares (or malloc): at least
 * `need` bytes, *cap of them usable; NULL when out of memory. *spared
 * says it is a block an execution gave back, whose contents past the
 * first 24 bytes (the spare list's) are as that execution left them;
 * otherwise they are undefined. Give it back on the loop's thread. */
void *resil__loop_take(resil_loop *l, size_t need, size_t *cap, bool *spared);
void resil__loop_give(resil_loop *l, void *mem, size_t cap);

/* Report "FIELD must be RULE, got D" with D written by
 * resil_duration_format, and return RESIL_EINVAL. FIELD names the
 * component too ("budget.ttl"). */
int resil__bad_duration(resil_err *err, const char *field, const char *rule,
                        resil_duration d);

/* The index of `s` in `names` (count entries), or -1 for an unknown name or
 * NULL. ASCII case is ignored: one rule for every name parser, since
 * configuration files spell names "Exponential" as often as "exponential". */
int resil__name_index(const char *const *names, size_t count, const char *s);
/* names[i], or "unknown" when i is out of range. */
const char *resil__name_at(const char *const *names, size_t count, unsigned i);
/* `src` in ASCII lower case into dst (cap > 0 bytes), cut to fit: the form
 * log lines and metric labels give a name ("Transient" as "transient"). */
void resil__lower_copy(char *dst, size_t cap, const char *src);

#if defined(__GNUC__)
#define RESIL__ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define RESIL__ALWAYS_INLINE inline
#endif

/* resil_retry_execute without its argument and policy checks, for callers
 * that validated the policy once up front (a pipeline, at build): the
 * execution path then pays for no validation. Returns 0, so that
 * resil_retry_execute can end in it (a jump, not a frame of its own). */
int resil__retry_run(const resil_retry_policy *p, const resil_exec_opts *opts,
                     resil_op_fn op, void *user, resil_retry_result *out);
/* The same when the caller ran the first attempt itself (after checking
 * the token and the deadline as the executor would): `op`'s attempt 1
 * hands back that attempt's outcome, and the token is not looked at again
 * before it. */
int resil__retry_run_after_first(const resil_retry_policy *p, const resil_exec_opts *opts,
                                 resil_op_fn op, void *user, resil_retry_result *out);
/* Does a first attempt's success need nothing of the policy's executor?
 * No budget hears the result, no time budget runs, no classifier is asked
 * about a success. The blocking entry (retry.c) and a pipeline's retry
 * (first_alone, fixed at build) both start from this. */
static inline bool resil__retry_policy_first_alone(const resil_retry_policy *p)
{
    return p->budget == NULL && p->max_total == 0 && !p->retry_on_results;
}

/* The rate limiter's acquire, one round at a time (ratelimit.c): 0 with
 * the permits, RESIL__RATE_WAIT with *wait to sleep before the next round,
 * or RESIL_ECANCELED, RESIL_ETIMEDOUT (not within `deadline`), RESIL_EINVAL. */
#define RESIL__RATE_WAIT 1
typedef struct resil_ratelimit resil_ratelimit;
int resil__ratelimit_round(resil_ratelimit *rl, int64_t n, resil_cancel *cancel,
                           resil_instant now, resil_instant deadline, resil_duration *wait);
resil_instant resil__ratelimit_now(resil_ratelimit *rl);

/* A place in a bulkhead's FIFO (bulkhead.c). A blocking caller's lives on
 * its stack and sleeps on `wake`; an asynchronous one's lives in its
 * execution and has `on_grant`, called under the bulkhead's lock by the
 * release that hands it a permit (it may only post work to a loop). */
typedef struct resil__bulk_waiter {
    resil_cancel wake;
    bool granted; /* guarded by the bulkhead's lock */
    struct resil__bulk_waiter *next, *prev;
    void (*on_grant)(struct resil__bulk_waiter *w);
    resil_instant start;
} resil__bulk_waiter;

typedef struct resil_bulkhead resil_bulkhead;
typedef struct resil_bulkhead_ticket resil_bulkhead_ticket;
#define RESIL__BULK_QUEUED 1
/* Take a permit without waiting for one: 0 with it, RESIL_EREJECTED,
 * RESIL_ECANCELED, or RESIL__BULK_QUEUED: `w` is in line and on_grant
 * will come (another implementation's bulkhead never queues here). */
int resil__bulkhead_join(resil_bulkhead *b, resil_cancel *cancel, resil__bulk_waiter *w,
                         resil_bulkhead_ticket *t);
/* After on_grant, on the waiter's side: the ticket and the counters. */
void resil__bulkhead_granted(resil_bulkhead *b, resil__bulk_waiter *w, resil_bulkhead_ticket *t);
/* Leave the line because of `why` (RESIL_ECANCELED, RESIL_ETIMEDOUT):
 * true when left, false when a grant got there first (on_grant has run
 * or is running: take the permit when it arrives). */
bool resil__bulkhead_withdraw(resil_bulkhead *b, resil__bulk_waiter *w, int why);
/* The queue timeout of a built-in bulkhead, 0 for none or another kind. */
resil_duration resil__bulkhead_queue_timeout(const resil_bulkhead *b);

/* Cells split by CPU (percpu.c): one cache line per cell, a cell per CPU
 * the system may run (a power of two, at most RESIL__CELLS_MAX). */
#define RESIL__CACHE_LINE 64
#define RESIL__CELLS_MAX 64

typedef struct resil__cell {
    _Alignas(RESIL__CACHE_LINE) _Atomic uint64_t v;
} resil__cell;

typedef struct resil__cells {
    resil__cell *cell;
    uint32_t mask;
} resil__cells;

int resil__cells_init(resil__cells *c); /* zeroed cells; RESIL_ENOMEM */
/* `size` bytes, zeroed, on lines of their own: aligned to a line and
 * rounded up to whole lines, so that no other allocation shares the last
 * one (a shared object's hot word written by nobody else; free() frees
 * it). NULL when out of memory. */
void *resil__line_alloc(size_t size);
void resil__cells_free(resil__cells *c);
/* The CPU the caller runs on (or its thread's round-robin number), asked
 * of the C library (percpu.c). */
uint32_t resil__cpu_slot_asked(void);
/* Stripes that are the thread's, not the CPU's (percpu.c): as many as
 * cells, at least RESIL__THREAD_STRIPES_MIN, a power of two; a thread's is
 * picked by its number (from 1, given once, in order). */
#define RESIL__THREAD_STRIPES_MIN 16
uint32_t resil__thread_stripe_count(void);
#if defined(__GNUC__)
#define RESIL__INITIAL_EXEC __attribute__((tls_model("initial-exec")))
#else
#define RESIL__INITIAL_EXEC
#endif
extern _Thread_local uint32_t resil__thread_no RESIL__INITIAL_EXEC;
uint32_t resil__thread_number_first(void);
static inline uint32_t resil__thread_number(void)
{
    uint32_t n = resil__thread_no;
    return n != 0 ? n : resil__thread_number_first();
}

/* glibc 2.35 and later register a restartable-sequences area for every
 * thread, at __rseq_offset from the thread pointer, in which the kernel
 * keeps the CPU the thread runs on: reading it is one load, where
 * sched_getcpu() is a call into the C library for the same load. The area
 * says a negative CPU when it could not be registered (an old kernel, the
 * glibc.pthread.rseq tunable, a valgrind run): then the C library is asked. */
#if defined(__linux__) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)) && \
    (defined(__x86_64__) || defined(__aarch64__))
#include <sys/rseq.h>

static inline const void *resil__thread_pointer(void)
{
#if defined(__x86_64__)
    const void *tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    return tp;
#else
    return __builtin_thread_pointer();
#endif
}

static inline uint32_t resil__cpu_slot(void)
{
    const struct rseq *area =
        (const struct rseq *)((const char *)resil__thread_pointer() + __rseq_offset);
    int32_t cpu = (int32_t)__atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED);
    return cpu >= 0 ? (uint32_t)cpu : resil__cpu_slot_asked();
}
#else
static inline uint32_t resil__cpu_slot(void) { return resil__cpu_slot_asked(); }
#endif
/* The calling CPU's cell. */
static inline _Atomic uint64_t *resil__my_cell(const resil__cells *c)
{
    return &c->cell[resil__cpu_slot() & c->mask].v;
}

/* A reading of `id` in nanoseconds, from the kernel. */
static inline resil_instant resil__clock_kernel(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (resil_instant)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The system clock's reading: CLOCK_MONOTONIC's time, from the CPU's
 * counter where it may (tsc.h), else from the kernel. */
static inline resil_instant resil__clock_monotonic(void)
{
#if RESIL__TSC_CLOCK
    return resil__tsc_monotonic();
#else
    return resil__clock_kernel(CLOCK_MONOTONIC);
#endif
}

/* Not one of the library's own clocks: resil__clock_id()'s answer for a
 * clock read through its table. */
#define RESIL__CLOCK_OTHER ((clockid_t)-1)

/* A reading of `c`, whose id resil__clock_id() gave: the system and
 * coarse clocks without their table's call (for a hot path that found its
 * clock once), any other through its table. The system clock's test comes
 * first and alone: it is the default. */
static inline resil_instant resil__clock_now_as(resil_clock *c, clockid_t id)
{
    if (id == CLOCK_MONOTONIC)
        return resil__clock_monotonic();
    return id != RESIL__CLOCK_OTHER ? resil__clock_kernel(id) : resil_clock_now(c);
}

/* The system clock's reading out of line: for a path that keeps its
 * frame small and mostly reads the coarse clock (a breaker's). */
resil_instant resil__clock_monotonic_call(void);

/* The clock a component with no clock of its own reads: the coarse clock
 * (CLOCK_MONOTONIC_COARSE) when its resolution is at most 1/RESIL__COARSE_SHARE
 * of `finest`, the shortest span the component measures, else the system
 * clock. Both read the same monotonic time; the coarse one lags it by less
 * than its resolution. */
#define RESIL__COARSE_SHARE 100
resil_clock *resil__clock_for(resil_duration finest);
/* Which of the library's own clocks `c` is: CLOCK_MONOTONIC for the
 * system clock, CLOCK_MONOTONIC_COARSE for the coarse one, or
 * RESIL__CLOCK_OTHER for any other — what resil__clock_now_as() reads by. */
clockid_t resil__clock_id(const resil_clock *c);

/* The default rule of resil_retry_on_default(), inline for the retry
 * step, which asks it on every failure. */
static inline bool resil__retryable_kind(resil_kind k)
{
    return k == RESIL_TRANSIENT || k == RESIL_THROTTLED || k == RESIL_TIMEOUT;
}

#define RESIL__COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Does the operations table `ops` (a T led by `size_t size`) reach its
 * member `field`, and set it? The one reading rule of every plugged-in
 * implementation (docs/abi.md): a table written against an older header is
 * shorter, and an operation it does not reach is absent, as if NULL. */
#define RESIL__OPS_HAS(T, ops, field) \
    ((ops)->size >= offsetof(T, field) + sizeof((ops)->field) && (ops)->field != NULL)

/* Statistics counters (admitted, rejected, ...): relaxed, since nothing is
 * ordered by them, and read one by one, so a snapshot of several may be
 * from slightly different moments. */
static inline void resil__count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static inline uint64_t resil__counted(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

/* a + b, saturating at INT64_MIN and INT64_MAX. */
static inline int64_t resil__add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

/* a − b, saturating: resil_dur_sub() for the hot paths, without a call. */
static inline int64_t resil__sub_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_sub_overflow(a, b, &r))
        return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
}

/* a·b for a, b >= 0, saturating at INT64_MAX; 0 when either is <= 0. */
static inline int64_t resil__mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (a <= 0 || b <= 0)
        return 0;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* floor(a / b) for b > 0, also for negative a (instants before an epoch). */
static inline int64_t resil__floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return a % b < 0 ? q - 1 : q;
}

/* a mod b in [0, b) for b > 0; never forms floor_div(a, b)·b, which
 * overflows near INT64_MIN. */
static inline int64_t resil__floor_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* The n-th value of a counter-based random source seeded `seed`, on
 * [0, 1) with 53 bits: a splitmix64 finalizer over seed + n·golden. The
 * draw a decision takes is a function of its number, so threads share
 * only the counter and a seeded run replays exactly (chaos, throttling). */
static inline double resil__draw(uint64_t seed, uint64_t n)
{
    uint64_t z = seed + (n + 1) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Move a built-in bulkhead's bound (the adaptive limiter's queue is a
 * bulkhead whose bound moves); waiters a raise makes room for are admitted
 * at once, in order (bulkhead.c). */
struct resil_bulkhead;
void resil__bulkhead_set_limit(struct resil_bulkhead *b, uint32_t limit);
/* A built-in bulkhead's state word, whose low half counts the permits
 * taken: the adaptive limiter reads it on every call, without a call. */
const _Atomic uint64_t *resil__bulkhead_word(const struct resil_bulkhead *b);
/* A built-in bulkhead's parked permits (bulkhead.c): the calling thread's
 * taken back (false when it has none, or on another implementation's),
 * and a permit released as a ticket's would be (parked when it may be).
 * Joining the queue (resil__bulkhead_join) holds parking off by itself
 * until the waiter is granted or withdraws. */
bool resil__bulkhead_take_parked(struct resil_bulkhead *b);
void resil__bulkhead_put_back(struct resil_bulkhead *b);
static inline int32_t resil__bulkhead_word_in_flight(const _Atomic uint64_t *w)
{
    return (int32_t)(uint32_t)atomic_load_explicit(w, memory_order_relaxed);
}

/* A seed from the OS (through the calling thread's generator), never 0. */
uint64_t resil__os_seed(void);

#endif
