/*
 * test_pg.c — the store on a real PostgreSQL server, started for this test
 * in a temporary directory: the shared specification (store_cases.c), then
 * what is PostgreSQL's own — a serialization failure provoked by a
 * concurrent insert, a connection killed by the server, a server that is
 * not there — each retried (or not) as a whole transaction; then the
 * failures a deployment meets: a statement or lock timeout, a role with
 * row rights only (or none to create the table), a table of another
 * layout, a refused login, each kind of call cut while it waits (held by a
 * row lock or a sleeping trigger, seen in pg_stat_activity, so no test
 * sleeps on a guess), a shutdown and a restart, two stores racing for one
 * expired lease, and a record deleted under a READ COMMITTED claim.
 */
#include <curl/curl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gateway_proc.h"
#include "pg_server.h"
#include "store_cases.h"
#include "upstream.h"

static pg_server *server;

static void pg_url(char *buf, size_t cap) { snprintf(buf, cap, "%s", pg_server_url(server)); }

static PGconn *admin(void)
{
    PGconn *c = PQconnectdb(pg_server_url(server));
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("admin connection: %s", PQerrorMessage(c));
    return c;
}

static void exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
}

static void sql_ok(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sql_ok(PGconn *c, const char *fmt, ...)
{
    char sql[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    exec_ok(c, sql);
}

static int query_int(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    int v = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct retries {
    int count;
    char cause[64];
} retries;

static void count_retry(const resil_retry_info *info, void *user, void *ud)
{
    (void)user;
    retries *r = ud;
    r->count++;
    snprintf(r->cause, sizeof r->cause, "%s", info->cause->detail);
}

static void counted(resil_store_opts *o, void *ud)
{
    o->retry.on_retry = count_retry;
    o->retry.on_retry_ud = ud;
    o->connections = 1;
}

/* The same, with every call a transaction of its own: what a begin does
 * when it runs alone (unbatched, or sent back by its batch). */
static void counted_alone(resil_store_opts *o, void *ud)
{
    counted(o, ud);
    o->batch_max = 1;
}

/* ---- the table ------------------------------------------------------------- */

static void in_progress_record_has_a_null_status_in_the_table(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    PGconn *c = admin();
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT (status IS NULL)::int * 1000 + length(request_hash) FROM %s"
             " WHERE idempotency_key = 'k-1' AND lease = %llu AND created_at = %lld"
             " AND lease_expires_at = %lld",
             f->table, (unsigned long long)first_lease_at(CASE_WALL0),
             (long long)(CASE_WALL0 / 1000000),
             (long long)(CASE_WALL0 / 1000000 + 10000));
    assert_int_equal(query_int(c, sql), 1032);
    PQfinish(c);
}

/* ---- SQLSTATE 40001: a concurrent insert under one snapshot ----------------- */

/* The key every case here uses, the request "a" hashes, and its answer. */
static const resil_store_key K1 = {.tenant = "acme", .operation = "create-order", .key = "k-1"};

static const resil_store_response ORDER_7 = {.status = 201, .headers = "X-Order: 7\r\n",
                                             .headers_len = 12, .body = "{\"order\":7}",
                                             .body_len = 11};

/* The hash of request "a", as SQL's hex. */
static void hash_hex(char out[2 * RESIL_SHA256_LEN + 1])
{
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    for (int i = 0; i < RESIL_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static void assert_order_7_replays(fixture *f, resil_store *s)
{
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_string_equal(f->res.headers, "X-Order: 7\r\n");
    assert_int_equal(f->res.body_len, 11);
    assert_memory_equal(f->res.body, "{\"order\":7}", 11);
}

/* One call on K1 on a thread of its own, for a case to cut while the
 * database holds it. */
typedef enum bg_op { BG_BEGIN, BG_COMPLETE, BG_RELEASE, BG_PURGE } bg_op;

typedef struct bg_call {
    resil_store *s;
    bg_op op;
    uint64_t lease;         /* COMPLETE (ORDER_7), RELEASE */
    resil_store_result res; /* BEGIN (request "a") */
    uint64_t deleted;       /* PURGE */
    int rc;
    char error[256];
    pthread_t thread;
} bg_call;

static void *bg_run(void *arg)
{
    bg_call *b = arg;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_err err = {0};
    switch (b->op) {
    case BG_BEGIN:
        b->rc = resil_store_begin(b->s, &K1, h, &b->res, &err);
        break;
    case BG_COMPLETE:
        b->rc = resil_store_complete(b->s, &K1, b->lease, &ORDER_7, &err);
        break;
    case BG_RELEASE:
        b->rc = resil_store_release(b->s, &K1, b->lease, &err);
        break;
    case BG_PURGE:
        b->rc = resil_store_purge(b->s, &b->deleted, &err);
        break;
    }
    snprintf(b->error, sizeof b->error, "%s", err.message);
    return NULL;
}

static void bg_start(bg_call *b)
{
    resil_store_result_init(&b->res);
    if (pthread_create(&b->thread, NULL, bg_run, b) != 0)
        fail_msg("pthread_create failed");
}

/* Wait for the call; fail the case unless it returned 0. */
static void bg_join_ok(bg_call *b)
{
    pthread_join(b->thread, NULL);
    if (b->rc != 0)
        fail_msg("store call: %s", b->error);
}

/* Wait until n connections are blocked on a lock (a row's, a
 * transaction's): the store's, or an application's in the transactional
 * form. */
static void wait_for_lock_waits(PGconn *c, int n)
{
    for (int i = 0; i < 1000; i++) {
        if (query_int(c, "SELECT count(*) FROM pg_stat_activity"
                         " WHERE wait_event_type = 'Lock'") >= n)
            return;
        sleep_ms(10);
    }
    fail_msg("fewer than %d connections ever blocked on the lock", n);
}

static void wait_for_lock_wait(PGconn *c) { wait_for_lock_waits(c, 1); }

static void serialization_failure_reruns_the_whole_transaction(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted_alone, &r);
    /* Another writer inserts the completed record and holds it uncommitted. */
    PGconn *other = admin();
    char sql[600];
    char hexhash[2 * RESIL_SHA256_LEN + 1];
    hash_hex(hexhash);
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (tenant, operation, idempotency_key, request_hash, status,"
             " headers, body, created_at, lease_expires_at, lease) VALUES ('acme',"
             " 'create-order', 'k-1', decode('%s', 'hex'), 201, ''::bytea, 'theirs'::bytea,"
             " %lld, %lld, %llu)",
             f->table, hexhash, (long long)(CASE_WALL0 / 1000000),
             (long long)(CASE_WALL0 / 1000000), (unsigned long long)first_lease_at(CASE_WALL0));
    exec_ok(other, "BEGIN");
    exec_ok(other, sql);
    /* Our begin's snapshot predates that row; its insert waits on it. */
    bg_call b = {.s = s, .op = BG_BEGIN};
    bg_start(&b);
    wait_for_lock_wait(other);
    exec_ok(other, "COMMIT");
    bg_join_ok(&b);
    PQfinish(other);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.cause, "SQLSTATE 40001");
    assert_int_equal(b.res.verdict, RESIL_STORE_REPLAY);
    assert_int_equal(b.res.status, 201);
    assert_int_equal(b.res.body_len, 6);
    assert_memory_equal(b.res.body, "theirs", 6);
    resil_store_result_free(&b.res);
    resil_store_free(s);
}

/* ---- connections ----------------------------------------------------------- */

static void killed_connection_is_reopened_by_the_retry(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    PGconn *c = admin();
    assert_true(query_int(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                             " WHERE application_name = 'resil-store'") >= 1);
    PQfinish(c);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(r.count, 1);
    assert_true(strcmp(r.cause, "SQLSTATE 57P01") == 0 || strcmp(r.cause, "SQLSTATE 08006") == 0);
    resil_store_free(s);
}

static void unreachable_server_is_ebusy_after_the_policy(void **state)
{
    fixture *f = *state;
    retries r = {0};
    char url[128];
    /* Port 1: nothing listens there, the connection is refused at once. */
    snprintf(url, sizeof url, "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2");
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = url;
    o.clock = f->clock;
    o.retry.max_attempts = 3;
    o.retry.on_retry = count_retry;
    o.retry.on_retry_ud = &r;
    resil_store *s = NULL;
    resil_err err = {0};
    assert_int_equal(resil_store_new(&o, &s, &err), RESIL_EBUSY);
    assert_null(s);
    assert_int_equal(r.count, 2);
    assert_string_equal(r.cause, "SQLSTATE 08006");
    assert_non_null(strstr(err.message, "store: postgres: connection to server at"));
    assert_non_null(strstr(err.message, "attempts exhausted after 3 attempts)"));
}

/* ---- permanent errors: no retries ----------------------------------------- */

static void admin_exec(const char *tmpl, const char *table)
{
    char sql[400];
    snprintf(sql, sizeof sql, tmpl, table, table);
    PGconn *c = admin();
    exec_ok(c, sql);
    PQfinish(c);
}

static void a_check_constraint_violation_is_ebackend_without_retries(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    admin_exec("ALTER TABLE %s ADD CONSTRAINT %s_no_teapots CHECK (status <> 418)", f->table);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_store_response resp = {.status = 418};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(s, &k, f->res.lease, &resp, &err), RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "violates check constraint"));
    assert_non_null(strstr(err.message, "(SQLSTATE 23514, not retryable after 1 attempt)"));
    assert_int_equal(r.count, 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    resil_store_free(s);
}

static void a_table_dropped_under_the_store_is_ebackend_without_retries(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    admin_exec("DROP TABLE %s", f->table);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k = {.key = "k-1"};
    resil_err err = {0};
    assert_int_equal(resil_store_begin(s, &k, h, &f->res, &err), RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "(SQLSTATE 42P01, not retryable after 1 attempt)"));
    assert_int_equal(r.count, 0);
    resil_store_free(s);
}

