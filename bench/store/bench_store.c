/*
 * bench_store.c — what idempotency costs: the store's begin+complete on
 * SQLite and PostgreSQL (one client, eight and thirty-two, with the batches
 * they made), a replay, and the gateway's overhead over calling the
 * upstream directly on loopback. `bench_store sqlite` or `bench_store pg`
 * runs one backend's store figures alone; `bench_store pg-nosync` runs
 * PostgreSQL's with fsync off, the store's own cost without the disk's.
 *
 * Each figure has a baseline measured in the same process: for the store,
 * the one INSERT the protocol cannot do without (same table layout, same
 * durability); for the gateway, the same request sent straight to the
 * upstream. Both databases run durable (SQLite WAL with synchronous FULL,
 * PostgreSQL with fsync on), because an idempotency record that a crash can
 * lose is a duplicate order waiting to happen. These operations take
 * milliseconds, so they are timed with a shorter calibration than
 * bench_run's (which starts at 1000 iterations), in the same line format.
 */
#include <curl/curl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "gateway_proc.h"
#include "pg_server.h"
#include "resil/store.h"
#include "upstream.h"

#define MAX_CLIENTS 32
#define CONNECTIONS 8

static atomic_uint_fast64_t next_id;
static uint8_t request_hash[RESIL_SHA256_LEN];
static const char saved_headers[] = "Content-Type: application/json\r\nLocation: /orders/1\r\n";
static const char saved_body[] = "{\"order\":1,\"status\":\"created\",\"total\":\"42.00\"}";

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, detail);
    exit(1);
}

/* Three runs of about 75 ms: each operation is a database round trip. */
static bench_result run_slow(const char *name, bench_fn fn, void *ud)
{
    return bench_run_for(name, fn, ud, 75000000u, 3);
}

/* ---- the store ------------------------------------------------------------- */

typedef struct store_bench {
    resil_store *s;
    int clients;
    uint64_t per_thread;
} store_bench;

static void key_for(uint64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "bench-%llu", (unsigned long long)id);
}

static void begin_complete(resil_store *s, resil_store_result *res)
{
    char key[40];
    key_for(atomic_fetch_add(&next_id, 1), key, sizeof key);
    resil_store_key k = {.tenant = "bench", .operation = "orders", .key = key};
    resil_err err = {0};
    if (resil_store_begin(s, &k, request_hash, res, &err) != 0 ||
        res->verdict != RESIL_STORE_FIRST)
        die("begin", err.message);
    resil_store_response r = {.status = 201, .headers = saved_headers,
                              .headers_len = sizeof saved_headers - 1, .body = saved_body,
                              .body_len = sizeof saved_body - 1};
    if (resil_store_complete(s, &k, res->lease, &r, &err) != 0)
        die("complete", err.message);
}

static void one_client(void *ud, uint64_t iters)
{
    store_bench *b = ud;
    resil_store_result res;
    resil_store_result_init(&res);
    for (uint64_t i = 0; i < iters; i++)
        begin_complete(b->s, &res);
    resil_store_result_free(&res);
}

static void *client_thread(void *ud)
{
    store_bench *b = ud;
    one_client(b, b->per_thread);
    return NULL;
}

static void many_clients(void *ud, uint64_t iters)
{
    store_bench *b = ud;
    int n = b->clients;
    store_bench each = {.s = b->s, .per_thread = (iters + (uint64_t)n - 1) / (uint64_t)n};
    pthread_t t[MAX_CLIENTS];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, client_thread, &each);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

static void replays(void *ud, uint64_t iters)
{
    store_bench *b = ud;
    resil_store_key k = {.tenant = "bench", .operation = "orders", .key = "replayed"};
    resil_store_result res;
    resil_store_result_init(&res);
    for (uint64_t i = 0; i < iters; i++) {
        if (resil_store_begin(b->s, &k, request_hash, &res, NULL) != 0 ||
            res.verdict != RESIL_STORE_REPLAY)
            die("replay", "not a replay");
    }
    resil_store_result_free(&res);
}

