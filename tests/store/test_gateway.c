/*
 * test_gateway.c — `resil gateway` end to end: the real binary between
 * libcurl clients and a counting upstream, with a SQLite store in a
 * temporary directory. What the tests count is what the upstream saw.
 *
 * The libcurl clients that meet a 409 retry after the Retry-After the
 * gateway sent, with the same key; one test runs `resil http
 * --idempotency-key` itself as those clients, so the pair is tested as a
 * user runs it.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gateway_env.h"
#include "test.h"
#include "upstream.h"

#include "resil/store.h"

typedef struct env {
    char *dir;
    char store[600];
    char log[600];
    upstream *up;
    gateway_proc gw;
    int restarts;
} env;

static const char *resil_binary(void) { return test_build_path("resil"); }

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dir = test_tmpdir();
    e->up = upstream_start();
    if (e->dir == NULL || e->up == NULL)
        return -1;
    snprintf(e->store, sizeof e->store, "sqlite:%s/gateway.db", e->dir);
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    upstream_release(e->up); /* a test that failed holding a call must not hold the stop */
    if (e->gw.pid > 0)
        gateway_stop(&e->gw);
    upstream_stop(e->up);
    test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

/* Start the gateway in front of the upstream with extra args (NULL-ended). */
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

static void url_of(const env *e, const char *target, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", e->gw.url, target);
}

/* POST with an Idempotency-Key (NULL: none). */
static void post(const env *e, const char *target, const char *key, const char *body,
                 http_reply *r)
{
    char url[256], header[512];
    url_of(e, target, url, sizeof url);
    snprintf(header, sizeof header, "Idempotency-Key: %s", key ? key : "");
    const char *headers[] = {"Content-Type: application/json", key ? header : NULL, NULL};
    if (http_request("POST", url, headers, body, r) != 0)
        fail_msg("POST %s failed: curl %d", url, r->curl_code);
}

static void header_is(const http_reply *r, const char *name, const char *expected)
{
    char v[256];
    http_reply_header(r, name, v, sizeof v);
    assert_string_equal(v, expected);
}

/* ---- the four outcomes through HTTP ------------------------------------------ */

static void first_post_is_forwarded_and_answered_by_the_upstream(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/orders", "k-1", "{\"qty\":1}", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"n\":1,\"method\":\"POST\",\"target\":\"/orders\","
                                "\"body\":\"{\"qty\":1}\"}");
    char v[64];
    assert_false(http_reply_header(&r, "Idempotent-Replayed", v, sizeof v));
    header_is(&r, "Location", "/orders/1");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
    upstream_last_header(e->up, "Idempotency-Key", v, sizeof v);
    assert_string_equal(v, "k-1");
    upstream_last_header(e->up, "X-Forwarded-For", v, sizeof v);
    assert_string_equal(v, "127.0.0.1");
}

