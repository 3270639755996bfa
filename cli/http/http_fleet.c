/*
 * http_fleet.c — the per-authority breakers of `resil http --fleet`, shared
 * through Redis: a registry whose factory makes fleet breakers, each
 * synchronised once before its first call, since the process is short-lived.
 */
#include <stdio.h>

#include "http_fleet.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

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
int fleet_open(fleet *f, const char *url, const resil_http_opts *h)
{
    if (fleet_connect("http", url, RESIL_MS(500),
                      "each host's breaker counts in this process alone", &f->client) != 0)
        return RESIL_EINVAL;
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
    resil_redis_free(f->client);
#endif
}