static resil_store *open_store(const char *url)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = url;
    o.connections = CONNECTIONS;
    o.busy_timeout = RESIL_S(5);
    resil_store *s;
    resil_err err = {0};
    if (resil_store_new(&o, &s, &err) != 0)
        die("open", err.message);
    resil_store_key k = {.tenant = "bench", .operation = "orders", .key = "replayed"};
    resil_store_result res;
    resil_store_result_init(&res);
    if (resil_store_begin(s, &k, request_hash, &res, &err) == 0 &&
        res.verdict == RESIL_STORE_FIRST) {
        resil_store_response r = {.status = 201, .body = saved_body,
                                  .body_len = sizeof saved_body - 1};
        resil_store_complete(s, &k, res.lease, &r, &err);
    }
    resil_store_result_free(&res);
    return s;
}

/* begin+complete from `clients` threads at once, with the key writes per
 * batch the run made (its batches counted from the store's statistics).
 * Runs of a second: a commit waits for the disk's sync, milliseconds when
 * the machine is busy, and a shorter run would carry a handful of them. */
static bench_result report_clients(const char *backend, store_bench *b, int clients,
                                   bench_result base)
{
    char name[64], extra[160];
    resil_store_batch_stats before, after;
    b->clients = clients;
    resil_store_batch_stats_get(b->s, &before);
    if (clients == 1)
        snprintf(name, sizeof name, "store_%s_begin_complete", backend);
    else
        snprintf(name, sizeof name, "store_%s_begin_complete_%dclients", backend, clients);
    bench_result r = bench_run_for(name, clients == 1 ? one_client : many_clients, b,
                                   1000000000u, 3);
    resil_store_batch_stats_get(b->s, &after);
    uint64_t batches = after.batches - before.batches, calls = after.calls - before.calls;
    snprintf(extra, sizeof extra, "ops_per_s=%.0f clients=%d writes_per_batch=%.1f",
             1e9 / r.ns_per_op, clients, batches ? (double)calls / (double)batches : 0.0);
    bench_report(r, base, extra);
    return r;
}

static void report_store(const char *backend, const char *url, bench_result insert)
{
    char replay_name[64], extra[128];
    store_bench b = {.s = open_store(url)};
    bench_result one = report_clients(backend, &b, 1, insert);
    report_clients(backend, &b, 8, one);
    report_clients(backend, &b, MAX_CLIENTS, one);
    snprintf(replay_name, sizeof replay_name, "store_%s_replay", backend);
    bench_result replay = run_slow(replay_name, replays, &b);
    snprintf(extra, sizeof extra, "ops_per_s=%.0f clients=1", 1e9 / replay.ns_per_op);
    bench_report(replay, insert, extra);
    resil_store_free(b.s);
}

/* ---- baselines: one plain INSERT of the same row ---------------------------- */

static const char raw_table[] =
    "CREATE TABLE raw_rows (tenant TEXT NOT NULL, operation TEXT NOT NULL,"
    " idempotency_key TEXT NOT NULL, request_hash %s NOT NULL, status INTEGER,"
    " headers %s, body %s, created_at BIGINT NOT NULL, lease_expires_at BIGINT NOT NULL,"
    " lease BIGINT NOT NULL, PRIMARY KEY (tenant, operation, idempotency_key))";

static void sqlite_inserts(void *ud, uint64_t iters)
{
    sqlite3_stmt *st = ud;
    for (uint64_t i = 0; i < iters; i++) {
        char key[40];
        key_for(atomic_fetch_add(&next_id, 1), key, sizeof key);
        sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE)
            die("sqlite insert", "failed");
        sqlite3_reset(st);
    }
}

