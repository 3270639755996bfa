/*
 * route.h — which endpoint each attempt of a hedged call goes to
 * (Microsoft's hedging routing: ordered groups and weighted groups).
 *
 * Hedging to the same endpoint helps with a slow request; hedging to
 * another endpoint (a replica, another region) helps with a slow or broken
 * endpoint too. A route is a list of endpoint groups; a plan, made once
 * per call, names the endpoint of the primary attempt (plan[0]) and of
 * each hedge in turn (plan[k]). A call makes at most as many attempts as
 * its plan is long: each group serves one attempt.
 *
 *   ordered   group k serves attempt k, in the order given
 *   weighted  the group of the first attempt is drawn by the groups'
 *             weights; then either every later group is drawn by weight
 *             from those left (RESIL_ROUTE_EVERY_ATTEMPT) or the rest follow
 *             in the order given (RESIL_ROUTE_INITIAL_ATTEMPT, the default)
 *
 * Within a group the endpoint is drawn by the endpoints' weights. Pure and
 * allocation-free: a plan is a function of the route and the random draws,
 * so tests state plans exactly with a scripted generator. A draw is taken
 * only where there is a choice (more than one group or endpoint left).
 */
#ifndef RESIL_ROUTE_H
#define RESIL_ROUTE_H

#include "hedge.h"
#include "rng.h"

RESIL_BEGIN_DECLS

#define RESIL_ROUTE_MAX_GROUPS (RESIL_HEDGE_MAX + 1) /* one per attempt at most */
#define RESIL_ROUTE_WEIGHT_MAX 64000u               /* as Microsoft's */

typedef struct resil_route_endpoint {
    const char *url;   /* scheme://host[:port], e.g. "https://eu.example.com" */
    uint32_t weight;   /* 0 = 1; at most RESIL_ROUTE_WEIGHT_MAX */
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_route_endpoint;

typedef struct resil_route_group {
    const resil_route_endpoint *endpoints; /* not owned */
    size_t len;                            /* >= 1 */
    uint32_t weight;                       /* weighted routing; 0 = 1 */
    resil_reserved reserved_[1];           /* room to grow (docs/abi.md) */
} resil_route_group;

typedef enum resil_route_kind {
    RESIL_ROUTE_ORDERED = 0,
    RESIL_ROUTE_WEIGHTED
} resil_route_kind;

typedef enum resil_route_selection {
    RESIL_ROUTE_INITIAL_ATTEMPT = 0, /* weights pick the first group only */
    RESIL_ROUTE_EVERY_ATTEMPT        /* weights pick every group */
} resil_route_selection;

typedef struct resil_route_opts {
    resil_route_kind kind;
    const resil_route_group *groups; /* not owned */
    size_t ngroups;                  /* 1 to RESIL_ROUTE_MAX_GROUPS */
    resil_route_selection selection; /* weighted routing only */
    resil_reserved reserved_[4];     /* room to grow (docs/abi.md) */
} resil_route_opts;

RESIL_API void resil_route_opts_default(resil_route_opts *o);
/* Names the first bad field ("route.groups[1].endpoints[0].url must not be
 * NULL or empty"). */
RESIL_API int resil_route_opts_validate(const resil_route_opts *o, resil_err *err);

/* The plan of one call: out[0] the primary's endpoint, out[k] hedge k's,
 * at most `cap` of them; *len says how many (the groups, or cap). `rng`
 * NULL = the thread's. RESIL_EINVAL for NULL arguments or a route that
 * does not validate. */
RESIL_API int resil_route_plan(const resil_route_opts *o, resil_rng *rng, const char **out,
                               size_t cap, size_t *len);

RESIL_END_DECLS

#endif
