/*
 * breaker_hot.h — the breaker's call path, inline where it is called.
 *
 * A closed breaker admits a call with one load and takes a success that
 * ends no failure run with one compare (and one count on the CPU's cell
 * under a time window): a dozen instructions each, which a call, its
 * argument checks and the caller's registers saved around it doubled. So
 * the handle, the built-in breaker's layout and those two paths live here,
 * for breaker.c, whose public acquire and record are these same functions
 * behind their checks, and for the pipeline's breaker level, which calls
 * them directly. Everything else — the open, half-open and failure paths,
 * the window under the mutex, another implementation's table — stays out
 * of line in breaker.c.
 */
#ifndef RESIL_BREAKER_HOT_H
#define RESIL_BREAKER_HOT_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "resil/breaker.h"
#include "window.h"

#define RESIL__BRK_COUNT_BITS 29
#define RESIL__BRK_COUNT_MAX ((UINT32_C(1) << RESIL__BRK_COUNT_BITS) - 1)
#define RESIL__BRK_STATE_MASK UINT64_C(7)
#define RESIL__BRK_CACHE_LINE 64

typedef struct resil__brk_probe_slot {
    uint32_t ticket; /* 0 = free */
    resil_instant start;
} resil__brk_probe_slot;

/* The handle every implementation's breakers are reached through. The
 * word is the built-in breaker's (below); another implementation's handle
 * holds a constant word in state RESIL__BRK_OTHER, so that the built-in call path,
 * which reads the word first anyway, finds the others on its slow branch
 * and the closed path pays nothing for the seam. */
struct resil_breaker {
    const resil_breaker_ops *ops;
    void *self;
    _Atomic uint64_t word;
    uint8_t success; /* what a closed success needs (RESIL__BRK_SUCCESS_*), immutable */
};

/* What a built-in breaker's closed success must do besides ending a
 * failure run (which needs the general path): */
#define RESIL__BRK_SUCCESS_GENERAL 0 /* another's breaker, the slow-call rule, the ring */
#define RESIL__BRK_SUCCESS_NOTHING 1 /* no window: nothing */
#define RESIL__BRK_SUCCESS_CELL 2    /* the time window: one count in the CPU's cell */

#define RESIL__BRK_OTHER ((resil_breaker_state)7) /* fits the word's 3 state bits */

/* Another implementation's breaker: the handle, its references, its name. */
typedef struct resil__brk_custom {
    resil_breaker handle;
    _Atomic uint32_t refs;
    char name[RESIL_BREAKER_NAME_MAX];
} resil__brk_custom;

typedef struct resil__brk_builtin {
    /* Read on every call: the handle with its word, written only at
     * transitions and failure runs. */
    _Alignas(RESIL__BRK_CACHE_LINE) resil_breaker handle;
    _Atomic int64_t open_until;
    resil__window_cells cells; /* the time window's successes, counted by CPU */
    resil_clock *clock;
    uint32_t failure_threshold;
    bool trips_on_consecutive;
    bool trips_on_ratio;
    bool trips_on_predicate;
    bool window_on;   /* the ratio, slow-call or predicate rule needs the window */
    bool count_window; /* the ring, not the time window */
    bool clock_on;    /* a rule needs the time a call ended: slow calls, time window */
    bool slow_on;
    clockid_t clock_id;  /* resil__clock_id(): ours are read directly */
    resil_duration slow_call_duration;
    resil_breaker_opts opts; /* the rest, immutable after creation */

    /* Registry lookups touch this; keep it off the call path's line. */
    _Alignas(RESIL__BRK_CACHE_LINE) _Atomic uint32_t refs;

    /* Everything below is guarded by mu. */
    _Alignas(RESIL__BRK_CACHE_LINE) pthread_mutex_t mu;
    pthread_cond_t room; /* signalled when the event queue drains a slot */
    resil__window window;
    resil__ring ring;
    uint32_t minimum_throughput; /* at most window_size for a count window */
    resil__brk_probe_slot *probes;
    uint32_t probes_in_flight;
    uint32_t next_ticket;
    uint32_t consecutive_successes;
    resil_duration current_break;
    bool ever_opened;
    resil_instant last_opened_at;
    uint64_t opens;
    uint64_t transitions;
    uint64_t events_dropped;
    resil_breaker_event queue[RESIL_BREAKER_EVENT_QUEUE];
    unsigned queue_head, queue_len;
    bool delivering;
    pthread_t deliverer;
    char name[RESIL_BREAKER_NAME_MAX];
} resil__brk_builtin;


static inline resil__brk_builtin *resil__brk_as_builtin(const resil_breaker *b)
{
    return (resil__brk_builtin *)b;
}

/* ---- the word ---------------------------------------------------------- */

static inline uint64_t resil__brk_make_word(uint32_t gen, resil_breaker_state s, uint32_t count)
{
    return ((uint64_t)gen << 32) | ((uint64_t)s << RESIL__BRK_COUNT_BITS) | count;
}
static inline uint32_t resil__brk_word_gen(uint64_t w) { return (uint32_t)(w >> 32); }
static inline resil_breaker_state resil__brk_word_state(uint64_t w)
{
    return (resil_breaker_state)((w >> RESIL__BRK_COUNT_BITS) & RESIL__BRK_STATE_MASK);
}
static inline uint32_t resil__brk_word_count(uint64_t w)
{
    return (uint32_t)(w & RESIL__BRK_COUNT_MAX);
}

