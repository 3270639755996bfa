/*
 * tsc.c — the counter clock's slow path: calibrating, resyncing and
 * re-anchoring its line, and deciding whether the system clock may use the
 * counter at all. tsc.h says why the clock is shaped this way; here is how
 * each step keeps its promises:
 *
 *  - Never back across a resync: the new line starts at the old line's
 *    value at the resync's counter reading, raised where needed so that it
 *    is nowhere below what the old line can still hand out (a reader that
 *    lost the race reads the old line up to RESIL__TSC_STALE).
 *  - Converging: the new slope is the base rate plus what closes the
 *    measured difference over the next period, clamped to
 *    RESIL__TSC_CLAMP_PPM of the base.
 *  - Re-anchoring (the line runs from the kernel's reading): at a stale
 *    line (raised to the old line's last value when that is ahead by less
 *    than the limit), at a counter gone backwards, and at a difference
 *    beyond RESIL__TSC_LIMIT_NS. Only the last two may go backwards, by
 *    the difference found: the counter itself broke step.
 *
 * Every step runs under `writer`, which one reader at a time wins with a
 * compare-and-swap; the others never wait for it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "tsc.h"

#if RESIL__TSC_CLOCK
#include <cpuid.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#endif

#define RELAXED memory_order_relaxed

void resil__tsc_init(resil__tsc *c, bool eligible)
{
    memset(c, 0, sizeof *c);
    atomic_store_explicit(&c->line[0].t0, RESIL__TSC_NO_LINE, RELAXED);
    atomic_store_explicit(&c->state, eligible ? RESIL__TSC_CALIBRATING : RESIL__TSC_OFF,
                          memory_order_release);
}

typedef resil__tsc_line line;

/* The line at t, for t0 <= t <= t0 + RESIL__TSC_STALE (no overflow). */
static int64_t line_at(line l, uint64_t t)
{
    return l.ns0 + (int64_t)(((t - l.t0) * l.mult) >> 32);
}

/* The current line, consistently, or false when there is none yet. */
static bool snapshot(const resil__tsc *c, line *out)
{
    uint64_t v;
    while (!resil__tsc_load(c, out, &v))
        ;
    return v != 0;
}

/* The writer's: fill the next version's slot, then publish the version.
 * The fence keeps the slot's stores after the previous publication, so a
 * reader that sees any of them sees that version changed. */
static void publish(resil__tsc *c, line l)
{
    uint64_t v = atomic_load_explicit(&c->seq, RELAXED) + 1;
    resil__tsc_slot *s = &c->line[v & 1];
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->t0, l.t0, RELAXED);
    atomic_store_explicit(&s->ns0, l.ns0, RELAXED);
    atomic_store_explicit(&s->mult, l.mult, RELAXED);
    atomic_store_explicit(&c->seq, v, memory_order_release);
}

/* ns per tick, 32.32, over a window: 0 when out of reach (a counter
 * slower than 1 GHz would need more than 32 bits). */
static uint64_t rate(int64_t dns, uint64_t dt)
{
    if (dns <= 0 || dt == 0 || (int64_t)dt < 0)
        return 0;
    double m = (double)dns / (double)dt * 4294967296.0 + 0.5;
    return m >= 1.0 && m < 4294967296.0 ? (uint64_t)m : 0;
}

static void window_start(resil__tsc *c, resil__tsc_sample s)
{
    atomic_store_explicit(&c->win_t, s.before, RELAXED);
    atomic_store_explicit(&c->win_ns, s.ns, RELAXED);
    atomic_store_explicit(&c->started, true, RELAXED);
}

void resil__tsc_calibrate_start(resil__tsc *c, resil__tsc_sample s) { window_start(c, s); }

bool resil__tsc_calibrate_end(resil__tsc *c, resil__tsc_sample s)
{
    int64_t dns = s.ns - atomic_load_explicit(&c->win_ns, RELAXED);
    if (dns < RESIL__TSC_CALIBRATE_NS)
        return false;
    uint64_t m = rate(dns, s.before - atomic_load_explicit(&c->win_t, RELAXED));
    if (m == 0) {
        atomic_store_explicit(&c->state, RESIL__TSC_OFF, memory_order_release);
        return true;
    }
    atomic_store_explicit(&c->base, m, RELAXED);
    publish(c, (line){s.before, s.ns, m});
    atomic_store_explicit(&c->state, RESIL__TSC_ON, memory_order_release);
    return true;
}

/* A base window long enough gives the base rate, and the next starts. */
static void base_update(resil__tsc *c, resil__tsc_sample s)
{
    int64_t dns = s.ns - atomic_load_explicit(&c->win_ns, RELAXED);
    if (dns < RESIL__TSC_BASE_NS)
        return;
    uint64_t m = rate(dns, s.before - atomic_load_explicit(&c->win_t, RELAXED));
    if (m != 0)
        atomic_store_explicit(&c->base, m, RELAXED);
    window_start(c, s);
}

