/*
 * pipeline_internal.h — what the pipeline's files share: the frozen
 * strategy list, one execution's inputs, and the frame each strategy hands
 * the next.
 *
 * An execution is a walk down the strategy list: strategy i does its part
 * and calls resil__chain(r, i + 1, frame) for the rest (or runs the next
 * level's body inlined, where the build paired them: pipeline_strategies.c
 * says when). What changes from
 * one level to the next (attempt number, deadline, token) travels in the
 * frame, on the stack; what is fixed for the whole execution (the
 * operation, the caller's context, the resolved breaker) is in the run,
 * read-only below the retry so that hedging can copy it to its workers.
 */
#ifndef RESIL_PIPELINE_INTERNAL_H
#define RESIL_PIPELINE_INTERNAL_H

#include <pthread.h>

#include "resil/pipeline.h"
#include "internal.h"

/* Every kind at most once but the retry, plus the implicit single attempt. */
#define RESIL__MAX_NODES (RESIL_STRATEGY_KIND_COUNT + RESIL_PIPELINE_MAX_RETRIES)

typedef struct resil__hedge_pool resil__hedge_pool;
struct resil__run;
struct resil__frame;

/* One level of the blocking walk: strategy i's part (pipeline_strategies.c
 * and its siblings), or the operation itself past the last strategy. */
typedef void resil__step_fn(const struct resil__run *r, size_t i, const struct resil__frame *f,
                            resil_outcome *out);

typedef struct resil__node {
    resil__step_fn *step; /* fixed at build, by kind */
    resil_strategy_kind kind;
    bool implicit; /* the single attempt of a pipeline without retry */
    bool inner;    /* a retry inside another: it leaves the result alone */
    bool owned;    /* the object below was made from options */
    bool first_alone; /* retry: a first attempt's success needs nothing of the
                         executor (no budget, no time budget, no retry on
                         results, no listener), so the walk runs it directly */
    struct resil_pipeline *pipeline;
    /* one of these, by kind */
    resil_ratelimit *ratelimit;
    resil_duration rate_wait;
    resil_bulkhead *bulkhead;
    resil_timeout_opts timeout;
    resil_retry_policy policy;      /* as given */
    resil_retry_policy run_policy;  /* the copy executed: on_retry reports first */
    bool same_clock;                /* the limiter reads the pipeline's clock */
    resil_breaker *breaker;         /* a reference */
    resil_breaker_opts breaker_opts; /* as built, for describe (owned breakers) */
    resil_registry *registry;
    resil_hedge_opts hedge;
    resil__hedge_pool *pool;
    resil_fallback_opts fallback;
    resil_degrade *degrade;
    resil_chaos *chaos;             /* the four chaos kinds */
    resil_chaos_opts chaos_opts;    /* what an injection does, read on the call path */
    resil_limiter *limiter;
    resil_throttle *throttle;
} resil__node;

struct resil_pipeline {
    char name[RESIL_PIPELINE_NAME_MAX];
    uint64_t serial; /* this pipeline's number, of all the process builds, from 1 */
    resil_clock *clock;
    clockid_t clock_id; /* resil__clock_id(clock), fixed at build */
    resil__node nodes[RESIL__MAX_NODES + 1]; /* + the operation's step, after the last */
    size_t nnodes;
    size_t hedge_at; /* the hedging node's index, SIZE_MAX for none (fixed at build) */
    bool standard;   /* the whole standard shape, resil__standard_shape (fixed at build) */
    resil_breaker_classify_fn classify;
    void *classify_ud;
    resil_listener listeners[RESIL_PIPELINE_MAX_LISTENERS];
    size_t nlisteners;
    resil_metrics *metrics; /* watching our gauges, to unwatch at free */
    char **warnings;
    size_t nwarnings;
    /* quick access for execute */
    resil_breaker *breaker;
    resil_registry *registry;
    /* listeners of owned objects, called after ours */
    resil_breaker_listener_fn user_breaker_listener;
    void *user_breaker_ud;
    resil_degrade_listener user_degrade_listener;
    void *user_degrade_ud;
};

/* The outermost node of kind `k`, or NULL (also for a NULL pipeline). */
static inline const resil__node *resil__node_find(const struct resil_pipeline *p,
                                                  resil_strategy_kind k)
{
    for (size_t i = 0; p != NULL && i < p->nnodes; i++)
        if (p->nodes[i].kind == k)
            return &p->nodes[i];
    return NULL;
}

/* resil_pipeline_classify_default(), inline for the breaker step, which
 * skips building the context the default does not read. */