static void repeated_post_is_replayed_without_reaching_the_upstream(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply first, again;
    post(e, "/orders", "k-1", "{\"qty\":1}", &first);
    post(e, "/orders", "k-1", "{\"qty\":1}", &again);
    assert_int_equal(again.status, 201);
    assert_int_equal(again.body_len, first.body_len);
    assert_memory_equal(again.body, first.body, first.body_len);
    header_is(&again, "Idempotent-Replayed", "true");
    header_is(&again, "Location", "/orders/1");
    header_is(&again, "Content-Type", "application/json");
    http_reply_free(&first);
    http_reply_free(&again);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void same_key_with_another_body_is_422(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/orders", "k-1", "{\"qty\":1}", &r);
    http_reply_free(&r);
    post(e, "/orders", "k-1", "{\"qty\":2}", &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"error\":\"idempotency_key_reused\""));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void same_key_on_another_query_is_422(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/orders?q=1", "k-1", "x", &r);
    assert_non_null(strstr(r.body, "\"target\":\"/orders?q=1\""));
    http_reply_free(&r);
    post(e, "/orders?q=2", "k-1", "x", &r);
    assert_int_equal(r.status, 422);
    http_reply_free(&r);
}

/* A POST the upstream holds (its /hold target) until upstream_release():
 * a call that runs for as long as the test needs, measured by no clock. */
typedef struct slow_post {
    const env *e;
    http_reply r;
} slow_post;

static void *post_in_thread(void *arg)
{
    slow_post *p = arg;
    post(p->e, "/hold", "k-1", "a", &p->r);
    return NULL;
}

static void post_while_the_first_runs_is_409_with_retry_after(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    slow_post first = {.e = e};
    pthread_t t;
    pthread_create(&t, NULL, post_in_thread, &first);
    assert_true(upstream_wait_held(e->up, 1));
    http_reply r;
    post(e, "/hold", "k-1", "a", &r);
    assert_int_equal(r.status, 409);
    header_is(&r, "Retry-After", "1");
    assert_non_null(strstr(r.body, "\"error\":\"request_in_progress\""));
    http_reply_free(&r);
    upstream_release(e->up);
    pthread_join(t, NULL);
    assert_int_equal(first.r.status, 201);
    http_reply_free(&first.r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- a client that goes away ------------------------------------------------ */

typedef struct retry {
    const env *e;
    http_reply r;
} retry;

/* Whether a retry of k-1's POST /hold got an answer other than 409
 * (test_wait_until): it is kept in the retry when so. */
static bool retry_answered(void *ud)
{
    retry *t = ud;
    post(t->e, "/hold", "k-1", "x", &t->r);
    if (t->r.status != 409)
        return true;
    http_reply_free(&t->r);
    return false;
}

/* The client hangs up while its request runs upstream: the upstream's
 * answer is still saved under the key, and the client's retry gets it. */
static void a_client_gone_while_its_request_runs_upstream_gets_the_answer_on_its_retry(
    void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    static const char request[] = "POST /hold HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k-1\r\n"
                                  "Content-Length: 1\r\n\r\nx";
    int fd = raw_connect(e->gw.port, NULL);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, request, sizeof request - 1, MSG_NOSIGNAL), sizeof request - 1);
    assert_true(upstream_wait_held(e->up, 1));
    close(fd);
    upstream_release(e->up);
    retry t = {.e = e};
    assert_true(test_wait_until(retry_answered, &t, 20));
    assert_int_equal(t.r.status, 201);
    header_is(&t.r, "Idempotent-Replayed", "true");
    assert_string_equal(t.r.body,
                        "{\"n\":1,\"method\":\"POST\",\"target\":\"/hold\",\"body\":\"x\"}");
    http_reply_free(&t.r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* The client hangs up halfway through its body: nothing was forwarded
 * and the key was never claimed, so its retry is a first request. */
static void a_client_gone_mid_body_leaves_the_key_unclaimed(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    static const char request[] = "POST /orders HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k-1\r\n"
                                  "Content-Length: 9\r\n\r\n{\"qty\"";
    int fd = raw_connect(e->gw.port, NULL);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, request, sizeof request - 1, MSG_NOSIGNAL), sizeof request - 1);
    close(fd); /* whenever the gateway sees it go, its request never claims the key */
    http_reply r;
    post(e, "/orders", "k-1", "{\"qty\":1}", &r);
    assert_int_equal(r.status, 201);
    char v[16];
    assert_false(http_reply_header(&r, "Idempotent-Replayed", v, sizeof v));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* ---- fifty clients, one key ------------------------------------------------- */

#define CLIENTS 50

typedef struct client {
    const env *e;
    pthread_barrier_t *go;
    long status;
    char *body;
    int conflicts;
} client;

/* What a retrying client with one idempotency key does: on 409, wait what
 * Retry-After says and send the same request again. */
static void *retrying_client(void *arg)
{
    client *c = arg;
    pthread_barrier_wait(c->go);
    for (int attempt = 0; attempt < 30; attempt++) {
        http_reply r;
        post(c->e, "/orders", "k-50", "{\"order\":\"same\"}", &r);
        if (r.status != 409) {
            c->status = r.status;
            c->body = r.body;
            return NULL;
        }
        c->conflicts++;
        char wait[16];
        http_reply_header(&r, "Retry-After", wait, sizeof wait);
        http_reply_free(&r);
        sleep((unsigned)atoi(wait));
    }
    return NULL;
}

static void fifty_concurrent_posts_with_one_key_reach_the_upstream_once(void **state)
{
    env *e = *state;
    upstream_set_delay_ms(e->up, 300);
    start_gateway(e, NULL);
    pthread_t t[CLIENTS];
    client c[CLIENTS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, CLIENTS);
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (client){.e = e, .go = &go};
        pthread_create(&t[i], NULL, retrying_client, &c[i]);
    }
    int conflicts = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        conflicts += c[i].conflicts;
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(upstream_requests(e->up), 1);
    for (int i = 0; i < CLIENTS; i++) {
        assert_int_equal(c[i].status, 201);
        assert_string_equal(c[i].body, c[0].body);
    }
    for (int i = 0; i < CLIENTS; i++)
        free(c[i].body);
    print_message("      %d conflicts (409) were retried by %d clients\n", conflicts, CLIENTS);
}

/* ---- fifty `resil http` processes, one key ---------------------------------- */

/* The same race with the real client a user runs: each process is
 * `resil http` with the one key, so the 409s are retried by its own
 * classification (409 + Retry-After + Idempotency-Key is transient) and
 * Retry-After handling, not by test code. Each writes its body to a file
 * and its attempt record (--log json) to another; -s would silence that
 * record, so it is left out. */

#define CLI_CLIENTS 50
#define CLI_KEY "k-resil-http-50"

typedef struct cli_client {
    pid_t pid;
    int status;
    char out[640];
    char log[640];
} cli_client;

static pid_t spawn_resil_http(const env *e, cli_client *c)
{
    char url[256];
    url_of(e, "/orders", url, sizeof url);
    const char *argv[] = {resil_binary(), "http", "-X", "POST", "-d", "{\"order\":\"same\"}",
                          "--idempotency-key", CLI_KEY, "--attempts", "10", "--delay", "50ms",
                          "--max-delay", "200ms", "--log", "json", "-o", c->out, url, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, c->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

/* Wait for every client, at most a minute in all; stragglers are killed and
 * reported with status -1. */
static void wait_for_clients(cli_client *c, int n)
{
    int left = n;
    for (int tick = 0; tick < 6000 && left > 0; tick++) {
        for (int i = 0; i < n; i++) {
            int st;
            if (c[i].pid <= 0 || waitpid(c[i].pid, &st, WNOHANG) != c[i].pid)
                continue;
            c[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            c[i].pid = 0;
            left--;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < n; i++) {
        if (c[i].pid <= 0)
            continue;
        kill(c[i].pid, SIGKILL);
        waitpid(c[i].pid, NULL, 0);
        c[i].status = -1;
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return strdup("");
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The attempts of a run, from its --log json stop line; 0 if absent. */
static int attempts_in(const char *log)
{
    const char *stop = strstr(log, "\"stop\":\"succeeded\",\"attempts\":");
    return stop ? atoi(stop + strlen("\"stop\":\"succeeded\",\"attempts\":")) : 0;
}

static void concurrent_resil_http_clients_with_one_key_reach_the_upstream_once(void **state)
{
    env *e = *state;
    /* Long enough that the later processes start while the first request is
     * held, even on a loaded machine under a sanitizer. */
    upstream_set_delay_ms(e->up, 2000);
    start_gateway(e, NULL);
    cli_client c[CLI_CLIENTS];
    for (int i = 0; i < CLI_CLIENTS; i++) {
        c[i] = (cli_client){.status = -1};
        snprintf(c[i].out, sizeof c[i].out, "%s/client-%d.out", e->dir, i);
        snprintf(c[i].log, sizeof c[i].log, "%s/client-%d.log", e->dir, i);
        c[i].pid = spawn_resil_http(e, &c[i]);
    }
    wait_for_clients(c, CLI_CLIENTS);
    assert_int_equal(upstream_requests(e->up), 1);
    char key[64];
    upstream_last_header(e->up, "Idempotency-Key", key, sizeof key);
    assert_string_equal(key, CLI_KEY);
    char *first = slurp(c[0].out);
    assert_non_null(strstr(first, "\"n\":1,\"method\":\"POST\""));
    int retried = 0;
    for (int i = 0; i < CLI_CLIENTS; i++) {
        char *body = slurp(c[i].out), *log = slurp(c[i].log);
        if (c[i].status != 0)
            fail_msg("client %d exited %d:\n%s", i, c[i].status, log);
        assert_string_equal(body, first);
        int attempts = attempts_in(log);
        assert_true(attempts >= 1);
        if (attempts > 1) {
            assert_non_null(strstr(log, "\"status\":409"));
            retried++;
        }
        free(body);
        free(log);
    }
    free(first);
    assert_true(retried >= 1);
    assert_true(gateway_log_contains(&e->gw, "idempotency=in-progress"));
    print_message("      %d of %d resil http clients retried a 409\n", retried, CLI_CLIENTS);
}

/* ---- failures release the key ---------------------------------------------- */

static void upstream_503_releases_the_key_so_the_retry_runs(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    upstream_fail_next(e->up, 1, 503);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 503);
    http_reply_free(&r);
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    char v[16];
    assert_false(http_reply_header(&r, "Idempotent-Replayed", v, sizeof v));
    assert_non_null(strstr(r.body, "\"n\":2"));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
    post(e, "/orders", "k-1", "a", &r);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

static void upstream_429_releases_the_key_too(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    upstream_fail_next(e->up, 1, 429);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 429);
    http_reply_free(&r);
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

static void client_error_from_the_upstream_is_saved_and_replayed(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/status/400", "k-1", "a", &r);
    assert_int_equal(r.status, 400);
    http_reply_free(&r);
    post(e, "/status/400", "k-1", "a", &r);
    assert_int_equal(r.status, 400);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void unreachable_upstream_is_502_and_releases_the_key(void **state)
{
    env *e = *state;
    start_gateway_to(e, "http://127.0.0.1:1", NULL);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
    http_reply_free(&r);
    assert_int_equal(gateway_stop(&e->gw), 0);
    /* The store agrees: the key is free again. */
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = e->store;
    resil_store *s;
    assert_int_equal(resil_store_new(&o, &s, NULL), 0);
    uint8_t h[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/orders", "a", 1, h);
    resil_store_key k = {.tenant = "", .operation = "http", .key = "k-1"};
    resil_store_result res;
    resil_store_result_init(&res);
    assert_int_equal(resil_store_begin(s, &k, h, &res, NULL), 0);
    assert_int_equal(res.verdict, RESIL_STORE_FIRST);
    resil_store_result_free(&res);
    resil_store_free(s);
    assert_true(gateway_log_contains(&e->gw, "idempotency=released"));
}

/* libcurl reads a timeout of 0 ms as "none": a timeout below a millisecond
 * must round up, not vanish. */
static void a_sub_millisecond_timeout_still_bounds_the_upstream(void **state)
{
    env *e = *state;
    const char *const extra[] = {"--timeout", "500us", NULL};
    start_gateway(e, extra);
    upstream_set_delay_ms(e->up, 400);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 504);
    http_reply_free(&r);
}

static int healthz_from(const env *e, const char *from);

/* Transfers cut one after another by a sub-millisecond timeout leave the
 * gateway serving: each a 504, then still answering, then a clean stop. */
static void calls_cut_one_after_another_by_a_sub_millisecond_timeout_leave_it_serving(
    void **state)
{
    env *e = *state;
    const char *const extra[] = {"--timeout", "500us", NULL};
    start_gateway(e, extra);
    upstream_set_delay_ms(e->up, 400);
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "cut-%d", i);
        http_reply r;
        post(e, "/orders", key, "a", &r);
        assert_int_equal(r.status, 504);
        http_reply_free(&r);
    }
    assert_int_equal(healthz_from(e, "127.0.0.2"), 200);
    assert_int_equal(gateway_stop(&e->gw), 0);
}

/* ---- persistence and shutdown ----------------------------------------------- */

static void replay_survives_a_gateway_restart(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    char *before = strdup(r.body);
    http_reply_free(&r);
    assert_int_equal(gateway_stop(&e->gw), 0);
    start_gateway(e, NULL);
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, before);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    free(before);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* The SIGTERM is handled while the call is held upstream; only then is the
 * call let go, so the drain has it in flight for certain. */
static void sigterm_lets_the_request_in_flight_finish(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    slow_post p = {.e = e};
    pthread_t t;
    pthread_create(&t, NULL, post_in_thread, &p);
    assert_true(upstream_wait_held(e->up, 1));
    kill(e->gw.pid, SIGTERM);
    assert_true(gateway_log_shows(&e->gw, "SIGTERM received"));
    upstream_release(e->up);
    pthread_join(t, NULL);
    assert_int_equal(p.r.status, 201);
    http_reply_free(&p.r);
    assert_int_equal(gateway_stop(&e->gw), 0);
    assert_true(gateway_log_contains(&e->gw, "1 request in flight, 0 unfinished"));
    assert_true(gateway_log_contains(&e->gw, "resil gateway: stopped"));
}

/* ---- what is not guarded ----------------------------------------------------- */

static void posts_without_a_key_pass_through(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/orders", NULL, "a", &r);
    http_reply_free(&r);
    post(e, "/orders", NULL, "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

/* A gateway started with http_proxy set reaches its upstream through that
 * proxy, as libcurl reads the variable: the request arrives at the proxy
 * (here the test's upstream) in absolute form, naming the upstream. The
 * variable is set only while the gateway starts, so that the test's own
 * requests go to the gateway directly. */
static void the_upstream_is_reached_through_the_proxy_the_environment_names(void **state)
{
    env *e = *state;
    setenv("http_proxy", upstream_url(e->up), 1);
    start_gateway_to(e, "http://upstream.invalid:8080", NULL);
    unsetenv("http_proxy");
    http_reply r;
    post(e, "/orders?x=1", NULL, "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    char seen[256];
    upstream_last_target(e->up, seen, sizeof seen);
    assert_string_equal(seen, "http://upstream.invalid:8080/orders?x=1");
    assert_int_equal(upstream_requests(e->up), 1);
}

static void unguarded_methods_pass_through_even_with_a_key(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char url[256];
    url_of(e, "/orders/1", url, sizeof url);
    const char *headers[] = {"Idempotency-Key: k-1", NULL};
    for (int i = 0; i < 2; i++) {
        http_reply r;
        assert_int_equal(http_request("PUT", url, headers, "a", &r), 0);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
        assert_int_equal(http_request("GET", url, headers, NULL, &r), 0);
        http_reply_free(&r);
    }
    assert_int_equal(upstream_requests(e->up), 4);
}

static void methods_option_chooses_what_is_guarded(void **state)
{
    env *e = *state;
    const char *extra[] = {"--methods", "put", NULL};
    start_gateway(e, extra);
    char url[256];
    url_of(e, "/orders/1", url, sizeof url);
    const char *headers[] = {"Idempotency-Key: k-1", NULL};
    http_reply r;
    assert_int_equal(http_request("PUT", url, headers, "a", &r), 0);
    http_reply_free(&r);
    assert_int_equal(http_request("PUT", url, headers, "a", &r), 0);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    post(e, "/orders", "k-2", "a", &r);
    http_reply_free(&r);
    post(e, "/orders", "k-2", "a", &r);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 3);
}

static void require_key_refuses_a_guarded_request_without_one(void **state)
{
    env *e = *state;
    const char *extra[] = {"--require-key", NULL};
    start_gateway(e, extra);
    http_reply r;
    post(e, "/orders", NULL, "a", &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "\"error\":\"idempotency_key_required\""));
    http_reply_free(&r);
    char url[256];
    url_of(e, "/orders", url, sizeof url);
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 1);
}

static void a_long_request_header_reaches_the_upstream_whole(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    enum { VALUE_LEN = 12000 };
    char *header = malloc(VALUE_LEN + 32);
    assert_non_null(header);
    int n = snprintf(header, 32, "X-Token: ");
    memset(header + n, 't', VALUE_LEN);
    header[n + VALUE_LEN] = '\0';
    char url[256];
    url_of(e, "/orders", url, sizeof url);
    const char *headers[] = {header, NULL};
    http_reply r;
    assert_int_equal(http_request("GET", url, headers, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char seen[VALUE_LEN + 16];
    upstream_last_header(e->up, "X-Token", seen, sizeof seen);
    assert_int_equal(strlen(seen), VALUE_LEN);
    assert_string_equal(seen, header + n);
    free(header);
}

static void a_long_response_header_reaches_the_client_whole_and_on_replay(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    enum { VALUE_LEN = 12000 };
    static char seen[VALUE_LEN + 16];
    for (int i = 0; i < 2; i++) { /* the first answer, then its replay */
        http_reply r;
        post(e, "/long-header/12000", "k-1", "a", &r);
        assert_int_equal(r.status, 201);
        assert_true(http_reply_header(&r, "X-Long", seen, sizeof seen));
        assert_int_equal(strlen(seen), VALUE_LEN);
        assert_int_equal(strspn(seen, "h"), VALUE_LEN);
        http_reply_free(&r);
    }
    assert_int_equal(upstream_requests(e->up), 1);
}

static void upstream_status_and_body_pass_through(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char url[256];
    url_of(e, "/status/404", url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "{\"n\":1,\"method\":\"GET\",\"target\":\"/status/404\",\"body\":\"\"}");
    header_is(&r, "Content-Type", "application/json");
    http_reply_free(&r);
}

static void healthz_answers_without_the_upstream(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char url[256];
    url_of(e, "/healthz", url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

static void bad_keys_are_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char key[300];
    memset(key, 'k', 256);
    key[256] = '\0';
    http_reply r;
    post(e, "/orders", key, "a", &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "\"error\":\"invalid_idempotency_key\""));
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

static void body_over_the_limit_is_413(void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-body", "1KB", NULL};
    start_gateway(e, extra);
    char body[2048];
    memset(body, 'x', sizeof body - 1);
    body[sizeof body - 1] = '\0';
    http_reply r;
    post(e, "/orders", "k-1", body, &r);
    assert_int_equal(r.status, 413);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 0);
}

static void tenant_header_scopes_the_keys(void **state)
{
    env *e = *state;
    const char *extra[] = {"--tenant-header", "X-Tenant", NULL};
    start_gateway(e, extra);
    char url[256];
    url_of(e, "/orders", url, sizeof url);
    const char *acme[] = {"Idempotency-Key: k-1", "X-Tenant: acme", NULL};
    const char *globex[] = {"Idempotency-Key: k-1", "X-Tenant: globex", NULL};
    const char *nobody[] = {"Idempotency-Key: k-1", NULL};
    http_reply r;
    assert_int_equal(http_request("POST", url, acme, "a", &r), 0);
    http_reply_free(&r);
    assert_int_equal(http_request("POST", url, globex, "a", &r), 0);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(http_request("POST", url, acme, "a", &r), 0);
    header_is(&r, "Idempotent-Replayed", "true");
    http_reply_free(&r);
    assert_int_equal(http_request("POST", url, nobody, "a", &r), 0);
    assert_int_equal(r.status, 400);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(e->up), 2);
}

static void access_log_has_a_line_per_request(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    http_reply_free(&r);
    post(e, "/orders", "k-1", "a", &r);
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, " 127.0.0.1 \"POST /orders\" 201 "));
    assert_true(gateway_log_contains(&e->gw, "idempotency=first"));
    assert_true(gateway_log_contains(&e->gw, "idempotency=replay"));
}

static void with_quiet_there_is_no_access_log_line(void **state)
{
    env *e = *state;
    const char *extra[] = {"--quiet", NULL};
    start_gateway(e, extra);
    http_reply r;
    post(e, "/orders", "k-1", "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    assert_int_equal(gateway_stop(&e->gw), 0);
    assert_false(gateway_log_contains(&e->gw, "\"POST /orders\""));
    assert_false(gateway_log_contains(&e->gw, "idempotency="));
}

/* ---- the replay cache --------------------------------------------------------- */

/* First, replay, mismatch of one key; then the gateway's stop line. */
static void first_replay_mismatch(env *e)
{
    const char *bodies[] = {"a", "a", "b"};
    const int statuses[] = {201, 201, 422};
    for (size_t i = 0; i < 3; i++) {
        http_reply r;
        post(e, "/orders", "k-1", bodies[i], &r);
        assert_int_equal(r.status, statuses[i]);
        http_reply_free(&r);
    }
    assert_int_equal(gateway_stop(&e->gw), 0);
    assert_int_equal(upstream_requests(e->up), 1);
}

/* Only the first begin reads (and finds nothing); the replay and the
 * mismatch are answered from the cache, on the loop. */
static void a_replay_and_a_mismatch_of_a_completed_key_are_answered_from_the_cache(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    first_replay_mismatch(e);
    assert_true(gateway_log_contains(&e->gw, "resil gateway: the store read 1 begins (0 "
                                             "answered by the read alone); the replay cache "
                                             "answered 2\n"));
}

static void with_the_replay_cache_off_every_begin_is_read(void **state)
{
    env *e = *state;
    start_gateway(e, (const char *const[]){"--replay-cache", "off", NULL});
    first_replay_mismatch(e);
    assert_true(gateway_log_contains(&e->gw, "resil gateway: the store read 3 begins (2 "
                                             "answered by the read alone); the replay cache "
                                             "answered 0\n"));
}

/* ---- the request target: only a path reaches the upstream -------------------- */
/*
 * A request-target that is not origin-form names a host (absolute-form,
 * authority-form, "@host:port/...", which the old URL pasting turned into
 * userinfo), or nothing (asterisk-form). Each is answered 400 before any
 * upstream work; a second "attacker" server counts what reached it.
 */

/* Send `target` (its %d, if any, becomes the attacker's port) with an
 * Authorization header: 400, and neither the attacker nor the upstream saw
 * anything. */
static void refused_target(env *e, const char *method, const char *target)
{
    upstream *attacker = upstream_start();
    assert_non_null(attacker);
    char request[1024], expanded[256], reply[4096];
    const char *port_at = strstr(target, "%d");
    if (port_at != NULL)
        snprintf(expanded, sizeof expanded, "%.*s%d%s", (int)(port_at - target), target,
                 upstream_port(attacker), port_at + 2);
    else
        snprintf(expanded, sizeof expanded, "%s", target);
    int n = snprintf(request, sizeof request,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                     "Idempotency-Key: k-1\r\nContent-Length: 1\r\n\r\nx",
                     method, expanded);
    int status = raw_exchange(e->gw.port, request, (size_t)n, reply, sizeof reply, 5000, NULL);
    if (status != 400)
        fail_msg("%s %s: expected 400, got:\n%s", method, expanded, reply);
    assert_non_null(strstr(reply, "\"error\":\"invalid_target\""));
    assert_int_equal(upstream_requests(attacker), 0);
    assert_int_equal(upstream_requests(e->up), 0);
    upstream_stop(attacker);
}

/* GET `target` over a raw socket (libcurl would resolve dot segments) and
 * return the status. */
static int raw_get(const env *e, const char *target)
{
    char request[1024], reply[4096];
    int n = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", target);
    return raw_exchange(e->gw.port, request, (size_t)n, reply, sizeof reply, 10000, NULL);
}

static void a_userinfo_like_target_never_reaches_the_host_it_names(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    refused_target(e, "GET", "@127.0.0.1:%d/x");
    refused_target(e, "POST", "@127.0.0.1:%d/x");
}

static void an_absolute_form_target_is_refused_before_any_upstream_work(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    refused_target(e, "GET", "http://127.0.0.1:%d/x");
    refused_target(e, "POST", "http://127.0.0.1:%d/x");
}

static void an_authority_form_target_is_refused_before_any_upstream_work(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    refused_target(e, "CONNECT", "127.0.0.1:%d");
    refused_target(e, "GET", "127.0.0.1:%d");
}

static void an_asterisk_form_target_is_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    refused_target(e, "OPTIONS", "*");
}

static void a_target_with_a_fragment_or_a_bad_escape_is_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    refused_target(e, "GET", "/x#frag");
    refused_target(e, "GET", "/x#@127.0.0.1:%d/y");
    refused_target(e, "GET", "/x%zz");
    refused_target(e, "GET", "/x%4");
    refused_target(e, "GET", "/x\x7f");
    refused_target(e, "GET", "/caf\xc3\xa9");
    refused_target(e, "GET", "x/y");
}

/* The log shows the refused target with its control bytes escaped: a
 * client cannot write lines or terminal escapes into it. */
static void a_refused_target_is_logged_with_its_control_bytes_escaped(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    refused_target(e, "GET", "/x\x1b[2J\x7f\\");
    assert_true(gateway_log_contains(&e->gw, "\"GET /x\\x1b[2J\\x7f\\x5c\" 400 "));
}

/* "//host:port/x" is origin-form (an empty first segment): a path on the
 * upstream, never a host. */
static void a_target_starting_with_two_slashes_stays_a_path_on_the_upstream(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    upstream *attacker = upstream_start();
    char target[64], url[256], seen[256];
    snprintf(target, sizeof target, "//127.0.0.1:%d/x", upstream_port(attacker));
    url_of(e, target, url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_int_equal(upstream_requests(attacker), 0);
    assert_int_equal(upstream_requests(e->up), 1);
    upstream_last_target(e->up, seen, sizeof seen);
    assert_string_equal(seen, target);
    upstream_stop(attacker);
}

static void an_origin_form_target_arrives_byte_for_byte(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    static const char *const targets[] = {"/a/b?c=d", "/a/../b/./c?x=1&y=/?z",
                                          "/@x:1/;p=2?q=a@b", "/~user/!$&'()*+,=?k", "/",
                                          "/a%20b"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char seen[256];
        assert_int_equal(raw_get(e, targets[i]), 200);
        upstream_last_target(e->up, seen, sizeof seen);
        assert_string_equal(seen, targets[i]);
    }
}

/* Escapes keep their spelling: upper-case hex arrives upper-case, as an
 * upstream that compares targets (a signature over the URL) needs. */
static void a_percent_escape_arrives_as_spelled(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    static const char *const targets[] = {"/A%2Fb%C3%A9?q=%4A%7e", "/%7E?%2F"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char seen[256];
        assert_int_equal(raw_get(e, targets[i]), 200);
        upstream_last_target(e->up, seen, sizeof seen);
        assert_string_equal(seen, targets[i]);
    }
}

static void the_upstream_path_prefix_is_kept(void **state)
{
    env *e = *state;
    char base[128], seen[256], url[256];
    snprintf(base, sizeof base, "%s/prefix/v1/", upstream_url(e->up));
    start_gateway_to(e, base, NULL);
    url_of(e, "/a/b?c=d", url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    upstream_last_target(e->up, seen, sizeof seen);
    assert_string_equal(seen, "/prefix/v1/a/b?c=d");
}

/* No Content-Length to refuse it by: a chunked body is read, and refused
 * once it has gone past --max-body. */
static void a_chunked_body_over_max_body_is_413_once_read(void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-body", "1KB", NULL};
    start_gateway(e, extra);
    static const char head[] = "POST /orders HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k-1\r\n"
                               "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                               "800\r\n";
    char request[sizeof head + 2048 + 16];
    size_t len = sizeof head - 1;
    memcpy(request, head, len);
    memset(request + len, 'x', 2048); /* 0x800 bytes: twice the limit */
    len += 2048;
    memcpy(request + len, "\r\n0\r\n\r\n", 7);
    len += 7;
    char reply[4096];
    bool closed = false;
    assert_int_equal(raw_exchange(e->gw.port, request, len, reply, sizeof reply, 10000, &closed),
                     413);
    assert_non_null(strstr(reply, "{\"error\":\"body_too_large\",\"message\":\"the request body "
                                  "is larger than the gateway accepts\"}"));
    assert_true(closed);
    assert_int_equal(upstream_requests(e->up), 0);
    assert_true(gateway_log_contains(&e->gw, "\"POST /orders\" 413 "));
    assert_true(gateway_log_contains(&e->gw, "idempotency=too-large"));
}

/* A chunked body that does not end: it is refused as soon as it passes
 * --max-body, on a connection then closed, not read on until the body
 * timeout (an hour here) cuts it with a 408. */
static void a_chunked_body_that_goes_on_is_413_as_soon_as_it_passes_max_body(void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-body", "1KB", "--body-timeout", "1h", NULL};
    start_gateway(e, extra);
    static const char head[] = "POST /orders HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k-1\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n800\r\n";
    char request[sizeof head + 2048];
    memcpy(request, head, sizeof head - 1);
    memset(request + sizeof head - 1, 'x', 2048); /* twice the limit, and no last chunk */
    int fd = raw_connect(e->gw.port, NULL);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, request, sizeof request - 1, MSG_NOSIGNAL), sizeof request - 1);
    char reply[4096];
    assert_true(raw_read_until_closed(fd, reply, sizeof reply, 10000));
    close(fd);
    assert_int_equal(raw_status(reply), 413);
    assert_non_null(strstr(reply, "\r\n\r\n{\"error\":\"body_too_large\",\"message\":\"the "
                                  "request body is larger than the gateway accepts\"}\n"));
    assert_int_equal(upstream_requests(e->up), 0);
    assert_true(gateway_log_contains(&e->gw, "\"POST /orders\" 413 91 "));
    assert_true(gateway_log_contains(&e->gw, "idempotency=too-large"));
}

/* A method OpenTelemetry does not name is passed through, and counted
 * under _OTHER, so that a client cannot make a metric label per method. */
static void an_unknown_method_is_counted_as_other_in_the_metrics(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    static const char request[] = "BREW /pot HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char reply[4096];
    assert_int_equal(raw_exchange(e->gw.port, request, sizeof request - 1, reply, sizeof reply,
                                  10000, NULL), 200);
    assert_non_null(strstr(reply, "\"method\":\"BREW\""));
    char url[256];
    url_of(e, "/metrics", url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "resilience_idempotency_requests_total{"
                                   "http_request_method=\"_OTHER\",idempotency_outcome=\"none\","
                                   "http_response_status_code=\"200\"} 1\n"));
    assert_null(strstr(r.body, "BREW"));
    http_reply_free(&r);
}

/* Whether this machine has an IPv6 loopback to listen on. */
static bool ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Listening on [::1]: served, and the client's IPv6 address is the one
 * forwarded and logged. */
static void a_gateway_on_ipv6_forwards_and_logs_the_client_ipv6_address(void **state)
{
    env *e = *state;
    if (!ipv6_loopback())
        skip();
    const char *args[] = {"--upstream", upstream_url(e->up), "--store", e->store, NULL};
    snprintf(e->log, sizeof e->log, "%s/gateway-v6.log", e->dir);
    if (gateway_start_on(&e->gw, resil_binary(), e->log, "[::1]", args) != 0)
        fail_msg("the gateway did not start on [::1]");
    http_reply r;
    post(e, "/orders", "k-v6", "a", &r);
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    char v[64];
    upstream_last_header(e->up, "X-Forwarded-For", v, sizeof v);
    assert_string_equal(v, "::1");
    assert_true(gateway_log_contains(&e->gw, "listening on http://[::1]:"));
    assert_true(gateway_log_contains(&e->gw, "Z ::1 \"POST /orders\" 201 "));
}

/* ---- framing: refused at once, before any body is read ------------------------- */

/* Send raw bytes; expect `status` and the connection closed, the upstream
 * untouched. */
static void refused_raw(env *e, const char *request, size_t len, int status)
{
    char reply[4096];
    bool closed = false;
    int got = raw_exchange(e->gw.port, request, len, reply, sizeof reply, 10000, &closed);
    if (got != status)
        fail_msg("expected %d, got:\n%s", status, reply);
    assert_true(closed);
    assert_int_equal(upstream_requests(e->up), 0);
}

#define REFUSED(e, literal, status) refused_raw(e, literal, sizeof literal - 1, status)

static void conflicting_content_lengths_are_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    REFUSED(e, "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n"
               "\r\nabcd", 400);
    REFUSED(e, "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
               "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
}

/* The gateway's own refusal, not libmicrohttpd's (whose page for a
 * missing Host came with its status line and headers written twice): one
 * answer, the JSON error, and its access-log line. */
static void expect_invalid_host(env *e, const char *request)
{
    char reply[4096];
    bool closed = false;
    assert_int_equal(raw_exchange(e->gw.port, request, strlen(request), reply, sizeof reply,
                                  10000, &closed),
                     400);
    assert_true(closed);
    assert_null(strstr(reply + 1, "HTTP/1.1 400")); /* one status line */
    assert_non_null(strstr(reply, "\r\n\r\n{\"error\":\"invalid_host\",\"message\":\"an HTTP/1.1 "
                                  "request needs exactly one Host\"}\n"));
    assert_int_equal(upstream_requests(e->up), 0);
}

static void an_http11_request_without_host_is_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    expect_invalid_host(e, "GET /orders HTTP/1.1\r\n\r\n");
    assert_true(gateway_log_shows(&e->gw, " 127.0.0.1 \"GET /orders\" 400 80 "));
    expect_invalid_host(e, "GET /orders HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
}

static void a_nul_byte_in_a_header_or_the_target_is_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    REFUSED(e, "GET /orders HTTP/1.1\r\nHost: a\r\nX-A: b\0c\r\n\r\n", 400);
    REFUSED(e, "GET /orders HTTP/1.1\r\nHost: a\r\nX\0A: b\r\n\r\n", 400);
    REFUSED(e, "GET /orders\0/x HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    REFUSED(e, "POST /orders HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k\0-1\r\n"
               "Content-Length: 1\r\n\r\nx", 400);
}

/* A request of `fields` X-N headers, the last one's value "v<tail>"
 * (tail may hold a NUL): its length. */
static size_t many_fields(char *buf, size_t cap, int fields, const char *tail, size_t tail_len)
{
    size_t n = (size_t)snprintf(buf, cap, "GET /orders HTTP/1.1\r\nHost: a\r\nConnection: close\r\n");
    for (int i = 1; i < fields; i++)
        n += (size_t)snprintf(buf + n, cap - n, "X-%d: v\r\n", i);
    n += (size_t)snprintf(buf + n, cap - n, "X-%d: v", fields);
    memcpy(buf + n, tail, tail_len);
    n += tail_len;
    memcpy(buf + n, "\r\n\r\n", 4);
    return n + 4;
}

/* More fields than the check keeps on its stack (30): the block is still
 * checked whole, so a NUL in the last one is found, and a clean one of as
 * many fields passes. */
static void a_nul_byte_in_the_fortieth_header_is_400_and_forty_clean_ones_pass(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char request[2048], reply[4096];
    size_t len = many_fields(request, sizeof request, 40, "\0x", 2);
    refused_raw(e, request, len, 400);
    len = many_fields(request, sizeof request, 40, "x", 1);
    assert_int_equal(raw_exchange(e->gw.port, request, len, reply, sizeof reply, 10000, NULL),
                     200);
    char v[16];
    upstream_last_header(e->up, "X-40", v, sizeof v);
    assert_string_equal(v, "vx");
}

static void a_folded_header_line_is_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    REFUSED(e, "GET /orders HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400);
}

/* The 413 comes instead of 100 Continue, and without the body being sent. */
static void expect_100_continue_over_max_body_is_413_without_a_100_continue(void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-body", "1KB", NULL};
    start_gateway(e, extra);
    static const char request[] = "POST /orders HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k-1\r\n"
                                  "Expect: 100-continue\r\nContent-Length: 5000\r\n\r\n";
    char reply[4096];
    bool closed = false;
    assert_int_equal(raw_exchange(e->gw.port, request, sizeof request - 1, reply, sizeof reply,
                                  10000, &closed), 413);
    assert_null(strstr(reply, "100 Continue"));
    assert_non_null(strstr(reply, "\"error\":\"body_too_large\""));
    assert_true(closed);
    assert_int_equal(upstream_requests(e->up), 0);
}

/* No Expect: still refused on the Content-Length, before the body arrives. */
static void a_content_length_over_max_body_is_413_before_the_body_is_read(void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-body", "1KB", NULL};
    start_gateway(e, extra);
    REFUSED(e, "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n", 413);
}

static void an_expectation_other_than_100_continue_is_417(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    REFUSED(e, "POST /orders HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx",
            417);
}

/* Refused by what it is, not by a timeout: the header timeout here is a
 * minute, the bound ten seconds. */
static void a_garbage_request_line_is_refused_at_once(void **state)
{
    env *e = *state;
    const char *extra[] = {"--header-timeout", "60s", NULL};
    start_gateway(e, extra);
    REFUSED(e, "HELLO WORLD FOO\r\n\r\n", 400);
    char reply[512];
    bool closed = false;
    raw_exchange(e->gw.port, "GARBAGE\r\n\r\n", 11, reply, sizeof reply, 10000, &closed);
    assert_true(closed);
}

/* A TLS ClientHello and such never make a line: cut at the header timeout
 * (1 s here, bound 15 s), no longer held for libmicrohttpd's idle timeout. */
static void bytes_that_never_make_a_request_line_are_cut_at_the_header_timeout(void **state)
{
    env *e = *state;
    const char *extra[] = {"--header-timeout", "1s", NULL};
    start_gateway(e, extra);
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    char reply[512];
    bool closed = false;
    raw_exchange(e->gw.port, hello, sizeof hello - 1, reply, sizeof reply, 15000, &closed);
    assert_true(closed);
    assert_int_equal(raw_status(reply), 408);
}

/* ---- Idempotency-Key syntax -------------------------------------------------- */

/* POST /orders with these exact header bytes; the raw reply. */
static int raw_post_with(const env *e, const char *headers, char *reply, size_t cap)
{
    char request[2048];
    int n = snprintf(request, sizeof request,
                     "POST /orders HTTP/1.1\r\nHost: a\r\nConnection: close\r\n%s"
                     "Content-Length: 1\r\n\r\nx",
                     headers);
    return raw_exchange(e->gw.port, request, (size_t)n, reply, cap, 10000, NULL);
}

static void a_quoted_key_is_the_same_key_as_its_bare_value(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char reply[4096], seen[64];
    assert_int_equal(raw_post_with(e, "Idempotency-Key: \"k-1\"\r\n", reply, sizeof reply), 201);
    upstream_last_header(e->up, "Idempotency-Key", seen, sizeof seen);
    assert_string_equal(seen, "\"k-1\""); /* passed on as sent */
    assert_int_equal(raw_post_with(e, "Idempotency-Key: k-1\r\n", reply, sizeof reply), 201);
    assert_non_null(strstr(reply, "Idempotent-Replayed: true"));
    assert_int_equal(upstream_requests(e->up), 1);
}

static void a_quoted_key_is_unescaped(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    char reply[4096];
    assert_int_equal(raw_post_with(e, "Idempotency-Key: \"a\\\"b\\\\c d\"\r\n", reply,
                                   sizeof reply), 201);
    assert_int_equal(raw_post_with(e, "Idempotency-Key: a\"b\\c d\r\n", reply, sizeof reply),
                     201);
    assert_non_null(strstr(reply, "Idempotent-Replayed: true"));
    assert_int_equal(upstream_requests(e->up), 1);
}

/* Each bad key: 400 invalid_idempotency_key, a message naming the rule,
 * nothing upstream. */
static void bad_key(const env *e, const char *header, const char *rule)
{
    char reply[4096];
    int status = raw_post_with(e, header, reply, sizeof reply);
    if (status != 400 || strstr(reply, rule) == NULL)
        fail_msg("%s: expected 400 naming '%s', got:\n%s", header, rule, reply);
    assert_non_null(strstr(reply, "\"error\":\"invalid_idempotency_key\""));
    assert_int_equal(upstream_requests(e->up), 0);
}

static void keys_with_control_bytes_tabs_del_or_non_ascii_are_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    static const char printable[] = "must be printable ASCII";
    bad_key(e, "Idempotency-Key: a\x01" "b\r\n", printable);
    bad_key(e, "Idempotency-Key: a\tb\r\n", printable);
    bad_key(e, "Idempotency-Key: a\x7f" "b\r\n", printable);
    bad_key(e, "Idempotency-Key: caf\xc3\xa9\r\n", printable);
    bad_key(e, "Idempotency-Key: \"a\tb\"\r\n", "quoted string");
}

static void quoted_keys_must_be_well_formed(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    bad_key(e, "Idempotency-Key: \"\"\r\n", "1 to 255 bytes");
    bad_key(e, "Idempotency-Key: \"abc\r\n", "quoted string");
    bad_key(e, "Idempotency-Key: \"a\\x\"\r\n", "quoted string");
    bad_key(e, "Idempotency-Key: \"a\"b\r\n", "quoted string");
}

static void an_empty_key_is_400(void **state)
{
    env *e = *state;
    start_gateway(e, NULL);
    bad_key(e, "Idempotency-Key:\r\n", "1 to 255 bytes");
}

static void a_tenant_with_a_control_byte_or_non_ascii_is_400(void **state)
{
    env *e = *state;
    const char *extra[] = {"--tenant-header", "X-Tenant", NULL};
    start_gateway(e, extra);
    char reply[4096];
    const char *bad[] = {"Idempotency-Key: k-1\r\nX-Tenant: a\x01" "b\r\n",
                         "Idempotency-Key: k-1\r\nX-Tenant: \xff\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(raw_post_with(e, bad[i], reply, sizeof reply), 400);
        assert_non_null(strstr(reply, "\"error\":\"invalid_tenant\""));
        assert_non_null(strstr(reply, "X-Tenant must be printable ASCII"));
    }
    assert_int_equal(upstream_requests(e->up), 0);
}

/* ---- connections: limits and deadlines ---------------------------------------- */

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* GET /healthz from the loopback address `from`: the status, 0 if none. */
static int healthz_from(const env *e, const char *from)
{
    int fd = raw_connect(e->gw.port, from);
    if (fd < 0)
        return -1;
    static const char request[] = "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char reply[1024];
    send(fd, request, sizeof request - 1, MSG_NOSIGNAL);
    raw_read_until_closed(fd, reply, sizeof reply, 10000);
    close(fd);
    return raw_status(reply);
}

/* A kept-alive connection from `from` that the gateway has taken in: it
 * answered a request on it (so it is counted, whichever loop has it). */
static int held_connection(const env *e, const char *from)
{
    static const char request[] = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
    int fd = raw_connect(e->gw.port, from);
    if (fd < 0)
        return -1;
    send(fd, request, sizeof request - 1, MSG_NOSIGNAL);
    char reply[1024];
    size_t len = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (len < sizeof reply - 1 && poll(&p, 1, 10000) == 1) {
        ssize_t n = recv(fd, reply + len, sizeof reply - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        reply[len] = '\0';
        if (strstr(reply, "\r\n\r\nok\n") != NULL)
            return fd;
    }
    close(fd);
    return -1;
}

/* Connected, then closed by the gateway without a byte: refused. */
static bool refused_from(const env *e, const char *from)
{
    int fd = raw_connect(e->gw.port, from);
    if (fd < 0)
        return false;
    char reply[256];
    bool closed = raw_read_until_closed(fd, reply, sizeof reply, 10000);
    close(fd);
    return closed && reply[0] == '\0';
}

static void the_connection_past_the_per_client_limit_is_refused_and_others_are_served(
    void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-connections-per-client", "3", NULL};
    start_gateway(e, extra);
    int held[3];
    for (int i = 0; i < 3; i++) {
        held[i] = held_connection(e, "127.0.0.1");
        assert_true(held[i] >= 0);
    }
    assert_int_equal(healthz_from(e, "127.0.0.2"), 200); /* the three are in */
    int fourth = raw_connect(e->gw.port, "127.0.0.1");
    assert_true(fourth >= 0);
    char reply[256];
    assert_true(raw_read_until_closed(fourth, reply, sizeof reply, 10000));
    assert_string_equal(reply, "");
    close(fourth);
    assert_int_equal(healthz_from(e, "127.0.0.2"), 200);
    for (int i = 0; i < 3; i++)
        close(held[i]);
}

/* With several loops, each with its own listening socket, a client's
 * connections land on different loops: the limit holds over all of them. */
static void the_per_client_limit_counts_the_connections_of_every_loop(void **state)
{
    env *e = *state;
    const char *extra[] = {"--loops", "4", "--max-connections-per-client", "3", NULL};
    start_gateway(e, extra);
    int held[3];
    for (int i = 0; i < 3; i++)
        assert_true((held[i] = held_connection(e, "127.0.0.1")) >= 0);
    for (int i = 0; i < 8; i++) /* wherever the kernel puts them */
        assert_true(refused_from(e, "127.0.0.1"));
    assert_int_equal(healthz_from(e, "127.0.0.2"), 200);
    for (int i = 0; i < 3; i++)
        close(held[i]);
}

typedef struct reconnect {
    env *e;
    int fd;
} reconnect;

static bool reconnected(void *ud)
{
    reconnect *r = ud;
    r->fd = held_connection(r->e, "127.0.0.1");
    return r->fd >= 0;
}

/* A closed connection is counted out: its client may open another (the
 * gateway sees the close a moment later, so the new one is tried, 5 ms
 * apart, until it is served, for up to 10 s). */
static void a_closed_connection_leaves_room_for_its_client(void **state)
{
    env *e = *state;
    const char *extra[] = {"--loops", "4", "--max-connections-per-client", "1", NULL};
    start_gateway(e, extra);
    int first = held_connection(e, "127.0.0.1");
    assert_true(first >= 0);
    assert_true(refused_from(e, "127.0.0.1"));
    close(first);
    reconnect again = {e, -1};
    assert_true(test_wait_until(reconnected, &again, 5));
    close(again.fd);
}

/* A request that comes with the connection (sent before the gateway has
 * taken it in) past the limit is not served either: the connection closes
 * unanswered, and the upstream never hears of it. On every loop, since
 * the kernel spreads the connections over them. */
static void a_request_sent_on_a_connection_past_the_limit_is_closed_unanswered(void **state)
{
    env *e = *state;
    const char *extra[] = {"--loops", "4", "--max-connections-per-client", "1", NULL};
    start_gateway(e, extra);
    int held = held_connection(e, "127.0.0.1");
    assert_true(held >= 0);
    static const char request[] = "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\na";
    for (int i = 0; i < 8; i++) {
        int fd = raw_connect(e->gw.port, "127.0.0.1");
        assert_true(fd >= 0);
        assert_int_equal(send(fd, request, sizeof request - 1, MSG_NOSIGNAL),
                         (ssize_t)(sizeof request - 1));
        char reply[256];
        assert_true(raw_read_until_closed(fd, reply, sizeof reply, 10000));
        close(fd);
        assert_string_equal(reply, "");
    }
    assert_int_equal(upstream_requests(e->up), 0);
    close(held);
}

/* Clients are counted in a hash table: two addresses that land in one
 * bucket (127.0.0.2 and 127.0.5.33 do, under its FNV-1a of the address
 * bytes, mod 1024) are still two clients, each with its own count. */
static void two_clients_whose_addresses_share_a_bucket_are_counted_apart(void **state)
{
    env *e = *state;
    const char *extra[] = {"--max-connections-per-client", "1", NULL};
    start_gateway(e, extra);
    int first = held_connection(e, "127.0.0.2");
    assert_true(first >= 0);
    int second = held_connection(e, "127.0.5.33"); /* served: not counted as the first's */
    assert_true(second >= 0);
    assert_true(refused_from(e, "127.0.0.2"));
    assert_true(refused_from(e, "127.0.5.33"));
    close(first);
    close(second);
}

/* libmicrohttpd says the same line once per refused connection; the log
 * shows one a second, and the next one shown counts those it did not.
 * Refused one after another until a second has passed (the gateway logs
 * before it closes a refused connection, so the count is the test's). */
static void refusals_flooding_the_log_are_shown_once_a_second_with_a_count(void **state)
{
    env *e = *state;
    const char *extra[] = {"--loops", "1", "--max-connections-per-client", "1", NULL};
    start_gateway(e, extra);
    int held = held_connection(e, "127.0.0.1");
    assert_true(held >= 0);
    static const char line[] = "libmicrohttpd: Server reached connection limit. Closing inbound "
                               "connection.";
    unsigned refused = 0;
    for (int i = 0; i < 10000 && !gateway_log_contains(&e->gw, "messages not shown)"); i++) {
        assert_true(refused_from(e, "127.0.0.1"));
        refused++;
        poll(NULL, 0, 5); /* paced: a few hundred a second, not thousands */
    }
    char counted[160];
    snprintf(counted, sizeof counted, "%s (and %u more messages not shown)\n", line, refused - 2);
    assert_true(refused >= 3);
    assert_true(gateway_log_contains(&e->gw, counted));
    close(held);
}

#define IDLE_SOCKETS 2000
#define IDLE_SOURCES 8 /* 250 each: under the default per-client limit */

static void thousands_of_idle_sockets_do_not_stop_a_legitimate_request(void **state)
{
    env *e = *state;
    raise_fd_limit();
    start_gateway(e, NULL);
    static int fds[IDLE_SOCKETS];
    int opened = 0;
    for (int i = 0; i < IDLE_SOCKETS; i++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.0.%d", 10 + i % IDLE_SOURCES);
        fds[i] = raw_connect(e->gw.port, from);
        opened += fds[i] >= 0;
    }
    assert_int_equal(opened, IDLE_SOCKETS);
    assert_int_equal(healthz_from(e, "127.0.0.2"), 200);
    char url[256];
    url_of(e, "/orders", url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    for (int i = 0; i < IDLE_SOCKETS; i++)
        close(fds[i]);
}

/* The soft and hard "Max open files" of a process, from /proc. */
static void fd_limits_of(pid_t pid, unsigned long long *soft, unsigned long long *hard)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    *soft = *hard = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "Max open files", 14) == 0)
            sscanf(line + 14, " %llu %llu", soft, hard);
    }
    fclose(f);
}

