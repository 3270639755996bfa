/*
 * gateway_http.c — the listening side of `resil gateway`: the front door
 * (what a request must be before anything acts on it), the connections'
 * deadlines, the loop and the store workers, and each answer. The
 * idempotency rules applied to a guarded request are in gateway_rules.c.
 *
 * One event loop does everything that does not block. It is a libuv loop
 * hosting resil's loop interface (resil/uv.h) on a thread of its own:
 * libmicrohttpd runs in its external epoll mode, its epoll descriptor
 * watched by the loop (MHD_run() when it is ready, and a loop timer for the
 * timeout MHD asks for), and the upstream calls run on the same loop
 * through curl's multi interface (gateway_upstream.c). Thousands of idle or
 * slow clients therefore cost file descriptors, not threads, and a
 * pass-through request — read, forwarded, answered — never leaves the
 * loop's thread: no handoff, no wake-up of another thread.
 *
 * The idempotency store's key writes do not block the loop: they are
 * submitted in their asynchronous form, and the store's thread that ran
 * the batch posts the result to the request's loop (gw_store_enter,
 * gw_store_back). What blocks runs on a small pool of workers (--workers):
 * the fleet's Redis permits, and the store's calls when batching is off. A
 * request that waits on either is parked (its connection suspended); a
 * worker's job carries the step to run there and the step to run next on
 * the loop, and every result comes back through the loop's post queue:
 * one wake of the loop for however many results are waiting. At stop,
 * nothing more is submitted, and the asynchronous calls in flight are
 * waited for while the loops still run, so that the store never calls
 * back into a request its loop has closed (nor does resil_store_free(),
 * later, find one queued).
 *
 * libmicrohttpd's own timeout restarts with every byte, so a client that
 * dribbles a byte every few seconds would be kept forever. Each connection
 * therefore carries a deadline of its own: its request's line and headers
 * within --header-timeout of the connection opening (or of its previous
 * answer), its body within --body-timeout of its headers. A loop timer
 * answers 408 to a connection past its deadline and shuts its socket down;
 * libmicrohttpd then sees it end and closes it as any other. A parked
 * connection, or one whose answer is being sent, has no such deadline.
 *
 * Every request is counted in flight from its first line to its last byte,
 * which is what lets SIGTERM wait for exactly the work that is under way.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <semaphore.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway.h"
#include "resil/uv.h"

/* ---- connections and their deadlines ----------------------------------------- */

typedef enum gw_phase {
    PHASE_HEADERS,   /* waiting for a request line and headers */
    PHASE_BODY,      /* headers in, reading the body */
    PHASE_BUSY,      /* parked: its work runs */
    PHASE_ANSWERING, /* an answer is queued or being sent */
    PHASE_CUT,       /* past its deadline: being shut down */
    PHASE_REFUSED    /* past the per-client limit: being shut down, never counted */
} gw_phase;

typedef struct gw_conn {
    struct gw_conn *prev, *next;
    int fd;
    gw_phase phase;
    resil_instant deadline;
    struct gw_client *client; /* its address's count of connections */
    char ip[GW_IP_TEXT];      /* the client's address as text once asked, or "" */
} gw_conn;

/* Connections open from one client address, across every loop. */
typedef struct gw_client {
    struct gw_client *next;
    unsigned char addr[16];
    size_t addr_len;
    unsigned open;
} gw_client;

#define CLIENT_BUCKETS 1024

/* A store worker. An idle one waits on its own semaphore, so that handing
 * it a job wakes exactly it: one futex wake, and no worker woken for a job
 * another took, nor contending for the queue's lock on its way back. */
typedef struct gw_worker {
    struct gw_http *h;
    pthread_t thread;
    sem_t go;            /* posted with `job` set, or NULL: stop */
    gw_req *job;
    struct gw_worker *next_idle;
} gw_worker;

/* One event loop on a thread of its own: a listening socket, the daemon
 * serving the connections accepted there, and a curl multi handle for
 * their upstream calls. Everything here is its thread's alone. */
typedef struct gw_loop {
    struct gw_http *h;
    uv_loop_t uv;
    resil_uv *ru;
    resil_loop *loop;
    struct MHD_Daemon *daemon;
    struct gw_upstream *upstream;
    resil_io mhd_io;        /* libmicrohttpd's epoll descriptor */
    resil_timer mhd_timer;  /* the timeout libmicrohttpd asks for */
    resil_timer sweep;      /* the connections' deadlines */
    gw_conn conns;          /* list sentinel: every open connection */
    unsigned parked;        /* connections suspended */
    gw_req *resume;         /* answered, to be resumed (through next_resume) */
    gw_req *chaos_waits;    /* requests waiting out an injected latency */
    int listen_fd;          /* -1 once closed */
    bool quiesced;          /* the daemon handed the listening socket back */
    resil_work quiesce, stop;
    pthread_t thread;
    bool running;           /* the thread was started (and is to be joined) */
} gw_loop;

typedef struct gw_http {
    gateway *gw;
    gw_loop *loops;
    unsigned n_loops;
    bool ipv6;
    /* start-up: each loop thread says whether it runs */
    pthread_mutex_t start_mu;
    pthread_cond_t started;
    int start_rc;
    unsigned start_done;
    /* --max-connections-per-client, across the loops */
    pthread_mutex_t clients_mu;
    gw_client *clients[CLIENT_BUCKETS];
    /* the store workers */
    pthread_mutex_t mu;
    gw_req *jobs_head, *jobs_tail; /* jobs no idle worker was there for */
    gw_worker *idle;         /* workers waiting for a job */
    bool stopping;
    unsigned store_calls;     /* asynchronous store calls not yet handed back */
    pthread_cond_t store_idle; /* signalled when store_calls drops to 0 */
    gw_worker *workers;
    unsigned n_workers;
    pthread_mutex_t log_mu;  /* libmicrohttpd's messages, at most one a second */
    resil_instant log_last;
    unsigned log_dropped;
} gw_http;

/* Move a connection to another phase, with the deadline that phase has.
 * On the loop. */
static void set_phase(gw_http *h, gw_conn *c, gw_phase phase)
{
    if (c == NULL || c->phase == PHASE_CUT || c->phase == PHASE_REFUSED)
        return;
    const gw_config *cfg = &h->gw->cfg;
    c->phase = phase;
    if (phase != PHASE_HEADERS && phase != PHASE_BODY) {
        c->deadline = 0; /* none: the clock is not read */
        return;
    }
    resil_instant now = resil_clock_now(h->gw->clock);
    c->deadline = now + (phase == PHASE_HEADERS ? cfg->header_timeout : cfg->body_timeout);
}