static inline resil_breaker_result resil__classify_default(const resil_outcome *o)
{
    switch (o->kind) {
    case RESIL_SUCCESS:
        return RESIL_BREAKER_SUCCESS;
    case RESIL_TRANSIENT:
    case RESIL_THROTTLED:
    case RESIL_TIMEOUT:
        return RESIL_BREAKER_FAILURE;
    case RESIL_CANCELLED:
    case RESIL_REJECTED:
        return RESIL_BREAKER_IGNORED;
    default:
        return RESIL_BREAKER_SUCCESS;
    }
}

/* What only the caller's thread writes during an execution. */
typedef struct resil__exec {
    resil_pipeline_result *out;
    resil_instant last_now; /* the latest clock reading taken on the way */
} resil__exec;

/* One execution's fixed inputs. `ex` is NULL on hedging workers: only the
 * caller's thread writes the result. */
typedef struct resil__run {
    const struct resil_pipeline *p;
    resil_op_fn op;
    void *user;
    resil_breaker *breaker;
    const char *key;
    const char *operation;
    int32_t priority;
    bool non_idempotent;
    resil_rng *rng;
    resil_attempt_record *records;
    size_t records_cap;
    resil__exec *ex;
    /* a reference per hedged attempt given its own key (resil_call.hedge_keys);
     * NULL = `breaker`. Only the first nhedge_breakers slots are written:
     * clearing all of them cost a run without routes 88 bytes of stores. */
    uint32_t nhedge_breakers;
    resil_breaker *hedge_breakers[RESIL_HEDGE_MAX + 1];
    const resil_exec_trace *trace; /* NULL unless traced and sampled */
    const resil_http_attrs *http;
} resil__run;

/* resil_call_default()'s values, for a call given as NULL. */
extern const resil_call resil__call_defaults;

/* The result before the walk: every field but the two outcomes, which the
 * walk writes (and the reserved room, left as the caller's): clearing
 * them too costs more than the rest of a success. */
static inline void resil__result_begin(resil_pipeline_result *out)
{
    out->stop = RESIL_STOP_NONE;
    out->fallback = false;
    out->attempts = 0;
    out->records_len = 0;
    out->hedges = 0;
    out->hedge_winner = 0;
}

/* A run of `op` on `p` with the call's options; its breakers are taken
 * afterwards (resil__run_take_breakers). The hedge slots are left as they
 * are: nothing reads past nhedge_breakers. */
static inline void resil__run_init(resil__run *r, const struct resil_pipeline *p,
                                   resil_op_fn op, const resil_call *call,
                                   resil_breaker *breaker, resil__exec *ex)
{
    r->p = p;
    r->op = op;
    r->user = call->user;
    r->breaker = breaker;
    r->key = call->key;
    r->operation = call->operation;
    r->priority = call->priority;
    r->non_idempotent = call->non_idempotent;
    r->rng = call->rng;
    r->records = call->records;
    r->records_cap = call->records_cap;
    r->ex = ex;
    r->nhedge_breakers = 0;
    r->trace = NULL;
    r->http = NULL;
}

/* The run's breakers from the pipeline's registry, if it has one: the
 * call's and one per entry of call->hedge_keys. 0, or the registry's error
 * with none held; RESIL_EINVAL when the call names more hedge keys than it
 * has attempts (resil__hedge_keys_too_many). */
int resil__run_take_registry_breakers(resil__run *r, const resil_call *call);
bool resil__hedge_keys_too_many(const resil_call *call);
void resil__run_drop_registry_breakers(resil__run *r);
void resil__run_retain_registry_breakers(const resil__run *r);

/* A copy of a run that may outlive the caller's memory (a hedge's losers
 * report after the execution returned) keeps its own copies of what the
 * run points to there: the key (unless it is the name of a registry
 * breaker the run holds), the operation's name and the HTTP attributes
 * its events carry; its breakers are its own (resil__run_retain_breakers).
 * resil__run_kept_size is the bytes the copies take; resil__run_keep makes
 * them in `buf` (aligned as a pointer) and points the run at them, or
 * returns false, the run untouched, when they do not fit in `cap`. */
size_t resil__run_kept_size(const resil__run *r);
bool resil__run_keep(resil__run *r, char *buf, size_t cap);
/* resil__run_kept_size of the run `call` starts on `p`, before there is one. */
size_t resil__call_kept_size(const resil_pipeline *p, const resil_call *call);

static inline int resil__run_take_breakers(resil__run *r, const resil_call *call)
{
    return r->p->registry != NULL ? resil__run_take_registry_breakers(r, call) : 0;
}

static inline void resil__run_drop_breakers(resil__run *r)
{
    if (r->p->registry != NULL)
        resil__run_drop_registry_breakers(r);
}

