/*
 * redis.h — fleet scale on Redis: circuit breakers whose state (and, if
 * asked, whose counting) every instance of a service shares, and a retry
 * budget the whole fleet draws from. Part of libresil-redis (hiredis); not
 * included by resil.h.
 *
 * The shape is set by one rule: a call never waits for Redis on its way
 * through a closed breaker. Each instance keeps the shared state in a local
 * cache and its outcomes in local counters; a background thread per client
 * flushes the counters every `sync_interval` (at once when they would trip
 * a rule) through one server-side Lua script that updates the counts and
 * the state atomically, and learns of changes other instances make from a
 * PUBLISH on a second connection. Only the rare calls that need a fleet
 * decision — the probe admitted after a break, manual control — talk to
 * Redis themselves, each bounded as a whole by `timeout` from its start.
 *
 *   instance A ──records──▶ local counters ──every sync_interval──▶ EVALSHA ┐
 *   instance B ◀──cached state◀── SUBSCRIBE ◀── PUBLISH on a transition ◀───┘
 *
 * Two ways to count (resil_redis_counting):
 *  - FLEET (the default): the rolling window and the consecutive-failure run
 *    live in Redis, so failure_threshold, minimum_throughput and
 *    failure_ratio are fleet totals: four instances failing twice each reach
 *    a threshold of 8.
 *  - LOCAL: each instance counts its own calls with a local breaker, as a
 *    cache without atomic increments forces the peer libraries to; only the
 *    state is shared — a local trip opens the breaker for everyone.
 *
 * When Redis is down, slow or answering errors, every call falls back to a
 * local breaker (and the budget to a local budget) built from the same
 * options, a RESIL_REDIS_DOWN event says so, and the client reconnects with
 * backoff; on return it re-reads every shared state (RESIL_REDIS_UP). A
 * Redis restart that lost the keys starts every breaker closed.
 *
 * Nothing Redis sends is trusted. Answers and messages are checked against
 * what the script can produce, and every reply is read within bounds: at
 * most 4096 elements per array, arrays nested 2 deep, strings of 64 KiB,
 * 4 MiB in memory per reply, 96 KiB read but unparsed (docs/fleet.md says
 * why each). A reply beyond them is malformed — counted in command_errors,
 * never applied — and costs its connection: the client goes DOWN and
 * reconnects, since the stream behind it cannot be trusted.
 *
 * Times shared through Redis (when a break ends, which bucket a count lands
 * in) are the instances' wall clocks (resil_clock's wall_now) in whole
 * milliseconds, so instances need clocks synchronised to well within the
 * break and the sampling bucket (NTP gives milliseconds); a fake clock makes
 * the shared state testable. See docs/fleet.md for the staleness this
 * design allows, the key layout and the failure modes.
 */
#ifndef RESIL_REDIS_H
#define RESIL_REDIS_H

#include "breaker.h"
#include "budget.h"
#include "bulkhead.h"
#include "ratelimit.h"

RESIL_BEGIN_DECLS

/* ---- the client: connections, the sync thread, events ------------------- */

typedef struct resil_redis resil_redis;

typedef enum resil_redis_event_type {
    RESIL_REDIS_DOWN = 1, /* Redis unreachable, slow or failing: local fallback */
    RESIL_REDIS_UP,       /* reconnected and re-synced: shared state again */
    RESIL_REDIS_STATE     /* a shared breaker changed state, as this client saw it */
} resil_redis_event_type;

typedef struct resil_redis_event {
    resil_redis_event_type type;
    const char *name;            /* STATE: the breaker's name; else "" */
    resil_breaker_state from;    /* STATE: the state this client had cached */
    resil_breaker_state to;
    resil_breaker_reason reason; /* STATE: why the fleet changed (reset when a
                                    Redis restart lost the key) */
    uint64_t epoch;              /* STATE: the shared state's new epoch */
    const char *detail;          /* DOWN: what failed, e.g. "timeout after 50ms" */
} resil_redis_event;

/* Called on the client's sync thread, one event at a time, in the order the
 * client saw the changes. It must not wait for that thread: no
 * resil_redis_sync(), no new breaker or budget on this client (each runs a
 * first round), no freeing of the client's last reference. */
typedef void (*resil_redis_listener_fn)(const resil_redis_event *ev, void *ud);

#define RESIL_REDIS_PREFIX_MAX 64 /* bytes, including the terminating NUL */

