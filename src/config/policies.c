/*
 * policies.c — the registry of named policies: running pipelines by name,
 * swapped atomically on reload.
 *
 * RCU in miniature. The registry points at an immutable snapshot (the
 * pipelines and the objects they share), and a reader takes a counted
 * reference to it under a read lock held only for the load and the
 * increment; everything after that runs on the snapshot without any lock.
 * A reload builds the next snapshot beside the current one — so a bad
 * config, or a build that fails half-way, leaves the current one alone —
 * then swaps the pointer under the write lock and drops the registry's
 * reference to the old one, which is freed by whichever thread lets go of
 * it last. Running executions finish on the policies they started with.
 *
 * State lives in named objects (breakers, bulkheads, rate limiters, retry
 * budgets, the degradation monitor), each in a small counted holder so that two
 * snapshots can share it: building the next snapshot reuses the holder of
 * every name whose options are unchanged, which is how a breaker that is
 * open stays open across a reload that did not touch it. While the
 * document's DistributedCircuitBreaker is enabled, breakers come from the
 * application's factory (a fleet adapter this library does not link), and
 * turning it on or off gives every breaker a fresh start.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* ---- shared objects ------------------------------------------------------- */

typedef enum obj_kind {
    OBJ_BREAKER,
    OBJ_BULKHEAD,
    OBJ_LIMITER,
    OBJ_DEGRADE,
    OBJ_BUDGET,
    OBJ_KINDS
} obj_kind;

typedef struct shared {
    atomic_long refs;
    obj_kind kind;
    char name[RESIL_CONFIG_NAME_MAX];
    union {
        resil_breaker_opts breaker;
        resil_bulkhead_opts bulkhead;
        resil_config_ratelimit limiter;
        resil_degrade_opts degrade;
        resil_budget_opts budget;
    } opts; /* as configured: what a reload compares */
    char level_names[RESIL_DEGRADE_MAX_LEVELS][RESIL_DEGRADE_NAME_MAX];
    bool fleet; /* built by the application's factory for its kind */
    void *obj;
} shared;

