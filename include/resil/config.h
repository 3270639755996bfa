/*
 * config.h — named policies from JSON configuration (libresil-config).
 *
 * Teams keep resilience settings in configuration, and the worst mistakes
 * are configuration mistakes: a retry schedule that cannot fit in its total
 * timeout, an attempt timeout longer than the total, a breaker that never
 * trips at the real traffic level, retries at several layers. So a document
 * is loaded in one step that either yields an immutable, fully validated
 * resil_config or changes nothing and reports EVERY error, each with its
 * JSON path and the line:column where it was written:
 *
 *   Resilience.CircuitBreakers.orders.FailureRatio at 12:23: must be in (0,1], got 1.5
 *
 * The document is an appsettings.json-style object with a "Resilience"
 * section (other top-level sections belong to the rest of the application
 * and are ignored). Keys carry the seeds' names (Polly, Microsoft's
 * resilience handler, Excalibur) and, as in .NET configuration, match
 * without regard to ASCII case — policy names too. Durations are strings,
 * "00:00:30" or "30s" (resil_duration_parse). docs/configuration.md lists
 * every key with its default and bound.
 *
 * From a resil_config come the library's own option structs, by name (the
 * unnamed default is the library's defaults, never another name's
 * settings), the pipelines as ordered lists of named strategies, and the
 * worst-case analysis behind `resil config check`. From a resil_policies
 * registry come running pipelines by name, swapped atomically on reload.
 *
 * This header belongs to an adapter library (it needs jansson), so the core
 * umbrella resil.h does not include it; link with -lresil-config.
 */
#ifndef RESIL_CONFIG_H
#define RESIL_CONFIG_H

#include "pipeline.h"
#include "route.h"

RESIL_BEGIN_DECLS

typedef struct resil_config resil_config;

#define RESIL_CONFIG_NAME_MAX 64  /* a policy name's bytes, including the NUL */
#define RESIL_CONFIG_PATH_MAX 256 /* a diagnostic's path, including the NUL */
#define RESIL_CONFIG_DIAG_KEEP 100 /* diagnostics kept; the rest are counted */
#define RESIL_CONFIG_MAX_STEPS 8  /* strategies in one pipeline */
#define RESIL_CONFIG_NEST_MAX 8   /* pipelines inside pipelines, the outer one included */

/* ---- diagnostics ---------------------------------------------------------- */

