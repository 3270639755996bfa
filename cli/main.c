/*
 * main.c — the resil tool's entry point: a table from subcommand name to
 * function. Everything else lives in the subcommand's own file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
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
    fprintf(out, "\n"
                 "  -h, --help      this text\n"
                 "  -V, --version   resil's version\n"
                 "\n"
                 "'resil help COMMAND' or 'resil COMMAND --help' describes a command's "
                 "options.\n");
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    }
    return NULL;
}

/* `resil help [COMMAND]`: the tool's text, or the command's --help. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    const command *c = find(argv[2]);
    if (c == NULL) {
        fprintf(stderr, "resil: help: unknown command '%s'\n", argv[2]);
        usage(stderr);
        return RESIL_EXIT_USAGE;
    }
    char *sub[] = {argv[2], "--help", NULL};
    return c->fn(2, sub);
}

/* What stdio still holds for standard output is written before the
 * status is final, and a failure there (a full disk, a closed pipe when
 * SIGPIPE is ignored) fails the run rather than losing the output
 * silently. A command that failed already keeps its status (resil http
 * has said what its output could not take, with curl's 23). */
static int flushed(int status)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    if (status != 0)
        return status;
    fprintf(stderr, "resil: cannot write standard output: %s\n",
            errno != 0 ? strerror(errno) : "write error");
    return 1;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RESIL_EXIT_USAGE;
    }
    if (args_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("resil %s\n", resil_version());
        return 0;
    }
    if (strcmp(argv[1], "help") == 0)
        return help(argc, argv);
    const command *c = find(argv[1]);
    if (c != NULL)
        return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "resil: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return RESIL_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    return flushed(dispatch(argc, argv));
}
