/*
 * analyze.c — what a configuration will do in the worst case, before it
 * runs: per pipeline, how long one call can take, whether that fits its
 * total timeout, how many calls one request can make to the dependency, and
 * the mistakes the seeds warn about.
 *
 * The arithmetic is the seeds' own: worst case = attempts × attempt
 * timeout + the waits between them, with the waits as the backoff formula
 * gives them (capped by MaxDelay) — "4 attempts × 2 s + 0.5 + 1 + 2 s of
 * waits = 11.5 s against a 10 s total". Jitter that can draw above the
 * formula (Polly's, proportional, decorrelated) is reported beside it, with
 * its own warning, rather than folded in, so the headline figure is the one
 * a reader can check by hand. Everything saturates: "forever" and missing
 * bounds come out as unbounded, never as a wrapped number.
 *
 * A pipeline whose last step is another pipeline is a second layer: its
 * inner bound is the outer attempt's duration and the calls multiply, which
 * is how retries at several layers turn one click into dozens of requests.
 * Several Retry steps in one pipeline are layers the same way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define TERMS_SHOWN 4      /* waits written out before "+ …" */
#define SUM_STEPS_MAX 100000u

/* ---- saturating helpers ------------------------------------------------------ */

static resil_duration dur_times(resil_duration d, uint64_t n)
{
    if (d <= 0 || n == 0)
        return 0;
    if (d == RESIL_DURATION_MAX || (uint64_t)d > (uint64_t)RESIL_DURATION_MAX / n)
        return RESIL_DURATION_MAX;
    return (resil_duration)((uint64_t)d * n);
}

static uint64_t calls_times(uint64_t a, uint64_t b)
{
    if (a == UINT64_MAX || b == UINT64_MAX || (a != 0 && b > UINT64_MAX / a))
        return UINT64_MAX;
    return a * b;
}

static resil_duration dur_min(resil_duration a, resil_duration b) { return a < b ? a : b; }

/* ---- waits ------------------------------------------------------------------------- */

/* The formula's wait after failure n, capped by MaxDelay. */
static resil_duration nominal_wait(const resil_backoff *b, uint32_t n)
{
    return dur_min(resil_backoff_base_delay(b, n), b->max_delay);
}

typedef resil_duration (*wait_fn)(const resil_backoff *b, uint32_t n);

/*
 * The sum of f(b, n) for n = 1 .. count, saturating. Every wait sequence is
 * non-decreasing, and once two waits after the second are equal every later
 * one is too (a cap, saturation, a constant or factor 1: only Fibonacci's
 * first two are equal and then grow), so the tail is a product. Only linear
 * growth without a cap can outlast SUM_STEPS_MAX steps, and its tail is
 * proportional to the step number, so it has a closed form.
 */
static resil_duration sum_waits(const resil_backoff *b, uint32_t count, wait_fn f)
{
    resil_duration sum = 0, prev = -1;
    for (uint32_t n = 1; n <= count; n++) {
        resil_duration d = f(b, n);
        if (n >= 3 && d == prev)
            return resil_dur_add(sum, dur_times(d, (uint64_t)count - n + 1));
        sum = resil_dur_add(sum, d);
        if (sum == RESIL_DURATION_MAX)
            return sum;
        if (n == SUM_STEPS_MAX && n < count) {
            /* d(k) = d(n) · k / n for k = n+1 .. count */
            long double k = (long double)count * (count + 1) / 2 -
                            (long double)n * (n + 1) / 2;
            long double tail = (long double)d / n * k;
            if (tail >= (long double)RESIL_DURATION_MAX)
                return RESIL_DURATION_MAX;
            return resil_dur_add(sum, (resil_duration)tail);
        }
        prev = d;
    }
    return sum;
}

