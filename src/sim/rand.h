/*
 * rand.h — the draws the models need (uniform, exponential, |normal|), all
 * from one seeded resil_rng_seeded per run, so that a seed names a run.
 *
 * Runs are seeded from (seed, run number) only, never from the policy: run
 * k of every policy sees the same arrival times and network delays (common
 * random numbers), so differences between policies come from the policies
 * and not from luck. Jitter draws come from the same stream, in order.
 */
#ifndef RESIL_SIM_RAND_H
#define RESIL_SIM_RAND_H

#include <math.h>

#include "resil.h"

typedef struct resil__sim_rand {
    resil_rng_seeded rng;
    double spare; /* the second value of the last Box-Muller pair */
    bool has_spare;
} resil__sim_rand;

static inline uint64_t resil__sim_splitmix(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static inline void resil__sim_rand_init(resil__sim_rand *r, uint64_t seed,
                                        uint64_t run)
{
    resil_rng_seeded_init(&r->rng, resil__sim_splitmix(seed ^ resil__sim_splitmix(run)));
    r->has_spare = false;
    r->spare = 0;
}

static inline resil_rng *resil__sim_rng(resil__sim_rand *r)
{
    return &r->rng.base;
}

/* U[0, 1) with 53 random bits. */
static inline double resil__sim_uniform(resil__sim_rand *r)
{
    return (double)(resil_rng_seeded_next_u64(&r->rng) >> 11) * 0x1.0p-53;
}

/* Standard normal, Marsaglia's polar method (two values per accepted pair). */
static inline double resil__sim_std_normal(resil__sim_rand *r)
{
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * resil__sim_uniform(r) - 1.0;
        v = 2.0 * resil__sim_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    r->spare = v * f;
    r->has_spare = true;
    return u * f;
}

/* A non-negative count of nanoseconds as a duration, saturating. */
static inline resil_duration resil__sim_ns(double ns)
{
    if (!(ns > 0))
        return 0;
    if (ns >= 9.2e18)
        return RESIL_DURATION_MAX;
    return (resil_duration)ns;
}

/* |Normal(mean, sd)| as a duration. */
static inline resil_duration resil__sim_abs_normal(resil__sim_rand *r,
                                                   resil_duration mean,
                                                   resil_duration sd)
{
    double x = (double)mean + (double)sd * resil__sim_std_normal(r);
    return resil__sim_ns(fabs(x));
}

/* Exponential with the given mean (Poisson arrivals). */
static inline resil_duration resil__sim_exponential(resil__sim_rand *r,
                                                    resil_duration mean)
{
    double u = resil__sim_uniform(r);
    return resil__sim_ns(-log1p(-u) * (double)mean);
}

#endif
