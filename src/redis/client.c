/*
 * client.c — the Redis client behind every shared breaker and budget: three
 * connections, one sync thread, the rounds, the subscription and the events.
 *
 * The sync thread exists so that no call ever pays a round trip: it owns
 * the command connection (pipelined rounds of script calls) and the
 * subscriber connection (PUBLISHed state changes), and sleeps in poll() on
 * the subscriber socket, a wake pipe and the next round's deadline. A
 * caller-driven flush was the alternative, but then the caller that crosses
 * the interval would wait for Redis, and for the full timeout when Redis is
 * sick — exactly what the hot path must never do. Callers only set counters
 * and, when a rule would trip, write one byte to the pipe.
 *
 * The third connection serves the few calls that need a fleet decision
 * before they can proceed (a probe slot, manual control). It has its own
 * lock so such a caller never queues behind a round, and a probe asks with
 * trylock: at most one caller per client waits for Redis at a time.
 *
 * Every exchange with Redis is bounded (conn.h): a caller's call by one
 * deadline from its start, lock wait included; a round by one timeout per
 * answer, so a large round on a healthy server is never taken for an
 * outage; a reply beyond the bounds is a malformed answer that also costs
 * its connection.
 *
 * Health is one flag. Whoever first sees a command fail (the thread or a
 * caller) clears it and queues a DOWN event; the thread then closes every
 * connection, tells each member to fall back, and reconnects on the
 * client's backoff. On success it runs a forced round — every member
 * re-reads its shared state — before announcing UP.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"

#define EVENT_QUEUE 64
#define WHY_MAX 200

typedef struct queued_event {
    resil_redis_event ev;
    char name[RESIL_BREAKER_NAME_MAX];
    char detail[WHY_MAX];
} queued_event;

typedef struct queued_cmd {
    fleet_cmd cmd;
    bool settled; /* its answer applied, or the command given up as lost */
} queued_cmd;

struct fleet_queue {
    queued_cmd *items;
    size_t len, cap;
};

struct resil_redis {
    /* Read by every call: keep it apart from what the thread writes. */
    _Alignas(64) _Atomic bool up;
    _Atomic bool woken;

    _Alignas(64) fleet_config cfg;
    fleet_url url;
    resil_backoff reconnect;
    resil_redis_listener_fn listener;
    void *listener_ud;
    char sha[41];
    _Atomic int refs;
    _Atomic bool stopping;
    _Atomic bool reload_script;
    int wake_fd[2];
    pthread_t thread;

    pthread_mutex_t list_mu; /* the members; held for a whole round */
    fleet_member members;    /* sentinel of a circular list */

    pthread_mutex_t call_mu; /* the callers' connection */
    redisContext *call;

    pthread_mutex_t sync_mu; /* resil_redis_sync() requests */
    pthread_cond_t sync_cv;
    uint64_t requested, completed;
    int last_rc;
    bool thread_done;

    pthread_mutex_t ev_mu;
    queued_event events[EVENT_QUEUE];
    unsigned ev_head, ev_len;
    bool down_announced;

    _Atomic uint64_t rounds, commands, noscript, messages, disconnects, reconnects,
        command_errors, events_dropped;

    /* Owned by the sync thread. */
    redisContext *cmd, *sub;
    fleet_queue queue;
    uint32_t attempts;
    resil_backoff_state backoff;
    int64_t next_attempt, next_round;
    bool force_round;
    bool linked; /* connections made since the last teardown */
};

static int64_t mono_ns(void) { return resil_clock_now(resil_clock_system()); }

static void count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static void close_conn(redisContext **c)
{
    resil__fleet_close(*c);
    *c = NULL;
}

/* ---- shared helpers ------------------------------------------------------- */

void *resil__fleet_line_alloc(size_t size)
{
    size_t lines = (size + 63) / 64;
    void *p = aligned_alloc(64, lines * 64);
    if (p != NULL)
        memset(p, 0, lines * 64);
    return p;
}

int64_t resil__fleet_wall_ms(resil_clock *c)
{
    int64_t ns = resil_clock_wall_now(c);
    return ns / 1000000;
}