/* ---- the per-client limit, across the loops ----------------------------------- */
/*
 * Each loop's daemon counts only its own connections, and the kernel
 * spreads one client's connections over every loop's listening socket, so
 * --max-connections-per-client is counted here, over all of them: a
 * connection past it is shut down at once, unanswered, as libmicrohttpd
 * closes one past its own per-address limit. (--max-connections is shared
 * out among the daemons instead — start_daemon() — so that a connection
 * past it waits in the listen queue, as with one loop.)
 */

/* The address's bytes (4 or 16), or 0 when it has none to count by. */
static size_t client_addr(struct MHD_Connection *conn, unsigned char *out)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL)
        return 0;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return 16;
    }
    return 0;
}

static gw_client **client_slot(gw_http *h, const unsigned char *addr, size_t len)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ addr[i]) * 16777619u;
    gw_client **p = &h->clients[hash % CLIENT_BUCKETS];
    while (*p != NULL && ((*p)->addr_len != len || memcmp((*p)->addr, addr, len) != 0))
        p = &(*p)->next;
    return p;
}

/* Count a new connection in; false when its client is at the limit (or
 * memory is short), and then it is not counted. */
static bool admit_connection(gw_http *h, struct MHD_Connection *conn, gw_conn *c)
{
    unsigned char addr[16];
    size_t len = client_addr(conn, addr);
    if (len == 0)
        return true; /* no address to count by (not TCP over IP) */
    bool ok = true;
    pthread_mutex_lock(&h->clients_mu);
    gw_client **slot = client_slot(h, addr, len);
    if (*slot == NULL && (*slot = calloc(1, sizeof **slot)) != NULL) {
        memcpy((*slot)->addr, addr, len);
        (*slot)->addr_len = len;
    }
    if (*slot == NULL || (*slot)->open >= h->gw->cfg.max_per_client)
        ok = false;
    else
        (c->client = *slot)->open++;
    pthread_mutex_unlock(&h->clients_mu);
    return ok;
}

static void release_connection(gw_http *h, gw_conn *c)
{
    gw_client *cl = c->client;
    if (cl == NULL)
        return;
    pthread_mutex_lock(&h->clients_mu);
    if (--cl->open == 0) {
        gw_client **p = client_slot(h, cl->addr, cl->addr_len);
        *p = cl->next;
        free(cl);
    }
    pthread_mutex_unlock(&h->clients_mu);
}

/* Every connection is counted and listed from its start to its close;
 * one past a limit is shut down at once (libmicrohttpd then sees it end
 * and closes it, and it is uncounted as it closes). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_state,
                          enum MHD_ConnectionNotificationCode code)
{
    gw_loop *lp = cls;
    gw_http *h = lp->h;
    gw_conn *c = *socket_state;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (c == NULL)
            return;
        c->prev->next = c->next;
        c->next->prev = c->prev;
        release_connection(h, c); /* a refused one was never counted */
        free(c);
        *socket_state = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c = calloc(1, sizeof *c);
    if (c == NULL || ci == NULL) {
        free(c);
        return;
    }
    c->fd = ci->connect_fd;
    c->phase = PHASE_HEADERS;
    c->deadline = resil_clock_now(h->gw->clock) + h->gw->cfg.header_timeout;
    c->next = lp->conns.next;
    c->prev = &lp->conns;
    lp->conns.next->prev = c;
    lp->conns.next = c;
    *socket_state = c;
    if (!admit_connection(h, conn, c)) {
        c->phase = PHASE_REFUSED;
        shutdown(c->fd, SHUT_RDWR);
    }
}

/* Write a last answer straight on the socket, past libmicrohttpd, and
 * shut it down: libmicrohttpd sees the socket end and closes it. */
static void shut_with(int fd, const char *answer, size_t len)
{
    (void)send(fd, answer, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_RDWR);
}

#define CUT_BODY "{\"error\":\"request_timeout\",\"message\":\"the request took too long\"}\n"

/* Answer 408 to a connection past its deadline and shut it down;
 * libmicrohttpd sees the socket end and closes it. On the loop, which
 * alone closes connections: the fd cannot be reused while this runs. */
