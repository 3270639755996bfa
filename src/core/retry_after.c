/*
 * retry_after.c — a server's Retry-After value and the HTTP-dates inside it.
 *
 * The text comes from the network, so the parser is a cursor over exactly
 * `len` bytes that accepts RFC 9110's grammar and nothing else: no strptime
 * (locale-dependent, wants a NUL, accepts loose forms) and no timegm (not in
 * C11, and time_t's range varies). Anything the grammar does not produce is
 * RESIL_ESYNTAX rather than a guess, because a guessed wait is worse than the
 * caller's own backoff.
 *
 * Calendar arithmetic is Howard Hinnant's days-from-civil in int64. The
 * grammar allows only four-digit years (two-digit RFC 850 years land within
 * a century of a clamped "now"), so every intermediate value stays far from
 * overflow; the only products that could overflow, seconds to nanoseconds,
 * saturate.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "resil/retry_after.h"

#define SECONDS_PER_DAY INT64_C(86400)
#define NS_PER_SECOND INT64_C(1000000000)
/* The range an IMF-fixdate can spell: 0000-01-01 to 9999-12-31 23:59:59. */
#define FIRST_FORMATTABLE INT64_C(-62167219200)
#define LAST_FORMATTABLE INT64_C(253402300799)
/* resil_http_date_parse has no "now": it reads two-digit years as POSIX
 * strptime's %y does, 69–99 as 19xx and 00–68 as 20xx, i.e. the window
 * ending in 2068. */
#define POSIX_WINDOW_LAST_YEAR 2068
/* RFC 9110: a two-digit year more than 50 years ahead is the past century. */
#define RFC850_YEARS_AHEAD 50

static const char *const short_days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const long_days[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                        "Thursday", "Friday", "Saturday"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* ---- calendar ------------------------------------------------------------- */

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int64_t y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1–12). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = resil__floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

typedef struct civil {
    int64_t year;
    int month, day; /* 1-based */
} civil;

static civil civil_from_days(int64_t z)
{
    z += 719468;
    int64_t era = resil__floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    civil c;
    c.day = (int)(doy - (153 * mp + 2) / 5 + 1);
    c.month = (int)(mp < 10 ? mp + 3 : mp - 9);
    c.year = yoe + era * 400 + (c.month <= 2);
    return c;
}

/* 0 = Sunday; 1970-01-01 was a Thursday. */
static int weekday(int64_t days) { return (int)resil__floor_mod(days + 4, 7); }

/* The year ending in `yy` that is the latest one not after `last_year`. */
static int64_t year_in_window(int yy, int64_t last_year)
{
    return last_year - resil__floor_mod(last_year - yy, 100);
}

static int64_t year_of(int64_t unix_seconds)
{
    if (unix_seconds < 0)
        unix_seconds = 0;
    if (unix_seconds > LAST_FORMATTABLE)
        unix_seconds = LAST_FORMATTABLE;
    return civil_from_days(resil__floor_div(unix_seconds, SECONDS_PER_DAY)).year;
}

/* ---- cursor --------------------------------------------------------------- */

typedef struct cursor {
    const char *p, *end;
} cursor;

