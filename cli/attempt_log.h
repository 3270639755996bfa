/*
 * attempt_log.h — the attempt record as the tool prints it: text for people,
 * JSON lines for programs, or nothing.
 *
 * Every subcommand that retries prints its attempts through this one writer,
 * fed straight from the executor's on_attempt hook, so the record a user
 * reads is the record the executor decided — never a second account of it.
 * The text form follows the Retry Pattern article's lines:
 *
 *   #1 exit 1, wait 180 ms (backoff)
 *   #2 exit 1, attempts exhausted
 *   -> stopped: attempts exhausted
 *
 * Waits in text are whole milliseconds, rounded down, as the article prints
 * them; JSON carries them to the microsecond. A subcommand says what an
 * attempt's failure was ("exit 1", "Transient 503") because only it knows.
 *
 * `resil run` and `resil http` write logs that CI and cron keep, so they
 * turn on the stamped form: each text line begins with the time (RFC 3339,
 * UTC, milliseconds) and "resil: ", waits read as people write them
 * ("wait 16s (backoff)", "wait 180ms"), and every JSON record carries the
 * time and what it is about ("url" or "command"):
 *
 *   2026-03-01T12:00:00.250Z resil: #1 exit 1, wait 2s (backoff)
 */
#ifndef RESIL_CLI_ATTEMPT_LOG_H
#define RESIL_CLI_ATTEMPT_LOG_H

#include <stdio.h>

#include "resil.h"

typedef enum log_format { LOG_TEXT, LOG_JSON, LOG_NONE } log_format;

typedef struct attempt_log {
    FILE *out;
    log_format format;
    const char *indent; /* text lines start with it ("" or "  ") */
    bool stamped;       /* the form for logs: time, "resil: ", waits for people */
    const char *subject_key; /* JSON: "url" or "command"; NULL: none */
    const char *subject;     /* its value */
    bool subject_in_text;    /* stamped text names it too: "resil: SUBJECT: #1 ..."
                                (for records of calls that run at once) */
} attempt_log;

/* A duration as people read it in a log: "180ms", "1.5s", "16s", "2m5s"
 * (below 1 s to the millisecond, below 10 s to the tenth, then whole
 * seconds; always rounded down). */
void format_human(resil_duration d, char *buf, size_t cap);

/* The record's moment, in the stamped form's words: "2026-03-01T12:00:00.250Z". */
void format_stamp(char *buf, size_t cap);

/* "text", "json" or "none"; RESIL_EINVAL otherwise. */
int attempt_log_format_parse(const char *s, log_format *out);
/* Where the record goes: standard error when `path` is NULL, else `path`
 * opened for appending (--log-file), or NULL after saying on stderr, as
 * `tool`, why it cannot be. The caller closes what is not stderr. */
FILE *attempt_log_open(const char *tool, const char *path);

/*
 * One attempt, as decided. `what` describes the failure ("exit 1"); it is
 * ignored for a success, which prints as "ok". `extra_json`, when non-NULL,
 * is appended inside the JSON object (e.g. "\"signal\":9"), without a
 * leading comma.
 */
void attempt_log_attempt(const attempt_log *l, const resil_attempt_record *rec,
                         const char *what, const char *extra_json);

/*
 * The end of an execution: "-> succeeded[ VALUE]", "-> stopped: REASON" or,
 * for refused work, "-> refused: DETAIL"; in JSON {"stop":REASON,
 * "attempts":N}. `value` (text only) may be NULL.
 */
void attempt_log_stop(const attempt_log *l, resil_stop stop, uint32_t attempts,
                      const char *value);

/* Milliseconds as text into buf: rounded down when `whole`, else exact to
 * the microsecond with trailing zeros dropped ("1.5", "180"). */
void format_ms(resil_duration d, bool whole, char *buf, size_t cap);

/* A JSON string literal (quotes included) of s into buf, truncated to fit. */
void json_quote(const char *s, char *buf, size_t cap);

#endif
