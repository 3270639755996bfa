/*
 * store_pg.c — the fleet backend: PostgreSQL through libpq.
 *
 * Many machines write one table, so correctness rests on the server, not on
 * any lock of ours. begin() runs at REPEATABLE READ: its insert, takeover
 * and read share one snapshot, and when another transaction commits a
 * conflicting row after that snapshot was taken, PostgreSQL refuses with
 * SQLSTATE 40001 instead of letting a decision rest on a stale read. The
 * store's retry policy then runs the whole transaction again on a fresh
 * snapshot — the execution strategy. complete/release/purge are single
 * conditional statements, atomic on their own.
 *
 * Each connection prepares its statements once; parameters and results
 * travel in binary where that avoids escaping (bytea, integers), so a call
 * copies bytes and never parses them. A connection that breaks is dropped
 * and reconnected by the next attempt.
 *
 * Group commit uses libpq's pipeline mode and multi-row statements: a
 * batch is sent as BEGIN, one INSERT carrying every begin's claim, one
 * UPDATE carrying every completion (each a statement whose columns travel
 * as binary arrays, unnested by the server), one statement per release
 * or renew (and per purge chunk, though the front runs the purge here as
 * a transaction of its own), COMMIT and a sync, and its results are read in
 * one round trip — one commit, one WAL flush, and a fixed number of
 * statements for the calls of a key-write batch however many it carries.
 * Each row that took effect comes back (a claim with its key and lease, a
 * completion with its place in the batch), so each call learns its own
 * result. Inside a batch a begin only inserts (READ COMMITTED: the insert
 * waits for a concurrent one on the same key and then does nothing); a
 * begin whose insert met an existing record, and a second call for a key
 * the batch already carries, go back to the front, which runs each on its
 * own — a begin as the REPEATABLE READ transaction above — once the batch
 * has committed, where it sees what the batch did as a sequential call
 * would. The pipeline sends small results back, so writing it whole
 * before reading cannot fill both directions' buffers.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* Built-in type OIDs (pg_type.h is a server header). */
enum { OID_BYTEA = 17, OID_INT8 = 20, OID_INT4 = 23, OID_TEXT = 25 };
enum { OID_BYTEA_ARRAY = 1001, OID_INT4_ARRAY = 1007, OID_TEXT_ARRAY = 1009,
       OID_INT8_ARRAY = 1016 };

enum {
    PS_INSERT,
    PS_TAKEOVER,
    PS_SELECT,
    PS_COMPLETE,
    PS_RELEASE,
    PS_RENEW,
    PS_PURGE,
    PS_INSERT_MANY,
    PS_COMPLETE_MANY,
    PS_SELECT_MANY,
    PS_COUNT
};

static const char *const schema_sql =
    "BEGIN;"
    "SELECT pg_advisory_xact_lock(hashtext('resil_store:{T}'));"
    "CREATE TABLE IF NOT EXISTS {T} ("
    " tenant TEXT NOT NULL,"
    " operation TEXT NOT NULL,"
    " idempotency_key TEXT NOT NULL,"
    " request_hash BYTEA NOT NULL,"
    " status INTEGER,"
    " headers BYTEA,"
    " body BYTEA,"
    " created_at BIGINT NOT NULL,"
    " lease_expires_at BIGINT NOT NULL,"
    " lease BIGINT NOT NULL,"
    " PRIMARY KEY (tenant, operation, idempotency_key));"
    "CREATE INDEX IF NOT EXISTS {T}_created_at ON {T} (created_at);"
    "COMMIT";

/* Both there: nothing to create. */
static const char *const schema_present_sql =
    "SELECT to_regclass('{T}') IS NOT NULL AND to_regclass('{T}_created_at') IS NOT NULL";

#define WHERE_KEY "tenant = $1 AND operation = $2 AND idempotency_key = $3"

/* The claim's insert names its conflict target: "the first writer wins"
 * rests on a unique key on exactly the three key columns, and with the
 * target named PostgreSQL refuses (42P10, when the statement is planned:
 * see connected) a table by the store's name that lacks one, where a
 * bare ON CONFLICT would let every begin of a key be first. */
#define ON_KEY_CONFLICT "ON CONFLICT (tenant, operation, idempotency_key) DO NOTHING"

