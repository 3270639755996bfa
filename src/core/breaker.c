/*
 * breaker.c — the circuit breaker's state machine and call protocol.
 *
 * The shape is set by the cost target: a closed breaker must admit a call
 * and take its success in a few nanoseconds, without a lock. So the state
 * that the closed path needs lives in one atomic 64-bit word —
 *
 *     generation (32 bits) | state (3 bits) | consecutive failures (29 bits)
 *
 * — and acquire in the closed state is a single load. Recording a result
 * against that word is a compare-and-swap that also checks the generation,
 * so a stale failure can never be counted into a newer generation, and a
 * success that ends no failure run writes nothing at all (no cache line
 * bouncing between threads sharing a healthy breaker). Every transition,
 * the rolling window, half-open probes and the event queue are guarded by
 * the breaker's mutex; transitions publish a new word with a release store.
 * The word is written only by transitions (under the mutex) and by those
 * CASes, so the fast path never sees a half-made change.
 *
 * The window is either the rolling time window or the count window (the
 * last window_size calls in a ring, allocated with the breaker); the rules
 * read the same three running sums from either, so the ratio, slow-call
 * and predicate rules do not care which. The predicate is asked under the
 * mutex, on failures only, after the built-in rules.
 *
 * Events are queued under the mutex and delivered after it is released by
 * whichever thread finds no delivery in progress (see breaker.h for the
 * ordering guarantee). Each locked section makes at most one transition and
 * first waits for one free queue slot, which is what makes "never lost"
 * hold without allocating.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include "breaker_hot.h"
#include "breaker_internal.h"

static const resil_breaker_ops builtin_ops;
static bool is_builtin(const resil_breaker *b) { return b->ops == &builtin_ops; }

/* The ratio, slow-call or predicate rule needs the window. */
static bool window_needed(const resil_breaker_opts *o)
{
    return (o->kind & (RESIL_BREAKER_RATIO | RESIL_BREAKER_PREDICATE)) != 0 ||
           o->slow_call_duration > 0;
}

/* The shortest span the breaker measures: what its clock must resolve. */
static resil_duration finest_span(const resil_breaker_opts *o)
{
    resil_duration f = o->break_duration;
    if (o->window == RESIL_BREAKER_WINDOW_TIME && o->sampling_duration / RESIL__WINDOW_BUCKETS < f)
        f = o->sampling_duration / RESIL__WINDOW_BUCKETS;
    if (o->probe_timeout > 0 && o->probe_timeout < f)
        f = o->probe_timeout;
    return f;
}

/* The caller's clock; else the coarse clock where its resolution suffices
 * (see internal.h), except under the slow-call rule, which times calls. */
static resil_clock *clock_of(const resil_breaker_opts *o)
{
    if (o->clock != NULL)
        return o->clock;
    if (o->slow_call_duration > 0)
        return resil_clock_system();
    return resil__clock_for(finest_span(o));
}

/* Ours (the system and the coarse clock, given or chosen) are read
 * without their table's call. */
static void take_clock(resil__brk_builtin *b, const resil_breaker_opts *o)
{
    b->clock = clock_of(o);
    b->clock_id = resil__clock_id(b->clock);
}

static uint8_t success_work(const resil__brk_builtin *b)
{
    if (!b->window_on)
        return RESIL__BRK_SUCCESS_NOTHING;
    return b->count_window || b->slow_on ? RESIL__BRK_SUCCESS_GENERAL : RESIL__BRK_SUCCESS_CELL;
}

/* ---- life -------------------------------------------------------------- */

static void init_from_opts(resil__brk_builtin *b, const resil_breaker_opts *o)
{
    b->opts = *o;
    b->opts.name = NULL;
    if (o->name != NULL)
        memcpy(b->name, o->name, strlen(o->name) + 1);
    take_clock(b, o);
    b->failure_threshold = o->failure_threshold;
    b->trips_on_consecutive = (o->kind & RESIL_BREAKER_CONSECUTIVE) != 0;
    b->trips_on_ratio = (o->kind & RESIL_BREAKER_RATIO) != 0;
    b->slow_on = o->slow_call_duration > 0;
    b->slow_call_duration = o->slow_call_duration;
    b->trips_on_predicate = (o->kind & RESIL_BREAKER_PREDICATE) != 0;
    b->window_on = window_needed(o);
    b->count_window = o->window == RESIL_BREAKER_WINDOW_COUNT;
    b->clock_on = b->slow_on || (b->window_on && !b->count_window);
    b->minimum_throughput = o->minimum_throughput;
    if (b->count_window && b->minimum_throughput > o->window_size)
        b->minimum_throughput = o->window_size; /* resilience4j's rule */
    b->current_break = o->break_duration;
    resil__window_init(&b->window, o->sampling_duration);
    resil__ring_init(&b->ring, (uint8_t *)(b->probes + o->half_open_probes),
                     b->count_window ? o->window_size : 0);
    atomic_init(&b->handle.word, resil__brk_make_word(0, RESIL_BREAKER_CLOSED, 0));
    atomic_init(&b->open_until, 0);
    atomic_init(&b->refs, 1);
    b->handle.ops = &builtin_ops;
    b->handle.self = b;
    b->handle.success = success_work(b);
}

