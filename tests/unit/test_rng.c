/*
 * test_rng.c — the random sources. The reference generators must match
 * their originals exactly: the integers below are the jitter draws of the
 * Retry Pattern article's examples (floor(U * cap) for seed 42), and the
 * doubles are the originals' own first outputs.
 */
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static int full_jitter(resil_rng *r, int cap) { return (int)floor(resil_rng_next(r) * cap); }

/* ---- .NET System.Random ------------------------------------------------ */

static void dotnet_seed42_gives_the_articles_csharp_jitter(void **state)
{
    (void)state;
    resil_rng_dotnet r;
    resil_rng_dotnet_init(&r, 42);
    const int caps[] = {100, 200, 100, 200, 400, 100, 100};
    const int want[] = {66, 28, 12, 104, 67, 26, 72};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        assert_int_equal(full_jitter(&r.base, caps[i]), want[i]);
}

static void dotnet_seed42_first_doubles(void **state)
{
    (void)state;
    resil_rng_dotnet r;
    resil_rng_dotnet_init(&r, 42);
    assert_near(resil_rng_next(&r.base), 0.66810646591154232, 1e-15);
    assert_near(resil_rng_next(&r.base), 0.14090729837348093, 1e-15);
    assert_near(resil_rng_next(&r.base), 0.12551828945312568, 1e-15);
}

static void dotnet_next_int_matches_net(void **state)
{
    (void)state;
    resil_rng_dotnet r;
    resil_rng_dotnet_init(&r, 42);
    assert_int_equal(resil_rng_dotnet_next_int(&r), 1434747710);
    assert_int_equal(resil_rng_dotnet_next_int(&r), 302596119);
    resil_rng_dotnet_init(&r, 0);
    assert_int_equal(resil_rng_dotnet_next_int(&r), 1559595546);
}

static void dotnet_double_is_next_int_over_int_max(void **state)
{
    (void)state;
    resil_rng_dotnet a, b;
    resil_rng_dotnet_init(&a, 7);
    resil_rng_dotnet_init(&b, 7);
    for (int i = 0; i < 100; i++) {
        int32_t n = resil_rng_dotnet_next_int(&a);
        assert_true(resil_rng_next(&b.base) == n * (1.0 / INT32_MAX));
    }
}

static void dotnet_negative_seed_equals_its_absolute_value(void **state)
{
    (void)state;
    resil_rng_dotnet a, b;
    resil_rng_dotnet_init(&a, -42);
    resil_rng_dotnet_init(&b, 42);
    for (int i = 0; i < 10; i++)
        assert_int_equal(resil_rng_dotnet_next_int(&a), resil_rng_dotnet_next_int(&b));
}

static void dotnet_int_min_seed_is_treated_as_int_max(void **state)
{
    (void)state;
    resil_rng_dotnet a, b;
    resil_rng_dotnet_init(&a, INT32_MIN);
    resil_rng_dotnet_init(&b, INT32_MAX);
    for (int i = 0; i < 10; i++)
        assert_int_equal(resil_rng_dotnet_next_int(&a), resil_rng_dotnet_next_int(&b));
}

static void dotnet_stays_in_range_over_many_draws(void **state)
{
    (void)state;
    const int32_t seeds[] = {0, 1, 42, INT32_MAX, INT32_MIN, -1, 161803398, 161803399};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        resil_rng_dotnet r;
        resil_rng_dotnet_init(&r, seeds[s]);
        for (int i = 0; i < 10000; i++) {
            int32_t n = resil_rng_dotnet_next_int(&r);
            assert_true(n >= 0 && n < INT32_MAX);
        }
    }
}

/* ---- mulberry32 -------------------------------------------------------- */

static void mulberry32_seed42_gives_the_articles_typescript_jitter(void **state)
{
    (void)state;
    resil_rng_mulberry32 r;
    resil_rng_mulberry32_init(&r, 42);
    const int caps[] = {100, 200, 100, 200, 400, 100};
    const int want[] = {60, 89, 85, 133, 69, 52};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        assert_int_equal(full_jitter(&r.base, caps[i]), want[i]);
}

