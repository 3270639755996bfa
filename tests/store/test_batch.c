/*
 * test_batch.c — group commit, against real SQLite and a real PostgreSQL:
 * what a batch carries, when it runs, and that each member learns its own
 * result, and only what the database made durable.
 *
 * The window is slept on the store's clock, the fake one here in manual
 * mode: a batch's leader blocks until the test moves virtual time or the
 * batch fills, so every case builds the exact batch it means, member by
 * member (each queued before the next starts, which the store's batch
 * counts tell), and nothing depends on how fast threads run.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>

#include "pg_server.h"
#include "store_cases.h"

static pg_server *server;
static char *dir;
static int next_file;

static void sqlite_url(char *buf, size_t cap)
{
    snprintf(buf, cap, "sqlite:%s/batch-%d.db", dir, next_file++);
}

static void pg_url(char *buf, size_t cap) { snprintf(buf, cap, "%s", pg_server_url(server)); }

static bool on_sqlite(const fixture *f) { return strncmp(f->url, "sqlite:", 7) == 0; }

/* ---- batched handles and their members ------------------------------------- */

/* The longest window there is (virtual: nobody waits it out for real). */
#define LONG_WINDOW RESIL_S(1)

typedef struct batching {
    uint32_t max;
    resil_duration window;
    uint32_t attempts;    /* 0: the default policy */
    uint32_t connections; /* 0: the default pool */
} batching;

static void batched(resil_store_opts *o, void *ud)
{
    const batching *b = ud;
    o->batch_max = b->max;
    o->batch_window = b->window;
    o->busy_timeout = 0;
    if (b->attempts > 0)
        o->retry.max_attempts = b->attempts;
    if (b->connections > 0)
        o->connections = b->connections;
}

/* A store handle whose batches wait `window` of the fixture's manual clock. */
static resil_store *open_batched(fixture *f, uint32_t max, resil_duration window,
                                 uint32_t attempts)
{
    batching b = {.max = max, .window = window, .attempts = attempts};
    resil_fake_clock_set_manual(f->fc, true);
    return fixture_open(f, batched, &b);
}

typedef enum member_op { BEGIN, COMPLETE, RELEASE, RENEW } member_op;

typedef struct member {
    resil_store *s;
    member_op op;
    const char *key, *body; /* begin(key, body), or another call with lease */
    uint64_t lease;
    resil_store_result res;
    int rc;
    char error[256];
    pthread_t t;
} member;

static const char *const completed_body = "{\"order\":1}";

static void *run_member(void *arg)
{
    member *m = arg;
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = m->key};
    resil_err err = {0};
    resil_store_response r = {.status = 201, .body = completed_body,
                              .body_len = strlen(completed_body)};
    uint8_t h[RESIL_SHA256_LEN];
    switch (m->op) {
    case BEGIN:
        hash_of(m->body, h);
        m->rc = resil_store_begin(m->s, &k, h, &m->res, &err);
        break;
    case COMPLETE:
        m->rc = resil_store_complete(m->s, &k, m->lease, &r, &err);
        break;
    case RELEASE:
        m->rc = resil_store_release(m->s, &k, m->lease, &err);
        break;
    case RENEW:
        m->rc = resil_store_renew(m->s, &k, m->lease, &err);
        break;
    }
    snprintf(m->error, sizeof m->error, "%s", err.message);
    return NULL;
}

static resil_store_batch_stats stats_of(resil_store *s)
{
    resil_store_batch_stats st;
    resil_store_batch_stats_get(s, &st);
    return st;
}

/* Wait (yielding, not sleeping) until n calls wait for a batch. */
static void await_queued(resil_store *s, uint32_t n)
{
    for (long i = 0; i < 100000000L; i++) {
        if (stats_of(s).queued >= n)
            return;
        sched_yield();
    }
    fail_msg("%u calls never queued", n);
}

/* Wait until a batch took every queued call (its window's sleep is over). */
static void await_taken(resil_store *s)
{
    for (long i = 0; i < 100000000L; i++) {
        resil_store_batch_stats st = stats_of(s);
        if (st.queued == 0 && st.batches > 0)
            return;
        sched_yield();
    }
    fail_msg("no batch took the queued calls");
}

static void start(member *m, resil_store *s)
{
    m->s = s;
    resil_store_result_init(&m->res);
    pthread_create(&m->t, NULL, run_member, m);
}

/* Start a member and wait until it is queued as the n-th. */
static void start_queued(member *m, resil_store *s, uint32_t n)
{
    start(m, s);
    await_queued(s, n);
}

static void join(member *m)
{
    pthread_join(m->t, NULL);
}

static void join_ok(member *m)
{
    join(m);
    if (m->rc != 0)
        fail_msg("call %d on '%s': %s", (int)m->op, m->key, m->error);
}

static void done(member *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        resil_store_result_free(&m[i].res);
}

/* begin on the fixture's own (unbatched-in-effect) handle. */
static uint64_t claim(fixture *f, const char *key)
{
    assert_int_equal(begin_key(f, f->s, key, "a"), RESIL_STORE_FIRST);
    return f->res.lease;
}

/* Start members[0..n): each queued before the next, the last filling the
 * batch (so it runs without its window). */
static void start_batch(member *m, size_t n, resil_store *s)
{
    for (uint32_t i = 0; i + 1 < n; i++)
        start_queued(&m[i], s, i + 1);
    start(&m[n - 1], s);
}

static void assert_replays_completed_body(const member *m)
{
    assert_int_equal(m->res.verdict, RESIL_STORE_REPLAY);
    assert_int_equal(m->res.status, 201);
    assert_string_equal((const char *)m->res.body, completed_body);
}

/* ---- what a batch carries ----------------------------------------------------- */

static void each_member_of_a_batch_learns_its_own_verdict(void **state)
{
    fixture *f = *state;
    uint64_t lease1 = claim(f, "k-1");
    claim(f, "k-3");
    resil_store *s = open_batched(f, 5, LONG_WINDOW, 0);
    member m[5] = {
        {.key = "k-1", .op = COMPLETE, .lease = lease1},
        {.key = "k-1", .body = "a"}, /* after its completion, in the same batch */
        {.key = "k-2", .body = "x"},
        {.key = "k-2", .body = "y"}, /* the same new key, another request */
        {.key = "k-3", .body = "a"}, /* claimed and running */
    };
    start_batch(m, 5, s); /* the fifth fills the batch: it runs without the window */
    for (int i = 0; i < 5; i++)
        join_ok(&m[i]);
    assert_replays_completed_body(&m[1]);
    assert_int_equal(m[2].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[2].res.lease, first_lease_now(f));
    assert_int_equal(m[3].res.verdict, RESIL_STORE_MISMATCH);
    assert_int_equal(m[4].res.verdict, RESIL_STORE_IN_PROGRESS);
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.calls, 5);
    assert_int_equal(st.largest, 5);
    assert_int_equal(st.queued, 0);
    assert_int_equal(resil_fake_clock_now(f->fc), 0); /* no window was waited out */
    done(m, 5);
    resil_store_free(s);
}

static void complete_on(resil_store *s, const char *key, uint64_t lease)
{
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = key};
    resil_store_response r = {.status = 201, .body = completed_body,
                              .body_len = strlen(completed_body)};
    resil_err err = {0};
    if (resil_store_complete(s, &k, lease, &r, &err) != 0)
        fail_msg("complete '%s': %s", key, err.message);
}

static void complete_key(fixture *f, const char *key, uint64_t lease)
{
    complete_on(f->s, key, lease);
}