static void cut(gw_conn *c)
{
    static const char timeout[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                                  "Content-Type: application/json\r\nContent-Length: 66\r\n\r\n"
                                  CUT_BODY;
    _Static_assert(sizeof CUT_BODY - 1 == 66, "the 408's Content-Length");
    c->phase = PHASE_CUT;
    shut_with(c->fd, timeout, sizeof timeout - 1);
}

/* How often deadlines are checked: a tenth of the shortest, 10 ms..1 s. */
static resil_duration sweep_every(const gw_config *cfg)
{
    resil_duration t = cfg->header_timeout < cfg->body_timeout ? cfg->header_timeout
                                                               : cfg->body_timeout;
    t /= 10;
    return t < RESIL_MS(10) ? RESIL_MS(10) : t > RESIL_S(1) ? RESIL_S(1) : t;
}

static gw_loop *loop_of(void *member, size_t offset)
{
    return (gw_loop *)(void *)((char *)member - offset);
}

static void on_sweep(resil_timer *t)
{
    gw_loop *lp = loop_of(t, offsetof(gw_loop, sweep));
    gateway *gw = lp->h->gw;
    resil_instant now = resil_clock_now(gw->clock);
    for (gw_conn *c = lp->conns.next; c != &lp->conns; c = c->next) {
        if ((c->phase == PHASE_HEADERS || c->phase == PHASE_BODY) && now >= c->deadline)
            cut(c);
    }
    lp->loop->ops->timer_start(lp->loop->self, &lp->sweep, sweep_every(&gw->cfg));
}

/* ---- libmicrohttpd on the loop ------------------------------------------------ */

/* Let libmicrohttpd do what is ready, then arm the loop timer for the
 * timeout it asks for (0 while it has work left over, none when idle), or
 * at once for connections answered during the run. */
static void mhd_run(gw_loop *lp)
{
    struct MHD_Daemon *d = lp->daemon;
    if (d == NULL)
        return;
    MHD_run(d);
    MHD_UNSIGNED_LONG_LONG ms;
    const resil_loop_ops *ops = lp->loop->ops;
    if (lp->resume != NULL) /* answered during the run */
        ops->timer_start(lp->loop->self, &lp->mhd_timer, 0);
    else if (MHD_get_timeout(d, &ms) == MHD_YES)
        ops->timer_start(lp->loop->self, &lp->mhd_timer,
                         ms > 3600000 ? RESIL_S(3600) : RESIL_MS((int64_t)ms));
    else
        ops->timer_stop(lp->loop->self, &lp->mhd_timer);
}

static void on_mhd_ready(resil_io *io, int fd, unsigned events)
{
    (void)fd;
    (void)events;
    mhd_run(loop_of(io, offsetof(gw_loop, mhd_io)));
}

static void resume_answered(gw_loop *lp);

static void on_mhd_timer(resil_timer *t)
{
    gw_loop *lp = loop_of(t, offsetof(gw_loop, mhd_timer));
    resume_answered(lp);
    mhd_run(lp);
}

/* ---- parking, and the store workers -------------------------------------------- */

void gw_park(gw_req *r)
{
    r->parked = true;
    r->lp->parked++;
    set_phase(r->gw->http, r->link, PHASE_BUSY);
    MHD_suspend_connection(r->conn);
}

/* The connection is resumed from the loop's timer, never from inside one
 * of libmicrohttpd's callbacks (where this may be called: a request the
 * breaker refuses is answered at once), and libmicrohttpd takes it up in
 * the MHD_run() that follows: one run for every connection answered
 * meanwhile. */
void gw_answered(gw_req *r)
{
    gw_loop *lp = r->lp;
    r->next_resume = lp->resume;
    lp->resume = r;
    lp->loop->ops->timer_start(lp->loop->self, &lp->mhd_timer, 0);
}

static void resume_answered(gw_loop *lp)
{
    while (lp->resume != NULL) {
        gw_req *r = lp->resume;
        lp->resume = r->next_resume;
        lp->parked--;
        MHD_resume_connection(r->conn);
    }
}

/* On the loop: the worker's part is done; the next step. */
static void on_back(resil_work *w)
{
    gw_req *r = (gw_req *)(void *)((char *)w - offsetof(gw_req, back));
    r->then(r);
}

/* A job goes straight to an idle worker when there is one, else to the
 * queue, which workers empty before they go idle. */
void gw_to_pool(gw_req *r, gw_step work, gw_step then)
{
    gw_http *h = r->gw->http;
    r->work = work;
    r->then = then;
    r->next_job = NULL;
    gw_worker *w = NULL;
    pthread_mutex_lock(&h->mu);
    bool open = !h->stopping;
    if (open && h->idle != NULL) {
        w = h->idle;
        h->idle = w->next_idle;
        w->job = r;
    } else if (open) {
        if (h->jobs_tail != NULL)
            h->jobs_tail->next_job = r;
        else
            h->jobs_head = r;
        h->jobs_tail = r;
    }
    pthread_mutex_unlock(&h->mu);
    if (w != NULL)
        sem_post(&w->go);
    if (!open) { /* stopping: the connection closes without an answer */
        r->result = MHD_NO;
        gw_answered(r);
    }
}

/* The next job: a queued one, else whatever the loop hands this worker
 * once it is idle; NULL once stopping. */
static gw_req *next_job(gw_worker *w)
{
    gw_http *h = w->h;
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    gw_req *r = stopping ? NULL : h->jobs_head;
    if (r != NULL) {
        h->jobs_head = r->next_job;
        if (h->jobs_head == NULL)
            h->jobs_tail = NULL;
    } else if (!stopping) {
        w->job = NULL;
        w->next_idle = h->idle;
        h->idle = w;
    }
    pthread_mutex_unlock(&h->mu);
    if (r != NULL || stopping)
        return r;
    while (sem_wait(&w->go) != 0)
        ; /* EINTR */
    return w->job; /* set before the post */
}

/* Back to the request's loop. */
static void post_back(gw_req *r)
{
    resil_loop *loop = r->lp->loop;
    r->back.fn = on_back;
    loop->ops->post(loop->self, &r->back);
}

bool gw_stopping(gateway *gw)
{
    gw_http *h = gw->http;
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    return stopping;
}

/* The asynchronous store calls are counted under the workers' lock, so
 * that none is submitted once stopping is set, and stopping waits for
 * every one submitted before to call back: the store never calls back
 * into a request whose loop has closed it. */
bool gw_store_enter(gw_req *r, gw_step then)
{
    gw_http *h = r->gw->http;
    pthread_mutex_lock(&h->mu);
    bool open = !h->stopping;
    if (open)
        h->store_calls++;
    pthread_mutex_unlock(&h->mu);
    r->then = then;
    if (!open) { /* stopping: the connection closes without an answer */
        r->result = MHD_NO;
        gw_answered(r);
    }
    return open;
}

void gw_store_back(gw_req *r)
{
    gw_http *h = r->gw->http;
    post_back(r);
    pthread_mutex_lock(&h->mu);
    if (--h->store_calls == 0)
        pthread_cond_broadcast(&h->store_idle);
    pthread_mutex_unlock(&h->mu);
}

static void *worker(void *arg)
{
    gw_worker *w = arg;
    gw_req *r;
    while ((r = next_job(w)) != NULL) {
        r->work(r);
        post_back(r);
    }
    return NULL;
}

/* ---- bookkeeping --------------------------------------------------------- */

static gw_conn *conn_link(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    gw_loop *lp = cls;
    gateway *gw = lp->h->gw;
    gw_conn *link = conn_link(conn);
    if (link != NULL && link->phase == PHASE_REFUSED)
        return NULL; /* past a connection limit: closed unanswered */
    gw_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->gw = gw;
    r->lp = lp;
    r->upstream = lp->upstream;
    r->target = strdup(uri);
    r->body.limit = gw->cfg.max_body;
    r->start = resil_clock_now(gw->clock);
    r->idem = "none";
    r->link = link;
    pthread_mutex_lock(&gw->mu);
    gw->in_flight++;
    pthread_mutex_unlock(&gw->mu);
    return r;
}

static void access_log(gw_req *r, struct MHD_Connection *conn, const char *method, int status,
                       size_t bytes);
static void count_request(const gw_req *r, const char *method, int status);

/* A request its deadline cut (cut(): a 408 written on its socket while its
 * headers or body were still coming) has its access-log line and its
 * count when libmicrohttpd lets it go, as every other request has; one
 * cut before its request line was parsed has no request to log. */
static void account_cut(gw_req *r, struct MHD_Connection *conn)
{
    if (r->shut || r->link == NULL || r->link->phase != PHASE_CUT)
        return;
    const char *method = r->method != NULL ? r->method : "-";
    r->idem = "timeout";
    count_request(r, method, 408);
    access_log(r, conn, method, 408, sizeof CUT_BODY - 1);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)code;
    gateway *gw = ((gw_loop *)cls)->h->gw;
    gw_req *r = *state;
    *state = NULL;
    if (r == NULL)
        return;
    account_cut(r, conn);
    set_phase(gw->http, conn_link(conn), PHASE_HEADERS);
    if (r->answer != NULL)
        MHD_destroy_response(r->answer);
    gw_reply_free(&r->up); /* kept only by a request closed before its answer */
    gw_buf_free(&r->body);
    free(r->target);
    free(r);
    pthread_mutex_lock(&gw->mu);
    if (--gw->in_flight == 0 && gw->draining)
        pthread_cond_broadcast(&gw->idle);
    pthread_mutex_unlock(&gw->mu);
}

static void format_client_ip(struct MHD_Connection *conn, char *buf, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(buf, cap, "-");
    if (ci == NULL || ci->client_addr == NULL)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                  buf, (socklen_t)cap);
}

