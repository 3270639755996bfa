/*
 * gateway.h — `resil gateway`, shared between its files: cmd_gateway.c
 * (options and lifecycle), gateway_http.c (the listening side: framing and
 * answers), gateway_rules.c (the idempotency rules), gateway_upstream.c
 * (forwarding: libcurl's multi interface, or for a plain http:// upstream
 * gateway_client.c, the gateway's own client, over gateway_response.c's
 * framing). Internal to the tool.
 *
 * Threads: --loops event loops (libuv, through resil's loop interface),
 * each with a listening socket of its own on the one port (SO_REUSEPORT),
 * run the listening side and the upstream transfers of the connections the
 * kernel gives them. The idempotency store's key writes are submitted from
 * the loop in their asynchronous form (group commit on, the default): the
 * store's own thread posts each result back to the request's loop. A small
 * pool of workers (--workers) runs what still blocks — the fleet's Redis
 * limits, and the store's calls when batching is off — and hands each
 * result back the same way. Every function says where it runs: "loop"
 * (the request's), "worker", "store thread", or "any".
 */
#ifndef RESIL_CLI_GATEWAY_H
#define RESIL_CLI_GATEWAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fleet_values.h"
#include "gateway_chaos.h"
#include "resil.h"
#include "resil/loop.h"
#include "resil/store.h"

#define GW_MAX_METHODS 16

/* An IPv6 address as text, its NUL included (INET6_ADDRSTRLEN). */
#define GW_IP_TEXT 46

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
    /* the front door (gateway_http.c) */
    unsigned max_connections, max_per_client, workers;
    unsigned loops; /* --loops: event loops, each serving its share of the connections */
    resil_duration header_timeout, body_timeout, idle_timeout;
    bool upstream_dedupes; /* the upstream recognises a repeated key: release when unsure */
    const char *journal;   /* --journal: NULL = next to an SQLite store, "off" = none */
    unsigned batch_max;          /* --batch-max: key writes per transaction */
    resil_duration batch_window; /* --batch-window */
    int sqlite_sync;             /* --sqlite-sync: a resil_store_sync */
    size_t replay_cache;         /* --replay-cache: bytes of completed answers; 0 off */
    /* the upstream's circuit breaker: shared through Redis with --fleet,
     * else this gateway's own when a --breaker-* flag asks for one */
    const char *fleet;          /* redis://... or NULL */
    uint32_t breaker_failures;  /* 0: the default rules; else a run of this many opens it */
    resil_duration breaker_break; /* 0: the default */
    fleet_limit_opts limits;    /* --fleet-rate, --fleet-concurrency (with --fleet) */
    resil_duration fleet_timeout; /* --fleet-timeout: one Redis call's bound, 0: the default */
    gw_chaos_config chaos;        /* --chaos-* (gateway_chaos.h) */
} gw_config;

/* gateway_buf.c: a growable byte buffer, capped, its text NUL-terminated. */
typedef struct gw_buf {
    char *p;
    size_t len, cap, limit;
    bool overflow; /* an append would have passed limit */
} gw_buf;

bool gw_buf_append(gw_buf *b, const void *data, size_t len);
void gw_buf_free(gw_buf *b);
/* Empty b for its next use, its limit kept: its storage stays when it is
 * at most `keep` bytes, else it is freed. */
void gw_buf_reuse(gw_buf *b, size_t keep);

/* What the upstream answered. */
typedef struct gw_reply {
    int curl_code;    /* 0 = a response arrived */
    bool timed_out;
    bool may_have_sent;  /* the client came to sending the request: bytes may have left */
    bool resend_refused; /* the connection died unanswered; the resend was stopped */
    const char *refused; /* the error code when the upstream's breaker or a fleet limit
                            refused it ("circuit_open", ...): nothing was sent; or NULL */
    const char *refused_message;
    char retry_after[24]; /* with refused: seconds until it may be admitted */
    char error[256];  /* curl's message when curl_code != 0 */
    long status;
    gw_buf headers;   /* end-to-end headers as "Name: value\r\n" lines */
    gw_buf body;
} gw_reply;