static void every_verdict_in_one_batch_is_the_one_sequential_calls_give(void **state)
{
    fixture *f = *state;
    uint64_t expired = claim(f, "k-expired");
    resil_fake_clock_advance(f->fc, RESIL_S(10)); /* the 10 s lease runs out */
    uint64_t running = claim(f, "k-run"), held = claim(f, "k-held"),
             twice = claim(f, "k-twice");
    resil_store *s = open_batched(f, 10, LONG_WINDOW, 0);
    member m[10] = {
        {.key = "k-run", .op = COMPLETE, .lease = running},
        {.key = "k-run", .body = "a"},    /* after its completion: a replay */
        {.key = "k-new", .body = "a"},    /* first */
        {.key = "k-new", .body = "a"},    /* the same request again: in progress */
        {.key = "k-new", .body = "b"},    /* another request, the same key: mismatch */
        {.key = "k-held", .body = "a"},   /* claimed, its lease running: in progress */
        {.key = "k-expired", .body = "a"}, /* its lease ran out: taken over */
        {.key = "k-held", .op = COMPLETE, .lease = held + 1}, /* not its lease */
        {.key = "k-twice", .op = COMPLETE, .lease = twice},
        {.key = "k-twice", .op = COMPLETE, .lease = twice}, /* completed already */
    };
    start_batch(m, 10, s);
    for (int i = 0; i < 10; i++)
        join(&m[i]);
    int ok[] = {0, 1, 2, 3, 4, 5, 6, 8};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (m[ok[i]].rc != 0)
            fail_msg("member %d on '%s': %s", ok[i], m[ok[i]].key, m[ok[i]].error);
    assert_replays_completed_body(&m[1]);
    assert_int_equal(m[2].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[2].res.lease, first_lease_now(f));
    assert_int_equal(m[3].res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_int_equal(m[3].res.lease_left, RESIL_S(10));
    assert_int_equal(m[4].res.verdict, RESIL_STORE_MISMATCH);
    assert_int_equal(m[5].res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_int_equal(m[6].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[6].res.lease, expired + 1);
    assert_int_equal(m[7].rc, RESIL_ESTATE);
    assert_int_equal(m[9].rc, RESIL_ESTATE);
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.largest, 10);
    /* What the batch saved, read back. */
    assert_int_equal(begin_key(f, f->s, "k-twice", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(begin_key(f, f->s, "k-held", "a"), RESIL_STORE_IN_PROGRESS);
    complete_key(f, "k-held", held);
    complete_key(f, "k-expired", expired + 1);
    done(m, 10);
    resil_store_free(s);
}

static void a_batch_carries_at_most_batch_max_calls(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 2, LONG_WINDOW, 0);
    member m[3] = {{.key = "k-1", .body = "a"}, {.key = "k-2", .body = "a"},
                   {.key = "k-3", .body = "a"}};
    start_queued(&m[0], s, 1);
    start(&m[1], s); /* which of these two queues first is the threads' business: */
    start(&m[2], s); /* one fills the first batch, the other leads the next */
    join_ok(&m[0]);
    resil_fake_clock_await_sleepers(f->fc, 1);
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.largest, 2);
    assert_int_equal(st.queued, 1);
    resil_fake_clock_advance(f->fc, LONG_WINDOW);
    join_ok(&m[1]);
    join_ok(&m[2]);
    st = stats_of(s);
    assert_int_equal(st.batches, 2);
    assert_int_equal(st.calls, 3);
    assert_int_equal(st.largest, 2);
    for (int i = 0; i < 3; i++)
        assert_int_equal(m[i].res.verdict, RESIL_STORE_FIRST);
    done(m, 3);
    resil_store_free(s);
}

/* ---- when a batch runs --------------------------------------------------------- */

static void a_lone_call_runs_when_the_window_ends(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 64, RESIL_MS(5), 0);
    member m = {.key = "k-1", .body = "a"};
    start(&m, s);
    resil_fake_clock_await_sleepers(f->fc, 1);
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 0);
    assert_int_equal(st.queued, 1);
    resil_fake_clock_advance(f->fc, RESIL_MS(5) - 1);
    assert_int_equal(stats_of(s).batches, 0); /* a nanosecond early: still waiting */
    resil_fake_clock_advance(f->fc, 1);
    join_ok(&m);
    assert_int_equal(m.res.verdict, RESIL_STORE_FIRST);
    /* Stamped when the batch ran, not when the call queued. */
    assert_int_equal(m.res.created_at, CASE_WALL0 + RESIL_MS(5));
    st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.largest, 1);
    done(&m, 1);
    resil_store_free(s);
}

static void a_full_batch_runs_before_its_window_ends(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 2, LONG_WINDOW, 0);
    member m[2] = {{.key = "k-1", .body = "a"}, {.key = "k-2", .body = "a"}};
    start_queued(&m[0], s, 1);
    start(&m[1], s);
    join_ok(&m[0]);
    join_ok(&m[1]);
    assert_int_equal(m[0].res.created_at, CASE_WALL0);
    assert_int_equal(m[1].res.created_at, CASE_WALL0);
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.largest, 2);
    done(m, 2);
    resil_store_free(s);
}

static void replays_and_mismatches_never_wait_for_a_batch(void **state)
{
    fixture *f = *state;
    uint64_t lease = claim(f, "k-1");
    resil_store_response r = {.status = 201};
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "k-1"};
    assert_int_equal(resil_store_complete(f->s, &k, lease, &r, NULL), 0);
    resil_store *s = open_batched(f, 64, LONG_WINDOW, 0);
    /* A window that nobody ends: only a plain read can answer. */
    member m[2] = {{.key = "k-1", .body = "a"}, {.key = "k-1", .body = "b"}};
    start(&m[0], s);
    join_ok(&m[0]);
    start(&m[1], s);
    join_ok(&m[1]);
    assert_int_equal(m[0].res.verdict, RESIL_STORE_REPLAY);
    assert_int_equal(m[1].res.verdict, RESIL_STORE_MISMATCH);
    assert_int_equal(stats_of(s).batches, 0);
    done(m, 2);
    resil_store_free(s);
}

/* ---- failures ------------------------------------------------------------------- */

static sqlite3 *sqlite_admin(const fixture *f)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(f->url + strlen("sqlite:"), &db) != SQLITE_OK)
        fail_msg("sqlite3_open: %s", sqlite3_errmsg(db));
    return db;
}

static void sqlite_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

