/*
 * duration.c — saturating duration arithmetic, and the one parser and
 * formatter for human durations.
 *
 * Durations are plain int64_t nanoseconds, so every operation that could
 * overflow clamps instead: a backoff at attempt 10 000 must come out as the
 * cap, never as a wrapped negative wait, and signed overflow would be
 * undefined behaviour anyway.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

resil_duration resil_dur_add(resil_duration a, resil_duration b) { return resil__add_sat(a, b); }

resil_duration resil_dur_sub(resil_duration a, resil_duration b) { return resil__sub_sat(a, b); }

/* The double nearest INT64_MAX is 2^63, which does not fit: compare against
 * it with >= and clamp before converting. */
static resil_duration clamp_double(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (resil_duration)v;
}

/* Truncates toward zero, like C's own conversion: a jittered wait of
 * U * x never rounds up past x. */
resil_duration resil_dur_mul(resil_duration d, double f)
{
    resil_duration r = clamp_double((double)d * f);
    return d >= 0 && r < 0 ? 0 : r;
}

/* Rounds to the nearest nanosecond, so 0.3 s is exactly 300 ms. */
resil_duration resil_dur_from_seconds(double seconds)
{
    return clamp_double(round(seconds * 1e9));
}

double resil_dur_to_ms(resil_duration d) { return (double)d / 1e6; }

/* ---- parsing ----------------------------------------------------------- */

/*
 * Grammar (exactly `len` bytes, no spaces):
 *   duration  = "0" | component+ | timespan
 *   component = number unit          (summed, in any order, as Go does)
 *   number    = digits ["." [digits]] | "." digits
 *   unit      = "ns" | "us" | "µs" | "ms" | "s" | "m" | "h" | "d"
 *   timespan  = [days "."] hours ":" mm ":" ss ["." digits]
 * A bare number is accepted only as "0": "5" could mean seconds or
 * milliseconds depending on who wrote it, and guessing wrong by a factor of
 * a thousand is worse than an error. Fractions are exact: they are rounded
 * down to whole nanoseconds with integer arithmetic, never through a double.
 */

typedef struct cursor {
    const char *text; /* the whole input, for messages */
    size_t len;
    size_t pos;
    resil_err *err;
} cursor;

#define QUOTE_MAX 64
#define OUT_OF_RANGE "out of range (the maximum is 2562047h47m16.854775807s)"
#define TIMESPAN_SHAPE "expected [d.]hh:mm:ss[.fffffff]"

static int fail(cursor *c, int code, const char *what)
{
    int shown = c->len > QUOTE_MAX ? QUOTE_MAX : (int)c->len;
    return resil_err_set(c->err, code, "duration \"%.*s%s\": %s", shown, c->text,
                         c->len > QUOTE_MAX ? "..." : "", what);
}

static bool at_end(const cursor *c) { return c->pos >= c->len; }
static char peek(const cursor *c) { return at_end(c) ? '\0' : c->text[c->pos]; }
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Reads a run of digits into *out; returns how many were read, or -1 when
 * the value passes INT64_MAX. */
static long read_uint(cursor *c, int64_t *out)
{
    int64_t v = 0;
    long n = 0;
    bool overflow = false;
    while (is_digit(peek(c))) {
        if (!overflow && (__builtin_mul_overflow(v, 10, &v) ||
                          __builtin_add_overflow(v, peek(c) - '0', &v)))
            overflow = true;
        c->pos++;
        n++;
    }
    *out = v;
    return overflow ? -1 : n;
}

/* floor(unit * 0.DIGITS) exactly, reading the digits right to left: each
 * step is floor((digit * unit + carried) / 10), and flooring the carried
 * part early never changes the result. Stays below 10 * unit. */
static int64_t fraction_of(const char *digits, size_t n, int64_t unit)
{
    int64_t y = 0;
    for (size_t i = n; i > 0; i--)
        y = ((digits[i - 1] - '0') * unit + y) / 10;
    return y;
}

typedef struct number {
    int64_t whole;
    const char *frac;
    size_t frac_len;
    bool whole_overflow;
} number;

/* number = digits ["." [digits]] | "." digits. Returns false when there is
 * no digit at all. */
static bool read_number(cursor *c, number *num)
{
    long whole_digits = read_uint(c, &num->whole);
    num->whole_overflow = whole_digits < 0;
    num->frac = NULL;
    num->frac_len = 0;
    if (peek(c) == '.') {
        c->pos++;
        num->frac = c->text + c->pos;
        while (is_digit(peek(c)))
            c->pos++;
        num->frac_len = (size_t)(c->text + c->pos - num->frac);
    }
    return whole_digits != 0 || num->frac_len > 0;
}

