/*
 * fleet_opts.h — `--fleet redis://…`, shared by `resil http` and `resil
 * gateway`: the option's check and the Redis client behind it. One place,
 * so both subcommands refuse the same values with the same words and treat
 * a Redis that does not answer at start the same way (not an error: the
 * breakers count in this process alone until it answers, and the tool
 * says so). Compiled only when the Redis adapter is built.
 */
#ifndef RESIL_CLI_FLEET_OPTS_H
#define RESIL_CLI_FLEET_OPTS_H

#include "args.h"
#include "fleet_values.h"
#include "resil/redis.h"

/* --fleet's value: a redis:// URL, kept in *out; else reported by name. */
int fleet_url_parse(const args *a, const char *v, const char **out);

/* A client for `url` that starts offline when Redis does not answer within
 * `timeout` (0: the client's default). `cmd` names the subcommand in
 * messages; `alone` ends the warning printed when Redis did not answer
 * ("each host's breaker counts in this process alone"). 0, or the client's
 * error code (RESIL_EINVAL: a URL it refuses) after printing why. */
int fleet_connect(const char *cmd, const char *url, resil_duration timeout, const char *alone,
                  resil_redis **out);

/*
 * --fleet-rate and --fleet-concurrency: the fleet-wide limits of one
 * authority, named by it (host:port) as its breaker is, so every process
 * given the same --fleet URL and calling the same authority shares them.
 * Taken before the breaker, in the standard order: the rate first, then a
 * concurrency permit, which the caller holds for the call.
 */
typedef struct fleet_limit {
    struct fleet_limit *next;
    char name[RESIL_BREAKER_NAME_MAX];
    resil_ratelimit *rate;   /* NULL: no --fleet-rate */
    resil_bulkhead *conc;    /* NULL: no --fleet-concurrency */
} fleet_limit;

typedef struct fleet_limits {
    const char *cmd;         /* "http", "gateway": in messages */
    resil_redis *client;     /* not owned */
    fleet_limit_opts opts;
    fleet_limit *list;
} fleet_limits;

/* The limits of `name`, made on first use; NULL after printing why. Not
 * thread-safe: a multi-threaded caller gets its limits before it serves. */
fleet_limit *fleet_limit_get(fleet_limits *l, const char *name);
/*
 * Take a permit of each limit `one` has, never waiting: a rate permit, then
 * a concurrency permit into *t (which fleet_limit_leave gives back). 0, or
 * RESIL_EREJECTED with *why ("fleet rate limit", "fleet concurrency limit")
 * and *retry_after (when the rate permit would come; 0 when unknown). A
 * caller that waits for the rate permit does so on its own loop's timer.
 */
int fleet_limit_enter(fleet_limit *one, resil_bulkhead_ticket *t, const char **why,
                      resil_duration *retry_after);
void fleet_limit_leave(resil_bulkhead_ticket *t);
void fleet_limits_free(fleet_limits *l);

#endif
