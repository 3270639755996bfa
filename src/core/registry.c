/*
 * registry.c — the bounded map from keys to breakers (see registry.h).
 *
 * Lookups dominate and must neither allocate nor serialise, so the map is a
 * fixed open-addressing table (linear probing, at most half full) behind a
 * read-write lock: a hit is a read lock, one hash, a probe or two and two
 * atomic increments (the breaker's reference count and the recency stamp).
 * Recency is a registry-wide tick copied into the entry with a relaxed
 * store; it is only ever compared at eviction time, under the write lock.
 *
 * Entries live in a pool whose indices never move while an entry is alive;
 * the table holds indices into it. Removing from a linear-probing table
 * shifts later table slots back (no tombstones), but the pool stays put, so
 * reset-all and snapshots can walk it by index without holding the lock
 * across user code, and the eviction scan walks a dense array.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "breaker_internal.h"
#include "resil/registry.h"

typedef struct entry {
    resil_breaker *b; /* NULL = free; the key is resil_breaker_name(b) */
    uint64_t hash;
    size_t key_len;
    _Atomic uint64_t used; /* recency stamp */
} entry;

typedef struct table_slot {
    uint32_t entry; /* pool index + 1; 0 = empty */
    uint32_t hash32;
} table_slot;

struct resil_registry {
    pthread_rwlock_t lock;
    _Atomic uint64_t tick;
    table_slot *table;
    size_t mask;
    entry *pool;
    uint32_t *free_list; /* pool indices not in use */
    uint32_t free_len;
    uint32_t max;
    resil_breaker_opts defaults;
    resil_registry_opts_fn opts_for;
    void *opts_ud;
    resil_registry_factory_fn factory;
    void *factory_ud;
};

void resil_registry_opts_default(resil_registry_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_breakers = 1024;
    resil_breaker_opts_default(&o->breaker);
}

/* ---- hashing ----------------------------------------------------------- */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

/* Eight bytes at a time: keys are short, and lookups are mostly hashing. */
static uint64_t hash_key(const char *key, size_t len)
{
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, key + i, 8);
        h = (h ^ w) * UINT64_C(0x100000001b3);
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    memcpy(&tail, key + i, len - i);
    return mix(h ^ tail);
}

/* ---- the table (callers hold the lock) --------------------------------- */

static bool entry_is(const resil_registry *r, uint32_t idx, const char *key,
                     size_t len, uint64_t hash)
{
    const entry *e = &r->pool[idx];
    return e->hash == hash && e->key_len == len &&
           memcmp(resil_breaker_name(e->b), key, len) == 0;
}

/* The table position holding `key`, or of the empty slot ending its probe
 * sequence (*found false). */
static size_t probe(const resil_registry *r, const char *key, size_t len,
                    uint64_t hash, bool *found)
{
    size_t i = (size_t)hash & r->mask;
    for (;;) {
        const table_slot *s = &r->table[i];
        if (s->entry == 0) {
            *found = false;
            return i;
        }
        if (s->hash32 == (uint32_t)hash && entry_is(r, s->entry - 1, key, len, hash)) {
            *found = true;
            return i;
        }
        i = (i + 1) & r->mask;
    }
}

/* Is `home` cyclically within (gap, j]? Then slot j may not move to gap. */
static bool stays(size_t home, size_t gap, size_t j)
{
    return gap <= j ? (gap < home && home <= j) : (gap < home || home <= j);
}

/* Empty table position i, shifting later members of the run back. */
static void table_delete(resil_registry *r, size_t i)
{
    size_t j = i;
    for (;;) {
        r->table[i].entry = 0;
        for (;;) {
            j = (j + 1) & r->mask;
            if (r->table[j].entry == 0)
                return;
            size_t home = (size_t)r->pool[r->table[j].entry - 1].hash & r->mask;
            if (!stays(home, i, j))
                break;
        }
        r->table[i] = r->table[j];
        i = j;
    }
}

static void touch(resil_registry *r, entry *e)
{
    uint64_t t = atomic_fetch_add_explicit(&r->tick, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&e->used, t, memory_order_relaxed);
}

