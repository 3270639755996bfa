/*
 * gateway_chaos.c — the gateway's --chaos-* flags: their values, and the
 * decision taken for each request (see gateway_chaos.h).
 *
 * There is no second implementation of an injection here: each flag is
 * one of the library's chaos strategies (resil_chaos), which owns the
 * rate, the switch, the seeded draws and the counts. The gateway's kinds
 * map onto the library's by what they do: an answer of the gateway's own
 * stands in for the upstream's (a fault: chaos-fault), a wait comes first
 * (chaos-latency), a dropped connection is a behaviour (chaos-behavior),
 * so /metrics shows them under Polly's event names, Chaos.OnFault,
 * Chaos.OnLatency and Chaos.OnBehavior. The strategies are decided here
 * in the order a pipeline [latency, drop, status] would walk them, and
 * with the seeds `resil run` gives its own (latency the seed, a fault the
 * seed + 1), so an experiment reads the same on either side of the wire.
 *
 * The seed is drawn here when none is given, rather than by each
 * strategy, so the start-up line can say which one to pass to replay the
 * run; it is drawn as the library draws a strategy's own (resil__os_seed,
 * the core's, linked statically into the tool).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_opts.h"
#include "gateway_chaos.h"
#include "internal.h" /* src/core's: resil__os_seed */

enum { K_LATENCY, K_STATUS, K_DROP, K_COUNT };

struct gw_chaos {
    resil_chaos *k[K_COUNT]; /* NULL: that flag was not given */
    gw_chaos_config cfg;
    uint64_t seed;
    resil_clock *clock;
    resil_metrics *metrics;
    resil_outcome status_outcome; /* what a chaos-fault event reports */
    char retry_after[24];
};

void gw_chaos_config_default(gw_chaos_config *c)
{
    memset(c, 0, sizeof *c);
    c->status_rate = -1;
    c->latency_rate = -1;
    c->drop_rate = -1;
    c->retry_after = -1;
}

/* ---- the values ---------------------------------------------------------- */

static const char status_form[] = "RATE:CODE[:RETRY_AFTER], such as 0.1:503:30 (CODE from 400 "
                                  "to 599, RETRY_AFTER in seconds up to a day)";

/* RETRY_AFTER: seconds as the header has them ("30"), or a duration of
 * whole seconds ("30s", "2m"), at most a day. */
static bool retry_after_value(const char *text, int64_t *out)
{
    uint64_t n;
    if (args_whole(text, &n)) {
        if (n > GW_CHAOS_RETRY_AFTER_MAX)
            return false;
        *out = (int64_t)n;
        return true;
    }
    resil_duration d;
    resil_err err;
    if (resil_duration_parse_cstr(text, &d, &err) != 0 || d < 0 || d % RESIL_S(1) != 0 ||
        d > RESIL_S(GW_CHAOS_RETRY_AFTER_MAX))
        return false;
    *out = d / RESIL_S(1);
    return true;
}

static int parse_status(gw_chaos_config *c, const args *a, const char *v)
{
    const char *rest = NULL;
    if (chaos_value_rate_split(a, "--chaos-status", status_form, v, &c->status_rate, &rest) != 0)
        return RESIL_EINVAL;
    char code[16];
    size_t len = strcspn(rest, ":");
    uint64_t n;
    if (len >= sizeof code)
        return args_reject(a, "--chaos-status", status_form, v);
    memcpy(code, rest, len);
    code[len] = '\0';
    if (!args_whole(code, &n) || n < 400 || n > 599)
        return args_reject(a, "--chaos-status", status_form, v);
    c->status = (int)n;
    c->retry_after = -1;
    if (rest[len] == ':' && !retry_after_value(rest + len + 1, &c->retry_after))
        return args_reject(a, "--chaos-status", status_form, v);
    return 0;
}

static int parse_latency(gw_chaos_config *c, const args *a, const char *v)
{
    return chaos_value_rate_duration(a, "--chaos-latency", v, &c->latency_rate, &c->latency);
}

