/*
 * test_timers.c — resil_timers, the pairing heap a loop keeps its timers
 * in (loop.h): due order with ties in start order, what run() runs and
 * returns, stopping a timer anywhere in the heap, moving an armed one,
 * callbacks that start timers, a place reserved ahead of the start, and a
 * long seeded sequence of starts, reservations, stops and runs checked
 * step by step against a plain list that sorts.
 */
#include "test.h"

#define N 64

typedef struct named_timer {
    resil_timer t;
    int id;
} named_timer;

static int fired[N];
static size_t nfired;

static void record(resil_timer *t)
{
    fired[nfired++] = ((named_timer *)t)->id;
}

/* `n` idle timers that record their id, an empty heap, nothing fired. */
static void arm(named_timer *ts, int n, resil_timers *q)
{
    resil_timers_init(q);
    memset(ts, 0, (size_t)n * sizeof *ts);
    for (int i = 0; i < n; i++) {
        ts[i].t.fn = record;
        ts[i].id = i;
    }
    nfired = 0;
}

static void due_order_with_ties_in_start_order(void **state)
{
    (void)state;
    named_timer ts[6];
    resil_timers q;
    arm(ts, 6, &q);
    static const resil_instant due[] = {30, 10, 20, 10, 30, 5};
    for (int i = 0; i < 6; i++)
        resil_timers_start(&q, &ts[i].t, due[i]);
    assert_int_equal(q.count, 6);
    assert_int_equal(resil_timers_next(&q), 5);
    assert_int_equal(resil_timers_run(&q, 100), 6);
    static const int want[] = {5, 1, 3, 2, 0, 4};
    assert_int_equal(nfired, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(fired[i], want[i]);
    assert_int_equal(q.count, 0);
    assert_int_equal(resil_timers_next(&q), RESIL_INSTANT_MAX);
}

static void run_runs_only_what_is_due_and_counts_it(void **state)
{
    (void)state;
    named_timer ts[3];
    resil_timers q;
    arm(ts, 3, &q);
    resil_timers_start(&q, &ts[0].t, 10);
    resil_timers_start(&q, &ts[1].t, 20);
    resil_timers_start(&q, &ts[2].t, 21);
    assert_int_equal(resil_timers_run(&q, 9), 0);
    assert_int_equal(resil_timers_run(&q, 20), 2); /* due at `now` runs */
    assert_false(ts[0].t.armed);
    assert_true(ts[2].t.armed);
    assert_int_equal(resil_timers_next(&q), 21);
    assert_int_equal(q.count, 1);
    assert_int_equal(resil_timers_run(&q, 21), 1);
    assert_int_equal(nfired, 3);
}

/* A timer deep in the heap, the root, and one already stopped. */
static void a_stopped_timer_never_runs_wherever_it_sat(void **state)
{
    (void)state;
    named_timer ts[8];
    resil_timers q;
    arm(ts, 8, &q);
    for (int i = 0; i < 8; i++)
        resil_timers_start(&q, &ts[i].t, 10 * (8 - i)); /* each new one the root */
    /* one run's removal of the root pairs the rest into a deeper heap */
    assert_int_equal(resil_timers_run(&q, 10), 1);
    resil_timers_stop(&q, &ts[3].t); /* due 50: inside, not the root */
    resil_timers_stop(&q, &ts[6].t); /* due 20: the root */
    resil_timers_stop(&q, &ts[6].t); /* twice: nothing */
    assert_int_equal(q.count, 5);
    assert_int_equal(resil_timers_next(&q), 30);
    assert_int_equal(resil_timers_run(&q, 1000), 5);
    static const int want[] = {7, 5, 4, 2, 1, 0};
    assert_int_equal(nfired, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(fired[i], want[i]);
}

static void starting_an_armed_timer_moves_it(void **state)
{
    (void)state;
    named_timer ts[3];
    resil_timers q;
    arm(ts, 3, &q);
    resil_timers_start(&q, &ts[0].t, 10);
    resil_timers_start(&q, &ts[1].t, 20);
    resil_timers_start(&q, &ts[2].t, 20);
    resil_timers_start(&q, &ts[0].t, 20); /* later, and last among the ties */
    assert_int_equal(q.count, 3);
    assert_int_equal(resil_timers_next(&q), 20);
    assert_int_equal(resil_timers_run(&q, 20), 3);
    assert_int_equal(fired[0], 1);
    assert_int_equal(fired[1], 2);
    assert_int_equal(fired[2], 0);
}

static resil_timers *chain_q;
static named_timer *chain_next;

static void start_the_next(resil_timer *t)
{
    record(t);
    if (chain_next != NULL) {
        named_timer *n = chain_next;
        chain_next = NULL;
        resil_timers_start(chain_q, &n->t, t->due); /* due at once */
    }
}

/* A callback's timer due by `now` runs in the same pass, after it. */
static void a_timer_started_by_a_callback_runs_in_the_same_pass_when_due(void **state)
{
    (void)state;
    named_timer ts[3];
    resil_timers q;
    arm(ts, 3, &q);
    chain_q = &q;
    chain_next = &ts[2];
    ts[0].t.fn = start_the_next;
    resil_timers_start(&q, &ts[0].t, 10);
    resil_timers_start(&q, &ts[1].t, 15);
    assert_int_equal(resil_timers_run(&q, 12), 2);
    assert_int_equal(fired[0], 0);
    assert_int_equal(fired[1], 2);
    assert_int_equal(resil_timers_next(&q), 15);
}

/* ---- against a model -------------------------------------------------------------- */

/* Timer 0 reserves its place, 1 starts, then 0 starts: at one instant 0
 * runs first, as if started when it reserved. */
static void a_reserved_timer_runs_before_timers_started_after_its_reservation(void **state)
{
    (void)state;
    named_timer ts[3];
    resil_timers q;
    arm(ts, 3, &q);
    resil_timers_start(&q, &ts[2].t, 10);
    resil_timers_reserve(&q, &ts[0].t);
    assert_false(ts[0].t.armed);
    assert_int_equal(q.count, 1);
    resil_timers_start(&q, &ts[1].t, 10);
    resil_timers_start(&q, &ts[0].t, 10);
    assert_int_equal(resil_timers_run(&q, 10), 3);
    static const int want[] = {2, 0, 1};
    for (int i = 0; i < 3; i++)
        assert_int_equal(fired[i], want[i]);
}

static void a_stop_gives_up_a_reservation(void **state)
{
    (void)state;
    named_timer ts[2];
    resil_timers q;
    arm(ts, 2, &q);
    resil_timers_reserve(&q, &ts[0].t);
    resil_timers_stop(&q, &ts[0].t);
    assert_false(ts[0].t.reserved);
    resil_timers_start(&q, &ts[1].t, 10);
    resil_timers_start(&q, &ts[0].t, 10);
    assert_int_equal(resil_timers_run(&q, 10), 2);
    assert_int_equal(fired[0], 1);
    assert_int_equal(fired[1], 0);
}

/* A reservation serves one start: started again after it ran, the timer
 * takes its place from that start. */
static void a_reservation_serves_one_start(void **state)
{
    (void)state;
    named_timer ts[2];
    resil_timers q;
    arm(ts, 2, &q);
    resil_timers_reserve(&q, &ts[0].t);
    resil_timers_start(&q, &ts[0].t, 5);
    assert_int_equal(resil_timers_run(&q, 5), 1);
    resil_timers_start(&q, &ts[1].t, 10);
    resil_timers_start(&q, &ts[0].t, 10);
    nfired = 0;
    assert_int_equal(resil_timers_run(&q, 10), 2);
    assert_int_equal(fired[0], 1);
    assert_int_equal(fired[1], 0);
}

/* Reserving a started timer leaves its place (and the heap) as it is. */
static void reserving_a_started_timer_changes_nothing(void **state)
{
    (void)state;
    named_timer ts[2];
    resil_timers q;
    arm(ts, 2, &q);
    resil_timers_start(&q, &ts[0].t, 10);
    resil_timers_start(&q, &ts[1].t, 10);
    resil_timers_reserve(&q, &ts[1].t);
    assert_false(ts[1].t.reserved);
    assert_int_equal(resil_timers_run(&q, 10), 2);
    assert_int_equal(fired[0], 0);
    assert_int_equal(fired[1], 1);
}

typedef struct model {
    bool armed[N];
    bool reserved[N];
    resil_instant due[N];
    uint64_t seq[N];
    uint64_t next_seq;
} model;

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t draw(uint64_t below)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state % below;
}

/* The model's run: the armed ones due by `now`, by (due, seq). */
static size_t model_run(model *m, resil_instant now, int *out)
{
    size_t n = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < N; i++)
            if (m->armed[i] && m->due[i] <= now &&
                (best < 0 || m->due[i] < m->due[best] ||
                 (m->due[i] == m->due[best] && m->seq[i] < m->seq[best])))
                best = i;
        if (best < 0)
            return n;
        m->armed[best] = false;
        out[n++] = best;
    }
}

