/*
 * store_sqlite.c — the embedded backend: one SQLite file in WAL mode.
 *
 * SQLite has one writer at a time per file, across every process that opens
 * it, so the store makes that its concurrency model instead of fighting it:
 * every call that writes starts with BEGIN IMMEDIATE, taking the write lock
 * up front. A transaction then never has to upgrade a read lock (the upgrade
 * is where SQLite deadlocks and reports BUSY no matter how long it waits),
 * and inside it the insert, the takeover and the read see one consistent
 * file. Waiting for the lock is split in two: sqlite's busy timeout (short)
 * and, above it, the store's retry policy, which re-runs the whole
 * transaction. Statements are prepared once per connection and reused, so a
 * call allocates nothing of ours.
 *
 * Group commit is natural here: a batch is one BEGIN IMMEDIATE, each
 * call's statements in turn, one COMMIT, so one sync for all of them. A
 * single call is simply a batch of one. How hard that sync is comes from
 * store.sqlite_sync (FULL unless the user accepted NORMAL's risk).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_INSERT,
    ST_TAKEOVER,
    ST_SELECT,
    ST_COMPLETE,
    ST_RELEASE,
    ST_RENEW,
    ST_PURGE,
    ST_COUNT
};

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS {T} ("
    " tenant TEXT NOT NULL,"
    " operation TEXT NOT NULL,"
    " idempotency_key TEXT NOT NULL,"
    " request_hash BLOB NOT NULL,"
    " status INTEGER,"
    " headers BLOB,"
    " body BLOB,"
    " created_at INTEGER NOT NULL,"
    " lease_expires_at INTEGER NOT NULL,"
    " lease INTEGER NOT NULL,"
    " PRIMARY KEY (tenant, operation, idempotency_key));"
    "CREATE INDEX IF NOT EXISTS {T}_created_at ON {T} (created_at);";

/* The insert's ON CONFLICT is the whole of "the first writer wins", so a
 * table by the store's name (made by hand, or by another program) must
 * have a unique key on exactly the three key columns, compared byte for
 * byte — without one every begin would be first; on fewer columns, or
 * ignoring case, two keys would share a record — and no unique key that
 * lacks one of them, on which two keys' inserts would collide. Counts
 * both kinds of the table's unique indexes. */
#define KEY_COLUMNS "name IN ('tenant', 'operation', 'idempotency_key')"
static const char *const unique_keys_sql =
    "SELECT coalesce(sum(exact), 0), coalesce(sum(NOT covers), 0) FROM ("
    " SELECT NOT l.partial"
    " AND (SELECT count(*) FROM pragma_index_xinfo(l.name) WHERE key) = 3"
    " AND (SELECT count(DISTINCT name) FROM pragma_index_xinfo(l.name)"
    " WHERE key AND coll = 'BINARY' AND " KEY_COLUMNS ") = 3 AS exact,"
    " (SELECT count(DISTINCT name) FROM pragma_index_xinfo(l.name)"
    " WHERE key AND " KEY_COLUMNS ") = 3 AS covers"
    " FROM pragma_index_list('{T}') AS l WHERE l.\"unique\")";

#define WHERE_KEY "tenant = ?1 AND operation = ?2 AND idempotency_key = ?3"