int resil_breaker_new(const resil_breaker_opts *o, resil_breaker **out,
                      resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "breaker: out must not be NULL");
    *out = NULL;
    int rc = resil_breaker_opts_validate(o, err);
    if (rc != 0)
        return rc;
    resil__brk_builtin *b = resil__line_alloc(sizeof *b);
    if (b == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "breaker: out of memory");
    /* The probe slots, then the count window's ring (if any), in one block. */
    size_t ring = o->window == RESIL_BREAKER_WINDOW_COUNT ? o->window_size : 0;
    b->probes = calloc(1, o->half_open_probes * sizeof *b->probes + ring);
    if (b->probes == NULL) {
        free(b);
        return resil_err_set(err, RESIL_ENOMEM, "breaker: out of memory");
    }
    if (o->window == RESIL_BREAKER_WINDOW_TIME && window_needed(o) &&
        resil__window_cells_init(&b->cells, o->sampling_duration) != 0) {
        free(b->probes);
        free(b);
        return resil_err_set(err, RESIL_ENOMEM, "breaker: out of memory");
    }
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        resil__window_cells_free(&b->cells);
        free(b->probes);
        free(b);
        return resil_err_set(err, RESIL_ESYS, "breaker: pthread_mutex_init failed");
    }
    if (pthread_cond_init(&b->room, NULL) != 0) {
        pthread_mutex_destroy(&b->mu);
        resil__window_cells_free(&b->cells);
        free(b->probes);
        free(b);
        return resil_err_set(err, RESIL_ESYS, "breaker: pthread_cond_init failed");
    }
    init_from_opts(b, o);
    *out = &b->handle;
    return 0;
}

static void builtin_destroy(void *self)
{
    resil__brk_builtin *b = self;
    pthread_cond_destroy(&b->room);
    pthread_mutex_destroy(&b->mu);
    resil__window_cells_free(&b->cells);
    free(b->probes);
    free(b);
}

#define OPS_HAS(ops, field) RESIL__OPS_HAS(resil_breaker_ops, ops, field)

int resil_breaker_new_custom(const resil_breaker_ops *ops, void *self, const char *name,
                             resil_breaker **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "breaker: out must not be NULL");
    *out = NULL;
    if (ops == NULL || !OPS_HAS(ops, acquire) || !OPS_HAS(ops, record) ||
        !OPS_HAS(ops, state) || !OPS_HAS(ops, stats) || !OPS_HAS(ops, control))
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker: ops needs size, acquire, record, state, stats "
                             "and control");
    if (name != NULL && strlen(name) >= RESIL_BREAKER_NAME_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "breaker.name must be shorter than %d bytes, got %zu",
                             RESIL_BREAKER_NAME_MAX, strlen(name));
    resil__brk_custom *c = calloc(1, sizeof *c);
    if (c == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "breaker: out of memory");
    c->handle.ops = ops;
    c->handle.self = self;
    atomic_init(&c->handle.word, resil__brk_make_word(0, RESIL__BRK_OTHER, 0));
    atomic_init(&c->refs, 1);
    snprintf(c->name, sizeof c->name, "%s", name != NULL ? name : "");
    *out = &c->handle;
    return 0;
}

static _Atomic uint32_t *refs_of(resil_breaker *b)
{
    return is_builtin(b) ? &resil__brk_as_builtin(b)->refs : &((resil__brk_custom *)b)->refs;
}

resil_breaker *resil_breaker_retain(resil_breaker *b)
{
    if (b != NULL)
        atomic_fetch_add_explicit(refs_of(b), 1, memory_order_relaxed);
    return b;
}

void resil_breaker_free(resil_breaker *b)
{
    if (b == NULL)
        return;
    if (atomic_fetch_sub_explicit(refs_of(b), 1, memory_order_acq_rel) != 1)
        return;
    if (is_builtin(b)) {
        builtin_destroy(b->self);
        return;
    }
    if (OPS_HAS(b->ops, destroy))
        b->ops->destroy(b->self);
    free(b);
}

const char *resil_breaker_name(const resil_breaker *b)
{
    if (b == NULL)
        return "";
    return is_builtin(b) ? resil__brk_as_builtin(b)->name : ((const resil__brk_custom *)b)->name;
}

