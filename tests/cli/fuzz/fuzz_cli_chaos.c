/*
 * fuzz_cli_chaos.c — --chaos-fail, --chaos-latency and --chaos-seed as a
 * whole command line: the input, split at NUL bytes, is argv (at most
 * MAX_ARGS words), read by chaos_opts_parse() the way `resil run` reads it
 * (`--name VALUE` and `--name=VALUE`, a missing value at the end, unknown
 * words skipped), then chaos_opts_finish() on a fake clock and one attempt
 * through the chaos.
 *
 * The properties: a rejection is RESIL_EINVAL with a message naming a
 * --chaos- option, in args.err, never on stderr; what is accepted is within
 * the documented bounds (rates in [0, 1], a duration > 0, a seed >= 1);
 * printed back as options (rates to 17 digits, the duration in the parser's
 * own units) it parses to the very same values; and the finished strategies
 * build, and run an attempt to a success or the injected fault.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "fuzz_argv.h"
#include "chaos_opts.h"

#define MAX_ARGS 24
#define CAP 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* 0 and the options read, or the rejection (checked here). */
static int parse(chaos_opts *c, int argc, char **argv)
{
    resil_err err = {0};
    args a;
    args_init(&a, "resil fuzz", argc, argv);
    a.err = &err;
    chaos_opts_default(c);
    for (; a.i < argc; a.i++) {
        int rc = chaos_opts_parse(c, &a);
        check(rc == 0 || rc == 1 || rc == RESIL_EINVAL);
        if (rc < 0) {
            check(err.code == RESIL_EINVAL &&
                  strstr(err.message, "resil fuzz: --chaos-") != NULL);
            return rc;
        }
    }
    return 0;
}

static void check_bounds(const chaos_opts *c)
{
    check(c->fail_rate == -1 || (c->fail_rate >= 0 && c->fail_rate <= 1));
    check(c->latency_rate == -1 || (c->latency_rate >= 0 && c->latency_rate <= 1));
    check(c->latency_rate >= 0 ? c->latency > 0 : c->latency == 0);
}

/* The options as words, parsed again: the same values. */
static void check_round_trip(const chaos_opts *c)
{
    char words[3][96];
    char *argv[5];
    int argc = 0;
    argv[argc++] = "resil fuzz";
    if (c->fail_rate >= 0) {
        snprintf(words[0], sizeof words[0], "--chaos-fail=%.17g", c->fail_rate);
        argv[argc++] = words[0];
    }
    if (c->latency_rate >= 0) {
        char d[48];
        resil_duration_format(c->latency, d, sizeof d);
        snprintf(words[1], sizeof words[1], "--chaos-latency=%.17g:%s", c->latency_rate, d);
        argv[argc++] = words[1];
    }
    if (c->seed != 0) {
        snprintf(words[2], sizeof words[2], "--chaos-seed=%llu", (unsigned long long)c->seed);
        argv[argc++] = words[2];
    }
    argv[argc] = NULL;
    chaos_opts again;
    check(parse(&again, argc, argv) == 0);
    check(again.fail_rate == c->fail_rate && again.latency_rate == c->latency_rate);
    check(again.latency == c->latency && again.seed == c->seed);
}

static resil_outcome succeed(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

/* The strategies build from anything the parser accepts, and an attempt
 * through them ends in a success or the fault. */
static void check_run(chaos_opts *c)
{
    resil_fake_clock *fc;
    check(resil_fake_clock_new(0, 0, &fc) == 0);
    if (c->seed == 0)
        c->seed = 1; /* replayable: never from the OS */
    resil_outcome fault = resil_fail(RESIL_TRANSIENT, 1, "injected");
    check(chaos_opts_finish(c, "resil fuzz", resil_fake_clock_clock(fc), fault) == 0);
    check((c->p != NULL) == (c->fail_rate >= 0 || c->latency_rate >= 0));
    resil_attempt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    bool injected;
    resil_outcome o = chaos_opts_run(c, succeed, &ctx, &injected);
    check(injected ? o.kind == RESIL_TRANSIENT && o.code == 1 : o.kind == RESIL_SUCCESS);
    check(!injected || c->fail_rate > 0);
    chaos_opts_free(c);
    resil_fake_clock_free(fc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CAP)
        return 0;
    char text[CAP + 1];
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = fuzz_split(text, size, argv, MAX_ARGS);
    chaos_opts c;
    if (parse(&c, argc, argv) != 0)
        return 0;
    check_bounds(&c);
    check_round_trip(&c);
    check_run(&c);
    return 0;
}
