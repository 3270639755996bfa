/*
 * store_cases.c — the store's specification, one behaviour per case, run
 * by test_sqlite.c and test_pg.c against their real databases.
 *
 * Time is the fake clock's: leases expire and records age because a case
 * advances virtual time, never because it sleeps. Each case gets its own
 * table (and for SQLite its own file), so cases cannot see each other.
 */
#include "store_cases.h"

#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

store_url_fn store_cases_url;

static int next_table;
/* store_cases_run() runs every case twice: with the default group commit,
 * then with one transaction per call (batch_max 1). */
static uint32_t batch_max_override;

static void case_opts(fixture *f, resil_store_opts *o)
{
    resil_store_opts_default(o);
    o->url = f->url;
    o->table = f->table;
    o->clock = f->clock;
    o->lease = RESIL_S(10);
    o->retention = RESIL_S(3600);
    if (batch_max_override != 0)
        o->batch_max = batch_max_override;
}

resil_store *fixture_open(fixture *f, opts_tweak tweak, void *ud)
{
    resil_store_opts o;
    case_opts(f, &o);
    if (tweak != NULL)
        tweak(&o, ud);
    resil_store *s = NULL;
    resil_err err = {0};
    int rc = resil_store_new(&o, &s, &err);
    if (rc != 0)
        fail_msg("resil_store_new: %s", err.message);
    return s;
}

int fixture_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(0, CASE_WALL0, &f->fc) != 0)
        return -1;
    f->clock = resil_fake_clock_clock(f->fc);
    store_cases_url(f->url, sizeof f->url);
    snprintf(f->table, sizeof f->table, "resil_case_%d_%d", (int)getpid(), next_table++);
    resil_store_result_init(&f->res);
    f->s = fixture_open(f, NULL, NULL);
    *state = f;
    return f->s ? 0 : -1;
}

int fixture_teardown(void **state)
{
    fixture *f = *state;
    resil_store_free(f->s);
    resil_store_result_free(&f->res);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

void hash_of(const char *body, uint8_t out[RESIL_SHA256_LEN])
{
    resil_store_request_hash("POST", "/orders", body, strlen(body), out);
}

resil_store_verdict begin_key(fixture *f, resil_store *s, const char *key, const char *body)
{
    uint8_t h[RESIL_SHA256_LEN];
    hash_of(body, h);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = key};
    resil_err err = {0};
    int rc = resil_store_begin(s, &k, h, &f->res, &err);
    if (rc != 0)
        fail_msg("resil_store_begin: %s", err.message);
    return f->res.verdict;
}

uint64_t first_lease_at(int64_t created_at)
{
    return ((uint64_t)(created_at / 1000000) << 20) + 1;
}

uint64_t first_lease_now(const fixture *f)
{
    return first_lease_at(resil_clock_wall_now(f->clock));
}

void assert_lease_lost(const resil_err *err, uint64_t lease, const char *key)
{
    char want[200];
    snprintf(want, sizeof want, "lease %llu no longer owns key '%s'",
             (unsigned long long)lease, key);
    if (strstr(err->message, want) == NULL)
        fail_msg("expected \"%s\" in \"%s\"", want, err->message);
}

static const resil_store_key K1 = {.tenant = "acme", .operation = "create-order", .key = "k-1"};

static void complete_with(fixture *f, const resil_store_key *k, uint64_t lease, int status,
                          const char *headers, const void *body, size_t body_len)
{
    resil_store_response r = {.status = status, .headers = headers,
                              .headers_len = headers ? strlen(headers) : 0,
                              .body = body, .body_len = body_len};
    resil_err err = {0};
    int rc = resil_store_complete(f->s, k, lease, &r, &err);
    if (rc != 0)
        fail_msg("resil_store_complete: %s", err.message);
}

/* ---- the four outcomes --------------------------------------------------- */

static void first_begin_owns_the_key_with_the_lease_its_creation_instant_gives(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":1}"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_at(CASE_WALL0));
    assert_int_equal(f->res.created_at, CASE_WALL0);
}