static int parse_drop(gw_chaos_config *c, const args *a, const char *v)
{
    return args_rate(a, "--chaos-drop", v, &c->drop_rate);
}

static int parse_seed(gw_chaos_config *c, const args *a, const char *v)
{
    return chaos_value_seed(a, "--chaos-seed", v, &c->seed);
}

int gw_chaos_parse(gw_chaos_config *c, args *a)
{
    static const struct {
        const char *name;
        int (*fn)(gw_chaos_config *c, const args *a, const char *v);
    } options[] = {{"--chaos-status", parse_status},
                   {"--chaos-latency", parse_latency},
                   {"--chaos-drop", parse_drop},
                   {"--chaos-seed", parse_seed}};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const char *v;
        int m = args_match(a, options[i].name, NULL, &v);
        if (m != 0)
            return m < 0 ? m : options[i].fn(c, a, v) < 0 ? RESIL_EINVAL : 1;
    }
    return 0;
}

bool gw_chaos_configured(const gw_chaos_config *c)
{
    return c->status_rate >= 0 || c->latency_rate >= 0 || c->drop_rate >= 0;
}

int gw_chaos_check(const gw_chaos_config *c, const args *a)
{
    if (c->seed != 0 && !gw_chaos_configured(c))
        return args_fail(a, "--chaos-seed needs --chaos-status, --chaos-latency or "
                            "--chaos-drop");
    return 0;
}

/* ---- the strategies ------------------------------------------------------ */

/* The library wants a behaviour for its kind; the gateway performs the
 * drop itself, on its loop, so there is nothing to call. */
static void dropped_by_the_gateway(const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
}

static int add(gw_chaos *c, int slot, resil_chaos_kind kind, double rate)
{
    if (rate < 0)
        return 0;
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, kind);
    o.rate = rate;
    o.seed = chaos_seed_after(c->seed, (uint64_t)slot);
    o.latency = c->cfg.latency;
    o.outcome = c->status_outcome;
    o.behavior = dropped_by_the_gateway;
    resil_err err;
    return resil_chaos_new(&o, &c->k[slot], &err);
}

int gw_chaos_new(const gw_chaos_config *cfg, resil_clock *clock, resil_metrics *metrics,
                 gw_chaos **out)
{
    *out = NULL;
    if (!gw_chaos_configured(cfg))
        return 0;
    gw_chaos *c = calloc(1, sizeof *c);
    if (c == NULL)
        return RESIL_ENOMEM;
    c->cfg = *cfg;
    c->seed = cfg->seed != 0 ? cfg->seed : resil__os_seed();
    c->clock = clock;
    c->metrics = metrics;
    /* An injected answer reports as the library's default fault does (a
     * transient failure), with the status as its code. */
    c->status_outcome = resil_fail(RESIL_TRANSIENT, cfg->status, "injected status");
    if (cfg->retry_after >= 0)
        snprintf(c->retry_after, sizeof c->retry_after, "%lld", (long long)cfg->retry_after);
    /* The options were checked as they were read: only memory can fail. */
    if (add(c, K_LATENCY, RESIL_CHAOS_LATENCY, cfg->latency_rate) != 0 ||
        add(c, K_STATUS, RESIL_CHAOS_FAULT, cfg->status_rate) != 0 ||
        add(c, K_DROP, RESIL_CHAOS_BEHAVIOR, cfg->drop_rate) != 0) {
        gw_chaos_free(c);
        return RESIL_ENOMEM;
    }
    *out = c;
    return 0;
}

void gw_chaos_free(gw_chaos *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < K_COUNT; i++)
        resil_chaos_free(c->k[i]);
    free(c);
}

/* One injection as the library's pipelines report it. */
static void report(gw_chaos *c, resil_strategy_kind strategy, resil_chaos_kind kind,
                   const resil_outcome *o, resil_duration delay)
{
    if (c->metrics == NULL)
        return;
    resil_event ev = {.type = RESIL_EVENT_CHAOS_INJECTED, .pipeline = "gateway",
                      .strategy = resil_strategy_name(strategy), .key = "",
                      .at = resil_clock_now(c->clock), .delay = delay, .outcome = o,
                      .reason = resil_chaos_kind_name(kind), .from_name = "", .to_name = ""};
    ev.severity = resil_event_severity(ev.type, o);
    resil_metrics_on_event(&ev, c->metrics);
}

