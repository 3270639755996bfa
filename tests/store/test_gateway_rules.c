/*
 * test_gateway_rules.c — the gateway keeps "at most once": what becomes of
 * a key after each kind of upstream answer or failure (libcurl's resend of
 * a request whose connection died unanswered included), a slow call that
 * outlives its lease, a run that lost its key, store errors by class, and
 * an answer the database cannot take at that moment.
 *
 * The real binary between libcurl clients and the counting upstream, with
 * a SQLite store in a temporary directory. Every test counts what the
 * upstream saw; a store fault is made for real — a second connection that
 * holds SQLite's write lock, a trigger that refuses inserts, a second store
 * that takes a key over, a PostgreSQL table lock that holds a claim (where
 * SQLite's busy wait would give up) while the gateway stops or its one
 * store worker is needed twice — never by a stand-in. A slow call is one the
 * upstream holds (its /hold target) until the test lets it go, so what
 * must happen meanwhile never races a delay.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dying_upstream.h"
#include "gateway_proc.h"
#include "pg_server.h"
#include "store_cases.h"
#include "test.h"
#include "upstream.h"

#include "resil/store.h"

typedef struct env {
    char *dir;
    char db[600];
    char store[640];
    char log[600];
    upstream *up;
    dying_upstream *dying; /* when a test needs a connection to die */
    int stalled[2];        /* a listener that never completes a handshake, and */
    size_t n_stalled;      /* the connection that fills its backlog */
    gateway_proc gw;
    int restarts;
    sqlite3 *lock; /* a connection holding the write lock, when a test takes it */
    pg_server *pg; /* a PostgreSQL store, when a test needs its row locks */
    PGconn *admin; /* the test's own connection to it */
} env;

static const char *resil_binary(void) { return test_build_path("resil"); }

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dir = test_tmpdir();
    e->up = upstream_start();
    if (e->dir == NULL || e->up == NULL)
        return -1;
    snprintf(e->db, sizeof e->db, "%s/gateway.db", e->dir);
    snprintf(e->store, sizeof e->store, "sqlite:%s", e->db);
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    upstream_release(e->up); /* a test that failed holding a call must not hold the stop */
    if (e->lock != NULL)
        sqlite3_close(e->lock);
    /* A gateway that does not exit 0 on SIGTERM failed (a sanitizer's
     * report, a crash on the way out). */
    int rc = e->gw.pid > 0 ? gateway_stop(&e->gw) : 0;
    if (rc != 0)
        fprintf(stderr, "the gateway exited %d, see %s\n", rc, e->log);
    upstream_stop(e->up);
    if (e->admin != NULL)
        PQfinish(e->admin);
    pg_server_stop(e->pg);
    dying_upstream_stop(e->dying);
    for (size_t i = 0; i < e->n_stalled; i++)
        close(e->stalled[i]);
    if (rc == 0)
        test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return rc == 0 ? 0 : -1;
}

static void start_gateway_to(env *e, const char *upstream_url, const char *const extra[])
{
    const char *args[32] = {"--upstream", upstream_url, "--store", e->store};
    size_t n = 4;
    for (size_t i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    snprintf(e->log, sizeof e->log, "%s/gateway-%d.log", e->dir, e->restarts++);
    if (gateway_start(&e->gw, resil_binary(), e->log, args) != 0)
        fail_msg("the gateway did not start");
}

static void start_gateway(env *e, const char *const extra[])
{
    start_gateway_to(e, upstream_url(e->up), extra);
}

static void post_to(const env *e, const char *target, const char *const headers[],
                    const char *body, http_reply *r)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", e->gw.url, target);
    if (http_request("POST", url, headers, body, r) != 0)
        fail_msg("POST %s failed: curl %d", url, r->curl_code);
}

static void post(const env *e, const char *target, const char *key, const char *body,
                 http_reply *r)
{
    char header[512];
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
    const char *headers[] = {"Content-Type: application/json", header, NULL};
    post_to(e, target, headers, body, r);
}

static void header_is(const http_reply *r, const char *name, const char *expected)
{
    char v[256];
    http_reply_header(r, name, v, sizeof v);
    assert_string_equal(v, expected);
}