typedef struct gateway {
    gw_config cfg;
    resil_store *store;
    resil_clock *clock;

    pthread_mutex_t mu;
    pthread_cond_t idle;  /* signalled when in_flight drops to 0 */
    unsigned in_flight;
    bool draining;        /* after SIGTERM: answers carry Connection: close */

    struct gw_http *http; /* gateway_http.c: the loops, the store workers, the deadlines */

    struct gw_leases *leases; /* gateway_rules.c: keys whose outcome is not yet saved */

    resil_breaker *breaker;   /* the upstream's (--fleet or --breaker-*), or NULL: none */
    struct resil_redis *redis; /* its client */
    struct fleet_limits *limits; /* --fleet-rate, --fleet-concurrency: the upstream's */
    struct fleet_limit *limit;   /* its limits, or NULL: none */
    gw_chaos *chaos;             /* --chaos-*, or NULL: none */

    /* GET /metrics: requests by outcome, upstream calls, the breaker's state */
    resil_metrics *metrics;
    char authority[300];     /* the upstream as "scheme://host:port" */
    resil_http_attrs upstream_attrs; /* its server.address and server.port */
    char http_host[256];
} gateway;

/* gateway_response.c: an upstream's HTTP/1.1 response framed from its
 * connection's bytes, incrementally (fuzzed in tests/gateway/). */
#define GW_RESP_LINE_MAX (100 * 1024)    /* one header or chunk-size line */
#define GW_RESP_HEADERS_MAX (300 * 1024) /* a response's header and trailer lines */

typedef enum gw_resp_rc { GW_RESP_MORE, GW_RESP_DONE, GW_RESP_ERROR } gw_resp_rc;

/* Where the final response's lines and body go; false refuses (too large). */
typedef struct gw_resp_sink {
    bool (*field)(void *ud, const char *line, size_t len); /* a header or trailer line */
    bool (*body)(void *ud, const char *data, size_t len);
    void *ud;
} gw_resp_sink;

typedef struct gw_resp {
    bool head;        /* the request was HEAD: no body, whatever the headers say */
    int status;       /* the final status once the headers are in */
    int minor;        /* HTTP/1.minor */
    bool keep;        /* once done: the connection may carry the next request */
    bool started;     /* a byte of a response line was seen */
    const char *error; /* with GW_RESP_ERROR: what was malformed */
    uint64_t body_bytes;
    /* private */
    int state;
    uint64_t content_length, remaining;
    size_t header_bytes;
    bool has_length, chunked, other_coding, conn_close, conn_keep;
} gw_resp;

/* The most of an upstream answer's end-to-end header lines the gateway
 * keeps: what its front door can send back. libmicrohttpd builds an
 * answer's header block in the connection's memory (32 KB), beside the
 * request's own headers; a block it cannot fit there it does not send,
 * closing the connection instead, on the first answer and on every
 * replay. A larger block is an answer over the limit, as a body over
 * --max-body is. */
#define GW_REPLY_HEADERS_MAX (24 * 1024)

void gw_resp_init(gw_resp *p, bool head);
/* Frame what buf holds: *used bytes were taken (lines whole, body bytes);
 * the rest is a line still incomplete (or bytes after a finished
 * response) and is to be handed again with what follows. DONE once the
 * response is complete, ERROR (p->error) when it is malformed or the sink
 * refused; both stay so. */
gw_resp_rc gw_resp_parse(gw_resp *p, const char *buf, size_t len, size_t *used,
                         const gw_resp_sink *s);
/* The connection ended: DONE when that ends a body that runs to the close,
 * else ERROR. */
gw_resp_rc gw_resp_eof(gw_resp *p);