/* Formatted once per connection (every request on it forwards it in
 * X-Forwarded-For), into the request when it has no connection record. */
const char *gw_client_ip(gw_req *r, struct MHD_Connection *conn)
{
    gw_conn *c = r->link;
    char *buf = c != NULL ? c->ip : r->ip;
    if (buf[0] == '\0')
        format_client_ip(conn, buf, GW_IP_TEXT);
    return buf;
}

/* The target as the log shows it: a byte outside printable ASCII, a '"' or
 * a backslash is written \xNN, so that no client can write its own log lines,
 * or terminal escapes, into the access log. NULL when out of memory. */
static char *loggable(const char *s)
{
    char *out = malloc(4 * strlen(s) + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
            o += sprintf(o, "\\x%02x", c);
        else
            *o++ = (char)c;
    }
    *o = '\0';
    return out;
}

static void access_log(gw_req *r, struct MHD_Connection *conn, const char *method, int status,
                       size_t bytes)
{
    gateway *gw = r->gw;
    if (gw->cfg.quiet)
        return;
    const char *ip = gw_client_ip(r, conn);
    char *target = loggable(r->target);
    double ms = resil_dur_to_ms(resil_clock_now(gw->clock) - r->start);
    int64_t wall = resil_clock_wall_now(gw->clock);
    time_t secs = (time_t)(wall / 1000000000);
    struct tm tm;
    char when[32];
    gmtime_r(&secs, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    char code[16] = "-"; /* none: the connection was closed unanswered */
    if (status > 0)
        snprintf(code, sizeof code, "%d", status);
    fprintf(stderr, "%s.%03dZ %s \"%s %s\" %s %zu %.1fms idempotency=%s%s%s%s%s\n", when,
            (int)(wall / 1000000 % 1000), ip, method, target ? target : "-", code, bytes,
            ms, r->idem, r->chaos_note[0] ? " " : "", r->chaos_note, r->note[0] ? " " : "",
            r->note);
    free(target);
}

/* ---- answers ------------------------------------------------------------- */

/* Add one field to a response. The name and value are copied out to be
 * NUL-terminated: on the stack when they fit, else on the heap, so that a
 * long header (a large Set-Cookie) is passed on whole rather than cut at a
 * buffer's size. */
static void add_field(struct MHD_Response *resp, const gw_field *f)
{
    char small[1024];
    size_t need = f->name_len + f->value_len + 2;
    char *buf = need <= sizeof small ? small : malloc(need);
    if (buf == NULL)
        return;
    memcpy(buf, f->name, f->name_len);
    buf[f->name_len] = '\0';
    memcpy(buf + f->name_len + 1, f->value, f->value_len);
    buf[f->name_len + 1 + f->value_len] = '\0';
    MHD_add_response_header(resp, buf, buf + f->name_len + 1);
    if (buf != small)
        free(buf);
}

/* Add the "Name: value\r\n" lines of a saved header block to a response. */
static void add_saved_headers(struct MHD_Response *resp, const char *blob, size_t len)
{
    size_t pos = 0;
    gw_field f;
    while (gw_saved_header_next(blob, len, &pos, &f))
        add_field(resp, &f);
}

const char *gw_known_method(const char *method)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT",
                                        "OPTIONS", "TRACE", "PATCH"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(method, known[i]) == 0)
            return known[i];
    return "_OTHER";
}

/* Every answer but the gateway's own endpoints' is counted by what the
 * idempotency rules did (the access log's idempotency= word). */
static void count_request(const gw_req *r, const char *method, int status)
{
    if (strcmp(r->idem, "health") == 0 || strcmp(r->idem, "metrics") == 0)
        return;
    resil_metrics_count_request(r->gw->metrics, gw_known_method(method), r->idem, status,
                                r->error_type);
}

enum MHD_Result gw_send_answer(gw_req *r, struct MHD_Connection *conn,
                                   const char *method, const gw_answer *a)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        a->body_len, (void *)(a->body_len ? a->body : ""), MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return MHD_NO;
    if (a->headers != NULL)
        add_saved_headers(resp, a->headers, a->headers_len);
    if (a->content_type != NULL)
        MHD_add_response_header(resp, "Content-Type", a->content_type);
    if (a->retry_after != NULL)
        MHD_add_response_header(resp, "Retry-After", a->retry_after);
    if (a->replayed)
        MHD_add_response_header(resp, "Idempotent-Replayed", "true");
    pthread_mutex_lock(&r->gw->mu);
    bool draining = r->gw->draining;
    pthread_mutex_unlock(&r->gw->mu);
    if (draining)
        MHD_add_response_header(resp, "Connection", "close");
    count_request(r, method, a->status);
    access_log(r, conn, method, a->status, a->body_len);
    if (r->parked) { /* queued on the loop once resumed */
        r->answer = resp;
        r->answer_status = (unsigned)a->status;
        return MHD_YES;
    }
    set_phase(r->gw->http, r->link, PHASE_ANSWERING);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)a->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* A short JSON error of the gateway's own. */
enum MHD_Result gw_send_error(gw_req *r, struct MHD_Connection *conn,
                                  const char *method, int status, const char *code,
                                  const char *message, const char *retry_after)
{
    char body[512];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}\n", code,
                     message);
    gw_answer a = {.status = status, .body = body, .body_len = (size_t)n,
                .retry_after = retry_after, .content_type = "application/json"};
    return gw_send_answer(r, conn, method, &a);
}

enum MHD_Result gw_send_reply(gw_req *r, struct MHD_Connection *conn,
                                  const char *method, const gw_reply *up)
{
    r->error_type = up->refused != NULL ? up->refused
                    : up->curl_code == 0 ? NULL
                    : up->timed_out    ? "upstream_timeout"
                                       : "upstream_unavailable";
    if (up->refused != NULL)
        return gw_send_error(r, conn, method, 503, up->refused, up->refused_message,
                             up->retry_after);
    if (up->curl_code != 0)
        return up->timed_out
                   ? gw_send_error(r, conn, method, 504, "upstream_timeout",
                                "the upstream did not answer in time", NULL)
                   : gw_send_error(r, conn, method, 502, "upstream_unavailable",
                                "the upstream could not be reached", NULL);
    gw_answer a = {.status = (int)up->status, .headers = up->headers.p,
                .headers_len = up->headers.len, .body = up->body.p,
                .body_len = up->body.len};
    return gw_send_answer(r, conn, method, &a);
}

/* ---- the front door ---------------------------------------------------------- */

static enum MHD_Result add_to_framing(void *cls, enum MHD_ValueKind kind, const char *name,
                                      size_t name_len, const char *value, size_t value_len)
{
    (void)kind;
    gw_framing_add(cls, name, name_len, value ? value : "", value ? value_len : 0);
    return MHD_YES;
}