static void header_absent(const http_reply *r, const char *name)
{
    char v[256];
    assert_false(http_reply_header(r, name, v, sizeof v));
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Poll the gateway's log for `text`, up to 30 s. */
static void wait_for_log(const env *e, const char *text)
{
    for (int i = 0; i < 3000 && !gateway_log_contains(&e->gw, text); i++)
        sleep_ms(10);
    if (!gateway_log_contains(&e->gw, text))
        fail_msg("the gateway never logged '%s'", text);
}

/* The first answer, then `retries` retries: each replays it byte for byte
 * with Idempotent-Outcome: unknown. */
static void expect_unknown_replayed(const env *e, const char *target, const char *key,
                                    const char *body, int status, const char *error,
                                    int retries)
{
    http_reply first;
    post(e, target, key, body, &first);
    assert_int_equal(first.status, status);
    header_is(&first, "Idempotent-Outcome", "unknown");
    header_absent(&first, "Idempotent-Replayed");
    char code[128];
    snprintf(code, sizeof code, "\"error\":\"%s\"", error);
    assert_non_null(strstr(first.body, code));
    for (int i = 0; i < retries; i++) {
        http_reply again;
        post(e, target, key, body, &again);
        assert_int_equal(again.status, status);
        header_is(&again, "Idempotent-Outcome", "unknown");
        header_is(&again, "Idempotent-Replayed", "true");
        assert_string_equal(again.body, first.body);
        http_reply_free(&again);
    }
    http_reply_free(&first);
}

/* ---- item 3: uncertain outcomes are saved, never run again --------------- */

static void an_answer_over_max_body_is_stored_as_unknown_and_never_run_again(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--max-body", "1KB", NULL};
    start_gateway(e, extra);
    char body[1001];
    memset(body, 'x', 1000); /* fits the request limit; its echo does not */
    body[1000] = '\0';
    expect_unknown_replayed(e, "/orders", "k-big", body, 502, "upstream_response_too_large",
                            3);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* The upstream holds /hold until released: the timeout fires first
 * however slow the machine, which a delay could not promise. */
static void an_upstream_timeout_is_stored_as_unknown_and_never_run_again(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--timeout", "200ms", NULL};
    start_gateway(e, extra);
    expect_unknown_replayed(e, "/hold", "k-slow", "a", 504, "upstream_timeout", 3);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void a_refused_connection_releases_the_key_and_the_retry_runs_once(void **state)
{
    env *e = *state;
    start_gateway_to(e, "http://127.0.0.1:1", NULL);
    http_reply r;
    post(e, "/orders", "k-down", "a", &r);
    assert_int_equal(r.status, 502);
    header_absent(&r, "Idempotent-Outcome");
    assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, "idempotency=released"));
    assert_int_equal(gateway_stop(&e->gw), 0);
    start_gateway(e, NULL); /* the upstream is up now; the store is the same */
    post(e, "/orders", "k-down", "a", &r);
    assert_int_equal(r.status, 201);
    header_absent(&r, "Idempotent-Replayed");
    assert_non_null(strstr(r.body, "\"n\":1,"));
    http_reply_free(&r);
    post(e, "/orders", "k-down", "a", &r);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void statuses_that_say_not_processed_release_the_key(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    const int statuses[] = {408, 425, 429, 503};
    for (unsigned i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof key, "k-%d", statuses[i]);
        upstream_fail_next(e->up, 1, statuses[i]);
        http_reply r;
        post(e, "/orders", key, "a", &r);
        assert_int_equal(r.status, statuses[i]);
        http_reply_free(&r);
        post(e, "/orders", key, "a", &r);
        assert_int_equal(r.status, 201);
        header_absent(&r, "Idempotent-Replayed");
        http_reply_free(&r);
        assert_int_equal(upstream_requests(e->up), 2 * (i + 1));
    }
}

static void other_5xx_from_the_upstream_are_answers_saved_and_replayed(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    const int statuses[] = {500, 502, 504};
    for (unsigned i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "k-%d", statuses[i]);
        upstream_fail_next(e->up, 1, statuses[i]);
        http_reply r;
        post(e, "/orders", key, "a", &r);
        assert_int_equal(r.status, statuses[i]);
        assert_string_equal(r.body, "{\"error\":\"scripted\"}");
        header_absent(&r, "Idempotent-Outcome");
        http_reply_free(&r);
        post(e, "/orders", key, "a", &r);
        assert_int_equal(r.status, statuses[i]);
        assert_string_equal(r.body, "{\"error\":\"scripted\"}");
        header_is(&r, "Idempotent-Replayed", "true");
        http_reply_free(&r);
        assert_int_equal(upstream_requests(e->up), i + 1);
    }
}

static void with_upstream_dedupes_a_timeout_releases_the_key(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--timeout", "200ms", "--upstream-dedupes", NULL};
    start_gateway(e, extra);
    http_reply r;
    post(e, "/hold", "k-dedupe", "a", &r); /* held until released: it times out */
    assert_int_equal(r.status, 504);
    header_absent(&r, "Idempotent-Outcome");
    http_reply_free(&r);
    upstream_release(e->up);
    post(e, "/hold", "k-dedupe", "a", &r);
    assert_int_equal(r.status, 201);
    header_absent(&r, "Idempotent-Replayed");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

/* ---- libcurl's resend: a reused connection that dies unanswered ---------- */

/* The first request is answered on a keep-alive connection; the upstream
 * reads the second, guarded one on that same connection and closes it
 * without answering. libcurl would send it again on a fresh connection;
 * the gateway stops that resend, so the upstream has it once, and the
 * client gets an unknown outcome that every retry replays. */
/* Each loop keeps upstream connections of its own: on one loop the second
 * request is sure to take the connection the first one left. */
static const char *const one_loop[] = {"--loops", "1", NULL};

static void first_on_a_keep_alive_connection(env *e, dying_after after)
{
    e->dying = dying_upstream_start(2, after);
    assert_non_null(e->dying);
    start_gateway_to(e, dying_upstream_url(e->dying), one_loop);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"n\":1}");
    http_reply_free(&r);
}