/* gateway_upstream.c */
struct gw_upstream;
typedef struct gw_forward {
    const char *method;
    const char *target;       /* raw path and query, as received */
    const char *client_ip;
    const void *body;
    size_t body_len;
    struct MHD_Connection *conn; /* for the request headers */
    bool once; /* never let the client send it a second time (a guarded request) */
} gw_forward;

/* Upstream connections kept open between calls, per loop: as many as
 * calls may run at once, within reason. */
#define GW_KEEP_CONNECTIONS 256

/* --timeout in whole milliseconds for an upstream call, rounded up (libcurl
 * reads 0 ms as no timeout at all), and the connect's bound within it. */
static inline long gw_timeout_ms(resil_duration t)
{
    return (long)(t / RESIL_MS(1) + (t % RESIL_MS(1) != 0));
}
static inline long gw_connect_ms(long timeout_ms)
{
    return timeout_ms < 10000 ? timeout_ms : 10000L;
}

/* An intrusive doubly linked list known by its head: push a node at the
 * head, or unlink it from anywhere (its links cleared). prev and next
 * name the node's link fields. */
#define GW_LIST_PUSH(head, n, prev, next)                                                \
    do {                                                                                 \
        (n)->prev = NULL;                                                                \
        (n)->next = (head);                                                              \
        if ((head) != NULL)                                                              \
            (head)->prev = (n);                                                          \
        (head) = (n);                                                                    \
    } while (0)
#define GW_LIST_UNLINK(head, n, prev, next)                                              \
    do {                                                                                 \
        if ((n)->prev != NULL)                                                           \
            (n)->prev->next = (n)->next;                                                 \
        else                                                                             \
            (head) = (n)->next;                                                          \
        if ((n)->next != NULL)                                                           \
            (n)->next->prev = (n)->prev;                                                 \
        (n)->prev = (n)->next = NULL;                                                    \
    } while (0)

/* One upstream call in flight on the loop; embedded in its request. */
typedef struct gw_call {
    struct gw_call *prev, *next; /* the calls in flight */
    void *easy;                  /* CURL *, when libcurl carries it */
    struct curl_slist *headers;
    char *url;
    const char *method;
    bool once;
    gw_reply *out;
    resil_breaker_permit permit;
    resil_bulkhead_ticket fleet_permit; /* --fleet-rate/--fleet-concurrency's */
    resil_instant start;
    char errbuf[256];                   /* CURL_ERROR_SIZE */
    void (*done)(struct gw_call *c);
    /* gateway_client.c's, when it carries the call (a plain http:// upstream) */
    struct gw_client *client;
    struct gw_upconn *conn;  /* the connection it is on */
    resil_timer timer;       /* --timeout, and the connect's bound */
    resil_instant begun, deadline;
    const void *body;        /* the client's, sent after its connection's head */
    size_t body_len, sent;   /* bytes of head and body taken by the socket */
    gw_resp resp;            /* the answer's framing */
} gw_call;

/* loop: curl multi on one of the gateway's loops, with upstream
 * connections of its own; close takes every call still in flight off
 * (each is handed to `aborted`, its reply unfilled). */
int gw_upstream_open(gateway *gw, resil_loop *loop, struct gw_upstream **out);
void gw_upstream_close(struct gw_upstream *u, void (*aborted)(gw_call *c));
/* worker: the fleet's permits for one call (Redis): true when admitted,
 * else *out says it was refused. leave gives them back. No-ops without
 * --fleet-rate or --fleet-concurrency. */
bool gw_upstream_admit(gateway *gw, gw_call *c, gw_reply *out);
void gw_upstream_leave(gw_call *c);
/* loop: send the request upstream; c->done runs on the loop once the
 * reply (or failure) is in *out (at once when it cannot start), which the
 * caller frees with gw_reply_free(). */
void gw_upstream_start(struct gw_upstream *u, gw_call *c, const gw_forward *f, gw_reply *out,
                       void (*done)(gw_call *c));