static enum MHD_Result refuse(gw_req *r, struct MHD_Connection *conn, const char *method,
                              const char *idem, int status, const char *code,
                              const char *message)
{
    r->idem = idem;
    return gw_send_error(r, conn, method, status, code, message, NULL);
}

/* A chunked body that passes --max-body while it is still coming (a
 * Content-Length over it is refused before the body): libmicrohttpd takes
 * no answer until a body has ended, which a client may put off until the
 * body timeout, so the 413 is written on the socket and the connection
 * shut down, as a deadline's 408 is (cut()); the rest is never read. */
static enum MHD_Result refuse_midway(gw_req *r, struct MHD_Connection *conn, const char *method)
{
    static const char body[] = "{\"error\":\"body_too_large\",\"message\":\"the request "
                               "body is larger than the gateway accepts\"}\n";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return MHD_NO;
    char answer[512];
    int n = snprintf(answer, sizeof answer,
                     "HTTP/1.1 413 %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     MHD_get_reason_phrase_for(413), sizeof body - 1, body);
    r->shut = true;
    r->idem = "too-large";
    if (r->link != NULL)
        r->link->phase = PHASE_CUT;
    count_request(r, method, 413);
    access_log(r, conn, method, 413, sizeof body - 1);
    shut_with(ci->connect_fd, answer, (size_t)n);
    return MHD_YES;
}

/* ---- NUL bytes: what libmicrohttpd 0.9.75 does not refuse ---------------- */
/*
 * It parses the request line and the headers in place, NUL-terminating
 * each string where it lay, and a NUL inside a field simply ends that
 * field early: "X-A: b\0c" arrives as "X-A: b". So the block is checked as
 * received: every byte of it outside the strings the request was parsed
 * into must be a separator (gw_header_block_clean()). Whatever a NUL cut
 * off is found there. Later libmicrohttpd versions refuse such requests
 * themselves (MHD_OPTION_CLIENT_DISCIPLINE_LVL); this is for 0.9.75.
 */

typedef struct span_list {
    uintptr_t base;
    gw_span *spans;
    size_t n, cap;
} span_list;

static void add_span(span_list *l, const char *s, size_t len)
{
    if (len == 0 || l->n == l->cap) /* an empty string covers nothing */
        return;
    /* Through uintptr_t: a string elsewhere gives an offset past the
     * block, which the check refuses, rather than undefined arithmetic. */
    l->spans[l->n++] = (gw_span){.at = (uintptr_t)s - l->base, .len = len};
}

static enum MHD_Result count_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                   const char *value)
{
    (void)kind;
    (void)name;
    (void)value;
    (*(size_t *)cls)++;
    return MHD_YES;
}

static enum MHD_Result span_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                  size_t name_len, const char *value, size_t value_len)
{
    (void)kind;
    add_span(cls, name, name_len);
    if (value != NULL)
        add_span(cls, value, value_len);
    return MHD_YES;
}

static bool block_is_clean(const gw_req *r, struct MHD_Connection *conn, const char *method,
                           const char *url, const char *version)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t fields = 0;
    if (ci == NULL)
        return true; /* nothing to check against */
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_field, &fields);
    gw_span few[64]; /* a request's usual fields fit: no allocation */
    span_list l = {.base = (uintptr_t)method, .cap = 3 + 2 * fields};
    l.spans = l.cap <= sizeof few / sizeof few[0] ? few : malloc(l.cap * sizeof *l.spans);
    if (l.spans == NULL)
        return false;
    add_span(&l, method, strlen(method));
    add_span(&l, url, strlen(r->target)); /* parsed in place: the raw length */
    add_span(&l, version, strlen(version));
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, span_field, &l);
    bool clean = gw_header_block_clean(method, ci->header_size, l.spans, l.n);
    if (l.spans != few)
        free(l.spans);
    return clean;
}

/* The key and the tenant of a guarded request, checked before its body is
 * read. The key is kept unquoted in r->key; a missing one is decided once
 * the body is in (pass through, or 400 with --require-key). */
static enum MHD_Result check_key_and_tenant(gw_req *r, struct MHD_Connection *conn,
                                            const char *method)
{
    char message[200];
    const char *value;
    size_t len, key_len;
    const gw_config *cfg = &r->gw->cfg;
    if (MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, "Idempotency-Key", 15, &value,
                                      &len) == MHD_YES) {
        const char *why = gw_parse_key(value, len, r->key_buf, sizeof r->key_buf, &key_len);
        if (why != NULL) {
            snprintf(message, sizeof message, "Idempotency-Key %s", why);
            return refuse(r, conn, method, "bad-key", 400, "invalid_idempotency_key", message);
        }
        r->key = r->key_buf;
    }
    if (r->key != NULL && cfg->tenant_header != NULL &&
        MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, cfg->tenant_header,
                                      strlen(cfg->tenant_header), &value, &len) == MHD_YES) {
        const char *why = gw_check_tenant(value, len);
        if (why != NULL) {
            snprintf(message, sizeof message, "%s %s", cfg->tenant_header, why);
            return refuse(r, conn, method, "bad-tenant", 400, "invalid_tenant", message);
        }
    }
    return MHD_YES;
}

/* The first call, once the headers are in and before any body is read or
 * anything is asked of the store or the upstream: refuse what a reverse
 * proxy must not act on. MHD_YES lets the request go on. */
static enum MHD_Result check_request(gw_req *r, struct MHD_Connection *conn,
                                     const char *method, const char *url,
                                     const char *version)
{
    if (!block_is_clean(r, conn, method, url, version))
        return refuse(r, conn, method, "bad-request", 400, "invalid_header",
                      "the request line or a header holds a NUL byte, or a folded line");
    if (!gw_target_is_origin_form(r->target, strlen(r->target)))
        return refuse(r, conn, method, "bad-target", 400, "invalid_target",
                      "the request target must be a path (origin-form: /path?query)");
    gw_framing f = {0};
    gw_refusal why;
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, add_to_framing, &f);
    if (!gw_framing_check(&f, strcmp(version, MHD_HTTP_VERSION_1_1) == 0, r->gw->cfg.max_body,
                          &why))
        return refuse(r, conn, method, why.status == 413 ? "too-large" : "bad-request",
                      why.status, why.code, why.message);
    if (!gw_guarded_method(&r->gw->cfg, method))
        return MHD_YES;
    return check_key_and_tenant(r, conn, method);
}

/* The request's work: the idempotency rules for a guarded request with a
 * key, else straight upstream. On the loop, on a parked request. */
static void go_on(gw_req *r)
{
    if (gw_guarded_method(&r->gw->cfg, r->method) && r->key != NULL)
        gw_guarded(r);
    else
        gw_pass_through(r);
}

/* ---- chaos at the front door ------------------------------------------------- */

