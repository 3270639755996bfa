/*
 * fuzz_retry_after.c — Retry-After parsing of arbitrary bytes.
 *
 * The properties, checked with a fixed "now" so every run is repeatable:
 * the parser reads only the bytes it is given (ASan sees the rest), any
 * failure is RESIL_ESYNTAX and leaves the output untouched, a wait is never
 * negative, and every date that parses formats back to an IMF-fixdate that
 * parses to the same second. The one date that parses but cannot be
 * formatted is the leap second ending year 9999, which reads as the first
 * second of year 10000.
 */
#include <stdint.h>
#include <stdlib.h>

#include "resil/retry_after.h"

#define NOW_S INT64_C(1749988800) /* 2025-06-15 12:00:00 UTC */
#define NOW_NS (NOW_S * INT64_C(1000000000) + INT64_C(123456789))
#define UNTOUCHED INT64_C(-42)
#define FIRST_SECOND_OF_10000 INT64_C(253402300800)

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_round_trip(int64_t when)
{
    char buf[30];
    int64_t back = UNTOUCHED;
    if (resil_http_date_format(when, buf, sizeof buf) == 0) {
        check(when == FIRST_SECOND_OF_10000);
        return;
    }
    check(resil_http_date_parse(buf, 29, &back) == 0);
    check(back == when);
}

static void check_date(const char *text, size_t size)
{
    int64_t when = UNTOUCHED;
    int rc = resil_http_date_parse_at(text, size, NOW_S, &when);
    check(rc == 0 || (rc == RESIL_ESYNTAX && when == UNTOUCHED));
    if (rc == 0)
        check_round_trip(when);

    when = UNTOUCHED;
    rc = resil_http_date_parse(text, size, &when);
    check(rc == 0 || (rc == RESIL_ESYNTAX && when == UNTOUCHED));
    if (rc == 0)
        check_round_trip(when);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    resil_duration wait = UNTOUCHED;
    int rc = resil_retry_after_parse(text, size, NOW_NS, &wait);
    check(rc == 0 || rc == RESIL_ESYNTAX);
    check(rc == 0 ? wait >= 0 : wait == UNTOUCHED);
    check_date(text, size);
    wait = UNTOUCHED;
    rc = resil_retry_after_ms_parse(text, size, &wait);
    check(rc == 0 || rc == RESIL_ESYNTAX);
    check(rc == 0 ? wait >= 0 : wait == UNTOUCHED);
    return 0;
}