/* Unlink the entry at table position i; returns its breaker reference. */
static resil_breaker *unlink_at(resil_registry *r, size_t i)
{
    uint32_t idx = r->table[i].entry - 1;
    resil_breaker *b = r->pool[idx].b;
    r->pool[idx].b = NULL;
    table_delete(r, i);
    r->free_list[r->free_len++] = idx;
    return b;
}

/* The pool index to evict: the LRU idle entry, else the LRU of all. */
static uint32_t eviction_victim(resil_registry *r)
{
    uint32_t idle = UINT32_MAX, any = UINT32_MAX;
    uint64_t idle_used = UINT64_MAX, any_used = UINT64_MAX;
    for (uint32_t i = 0; i < r->max; i++) {
        entry *e = &r->pool[i];
        if (e->b == NULL)
            continue;
        uint64_t used = atomic_load_explicit(&e->used, memory_order_relaxed);
        if (used < any_used) {
            any_used = used;
            any = i;
        }
        if (used < idle_used && resil__breaker_idle(e->b)) {
            idle_used = used;
            idle = i;
        }
    }
    return idle != UINT32_MAX ? idle : any;
}

static resil_breaker *evict_one(resil_registry *r)
{
    entry *e = &r->pool[eviction_victim(r)];
    bool found;
    size_t at = probe(r, resil_breaker_name(e->b), e->key_len, e->hash, &found);
    return unlink_at(r, at);
}

/* ---- life -------------------------------------------------------------- */

static int check_opts(const resil_registry_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "registry options must not be NULL");
    if (o->max_breakers < 1 || o->max_breakers > RESIL_REGISTRY_MAX_LIMIT)
        return resil_err_set(err, RESIL_EINVAL,
                             "registry.max_breakers must be in [1, %u], got %u",
                             RESIL_REGISTRY_MAX_LIMIT, o->max_breakers);
    resil_breaker_opts defaults = o->breaker;
    defaults.name = NULL;
    return resil_breaker_opts_validate(&defaults, err);
}

static size_t table_size_for(uint32_t max)
{
    size_t n = 2;
    while (n < (size_t)max * 2)
        n *= 2;
    return n;
}

static int init_lock(resil_registry *r)
{
    pthread_rwlockattr_t attr;
    if (pthread_rwlockattr_init(&attr) != 0)
        return RESIL_ESYS;
#ifdef __GLIBC__
    /* Readers never starve creation: a steady stream of lookups must not
     * keep the write lock away forever. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    int rc = pthread_rwlock_init(&r->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return rc == 0 ? 0 : RESIL_ESYS;
}

int resil_registry_new(const resil_registry_opts *o, resil_registry **out,
                       resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "registry: out must not be NULL");
    *out = NULL;
    int rc = check_opts(o, err);
    if (rc != 0)
        return rc;
    resil_registry *r = calloc(1, sizeof *r);
    size_t slots = table_size_for(o->max_breakers);
    if (r == NULL || (r->table = calloc(slots, sizeof *r->table)) == NULL ||
        (r->pool = calloc(o->max_breakers, sizeof *r->pool)) == NULL ||
        (r->free_list = calloc(o->max_breakers, sizeof *r->free_list)) == NULL) {
        resil_registry_free(r);
        return resil_err_set(err, RESIL_ENOMEM, "registry: out of memory");
    }
    if (init_lock(r) != 0) {
        free(r->free_list);
        free(r->pool);
        free(r->table);
        free(r);
        return resil_err_set(err, RESIL_ESYS, "registry: pthread_rwlock_init failed");
    }
    r->mask = slots - 1;
    r->max = o->max_breakers;
    for (uint32_t i = 0; i < r->max; i++)
        r->free_list[i] = r->max - 1 - i; /* hand out index 0 first */
    r->free_len = r->max;
    r->defaults = o->breaker;
    r->defaults.name = NULL;
    r->opts_for = o->opts_for;
    r->opts_ud = o->opts_ud;
    r->factory = o->factory;
    r->factory_ud = o->factory_ud;
    *out = r;
    return 0;
}

