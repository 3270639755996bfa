/*
 * test_store_journal.c — the journal on a real SQLite file: a completion
 * the database cannot take (another connection holds the write lock, so
 * every attempt is SQLITE_BUSY) goes to the journal and is replayed when
 * the lock goes; a journal left by a process killed mid-outage is replayed
 * at open; a torn tail is ignored and never hides a later record; an entry
 * whose record was taken over meanwhile is dropped and counted; one store
 * per journal file; a completion that neither the database nor the
 * journal can take is refused naming both and leaves nothing behind; a
 * journal whose database the next store cannot write keeps its entries;
 * on a really full disk (a small tmpfs, when the test may mount one) a
 * begin is unavailable and the journal takes the completion.
 * The fake clock drives the retries and the replay interval, so nothing
 * sleeps.
 */
#include <pthread.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/mount.h>
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

static const resil_store_key K1 = {.tenant = "acme", .operation = "create-order", .key = "k-1"};

typedef struct journaled {
    char path[600];
} journaled;

/* A journal next to the database, no busy wait, three attempts. */
static void with_journal(resil_store_opts *o, void *ud)
{
    journaled *j = ud;
    o->journal = j->path;
    o->busy_timeout = 0;
    o->retry.max_attempts = 3;
}

static void journal_for(const fixture *f, journaled *j)
{
    snprintf(j->path, sizeof j->path, "%s.journal", path_of(f));
}

static sqlite3 *lock_database(const fixture *f)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static void unlock_database(sqlite3 *db)
{
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static const char saved_headers[] = "Content-Type: application/json\r\n";
static const uint8_t saved_body[] = {'{', '"', 'o', '"', ':', '7', '}', 0, 0xff};

static int complete_saved(resil_store *s, const resil_store_key *k, uint64_t lease,
                          resil_err *err)
{
    resil_store_response r = {.status = 201, .headers = saved_headers,
                              .headers_len = strlen(saved_headers), .body = saved_body,
                              .body_len = sizeof saved_body};
    return resil_store_complete(s, k, lease, &r, err);
}

static void assert_replays_saved(fixture *f, resil_store *s, const char *key)
{
    assert_int_equal(begin_key(f, s, key, "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_string_equal(f->res.headers, saved_headers);
    assert_int_equal(f->res.body_len, sizeof saved_body);
    assert_memory_equal(f->res.body, saved_body, sizeof saved_body);
}

static void assert_stats(resil_store *s, size_t pending, uint64_t written, uint64_t replayed,
                         uint64_t conflicts)
{
    resil_store_journal_stats st;
    resil_store_journal_stats_get(s, &st);
    assert_int_equal(st.pending, pending);
    assert_int_equal(st.written, written);
    assert_int_equal(st.replayed, replayed);
    assert_int_equal(st.conflicts, conflicts);
}

/* ---- the outage ------------------------------------------------------------- */

static void a_completion_the_database_cannot_take_goes_to_the_journal(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    sqlite3 *lock = lock_database(f);
    resil_err err = {0};
    assert_int_equal(complete_saved(s, &K1, lease, &err), 0);
    assert_stats(s, 1, 1, 0, 0);
    assert_true(file_size(j.path) > 8);
    /* The key is answered from the journal, without the database. */
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(1));
    unlock_database(lock);
    size_t replayed = 99;
    assert_int_equal(resil_store_journal_replay(s, &replayed, &err), 0);
    assert_int_equal(replayed, 1);
    assert_stats(s, 0, 1, 1, 0);
    assert_int_equal(file_size(j.path), 8);
    assert_replays_saved(f, s, "k-1");
    resil_store_free(s);
}

/* A store whose key k-1 was claimed and then completed into the journal
 * (the database locked meanwhile, free again now). */
static resil_store *open_with_k1_journaled(fixture *f, journaled *j, uint64_t *lease)
{
    resil_store *s = fixture_open(f, with_journal, j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    *lease = f->res.lease;
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, *lease, NULL), 0);
    unlock_database(lock);
    return s;
}

static void a_journaled_completion_cannot_be_completed_or_released_again(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    uint64_t lease;
    resil_store *s = open_with_k1_journaled(f, &j, &lease);
    resil_err err = {0};
    assert_int_equal(complete_saved(s, &K1, lease, &err), RESIL_ESTATE);
    assert_string_equal(err.message, "store: key 'k-1' is completed already (its completion "
                                     "waits in the journal)");
    assert_int_equal(resil_store_release(s, &K1, lease, NULL), RESIL_ESTATE);
    assert_int_equal(resil_store_renew(s, &K1, lease, NULL), RESIL_ESTATE);
    assert_stats(s, 1, 1, 0, 0);
    resil_store_free(s);
}

/* begin_in answers a journaled key from the journal, as begin does, and
 * leaves the application's transaction untouched. */
static void begin_in_a_transaction_answers_a_journaled_key_in_progress(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    uint64_t lease;
    resil_store *s = open_with_k1_journaled(f, &j, &lease);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of(f), &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_tx tx = {.sqlite = db};
    resil_err err = {0};
    assert_int_equal(resil_store_begin_in(s, &tx, &K1, h, &f->res, &err), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_false(sqlite3_get_autocommit(db)); /* still inside its transaction */
    assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_stats(s, 1, 1, 0, 0);
    resil_store_free(s);
}

static void replay_while_the_database_is_still_down_is_ebusy_and_keeps_the_entry(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, f->res.lease, NULL), 0);
    size_t replayed = 99;
    assert_int_equal(resil_store_journal_replay(s, &replayed, NULL), RESIL_EBUSY);
    assert_int_equal(replayed, 0);
    assert_stats(s, 1, 1, 0, 0);
    unlock_database(lock);
    assert_int_equal(resil_store_journal_replay(s, &replayed, NULL), 0);
    assert_int_equal(replayed, 1);
    resil_store_free(s);
}

