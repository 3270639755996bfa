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
 * f->registry, and the limits asked for; each Redis call bounded by
 * `timeout` (0: FLEET_HTTP_TIMEOUT). 0, or RESIL_EINVAL after printing
 * why. */
#define FLEET_HTTP_TIMEOUT RESIL_MS(500)
int fleet_open(fleet *f, const char *url, resil_duration timeout,
               const fleet_limit_opts *limits, const resil_http_opts *h);
#endif
/* fleet_enter(): the rate permit comes in *wait; ask again then. */
#define FLEET_WAIT 1

/*
 * Before `url`'s call: a permit of each fleet limit of its host, without
 * waiting (the caller's loop does the waiting): the concurrency permit is
 * kept in *t for fleet_leave. 0 to go on; FLEET_WAIT when the rate permit
 * is *wait away and that is within `budget` (the caller asks again once it
 * has passed, with what is left of the budget); RESIL_EREJECTED when a
 * limit refused the request (said on standard error unless `quiet`), also
 * a rate permit further away than `budget`; or RESIL_EINVAL after printing
 * why. The budget of a request is its total timeout, or without one
 * FLEET_RATE_WAIT_MAX, so that a permit hours away refuses the request
 * rather than hanging a script.
 */
int fleet_enter(fleet *f, const char *url, resil_duration budget, bool quiet,
                resil_bulkhead_ticket *t, resil_duration *wait);
void fleet_leave(resil_bulkhead_ticket *t);
/* After the client is freed. */
void fleet_close(fleet *f);

#endif
