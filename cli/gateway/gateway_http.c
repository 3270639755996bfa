/*
 * gateway_http.c — the listening side of `resil gateway`: framing each
 * request and sending each answer. The idempotency rules it applies to a
 * guarded request are in gateway_rules.c.
 *
 * libmicrohttpd runs one thread per connection, so a request may block on
 * the store and on the upstream without stalling anyone else, and no
 * event-loop state machine is needed for what is, per request, a straight
 * line: collect the body, ask the store, forward or answer, record.
 * Every request is counted in flight from its first line to its last byte,
 * which is what lets SIGTERM wait for exactly the work that is under way.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "gateway.h"


/* ---- bookkeeping --------------------------------------------------------- */

static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    gateway *gw = cls;
    gw_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->gw = gw;
    r->target = strdup(uri);
    r->body.limit = gw->cfg.max_body;
    r->start = resil_clock_now(gw->clock);
    r->idem = "none";
    pthread_mutex_lock(&gw->mu);
    gw->in_flight++;
    pthread_mutex_unlock(&gw->mu);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)conn;
    (void)code;
    gateway *gw = cls;
    gw_req *r = *state;
    *state = NULL;
    if (r == NULL)
        return;
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

static void access_log(gw_req *r, const char *ip, const char *method, int status,
                       size_t bytes)
{
    gateway *gw = r->gw;
    if (gw->cfg.quiet)
        return;
    double ms = resil_dur_to_ms(resil_clock_now(gw->clock) - r->start);
    int64_t wall = resil_clock_wall_now(gw->clock);
    time_t secs = (time_t)(wall / 1000000000);
    struct tm tm;
    char when[32];
    gmtime_r(&secs, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03dZ %s \"%s %s\" %d %zu %.1fms idempotency=%s%s%s\n", when,
            (int)(wall / 1000000 % 1000), ip, method, r->target, status, bytes, ms,
            r->idem, r->note[0] ? " " : "", r->note);
}

/* ---- answers ------------------------------------------------------------- */

/* Add one "Name: value" line (no line end) to a response. The name and
 * value are copied out to be NUL-terminated: on the stack when they fit,
 * else on the heap, so that a long header (a large Set-Cookie) is passed on
 * whole rather than cut at a buffer's size. */
static void add_header_line(struct MHD_Response *resp, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return;
    size_t name_len = (size_t)(colon - line);
    const char *v = colon + 1, *end = line + len;
    while (v < end && *v == ' ')
        v++;
    size_t value_len = (size_t)(end - v);
    char small[1024];
    size_t need = name_len + value_len + 2;
    char *buf = need <= sizeof small ? small : malloc(need);
    if (buf == NULL)
        return;
    memcpy(buf, line, name_len);
    buf[name_len] = '\0';
    memcpy(buf + name_len + 1, v, value_len);
    buf[name_len + 1 + value_len] = '\0';
    MHD_add_response_header(resp, buf, buf + name_len + 1);
    if (buf != small)
        free(buf);
}

/* Add "Name: value\r\n" lines to a response. */
static void add_saved_headers(struct MHD_Response *resp, const char *blob, size_t len)
{
    const char *end = blob + len;
    while (blob < end) {
        const char *eol = memchr(blob, '\n', (size_t)(end - blob));
        const char *line_end = eol ? eol : end;
        size_t n = (size_t)(line_end - blob);
        while (n > 0 && blob[n - 1] == '\r')
            n--;
        add_header_line(resp, blob, n);
        blob = eol ? eol + 1 : end;
    }
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
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)a->status, resp);
    MHD_destroy_response(resp);
    char ip[64];
    gw_client_ip(conn, ip, sizeof ip);
    access_log(r, ip, method, a->status, a->body_len);
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

/* The first call, once the headers are in and before any body is read or
 * anything is asked of the store or the upstream: refuse what a reverse
 * proxy must not act on. MHD_YES lets the request go on. */
static enum MHD_Result check_request(gw_req *r, struct MHD_Connection *conn,
                                     const char *method)
{
    if (!gw_target_is_origin_form(r->target, strlen(r->target))) {
        r->idem = "bad-target";
        return gw_send_error(r, conn, method, 400, "invalid_target",
                             "the request target must be a path (origin-form: /path?query)",
                             NULL);
    }
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    gw_req *r = *state;
    if (r == NULL || r->target == NULL)
        return MHD_NO;
    if (!r->started) {
        r->started = true;
        return check_request(r, conn, method);
    }
    if (*upload_size > 0) {
        gw_buf_append(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->body.overflow) {
        r->idem = "too-large";
        return gw_send_error(r, conn, method, 413, "body_too_large",
                          "the request body is larger than the gateway accepts", NULL);
    }
    if (strcmp(url, "/healthz") == 0 && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        r->idem = "health";
        gw_answer a = {.status = 200, .body = "ok\n", .body_len = 3, .content_type = "text/plain"};
        return gw_send_answer(r, conn, method, &a);
    }
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (!gw_guarded_method(&r->gw->cfg, method) || (key == NULL && !r->gw->cfg.require_key))
        return gw_pass_through(r, conn, method);
    if (key == NULL) {
        r->idem = "missing";
        return gw_send_error(r, conn, method, 400, "idempotency_key_required",
                          "this request needs an Idempotency-Key header", NULL);
    }
    return gw_guarded(r, conn, method, key);
}

/* ---- start and stop ------------------------------------------------------ */

int gw_http_start(gateway *gw, int listen_fd, bool ipv6)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ipv6)
        flags |= MHD_USE_IPv6;
    gw->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, gw,
                                  MHD_OPTION_LISTEN_SOCKET, listen_fd,
                                  MHD_OPTION_URI_LOG_CALLBACK, on_request_line, gw,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000,
                                  MHD_OPTION_END);
    return gw->daemon ? 0 : -1;
}

void gw_http_stop(gateway *gw, resil_duration grace)
{
    int fd = MHD_quiesce_daemon(gw->daemon);
    if (fd >= 0)
        close(fd);
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
    MHD_stop_daemon(gw->daemon);
    gw->daemon = NULL;
}
