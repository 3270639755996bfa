/*
 * orders_tx.c — an order service whose idempotency key commits with the
 * order, in one SQLite transaction.
 *
 * orders.c saves the response after the order is written, in a second
 * transaction: a crash between the two leaves an order without its key's
 * answer, and the key is run again only after its lease expires. Here the
 * service passes its own connection, inside its own transaction, to the
 * store: claim the key, insert the order, save the response, COMMIT. A
 * failure before COMMIT rolls back the key and the order together, so the
 * client's retry runs exactly once more; after COMMIT it replays.
 *
 *     BEGIN IMMEDIATE; begin_in -> FIRST; INSERT order; complete_in; COMMIT
 *
 * Run it with no argument (a temporary file) or with a database path.
 * Build: cc orders_tx.c $(pkg-config --cflags --libs resil-store)
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resil/store.h"

typedef struct service {
    resil_store *store;
    sqlite3 *db; /* the service's own connection to the same file */
} service;

static int sql(sqlite3 *db, const char *text)
{
    return sqlite3_exec(db, text, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* The business write: a new order, its id into *id. */
static int insert_order(sqlite3 *db, const char *body, long long *id)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT INTO orders (request) VALUES (?1)", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, body, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db);
    return rc;
}

/* FIRST: write the order and its saved response; COMMIT unless `crash`. */
static void run_first(service *svc, const resil_store_tx *tx, const resil_store_key *k,
                      uint64_t lease, const char *body, int crash)
{
    char response[256];
    long long id;
    resil_err err = {0};
    if (insert_order(svc->db, body, &id) != 0) {
        sql(svc->db, "ROLLBACK");
        printf("%-5s %-10s -> 500 the order could not be written\n", k->key, body);
        return;
    }
    int len = snprintf(response, sizeof response, "{\"order\":%lld,\"request\":%s}", id, body);
    resil_store_response saved = {.status = 201, .body = response, .body_len = (size_t)len};
    if (resil_store_complete_in(svc->store, tx, k, lease, &saved, &err) != 0) {
        sql(svc->db, "ROLLBACK");
        printf("%-5s %-10s -> 503 %s\n", k->key, body, err.message);
        return;
    }
    if (crash) { /* the process dies before COMMIT: SQLite rolls it back */
        sql(svc->db, "ROLLBACK");
        printf("%-5s %-10s -> crashed before COMMIT: no order, no key\n", k->key, body);
        return;
    }
    if (sql(svc->db, "COMMIT") != 0) {
        sql(svc->db, "ROLLBACK");
        printf("%-5s %-10s -> 503 commit failed\n", k->key, body);
        return;
    }
    printf("%-5s %-10s -> 201 %s (first: ran it)\n", k->key, body, response);
}

/* One request: what an HTTP handler would do with (key, body). */
static void handle(service *svc, const char *key, const char *body, int crash)
{
    uint8_t hash[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/orders", body, strlen(body), hash);
    resil_store_key k = {.tenant = "shop", .operation = "create-order", .key = key};
    resil_store_tx tx = {.sqlite = svc->db};
    resil_store_result res;
    resil_store_result_init(&res);
    resil_err err = {0};
    if (sql(svc->db, "BEGIN IMMEDIATE") != 0 ||
        resil_store_begin_in(svc->store, &tx, &k, hash, &res, &err) != 0) {
        sql(svc->db, "ROLLBACK");
        printf("%-5s %-10s -> 503 %s\n", key, body, err.message);
        resil_store_result_free(&res);
        return;
    }
    if (res.verdict == RESIL_STORE_FIRST) {
        run_first(svc, &tx, &k, res.lease, body, crash);
        resil_store_result_free(&res);
        return;
    }
    sql(svc->db, "ROLLBACK"); /* nothing was written */
    if (res.verdict == RESIL_STORE_REPLAY)
        printf("%-5s %-10s -> %d %.*s (replayed)\n", key, body, res.status,
               (int)res.body_len, (const char *)res.body);
    else if (res.verdict == RESIL_STORE_MISMATCH)
        printf("%-5s %-10s -> 422 key reused with a different request\n", key, body);
    else
        printf("%-5s %-10s -> 409 still running\n", key, body);
    resil_store_result_free(&res);
}

static int count_orders(sqlite3 *db)
{
    sqlite3_stmt *st;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM orders", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static int open_service(service *svc, const char *path)
{
    char url[4200];
    snprintf(url, sizeof url, "sqlite:%s", path);
    resil_store_opts opts;
    resil_store_opts_default(&opts);
    opts.url = url;
    resil_err err = {0};
    if (resil_store_new(&opts, &svc->store, &err) != 0) {
        fprintf(stderr, "orders_tx: %s\n", err.message);
        return -1;
    }
    if (sqlite3_open(path, &svc->db) != SQLITE_OK) {
        fprintf(stderr, "orders_tx: %s\n", sqlite3_errmsg(svc->db));
        return -1;
    }
    sqlite3_busy_timeout(svc->db, 5000);
    return sql(svc->db, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, request TEXT)");
}

int main(int argc, char **argv)
{
    char path[4096];
    if (argc > 1) {
        snprintf(path, sizeof path, "%s", argv[1]);
    } else {
        snprintf(path, sizeof path, "%s/orders-tx-%d.db", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid());
    }
    service svc = {0};
    int rc = open_service(&svc, path);
    if (rc == 0) {
        handle(&svc, "k-1", "{\"qty\":1}", 0);
        handle(&svc, "k-1", "{\"qty\":1}", 0); /* the client lost the answer */
        handle(&svc, "k-2", "{\"qty\":2}", 1); /* the server dies mid-request */
        handle(&svc, "k-2", "{\"qty\":2}", 0); /* the client's retry runs it */
        handle(&svc, "k-2", "{\"qty\":2}", 0);
        handle(&svc, "k-1", "{\"qty\":9}", 0);
        printf("orders created: %d\n", count_orders(svc.db));
    }
    sqlite3_close(svc.db);
    resil_store_free(svc.store);
    if (argc <= 1) {
        char extra[4200];
        unlink(path);
        snprintf(extra, sizeof extra, "%s-wal", path);
        unlink(extra);
        snprintf(extra, sizeof extra, "%s-shm", path);
        unlink(extra);
    }
    return rc == 0 ? 0 : 1;
}