bool resil__fleet_name_ok(const char *name)
{
    if (name == NULL || name[0] == '\0' || name[0] == ' ' ||
        strlen(name) >= RESIL_BREAKER_NAME_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

int resil__fleet_name_check(const char *what, const char *name, resil_err *err)
{
    if (resil__fleet_name_ok(name))
        return 0;
    return resil_err_set(err, RESIL_EINVAL,
                         "%s.name must be 1 to %d printable bytes, not starting with a space",
                         what, RESIL_BREAKER_NAME_MAX - 1);
}

int resil__fleet_refused_under(const char *field, int rc, const resil_err *inner,
                               resil_err *err)
{
    if (rc == 0)
        return 0;
    return resil_err_set(err, rc, "%s: %s", field, inner->message);
}

const fleet_config *resil__redis_config(const resil_redis *r) { return &r->cfg; }

bool resil__redis_up(const resil_redis *r)
{
    return atomic_load_explicit(&((resil_redis *)r)->up, memory_order_acquire);
}

void resil__redis_wake(resil_redis *r)
{
    if (atomic_exchange_explicit(&r->woken, true, memory_order_acq_rel))
        return;
    ssize_t n = write(r->wake_fd[1], "w", 1);
    (void)n; /* a full pipe already wakes the thread */
}

int resil__fleet_queue_push(fleet_queue *q, const fleet_cmd *c)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 32;
        queued_cmd *items = realloc(q->items, cap * sizeof *items);
        if (items == NULL)
            return RESIL_ENOMEM;
        q->items = items;
        q->cap = cap;
    }
    q->items[q->len] = (queued_cmd){.cmd = *c};
    q->len++;
    return 0;
}

/* ---- events ----------------------------------------------------------------- */

static void copy_text(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src != NULL ? src : "");
}

void resil__redis_event(resil_redis *r, const resil_redis_event *ev)
{
    pthread_mutex_lock(&r->ev_mu);
    if (r->ev_len == EVENT_QUEUE) {
        pthread_mutex_unlock(&r->ev_mu);
        count(&r->events_dropped, 1);
        return;
    }
    queued_event *q = &r->events[(r->ev_head + r->ev_len) % EVENT_QUEUE];
    q->ev = *ev;
    copy_text(q->name, sizeof q->name, ev->name);
    copy_text(q->detail, sizeof q->detail, ev->detail);
    r->ev_len++;
    pthread_mutex_unlock(&r->ev_mu);
    resil__redis_wake(r);
}

static void deliver_events(resil_redis *r)
{
    for (;;) {
        pthread_mutex_lock(&r->ev_mu);
        if (r->ev_len == 0) {
            pthread_mutex_unlock(&r->ev_mu);
            return;
        }
        queued_event q = r->events[r->ev_head];
        r->ev_head = (r->ev_head + 1) % EVENT_QUEUE;
        r->ev_len--;
        pthread_mutex_unlock(&r->ev_mu);
        q.ev.name = q.name;
        q.ev.detail = q.detail;
        if (r->listener != NULL)
            r->listener(&q.ev, r->listener_ud);
    }
}

static void announce(resil_redis *r, resil_redis_event_type type, const char *why)
{
    resil_redis_event ev = {.type = type, .name = "", .detail = why};
    pthread_mutex_lock(&r->ev_mu);
    bool skip = (type == RESIL_REDIS_DOWN) == r->down_announced;
    r->down_announced = type == RESIL_REDIS_DOWN;
    pthread_mutex_unlock(&r->ev_mu);
    if (!skip)
        resil__redis_event(r, &ev);
}

/* ---- health ------------------------------------------------------------------ */

static void mark_down(resil_redis *r, const char *why)
{
    if (!atomic_exchange_explicit(&r->up, false, memory_order_acq_rel))
        return;
    count(&r->disconnects, 1);
    announce(r, RESIL_REDIS_DOWN, why);
}

/* ---- sync requests ------------------------------------------------------------ */

static bool sync_wanted(resil_redis *r)
{
    pthread_mutex_lock(&r->sync_mu);
    bool wanted = r->requested > r->completed;
    pthread_mutex_unlock(&r->sync_mu);
    return wanted;
}

static uint64_t sync_serving(resil_redis *r)
{
    pthread_mutex_lock(&r->sync_mu);
    uint64_t n = r->requested;
    pthread_mutex_unlock(&r->sync_mu);
    return n;
}

static void sync_complete(resil_redis *r, uint64_t upto, int rc)
{
    pthread_mutex_lock(&r->sync_mu);
    if (upto > r->completed) {
        r->completed = upto;
        r->last_rc = rc;
        pthread_cond_broadcast(&r->sync_cv);
    }
    pthread_mutex_unlock(&r->sync_mu);
}

int resil_redis_sync(resil_redis *r)
{
    if (r == NULL)
        return RESIL_EINVAL;
    pthread_mutex_lock(&r->sync_mu);
    if (!resil__redis_up(r) || r->thread_done) {
        pthread_mutex_unlock(&r->sync_mu);
        return RESIL_EBACKEND;
    }
    uint64_t ticket = ++r->requested;
    pthread_mutex_unlock(&r->sync_mu);
    resil__redis_wake(r);
    pthread_mutex_lock(&r->sync_mu);
    while (r->completed < ticket && !r->thread_done)
        pthread_cond_wait(&r->sync_cv, &r->sync_mu);
    int rc = r->completed >= ticket ? r->last_rc : RESIL_EBACKEND;
    pthread_mutex_unlock(&r->sync_mu);
    return rc;
}