static bool is_ows(char c) { return c == ' ' || c == '\t'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static cursor trimmed(const char *text, size_t len)
{
    cursor c = {text, text + len};
    while (c.p < c.end && is_ows(*c.p))
        c.p++;
    while (c.end > c.p && is_ows(c.end[-1]))
        c.end--;
    return c;
}

static bool at_end(const cursor *c) { return c->p == c->end; }

static bool peek(const cursor *c, char ch) { return c->p < c->end && *c->p == ch; }

static bool eat(cursor *c, char ch)
{
    if (!peek(c, ch))
        return false;
    c->p++;
    return true;
}

static bool eat_word(cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* Exactly `count` digits. */
static bool eat_digits(cursor *c, int count, int *out)
{
    int v = 0;
    for (int i = 0; i < count; i++) {
        if (c->p == c->end || !is_digit(*c->p))
            return false;
        v = v * 10 + (*c->p++ - '0');
    }
    *out = v;
    return true;
}

/* One of the three-letter `names`, case-sensitive; its index or -1. */
static int eat_name3(cursor *c, const char *const *names, int count)
{
    if (c->end - c->p < 3)
        return -1;
    for (int i = 0; i < count; i++) {
        const char *n = names[i];
        if (c->p[0] == n[0] && c->p[1] == n[1] && c->p[2] == n[2]) {
            c->p += 3;
            return i;
        }
    }
    return -1;
}

/* ---- HTTP-date ------------------------------------------------------------ */

typedef struct http_date {
    int wday; /* as written */
    int64_t year;
    int month, day, hour, minute, second;
} http_date;

static bool eat_month(cursor *c, http_date *d)
{
    int m = eat_name3(c, months, 12);
    d->month = m + 1;
    return m >= 0;
}

/* time-of-day = hour ":" minute ":" second, each 2DIGIT */
static bool eat_time(cursor *c, http_date *d)
{
    return eat_digits(c, 2, &d->hour) && eat(c, ':') && eat_digits(c, 2, &d->minute) &&
           eat(c, ':') && eat_digits(c, 2, &d->second);
}

static bool eat_year4(cursor *c, http_date *d)
{
    int y;
    if (!eat_digits(c, 4, &y))
        return false;
    d->year = y;
    return true;
}

/* IMF-fixdate after the day name: ", 06 Nov 1994 08:49:37 GMT" */
static bool imf_fixdate(cursor *c, http_date *d)
{
    return eat(c, ',') && eat(c, ' ') && eat_digits(c, 2, &d->day) && eat(c, ' ') &&
           eat_month(c, d) && eat(c, ' ') && eat_year4(c, d) && eat(c, ' ') && eat_time(c, d) &&
           eat(c, ' ') && eat_word(c, "GMT");
}

/* rfc850-date after the long day name: ", 06-Nov-94 08:49:37 GMT" */
static bool rfc850_date(cursor *c, http_date *d, int64_t last_year)
{
    int yy;
    if (!(eat(c, ',') && eat(c, ' ') && eat_digits(c, 2, &d->day) && eat(c, '-') &&
          eat_month(c, d) && eat(c, '-') && eat_digits(c, 2, &yy)))
        return false;
    d->year = year_in_window(yy, last_year);
    return eat(c, ' ') && eat_time(c, d) && eat(c, ' ') && eat_word(c, "GMT");
}

/* asctime-date after the day name: " Nov  6 08:49:37 1994"; the day is
 * 2DIGIT or SP DIGIT. */
static bool asctime_date(cursor *c, http_date *d)
{
    if (!(eat(c, ' ') && eat_month(c, d) && eat(c, ' ')))
        return false;
    bool day = eat(c, ' ') ? eat_digits(c, 1, &d->day) : eat_digits(c, 2, &d->day);
    return day && eat(c, ' ') && eat_time(c, d) && eat(c, ' ') && eat_year4(c, d);
}

static bool read_http_date(cursor *c, http_date *d, int64_t last_year)
{
    d->wday = eat_name3(c, short_days, 7);
    if (d->wday < 0)
        return false;
    if (peek(c, ','))
        return imf_fixdate(c, d);
    if (peek(c, ' '))
        return asctime_date(c, d);
    return eat_word(c, long_days[d->wday] + 3) && rfc850_date(c, d, last_year);
}

/* Range and weekday checks, then the count of seconds. A second of 60 (a
 * leap second) is accepted and lands on the next minute's first second. */
static bool http_date_seconds(const http_date *d, int64_t *out)
{
    if (d->day < 1 || d->day > days_in_month(d->year, d->month))
        return false;
    if (d->hour > 23 || d->minute > 59 || d->second > 60)
        return false;
    int64_t days = days_from_civil(d->year, d->month, d->day);
    if (weekday(days) != d->wday)
        return false;
    *out = days * SECONDS_PER_DAY + d->hour * 3600 + d->minute * 60 + d->second;
    return true;
}

static int parse_date_window(const char *text, size_t len, int64_t last_year,
                             int64_t *unix_seconds)
{
    if (unix_seconds == NULL)
        return RESIL_EINVAL;
    if (text == NULL)
        return RESIL_ESYNTAX;
    cursor c = trimmed(text, len);
    http_date d;
    int64_t s;
    if (!read_http_date(&c, &d, last_year) || !at_end(&c) || !http_date_seconds(&d, &s))
        return RESIL_ESYNTAX;
    *unix_seconds = s;
    return 0;
}

int resil_http_date_parse(const char *text, size_t len, int64_t *unix_seconds)
{
    return parse_date_window(text, len, POSIX_WINDOW_LAST_YEAR, unix_seconds);
}

int resil_http_date_parse_at(const char *text, size_t len, int64_t now_unix_seconds,
                             int64_t *unix_seconds)
{
    return parse_date_window(text, len, year_of(now_unix_seconds) + RFC850_YEARS_AHEAD,
                             unix_seconds);
}

size_t resil_http_date_format(int64_t unix_seconds, char *buf, size_t cap)
{
    if (unix_seconds < FIRST_FORMATTABLE || unix_seconds > LAST_FORMATTABLE) {
        if (cap > 0)
            buf[0] = '\0';
        return 0;
    }
    int64_t days = resil__floor_div(unix_seconds, SECONDS_PER_DAY);
    int64_t sod = unix_seconds - days * SECONDS_PER_DAY;
    civil c = civil_from_days(days);
    int n = snprintf(buf, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", short_days[weekday(days)],
                     c.day, months[c.month - 1], (int)c.year, (int)(sod / 3600),
                     (int)(sod / 60 % 60), (int)(sod % 60));
    return n > 0 ? (size_t)n : 0;
}

/* ---- Retry-After ---------------------------------------------------------- */

/* delta-seconds = 1*DIGIT in units of `unit` ns, saturating; "-" 1*DIGIT
 * is accepted and means 0 (DESIGN: negative values become 0). No "+", no
 * fraction, no unit. The millisecond headers share it with unit 1 ms. */
static int parse_delta(cursor *c, int64_t unit, resil_duration *out)
{
    bool negative = eat(c, '-');
    if (at_end(c))
        return RESIL_ESYNTAX;
    uint64_t count = 0;
    for (; !at_end(c); c->p++) {
        if (!is_digit(*c->p))
            return RESIL_ESYNTAX;
        unsigned digit = (unsigned)(*c->p - '0');
        count = count > (UINT64_MAX - digit) / 10 ? UINT64_MAX : count * 10 + digit;
    }
    if (negative)
        *out = 0;
    else if (count > (uint64_t)(RESIL_DURATION_MAX / unit))
        *out = RESIL_DURATION_MAX;
    else
        *out = (resil_duration)count * unit;
    return 0;
}

/* The wait from now_ns until the start of second `date`: 0 when past,
 * RESIL_DURATION_MAX when beyond the range. Whole seconds are subtracted
 * first (both operands are far inside int64), the sub-second part of now
 * after. */
static resil_duration wait_until(int64_t date, int64_t now_ns)
{
    int64_t now_s = resil__floor_div(now_ns, NS_PER_SECOND);
    int64_t now_frac = resil__floor_mod(now_ns, NS_PER_SECOND);
    int64_t diff = date - now_s;
    if (diff <= 0)
        return 0;
    if (diff > RESIL_DURATION_MAX / NS_PER_SECOND)
        return RESIL_DURATION_MAX;
    return diff * NS_PER_SECOND - now_frac;
}

/* The value between optional spaces: 0 with *c set, RESIL_EINVAL for no
 * `out`, RESIL_ESYNTAX for no text. Both units' parsers start here. */
static int open_value(const char *text, size_t len, const resil_duration *out, cursor *c)
{
    if (out == NULL)
        return RESIL_EINVAL;
    if (text == NULL)
        return RESIL_ESYNTAX;
    *c = trimmed(text, len);
    return at_end(c) ? RESIL_ESYNTAX : 0;
}

int resil_retry_after_parse(const char *text, size_t len, int64_t wall_now_ns,
                            resil_duration *out)
{
    cursor c;
    int opened = open_value(text, len, out, &c);
    if (opened != 0)
        return opened;
    if (is_digit(*c.p) || *c.p == '-')
        return parse_delta(&c, NS_PER_SECOND, out);
    int64_t date;
    int64_t now_s = resil__floor_div(wall_now_ns, NS_PER_SECOND);
    int rc = parse_date_window(c.p, (size_t)(c.end - c.p),
                               year_of(now_s) + RFC850_YEARS_AHEAD, &date);
    if (rc != 0)
        return rc;
    *out = wait_until(date, wall_now_ns);
    return 0;
}

int resil_retry_after_ms_parse(const char *text, size_t len, resil_duration *out)
{
    cursor c;
    int opened = open_value(text, len, out, &c);
    return opened != 0 ? opened : parse_delta(&c, RESIL_MS(1), out);
}