/* Milliseconds of today's Unix time times a million do not all fit a
 * double's 53 bits: the conversion must be integer. */
static void created_at_is_the_exact_millisecond(void **state)
{
    fixture *f = *state;
    resil_fake_clock_advance(f->fc, RESIL_MS(1));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.created_at, CASE_WALL0 + RESIL_MS(1));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_int_equal(f->res.created_at, CASE_WALL0 + RESIL_MS(1));
}

static void completed_key_replays_the_saved_response_byte_for_byte(void **state)
{
    fixture *f = *state;
    const uint8_t body[] = {'o', 'k', 0, 0xff, '\n', 0, 'x'};
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":1}"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 201,
                  "Content-Type: application/json\r\nLocation: /orders/7\r\n", body,
                  sizeof body);
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":1}"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
    assert_string_equal(f->res.headers,
                        "Content-Type: application/json\r\nLocation: /orders/7\r\n");
    assert_int_equal(f->res.body_len, sizeof body);
    assert_memory_equal(f->res.body, body, sizeof body);
    assert_int_equal(f->res.created_at, CASE_WALL0);
}

static void begin_while_the_first_runs_is_in_progress_with_the_lease_left(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_MS(2500));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_MS(7500));
    assert_int_equal(f->res.lease, 0);
}

static void same_key_with_another_request_is_a_mismatch_while_in_progress(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":1}"), RESIL_STORE_FIRST);
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":2}"), RESIL_STORE_MISMATCH);
}

static void same_key_with_another_request_is_a_mismatch_after_completion(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":1}"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 201, NULL, "done", 4);
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":2}"), RESIL_STORE_MISMATCH);
    assert_int_equal(f->res.body_len, 0);
}

static void mismatch_wins_over_an_expired_lease(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":1}"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_S(60));
    assert_int_equal(begin_key(f, f->s, "k-1", "{\"qty\":2}"), RESIL_STORE_MISMATCH);
}

static void keys_are_scoped_by_tenant_and_operation(void **state)
{
    fixture *f = *state;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    const resil_store_key keys[] = {
        {.tenant = "acme", .operation = "create-order", .key = "k-1"},
        {.tenant = "globex", .operation = "create-order", .key = "k-1"},
        {.tenant = "acme", .operation = "refund", .key = "k-1"},
        {.tenant = NULL, .operation = NULL, .key = "k-1"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        assert_int_equal(resil_store_begin(f->s, &keys[i], h, &f->res, NULL), 0);
        assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
    }
    const resil_store_key empty = {.tenant = "", .operation = "", .key = "k-1"};
    assert_int_equal(resil_store_begin(f->s, &empty, h, &f->res, NULL), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_IN_PROGRESS);
}

static void empty_response_replays_as_empty(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", ""), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 204, NULL, NULL, 0);
    assert_int_equal(begin_key(f, f->s, "k-1", ""), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 204);
    assert_int_equal(f->res.headers_len, 0);
    assert_string_equal(f->res.headers, "");
    assert_int_equal(f->res.body_len, 0);
}

static void result_buffers_are_reused_across_calls(void **state)
{
    fixture *f = *state;
    char big[5000];
    memset(big, 'b', sizeof big);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 200, NULL, big, sizeof big);
    const resil_store_key k2 = {.tenant = "acme", .operation = "create-order", .key = "k-2"};
    assert_int_equal(begin_key(f, f->s, "k-2", "a"), RESIL_STORE_FIRST);
    complete_with(f, &k2, f->res.lease, 200, NULL, "small", 5);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    uint8_t *buffer = f->res.body;
    assert_int_equal(begin_key(f, f->s, "k-2", "a"), RESIL_STORE_REPLAY);
    assert_ptr_equal(f->res.body, buffer);
    assert_int_equal(f->res.body_len, 5);
    assert_memory_equal(f->res.body, "small", 5);
}

/* ---- release, leases, fencing -------------------------------------------- */

static void release_lets_the_next_request_run_first(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(resil_store_release(f->s, &K1, f->res.lease, NULL), 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_at(CASE_WALL0));
}

