/*
 * tsc.h — CLOCK_MONOTONIC's time read from the CPU's time-stamp counter.
 *
 * clock_gettime(CLOCK_MONOTONIC) costs about 18 ns on a virtual machine
 * (an ordered rdtsc, a seqlock, the kernel's scaling); a standard pipeline
 * success reads it twice. The counter itself, read unordered, costs about
 * 8 ns. So the system clock reads the counter and maps it onto
 * CLOCK_MONOTONIC's nanoseconds with a line, ns = ns0 + (t − t0)·mult,
 * which it keeps in step with the kernel's clock. Same timescale as
 * CLOCK_MONOTONIC, so a deadline taken from it is waited for on
 * CLOCK_MONOTONIC (condition variables, libuv) as before.
 *
 * The fast path writes nothing (a success path on 64 cores shares no
 * written line): one unordered rdtsc and loads from one cache line, which
 * holds the line's version and two slots of parameters. A writer fills the
 * slot of the next version while readers use the current one's, then
 * publishes the version; a reader loads the version, its slot, and the
 * version again (a seqlock over double-buffered parameters), so it never
 * combines torn parameters, even when preempted mid-read, and never waits
 * for a writer. Every field any two threads touch is a C11 atomic. An
 * unordered rdtsc may run ahead of the loads that found a new line: a
 * counter up to RESIL__TSC_EARLY ticks before the anchor reads the
 * anchor, not a wrapped difference (further back, the counter went
 * backwards, and the line is re-anchored).
 *
 * Staying in step: a reader that finds its counter past the line's horizon
 * (RESIL__TSC_PERIOD ticks after its anchor, about a millisecond) and wins
 * the `writer` flag re-synchronises: it reads clock_gettime bracketed by
 * two counter reads (retried when they lie more than RESIL__TSC_WINDOW
 * ticks apart) and starts a new line continuous with the old one whose
 * slope steers the difference to the kernel's clock to zero over the next
 * period (at most RESIL__TSC_CLAMP_PPM off the base rate). The base rate is
 * measured over windows of RESIL__TSC_BASE_NS (a second), so a
 * measurement's jitter weighs nothing. Readers that lose the race read the
 * old line, which stays good up to RESIL__TSC_STALE ticks; past that the
 * line is stale (no reading for a while): the writer re-anchors it to the
 * kernel's clock and losers read the kernel's clock themselves. A
 * difference beyond RESIL__TSC_LIMIT_NS at a resync (a suspend, a
 * migration, a counter that was reset) re-anchors to the kernel's clock;
 * only there (and for a counter gone backwards) may a thread's reading lie
 * before its previous one, by the difference found. In steady state a
 * reading is within RESIL__TSC_BOUND_NS of CLOCK_MONOTONIC. A resync costs
 * a clock_gettime and a little more, so a process that reads the clock
 * less than once a period pays that on its first reading after a pause.
 *
 * Calibration: only on x86-64 with an invariant counter (CPUID
 * 0x80000007 EDX bit 8) when the kernel's own clocksource is the TSC (when
 * the kernel does not trust the counter, neither do we), and neither the
 * build (RESIL_TSC_CLOCK=OFF) nor RESIL_CLOCK=kernel turned it off. The
 * first RESIL__TSC_CALIBRATE_NS after first use read clock_gettime and
 * measure the rate; the line then starts at (a counter read before a
 * kernel reading, that reading), so it is never behind a kernel reading
 * taken before the switch.
 *
 * The algorithm takes its counter and kernel readings as inputs
 * (resil__tsc_source), so the tests drive it with synthetic sequences;
 * the system clock's instance reads rdtsc and clock_gettime.
 */
#ifndef RESIL_TSC_H
#define RESIL_TSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(RESIL_NO_TSC_CLOCK)
#define RESIL__TSC_CLOCK 1
#else
#define RESIL__TSC_CLOCK 0
#endif

#define RESIL__TSC_PERIOD (UINT64_C(1) << 21)    /* ticks between resyncs */
/* A line is good this far past its anchor: readers that lose the race
 * read it up to here, a writer later than that re-anchors. Short, so that
 * what a new line is raised by (tsc.c) stays tiny. */
