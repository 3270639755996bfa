/*
 * test_breaker_stress.c — 8 threads × 100 000 calls against one breaker,
 * with random outcomes and the fake clock moving, then invariants that any
 * lost update or race would break:
 *   - the window totals equal the results the breaker said it counted for
 *     the generation the window belongs to;
 *   - never more than half_open_probes probes out at once in one half-open
 *     generation;
 *   - every state change reached the listener, exactly once, in order, one
 *     at a time, and the chain of (from, to, reason) is a legal path.
 * Meant for TSan; the same run under plain builds checks the arithmetic.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "test.h"

#define THREADS 8
#define CALLS 100000
#define MAX_GEN 65536
#define MAX_EVENTS 65536

typedef struct world {
    resil_fake_clock *fc;
    resil_breaker *b;
    uint32_t probes_allowed;
    int failure_percent;
    bool advance_clock;
    /* tallies, indexed by the permit's generation */
    _Atomic uint32_t probes_out[MAX_GEN];
    _Atomic uint64_t counted[MAX_GEN];
    _Atomic uint64_t counted_failures[MAX_GEN];
    _Atomic uint32_t max_probes_out;
    _Atomic uint32_t bad_returns; /* workers cannot use cmocka's asserts */
    /* events */
    pthread_mutex_t ev_mu;
    resil_breaker_event ev[MAX_EVENTS];
    size_t n_ev;
    _Atomic int in_listener;
    _Atomic int overlapping_deliveries;
    int listener_yields;
} world;

typedef struct worker {
    world *w;
    uint64_t seed;
} worker;

static void on_event(resil_breaker *b, const resil_breaker_event *e, void *ud)
{
    (void)b;
    world *w = ud;
    if (atomic_fetch_add(&w->in_listener, 1) != 0)
        atomic_fetch_add(&w->overlapping_deliveries, 1);
    for (int i = 0; i < w->listener_yields; i++)
        sched_yield(); /* a slow listener, so that the queue fills up */
    pthread_mutex_lock(&w->ev_mu);
    if (w->n_ev < MAX_EVENTS)
        w->ev[w->n_ev++] = *e;
    pthread_mutex_unlock(&w->ev_mu);
    atomic_fetch_sub(&w->in_listener, 1);
}

static world *world_new(resil_breaker_opts *o)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), 0, &w->fc), 0);
    pthread_mutex_init(&w->ev_mu, NULL);
    o->clock = resil_fake_clock_clock(w->fc);
    o->listener = on_event;
    o->listener_ud = w;
    resil_err err = {0};
    if (resil_breaker_new(o, &w->b, &err) != 0)
        fail_msg("%s", err.message);
    w->probes_allowed = o->half_open_probes;
    return w;
}

static void world_free(world *w)
{
    resil_breaker_free(w->b);
    resil_fake_clock_free(w->fc);
    pthread_mutex_destroy(&w->ev_mu);
    free(w);
}

static void note_max(_Atomic uint32_t *max, uint32_t v)
{
    uint32_t cur = atomic_load(max);
    while (v > cur && !atomic_compare_exchange_weak(max, &cur, v))
        ;
}

static resil_breaker_result draw(resil_rng_seeded *rng, int failure_percent)
{
    uint64_t x = resil_rng_seeded_next_u64(rng) % 100;
    if (x < 5)
        return RESIL_BREAKER_IGNORED;
    return x < 5 + (uint64_t)failure_percent ? RESIL_BREAKER_FAILURE : RESIL_BREAKER_SUCCESS;
}