/* Before a call, pending entries are retried at most once a second. */
static void waiting_entries_are_replayed_by_a_later_call_at_most_once_a_second(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, f->res.lease, NULL), 0);
    unlock_database(lock);
    resil_fake_clock_advance(f->fc, RESIL_MS(999));
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_stats(s, 1, 1, 0, 0);
    resil_fake_clock_advance(f->fc, RESIL_MS(1));
    assert_replays_saved(f, s, "k-1");
    assert_stats(s, 0, 1, 1, 0);
    assert_int_equal(file_size(j.path), 8);
    resil_store_free(s);
}

/* ---- crashes ---------------------------------------------------------------- */

static void a_journal_left_by_a_store_freed_without_replay_is_replayed_at_open(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, f->res.lease, NULL), 0);
    resil_store_free(s);
    unlock_database(lock);
    s = fixture_open(f, with_journal, &j);
    assert_stats(s, 0, 0, 1, 0);
    assert_int_equal(file_size(j.path), 8);
    assert_replays_saved(f, s, "k-1");
    resil_store_free(s);
}

static void a_journal_left_by_a_killed_process_is_replayed_at_open(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    sqlite3 *lock = lock_database(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        resil_store *s = fixture_open(f, with_journal, &j);
        if (s == NULL || complete_saved(s, &K1, lease, NULL) != 0)
            _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    unlock_database(lock);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_stats(s, 0, 0, 1, 0);
    assert_replays_saved(f, s, "k-1");
    resil_store_free(s);
}

/* A journal left with an answer, and a database file the next store may
 * not write (a restore that left it read-only): the open is refused and
 * the answer waits in the journal — a replay into that file would fail
 * for good and drop it — until a store that can write takes it. */
static void a_journal_waits_for_a_database_the_store_can_write(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, f->res.lease, NULL), 0);
    resil_store_free(s);
    unlock_database(lock);
    resil_store_free(f->s); /* no connection left, no -wal beside the file */
    f->s = NULL;
    assert_int_equal(chmod(path_of(f), 0444), 0);
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = f->url;
    o.table = f->table;
    o.clock = f->clock;
    with_journal(&o, &j);
    resil_err err = {0};
    file_modes_held was = file_modes_hold();
    int rc = resil_store_new(&o, &s, &err);
    file_modes_release(&was);
    resil_store_free(s);
    assert_int_equal(chmod(path_of(f), 0644), 0);
    assert_int_equal(rc, RESIL_EBACKEND);
    assert_true(file_size(j.path) > 8);
    s = fixture_open(f, with_journal, &j);
    assert_stats(s, 0, 0, 1, 0);
    assert_replays_saved(f, s, "k-1");
    resil_store_free(s);
}

