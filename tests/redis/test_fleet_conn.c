/*
 * test_fleet_conn.c — one connection's failure paths, down to the bytes: a
 * command too large for the socket's send buffer, written on as the server
 * reads and ended by the call's deadline when it never does or by the
 * error when it goes away; answers past the reader's bounds refused the
 * moment they cross them.
 *
 * The writes run against the real server, paused with SIGSTOP so that its
 * socket stops reading: the kernel takes what fits in the buffers and the
 * write stalls. The test's own send buffer is made small, so "what fits" is
 * far less than the command whatever the machine's defaults. A watcher
 * thread waits (by condition, bounded) until the socket is full, then
 * resumes the server (widening the buffer again), kills it, or leaves it
 * paused: the stall is proven, not assumed. Answers no Redis would send come from fake servers on
 * loopback.
 */
#include <poll.h>
#include <sys/socket.h>

#include "../../src/redis/conn.h"
#include "fleet_test.h"

/* A command this size cannot fit in the buffers between a small send
 * buffer and a server that does not read: 4 MiB. */
#define BIG (4 * 1024 * 1024)
/* A send buffer the kernel rounds up to a few KiB. */
#define SMALL_SNDBUF 4096
/* The timeout of the calls that time out. */
#define TIMEOUT RESIL_MS(300)

/* A connection attempt: the context, or why there is none. */
typedef struct handshake {
    redisContext *c;
    fleet_conn_fail fail;
    char why[200];
} handshake;

static handshake dial(const char *url)
{
    fleet_url u;
    assert_int_equal(resil__fleet_url_parse(url, &u, NULL), 0);
    handshake h = {0};
    h.c = resil__fleet_connect(&u, FLEET_TIMEOUT, &h.fail, h.why, sizeof h.why);
    return h;
}

static redisContext *connect_url(const char *url)
{
    handshake h = dial(url);
    if (h.c == NULL)
        fprintf(stderr, "connect_url: %s\n", h.why);
    assert_non_null(h.c);
    return h.c;
}

/* A connection to the test server whose send buffer fills after a few KiB. */
static redisContext *connect_small_sndbuf(void)
{
    redisContext *c = connect_url(redis_server_url(fleet_server));
    int size = SMALL_SNDBUF;
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size), 0);
    return c;
}

/* `n` bytes in which every 8 are their own offset in decimal: a chunk lost
 * or written twice changes what follows it. */
static char *numbered(size_t n)
{
    char *s = malloc(n + 9);
    assert_non_null(s);
    for (size_t at = 0; at < n; at += 8)
        snprintf(s + at, 9, "%08u", (unsigned)(at % 100000000));
    return s;
}

/* ---- the watcher: waits for the send buffer to fill, then acts ------------------- */

typedef struct stall_watch {
    int fd;
    void (*then)(int fd);
    bool stalled; /* the socket was seen full */
    pthread_t thread;
} stall_watch;

static bool send_buffer_full(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) == 0;
}

static void *watch_main(void *arg)
{
    stall_watch *w = arg;
    int64_t until = fleet_mono_ms() + FLEET_PATIENCE_MS;
    while (!(w->stalled = send_buffer_full(w->fd)) && fleet_mono_ms() < until)
        fleet_sleep_ms(1);
    w->then(w->fd);
    return NULL;
}

/* The server reads again, and the rest goes at loopback speed rather than
 * a few KiB per acknowledgement. */
static void widen_and_resume(int fd)
{
    int size = BIG;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    redis_server_resume(fleet_server);
}

/* The command stays stuck: only the watching was wanted. */
static void keep_stalled(int fd) { (void)fd; }

static void kill_server(int fd)
{
    (void)fd;
    redis_server_kill(fleet_server);
}

static void watch_start(stall_watch *w, const redisContext *c, void (*then)(int fd))
{
    w->fd = c->fd;
    w->then = then;
    w->stalled = false;
    assert_int_equal(pthread_create(&w->thread, NULL, watch_main, w), 0);
}

