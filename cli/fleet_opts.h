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
#include "resil/redis.h"

/* --fleet's value: a redis:// URL, kept in *out; else reported by name. */
int fleet_url_parse(const args *a, const char *v, const char **out);

/* A client for `url` that starts offline when Redis does not answer within
 * `timeout` (0: the client's default). `cmd` names the subcommand in
 * messages; `alone` ends the warning printed when Redis did not answer
 * ("each host's breaker counts in this process alone"). 0, or RESIL_EINVAL
 * after printing why. */
int fleet_connect(const char *cmd, const char *url, resil_duration timeout, const char *alone,
                  resil_redis **out);

#endif
