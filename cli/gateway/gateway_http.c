/*
 * gateway_http.c — the listening side of `resil gateway`, and the
 * idempotency rules it applies to each request.
 *
 * libmicrohttpd runs one thread per connection, so a request may block on
 * the store and on the upstream without stalling anyone else, and no
 * event-loop state machine is needed for what is, per request, a straight
 * line: collect the body, ask the store, forward or answer, record. The
 * rules live in one function (guarded()) that reads like the protocol:
 * first → forward and save (or release on a failure the client should
 * retry), replay → the saved answer, in progress → 409, mismatch → 422.
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

typedef struct gw_req {
    gateway *gw;
    char *target;   /* raw path and query */
    gw_buf body;
    bool started;
    resil_instant start;
    const char *idem; /* what the idempotency rules did, for the log */
    char note[300];   /* extra log detail */
} gw_req;

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

static void client_ip(struct MHD_Connection *conn, char *buf, size_t cap)
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

typedef struct answer {
    int status;
    const char *headers; /* "Name: value\r\n" lines; may be NULL */
    size_t headers_len;
    const void *body;
    size_t body_len;
    bool replayed;
    const char *retry_after;
    const char *content_type;
} answer;

static enum MHD_Result send_answer(gw_req *r, struct MHD_Connection *conn,
                                   const char *method, const answer *a)
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
    client_ip(conn, ip, sizeof ip);
    access_log(r, ip, method, a->status, a->body_len);
    return ret;
}

/* A short JSON error of the gateway's own. */
static enum MHD_Result send_error(gw_req *r, struct MHD_Connection *conn,
                                  const char *method, int status, const char *code,
                                  const char *message, const char *retry_after)
{
    char body[512];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}\n", code,
                     message);
    answer a = {.status = status, .body = body, .body_len = (size_t)n,
                .retry_after = retry_after, .content_type = "application/json"};
    return send_answer(r, conn, method, &a);
}

static enum MHD_Result send_reply(gw_req *r, struct MHD_Connection *conn,
                                  const char *method, const gw_reply *up)
{
    if (up->curl_code != 0)
        return up->timed_out
                   ? send_error(r, conn, method, 504, "upstream_timeout",
                                "the upstream did not answer in time", NULL)
                   : send_error(r, conn, method, 502, "upstream_unavailable",
                                "the upstream could not be reached", NULL);
    answer a = {.status = (int)up->status, .headers = up->headers.p,
                .headers_len = up->headers.len, .body = up->body.p,
                .body_len = up->body.len};
    return send_answer(r, conn, method, &a);
}

/* ---- the rules ----------------------------------------------------------- */

static bool guarded_method(const gw_config *cfg, const char *method)
{
    for (size_t i = 0; i < cfg->n_methods; i++) {
        if (strcmp(cfg->methods[i], method) == 0)
            return true;
    }
    return false;
}

/* Answers the client should retry were not a result: give the key back. */
static bool retry_worthy(const gw_reply *up)
{
    return up->curl_code != 0 || up->status >= 500 || up->status == 408 ||
           up->status == 429;
}

static void forward(gw_req *r, struct MHD_Connection *conn, const char *method,
                    gw_reply *up)
{
    char ip[64];
    client_ip(conn, ip, sizeof ip);
    gw_forward f = {.method = method, .target = r->target, .client_ip = ip,
                    .body = r->body.p, .body_len = r->body.len, .conn = conn};
    gw_upstream_send(r->gw, &f, up);
    if (up->curl_code != 0)
        snprintf(r->note, sizeof r->note, "upstream_error=\"%s\"", up->error);
}

static enum MHD_Result pass_through(gw_req *r, struct MHD_Connection *conn,
                                    const char *method)
{
    gw_reply up;
    forward(r, conn, method, &up);
    enum MHD_Result ret = send_reply(r, conn, method, &up);
    gw_reply_free(&up);
    return ret;
}