static void released_key_accepts_a_different_request(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(resil_store_release(f->s, &K1, f->res.lease, NULL), 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "different"), RESIL_STORE_FIRST);
}

static void lease_is_not_taken_over_before_it_expires(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_S(10) - RESIL_MS(1));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_MS(1));
}

static void expired_lease_is_taken_over_with_the_next_lease_number(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_S(10));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_at(CASE_WALL0) + 1);
    assert_int_equal(f->res.created_at, CASE_WALL0 + RESIL_S(10));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(10));
}

static void a_first_claim_is_not_a_takeover(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_false(f->res.taken_over);
}

static void a_claim_of_an_expired_lease_is_a_takeover(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_S(10));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_true(f->res.taken_over);
}

static void a_claim_after_a_release_is_not_a_takeover(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    resil_fake_clock_advance(f->fc, RESIL_S(10));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(resil_store_release(f->s, &K1, f->res.lease, NULL), 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_false(f->res.taken_over);
}

static void late_owner_cannot_complete_after_a_takeover(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t crashed = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(11));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t taker = f->res.lease;
    resil_store_response r = {.status = 200, .body = "late", .body_len = 4};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(f->s, &K1, crashed, &r, &err), RESIL_ESTATE);
    assert_lease_lost(&err, first_lease_at(CASE_WALL0), "k-1");
    assert_int_equal(resil_store_release(f->s, &K1, crashed, NULL), RESIL_ESTATE);
    complete_with(f, &K1, taker, 201, NULL, "mine", 4);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_memory_equal(f->res.body, "mine", 4);
}

/* k-1 was just claimed anew (f->res): the stale lease's complete is
 * refused, the new claim's saved and replayed. */
static void only_the_new_claim_completes(fixture *f, uint64_t stale)
{
    uint64_t fresh = f->res.lease;
    resil_store_response r = {.status = 200, .body = "A", .body_len = 1};
    resil_err err = {0};
    assert_int_equal(resil_store_complete(f->s, &K1, stale, &r, &err), RESIL_ESTATE);
    assert_lease_lost(&err, stale, "k-1");
    complete_with(f, &K1, fresh, 201, NULL, "C", 1);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_memory_equal(f->res.body, "C", 1);
}

/* A stalls past its lease, B takes over and releases (the record is
 * deleted), C claims the key anew: A's number must not own C's record. */
static void a_stale_lease_cannot_complete_the_claim_after_a_release_and_a_new_begin(
    void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t a = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(10));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(resil_store_release(f->s, &K1, f->res.lease, NULL), 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    only_the_new_claim_completes(f, a);
}

/* A outlives its lease and the retention, the purge deletes its record,
 * C claims the key anew: A's number must not own C's record. */
static void a_lease_from_before_a_purge_cannot_complete_the_next_claim(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t a = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(3600) + RESIL_MS(1));
    uint64_t deleted = 0;
    assert_int_equal(resil_store_purge(f->s, &deleted, NULL), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    only_the_new_claim_completes(f, a);
}

/* A run that renews its lease past the retention keeps its record: the
 * purge never takes a key from under a live run. */
static void a_purge_keeps_an_old_record_whose_lease_is_still_held(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t a = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(3600) + RESIL_MS(1));
    assert_int_equal(resil_store_renew(f->s, &K1, a, NULL), 0);
    uint64_t deleted = 99;
    assert_int_equal(resil_store_purge(f->s, &deleted, NULL), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(10));
}

static void completing_twice_is_refused(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    complete_with(f, &K1, lease, 201, NULL, "one", 3);
    resil_store_response r = {.status = 500, .body = "two", .body_len = 3};
    assert_int_equal(resil_store_complete(f->s, &K1, lease, &r, NULL), RESIL_ESTATE);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_int_equal(f->res.status, 201);
}

static void releasing_a_completed_record_is_refused(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    complete_with(f, &K1, lease, 201, NULL, "one", 3);
    assert_int_equal(resil_store_release(f->s, &K1, lease, NULL), RESIL_ESTATE);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
}

