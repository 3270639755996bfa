/*
 * breaker.h — the circuit breaker: stop calling a dependency that keeps
 * failing, and find out cheaply when it has recovered.
 *
 * One breaker serves every trip rule users of the peer libraries ask for:
 * a run of consecutive failures (which low-traffic callers need: a ratio
 * never reaches its throughput for them), a failure ratio over a rolling
 * time window (10 buckets over `sampling_duration`, evaluated once
 * `minimum_throughput` calls were seen), both at once (whichever fires
 * first), and an optional slow-call rule (calls slower than
 * `slow_call_duration` trip it once their share reaches `slow_call_ratio`
 * under the same throughput rule). The window may count the last
 * `window_size` calls instead of a span of time (resilience4j's default,
 * `window = RESIL_BREAKER_WINDOW_COUNT`), and an application's own trip
 * predicate may judge the window's counts (gobreaker's ReadyToTrip, kind
 * flag RESIL_BREAKER_PREDICATE).
 *
 *        failures reach a rule                  break elapsed,
 *   CLOSED ───────────────────────▶ OPEN ──── next call is the probe ──▶ HALF-OPEN
 *     ▲                              ▲                                     │  │
 *     │                              └──────────── a probe fails ──────────┘  │
 *     └──────────── success_threshold consecutive probe successes ────────────┘
 *   ISOLATED: held open by hand until closed by hand.
 *   DISABLED: admits everything, records nothing.
 *
 * Transitions are lazy — there is no timer thread: an open breaker turns
 * half-open when the first call after the break asks to run, and that call
 * is the probe. Half-open admits `half_open_probes` calls at once; a probe
 * that never reports back is replaced after `probe_timeout`, so a hung call
 * cannot wedge the breaker. The break may grow by `break_growth` on each
 * re-open, up to `max_break_duration`.
 *
 * The call protocol is explicit so that any executor (the blocking pipeline,
 * an event loop, a fleet adapter) can drive it:
 *
 *     resil_breaker_permit p;
 *     if (resil_breaker_acquire(b, &p) == RESIL_EREJECTED)
 *         return fail_fast(p.retry_after);  // time until the next probe
 *     outcome = call();
 *     resil_breaker_record(b, &p, ok ? RESIL_BREAKER_SUCCESS : RESIL_BREAKER_FAILURE);
 *
 * The permit carries the breaker's generation, which moves on at every
 * state change: a result reported for a call that started before a change
 * (a slow failure arriving after the breaker re-closed) is discarded rather
 * than counted against the new state. A result may also be IGNORED — a
 * cancelled call says nothing about the dependency.
 *
 * Cost: in the closed state acquire is one atomic load, and recording a
 * success with the consecutive rule alone is one more load (a write only
 * when a failure run ends); the clock is read only when a rule needs it
 * (the window places the result in a bucket; the slow-call rule times the
 * call). Everything else — the window, half-open, transitions — runs under
 * the breaker's own mutex. Nothing allocates after resil_breaker_new().
 *
 * State-change events go to the listener outside every lock, one at a time
 * and in the order the transitions happened, even when several threads
 * cause transitions at once: each transition is queued under the lock, and
 * whichever thread finds no delivery in progress drains the queue. An event
 * may therefore be delivered by another thread than the one whose call
 * caused it, but never before the transitions that preceded it. The queue
 * holds RESIL_BREAKER_EVENT_QUEUE events; a thread about to make a
 * transition while it is full waits until the deliverer makes room, so
 * none is lost. (Only a listener that itself causes more than that many
 * transitions from inside the callback finds the queue full with nobody
 * else to drain it; those events are counted in stats.events_dropped.)
 *
 * Breakers are reference-counted so that a registry can evict one while a
 * caller still holds it: resil_breaker_new() returns the first reference,
 * resil_breaker_retain() adds one, resil_breaker_free() drops one and the
 * last drop frees it.
 *
 * A resil_breaker is a handle over an implementation: the built-in breaker
 * described above is one, the fleet breaker on Redis (redis.h) another, and
 * an application may plug in its own with a resil_breaker_ops table and
 * resil_breaker_new_custom(). Everything that takes a breaker — the
 * pipeline, the registry, telemetry, configuration — takes any of them
 * through this one API. The built-in breaker pays nothing for the seam: its
 * call path reads its state word first anyway, and another implementation's
 * handle holds a word in a state the built-in breaker never uses, so the
 * same load that admits a call also finds a foreign breaker.
 */