/* One more reference to each breaker the run holds, for a copy of it that
 * may outlive the execution (a blocking hedge's race, whose losers meet
 * their endpoints' breakers after the caller has dropped its own); the
 * copy lets go with resil__run_drop_breakers. */
static inline void resil__run_retain_breakers(const resil__run *r)
{
    if (r->p->registry != NULL)
        resil__run_retain_registry_breakers(r);
}

/* The breaker an attempt of frame `hedge` meets. */
static inline resil_breaker *resil__breaker_of(const resil__run *r, uint32_t hedge)
{
    resil_breaker *b = hedge < r->nhedge_breakers ? r->hedge_breakers[hedge] : NULL;
    return b != NULL ? b : r->breaker;
}

/* A clock reading one strategy took on the way out of an attempt, which
 * the retry may take as its own "attempt ended" reading instead of reading
 * again. A strategy that runs user code on the way out clears `fresh`. */
typedef struct resil__reading {
    resil_instant now;
    bool fresh;
} resil__reading;

/* What changes from one strategy to the next. */
typedef struct resil__frame {
    uint32_t attempt;             /* 0 outside the retry */
    uint32_t hedge;               /* the hedge running this (0 = primary or unhedged) */
    resil_instant now;            /* the latest clock reading, no wait since */
    resil_instant deadline;       /* RESIL_INSTANT_MAX = none */
    resil_cancel *cancel;         /* the innermost token; may be NULL */
    resil_cancel *deadline_token; /* the token the deadline belongs to */
    resil__reading *reading;      /* inside a retry on the caller's thread; else NULL */
} resil__frame;

/* The attempt as the caller's operation, classifiers and hooks see it at
 * frame `f`: the frame's attempt, hedge, deadline and token, the
 * pipeline's clock and the call's user data. */
static inline resil_attempt_ctx resil__frame_ctx(const resil__run *r, const resil__frame *f)
{
    return (resil_attempt_ctx){.attempt = f->attempt,
                               .deadline = f->deadline,
                               .cancel = f->cancel,
                               .clock = r->p->clock,
                               .user = r->user,
                               .hedge = f->hedge,
                               .trace = r->trace};
}

/* The rest of the walk from level i: one indirect call to the step the
 * build fixed for that level (the operation's after the last strategy),
 * rather than a bounds check and a switch on the kind at every level.
 * The outcome is written through `out`, not returned: an outcome is 88
 * bytes, and copying it up through every level cost more than the rest of
 * the walk. */
static inline void resil__chain(const resil__run *r, size_t i, const resil__frame *f,
                                resil_outcome *out)
{
    r->p->nodes[i].step(r, i, f, out);
}
/* A fresh clock reading after a wait, kept as the execution's latest
 * (pipeline_strategies.c). */
resil_instant resil__read_now(const resil__run *r);
/* The strategies below an admission (a bulkhead's, an adaptive limiter's)
 * start where it ended: a fresh reading of the clock only when the caller
 * waited in the queue. `next` runs them: resil__chain(), or a body the
 * caller inlines (pipeline_strategies.c), which this, inlined too, turns
 * into a direct call. */
static RESIL__ALWAYS_INLINE void resil__chain_admitted(const resil__run *r, size_t i,
                                                       const resil__frame *f,
                                                       resil_duration queued,
                                                       resil__step_fn *next, resil_outcome *out)
{
    if (queued <= 0) {
        next(r, i + 1, f, out);
        return;
    }
    resil__frame inner = *f;
    inner.now = resil__read_now(r);
    next(r, i + 1, &inner, out);
}

/* Strategies (pipeline_strategies.c, hedge.c). */
void resil__run_rate_limiter(const resil__run *r, size_t i, const resil__frame *f,
                             resil_outcome *out);
void resil__run_bulkhead(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out);
void resil__run_timeout(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out);
void resil__run_retry(const resil__run *r, size_t i, const resil__frame *f,
                      resil_outcome *out);
void resil__run_breaker(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out);
/* The operation itself, the step after the last strategy. */
void resil__run_op(const resil__run *r, size_t i, const resil__frame *f, resil_outcome *out);
/* One step running node n's level and the one below it (`below`, NULL for
 * the operation) when both have a body the blocking walk can inline, else
 * NULL. */
resil__step_fn *resil__step_pair(const resil__node *n, const resil__node *below);
/* The standard shape's levels, in order (resil_pipeline_add_standard).
 * Constant here, so that a walk naming them by place folds them. */
