/*
 * fuzz_sim_args.c — `resil sim`'s command line on arbitrary words: the
 * input, split at NUL bytes, is argv after "sim" (the scenario first, then
 * flags as `--name VALUE` or `--name=VALUE`), read by
 * resil_sim_command_parse() — every number, duration, budget layer and
 * policy list the simulator takes, and its validation — without running a
 * simulation.
 *
 * The properties: a refusal is status 125 with one message, on the stream
 * given, starting "resil sim: " (or the usage text when no scenario is
 * given); an accepted configuration still validates, and written back as
 * flags (durations in the parser's units, numbers to 17 digits, policies by
 * name) it parses to the very same configuration. The flag table below is
 * the specification of which flag sets which field.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_command.h"

#define MAX_ARGS 24
#define CAP 1024

#define OCC (1u << RESIL_SIM_OCC)
#define FAIL (1u << RESIL_SIM_FAILOVER)
#define META (1u << RESIL_SIM_METASTABLE)
#define LAYERS (1u << RESIL_SIM_LAYERS)
#define BROWN (1u << RESIL_SIM_BROWNOUT)
#define STACK (FAIL | META | LAYERS | BROWN)
#define TIMED (FAIL | META | BROWN)
#define ALL (OCC | STACK)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef enum kind { U32, U64, DOUBLE, DURATION, BUDGET_AT } kind;

typedef struct field {
    const char *flag;
    unsigned scenarios;
    kind kind;
    size_t offset;
} field;

#define F(name) offsetof(resil_sim_config, name)
static const field fields[] = {
    {"--seed", ALL, U64, F(seed)},
    {"--runs", ALL, U32, F(runs)},
    {"--base", ALL, DURATION, F(base)},
    {"--cap", ALL, DURATION, F(cap)},
    {"--clients", OCC | FAIL, U32, F(clients)},
    {"--net-mean", OCC, DURATION, F(net_mean)},
    {"--net-sd", OCC, DURATION, F(net_sd)},
    {"--rate", STACK, DOUBLE, F(rate)},
    {"--layers", STACK, U32, F(layers)},
    {"--attempts", STACK, U32, F(attempts)},
    {"--budget-at", STACK, BUDGET_AT, F(budget_at)},
    {"--requests", STACK, U32, F(requests)},
    {"--duration", TIMED, DURATION, F(duration)},
    {"--bin", TIMED, DURATION, F(bin)},
    {"--outage", TIMED, DURATION, F(outage)},
    {"--outage-start", TIMED, DURATION, F(outage_start)},
    {"--capacity", TIMED, DOUBLE, F(capacity)},
    {"--latency", TIMED, DURATION, F(latency)},
    {"--timeout", TIMED, DURATION, F(timeout)},
    {"--slowdown", META, DOUBLE, F(slowdown)},
    {"--limit", BROWN, U32, F(limit)},
};

static void check(int ok)
{
    if (!ok)
        abort();
}

static FILE *errout(char **text)
{
    static char buf[4096];
    static FILE *f;
    if (f == NULL && (f = fmemopen(buf, sizeof buf, "w")) == NULL)
        abort();
    rewind(f);
    memset(buf, 0, sizeof buf);
    *text = buf;
    return f;
}

static int split(char *text, size_t len, char **argv)
{
    int argc = 0;
    argv[argc++] = "sim";
    for (size_t i = 0; i < len && argc < MAX_ARGS;) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    return argc;
}

/* Status 0, 1 or 125, the message checked. */
static int parse(int argc, char **argv, resil_sim_config *c)
{
    char *msg;
    FILE *f = errout(&msg);
    int rc = resil_sim_command_parse(argc, argv, c, f);
    fflush(f);
    check(rc == 0 || rc == 1 || rc == 125);
    if (rc == 125)
        check(strncmp(msg, "resil sim: ", 11) == 0 || strncmp(msg, "usage: ", 7) == 0);
    else
        check(msg[0] == '\0');
    return rc;
}