#define RESIL__TSC_STALE (RESIL__TSC_PERIOD + (RESIL__TSC_PERIOD >> 5))
#define RESIL__TSC_EARLY (UINT64_C(1) << 16)     /* a counter read this early clamps */
#define RESIL__TSC_WINDOW (UINT64_C(1) << 12)    /* a kernel reading's bracket, at most */
#define RESIL__TSC_CLAMP_PPM 1000                /* a slope's correction, at most */
#define RESIL__TSC_LIMIT_NS 100000               /* a resync's difference, at most */
#define RESIL__TSC_BASE_NS 1000000000            /* the base rate's window */
#define RESIL__TSC_CALIBRATE_NS 2000000          /* the first rate's window */
/* In steady state a reading is within this of CLOCK_MONOTONIC's at the
 * same instant (docs/pipeline.md, A cheaper clock, derives it). */
#define RESIL__TSC_BOUND_NS 10000

/* A line's parameters: ns = ns0 + ((t − t0)·mult >> 32). */
typedef struct resil__tsc_slot {
    _Atomic uint64_t t0;
    _Atomic int64_t ns0;
    _Atomic uint64_t mult; /* ns per tick, 32.32 fixed point, below 2^32 */
} resil__tsc_slot;

enum {
    RESIL__TSC_UNDECIDED, /* eligibility not looked at yet */
    RESIL__TSC_OFF,       /* the kernel's clock, always */
    RESIL__TSC_CALIBRATING,
    RESIL__TSC_ON,
};

/* No line yet (version 0): slot 0's anchor lies so close to the counter's
 * 64-bit end that every counter value is past its horizon (one within
 * 2^21 ticks of wrapping would not be, two centuries after power-on). */
#define RESIL__TSC_NO_LINE (UINT64_C(0) - RESIL__TSC_PERIOD)

typedef struct resil__tsc {
    /* read by every reader, nothing else in this cache line: the current
     * version and two slots, the version's (seq & 1) and the next's */
    _Alignas(64) _Atomic uint64_t seq;
    resil__tsc_slot line[2];
    _Alignas(64) _Atomic int state; /* written once or twice */
    _Atomic bool writer;            /* held by the one resyncing */
    /* the writer's own, under `writer` */
    _Atomic uint64_t base;             /* the rate over the last window, 32.32 */
    _Atomic bool started;              /* the window below has begun */
    _Atomic bool from_kernel;          /* the line starts at a kernel reading */
    _Atomic uint64_t win_t;            /* the base window's start */
    _Atomic int64_t win_ns;
    _Atomic uint64_t resyncs, anchors; /* how often each happened */
} resil__tsc;

/* Where the counter and the kernel's clock come from: rdtsc and
 * clock_gettime for the system clock, a script in the tests. */
typedef struct resil__tsc_source {
    uint64_t (*counter)(void *ud);
    int64_t (*kernel)(void *ud);
    void *ud;
} resil__tsc_source;

/* A kernel reading bracketed by counter reads: before <= after. */
typedef struct resil__tsc_sample {
    uint64_t before;
    int64_t ns;
    uint64_t after;
} resil__tsc_sample;

/* A clock that reads the kernel's clock until told otherwise. */
void resil__tsc_init(resil__tsc *c, bool eligible);

/* A line as a reader holds it. */
typedef struct resil__tsc_line {
    uint64_t t0;
    int64_t ns0;
    uint64_t mult;
} resil__tsc_line;

/* The current line in *l and its version in *v (0: none, and *l the
 * no-line sentinel), or false when a new version came while it was read
 * (one try). The two slots make that rare: a writer fills the slot of the
 * version after the current one, so a reader sees torn parameters only
 * when it was preempted for two resyncs, and then the version differs. */
