/*
 * http_fleet.h — `resil http --fleet`: the per-authority breakers shared
 * through Redis, as the registry the HTTP client is given, and the fleet
 * limits (--fleet-rate, --fleet-concurrency) each URL's call is taken
 * inside. Without the Redis adapter it is an empty shell, so the run needs
 * no #ifdef.
 */
#ifndef RESIL_CLI_HTTP_FLEET_H
#define RESIL_CLI_HTTP_FLEET_H

#include "fleet_values.h"
#include "resil/http.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

typedef struct fleet {
#ifdef RESIL_CLI_REDIS
    resil_redis *client;
    resil_redis_factory factory;
    fleet_limits limits; /* --fleet-rate, --fleet-concurrency */
#endif
    resil_registry *registry;
} fleet;

/* The standard profile's total timeout. */
#define FLEET_RATE_WAIT_MAX RESIL_S(30)

#ifdef RESIL_CLI_REDIS
/* The registry for --fleet URL, with the client's breaker rules, into
 * f->registry, and the limits asked for. 0, or RESIL_EINVAL after printing
 * why. */
int fleet_open(fleet *f, const char *url, const fleet_limit_opts *limits,
               const resil_http_opts *h);
#endif
/*
 * Before `url`'s call: a permit of each fleet limit of its host, a rate
 * permit waited for within `total` (0, no total timeout: within
 * FLEET_RATE_WAIT_MAX, so that a permit hours away refuses the request
 * rather than hanging a script), the concurrency permit
 * kept in *t for fleet_leave. 0 to go on (also when cancelled: the call
 * reports it), RESIL_EREJECTED when a limit refused the request (said on
 * standard error unless `quiet`), or RESIL_EINVAL after printing why.
 */
int fleet_enter(fleet *f, const char *url, resil_duration total, resil_cancel *cancel,
                bool quiet, resil_bulkhead_ticket *t);
void fleet_leave(resil_bulkhead_ticket *t);
/* After the client is freed. */
void fleet_close(fleet *f);

#endif
