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
 * request read to its end (headers, then Content-Length bytes, the body
 * counted rather than kept, so that one larger than the socket buffers
 * fits), answered with the next scripted answer, and the connection closed
 * after it when the script says so — with a reset (SO_LINGER 0) when the
 * failure under test is a reset, or once the head is in and the body not
 * read, when it is a reset while the gateway is still sending. It listens
 * on 127.0.0.1, or on [::1] for the IPv6 upstream, or on port 80 for the
 * Host header without a port (when the test may bind it).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway_proc.h"
#include "test.h"

#include "resil/store.h"

typedef enum ending {
    KEEP,         /* the connection stays open after the answer */
    CLOSE,        /* closed after it */
    RESET,        /* closed after it with a reset (RST) instead of a FIN */
    RESET_AT_HEAD /* reset as soon as the request's head is in: its body unread */
} ending;

typedef struct scripted {
    const char *answer; /* bytes written back */
    ending end;
} scripted;

typedef struct script_upstream {
    int listen_fd, port;
    pthread_t thread;
    const scripted *script;
    size_t n_script;
    pthread_mutex_t mu;
    unsigned requests, connections;
    size_t last_body; /* the body bytes of the last request read whole */
    char first_request[8192];
} script_upstream;

typedef struct env {
    char *dir;
    char store[640];
    char log[600];
    script_upstream up;
    scripted script[2]; /* a script made up by a test, kept while it is served */
    gateway_proc gw;
} env;

static const char *resil_binary(void) { return test_build_path("resil"); }

/* Read until buf holds a whole head; false when the connection ended. */
static bool read_head(int fd, char *buf, size_t cap, size_t *n)
{
    while (strstr(buf, "\r\n\r\n") == NULL) {
        ssize_t r = recv(fd, buf + *n, cap - 1 - *n, 0);
        if (r <= 0)
            return false;
        *n += (size_t)r;
        buf[*n] = '\0';
    }
    return true;
}

/* The rest of a body of `left` bytes, counted and dropped. */
static bool drain(int fd, size_t left)
{
    static char sink[1 << 16];
    while (left > 0) {
        ssize_t r = recv(fd, sink, left < sizeof sink ? left : sizeof sink, 0);
        if (r <= 0)
            return false;
        left -= (size_t)r;
    }
    return true;
}

/* One request read to its end: its head (and what came with it) into buf,
 * the length of its body into *body; false when the connection ended. */
static bool read_request(int fd, char *buf, size_t cap, size_t *body)
{
    size_t n = 0;
    if (!read_head(fd, buf, cap, &n))
        return false;
    const char *end = strstr(buf, "\r\n\r\n") + 4;
    const char *cl = strstr(buf, "Content-Length: ");
    *body = cl != NULL && cl < end ? (size_t)atol(cl + 16) : 0;
    size_t have = n - (size_t)(end - buf);
    return have >= *body || drain(fd, *body - have);
}

/* Close with a reset: SO_LINGER with a zero timeout. */
static void reset_close(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* The head only (what came with it read too), then a reset: the gateway
 * is still sending the body. */
static bool reset_at_head(script_upstream *u, int fd, const scripted *s)
{
    if (s->end != RESET_AT_HEAD)
        return false;
    char buf[8192] = "";
    size_t n = 0;
    if (read_head(fd, buf, sizeof buf, &n)) {
        pthread_mutex_lock(&u->mu);
        u->requests++;
        pthread_mutex_unlock(&u->mu);
    }
    reset_close(fd);
    return true;
}

/* The requests of one connection, answered as scripted; true when it was
 * closed here already (a reset). */
static bool serve_connection(script_upstream *u, int fd, size_t *next)
{
    char buf[8192];
    size_t body;
    bool open = true;
    while (open && *next < u->n_script) {
        const scripted *s = &u->script[(*next)++];
        if (reset_at_head(u, fd, s))
            return true;
        memset(buf, 0, sizeof buf);
        if (!read_request(fd, buf, sizeof buf, &body))
            break;
        pthread_mutex_lock(&u->mu);
        if (u->requests++ == 0)
            snprintf(u->first_request, sizeof u->first_request, "%s", buf);
        u->last_body = body;
        pthread_mutex_unlock(&u->mu);
        ssize_t w = send(fd, s->answer, strlen(s->answer), MSG_NOSIGNAL);
        (void)w;
        if (s->end == RESET) {
            reset_close(fd);
            return true;
        }
        open = s->end == KEEP;
    }
    return false;
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
        if (!serve_connection(u, fd, &next))
            close(fd);
    }
    return NULL;
}

/* Where the upstream listens: an address of `family`, on `port` (0: a
 * free one), and the URL the gateway is given for it. */