static const char *const statement_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_INSERT] = "INSERT INTO {T} (tenant, operation, idempotency_key,"
                  " request_hash, status, created_at, lease_expires_at, lease)"
                  " VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7)"
                  " ON CONFLICT DO NOTHING",
    [ST_TAKEOVER] = "UPDATE {T} SET lease = lease + 1, created_at = ?5,"
                    " lease_expires_at = ?6 WHERE " WHERE_KEY
                    " AND request_hash = ?4 AND status IS NULL"
                    " AND lease_expires_at <= ?5 RETURNING lease",
    [ST_SELECT] = "SELECT request_hash, status, headers, body, created_at,"
                  " lease_expires_at FROM {T} WHERE " WHERE_KEY,
    [ST_COMPLETE] = "UPDATE {T} SET status = ?5, headers = ?6, body = ?7"
                    " WHERE " WHERE_KEY " AND status IS NULL AND lease = ?4",
    [ST_RELEASE] = "DELETE FROM {T} WHERE " WHERE_KEY
                   " AND status IS NULL AND lease = ?4",
    [ST_RENEW] = "UPDATE {T} SET lease_expires_at = ?5"
                 " WHERE " WHERE_KEY " AND status IS NULL AND lease = ?4",
    [ST_PURGE] = ("DELETE FROM {T} WHERE rowid IN (SELECT rowid FROM {T}"
                  " WHERE created_at < ?1 AND " PURGEABLE("?3") " LIMIT ?2)"),
};

struct store_conn {
    const store_config *cfg;
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    bool borrowed; /* the application's connection, inside its transaction */
    char why[160]; /* a failure of ours, said instead of SQLite's message */
};

static void disconnect(store_conn *c)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(c->st[i]);
        c->st[i] = NULL;
    }
    sqlite3_close(c->db);
    c->db = NULL;
}

static int conn_new(const store_config *cfg, store_conn **out)
{
    store_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return RESIL_ENOMEM;
    c->cfg = cfg;
    *out = c;
    return 0;
}

static void conn_free(store_conn *c)
{
    if (c == NULL)
        return;
    disconnect(c);
    free(c);
}

/* BUSY and LOCKED heal in milliseconds: retried. A full disk or an I/O
 * error does not heal that fast, but it is the database that cannot serve,
 * not the request that is wrong: unavailable (RESIL_EBUSY, so the client
 * tries again later and a journal takes completions). Anything else (a
 * constraint, a missing table, a file that cannot be opened or is not a
 * database) is permanent. */
static resil_kind sqlite_kind(int rc)
{
    if (resil_store_sqlite_transient(rc))
        return RESIL_TRANSIENT;
    int primary = rc & 0xff;
    if (primary == SQLITE_FULL || primary == SQLITE_IOERR)
        return STORE_UNAVAILABLE;
    return RESIL_PERMANENT;
}

