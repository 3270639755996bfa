/*
 * config.c — loading a document and reading named strategies out of it.
 *
 * Loading is all or nothing: the text is scanned, validated into a fresh
 * resil_config, and only a document without a single error is handed out.
 * Afterwards the config is immutable, so any number of threads may read it
 * and a reload is simply a new config (see policies.c).
 *
 * Every getter starts from the library's defaults and overlays the named
 * entry, so the unnamed default (NULL) is exactly the defaults, and an
 * unknown name can never fall back to some other name's settings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define FILE_MAX (16u << 20) /* a configuration, not a database */

int resil_config_parse(const char *text, size_t len, resil_config **out,
                       resil_config_diags *diags)
{
    if (out == NULL || (text == NULL && len > 0))
        return RESIL_EINVAL;
    *out = NULL;
    if (text == NULL)
        text = "";
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    cfg_doc doc;
    int rc = resil__cfg_scan(text, len, &doc, diags);
    if (rc != 0)
        return rc;
    rc = resil__cfg_build(&doc, out, diags);
    resil__cfg_doc_free(&doc);
    return rc;
}

/* Read the whole file, growing the buffer as it fills: a configuration is a
 * few kilobytes, so reserving the 16 MiB limit up front would be waste. */
static int read_all(FILE *f, char **text, size_t *len)
{
    size_t cap = 8192, n = 0, got;
    char *buf = malloc(cap);
    if (buf == NULL)
        return RESIL_ENOMEM;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n < cap)
            continue;
        if (cap > FILE_MAX) /* one byte past the limit: the caller refuses it */
            break;
        size_t want = cap * 2 > FILE_MAX + 1 ? FILE_MAX + 1 : cap * 2;
        char *grown = realloc(buf, want);
        if (grown == NULL) {
            free(buf);
            return RESIL_ENOMEM;
        }
        buf = grown;
        cap = want;
    }
    *text = buf;
    *len = n;
    return 0;
}

static int read_file(const char *path, char **text, size_t *len, resil_config_diags *diags)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        resil__diag_add(diags, path, 0, 0, "cannot open: %s", strerror(errno));
        return RESIL_EIO;
    }
    char *buf = NULL;
    size_t n = 0;
    int rc = read_all(f, &buf, &n);
    int failed = ferror(f);
    fclose(f);
    if (rc != 0)
        return rc;
    if (failed || n > FILE_MAX) {
        resil__diag_add(diags, path, 0, 0, failed ? "cannot read" : "larger than %u MiB",
                        FILE_MAX >> 20);
        free(buf);
        return RESIL_EIO;
    }
    *text = buf;
    *len = n;
    return 0;
}

int resil_config_load_file(const char *path, resil_config **out, resil_config_diags *diags)
{
    if (path == NULL || out == NULL)
        return RESIL_EINVAL;
    *out = NULL;
    char *text;
    size_t len;
    int rc = read_file(path, &text, &len, diags);
    if (rc != 0)
        return rc;
    rc = resil_config_parse(text, len, out, diags);
    free(text);
    return rc;
}

void resil_config_free(resil_config *c)
{
    if (c == NULL)
        return;
    for (size_t s = 0; s < RESIL_CONFIG_SECTION_COUNT; s++) {
        for (size_t i = 0; i < c->sec[s].n; i++) {
            free(c->sec[s].v[i].name);
            free(c->sec[s].v[i].more);
            free(c->sec[s].v[i].hedge_more);
        }
        free(c->sec[s].v);
    }
    free(c);
}

/* ---- names ------------------------------------------------------------------ */

