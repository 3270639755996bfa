/*
 * sim_command.h — `resil sim`'s command line, over the simulator library
 * (src/sim/sim.h). Kept in cli/ with the other subcommands, so the
 * simulator library holds no command-line code.
 */
#ifndef RESIL_CLI_SIM_COMMAND_H
#define RESIL_CLI_SIM_COMMAND_H

#include <stdio.h>

#include "sim.h"

/* `resil sim SCENARIO [flags]`: argv[0] is "sim". Returns the exit status
 * (0, or 125 for a bad flag or value, or 1 when a run or a write fails). */
int resil_sim_command(int argc, char **argv, FILE *out, FILE *errout);

/* resil_sim_command's reading of its flags alone, running nothing: 0 with
 * *out the validated configuration, 1 when --help was asked (*out is then
 * unspecified), or 125 after writing the reason, naming the flag, to
 * errout. The command is this, then the run; tests and the fuzz target
 * call it to reach the parsers without the simulation. */
int resil_sim_command_parse(int argc, char **argv, resil_sim_config *out, FILE *errout);

#endif
