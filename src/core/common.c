/*
 * common.c — error names, the error report, and the shared wording of
 * option checks. One table (the X-macro in common.h) feeds both the enum
 * and resil_strerror, so they cannot drift; one function words a rejected
 * duration and one looks a name up, for every component (internal.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *resil_strerror(int code)
{
    switch (code) {
    case RESIL_OK:
        return "success";
#define RESIL__ERRNO_CASE(name, value, text) \
    case RESIL_##name:                       \
        return text;
        RESIL_ERRNO_MAP(RESIL__ERRNO_CASE)
#undef RESIL__ERRNO_CASE
    default:
        return "unknown error";
    }
}

int resil_err_set(resil_err *err, int code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

const char *resil_version(void) { return RESIL_VERSION_STRING; }

/* ---- shared by the components (internal.h) ------------------------------ */

int resil__bad_duration(resil_err *err, const char *field, const char *rule,
                        resil_duration d)
{
    char text[32];
    resil_duration_format(d, text, sizeof text);
    return resil_err_set(err, RESIL_EINVAL, "%s must be %s, got %s", field, rule, text);
}

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static bool same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        if (ascii_lower((unsigned char)*a) != ascii_lower((unsigned char)*b))
            return false;
    }
    return *a == *b;
}

int resil__name_index(const char *const *names, size_t count, const char *s)
{
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < count; i++) {
        if (same_name(names[i], s))
            return (int)i;
    }
    return -1;
}

const char *resil__name_at(const char *const *names, size_t count, unsigned i)
{
    return i < count ? names[i] : "unknown";
}

void resil__lower_copy(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] != '\0' && i + 1 < cap; i++)
        dst[i] = (char)ascii_lower((unsigned char)src[i]);
    dst[i] = '\0';
}
