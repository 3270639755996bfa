/*
 * fuzz_cli_policy.c — the shared retry-policy options as a whole command
 * line: the input, split at NUL bytes, is argv (at most MAX_ARGS words), read
 * by policy_opts_parse() the way `resil run` and `resil http` read theirs
 * (`--name VALUE` and `--name=VALUE`, a missing value at the end, unknown
 * words skipped), then policy_opts_finish() and the --dry-run schedule.
 *
 * The properties: a rejection is RESIL_EINVAL with a message naming an
 * option, in args.err, never on stderr; a policy that finishes is valid for
 * the library and within every option's documented bounds; and printed
 * back as options (durations in the parser's own units, the factor to 17
 * digits) it parses and finishes to the very same policy. --config/--policy
 * are read as words but never loaded: a fuzzer must not open files.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "fuzz_argv.h"
#include "policy_opts.h"

#define MAX_ARGS 24
#define CAP 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static FILE *null_out(void)
{
    static FILE *f;
    if (f == NULL && (f = fopen("/dev/null", "w")) == NULL)
        abort();
    return f;
}

/* 0 and a finished policy, or the rejection (checked here). */
static int parse(policy_opts *po, int argc, char **argv)
{
    resil_err err = {0};
    args a;
    args_init(&a, "resil fuzz", argc, argv);
    a.err = &err;
    policy_opts_default(po);
    for (; a.i < argc; a.i++) {
        int rc = policy_opts_parse(po, &a);
        check(rc == 0 || rc == 1 || rc == RESIL_EINVAL);
        if (rc < 0) {
            check(err.code == RESIL_EINVAL && strstr(err.message, "resil fuzz: --") != NULL);
            return rc;
        }
    }
    po->config_file = NULL; /* read as words, never loaded */
    po->policy_name = NULL;
    int rc = policy_opts_finish(po, &a);
    check(rc == 0 || (rc == RESIL_EINVAL && err.code == RESIL_EINVAL && err.message[0]));
    return rc;
}

static void check_bounds(const policy_opts *po)
{
    const resil_retry_policy *p = &po->policy;
    const resil_backoff *b = &p->backoff;
    check(p->max_attempts >= 1);
    check(b->base >= 0 && b->max_delay >= 0);
    check(isfinite(b->factor) && b->factor >= 1.0);
    check(po->attempt_timeout >= 0 && p->max_total >= 0);
    check(po->attempt_timeout == 0 || p->max_total == 0 || po->attempt_timeout <= p->max_total);
    check(resil_retry_policy_validate(p, NULL) == 0);
}

/* A list's waits as --delays takes them: "1s,2s,5s". */
static void delays_text(const resil_backoff *b, char *buf, size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < b->delays_len; i++) {
        if (i > 0)
            buf[at++] = ',';
        resil_duration_format(b->delays[i], buf + at, cap - at);
        at += strlen(buf + at);
        check(at + 1 < cap);
    }
}

static bool same_delays(const resil_backoff *a, const resil_backoff *b)
{
    if (a->kind != RESIL_BACKOFF_LIST)
        return true;
    return a->delays_len == b->delays_len &&
           memcmp(a->delays, b->delays, a->delays_len * sizeof *a->delays) == 0;
}

/* The policy as options, parsed again: the same numbers (a list's waits as
 * --delays, which takes no --backoff). */
static void check_round_trip(const policy_opts *po)
{
    const resil_retry_policy *p = &po->policy;
    const resil_backoff *b = &p->backoff;
    char words[8][64];
    char *argv[20];
    int argc = 0;
    argv[argc++] = "resil fuzz";
    if (p->max_attempts == RESIL_ATTEMPTS_FOREVER)
        snprintf(words[0], sizeof words[0], "--attempts=forever");
    else
        snprintf(words[0], sizeof words[0], "--attempts=%u", p->max_attempts);
    char kind[16 + POLICY_DELAYS_MAX * 40];
    if (b->kind == RESIL_BACKOFF_LIST) {
        strcpy(kind, "--delays=");
        delays_text(b, kind + 9, sizeof kind - 9);
    } else {
        snprintf(kind, sizeof kind, "--backoff=%s", resil_backoff_kind_name(b->kind));
    }
    snprintf(words[2], sizeof words[2], "--factor=%.17g", b->factor);
    snprintf(words[3], sizeof words[3], "--jitter=%s", resil_jitter_name(b->jitter));
    strcpy(words[4], "--delay=");
    resil_duration_format(b->base, words[4] + 8, sizeof words[4] - 8);
    strcpy(words[5], "--max-delay=");
    resil_duration_format(b->max_delay, words[5] + 12, sizeof words[5] - 12);
    for (int i = 0; i < 6; i++)
        argv[argc++] = i == 1 ? kind : words[i];
    char at[32], tt[32], seed[32];
    if (po->attempt_timeout > 0) {
        resil_duration_format(po->attempt_timeout, at, sizeof at);
        argv[argc++] = "--attempt-timeout";
        argv[argc++] = at;
    }
    if (p->max_total > 0) {
        resil_duration_format(p->max_total, tt, sizeof tt);
        argv[argc++] = "--total-timeout";
        argv[argc++] = tt;
    }
    if (po->seeded) {
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)po->seed);
        argv[argc++] = "--seed";
        argv[argc++] = seed;
    }
    argv[argc] = NULL;
    policy_opts again;
    check(parse(&again, argc, argv) == 0);
    const resil_backoff *b2 = &again.policy.backoff;
    check(again.policy.max_attempts == p->max_attempts && b2->kind == b->kind &&
          b2->factor == b->factor && b2->jitter == b->jitter && b2->base == b->base &&
          b2->max_delay == b->max_delay && again.attempt_timeout == po->attempt_timeout &&
          again.policy.max_total == p->max_total && again.seeded == po->seeded &&
          again.seed == po->seed && same_delays(b, b2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= CAP)
        return 0;
    char text[CAP];
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = fuzz_split(text, size, argv, MAX_ARGS);
    policy_opts po;
    if (parse(&po, argc, argv) != 0)
        return 0;
    check_bounds(&po);
    check_round_trip(&po);
    policy_opts_print_schedule(&po, null_out());
    return 0;
}