#define RESIL__STANDARD_LEVELS 5
static const resil_strategy_kind resil__standard_shape[RESIL__STANDARD_LEVELS] = {
    RESIL_STRATEGY_BULKHEAD, RESIL_STRATEGY_TOTAL_TIMEOUT, RESIL_STRATEGY_RETRY,
    RESIL_STRATEGY_BREAKER, RESIL_STRATEGY_ATTEMPT_TIMEOUT};

/* One step running nodes[i..n) and the operation when they are a tail of
 * the standard shape of two levels or more, else NULL. */
resil__step_fn *resil__step_standard_tail(const resil__node *nodes, size_t n, size_t i);
void resil__run_fallback(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out);
void resil__run_degrade(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out);
void resil__run_hedging(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out);
void resil__run_chaos(const resil__run *r, size_t i, const resil__frame *f,
                      resil_outcome *out);
void resil__run_adaptive_limiter(const resil__run *r, size_t i, const resil__frame *f,
                                 resil_outcome *out);
void resil__run_throttle(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out);

/* What the strategies in other files share with pipeline_strategies.c: a
 * rejection by strategy `k` reported as event `t` (and resil__read_now()
 * above). */
void resil__reject(const resil__run *r, resil_event_type t, resil_strategy_kind k,
                   const resil__frame *f, const char *detail, resil_duration retry_after,
                   resil_outcome *out);

/* The builder's steps for strategies added from other files
 * (pipeline.c): a fresh node of kind `k`, or the builder's error; commit
 * it; keep a constructor's error; refuse a NULL argument. */
int resil__builder_node(resil_pipeline_builder *b, resil_strategy_kind k, resil__node **n);
int resil__builder_commit(resil_pipeline_builder *b);
int resil__builder_keep(resil_pipeline_builder *b, int code, const resil_err *e);
int resil__builder_null(resil_pipeline_builder *b, const char *what);
struct resil_pipeline *resil__builder_pipeline(resil_pipeline_builder *b);
/* The limit-changed events of a limiter the pipeline made (pipeline_adaptive.c). */
void resil__limit_changed(void *ud, int32_t from, int32_t to, resil_instant at);
/* Internals of the adaptive objects the pipeline reads (adaptive.c, throttle.c). */
resil_clock *resil__limiter_clock(const resil_limiter *l);
int resil__limiter_acquire_at(resil_limiter *l, resil_cancel *cancel, resil_instant now,
                              resil_limiter_ticket *t);
resil_clock *resil__throttle_clock(const resil_throttle *t);
/* The built-in limiter's queue (NULL for another implementation), and its
 * ticket for a permit taken from that queue directly (pipeline_async.c). */
struct resil_bulkhead *resil__limiter_bulkhead(const resil_limiter *l);
void resil__limiter_granted(resil_limiter *l, resil_limiter_ticket *t, resil_instant now,
                            resil_duration queued);
bool resil__limiter_take_parked(resil_limiter *l, resil_instant now, resil_limiter_ticket *t);

/* The clock the retry executor reads and sleeps on, and the retry level's
 * link to the levels below it (pipeline_strategies.c). The asynchronous
 * execution keeps one per retry level too, for the same hooks. */
typedef struct resil__cursor {
    resil_clock base; /* first: the executor's clock pointer is the cursor */
    resil_clock *inner;
    resil__reading latest; /* fresh: the executor's next read may take it */
    resil_instant deadline;
    resil_cancel *deadline_token;
    const resil__run *r;
    const resil__node *node;
    size_t next;
    resil_cancel *attempt_deadline_token;
    const resil_attempt_ctx *last; /* the executor's context of the latest attempt */
    resil_duration waited;         /* the wait before the next attempt reported */
    /* A first attempt run before the executor (its failure): the executor's
     * attempt 1 takes this outcome and the reading it ended with. */
    const resil_outcome *first;
    resil__reading first_end;
} resil__cursor;

void resil__cursor_init(resil__cursor *k, const resil__run *r, size_t i, const resil__frame *f);
/* on_attempt of the retry executor inside a pipeline: telemetry. */
void resil__retry_report_attempt(const resil_attempt_record *rec, void *ud);
/* The retry's numbers into the pipeline's result. */
void resil__retry_keep_result(const resil__run *r, const resil_retry_result *res,
                              const resil__cursor *k);
/* The retry executor's options for the retry at the cursor's node, the same
 * on both walks. */
void resil__retry_opts(resil_exec_opts *o, const resil__run *r, const resil__frame *f,
                       resil_cancel *cancel, resil__cursor *k);

/* The retry policy's on_retry as executed: reports, then calls the
 * caller's hook with the caller's context (pipeline_strategies.c). */
