/*
 * store_cases.h — the store's behaviour, written once and run against each
 * backend. test_sqlite.c and test_pg.c set the URL and run these cases
 * next to their backend-specific ones, so both databases are held to one
 * specification.
 */
#ifndef RESIL_TEST_STORE_CASES_H
#define RESIL_TEST_STORE_CASES_H

#include <pthread.h>
#include <sys/resource.h>

#include "test.h"

#include "resil/store.h"

/* Unix time the fake clock starts at (2023-11-14T22:13:20Z), in ns. */
#define CASE_WALL0 RESIL_S(1700000000)

/* The backend the cases run against: a function returning a fresh URL
 * (for SQLite a new file, for PostgreSQL the test server) into buf. */
typedef void (*store_url_fn)(char *buf, size_t cap);
extern store_url_fn store_cases_url;

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
    char url[512];
    char table[64];
    resil_store *s;
    resil_store_result res;
} fixture;

typedef void (*opts_tweak)(resil_store_opts *o, void *ud);

/* cmocka setup/teardown: a fake clock at CASE_WALL0, a fresh URL and table,
 * and a store opened on them (lease 10 s, retention 1 h). */
int fixture_setup(void **state);
int fixture_teardown(void **state);
/* Another handle on the fixture's database and table, options tweaked. */
resil_store *fixture_open(fixture *f, opts_tweak tweak, void *ud);

/* Shorthands used throughout the cases. */
void hash_of(const char *body, uint8_t out[RESIL_SHA256_LEN]);
resil_store_verdict begin_key(fixture *f, resil_store *s, const char *key, const char *body);
/* The lease number of a record created at wall time `created_at` (Unix
 * ns): its milliseconds times 2^20, plus 1; each takeover adds 1
 * (docs/idempotency.md, "Leases"). first_lease_now: of one created now. */
uint64_t first_lease_at(int64_t created_at);
uint64_t first_lease_now(const fixture *f);
/* err says that `lease` no longer owns `key`. */
void assert_lease_lost(const resil_err *err, uint64_t lease, const char *key);

/* What one asynchronous call's callback said, and how often it ran: pass
 * on_reply with the reply as ud, and &reply.res as begin's result. */
typedef struct reply {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls, rc; /* rc is 1 until the callback ran */
    char error[256];
    resil_store_result res;
} reply;

void reply_init(reply *r);
void reply_free(reply *r);
void on_reply(int rc, const resil_err *err, void *ud);
int calls_of(reply *r);
/* Wait for the callback (a condition variable, no timing); its rc. */
int await_reply(reply *r);

/* Root writes through a file's mode (CAP_DAC_OVERRIDE): while a mode must
 * count, file_modes_hold() puts that capability aside for the calling
 * thread (threads it starts meanwhile inherit that), and
 * file_modes_release() takes it back. A process without it has nothing
 * to put aside. */
typedef struct file_modes_held {
    uint32_t caps[6]; /* the thread's capability sets as they were */
} file_modes_held;

file_modes_held file_modes_hold(void);
void file_modes_release(const file_modes_held *was);

/* RLIMIT_FSIZE 0, SIGXFSZ ignored: every write past a file's end fails
 * (EFBIG), as on a dead or full disk, without root, from
 * file_writes_refuse() until file_writes_release(). */
typedef struct file_writes_held {
    struct rlimit was;
    void (*sigxfsz)(int);
} file_writes_held;

file_writes_held file_writes_refuse(void);
void file_writes_release(const file_writes_held *was);

/* Run the shared cases, then a backend's own, as one cmocka group, twice:
 * with the stores' default group commit, then with one transaction per
 * call. Returns the number of failures (or 1 when out of memory). */
int store_cases_run(const char *group, const struct CMUnitTest *own, size_t n_own);

#endif
