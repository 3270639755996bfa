/*
 * test_tsc.c — the counter clock's algorithm (src/core/tsc.h) driven by a
 * synthetic counter and kernel clock: calibration, the line, resyncs that
 * never go back, drift and a frequency change that converge, an idle gap,
 * a counter gone backwards or read early, a difference beyond the limit,
 * and readers racing a resyncing writer. Then the system clock itself
 * against clock_gettime, within the stated bound. Nothing sleeps: the
 * synthetic counter moves only when a test moves it.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#include "../../src/core/internal.h"

/* A counter and a kernel clock: the kernel's time at counter value t is
 * kns + (t − kt)·ns_per_tick; a kernel read takes `cost` ticks. */
typedef struct world {
    uint64_t tsc;
    uint64_t kt;
    int64_t kns;
    double ns_per_tick;
    uint64_t cost;
} world;

static int64_t kernel_at(const world *w, uint64_t t)
{
    return w->kns + (int64_t)((double)(t - w->kt) * w->ns_per_tick);
}

static uint64_t w_counter(void *ud) { return ((world *)ud)->tsc; }

static int64_t w_kernel(void *ud)
{
    world *w = ud;
    int64_t ns = kernel_at(w, w->tsc);
    w->tsc += w->cost;
    return ns;
}

/* A 2 GHz counter (0.5 ns a tick, exact in 32.32) at 1000 s of uptime. */
static world world_2ghz(void)
{
    return (world){.tsc = UINT64_C(1) << 40, .kt = UINT64_C(1) << 40,
                   .kns = RESIL_S(1000), .ns_per_tick = 0.5, .cost = 40};
}

static resil__tsc_source source_of(world *w) { return (resil__tsc_source){w_counter, w_kernel, w}; }

/* From now on the kernel's clock runs at `npt` ns a tick. */
static void set_rate(world *w, double npt)
{
    w->kns = kernel_at(w, w->tsc);
    w->kt = w->tsc;
    w->ns_per_tick = npt;
}

/* The counter jumps to t; the kernel's clock runs on as before. */
static void set_counter(world *w, uint64_t t)
{
    w->kns = kernel_at(w, w->tsc);
    w->kt = t;
    w->tsc = t;
}

static int64_t read_now(resil__tsc *c, world *w)
{
    resil__tsc_source src = source_of(w);
    return resil__tsc_read(c, &src);
}

static resil__tsc_line current_line(const resil__tsc *c)
{
    resil__tsc_line l;
    uint64_t v;
    assert_true(resil__tsc_load(c, &l, &v));
    assert_true(v > 0);
    return l;
}

static uint64_t counted(const _Atomic uint64_t *n)
{
    return atomic_load_explicit(n, memory_order_relaxed);
}

/* Two readings 2 ms apart calibrate: the second anchors the line. */
static void calibrate(resil__tsc *c, world *w)
{
    resil__tsc_init(c, true);
    read_now(c, w);
    w->tsc += UINT64_C(4000000);
    read_now(c, w);
    assert_int_equal(atomic_load(&c->state), RESIL__TSC_ON);
}

static void it_reads_the_kernel_until_calibrated(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    resil__tsc_init(&c, true);
    for (int i = 0; i < 10; i++) {
        int64_t k = kernel_at(&w, w.tsc);
        assert_int_equal(read_now(&c, &w), k);
        w.tsc += 100000; /* 50 µs: ten of them are short of 2 ms */
    }
    assert_int_equal(atomic_load(&c.state), RESIL__TSC_CALIBRATING);
}

/* The rate over the calibration window, and the line from the counter
 * read before the last kernel reading, at that reading. */
static void calibration_anchors_the_line_at_the_counter_before_the_kernel_reading(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line l = current_line(&c);
    assert_int_equal(l.mult, UINT64_C(1) << 31);
    uint64_t before = (UINT64_C(1) << 40) + 40 + 4000000; /* the start's kernel read, then 2 ms */
    assert_int_equal(l.t0, before);
    assert_int_equal(l.ns0, kernel_at(&w, before));
}

static void the_switch_to_the_line_never_goes_back(void **state)
{
    (void)state;
    world w = world_2ghz();
    w.ns_per_tick = 0.4999; /* a line a little slow: it starts at the kernel's reading */
    w.cost = 400;
    resil__tsc c;
    resil__tsc_init(&c, true);
    int64_t prev = read_now(&c, &w);
    for (int i = 0; i < 40; i++) {
        w.tsc += 150000;
        int64_t r = read_now(&c, &w);
        assert_true(r >= prev);
        prev = r;
    }
    assert_int_equal(atomic_load(&c.state), RESIL__TSC_ON);
    /* the first line reading, at once after the switch's kernel reading */
    assert_true(read_now(&c, &w) >= prev);
}

