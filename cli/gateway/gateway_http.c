/*
 * gateway_http.c — the listening side of `resil gateway`: the front door
 * (what a request must be before anything acts on it), the connections'
 * deadlines, the workers, and each answer. The idempotency rules applied
 * to a guarded request are in gateway_rules.c.
 *
 * Connections are cheap and work is bounded. libmicrohttpd runs one epoll
 * thread for every socket, so thousands of idle or slow clients cost file
 * descriptors, not threads, and a per-client cap keeps one address from
 * taking them all. A request that needs the store or the upstream (both
 * block) is handed to a fixed pool of workers while its connection is
 * suspended; the rules run there as the straight line they are (collect,
 * ask the store, forward, record) and the answer they send is queued when
 * the connection resumes.
 *
 * libmicrohttpd's own timeout restarts with every byte, so a client that
 * dribbles a byte every few seconds would be kept forever. Each connection
 * therefore carries a deadline of its own: its request's line and headers
 * within --header-timeout of the connection opening (or of its previous
 * answer), its body within --body-timeout of its headers. A sweeper thread
 * answers 408 to a connection past its deadline and shuts its socket down;
 * the epoll thread then closes it as any other. A connection whose request
 * is with a worker, or whose answer is being sent, has no such deadline.
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
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway.h"

/* ---- connections and their deadlines ----------------------------------------- */

typedef enum gw_phase {
    PHASE_HEADERS,   /* waiting for a request line and headers */
    PHASE_BODY,      /* headers in, reading the body */
    PHASE_BUSY,      /* with a worker */
    PHASE_ANSWERING, /* an answer is queued or being sent */
    PHASE_CUT        /* past its deadline: being shut down */
} gw_phase;

typedef struct gw_conn {
    struct gw_conn *prev, *next;
    int fd;
    gw_phase phase;
    resil_instant deadline;
} gw_conn;

typedef struct gw_http {
    gateway *gw;
    pthread_mutex_t mu;
    gw_conn conns;           /* list sentinel: every open connection */
    gw_req *jobs_head, *jobs_tail;
    pthread_cond_t work;     /* a job was queued, or the workers must stop */
    pthread_cond_t tick;     /* the sweeper must stop */
    bool stopping;
    pthread_t sweeper;
    pthread_t *workers;
    unsigned n_workers;
    pthread_mutex_t log_mu;  /* libmicrohttpd's messages, at most one a second */
    resil_instant log_last;
    unsigned log_dropped;
} gw_http;

/* Move a connection to another phase, with the deadline that phase has. */
static void set_phase(gw_http *h, gw_conn *c, gw_phase phase)
{
    if (c == NULL)
        return;
    const gw_config *cfg = &h->gw->cfg;
    resil_instant now = resil_clock_now(h->gw->clock);
    pthread_mutex_lock(&h->mu);
    if (c->phase != PHASE_CUT) {
        c->phase = phase;
        c->deadline = phase == PHASE_HEADERS ? now + cfg->header_timeout
                      : phase == PHASE_BODY  ? now + cfg->body_timeout
                                             : 0;
    }
    pthread_mutex_unlock(&h->mu);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_state,
                          enum MHD_ConnectionNotificationCode code)
{
    gw_http *h = cls;
    gw_conn *c = *socket_state;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (c == NULL)
            return;
        pthread_mutex_lock(&h->mu);
        c->prev->next = c->next;
        c->next->prev = c->prev;
        pthread_mutex_unlock(&h->mu);
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
    pthread_mutex_lock(&h->mu);
    c->phase = PHASE_HEADERS;
    c->deadline = resil_clock_now(h->gw->clock) + h->gw->cfg.header_timeout;
    c->next = h->conns.next;
    c->prev = &h->conns;
    h->conns.next->prev = c;
    h->conns.next = c;
    pthread_mutex_unlock(&h->mu);
    *socket_state = c;
}

/* Answer 408 to a connection past its deadline and shut it down; the epoll
 * thread sees the socket end and closes it. Under h->mu: the connection
 * cannot be closed (and its fd reused) while this runs. */
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

