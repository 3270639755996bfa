/*
 * http_server.c — the scripted test HTTP server (see http_server.h).
 *
 * Plain sockets and one thread per connection: the server must be able to
 * misbehave on purpose (answer late, close without a word, reset), which a
 * real server library would not let it do, and a delay on one connection
 * must not stall the others. A delay waits on a condition variable, so
 * stopping the server ends every delay at once. Requests are read into one
 * fixed buffer per connection and answers are formatted on the stack, so
 * with recording off a request allocates nothing: the benchmark counts
 * allocations in every thread of the process, the server's included.
 *
 * A loop on virtual time asks whether the server has settled before it
 * moves its clock (http_server_settled), so a request must always be
 * visible somewhere: queued for accept, or listed (both under the lock);
 * unread in its socket, or taken by a thread that marked itself working
 * first; or answered, with the answer on its way or arrived. A delay is
 * work; only a hold, which waits for the test, and a closed gate, which
 * waits for more requests, leave the server settled. Both are one barrier
 * (wait_at), which comes down under the lock (the release, the peak
 * rising); from then on the requests it held count as work although their
 * threads have yet to wake (conn_active).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_server.h"
#include "../support/tcp_in_flight.h"

#define MAX_PATHS 512
#define MAX_STEPS 32
#define PATH_CAP 256
#define CONN_BUF (256 * 1024)
#define GATE_FALLBACK_MS 10000

typedef struct script {
    char path[PATH_CAP];
    http_step steps[MAX_STEPS]; /* strings owned (strdup) */
    size_t n, next;
} script;

typedef struct conn {
    struct conn *next;
    http_server *server;
    int fd;
    pthread_t thread;
    /* Working on input it took (from just before it reads until it next
     * waits for input, holds or ends): see http_server_settled(). */
    atomic_bool working;
    atomic_bool ended;
    /* At a gate or a hold (under the lock): see wait_at(). */
    bool waiting;
    size_t gate; /* the gate it waits at, or 0 for a hold */
} conn;

struct http_server {
    int listen_fd;
    int port;
    pthread_t accept_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled on stop and as the peak rises */
    bool stopping;
    bool released; /* http_server_release(): holds let go, now and from then on */
    unsigned held;  /* requests at a hold now */
    bool record;
    script scripts[MAX_PATHS];
    size_t nscripts;
    http_request *requests;
    size_t nrequests, cap_requests;
    conn *conns;
    size_t serving, peak; /* requests being answered now, and at most at once */
};

/* ---- scripts ------------------------------------------------------------- */

static char *dup_or_null(const char *s) { return s != NULL ? strdup(s) : NULL; }

static void free_steps(script *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        free((char *)sc->steps[i].retry_after);
        free((char *)sc->steps[i].body);
        free((char *)sc->steps[i].headers);
        free((char *)sc->steps[i].raw);
    }
    sc->n = sc->next = 0;
}

static script *find_script(http_server *s, const char *path, size_t len)
{
    for (size_t i = 0; i < s->nscripts; i++) {
        if (strlen(s->scripts[i].path) == len && memcmp(s->scripts[i].path, path, len) == 0)
            return &s->scripts[i];
    }
    return NULL;
}

void http_server_script(http_server *s, const char *path, const http_step *steps,
                        size_t n)
{
    pthread_mutex_lock(&s->mu);
    script *sc = find_script(s, path, strlen(path));
    if (sc == NULL && s->nscripts < MAX_PATHS) {
        sc = &s->scripts[s->nscripts++];
        snprintf(sc->path, sizeof sc->path, "%s", path);
    }
    if (sc != NULL) {
        free_steps(sc);
        for (size_t i = 0; i < n && i < MAX_STEPS; i++) {
            sc->steps[i] = steps[i];
            sc->steps[i].retry_after = dup_or_null(steps[i].retry_after);
            sc->steps[i].body = dup_or_null(steps[i].body);
            sc->steps[i].headers = dup_or_null(steps[i].headers);
            sc->steps[i].raw = dup_or_null(steps[i].raw);
        }
        sc->n = n < MAX_STEPS ? n : MAX_STEPS;
    }
    pthread_mutex_unlock(&s->mu);
}

