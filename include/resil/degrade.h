/*
 * degrade.h — graceful degradation: shed low-priority work as health drops.
 *
 * A monitor holds an ordered list of levels above "Normal" (level 0). Each
 * level has a priority threshold and three health thresholds: error rate,
 * CPU and memory, all in percent. The defaults are those of Excalibur's
 * Polly resilience package:
 *
 *   level      priority  error rate  CPU   memory
 *   Minor         10        1 %      60 %   60 %
 *   Moderate      30        5 %      70 %   70 %
 *   Major         50       10 %      80 %   80 %
 *   Severe        70       25 %      90 %   90 %
 *   Emergency    100       50 %      95 %   95 %
 *
 * Direction, precisely: a higher priority number is more important. At
 * level L, resil_degrade_admit(priority) admits when priority >= L's
 * priority threshold and rejects (RESIL_EREJECTED) when it is below; Normal
 * admits everything. So at Major (50) a priority-50 call runs, a 49 does not.
 *
 * Evaluation picks the highest level for which ANY signal reaches its
 * threshold (reading >= threshold), or Normal when none does:
 *  - the error rate is failures / calls over a sliding window
 *    (`error_window`, divided into `error_buckets` buckets that age out one
 *    at a time), fed by resil_degrade_record(); below `min_throughput` calls
 *    in the window it is not a signal (one failure out of one call is not an
 *    emergency);
 *  - CPU and memory come from a sampler: by default /proc/stat (busy share
 *    since the previous sample) and /proc/meminfo (1 − MemAvailable /
 *    MemTotal); a test or another platform injects its own. An unknown
 *    reading (NaN) is not a signal.
 * The level moves (up or down, straight to the target) only after it has
 * been held `min_level_duration`; the first move after start-up is free.
 *
 * Nothing runs in the background. Evaluation is lazy — the first admit or
 * record after `check_interval` has passed evaluates, on the caller's
 * thread (the one call that does also reads the sampler) — or explicit
 * through resil_degrade_tick(). With `auto_adjust` off the level only moves
 * by resil_degrade_set_level(). Level-change events are delivered outside
 * every lock, in order, one delivery at a time; changes that happen while a
 * listener runs are coalesced, so a listener always sees a chain
 * from → to that ends at the current level.
 */
#ifndef RESIL_DEGRADE_H
#define RESIL_DEGRADE_H

#include "time.h"

RESIL_BEGIN_DECLS

typedef struct resil_degrade resil_degrade;

#define RESIL_DEGRADE_MAX_LEVELS 8 /* besides Normal */
#define RESIL_DEGRADE_NAME_MAX 32  /* including the NUL */