static const char *const section_names[RESIL_CONFIG_SECTION_COUNT] = {
    [RESIL_CONFIG_RETRY] = "Retry",
    [RESIL_CONFIG_BREAKERS] = "CircuitBreakers",
    [RESIL_CONFIG_BULKHEADS] = "Bulkheads",
    [RESIL_CONFIG_RATE_LIMITERS] = "RateLimiters",
    [RESIL_CONFIG_OPERATION_TIMEOUTS] = "Timeouts.OperationTimeouts",
    [RESIL_CONFIG_PIPELINES] = "Pipelines",
    [RESIL_CONFIG_CHAOS] = "Chaos",
    [RESIL_CONFIG_ADAPTIVE_LIMITERS] = "AdaptiveLimiters",
    [RESIL_CONFIG_THROTTLES] = "Throttles",
    [RESIL_CONFIG_HEDGING] = "Hedging",
    [RESIL_CONFIG_FALLBACKS] = "Fallbacks",
    [RESIL_CONFIG_BUDGETS] = "RetryBudgets",
};

const char *resil_config_section_name(resil_config_section s)
{
    return (unsigned)s < RESIL_CONFIG_SECTION_COUNT ? section_names[s] : "";
}

size_t resil__cfg_find(const resil_config *c, resil_config_section s, const char *name)
{
    if (c == NULL || name == NULL || (unsigned)s >= RESIL_CONFIG_SECTION_COUNT)
        return SIZE_MAX;
    const cfg_list *l = &c->sec[s];
    for (size_t i = 0; i < l->n; i++)
        if (resil__name_eq(l->v[i].name, name))
            return i;
    return SIZE_MAX;
}

size_t resil_config_count(const resil_config *c, resil_config_section s)
{
    return c && (unsigned)s < RESIL_CONFIG_SECTION_COUNT ? c->sec[s].n : 0;
}

const char *resil_config_name_at(const resil_config *c, resil_config_section s, size_t i)
{
    if (c == NULL || (unsigned)s >= RESIL_CONFIG_SECTION_COUNT || i >= c->sec[s].n)
        return NULL;
    return c->sec[s].v[i].name;
}

/* ---- getters ---------------------------------------------------------------- */

/* The named entry, NULL for the unnamed default; *rc says which. */
static const cfg_item *lookup(const resil_config *c, resil_config_section s, const char *name,
                              int *rc)
{
    *rc = 0;
    if (name == NULL || name[0] == '\0')
        return NULL;
    size_t i = resil__cfg_find(c, s, name);
    if (i == SIZE_MAX) {
        *rc = RESIL_ENOTFOUND;
        return NULL;
    }
    return &c->sec[s].v[i];
}

int resil_config_retry_get(const resil_config *c, const char *name, resil_config_retry *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_RETRY, name, &rc);
    if (it) {
        *out = it->u.retry;
    } else {
        memset(out, 0, sizeof *out);
        resil_retry_policy_default(&out->policy);
    }
    return rc;
}

/* The defaults of the sections added with hedging, fallbacks and budgets
 * (schema.c fills an entry from the same ones). */
void resil__cfg_hedge_default(resil_config_hedge *h)
{
    memset(h, 0, sizeof *h);
    resil_hedge_opts_default(&h->opts);
}

int resil_config_hedge_get(const resil_config *c, const char *name, resil_config_hedge *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_HEDGING, name, &rc);
    if (it)
        *out = it->u.hedge;
    else
        resil__cfg_hedge_default(out);
    return rc;
}

int resil_config_fallback_get(const resil_config *c, const char *name, resil_outcome *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_FALLBACKS, name, &rc);
    *out = it ? it->u.fallback : resil_ok();
    return rc;
}

int resil_config_budget_get(const resil_config *c, const char *name, resil_budget_opts *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_BUDGETS, name, &rc);
    if (it)
        *out = it->u.budget;
    else
        resil_budget_opts_default(out, RESIL_BUDGET_TOKENS);
    return rc;
}

resil_duration resil_config_breaker_operation_timeout(const resil_config *c, const char *name)
{
    if (c == NULL)
        return 0;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_BREAKERS, name, &rc);
    return it != NULL ? it->operation_timeout : 0;
}

