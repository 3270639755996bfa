/*
 * engine.c — the event heap and the run loop (see engine.h for the shape).
 *
 * The heap holds 16-byte events by value: a dispatch touches one contiguous
 * array and nothing else, which is what keeps the engine above several
 * million events per second. Ordering is strict (time, then sequence), never by
 * address or by the heap's internal layout, so a run is reproducible.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static resil_instant clock_now(resil_clock *self)
{
    const resil__sim_clock *c = (const resil__sim_clock *)self;
    return c->engine->now;
}

/* Simulated wall time: an arbitrary fixed epoch plus virtual time, so that
 * nothing in a run depends on the real date. */
static int64_t clock_wall_now(resil_clock *self)
{
    return RESIL_S(1600000000) + clock_now(self);
}

/* Nothing inside a simulation may block: time moves only between events. */
static int clock_sleep(resil_clock *self, resil_duration d, resil_cancel *cancel)
{
    return RESIL_EUNSUPPORTED;
}

int resil__sim_engine_init(resil__sim_engine *e, size_t initial_cap)
{
    memset(e, 0, sizeof *e);
    e->clock.base.now = clock_now;
    e->clock.base.wall_now = clock_wall_now;
    e->clock.base.sleep = clock_sleep;
    e->clock.engine = e;
    if (initial_cap < 16)
        initial_cap = 16;
    e->heap = malloc(initial_cap * sizeof *e->heap);
    if (e->heap == NULL)
        return RESIL_ENOMEM;
    e->cap = initial_cap;
    return 0;
}

void resil__sim_engine_free(resil__sim_engine *e)
{
    free(e->heap);
    e->heap = NULL;
    e->len = e->cap = 0;
}

void resil__sim_engine_reset(resil__sim_engine *e)
{
    e->len = 0;
    e->seq = 0;
    e->now = 0;
    e->dispatched = 0;
    e->root_consumed = false;
    e->stopped = false;
    e->error = 0;
    e->cause = NULL;
}

static bool before(const resil__sim_event *a, const resil__sim_event *b)
{
    if (a->at != b->at)
        return a->at < b->at;
    return a->key < b->key;
}

static void sift_up(resil__sim_event *h, size_t i)
{
    resil__sim_event x = h[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&x, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = x;
}

static void sift_down(resil__sim_event *h, size_t len, size_t i)
{
    resil__sim_event x = h[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= len)
            break;
        if (child + 1 < len && before(&h[child + 1], &h[child]))
            child++;
        if (!before(&h[child], &x))
            break;
        h[i] = h[child];
        i = child;
    }
    h[i] = x;
}

void resil__sim_fail(resil__sim_engine *e, int code, const char *cause)
{
    if (e->error == 0) {
        e->error = code;
        e->cause = cause;
    }
}

static bool fail(resil__sim_engine *e, int code, const char *cause)
{
    resil__sim_fail(e, code, cause);
    return false;
}

static bool grow(resil__sim_engine *e)
{
    if (e->cap > SIZE_MAX / 2 / sizeof *e->heap)
        return fail(e, RESIL_ENOMEM, "the event heap cannot grow");
    size_t cap = e->cap * 2;
    resil__sim_event *heap = realloc(e->heap, cap * sizeof *heap);
    if (heap == NULL)
        return fail(e, RESIL_ENOMEM, "the event heap cannot grow");
    e->heap = heap;
    e->cap = cap;
    return true;
}

static bool encode(resil__sim_engine *e, uint32_t kind, uint32_t id, uint64_t *key)
{
    if (kind > RESIL__SIM_MAX_KIND || id > RESIL__SIM_MAX_ID)
        return fail(e, RESIL_ERANGE, "an event's kind or id is out of range");
    if (e->seq >= (UINT64_C(1) << RESIL__SIM_SEQ_BITS))
        return fail(e, RESIL_ERANGE, "more than 2^36 events in one run");
    *key = e->seq++ << (RESIL__SIM_KIND_BITS + RESIL__SIM_ID_BITS) |
           (uint64_t)kind << RESIL__SIM_ID_BITS | id;
    return true;
}

void resil__sim_schedule(resil__sim_engine *e, resil_instant at, uint32_t kind,
                         uint32_t id)
{
    resil__sim_event ev = {at < e->now ? e->now : at, 0};
    if (at == RESIL_INSTANT_MAX) {
        resil__sim_fail(e, RESIL_ERANGE, RESIL__SIM_END_OF_TIME);
        return;
    }
    if (!encode(e, kind, id, &ev.key))
        return;
    if (e->root_consumed) {
        e->root_consumed = false;
        e->heap[0] = ev;
        sift_down(e->heap, e->len, 0);
        return;
    }
    if (e->len == e->cap && !grow(e))
        return;
    e->heap[e->len] = ev;
    sift_up(e->heap, e->len++);
}

static void drop_root(resil__sim_engine *e)
{
    e->root_consumed = false;
    e->len--;
    if (e->len == 0)
        return;
    e->heap[0] = e->heap[e->len];
    sift_down(e->heap, e->len, 0);
}

int resil__sim_run(resil__sim_engine *e, resil_instant until,
                   resil__sim_handler handler, void *model)
{
    e->stopped = false;
    while (e->len > 0 && e->error == 0 && !e->stopped) {
        if (e->heap[0].at > until)
            break;
        resil__sim_event ev = e->heap[0];
        e->now = ev.at;
        e->root_consumed = true;
        handler(model, e, &ev);
        if (e->root_consumed)
            drop_root(e);
        e->dispatched++;
    }
    if (e->now < until && until != RESIL_INSTANT_MAX && e->error == 0 && !e->stopped)
        e->now = until;
    return e->error;
}

void resil__sim_stop(resil__sim_engine *e)
{
    e->stopped = true;
}
