/*
 * pipeline.c — building a pipeline and walking it.
 *
 * The builder writes straight into the pipeline it will hand out, so every
 * strategy object is made once, at add time, while the caller's options
 * (and the strings they point at) are certainly alive, and build() only
 * checks the composition and freezes it: nothing is copied twice and
 * nothing can dangle. Strategy nodes live in a fixed array inside the
 * pipeline because each kind appears at most once (the retry at most
 * RESIL_PIPELINE_MAX_RETRIES times).
 *
 * Executing is a walk down that array (resil__chain): each level calls the
 * next level's step, fixed by kind when the pipeline is built, and the
 * last calls the operation; no allocation, and a pipeline without
 * listeners pays one well-predicted branch per possible event.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipeline_internal.h"

struct resil_pipeline_builder {
    resil_pipeline *p; /* under construction; NULL once built */
    int error;         /* the first error, sticky */
    resil_err first;
};

/* ---- names and outcomes --------------------------------------------------- */

static const char *const strategy_names[RESIL_STRATEGY_KIND_COUNT] = {
    "", "rate-limiter", "bulkhead", "total-timeout", "retry", "breaker",
    "attempt-timeout", "hedging", "fallback", "degradation", "chaos-fault",
    "chaos-outcome", "chaos-latency", "chaos-behavior", "adaptive-limiter", "throttle"};

const char *resil_strategy_name(resil_strategy_kind k)
{
    return (unsigned)k < RESIL_STRATEGY_KIND_COUNT ? strategy_names[k] : "";
}

resil_outcome resil__rejected(resil_strategy_kind k, const char *detail,
                              resil_duration retry_after)
{
    return resil_fail_after(RESIL_REJECTED, (int64_t)k, detail, retry_after);
}

resil_strategy_kind resil__rejected_by(const resil_outcome *o)
{
    if (o->kind != RESIL_REJECTED)
        return RESIL_STRATEGY_NONE;
    if (o->code > 0 && o->code < RESIL_STRATEGY_KIND_COUNT)
        return (resil_strategy_kind)o->code;
    if (o->code == RESIL_ENOTIDEMPOTENT)
        return RESIL_STRATEGY_RETRY;
    if (o->code == RESIL_EREJECTED)
        return RESIL_STRATEGY_BREAKER;
    return RESIL_STRATEGY_NONE;
}

/* ---- the walk --------------------------------------------------------------- */

static void pass_through(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out)
{
    resil__chain(r, i + 1, f, out);
}

static resil__step_fn *step_of(resil_strategy_kind k)
{
    switch (k) {
    case RESIL_STRATEGY_RATE_LIMITER:
        return resil__run_rate_limiter;
    case RESIL_STRATEGY_BULKHEAD:
        return resil__run_bulkhead;
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        return resil__run_timeout;
    case RESIL_STRATEGY_RETRY:
        return resil__run_retry;
    case RESIL_STRATEGY_BREAKER:
        return resil__run_breaker;
    case RESIL_STRATEGY_HEDGING:
        return resil__run_hedging;
    case RESIL_STRATEGY_FALLBACK:
        return resil__run_fallback;
    case RESIL_STRATEGY_DEGRADE:
        return resil__run_degrade;
    case RESIL_STRATEGY_CHAOS_FAULT:
    case RESIL_STRATEGY_CHAOS_OUTCOME:
    case RESIL_STRATEGY_CHAOS_LATENCY:
    case RESIL_STRATEGY_CHAOS_BEHAVIOR:
        return resil__run_chaos;
    case RESIL_STRATEGY_ADAPTIVE_LIMITER:
        return resil__run_adaptive_limiter;
    case RESIL_STRATEGY_THROTTLE:
        return resil__run_throttle;
    default:
        return pass_through;
    }
}

/* Each level's step — the rest of the walk in one step where it is a tail
 * of the standard shape, else the pair of it and the level below where
 * both have a body to share — and the operation's after the last. */
static void fix_steps(resil_pipeline *p)
{
    for (size_t i = 0; i < p->nnodes; i++) {
        const resil__node *below = i + 1 < p->nnodes ? &p->nodes[i + 1] : NULL;
        resil__step_fn *step = resil__step_standard_tail(p->nodes, p->nnodes, i);
        if (i == 0)
            p->standard = step != NULL && p->nnodes == RESIL__STANDARD_LEVELS;
        if (step == NULL)
            step = resil__step_pair(&p->nodes[i], below);
        p->nodes[i].step = step != NULL ? step : step_of(p->nodes[i].kind);
    }
    p->nodes[p->nnodes].step = resil__run_op;
    p->clock_id = resil__clock_id(p->clock);
}

/* ---- executing ----------------------------------------------------------------- */

const resil_call resil__call_defaults = {.priority = RESIL_PRIORITY_MAX};

void resil_call_default(resil_call *c) { *c = resil__call_defaults; }

static const char *registry_key(const resil_pipeline *p, const resil_call *c)
{
    if (c->key != NULL && c->key[0] != '\0')
        return c->key;
    if (c->operation != NULL && c->operation[0] != '\0')
        return c->operation;
    return p->name;
}

