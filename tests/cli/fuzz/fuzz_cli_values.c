/*
 * fuzz_cli_values.c — every value parser of the tool's shared options on the
 * same arbitrary text: whole numbers at the bounds the options use, numbers
 * with a floor (--factor), durations (--delay, --attempt-timeout), exit-code
 * lists (--retry-on, --stop-on), the names (--backoff, --jitter, --log) and
 * the fleet options (--fleet-rate, --fleet-concurrency, --fleet-timeout).
 *
 * The text is the input up to its first NUL, as argv would hold it. Each
 * parser is judged against an oracle written here without the C library's
 * number readers, so "accepted" must mean exactly "what the option
 * documents": a rejection is RESIL_EINVAL with a message naming the option
 * and leaves the output untouched; an acceptance is within the bounds and
 * prints back to text that parses to the same value. Messages go into a
 * resil_err (args.err), so nothing is printed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "args.h"
#include "attempt_log.h"
#include "fleet_values.h"
#include "policy_opts.h"

#define CAP 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* A fresh cursor whose messages land in *err. */
static args quiet(resil_err *err)
{
    static char *argv[] = {"resil fuzz", NULL};
    args a;
    args_init(&a, "resil fuzz", 1, argv);
    memset(err, 0, sizeof *err);
    a.err = err;
    return a;
}

static void check_rejected(int rc, const resil_err *err, const char *option)
{
    check(rc == RESIL_EINVAL && err->code == RESIL_EINVAL);
    check(strncmp(err->message, "resil fuzz: ", 12) == 0);
    check(strstr(err->message, option) != NULL);
}

/* ---- whole numbers ------------------------------------------------------ */