void *resil_breaker_self(const resil_breaker *b, const resil_breaker_ops *ops)
{
    return b != NULL && b->ops == ops ? b->self : NULL;
}

const char *resil_breaker_kind_name(const resil_breaker *b)
{
    if (b == NULL)
        return "none";
    return b->ops->kind != NULL ? b->ops->kind : "custom";
}

/* ---- events ------------------------------------------------------------ */

/* Called first in every locked section that may make a transition: wait
 * until the queue has room for one event. The deliverer itself (a listener
 * calling back into the breaker) cannot wait for itself; it may drop. */
static void reserve_event_slot(resil__brk_builtin *b)
{
    if (b->opts.listener == NULL)
        return;
    while (b->queue_len == RESIL_BREAKER_EVENT_QUEUE && b->delivering &&
           !pthread_equal(b->deliverer, pthread_self()))
        pthread_cond_wait(&b->room, &b->mu);
}

static void queue_event(resil__brk_builtin *b, const resil_breaker_event *ev)
{
    if (b->opts.listener == NULL)
        return;
    if (b->queue_len == RESIL_BREAKER_EVENT_QUEUE) {
        b->events_dropped++;
        return;
    }
    b->queue[(b->queue_head + b->queue_len) % RESIL_BREAKER_EVENT_QUEUE] = *ev;
    b->queue_len++;
}

/* Unlock, then deliver queued events unless another thread already is. */
static void unlock_and_deliver(resil__brk_builtin *b)
{
    if (b->queue_len == 0 || b->delivering) {
        pthread_mutex_unlock(&b->mu);
        return;
    }
    b->delivering = true;
    b->deliverer = pthread_self();
    while (b->queue_len > 0) {
        resil_breaker_event ev = b->queue[b->queue_head];
        b->queue_head = (b->queue_head + 1) % RESIL_BREAKER_EVENT_QUEUE;
        b->queue_len--;
        pthread_cond_broadcast(&b->room);
        pthread_mutex_unlock(&b->mu);
        b->opts.listener(&b->handle, &ev, b->opts.listener_ud);
        pthread_mutex_lock(&b->mu);
    }
    b->delivering = false;
    pthread_cond_broadcast(&b->room);
    pthread_mutex_unlock(&b->mu);
}

static void lock_for_transition(resil__brk_builtin *b)
{
    pthread_mutex_lock(&b->mu);
    reserve_event_slot(b);
}

/* ---- transitions (under mu) ------------------------------------------- */

static void free_probes(resil__brk_builtin *b)
{
    if (b->probes_in_flight > 0) /* a slot is taken exactly when it is counted */
        memset(b->probes, 0, b->opts.half_open_probes * sizeof *b->probes);
    b->probes_in_flight = 0;
    b->consecutive_successes = 0;
}

static resil_duration grown_break(const resil__brk_builtin *b)
{
    resil_duration grown = resil_dur_mul(b->current_break, b->opts.break_growth);
    return grown < b->opts.max_break_duration ? grown : b->opts.max_break_duration;
}

static void enter_open(resil__brk_builtin *b, resil_breaker_state from, resil_instant now)
{
    if (from == RESIL_BREAKER_HALF_OPEN && b->opts.break_growth > 1.0)
        b->current_break = grown_break(b);
    else if (from != RESIL_BREAKER_HALF_OPEN)
        b->current_break = b->opts.break_duration;
    atomic_store_explicit(&b->open_until, resil_dur_add(now, b->current_break),
                          memory_order_relaxed);
    b->ever_opened = true;
    b->last_opened_at = now;
    b->opens++;
}

static void enter_closed(resil__brk_builtin *b)
{
    resil__window_cells_stop(&b->cells, &b->window, false);
    resil__window_clear(&b->window);
    resil__ring_clear(&b->ring);
    b->current_break = b->opts.break_duration;
}

static void transition(resil__brk_builtin *b, resil_breaker_state to,
                       resil_breaker_reason reason, resil_instant now)
{
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    resil_breaker_state from = resil__brk_word_state(w);
    uint32_t gen = resil__brk_word_gen(w) + 1;
    free_probes(b);
    if (to == RESIL_BREAKER_OPEN)
        enter_open(b, from, now);
    else if (to == RESIL_BREAKER_CLOSED)
        enter_closed(b);
    atomic_store_explicit(&b->handle.word, resil__brk_make_word(gen, to, 0), memory_order_release);
    /* After the word: a success that read the old epoch either landed
     * before this sweep (and goes with its generation) or fails its CAS. */
    if (to != RESIL_BREAKER_CLOSED)
        resil__window_cells_stop(&b->cells, &b->window, true);
    b->transitions++;
    resil_breaker_event ev = {from, to, reason, now, gen,
                              to == RESIL_BREAKER_OPEN ? b->current_break : 0};
    queue_event(b, &ev);
}