static void the_fd_soft_limit_is_raised_to_the_hard_limit_at_start(void **state)
{
    env *e = *state;
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    low = saved;
    low.rlim_cur = saved.rlim_max < 512 ? saved.rlim_max : 512;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0); /* the gateway inherits it */
    start_gateway(e, NULL);
    setrlimit(RLIMIT_NOFILE, &saved);
    unsigned long long soft, hard;
    fd_limits_of(e->gw.pid, &soft, &hard);
    assert_true(hard > 0);
    assert_int_equal(soft, hard);
}

static void max_connections_beyond_the_fd_limit_is_lowered_with_a_note(void **state)
{
    env *e = *state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 1000000 + 256)
        skip(); /* room for a million connections: nothing to lower */
    const char *extra[] = {"--max-connections", "1000000", "--max-connections-per-client",
                           "1000000", NULL};
    start_gateway(e, extra);
    assert_true(gateway_log_contains(&e->gw, "--max-connections 1000000 lowered to"));
    assert_int_equal(healthz_from(e, "127.0.0.2"), 200);
}

/* Send `head`, then one byte every 200 ms until the gateway answers; true
 * when it closes the connection within `bound_ms`; what it sent in reply.
 * Nothing is sent after its answer: a byte arriving after its close would
 * be met with a reset. */
