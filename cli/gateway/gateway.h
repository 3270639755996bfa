/*
 * gateway.h — `resil gateway`, shared between its files: cmd_gateway.c
 * (options and lifecycle), gateway_http.c (the listening side: framing and
 * answers), gateway_rules.c (the idempotency rules) and gateway_upstream.c
 * (forwarding with libcurl). Internal to the tool.
 */
#ifndef RESIL_CLI_GATEWAY_H
#define RESIL_CLI_GATEWAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include "resil.h"
#include "resil/store.h"

#define GW_MAX_METHODS 16

typedef struct gw_config {
    char host[256];
    int port;
    char upstream[2048]; /* base URL, no trailing '/' */
    const char *store_url;
    bool require_key;
    char methods[GW_MAX_METHODS][16];
    size_t n_methods;
    resil_duration retention, lease, timeout;
    const char *tenant_header; /* NULL: one tenant, "" */
    const char *operation;
    size_t max_body;
    bool quiet; /* no access log */
} gw_config;

/* A growable byte buffer, capped. */
typedef struct gw_buf {
    char *p;
    size_t len, cap, limit;
    bool overflow; /* an append would have passed limit */
} gw_buf;

bool gw_buf_append(gw_buf *b, const void *data, size_t len);
void gw_buf_free(gw_buf *b);

/* What the upstream answered. */
typedef struct gw_reply {
    int curl_code;    /* 0 = a response arrived */
    bool timed_out;
    char error[256];  /* curl's message when curl_code != 0 */
    long status;
    gw_buf headers;   /* end-to-end headers as "Name: value\r\n" lines */
    gw_buf body;
} gw_reply;

typedef struct gateway {
    gw_config cfg;
    resil_store *store;
    resil_clock *clock;
    struct MHD_Daemon *daemon;

    pthread_mutex_t mu;
    pthread_cond_t idle;  /* signalled when in_flight drops to 0 */
    unsigned in_flight;
    bool draining;        /* after SIGTERM: answers carry Connection: close */

    pthread_mutex_t pool_mu; /* reusable curl handles (keep upstream connections warm) */
    void *pool[64];
    size_t pool_len;
} gateway;

/* gateway_upstream.c */
typedef struct gw_forward {
    const char *method;
    const char *target;       /* raw path and query, as received */
    const char *client_ip;
    const void *body;
    size_t body_len;
    struct MHD_Connection *conn; /* for the request headers */
} gw_forward;

void gw_upstream_init(gateway *gw);
void gw_upstream_cleanup(gateway *gw);
/* Send the request upstream; the reply (or failure) lands in *out, which
 * the caller frees with gw_reply_free(). */
void gw_upstream_send(gateway *gw, const gw_forward *f, gw_reply *out);
void gw_reply_free(gw_reply *r);
/* Headers a proxy must not pass on (hop-by-hop, and those it recomputes). */
bool gw_hop_by_hop(const char *name, size_t len);

/* gateway_http.c */

/* One request, from its first line to its last byte. */
typedef struct gw_req {
    gateway *gw;
    char *target;   /* raw path and query */
    gw_buf body;
    bool started;
    resil_instant start;
    const char *idem; /* what the idempotency rules did, for the log */
    char note[300];   /* extra log detail */
} gw_req;

/* An answer to the client. */
typedef struct gw_answer {
    int status;
    const char *headers; /* "Name: value\r\n" lines; may be NULL */
    size_t headers_len;
    const void *body;
    size_t body_len;
    bool replayed;
    const char *retry_after;
    const char *content_type;
} gw_answer;

void gw_client_ip(struct MHD_Connection *conn, char *buf, size_t cap);
enum MHD_Result gw_send_answer(gw_req *r, struct MHD_Connection *conn, const char *method,
                               const gw_answer *a);
/* A short JSON error of the gateway's own. */
enum MHD_Result gw_send_error(gw_req *r, struct MHD_Connection *conn, const char *method,
                              int status, const char *code, const char *message,
                              const char *retry_after);
/* The upstream's reply, or 502/504 when none arrived. */
enum MHD_Result gw_send_reply(gw_req *r, struct MHD_Connection *conn, const char *method,
                              const gw_reply *up);

int gw_http_start(gateway *gw, int listen_fd, bool ipv6);
/* Stop accepting, let in-flight requests finish (up to `grace`), stop. */
void gw_http_stop(gateway *gw, resil_duration grace);

/* gateway_parse.c: pure parsing of what clients send */

/* Is this raw request-target origin-form (RFC 9112 §3.2.1: "/path?query",
 * pchar and '%' HEX HEX only)? Every other form names a host, or nothing. */
bool gw_target_is_origin_form(const char *target, size_t len);
/* The length of the path part of an origin-form target (up to the '?'). */
size_t gw_target_path_len(const char *target, size_t len);

/* gateway_rules.c */
bool gw_guarded_method(const gw_config *cfg, const char *method);
/* An unguarded request: forward it and answer what the upstream said. */
enum MHD_Result gw_pass_through(gw_req *r, struct MHD_Connection *conn, const char *method);
/* A guarded request with an Idempotency-Key: the idempotency rules. */
enum MHD_Result gw_guarded(gw_req *r, struct MHD_Connection *conn, const char *method,
                           const char *key);

#endif
