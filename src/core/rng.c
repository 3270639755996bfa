/*
 * rng.c — the random sources behind the resil_rng vtable.
 *
 * The default source is one xoshiro256** per thread, seeded from the OS on
 * first use: no lock on the jitter path, and no two processes (or threads)
 * drawing the same sequence, which is the whole point of jitter. A fork
 * copies the forking thread's generator into the child, so a pthread_atfork
 * child handler reseeds it there: the hot path pays nothing (no getpid()
 * per draw, a system call since glibc 2.25), and the only thread a child
 * has is the one that forked. vfork and posix_spawn children run no
 * handlers and need none: they may only exec or exit. The named
 * reference generators reproduce published outputs bit for bit, so they
 * follow their originals' integer arithmetic exactly (mulberry32's 32-bit
 * wrap-around, .NET's subtractive generator with its quirks) rather than
 * anything tidier.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "resil/rng.h"

/* ---- xoshiro256** seeded by splitmix64 --------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t resil_rng_seeded_next_u64(resil_rng_seeded *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* The top 53 bits, scaled: every double in [0,1) on a 2^-53 grid. */
static double seeded_next_double(resil_rng *self)
{
    uint64_t x = resil_rng_seeded_next_u64((resil_rng_seeded *)self);
    return (double)(x >> 11) * 0x1.0p-53;
}

void resil_rng_seeded_init(resil_rng_seeded *r, uint64_t seed)
{
    r->base.next_double = seeded_next_double;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

/* ---- the per-thread default -------------------------------------------- */

static _Thread_local resil_rng_seeded thread_rng;
static _Thread_local bool thread_rng_ready;

static uint64_t os_seed(void)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (tid << 32) ^
           (uint64_t)(uintptr_t)&thread_rng;
}

/* In the child, on the thread that forked (the child's only thread). It
 * reseeds in place rather than marking the state stale, so that a pointer
 * taken from resil_rng_thread() before the fork draws fresh values too.
 * getrandom() and the fallback's clock_gettime() are async-signal-safe. */
static void reseed_in_child(void)
{
    if (thread_rng_ready)
        resil_rng_seeded_init(&thread_rng, os_seed());
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, reseed_in_child); }

resil_rng *resil_rng_thread(void)
{
    if (!thread_rng_ready) {
        /* Before the first draw of any thread: a fork after it reseeds. */
        pthread_once(&fork_handler_once, install_fork_handler);
        resil_rng_seeded_init(&thread_rng, os_seed());
        thread_rng_ready = true;
    }
    return &thread_rng.base;
}

/* ---- mulberry32 -------------------------------------------------------- */

static double mulberry32_next_double(resil_rng *self)
{
    resil_rng_mulberry32 *r = (resil_rng_mulberry32 *)self;
    r->state += UINT32_C(0x6D2B79F5);
    uint32_t t = r->state;
    t = (t ^ (t >> 15)) * (t | 1u);
    t ^= t + (t ^ (t >> 7)) * (t | 61u);
    return (double)(t ^ (t >> 14)) / 4294967296.0;
}

void resil_rng_mulberry32_init(resil_rng_mulberry32 *r, uint32_t seed)
{
    r->base.next_double = mulberry32_next_double;
    r->state = seed;
}

/* ---- .NET System.Random(seed) ------------------------------------------ */

#define DOTNET_MBIG INT32_MAX
#define DOTNET_MSEED 161803398

/* InternalSample(): the two taps move through slots 1..55, 21 apart. */
int32_t resil_rng_dotnet_next_int(resil_rng_dotnet *r)
{
    int inext = r->inext + 1 >= 56 ? 1 : r->inext + 1;
    int inextp = r->inextp + 1 >= 56 ? 1 : r->inextp + 1;
    int64_t v = (int64_t)r->seed_array[inext] - r->seed_array[inextp];
    if (v == DOTNET_MBIG)
        v--;
    if (v < 0)
        v += DOTNET_MBIG;
    r->seed_array[inext] = (int32_t)v;
    r->inext = inext;
    r->inextp = inextp;
    return (int32_t)v;
}

/* NextDouble() is Sample(): InternalSample() * (1.0 / int.MaxValue). */
static double dotnet_next_double(resil_rng *self)
{
    return resil_rng_dotnet_next_int((resil_rng_dotnet *)self) * (1.0 / DOTNET_MBIG);
}

/* Knuth's subtractive generator as .NET seeds it (the legacy algorithm that
 * `new Random(seed)` keeps for compatibility). Every intermediate fits in
 * int32; int64 is used so that no step can be suspected of overflowing. */
void resil_rng_dotnet_init(resil_rng_dotnet *r, int32_t seed)
{
    int32_t *a = r->seed_array;
    int64_t subtraction = seed == INT32_MIN ? DOTNET_MBIG : (seed < 0 ? -(int64_t)seed : seed);
    int64_t mj = DOTNET_MSEED - subtraction;
    int64_t mk = 1;
    int ii = 0;

    r->base.next_double = dotnet_next_double;
    a[0] = 0;
    a[55] = (int32_t)mj;
    for (int i = 1; i < 55; i++) {
        ii += 21;
        if (ii >= 55)
            ii -= 55;
        a[ii] = (int32_t)mk;
        mk = mj - mk;
        if (mk < 0)
            mk += DOTNET_MBIG;
        mj = a[ii];
    }
    for (int k = 1; k < 5; k++) {
        for (int i = 1; i < 56; i++) {
            int n = i + 30;
            if (n >= 55)
                n -= 55;
            int64_t v = (int64_t)a[i] - a[1 + n];
            if (v < 0)
                v += DOTNET_MBIG;
            a[i] = (int32_t)v;
        }
    }
    r->inext = 0;
    r->inextp = 21;
}

/* ---- scripted ---------------------------------------------------------- */

static double scripted_next_double(resil_rng *self)
{
    resil_rng_scripted *r = (resil_rng_scripted *)self;
    if (r->n == 0)
        return 0.0;
    double v = r->values[r->i];
    if (r->i + 1 < r->n)
        r->i++;
    return v;
}

void resil_rng_scripted_init(resil_rng_scripted *r, const double *values, size_t n)
{
    r->base.next_double = scripted_next_double;
    r->values = values;
    r->n = values == NULL ? 0 : n;
    r->i = 0;
}

uint64_t resil__os_seed(void)
{
    uint64_t seed = os_seed();
    return seed != 0 ? seed : 1;
}