static void mulberry32_seed42_first_doubles(void **state)
{
    (void)state;
    resil_rng_mulberry32 r;
    resil_rng_mulberry32_init(&r, 42);
    assert_near(resil_rng_next(&r.base), 0.60110375192016363, 1e-15);
    assert_near(resil_rng_next(&r.base), 0.44829055899754167, 1e-15);
    assert_near(resil_rng_next(&r.base), 0.85246579349040985, 1e-15);
}

static void mulberry32_doubles_are_multiples_of_two_to_minus_32(void **state)
{
    (void)state;
    resil_rng_mulberry32 r;
    resil_rng_mulberry32_init(&r, 0xFFFFFFFFu);
    for (int i = 0; i < 1000; i++) {
        double u = resil_rng_next(&r.base);
        assert_true(u >= 0.0 && u < 1.0);
        double scaled = u * 4294967296.0;
        assert_true(scaled == floor(scaled));
    }
}

/* ---- seeded xoshiro256** ----------------------------------------------- */

static void seeded_matches_xoshiro256starstar_over_splitmix64(void **state)
{
    (void)state;
    resil_rng_seeded r;
    resil_rng_seeded_init(&r, 0);
    assert_int_equal(r.s[0], UINT64_C(0xE220A8397B1DCDAF)); /* splitmix64(0) */
    assert_int_equal(resil_rng_seeded_next_u64(&r), UINT64_C(0x99EC5F36CB75F2B4));
    assert_int_equal(resil_rng_seeded_next_u64(&r), UINT64_C(0xBF6E1F784956452A));
    assert_int_equal(resil_rng_seeded_next_u64(&r), UINT64_C(0x1A5F849D4933E6E0));
}

static void seeded_double_is_the_top_53_bits(void **state)
{
    (void)state;
    resil_rng_seeded r;
    resil_rng_seeded_init(&r, 42);
    assert_true(resil_rng_next(&r.base) == 0.08386297105988216);
    assert_true(resil_rng_next(&r.base) == 0.3789802506626686);
    assert_true(resil_rng_next(&r.base) == 0.6800434110281394);
}

static void seeded_same_seed_same_sequence(void **state)
{
    (void)state;
    resil_rng_seeded a, b;
    resil_rng_seeded_init(&a, 12345);
    resil_rng_seeded_init(&b, 12345);
    for (int i = 0; i < 100; i++)
        assert_true(resil_rng_next(&a.base) == resil_rng_next(&b.base));
}

static void seeded_different_seeds_differ(void **state)
{
    (void)state;
    resil_rng_seeded a, b;
    resil_rng_seeded_init(&a, 1);
    resil_rng_seeded_init(&b, 2);
    assert_true(resil_rng_seeded_next_u64(&a) != resil_rng_seeded_next_u64(&b));
}

static void seeded_doubles_stay_in_unit_interval(void **state)
{
    (void)state;
    resil_rng_seeded r;
    resil_rng_seeded_init(&r, UINT64_MAX);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = resil_rng_next(&r.base);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
    }
    assert_near(sum / 100000, 0.5, 0.01);
}

/* ---- scripted ---------------------------------------------------------- */

static void scripted_returns_values_then_repeats_the_last(void **state)
{
    (void)state;
    const double v[] = {0.25, 0.5, 0.75};
    resil_rng_scripted r;
    resil_rng_scripted_init(&r, v, 3);
    assert_true(resil_rng_next(&r.base) == 0.25);
    assert_true(resil_rng_next(&r.base) == 0.5);
    assert_true(resil_rng_next(&r.base) == 0.75);
    assert_true(resil_rng_next(&r.base) == 0.75);
    assert_true(resil_rng_next(&r.base) == 0.75);
}