void resil_registry_free(resil_registry *r)
{
    if (r == NULL)
        return;
    if (r->pool != NULL && r->table != NULL && r->free_list != NULL) {
        for (uint32_t i = 0; i < r->max; i++)
            resil_breaker_free(r->pool[i].b);
        pthread_rwlock_destroy(&r->lock);
    }
    free(r->free_list);
    free(r->pool);
    free(r->table);
    free(r);
}

/* ---- lookups ----------------------------------------------------------- */

static int check_key(const char *key, size_t *len, resil_err *err)
{
    if (key == NULL || key[0] == '\0')
        return resil_err_set(err, RESIL_EINVAL, "registry key must be a non-empty string");
    *len = strlen(key);
    if (*len >= RESIL_BREAKER_NAME_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "registry key must be shorter than %d bytes, got %zu",
                             RESIL_BREAKER_NAME_MAX, *len);
    return 0;
}

/* The held breaker for key, as a new reference, or NULL. */
static resil_breaker *lookup(resil_registry *r, const char *key, size_t len,
                             uint64_t hash)
{
    resil_breaker *b = NULL;
    pthread_rwlock_rdlock(&r->lock);
    bool found;
    size_t at = probe(r, key, len, hash, &found);
    if (found) {
        entry *e = &r->pool[r->table[at].entry - 1];
        b = resil_breaker_retain(e->b);
        touch(r, e);
    }
    pthread_rwlock_unlock(&r->lock);
    return b;
}

int resil_registry_try_get(resil_registry *r, const char *key, resil_breaker **out)
{
    size_t len = 0;
    if (out != NULL)
        *out = NULL;
    if (r == NULL || out == NULL || check_key(key, &len, NULL) != 0)
        return RESIL_EINVAL;
    *out = lookup(r, key, len, hash_key(key, len));
    return *out != NULL ? 0 : RESIL_ENOTFOUND;
}

/* The table is keyed by the breaker's name, so a factory's must be the key. */
static int from_factory(resil_registry *r, const char *key, const resil_breaker_opts *o,
                        resil_breaker **out, resil_err *err)
{
    *out = NULL;
    int rc = r->factory(key, o, out, err, r->factory_ud);
    if (rc != 0)
        return rc < 0 ? rc : RESIL_EINVAL;
    if (*out != NULL && strcmp(resil_breaker_name(*out), key) == 0)
        return 0;
    resil_breaker_free(*out);
    *out = NULL;
    return resil_err_set(err, RESIL_EINVAL,
                         "registry: the factory's breaker for '%s' must be named by the key",
                         key);
}

/* Build the breaker for a new key, outside every lock (it allocates and
 * runs the caller's callback). */
static int create(resil_registry *r, const char *key, const resil_breaker_opts *given,
                  resil_breaker **out, resil_err *err)
{
    resil_breaker_opts o = given != NULL ? *given : r->defaults;
    o.name = key;
    if (given == NULL && r->opts_for != NULL) {
        int rc = r->opts_for(key, &o, r->opts_ud);
        if (rc != 0)
            return resil_err_set(err, rc, "registry: opts_for refused key '%s': %s", key,
                                 resil_strerror(rc));
        o.name = key;
    }
    if (r->factory == NULL)
        return resil_breaker_new(&o, out, err);
    return from_factory(r, key, &o, out, err);
}

/* Insert `fresh` for key unless another thread got there first; returns a
 * reference to whichever breaker the key now has. Sets *evicted to the
 * reference the registry dropped to make room, if any. */
static resil_breaker *insert(resil_registry *r, resil_breaker *fresh, size_t len,
                             uint64_t hash, resil_breaker **evicted)
{
    const char *key = resil_breaker_name(fresh);
    bool found;
    size_t at = probe(r, key, len, hash, &found);
    if (found) {
        entry *e = &r->pool[r->table[at].entry - 1];
        touch(r, e);
        *evicted = fresh; /* ours lost the race: drop it */
        return resil_breaker_retain(e->b);
    }
    *evicted = NULL;
    if (r->free_len == 0) {
        *evicted = evict_one(r);
        at = probe(r, key, len, hash, &found);
    }
    uint32_t idx = r->free_list[--r->free_len];
    entry *e = &r->pool[idx];
    e->b = fresh;
    e->hash = hash;
    e->key_len = len;
    touch(r, e);
    r->table[at].entry = idx + 1;
    r->table[at].hash32 = (uint32_t)hash;
    return resil_breaker_retain(fresh);
}

