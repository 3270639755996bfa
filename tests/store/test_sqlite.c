/*
 * test_sqlite.c — the store on SQLite: the shared specification
 * (store_cases.c) on a fresh file per case, then what is SQLite's own:
 * WAL mode, processes racing on one file, SQLITE_BUSY from a second
 * connection retried as a whole transaction (at open too), and the files
 * a deployment may hand it, each refused at open in its class: paths
 * that cannot be a database, other bytes, a truncated file, a file or a
 * directory it may not write (as root too: the test puts its override
 * aside), a table of its name whose columns or unique keys are not the
 * store's; a body past SQLite's own length limit; a claim that outlives
 * its store.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_cases.h"

static char *dir;
static int files;

static void sqlite_url(char *buf, size_t cap)
{
    snprintf(buf, cap, "sqlite:%s/store-%d.db", dir, files++);
}

static const char *path_of(const fixture *f) { return f->url + strlen("sqlite:"); }

/* ---- WAL and the file ------------------------------------------------------ */

static void the_file_is_in_wal_mode_with_the_named_table(void **state)
{
    fixture *f = *state;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", f->table);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void in_progress_record_has_a_null_status_in_the_table(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT status IS NULL, length(request_hash), created_at, lease_expires_at,"
             " lease FROM %s WHERE idempotency_key = 'k-1'",
             f->table);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    assert_int_equal(sqlite3_column_int(st, 1), 32);
    assert_int_equal(sqlite3_column_int64(st, 2), CASE_WALL0 / 1000000);
    assert_int_equal(sqlite3_column_int64(st, 3), CASE_WALL0 / 1000000 + 10000);
    assert_int_equal(sqlite3_column_int64(st, 4), (int64_t)first_lease_at(CASE_WALL0));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void use_clock(resil_store_opts *o, void *ud) { o->clock = ud; }

static uint64_t first_lease_on_a_clock_at(fixture *f, int64_t wall)
{
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, wall, &fc), 0);
    resil_store *s = fixture_open(f, use_clock, resil_fake_clock_clock(fc));
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_store_free(s);
    resil_fake_clock_free(fc);
    return f->res.lease;
}

/* Before 1970 there are no milliseconds to number from: lease 1. */
static void a_clock_before_1970_gives_the_first_lease_number_1(void **state)
{
    assert_int_equal(first_lease_on_a_clock_at(*state, -RESIL_S(1)), 1);
}

/* From 2^43 ms on (the year 2248) the first number is held where it and
 * 2^20 - 1 takeovers still fit the signed 64-bit column. */
static void a_clock_past_2248_holds_the_first_lease_below_int64_max(void **state)
{
    int64_t wall = RESIL_MS(INT64_C(1) << 43);
    assert_int_equal(first_lease_on_a_clock_at(*state, wall),
                     (((UINT64_C(1) << 43) - 2) << 20) + 1);
}

