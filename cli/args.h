/*
 * args.h — the option-reading primitives every subcommand shares.
 *
 * Subcommands parse their own options, but they must all speak alike: the
 * same `--name VALUE` / `--name=VALUE` forms, and the same sentence for a bad
 * value ("resil run: --attempts must be ..., got '0'"), because a user learns
 * the tool from its error messages. So the reading of one option and the
 * wording of a rejection live here once; each subcommand only lists what its
 * options mean.
 */
#ifndef RESIL_CLI_ARGS_H
#define RESIL_CLI_ARGS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "resil.h"

/*
 * The argument cursor a subcommand walks. `cmd` names the subcommand in
 * messages ("resil run"). `i` is the index of the argument being read.
 * `err` is NULL (args_init's choice) for the tool, whose messages go to
 * stderr; a caller that sets it gets each message there instead ("CMD:
 * MESSAGE", code RESIL_EINVAL), so a test or a fuzz target can read what
 * would have been said without printing anything.
 */
typedef struct args {
    int argc;
    char **argv;
    int i;
    const char *cmd;
    resil_err *err;
} args;

void args_init(args *a, const char *cmd, int argc, char **argv);

/*
 * Does argv[i] name the option `long_name` (e.g. "--delay", or the short
 * form when `short_name` is non-NULL)? When it does and the option takes a
 * value, *value is set to it — from "--delay=1s" or from the next argument,
 * which is consumed — and a missing value is reported on stderr as RESIL_EINVAL.
 * Returns 1 when matched, 0 when not, or a negative code.
 */
int args_match(args *a, const char *long_name, const char *short_name,
               const char **value);
/* A flag: matched without a value ("--dry-run"); "--dry-run=x" is an error. */
bool args_flag(args *a, const char *long_name, const char *short_name);

/* Report a bad option on stderr as "CMD: OPTION must be WHAT, got 'VALUE'"
 * and return RESIL_EINVAL. */
/* "--help" or "-h": every subcommand's way to ask for its usage. */
bool args_is_help(const char *arg);

int args_reject(const args *a, const char *option, const char *what,
                const char *value);
/* Report any other usage error on stderr (or into a->err) as "CMD: MESSAGE". */
int args_fail(const args *a, const char *fmt, ...) RESIL_PRINTF(2, 3);

/* A value that must not be empty (a file's name, a policy's): 0 with
 * *out = v, else RESIL_EINVAL, reported as "OPTION must be WHAT, got ''". */
int args_nonempty(const args *a, const char *option, const char *what, const char *v,
                  const char **out);

/* Are the `len` bytes at `s` an HTTP token (RFC 9110: letters, digits and
 * !#$%&'*+-.^_`|~), as a header's or a method's name is? */
bool args_token(const char *s, size_t len);

/* Is `text` a whole decimal number (digits only, no sign, no spaces) that
 * fits in 64 bits? */
bool args_whole(const char *text, uint64_t *out);

/* Value parsers: 0 on success, RESIL_EINVAL (already reported, naming
 * `option`) otherwise. */
int args_uint64(const args *a, const char *option, const char *text,
                uint64_t min, uint64_t max, uint64_t *out);
int args_double(const args *a, const char *option, const char *text,
                double min, double *out);
/* A share in [0, 1], written as a decimal number ("0.2", "1"). */
int args_rate(const args *a, const char *option, const char *text, double *out);
/* A duration ("250ms", "2s", "1m30s"); `positive` rejects 0. */
int args_duration(const args *a, const char *option, const char *text,
                  bool positive, resil_duration *out);
/* A timeout: a duration, where "none" and any zero ("0", "0s") switch it
 * off (*out = 0). */
int args_timeout(const args *a, const char *option, const char *text,
                 resil_duration *out);

/* All of `in` into *out (heap, NUL-terminated, *len bytes before the NUL).
 * 0, RESIL_ENOMEM or RESIL_EIO. */
int args_slurp(FILE *in, char **out, size_t *len);

#endif
