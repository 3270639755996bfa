/*
 * registry.h — keyed circuit breakers, created on first use and bounded.
 *
 * A client talking to many dependencies (one breaker per host, per route,
 * per tenant tier) asks the registry for the key's breaker; the first ask
 * creates it with the registry's default options, or with options a
 * per-key callback adjusts. The registry holds at most `max_breakers`
 * (default 1024); when full, it makes room by evicting the least recently
 * used *idle* breaker (closed, no consecutive failures), and only when none
 * is idle the least recently used of any state. A key whose breaker was
 * evicted gets a fresh, closed one next time: its history is lost, which is
 * why keys should come from a bounded set (hosts, route families), never
 * from identities.
 *
 * Handles are counted references: resil_registry_get() and try_get() hand
 * out a reference the caller drops with resil_breaker_free(), so a breaker
 * stays valid in the caller's hands even if the registry evicts or removes
 * it meanwhile. Lookups of an existing key take only a shared (read) lock,
 * never allocate, and mark recency with one atomic stamp; creation,
 * removal and eviction take the write lock.
 *
 * A registry holds any kind of breaker: by default it builds built-in
 * ones, and a `factory` builds each key's breaker instead — a fleet
 * breaker on Redis per key, say (redis.h, resil_redis_breaker_factory).
 * The options (defaults, opts_for, the `o` given to get) reach the factory
 * as the rules for the key.
 */
#ifndef RESIL_REGISTRY_H
#define RESIL_REGISTRY_H

#include "breaker.h"

RESIL_BEGIN_DECLS

typedef struct resil_registry resil_registry;

#define RESIL_REGISTRY_MAX_LIMIT (UINT32_C(1) << 20)

/*
 * Adjust the options of a breaker about to be created for `key`. `o` holds
 * the registry's defaults (its name is the key and must stay so). Return 0,
 * or a negative RESIL_E* code to refuse to create a breaker for the key.
 */
typedef int (*resil_registry_opts_fn)(const char *key, resil_breaker_opts *o,
                                      void *ud);

/*
 * A resil_breaker_factory_fn (breaker.h) building the breaker for a key,
 * named by the key. Called outside the registry's locks; two threads asking
 * for a new key at once may both call it, and the loser's breaker is freed.
 */
typedef resil_breaker_factory_fn resil_registry_factory_fn;

typedef struct resil_registry_opts {
    uint32_t max_breakers;       /* default 1024; in [1, RESIL_REGISTRY_MAX_LIMIT] */
    resil_breaker_opts breaker;  /* defaults for new breakers (name ignored) */
    resil_registry_opts_fn opts_for; /* optional per-key adjustment */
    void *opts_ud;
    resil_registry_factory_fn factory; /* optional; NULL = resil_breaker_new() */
    void *factory_ud;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_registry_opts;

RESIL_API void resil_registry_opts_default(resil_registry_opts *o);
/* RESIL_EINVAL naming the field ("registry.max_breakers ..." or
 * "breaker.<field> ..." for the default breaker options), RESIL_ENOMEM. */
RESIL_API int resil_registry_new(const resil_registry_opts *o, resil_registry **out,
                                 resil_err *err);
/* Drops the registry's references; breakers callers still hold live on. */
RESIL_API void resil_registry_free(resil_registry *r);

/*
 * Get the key's breaker, creating it if absent: with `o` when given (its
 * name is replaced by the key), else the defaults adjusted by opts_for.
 * Options are used only at creation. *out receives a reference: drop it
 * with resil_breaker_free(). Errors: RESIL_EINVAL (NULL argument, empty
 * key, key of RESIL_BREAKER_NAME_MAX bytes or more, bad options — err says
 * which), RESIL_ENOMEM, or the code opts_for returned.
 */
RESIL_API int resil_registry_get(resil_registry *r, const char *key,
                                 const resil_breaker_opts *o, resil_breaker **out,
                                 resil_err *err);
/* The key's breaker if held (a reference, as above), else RESIL_ENOTFOUND
 * and *out = NULL. Never creates. */
RESIL_API int resil_registry_try_get(resil_registry *r, const char *key,
                                     resil_breaker **out);
/* Forget the key: 0, or RESIL_ENOTFOUND. */
RESIL_API int resil_registry_remove(resil_registry *r, const char *key);
/* resil_breaker_reset() every breaker held. Breakers created, removed or
 * evicted while it runs may or may not be reset. */
RESIL_API void resil_registry_reset_all(resil_registry *r);
/* How many keys are held (never more than max_breakers). */
RESIL_API size_t resil_registry_count(resil_registry *r);

typedef struct resil_registry_entry {
    char name[RESIL_BREAKER_NAME_MAX];
    resil_breaker_state state;
    uint32_t consecutive_failures;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_registry_entry;

/*
 * The names and states of every key held, sorted by name: up to `cap`
 * entries are written to `out`, and *len is set to the number held. When
 * *len > cap the written subset is arbitrary (call again with more room).
 * RESIL_EINVAL for a NULL registry or len, or a NULL out with cap > 0.
 */
RESIL_API int resil_registry_snapshot(resil_registry *r, resil_registry_entry *out,
                                      size_t cap, size_t *len);

RESIL_END_DECLS

#endif
