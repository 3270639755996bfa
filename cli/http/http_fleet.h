/*
 * http_fleet.h — `resil http --fleet`: the per-authority breakers shared
 * through Redis, as the registry the HTTP client is given. Without the
 * Redis adapter it is an empty shell, so the run needs no #ifdef.
 */
#ifndef RESIL_CLI_HTTP_FLEET_H
#define RESIL_CLI_HTTP_FLEET_H

#include "resil/http.h"
#ifdef RESIL_CLI_REDIS
#include "resil/redis.h"
#endif

typedef struct fleet {
#ifdef RESIL_CLI_REDIS
    resil_redis *client;
    resil_redis_factory factory;
#endif
    resil_registry *registry;
} fleet;

#ifdef RESIL_CLI_REDIS
/* The registry for --fleet URL, with the client's breaker rules, into
 * f->registry. 0, or RESIL_EINVAL after printing why. */
int fleet_open(fleet *f, const char *url, const resil_http_opts *h);
#endif
/* After the client is freed. */
void fleet_close(fleet *f);

#endif
