/*
 * fleet.h — what the adapter's files share: the script's operations and
 * answers, the URL and connection helpers, and the member interface through
 * which the client's one sync thread serves breakers and budgets alike.
 *
 * The client knows nothing of breakers or budgets. Each is a fleet_member
 * with four hooks — collect the commands it wants sent this round, apply an
 * answer, note a command lost, and fall back when Redis goes down — so one
 * loop (pipeline, NOSCRIPT fallback, reconnect) serves every kind of shared
 * object, and a new kind is a new set of hooks.
 */
#ifndef RESIL_REDIS_FLEET_H
#define RESIL_REDIS_FLEET_H

#include <stdatomic.h>
#include <pthread.h>

#include "resil/redis.h"

/* The Lua script's text (generated from fleet.lua). */
extern const char resil__fleet_script[];

/* ---- the script's operations ------------------------------------------- */

typedef enum fleet_op {
    FLEET_SYNC,    /* add counts, evaluate the rules, push a local trip */
    FLEET_PROBE,   /* open past the break -> half-open; take a probe slot */
    FLEET_RESULT,  /* a probe's result */
    FLEET_ISOLATE,
    FLEET_CLOSE,
    FLEET_RESET,
    FLEET_STATUS,  /* read only */
    FLEET_LEASE,   /* budget: return a lease and credits, take a new lease */
    FLEET_GCRA,    /* rate limiter: take n permits of the fleet's rate or none */
    FLEET_CACQUIRE, /* concurrency limit: take a lease if one is free */
    FLEET_CRELEASE, /* give one lease back */
    FLEET_CRENEW    /* push back the expiry of every lease an instance holds */
} fleet_op;

/* A breaker's cached word packs its state into the low bits and the epoch
 * above them, so an epoch from Redis must fit what is left. */
#define FLEET_STATE_BITS 3
#define FLEET_EPOCH_MAX ((INT64_C(1) << (64 - FLEET_STATE_BITS)) - 1)
/* A shared object's key: PREFIX, its kind ("breaker:", "limit:", ...), NAME. */
#define FLEET_KEY_MAX (RESIL_REDIS_PREFIX_MAX + 8 + RESIL_BREAKER_NAME_MAX)
/* Wall times travel as Unix ms; callers turn them into ns. */
#define FLEET_WALL_MS_MAX (INT64_MAX / 1000000)

/* A breaker op's answer code. */
enum { FLEET_OK = 0, FLEET_GRANTED = 1, FLEET_DENIED = 2, FLEET_STALE = 3,
       FLEET_MISSING = 4 };

/* A breaker's rules as the script reads them: milliseconds and plain
 * numbers, computed once from the options. */
typedef struct fleet_rules {
    int kind;                  /* resil_breaker_kind flags */
    uint32_t threshold;
    double ratio;
    uint32_t minimum;
    int64_t sampling_ms;
    bool slow_on;
    double slow_ratio;
    int64_t break_ms;
    double growth;
    int64_t max_break_ms;
    uint32_t probes;
    uint32_t success_threshold;
    int64_t probe_timeout_ms;
} fleet_rules;

typedef struct fleet_member fleet_member;

/* One script call. The strings belong to the member (or the caller) and
 * live at least until the answer is applied. */
typedef struct fleet_cmd {
    fleet_op op;
    fleet_member *member;     /* whose answer it is (rounds only) */
    const char *key;
    const char *name;
    int64_t now_ms;
    const fleet_rules *rules; /* breaker ops; NULL from admin calls by name */
    int64_t arg[8];           /* the op's own numbers, in the script's order */
} fleet_cmd;

/* The shared state after a breaker op ran (and a lease's answer). */
typedef struct fleet_state {
    int code;
    resil_breaker_state state;
    uint64_t epoch;
    int64_t until_ms;
    resil_breaker_reason reason;
    uint32_t run;
    uint64_t window_total, window_failures, window_slow;
    int64_t break_ms;
    uint64_t opens;
    int64_t lastopen_ms;
    uint32_t successes, inflight;
    uint32_t slot;
    uint64_t ticket;
    int64_t retry_ms;   /* denied: until a probe may go; -1 = isolated */
    int64_t pttl_ms;
    int64_t tokens, granted; /* FLEET_LEASE */
    int64_t retry_us;        /* FLEET_GCRA denied: until the permits are there */
    int64_t in_use;          /* concurrency ops: leases live after the op */
} fleet_state;