static void a_guarded_request_on_a_connection_that_dies_unanswered_is_not_resent(void **state)
{
    env *e = *state;
    first_on_a_keep_alive_connection(e, DYING_KEEPS_LISTENING);
    expect_unknown_replayed(e, "/orders", "k-2", "a", 502, "upstream_unavailable", 2);
    assert_true(gateway_log_contains(&e->gw, "idempotency=unknown"));
    assert_true(gateway_log_contains(&e->gw, "the upstream closed the connection without "
                                             "answering; not sent again"));
    assert_int_equal(dying_upstream_key_requests(e->dying, "k-2"), 1);
    assert_int_equal(dying_upstream_requests(e->dying), 2);
}

/* The reconnect of libcurl's resend is refused (the upstream is gone): a
 * connection error, but one that came after the request had left. */
static void a_refused_reconnect_after_the_request_left_is_stored_as_unknown(void **state)
{
    env *e = *state;
    first_on_a_keep_alive_connection(e, DYING_STOPS_LISTENING);
    expect_unknown_replayed(e, "/orders", "k-2", "a", 502, "upstream_unavailable", 2);
    assert_true(gateway_log_contains(&e->gw, "idempotency=unknown"));
    assert_int_equal(dying_upstream_key_requests(e->dying, "k-2"), 1);
    assert_int_equal(dying_upstream_requests(e->dying), 2);
}

/* The upstream closes a kept-alive connection while it idles between two
 * requests (its keep-alive timeout): the gateway's watch of that idle
 * socket must neither hang the next request nor cost it its key. The next
 * guarded request goes out on a fresh connection, once, and is answered. */
static void a_kept_connection_the_upstream_closes_while_idle_costs_the_next_request_nothing(
    void **state)
{
    env *e = *state;
    e->dying = dying_upstream_start(1, DYING_AFTER_ANSWERING);
    assert_non_null(e->dying);
    start_gateway_to(e, dying_upstream_url(e->dying), one_loop);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"n\":1}");
    http_reply_free(&r);
    dying_upstream_wait_closed(e->dying, 1);
    post(e, "/orders", "k-2", "a", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"n\":2}");
    header_absent(&r, "Idempotent-Outcome");
    http_reply_free(&r);
    post(e, "/orders", "k-3", "a", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"n\":3}");
    http_reply_free(&r);
    assert_int_equal(dying_upstream_key_requests(e->dying, "k-2"), 1);
    assert_int_equal(dying_upstream_requests(e->dying), 3);
}

/* Without a key the gateway promises nothing, and a GET sent twice is
 * harmless: libcurl's resend stays, and the client gets an answer. */
static void an_unguarded_request_keeps_libcurls_resend(void **state)
{
    env *e = *state;
    e->dying = dying_upstream_start(2, DYING_KEEPS_LISTENING);
    assert_non_null(e->dying);
    start_gateway_to(e, dying_upstream_url(e->dying), one_loop);
    char url[256];
    snprintf(url, sizeof url, "%s/orders", e->gw.url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_string_equal(r.body, "{\"n\":1}");
    http_reply_free(&r);
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"n\":3}");
    http_reply_free(&r);
    assert_int_equal(dying_upstream_requests(e->dying), 3);
}

/* ---- a connect that times out: nothing left ------------------------------- */

/* A loopback port whose handshakes never complete: a listener that never
 * accepts, its backlog of 0 filled by one connection, so the kernel drops
 * every further SYN and a connect waits until it times out. The port. */
static int stalled_port(env *e)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    e->stalled[e->n_stalled++] = l;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 0), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(c >= 0);
    e->stalled[e->n_stalled++] = c;
    connect(c, (struct sockaddr *)&a, sizeof a); /* in progress, or done */
    struct pollfd p = {.fd = c, .events = POLLOUT};
    poll(&p, 1, 2000); /* the filler is queued (or dropped: the port stalls either way) */
    return ntohs(a.sin_port);
}

static void a_connect_that_times_out_releases_the_key(void **state)
{
    env *e = *state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", stalled_port(e));
    const char *const extra[] = {"--timeout", "300ms", NULL};
    start_gateway_to(e, url, extra);
    http_reply r;
    post(e, "/orders", "k-stalled", "a", &r);
    assert_int_equal(r.status, 504);
    assert_non_null(strstr(r.body, "\"error\":\"upstream_timeout\""));
    header_absent(&r, "Idempotent-Outcome");
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, "idempotency=released"));
    assert_int_equal(gateway_stop(&e->gw), 0);
    start_gateway(e, NULL); /* a reachable upstream; the store is the same */
    post(e, "/orders", "k-stalled", "a", &r);
    assert_int_equal(r.status, 201);
    header_absent(&r, "Idempotent-Replayed");
    assert_non_null(strstr(r.body, "\"n\":1,"));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- takeovers: a holder that vanished ------------------------------------ */