/* --chaos-* acts here, after the front door's checks and before the store
 * or the upstream is asked anything: an injected answer or a dropped
 * connection claims no key (a retry with the same key is a first
 * request), and the upstream never sees the request. An injected latency
 * is a loop timer while the connection is parked, so it holds no thread
 * and delays no other request. */

/* The injected answer, or the connection closed without one. On the loop,
 * parked or not (a parked request is resumed to send it or to close). */
static enum MHD_Result chaos_end(gw_req *r)
{
    r->idem = "chaos";
    enum MHD_Result ret = MHD_NO;
    if (r->chaos.end == GW_CHAOS_STATUS) {
        r->error_type = "chaos_status";
        ret = gw_send_error(r, r->conn, r->method, r->chaos.status, "chaos_status",
                            "answered by resil gateway --chaos-status; the upstream was not "
                            "called",
                            r->chaos.retry_after);
    } else {
        r->error_type = "chaos_drop";
        count_request(r, r->method, 0);
        access_log(r, r->conn, r->method, 0, 0);
    }
    if (!r->parked)
        return ret;
    if (r->chaos.end == GW_CHAOS_DROP)
        r->result = MHD_NO;
    gw_answered(r);
    return MHD_YES;
}

static void chaos_unlink(gw_req *r)
{
    GW_LIST_UNLINK(r->lp->chaos_waits, r, chaos_prev, chaos_next);
}

static void on_chaos_waited(resil_timer *t)
{
    gw_req *r = (gw_req *)(void *)((char *)t - offsetof(gw_req, chaos_wait));
    chaos_unlink(r);
    if (r->chaos.end != GW_CHAOS_FORWARD)
        chaos_end(r);
    else
        go_on(r);
}

static void chaos_wait(gw_req *r)
{
    gw_loop *lp = r->lp;
    GW_LIST_PUSH(lp->chaos_waits, r, chaos_prev, chaos_next);
    r->chaos_wait.fn = on_chaos_waited;
    lp->loop->ops->timer_start(lp->loop->self, &r->chaos_wait, r->chaos.delay);
}

/* Stopping: a request still waiting out an injected latency is closed
 * without an answer, as one still upstream is. */
static void chaos_abort_waits(gw_loop *lp)
{
    while (lp->chaos_waits != NULL) {
        gw_req *r = lp->chaos_waits;
        lp->loop->ops->timer_stop(lp->loop->self, &r->chaos_wait);
        chaos_unlink(r);
        r->result = MHD_NO;
        gw_answered(r);
    }
}

/* The connection sleeps while the upstream (on the loop) or the store (on
 * a worker) does the request's work; it costs no thread meanwhile. */
static enum MHD_Result dispatch(gw_req *r, struct MHD_Connection *conn, const char *method)
{
    r->conn = conn;
    r->method = method;
    r->result = MHD_YES;
    if (gw_chaos_pick(r->gw->chaos, &r->chaos)) {
        gw_chaos_note(&r->chaos, r->chaos_note, sizeof r->chaos_note);
        if (r->chaos.delay == 0)
            return chaos_end(r);
    }
    gw_park(r);
    if (r->chaos.delay > 0)
        chaos_wait(r);
    else
        go_on(r);
    return MHD_YES;
}

/* Resumed: queue the answer its work prepared (none: close). */
static enum MHD_Result resumed(gw_req *r, struct MHD_Connection *conn)
{
    struct MHD_Response *resp = r->answer;
    r->answer = NULL;
    r->parked = false;
    if (resp == NULL)
        return MHD_NO;
    set_phase(r->gw->http, r->link, PHASE_ANSWERING);
    enum MHD_Result ret = MHD_queue_response(conn, r->answer_status, resp);
    MHD_destroy_response(resp);
    return ret == MHD_YES ? r->result : MHD_NO;
}