#ifndef RESIL_BREAKER_H
#define RESIL_BREAKER_H

#include "retry.h"

RESIL_BEGIN_DECLS

typedef struct resil_breaker resil_breaker;

/* Which rules trip the breaker: flags, so BOTH is CONSECUTIVE | RATIO, and
 * any of them may be or'ed with PREDICATE (whichever fires first). */
typedef enum resil_breaker_kind {
    RESIL_BREAKER_CONSECUTIVE = 1, /* failure_threshold failures in a row */
    RESIL_BREAKER_RATIO = 2,       /* failure_ratio over the rolling window */
    RESIL_BREAKER_BOTH = 3,        /* whichever fires first */
    RESIL_BREAKER_PREDICATE = 4    /* opts.trip says so, on a failure */
} resil_breaker_kind;

/* What the window counts over: a span of time, or the last calls. */
typedef enum resil_breaker_window {
    RESIL_BREAKER_WINDOW_TIME = 0,  /* sampling_duration in 10 buckets */
    RESIL_BREAKER_WINDOW_COUNT = 1  /* the last window_size calls */
} resil_breaker_window;

typedef enum resil_breaker_state {
    RESIL_BREAKER_NONE = -1, /* no breaker installed (a NULL handle) */
    RESIL_BREAKER_CLOSED = 0,
    RESIL_BREAKER_OPEN = 1,
    RESIL_BREAKER_HALF_OPEN = 2,
    RESIL_BREAKER_ISOLATED = 3, /* held open by hand */
    RESIL_BREAKER_DISABLED = 4  /* admits everything, records nothing */
} resil_breaker_state;

/* Why a transition happened. */
typedef enum resil_breaker_reason {
    RESIL_BREAKER_BY_CONSECUTIVE = 1, /* closed -> open: failure_threshold reached */
    RESIL_BREAKER_BY_RATIO,           /* closed -> open: failure_ratio reached */
    RESIL_BREAKER_BY_SLOW_CALLS,      /* closed -> open: slow_call_ratio reached */
    RESIL_BREAKER_BY_BREAK_ELAPSED,   /* open -> half-open: a call arrived after the break */
    RESIL_BREAKER_BY_PROBE_FAILED,    /* half-open -> open */
    RESIL_BREAKER_BY_PROBES_SUCCEEDED,/* half-open -> closed */
    RESIL_BREAKER_BY_ISOLATE,         /* resil_breaker_isolate() */
    RESIL_BREAKER_BY_CLOSE,           /* resil_breaker_close() */
    RESIL_BREAKER_BY_RESET,           /* resil_breaker_reset() */
    RESIL_BREAKER_BY_DISABLE,         /* resil_breaker_disable() */
    RESIL_BREAKER_BY_PREDICATE        /* closed -> open: opts.trip said so */
} resil_breaker_reason;

/* "closed", "open", "half-open", "isolated", "disabled", "none". */
RESIL_API const char *resil_breaker_state_name(resil_breaker_state s);
/* "consecutive failures", "failure ratio", "slow calls", "break elapsed",
 * "probe failed", "probes succeeded", "isolated by hand", "closed by hand",
 * "reset", "disabled by hand", "trip predicate". */
RESIL_API const char *resil_breaker_reason_name(resil_breaker_reason r);

typedef struct resil_breaker_event {
    resil_breaker_state from;
    resil_breaker_state to;
    resil_breaker_reason reason;
    resil_instant at;          /* the breaker clock's instant of the change */
    uint32_t generation;       /* the generation the change started */
    resil_duration break_duration; /* to OPEN: the break in force; else 0 */
} resil_breaker_event;

