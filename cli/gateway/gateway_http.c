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
 * What blocks runs on a small pool of store workers (--workers): the
 * idempotency store's calls (whose group commit makes concurrent callers
 * share one transaction, so several workers batch) and the fleet's Redis
 * permits. A request that needs them is parked (its connection
 * suspended), handed to a worker with the step to run there and the step
 * to run next on the loop, and comes back through the loop's post queue:
 * one wake of the loop for however many results are waiting.
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
    PHASE_CUT        /* past its deadline: being shut down */
} gw_phase;

typedef struct gw_conn {
    struct gw_conn *prev, *next;
    int fd;
    gw_phase phase;
    resil_instant deadline;
} gw_conn;

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

typedef struct gw_http {
    gateway *gw;
    /* the loop's thread alone */
    uv_loop_t uv;
    resil_uv *ru;
    resil_loop *loop;
    resil_io mhd_io;        /* libmicrohttpd's epoll descriptor */
    resil_timer mhd_timer;  /* the timeout libmicrohttpd asks for */
    resil_timer sweep;      /* the connections' deadlines */
    gw_conn conns;          /* list sentinel: every open connection */
    unsigned parked;        /* connections suspended */
    gw_req *resume;         /* answered, to be resumed (through next_resume) */
    gw_req *chaos_waits;    /* requests waiting out an injected latency */
    int listen_fd;
    bool ipv6;
    int quiesced_fd;        /* the listening socket once handed back */
    resil_work quiesce, stop;
    pthread_t thread;
    /* start-up: the loop thread says whether it runs */
    pthread_mutex_t start_mu;
    pthread_cond_t started;
    int start_rc;
    bool start_done;
    /* the store workers */
    pthread_mutex_t mu;
    gw_req *jobs_head, *jobs_tail; /* jobs no idle worker was there for */
    gw_worker *idle;         /* workers waiting for a job */
    bool stopping;
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
    if (c == NULL || c->phase == PHASE_CUT)
        return;
    const gw_config *cfg = &h->gw->cfg;
    resil_instant now = resil_clock_now(h->gw->clock);
    c->phase = phase;
    c->deadline = phase == PHASE_HEADERS ? now + cfg->header_timeout
                  : phase == PHASE_BODY  ? now + cfg->body_timeout
                                         : 0;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_state,
                          enum MHD_ConnectionNotificationCode code)
{
    gw_http *h = cls;
    gw_conn *c = *socket_state;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (c == NULL)
            return;
        c->prev->next = c->next;
        c->next->prev = c->prev;
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
    c->next = h->conns.next;
    c->prev = &h->conns;
    h->conns.next->prev = c;
    h->conns.next = c;
    *socket_state = c;
}

/* Answer 408 to a connection past its deadline and shut it down;
 * libmicrohttpd sees the socket end and closes it. On the loop, which
 * alone closes connections: the fd cannot be reused while this runs. */