/* One error or warning, where it was written. */
typedef struct resil_config_diag {
    char path[RESIL_CONFIG_PATH_MAX]; /* "Resilience.Retry.orders.BaseDelay";
                                         "" for the document itself */
    uint32_t line, column;  /* 1-based, column in characters; 0 = no position */
    char message[256];      /* "must be in (0,1], got 1.5" */
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_config_diag;

/* A growing list of diagnostics. Zero-initialise it; free with
 * resil_config_diags_free(). At most RESIL_CONFIG_DIAG_KEEP are kept. */
typedef struct resil_config_diags {
    resil_config_diag *items;
    size_t len;
    size_t dropped; /* diagnostics found beyond the kept ones */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_diags;

RESIL_API void resil_config_diags_free(resil_config_diags *d);
/* "PATH at LINE:COLUMN: MESSAGE" (the parts that are known). snprintf-like:
 * returns the length the full text needs. */
RESIL_API size_t resil_config_diag_format(const resil_config_diag *d, char *buf,
                                          size_t cap);

/* ---- loading -------------------------------------------------------------- */

/*
 * Parse and validate `len` bytes of JSON (a leading UTF-8 byte-order mark
 * is skipped). Returns 0 with *out set, or: RESIL_ESYNTAX for text that is
 * not JSON (one diagnostic, at jansson's position), RESIL_EINVAL when
 * validation failed (every error found, in document order), RESIL_ENOMEM.
 * On failure *out is NULL. `diags` may be NULL; when given, errors are
 * appended to it.
 */
RESIL_API int resil_config_parse(const char *text, size_t len, resil_config **out,
                                 resil_config_diags *diags);
/* The same for a file; RESIL_EIO (one diagnostic naming the file and the
 * system's reason) when it cannot be read. */
RESIL_API int resil_config_load_file(const char *path, resil_config **out,
                                     resil_config_diags *diags);
RESIL_API void resil_config_free(resil_config *c);

/* ---- named strategies ----------------------------------------------------- */

typedef enum resil_config_section {
    RESIL_CONFIG_RETRY = 0,          /* "Retry" */
    RESIL_CONFIG_BREAKERS,           /* "CircuitBreakers" */
    RESIL_CONFIG_BULKHEADS,          /* "Bulkheads" */
    RESIL_CONFIG_RATE_LIMITERS,      /* "RateLimiters" */
    RESIL_CONFIG_OPERATION_TIMEOUTS, /* "Timeouts.OperationTimeouts" */
    RESIL_CONFIG_PIPELINES,          /* "Pipelines" */
    RESIL_CONFIG_CHAOS,              /* "Chaos" */
    RESIL_CONFIG_ADAPTIVE_LIMITERS,  /* "AdaptiveLimiters" */
    RESIL_CONFIG_THROTTLES,          /* "Throttles" */
    RESIL_CONFIG_HEDGING,            /* "Hedging" */
    RESIL_CONFIG_FALLBACKS,          /* "Fallbacks" */
    RESIL_CONFIG_BUDGETS             /* "RetryBudgets" */
} resil_config_section;

#define RESIL_CONFIG_SECTION_COUNT 12

/* The key a section has in the document ("CircuitBreakers"). */
RESIL_API const char *resil_config_section_name(resil_config_section s);
/* How many names a section defines, and the i-th in document order, spelt
 * as written (NULL when out of range). */
RESIL_API size_t resil_config_count(const resil_config *c, resil_config_section s);
RESIL_API const char *resil_config_name_at(const resil_config *c, resil_config_section s,
                                           size_t i);

/*
 * The getters below fill *out with a name's options, matching the name
 * without regard to ASCII case. A NULL or empty name is the unnamed
 * default: the library's defaults, whatever names the document defines.
 * Returns 0, RESIL_ENOTFOUND for a name the section does not define (*out
 * then holds the defaults), or RESIL_EINVAL for NULL c or out. Strings in
 * *out (a breaker's name, level names) live as long as the config.
 */

/* A retry policy, with what an HTTP client needs to know about unsafe
 * methods (the analysis warns when they are retried without keys). */
typedef struct resil_config_retry {
    resil_retry_policy policy; /* a Delays list lives as long as the config */
    bool retry_unsafe_methods; /* RetryUnsafeMethods: retry POST and PATCH too */
    bool idempotency_keys;     /* IdempotencyKeys: give such requests a key */
    /* Members added under this SONAME, each in a reserved slot (docs/abi.md). */
    union {
        const char *disable_for; /* DisableFor: methods never retried, comma-separated
                                    ("POST,PATCH", for resil_http_methods_parse);
                                    NULL = none */
        resil_reserved disable_for_r_;
    };
    union {
        const char *const *retry_after_headers; /* RetryAfterHeaders: more wait-hint
                                                   headers, NULL-terminated (for
                                                   resil_http_opts); NULL = none */
        resil_reserved retry_after_headers_r_;
    };
    union {
        const char *budget; /* Budget: the RetryBudgets name the policy draws
                               from (resil_policies shares one object per
                               name); NULL = none. policy.budget stays NULL. */
        resil_reserved budget_r_;
    };
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_config_retry;

#define RESIL_CONFIG_DELAYS_MAX 32      /* waits in a Delays list */
#define RESIL_CONFIG_HINT_HEADERS_MAX 8 /* names in RetryAfterHeaders */

RESIL_API int resil_config_retry_get(const resil_config *c, const char *name,
                                     resil_config_retry *out);
/* The breaker's name is set to the policy's name. */
RESIL_API int resil_config_breaker_get(const resil_config *c, const char *name,
                                       resil_breaker_opts *out);
/* A CircuitBreakers entry's OperationTimeout (Excalibur's: each call
 * through the breaker is bounded by it; a pipeline naming the breaker gets
 * it as its attempt timeout, right after the breaker): 0 when it has none
 * or the name is not defined. */
RESIL_API resil_duration resil_config_breaker_operation_timeout(const resil_config *c,
                                                                const char *name);
RESIL_API int resil_config_bulkhead_get(const resil_config *c, const char *name,
                                        resil_bulkhead_opts *out);

typedef struct resil_config_ratelimit {
    resil_ratelimit_opts opts;
    resil_duration max_wait; /* MaxWait: how long a call may wait for a permit */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_ratelimit;

RESIL_API int resil_config_ratelimit_get(const resil_config *c, const char *name,
                                         resil_config_ratelimit *out);

/* Chaos.NAME: Kind (Fault, Outcome, Latency), InjectionRate, Enabled,
 * Seed, Latency, OutcomeKind and Code (what a Fault or Outcome injects). */
RESIL_API int resil_config_chaos_get(const resil_config *c, const char *name,
                                     resil_chaos_opts *out);
/* AdaptiveLimiters.NAME: Algorithm (Vegas, Gradient, Aimd), InitialLimit,
 * MinLimit, MaxLimit, Window, WindowSamples, Smoothing, MaxQueueLength,
 * QueueTimeout, BackoffRatio, LatencyThreshold, Tolerance. */
RESIL_API int resil_config_adaptive_limiter_get(const resil_config *c, const char *name,
                                                resil_limiter_opts *out);
/* Throttles.NAME: K, Window, Buckets, Seed. */
RESIL_API int resil_config_throttle_get(const resil_config *c, const char *name,
                                        resil_throttle_opts *out);
/* Hedging: Microsoft's hedging options (MaxHedgedAttempts 1, Delay 2 s)
 * and, when the entry lists Endpoints, where hedge k goes: an ordered
 * route of one endpoint per hedge, for resil_http_opts.hedge_route (the
 * route lives as long as the config). */
typedef struct resil_config_hedge {
    resil_hedge_opts opts;
    const resil_route_opts *route; /* NULL: hedges go where the request goes */
    resil_reserved reserved_[4];   /* room to grow (docs/abi.md) */
} resil_config_hedge;

RESIL_API int resil_config_hedge_get(const resil_config *c, const char *name,
                                     resil_config_hedge *out);
/* Fallbacks: a static answer, the outcome a "Fallback:NAME" step returns
 * in place of a failure (Kind, Code, Detail; default a success with code
 * 0). The unnamed default is that success. */
RESIL_API int resil_config_fallback_get(const resil_config *c, const char *name,
                                        resil_outcome *out);
/* RetryBudgets: a budget's options (Model Tokens, Quota or Ratio and that
 * model's keys; the library's defaults). */
RESIL_API int resil_config_budget_get(const resil_config *c, const char *name,
                                      resil_budget_opts *out);

/* Timeouts.OperationTimeouts[operation], else Timeouts.DefaultTimeout (30 s
 * unless set) for a NULL or unknown operation. */
RESIL_API resil_duration resil_config_timeout(const resil_config *c, const char *operation);

/* GracefulDegradation: true when the document has the section; *out is
 * filled either way (with the library's defaults when absent). */
RESIL_API bool resil_config_degrade_get(const resil_config *c, resil_degrade_opts *out);

/* DistributedCircuitBreaker, for the fleet adapter: the breaker options
 * (Excalibur's defaults: ratio 0.5 of at least 10 calls over 30 s, or 5 in a
 * row; break 30 s; 3 successes close) and how often to sync. When Enabled,
 * resil_policies builds every CircuitBreakers entry through the
 * application's breaker_factory (resil_policies_opts), so that each named
 * breaker is shared by the fleet; the factory may read this section for
 * its client's SyncInterval and its fallback's rules. */
typedef struct resil_config_distributed {
    bool enabled;                 /* Enabled, default false */
    resil_duration sync_interval; /* SyncInterval, default 5 s */
    resil_breaker_opts breaker;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_distributed;

RESIL_API bool resil_config_distributed_get(const resil_config *c,
                                            resil_config_distributed *out);

/* ---- pipelines ------------------------------------------------------------ */

/*
 * A pipeline is an ordered list of strategy references, outermost first:
 *   "RateLimiter:api", "Bulkhead:db", "TotalTimeout" (the Timeouts table
 *   picks per operation), "TotalTimeout:10s" or "TotalTimeout:OPERATION",
 *   "Retry:orders", "CircuitBreaker:orders", "AttemptTimeout:2s" (or
 *   ":OPERATION"), "GracefulDegradation", "Hedging:NAME", "Fallback:NAME",
 *   "StandardHedging" (resil_pipeline_standard_hedging, its hedging from
 *   a Hedging entry with "StandardHedging:NAME"; the pipeline's only
 *   step), and last, "Pipeline:inner" — a whole other pipeline as the operation,
 *   i.e. a second layer. "Retry" may appear more than once (an outer retry
 *   around an inner one, each with its own policy).
 */
typedef enum resil_config_step_kind {
    RESIL_CONFIG_STEP_RATE_LIMITER = 1,
    RESIL_CONFIG_STEP_BULKHEAD,
    RESIL_CONFIG_STEP_TOTAL_TIMEOUT,
    RESIL_CONFIG_STEP_RETRY,
    RESIL_CONFIG_STEP_BREAKER,
    RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT,
    RESIL_CONFIG_STEP_DEGRADE,
    RESIL_CONFIG_STEP_PIPELINE,
    RESIL_CONFIG_STEP_CHAOS,            /* "Chaos:NAME" */
    RESIL_CONFIG_STEP_ADAPTIVE_LIMITER, /* "AdaptiveLimiter:NAME" */
    RESIL_CONFIG_STEP_THROTTLE,         /* "Throttle:NAME" */
    RESIL_CONFIG_STEP_HEDGING,          /* "Hedging:NAME" */
    RESIL_CONFIG_STEP_FALLBACK,         /* "Fallback:NAME" */
    RESIL_CONFIG_STEP_STANDARD_HEDGING  /* "StandardHedging" or ":NAME" (a
                                           Hedging entry): Microsoft's whole
                                           hedging handler, alone in its
                                           pipeline */
} resil_config_step_kind;

typedef struct resil_config_step {
    resil_config_step_kind kind;
    const char *ref;        /* the named policy or pipeline, or a timeout's
                               operation, as the document defines it; else NULL */
    resil_duration timeout; /* timeouts: the duration (0 with per_operation) */
    bool per_operation;     /* a bare "TotalTimeout": the call's operation
                               picks its timeout from the Timeouts table */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_step;

typedef struct resil_config_pipeline {
    const char *name;
    size_t nsteps;
    resil_config_step steps[RESIL_CONFIG_MAX_STEPS];
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_pipeline;

/* "RateLimiter", "Bulkhead", "TotalTimeout", "Retry", "CircuitBreaker",
 * "AttemptTimeout", "GracefulDegradation", "Pipeline", "Chaos",
 * "AdaptiveLimiter", "Throttle", "Hedging", "Fallback", "StandardHedging";
 * "" if unknown. */
RESIL_API const char *resil_config_step_name(resil_config_step_kind k);
/* A pipeline by name (case-insensitive): 0, RESIL_ENOTFOUND, RESIL_EINVAL
 * (NULL arguments or empty name: pipelines have no unnamed default here;
 * the registry's is the standard pipeline). */
RESIL_API int resil_config_pipeline_get(const resil_config *c, const char *name,
                                        resil_config_pipeline *out);

/* ---- worst-case analysis -------------------------------------------------- */

typedef struct resil_config_analysis_opts {
    double rate; /* expected requests per second; 0 = unknown */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_analysis_opts;

/*
 * One pipeline's figures (or a retry policy's that no pipeline uses).
 * RESIL_DURATION_MAX means unbounded; UINT64_MAX calls means unbounded.
 *
 *   worst_case = attempts × attempt_bound + waits
 *
 * where attempt_bound is the attempt timeout, or an inner pipeline's own
 * bound, and waits is the sum of the backoff schedule's waits (the formula
 * capped by MaxDelay: what the seeds write down, e.g. 0.5 + 1 + 2 s).
 * Jitter can draw longer waits than the formula for some kinds (polly,
 * proportional, decorrelated): waits_max and worst_case_jitter use the
 * largest draws.
 */
typedef struct resil_config_analysis {
    char name[RESIL_CONFIG_NAME_MAX];
    bool pipeline;                  /* false: a retry policy on its own */
    char strategies[320];           /* "total-timeout 10s → retry orders → …" */
    uint32_t attempts;              /* this layer's; RESIL_ATTEMPTS_FOREVER */
    resil_duration attempt_timeout; /* 0 = none */
    resil_duration attempt_bound;   /* what one attempt can take */
    resil_duration waits;
    resil_duration waits_max;
    char waits_text[160];           /* "500ms + 1s + 2s = 3.5s" */
    resil_duration worst_case;
    resil_duration worst_case_jitter;
    resil_duration total_timeout;   /* the smaller of TotalTimeout and the
                                       policy's TimeBudget; 0 = none */
    bool per_operation;             /* total_timeout is the table's default */
    bool fits;                      /* worst_case <= total_timeout (true
                                       with no total timeout or one attempt) */
    uint64_t max_calls;             /* calls one request can make, all layers */
    uint32_t retry_layers;          /* layers that retry (attempts > 1) */
    resil_retry_after_mode retry_after;
    resil_duration retry_after_max; /* the cap on one server hint */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_analysis;

typedef struct resil_config_report {
    resil_config_analysis *items; /* pipelines in document order, then the
                                     retry policies no pipeline uses */
    size_t len;
    resil_config_diags warnings;  /* each with the path it concerns */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_config_report;

/* Analyse every pipeline. `o` may be NULL. Returns 0, RESIL_EINVAL (NULL
 * arguments) or RESIL_ENOMEM. Free the report with resil_config_report_free. */
RESIL_API int resil_config_analyze(const resil_config *c, const resil_config_analysis_opts *o,
                                   resil_config_report *out);
RESIL_API void resil_config_report_free(resil_config_report *r);

typedef enum resil_config_format {
    RESIL_CONFIG_TEXT = 0,
    RESIL_CONFIG_JSON
} resil_config_format;

/* The report as `resil config check` prints it, or as one JSON object.
 * snprintf-like: returns the length the full text needs. */
RESIL_API size_t resil_config_report_write(const resil_config_report *r,
                                           resil_config_format f, char *buf, size_t cap);
/* Diagnostics one per line, or as {"errors":[...]}. snprintf-like. */
RESIL_API size_t resil_config_diags_write(const resil_config_diags *d,
                                          resil_config_format f, char *buf, size_t cap);

/* ---- the registry of named policies ---------------------------------------- */

/*
 * Running pipelines by name, built from a config and swapped whole on
 * reload. A reader takes a reference to the current snapshot (a short read
 * lock and an atomic increment, no allocation) and runs on it for as long
 * as it likes; a reload builds a new snapshot beside it, swaps the pointer,
 * and the old one is freed by whoever drops its last reference — so
 * running executions finish on the policies they started with and new ones
 * get the new policies, never a mixture.
 *
 * Stateful strategies are named objects shared by every pipeline that
 * names them: "CircuitBreaker:orders" in two pipelines is one breaker, and
 * two names never share one. A reload keeps the object of every name whose
 * options did not change — its breaker state, bulkhead permits, limiter
 * tokens and degradation level carry over — and starts a fresh one for a
 * name whose options did.
 *
 * The unnamed default (NULL or "") is the standard pipeline with
 * Microsoft's defaults (resil_pipeline_standard), built once per registry.
 */
typedef struct resil_policies resil_policies;

typedef struct resil_policies_opts {
    resil_clock *clock;      /* every object and pipeline; NULL = the system clock */
    resil_event_fn listener; /* optional: every pipeline's events and the shared
                                breakers' and monitor's changes (pipeline "") */
    void *listener_ud;
    resil_metrics *metrics;  /* optional; must outlive the registry */
    /* Builds the CircuitBreakers entries while the document's
     * DistributedCircuitBreaker is Enabled (an apply of such a document
     * without one fails); e.g. resil_redis_breaker_factory with a
     * resil_redis_factory. Otherwise the built-in breaker is used. */
    resil_breaker_factory_fn breaker_factory;
    void *breaker_factory_ud;
    /* Build the RateLimiters and Bulkheads entries marked "Distributed":
     * true (an apply of such an entry without its factory fails); e.g.
     * resil_redis_ratelimit_factory and resil_redis_concurrency_factory
     * with a resil_redis_limits_factory. */
    resil_ratelimit_factory_fn ratelimit_factory;
    void *ratelimit_factory_ud;
    resil_bulkhead_factory_fn bulkhead_factory;
    void *bulkhead_factory_ud;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_policies_opts;

RESIL_API void resil_policies_opts_default(resil_policies_opts *o);
/* `o` may be NULL. RESIL_EINVAL, RESIL_ENOMEM, RESIL_ESYS. */
RESIL_API int resil_policies_new(const resil_policies_opts *o, resil_policies **out,
                                 resil_err *err);
/* No policy reference may be held. */
RESIL_API void resil_policies_free(resil_policies *r);

/* Build the config's pipelines and make them current. On failure (err says
 * why) the current policies stay as they were. The config may be freed
 * afterwards. Applies are serialised; readers are never blocked by one for
 * longer than the pointer swap. */
RESIL_API int resil_policies_apply(resil_policies *r, const resil_config *c, resil_err *err);
/* Parse, validate and apply a file; a document with errors (all of them in
 * diags) changes nothing. Returns as resil_config_load_file, or the apply's
 * error (one diagnostic). */
RESIL_API int resil_policies_load_file(resil_policies *r, const char *path,
                                       resil_config_diags *diags);
/* How many applies have succeeded. */
RESIL_API uint64_t resil_policies_version(resil_policies *r);

/* A reference to one named pipeline of the snapshot current when taken. */
typedef struct resil_policy {
    const resil_pipeline *pipeline; /* the outermost pipeline */
    void *snapshot_;                /* private */
    size_t index_;                  /* private */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_policy;

/* Resolve a pipeline name (case-insensitive; NULL or "" = the default).
 * 0, or RESIL_ENOTFOUND (never another name's pipeline), RESIL_EINVAL. */
RESIL_API int resil_policies_get(resil_policies *r, const char *name, resil_policy *out);
/* Drop the reference (idempotent: the struct is emptied). */
RESIL_API void resil_policy_release(resil_policy *p);
/* Run `op` through the policy, and through its inner pipelines when the
 * last step is "Pipeline:NAME" (the inner call gets the outer attempt's
 * cancellation token). As resil_pipeline_execute. */
RESIL_API int resil_policy_execute(const resil_policy *p, resil_op_fn op, const resil_call *call,
                                   resil_pipeline_result *out);
/* The current snapshot's breaker for a CircuitBreakers name, as a new
 * reference (resil_breaker_free it): 0 or RESIL_ENOTFOUND. */
RESIL_API int resil_policies_breaker(resil_policies *r, const char *name, resil_breaker **out);

RESIL_END_DECLS

#endif
