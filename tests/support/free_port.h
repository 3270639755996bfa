/*
 * free_port.h — a loopback TCP port nothing listens on right now, for the
 * test servers (PostgreSQL, Redis, Prometheus) that start a real process.
 * Header-only because those servers are also built for the benchmark, which
 * does not link resil_test_support (it needs cmocka). The port can be taken
 * by someone else before the server binds it: callers retry on a new one.
 */
#ifndef RESIL_TEST_FREE_PORT_H
#define RESIL_TEST_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* -1 when no socket could be bound. */
static inline int test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

#endif
