/*
 * test_degrade_threads.c — the degradation monitor shared by threads:
 * callers admitting and recording while others tick and set levels by
 * hand. Listeners must never run concurrently and must see an unbroken
 * chain of changes ending at the final level; a due check is evaluated by
 * exactly one of the callers that find it due.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "test.h"

#define CALLERS 8
#define ROUNDS 3000
#define MAX_EVENTS 100000

typedef struct chain {
    _Atomic int inside;
    _Atomic int overlaps;
    int from[MAX_EVENTS], to[MAX_EVENTS];
    int n;
} chain;

static void on_change(void *ud, const resil_degrade_event *ev)
{
    chain *c = ud;
    if (atomic_fetch_add(&c->inside, 1) != 0)
        atomic_fetch_add(&c->overlaps, 1);
    if (c->n < MAX_EVENTS) {
        c->from[c->n] = ev->from;
        c->to[c->n] = ev->to;
    }
    c->n++;
    atomic_fetch_sub(&c->inside, 1);
}

static int busy_cpu(void *ud, resil_health_sample *out)
{
    _Atomic int *calls = ud;
    int n = atomic_fetch_add(calls, 1);
    out->cpu = (double)(n * 37 % 100);
    out->memory = 20;
    return 0;
}

typedef struct world {
    resil_degrade *d;
    int id;
    _Atomic int *stop;
} world;

static void *caller_main(void *p)
{
    world *w = p;
    for (int i = 0; i < ROUNDS; i++) {
        resil_degrade_admit(w->d, (i * 7 + w->id) % 120);
        resil_degrade_record(w->d, (i + w->id) % 5 != 0);
    }
    return NULL;
}

static void *operator_main(void *p)
{
    world *w = p;
    for (int i = 0; i < ROUNDS / 10; i++) {
        if (i % 3 == 0)
            resil_degrade_set_level(w->d, i % resil_degrade_level_count(w->d));
        else
            resil_degrade_tick(w->d);
    }
    return NULL;
}

static void listeners_see_one_ordered_chain_while_threads_race(void **state)
{
    (void)state;
    static chain c; /* large; zeroed as a static */
    memset(&c, 0, sizeof c);
    _Atomic int samples = 0;
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.min_level_duration = 0;
    o.check_interval = RESIL_MS(1);
    o.sampler = busy_cpu;
    o.sampler_ud = (void *)&samples;
    o.on_change = on_change;
    o.on_change_ud = &c;
    resil_degrade *d;
    assert_int_equal(resil_degrade_new(&o, &d, NULL), 0);

    pthread_t th[CALLERS + 2];
    world w[CALLERS + 2];
    for (int i = 0; i < CALLERS + 2; i++) {
        w[i] = (world){.d = d, .id = i};
        pthread_create(&th[i], NULL, i < CALLERS ? caller_main : operator_main, &w[i]);
    }
    for (int i = 0; i < CALLERS + 2; i++)
        pthread_join(th[i], NULL);

    assert_int_equal(atomic_load(&c.overlaps), 0);
    assert_true(c.n > 0 && c.n <= MAX_EVENTS);
    assert_int_equal(c.from[0], 0);
    for (int i = 1; i < c.n; i++) {
        assert_int_equal(c.from[i], c.to[i - 1]);
        assert_int_not_equal(c.from[i], c.to[i]);
    }
    assert_int_equal(c.to[c.n - 1], resil_degrade_level(d));
    resil_degrade_free(d);
}

typedef struct admitters {
    resil_degrade *d;
    pthread_barrier_t *go;
} admitters;

static void *admit_once(void *p)
{
    admitters *a = p;
    pthread_barrier_wait(a->go);
    for (int i = 0; i < 100; i++)
        resil_degrade_admit(a->d, 0);
    return NULL;
}

static void a_due_check_is_evaluated_by_exactly_one_caller(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    _Atomic int samples = 0;
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.sampler = busy_cpu;
    o.sampler_ud = (void *)&samples;
    o.clock = resil_fake_clock_clock(fc);
    resil_degrade *d;
    assert_int_equal(resil_degrade_new(&o, &d, NULL), 0);
    resil_fake_clock_advance(fc, RESIL_S(30));

    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, CALLERS);
    admitters a = {d, &go};
    pthread_t th[CALLERS];
    for (int i = 0; i < CALLERS; i++)
        pthread_create(&th[i], NULL, admit_once, &a);
    for (int i = 0; i < CALLERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);

    assert_int_equal(atomic_load(&samples), 1);
    resil_degrade_stats s;
    resil_degrade_stats_get(d, &s);
    assert_int_equal(s.evaluations, 1);
    resil_degrade_free(d);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(listeners_see_one_ordered_chain_while_threads_race),
        cmocka_unit_test(a_due_check_is_evaluated_by_exactly_one_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