static const struct {
    const char *name;
    const char *sql;
    int nparams;
    Oid types[8];
} statements[PS_COUNT] = {
    [PS_INSERT] = {"resil_store_insert",
                   "INSERT INTO {T} (tenant, operation, idempotency_key,"
                   " request_hash, status, created_at, lease_expires_at, lease)"
                   " VALUES ($1, $2, $3, $4, NULL, $5, $6, $7)"
                   " " ON_KEY_CONFLICT " RETURNING lease",
                   7, {OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA, OID_INT8, OID_INT8, OID_INT8}},
    [PS_TAKEOVER] = {"resil_store_takeover",
                     "UPDATE {T} SET lease = lease + 1, created_at = $5,"
                     " lease_expires_at = $6 WHERE " WHERE_KEY
                     " AND request_hash = $4 AND status IS NULL"
                     " AND lease_expires_at <= $5 RETURNING lease",
                     6, {OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA, OID_INT8, OID_INT8}},
    [PS_SELECT] = {"resil_store_select",
                   "SELECT request_hash, status, headers, body, created_at,"
                   " lease_expires_at FROM {T} WHERE " WHERE_KEY,
                   3, {OID_TEXT, OID_TEXT, OID_TEXT}},
    [PS_COMPLETE] = {"resil_store_complete",
                     "UPDATE {T} SET status = $5, headers = $6, body = $7"
                     " WHERE " WHERE_KEY " AND status IS NULL AND lease = $4",
                     7, {OID_TEXT, OID_TEXT, OID_TEXT, OID_INT8, OID_INT4, OID_BYTEA, OID_BYTEA}},
    [PS_RELEASE] = {"resil_store_release",
                    "DELETE FROM {T} WHERE " WHERE_KEY " AND status IS NULL AND lease = $4",
                    4, {OID_TEXT, OID_TEXT, OID_TEXT, OID_INT8}},
    [PS_RENEW] = {"resil_store_renew",
                  "UPDATE {T} SET lease_expires_at = $5"
                  " WHERE " WHERE_KEY " AND status IS NULL AND lease = $4",
                  5, {OID_TEXT, OID_TEXT, OID_TEXT, OID_INT8, OID_INT8}},
    [PS_PURGE] = {"resil_store_purge",
                  "DELETE FROM {T} WHERE ctid = ANY (ARRAY("
                  "SELECT ctid FROM {T} WHERE created_at < $1 AND " PURGEABLE("$3")
                  " LIMIT $2))",
                  3, {OID_INT8, OID_INT8, OID_INT8}},
    /* A batch's claims and completions, one row per call. Each row that
     * took effect comes back: a claim as its key and lease, a completion
     * as its ord (its call's place in the batch). */
    [PS_INSERT_MANY] = {"resil_store_insert_many",
                        "INSERT INTO {T} (tenant, operation, idempotency_key, request_hash,"
                        " status, created_at, lease_expires_at, lease)"
                        " SELECT tenant, operation, idempotency_key, request_hash, NULL,"
                        " created_at, lease_expires_at, lease"
                        " FROM unnest($1, $2, $3, $4, $5, $6, $7) AS i(tenant, operation,"
                        " idempotency_key, request_hash, created_at, lease_expires_at, lease)"
                        " " ON_KEY_CONFLICT
                        " RETURNING tenant, operation, idempotency_key, lease",
                        7, {OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_BYTEA_ARRAY,
                            OID_INT8_ARRAY, OID_INT8_ARRAY, OID_INT8_ARRAY}},
    [PS_COMPLETE_MANY] = {"resil_store_complete_many",
                          "UPDATE {T} AS r SET status = i.status, headers = i.headers,"
                          " body = i.body FROM unnest($1, $2, $3, $4, $5, $6, $7, $8)"
                          " AS i(ord, tenant, operation, idempotency_key, lease, status,"
                          " headers, body)"
                          " WHERE r.tenant = i.tenant AND r.operation = i.operation"
                          " AND r.idempotency_key = i.idempotency_key"
                          " AND r.status IS NULL AND r.lease = i.lease RETURNING i.ord",
                          8, {OID_INT4_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY,
                              OID_INT8_ARRAY, OID_INT4_ARRAY, OID_BYTEA_ARRAY,
                              OID_BYTEA_ARRAY}},
    /* The asynchronous begins' reads, one row per key that has a record,
     * with its call's place in the batch (ord). */
    [PS_SELECT_MANY] = {"resil_store_select_many",
                        "SELECT i.ord, r.request_hash, r.status, r.headers, r.body,"
                        " r.created_at, r.lease_expires_at"
                        " FROM unnest($1, $2, $3, $4) AS i(ord, tenant, operation,"
                        " idempotency_key) JOIN {T} AS r ON r.tenant = i.tenant"
                        " AND r.operation = i.operation"
                        " AND r.idempotency_key = i.idempotency_key",
                        4, {OID_INT4_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY}},
};

struct store_conn {
    const store_config *cfg;
    PGconn *pg;
    bool borrowed; /* the application's connection, inside its transaction */
};

/* Parameters of one statement: text as text, the rest binary. */
typedef struct params {
    const char *value[7];
    int length[7];
    int format[7];
    uint8_t ints[7][8];
    int n;
} params;

static void p_text(params *p, const char *s)
{
    p->value[p->n] = s;
    p->length[p->n] = 0;
    p->format[p->n++] = 0;
}

static void p_bytes(params *p, const void *data, size_t len)
{
    p->value[p->n] = len > 0 ? data : "";
    p->length[p->n] = (int)len;
    p->format[p->n++] = 1;
}

static void p_int(params *p, uint64_t v, int width)
{
    uint8_t *b = p->ints[p->n];
    for (int i = 0; i < width; i++)
        b[i] = (uint8_t)(v >> (8 * (width - 1 - i)));
    p_bytes(p, b, (size_t)width);
}

static void p_key(params *p, const store_call *call)
{
    p->n = 0;
    p_text(p, call->tenant);
    p_text(p, call->operation);
    p_text(p, call->key);
}

/* PS_INSERT's and PS_TAKEOVER's: the key, hash and times; the insert
 * also gives the new record its first lease number. */
static void claim_params(const store_call *call, int which, params *p)
{
    p_key(p, call);
    p_bytes(p, call->hash, RESIL_SHA256_LEN);
    p_int(p, (uint64_t)call->now_ms, 8);
    p_int(p, (uint64_t)call->lease_until_ms, 8);
    if (which == PS_INSERT)
        p_int(p, resil__store_first_lease(call->now_ms), 8);
}