/* First: run it upstream; save what it answered, or release the key. */
static enum MHD_Result run_first(gw_req *r, struct MHD_Connection *conn,
                                 const char *method, const resil_store_key *k,
                                 uint64_t lease)
{
    gateway *gw = r->gw;
    gw_reply up;
    resil_err err = {0};
    forward(r, conn, method, &up);
    if (retry_worthy(&up)) {
        r->idem = "released";
        if (resil_store_release(gw->store, k, lease, &err) != 0)
            fprintf(stderr, "resil gateway: release failed: %s\n", err.message);
    } else {
        resil_store_response saved = {.status = (int)up.status,
                                      .headers = up.headers.p,
                                      .headers_len = up.headers.len,
                                      .body = up.body.p,
                                      .body_len = up.body.len};
        if (resil_store_complete(gw->store, k, lease, &saved, &err) != 0)
            fprintf(stderr, "resil gateway: saving the response failed: %s\n",
                    err.message);
    }
    enum MHD_Result ret = send_reply(r, conn, method, &up);
    gw_reply_free(&up);
    return ret;
}

static enum MHD_Result guarded(gw_req *r, struct MHD_Connection *conn,
                               const char *method, const char *key)
{
    gateway *gw = r->gw;
    const char *tenant = "";
    if (gw->cfg.tenant_header != NULL) {
        tenant = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, gw->cfg.tenant_header);
        if (tenant == NULL || *tenant == '\0' || strlen(tenant) > RESIL_STORE_FIELD_MAX) {
            r->idem = "bad-tenant";
            return send_error(r, conn, method, 400, "tenant_required",
                              "this gateway needs a tenant header of 1 to 255 bytes", NULL);
        }
    }
    if (*key == '\0' || strlen(key) > RESIL_STORE_FIELD_MAX) {
        r->idem = "bad-key";
        return send_error(r, conn, method, 400, "invalid_idempotency_key",
                          "Idempotency-Key must be 1 to 255 bytes", NULL);
    }
    uint8_t hash[RESIL_SHA256_LEN];
    resil_store_request_hash(method, r->target, r->body.p, r->body.len, hash);
    resil_store_key k = {.tenant = tenant, .operation = gw->cfg.operation, .key = key};
    resil_store_result res;
    resil_store_result_init(&res);
    resil_err err = {0};
    enum MHD_Result ret;
    if (resil_store_begin(gw->store, &k, hash, &res, &err) != 0) {
        r->idem = "store-error";
        fprintf(stderr, "resil gateway: %s\n", err.message);
        ret = send_error(r, conn, method, 503, "store_unavailable",
                         "the idempotency store is unavailable; retry later", "1");
    } else if (res.verdict == RESIL_STORE_FIRST) {
        r->idem = "first";
        ret = run_first(r, conn, method, &k, res.lease);
    } else if (res.verdict == RESIL_STORE_REPLAY) {
        r->idem = "replay";
        answer a = {.status = res.status, .headers = res.headers,
                    .headers_len = res.headers_len, .body = res.body,
                    .body_len = res.body_len, .replayed = true};
        ret = send_answer(r, conn, method, &a);
    } else if (res.verdict == RESIL_STORE_IN_PROGRESS) {
        r->idem = "in-progress";
        ret = send_error(r, conn, method, 409, "request_in_progress",
                         "a request with this Idempotency-Key is still being processed; "
                         "retry later",
                         "1");
    } else {
        r->idem = "mismatch";
        ret = send_error(r, conn, method, 422, "idempotency_key_reused",
                         "this Idempotency-Key was used with a different request", NULL);
    }
    resil_store_result_free(&res);
    return ret;
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
        return MHD_YES;
    }
    if (*upload_size > 0) {
        gw_buf_append(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->body.overflow) {
        r->idem = "too-large";
        return send_error(r, conn, method, 413, "body_too_large",
                          "the request body is larger than the gateway accepts", NULL);
    }
    if (strcmp(url, "/healthz") == 0 && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        r->idem = "health";
        answer a = {.status = 200, .body = "ok\n", .body_len = 3, .content_type = "text/plain"};
        return send_answer(r, conn, method, &a);
    }
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (!guarded_method(&r->gw->cfg, method) || (key == NULL && !r->gw->cfg.require_key))
        return pass_through(r, conn, method);
    if (key == NULL) {
        r->idem = "missing";
        return send_error(r, conn, method, 400, "idempotency_key_required",
                          "this request needs an Idempotency-Key header", NULL);
    }
    return guarded(r, conn, method, key);
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