static void memory_database_works_with_one_connection(void **state)
{
    (void)state;
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = "sqlite::memory:";
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k = {.key = "k"};
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(resil_store_begin(s, &k, h, &res, NULL), 0);
    assert_int_equal(res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(resil_store_begin(s, &k, h, &res, NULL), 0);
    assert_int_equal(res.verdict, RESIL_STORE_IN_PROGRESS);
    resil_store_result_free(&res);
    assert_string_equal(resil_store_backend(s), "sqlite");
    resil_store_free(s);
}

static void unopenable_file_is_a_backend_error_without_retries(void **state)
{
    fixture *f = *state;
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = "sqlite:/nonexistent-dir/x/store.db";
    o.clock = f->clock;
    resil_store *s = (resil_store *)&o;
    resil_err err = {0};
    assert_int_equal(resil_store_new(&o, &s, &err), RESIL_EBACKEND);
    assert_null(s);
    assert_non_null(strstr(err.message, "store: sqlite: unable to open database file"));
    assert_non_null(strstr(err.message, "not retryable after 1 attempt)"));
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

/* Open a store on `url` (the fixture's clock and table): its error. */
static int open_url(fixture *f, const char *url, resil_err *err)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = url;
    o.table = f->table;
    o.clock = f->clock;
    resil_store *s = (resil_store *)&o;
    int rc = resil_store_new(&o, &s, err);
    resil_store_free(s);
    assert_null(s);
    return rc;
}

/* A directory, a path through a regular file, a path longer than SQLite
 * takes: none can become the database, whatever a retry does. */
static void paths_that_cannot_be_a_database_file_are_ebackend_at_open(void **state)
{
    fixture *f = *state;
    char urls[3][5000];
    snprintf(urls[0], sizeof urls[0], "sqlite:%s", dir);
    snprintf(urls[1], sizeof urls[1], "sqlite:%s/store.db", path_of(f));
    int n = snprintf(urls[2], sizeof urls[2], "sqlite:%s/", dir);
    memset(urls[2] + n, 'a', 4096);
    urls[2][n + 4096] = '\0';
    for (int i = 0; i < 3; i++) {
        resil_err err = {0};
        assert_int_equal(open_url(f, urls[i], &err), RESIL_EBACKEND);
        assert_string_equal(err.message, "store: sqlite: unable to open database file (unable "
                                         "to open database file, not retryable after 1 "
                                         "attempt)");
    }
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

/* Write `len` bytes of a pattern over the file. */
static void overwrite(const char *path, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    for (size_t i = 0; i < len; i++)
        fputc((int)(i * 7 % 251), fp);
    assert_int_equal(fclose(fp), 0);
}

static void a_file_of_other_bytes_is_ebackend_at_open_as_not_a_database(void **state)
{
    fixture *f = *state;
    resil_store_free(f->s);
    f->s = NULL;
    overwrite(path_of(f), 8192);
    resil_err err = {0};
    assert_int_equal(open_url(f, f->url, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: file is not a database (file is not a "
                                     "database, not retryable after 1 attempt)");
}

/* The store's file cut short, as a copy that stopped half way leaves it. */
static void a_truncated_database_is_ebackend_at_open_as_malformed(void **state)
{
    fixture *f = *state;
    resil_store_free(f->s);
    f->s = NULL;
    assert_int_equal(truncate(path_of(f), 5000), 0);
    resil_err err = {0};
    assert_int_equal(open_url(f, f->url, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: database disk image is malformed "
                                     "(database disk image is malformed, not retryable after 1 "
                                     "attempt)");
}

/* A claim's record outlives its store: another store answers it in
 * progress for the rest of its lease, then takes it over, and the first
 * run's lease no longer completes it. */
static void a_claim_outstanding_when_its_store_is_freed_keeps_its_key_for_its_lease(
    void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    resil_store_free(f->s);
    f->s = fixture_open(f, NULL, NULL);
    resil_fake_clock_advance(f->fc, RESIL_S(4));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(6));
    resil_fake_clock_advance(f->fc, RESIL_S(6));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_true(f->res.taken_over);
    assert_int_equal(f->res.lease, lease + 1);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_store_response r = {.status = 201};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(f->s, &k, lease, &r, &err), RESIL_ESTATE);
    assert_lease_lost(&err, lease, "k-1");
}

/* ---- SQLITE_BUSY: the whole transaction is retried -------------------------- */

typedef struct holder {
    sqlite3 *db;
    int retries;
    char cause[64];
    int64_t cause_code;
} holder;

static sqlite3 *hold_write_lock(const char *path)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    return db;
}

/* The fake clock's sleep hook runs during the retry wait: let go there. */
static void release_lock_during_wait(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    holder *h = ud;
    if (h->db != NULL) {
        sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(h->db);
        h->db = NULL;
    }
}

static void count_retry(const resil_retry_info *info, void *user, void *ud)
{
    (void)user;
    holder *h = ud;
    h->retries++;
    snprintf(h->cause, sizeof h->cause, "%s", info->cause->detail);
    h->cause_code = info->cause->code;
}

static void no_busy_wait(resil_store_opts *o, void *ud)
{
    o->busy_timeout = 0;
    o->retry.on_retry = count_retry;
    o->retry.on_retry_ud = ud;
    o->retry.max_attempts = 3;
}

static void busy_database_is_retried_as_a_whole_transaction(void **state)
{
    fixture *f = *state;
    holder h = {0};
    resil_store *s = fixture_open(f, no_busy_wait, &h);
    h.db = hold_write_lock(path_of(f));
    resil_fake_clock_set_hook(f->fc, release_lock_during_wait, &h);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(h.retries, 1);
    assert_string_equal(h.cause, "database is locked");
    assert_int_equal(h.cause_code, SQLITE_BUSY);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 1);
    /* Nothing of the failed attempt survived: one record, its first lease. */
    assert_int_equal(f->res.lease, first_lease_now(f));
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    resil_fake_clock_set_hook(f->fc, NULL, NULL);
    resil_store_free(s);
}

static void busy_beyond_the_policy_is_ebusy_naming_the_attempts(void **state)
{
    fixture *f = *state;
    holder h = {0};
    resil_store *s = fixture_open(f, no_busy_wait, &h);
    sqlite3 *lock = hold_write_lock(path_of(f));
    uint8_t hash[RESIL_SHA256_LEN];
    hash_of("a", hash);
    resil_store_key k = {.key = "k-1"};
    resil_err err = {0};
    assert_int_equal(resil_store_begin(s, &k, hash, &f->res, &err), RESIL_EBUSY);
    assert_int_equal(f->res.verdict, RESIL_STORE_NONE);
    assert_string_equal(err.message, "store: sqlite: database is locked (database is locked, "
                                     "attempts exhausted after 3 attempts)");
    assert_int_equal(h.retries, 2);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 2);
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
    assert_int_equal(resil_store_begin(s, &k, hash, &f->res, &err), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
    resil_store_free(s);
}

static void busy_complete_is_retried_too(void **state)
{
    fixture *f = *state;
    holder h = {0};
    resil_store *s = fixture_open(f, no_busy_wait, &h);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    h.db = hold_write_lock(path_of(f));
    resil_fake_clock_set_hook(f->fc, release_lock_during_wait, &h);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_store_response r = {.status = 201, .body = "ok", .body_len = 2};
    assert_int_equal(resil_store_complete(s, &k, lease, &r, NULL), 0);
    assert_int_equal(h.retries, 1);
    resil_fake_clock_set_hook(f->fc, NULL, NULL);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    resil_store_free(s);
}

/* A file another program holds in an exclusive lock (not yet in WAL mode,
 * so switching it needs the lock): the open is unavailable, retried under
 * the policy, then RESIL_EBUSY, as a PostgreSQL server that is not there
 * yet; it opens once the lock goes. */
static void a_database_locked_at_open_is_ebusy_after_the_retries(void **state)
{
    fixture *f = *state;
    holder h = {0};
    char path[600];
    snprintf(path, sizeof path, "%.400s/locked-%d.db", dir, files++);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE other (a); BEGIN EXCLUSIVE;"
                                      " INSERT INTO other VALUES (1)", NULL, NULL, NULL),
                     SQLITE_OK);
    snprintf(f->url, sizeof f->url, "sqlite:%.480s", path);
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = f->url;
    o.table = f->table;
    o.clock = f->clock;
    no_busy_wait(&o, &h);
    resil_store *s = (resil_store *)&o;
    resil_err err = {0};
    assert_int_equal(resil_store_new(&o, &s, &err), RESIL_EBUSY);
    assert_null(s);
    assert_string_equal(err.message, "store: sqlite: database is locked (database is locked, "
                                     "attempts exhausted after 3 attempts)");
    assert_int_equal(h.retries, 2);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(resil_store_new(&o, &s, &err), 0);
    resil_store_free(s);
}

