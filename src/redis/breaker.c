/*
 * breaker.c — an instance's handle on a shared breaker: the cached shared
 * state that calls read, the counters they write, and the member hooks
 * through which the sync thread flushes and refreshes them. It is one
 * implementation of resil_breaker (a resil_breaker_ops table, redis_ops):
 * callers drive it with the common breaker API and never see this type.
 *
 * A call through a closed shared breaker must cost about what it costs
 * through a local one, so the hot path touches only this handle: acquire is
 * one atomic load of the cached word (epoch | state); a success is one
 * relaxed increment on a per-thread stripe (threads never bounce one cache
 * line between them) plus two reads that write only when a failure run
 * ends or a batch's first success lands. Failures are rarer and may
 * contend: they go to plain counters and check whether the fleet's last
 * known counts plus this batch would reach a rule — if so, the sync thread
 * is woken at once instead of at the next interval.
 *
 * The epoch in the cached word is the shared state's: the script moves it
 * on at every transition, and it starts from the server's clock whenever
 * the key is created, so "newer" is a plain comparison even across a Redis
 * restart. A result is counted only against the epoch that admitted it.
 *
 * The local fallback breaker is a full resil_breaker with the same rules.
 * With FLEET counting it is consulted only while Redis is down, and starts
 * fresh at each outage: it is reset when Redis comes back, not when it
 * goes, since calls fall back the moment the client is marked down and a
 * reset then would wipe the outage's first failures. With LOCAL counting
 * it does the counting always: its trip is pushed to Redis as the shared
 * trip, and it is reset when the shared state closes again.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

#define STRIPES 16
#define EVENT_QUEUE 16
#define PERMIT_FALLBACK 1u /* ext_flags: the local breaker decided */

typedef struct stripe {
    _Alignas(64) _Atomic uint64_t successes;
} stripe;

typedef struct probe_result {
    bool used;
    uint64_t epoch;
    uint64_t ticket;
    int result; /* 0 success, 1 failure, 2 ignored: the script's codes */
} probe_result;

typedef struct fleet_breaker {
    fleet_member member;
    resil_breaker *handle; /* ours, not a reference: it owns us */
    resil_breaker_listener_fn listener;
    void *listener_ud;
    resil_redis *client;
    resil_clock *clock;
    resil_breaker *local;
    resil_redis_counting counting;
    fleet_rules rules;
    bool consecutive_on, ratio_on, slow_on;
    resil_duration slow_call_duration;
    char name[RESIL_BREAKER_NAME_MAX];
    char key[FLEET_KEY_MAX];

    /* The cached shared state: written under mu, read by every call. */
    _Alignas(64) _Atomic uint64_t cached; /* epoch << 3 | state */
    _Atomic int64_t open_until_ns;        /* wall time */
    _Atomic int64_t probe_wait_ns;        /* half-open: no free slot before */
    _Atomic uint32_t fleet_run;
    _Atomic uint64_t fleet_total, fleet_failures, fleet_slow;

    /* This batch's counts (FLEET), and a local trip to push (LOCAL). */
    _Alignas(64) _Atomic uint64_t failures;
    _Atomic uint64_t slow;
    _Atomic uint32_t run;
    _Atomic bool any_success;
    _Atomic int trip;
    stripe ok[STRIPES];

    _Atomic int64_t current_break; /* the fleet's, as last synced */
    _Atomic uint64_t transitions;   /* shared changes this instance learnt */

    pthread_mutex_t mu; /* cache updates, the probe results, the events */
    probe_result *results; /* one per probe slot */
    int64_t last_refresh;  /* sync thread only */
    resil_breaker_event events[EVENT_QUEUE];
    unsigned ev_head, ev_len;
    bool delivering;
    uint64_t events_dropped;
} fleet_breaker;

static const resil_breaker_ops redis_ops;

#define STATE_MASK ((UINT64_C(1) << FLEET_STATE_BITS) - 1)

/* Epochs and states come from decoded answers, whose ranges fit the word. */
static uint64_t word(uint64_t epoch, resil_breaker_state s)
{
    return (epoch << FLEET_STATE_BITS) | (uint64_t)s;
}
static uint64_t word_epoch(uint64_t w) { return w >> FLEET_STATE_BITS; }
static resil_breaker_state word_state(uint64_t w)
{
    return (resil_breaker_state)(w & STATE_MASK);
}

static uint64_t load_cached(const fleet_breaker *b)
{
    return atomic_load_explicit(&((fleet_breaker *)b)->cached, memory_order_acquire);
}

static int64_t ms_to_ns(int64_t ms)
{
    if (ms > INT64_MAX / 1000000)
        return INT64_MAX;
    if (ms < INT64_MIN / 1000000)
        return INT64_MIN;
    return ms * 1000000;
}

/* The permit's private fields: ext[0] the epoch, ext[1] the probe ticket,
 * probe_slot the fleet's slot, ext_flags whether the local breaker decided. */