static bool decide(gw_chaos *c, int slot)
{
    return c->k[slot] != NULL && resil_chaos_decide(c->k[slot]);
}

bool gw_chaos_pick(gw_chaos *c, gw_chaos_action *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return false;
    bool any = false;
    if (decide(c, K_LATENCY)) {
        out->delay = c->cfg.latency;
        report(c, RESIL_STRATEGY_CHAOS_LATENCY, RESIL_CHAOS_LATENCY, NULL, out->delay);
        any = true;
    }
    if (decide(c, K_DROP)) {
        out->end = GW_CHAOS_DROP;
        report(c, RESIL_STRATEGY_CHAOS_BEHAVIOR, RESIL_CHAOS_BEHAVIOR, NULL, 0);
        return true;
    }
    if (decide(c, K_STATUS)) {
        out->end = GW_CHAOS_STATUS;
        out->status = c->cfg.status;
        out->retry_after = c->retry_after[0] != '\0' ? c->retry_after : NULL;
        report(c, RESIL_STRATEGY_CHAOS_FAULT, RESIL_CHAOS_FAULT, &c->status_outcome, 0);
        return true;
    }
    return any;
}

bool gw_chaos_enabled(const gw_chaos *c)
{
    for (int i = 0; i < K_COUNT; i++)
        if (c->k[i] != NULL)
            return resil_chaos_enabled(c->k[i]);
    return false;
}

bool gw_chaos_toggle(gw_chaos *c)
{
    bool on = !gw_chaos_enabled(c);
    for (int i = 0; i < K_COUNT; i++)
        if (c->k[i] != NULL)
            resil_chaos_enable(c->k[i], on);
    return on;
}

uint64_t gw_chaos_injected(const gw_chaos *c)
{
    uint64_t n = 0;
    for (int i = 0; i < K_COUNT; i++)
        if (c->k[i] != NULL)
            n += resil_chaos_injected(c->k[i]);
    return n;
}

uint64_t gw_chaos_seed(const gw_chaos *c) { return c->seed; }

/* ---- words for the log --------------------------------------------------- */

typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...) RESIL_PRINTF(2, 3);

static void put(text *t, const char *fmt, ...)
{
    if (t->len >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
}

void gw_chaos_note(const gw_chaos_action *a, char *buf, size_t cap)
{
    text t = {buf, cap, 0};
    if (cap > 0)
        buf[0] = '\0';
    char d[32];
    const char *sep = "chaos=";
    if (a->delay > 0) {
        resil_duration_format(a->delay, d, sizeof d);
        put(&t, "%slatency:%s", sep, d);
        sep = ",";
    }
    if (a->end == GW_CHAOS_STATUS)
        put(&t, "%sstatus:%d", sep, a->status);
    else if (a->end == GW_CHAOS_DROP)
        put(&t, "%sdrop", sep);
}

void gw_chaos_describe(const gw_chaos *c, char *buf, size_t cap)
{
    text t = {buf, cap, 0};
    if (cap > 0)
        buf[0] = '\0';
    const gw_chaos_config *g = &c->cfg;
    const char *sep = "";
    if (g->status_rate >= 0) {
        put(&t, "status %g:%d", g->status_rate, g->status);
        if (g->retry_after >= 0)
            put(&t, ":%lld", (long long)g->retry_after);
        sep = ", ";
    }
    if (g->latency_rate >= 0) {
        char d[32];
        resil_duration_format(g->latency, d, sizeof d);
        put(&t, "%slatency %g:%s", sep, g->latency_rate, d);
        sep = ", ";
    }
    if (g->drop_rate >= 0)
        put(&t, "%sdrop %g", sep, g->drop_rate);
}