void resil__run_drop_registry_breakers(resil__run *r)
{
    for (uint32_t k = 0; k < r->nhedge_breakers; k++)
        resil_breaker_free(r->hedge_breakers[k]);
    r->nhedge_breakers = 0;
    resil_breaker_free(r->breaker);
    r->breaker = NULL;
}

void resil__run_retain_registry_breakers(const resil__run *r)
{
    resil_breaker_retain(r->breaker);
    for (uint32_t k = 0; k < r->nhedge_breakers; k++)
        resil_breaker_retain(r->hedge_breakers[k]);
}

static size_t string_size(const char *s) { return s != NULL ? strlen(s) + 1 : 0; }

/* With a registry the key is the name of a breaker the run holds, so it
 * lives as long as the run's references do, and is not copied. */
static bool key_is_kept(const resil__run *r) { return r->p->registry == NULL; }

static size_t kept_size(bool key_kept, const char *key, const char *operation,
                        const resil_http_attrs *http)
{
    size_t n = (key_kept ? string_size(key) : 0) + string_size(operation);
    if (http != NULL)
        n += sizeof *http + string_size(http->method) + string_size(http->server_address);
    return n;
}

size_t resil__run_kept_size(const resil__run *r)
{
    return kept_size(key_is_kept(r), r->key, r->operation, r->http);
}

size_t resil__call_kept_size(const resil_pipeline *p, const resil_call *call)
{
    const resil_http_attrs *http = call->telemetry != NULL ? call->telemetry->http : NULL;
    return kept_size(p->registry == NULL, call->key, call->operation, http);
}

/* Copy *s to `at`, point *s there, and return the byte after the copy. */
static char *keep_string(const char **s, char *at)
{
    size_t n = string_size(*s);
    if (n == 0)
        return at;
    memcpy(at, *s, n);
    *s = at;
    return at + n;
}

bool resil__run_keep(resil__run *r, char *buf, size_t cap)
{
    if (resil__run_kept_size(r) > cap)
        return false;
    char *at = buf;
    if (r->http != NULL) { /* first: buf is aligned for it */
        resil_http_attrs *h = (resil_http_attrs *)(void *)buf;
        *h = *r->http;
        r->http = h;
        at = keep_string(&h->method, at + sizeof *h);
        at = keep_string(&h->server_address, at);
    }
    if (key_is_kept(r))
        at = keep_string(&r->key, at);
    keep_string(&r->operation, at);
    return true;
}

bool resil__hedge_keys_too_many(const resil_call *call)
{
    return call->hedge_keys != NULL && call->hedge_keys_len > RESIL_HEDGE_MAX + 1;
}

int resil__run_take_registry_breakers(resil__run *r, const resil_call *call)
{
    const resil_pipeline *p = r->p;
    int rc = 0;
    if (resil__hedge_keys_too_many(call))
        return RESIL_EINVAL; /* more keys than a call has attempts: none is dropped unsaid */
    if (call->breaker != NULL)
        r->breaker = resil_breaker_retain(call->breaker);
    else
        rc = resil_registry_get(p->registry, registry_key(p, call), NULL, &r->breaker, NULL);
    if (rc != 0)
        return rc;
    r->key = resil_breaker_name(r->breaker);
    size_t n = call->hedge_keys != NULL ? call->hedge_keys_len : 0;
    for (size_t k = 0; k < n && k <= RESIL_HEDGE_MAX && rc == 0; k++) {
        const char *key = call->hedge_keys[k];
        r->hedge_breakers[k] = NULL;
        r->nhedge_breakers = (uint32_t)k + 1;
        if (key != NULL && key[0] != '\0')
            rc = resil_registry_get(p->registry, key, NULL, &r->hedge_breakers[k], NULL);
    }
    if (rc != 0)
        resil__run_drop_registry_breakers(r);
    return rc;
}

static void report_execution(const resil__run *r, const resil_pipeline_result *out)
{
    resil_event ev;
    resil__event_init_run(&ev, r, RESIL_EVENT_EXECUTION, RESIL_STRATEGY_NONE, r->ex->last_now);
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = out->attempts;
    ev.duration = out->elapsed;
    ev.stop = out->stop;
    ev.outcome = &out->outcome;
    resil__emit(r->p, &ev);
}

int resil_pipeline_execute(const resil_pipeline *p, resil_op_fn op, const resil_call *call,
                           resil_pipeline_result *out)
{
    if (p == NULL || op == NULL || out == NULL)
        return RESIL_EINVAL;
    if (call == NULL)
        call = &resil__call_defaults;
    resil__result_begin(out);
    resil__exec ex = {out, 0};
    resil__run r;
    resil__run_init(&r, p, op, call, p->breaker, &ex);
    resil_exec_trace trace;
    if (call->telemetry != NULL) {
        r.http = call->telemetry->http;
        r.trace = resil__trace_begin(call->telemetry->trace, call->rng, &trace);
    }
    int rc = resil__run_take_breakers(&r, call);
    if (rc != 0) {
        bool too_many = resil__hedge_keys_too_many(call);
        out->outcome = out->cause =
            too_many ? resil_fail(RESIL_PERMANENT, rc, "hedge_keys_len past RESIL_HEDGE_MAX + 1")
                     : resil_fail(RESIL_REJECTED, rc, "no breaker for the key");
        out->rejected_by = too_many ? RESIL_STRATEGY_NONE : RESIL_STRATEGY_BREAKER;
        out->elapsed = 0;
        return rc;
    }
    resil_instant start = resil__pipeline_now(p);
    ex.last_now = start;
    resil__frame f = {0, 0, start, RESIL_INSTANT_MAX, call->cancel, NULL, NULL};
    resil__chain(&r, 0, &f, &out->outcome);
    resil__result_end(out);
    out->elapsed = resil__sub_sat(ex.last_now, start);
    if (resil__listening(p))
        report_execution(&r, out);
    resil__run_drop_breakers(&r);
    return 0;
}