static void scripted_empty_returns_zero(void **state)
{
    (void)state;
    resil_rng_scripted r;
    resil_rng_scripted_init(&r, NULL, 0);
    assert_true(resil_rng_next(&r.base) == 0.0);
    assert_true(resil_rng_next(&r.base) == 0.0);
}

static void scripted_null_values_count_as_empty(void **state)
{
    (void)state;
    resil_rng_scripted r;
    resil_rng_scripted_init(&r, NULL, 5);
    assert_true(resil_rng_next(&r.base) == 0.0);
}

/* ---- per-thread default ------------------------------------------------ */

static void thread_rng_is_stable_within_a_thread(void **state)
{
    (void)state;
    resil_rng *a = resil_rng_thread();
    assert_non_null(a);
    assert_ptr_equal(a, resil_rng_thread());
    for (int i = 0; i < 1000; i++) {
        double u = resil_rng_next(a);
        assert_true(u >= 0.0 && u < 1.0);
    }
}

typedef struct thread_draws {
    resil_rng *rng;
    double first[4];
} thread_draws;

static void *draw_in_thread(void *p)
{
    thread_draws *d = p;
    d->rng = resil_rng_thread();
    for (int i = 0; i < 4; i++)
        d->first[i] = resil_rng_next(d->rng);
    for (int i = 0; i < 10000; i++)
        resil_rng_next(d->rng);
    return NULL;
}

static void each_thread_has_its_own_differently_seeded_generator(void **state)
{
    (void)state;
    enum { N = 4 };
    thread_draws d[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        pthread_create(&t[i], NULL, draw_in_thread, &d[i]);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        for (int j = i + 1; j < N; j++)
            assert_memory_not_equal(d[i].first, d[j].first, sizeof d[i].first);
    }
    assert_ptr_not_equal(resil_rng_thread(), NULL);
}

/* ---- across fork ------------------------------------------------------- */

/* Forked workers really run, each drawing its jittered waits through the
 * default source and sending them to the parent through its own pipe. */

enum { WORKERS = 4, DRAWS = 8 };

/* The wait after a fifth failure: exponential from 1 s, full jitter, so a
 * draw is a duration anywhere in [0, 16 s) on a nanosecond grid. */
static void draw_waits(resil_duration *out)
{
    resil_backoff b;
    resil_backoff_default(&b);
    for (int i = 0; i < DRAWS; i++)
        out[i] = resil_backoff_delay(&b, 5, NULL, NULL); /* NULL: the thread's source */
}

static void draw_waits_from(resil_rng *rng, resil_duration *out)
{
    resil_backoff b;
    resil_backoff_default(&b);
    for (int i = 0; i < DRAWS; i++)
        out[i] = resil_backoff_delay(&b, 5, NULL, rng);
}

typedef struct worker {
    pid_t pid;
    int fd; /* the read end */
} worker;

/* Nothing here asserts: a forking thread must not fail a test on its own.
 * A worker that could not start has pid -1 and reads back nothing. */
static worker start_worker(resil_rng *held)
{
    int p[2];
    if (pipe(p) != 0)
        return (worker){-1, -1};
    worker w = {fork(), p[0]};
    if (w.pid < 0) {
        close(p[0]);
        close(p[1]);
        return w;
    }
    if (w.pid == 0) {
        close(p[0]);
        resil_duration waits[DRAWS];
        if (held != NULL)
            draw_waits_from(held, waits);
        else
            draw_waits(waits);
        ssize_t n = write(p[1], waits, sizeof waits);
        _exit(n == (ssize_t)sizeof waits ? 0 : 1);
    }
    close(p[1]);
    return w;
}

/* Read the worker's waits and reap it: true when all came and it exited 0. */
static bool finish_worker(worker w, resil_duration *out)
{
    if (w.pid < 0)
        return false;
    size_t got = 0;
    while (got < DRAWS * sizeof *out) {
        ssize_t n = read(w.fd, (char *)out + got, DRAWS * sizeof *out - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(w.fd);
    int status = -1;
    bool reaped = waitpid(w.pid, &status, 0) == w.pid;
    return reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
           got == DRAWS * sizeof *out;
}

/* No two sequences alike, and no two agreeing on their first wait: clients
 * in lock-step would. */
static void assert_all_differ(resil_duration seq[][DRAWS], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            assert_memory_not_equal(seq[i], seq[j], DRAWS * sizeof seq[i][0]);
            assert_int_not_equal(seq[i][0], seq[j][0]);
        }
    }
}