/* ---- the journal across a real outage -------------------------------------- */

static void journal_and_two_attempts(resil_store_opts *o, void *ud)
{
    o->journal = ud;
    o->retry.max_attempts = 2;
    o->connections = 1;
}

/* A temporary directory for a store's journal, and the journal's path. */
typedef struct journal_dir {
    char *tmp;
    char path[600];
} journal_dir;

static void journal_dir_make(journal_dir *j)
{
    j->tmp = test_tmpdir();
    assert_non_null(j->tmp);
    snprintf(j->path, sizeof j->path, "%s/pg.journal", j->tmp);
}

static void journal_dir_remove(journal_dir *j)
{
    test_rmtree(j->tmp);
    free(j->tmp);
}

/* The one answer the journal holds is replayed, reaches the table and
 * replays as order 7; then the store and its journal go. */
static void the_journaled_answer_replays(fixture *f, resil_store *s, journal_dir *j)
{
    resil_store_journal_stats js;
    resil_store_journal_stats_get(s, &js);
    assert_int_equal(js.pending, 1);
    size_t replayed = 0;
    resil_err err = {0};
    assert_int_equal(resil_store_journal_replay(s, &replayed, &err), 0);
    assert_int_equal(replayed, 1);
    assert_order_7_replays(f, s);
    resil_store_free(s);
    journal_dir_remove(j);
}

