/*
 * common.h — what every resil header shares: the export macro, the C++
 * guards, the error codes and the error report filled by constructors.
 *
 * Errors follow libuv and curl: functions return int, 0 for success or a
 * negative RESIL_E* code, and resil_strerror() names the code. There is no
 * global or thread-local "last error": a function that can fail for a reason
 * worth a sentence (a constructor rejecting an option, a parser rejecting
 * text) takes an optional resil_err* and writes the sentence there, naming
 * the offending field. The report is a fixed-size value so that filling it
 * never allocates and it can live on the caller's stack.
 */
#ifndef RESIL_COMMON_H
#define RESIL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define RESIL_BEGIN_DECLS extern "C" {
#define RESIL_END_DECLS }
#else
#define RESIL_BEGIN_DECLS
#define RESIL_END_DECLS
#endif

#if defined(RESIL_STATIC)
#define RESIL_API
#elif defined(_WIN32)
#ifdef RESIL_BUILDING
#define RESIL_API __declspec(dllexport)
#else
#define RESIL_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define RESIL_API __attribute__((visibility("default")))
#else
#define RESIL_API
#endif

#if defined(__GNUC__)
#define RESIL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define RESIL_PRINTF(fmt, args)
#endif

#define RESIL_VERSION_MAJOR 0
#define RESIL_VERSION_MINOR 1
#define RESIL_VERSION_PATCH 0
#define RESIL_VERSION_STRING "0.1.0"

RESIL_BEGIN_DECLS

/* X-macro so that the enum and resil_strerror() can never disagree. */
#define RESIL_ERRNO_MAP(X)                                                   \
    X(EINVAL, -1, "invalid argument")                                        \
    X(ENOMEM, -2, "out of memory")                                           \
    X(ERANGE, -3, "value out of range")                                      \
    X(ESYNTAX, -4, "malformed text")                                         \
    X(ECANCELED, -5, "operation cancelled")                                  \
    X(ETIMEDOUT, -6, "timed out")                                            \
    X(EREJECTED, -7, "rejected")                                             \
    X(ENOTIDEMPOTENT, -8, "operation is not idempotent")                     \
    X(EBUSY, -9, "resource busy")                                            \
    X(ENOTFOUND, -10, "not found")                                           \
    X(EIO, -11, "input/output error")                                        \
    X(ESYS, -12, "system call failed")                                       \
    X(EUNSUPPORTED, -13, "not supported")                                    \
    X(EEXIST, -14, "already exists")                                         \
    X(ESTATE, -15, "wrong state for this call")                              \
    X(EBACKEND, -16, "backend error")

enum {
    RESIL_OK = 0,
#define RESIL__ERRNO_ENUM(name, value, text) RESIL_##name = (value),
    RESIL_ERRNO_MAP(RESIL__ERRNO_ENUM)
#undef RESIL__ERRNO_ENUM
};

/* A human-readable name for a return code; never NULL. */
RESIL_API const char *resil_strerror(int code);

/* One slot of the room a public struct keeps for members added under the
 * same SONAME (docs/abi.md): 8 bytes, 8-aligned, wide enough for a pointer,
 * a function pointer, an int64_t or a double. The library zeroes the slots
 * it owns; callers leave them alone (*_default() and `= {0}` zero them). */
typedef union resil_reserved {
    uint64_t u;
    double d;
    void *p;
    void (*fn)(void);
} resil_reserved;

/* The report a failing constructor or parser fills in, when given one. */
typedef struct resil_err {
    int code;          /* the same negative code the function returned */
    char message[256]; /* e.g. "breaker.failure_ratio must be in (0,1], got 1.5" */
} resil_err;

/* Fill *err (when err is non-NULL) and return code. For implementers. */
RESIL_API int resil_err_set(resil_err *err, int code, const char *fmt, ...)
    RESIL_PRINTF(3, 4);

/* The library's version as "MAJOR.MINOR.PATCH". */
RESIL_API const char *resil_version(void);

RESIL_END_DECLS

#endif