/* ---- members ----------------------------------------------------------------- */

void resil__redis_attach(resil_redis *r, fleet_member *m)
{
    pthread_mutex_lock(&r->list_mu);
    m->prev = r->members.prev;
    m->next = &r->members;
    r->members.prev->next = m;
    r->members.prev = m;
    pthread_mutex_unlock(&r->list_mu);
    resil_redis_sync(r);
}

void resil__redis_detach(resil_redis *r, fleet_member *m)
{
    pthread_mutex_lock(&r->list_mu);
    m->prev->next = m->next;
    m->next->prev = m->prev;
    m->prev = m->next = NULL;
    pthread_mutex_unlock(&r->list_mu);
}

#define EACH_MEMBER(r, m) for (fleet_member *m = (r)->members.next; m != &(r)->members; m = m->next)

/* ---- the callers' connection ---------------------------------------------------- */

/* The call's deadline is set before it waits for the connection, so the
 * timeout bounds the whole call; a caller whose time ran out in that wait
 * gives up without touching the connection (Redis is not to blame). */
int resil__redis_call(resil_redis *r, const fleet_cmd *c, bool wait, fleet_state *out)
{
    int64_t deadline = resil__fleet_deadline(r->cfg.timeout);
    if (!resil__redis_up(r))
        return RESIL_EBACKEND;
    if (wait)
        pthread_mutex_lock(&r->call_mu);
    else if (pthread_mutex_trylock(&r->call_mu) != 0)
        return RESIL_EBUSY;
    if (r->call == NULL || mono_ns() >= deadline) {
        pthread_mutex_unlock(&r->call_mu);
        return RESIL_EBACKEND;
    }
    char why[WHY_MAX];
    uint64_t sent = 0, noscript = 0;
    int rc = resil__fleet_run(r->call, c, &r->cfg, r->sha, deadline, out, &noscript, &sent,
                              why, sizeof why);
    bool broken = rc == RESIL_EBACKEND || r->call->err != 0;
    if (broken)
        close_conn(&r->call);
    pthread_mutex_unlock(&r->call_mu);
    count(&r->commands, sent);
    if (noscript > 0) {
        count(&r->noscript, noscript);
        atomic_store(&r->reload_script, true);
    }
    if (rc == RESIL_EIO)
        count(&r->command_errors, 1);
    if (broken)
        mark_down(r, why);
    return rc;
}

/* Run fn on the callers' connection under its lock (admin paths). */
static int with_call(resil_redis *r, int (*fn)(resil_redis *, redisContext *, void *),
                     void *ud)
{
    if (!resil__redis_up(r))
        return RESIL_EBACKEND;
    pthread_mutex_lock(&r->call_mu);
    int rc = r->call != NULL ? fn(r, r->call, ud) : RESIL_EBACKEND;
    char why[WHY_MAX] = "";
    if (r->call != NULL && r->call->err) {
        resil__fleet_io_why(r->call, "admin", r->cfg.timeout, why, sizeof why);
        close_conn(&r->call);
    }
    pthread_mutex_unlock(&r->call_mu);
    if (why[0] != '\0')
        mark_down(r, why);
    return rc;
}

/* ---- connecting ---------------------------------------------------------------- */

static redisContext *open_conn(resil_redis *r, char *why, size_t cap)
{
    fleet_conn_fail fail;
    return resil__fleet_connect(&r->url, r->cfg.timeout, &fail, why, cap);
}

static int subscribe(resil_redis *r, redisContext *c, char *why, size_t cap)
{
    const char *argv[] = {"SUBSCRIBE", r->cfg.channel};
    redisReply *rep =
        resil__fleet_command(c, 2, argv, NULL, resil__fleet_deadline(r->cfg.timeout));
    count(&r->commands, 1);
    if (rep == NULL) {
        resil__fleet_io_why(c, "SUBSCRIBE", r->cfg.timeout, why, cap);
        return RESIL_EBACKEND;
    }
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 3;
    if (!ok)
        snprintf(why, cap, "SUBSCRIBE: unexpected reply");
    freeReplyObject(rep);
    return ok ? 0 : RESIL_EBACKEND;
}

/* The script's SHA is written here, by the sync thread under the callers'
 * lock, and read by the sync thread or under that lock: a client that
 * started offline learns it on its first connection. */