static void a_line_reading_is_the_anchor_plus_the_scaled_ticks(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line l = current_line(&c);
    w.tsc = l.t0 + 1000001;
    assert_int_equal(read_now(&c, &w), l.ns0 + 500000); /* 1000001 ticks of 0.5 ns, floored */
}

/* A kernel clock 30 µs ahead: the new line starts where the old one was at
 * the resync, not at the kernel, and its slope takes the clamped
 * correction (1000 ppm of 2^31). */
static void a_resync_continues_the_line_where_it_was(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line old = current_line(&c);
    w.kns += RESIL_US(30);
    w.tsc = old.t0 + RESIL__TSC_PERIOD + 1000;
    uint64_t before = w.tsc;
    read_now(&c, &w);
    resil__tsc_line next = current_line(&c);
    assert_int_equal(next.t0, before);
    assert_int_equal(next.ns0, old.ns0 + (int64_t)((RESIL__TSC_PERIOD + 1000) / 2));
    assert_int_equal(next.mult, (UINT64_C(1) << 31) + (UINT64_C(1) << 31) / 1000);
    assert_int_equal(counted(&c.anchors), 0);
}

/* Readings every quarter period for `seconds` of counter time: never
 * backwards, and after `settle` within `bound` of the kernel's clock.
 * Returns the largest difference seen after `settle`. */
static int64_t run(resil__tsc *c, world *w, double seconds, double settle, int64_t bound)
{
    int64_t prev = INT64_MIN, worst = 0;
    uint64_t start = w->tsc;
    for (;;) {
        double at = (double)(w->tsc - start) * 0.5e-9;
        if (at >= seconds)
            return worst;
        w->tsc += RESIL__TSC_PERIOD / 4;
        uint64_t t = w->tsc;
        int64_t r = read_now(c, w);
        assert_true(r >= prev);
        prev = r;
        int64_t diff = llabs(r - kernel_at(w, t));
        if (at >= settle) {
            if (diff > bound)
                fail_msg("at %.3f s the line is %lld ns from the kernel", at, (long long)diff);
            if (diff > worst)
                worst = diff;
        }
    }
}

/* The kernel's clock slewed by NTP after calibration: within the bound
 * while the steering follows, and once the base window has measured the
 * new rate exact but for the kernel read's own 40 ticks. */
static void drift_converges_within_the_bound(double ppm)
{
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    set_rate(&w, 0.5 * (1 + ppm * 1e-6));
    run(&c, &w, 0.1, 0.02, RESIL__TSC_BOUND_NS);
    assert_true(run(&c, &w, 3, 2.1, RESIL__TSC_BOUND_NS) <= 40);
    assert_int_equal(counted(&c.anchors), 0);
}

static void drift_of_plus_500_ppm_converges_within_the_bound(void **state)
{
    (void)state;
    drift_converges_within_the_bound(500);
}

static void drift_of_minus_500_ppm_converges_within_the_bound(void **state)
{
    (void)state;
    drift_converges_within_the_bound(-500);
}

/* A counter 10 % slower than calibrated parts from the kernel beyond the
 * limit within a period: re-anchored, and when that line parts again its
 * rate over that line is the new base; then it stays in step. */
static void a_frequency_change_is_learned_at_the_second_reanchor(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    set_rate(&w, 0.55);
    run(&c, &w, 0.01, 0, INT64_MAX);
    assert_int_equal(counted(&c.anchors), 2);
    assert_true(run(&c, &w, 1, 0.01, RESIL__TSC_BOUND_NS) <= 40);
    assert_int_equal(counted(&c.anchors), 2);
}

static void a_long_idle_gap_reanchors_to_the_kernel(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    w.kns += RESIL_US(3); /* the old line is behind: it is not what counts */
    w.tsc += UINT64_C(20000000000); /* 10 s without a reading */
    int64_t r = read_now(&c, &w);
    assert_int_equal(r, kernel_at(&w, w.tsc)); /* the writer reads at its bracket's end */
    assert_int_equal(counted(&c.anchors), 1);
    assert_int_equal(current_line(&c).ns0, kernel_at(&w, w.tsc - 40));
}

/* While another reader holds the resync, one that finds the line stale
 * reads the kernel's clock, and the line is left alone. */
static void a_reader_losing_the_race_past_a_stale_line_reads_the_kernel(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line before = current_line(&c);
    atomic_store(&c.writer, true);
    w.tsc += UINT64_C(20000000000);
    int64_t k = kernel_at(&w, w.tsc);
    assert_int_equal(read_now(&c, &w), k);
    assert_int_equal(current_line(&c).t0, before.t0);
}