/* GET /metrics: the metrics sink's Prometheus text, written by the library. */
static enum MHD_Result send_metrics(gw_req *r, struct MHD_Connection *conn, const char *method)
{
    r->idem = "metrics";
    char *text = NULL;
    size_t len = 0;
    if (resil_metrics_prometheus_string(r->gw->metrics, &text, &len) != 0)
        return gw_send_error(r, conn, method, 500, "metrics_unavailable",
                             "the gateway could not write its metrics", NULL);
    gw_answer a = {.status = 200, .body = text, .body_len = len,
                   .content_type = "text/plain; version=0.0.4; charset=utf-8"};
    enum MHD_Result ret = gw_send_answer(r, conn, method, &a);
    free(text);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_size, void **state)
{
    (void)cls;
    gw_req *r = *state;
    if (r == NULL || r->target == NULL)
        return MHD_NO;
    if (r->parked)
        return resumed(r, conn);
    if (!r->started) {
        r->started = true;
        r->method = method; /* for its log line, should its body be cut */
        set_phase(r->gw->http, r->link, PHASE_BODY);
        return check_request(r, conn, method, url, version);
    }
    if (r->shut) { /* refused on its socket: what is still coming is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        gw_buf_append(&r->body, upload, *upload_size);
        *upload_size = 0;
        return r->body.overflow ? refuse_midway(r, conn, method) : MHD_YES;
    }
    if (strcmp(url, "/healthz") == 0 && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        r->idem = "health";
        gw_answer a = {.status = 200, .body = "ok\n", .body_len = 3, .content_type = "text/plain"};
        return gw_send_answer(r, conn, method, &a);
    }
    if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0)
        return send_metrics(r, conn, method);
    if (gw_guarded_method(&r->gw->cfg, method) && r->key == NULL && r->gw->cfg.require_key)
        return refuse(r, conn, method, "missing", 400, "idempotency_key_required",
                      "this request needs an Idempotency-Key header");
    return dispatch(r, conn, method);
}

/* ---- libmicrohttpd's own messages ------------------------------------------ */

/* A flood of refused connections makes libmicrohttpd say the same thing
 * once per connection; the log gets at most one of its lines a second,
 * with a count of those it did not show. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    gw_http *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    resil_instant now = resil_clock_now(h->gw->clock);
    pthread_mutex_lock(&h->log_mu);
    bool show = h->log_last == 0 || now - h->log_last >= RESIL_S(1);
    unsigned dropped = h->log_dropped;
    if (show) {
        h->log_last = now;
        h->log_dropped = 0;
    } else {
        h->log_dropped++;
    }
    pthread_mutex_unlock(&h->log_mu);
    if (!show)
        return;
    if (dropped > 0)
        fprintf(stderr, "resil gateway: libmicrohttpd: %s (and %u more messages not shown)\n",
                msg, dropped);
    else
        fprintf(stderr, "resil gateway: libmicrohttpd: %s\n", msg);
}

/* ---- start and stop ------------------------------------------------------ */

static gw_http *http_new(gateway *gw, const int *listen_fds, bool ipv6)
{
    gw_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->gw = gw;
    h->ipv6 = ipv6;
    h->workers = calloc(gw->cfg.workers, sizeof *h->workers);
    h->loops = calloc(gw->cfg.loops, sizeof *h->loops);
    if (h->workers == NULL || h->loops == NULL) {
        free(h->workers);
        free(h->loops);
        free(h);
        return NULL;
    }
    h->n_loops = gw->cfg.loops;
    for (unsigned i = 0; i < h->n_loops; i++) {
        gw_loop *lp = &h->loops[i];
        lp->h = h;
        lp->listen_fd = listen_fds[i];
        lp->conns.next = lp->conns.prev = &lp->conns;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->log_mu, NULL);
    pthread_mutex_init(&h->start_mu, NULL);
    pthread_mutex_init(&h->clients_mu, NULL);
    pthread_cond_init(&h->started, NULL);
    pthread_cond_init(&h->store_idle, NULL);
    return h;
}

/* Stop the workers (each finishes the job it holds and hands it back);
 * jobs no worker took go back to their loops without an answer, which
 * closes them. Then wait for the asynchronous store calls in flight: each
 * is handed back to its loop, which is still running, and whatever its
 * request would do next that needs a worker or the store closes it
 * instead (stopping is set). */
static void http_stop_workers(gw_http *h)
{
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    gw_req *left = h->jobs_head;
    h->jobs_head = h->jobs_tail = NULL;
    gw_worker *idle = h->idle;
    h->idle = NULL;
    pthread_mutex_unlock(&h->mu);
    for (gw_worker *w = idle; w != NULL; w = w->next_idle) {
        w->job = NULL;
        sem_post(&w->go);
    }
    for (unsigned i = 0; i < h->n_workers; i++) {
        pthread_join(h->workers[i].thread, NULL);
        sem_destroy(&h->workers[i].go);
    }
    h->n_workers = 0;
    while (left != NULL) {
        gw_req *next = left->next_job;
        left->result = MHD_NO;
        left->then = gw_answered;
        post_back(left);
        left = next;
    }
    pthread_mutex_lock(&h->mu);
    while (h->store_calls > 0)
        pthread_cond_wait(&h->store_idle, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

/* The listening sockets are closed here, whatever became of the loops. */
static void http_free(gw_http *h)
{
    for (unsigned i = 0; i < h->n_loops; i++)
        if (h->loops[i].listen_fd >= 0)
            close(h->loops[i].listen_fd);
    for (unsigned b = 0; b < CLIENT_BUCKETS; b++)
        for (gw_client *c = h->clients[b], *next; c != NULL; c = next) {
            next = c->next;
            free(c);
        }
    pthread_cond_destroy(&h->started);
    pthread_mutex_destroy(&h->clients_mu);
    pthread_mutex_destroy(&h->start_mu);
    pthread_mutex_destroy(&h->log_mu);
    pthread_cond_destroy(&h->store_idle);
    pthread_mutex_destroy(&h->mu);
    free(h->workers);
    free(h->loops);
    free(h);
}

static int start_workers(gw_http *h)
{
    for (; h->n_workers < h->gw->cfg.workers; h->n_workers++) {
        gw_worker *w = &h->workers[h->n_workers];
        w->h = h;
        if (sem_init(&w->go, 0, 0) != 0)
            return -1;
        if (pthread_create(&w->thread, NULL, worker, w) != 0) {
            sem_destroy(&w->go);
            return -1;
        }
        pthread_setname_np(w->thread, "gw-store-worker"); /* for ps, and the tests */
    }
    return 0;
}

/* libmicrohttpd counts its own timeout in whole seconds: round up. */
static unsigned whole_seconds(resil_duration d)
{
    resil_duration s = (d + RESIL_S(1) - 1) / RESIL_S(1);
    return s < 1 ? 1 : (unsigned)s;
}

/* This loop's share of --max-connections: the shares add up to it, as
 * libmicrohttpd's own thread pool shares its limit out among its threads
 * (cmd_gateway.c runs no more loops than the limit). */
static unsigned connection_share(const gw_http *h, const gw_loop *lp)
{
    unsigned n = h->n_loops, i = (unsigned)(lp - h->loops), max = h->gw->cfg.max_connections;
    return max / n + (i < max % n ? 1 : 0);
}

/* External epoll mode: no thread of libmicrohttpd's own; the loop watches
 * its epoll descriptor and calls MHD_run(). Its per-address limit is the
 * gateway's (with one loop it is what refuses; with several, the count
 * across the loops is: admit_connection()). Its strictness stays at 0:
 * at 1 it refuses an HTTP/1.1 request without Host itself, with a page
 * whose status line and headers 0.9.75 writes twice, before the gateway's
 * own check (gw_framing_check: 400 invalid_host, logged) can; the target's
 * spaces and the rest that 1 refuses the gateway's checks refuse too. */
static struct MHD_Daemon *start_daemon(gw_loop *lp)
{
    gateway *gw = lp->h->gw;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (lp->h->ipv6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handle, gw,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, lp->h, /* first, so that it hears everything */
        MHD_OPTION_LISTEN_SOCKET, lp->listen_fd,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, lp,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, lp,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, lp,
        MHD_OPTION_CONNECTION_TIMEOUT, whole_seconds(gw->cfg.idle_timeout),
        MHD_OPTION_CONNECTION_LIMIT, connection_share(lp->h, lp),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, gw->cfg.max_per_client,
        MHD_OPTION_STRICT_FOR_CLIENT, 0,
        MHD_OPTION_END);
}

/* Take the listening socket back from the daemon (it stays open, and
 * http_free() closes it), so that stopping the daemon never closes it. */
static void quiesce(gw_loop *lp)
{
    if (lp->daemon == NULL || lp->quiesced)
        return;
    lp->quiesced = true;
    (void)MHD_quiesce_daemon(lp->daemon);
}

/* On the loop's thread: the loop, the upstream's multi handle, the daemon
 * and its watch. 0, or -1 with nothing left open. */
static int loop_open(gw_loop *lp)
{
    gateway *gw = lp->h->gw;
    if (uv_loop_init(&lp->uv) != 0)
        return -1;
    if (resil_uv_new(&lp->uv, &lp->ru) != 0)
        goto fail_uv;
    lp->loop = resil_uv_loop(lp->ru);
    if (gw_upstream_open(gw, lp->loop, &lp->upstream) != 0)
        goto fail_ru;
    if ((lp->daemon = start_daemon(lp)) == NULL)
        goto fail_upstream;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(lp->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    lp->mhd_io.fn = on_mhd_ready;
    lp->mhd_timer.fn = on_mhd_timer;
    lp->sweep.fn = on_sweep;
    if (di == NULL || resil_loop_io_start(lp->loop, &lp->mhd_io, di->epoll_fd, RESIL_IO_READ) != 0)
        goto fail_daemon;
    lp->loop->ops->timer_start(lp->loop->self, &lp->sweep, sweep_every(&gw->cfg));
    mhd_run(lp);
    return 0;
fail_daemon:
    quiesce(lp);
    MHD_stop_daemon(lp->daemon);
    lp->daemon = NULL;
fail_upstream:
    gw_upstream_close(lp->upstream, NULL);
    lp->upstream = NULL;
fail_ru:
    resil_uv_close(lp->ru);
fail_uv:
    uv_run(&lp->uv, UV_RUN_DEFAULT); /* the handles' close callbacks */
    uv_loop_close(&lp->uv);
    return -1;
}

static void say_started(gw_http *h, int rc)
{
    pthread_mutex_lock(&h->start_mu);
    if (rc != 0)
        h->start_rc = rc;
    h->start_done++;
    pthread_cond_signal(&h->started);
    pthread_mutex_unlock(&h->start_mu);
}

static void *loop_thread(void *arg)
{
    gw_loop *lp = arg;
    int rc = loop_open(lp);
    say_started(lp->h, rc);
    if (rc != 0)
        return NULL;
    uv_run(&lp->uv, UV_RUN_DEFAULT); /* until on_stop */
    uv_run(&lp->uv, UV_RUN_DEFAULT); /* the handles' close callbacks */
    uv_loop_close(&lp->uv);
    return NULL;
}

/* A call still upstream when the gateway stops: its connection closes
 * without an answer. A guarded one keeps its key held until the lease
 * runs out; a later request then takes it over and saves an unknown
 * outcome, never running it again. */
static void on_aborted(gw_call *c)
{
    gw_req *r = (gw_req *)(void *)((char *)c - offsetof(gw_req, call));
    gw_reply_free(&r->up);
    r->result = MHD_NO;
    gw_answered(r);
}

/* The last work on a loop: every parked connection resumed and closed,
 * then the daemon, the upstream and the loop's handles go. */
static void on_stop(resil_work *w)
{
    gw_loop *lp = loop_of(w, offsetof(gw_loop, stop));
    gw_upstream_close(lp->upstream, on_aborted);
    lp->upstream = NULL;
    chaos_abort_waits(lp);
    resume_answered(lp);
    mhd_run(lp); /* the resumed connections are handled, and closed */
    resil_loop_io_stop(lp->loop, &lp->mhd_io);
    lp->loop->ops->timer_stop(lp->loop->self, &lp->mhd_timer);
    lp->loop->ops->timer_stop(lp->loop->self, &lp->sweep);
    /* libmicrohttpd refuses to stop with a connection suspended (it
     * aborts); none can be by now, but a leak beats an abort at exit. */
    quiesce(lp);
    if (lp->parked == 0)
        MHD_stop_daemon(lp->daemon);
    else
        fprintf(stderr, "resil gateway: %u connection%s still suspended at exit\n", lp->parked,
                lp->parked == 1 ? "" : "s");
    lp->daemon = NULL;
    resil_uv_close(lp->ru);
    uv_stop(&lp->uv);
}

static void post_to_loop(gw_loop *lp, resil_work *w, resil_work_fn fn)
{
    w->fn = fn;
    lp->loop->ops->post(lp->loop->self, w);
}

/* Every running loop stopped and joined. */
static void stop_loops(gw_http *h)
{
    for (unsigned i = 0; i < h->n_loops; i++) {
        gw_loop *lp = &h->loops[i];
        if (!lp->running)
            continue;
        post_to_loop(lp, &lp->stop, on_stop);
        pthread_join(lp->thread, NULL);
        lp->running = false;
    }
}

/* The loops start one by one, each on its thread; a loop that fails to
 * open has said so and ended, and the others are stopped. */
static bool start_loops(gw_http *h)
{
    unsigned created = 0;
    for (; created < h->n_loops; created++) {
        gw_loop *lp = &h->loops[created];
        if (pthread_create(&lp->thread, NULL, loop_thread, lp) != 0)
            break;
    }
    pthread_mutex_lock(&h->start_mu);
    while (h->start_done < created)
        pthread_cond_wait(&h->started, &h->start_mu);
    int rc = h->start_rc;
    pthread_mutex_unlock(&h->start_mu);
    for (unsigned i = 0; i < created; i++) {
        gw_loop *lp = &h->loops[i];
        if (lp->daemon != NULL) /* it runs (read after its start was said) */
            lp->running = true;
        else
            pthread_join(lp->thread, NULL);
    }
    return rc == 0 && created == h->n_loops;
}

int gw_http_start(gateway *gw, const int *listen_fds, bool ipv6)
{
    gw_http *h = gw->http = http_new(gw, listen_fds, ipv6);
    if (h == NULL) {
        for (unsigned i = 0; i < gw->cfg.loops; i++)
            close(listen_fds[i]);
        return -1;
    }
    /* The workers first: they touch a loop only for a job, and jobs
     * come from the loops. */
    if (start_workers(h) == 0 && start_loops(h))
        return 0;
    stop_loops(h);
    http_stop_workers(h); /* no job was queued: nothing is posted */
    http_free(h);
    gw->http = NULL;
    return -1;
}

/* Quiescing takes the listening socket back. It is shut down at once, so
 * new connections are refused while the requests in flight finish, but
 * closed only once the daemon has stopped. */
static void on_quiesce(resil_work *w)
{
    gw_loop *lp = loop_of(w, offsetof(gw_loop, quiesce));
    quiesce(lp);
    shutdown(lp->listen_fd, SHUT_RDWR);
    mhd_run(lp);
}

unsigned gw_http_quiesce(gateway *gw)
{
    gw_http *h = gw->http;
    pthread_mutex_lock(&gw->mu);
    gw->draining = true;
    unsigned left = gw->in_flight;
    pthread_mutex_unlock(&gw->mu);
    for (unsigned i = 0; i < h->n_loops; i++)
        post_to_loop(&h->loops[i], &h->loops[i].quiesce, on_quiesce);
    return left;
}

void gw_http_stop(gateway *gw, unsigned left, resil_duration grace)
{
    gw_http *h = gw->http;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(grace / RESIL_S(1)) + 1;
    pthread_mutex_lock(&gw->mu);
    while (gw->in_flight > 0 &&
           pthread_cond_timedwait(&gw->idle, &gw->mu, &until) == 0)
        ;
    unsigned unfinished = gw->in_flight;
    pthread_mutex_unlock(&gw->mu);
    if (!gw->cfg.quiet)
        fprintf(stderr, "resil gateway: stopping: %u request%s in flight, %u unfinished\n",
                left, left == 1 ? "" : "s", unfinished);
    http_stop_workers(h);
    stop_loops(h);
    http_free(h);
    gw->http = NULL;
}