static int connect_all(resil_redis *r, char *why, size_t cap)
{
    char sha[41];
    r->cmd = open_conn(r, why, cap);
    if (r->cmd == NULL)
        return RESIL_EBACKEND;
    count(&r->commands, 1);
    if (resil__fleet_load_script(r->cmd, sha, r->cfg.timeout, why, cap) != 0)
        goto fail;
    r->sub = open_conn(r, why, cap);
    if (r->sub == NULL || subscribe(r, r->sub, why, cap) != 0)
        goto fail;
    pthread_mutex_lock(&r->call_mu);
    memcpy(r->sha, sha, sizeof r->sha);
    if (r->call == NULL)
        r->call = open_conn(r, why, cap);
    bool have_call = r->call != NULL;
    pthread_mutex_unlock(&r->call_mu);
    if (!have_call)
        goto fail;
    return 0;
fail:
    close_conn(&r->cmd);
    close_conn(&r->sub);
    return RESIL_EBACKEND;
}

static void teardown(resil_redis *r)
{
    r->linked = false;
    close_conn(&r->cmd);
    close_conn(&r->sub);
    pthread_mutex_lock(&r->call_mu);
    close_conn(&r->call);
    pthread_mutex_unlock(&r->call_mu);
    pthread_mutex_lock(&r->list_mu);
    EACH_MEMBER(r, m)
    {
        if (m->ops->down != NULL)
            m->ops->down(m);
    }
    pthread_mutex_unlock(&r->list_mu);
}

/* ---- waiting ---------------------------------------------------------------------- */

enum { WOKEN = 1, SUB_READY = 2 };

static int wait_for(resil_redis *r, int64_t deadline)
{
    struct pollfd fds[2] = {{.fd = r->wake_fd[0], .events = POLLIN},
                            {.fd = r->sub != NULL ? r->sub->fd : -1, .events = POLLIN}};
    int64_t left = deadline - mono_ns();
    int ms = left <= 0 ? 0 : (int)(left / 1000000 + 1 > INT_MAX ? INT_MAX : left / 1000000 + 1);
    if (poll(fds, 2, ms) < 0)
        return 0;
    int got = 0;
    if (fds[0].revents != 0) {
        char buf[64];
        while (read(r->wake_fd[0], buf, sizeof buf) > 0) {
        }
        got |= WOKEN;
    }
    if (atomic_exchange_explicit(&r->woken, false, memory_order_acq_rel))
        got |= WOKEN;
    if (fds[1].revents != 0)
        got |= SUB_READY;
    return got;
}

/* ---- the subscription ---------------------------------------------------------------- */

static void dispatch_message(resil_redis *r, const redisReply *m)
{
    fleet_state s;
    const char *name;
    if (!resil__fleet_parse_message(m, &s, &name))
        return;
    count(&r->messages, 1);
    pthread_mutex_lock(&r->list_mu);
    EACH_MEMBER(r, mem)
    {
        if (mem->ops->message != NULL && strcmp(mem->name, name) == 0)
            mem->ops->message(mem, &s);
    }
    pthread_mutex_unlock(&r->list_mu);
}

static void read_messages(resil_redis *r)
{
    char why[WHY_MAX];
    if (redisBufferRead(r->sub) != REDIS_OK) {
        resil__fleet_io_why(r->sub, "SUBSCRIBE", r->cfg.timeout, why, sizeof why);
        mark_down(r, why);
        return;
    }
    for (;;) {
        void *reply = NULL;
        char bad[128];
        int got = resil__fleet_reader_next(r->sub->reader, &reply, bad, sizeof bad);
        if (got < 0) {
            snprintf(why, sizeof why, "SUBSCRIBE: malformed message: %s", bad);
            mark_down(r, why);
            return;
        }
        if (got == 0)
            return;
        dispatch_message(r, reply);
        freeReplyObject(reply);
    }
}

/* ---- rounds --------------------------------------------------------------------------- */

/* Hand a command's answer to its member, or (s NULL) tell it the command
 * was lost. Each command is settled once. */
static void settle(queued_cmd *q, const fleet_state *s)
{
    fleet_member *m = q->cmd.member;
    q->settled = true;
    if (s != NULL)
        m->ops->apply(m, &q->cmd, s);
    else if (m->ops->lost != NULL)
        m->ops->lost(m, &q->cmd);
}

/* The round cannot go on: every command not yet settled is lost, and the
 * client is down. */
static int fail_round(resil_redis *r, const char *why)
{
    for (size_t i = 0; i < r->queue.len; i++)
        if (!r->queue.items[i].settled)
            settle(&r->queue.items[i], NULL);
    mark_down(r, why);
    return RESIL_EBACKEND;
}

/* One pipelined answer: applied, lost as one command's trouble, or left
 * unsettled for rerun_noscript; RESIL_EBACKEND when Redis cannot serve. */
