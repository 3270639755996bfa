/*
 * test_options.c — the store's options (defaults, every invalid value
 * refused by name), its URL rule, the 1 GiB bound of a saved response
 * (refused before a byte of it is read), the public transient-error
 * classifiers and the verdict names. Nothing here needs a database server.
 */
#include <sys/mman.h>

#include "test.h"

#include "resil/store.h"

static char *dir;

static void sqlite_opts(resil_store_opts *o, char *url, size_t cap)
{
    snprintf(url, cap, "sqlite:%s/opts.db", dir);
    resil_store_opts_default(o);
    o->url = url;
}

static void expect_refused(const resil_store_opts *o, const char *message)
{
    resil_store *s = (resil_store *)o; /* must be reset to NULL */
    resil_err err = {0};
    assert_int_equal(resil_store_new(o, &s, &err), RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_null(s);
    assert_string_equal(err.message, message);
}

static void defaults_are_the_documented_ones(void **state)
{
    (void)state;
    resil_store_opts o;
    resil_store_opts_default(&o);
    assert_null(o.url);
    assert_string_equal(o.table, "resil_idempotency");
    assert_duration_equal(o.lease, RESIL_S(60));
    assert_duration_equal(o.retention, RESIL_S(86400));
    assert_int_equal(o.connections, 4);
    assert_duration_equal(o.busy_timeout, RESIL_MS(100));
    assert_int_equal(o.retry.max_attempts, 8);
    assert_int_equal(o.retry.backoff.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_duration_equal(o.retry.backoff.base, RESIL_MS(5));
    assert_int_equal(o.retry.backoff.jitter, RESIL_JITTER_FULL);
    assert_duration_equal(o.retry.backoff.max_delay, RESIL_MS(250));
    assert_null(o.clock);
    assert_int_equal(o.batch_max, 64);
    assert_duration_equal(o.batch_window, 0);
    assert_int_equal(o.sqlite_sync, RESIL_STORE_SYNC_FULL);
}

static void url_is_required(void **state)
{
    (void)state;
    resil_store_opts o;
    resil_store_opts_default(&o);
    expect_refused(&o, "store.url is required (sqlite:PATH or postgres://...)");
    o.url = "";
    expect_refused(&o, "store.url is required (sqlite:PATH or postgres://...)");
}

static void unknown_scheme_is_refused_without_echoing_the_rest(void **state)
{
    (void)state;
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = "mysql://admin:secret@db/orders";
    expect_refused(&o, "store.url must be sqlite:PATH or postgres://..., got scheme 'mysql'");
    o.url = "/var/lib/orders.db";
    expect_refused(&o, "store.url must be sqlite:PATH or postgres://..., got scheme "
                       "'/var/lib/orders.db'");
    o.url = "postgres:/one-slash";
    expect_refused(&o, "store.url must be sqlite:PATH or postgres://..., got scheme 'postgres'");
}

static void sqlite_url_needs_a_path(void **state)
{
    (void)state;
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = "sqlite:";
    expect_refused(&o, "store.url 'sqlite:' needs a file path");
}

static void table_must_be_a_short_identifier(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    const char *bad[] = {"", "1abc", "drop table", "a-b", "t;", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char expected[200];
        o.table = bad[i];
        snprintf(expected, sizeof expected,
                 "store.table must be an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 48 "
                 "characters), got '%s'",
                 bad[i] ? bad[i] : "(null)");
        expect_refused(&o, expected);
    }
    char longest[49];
    memset(longest, 't', 48);
    longest[48] = '\0';
    o.table = longest;
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
    char too_long[50];
    memset(too_long, 't', 49);
    too_long[49] = '\0';
    o.table = too_long;
    assert_int_equal(resil_store_new(&o, &s, NULL), RESIL_EINVAL);
}

static void lease_must_be_at_least_a_millisecond(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.lease = 0;
    expect_refused(&o, "store.lease must be >= 1ms, got 0s");
    o.lease = RESIL_US(999);
    expect_refused(&o, "store.lease must be >= 1ms, got 999us");
    o.lease = -RESIL_S(1);
    expect_refused(&o, "store.lease must be >= 1ms, got -1s");
    o.lease = RESIL_MS(1);
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
}

static void retention_must_cover_the_lease(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.lease = RESIL_S(60);
    o.retention = RESIL_S(59);
    expect_refused(&o, "store.retention must be >= store.lease, got 59s");
    o.retention = RESIL_S(60);
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
}

static void connections_must_be_1_to_64(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.connections = 0;
    expect_refused(&o, "store.connections must be in [1,64], got 0");
    o.connections = 65;
    expect_refused(&o, "store.connections must be in [1,64], got 65");
    resil_store *s;
    o.connections = 64;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
    o.connections = 1;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
}

static void busy_timeout_must_be_0_to_60s(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.busy_timeout = -RESIL_MS(1);
    expect_refused(&o, "store.busy_timeout must be in [0, 60s], got -1ms");
    o.busy_timeout = RESIL_S(60) + 1;
    expect_refused(&o, "store.busy_timeout must be in [0, 60s], got 1m1ns");
    resil_store *s;
    o.busy_timeout = 0;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
}

static void batch_max_must_be_at_most_1024(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.batch_max = 1025;
    expect_refused(&o, "store.batch_max must be in [0,1024], got 1025");
    resil_store *s;
    o.batch_max = 1024;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
    o.batch_max = 0; /* zero, from a caller that never heard of it: no batching */
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_batch_stats st;
    resil_store_batch_stats_get(s, &st);
    assert_int_equal(st.batches, 0);
    resil_store_free(s);
}

static void batch_window_must_be_0_to_1s(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.batch_window = -1;
    expect_refused(&o, "store.batch_window must be in [0, 1s], got -1ns");
    o.batch_window = RESIL_S(1) + 1;
    expect_refused(&o, "store.batch_window must be in [0, 1s], got 1.000000001s");
    resil_store *s;
    o.batch_window = RESIL_S(1);
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
}

static void batch_window_needs_batching(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.batch_window = RESIL_MS(1);
    o.batch_max = 1;
    expect_refused(&o, "store.batch_window needs store.batch_max >= 2 (got 1): without "
                       "batching a window only adds latency");
}

static void sqlite_sync_is_full_or_normal_and_for_sqlite_only(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.sqlite_sync = 2;
    expect_refused(&o, "store.sqlite_sync must be RESIL_STORE_SYNC_FULL or "
                       "RESIL_STORE_SYNC_NORMAL, got 2");
    resil_store *s;
    o.sqlite_sync = RESIL_STORE_SYNC_NORMAL;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    resil_store_free(s);
    o.url = "postgres://127.0.0.1:1/none";
    expect_refused(&o, "store.sqlite_sync applies to sqlite: stores only");
}

static void journal_must_be_a_path_not_empty(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.journal = "";
    expect_refused(&o, "store.journal must be a file path or NULL, got \"\"");
}

static void a_journal_in_a_missing_directory_is_refused_naming_its_path(void **state)
{
    (void)state;
    char url[600], path[600], want[800];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    snprintf(path, sizeof path, "%s/missing/store.journal", dir);
    o.journal = path;
    resil_store *s = (resil_store *)&o;
    resil_err err = {0};
    assert_int_equal(resil_store_new(&o, &s, &err), RESIL_EIO);
    assert_null(s);
    snprintf(want, sizeof want, "store.journal '%s': open: No such file or directory", path);
    assert_string_equal(err.message, want);
}

static void retry_policy_errors_are_named_under_store(void **state)
{
    (void)state;
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    o.retry.max_attempts = 0;
    resil_err err = {0};
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, &err), RESIL_EINVAL);
    assert_non_null(strstr(err.message, "store.retry.max_attempts"));
}

