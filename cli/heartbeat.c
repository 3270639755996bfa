/*
 * heartbeat.c — sleeping in slices, with a line between two.
 */
#include <stdio.h>
#include <unistd.h>

#include "heartbeat.h"

#define DEFAULT_EVERY RESIL_S(10)

static resil_instant hb_now(resil_clock *self)
{
    return resil_clock_now(((heartbeat_clock *)self)->inner);
}

static int64_t hb_wall_now(resil_clock *self)
{
    return resil_clock_wall_now(((heartbeat_clock *)self)->inner);
}

void heartbeat_beat(const attempt_log *l, resil_duration left)
{
    if (l->format != LOG_TEXT)
        return;
    char stamp[40], when[32];
    format_stamp(stamp, sizeof stamp);
    format_human(left, when, sizeof when);
    bool named = l->subject_in_text && l->subject != NULL;
    fprintf(l->out, "%s%s resil: %s%swaiting, next attempt in %s\n", l->indent, stamp,
            named ? l->subject : "", named ? ": " : "", when);
    fflush(l->out);
}

static int hb_sleep(resil_clock *self, resil_duration d, resil_cancel *cancel)
{
    heartbeat_clock *hb = (heartbeat_clock *)self;
    resil_duration left = d;
    while (hb->every > 0 && left > hb->every) {
        int rc = resil_clock_sleep(hb->inner, hb->every, cancel);
        if (rc != 0)
            return rc;
        left -= hb->every;
        heartbeat_beat(hb->log, left);
    }
    return resil_clock_sleep(hb->inner, left, cancel);
}

void heartbeat_init(heartbeat_clock *hb, resil_clock *inner, resil_duration every,
                    const attempt_log *log)
{
    hb->base.now = hb_now;
    hb->base.wall_now = hb_wall_now;
    hb->base.sleep = hb_sleep;
    hb->inner = inner;
    hb->every = every;
    hb->log = log;
}

resil_duration heartbeat_default(const attempt_log *log)
{
    if (log->format != LOG_TEXT || log->out == NULL || !isatty(fileno(log->out)))
        return 0;
    return DEFAULT_EVERY;
}