/* Digits only, no sign, fitting in 64 bits: the oracle of args_whole. */
static bool oracle_whole(const char *t, uint64_t *out)
{
    uint64_t v = 0;
    if (*t == '\0')
        return false;
    for (; *t != '\0'; t++) {
        if (*t < '0' || *t > '9')
            return false;
        unsigned d = (unsigned)(*t - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static void check_uint64(const char *text, uint64_t min, uint64_t max)
{
    resil_err err;
    args a = quiet(&err);
    uint64_t v = 42, want = 0;
    int rc = args_uint64(&a, "--count", text, min, max, &v);
    bool ok = oracle_whole(text, &want) && want >= min && want <= max;
    if (!ok) {
        check_rejected(rc, &err, "--count");
        check(v == 42);
        return;
    }
    check(rc == 0 && v == want);
    char again[32];
    snprintf(again, sizeof again, "%llu", (unsigned long long)v);
    uint64_t back = 0;
    check(args_uint64(&a, "--count", again, min, max, &back) == 0 && back == v);
}

/* ---- numbers with a floor ----------------------------------------------- */

/* What a user may type as a number: optional sign, digits with at most
 * one point (at least one digit), optional exponent. */
static bool oracle_decimal_shape(const char *t)
{
    size_t digits = 0, points = 0;
    if (*t == '+' || *t == '-')
        t++;
    for (; (*t >= '0' && *t <= '9') || *t == '.'; t++) {
        if (*t == '.')
            points++;
        else
            digits++;
    }
    if (digits == 0 || points > 1)
        return false;
    if (*t == 'e' || *t == 'E') {
        t++;
        if (*t == '+' || *t == '-')
            t++;
        if (*t < '0' || *t > '9')
            return false;
        while (*t >= '0' && *t <= '9')
            t++;
    }
    return *t == '\0';
}

static void check_double(const char *text, double min)
{
    resil_err err;
    args a = quiet(&err);
    double v = -7.0;
    int rc = args_double(&a, "--factor", text, min, &v);
    if (rc != 0) {
        check_rejected(rc, &err, "--factor");
        check(v == -7.0);
        return;
    }
    check(oracle_decimal_shape(text));
    check(isfinite(v) && v >= min);
    char again[64];
    snprintf(again, sizeof again, "%.17g", v);
    double back = 0;
    check(args_double(&a, "--factor", again, min, &back) == 0 && back == v);
}

/* ---- durations ------------------------------------------------------------ */

static void check_duration(const char *text, bool positive)
{
    resil_err err;
    args a = quiet(&err);
    resil_duration d = -5;
    int rc = args_duration(&a, "--delay", text, positive, &d);
    if (rc != 0) {
        check_rejected(rc, &err, "--delay");
        check(d == -5);
        return;
    }
    check(positive ? d > 0 : d >= 0);
    char again[64];
    size_t n = resil_duration_format(d, again, sizeof again);
    check(n < sizeof again);
    resil_duration back = -1;
    check(args_duration(&a, "--delay", again, positive, &back) == 0 && back == d);
}

/* ---- exit-code lists ------------------------------------------------------ */

/* One or more codes in [1, 255], decimal, separated by single commas. */
static bool oracle_codes(const char *t, bool has[256])
{
    memset(has, 0, 256);
    for (;;) {
        unsigned v = 0;
        if (*t < '0' || *t > '9')
            return false;
        for (; *t >= '0' && *t <= '9'; t++)
            v = v > 255 ? 256 : v * 10 + (unsigned)(*t - '0');
        if (v < 1 || v > 255)
            return false;
        has[v] = true;
        if (*t == '\0')
            return true;
        if (*t++ != ',')
            return false;
    }
}

static void check_codes(const char *text)
{
    resil_err err;
    args a = quiet(&err);
    code_set set, back;
    bool want[256];
    int rc = exit_codes_parse(&a, "--retry-on", text, &set);
    if (!oracle_codes(text, want)) {
        check_rejected(rc, &err, "--retry-on");
        return;
    }
    check(rc == 0 && set.given && memcmp(set.has, want, sizeof want) == 0);
    char list[256 * 4] = "";
    size_t n = 0;
    for (int c = 1; c < 256; c++) {
        if (set.has[c])
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? "," : "", c);
    }
    check(n > 0);
    check(exit_codes_parse(&a, "--retry-on", list, &back) == 0 &&
          memcmp(back.has, set.has, sizeof set.has) == 0);
}

/* ---- names ---------------------------------------------------------------- */

/* The library's names are ASCII case-insensitive ("Full" is "full"); the
 * tool's log formats are not. */
static void check_names(const char *text)
{
    resil_backoff_kind k;
    if (resil_backoff_kind_parse(text, &k) == 0)
        check(strcasecmp(resil_backoff_kind_name(k), text) == 0);
    resil_jitter j;
    if (resil_jitter_parse(text, &j) == 0)
        check(strcasecmp(resil_jitter_name(j), text) == 0);
    log_format f;
    if (attempt_log_format_parse(text, &f) == 0)
        check(strcmp(text, "text") == 0 || strcmp(text, "json") == 0 ||
              strcmp(text, "none") == 0);
}

/* ---- fleet options ------------------------------------------------------- */

/* Accepted: every number within the documented bounds; refused: the
 * option named and the output untouched. */
static void check_fleet_options(const char *text)
{
    resil_err err;
    args a = quiet(&err);
    fleet_limit_opts o = {.rate = -1, .concurrency = -1};
    int rc = fleet_rate_parse(&a, text, &o);
    if (rc == 0) {
        check(o.rate >= 1 && o.rate <= FLEET_MAX_PERMITS);
        check(o.burst >= 1 && o.burst <= FLEET_MAX_PERMITS);
        check(o.period >= RESIL_MS(1) && o.period <= RESIL_S(86400));
        check(o.period / o.rate >= RESIL_US(1));
    } else {
        check_rejected(rc, &err, "--fleet-rate");
        check(o.rate == -1);
    }
    a = quiet(&err);
    rc = fleet_concurrency_parse(&a, text, &o);
    if (rc == 0) {
        check(o.concurrency >= 1);
        check(o.lease >= RESIL_MS(10) && o.lease <= RESIL_S(86400));
    } else {
        check_rejected(rc, &err, "--fleet-concurrency");
        check(o.concurrency == -1);
    }
    a = quiet(&err);
    resil_duration d = -1;
    rc = fleet_timeout_parse(&a, text, &d);
    if (rc == 0) {
        check(d >= FLEET_TIMEOUT_MIN && d <= FLEET_TIMEOUT_MAX);
    } else {
        check_rejected(rc, &err, "--fleet-timeout");
        check(d == -1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[CAP];
    size_t n = size < CAP - 1 ? size : CAP - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    check_uint64(text, 0, UINT64_MAX); /* --seed */
    check_uint64(text, 1, UINT32_MAX); /* --breaker-failures */
    check_uint64(text, 1, 255);
    check_double(text, 1.0); /* --factor */
    check_double(text, 0.0);
    check_duration(text, false); /* --delay, --max-delay */
    check_duration(text, true);  /* --attempt-timeout, --total-timeout */
    check_codes(text);
    check_names(text);
    check_fleet_options(text);
    return 0;
}