static uint64_t permit_epoch(const resil_breaker_permit *p) { return p->ext[0]; }
static bool permit_local(const resil_breaker_permit *p)
{
    return (p->ext_flags & PERMIT_FALLBACK) != 0;
}

static bool up(const fleet_breaker *b) { return resil__redis_up(b->client); }
static int64_t wall_ns(const fleet_breaker *b) { return resil_clock_wall_now(b->clock); }

static stripe *my_stripe(fleet_breaker *b)
{
    static _Atomic unsigned next;
    static _Thread_local unsigned mine = UINT_MAX;
    if (mine == UINT_MAX)
        mine = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % STRIPES;
    return &b->ok[mine];
}

static uint64_t pending_successes(fleet_breaker *b, bool take)
{
    uint64_t n = 0;
    for (int i = 0; i < STRIPES; i++)
        n += take ? atomic_exchange_explicit(&b->ok[i].successes, 0, memory_order_relaxed)
                  : atomic_load_explicit(&b->ok[i].successes, memory_order_relaxed);
    return n;
}

/* The batch: taken by the sync thread, or dropped on a new epoch or outage. */
typedef struct batch {
    uint64_t successes, failures, slow;
    uint32_t run;
    bool any_success;
} batch;

static batch take_batch(fleet_breaker *b)
{
    batch t;
    t.successes = pending_successes(b, true);
    t.failures = atomic_exchange_explicit(&b->failures, 0, memory_order_relaxed);
    t.slow = atomic_exchange_explicit(&b->slow, 0, memory_order_relaxed);
    t.run = atomic_exchange_explicit(&b->run, 0, memory_order_relaxed);
    t.any_success = atomic_exchange_explicit(&b->any_success, false, memory_order_relaxed);
    return t;
}

/* ---- learning the shared state (under no lock of ours; takes mu) ---------- */

static void set_fleet_counts(fleet_breaker *b, const fleet_state *s)
{
    atomic_store_explicit(&b->fleet_run, s->run, memory_order_relaxed);
    atomic_store_explicit(&b->fleet_total, s->window_total, memory_order_relaxed);
    atomic_store_explicit(&b->fleet_failures, s->window_failures, memory_order_relaxed);
    atomic_store_explicit(&b->fleet_slow, s->window_slow, memory_order_relaxed);
}

/* Queue the change for the breaker's listener (under mu). */
static void queue_event(fleet_breaker *b, resil_breaker_state from, const fleet_state *s)
{
    if (b->listener == NULL)
        return;
    if (b->ev_len == EVENT_QUEUE) {
        b->events_dropped++;
        return;
    }
    resil_breaker_event ev = {
        .from = from,
        .to = s->state,
        .reason = s->reason != 0 ? s->reason : RESIL_BREAKER_BY_RESET,
        .at = resil_clock_now(b->clock),
        .generation = (uint32_t)s->epoch,
        .break_duration = s->state == RESIL_BREAKER_OPEN ? ms_to_ns(s->break_ms) : 0,
    };
    b->events[(b->ev_head + b->ev_len) % EVENT_QUEUE] = ev;
    b->ev_len++;
}

/* Unlock mu, then deliver queued events unless another thread already is:
 * outside every lock, one at a time, in the order they were learnt. */
static void unlock_and_deliver(fleet_breaker *b)
{
    if (b->ev_len == 0 || b->delivering) {
        pthread_mutex_unlock(&b->mu);
        return;
    }
    b->delivering = true;
    while (b->ev_len > 0) {
        resil_breaker_event ev = b->events[b->ev_head];
        b->ev_head = (b->ev_head + 1) % EVENT_QUEUE;
        b->ev_len--;
        pthread_mutex_unlock(&b->mu);
        b->listener(b->handle, &ev, b->listener_ud);
        pthread_mutex_lock(&b->mu);
    }
    b->delivering = false;
    pthread_mutex_unlock(&b->mu);
}

static void announce_change(fleet_breaker *b, resil_breaker_state from,
                            const fleet_state *s)
{
    atomic_fetch_add_explicit(&b->transitions, 1, memory_order_relaxed);
    queue_event(b, from, s);
    resil_redis_event ev = {
        .type = RESIL_REDIS_STATE,
        .name = b->name,
        .from = from,
        .to = s->state,
        .reason = s->reason != 0 ? s->reason : RESIL_BREAKER_BY_RESET,
        .epoch = s->epoch,
        .detail = "",
    };
    resil__redis_event(b->client, &ev);
}

/* A newer epoch replaces the cache (under mu): the batch counted under the
 * old one is dropped and, for LOCAL counting, the local breaker restarts
 * when the fleet closes. The event is queued before mu is released, so two
 * threads learning one after the other announce in that order. */