/* ---- the builder ------------------------------------------------------------------ */

static int fail(resil_pipeline_builder *b, int code, const char *fmt, ...)
    RESIL_PRINTF(3, 4);

/* Record the builder's first error; later ones only return their code. */
static int fail(resil_pipeline_builder *b, int code, const char *fmt, ...)
{
    if (b->error != 0)
        return code;
    b->error = code;
    b->first.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->first.message, sizeof b->first.message, fmt, ap);
    va_end(ap);
    return code;
}

/* Remember an error some constructor reported in `e`. */
static int keep(resil_pipeline_builder *b, int code, const resil_err *e)
{
    if (b->error == 0) {
        b->error = code;
        b->first = *e;
        b->first.code = code;
    }
    return code;
}

int resil_pipeline_builder_new(const char *name, resil_pipeline_builder **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "pipeline: out must not be NULL");
    size_t len = name != NULL ? strlen(name) : 0;
    if (len == 0 || len >= RESIL_PIPELINE_NAME_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "pipeline.name must be 1 to %d bytes long, got %zu",
                             RESIL_PIPELINE_NAME_MAX - 1, len);
    resil_pipeline_builder *b = calloc(1, sizeof *b);
    resil_pipeline *p = calloc(1, sizeof *p);
    if (b == NULL || p == NULL) {
        free(b);
        free(p);
        return resil_err_set(err, RESIL_ENOMEM, "pipeline: out of memory");
    }
    strcpy(p->name, name);
    static _Atomic uint64_t pipelines;
    p->serial = atomic_fetch_add_explicit(&pipelines, 1, memory_order_relaxed) + 1;
    p->clock = resil_clock_system();
    p->classify = resil_pipeline_classify_default;
    b->p = p;
    *out = b;
    return 0;
}

void resil_pipeline_builder_free(resil_pipeline_builder *b)
{
    if (b == NULL)
        return;
    resil_pipeline_free(b->p);
    free(b);
}

void resil_pipeline_builder_clock(resil_pipeline_builder *b, resil_clock *c)
{
    if (b != NULL && b->p != NULL)
        b->p->clock = c != NULL ? c : resil_clock_system();
}

int resil_pipeline_builder_listen(resil_pipeline_builder *b, resil_event_fn fn, void *ud)
{
    if (b == NULL || b->p == NULL)
        return RESIL_EINVAL;
    if (fn == NULL)
        return fail(b, RESIL_EINVAL, "pipeline: listener must not be NULL");
    if (b->p->nlisteners == RESIL_PIPELINE_MAX_LISTENERS)
        return fail(b, RESIL_ERANGE, "pipeline: at most %d listeners",
                    RESIL_PIPELINE_MAX_LISTENERS);
    resil_listener *l = &b->p->listeners[b->p->nlisteners++];
    l->fn = fn;
    l->ud = ud;
    l->pipeline = b->p->name;
    return 0;
}

int resil_pipeline_builder_metrics(resil_pipeline_builder *b, resil_metrics *m)
{
    if (b == NULL || b->p == NULL)
        return RESIL_EINVAL;
    if (m == NULL)
        return fail(b, RESIL_EINVAL, "pipeline: metrics must not be NULL");
    if (b->p->metrics != NULL)
        return fail(b, RESIL_EEXIST, "pipeline: one metrics sink per pipeline");
    int rc = resil_pipeline_builder_listen(b, resil_metrics_on_event, m);
    if (rc == 0)
        b->p->metrics = m;
    return rc;
}

void resil_pipeline_builder_classify(resil_pipeline_builder *b, resil_breaker_classify_fn fn,
                                     void *ud)
{
    if (b == NULL || b->p == NULL)
        return;
    b->p->classify = fn != NULL ? fn : resil_pipeline_classify_default;
    b->p->classify_ud = fn != NULL ? ud : NULL;
}

/* A fresh node of kind `k` in *n, or the builder's error. The node becomes
 * part of the pipeline only at commit(), once its object exists. */