static void waits_text(const resil_backoff *b, uint32_t count, resil_duration total, char *buf,
                       size_t cap)
{
    cfg_sb sb;
    char d[32];
    resil__sb_init(&sb, buf, cap);
    if (count == 0) {
        resil__sb_printf(&sb, "none");
        return;
    }
    uint32_t shown = count > TERMS_SHOWN + 1 ? TERMS_SHOWN : count;
    for (uint32_t n = 1; n <= shown; n++) {
        resil__fmt_dur(nominal_wait(b, n), d, sizeof d);
        resil__sb_printf(&sb, "%s%s", n > 1 ? " + " : "", d);
    }
    if (shown < count)
        resil__sb_printf(&sb, " + … (%u waits)", count);
    if (count > 1) {
        resil__fmt_dur(total, d, sizeof d);
        resil__sb_printf(&sb, " = %s", d);
    }
}

/* ---- one pipeline ------------------------------------------------------------------ */

typedef struct layer {
    resil_duration bound; /* the most one call through it can take */
    uint64_t calls;
    uint32_t retry_layers;
} layer;

typedef struct actx {
    const resil_config *c;
    const resil_config_analysis_opts *o;
    resil_config_diags *warnings;
    char path[RESIL_CONFIG_PATH_MAX];
} actx;

static void describe_steps(const resil_config *c, const cfg_pipeline_def *p, char *buf,
                           size_t cap)
{
    cfg_sb sb;
    resil__sb_init(&sb, buf, cap);
    if (p->nsteps == 0)
        resil__sb_printf(&sb, "(none: the operation runs once)");
    for (size_t i = 0; i < p->nsteps; i++) {
        const cfg_step *st = &p->steps[i];
        resil__sb_printf(&sb, "%s%s", i ? " → " : "", resil_config_step_name(st->kind));
        char d[32];
        switch (st->kind) {
        case RESIL_CONFIG_STEP_TOTAL_TIMEOUT:
        case RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT:
            if (st->per_operation) {
                resil__sb_printf(&sb, " (per operation)");
            } else {
                resil__fmt_dur(st->timeout, d, sizeof d);
                resil__sb_printf(&sb, " %s", d);
            }
            break;
        case RESIL_CONFIG_STEP_DEGRADE:
            break;
        case RESIL_CONFIG_STEP_STANDARD_HEDGING:
            resil__sb_printf(&sb, " %s", st->ref == SIZE_MAX
                                             ? "(Microsoft's hedging)"
                                             : resil_config_name_at(c, RESIL_CONFIG_HEDGING, st->ref));
            break;
        default: {
            resil_config_section s = (resil_config_section)resil__cfg_step_section(st->kind);
            const char *name = resil_config_name_at(c, s, st->ref);
            resil__sb_printf(&sb, " %s", name ? name : "?");
            break;
        }
        }
    }
}

static void warn(actx *x, uint32_t line, uint32_t col, const char *fmt, ...) RESIL_PRINTF(4, 5);
static void warn(actx *x, uint32_t line, uint32_t col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    resil__diag_addv(x->warnings, x->path, line, col, fmt, ap);
    va_end(ap);
}

/* "4 attempts × 2s + 3.5s of waits = 11.5s" */
static void worst_text(const resil_config_analysis *a, resil_duration waits,
                       resil_duration worst, char *buf, size_t cap)
{
    char at[32], wt[32], sum[32];
    resil__fmt_dur(a->attempt_bound, at, sizeof at);
    resil__fmt_dur(waits, wt, sizeof wt);
    resil__fmt_dur(worst, sum, sizeof sum);
    if (a->attempts == 1)
        snprintf(buf, cap, "1 attempt × %s = %s", at, sum);
    else
        snprintf(buf, cap, "%u attempts × %s + %s of waits = %s", a->attempts, at, wt, sum);
}