static void shared_release(shared *s)
{
    if (s == NULL || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    switch (s->kind) {
    case OBJ_BREAKER:
        resil_breaker_free(s->obj);
        break;
    case OBJ_BULKHEAD:
        resil_bulkhead_free(s->obj);
        break;
    case OBJ_LIMITER:
        resil_ratelimit_free(s->obj);
        break;
    case OBJ_BUDGET:
        resil_budget_free(s->obj);
        break;
    default:
        resil_degrade_free(s->obj);
        break;
    }
    free(s);
}

static bool same_breaker(const resil_breaker_opts *a, const resil_breaker_opts *b)
{
    return a->kind == b->kind && a->failure_threshold == b->failure_threshold &&
           a->failure_ratio == b->failure_ratio && a->minimum_throughput == b->minimum_throughput &&
           a->sampling_duration == b->sampling_duration &&
           a->slow_call_duration == b->slow_call_duration &&
           a->slow_call_ratio == b->slow_call_ratio && a->break_duration == b->break_duration &&
           a->break_growth == b->break_growth && a->max_break_duration == b->max_break_duration &&
           a->half_open_probes == b->half_open_probes &&
           a->success_threshold == b->success_threshold && a->probe_timeout == b->probe_timeout &&
           a->window == b->window && a->window_size == b->window_size;
}

static bool same_bulkhead(const resil_bulkhead_opts *a, const resil_bulkhead_opts *b)
{
    return a->max_concurrency == b->max_concurrency && a->max_queue == b->max_queue &&
           a->queue == b->queue && a->queue_timeout == b->queue_timeout;
}

static bool same_limiter(const resil_config_ratelimit *a, const resil_config_ratelimit *b)
{
    const resil_ratelimit_opts *x = &a->opts, *y = &b->opts;
    return x->kind == y->kind && x->rate == y->rate && x->period == y->period &&
           x->burst == y->burst && x->permits == y->permits && x->window == y->window &&
           a->max_wait == b->max_wait;
}

static bool same_budget(const resil_budget_opts *a, const resil_budget_opts *b)
{
    return a->model == b->model && a->max_tokens == b->max_tokens &&
           a->token_ratio == b->token_ratio && a->capacity == b->capacity &&
           a->retry_cost == b->retry_cost && a->timeout_cost == b->timeout_cost &&
           a->success_increment == b->success_increment && a->ttl == b->ttl &&
           a->percent == b->percent && a->min_per_second == b->min_per_second;
}

static bool same_degrade(const resil_degrade_opts *a, const resil_degrade_opts *b)
{
    if (a->auto_adjust != b->auto_adjust || a->evaluate_on_call != b->evaluate_on_call ||
        a->check_interval != b->check_interval ||
        a->min_level_duration != b->min_level_duration || a->error_window != b->error_window ||
        a->error_buckets != b->error_buckets || a->min_throughput != b->min_throughput ||
        a->level_count != b->level_count)
        return false;
    for (int32_t i = 0; i < a->level_count; i++) {
        const resil_degrade_level_opts *x = &a->levels[i], *y = &b->levels[i];
        if (strcmp(x->name, y->name) != 0 || x->priority_threshold != y->priority_threshold ||
            x->error_rate != y->error_rate || x->cpu != y->cpu || x->memory != y->memory)
            return false;
    }
    return true;
}

/* ---- snapshots --------------------------------------------------------------- */

typedef struct entry {
    resil_pipeline *pipeline;
    size_t inner;          /* the pipeline it runs as its operation, or SIZE_MAX */
    resil_outcome answer;  /* its Fallback step's static answer */
} entry;

typedef struct snapshot {
    atomic_long refs;
    entry *pipelines;
    size_t npipelines;
    shared **objs[OBJ_KINDS];
    size_t nobjs[OBJ_KINDS];
    resil_timeouts *timeouts;
} snapshot;

struct resil_policies {
    pthread_rwlock_t lock;   /* `current`: a reader's load + increment vs the swap */
    pthread_mutex_t apply;   /* one apply at a time; also guards reading `current` there */
    snapshot *current;
    atomic_ullong version;
    resil_pipeline *standard;
    resil_clock *clock;
    resil_listener listener; /* for the shared objects' own events */
    resil_policies_opts opts;
};

static void snapshot_release(snapshot *s)
{
    if (s == NULL || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < s->npipelines; i++)
        resil_pipeline_free(s->pipelines[i].pipeline);
    free(s->pipelines);
    for (int k = 0; k < OBJ_KINDS; k++) {
        for (size_t i = 0; i < s->nobjs[k]; i++)
            shared_release(s->objs[k][i]);
        free(s->objs[k]);
    }
    resil_timeouts_free(s->timeouts);
    free(s);
}

static shared *find_shared(const snapshot *s, obj_kind k, const char *name)
{
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < s->nobjs[k]; i++)
        if (resil__name_eq(s->objs[k][i]->name, name))
            return s->objs[k][i];
    return NULL;
}

static bool unchanged(const shared *old, const shared *next)
{
    switch (next->kind) {
    case OBJ_BREAKER:
        return old->fleet == next->fleet &&
               same_breaker(&old->opts.breaker, &next->opts.breaker);
    case OBJ_BULKHEAD:
        return old->fleet == next->fleet &&
               same_bulkhead(&old->opts.bulkhead, &next->opts.bulkhead);
    case OBJ_LIMITER:
        return old->fleet == next->fleet &&
               same_limiter(&old->opts.limiter, &next->opts.limiter);
    case OBJ_BUDGET:
        return same_budget(&old->opts.budget, &next->opts.budget);
    default:
        return same_degrade(&old->opts.degrade, &next->opts.degrade);
    }
}