/* ---- error classes ----------------------------------------------------------- */

static void exec_on_file(const fixture *f, const char *tmpl)
{
    char sql[600];
    snprintf(sql, sizeof sql, tmpl, f->table, f->table);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK)
        fail_msg("%s: %s", sql, error);
    sqlite3_close(db);
}

static void a_constraint_the_database_enforces_is_ebackend_without_retries(void **state)
{
    fixture *f = *state;
    holder h = {0};
    resil_store *s = fixture_open(f, no_busy_wait, &h);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    exec_on_file(f, "CREATE TRIGGER no_teapots_%s BEFORE UPDATE ON %s WHEN NEW.status = 418"
                    " BEGIN SELECT RAISE(ABORT, 'no teapots'); END");
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_store_response r = {.status = 418};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(s, &k, f->res.lease, &r, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: no teapots (constraint failed, "
                                     "not retryable after 1 attempt)");
    assert_int_equal(h.retries, 0);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
    resil_store_free(s);
}

static void a_table_dropped_under_the_store_is_ebackend_without_retries(void **state)
{
    fixture *f = *state;
    holder h = {0};
    resil_store *s = fixture_open(f, no_busy_wait, &h);
    exec_on_file(f, "DROP INDEX %s_created_at; DROP TABLE %s");
    uint8_t hash[RESIL_SHA256_LEN];
    hash_of("a", hash);
    resil_store_key k = {.key = "k-1"};
    resil_err err = {0};
    assert_int_equal(resil_store_begin(s, &k, hash, &f->res, &err), RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "no such table"));
    assert_non_null(strstr(err.message, "not retryable after 1 attempt)"));
    assert_int_equal(h.retries, 0);
    resil_store_free(s);
}