/* Called outside every lock; see the ordering guarantee above. The listener
 * may call into the breaker (its state, stats, even acquire). */
typedef void (*resil_breaker_listener_fn)(resil_breaker *b,
                                          const resil_breaker_event *ev,
                                          void *ud);

#define RESIL_BREAKER_NAME_MAX 256 /* bytes, including the terminating NUL */
#define RESIL_BREAKER_EVENT_QUEUE 16
#define RESIL_BREAKER_WINDOW_SIZE_MAX 10000 /* calls a count window may hold */

/* What a trip predicate sees: the window's counts as of the failure just
 * recorded (that failure included). requests = successes + failures;
 * ignored calls count as neither. consecutive_successes is there for the
 * shape gobreaker's users know: the predicate is asked on a failure, so it
 * is always 0 in the closed state. */
typedef struct resil_breaker_counts {
    uint64_t requests;
    uint64_t successes;
    uint64_t failures;
    uint64_t slow;                  /* with the slow-call rule; else 0 */
    uint32_t consecutive_failures;
    uint32_t consecutive_successes;
} resil_breaker_counts;

/*
 * The custom trip rule (kind flag RESIL_BREAKER_PREDICATE): return true to
 * open the breaker. Asked on each failure recorded while closed, after the
 * other rules of `kind` did not fire, under the breaker's lock: it must not
 * block, and must not call back into this breaker (a deadlock). It is not
 * bound by minimum_throughput — the counts are there for it to judge.
 */
typedef bool (*resil_breaker_trip_fn)(const resil_breaker_counts *c, void *ud);

