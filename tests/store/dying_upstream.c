/*
 * dying_upstream.c — the upstream whose connection dies with a request on
 * it (see dying_upstream.h).
 *
 * Just enough HTTP/1.1 for what libcurl sends the gateway's upstream: a
 * head ended by a blank line, then Content-Length bytes of body (the
 * gateway always sends one; no chunked bodies, no Expect). A request is
 * counted once it is read in full, under the mutex, so "the upstream saw
 * it once" is exact.
 */
#include "dying_upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 32
#define MAX_KEYS 32
#define BUF_CAP 65536

typedef struct conn {
    struct dying_upstream *u;
    int fd; /* -1 once closed; guarded by u->mu */
    pthread_t thread;
} conn;

struct dying_upstream {
    int listen_fd;
    bool listening; /* guarded by mu */
    char url[64];
    unsigned drop_at;
    dying_after after;
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t closed_cv; /* a connection was closed */
    unsigned closed;
    unsigned requests;
    conn conns[MAX_CONNS];
    size_t n_conns;
    char keys[MAX_KEYS][256];
    unsigned key_n[MAX_KEYS];
    size_t n_keys;
};

/* ---- one request ---------------------------------------------------------- */

/* The value of header `name` in head[0..len) into out; false if absent. */
static bool header_value(const char *head, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line != NULL;
         line = strstr(line + 2, "\r\n")) {
        const char *p = line + 2;
        if (strncasecmp(p, name, n) != 0 || p[n] != ':')
            continue;
        p += n + 1;
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, "\r");
        snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), p);
        return true;
    }
    return false;
}

/* Count one request in full; its number. Under no lock. */
static unsigned count(dying_upstream *u, const char *head)
{
    char key[256];
    bool has_key = header_value(head, "Idempotency-Key", key, sizeof key);
    pthread_mutex_lock(&u->mu);
    unsigned n = ++u->requests;
    size_t i = 0;
    while (has_key && i < u->n_keys && strcmp(u->keys[i], key) != 0)
        i++;
    if (has_key && i == u->n_keys && i < MAX_KEYS)
        snprintf(u->keys[u->n_keys++], sizeof u->keys[0], "%s", key);
    if (has_key && i < u->n_keys)
        u->key_n[i]++;
    pthread_mutex_unlock(&u->mu);
    return n;
}

/* Read one whole request into buf (which may hold the start of it); its
 * length, or 0 when the connection ended first. */
