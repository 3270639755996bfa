/*
 * simtest.h — what the `resil sim` tests share: the command run in-process
 * on memory streams, its exit status and both streams kept.
 */
#ifndef RESIL_SIMTEST_H
#define RESIL_SIMTEST_H

#include "test.h"

#include "sim_command.h"

typedef struct captured {
    int status;
    char *out;
    char *err;
} captured;

static inline captured sim(const char *const *args)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"sim";
    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    captured c = {0, NULL, NULL};
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&c.out, &out_len);
    FILE *err = open_memstream(&c.err, &err_len);
    c.status = resil_sim_command(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return c;
}

static inline void release(captured *c)
{
    free(c->out);
    free(c->err);
}

#define SIM(...) sim((const char *const[]){__VA_ARGS__, NULL})

#endif
