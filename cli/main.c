/*
 * main.c — the resil tool's entry point: a table from subcommand name to
 * function. Everything else lives in the subcommand's own file.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "resil.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "run a command, retrying it under a policy"},
    {"demo", cmd_demo, "print the reference examples through the real executor"},
    {"sim", cmd_sim, "simulate what retry policies do to a struggling service"},
#ifdef RESIL_CLI_REDIS
    {"breaker", cmd_breaker, "look at or steer the breakers a fleet shares in Redis"},
#endif
#ifdef RESIL_CLI_GATEWAY
    {"gateway", cmd_gateway, "an HTTP proxy that gives a service idempotency keys"},
#endif
#ifdef RESIL_CLI_HTTP
    {"http", cmd_http, "fetch URLs with libcurl, retrying as curl --retry should"},
#endif
#ifdef RESIL_CLI_CONFIG
    {"config", cmd_config, "check a configuration file and analyse its pipelines"},
#endif
};

static void usage(FILE *out)
{
    fprintf(out, "usage: resil COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'resil COMMAND --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RESIL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("resil %s\n", resil_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "resil: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return RESIL_EXIT_USAGE;
}
