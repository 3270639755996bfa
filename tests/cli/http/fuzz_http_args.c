/*
 * fuzz_http_args.c — `resil http`'s whole command line on arbitrary words:
 * the input, split at NUL bytes, is argv after "http", read by the parser
 * the tool runs (short-option bundles, curl's flags, resil's, the policy's,
 * the -w format, --resolve, --data-urlencode, the cross-option checks).
 *
 * The properties: a rejection is RESIL_EINVAL with a message in args.err
 * beginning "resil http: ", never on stderr; an acceptance has between 1
 * and MAX_URLS URLs, no more outputs than URLs, and a timeout pair that
 * fits; and freeing releases everything (ASan's leak check). Inputs that
 * would make the parser read a file ('@', a path under /dev, /proc or /sys,
 * --config) are skipped, and standard input is /dev/null: a fuzzer must
 * not block.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "http_opts.h"

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool reads_outside(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i += strlen(text + i) + 1) {
        const char *w = text + i;
        if (strchr(w, '@') != NULL || strstr(w, "/dev") != NULL ||
            strstr(w, "/proc") != NULL || strstr(w, "/sys") != NULL ||
            strstr(w, "--config") != NULL)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    static bool quiet_stdin;
    if (!quiet_stdin)
        quiet_stdin = freopen("/dev/null", "r", stdin) != NULL;
    if (reads_outside(text, size)) {
        free(text);
        return 0;
    }
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "http";
    for (size_t i = 0; i < size && argc < MAX_ARGS; i += strlen(text + i) + 1)
        argv[argc++] = text + i;
    argv[argc] = NULL;
    http_opts o;
    resil_err err = {0};
    int rc = http_opts_parse(&o, argc, argv, &err);
    if (rc < 0) {
        check(rc == RESIL_EINVAL && err.code == RESIL_EINVAL);
        check(strncmp(err.message, "resil http: ", 12) == 0);
    } else if (rc == 0) {
        check(o.nurls >= 1 && o.nurls <= MAX_URLS && o.noutputs <= o.nurls);
        check(o.po.attempt_timeout >= 0 && o.po.policy.max_total >= 0);
        check(o.po.attempt_timeout == 0 || o.po.policy.max_total == 0 ||
              o.po.attempt_timeout <= o.po.policy.max_total);
    }
    http_opts_free(&o);
    free(text);
    return 0;
}