static resil_instant model_next(const model *m)
{
    resil_instant next = RESIL_INSTANT_MAX;
    for (int i = 0; i < N; i++)
        if (m->armed[i] && m->due[i] < next)
            next = m->due[i];
    return next;
}

static void ten_thousand_steps_agree_with_a_sorted_list(void **state)
{
    (void)state;
    named_timer ts[N];
    resil_timers q;
    arm(ts, N, &q);
    model m = {.next_seq = 0};
    resil_instant now = 0;
    int want[N];
    for (int step = 0; step < 10000; step++) {
        uint64_t what = draw(10);
        int id = (int)draw(N);
        if (what < 4) { /* start or move, often onto a tie */
            resil_instant due = now + (resil_instant)draw(8) * 5;
            resil_timers_start(&q, &ts[id].t, due);
            if (m.armed[id] || !m.reserved[id])
                m.seq[id] = m.next_seq++;
            m.armed[id] = true;
            m.reserved[id] = false;
            m.due[id] = due;
        } else if (what < 5) { /* a place taken ahead of the start */
            resil_timers_reserve(&q, &ts[id].t);
            if (!m.armed[id]) {
                m.reserved[id] = true;
                m.seq[id] = m.next_seq++;
            }
        } else if (what < 8) {
            resil_timers_stop(&q, &ts[id].t);
            m.armed[id] = false;
            m.reserved[id] = false;
        } else {
            now += (resil_instant)draw(20);
            nfired = 0;
            size_t ran = resil_timers_run(&q, now);
            size_t expected = model_run(&m, now, want);
            assert_int_equal(ran, expected);
            assert_int_equal(nfired, expected);
            for (size_t i = 0; i < expected; i++)
                if (fired[i] != want[i])
                    fail_msg("step %d: run %zu fired %d, the model %d", step, i, fired[i],
                             want[i]);
        }
        size_t armed = 0;
        for (int i = 0; i < N; i++)
            armed += m.armed[i];
        assert_int_equal(q.count, armed);
        assert_int_equal(resil_timers_next(&q), model_next(&m));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(due_order_with_ties_in_start_order),
        cmocka_unit_test(run_runs_only_what_is_due_and_counts_it),
        cmocka_unit_test(a_stopped_timer_never_runs_wherever_it_sat),
        cmocka_unit_test(starting_an_armed_timer_moves_it),
        cmocka_unit_test(a_timer_started_by_a_callback_runs_in_the_same_pass_when_due),
        cmocka_unit_test(a_reserved_timer_runs_before_timers_started_after_its_reservation),
        cmocka_unit_test(a_stop_gives_up_a_reservation),
        cmocka_unit_test(a_reservation_serves_one_start),
        cmocka_unit_test(reserving_a_started_timer_changes_nothing),
        cmocka_unit_test(ten_thousand_steps_agree_with_a_sorted_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
