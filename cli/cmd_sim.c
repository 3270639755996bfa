/*
 * cmd_sim.c — `resil sim`: the retry-storm simulator. The command itself
 * is sim_command.c (library resil_cli_sim) so that its tests run it
 * in-process; the tool only gives it the process's streams.
 */
#include <stdio.h>

#include "commands.h"
#include "sim_command.h"

int cmd_sim(int argc, char **argv)
{
    return resil_sim_command(argc, argv, stdout, stderr);
}
