/*
 * test_gateway_loop.c — `resil gateway` on one event loop: connections and
 * upstream calls run on the loop, and only the store's calls take one of
 * the --workers. The upstream holds every request to /hold until the test
 * releases it (upstream_release), so "the upstream is slow" is a state the
 * test sets, not a duration it sleeps through.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "gateway_env.h"
#include "test.h"
#include "upstream.h"

typedef struct env {
    char *dir;
    upstream *up;
    gateway_proc gw;
} env;

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dir = test_tmpdir();
    e->up = upstream_start();
    if (e->dir == NULL || e->up == NULL)
        return -1;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    upstream_release(e->up);
    if (e->gw.pid > 0)
        gateway_stop(&e->gw);
    upstream_stop(e->up);
    test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

/* One store worker: whatever else is served meanwhile is not served by a
 * thread waiting on the upstream. `loops`: --loops, or NULL for the
 * default. */
static void start_gateway_loops(env *e, const char *loops)
{
    char store[600], log[600];
    snprintf(store, sizeof store, "sqlite:%s/gateway.db", e->dir);
    snprintf(log, sizeof log, "%s/gateway.log", e->dir);
    const char *args[] = {"--upstream", upstream_url(e->up), "--store", store, "--workers", "1",
                          loops ? "--loops" : NULL, loops, NULL};
    if (gateway_start(&e->gw, test_build_path("resil"), log, args) != 0)
        fail_msg("the gateway did not start");
}

static void start_gateway(env *e) { start_gateway_loops(e, NULL); }

typedef struct call {
    const env *e;
    const char *method, *target, *key;
    http_reply r;
    int rc;
} call;

static void *call_in_thread(void *arg)
{
    call *c = arg;
    char url[256], header[300];
    snprintf(url, sizeof url, "%s%s", c->e->gw.url, c->target);
    snprintf(header, sizeof header, "Idempotency-Key: %s", c->key ? c->key : "");
    const char *headers[] = {c->key ? header : NULL, NULL};
    c->rc = http_request(c->method, url, headers, strcmp(c->method, "POST") == 0 ? "a" : NULL,
                         &c->r);
    return NULL;
}

static void start_call(call *c, pthread_t *t) { pthread_create(t, NULL, call_in_thread, c); }

static long finish_call(call *c, pthread_t t)
{
    pthread_join(t, NULL);
    assert_int_equal(c->rc, 0);
    long status = c->r.status;
    http_reply_free(&c->r);
    return status;
}

static long request(const env *e, const char *method, const char *target, const char *key)
{
    call c = {.e = e, .method = method, .target = target, .key = key};
    call_in_thread(&c);
    assert_int_equal(c.rc, 0);
    long status = c.r.status;
    http_reply_free(&c.r);
    return status;
}

static void a_guarded_request_waiting_upstream_holds_no_store_worker(void **state)
{
    env *e = *state;
    start_gateway(e);
    call slow = {.e = e, .method = "POST", .target = "/hold", .key = "h-1"};
    pthread_t t;
    start_call(&slow, &t);
    assert_true(upstream_wait_held(e->up, 1));
    /* The only worker is free: another key is claimed, forwarded, saved
     * and replayed while the first waits on the upstream. */
    assert_int_equal(request(e, "POST", "/orders", "k-2"), 201);
    assert_int_equal(request(e, "POST", "/orders", "k-2"), 201);
    assert_int_equal(upstream_key_requests(e->up, "k-2"), 1);
    upstream_release(e->up);
    assert_int_equal(finish_call(&slow, t), 201);
    assert_int_equal(upstream_key_requests(e->up, "h-1"), 1);
}

static void two_guarded_requests_wait_upstream_at_once_with_one_worker(void **state)
{
    env *e = *state;
    start_gateway(e);
    call a = {.e = e, .method = "POST", .target = "/hold", .key = "h-1"};
    call b = {.e = e, .method = "POST", .target = "/hold", .key = "h-2"};
    pthread_t ta, tb;
    start_call(&a, &ta);
    start_call(&b, &tb);
    assert_true(upstream_wait_held(e->up, 2));
    upstream_release(e->up);
    assert_int_equal(finish_call(&a, ta), 201);
    assert_int_equal(finish_call(&b, tb), 201);
}

#define PASSERS 32