static bench_result sqlite_baseline(const char *path)
{
    sqlite3 *db;
    char sql[600];
    snprintf(sql, sizeof sql, raw_table, "BLOB", "BLOB", "BLOB");
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        die("sqlite baseline", sqlite3_errmsg(db));
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "INSERT INTO raw_rows VALUES ('bench', 'orders', ?1, x'00', 201, "
                       "x'00', x'00', 0, 0, 1)",
                       -1, &st, NULL);
    bench_result r = run_slow("sqlite_insert_row", sqlite_inserts, st);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return r;
}

static void pg_inserts(void *ud, uint64_t iters)
{
    PGconn *c = ud;
    for (uint64_t i = 0; i < iters; i++) {
        char key[40];
        key_for(atomic_fetch_add(&next_id, 1), key, sizeof key);
        const char *v[] = {key};
        PGresult *r = PQexecPrepared(c, "ins", 1, v, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die("pg insert", PQresultErrorMessage(r));
        PQclear(r);
    }
}

static bench_result pg_baseline(const char *url)
{
    PGconn *c = PQconnectdb(url);
    char sql[600];
    snprintf(sql, sizeof sql, raw_table, "BYTEA", "BYTEA", "BYTEA");
    PQclear(PQexec(c, sql));
    PQclear(PQprepare(c, "ins",
                      "INSERT INTO raw_rows VALUES ('bench', 'orders', $1, '\\x00', 201,"
                      " '\\x00', '\\x00', 0, 0, 1)",
                      1, NULL));
    bench_result r = run_slow("pg_insert_row", pg_inserts, c);
    PQfinish(c);
    return r;
}

/* ---- the gateway -------------------------------------------------------------- */

#ifdef RESIL_GATEWAY_BINARY

typedef struct http_bench {
    CURL *h;
    char url[128];
    bool keyed;
    bool same_key;
    uint64_t *latencies; /* optional: one per request */
} http_bench;

static size_t discard(char *d, size_t s, size_t n, void *u)
{
    (void)d;
    (void)u;
    return s * n;
}

static void post_loop(void *ud, uint64_t iters)
{
    http_bench *b = ud;
    for (uint64_t i = 0; i < iters; i++) {
        char header[64] = "Idempotency-Key: same";
        if (b->keyed && !b->same_key)
            snprintf(header, sizeof header, "Idempotency-Key: gw-%llu",
                     (unsigned long long)atomic_fetch_add(&next_id, 1));
        struct curl_slist *l = curl_slist_append(NULL, "Expect:");
        if (b->keyed)
            l = curl_slist_append(l, header);
        curl_easy_setopt(b->h, CURLOPT_HTTPHEADER, l);
        uint64_t t0 = bench_now_ns();
        CURLcode rc = curl_easy_perform(b->h);
        if (b->latencies != NULL)
            b->latencies[i] = bench_now_ns() - t0;
        curl_slist_free_all(l);
        long status = 0;
        curl_easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK || status != 201)
            die("gateway request", curl_easy_strerror(rc));
    }
}

