/*
 * bench_store_loop.c — the store under a fixed number of clients for a
 * fixed time: begin+complete pairs a second, the key writes each batch
 * carried, and the process's CPU time per pair.
 *
 * bench_store times a calibrated number of pairs, starting its client
 * threads for every run; on a loaded machine whose disk's sync time moves
 * from one second to the next, that mixes the store's behaviour with the
 * disk's. This one keeps the clients running and counts what completes
 * in a window after a warm-up, so two builds can be run in turn, a few
 * times, and compared pair by pair (docs/performance-history.md does).
 *
 * "async" runs the clients as an event loop would: ONE thread keeps
 * CLIENTS requests in flight through the asynchronous calls, and the
 * callbacks (on the store's threads) hand each answer back to it through
 * a locked list and a condition variable, as uv_async_send would.
 *
 *   bench_store_loop                 SQLite in a temporary directory, 8 and
 *                                    32 blocking clients, then 32 in flight
 *                                    from one thread, 1.5 s each
 *   bench_store_loop pg              the same three against a throwaway
 *                                    PostgreSQL with fsync on
 *   bench_store_loop URL CLIENTS [S [async]]  one run against URL
 *                                    (sqlite:PATH or postgres://...)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "pg_server.h"
#include "resil/store.h"

#define MAX_CLIENTS 256
#define USAGE "bench_store_loop [pg | URL CLIENTS(1..256) [SECONDS(0..600] [async]]]"
#define CONNECTIONS 8 /* the gateway's pool */

static resil_store *store;
static atomic_ulong pairs, next_id;
static atomic_bool stop;
static uint8_t request_hash[RESIL_SHA256_LEN];
static const char saved_body[] = "{\"order\":1,\"status\":\"created\"}";
static unsigned long run_id;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_store_loop: %s: %s\n", what, detail);
    exit(1);
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void pause_for(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *client(void *ud)
{
    (void)ud;
    resil_store_result res;
    resil_store_result_init(&res);
    resil_store_response r = {.status = 201, .body = saved_body,
                              .body_len = sizeof saved_body - 1};
    while (!atomic_load(&stop)) {
        char key[64];
        snprintf(key, sizeof key, "loop-%lu-%lu", run_id, atomic_fetch_add(&next_id, 1));
        resil_store_key k = {.tenant = "bench", .operation = "orders", .key = key};
        resil_err err = {0};
        if (resil_store_begin(store, &k, request_hash, &res, &err) != 0 ||
            res.verdict != RESIL_STORE_FIRST)
            die("begin", err.message);
        if (resil_store_complete(store, &k, res.lease, &r, &err) != 0)
            die("complete", err.message);
        atomic_fetch_add(&pairs, 1);
    }
    resil_store_result_free(&res);
    return NULL;
}

/* ---- one thread, requests in flight -------------------------------------- */

typedef struct request {
    struct request *next;
    char key[64];
    resil_store_key k;
    resil_store_result res;
    bool completing;
    int rc;
    char error[256];
} request;

static pthread_mutex_t loop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t loop_cv = PTHREAD_COND_INITIALIZER;
static request *ready;
static int in_flight;
static const resil_store_response saved = {.status = 201, .body = saved_body,
                                           .body_len = sizeof saved_body - 1};

/* On a store thread: hand the answer to the loop. */
static void answered(int rc, const resil_err *err, void *ud)
{
    request *q = ud;
    q->rc = rc;
    snprintf(q->error, sizeof q->error, "%s", err != NULL ? err->message : "");
    pthread_mutex_lock(&loop_mu);
    q->next = ready;
    ready = q;
    pthread_cond_signal(&loop_cv);
    pthread_mutex_unlock(&loop_mu);
}

static void submit_begin(request *q)
{
    snprintf(q->key, sizeof q->key, "loop-%lu-%lu", run_id, atomic_fetch_add(&next_id, 1));
    q->k = (resil_store_key){.tenant = "bench", .operation = "orders", .key = q->key};
    q->completing = false;
    resil_err err = {0};
    if (resil_store_begin_async(store, &q->k, request_hash, &q->res, answered, q, &err) != 0)
        die("begin_async", err.message);
}

/* The loop's side of one answer: complete after a claim, then the next key. */
static void step(request *q)
{
    resil_err err = {0};
    if (q->rc != 0)
        die(q->completing ? "complete_async" : "begin_async", q->error);
    if (q->completing) {
        atomic_fetch_add(&pairs, 1);
        submit_begin(q);
        return;
    }
    if (q->res.verdict != RESIL_STORE_FIRST)
        die("begin_async", resil_store_verdict_name(q->res.verdict));
    q->completing = true;
    if (resil_store_complete_async(store, &q->k, q->res.lease, &saved, answered, q, &err) != 0)
        die("complete_async", err.message);
}

static void *loop_client(void *ud)
{
    request *qs = ud;
    for (int i = 0; i < in_flight; i++)
        submit_begin(&qs[i]);
    pthread_mutex_lock(&loop_mu);
    while (!atomic_load(&stop)) {
        request *q = ready;
        ready = NULL;
        if (q == NULL) {
            pthread_cond_wait(&loop_cv, &loop_mu);
            continue;
        }
        pthread_mutex_unlock(&loop_mu);
        for (request *next; q != NULL; q = next) {
            next = q->next;
            step(q);
        }
        pthread_mutex_lock(&loop_mu);
    }
    pthread_mutex_unlock(&loop_mu);
    return NULL;
}

/* ---- a run ------------------------------------------------------------------ */

static void run(const char *url, int clients, double seconds, bool async)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = url;
    o.connections = CONNECTIONS;
    o.busy_timeout = RESIL_S(5);
    resil_err err = {0};
    if (resil_store_new(&o, &store, &err) != 0)
        die("open", err.message);
    atomic_store(&stop, false);
    pthread_t t[MAX_CLIENTS];
    request *qs = NULL;
    int threads = async ? 1 : clients;
    if (async) {
        in_flight = clients;
        ready = NULL;
        qs = calloc((size_t)clients, sizeof *qs);
        if (qs == NULL)
            die("calloc", "out of memory");
        pthread_create(&t[0], NULL, loop_client, qs);
    }
    for (int i = 0; !async && i < clients; i++)
        pthread_create(&t[i], NULL, client, NULL);
    pause_for(0.2); /* warm-up: every client inside the store */
    resil_store_batch_stats b0, b1;
    resil_store_batch_stats_get(store, &b0);
    unsigned long p0 = atomic_load(&pairs);
    double c0 = cpu_seconds();
    pause_for(seconds);
    unsigned long p1 = atomic_load(&pairs);
    double c1 = cpu_seconds();
    resil_store_batch_stats_get(store, &b1);
    atomic_store(&stop, true);
    pthread_mutex_lock(&loop_mu);
    pthread_cond_broadcast(&loop_cv);
    pthread_mutex_unlock(&loop_mu);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    unsigned long n = p1 - p0;
    uint64_t batches = b1.batches - b0.batches;
    printf("bench store_loop backend=%s %s=%d pairs_per_s=%.0f writes_per_batch=%.1f "
           "cpu_us_per_pair=%.1f\n",
           resil_store_backend(store), async ? "async_in_flight" : "clients", clients,
           (double)n / seconds,
           batches ? (double)(b1.calls - b0.calls) / (double)batches : 0.0,
           n ? (c1 - c0) * 1e6 / (double)n : 0.0);
    resil_store_free(store); /* answers what is still queued: the requests outlive it */
    for (int i = 0; async && i < clients; i++)
        resil_store_result_free(&qs[i].res);
    free(qs);
}