/* A failed step: capture the message, roll back what is open, classify. */
static resil_outcome fail(store_conn *c, int rc, char *msg, size_t cap)
{
    char text[256];
    snprintf(text, sizeof text, "%s",
             c->why[0] ? c->why : c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
    c->why[0] = '\0';
    if (c->db != NULL && !c->borrowed && !sqlite3_get_autocommit(c->db)) {
        sqlite3_reset(c->st[ST_ROLLBACK]);
        sqlite3_step(c->st[ST_ROLLBACK]);
        sqlite3_reset(c->st[ST_ROLLBACK]);
    }
    return resil__store_fail(sqlite_kind(rc), rc, sqlite3_errstr(rc), text, msg, cap);
}

static int prepare_all(store_conn *c, unsigned flags)
{
    char sql[1024];
    for (int i = 0; i < ST_COUNT; i++) {
        if (resil__store_sql(sql, sizeof sql, statement_sql[i], c->cfg->table) != 0)
            return SQLITE_TOOBIG;
        int rc = sqlite3_prepare_v3(c->db, sql, -1, flags, &c->st[i], NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* SQLITE_ERROR, with the reason in c->why, when the table's unique keys
 * are not what the claim rests on. */
static int check_unique_keys(store_conn *c)
{
    char sql[1024];
    if (resil__store_sql(sql, sizeof sql, unique_keys_sql, c->cfg->table) != 0)
        return SQLITE_TOOBIG;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    int exact = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    int stray = rc == SQLITE_ROW ? sqlite3_column_int(st, 1) : 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return rc;
    if (exact > 0 && stray == 0)
        return SQLITE_OK;
    snprintf(c->why, sizeof c->why,
             exact == 0 ? "table %s has no unique key on (tenant, operation, idempotency_key)"
                        : "table %s has a unique key without all of (tenant, operation, "
                          "idempotency_key)",
             c->cfg->table);
    return SQLITE_ERROR;
}

/* SQLite opens a file it may not write (its mode, a read-only mount)
 * read-only, without a word, and only the first write would say so: the
 * connection says it at once instead, with the reason in c->why. */
static int check_writable(store_conn *c)
{
    if (sqlite3_db_readonly(c->db, "main") != 1)
        return SQLITE_OK;
    snprintf(c->why, sizeof c->why, "the database file cannot be written");
    return SQLITE_READONLY;
}

static int connect_db(store_conn *c)
{
    int rc = sqlite3_open_v2(c->cfg->target, &c->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                 SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, c->cfg->busy_timeout_ms);
    rc = sqlite3_exec(c->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_exec(c->db,
                      c->cfg->sqlite_sync == RESIL_STORE_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                                      : "PRAGMA synchronous=FULL",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    char sql[1024];
    if (resil__store_sql(sql, sizeof sql, schema_sql, c->cfg->table) != 0)
        return SQLITE_TOOBIG;
    rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = check_unique_keys(c);
    if (rc == SQLITE_OK)
        rc = check_writable(c);
    if (rc != SQLITE_OK)
        return rc;
    return prepare_all(c, SQLITE_PREPARE_PERSISTENT);
}

/* Run a statement that returns no rows, then make it reusable. */
static int exec_stmt(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

static const char empty[1] = "";

static void bind_key(sqlite3_stmt *st, const store_call *call)
{
    sqlite3_clear_bindings(st);
    sqlite3_bind_text(st, 1, call->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, call->operation, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, call->key, -1, SQLITE_STATIC);
}

/* A blob past SQLITE_LIMIT_LENGTH is refused here (SQLITE_TOOBIG) and the
 * parameter left NULL: the caller must not run the statement then. */
static int bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len)
{
    return sqlite3_bind_blob64(st, i, len > 0 ? p : empty, len, SQLITE_STATIC);
}

/* Read the record and answer from it: always, or (settled_only) only when
 * its answer is final. *answered says whether the call is done. */
static int answer_from_row(store_conn *c, store_call *call, bool settled_only,
                           bool *answered)
{
    sqlite3_stmt *st = c->st[ST_SELECT];
    bind_key(st, call);
    *answered = false;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    store_row row = {
        .hash = sqlite3_column_blob(st, 0),
        .hash_len = (size_t)sqlite3_column_bytes(st, 0),
        .completed = sqlite3_column_type(st, 1) != SQLITE_NULL,
        .status = sqlite3_column_int(st, 1),
        .headers = sqlite3_column_blob(st, 2),
        .headers_len = (size_t)sqlite3_column_bytes(st, 2),
        .body = sqlite3_column_blob(st, 3),
        .body_len = (size_t)sqlite3_column_bytes(st, 3),
        .created_ms = sqlite3_column_int64(st, 4),
        .lease_expires_ms = sqlite3_column_int64(st, 5),
    };
    rc = SQLITE_OK;
    if (!settled_only || resil__store_settled(call, &row)) {
        *answered = true;
        if (resil__store_classify(call, &row) != 0)
            rc = SQLITE_NOMEM;
    }
    sqlite3_reset(st);
    return rc;
}

/* Take over an expired in-progress record with the same hash, atomically:
 * the UPDATE's WHERE is the whole test. */
static int try_takeover(store_conn *c, store_call *call, bool *taken)
{
    sqlite3_stmt *st = c->st[ST_TAKEOVER];
    bind_key(st, call);
    bind_blob(st, 4, call->hash, RESIL_SHA256_LEN);
    sqlite3_bind_int64(st, 5, call->now_ms);
    sqlite3_bind_int64(st, 6, call->lease_until_ms);
    int rc = sqlite3_step(st);
    *taken = rc == SQLITE_ROW;
    if (*taken) {
        uint64_t lease = (uint64_t)sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st);
        if (resil__store_first(call, lease) != 0)
            rc = SQLITE_NOMEM;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Insert, else take an expired lease over, else read what is there,
 * inside a transaction that holds the write lock, so nothing can change in
 * between: the store's own (do_begin) or the application's (run_in). */
static int claim(store_conn *c, store_call *call)
{
    sqlite3_stmt *st = c->st[ST_INSERT];
    uint64_t lease = resil__store_first_lease(call->now_ms);
    bind_key(st, call);
    bind_blob(st, 4, call->hash, RESIL_SHA256_LEN);
    sqlite3_bind_int64(st, 5, call->now_ms);
    sqlite3_bind_int64(st, 6, call->lease_until_ms);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)lease);
    int rc = exec_stmt(st);
    if (rc != SQLITE_OK)
        return rc;
    if (sqlite3_changes(c->db) == 1) {
        rc = resil__store_first(call, lease) == 0 ? SQLITE_OK : SQLITE_NOMEM;
    } else {
        bool taken, answered;
        rc = try_takeover(c, call, &taken);
        if (rc == SQLITE_OK && !taken)
            rc = answer_from_row(c, call, false, &answered);
        if (rc == SQLITE_OK && !taken && !answered)
            rc = SQLITE_INTERNAL; /* the row the insert collided with is gone */
    }
    return rc;
}

static int do_complete(store_conn *c, store_call *call)
{
    sqlite3_stmt *st = c->st[ST_COMPLETE];
    const resil_store_response *r = call->resp;
    bind_key(st, call);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)call->lease);
    sqlite3_bind_int(st, 5, r->status);
    int rc = bind_blob(st, 6, r->headers, r->headers_len);
    if (rc == SQLITE_OK)
        rc = bind_blob(st, 7, r->body, r->body_len);
    if (rc == SQLITE_OK)
        rc = exec_stmt(st);
    call->owned = rc == SQLITE_OK && sqlite3_changes(c->db) == 1;
    return rc;
}

/* release and renew: one statement fenced by the lease number. */
static int do_fenced(store_conn *c, store_call *call, int which)
{
    sqlite3_stmt *st = c->st[which];
    bind_key(st, call);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)call->lease);
    if (which == ST_RENEW)
        sqlite3_bind_int64(st, 5, call->lease_until_ms);
    int rc = exec_stmt(st);
    call->owned = rc == SQLITE_OK && sqlite3_changes(c->db) == 1;
    return rc;
}

static int do_purge(store_conn *c, store_call *call)
{
    sqlite3_stmt *st = c->st[ST_PURGE];
    sqlite3_bind_int64(st, 1, call->cutoff_ms);
    sqlite3_bind_int64(st, 2, call->purge_limit);
    sqlite3_bind_int64(st, 3, call->now_ms);
    int rc = exec_stmt(st);
    call->deleted = rc == SQLITE_OK ? (uint64_t)sqlite3_changes64(c->db) : 0;
    return rc;
}

/* One key write's statements, inside the batch's transaction. */
static int write_one(store_conn *c, store_call *call)
{
    switch (call->op) {
    case STORE_BEGIN:
        return claim(c, call);
    case STORE_COMPLETE:
        return do_complete(c, call);
    case STORE_RELEASE:
        return do_fenced(c, call, ST_RELEASE);
    case STORE_RENEW:
        return do_fenced(c, call, ST_RENEW);
    case STORE_PURGE:
        return do_purge(c, call);
    default:
        return SQLITE_MISUSE; /* the front batches nothing else */
    }
}

static int write_all(store_conn *c, store_call *const *calls, size_t n)
{
    int rc = exec_stmt(c->st[ST_BEGIN]);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = write_one(c, calls[i]);
    if (rc == SQLITE_OK)
        rc = exec_stmt(c->st[ST_COMMIT]);
    return rc;
}

static int ensure_connected(store_conn *c)
{
    return c->db == NULL ? connect_db(c) : SQLITE_OK;
}

/* Half-open connections are thrown away and reopened next time. */
static resil_outcome connect_failed(store_conn *c, int rc, char *msg, size_t cap)
{
    resil_outcome o = fail(c, rc, msg, cap);
    disconnect(c);
    return o;
}

/* Under the in-process write lock (see store_config), with the file's. */
static resil_outcome write_locked(store_conn *c, store_call *const *calls, size_t n,
                                  char *msg, size_t cap)
{
    resil__write_lock(c->cfg->write_lock);
    int rc = write_all(c, calls, n);
    resil_outcome o = rc == SQLITE_OK ? resil_ok() : fail(c, rc, msg, cap);
    resil__write_unlock(c->cfg->write_lock);
    return o;
}

static resil_outcome run_batch(store_conn *c, store_call *const *calls, size_t n, char *msg,
                               size_t cap)
{
    int rc = ensure_connected(c);
    if (rc != SQLITE_OK)
        return connect_failed(c, rc, msg, cap);
    return write_locked(c, calls, n, msg, cap);
}

/* One plain read per call: each is a statement of its own, which in WAL
 * mode waits for no writer, and local reads need no round trip to share. */
static resil_outcome run_reads(store_conn *c, store_call *const *calls, size_t n, char *msg,
                               size_t cap)
{
    int rc = ensure_connected(c);
    if (rc != SQLITE_OK)
        return connect_failed(c, rc, msg, cap);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = answer_from_row(c, calls[i], true, &calls[i]->answered);
    return rc == SQLITE_OK ? resil_ok() : fail(c, rc, msg, cap);
}

static resil_outcome run(store_conn *c, store_call *call, char *msg, size_t cap)
{
    int rc = ensure_connected(c);
    if (rc != SQLITE_OK)
        return connect_failed(c, rc, msg, cap);
    if (call->op == STORE_CONNECT)
        return resil_ok();
    /* A settled record (a replay, a mismatch) is answered by a plain read,
     * which in WAL mode waits for no writer. */
    if (call->op == STORE_PEEK || call->op == STORE_BEGIN)
        rc = answer_from_row(c, call, true, &call->answered);
    if (rc != SQLITE_OK)
        return fail(c, rc, msg, cap);
    if (call->answered || call->op == STORE_PEEK)
        return resil_ok();
    store_call *one[1] = {call};
    return write_locked(c, one, 1, msg, cap);
}

/* The transactional form: the application's connection, inside its open
 * transaction. Statements are prepared for this call only (the connection
 * is not ours to keep anything on), nothing is retried and nothing is
 * rolled back: a failure is the application's to roll back and retry. */
static bool in_transaction(void *conn)
{
    return !sqlite3_get_autocommit((sqlite3 *)conn);
}

static resil_outcome run_in(void *conn, const store_config *cfg, store_call *call, char *msg,
                            size_t cap)
{
    store_conn c = {.cfg = cfg, .db = conn, .borrowed = true};
    int rc = prepare_all(&c, 0);
    if (rc == SQLITE_OK)
        rc = call->op == STORE_BEGIN ? claim(&c, call) : do_complete(&c, call);
    resil_outcome o = rc == SQLITE_OK ? resil_ok() : fail(&c, rc, msg, cap);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(c.st[i]);
    return o;
}

bool resil_store_sqlite_transient(int rc)
{
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

const store_backend resil__store_sqlite = {
    .name = "sqlite",
    .conn_new = conn_new,
    .conn_free = conn_free,
    .run = run,
    .run_batch = run_batch,
    .run_reads = run_reads,
    .in_transaction = in_transaction,
    .run_in = run_in,
};