static uint64_t get_uint(const PGresult *r, int row, int col)
{
    const uint8_t *b = (const uint8_t *)PQgetvalue(r, row, col);
    int len = PQgetlength(r, row, col);
    uint64_t v = 0;
    for (int i = 0; i < len && i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

static int64_t get_int64(const PGresult *r, int row, int col)
{
    return (int64_t)get_uint(r, row, col);
}

static int32_t get_int32(const PGresult *r, int row, int col)
{
    return (int32_t)(uint32_t)get_uint(r, row, col);
}

/* Our connections prepared every statement; the application's did not,
 * and gets the same statement as a one-off. */
static PGresult *exec_prepared(store_conn *c, int which, const params *p)
{
    if (!c->borrowed)
        return PQexecPrepared(c->pg, statements[which].name, p->n, p->value, p->length,
                              p->format, 1);
    char sql[1024];
    if (resil__store_sql(sql, sizeof sql, statements[which].sql, c->cfg->table) != 0)
        return NULL;
    return PQexecParams(c->pg, sql, p->n, statements[which].types, p->value, p->length,
                        p->format, 1);
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

static void disconnect(store_conn *c)
{
    PQfinish(c->pg);
    c->pg = NULL;
}

static void conn_free(store_conn *c)
{
    if (c == NULL)
        return;
    disconnect(c);
    free(c);
}

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Undo an open transaction; drop a connection that is gone. The
 * application's connection is left as it is, for it to roll back. */
static void reset_conn(store_conn *c)
{
    if (c->borrowed)
        return;
    if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK)
        disconnect(c);
    else if (PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        PQclear(PQexec(c->pg, "ROLLBACK"));
}

/* A failure that is ours, not the server's (no memory, an impossible row). */
static resil_outcome fail_local(store_conn *c, const char *text, char *msg, size_t cap)
{
    reset_conn(c);
    return resil__store_fail(RESIL_PERMANENT, 0, text, text, msg, cap);
}

/* Retried: what the public classifier names. Unavailable without spending
 * the retries: the server is out of resources (class 53: disk full, out of
 * memory; 53300, too many connections, is retried) or reports a system I/O
 * error (class 58), or it cancelled the statement for taking too long
 * (57014: statement_timeout, or an operator's cancel; 55P03: lock_timeout)
 * — the database is slow, not the request wrong, and each retry would
 * wait as long again. Anything else, data (22), constraint (23), syntax
 * and schema (42) errors among them, is permanent. */
static resil_kind pg_kind(const char *state)
{
    if (resil_store_pg_transient(state))
        return RESIL_TRANSIENT;
    if (strncmp(state, "53", 2) == 0 || strncmp(state, "58", 2) == 0 ||
        strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0)
        return STORE_UNAVAILABLE;
    return RESIL_PERMANENT;
}

/* A failure the server (or libpq) reported: classify by SQLSTATE. A
 * connection that is gone has no SQLSTATE; it counts as 08006. Clears res. */
static resil_outcome fail(store_conn *c, PGresult *res, char *msg, size_t cap)
{
    char text[256], state[6] = "08006";
    const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (s != NULL)
        snprintf(state, sizeof state, "%s", s);
    const char *m = res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res)
                    : c->pg ? PQerrorMessage(c->pg) : "no connection";
    snprintf(text, sizeof text, "%s", m);
    text[strcspn(text, "\n")] = '\0';
    PQclear(res);
    reset_conn(c);
    char detail[32];
    snprintf(detail, sizeof detail, "SQLSTATE %s", state);
    return resil__store_fail(pg_kind(state), 0, detail, text, msg, cap);
}

static bool ok(const PGresult *r)
{
    ExecStatusType st = PQresultStatus(r);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* Run a command whose result is only success or failure. */
static resil_outcome command(store_conn *c, const char *sql, char *msg, size_t cap)
{
    PGresult *r = PQexec(c->pg, sql);
    if (!ok(r))
        return fail(c, r, msg, cap);
    PQclear(r);
    return resil_ok();
}

/* Create the table and its index when either is missing (under an
 * advisory lock, since CREATE … IF NOT EXISTS races with itself), and
 * only then: the CREATE statements need CREATE on the schema even when
 * the table is there, and a role an operator granted only the rows of a
 * table made for it has none. */
static resil_outcome ensure_schema(store_conn *c, char *msg, size_t cap)
{
    char sql[1024];
    if (resil__store_sql(sql, sizeof sql, schema_present_sql, c->cfg->table) != 0)
        return fail_local(c, "schema text too long", msg, cap);
    PGresult *r = PQexec(c->pg, sql);
    if (!ok(r))
        return fail(c, r, msg, cap);
    bool present = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (present)
        return resil_ok();
    if (resil__store_sql(sql, sizeof sql, schema_sql, c->cfg->table) != 0)
        return fail_local(c, "schema text too long", msg, cap);
    return command(c, sql, msg, cap);
}

/* The connection, made the first time a call needs it (or again after a
 * failure dropped it): connect, create what is missing of the table,
 * prepare every statement. */
static resil_outcome connected(store_conn *c, char *msg, size_t cap)
{
    if (c->pg != NULL)
        return resil_ok();
    /* connect_timeout comes first so that the URL may override it. */
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *values[] = {"5", "resil-store", c->cfg->target, NULL};
    c->pg = PQconnectdbParams(keys, values, 1);
    if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK)
        return fail(c, NULL, msg, cap);
    PQsetNoticeProcessor(c->pg, quiet, NULL);
    resil_outcome o = ensure_schema(c, msg, cap);
    /* Every statement here reaches its rows through an index (the
     * primary key; the purge's, created_at), so plan each once: a batch's
     * UPDATE joins its input to the table, and left to itself PostgreSQL
     * replans that join on every run (0.1-0.2 ms of planning a batch) or
     * caches the plan it made while the table was small — a hash join
     * over a scan of all of it — as the table grows. */
    if (resil_outcome_ok(&o))
        o = command(c,
                    "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off;"
                    " SET enable_hashjoin = off; SET enable_mergejoin = off",
                    msg, cap);
    char sql[1024];
    for (int i = 0; i < PS_COUNT && resil_outcome_ok(&o); i++) {
        if (resil__store_sql(sql, sizeof sql, statements[i].sql, c->cfg->table) != 0)
            return fail_local(c, "statement text too long", msg, cap);
        PGresult *r = PQprepare(c->pg, statements[i].name, sql, statements[i].nparams,
                                statements[i].types);
        if (!ok(r))
            return fail(c, r, msg, cap);
        PQclear(r);
    }
    /* PREPARE does not plan, and the claims' conflict target is matched
     * to the table's unique keys when a statement is planned: plan both
     * now (EXPLAIN runs nothing), so that a table the target cannot
     * arbitrate is refused at open, not at the first begin. */
    if (resil_outcome_ok(&o))
        o = command(c,
                    "EXPLAIN EXECUTE resil_store_insert('', '', '', '', 0, 0, 0);"
                    " EXPLAIN EXECUTE resil_store_insert_many('{}', '{}', '{}', '{}', '{}',"
                    " '{}', '{}')",
                    msg, cap);
    return o;
}

static resil_outcome claimed(store_conn *c, store_call *call, PGresult *r,
                             char *msg, size_t cap)
{
    int rc = resil__store_first(call, get_uint(r, 0, 0));
    PQclear(r);
    if (rc != 0)
        return fail_local(c, "out of memory", msg, cap);
    return resil_ok();
}

/* A record's columns in a result, from column `at` on: request_hash,
 * status, headers, body, created_at, lease_expires_at. */
static store_row row_at(const PGresult *r, int row, int at)
{
    bool completed = !PQgetisnull(r, row, at + 1);
    return (store_row){
        .hash = PQgetvalue(r, row, at),
        .hash_len = (size_t)PQgetlength(r, row, at),
        .completed = completed,
        .status = completed ? get_int32(r, row, at + 1) : 0,
        .headers = PQgetvalue(r, row, at + 2),
        .headers_len = (size_t)PQgetlength(r, row, at + 2),
        .body = PQgetvalue(r, row, at + 3),
        .body_len = (size_t)PQgetlength(r, row, at + 3),
        .created_ms = get_int64(r, row, at + 4),
        .lease_expires_ms = get_int64(r, row, at + 5),
    };
}

/* Answer the call from a record: always, or (settled_only) only when the
 * record's answer is final. 0, or RESIL_ENOMEM. */
static int answer(store_call *call, const store_row *row, bool settled_only, bool *answered)
{
    if (settled_only && !resil__store_settled(call, row))
        return 0;
    *answered = true;
    return resil__store_classify(call, row);
}

/* Read the record and answer from it: always, or (settled_only) only when
 * its answer is final. *answered says whether the call is done. */
static resil_outcome answer_from_row(store_conn *c, store_call *call, bool settled_only,
                                     bool *answered, char *msg, size_t cap)
{
    params p;
    p_key(&p, call);
    *answered = false;
    PGresult *r = exec_prepared(c, PS_SELECT, &p);
    if (!ok(r))
        return fail(c, r, msg, cap);
    int rc = 0;
    if (PQntuples(r) == 1) {
        store_row row = row_at(r, 0, 0);
        rc = answer(call, &row, settled_only, answered);
    }
    PQclear(r);
    if (rc != 0)
        return fail_local(c, "out of memory", msg, cap);
    return resil_ok();
}

/* INSERT … ON CONFLICT DO NOTHING; else take an expired lease over; else
 * read what is there, inside a transaction: the store's own (do_begin) or
 * the application's (run_in). At READ COMMITTED, which only the
 * application's can be, each statement reads afresh: the record the
 * insert met may be deleted (released, purged) before the read, while the
 * takeover waited on its row. That is a race to run again, as a
 * serialization failure is, never a verdict. */
static resil_outcome claim(store_conn *c, store_call *call, char *msg, size_t cap)
{
    params p;
    claim_params(call, PS_INSERT, &p);
    PGresult *r = exec_prepared(c, PS_INSERT, &p);
    if (ok(r) && PQntuples(r) == 0) {
        PQclear(r);
        claim_params(call, PS_TAKEOVER, &p);
        r = exec_prepared(c, PS_TAKEOVER, &p);
    }
    if (!ok(r))
        return fail(c, r, msg, cap);
    if (PQntuples(r) == 1)
        return claimed(c, call, r, msg, cap);
    PQclear(r);
    bool answered;
    resil_outcome o = answer_from_row(c, call, false, &answered, msg, cap);
    if (resil_outcome_ok(&o) && !answered)
        return resil__store_fail(RESIL_TRANSIENT, 0, "record deleted meanwhile",
                                 "the record the claim met was deleted before it was read",
                                 msg, cap);
    return o;
}

/* One REPEATABLE READ transaction. */
static resil_outcome do_begin(store_conn *c, store_call *call, char *msg, size_t cap)
{
    resil_outcome o = command(c, "BEGIN ISOLATION LEVEL REPEATABLE READ", msg, cap);
    if (resil_outcome_ok(&o))
        o = claim(c, call, msg, cap);
    if (!resil_outcome_ok(&o))
        return o;
    return command(c, "COMMIT", msg, cap);
}

/* A settled record (a replay, a mismatch) is answered by one plain read;
 * only a missing or in-progress one needs the transaction. */
static resil_outcome begin(store_conn *c, store_call *call, char *msg, size_t cap)
{
    bool answered;
    resil_outcome o = answer_from_row(c, call, true, &answered, msg, cap);
    if (!resil_outcome_ok(&o) || answered)
        return o;
    return do_begin(c, call, msg, cap);
}

static void fenced_params(const store_call *call, int which, params *p)
{
    p_key(p, call);
    p_int(p, call->lease, 8);
    if (which == PS_COMPLETE) {
        const resil_store_response *resp = call->resp;
        p_int(p, (uint64_t)(uint32_t)resp->status, 4);
        p_bytes(p, resp->headers, resp->headers_len);
        p_bytes(p, resp->body, resp->body_len);
    }
    if (which == PS_RENEW)
        p_int(p, (uint64_t)call->lease_until_ms, 8);
}

/* complete, release, renew: one conditional statement fenced by the lease. */
static resil_outcome fenced(store_conn *c, store_call *call, int which, char *msg,
                            size_t cap)
{
    params p;
    fenced_params(call, which, &p);
    PGresult *r = exec_prepared(c, which, &p);
    if (!ok(r))
        return fail(c, r, msg, cap);
    call->owned = strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    return resil_ok();
}

static void purge_params(const store_call *call, params *p)
{
    p->n = 0;
    p_int(p, (uint64_t)call->cutoff_ms, 8);
    p_int(p, call->purge_limit, 8);
    p_int(p, (uint64_t)call->now_ms, 8);
}

static resil_outcome do_purge(store_conn *c, store_call *call, char *msg, size_t cap)
{
    params p;
    purge_params(call, &p);
    PGresult *r = exec_prepared(c, PS_PURGE, &p);
    if (!ok(r))
        return fail(c, r, msg, cap);
    call->deleted = strtoull(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return resil_ok();
}

/* ---- group commit: a pipelined batch of multi-row statements ---------------- */

/* PostgreSQL's binary array (array_send): one dimension, no NULLs, each
 * element its length and its bytes. Built here so that keys, hashes and
 * bodies travel without quoting or escaping. */
typedef struct pg_array {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} pg_array;

static void arr_bytes(pg_array *a, const void *p, size_t len)
{
    if (a->oom)
        return;
    if (a->len + len > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->len + len)
            cap *= 2;
        uint8_t *d = realloc(a->data, cap);
        if (d == NULL) {
            a->oom = true;
            return;
        }
        a->data = d;
        a->cap = cap;
    }
    if (len > 0)
        memcpy(a->data + a->len, p, len);
    a->len += len;
}

static void arr_u32(pg_array *a, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    arr_bytes(a, b, 4);
}

static void arr_start(pg_array *a, Oid elem, size_t n)
{
    arr_u32(a, 1); /* dimensions */
    arr_u32(a, 0); /* no NULLs */
    arr_u32(a, elem);
    arr_u32(a, (uint32_t)n);
    arr_u32(a, 1); /* lower bound */
}

static void arr_elem(pg_array *a, const void *p, size_t len)
{
    arr_u32(a, (uint32_t)len);
    arr_bytes(a, p, len);
}

static void arr_text(pg_array *a, const char *s) { arr_elem(a, s, strlen(s)); }

static void arr_int(pg_array *a, uint64_t v, int width)
{
    arr_u32(a, (uint32_t)width);
    if (width == 8)
        arr_u32(a, (uint32_t)(v >> 32));
    arr_u32(a, (uint32_t)v);
}

enum { MAX_ARRAYS = 8 };

/* One multi-row statement's parameters: an array per column. A single
 * row goes as the one-call statement instead (PS_INSERT, PS_COMPLETE):
 * unnesting arrays costs the server more than the one row it carries. */
typedef struct many {
    int which;      /* PS_INSERT_MANY or PS_COMPLETE_MANY */
    size_t n;       /* rows */
    uint32_t first; /* the first row's call */
    pg_array col[MAX_ARRAYS];
} many;

static void many_free(many *m)
{
    for (int i = 0; i < MAX_ARRAYS; i++)
        free(m->col[i].data);
}

/* Row `ord` of the statement carries calls[ord]. */
static void many_row(many *m, const store_call *call, uint32_t ord)
{
    pg_array *c = m->col;
    if (m->n++ == 0)
        m->first = ord;
    if (m->which == PS_INSERT_MANY) {
        arr_text(&c[0], call->tenant);
        arr_text(&c[1], call->operation);
        arr_text(&c[2], call->key);
        arr_elem(&c[3], call->hash, RESIL_SHA256_LEN);
        arr_int(&c[4], (uint64_t)call->now_ms, 8);
        arr_int(&c[5], (uint64_t)call->lease_until_ms, 8);
        arr_int(&c[6], resil__store_first_lease(call->now_ms), 8);
        return;
    }
    const resil_store_response *resp = call->resp;
    arr_int(&c[0], ord, 4);
    arr_text(&c[1], call->tenant);
    arr_text(&c[2], call->operation);
    arr_text(&c[3], call->key);
    arr_int(&c[4], call->lease, 8);
    arr_int(&c[5], (uint64_t)(uint32_t)resp->status, 4);
    arr_elem(&c[6], resp->headers, resp->headers_len);
    arr_elem(&c[7], resp->body, resp->body_len);
}

/* The rows, in the order given: their arrays' headers, then their elements. */
static bool many_build(many *m, store_call *const *calls, const uint32_t *rows, size_t n)
{
    static const Oid elems[2][MAX_ARRAYS] = {
        {OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA, OID_INT8, OID_INT8, OID_INT8, 0},
        {OID_INT4, OID_TEXT, OID_TEXT, OID_TEXT, OID_INT8, OID_INT4, OID_BYTEA, OID_BYTEA},
    };
    if (n < 2) { /* none, or the one-row statement: no arrays */
        m->n = n;
        m->first = n == 1 ? rows[0] : 0;
        return true;
    }
    const Oid *e = elems[m->which == PS_COMPLETE_MANY];
    for (int i = 0; i < statements[m->which].nparams; i++)
        arr_start(&m->col[i], e[i], n);
    for (size_t i = 0; i < n; i++)
        many_row(m, calls[rows[i]], rows[i]);
    for (int i = 0; i < statements[m->which].nparams; i++)
        if (m->col[i].oom || m->col[i].len > INT32_MAX)
            return false;
    return true;
}

/* One call's statement, queued in the pipeline. */
static bool send_prepared(PGconn *pg, int which, const params *p)
{
    return PQsendQueryPrepared(pg, statements[which].name, p->n, p->value, p->length,
                               p->format, 1) == 1;
}

static bool many_send(PGconn *pg, const many *m, store_call *const *calls)
{
    params p;
    if (m->n == 1 && m->which == PS_INSERT_MANY) {
        claim_params(calls[m->first], PS_INSERT, &p);
        return send_prepared(pg, PS_INSERT, &p);
    }
    if (m->n == 1) {
        fenced_params(calls[m->first], PS_COMPLETE, &p);
        return send_prepared(pg, PS_COMPLETE, &p);
    }
    const char *value[MAX_ARRAYS];
    int length[MAX_ARRAYS], format[MAX_ARRAYS];
    int np = statements[m->which].nparams;
    for (int i = 0; i < np; i++) {
        value[i] = (const char *)m->col[i].data;
        length[i] = (int)m->col[i].len;
        format[i] = 1;
    }
    return PQsendQueryPrepared(pg, statements[m->which].name, np, value, length, format, 1) ==
           1;
}

/* A call and its place in the batch, sorted by key. */
typedef struct ranked {
    store_call *call;
    uint32_t ord;
} ranked;

/* A batch as it is sent: its statements, in order, and which calls each
 * carries. A key appears at most once in a multi-row statement (its row
 * must name one call); a second call for it in the same batch runs alone
 * after the commit, where it sees the first's effect as a sequential
 * call would. Rows go in key order, so two batches that share keys take
 * their row locks in the same order and do not deadlock over them. */
typedef struct batch_plan {
    store_call *const *calls;
    size_t n;
    many ins, done;    /* begins' claims, completions */
    ranked *order;     /* the calls by key */
    uint32_t *singles; /* calls sent as a statement each (release, renew, purge) */
    size_t n_singles;
} batch_plan;

static int compare_keys(const store_call *x, const store_call *y)
{
    int d = strcmp(x->tenant, y->tenant);
    if (d == 0)
        d = strcmp(x->operation, y->operation);
    return d != 0 ? d : strcmp(x->key, y->key);
}

static int by_key(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    int d = compare_keys(x->call, y->call);
    if (d == 0)
        d = (x->call->op > y->call->op) - (x->call->op < y->call->op);
    if (d == 0) /* the earlier call first: it is the one a row carries */
        d = (x->ord > y->ord) - (x->ord < y->ord);
    return d;
}

static bool same_key_op(const store_call *x, const store_call *y)
{
    return x->op == y->op && compare_keys(x, y) == 0;
}

static void plan_free(batch_plan *b)
{
    many_free(&b->ins);
    many_free(&b->done);
    free(b->order);
    free(b->singles);
}

/* The calls with operation `op` that a row carries, in key order. */
static bool plan_rows(batch_plan *b, many *m, store_op op, uint32_t *rows)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->order[i].call->op == op && !b->order[i].call->alone)
            rows[n++] = b->order[i].ord;
    return many_build(m, b->calls, rows, n);
}