/* What a gateway killed mid-call leaves: a record in progress whose lease
 * has run out. Made with a second store on the same file and a 1 ms lease. */
static void leave_abandoned_record(const env *e, const char *key, const char *body)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = e->store;
    o.lease = RESIL_MS(1);
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    uint8_t h[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/orders", body, strlen(body), h);
    resil_store_key k = {.tenant = "", .operation = "http", .key = key};
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(resil_store_begin(s, &k, h, &res, NULL), 0);
    assert_int_equal(res.verdict, RESIL_STORE_FIRST);
    resil_store_result_free(&res);
    resil_store_free(s);
    sleep_ms(20);
}

static void a_takeover_is_stored_as_unknown_and_not_forwarded(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    leave_abandoned_record(e, "k-crashed", "a");
    expect_unknown_replayed(e, "/orders", "k-crashed", "a", 502, "upstream_outcome_unknown", 2);
    assert_int_equal(upstream_requests(e->up), 0);
}

static void with_upstream_dedupes_a_takeover_is_forwarded(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--upstream-dedupes", NULL};
    start_gateway(e, extra);
    leave_abandoned_record(e, "k-crashed", "a");
    http_reply r;
    post(e, "/orders", "k-crashed", "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- item 4: leases are renewed; a stale holder is fenced ---------------- */

/* A POST of "a" to the upstream's /hold, which answers only once the test
 * calls upstream_release(): a slow call whose end the test chooses. */
typedef struct slow_post {
    const env *e;
    const char *key;
    http_reply r;
} slow_post;

static void *post_in_thread(void *arg)
{
    slow_post *p = arg;
    post(p->e, "/hold", p->key, "a", &p->r);
    return NULL;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lease expiry (Unix ms) the SQLite store holds for `key`, read
 * as the gateway wrote it; -1 when there is no such record. */
static int64_t lease_expires_at(sqlite3 *db, const char *key)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT lease_expires_at FROM resil_idempotency "
                                        "WHERE idempotency_key = ?1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int64_t at = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return at;
}

/* Wait (up to 30 s, looking every 20 ms) until the lease `key` was first
 * given has run out by the clock while the record's lease has been renewed
 * past it: from then on only the renewal keeps the key. */
static void wait_until_only_renewal_keeps(const env *e, const char *key)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(e->db, &db), SQLITE_OK); /* it only reads */
    sqlite3_busy_timeout(db, 10000);
    int64_t first = lease_expires_at(db, key);
    assert_true(first > 0);
    int64_t now = wall_ms(), renewed = first;
    for (int i = 0; i < 1500 && (now <= first || renewed <= now); i++) {
        sleep_ms(20);
        renewed = lease_expires_at(db, key);
        now = wall_ms();
    }
    sqlite3_close(db);
    if (now <= first || renewed <= now)
        fail_msg("lease %lld: at %lld it runs to %lld", (long long)first, (long long)now,
                 (long long)renewed);
}

/* The call is held upstream past its first lease; the repeat comes once
 * the store shows that lease over by the clock and renewed beyond it. */
