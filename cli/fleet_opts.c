/*
 * fleet_opts.c — `--fleet redis://…` for the subcommands that share their
 * breakers through Redis; see fleet_opts.h.
 */
#include <stdio.h>
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
    if (resil_redis_new(&ro, out, &err) != 0) {
        fprintf(stderr, "resil %s: --fleet: %s\n", cmd, err.message);
        return RESIL_EINVAL;
    }
    if (!resil_redis_connected(*out))
        fprintf(stderr, "resil %s: --fleet: no answer from %s; %s\n", cmd, url, alone);
    return 0;
}