static void write_value(const resil_sim_config *c, const field *fl, char *buf, size_t cap)
{
    const char *p = (const char *)c + fl->offset;
    uint32_t u;
    switch (fl->kind) {
    case U32:
        memcpy(&u, p, sizeof u);
        snprintf(buf, cap, "%u", (unsigned)u);
        return;
    case U64: {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, cap, "%llu", (unsigned long long)v);
        return;
    }
    case DOUBLE: {
        double d;
        memcpy(&d, p, sizeof d);
        snprintf(buf, cap, "%.17g", d);
        return;
    }
    case DURATION: {
        resil_duration d;
        memcpy(&d, p, sizeof d);
        check(resil_duration_format(d, buf, cap) < cap);
        return;
    }
    case BUDGET_AT:
        memcpy(&u, p, sizeof u);
        if (u == 0)
            snprintf(buf, cap, "all");
        else if (u == RESIL_SIM_INNERMOST)
            snprintf(buf, cap, "innermost");
        else
            snprintf(buf, cap, "%u", (unsigned)u);
        return;
    }
}

static void check_round_trip(const resil_sim_config *c)
{
    enum { WORDS = sizeof fields / sizeof fields[0] + 2 };
    static char words[WORDS][64];
    static char policies[RESIL_SIM_MAX_POLICIES * 49 + 16];
    char *argv[WORDS * 2 + 4];
    int argc = 0, w = 0;
    argv[argc++] = "sim";
    argv[argc++] = (char *)resil_sim_scenario_name(c->scenario);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!(fields[i].scenarios & (1u << c->scenario)))
            continue;
        argv[argc++] = (char *)fields[i].flag;
        write_value(c, &fields[i], words[w], sizeof words[w]);
        argv[argc++] = words[w++];
    }
    size_t n = (size_t)snprintf(policies, sizeof policies, "--policy=");
    for (size_t i = 0; i < c->npolicies; i++)
        n += (size_t)snprintf(policies + n, sizeof policies - n, "%s%s", i ? "," : "",
                              c->policies[i].name);
    argv[argc++] = policies;
    argv[argc] = NULL;
    resil_sim_config again;
    check(parse(argc, argv, &again) == 0);
    check(memcmp(&again, c, sizeof again) == 0);
}

/* What a user may type as a number: optional sign, digits with at most
 * one point (at least one digit), optional exponent. */
static bool decimal_shape(const char *t)
{
    size_t digits = 0, points = 0;
    if (*t == '+' || *t == '-')
        t++;
    for (; (*t >= '0' && *t <= '9') || *t == '.'; t++) {
        if (*t == '.')
            points++;
        else
            digits++;
    }
    if (digits == 0 || points > 1)
        return false;
    if (*t == 'e' || *t == 'E') {
        t++;
        if (*t == '+' || *t == '-')
            t++;
        if (*t < '0' || *t > '9')
            return false;
        while (*t >= '0' && *t <= '9')
            t++;
    }
    return *t == '\0';
}

static bool is_switch(const char *arg)
{
    return strcmp(arg, "--json") == 0 || strcmp(arg, "--progress") == 0 ||
           strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* Walk an accepted command line as the parser does: every value given to
 * a number flag was a decimal number. */
static void check_numbers(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        if (is_switch(argv[i]))
            continue;
        const char *eq = strchr(argv[i], '=');
        size_t len = eq != NULL ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        const char *value = eq != NULL ? eq + 1 : argv[++i];
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            if (fields[f].kind == DOUBLE && strlen(fields[f].flag) == len &&
                strncmp(fields[f].flag, argv[i - (eq == NULL)], len) == 0)
                check(decimal_shape(value));
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= CAP)
        return 0;
    char text[CAP];
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = split(text, size, argv);
    resil_sim_config c;
    if (parse(argc, argv, &c) != 0)
        return 0;
    check(resil_sim_config_validate(&c, NULL) == 0);
    check(c.npolicies >= 1 && c.npolicies <= RESIL_SIM_MAX_POLICIES);
    check(c.runs >= 1 && c.base >= 0 && c.cap >= 0);
    check_numbers(argc, argv);
    check_round_trip(&c);
    return 0;
}