void gw_reply_free(gw_reply *r);
/* Headers a proxy must not pass on (hop-by-hop, and those it recomputes). */
bool gw_hop_by_hop(const char *name, size_t len);
/* loop: the request's headers as the upstream gets them, in order: the
 * client's end-to-end ones, then X-Forwarded-For with the client's address
 * appended. */
typedef void gw_header_fn(void *ud, const char *name, const char *value);
void gw_forward_headers(const gw_forward *f, gw_header_fn *add, void *ud);
/* Does the request carry a body upstream (POST, PUT, PATCH, or any but HEAD
 * with one)? */
bool gw_forward_sends_body(const gw_forward *f);
/* One header line of the upstream's answer into r->headers (a status line
 * starts them again); false when they pass their limit. */
bool gw_reply_header_line(gw_reply *r, const char *data, size_t len);

/* gateway_client.c: the gateway's own client of a plain http:// upstream
 * given by its address (no proxy in the environment); libcurl carries the
 * others. */
struct gw_client;
typedef void gw_client_finished_fn(gw_call *c, void *ud);
/* loop: *out NULL when the upstream is not one for it; -1 out of memory. */
int gw_client_open(resil_loop *loop, const char *base, bool proxy_env, resil_duration timeout,
                   gw_client_finished_fn *finished, void *ud, struct gw_client **out);
/* loop: c->out and c->once set; `finished` runs once *c->out holds the
 * answer or the failure (at once when it cannot start). */
void gw_client_start(struct gw_client *cl, gw_call *c, const gw_forward *f);
/* loop: take a call off unfinished (its connection closed); no `finished`. */
void gw_client_abort(struct gw_client *cl, gw_call *c);
void gw_client_close(struct gw_client *cl);

/* gateway_http.c */

typedef struct gw_req gw_req;
typedef void (*gw_step)(gw_req *r);
struct gw_hold;

/* One request, from its first line to its last byte. */
struct gw_req {
    gateway *gw;
    char *target;   /* raw path and query */
    gw_buf body;
    bool started;
    bool shut;      /* answered on its socket while its body was coming (413) */
    resil_instant start;
    const char *idem; /* what the idempotency rules did, for the log and /metrics */
    const char *error_type; /* why no upstream answer was passed on, for /metrics */
    char note[300];   /* extra log detail */
    const char *key;  /* NULL, or the Idempotency-Key unquoted (in key_buf) */
    char key_buf[RESIL_STORE_FIELD_MAX + 1];
    /* gateway_http.c: while its work runs (upstream on the loop, store on
     * a worker) the connection is suspended; the answer waits here until
     * it is resumed. */
    struct gw_conn *link;
    char ip[GW_IP_TEXT];              /* gw_client_ip()'s, without a link */
    struct gw_loop *lp;               /* the loop its connection is served on */
    struct gw_upstream *upstream;     /* that loop's curl multi */
    struct MHD_Connection *conn;
    const char *method;
    bool parked;
    struct MHD_Response *answer;
    unsigned answer_status;
    enum MHD_Result result;
    gw_step work, then;  /* gw_to_pool(): on a worker, then on the loop */
    resil_work back;     /* how `then` reaches the loop */
    struct gw_req *next_job, *next_resume;
    /* gateway_upstream.c, gateway_rules.c: the upstream call and the key */
    gw_call call;
    gw_reply up;
    gw_step forwarded;   /* loop: after the upstream call */
    resil_store_key k;
    uint64_t lease;
    bool taken_over; /* the store took the key over from an expired run */
    struct gw_hold *hold;
    /* gateway_rules.c: one store call at a time, in flight from the loop */
    int store_op;              /* what it is (gateway_rules.c's store_op) */
    int store_rc;              /* what it returned */
    resil_err store_err;       /* its error, when store_rc != 0 */
    uint8_t hash[RESIL_SHA256_LEN]; /* the request's, for begin */
    resil_store_result res;    /* begin's verdict */
    resil_store_response resp; /* the answer complete saves (pointing into `up` or `own`) */
    char own[512];             /* the body of an answer of the gateway's own, to save */
    bool go_forward; /* the key is ours: forward it */
    bool refused_for_good; /* the store refused the answer: an unknown outcome instead */
    /* gateway_http.c: what --chaos-* does to it, at the front door */
    gw_chaos_action chaos;
    char chaos_note[64];        /* the access log's chaos= field, or "" */
    resil_timer chaos_wait;     /* an injected latency */
    struct gw_req *chaos_prev, *chaos_next; /* while it runs: the loop's list */
};

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

