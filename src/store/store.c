/*
 * store.c — the idempotency store's front: options, keys, the connection
 * pool, and the execution strategy.
 *
 * Every public call becomes one store_call run by a backend on one pooled
 * connection, inside resil_retry_execute(): a transient database error rolls
 * the transaction back and the retry policy runs the whole of it again,
 * with backoff, after re-reading the clock. Doing this here, once, rather
 * than in each backend keeps one retry rule for both databases and lets the
 * tests drive it with the fake clock. The verdict logic (first, replay, in
 * progress, mismatch) is also decided here from the row a backend read, so
 * the two dialects cannot disagree about what a record means.
 *
 * Writes may be batched (batch.c): with opts.batch_max >= 2, begin's
 * claim, complete, release, renew and (on SQLite) the purge's chunks
 * queue for group commit, and a batch
 * runs under the same retry policy as one call, as one transaction. A
 * batch that fails for good (a data error) is not allowed to fail its
 * members for one another's sake: each runs again on its own. An
 * asynchronous begin first queues for a read (a second batcher, whose
 * runner reads many keys at once on a connection of the pool): a record
 * that answers it ends it there, and only the others go on to the writes.
 *
 * The journal (journal.c) is the front's too: a completion the database
 * cannot take within the retry policy is appended there instead, and the
 * front replays it — at open, before calls while entries wait, or when the
 * application asks — and answers begin() for its key as in progress
 * meanwhile, so this store never runs that key again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define MAX_CONNECTIONS 64
#define MAX_TABLE_NAME 48 /* leaves room for "_created_at" in 63 bytes */
#define MAX_BLOB ((size_t)1 << 30)
#define MAX_BATCH_WINDOW RESIL_S(1)
/* The replay cache's default bound: at the gateway's typical few hundred
 * bytes of key and response, some tens of thousands of completed keys,
 * which covers the retries of minutes of traffic at thousands of
 * requests a second, for a memory cost no server notices. */
#define DEFAULT_CACHE_BYTES ((size_t)16 << 20)
/* A purge deletes this many records at a time, so that it never holds
 * SQLite's write lock (or a long PostgreSQL transaction) for more than a
 * moment. Batched, it keeps to a duty cycle while key writes come, as
 * PostgreSQL's vacuum keeps to its cost delay: after a chunk that took t
 * (on the store's clock) while they were queued or running, it waits
 * t * (100 - PURGE_SHARE) / PURGE_SHARE, at most PURGE_WAIT_MAX, before
 * the next, so that it takes about PURGE_SHARE percent of the time, of
 * the write lock and of the cores alike. While the writes are idle it
 * runs its chunks back to back (see purge_chunk). */
#define PURGE_CHUNK 256
#define PURGE_SHARE 10 /* percent */
#define PURGE_WAIT_MAX RESIL_S(1)

struct resil_store {
    const store_backend *be;
    store_config cfg;
    char *target; /* owns cfg.target */
    resil_duration lease, retention;
    resil_retry_policy retry;
    resil_clock *clock;
    uint32_t max_conns;

    store_write_lock write_lock; /* see store_config */
    pthread_mutex_t mu;         /* guards the pool */
    pthread_cond_t cv;
    uint32_t n_conns;   /* slots allocated */
    uint32_t n_idle;
    store_conn *idle[MAX_CONNECTIONS];

    store_journal *journal;   /* NULL when none is configured */
    pthread_mutex_t jmu;      /* guards journal, next_replay and the counts */
    pthread_mutex_t replay_mu; /* one replay at a time */
    resil_instant next_replay; /* no opportunistic replay before this */
    uint64_t written, replayed, conflicts;

    unsigned purges;        /* purges running (under mu) */
    bool closing;           /* being freed: a purge stops (under mu) */
    resil_cancel *purge_wake; /* the pausing purge's token (under mu) */
    pthread_cond_t purged;  /* the last purge left */

    store_batcher *batcher; /* NULL when batching is off */
    store_batcher *reader;  /* the asynchronous begins' reads; with batcher */
    uint64_t read_answers;  /* begins a read answered alone (atomic) */
    store_cache *cache;     /* completed records; NULL when off */
};

/* While completions wait in the journal, a call tries to replay them at
 * most this often, with one attempt each: an outage costs a call one
 * failed attempt a second, not the whole retry policy every time. */
#define REPLAY_INTERVAL RESIL_S(1)

/* ---- small helpers ------------------------------------------------------- */

int resil__store_sql(char *buf, size_t cap, const char *tmpl, const char *table)
{
    size_t tlen = strlen(table), n = 0;
    for (const char *p = tmpl; *p != '\0';) {
        bool subst = strncmp(p, "{T}", 3) == 0;
        size_t len = subst ? tlen : 1;
        if (n + len >= cap)
            return RESIL_ERANGE;
        memcpy(buf + n, subst ? table : p, len);
        n += len;
        p += subst ? 3 : 1;
    }
    buf[n] = '\0';
    return 0;
}

resil_outcome resil__store_fail(resil_kind kind, int64_t code, const char *detail,
                                const char *long_msg, char *msg, size_t cap)
{
    snprintf(msg, cap, "%s", long_msg);
    return resil_fail(kind, code, detail);
}

/* Times travel as Unix milliseconds. Every one comes from an int64 count
 * of nanoseconds, so any two of them add without overflow, and the way back
 * is an integer product (a double would round today's times by up to 128 ns). */
static int64_t ms_from_ns(int64_t ns) { return ns / 1000000; }

/* Milliseconds in a duration, rounded up so a short lease never becomes 0. */
static int64_t ms_ceil(resil_duration d) { return d / 1000000 + (d % 1000000 != 0); }

static int64_t ns_from_ms(int64_t ms)
{
    if (ms > INT64_MAX / 1000000)
        return INT64_MAX;
    return ms < INT64_MIN / 1000000 ? INT64_MIN : ms * 1000000;
}

/* ---- results ------------------------------------------------------------- */

void resil_store_result_init(resil_store_result *r) { memset(r, 0, sizeof *r); }

