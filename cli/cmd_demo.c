/* cmd_demo.c — placeholder replaced by the real implementation. */
#include <stdio.h>
#include "commands.h"
int cmd_demo(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "resil demo: not yet\n"); return RESIL_EXIT_USAGE; }