/* The client's address as text ("-" when it has none), conn being r's
 * connection. Valid while the request is. */
const char *gw_client_ip(gw_req *r, struct MHD_Connection *conn);
enum MHD_Result gw_send_answer(gw_req *r, struct MHD_Connection *conn, const char *method,
                               const gw_answer *a);
/* A short JSON error of the gateway's own. */
enum MHD_Result gw_send_error(gw_req *r, struct MHD_Connection *conn, const char *method,
                              int status, const char *code, const char *message,
                              const char *retry_after);
/* The upstream's reply, 502/504 when none arrived, or 503 with Retry-After
 * when the upstream's breaker refused the request. */
enum MHD_Result gw_send_reply(gw_req *r, struct MHD_Connection *conn, const char *method,
                              const gw_reply *up);

/* OpenTelemetry's http.request.method: a method it does not know is
 * "_OTHER", so no client can make a series per made-up method. */
const char *gw_known_method(const char *method);

/* loop: suspend the connection while r's work runs (its answer is sent
 * through gw_send_*, kept until it resumes). */
void gw_park(gw_req *r);
/* loop: run `work` on a store worker, then `then` back on the loop. */
void gw_to_pool(gw_req *r, gw_step work, gw_step then);
/* Past the drain: the workers are stopped, and nothing more may be
 * submitted to the store or sent upstream. */
bool gw_stopping(gateway *gw);
/* loop: an asynchronous store call is about to be submitted for r, with
 * `then` to run on the loop once it called back: counted until then.
 * False when the gateway is stopping: nothing may be submitted, and r is
 * closed without an answer. */
bool gw_store_enter(gw_req *r, gw_step then);
/* store thread (the call's callback), or loop (the submission failed):
 * hand r back to its loop for `then`, and count the call done. */
void gw_store_back(gw_req *r);
/* loop: r's answer is ready (or r->answer is NULL: close): resume it. */
void gw_answered(gw_req *r);

/* Serve on cfg.loops listening sockets (bound to one address), one per
 * loop; they are gw_http's from here on, closed by it whatever happens. */
int gw_http_start(gateway *gw, const int *listen_fds, bool ipv6);
/* Stop accepting; the requests in flight at that moment (the count the
 * stop's line reports, taken before anything else is said of the stop). */
unsigned gw_http_quiesce(gateway *gw);
/* Then let those requests finish (up to `grace`), say how many were in
 * flight (`left`) and how many did not finish, and stop. */
void gw_http_stop(gateway *gw, unsigned left, resil_duration grace);

/* gateway_parse.c: pure parsing of what clients send (fuzzed in tests/gateway/) */

/* Is this raw request-target origin-form (RFC 9112 §3.2.1: "/path?query",
 * pchar and '%' HEX HEX only)? Every other form names a host, or nothing. */
bool gw_target_is_origin_form(const char *target, size_t len);
/* The length of the path part of an origin-form target (up to the '?'). */
size_t gw_target_path_len(const char *target, size_t len);

/* An Idempotency-Key value: an sf-string ("..." with \" and \\ escapes,
 * unquoted into out) or a bare value of printable ASCII without a space at
 * either end; 1..255 bytes either way. cap >= RESIL_STORE_FIELD_MAX + 1.
 * NULL when valid, else the rule it breaks ("must be 1 to 255 bytes"). */
const char *gw_parse_key(const char *value, size_t len, char *out, size_t cap,
                         size_t *out_len);
/* A tenant header value, taken as given: the bare-value rule above. */
const char *gw_check_tenant(const char *value, size_t len);

