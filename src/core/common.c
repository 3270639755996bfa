/*
 * common.c — error names and the error report. One table (the X-macro in
 * common.h) feeds both the enum and resil_strerror, so they cannot drift.
 */
#include <stdarg.h>
#include <stdio.h>

#include "resil/common.h"

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
