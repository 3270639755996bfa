/*
 * heartbeat.h — a line now and then while a long wait between attempts
 * runs, so that a person watching a terminal knows the tool is waiting,
 * not hung: "2026-03-01T12:00:10.000Z resil: waiting, next attempt in 50s".
 *
 * It is a clock: it wraps the clock the executor (or the HTTP client)
 * sleeps on and sleeps in slices of `every`, writing a line between two
 * slices. So no thread and no timer: the wait is the executor's own, cut
 * in pieces, and a cancellation ends it exactly as before.
 */
#ifndef RESIL_CLI_HEARTBEAT_H
#define RESIL_CLI_HEARTBEAT_H

#include "attempt_log.h"

typedef struct heartbeat_clock {
    resil_clock base;
    resil_clock *inner;    /* the clock that really sleeps (not owned) */
    resil_duration every;  /* 0: never beat; sleep as the inner clock does */
    const attempt_log *log;
} heartbeat_clock;

void heartbeat_init(heartbeat_clock *hb, resil_clock *inner, resil_duration every,
                    const attempt_log *log);

/* The line itself, "TIME resil: waiting, next attempt in LEFT" (text
 * logs only): for a wait that is a loop's timer rather than a sleep. */
void heartbeat_beat(const attempt_log *l, resil_duration left);

/* The default: every 10 s when the log is text on a terminal, else never. */
resil_duration heartbeat_default(const attempt_log *log);

#endif
