/*
 * engine.h — the discrete-event core every simulator model runs on.
 *
 * Events are small values kept directly in a binary min-heap ordered by
 * (time, sequence). The sequence number breaks ties in scheduling order, so
 * two events at the same virtual instant always run in the same order and a
 * seed reproduces a run byte for byte. The heap array is the event pool: it
 * grows by doubling and is reused from run to run, so a model in steady state
 * schedules and dispatches without allocating.
 *
 * Most handlers schedule exactly one follow-up event (a message's reply, a
 * retry after its wait). The run loop exploits that: the event being handled
 * stays at the root until the handler schedules something, which then takes
 * its place with one sift-down instead of a pop and a push.
 *
 * The engine also owns the virtual clock handed to library objects that read
 * time (breakers, the ratio budget): it answers with the simulation's now.
 */
#ifndef RESIL_SIM_ENGINE_H
#define RESIL_SIM_ENGINE_H

#include "resil.h"

/*
 * An event is 16 bytes: its instant, and one word holding the sequence
 * number (high 36 bits), the model's event kind (4 bits) and the id of the
 * model object it concerns (24 bits). Comparing (at, word) therefore orders
 * by time, then by scheduling order; and four events share a cache line,
 * which matters once a model has a hundred thousand calls in flight. What an
 * event carries beyond kind and id lives in the model's object, which has
 * exactly one event pending at a time.
 */
#define RESIL__SIM_KIND_BITS 4
#define RESIL__SIM_ID_BITS 24
#define RESIL__SIM_SEQ_BITS 36
#define RESIL__SIM_MAX_KIND ((1u << RESIL__SIM_KIND_BITS) - 1)
#define RESIL__SIM_MAX_ID ((1u << RESIL__SIM_ID_BITS) - 1)

typedef struct resil__sim_event {
    resil_instant at;
    uint64_t key; /* seq << 28 | kind << 24 | id */
} resil__sim_event;

static inline uint32_t resil__sim_event_kind(const resil__sim_event *ev)
{
    return (uint32_t)(ev->key >> RESIL__SIM_ID_BITS) & RESIL__SIM_MAX_KIND;
}

static inline uint32_t resil__sim_event_id(const resil__sim_event *ev)
{
    return (uint32_t)ev->key & RESIL__SIM_MAX_ID;
}

typedef struct resil__sim_engine resil__sim_engine;

typedef void (*resil__sim_handler)(void *model, resil__sim_engine *e,
                                   const resil__sim_event *ev);

/* A resil_clock whose now() is the simulation's virtual time. */
typedef struct resil__sim_clock {
    resil_clock base;
    const resil__sim_engine *engine;
} resil__sim_clock;

struct resil__sim_engine {
    resil__sim_event *heap;
    size_t len, cap;
    uint64_t seq;
    resil_instant now;
    uint64_t dispatched; /* events handled since the last reset */
    bool root_consumed;  /* the root is the event being handled */
    bool stopped;
    int error;           /* sticky: RESIL_ENOMEM or RESIL_ERANGE */
    const char *cause;   /* with error: what ran out, for the model's message */
    resil__sim_clock clock;
};

int resil__sim_engine_init(resil__sim_engine *e, size_t initial_cap);
void resil__sim_engine_free(resil__sim_engine *e);
/* Forget every pending event and go back to time 0; keep the memory. */
void resil__sim_engine_reset(resil__sim_engine *e);

/* Schedule an event at `at` (clamped to now: time never runs backwards).
 * A failure — the pool cannot grow, an id or kind out of range, 2^36 events
 * in one run, an instant at RESIL_INSTANT_MAX (virtual time has run out:
 * a sum of waits saturated there, and what follows would all happen at
 * once) — is remembered and ends the run. */
void resil__sim_schedule(resil__sim_engine *e, resil_instant at, uint32_t kind,
                         uint32_t id);

/* Remember a model's own failure (the first one sticks), which ends the
 * run; `cause` is a static text saying what ran out. */
void resil__sim_fail(resil__sim_engine *e, int code, const char *cause);

#define RESIL__SIM_END_OF_TIME "virtual time ran past 292 years"

/* Dispatch events in (time, sequence) order until none is left, the next one
 * is past `until`, or a handler calls resil__sim_stop. Returns 0 or the
 * sticky error. */
int resil__sim_run(resil__sim_engine *e, resil_instant until,
                   resil__sim_handler handler, void *model);
void resil__sim_stop(resil__sim_engine *e);

static inline resil_instant resil__sim_now(const resil__sim_engine *e)
{
    return e->now;
}

static inline resil_clock *resil__sim_clock_of(resil__sim_engine *e)
{
    return &e->clock.base;
}

#endif