static void pass_through_requests_are_served_while_guarded_ones_wait_upstream(void **state)
{
    env *e = *state;
    start_gateway(e);
    call slow = {.e = e, .method = "POST", .target = "/hold", .key = "h-1"};
    pthread_t t, pt[PASSERS];
    start_call(&slow, &t);
    assert_true(upstream_wait_held(e->up, 1));
    call pass[PASSERS];
    for (int i = 0; i < PASSERS; i++) {
        pass[i] = (call){.e = e, .method = "GET", .target = "/orders"};
        start_call(&pass[i], &pt[i]);
    }
    for (int i = 0; i < PASSERS; i++)
        assert_int_equal(finish_call(&pass[i], pt[i]), 200);
    assert_int_equal(upstream_requests(e->up), 1 + PASSERS);
    upstream_release(e->up);
    assert_int_equal(finish_call(&slow, t), 201);
}

/* The gateway's threads, from /proc; -1 when unknown. */
static int threads_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    int n = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    }
    fclose(f);
    return n;
}

#define HELD 32

static void many_calls_wait_upstream_at_once_on_a_fixed_set_of_threads(void **state)
{
    env *e = *state;
    start_gateway(e);
    /* main (signals, purges), the lease renewer, the loop, one worker (and
     * a sanitizer's own thread, when there is one) */
    int idle = threads_of(e->gw.pid);
    assert_true(idle >= 4);
    call held[HELD];
    pthread_t t[HELD];
    for (int i = 0; i < HELD; i++) {
        held[i] = (call){.e = e, .method = "GET", .target = "/hold"};
        start_call(&held[i], &t[i]);
    }
    assert_true(upstream_wait_held(e->up, HELD));
    assert_int_equal(threads_of(e->gw.pid), idle);
    upstream_release(e->up);
    for (int i = 0; i < HELD; i++)
        assert_int_equal(finish_call(&held[i], t[i]), 200);
}

static void sigterm_drains_the_requests_parked_on_the_loop(void **state)
{
    env *e = *state;
    start_gateway(e);
    call guarded = {.e = e, .method = "POST", .target = "/hold", .key = "h-1"};
    call plain = {.e = e, .method = "GET", .target = "/hold"};
    pthread_t tg, tp;
    start_call(&guarded, &tg);
    start_call(&plain, &tp);
    assert_true(upstream_wait_held(e->up, 2));
    kill(e->gw.pid, SIGTERM);
    assert_true(gateway_log_shows(&e->gw, "SIGTERM received"));
    upstream_release(e->up);
    assert_int_equal(finish_call(&guarded, tg), 201);
    assert_int_equal(finish_call(&plain, tp), 200);
    assert_int_equal(gateway_stop(&e->gw), 0);
    assert_true(gateway_log_contains(&e->gw, "2 requests in flight, 0 unfinished"));
    assert_true(gateway_log_contains(&e->gw, "resil gateway: stopped"));
}

/* Four loops, eight requests parked (a guarded and a plain one from each
 * of four connections, wherever the kernel put them): SIGTERM lets every
 * loop finish its own. */
static void sigterm_drains_the_requests_parked_on_every_loop(void **state)
{
    env *e = *state;
    start_gateway_loops(e, "4");
    static const char *const keys[] = {"d-1", "d-2", "d-3", "d-4"};
    call guarded[4], plain[4];
    pthread_t tg[4], tp[4];
    for (int i = 0; i < 4; i++) {
        guarded[i] = (call){.e = e, .method = "POST", .target = "/hold", .key = keys[i]};
        plain[i] = (call){.e = e, .method = "GET", .target = "/hold"};
        start_call(&guarded[i], &tg[i]);
        start_call(&plain[i], &tp[i]);
    }
    assert_true(upstream_wait_held(e->up, 8));
    kill(e->gw.pid, SIGTERM);
    assert_true(gateway_log_shows(&e->gw, "SIGTERM received"));
    upstream_release(e->up);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(finish_call(&guarded[i], tg[i]), 201);
        assert_int_equal(finish_call(&plain[i], tp[i]), 200);
    }
    assert_int_equal(gateway_stop(&e->gw), 0);
    assert_true(gateway_log_contains(&e->gw, "8 requests in flight, 0 unfinished"));
    assert_true(gateway_log_contains(&e->gw, "resil gateway: stopped"));
}

/* The gateway's store worker ("gw-store-worker"), from /proc: its state
 * letter ('S' while it sleeps), and in *wakes how many times it has gone
 * to sleep and been woken (a worker handed no job never wakes). 0 when
 * there is no such thread. */
static char worker_state(pid_t pid, long *wakes)
{
    char path[512], line[256];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    char state = 0;
    struct dirent *de;
    while (d != NULL && state == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char comm[32] = "";
        snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid, de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        bool worker = fgets(comm, sizeof comm, f) != NULL &&
                      strcmp(comm, "gw-store-worker\n") == 0;
        fclose(f);
        snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid, de->d_name);
        if (!worker || (f = fopen(path, "r")) == NULL)
            continue;
        while (fgets(line, sizeof line, f) != NULL) {
            if (strncmp(line, "State:", 6) == 0)
                state = line[6 + strspn(line + 6, " \t")];
            else if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
                *wakes = atol(line + 24);
        }
        fclose(f);
    }
    if (d != NULL)
        closedir(d);
    return state;
}