typedef struct where {
    int family;
    const char *addr;
    int port;
    const char *url_form; /* printf form of the URL, with the port */
} where;

static const where loopback = {AF_INET, "127.0.0.1", 0, "http://127.0.0.1:%d"};

/* The listening socket at w; false when this machine will not give it
 * (no IPv6 loopback, or port 80 without the privilege). */
static bool listen_at(script_upstream *u, const where *w)
{
    struct sockaddr_storage a = {0};
    socklen_t alen;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
    if (w->family == AF_INET6) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)w->port);
        inet_pton(AF_INET6, w->addr, &a6->sin6_addr);
        alen = sizeof *a6;
    } else {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)w->port);
        inet_pton(AF_INET, w->addr, &a4->sin_addr);
        alen = sizeof *a4;
    }
    int fd = socket(w->family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    int small = 64 * 1024; /* a body larger than this and the sender's buffer waits */
    if (fd >= 0) { /* a fixed port may still be in TIME_WAIT from the run before */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    u->listen_fd = fd;
    u->port = ntohs(w->family == AF_INET6 ? a6->sin6_port : a4->sin_port);
    return true;
}

/* The gateway, on one loop, in front of `url`, with `extra` (may be NULL). */
static void gateway_in_front(env *e, const char *url, const char *const extra[])
{
    const char *args[16] = {"--upstream", url, "--store", e->store, "--loops", "1"};
    size_t n = 6;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    snprintf(e->log, sizeof e->log, "%s/gateway.log", e->dir);
    if (gateway_start(&e->gw, resil_binary(), e->log, args) != 0)
        fail_msg("the gateway did not start");
}

/* The scripted upstream at w and the gateway in front of it; false (and
 * nothing started) when w cannot be had here. */
static bool upstream_start_at(env *e, const where *w, const scripted *script, size_t n,
                              const char *const extra[])
{
    script_upstream *u = &e->up;
    if (!listen_at(u, w))
        return false;
    u->script = script;
    u->n_script = n;
    pthread_mutex_init(&u->mu, NULL);
    assert_int_equal(pthread_create(&u->thread, NULL, serve, u), 0);
    char url[64];
    snprintf(url, sizeof url, w->url_form, u->port);
    gateway_in_front(e, url, extra);
    return true;
}

static void upstream_start(env *e, const scripted *script, size_t n)
{
    assert_true(upstream_start_at(e, &loopback, script, n, NULL));
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
    static const scripted script[] = {{ok, KEEP}, {ok, KEEP}, {ok, KEEP}};
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
    static const scripted script[] = {{ok, KEEP}};
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
         "4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Checksum: 9\r\n\r\n", KEEP},
        {ok, KEEP}};
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
    static const scripted script[] = {{"HTTP/1.1 200 OK\r\n\r\nto the end", CLOSE}, {ok, KEEP}};
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
         KEEP}};
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
    static const scripted script[] = {{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", KEEP},
                                      {ok, KEEP}};
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

/* The upstream does what `s` says: the client gets a 502 of the
 * gateway's own, and the log says why. */
static void expect_502_of(env *e, const scripted *s, const char *log_text)
{
    e->script[0] = *s;
    e->script[1] = (scripted){ok, KEEP};
    upstream_start(e, e->script, N(e->script));
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, log_text));
}

/* The upstream answers `answer` and closes: as above. */
static void expect_502(env *e, const char *answer, const char *log_text)
{
    const scripted s = {answer, CLOSE};
    expect_502_of(e, &s, log_text);
}

/* After the failure its connection is gone: the next request is served,
 * on a new one. */