int main(int argc, char **argv)
{
    run_id = (unsigned long)getpid() ^ (unsigned long)time(NULL);
    resil_store_request_hash("POST", "/orders", saved_body, sizeof saved_body - 1,
                             request_hash);
    if (argc >= 3) {
        int clients = atoi(argv[2]);
        double seconds = argc > 3 ? atof(argv[3]) : 1.5;
        bool async = argc > 4 && strcmp(argv[4], "async") == 0;
        if (clients < 1 || clients > MAX_CLIENTS || !(seconds > 0 && seconds <= 600) ||
            argc > 5 || (argc == 5 && !async))
            die("usage", USAGE);
        run(argv[1], clients, seconds, async);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "pg") == 0) {
        pg_server *pg = pg_server_start_durable(1);
        if (pg == NULL)
            die("postgres", "could not start a server");
        run(pg_server_url(pg), 8, 1.5, false);
        run(pg_server_url(pg), 32, 1.5, false);
        run(pg_server_url(pg), 32, 1.5, true);
        pg_server_stop(pg);
        return 0;
    }
    if (argc != 1)
        die("usage", USAGE);
    char dir[] = "/tmp/resil-bench-loop-XXXXXX";
    if (mkdtemp(dir) == NULL)
        die("mkdtemp", "failed");
    char url[128];
    snprintf(url, sizeof url, "sqlite:%s/loop.db", dir);
    run(url, 8, 1.5, false);
    run(url, 32, 1.5, false);
    run(url, 32, 1.5, true);
    char path[160];
    const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/loop.db%s", dir, suffixes[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}