/* ---- acquire ----------------------------------------------------------- */


static int reject(resil_breaker_permit *p, uint64_t w, resil_duration retry_after)
{
    resil__brk_admit(p, w, 0);
    p->retry_after = retry_after < 0 ? 0 : retry_after;
    return RESIL_EREJECTED;
}

static resil_duration probe_timeout(const resil__brk_builtin *b)
{
    return b->opts.probe_timeout > 0 ? b->opts.probe_timeout : b->current_break;
}

/* The slot a newcomer may take: a free one, else one whose probe has been
 * out for probe_timeout; else none, and *expiry says when one will be. */
static resil__brk_probe_slot *find_probe_slot(resil__brk_builtin *b, resil_instant now,
                                   resil_instant *expiry)
{
    resil__brk_probe_slot *oldest = NULL;
    for (uint32_t i = 0; i < b->opts.half_open_probes; i++) {
        resil__brk_probe_slot *s = &b->probes[i];
        if (s->ticket == 0)
            return s;
        if (oldest == NULL || s->start < oldest->start)
            oldest = s;
    }
    *expiry = resil_dur_add(oldest->start, probe_timeout(b));
    return now >= *expiry ? oldest : NULL;
}

static int admit_probe(resil__brk_builtin *b, resil_breaker_permit *p, resil_instant now)
{
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    resil_instant expiry = 0;
    resil__brk_probe_slot *s = find_probe_slot(b, now, &expiry);
    if (s == NULL)
        return reject(p, w, resil_dur_sub(expiry, now));
    if (s->ticket == 0)
        b->probes_in_flight++;
    if (++b->next_ticket == 0)
        b->next_ticket = 1;
    s->ticket = b->next_ticket;
    s->start = now;
    resil__brk_admit(p, w, now);
    p->probe = true;
    p->probe_slot = (uint32_t)(s - b->probes);
    p->probe_ticket = s->ticket;
    return 0;
}

/* The slow path: open with the break elapsed, or half-open. */
static int acquire_locked(resil__brk_builtin *b, resil_breaker_permit *p, resil_instant now)
{
    lock_for_transition(b);
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    int rc = 0;
    switch (resil__brk_word_state(w)) {
    case RESIL_BREAKER_CLOSED:
    case RESIL_BREAKER_DISABLED:
        resil__brk_admit(p, w, b->slow_on ? now : 0);
        break;
    case RESIL_BREAKER_ISOLATED:
        rc = reject(p, w, RESIL_DURATION_MAX);
        break;
    case RESIL_BREAKER_OPEN: {
        resil_instant until = atomic_load_explicit(&b->open_until, memory_order_relaxed);
        if (now < until) {
            rc = reject(p, w, until - now);
            break;
        }
        transition(b, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_BY_BREAK_ELAPSED, now);
        rc = admit_probe(b, p, now);
        break;
    }
    case RESIL_BREAKER_HALF_OPEN:
        rc = admit_probe(b, p, now);
        break;
    default:
        rc = reject(p, w, RESIL_DURATION_MAX);
        break;
    }
    unlock_and_deliver(b);
    return rc;
}

/* Open: a rejection until the break has elapsed. Out of line, and reached
 * from the entry without the dispatch by state. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
int resil__breaker_acquire_open(resil__brk_builtin *b, resil_breaker_permit *p, uint64_t w)
{
    resil_instant now = resil__brk_now_of(b);
    resil_instant until = atomic_load_explicit(&b->open_until, memory_order_relaxed);
    if (now < until)
        return reject(p, w, until - now);
    return acquire_locked(b, p, now);
}

/* `w` is the handle's word: in state RESIL__BRK_OTHER the breaker is not
 * ours. Out of line, so that the closed path's entry keeps no frame. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
int resil__breaker_acquire_rest(resil_breaker *h, resil_breaker_permit *p, uint64_t w)
{
    resil__brk_builtin *b = resil__brk_as_builtin(h);
    switch (resil__brk_word_state(w)) {
    case RESIL_BREAKER_CLOSED:
        resil__brk_admit(p, w, b->slow_on ? resil__brk_now_of(b) : 0);
        return 0;
    case RESIL_BREAKER_DISABLED:
        resil__brk_admit(p, w, 0);
        return 0;
    case RESIL_BREAKER_ISOLATED:
        return reject(p, w, RESIL_DURATION_MAX);
    case RESIL_BREAKER_OPEN:
        return resil__breaker_acquire_open(b, p, w);
    case RESIL_BREAKER_HALF_OPEN:
        return acquire_locked(b, p, resil__brk_now_of(b));
    default:
        return h->ops->acquire(h->self, p);
    }
}

/* ---- record ------------------------------------------------------------ */

