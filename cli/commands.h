/*
 * commands.h — the resil tool's subcommands. Each lives in its own
 * cmd_NAME.c and has the same shape: it parses its own options (rejecting
 * bad values by name, exit 125) and returns the process exit status.
 */
#ifndef RESIL_CLI_COMMANDS_H
#define RESIL_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_breaker(int argc, char **argv);
int cmd_gateway(int argc, char **argv);
int cmd_http(int argc, char **argv);
int cmd_config(int argc, char **argv);

/* Exit status for resil's own errors (bad options), as timeout(1) uses. */
#define RESIL_EXIT_USAGE 125

#endif
