/*
 * test_store_tx.c — the transactional form on SQLite: begin_in and
 * complete_in run as statements of the application's own transaction on
 * its own connection, so the key commits or rolls back with the business
 * write; the verdicts are begin()'s; nothing is retried inside the
 * caller's transaction, and errors keep their classes. The PostgreSQL
 * side, with a process killed before COMMIT, is in test_pg.c.
 */
#include <sqlite3.h>

#include "store_cases.h"

static char *dir;
static int files;

static void sqlite_url(char *buf, size_t cap)
{
    snprintf(buf, cap, "sqlite:%s/store-%d.db", dir, files++);
}

static const char *path_of(const fixture *f) { return f->url + strlen("sqlite:"); }

static const resil_store_key K1 = {.tenant = "acme", .operation = "create-order", .key = "k-1"};

/* The application's connection, with a business table. */
static sqlite3 *app_open(const fixture *f)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY,"
                                      " qty INTEGER)", NULL, NULL, NULL),
                     SQLITE_OK);
    return db;
}

static void app_exec(sqlite3 *db, const char *sql)
{
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK)
        fail_msg("%s: %s", sql, error);
}

static int count(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static int begin_in(fixture *f, sqlite3 *db, const resil_store_key *k, const char *body,
                    resil_err *err)
{
    uint8_t h[RESIL_SHA256_LEN];
    hash_of(body, h);
    resil_store_tx tx = {.sqlite = db};
    return resil_store_begin_in(f->s, &tx, k, h, &f->res, err);
}

static int complete_in(fixture *f, sqlite3 *db, uint64_t lease, const void *body,
                       size_t body_len, resil_err *err)
{
    resil_store_tx tx = {.sqlite = db};
    resil_store_response r = {.status = 201, .body = body, .body_len = body_len};
    return resil_store_complete_in(f->s, &tx, &K1, lease, &r, err);
}

static void the_key_commits_with_the_business_write(void **state)
{
    fixture *f = *state;
    sqlite3 *db = app_open(f);
    app_exec(db, "BEGIN IMMEDIATE");
    assert_int_equal(begin_in(f, db, &K1, "a", NULL), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    app_exec(db, "INSERT INTO orders (qty) VALUES (1)");
    assert_int_equal(complete_in(f, db, f->res.lease, "order 1", 7, NULL), 0);
    app_exec(db, "COMMIT");
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_memory_equal(f->res.body, "order 1", 7);
    assert_int_equal(count(db, "SELECT count(*) FROM orders"), 1);
    sqlite3_close(db);
}

static void a_rollback_leaves_neither_the_key_nor_the_business_row(void **state)
{
    fixture *f = *state;
    sqlite3 *db = app_open(f);
    app_exec(db, "BEGIN IMMEDIATE");
    assert_int_equal(begin_in(f, db, &K1, "a", NULL), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
    app_exec(db, "INSERT INTO orders (qty) VALUES (1)");
    assert_int_equal(complete_in(f, db, f->res.lease, "order 1", 7, NULL), 0);
    app_exec(db, "ROLLBACK");
    assert_int_equal(count(db, "SELECT count(*) FROM orders"), 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    sqlite3_close(db);
}

static void the_verdicts_in_a_transaction_are_those_of_begin(void **state)
{
    fixture *f = *state;
    sqlite3 *db = app_open(f);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST); /* held elsewhere */
    resil_fake_clock_advance(f->fc, RESIL_S(4));
    app_exec(db, "BEGIN IMMEDIATE");
    assert_int_equal(begin_in(f, db, &K1, "a", NULL), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(6));
    assert_int_equal(begin_in(f, db, &K1, "b", NULL), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_MISMATCH);
    resil_fake_clock_advance(f->fc, RESIL_S(6));
    assert_int_equal(begin_in(f, db, &K1, "a", NULL), 0); /* the lease ran out */
    assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_at(CASE_WALL0) + 1);
    resil_err err = {0};
    assert_int_equal(complete_in(f, db, first_lease_at(CASE_WALL0), "late", 4, &err),
                     RESIL_ESTATE);
    assert_lease_lost(&err, first_lease_at(CASE_WALL0), "k-1");
    assert_int_equal(complete_in(f, db, f->res.lease, "mine", 4, NULL), 0);
    app_exec(db, "COMMIT");
    app_exec(db, "BEGIN IMMEDIATE");
    assert_int_equal(begin_in(f, db, &K1, "a", NULL), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_REPLAY);
    assert_memory_equal(f->res.body, "mine", 4);
    app_exec(db, "ROLLBACK");
    sqlite3_close(db);
}

static void a_connection_outside_a_transaction_is_refused(void **state)
{
    fixture *f = *state;
    sqlite3 *db = app_open(f);
    resil_err err = {0};
    assert_int_equal(begin_in(f, db, &K1, "a", &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the tx connection must be inside an open "
                                     "transaction (BEGIN IMMEDIATE first)");
    assert_int_equal(f->res.verdict, RESIL_STORE_NONE);
    assert_int_equal(complete_in(f, db, 1, "x", 1, &err), RESIL_EINVAL);
    sqlite3_close(db);
}

static void the_field_for_another_backend_is_refused(void **state)
{
    fixture *f = *state;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_tx tx = {.postgres = (struct pg_conn *)f};
    resil_err err = {0};
    assert_int_equal(resil_store_begin_in(f->s, &tx, &K1, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: tx.sqlite is required for a sqlite store");
    assert_int_equal(resil_store_begin_in(f->s, NULL, &K1, h, &f->res, &err), RESIL_EINVAL);
}

/* A deferred BEGIN that cannot get the write lock: BUSY at once, for the
 * application to roll back and retry, never retried inside its
 * transaction. */
static void a_locked_database_is_ebusy_at_once_in_the_callers_transaction(void **state)
{
    fixture *f = *state;
    sqlite3 *db = app_open(f);
    sqlite3 *other = app_open(f);
    app_exec(other, "BEGIN IMMEDIATE");
    app_exec(db, "BEGIN");
    resil_err err = {0};
    assert_int_equal(begin_in(f, db, &K1, "a", &err), RESIL_EBUSY);
    assert_string_equal(err.message, "store: sqlite: database is locked (database is locked, "
                                     "in the caller's transaction: roll it back and run it "
                                     "again)");
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    app_exec(db, "ROLLBACK");
    app_exec(other, "ROLLBACK");
    sqlite3_close(other);
    sqlite3_close(db);
}

/* max_page_count caps the application's connection at the pages it has:
 * a full database, which the store reports as unavailable, not as the
 * request's fault. */
static void a_full_database_is_ebusy_in_the_callers_transaction(void **state)
{
    fixture *f = *state;
    sqlite3 *db = app_open(f);
    app_exec(db, "BEGIN IMMEDIATE");
    assert_int_equal(begin_in(f, db, &K1, "a", NULL), 0);
    int pages = count(db, "PRAGMA page_count");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %d", pages);
    app_exec(db, sql);
    static char big[64 * 1024];
    memset(big, 'x', sizeof big);
    resil_err err = {0};
    assert_int_equal(complete_in(f, db, f->res.lease, big, sizeof big, &err), RESIL_EBUSY);
    assert_non_null(strstr(err.message, "database or disk is full"));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
}

#define TX_CASE(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)

int main(void)
{
    dir = test_tmpdir();
    if (dir == NULL)
        return 1;
    store_cases_url = sqlite_url;
    const struct CMUnitTest tests[] = {
        TX_CASE(the_key_commits_with_the_business_write),
        TX_CASE(a_rollback_leaves_neither_the_key_nor_the_business_row),
        TX_CASE(the_verdicts_in_a_transaction_are_those_of_begin),
        TX_CASE(a_connection_outside_a_transaction_is_refused),
        TX_CASE(the_field_for_another_backend_is_refused),
        TX_CASE(a_locked_database_is_ebusy_at_once_in_the_callers_transaction),
        TX_CASE(a_full_database_is_ebusy_in_the_callers_transaction),
    };
    int failed = cmocka_run_group_tests_name("store.tx", tests, NULL, NULL);
    test_rmtree(dir);
    free(dir);
    return failed;
}