/* The step for the next request to path[0..len), copied out under the lock
 * (strings stay valid: scripts are only replaced between tests). */
static http_step next_step(http_server *s, const char *path, size_t len)
{
    http_step step = {.status = 404, .body = "no script for this path\n"};
    pthread_mutex_lock(&s->mu);
    script *sc = find_script(s, path, len);
    if (sc != NULL && sc->n > 0) {
        step = sc->steps[sc->next];
        if (sc->next + 1 < sc->n)
            sc->next++;
    }
    pthread_mutex_unlock(&s->mu);
    return step;
}

/* ---- recording ------------------------------------------------------------ */

void http_server_record(http_server *s, bool on)
{
    pthread_mutex_lock(&s->mu);
    s->record = on;
    pthread_mutex_unlock(&s->mu);
}

static char *copy_text(const char *p, size_t n)
{
    char *t = malloc(n + 1);
    if (t != NULL) {
        memcpy(t, p, n);
        t[n] = '\0';
    }
    return t;
}

static void record_request(http_server *s, const http_request *r, const char *head,
                           size_t head_len, const char *body)
{
    pthread_mutex_lock(&s->mu);
    if (!s->record) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (s->nrequests == s->cap_requests) {
        size_t cap = s->cap_requests ? 2 * s->cap_requests : 64;
        http_request *grown = realloc(s->requests, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        s->requests = grown;
        s->cap_requests = cap;
    }
    http_request *rec = &s->requests[s->nrequests++];
    *rec = *r;
    rec->head = copy_text(head, head_len);
    rec->body = copy_text(body, r->body_len);
    pthread_mutex_unlock(&s->mu);
}

static bool path_matches(const http_request *r, const char *path)
{
    if (path == NULL)
        return true;
    size_t n = strcspn(r->target, "?");
    return strlen(path) == n && memcmp(r->target, path, n) == 0;
}

size_t http_server_count(http_server *s, const char *path)
{
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nrequests; i++)
        n += path_matches(&s->requests[i], path);
    pthread_mutex_unlock(&s->mu);
    return n;
}

const http_request *http_server_request(http_server *s, const char *path, size_t i)
{
    const http_request *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t k = 0; k < s->nrequests && found == NULL; k++) {
        if (path_matches(&s->requests[k], path) && i-- == 0)
            found = &s->requests[k];
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

/* Walk the header lines in head[0..len): calls `fn` for each line whose
 * name is `name`, with its trimmed value; stops when fn returns false. */
static void each_header(const char *head, size_t len, const char *name,
                        bool (*fn)(const char *v, size_t n, void *ud), void *ud)
{
    size_t name_len = strlen(name);
    const char *p = head, *stop = head + len;
    while (p < stop) {
        const char *eol = memmem(p, (size_t)(stop - p), "\r\n", 2);
        const char *end = eol != NULL ? eol : stop;
        size_t line = (size_t)(end - p);
        if (line > name_len && p[name_len] == ':' && strncasecmp(p, name, name_len) == 0) {
            const char *v = p + name_len + 1;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
            if (!fn(v, (size_t)(end - v), ud))
                return;
        }
        p = eol != NULL ? eol + 2 : stop;
    }
}

typedef struct value_out {
    char *buf;
    size_t cap;
    bool found;
} value_out;

static bool take_value(const char *v, size_t n, void *ud)
{
    value_out *o = ud;
    if (o->cap > 0) {
        size_t k = n < o->cap - 1 ? n : o->cap - 1;
        memcpy(o->buf, v, k);
        o->buf[k] = '\0';
    }
    o->found = true;
    return false;
}

bool http_request_header(const http_request *r, const char *name, char *buf, size_t cap)
{
    value_out o = {buf, cap, false};
    each_header(r->head, strlen(r->head), name, take_value, &o);
    return o.found;
}

static bool count_value(const char *v, size_t n, void *ud)
{
    (void)v;
    (void)n;
    (*(int *)ud)++;
    return true;
}

int http_request_header_count(const http_request *r, const char *name)
{
    int n = 0;
    each_header(r->head, strlen(r->head), name, count_value, &n);
    return n;
}

/* ---- one connection ------------------------------------------------------- */

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* The CLOCK_MONOTONIC time ms from now. */
static struct timespec in_ms(int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

/* Wait ms, or less if the server stops: false when stopping. */
static bool delay(http_server *s, int ms)
{
    struct timespec until = in_ms(ms);
    pthread_mutex_lock(&s->mu);
    while (!s->stopping && ms > 0 &&
           pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT) {
    }
    bool go_on = !s->stopping;
    pthread_mutex_unlock(&s->mu);
    return go_on;
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
    }
}

/* Answer one request; false when the connection must end. */
static bool answer(int fd, const http_step *st, bool head_only, bool close_after)
{
    if (st->raw != NULL) {
        write_all(fd, st->raw, strlen(st->raw));
        return false;
    }
    if (st->status == HTTP_RESET) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        return false;
    }
    if (st->status == HTTP_DROP)
        return false;
    char dflt[16], head[2048];
    const char *body = st->body;
    if (body == NULL) {
        snprintf(dflt, sizeof dflt, "%d\n", st->status);
        body = dflt;
    }
    size_t body_len = strlen(body);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.%d %d %s\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n%s%s%s%s%s\r\n",
                     st->http10 ? 0 : 1, st->status, reason_phrase(st->status),
                     body_len + (st->partial ? 100 : 0),
                     st->retry_after != NULL ? "Retry-After: " : "",
                     st->retry_after != NULL ? st->retry_after : "",
                     st->retry_after != NULL ? "\r\n" : "",
                     st->headers != NULL ? st->headers : "",
                     close_after ? "Connection: close\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof head)
        return false;
    if (!write_all(fd, head, (size_t)n))
        return false;
    if (!head_only && !write_all(fd, body, body_len))
        return false;
    return !st->partial && !close_after;
}

