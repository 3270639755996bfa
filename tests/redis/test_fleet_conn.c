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
 * thread waits (by condition, bounded) until the socket is full, widens the
 * buffer again (so the rest goes at loopback speed, not a few KiB per
 * acknowledgement), then resumes or kills the server: the stall is proven,
 * not assumed. Answers no Redis would send come from fake servers on
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

static redisContext *connect_url(const char *url)
{
    fleet_url u;
    assert_int_equal(resil__fleet_url_parse(url, &u, NULL), 0);
    fleet_conn_fail fail;
    char why[200];
    redisContext *c = resil__fleet_connect(&u, FLEET_TIMEOUT, &fail, why, sizeof why);
    if (c == NULL)
        fprintf(stderr, "connect_url: %s\n", why);
    assert_non_null(c);
    return c;
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
    void (*then)(redis_server *s);
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
    int size = BIG;
    setsockopt(w->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    w->then(fleet_server);
    return NULL;
}

static void keep_paused(redis_server *s) { (void)s; }

static void watch_start(stall_watch *w, const redisContext *c, void (*then)(redis_server *))
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
    watch_start(&w, c, redis_server_resume);

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
    watch_start(&w, c, keep_paused);

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
    watch_start(&w, c, redis_server_kill);

    redisReply *r = set_big(c, "big", value, resil__fleet_deadline(RESIL_S(30)));
    assert_true(watch_end(&w));
    assert_null(r);
    char why[200];
    resil__fleet_io_why(c, "SET", TIMEOUT, why, sizeof why);
    assert_string_equal(why, "SET: Connection reset by peer");
    resil__fleet_close(c);
    fleet_restart();
    free(value);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_stalled_write_resumes_where_it_stopped_when_the_server_reads),
        T(a_write_stalled_past_the_deadline_times_out_and_sends_nothing_whole),
        T(a_server_gone_while_a_write_stalls_fails_the_write_at_once),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
