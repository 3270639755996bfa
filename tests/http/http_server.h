/*
 * http_server.h — a scripted HTTP/1.1 server on 127.0.0.1 for the HTTP
 * adapter's tests and benchmark.
 *
 * The adapter's claims are about what really crosses a socket — how many
 * requests arrived, with which headers, what libcurl made of a slow answer
 * or a reset — so its tests talk to a real server rather than a mock. Each
 * path has a script: a sequence of steps (a status with its headers and
 * body, a delay, a gate, a hold, a dropped or reset connection) consumed
 * one per request in arrival order, the last step repeating; a raw step
 * sends bytes of the test's choosing, so a malformed answer is a step too. Every
 * request is recorded (method, target, header block, body) so a test can
 * assert on exactly what was sent. One thread per connection, so a slow
 * answer on one connection never holds up another (hedging needs that),
 * and keep-alive, so the benchmark measures libcurl reusing its
 * connection. Its backlog takes a thousand connections at once (curl
 * multi's tests and benchmark open that many together).
 */
#ifndef RESIL_TEST_HTTP_SERVER_H
#define RESIL_TEST_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

/* How the server answers one request. */
typedef struct http_step {
    int status;              /* > 0: answer with it; see the HTTP_* actions */
    int delay_ms;            /* wait this long before acting */
    const char *retry_after; /* a Retry-After value to send, or NULL */
    const char *body;        /* NULL: "<status>\n" */
    const char *headers;     /* extra header lines, each ending "\r\n", or NULL */
    bool partial;            /* announce more body than is sent, then close */
    bool http10;             /* answer as HTTP/1.0 rather than HTTP/1.1 */
    const char *raw;         /* not NULL: send exactly these bytes as the whole
                                answer (status line, headers, body), then
                                close: an answer no status could script */
    bool hold;               /* hold the request until http_server_release()
                                (then delay and act) or the stop (then no
                                answer), settled meanwhile: an answer late by
                                any clock, virtual time included */
    int gate;                /* > 0: first hold the request until the server has
                                been answering this many at once, this one
                                included (http_server_peak() reaching it), then
                                delay and act; see "gates" below */
} http_step;

/* Gates. A step with a gate makes a concurrency claim exact: with
 * `.gate = N` the first N requests wait for one another, so the peak is N
 * however slowly they arrive. The peak counts every path, since the server
 * started, and never falls: gates on two paths hold each path's requests
 * for the other's, and once the peak has reached N no request waits at
 * that gate again. A gate still closed after ten seconds opens anyway, so
 * a client that never sends the Nth request fails its test (the peak
 * stays short) instead of hanging it. A request waiting at a closed gate
 * waits on its clients, so the server counts as settled
 * (http_server_settled), as for a hold: a loop on virtual time may move
 * its clock to send the requests that open it (a hedge, a retry). Once
 * open, the requests it held are work until they are answered. */

#define HTTP_DROP 0   /* close the connection without answering */
#define HTTP_RESET -1 /* abort the connection (RST) without answering */

typedef struct http_request {
    char method[16];
    char target[256];     /* path and query as sent */
    char *head;           /* the header lines, "Name: value\r\n" each */
    char *body;           /* NUL-terminated copy of the body */
    size_t body_len;
    int client_port;      /* the port the request came from */
} http_request;

typedef struct http_server http_server;

/* Listen on 127.0.0.1 at an ephemeral port and serve until stopped. NULL on
 * failure (errno set). */
http_server *http_server_start(void);
/* Stop: unblock every delay, close every connection, join every thread and
 * free the recorded requests. */
void http_server_stop(http_server *s);
int http_server_port(const http_server *s);
/* "http://127.0.0.1:PORT" + path into buf. */
void http_server_url(const http_server *s, const char *path, char *buf,
                     size_t cap);

/* Give `path` (matched without its query) this script, from its first step;
 * the steps and their strings are copied. An unscripted path answers 404. */
void http_server_script(http_server *s, const char *path, const http_step *steps,
                        size_t n);
/* Record requests (the default) or not: the benchmark turns recording off
 * so a request costs the server no allocation. */
void http_server_record(http_server *s, bool on);

/* Let every held request go on (its delay, then its answer), and every
 * request that reaches a hold from now on. */
void http_server_release(http_server *s);
/* Wait until `n` requests are at a hold at once; false after ten seconds. */
bool http_server_wait_held(http_server *s, unsigned n);

/* True when the server has nothing of its own left to do: no connection
 * waiting to be accepted, no request bytes unread or being worked on (a
 * delay is work; a hold or a closed gate is not), nothing it sent still
 * unacknowledged. What it does next then waits on its clients, so a loop on virtual time may
 * move its clock (virtual_loop_peer). Ask it from the clients' thread:
 * bytes that thread is still sending are its own to account for. */
bool http_server_settled(http_server *s);

/* The most requests the server was answering at once (each counted from
 * its arrival to the end of its answer, its gate and delay included): how much
 * concurrency a client really used. */
size_t http_server_peak(http_server *s);

/* Requests recorded for `path` (NULL: for every path). */
size_t http_server_count(http_server *s, const char *path);
/* The i-th (0-based) recorded request for `path` (NULL: of all), valid
 * until the server stops; NULL when there is none. */
const http_request *http_server_request(http_server *s, const char *path,
                                       size_t i);
/* The value of header `name` (any case) of a recorded request, into buf;
 * false when the request has no such header. */
bool http_request_header(const http_request *r, const char *name, char *buf,
                         size_t cap);
/* How many times header `name` appears in the request. */
int http_request_header_count(const http_request *r, const char *name);

#endif