static void pg_exec(const fixture *f, const char *sql)
{
    PGconn *c = PQconnectdb(f->url);
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

/* Make the database refuse an insert of the key "poison" with `sqlstate`
 * (PostgreSQL) or a RAISE (SQLite, always a constraint error). */
static void poison(const fixture *f, const char *sqlstate)
{
    char sql[1200];
    if (on_sqlite(f)) {
        sqlite3 *db = sqlite_admin(f);
        snprintf(sql, sizeof sql,
                 "CREATE TRIGGER %s_poison BEFORE INSERT ON %s"
                 " WHEN NEW.idempotency_key = 'poison'"
                 " BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
                 f->table, f->table);
        sqlite_exec(db, sql);
        sqlite3_close(db);
        return;
    }
    snprintf(sql, sizeof sql,
             "CREATE FUNCTION %s_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
             " IF NEW.idempotency_key = 'poison' THEN"
             " RAISE EXCEPTION 'poisoned' USING ERRCODE = '%s'; END IF;"
             " RETURN NEW; END $$;"
             "CREATE TRIGGER %s_poison BEFORE INSERT ON %s"
             " FOR EACH ROW EXECUTE FUNCTION %s_poison()",
             f->table, sqlstate, f->table, f->table, f->table);
    pg_exec(f, sql);
}

/* The database cannot take the batch for now: SQLite's write lock held by
 * another connection; PostgreSQL's serialization failure on "poison". */
static sqlite3 *refuse_for_now(const fixture *f)
{
    if (!on_sqlite(f)) {
        poison(f, "40001");
        return NULL;
    }
    sqlite3 *db = sqlite_admin(f);
    sqlite_exec(db, "BEGIN IMMEDIATE");
    return db;
}

static void take_again(const fixture *f, sqlite3 *db)
{
    char sql[200];
    if (db != NULL) {
        sqlite_exec(db, "ROLLBACK");
        sqlite3_close(db);
        return;
    }
    snprintf(sql, sizeof sql, "DROP TRIGGER %s_poison ON %s", f->table, f->table);
    pg_exec(f, sql);
}

/* What each member of a batch of 3 that refuse_for_now() refused learns. */
static void refused_batch_error(const fixture *f, char *buf, size_t cap)
{
    snprintf(buf, cap, "store: %s (%s, attempts exhausted after 1 attempt, in a batch of 3)",
             on_sqlite(f) ? "sqlite: database is locked" : "postgres: ERROR:  poisoned",
             on_sqlite(f) ? "database is locked" : "SQLSTATE 40001");
}

static void a_failing_batch_fails_every_member_and_saves_none(void **state)
{
    fixture *f = *state;
    uint64_t lease = claim(f, "k-c");
    resil_store *s = open_batched(f, 3, LONG_WINDOW, 1);
    sqlite3 *held = refuse_for_now(f);
    member m[3] = {{.key = "k-a", .body = "a"}, {.key = "poison", .body = "a"},
                   {.key = "k-c", .op = COMPLETE, .lease = lease}};
    start_queued(&m[0], s, 1);
    start_queued(&m[1], s, 2);
    start(&m[2], s);
    char expected[200];
    refused_batch_error(f, expected, sizeof expected);
    for (int i = 0; i < 3; i++) {
        join(&m[i]);
        assert_int_equal(m[i].rc, RESIL_EBUSY);
        assert_string_equal(m[i].error, expected);
        assert_int_equal(m[i].res.verdict, RESIL_STORE_NONE);
    }
    take_again(f, held);
    /* None of the three reached the database. */
    assert_int_equal(begin_key(f, f->s, "k-a", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    assert_int_equal(begin_key(f, f->s, "k-c", "a"), RESIL_STORE_IN_PROGRESS);
    done(m, 3);
    resil_store_free(s);
}

static void a_member_the_database_refuses_for_good_fails_alone(void **state)
{
    fixture *f = *state;
    poison(f, "23514"); /* check_violation */
    resil_store *s = open_batched(f, 3, LONG_WINDOW, 0);
    member m[3] = {{.key = "k-a", .body = "a"}, {.key = "poison", .body = "a"},
                   {.key = "k-b", .body = "a"}};
    start_queued(&m[0], s, 1);
    start_queued(&m[1], s, 2);
    start(&m[2], s);
    join_ok(&m[0]);
    join(&m[1]);
    join_ok(&m[2]);
    assert_int_equal(m[0].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[2].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[1].rc, RESIL_EBACKEND);
    assert_int_equal(m[1].res.verdict, RESIL_STORE_NONE);
    assert_int_equal(stats_of(s).batches, 1);
    /* Its batchmates' keys were saved when they ran again on their own. */
    assert_int_equal(begin_key(f, f->s, "k-a", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(begin_key(f, f->s, "k-b", "a"), RESIL_STORE_IN_PROGRESS);
    done(m, 3);
    resil_store_free(s);
}

/* ---- PostgreSQL: a batch's failures at its commit and in its middle ------------- */

/* A deferred constraint trigger: the key "poison" is refused with 40001
 * only when its transaction commits, after every statement succeeded. */
static void poison_at_commit(const fixture *f)
{
    char sql[1200];
    snprintf(sql, sizeof sql,
             "CREATE FUNCTION %s_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
             " IF NEW.idempotency_key = 'poison' THEN"
             " RAISE EXCEPTION 'refused at commit' USING ERRCODE = '40001'; END IF;"
             " RETURN NULL; END $$;"
             "CREATE CONSTRAINT TRIGGER %s_at_commit AFTER INSERT ON %s"
             " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s_at_commit()",
             f->table, f->table, f->table, f->table);
    pg_exec(f, sql);
}

static void a_batch_whose_commit_fails_fails_every_member_and_claims_nothing(void **state)
{
    fixture *f = *state;
    uint64_t lease = claim(f, "k-c");
    poison_at_commit(f);
    resil_store *s = open_batched(f, 4, LONG_WINDOW, 1);
    member m[4] = {{.key = "k-a", .body = "a"}, {.key = "poison", .body = "a"},
                   {.key = "k-a", .body = "b"}, /* would be a mismatch, had k-a been saved */
                   {.key = "k-c", .op = COMPLETE, .lease = lease}};
    start_batch(m, 4, s);
    for (int i = 0; i < 4; i++) {
        join(&m[i]);
        assert_int_equal(m[i].rc, RESIL_EBUSY);
        assert_string_equal(m[i].error,
                            "store: postgres: ERROR:  refused at commit (SQLSTATE 40001, "
                            "attempts exhausted after 1 attempt, in a batch of 4)");
        assert_int_equal(m[i].res.verdict, RESIL_STORE_NONE);
    }
    /* None of the four reached the database. */
    assert_int_equal(begin_key(f, f->s, "k-a", "b"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    assert_int_equal(begin_key(f, f->s, "k-c", "a"), RESIL_STORE_IN_PROGRESS);
    done(m, 4);
    resil_store_free(s);
}

/* The first insert of the key "once" fails with `action` (PL/pgSQL); a
 * sequence, which no rollback undoes, makes it the first only. */
static void fail_once(const fixture *f, const char *action)
{
    char sql[1400];
    snprintf(sql, sizeof sql,
             "CREATE SEQUENCE %s_once;"
             "CREATE FUNCTION %s_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
             " IF NEW.idempotency_key = 'once' AND nextval('%s_once') = 1 THEN %s; END IF;"
             " RETURN NEW; END $$;"
             "CREATE TRIGGER %s_once BEFORE INSERT ON %s"
             " FOR EACH ROW EXECUTE FUNCTION %s_once()",
             f->table, f->table, f->table, action, f->table, f->table, f->table);
    pg_exec(f, sql);
}

/* A batch cut in its middle by `action`: its attempt rolls back whole,
 * the retry runs every member again, and each learns one result. */
static void batch_survives_a_failure_in_its_middle(fixture *f, const char *action)
{
    uint64_t lease = claim(f, "k-c");
    fail_once(f, action);
    resil_store *s = open_batched(f, 4, LONG_WINDOW, 0);
    member m[4] = {{.key = "k-a", .body = "a"}, {.key = "once", .body = "a"},
                   {.key = "k-a", .body = "b"},
                   {.key = "k-c", .op = COMPLETE, .lease = lease}};
    start_batch(m, 4, s);
    await_taken(s);
    resil_fake_clock_await_sleepers(f->fc, 1); /* the retry's backoff */
    resil_fake_clock_advance(f->fc, RESIL_S(1));
    for (int i = 0; i < 4; i++)
        join_ok(&m[i]);
    assert_int_equal(m[0].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[0].res.lease, first_lease_now(f));
    assert_int_equal(m[1].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[1].res.lease, first_lease_now(f));
    assert_int_equal(m[2].res.verdict, RESIL_STORE_MISMATCH);
    assert_int_equal(stats_of(s).batches, 1);
    assert_int_equal(begin_key(f, f->s, "k-c", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(begin_key(f, f->s, "once", "a"), RESIL_STORE_IN_PROGRESS);
    done(m, 4);
    resil_store_free(s);
}

static void a_serialization_failure_mid_batch_runs_the_batch_again(void **state)
{
    batch_survives_a_failure_in_its_middle(
        *state, "RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'");
}

static void a_connection_lost_mid_batch_runs_the_batch_again(void **state)
{
    batch_survives_a_failure_in_its_middle(*state,
                                           "PERFORM pg_terminate_backend(pg_backend_pid())");
}

/* ---- every write is batched alike ---------------------------------------------- */

static void renew_release_and_complete_share_one_batch(void **state)
{
    fixture *f = *state;
    uint64_t l1 = claim(f, "k-1"), l2 = claim(f, "k-2"), l3 = claim(f, "k-3");
    resil_store *s = open_batched(f, 4, LONG_WINDOW, 0);
    member m[4] = {{.key = "k-1", .op = COMPLETE, .lease = l1},
                   {.key = "k-2", .op = RELEASE, .lease = l2},
                   {.key = "k-3", .op = RENEW, .lease = l3},
                   {.key = "k-3", .op = RELEASE, .lease = l3 + 1}}; /* not its lease */
    for (uint32_t i = 0; i < 3; i++)
        start_queued(&m[i], s, i + 1);
    start(&m[3], s);
    for (int i = 0; i < 3; i++)
        join_ok(&m[i]);
    join(&m[3]);
    assert_int_equal(m[3].rc, RESIL_ESTATE); /* fenced, in the batch as alone */
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.largest, 4);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(begin_key(f, f->s, "k-2", "a"), RESIL_STORE_FIRST); /* released */
    /* The renewal counts from when its batch ran: now + the 10 s lease. */
    resil_fake_clock_advance(f->fc, RESIL_S(10) - RESIL_MS(1));
    assert_int_equal(begin_key(f, f->s, "k-3", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(f->res.lease_left, RESIL_MS(1));
    done(m, 4);
    resil_store_free(s);
}

/* ---- many callers at once --------------------------------------------------------- */

#define BUSY_THREADS 16
#define BUSY_ROUNDS 40

typedef struct busy_client {
    resil_store *s;
    int id, rounds;
    int firsts, completed; /* fresh claims (no takeover); completions taken */
    pthread_t t;
} busy_client;

static void busy_key(int id, int round, char *buf, size_t cap)
{
    snprintf(buf, cap, "busy-%d-%d", id, round);
}

static void *busy_run(void *arg)
{
    busy_client *c = arg;
    resil_store_result res;
    resil_store_result_init(&res);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_response r = {.status = 201, .body = completed_body,
                              .body_len = strlen(completed_body)};
    for (int i = 0; i < c->rounds; i++) {
        char key[32];
        busy_key(c->id, i, key, sizeof key);
        resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = key};
        if (resil_store_begin(c->s, &k, h, &res, NULL) != 0 ||
            res.verdict != RESIL_STORE_FIRST || res.lease != first_lease_at(res.created_at))
            continue;
        c->firsts++;
        c->completed += resil_store_complete(c->s, &k, res.lease, &r, NULL) == 0;
    }
    resil_store_result_free(&res);
    return NULL;
}

/* `threads` clients, each claiming and completing `rounds` keys of its
 * own as fast as it can, so batches form, fill and hand their lead on
 * while members are still being woken: every call learns its own
 * result, once. */
static void busy_store(fixture *f, void *(*client)(void *), int threads, int rounds)
{
    resil_store *s = open_batched(f, 4, 0, 0);
    busy_client c[BUSY_THREADS];
    for (int i = 0; i < threads; i++) {
        c[i] = (busy_client){.s = s, .id = i, .rounds = rounds};
        pthread_create(&c[i].t, NULL, client, &c[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(c[i].t, NULL);
        assert_int_equal(c[i].firsts, rounds);
        assert_int_equal(c[i].completed, rounds);
    }
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.calls, 2 * threads * rounds);
    assert_int_equal(st.queued, 0);
    assert_in_range(st.largest, 1, 4);
    for (int i = 0; i < threads; i++) {
        char key[32];
        busy_key(i, rounds - 1, key, sizeof key);
        assert_int_equal(begin_key(f, f->s, key, "a"), RESIL_STORE_REPLAY);
    }
    resil_store_free(s);
}

static void every_caller_of_a_busy_store_learns_its_own_results(void **state)
{
    busy_store(*state, busy_run, BUSY_THREADS, BUSY_ROUNDS);
}

/* ---- the purge ------------------------------------------------------------------ */

/* n completed records created at Unix time 1 s, long expired. */
static void seed_expired(const fixture *f, int n)
{
    char sql[800];
    if (on_sqlite(f)) {
        snprintf(sql, sizeof sql,
                 "WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < %d)"
                 " INSERT INTO %s SELECT 'acme', 'old', 'k-' || x, zeroblob(32), 201, '', '',"
                 " 1000, 1000, 1 FROM i",
                 n, f->table);
        sqlite3 *db = sqlite_admin(f);
        sqlite_exec(db, sql);
        sqlite3_close(db);
        return;
    }
    snprintf(sql, sizeof sql,
             "INSERT INTO %s SELECT 'acme', 'old', 'k-' || x, '\\x00'::bytea, 201, '', '',"
             " 1000, 1000, 1 FROM generate_series(1, %d) x",
             f->table, n);
    pg_exec(f, sql);
}

/* SQLite's chunks ride in batches (one writer: no sync of their own);
 * PostgreSQL's are transactions of their own, beside the batches. */
static void a_purge_deletes_in_chunks_that_ride_in_batches_on_sqlite_only(void **state)
{
    fixture *f = *state;
    seed_expired(f, 600);
    claim(f, "k-young"); /* one batch of its own, and kept */
    uint64_t deleted = 0;
    resil_err err = {0};
    if (resil_store_purge(f->s, &deleted, &err) != 0)
        fail_msg("purge: %s", err.message);
    assert_int_equal(deleted, 600);
    resil_store_batch_stats st = stats_of(f->s);
    /* the claim, then on SQLite chunks of 256, 256 and 88 */
    assert_int_equal(st.calls, on_sqlite(f) ? 1 + 3 : 1);
    assert_int_equal(begin_key(f, f->s, "k-young", "a"), RESIL_STORE_IN_PROGRESS);
}

/* ---- the asynchronous form -------------------------------------------------- */

static resil_store_key key_named(const char *key)
{
    return (resil_store_key){.tenant = "acme", .operation = "create-order", .key = key};
}

static void begin_async(resil_store *s, const char *key, const char *body, reply *r)
{
    resil_store_key k = key_named(key);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of(body, h);
    resil_err err = {0};
    if (resil_store_begin_async(s, &k, h, &r->res, on_reply, r, &err) != 0)
        fail_msg("begin_async '%s': %s", key, err.message);
}

static const resil_store_response completed_response = {
    .status = 201, .body = completed_body, .body_len = sizeof "{\"order\":1}" - 1};

static void complete_async(resil_store *s, const char *key, uint64_t lease, reply *r)
{
    resil_store_key k = key_named(key);
    resil_err err = {0};
    if (resil_store_complete_async(s, &k, lease, &completed_response, on_reply, r, &err) != 0)
        fail_msg("complete_async '%s': %s", key, err.message);
}

static void an_async_begin_answers_first_then_in_progress_on_the_same_key(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 64, 0, 0);
    reply r[2];
    reply_init(&r[0]);
    reply_init(&r[1]);
    begin_async(s, "k-1", "a", &r[0]);
    assert_int_equal(await_reply(&r[0]), 0);
    assert_int_equal(r[0].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(r[0].res.lease, first_lease_now(f));
    begin_async(s, "k-1", "a", &r[1]);
    assert_int_equal(await_reply(&r[1]), 0);
    assert_int_equal(r[1].res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_int_equal(r[1].res.lease_left, RESIL_S(10));
    assert_int_equal(calls_of(&r[0]), 1);
    assert_int_equal(calls_of(&r[1]), 1);
    resil_store_free(s);
    reply_free(&r[0]);
    reply_free(&r[1]);
}

static void renew_async(resil_store *s, const char *key, uint64_t lease, reply *r)
{
    resil_store_key k = key_named(key);
    resil_err err = {0};
    if (resil_store_renew_async(s, &k, lease, on_reply, r, &err) != 0)
        fail_msg("renew_async '%s': %s", key, err.message);
}

/* The renew goes through the batches as the other calls do: the lease
 * runs again from it, and a lease the key does not hold is refused in the
 * callback with the lost lease named. */
static void an_async_renew_extends_the_lease_and_refuses_one_not_held(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 64, 0, 0);
    reply r[4];
    for (int i = 0; i < 4; i++)
        reply_init(&r[i]);
    begin_async(s, "k-1", "a", &r[0]);
    assert_int_equal(await_reply(&r[0]), 0);
    uint64_t lease = r[0].res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(8));
    renew_async(s, "k-1", lease, &r[1]);
    assert_int_equal(await_reply(&r[1]), 0);
    resil_fake_clock_advance(f->fc, RESIL_S(4)); /* 12 s: past the first expiry */
    begin_async(s, "k-1", "a", &r[2]);
    assert_int_equal(await_reply(&r[2]), 0);
    assert_int_equal(r[2].res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(r[2].res.lease_left, RESIL_S(6));
    renew_async(s, "k-1", lease + 1, &r[3]);
    assert_int_equal(await_reply(&r[3]), RESIL_ESTATE);
    resil_err lost = {0};
    snprintf(lost.message, sizeof lost.message, "%s", r[3].error);
    assert_lease_lost(&lost, lease + 1, "k-1");
    for (int i = 0; i < 4; i++)
        assert_int_equal(calls_of(&r[i]), 1);
    resil_store_free(s);
    for (int i = 0; i < 4; i++)
        reply_free(&r[i]);
}

static void an_async_callback_never_runs_before_its_batch_committed(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 64, LONG_WINDOW, 0);
    reply r;
    reply_init(&r);
    begin_async(s, "k-1", "a", &r);
    resil_fake_clock_await_sleepers(f->fc, 1); /* a writer leads, waiting out the window */
    assert_int_equal(stats_of(s).queued, 1);
    assert_int_equal(calls_of(&r), 0);
    resil_fake_clock_advance(f->fc, LONG_WINDOW);
    assert_int_equal(await_reply(&r), 0);
    assert_int_equal(r.res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(r.res.created_at, CASE_WALL0 + LONG_WINDOW);
    /* Committed: another handle sees the claim. */
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(stats_of(s).batches, 1);
    resil_store_free(s);
    reply_free(&r);
}

/* The database refuses the first attempt and the retry waits out its
 * backoff on the manual clock: the commit is held back, and so is the
 * callback, until the retry committed. */
static void an_async_callback_waits_for_a_commit_the_database_holds_back(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 64, 0, 2);
    sqlite3 *held = refuse_for_now(f);
    reply r;
    reply_init(&r);
    begin_async(s, "poison", "a", &r);
    resil_fake_clock_await_sleepers(f->fc, 1); /* the first attempt failed: backing off */
    assert_int_equal(calls_of(&r), 0);
    assert_int_equal(stats_of(s).batches, 1);
    take_again(f, held);
    resil_fake_clock_advance(f->fc, RESIL_S(1)); /* past any backoff of the policy */
    assert_int_equal(await_reply(&r), 0);
    assert_int_equal(r.res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(r.res.lease, first_lease_now(f));
    assert_int_equal(calls_of(&r), 1);
    assert_int_equal(begin_key(f, f->s, "poison", "a"), RESIL_STORE_IN_PROGRESS);
    resil_store_free(s);
    reply_free(&r);
}

/* A claim whose callback submits its completion, as a loop's handler
 * that already knows the response would. */
typedef struct chain {
    resil_store *s;
    reply claimed, completed;
    int submit_rc;
} chain;

static void complete_from_callback(int rc, const resil_err *err, void *ud)
{
    chain *c = ud;
    resil_store_key k = key_named("k-1");
    c->submit_rc = rc;
    if (rc == 0)
        c->submit_rc = resil_store_complete_async(c->s, &k, c->claimed.res.lease,
                                                  &completed_response, on_reply,
                                                  &c->completed, NULL);
    on_reply(rc, err, &c->claimed);
}

static void a_callback_may_submit_the_next_async_call(void **state)
{
    fixture *f = *state;
    chain c = {.s = open_batched(f, 64, 0, 0)};
    reply_init(&c.claimed);
    reply_init(&c.completed);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_key k = key_named("k-1");
    assert_int_equal(resil_store_begin_async(c.s, &k, h, &c.claimed.res,
                                             complete_from_callback, &c, NULL),
                     0);
    assert_int_equal(await_reply(&c.claimed), 0);
    assert_int_equal(c.submit_rc, 0);
    assert_int_equal(await_reply(&c.completed), 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(stats_of(c.s).calls, 2);
    resil_store_free(c.s);
    reply_free(&c.claimed);
    reply_free(&c.completed);
}

static void async_and_blocking_calls_share_one_batch(void **state)
{
    fixture *f = *state;
    uint64_t lease = claim(f, "k-c");
    resil_store *s = open_batched(f, 4, LONG_WINDOW, 0);
    reply r[2];
    reply_init(&r[0]);
    reply_init(&r[1]);
    member m[2] = {{.key = "k-b", .body = "a"}, {.key = "k-c", .op = COMPLETE, .lease = lease}};
    begin_async(s, "k-a", "a", &r[0]); /* the head: a writer leads */
    await_queued(s, 1);
    start_queued(&m[0], s, 2);
    start_queued(&m[1], s, 3);
    begin_async(s, "k-d", "a", &r[1]); /* fills the batch */
    join_ok(&m[0]);
    join_ok(&m[1]);
    assert_int_equal(await_reply(&r[0]), 0);
    assert_int_equal(await_reply(&r[1]), 0);
    assert_int_equal(r[0].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(m[0].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(r[1].res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(begin_key(f, f->s, "k-c", "a"), RESIL_STORE_REPLAY);
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.calls, 4);
    assert_int_equal(resil_fake_clock_now(f->fc), 0); /* the batch filled: no window */
    done(m, 2);
    resil_store_free(s);
    reply_free(&r[0]);
    reply_free(&r[1]);
}

static void a_failing_batch_fails_every_async_call_alike_and_saves_none(void **state)
{
    fixture *f = *state;
    uint64_t lease = claim(f, "k-c");
    resil_store *s = open_batched(f, 3, LONG_WINDOW, 1);
    sqlite3 *held = refuse_for_now(f);
    reply r[3];
    for (int i = 0; i < 3; i++)
        reply_init(&r[i]);
    begin_async(s, "k-a", "a", &r[0]);
    await_queued(s, 1);
    begin_async(s, "poison", "a", &r[1]);
    await_queued(s, 2);
    complete_async(s, "k-c", lease, &r[2]);
    char expected[200];
    refused_batch_error(f, expected, sizeof expected);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(await_reply(&r[i]), RESIL_EBUSY);
        assert_string_equal(r[i].error, expected);
        assert_int_equal(r[i].res.verdict, RESIL_STORE_NONE);
    }
    take_again(f, held);
    assert_int_equal(begin_key(f, f->s, "k-a", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    assert_int_equal(begin_key(f, f->s, "k-c", "a"), RESIL_STORE_IN_PROGRESS);
    resil_store_free(s);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(calls_of(&r[i]), 1);
        reply_free(&r[i]);
    }
}

static void freeing_the_store_cancels_queued_async_calls_once_each(void **state)
{
    fixture *f = *state;
    uint64_t lease = claim(f, "k-c");
    resil_store *s = open_batched(f, 8, LONG_WINDOW, 0);
    reply r[3];
    for (int i = 0; i < 3; i++)
        reply_init(&r[i]);
    begin_async(s, "k-a", "a", &r[0]);
    begin_async(s, "k-b", "a", &r[1]);
    complete_async(s, "k-c", lease, &r[2]);
    resil_fake_clock_await_sleepers(f->fc, 1);
    await_queued(s, 3); /* the begins after their reads */
    resil_store_free(s);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(calls_of(&r[i]), 1);
        assert_int_equal(r[i].rc, RESIL_ECANCELED);
        assert_string_equal(r[i].error, "store: the store was freed before the call's batch ran");
        assert_int_equal(r[i].res.verdict, RESIL_STORE_NONE);
        reply_free(&r[i]);
    }
    assert_int_equal(resil_fake_clock_now(f->fc), 0); /* nobody waited the window out */
    assert_int_equal(begin_key(f, f->s, "k-a", "a"), RESIL_STORE_FIRST);
    assert_int_equal(begin_key(f, f->s, "k-c", "a"), RESIL_STORE_IN_PROGRESS);
}

static void an_async_call_is_refused_at_once_when_batching_is_off(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 1, 0, 0);
    reply r;
    reply_init(&r);
    resil_store_key k = key_named("k-1");
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_err err = {0};
    assert_int_equal(resil_store_begin_async(s, &k, h, &r.res, on_reply, &r, &err),
                     RESIL_EINVAL);
    assert_string_equal(err.message, "store: the asynchronous calls need group commit "
                                     "(store.batch_max >= 2, got batching off)");
    resil_store_free(s);
    assert_int_equal(calls_of(&r), 0);
    reply_free(&r);
}

static void async_calls_without_a_callback_are_refused(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 2, 0, 0);
    resil_store_result res;
    resil_store_key k = key_named("k-1");
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_err err = {0};
    assert_int_equal(resil_store_begin_async(s, &k, h, &res, NULL, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the callback is required");
    assert_int_equal(resil_store_renew_async(s, &k, 1, NULL, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the callback is required");
    resil_store_free(s);
}

/* ---- the asynchronous begin's read ---------------------------------------- */

static void assert_read_counts(resil_store *s, uint64_t read_batches, uint64_t reads,
                               uint64_t read_answers, uint64_t batches, uint64_t calls)
{
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.read_batches, read_batches);
    assert_int_equal(st.reads, reads);
    assert_int_equal(st.read_answers, read_answers);
    assert_int_equal(st.batches, batches);
    assert_int_equal(st.calls, calls);
}

/* A window that nobody ends: a begin that reached a write batch would
 * never be answered. */
static void an_async_replay_is_answered_by_its_read_without_a_write_batch(void **state)
{
    fixture *f = *state;
    complete_key(f, "k-1", claim(f, "k-1"));
    resil_store *s = open_batched(f, 64, LONG_WINDOW, 0);
    reply r;
    reply_init(&r);
    begin_async(s, "k-1", "a", &r);
    assert_int_equal(await_reply(&r), 0);
    assert_replays_completed_body(&(member){.res = r.res});
    assert_int_equal(r.res.created_at, CASE_WALL0);
    assert_read_counts(s, 1, 1, 1, 0, 0);
    resil_store_free(s);
    assert_int_equal(calls_of(&r), 1);
    reply_free(&r);
}

static void an_async_mismatch_and_a_live_lease_are_answered_by_the_read(void **state)
{
    fixture *f = *state;
    complete_key(f, "k-done", claim(f, "k-done"));
    claim(f, "k-live");
    resil_store *s = open_batched(f, 64, LONG_WINDOW, 0);
    resil_fake_clock_advance(f->fc, RESIL_S(4));
    reply r[2];
    reply_init(&r[0]);
    reply_init(&r[1]);
    begin_async(s, "k-done", "b", &r[0]);
    assert_int_equal(await_reply(&r[0]), 0);
    begin_async(s, "k-live", "a", &r[1]);
    assert_int_equal(await_reply(&r[1]), 0);
    assert_int_equal(r[0].res.verdict, RESIL_STORE_MISMATCH);
    assert_int_equal(r[1].res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_int_equal(r[1].res.lease, 0);
    assert_int_equal(r[1].res.lease_left, RESIL_S(6));
    assert_read_counts(s, 2, 2, 2, 0, 0);
    resil_store_free(s);
    reply_free(&r[0]);
    reply_free(&r[1]);
}

/* Only the claim may take an expired lease over: the read leaves it. */
static void an_async_begin_on_an_expired_lease_goes_on_to_the_claim(void **state)
{
    fixture *f = *state;
    claim(f, "k-1");
    resil_store *s = open_batched(f, 64, 0, 0);
    resil_fake_clock_advance(f->fc, RESIL_S(10));
    reply r;
    reply_init(&r);
    begin_async(s, "k-1", "a", &r);
    assert_int_equal(await_reply(&r), 0);
    assert_int_equal(r.res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(r.res.lease, first_lease_at(CASE_WALL0) + 1);
    assert_read_counts(s, 1, 1, 0, 1, 1);
    resil_store_free(s);
    reply_free(&r);
}

/* The read found no record; another handle claims and completes the key
 * before the write batch runs: the claim, not the read, decides. */
static void a_claim_that_meets_a_record_its_read_missed_answers_from_the_record(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 64, LONG_WINDOW, 0);
    reply r;
    reply_init(&r);
    begin_async(s, "k-1", "a", &r);
    resil_fake_clock_await_sleepers(f->fc, 1); /* read, queued, the window waited out */
    assert_int_equal(stats_of(s).queued, 1);
    complete_key(f, "k-1", claim(f, "k-1"));
    resil_fake_clock_advance(f->fc, LONG_WINDOW);
    assert_int_equal(await_reply(&r), 0);
    assert_replays_completed_body(&(member){.res = r.res});
    assert_int_equal(r.res.created_at, CASE_WALL0);
    assert_int_equal(r.res.lease, 0);
    assert_read_counts(s, 1, 1, 0, 1, 1);
    resil_store_free(s);
    assert_int_equal(calls_of(&r), 1);
    reply_free(&r);
}

/* Wait until the reader took its n-th batch. */
static void await_read_batches(resil_store *s, uint64_t n)
{
    for (long i = 0; i < 100000000L; i++) {
        if (stats_of(s).read_batches >= n)
            return;
        sched_yield();
    }
    fail_msg("the reader never took batch %llu", (unsigned long long)n);
}

/* A read's batch carries every begin queued while the reader was busy:
 * two keys in one read (one statement on PostgreSQL), each answered for
 * itself. The reader is held at the pool, whose one connection a write
 * batch keeps while it backs off from a refusal. */
static void begins_queued_behind_a_read_share_the_next_read(void **state)
{
    fixture *f = *state;
    complete_key(f, "k-done", claim(f, "k-done"));
    claim(f, "k-live");
    batching b = {.max = 64, .attempts = 2, .connections = 1};
    resil_fake_clock_set_manual(f->fc, true);
    resil_store *s = fixture_open(f, batched, &b);
    sqlite3 *held = refuse_for_now(f);
    reply r[4];
    for (int i = 0; i < 4; i++)
        reply_init(&r[i]);
    begin_async(s, "poison", "a", &r[0]);
    resil_fake_clock_await_sleepers(f->fc, 1); /* backing off, holding the connection */
    begin_async(s, "k-done", "a", &r[1]);
    await_read_batches(s, 2); /* taken alone, waiting for the connection */
    begin_async(s, "k-live", "a", &r[2]);
    begin_async(s, "k-done", "b", &r[3]);
    take_again(f, held);
    resil_fake_clock_advance(f->fc, RESIL_S(1));
    for (int i = 0; i < 4; i++)
        assert_int_equal(await_reply(&r[i]), 0);
    assert_int_equal(r[0].res.verdict, RESIL_STORE_FIRST);
    assert_replays_completed_body(&(member){.res = r[1].res});
    assert_int_equal(r[2].res.verdict, RESIL_STORE_IN_PROGRESS);
    assert_int_equal(r[3].res.verdict, RESIL_STORE_MISMATCH);
    assert_read_counts(s, 3, 4, 3, 1, 1);
    resil_store_free(s);
    for (int i = 0; i < 4; i++)
        reply_free(&r[i]);
}

typedef struct freeing {
    resil_store *s;
    pthread_t t;
} freeing;

static void *free_store(void *arg)
{
    resil_store_free(((freeing *)arg)->s);
    return NULL;
}

/* Freed while a read waits for the pool (its one connection held by a
 * write batch backing off): the read that runs still answers its replay,
 * the new key behind it is cancelled (in the reads' queue or in the
 * writes', whichever the free reaches first), each callback once. */
static void freeing_the_store_while_a_read_waits_answers_each_begin_once(void **state)
{
    fixture *f = *state;
    complete_key(f, "k-done", claim(f, "k-done"));
    batching b = {.max = 64, .window = LONG_WINDOW, .attempts = 2, .connections = 1};
    resil_fake_clock_set_manual(f->fc, true);
    resil_store *s = fixture_open(f, batched, &b);
    sqlite3 *held = refuse_for_now(f);
    reply r[3];
    for (int i = 0; i < 3; i++)
        reply_init(&r[i]);
    begin_async(s, "poison", "a", &r[0]);
    resil_fake_clock_await_sleepers(f->fc, 1); /* its batch's window */
    resil_fake_clock_advance(f->fc, LONG_WINDOW);
    resil_fake_clock_await_sleepers(f->fc, 1); /* refused: backing off, holding the connection */
    begin_async(s, "k-done", "a", &r[1]);
    await_read_batches(s, 2); /* taken, waiting for the connection */
    begin_async(s, "k-new", "a", &r[2]);
    freeing fr = {.s = s};
    pthread_create(&fr.t, NULL, free_store, &fr);
    resil_fake_clock_advance(f->fc, RESIL_S(1)); /* refused again: the batch gives up */
    pthread_join(fr.t, NULL);
    take_again(f, held);
    for (int i = 0; i < 3; i++)
        assert_int_equal(calls_of(&r[i]), 1);
    assert_int_equal(r[0].rc, RESIL_EBUSY);
    assert_int_equal(r[1].rc, 0);
    assert_replays_completed_body(&(member){.res = r[1].res});
    assert_int_equal(r[2].rc, RESIL_ECANCELED);
    assert_string_equal(r[2].error, "store: the store was freed before the call's batch ran");
    assert_int_equal(r[2].res.verdict, RESIL_STORE_NONE);
    assert_int_equal(begin_key(f, f->s, "k-new", "a"), RESIL_STORE_FIRST);
    for (int i = 0; i < 3; i++)
        reply_free(&r[i]);
}

typedef struct purging {
    resil_store *s;
    resil_cancel stop;
    uint64_t deleted;
    int rc;
    char error[256];
    pthread_t t;
} purging;

static void *run_purge(void *arg)
{
    purging *p = arg;
    resil_err err = {0};
    p->rc = resil_store_purge_cancellable(p->s, &p->stop, &p->deleted, &err);
    snprintf(p->error, sizeof p->error, "%s", err.message);
    return NULL;
}

/* The purge's chunks are refused until allowed: SQLite's write lock held
 * by another connection, or on PostgreSQL a trigger that fails every
 * delete with a serialization failure. Either way a chunk backs off on
 * the store's clock, so a test decides how long it takes. */
static sqlite3 *refuse_purge(const fixture *f)
{
    char sql[800];
    if (on_sqlite(f))
        return refuse_for_now(f);
    snprintf(sql, sizeof sql,
             "CREATE FUNCTION %s_held() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
             " RAISE EXCEPTION 'held' USING ERRCODE = '40001'; END $$;"
             "CREATE TRIGGER %s_held BEFORE DELETE ON %s"
             " FOR EACH ROW EXECUTE FUNCTION %s_held()",
             f->table, f->table, f->table, f->table);
    pg_exec(f, sql);
    return NULL;
}

static void allow_purge(const fixture *f, sqlite3 *held)
{
    char sql[200];
    if (held != NULL) {
        take_again(f, held);
        return;
    }
    snprintf(sql, sizeof sql, "DROP TRIGGER %s_held ON %s", f->table, f->table);
    pg_exec(f, sql);
}

/* A purge of 300 records (chunks of 256 and 44) on a batched store whose
 * first chunk is refused: it returns backing off on the manual clock. */
static resil_store *purge_held(fixture *f, purging *p, sqlite3 **held)
{
    seed_expired(f, 300);
    resil_store *s = open_batched(f, 64, 0, 4);
    *held = refuse_purge(f);
    *p = (purging){.s = s};
    assert_int_equal(resil_cancel_init(&p->stop, NULL), 0);
    pthread_create(&p->t, NULL, run_purge, p);
    resil_fake_clock_await_sleepers(f->fc, 1);
    return s;
}

/* A key write while the first chunk runs: on SQLite it queues behind the
 * chunk's batch, on PostgreSQL it commits beside the chunk. */
static void write_during_the_chunk(fixture *f, resil_store *s, member *m)
{
    *m = (member){.op = BEGIN, .key = "k-new", .body = "a"};
    start(m, s);
    if (on_sqlite(f))
        await_queued(s, 1);
    else
        join_ok(m);
}

/* The chunk took `took` (from its start to its commit, on the store's
 * clock); the purge is then in its wait. */
static resil_duration purge_wait_after(fixture *f, sqlite3 *held, resil_duration took)
{
    allow_purge(f, held);
    resil_fake_clock_advance(f->fc, took); /* past the backoff */
    resil_fake_clock_await_sleepers(f->fc, 1);
    return resil_fake_clock_next_wake(f->fc) - resil_fake_clock_now(f->fc);
}

static void finish_purge(fixture *f, resil_store *s, purging *p, member *m)
{
    resil_fake_clock_advance(f->fc, RESIL_S(1));
    pthread_join(p->t, NULL);
    if (on_sqlite(f))
        join_ok(m);
    assert_int_equal(p->rc, 0);
    assert_int_equal(p->deleted, 300);
    assert_int_equal(m->res.verdict, RESIL_STORE_FIRST);
    resil_store_result_free(&m->res);
    resil_cancel_destroy(&p->stop);
    resil_store_free(s);
}

/* While key writes come, the purge keeps to 10 % of the time: a chunk
 * that took 20 ms is followed by 180 ms of waiting. */
static void a_chunk_that_took_t_while_key_writes_came_is_followed_by_nine_t(void **state)
{
    fixture *f = *state;
    purging p;
    member m;
    sqlite3 *held;
    resil_store *s = purge_held(f, &p, &held);
    write_during_the_chunk(f, s, &m);
    assert_int_equal(purge_wait_after(f, held, RESIL_MS(20)), RESIL_MS(180));
    finish_purge(f, s, &p, &m);
}

/* However long a chunk took, the wait after it is at most a second. */
static void the_wait_after_a_chunk_is_at_most_a_second(void **state)
{
    fixture *f = *state;
    purging p;
    member m;
    sqlite3 *held;
    resil_store *s = purge_held(f, &p, &held);
    write_during_the_chunk(f, s, &m);
    assert_int_equal(purge_wait_after(f, held, RESIL_MS(200)), RESIL_S(1));
    finish_purge(f, s, &p, &m);
}

/* Without key writes the chunks run back to back: the purge ends after
 * the first chunk's 20 ms with no wait, which the clock's sleeps (the
 * backoff alone) tell. */
static void an_idle_store_purges_its_chunks_back_to_back(void **state)
{
    fixture *f = *state;
    purging p;
    sqlite3 *held;
    resil_store *s = purge_held(f, &p, &held);
    size_t sleeps = resil_fake_clock_sleep_count(f->fc);
    allow_purge(f, held);
    resil_fake_clock_advance(f->fc, RESIL_MS(20));
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.deleted, 300);
    assert_int_equal(resil_fake_clock_sleep_count(f->fc), sleeps);
    resil_cancel_destroy(&p.stop);
    resil_store_free(s);
}

/* Freed while the purge waits between chunks (on another thread): the
 * wait ends without the clock moving, the purge stops with what it
 * deleted, and only then does the store go. */
static void freeing_the_store_during_a_purges_wait_ends_the_purge(void **state)
{
    fixture *f = *state;
    purging p;
    member m;
    sqlite3 *held;
    resil_store *s = purge_held(f, &p, &held);
    write_during_the_chunk(f, s, &m);
    assert_int_equal(purge_wait_after(f, held, RESIL_MS(20)), RESIL_MS(180));
    if (on_sqlite(f))
        join_ok(&m);
    resil_store_result_free(&m.res);
    freeing fr = {.s = s};
    pthread_create(&fr.t, NULL, free_store, &fr);
    pthread_join(fr.t, NULL);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, RESIL_ECANCELED);
    assert_string_equal(p.error, "store: the store was freed during the purge");
    assert_int_equal(p.deleted, 256);
    resil_cancel_destroy(&p.stop);
}

/* Its token fired while the purge waits between chunks: the wait ends
 * without the clock moving, and the purge stops with what it deleted. */
static void a_purge_whose_token_fires_in_its_wait_stops_there(void **state)
{
    fixture *f = *state;
    purging p;
    member m;
    sqlite3 *held;
    resil_store *s = purge_held(f, &p, &held);
    write_during_the_chunk(f, s, &m);
    assert_int_equal(purge_wait_after(f, held, RESIL_MS(20)), RESIL_MS(180));
    resil_cancel_fire(&p.stop);
    pthread_join(p.t, NULL);
    assert_int_equal(p.rc, RESIL_ECANCELED);
    assert_string_equal(p.error, "store: the purge was stopped");
    assert_int_equal(p.deleted, 256);
    if (on_sqlite(f))
        join_ok(&m);
    resil_store_result_free(&m.res);
    resil_cancel_destroy(&p.stop);
    resil_store_free(s);
}

#define ASYNC_THREADS 8

/* One thread's claims and completions, each submitted asynchronously
 * and awaited before the next. */
static void *async_client(void *arg)
{
    busy_client *c = arg;
    for (int i = 0; i < c->rounds; i++) {
        char key[32];
        busy_key(c->id, i, key, sizeof key);
        reply b, d;
        reply_init(&b);
        reply_init(&d);
        begin_async(c->s, key, "a", &b);
        if (await_reply(&b) == 0 && b.res.verdict == RESIL_STORE_FIRST &&
            b.res.lease == first_lease_at(b.res.created_at)) {
            c->firsts++;
            complete_async(c->s, key, b.res.lease, &d);
            c->completed += await_reply(&d) == 0;
        }
        reply_free(&b);
        reply_free(&d);
    }
    return NULL;
}

/* The same from threads that submit asynchronously (under TSan in
 * `make sanitize`). */
static void every_async_caller_of_a_busy_store_learns_its_own_results(void **state)
{
    busy_store(*state, async_client, ASYNC_THREADS, BUSY_ROUNDS);
}

/* ---- the replay cache -------------------------------------------------------- */

static void cached(resil_store_opts *o, void *ud)
{
    o->batch_max = 64;
    o->busy_timeout = 0;
    o->cache_bytes = *(const size_t *)ud;
}

static resil_store *open_cached(fixture *f, size_t bytes)
{
    resil_fake_clock_set_manual(f->fc, true);
    return fixture_open(f, cached, &bytes);
}

static void assert_cache_counts(resil_store *s, uint64_t read_answers, uint64_t batches,
                                uint64_t cache_hits)
{
    resil_store_batch_stats st = stats_of(s);
    assert_int_equal(st.read_answers, read_answers);
    assert_int_equal(st.batches, batches);
    assert_int_equal(st.cache_hits, cache_hits);
}

static resil_store_verdict begin_async_now(resil_store *s, const char *key, const char *body,
                                           reply *r)
{
    begin_async(s, key, body, r);
    assert_int_equal(await_reply(r), 0);
    return r->res.verdict;
}

/* Claim and complete `key` on s, each its own write batch. */
static void complete_here(fixture *f, resil_store *s, const char *key)
{
    assert_int_equal(begin_key(f, s, key, "a"), RESIL_STORE_FIRST);
    complete_on(s, key, f->res.lease);
}

static void a_replay_of_a_key_this_store_completed_needs_no_read_and_no_write(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 1 << 20);
    complete_here(f, s, "k-1");
    assert_cache_counts(s, 0, 2, 0);
    reply r;
    reply_init(&r);
    assert_int_equal(begin_async_now(s, "k-1", "a", &r), RESIL_STORE_REPLAY);
    assert_replays_completed_body(&(member){.res = r.res});
    assert_int_equal(r.res.created_at, CASE_WALL0);
    assert_cache_counts(s, 0, 2, 1);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_cache_counts(s, 0, 2, 2);
    resil_store_free(s);
    reply_free(&r);
}

static void a_replay_of_a_key_another_handle_completed_is_read_once_then_cached(void **state)
{
    fixture *f = *state;
    complete_key(f, "k-1", claim(f, "k-1"));
    resil_store *s = open_cached(f, 1 << 20);
    reply r[2];
    reply_init(&r[0]);
    reply_init(&r[1]);
    assert_int_equal(begin_async_now(s, "k-1", "a", &r[0]), RESIL_STORE_REPLAY);
    assert_cache_counts(s, 1, 0, 0);
    assert_int_equal(begin_async_now(s, "k-1", "a", &r[1]), RESIL_STORE_REPLAY);
    assert_replays_completed_body(&(member){.res = r[1].res});
    assert_int_equal(r[1].res.created_at, CASE_WALL0);
    assert_cache_counts(s, 1, 0, 1);
    resil_store_free(s);
    reply_free(&r[0]);
    reply_free(&r[1]);
}

static void a_mismatch_of_a_cached_key_is_answered_from_the_cache(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 1 << 20);
    complete_here(f, s, "k-1");
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    reply r;
    reply_init(&r);
    assert_int_equal(begin_async_now(s, "k-1", "b", &r), RESIL_STORE_MISMATCH);
    assert_int_equal(r.res.created_at, CASE_WALL0);
    assert_int_equal(r.res.body_len, 0);
    assert_cache_counts(s, 0, 2, 1);
    resil_store_free(s);
    reply_free(&r);
}

/* The fixture keeps records 1 h: the cached copy answers until the
 * instant the purge may delete the record, and never from then on. */
static void a_cached_record_is_not_used_at_its_expiry(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 1 << 20);
    complete_here(f, s, "k-1");
    resil_fake_clock_advance(f->fc, RESIL_S(3600) - RESIL_MS(1));
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_cache_counts(s, 0, 2, 1);
    resil_fake_clock_advance(f->fc, RESIL_MS(1));
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY); /* the database's */
    assert_cache_counts(s, 0, 2, 1);
    resil_fake_clock_advance(f->fc, RESIL_MS(1));
    uint64_t deleted = 0;
    resil_err err = {0};
    if (resil_store_purge(s, &deleted, &err) != 0)
        fail_msg("purge: %s", err.message);
    assert_int_equal(deleted, 1);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.created_at, CASE_WALL0 + RESIL_S(3600) + RESIL_MS(1));
    assert_cache_counts(s, 0, on_sqlite(f) ? 4 : 3, 1);
    resil_store_free(s);
}

/* An entry costs 192 bytes besides its key and its response; the key
 * "k-N" is "acme", "create-order", "k-N" with their terminators (22
 * bytes). A completed one holds the 11-byte body too: 225 bytes; a claim
 * 214. */
#define COMPLETED_COST (192 + 22 + 11)
#define CLAIM_COST (192 + 22)

static void eviction_keeps_the_cache_within_its_bound(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 3 * COMPLETED_COST);
    const char *keys[] = {"k-1", "k-2", "k-3", "k-4"};
    for (size_t i = 0; i < 4; i++)
        complete_here(f, s, keys[i]);
    for (size_t i = 4; i-- > 1;)
        assert_int_equal(begin_key(f, s, keys[i], "a"), RESIL_STORE_REPLAY);
    assert_cache_counts(s, 0, 8, 3);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY); /* the database's */
    assert_cache_counts(s, 0, 8, 3);
    resil_store_free(s);
}

/* A bound of three claims: the fourth evicts the first, whose completion
 * then has no claim to turn into the record (its replay is read), while
 * the fourth's is kept. */
static void claims_count_their_bookkeeping_against_the_bound(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 3 * CLAIM_COST + CLAIM_COST / 2);
    const char *keys[] = {"k-1", "k-2", "k-3", "k-4"};
    uint64_t leases[4];
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(begin_key(f, s, keys[i], "a"), RESIL_STORE_FIRST);
        leases[i] = f->res.lease;
    }
    complete_on(s, "k-1", leases[0]);
    complete_on(s, "k-4", leases[3]);
    assert_int_equal(begin_key(f, s, "k-4", "a"), RESIL_STORE_REPLAY);
    assert_cache_counts(s, 0, 6, 1);
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY); /* the database's */
    assert_cache_counts(s, 0, 6, 1);
    resil_store_free(s);
}

static resil_store_verdict begin_cached(resil_store *s, const char *key, const char *body,
                                        resil_store_result *res)
{
    resil_store_key k = key_named(key);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of(body, h);
    resil_err err = {0};
    if (resil_store_begin_cached(s, &k, h, res, &err) != 0)
        fail_msg("begin_cached '%s': %s", key, err.message);
    return res->verdict;
}

/* The answer is there when the call returns, and nothing reached a read
 * or a write batch (the counts are those of the claim and the complete). */
static void a_cached_begin_answers_a_completed_key_before_it_returns(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 1 << 20);
    complete_here(f, s, "k-1");
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(begin_cached(s, "k-1", "a", &res), RESIL_STORE_REPLAY);
    assert_replays_completed_body(&(member){.res = res});
    assert_int_equal(res.created_at, CASE_WALL0);
    assert_int_equal(begin_cached(s, "k-1", "b", &res), RESIL_STORE_MISMATCH);
    assert_int_equal(res.created_at, CASE_WALL0);
    assert_int_equal(res.body_len, 0);
    assert_read_counts(s, 0, 0, 0, 2, 2);
    assert_cache_counts(s, 0, 2, 2);
    resil_store_free(s);
    resil_store_result_free(&res);
}

/* A key with no record, one in progress (claimed here), one completed by
 * another handle (the cache has not seen it): each is NONE, and nothing
 * was read or written for it. */
static void a_cached_begin_leaves_every_other_key_to_the_begin(void **state)
{
    fixture *f = *state;
    complete_key(f, "k-elsewhere", claim(f, "k-elsewhere"));
    resil_store *s = open_cached(f, 1 << 20);
    assert_int_equal(begin_key(f, s, "k-claimed", "a"), RESIL_STORE_FIRST);
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(begin_cached(s, "k-none", "a", &res), RESIL_STORE_NONE);
    assert_int_equal(begin_cached(s, "k-claimed", "a", &res), RESIL_STORE_NONE);
    assert_int_equal(begin_cached(s, "k-elsewhere", "a", &res), RESIL_STORE_NONE);
    assert_read_counts(s, 0, 0, 0, 1, 1);
    assert_cache_counts(s, 0, 1, 0);
    resil_store_free(s);
    resil_store_result_free(&res);
}

static void a_cached_begin_with_the_cache_off_is_always_none(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 0);
    complete_here(f, s, "k-1");
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(begin_cached(s, "k-1", "a", &res), RESIL_STORE_NONE);
    assert_cache_counts(s, 0, 2, 0);
    resil_store_free(s);
    resil_store_result_free(&res);
}

