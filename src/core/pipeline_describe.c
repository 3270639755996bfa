/*
 * pipeline_describe.c — a pipeline saying what it is: strategies in order
 * with their options, as text for people and JSON for tools (tests, and the
 * configuration checker), plus the warnings found when it was built.
 *
 * Both formats come from one list of fields per strategy, written through a
 * small writer that knows the format, so text and JSON cannot drift apart;
 * field names are the option names of the C structs, so a reader can map
 * them back. Durations are written in the duration parser's own units
 * ("30s", "1m30s"), so every figure round-trips through the config parser.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"

/* ---- warnings ---------------------------------------------------------- */

static int add_warning(resil_pipeline *p, const char *text)
{
    char **w = realloc(p->warnings, (p->nwarnings + 1) * sizeof *w);
    if (w == NULL)
        return RESIL_ENOMEM;
    p->warnings = w;
    if ((w[p->nwarnings] = strdup(text)) == NULL)
        return RESIL_ENOMEM;
    p->nwarnings++;
    return 0;
}

/* The longest the retry can wait in total: the largest wait after each
 * failure but the last, as the backoff can produce it. */
static resil_duration largest_waits(const resil_retry_policy *pol)
{
    resil_duration sum = 0;
    for (uint32_t n = 1; n < pol->max_attempts; n++)
        sum = resil_dur_add(sum, resil_backoff_max_delay(&pol->backoff, n));
    return sum;
}

static size_t retry_count(const resil_pipeline *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nnodes; i++)
        n += p->nodes[i].kind == RESIL_STRATEGY_RETRY;
    return n;
}

/* Nested retries multiply: from the innermost out, one attempt of a retry
 * is a whole run of the one inside it. */
static int nested_worst_case_warning(resil_pipeline *p, const resil__node *total,
                                     const resil__node *attempt)
{
    resil_duration bound = attempt->timeout.timeout;
    for (size_t i = p->nnodes; i-- > 0;) {
        const resil__node *n = &p->nodes[i];
        if (n->kind != RESIL_STRATEGY_RETRY)
            continue;
        if (n->policy.max_attempts == RESIL_ATTEMPTS_FOREVER)
            return 0; /* the single-retry rule words this case */
        bound = resil_dur_add(resil_dur_mul(bound, n->policy.max_attempts),
                              largest_waits(&n->policy));
    }
    if (bound <= total->timeout.timeout)
        return 0;
    char text[192], tt[32], wt[32];
    resil_duration_format(total->timeout.timeout, tt, sizeof tt);
    resil_duration_format(bound, wt, sizeof wt);
    snprintf(text, sizeof text,
             "worst case %s over %zu nested retries exceeds the total timeout %s: "
             "later attempts will be cut short",
             wt, retry_count(p), tt);
    return add_warning(p, text);
}

static int worst_case_warning(resil_pipeline *p)
{
    const resil__node *total = resil__node_find(p, RESIL_STRATEGY_TOTAL_TIMEOUT);
    const resil__node *retry = resil__node_find(p, RESIL_STRATEGY_RETRY);
    const resil__node *attempt = resil__node_find(p, RESIL_STRATEGY_ATTEMPT_TIMEOUT);
    if (total == NULL || retry == NULL || attempt == NULL || retry->implicit)
        return 0;
    if (retry_count(p) > 1)
        return nested_worst_case_warning(p, total, attempt);
    char text[256], tt[32], at[32], wt[32], sum[32];
    resil_duration_format(total->timeout.timeout, tt, sizeof tt);
    if (retry->policy.max_attempts == RESIL_ATTEMPTS_FOREVER) {
        snprintf(text, sizeof text,
                 "retry.max_attempts is forever: the total timeout (%s) is the only bound", tt);
        return add_warning(p, text);
    }
    uint32_t attempts = retry->policy.max_attempts;
    /* Jitter bounds are rarely round: say them to the millisecond, up. */
    resil_duration waits = largest_waits(&retry->policy);
    if (waits % RESIL_MS(1) != 0)
        waits = resil_dur_add(waits - waits % RESIL_MS(1), RESIL_MS(1));
    resil_duration worst = resil_dur_add(resil_dur_mul(attempt->timeout.timeout, attempts), waits);
    if (worst <= total->timeout.timeout)
        return 0;
    resil_duration_format(attempt->timeout.timeout, at, sizeof at);
    resil_duration_format(waits, wt, sizeof wt);
    resil_duration_format(worst, sum, sizeof sum);
    snprintf(text, sizeof text,
             "worst case %u attempts x %s + %s of waits = %s exceeds the total timeout %s: "
             "later attempts will be cut short",
             (unsigned)attempts, at, wt, sum, tt);
    return add_warning(p, text);
}