static bool watch_end(stall_watch *w)
{
    pthread_join(w->thread, NULL);
    return w->stalled;
}

/* SET key value, by `deadline`. */
static redisReply *set_big(redisContext *c, const char *key, const char *value,
                           int64_t deadline)
{
    const char *argv[] = {"SET", key, value};
    size_t len[] = {3, strlen(key), BIG};
    return resil__fleet_command(c, 3, argv, len, deadline);
}

static long long exists(const char *key)
{
    const char *argv[] = {"EXISTS", key};
    return redis_server_integer(fleet_server, 2, argv);
}

/* ---- a write that stalls ----------------------------------------------------------- */

static void a_stalled_write_resumes_where_it_stopped_when_the_server_reads(void **state)
{
    (void)state;
    char *value = numbered(BIG);
    redisContext *c = connect_small_sndbuf();
    redis_server_pause(fleet_server);
    stall_watch w;
    watch_start(&w, c, widen_and_resume);

    redisReply *r = set_big(c, "big", value, resil__fleet_deadline(RESIL_S(30)));
    assert_true(watch_end(&w));
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->str, "OK");
    freeReplyObject(r);

    const char *get[] = {"GET", "big"};
    redisReply *stored = redis_server_command(fleet_server, 2, get);
    assert_non_null(stored);
    assert_int_equal(stored->type, REDIS_REPLY_STRING);
    assert_int_equal(stored->len, BIG);
    assert_memory_equal(stored->str, value, BIG);
    freeReplyObject(stored);
    resil__fleet_close(c);
    free(value);
}

static void a_write_stalled_past_the_deadline_times_out_and_sends_nothing_whole(void **state)
{
    (void)state;
    char *value = numbered(BIG);
    redisContext *c = connect_small_sndbuf();
    redis_server_pause(fleet_server);
    stall_watch w;
    watch_start(&w, c, keep_stalled);

    redisReply *r = set_big(c, "big", value, resil__fleet_deadline(TIMEOUT));
    assert_true(watch_end(&w));
    assert_null(r);
    char why[200];
    resil__fleet_io_why(c, "SET", TIMEOUT, why, sizeof why);
    assert_string_equal(why, "SET: no answer within 300ms");
    assert_false(resil__fleet_malformed(c));
    /* The context is spent: the next command fails at once. */
    const char *ping[] = {"PING"};
    assert_null(resil__fleet_command(c, 1, ping, NULL, resil__fleet_deadline(RESIL_S(30))));

    resil__fleet_close(c);
    redis_server_resume(fleet_server);
    assert_int_equal(exists("big"), 0); /* half a command never runs */
    free(value);
}

static void a_server_gone_while_a_write_stalls_fails_the_write_at_once(void **state)
{
    (void)state;
    char *value = numbered(BIG);
    redisContext *c = connect_small_sndbuf();
    redis_server_pause(fleet_server);
    stall_watch w;
    watch_start(&w, c, kill_server);

    int64_t deadline = resil__fleet_deadline(RESIL_S(30));
    redisReply *r = set_big(c, "big", value, deadline);
    assert_true(resil_clock_now(resil_clock_system()) < deadline);
    assert_true(watch_end(&w));
    assert_null(r);
    fleet_restart();
    /* Reset, or (its end of file first) a broken pipe: the kernel's race. */
    char why[200];
    resil__fleet_io_why(c, "SET", TIMEOUT, why, sizeof why);
    assert_true(strcmp(why, "SET: Connection reset by peer") == 0 ||
                strcmp(why, "SET: Broken pipe") == 0);
    resil__fleet_close(c);
    free(value);
}

/* Until the server's end of file reaches the socket, within patience. */
static void wait_for_hang_up(const redisContext *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, FLEET_PATIENCE_MS), 1);
}