/* The worker's wakes once it sleeps waiting for its first job, or -1 when
 * it never does. A worker just started may not have reached that wait
 * when the gateway says it listens (its thread may not have run at all
 * yet, on a busy machine), and going to sleep there is a switch of its
 * own: counted before it, it would read as a wake. So would a sleep on
 * the way there (a lock another thread held at start-up), so the worker
 * must be seen asleep with the same count over several looks in a row.
 * Waited for as a condition, as gateway_log_shows() waits. */
#define ASLEEP_LOOKS 4

static long worker_asleep(pid_t pid)
{
    long last = -1;
    int same = 0;
    for (int i = 0; i < 2000; i++) {
        long wakes = 0;
        bool asleep = worker_state(pid, &wakes) == 'S' && wakes >= 1;
        same = asleep && wakes == last ? same + 1 : 0;
        last = asleep ? wakes : -1;
        if (same == ASLEEP_LOOKS - 1)
            return wakes;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static long worker_wakes(pid_t pid)
{
    long wakes = -1;
    return worker_state(pid, &wakes) != 0 ? wakes : -1;
}

/* With group commit on (the default), a keyed request's begin and complete
 * go from the loop to the store and back with no worker between: the one
 * worker sleeps through new keys, replays and a mismatch alike. */
static void keyed_requests_make_their_store_calls_without_a_worker(void **state)
{
    env *e = *state;
    start_gateway(e);
    long before = worker_asleep(e->gw.pid);
    assert_true(before >= 1);
    char key[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "w-%d", i);
        assert_int_equal(request(e, "POST", "/orders", key), 201);
        assert_int_equal(request(e, "POST", "/orders", key), 201);
    }
    assert_int_equal(request(e, "POST", "/other", "w-0"), 422);
    assert_int_equal(upstream_requests(e->up), 10);
    assert_int_equal(worker_wakes(e->gw.pid), before);
}

/* SIGTERM while a guarded request is upstream, and its answer then meets
 * a database another connection holds locked: the drain waits for the
 * store's asynchronous complete, which journals the answer, and the client
 * gets it; nothing is left in flight. */
static void sigterm_drains_a_request_whose_answer_waits_on_a_locked_store(void **state)
{
    env *e = *state;
    start_gateway(e);
    call guarded = {.e = e, .method = "POST", .target = "/hold", .key = "l-1"};
    pthread_t t;
    start_call(&guarded, &t);
    assert_true(upstream_wait_held(e->up, 1));
    char db_path[600];
    snprintf(db_path, sizeof db_path, "%s/gateway.db", e->dir);
    sqlite3 *lock;
    assert_int_equal(sqlite3_open(db_path, &lock), SQLITE_OK);
    sqlite3_busy_timeout(lock, 10000);
    assert_int_equal(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    kill(e->gw.pid, SIGTERM);
    assert_true(gateway_log_shows(&e->gw, "SIGTERM received"));
    upstream_release(e->up);
    assert_int_equal(finish_call(&guarded, t), 201);
    assert_int_equal(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(lock);
    assert_int_equal(gateway_stop(&e->gw), 0);
    assert_true(gateway_log_contains(&e->gw, "1 request in flight, 0 unfinished"));
    assert_true(gateway_log_contains(&e->gw, "resil gateway: stopped"));
    assert_int_equal(upstream_key_requests(e->up, "l-1"), 1);
}

#define LOOP_CASE(name) cmocka_unit_test_setup_teardown(name, env_setup, env_teardown)

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        LOOP_CASE(a_guarded_request_waiting_upstream_holds_no_store_worker),
        LOOP_CASE(two_guarded_requests_wait_upstream_at_once_with_one_worker),
        LOOP_CASE(pass_through_requests_are_served_while_guarded_ones_wait_upstream),
        LOOP_CASE(many_calls_wait_upstream_at_once_on_a_fixed_set_of_threads),
        LOOP_CASE(sigterm_drains_the_requests_parked_on_the_loop),
        LOOP_CASE(sigterm_drains_the_requests_parked_on_every_loop),
        LOOP_CASE(keyed_requests_make_their_store_calls_without_a_worker),
        LOOP_CASE(sigterm_drains_a_request_whose_answer_waits_on_a_locked_store),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