int resil_registry_get(resil_registry *r, const char *key, const resil_breaker_opts *o,
                       resil_breaker **out, resil_err *err)
{
    size_t len = 0;
    if (r == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "registry: NULL registry or out");
    *out = NULL;
    int rc = check_key(key, &len, err);
    if (rc != 0)
        return rc;
    uint64_t hash = hash_key(key, len);
    if ((*out = lookup(r, key, len, hash)) != NULL)
        return 0;
    resil_breaker *fresh;
    if ((rc = create(r, key, o, &fresh, err)) != 0)
        return rc;
    resil_breaker *dropped;
    pthread_rwlock_wrlock(&r->lock);
    *out = insert(r, fresh, len, hash, &dropped);
    pthread_rwlock_unlock(&r->lock);
    resil_breaker_free(dropped);
    return 0;
}

int resil_registry_remove(resil_registry *r, const char *key)
{
    size_t len = 0;
    if (r == NULL || check_key(key, &len, NULL) != 0)
        return RESIL_EINVAL;
    uint64_t hash = hash_key(key, len);
    resil_breaker *dropped = NULL;
    pthread_rwlock_wrlock(&r->lock);
    bool found;
    size_t at = probe(r, key, len, hash, &found);
    if (found)
        dropped = unlink_at(r, at);
    pthread_rwlock_unlock(&r->lock);
    resil_breaker_free(dropped);
    return found ? 0 : RESIL_ENOTFOUND;
}

size_t resil_registry_count(resil_registry *r)
{
    if (r == NULL)
        return 0;
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->max - r->free_len;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

/* ---- walking ----------------------------------------------------------- */

/* A reference to the breaker at pool index i, or NULL; the lock is held
 * only for the grab, so that resetting (which calls listeners) runs
 * outside it. */
static resil_breaker *grab(resil_registry *r, uint32_t i)
{
    pthread_rwlock_rdlock(&r->lock);
    resil_breaker *b = resil_breaker_retain(r->pool[i].b);
    pthread_rwlock_unlock(&r->lock);
    return b;
}

void resil_registry_reset_all(resil_registry *r)
{
    if (r == NULL)
        return;
    for (uint32_t i = 0; i < r->max; i++) {
        resil_breaker *b = grab(r, i);
        if (b == NULL)
            continue;
        resil_breaker_reset(b);
        resil_breaker_free(b);
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const resil_registry_entry *)a)->name,
                  ((const resil_registry_entry *)b)->name);
}

static void describe(const resil_breaker *b, resil_registry_entry *out)
{
    const char *name = resil_breaker_name(b);
    memcpy(out->name, name, strlen(name) + 1);
    out->state = resil_breaker_state_of(b);
    resil_breaker_stats st;
    resil_breaker_stats_get((resil_breaker *)b, &st);
    out->consecutive_failures = st.consecutive_failures;
}

int resil_registry_snapshot(resil_registry *r, resil_registry_entry *out, size_t cap,
                            size_t *len)
{
    if (r == NULL || len == NULL || (out == NULL && cap > 0))
        return RESIL_EINVAL;
    size_t n = 0, written = 0;
    pthread_rwlock_rdlock(&r->lock);
    for (uint32_t i = 0; i < r->max; i++) {
        const resil_breaker *b = r->pool[i].b;
        if (b == NULL)
            continue;
        if (written < cap)
            describe(b, &out[written++]);
        n++;
    }
    pthread_rwlock_unlock(&r->lock);
    if (written > 1)
        qsort(out, written, sizeof *out, by_name);
    *len = n;
    return 0;
}