/* What one request's headers say about its framing, field by field. */
typedef struct gw_framing {
    unsigned hosts, content_lengths;
    uint64_t content_length;
    bool content_length_bad; /* not digits, or copies that differ */
    bool transfer_encoding;
    bool expect_continue, expect_other;
    bool bad_field;          /* a name not a token, a value with NUL, CR or LF */
} gw_framing;

/* How to refuse a request: 400, 413 or 417, an error code and a sentence. */
typedef struct gw_refusal {
    int status;
    const char *code, *message;
} gw_refusal;

void gw_framing_add(gw_framing *f, const char *name, size_t name_len, const char *value,
                    size_t value_len);
/* true: acceptable; false: *why says how to refuse, before any body is read. */
bool gw_framing_check(const gw_framing *f, bool http11, size_t max_body, gw_refusal *why);

/* One header field, as spans into the text it came from. */
typedef struct gw_field {
    const char *name, *value;
    size_t name_len, value_len;
} gw_field;

typedef enum gw_line_kind { GW_LINE_SKIP, GW_LINE_STATUS, GW_LINE_FIELD } gw_line_kind;
/* A header line as libcurl hands it over: a status line (a new response
 * begins), an end-to-end field to keep, or something to skip (hop-by-hop,
 * continuation, blank, malformed). */
gw_line_kind gw_upstream_header_line(const char *data, size_t len, gw_field *f);
/* The next well-formed "Name: value" line of a saved header block, from
 * *pos on; false at its end. */
bool gw_saved_header_next(const char *blob, size_t len, size_t *pos, gw_field *f);

/* The request's line and header block as received and parsed in place
 * (the strings NUL-terminated where they lay): `spans` are the parsed
 * strings (method, target, version, each name and value), in order. True
 * when the spans lie in order within the block and every byte outside them
 * is a separator (NUL, SP, HTAB, CR, LF): a NUL inside a field would leave
 * the rest of its line outside every span. */
typedef struct gw_span {
    size_t at, len;
} gw_span;
bool gw_header_block_clean(const char *block, size_t size, const gw_span *spans, size_t n);

/* Option values. */
#define GW_METHOD_MAX 16
typedef enum gw_listen_error { GW_LISTEN_OK, GW_LISTEN_FORM, GW_LISTEN_PORT } gw_listen_error;
gw_listen_error gw_parse_listen(const char *v, char *host, size_t cap, int *port);
/* A size from 1 byte to 1GB: digits, then B, K(B), M(B) or G(B), any case. */
bool gw_parse_size(const char *v, size_t *out);
/* A comma-separated list of method names (letters), upper-cased. */
bool gw_parse_methods(const char *v, char (*methods)[GW_METHOD_MAX], size_t max, size_t *n);

/* gateway_rules.c */
bool gw_guarded_method(const gw_config *cfg, const char *method);
/* loop, on a parked request: an unguarded request: forward it and answer
 * what the upstream said. It touches no other thread (unless --fleet-rate
 * or --fleet-concurrency ask Redis for permits). */
void gw_pass_through(gw_req *r);
/* loop, on a parked request with r->key: the idempotency rules, their
 * store calls submitted from the loop (on a worker with batching off),
 * the upstream call on the loop. */
void gw_guarded(gw_req *r);
/* The lease renewer: start it once the store is open, stop it once no
 * request runs (it makes a last attempt to save answers still unsaved). */
int gw_rules_start(gateway *gw);
void gw_rules_stop(gateway *gw);
/* The main thread's timer: replay the store's journal while completions
 * wait in it and log its counts when they change. Returns how long to wait
 * before the next call. */
resil_duration gw_rules_tick(gateway *gw);
/* The journal file the store gets (NULL: none): --journal, else the SQLite
 * file's path + ".resil-journal"; buf holds a derived path. */
const char *gw_journal_path(const gw_config *cfg, char *buf, size_t cap);

#endif