static void completing_an_unknown_key_is_refused(void **state)
{
    fixture *f = *state;
    resil_store_response r = {.status = 200};
    assert_int_equal(resil_store_complete(f->s, &K1, 1, &r, NULL), RESIL_ESTATE);
}

/* ---- renew ----------------------------------------------------------------- */

static void renew_extends_the_lease_so_a_begin_after_the_first_expiry_is_in_progress(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(8));
    assert_int_equal(resil_store_renew(f->s, &K1, lease, NULL), 0);
    resil_fake_clock_advance(f->fc, RESIL_S(4)); /* 12 s: past the first expiry */
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(6));
    complete_with(f, &K1, lease, 201, NULL, "renewed", 7);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_memory_equal(f->res.body, "renewed", 7);
}

static void renew_keeps_the_lease_number(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(resil_store_renew(f->s, &K1, f->res.lease, NULL), 0);
    assert_int_equal(resil_store_renew(f->s, &K1, f->res.lease, NULL), 0);
    assert_int_equal(resil_store_release(f->s, &K1, f->res.lease, NULL), 0);
}

static void renew_by_a_stale_lease_after_a_takeover_is_refused(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t stale = f->res.lease;
    resil_fake_clock_advance(f->fc, RESIL_S(10));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_at(CASE_WALL0) + 1);
    resil_err err = {0};
    assert_int_equal(resil_store_renew(f->s, &K1, stale, &err), RESIL_ESTATE);
    assert_lease_lost(&err, first_lease_at(CASE_WALL0), "k-1");
    resil_fake_clock_advance(f->fc, RESIL_S(5));
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_IN_PROGRESS);
    assert_duration_equal(f->res.lease_left, RESIL_S(5)); /* the taker's lease, unchanged */
}

static void renew_of_a_completed_record_is_refused(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    uint64_t lease = f->res.lease;
    complete_with(f, &K1, lease, 201, NULL, "done", 4);
    assert_int_equal(resil_store_renew(f->s, &K1, lease, NULL), RESIL_ESTATE);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
}

static void renew_of_an_unknown_key_is_refused(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_store_renew(f->s, &K1, 1, NULL), RESIL_ESTATE);
}

/* ---- purge and persistence ----------------------------------------------- */

static void purge_keeps_records_younger_than_the_retention(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 201, NULL, "x", 1);
    resil_fake_clock_advance(f->fc, RESIL_S(3600));
    uint64_t deleted = 99;
    assert_int_equal(resil_store_purge(f->s, &deleted, NULL), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
}

/* A purge whose stop token fired before it began deletes nothing. */
static void a_purge_stopped_before_it_began_deletes_nothing(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 201, NULL, "x", 1);
    resil_fake_clock_advance(f->fc, RESIL_S(25 * 3600));
    resil_cancel stop;
    assert_int_equal(resil_cancel_init(&stop, NULL), 0);
    resil_cancel_fire(&stop);
    uint64_t deleted = 99;
    resil_err err = {0};
    assert_int_equal(resil_store_purge_cancellable(f->s, &stop, &deleted, &err),
                     RESIL_ECANCELED);
    assert_string_equal(err.message, "store: the purge was stopped");
    assert_int_equal(deleted, 0);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    resil_cancel_destroy(&stop);
}

static void purge_deletes_records_older_than_the_retention(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 201, NULL, "x", 1);
    assert_int_equal(begin_key(f, f->s, "k-2", "a"), RESIL_STORE_FIRST); /* in progress */
    resil_fake_clock_advance(f->fc, RESIL_MS(1800 * 1000));
    assert_int_equal(begin_key(f, f->s, "k-3", "a"), RESIL_STORE_FIRST); /* younger */
    const resil_store_key k3 = {.tenant = "acme", .operation = "create-order", .key = "k-3"};
    complete_with(f, &k3, f->res.lease, 201, NULL, "y", 1);
    resil_fake_clock_advance(f->fc, RESIL_MS(1800 * 1000 + 1));
    uint64_t deleted = 0;
    assert_int_equal(resil_store_purge(f->s, &deleted, NULL), 0);
    assert_int_equal(deleted, 2);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    assert_int_equal(f->res.lease, first_lease_now(f));
    assert_int_equal(begin_key(f, f->s, "k-3", "a"), RESIL_STORE_REPLAY);
}