static void one_call(world *w, resil_rng_seeded *rng)
{
    resil_breaker_permit p;
    if (resil_breaker_acquire(w->b, &p) != 0)
        return;
    if (p.generation >= MAX_GEN) {
        atomic_fetch_add(&w->bad_returns, 1);
        return;
    }
    if (p.probe) {
        uint32_t out = atomic_fetch_add(&w->probes_out[p.generation], 1) + 1;
        note_max(&w->max_probes_out, out);
        /* let others try to get in while this probe is out */
        sched_yield();
        atomic_fetch_sub(&w->probes_out[p.generation], 1);
    }
    resil_breaker_result r = draw(rng, w->failure_percent);
    int rc = resil_breaker_record(w->b, &p, r);
    if (rc != 0 && rc != RESIL_ESTATE)
        atomic_fetch_add(&w->bad_returns, 1);
    if (rc == 0 && !p.probe && r != RESIL_BREAKER_IGNORED) {
        atomic_fetch_add(&w->counted[p.generation], 1);
        if (r == RESIL_BREAKER_FAILURE)
            atomic_fetch_add(&w->counted_failures[p.generation], 1);
    }
}

static void *run_worker(void *arg)
{
    worker *k = arg;
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, k->seed);
    for (int i = 0; i < CALLS; i++) {
        one_call(k->w, &rng);
        if (k->w->advance_clock)
            resil_fake_clock_advance(k->w->fc, RESIL_US(1));
    }
    return NULL;
}

static void run(world *w)
{
    pthread_t t[THREADS];
    worker k[THREADS];
    for (int i = 0; i < THREADS; i++) {
        k[i] = (worker){w, (uint64_t)i * 7919 + 1};
        assert_int_equal(pthread_create(&t[i], NULL, run_worker, &k[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&w->bad_returns), 0);
}

static bool legal(const resil_breaker_event *e)
{
    switch (e->reason) {
    case RESIL_BREAKER_BY_CONSECUTIVE:
    case RESIL_BREAKER_BY_RATIO:
    case RESIL_BREAKER_BY_SLOW_CALLS:
        return e->from == RESIL_BREAKER_CLOSED && e->to == RESIL_BREAKER_OPEN;
    case RESIL_BREAKER_BY_BREAK_ELAPSED:
        return e->from == RESIL_BREAKER_OPEN && e->to == RESIL_BREAKER_HALF_OPEN;
    case RESIL_BREAKER_BY_PROBE_FAILED:
        return e->from == RESIL_BREAKER_HALF_OPEN && e->to == RESIL_BREAKER_OPEN;
    case RESIL_BREAKER_BY_PROBES_SUCCEEDED:
        return e->from == RESIL_BREAKER_HALF_OPEN && e->to == RESIL_BREAKER_CLOSED;
    default:
        return e->from != e->to; /* manual control */
    }
}

/* Every event delivered once, in order, serially, along a legal path. */
static void assert_event_chain(world *w, const resil_breaker_stats *s, bool gens_dense)
{
    assert_int_equal(atomic_load(&w->overlapping_deliveries), 0);
    assert_int_equal(s->events_dropped, 0);
    assert_int_equal(w->n_ev, s->transitions);
    resil_breaker_state at = RESIL_BREAKER_CLOSED;
    uint32_t gen = 0;
    for (size_t i = 0; i < w->n_ev; i++) {
        const resil_breaker_event *e = &w->ev[i];
        assert_int_equal(e->from, at);
        assert_true(legal(e));
        if (gens_dense)
            assert_int_equal(e->generation, gen + 1);
        else
            assert_true(e->generation > gen);
        gen = e->generation;
        at = e->to;
    }
    assert_int_equal(at, s->state);
}

/* The generation whose results the window holds: the last closed one. */
static uint32_t window_generation(world *w)
{
    uint32_t g = 0;
    for (size_t i = 0; i < w->n_ev; i++)
        if (w->ev[i].to == RESIL_BREAKER_CLOSED)
            g = w->ev[i].generation;
    return g;
}

static void window_totals_equal_the_results_counted(void **state)
{
    (void)state;
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO;
    o.failure_ratio = 1.0; /* never reached with half the calls failing */
    o.minimum_throughput = 1000;
    world *w = world_new(&o);
    w->failure_percent = 50;
    run(w);
    resil_breaker_stats s;
    resil_breaker_stats_get(w->b, &s);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.transitions, 0);
    assert_int_equal(s.window_total, atomic_load(&w->counted[0]));
    assert_int_equal(s.window_failures, atomic_load(&w->counted_failures[0]));
    /* 5 % of the calls were ignored; everything else was counted */
    assert_true(s.window_total > (uint64_t)THREADS * CALLS * 9 / 10);
    assert_true(s.window_total < (uint64_t)THREADS * CALLS);
    world_free(w);
}

/* Successes alone take no lock but a new bucket's: counted by CPU, every
 * one still reaches the window. */
static void successes_from_every_thread_all_reach_the_window(void **state)
{
    (void)state;
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO;
    world *w = world_new(&o);
    w->failure_percent = 0;
    run(w);
    resil_breaker_stats s;
    resil_breaker_stats_get(w->b, &s);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.window_failures, 0);
    assert_int_equal(s.window_total, atomic_load(&w->counted[0]));
    assert_true(s.window_total > (uint64_t)THREADS * CALLS * 9 / 10);
    world_free(w);
}