static void a_write_to_a_server_that_hung_up_fails_without_sigpipe(void **state)
{
    (void)state;
    /* The server closes after PONG; the first piece of the command draws
     * its reset, the next write fails with EPIPE, which raises SIGPIPE in
     * a process that has not chosen to ignore it. */
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, fake_hang_up, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    redisContext *c = connect_url(fake_server_url(f));
    int size = SMALL_SNDBUF;
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size), 0);
    wait_for_hang_up(c);
    char *value = numbered(BIG);

    redisReply *r = set_big(c, "big", value, resil__fleet_deadline(RESIL_S(30)));
    assert_null(r);
    char why[200];
    resil__fleet_io_why(c, "SET", TIMEOUT, why, sizeof why);
    assert_string_equal(why, "SET: Broken pipe");
    resil__fleet_close(c);
    fake_server_stop(f);
    free(value);
}

/* ---- answers past the reader's bounds, from a fake Redis ---------------------------- */

/* How a probe request to a fake server fared, and what its reader held. */
typedef struct probed {
    int rc;
    bool malformed; /* the connection failed on the answer, not on I/O */
    size_t unparsed; /* bytes its reader was left holding, not yet parsed */
    char why[200];
} probed;

/* One probe request to a fake that answers PING, and EVALSHA with `reply`
 * (then `then`, `then_ms` later, when set), by FLEET_TIMEOUT. */
static probed probe(const char *reply, int trickle_ms, const char *then, int then_ms)
{
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"EVALSHA", reply, 0, trickle_ms, then, then_ms},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    redisContext *c = connect_url(fake_server_url(f));
    fleet_config cfg = {.prefix = "resil:", .channel = "resil:events", .timeout = FLEET_TIMEOUT};
    fleet_cmd cmd = {.op = FLEET_PROBE, .key = "resil:breaker:x", .name = "x"};
    fleet_state s;
    uint64_t noscript = 0, sent = 0;
    probed p = {0};
    p.rc = resil__fleet_run(c, &cmd, &cfg, FLEET_FAKE_SHA, resil__fleet_deadline(cfg.timeout), &s,
                            &noscript, &sent, p.why, sizeof p.why);
    p.malformed = resil__fleet_malformed(c);
    p.unparsed = c->reader->len - c->reader->pos;
    resil__fleet_close(c);
    fake_server_stop(f);
    return p;
}

/* `prefix`, then `n` bytes of 'a', then `suffix`. */
static char *line_of(const char *prefix, size_t n, const char *suffix)
{
    size_t lp = strlen(prefix), ls = strlen(suffix);
    char *s = malloc(lp + n + ls + 1);
    assert_non_null(s);
    memcpy(s, prefix, lp);
    memset(s + lp, 'a', n);
    memcpy(s + lp + n, suffix, ls + 1);
    return s;
}

static void a_status_line_longer_than_a_string_may_be_is_malformed(void **state)
{
    (void)state;
    char *line = line_of("+", 70000, "\r\n");
    probed p = probe(line, 0, NULL, 0);
    assert_int_equal(p.rc, RESIL_EIO);
    assert_true(p.malformed);
    assert_string_equal(p.why, "EVALSHA: malformed answer: a string of 70000 bytes (at most 65536)");
    free(line);
}

static void a_line_without_crlf_is_refused_once_it_passes_the_buffer_bound(void **state)
{
    (void)state;
    /* A megabyte with no end of line, and the connection left open: read
     * up to the bound and one read more, then refused, never waited out. */
    char *line = line_of("+", 1024 * 1024, "");
    probed p = probe(line, 0, NULL, 0);
    assert_int_equal(p.rc, RESIL_EIO);
    assert_true(p.malformed);
    assert_string_equal(p.why,
                        "EVALSHA: malformed answer: more than 98304 bytes without a complete item");
    assert_true(p.unparsed > FLEET_READ_BUFFER_MAX);
    assert_true(p.unparsed <= FLEET_READ_BUFFER_MAX + 16 * 1024);
    free(line);
}

static void a_string_longer_than_its_header_drops_the_connection(void **state)
{
    (void)state;
    /* Taken as "abc", it would leave "f\r\n" to be read as the next answer. */
    probed p = probe("$3\r\nabcdef\r\n", 0, NULL, 0);
    assert_int_equal(p.rc, RESIL_EIO);
    assert_true(p.malformed);
    assert_string_equal(p.why, "EVALSHA: malformed answer: a string not ending where its "
                               "header says (3 bytes)");
}