/* Make the object a fresh holder describes. */
static int create_obj(resil_policies *r, shared *s, resil_err *err)
{
    resil_listener *l = r->opts.listener ? &r->listener : NULL;
    switch (s->kind) {
    case OBJ_BREAKER: {
        resil_breaker_opts o = s->opts.breaker;
        o.clock = r->clock;
        o.name = s->name;
        o.listener = l ? resil_telemetry_breaker_listener : NULL;
        o.listener_ud = l;
        if (!s->fleet)
            return resil_breaker_new(&o, (resil_breaker **)&s->obj, err);
        if (r->opts.breaker_factory == NULL)
            return resil_err_set(err, RESIL_EINVAL,
                                 "policies: DistributedCircuitBreaker is enabled but no "
                                 "breaker_factory is registered");
        return r->opts.breaker_factory(s->name, &o, (resil_breaker **)&s->obj, err,
                                       r->opts.breaker_factory_ud);
    }
    case OBJ_BULKHEAD: {
        resil_bulkhead_opts o = s->opts.bulkhead;
        o.clock = r->clock;
        if (!s->fleet)
            return resil_bulkhead_new(&o, (resil_bulkhead **)&s->obj, err);
        if (r->opts.bulkhead_factory == NULL)
            return resil_err_set(err, RESIL_EINVAL,
                                 "policies: bulkhead %s is Distributed but no "
                                 "bulkhead_factory is registered", s->name);
        return r->opts.bulkhead_factory(s->name, &o, (resil_bulkhead **)&s->obj, err,
                                        r->opts.bulkhead_factory_ud);
    }
    case OBJ_LIMITER: {
        resil_ratelimit_opts o = s->opts.limiter.opts;
        o.clock = r->clock;
        if (!s->fleet)
            return resil_ratelimit_new(&o, (resil_ratelimit **)&s->obj, err);
        if (r->opts.ratelimit_factory == NULL)
            return resil_err_set(err, RESIL_EINVAL,
                                 "policies: rate limiter %s is Distributed but no "
                                 "ratelimit_factory is registered", s->name);
        return r->opts.ratelimit_factory(s->name, &o, (resil_ratelimit **)&s->obj, err,
                                         r->opts.ratelimit_factory_ud);
    }
    case OBJ_BUDGET: {
        resil_budget_opts o = s->opts.budget;
        o.clock = r->clock;
        return resil_budget_new(&o, (resil_budget **)&s->obj, err);
    }
    default: {
        resil_degrade_opts o = s->opts.degrade;
        o.clock = r->clock;
        o.on_change = l ? resil_telemetry_degrade_listener : NULL;
        o.on_change_ud = l;
        return resil_degrade_new(&o, (resil_degrade **)&s->obj, err);
    }
    }
}

/* Give the next snapshot the holder for `next`'s name: the old one when
 * its options are unchanged, else a new object. Consumes `next`. */
static int adopt(resil_policies *r, snapshot *old, snapshot *s, shared *next, resil_err *err)
{
    obj_kind k = next->kind;
    shared *prev = find_shared(old, k, next->name);
    if (prev && unchanged(prev, next)) {
        free(next);
        atomic_fetch_add_explicit(&prev->refs, 1, memory_order_relaxed);
        next = prev;
    } else {
        int rc = create_obj(r, next, err);
        if (rc != 0) {
            free(next);
            return rc;
        }
    }
    s->objs[k][s->nobjs[k]++] = next;
    return 0;
}

