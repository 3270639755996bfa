/*
 * gateway_client.c — the gateway's own HTTP/1.1 client for a plain
 * http:// upstream given by its address, on the gateway's loop.
 *
 * Why not libcurl here. A pass-through spends most of its user-space
 * instructions inside curl_multi_socket_action (the URL parsed again, a
 * connection record matched against the cache, the request built and the
 * response stored through generic machinery, timers and clock reads) and
 * two poll() calls per request that no option removes: the alive check of
 * a reused connection and a readability check after sending. A reverse
 * proxy in front of one upstream needs none of it: the address is known at
 * start, the request is the client's own, and the response only has to be
 * framed (gateway_response.c). https:// upstreams, upstreams named by a
 * host name or with credentials in the URL, and upstreams behind a proxy
 * from the environment stay on
 * libcurl; both sit behind gw_upstream_start() with one set of semantics
 * (gateway_upstream.c keeps the breaker, the metrics and the outcome).
 *
 * Shape. Per loop, no locks: a stack of kept connections (at most
 * GW_KEEP_CONNECTIONS idle ones), each with its watch left armed for
 * reading while it idles, so that an upstream closing it is seen at once
 * (the connection is dropped) and taking it again costs no system call. A
 * call builds its request line and headers once (as libcurl wrote them:
 * Host, Accept, the client's end-to-end headers, X-Forwarded-For,
 * Content-Length and libcurl's default Content-Type for a body) into the
 * head buffer of the connection it takes, and writes them with the body
 * in one sendmsg(); it reads with one recv() per readiness into the
 * connection's read buffer, which the parser frames. Both buffers stay
 * with the connection's record from call to call (the head's storage up
 * to HEAD_KEEP bytes), so a kept-alive connection carries a steady stream
 * of requests without allocating for any of them. One loop timer per
 * call bounds it: --timeout in whole milliseconds (rounded up, as libcurl
 * has it), and the connect within the lesser of that and 10 s.
 *
 * At most once. A request's bytes may have left once sendmsg() took any of
 * them (out->may_have_sent, as libcurl's pre-request callback said). A
 * kept connection that turns out dead — the send fails, or it ends before
 * any answer byte — is the upstream closing an idle connection just then:
 * the request goes again on a fresh connection, as libcurl does, unless it
 * must reach the upstream at most once and some of its bytes were taken;
 * then it ends unanswered (out->resend_refused). The resend goes on a new
 * connection, and a new connection is never retried.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gateway.h"

#define READ_SIZE (16 * 1024)
/* A request head's storage kept for the connection's next call at most:
 * room for a large cookie or token, not for every outlier. */
#define HEAD_KEEP (16 * 1024)

typedef struct gw_upconn {
    resil_io io;
    struct gw_client *cl;
    struct gw_upconn *prev, *next; /* the idle stack, or the spares */
    int fd;
    unsigned events;  /* what the watch is armed for */
    gw_call *call;    /* NULL while it idles */
    bool connecting;
    bool reused;      /* it has carried a request before this one */
    bool answered;    /* a byte of an answer came for its call */
    char *rbuf;       /* bytes read and not yet framed */
    size_t rlen, rcap;
    gw_buf head;      /* its call's request line and headers; empty between calls */
} gw_upconn;

struct gw_client {
    resil_loop *loop;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char host[300];   /* as libcurl writes it: "Host: addr[:port]\r\n" */
    size_t host_len;
    char *prefix;     /* the base URL's path, without its trailing '/' */
    size_t prefix_len;
    char where[128];  /* "ADDR port PORT", for messages */
    long timeout_ms, connect_ms;
    gw_upconn *idle, *spare;
    size_t n_idle;
    gw_client_finished_fn *finished;
    void *ud;
};

/* ---- opening: is the upstream one for this client? ------------------------ */

static bool proxy_or_not_http(const char *scheme, bool proxy_env)
{
    return proxy_env || scheme == NULL || strcmp(scheme, "http") != 0;
}

