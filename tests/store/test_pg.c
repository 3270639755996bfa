/*
 * test_pg.c — the store on a real PostgreSQL server, started for this test
 * in a temporary directory: the shared specification (store_cases.c), then
 * what is PostgreSQL's own — a serialization failure provoked by a
 * concurrent insert, a connection killed by the server, a server that is
 * not there — each retried (or not) as a whole transaction.
 */
#include <curl/curl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
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

typedef struct begin_thread {
    fixture *f;
    resil_store *s;
    int rc;
    char error[256];
} begin_thread;

static void *run_begin(void *arg)
{
    begin_thread *b = arg;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_err err = {0};
    b->rc = resil_store_begin(b->s, &k, h, &b->f->res, &err);
    snprintf(b->error, sizeof b->error, "%s", err.message);
    return NULL;
}

/* Wait until some store connection is blocked on a row lock. */
static void wait_for_lock_wait(PGconn *c)
{
    for (int i = 0; i < 1000; i++) {
        if (query_int(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                         " 'resil-store' AND wait_event_type = 'Lock'") > 0)
            return;
        sleep_ms(10);
    }
    fail_msg("the store never blocked on the concurrent insert");
}

static void serialization_failure_reruns_the_whole_transaction(void **state)
{
    fixture *f = *state;
    retries r = {0};
    resil_store *s = fixture_open(f, counted_alone, &r);
    /* Another writer inserts the completed record and holds it uncommitted. */
    PGconn *other = admin();
    char sql[600];
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    char hexhash[65];
    for (int i = 0; i < RESIL_SHA256_LEN; i++)
        snprintf(hexhash + 2 * i, 3, "%02x", h[i]);
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
    begin_thread b = {.f = f, .s = s};
    pthread_t t;
    pthread_create(&t, NULL, run_begin, &b);
    wait_for_lock_wait(other);
    exec_ok(other, "COMMIT");
    pthread_join(t, NULL);
    PQfinish(other);
    if (b.rc != 0)
        fail_msg("begin: %s", b.error);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.cause, "SQLSTATE 40001");
    assert_int_equal(f->res.verdict, RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_int_equal(f->res.body_len, 6);
    assert_memory_equal(f->res.body, "theirs", 6);
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

static void a_completion_while_postgres_is_stopped_is_journaled_and_replayed_after_restart(
    void **state)
{
    fixture *f = *state;
    char *tmp = test_tmpdir();
    char journal[600];
    snprintf(journal, sizeof journal, "%s/pg.journal", tmp);
    resil_store *s = fixture_open(f, journal_and_two_attempts, journal);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    assert_int_equal(pg_server_pause(server), 0);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_store_response resp = {.status = 201, .headers = "X-Order: 7\r\n",
                                 .headers_len = 12, .body = "{\"order\":7}", .body_len = 11};
    resil_err err = {0};
    int completed = resil_store_complete(s, &k, lease, &resp, &err);
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
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_string_equal(f->res.headers, "X-Order: 7\r\n");
    assert_int_equal(f->res.body_len, 11);
    assert_memory_equal(f->res.body, "{\"order\":7}", 11);
    resil_store_free(s);
    test_rmtree(tmp);
    free(tmp);
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
        PG_CASE(backend_is_named_postgres),
        PG_CASE(postgresql_scheme_is_accepted_too),
        cmocka_unit_test(gateway_replays_from_postgres_across_restarts),
    };
    int failed = store_cases_run("store.pg", own, sizeof own / sizeof own[0]);
    pg_server_stop(server);
    return failed;
}