static void adopt(fleet_breaker *b, uint64_t w, const fleet_state *s, bool with_counts)
{
    if (!with_counts) {
        fleet_state zero = {0};
        set_fleet_counts(b, &zero);
    }
    resil_breaker_state from = word_state(w);
    atomic_store_explicit(&b->open_until_ns, ms_to_ns(s->until_ms), memory_order_relaxed);
    atomic_store_explicit(&b->probe_wait_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&b->cached, word(s->epoch, s->state), memory_order_release);
    take_batch(b);
    if (from == s->state)
        return;
    if (s->state == RESIL_BREAKER_CLOSED && b->counting == RESIL_REDIS_COUNT_LOCAL)
        resil_breaker_reset(b->local);
    announce_change(b, from, s);
}

/* Take a shared state seen in an answer (with_counts: the fleet's counts
 * too) or a message. Older epochs are ignored. */
static void learn(fleet_breaker *b, const fleet_state *s, bool with_counts)
{
    pthread_mutex_lock(&b->mu);
    uint64_t w = atomic_load_explicit(&b->cached, memory_order_relaxed);
    if (with_counts && s->epoch >= word_epoch(w)) {
        set_fleet_counts(b, s);
        atomic_store_explicit(&b->current_break, ms_to_ns(s->break_ms), memory_order_relaxed);
    }
    if (s->epoch > word_epoch(w))
        adopt(b, w, s, with_counts);
    unlock_and_deliver(b);
}

/* ---- member hooks (sync thread, under the client's list lock) -------------- */

static fleet_breaker *of(fleet_member *m) { return (fleet_breaker *)m; }

static fleet_cmd command(fleet_breaker *b, fleet_op op)
{
    fleet_cmd c = {.op = op, .member = &b->member, .key = b->key, .name = b->name,
                   .now_ms = resil__fleet_wall_ms(b->clock), .rules = &b->rules};
    return c;
}

static void collect_results(fleet_breaker *b, fleet_queue *q)
{
    pthread_mutex_lock(&b->mu);
    for (uint32_t i = 0; i < b->rules.probes; i++) {
        probe_result *r = &b->results[i];
        if (!r->used)
            continue;
        fleet_cmd c = command(b, FLEET_RESULT);
        c.arg[0] = (int64_t)r->epoch;
        c.arg[1] = i;
        c.arg[2] = (int64_t)r->ticket;
        c.arg[3] = r->result;
        if (resil__fleet_queue_push(q, &c) == 0)
            r->used = false;
    }
    pthread_mutex_unlock(&b->mu);
}

static void collect(fleet_member *m, fleet_queue *q, int64_t now, bool forced)
{
    fleet_breaker *b = of(m);
    collect_results(b, q);
    batch t = take_batch(b);
    int trip = atomic_exchange_explicit(&b->trip, 0, memory_order_relaxed);
    bool counts = t.successes + t.failures > 0;
    bool due = forced || now - b->last_refresh >= resil__redis_config(b->client)->refresh_interval;
    if (!counts && trip == 0 && !due)
        return;
    fleet_cmd c = command(b, FLEET_SYNC);
    c.arg[0] = (int64_t)word_epoch(load_cached(b));
    c.arg[1] = (int64_t)t.successes;
    c.arg[2] = (int64_t)t.failures;
    c.arg[3] = (int64_t)t.slow;
    c.arg[4] = t.run;
    c.arg[5] = t.any_success ? 1 : 0;
    c.arg[6] = trip;
    if (resil__fleet_queue_push(q, &c) == 0)
        b->last_refresh = now;
}

static void apply(fleet_member *m, const fleet_cmd *c, const fleet_state *s)
{
    (void)c;
    learn(of(m), s, true);
}

static void lost(fleet_member *m, const fleet_cmd *c)
{
    fleet_breaker *b = of(m);
    int expected = 0;
    if (c->op == FLEET_SYNC && c->arg[6] != 0)
        atomic_compare_exchange_strong(&b->trip, &expected, (int)c->arg[6]);
}

static void down(fleet_member *m)
{
    fleet_breaker *b = of(m);
    take_batch(b);
    pthread_mutex_lock(&b->mu);
    for (uint32_t i = 0; i < b->rules.probes; i++)
        b->results[i].used = false;
    pthread_mutex_unlock(&b->mu);
}

static void message(fleet_member *m, const fleet_state *s) { learn(of(m), s, false); }

static void back_up(fleet_member *m)
{
    fleet_breaker *b = of(m);
    if (b->counting == RESIL_REDIS_COUNT_FLEET)
        resil_breaker_reset(b->local);
}

static const fleet_member_ops breaker_ops = {.collect = collect, .apply = apply, .lost = lost,
                                             .down = down, .message = message, .up = back_up};

/* The local breaker's listener: with LOCAL counting its trip is the fleet's. */
static void local_event(resil_breaker *local, const resil_breaker_event *ev, void *ud)
{
    (void)local;
    fleet_breaker *b = ud;
    if (b->counting != RESIL_REDIS_COUNT_LOCAL || ev->from != RESIL_BREAKER_CLOSED ||
        ev->to != RESIL_BREAKER_OPEN)
        return;
    atomic_store_explicit(&b->trip, (int)ev->reason, memory_order_relaxed);
    resil__redis_wake(b->client);
}