/* The host as an address (IPv4, or IPv6 in brackets); false for a name. */
static bool host_address(struct gw_client *cl, const char *host, long port)
{
    size_t len = strlen(host);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&cl->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&cl->addr;
    char inner[64];
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        cl->addr_len = sizeof *a4;
        return true;
    }
    if (len < 3 || len - 2 >= sizeof inner || host[0] != '[' || host[len - 1] != ']')
        return false;
    memcpy(inner, host + 1, len - 2);
    inner[len - 2] = '\0';
    if (inet_pton(AF_INET6, inner, &a6->sin6_addr) != 1)
        return false;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    cl->addr_len = sizeof *a6;
    return true;
}

/* Credentials in the URL: libcurl turns them into Authorization. */
static bool has_userinfo(CURLU *url)
{
    char *user = NULL;
    bool has = curl_url_get(url, CURLUPART_USER, &user, 0) == CURLUE_OK;
    curl_free(user);
    return has;
}

static bool read_target(struct gw_client *cl, CURLU *url, bool proxy_env)
{
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
    bool ok = curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              !proxy_or_not_http(scheme, proxy_env) && !has_userinfo(url) &&
              curl_url_get(url, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
              curl_url_get(url, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
              curl_url_get(url, CURLUPART_PATH, &path, 0) == CURLUE_OK;
    long p = ok ? strtol(port, NULL, 10) : 0;
    ok = ok && p > 0 && p <= 65535 && host_address(cl, host, p);
    if (ok) {
        int n = p == 80 ? snprintf(cl->host, sizeof cl->host, "Host: %s\r\n", host)
                        : snprintf(cl->host, sizeof cl->host, "Host: %s:%ld\r\n", host, p);
        snprintf(cl->where, sizeof cl->where, "%s port %ld", host, p);
        size_t plen = strlen(path);
        while (plen > 0 && path[plen - 1] == '/')
            plen--;
        cl->host_len = (size_t)n;
        cl->prefix_len = plen;
        ok = n > 0 && (size_t)n < sizeof cl->host && (cl->prefix = strndup(path, plen)) != NULL;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    return ok;
}

int gw_client_open(resil_loop *loop, const char *base, bool proxy_env, resil_duration timeout,
                   gw_client_finished_fn *finished, void *ud, struct gw_client **out)
{
    *out = NULL;
    struct gw_client *cl = calloc(1, sizeof *cl);
    CURLU *url = curl_url();
    if (cl == NULL || url == NULL) {
        free(cl);
        curl_url_cleanup(url);
        return -1;
    }
    bool mine = curl_url_set(url, CURLUPART_URL, base, 0) == CURLUE_OK &&
                read_target(cl, url, proxy_env);
    curl_url_cleanup(url);
    if (!mine) {
        free(cl->prefix);
        free(cl);
        return 0; /* not one for this client: libcurl serves it */
    }
    cl->loop = loop;
    cl->timeout_ms = gw_timeout_ms(timeout); /* what libcurl would wait */
    cl->connect_ms = gw_connect_ms(cl->timeout_ms);
    cl->finished = finished;
    cl->ud = ud;
    *out = cl;
    return 0;
}

/* ---- connections ----------------------------------------------------------- */

static void on_io(resil_io *io, int fd, unsigned events);

static void watch(gw_upconn *k, unsigned events)
{
    if (events == k->events)
        return; /* armed as it is: no epoll_ctl */
    k->events = events;
    if (resil_loop_io_start(k->cl->loop, &k->io, k->fd, events) != 0)
        k->events = 0;
}

static void idle_unlink(struct gw_client *cl, gw_upconn *k)
{
    GW_LIST_UNLINK(cl->idle, k, prev, next);
    cl->n_idle--;
}

/* The socket goes; the record (and its buffers) waits for the next one. */
static void conn_close(struct gw_client *cl, gw_upconn *k)
{
    resil_loop_io_stop(cl->loop, &k->io); /* harmless when it never started */
    k->events = 0;
    close(k->fd);
    k->fd = -1;
    k->call = NULL;
    k->next = cl->spare;
    k->prev = NULL;
    cl->spare = k;
}

static gw_upconn *conn_record(struct gw_client *cl)
{
    gw_upconn *k = cl->spare;
    if (k != NULL) {
        cl->spare = k->next;
        char *rbuf = k->rbuf;
        size_t rcap = k->rcap;
        gw_buf head = k->head;
        memset(k, 0, sizeof *k);
        k->rbuf = rbuf;
        k->rcap = rcap;
        k->head = head;
    } else if ((k = calloc(1, sizeof *k)) == NULL) {
        return NULL;
    }
    k->cl = cl;
    k->io.fn = on_io;
    return k;
}

/* A new connection, its connect started; NULL with errno set. */
static gw_upconn *conn_open(struct gw_client *cl)
{
    gw_upconn *k = conn_record(cl);
    if (k == NULL)
        return NULL;
    k->fd = socket(cl->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (k->fd < 0) {
        int e = errno;
        k->next = cl->spare;
        cl->spare = k;
        errno = e;
        return NULL;
    }
    int one = 1;
    setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* libcurl's default */
    if (connect(k->fd, (struct sockaddr *)&cl->addr, cl->addr_len) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            conn_close(cl, k);
            errno = e;
            return NULL;
        }
        k->connecting = true;
    }
    return k;
}

/* ---- the call's end ----------------------------------------------------------- */

static resil_instant now(struct gw_client *cl) { return cl->loop->ops->now(cl->loop->self); }

static void arm(struct gw_client *cl, gw_call *c, long ms)
{
    resil_duration left = c->deadline - now(cl);
    resil_duration d = RESIL_MS(ms);
    cl->loop->ops->timer_start(cl->loop->self, &c->timer, left < d ? (left > 0 ? left : 0) : d);
}

/* The call lets go of its connection, and of its request head there: the
 * connection is kept for the next call when it may carry one and nothing
 * unasked for came on it, else closed. */
static void release_conn(struct gw_client *cl, gw_call *c, bool keep)
{
    gw_upconn *k = c->conn;
    c->conn = NULL;
    if (k == NULL)
        return;
    gw_buf_reuse(&k->head, HEAD_KEEP);
    if (!keep || k->rlen != 0 || cl->n_idle >= GW_KEEP_CONNECTIONS) {
        conn_close(cl, k);
        return;
    }
    k->call = NULL;
    k->reused = true;
    GW_LIST_PUSH(cl->idle, k, prev, next);
    cl->n_idle++;
    watch(k, RESIL_IO_READ); /* an idle connection that stirs is dropped */
}

static void call_end(struct gw_client *cl, gw_call *c, bool keep)
{
    cl->loop->ops->timer_stop(cl->loop->self, &c->timer);
    release_conn(cl, c, keep);
    cl->finished(c, cl->ud);
}

/* The words of a resend refused and of an answer over --max-body are
 * gateway_upstream.c's (describe_failure()), for both clients. */
static void call_failed(struct gw_client *cl, gw_call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void call_failed(struct gw_client *cl, gw_call *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->out->error, sizeof c->out->error, fmt, ap);
    va_end(ap);
    c->out->curl_code = code;
    call_end(cl, c, false);
}

static long ms_since(struct gw_client *cl, resil_instant t)
{
    return (long)((now(cl) - t) / RESIL_MS(1));
}

/* No connection: nothing was sent, a key may be released. In libcurl's
 * words (the errno goes to the log's debug level there, and nowhere here). */
static void connect_failed(struct gw_client *cl, gw_call *c)
{
    call_failed(cl, c, CURLE_COULDNT_CONNECT,
                "Failed to connect to %.120s after %ld ms: Couldn't connect to server", cl->where,
                ms_since(cl, c->begun));
}

/* ---- sending ------------------------------------------------------------------ */

/* With the call on its connection: */
static size_t request_size(const gw_call *c) { return c->conn->head.len + c->body_len; }

static void send_request(struct gw_client *cl, gw_call *c);
static void go(struct gw_client *cl, gw_call *c);

/* Its connection died with no answer byte: a kept one is sent on again
 * when the rule allows (see the top), anything else fails. */
static void conn_died(struct gw_client *cl, gw_call *c, int code, const char *fmt,
                      const char *detail)
{
    gw_upconn *k = c->conn;
    if (!k->reused || k->answered) {
        call_failed(cl, c, code, fmt, detail);
        return;
    }
    if (c->once && c->sent > 0) {
        c->out->resend_refused = true;
        call_failed(cl, c, CURLE_GOT_NOTHING, "%s", ""); /* worded upstream */
        return;
    }
    gw_upconn *fresh = conn_open(cl); /* while k is open: another record */
    if (fresh == NULL) {
        connect_failed(cl, c);
        return;
    }
    gw_buf head = fresh->head; /* the request goes with the call, storage for storage */
    fresh->head = k->head;
    k->head = head;
    release_conn(cl, c, false);
    c->sent = 0;
    c->conn = fresh;
    go(cl, c);
}

static void send_request(struct gw_client *cl, gw_call *c)
{
    gw_upconn *k = c->conn;
    const gw_buf *head = &k->head;
    size_t total = request_size(c);
    struct iovec iov[2];
    int n_iov = 0;
    if (c->sent < head->len)
        iov[n_iov++] = (struct iovec){head->p + c->sent, head->len - c->sent};
    size_t body_at = c->sent > head->len ? c->sent - head->len : 0;
    if (c->body_len > body_at)
        iov[n_iov++] = (struct iovec){(char *)c->body + body_at, c->body_len - body_at};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
    ssize_t n = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        conn_died(cl, c, CURLE_SEND_ERROR, "Send failure: %s", strerror(errno));
        return;
    }
    if (n > 0) {
        c->out->may_have_sent = true;
        c->sent += (size_t)n;
    }
    watch(k, c->sent == total ? RESIL_IO_READ : RESIL_IO_READ | RESIL_IO_WRITE);
}

static void connected(struct gw_client *cl, gw_call *c)
{
    gw_upconn *k = c->conn;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        connect_failed(cl, c);
        return;
    }
    k->connecting = false;
    arm(cl, c, cl->timeout_ms);
    send_request(cl, c);
}

/* A kept connection when one idles, else a new one, for c: false when
 * none could be had (c has failed). */
static bool take_conn(struct gw_client *cl, gw_call *c)
{
    gw_upconn *k = cl->idle;
    if (k != NULL) {
        idle_unlink(cl, k);
    } else if ((k = conn_open(cl)) == NULL) {
        connect_failed(cl, c);
        return false;
    }
    c->conn = k;
    return true;
}

/* c's request, its head on its connection: sent, or the connect first. */
static void go(struct gw_client *cl, gw_call *c)
{
    gw_upconn *k = c->conn;
    k->call = c;
    k->answered = false;
    if (k->connecting) {
        arm(cl, c, cl->connect_ms);
        watch(k, RESIL_IO_WRITE);
        return;
    }
    send_request(cl, c);
}

/* ---- receiving ------------------------------------------------------------------ */

static bool sink_field(void *ud, const char *line, size_t len)
{
    return gw_reply_header_line(ud, line, len);
}

static bool sink_body(void *ud, const char *data, size_t len)
{
    gw_reply *r = ud;
    return gw_buf_append(&r->body, data, len);
}

static void framed(struct gw_client *cl, gw_call *c, gw_resp_rc rc)
{
    gw_reply *out = c->out;
    if (rc == GW_RESP_DONE) {
        out->status = c->resp.status;
        call_end(cl, c, c->resp.keep && c->sent == request_size(c));
    } else if (out->body.overflow || out->headers.overflow) {
        call_failed(cl, c, CURLE_WRITE_ERROR, "%s", ""); /* worded upstream */
    } else {
        call_failed(cl, c, CURLE_WEIRD_SERVER_REPLY, "malformed upstream response: %s",
                    c->resp.error);
    }
}

/* The connection ended (EOF or an error) while its call was on it. */
static void ended(struct gw_client *cl, gw_call *c, int err)
{
    gw_upconn *k = c->conn;
    if (!k->answered) {
        if (err == 0)
            conn_died(cl, c, CURLE_GOT_NOTHING, "%s", "Empty reply from server");
        else
            conn_died(cl, c, CURLE_RECV_ERROR, "Recv failure: %s", strerror(err));
        return;
    }
    if (err != 0)
        call_failed(cl, c, CURLE_RECV_ERROR, "Recv failure: %s", strerror(err));
    else if (gw_resp_eof(&c->resp) == GW_RESP_DONE) /* a body that ran to the close */
        framed(cl, c, GW_RESP_DONE);
    else if (c->resp.has_length && !c->resp.chunked && c->resp.remaining > 0)
        call_failed(cl, c, CURLE_PARTIAL_FILE, "transfer closed with %llu bytes remaining to read",
                    (unsigned long long)c->resp.remaining);
    else
        call_failed(cl, c, CURLE_PARTIAL_FILE, "%s",
                    "transfer closed with outstanding read data remaining");
}

static bool room_to_read(gw_upconn *k)
{
    if (k->rcap - k->rlen >= READ_SIZE / 2)
        return true;
    size_t cap = k->rcap ? k->rcap * 2 : READ_SIZE;
    char *p = realloc(k->rbuf, cap);
    if (p == NULL)
        return false;
    k->rbuf = p;
    k->rcap = cap;
    return true;
}

static void receive(struct gw_client *cl, gw_call *c)
{
    gw_upconn *k = c->conn;
    if (!room_to_read(k)) {
        call_failed(cl, c, CURLE_OUT_OF_MEMORY, "%s", "out of memory");
        return;
    }
    ssize_t n = recv(k->fd, k->rbuf + k->rlen, k->rcap - k->rlen, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        ended(cl, c, n == 0 ? 0 : errno);
        return;
    }
    k->answered = true;
    k->rlen += (size_t)n;
    gw_resp_sink sink = {.field = sink_field, .body = sink_body, .ud = c->out};
    size_t used;
    gw_resp_rc rc = gw_resp_parse(&c->resp, k->rbuf, k->rlen, &used, &sink);
    k->rlen -= used;
    if (k->rlen > 0 && used > 0)
        memmove(k->rbuf, k->rbuf + used, k->rlen);
    if (rc != GW_RESP_MORE)
        framed(cl, c, rc);
}

static void on_io(resil_io *io, int fd, unsigned events)
{
    (void)fd;
    gw_upconn *k = (gw_upconn *)(void *)io;
    struct gw_client *cl = k->cl;
    gw_call *c = k->call;
    if (c == NULL) { /* idle, and the upstream closed it (or spoke unasked) */
        idle_unlink(cl, k);
        conn_close(cl, k);
        return;
    }
    if (k->connecting) {
        connected(cl, c);
        return;
    }
    if ((events & RESIL_IO_WRITE) && c->sent < request_size(c)) {
        send_request(cl, c);
        if (c->conn != k)
            return;
    }
    if (events & (RESIL_IO_READ | RESIL_IO_ERROR))
        receive(cl, c);
}

static void on_timeout(resil_timer *t)
{
    gw_call *c = (gw_call *)(void *)((char *)t - offsetof(gw_call, timer));
    struct gw_client *cl = c->client;
    gw_reply *out = c->out;
    long ms = ms_since(cl, c->begun);
    out->timed_out = true;
    out->curl_code = CURLE_OPERATION_TIMEDOUT;
    if (c->conn != NULL && c->conn->connecting)
        snprintf(out->error, sizeof out->error, "Connection timed out after %ld milliseconds",
                 ms);
    else
        snprintf(out->error, sizeof out->error,
                 "Operation timed out after %ld milliseconds with %llu bytes received", ms,
                 (unsigned long long)c->resp.body_bytes);
    call_end(cl, c, false);
}

/* ---- the request ------------------------------------------------------------------ */

static void put(gw_buf *b, const char *s, size_t len) { gw_buf_append(b, s, len); }

static void put_header(void *ud, const char *name, const char *value)
{
    gw_buf *b = ud;
    put(b, name, strlen(name));
    size_t vlen = strlen(value);
    if (vlen == 0) { /* libcurl sends an empty value as "Name:" */
        put(b, ":\r\n", 3);
        return;
    }
    put(b, ": ", 2);
    put(b, value, vlen);
    put(b, "\r\n", 2);
}

/* In decimal, without printf's machinery (a request's only number). */
static void put_number(gw_buf *b, size_t n)
{
    char digits[24];
    size_t at = sizeof digits;
    do {
        digits[--at] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    put(b, digits + at, sizeof digits - at);
}

/* The request line and headers, as libcurl wrote them, into the head
 * buffer (empty) of the call's connection. */
static bool build_head(struct gw_client *cl, gw_call *c, const gw_forward *f)
{
    gw_buf *b = &c->conn->head;
    b->limit = (size_t)-1;
    put(b, f->method, strlen(f->method));
    put(b, " ", 1);
    put(b, cl->prefix, cl->prefix_len);
    put(b, f->target, strlen(f->target));
    put(b, " HTTP/1.1\r\n", 11);
    put(b, cl->host, cl->host_len);
    if (MHD_lookup_connection_value(f->conn, MHD_HEADER_KIND, "Accept") == NULL)
        put(b, "Accept: */*\r\n", 13);
    gw_forward_headers(f, put_header, b);
    if (gw_forward_sends_body(f)) {
        put(b, "Content-Length: ", 16);
        put_number(b, f->body_len);
        put(b, "\r\n", 2);
        if (MHD_lookup_connection_value(f->conn, MHD_HEADER_KIND, "Content-Type") == NULL)
            put(b, "Content-Type: application/x-www-form-urlencoded\r\n", 49);
    }
    put(b, "\r\n", 2);
    return !b->overflow;
}

void gw_client_start(struct gw_client *cl, gw_call *c, const gw_forward *f)
{
    c->client = cl;
    c->timer.fn = on_timeout;
    c->begun = now(cl);
    c->deadline = c->begun + RESIL_MS(cl->timeout_ms);
    c->body = f->body;
    c->body_len = gw_forward_sends_body(f) ? f->body_len : 0;
    gw_resp_init(&c->resp, strcmp(f->method, "HEAD") == 0);
    if (!gw_target_is_origin_form(f->target, strlen(f->target))) {
        call_failed(cl, c, CURLE_URL_MALFORMAT, "%s", "cannot build the upstream URL");
        return;
    }
    if (!take_conn(cl, c))
        return;
    if (!build_head(cl, c, f)) {
        call_failed(cl, c, CURLE_OUT_OF_MEMORY, "%s", "out of memory");
        return;
    }
    arm(cl, c, cl->timeout_ms);
    go(cl, c);
}

void gw_client_abort(struct gw_client *cl, gw_call *c)
{
    cl->loop->ops->timer_stop(cl->loop->self, &c->timer);
    release_conn(cl, c, false);
}

void gw_client_close(struct gw_client *cl)
{
    if (cl == NULL)
        return;
    while (cl->idle != NULL) {
        gw_upconn *k = cl->idle;
        idle_unlink(cl, k);
        conn_close(cl, k);
    }
    for (gw_upconn *k = cl->spare, *next; k != NULL; k = next) {
        next = k->next;
        free(k->rbuf);
        gw_buf_free(&k->head);
        free(k);
    }
    free(cl->prefix);
    free(cl);
}