/* A kernel reading `ns` raised to the most `l` can still hand out, when
 * that is ahead by no more than the limit (further ahead, the counter or
 * the kernel's clock jumped, and the kernel's clock is the one to go by). */
static int64_t not_behind(line l, int64_t ns)
{
    int64_t last = line_at(l, l.t0 + RESIL__TSC_STALE);
    return last > ns && last - ns <= RESIL__TSC_LIMIT_NS ? last : ns;
}

static void reanchor(resil__tsc *c, resil__tsc_sample s, int64_t ns)
{
    atomic_fetch_add_explicit(&c->anchors, 1, RELAXED);
    publish(c, (line){s.before, ns, atomic_load_explicit(&c->base, RELAXED)});
    atomic_store_explicit(&c->from_kernel, false, RELAXED);
}

/* Beyond the limit: a jump (the window across it means nothing, so it
 * starts again), or a rate the base no longer has: when the line that
 * parts is itself one such re-anchor's, the rate over it (kernel reading
 * to kernel reading) is the new base, so the next line does not part. */
static void parted(resil__tsc *c, line old, resil__tsc_sample s)
{
    if (atomic_load_explicit(&c->from_kernel, RELAXED)) {
        uint64_t m = rate(s.ns - old.ns0, s.before - old.t0);
        if (m != 0)
            atomic_store_explicit(&c->base, m, RELAXED);
    }
    window_start(c, s);
    reanchor(c, s, s.ns);
    atomic_store_explicit(&c->from_kernel, true, RELAXED);
}

/* The slope that closes `gap` ns over the next period, within the clamp. */
static uint64_t steered(uint64_t base, int64_t gap)
{
    int64_t most = (int64_t)(base / (1000000 / RESIL__TSC_CLAMP_PPM));
    int64_t corr = gap * (int64_t)((UINT64_C(1) << 32) / RESIL__TSC_PERIOD);
    if (corr > most)
        corr = most;
    if (corr < -most)
        corr = -most;
    return (uint64_t)((int64_t)base + corr);
}

void resil__tsc_resync(resil__tsc *c, resil__tsc_sample s)
{
    line old;
    if (!snapshot(c, &old))
        return;
    atomic_fetch_add_explicit(&c->resyncs, 1, RELAXED);
    int64_t d = (int64_t)(s.before - old.t0);
    if (d < 0) { /* the counter went backwards */
        window_start(c, s);
        reanchor(c, s, s.ns);
        return;
    }
    if ((uint64_t)d >= RESIL__TSC_STALE) {
        base_update(c, s);
        reanchor(c, s, not_behind(old, s.ns));
        return;
    }
    int64_t at = line_at(old, s.before);
    int64_t gap = s.ns - at;
    if (gap > RESIL__TSC_LIMIT_NS || gap < -RESIL__TSC_LIMIT_NS) {
        parted(c, old, s);
        return;
    }
    base_update(c, s);
    line next = {s.before, at, steered(atomic_load_explicit(&c->base, RELAXED), gap)};
    uint64_t good = old.t0 + RESIL__TSC_STALE; /* losers read the old line up to here */
    int64_t keep = line_at(old, good) - (int64_t)(((good - s.before) * next.mult) >> 32);
    if (keep > next.ns0)
        next.ns0 = keep;
    publish(c, next);
    atomic_store_explicit(&c->from_kernel, false, RELAXED);
}

/* A kernel reading bracketed by two counter reads at most
 * RESIL__TSC_WINDOW apart (a few tries; false with the last reading when
 * none was: a preempted reader, say). */
static bool sample(const resil__tsc_source *src, resil__tsc_sample *s)
{
    for (int i = 0; i < 3; i++) {
        s->before = src->counter(src->ud);
        s->ns = src->kernel(src->ud);
        s->after = src->counter(src->ud);
        if (s->after - s->before <= RESIL__TSC_WINDOW)
            return true;
    }
    return false;
}

static bool writer_take(resil__tsc *c)
{
    bool free_ = false;
    return !atomic_load_explicit(&c->writer, RELAXED) &&
           atomic_compare_exchange_strong_explicit(&c->writer, &free_, true,
                                                   memory_order_acquire, RELAXED);
}

static void writer_give(resil__tsc *c)
{
    atomic_store_explicit(&c->writer, false, memory_order_release);
}

static int64_t calibrating(resil__tsc *c, const resil__tsc_source *src)
{
    resil__tsc_sample s;
    bool ok = sample(src, &s);
    if (ok && writer_take(c)) {
        if (atomic_load_explicit(&c->state, RELAXED) == RESIL__TSC_CALIBRATING) {
            if (!atomic_load_explicit(&c->started, RELAXED))
                resil__tsc_calibrate_start(c, s);
            else
                resil__tsc_calibrate_end(c, s);
        }
        writer_give(c);
    }
    return s.ns;
}

/* The writer's reading after its resync: the new line at its own
 * bracket's end. */