typedef struct resil_breaker_opts {
    resil_breaker_kind kind;       /* default RESIL_BREAKER_RATIO */
    /* the consecutive rule */
    uint32_t failure_threshold;    /* default 5; >= 1 */
    /* the window (ratio rule and slow-call rule) */
    double failure_ratio;          /* default 0.1; in (0, 1] */
    uint32_t minimum_throughput;   /* default 100; >= 2 when the window is used */
    resil_duration sampling_duration; /* default 30 s; >= 500 ms */
    resil_duration slow_call_duration; /* default 0 = no slow-call rule; >= 0 */
    double slow_call_ratio;        /* default 1.0; in (0, 1] */
    /* open */
    resil_duration break_duration; /* default 5 s; > 0 */
    double break_growth;           /* default 1 (fixed); >= 1, finite */
    resil_duration max_break_duration; /* default 5 min; >= break_duration when growth > 1 */
    /* half-open */
    uint32_t half_open_probes;     /* default 1; >= 1 */
    uint32_t success_threshold;    /* default 1; >= 1 */
    resil_duration probe_timeout;  /* default 0 = the break in force (Polly v8); >= 0 */
    /* wiring */
    resil_clock *clock;            /* NULL = CLOCK_MONOTONIC_COARSE where its tick is
                                      at most 1 % of the shortest span the breaker
                                      measures and no slow-call rule is set, else
                                      resil_clock_system() (docs/breakers.md) */
    resil_breaker_listener_fn listener; /* optional */
    void *listener_ud;
    const char *name;              /* optional; copied; < RESIL_BREAKER_NAME_MAX bytes */
    /* the window's shape: the last window_size calls instead of a span of
     * time (minimum_throughput then counts up to window_size at most) */
    resil_breaker_window window;   /* default RESIL_BREAKER_WINDOW_TIME */
    uint32_t window_size;          /* default 100; [1, 10000] for a count window */
    /* the predicate rule (kind includes RESIL_BREAKER_PREDICATE) */
    resil_breaker_trip_fn trip;    /* required with that flag; else must be NULL */
    void *trip_ud;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_breaker_opts;

RESIL_API void resil_breaker_opts_default(resil_breaker_opts *o);
/* Check every field, naming the first bad one
 * ("breaker.failure_ratio must be in (0,1], got 1.5"). */
RESIL_API int resil_breaker_opts_validate(const resil_breaker_opts *o,
                                          resil_err *err);

/* Create a closed breaker holding one reference. RESIL_EINVAL (err names the
 * field) for bad options, RESIL_ENOMEM. */
RESIL_API int resil_breaker_new(const resil_breaker_opts *o, resil_breaker **out,
                                resil_err *err);
/* Add a reference (NULL-tolerant; returns b). */
RESIL_API resil_breaker *resil_breaker_retain(resil_breaker *b);
/* Drop a reference; the last one frees the breaker (NULL-tolerant). */
RESIL_API void resil_breaker_free(resil_breaker *b);
/* The name given at creation ("" if none). */
RESIL_API const char *resil_breaker_name(const resil_breaker *b);

/* ---- the call protocol ------------------------------------------------ */

typedef struct resil_breaker_permit {
    resil_breaker_state state;  /* the state that admitted or rejected the call */
    bool probe;                 /* admitted as a half-open probe */
    resil_instant start;        /* when admitted, if the breaker read the clock
                                   (slow-call rule, probes); else 0 */
    resil_duration retry_after; /* on rejection: time until the next probe may
                                   be admitted (RESIL_DURATION_MAX: isolated) */
    /* private: the implementation's own */
    uint32_t generation;
    uint32_t probe_slot;
    uint32_t probe_ticket;
    uint32_t ext_flags;
    uint64_t ext[2];
} resil_breaker_permit;

typedef enum resil_breaker_result {
    RESIL_BREAKER_SUCCESS = 0,
    RESIL_BREAKER_FAILURE = 1,
    RESIL_BREAKER_IGNORED = 2 /* counts as neither: e.g. the caller cancelled */
} resil_breaker_result;

/*
 * Ask to run one call. 0: go ahead, and report its result with `p`.
 * RESIL_EREJECTED: do not call; p->retry_after says when a probe may next be
 * admitted. A NULL breaker ("none installed") always admits.
 */
RESIL_API int resil_breaker_acquire(resil_breaker *b, resil_breaker_permit *p);
/*
 * Report the result of a call admitted with `p` (exactly once per admitted
 * call). Returns 0 when the result was taken into account, or RESIL_ESTATE
 * when it was discarded: the breaker changed state since the call was
 * admitted (stale generation), it is disabled, or the call was a probe
 * already replaced after probe_timeout. RESIL_EINVAL for NULL `p`. A NULL
 * breaker returns 0. The slow-call rule times the call from p->start.
 */
RESIL_API int resil_breaker_record(resil_breaker *b, const resil_breaker_permit *p,
                                   resil_breaker_result r);

/* The same, with `now` read from the breaker's own clock by the caller (an
 * executor that has just read it passes it on instead of paying for a
 * second read). */
RESIL_API int resil_breaker_record_at(resil_breaker *b, const resil_breaker_permit *p,
                                      resil_breaker_result r, resil_instant now);

/*
 * Report a call that was not admitted through acquire — a caller that
 * timed it elsewhere (resilience4j's onSuccess/onError with a duration).
 * It counts toward the rules like a permitted call of the current
 * generation, the slow-call rule judging `took`. Counted only while the
 * breaker is closed: in any other state it returns RESIL_ESTATE and counts
 * nothing (half-open is decided by its probes alone). RESIL_EINVAL for a
 * negative `took`, and for an implementation without the operation (the
 * Redis breaker has none). A NULL breaker returns 0.
 */
RESIL_API int resil_breaker_record_success(resil_breaker *b, resil_duration took);
RESIL_API int resil_breaker_record_failure(resil_breaker *b, resil_duration took);

/* Map an outcome to a breaker result. `ctx` is the attempt that produced
 * it, as its operation saw it — its number, hedge index, deadline, token
 * and ctx->user, the call's own context — like every other classifier's
 * (resil_retry_on_fn). Never NULL. */
typedef resil_breaker_result (*resil_breaker_classify_fn)(const resil_outcome *o,
                                                         const resil_attempt_ctx *ctx,
                                                         void *ud);
/* The default: success is SUCCESS, kind Cancelled is IGNORED, any other
 * failure is FAILURE (ctx and ud unused). */
RESIL_API resil_breaker_result resil_breaker_classify_default(const resil_outcome *o,
                                                              const resil_attempt_ctx *ctx,
                                                              void *ud);

/*
 * The outcome of a call a breaker refused in `state`: kind RESIL_REJECTED,
 * code RESIL_EREJECTED, detail "circuit open" (or "circuit half-open",
 * "circuit isolated") and `retry_after` the time until the next probe
 * (permit.retry_after). Every executor — resil_breaker_execute, the
 * pipeline, a fleet breaker — words its refusals through this one.
 */
RESIL_API resil_outcome resil_breaker_rejection(resil_breaker_state state,
                                                resil_duration retry_after);

/*
 * Run `op` once through the breaker: acquire, call op(ctx), classify with
 * the same ctx (NULL = the default classifier), record. Returns 0 when op ran (*out is its
 * outcome), or RESIL_EREJECTED when the breaker refused: *out is then
 * resil_breaker_rejection(p.state, p.retry_after). A NULL breaker runs op
 * directly. RESIL_EINVAL for a NULL op, ctx or out.
 */
RESIL_API int resil_breaker_execute(resil_breaker *b, resil_op_fn op,
                                    resil_attempt_ctx *ctx,
                                    resil_breaker_classify_fn classify,
                                    void *classify_ud, resil_outcome *out);

/* ---- manual control ---------------------------------------------------- */

/* Each returns 0, or a negative code when the implementation could not
 * do it (a fleet breaker whose Redis is unreachable: RESIL_EBACKEND, and
 * nothing changed; one that has no such control: RESIL_EINVAL). The
 * built-in breaker always succeeds. A NULL breaker returns 0. */

/* Hold the breaker open until resil_breaker_close() or reset(). */
RESIL_API int resil_breaker_isolate(resil_breaker *b);
/* Close it by hand from any state: a fresh window and counters, the break
 * back to break_duration; the history (opens, last opened at) is kept. */
RESIL_API int resil_breaker_close(resil_breaker *b);
/* Like close, and forget the history too: as if just created. */
RESIL_API int resil_breaker_reset(resil_breaker *b);
/* Admit everything and record nothing until closed or reset. */
RESIL_API int resil_breaker_disable(resil_breaker *b);

/* ---- diagnostics ------------------------------------------------------- */

/*
 * The state as of the last call: RESIL_BREAKER_NONE for a NULL breaker.
 * Transitions are lazy, so an open breaker whose break has elapsed reads
 * "open" until a call arrives and becomes the probe; stats.next_probe_at
 * tells whether that time has come.
 */
RESIL_API resil_breaker_state resil_breaker_state_of(const resil_breaker *b);

typedef struct resil_breaker_stats {
    resil_breaker_state state;
    uint32_t consecutive_failures;  /* closed: failures since the last success */
    uint32_t consecutive_successes; /* half-open: probe successes so far */
    uint32_t probes_in_flight;      /* half-open: admitted probes not yet reported */
    uint64_t window_total;          /* calls in the rolling window as of now */
    uint64_t window_failures;
    uint64_t window_slow;
    double failure_ratio;           /* window_failures / window_total (0 if empty) */
    double slow_ratio;
    bool ever_opened;
    resil_instant last_opened_at;   /* valid when ever_opened */
    uint64_t opens;                 /* times it went to OPEN (trips and re-opens) */
    resil_instant next_probe_at;    /* open: when a probe may be admitted;
                                       isolated: RESIL_INSTANT_MAX; else 0 */
    resil_duration current_break;   /* the break the next (or current) open uses */
    uint32_t generation;            /* moves on at every transition */
    uint64_t transitions;           /* state changes since creation */
    uint64_t events_dropped;        /* see the listener note above; normally 0 */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_breaker_stats;

/* Fill *out (a consistent snapshot). RESIL_EINVAL for NULL arguments. */
RESIL_API int resil_breaker_stats_get(resil_breaker *b, resil_breaker_stats *out);

/* ---- other implementations ---------------------------------------------- */

typedef enum resil_breaker_control {
    RESIL_BREAKER_DO_ISOLATE = 1,
    RESIL_BREAKER_DO_CLOSE,
    RESIL_BREAKER_DO_RESET,
    RESIL_BREAKER_DO_DISABLE
} resil_breaker_control;

/*
 * An implementation: a table of operations on its own state `self`, shared
 * by every breaker of that kind (keep it static const). The handle checks
 * the arguments, counts references and keeps the name; the operations see
 * only valid ones (a non-NULL permit, a result in range). `size` comes
 * first and versions the table: set it to sizeof(resil_breaker_ops), and
 * operations added later are read only from tables long enough to have
 * them.
 *
 * What an implementation promises is what breaker.h promises for the
 * built-in one — the call protocol, generations and stale results, lazy
 * transitions, manual control — and the conformance suite in
 * tests/support/breaker_conformance.h checks it; docs/breakers.md
 * ("Writing your own breaker") walks through the Redis breaker as the
 * example. The permit's private fields (generation, probe_slot,
 * probe_ticket, ext_flags, ext) are the implementation's to use. A
 * listener the implementation was configured with is called with the
 * handle (resil_breaker_new_custom's *out) as `b`.
 */
typedef struct resil_breaker_ops {
    size_t size;      /* sizeof(resil_breaker_ops) */
    const char *kind; /* "builtin", "redis": what resil_breaker_kind_name() says */
    int (*acquire)(void *self, resil_breaker_permit *p);
    int (*record)(void *self, const resil_breaker_permit *p, resil_breaker_result r);
    resil_breaker_state (*state)(void *self);
    int (*stats)(void *self, resil_breaker_stats *out);
    int (*control)(void *self, resil_breaker_control op);
    /* Safe to forget (a registry evicts idle breakers first); called
     * without the registry's write lock taken by others. NULL = never
     * idle, so such breakers are evicted only when none is idle. */
    bool (*idle)(void *self);
    /* The last reference went; may be NULL. */
    void (*destroy)(void *self);
    /* Added later, read only from tables that reach them: */
    /* resil_breaker_record_success/failure (r is SUCCESS or FAILURE, took
     * >= 0); NULL = not offered, and those calls return RESIL_EINVAL. */
    int (*record_without_permit)(void *self, resil_breaker_result r, resil_duration took);
} resil_breaker_ops;

/*
 * A handle over `self` driven by `ops`, holding one reference; `name` is
 * copied (NULL = ""). RESIL_EINVAL (err says why) when a required operation
 * (acquire, record, state, stats, control) is missing, size is too small
 * or the name too long; RESIL_ENOMEM. On failure `self` is not destroyed.
 */
RESIL_API int resil_breaker_new_custom(const resil_breaker_ops *ops, void *self,
                                       const char *name, resil_breaker **out,
                                       resil_err *err);
/*
 * Build the breaker `name` with the rules `o` (o->name is `name`): set *out
 * to a new reference named `name` and return 0, or return a negative
 * RESIL_E* code (err may say why). How an application hands a registry
 * (registry.h) or its configuration (config.h) a way to make breakers of
 * another implementation — resil_redis_breaker_factory() makes fleet ones.
 */
typedef int (*resil_breaker_factory_fn)(const char *name, const resil_breaker_opts *o,
                                        resil_breaker **out, resil_err *err, void *ud);

/* `self` if `b` is driven by `ops`, else NULL: how an implementation
 * recognises its own breakers in accessors of its own. */
RESIL_API void *resil_breaker_self(const resil_breaker *b, const resil_breaker_ops *ops);
/* ops->kind: "builtin" for resil_breaker_new()'s; "none" for NULL. */
RESIL_API const char *resil_breaker_kind_name(const resil_breaker *b);

RESIL_END_DECLS

#endif