static bool dribble(const env *e, const char *head, int bound_ms, char *reply, size_t cap)
{
    int fd = raw_connect(e->gw.port, NULL);
    assert_true(fd >= 0);
    send(fd, head, strlen(head), MSG_NOSIGNAL);
    bool closed = false;
    reply[0] = '\0';
    for (int waited = 0; waited < bound_ms && !closed; waited += 200) {
        char got[1024];
        if (reply[0] == '\0')
            send(fd, "x", 1, MSG_NOSIGNAL);
        closed = raw_read_until_closed(fd, got, sizeof got, 200);
        strncat(reply, got, cap - strlen(reply) - 1);
    }
    close(fd);
    return closed;
}

/* Each byte restarts libmicrohttpd's own timeout; the header deadline
 * does not move. Timeout 1 s, bound 15 s. */
static void a_client_dribbling_its_headers_is_cut_at_the_header_timeout(void **state)
{
    env *e = *state;
    const char *extra[] = {"--header-timeout", "1s", NULL};
    start_gateway(e, extra);
    char reply[1024];
    assert_true(dribble(e, "GET /orders HTTP/1.1\r\nHost: a\r\nX-Slow: ", 15000, reply,
                        sizeof reply));
    assert_int_equal(raw_status(reply), 408);
    assert_int_equal(upstream_requests(e->up), 0);
    /* Its method is not known before its headers are in. */
    assert_true(gateway_log_shows(&e->gw, " 127.0.0.1 \"- /orders\" 408 66 "));
    assert_true(gateway_log_contains(&e->gw, "ms idempotency=timeout\n"));
}

