/*
 * attempt_log.c — writing attempt records as text or JSON lines.
 *
 * Each record is formatted into a local buffer and written with one fputs,
 * so that a line is never interleaved with the command's own stderr output
 * in the middle. JSON is written by hand: the objects are flat and small,
 * and the core must not grow a JSON dependency for the tool's sake.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "attempt_log.h"

#define LINE_MAX_LEN 2048

int attempt_log_format_parse(const char *s, log_format *out)
{
    static const struct { const char *name; log_format f; } formats[] = {
        {"text", LOG_TEXT}, {"json", LOG_JSON}, {"none", LOG_NONE}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcmp(s, formats[i].name) == 0) {
            *out = formats[i].f;
            return 0;
        }
    }
    return RESIL_EINVAL;
}

FILE *attempt_log_open(const char *tool, const char *path)
{
    if (path == NULL)
        return stderr;
    FILE *f = fopen(path, "a");
    if (f == NULL)
        fprintf(stderr, "%s: --log-file: cannot open '%s': %s\n", tool, path, strerror(errno));
    return f;
}

void format_ms(resil_duration d, bool whole, char *buf, size_t cap)
{
    if (d < 0)
        d = 0;
    int64_t ms = d / RESIL_MS(1);
    int64_t us = (d % RESIL_MS(1)) / RESIL_US(1);
    if (whole || us == 0) {
        snprintf(buf, cap, "%" PRId64, ms);
        return;
    }
    char frac[8];
    snprintf(frac, sizeof frac, "%03" PRId64, us);
    for (size_t n = strlen(frac); n > 0 && frac[n - 1] == '0'; n--)
        frac[n - 1] = '\0';
    snprintf(buf, cap, "%" PRId64 ".%s", ms, frac);
}

void format_human(resil_duration d, char *buf, size_t cap)
{
    if (d < 0)
        d = 0;
    resil_duration unit = d >= RESIL_S(10) ? RESIL_S(1)
                          : d >= RESIL_S(1) ? RESIL_MS(100)
                                            : RESIL_MS(1);
    resil_duration_format(d - d % unit, buf, cap);
}

void format_stamp(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000) % 1000u;
    snprintf(buf, cap, "%s.%03uZ", day, ms);
}

/* The stamped form's line start: "TIME resil: " (or the indent alone). */
static void line_start(const attempt_log *l, char *buf, size_t cap)
{
    if (!l->stamped) {
        snprintf(buf, cap, "%s", l->indent);
        return;
    }
    char stamp[40];
    format_stamp(stamp, sizeof stamp);
    bool named = l->subject_in_text && l->subject != NULL;
    snprintf(buf, cap, "%s%s resil: %s%s", l->indent, stamp, named ? l->subject : "",
             named ? ": " : "");
}

/* The stamped form's JSON start: "\"time\":...,\"url\":...," (or nothing). */
static void json_start(const attempt_log *l, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!l->stamped)
        return;
    char stamp[40], subject[512];
    format_stamp(stamp, sizeof stamp);
    size_t n = (size_t)snprintf(buf, cap, "\"time\":\"%s\",", stamp);
    if (l->subject_key == NULL || n >= cap)
        return;
    json_quote(l->subject != NULL ? l->subject : "", subject, sizeof subject);
    snprintf(buf + n, cap - n, "\"%s\":%s,", l->subject_key, subject);
}

void json_quote(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap < 3) {
        if (cap > 0)
            buf[0] = '\0';
        return;
    }
    buf[o++] = '"';
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            snprintf(esc, sizeof esc, "%c", c);
        size_t n = strlen(esc);
        if (o + n + 2 > cap)
            break;
        memcpy(buf + o, esc, n);
        o += n;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static void lower_kind(resil_kind k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", resil_kind_name(k));
    for (char *p = buf; *p != '\0'; p++)
        *p = (char)tolower((unsigned char)*p);
}