/* A reader preempted between its counter read and the line's load finds
 * a line anchored after its reading: it reads the counter again and the
 * line there, not the line's far end (here 50 µs past the time, within
 * the limit that raising a kernel reading allows). */
static void a_reader_preempted_past_a_new_anchor_reads_the_counter_again(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line l = current_line(&c);
    uint64_t preempted = l.t0 - 2 * RESIL__TSC_EARLY;
    w.tsc = l.t0 + RESIL__TSC_STALE - 100000;
    atomic_store(&c.writer, true); /* another reader resyncs */
    resil__tsc_source src = source_of(&w);
    assert_int_equal(resil__tsc_read_slow(&c, &src, preempted),
                     l.ns0 + (int64_t)(RESIL__TSC_STALE - 100000) / 2);
}

/* Past the horizon but not stale, a reader that loses the race reads the
 * old line: here 1 µs behind a kernel clock that jumped. */
static void a_reader_losing_the_race_past_the_horizon_reads_the_old_line(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line l = current_line(&c);
    w.kns += RESIL_US(1);
    atomic_store(&c.writer, true);
    w.tsc = l.t0 + RESIL__TSC_PERIOD + 100;
    assert_int_equal(read_now(&c, &w), l.ns0 + (int64_t)((RESIL__TSC_PERIOD + 100) / 2));
}

static void a_counter_gone_backwards_reanchors_to_the_kernel(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    set_counter(&w, UINT64_C(1) << 30); /* reset, far behind the anchor */
    int64_t r = read_now(&c, &w);
    assert_int_equal(r, kernel_at(&w, w.tsc));
    assert_int_equal(counted(&c.anchors), 1);
    assert_int_equal(current_line(&c).t0, UINT64_C(1) << 30);
}

/* An unordered rdtsc may run a little before the loads that found a new
 * line: the reading is the anchor's, not a wrapped difference. */
static void a_counter_read_just_before_the_anchor_reads_the_anchor(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line l = current_line(&c);
    resil__tsc_source src = source_of(&w);
    assert_int_equal(resil__tsc_read_slow(&c, &src, l.t0 - 100), l.ns0);
    assert_int_equal(counted(&c.resyncs), 0);
}

/* 200 µs apart at a resync (a suspend, a migration): the line restarts at
 * the kernel's reading. */
static void a_difference_beyond_the_limit_reanchors_to_the_kernel(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    resil__tsc_line l = current_line(&c);
    w.kns += RESIL_US(200);
    w.tsc = l.t0 + RESIL__TSC_PERIOD;
    int64_t r = read_now(&c, &w);
    assert_int_equal(r, kernel_at(&w, w.tsc));
    assert_int_equal(counted(&c.anchors), 1);
}

/* 50 µs apart, within the limit: steered at 1000 ppm, never stepped, in
 * step again after 50 ms and more. */
static void a_difference_within_the_limit_is_steered_without_a_step(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    calibrate(&c, &w);
    w.kns += RESIL_US(50);
    run(&c, &w, 0.2, 0.1, 40);
    assert_int_equal(counted(&c.anchors), 0);
}

static void a_clock_not_eligible_reads_the_kernel(void **state)
{
    (void)state;
    world w = world_2ghz();
    resil__tsc c;
    resil__tsc_init(&c, false);
    for (int i = 0; i < 10; i++) {
        w.tsc += 4000000;
        int64_t k = kernel_at(&w, w.tsc);
        assert_int_equal(read_now(&c, &w), k);
    }
    assert_int_equal(atomic_load(&c.state), RESIL__TSC_OFF);
}

/* A 500 MHz counter would need 2 ns a tick, more than 32.32 holds. */
static void a_counter_slower_than_1_ghz_turns_the_clock_off(void **state)
{
    (void)state;
    world w = world_2ghz();
    w.ns_per_tick = 2;
    resil__tsc c;
    resil__tsc_init(&c, true);
    read_now(&c, &w);
    w.tsc += 4000000;
    read_now(&c, &w);
    assert_int_equal(atomic_load(&c.state), RESIL__TSC_OFF);
}

/* ---- readers racing a resyncing writer ---------------------------------- */

/* A counter every thread moves (by a step large enough that resyncs come
 * every few thousand readings) and a kernel clock exactly 0.5 ns a tick. */
static _Atomic uint64_t shared_tsc = UINT64_C(1) << 40;

static uint64_t shared_counter(void *ud)
{
    (void)ud;
    return atomic_fetch_add(&shared_tsc, 256);
}

static int64_t shared_kernel(void *ud)
{
    (void)ud;
    return (int64_t)(atomic_fetch_add(&shared_tsc, 64) / 2);
}

