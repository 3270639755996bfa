/*
 * rng.h — random sources for jitter.
 *
 * Jitter exists so that clients do not retry in lock-step; a generator that
 * two processes seed alike defeats it. So the default source is per thread
 * and seeded from the OS (getrandom), reseeded in a forked child, and
 * nothing in resil shares one generator state between threads. Tests and demos pass a seeded source
 * instead; the named reference generators (mulberry32, .NET's seeded
 * System.Random) exist so that `resil demo` reproduces published outputs
 * exactly, not for production use.
 *
 * A source is a one-function vtable returning U[0,1). The concrete sources
 * are plain structs so they can live on the stack or inside another object.
 */
#ifndef RESIL_RNG_H
#define RESIL_RNG_H

#include "common.h"

RESIL_BEGIN_DECLS

typedef struct resil_rng resil_rng;
struct resil_rng {
    double (*next_double)(resil_rng *self); /* uniform on [0, 1) */
};

static inline double resil_rng_next(resil_rng *r) { return r->next_double(r); }

/* The calling thread's own generator, seeded from the OS on first use.
 * Never NULL; must not be handed to another thread. After fork() the child
 * reseeds it from the OS (a pthread_atfork handler, nothing on the draw
 * path), so forked workers never repeat each other's or the parent's waits,
 * even through a pointer taken before the fork. A child made without the
 * fork handlers (vfork, posix_spawn, a raw clone) must exec or exit before
 * drawing. */
RESIL_API resil_rng *resil_rng_thread(void);

/* A fast seeded generator (xoshiro256**, state expanded by splitmix64). */
typedef struct resil_rng_seeded {
    resil_rng base;
    uint64_t s[4]; /* private */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_rng_seeded;
RESIL_API void resil_rng_seeded_init(resil_rng_seeded *r, uint64_t seed);
RESIL_API uint64_t resil_rng_seeded_next_u64(resil_rng_seeded *r);

/* mulberry32, as the Retry Pattern article's TypeScript example uses it:
 * next = ((t ^ t >>> 14) >>> 0) / 4294967296. */
typedef struct resil_rng_mulberry32 {
    resil_rng base;
    uint32_t state; /* private */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_rng_mulberry32;
RESIL_API void resil_rng_mulberry32_init(resil_rng_mulberry32 *r, uint32_t seed);

/* .NET's seeded System.Random (the Knuth subtractive generator behind
 * `new Random(seed)`), NextDouble(). */
typedef struct resil_rng_dotnet {
    resil_rng base;
    int32_t seed_array[56]; /* private */
    int inext, inextp;
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_rng_dotnet;
RESIL_API void resil_rng_dotnet_init(resil_rng_dotnet *r, int32_t seed);
/* Random.Next(): a non-negative int below INT32_MAX. */
RESIL_API int32_t resil_rng_dotnet_next_int(resil_rng_dotnet *r);

/* Scripted: returns values[0], values[1], … then repeats the last one
 * (0.0 when n == 0). For exact-value tests of jitter formulas. */
typedef struct resil_rng_scripted {
    resil_rng base;
    const double *values; /* private */
    size_t n, i;
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_rng_scripted;
RESIL_API void resil_rng_scripted_init(resil_rng_scripted *r,
                                       const double *values, size_t n);

RESIL_END_DECLS

#endif
