/*
 * upstream.c — the counting HTTP server (see upstream.h), on libmicrohttpd.
 *
 * libmicrohttpd rather than a hand-rolled parser: the gateway's tests are
 * about what reaches the upstream, and a test server with its own HTTP bugs
 * would make them about something else. The count is taken under one mutex
 * when a request is complete, so "the upstream saw exactly 1" is exact.
 */
#include "upstream.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Room for every request header, long ones included (the gateway must pass
 * a header of several kilobytes on whole). */
#define HEADERS_MAX 32768

struct upstream {
    struct MHD_Daemon *d;
    int port;
    char url[64];
    pthread_mutex_t mu;
    unsigned requests;
    pthread_cond_t held_changed; /* /hold: a request is held, or they are released */
    unsigned held;
    bool released;
    int delay_ms;
    unsigned fail_left;
    int fail_status;
    char last_headers[HEADERS_MAX];
    char last_target[4096]; /* the raw request-target, as received */
    struct key_count *keys; /* requests per Idempotency-Key, in arrival order */
    size_t n_keys, cap_keys;
};

typedef struct key_count {
    char *key;
    unsigned n;
} key_count;

typedef struct request {
    char *body;
    size_t len;
    bool started;
    char *target; /* raw, from the URI log callback */
} request;

static void append(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s", s);
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind,
                                      const char *key, const char *value)
{
    (void)kind;
    char *buf = cls;
    append(buf, HEADERS_MAX, key);
    append(buf, HEADERS_MAX, ": ");
    append(buf, HEADERS_MAX, value ? value : "");
    append(buf, HEADERS_MAX, "\n");
    return MHD_YES;
}

/* One more request with this Idempotency-Key; under u->mu. A key seen for
 * the first time is appended (a linear table: tests send a few thousand). */
static void count_key(upstream *u, const char *key)
{
    for (size_t i = 0; i < u->n_keys; i++) {
        if (strcmp(u->keys[i].key, key) == 0) {
            u->keys[i].n++;
            return;
        }
    }
    if (u->n_keys == u->cap_keys) {
        size_t cap = u->cap_keys ? 2 * u->cap_keys : 256;
        key_count *k = realloc(u->keys, cap * sizeof *k);
        if (k == NULL)
            return;
        u->keys = k;
        u->cap_keys = cap;
    }
    char *copy = strdup(key);
    if (copy == NULL)
        return;
    u->keys[u->n_keys++] = (key_count){.key = copy, .n = 1};
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Wait for upstream_release(), counted among the held meanwhile. */
static void hold(upstream *u)
{
    pthread_mutex_lock(&u->mu);
    u->held++;
    pthread_cond_broadcast(&u->held_changed);
    while (!u->released)
        pthread_cond_wait(&u->held_changed, &u->mu);
    u->held--;
    pthread_mutex_unlock(&u->mu);
}

static void add_long_header(struct MHD_Response *resp, size_t len)
{
    char *value = malloc(len + 1);
    if (value == NULL)
        return;
    memset(value, 'h', len);
    value[len] = '\0';
    MHD_add_response_header(resp, "X-Long", value);
    free(value);
}

static enum MHD_Result answer(upstream *u, struct MHD_Connection *conn,
                              const char *url, const char *method, request *r)
{
    char headers[HEADERS_MAX] = "";
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, headers);
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    pthread_mutex_lock(&u->mu);
    if (key != NULL)
        count_key(u, key);
    unsigned n = ++u->requests;
    int delay = u->delay_ms;
    int status = strcmp(method, "POST") == 0 ? 201 : 200;
    bool failing = u->fail_left > 0;
    if (failing) {
        u->fail_left--;
        status = u->fail_status;
    }
    memcpy(u->last_headers, headers, sizeof headers);
    snprintf(u->last_target, sizeof u->last_target, "%s", r->target ? r->target : "");
    pthread_mutex_unlock(&u->mu);
    if (strncmp(url, "/status/", 8) == 0 && !failing)
        status = atoi(url + 8);
    if (delay > 0)
        sleep_ms(delay);
    if (strncmp(url, "/hold", 5) == 0)
        hold(u);

    const char *query = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "q");
    size_t cap = r->len + strlen(url) + 256;
    char *body = malloc(cap);
    if (body == NULL)
        return MHD_NO;
    int len = failing ? snprintf(body, cap, "{\"error\":\"scripted\"}")
                      : snprintf(body, cap,
                                 "{\"n\":%u,\"method\":\"%s\",\"target\":\"%s%s%s\","
                                 "\"body\":\"%.*s\"}",
                                 n, method, url, query ? "?q=" : "", query ? query : "",
                                 (int)r->len, r->body ? r->body : "");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer((size_t)len, body, MHD_RESPMEM_MUST_FREE);
    char location[32];
    snprintf(location, sizeof location, "/orders/%u", n);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "Location", location);
    if (strncmp(url, "/long-header/", 13) == 0)
        add_long_header(resp, (size_t)atoi(url + 13));
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    request *r = *state;
    if (r == NULL)
        return MHD_NO;
    if (!r->started) {
        r->started = true;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        char *p = realloc(r->body, r->len + *upload_size + 1);
        if (p == NULL)
            return MHD_NO;
        memcpy(p + r->len, upload, *upload_size);
        r->body = p;
        r->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    return answer(cls, conn, url, method, r);
}