static void forked_workers_draw_waits_unlike_each_other_and_the_parent(void **state)
{
    (void)state;
    resil_duration first[DRAWS];
    draw_waits(first); /* the parent has drawn before it forks */
    resil_duration seq[WORKERS + 1][DRAWS];
    worker w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        w[i] = start_worker(NULL);
    for (int i = 0; i < WORKERS; i++)
        assert_true(finish_worker(w[i], seq[i]));
    draw_waits(seq[WORKERS]); /* the parent's next waits */
    assert_all_differ(seq, WORKERS + 1);
}

static void a_source_taken_before_the_fork_draws_afresh_in_the_child(void **state)
{
    (void)state;
    resil_rng *held = resil_rng_thread();
    resil_duration first[DRAWS], seq[2][DRAWS];
    draw_waits_from(held, first); /* the parent has drawn before it forks */
    worker w = start_worker(held);
    assert_true(finish_worker(w, seq[0]));
    draw_waits_from(held, seq[1]);
    assert_all_differ(seq, 2);
}

typedef struct forking_thread {
    resil_duration seq[2][DRAWS];
    bool worker_ok;
} forking_thread;

/* A thread that has drawn forks: the child's only thread is its copy. */
static void *fork_from_thread(void *p)
{
    forking_thread *t = p;
    resil_duration first[DRAWS];
    draw_waits(first);
    worker w = start_worker(NULL);
    t->worker_ok = finish_worker(w, t->seq[0]);
    draw_waits(t->seq[1]);
    return NULL;
}

static void a_worker_forked_from_another_thread_draws_unlike_that_thread(void **state)
{
    (void)state;
    forking_thread t;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fork_from_thread, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(t.worker_ok);
    assert_all_differ(t.seq, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dotnet_seed42_gives_the_articles_csharp_jitter),
        cmocka_unit_test(dotnet_seed42_first_doubles),
        cmocka_unit_test(dotnet_next_int_matches_net),
        cmocka_unit_test(dotnet_double_is_next_int_over_int_max),
        cmocka_unit_test(dotnet_negative_seed_equals_its_absolute_value),
        cmocka_unit_test(dotnet_int_min_seed_is_treated_as_int_max),
        cmocka_unit_test(dotnet_stays_in_range_over_many_draws),
        cmocka_unit_test(mulberry32_seed42_gives_the_articles_typescript_jitter),
        cmocka_unit_test(mulberry32_seed42_first_doubles),
        cmocka_unit_test(mulberry32_doubles_are_multiples_of_two_to_minus_32),
        cmocka_unit_test(seeded_matches_xoshiro256starstar_over_splitmix64),
        cmocka_unit_test(seeded_double_is_the_top_53_bits),
        cmocka_unit_test(seeded_same_seed_same_sequence),
        cmocka_unit_test(seeded_different_seeds_differ),
        cmocka_unit_test(seeded_doubles_stay_in_unit_interval),
        cmocka_unit_test(scripted_returns_values_then_repeats_the_last),
        cmocka_unit_test(scripted_empty_returns_zero),
        cmocka_unit_test(scripted_null_values_count_as_empty),
        cmocka_unit_test(thread_rng_is_stable_within_a_thread),
        cmocka_unit_test(each_thread_has_its_own_differently_seeded_generator),
        cmocka_unit_test(forked_workers_draw_waits_unlike_each_other_and_the_parent),
        cmocka_unit_test(a_source_taken_before_the_fork_draws_afresh_in_the_child),
        cmocka_unit_test(a_worker_forked_from_another_thread_draws_unlike_that_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