static int hedge_delay_warning(resil_pipeline *p)
{
    const resil__node *hedge = resil__node_find(p, RESIL_STRATEGY_HEDGING);
    const resil__node *attempt = resil__node_find(p, RESIL_STRATEGY_ATTEMPT_TIMEOUT);
    if (hedge == NULL || attempt == NULL || attempt > hedge ||
        hedge->hedge.delay < attempt->timeout.timeout || hedge->hedge.delay == 0)
        return 0;
    char text[160], d[32], t[32];
    resil_duration_format(hedge->hedge.delay, d, sizeof d);
    resil_duration_format(attempt->timeout.timeout, t, sizeof t);
    snprintf(text, sizeof text,
             "hedging.delay (%s) is not shorter than the attempt timeout (%s): "
             "no hedge can start in time",
             d, t);
    return add_warning(p, text);
}

/* Chaos outside the retry strikes the caller, not an attempt: legal (an
 * experiment on the caller's own handling), but seldom what was meant. */
static int chaos_warnings(resil_pipeline *p)
{
    const resil__node *retry = resil__node_find(p, RESIL_STRATEGY_RETRY);
    if (retry == NULL || retry->implicit)
        return 0;
    int rc = 0;
    for (const resil__node *n = p->nodes; n < retry && rc == 0; n++) {
        if (n->kind != RESIL_STRATEGY_CHAOS_FAULT && n->kind != RESIL_STRATEGY_CHAOS_OUTCOME)
            continue;
        char text[160];
        snprintf(text, sizeof text,
                 "%s comes before the retry: its injections reach the caller unretried",
                 resil_strategy_name(n->kind));
        rc = add_warning(p, text);
    }
    return rc;
}

int resil__pipeline_warnings(resil_pipeline *p)
{
    int rc = worst_case_warning(p);
    if (rc == 0)
        rc = hedge_delay_warning(p);
    if (rc == 0)
        rc = chaos_warnings(p);
    return rc;
}

/* ---- the writer ---------------------------------------------------------------- */

typedef struct desc {
    resil__text t;
    bool json;
    int fields; /* fields written in the current object */
} desc;

static void key(desc *d, const char *name)
{
    if (d->json) {
        resil__text_puts(&d->t, d->fields++ ? ",\"" : "\"");
        resil__text_puts(&d->t, name);
        resil__text_puts(&d->t, "\":");
    } else {
        resil__text_puts(&d->t, " ");
        resil__text_puts(&d->t, name);
        resil__text_puts(&d->t, "=");
    }
}

static void f_str(desc *d, const char *name, const char *v)
{
    key(d, name);
    if (!d->json) {
        resil__text_puts(&d->t, v);
        return;
    }
    resil__text_puts(&d->t, "\"");
    resil__text_escaped(&d->t, v, true);
    resil__text_puts(&d->t, "\"");
}

static void f_int(desc *d, const char *name, long long v)
{
    key(d, name);
    resil__text_printf(&d->t, "%lld", v);
}

/* The shortest form that reads back as the same double: 0.1, not
 * 0.10000000000000001. */
static void f_num(desc *d, const char *name, double v)
{
    char text[32];
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*g", precision, v);
        if (strtod(text, NULL) == v)
            break;
    }
    key(d, name);
    resil__text_puts(&d->t, text);
}

static void f_bool(desc *d, const char *name, bool v)
{
    key(d, name);
    resil__text_puts(&d->t, v ? "true" : "false");
}