static void a_completion_while_postgres_is_stopped_is_journaled_and_replayed_after_restart(
    void **state)
{
    fixture *f = *state;
    journal_dir j;
    journal_dir_make(&j);
    resil_store *s = fixture_open(f, journal_and_two_attempts, j.path);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    assert_int_equal(pg_server_pause(server), 0);
    resil_err err = {0};
    int completed = resil_store_complete(s, &K1, lease, &ORDER_7, &err);
    resil_store_journal_stats st;
    resil_store_journal_stats_get(s, &st);
    int verdict = begin_key(f, s, "k-1", "a");
    size_t replayed = 99;
    int while_down = resil_store_journal_replay(s, &replayed, NULL);
    assert_int_equal(pg_server_resume(server), 0);
    assert_int_equal(completed, 0);
    assert_int_equal(st.pending, 1);
    assert_int_equal(st.written, 1);
    assert_int_equal(verdict, RESIL_STORE_IN_PROGRESS);
    assert_int_equal(while_down, RESIL_EBUSY);
    assert_int_equal(replayed, 0);
    assert_int_equal(resil_store_journal_replay(s, &replayed, &err), 0);
    assert_int_equal(replayed, 1);
    assert_order_7_replays(f, s);
    resil_store_free(s);
    journal_dir_remove(&j);
}

/* ---- the transactional form ------------------------------------------------- */

static int count_where(PGconn *c, const char *tmpl, const char *table)
{
    char sql[300];
    snprintf(sql, sizeof sql, tmpl, table);
    return query_int(c, sql);
}

/* One request the way an application runs it in its own transaction:
 * BEGIN; begin_in; on FIRST the business row and complete_in; COMMIT.
 * Returns the verdict; `wrote` (may be -1) gets a byte once the business
 * row is written and before COMMIT. */
static resil_store_verdict order_tx(fixture *f, resil_store *s, PGconn *app, int wrote)
{
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("{\"qty\":1}", h);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-tx"};
    resil_store_tx tx = {.postgres = app};
    resil_err err = {0};
    exec_ok(app, "BEGIN");
    if (resil_store_begin_in(s, &tx, &k, h, &f->res, &err) != 0)
        fail_msg("begin_in: %s", err.message);
    resil_store_verdict v = f->res.verdict;
    if (v != RESIL_STORE_FIRST) {
        exec_ok(app, "ROLLBACK");
        return v;
    }
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO %s_orders (qty) VALUES (1) RETURNING id", f->table);
    int id = query_int(app, sql);
    char body[32];
    int len = snprintf(body, sizeof body, "{\"order\":%d}", id);
    resil_store_response r = {.status = 201, .body = body, .body_len = (size_t)len};
    if (resil_store_complete_in(s, &tx, &k, f->res.lease, &r, &err) != 0)
        fail_msg("complete_in: %s", err.message);
    if (wrote >= 0) {
        char b = 'w';
        if (write(wrote, &b, 1) != 1)
            _exit(3);
        pause(); /* killed here, before COMMIT */
    }
    exec_ok(app, "COMMIT");
    return v;
}