static void text_decision(const attempt_log *l, const resil_attempt_record *rec, char *buf,
                          size_t cap)
{
    if (rec->stop != RESIL_STOP_NONE) {
        snprintf(buf, cap, "%s", resil_stop_name(rec->stop));
        return;
    }
    char wait[32];
    if (l->stamped) {
        format_human(rec->wait, wait, sizeof wait);
    } else {
        format_ms(rec->wait, true, wait, sizeof wait);
        strcat(wait, " ms");
    }
    snprintf(buf, cap, "wait %s (%s)", wait, resil_wait_source_name(rec->source));
}

static void write_text_attempt(const attempt_log *l, const resil_attempt_record *rec,
                               const char *what)
{
    char line[LINE_MAX_LEN], start[640];
    line_start(l, start, sizeof start);
    if (resil_outcome_ok(&rec->outcome)) {
        snprintf(line, sizeof line, "%s#%u ok\n", start, rec->number);
    } else {
        char decision[128];
        text_decision(l, rec, decision, sizeof decision);
        snprintf(line, sizeof line, "%s#%u %s, %s\n", start, rec->number, what, decision);
    }
    fputs(line, l->out);
}

static void write_json_attempt(const attempt_log *l, const resil_attempt_record *rec,
                               const char *what, const char *extra_json)
{
    char kind[32], detail[256], wait[32], duration[32], source[32], line[LINE_MAX_LEN];
    char start[640];
    json_start(l, start, sizeof start);
    lower_kind(rec->outcome.kind, kind, sizeof kind);
    json_quote(resil_outcome_ok(&rec->outcome) ? "ok" : what, detail, sizeof detail);
    format_ms(rec->wait, false, wait, sizeof wait);
    format_ms(rec->duration, false, duration, sizeof duration);
    if (rec->source == RESIL_WAIT_NONE)
        snprintf(source, sizeof source, "null");
    else
        json_quote(resil_wait_source_name(rec->source), source, sizeof source);
    bool stops = rec->stop != RESIL_STOP_NONE;
    snprintf(line, sizeof line,
             "{%s\"attempt\":%u,\"outcome\":\"%s\",\"code\":%" PRId64
             ",\"detail\":%s,\"decision\":\"%s\"%s%s%s,\"wait_ms\":%s"
             ",\"source\":%s,\"duration_ms\":%s%s%s}\n",
             start, rec->number, kind, rec->outcome.code, detail,
             stops ? "stop" : "retry", stops ? ",\"reason\":\"" : "",
             stops ? resil_stop_name(rec->stop) : "", stops ? "\"" : "", wait,
             source, duration, extra_json != NULL ? "," : "",
             extra_json != NULL ? extra_json : "");
    fputs(line, l->out);
}

void attempt_log_attempt(const attempt_log *l, const resil_attempt_record *rec,
                         const char *what, const char *extra_json)
{
    if (l->format == LOG_TEXT)
        write_text_attempt(l, rec, what);
    else if (l->format == LOG_JSON)
        write_json_attempt(l, rec, what, extra_json);
    fflush(l->out);
}

static void write_text_stop(const attempt_log *l, resil_stop stop, const char *value)
{
    char line[LINE_MAX_LEN], start[640];
    const char *v = value != NULL ? value : "";
    const char *sep = value != NULL ? " " : "";
    line_start(l, start, sizeof start);
    if (stop == RESIL_STOP_SUCCEEDED)
        snprintf(line, sizeof line, "%s-> succeeded%s%s\n", start, sep, v);
    else if (stop == RESIL_STOP_REFUSED)
        snprintf(line, sizeof line, "%s-> refused%s%s\n", start,
                 value != NULL ? ": " : "", v);
    else
        snprintf(line, sizeof line, "%s-> stopped: %s\n", start, resil_stop_name(stop));
    fputs(line, l->out);
}

void attempt_log_stop(const attempt_log *l, resil_stop stop, uint32_t attempts,
                      const char *value)
{
    if (l->format == LOG_TEXT)
        write_text_stop(l, stop, value);
    else if (l->format == LOG_JSON) {
        char start[640];
        json_start(l, start, sizeof start);
        fprintf(l->out, "{%s\"stop\":\"%s\",\"attempts\":%u}\n", start,
                resil_stop_name(stop), attempts);
    }
    fflush(l->out);
}
