/*
 * sim.h — the retry-storm simulator: scenarios, policies, results, output.
 *
 * The simulator exists to show, before production, what a retry policy does
 * to a struggling service. It therefore never re-implements a formula: every
 * wait comes from resil_backoff_delay through the sans-I/O retry step, every
 * retry is granted or denied by a real resil_budget, every fail-fast by a
 * real resil_breaker, all reading the simulation's virtual clock. The models
 * around them (an optimistic-concurrency row, a layered service stack, a
 * dependency with a capacity) are small, documented and deterministic: the
 * same seed gives the same output, byte for byte.
 *
 * The flow is config → resil_sim_run per policy → results → writers. The
 * `resil sim` command (cli/sim_command.c) is a thin layer over it.
 */
#ifndef RESIL_SIM_H
#define RESIL_SIM_H

#include <stdio.h>

#include "resil.h"

typedef enum resil_sim_scenario {
    RESIL_SIM_OCC,        /* Brooker's optimistic-concurrency contention */
    RESIL_SIM_FAILOVER,   /* a dependency down for a while under layered retries */
    RESIL_SIM_METASTABLE, /* Bronson et al.'s retry-sustained overload */
    RESIL_SIM_LAYERS,     /* amplification arithmetic of nested retries */
    RESIL_SIM_BROWNOUT    /* a dependency's capacity halves for a while under open-loop load */
} resil_sim_scenario;

/* A concurrency limit in front of each layer's calls: the library's
 * adaptive limiter, fixed (static: floor = ceiling = --limit) or learning
 * with one of its estimators from --limit. */
typedef enum resil_sim_limit {
    RESIL_SIM_LIMIT_NONE = 0,
    RESIL_SIM_LIMIT_STATIC,
    RESIL_SIM_LIMIT_VEGAS,
    RESIL_SIM_LIMIT_GRADIENT,
    RESIL_SIM_LIMIT_AIMD
} resil_sim_limit;

/* How a policy waits between attempts. DEFAULT is the scenario's naive wait
 * (exponential without jitter; immediately for metastable). */
typedef enum resil_sim_wait {
    RESIL_SIM_WAIT_DEFAULT = 0,
    RESIL_SIM_WAIT_NONE,         /* no backoff at all */
    RESIL_SIM_WAIT_EXPONENTIAL,  /* capped exponential, no jitter */
    RESIL_SIM_WAIT_FULL,         /* exponential, full jitter */
    RESIL_SIM_WAIT_EQUAL,        /* exponential, equal jitter */
    RESIL_SIM_WAIT_DECORRELATED  /* decorrelated jitter */
} resil_sim_wait;

/*
 * A policy is written "part+part+…": at most one wait (none, exponential,
 * full, equal, decorrelated), optionally `noretry`, at most one budget
 * (tokens, quota, ratio), optionally `breaker`, at most one limit (static,
 * vegas, gradient, aimd) and optionally `throttle` (client-side adaptive
 * throttling); `naive` alone is the scenario's plain policy. "full+tokens"
 * = full jitter with a gRPC-style token budget.
 */
typedef struct resil_sim_policy {
    char name[48];
    resil_sim_wait wait;
    bool no_retry;
    bool has_budget;
    resil_budget_model budget;
    bool breaker;
    resil_sim_limit limit;
    bool throttle;
} resil_sim_policy;

#define RESIL_SIM_MAX_POLICIES 16
#define RESIL_SIM_INNERMOST UINT32_MAX

typedef struct resil_sim_config {
    resil_sim_scenario scenario;
    uint64_t seed;  /* default 1 */
    uint32_t runs;  /* occ 100, others 1 */
    resil_sim_policy policies[RESIL_SIM_MAX_POLICIES];
    size_t npolicies;
    /* occ */
    uint32_t clients;        /* occ 100; failover 1000 */
    resil_duration base;     /* first backoff step: occ 5 ms (Brooker's base),
                                failover 2 s, metastable 1 s, layers 2 s */
    resil_duration cap;      /* occ 2 s, others 30 s */
    resil_duration net_mean; /* occ: one-way message delay, 10 ms */
    resil_duration net_sd;   /* occ: 2 ms */
    /* the service stack: failover, metastable, layers */
    double rate;             /* user requests per second (failover: per client) */
    uint32_t layers;         /* failover 3, layers 3, metastable 1 */
    uint32_t attempts;       /* per layer: failover 4, layers 4, metastable 2 */
    uint32_t budget_at;      /* 0 = a budget in every layer, else that layer
                                (1 = outermost; RESIL_SIM_INNERMOST = the last) */
    uint32_t requests;       /* layers: user requests to send; 0 = until duration */
    resil_duration duration; /* simulated time */
    resil_duration bin;      /* time-series resolution, 1 s */
    resil_duration outage_start;
    resil_duration outage;   /* failover: the outage; metastable: the trigger */
    double capacity;         /* dependency calls per second it can take */
    resil_duration latency;  /* the dependency's answer below capacity */
    double slowdown;         /* metastable: latency multiplier above capacity */
    resil_duration timeout;  /* the innermost layer's attempt timeout; 0 = none */
    /* brownout */
    uint32_t limit;          /* a static limit, and where adaptive ones start (40) */
} resil_sim_config;