/* RLIMIT_FSIZE 0 makes every write to a file fail (EFBIG), as a dead or
 * full disk would, without root: the database cannot serve, which is
 * RESIL_EBUSY, reported at once rather than retried for nothing. */
static void a_disk_that_refuses_writes_is_ebusy_without_retries(void **state)
{
    fixture *f = *state;
    holder h = {0};
    resil_store *s = fixture_open(f, no_busy_wait, &h);
    uint8_t hash[RESIL_SHA256_LEN];
    hash_of("a", hash);
    resil_store_key k = {.key = "k-1"};
    resil_err err = {0};
    file_writes_held was = file_writes_refuse();
    int rc = resil_store_begin(s, &k, hash, &f->res, &err);
    file_writes_release(&was);
    assert_int_equal(rc, RESIL_EBUSY);
    assert_string_equal(err.message, "store: sqlite: disk I/O error (disk I/O error, "
                                     "not retryable after 1 attempt)");
    assert_int_equal(h.retries, 0);
    assert_int_equal(resil_store_begin(s, &k, hash, &f->res, &err), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
    resil_store_free(s);
}

/* ---- files the store cannot write ------------------------------------------ */

/* Open a store on the fixture's file and table as a user the modes hold
 * to; its error, and no store. */
static int open_bound_by_modes(fixture *f, resil_err *err)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = f->url;
    o.table = f->table;
    o.clock = f->clock;
    resil_store *s = (resil_store *)&o;
    file_modes_held was = file_modes_hold();
    int rc = resil_store_new(&o, &s, err);
    file_modes_release(&was);
    resil_store_free(s);
    assert_null(s);
    return rc;
}

/* SQLite opens a file it may not write read-only, without a word: the
 * store would open and then fail every begin. It says so at open. */