static inline uint64_t resil__brk_load_word(const resil__brk_builtin *b)
{
    return atomic_load_explicit(&((resil__brk_builtin *)b)->handle.word, memory_order_acquire);
}

/* Our own clocks are read without their table's indirect call. */
static inline resil_instant resil__brk_now_of(resil__brk_builtin *b)
{
    if (b->clock_id == RESIL__CLOCK_OTHER)
        return resil_clock_now(b->clock);
    return b->clock_id == CLOCK_MONOTONIC ? resil__clock_monotonic_call()
                                          : resil__clock_kernel(b->clock_id);
}

/* One success at `now` without the mutex, if the breaker is still closed
 * in `gen` with no failure run and the window's newest bucket holds `now`:
 * the word is read once, compared whole. The epoch is read before it, so a
 * success counted is either counted in `gen` or dropped with it
 * (window.h). */
static RESIL__ALWAYS_INLINE bool resil__brk_count_success(resil__brk_builtin *b, uint32_t gen,
                                               resil_instant now)
{
    uint64_t e = resil__window_cells_epoch(&b->cells);
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_acquire);
    if (w != resil__brk_make_word(gen, RESIL_BREAKER_CLOSED, 0))
        return false;
    return resil__window_cells_add(&b->cells, e, now);
}

static inline void resil__brk_admit(resil_breaker_permit *p, uint64_t w, resil_instant start)
{
    p->state = resil__brk_word_state(w);
    p->probe = false;
    p->start = start;
    p->retry_after = 0;
    p->generation = resil__brk_word_gen(w);
    p->probe_slot = 0;
    p->probe_ticket = 0;
}

/* `known`: the caller's reading of the breaker's clock, or RESIL__BRK_READ_CLOCK. */
#define RESIL__BRK_READ_CLOCK INT64_MIN

/* A caller's instant as `known`: one that happens to be RESIL__BRK_READ_CLOCK is
 * taken as the next nanosecond, not as "read the clock". */
static inline resil_instant resil__breaker_known(resil_instant now)
{
    return now == RESIL__BRK_READ_CLOCK ? now + 1 : now;
}

/* The open state, and everything but a closed admission without the
 * slow-call rule; a result other than a closed success the handle's
 * success byte covers (breaker.c, out of line). */
int resil__breaker_acquire_open(resil__brk_builtin *b, resil_breaker_permit *p, uint64_t w);
int resil__breaker_acquire_rest(resil_breaker *h, resil_breaker_permit *p, uint64_t w);
int resil__breaker_record_rest(resil_breaker *h, const resil_breaker_permit *p,
                               resil_breaker_result r, resil_instant known);

/* resil_breaker_acquire() for a permit that is not NULL. */
static inline int resil__breaker_admit(resil_breaker *b, resil_breaker_permit *p)
{
    if (b == NULL)
        return resil_breaker_acquire(NULL, p);
    uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
    resil_breaker_state s = resil__brk_word_state(w);
    if (s == RESIL_BREAKER_CLOSED && !resil__brk_as_builtin(b)->slow_on) {
        resil__brk_admit(p, w, 0);
        return 0;
    }
    if (s == RESIL_BREAKER_OPEN)
        return resil__breaker_acquire_open(resil__brk_as_builtin(b), p, w);
    return resil__breaker_acquire_rest(b, p, w);
}

/* A closed success that ends no failure run, as the handle's success byte
 * says it may be taken: true when it is done. Another's handle says
 * RESIL__BRK_SUCCESS_GENERAL, so its word is never read here as a built-in's. */
static RESIL__ALWAYS_INLINE bool resil__brk_closed_success(resil_breaker *h,
                                                const resil_breaker_permit *p,
                                                resil_instant *known)
{
    resil__brk_builtin *b = resil__brk_as_builtin(h);
    if (h->success == RESIL__BRK_SUCCESS_NOTHING)
        return resil__brk_load_word(b) ==
               resil__brk_make_word(p->generation, RESIL_BREAKER_CLOSED, 0);
    if (*known == RESIL__BRK_READ_CLOCK)
        *known = resil__brk_now_of(b); /* the general path takes this reading if it must */
    return resil__brk_count_success(b, p->generation, *known);
}

static inline int resil__breaker_record_known(resil_breaker *b, const resil_breaker_permit *p,
                                             resil_breaker_result r, resil_instant known)
{
    if (p == NULL || (unsigned)r > RESIL_BREAKER_IGNORED)
        return RESIL_EINVAL;
    if (b == NULL)
        return 0;
    if (r == RESIL_BREAKER_SUCCESS && !p->probe && b->success != RESIL__BRK_SUCCESS_GENERAL &&
        resil__brk_closed_success(b, p, &known))
        return 0;
    return resil__breaker_record_rest(b, p, r, known);
}

#endif