void resil__retry_announce(const resil_retry_info *info, void *user, void *hook_ud);
/* The retry policy's retry_on as executed: the caller's classifier, handed
 * the caller's context rather than the executor's (pipeline_strategies.c). */
bool resil__retry_classify(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud);
/* The retry policy's delay generator as executed, the same way. */
resil_duration resil__retry_delay(const resil_delay_info *info, void *ud);

/* A rejection by strategy `k`: kind RESIL_REJECTED, code k. */
resil_outcome resil__rejected(resil_strategy_kind k, const char *detail,
                              resil_duration retry_after);
/* Who refused, if `o` is a strategy's rejection. */
resil_strategy_kind resil__rejected_by(const resil_outcome *o);

/* The result after the walk: the cause, and who refused (a refused retry
 * when no strategy did). rejected_by is decided in a local and stored
 * once: compilers test it and the stop beside it with one 8-byte load,
 * which cannot be forwarded from a 4-byte store just made to half of it
 * (a stall of about 5 ns, a tenth of what resil adds to one retry on
 * libuv). */
static inline void resil__result_end(resil_pipeline_result *out)
{
    if (!out->fallback)
        out->cause = out->outcome;
    resil_strategy_kind by = resil__rejected_by(&out->cause);
    if (by == RESIL_STRATEGY_NONE && out->stop == RESIL_STOP_REFUSED)
        by = RESIL_STRATEGY_RETRY;
    out->rejected_by = by;
}

/* Telemetry: fill the common fields and deliver to every listener. Call
 * only when p->nlisteners > 0 (the one branch telemetry costs when off).
 * `at` is a reading the caller already has: events read no clock. */
void resil__event_init(resil_event *ev, const struct resil_pipeline *p,
                       resil_event_type t, resil_strategy_kind k, resil_instant at);
void resil__emit(const struct resil_pipeline *p, resil_event *ev);
/* The same for an event of one execution: also its trace and HTTP
 * attributes, so every sink sees them whatever path reported it. */
void resil__event_init_run(resil_event *ev, const resil__run *r, resil_event_type t,
                           resil_strategy_kind k, resil_instant at);
/* The execution's span under `parent`, in *t; NULL when the call is
 * untraced or sampled out (trace.c). */
const resil_exec_trace *resil__trace_begin(const resil_span_context *parent, resil_rng *rng,
                                           resil_exec_trace *t);
static inline bool resil__listening(const struct resil_pipeline *p)
{
    return p->nlisteners > 0;
}

/* Deadline arithmetic shared by the timeout strategies and ctx helpers. */
static inline resil_instant resil__earlier(resil_instant a, resil_instant b)
{
    return a < b ? a : b;
}
/* Sleep `d` on `clock`, ending early at `deadline`: 0 after the full wait,
 * RESIL_ETIMEDOUT when the deadline came first (deadline_token, if any, is
 * fired with that reason), RESIL_ECANCELED when `cancel` fired. */
int resil__sleep_bounded(resil_clock *clock, resil_duration d, resil_cancel *cancel,
                         resil_instant deadline, resil_cancel *deadline_token);

/* The hedging worker pool (hedge.c), of resil__hedge_workers() threads. */
int resil__hedge_pool_new(const resil_hedge_opts *o, resil__hedge_pool **out);
static inline uint32_t resil__hedge_workers(const resil_hedge_opts *o)
{
    return o->workers != 0 ? o->workers : 4 * (o->max_hedged + 1);
}
void resil__hedge_pool_free(resil__hedge_pool *pool);

/* Text built into a caller's buffer, snprintf-style: `len` counts what
 * the full text needs even past `cap`; the buffer is NUL-terminated by
 * resil__text_end(). Shared by the log sink and describe (telemetry.c). */
typedef struct resil__text {
    char *buf;
    size_t cap;
    size_t len;
} resil__text;

void resil__text_put(resil__text *t, const char *s, size_t n);
void resil__text_puts(resil__text *t, const char *s);
void resil__text_printf(resil__text *t, const char *fmt, ...) RESIL_PRINTF(2, 3);
/* Escape for a JSON string or a quoted logfmt value (without the quotes). */
void resil__text_escaped(resil__text *t, const char *s, bool json);
size_t resil__text_end(resil__text *t);

/* Describe and warnings (pipeline_describe.c). */
int resil__pipeline_warnings(struct resil_pipeline *p);

/* The pipeline's clock; the system and the coarse clock without their
 * table's call. */
static inline resil_instant resil__pipeline_now(const resil_pipeline *p)
{
    return resil__clock_now_as(p->clock, p->clock_id);
}

#endif
