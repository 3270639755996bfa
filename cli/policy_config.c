/*
 * policy_config.c — `--config FILE --policy NAME` for every subcommand that
 * takes the shared policy options (resil run, resil http) or a timeout
 * (resil gateway).
 *
 * A one-shot command runs one operation under a retry loop, so from a named
 * pipeline it takes what that loop can honour — the retry policy, the total
 * and the attempt timeout — and says which strategies it leaves out rather
 * than pretend to apply them. One loader serves every command, so a file
 * is read, validated and reported the same way everywhere.
 */
#include <stdio.h>
#include <string.h>

#include "policy_opts.h"
#include "resil/config.h"

static void report(const args *a, const char *file, const resil_config_diags *d)
{
    for (size_t i = 0; i < d->len; i++) {
        char line[RESIL_CONFIG_PATH_MAX + 300];
        resil_config_diag_format(&d->items[i], line, sizeof line);
        if (strcmp(d->items[i].path, file) == 0)
            fprintf(stderr, "%s: --config %s\n", a->cmd, line);
        else
            fprintf(stderr, "%s: --config %s%s%s\n", a->cmd, file,
                    d->items[i].path[0] ? ": " : ":", line);
    }
    if (d->dropped)
        fprintf(stderr, "%s: --config %s: ... and %zu more errors\n", a->cmd, file, d->dropped);
}

static void note_ignored(config_policy *out, const char *what)
{
    size_t n = strlen(out->ignored);
    if (strstr(out->ignored, what) == NULL)
        snprintf(out->ignored + n, sizeof out->ignored - n, "%s%s", n ? ", " : "", what);
}

/* A retry entry's numbers and its HTTP settings, copied out of the file. */
static void take_retry(const resil_config_retry *r, config_policy *out)
{
    out->policy = r->policy;
    snprintf(out->disable_for, sizeof out->disable_for, "%s",
             r->disable_for != NULL ? r->disable_for : "");
    out->nhint_headers = 0;
    for (const char *const *h = r->retry_after_headers; h != NULL && *h != NULL; h++)
        if (out->nhint_headers < sizeof out->hint_headers / sizeof out->hint_headers[0])
            snprintf(out->hint_headers[out->nhint_headers++], sizeof out->hint_headers[0],
                     "%s", *h);
}

static void from_pipeline(const resil_config *c, const resil_config_pipeline *p,
                          config_policy *out)
{
    for (size_t i = 0; i < p->nsteps; i++) {
        const resil_config_step *st = &p->steps[i];
        resil_config_retry r;
        switch (st->kind) {
        case RESIL_CONFIG_STEP_RETRY:
            resil_config_retry_get(c, st->ref, &r);
            take_retry(&r, out);
            break;
        case RESIL_CONFIG_STEP_TOTAL_TIMEOUT:
            out->total_timeout = st->per_operation ? resil_config_timeout(c, NULL) : st->timeout;
            break;
        case RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT:
            out->attempt_timeout = st->timeout;
            break;
        default:
            note_ignored(out, resil_config_step_name(st->kind));
            break;
        }
    }
}

static void list_names(const resil_config *c, resil_config_section s, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < resil_config_count(c, s) && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "",
                              resil_config_name_at(c, s, i));
    if (buf[0] == '\0')
        snprintf(buf, cap, "none");
}

int config_policy_load(const args *a, const char *file, const char *name, config_policy *out)
{
    memset(out, 0, sizeof *out);
    resil_retry_policy_default(&out->policy);
    resil_config *c;
    resil_config_diags d = {0};
    if (resil_config_load_file(file, &c, &d) != 0) {
        report(a, file, &d);
        resil_config_diags_free(&d);
        return RESIL_EINVAL;
    }
    resil_config_pipeline p;
    resil_config_retry r;
    int rc = 0;
    if (resil_config_pipeline_get(c, name, &p) == 0) {
        out->policy.max_attempts = 1; /* a pipeline without Retry runs once */
        from_pipeline(c, &p, out);
    } else if (name[0] != '\0' && resil_config_retry_get(c, name, &r) == 0) {
        take_retry(&r, out);
    } else {
        char pipelines[256], retries[256];
        list_names(c, RESIL_CONFIG_PIPELINES, pipelines, sizeof pipelines);
        list_names(c, RESIL_CONFIG_RETRY, retries, sizeof retries);
        rc = args_fail(a, "--policy: %s has no pipeline or retry policy named '%s' "
                          "(pipelines: %s; retry policies: %s)",
                       file, name, pipelines, retries);
    }
    if (rc == 0 && policy_keep_delays(&out->policy, out->delays) != 0)
        rc = args_fail(a, "--policy %s: its Delays list more than %d waits", name,
                       POLICY_DELAYS_MAX);
    /* The policy's own time budget bounds the run too. */
    resil_duration budget = out->policy.max_total;
    if (budget > 0 && (out->total_timeout == 0 || budget < out->total_timeout))
        out->total_timeout = budget;
    resil_config_free(c);
    return rc;
}