static inline bool resil__tsc_load_at(const resil__tsc *c, uint64_t seq, resil__tsc_line *l,
                                      uint64_t *v)
{
    const resil__tsc_slot *s = &c->line[seq & 1];
    l->t0 = atomic_load_explicit(&s->t0, memory_order_relaxed);
    l->ns0 = atomic_load_explicit(&s->ns0, memory_order_relaxed);
    l->mult = atomic_load_explicit(&s->mult, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    *v = seq;
    return atomic_load_explicit(&c->seq, memory_order_relaxed) == seq;
}

/* The same, `seq` being the version just loaded (acquire) by the caller. */
static inline bool resil__tsc_load(const resil__tsc *c, resil__tsc_line *l, uint64_t *v)
{
    return resil__tsc_load_at(c, atomic_load_explicit(&c->seq, memory_order_acquire), l, v);
}

/* The line's reading at counter value t, or false when the fast path
 * cannot give one (no line, past its horizon, a torn read, t early). */
static inline bool resil__tsc_line_read_at(const resil__tsc *c, uint64_t seq, uint64_t t,
                                           int64_t *ns)
{
    resil__tsc_line l;
    uint64_t v;
    bool ok = resil__tsc_load_at(c, seq, &l, &v);
    uint64_t u = t - l.t0; /* past the horizon for the no-line sentinel too */
    if (!ok || u >= RESIL__TSC_PERIOD)
        return false;
    *ns = l.ns0 + (int64_t)((u * l.mult) >> 32);
    return true;
}

static inline bool resil__tsc_line_read(const resil__tsc *c, uint64_t t, int64_t *ns)
{
    return resil__tsc_line_read_at(c, atomic_load_explicit(&c->seq, memory_order_acquire), t, ns);
}

/* Everything the fast path does not: calibrating, resyncing, a counter
 * read early or gone backwards, the kernel's clock when the line is
 * stale or off. `t` is the counter value the fast path read. */
int64_t resil__tsc_read_slow(resil__tsc *c, const resil__tsc_source *src, uint64_t t);

/* One reading: the line at the counter's value, else the slow path. */
static inline int64_t resil__tsc_read(resil__tsc *c, const resil__tsc_source *src)
{
    uint64_t t = src->counter(src->ud);
    int64_t ns;
    if (resil__tsc_line_read(c, t, &ns))
        return ns;
    return resil__tsc_read_slow(c, src, t);
}

/* The steps the slow path takes, each on given readings, by the holder of
 * `writer` (the tests call them alone): start calibrating at `s`; finish
 * it at `s` (false while the window is too short, or when the rate is out
 * of reach: then the clock is off); resync the line at `s`. */
void resil__tsc_calibrate_start(resil__tsc *c, resil__tsc_sample s);
bool resil__tsc_calibrate_end(resil__tsc *c, resil__tsc_sample s);
void resil__tsc_resync(resil__tsc *c, resil__tsc_sample s);

#if RESIL__TSC_CLOCK
/* The system clock's instance and its CLOCK_MONOTONIC reading. */
extern resil__tsc resil__tsc_system __attribute__((visibility("hidden")));
int64_t resil__tsc_system_slow(uint64_t t) __attribute__((visibility("hidden")));
/* A reading while there is no line yet (version 0): the kernel's clock at
 * once when the counter is off, else the counter read and the slow path. */
int64_t resil__tsc_system_unlined(void) __attribute__((visibility("hidden")));

/* No line (the counter off, undecided or calibrating) is seen before the
 * counter is read: where the kernel does not trust the counter, every
 * reading is the kernel's, and the counter read it dropped cost about half
 * as much again (12 ns beside clock_gettime's 28 on a kvm-clock guest).
 * The version is loaded first and once, as the line's read loads it: the
 * fast path pays the test alone. The counter, read unordered, may run
 * ahead of that load as it could before (tsc.h's top, on a counter early). */
static inline int64_t resil__tsc_monotonic(void)
{
    uint64_t seq = atomic_load_explicit(&resil__tsc_system.seq, memory_order_acquire);
    if (__builtin_expect(seq == 0, 0))
        return resil__tsc_system_unlined();
    uint64_t t = __builtin_ia32_rdtsc();
    int64_t ns;
    if (__builtin_expect(resil__tsc_line_read_at(&resil__tsc_system, seq, t, &ns), 1))
        return ns;
    return resil__tsc_system_slow(t);
}
#endif

#endif