static void a_client_dribbling_its_body_is_cut_at_the_body_timeout(void **state)
{
    env *e = *state;
    const char *extra[] = {"--body-timeout", "1s", NULL};
    start_gateway(e, extra);
    char reply[1024];
    assert_true(dribble(e, "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n",
                        15000, reply, sizeof reply));
    assert_int_equal(raw_status(reply), 408);
    /* Its length is its body's: a client reads it whole, and no more. */
    assert_non_null(strstr(reply, "\r\nContent-Length: 66\r\n\r\n{\"error\":\"request_timeout\","
                                  "\"message\":\"the request took too long\"}\n"));
    assert_int_equal(upstream_requests(e->up), 0);
    assert_true(gateway_log_shows(&e->gw, " 127.0.0.1 \"POST /orders\" 408 66 "));
    assert_true(gateway_log_contains(&e->gw, "ms idempotency=timeout\n"));
    char url[256];
    url_of(e, "/metrics", url, sizeof url);
    http_reply r;
    assert_int_equal(http_request("GET", url, NULL, NULL, &r), 0);
    assert_non_null(strstr(r.body, "resilience_idempotency_requests_total{"
                                   "http_request_method=\"POST\",idempotency_outcome=\"timeout\","
                                   "http_response_status_code=\"408\"} 1\n"));
    http_reply_free(&r);
}