static void a_slow_call_keeps_its_key_past_the_lease_and_a_repeat_gets_409(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--lease", "2s", "--timeout", "30s", NULL};
    start_gateway(e, extra);
    slow_post first = {.e = e, .key = "k-slow"};
    pthread_t t;
    pthread_create(&t, NULL, post_in_thread, &first);
    assert_true(upstream_wait_held(e->up, 1));
    wait_until_only_renewal_keeps(e, "k-slow");
    http_reply r;
    post(e, "/hold", "k-slow", "a", &r);
    assert_int_equal(r.status, 409);
    header_is(&r, "Retry-After", "1");
    http_reply_free(&r);
    upstream_release(e->up);
    pthread_join(t, NULL);
    assert_int_equal(first.r.status, 201);
    post(e, "/hold", "k-slow", "a", &r);
    assert_int_equal(r.status, 201);
    header_is(&r, "Idempotent-Replayed", "true");
    assert_string_equal(r.body, first.r.body);
    http_reply_free(&r);
    http_reply_free(&first.r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* Another store sees the gateway's call in progress, moves its clock an
 * hour ahead so the lease looks expired, takes the key over (the
 * gateway's lease number + 1) and saves its own answer. The gateway's
 * late complete is refused: the client is told to retry (409) and then
 * gets the key's one answer, not the stale run's. */
static void a_run_that_lost_its_key_is_refused_and_answers_409(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    slow_post first = {.e = e, .key = "k-fenced"}; /* held while the key is taken over */
    pthread_t t;
    pthread_create(&t, NULL, post_in_thread, &first);
    assert_true(upstream_wait_held(e->up, 1));

    resil_fake_clock *fc;
    resil_clock *sys = resil_clock_system();
    assert_int_equal(resil_fake_clock_new(resil_clock_now(sys), resil_clock_wall_now(sys), &fc),
                     0);
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = e->store;
    o.clock = resil_fake_clock_clock(fc);
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    uint8_t h[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/hold", "a", 1, h);
    resil_store_key k = {.tenant = "", .operation = "http", .key = "k-fenced"};
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(resil_store_begin(s, &k, h, &res, NULL), 0);
    assert_int_equal(res.verdict, RESIL_STORE_IN_PROGRESS);
    uint64_t gateways = first_lease_at(res.created_at);
    resil_fake_clock_advance(fc, RESIL_S(3600));
    assert_int_equal(resil_store_begin(s, &k, h, &res, NULL), 0);
    assert_int_equal(res.verdict, RESIL_STORE_FIRST);
    assert_int_equal(res.lease, gateways + 1);
    resil_store_response theirs = {.status = 201, .headers = "X-Run: theirs\r\n",
                                   .headers_len = 15, .body = "theirs", .body_len = 6};
    assert_int_equal(resil_store_complete(s, &k, res.lease, &theirs, NULL), 0);
    resil_store_result_free(&res);
    resil_store_free(s);
    resil_fake_clock_free(fc);

    upstream_release(e->up);
    pthread_join(t, NULL);
    assert_int_equal(first.r.status, 409);
    assert_non_null(strstr(first.r.body, "\"error\":\"request_in_progress\""));
    header_is(&first.r, "Retry-After", "1");
    http_reply_free(&first.r);
    char taken[64];
    snprintf(taken, sizeof taken, "lease %llu was taken over", (unsigned long long)gateways);
    assert_true(gateway_log_contains(&e->gw, taken));
    assert_true(gateway_log_contains(&e->gw, "idempotency=fenced"));
    http_reply r;
    post(e, "/hold", "k-fenced", "a", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "theirs");
    header_is(&r, "X-Run", "theirs");
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- item 5: store errors by class ---------------------------------------- */

/* The HTTP layer refuses a bad key or tenant before the rules run; what
 * still reaches the store is --operation, which it checks like a key. */
static void a_key_the_store_refuses_is_400_naming_the_rule(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--operation", "caf\xc3\xa9", NULL};
    start_gateway(e, extra);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(r.body,
                        "{\"error\":\"invalid_idempotency_key\",\"message\":\"store: the "
                        "operation must be 0 to 255 printable ASCII characters (0x20-0x7E); "
                        "byte 3 is 0xC3\"}\n");
    header_absent(&r, "Retry-After");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

/* Take SQLite's write lock from another connection, as another process
 * writing would. */
static void hold_write_lock(env *e)
{
    assert_int_equal(sqlite3_open(e->db, &e->lock), SQLITE_OK);
    sqlite3_busy_timeout(e->lock, 10000); /* should the gateway be writing just then */
    assert_int_equal(sqlite3_exec(e->lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
}

static void drop_write_lock(env *e)
{
    assert_int_equal(sqlite3_exec(e->lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(e->lock);
    e->lock = NULL;
}

static void an_unavailable_store_is_503_with_retry_after(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    hold_write_lock(e);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "\"error\":\"store_unavailable\""));
    header_is(&r, "Retry-After", "1");
    http_reply_free(&r);
    drop_write_lock(e);
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void a_store_that_refuses_is_500_without_retry_after(void **state)
{
    env *e = *state;
    start_gateway(e, NULL); /* creates the table */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(e->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TRIGGER refuse BEFORE INSERT ON resil_idempotency "
                                  "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body, "\"error\":\"store_error\""));
    header_absent(&r, "Retry-After");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

/* The store takes the record but refuses this answer for good (a trigger
 * standing in for a data or constraint error): retrying the same answer
 * cannot help, so an unknown outcome is kept instead, and replayed. */
static void an_answer_the_store_refuses_for_good_is_saved_as_unknown(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(e->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TRIGGER refuse_201 BEFORE UPDATE ON resil_idempotency "
                                  "WHEN NEW.status = 201 "
                                  "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    expect_unknown_replayed(e, "/orders", "k-refused", "a", 502, "upstream_answer_refused", 2);
    assert_true(gateway_log_contains(&e->gw, "key 'k-refused': the store refused the answer (201)"));
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- item 2: an answer the database cannot take ---------------------------- */

static void the_journal_defaults_to_a_file_next_to_the_sqlite_store(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char line[800];
    snprintf(line, sizeof line, "resil gateway: journal %s.resil-journal\n", e->db);
    assert_true(gateway_log_contains(&e->gw, line));
}

/* The call runs while another connection holds the write lock, so saving
 * its answer fails: the store journals it and the client gets the answer.
 * Until the journal is replayed the key is in progress; then replayed. */
static void an_answer_the_database_cannot_take_is_journaled_then_replayed(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    slow_post first = {.e = e, .key = "k-journal"}; /* held while the lock is taken */
    pthread_t t;
    pthread_create(&t, NULL, post_in_thread, &first);
    assert_true(upstream_wait_held(e->up, 1));
    hold_write_lock(e);
    upstream_release(e->up);
    pthread_join(t, NULL);
    assert_int_equal(first.r.status, 201);
    assert_non_null(strstr(first.r.body, "\"n\":1,"));
    wait_for_log(e, "journal: 1 pending, 1 written, 0 replayed, 0 conflicts");
    http_reply r;
    post(e, "/hold", "k-journal", "a", &r);
    assert_true(r.status == 409 || r.status == 503);
    http_reply_free(&r);
    drop_write_lock(e);
    wait_for_log(e, "journal: 0 pending, 1 written, 1 replayed, 0 conflicts");
    post(e, "/hold", "k-journal", "a", &r);
    assert_int_equal(r.status, 201);
    header_is(&r, "Idempotent-Replayed", "true");
    assert_string_equal(r.body, first.r.body);
    http_reply_free(&r);
    http_reply_free(&first.r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* Without a journal the answer is not reported as done: 503, the key
 * stays held, and the gateway saves it once the database takes writes. */
static void without_a_journal_an_unsaved_answer_is_503_and_saved_later(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--journal", "off", NULL};
    start_gateway(e, extra);
    assert_true(gateway_log_contains(&e->gw, "resil gateway: journal off: an answer the "
                                             "database cannot take is answered 503"));
    slow_post first = {.e = e, .key = "k-unsaved"}; /* held while the lock is taken */
    pthread_t t;
    pthread_create(&t, NULL, post_in_thread, &first);
    assert_true(upstream_wait_held(e->up, 1));
    hold_write_lock(e);
    upstream_release(e->up);
    pthread_join(t, NULL);
    assert_int_equal(first.r.status, 503);
    assert_non_null(strstr(first.r.body, "\"error\":\"store_unavailable\""));
    header_is(&first.r, "Retry-After", "1");
    http_reply_free(&first.r);
    assert_true(gateway_log_contains(&e->gw, "idempotency=unsaved"));
    drop_write_lock(e);
    wait_for_log(e, "key 'k-unsaved': the answer (201) is saved now");
    http_reply r;
    post(e, "/hold", "k-unsaved", "a", &r);
    assert_int_equal(r.status, 201);
    header_is(&r, "Idempotent-Replayed", "true");
    assert_non_null(strstr(r.body, "\"n\":1,"));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- stopping with a call on its way upstream ------------------------------ */
/*
 * SIGTERM waits --timeout (plus a second) for the requests in flight; one
 * whose store call is still out then is not abandoned to it: the gateway
 * waits for the call to come back before its loops stop. A claim that
 * comes back FIRST then starts the upstream call, and the loop's stop
 * drops it (gw_client_abort): the connection closes without an answer, and
 * the key stays held until its lease runs out, then is settled as after a
 * crash — an unknown outcome, never a run. The claim is held back by a
 * PostgreSQL table lock the test takes (SQLite's busy wait would give up),
 * and the upstream is a port whose handshakes never complete, so the
 * dropped call has certainly sent nothing.
 */

static PGresult *admin_exec(env *e, const char *sql)
{
    PGresult *r = PQexec(e->admin, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(e->admin));
    return r;
}

static bool a_claim_waits_on_the_lock(void *ud)
{
    env *e = ud;
    PGresult *r = admin_exec(e, "SELECT count(*) FROM pg_stat_activity "
                                "WHERE wait_event_type = 'Lock'");
    bool waits = strcmp(PQgetvalue(r, 0, 0), "0") != 0;
    PQclear(r);
    return waits;
}

/* The POST of slow_post, whose connection may end without an answer. */
static void *post_unanswered_in_thread(void *arg)
{
    slow_post *p = arg;
    char url[256], header[300];
    snprintf(url, sizeof url, "%s/hold", p->e->gw.url);
    snprintf(header, sizeof header, "Idempotency-Key: %s", p->key);
    const char *headers[] = {header, NULL};
    http_request("POST", url, headers, "a", &p->r);
    return NULL;
}

static void start_gateway_on_pg(env *e, const char *upstream_url, const char *lease)
{
    snprintf(e->store, sizeof e->store, "%s", pg_server_url(e->pg));
    const char *const extra[] = {"--timeout", "1s", "--lease", lease, "--loops", "1", NULL};
    start_gateway_to(e, upstream_url, extra);
}

/* A keyed POST whose claim waits on the locked table while the gateway is
 * told to stop; the lock goes once the drain is over, the claim comes
 * back FIRST, and the request is closed unanswered as the gateway stops. */
static void stop_while_a_claim_waits(env *e, const char *key)
{
    e->admin = PQconnectdb(pg_server_url(e->pg));
    assert_int_equal(PQstatus(e->admin), CONNECTION_OK);
    PQclear(admin_exec(e, "BEGIN"));
    PQclear(admin_exec(e, "LOCK TABLE resil_idempotency IN ACCESS EXCLUSIVE MODE"));
    slow_post p = {.e = e, .key = key};
    pthread_t t;
    pthread_create(&t, NULL, post_unanswered_in_thread, &p);
    assert_true(test_wait_until(a_claim_waits_on_the_lock, e, 30));
    kill(e->gw.pid, SIGTERM);
    wait_for_log(e, "stopping: 1 request in flight, 1 unfinished");
    PQclear(admin_exec(e, "ROLLBACK")); /* the claim comes back: FIRST */
    pthread_join(t, NULL);
    assert_int_equal(p.r.curl_code, CURLE_GOT_NOTHING);
    http_reply_free(&p.r);
    assert_int_equal(gateway_stop(&e->gw), 0);
}

static void a_call_the_stop_drops_closes_unanswered_and_its_key_is_settled_unknown(void **state)
{
    env *e = *state;
    e->pg = pg_server_start();
    assert_non_null(e->pg);
    char stalled[64];
    snprintf(stalled, sizeof stalled, "http://127.0.0.1:%d", stalled_port(e));
    start_gateway_on_pg(e, stalled, "1s");
    stop_while_a_claim_waits(e, "k-stop");
    assert_true(gateway_log_contains(&e->gw, "resil gateway: stopped"));
    /* A gateway in front of the real upstream: once the 1 s lease is over,
     * the key is taken over and saved as an unknown outcome, not run. */
    start_gateway_on_pg(e, upstream_url(e->up), "60s");
    http_reply r;
    for (int i = 0; i < 300; i++) {
        post(e, "/hold", "k-stop", "a", &r);
        if (r.status != 409)
            break;
        http_reply_free(&r);
        sleep_ms(50);
    }
    assert_int_equal(r.status, 502);
    header_is(&r, "Idempotent-Outcome", "unknown");
    assert_non_null(strstr(r.body, "\"error\":\"upstream_outcome_unknown\""));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

/* A claim that comes back once the drain is over finds the upstream's
 * connection kept from an earlier request, where request bytes would
 * leave at once: nothing is forwarded, the request closes unanswered, as
 * docs/idempotency.md says of requests the stop finds on the store. */
static void a_claim_that_comes_back_after_the_drain_is_not_forwarded(void **state)
{
    env *e = *state;
    e->pg = pg_server_start();
    assert_non_null(e->pg);
    start_gateway_on_pg(e, upstream_url(e->up), "1s");
    http_reply r;
    post(e, "/orders", "k-warm", "a", &r); /* keeps a connection to the upstream */
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
    stop_while_a_claim_waits(e, "k-late");
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- store jobs waiting for the one worker ---------------------------------- */
/*
 * With batching off (--batch-max 1) a keyed request's store calls are jobs
 * for the --workers; one that finds no worker idle waits in a queue. The
 * one worker is held in a claim on the locked table (the first request),
 * and the second request's claim is queued behind it: its bytes are sent
 * whole before a /healthz on another connection, and the one loop reads
 * connections in the order they came, so the healthz's answer means the
 * second request has been read and its job handed over.
 */

/* A keyed POST of "a" to /orders on a raw connection: its fd. */
static int raw_keyed_post(const env *e, const char *key)
{
    char request[256];
    int n = snprintf(request, sizeof request,
                     "POST /orders HTTP/1.1\r\nHost: a\r\nIdempotency-Key: %s\r\n"
                     "Connection: close\r\nContent-Length: 1\r\n\r\na",
                     key);
    int fd = raw_connect(e->gw.port, NULL);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, request, (size_t)n, MSG_NOSIGNAL), n);
    return fd;
}

static int healthz(const env *e)
{
    static const char request[] = "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char answer[1024];
    return raw_exchange(e->gw.port, request, sizeof request - 1, answer, sizeof answer, 10000,
                        NULL);
}

/* The worker held in the first request's claim, the second request's job
 * queued behind it: its raw connection. */
static int queue_behind_a_held_worker(env *e, const char *upstream_url, slow_post *first,
                                      pthread_t *t)
{
    e->pg = pg_server_start();
    assert_non_null(e->pg);
    snprintf(e->store, sizeof e->store, "%s", pg_server_url(e->pg));
    const char *const extra[] = {"--timeout", "1s", "--batch-max", "1", "--workers", "1",
                                 "--loops", "1", NULL};
    start_gateway_to(e, upstream_url, extra);
    e->admin = PQconnectdb(pg_server_url(e->pg));
    assert_int_equal(PQstatus(e->admin), CONNECTION_OK);
    PQclear(admin_exec(e, "BEGIN"));
    PQclear(admin_exec(e, "LOCK TABLE resil_idempotency IN ACCESS EXCLUSIVE MODE"));
    pthread_create(t, NULL, post_unanswered_in_thread, first);
    assert_true(test_wait_until(a_claim_waits_on_the_lock, e, 30));
    int fd = raw_keyed_post(e, "k-queued");
    assert_int_equal(healthz(e), 200);
    return fd;
}

static void a_queued_store_job_runs_once_the_worker_is_free(void **state)
{
    env *e = *state;
    slow_post first = {.e = e, .key = "k-busy"};
    pthread_t t;
    int queued = queue_behind_a_held_worker(e, upstream_url(e->up), &first, &t);
    upstream_release(e->up); /* the first one's /hold answers at once */
    PQclear(admin_exec(e, "ROLLBACK"));
    pthread_join(t, NULL);
    assert_int_equal(first.r.curl_code, 0);
    assert_int_equal(first.r.status, 201);
    http_reply_free(&first.r);
    char answer[4096];
    assert_true(raw_read_until_closed(queued, answer, sizeof answer, 10000));
    close(queued);
    assert_int_equal(raw_status(answer), 201);
    assert_int_equal(upstream_key_requests(e->up, "k-busy"), 1);
    assert_int_equal(upstream_key_requests(e->up, "k-queued"), 1);
}

/* At stop, a job no worker took goes back to its loop unanswered: the
 * connection closes, and the key was never claimed, so a retry runs. */
static void a_store_job_still_queued_at_stop_is_closed_unanswered_and_claims_nothing(
    void **state)
{
    env *e = *state;
    char stalled[64];
    snprintf(stalled, sizeof stalled, "http://127.0.0.1:%d", stalled_port(e));
    slow_post first = {.e = e, .key = "k-busy"};
    pthread_t t;
    int queued = queue_behind_a_held_worker(e, stalled, &first, &t);
    kill(e->gw.pid, SIGTERM);
    wait_for_log(e, "stopping: 2 requests in flight, 2 unfinished");
    PQclear(admin_exec(e, "ROLLBACK")); /* the worker's claim ends; it stops */
    char answer[4096];
    assert_true(raw_read_until_closed(queued, answer, sizeof answer, 10000));
    close(queued);
    assert_string_equal(answer, "");
    pthread_join(t, NULL);
    assert_int_equal(first.r.curl_code, CURLE_GOT_NOTHING);
    http_reply_free(&first.r);
    assert_int_equal(gateway_stop(&e->gw), 0);
    const char *const extra[] = {"--loops", "1", NULL};
    start_gateway_to(e, upstream_url(e->up), extra); /* the same store */
    http_reply r;
    post(e, "/orders", "k-queued", "a", &r);
    assert_int_equal(r.status, 201);
    header_absent(&r, "Idempotent-Replayed");
    http_reply_free(&r);
    assert_int_equal(upstream_key_requests(e->up, "k-queued"), 1);
}

#define GW_CASE(name) cmocka_unit_test_setup_teardown(name, env_setup, env_teardown)

int main(void)
{
    if (resil_binary() == NULL) {
        fprintf(stderr, "RESIL_BUILD_DIR is not set\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        GW_CASE(an_answer_over_max_body_is_stored_as_unknown_and_never_run_again),
        GW_CASE(an_upstream_timeout_is_stored_as_unknown_and_never_run_again),
        GW_CASE(a_refused_connection_releases_the_key_and_the_retry_runs_once),
        GW_CASE(statuses_that_say_not_processed_release_the_key),
        GW_CASE(other_5xx_from_the_upstream_are_answers_saved_and_replayed),
        GW_CASE(with_upstream_dedupes_a_timeout_releases_the_key),
        GW_CASE(a_guarded_request_on_a_connection_that_dies_unanswered_is_not_resent),
        GW_CASE(a_refused_reconnect_after_the_request_left_is_stored_as_unknown),
        GW_CASE(an_unguarded_request_keeps_libcurls_resend),
        GW_CASE(a_kept_connection_the_upstream_closes_while_idle_costs_the_next_request_nothing),
        GW_CASE(a_connect_that_times_out_releases_the_key),
        GW_CASE(a_takeover_is_stored_as_unknown_and_not_forwarded),
        GW_CASE(with_upstream_dedupes_a_takeover_is_forwarded),
        GW_CASE(a_slow_call_keeps_its_key_past_the_lease_and_a_repeat_gets_409),
        GW_CASE(a_run_that_lost_its_key_is_refused_and_answers_409),
        GW_CASE(a_key_the_store_refuses_is_400_naming_the_rule),
        GW_CASE(an_unavailable_store_is_503_with_retry_after),
        GW_CASE(a_store_that_refuses_is_500_without_retry_after),
        GW_CASE(an_answer_the_store_refuses_for_good_is_saved_as_unknown),
        GW_CASE(the_journal_defaults_to_a_file_next_to_the_sqlite_store),
        GW_CASE(an_answer_the_database_cannot_take_is_journaled_then_replayed),
        GW_CASE(without_a_journal_an_unsaved_answer_is_503_and_saved_later),
        GW_CASE(a_call_the_stop_drops_closes_unanswered_and_its_key_is_settled_unknown),
        GW_CASE(a_claim_that_comes_back_after_the_drain_is_not_forwarded),
        GW_CASE(a_queued_store_job_runs_once_the_worker_is_free),
        GW_CASE(a_store_job_still_queued_at_stop_is_closed_unanswered_and_claims_nothing),
    };
    int failed = cmocka_run_group_tests_name("store.gateway_rules", tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