static int64_t resynced(resil__tsc *c, resil__tsc_sample s)
{
    resil__tsc_resync(c, s);
    line now;
    snapshot(c, &now);
    return line_at(now, s.after < now.t0 ? now.t0 : s.after);
}

static int64_t on_line(resil__tsc *c, const resil__tsc_source *src, uint64_t t)
{
    line l;
    int64_t ns;
    if (resil__tsc_line_read(c, t, &ns)) /* a new line, or a torn read, meanwhile */
        return ns;
    snapshot(c, &l);
    int64_t d = (int64_t)(t - l.t0);
    if (d < 0 && d > -(int64_t)RESIL__TSC_EARLY) /* read a little before the anchor */
        return l.ns0;
    if (d < 0) { /* read long before it (the reader was preempted): read again */
        t = src->counter(src->ud);
        if (resil__tsc_line_read(c, t, &ns))
            return ns;
        snapshot(c, &l);
        d = (int64_t)(t - l.t0);
    }
    if (writer_take(c)) {
        resil__tsc_sample s;
        if (sample(src, &s)) {
            ns = resynced(c, s);
            writer_give(c);
            return ns;
        }
        writer_give(c);
    }
    if (d >= 0 && (uint64_t)d < RESIL__TSC_STALE)
        return line_at(l, t);
    if (d < 0) /* the counter went backwards: the kernel's, as the resync would */
        return src->kernel(src->ud);
    return not_behind(l, src->kernel(src->ud));
}

int64_t resil__tsc_read_slow(resil__tsc *c, const resil__tsc_source *src, uint64_t t)
{
    switch (atomic_load_explicit(&c->state, memory_order_acquire)) {
    case RESIL__TSC_ON:
        return on_line(c, src, t);
    case RESIL__TSC_CALIBRATING:
        return calibrating(c, src);
    default:
        return src->kernel(src->ud);
    }
}

/* ---- the system clock's instance ------------------------------------- */

#if RESIL__TSC_CLOCK
resil__tsc resil__tsc_system = {.line = {{.t0 = RESIL__TSC_NO_LINE}}}; /* RESIL__TSC_UNDECIDED */

/* Ordered: the bracket's reads stay on their side of the kernel's. */
static uint64_t ordered_counter(void *ud)
{
    (void)ud;
    __builtin_ia32_lfence();
    return __builtin_ia32_rdtsc();
}

static int64_t kernel_monotonic(void *ud)
{
    (void)ud;
    return resil__clock_kernel(CLOCK_MONOTONIC);
}

static const resil__tsc_source system_source = {ordered_counter, kernel_monotonic, NULL};

static bool invariant_counter(void)
{
    unsigned a, b, c, d; /* __get_cpuid: 0 when the leaf is beyond the CPU's */
    return __get_cpuid(0x80000007u, &a, &b, &c, &d) != 0 && (d & (1u << 8)) != 0;
}

/* Read with open/read: the first clock reading allocates nothing. */
static bool kernel_uses_tsc(void)
{
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[16];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n == 4 && memcmp(buf, "tsc\n", 4) == 0;
}

static bool asked_for_kernel(void)
{
    const char *v = getenv("RESIL_CLOCK");
    return v != NULL && strcmp(v, "kernel") == 0;
}

/* A child of fork() has only the forking thread: a resync another
 * thread held at the fork will never be given back there. */
static void writer_reset_in_child(void) { writer_give(&resil__tsc_system); }

/* Once per process, so the fork handler is registered once however many
 * threads take their first reading together. */
static void decide(void)
{
    bool on = !asked_for_kernel() && invariant_counter() && kernel_uses_tsc();
    if (on && pthread_atfork(NULL, NULL, writer_reset_in_child) != 0)
        on = false;
    atomic_store_explicit(&resil__tsc_system.state, on ? RESIL__TSC_CALIBRATING : RESIL__TSC_OFF,
                          memory_order_release);
}

/* Never inlined: inside resil__tsc_system_unlined() its frame would be
 * set up on the kernel's path too, which every reading takes where the
 * counter is off. */
__attribute__((noinline)) int64_t resil__tsc_system_slow(uint64_t t)
{
    static pthread_once_t decided = PTHREAD_ONCE_INIT;
    if (atomic_load_explicit(&resil__tsc_system.state, memory_order_acquire) ==
        RESIL__TSC_UNDECIDED)
        pthread_once(&decided, decide);
    return resil__tsc_read_slow(&resil__tsc_system, &system_source, t);
}

/* Where the counter is off (a kernel whose clocksource is not the TSC:
 * kvm-clock on many virtual machines) every reading comes here, and reads
 * the kernel's clock as resil__tsc_read_slow() would, without the counter
 * read, the call and the source's table. */
int64_t resil__tsc_system_unlined(void)
{
    if (atomic_load_explicit(&resil__tsc_system.state, memory_order_acquire) == RESIL__TSC_OFF)
        return resil__clock_kernel(CLOCK_MONOTONIC);
    return resil__tsc_system_slow(__builtin_ia32_rdtsc());
}
#endif