/* ---- members --------------------------------------------------------------- */

typedef struct fleet_queue fleet_queue;
/* Add a command to the round (copied). RESIL_ENOMEM. */
int resil__fleet_queue_push(fleet_queue *q, const fleet_cmd *c);

/* collect and apply are required; the other hooks may be NULL. */
typedef struct fleet_member_ops {
    /* Queue this round's commands. `forced`: a sync was asked for, or the
     * client reconnected — re-read the state even with nothing to flush. */
    void (*collect)(fleet_member *m, fleet_queue *q, int64_t now_mono, bool forced);
    void (*apply)(fleet_member *m, const fleet_cmd *c, const fleet_state *s);
    void (*lost)(fleet_member *m, const fleet_cmd *c); /* sent, no (usable) answer */
    void (*down)(fleet_member *m);                     /* Redis went away */
    /* A state change another instance published. */
    void (*message)(fleet_member *m, const fleet_state *s);
    /* Redis is back, re-synced and in force again. */
    void (*up)(fleet_member *m);
} fleet_member_ops;

struct fleet_member {
    const fleet_member_ops *ops;
    const char *name;              /* matched against published names */
    fleet_member *prev, *next;     /* the client's list, under its lock */
};

/* ---- the client, as members see it -------------------------------------- */

typedef struct fleet_config {
    char prefix[RESIL_REDIS_PREFIX_MAX];
    char channel[RESIL_REDIS_PREFIX_MAX + 8];
    resil_duration timeout;
    resil_duration sync_interval;
    resil_duration refresh_interval;
    int64_t ttl_ms;
    resil_clock *clock;
} fleet_config;

const fleet_config *resil__redis_config(const resil_redis *r);
void resil__redis_retain(resil_redis *r);
bool resil__redis_up(const resil_redis *r);
/* Ask the sync thread for a round soon (coalesced; one syscall at most). */
void resil__redis_wake(resil_redis *r);
/* Join or leave the rounds; attach also runs a forced round and waits. */
void resil__redis_attach(resil_redis *r, fleet_member *m);
void resil__redis_detach(resil_redis *r, fleet_member *m);
/*
 * Run one command on the callers' connection. `wait`: block for the lock;
 * else RESIL_EBUSY when another caller holds it. RESIL_EBACKEND when Redis
 * failed it (the client is then marked down), RESIL_EIO for an error reply.
 */
int resil__redis_call(resil_redis *r, const fleet_cmd *c, bool wait, fleet_state *out);
/* Queue an event for the listener (delivered by the sync thread). */
void resil__redis_event(resil_redis *r, const resil_redis_event *ev);

/* Zeroed memory on whole 64-byte lines, so that the fields a struct
 * aligns to a line keep their line to themselves; free() releases it. */
void *resil__fleet_line_alloc(size_t size);
/* Unix ms on a clock's wall time. */
int64_t resil__fleet_wall_ms(resil_clock *c);
/* A name is non-empty, shorter than RESIL_BREAKER_NAME_MAX, printable. */
bool resil__fleet_name_ok(const char *name);
/* 0 when `name` is ok, else RESIL_EINVAL naming `what`.name. */
int resil__fleet_name_check(const char *what, const char *name, resil_err *err);
/* The core's refusal `inner` (code rc, 0 for none) of options the fleet
 * object holds in `field`, said under it: "redis_breaker.fallback:
 * breaker.failure_threshold must be >= 1, got 0". */
int resil__fleet_refused_under(const char *field, int rc, const resil_err *inner,
                               resil_err *err);

/* One more on a stats counter (relaxed: stats only). */
static inline void resil__fleet_count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* One instance's share of a fleet-wide number for its local fallback:
 * v / instances, at least 1. */
static inline int64_t resil__fleet_share(int64_t v, uint32_t instances)
{
    int64_t s = v / instances;
    return s < 1 ? 1 : s;
}

#endif