/* A success ends a failure run: one CAS, and only if there was a run. */
static int note_success(resil__brk_builtin *b, uint64_t w, uint32_t gen)
{
    for (;;) {
        if (resil__brk_word_gen(w) != gen || resil__brk_word_state(w) != RESIL_BREAKER_CLOSED)
            return RESIL_ESTATE;
        if (resil__brk_word_count(w) == 0)
            return 0;
        uint64_t cleared = resil__brk_make_word(gen, RESIL_BREAKER_CLOSED, 0);
        if (atomic_compare_exchange_weak_explicit(&b->handle.word, &w, cleared,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            return 0;
    }
}

/* A failure extends the run; *tripped when it reaches the threshold. */
static int note_failure(resil__brk_builtin *b, uint64_t w, uint32_t gen, bool *tripped)
{
    for (;;) {
        if (resil__brk_word_gen(w) != gen || resil__brk_word_state(w) != RESIL_BREAKER_CLOSED)
            return RESIL_ESTATE;
        uint32_t count = resil__brk_word_count(w);
        if (count < RESIL__BRK_COUNT_MAX)
            count++;
        uint64_t longer = resil__brk_make_word(gen, RESIL_BREAKER_CLOSED, count);
        if (atomic_compare_exchange_weak_explicit(&b->handle.word, &w, longer,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *tripped = b->trips_on_consecutive && count >= b->failure_threshold;
            return 0;
        }
    }
}

/* Is the generation `gen` still the closed one? (under mu) */
static bool still_closed(resil__brk_builtin *b, uint32_t gen)
{
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    return resil__brk_word_gen(w) == gen && resil__brk_word_state(w) == RESIL_BREAKER_CLOSED;
}

static void trip_consecutive(resil__brk_builtin *b, uint32_t gen)
{
    resil_instant now = resil__brk_now_of(b);
    lock_for_transition(b);
    if (still_closed(b, gen))
        transition(b, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_CONSECUTIVE, now);
    unlock_and_deliver(b);
}

/* Ask the application's predicate (under mu, on a failure). */
static bool predicate_trips(resil__brk_builtin *b, const resil__window_counts *c)
{
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    resil_breaker_counts counts = {c->total, c->total - c->failures, c->failures, c->slow,
                                   resil__brk_word_count(w), 0};
    return b->opts.trip(&counts, b->opts.trip_ud);
}

static resil_breaker_reason window_verdict(resil__brk_builtin *b, bool failure, bool slow,
                                           bool tripped)
{
    const resil__window_counts *c = b->count_window ? &b->ring.sum : &b->window.sum;
    uint32_t min = b->minimum_throughput;
    if (tripped)
        return RESIL_BREAKER_BY_CONSECUTIVE;
    if (failure && b->trips_on_ratio &&
        resil__window_share_reached(c->failures, c->total, min, b->opts.failure_ratio))
        return RESIL_BREAKER_BY_RATIO;
    if (slow && resil__window_share_reached(c->slow, c->total, min, b->opts.slow_call_ratio))
        return RESIL_BREAKER_BY_SLOW_CALLS;
    if (failure && b->trips_on_predicate && predicate_trips(b, c))
        return RESIL_BREAKER_BY_PREDICATE;
    return 0;
}

static void window_add(resil__brk_builtin *b, resil_instant now, bool failure, bool slow)
{
    if (b->count_window)
        resil__ring_add(&b->ring, failure, slow);
    else
        resil__window_add(&b->window, now, failure, slow);
}

/* Out of line: a closed breaker's success takes it only when its bucket
 * has ended, so its frame stays off the common path. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int record_in_window(resil__brk_builtin *b, uint32_t gen, bool failure, bool slow,
                            bool tripped, resil_instant now)
{
    lock_for_transition(b);
    if (!still_closed(b, gen)) {
        unlock_and_deliver(b);
        return RESIL_ESTATE;
    }
    resil__window_cells_fold(&b->cells, &b->window);
    window_add(b, now, failure, slow);
    resil_breaker_reason why = window_verdict(b, failure, slow, tripped);
    if (why != 0)
        transition(b, RESIL_BREAKER_OPEN, why, b->clock_on ? now : resil__brk_now_of(b));
    else if (!b->count_window)
        resil__window_cells_follow(&b->cells, &b->window);
    unlock_and_deliver(b);
    return 0;
}

static resil_instant now_or_read(resil__brk_builtin *b, resil_instant known)
{
    return known != RESIL__BRK_READ_CLOCK ? known : resil__brk_now_of(b);
}

/* The window's part of a closed result: a success counted on the CPU's
 * cell, or the locked path. */
static int record_windowed(resil__brk_builtin *b, const resil_breaker_permit *p, bool failure,
                           bool tripped, resil_instant known)
{
    uint32_t gen = p->generation;
    resil_instant now = b->clock_on ? now_or_read(b, known) : 0; /* the ring needs none */
    bool slow = b->slow_on && resil_dur_sub(now, p->start) > b->slow_call_duration;
    if (!failure && !slow && !b->count_window && resil__brk_count_success(b, gen, now))
        return 0;
    return record_in_window(b, gen, failure, slow, tripped, now);
}

static int record_closed(resil__brk_builtin *b, const resil_breaker_permit *p,
                         resil_breaker_result r, uint64_t w, resil_instant known)
{
    uint32_t gen = p->generation;
    if (r == RESIL_BREAKER_IGNORED)
        return 0;
    bool failure = r == RESIL_BREAKER_FAILURE;
    bool tripped = false;
    int rc = failure ? note_failure(b, w, gen, &tripped) : note_success(b, w, gen);
    if (rc != 0)
        return rc;
    if (!b->window_on) {
        if (tripped)
            trip_consecutive(b, gen);
        return 0;
    }
    return record_windowed(b, p, failure, tripped, known);
}

static int record_probe(resil__brk_builtin *b, const resil_breaker_permit *p,
                        resil_breaker_result r, resil_instant known)
{
    resil_instant now = now_or_read(b, known);
    lock_for_transition(b);
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    if (resil__brk_word_gen(w) != p->generation ||
        resil__brk_word_state(w) != RESIL_BREAKER_HALF_OPEN ||
        p->probe_slot >= b->opts.half_open_probes ||
        b->probes[p->probe_slot].ticket != p->probe_ticket) {
        unlock_and_deliver(b);
        return RESIL_ESTATE;
    }
    resil__brk_probe_slot *s = &b->probes[p->probe_slot];
    s->ticket = 0;
    b->probes_in_flight--;
    bool slow = b->slow_on && resil_dur_sub(now, p->start) > b->slow_call_duration;
    if (r == RESIL_BREAKER_FAILURE || (r == RESIL_BREAKER_SUCCESS && slow))
        transition(b, RESIL_BREAKER_OPEN, RESIL_BREAKER_BY_PROBE_FAILED, now);
    else if (r == RESIL_BREAKER_SUCCESS &&
             ++b->consecutive_successes >= b->opts.success_threshold)
        transition(b, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_PROBES_SUCCEEDED, now);
    unlock_and_deliver(b);
    return 0;
}

/* Everything but a closed success the handle's success byte covers; out
 * of line, so that such a success's entry keeps no frame. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
int resil__breaker_record_rest(resil_breaker *h, const resil_breaker_permit *p,
                               resil_breaker_result r, resil_instant known)
{
    uint64_t w = atomic_load_explicit(&h->word, memory_order_acquire);
    if (p->probe && resil__brk_word_state(w) != RESIL__BRK_OTHER)
        return record_probe(resil__brk_as_builtin(h), p, r, known);
    if (resil__brk_word_gen(w) == p->generation &&
        resil__brk_word_state(w) == RESIL_BREAKER_CLOSED)
        return record_closed(resil__brk_as_builtin(h), p, r, w, known);
    if (resil__brk_word_state(w) == RESIL__BRK_OTHER)
        return h->ops->record(h->self, p, r);
    return RESIL_ESTATE;
}

/* ---- the handle's call path ------------------------------------------- */

/* The built-in breaker is called directly, the others through their table,
 * found by the state RESIL__BRK_OTHER in the word the built-in path reads
 * first. A closed breaker that reads no clock on admission admits here. */
int resil_breaker_acquire(resil_breaker *b, resil_breaker_permit *p)
{
    if (p == NULL)
        return RESIL_EINVAL;
    if (b == NULL) {
        memset(p, 0, sizeof *p);
        p->state = RESIL_BREAKER_NONE;
        return 0;
    }
    return resil__breaker_admit(b, p);
}

int resil_breaker_record(resil_breaker *b, const resil_breaker_permit *p,
                         resil_breaker_result r)
{
    return resil__breaker_record_known(b, p, r, RESIL__BRK_READ_CLOCK);
}

int resil_breaker_record_at(resil_breaker *b, const resil_breaker_permit *p,
                            resil_breaker_result r, resil_instant now)
{
    return resil__breaker_record_known(b, p, r, resil__breaker_known(now));
}

/* ---- results without a permit ------------------------------------------ */

/* A call timed elsewhere counts as one admitted now in the current
 * generation that started `took` ago; only the closed state takes it. */
static int builtin_record_without_permit(resil__brk_builtin *b, resil_breaker_result r,
                                         resil_duration took)
{
    uint64_t w = resil__brk_load_word(b);
    if (resil__brk_word_state(w) != RESIL_BREAKER_CLOSED)
        return RESIL_ESTATE;
    resil_breaker_permit p;
    resil_instant now = b->clock_on ? resil__brk_now_of(b) : RESIL__BRK_READ_CLOCK;
    resil__brk_admit(&p, w, b->slow_on ? resil_dur_sub(now, took) : 0);
    /* Through the permit path, which stays one out-of-line call from the
     * handle: the closed path compiles as it did before this entry point. */
    return resil__breaker_record_rest(&b->handle, &p, r, now);
}

static int record_without_permit(resil_breaker *b, resil_breaker_result r,
                                 resil_duration took)
{
    if (took < 0)
        return RESIL_EINVAL;
    if (b == NULL)
        return 0;
    if (is_builtin(b))
        return builtin_record_without_permit(resil__brk_as_builtin(b), r, took);
    if (!OPS_HAS(b->ops, record_without_permit))
        return RESIL_EINVAL;
    return b->ops->record_without_permit(b->self, r, took);
}

int resil_breaker_record_success(resil_breaker *b, resil_duration took)
{
    return record_without_permit(b, RESIL_BREAKER_SUCCESS, took);
}

int resil_breaker_record_failure(resil_breaker *b, resil_duration took)
{
    return record_without_permit(b, RESIL_BREAKER_FAILURE, took);
}

static int builtin_record_without_permit_op(void *self, resil_breaker_result r,
                                            resil_duration took)
{
    return builtin_record_without_permit(self, r, took);
}

/* ---- execute ----------------------------------------------------------- */

resil_breaker_result resil_breaker_classify_default(const resil_outcome *o,
                                                    const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    if (o->kind == RESIL_SUCCESS)
        return RESIL_BREAKER_SUCCESS;
    if (o->kind == RESIL_CANCELLED)
        return RESIL_BREAKER_IGNORED;
    return RESIL_BREAKER_FAILURE;
}

resil_outcome resil_breaker_rejection(resil_breaker_state state, resil_duration retry_after)
{
    const char *detail = state == RESIL_BREAKER_HALF_OPEN ? "circuit half-open"
                         : state == RESIL_BREAKER_ISOLATED ? "circuit isolated"
                                                           : "circuit open";
    return resil_fail_after(RESIL_REJECTED, RESIL_EREJECTED, detail, retry_after);
}

int resil_breaker_execute(resil_breaker *b, resil_op_fn op, resil_attempt_ctx *ctx,
                          resil_breaker_classify_fn classify, void *classify_ud,
                          resil_outcome *out)
{
    if (op == NULL || ctx == NULL || out == NULL)
        return RESIL_EINVAL;
    resil_breaker_permit p;
    if (resil_breaker_acquire(b, &p) == RESIL_EREJECTED) {
        *out = resil_breaker_rejection(p.state, p.retry_after);
        return RESIL_EREJECTED;
    }
    *out = op(ctx);
    if (classify == NULL)
        classify = resil_breaker_classify_default;
    resil_breaker_record(b, &p, classify(out, ctx, classify_ud));
    return 0;
}

/* ---- manual control ---------------------------------------------------- */

static void force(resil__brk_builtin *b, resil_breaker_state to, resil_breaker_reason why)
{
    resil_instant now = resil__brk_now_of(b);
    lock_for_transition(b);
    if (resil__brk_word_state(atomic_load_explicit(&b->handle.word, memory_order_relaxed)) != to)
        transition(b, to, why, now);
    unlock_and_deliver(b);
}

static void reset(resil__brk_builtin *b)
{
    resil_instant now = resil__brk_now_of(b);
    lock_for_transition(b);
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_relaxed);
    if (resil__brk_word_state(w) != RESIL_BREAKER_CLOSED) {
        transition(b, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_RESET, now);
    } else {
        /* No state change, no event; but calls admitted before the reset
         * must not count afterwards, so the generation still moves on. */
        enter_closed(b);
        uint32_t gen = resil__brk_word_gen(w) + 1;
        uint64_t closed = resil__brk_make_word(gen, RESIL_BREAKER_CLOSED, 0);
        atomic_store_explicit(&b->handle.word, closed, memory_order_release);
    }
    b->ever_opened = false;
    b->last_opened_at = 0;
    b->opens = 0;
    unlock_and_deliver(b);
}

static int builtin_control(void *self, resil_breaker_control op)
{
    resil__brk_builtin *b = self;
    switch (op) {
    case RESIL_BREAKER_DO_ISOLATE:
        force(b, RESIL_BREAKER_ISOLATED, RESIL_BREAKER_BY_ISOLATE);
        return 0;
    case RESIL_BREAKER_DO_CLOSE:
        force(b, RESIL_BREAKER_CLOSED, RESIL_BREAKER_BY_CLOSE);
        return 0;
    case RESIL_BREAKER_DO_RESET:
        reset(b);
        return 0;
    case RESIL_BREAKER_DO_DISABLE:
        force(b, RESIL_BREAKER_DISABLED, RESIL_BREAKER_BY_DISABLE);
        return 0;
    }
    return RESIL_EINVAL;
}

static int control(resil_breaker *b, resil_breaker_control op)
{
    return b != NULL ? b->ops->control(b->self, op) : 0;
}

int resil_breaker_isolate(resil_breaker *b) { return control(b, RESIL_BREAKER_DO_ISOLATE); }
int resil_breaker_close(resil_breaker *b) { return control(b, RESIL_BREAKER_DO_CLOSE); }
int resil_breaker_reset(resil_breaker *b) { return control(b, RESIL_BREAKER_DO_RESET); }
int resil_breaker_disable(resil_breaker *b) { return control(b, RESIL_BREAKER_DO_DISABLE); }

/* ---- diagnostics ------------------------------------------------------- */

static resil_breaker_state builtin_state(void *self)
{
    return resil__brk_word_state(resil__brk_load_word(self));
}

resil_breaker_state resil_breaker_state_of(const resil_breaker *b)
{
    if (b == NULL)
        return RESIL_BREAKER_NONE;
    resil_breaker_state s = resil__brk_word_state(atomic_load_explicit(&((resil_breaker *)b)->word,
                                                            memory_order_acquire));
    return s != RESIL__BRK_OTHER ? s : b->ops->state(b->self);
}

static bool builtin_idle(void *self)
{
    uint64_t w = resil__brk_load_word(self);
    return resil__brk_word_state(w) == RESIL_BREAKER_CLOSED && resil__brk_word_count(w) == 0;
}

bool resil__breaker_idle(const resil_breaker *b)
{
    return OPS_HAS(b->ops, idle) && b->ops->idle(b->self);
}

static double share(uint64_t part, uint64_t total)
{
    return total == 0 ? 0.0 : (double)part / (double)total;
}

static resil_instant next_probe_at(resil__brk_builtin *b, resil_breaker_state s)
{
    if (s == RESIL_BREAKER_OPEN)
        return atomic_load_explicit(&b->open_until, memory_order_relaxed);
    if (s == RESIL_BREAKER_ISOLATED)
        return RESIL_INSTANT_MAX;
    return 0;
}

static int builtin_stats(void *self, resil_breaker_stats *out)
{
    resil__brk_builtin *b = self;
    resil_instant now = resil__brk_now_of(b);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->mu);
    resil__window_cells_fold(&b->cells, &b->window);
    uint64_t w = atomic_load_explicit(&b->handle.word, memory_order_acquire);
    resil__window_counts c = b->count_window ? b->ring.sum
                                             : resil__window_totals(&b->window, now);
    out->state = resil__brk_word_state(w);
    out->consecutive_failures = resil__brk_word_count(w);
    out->consecutive_successes = b->consecutive_successes;
    out->probes_in_flight = b->probes_in_flight;
    out->window_total = c.total;
    out->window_failures = c.failures;
    out->window_slow = c.slow;
    out->failure_ratio = share(c.failures, c.total);
    out->slow_ratio = share(c.slow, c.total);
    out->ever_opened = b->ever_opened;
    out->last_opened_at = b->last_opened_at;
    out->opens = b->opens;
    out->next_probe_at = next_probe_at(b, out->state);
    out->current_break = b->current_break;
    out->generation = resil__brk_word_gen(w);
    out->transitions = b->transitions;
    out->events_dropped = b->events_dropped;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int resil_breaker_stats_get(resil_breaker *b, resil_breaker_stats *out)
{
    if (b == NULL || out == NULL)
        return RESIL_EINVAL;
    return b->ops->stats(b->self, out);
}

/* ---- the built-in table ------------------------------------------------ */

/* Through the handle, so that the call path has one caller to inline into. */
static int builtin_acquire_op(void *self, resil_breaker_permit *p)
{
    return resil_breaker_acquire(&((resil__brk_builtin *)self)->handle, p);
}

static int builtin_record_op(void *self, const resil_breaker_permit *p, resil_breaker_result r)
{
    return resil_breaker_record(&((resil__brk_builtin *)self)->handle, p, r);
}

static const resil_breaker_ops builtin_ops = {
    .size = sizeof(resil_breaker_ops),
    .kind = "builtin",
    .acquire = builtin_acquire_op,
    .record = builtin_record_op,
    .state = builtin_state,
    .stats = builtin_stats,
    .control = builtin_control,
    .idle = builtin_idle,
    .destroy = builtin_destroy,
    .record_without_permit = builtin_record_without_permit_op,
};