/* Fill the documented defaults of a scenario, with its default policies. */
void resil_sim_config_default(resil_sim_config *c, resil_sim_scenario s);
/* Check every field; the message names the flag ("--clients must be …"). */
int resil_sim_config_validate(const resil_sim_config *c, resil_err *err);

const char *resil_sim_scenario_name(resil_sim_scenario s);
int resil_sim_scenario_parse(const char *s, resil_sim_scenario *out);

/* Parse one policy ("full+tokens"). The message names what is wrong. */
int resil_sim_policy_parse(const char *text, resil_sim_policy *out, resil_err *err);
/* Parse a comma-separated list into c->policies. */
int resil_sim_policies_parse(const char *text, resil_sim_config *c, resil_err *err);

/* A time series, one value per bin, averaged over runs. */
typedef struct resil_sim_series {
    size_t nbins;
    resil_duration bin;
    double *arrivals; /* user requests started */
    double *offered;  /* calls reaching the dependency */
    double *goodput;  /* user requests that succeeded */
    double *failed;   /* user requests that ended in failure */
    double *retries;  /* retry attempts started, at any layer */
} resil_sim_series;

typedef struct resil_sim_result {
    resil_sim_policy policy;
    uint32_t runs;
    uint64_t events; /* events dispatched, all runs */
    /* occ (per run, averaged) */
    double calls_per_run;
    double calls_per_client;
    double completion_ms;
    double successes_per_run; /* writes that succeeded: always `clients` */
    /* the service stack */
    double requests;           /* user requests per run */
    double succeeded;          /* of which succeeded */
    double calls_per_request;  /* dependency calls per user request */
    uint64_t max_calls;        /* the most calls one user request caused */
    double peak_multiplier;    /* max over outage bins of offered / arrivals */
    double mean_multiplier;    /* over the outage: offered / arrivals */
    double after_multiplier;   /* after the outage ends */
    uint32_t recovered_runs;   /* runs that recovered before the end */
    double recovery_s;         /* mean time from outage end to recovery */
    double goodput;            /* user requests succeeded per second, over the run */
    double outage_goodput;     /* the same while the outage (brownout) lasts */
    double p99_ms;             /* 99th percentile latency of succeeded requests */
    resil_sim_series series;   /* owned */
} resil_sim_result;

/* Progress callback: the fraction in [0, 1] of this policy's work done. */
typedef void (*resil_sim_progress_fn)(const resil_sim_policy *p, double done,
                                      void *ud);

/* Run one policy of the config; `out` is filled (free it with
 * resil_sim_result_free). Returns 0, RESIL_EINVAL (err names the field) or
 * RESIL_ENOMEM. */
int resil_sim_run(const resil_sim_config *c, const resil_sim_policy *p,
                  resil_sim_progress_fn progress, void *progress_ud,
                  resil_sim_result *out, resil_err *err);
void resil_sim_result_free(resil_sim_result *r);

/* Writers. Each takes every policy's result in the config's order. */
int resil_sim_write_text(FILE *f, const resil_sim_config *c,
                         const resil_sim_result *r, size_t n);
int resil_sim_write_json(FILE *f, const resil_sim_config *c,
                         const resil_sim_result *r, size_t n);
int resil_sim_write_csv(FILE *f, const resil_sim_config *c,
                        const resil_sim_result *r, size_t n);
int resil_sim_write_svg(FILE *f, const resil_sim_config *c,
                        const resil_sim_result *r, size_t n);

#endif