static void null_arguments_are_refused(void **state)
{
    (void)state;
    resil_store *s;
    resil_err err = {0};
    assert_int_equal(resil_store_new(NULL, &s, &err), RESIL_EINVAL);
    resil_store_opts o;
    resil_store_opts_default(&o);
    assert_int_equal(resil_store_new(&o, NULL, &err), RESIL_EINVAL);
    resil_store_free(NULL);
    resil_store_result_free(NULL);
}

static void journal_replay_refuses_a_null_store(void **state)
{
    (void)state;
    size_t replayed = 7;
    resil_err err = {0};
    assert_int_equal(resil_store_journal_replay(NULL, &replayed, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: store is required");
    assert_int_equal(replayed, 0);
}

/* ---- the 1 GiB bound of a saved response ------------------------------------ */

#define ONE_GIB ((size_t)1 << 30)

/* 1 GiB and a byte of address space that may not be touched: a length over
 * the bound is refused before the store reads a byte of it. */
static void *untouchable(void)
{
    void *p = mmap(NULL, ONE_GIB + 1, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static resil_store *sqlite_store(void)
{
    char url[600];
    resil_store_opts o;
    sqlite_opts(&o, url, sizeof url);
    resil_store *s = NULL;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    return s;
}

static void a_body_over_1_gib_is_refused_before_it_is_read(void **state)
{
    (void)state;
    resil_store *s = sqlite_store();
    void *big = untouchable();
    resil_store_key k = {.key = "k-1"};
    resil_store_response r = {.status = 200, .body = big, .body_len = ONE_GIB + 1};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(s, &k, 1, &r, &err), RESIL_ERANGE);
    assert_string_equal(err.message, "store: response.body_len must be at most 1 GiB "
                                     "(1073741824), got 1073741825");
    munmap(big, ONE_GIB + 1);
    resil_store_free(s);
}

static void headers_over_1_gib_are_refused_before_they_are_read(void **state)
{
    (void)state;
    resil_store *s = sqlite_store();
    void *big = untouchable();
    resil_store_key k = {.key = "k-1"};
    resil_store_response r = {.status = 200, .headers = big, .headers_len = ONE_GIB + 1};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(s, &k, 1, &r, &err), RESIL_ERANGE);
    assert_string_equal(err.message, "store: response.headers_len must be at most 1 GiB "
                                     "(1073741824), got 1073741825");
    munmap(big, ONE_GIB + 1);
    resil_store_free(s);
}

/* ---- classifiers ------------------------------------------------------------- */

static void sqlite_busy_and_locked_are_transient_with_extended_codes(void **state)
{
    (void)state;
    assert_true(resil_store_sqlite_transient(5));         /* SQLITE_BUSY */
    assert_true(resil_store_sqlite_transient(6));         /* SQLITE_LOCKED */
    assert_true(resil_store_sqlite_transient(5 | 1 << 8)); /* BUSY_RECOVERY */
    assert_true(resil_store_sqlite_transient(5 | 2 << 8)); /* BUSY_SNAPSHOT */
    assert_true(resil_store_sqlite_transient(6 | 1 << 8)); /* LOCKED_SHAREDCACHE */
}

static void other_sqlite_codes_are_not_transient(void **state)
{
    (void)state;
    const int codes[] = {0, 1, 7, 10, 11, 13, 14, 19, 19 | 8 << 8, 100, 101};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_false(resil_store_sqlite_transient(codes[i]));
}

static void pg_serialization_deadlock_connection_shutdown_and_startup_are_transient(void **state)
{
    (void)state;
    const char *yes[] = {"40001", "40P01", "08000", "08003", "08006", "08001", "08004",
                         "08P01", "57P01", "57P02", "57P03", "53300"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true(resil_store_pg_transient(yes[i]));
}

static void other_sqlstates_are_not_transient(void **state)
{
    (void)state;
    const char *no[] = {"23505", "23514", "22021", "40002", "42P01", "42703", "57014",
                        "53100", "53200", "58030", "XX000", "", "0", "4000"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false(resil_store_pg_transient(no[i]));
    assert_false(resil_store_pg_transient(NULL));
}

static void verdicts_have_names(void **state)
{
    (void)state;
    assert_string_equal(resil_store_verdict_name(RESIL_STORE_NONE), "");
    assert_string_equal(resil_store_verdict_name(RESIL_STORE_FIRST), "first");
    assert_string_equal(resil_store_verdict_name(RESIL_STORE_REPLAY), "replay");
    assert_string_equal(resil_store_verdict_name(RESIL_STORE_IN_PROGRESS), "in progress");
    assert_string_equal(resil_store_verdict_name(RESIL_STORE_MISMATCH), "mismatch");
    assert_string_equal(resil_store_verdict_name((resil_store_verdict)99), "");
}

int main(void)
{
    dir = test_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_the_documented_ones),
        cmocka_unit_test(url_is_required),
        cmocka_unit_test(unknown_scheme_is_refused_without_echoing_the_rest),
        cmocka_unit_test(sqlite_url_needs_a_path),
        cmocka_unit_test(table_must_be_a_short_identifier),
        cmocka_unit_test(lease_must_be_at_least_a_millisecond),
        cmocka_unit_test(retention_must_cover_the_lease),
        cmocka_unit_test(connections_must_be_1_to_64),
        cmocka_unit_test(busy_timeout_must_be_0_to_60s),
        cmocka_unit_test(batch_max_must_be_at_most_1024),
        cmocka_unit_test(batch_window_must_be_0_to_1s),
        cmocka_unit_test(batch_window_needs_batching),
        cmocka_unit_test(sqlite_sync_is_full_or_normal_and_for_sqlite_only),
        cmocka_unit_test(journal_must_be_a_path_not_empty),
        cmocka_unit_test(a_journal_in_a_missing_directory_is_refused_naming_its_path),
        cmocka_unit_test(retry_policy_errors_are_named_under_store),
        cmocka_unit_test(null_arguments_are_refused),
        cmocka_unit_test(journal_replay_refuses_a_null_store),
        cmocka_unit_test(a_body_over_1_gib_is_refused_before_it_is_read),
        cmocka_unit_test(headers_over_1_gib_are_refused_before_they_are_read),
        cmocka_unit_test(sqlite_busy_and_locked_are_transient_with_extended_codes),
        cmocka_unit_test(other_sqlite_codes_are_not_transient),
        cmocka_unit_test(pg_serialization_deadlock_connection_shutdown_and_startup_are_transient),
        cmocka_unit_test(other_sqlstates_are_not_transient),
        cmocka_unit_test(verdicts_have_names),
    };
    int failed = cmocka_run_group_tests_name("store.options", tests, NULL, NULL);
    test_rmtree(dir);
    free(dir);
    return failed;
}