/* A duration; `none` (when non-NULL) is written for the "no limit" value. */
static void f_dur(desc *d, const char *name, resil_duration v, resil_duration none_value,
                  const char *none)
{
    char text[32];
    if (none != NULL && v == none_value) {
        f_str(d, name, none);
        return;
    }
    resil_duration_format(v, text, sizeof text);
    f_str(d, name, text);
}

/* ---- strategies ------------------------------------------------------------------ */

static void describe_rate_limiter(desc *d, const resil__node *n)
{
    resil_ratelimit_opts o;
    resil_ratelimit_opts_get(n->ratelimit, &o);
    f_str(d, "kind", resil_ratelimit_kind_name(o.kind));
    if (o.kind == RESIL_RATELIMIT_TOKEN_BUCKET) {
        f_int(d, "rate", o.rate);
        f_dur(d, "period", o.period, 0, NULL);
        f_int(d, "burst", o.burst);
    } else {
        f_int(d, "permits", o.permits);
        f_dur(d, "window", o.window, 0, NULL);
    }
    f_dur(d, "max_wait", n->rate_wait, 0, NULL);
}

static void describe_bulkhead(desc *d, const resil__node *n)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_get(n->bulkhead, &o);
    f_int(d, "max_concurrency", o.max_concurrency);
    f_int(d, "max_queue", o.max_queue);
    f_bool(d, "queue", o.queue);
    f_dur(d, "queue_timeout", o.queue_timeout, 0, "none");
}

static void describe_timeout(desc *d, const resil__node *n)
{
    f_dur(d, "timeout", n->timeout.timeout, 0, NULL);
    if (n->timeout.per_operation != NULL)
        f_int(d, "per_operation", (long long)resil_timeouts_count(n->timeout.per_operation));
}

static const char *retry_after_name(resil_retry_after_mode m)
{
    return m == RESIL_RETRY_AFTER_IGNORE ? "ignore" : m == RESIL_RETRY_AFTER_BOUNDED ? "bounded"
                                                                                     : "honor";
}

static void describe_retry(desc *d, const resil__node *n)
{
    const resil_retry_policy *p = &n->policy;
    if (p->max_attempts == RESIL_ATTEMPTS_FOREVER)
        f_str(d, "max_attempts", "forever");
    else
        f_int(d, "max_attempts", p->max_attempts);
    f_str(d, "retry_on", p->retry_on != NULL ? "custom" : "default");
    f_str(d, "backoff", resil_backoff_kind_name(p->backoff.kind));
    f_dur(d, "base", p->backoff.base, 0, NULL);
    if (p->backoff.kind == RESIL_BACKOFF_EXPONENTIAL)
        f_num(d, "factor", p->backoff.factor);
    f_str(d, "jitter", resil_jitter_name(p->backoff.jitter));
    if (p->backoff.jitter == RESIL_JITTER_PROPORTIONAL)
        f_num(d, "jitter_fraction", p->backoff.jitter_fraction);
    f_dur(d, "max_delay", p->backoff.max_delay, RESIL_DURATION_MAX, "none");
    f_dur(d, "max_total", p->max_total, 0, "none");
    f_str(d, "retry_after", retry_after_name(p->retry_after));
    f_dur(d, "retry_after_max", p->retry_after_max, 0, NULL);
    f_str(d, "unsafe_mode", p->unsafe_mode == RESIL_UNSAFE_RUN_ONCE ? "run-once" : "refuse");
    f_str(d, "budget", p->budget != NULL ? resil_budget_name(p->budget) : "none");
}

/* The kind flags as words: "consecutive", "ratio", "both", each with
 * "+predicate" when the application's trip rule is on, or "predicate". */
static const char *breaker_kind_name(resil_breaker_kind k)
{
    static const char *const names[8] = {
        "none", "consecutive", "ratio", "both",
        "predicate", "consecutive+predicate", "ratio+predicate", "both+predicate"};
    return names[(unsigned)k & 7u];
}