static void append_bytes(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "ab");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

/* A record cut short by a crash: its length says more than follows. */
static void a_torn_tail_is_ignored_and_does_not_hide_later_records(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease1 = f->res.lease;
    assert_int_equal(begin_key(f, s, "k-2", "a"), RESIL_STORE_FIRST);
    uint64_t lease2 = f->res.lease;
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, lease1, NULL), 0);
    resil_store_free(s);
    long good = file_size(j.path);
    const uint8_t torn[] = {0, 0, 0, 200, 0x12, 0x34, 0x56, 0x78, 1, 0, 0, 0};
    append_bytes(j.path, torn, sizeof torn);
    /* Reopened while the database is still locked: the entry stays, the
     * tail is cut off, and a new completion follows the good record. */
    s = fixture_open(f, with_journal, &j);
    assert_stats(s, 1, 0, 0, 0);
    assert_int_equal(file_size(j.path), good);
    const resil_store_key k2 = {.tenant = "acme", .operation = "create-order", .key = "k-2"};
    assert_int_equal(complete_saved(s, &k2, lease2, NULL), 0);
    resil_store_free(s);
    unlock_database(lock);
    s = fixture_open(f, with_journal, &j);
    assert_stats(s, 0, 0, 2, 0);
    assert_replays_saved(f, s, "k-1");
    assert_replays_saved(f, s, "k-2");
    resil_store_free(s);
}

static void a_file_that_is_not_a_journal_is_refused(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    append_bytes(j.path, "hello, world\n", 13);
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = f->url;
    o.table = f->table;
    o.journal = j.path;
    resil_store *s = NULL;
    resil_err err = {0};
    assert_int_equal(resil_store_new(&o, &s, &err), RESIL_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err.message, "is not a resil store journal"));
}

/* A crash while the file was being created left part of its magic. */
static void a_journal_cut_inside_its_magic_is_a_new_journal(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    append_bytes(j.path, "resi", 4);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_stats(s, 0, 0, 0, 0);
    assert_int_equal(file_size(j.path), 8);
    resil_store_free(s);
}

/* ---- conflicts and ownership -------------------------------------------------- */

/* The outage outlasted the lease and another store took the record over:
 * the journaled completion no longer owns it and is dropped. */
static void an_entry_whose_record_was_taken_over_is_dropped_and_counted(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, f->res.lease, NULL), 0);
    unlock_database(lock);
    resil_fake_clock_advance(f->fc, RESIL_S(11));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_at(CASE_WALL0) + 1);
    size_t replayed = 99;
    assert_int_equal(resil_store_journal_replay(s, &replayed, NULL), 0);
    assert_int_equal(replayed, 0);
    assert_stats(s, 0, 1, 0, 1);
    assert_int_equal(file_size(j.path), 8);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    resil_store_free(s);
}

static void a_second_store_on_the_same_journal_is_ebusy(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = f->url;
    o.table = f->table;
    o.journal = j.path;
    resil_store *second = (resil_store *)&o;
    resil_err err = {0};
    assert_int_equal(resil_store_new(&o, &second, &err), RESIL_EBUSY);
    assert_null(second);
    char want[700];
    snprintf(want, sizeof want, "store.journal '%.120s' is in use by another store", j.path);
    assert_string_equal(err.message, want);
    resil_store_free(s);
    assert_int_equal(resil_store_new(&o, &second, &err), 0);
    resil_store_free(second);
}

