/*
 * test_server.c — the scripted test server's own promise to the virtual
 * loop: http_server_settled() is false while the server has work of its
 * own (a request it has not answered, a delay it is waiting out) and true
 * once whatever it does next waits on its client or the test (idle,
 * holding, or at a gate still closed); and a hold the test releases is
 * answered.
 *
 * The client here is a plain blocking socket. Before asking, it waits
 * until the server's end has acknowledged every byte it sent, which is the
 * client's own part of the bargain (virtual_loop.c checks its sockets the
 * same way). Becoming settled after an answer may wait on the client's
 * delayed acknowledgement, so those checks are waited for
 * (test_wait_until); being unsettled is asserted at once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"

#include "http_server.h"
#include "../support/tcp_in_flight.h"

static int connect_to(const http_server *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)http_server_port(s))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static bool delivered(void *fd) { return !tcp_in_flight(*(int *)fd); }

/* Every byte sent on fd acknowledged by the other end. */
static void await_delivered(int fd)
{
    assert_true(test_wait_until(delivered, &fd, 1));
}

static void send_request(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    assert_int_equal(send(fd, req, (size_t)n, 0), n);
    await_delivered(fd);
}

static bool settled(void *s) { return http_server_settled(s); }

static bool settles_within_bound(http_server *s) { return test_wait_until(settled, s, 1); }

/* A server whose `path` answers with `step`, and a connection that has
 * sent it one request. */
static http_server *serving(const char *path, http_step step, int *fd)
{
    http_server *s = http_server_start();
    assert_non_null(s);
    http_server_script(s, path, &step, 1);
    *fd = connect_to(s);
    send_request(*fd, path);
    return s;
}

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

/* Read until the answer's body ("ok\n", the last bytes) has arrived. */
static void read_answer(int fd)
{
    char buf[1024];
    size_t len = 0;
    while (len < 3 || memcmp(buf + len - 3, "ok\n", 3) != 0) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        assert_true(n > 0);
        len += (size_t)n;
    }
}

static void a_server_without_connections_is_settled(void **state)
{
    (void)state;
    http_server *s = http_server_start();
    assert_non_null(s);
    assert_true(http_server_settled(s));
    http_server_stop(s);
}

static void a_request_waiting_out_its_delay_is_work(void **state)
{
    (void)state;
    int fd;
    http_step step = {.status = 200, .delay_ms = 30000, .body = "ok\n"};
    http_server *s = serving("/d", step, &fd);
    assert_false(http_server_settled(s)); /* unread, or being waited out */
    assert_false(readable(fd));
    http_server_stop(s); /* ends the delay */
    close(fd);
}

static void a_connection_waiting_for_its_next_request_is_settled(void **state)
{
    (void)state;
    int fd;
    http_server *s = serving("/k", (http_step){.status = 200, .body = "ok\n"}, &fd);
    read_answer(fd);
    assert_true(settles_within_bound(s));
    send_request(fd, "/k");
    read_answer(fd);
    assert_true(settles_within_bound(s));
    assert_int_equal(http_server_count(s, "/k"), 2);
    close(fd);
    http_server_stop(s);
}

static void a_held_request_is_settled_and_never_answered(void **state)
{
    (void)state;
    int fd;
    http_server *s = serving("/h", (http_step){.hold = true}, &fd);
    assert_true(settles_within_bound(s));
    assert_int_equal(http_server_count(s, "/h"), 1);
    assert_false(readable(fd));
    http_server_stop(s); /* ends the hold: the connection closes unanswered */
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0);
    close(fd);
}

/* A held request is settled until the test releases it; then it is
 * answered as its step says. */
static void a_released_hold_is_answered(void **state)
{
    (void)state;
    int fd;
    http_server *s = serving("/r", (http_step){.status = 200, .hold = true, .body = "ok\n"}, &fd);
    assert_true(http_server_wait_held(s, 1));
    assert_true(http_server_settled(s));
    assert_false(readable(fd));
    http_server_release(s);
    read_answer(fd);
    assert_true(settles_within_bound(s));
    close(fd);
    http_server_stop(s);
}

/* A request at a closed gate waits on its clients, as a hold does; the
 * request that opens the gate releases it, and both are answered. */
static void a_request_at_a_closed_gate_is_settled_until_it_opens(void **state)
{
    (void)state;
    int first;
    http_server *s = serving("/g", (http_step){.status = 200, .gate = 2, .body = "ok\n"}, &first);
    assert_true(settles_within_bound(s));
    assert_int_equal(http_server_count(s, "/g"), 1);
    assert_false(readable(first));
    int second = connect_to(s);
    send_request(second, "/g");
    read_answer(second);
    read_answer(first);
    assert_int_equal(http_server_peak(s), 2);
    assert_true(settles_within_bound(s));
    close(first);
    close(second);
    http_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_server_without_connections_is_settled),
        cmocka_unit_test(a_request_waiting_out_its_delay_is_work),
        cmocka_unit_test(a_connection_waiting_for_its_next_request_is_settled),
        cmocka_unit_test(a_held_request_is_settled_and_never_answered),
        cmocka_unit_test(a_released_hold_is_answered),
        cmocka_unit_test(a_request_at_a_closed_gate_is_settled_until_it_opens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