static const char *find_head_end(const char *buf, size_t len)
{
    const char *p = memmem(buf, len, "\r\n\r\n", 4);
    return p != NULL ? p + 4 : NULL;
}

/* A header's value from head[0..len) into buf (cut to fit); false if absent. */
static bool head_value(const char *head, size_t len, const char *name, char *buf,
                       size_t cap)
{
    value_out o = {buf, cap, false};
    each_header(head, len, name, take_value, &o);
    return o.found;
}

/* Parse the request line and headers of buf[0..head_len): false if malformed. */
static bool parse_head(const char *buf, size_t head_len, http_request *r,
                       const char **headers, size_t *content_length, bool *expect,
                       bool *close_after)
{
    const char *eol = memmem(buf, head_len, "\r\n", 2);
    if (eol == NULL || sscanf(buf, "%15s %255s", r->method, r->target) != 2)
        return false;
    *headers = eol + 2;
    size_t len = head_len - (size_t)(*headers - buf);
    char v[64];
    *content_length = head_value(*headers, len, "Content-Length", v, sizeof v)
                          ? strtoul(v, NULL, 10)
                          : 0;
    *expect = head_value(*headers, len, "Expect", v, sizeof v) &&
              strcasecmp(v, "100-continue") == 0;
    *close_after = head_value(*headers, len, "Connection", v, sizeof v) &&
                   strcasecmp(v, "close") == 0;
    return true;
}

/* Wait for the client's next bytes (or the end), idle meanwhile, and be
 * working again before taking any: the input is never out of the socket
 * without the connection counting as working. */
static void await_input(conn *c)
{
    atomic_store(&c->working, false);
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    atomic_store(&c->working, true);
}