static void no_journal_no_stats(resil_store_opts *o, void *ud)
{
    (void)ud;
    o->busy_timeout = 0;
    o->retry.max_attempts = 2;
}

static void a_store_without_a_journal_reports_ebusy_and_zero_stats(void **state)
{
    fixture *f = *state;
    resil_store *s = fixture_open(f, no_journal_no_stats, NULL);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    sqlite3 *lock = lock_database(f);
    assert_int_equal(complete_saved(s, &K1, f->res.lease, NULL), RESIL_EBUSY);
    unlock_database(lock);
    assert_stats(s, 0, 0, 0, 0);
    size_t replayed = 99;
    assert_int_equal(resil_store_journal_replay(s, &replayed, NULL), 0);
    assert_int_equal(replayed, 0);
    resil_store_free(s);
}

/* RLIMIT_FSIZE 0 refuses every write past a file's end, the database's
 * (an I/O error: unavailable) and the journal's append alike: the call
 * says both, nothing half-written stays in the journal, and the key is
 * still its run's to complete once the disk takes writes again. */
static void a_completion_neither_the_database_nor_the_journal_can_take_is_ebusy_naming_both(
    void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    resil_err err = {0};
    file_writes_held was = file_writes_refuse();
    int rc = complete_saved(s, &K1, lease, &err);
    file_writes_release(&was);
    assert_int_equal(rc, RESIL_EBUSY);
    char want[800];
    snprintf(want, sizeof want,
             "store: sqlite: disk I/O error (disk I/O error, not retryable after 1 attempt); "
             "the journal failed too: store.journal '%.120s': append: File too large",
             j.path);
    assert_string_equal(err.message, want);
    assert_stats(s, 0, 0, 0, 0);
    assert_int_equal(file_size(j.path), 8);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(complete_saved(s, &K1, lease, &err), 0);
    assert_replays_saved(f, s, "k-1");
    resil_store_free(s);
}

/* Fill the filesystem holding `path` with a file of that name: every
 * byte it has left. */
static void fill_up(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    static const char block[4096];
    while (write(fd, block, sizeof block) > 0)
        ;
    assert_int_equal(errno, ENOSPC);
    close(fd);
}

typedef struct full_disk {
    int begin_rc, complete_rc, replay_rc;
    char begin_error[256];
    resil_store_journal_stats full, after;
    size_t replayed;
    resil_store_verdict verdict;
} full_disk;

/* Where a test has its small tmpfs mounted, while it has it ("": none). */
static char mounted[600];