static void describe_breaker_opts(desc *d, const resil_breaker_opts *o)
{
    f_str(d, "kind", breaker_kind_name(o->kind));
    if (o->kind & RESIL_BREAKER_CONSECUTIVE)
        f_int(d, "failure_threshold", o->failure_threshold);
    if (o->kind & RESIL_BREAKER_RATIO) {
        f_num(d, "failure_ratio", o->failure_ratio);
        f_int(d, "minimum_throughput", o->minimum_throughput);
    }
    if (o->window == RESIL_BREAKER_WINDOW_COUNT) {
        f_str(d, "window", "count");
        f_int(d, "window_size", o->window_size);
    } else if (o->kind & RESIL_BREAKER_RATIO) {
        f_dur(d, "sampling_duration", o->sampling_duration, 0, NULL);
    }
    if (o->slow_call_duration > 0) {
        f_dur(d, "slow_call_duration", o->slow_call_duration, 0, NULL);
        f_num(d, "slow_call_ratio", o->slow_call_ratio);
    }
    f_dur(d, "break_duration", o->break_duration, 0, NULL);
    if (o->break_growth > 1) {
        f_num(d, "break_growth", o->break_growth);
        f_dur(d, "max_break_duration", o->max_break_duration, 0, NULL);
    }
    f_int(d, "half_open_probes", o->half_open_probes);
    f_int(d, "success_threshold", o->success_threshold);
}

static void describe_breaker(desc *d, const resil__node *n)
{
    if (n->registry != NULL) {
        f_str(d, "source", "registry");
        return;
    }
    f_str(d, "source", n->owned ? "options" : "shared");
    f_str(d, "name", resil_breaker_name(n->breaker));
    if (n->owned)
        describe_breaker_opts(d, &n->breaker_opts);
}

static void describe_hedging(desc *d, const resil__node *n)
{
    const resil_hedge_opts *h = &n->hedge;
    f_dur(d, "delay", h->delay, 0, NULL);
    f_int(d, "max_hedged", h->max_hedged);
    f_str(d, "hedge_on", h->hedge_on != NULL ? "custom" : "default");
    f_int(d, "workers", resil__hedge_workers(h));
    f_bool(d, "wait_losers", h->wait_losers);
    f_str(d, "budget", h->budget != NULL ? resil_budget_name(h->budget) : "none");
}

static void describe_fallback(desc *d, const resil__node *n)
{
    f_str(d, "handle", n->fallback.handle != NULL ? "custom" : "default");
}

static void describe_degrade(desc *d, const resil__node *n)
{
    int levels = resil_degrade_level_count(n->degrade);
    f_int(d, "levels", levels - 1);
    for (int l = 1; l < levels; l++) {
        char field[48];
        snprintf(field, sizeof field, "threshold.%s", resil_degrade_level_name(n->degrade, l));
        f_int(d, field, resil_degrade_level_threshold(n->degrade, l));
    }
}

static void describe_chaos(desc *d, const resil__node *n)
{
    const resil_chaos_opts *o = &n->chaos_opts;
    f_num(d, "rate", resil_chaos_rate(n->chaos));
    f_bool(d, "enabled", resil_chaos_enabled(n->chaos));
    if (o->kind == RESIL_CHAOS_FAULT || o->kind == RESIL_CHAOS_OUTCOME) {
        f_str(d, "outcome", resil_kind_name(o->outcome.kind));
        f_int(d, "code", o->outcome.code);
    } else if (o->kind == RESIL_CHAOS_LATENCY) {
        f_dur(d, "latency", o->latency, 0, NULL);
    }
}

static void describe_limiter(desc *d, const resil__node *n)
{
    resil_limiter_opts o;
    resil_limiter_opts_get(n->limiter, &o);
    f_str(d, "algorithm", resil_limit_algorithm_name(o.algorithm));
    f_int(d, "initial_limit", o.initial_limit);
    f_int(d, "min_limit", o.min_limit);
    f_int(d, "max_limit", o.max_limit);
    f_dur(d, "window", o.window, 0, NULL);
    f_int(d, "window_samples", o.window_samples);
    f_num(d, "smoothing", o.smoothing);
    f_int(d, "max_queue", o.max_queue);
    f_dur(d, "queue_timeout", o.queue_timeout, 0, "none");
}