static int new_node(resil_pipeline_builder *b, resil_strategy_kind k, resil__node **n)
{
    *n = NULL;
    if (b == NULL)
        return RESIL_EINVAL;
    if (b->p == NULL)
        return fail(b, RESIL_ESTATE, "pipeline: the builder was already built");
    resil_pipeline *p = b->p;
    size_t same = 0;
    for (size_t i = 0; i < p->nnodes; i++)
        same += p->nodes[i].kind == k;
    if (k == RESIL_STRATEGY_RETRY && same == RESIL_PIPELINE_MAX_RETRIES)
        return fail(b, RESIL_EEXIST, "pipeline: at most %d retry strategies per pipeline",
                    RESIL_PIPELINE_MAX_RETRIES);
    if (k != RESIL_STRATEGY_RETRY && same > 0)
        return fail(b, RESIL_EEXIST, "pipeline: at most one %s strategy per pipeline",
                    resil_strategy_name(k));
    *n = &p->nodes[p->nnodes];
    memset(*n, 0, sizeof **n);
    (*n)->kind = k;
    (*n)->pipeline = p;
    return 0;
}

static int commit(resil_pipeline_builder *b)
{
    b->p->nnodes++;
    return 0;
}

static int null_arg(resil_pipeline_builder *b, const char *what)
{
    return fail(b, RESIL_EINVAL, "%s must not be NULL", what);
}

static int check_wait(resil_pipeline_builder *b, resil_duration max_wait)
{
    if (max_wait >= 0)
        return 0;
    resil_err e;
    return keep(b, resil__bad_duration(&e, "rate_limiter.max_wait", ">= 0", max_wait), &e);
}

int resil_pipeline_add_rate_limiter(resil_pipeline_builder *b, const resil_ratelimit_opts *o,
                                    resil_duration max_wait)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_RATE_LIMITER, &n);
    if (rc != 0)
        return rc;
    if (o == NULL)
        return null_arg(b, "rate_limiter: options");
    if ((rc = check_wait(b, max_wait)) != 0)
        return rc;
    resil_ratelimit_opts copy = *o;
    n->same_clock = copy.clock == NULL || copy.clock == b->p->clock;
    if (copy.clock == NULL)
        copy.clock = b->p->clock;
    resil_err e;
    if ((rc = resil_ratelimit_new(&copy, &n->ratelimit, &e)) != 0)
        return keep(b, rc, &e);
    n->owned = true;
    n->rate_wait = max_wait;
    return commit(b);
}

int resil_pipeline_use_rate_limiter(resil_pipeline_builder *b, resil_ratelimit *rl,
                                    resil_duration max_wait)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_RATE_LIMITER, &n);
    if (rc != 0)
        return rc;
    if (rl == NULL)
        return null_arg(b, "rate_limiter: limiter");
    if ((rc = check_wait(b, max_wait)) != 0)
        return rc;
    n->ratelimit = rl;
    n->rate_wait = max_wait;
    return commit(b);
}

int resil_pipeline_add_bulkhead(resil_pipeline_builder *b, const resil_bulkhead_opts *o)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_BULKHEAD, &n);
    if (rc != 0)
        return rc;
    if (o == NULL)
        return null_arg(b, "bulkhead: options");
    resil_bulkhead_opts copy = *o;
    if (copy.clock == NULL)
        copy.clock = b->p->clock;
    resil_err e;
    if ((rc = resil_bulkhead_new(&copy, &n->bulkhead, &e)) != 0)
        return keep(b, rc, &e);
    n->owned = true;
    return commit(b);
}

int resil_pipeline_use_bulkhead(resil_pipeline_builder *b, resil_bulkhead *bh)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_BULKHEAD, &n);
    if (rc != 0)
        return rc;
    if (bh == NULL)
        return null_arg(b, "bulkhead: bulkhead");
    n->bulkhead = bh;
    return commit(b);
}

static int add_timeout(resil_pipeline_builder *b, resil_strategy_kind k,
                       const resil_timeout_opts *o, const char *field)
{
    resil__node *n;
    int rc = new_node(b, k, &n);
    if (rc != 0)
        return rc;
    resil_err e;
    if ((rc = resil_timeout_opts_validate(o, field, &e)) != 0)
        return keep(b, rc, &e);
    n->timeout = *o;
    return commit(b);
}

int resil_pipeline_add_total_timeout(resil_pipeline_builder *b, const resil_timeout_opts *o)
{
    return add_timeout(b, RESIL_STRATEGY_TOTAL_TIMEOUT, o, "total_timeout");
}

int resil_pipeline_add_attempt_timeout(resil_pipeline_builder *b, const resil_timeout_opts *o)
{
    return add_timeout(b, RESIL_STRATEGY_ATTEMPT_TIMEOUT, o, "attempt_timeout");
}

int resil_pipeline_add_retry(resil_pipeline_builder *b, const resil_retry_policy *pol)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_RETRY, &n);
    if (rc != 0)
        return rc;
    resil_err e;
    if ((rc = resil_retry_policy_validate(pol, &e)) != 0)
        return keep(b, rc, &e);
    n->policy = *pol;
    return commit(b);
}

/* Owned breakers report their state changes to the pipeline's listeners
 * (each already names the pipeline, as the telemetry adapter wants), then
 * to the listener the caller's options named. */
static void breaker_changed(resil_breaker *br, const resil_breaker_event *bev, void *ud)
{
    const resil_pipeline *p = ud;
    for (size_t i = 0; i < p->nlisteners; i++)
        resil_telemetry_breaker_listener(br, bev, (void *)&p->listeners[i]);
    if (p->user_breaker_listener != NULL)
        p->user_breaker_listener(br, bev, p->user_breaker_ud);
}