static void a_database_file_that_cannot_be_written_is_refused_at_open(void **state)
{
    fixture *f = *state;
    resil_store_free(f->s); /* its connections leave no -wal, -shm behind */
    f->s = NULL;
    assert_int_equal(chmod(path_of(f), 0444), 0);
    resil_err err = {0};
    assert_int_equal(open_bound_by_modes(f, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: the database file cannot be written "
                                     "(attempt to write a readonly database, not retryable "
                                     "after 1 attempt)");
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

/* WAL needs a -wal and a -shm file beside the database: a directory that
 * takes no new file refuses them, though the file itself may be written. */
static void a_directory_that_cannot_take_the_wal_file_is_refused_at_open(void **state)
{
    fixture *f = *state;
    char sub[400];
    snprintf(sub, sizeof sub, "%.300s/walless-%d", dir, files++);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(f->url, sizeof f->url, "sqlite:%s/store.db", sub);
    resil_store_free(fixture_open(f, NULL, NULL)); /* the file and its table */
    assert_int_equal(chmod(sub, 0555), 0);
    resil_err err = {0};
    int rc = open_bound_by_modes(f, &err);
    assert_int_equal(chmod(sub, 0755), 0);
    assert_int_equal(rc, RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: attempt to write a readonly database "
                                     "(attempt to write a readonly database, not retryable "
                                     "after 1 attempt)");
}

/* ---- a table by the store's name, of another layout -------------------------- */

#define LAYOUT_COLUMNS                                                                     \
    "tenant TEXT NOT NULL, operation TEXT NOT NULL, idempotency_key TEXT NOT NULL,"        \
    " request_hash BLOB NOT NULL, status INTEGER, headers BLOB, body BLOB,"              \
    " created_at INTEGER NOT NULL, lease_expires_at INTEGER NOT NULL"

/* Make table `name` in the fixture's file with `sql` (one %s: the name),
 * then open a store on it: its error, and no store. */
static int open_on_table(fixture *f, const char *name, const char *sql, resil_err *err)
{
    char text[1200];
    snprintf(text, sizeof text, sql, name, name);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    char *error = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &error) != SQLITE_OK)
        fail_msg("%s: %s", text, error);
    sqlite3_close(db);
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = f->url;
    o.table = name;
    o.clock = f->clock;
    resil_store *s = (resil_store *)&o;
    int rc = resil_store_new(&o, &s, err);
    assert_null(s);
    return rc;
}

/* As on PostgreSQL: the column is named, and nothing is retried. */
static void a_table_without_the_lease_column_is_refused_at_open_naming_it(void **state)
{
    fixture *f = *state;
    resil_err err = {0};
    assert_int_equal(open_on_table(f, "old_layout",
                                   "CREATE TABLE %s (" LAYOUT_COLUMNS ","
                                   " PRIMARY KEY (tenant, operation, idempotency_key))",
                                   &err),
                     RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: table old_layout has no column named "
                                     "lease (SQL logic error, not retryable after 1 attempt)");
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), 0);
}

/* The insert's ON CONFLICT is the whole of "the first writer wins": on a
 * table without the key's unique constraint every begin would be first. */
static void a_table_without_a_unique_key_is_refused_at_open(void **state)
{
    fixture *f = *state;
    resil_err err = {0};
    assert_int_equal(open_on_table(f, "no_key",
                                   "CREATE TABLE %s (" LAYOUT_COLUMNS ", lease INTEGER NOT NULL);"
                                   "CREATE INDEX %s_created_at ON no_key (created_at)",
                                   &err),
                     RESIL_EBACKEND);
    assert_string_equal(err.message,
                        "store: sqlite: table no_key has no unique key on (tenant, operation, "
                        "idempotency_key) (SQL logic error, not retryable after 1 attempt)");
}

/* A unique key on the key alone would make two tenants' keys collide. */
static void a_table_whose_unique_key_is_not_the_three_key_columns_is_refused(void **state)
{
    fixture *f = *state;
    resil_err err = {0};
    assert_int_equal(open_on_table(f, "key_only",
                                   "CREATE TABLE %s (" LAYOUT_COLUMNS ", lease INTEGER NOT NULL,"
                                   " UNIQUE (idempotency_key));"
                                   "CREATE INDEX %s_created_at ON key_only (created_at)",
                                   &err),
                     RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "has no unique key on (tenant, operation, "
                                        "idempotency_key)"));
}

