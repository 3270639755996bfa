/* cmd_run.c — placeholder replaced by the real implementation. */
#include <stdio.h>
#include "commands.h"
int cmd_run(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "resil run: not yet\n"); return RESIL_EXIT_USAGE; }