int resil_pipeline_add_breaker(resil_pipeline_builder *b, const resil_breaker_opts *o)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_BREAKER, &n);
    if (rc != 0)
        return rc;
    if (o == NULL)
        return null_arg(b, "breaker: options");
    resil_pipeline *p = b->p;
    resil_breaker_opts copy = *o;
    if (copy.clock == NULL)
        copy.clock = p->clock;
    if (copy.name == NULL)
        copy.name = p->name;
    copy.listener = breaker_changed;
    copy.listener_ud = p;
    resil_err e;
    if ((rc = resil_breaker_new(&copy, &n->breaker, &e)) != 0)
        return keep(b, rc, &e);
    p->user_breaker_listener = o->listener;
    p->user_breaker_ud = o->listener_ud;
    p->breaker = n->breaker;
    n->breaker_opts = copy;
    n->breaker_opts.name = NULL; /* the breaker keeps its own copy */
    n->owned = true;
    return commit(b);
}

int resil_pipeline_use_breaker(resil_pipeline_builder *b, resil_breaker *br)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_BREAKER, &n);
    if (rc != 0)
        return rc;
    if (br == NULL)
        return null_arg(b, "breaker: breaker");
    n->breaker = resil_breaker_retain(br);
    b->p->breaker = br;
    return commit(b);
}

int resil_pipeline_use_registry(resil_pipeline_builder *b, resil_registry *r)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_BREAKER, &n);
    if (rc != 0)
        return rc;
    if (r == NULL)
        return null_arg(b, "breaker: registry");
    n->registry = r;
    b->p->registry = r;
    return commit(b);
}

int resil_pipeline_add_hedging(resil_pipeline_builder *b, const resil_hedge_opts *o)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_HEDGING, &n);
    if (rc != 0)
        return rc;
    resil_err e;
    if ((rc = resil_hedge_opts_validate(o, &e)) != 0)
        return keep(b, rc, &e);
    n->hedge = *o;
    return commit(b);
}

int resil_pipeline_add_fallback(resil_pipeline_builder *b, const resil_fallback_opts *o)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_FALLBACK, &n);
    if (rc != 0)
        return rc;
    resil_err e;
    if ((rc = resil_fallback_opts_validate(o, &e)) != 0)
        return keep(b, rc, &e);
    n->fallback = *o;
    return commit(b);
}

static void level_changed(void *ud, const resil_degrade_event *dev)
{
    const resil_pipeline *p = ud;
    for (size_t i = 0; i < p->nlisteners; i++)
        resil_telemetry_degrade_listener((void *)&p->listeners[i], dev);
    if (p->user_degrade_listener != NULL)
        p->user_degrade_listener(p->user_degrade_ud, dev);
}

int resil_pipeline_add_degrade(resil_pipeline_builder *b, const resil_degrade_opts *o)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_DEGRADE, &n);
    if (rc != 0)
        return rc;
    if (o == NULL)
        return null_arg(b, "degrade: options");
    resil_pipeline *p = b->p;
    resil_degrade_opts copy = *o;
    if (copy.clock == NULL)
        copy.clock = p->clock;
    copy.on_change = level_changed;
    copy.on_change_ud = p;
    resil_err e;
    if ((rc = resil_degrade_new(&copy, &n->degrade, &e)) != 0)
        return keep(b, rc, &e);
    p->user_degrade_listener = o->on_change;
    p->user_degrade_ud = o->on_change_ud;
    n->owned = true;
    return commit(b);
}

int resil_pipeline_use_degrade(resil_pipeline_builder *b, resil_degrade *d)
{
    resil__node *n;
    int rc = new_node(b, RESIL_STRATEGY_DEGRADE, &n);
    if (rc != 0)
        return rc;
    if (d == NULL)
        return null_arg(b, "degrade: monitor");
    n->degrade = d;
    return commit(b);
}

/* The same steps for strategies added from other files. */
int resil__builder_node(resil_pipeline_builder *b, resil_strategy_kind k, resil__node **n)
{
    return new_node(b, k, n);
}

int resil__builder_commit(resil_pipeline_builder *b) { return commit(b); }

int resil__builder_keep(resil_pipeline_builder *b, int code, const resil_err *e)
{
    return keep(b, code, e);
}

int resil__builder_null(resil_pipeline_builder *b, const char *what)
{
    return null_arg(b, what);
}

resil_pipeline *resil__builder_pipeline(resil_pipeline_builder *b) { return b->p; }

/* ---- build ---------------------------------------------------------------------- */

static size_t position(const resil_pipeline *p, resil_strategy_kind k)
{
    const resil__node *n = resil__node_find(p, k);
    return n != NULL ? (size_t)(n - p->nodes) : SIZE_MAX;
}

static bool present(const resil_pipeline *p, resil_strategy_kind k)
{
    return position(p, k) != SIZE_MAX;
}

static size_t last_position(const resil_pipeline *p, resil_strategy_kind k)
{
    for (size_t i = p->nnodes; i-- > 0;)
        if (p->nodes[i].kind == k)
            return i;
    return SIZE_MAX;
}

