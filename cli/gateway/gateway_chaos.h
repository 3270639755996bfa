/*
 * gateway_chaos.h — `resil gateway --chaos-…`: a well-behaved upstream made
 * to misbehave, for the clients under test.
 *
 *   --chaos-status RATE:CODE[:RETRY_AFTER]  the gateway answers CODE itself
 *   --chaos-latency RATE:DURATION           the request waits first
 *   --chaos-drop RATE                       the connection closes unanswered
 *   --chaos-seed N                          the draws replay exactly
 *
 * Every injection happens at the front door, before the idempotency store
 * is asked anything and before the upstream is called: an injected answer
 * or a dropped connection never claims a key, so a client's retry with the
 * same key is a first request and at-most-once is untouched.
 *
 * This part only decides, with the library's chaos strategies (one per
 * flag, so the same seed gives `resil run` and the gateway the same draws
 * for the same kind); the request path (gateway_http.c) acts on the
 * decision.
 */
#ifndef RESIL_CLI_GATEWAY_CHAOS_H
#define RESIL_CLI_GATEWAY_CHAOS_H

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "resil.h"

typedef struct gw_chaos_config {
    double status_rate;     /* --chaos-status RATE:...; < 0 = not given */
    int status;             /* ...:CODE, 400..599 */
    int64_t retry_after;    /* ...:RETRY_AFTER in seconds; < 0 = none */
    double latency_rate;    /* --chaos-latency RATE:...; < 0 = not given */
    resil_duration latency; /* ...:DURATION */
    double drop_rate;       /* --chaos-drop RATE; < 0 = not given */
    uint64_t seed;          /* --chaos-seed; 0 = from the OS */
} gw_chaos_config;

#define GW_CHAOS_RETRY_AFTER_MAX 86400 /* a day, in seconds */

void gw_chaos_config_default(gw_chaos_config *c);
/* One argument: 1 when it was a --chaos- option of the gateway's, 0 when
 * not, RESIL_EINVAL after reporting the bad value by name. */
int gw_chaos_parse(gw_chaos_config *c, args *a);
/* Their relations once all are read: 0, or RESIL_EINVAL after reporting. */
int gw_chaos_check(const gw_chaos_config *c, const args *a);
bool gw_chaos_configured(const gw_chaos_config *c);

/* What to do with one request. */
typedef enum gw_chaos_end {
    GW_CHAOS_FORWARD = 0, /* go on as usual (after the delay, if any) */
    GW_CHAOS_STATUS,      /* answer `status` (and Retry-After) without forwarding */
    GW_CHAOS_DROP         /* close the connection without an answer */
} gw_chaos_end;

typedef struct gw_chaos_action {
    resil_duration delay;    /* > 0: wait this long first (--chaos-latency) */
    gw_chaos_end end;
    int status;              /* GW_CHAOS_STATUS: the code */
    const char *retry_after; /* GW_CHAOS_STATUS: the Retry-After value, or NULL */
} gw_chaos_action;

typedef struct gw_chaos gw_chaos;

/* The strategies for `cfg` on `clock`, each injection reported to
 * `metrics` (may be NULL) as a chaos_injected event of pipeline "gateway".
 * *out is NULL when no chaos is configured. 0, or RESIL_ENOMEM. */
int gw_chaos_new(const gw_chaos_config *cfg, resil_clock *clock, resil_metrics *metrics,
                 gw_chaos **out);
void gw_chaos_free(gw_chaos *c);
/* Any thread: decide for one request, as a pipeline of latency, then
 * drop, then status would (a dropped request draws no status). c may be
 * NULL: nothing. True when anything was injected. */
bool gw_chaos_pick(gw_chaos *c, gw_chaos_action *out);
/* The kill switch, any thread: every strategy off, or every one on again.
 * Returns the new position. */
bool gw_chaos_toggle(gw_chaos *c);
bool gw_chaos_enabled(const gw_chaos *c);
/* Injections so far, over every strategy. */
uint64_t gw_chaos_injected(const gw_chaos *c);
/* The seed in use (drawn from the OS when --chaos-seed was not given),
 * which --chaos-seed replays. */
uint64_t gw_chaos_seed(const gw_chaos *c);

/* The access log's field for an action, without the leading space:
 * "chaos=latency:2s", "chaos=status:503", "chaos=latency:2s,drop"; "" when
 * nothing was injected. */
void gw_chaos_note(const gw_chaos_action *a, char *buf, size_t cap);
/* The start-up line's description: "status 0.1:503:30, latency 0.2:2s,
 * drop 0.05". */
void gw_chaos_describe(const gw_chaos *c, char *buf, size_t cap);

#endif
