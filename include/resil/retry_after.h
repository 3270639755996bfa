/*
 * retry_after.h — parsing a server's Retry-After value.
 *
 * Our own parser, because the value comes from the network: it reads exactly
 * `len` bytes (no NUL needed, never past the end), accepts both forms of RFC
 * 9110 — delta-seconds and an HTTP-date in any of its three historical
 * formats (IMF-fixdate, RFC 850, asctime) — and turns anything else into a
 * distinct error rather than a guess. Optional surrounding spaces/tabs are
 * allowed, as in a header field value. It is fuzzed (tests/fuzz/).
 *
 * The grammar is taken strictly: day and month names are case-sensitive,
 * fields have their exact widths and single-space separators, the zone is
 * "GMT", the day name must be the date's weekday, the day must exist in its
 * month (leap years included), hour < 24, minute < 60 and second <= 60 (a
 * leap second reads as the next minute's first second).
 */
#ifndef RESIL_RETRY_AFTER_H
#define RESIL_RETRY_AFTER_H

#include "time.h"

RESIL_BEGIN_DECLS

/*
 * Parse a Retry-After value into a wait. `wall_now_ns` is the current Unix
 * time in ns (resil_clock_wall_now). A date in the past gives 0, and so does
 * a negative delta: "-" followed by digits ("-5", "-0"); other signs or
 * shapes ("+5", "--5", "- 5", "1.5", "5s") are RESIL_ESYNTAX. A delta or a
 * date too far ahead for resil_duration saturates at RESIL_DURATION_MAX.
 * RFC 850 two-digit years are read against wall_now_ns as in
 * resil_http_date_parse_at. Returns 0, RESIL_ESYNTAX for text that is
 * neither form, or RESIL_EINVAL when out is NULL.
 */
RESIL_API int resil_retry_after_parse(const char *text, size_t len,
                                      int64_t wall_now_ns, resil_duration *out);

/*
 * Parse a millisecond wait, as the retry-after-ms and x-ms-retry-after-ms
 * headers carry it (Azure's services and SDKs): whole milliseconds, with
 * the same rules as delta-seconds above — optional surrounding spaces,
 * "-" 1*DIGIT gives 0, no "+", fraction or unit, saturating. Returns 0,
 * RESIL_ESYNTAX, or RESIL_EINVAL when out is NULL.
 */
RESIL_API int resil_retry_after_ms_parse(const char *text, size_t len, resil_duration *out);

/*
 * Parse an HTTP-date (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994") to
 * Unix seconds. Day names must match the date. Having no "now", it reads an
 * RFC 850 two-digit year as POSIX strptime's %y does: 69–99 are 1969–1999,
 * 00–68 are 2000–2068. Returns 0, RESIL_ESYNTAX, or RESIL_EINVAL when
 * unix_seconds is NULL.
 */
RESIL_API int resil_http_date_parse(const char *text, size_t len,
                                    int64_t *unix_seconds);

/*
 * The same, reading an RFC 850 two-digit year by RFC 9110's rule against
 * `now_unix_seconds`: the year with those last two digits that is at most
 * 50 years after now's year (so one that would be more than 50 years in the
 * future is the previous century's). Other forms parse as above.
 */
RESIL_API int resil_http_date_parse_at(const char *text, size_t len,
                                       int64_t now_unix_seconds,
                                       int64_t *unix_seconds);

/*
 * Format Unix seconds as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT",
 * 29 characters). Like snprintf: writes at most cap bytes including the NUL
 * (cap >= 30 holds the whole date) and returns 29. Seconds outside years
 * 0000–9999, which the format cannot spell, write "" and return 0.
 */
RESIL_API size_t resil_http_date_format(int64_t unix_seconds, char *buf,
                                        size_t cap);

RESIL_END_DECLS

#endif