typedef struct resil_degrade_level_opts {
    const char *name;           /* copied at construction; 1..31 characters */
    int32_t priority_threshold; /* strictly increasing with the level */
    double error_rate;          /* percent in [0,100]; never below the level before */
    double cpu;                 /* percent in [0,100]; never below the level before */
    double memory;              /* percent in [0,100]; never below the level before */
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_degrade_level_opts;

/* One health reading; NaN means "unknown" and is ignored. */
typedef struct resil_health_sample {
    double cpu;    /* percent of CPU time busy */
    double memory; /* percent of memory in use */
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_health_sample;

/* Fill *out; a non-zero return makes both readings unknown. Called from
 * one evaluation at a time. */
typedef int (*resil_health_sampler)(void *ud, resil_health_sample *out);

typedef enum resil_degrade_cause {
    RESIL_DEGRADE_CAUSE_ERROR_RATE = 0, /* moved up: error rate */
    RESIL_DEGRADE_CAUSE_CPU,            /* moved up: CPU */
    RESIL_DEGRADE_CAUSE_MEMORY,         /* moved up: memory */
    RESIL_DEGRADE_CAUSE_RECOVERY,       /* moved down: signals fell */
    RESIL_DEGRADE_CAUSE_MANUAL          /* resil_degrade_set_level() */
} resil_degrade_cause;

typedef struct resil_degrade_event {
    int from, to;                    /* level indices, 0 = Normal */
    const char *from_name, *to_name; /* valid while the monitor lives */
    resil_degrade_cause cause;       /* of the latest change in the chain */
    double error_rate, cpu, memory;  /* the readings behind it (NaN = none) */
    resil_instant at;                /* when the change happened */
} resil_degrade_event;

typedef void (*resil_degrade_listener)(void *ud, const resil_degrade_event *ev);

typedef struct resil_degrade_opts {
    bool auto_adjust;                  /* default true */
    bool evaluate_on_call;             /* default true: admit/record evaluate when due */
    resil_duration check_interval;     /* default 30 s; > 0 */
    resil_duration min_level_duration; /* default 1 min; >= 0 */
    resil_duration error_window;       /* default 1 min; > 0 */
    int32_t error_buckets;             /* default 6; in [1, 1000], window/buckets >= 1 ms */
    int32_t min_throughput;            /* default 10; >= 1 calls in the window */
    int32_t level_count;               /* default 5; in [1, RESIL_DEGRADE_MAX_LEVELS] */
    resil_degrade_level_opts levels[RESIL_DEGRADE_MAX_LEVELS]; /* mildest first */
    resil_health_sampler sampler;      /* NULL = /proc */
    void *sampler_ud;
    resil_degrade_listener on_change;  /* may be NULL */
    void *on_change_ud;
    resil_clock *clock;                /* NULL = the system clock */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_degrade_opts;

typedef struct resil_degrade_stats {
    int level;
    const char *level_name;
    resil_instant level_since; /* last change, or construction */
    double error_rate;         /* percent at the last evaluation; NaN below min_throughput */
    uint64_t window_calls, window_failures; /* at the last evaluation */
    double cpu, memory;        /* at the last evaluation; NaN = unknown */
    uint64_t evaluations;
    uint64_t rejected;         /* admit calls refused */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_degrade_stats;

RESIL_API void resil_degrade_opts_default(resil_degrade_opts *o);
/* Errors: RESIL_EINVAL naming the bad field, RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_degrade_new(const resil_degrade_opts *o, resil_degrade **out,
                                resil_err *err);
RESIL_API void resil_degrade_free(resil_degrade *d);

/* 0 to run the operation, RESIL_EREJECTED to shed it (see the direction
 * above). May evaluate first when a check is due. */
RESIL_API int resil_degrade_admit(resil_degrade *d, int32_t priority);
/* The same with an instant the caller has just read from the monitor's
 * clock, so a pipeline reads the clock once for all its strategies. */
RESIL_API int resil_degrade_admit_at(resil_degrade *d, int32_t priority, resil_instant now);
/* Count one call's result in the error-rate window. */
RESIL_API void resil_degrade_record(resil_degrade *d, bool success);
/* Evaluate now (sample, compute, maybe move); returns the level after. */
RESIL_API int resil_degrade_tick(resil_degrade *d);
/* Move to `level` by hand (0 = Normal); RESIL_EINVAL if out of range. The
 * minimum time at a level counts from here. */
RESIL_API int resil_degrade_set_level(resil_degrade *d, int level);
RESIL_API void resil_degrade_set_auto_adjust(resil_degrade *d, bool on);

RESIL_API int resil_degrade_level(const resil_degrade *d);
/* Number of levels including Normal. */
RESIL_API int resil_degrade_level_count(const resil_degrade *d);
/* Name of a level ("Normal" for 0); NULL when out of range. */
RESIL_API const char *resil_degrade_level_name(const resil_degrade *d, int level);
/* The lowest priority admitted at `level` (INT32_MIN for Normal,
 * INT32_MAX for a level that does not exist). */
RESIL_API int32_t resil_degrade_level_threshold(const resil_degrade *d, int level);
RESIL_API void resil_degrade_stats_get(resil_degrade *d, resil_degrade_stats *out);
/* "error-rate", "cpu", "memory", "recovery", "manual". */
RESIL_API const char *resil_degrade_cause_name(resil_degrade_cause c);

/* ---- health readings from /proc (Linux) -------------------------------- */

/* CPU time from the aggregate "cpu" line of /proc/stat, in clock ticks. */
typedef struct resil_cpu_times {
    uint64_t busy;  /* everything but idle and iowait */
    uint64_t total; /* user nice system idle iowait irq softirq steal */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_cpu_times;

/* Parse /proc/stat text: exactly `len` bytes are read, no NUL needed.
 * RESIL_ESYNTAX when there is no well-formed aggregate "cpu" line. */
RESIL_API int resil_proc_stat_parse(const char *text, size_t len, resil_cpu_times *out);
/* Busy share between two readings in percent [0,100]; NaN if no time passed. */
RESIL_API double resil_cpu_busy_percent(const resil_cpu_times *before,
                                        const resil_cpu_times *after);
/* Parse /proc/meminfo text (MemTotal and MemAvailable, or MemFree + Buffers
 * + Cached on kernels without MemAvailable) into percent used. Exactly
 * `len` bytes are read. RESIL_ESYNTAX without a usable MemTotal. */
RESIL_API int resil_proc_meminfo_parse(const char *text, size_t len, double *used_percent);

/* The default sampler's state: where /proc is, and the previous CPU
 * reading (the CPU share is measured between two samples, so the first
 * sample's CPU is unknown). Not thread-safe; the monitor serialises it. */
typedef struct resil_proc_sampler {
    const char *root; /* "/proc" unless a test points elsewhere; not copied */
    resil_cpu_times prev;
    bool primed;
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_proc_sampler;

RESIL_API void resil_proc_sampler_init(resil_proc_sampler *s, const char *root);
/* A resil_health_sampler: `ud` is a resil_proc_sampler *. Returns 0 when at
 * least one reading is known, else RESIL_EIO. */
RESIL_API int resil_proc_sample(void *ud, resil_health_sample *out);

RESIL_END_DECLS

#endif
