/*
 * test_registry.c — keyed breakers: creation on first use with default or
 * per-key options, lookups, removal, the eviction order (least recently
 * used idle breaker first, then least recently used of any state), handles
 * that outlive eviction, snapshots, and the bound under concurrent creation.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "test.h"

typedef struct fx {
    resil_fake_clock *fc;
    resil_registry *r;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), 0, &f->fc), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    resil_registry_free(f->r);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

/* Consecutive breakers with threshold 1 on the fixture's clock. */
static resil_registry_opts opts(fx *f, uint32_t max)
{
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    o.max_breakers = max;
    o.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    o.breaker.failure_threshold = 1;
    o.breaker.clock = resil_fake_clock_clock(f->fc);
    return o;
}

static void make(fx *f, const resil_registry_opts *o)
{
    resil_err err = {0};
    if (resil_registry_new(o, &f->r, &err) != 0)
        fail_msg("resil_registry_new: %s", err.message);
}

/* get-or-create, returning the reference (caller frees). */
static resil_breaker *get(fx *f, const char *key)
{
    resil_breaker *b = NULL;
    resil_err err = {0};
    if (resil_registry_get(f->r, key, NULL, &b, &err) != 0)
        fail_msg("get %s: %s", key, err.message);
    return b;
}

/* Touch a key (a lookup marks it recently used) and drop the reference. */
static void touch(fx *f, const char *key) { resil_breaker_free(get(f, key)); }

static bool held(fx *f, const char *key)
{
    resil_breaker *b;
    int rc = resil_registry_try_get(f->r, key, &b);
    resil_breaker_free(b);
    return rc == 0;
}

static void fail_once(fx *f, const char *key)
{
    resil_breaker *b = get(f, key);
    resil_breaker_permit p;
    if (resil_breaker_acquire(b, &p) == 0)
        resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE);
    resil_breaker_free(b);
}

/* ---- basics ------------------------------------------------------------ */

static void defaults_hold_1024_breakers_of_default_options(void **state)
{
    (void)state;
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    assert_int_equal(o.max_breakers, 1024);
    assert_int_equal(o.breaker.kind, RESIL_BREAKER_RATIO);
    assert_null(o.opts_for);
}

static void get_creates_a_closed_breaker_named_after_the_key(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker *b = get(f, "https://api.example.com:443");
    assert_string_equal(resil_breaker_name(b), "https://api.example.com:443");
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    assert_int_equal(resil_registry_count(f->r), 1);
    resil_breaker_free(b);
}

static void the_same_key_gives_the_same_breaker(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker *a = get(f, "db"), *b = get(f, "db"), *c = get(f, "cache");
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, c);
    assert_int_equal(resil_registry_count(f->r), 2);
    resil_breaker_free(a);
    resil_breaker_free(b);
    resil_breaker_free(c);
}

static void try_get_never_creates(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker *b = (resil_breaker *)1;
    assert_int_equal(resil_registry_try_get(f->r, "db", &b), RESIL_ENOTFOUND);
    assert_null(b);
    assert_int_equal(resil_registry_count(f->r), 0);
    touch(f, "db");
    assert_int_equal(resil_registry_try_get(f->r, "db", &b), 0);
    assert_string_equal(resil_breaker_name(b), "db");
    resil_breaker_free(b);
}

static int fragile_fails_fast(const char *key, resil_breaker_opts *o, void *ud)
{
    int *calls = ud;
    (*calls)++;
    if (strcmp(key, "fragile") == 0)
        o->kind = RESIL_BREAKER_CONSECUTIVE, o->failure_threshold = 1;
    if (strcmp(key, "forbidden") == 0)
        return RESIL_ENOTFOUND;
    if (strcmp(key, "broken") == 0)
        o->failure_ratio = 7;
    return 0;
}