static void cycle(resil_breaker_kind kind)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = kind;
    o.failure_threshold = 4;
    o.failure_ratio = 0.5;
    o.minimum_throughput = 20;
    o.sampling_duration = RESIL_S(10); /* longer than the run: nothing ages out */
    o.break_duration = RESIL_MS(1);
    o.half_open_probes = 2;
    o.success_threshold = 2;
    o.probe_timeout = RESIL_S(3600); /* no replaced probes: the bound is exact */
    world *w = world_new(&o);
    w->failure_percent = 30;
    w->advance_clock = true;
    run(w);
    resil_breaker_stats s;
    resil_breaker_stats_get(w->b, &s);
    assert_true(s.transitions > 10); /* it did go round */
    assert_true(atomic_load(&w->max_probes_out) <= w->probes_allowed);
    assert_event_chain(w, &s, true);
    if (kind & RESIL_BREAKER_RATIO) {
        uint32_t g = window_generation(w);
        assert_int_equal(s.window_total, atomic_load(&w->counted[g]));
        assert_int_equal(s.window_failures, atomic_load(&w->counted_failures[g]));
    }
    world_free(w);
}

static void consecutive_breaker_cycles_keep_their_invariants(void **state)
{
    (void)state;
    cycle(RESIL_BREAKER_CONSECUTIVE);
}

static void combined_breaker_cycles_keep_their_invariants(void **state)
{
    (void)state;
    cycle(RESIL_BREAKER_BOTH);
}

typedef struct toggler {
    world *w;
    int n;
} toggler;

static void *toggle(void *arg)
{
    toggler *t = arg;
    for (int i = 0; i < t->n; i++) {
        switch (i % 4) {
        case 0: resil_breaker_isolate(t->w->b); break;
        case 1: resil_breaker_close(t->w->b); break;
        case 2: resil_breaker_disable(t->w->b); break;
        default: resil_breaker_reset(t->w->b); break;
        }
    }
    return NULL;
}

static void manual_transitions_racing_a_slow_listener_lose_no_event(void **state)
{
    (void)state;
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_CONSECUTIVE;
    world *w = world_new(&o);
    w->listener_yields = 3;
    pthread_t t[THREADS];
    toggler k = {w, 2000};
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, toggle, &k), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    resil_breaker_stats s;
    resil_breaker_stats_get(w->b, &s);
    assert_true(s.transitions > 100);
    assert_event_chain(w, &s, false);
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(window_totals_equal_the_results_counted),
        cmocka_unit_test(successes_from_every_thread_all_reach_the_window),
        cmocka_unit_test(consecutive_breaker_cycles_keep_their_invariants),
        cmocka_unit_test(combined_breaker_cycles_keep_their_invariants),
        cmocka_unit_test(manual_transitions_racing_a_slow_listener_lose_no_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