static void sweep(gw_http *h)
{
    resil_instant now = resil_clock_now(h->gw->clock);
    for (gw_conn *c = h->conns.next; c != &h->conns; c = c->next) {
        if ((c->phase == PHASE_HEADERS || c->phase == PHASE_BODY) && now >= c->deadline)
            cut(c);
    }
}

/* How often deadlines are checked: a tenth of the shortest, 10 ms..1 s. */
static resil_duration sweep_every(const gw_config *cfg)
{
    resil_duration t = cfg->header_timeout < cfg->body_timeout ? cfg->header_timeout
                                                               : cfg->body_timeout;
    t /= 10;
    return t < RESIL_MS(10) ? RESIL_MS(10) : t > RESIL_S(1) ? RESIL_S(1) : t;
}

static void *sweeper(void *arg)
{
    gw_http *h = arg;
    resil_duration every = sweep_every(&h->gw->cfg);
    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long long ns = until.tv_nsec + (long long)every;
        until.tv_sec += (time_t)(ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&h->tick, &h->mu, &until);
        sweep(h);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- workers --------------------------------------------------------------------- */

static void run_job(gw_req *r)
{
    const gw_config *cfg = &r->gw->cfg;
    if (gw_guarded_method(cfg, r->method) && r->key != NULL)
        r->worker_result = gw_guarded(r, r->conn, r->method, r->key);
    else
        r->worker_result = gw_pass_through(r, r->conn, r->method);
}

/* Take the next job; NULL once stopping with nothing left to take. */
static gw_req *next_job(gw_http *h)
{
    pthread_mutex_lock(&h->mu);
    while (h->jobs_head == NULL && !h->stopping)
        pthread_cond_wait(&h->work, &h->mu);
    gw_req *r = h->stopping ? NULL : h->jobs_head;
    if (r != NULL) {
        h->jobs_head = r->next_job;
        if (h->jobs_head == NULL)
            h->jobs_tail = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    return r;
}

static void *worker(void *arg)
{
    gw_http *h = arg;
    gw_req *r;
    while ((r = next_job(h)) != NULL) {
        run_job(r);
        MHD_resume_connection(r->conn);
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
    gw_buf_free(&r->body);
    free(r->target);
    free(r);
    pthread_mutex_lock(&gw->mu);
    if (--gw->in_flight == 0)
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
    fprintf(stderr, "%s.%03dZ %s \"%s %s\" %d %zu %.1fms idempotency=%s%s%s\n", when,
            (int)(wall / 1000000 % 1000), ip, method, target ? target : "-", status, bytes,
            ms, r->idem, r->note[0] ? " " : "", r->note);
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
    set_phase(r->gw->http, r->link, PHASE_ANSWERING);
    if (r->on_worker) { /* queued by the MHD thread once resumed */
        r->answer = resp;
        r->answer_status = (unsigned)a->status;
        return MHD_YES;
    }
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

/* The work that may block (the store, the upstream) goes to a worker;
 * the connection sleeps meanwhile and costs no thread. */
static enum MHD_Result dispatch(gw_req *r, struct MHD_Connection *conn, const char *method)
{
    gw_http *h = r->gw->http;
    r->conn = conn;
    r->method = method;
    r->on_worker = true;
    set_phase(h, r->link, PHASE_BUSY);
    MHD_suspend_connection(conn);
    pthread_mutex_lock(&h->mu);
    if (h->jobs_tail != NULL)
        h->jobs_tail->next_job = r;
    else
        h->jobs_head = r;
    h->jobs_tail = r;
    pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
    return MHD_YES;
}

/* Back from a worker: queue the answer it prepared. */
static enum MHD_Result resumed(gw_req *r, struct MHD_Connection *conn)
{
    struct MHD_Response *resp = r->answer;
    r->answer = NULL;
    if (resp == NULL)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(conn, r->answer_status, resp);
    MHD_destroy_response(resp);
    return ret == MHD_YES ? r->worker_result : MHD_NO;
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
    if (r->on_worker)
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

static gw_http *http_new(gateway *gw)
{
    gw_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->gw = gw;
    h->conns.next = h->conns.prev = &h->conns;
    h->workers = calloc(gw->cfg.workers, sizeof *h->workers);
    if (h->workers == NULL) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->log_mu, NULL);
    pthread_cond_init(&h->work, NULL);
    pthread_cond_init(&h->tick, NULL);
    return h;
}

/* Stop the sweeper and the workers (each finishes the job it holds); jobs
 * no worker took are resumed without an answer, which closes them. */
static void http_stop_threads(gw_http *h)
{
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    gw_req *left = h->jobs_head;
    h->jobs_head = h->jobs_tail = NULL;
    pthread_cond_broadcast(&h->work);
    pthread_cond_broadcast(&h->tick);
    pthread_mutex_unlock(&h->mu);
    for (unsigned i = 0; i < h->n_workers; i++)
        pthread_join(h->workers[i], NULL);
    if (h->sweeper)
        pthread_join(h->sweeper, NULL);
    while (left != NULL) {
        gw_req *next = left->next_job;
        left->worker_result = MHD_NO;
        MHD_resume_connection(left->conn);
        left = next;
    }
}

static void http_free(gw_http *h)
{
    pthread_cond_destroy(&h->tick);
    pthread_cond_destroy(&h->work);
    pthread_mutex_destroy(&h->log_mu);
    pthread_mutex_destroy(&h->mu);
    free(h->workers);
    free(h);
}

static int start_threads(gw_http *h)
{
    if (pthread_create(&h->sweeper, NULL, sweeper, h) != 0)
        return -1;
    for (; h->n_workers < h->gw->cfg.workers; h->n_workers++) {
        if (pthread_create(&h->workers[h->n_workers], NULL, worker, h) != 0)
            return -1;
    }
    return 0;
}

/* libmicrohttpd counts its own timeout in whole seconds: round up. */
static unsigned whole_seconds(resil_duration d)
{
    resil_duration s = (d + RESIL_S(1) - 1) / RESIL_S(1);
    return s < 1 ? 1 : (unsigned)s;
}

int gw_http_start(gateway *gw, int listen_fd, bool ipv6)
{
    gw_http *h = gw->http = http_new(gw);
    if (h == NULL)
        return -1;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (ipv6)
        flags |= MHD_USE_IPv6;
    if (start_threads(h) == 0)
        gw->daemon = MHD_start_daemon(
            flags, 0, NULL, NULL, handle, gw,
            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, /* first, so that it hears everything */
            MHD_OPTION_LISTEN_SOCKET, listen_fd,
            MHD_OPTION_URI_LOG_CALLBACK, on_request_line, gw,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
            MHD_OPTION_CONNECTION_TIMEOUT, whole_seconds(gw->cfg.idle_timeout),
            MHD_OPTION_CONNECTION_LIMIT, gw->cfg.max_connections,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, gw->cfg.max_per_client,
            MHD_OPTION_STRICT_FOR_CLIENT, 1,
            MHD_OPTION_END);
    if (gw->daemon != NULL)
        return 0;
    http_stop_threads(h);
    http_free(h);
    gw->http = NULL;
    return -1;
}

/* Quiescing hands the listening socket back. It is shut down at once, so
 * new connections are refused while the requests in flight finish, but
 * closed only once the daemon has stopped: its epoll thread may still be
 * taking the descriptor out of its set, and a number closed under it could
 * be reused by then. */
void gw_http_stop(gateway *gw, resil_duration grace)
{
    int fd = MHD_quiesce_daemon(gw->daemon);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(grace / RESIL_S(1)) + 1;
    pthread_mutex_lock(&gw->mu);
    gw->draining = true;
    unsigned left = gw->in_flight;
    while (gw->in_flight > 0 &&
           pthread_cond_timedwait(&gw->idle, &gw->mu, &until) == 0)
        ;
    unsigned unfinished = gw->in_flight;
    pthread_mutex_unlock(&gw->mu);
    if (!gw->cfg.quiet)
        fprintf(stderr, "resil gateway: stopping: %u request%s in flight, %u unfinished\n",
                left, left == 1 ? "" : "s", unfinished);
    http_stop_threads(gw->http);
    MHD_stop_daemon(gw->daemon);
    gw->daemon = NULL;
    if (fd >= 0)
        close(fd);
    http_free(gw->http);
    gw->http = NULL;
}