static void saved_responses_survive_a_new_store_handle(void **state)
{
    fixture *f = *state;
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_FIRST);
    complete_with(f, &K1, f->res.lease, 201, "X-A: 1\r\n", "kept", 4);
    resil_store_free(f->s);
    f->s = fixture_open(f, NULL, NULL);
    assert_int_equal(begin_key(f, f->s, "k-1", "a"), RESIL_STORE_REPLAY);
    assert_memory_equal(f->res.body, "kept", 4);
    assert_string_equal(f->res.headers, "X-A: 1\r\n");
}

/* ---- keys ---------------------------------------------------------------- */

static void bad_keys_are_refused_by_name(void **state)
{
    fixture *f = *state;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    char longest[RESIL_STORE_FIELD_MAX + 1], too_long[RESIL_STORE_FIELD_MAX + 2];
    memset(longest, 'k', RESIL_STORE_FIELD_MAX);
    longest[RESIL_STORE_FIELD_MAX] = '\0';
    memset(too_long, 'k', RESIL_STORE_FIELD_MAX + 1);
    too_long[RESIL_STORE_FIELD_MAX + 1] = '\0';
    resil_err err = {0};
    resil_store_key k = {.key = ""};
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the key must not be empty");
    k.key = NULL;
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    k.key = too_long;
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the key must be at most 255 bytes, got 256");
    k = (resil_store_key){.tenant = too_long, .key = "k"};
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the tenant must be at most 255 bytes, got 256");
    k = (resil_store_key){.operation = too_long, .key = "k"};
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the operation must be at most 255 bytes, got 256");
    k = (resil_store_key){.tenant = longest, .operation = longest, .key = longest};
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), 0);
    assert_int_equal(f->res.verdict, RESIL_STORE_FIRST);
}

/* Tab, a control byte, DEL and a non-ASCII byte: each refused as the
 * caller's error, before any database sees it, naming the byte. */
static void keys_outside_printable_ascii_are_refused_naming_the_byte(void **state)
{
    fixture *f = *state;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    resil_err err = {0};
    resil_store_key k = {.key = "k-1\tx"};
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the key must be 1 to 255 printable ASCII "
                                     "characters (0x20-0x7E); byte 3 is 0x09");
    k.key = "\x01";
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the key must be 1 to 255 printable ASCII "
                                     "characters (0x20-0x7E); byte 0 is 0x01");
    k.key = "k\x7f";
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the key must be 1 to 255 printable ASCII "
                                     "characters (0x20-0x7E); byte 1 is 0x7F");
    k = (resil_store_key){.tenant = "caf\xc3\xa9", .key = "k"};
    assert_int_equal(resil_store_begin(f->s, &k, h, &f->res, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the tenant must be 0 to 255 printable ASCII "
                                     "characters (0x20-0x7E); byte 3 is 0xC3");
    k = (resil_store_key){.operation = "op\xff", .key = "k"};
    resil_store_response r = {.status = 200};
    assert_int_equal(resil_store_complete(f->s, &k, 1, &r, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "store: the operation must be 0 to 255 printable ASCII "
                                     "characters (0x20-0x7E); byte 2 is 0xFF");
    assert_int_equal(resil_store_release(f->s, &k, 1, &err), RESIL_EINVAL);
}

static void every_printable_ascii_character_is_a_valid_key(void **state)
{
    fixture *f = *state;
    char all[0x7f - 0x20 + 1];
    for (int c = 0x20; c < 0x7f; c++)
        all[c - 0x20] = (char)c;
    all[sizeof all - 1] = '\0';
    assert_int_equal(begin_key(f, f->s, all, "a"), RESIL_STORE_FIRST);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = all};
    complete_with(f, &k, f->res.lease, 201, NULL, "ok", 2);
    assert_int_equal(begin_key(f, f->s, all, "a"), RESIL_STORE_REPLAY);
}