static void http_setup(http_bench *b, const char *base)
{
    snprintf(b->url, sizeof b->url, "%s/orders", base);
    b->h = curl_easy_init();
    curl_easy_setopt(b->h, CURLOPT_URL, b->url);
    curl_easy_setopt(b->h, CURLOPT_POSTFIELDS, saved_body);
    curl_easy_setopt(b->h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(b->h, CURLOPT_NOSIGNAL, 1L);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 of `n` timed requests, in ns. */
static void percentiles(http_bench *b, uint64_t n, double *p50, double *p99)
{
    uint64_t *lat = calloc(n, sizeof *lat);
    b->latencies = lat;
    post_loop(b, n);
    b->latencies = NULL;
    qsort(lat, n, sizeof *lat, cmp_u64);
    *p50 = (double)lat[n / 2];
    *p99 = (double)lat[n * 99 / 100];
    free(lat);
}

static void report_gateway(const char *binary, const char *dir)
{
    upstream *up = upstream_start();
    gateway_proc gw;
    char store[600], log[600];
    snprintf(store, sizeof store, "sqlite:%s/gateway.db", dir);
    snprintf(log, sizeof log, "%s/gateway.log", dir);
    const char *args[] = {"--upstream", upstream_url(up), "--store", store, "--quiet", NULL};
    if (up == NULL || gateway_start(&gw, binary, log, args) != 0)
        die("gateway", "did not start");
    http_bench direct = {0}, first = {.keyed = true}, replay = {.keyed = true, .same_key = true},
               plain = {0};
    http_setup(&direct, upstream_url(up));
    http_setup(&first, gw.url);
    http_setup(&replay, gw.url);
    http_setup(&plain, gw.url);
    post_loop(&replay, 1); /* the key exists from here on */

    bench_result base = run_slow("direct_upstream_post", post_loop, &direct);
    const struct {
        const char *name;
        http_bench *b;
    } cases[] = {{"gateway_post_first", &first},
                 {"gateway_post_replay", &replay},
                 {"gateway_post_passthrough", &plain}};
    double d50, d99;
    percentiles(&direct, 2000, &d50, &d99);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bench_result r = run_slow(cases[i].name, post_loop, cases[i].b);
        double p50, p99;
        percentiles(cases[i].b, 2000, &p50, &p99);
        char extra[200];
        snprintf(extra, sizeof extra,
                 "requests_per_s=%.0f p50_us=%.0f p99_us=%.0f p50_added_us=%.0f "
                 "p99_added_us=%.0f",
                 1e9 / r.ns_per_op, p50 / 1e3, p99 / 1e3, (p50 - d50) / 1e3, (p99 - d99) / 1e3);
        bench_report(r, base, extra);
    }
    curl_easy_cleanup(direct.h);
    curl_easy_cleanup(first.h);
    curl_easy_cleanup(replay.h);
    curl_easy_cleanup(plain.h);
    gateway_stop(&gw);
    upstream_stop(up);
}
#endif

static void remove_dir(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_store: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only != NULL && strcmp(only, "sqlite") != 0 && strcmp(only, "pg") != 0 &&
        strcmp(only, "pg-nosync") != 0)
        die("usage", "bench_store [sqlite|pg|pg-nosync]");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    resil_store_request_hash("POST", "/orders", saved_body, sizeof saved_body - 1,
                             request_hash);
    char dir[] = "/tmp/resil-bench-store-XXXXXX";
    if (mkdtemp(dir) == NULL)
        die("mkdtemp", "failed");
    char path[600], url[640];
    snprintf(path, sizeof path, "%s/bench.db", dir);
    snprintf(url, sizeof url, "sqlite:%s", path);
    if (only == NULL || strcmp(only, "sqlite") == 0)
        report_store("sqlite", url, sqlite_baseline(path));

    /* With fsync off (never for real use) the commit costs no disk wait,
     * so what is left is the store's and the server's own work per call:
     * round trips and statements. */
    if (only != NULL && strcmp(only, "pg-nosync") == 0) {
        pg_server *pg = pg_server_start();
        if (pg == NULL)
            die("postgres", "could not start a server");
        report_store("pg_nosync", pg_server_url(pg), pg_baseline(pg_server_url(pg)));
        pg_server_stop(pg);
    }
    if (only == NULL || strcmp(only, "pg") == 0) {
        pg_server *pg = pg_server_start_durable(1);
        if (pg == NULL)
            die("postgres", "could not start a server");
        report_store("pg", pg_server_url(pg), pg_baseline(pg_server_url(pg)));
        pg_server_stop(pg);
    }

#ifdef RESIL_GATEWAY_BINARY
    if (only == NULL)
        report_gateway(RESIL_GATEWAY_BINARY, dir);
#endif
    remove_dir(dir);
    curl_global_cleanup();
    return 0;
}
