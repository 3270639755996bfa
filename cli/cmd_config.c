/*
 * cmd_config.c — `resil config check FILE`: validate a configuration (FILE
 * "-": standard input) and say what its pipelines will do in the worst case.
 *
 * It is a linter, so its exit status is the verdict a build script branches
 * on: 0 for a clean file, 1 for a file with errors (every one of them
 * printed on standard error, FILE:LINE:COLUMN first, the way compilers
 * write them, so editors jump to them; with --json, the errors are the
 * output and go to standard output), 2 with
 * --strict when the file is valid but the analysis has warnings, and 125
 * for a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "resil/config.h"

#define EXIT_INVALID 1
#define EXIT_WARNINGS 2

typedef struct check_opts {
    const char *file;
    bool json, strict;
    double rate;
} check_opts;

static void usage(FILE *out)
{
    fputs("usage: resil config check FILE [--json] [--rate RPS] [--strict]\n"
          "\n"
          "Validate a JSON configuration's Resilience section (every error, with its\n"
          "path and line:column) and analyse each pipeline: worst-case latency\n"
          "(attempts × attempt timeout + the waits), whether it fits the total timeout,\n"
          "the calls one request can make, Retry-After bounds, and warnings.\n"
          "\n"
          "      --json       one JSON object instead of text\n"
          "      --rate RPS   the expected requests per second: warn about ratio\n"
          "                   breakers that traffic cannot trip\n"
          "      --strict     exit 2 when the analysis has warnings\n"
          "  -h, --help       this text\n"
          "\n"
          "exit status: 0 valid, 1 errors, 2 warnings with --strict, 125 bad usage\n"
          "See docs/configuration.md for every key.\n",
          out);
}

/* 0 to check, 1 after --help, or RESIL_EINVAL. */
static int parse_options(check_opts *o, int argc, char **argv)
{
    args a;
    args_init(&a, "resil config check", argc, argv);
    memset(o, 0, sizeof *o);
    for (a.i = 1; a.i < argc; a.i++) {
        const char *arg = argv[a.i], *v;
        int m;
        if (args_flag(&a, "--help", "-h")) {
            usage(stdout);
            return 1;
        }
        if (args_flag(&a, "--json", NULL)) {
            o->json = true;
        } else if (args_flag(&a, "--strict", NULL)) {
            o->strict = true;
        } else if ((m = args_match(&a, "--rate", NULL, &v)) != 0) {
            if (m < 0 || args_double(&a, "--rate", v, 0, &o->rate) != 0)
                return RESIL_EINVAL;
        } else if (arg[0] == '-' && arg[1] != '\0') { /* "-" alone: standard input */
            return args_fail(&a, "unknown option '%s' (see resil config check --help)", arg);
        } else if (arg[0] == '\0') {
            return args_reject(&a, "FILE", "a file name ('-': standard input)", arg);
        } else if (o->file != NULL) {
            return args_fail(&a, "one FILE at a time, got '%s' and '%s'", o->file, arg);
        } else {
            o->file = arg;
        }
    }
    if (o->file == NULL)
        return args_fail(&a, "no FILE given: resil config check FILE");
    return 0;
}

/* Write through a buffer sized by a first, measuring call. */
typedef size_t (*write_fn)(const void *what, resil_config_format f, char *buf, size_t cap);

static void print(write_fn w, const void *what, resil_config_format f)
{
    size_t n = w(what, f, NULL, 0);
    char *buf = malloc(n + 1);
    if (buf == NULL) {
        fputs("resil config check: out of memory\n", stderr);
        return;
    }
    w(what, f, buf, n + 1);
    fputs(buf, stdout);
    free(buf);
}

static size_t write_report(const void *r, resil_config_format f, char *buf, size_t cap)
{
    return resil_config_report_write(r, f, buf, cap);
}

static size_t write_diags(const void *d, resil_config_format f, char *buf, size_t cap)
{
    return resil_config_diags_write(d, f, buf, cap);
}

static void print_errors(const check_opts *o, const resil_config_diags *d)
{
    if (o->json) {
        print(write_diags, d, RESIL_CONFIG_JSON);
        return;
    }
    const char *name = strcmp(o->file, "-") == 0 ? "(standard input)" : o->file;
    for (size_t i = 0; i < d->len; i++) {
        char line[RESIL_CONFIG_PATH_MAX + 300];
        resil_config_diag_format(&d->items[i], line, sizeof line);
        if (strcmp(d->items[i].path, o->file) == 0)
            fprintf(stderr, "%s\n", line);
        else
            fprintf(stderr, "%s%s%s\n", name, d->items[i].path[0] ? ": " : ":", line);
    }
    size_t n = d->len + d->dropped;
    if (d->dropped)
        fprintf(stderr, "... and %zu more\n", d->dropped);
    fprintf(stderr, "%zu error%s\n", n, n == 1 ? "" : "s");
}

/* FILE, or standard input for "-". */
static int load(const char *file, resil_config **c, resil_config_diags *d)
{
    if (strcmp(file, "-") != 0)
        return resil_config_load_file(file, c, d);
    char *text;
    size_t len;
    int read = args_slurp(stdin, &text, &len);
    if (read != 0)
        return read;
    int rc = resil_config_parse(text, len, c, d);
    free(text);
    return rc;
}

static int check(const check_opts *o)
{
    resil_config *c;
    resil_config_diags d = {0};
    if (load(o->file, &c, &d) != 0) {
        print_errors(o, &d);
        resil_config_diags_free(&d);
        return EXIT_INVALID;
    }
    resil_config_report r;
    resil_config_analysis_opts ao = {.rate = o->rate};
    int rc = resil_config_analyze(c, &ao, &r);
    resil_config_free(c);
    if (rc != 0) {
        fprintf(stderr, "resil config check: %s\n", resil_strerror(rc));
        return EXIT_INVALID;
    }
    print(write_report, &r, o->json ? RESIL_CONFIG_JSON : RESIL_CONFIG_TEXT);
    bool warned = r.warnings.len + r.warnings.dropped > 0;
    resil_config_report_free(&r);
    return o->strict && warned ? EXIT_WARNINGS : 0;
}

int cmd_config(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RESIL_EXIT_USAGE;
    }
    if (args_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "resil config: unknown command '%s' (the one command is 'check')\n",
                argv[1]);
        return RESIL_EXIT_USAGE;
    }
    check_opts o;
    int rc = parse_options(&o, argc - 1, argv + 1);
    if (rc != 0)
        return rc > 0 ? 0 : RESIL_EXIT_USAGE;
    return check(&o);
}