/* ---- answers cut off or in pieces ----------------------------------------------------- */

static void a_server_closing_mid_answer_fails_the_call_as_closed(void **state)
{
    (void)state;
    char half[64];
    snprintf(half, sizeof half, "%.51s", FLEET_FAKE_CLOSED);
    probed p = probe(half, 0, fake_hang_up, 0);
    assert_int_equal(p.rc, RESIL_EBACKEND);
    assert_false(p.malformed);
    assert_string_equal(p.why, "EVALSHA: the server closed the connection");
}

static void an_answer_arriving_a_byte_at_a_time_is_read_whole(void **state)
{
    (void)state;
    probed p = probe(FLEET_FAKE_CLOSED, 1, NULL, 0);
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.unparsed, 0);
}

/* ---- the handshake ---------------------------------------------------------------- */

static handshake connect_as(const char *userinfo)
{
    char url[128];
    snprintf(url, sizeof url, "redis://%s@127.0.0.1:%d", userinfo,
             redis_server_port(fleet_server));
    return dial(url);
}

/* User "fleet", password "s3cret", allowed everything; or gone again. */
static void fleet_user(bool on)
{
    const char *add[] = {"ACL", "SETUSER", "fleet", "on", ">s3cret", "~*", "&*", "+@all"};
    const char *del[] = {"ACL", "DELUSER", "fleet"};
    redisReply *r = on ? redis_server_command(fleet_server, 8, add)
                       : redis_server_command(fleet_server, 3, del);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

static void a_url_with_a_user_connects_as_that_user(void **state)
{
    (void)state;
    fleet_user(true);
    handshake h = connect_as("fleet:s3cret");
    assert_non_null(h.c);
    const char *whoami[] = {"ACL", "WHOAMI"};
    redisReply *r = resil__fleet_command(h.c, 2, whoami, NULL, resil__fleet_deadline(FLEET_TIMEOUT));
    assert_non_null(r);
    assert_string_equal(r->str, "fleet");
    freeReplyObject(r);
    resil__fleet_close(h.c);
    fleet_user(false);
}

static void a_wrong_password_for_a_user_is_refused_in_redis_words(void **state)
{
    (void)state;
    fleet_user(true);
    handshake h = connect_as("fleet:wrong");
    assert_null(h.c);
    assert_int_equal(h.fail, FLEET_REFUSED);
    assert_string_equal(h.why, "Redis refused AUTH: WRONGPASS invalid username-password pair "
                               "or user is disabled.");
    fleet_user(false);
}

static void a_ping_answered_with_other_than_a_status_is_not_redis(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", ":1\r\n", 0, 0, NULL, 0}, {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    handshake h = dial(fake_server_url(f));
    assert_null(h.c);
    assert_int_equal(h.fail, FLEET_NOT_REDIS);
    assert_string_equal(h.why, "the server is not Redis (PING got an unexpected reply)");
    fake_server_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_stalled_write_resumes_where_it_stopped_when_the_server_reads),
        T(a_write_stalled_past_the_deadline_times_out_and_sends_nothing_whole),
        T(a_server_gone_while_a_write_stalls_fails_the_write_at_once),
        T(a_write_to_a_server_that_hung_up_fails_without_sigpipe),
        T(a_status_line_longer_than_a_string_may_be_is_malformed),
        T(a_line_without_crlf_is_refused_once_it_passes_the_buffer_bound),
        T(a_string_longer_than_its_header_drops_the_connection),
        T(a_server_closing_mid_answer_fails_the_call_as_closed),
        T(an_answer_arriving_a_byte_at_a_time_is_read_whole),
        T(a_url_with_a_user_connects_as_that_user),
        T(a_wrong_password_for_a_user_is_refused_in_redis_words),
        T(a_ping_answered_with_other_than_a_status_is_not_redis),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