/* Is every `a` (if any) placed before every `b` (if any)? */
static bool before(const resil_pipeline *p, resil_strategy_kind a, resil_strategy_kind b)
{
    size_t ia = last_position(p, a), ib = position(p, b);
    return ia == SIZE_MAX || ib == SIZE_MAX || ia < ib;
}

static int order_error(resil_err *err, resil_strategy_kind a, resil_strategy_kind b)
{
    return resil_err_set(err, RESIL_EINVAL, "pipeline: %s must come before %s",
                         resil_strategy_name(a), resil_strategy_name(b));
}

static int check_order(const resil_pipeline *p, resil_err *err)
{
    static const resil_strategy_kind rules[][2] = {
        {RESIL_STRATEGY_TOTAL_TIMEOUT, RESIL_STRATEGY_RETRY},
        {RESIL_STRATEGY_RETRY, RESIL_STRATEGY_ATTEMPT_TIMEOUT},
        {RESIL_STRATEGY_TOTAL_TIMEOUT, RESIL_STRATEGY_ATTEMPT_TIMEOUT},
        {RESIL_STRATEGY_RETRY, RESIL_STRATEGY_HEDGING},
        {RESIL_STRATEGY_FALLBACK, RESIL_STRATEGY_HEDGING},
        /* an attempt cut off must reach them as a timeout, not a cancel */
        {RESIL_STRATEGY_ADAPTIVE_LIMITER, RESIL_STRATEGY_ATTEMPT_TIMEOUT},
        {RESIL_STRATEGY_THROTTLE, RESIL_STRATEGY_ATTEMPT_TIMEOUT},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (!before(p, rules[i][0], rules[i][1]))
            return order_error(err, rules[i][0], rules[i][1]);
    return 0;
}

static int check_timeouts(const resil_pipeline *p, resil_err *err)
{
    size_t t = position(p, RESIL_STRATEGY_TOTAL_TIMEOUT);
    size_t a = position(p, RESIL_STRATEGY_ATTEMPT_TIMEOUT);
    if (t == SIZE_MAX || a == SIZE_MAX)
        return 0;
    resil_duration total = p->nodes[t].timeout.timeout;
    resil_duration attempt = p->nodes[a].timeout.timeout;
    if (attempt <= total)
        return 0;
    char at[32], tt[32];
    resil_duration_format(attempt, at, sizeof at);
    resil_duration_format(total, tt, sizeof tt);
    return resil_err_set(err, RESIL_EINVAL,
                         "pipeline: attempt_timeout.timeout (%s) must not exceed "
                         "total_timeout.timeout (%s)",
                         at, tt);
}

/* A pipeline without retry runs one attempt where a retry would go: just
 * outside the first strategy that belongs to an attempt. */
static void insert_single_attempt(resil_pipeline *p)
{
    if (present(p, RESIL_STRATEGY_RETRY))
        return;
    size_t at = p->nnodes;
    for (size_t i = 0; i < p->nnodes && at == p->nnodes; i++) {
        resil_strategy_kind k = p->nodes[i].kind;
        if (k == RESIL_STRATEGY_BREAKER || k == RESIL_STRATEGY_ATTEMPT_TIMEOUT ||
            k == RESIL_STRATEGY_HEDGING)
            at = i;
    }
    /* Listeners of owned objects point at the pipeline, not at nodes, so
     * moving nodes here is safe. */
    memmove(&p->nodes[at + 1], &p->nodes[at], (p->nnodes - at) * sizeof p->nodes[0]);
    p->nnodes++;
    resil__node *n = &p->nodes[at];
    memset(n, 0, sizeof *n);
    n->kind = RESIL_STRATEGY_RETRY;
    n->implicit = true;
    n->pipeline = p;
    resil_retry_policy_default(&n->policy);
    n->policy.max_attempts = 1;
}

static void freeze_retry(resil__node *n, bool inner)
{
    n->inner = inner;
    n->first_alone =
        resil__retry_policy_first_alone(&n->policy) && !resil__listening(n->pipeline);
    n->run_policy = n->policy;
    /* The announcement is an event and the caller's hook: with neither,
     * there is nothing for either walk to call. */
    if (resil__listening(n->pipeline) || n->policy.on_retry != NULL) {
        n->run_policy.on_retry = resil__retry_announce;
        n->run_policy.on_retry_ud = n;
    }
    if (n->policy.retry_on != NULL) {
        n->run_policy.retry_on = resil__retry_classify;
        n->run_policy.retry_on_ud = n;
    }
    if (n->policy.delay != NULL) {
        n->run_policy.delay = resil__retry_delay;
        n->run_policy.delay_ud = n;
    }
}

static void freeze_retries(resil_pipeline *p)
{
    bool inner = false;
    for (size_t i = 0; i < p->nnodes; i++) {
        if (p->nodes[i].kind != RESIL_STRATEGY_RETRY)
            continue;
        freeze_retry(&p->nodes[i], inner);
        inner = true;
    }
}

static int start_hedging(resil_pipeline *p, resil_err *err)
{
    size_t i = position(p, RESIL_STRATEGY_HEDGING);
    p->hedge_at = i;
    if (i == SIZE_MAX)
        return 0;
    resil__node *n = &p->nodes[i];
    size_t r = position(p, RESIL_STRATEGY_RETRY);
    if (n->hedge.budget == NULL && r != SIZE_MAX)
        n->hedge.budget = p->nodes[r].policy.budget;
    int rc = resil__hedge_pool_new(&n->hedge, &n->pool);
    if (rc != 0)
        return resil_err_set(err, rc, "hedging: cannot start the worker pool (%s)",
                             resil_strerror(rc));
    return 0;
}

static int watch_gauges(resil_pipeline *p, resil_err *err)
{
    if (p->metrics == NULL)
        return 0;
    int rc = 0;
    for (size_t i = 0; i < p->nnodes && rc == 0; i++) {
        const resil__node *n = &p->nodes[i];
        if (n->kind == RESIL_STRATEGY_BREAKER && n->breaker != NULL)
            rc = resil_metrics_watch_breaker(p->metrics, p->name, n->breaker, p);
        else if (n->kind == RESIL_STRATEGY_BREAKER && n->registry != NULL)
            rc = resil_metrics_watch_registry(p->metrics, p->name, n->registry, p);
        else if (n->kind == RESIL_STRATEGY_BULKHEAD)
            rc = resil_metrics_watch_bulkhead(p->metrics, p->name, n->bulkhead, p);
        else if (n->kind == RESIL_STRATEGY_ADAPTIVE_LIMITER)
            rc = resil_metrics_watch_limiter(p->metrics, p->name, n->limiter, p);
    }
    if (rc != 0)
        return resil_err_set(err, rc, "pipeline: cannot watch gauges (%s)", resil_strerror(rc));
    return 0;
}

/* Check the composition, then fix it: the single attempt, the retry hook,
 * the worker pool, the warnings and the gauges. */
static int freeze(resil_pipeline *p, resil_err *err)
{
    int rc = check_order(p, err);
    if (rc == 0)
        rc = check_timeouts(p, err);
    if (rc != 0)
        return rc;
    insert_single_attempt(p);
    freeze_retries(p);
    fix_steps(p);
    if ((rc = start_hedging(p, err)) != 0)
        return rc;
    if (resil__pipeline_warnings(p) != 0)
        return resil_err_set(err, RESIL_ENOMEM, "pipeline: out of memory");
    return watch_gauges(p, err);
}

int resil_pipeline_build(resil_pipeline_builder *b, resil_pipeline **out, resil_err *err)
{
    if (b == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "pipeline: builder and out must not be NULL");
    if (b->p == NULL)
        return resil_err_set(err, RESIL_ESTATE, "pipeline: the builder was already built");
    if (b->error == 0) {
        resil_err local = {0, ""};
        int rc = freeze(b->p, &local);
        if (rc != 0)
            keep(b, rc, &local); /* a failed build stays failed */
    }
    if (b->error != 0) {
        if (err != NULL)
            *err = b->first;
        return b->error;
    }
    *out = b->p;
    b->p = NULL;
    return 0;
}

void resil_pipeline_free(resil_pipeline *p)
{
    if (p == NULL)
        return;
    if (p->metrics != NULL)
        resil_metrics_unwatch(p->metrics, p);
    /* Hedged attempts still running use the strategies after hedging:
     * let them finish before anything goes. */
    for (size_t i = 0; i < p->nnodes; i++)
        resil__hedge_pool_free(p->nodes[i].pool);
    for (size_t i = 0; i < p->nnodes; i++) {
        resil__node *n = &p->nodes[i];
        resil_breaker_free(n->breaker);
        if (!n->owned)
            continue;
        resil_ratelimit_free(n->ratelimit);
        resil_bulkhead_free(n->bulkhead);
        resil_degrade_free(n->degrade);
        resil_chaos_free(n->chaos);
        resil_limiter_free(n->limiter);
        resil_throttle_free(n->throttle);
    }
    for (size_t i = 0; i < p->nwarnings; i++)
        free(p->warnings[i]);
    free(p->warnings);
    free(p);
}

/* ---- classifier and accessors ------------------------------------------------------ */

resil_breaker_result resil_pipeline_classify_default(const resil_outcome *o,
                                                     const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return resil__classify_default(o);
}

const char *resil_pipeline_name(const resil_pipeline *p) { return p != NULL ? p->name : ""; }

size_t resil_pipeline_strategy_count(const resil_pipeline *p)
{
    if (p == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < p->nnodes; i++)
        n += !p->nodes[i].implicit;
    return n;
}

resil_strategy_kind resil_pipeline_strategy_at(const resil_pipeline *p, size_t i)
{
    if (p == NULL)
        return RESIL_STRATEGY_NONE;
    for (size_t k = 0; k < p->nnodes; k++) {
        if (p->nodes[k].implicit)
            continue;
        if (i-- == 0)
            return p->nodes[k].kind;
    }
    return RESIL_STRATEGY_NONE;
}

size_t resil_pipeline_warning_count(const resil_pipeline *p)
{
    return p != NULL ? p->nwarnings : 0;
}

const char *resil_pipeline_warning(const resil_pipeline *p, size_t i)
{
    return p != NULL && i < p->nwarnings ? p->warnings[i] : NULL;
}

/* ---- the standard pipeline ------------------------------------------------------------ */

/* Microsoft's per-endpoint strategies, the same in both handlers. */
static void standard_endpoint(resil_bulkhead_opts *concurrency, resil_breaker_opts *breaker,
                              resil_timeout_opts *attempt)
{
    resil_bulkhead_opts_default(concurrency);
    concurrency->max_concurrency = 1000;
    concurrency->max_queue = 0;
    concurrency->queue = false;
    resil_breaker_opts_default(breaker);
    breaker->kind = RESIL_BREAKER_RATIO;
    breaker->failure_ratio = 0.1;
    breaker->minimum_throughput = 100;
    breaker->sampling_duration = RESIL_S(30);
    breaker->break_duration = RESIL_S(5);
    resil_timeout_opts_default(attempt);
    attempt->timeout = RESIL_S(10);
}

void resil_standard_opts_default(resil_standard_opts *o)
{
    memset(o, 0, sizeof *o);
    o->name = "standard";
    standard_endpoint(&o->concurrency, &o->breaker, &o->attempt);
    resil_timeout_opts_default(&o->total);
    o->total.timeout = RESIL_S(30);
    resil_retry_policy_default(&o->retry);
    o->retry.max_attempts = 4;
    o->retry.backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    o->retry.backoff.base = RESIL_S(2);
    o->retry.backoff.factor = 2.0;
    o->retry.backoff.jitter = RESIL_JITTER_POLLY;
    o->retry.backoff.max_delay = RESIL_DURATION_MAX;
    o->retry.retry_after = RESIL_RETRY_AFTER_HONOR;
}

void resil_standard_hedging_opts_default(resil_standard_hedging_opts *o)
{
    memset(o, 0, sizeof *o);
    o->name = "standard-hedging";
    resil_timeout_opts_default(&o->total);
    o->total.timeout = RESIL_S(30);
    resil_hedge_opts_default(&o->hedging);
    o->hedging.delay = RESIL_S(2);
    o->hedging.max_hedged = 1;
    standard_endpoint(&o->concurrency, &o->breaker, &o->attempt);
}

int resil_pipeline_add_standard_hedging(resil_pipeline_builder *b,
                                        const resil_standard_hedging_opts *o)
{
    if (b == NULL)
        return RESIL_EINVAL;
    if (o == NULL)
        return null_arg(b, "pipeline: standard hedging options");
    if (o->clock != NULL)
        resil_pipeline_builder_clock(b, o->clock);
    int rc = resil_pipeline_add_total_timeout(b, &o->total);
    if (rc == 0)
        rc = resil_pipeline_add_hedging(b, &o->hedging);
    if (rc == 0)
        rc = resil_pipeline_add_bulkhead(b, &o->concurrency);
    if (rc == 0)
        rc = resil_pipeline_add_breaker(b, &o->breaker);
    if (rc == 0)
        rc = resil_pipeline_add_attempt_timeout(b, &o->attempt);
    return rc;
}

int resil_pipeline_standard_hedging(const resil_standard_hedging_opts *o, resil_pipeline **out,
                                    resil_err *err)
{
    resil_standard_hedging_opts defaults;
    if (o == NULL) {
        resil_standard_hedging_opts_default(&defaults);
        o = &defaults;
    }
    resil_pipeline_builder *b;
    int rc = resil_pipeline_builder_new(o->name != NULL ? o->name : "standard-hedging", &b, err);
    if (rc != 0)
        return rc;
    resil_pipeline_add_standard_hedging(b, o);
    rc = resil_pipeline_build(b, out, err);
    resil_pipeline_builder_free(b);
    return rc;
}

int resil_pipeline_add_standard(resil_pipeline_builder *b, const resil_standard_opts *o)
{
    if (b == NULL)
        return RESIL_EINVAL;
    if (o == NULL)
        return null_arg(b, "pipeline: standard options");
    if (o->clock != NULL)
        resil_pipeline_builder_clock(b, o->clock);
    int rc = resil_pipeline_add_bulkhead(b, &o->concurrency);
    if (rc == 0)
        rc = resil_pipeline_add_total_timeout(b, &o->total);
    if (rc == 0)
        rc = resil_pipeline_add_retry(b, &o->retry);
    if (rc == 0)
        rc = resil_pipeline_add_breaker(b, &o->breaker);
    if (rc == 0)
        rc = resil_pipeline_add_attempt_timeout(b, &o->attempt);
    return rc;
}

int resil_pipeline_standard(const resil_standard_opts *o, resil_pipeline **out, resil_err *err)
{
    resil_standard_opts defaults;
    if (o == NULL) {
        resil_standard_opts_default(&defaults);
        o = &defaults;
    }
    resil_pipeline_builder *b;
    int rc = resil_pipeline_builder_new(o->name != NULL ? o->name : "standard", &b, err);
    if (rc != 0)
        return rc;
    resil_pipeline_add_standard(b, o);
    rc = resil_pipeline_build(b, out, err);
    resil_pipeline_builder_free(b);
    return rc;
}