static size_t read_request(int fd, char *buf, size_t *len, char *head, size_t head_cap)
{
    char *end;
    while ((buf[*len] = '\0', end = strstr(buf, "\r\n\r\n")) == NULL) {
        if (*len >= BUF_CAP - 1)
            return 0;
        ssize_t n = recv(fd, buf + *len, BUF_CAP - 1 - *len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        *len += (size_t)n;
    }
    size_t head_len = (size_t)(end + 4 - buf);
    snprintf(head, head_cap, "%.*s", (int)head_len, buf);
    char v[32];
    size_t body = header_value(head, "Content-Length", v, sizeof v) ? strtoul(v, NULL, 10) : 0;
    if (head_len + body > BUF_CAP - 1)
        return 0;
    while (*len < head_len + body) {
        ssize_t n = recv(fd, buf + *len, BUF_CAP - 1 - *len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        *len += (size_t)n;
    }
    return head_len + body;
}

static bool send_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static bool answer(int fd, const char *head, unsigned n)
{
    bool post = strncmp(head, "POST ", 5) == 0;
    char body[32], out[256];
    int body_len = snprintf(body, sizeof body, "{\"n\":%u}", n);
    int len = snprintf(out, sizeof out,
                       "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\n\r\n%s",
                       post ? "201 Created" : "200 OK", body_len, body);
    return send_all(fd, out, (size_t)len);
}

/* ---- connections ------------------------------------------------------------ */

static void stop_listening(dying_upstream *u)
{
    pthread_mutex_lock(&u->mu);
    if (u->listening)
        shutdown(u->listen_fd, SHUT_RDWR); /* refuses new connections, ends accept() */
    u->listening = false;
    pthread_mutex_unlock(&u->mu);
}

static void close_conn(conn *c)
{
    pthread_mutex_lock(&c->u->mu);
    close(c->fd);
    c->fd = -1;
    c->u->closed++;
    pthread_cond_broadcast(&c->u->closed_cv);
    pthread_mutex_unlock(&c->u->mu);
}

static void *serve(void *arg)
{
    conn *c = arg;
    dying_upstream *u = c->u;
    char *buf = malloc(BUF_CAP), head[8192];
    size_t len = 0, used;
    while (buf != NULL && (used = read_request(c->fd, buf, &len, head, sizeof head)) > 0) {
        unsigned n = count(u, head);
        if (n == u->drop_at && u->after == DYING_AFTER_ANSWERING) {
            answer(c->fd, head, n);
            break; /* closed below, idle */
        }
        if (n == u->drop_at) {
            if (u->after == DYING_STOPS_LISTENING)
                stop_listening(u);
            break; /* closed below, without an answer */
        }
        if (!answer(c->fd, head, n))
            break;
        memmove(buf, buf + used, len - used);
        len -= used;
    }
    free(buf);
    close_conn(c);
    return NULL;
}

static void *acceptor(void *arg)
{
    dying_upstream *u = arg;
    for (;;) {
        int fd = accept(u->listen_fd, NULL, NULL);
        if (fd < 0 && errno == EINTR)
            continue;
        if (fd < 0)
            return NULL; /* shut down */
        pthread_mutex_lock(&u->mu);
        conn *c = u->n_conns < MAX_CONNS ? &u->conns[u->n_conns] : NULL;
        if (c != NULL) {
            *c = (conn){.u = u, .fd = fd};
            if (pthread_create(&c->thread, NULL, serve, c) == 0)
                u->n_conns++;
            else
                c = NULL;
        }
        pthread_mutex_unlock(&u->mu);
        if (c == NULL)
            close(fd);
    }
}

/* ---- the server ----------------------------------------------------------- */

dying_upstream *dying_upstream_start(unsigned drop_at, dying_after after)
{
    dying_upstream *u = calloc(1, sizeof *u);
    if (u == NULL)
        return NULL;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->closed_cv, NULL);
    u->drop_at = drop_at;
    u->after = after;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    u->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (u->listen_fd < 0 || bind(u->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(u->listen_fd, 16) != 0 ||
        getsockname(u->listen_fd, (struct sockaddr *)&a, &alen) != 0)
        goto fail;
    snprintf(u->url, sizeof u->url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    u->listening = true;
    if (pthread_create(&u->acceptor, NULL, acceptor, u) != 0)
        goto fail;
    return u;
fail:
    if (u->listen_fd >= 0)
        close(u->listen_fd);
    pthread_cond_destroy(&u->closed_cv);
    pthread_mutex_destroy(&u->mu);
    free(u);
    return NULL;
}

void dying_upstream_stop(dying_upstream *u)
{
    if (u == NULL)
        return;
    stop_listening(u);
    pthread_join(u->acceptor, NULL);
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_conns; i++) {
        if (u->conns[i].fd >= 0)
            shutdown(u->conns[i].fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&u->mu);
    for (size_t i = 0; i < u->n_conns; i++)
        pthread_join(u->conns[i].thread, NULL);
    close(u->listen_fd);
    pthread_cond_destroy(&u->closed_cv);
    pthread_mutex_destroy(&u->mu);
    free(u);
}

void dying_upstream_wait_closed(dying_upstream *u, unsigned n)
{
    pthread_mutex_lock(&u->mu);
    while (u->closed < n)
        pthread_cond_wait(&u->closed_cv, &u->mu);
    pthread_mutex_unlock(&u->mu);
}

const char *dying_upstream_url(const dying_upstream *u) { return u->url; }

unsigned dying_upstream_requests(dying_upstream *u)
{
    pthread_mutex_lock(&u->mu);
    unsigned n = u->requests;
    pthread_mutex_unlock(&u->mu);
    return n;
}

unsigned dying_upstream_key_requests(dying_upstream *u, const char *key)
{
    unsigned n = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_keys; i++) {
        if (strcmp(u->keys[i], key) == 0)
            n = u->key_n[i];
    }
    pthread_mutex_unlock(&u->mu);
    return n;
}
