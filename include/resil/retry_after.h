/*
 * retry_after.h — parsing a server's Retry-After value.
 *
 * Our own parser, because the value comes from the network: it reads exactly
 * `len` bytes (no NUL needed, never past the end), accepts both forms of RFC
 * 9110 — delta-seconds and an HTTP-date in any of its three historical
 * formats (IMF-fixdate, RFC 850, asctime) — and turns anything else into a
 * distinct error rather than a guess. Optional surrounding spaces/tabs are
 * allowed, as in a header field value. It is fuzzed (tests/fuzz/).
 */
#ifndef RESIL_RETRY_AFTER_H
#define RESIL_RETRY_AFTER_H

#include "time.h"

RESIL_BEGIN_DECLS

/*
 * Parse a Retry-After value into a wait. `wall_now_ns` is the current Unix
 * time in ns (resil_clock_wall_now). A date in the past, or "-5", gives 0.
 * A delta too large for resil_duration saturates at RESIL_DURATION_MAX.
 * Returns 0, or RESIL_ESYNTAX for text that is neither form.
 */
RESIL_API int resil_retry_after_parse(const char *text, size_t len,
                                      int64_t wall_now_ns, resil_duration *out);

/*
 * Parse an HTTP-date (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994") to
 * Unix seconds. Day names must match the date. Returns 0 or RESIL_ESYNTAX.
 */
RESIL_API int resil_http_date_parse(const char *text, size_t len,
                                    int64_t *unix_seconds);

/* Format Unix seconds as an IMF-fixdate into buf (cap >= 30). */
RESIL_API size_t resil_http_date_format(int64_t unix_seconds, char *buf,
                                        size_t cap);

RESIL_END_DECLS

#endif
