/*
 * test_gateway_client.c — the gateway's own client of a plain http://
 * upstream (cli/gateway/gateway_client.c), end to end: the real binary in
 * front of a scripted upstream that answers each request with bytes the
 * test chose — kept-alive, chunked, to the close, cut short, malformed —
 * and counts the requests and connections it saw. Pass-through requests
 * (no key) with one loop, so every request meets the same pool of kept
 * connections. The framing itself, case by case, is
 * tests/gateway/test_response.c; the at-most-once rule on a connection
 * that dies is tests/store/test_gateway_rules.c.
 *
 * The upstream: raw sockets and one thread serving one connection at a
 * time (the gateway's single loop sends one request at a time here), each
 * request read to its end (headers, then Content-Length bytes), answered
 * with the next scripted answer, and the connection closed after it when
 * the script says so.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway_proc.h"
#include "test.h"

#include "resil/store.h"

typedef struct scripted {
    const char *answer; /* bytes written back */
    bool close;         /* the connection closed after them */
} scripted;

typedef struct script_upstream {
    int listen_fd, port;
    pthread_t thread;
    const scripted *script;
    size_t n_script;
    pthread_mutex_t mu;
    unsigned requests, connections;
    char first_request[8192];
} script_upstream;

typedef struct env {
    char *dir;
    char store[640];
    char log[600];
    script_upstream up;
    gateway_proc gw;
} env;

static const char *resil_binary(void) { return test_build_path("resil"); }

/* One request read to its end into buf; false when the connection ended. */
static bool read_request(int fd, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    char *end = NULL;
    while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0)
            return false;
        n += (size_t)r;
        buf[n] = '\0';
    }
    const char *cl = strstr(buf, "Content-Length: ");
    size_t body = cl != NULL && cl < end ? (size_t)atoi(cl + 16) : 0;
    size_t want = (size_t)(end + 4 - buf) + body;
    while (n < want) {
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0)
            return false;
        n += (size_t)r;
        buf[n] = '\0';
    }
    *len = n;
    return true;
}

static void *serve(void *arg)
{
    script_upstream *u = arg;
    size_t next = 0;
    while (next < u->n_script) {
        int fd = accept(u->listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_mutex_lock(&u->mu);
        u->connections++;
        pthread_mutex_unlock(&u->mu);
        char buf[8192];
        size_t len;
        bool open = true;
        while (open && next < u->n_script) {
            memset(buf, 0, sizeof buf);
            if (!read_request(fd, buf, sizeof buf, &len))
                break;
            pthread_mutex_lock(&u->mu);
            if (u->requests++ == 0)
                snprintf(u->first_request, sizeof u->first_request, "%s", buf);
            pthread_mutex_unlock(&u->mu);
            const scripted *s = &u->script[next++];
            ssize_t w = send(fd, s->answer, strlen(s->answer), MSG_NOSIGNAL);
            (void)w;
            open = !s->close;
        }
        close(fd);
    }
    return NULL;
}

static void upstream_start(env *e, const scripted *script, size_t n)
{
    script_upstream *u = &e->up;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    u->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(u->listen_fd >= 0);
    assert_int_equal(bind(u->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(u->listen_fd, 16), 0);
    assert_int_equal(getsockname(u->listen_fd, (struct sockaddr *)&a, &alen), 0);
    u->port = ntohs(a.sin_port);
    u->script = script;
    u->n_script = n;
    pthread_mutex_init(&u->mu, NULL);
    assert_int_equal(pthread_create(&u->thread, NULL, serve, u), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", u->port);
    const char *args[] = {"--upstream", url, "--store", e->store, "--loops", "1", NULL};
    snprintf(e->log, sizeof e->log, "%s/gateway.log", e->dir);
    if (gateway_start(&e->gw, resil_binary(), e->log, args) != 0)
        fail_msg("the gateway did not start");
}

static unsigned seen(script_upstream *u, unsigned *connections)
{
    pthread_mutex_lock(&u->mu);
    unsigned r = u->requests;
    *connections = u->connections;
    pthread_mutex_unlock(&u->mu);
    return r;
}

static void expect_seen(env *e, unsigned requests, unsigned connections)
{
    unsigned got_connections;
    assert_int_equal(seen(&e->up, &got_connections), requests);
    assert_int_equal(got_connections, connections);
}

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dir = test_tmpdir();
    if (e->dir == NULL)
        return -1;
    snprintf(e->store, sizeof e->store, "sqlite:%s/gateway.db", e->dir);
    e->up.listen_fd = -1;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    int rc = e->gw.pid > 0 ? gateway_stop(&e->gw) : 0;
    if (rc != 0)
        fprintf(stderr, "the gateway exited %d, see %s\n", rc, e->log);
    if (e->up.listen_fd >= 0) {
        shutdown(e->up.listen_fd, SHUT_RDWR);
        close(e->up.listen_fd);
        pthread_join(e->up.thread, NULL);
        pthread_mutex_destroy(&e->up.mu);
    }
    test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return rc == 0 ? 0 : -1;
}

static void request(const env *e, const char *method, const char *body, http_reply *r)
{
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->gw.url);
    const char *const headers[] = {"X-Trace: t-1", NULL};
    if (http_request(method, url, headers, body, r) != 0)
        fail_msg("%s %s failed: curl %d", method, url, r->curl_code);
}

#define N(a) (sizeof(a) / sizeof(a)[0])

static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

static void requests_one_after_another_share_one_kept_upstream_connection(void **state)
{
    env *e = *state;
    static const scripted script[] = {{ok, false}, {ok, false}, {ok, false}};
    upstream_start(e, script, N(script));
    for (int i = 0; i < 3; i++) {
        http_reply r;
        request(e, "GET", NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "ok");
        http_reply_free(&r);
    }
    expect_seen(e, 3, 1);
}

static void the_request_reaches_the_upstream_as_libcurl_wrote_it(void **state)
{
    env *e = *state;
    static const scripted script[] = {{ok, false}};
    upstream_start(e, script, N(script));
    http_reply r;
    request(e, "POST", "abc", &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char start[128];
    snprintf(start, sizeof start, "POST /orders HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", e->up.port);
    const char *got = e->up.first_request;
    assert_memory_equal(got, start, strlen(start));
    assert_non_null(strstr(got, "\r\nX-Trace: t-1\r\n"));
    assert_non_null(strstr(got, "\r\nX-Forwarded-For: 127.0.0.1\r\nContent-Length: 3\r\n"));
    size_t len = strlen(got);
    assert_true(len > 7);
    assert_string_equal(got + len - 7, "\r\n\r\nabc");
}

static void a_chunked_answer_reaches_the_client_whole_with_its_trailer(void **state)
{
    env *e = *state;
    static const scripted script[] = {
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
         "4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Checksum: 9\r\n\r\n", false},
        {ok, false}};
    upstream_start(e, script, N(script));
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "wikipedia");
    char v[32];
    assert_true(http_reply_header(&r, "X-Checksum", v, sizeof v));
    assert_string_equal(v, "9");
    http_reply_free(&r);
    request(e, "GET", NULL, &r); /* on the same connection */
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    expect_seen(e, 2, 1);
}

