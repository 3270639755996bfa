/*
 * policy_opts.h — the retry-policy options shared by every subcommand that
 * retries something (`resil run`, `resil http`, `resil sim`, ...).
 *
 * One parser, one help text and one dry-run printer, so that `--attempts`,
 * `--backoff`, `--jitter` and friends mean the same thing, take the same
 * values and are rejected with the same words wherever they appear. The
 * result is a plain resil_retry_policy plus the two CLI-level timeouts and
 * the random source, ready to hand to resil_retry_execute().
 */
#ifndef RESIL_CLI_POLICY_OPTS_H
#define RESIL_CLI_POLICY_OPTS_H

#include <stdio.h>

#include "args.h"
#include "resil.h"

#define POLICY_DELAYS_MAX 32 /* waits in --delays or a configuration's Delays */

/* The options a command line may set over a --policy (bits of `given`),
 * and whose absence lets a timeout yield to an explicit one. */
enum {
    POLICY_GIVEN_ATTEMPTS = 1u << 0,
    POLICY_GIVEN_BACKOFF = 1u << 1,
    POLICY_GIVEN_DELAY = 1u << 2,
    POLICY_GIVEN_MAX_DELAY = 1u << 3,
    POLICY_GIVEN_FACTOR = 1u << 4,
    POLICY_GIVEN_JITTER = 1u << 5,
    POLICY_GIVEN_ATTEMPT_TIMEOUT = 1u << 6,
    POLICY_GIVEN_TOTAL_TIMEOUT = 1u << 7,
    POLICY_GIVEN_DELAYS = 1u << 8
};

typedef struct policy_opts {
    resil_retry_policy policy;      /* max_total is --total-timeout; a --delays
                                       list is kept in `delays` below */
    resil_duration attempt_timeout; /* --attempt-timeout; 0 = none */
    bool seeded;                    /* --seed given */
    uint64_t seed;
    resil_rng_seeded seeded_rng;    /* valid after policy_opts_finish */
    const char *config_file;        /* --config FILE */
    const char *policy_name;        /* --policy NAME */
    unsigned given;                 /* the options above set on the command line */
    resil_duration delays[POLICY_DELAYS_MAX];
    /* HTTP settings of the named policy, for resil http */
    char disable_for[128];          /* DisableFor: "POST,PATCH", or "" */
    char hint_headers[8][64];       /* RetryAfterHeaders */
    size_t nhint_headers;
} policy_opts;

/* The CLI's defaults: the library's policy defaults (3 attempts,
 * exponential from 1 s, factor 2, full jitter, cap 30 s), no timeouts. */
void policy_opts_default(policy_opts *po);

/*
 * Read the option at a->argv[a->i] if it is one of ours, consuming its value.
 * Returns 1 when consumed, 0 when the option is not a policy option, or
 * RESIL_EINVAL after reporting a bad value by name on stderr.
 */
int policy_opts_parse(policy_opts *po, args *a);

/* Cross-option checks once every option is read, and the random
 * source set up. With --config FILE --policy NAME, the named policy is read
 * first and the options given on the command line override it, wherever
 * they stand. An attempt timeout longer than the total timeout is an error
 * only when both were given; a default one yields to the one given (the
 * attempt timeout is cut to the total; a default total is lifted). The
 * library's validation runs last. Returns 0 or RESIL_EINVAL after
 * reporting. */
int policy_opts_finish(policy_opts *po, const args *a);

/*
 * What the resil tool takes from a named policy of a configuration file
 * (libresil-config): NAME is a pipeline — its Retry, its TotalTimeout (the
 * DefaultTimeout when per operation, and never more than the policy's
 * TimeBudget) and its AttemptTimeout — or else a Retry policy. `ignored`
 * lists the pipeline's strategies a one-shot command has no use for
 * ("CircuitBreaker, Bulkhead"), empty when none. Returns 0, or RESIL_EINVAL
 * after reporting every error of the file on stderr. Present only when the
 * tool is built with libresil-config (RESIL_CLI_CONFIG).
 */
typedef struct config_policy {
    resil_retry_policy policy;      /* the defaults when the pipeline has no Retry */
    resil_duration total_timeout;   /* 0 = none */
    resil_duration attempt_timeout; /* 0 = none */
    char ignored[128];
    resil_duration delays[POLICY_DELAYS_MAX]; /* a Delays list, copied out of the file */
    char disable_for[128];          /* DisableFor, joined by commas; "" = none */
    char hint_headers[8][64];       /* RetryAfterHeaders */
    size_t nhint_headers;
} config_policy;

/* Point a list policy's backoff at `store` (POLICY_DELAYS_MAX entries),
 * copying its waits there: a policy copied from elsewhere must not point
 * into memory that goes away. Returns 0, or RESIL_ERANGE when the list is
 * longer than the store. */
int policy_keep_delays(resil_retry_policy *p, resil_duration *store);

int config_policy_load(const args *a, const char *file, const char *name, config_policy *out);

/* Exit codes 0..255 as a set (`resil run --retry-on`, `--stop-on`). */
typedef struct code_set {
    bool given;
    bool has[256];
} code_set;

/* "1,75": a comma-separated list of exit codes in [1, 255], read into *set
 * (emptied first, then marked given). Returns 0, or RESIL_EINVAL after
 * reporting the bad value naming `option`. */
int exit_codes_parse(const args *a, const char *option, const char *text, code_set *set);

/* The random source jitter draws from: the seeded generator when --seed was
 * given, else the calling thread's OS-seeded one. */
resil_rng *policy_opts_rng(policy_opts *po);

/* The options' help text, one line each, for a subcommand's --help, with
 * the defaults `defaults` holds (the subcommand's, before any option). */
void policy_opts_usage(FILE *out, const policy_opts *defaults);

/*
 * Print the policy and the wait schedule it would follow if every attempt
 * failed (no server hints): one line per attempt. Without jitter the waits
 * are exact; with jitter and --seed they are the values the run would draw;
 * with jitter and no seed, each line gives the largest wait the jitter can
 * pick. Exact waits also show where --total-timeout stops the run at the
 * latest. "forever" prints the first 10 waits. Draws from a copy of the
 * seeded generator, so a later run still starts from the seed.
 */
void policy_opts_print_schedule(const policy_opts *po, FILE *out);

#endif