static void an_idle_kept_alive_connection_is_closed_at_the_header_timeout(void **state)
{
    env *e = *state;
    const char *extra[] = {"--header-timeout", "1s", NULL};
    start_gateway(e, extra);
    int fd = raw_connect(e->gw.port, NULL);
    static const char request[] = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
    send(fd, request, sizeof request - 1, MSG_NOSIGNAL);
    char reply[1024];
    assert_true(raw_read_until_closed(fd, reply, sizeof reply, 15000));
    assert_int_equal(raw_status(reply), 200); /* answered, then closed when idle */
    close(fd);
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
        GW_CASE(first_post_is_forwarded_and_answered_by_the_upstream),
        GW_CASE(repeated_post_is_replayed_without_reaching_the_upstream),
        GW_CASE(same_key_with_another_body_is_422),
        GW_CASE(same_key_on_another_query_is_422),
        GW_CASE(post_while_the_first_runs_is_409_with_retry_after),
        GW_CASE(a_client_gone_while_its_request_runs_upstream_gets_the_answer_on_its_retry),
        GW_CASE(a_client_gone_mid_body_leaves_the_key_unclaimed),
        GW_CASE(fifty_concurrent_posts_with_one_key_reach_the_upstream_once),
        GW_CASE(concurrent_resil_http_clients_with_one_key_reach_the_upstream_once),
        GW_CASE(upstream_503_releases_the_key_so_the_retry_runs),
        GW_CASE(upstream_429_releases_the_key_too),
        GW_CASE(client_error_from_the_upstream_is_saved_and_replayed),
        GW_CASE(unreachable_upstream_is_502_and_releases_the_key),
        GW_CASE(a_sub_millisecond_timeout_still_bounds_the_upstream),
        GW_CASE(calls_cut_one_after_another_by_a_sub_millisecond_timeout_leave_it_serving),
        GW_CASE(replay_survives_a_gateway_restart),
        GW_CASE(sigterm_lets_the_request_in_flight_finish),
        GW_CASE(posts_without_a_key_pass_through),
        GW_CASE(the_upstream_is_reached_through_the_proxy_the_environment_names),
        GW_CASE(unguarded_methods_pass_through_even_with_a_key),
        GW_CASE(methods_option_chooses_what_is_guarded),
        GW_CASE(require_key_refuses_a_guarded_request_without_one),
        GW_CASE(a_long_request_header_reaches_the_upstream_whole),
        GW_CASE(a_long_response_header_reaches_the_client_whole_and_on_replay),
        GW_CASE(upstream_status_and_body_pass_through),
        GW_CASE(healthz_answers_without_the_upstream),
        GW_CASE(bad_keys_are_400),
        GW_CASE(body_over_the_limit_is_413),
        GW_CASE(tenant_header_scopes_the_keys),
        GW_CASE(access_log_has_a_line_per_request),
        GW_CASE(with_quiet_there_is_no_access_log_line),
        GW_CASE(a_replay_and_a_mismatch_of_a_completed_key_are_answered_from_the_cache),
        GW_CASE(with_the_replay_cache_off_every_begin_is_read),
        GW_CASE(a_userinfo_like_target_never_reaches_the_host_it_names),
        GW_CASE(an_absolute_form_target_is_refused_before_any_upstream_work),
        GW_CASE(an_authority_form_target_is_refused_before_any_upstream_work),
        GW_CASE(an_asterisk_form_target_is_400),
        GW_CASE(a_target_with_a_fragment_or_a_bad_escape_is_400),
        GW_CASE(a_refused_target_is_logged_with_its_control_bytes_escaped),
        GW_CASE(a_target_starting_with_two_slashes_stays_a_path_on_the_upstream),
        GW_CASE(an_origin_form_target_arrives_byte_for_byte),
        GW_CASE(a_percent_escape_arrives_as_spelled),
        GW_CASE(the_upstream_path_prefix_is_kept),
        GW_CASE(a_chunked_body_over_max_body_is_413_once_read),
        GW_CASE(a_chunked_body_that_goes_on_is_413_as_soon_as_it_passes_max_body),
        GW_CASE(an_unknown_method_is_counted_as_other_in_the_metrics),
        GW_CASE(a_gateway_on_ipv6_forwards_and_logs_the_client_ipv6_address),
        GW_CASE(conflicting_content_lengths_are_400),
        GW_CASE(an_http11_request_without_host_is_400),
        GW_CASE(a_nul_byte_in_a_header_or_the_target_is_400),
        GW_CASE(a_folded_header_line_is_400),
        GW_CASE(a_nul_byte_in_the_fortieth_header_is_400_and_forty_clean_ones_pass),
        GW_CASE(expect_100_continue_over_max_body_is_413_without_a_100_continue),
        GW_CASE(a_content_length_over_max_body_is_413_before_the_body_is_read),
        GW_CASE(an_expectation_other_than_100_continue_is_417),
        GW_CASE(a_garbage_request_line_is_refused_at_once),
        GW_CASE(bytes_that_never_make_a_request_line_are_cut_at_the_header_timeout),
        GW_CASE(a_quoted_key_is_the_same_key_as_its_bare_value),
        GW_CASE(a_quoted_key_is_unescaped),
        GW_CASE(keys_with_control_bytes_tabs_del_or_non_ascii_are_400),
        GW_CASE(quoted_keys_must_be_well_formed),
        GW_CASE(an_empty_key_is_400),
        GW_CASE(a_tenant_with_a_control_byte_or_non_ascii_is_400),
        GW_CASE(the_connection_past_the_per_client_limit_is_refused_and_others_are_served),
        GW_CASE(the_per_client_limit_counts_the_connections_of_every_loop),
        GW_CASE(a_closed_connection_leaves_room_for_its_client),
        GW_CASE(a_request_sent_on_a_connection_past_the_limit_is_closed_unanswered),
        GW_CASE(two_clients_whose_addresses_share_a_bucket_are_counted_apart),
        GW_CASE(refusals_flooding_the_log_are_shown_once_a_second_with_a_count),
        GW_CASE(thousands_of_idle_sockets_do_not_stop_a_legitimate_request),
        GW_CASE(the_fd_soft_limit_is_raised_to_the_hard_limit_at_start),
        GW_CASE(max_connections_beyond_the_fd_limit_is_lowered_with_a_note),
        GW_CASE(a_client_dribbling_its_headers_is_cut_at_the_header_timeout),
        GW_CASE(a_client_dribbling_its_body_is_cut_at_the_body_timeout),
        GW_CASE(an_idle_kept_alive_connection_is_closed_at_the_header_timeout),
    };
    int failed = cmocka_run_group_tests_name("store.gateway", tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
