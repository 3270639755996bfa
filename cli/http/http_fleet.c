/*
 * http_fleet.c — the per-authority breakers of `resil http --fleet`, shared
 * through Redis: a registry whose factory makes fleet breakers, each
 * synchronised once before its first call, since the process is short-lived;
 * and the fleet limits of each host, taken around each URL's call (the
 * rate and concurrency permits come before the breaker, in the standard
 * order, so a refused request is never sent nor counted by the breaker).
 */
#include <stdio.h>
#include <string.h>

#include "http_fleet.h"

#ifdef RESIL_CLI_REDIS
/* The fleet breaker of the authority, then one sync round so that it knows
 * the fleet's state before this short-lived process's first call: a breaker
 * another process opened refuses the call rather than learning of it a
 * sync interval later. Redis down: the round fails and the breaker counts
 * locally (its fallback) until Redis answers. */
static int fleet_breaker_for(const char *key, const resil_breaker_opts *o, resil_breaker **out,
                             resil_err *err, void *ud)
{
    fleet *f = ud;
    int rc = resil_redis_breaker_factory(key, o, out, err, &f->factory);
    if (rc == 0)
        (void)resil_redis_sync(f->client);
    return rc;
}

/* The registry for --fleet URL, with the client's breaker rules. Redis not
 * answering at start is not an error: the tool still works, each host's
 * breaker then counting in this process alone, and says so. */
int fleet_open(fleet *f, const char *url, resil_duration timeout,
               const fleet_limit_opts *limits, const resil_http_opts *h)
{
    if (fleet_connect("http", url, timeout > 0 ? timeout : FLEET_HTTP_TIMEOUT,
                      "each host's breaker counts in this process alone", &f->client) != 0)
        return RESIL_EINVAL;
    f->limits = (fleet_limits){.cmd = "http", .client = f->client, .opts = *limits};
    resil_err err;
    f->factory = (resil_redis_factory){.client = f->client};
    resil_registry_opts g;
    resil_registry_opts_default(&g);
    g.max_breakers = h->max_authorities;
    g.breaker = h->breaker;
    g.factory = fleet_breaker_for;
    g.factory_ud = f;
    if (resil_registry_new(&g, &f->registry, &err) != 0) {
        fprintf(stderr, "resil http: --fleet: %s\n", err.message);
        return RESIL_EINVAL;
    }
    return 0;
}

static void say_refused(const char *url, const char *why, resil_duration wait)
{
    char hint[32] = "";
    if (wait > 0) /* in whole seconds, rounded up, as Retry-After would say */
        resil_duration_format((wait + RESIL_S(1) - 1) / RESIL_S(1) * RESIL_S(1), hint,
                              sizeof hint);
    fprintf(stderr, "resil http: %s: refused by the %s%s%s (not attempted)\n", url, why,
            wait > 0 ? "; next permit in " : "", hint);
}

int fleet_enter(fleet *f, const char *url, resil_duration budget, bool quiet,
                resil_bulkhead_ticket *t, resil_duration *wait)
{
    memset(t, 0, sizeof *t);
    *wait = 0;
    const fleet_limit_opts *o = &f->limits.opts;
    if (f->client == NULL || (o->rate == 0 && o->concurrency == 0))
        return 0;
    char authority[RESIL_BREAKER_NAME_MAX];
    if (resil_http_authority(url, authority, sizeof authority) != 0)
        return 0; /* libcurl reports the URL */
    fleet_limit *one = fleet_limit_get(&f->limits, authority);
    if (one == NULL)
        return RESIL_EINVAL;
    const char *why = NULL;
    resil_duration next = 0;
    int rc = fleet_limit_enter(one, t, &why, &next);
    if (rc == 0)
        return 0;
    /* Only a rate refusal says when its permit comes. */
    if (next > 0 && next <= budget) {
        *wait = next;
        return FLEET_WAIT;
    }
    if (!quiet)
        say_refused(url, why, next);
    return RESIL_EREJECTED;
}

void fleet_leave(resil_bulkhead_ticket *t)
{
    fleet_limit_leave(t);
}
#else
int fleet_enter(fleet *f, const char *url, resil_duration budget, bool quiet,
                resil_bulkhead_ticket *t, resil_duration *wait)
{
    (void)f, (void)url, (void)budget, (void)quiet;
    memset(t, 0, sizeof *t);
    *wait = 0;
    return 0;
}

void fleet_leave(resil_bulkhead_ticket *t)
{
    (void)t;
}
#endif

/* After the client: flush this process's counts while its breakers still
 * exist, so the next process sees the failures this one saw. */
void fleet_close(fleet *f)
{
#ifdef RESIL_CLI_REDIS
    if (f->client != NULL)
        (void)resil_redis_sync(f->client); /* before the breakers go */
#endif
    resil_registry_free(f->registry);
#ifdef RESIL_CLI_REDIS
    fleet_limits_free(&f->limits);
    resil_redis_free(f->client);
#endif
}