static void an_answer_that_runs_to_the_close_is_whole_and_the_next_goes_on_a_new_connection(
    void **state)
{
    env *e = *state;
    static const scripted script[] = {{"HTTP/1.1 200 OK\r\n\r\nto the end", true}, {ok, false}};
    upstream_start(e, script, N(script));
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "to the end");
    http_reply_free(&r);
    request(e, "GET", NULL, &r);
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    expect_seen(e, 2, 2);
}

static void a_100_continue_before_the_answer_is_not_passed_on(void **state)
{
    env *e = *state;
    static const scripted script[] = {
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade",
         false}};
    upstream_start(e, script, N(script));
    http_reply r;
    request(e, "POST", "x", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "made");
    http_reply_free(&r);
}

static void a_head_answer_has_no_body_and_keeps_the_connection(void **state)
{
    env *e = *state;
    static const scripted script[] = {{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false},
                                      {ok, false}};
    upstream_start(e, script, N(script));
    http_reply r;
    request(e, "HEAD", NULL, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    request(e, "GET", NULL, &r);
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    expect_seen(e, 2, 1);
}

/* The upstream answers `answer` and closes: the client gets a 502 of the
 * gateway's own, and the log says why. */
static void expect_502(env *e, const char *answer, const char *log_text)
{
    const scripted script[] = {{answer, true}};
    upstream_start(e, script, N(script));
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, log_text));
}

static void an_answer_cut_mid_body_is_502_not_a_short_answer(void **state)
{
    expect_502(*state, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
               "transfer closed with 7 bytes remaining to read");
}

static void a_content_length_with_a_sign_is_502(void **state)
{
    expect_502(*state, "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
               "malformed upstream response: Content-Length is not digits");
}

static void a_bad_chunk_size_is_502(void **state)
{
    expect_502(*state,
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
               "malformed upstream response: bad chunk size");
}

#define GW_CASE(name) cmocka_unit_test_setup_teardown(name, env_setup, env_teardown)

int main(void)
{
    if (resil_binary() == NULL) {
        fprintf(stderr, "RESIL_BUILD_DIR is not set\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        GW_CASE(requests_one_after_another_share_one_kept_upstream_connection),
        GW_CASE(the_request_reaches_the_upstream_as_libcurl_wrote_it),
        GW_CASE(a_chunked_answer_reaches_the_client_whole_with_its_trailer),
        GW_CASE(an_answer_that_runs_to_the_close_is_whole_and_the_next_goes_on_a_new_connection),
        GW_CASE(a_100_continue_before_the_answer_is_not_passed_on),
        GW_CASE(a_head_answer_has_no_body_and_keeps_the_connection),
        GW_CASE(an_answer_cut_mid_body_is_502_not_a_short_answer),
        GW_CASE(a_content_length_with_a_sign_is_502),
        GW_CASE(a_bad_chunk_size_is_502),
    };
    return cmocka_run_group_tests_name("store.gateway_client", tests, NULL, NULL);
}
