/*
 * args.c — reading one option and wording its rejection, for every
 * subcommand.
 *
 * Numbers are parsed strictly (strtoull/strtod plus a check that the whole
 * text was used, no sign where none belongs, no NaN): the tool's job is to
 * run commands in production scripts, and "--attempts 3x" silently meaning 3
 * would hide a typo until the day it matters.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

void args_init(args *a, const char *cmd, int argc, char **argv)
{
    a->argc = argc;
    a->argv = argv;
    a->i = 1;
    a->cmd = cmd;
    a->err = NULL;
}

int args_fail(const args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (a->err != NULL) {
        char msg[sizeof a->err->message];
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        return resil_err_set(a->err, RESIL_EINVAL, "%s: %s", a->cmd, msg);
    }
    fprintf(stderr, "%s: ", a->cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return RESIL_EINVAL;
}

bool args_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int args_reject(const args *a, const char *option, const char *what,
                const char *value)
{
    return args_fail(a, "%s must be %s, got '%s'", option, what, value);
}

/* "--delay=1s" against "--delay": the text after '=', or NULL. */
static const char *inline_value(const char *arg, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0 || arg[n] != '=')
        return NULL;
    return arg + n + 1;
}

static bool names(const char *arg, const char *long_name, const char *short_name)
{
    return strcmp(arg, long_name) == 0 ||
           (short_name != NULL && strcmp(arg, short_name) == 0);
}

int args_match(args *a, const char *long_name, const char *short_name,
               const char **value)
{
    const char *arg = a->argv[a->i];
    const char *v = inline_value(arg, long_name);
    if (v != NULL) {
        *value = v;
        return 1;
    }
    if (!names(arg, long_name, short_name))
        return 0;
    if (a->i + 1 >= a->argc)
        return args_fail(a, "%s needs a value", long_name);
    a->i++;
    *value = a->argv[a->i];
    return 1;
}

bool args_flag(args *a, const char *long_name, const char *short_name)
{
    return names(a->argv[a->i], long_name, short_name);
}

int args_nonempty(const args *a, const char *option, const char *what, const char *v,
                  const char **out)
{
    if (v[0] == '\0')
        return args_reject(a, option, what, v);
    *out = v;
    return 0;
}

/* Letters and digits by range: the gateway asks this of every request
 * header's name. */
static bool token_char(unsigned char c)
{
    return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

bool args_token(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!token_char((unsigned char)s[i]))
            return false;
    }
    return len > 0;
}

bool args_whole(const char *text, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE)
        return false;
    *out = (uint64_t)v;
    return true;
}

int args_uint64(const args *a, const char *option, const char *text,
                uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (!args_whole(text, &v) || v < min || v > max) {
        char what[96];
        snprintf(what, sizeof what, "a whole number in [%llu, %llu]",
                 (unsigned long long)min, (unsigned long long)max);
        return args_reject(a, option, what, text);
    }
    *out = v;
    return 0;
}

/* What strtod reads, less its liberties: leading spaces, hexadecimal,
 * "inf" and "nan" are not numbers a user means to type. */
static bool decimal_text(const char *t)
{
    if (*t == '+' || *t == '-')
        t++;
    if (!((*t >= '0' && *t <= '9') || *t == '.'))
        return false;
    return strpbrk(t, "xX") == NULL;
}

int args_double(const args *a, const char *option, const char *text,
                double min, double *out)
{
    char what[64];
    snprintf(what, sizeof what, "a number >= %g", min);
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (!decimal_text(text) || end == text || *end != '\0' || errno == ERANGE ||
        !isfinite(v) || v < min)
        return args_reject(a, option, what, text);
    *out = v;
    return 0;
}

int args_rate(const args *a, const char *option, const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!decimal_text(text) || end == text || *end != '\0' || !(v >= 0 && v <= 1))
        return args_reject(a, option, "a rate in [0, 1]", text);
    *out = v;
    return 0;
}

int args_duration(const args *a, const char *option, const char *text,
                  bool positive, resil_duration *out)
{
    resil_err err;
    resil_duration d;
    if (resil_duration_parse_cstr(text, &d, &err) != 0)
        return args_fail(a, "%s must be a duration like 250ms, 2s or 1m30s, "
                            "got '%s' (%s)", option, text, err.message);
    if (positive && d <= 0)
        return args_reject(a, option, "a duration greater than 0", text);
    *out = d;
    return 0;
}

int args_timeout(const args *a, const char *option, const char *text,
                 resil_duration *out)
{
    if (strcmp(text, "none") == 0) {
        *out = 0;
        return 0;
    }
    resil_err err;
    resil_duration d;
    if (resil_duration_parse_cstr(text, &d, &err) != 0 || d < 0)
        return args_fail(a, "%s must be a duration like 250ms, 2s or 1m30s, or 'none' "
                            "(0 also switches it off), got '%s'", option, text);
    *out = d;
    return 0;
}

int args_slurp(FILE *in, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        return RESIL_ENOMEM;
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, in)) > 0) {
        n += got;
        if (n == cap - 1) {
            char *grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                free(buf);
                return RESIL_ENOMEM;
            }
            buf = grown;
            cap *= 2;
        }
    }
    if (ferror(in)) {
        free(buf);
        return RESIL_EIO;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}
