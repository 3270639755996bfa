/*
 * pipeline_adaptive.c — the adaptive limiter and client-side throttling at
 * their place in the walk.
 *
 * Both judge what came back with the pipeline's classifier, the one the
 * breaker uses, so "the dependency's fault" means the same thing to all
 * three: a drop for the limiter, a request not accepted for the throttle,
 * a failure for the breaker. Neither reads the clock on a call that did
 * not wait: the throttle counts the call in the bucket of its start, and
 * the limiter takes the reading a breaker below already made, or makes
 * one and leaves it for the retry above.
 */
#include "pipeline_steps.h"

/* ---- adaptive limiter ---------------------------------------------------- */

resil_instant resil__limiter_end_of_call(const resil__run *r, const resil__frame *f)
{
    if (f->reading != NULL && f->reading->fresh)
        return f->reading->now;
    resil_instant now = resil_clock_now(r->p->clock);
    if (f->reading != NULL) {
        f->reading->now = now;
        f->reading->fresh = true;
    }
    return now;
}

void resil__limiter_refuse(const resil__run *r, const resil__frame *f, int rc, resil_outcome *out)
{
    resil__refused_after_wait(r, rc);
    if (rc == RESIL_ECANCELED) {
        *out = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED,
                          "cancelled waiting for the adaptive limiter");
        return;
    }
    resil__reject(r, RESIL_EVENT_LIMIT_REJECTED, RESIL_STRATEGY_ADAPTIVE_LIMITER, f,
                  rc == RESIL_ETIMEDOUT ? "adaptive limiter queue timeout" : "adaptive limit reached",
                  RESIL_NO_HINT, out);
}

void resil__run_adaptive_limiter(const resil__run *r, size_t i, const resil__frame *f,
                                 resil_outcome *out)
{
    const resil__node *n = resil__node_at(r, i);
    resil_limiter_ticket t;
    int rc = n->same_clock ? resil__limiter_acquire_at(n->limiter, f->cancel, f->now, &t)
                           : resil_limiter_acquire(n->limiter, f->cancel, &t);
    if (rc != 0) {
        resil__limiter_refuse(r, f, rc, out);
        return;
    }
    resil__chain_admitted(r, i, f, t.queued, resil__chain, out);
    resil__limiter_leave(r, n, f, &t, out);
}

void resil__limit_changed(void *ud, int32_t from, int32_t to, resil_instant at)
{
    const resil_pipeline *p = ud;
    if (!resil__listening(p))
        return;
    resil_event ev;
    resil__event_init(&ev, p, RESIL_EVENT_LIMIT_CHANGED, RESIL_STRATEGY_ADAPTIVE_LIMITER, at);
    ev.from = from;
    ev.to = to;
    resil__emit(p, &ev);
}

static int limiter_node(resil_pipeline_builder *b, resil_limiter *l, bool owned)
{
    resil__node *n;
    int rc = resil__builder_node(b, RESIL_STRATEGY_ADAPTIVE_LIMITER, &n);
    if (rc != 0) {
        if (owned)
            resil_limiter_free(l);
        return rc;
    }
    n->limiter = l;
    n->owned = owned;
    n->same_clock = resil__limiter_clock(l) == resil__builder_pipeline(b)->clock;
    return resil__builder_commit(b);
}

int resil_pipeline_add_adaptive_limiter(resil_pipeline_builder *b, const resil_limiter_opts *o)
{
    if (b == NULL || resil__builder_pipeline(b) == NULL)
        return resil__builder_node(b, RESIL_STRATEGY_ADAPTIVE_LIMITER, &(resil__node *){NULL});
    if (o == NULL)
        return resil__builder_null(b, "adaptive_limiter: options");
    resil_pipeline *p = resil__builder_pipeline(b);
    resil_limiter_opts copy = *o;
    if (copy.clock == NULL)
        copy.clock = p->clock;
    if (copy.on_change == NULL) {
        copy.on_change = resil__limit_changed;
        copy.on_change_ud = p;
    }
    resil_limiter *l;
    resil_err e;
    int rc = resil_limiter_new(&copy, &l, &e);
    if (rc != 0)
        return resil__builder_keep(b, rc, &e);
    return limiter_node(b, l, true);
}

int resil_pipeline_use_adaptive_limiter(resil_pipeline_builder *b, resil_limiter *l)
{
    if (b == NULL)
        return RESIL_EINVAL;
    if (l == NULL)
        return resil__builder_null(b, "adaptive_limiter: limiter");
    return limiter_node(b, l, false);
}

/* ---- throttle ------------------------------------------------------------------ */

void resil__run_throttle(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out)
{
    const resil__node *n = resil__node_at(r, i);
    resil_instant start;
    if (!resil__throttle_enter(r, n, f, &start, out))
        return;
    resil__chain(r, i + 1, f, out);
    resil__throttle_leave(r, n, f, start, out);
}

static int throttle_node(resil_pipeline_builder *b, resil_throttle *t, bool owned)
{
    resil__node *n;
    int rc = resil__builder_node(b, RESIL_STRATEGY_THROTTLE, &n);
    if (rc != 0) {
        if (owned)
            resil_throttle_free(t);
        return rc;
    }
    n->throttle = t;
    n->owned = owned;
    resil_clock *c = resil__throttle_clock(t);
    n->same_clock = c == NULL || c == resil__builder_pipeline(b)->clock;
    return resil__builder_commit(b);
}

int resil_pipeline_add_throttle(resil_pipeline_builder *b, const resil_throttle_opts *o)
{
    if (b == NULL || resil__builder_pipeline(b) == NULL)
        return resil__builder_node(b, RESIL_STRATEGY_THROTTLE, &(resil__node *){NULL});
    if (o == NULL)
        return resil__builder_null(b, "throttle: options");
    resil_throttle_opts copy = *o;
    if (copy.clock == NULL)
        copy.clock = resil__builder_pipeline(b)->clock;
    resil_throttle *t;
    resil_err e;
    int rc = resil_throttle_new(&copy, &t, &e);
    if (rc != 0)
        return resil__builder_keep(b, rc, &e);
    return throttle_node(b, t, true);
}

int resil_pipeline_use_throttle(resil_pipeline_builder *b, resil_throttle *t)
{
    if (b == NULL)
        return RESIL_EINVAL;
    if (t == NULL)
        return resil__builder_null(b, "throttle: throttle");
    return throttle_node(b, t, false);
}

/* ---- accessors ------------------------------------------------------------------ */

resil_limiter *resil_pipeline_adaptive_limiter(const resil_pipeline *p)
{
    const resil__node *n = resil__node_find(p, RESIL_STRATEGY_ADAPTIVE_LIMITER);
    return n != NULL ? n->limiter : NULL;
}

resil_throttle *resil_pipeline_throttle(const resil_pipeline *p)
{
    const resil__node *n = resil__node_find(p, RESIL_STRATEGY_THROTTLE);
    return n != NULL ? n->throttle : NULL;
}
