/*
 * fleet_opts.c — `--fleet redis://…` for the subcommands that share their
 * breakers through Redis; see fleet_opts.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_opts.h"

int fleet_url_parse(const args *a, const char *v, const char **out)
{
    if (strncmp(v, "redis://", 8) != 0)
        return args_reject(a, "--fleet", "a redis:// URL", v);
    *out = v;
    return 0;
}

int fleet_connect(const char *cmd, const char *url, resil_duration timeout, const char *alone,
                  resil_redis **out)
{
    resil_redis_opts ro;
    resil_redis_opts_default(&ro);
    ro.url = url;
    if (timeout > 0)
        ro.timeout = timeout;
    ro.allow_offline_start = true;
    resil_err err;
    int rc = resil_redis_new(&ro, out, &err);
    if (rc != 0) {
        fprintf(stderr, "resil %s: --fleet: %s\n", cmd, err.message);
        return rc;
    }
    if (!resil_redis_connected(*out))
        fprintf(stderr, "resil %s: --fleet: no answer from %s; %s\n", cmd, url, alone);
    return 0;
}

/* ---- --fleet-rate and --fleet-concurrency -------------------------------------- */

static int open_limit(fleet_limits *l, fleet_limit *one, resil_err *err)
{
    const fleet_limit_opts *o = &l->opts;
    if (o->rate > 0) {
        resil_redis_ratelimit_opts ro;
        resil_redis_ratelimit_opts_default(&ro);
        ro.name = one->name;
        ro.rate = o->rate;
        ro.period = o->period;
        ro.burst = o->burst;
        if (resil_redis_ratelimit_new(l->client, &ro, &one->rate, err) != 0)
            return -1;
    }
    if (o->concurrency > 0) {
        resil_redis_concurrency_opts co;
        resil_redis_concurrency_opts_default(&co);
        co.name = one->name;
        co.max_concurrency = o->concurrency;
        co.lease = o->lease;
        if (resil_redis_concurrency_new(l->client, &co, &one->conc, err) != 0)
            return -1;
    }
    return 0;
}

static void free_limit(fleet_limit *one)
{
    resil_ratelimit_free(one->rate);
    resil_bulkhead_free(one->conc);
    free(one);
}

fleet_limit *fleet_limit_get(fleet_limits *l, const char *name)
{
    for (fleet_limit *one = l->list; one != NULL; one = one->next)
        if (strcmp(one->name, name) == 0)
            return one;
    fleet_limit *one = calloc(1, sizeof *one);
    if (one == NULL) {
        fprintf(stderr, "resil %s: out of memory\n", l->cmd);
        return NULL;
    }
    snprintf(one->name, sizeof one->name, "%s", name);
    resil_err err;
    if (open_limit(l, one, &err) != 0) {
        fprintf(stderr, "resil %s: --fleet limits of %s: %s\n", l->cmd, name, err.message);
        free_limit(one);
        return NULL;
    }
    one->next = l->list;
    l->list = one;
    return one;
}

int fleet_limit_enter(fleet_limit *one, resil_bulkhead_ticket *t, const char **why,
                      resil_duration *retry_after)
{
    memset(t, 0, sizeof *t);
    *retry_after = 0;
    if (one->rate != NULL && resil_ratelimit_try_acquire(one->rate, 1, retry_after) != 0) {
        *why = "fleet rate limit";
        return RESIL_EREJECTED;
    }
    *retry_after = 0;
    if (one->conc != NULL && resil_bulkhead_try_acquire(one->conc, t) != 0) {
        *why = "fleet concurrency limit";
        return RESIL_EREJECTED;
    }
    return 0;
}

void fleet_limit_leave(resil_bulkhead_ticket *t) { resil_bulkhead_release(t); }

void fleet_limits_free(fleet_limits *l)
{
    while (l->list != NULL) {
        fleet_limit *one = l->list;
        l->list = one->next;
        free_limit(one);
    }
}
