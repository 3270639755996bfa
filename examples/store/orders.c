/*
 * orders.c — an order service made safe to retry with libresil-store.
 *
 * The service creates an order for each request; a client that lost the
 * response sends the same request again with the same Idempotency-Key. The
 * store turns that repeat into a replay of the first answer instead of a
 * second order. Run it with no argument (an in-memory SQLite store) or with
 * a store URL: `orders sqlite:orders.db`, `orders postgres://localhost/app`.
 *
 * Build: cc orders.c $(pkg-config --cflags --libs resil-store)
 */
#include <stdio.h>
#include <string.h>

#include "resil/store.h"

static int orders_created;

/* The business operation: not idempotent on its own. */
static int create_order(const char *body, char *response, size_t cap)
{
    orders_created++;
    return snprintf(response, cap, "{\"order\":%d,\"request\":%s}", orders_created, body);
}

/* One request: what an HTTP handler would do with (key, body). */
static void handle(resil_store *store, const char *key, const char *body)
{
    uint8_t hash[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/orders", body, strlen(body), hash);
    resil_store_key k = {.tenant = "shop", .operation = "create-order", .key = key};
    resil_store_result res;
    resil_store_result_init(&res);
    resil_err err = {0};
    if (resil_store_begin(store, &k, hash, &res, &err) != 0) {
        printf("%-5s %-10s -> 503 store unavailable: %s\n", key, body, err.message);
        return;
    }
    switch (res.verdict) {
    case RESIL_STORE_FIRST: {
        char response[256];
        int len = create_order(body, response, sizeof response);
        resil_store_response saved = {.status = 201, .body = response, .body_len = (size_t)len};
        if (resil_store_complete(store, &k, res.lease, &saved, &err) != 0)
            printf("      (could not save the response: %s)\n", err.message);
        printf("%-5s %-10s -> 201 %s (first: ran it)\n", key, body, response);
        break;
    }
    case RESIL_STORE_REPLAY:
        printf("%-5s %-10s -> %d %.*s (replayed)\n", key, body, res.status, (int)res.body_len,
               (const char *)res.body);
        break;
    case RESIL_STORE_IN_PROGRESS:
        printf("%-5s %-10s -> 409 still running, retry in %.0f ms\n", key, body,
               resil_dur_to_ms(res.lease_left));
        break;
    default:
        printf("%-5s %-10s -> 422 key reused with a different request\n", key, body);
        break;
    }
    resil_store_result_free(&res);
}

int main(int argc, char **argv)
{
    resil_store_opts opts;
    resil_store_opts_default(&opts);
    opts.url = argc > 1 ? argv[1] : "sqlite::memory:";
    resil_store *store;
    resil_err err = {0};
    if (resil_store_new(&opts, &store, &err) != 0) {
        fprintf(stderr, "orders: %s\n", err.message);
        return 1;
    }
    handle(store, "k-1", "{\"qty\":1}"); /* the first request */
    handle(store, "k-1", "{\"qty\":1}"); /* its retry: same answer, no new order */
    handle(store, "k-1", "{\"qty\":9}"); /* a client bug: key reused */
    handle(store, "k-2", "{\"qty\":2}"); /* another order */
    printf("orders created: %d\n", orders_created);
    /* A long-running server calls this now and then (the gateway: every minute). */
    resil_store_purge(store, NULL, NULL);
    resil_store_free(store);
    return 0;
}