static void cut(gw_conn *c)
{
    static const char timeout[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                                  "Content-Type: application/json\r\nContent-Length: 76\r\n\r\n"
                                  "{\"error\":\"request_timeout\",\"message\":\"the request "
                                  "took too long\"}\n";
    c->phase = PHASE_CUT;
    (void)send(c->fd, timeout, sizeof timeout - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(c->fd, SHUT_RDWR);
}

/* How often deadlines are checked: a tenth of the shortest, 10 ms..1 s. */
static resil_duration sweep_every(const gw_config *cfg)
{
    resil_duration t = cfg->header_timeout < cfg->body_timeout ? cfg->header_timeout
                                                               : cfg->body_timeout;
    t /= 10;
    return t < RESIL_MS(10) ? RESIL_MS(10) : t > RESIL_S(1) ? RESIL_S(1) : t;
}

static gw_http *http_of(resil_timer *t, size_t offset)
{
    return (gw_http *)(void *)((char *)t - offset);
}

static void on_sweep(resil_timer *t)
{
    gw_http *h = http_of(t, offsetof(gw_http, sweep));
    resil_instant now = resil_clock_now(h->gw->clock);
    for (gw_conn *c = h->conns.next; c != &h->conns; c = c->next) {
        if ((c->phase == PHASE_HEADERS || c->phase == PHASE_BODY) && now >= c->deadline)
            cut(c);
    }
    h->loop->ops->timer_start(h->loop->self, &h->sweep, sweep_every(&h->gw->cfg));
}

/* ---- libmicrohttpd on the loop ------------------------------------------------ */

/* Let libmicrohttpd do what is ready, then arm the loop timer for the
 * timeout it asks for (0 while it has work left over, none when idle), or
 * at once for connections answered during the run. */
static void mhd_run(gw_http *h)
{
    struct MHD_Daemon *d = h->gw->daemon;
    if (d == NULL)
        return;
    MHD_run(d);
    MHD_UNSIGNED_LONG_LONG ms;
    const resil_loop_ops *ops = h->loop->ops;
    if (h->resume != NULL) /* answered during the run */
        ops->timer_start(h->loop->self, &h->mhd_timer, 0);
    else if (MHD_get_timeout(d, &ms) == MHD_YES)
        ops->timer_start(h->loop->self, &h->mhd_timer,
                         ms > 3600000 ? RESIL_S(3600) : RESIL_MS((int64_t)ms));
    else
        ops->timer_stop(h->loop->self, &h->mhd_timer);
}

static void on_mhd_ready(resil_io *io, int fd, unsigned events)
{
    (void)fd;
    (void)events;
    mhd_run((gw_http *)(void *)((char *)io - offsetof(gw_http, mhd_io)));
}

static void resume_answered(gw_http *h);

static void on_mhd_timer(resil_timer *t)
{
    gw_http *h = http_of(t, offsetof(gw_http, mhd_timer));
    resume_answered(h);
    mhd_run(h);
}

/* ---- parking, and the store workers -------------------------------------------- */

void gw_park(gw_req *r)
{
    gw_http *h = r->gw->http;
    r->parked = true;
    h->parked++;
    set_phase(h, r->link, PHASE_BUSY);
    MHD_suspend_connection(r->conn);
}

/* The connection is resumed from the loop's timer, never from inside one
 * of libmicrohttpd's callbacks (where this may be called: a request the
 * breaker refuses is answered at once), and libmicrohttpd takes it up in
 * the MHD_run() that follows: one run for every connection answered
 * meanwhile. */
void gw_answered(gw_req *r)
{
    gw_http *h = r->gw->http;
    r->next_resume = h->resume;
    h->resume = r;
    h->loop->ops->timer_start(h->loop->self, &h->mhd_timer, 0);
}

static void resume_answered(gw_http *h)
{
    while (h->resume != NULL) {
        gw_req *r = h->resume;
        h->resume = r->next_resume;
        h->parked--;
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

static void *worker(void *arg)
{
    gw_worker *w = arg;
    gw_http *h = w->h;
    gw_req *r;
    while ((r = next_job(w)) != NULL) {
        r->work(r);
        r->back.fn = on_back;
        h->loop->ops->post(h->loop->self, &r->back);
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
    gateway *gw = cls;
    gw_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->gw = gw;
    r->target = strdup(uri);
    r->body.limit = gw->cfg.max_body;
    r->start = resil_clock_now(gw->clock);
    r->idem = "none";
    r->link = conn_link(conn);
    pthread_mutex_lock(&gw->mu);
    gw->in_flight++;
    pthread_mutex_unlock(&gw->mu);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)code;
    gateway *gw = cls;
    gw_req *r = *state;
    *state = NULL;
    if (r == NULL)
        return;
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

void gw_client_ip(struct MHD_Connection *conn, char *buf, size_t cap)
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

static void access_log(gw_req *r, const char *ip, const char *method, int status,
                       size_t bytes)
{
    gateway *gw = r->gw;
    if (gw->cfg.quiet)
        return;
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
    char ip[64];
    gw_client_ip(conn, ip, sizeof ip);
    count_request(r, method, a->status);
    access_log(r, ip, method, a->status, a->body_len);
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
    span_list l = {.base = (uintptr_t)method, .cap = 3 + 2 * fields};
    l.spans = malloc(l.cap * sizeof *l.spans);
    if (l.spans == NULL)
        return false;
    add_span(&l, method, strlen(method));
    add_span(&l, url, strlen(r->target)); /* parsed in place: the raw length */
    add_span(&l, version, strlen(version));
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, span_field, &l);
    bool clean = gw_header_block_clean(method, ci->header_size, l.spans, l.n);
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
        char ip[64];
        r->error_type = "chaos_drop";
        gw_client_ip(r->conn, ip, sizeof ip);
        count_request(r, r->method, 0);
        access_log(r, ip, r->method, 0, 0);
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
    gw_http *h = r->gw->http;
    if (r->chaos_prev != NULL)
        r->chaos_prev->chaos_next = r->chaos_next;
    else
        h->chaos_waits = r->chaos_next;
    if (r->chaos_next != NULL)
        r->chaos_next->chaos_prev = r->chaos_prev;
    r->chaos_prev = r->chaos_next = NULL;
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
    gw_http *h = r->gw->http;
    r->chaos_prev = NULL;
    r->chaos_next = h->chaos_waits;
    if (h->chaos_waits != NULL)
        h->chaos_waits->chaos_prev = r;
    h->chaos_waits = r;
    r->chaos_wait.fn = on_chaos_waited;
    h->loop->ops->timer_start(h->loop->self, &r->chaos_wait, r->chaos.delay);
}

/* Stopping: a request still waiting out an injected latency is closed
 * without an answer, as one still upstream is. */
static void chaos_abort_waits(gw_http *h)
{
    while (h->chaos_waits != NULL) {
        gw_req *r = h->chaos_waits;
        h->loop->ops->timer_stop(h->loop->self, &r->chaos_wait);
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
        set_phase(r->gw->http, r->link, PHASE_BODY);
        return check_request(r, conn, method, url, version);
    }
    if (*upload_size > 0) {
        gw_buf_append(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->body.overflow)
        return refuse(r, conn, method, "too-large", 413, "body_too_large",
                      "the request body is larger than the gateway accepts");
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

static gw_http *http_new(gateway *gw, int listen_fd, bool ipv6)
{
    gw_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->gw = gw;
    h->listen_fd = listen_fd;
    h->ipv6 = ipv6;
    h->quiesced_fd = -1;
    h->conns.next = h->conns.prev = &h->conns;
    h->workers = calloc(gw->cfg.workers, sizeof *h->workers);
    if (h->workers == NULL) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->log_mu, NULL);
    pthread_mutex_init(&h->start_mu, NULL);
    pthread_cond_init(&h->started, NULL);
    return h;
}

/* Stop the workers (each finishes the job it holds and hands it back);
 * jobs no worker took go back to the loop without an answer, which closes
 * them. */
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
        left->back.fn = on_back;
        h->loop->ops->post(h->loop->self, &left->back);
        left = next;
    }
}

static void http_free(gw_http *h)
{
    pthread_cond_destroy(&h->started);
    pthread_mutex_destroy(&h->start_mu);
    pthread_mutex_destroy(&h->log_mu);
    pthread_mutex_destroy(&h->mu);
    free(h->workers);
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
    }
    return 0;
}

/* libmicrohttpd counts its own timeout in whole seconds: round up. */
static unsigned whole_seconds(resil_duration d)
{
    resil_duration s = (d + RESIL_S(1) - 1) / RESIL_S(1);
    return s < 1 ? 1 : (unsigned)s;
}

/* External epoll mode: no thread of libmicrohttpd's own; the loop watches
 * its epoll descriptor and calls MHD_run(). */
static struct MHD_Daemon *start_daemon(gw_http *h)
{
    gateway *gw = h->gw;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (h->ipv6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handle, gw,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, /* first, so that it hears everything */
        MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, gw,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_CONNECTION_TIMEOUT, whole_seconds(gw->cfg.idle_timeout),
        MHD_OPTION_CONNECTION_LIMIT, gw->cfg.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, gw->cfg.max_per_client,
        MHD_OPTION_STRICT_FOR_CLIENT, 1,
        MHD_OPTION_END);
}

/* On the loop thread: the loop, the upstream's multi handle, the daemon
 * and its watch. 0, or -1 with nothing left open. */
static int loop_open(gw_http *h)
{
    gateway *gw = h->gw;
    if (uv_loop_init(&h->uv) != 0)
        return -1;
    if (resil_uv_new(&h->uv, &h->ru) != 0)
        goto fail_uv;
    h->loop = resil_uv_loop(h->ru);
    if (gw_upstream_open(gw, h->loop) != 0)
        goto fail_ru;
    if ((gw->daemon = start_daemon(h)) == NULL)
        goto fail_upstream;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(gw->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    h->mhd_io.fn = on_mhd_ready;
    h->mhd_timer.fn = on_mhd_timer;
    h->sweep.fn = on_sweep;
    if (di == NULL || resil_loop_io_start(h->loop, &h->mhd_io, di->epoll_fd, RESIL_IO_READ) != 0)
        goto fail_daemon;
    h->loop->ops->timer_start(h->loop->self, &h->sweep, sweep_every(&gw->cfg));
    mhd_run(h);
    return 0;
fail_daemon:
    MHD_quiesce_daemon(gw->daemon); /* the listening socket stays the caller's */
    MHD_stop_daemon(gw->daemon);
    gw->daemon = NULL;
fail_upstream:
    gw_upstream_close(gw, NULL);
fail_ru:
    resil_uv_close(h->ru);
fail_uv:
    uv_run(&h->uv, UV_RUN_DEFAULT); /* the handles' close callbacks */
    uv_loop_close(&h->uv);
    return -1;
}

static void say_started(gw_http *h, int rc)
{
    pthread_mutex_lock(&h->start_mu);
    h->start_rc = rc;
    h->start_done = true;
    pthread_cond_signal(&h->started);
    pthread_mutex_unlock(&h->start_mu);
}

static void *loop_thread(void *arg)
{
    gw_http *h = arg;
    int rc = loop_open(h);
    say_started(h, rc);
    if (rc != 0)
        return NULL;
    uv_run(&h->uv, UV_RUN_DEFAULT); /* until on_stop */
    uv_run(&h->uv, UV_RUN_DEFAULT); /* the handles' close callbacks */
    uv_loop_close(&h->uv);
    return NULL;
}

int gw_http_start(gateway *gw, int listen_fd, bool ipv6)
{
    gw_http *h = gw->http = http_new(gw, listen_fd, ipv6);
    if (h == NULL)
        return -1;
    /* The workers first: they touch the loop only for a job, and jobs
     * come from the loop. */
    bool running = start_workers(h) == 0 &&
                   pthread_create(&h->thread, NULL, loop_thread, h) == 0;
    if (running) {
        pthread_mutex_lock(&h->start_mu);
        while (!h->start_done)
            pthread_cond_wait(&h->started, &h->start_mu);
        pthread_mutex_unlock(&h->start_mu);
        if (h->start_rc == 0)
            return 0;
        pthread_join(h->thread, NULL);
    }
    http_stop_workers(h); /* no job was queued: nothing is posted */
    http_free(h);
    gw->http = NULL;
    return -1;
}

/* Quiescing hands the listening socket back. It is shut down at once, so
 * new connections are refused while the requests in flight finish, but
 * closed only once the daemon has stopped. */
static void on_quiesce(resil_work *w)
{
    gw_http *h = (gw_http *)(void *)((char *)w - offsetof(gw_http, quiesce));
    h->quiesced_fd = MHD_quiesce_daemon(h->gw->daemon);
    if (h->quiesced_fd >= 0)
        shutdown(h->quiesced_fd, SHUT_RDWR);
    mhd_run(h);
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

/* The last work on the loop: every parked connection resumed and closed,
 * then the daemon, the upstream and the loop's handles go. */
static void on_stop(resil_work *w)
{
    gw_http *h = (gw_http *)(void *)((char *)w - offsetof(gw_http, stop));
    gateway *gw = h->gw;
    gw_upstream_close(gw, on_aborted);
    chaos_abort_waits(h);
    resume_answered(h);
    mhd_run(h); /* the resumed connections are handled, and closed */
    resil_loop_io_stop(h->loop, &h->mhd_io);
    h->loop->ops->timer_stop(h->loop->self, &h->mhd_timer);
    h->loop->ops->timer_stop(h->loop->self, &h->sweep);
    /* libmicrohttpd refuses to stop with a connection suspended (it
     * aborts); none can be by now, but a leak beats an abort at exit. */
    if (h->parked == 0)
        MHD_stop_daemon(gw->daemon);
    else
        fprintf(stderr, "resil gateway: %u connection%s still suspended at exit\n", h->parked,
                h->parked == 1 ? "" : "s");
    gw->daemon = NULL;
    resil_uv_close(h->ru);
    uv_stop(&h->uv);
}

static void post_to_loop(gw_http *h, resil_work *w, resil_work_fn fn)
{
    w->fn = fn;
    h->loop->ops->post(h->loop->self, w);
}

void gw_http_stop(gateway *gw, resil_duration grace)
{
    gw_http *h = gw->http;
    pthread_mutex_lock(&gw->mu);
    gw->draining = true;
    pthread_mutex_unlock(&gw->mu);
    post_to_loop(h, &h->quiesce, on_quiesce);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(grace / RESIL_S(1)) + 1;
    pthread_mutex_lock(&gw->mu);
    unsigned left = gw->in_flight;
    while (gw->in_flight > 0 &&
           pthread_cond_timedwait(&gw->idle, &gw->mu, &until) == 0)
        ;
    unsigned unfinished = gw->in_flight;
    pthread_mutex_unlock(&gw->mu);
    if (!gw->cfg.quiet)
        fprintf(stderr, "resil gateway: stopping: %u request%s in flight, %u unfinished\n",
                left, left == 1 ? "" : "s", unfinished);
    http_stop_workers(h);
    post_to_loop(h, &h->stop, on_stop);
    pthread_join(h->thread, NULL);
    if (h->quiesced_fd >= 0)
        close(h->quiesced_fd);
    http_free(h);
    gw->http = NULL;
}