static int take_answer(resil_redis *r, queued_cmd *q, redisReply *rep, char *why, size_t cap)
{
    fleet_state s;
    int rc = 0;
    if (resil__fleet_unavailable(rep)) {
        snprintf(why, cap, "EVALSHA: Redis cannot serve: %s", rep->str);
        rc = RESIL_EBACKEND;
    } else if (resil__fleet_decode(&q->cmd, rep, &s) == 0) {
        settle(q, &s);
    } else if (!resil__fleet_noscript(rep)) {
        count(&r->command_errors, 1);
        settle(q, NULL);
    }
    freeReplyObject(rep);
    return rc;
}

/* Commands the server answered NOSCRIPT (it lost its scripts: SCRIPT FLUSH,
 * a restart behind a proxy), the only ones a round leaves unsettled: run
 * them again with EVAL, then reload. */
static int rerun_noscript(resil_redis *r)
{
    char why[WHY_MAX];
    for (size_t i = 0; i < r->queue.len; i++) {
        queued_cmd *q = &r->queue.items[i];
        if (q->settled)
            continue;
        count(&r->noscript, 1);
        atomic_store(&r->reload_script, true);
        fleet_state s;
        uint64_t sent = 0, ns = 0;
        int rc = resil__fleet_run(r->cmd, &q->cmd, &r->cfg, NULL,
                                  resil__fleet_deadline(r->cfg.timeout), &s, &ns, &sent, why,
                                  sizeof why);
        count(&r->commands, sent);
        if (rc == RESIL_EIO)
            count(&r->command_errors, 1);
        if (rc == RESIL_EBACKEND || r->cmd->err)
            return fail_round(r, why);
        settle(q, rc == 0 ? &s : NULL);
    }
    return 0;
}

static int reload_if_asked(resil_redis *r)
{
    if (!atomic_exchange(&r->reload_script, false))
        return 0;
    char why[WHY_MAX], sha[41];
    count(&r->commands, 1);
    int rc = resil__fleet_load_script(r->cmd, sha, r->cfg.timeout, why, sizeof why);
    if (rc == RESIL_EBACKEND)
        mark_down(r, why);
    return rc == RESIL_EBACKEND ? rc : 0;
}

static int send_round(resil_redis *r)
{
    char why[WHY_MAX];
    for (size_t i = 0; i < r->queue.len; i++) {
        fleet_argv a;
        resil__fleet_argv(&a, &r->queue.items[i].cmd, &r->cfg, r->sha);
        if (redisAppendCommandArgv(r->cmd, a.argc, a.argv, a.len) != REDIS_OK)
            return fail_round(r, "out of memory building a round");
    }
    count(&r->commands, r->queue.len);
    count(&r->rounds, 1);
    for (size_t i = 0; i < r->queue.len; i++) {
        redisReply *rep = resil__fleet_read(r->cmd, resil__fleet_deadline(r->cfg.timeout));
        if (rep == NULL) {
            if (resil__fleet_malformed(r->cmd))
                count(&r->command_errors, 1);
            resil__fleet_io_why(r->cmd, "EVALSHA", r->cfg.timeout, why, sizeof why);
            return fail_round(r, why);
        }
        if (take_answer(r, &r->queue.items[i], rep, why, sizeof why) != 0)
            return fail_round(r, why);
    }
    return rerun_noscript(r);
}

static int run_round(resil_redis *r, bool forced)
{
    int rc = reload_if_asked(r);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&r->list_mu);
    r->queue.len = 0;
    int64_t now = mono_ns();
    EACH_MEMBER(r, m) m->ops->collect(m, &r->queue, now, forced);
    if (r->queue.len > 0)
        rc = send_round(r);
    pthread_mutex_unlock(&r->list_mu);
    return rc;
}

/* ---- the thread ------------------------------------------------------------------------- */

static void fail_waiting_syncs(resil_redis *r)
{
    sync_complete(r, sync_serving(r), RESIL_EBACKEND);
}

static void schedule_reconnect(resil_redis *r)
{
    r->attempts = r->attempts < UINT32_MAX ? r->attempts + 1 : UINT32_MAX;
    r->next_attempt = mono_ns() + resil_backoff_delay(&r->reconnect, r->attempts,
                                                      &r->backoff, NULL);
}