/* The figures of a retry layer whose attempts each take at most `bound`. */
static void compute(resil_config_analysis *a, const resil_retry_policy *p, resil_duration bound,
                    resil_duration total)
{
    uint32_t attempts = p ? p->max_attempts : 1;
    a->attempts = attempts;
    a->attempt_bound = bound;
    if (attempts == RESIL_ATTEMPTS_FOREVER) {
        a->waits = a->waits_max = RESIL_DURATION_MAX;
        snprintf(a->waits_text, sizeof a->waits_text, "unbounded (attempts forever)");
    } else if (p) {
        a->waits = sum_waits(&p->backoff, attempts - 1, nominal_wait);
        a->waits_max = sum_waits(&p->backoff, attempts - 1, resil_backoff_max_delay);
        waits_text(&p->backoff, attempts - 1, a->waits, a->waits_text, sizeof a->waits_text);
    } else {
        snprintf(a->waits_text, sizeof a->waits_text, "none");
    }
    uint64_t n = attempts == RESIL_ATTEMPTS_FOREVER ? UINT64_MAX : attempts;
    a->worst_case = resil_dur_add(dur_times(bound, n), a->waits);
    a->worst_case_jitter = resil_dur_add(dur_times(bound, n), a->waits_max);
    if (p && p->max_total > 0)
        total = total > 0 ? dur_min(total, p->max_total) : p->max_total;
    a->total_timeout = total;
    /* One attempt either ends or is cut by the total: nothing planned is lost. */
    a->fits = total == 0 || attempts == 1 || a->worst_case <= total;
    a->retry_after = p ? p->retry_after : RESIL_RETRY_AFTER_IGNORE;
    a->retry_after_max = p && p->retry_after != RESIL_RETRY_AFTER_IGNORE ? p->retry_after_max : 0;
}

/* The seeds' warning: the schedule cannot fit in the total timeout. */
static void warn_fit(actx *x, const resil_config_analysis *a, resil_duration total,
                     const char *whose, uint32_t line, uint32_t col)
{
    char worst[160], t[32];
    resil__fmt_dur(total, t, sizeof t);
    if (a->attempts <= 1 || total == 0)
        return;
    if (a->attempt_bound == RESIL_DURATION_MAX) {
        warn(x, line, col, "no attempt timeout: one hung attempt can spend the whole total "
                           "timeout %s%s, leaving no time to retry", t, whose);
        return;
    }
    if (a->attempts == RESIL_ATTEMPTS_FOREVER)
        return;
    if (a->worst_case > total) {
        worst_text(a, a->waits, a->worst_case, worst, sizeof worst);
        warn(x, line, col, "worst case %s exceeds the total timeout %s%s", worst, t, whose);
    } else if (a->worst_case_jitter > total) {
        worst_text(a, a->waits_max, a->worst_case_jitter, worst, sizeof worst);
        warn(x, line, col, "with jitter's longest draws the worst case %s exceeds the total "
                           "timeout %s%s", worst, t, whose);
    }
}

static layer analyze_pipeline(actx *x, size_t idx, resil_config_analysis *a, bool report);

static void warn_pipeline(actx *x, const cfg_item *it, const cfg_pipeline_def *p,
                          resil_config_analysis *a)
{
    const cfg_step *total = cfg_step_of(p, RESIL_CONFIG_STEP_TOTAL_TIMEOUT);
    if (a->attempts > 1 && a->attempts != RESIL_ATTEMPTS_FOREVER && a->worst_case ==
        RESIL_DURATION_MAX && a->total_timeout == 0)
        warn(x, it->line, it->col, "nothing bounds a call: no attempt timeout and no total "
                                   "timeout");
    if (a->attempts == RESIL_ATTEMPTS_FOREVER && a->total_timeout == 0)
        warn(x, it->line, it->col, "retries forever with no total timeout or TimeBudget to "
                                   "stop it");
    warn_fit(x, a, a->total_timeout, total && total->per_operation ?
             " (Timeouts.DefaultTimeout)" : "", it->line, it->col);
    if (total && total->per_operation) {
        const cfg_list *ops = &x->c->sec[RESIL_CONFIG_OPERATION_TIMEOUTS];
        const cfg_step *rs = cfg_step_of(p, RESIL_CONFIG_STEP_RETRY);
        const cfg_item *r = rs ? &x->c->sec[RESIL_CONFIG_RETRY].v[rs->ref] : NULL;
        for (size_t i = 0; i < ops->n; i++) {
            char whose[RESIL_CONFIG_NAME_MAX + 32];
            resil_duration t = ops->v[i].u.timeout;
            if (r && r->u.retry.policy.max_total > 0)
                t = dur_min(t, r->u.retry.policy.max_total);
            snprintf(whose, sizeof whose, " of operation %s", ops->v[i].name);
            warn_fit(x, a, t, whose, it->line, it->col);
        }
    }
    if (a->retry_layers > 1) {
        char calls[32];
        if (a->max_calls == UINT64_MAX)
            snprintf(calls, sizeof calls, "unboundedly many");
        else
            snprintf(calls, sizeof calls, "%llu", (unsigned long long)a->max_calls);
        warn(x, it->line, it->col, "%u layers retry: one request can make %s calls to the "
                                   "dependency; retry in one layer only",
             a->retry_layers, calls);
    }
}