/* ---- options and life ------------------------------------------------------- */

void resil_redis_breaker_opts_default(resil_redis_breaker_opts *o)
{
    memset(o, 0, sizeof *o);
    resil_breaker_opts_default(&o->rules);
    o->counting = RESIL_REDIS_COUNT_FLEET;
}

static int64_t ceil_ms(resil_duration d)
{
    return d <= 0 ? 0 : d / 1000000 + (d % 1000000 != 0);
}

static fleet_rules rules_of(const resil_breaker_opts *o)
{
    fleet_rules r = {
        .kind = (int)o->kind,
        .threshold = o->failure_threshold,
        .ratio = o->failure_ratio,
        .minimum = o->minimum_throughput,
        .sampling_ms = ceil_ms(o->sampling_duration),
        .slow_on = o->slow_call_duration > 0,
        .slow_ratio = o->slow_call_ratio,
        .break_ms = ceil_ms(o->break_duration),
        .growth = o->break_growth,
        .max_break_ms = ceil_ms(o->max_break_duration),
        .probes = o->half_open_probes,
        .success_threshold = o->success_threshold,
        .probe_timeout_ms = ceil_ms(o->probe_timeout),
    };
    if (r.max_break_ms < r.break_ms)
        r.max_break_ms = r.break_ms;
    return r;
}

static int validate(resil_redis *r, const resil_redis_breaker_opts *o, resil_err *err)
{
    if (r == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_breaker: a client and options are required");
    int rc = resil__fleet_name_check("redis_breaker", o->name, err);
    if (rc != 0)
        return rc;
    if (o->counting != RESIL_REDIS_COUNT_FLEET && o->counting != RESIL_REDIS_COUNT_LOCAL)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_breaker.counting must be FLEET or LOCAL, got %d",
                             (int)o->counting);
    resil_err inner = {0, ""};
    rc = resil_breaker_opts_validate(&o->rules, &inner);
    if (rc != 0)
        return resil__fleet_refused_under("redis_breaker.rules", rc, &inner, err);
    /* The shared rules are the script's: a time window and the built-in
     * kinds. A count window or a predicate would be silently ignored. */
    if (o->rules.window != RESIL_BREAKER_WINDOW_TIME)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_breaker.rules.window must be time (the fleet counts "
                             "over a time window)");
    if (o->rules.kind & RESIL_BREAKER_PREDICATE)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_breaker.rules.kind must not include predicate (the "
                             "fleet's rules run in Redis)");
    if (o->rules.break_duration < RESIL_MS(1))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_breaker.rules.break_duration must be >= 1ms "
                             "(Redis keeps milliseconds)");
    if (o->rules.half_open_probes > RESIL_REDIS_MAX_PROBES)
        return resil_err_set(err, RESIL_EINVAL,
                             "redis_breaker.rules.half_open_probes must be <= %d, got %u",
                             RESIL_REDIS_MAX_PROBES, o->rules.half_open_probes);
    if (o->fallback != NULL)
        return resil__fleet_refused_under("redis_breaker.fallback",
                                          resil_breaker_opts_validate(o->fallback, &inner),
                                          &inner, err);
    return 0;
}