static void per_key_options_adjust_new_breakers(void **state)
{
    fx *f = *state;
    int calls = 0;
    resil_registry_opts o = opts(f, 8);
    o.breaker.failure_threshold = 3;
    o.opts_for = fragile_fails_fast;
    o.opts_ud = &calls;
    make(f, &o);
    fail_once(f, "fragile");
    fail_once(f, "sturdy");
    assert_int_equal(calls, 2);
    resil_breaker *fragile = get(f, "fragile"), *sturdy = get(f, "sturdy");
    assert_int_equal(calls, 2); /* options are consulted only at creation */
    assert_int_equal(resil_breaker_state_of(fragile), RESIL_BREAKER_OPEN);
    assert_int_equal(resil_breaker_state_of(sturdy), RESIL_BREAKER_CLOSED);
    resil_breaker_free(fragile);
    resil_breaker_free(sturdy);
}

static void per_key_options_may_refuse_a_key(void **state)
{
    fx *f = *state;
    int calls = 0;
    resil_registry_opts o = opts(f, 8);
    o.opts_for = fragile_fails_fast;
    o.opts_ud = &calls;
    make(f, &o);
    resil_breaker *b = (resil_breaker *)1;
    resil_err err = {0};
    assert_int_equal(resil_registry_get(f->r, "forbidden", NULL, &b, &err), RESIL_ENOTFOUND);
    assert_null(b);
    assert_string_equal(err.message, "registry: opts_for refused key 'forbidden': not found");
    assert_int_equal(resil_registry_get(f->r, "broken", NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "breaker.failure_ratio must be in (0,1], got 7");
    assert_int_equal(resil_registry_count(f->r), 0);
}

static void options_given_to_get_apply_only_at_creation(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker_opts custom = o.breaker;
    custom.failure_threshold = 2;
    custom.name = "ignored";
    resil_breaker *b;
    assert_int_equal(resil_registry_get(f->r, "db", &custom, &b, NULL), 0);
    assert_string_equal(resil_breaker_name(b), "db");
    resil_breaker_free(b);
    fail_once(f, "db");
    assert_true(held(f, "db"));
    resil_breaker *again;
    custom.failure_threshold = 1;
    assert_int_equal(resil_registry_get(f->r, "db", &custom, &again, NULL), 0);
    assert_int_equal(resil_breaker_state_of(again), RESIL_BREAKER_CLOSED); /* threshold still 2 */
    resil_breaker_free(again);
}

static void remove_forgets_the_key(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    touch(f, "a");
    touch(f, "b");
    assert_int_equal(resil_registry_remove(f->r, "a"), 0);
    assert_int_equal(resil_registry_remove(f->r, "a"), RESIL_ENOTFOUND);
    assert_false(held(f, "a"));
    assert_true(held(f, "b"));
    assert_int_equal(resil_registry_count(f->r), 1);
}

static void a_held_handle_outlives_removal(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker *b = get(f, "a");
    resil_registry_remove(f->r, "a");
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_int_equal(resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE), 0);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);
    resil_breaker_free(b);
}

static void a_held_handle_outlives_the_registry(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker *b = get(f, "a");
    resil_registry_free(f->r);
    f->r = NULL;
    assert_string_equal(resil_breaker_name(b), "a");
    resil_breaker_free(b);
}

/* ---- eviction ---------------------------------------------------------- */

static void eviction_takes_the_least_recently_used_idle_breaker(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 3);
    make(f, &o);
    touch(f, "a");
    touch(f, "b");
    touch(f, "c");
    touch(f, "a"); /* b is now the least recently used */
    touch(f, "d");
    assert_int_equal(resil_registry_count(f->r), 3);
    assert_false(held(f, "b"));
    assert_true(held(f, "a"));
    assert_true(held(f, "c"));
    assert_true(held(f, "d"));
}

static void try_get_also_counts_as_use(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 2);
    make(f, &o);
    touch(f, "a");
    touch(f, "b");
    assert_true(held(f, "a")); /* try_get of a: b becomes the LRU */
    touch(f, "c");
    assert_false(held(f, "b"));
}

static void eviction_spares_breakers_that_are_not_idle(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 3);
    o.breaker.failure_threshold = 2;
    make(f, &o);
    fail_once(f, "a");
    fail_once(f, "a"); /* open */
    fail_once(f, "b"); /* closed, but one failure in a row: not idle */
    touch(f, "c");     /* idle, and the most recently used */
    touch(f, "d");
    assert_false(held(f, "c"));
    assert_true(held(f, "a"));
    assert_true(held(f, "b"));
    assert_true(held(f, "d"));
}

