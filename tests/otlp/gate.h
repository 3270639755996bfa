/*
 * gate.h — a closed door in front of the loopback receiver: a TCP relay on
 * 127.0.0.1 that accepts connections and holds each one, unanswered and
 * unforwarded, until the test opens the gate; from then on every
 * connection is relayed to the receiver byte for byte, both ways.
 *
 * The scripted receiver (tests/http/http_server) can delay an answer or
 * hold it until it stops, but a test that needs an export in flight for
 * as long as it likes, and then answered, needs a hold it can release:
 * "the receiver is slow" becomes a state the test sets, not a duration it
 * hopes the machine keeps to. Header-only (static inline), for the tests
 * here.
 */
#ifndef RESIL_TEST_OTLP_GATE_H
#define RESIL_TEST_OTLP_GATE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define GATE_MAX_CONNECTIONS 16

typedef struct gate gate;

typedef struct gate_conn {
    gate *g;
    int fd;
    pthread_t thread;
} gate_conn;

struct gate {
    int listener, port, target_port;
    int stop[2]; /* a pipe: readable once the gate stops, for every poller */
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* held, open or stopping changed */
    unsigned held;
    bool open, stopping;
    gate_conn conns[GATE_MAX_CONNECTIONS];
    size_t n_conns;
};

/* Wait until the gate opens (true) or stops (false), counted as held. */
static inline bool gate_pass(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->held++;
    pthread_cond_broadcast(&g->changed);
    while (!g->open && !g->stopping)
        pthread_cond_wait(&g->changed, &g->mu);
    g->held--;
    bool open = !g->stopping;
    pthread_mutex_unlock(&g->mu);
    return open;
}

static inline int gate_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Move what is readable on `from` to `to`; false at the end of either. */
static inline bool gate_move(int from, int to)
{
    char buf[16384];
    ssize_t n = recv(from, buf, sizeof buf, 0);
    for (ssize_t off = 0; n > 0 && off < n;) {
        ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        off += w;
    }
    return n > 0;
}

static inline void *gate_relay(void *arg)
{
    gate_conn *c = arg;
    int up = gate_pass(c->g) ? gate_connect(c->g->target_port) : -1;
    while (up >= 0) {
        struct pollfd p[3] = {{.fd = c->fd, .events = POLLIN},
                              {.fd = up, .events = POLLIN},
                              {.fd = c->g->stop[0], .events = POLLIN}};
        if (poll(p, 3, -1) < 0 || p[2].revents != 0)
            break;
        if ((p[0].revents != 0 && !gate_move(c->fd, up)) ||
            (p[1].revents != 0 && !gate_move(up, c->fd)))
            break;
    }
    if (up >= 0)
        close(up);
    close(c->fd);
    return NULL;
}

static inline void *gate_accept(void *arg)
{
    gate *g = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = g->listener, .events = POLLIN},
                              {.fd = g->stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 || p[1].revents != 0)
            return NULL;
        int fd = accept(g->listener, NULL, NULL);
        if (fd < 0)
            continue;
        if (g->n_conns == GATE_MAX_CONNECTIONS) {
            close(fd);
            continue;
        }
        gate_conn *c = &g->conns[g->n_conns];
        *c = (gate_conn){.g = g, .fd = fd};
        if (pthread_create(&c->thread, NULL, gate_relay, c) != 0) {
            close(fd);
            continue;
        }
        g->n_conns++;
    }
}

static inline int gate_listen(gate *g)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    g->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (g->listener < 0 || bind(g->listener, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(g->listener, 16) != 0 ||
        getsockname(g->listener, (struct sockaddr *)&a, &len) != 0)
        return -1;
    g->port = ntohs(a.sin_port);
    return 0;
}

/* A closed gate in front of 127.0.0.1:target_port; NULL on failure. */
static inline gate *gate_start(int target_port)
{
    gate *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    *g = (gate){.listener = -1, .target_port = target_port, .stop = {-1, -1}};
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->changed, NULL);
    if (pipe(g->stop) == 0 && gate_listen(g) == 0 &&
        pthread_create(&g->acceptor, NULL, gate_accept, g) == 0)
        return g;
    int fds[] = {g->listener, g->stop[0], g->stop[1]};
    for (size_t i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    pthread_cond_destroy(&g->changed);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return NULL;
}

static inline int gate_port(const gate *g) { return g->port; }

/* Wait until n connections are held at once; false after 10 s. */
static inline bool gate_wait_held(gate *g, unsigned n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    while (g->held < n && rc == 0)
        rc = pthread_cond_timedwait(&g->changed, &g->mu, &until);
    bool reached = g->held >= n;
    pthread_mutex_unlock(&g->mu);
    return reached;
}

/* Let every held connection through, and every one from now on. */
static inline void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->mu);
}

/* Close every connection, join the threads, free. NULL: nothing. */
static inline void gate_stop(gate *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    g->stopping = true;
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->mu);
    if (write(g->stop[1], "x", 1) != 1)
        abort(); /* the threads would never see the stop */
    pthread_join(g->acceptor, NULL);
    for (size_t i = 0; i < g->n_conns; i++)
        pthread_join(g->conns[i].thread, NULL);
    close(g->listener);
    close(g->stop[0]);
    close(g->stop[1]);
    pthread_cond_destroy(&g->changed);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

#endif
