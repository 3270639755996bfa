/*
 * pipeline_chaos.c — the chaos strategies at their place in the walk.
 *
 * The chaos object only decides (chaos.c); what an injection does is
 * here, in the executor: fail without calling the rest, replace what the
 * rest returned, wait first, or run the caller's behaviour first. The
 * wait is the pipeline's bounded sleep, so it ends at the enclosing
 * deadline and on the caller's cancel like every other wait resil does;
 * the asynchronous execution (pipeline_async.c) arms a timer for the same
 * duration instead, and shares the rest through pipeline_steps.h. A strategy switched off costs the switch's load and a branch.
 */
#include "pipeline_steps.h"

static resil_strategy_kind kind_for(resil_chaos_kind k)
{
    return (resil_strategy_kind)(RESIL_STRATEGY_CHAOS_FAULT + (int)k);
}

void resil__chaos_report(const resil__run *r, const resil__node *n, const resil__frame *f,
                         const resil_outcome *o)
{
    resil_event ev;
    resil__event_init_run(&ev, r, RESIL_EVENT_CHAOS_INJECTED, n->kind, f->now);
    ev.key = r->operation != NULL ? r->operation : "";
    ev.attempt = f->attempt;
    ev.hedge = f->hedge;
    if (n->chaos_opts.kind == RESIL_CHAOS_LATENCY)
        ev.delay = n->chaos_opts.latency;
    ev.outcome = o;
    ev.reason = resil_chaos_kind_name(n->chaos_opts.kind);
    resil__emit(r->p, &ev);
}

/* The rest of the walk after this level spent time: a fresh reading. */
static void go_on_later(const resil__run *r, size_t i, const resil__frame *f,
                        resil_outcome *out)
{
    resil__frame inner;
    resil__frame_later(r, f, &inner);
    resil__chain(r, i + 1, &inner, out);
}

static void wait_then_go(const resil__run *r, size_t i, const resil__frame *f,
                         resil_outcome *out)
{
    const resil__node *n = &r->p->nodes[i];
    int rc = resil__sleep_bounded(r->p->clock, n->chaos_opts.latency, f->cancel, f->deadline,
                                  f->deadline_token);
    if (rc != 0) {
        resil__chaos_cut(out);
        resil__read_now(r);
        return;
    }
    go_on_later(r, i, f, out);
}

void resil__chaos_behave(const resil__run *r, const resil__node *n, const resil__frame *f)
{
    resil_attempt_ctx ctx = resil__frame_ctx(r, f);
    n->chaos_opts.behavior(&ctx, n->chaos_opts.behavior_ud);
}

void resil__run_chaos(const resil__run *r, size_t i, const resil__frame *f, resil_outcome *out)
{
    const resil__node *n = &r->p->nodes[i];
    if (!resil_chaos_decide(n->chaos)) {
        resil__chain(r, i + 1, f, out);
        return;
    }
    bool listening = resil__listening(r->p);
    switch (n->chaos_opts.kind) {
    case RESIL_CHAOS_FAULT:
        *out = n->chaos_opts.outcome;
        break;
    case RESIL_CHAOS_OUTCOME:
        resil__chain(r, i + 1, f, out);
        *out = n->chaos_opts.outcome;
        break;
    case RESIL_CHAOS_LATENCY:
        if (listening)
            resil__chaos_report(r, n, f, NULL);
        wait_then_go(r, i, f, out);
        return;
    case RESIL_CHAOS_BEHAVIOR:
        if (listening)
            resil__chaos_report(r, n, f, NULL);
        resil__chaos_behave(r, n, f);
        go_on_later(r, i, f, out);
        return;
    }
    if (listening)
        resil__chaos_report(r, n, f, out);
}

/* ---- building ------------------------------------------------------------ */

static int add_node(resil_pipeline_builder *b, resil_chaos *c, bool owned)
{
    resil_chaos_opts o;
    resil_chaos_opts_get(c, &o);
    resil__node *n;
    int rc = resil__builder_node(b, kind_for(o.kind), &n);
    if (rc != 0) {
        if (owned)
            resil_chaos_free(c);
        return rc;
    }
    n->chaos = c;
    n->chaos_opts = o;
    n->owned = owned;
    return resil__builder_commit(b);
}

int resil_pipeline_add_chaos(resil_pipeline_builder *b, const resil_chaos_opts *o)
{
    if (b == NULL)
        return RESIL_EINVAL;
    if (o == NULL)
        return resil__builder_null(b, "chaos: options");
    resil_chaos *c;
    resil_err e;
    int rc = resil_chaos_new(o, &c, &e);
    if (rc != 0)
        return resil__builder_keep(b, rc, &e);
    return add_node(b, c, true);
}

int resil_pipeline_use_chaos(resil_pipeline_builder *b, resil_chaos *c)
{
    if (b == NULL)
        return RESIL_EINVAL;
    if (c == NULL)
        return resil__builder_null(b, "chaos: strategy");
    return add_node(b, c, false);
}

resil_chaos *resil_pipeline_chaos(const resil_pipeline *p, resil_chaos_kind kind)
{
    if (p == NULL || (unsigned)kind >= RESIL_CHAOS_KIND_COUNT)
        return NULL;
    const resil__node *n = resil__node_find(p, kind_for(kind));
    return n != NULL ? n->chaos : NULL;
}