/* Sort the calls into the two multi-row statements and the singles. False
 * when out of memory or a statement would pass 2 GiB. */
static bool plan_batch(batch_plan *b, store_call *const *calls, size_t n)
{
    *b = (batch_plan){.calls = calls, .n = n, .ins.which = PS_INSERT_MANY,
                      .done.which = PS_COMPLETE_MANY};
    b->order = malloc(n * sizeof *b->order);
    b->singles = malloc(n * sizeof *b->singles);
    uint32_t *rows = malloc(n * sizeof *rows);
    if (b->order == NULL || b->singles == NULL || rows == NULL) {
        free(rows);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        b->order[i] = (ranked){.call = calls[i], .ord = (uint32_t)i};
    qsort(b->order, n, sizeof *b->order, by_key);
    for (size_t i = 0; i < n; i++) {
        store_call *call = b->order[i].call;
        if (call->op != STORE_BEGIN && call->op != STORE_COMPLETE)
            b->singles[b->n_singles++] = b->order[i].ord;
        else if (i > 0 && same_key_op(b->order[i - 1].call, call))
            call->alone = true;
    }
    bool built = plan_rows(b, &b->ins, STORE_BEGIN, rows) &&
                 plan_rows(b, &b->done, STORE_COMPLETE, rows);
    free(rows);
    return built;
}

static bool send_plain(PGconn *pg, const char *sql)
{
    return PQsendQueryParams(pg, sql, 0, NULL, NULL, NULL, NULL, 0) == 1;
}

static bool send_single(PGconn *pg, const store_call *call)
{
    int which = call->op == STORE_PURGE    ? PS_PURGE
                : call->op == STORE_RENEW ? PS_RENEW
                                          : PS_RELEASE;
    params p;
    if (which == PS_PURGE)
        purge_params(call, &p);
    else
        fenced_params(call, which, &p);
    return send_prepared(pg, which, &p);
}

/* BEGIN, the claims, the completions, one statement per other call,
 * COMMIT and a sync: one round trip, however many calls. */
static bool send_batch(PGconn *pg, const batch_plan *b)
{
    bool sent = PQenterPipelineMode(pg) == 1 &&
                send_plain(pg, "BEGIN ISOLATION LEVEL READ COMMITTED");
    if (sent && b->ins.n > 0)
        sent = many_send(pg, &b->ins, b->calls);
    if (sent && b->done.n > 0)
        sent = many_send(pg, &b->done, b->calls);
    for (size_t i = 0; i < b->n_singles && sent; i++)
        sent = send_single(pg, b->calls[b->singles[i]]);
    return sent && send_plain(pg, "COMMIT") && PQpipelineSync(pg) == 1;
}

/* The begin in the batch that claimed the returned row's key: the
 * insert's rows are unique by key, so at most one. */
static store_call *claimer(const batch_plan *b, const PGresult *r, int row)
{
    store_call key = {.op = STORE_BEGIN, .tenant = PQgetvalue(r, row, 0),
                      .operation = PQgetvalue(r, row, 1), .key = PQgetvalue(r, row, 2)};
    for (size_t lo = 0, hi = b->n; lo < hi;) {
        size_t mid = lo + (hi - lo) / 2;
        store_call *c = b->order[mid].call;
        int d = compare_keys(&key, c);
        if (d == 0 && c->op == STORE_BEGIN && !c->alone)
            return c;
        /* among equal keys, the begin a row carries comes before a second
         * begin (alone) and before every other operation */
        if (d < 0 || (d == 0 && c->op >= STORE_BEGIN))
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The claims the insert made: (tenant, operation, key, lease). A begin
 * whose row did not come back met an existing record and is decided on
 * its own, later. */
static int take_claims(const batch_plan *b, const PGresult *r)
{
    if (b->ins.n == 1) { /* PS_INSERT: the lease, or no row */
        store_call *call = b->calls[b->ins.first];
        call->alone = PQntuples(r) != 1;
        return call->alone ? 0 : resil__store_first(call, get_uint(r, 0, 0));
    }
    store_call *got[STORE_MAX_BATCH];
    int rows = PQntuples(r);
    if (rows < 0 || (size_t)rows > b->ins.n)
        return -1;
    for (int row = 0; row < rows; row++) {
        got[row] = claimer(b, r, row);
        if (got[row] == NULL || resil__store_first(got[row], get_uint(r, row, 3)) != 0)
            return -1;
    }
    for (size_t i = 0; i < b->n; i++)
        if (b->calls[i]->op == STORE_BEGIN)
            b->calls[i]->alone = true;
    for (int row = 0; row < rows; row++)
        got[row]->alone = false;
    return 0;
}

/* The completions that changed their row: (ord). */
static int take_completions(const batch_plan *b, const PGresult *r)
{
    if (b->done.n == 1) { /* PS_COMPLETE: the rows it changed */
        b->calls[b->done.first]->owned = strcmp(PQcmdTuples((PGresult *)r), "1") == 0;
        return 0;
    }
    for (int row = 0; row < PQntuples(r); row++) {
        uint64_t ord = get_uint(r, row, 0);
        if (ord >= b->n || b->calls[ord]->op != STORE_COMPLETE)
            return -1;
        b->calls[ord]->owned = true;
    }
    return 0;
}

static int take_single(store_call *call, PGresult *r)
{
    if (call->op == STORE_PURGE)
        call->deleted = strtoull(PQcmdTuples(r), NULL, 10);
    else
        call->owned = strcmp(PQcmdTuples(r), "1") == 0;
    return 0;
}

/* The i-th statement's result (0 is BEGIN), as the calls learn it. */
static int take_result(const batch_plan *b, size_t i, PGresult *r)
{
    if (i == 0)
        return 0;
    if (b->ins.n > 0 && --i == 0)
        return take_claims(b, r);
    if (b->done.n > 0 && --i == 0)
        return take_completions(b, r);
    if (i - 1 < b->n_singles)
        return take_single(b->calls[b->singles[i - 1]], r);
    return 0; /* COMMIT */
}

static size_t batch_statements(const batch_plan *b)
{
    return 2 + (b->ins.n > 0) + (b->done.n > 0) + b->n_singles;
}

/* Read every statement's result and the sync. The first failure is kept
 * in *bad (the rest of the pipeline is then aborted by the server); a
 * result no call can take (out of memory, a row naming no call) sets
 * *broken; false when the connection broke and the results stopped. */
static bool read_batch(PGconn *pg, const batch_plan *b, PGresult **bad, bool *broken)
{
    size_t total = batch_statements(b);
    for (size_t i = 0; i < total; i++) {
        PGresult *r = PQgetResult(pg);
        if (r == NULL)
            return false;
        if (*bad == NULL && PQresultStatus(r) != PGRES_PIPELINE_ABORTED && !ok(r)) {
            *bad = r;
        } else {
            if (*bad == NULL && !*broken && take_result(b, i, r) != 0)
                *broken = true;
            PQclear(r);
        }
        while ((r = PQgetResult(pg)) != NULL) /* the end of this statement's */
            PQclear(r);
    }
    PGresult *sync = PQgetResult(pg);
    bool synced = sync != NULL && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    return synced && PQexitPipelineMode(pg) == 1;
}

static resil_outcome run_batch(store_conn *c, store_call *const *calls, size_t n, char *msg,
                               size_t cap)
{
    resil_outcome up = connected(c, msg, cap);
    if (!resil_outcome_ok(&up))
        return up;
    batch_plan b;
    if (!plan_batch(&b, calls, n)) {
        plan_free(&b);
        return fail_local(c, "out of memory (or a batch over 2 GiB)", msg, cap);
    }
    PGresult *bad = NULL;
    bool broken = false;
    if (!send_batch(c->pg, &b) || !read_batch(c->pg, &b, &bad, &broken)) {
        plan_free(&b);
        PQclear(bad);
        resil_outcome o = fail(c, NULL, msg, cap);
        disconnect(c); /* a pipeline cut short leaves libpq's state unknown */
        return o;
    }
    plan_free(&b);
    if (bad != NULL)
        return fail(c, bad, msg, cap);
    if (broken)
        return fail_local(c, "out of memory, or a result naming no call", msg, cap);
    return resil_ok();
}

/* ---- the asynchronous begins' reads: one statement for a batch of them ---- */

/* The keys of calls[0..n) as four binary arrays (ord, tenant, operation,
 * key); false when out of memory. */
static bool read_arrays(pg_array col[4], store_call *const *calls, size_t n)
{
    arr_start(&col[0], OID_INT4, n);
    for (int i = 1; i < 4; i++)
        arr_start(&col[i], OID_TEXT, n);
    for (size_t i = 0; i < n; i++) {
        arr_int(&col[0], i, 4);
        arr_text(&col[1], calls[i]->tenant);
        arr_text(&col[2], calls[i]->operation);
        arr_text(&col[3], calls[i]->key);
    }
    for (int i = 0; i < 4; i++)
        if (col[i].oom || col[i].len > INT32_MAX)
            return false;
    return true;
}

static PGresult *select_many(PGconn *pg, store_call *const *calls, size_t n)
{
    pg_array col[4] = {{0}};
    PGresult *r = NULL;
    if (read_arrays(col, calls, n)) {
        const char *value[4];
        int length[4], format[4] = {1, 1, 1, 1};
        for (int i = 0; i < 4; i++) {
            value[i] = (const char *)col[i].data;
            length[i] = (int)col[i].len;
        }
        r = PQexecPrepared(pg, statements[PS_SELECT_MANY].name, 4, value, length, format, 1);
    }
    for (int i = 0; i < 4; i++)
        free(col[i].data);
    return r;
}

/* Every call's record in one statement (one snapshot, one round trip);
 * a lone call reads with the one-key statement. */
static resil_outcome run_reads(store_conn *c, store_call *const *calls, size_t n, char *msg,
                               size_t cap)
{
    resil_outcome up = connected(c, msg, cap);
    if (!resil_outcome_ok(&up))
        return up;
    if (n == 1)
        return answer_from_row(c, calls[0], true, &calls[0]->answered, msg, cap);
    PGresult *r = select_many(c->pg, calls, n);
    if (!ok(r))
        return fail(c, r, msg, cap);
    int rc = 0;
    for (int row = 0; row < PQntuples(r) && rc == 0; row++) {
        uint64_t ord = get_uint(r, row, 0);
        if (ord >= n) {
            rc = -1;
            break;
        }
        store_row rec = row_at(r, row, 1);
        rc = answer(calls[ord], &rec, true, &calls[ord]->answered);
    }
    PQclear(r);
    if (rc != 0)
        return fail_local(c, "out of memory, or a row naming no call", msg, cap);
    return resil_ok();
}

static resil_outcome run(store_conn *c, store_call *call, char *msg, size_t cap)
{
    resil_outcome up = connected(c, msg, cap);
    if (!resil_outcome_ok(&up))
        return up;
    switch (call->op) {
    case STORE_CONNECT:
        return resil_ok();
    case STORE_PEEK:
    case STORE_READ:
        return answer_from_row(c, call, true, &call->answered, msg, cap);
    case STORE_BEGIN:
        return begin(c, call, msg, cap);
    case STORE_COMPLETE:
        return fenced(c, call, PS_COMPLETE, msg, cap);
    case STORE_RELEASE:
        return fenced(c, call, PS_RELEASE, msg, cap);
    case STORE_RENEW:
        return fenced(c, call, PS_RENEW, msg, cap);
    case STORE_PURGE:
        return do_purge(c, call, msg, cap);
    }
    return resil_ok();
}

/* The transactional form: the application's connection, inside its open
 * transaction, at the isolation level it chose. Nothing is retried or
 * rolled back here: a failure is the application's to roll back and
 * retry, the whole of its transaction. */
static bool in_transaction(void *conn)
{
    return PQtransactionStatus((PGconn *)conn) == PQTRANS_INTRANS;
}

static resil_outcome run_in(void *conn, const store_config *cfg, store_call *call, char *msg,
                            size_t cap)
{
    store_conn c = {.cfg = cfg, .pg = conn, .borrowed = true};
    if (call->op == STORE_BEGIN)
        return claim(&c, call, msg, cap);
    return fenced(&c, call, PS_COMPLETE, msg, cap);
}

bool resil_store_pg_transient(const char *sqlstate)
{
    if (sqlstate == NULL)
        return false;
    static const char *const exact[] = {
        "40001", /* serialization_failure */
        "40P01", /* deadlock_detected */
        "57P01", /* admin_shutdown: the server is stopping or killed us */
        "57P02", /* crash_shutdown: another backend crashed, it restarts */
        "57P03", /* cannot_connect_now: starting up, in recovery */
        "53300", /* too_many_connections */
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(sqlstate, exact[i]) == 0)
            return true;
    return strncmp(sqlstate, "08", 2) == 0; /* connection_exception */
}

const store_backend resil__store_pg = {
    .name = "postgres",
    .conn_new = conn_new,
    .conn_free = conn_free,
    .run = run,
    .run_batch = run_batch,
    .run_reads = run_reads,
    .in_transaction = in_transaction,
    .run_in = run_in,
};