typedef struct resil_redis_opts {
    const char *url;              /* required: redis://[[user]:password@]host[:port][/db] */
    const char *prefix;           /* default "resil:"; starts every key and the channel */
    resil_duration timeout;       /* default 50 ms; [1 ms, 10 s]. Bounds each call that
                                     asks Redis as a whole, from its start: the wait for
                                     the connection, the write, every read, the resend
                                     after NOSCRIPT (not the scheduler's delay in running
                                     the thread again). Also each connection's set-up
                                     (name resolution aside) and each answer of a round */
    resil_duration sync_interval; /* default 100 ms; the longest counts wait for a flush;
                                     [1 ms, 1 h] */
    resil_duration refresh_interval; /* default 1 s; idle breakers re-read their state this often
                                        (in case a PUBLISH was missed); >= sync_interval */
    resil_duration key_ttl;       /* default 24 h; keys nobody writes this long expire; >= 1 s */
    resil_backoff reconnect;      /* default exponential from 100 ms, full jitter, cap 5 s */
    bool allow_offline_start;     /* default false: refuse when nothing answers at url */
    resil_clock *clock;           /* wall time for admin calls by name; NULL = system */
    resil_redis_listener_fn listener; /* optional */
    void *listener_ud;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_opts;

RESIL_API void resil_redis_opts_default(resil_redis_opts *o);

/*
 * Connect, check that a Redis server answers at opts->url (PING), load the
 * script and start the sync thread. Refused with RESIL_EINVAL (err names
 * the field) for bad options — a missing url among them: a shared breaker
 * needs a Redis server, and a plain resil_breaker serves one instance —
 * and with RESIL_EBACKEND when the server there is not Redis (it answered
 * something else), refuses us (AUTH, SELECT) or, unless
 * allow_offline_start, when nothing answers within the timeout.
 */
RESIL_API int resil_redis_new(const resil_redis_opts *o, resil_redis **out,
                              resil_err *err);
/* Release the caller's reference. Breakers and budgets made from the client
 * hold references of their own; the sync thread stops and the connections
 * close when the last one goes. NULL-tolerant. */
RESIL_API void resil_redis_free(resil_redis *r);

/* Is the client connected (shared state in force), as of its last command? */
RESIL_API bool resil_redis_connected(resil_redis *r);

/*
 * Run a sync round now and wait for it: every pending count, probe result
 * and trip is flushed and every shared state re-read. 0, or RESIL_EBACKEND
 * when Redis is down (the round did not happen or failed part-way).
 * For tests, shutdown paths and admin tools; calls never need it.
 */
RESIL_API int resil_redis_sync(resil_redis *r);

typedef struct resil_redis_stats {
    bool connected;
    uint64_t rounds;           /* sync rounds that sent at least one command */
    uint64_t commands;         /* commands sent, on every connection */
    uint64_t noscript;         /* EVALSHA answered NOSCRIPT and EVAL stood in */
    uint64_t messages;         /* state changes received by SUBSCRIBE */
    uint64_t disconnects;      /* times the client fell back to local state */
    uint64_t reconnects;       /* times it came back */
    uint64_t command_errors;   /* error replies other than NOSCRIPT, answers the
                                  script could not have given and replies beyond
                                  the reader's bounds (none applied) */
    uint64_t events_dropped;   /* listener events lost to a full queue */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_stats;

RESIL_API int resil_redis_stats_get(resil_redis *r, resil_redis_stats *out);

/* ---- the shared breaker ------------------------------------------------- */

/*
 * A fleet breaker is a resil_breaker (breaker.h) like any other: the
 * pipeline, a registry, telemetry and configuration take it, and it is
 * driven with resil_breaker_acquire/record/state_of/stats_get/isolate/
 * close/reset/free. Where it differs from the built-in breaker:
 *  - counts reach the fleet at the next sync round (or at once when they
 *    would trip a rule), so a trip is seen by the instance after that
 *    round, not by the failing call's own record;
 *  - state changes other instances make arrive by PUBLISH, so state_of is
 *    the cached shared state;
 *  - resil_breaker_disable() is refused with RESIL_EINVAL (the fleet has
 *    no such state), and isolate/close/reset return RESIL_EBACKEND when
 *    Redis cannot be reached (nothing changed);
 *  - stats_get reports the counts that decide — the fleet's as last
 *    synced (FLEET counting) or this instance's (LOCAL) — the generation
 *    is the shared epoch's low 32 bits, and the history (opens, last
 *    opened) is Redis's: read it with resil_redis_breaker_status_get();
 *    while Redis is down it reports the local fallback's stats;
 *  - rules.listener hears the shared state's changes as this instance
 *    learns them (reason as the fleet recorded it), delivered outside
 *    every lock and in epoch order; at most 16 wait at a time, more are
 *    counted in stats.events_dropped. The local fallback's own changes
 *    are not reported there (RESIL_REDIS_DOWN says it is in force).
 */

typedef enum resil_redis_counting {
    RESIL_REDIS_COUNT_FLEET = 0, /* counts in Redis; thresholds are fleet totals */
    RESIL_REDIS_COUNT_LOCAL = 1  /* each instance counts; only the state is shared */
} resil_redis_counting;

#define RESIL_REDIS_MAX_PROBES 64

typedef struct resil_redis_breaker_opts {
    const char *name;        /* required; the key is PREFIX "breaker:" NAME */
    resil_breaker_opts rules; /* trip rules, break, half-open, listener:
                                 resil_breaker_opts_default(); break_duration
                                 >= 1 ms, half_open_probes <= 64; rules.name is
                                 not used */
    resil_redis_counting counting; /* default FLEET */
    const resil_breaker_opts *fallback; /* the local breaker used while Redis is
                                           down (and, LOCAL, for counting);
                                           NULL = rules */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_breaker_opts;

RESIL_API void resil_redis_breaker_opts_default(resil_redis_breaker_opts *o);
/* Create an instance's handle on the shared breaker `o->name` (named so)
 * and read its shared state (bounded by the timeout; when Redis is down the
 * handle starts on its local fallback). It holds a reference to the client.
 * Free it with resil_breaker_free() (counts not yet flushed are lost;
 * resil_redis_sync() first to keep them). RESIL_EINVAL naming the field,
 * RESIL_ENOMEM. */
RESIL_API int resil_redis_breaker_new(resil_redis *r, const resil_redis_breaker_opts *o,
                                      resil_breaker **out, resil_err *err);

/* For a registry's `factory` (registry.h): each key gets the fleet breaker
 * of that name, with the registry's options for the key as its rules. */
typedef struct resil_redis_factory {
    resil_redis *client;                /* required; must outlive the registry */
    resil_redis_counting counting;      /* as in resil_redis_breaker_opts */
    const resil_breaker_opts *fallback; /* NULL = the key's rules */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_factory;

/* A resil_registry_factory_fn; `ud` is a resil_redis_factory. */
RESIL_API int resil_redis_breaker_factory(const char *key, const resil_breaker_opts *o,
                                          resil_breaker **out, resil_err *err, void *ud);

/* Is `b` a fleet breaker on Redis? */
RESIL_API bool resil_redis_breaker_is(const resil_breaker *b);
/* The local fallback breaker of a fleet breaker (not a new reference): its
 * state and stats. NULL for any other breaker. */
RESIL_API resil_breaker *resil_redis_breaker_fallback(const resil_breaker *b);
/* Was the call admitted (or refused) by the local fallback — Redis down,
 * or LOCAL counting — rather than by the shared state? */
RESIL_API bool resil_redis_permit_fallback(const resil_breaker_permit *p);

/* The shared state as Redis holds it. */
typedef struct resil_redis_breaker_status {
    resil_breaker_state state;
    resil_breaker_reason reason;   /* why it entered this state; 0 = never changed */
    uint64_t epoch;                /* moves on at every shared transition */
    int64_t open_until_ms;         /* open: Unix ms after which a probe may go */
    int64_t last_opened_ms;        /* Unix ms; 0 = never opened */
    uint64_t opens;
    uint32_t consecutive_failures; /* the fleet's run (FLEET counting) */
    uint64_t window_total;         /* the fleet's window as of now (FLEET) */
    uint64_t window_failures;
    uint64_t window_slow;
    uint32_t probes_in_flight;
    uint32_t probe_successes;
    resil_duration current_break;
    resil_duration ttl;            /* until the key expires unless written */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_breaker_status;

/* Read the shared state of fleet breaker `b` (its clock places the
 * window). 0, RESIL_EBACKEND; RESIL_EINVAL when `b` is not a fleet
 * breaker. */
RESIL_API int resil_redis_breaker_status_get(resil_breaker *b,
                                             resil_redis_breaker_status *out);

/* ---- administration by name (what `resil breaker` uses) ----------------- */

typedef enum resil_redis_control_op {
    RESIL_REDIS_ISOLATE = 1,
    RESIL_REDIS_CLOSE,
    RESIL_REDIS_RESET
} resil_redis_control_op;

/* Change the shared breaker `name`; every instance learns of it by PUBLISH.
 * 0, RESIL_EINVAL (bad name or op), RESIL_EBACKEND. Reset creates the key
 * if absent; isolate and close of an unknown name give RESIL_ENOTFOUND. */
RESIL_API int resil_redis_control(resil_redis *r, const char *name,
                                  resil_redis_control_op op, resil_err *err);
/* 0, RESIL_ENOTFOUND (no such key), RESIL_EINVAL, RESIL_EBACKEND. */
RESIL_API int resil_redis_status_get(resil_redis *r, const char *name,
                                     resil_redis_breaker_status *out,
                                     resil_err *err);
/* Call fn for the name of every shared breaker under the prefix, in the
 * order SCAN returns them (fn returns non-zero to stop); keys whose name no
 * breaker could have are skipped. 0, RESIL_EBACKEND. */
typedef int (*resil_redis_name_fn)(const char *name, void *ud);
RESIL_API int resil_redis_list(resil_redis *r, resil_redis_name_fn fn, void *ud,
                               resil_err *err);

/* ---- the fleet-wide retry budget ---------------------------------------- */

/*
 * gRPC's token model with the tokens in Redis (key PREFIX "budget:" NAME,
 * thousandths, updated by the script): each counted failure −1, each
 * success +token_ratio, retries allowed while tokens > max_tokens/2. An
 * instance leases up to `lease_tokens` of the headroom above max/2 at each
 * sync and spends it on its own failures, so a retry decision never waits
 * for Redis: it is allowed while the instance's lease is above zero.
 * Leases are returned and renewed at every round with activity, and at once
 * when one runs low. When the fleet's headroom is gone every instance is
 * denied, including those that never failed. While Redis is down, a local
 * budget decides (`fallback`, fed with every outcome all along).
 */
typedef struct resil_redis_budget_opts {
    const char *name;     /* required */
    double max_tokens;    /* default 10; in [0.001, 1e6] (Redis keeps thousandths) */
    double token_ratio;   /* default 0.1; in [0.001, max_tokens] */
    double lease_tokens;  /* default 2; in [0.001, max_tokens] */
    const resil_budget_opts *fallback; /* NULL = the tokens model with the same
                                          max (up to 1000) and ratio */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_budget_opts;

RESIL_API void resil_redis_budget_opts_default(resil_redis_budget_opts *o);
/* A budget handle for the retry executor (free with resil_budget_free),
 * with its first lease taken. RESIL_EINVAL naming the field, RESIL_ENOMEM. */
RESIL_API int resil_redis_budget_new(resil_redis *r,
                                     const resil_redis_budget_opts *o,
                                     resil_budget **out, resil_err *err);

/* ---- the fleet-wide rate limiter ----------------------------------------- */

/*
 * One rate for the whole fleet: GCRA (a token bucket kept as one number, the
 * theoretical arrival time) in the key PREFIX "limit:" NAME, read and moved
 * by one atomic script on every acquire, so two instances never spend the
 * same permit and the fleet admits exactly `burst` at once and then `rate`
 * per `period`. Time comes from the caller: the wall time of the limiter's
 * clock, in microseconds, so the instances' clocks must agree (NTP); an
 * instance whose clock runs d ahead may admit up to d × rate early. The
 * emission interval period/rate is rounded up to a whole microsecond (the
 * fleet never exceeds the rate), so the rate is at most one per µs.
 *
 * Each acquire is one round trip bounded by the client's timeout. While
 * Redis is down (or a call fails), a local token bucket decides — by
 * default rate/instances per period with burst/instances, at least 1 each —
 * and the first call after the client is back goes to Redis again. Nothing
 * is cached, so no answer is ever older than its call.
 */
typedef struct resil_redis_ratelimit_opts {
    const char *name;      /* required */
    int64_t rate;          /* default 100; in [1, 1e9], period/rate >= 1 µs */
    resil_duration period; /* default 1 s; in [1 ms, 1 day] */
    int64_t burst;         /* default 100; in [1, 1e9] */
    uint32_t instances;    /* default 1; >= 1: what the fallback divides by */
    const resil_ratelimit_opts *fallback; /* NULL = the token bucket above */
    resil_clock *clock;    /* NULL = the client's */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_ratelimit_opts;

typedef struct resil_redis_ratelimit_stats {
    uint64_t fleet_admitted;  /* decided by Redis */
    uint64_t fleet_rejected;
    uint64_t local_admitted;  /* decided by the fallback */
    uint64_t local_rejected;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_ratelimit_stats;

RESIL_API void resil_redis_ratelimit_opts_default(resil_redis_ratelimit_opts *o);
/* A limiter handle (free with resil_ratelimit_free) on `clock`, holding a
 * reference to the client. RESIL_EINVAL naming the field, RESIL_ENOMEM. */
RESIL_API int resil_redis_ratelimit_new(resil_redis *r, const resil_redis_ratelimit_opts *o,
                                        resil_ratelimit **out, resil_err *err);
/* RESIL_EINVAL when `rl` is not a fleet limiter. */
RESIL_API int resil_redis_ratelimit_stats_get(resil_ratelimit *rl,
                                              resil_redis_ratelimit_stats *out);

/* ---- the fleet-wide concurrency limit ------------------------------------- */

/*
 * At most `max_concurrency` calls at once across the fleet, behind the
 * bulkhead interface. Each permit is a lease: a member of the sorted set
 * PREFIX "conc:" NAME scored with its expiry, taken and given back by one
 * atomic script call each, its expiry pushed back by the client's sync
 * thread while the instance lives (every lease/3, so the sync interval must
 * be well under that). An instance that dies holding permits — SIGKILL, a
 * lost machine — gives them back when its leases lapse, at most `lease`
 * later. Time is the caller's (the wall time of `clock` in ms), so the
 * instances' clocks must agree to well within the lease.
 *
 * A full fleet limit rejects at once (RESIL_EREJECTED): there is no fleet
 * queue. While Redis is down, or a call fails, a local bulkhead decides — by
 * default max_concurrency/instances permits (at least 1) with no queue —
 * and the first acquire after the client is back goes to Redis again.
 * Permits are alike, so a release gives back a fleet lease while Redis is
 * up and one the fallback granted first while it is down.
 */
typedef struct resil_redis_concurrency_opts {
    const char *name;         /* required */
    int32_t max_concurrency;  /* default 10; >= 1 */
    resil_duration lease;     /* default 5 s; in [10 ms, 1 day] */
    uint32_t instances;       /* default 1; >= 1: what the fallback divides by */
    const resil_bulkhead_opts *fallback; /* NULL = the bulkhead above */
    resil_clock *clock;       /* NULL = the client's */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_concurrency_opts;

typedef struct resil_redis_concurrency_stats {
    uint64_t fleet_admitted;  /* leases taken */
    uint64_t fleet_rejected;
    uint64_t local_admitted;  /* permits the fallback granted */
    uint64_t local_rejected;
    int64_t fleet_in_use;     /* leases live across the fleet, as last seen */
    int32_t held;             /* this instance's permits, fleet and local */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_concurrency_stats;

RESIL_API void resil_redis_concurrency_opts_default(resil_redis_concurrency_opts *o);
/* A bulkhead handle (free with resil_bulkhead_free, with no permit held),
 * holding a reference to the client. RESIL_EINVAL naming the field,
 * RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_redis_concurrency_new(resil_redis *r, const resil_redis_concurrency_opts *o,
                                          resil_bulkhead **out, resil_err *err);
/* RESIL_EINVAL when `b` is not a fleet concurrency limit. */
RESIL_API int resil_redis_concurrency_stats_get(resil_bulkhead *b,
                                                resil_redis_concurrency_stats *out);

/* For configuration's ratelimit_factory and bulkhead_factory (config.h):
 * each Distributed entry gets the fleet limiter or concurrency limit of its
 * name. A rate limiter entry must be a token bucket (rate, period, burst);
 * a bulkhead entry's queue settings do not apply (there is no fleet queue). */
typedef struct resil_redis_limits_factory {
    resil_redis *client; /* required; must outlive what it builds */
    uint32_t instances;  /* as in the options; 0 = 1 */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_redis_limits_factory;

/* A resil_ratelimit_factory_fn; `ud` is a resil_redis_limits_factory. */
RESIL_API int resil_redis_ratelimit_factory(const char *name, const resil_ratelimit_opts *o,
                                            resil_ratelimit **out, resil_err *err, void *ud);
/* A resil_bulkhead_factory_fn; `ud` is a resil_redis_limits_factory. */
RESIL_API int resil_redis_concurrency_factory(const char *name, const resil_bulkhead_opts *o,
                                              resil_bulkhead **out, resil_err *err, void *ud);

RESIL_END_DECLS

#endif