static void missing_arguments_are_refused(void **state)
{
    fixture *f = *state;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("a", h);
    assert_int_equal(resil_store_begin(f->s, &K1, NULL, &f->res, NULL), RESIL_EINVAL);
    assert_int_equal(resil_store_begin(f->s, &K1, h, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_store_begin(NULL, &K1, h, &f->res, NULL), RESIL_EINVAL);
    assert_int_equal(resil_store_complete(f->s, &K1, 1, NULL, NULL), RESIL_EINVAL);
    resil_store_response r = {.status = 200, .body = NULL, .body_len = 3};
    assert_int_equal(resil_store_complete(f->s, &K1, 1, &r, NULL), RESIL_EINVAL);
    assert_int_equal(resil_store_purge(NULL, NULL, NULL), RESIL_EINVAL);
}

/* ---- races --------------------------------------------------------------- */

#define RACERS 32

typedef struct racer {
    fixture *f;
    resil_store *s;
    pthread_barrier_t *go;
    resil_store_verdict verdict;
    int rc;
    char error[256];
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    uint8_t h[RESIL_SHA256_LEN];
    hash_of("same", h);
    resil_store_result res;
    resil_store_result_init(&res);
    resil_err err = {0};
    pthread_barrier_wait(r->go);
    r->rc = resil_store_begin(r->s, &K1, h, &res, &err);
    r->verdict = res.verdict;
    snprintf(r->error, sizeof r->error, "%s", err.message);
    resil_store_result_free(&res);
    return NULL;
}

static void run_race(fixture *f, bool own_handles)
{
    pthread_t t[RACERS];
    racer r[RACERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.f = f, .go = &go};
        r[i].s = own_handles ? fixture_open(f, NULL, NULL) : f->s;
    }
    for (int i = 0; i < RACERS; i++)
        pthread_create(&t[i], NULL, race, &r[i]);
    int first = 0, in_progress = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        if (r[i].rc != 0)
            fail_msg("racer %d: %s", i, r[i].error);
        first += r[i].verdict == RESIL_STORE_FIRST;
        in_progress += r[i].verdict == RESIL_STORE_IN_PROGRESS;
    }
    for (int i = 0; own_handles && i < RACERS; i++)
        resil_store_free(r[i].s);
    pthread_barrier_destroy(&go);
    assert_int_equal(first, 1);
    assert_int_equal(in_progress, RACERS - 1);
}

static void racing_handles_get_exactly_one_first(void **state) { run_race(*state, true); }

static void racing_threads_on_one_handle_get_exactly_one_first(void **state)
{
    run_race(*state, false);
}

#define CASE(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)

static const struct CMUnitTest store_cases[] = {
    CASE(first_begin_owns_the_key_with_the_lease_its_creation_instant_gives),
    CASE(created_at_is_the_exact_millisecond),
    CASE(completed_key_replays_the_saved_response_byte_for_byte),
    CASE(begin_while_the_first_runs_is_in_progress_with_the_lease_left),
    CASE(same_key_with_another_request_is_a_mismatch_while_in_progress),
    CASE(same_key_with_another_request_is_a_mismatch_after_completion),
    CASE(mismatch_wins_over_an_expired_lease),
    CASE(keys_are_scoped_by_tenant_and_operation),
    CASE(empty_response_replays_as_empty),
    CASE(result_buffers_are_reused_across_calls),
    CASE(release_lets_the_next_request_run_first),
    CASE(released_key_accepts_a_different_request),
    CASE(lease_is_not_taken_over_before_it_expires),
    CASE(expired_lease_is_taken_over_with_the_next_lease_number),
    CASE(a_first_claim_is_not_a_takeover),
    CASE(a_claim_of_an_expired_lease_is_a_takeover),
    CASE(a_claim_after_a_release_is_not_a_takeover),
    CASE(late_owner_cannot_complete_after_a_takeover),
    CASE(a_stale_lease_cannot_complete_the_claim_after_a_release_and_a_new_begin),
    CASE(a_lease_from_before_a_purge_cannot_complete_the_next_claim),
    CASE(a_purge_keeps_an_old_record_whose_lease_is_still_held),
    CASE(completing_twice_is_refused),
    CASE(releasing_a_completed_record_is_refused),
    CASE(completing_an_unknown_key_is_refused),
    CASE(renew_extends_the_lease_so_a_begin_after_the_first_expiry_is_in_progress),
    CASE(renew_keeps_the_lease_number),
    CASE(renew_by_a_stale_lease_after_a_takeover_is_refused),
    CASE(renew_of_a_completed_record_is_refused),
    CASE(renew_of_an_unknown_key_is_refused),
    CASE(purge_keeps_records_younger_than_the_retention),
    CASE(purge_deletes_records_older_than_the_retention),
    CASE(a_purge_stopped_before_it_began_deletes_nothing),
    CASE(saved_responses_survive_a_new_store_handle),
    CASE(bad_keys_are_refused_by_name),
    CASE(keys_outside_printable_ascii_are_refused_naming_the_byte),
    CASE(every_printable_ascii_character_is_a_valid_key),
    CASE(missing_arguments_are_refused),
    CASE(racing_handles_get_exactly_one_first),
    CASE(racing_threads_on_one_handle_get_exactly_one_first),
};