/* whole * unit + fraction, or -1 on overflow. */
static int64_t scale(const number *num, int64_t unit)
{
    int64_t v;
    if (num->whole_overflow || __builtin_mul_overflow(num->whole, unit, &v))
        return -1;
    if (__builtin_add_overflow(v, fraction_of(num->frac, num->frac_len, unit), &v))
        return -1;
    return v;
}

typedef struct unit_name {
    const char *name;
    size_t len;
    int64_t ns;
} unit_name;

static const unit_name units[] = {
    {"ns", 2, 1},
    {"us", 2, INT64_C(1000)},
    {"\xC2\xB5s", 3, INT64_C(1000)}, /* micro sign */
    {"\xCE\xBCs", 3, INT64_C(1000)}, /* Greek mu */
    {"ms", 2, INT64_C(1000000)},
    {"s", 1, INT64_C(1000000000)},
    {"m", 1, INT64_C(60000000000)},
    {"h", 1, INT64_C(3600000000000)},
    {"d", 1, INT64_C(86400000000000)},
};

/* The unit is the run of bytes up to the next digit or '.'. */
static int read_unit(cursor *c, int64_t *unit_ns)
{
    size_t start = c->pos;
    while (!at_end(c) && !is_digit(peek(c)) && peek(c) != '.')
        c->pos++;
    size_t n = c->pos - start;
    if (n == 0)
        return fail(c, RESIL_ESYNTAX, at_end(c) ? "missing unit (ns, us, ms, s, m, h, d)"
                                                : "missing unit before the next number");
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (units[i].len == n && memcmp(units[i].name, c->text + start, n) == 0) {
            *unit_ns = units[i].ns;
            return 0;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "unknown unit \"%.*s\" (use ns, us, ms, s, m, h, d)",
             n > 16 ? 16 : (int)n, c->text + start);
    return fail(c, RESIL_ESYNTAX, what);
}

static int parse_components(cursor *c, resil_duration *out)
{
    int64_t total = 0;
    while (!at_end(c)) {
        number num;
        if (!read_number(c, &num))
            return fail(c, RESIL_ESYNTAX, "missing number before unit");
        int64_t unit = 0;
        int rc = read_unit(c, &unit);
        if (rc != 0)
            return rc;
        int64_t v = scale(&num, unit);
        if (v < 0 || __builtin_add_overflow(total, v, &total))
            return fail(c, RESIL_ERANGE, OUT_OF_RANGE);
    }
    *out = total;
    return 0;
}

/* A field of the TimeSpan form: 1+ digits, at most `max_digits` (0: any). */
static int read_field(cursor *c, int64_t *v, long max_digits)
{
    long n = read_uint(c, v);
    if (n < 0)
        return fail(c, RESIL_ERANGE, OUT_OF_RANGE);
    if (n == 0 || (max_digits > 0 && n > max_digits))
        return fail(c, RESIL_ESYNTAX, TIMESPAN_SHAPE);
    return 0;
}

static bool expect(cursor *c, char ch)
{
    if (peek(c) != ch)
        return false;
    c->pos++;
    return true;
}

static bool has_byte(const cursor *c, char ch)
{
    return memchr(c->text, ch, c->len) != NULL;
}

/* Reads "." digits after the seconds, when present. */
static int read_seconds_fraction(cursor *c, number *frac)
{
    *frac = (number){0};
    if (!expect(c, '.'))
        return 0;
    frac->frac = c->text + c->pos;
    while (is_digit(peek(c)))
        c->pos++;
    frac->frac_len = (size_t)(c->text + c->pos - frac->frac);
    if (frac->frac_len == 0)
        return fail(c, RESIL_ESYNTAX, "missing digits after the seconds' '.'");
    return 0;
}

static int check_timespan_ranges(cursor *c, bool with_days, int64_t hours, int64_t minutes,
                                 int64_t seconds)
{
    if (with_days && hours >= 24)
        return fail(c, RESIL_ERANGE, "hours must be below 24 when days are given");
    if (minutes >= 60)
        return fail(c, RESIL_ERANGE, "minutes must be below 60");
    if (seconds >= 60)
        return fail(c, RESIL_ERANGE, "seconds must be below 60");
    return 0;
}

/* [d.]hh:mm:ss[.fffffff] — .NET TimeSpan's constant format. Hours are
 * unbounded when no days are given ("36:00:00" is 36 h). */