static void destroy(fleet_breaker *b)
{
    resil_breaker_free(b->local);
    free(b->results);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static int make_local(fleet_breaker *b, const resil_redis_breaker_opts *o,
                      resil_err *err)
{
    resil_breaker_opts lo = o->fallback != NULL ? *o->fallback : o->rules;
    lo.name = b->name;
    lo.listener = local_event;
    lo.listener_ud = b;
    if (lo.clock == NULL)
        lo.clock = o->rules.clock;
    resil_err inner = {0, ""};
    return resil__fleet_refused_under("redis_breaker.fallback",
                                      resil_breaker_new(&lo, &b->local, &inner), &inner, err);
}

static fleet_breaker *alloc_breaker(resil_redis *r, const resil_redis_breaker_opts *o)
{
    fleet_breaker *b = resil__fleet_line_alloc(sizeof *b);
    if (b == NULL)
        return NULL;
    b->results = calloc(o->rules.half_open_probes, sizeof *b->results);
    if (b->results == NULL) {
        free(b);
        return NULL;
    }
    pthread_mutex_init(&b->mu, NULL);
    b->client = r;
    b->clock = o->rules.clock != NULL ? o->rules.clock : resil_clock_system();
    b->listener = o->rules.listener;
    b->listener_ud = o->rules.listener_ud;
    b->counting = o->counting;
    b->rules = rules_of(&o->rules);
    b->consecutive_on = (o->rules.kind & RESIL_BREAKER_CONSECUTIVE) != 0;
    b->ratio_on = (o->rules.kind & RESIL_BREAKER_RATIO) != 0;
    b->slow_on = o->rules.slow_call_duration > 0;
    b->slow_call_duration = o->rules.slow_call_duration;
    snprintf(b->name, sizeof b->name, "%s", o->name);
    snprintf(b->key, sizeof b->key, "%sbreaker:%s", resil__redis_config(r)->prefix, o->name);
    b->member.ops = &breaker_ops;
    b->member.name = b->name;
    atomic_init(&b->cached, word(0, RESIL_BREAKER_CLOSED));
    atomic_init(&b->current_break, o->rules.break_duration);
    return b;
}

/* The handle exists before the client knows the breaker, so the sync
 * thread's first change already has a handle to report with. */
int resil_redis_breaker_new(resil_redis *r, const resil_redis_breaker_opts *o,
                            resil_breaker **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_breaker: out must not be NULL");
    *out = NULL;
    int rc = validate(r, o, err);
    if (rc != 0)
        return rc;
    fleet_breaker *b = alloc_breaker(r, o);
    if (b == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "redis_breaker: out of memory");
    if ((rc = make_local(b, o, err)) != 0 ||
        (rc = resil_breaker_new_custom(&redis_ops, b, b->name, &b->handle, err)) != 0) {
        destroy(b);
        return rc;
    }
    resil__redis_retain(r);
    resil__redis_attach(r, &b->member);
    *out = b->handle;
    return 0;
}

static void redis_destroy(void *self)
{
    fleet_breaker *b = self;
    resil_redis *r = b->client;
    resil__redis_detach(r, &b->member);
    destroy(b);
    resil_redis_free(r);
}

int resil_redis_breaker_factory(const char *key, const resil_breaker_opts *o,
                                resil_breaker **out, resil_err *err, void *ud)
{
    const resil_redis_factory *f = ud;
    if (f == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis_breaker: the factory needs its client");
    resil_redis_breaker_opts ro;
    resil_redis_breaker_opts_default(&ro);
    ro.name = key;
    ro.rules = *o;
    ro.counting = f->counting;
    ro.fallback = f->fallback;
    return resil_redis_breaker_new(f->client, &ro, out, err);
}

static fleet_breaker *fleet_of(const resil_breaker *b)
{
    return resil_breaker_self(b, &redis_ops);
}

bool resil_redis_breaker_is(const resil_breaker *b) { return fleet_of(b) != NULL; }

resil_breaker *resil_redis_breaker_fallback(const resil_breaker *b)
{
    fleet_breaker *f = fleet_of(b);
    return f != NULL ? f->local : NULL;
}

bool resil_redis_permit_fallback(const resil_breaker_permit *p)
{
    return p != NULL && permit_local(p);
}

/* ---- acquire ------------------------------------------------------------------ */

static void permit_init(resil_breaker_permit *p, uint64_t w)
{
    memset(p, 0, sizeof *p);
    p->state = word_state(w);
    p->ext[0] = word_epoch(w);
}

static int reject(resil_breaker_permit *p, uint64_t w, resil_duration retry_after)
{
    permit_init(p, w);
    p->retry_after = retry_after < 0 ? 0 : retry_after;
    return RESIL_EREJECTED;
}

/* The local breaker fills the permit as its own; the flag routes the
 * result back to it. */
static int from_local(fleet_breaker *b, resil_breaker_permit *p)
{
    int rc = resil_breaker_acquire(b->local, p);
    p->ext_flags = PERMIT_FALLBACK;
    return rc;
}

/* Redis is down: a break the fleet announced still holds until it ends,
 * and isolation holds; beyond that the local breaker decides. */
static int acquire_fallback(fleet_breaker *b, resil_breaker_permit *p)
{
    uint64_t w = load_cached(b);
    if (word_state(w) == RESIL_BREAKER_ISOLATED)
        return reject(p, w, RESIL_DURATION_MAX);
    if (word_state(w) == RESIL_BREAKER_OPEN) {
        int64_t until = atomic_load_explicit(&b->open_until_ns, memory_order_relaxed);
        int64_t now = wall_ns(b);
        if (now < until)
            return reject(p, w, until - now);
    }
    return from_local(b, p);
}

static int admit_closed(fleet_breaker *b, resil_breaker_permit *p, uint64_t w)
{
    if (b->counting == RESIL_REDIS_COUNT_LOCAL)
        return from_local(b, p);
    permit_init(p, w);
    p->start = b->slow_on ? resil_clock_now(b->clock) : 0;
    return 0;
}

static resil_duration denied_wait(const fleet_state *s)
{
    return s->retry_ms < 0 ? RESIL_DURATION_MAX : ms_to_ns(s->retry_ms);
}

/* Open past the break, or half-open: ask Redis for one of the fleet's
 * probe slots. One caller per client asks at a time. */
static int ask_probe(fleet_breaker *b, resil_breaker_permit *p, uint64_t w, int64_t now)
{
    fleet_cmd c = command(b, FLEET_PROBE);
    c.member = NULL;
    fleet_state s;
    int rc = resil__redis_call(b->client, &c, false, &s);
    if (rc == RESIL_EBUSY)
        return reject(p, w, resil__redis_config(b->client)->timeout);
    if (rc != 0)
        return acquire_fallback(b, p);
    learn(b, &s, true);
    if (s.code == FLEET_OK)
        return admit_closed(b, p, load_cached(b));
    if (s.code != FLEET_GRANTED) {
        if (s.state == RESIL_BREAKER_HALF_OPEN && s.retry_ms >= 0)
            atomic_store_explicit(&b->probe_wait_ns, resil_dur_add(now, ms_to_ns(s.retry_ms)),
                                  memory_order_relaxed);
        permit_init(p, word(s.epoch, s.state));
        p->retry_after = denied_wait(&s);
        return RESIL_EREJECTED;
    }
    permit_init(p, word(s.epoch, RESIL_BREAKER_HALF_OPEN));
    p->probe = true;
    p->probe_slot = s.slot;
    p->ext[1] = s.ticket;
    p->start = resil_clock_now(b->clock);
    return 0;
}

static int redis_acquire(void *self, resil_breaker_permit *p)
{
    fleet_breaker *b = self;
    if (!up(b))
        return acquire_fallback(b, p);
    uint64_t w = load_cached(b);
    switch (word_state(w)) {
    case RESIL_BREAKER_CLOSED:
        return admit_closed(b, p, w);
    case RESIL_BREAKER_OPEN: {
        int64_t now = wall_ns(b);
        int64_t until = atomic_load_explicit(&b->open_until_ns, memory_order_relaxed);
        if (now < until)
            return reject(p, w, until - now);
        return ask_probe(b, p, w, now);
    }
    case RESIL_BREAKER_HALF_OPEN: {
        int64_t now = wall_ns(b);
        int64_t wait = atomic_load_explicit(&b->probe_wait_ns, memory_order_relaxed);
        if (now < wait)
            return reject(p, w, wait - now);
        return ask_probe(b, p, w, now);
    }
    default:
        return reject(p, w, RESIL_DURATION_MAX);
    }
}

/* ---- record ------------------------------------------------------------------- */

static bool share_reached(uint64_t part, uint64_t total, uint32_t minimum, double ratio)
{
    return total > 0 && total >= minimum && (double)part / (double)total >= ratio;
}

/* Would the fleet's last known counts plus this batch reach a rule? */
static bool would_trip(fleet_breaker *b, bool failure, bool slow, uint32_t run)
{
    const fleet_rules *r = &b->rules;
    if (failure && b->consecutive_on) {
        bool restarted = atomic_load_explicit(&b->any_success, memory_order_relaxed);
        uint64_t fleet = restarted ? 0 : atomic_load_explicit(&b->fleet_run, memory_order_relaxed);
        if (fleet + run >= r->threshold)
            return true;
    }
    if (!b->ratio_on && !slow)
        return false;
    uint64_t failures = atomic_load_explicit(&b->failures, memory_order_relaxed);
    uint64_t total = atomic_load_explicit(&b->fleet_total, memory_order_relaxed) +
                     pending_successes(b, false) + failures;
    if (failure && b->ratio_on &&
        share_reached(atomic_load_explicit(&b->fleet_failures, memory_order_relaxed) + failures,
                      total, r->minimum, r->ratio))
        return true;
    return slow && share_reached(atomic_load_explicit(&b->fleet_slow, memory_order_relaxed) +
                                     atomic_load_explicit(&b->slow, memory_order_relaxed),
                                 total, r->minimum, r->slow_ratio);
}

static void count_call(fleet_breaker *b, bool failure, bool slow)
{
    uint32_t run = 0;
    if (failure) {
        atomic_fetch_add_explicit(&b->failures, 1, memory_order_relaxed);
        run = atomic_fetch_add_explicit(&b->run, 1, memory_order_relaxed) + 1;
    } else {
        atomic_fetch_add_explicit(&my_stripe(b)->successes, 1, memory_order_relaxed);
        if (atomic_load_explicit(&b->run, memory_order_relaxed) != 0)
            atomic_store_explicit(&b->run, 0, memory_order_relaxed);
        if (!atomic_load_explicit(&b->any_success, memory_order_relaxed))
            atomic_store_explicit(&b->any_success, true, memory_order_relaxed);
    }
    if (slow)
        atomic_fetch_add_explicit(&b->slow, 1, memory_order_relaxed);
    if ((failure || slow) && would_trip(b, failure, slow, run))
        resil__redis_wake(b->client);
}

static bool was_slow(const fleet_breaker *b, const resil_breaker_permit *p)
{
    return b->slow_on && resil_dur_sub(resil_clock_now(b->clock), p->start) > b->slow_call_duration;
}

static int record_probe(fleet_breaker *b, const resil_breaker_permit *p,
                        resil_breaker_result r)
{
    if (p->probe_slot >= b->rules.probes || !up(b) ||
        word_epoch(load_cached(b)) != permit_epoch(p))
        return RESIL_ESTATE; /* the fleet moved on, as far as we know */
    bool failed = r == RESIL_BREAKER_FAILURE || (r == RESIL_BREAKER_SUCCESS && was_slow(b, p));
    pthread_mutex_lock(&b->mu);
    probe_result *res = &b->results[p->probe_slot];
    res->used = true;
    res->epoch = permit_epoch(p);
    res->ticket = p->ext[1];
    res->result = failed ? 1 : r == RESIL_BREAKER_SUCCESS ? 0 : 2;
    pthread_mutex_unlock(&b->mu);
    resil__redis_wake(b->client);
    return 0;
}

static int redis_record(void *self, const resil_breaker_permit *p, resil_breaker_result r)
{
    fleet_breaker *b = self;
    if (permit_local(p))
        return resil_breaker_record(b->local, p, r);
    if (p->probe)
        return record_probe(b, p, r);
    uint64_t w = load_cached(b);
    if (word_epoch(w) != permit_epoch(p) || word_state(w) != RESIL_BREAKER_CLOSED || !up(b))
        return RESIL_ESTATE;
    if (r != RESIL_BREAKER_IGNORED)
        count_call(b, r == RESIL_BREAKER_FAILURE, was_slow(b, p));
    return 0;
}

/* ---- manual control and status ------------------------------------------------- */

static int backend_code(int rc) { return rc == RESIL_EIO ? RESIL_EIO : RESIL_EBACKEND; }

static int control(fleet_breaker *b, fleet_op op)
{
    fleet_cmd c = command(b, op);
    c.member = NULL;
    fleet_state s;
    int rc = resil__redis_call(b->client, &c, true, &s);
    if (rc != 0)
        return backend_code(rc);
    learn(b, &s, true);
    return 0;
}

static int redis_control(void *self, resil_breaker_control op)
{
    switch (op) {
    case RESIL_BREAKER_DO_ISOLATE:
        return control(self, FLEET_ISOLATE);
    case RESIL_BREAKER_DO_CLOSE:
        return control(self, FLEET_CLOSE);
    case RESIL_BREAKER_DO_RESET:
        return control(self, FLEET_RESET);
    default:
        return RESIL_EINVAL; /* the fleet has no disabled state */
    }
}

static resil_breaker_state redis_state(void *self)
{
    fleet_breaker *b = self;
    uint64_t w = load_cached(b);
    if (up(b))
        return word_state(w);
    if (word_state(w) == RESIL_BREAKER_ISOLATED)
        return RESIL_BREAKER_ISOLATED;
    if (word_state(w) == RESIL_BREAKER_OPEN &&
        wall_ns(b) < atomic_load_explicit(&b->open_until_ns, memory_order_relaxed))
        return RESIL_BREAKER_OPEN;
    return resil_breaker_state_of(b->local);
}

static double share(uint64_t part, uint64_t total)
{
    return total == 0 ? 0.0 : (double)part / (double)total;
}

/* When a probe may go, on the breaker's clock (the fleet keeps wall time). */
static resil_instant next_probe_at(fleet_breaker *b, resil_breaker_state s)
{
    if (s == RESIL_BREAKER_ISOLATED)
        return RESIL_INSTANT_MAX;
    if (s != RESIL_BREAKER_OPEN)
        return 0;
    int64_t until = atomic_load_explicit(&b->open_until_ns, memory_order_relaxed);
    return resil_dur_add(resil_clock_now(b->clock), resil_dur_sub(until, wall_ns(b)));
}

/* The counts that decide: the fleet's as last synced (FLEET) or this
 * instance's (LOCAL); while Redis is down, the fallback's stats whole. */
static void counts_of(fleet_breaker *b, resil_breaker_stats *out)
{
    if (b->counting == RESIL_REDIS_COUNT_LOCAL) {
        resil_breaker_stats local;
        resil_breaker_stats_get(b->local, &local);
        out->consecutive_failures = local.consecutive_failures;
        out->window_total = local.window_total;
        out->window_failures = local.window_failures;
        out->window_slow = local.window_slow;
        return;
    }
    out->consecutive_failures = atomic_load_explicit(&b->fleet_run, memory_order_relaxed);
    out->window_total = atomic_load_explicit(&b->fleet_total, memory_order_relaxed);
    out->window_failures = atomic_load_explicit(&b->fleet_failures, memory_order_relaxed);
    out->window_slow = atomic_load_explicit(&b->fleet_slow, memory_order_relaxed);
}

static int redis_stats(void *self, resil_breaker_stats *out)
{
    fleet_breaker *b = self;
    if (!up(b)) {
        resil_breaker_stats_get(b->local, out);
        out->state = redis_state(b);
        return 0;
    }
    memset(out, 0, sizeof *out);
    uint64_t w = load_cached(b);
    out->state = word_state(w);
    counts_of(b, out);
    out->failure_ratio = share(out->window_failures, out->window_total);
    out->slow_ratio = share(out->window_slow, out->window_total);
    out->next_probe_at = next_probe_at(b, out->state);
    out->current_break = atomic_load_explicit(&b->current_break, memory_order_relaxed);
    out->generation = (uint32_t)word_epoch(w);
    out->transitions = atomic_load_explicit(&b->transitions, memory_order_relaxed);
    pthread_mutex_lock(&b->mu);
    out->events_dropped = b->events_dropped;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* Nothing to lose but counts not yet flushed. */
static bool redis_idle(void *self)
{
    fleet_breaker *b = self;
    return word_state(load_cached(b)) == RESIL_BREAKER_CLOSED &&
           atomic_load_explicit(&b->failures, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&b->fleet_run, memory_order_relaxed) == 0;
}

static const resil_breaker_ops redis_ops = {
    .size = sizeof(resil_breaker_ops),
    .kind = "redis",
    .acquire = redis_acquire,
    .record = redis_record,
    .state = redis_state,
    .stats = redis_stats,
    .control = redis_control,
    .idle = redis_idle,
    .destroy = redis_destroy,
};

static void to_status(const fleet_state *s, resil_redis_breaker_status *out)
{
    memset(out, 0, sizeof *out);
    if (s->code == FLEET_MISSING)
        return;
    out->state = s->state;
    out->reason = s->reason;
    out->epoch = s->epoch;
    out->open_until_ms = s->until_ms;
    out->last_opened_ms = s->lastopen_ms;
    out->opens = s->opens;
    out->consecutive_failures = s->run;
    out->window_total = s->window_total;
    out->window_failures = s->window_failures;
    out->window_slow = s->window_slow;
    out->probes_in_flight = s->inflight;
    out->probe_successes = s->successes;
    out->current_break = ms_to_ns(s->break_ms);
    out->ttl = s->pttl_ms < 0 ? 0 : ms_to_ns(s->pttl_ms);
}

int resil_redis_breaker_status_get(resil_breaker *handle, resil_redis_breaker_status *out)
{
    fleet_breaker *b = fleet_of(handle);
    if (b == NULL || out == NULL)
        return RESIL_EINVAL;
    fleet_cmd c = command(b, FLEET_STATUS);
    c.member = NULL;
    fleet_state s;
    int rc = resil__redis_call(b->client, &c, true, &s);
    if (rc != 0)
        return backend_code(rc);
    to_status(&s, out);
    return 0;
}

/* ---- by name, for admin tools ------------------------------------------------- */

static fleet_cmd named(resil_redis *r, const char *name, fleet_op op, char *key, size_t cap)
{
    const fleet_config *cfg = resil__redis_config(r);
    snprintf(key, cap, "%sbreaker:%s", cfg->prefix, name);
    fleet_cmd c = {.op = op, .key = key, .name = name,
                   .now_ms = resil__fleet_wall_ms(cfg->clock)};
    return c;
}

static int named_call(resil_redis *r, const char *name, fleet_op op, fleet_state *s,
                      resil_err *err)
{
    if (r == NULL || !resil__fleet_name_ok(name))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis: a breaker name is 1 to %d printable bytes, "
                             "not starting with a space",
                             RESIL_BREAKER_NAME_MAX - 1);
    char key[FLEET_KEY_MAX];
    fleet_cmd c = named(r, name, op, key, sizeof key);
    int rc = resil__redis_call(r, &c, true, s);
    if (rc == RESIL_EIO)
        return resil_err_set(err, RESIL_EIO, "redis: the script failed on '%s'", name);
    if (rc != 0)
        return resil_err_set(err, RESIL_EBACKEND, "redis: not connected");
    return 0;
}

int resil_redis_control(resil_redis *r, const char *name, resil_redis_control_op op,
                        resil_err *err)
{
    static const fleet_op ops[] = {[RESIL_REDIS_ISOLATE] = FLEET_ISOLATE,
                                   [RESIL_REDIS_CLOSE] = FLEET_CLOSE,
                                   [RESIL_REDIS_RESET] = FLEET_RESET};
    if (op < RESIL_REDIS_ISOLATE || op > RESIL_REDIS_RESET)
        return resil_err_set(err, RESIL_EINVAL, "redis: unknown control op %d", (int)op);
    if (op != RESIL_REDIS_RESET) {
        fleet_state s;
        int rc = named_call(r, name, FLEET_STATUS, &s, err);
        if (rc != 0)
            return rc;
        if (s.code == FLEET_MISSING)
            return resil_err_set(err, RESIL_ENOTFOUND, "redis: no shared breaker named '%s'",
                                 name);
    }
    fleet_state s;
    return named_call(r, name, ops[op], &s, err);
}

int resil_redis_status_get(resil_redis *r, const char *name, resil_redis_breaker_status *out,
                           resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis: out must not be NULL");
    fleet_state s;
    int rc = named_call(r, name, FLEET_STATUS, &s, err);
    if (rc != 0)
        return rc;
    if (s.code == FLEET_MISSING)
        return resil_err_set(err, RESIL_ENOTFOUND, "redis: no shared breaker named '%s'", name);
    to_status(&s, out);
    return 0;
}