static void describe_throttle(desc *d, const resil__node *n)
{
    resil_throttle_opts o;
    resil_throttle_opts_get(n->throttle, &o);
    f_num(d, "k", o.k);
    f_dur(d, "window", o.window, 0, NULL);
    f_int(d, "buckets", o.buckets);
}

static void describe_options(desc *d, const resil__node *n)
{
    switch (n->kind) {
    case RESIL_STRATEGY_RATE_LIMITER:
        describe_rate_limiter(d, n);
        break;
    case RESIL_STRATEGY_BULKHEAD:
        describe_bulkhead(d, n);
        break;
    case RESIL_STRATEGY_TOTAL_TIMEOUT:
    case RESIL_STRATEGY_ATTEMPT_TIMEOUT:
        describe_timeout(d, n);
        break;
    case RESIL_STRATEGY_RETRY:
        describe_retry(d, n);
        break;
    case RESIL_STRATEGY_BREAKER:
        describe_breaker(d, n);
        break;
    case RESIL_STRATEGY_HEDGING:
        describe_hedging(d, n);
        break;
    case RESIL_STRATEGY_FALLBACK:
        describe_fallback(d, n);
        break;
    case RESIL_STRATEGY_DEGRADE:
        describe_degrade(d, n);
        break;
    case RESIL_STRATEGY_CHAOS_FAULT:
    case RESIL_STRATEGY_CHAOS_OUTCOME:
    case RESIL_STRATEGY_CHAOS_LATENCY:
    case RESIL_STRATEGY_CHAOS_BEHAVIOR:
        describe_chaos(d, n);
        break;
    case RESIL_STRATEGY_ADAPTIVE_LIMITER:
        describe_limiter(d, n);
        break;
    case RESIL_STRATEGY_THROTTLE:
        describe_throttle(d, n);
        break;
    default:
        break;
    }
}

static void describe_text(desc *d, const resil_pipeline *p)
{
    size_t count = resil_pipeline_strategy_count(p);
    resil__text_printf(&d->t, "pipeline %s: %zu %s, outermost first\n", p->name, count,
                       count == 1 ? "strategy" : "strategies");
    size_t k = 0;
    for (size_t i = 0; i < p->nnodes; i++) {
        const resil__node *n = &p->nodes[i];
        if (n->implicit)
            continue;
        resil__text_printf(&d->t, "  %zu. %s", ++k, resil_strategy_name(n->kind));
        describe_options(d, n);
        resil__text_puts(&d->t, "\n");
    }
    for (size_t i = 0; i < p->nwarnings; i++) {
        resil__text_puts(&d->t, "warning: ");
        resil__text_puts(&d->t, p->warnings[i]);
        resil__text_puts(&d->t, "\n");
    }
}

static void describe_json(desc *d, const resil_pipeline *p)
{
    resil__text_puts(&d->t, "{");
    f_str(d, "name", p->name);
    key(d, "strategies");
    resil__text_puts(&d->t, "[");
    bool first = true;
    for (size_t i = 0; i < p->nnodes; i++) {
        const resil__node *n = &p->nodes[i];
        if (n->implicit)
            continue;
        resil__text_puts(&d->t, first ? "{" : ",{");
        first = false;
        d->fields = 0;
        f_str(d, "type", resil_strategy_name(n->kind));
        describe_options(d, n);
        resil__text_puts(&d->t, "}");
    }
    resil__text_puts(&d->t, "],\"warnings\":[");
    for (size_t i = 0; i < p->nwarnings; i++) {
        resil__text_puts(&d->t, i ? ",\"" : "\"");
        resil__text_escaped(&d->t, p->warnings[i], true);
        resil__text_puts(&d->t, "\"");
    }
    resil__text_puts(&d->t, "]}\n");
}

size_t resil_pipeline_describe(const resil_pipeline *p, resil_describe_format f, char *buf,
                               size_t cap)
{
    desc d = {{buf, buf != NULL ? cap : 0, 0}, f == RESIL_DESCRIBE_JSON, 0};
    if (p == NULL)
        return resil__text_end(&d.t);
    if (d.json)
        describe_json(&d, p);
    else
        describe_text(&d, p);
    return resil__text_end(&d.t);
}