static int parse_timespan(cursor *c, resil_duration *out)
{
    int64_t days = 0, hours = 0, minutes = 0, seconds = 0;
    bool with_days = false;
    number frac = {0};
    int rc = read_field(c, &hours, 0);
    if (rc == 0 && expect(c, '.')) {
        days = hours;
        with_days = true;
        rc = read_field(c, &hours, 2);
    }
    if (rc == 0 && !expect(c, ':'))
        rc = fail(c, RESIL_ESYNTAX, TIMESPAN_SHAPE);
    if (rc == 0)
        rc = read_field(c, &minutes, 2);
    if (rc == 0 && !expect(c, ':'))
        rc = fail(c, RESIL_ESYNTAX, TIMESPAN_SHAPE);
    if (rc == 0)
        rc = read_field(c, &seconds, 2);
    if (rc == 0)
        rc = read_seconds_fraction(c, &frac);
    if (rc == 0 && !at_end(c))
        rc = fail(c, RESIL_ESYNTAX, TIMESPAN_SHAPE);
    if (rc == 0)
        rc = check_timespan_ranges(c, with_days, hours, minutes, seconds);
    if (rc != 0)
        return rc;

    const number parts[3] = {{.whole = days}, {.whole = hours}, {.whole = minutes * 60 + seconds}};
    const int64_t part_units[3] = {INT64_C(86400000000000), INT64_C(3600000000000),
                                   INT64_C(1000000000)};
    int64_t total = scale(&frac, INT64_C(1000000000));
    for (int i = 0; i < 3; i++) {
        int64_t v = scale(&parts[i], part_units[i]);
        if (v < 0 || __builtin_add_overflow(total, v, &total))
            return fail(c, RESIL_ERANGE, OUT_OF_RANGE);
    }
    *out = total;
    return 0;
}

int resil_duration_parse(const char *text, size_t len, resil_duration *out, resil_err *err)
{
    cursor c = {text, len, 0, err};
    if (text == NULL || len == 0)
        return resil_err_set(err, RESIL_ESYNTAX, "duration is empty");
    if (text[0] == '-')
        return fail(&c, RESIL_ERANGE, "must not be negative");
    if (len == 1 && text[0] == '0') {
        *out = 0;
        return 0;
    }
    resil_duration v = 0;
    int rc = has_byte(&c, ':') ? parse_timespan(&c, &v) : parse_components(&c, &v);
    if (rc == 0)
        *out = v;
    return rc;
}

int resil_duration_parse_cstr(const char *text, resil_duration *out, resil_err *err)
{
    return resil_duration_parse(text, text == NULL ? 0 : strlen(text), out, err);
}

/* ---- formatting -------------------------------------------------------- */

/* Appends v / unit with its fraction's trailing zeros trimmed ("1.5"). */
static size_t put_scaled(char *p, uint64_t v, uint64_t unit, int frac_digits)
{
    size_t n = (size_t)sprintf(p, "%" PRIu64, v / unit);
    uint64_t rem = v % unit;
    if (rem == 0)
        return n;
    char frac[16];
    sprintf(frac, "%0*" PRIu64, frac_digits, rem);
    int keep = frac_digits;
    while (frac[keep - 1] == '0')
        keep--;
    return n + (size_t)sprintf(p + n, ".%.*s", keep, frac);
}

/* The part below a minute: the shortest of "Xs", "Xms", "Xus", "Xns" whose
 * whole part is not zero, the larger unit winning a tie. */
static size_t put_sub_minute(char *p, uint64_t r)
{
    static const struct {
        uint64_t ns;
        int digits;
        const char *name;
    } sub[] = {{1000000000, 9, "s"}, {1000000, 6, "ms"}, {1000, 3, "us"}, {1, 0, "ns"}};
    char best[40] = "", cand[40];
    size_t best_len = SIZE_MAX;
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        if (r < sub[i].ns)
            continue;
        size_t n = put_scaled(cand, r, sub[i].ns, sub[i].digits);
        n += (size_t)sprintf(cand + n, "%s", sub[i].name);
        if (n < best_len) {
            best_len = n;
            memcpy(best, cand, n + 1);
        }
    }
    memcpy(p, best, best_len + 1);
    return best_len;
}

size_t resil_duration_format(resil_duration d, char *buf, size_t cap)
{
    char tmp[64];
    size_t n = 0;
    uint64_t v = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
    if (d < 0)
        tmp[n++] = '-';
    if (v == 0)
        n += (size_t)sprintf(tmp + n, "0s");
    const uint64_t hour = UINT64_C(3600000000000), minute = UINT64_C(60000000000);
    if (v >= hour)
        n += (size_t)sprintf(tmp + n, "%" PRIu64 "h", v / hour);
    v %= hour;
    if (v >= minute)
        n += (size_t)sprintf(tmp + n, "%" PRIu64 "m", v / minute);
    v %= minute;
    if (v > 0)
        n += put_sub_minute(tmp + n, v);
    if (cap > 0) {
        size_t copy = n < cap - 1 ? n : cap - 1;
        memcpy(buf, tmp, copy);
        buf[copy] = '\0';
    }
    return n;
}
