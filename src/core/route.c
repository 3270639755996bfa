/*
 * route.c — endpoint plans for hedged calls (route.h).
 *
 * A plan is drawn whole at the start of a call rather than endpoint by
 * endpoint as hedges start: the draws then happen on the caller's thread
 * in a fixed order, so a seeded generator gives the same plan whatever the
 * timing of the hedges, and the attempts only read a finished array.
 * Weighted picks walk cumulative weights in 64-bit integers, so a draw
 * maps to exactly one entry and equal weights are exactly equal.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "resil/route.h"

void resil_route_opts_default(resil_route_opts *o)
{
    memset(o, 0, sizeof *o);
    o->kind = RESIL_ROUTE_ORDERED;
    o->selection = RESIL_ROUTE_INITIAL_ATTEMPT;
}

static uint64_t weight_of(uint32_t w) { return w == 0 ? 1 : w; }

static int check_group(const resil_route_group *grp, size_t g, resil_err *err)
{
    if (grp->endpoints == NULL)
        return resil_err_set(err, RESIL_EINVAL, "route.groups[%zu].endpoints must not be NULL",
                             g);
    if (grp->len == 0)
        return resil_err_set(err, RESIL_EINVAL, "route.groups[%zu].len must be >= 1, got 0", g);
    if (grp->weight > RESIL_ROUTE_WEIGHT_MAX)
        return resil_err_set(err, RESIL_EINVAL, "route.groups[%zu].weight must be in [0, %u], got %u",
                             g, RESIL_ROUTE_WEIGHT_MAX, grp->weight);
    for (size_t e = 0; e < grp->len; e++) {
        const resil_route_endpoint *ep = &grp->endpoints[e];
        if (ep->url == NULL || ep->url[0] == '\0')
            return resil_err_set(err, RESIL_EINVAL,
                                 "route.groups[%zu].endpoints[%zu].url must not be NULL or empty",
                                 g, e);
        if (ep->weight > RESIL_ROUTE_WEIGHT_MAX)
            return resil_err_set(err, RESIL_EINVAL,
                                 "route.groups[%zu].endpoints[%zu].weight must be in [0, %u], "
                                 "got %u",
                                 g, e, RESIL_ROUTE_WEIGHT_MAX, ep->weight);
    }
    return 0;
}

int resil_route_opts_validate(const resil_route_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "route: options must not be NULL");
    if ((unsigned)o->kind > RESIL_ROUTE_WEIGHTED)
        return resil_err_set(err, RESIL_EINVAL, "route.kind must be ordered or weighted, got %d",
                             (int)o->kind);
    if ((unsigned)o->selection > RESIL_ROUTE_EVERY_ATTEMPT)
        return resil_err_set(err, RESIL_EINVAL,
                             "route.selection must be initial-attempt or every-attempt, got %d",
                             (int)o->selection);
    if (o->groups == NULL || o->ngroups == 0 || o->ngroups > RESIL_ROUTE_MAX_GROUPS)
        return resil_err_set(err, RESIL_EINVAL, "route.ngroups must be in [1, %d], got %zu",
                             RESIL_ROUTE_MAX_GROUPS, o->groups == NULL ? (size_t)0 : o->ngroups);
    for (size_t g = 0; g < o->ngroups; g++) {
        int rc = check_group(&o->groups[g], g, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The index whose cumulative weight holds a draw: `n` weights, of which
 * those with taken[i] are out. Draws only when there is a choice. */
static size_t pick(const uint32_t *weights, size_t stride, size_t n, const bool *taken,
                   resil_rng *rng)
{
    uint64_t total = 0;
    size_t left = 0, last = 0;
    for (size_t i = 0; i < n; i++) {
        if (taken != NULL && taken[i])
            continue;
        total += weight_of(*(const uint32_t *)((const char *)weights + i * stride));
        left++;
        last = i;
    }
    if (left <= 1)
        return last;
    double u = resil_rng_next(rng);
    uint64_t target = u > 0 ? (uint64_t)(u * (double)total) : 0;
    if (target >= total)
        target = total - 1;
    for (size_t i = 0; i < n; i++) {
        if (taken != NULL && taken[i])
            continue;
        uint64_t w = weight_of(*(const uint32_t *)((const char *)weights + i * stride));
        if (target < w)
            return i;
        target -= w;
    }
    return last;
}

static const char *endpoint_of(const resil_route_group *g, resil_rng *rng)
{
    size_t e = pick(&g->endpoints[0].weight, sizeof g->endpoints[0], g->len, NULL, rng);
    return g->endpoints[e].url;
}

/* The group of attempt k (k >= 1) once groups `taken` are used. */
static size_t next_group(const resil_route_opts *o, const bool *taken, resil_rng *rng)
{
    if (o->kind == RESIL_ROUTE_WEIGHTED && o->selection == RESIL_ROUTE_EVERY_ATTEMPT)
        return pick(&o->groups[0].weight, sizeof o->groups[0], o->ngroups, taken, rng);
    size_t g = 0;
    while (taken[g])
        g++;
    return g;
}

int resil_route_plan(const resil_route_opts *o, resil_rng *rng, const char **out, size_t cap,
                     size_t *len)
{
    if (out == NULL || len == NULL || resil_route_opts_validate(o, NULL) != 0)
        return RESIL_EINVAL;
    if (rng == NULL)
        rng = resil_rng_thread();
    bool taken[RESIL_ROUTE_MAX_GROUPS] = {false};
    size_t n = o->ngroups < cap ? o->ngroups : cap;
    for (size_t k = 0; k < n; k++) {
        size_t g = k == 0 && o->kind == RESIL_ROUTE_WEIGHTED
                       ? pick(&o->groups[0].weight, sizeof o->groups[0], o->ngroups, NULL, rng)
                       : next_group(o, taken, rng);
        taken[g] = true;
        out[k] = endpoint_of(&o->groups[g], rng);
    }
    *len = n;
    return 0;
}