static void expect_served_again(env *e)
{
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    expect_seen(e, 2, 2);
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

static void a_chunked_answer_cut_before_its_last_chunk_is_502(void **state)
{
    env *e = *state;
    expect_502(e, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n",
               "transfer closed with outstanding read data remaining");
    expect_served_again(e);
}

/* A connection of its own (not a kept one, which would be resent on)
 * closed with no answer byte. */
static void a_new_connection_closed_without_an_answer_is_502_empty_reply(void **state)
{
    env *e = *state;
    expect_502(e, "", "Empty reply from server");
    expect_served_again(e);
}

static void a_reset_before_any_answer_byte_is_502(void **state)
{
    env *e = *state;
    const scripted s = {"", RESET};
    expect_502_of(e, &s, "Recv failure: Connection reset by peer");
    expect_served_again(e);
}

/* The bytes and the reset may reach the gateway in one wake or in two, as
 * the machine schedules it; the answer is the same either way, and never
 * waits for --timeout. Twenty answers, so that both cases come. */
#define RESETS 20

static void every_answer_reset_mid_body_is_502_at_once(void **state)
{
    env *e = *state;
    static scripted script[RESETS];
    for (size_t i = 0; i < RESETS; i++)
        script[i] = (scripted){"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", RESET};
    static const char *const timeout[] = {"--timeout", "10s", NULL};
    assert_true(upstream_start_at(e, &loopback, script, RESETS, timeout));
    for (int i = 0; i < RESETS; i++) {
        http_reply r;
        request(e, "GET", NULL, &r);
        assert_int_equal(r.status, 502);
        assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
        http_reply_free(&r);
    }
    assert_true(gateway_log_contains(&e->gw, "Recv failure: Connection reset by peer"));
    expect_seen(e, RESETS, RESETS);
}

/* ---- an answer's header block ------------------------------------------------- */

/* A header block larger than the front door can send back (libmicrohttpd
 * builds it in the connection's 32 KB) is an answer over the limit: an
 * unknown outcome, saved and replayed, not an answer saved and then never
 * sent (the connection closed on the client, and on every retry). */
static void an_answer_with_headers_too_large_to_send_back_is_an_unknown_outcome(void **state)
{
    env *e = *state;
    enum { VALUE_LEN = 40000 };
    static char answer[VALUE_LEN + 128];
    int n = snprintf(answer, sizeof answer, "HTTP/1.1 201 Created\r\nX-Long: ");
    memset(answer + n, 'h', VALUE_LEN);
    snprintf(answer + n + VALUE_LEN, sizeof answer - (size_t)n - VALUE_LEN,
             "\r\nContent-Length: 4\r\n\r\nmade");
    e->script[0] = (scripted){answer, KEEP};
    upstream_start(e, e->script, 1);
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->gw.url);
    const char *const key[] = {"Idempotency-Key: big-1", NULL};
    for (int i = 0; i < 2; i++) { /* the first answer, then its replay */
        http_reply r;
        assert_int_equal(http_request("POST", url, key, "a", &r), 0);
        assert_int_equal(r.status, 502);
        assert_non_null(strstr(r.body, "\"error\":\"upstream_response_too_large\""));
        char outcome[32];
        assert_true(http_reply_header(&r, "Idempotent-Outcome", outcome, sizeof outcome));
        assert_string_equal(outcome, "unknown");
        http_reply_free(&r);
    }
    expect_seen(e, 1, 1);
    assert_true(gateway_log_contains(
        &e->gw, "upstream_error=\"upstream response headers larger than the gateway sends back "
                "(24 KB)\""));
}

/* ---- bodies larger than the socket buffers ----------------------------------- */

#define BIG_BODY (24u << 20) /* more than loopback's send and receive buffers hold */

static const char *const big_body_allowed[] = {"--max-body", "32MB", NULL};

static char *big_body(void)
{
    char *b = malloc(BIG_BODY + 1);
    assert_non_null(b);
    memset(b, 'b', BIG_BODY);
    b[BIG_BODY] = '\0';
    return b;
}

static void a_body_larger_than_the_socket_buffers_reaches_the_upstream_whole(void **state)
{
    env *e = *state;
    static const scripted script[] = {{ok, KEEP}};
    assert_true(upstream_start_at(e, &loopback, script, N(script), big_body_allowed));
    char *body = big_body();
    http_reply r;
    request(e, "POST", body, &r);
    free(body);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    assert_int_equal(e->up.last_body, BIG_BODY);
    expect_seen(e, 1, 1);
}

/* The upstream resets the connection once it has the head, while the
 * gateway is still sending the body (the upstream's small receive buffer
 * holds it back). Whether the gateway meets the reset sending or reading
 * is the kernel's moment to choose; either way the client gets a 502. */
static void a_reset_while_the_body_is_sent_is_502(void **state)
{
    env *e = *state;
    static const scripted script[] = {{"", RESET_AT_HEAD}, {ok, KEEP}};
    assert_true(upstream_start_at(e, &loopback, script, N(script), big_body_allowed));
    char *body = big_body();
    http_reply r;
    request(e, "POST", body, &r);
    free(body);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, " failure: Connection reset by peer\""));
    expect_served_again(e);
}

/* The upstream answers and resets the connection at once, so the answer
 * and the reset reach the gateway together: its socket is readable and
 * failed at the same time. The answer came first, and the client gets it,
 * through the gateway's own client (an upstream given by its address) and
 * through libcurl (one given by name) — whose loop reports the socket as
 * failed and not as readable (libuv does so), which libcurl, told only of
 * the failure, took for a transfer that failed without reading it. */
static void expect_answer_read_before_the_reset(env *e, const where *w)
{
    static const scripted script[] = {{ok, RESET}};
    assert_true(upstream_start_at(e, w, script, N(script), NULL));
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    expect_seen(e, 1, 1);
}