static const resil_retry_policy *retry_at(const actx *x, const cfg_step *st)
{
    return &x->c->sec[RESIL_CONFIG_RETRY].v[st->ref].u.retry.policy;
}

/* A pipeline may hold several Retry steps, each inside the one before (an
 * auth refresh around a transient retry). Every one but the outermost is
 * folded into the layer below it, innermost first: its worst case becomes
 * the attempt bound of the retry around it, and its attempts multiply the
 * calls. Returns the outermost retry's policy (NULL for none), which the
 * pipeline's own figures describe. */
static const resil_retry_policy *inner_retries(const actx *x, const cfg_pipeline_def *p,
                                               resil_duration total, resil_duration *bound,
                                               layer *below)
{
    const cfg_step *outer = NULL;
    for (size_t i = p->nsteps; i-- > 0;) {
        if (p->steps[i].kind != RESIL_CONFIG_STEP_RETRY)
            continue;
        if (outer != NULL) {
            resil_config_analysis scratch;
            const resil_retry_policy *r = retry_at(x, outer);
            compute(&scratch, r, *bound, total);
            *bound = scratch.total_timeout ? dur_min(scratch.worst_case, scratch.total_timeout)
                                           : scratch.worst_case;
            below->calls = calls_times(r->max_attempts == RESIL_ATTEMPTS_FOREVER
                                           ? UINT64_MAX : r->max_attempts,
                                       below->calls);
            below->retry_layers += r->max_attempts > 1;
        }
        outer = &p->steps[i];
    }
    return outer != NULL ? retry_at(x, outer) : NULL;
}

static layer analyze_pipeline(actx *x, size_t idx, resil_config_analysis *a, bool report)
{
    const cfg_item *it = &x->c->sec[RESIL_CONFIG_PIPELINES].v[idx];
    const cfg_pipeline_def *p = &it->u.pipeline;
    const cfg_step *attempt = cfg_step_of(p, RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT);
    const cfg_step *total = cfg_step_of(p, RESIL_CONFIG_STEP_TOTAL_TIMEOUT);
    const cfg_step *inner_step = cfg_step_of(p, RESIL_CONFIG_STEP_PIPELINE);

    layer inner = {RESIL_DURATION_MAX, 1, 0};
    if (inner_step) {
        resil_config_analysis scratch;
        inner = analyze_pipeline(x, inner_step->ref, &scratch, false);
    }
    resil_duration bound = attempt ? attempt->timeout : RESIL_DURATION_MAX;
    bound = dur_min(bound, inner.bound);
    resil_duration t = total ? (total->per_operation ? x->c->default_timeout : total->timeout) : 0;
    const resil_retry_policy *policy = inner_retries(x, p, t, &bound, &inner);

    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", it->name);
    a->pipeline = true;
    describe_steps(x->c, p, a->strategies, sizeof a->strategies);
    a->attempt_timeout = attempt ? attempt->timeout : 0;
    a->per_operation = total && total->per_operation;
    compute(a, policy, bound, t);
    a->max_calls = calls_times(a->attempts == RESIL_ATTEMPTS_FOREVER ? UINT64_MAX : a->attempts,
                               inner.calls);
    a->retry_layers = (a->attempts > 1) + inner.retry_layers;
    if (report) {
        snprintf(x->path, sizeof x->path, "Resilience.Pipelines.%s", it->name);
        warn_pipeline(x, it, p, a);
    }
    layer out = {a->total_timeout ? dur_min(a->worst_case, a->total_timeout) : a->worst_case,
                 a->max_calls, a->retry_layers};
    return out;
}

/* ---- retry policies and breakers ---------------------------------------------------- */