void resil_store_result_free(resil_store_result *r)
{
    if (r == NULL)
        return;
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Copy len bytes (plus a NUL) into a growable buffer. */
static int copy_into(void **buf, size_t *cap, const void *src, size_t len)
{
    if (*buf == NULL || *cap < len + 1) {
        void *p = realloc(*buf, len + 1);
        if (p == NULL)
            return RESIL_ENOMEM;
        *buf = p;
        *cap = len + 1;
    }
    if (len > 0)
        memcpy(*buf, src, len);
    ((char *)*buf)[len] = '\0';
    return 0;
}

static int fill(resil_store_result *r, resil_store_verdict v, int64_t created_ms,
                int status, const void *headers, size_t headers_len,
                const void *body, size_t body_len)
{
    void *h = r->headers, *b = r->body;
    int rc = copy_into(&h, &r->headers_cap, headers, headers_len);
    r->headers = h;
    if (rc == 0)
        rc = copy_into(&b, &r->body_cap, body, body_len);
    r->body = b;
    if (rc != 0)
        return rc;
    r->verdict = v;
    r->lease = 0;
    r->taken_over = false;
    r->lease_left = 0;
    r->created_at = ns_from_ms(created_ms);
    r->status = status;
    r->headers_len = headers_len;
    r->body_len = body_len;
    return 0;
}

/* Lease numbers fence a key's records, not just one record: a record a
 * release or the purge deleted is inserted again later, and a worker still
 * holding a number from before must not match the new one. So the first
 * number is the creation instant (Unix ms, as written to created_at) times
 * 2^20, plus 1 (0 means "no lease"). A later incarnation of the key is
 * created at least one lease after the earlier one's creation (a takeover
 * needs the lease expired; the purge needs the retention, >= lease), so
 * its numbers start above every number the earlier one handed out, given
 * fewer than 2^20 takeovers and clocks that agree to within the lease,
 * which leases need anyway. (A worker that releases its own claim gives
 * its number up; reusing it is its own doing.) The result stays below
 * INT64_MAX, the columns' range, until 2^43 ms: the year 2248; times
 * beyond are held there, times before 1970 at 0. */
#define FIRST_LEASE_SHIFT 20
#define FIRST_LEASE_MAX_MS (INT64_MAX >> FIRST_LEASE_SHIFT)

uint64_t resil__store_first_lease(int64_t created_ms)
{
    if (created_ms < 0)
        created_ms = 0;
    if (created_ms >= FIRST_LEASE_MAX_MS)
        created_ms = FIRST_LEASE_MAX_MS - 1;
    return ((uint64_t)created_ms << FIRST_LEASE_SHIFT) + 1;
}

int resil__store_first(store_call *call, uint64_t lease)
{
    int rc = fill(call->out, RESIL_STORE_FIRST, call->now_ms, 0, NULL, 0, NULL, 0);
    call->out->lease = lease;
    /* an insert numbers its record from this instant; a takeover adds one
     * to a number an earlier instant gave (fewer than 2^20 takeovers) */
    call->out->taken_over = lease != resil__store_first_lease(call->now_ms);
    return rc;
}

static bool same_hash(const store_call *call, const store_row *row)
{
    return row->hash_len == RESIL_SHA256_LEN &&
           memcmp(row->hash, call->hash, RESIL_SHA256_LEN) == 0;
}

bool resil__store_settled(const store_call *call, const store_row *row)
{
    if (row->completed || !same_hash(call, row))
        return true;
    return call->op == STORE_READ && row->lease_expires_ms > call->now_ms;
}

int resil__store_classify(store_call *call, const store_row *row)
{
    resil_store_result *out = call->out;
    if (!same_hash(call, row))
        return fill(out, RESIL_STORE_MISMATCH, row->created_ms, 0, NULL, 0, NULL, 0);
    if (!row->completed) {
        int rc = fill(out, RESIL_STORE_IN_PROGRESS, row->created_ms, 0, NULL, 0, NULL, 0);
        int64_t left; /* the row came from a database: trust no range */
        if (__builtin_sub_overflow(row->lease_expires_ms, call->now_ms, &left))
            left = row->lease_expires_ms > call->now_ms ? INT64_MAX : 0;
        out->lease_left = left > 0 ? ns_from_ms(left) : 0;
        return rc;
    }
    return fill(out, RESIL_STORE_REPLAY, row->created_ms, row->status, row->headers,
                row->headers_len, row->body, row->body_len);
}

const char *resil_store_verdict_name(resil_store_verdict v)
{
    switch (v) {
    case RESIL_STORE_FIRST:
        return "first";
    case RESIL_STORE_REPLAY:
        return "replay";
    case RESIL_STORE_IN_PROGRESS:
        return "in progress";
    case RESIL_STORE_MISMATCH:
        return "mismatch";
    default:
        return "";
    }
}

/* ---- options ------------------------------------------------------------- */

void resil_store_opts_default(resil_store_opts *o)
{
    memset(o, 0, sizeof *o);
    o->table = "resil_idempotency";
    o->lease = RESIL_S(60);
    o->retention = RESIL_S(24 * 3600);
    o->connections = 4;
    o->busy_timeout = RESIL_MS(100);
    o->batch_max = 64;
    o->cache_bytes = DEFAULT_CACHE_BYTES;
    resil_retry_policy_default(&o->retry);
    o->retry.max_attempts = 8;
    o->retry.backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    o->retry.backoff.base = RESIL_MS(5);
    o->retry.backoff.factor = 2.0;
    o->retry.backoff.jitter = RESIL_JITTER_FULL;
    o->retry.backoff.max_delay = RESIL_MS(250);
}

static bool is_identifier(const char *s)
{
    if (s == NULL || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (; *s != '\0'; s++) {
        char ch = *s;
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9') || ch == '_'))
            return false;
    }
    return true;
}

/* Which backend serves a URL, and what it is handed. NULL when none. */
static const store_backend *backend_for(const char *url, const char **target)
{
    if (strncmp(url, "sqlite:", 7) == 0) {
        *target = url + 7;
        return &resil__store_sqlite;
    }
    if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0) {
        *target = url;
        return &resil__store_pg;
    }
    return NULL;
}

static int bad_duration(resil_err *err, const char *field, const char *rule,
                        resil_duration d)
{
    char text[64];
    resil_duration_format(d, text, sizeof text);
    return resil_err_set(err, RESIL_EINVAL, "store.%s must be %s, got %s", field,
                         rule, text);
}

static int check_url(const char *url, resil_err *err)
{
    const char *target;
    if (url == NULL || *url == '\0')
        return resil_err_set(err, RESIL_EINVAL,
                             "store.url is required (sqlite:PATH or postgres://...)");
    if (backend_for(url, &target) == NULL) {
        /* Name only the scheme: the rest may hold a password. */
        int scheme = (int)strcspn(url, ":");
        return resil_err_set(err, RESIL_EINVAL,
                             "store.url must be sqlite:PATH or postgres://..., got "
                             "scheme '%.*s'",
                             scheme > 32 ? 32 : scheme, url);
    }
    if (*target == '\0')
        return resil_err_set(err, RESIL_EINVAL, "store.url 'sqlite:' needs a file path");
    return 0;
}

static int check_opts(const resil_store_opts *o, resil_err *err)
{
    int rc = check_url(o->url, err);
    if (rc != 0)
        return rc;
    if (!is_identifier(o->table) || strlen(o->table) > MAX_TABLE_NAME)
        return resil_err_set(err, RESIL_EINVAL,
                             "store.table must be an identifier ([A-Za-z_][A-Za-z0-9_]*, "
                             "at most %d characters), got '%.64s'",
                             MAX_TABLE_NAME, o->table ? o->table : "(null)");
    if (o->lease < RESIL_MS(1))
        return bad_duration(err, "lease", ">= 1ms", o->lease);
    if (o->retention < o->lease)
        return bad_duration(err, "retention", ">= store.lease", o->retention);
    if (o->connections < 1 || o->connections > MAX_CONNECTIONS)
        return resil_err_set(err, RESIL_EINVAL, "store.connections must be in [1,%d], got %u",
                             MAX_CONNECTIONS, o->connections);
    if (o->busy_timeout < 0 || o->busy_timeout > RESIL_S(60))
        return bad_duration(err, "busy_timeout", "in [0, 60s]", o->busy_timeout);
    if (o->journal != NULL && *o->journal == '\0')
        return resil_err_set(err, RESIL_EINVAL,
                             "store.journal must be a file path or NULL, got \"\"");
    if (o->batch_max > STORE_MAX_BATCH)
        return resil_err_set(err, RESIL_EINVAL, "store.batch_max must be in [0,%d], got %u",
                             STORE_MAX_BATCH, o->batch_max);
    if (o->batch_window < 0 || o->batch_window > MAX_BATCH_WINDOW)
        return bad_duration(err, "batch_window", "in [0, 1s]", o->batch_window);
    if (o->batch_window > 0 && o->batch_max < 2)
        return resil_err_set(err, RESIL_EINVAL,
                             "store.batch_window needs store.batch_max >= 2 (got %u): "
                             "without batching a window only adds latency",
                             o->batch_max);
    if (o->sqlite_sync != RESIL_STORE_SYNC_FULL && o->sqlite_sync != RESIL_STORE_SYNC_NORMAL)
        return resil_err_set(err, RESIL_EINVAL,
                             "store.sqlite_sync must be RESIL_STORE_SYNC_FULL or "
                             "RESIL_STORE_SYNC_NORMAL, got %d",
                             o->sqlite_sync);
    if (o->sqlite_sync != RESIL_STORE_SYNC_FULL && strncmp(o->url, "sqlite:", 7) != 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "store.sqlite_sync applies to sqlite: stores only");
    resil_err inner = {0};
    if (resil_retry_policy_validate(&o->retry, &inner) != 0)
        return resil_err_set(err, RESIL_EINVAL, "store.%s", inner.message);
    return 0;
}

/* ---- the pool ------------------------------------------------------------ */

static int checkout(resil_store *s, store_conn **out)
{
    pthread_mutex_lock(&s->mu);
    while (s->n_idle == 0 && s->n_conns == s->max_conns)
        pthread_cond_wait(&s->cv, &s->mu);
    if (s->n_idle > 0) {
        *out = s->idle[--s->n_idle];
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    s->n_conns++;
    pthread_mutex_unlock(&s->mu);
    int rc = s->be->conn_new(&s->cfg, out);
    if (rc != 0) {
        pthread_mutex_lock(&s->mu);
        s->n_conns--;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

static void checkin(resil_store *s, store_conn *c)
{
    pthread_mutex_lock(&s->mu);
    s->idle[s->n_idle++] = c;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the execution strategy ---------------------------------------------- */

typedef struct attempt {
    resil_store *s;
    store_conn *conn;
    store_call *call;
    char msg[200];
} attempt;

/* Before each attempt: the time now, and no result from a previous one. */
static void stamp(resil_store *s, store_call *call)
{
    call->now_ms = ms_from_ns(resil_clock_wall_now(s->clock));
    call->lease_until_ms = call->now_ms + ms_ceil(s->lease);
    call->cutoff_ms = call->now_ms - ms_ceil(s->retention);
    call->answered = false;
    call->alone = false;
    call->owned = false;
    call->deleted = 0;
}

static resil_outcome run_attempt(resil_attempt_ctx *ctx)
{
    attempt *a = ctx->user;
    stamp(a->s, a->call);
    return a->s->be->run(a->conn, a->call, a->msg, sizeof a->msg);
}

/* A failed call's code from its last outcome's class (store_internal.h):
 * transient or unavailable is RESIL_EBUSY, anything else RESIL_EBACKEND. */
static bool busy_kind(resil_kind kind)
{
    return kind == RESIL_TRANSIENT || kind == STORE_UNAVAILABLE;
}

/* The error of a transaction the retry policy gave up on (n calls in it). */
static int gave_up(resil_store *s, const char *msg, const resil_retry_result *res, size_t n,
                   resil_err *err)
{
    int code = busy_kind(res->final.kind) ? RESIL_EBUSY : RESIL_EBACKEND;
    char batch[40] = "";
    if (n > 1)
        snprintf(batch, sizeof batch, ", in a batch of %zu", n);
    return resil_err_set(err, code, "store: %s: %s (%s, %s after %u attempt%s%s)", s->be->name,
                         msg, res->final.detail, resil_stop_name(res->stop), res->attempts,
                         res->attempts == 1 ? "" : "s", batch);
}

/* Run one call as one transaction under a retry policy. */
static int run_call_with(resil_store *s, const resil_retry_policy *policy, store_call *call,
                         resil_err *err)
{
    attempt a = {.s = s, .call = call};
    int rc = checkout(s, &a.conn);
    if (rc != 0)
        return resil_err_set(err, rc, "store: out of memory");
    resil_exec_opts eo = {.clock = s->clock};
    resil_retry_result res;
    rc = resil_retry_execute(policy, &eo, run_attempt, &a, &res, err);
    checkin(s, a.conn);
    if (rc != 0)
        return rc;
    if (res.stop == RESIL_STOP_SUCCEEDED)
        return 0;
    return gave_up(s, a.msg, &res, 1, err);
}

static int run_call(resil_store *s, store_call *call, resil_err *err)
{
    return run_call_with(s, &s->retry, call, err);
}

/* ---- group commit ------------------------------------------------------------ */

typedef struct batch_attempt {
    resil_store *s;
    store_conn *conn;
    store_call *calls[STORE_MAX_BATCH];
    size_t n;
    char msg[200];
} batch_attempt;

static resil_outcome run_batch_attempt(resil_attempt_ctx *ctx)
{
    batch_attempt *a = ctx->user;
    for (size_t i = 0; i < a->n; i++)
        stamp(a->s, a->calls[i]);
    return a->s->be->run_batch(a->conn, a->calls, a->n, a->msg, sizeof a->msg);
}

/* Fail the members that were to write (a member answered before its
 * batch keeps its answer). */
static void fail_members(batch_member *const *m, size_t n, int code, const char *text)
{
    for (size_t i = 0; i < n; i++)
        if (!m[i]->call->answered)
            m[i]->rc = resil_err_set(m[i]->err, code, "%s", text);
}

/* The batcher's runner: the batch as one transaction under the retry
 * policy. Success answers every member; a permanent failure sends each
 * member back to run alone, so that one request the database refuses
 * does not fail the others; anything else fails them all, none of them
 * acknowledged (the transaction rolled back). A member answered before
 * its batch (an asynchronous call for a key the journal holds) rides it
 * without a write, so that its answer keeps the asynchronous calls' one
 * way back. */
static void run_batch(void *ud, batch_member *const *m, size_t n)
{
    resil_store *s = ud;
    batch_attempt *a = malloc(sizeof *a);
    if (a == NULL) {
        fail_members(m, n, RESIL_ENOMEM, "store: out of memory");
        return;
    }
    a->s = s;
    a->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i]->call->answered)
            continue;
        a->calls[a->n++] = m[i]->call;
        m[i]->rc = 0;
    }
    if (a->n == 0) {
        free(a);
        return;
    }
    resil_err err = {0};
    resil_retry_result res;
    resil_exec_opts eo = {.clock = s->clock};
    int rc = checkout(s, &a->conn);
    if (rc == 0) {
        rc = resil_retry_execute(&s->retry, &eo, run_batch_attempt, a, &res, &err);
        checkin(s, a->conn);
    } else {
        resil_err_set(&err, rc, "store: out of memory");
    }
    if (rc == 0 && res.stop != RESIL_STOP_SUCCEEDED) {
        if (!busy_kind(res.final.kind) && a->n > 1) {
            for (size_t i = 0; i < a->n; i++)
                a->calls[i]->alone = true;
        } else {
            rc = gave_up(s, a->msg, &res, a->n, &err);
        }
    }
    if (rc != 0)
        fail_members(m, n, rc, err.message);
    free(a);
}

/* After a batch: a call it could not decide runs on its own. */
static int decide_alone(resil_store *s, store_call *call, int rc, resil_err *err)
{
    if (rc == 0 && call->alone)
        rc = run_call(s, call, err);
    return rc;
}

/* A key write: batched when batching is on, else a transaction of its own. */
static int run_write(resil_store *s, store_call *call, resil_err *err)
{
    if (s->batcher == NULL)
        return run_call(s, call, err);
    call->alone = false;
    int rc = resil__batcher_submit(s->batcher, call, err);
    return decide_alone(s, call, rc, err);
}

void resil_store_batch_stats_get(resil_store *s, resil_store_batch_stats *out)
{
    memset(out, 0, sizeof *out);
    if (s == NULL)
        return;
    out->cache_hits = resil__cache_hits(s->cache);
    if (s->batcher == NULL)
        return;
    resil__batcher_stats(s->batcher, out);
    resil_store_batch_stats reads;
    resil__batcher_stats(s->reader, &reads);
    out->read_batches = reads.batches;
    out->reads = reads.calls;
    out->read_answers = __atomic_load_n(&s->read_answers, __ATOMIC_RELAXED);
}

/* ---- the replay cache ---------------------------------------------------------- */

/* The first instant the purge may delete a record created at created_at
 * (store_call.cutoff_ms): a cached copy is used only before it. */
static int64_t expires_ms(resil_store *s, const resil_store_result *r)
{
    return ms_from_ns(r->created_at) + ms_ceil(s->retention);
}

/* A begin the cache can answer: no read, no write. */
static bool answer_cached(resil_store *s, store_call *call)
{
    if (s->cache == NULL)
        return false;
    stamp(s, call);
    return resil__cache_answer(s->cache, call);
}

/* What a begin, complete or release that ran teaches the cache: a
 * completed record the database answered, a claim of this process, and
 * its completion (or its end without one). */
static void learn(resil_store *s, const store_call *call, int rc)
{
    if (s->cache == NULL)
        return;
    if (call->op == STORE_COMPLETE || call->op == STORE_RELEASE) {
        resil__cache_settled(s->cache, call,
                             rc == 0 && call->owned && call->op == STORE_COMPLETE);
        return;
    }
    if (call->op != STORE_BEGIN || rc != 0)
        return;
    if (call->out->verdict == RESIL_STORE_REPLAY || call->out->verdict == RESIL_STORE_FIRST)
        resil__cache_begun(s->cache, call, expires_ms(s, call->out));
}

/* ---- the asynchronous begin's read ------------------------------------------ */

/* The reader's runner: every unanswered begin of the batch read at once,
 * one attempt, on a connection of the pool. The read is a hint, so a
 * failed one fails nobody: its begins go on to the claim, which runs
 * under the retry policy and decides. */
static void run_reads(void *ud, batch_member *const *m, size_t n)
{
    resil_store *s = ud;
    store_call *calls[STORE_MAX_BATCH];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        m[i]->rc = 0;
        if (m[i]->call->answered)
            continue;
        calls[k] = m[i]->call;
        stamp(s, calls[k]);
        calls[k++]->op = STORE_READ;
    }
    store_conn *conn;
    char msg[200];
    bool read = false;
    if (k > 0 && checkout(s, &conn) == 0) {
        resil_outcome o = s->be->run_reads(conn, calls, k, msg, sizeof msg);
        read = resil_outcome_ok(&o);
        checkin(s, conn);
    }
    uint64_t answered = 0;
    for (size_t i = 0; i < k; i++) {
        calls[i]->op = STORE_BEGIN;
        calls[i]->answered = read && calls[i]->answered;
        answered += calls[i]->answered;
    }
    __atomic_fetch_add(&s->read_answers, answered, __ATOMIC_RELAXED);
}

static void finish_async(void *ud, batch_member *m);

/* The reader's finish: an answered begin (or one cancelled by the store's
 * free) is done; any other goes on to a write batch. */
static void finish_read(void *ud, batch_member *m)
{
    resil_store *s = ud;
    if (m->rc != 0 || m->call->answered) {
        finish_async(ud, m);
        return;
    }
    int rc = resil__batcher_submit_async(s->batcher, m);
    if (rc == 0)
        return;
    m->rc = resil_err_set(m->err, RESIL_ECANCELED,
                          "store: the store was freed before the call's batch ran");
    finish_async(ud, m);
}

static int start_batching(resil_store *s, const resil_store_opts *o)
{
    if (o->batch_max < 2)
        return 0;
    batcher_opts bo = {
        .max = o->batch_max,
        .window = o->batch_window,
        /* SQLite has one writer. PostgreSQL commits on every connection;
         * half the pool runs batches, the rest stays for the reads that
         * answer replays without waiting for one. */
        .max_running = s->be == &resil__store_sqlite ? 1 : (s->max_conns + 1) / 2,
        .clock = s->clock,
        .run = run_batch,
        .finish = finish_async,
        .ud = s,
    };
    int rc = resil__batcher_new(&bo, &s->batcher);
    if (rc != 0)
        return rc;
    /* The reads: SQLite reads beside its one writer (WAL); PostgreSQL's
     * reads take the half of the pool the batches leave. */
    bo.window = 0;
    bo.max_running = s->be == &resil__store_sqlite ? 1 : s->max_conns / 2;
    if (bo.max_running == 0)
        bo.max_running = 1;
    bo.run = run_reads;
    bo.finish = finish_read;
    return resil__batcher_new(&bo, &s->reader);
}

static int not_owned(store_call *call, resil_err *err)
{
    return resil_err_set(err, RESIL_ESTATE,
                         "store: lease %llu no longer owns key '%s' (taken over, "
                         "released, completed or purged)",
                         (unsigned long long)call->lease, call->key);
}

/* ---- the journal ---------------------------------------------------------- */

static bool same_key(const journal_entry *e, const store_call *call)
{
    return strcmp(e->key, call->key) == 0 && strcmp(e->tenant, call->tenant) == 0 &&
           strcmp(e->operation, call->operation) == 0;
}

/* Does a completion for this key wait in the journal? */
static bool journal_holds(resil_store *s, const store_call *call)
{
    if (s->journal == NULL)
        return false;
    bool held = false;
    pthread_mutex_lock(&s->jmu);
    for (size_t i = 0; i < s->journal->n && !held; i++)
        held = !s->journal->items[i]->done && same_key(s->journal->items[i], call);
    pthread_mutex_unlock(&s->jmu);
    return held;
}

static journal_entry *next_pending(resil_store *s)
{
    journal_entry *e = NULL;
    pthread_mutex_lock(&s->jmu);
    for (size_t i = 0; i < s->journal->n && e == NULL; i++)
        if (!s->journal->items[i]->done)
            e = s->journal->items[i];
    pthread_mutex_unlock(&s->jmu);
    return e;
}

/* Complete one entry's record. 0 applied; RESIL_ESTATE or RESIL_EBACKEND
 * when the database refuses it for good; RESIL_EBUSY when it is down. */
static int apply(resil_store *s, const resil_retry_policy *policy, journal_entry *e,
                 resil_err *err)
{
    store_call call = {.op = STORE_COMPLETE, .tenant = e->tenant, .operation = e->operation,
                       .key = e->key, .lease = e->lease, .resp = &e->resp};
    int rc = run_call_with(s, policy, &call, err);
    if (rc == 0 && !call.owned)
        rc = not_owned(&call, err);
    return rc;
}

static void settle_entry(resil_store *s, journal_entry *e, bool applied)
{
    pthread_mutex_lock(&s->jmu);
    e->done = true;
    s->journal->pending--;
    if (applied)
        s->replayed++;
    else
        s->conflicts++;
    pthread_mutex_unlock(&s->jmu);
}

/* Apply pending entries in order until none is left (then empty the
 * file) or the database is unavailable. Only a replay frees entries, and
 * replays are serialised, so an entry outlives its use here. */
static int replay(resil_store *s, const resil_retry_policy *policy, size_t *applied,
                  resil_err *err)
{
    int rc = 0;
    journal_entry *e;
    *applied = 0;
    while (rc == 0 && (e = next_pending(s)) != NULL) {
        rc = apply(s, policy, e, err);
        if (rc == 0 || rc == RESIL_ESTATE || rc == RESIL_EBACKEND) {
            settle_entry(s, e, rc == 0);
            *applied += rc == 0;
            rc = 0;
        }
    }
    pthread_mutex_lock(&s->jmu);
    if (rc == 0 && s->journal->pending == 0 && s->journal->n > 0)
        rc = resil__journal_truncate(s->journal, err);
    pthread_mutex_unlock(&s->jmu);
    return rc;
}

/* Before a call: replay when entries wait and the last try is a
 * REPLAY_INTERVAL old, with one attempt per entry, unless a replay is
 * already running. */
static void maybe_replay(resil_store *s)
{
    if (s->journal == NULL)
        return;
    resil_instant now = resil_clock_now(s->clock);
    pthread_mutex_lock(&s->jmu);
    bool due = s->journal->pending > 0 && now >= s->next_replay;
    if (due)
        s->next_replay = now + REPLAY_INTERVAL;
    pthread_mutex_unlock(&s->jmu);
    if (!due || pthread_mutex_trylock(&s->replay_mu) != 0)
        return;
    resil_retry_policy once = s->retry;
    once.max_attempts = 1;
    size_t applied;
    replay(s, &once, &applied, NULL);
    pthread_mutex_unlock(&s->replay_mu);
}

int resil_store_journal_replay(resil_store *s, size_t *replayed, resil_err *err)
{
    size_t applied = 0;
    int rc = 0;
    if (s == NULL)
        rc = resil_err_set(err, RESIL_EINVAL, "store: store is required");
    else if (s->journal != NULL) {
        pthread_mutex_lock(&s->replay_mu);
        rc = replay(s, &s->retry, &applied, err);
        pthread_mutex_unlock(&s->replay_mu);
    }
    if (replayed != NULL)
        *replayed = applied;
    return rc;
}

void resil_store_journal_stats_get(resil_store *s, resil_store_journal_stats *out)
{
    memset(out, 0, sizeof *out);
    if (s == NULL || s->journal == NULL)
        return;
    pthread_mutex_lock(&s->jmu);
    out->pending = s->journal->pending;
    out->written = s->written;
    out->replayed = s->replayed;
    out->conflicts = s->conflicts;
    pthread_mutex_unlock(&s->jmu);
}

/* complete() when the database is unavailable: make it durable here. */
static int journal_completion(resil_store *s, const store_call *call, resil_err *err)
{
    journal_record r = {
        .lease = call->lease,
        .status = call->resp->status,
        .tenant = call->tenant,
        .tenant_len = strlen(call->tenant),
        .operation = call->operation,
        .operation_len = strlen(call->operation),
        .key = call->key,
        .key_len = strlen(call->key),
        .headers = (const uint8_t *)call->resp->headers,
        .headers_len = call->resp->headers_len,
        .body = call->resp->body,
        .body_len = call->resp->body_len,
    };
    resil_err inner = {0};
    pthread_mutex_lock(&s->jmu);
    int rc = resil__journal_append(s->journal, &r, &inner);
    if (rc == 0) {
        s->written++;
        s->next_replay = resil_clock_now(s->clock) + REPLAY_INTERVAL;
    }
    pthread_mutex_unlock(&s->jmu);
    if (rc == 0)
        return 0;
    char why[128];
    snprintf(why, sizeof why, "%.127s", err ? err->message : "store: the database is unavailable");
    return resil_err_set(err, RESIL_EBUSY, "%s; the journal failed too: %.120s", why,
                         inner.message);
}

/* ---- the public calls ---------------------------------------------------- */

int resil_store_new(const resil_store_opts *o, resil_store **out, resil_err *err)
{
    if (o == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: options and out are required");
    *out = NULL;
    int rc = check_opts(o, err);
    if (rc != 0)
        return rc;
    resil_store *s = calloc(1, sizeof *s);
    char *target = NULL;
    const char *t = NULL;
    const store_backend *be = backend_for(o->url, &t);
    if (s == NULL || (target = strdup(t)) == NULL) {
        free(s);
        return resil_err_set(err, RESIL_ENOMEM, "store: out of memory");
    }
    s->be = be;
    s->target = target;
    s->cfg.target = target;
    snprintf(s->cfg.table, sizeof s->cfg.table, "%s", o->table);
    s->cfg.busy_timeout_ms = (int)(o->busy_timeout / 1000000);
    s->cfg.sqlite_sync = o->sqlite_sync;
    s->lease = o->lease;
    s->retention = o->retention;
    s->retry = o->retry;
    s->clock = o->clock ? o->clock : resil_clock_system();
    s->max_conns = strcmp(target, ":memory:") == 0 ? 1 : o->connections;
    s->cfg.write_lock = &s->write_lock;
    resil__write_lock_init(&s->write_lock);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->purged, NULL);
    pthread_mutex_init(&s->jmu, NULL);
    pthread_mutex_init(&s->replay_mu, NULL);
    if (start_batching(s, o) != 0 || resil__cache_new(o->cache_bytes, &s->cache) != 0)
        rc = resil_err_set(err, RESIL_ENOMEM, "store: out of memory");
    if (rc == 0 && o->journal != NULL)
        rc = resil__journal_open(o->journal, &s->journal, err);
    store_call call = {.op = STORE_CONNECT, .tenant = "", .operation = "", .key = ""};
    if (rc == 0)
        rc = run_call(s, &call, err);
    if (rc != 0) {
        resil_store_free(s);
        return rc;
    }
    /* A journal left by a crashed process: replay it now. What the
     * database cannot take yet waits for the next try. */
    size_t applied;
    if (s->journal != NULL && s->journal->pending > 0)
        resil_store_journal_replay(s, &applied, NULL);
    *out = s;
    return 0;
}

void resil_store_free(resil_store *s)
{
    if (s == NULL)
        return;
    /* First a purge another thread runs: it stops before its next chunk
     * (its wait cut short), and only then does the store go. */
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    if (s->purge_wake != NULL)
        resil_cancel_fire(s->purge_wake);
    while (s->purges > 0)
        pthread_cond_wait(&s->purged, &s->mu);
    pthread_mutex_unlock(&s->mu);
    /* The batches that run still need the pool and the journal; the
     * reads before the writes, which the reads may still feed. */
    resil__batcher_free(s->reader);
    resil__batcher_free(s->batcher);
    for (uint32_t i = 0; i < s->n_idle; i++)
        s->be->conn_free(s->idle[i]);
    resil__journal_close(s->journal);
    resil__cache_free(s->cache);
    resil__write_lock_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->purged);
    pthread_mutex_destroy(&s->jmu);
    pthread_mutex_destroy(&s->replay_mu);
    free(s->target);
    free(s);
}