static void an_answer_followed_at_once_by_a_reset_reaches_the_client(void **state)
{
    expect_answer_read_before_the_reset(*state, &loopback);
}

static const where loopback_by_name = {AF_INET, "127.0.0.1", 0, "http://localhost:%d"};

static void an_answer_followed_at_once_by_a_reset_reaches_the_client_through_libcurl(
    void **state)
{
    expect_answer_read_before_the_reset(*state, &loopback_by_name);
}

/* ---- where the upstream is ------------------------------------------------------ */

/* An address no route leads to (a multicast one: TCP cannot connect
 * there): the connect fails at once, not after a timeout. */
static void an_upstream_address_without_a_route_is_502_at_once(void **state)
{
    env *e = *state;
    gateway_in_front(e, "http://224.0.0.1:9", NULL);
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "\"error\":\"upstream_unavailable\""));
    http_reply_free(&r);
    assert_true(gateway_log_contains(&e->gw, "Failed to connect to 224.0.0.1 port 9 after "));
    assert_true(gateway_log_contains(&e->gw, "Couldn't connect to server"));
}

/* The request's first lines as the upstream got them. */
static void expect_request_start(env *e, const char *host)
{
    char start[128];
    snprintf(start, sizeof start, "GET /orders HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\n", host);
    const char *got = e->up.first_request;
    assert_memory_equal(got, start, strlen(start));
}

static void an_upstream_at_an_ipv6_address_is_reached_with_its_bracketed_host(void **state)
{
    env *e = *state;
    static const where v6 = {AF_INET6, "::1", 0, "http://[::1]:%d"};
    static const scripted script[] = {{ok, KEEP}};
    if (!upstream_start_at(e, &v6, script, N(script), NULL))
        skip(); /* no IPv6 loopback here */
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    http_reply_free(&r);
    char host[64];
    snprintf(host, sizeof host, "[::1]:%d", e->up.port);
    expect_request_start(e, host);
}

/* Port 80 is HTTP's own: libcurl leaves it out of Host, and so does the
 * gateway. On a loopback address of its own, so as not to meet a server
 * of the machine's. */
static void an_upstream_on_port_80_gets_a_host_without_the_port(void **state)
{
    env *e = *state;
    static const where p80 = {AF_INET, "127.0.0.80", 80, "http://127.0.0.80:%d"};
    static const scripted script[] = {{ok, KEEP}};
    if (!upstream_start_at(e, &p80, script, N(script), NULL))
        skip(); /* port 80 needs a privilege this run lacks */
    http_reply r;
    request(e, "GET", NULL, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    expect_request_start(e, "127.0.0.80");
}

/* ---- the request's headers ------------------------------------------------------- */

static void a_header_with_an_empty_value_reaches_the_upstream_as_libcurl_sends_it(void **state)
{
    env *e = *state;
    static const scripted script[] = {{ok, KEEP}};
    upstream_start(e, script, N(script));
    char url[128];
    snprintf(url, sizeof url, "%s/orders", e->gw.url);
    const char *const headers[] = {"X-Empty;", NULL}; /* libcurl's way to send "X-Empty:" */
    http_reply r;
    assert_int_equal(http_request("GET", url, headers, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_non_null(strstr(e->up.first_request, "\r\nX-Empty:\r\n"));
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
        GW_CASE(a_chunked_answer_cut_before_its_last_chunk_is_502),
        GW_CASE(a_new_connection_closed_without_an_answer_is_502_empty_reply),
        GW_CASE(a_reset_before_any_answer_byte_is_502),
        GW_CASE(every_answer_reset_mid_body_is_502_at_once),
        GW_CASE(an_answer_with_headers_too_large_to_send_back_is_an_unknown_outcome),
        GW_CASE(a_body_larger_than_the_socket_buffers_reaches_the_upstream_whole),
        GW_CASE(a_reset_while_the_body_is_sent_is_502),
        GW_CASE(an_answer_followed_at_once_by_a_reset_reaches_the_client),
        GW_CASE(an_answer_followed_at_once_by_a_reset_reaches_the_client_through_libcurl),
        GW_CASE(an_upstream_address_without_a_route_is_502_at_once),
        GW_CASE(an_upstream_at_an_ipv6_address_is_reached_with_its_bracketed_host),
        GW_CASE(an_upstream_on_port_80_gets_a_host_without_the_port),
        GW_CASE(a_header_with_an_empty_value_reaches_the_upstream_as_libcurl_sends_it),
    };
    return cmocka_run_group_tests_name("store.gateway_client", tests, NULL, NULL);
}