static void a_process_killed_before_commit_leaves_nothing_and_the_retry_runs_once(void **state)
{
    fixture *f = *state;
    PGconn *app = admin();
    char sql[200];
    snprintf(sql, sizeof sql, "CREATE TABLE %s_orders (id serial PRIMARY KEY, qty int)", f->table);
    exec_ok(app, sql);
    int wrote[2];
    assert_int_equal(pipe(wrote), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(wrote[0]);
        resil_store *s = fixture_open(f, NULL, NULL);
        PGconn *mine = admin();
        order_tx(f, s, mine, wrote[1]);
        _exit(4);
    }
    close(wrote[1]);
    char b = 0;
    assert_int_equal(read(wrote[0], &b, 1), 1); /* the business row is written */
    close(wrote[0]);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    /* Nothing of the killed request survived: no order, no key. */
    assert_int_equal(count_where(app, "SELECT count(*) FROM %s_orders", f->table), 0);
    assert_int_equal(count_where(app, "SELECT count(*) FROM %s WHERE idempotency_key = 'k-tx'",
                                 f->table), 0);
    /* The client's retry runs it exactly once more; a further one replays. */
    assert_int_equal(order_tx(f, f->s, app, -1), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    assert_int_equal(order_tx(f, f->s, app, -1), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    int id = count_where(app, "SELECT max(id) FROM %s_orders", f->table);
    char want[32];
    snprintf(want, sizeof want, "{\"order\":%d}", id);
    assert_int_equal(f->res.body_len, strlen(want));
    assert_memory_equal(f->res.body, want, strlen(want));
    assert_int_equal(count_where(app, "SELECT count(*) FROM %s_orders", f->table), 1);
    PQfinish(app);
}

static void begin_in_outside_a_transaction_is_refused(void **state)
{
    fixture *f = *state;
    PGconn *app = admin();
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k = {.key = "k-1"};
    resil_store_tx tx = {.postgres = app};
    resil_err err = {0};
    assert_int_equal(resil_store_begin_in(f->s, &tx, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the tx connection must be inside an open "
                                     "transaction (BEGIN first)");
    tx = (resil_store_tx){.sqlite = (struct sqlite3 *)app};
    assert_int_equal(resil_store_begin_in(f->s, &tx, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: tx.postgres is required for a postgres store");
    PQfinish(app);
}

/* A permanent error in the caller's transaction keeps its class, and the
 * transaction is left for the caller to roll back. */
static void a_constraint_in_the_callers_transaction_is_ebackend(void **state)
{
    fixture *f = *state;
    admin_exec("ALTER TABLE %s ADD CONSTRAINT %s_no_teapots CHECK (status <> 418)", f->table);
    PGconn *app = admin();
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k = {.key = "k-1"};
    resil_store_tx tx = {.postgres = app};
    resil_err err = {0};
    exec_ok(app, "BEGIN");
    assert_int_equal(resil_store_begin_in(f->s, &tx, &k, h, &f->res, &err), 0);
    resil_store_response r = {.status = 418};
    assert_int_equal(resil_store_complete_in(f->s, &tx, &k, f->res.lease, &r, &err),
                     RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "(SQLSTATE 23514, in the caller's transaction: "
                                        "roll it back)"));
    assert_int_equal(PQtransactionStatus(app), PQTRANS_INERROR);
    exec_ok(app, "ROLLBACK");
    PQfinish(app);
}

/* ---- a statement the server cancels: a timeout ------------------------------ */

/* How a test's store connects where it is not as the fixture's: a URL of
 * its own (a server setting, a role), and a journal, a table or an
 * attempt count when given; its retries counted. */
typedef struct connect_as {
    char url[600];
    const char *journal; /* NULL: none */
    const char *table;   /* NULL: the fixture's */
    unsigned attempts;   /* 0: the fixture's */
    retries r;
} connect_as;

static void with_connect_as(resil_store_opts *o, void *ud)
{
    connect_as *a = ud;
    counted(o, &a->r);
    o->url = a->url;
    o->journal = a->journal;
    if (a->table != NULL)
        o->table = a->table;
    if (a->attempts != 0)
        o->retry.max_attempts = a->attempts;
}

/* A store whose connections carry a server setting of 300 ms (the URL's
 * options=-c name=value). */
static resil_store *open_with_setting(fixture *f, connect_as *st, const char *name,
                                      const char *journal)
{
    snprintf(st->url, sizeof st->url, "%s?options=-c%%20%s%%3D300", f->url, name);
    st->journal = journal;
    return fixture_open(f, with_connect_as, st);
}

/* Hold K1's row from another connection (BEGIN ... FOR UPDATE): a write of
 * it waits until the holder's transaction ends. */
static PGconn *hold_row(const fixture *f)
{
    PGconn *c = admin();
    exec_ok(c, "BEGIN");
    sql_ok(c, "SELECT 1 FROM %s WHERE idempotency_key = 'k-1' FOR UPDATE", f->table);
    return c;
}

static void release_row(PGconn *holder)
{
    exec_ok(holder, "COMMIT");
    PQfinish(holder);
}

/* A completion held past the statement timeout is cancelled by the server
 * (57014). The database is slow, not the request wrong: unavailable at
 * once (each retry would wait as long again), so the journal takes the
 * answer, and it reaches the table once the row is free. */
static void a_completion_past_the_statement_timeout_is_journaled_without_retries(void **state)
{
    fixture *f = *state;
    journal_dir j;
    journal_dir_make(&j);
    connect_as st = {.r = {0}};
    resil_store *s = open_with_setting(f, &st, "statement_timeout", j.path);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    PGconn *holder = hold_row(f);
    resil_err err = {0};
    int rc = resil_store_complete(s, &K1, f->res.lease, &ORDER_7, &err);
    release_row(holder);
    if (rc != 0)
        fail_msg("complete: %s", err.message);
    assert_int_equal(st.r.count, 0);
    the_journaled_answer_replays(f, s, &j);
}

/* A lock timeout (55P03) alike, without a journal: RESIL_EBUSY at once,
 * nothing saved, and the same completion succeeds once the row is free. */
static void a_completion_past_the_lock_timeout_is_ebusy_at_once_and_saves_nothing(void **state)
{
    fixture *f = *state;
    connect_as st = {.r = {0}};
    resil_store *s = open_with_setting(f, &st, "lock_timeout", NULL);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    PGconn *holder = hold_row(f);
    resil_err err = {0};
    int rc = resil_store_complete(s, &K1, lease, &ORDER_7, &err);
    release_row(holder);
    assert_int_equal(rc, RESIL_EBUSY);
    assert_string_equal(err.message, "store: postgres: ERROR:  canceling statement due to lock "
                                     "timeout (SQLSTATE 55P03, not retryable after 1 attempt)");
    assert_int_equal(st.r.count, 0);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(resil_store_complete(s, &K1, lease, &ORDER_7, &err), 0);
    assert_order_7_replays(f, s);
    resil_store_free(s);
}

/* ---- what the server lets the store's role do ------------------------------- */

/* A new login role named after the fixture's table (roles are the
 * server's, not a table's), and a's URL as it. */
static void make_role(fixture *f, connect_as *a, const char *suffix, const char *attrs,
                      char *role, size_t cap)
{
    snprintf(role, cap, "%s_%s", f->table, suffix);
    PGconn *c = admin();
    exec_ok(c, "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    sql_ok(c, "CREATE ROLE %s %s", role, attrs);
    PQfinish(c);
    snprintf(a->url, sizeof a->url, "postgres://%s@127.0.0.1:%d/postgres", role,
             pg_server_port(server));
}

/* resil_store_new as a says, expected to fail: its code. */
static int open_refused(fixture *f, connect_as *a, resil_err *err)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.clock = f->clock;
    o.table = f->table;
    with_connect_as(&o, a);
    resil_store *s = NULL;
    int rc = resil_store_new(&o, &s, err);
    assert_null(s);
    return rc;
}

static int table_count(const char *name)
{
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_class WHERE relname = '%s'", name);
    PGconn *c = admin();
    int n = query_int(c, sql);
    PQfinish(c);
    return n;
}

/* An operator made the table and granted the service's role its rows
 * only: no CREATE on the schema, not the table's owner. The store creates
 * only what is missing, so it serves. */
static void a_role_with_row_rights_only_serves_from_a_table_made_for_it(void **state)
{
    fixture *f = *state;
    connect_as a = {.r = {0}};
    char role[80];
    make_role(f, &a, "rows", "LOGIN", role, sizeof role);
    PGconn *c = admin();
    sql_ok(c, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s", f->table, role);
    PQfinish(c);
    resil_store *s = fixture_open(f, with_connect_as, &a);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_err err = {0};
    assert_int_equal(resil_store_complete(s, &K1, f->res.lease, &ORDER_7, &err), 0);
    assert_order_7_replays(f, s);
    resil_fake_clock_advance(f->fc, RESIL_S(7200));
    uint64_t deleted = 0;
    assert_int_equal(resil_store_purge(s, &deleted, &err), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(a.r.count, 0);
    resil_store_free(s);
}

/* The same role where the table is missing may not create it: the
 * operator's to fix, so RESIL_EBACKEND at open in the server's words,
 * without retries, and nothing created. */
static void a_role_that_may_not_create_the_missing_table_is_refused_for_good(void **state)
{
    fixture *f = *state;
    connect_as a = {.r = {0}};
    char role[80], missing[80];
    make_role(f, &a, "none", "LOGIN", role, sizeof role);
    snprintf(missing, sizeof missing, "%s_missing", f->table);
    a.table = missing;
    resil_err err = {0};
    assert_int_equal(open_refused(f, &a, &err), RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "permission denied for schema public"));
    assert_non_null(strstr(err.message, "(SQLSTATE 42501, not retryable after 1 attempt)"));
    assert_int_equal(a.r.count, 0);
    assert_int_equal(table_count(missing), 0);
}

/* A table by the store's name with another layout (here without the lease
 * column, as one made by hand might be) is refused at open for good,
 * naming the column: the store never writes into it. */
static void a_table_of_another_layout_is_refused_at_open_naming_the_column(void **state)
{
    fixture *f = *state;
    char old[80];
    snprintf(old, sizeof old, "%s_old", f->table);
    PGconn *c = admin();
    sql_ok(c,
           "CREATE TABLE %s (tenant TEXT NOT NULL, operation TEXT NOT NULL,"
           " idempotency_key TEXT NOT NULL, request_hash BYTEA NOT NULL, status INTEGER,"
           " headers BYTEA, body BYTEA, created_at BIGINT NOT NULL,"
           " lease_expires_at BIGINT NOT NULL,"
           " PRIMARY KEY (tenant, operation, idempotency_key));"
           "CREATE INDEX %s_created_at ON %s (created_at)",
           old, old, old);
    PQfinish(c);
    connect_as a = {.table = old, .r = {0}};
    snprintf(a.url, sizeof a.url, "%s", f->url);
    resil_err err = {0};
    assert_int_equal(open_refused(f, &a, &err), RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "column \"lease\""));
    assert_non_null(strstr(err.message, "(SQLSTATE 42703, not retryable after 1 attempt)"));
    assert_int_equal(a.r.count, 0);
}

/* A table by the store's name whose unique key is not the three key
 * columns — none at all, or the key alone — is refused at open for good:
 * the claim's insert names its conflict target, which such a table cannot
 * arbitrate. Before, every begin of one key on a table without a unique
 * key was first, and the request ran twice. */
static void a_table_without_the_keys_unique_key_is_refused_at_open(void **state)
{
    fixture *f = *state;
    static const char *const keys[] = {"", ", UNIQUE (idempotency_key)",
                                       ", UNIQUE (tenant, idempotency_key)"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char table[80];
        snprintf(table, sizeof table, "%s_nokey%zu", f->table, i);
        PGconn *c = admin();
        sql_ok(c,
               "CREATE TABLE %s (tenant TEXT NOT NULL, operation TEXT NOT NULL,"
               " idempotency_key TEXT NOT NULL, request_hash BYTEA NOT NULL, status INTEGER,"
               " headers BYTEA, body BYTEA, created_at BIGINT NOT NULL,"
               " lease_expires_at BIGINT NOT NULL, lease BIGINT NOT NULL DEFAULT 0%s);"
               "CREATE INDEX %s_created_at ON %s (created_at)",
               table, keys[i], table, table);
        PQfinish(c);
        connect_as a = {.table = table, .r = {0}};
        snprintf(a.url, sizeof a.url, "%s", f->url);
        resil_err err = {0};
        assert_int_equal(open_refused(f, &a, &err), RESIL_EBACKEND);
        assert_non_null(strstr(err.message, "no unique or exclusion constraint matching the ON "
                                            "CONFLICT specification"));
        assert_non_null(strstr(err.message, "(SQLSTATE 42P10, not retryable after 1 attempt)"));
        assert_int_equal(a.r.count, 0);
    }
}

/* A login the server refuses. libpq gives a failed connection no
 * SQLSTATE, and a server starting up refuses a login the same way
 * (57P03), so it is retried as a lost connection: RESIL_EBUSY after the
 * policy, in the server's words. */
static void a_refused_login_is_ebusy_after_the_policy_in_the_servers_words(void **state)
{
    fixture *f = *state;
    connect_as a = {.attempts = 3, .r = {0}};
    char role[80], words[160];
    make_role(f, &a, "nologin", "NOLOGIN", role, sizeof role);
    resil_err err = {0};
    assert_int_equal(open_refused(f, &a, &err), RESIL_EBUSY);
    snprintf(words, sizeof words, "role \"%s\" is not permitted to log in", role);
    assert_non_null(strstr(err.message, words));
    assert_non_null(strstr(err.message, "(SQLSTATE 08006, attempts exhausted after 3 attempts)"));
    assert_int_equal(a.r.count, 2);
}

/* ---- a call cut while the database holds it ---------------------------------- */

/* Kill the store's connections that wait on a lock; how many. */
static int terminate_waiting(PGconn *c)
{
    return query_int(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE application_name = 'resil-store' AND wait_event_type = 'Lock'");
}

static void assert_lost_connection(const retries *r)
{
    assert_int_equal(r->count, 1);
    if (strcmp(r->cause, "SQLSTATE 57P01") != 0 && strcmp(r->cause, "SQLSTATE 08006") != 0)
        fail_msg("retried for %s, not for the lost connection", r->cause);
}

/* A claim waits on another transaction's uncommitted claim of its key, and
 * its connection is killed: the attempt rolls back whole; the retry meets
 * the other's committed claim. One claim, the other's: never two firsts. */
static void a_claim_cut_while_it_waits_is_rerun_and_meets_the_other_claim(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    char hexhash[2 * RESIL_SHA256_LEN + 1];
    hash_hex(hexhash);
    PGconn *other = admin(), *c = admin();
    exec_ok(other, "BEGIN");
    sql_ok(other,
           "INSERT INTO %s (tenant, operation, idempotency_key, request_hash, created_at,"
           " lease_expires_at, lease) VALUES ('acme', 'create-order', 'k-1',"
           " decode('%s', 'hex'), %lld, %lld, 7)",
           f->table, hexhash, (long long)(CASE_WALL0 / 1000000),
           (long long)(CASE_WALL0 / 1000000 + 10000));
    bg_call b = {.s = s, .op = BG_BEGIN};
    bg_start(&b);
    wait_for_lock_wait(c);
    assert_int_equal(terminate_waiting(c), 1);
    exec_ok(other, "COMMIT");
    bg_join_ok(&b);
    PQfinish(other);
    assert_int_equal(b.res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_true(r.count >= 1); /* and a 40001 when the retry met the commit */
    assert_int_equal(count_where(c, "SELECT count(*) FROM %s", f->table), 1);
    assert_int_equal(count_where(c, "SELECT count(*) FROM %s WHERE lease = 7", f->table), 1);
    PQfinish(c);
    resil_store_result_free(&b.res);
    resil_store_free(s);
}

/* A completion or a release waiting on its row, whose connection is
 * killed: rerun whole on a new connection, and applied once. */
static void fenced_write_cut_while_it_waits(fixture *f, bg_op op)
{
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    PGconn *holder = hold_row(f), *c = admin();
    bg_call b = {.s = s, .op = op, .lease = f->res.lease};
    bg_start(&b);
    wait_for_lock_wait(c);
    assert_int_equal(terminate_waiting(c), 1);
    release_row(holder);
    bg_join_ok(&b);
    assert_lost_connection(&r);
    if (op == BG_COMPLETE) {
        assert_order_7_replays(f, s);
        assert_int_equal(count_where(c, "SELECT count(*) FROM %s WHERE status = 201", f->table),
                         1);
    } else {
        assert_int_equal(count_where(c, "SELECT count(*) FROM %s", f->table), 0);
        assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
        assert_false(f->res.taken_over);
    }
    PQfinish(c);
    resil_store_free(s);
}

static void a_completion_cut_while_it_waits_is_rerun_and_saved_once(void **state)
{
    fenced_write_cut_while_it_waits(*state, BG_COMPLETE);
}

static void a_release_cut_while_it_waits_is_rerun_and_frees_the_key(void **state)
{
    fenced_write_cut_while_it_waits(*state, BG_RELEASE);
}

/* The expiry sweep alike: a purge chunk waiting on a row, cut, is rerun
 * whole and deletes each expired record once. */
static void a_purge_cut_while_it_waits_is_rerun_and_deletes_each_record_once(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    const char *keys[] = {"k-1", "k-2", "k-3"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(begin_key(f, s, keys[i], "a"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_S(7200));
    PGconn *holder = hold_row(f), *c = admin();
    bg_call b = {.s = s, .op = BG_PURGE};
    bg_start(&b);
    wait_for_lock_wait(c);
    assert_int_equal(terminate_waiting(c), 1);
    release_row(holder);
    bg_join_ok(&b);
    assert_lost_connection(&r);
    assert_int_equal(b.deleted, 3);
    assert_int_equal(count_where(c, "SELECT count(*) FROM %s", f->table), 0);
    PQfinish(c);
    resil_store_free(s);
}

/* Wait until a connection sleeps in pg_sleep (a trigger holding a call). */
static void wait_for_sleeper(PGconn *c)
{
    for (int i = 0; i < 1000; i++) {
        if (query_int(c, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") >
            0)
            return;
        sleep_ms(10);
    }
    fail_msg("no connection ever slept in the trigger");
}

/* The server shuts down while a completion runs (held by a trigger): its
 * attempts fail, the journal takes the answer, and it reaches the table
 * once the server is back. */
static void a_completion_cut_by_a_server_shutdown_is_journaled_and_saved_after_restart(
    void **state)
{
    fixture *f = *state;
    journal_dir j;
    journal_dir_make(&j);
    resil_store *s = fixture_open(f, journal_and_two_attempts, j.path);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    PGconn *c = admin();
    sql_ok(c,
           "CREATE FUNCTION %s_slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
           " PERFORM pg_sleep(60); RETURN NEW; END $$;"
           "CREATE TRIGGER %s_slow BEFORE UPDATE ON %s FOR EACH ROW"
           " WHEN (NEW.status IS NOT NULL) EXECUTE FUNCTION %s_slow()",
           f->table, f->table, f->table, f->table);
    bg_call b = {.s = s, .op = BG_COMPLETE, .lease = f->res.lease};
    bg_start(&b);
    wait_for_sleeper(c);
    PQfinish(c);
    int paused = pg_server_pause(server);
    pthread_join(b.thread, NULL);
    assert_int_equal(pg_server_resume(server), 0);
    assert_int_equal(paused, 0);
    if (b.rc != 0)
        fail_msg("complete: %s", b.error);
    c = admin();
    sql_ok(c, "DROP TRIGGER %s_slow ON %s", f->table, f->table);
    PQfinish(c);
    the_journaled_answer_replays(f, s, &j);
}

/* The server comes back in the backoff of a call's first retry. */
typedef struct restart {
    bool done;
    int rc;
} restart;

static void resume_once(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    restart *rs = ud;
    if (!rs->done)
        rs->rc = pg_server_resume(server);
    rs->done = true;
}

/* The server restarted between two calls: the next call's first attempt
 * meets the dead connection; the server is back by its retry, which
 * reconnects and saves the answer once. */
static void a_call_after_a_restart_reconnects_on_its_retry(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted, &r);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(pg_server_pause(server), 0);
    restart rs = {0};
    resil_fake_clock_set_hook(f->fc, resume_once, &rs);
    resil_err err = {0};
    int rc = resil_store_complete(s, &K1, f->res.lease, &ORDER_7, &err);
    resil_fake_clock_set_hook(f->fc, NULL, NULL);
    assert_true(rs.done);
    assert_int_equal(rs.rc, 0);
    if (rc != 0)
        fail_msg("complete: %s", err.message);
    assert_lost_connection(&r);
    assert_order_7_replays(f, s);
    resil_store_free(s);
}

static void counted_batched(resil_store_opts *o, void *ud)
{
    counted(o, ud);
    o->batch_max = 64;
}

/* An asynchronous begin while the server is down: its read fails, which
 * fails nobody, and its claim decides — RESIL_EBUSY after the policy,
 * once; with the server back within the claim's retries, first, once. */
static void an_async_begin_whose_read_finds_the_server_down_is_decided_by_its_claim(
    void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted_batched, &r);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    reply down, back;
    reply_init(&down);
    reply_init(&back);
    assert_int_equal(pg_server_pause(server), 0);
    resil_err err = {0};
    assert_int_equal(resil_store_begin_async(s, &K1, h, &down.res, on_reply, &down, &err), 0);
    int down_rc = await_reply(&down);
    restart rs = {0};
    resil_fake_clock_set_hook(f->fc, resume_once, &rs);
    assert_int_equal(resil_store_begin_async(s, &K1, h, &back.res, on_reply, &back, &err), 0);
    int back_rc = await_reply(&back);
    resil_fake_clock_set_hook(f->fc, NULL, NULL);
    assert_true(rs.done);
    assert_int_equal(rs.rc, 0);
    assert_int_equal(down_rc, RESIL_EBUSY);
    assert_int_equal(down.res.verdict, RESIL_STORE_NONE);
    assert_int_equal(calls_of(&down), 1);
    assert_int_equal(back_rc, 0);
    assert_int_equal(back.res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(back.res.lease, first_lease_now(f));
    assert_int_equal(calls_of(&back), 1);
    resil_store_free(s);
    reply_free(&down);
    reply_free(&back);
}

/* ---- two stores at once -------------------------------------------------------- */

/* Two stores take one expired lease over at once, each in its REPEATABLE
 * READ transaction, both waiting on the row: the first to update it wins;
 * the other's update cannot serialize (40001), and its rerun finds the
 * key in progress. One first between them, the next lease number. */
static void racing_takeovers_of_one_expired_lease_give_one_first(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lost = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(60));
    retries r[2] = {{0}, {0}};
    bg_call b[2];
    for (int i = 0; i < 2; i++)
        b[i] = (bg_call){.s = fixture_open(f, counted, &r[i]), .op = BG_BEGIN};
    PGconn *holder = hold_row(f), *c = admin();
    bg_start(&b[0]);
    bg_start(&b[1]);
    wait_for_lock_waits(c, 2);
    release_row(holder);
    int firsts = 0;
    for (int i = 0; i < 2; i++) {
        bg_join_ok(&b[i]);
        if (b[i].res.verdict == RESIL_STORE_FIRST) {
            firsts++;
            assert_true(b[i].res.taken_over);
            assert_int_equal(b[i].res.lease, lost + 1);
            assert_int_equal(r[i].count, 0);
        } else {
            assert_int_equal(b[i].res.verdict, RESIL_STORE_IN_PROGRESS);
            assert_int_equal(r[i].count, 1);
            assert_string_equal(r[i].cause, "SQLSTATE 40001");
        }
        resil_store_result_free(&b[i].res);
        resil_store_free(b[i].s);
    }
    assert_int_equal(firsts, 1);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %%s WHERE lease = %llu",
             (unsigned long long)(lost + 1));
    assert_int_equal(count_where(c, sql, f->table), 1);
    PQfinish(c);
}

/* ---- the transactional form at READ COMMITTED ---------------------------------- */

typedef struct tx_begin {
    resil_store *s;
    PGconn *app;
    resil_store_result res;
    int rc;
    char error[256];
} tx_begin;

static void *run_begin_in(void *arg)
{
    tx_begin *t = arg;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_tx tx = {.postgres = t->app};
    resil_err err = {0};
    t->rc = resil_store_begin_in(t->s, &tx, &K1, h, &t->res, &err);
    snprintf(t->error, sizeof t->error, "%s", err.message);
    return NULL;
}

/* A claim in the application's READ COMMITTED transaction meets an expired
 * record and waits on its row to take it over; the record is then deleted
 * (its late owner releases it). Each statement reads afresh at READ
 * COMMITTED, so the claim finds nothing left to answer from: a race to run
 * again (RESIL_EBUSY), not a failure for good — and run again, it is a
 * first. */
static void a_claim_whose_record_goes_under_a_read_committed_transaction_is_run_again(
    void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t late = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(60));
    PGconn *holder = hold_row(f), *app = admin(), *c = admin();
    exec_ok(app, "BEGIN ISOLATION LEVEL READ COMMITTED");
    tx_begin t = {.s = f->s, .app = app};
    resil_store_result_init(&t.res);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, run_begin_in, &t), 0);
    wait_for_lock_wait(c);
    sql_ok(holder, "DELETE FROM %s WHERE idempotency_key = 'k-1' AND lease = %llu", f->table,
           (unsigned long long)late);
    release_row(holder);
    pthread_join(thread, NULL);
    exec_ok(app, "ROLLBACK");
    assert_int_equal(t.rc, RESIL_EBUSY);
    assert_non_null(strstr(t.error, "in the caller's transaction: roll it back and run it again)"));
    assert_int_equal(t.res.verdict, RESIL_STORE_NONE);
    exec_ok(app, "BEGIN ISOLATION LEVEL READ COMMITTED");
    assert_int_equal(run_begin_in(&t), NULL);
    exec_ok(app, "COMMIT");
    if (t.rc != 0)
        fail_msg("begin_in: %s", t.error);
    assert_int_equal(t.res.verdict, RESIL_STORE_FIRST);
    assert_false(t.res.taken_over);
    assert_int_equal(t.res.lease, first_lease_now(f));
    resil_store_result_free(&t.res);
    PQfinish(app);
    PQfinish(c);
}

static void backend_is_named_postgres(void **state)
{
    fixture *f = *state;
    assert_string_equal(resil_store_backend(f->s), "postgres");
}

static void postgresql_scheme_is_accepted_too(void **state)
{
    fixture *f = *state;
    char url[600];
    snprintf(url, sizeof url, "postgresql://%s", f->url + strlen("postgres://"));
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = url;
    o.table = f->table;
    resil_store *s = NULL;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
}

/* ---- the gateway on PostgreSQL ---------------------------------------------- */

static void gateway_replays_from_postgres_across_restarts(void **state)
{
    (void)state;
    upstream *up = upstream_start();
    char *dir = test_tmpdir();
    char log[600], url[300];
    assert_non_null(up);
    const char *args[] = {"--upstream", upstream_url(up), "--store", pg_server_url(server),
                          NULL};
    gateway_proc gw;
    http_reply r[2];
    static int runs; /* the cases run twice against one table: a key per run */
    char key[64];
    snprintf(key, sizeof key, "Idempotency-Key: pg-%d", ++runs);
    const char *headers[] = {key, NULL};
    for (int run = 0; run < 2; run++) {
        snprintf(log, sizeof log, "%s/gateway-%d.log", dir, run);
        assert_int_equal(gateway_start(&gw, test_build_path("resil"), log, args), 0);
        snprintf(url, sizeof url, "%s/orders", gw.url);
        assert_int_equal(http_request("POST", url, headers, "{\"qty\":3}", &r[run]), 0);
        assert_int_equal(gateway_stop(&gw), 0);
    }
    assert_int_equal(r[0].status, 201);
    assert_int_equal(r[1].status, 201);
    assert_string_equal(r[1].body, r[0].body);
    char replayed[16];
    http_reply_header(&r[1], "Idempotent-Replayed", replayed, sizeof replayed);
    assert_string_equal(replayed, "true");
    assert_int_equal(upstream_requests(up), 1);
    http_reply_free(&r[0]);
    http_reply_free(&r[1]);
    upstream_stop(up);
    test_rmtree(dir);
    free(dir);
}

#define PG_CASE(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    server = pg_server_start();
    if (server == NULL) {
        fprintf(stderr, "test_pg: could not start PostgreSQL\n");
        return 1;
    }
    store_cases_url = pg_url;
    const struct CMUnitTest own[] = {
        PG_CASE(in_progress_record_has_a_null_status_in_the_table),
        PG_CASE(serialization_failure_reruns_the_whole_transaction),
        PG_CASE(killed_connection_is_reopened_by_the_retry),
        PG_CASE(unreachable_server_is_ebusy_after_the_policy),
        PG_CASE(a_check_constraint_violation_is_ebackend_without_retries),
        PG_CASE(a_table_dropped_under_the_store_is_ebackend_without_retries),
        PG_CASE(a_completion_while_postgres_is_stopped_is_journaled_and_replayed_after_restart),
        PG_CASE(a_process_killed_before_commit_leaves_nothing_and_the_retry_runs_once),
        PG_CASE(begin_in_outside_a_transaction_is_refused),
        PG_CASE(a_constraint_in_the_callers_transaction_is_ebackend),
        PG_CASE(a_completion_past_the_statement_timeout_is_journaled_without_retries),
        PG_CASE(a_completion_past_the_lock_timeout_is_ebusy_at_once_and_saves_nothing),
        PG_CASE(a_role_with_row_rights_only_serves_from_a_table_made_for_it),
        PG_CASE(a_role_that_may_not_create_the_missing_table_is_refused_for_good),
        PG_CASE(a_table_of_another_layout_is_refused_at_open_naming_the_column),
        PG_CASE(a_table_without_the_keys_unique_key_is_refused_at_open),
        PG_CASE(a_refused_login_is_ebusy_after_the_policy_in_the_servers_words),
        PG_CASE(a_claim_cut_while_it_waits_is_rerun_and_meets_the_other_claim),
        PG_CASE(a_completion_cut_while_it_waits_is_rerun_and_saved_once),
        PG_CASE(a_release_cut_while_it_waits_is_rerun_and_frees_the_key),
        PG_CASE(a_purge_cut_while_it_waits_is_rerun_and_deletes_each_record_once),
        PG_CASE(a_completion_cut_by_a_server_shutdown_is_journaled_and_saved_after_restart),
        PG_CASE(a_call_after_a_restart_reconnects_on_its_retry),
        PG_CASE(an_async_begin_whose_read_finds_the_server_down_is_decided_by_its_claim),
        PG_CASE(racing_takeovers_of_one_expired_lease_give_one_first),
        PG_CASE(a_claim_whose_record_goes_under_a_read_committed_transaction_is_run_again),
        PG_CASE(backend_is_named_postgres),
        PG_CASE(postgresql_scheme_is_accepted_too),
        cmocka_unit_test(gateway_replays_from_postgres_across_restarts),
    };
    int failed = store_cases_run("store.pg", own, sizeof own / sizeof own[0]);
    pg_server_stop(server);
    return failed;
}