/* A key compared without case would answer one key with another's record. */
static void a_unique_key_that_ignores_case_is_refused(void **state)
{
    fixture *f = *state;
    resil_err err = {0};
    assert_int_equal(open_on_table(f, "nocase",
                                   "CREATE TABLE %s (" LAYOUT_COLUMNS ", lease INTEGER NOT NULL,"
                                   " PRIMARY KEY (tenant, operation,"
                                   " idempotency_key COLLATE NOCASE));"
                                   "CREATE INDEX %s_created_at ON nocase (created_at)",
                                   &err),
                     RESIL_EBACKEND);
    assert_non_null(strstr(err.message, "has no unique key on (tenant, operation, "
                                        "idempotency_key)"));
}

/* Beside the right key, a unique key on fewer columns: two tenants' keys
 * would collide on it, and the claim would find neither record. */
static void a_second_unique_key_on_fewer_columns_is_refused(void **state)
{
    fixture *f = *state;
    resil_err err = {0};
    assert_int_equal(open_on_table(f, "two_keys",
                                   "CREATE TABLE %s (" LAYOUT_COLUMNS ", lease INTEGER NOT NULL,"
                                   " PRIMARY KEY (tenant, operation, idempotency_key),"
                                   " UNIQUE (idempotency_key));"
                                   "CREATE INDEX %s_created_at ON two_keys (created_at)",
                                   &err),
                     RESIL_EBACKEND);
    assert_string_equal(err.message,
                        "store: sqlite: table two_keys has a unique key without all of "
                        "(tenant, operation, idempotency_key) (SQL logic error, not retryable "
                        "after 1 attempt)");
}

/* The key's columns in another order are the same constraint. */
static void a_table_made_by_hand_with_the_key_in_another_order_serves(void **state)
{
    fixture *f = *state;
    char sql[800];
    snprintf(sql, sizeof sql,
             "CREATE TABLE hand_made (" LAYOUT_COLUMNS ", lease INTEGER NOT NULL,"
             " PRIMARY KEY (idempotency_key, operation, tenant));"
             "CREATE INDEX hand_made_created_at ON hand_made (created_at)");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    snprintf(f->table, sizeof f->table, "hand_made");
    resil_store *s = fixture_open(f, NULL, NULL);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    resil_store_free(s);
}

/* SQLite's own bound on a value, SQLITE_LIMIT_LENGTH (10^9 bytes unless
 * built otherwise), is below the store's 1 GiB: a body past it is
 * refused by SQLite when it is bound, before a byte of it is read. That
 * refusal is the store's to report, not to skip: the record must not be
 * completed with no body at all. */
static int sqlite_length_limit(void)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    int limit = sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1);
    sqlite3_close(db);
    return limit;
}

static void no_cache(resil_store_opts *o, void *ud)
{
    (void)ud;
    o->cache_bytes = 0;
}

static void a_body_past_sqlites_length_limit_is_ebackend_and_the_key_stays_claimed(void **state)
{
    fixture *f = *state;
    resil_store *s = fixture_open(f, no_cache, NULL);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    size_t len = (size_t)sqlite_length_limit() + 1;
    void *big = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(big != MAP_FAILED);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    resil_store_response r = {.status = 201, .body = big, .body_len = len};
    resil_err err = {0};
    int rc = resil_store_complete(s, &k, lease, &r, &err);
    munmap(big, len);
    assert_int_equal(rc, RESIL_EBACKEND);
    assert_string_equal(err.message, "store: sqlite: string or blob too big (string or blob "
                                     "too big, not retryable after 1 attempt)");
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    r = (resil_store_response){.status = 201, .body = "ok", .body_len = 2};
    assert_int_equal(resil_store_complete(s, &k, lease, &r, &err), 0);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.body_len, 2);
    resil_store_free(s);
}

/* ---- processes ------------------------------------------------------------ */

#define PROCESSES 4

/* Each child opens its own store on the file and begins once; its exit
 * status is the verdict (or 100 + error). */
