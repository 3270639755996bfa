/*
 * fuzz_gateway_chaos.c — `resil gateway`'s --chaos-status, --chaos-latency,
 * --chaos-drop and --chaos-seed as a whole command line: the input, split
 * at NUL bytes, is argv (at most MAX_ARGS words), read by gw_chaos_parse()
 * the way cmd_gateway.c reads it (unknown words skipped), then
 * gw_chaos_check(), the strategies built on a fake clock and a few
 * requests decided.
 *
 * The properties: a rejection is RESIL_EINVAL with a message naming a
 * --chaos- option, in args.err, never on stderr; what is accepted is
 * within the documented bounds (rates in [0, 1], CODE 400..599,
 * RETRY_AFTER 0..86400 s, a latency > 0, a seed >= 1 and only with a
 * kind); printed back as options it parses to the very same values; and
 * every decision is one the options allow, its access-log note fitting its
 * buffer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/fuzz/fuzz_argv.h"
#include "args.h"
#include "gateway_chaos.h"

#define MAX_ARGS 24
#define CAP 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* 0 and the options read, or the rejection (checked here). */
static int parse(gw_chaos_config *c, int argc, char **argv)
{
    resil_err err = {0};
    args a;
    args_init(&a, "resil fuzz", argc, argv);
    a.err = &err;
    gw_chaos_config_default(c);
    int rc = 0;
    for (; a.i < argc && rc >= 0; a.i++)
        rc = gw_chaos_parse(c, &a);
    if (rc >= 0)
        rc = gw_chaos_check(c, &a);
    check(rc >= 0 || rc == RESIL_EINVAL);
    if (rc < 0)
        check(err.code == RESIL_EINVAL && strstr(err.message, "resil fuzz: --chaos-") != NULL);
    return rc < 0 ? rc : 0;
}

static void check_bounds(const gw_chaos_config *c)
{
    check(c->status_rate == -1 || (c->status_rate >= 0 && c->status_rate <= 1));
    check(c->status_rate < 0 || (c->status >= 400 && c->status <= 599));
    check(c->retry_after >= -1 && c->retry_after <= GW_CHAOS_RETRY_AFTER_MAX);
    check(c->latency_rate == -1 || (c->latency_rate >= 0 && c->latency_rate <= 1));
    check(c->latency_rate >= 0 ? c->latency > 0 : c->latency == 0);
    check(c->drop_rate == -1 || (c->drop_rate >= 0 && c->drop_rate <= 1));
    check(c->seed == 0 || gw_chaos_configured(c));
}

/* The options as words, parsed again: the same values. */
static void check_round_trip(const gw_chaos_config *c)
{
    char words[4][128];
    char *argv[6];
    int argc = 0;
    argv[argc++] = "resil fuzz";
    if (c->status_rate >= 0) {
        int n = snprintf(words[0], sizeof words[0], "--chaos-status=%.17g:%d", c->status_rate,
                         c->status);
        if (c->retry_after >= 0)
            snprintf(words[0] + n, sizeof words[0] - (size_t)n, ":%lld",
                     (long long)c->retry_after);
        argv[argc++] = words[0];
    }
    if (c->latency_rate >= 0) {
        char d[48];
        resil_duration_format(c->latency, d, sizeof d);
        snprintf(words[1], sizeof words[1], "--chaos-latency=%.17g:%s", c->latency_rate, d);
        argv[argc++] = words[1];
    }
    if (c->drop_rate >= 0) {
        snprintf(words[2], sizeof words[2], "--chaos-drop=%.17g", c->drop_rate);
        argv[argc++] = words[2];
    }
    if (c->seed != 0) {
        snprintf(words[3], sizeof words[3], "--chaos-seed=%llu", (unsigned long long)c->seed);
        argv[argc++] = words[3];
    }
    argv[argc] = NULL;
    gw_chaos_config again;
    check(parse(&again, argc, argv) == 0);
    check(again.status_rate == c->status_rate && again.status == c->status);
    check(again.retry_after == c->retry_after);
    check(again.latency_rate == c->latency_rate && again.latency == c->latency);
    check(again.drop_rate == c->drop_rate && again.seed == c->seed);
}

/* Decisions the options allow, and notes that fit. */
static void check_picks(gw_chaos_config *c)
{
    if (c->seed == 0)
        c->seed = 1; /* replayable: never from the OS */
    resil_fake_clock *fc;
    check(resil_fake_clock_new(0, 0, &fc) == 0);
    gw_chaos *chaos;
    check(gw_chaos_new(c, resil_fake_clock_clock(fc), NULL, &chaos) == 0);
    check((chaos != NULL) == gw_chaos_configured(c));
    for (int i = 0; i < 8; i++) {
        gw_chaos_action a;
        bool any = gw_chaos_pick(chaos, &a);
        check(a.delay == 0 || (c->latency_rate > 0 && a.delay == c->latency));
        check(a.end != GW_CHAOS_DROP || c->drop_rate > 0);
        check(a.end != GW_CHAOS_STATUS || (c->status_rate > 0 && a.status == c->status));
        check((a.retry_after != NULL) == (a.end == GW_CHAOS_STATUS && c->retry_after >= 0));
        check(any == (a.delay > 0 || a.end != GW_CHAOS_FORWARD));
        char note[24];
        gw_chaos_note(&a, note, sizeof note);
        check(strlen(note) < sizeof note && (note[0] == '\0') == !any);
    }
    if (chaos != NULL) {
        char what[64];
        gw_chaos_describe(chaos, what, sizeof what);
        check(strlen(what) < sizeof what);
    }
    gw_chaos_free(chaos);
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
    gw_chaos_config c;
    if (parse(&c, argc, argv) != 0)
        return 0;
    check_bounds(&c);
    check_round_trip(&c);
    check_picks(&c);
    return 0;
}
