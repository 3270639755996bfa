/*
 * chaos_opts.h — the chaos options every subcommand that calls something
 * shares (`resil run`, `resil http`): --chaos-fail RATE,
 * --chaos-latency RATE:DURATION and --chaos-seed N.
 *
 * The options become a small pipeline of the library's own chaos
 * strategies, and an attempt runs its real work through it: the tool
 * injects exactly what a program's pipeline would, with the same draws
 * for the same seed, and no second implementation of an injection exists.
 */
#ifndef RESIL_CLI_CHAOS_OPTS_H
#define RESIL_CLI_CHAOS_OPTS_H

#include "args.h"
#include "resil.h"

typedef struct chaos_opts {
    double fail_rate;       /* --chaos-fail; < 0 = not given */
    double latency_rate;    /* --chaos-latency RATE:...; < 0 = not given */
    resil_duration latency; /* --chaos-latency ...:DURATION */
    uint64_t seed;          /* --chaos-seed; 0 = from the OS */
    resil_pipeline *p;      /* made by chaos_opts_finish; NULL = no chaos */
} chaos_opts;

void chaos_opts_default(chaos_opts *c);
/* One option's value, for a command whose own table matches the names
 * (`resil http`): 0, or RESIL_EINVAL after reporting it by name. */
int chaos_opts_fail(chaos_opts *c, const args *a, const char *v);
int chaos_opts_latency(chaos_opts *c, const args *a, const char *v);
int chaos_opts_seed(chaos_opts *c, const args *a, const char *v);
/* The value parsers those are made of, for a command whose chaos flags
 * differ (`resil gateway`), each reporting by `option`'s name: "RATE:REST"
 * (*rest after the first colon; `form` is the whole value's form, for the
 * report), "RATE:DURATION", and a seed of 1 or more. */
int chaos_value_rate_split(const args *a, const char *option, const char *form, const char *v,
                           double *rate, const char **rest);
int chaos_value_rate_duration(const args *a, const char *option, const char *v, double *rate,
                              resil_duration *d);
int chaos_value_seed(const args *a, const char *option, const char *v, uint64_t *seed);
/* The seed of a command's k-th chaos strategy: seed + k, so that the
 * strategies draw independent sequences, skipping 0 (which means "from
 * the OS") when it wraps, so every accepted seed replays. 0 stays 0. */
uint64_t chaos_seed_after(uint64_t seed, uint64_t k);
/* 1 consumed, 0 not ours, RESIL_EINVAL after reporting the bad value. */
int chaos_opts_parse(chaos_opts *c, args *a);
/* Build the strategies on `clock`; a fault fails the attempt with `fault`.
 * 0 or RESIL_EINVAL after reporting on stderr, as `tool` says. */
int chaos_opts_finish(chaos_opts *c, const char *tool, resil_clock *clock, resil_outcome fault);
/* Run `op` on `ctx` through the chaos (or straight, when there is none);
 * *injected says whether a fault stood in for the operation. */
resil_outcome chaos_opts_run(const chaos_opts *c, resil_op_fn op, resil_attempt_ctx *ctx,
                             bool *injected);
/* The strategies chaos_opts_finish made, in their order, NULL-terminated,
 * for a pipeline built elsewhere (the HTTP client's) to share; *out is
 * NULL-only when there is no chaos. */
#define CHAOS_OPTS_MAX 2
void chaos_opts_strategies(const chaos_opts *c, resil_chaos *out[CHAOS_OPTS_MAX + 1]);
void chaos_opts_free(chaos_opts *c);
/* The help text's lines for the options. */
extern const char chaos_opts_help[];

#endif