/* The database on a small tmpfs, the journal beside the test's files. */
static void run_on_a_disk_that_fills(fixture *f, journaled *j, const char *mnt, full_disk *out)
{
    snprintf(f->url, sizeof f->url, "sqlite:%.480s/store.db", mnt);
    resil_store *s = fixture_open(f, with_journal, j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    char filler[600];
    snprintf(filler, sizeof filler, "%.500s/filler", mnt);
    fill_up(filler);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k2 = {.tenant = "acme", .operation = "create-order", .key = "k-2"};
    resil_err err = {0};
    out->begin_rc = resil_store_begin(s, &k2, h, &f->res, &err);
    snprintf(out->begin_error, sizeof out->begin_error, "%s", err.message);
    out->complete_rc = complete_saved(s, &K1, lease, NULL);
    resil_store_journal_stats_get(s, &out->full);
    unlink(filler);
    out->replay_rc = resil_store_journal_replay(s, &out->replayed, NULL);
    resil_store_journal_stats_get(s, &out->after);
    out->verdict = begin_key(f, s, "k-1", "a");
    resil_store_free(s);
}

/* A real full disk (ENOSPC): the database cannot serve, which is
 * unavailable at once — a begin is RESIL_EBUSY, a completion goes to the
 * journal on another disk — and the answer reaches the database once
 * space is back. Mounting the tmpfs needs root; elsewhere it is skipped
 * (a_disk_that_refuses_writes_is_ebusy_without_retries in test_sqlite.c
 * covers the class without one). */
static void a_full_disk_is_ebusy_for_a_begin_and_the_journal_takes_the_completion(
    void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    char mnt[600];
    snprintf(mnt, sizeof mnt, "%.500s/full-%d", dir, files++);
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
        rmdir(mnt);
        skip();
    }
    snprintf(mounted, sizeof mounted, "%s", mnt); /* main() unmounts it should an assertion end
                                                     the test here */
    full_disk out = {0};
    run_on_a_disk_that_fills(f, &j, mnt, &out);
    mounted[0] = '\0';
    assert_int_equal(umount(mnt), 0);
    rmdir(mnt);
    assert_int_equal(out.begin_rc, RESIL_EBUSY);
    assert_string_equal(out.begin_error, "store: sqlite: database or disk is full (database or "
                                         "disk is full, not retryable after 1 attempt)");
    assert_int_equal(out.complete_rc, 0);
    assert_int_equal(out.full.pending, 1);
    assert_int_equal(out.full.written, 1);
    assert_int_equal(out.replay_rc, 0);
    assert_int_equal(out.replayed, 1);
    assert_int_equal(out.after.pending, 0);
    assert_int_equal(out.verdict, RESIL_STORE_REPLAY);
}

/* ---- threads ------------------------------------------------------------------ */

#define WRITERS 8

typedef struct writer {
    resil_store *s;
    char key[16];
    uint64_t lease;
    pthread_barrier_t *go;
    int rc;
} writer;

static void *complete_then_begin(void *arg)
{
    writer *w = arg;
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = w->key};
    pthread_barrier_wait(w->go);
    w->rc = complete_saved(w->s, &k, w->lease, NULL);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_result res;
    resil_store_result_init(&res);
    if (w->rc == 0 && resil_store_begin(w->s, &k, h, &res, NULL) == 0 &&
        res.verdict != RESIL_STORE_IN_PROGRESS)
        w->rc = -100 - (int)res.verdict;
    resil_store_result_free(&res);
    return NULL;
}

static void completions_from_many_threads_during_an_outage_are_all_journaled(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    writer w[WRITERS];
    pthread_t t[WRITERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, WRITERS);
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.s = s, .go = &go};
        snprintf(w[i].key, sizeof w[i].key, "k-%d", i);
        assert_int_equal(begin_key(f, s, w[i].key, "a"), RESIL_STORE_FIRST);
        w[i].lease = f->res.lease;
    }
    sqlite3 *lock = lock_database(f);
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&t[i], NULL, complete_then_begin, &w[i]);
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
    pthread_barrier_destroy(&go);
    assert_stats(s, WRITERS, WRITERS, 0, 0);
    unlock_database(lock);
    size_t replayed = 0;
    assert_int_equal(resil_store_journal_replay(s, &replayed, NULL), 0);
    assert_int_equal(replayed, WRITERS);
    for (int i = 0; i < WRITERS; i++)
        assert_replays_saved(f, s, w[i].key);
    resil_store_free(s);
}

/* ---- the asynchronous calls -------------------------------------------------- */

static void an_async_completion_the_database_cannot_take_goes_to_the_journal(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    resil_store *s = fixture_open(f, with_journal, &j);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    sqlite3 *lock = lock_database(f);
    resil_store_response r = {.status = 201, .headers = saved_headers,
                              .headers_len = strlen(saved_headers), .body = saved_body,
                              .body_len = sizeof saved_body};
    reply done;
    reply_init(&done);
    resil_err err = {0};
    assert_int_equal(resil_store_complete_async(s, &K1, lease, &r, on_reply, &done, &err), 0);
    assert_int_equal(await_reply(&done), 0); /* durable: in the journal, fsync'ed */
    assert_stats(s, 1, 1, 0, 0);
    assert_true(file_size(j.path) > 8);
    unlock_database(lock);
    assert_int_equal(resil_store_journal_replay(s, NULL, &err), 0);
    assert_replays_saved(f, s, "k-1");
    assert_int_equal(calls_of(&done), 1);
    reply_free(&done);
    resil_store_free(s);
}