static int child_begin(const char *url, const char *table)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = url;
    o.table = table;
    o.lease = RESIL_S(10);
    resil_store *s;
    if (resil_store_new(&o, &s, NULL) != 0)
        return 100;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("same", h);
    resil_store_key k = {.key = "k-proc"};
    resil_store_result res;
    resil_store_result_init(&res);
    int rc = resil_store_begin(s, &k, h, &res, NULL);
    int verdict = rc == 0 ? (int)res.verdict : 101;
    resil_store_result_free(&res);
    resil_store_free(s);
    return verdict;
}

static void racing_processes_get_exactly_one_first(void **state)
{
    fixture *f = *state;
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pids[PROCESSES];
    for (int i = 0; i < PROCESSES; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            char b;
            close(go[1]);
            /* Start together: all block until the parent closes the pipe. */
            while (read(go[0], &b, 1) > 0)
                ;
            _exit(child_begin(f->url, f->table));
        }
    }
    close(go[0]);
    close(go[1]);
    int first = 0, in_progress = 0;
    for (int i = 0; i < PROCESSES; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        first += WEXITSTATUS(status) == RESIL_STORE_FIRST;
        in_progress += WEXITSTATUS(status) == RESIL_STORE_IN_PROGRESS;
    }
    assert_int_equal(first, 1);
    assert_int_equal(in_progress, PROCESSES - 1);
}

#define SQLITE_CASE(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)

int main(void)
{
    dir = test_tmpdir();
    if (dir == NULL)
        return 1;
    store_cases_url = sqlite_url;
    const struct CMUnitTest own[] = {
        SQLITE_CASE(the_file_is_in_wal_mode_with_the_named_table),
        SQLITE_CASE(in_progress_record_has_a_null_status_in_the_table),
        SQLITE_CASE(a_clock_before_1970_gives_the_first_lease_number_1),
        SQLITE_CASE(a_clock_past_2248_holds_the_first_lease_below_int64_max),
        cmocka_unit_test(memory_database_works_with_one_connection),
        SQLITE_CASE(unopenable_file_is_a_backend_error_without_retries),
        SQLITE_CASE(paths_that_cannot_be_a_database_file_are_ebackend_at_open),
        SQLITE_CASE(a_file_of_other_bytes_is_ebackend_at_open_as_not_a_database),
        SQLITE_CASE(a_truncated_database_is_ebackend_at_open_as_malformed),
        SQLITE_CASE(a_claim_outstanding_when_its_store_is_freed_keeps_its_key_for_its_lease),
        SQLITE_CASE(busy_database_is_retried_as_a_whole_transaction),
        SQLITE_CASE(busy_beyond_the_policy_is_ebusy_naming_the_attempts),
        SQLITE_CASE(busy_complete_is_retried_too),
        SQLITE_CASE(a_database_locked_at_open_is_ebusy_after_the_retries),
        SQLITE_CASE(a_constraint_the_database_enforces_is_ebackend_without_retries),
        SQLITE_CASE(a_table_dropped_under_the_store_is_ebackend_without_retries),
        SQLITE_CASE(a_disk_that_refuses_writes_is_ebusy_without_retries),
        SQLITE_CASE(a_database_file_that_cannot_be_written_is_refused_at_open),
        SQLITE_CASE(a_directory_that_cannot_take_the_wal_file_is_refused_at_open),
        SQLITE_CASE(a_table_without_the_lease_column_is_refused_at_open_naming_it),
        SQLITE_CASE(a_table_without_a_unique_key_is_refused_at_open),
        SQLITE_CASE(a_table_whose_unique_key_is_not_the_three_key_columns_is_refused),
        SQLITE_CASE(a_unique_key_that_ignores_case_is_refused),
        SQLITE_CASE(a_second_unique_key_on_fewer_columns_is_refused),
        SQLITE_CASE(a_table_made_by_hand_with_the_key_in_another_order_serves),
        SQLITE_CASE(a_body_past_sqlites_length_limit_is_ebackend_and_the_key_stays_claimed),
        SQLITE_CASE(racing_processes_get_exactly_one_first),
    };
    int failed = store_cases_run("store.sqlite", own, sizeof own / sizeof own[0]);
    test_rmtree(dir);
    free(dir);
    return failed;
}