static void reconnect(resil_redis *r)
{
    bool up = resil__redis_up(r);
    if (!up) {
        if (r->linked) {
            teardown(r);
            schedule_reconnect(r);
        }
        fail_waiting_syncs(r);
    }
    if (mono_ns() < r->next_attempt) {
        wait_for(r, r->next_attempt);
        return;
    }
    char why[WHY_MAX];
    if (connect_all(r, why, sizeof why) != 0) {
        mark_down(r, why);
        schedule_reconnect(r);
        return;
    }
    r->linked = true;
    /* Re-sync while calls still run on local state: members learn the
     * fleet's state before anyone relies on it again. */
    if (run_round(r, true) != 0) {
        teardown(r);
        schedule_reconnect(r);
        return;
    }
    r->attempts = 0;
    memset(&r->backoff, 0, sizeof r->backoff);
    r->force_round = false;
    if (atomic_exchange_explicit(&r->up, true, memory_order_acq_rel))
        return;
    count(&r->reconnects, 1);
    pthread_mutex_lock(&r->list_mu);
    EACH_MEMBER(r, m)
    {
        if (m->ops->up != NULL)
            m->ops->up(m);
    }
    pthread_mutex_unlock(&r->list_mu);
    announce(r, RESIL_REDIS_UP, "");
}

static void serve(resil_redis *r)
{
    bool wanted = sync_wanted(r) || r->force_round;
    int got = wait_for(r, wanted ? 0 : r->next_round);
    if (got & SUB_READY)
        read_messages(r);
    if (!resil__redis_up(r))
        return;
    int64_t now = mono_ns();
    bool forced = r->force_round || sync_wanted(r);
    if (!(got & WOKEN) && !forced && now < r->next_round)
        return;
    uint64_t serving = sync_serving(r);
    int rc = run_round(r, forced);
    if (rc == 0)
        r->force_round = false;
    if (now >= r->next_round)
        r->next_round = now + r->cfg.sync_interval;
    sync_complete(r, serving, rc == 0 && resil__redis_up(r) ? 0 : RESIL_EBACKEND);
}

static void *sync_main(void *arg)
{
    resil_redis *r = arg;
    while (!atomic_load(&r->stopping)) {
        if (r->cmd == NULL || !resil__redis_up(r))
            reconnect(r);
        else
            serve(r);
        deliver_events(r);
    }
    close_conn(&r->cmd);
    close_conn(&r->sub);
    pthread_mutex_lock(&r->sync_mu);
    r->thread_done = true;
    pthread_cond_broadcast(&r->sync_cv);
    pthread_mutex_unlock(&r->sync_mu);
    return NULL;
}

/* ---- options ----------------------------------------------------------------------------- */

void resil_redis_opts_default(resil_redis_opts *o)
{
    memset(o, 0, sizeof *o);
    o->prefix = "resil:";
    o->timeout = RESIL_MS(50);
    o->sync_interval = RESIL_MS(100);
    o->refresh_interval = RESIL_S(1);
    o->key_ttl = RESIL_S(24 * 3600);
    resil_backoff_default(&o->reconnect);
    o->reconnect.kind = RESIL_BACKOFF_EXPONENTIAL;
    o->reconnect.base = RESIL_MS(100);
    o->reconnect.factor = 2.0;
    o->reconnect.jitter = RESIL_JITTER_FULL;
    o->reconnect.max_delay = RESIL_S(5);
}

static int bad_duration(resil_err *err, const char *field, const char *what, resil_duration d)
{
    char text[32];
    resil_duration_format(d, text, sizeof text);
    return resil_err_set(err, RESIL_EINVAL, "redis.%s must be %s, got %s", field, what, text);
}

static bool prefix_ok(const char *p)
{
    if (p == NULL || p[0] == '\0' || strlen(p) >= RESIL_REDIS_PREFIX_MAX)
        return false;
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c <= 0x20 || *c == 0x7f)
            return false;
    return true;
}

static int validate(const resil_redis_opts *o, resil_err *err)
{
    if (!prefix_ok(o->prefix))
        return resil_err_set(err, RESIL_EINVAL,
                             "redis.prefix must be set, shorter than %d bytes and free "
                             "of spaces and control characters",
                             RESIL_REDIS_PREFIX_MAX);
    if (o->timeout < RESIL_MS(1) || o->timeout > RESIL_S(10))
        return bad_duration(err, "timeout", "in [1ms, 10s]", o->timeout);
    if (o->sync_interval < RESIL_MS(1) || o->sync_interval > RESIL_S(3600))
        return bad_duration(err, "sync_interval", "in [1ms, 1h]", o->sync_interval);
    if (o->refresh_interval < o->sync_interval)
        return bad_duration(err, "refresh_interval", ">= sync_interval", o->refresh_interval);
    if (o->key_ttl < RESIL_S(1))
        return bad_duration(err, "key_ttl", ">= 1s", o->key_ttl);
    resil_err inner = {0, ""};
    return resil__fleet_refused_under("redis.reconnect",
                                      resil_backoff_validate(&o->reconnect, &inner), &inner, err);
}

/* ---- life ------------------------------------------------------------------------------------ */