static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    request *r = calloc(1, sizeof *r);
    if (r != NULL)
        r->target = strdup(uri);
    return r;
}

static void completed(void *cls, struct MHD_Connection *conn, void **state,
                      enum MHD_RequestTerminationCode code)
{
    (void)cls;
    (void)conn;
    (void)code;
    request *r = *state;
    if (r != NULL) {
        free(r->body);
        free(r->target);
        free(r);
    }
    *state = NULL;
}

upstream *upstream_start(void)
{
    upstream *u = calloc(1, sizeof *u);
    if (u == NULL)
        return NULL;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->held_changed, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    u->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_POLL,
                            0, NULL, NULL, handle, u, MHD_OPTION_SOCK_ADDR, &a,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, u,
                            MHD_OPTION_URI_LOG_CALLBACK, on_request_line, u,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        u->d ? MHD_get_daemon_info(u->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (info == NULL) {
        upstream_stop(u);
        return NULL;
    }
    u->port = info->port;
    snprintf(u->url, sizeof u->url, "http://127.0.0.1:%d", u->port);
    return u;
}

void upstream_stop(upstream *u)
{
    if (u == NULL)
        return;
    upstream_release(u); /* a held request would keep its thread, and the stop, waiting */
    if (u->d != NULL)
        MHD_stop_daemon(u->d);
    pthread_cond_destroy(&u->held_changed);
    pthread_mutex_destroy(&u->mu);
    for (size_t i = 0; i < u->n_keys; i++)
        free(u->keys[i].key);
    free(u->keys);
    free(u);
}

int upstream_port(const upstream *u) { return u->port; }

const char *upstream_url(const upstream *u) { return u->url; }

unsigned upstream_requests(upstream *u)
{
    pthread_mutex_lock(&u->mu);
    unsigned n = u->requests;
    pthread_mutex_unlock(&u->mu);
    return n;
}

bool upstream_wait_held(upstream *u, unsigned n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&u->mu);
    int rc = 0;
    while (u->held < n && rc == 0)
        rc = pthread_cond_timedwait(&u->held_changed, &u->mu, &until);
    bool reached = u->held >= n;
    pthread_mutex_unlock(&u->mu);
    return reached;
}

void upstream_release(upstream *u)
{
    pthread_mutex_lock(&u->mu);
    u->released = true;
    pthread_cond_broadcast(&u->held_changed);
    pthread_mutex_unlock(&u->mu);
}

void upstream_set_delay_ms(upstream *u, int ms)
{
    pthread_mutex_lock(&u->mu);
    u->delay_ms = ms;
    pthread_mutex_unlock(&u->mu);
}

void upstream_fail_next(upstream *u, unsigned n, int status)
{
    pthread_mutex_lock(&u->mu);
    u->fail_left = n;
    u->fail_status = status;
    pthread_mutex_unlock(&u->mu);
}

void upstream_last_header(upstream *u, const char *name, char *buf, size_t cap)
{
    size_t nlen = strlen(name);
    buf[0] = '\0';
    pthread_mutex_lock(&u->mu);
    for (const char *line = u->last_headers; *line != '\0';) {
        const char *end = strchr(line, '\n');
        if (end == NULL)
            break;
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 2;
            snprintf(buf, cap, "%.*s", (int)(end - v), v);
            break;
        }
        line = end + 1;
    }
    pthread_mutex_unlock(&u->mu);
}

void upstream_last_target(upstream *u, char *buf, size_t cap)
{
    pthread_mutex_lock(&u->mu);
    snprintf(buf, cap, "%s", u->last_target);
    pthread_mutex_unlock(&u->mu);
}

unsigned upstream_key_requests(upstream *u, const char *key)
{
    unsigned n = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_keys && n == 0; i++) {
        if (strcmp(u->keys[i].key, key) == 0)
            n = u->keys[i].n;
    }
    pthread_mutex_unlock(&u->mu);
    return n;
}

unsigned upstream_keys_seen_more_than_once(upstream *u)
{
    unsigned n = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_keys; i++)
        n += u->keys[i].n > 1;
    pthread_mutex_unlock(&u->mu);
    return n;
}