int resil_config_breaker_get(const resil_config *c, const char *name, resil_breaker_opts *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_BREAKERS, name, &rc);
    if (it) {
        *out = it->u.breaker;
        out->name = it->name;
    } else {
        resil_breaker_opts_default(out);
    }
    return rc;
}

int resil_config_bulkhead_get(const resil_config *c, const char *name, resil_bulkhead_opts *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_BULKHEADS, name, &rc);
    if (it)
        *out = it->u.bulkhead;
    else
        resil_bulkhead_opts_default(out);
    return rc;
}

int resil_config_chaos_get(const resil_config *c, const char *name, resil_chaos_opts *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_CHAOS, name, &rc);
    if (it)
        *out = it->u.chaos;
    else
        resil_chaos_opts_default(out, RESIL_CHAOS_FAULT);
    return rc;
}

int resil_config_adaptive_limiter_get(const resil_config *c, const char *name,
                                      resil_limiter_opts *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_ADAPTIVE_LIMITERS, name, &rc);
    if (it)
        *out = it->u.adaptive;
    else
        resil_limiter_opts_default(out, RESIL_LIMIT_GRADIENT);
    return rc;
}

int resil_config_throttle_get(const resil_config *c, const char *name, resil_throttle_opts *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_THROTTLES, name, &rc);
    if (it)
        *out = it->u.throttle;
    else
        resil_throttle_opts_default(out);
    return rc;
}

int resil_config_ratelimit_get(const resil_config *c, const char *name,
                               resil_config_ratelimit *out)
{
    if (c == NULL || out == NULL)
        return RESIL_EINVAL;
    int rc;
    const cfg_item *it = lookup(c, RESIL_CONFIG_RATE_LIMITERS, name, &rc);
    if (it) {
        *out = it->u.limiter;
    } else {
        resil_ratelimit_opts_default(&out->opts, RESIL_RATELIMIT_TOKEN_BUCKET);
        out->max_wait = 0;
    }
    return rc;
}

resil_duration resil_config_timeout(const resil_config *c, const char *operation)
{
    if (c == NULL)
        return RESIL_TIMEOUT_DEFAULT;
    size_t i = resil__cfg_find(c, RESIL_CONFIG_OPERATION_TIMEOUTS, operation);
    return i == SIZE_MAX ? c->default_timeout
                         : c->sec[RESIL_CONFIG_OPERATION_TIMEOUTS].v[i].u.timeout;
}

bool resil_config_degrade_get(const resil_config *c, resil_degrade_opts *out)
{
    if (out == NULL)
        return false;
    if (c == NULL) {
        resil_degrade_opts_default(out);
        return false;
    }
    *out = c->degrade;
    return c->has_degrade;
}

bool resil_config_distributed_get(const resil_config *c, resil_config_distributed *out)
{
    if (c == NULL || out == NULL)
        return false;
    *out = c->distributed;
    return c->has_distributed;
}

int resil_config_pipeline_get(const resil_config *c, const char *name,
                              resil_config_pipeline *out)
{
    if (c == NULL || out == NULL || name == NULL || name[0] == '\0')
        return RESIL_EINVAL;
    memset(out, 0, sizeof *out);
    size_t i = resil__cfg_find(c, RESIL_CONFIG_PIPELINES, name);
    if (i == SIZE_MAX)
        return RESIL_ENOTFOUND;
    const cfg_item *it = &c->sec[RESIL_CONFIG_PIPELINES].v[i];
    out->name = it->name;
    out->nsteps = it->u.pipeline.nsteps;
    for (size_t k = 0; k < out->nsteps; k++) {
        const cfg_step *st = &it->u.pipeline.steps[k];
        resil_config_step *o = &out->steps[k];
        o->kind = st->kind;
        o->timeout = st->timeout;
        o->per_operation = st->per_operation;
        o->ref = resil_config_name_at(
            c, (resil_config_section)resil__cfg_step_section(st->kind), st->ref);
    }
    return 0;
}