const char *resil_store_backend(const resil_store *s) { return s->be->name; }

/* Printable ASCII only: what an Idempotency-Key header's structured-field
 * string can carry. A control byte or a non-ASCII one would be stored by
 * SQLite as given and refused by PostgreSQL (an invalid UTF-8 sequence) on
 * every attempt, so it is refused here, once, as the caller's error. */
static int check_field(const char *name, const char *v, bool required, resil_err *err)
{
    if (required && (v == NULL || *v == '\0'))
        return resil_err_set(err, RESIL_EINVAL, "store: the %s must not be empty", name);
    if (v == NULL)
        return 0;
    size_t len = strlen(v);
    if (len > RESIL_STORE_FIELD_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "store: the %s must be at most %d bytes, got %zu", name,
                             RESIL_STORE_FIELD_MAX, len);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c > 0x7e)
            return resil_err_set(err, RESIL_EINVAL,
                                 "store: the %s must be %s%d printable ASCII characters "
                                 "(0x20-0x7E); byte %zu is 0x%02X",
                                 name, required ? "1 to " : "0 to ", RESIL_STORE_FIELD_MAX,
                                 i, c);
    }
    return 0;
}

/* Check a key and fill the call's copy of it. */
static int prepare_call(resil_store *s, const resil_store_key *k, store_call *call,
                        resil_err *err)
{
    if (s == NULL || k == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: store and key are required");
    int rc = check_field("key", k->key, true, err);
    if (rc == 0)
        rc = check_field("tenant", k->tenant, false, err);
    if (rc == 0)
        rc = check_field("operation", k->operation, false, err);
    call->tenant = k->tenant ? k->tenant : "";
    call->operation = k->operation ? k->operation : "";
    call->key = k->key;
    return rc;
}

/* begin() for a key whose completion waits in the journal: the client
 * retries after the next replay try. */
static int journaled_in_progress(resil_store *s, resil_store_result *out, resil_err *err)
{
    int64_t now_ms = ms_from_ns(resil_clock_wall_now(s->clock));
    int rc = fill(out, RESIL_STORE_IN_PROGRESS, now_ms, 0, NULL, 0, NULL, 0);
    out->lease_left = REPLAY_INTERVAL;
    return rc == 0 ? 0 : resil_err_set(err, rc, "store: out of memory");
}

/* Every begin's start: the key, the hash and the result, which says
 * RESIL_STORE_NONE until the begin decides. */
static int prepare_begin(resil_store *s, const resil_store_key *k, store_call *call,
                         resil_err *err)
{
    int rc = prepare_call(s, k, call, err);
    if (rc != 0)
        return rc;
    if (call->hash == NULL || call->out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: hash and result are required");
    call->out->verdict = RESIL_STORE_NONE;
    return 0;
}

/* Batched, a begin first reads: a replay or a mismatch needs no write,
 * so it never waits for a batch. */
static int begin_call(resil_store *s, store_call *call, resil_err *err)
{
    if (s->batcher == NULL)
        return run_call(s, call, err);
    call->op = STORE_PEEK;
    int rc = run_call(s, call, err);
    call->op = STORE_BEGIN;
    if (rc != 0 || call->answered)
        return rc;
    return run_write(s, call, err);
}

int resil_store_begin(resil_store *s, const resil_store_key *k,
                      const uint8_t hash[RESIL_SHA256_LEN], resil_store_result *out,
                      resil_err *err)
{
    store_call call = {.op = STORE_BEGIN, .hash = hash, .out = out};
    int rc = prepare_begin(s, k, &call, err);
    if (rc != 0)
        return rc;
    maybe_replay(s);
    if (journal_holds(s, &call))
        return journaled_in_progress(s, out, err);
    if (answer_cached(s, &call))
        return 0;
    rc = begin_call(s, &call, err);
    learn(s, &call, rc);
    if (rc != 0)
        out->verdict = RESIL_STORE_NONE;
    return rc;
}

int resil_store_begin_cached(resil_store *s, const resil_store_key *k,
                             const uint8_t hash[RESIL_SHA256_LEN], resil_store_result *out,
                             resil_err *err)
{
    store_call call = {.op = STORE_BEGIN, .hash = hash, .out = out};
    int rc = prepare_begin(s, k, &call, err);
    if (rc == 0 && s->cache != NULL && !journal_holds(s, &call))
        answer_cached(s, &call);
    return rc;
}

/* complete, release, renew: a key whose completion waits in the journal
 * is completed already, as far as its lease is concerned. */
/* What a complete, release or renew whose write ran answers: a
 * completion the database could not take goes to the journal, and a row
 * that was not ours is RESIL_ESTATE. */
static int settle_fenced(resil_store *s, store_call *call, int rc, resil_err *err)
{
    if (rc == RESIL_EBUSY && call->op == STORE_COMPLETE && s->journal != NULL)
        return journal_completion(s, call, err);
    if (rc != 0 || call->owned)
        return rc;
    return not_owned(call, err);
}

static int journal_holds_completed(resil_store *s, store_call *call, resil_err *err)
{
    if (!journal_holds(s, call))
        return 0;
    return resil_err_set(err, RESIL_ESTATE,
                         "store: key '%s' is completed already (its completion waits "
                         "in the journal)",
                         call->key);
}

static int fenced(resil_store *s, store_call *call, resil_err *err)
{
    maybe_replay(s);
    int rc = journal_holds_completed(s, call, err);
    if (rc != 0)
        return rc;
    rc = settle_fenced(s, call, run_write(s, call, err), err);
    learn(s, call, rc);
    return rc;
}

static int check_response(const resil_store_response *r, resil_err *err)
{
    if (r == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: the response is required");
    if ((r->headers == NULL && r->headers_len > 0) || (r->body == NULL && r->body_len > 0))
        return resil_err_set(err, RESIL_EINVAL, "store: response data is NULL but its length is not 0");
    if (r->headers_len > MAX_BLOB)
        return resil_err_set(err, RESIL_ERANGE,
                             "store: response.headers_len must be at most 1 GiB (%zu), got %zu",
                             MAX_BLOB, r->headers_len);
    if (r->body_len > MAX_BLOB)
        return resil_err_set(err, RESIL_ERANGE,
                             "store: response.body_len must be at most 1 GiB (%zu), got %zu",
                             MAX_BLOB, r->body_len);
    return 0;
}

int resil_store_complete(resil_store *s, const resil_store_key *k, uint64_t lease,
                         const resil_store_response *r, resil_err *err)
{
    store_call call = {.op = STORE_COMPLETE, .lease = lease, .resp = r};
    int rc = prepare_call(s, k, &call, err);
    if (rc != 0)
        return rc;
    if ((rc = check_response(r, err)) != 0)
        return rc;
    return fenced(s, &call, err);
}

int resil_store_release(resil_store *s, const resil_store_key *k, uint64_t lease,
                        resil_err *err)
{
    store_call call = {.op = STORE_RELEASE, .lease = lease};
    int rc = prepare_call(s, k, &call, err);
    if (rc != 0)
        return rc;
    return fenced(s, &call, err);
}

int resil_store_renew(resil_store *s, const resil_store_key *k, uint64_t lease,
                      resil_err *err)
{
    store_call call = {.op = STORE_RENEW, .lease = lease};
    int rc = prepare_call(s, k, &call, err);
    if (rc != 0)
        return rc;
    return fenced(s, &call, err);
}

/* ---- the asynchronous form ------------------------------------------------- */

/* One asynchronous call, from its submission to its callback: the batch
 * member, the call and copies of what the caller need not keep (the key,
 * the hash). Owned by the store from a successful submission until
 * finish_async frees it. */
typedef struct store_async {
    batch_member m; /* first: the batcher hands back &m */
    store_call call;
    resil_err err;
    resil_store_cb cb;
    void *ud;
    bool cached; /* a begin the cache answered: nothing to learn */
    uint8_t hash[RESIL_SHA256_LEN];
    char tenant[RESIL_STORE_FIELD_MAX + 1];
    char operation[RESIL_STORE_FIELD_MAX + 1];
    char key[RESIL_STORE_FIELD_MAX + 1];
} store_async;

/* The batcher's finish: what the blocking call does after its batch,
 * then the callback, once. */
static void finish_async(void *ud, batch_member *m)
{
    resil_store *s = ud;
    store_async *a = (store_async *)m;
    store_call *call = &a->call;
    int rc = m->rc;
    if (!call->answered && rc != RESIL_ECANCELED) {
        rc = decide_alone(s, call, rc, &a->err);
        if (call->op != STORE_BEGIN)
            rc = settle_fenced(s, call, rc, &a->err);
    }
    if (!a->cached && rc != RESIL_ECANCELED)
        learn(s, call, rc);
    if (rc != 0 && call->op == STORE_BEGIN)
        call->out->verdict = RESIL_STORE_NONE;
    a->cb(rc, rc != 0 ? &a->err : NULL, a->ud);
    free(a);
    if (rc != RESIL_ECANCELED)
        maybe_replay(s);
}

/* A checked call, copied to the heap for its trip through a batch. */
static int async_new(resil_store *s, const store_call *call, resil_store_cb cb, void *ud,
                     store_async **out, resil_err *err)
{
    if (cb == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: the callback is required");
    if (s->batcher == NULL)
        return resil_err_set(err, RESIL_EINVAL,
                             "store: the asynchronous calls need group commit "
                             "(store.batch_max >= 2, got batching off)");
    store_async *a = calloc(1, sizeof *a);
    if (a == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "store: out of memory");
    a->call = *call;
    snprintf(a->tenant, sizeof a->tenant, "%s", call->tenant);
    snprintf(a->operation, sizeof a->operation, "%s", call->operation);
    snprintf(a->key, sizeof a->key, "%s", call->key);
    a->call.tenant = a->tenant;
    a->call.operation = a->operation;
    a->call.key = a->key;
    if (call->hash != NULL) {
        memcpy(a->hash, call->hash, RESIL_SHA256_LEN);
        a->call.hash = a->hash;
    }
    a->m.call = &a->call;
    a->m.err = &a->err;
    a->cb = cb;
    a->ud = ud;
    *out = a;
    return 0;
}

/* Queue it on q (the reads or the writes); the answer comes through its
 * callback. An answer known already (rc, with a->err set when rc != 0)
 * still rides a batch, so that the callback keeps its one way back. */
static int async_submit(store_batcher *q, store_async *a, bool answered, int rc,
                        resil_err *err)
{
    a->call.answered = answered;
    a->m.rc = rc;
    int qrc = resil__batcher_submit_async(q, &a->m);
    if (qrc == 0)
        return 0;
    free(a);
    return resil_err_set(err, qrc, qrc == RESIL_ENOMEM
                                       ? "store: no writer thread could start"
                                       : "store: the store is being freed");
}

int resil_store_begin_async(resil_store *s, const resil_store_key *k,
                            const uint8_t hash[RESIL_SHA256_LEN], resil_store_result *out,
                            resil_store_cb cb, void *ud, resil_err *err)
{
    store_call call = {.op = STORE_BEGIN, .hash = hash, .out = out};
    store_async *a = NULL;
    int rc = prepare_begin(s, k, &call, err);
    if (rc == 0)
        rc = async_new(s, &call, cb, ud, &a, err);
    if (rc != 0)
        return rc;
    if (!journal_holds(s, &a->call)) {
        a->cached = answer_cached(s, &a->call);
        return async_submit(s->reader, a, a->cached, 0, err);
    }
    if ((rc = journaled_in_progress(s, out, err)) != 0) {
        free(a);
        return rc;
    }
    return async_submit(s->reader, a, true, 0, err);
}

static int fenced_async(resil_store *s, const store_call *call, resil_store_cb cb, void *ud,
                        resil_err *err)
{
    store_async *a = NULL;
    int rc = async_new(s, call, cb, ud, &a, err);
    if (rc != 0)
        return rc;
    rc = journal_holds_completed(s, &a->call, &a->err);
    return async_submit(s->batcher, a, rc != 0, rc, err);
}

int resil_store_complete_async(resil_store *s, const resil_store_key *k, uint64_t lease,
                               const resil_store_response *r, resil_store_cb cb, void *ud,
                               resil_err *err)
{
    store_call call = {.op = STORE_COMPLETE, .lease = lease, .resp = r};
    int rc = prepare_call(s, k, &call, err);
    if (rc == 0)
        rc = check_response(r, err);
    return rc != 0 ? rc : fenced_async(s, &call, cb, ud, err);
}

int resil_store_release_async(resil_store *s, const resil_store_key *k, uint64_t lease,
                              resil_store_cb cb, void *ud, resil_err *err)
{
    store_call call = {.op = STORE_RELEASE, .lease = lease};
    int rc = prepare_call(s, k, &call, err);
    return rc != 0 ? rc : fenced_async(s, &call, cb, ud, err);
}

int resil_store_renew_async(resil_store *s, const resil_store_key *k, uint64_t lease,
                            resil_store_cb cb, void *ud, resil_err *err)
{
    store_call call = {.op = STORE_RENEW, .lease = lease};
    int rc = prepare_call(s, k, &call, err);
    return rc != 0 ? rc : fenced_async(s, &call, cb, ud, err);
}

/* ---- the transactional form ----------------------------------------------- */

static int check_tx(resil_store *s, const resil_store_tx *tx, void **conn, resil_err *err)
{
    bool sqlite = s->be == &resil__store_sqlite;
    *conn = tx == NULL ? NULL : sqlite ? (void *)tx->sqlite : (void *)tx->postgres;
    if (*conn == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: tx.%s is required for a %s store",
                             sqlite ? "sqlite" : "postgres", s->be->name);
    if (!s->be->in_transaction(*conn))
        return resil_err_set(err, RESIL_EINVAL,
                             "store: the tx connection must be inside an open transaction "
                             "(%s first)", sqlite ? "BEGIN IMMEDIATE" : "BEGIN");
    return 0;
}

/* One attempt on the application's connection: its class decides the
 * code, as for the store's own calls, but nothing is retried. */
static int run_in(resil_store *s, void *conn, store_call *call, resil_err *err)
{
    char msg[200] = "";
    call->now_ms = ms_from_ns(resil_clock_wall_now(s->clock));
    call->lease_until_ms = call->now_ms + ms_ceil(s->lease);
    call->owned = false;
    resil_outcome o = s->be->run_in(conn, &s->cfg, call, msg, sizeof msg);
    if (resil_outcome_ok(&o))
        return 0;
    bool busy = busy_kind(o.kind);
    return resil_err_set(err, busy ? RESIL_EBUSY : RESIL_EBACKEND,
                         "store: %s: %s (%s, in the caller's transaction: roll it back%s)",
                         s->be->name, msg, o.detail, busy ? " and run it again" : "");
}

int resil_store_begin_in(resil_store *s, const resil_store_tx *tx, const resil_store_key *k,
                         const uint8_t hash[RESIL_SHA256_LEN], resil_store_result *out,
                         resil_err *err)
{
    store_call call = {.op = STORE_BEGIN, .hash = hash, .out = out};
    void *conn;
    int rc = prepare_begin(s, k, &call, err);
    if (rc != 0)
        return rc;
    if ((rc = check_tx(s, tx, &conn, err)) != 0)
        return rc;
    if (journal_holds(s, &call))
        return journaled_in_progress(s, out, err);
    rc = run_in(s, conn, &call, err);
    if (rc != 0)
        out->verdict = RESIL_STORE_NONE;
    return rc;
}

int resil_store_complete_in(resil_store *s, const resil_store_tx *tx,
                            const resil_store_key *k, uint64_t lease,
                            const resil_store_response *r, resil_err *err)
{
    store_call call = {.op = STORE_COMPLETE, .lease = lease, .resp = r};
    void *conn;
    int rc = prepare_call(s, k, &call, err);
    if (rc == 0)
        rc = check_response(r, err);
    if (rc == 0)
        rc = check_tx(s, tx, &conn, err);
    if (rc == 0)
        rc = run_in(s, conn, &call, err);
    if (rc != 0 || call.owned)
        return rc;
    return not_owned(&call, err);
}

/* The wait after a chunk that took `took` while key writes came. */
static resil_duration purge_wait(resil_duration took)
{
    if (took <= 0)
        return 0;
    if (took >= PURGE_WAIT_MAX) /* and the product cannot overflow */
        return PURGE_WAIT_MAX;
    resil_duration d = took * (100 - PURGE_SHARE) / PURGE_SHARE;
    return d < PURGE_WAIT_MAX ? d : PURGE_WAIT_MAX;
}

/* Sleep d on the store's clock, or until stop (may be NULL) fires or the
 * store is being freed. One pause at a time: another returns at once. */
static void purge_pause(resil_store *s, resil_duration d, resil_cancel *stop)
{
    resil_cancel wake;
    if (d <= 0 || resil_cancel_init(&wake, stop) != 0)
        return;
    pthread_mutex_lock(&s->mu);
    bool pauses = !s->closing && s->purge_wake == NULL;
    if (pauses)
        s->purge_wake = &wake;
    pthread_mutex_unlock(&s->mu);
    if (pauses) {
        resil_clock_sleep(s->clock, d, &wake);
        pthread_mutex_lock(&s->mu);
        s->purge_wake = NULL;
        pthread_mutex_unlock(&s->mu);
    }
    resil_cancel_destroy(&wake);
}

/* One chunk, then its share's wait when key writes were queued or
 * running as it began, or came while it ran. On SQLite it rides in a
 * batch (one writer: a transaction of its own would add a sync that
 * every batch behind it waits for), which is its own arrival, not a key
 * write's; on PostgreSQL it is a transaction of its own on a connection
 * of its own, so that no batch of key writes carries its deletes (the
 * expired rows are not the new keys: nothing waits on its row locks). */
static int purge_chunk(resil_store *s, store_call *call, resil_cancel *stop, resil_err *err)
{
    if (s->batcher == NULL)
        return run_call(s, call, err);
    bool sqlite = s->be == &resil__store_sqlite, busy;
    uint64_t before = resil__batcher_arrivals(s->batcher, &busy);
    resil_instant start = resil_clock_now(s->clock);
    int rc = sqlite ? run_write(s, call, err) : run_call(s, call, err);
    resil_duration took = resil_clock_now(s->clock) - start;
    uint64_t others = resil__batcher_arrivals(s->batcher, NULL) - before - sqlite;
    if (rc == 0 && call->deleted == PURGE_CHUNK && (busy || others > 0))
        purge_pause(s, purge_wait(took), stop);
    return rc;
}

/* Count a purge in (false: the store is being freed) or out. */
static bool purge_enters(resil_store *s)
{
    pthread_mutex_lock(&s->mu);
    bool open = !s->closing;
    s->purges += open;
    pthread_mutex_unlock(&s->mu);
    return open;
}

/* RESIL_ECANCELED when the store is being freed or stop fired. */
static int purge_stopped(resil_store *s, resil_cancel *stop, resil_err *err)
{
    if (resil_cancelled(stop))
        return resil_err_set(err, RESIL_ECANCELED, "store: the purge was stopped");
    pthread_mutex_lock(&s->mu);
    bool open = !s->closing;
    pthread_mutex_unlock(&s->mu);
    return open ? 0 : resil_err_set(err, RESIL_ECANCELED,
                                    "store: the store was freed during the purge");
}

static void purge_leaves(resil_store *s)
{
    pthread_mutex_lock(&s->mu);
    if (--s->purges == 0)
        pthread_cond_broadcast(&s->purged);
    pthread_mutex_unlock(&s->mu);
}

int resil_store_purge_cancellable(resil_store *s, resil_cancel *stop, uint64_t *deleted,
                                  resil_err *err)
{
    if (s == NULL)
        return resil_err_set(err, RESIL_EINVAL, "store: store is required");
    if (deleted != NULL)
        *deleted = 0;
    if (!purge_enters(s))
        return resil_err_set(err, RESIL_ECANCELED, "store: the store is being freed");
    store_call call = {.op = STORE_PURGE, .tenant = "", .operation = "", .key = "",
                       .purge_limit = PURGE_CHUNK};
    maybe_replay(s);
    uint64_t total = 0;
    int rc = purge_stopped(s, stop, err);
    while (rc == 0) {
        rc = purge_chunk(s, &call, stop, err);
        total += rc == 0 ? call.deleted : 0;
        if (rc != 0 || call.deleted < PURGE_CHUNK)
            break;
        rc = purge_stopped(s, stop, err);
    }
    if (deleted != NULL)
        *deleted = total;
    purge_leaves(s);
    return rc;
}

int resil_store_purge(resil_store *s, uint64_t *deleted, resil_err *err)
{
    return resil_store_purge_cancellable(s, NULL, deleted, err);
}