typedef struct racer {
    resil__tsc *c;
    int off;
} racer;

/* A torn line (one slot's anchor with another's value) would be off by
 * about a period, hundreds of times the bound. */
static void *race(void *arg)
{
    racer *r = arg;
    resil__tsc_source src = {shared_counter, shared_kernel, NULL};
    for (int i = 0; i < 200000; i++) {
        int64_t before = (int64_t)(atomic_load(&shared_tsc) / 2);
        int64_t ns = resil__tsc_read(r->c, &src);
        int64_t after = (int64_t)(atomic_load(&shared_tsc) / 2);
        r->off += ns < before - RESIL__TSC_BOUND_NS || ns > after + RESIL__TSC_BOUND_NS;
    }
    return NULL;
}

static void readers_racing_a_resyncing_writer_stay_within_the_bound(void **state)
{
    (void)state;
    static resil__tsc c;
    resil__tsc_init(&c, true);
    enum { N = 4 };
    pthread_t t[N];
    racer r[N];
    for (int i = 0; i < N; i++) {
        r[i] = (racer){.c = &c};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++)
        assert_int_equal(r[i].off, 0);
    assert_int_equal(atomic_load(&c.state), RESIL__TSC_ON);
    assert_true(counted(&c.resyncs) > 50);
}

/* ---- the system clock ---------------------------------------------------- */

/* Calibrating or not, every reading lies between the kernel's readings
 * around it, widened by the stated bound. */
static void the_system_clock_lies_within_the_bound_of_clock_monotonic(void **state)
{
    (void)state;
    for (int i = 0; i < 1000000; i++) {
        int64_t a = resil__clock_kernel(CLOCK_MONOTONIC);
        int64_t r = resil_clock_now(resil_clock_system());
        int64_t b = resil__clock_kernel(CLOCK_MONOTONIC);
        if (r < a - RESIL__TSC_BOUND_NS || r > b + RESIL__TSC_BOUND_NS)
            fail_msg("reading %lld outside [%lld, %lld] widened by %d", (long long)r,
                     (long long)a, (long long)b, RESIL__TSC_BOUND_NS);
    }
}

/* A thread resyncing at a fork() never gives the flag back in the child,
 * which has only the forking thread: the child starts with it free. */
static void a_child_of_fork_finds_the_resync_free(void **state)
{
    (void)state;
#if RESIL__TSC_CLOCK
    resil_clock_now(resil_clock_system());
    if (atomic_load(&resil__tsc_system.state) == RESIL__TSC_OFF)
        skip(); /* not eligible here: nothing to resync */
    atomic_store(&resil__tsc_system.writer, true);
    pid_t pid = fork();
    if (pid == 0)
        _exit(atomic_load(&resil__tsc_system.writer) ? 1 : 0);
    atomic_store(&resil__tsc_system.writer, false);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(it_reads_the_kernel_until_calibrated),
        cmocka_unit_test(calibration_anchors_the_line_at_the_counter_before_the_kernel_reading),
        cmocka_unit_test(the_switch_to_the_line_never_goes_back),
        cmocka_unit_test(a_line_reading_is_the_anchor_plus_the_scaled_ticks),
        cmocka_unit_test(a_resync_continues_the_line_where_it_was),
        cmocka_unit_test(drift_of_plus_500_ppm_converges_within_the_bound),
        cmocka_unit_test(drift_of_minus_500_ppm_converges_within_the_bound),
        cmocka_unit_test(a_frequency_change_is_learned_at_the_second_reanchor),
        cmocka_unit_test(a_long_idle_gap_reanchors_to_the_kernel),
        cmocka_unit_test(a_reader_losing_the_race_past_a_stale_line_reads_the_kernel),
        cmocka_unit_test(a_reader_losing_the_race_past_the_horizon_reads_the_old_line),
        cmocka_unit_test(a_reader_preempted_past_a_new_anchor_reads_the_counter_again),
        cmocka_unit_test(a_counter_gone_backwards_reanchors_to_the_kernel),
        cmocka_unit_test(a_counter_read_just_before_the_anchor_reads_the_anchor),
        cmocka_unit_test(a_difference_beyond_the_limit_reanchors_to_the_kernel),
        cmocka_unit_test(a_difference_within_the_limit_is_steered_without_a_step),
        cmocka_unit_test(a_clock_not_eligible_reads_the_kernel),
        cmocka_unit_test(a_counter_slower_than_1_ghz_turns_the_clock_off),
        cmocka_unit_test(readers_racing_a_resyncing_writer_stay_within_the_bound),
        cmocka_unit_test(the_system_clock_lies_within_the_bound_of_clock_monotonic),
        cmocka_unit_test(a_child_of_fork_finds_the_resync_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