static void warn_retry(actx *x, const cfg_item *it)
{
    const resil_config_retry *r = &it->u.retry;
    if (r->policy.max_attempts <= 1)
        return;
    snprintf(x->path, sizeof x->path, "Resilience.Retry.%s", it->name);
    if (r->policy.backoff.jitter == RESIL_JITTER_NONE)
        warn(x, it->line, it->col, "jitter is off: clients that failed together retry "
                                   "together, in waves");
    if (r->retry_unsafe_methods && !r->idempotency_keys)
        warn(x, it->line, it->col, "retries unsafe methods (POST, PATCH) without idempotency "
                                   "keys: a retried write can happen twice");
}

/* A ratio rule over a time window judges only once MinimumThroughput calls
 * are in its window: below that traffic it can never trip. A count window
 * holds the last calls however slowly they come, so it always fills. */
static void warn_breaker(actx *x, const resil_breaker_opts *o, const char *what, uint32_t line,
                         uint32_t col)
{
    if (x->o == NULL || !(x->o->rate > 0) || !(o->kind & RESIL_BREAKER_RATIO))
        return;
    if (o->window == RESIL_BREAKER_WINDOW_COUNT)
        return;
    double seconds = (double)o->sampling_duration / 1e9;
    double expected = x->o->rate * seconds;
    if ((double)o->minimum_throughput <= expected)
        return;
    char window[32];
    resil_duration_format(o->sampling_duration, window, sizeof window);
    snprintf(x->path, sizeof x->path, "%s", what);
    warn(x, line, col, "needs %u calls in %s to judge its failure ratio, but %g requests/s "
                       "bring about %.0f: %s",
         o->minimum_throughput, window, x->o->rate, floor(expected),
         o->kind == RESIL_BREAKER_BOTH ? "only its consecutive rule can trip it"
                                       : "it can never trip");
}

/* ---- the report ----------------------------------------------------------------------- */

static bool retry_used(const resil_config *c, size_t r)
{
    const cfg_list *l = &c->sec[RESIL_CONFIG_PIPELINES];
    for (size_t i = 0; i < l->n; i++) {
        const cfg_pipeline_def *p = &l->v[i].u.pipeline;
        for (size_t s = 0; s < p->nsteps; s++)
            if (p->steps[s].kind == RESIL_CONFIG_STEP_RETRY && p->steps[s].ref == r)
                return true;
    }
    return false;
}

static void analyze_retry(const resil_config *c, size_t i, resil_config_analysis *a)
{
    const cfg_item *it = &c->sec[RESIL_CONFIG_RETRY].v[i];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", it->name);
    snprintf(a->strategies, sizeof a->strategies, "Retry %s (in no pipeline)", it->name);
    compute(a, &it->u.retry.policy, RESIL_DURATION_MAX, 0);
    a->max_calls = a->attempts == RESIL_ATTEMPTS_FOREVER ? UINT64_MAX : a->attempts;
    a->retry_layers = a->attempts > 1;
}

int resil_config_analyze(const resil_config *c, const resil_config_analysis_opts *o,
                         resil_config_report *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    memset(out, 0, sizeof *out);
    const cfg_list *pl = &c->sec[RESIL_CONFIG_PIPELINES], *rl = &c->sec[RESIL_CONFIG_RETRY];
    size_t n = pl->n + rl->n;
    out->items = calloc(n ? n : 1, sizeof *out->items);
    if (out->items == NULL)
        return RESIL_ENOMEM;
    actx x = {c, o, &out->warnings, ""};
    for (size_t i = 0; i < pl->n; i++)
        analyze_pipeline(&x, i, &out->items[out->len++], true);
    for (size_t i = 0; i < rl->n; i++) {
        if (!retry_used(c, i))
            analyze_retry(c, i, &out->items[out->len++]);
        warn_retry(&x, &rl->v[i]);
    }
    const cfg_list *bl = &c->sec[RESIL_CONFIG_BREAKERS];
    for (size_t i = 0; i < bl->n; i++) {
        char path[RESIL_CONFIG_PATH_MAX];
        snprintf(path, sizeof path, "Resilience.CircuitBreakers.%s", bl->v[i].name);
        warn_breaker(&x, &bl->v[i].u.breaker, path, bl->v[i].line, bl->v[i].col);
    }
    if (c->has_distributed && c->distributed.enabled)
        warn_breaker(&x, &c->distributed.breaker, "Resilience.DistributedCircuitBreaker", 0, 0);
    resil__diags_sort(&out->warnings, 0);
    return 0;
}