static bool read_more(conn *c, char *buf, size_t *len)
{
    if (*len >= CONN_BUF - 1)
        return false;
    await_input(c);
    ssize_t n;
    do
        n = recv(c->fd, buf + *len, CONN_BUF - 1 - *len, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return false;
    *len += (size_t)n;
    buf[*len] = '\0';
    return true;
}

/* A request's answer begins (+1) or ends (-1). A new peak may open gates. */
static void serving(http_server *s, int d)
{
    pthread_mutex_lock(&s->mu);
    s->serving = d > 0 ? s->serving + 1 : s->serving - 1;
    if (s->serving > s->peak) {
        s->peak = s->serving;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

size_t http_server_peak(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->peak;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void http_server_release(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->released = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

bool http_server_wait_held(http_server *s, unsigned n)
{
    struct timespec until = in_ms(GATE_FALLBACK_MS);
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (s->held < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
    bool reached = s->held >= n;
    pthread_mutex_unlock(&s->mu);
    return reached;
}

/* Has what the request waits at come down: its gate (gate > 0) once the
 * peak reaches it, a hold once the server is released? Under the lock. */
static bool barrier_down(const http_server *s, const conn *c)
{
    return c->gate > 0 ? s->peak >= c->gate : s->released;
}

/* Wait at a gate (gate > 0) or a hold (0) until it comes down, not working
 * meanwhile; a gate opens anyway after GATE_FALLBACK_MS. False when the
 * server stops first. The flag and the wait change together under the
 * lock, so http_server_settled() sees the request either working or
 * waiting; it counts as working again from the moment the barrier comes
 * down, although its thread may not have woken yet (conn_active). */
static bool wait_at(conn *c, int gate)
{
    http_server *s = c->server;
    struct timespec until = in_ms(GATE_FALLBACK_MS);
    pthread_mutex_lock(&s->mu);
    c->waiting = true;
    c->gate = (size_t)gate;
    atomic_store(&c->working, false);
    s->held += gate == 0;
    pthread_cond_broadcast(&s->cv);
    int rc = 0;
    while (!s->stopping && !barrier_down(s, c) && rc != ETIMEDOUT)
        rc = gate > 0 ? pthread_cond_timedwait(&s->cv, &s->mu, &until)
                      : pthread_cond_wait(&s->cv, &s->mu);
    s->held -= gate == 0;
    c->waiting = false;
    c->gate = 0;
    atomic_store(&c->working, true);
    bool go_on = !s->stopping;
    pthread_mutex_unlock(&s->mu);
    return go_on;
}

/* Act on a step: gate, then hold, or delay and answer; false when the
 * connection must end. */
static bool act(conn *c, const http_step *st, bool head_only, bool close_after)
{
    if (st->gate > 0 && !wait_at(c, st->gate))
        return false;
    if (st->hold && !wait_at(c, 0))
        return false;
    return (st->delay_ms <= 0 || delay(c->server, st->delay_ms)) &&
           answer(c->fd, st, head_only, close_after);
}

/* Serve one request from the buffer; false when the connection ends. */
static bool serve_one(conn *c, char *buf, size_t *len)
{
    http_server *s = c->server;
    int fd = c->fd;
    const char *end;
    while ((end = find_head_end(buf, *len)) == NULL) {
        if (!read_more(c, buf, len))
            return false;
    }
    size_t head_len = (size_t)(end - buf);
    http_request r;
    memset(&r, 0, sizeof r);
    const char *headers;
    size_t clen;
    bool expect, close_after;
    if (!parse_head(buf, head_len, &r, &headers, &clen, &expect, &close_after))
        return false;
    if (clen > CONN_BUF - 1 - head_len)
        return false;
    if (expect && *len == head_len &&
        !write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
        return false;
    while (*len < head_len + clen) {
        if (!read_more(c, buf, len))
            return false;
    }
    r.body_len = clen;
    struct sockaddr_in peer;
    socklen_t peer_len = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &peer_len) == 0)
        r.client_port = ntohs(peer.sin_port);
    record_request(s, &r, headers, (size_t)(end - 2 - headers), end);
    http_step st = next_step(s, r.target, strcspn(r.target, "?"));
    serving(s, 1);
    bool keep = act(c, &st, strcmp(r.method, "HEAD") == 0, close_after);
    serving(s, -1);
    if (!keep)
        return false;
    size_t used = head_len + clen;
    memmove(buf, buf + used, *len - used);
    *len -= used;
    buf[*len] = '\0';
    return keep;
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    char *buf = malloc(CONN_BUF);
    size_t len = 0;
    if (buf != NULL) {
        buf[0] = '\0';
        while (serve_one(c, buf, &len)) {
        }
    }
    free(buf);
    shutdown(c->fd, SHUT_RDWR);
    atomic_store(&c->ended, true);
    return NULL;
}

/* ---- the server ----------------------------------------------------------- */

/* Wait until a connection is queued (or the listener is shut down). */
static bool await_connection(http_server *s)
{
    struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, -1)) < 0 && errno == EINTR) {
    }
    return n > 0 && (p.revents & POLLIN) != 0;
}

/* Take one queued connection into the list, under the lock, so that
 * http_server_settled() sees it either queued or listed, never between;
 * NULL when there was none (or no memory for it), with *fatal set when
 * the listener cannot accept any more (out of descriptors). */
static conn *take_connection(http_server *s, bool *fatal)
{
    pthread_mutex_lock(&s->mu);
    int fd = s->stopping ? -1 : accept(s->listen_fd, NULL, NULL);
    *fatal = fd < 0 && !s->stopping && errno != EAGAIN && errno != EINTR &&
             errno != ECONNABORTED;
    conn *c = fd >= 0 ? calloc(1, sizeof *c) : NULL;
    if (c != NULL) {
        c->server = s;
        c->fd = fd;
        c->next = s->conns;
        s->conns = c;
    } else if (fd >= 0) {
        close(fd);
    }
    pthread_mutex_unlock(&s->mu);
    return c;
}

static void drop_connection(http_server *s, conn *c)
{
    pthread_mutex_lock(&s->mu);
    conn **p = &s->conns;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    pthread_mutex_unlock(&s->mu);
    close(c->fd);
    free(c);
}

static void *accept_main(void *arg)
{
    http_server *s = arg;
    bool fatal = false;
    while (!fatal && await_connection(s)) {
        conn *c = take_connection(s, &fatal);
        if (c == NULL)
            continue;
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pthread_create(&c->thread, NULL, conn_main, c) != 0)
            drop_connection(s, c);
    }
    return NULL; /* the listening socket was shut down */
}

/* ---- settled -------------------------------------------------------------- */

/* A connection with something of its own to do: input it has not taken,
 * input it is working on (a request at an open gate included: its thread
 * may not have woken yet), or bytes it sent still on their way to the
 * client (tcp_in_flight.h). Called under the lock. The input is looked at
 * before the flag: the thread becomes working before it takes any, and
 * nothing new arrives while the caller (the client's loop) is asking. A
 * connection whose thread has ended takes no more input, but its last
 * bytes and its FIN may still be on the way. */
static bool conn_active(const http_server *s, conn *c)
{
    if (c->waiting && barrier_down(s, c))
        return true;
    if (!atomic_load(&c->ended)) {
        int unread = 0;
        if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0)
            return true;
        if (atomic_load(&c->working))
            return true;
    }
    return tcp_in_flight(c->fd);
}