static void a_cached_begin_refuses_a_bad_key(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 1 << 20);
    resil_store_key k = key_named("");
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_store_result res;
    resil_store_result_init(&res);
    resil_err err = {0};
    assert_int_equal(resil_store_begin_cached(s, &k, h, &res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the key must not be empty");
    assert_int_equal(res.verdict, RESIL_STORE_NONE);
    resil_store_free(s);
}

/* The cache answers blocking begins without batching too, and says so. */
static void the_cache_counts_its_hits_with_batching_off(void **state)
{
    fixture *f = *state;
    resil_store *s = open_batched(f, 1, 0, 0);
    complete_here(f, s, "k-1");
    assert_int_equal(begin_key(f, s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_cache_counts(s, 0, 0, 1);
    resil_store_free(s);
}

/* ---- the replay cache under concurrent begins ------------------------------ */

#define SHARED_KEYS 8
#define SHARED_THREADS 8
#define SHARED_ROUNDS 100

typedef struct shared_client {
    resil_store *s;
    int id;
    int firsts, wrong; /* keys this client claimed; replays of another key's answer */
    pthread_t t;
} shared_client;

/* The key's answer is its own name, so that a replay shows whose it is. */
static int begin_shared(shared_client *c, const char *key, resil_store_result *res, bool cached)
{
    resil_store_key k = key_named(key);
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    int rc = cached ? resil_store_begin_cached(c->s, &k, h, res, NULL) : 0;
    if (rc == 0 && (!cached || res->verdict == RESIL_STORE_NONE))
        rc = resil_store_begin(c->s, &k, h, res, NULL);
    if (rc != 0 || res->verdict != RESIL_STORE_FIRST)
        return rc;
    resil_store_response r = {.status = 201, .body = key, .body_len = strlen(key)};
    c->firsts++;
    return resil_store_complete(c->s, &k, res->lease, &r, NULL);
}

static void *shared_run(void *arg)
{
    shared_client *c = arg;
    resil_store_result res;
    resil_store_result_init(&res);
    for (int i = 0; i < SHARED_ROUNDS; i++) {
        char key[32];
        snprintf(key, sizeof key, "shared-%d", (c->id + i) % SHARED_KEYS);
        if (begin_shared(c, key, &res, i % 2 == 0) != 0)
            fail_msg("begin '%s' failed", key);
        bool other = res.verdict == RESIL_STORE_REPLAY &&
                     (res.body_len != strlen(key) || memcmp(res.body, key, res.body_len) != 0);
        c->wrong += other || res.verdict == RESIL_STORE_MISMATCH;
    }
    resil_store_result_free(&res);
    return NULL;
}

/* The store as a server runs it: SQLite waits out a lock itself (a new
 * pooled connection's set-up meets the writer's), and the fake clock is
 * not manual, so a retry's backoff is virtual time passing rather than a
 * sleep nobody ends (milliseconds: no lease of 10 s runs out). */
static void shared_cache(resil_store_opts *o, void *ud)
{
    o->batch_max = 64;
    o->cache_bytes = *(const size_t *)ud;
}

/* Threads begin the same few keys at once through a cache that holds
 * fewer of them than they use, so entries are learnt, hit and evicted
 * concurrently: each key is claimed once, and every replay is its own
 * key's answer. */
static void concurrent_begins_through_an_evicting_cache_replay_each_keys_own_answer(void **state)
{
    fixture *f = *state;
    size_t bound = 3 * (192 + 40);
    resil_store *s = fixture_open(f, shared_cache, &bound);
    shared_client c[SHARED_THREADS];
    for (int i = 0; i < SHARED_THREADS; i++) {
        c[i] = (shared_client){.s = s, .id = i};
        pthread_create(&c[i].t, NULL, shared_run, &c[i]);
    }
    int firsts = 0;
    for (int i = 0; i < SHARED_THREADS; i++) {
        pthread_join(c[i].t, NULL);
        firsts += c[i].firsts;
        assert_int_equal(c[i].wrong, 0);
    }
    assert_int_equal(firsts, SHARED_KEYS);
    resil_store_free(s);
}

static void with_the_cache_off_every_replay_is_read(void **state)
{
    fixture *f = *state;
    resil_store *s = open_cached(f, 0);
    complete_here(f, s, "k-1");
    reply r;
    reply_init(&r);
    assert_int_equal(begin_async_now(s, "k-1", "a", &r), RESIL_STORE_REPLAY);
    assert_replays_completed_body(&(member){.res = r.res});
    assert_read_counts(s, 1, 1, 1, 2, 2);
    assert_cache_counts(s, 1, 2, 0);
    resil_store_free(s);
    reply_free(&r);
}

#define BATCH_CASE(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)

static const struct CMUnitTest cases[] = {
    BATCH_CASE(each_member_of_a_batch_learns_its_own_verdict),
    BATCH_CASE(every_verdict_in_one_batch_is_the_one_sequential_calls_give),
    BATCH_CASE(a_batch_carries_at_most_batch_max_calls),
    BATCH_CASE(a_lone_call_runs_when_the_window_ends),
    BATCH_CASE(a_full_batch_runs_before_its_window_ends),
    BATCH_CASE(replays_and_mismatches_never_wait_for_a_batch),
    BATCH_CASE(a_failing_batch_fails_every_member_and_saves_none),
    BATCH_CASE(a_member_the_database_refuses_for_good_fails_alone),
    BATCH_CASE(renew_release_and_complete_share_one_batch),
    BATCH_CASE(every_caller_of_a_busy_store_learns_its_own_results),
    BATCH_CASE(a_purge_deletes_in_chunks_that_ride_in_batches_on_sqlite_only),
    BATCH_CASE(a_chunk_that_took_t_while_key_writes_came_is_followed_by_nine_t),
    BATCH_CASE(the_wait_after_a_chunk_is_at_most_a_second),
    BATCH_CASE(an_idle_store_purges_its_chunks_back_to_back),
    BATCH_CASE(freeing_the_store_during_a_purges_wait_ends_the_purge),
    BATCH_CASE(a_purge_whose_token_fires_in_its_wait_stops_there),
    BATCH_CASE(an_async_begin_answers_first_then_in_progress_on_the_same_key),
    BATCH_CASE(an_async_renew_extends_the_lease_and_refuses_one_not_held),
    BATCH_CASE(an_async_callback_never_runs_before_its_batch_committed),
    BATCH_CASE(an_async_callback_waits_for_a_commit_the_database_holds_back),
    BATCH_CASE(a_callback_may_submit_the_next_async_call),
    BATCH_CASE(async_and_blocking_calls_share_one_batch),
    BATCH_CASE(a_failing_batch_fails_every_async_call_alike_and_saves_none),
    BATCH_CASE(freeing_the_store_cancels_queued_async_calls_once_each),
    BATCH_CASE(an_async_call_is_refused_at_once_when_batching_is_off),
    BATCH_CASE(async_calls_without_a_callback_are_refused),
    BATCH_CASE(every_async_caller_of_a_busy_store_learns_its_own_results),
    BATCH_CASE(an_async_replay_is_answered_by_its_read_without_a_write_batch),
    BATCH_CASE(an_async_mismatch_and_a_live_lease_are_answered_by_the_read),
    BATCH_CASE(an_async_begin_on_an_expired_lease_goes_on_to_the_claim),
    BATCH_CASE(a_claim_that_meets_a_record_its_read_missed_answers_from_the_record),
    BATCH_CASE(begins_queued_behind_a_read_share_the_next_read),
    BATCH_CASE(freeing_the_store_while_a_read_waits_answers_each_begin_once),
    BATCH_CASE(a_replay_of_a_key_this_store_completed_needs_no_read_and_no_write),
    BATCH_CASE(a_replay_of_a_key_another_handle_completed_is_read_once_then_cached),
    BATCH_CASE(a_mismatch_of_a_cached_key_is_answered_from_the_cache),
    BATCH_CASE(a_cached_record_is_not_used_at_its_expiry),
    BATCH_CASE(eviction_keeps_the_cache_within_its_bound),
    BATCH_CASE(with_the_cache_off_every_replay_is_read),
    BATCH_CASE(claims_count_their_bookkeeping_against_the_bound),
    BATCH_CASE(a_cached_begin_answers_a_completed_key_before_it_returns),
    BATCH_CASE(a_cached_begin_leaves_every_other_key_to_the_begin),
    BATCH_CASE(a_cached_begin_with_the_cache_off_is_always_none),
    BATCH_CASE(a_cached_begin_refuses_a_bad_key),
    BATCH_CASE(the_cache_counts_its_hits_with_batching_off),
    BATCH_CASE(concurrent_begins_through_an_evicting_cache_replay_each_keys_own_answer),
};

static const struct CMUnitTest pg_cases[] = {
    BATCH_CASE(a_batch_whose_commit_fails_fails_every_member_and_claims_nothing),
    BATCH_CASE(a_serialization_failure_mid_batch_runs_the_batch_again),
    BATCH_CASE(a_connection_lost_mid_batch_runs_the_batch_again),
};

int main(void)
{
    dir = test_tmpdir();
    server = pg_server_start();
    if (dir == NULL || server == NULL) {
        fprintf(stderr, "test_batch: no temporary directory or no PostgreSQL\n");
        return 1;
    }
    size_t n = sizeof cases / sizeof cases[0];
    store_cases_url = sqlite_url;
    int failed = _cmocka_run_group_tests("store.batch, SQLite", cases, n, NULL, NULL);
    store_cases_url = pg_url;
    failed += _cmocka_run_group_tests("store.batch, PostgreSQL", cases, n, NULL, NULL);
    failed += _cmocka_run_group_tests("store.batch, PostgreSQL's failures", pg_cases,
                                      sizeof pg_cases / sizeof pg_cases[0], NULL, NULL);
    pg_server_stop(server);
    test_rmtree(dir);
    free(dir);
    return failed;
}
