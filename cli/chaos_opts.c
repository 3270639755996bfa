/*
 * chaos_opts.c — --chaos-fail, --chaos-latency and --chaos-seed as a
 * pipeline of the library's chaos strategies (see chaos_opts.h).
 *
 * The pipeline's operation is a trampoline back to the attempt the
 * command is running, with that attempt's own context (its number,
 * deadline and token), so what runs inside sees no difference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_opts.h"

const char chaos_opts_help[] =
    "chaos (inject failure on purpose; replay a run exactly with --chaos-seed):\n"
    "      --chaos-fail RATE      a share RATE in [0,1] of attempts fail at once,\n"
    "                             without running\n"
    "      --chaos-latency RATE:DURATION\n"
    "                             a share RATE of attempts wait DURATION first\n"
    "      --chaos-seed N         the draws' seed (default: from the OS)\n";

void chaos_opts_default(chaos_opts *c)
{
    memset(c, 0, sizeof *c);
    c->fail_rate = -1;
    c->latency_rate = -1;
}

int chaos_opts_fail(chaos_opts *c, const args *a, const char *v)
{
    return args_rate(a, "--chaos-fail", v, &c->fail_rate);
}

int chaos_value_rate_split(const args *a, const char *option, const char *form, const char *v,
                           double *rate, const char **rest)
{
    const char *colon = strchr(v, ':');
    char text[64];
    if (colon == NULL || (size_t)(colon - v) >= sizeof text)
        return args_reject(a, option, form, v);
    snprintf(text, sizeof text, "%.*s", (int)(colon - v), v);
    if (args_rate(a, option, text, rate) != 0)
        return RESIL_EINVAL;
    *rest = colon + 1;
    return 0;
}

int chaos_value_rate_duration(const args *a, const char *option, const char *v, double *rate,
                              resil_duration *d)
{
    const char *rest = NULL;
    if (chaos_value_rate_split(a, option, "RATE:DURATION, such as 0.1:2s", v, rate, &rest) != 0)
        return RESIL_EINVAL;
    return args_duration(a, option, rest, true, d);
}

int chaos_value_seed(const args *a, const char *option, const char *v, uint64_t *seed)
{
    return args_uint64(a, option, v, 1, UINT64_MAX, seed);
}

int chaos_opts_latency(chaos_opts *c, const args *a, const char *v)
{
    return chaos_value_rate_duration(a, "--chaos-latency", v, &c->latency_rate, &c->latency);
}

int chaos_opts_seed(chaos_opts *c, const args *a, const char *v)
{
    return chaos_value_seed(a, "--chaos-seed", v, &c->seed);
}

static int consumed(int rc) { return rc < 0 ? rc : 1; }

int chaos_opts_parse(chaos_opts *c, args *a)
{
    static const struct {
        const char *name;
        int (*fn)(chaos_opts *c, const args *a, const char *v);
    } options[] = {{"--chaos-fail", chaos_opts_fail},
                   {"--chaos-latency", chaos_opts_latency},
                   {"--chaos-seed", chaos_opts_seed}};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const char *v;
        int m = args_match(a, options[i].name, NULL, &v);
        if (m != 0)
            return m < 0 ? m : consumed(options[i].fn(c, a, v));
    }
    return 0;
}

static void add(resil_pipeline_builder *b, resil_chaos_kind k, double rate, uint64_t seed,
                resil_outcome fault, resil_duration latency)
{
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, k);
    o.rate = rate;
    o.seed = seed;
    o.outcome = fault;
    o.latency = latency;
    resil_pipeline_add_chaos(b, &o); /* the build reports a failure */
}

uint64_t chaos_seed_after(uint64_t seed, uint64_t k)
{
    if (seed == 0)
        return 0;
    uint64_t s = seed + k;
    return s < seed ? s + 1 : s;
}

static int failed(const char *tool, const resil_err *err)
{
    fprintf(stderr, "%s: chaos: %s\n", tool, err->message);
    return RESIL_EINVAL;
}

int chaos_opts_finish(chaos_opts *c, const char *tool, resil_clock *clock, resil_outcome fault)
{
    if (c->fail_rate < 0 && c->latency_rate < 0)
        return 0;
    resil_pipeline_builder *b;
    resil_err err;
    if (resil_pipeline_builder_new("chaos", &b, &err) != 0)
        return failed(tool, &err);
    resil_pipeline_builder_clock(b, clock);
    if (c->latency_rate >= 0)
        add(b, RESIL_CHAOS_LATENCY, c->latency_rate, c->seed, fault, c->latency);
    if (c->fail_rate >= 0)
        add(b, RESIL_CHAOS_FAULT, c->fail_rate, chaos_seed_after(c->seed, 1), fault, 0);
    int rc = resil_pipeline_build(b, &c->p, &err);
    resil_pipeline_builder_free(b);
    return rc == 0 ? 0 : failed(tool, &err);
}

typedef struct trampoline {
    resil_op_fn op;
    resil_attempt_ctx *outer;
    bool ran;
} trampoline;

static resil_outcome bounce(resil_attempt_ctx *ctx)
{
    trampoline *t = ctx->user;
    t->ran = true;
    return t->op(t->outer);
}

resil_outcome chaos_opts_run(const chaos_opts *c, resil_op_fn op, resil_attempt_ctx *ctx,
                             bool *injected)
{
    *injected = false;
    if (c->p == NULL)
        return op(ctx);
    trampoline t = {op, ctx, false};
    resil_call call;
    resil_call_default(&call);
    call.user = &t;
    call.cancel = ctx->cancel;
    resil_pipeline_result r;
    resil_pipeline_execute(c->p, bounce, &call, &r);
    *injected = !t.ran;
    return r.outcome;
}

void chaos_opts_strategies(const chaos_opts *c, resil_chaos *out[CHAOS_OPTS_MAX + 1])
{
    static const resil_chaos_kind order[CHAOS_OPTS_MAX] = {RESIL_CHAOS_LATENCY,
                                                           RESIL_CHAOS_FAULT};
    size_t n = 0;
    for (size_t i = 0; i < CHAOS_OPTS_MAX; i++) {
        resil_chaos *k = resil_pipeline_chaos(c->p, order[i]);
        if (k != NULL)
            out[n++] = k;
    }
    out[n] = NULL;
}

void chaos_opts_free(chaos_opts *c)
{
    resil_pipeline_free(c->p);
    c->p = NULL;
}