void resil_config_report_free(resil_config_report *r)
{
    if (r == NULL)
        return;
    free(r->items);
    resil_config_diags_free(&r->warnings);
    memset(r, 0, sizeof *r);
}

/* ---- writing it --------------------------------------------------------------------- */

/* For reading, not for arithmetic: 4.958765617s as 4.959s. */
static resil_duration round_ms(resil_duration d)
{
    if (d == RESIL_DURATION_MAX || d > RESIL_DURATION_MAX - RESIL_MS(1))
        return d;
    return (d + RESIL_US(500)) / RESIL_MS(1) * RESIL_MS(1);
}

static void json_dur(cfg_sb *sb, const char *key, resil_duration d)
{
    if (d == RESIL_DURATION_MAX)
        resil__sb_printf(sb, ",\"%s\":null", key);
    else
        resil__sb_printf(sb, ",\"%s\":%.15g", key, resil_dur_to_ms(d));
}

static const char *retry_after_name(resil_retry_after_mode m)
{
    return m == RESIL_RETRY_AFTER_HONOR ? "honor" : m == RESIL_RETRY_AFTER_BOUNDED ? "bounded"
                                                                                  : "ignore";
}

static void write_json_item(cfg_sb *sb, const resil_config_analysis *a)
{
    resil__sb_printf(sb, "{\"name\":");
    resil__sb_json_str(sb, a->name);
    resil__sb_printf(sb, ",\"kind\":\"%s\",\"strategies\":", a->pipeline ? "pipeline" : "retry");
    resil__sb_json_str(sb, a->strategies);
    if (a->attempts == RESIL_ATTEMPTS_FOREVER)
        resil__sb_printf(sb, ",\"attempts\":null");
    else
        resil__sb_printf(sb, ",\"attempts\":%u", a->attempts);
    json_dur(sb, "attempt_timeout_ms", a->attempt_timeout ? a->attempt_timeout
                                                          : RESIL_DURATION_MAX);
    json_dur(sb, "attempt_bound_ms", a->attempt_bound);
    json_dur(sb, "waits_ms", a->waits);
    json_dur(sb, "waits_max_ms", a->waits_max);
    json_dur(sb, "worst_case_ms", a->worst_case);
    json_dur(sb, "worst_case_jitter_ms", a->worst_case_jitter);
    json_dur(sb, "total_timeout_ms", a->total_timeout ? a->total_timeout : RESIL_DURATION_MAX);
    resil__sb_printf(sb, ",\"per_operation\":%s,\"fits\":%s", a->per_operation ? "true" : "false",
                     a->fits ? "true" : "false");
    if (a->max_calls == UINT64_MAX)
        resil__sb_printf(sb, ",\"max_calls\":null");
    else
        resil__sb_printf(sb, ",\"max_calls\":%llu", (unsigned long long)a->max_calls);
    resil__sb_printf(sb, ",\"retry_layers\":%u,\"retry_after\":\"%s\"", a->retry_layers,
                     retry_after_name(a->retry_after));
    json_dur(sb, "retry_after_max_ms", a->retry_after_max);
    resil__sb_printf(sb, "}");
}