static shared *new_holder(obj_kind k, const char *name)
{
    shared *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    atomic_init(&s->refs, 1);
    s->kind = k;
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

static int gather(resil_policies *r, const resil_config *c, snapshot *old, snapshot *s,
                  obj_kind k, resil_config_section sec, resil_err *err)
{
    size_t n = resil_config_count(c, sec);
    s->objs[k] = calloc(n ? n : 1, sizeof *s->objs[k]);
    if (s->objs[k] == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *name = resil_config_name_at(c, sec, i);
        shared *h = new_holder(k, name);
        if (h == NULL)
            return resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
        if (k == OBJ_BREAKER) {
            resil_config_distributed d;
            resil_config_breaker_get(c, name, &h->opts.breaker);
            h->fleet = resil_config_distributed_get(c, &d) && d.enabled;
        }
        else if (k == OBJ_BULKHEAD)
            resil_config_bulkhead_get(c, name, &h->opts.bulkhead);
        else if (k == OBJ_BUDGET)
            resil_config_budget_get(c, name, &h->opts.budget);
        else
            resil_config_ratelimit_get(c, name, &h->opts.limiter);
        if (k != OBJ_BREAKER)
            h->fleet = c->sec[sec].v[resil__cfg_find(c, sec, name)].fleet;
        int rc = adopt(r, old, s, h, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static bool uses_step(const resil_config *c, resil_config_step_kind k, bool per_operation)
{
    for (size_t i = 0; i < c->sec[RESIL_CONFIG_PIPELINES].n; i++) {
        const cfg_pipeline_def *p = &c->sec[RESIL_CONFIG_PIPELINES].v[i].u.pipeline;
        for (size_t j = 0; j < p->nsteps; j++)
            if (p->steps[j].kind == k && (!per_operation || p->steps[j].per_operation))
                return true;
    }
    return false;
}

/* The one degradation monitor, when a pipeline asks for it. */
static int gather_degrade(resil_policies *r, const resil_config *c, snapshot *old, snapshot *s,
                          resil_err *err)
{
    s->objs[OBJ_DEGRADE] = calloc(1, sizeof *s->objs[OBJ_DEGRADE]);
    if (s->objs[OBJ_DEGRADE] == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
    if (!uses_step(c, RESIL_CONFIG_STEP_DEGRADE, false))
        return 0;
    shared *h = new_holder(OBJ_DEGRADE, "GracefulDegradation");
    if (h == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
    resil_config_degrade_get(c, &h->opts.degrade);
    for (int32_t i = 0; i < h->opts.degrade.level_count; i++) {
        snprintf(h->level_names[i], sizeof h->level_names[i], "%s",
                 h->opts.degrade.levels[i].name);
        h->opts.degrade.levels[i].name = h->level_names[i];
    }
    return adopt(r, old, s, h, err);
}

static int build_timeouts(const resil_config *c, snapshot *s, resil_err *err)
{
    if (!uses_step(c, RESIL_CONFIG_STEP_TOTAL_TIMEOUT, true))
        return 0;
    int rc = resil_timeouts_new(c->default_timeout, &s->timeouts, err);
    const cfg_list *ops = &c->sec[RESIL_CONFIG_OPERATION_TIMEOUTS];
    for (size_t i = 0; rc == 0 && i < ops->n; i++)
        rc = resil_timeouts_set(s->timeouts, ops->v[i].name, ops->v[i].u.timeout, err);
    return rc;
}

static void *obj_named(const snapshot *s, obj_kind k, const char *name)
{
    shared *h = find_shared(s, k, name);
    return h ? h->obj : NULL;
}

/* A Fallbacks entry's answer, kept in the pipeline's entry. */
static resil_outcome static_answer(const resil_fallback_info *info, void *user, void *ud)
{
    (void)info;
    (void)user;
    return *(const resil_outcome *)ud;
}

static int add_step(resil_pipeline_builder *b, const resil_config *c, const snapshot *s,
                    const cfg_step *st, const resil_outcome *answer)
{
    resil_timeout_opts to;
    resil_timeout_opts_default(&to);
    switch (st->kind) {
    case RESIL_CONFIG_STEP_RATE_LIMITER: {
        const cfg_item *it = &c->sec[RESIL_CONFIG_RATE_LIMITERS].v[st->ref];
        return resil_pipeline_use_rate_limiter(b, obj_named(s, OBJ_LIMITER, it->name),
                                               it->u.limiter.max_wait);
    }
    case RESIL_CONFIG_STEP_BULKHEAD:
        return resil_pipeline_use_bulkhead(
            b, obj_named(s, OBJ_BULKHEAD, c->sec[RESIL_CONFIG_BULKHEADS].v[st->ref].name));
    case RESIL_CONFIG_STEP_BREAKER:
        return resil_pipeline_use_breaker(
            b, obj_named(s, OBJ_BREAKER, c->sec[RESIL_CONFIG_BREAKERS].v[st->ref].name));
    case RESIL_CONFIG_STEP_DEGRADE:
        return resil_pipeline_use_degrade(b, obj_named(s, OBJ_DEGRADE, "GracefulDegradation"));
    case RESIL_CONFIG_STEP_RETRY: {
        const resil_config_retry *cr = &c->sec[RESIL_CONFIG_RETRY].v[st->ref].u.retry;
        resil_retry_policy p = cr->policy;
        if (cr->budget != NULL)
            p.budget = obj_named(s, OBJ_BUDGET, cr->budget);
        return resil_pipeline_add_retry(b, &p);
    }
    case RESIL_CONFIG_STEP_HEDGING:
        return resil_pipeline_add_hedging(b, &c->sec[RESIL_CONFIG_HEDGING].v[st->ref].u.hedge.opts);
    case RESIL_CONFIG_STEP_STANDARD_HEDGING: {
        resil_standard_hedging_opts so;
        resil_standard_hedging_opts_default(&so);
        if (st->ref != SIZE_MAX)
            so.hedging = c->sec[RESIL_CONFIG_HEDGING].v[st->ref].u.hedge.opts;
        return resil_pipeline_add_standard_hedging(b, &so);
    }
    case RESIL_CONFIG_STEP_FALLBACK: {
        resil_fallback_opts fo;
        resil_fallback_opts_default(&fo);
        fo.action = static_answer;
        fo.action_ud = (void *)answer;
        return resil_pipeline_add_fallback(b, &fo);
    }
    case RESIL_CONFIG_STEP_TOTAL_TIMEOUT:
        to.timeout = st->per_operation ? c->default_timeout : st->timeout;
        to.per_operation = st->per_operation ? s->timeouts : NULL;
        return resil_pipeline_add_total_timeout(b, &to);
    case RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT:
        to.timeout = st->timeout;
        return resil_pipeline_add_attempt_timeout(b, &to);
    case RESIL_CONFIG_STEP_PIPELINE:
        return 0; /* the operation, run by resil_policy_execute */
    /* The learning strategies and chaos belong to the pipeline that names
     * them: each pipeline learns its own limit and runs its own experiment. */
    case RESIL_CONFIG_STEP_CHAOS:
        return resil_pipeline_add_chaos(b, &c->sec[RESIL_CONFIG_CHAOS].v[st->ref].u.chaos);
    case RESIL_CONFIG_STEP_ADAPTIVE_LIMITER:
        return resil_pipeline_add_adaptive_limiter(
            b, &c->sec[RESIL_CONFIG_ADAPTIVE_LIMITERS].v[st->ref].u.adaptive);
    case RESIL_CONFIG_STEP_THROTTLE:
        return resil_pipeline_add_throttle(b, &c->sec[RESIL_CONFIG_THROTTLES].v[st->ref].u.throttle);
    }
    return RESIL_EINVAL;
}

static int build_pipeline(resil_policies *r, const resil_config *c, snapshot *s, size_t i,
                          resil_err *err)
{
    const cfg_item *it = &c->sec[RESIL_CONFIG_PIPELINES].v[i];
    const cfg_pipeline_def *p = &it->u.pipeline;
    entry *e = &s->pipelines[i];
    e->inner = SIZE_MAX;
    resil_pipeline_builder *b;
    int rc = resil_pipeline_builder_new(it->name, &b, err);
    if (rc != 0)
        return rc;
    resil_pipeline_builder_clock(b, r->clock);
    if (r->opts.listener)
        resil_pipeline_builder_listen(b, r->opts.listener, r->opts.listener_ud);
    if (r->opts.metrics)
        resil_pipeline_builder_metrics(b, r->opts.metrics);
    for (size_t k = 0; k < p->nsteps; k++) {
        if (p->steps[k].kind == RESIL_CONFIG_STEP_FALLBACK)
            e->answer = c->sec[RESIL_CONFIG_FALLBACKS].v[p->steps[k].ref].u.fallback;
        add_step(b, c, s, &p->steps[k], &e->answer);
        if (p->steps[k].kind == RESIL_CONFIG_STEP_PIPELINE)
            e->inner = p->steps[k].ref;
    }
    rc = resil_pipeline_build(b, &e->pipeline, err);
    resil_pipeline_builder_free(b);
    return rc;
}

static int build_snapshot(resil_policies *r, const resil_config *c, snapshot *old,
                          snapshot **out, resil_err *err)
{
    snapshot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
    atomic_init(&s->refs, 1);
    size_t n = c->sec[RESIL_CONFIG_PIPELINES].n;
    s->pipelines = calloc(n ? n : 1, sizeof *s->pipelines);
    int rc = s->pipelines ? 0 : resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
    if (rc == 0)
        rc = gather(r, c, old, s, OBJ_BREAKER, RESIL_CONFIG_BREAKERS, err);
    if (rc == 0)
        rc = gather(r, c, old, s, OBJ_BULKHEAD, RESIL_CONFIG_BULKHEADS, err);
    if (rc == 0)
        rc = gather(r, c, old, s, OBJ_LIMITER, RESIL_CONFIG_RATE_LIMITERS, err);
    if (rc == 0)
        rc = gather(r, c, old, s, OBJ_BUDGET, RESIL_CONFIG_BUDGETS, err);
    if (rc == 0)
        rc = gather_degrade(r, c, old, s, err);
    if (rc == 0)
        rc = build_timeouts(c, s, err);
    for (size_t i = 0; rc == 0 && i < n; i++, s->npipelines++)
        rc = build_pipeline(r, c, s, i, err);
    if (rc != 0) {
        snapshot_release(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* ---- the registry -------------------------------------------------------------- */

void resil_policies_opts_default(resil_policies_opts *o)
{
    memset(o, 0, sizeof *o);
}

int resil_policies_new(const resil_policies_opts *o, resil_policies **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "policies: out must not be NULL");
    *out = NULL;
    resil_policies *r = calloc(1, sizeof *r);
    if (r == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "policies: out of memory");
    if (o)
        r->opts = *o;
    r->clock = r->opts.clock ? r->opts.clock : resil_clock_system();
    r->listener.fn = r->opts.listener;
    r->listener.ud = r->opts.listener_ud;
    r->listener.pipeline = "";
    atomic_init(&r->version, 0);
    if (pthread_rwlock_init(&r->lock, NULL) != 0) {
        free(r);
        return resil_err_set(err, RESIL_ESYS, "policies: pthread_rwlock_init failed");
    }
    if (pthread_mutex_init(&r->apply, NULL) != 0) {
        pthread_rwlock_destroy(&r->lock);
        free(r);
        return resil_err_set(err, RESIL_ESYS, "policies: pthread_mutex_init failed");
    }
    resil_standard_opts so;
    resil_standard_opts_default(&so);
    so.clock = r->clock;
    int rc = resil_pipeline_standard(&so, &r->standard, err);
    if (rc != 0) {
        resil_policies_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void resil_policies_free(resil_policies *r)
{
    if (r == NULL)
        return;
    snapshot_release(r->current);
    resil_pipeline_free(r->standard);
    pthread_mutex_destroy(&r->apply);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

int resil_policies_apply(resil_policies *r, const resil_config *c, resil_err *err)
{
    if (r == NULL || c == NULL)
        return resil_err_set(err, RESIL_EINVAL, "policies: registry and config must not be NULL");
    pthread_mutex_lock(&r->apply);
    snapshot *next = NULL, *old = r->current;
    int rc = build_snapshot(r, c, old, &next, err);
    if (rc == 0) {
        pthread_rwlock_wrlock(&r->lock);
        r->current = next;
        pthread_rwlock_unlock(&r->lock);
        atomic_fetch_add(&r->version, 1);
    }
    pthread_mutex_unlock(&r->apply);
    if (rc == 0)
        snapshot_release(old);
    return rc;
}

int resil_policies_load_file(resil_policies *r, const char *path, resil_config_diags *diags)
{
    if (r == NULL || path == NULL)
        return RESIL_EINVAL;
    resil_config *c;
    int rc = resil_config_load_file(path, &c, diags);
    if (rc != 0)
        return rc;
    resil_err e = {0, ""};
    rc = resil_policies_apply(r, c, &e);
    if (rc != 0)
        resil__diag_add(diags, path, 0, 0, "%s", e.message);
    resil_config_free(c);
    return rc;
}

uint64_t resil_policies_version(resil_policies *r)
{
    return r ? atomic_load(&r->version) : 0;
}

static snapshot *acquire(resil_policies *r)
{
    pthread_rwlock_rdlock(&r->lock);
    snapshot *s = r->current;
    if (s)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_rwlock_unlock(&r->lock);
    return s;
}

int resil_policies_get(resil_policies *r, const char *name, resil_policy *out)
{
    if (r == NULL || out == NULL)
        return RESIL_EINVAL;
    memset(out, 0, sizeof *out);
    if (name == NULL || name[0] == '\0') {
        out->pipeline = r->standard;
        out->index_ = SIZE_MAX;
        return 0;
    }
    snapshot *s = acquire(r);
    for (size_t i = 0; s && i < s->npipelines; i++) {
        if (resil__name_eq(resil_pipeline_name(s->pipelines[i].pipeline), name)) {
            out->pipeline = s->pipelines[i].pipeline;
            out->snapshot_ = s;
            out->index_ = i;
            return 0;
        }
    }
    snapshot_release(s);
    return RESIL_ENOTFOUND;
}

void resil_policy_release(resil_policy *p)
{
    if (p == NULL)
        return;
    snapshot_release(p->snapshot_);
    memset(p, 0, sizeof *p);
}

int resil_policies_breaker(resil_policies *r, const char *name, resil_breaker **out)
{
    if (r == NULL || name == NULL || out == NULL)
        return RESIL_EINVAL;
    snapshot *s = acquire(r);
    resil_breaker *b = obj_named(s, OBJ_BREAKER, name);
    *out = resil_breaker_retain(b);
    snapshot_release(s);
    return b ? 0 : RESIL_ENOTFOUND;
}

/* ---- executing through nested pipelines ------------------------------------------ */

/* One layer of a nested execution: the outer pipeline's operation runs
 * `inner` with the caller's call, the outer attempt's token, and `op`. */
typedef struct layer_frame {
    const resil_pipeline *inner;
    resil_op_fn op;
    void *user;
    const resil_call *call;
} layer_frame;

static resil_outcome run_inner(resil_attempt_ctx *ctx)
{
    const layer_frame *f = ctx->user;
    resil_call call = *f->call;
    call.user = f->user;
    call.cancel = ctx->cancel;
    call.records = NULL;
    call.records_cap = 0;
    resil_pipeline_result res;
    int rc = resil_pipeline_execute(f->inner, f->op, &call, &res);
    if (rc != 0)
        return resil_fail(RESIL_PERMANENT, rc, "inner pipeline refused the call");
    return res.outcome;
}

int resil_policy_execute(const resil_policy *p, resil_op_fn op, const resil_call *call,
                         resil_pipeline_result *out)
{
    if (p == NULL || p->pipeline == NULL || op == NULL || out == NULL)
        return RESIL_EINVAL;
    const snapshot *s = p->snapshot_;
    resil_call base;
    if (call == NULL) {
        resil_call_default(&base);
        call = &base;
    }
    layer_frame frames[RESIL_CONFIG_NEST_MAX];
    size_t depth = 0;
    for (size_t i = s ? s->pipelines[p->index_].inner : SIZE_MAX;
         i != SIZE_MAX && depth < RESIL_CONFIG_NEST_MAX; i = s->pipelines[i].inner)
        frames[depth++].inner = s->pipelines[i].pipeline;
    if (depth == 0)
        return resil_pipeline_execute(p->pipeline, op, call, out);
    /* frames[k] runs frames[k].inner; its operation is frames[k+1]'s. */
    for (size_t k = 0; k < depth; k++) {
        frames[k].call = call;
        frames[k].op = k + 1 < depth ? run_inner : op;
        frames[k].user = k + 1 < depth ? (void *)&frames[k + 1] : call->user;
    }
    resil_call outer = *call;
    outer.user = &frames[0];
    return resil_pipeline_execute(p->pipeline, run_inner, &outer, out);
}