int store_cases_run(const char *group, const struct CMUnitTest *own, size_t n_own)
{
    size_t shared = sizeof store_cases / sizeof store_cases[0];
    struct CMUnitTest *all = calloc(shared + n_own, sizeof *all);
    if (all == NULL)
        return 1;
    memcpy(all, store_cases, sizeof store_cases);
    memcpy(all + shared, own, n_own * sizeof *own);
    int failed = _cmocka_run_group_tests(group, all, shared + n_own, NULL, NULL);
    char unbatched[128];
    snprintf(unbatched, sizeof unbatched, "%s, one transaction per call", group);
    batch_max_override = 1;
    failed += _cmocka_run_group_tests(unbatched, all, shared + n_own, NULL, NULL);
    batch_max_override = 0;
    free(all);
    return failed;
}

/* ---- asynchronous calls' answers --------------------------------------------- */

void reply_init(reply *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    resil_store_result_init(&r->res);
    r->rc = 1; /* no answer yet */
}

void reply_free(reply *r)
{
    resil_store_result_free(&r->res);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

void on_reply(int rc, const resil_err *err, void *ud)
{
    reply *r = ud;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->rc = rc;
    snprintf(r->error, sizeof r->error, "%s", err != NULL ? err->message : "");
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

int calls_of(reply *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->calls;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Wait for the callback; its rc. */
int await_reply(reply *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->calls == 0)
        pthread_cond_wait(&r->cv, &r->mu);
    int rc = r->rc;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- file modes, as root too ------------------------------------------------- */

_Static_assert(sizeof(file_modes_held) == 2 * sizeof(struct __user_cap_data_struct),
               "file_modes_held holds a thread's two capability words");

static void capset_or_fail(const struct __user_cap_data_struct *d)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    if (syscall(SYS_capset, &h, d) != 0)
        fail_msg("capset: %s", strerror(errno));
}

file_modes_held file_modes_hold(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        fail_msg("capget: %s", strerror(errno));
    file_modes_held was;
    memcpy(was.caps, d, sizeof d);
    d[0].effective &= ~(UINT32_C(1) << CAP_DAC_OVERRIDE);
    capset_or_fail(d);
    return was;
}

void file_modes_release(const file_modes_held *was)
{
    struct __user_cap_data_struct d[2];
    memcpy(d, was->caps, sizeof d);
    capset_or_fail(d);
}

/* ---- writes past a file's end refused ------------------------------------------ */

file_writes_held file_writes_refuse(void)
{
    file_writes_held was;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &was.was), 0);
    was.sigxfsz = signal(SIGXFSZ, SIG_IGN);
    struct rlimit none = {.rlim_cur = 0, .rlim_max = was.was.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &none), 0);
    return was;
}

void file_writes_release(const file_writes_held *was)
{
    setrlimit(RLIMIT_FSIZE, &was->was);
    signal(SIGXFSZ, was->sigxfsz);
}