static void write_text_item(cfg_sb *sb, const resil_config_analysis *a)
{
    char d[32], t[32], worst[160];
    resil__sb_printf(sb, "%s %s\n", a->pipeline ? "pipeline" : "retry", a->name);
    resil__sb_printf(sb, "  strategies     %s\n", a->strategies);
    if (a->attempts == RESIL_ATTEMPTS_FOREVER)
        resil__sb_printf(sb, "  attempts       forever\n");
    else
        resil__sb_printf(sb, "  attempts       %u\n", a->attempts);
    resil__sb_printf(sb, "  waits          %s", a->waits_text);
    if (a->waits_max != a->waits) {
        resil__fmt_dur(a->waits_max < RESIL_S(1) ? a->waits_max : round_ms(a->waits_max), d,
                       sizeof d);
        resil__sb_printf(sb, " (jitter can stretch them to %s)", d);
    }
    resil__sb_printf(sb, "\n");
    if (a->worst_case == RESIL_DURATION_MAX) {
        resil__sb_printf(sb, "  worst case     unbounded (%s)\n",
                         a->attempts == RESIL_ATTEMPTS_FOREVER ? "attempts forever"
                                                               : "no attempt timeout");
    } else {
        worst_text(a, a->waits, a->worst_case, worst, sizeof worst);
        resil__sb_printf(sb, "  worst case     %s\n", worst);
    }
    if (a->total_timeout) {
        resil__fmt_dur(a->total_timeout, t, sizeof t);
        resil__sb_printf(sb, "  total timeout  %s%s: %s\n", t,
                         a->per_operation ? " (default; per operation)" : "",
                         a->fits ? "the worst case fits" : "the worst case does not fit");
    } else {
        resil__sb_printf(sb, "  total timeout  none\n");
    }
    if (a->max_calls == UINT64_MAX)
        resil__sb_printf(sb, "  calls          unbounded per request\n");
    else
        resil__sb_printf(sb, "  calls          at most %llu per request\n",
                         (unsigned long long)a->max_calls);
    if (a->retry_after == RESIL_RETRY_AFTER_IGNORE || a->attempts == 1) {
        resil__sb_printf(sb, "  Retry-After    not used\n");
        return;
    }
    resil__fmt_dur(a->retry_after_max, d, sizeof d);
    if (a->retry_after == RESIL_RETRY_AFTER_BOUNDED)
        resil__sb_printf(sb, "  Retry-After    kept between the backoff and the backoff + 5s, "
                             "at most %s", d);
    else
        resil__sb_printf(sb, "  Retry-After    honoured, each hint capped at %s", d);
    if (a->total_timeout && a->retry_after_max >= a->total_timeout)
        resil__sb_printf(sb, "; a hint past the total timeout ends the call at once");
    resil__sb_printf(sb, "\n");
}

size_t resil_config_report_write(const resil_config_report *r, resil_config_format f,
                                 char *buf, size_t cap)
{
    cfg_sb sb;
    resil__sb_init(&sb, buf, cap);
    if (r == NULL)
        return 0;
    if (f == RESIL_CONFIG_JSON) {
        resil__sb_printf(&sb, "{\"pipelines\":[");
        for (size_t i = 0; i < r->len; i++) {
            resil__sb_printf(&sb, "%s", i ? "," : "");
            write_json_item(&sb, &r->items[i]);
        }
        resil__sb_printf(&sb, "],\"warnings\":[");
        for (size_t i = 0; i < r->warnings.len; i++) {
            resil__sb_printf(&sb, "%s", i ? "," : "");
            resil__sb_diag_json(&sb, &r->warnings.items[i]);
        }
        resil__sb_printf(&sb, "]}\n");
        return sb.len;
    }
    for (size_t i = 0; i < r->len; i++) {
        write_text_item(&sb, &r->items[i]);
        resil__sb_printf(&sb, "\n");
    }
    for (size_t i = 0; i < r->warnings.len; i++) {
        char line[RESIL_CONFIG_PATH_MAX + 300];
        resil_config_diag_format(&r->warnings.items[i], line, sizeof line);
        resil__sb_printf(&sb, "warning: %s\n", line);
    }
    size_t pipelines = 0, warnings = r->warnings.len + r->warnings.dropped;
    for (size_t i = 0; i < r->len; i++)
        pipelines += r->items[i].pipeline;
    size_t alone = r->len - pipelines;
    resil__sb_printf(&sb, "%zu pipeline%s", pipelines, pipelines == 1 ? "" : "s");
    if (alone)
        resil__sb_printf(&sb, ", %zu retry polic%s in no pipeline", alone,
                         alone == 1 ? "y" : "ies");
    resil__sb_printf(&sb, ", %zu warning%s\n", warnings, warnings == 1 ? "" : "s");
    return sb.len;
}