static void async_calls_for_a_journaled_key_answer_as_the_blocking_ones(void **state)
{
    fixture *f = *state;
    journaled j;
    journal_for(f, &j);
    uint64_t lease;
    resil_store *s = open_with_k1_journaled(f, &j, &lease);
    reply b, c;
    reply_init(&b);
    reply_init(&c);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    assert_int_equal(resil_store_begin_async(s, &K1, h, &b.res, on_reply, &b, NULL), 0);
    assert_int_equal(resil_store_release_async(s, &K1, lease, on_reply, &c, NULL), 0);
    assert_int_equal(await_reply(&b), 0);
    assert_int_equal(b.res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(b.res.lease_left, RESIL_S(1));
    assert_int_equal(await_reply(&c), RESIL_ESTATE);
    assert_string_equal(c.error, "store: key 'k-1' is completed already (its completion "
                                 "waits in the journal)");
    assert_stats(s, 1, 1, 0, 0);
    reply_free(&b);
    reply_free(&c);
    resil_store_free(s);
}

#define JOURNAL_CASE(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)

int main(void)
{
    dir = test_tmpdir();
    if (dir == NULL)
        return 1;
    store_cases_url = sqlite_url;
    const struct CMUnitTest tests[] = {
        JOURNAL_CASE(a_completion_the_database_cannot_take_goes_to_the_journal),
        JOURNAL_CASE(a_journaled_completion_cannot_be_completed_or_released_again),
        JOURNAL_CASE(begin_in_a_transaction_answers_a_journaled_key_in_progress),
        JOURNAL_CASE(replay_while_the_database_is_still_down_is_ebusy_and_keeps_the_entry),
        JOURNAL_CASE(waiting_entries_are_replayed_by_a_later_call_at_most_once_a_second),
        JOURNAL_CASE(a_journal_left_by_a_store_freed_without_replay_is_replayed_at_open),
        JOURNAL_CASE(a_journal_left_by_a_killed_process_is_replayed_at_open),
        JOURNAL_CASE(a_journal_waits_for_a_database_the_store_can_write),
        JOURNAL_CASE(a_torn_tail_is_ignored_and_does_not_hide_later_records),
        JOURNAL_CASE(a_file_that_is_not_a_journal_is_refused),
        JOURNAL_CASE(a_journal_cut_inside_its_magic_is_a_new_journal),
        JOURNAL_CASE(an_entry_whose_record_was_taken_over_is_dropped_and_counted),
        JOURNAL_CASE(a_second_store_on_the_same_journal_is_ebusy),
        JOURNAL_CASE(a_store_without_a_journal_reports_ebusy_and_zero_stats),
        JOURNAL_CASE(a_completion_neither_the_database_nor_the_journal_can_take_is_ebusy_naming_both),
        JOURNAL_CASE(a_full_disk_is_ebusy_for_a_begin_and_the_journal_takes_the_completion),
        JOURNAL_CASE(completions_from_many_threads_during_an_outage_are_all_journaled),
        JOURNAL_CASE(an_async_completion_the_database_cannot_take_goes_to_the_journal),
        JOURNAL_CASE(async_calls_for_a_journaled_key_answer_as_the_blocking_ones),
    };
    int failed = cmocka_run_group_tests_name("store.journal", tests, NULL, NULL);
    if (mounted[0] != '\0')
        umount2(mounted, MNT_DETACH);
    test_rmtree(dir);
    free(dir);
    return failed;
}