static bool connection_queued(const http_server *s)
{
    struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

bool http_server_settled(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    bool settled = !connection_queued(s);
    for (conn *c = s->conns; settled && c != NULL; c = c->next)
        settled = !conn_active(s, c);
    pthread_mutex_unlock(&s->mu);
    return settled;
}

static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

http_server *http_server_start(void)
{
    http_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->record = true;
    s->listen_fd = listen_loopback(&s->port);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&s->mu, NULL);
    if (s->listen_fd < 0 || pthread_create(&s->accept_thread, NULL, accept_main, s) != 0) {
        if (s->listen_fd >= 0)
            close(s->listen_fd);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void http_server_stop(http_server *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    for (conn *c = s->conns; c != NULL; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->mu);
    shutdown(s->listen_fd, SHUT_RDWR);
    pthread_join(s->accept_thread, NULL);
    close(s->listen_fd);
    /* No connection is added once stopping is set and accept has ended. */
    for (conn *c = s->conns, *next; c != NULL; c = next) {
        next = c->next;
        pthread_join(c->thread, NULL);
        close(c->fd);
        free(c);
    }
    for (size_t i = 0; i < s->nscripts; i++)
        free_steps(&s->scripts[i]);
    for (size_t i = 0; i < s->nrequests; i++) {
        free(s->requests[i].head);
        free(s->requests[i].body);
    }
    free(s->requests);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int http_server_port(const http_server *s) { return s->port; }

void http_server_url(const http_server *s, const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "http://127.0.0.1:%d%s", s->port, path);
}