static void without_idle_breakers_the_lru_of_any_state_goes(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 2);
    make(f, &o);
    fail_once(f, "a");
    fail_once(f, "b");
    fail_once(f, "a"); /* a rejected, but the lookup marks it used */
    touch(f, "c");
    assert_false(held(f, "b"));
    assert_true(held(f, "a"));
}

static void an_evicted_key_comes_back_closed(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 1);
    make(f, &o);
    fail_once(f, "a");
    resil_breaker *old = get(f, "a");
    assert_int_equal(resil_breaker_state_of(old), RESIL_BREAKER_OPEN);
    touch(f, "b"); /* evicts a */
    assert_false(held(f, "a"));
    resil_breaker *fresh = get(f, "a");
    assert_ptr_not_equal(fresh, old);
    assert_int_equal(resil_breaker_state_of(fresh), RESIL_BREAKER_CLOSED);
    /* the caller's old handle is still valid, and still open */
    assert_int_equal(resil_breaker_state_of(old), RESIL_BREAKER_OPEN);
    resil_breaker_free(old);
    resil_breaker_free(fresh);
}

/* ---- reset-all and snapshots ------------------------------------------- */

static void reset_all_resets_every_breaker(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    fail_once(f, "a");
    fail_once(f, "b");
    resil_breaker *c = get(f, "c");
    resil_breaker_isolate(c);
    resil_registry_reset_all(f->r);
    resil_registry_entry e[8];
    size_t n;
    assert_int_equal(resil_registry_snapshot(f->r, e, 8, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(e[i].state, RESIL_BREAKER_CLOSED);
    resil_breaker_free(c);
}

static void snapshot_lists_names_and_states_sorted(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    o.breaker.failure_threshold = 2;
    make(f, &o);
    touch(f, "payments");
    fail_once(f, "auth");
    fail_once(f, "cache");
    fail_once(f, "cache");
    resil_registry_entry e[8];
    size_t n = 0;
    assert_int_equal(resil_registry_snapshot(f->r, e, 8, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(e[0].name, "auth");
    assert_int_equal(e[0].state, RESIL_BREAKER_CLOSED);
    assert_int_equal(e[0].consecutive_failures, 1);
    assert_string_equal(e[1].name, "cache");
    assert_int_equal(e[1].state, RESIL_BREAKER_OPEN);
    assert_string_equal(e[2].name, "payments");
    assert_int_equal(e[2].consecutive_failures, 0);
}

static void a_short_snapshot_says_how_many_are_held(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    touch(f, "a");
    touch(f, "b");
    touch(f, "c");
    resil_registry_entry e[2];
    size_t n = 0;
    assert_int_equal(resil_registry_snapshot(f->r, e, 2, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(resil_registry_snapshot(f->r, NULL, 0, &n), 0);
    assert_int_equal(n, 3);
}

/* ---- the table under churn ---------------------------------------------- */

static void lookups_agree_with_a_model_under_random_churn(void **state)
{
    fx *f = *state;
    enum { KEYS = 300, OPS = 20000 };
    resil_registry_opts o = opts(f, 512); /* never full: no eviction */
    make(f, &o);
    bool model[KEYS] = {false};
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, 42);
    char key[32];
    size_t in = 0;
    for (int i = 0; i < OPS; i++) {
        uint64_t x = resil_rng_seeded_next_u64(&rng);
        int k = (int)(x % KEYS);
        snprintf(key, sizeof key, "key-%d", k);
        switch ((x >> 32) % 3) {
        case 0:
            touch(f, key);
            in += !model[k];
            model[k] = true;
            break;
        case 1:
            assert_int_equal(resil_registry_remove(f->r, key), model[k] ? 0 : RESIL_ENOTFOUND);
            in -= model[k];
            model[k] = false;
            break;
        default:
            assert_int_equal(held(f, key), model[k]);
        }
        assert_int_equal(resil_registry_count(f->r), in);
    }
    for (int k = 0; k < KEYS; k++) {
        snprintf(key, sizeof key, "key-%d", k);
        assert_int_equal(held(f, key), model[k]);
    }
}

/* ---- concurrency ------------------------------------------------------- */

#define THREADS 8
#define DISTINCT 10000

typedef struct race {
    resil_registry *r;
    uint32_t max;
    int index;
    _Atomic uint32_t over_cap;
    _Atomic uint32_t wrong;
} race;

typedef struct racer {
    race *race;
    int index;
} racer;

static void *create_keys(void *arg)
{
    racer *me = arg;
    race *rc = me->race;
    char key[32];
    for (int i = me->index; i < DISTINCT; i += THREADS) {
        snprintf(key, sizeof key, "tenant-%d", i);
        resil_breaker *b = NULL;
        if (resil_registry_get(rc->r, key, NULL, &b, NULL) != 0 ||
            strcmp(resil_breaker_name(b), key) != 0)
            atomic_fetch_add(&rc->wrong, 1);
        resil_breaker_free(b);
        /* a hot key every thread keeps using meanwhile */
        if (resil_registry_get(rc->r, "hot", NULL, &b, NULL) != 0)
            atomic_fetch_add(&rc->wrong, 1);
        resil_breaker_free(b);
        if (resil_registry_count(rc->r) > rc->max)
            atomic_fetch_add(&rc->over_cap, 1);
    }
    return NULL;
}

static void the_cap_holds_under_concurrent_creation(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 1024);
    make(f, &o);
    race rc = {f->r, 1024, 0, 0, 0};
    pthread_t t[THREADS];
    racer who[THREADS];
    for (int i = 0; i < THREADS; i++) {
        who[i] = (racer){&rc, i};
        assert_int_equal(pthread_create(&t[i], NULL, create_keys, &who[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&rc.wrong), 0);
    assert_int_equal(atomic_load(&rc.over_cap), 0);
    assert_int_equal(resil_registry_count(f->r), 1024);
    assert_true(held(f, "hot")); /* constantly used: never the LRU */
}

/* ---- bad input --------------------------------------------------------- */

static void bad_registry_options_are_refused_by_name(void **state)
{
    (void)state;
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    resil_registry *r = (resil_registry *)1;
    resil_err err = {0};
    o.max_breakers = 0;
    assert_int_equal(resil_registry_new(&o, &r, &err), RESIL_EINVAL);
    assert_null(r);
    assert_string_equal(err.message, "registry.max_breakers must be in [1, 1048576], got 0");
    o.max_breakers = RESIL_REGISTRY_MAX_LIMIT + 1;
    assert_int_equal(resil_registry_new(&o, &r, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "registry.max_breakers must be in [1, 1048576], got 1048577");
    o.max_breakers = 1;
    o.breaker.half_open_probes = 0;
    assert_int_equal(resil_registry_new(&o, &r, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "breaker.half_open_probes must be in [1, 65535], got 0");
    assert_int_equal(resil_registry_new(NULL, &r, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "registry options must not be NULL");
    resil_registry_opts_default(&o);
    assert_int_equal(resil_registry_new(&o, NULL, &err), RESIL_EINVAL);
}

static void bad_keys_are_refused(void **state)
{
    fx *f = *state;
    resil_registry_opts o = opts(f, 8);
    make(f, &o);
    resil_breaker *b;
    resil_err err = {0};
    assert_int_equal(resil_registry_get(f->r, NULL, NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "registry key must be a non-empty string");
    assert_int_equal(resil_registry_get(f->r, "", NULL, &b, &err), RESIL_EINVAL);
    char long_key[300];
    memset(long_key, 'k', sizeof long_key);
    long_key[256] = '\0';
    assert_int_equal(resil_registry_get(f->r, long_key, NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "registry key must be shorter than 256 bytes, got 256");
    long_key[255] = '\0';
    assert_int_equal(resil_registry_get(f->r, long_key, NULL, &b, &err), 0);
    resil_breaker_free(b);
    assert_int_equal(resil_registry_try_get(f->r, "", &b), RESIL_EINVAL);
    assert_int_equal(resil_registry_remove(f->r, NULL), RESIL_EINVAL);
    assert_int_equal(resil_registry_get(NULL, "a", NULL, &b, &err), RESIL_EINVAL);
    assert_int_equal(resil_registry_get(f->r, "a", NULL, NULL, &err), RESIL_EINVAL);
    assert_int_equal(resil_registry_try_get(NULL, "a", &b), RESIL_EINVAL);
    size_t n;
    assert_int_equal(resil_registry_snapshot(NULL, NULL, 0, &n), RESIL_EINVAL);
    assert_int_equal(resil_registry_snapshot(f->r, NULL, 1, &n), RESIL_EINVAL);
    assert_int_equal(resil_registry_snapshot(f->r, NULL, 0, NULL), RESIL_EINVAL);
    assert_int_equal(resil_registry_count(NULL), 0);
    resil_registry_reset_all(NULL);
    resil_registry_free(NULL);
}

/* ---- a factory -------------------------------------------------------- */

/* A stand-in implementation: always closed, counts its destruction. */
typedef struct stub {
    int *destroyed;
} stub;

static int stub_acquire(void *self, resil_breaker_permit *p)
{
    (void)self;
    memset(p, 0, sizeof *p);
    return 0;
}
static int stub_record(void *self, const resil_breaker_permit *p, resil_breaker_result r)
{
    (void)self, (void)p, (void)r;
    return 0;
}
static resil_breaker_state stub_state(void *self)
{
    (void)self;
    return RESIL_BREAKER_CLOSED;
}
static int stub_stats(void *self, resil_breaker_stats *out)
{
    (void)self;
    memset(out, 0, sizeof *out);
    return 0;
}
static int stub_control(void *self, resil_breaker_control op)
{
    (void)self, (void)op;
    return 0;
}
static void stub_destroy(void *self)
{
    stub *s = self;
    (*s->destroyed)++;
    free(s);
}

static const resil_breaker_ops stub_ops = {
    .size = sizeof(resil_breaker_ops), .kind = "stub",        .acquire = stub_acquire,
    .record = stub_record,             .state = stub_state,   .stats = stub_stats,
    .control = stub_control,           .destroy = stub_destroy,
};

typedef struct factory_log {
    int calls;
    int destroyed;
    uint32_t threshold; /* the rules the factory was given */
    const char *rename; /* non-NULL: name the breaker this instead */
} factory_log;

static int stub_factory(const char *key, const resil_breaker_opts *o, resil_breaker **out,
                        resil_err *err, void *ud)
{
    factory_log *log = ud;
    log->calls++;
    log->threshold = o->failure_threshold;
    stub *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->destroyed = &log->destroyed;
    int rc = resil_breaker_new_custom(&stub_ops, s, log->rename ? log->rename : key, out, err);
    if (rc != 0)
        free(s);
    return rc;
}

static void a_factory_builds_each_new_keys_breaker(void **state)
{
    fx *f = *state;
    factory_log log = {0};
    resil_registry_opts o = opts(f, 4);
    o.breaker.failure_threshold = 7;
    o.factory = stub_factory;
    o.factory_ud = &log;
    make(f, &o);
    resil_breaker *a = get(f, "a");
    resil_breaker *again = get(f, "a");
    assert_ptr_equal(a, again);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.threshold, 7);
    assert_string_equal(resil_breaker_kind_name(a), "stub");
    assert_string_equal(resil_breaker_name(a), "a");
    resil_breaker_free(a);
    resil_breaker_free(again);
    resil_registry_free(f->r);
    f->r = NULL;
    assert_int_equal(log.destroyed, 1);
}

static void a_factory_breaker_must_be_named_by_the_key(void **state)
{
    fx *f = *state;
    factory_log log = {.rename = "b"};
    resil_registry_opts o = opts(f, 4);
    o.factory = stub_factory;
    o.factory_ud = &log;
    make(f, &o);
    resil_breaker *b = NULL;
    resil_err err = {0};
    assert_int_equal(resil_registry_get(f->r, "a", NULL, &b, &err), RESIL_EINVAL);
    assert_null(b);
    assert_string_equal(err.message,
                        "registry: the factory's breaker for 'a' must be named by the key");
    assert_int_equal(log.destroyed, 1);
    assert_int_equal(resil_registry_count(f->r), 0);
}

/* A factory that refuses a key: its code and message are the registry's
 * answer, and nothing is held for the key. */
static int refusing_factory(const char *key, const resil_breaker_opts *o, resil_breaker **out,
                            resil_err *err, void *ud)
{
    (void)o, (void)out;
    int *rc = ud;
    if (*rc < 0)
        return resil_err_set(err, *rc, "fleet: no breaker for '%s'", key);
    return *rc;
}

static void a_factorys_refusal_is_the_registrys_answer(void **state)
{
    fx *f = *state;
    int rc = RESIL_EIO;
    resil_registry_opts o = opts(f, 4);
    o.factory = refusing_factory;
    o.factory_ud = &rc;
    make(f, &o);
    resil_breaker *b = NULL;
    resil_err err = {0, ""};
    assert_int_equal(resil_registry_get(f->r, "a", NULL, &b, &err), RESIL_EIO);
    assert_null(b);
    assert_string_equal(err.message, "fleet: no breaker for 'a'");
    assert_int_equal(resil_registry_count(f->r), 0);
}

/* A factory must answer 0 or a negative code: a positive one is taken as
 * a refusal, RESIL_EINVAL. */
static void a_factory_answering_a_positive_code_is_einval(void **state)
{
    fx *f = *state;
    int rc = 1;
    resil_registry_opts o = opts(f, 4);
    o.factory = refusing_factory;
    o.factory_ud = &rc;
    make(f, &o);
    resil_breaker *b = NULL;
    assert_int_equal(resil_registry_get(f->r, "a", NULL, &b, NULL), RESIL_EINVAL);
    assert_null(b);
    assert_int_equal(resil_registry_count(f->r), 0);
}

static void breakers_that_cannot_say_idle_are_evicted_last(void **state)
{
    fx *f = *state;
    factory_log log = {0};
    resil_registry_opts o = opts(f, 2);
    o.factory = stub_factory; /* stub_ops has no idle */
    o.factory_ud = &log;
    make(f, &o);
    touch(f, "a");
    touch(f, "b");
    touch(f, "c"); /* none idle: the least recently used of any goes */
    assert_false(held(f, "a"));
    assert_true(held(f, "b"));
    assert_true(held(f, "c"));
    resil_registry_free(f->r); /* its breakers write to log, on this stack */
    f->r = NULL;
    assert_int_equal(log.destroyed, 3);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(defaults_hold_1024_breakers_of_default_options),
        T(get_creates_a_closed_breaker_named_after_the_key),
        T(the_same_key_gives_the_same_breaker),
        T(try_get_never_creates),
        T(per_key_options_adjust_new_breakers),
        T(per_key_options_may_refuse_a_key),
        T(options_given_to_get_apply_only_at_creation),
        T(remove_forgets_the_key),
        T(a_held_handle_outlives_removal),
        T(a_held_handle_outlives_the_registry),
        T(eviction_takes_the_least_recently_used_idle_breaker),
        T(try_get_also_counts_as_use),
        T(eviction_spares_breakers_that_are_not_idle),
        T(without_idle_breakers_the_lru_of_any_state_goes),
        T(an_evicted_key_comes_back_closed),
        T(reset_all_resets_every_breaker),
        T(snapshot_lists_names_and_states_sorted),
        T(a_short_snapshot_says_how_many_are_held),
        T(lookups_agree_with_a_model_under_random_churn),
        T(the_cap_holds_under_concurrent_creation),
        T(bad_registry_options_are_refused_by_name),
        T(bad_keys_are_refused),
        T(a_factory_builds_each_new_keys_breaker),
        T(a_factory_breaker_must_be_named_by_the_key),
        T(a_factorys_refusal_is_the_registrys_answer),
        T(a_factory_answering_a_positive_code_is_einval),
        T(breakers_that_cannot_say_idle_are_evicted_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
