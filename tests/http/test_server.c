/*
 * test_server.c — the scripted test server's own promise to the virtual
 * loop: http_server_settled() is false while the server has work of its
 * own (a request it has not answered, a delay it is waiting out) and true
 * once whatever it does next waits on its client (idle, holding, or at a
 * gate still closed).
 *
 * The client here is a plain blocking socket. Before asking, it waits
 * until the server's end has acknowledged every byte it sent, which is the
 * client's own part of the bargain (virtual_loop.c checks its sockets the
 * same way). Becoming settled after an answer may wait on the client's
 * delayed acknowledgement, so those checks poll, within a bound far above
 * it; being unsettled is asserted at once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http_server.h"
#include "../support/tcp_in_flight.h"

#define SETTLE_BOUND_MS 5000

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

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Every byte sent on fd acknowledged by the other end. */
static void await_delivered(int fd)
{
    for (int waited = 0; waited < SETTLE_BOUND_MS && tcp_in_flight(fd); waited++)
        sleep_ms(1);
    assert_false(tcp_in_flight(fd));
}

static void send_request(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    assert_int_equal(send(fd, req, (size_t)n, 0), n);
    await_delivered(fd);
}

static bool settles_within_bound(http_server *s)
{
    for (int waited = 0; waited < SETTLE_BOUND_MS; waited++) {
        if (http_server_settled(s))
            return true;
        sleep_ms(1);
    }
    return false;
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
    http_server *s = http_server_start();
    http_step step = {.status = 200, .delay_ms = 30000, .body = "ok\n"};
    http_server_script(s, "/d", &step, 1);
    int fd = connect_to(s);
    send_request(fd, "/d");
    assert_false(http_server_settled(s)); /* unread, or being waited out */
    assert_false(readable(fd));
    http_server_stop(s); /* ends the delay */
    close(fd);
}

static void a_connection_waiting_for_its_next_request_is_settled(void **state)
{
    (void)state;
    http_server *s = http_server_start();
    http_step step = {.status = 200, .body = "ok\n"};
    http_server_script(s, "/k", &step, 1);
    int fd = connect_to(s);
    send_request(fd, "/k");
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
    http_server *s = http_server_start();
    http_step step = {.hold = true};
    http_server_script(s, "/h", &step, 1);
    int fd = connect_to(s);
    send_request(fd, "/h");
    assert_true(settles_within_bound(s));
    assert_int_equal(http_server_count(s, "/h"), 1);
    assert_false(readable(fd));
    http_server_stop(s); /* ends the hold: the connection closes unanswered */
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0);
    close(fd);
}

/* A request at a closed gate waits on its clients, as a hold does; the
 * request that opens the gate releases it, and both are answered. */
static void a_request_at_a_closed_gate_is_settled_until_it_opens(void **state)
{
    (void)state;
    http_server *s = http_server_start();
    http_step step = {.status = 200, .gate = 2, .body = "ok\n"};
    http_server_script(s, "/g", &step, 1);
    int first = connect_to(s);
    send_request(first, "/g");
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
        cmocka_unit_test(a_request_at_a_closed_gate_is_settled_until_it_opens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
