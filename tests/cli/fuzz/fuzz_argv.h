/*
 * fuzz_argv.h — a fuzz input as a command line: NUL-separated words after
 * "resil fuzz", as the command-line targets read theirs.
 */
#ifndef RESIL_FUZZ_ARGV_H
#define RESIL_FUZZ_ARGV_H

#include <string.h>

/* Split text (NUL-terminated words, packed, text[len] == '\0') into argv
 * after "resil fuzz": at most max words in all; argv[argc] is NULL. */
static inline int fuzz_split(char *text, size_t len, char **argv, int max)
{
    int argc = 0;
    argv[argc++] = "resil fuzz";
    for (size_t i = 0; i < len && argc < max;) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    return argc;
}

#endif