static void destroy(resil_redis *r)
{
    pthread_mutex_destroy(&r->list_mu);
    pthread_mutex_destroy(&r->call_mu);
    pthread_mutex_destroy(&r->sync_mu);
    pthread_cond_destroy(&r->sync_cv);
    pthread_mutex_destroy(&r->ev_mu);
    close_conn(&r->call);
    if (r->wake_fd[0] >= 0)
        close(r->wake_fd[0]);
    if (r->wake_fd[1] >= 0)
        close(r->wake_fd[1]);
    free(r->queue.items);
    free(r);
}

static resil_redis *alloc_client(const resil_redis_opts *o)
{
    resil_redis *r = resil__fleet_line_alloc(sizeof *r);
    if (r == NULL)
        return NULL;
    r->wake_fd[0] = r->wake_fd[1] = -1;
    pthread_mutex_init(&r->list_mu, NULL);
    pthread_mutex_init(&r->call_mu, NULL);
    pthread_mutex_init(&r->sync_mu, NULL);
    pthread_cond_init(&r->sync_cv, NULL);
    pthread_mutex_init(&r->ev_mu, NULL);
    r->members.next = r->members.prev = &r->members;
    atomic_init(&r->refs, 1);
    snprintf(r->cfg.prefix, sizeof r->cfg.prefix, "%s", o->prefix);
    snprintf(r->cfg.channel, sizeof r->cfg.channel, "%sevents", o->prefix);
    r->cfg.timeout = o->timeout;
    r->cfg.sync_interval = o->sync_interval;
    r->cfg.refresh_interval = o->refresh_interval;
    r->cfg.ttl_ms = o->key_ttl / 1000000;
    r->cfg.clock = o->clock != NULL ? o->clock : resil_clock_system();
    r->reconnect = o->reconnect;
    r->listener = o->listener;
    r->listener_ud = o->listener_ud;
    return r;
}

static int start_offline(resil_redis *r, const char *why)
{
    close_conn(&r->call);
    announce(r, RESIL_REDIS_DOWN, why);
    count(&r->disconnects, 1);
    return 0;
}

/* A first connection refused, saying how to start anyway when an offline
 * start would have been accepted. */
static int refuse_start(const resil_redis_opts *o, const char *why, bool offline_ok,
                        resil_err *err)
{
    return resil_err_set(err, RESIL_EBACKEND, "redis.url %s: %s%s", o->url, why,
                         offline_ok ? " (set allow_offline_start to start on local state)"
                                    : "");
}

/* The first connection: proves a Redis server answers and loads the
 * script. Nothing answering (or Redis unable to load the script: no answer
 * in time, still loading its dataset) is tolerated only with
 * allow_offline_start. */
static int first_connect(resil_redis *r, const resil_redis_opts *o, resil_err *err)
{
    char why[WHY_MAX];
    fleet_conn_fail fail = 0;
    r->call = resil__fleet_connect(&r->url, r->cfg.timeout, &fail, why, sizeof why);
    if (r->call == NULL && fail == FLEET_UNREACHABLE && o->allow_offline_start)
        return start_offline(r, why);
    if (r->call == NULL)
        return refuse_start(o, why, fail == FLEET_UNREACHABLE, err);
    int rc = resil__fleet_load_script(r->call, r->sha, r->cfg.timeout, why, sizeof why);
    if (rc == RESIL_EBACKEND && o->allow_offline_start)
        return start_offline(r, why);
    if (rc != 0)
        return refuse_start(o, why, rc == RESIL_EBACKEND, err);
    atomic_store(&r->up, true);
    r->linked = true;
    return 0;
}

