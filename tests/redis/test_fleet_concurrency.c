/*
 * test_fleet_concurrency.c — exact counts under concurrency, at both
 * levels where it can go wrong: eight instances running the script against
 * one key at once (Redis's atomicity is what makes fleet totals exact), and
 * eight threads hammering one handle while its sync thread flushes behind
 * them (no count lost between a stripe and a round). Run under TSan too.
 */
#include "fleet_test.h"

#define THREADS 8

/* Worker threads never assert (a cmocka failure jumps to the main thread's
 * stack): they count what went wrong, and the test asserts on the main
 * thread once they are joined. */
typedef struct worker {
    pthread_t thread;
    resil_fake_clock *fc;
    resil_redis_breaker_opts opts;
    resil_breaker *shared; /* one handle for all, or NULL: each its own */
    pthread_barrier_t *start;
    int calls, every_nth_fails, sync_every;
    int admitted;
    int errors;
} worker;

static void expect(worker *w, bool ok) { w->errors += !ok; }

static void call_once(worker *w, resil_breaker *b, int i)
{
    bool fails = w->every_nth_fails > 0 && i % w->every_nth_fails == 0;
    resil_breaker_permit p;
    expect(w, resil_breaker_acquire(b, &p) == 0);
    expect(w, resil_breaker_record(b, &p, fails ? RESIL_BREAKER_FAILURE
                                                      : RESIL_BREAKER_SUCCESS) == 0);
}

/* An instance of its own: a client and a handle on w->opts. */
static bool instance(worker *w, resil_redis **r, resil_breaker **b)
{
    resil_redis_opts o = fleet_opts(NULL);
    *r = NULL;
    *b = NULL;
    bool ok = resil_redis_new(&o, r, NULL) == 0 && resil_redis_breaker_new(*r, &w->opts, b, NULL) == 0;
    expect(w, ok);
    return ok;
}

static void *own_instance(void *arg)
{
    worker *w = arg;
    resil_redis *r;
    resil_breaker *b;
    bool ready = instance(w, &r, &b);
    pthread_barrier_wait(w->start);
    for (int i = 1; ready && i <= w->calls; i++) {
        call_once(w, b, i);
        if (i % w->sync_every == 0)
            expect(w, resil_redis_sync(r) == 0);
    }
    expect(w, ready && resil_redis_sync(r) == 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    return NULL;
}

static void run_workers(worker *w, void *(*fn)(void *))
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i].start = &start;
        assert_int_equal(pthread_create(&w[i].thread, NULL, fn, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i].thread, NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(w[i].errors, 0);
}

/* A window rule that never trips, so every count stays in the window. */
static resil_redis_breaker_opts counting_only(const char *name, resil_fake_clock *fc)
{
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o);
    o.name = name;
    o.rules.kind = RESIL_BREAKER_BOTH;
    o.rules.failure_threshold = UINT32_MAX;
    o.rules.failure_ratio = 1.0;
    o.rules.minimum_throughput = UINT32_MAX;
    o.rules.clock = resil_fake_clock_clock(fc);
    return o;
}

/* The shared state read by name, with the window placed on the test's
 * fake clock. */
static resil_redis_breaker_status status_of(const char *name, resil_fake_clock *fc)
{
    resil_redis_opts o = fleet_opts(NULL);
    o.clock = resil_fake_clock_clock(fc);
    resil_redis *r = fleet_client_with(&o);
    resil_redis_breaker_status s;
    assert_int_equal(resil_redis_status_get(r, name, &s, NULL), 0);
    resil_redis_free(r);
    return s;
}

static void eight_instances_flushing_at_once_count_exactly(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++)
        w[i] = (worker){.fc = fc, .opts = counting_only("eight", fc), .calls = 1000,
                        .every_nth_fails = 4, .sync_every = 50};
    run_workers(w, own_instance);

    resil_redis_breaker_status s = status_of("eight", fc);
    assert_int_equal(s.state, RESIL_BREAKER_CLOSED);
    assert_int_equal(s.window_total, THREADS * 1000);
    assert_int_equal(s.window_failures, THREADS * 250);
    resil_fake_clock_free(fc);
}

static void eight_instances_failing_at_once_build_one_exact_run(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++)
        w[i] = (worker){.fc = fc, .opts = counting_only("run", fc), .calls = 60,
                        .every_nth_fails = 1, .sync_every = 7};
    run_workers(w, own_instance);

    resil_redis_breaker_status s = status_of("run", fc);
    assert_int_equal(s.consecutive_failures, THREADS * 60);
    assert_int_equal(s.window_failures, THREADS * 60);
    resil_fake_clock_free(fc);
}

static void *hammer_shared(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 1; i <= w->calls; i++)
        call_once(w, w->shared, i);
    return NULL;
}

static void eight_threads_on_one_handle_lose_no_count_to_concurrent_flushes(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis_opts o = fleet_opts(NULL);
    o.sync_interval = RESIL_MS(1); /* flush all the time, behind the threads */
    o.refresh_interval = RESIL_MS(1);
    resil_redis *r = fleet_client_with(&o);
    resil_redis_breaker_opts bo = counting_only("one-handle", fc);
    resil_breaker *b = fleet_breaker(r, &bo);

    worker w[THREADS];
    for (int i = 0; i < THREADS; i++)
        w[i] = (worker){.fc = fc, .shared = b, .calls = 20000, .every_nth_fails = 4};
    run_workers(w, hammer_shared);
    assert_int_equal(resil_redis_sync(r), 0);

    resil_redis_breaker_status s = fleet_status(b);
    assert_int_equal(s.window_total, THREADS * 20000);
    assert_int_equal(s.window_failures, THREADS * 5000);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_true(st.rounds > 1);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void *race_for_a_probe(void *arg)
{
    worker *w = arg;
    resil_redis *r;
    resil_breaker *b;
    bool ready = instance(w, &r, &b);
    expect(w, ready && resil_breaker_state_of(b) == RESIL_BREAKER_OPEN);
    pthread_barrier_wait(w->start);
    resil_breaker_permit p;
    w->admitted = ready && resil_breaker_acquire(b, &p) == 0;
    expect(w, !w->admitted || p.probe);
    pthread_barrier_wait(w->start);
    resil_breaker_free(b);
    resil_redis_free(r);
    return NULL;
}

static void eight_instances_racing_for_three_probe_slots_get_exactly_three(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts o = fleet_consecutive("race", 1, fc);
    o.rules.half_open_probes = 3;
    resil_redis *r = fleet_client(NULL);
    resil_breaker *b = fleet_breaker(r, &o);
    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_fake_clock_advance(fc, RESIL_S(5));

    worker w[THREADS];
    for (int i = 0; i < THREADS; i++)
        w[i] = (worker){.fc = fc, .opts = o};
    run_workers(w, race_for_a_probe);
    int admitted = 0;
    for (int i = 0; i < THREADS; i++)
        admitted += w[i].admitted;
    assert_int_equal(admitted, 3);
    assert_int_equal(fleet_status(b).probes_in_flight, 3);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(eight_instances_flushing_at_once_count_exactly),
        T(eight_instances_failing_at_once_build_one_exact_run),
        T(eight_threads_on_one_handle_lose_no_count_to_concurrent_flushes),
        T(eight_instances_racing_for_three_probe_slots_get_exactly_three),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