int resil_redis_new(const resil_redis_opts *o, resil_redis **out, resil_err *err)
{
    if (out == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis: opts and out must not be NULL");
    *out = NULL;
    fleet_url url;
    int rc = resil__fleet_url_parse(o->url, &url, err);
    if (rc == 0)
        rc = validate(o, err);
    if (rc != 0)
        return rc;
    resil_redis *r = alloc_client(o);
    if (r == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "redis: out of memory");
    r->url = url;
    if (pipe2(r->wake_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        destroy(r);
        return resil_err_set(err, RESIL_ESYS, "redis: pipe: %s", strerror(errno));
    }
    rc = first_connect(r, o, err);
    if (rc == 0 && pthread_create(&r->thread, NULL, sync_main, r) != 0)
        rc = resil_err_set(err, RESIL_ESYS, "redis: cannot start the sync thread");
    if (rc != 0) {
        destroy(r);
        return rc;
    }
    resil_redis_sync(r);
    *out = r;
    return 0;
}

void resil__redis_retain(resil_redis *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void resil_redis_free(resil_redis *r)
{
    if (r == NULL || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    atomic_store(&r->stopping, true);
    ssize_t n = write(r->wake_fd[1], "s", 1);
    (void)n;
    pthread_join(r->thread, NULL);
    deliver_events(r);
    destroy(r);
}

bool resil_redis_connected(resil_redis *r) { return r != NULL && resil__redis_up(r); }

int resil_redis_stats_get(resil_redis *r, resil_redis_stats *out)
{
    if (r == NULL || out == NULL)
        return RESIL_EINVAL;
    out->connected = resil__redis_up(r);
    out->rounds = atomic_load(&r->rounds);
    out->commands = atomic_load(&r->commands);
    out->noscript = atomic_load(&r->noscript);
    out->messages = atomic_load(&r->messages);
    out->disconnects = atomic_load(&r->disconnects);
    out->reconnects = atomic_load(&r->reconnects);
    out->command_errors = atomic_load(&r->command_errors);
    out->events_dropped = atomic_load(&r->events_dropped);
    return 0;
}

/* ---- listing by SCAN ------------------------------------------------------------------------ */

/* Names are gathered under the connection's lock and handed out after it is
 * released, so the callback may call the client (status of each, say). */
typedef struct name_list {
    char **names;
    size_t len, cap;
    resil_err *err;
} name_list;

static int keep_name(name_list *l, const char *name)
{
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **names = realloc(l->names, cap * sizeof *names);
        if (names == NULL)
            return RESIL_ENOMEM;
        l->names = names;
        l->cap = cap;
    }
    l->names[l->len] = strdup(name);
    if (l->names[l->len] == NULL)
        return RESIL_ENOMEM;
    l->len++;
    return 0;
}

static void free_names(name_list *l)
{
    for (size_t i = 0; i < l->len; i++)
        free(l->names[i]);
    free(l->names);
}

/* The MATCH pattern: the prefix with glob characters escaped. */
static void scan_pattern(const char *prefix, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = prefix; *p && n + 2 < cap; p++) {
        if (strchr("*?[]\\", *p) != NULL)
            out[n++] = '\\';
        out[n++] = *p;
    }
    snprintf(out + n, cap - n, "breaker:*");
}

static int scan_page(resil_redis *r, redisContext *c, name_list *l, const char *pattern,
                     char *cursor, size_t cursor_cap)
{
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "200"};
    redisReply *rep =
        resil__fleet_command(c, 6, argv, NULL, resil__fleet_deadline(r->cfg.timeout));
    count(&r->commands, 1);
    if (rep == NULL) {
        char why[WHY_MAX];
        resil__fleet_io_why(c, "SCAN", r->cfg.timeout, why, sizeof why);
        bool malformed = resil__fleet_malformed(c);
        if (malformed)
            count(&r->command_errors, 1);
        return resil_err_set(l->err, malformed ? RESIL_EIO : RESIL_EBACKEND, "redis: %s", why);
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        count(&r->command_errors, 1);
        return resil_err_set(l->err, RESIL_EIO, "redis: SCAN: unexpected reply");
    }
    snprintf(cursor, cursor_cap, "%s", rep->element[0]->str);
    size_t skip = strlen(r->cfg.prefix) + strlen("breaker:");
    redisReply *keys = rep->element[1];
    int rc = 0;
    for (size_t i = 0; i < keys->elements && rc == 0; i++) {
        const char *name = resil__fleet_key_name(keys->element[i], skip);
        if (name != NULL)
            rc = keep_name(l, name);
    }
    freeReplyObject(rep);
    return rc == 0 ? 0 : resil_err_set(l->err, rc, "redis: out of memory");
}

static int scan_all(resil_redis *r, redisContext *c, void *ud)
{
    name_list *l = ud;
    char pattern[2 * RESIL_REDIS_PREFIX_MAX + 16], cursor[32] = "0";
    scan_pattern(r->cfg.prefix, pattern, sizeof pattern);
    do {
        int rc = scan_page(r, c, l, pattern, cursor, sizeof cursor);
        if (rc != 0)
            return rc;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

int resil_redis_list(resil_redis *r, resil_redis_name_fn fn, void *ud, resil_err *err)
{
    if (r == NULL || fn == NULL)
        return resil_err_set(err, RESIL_EINVAL, "redis: list needs a client and a function");
    name_list l = {NULL, 0, 0, err};
    if (err != NULL)
        err->code = 0;
    int rc = with_call(r, scan_all, &l);
    if (rc == RESIL_EBACKEND && (err == NULL || err->code != RESIL_EBACKEND))
        resil_err_set(err, RESIL_EBACKEND, "redis: not connected");
    for (size_t i = 0; rc == 0 && i < l.len; i++)
        if (fn(l.names[i], ud) != 0)
            break;
    free_names(&l);
    return rc;
}
