/*
 * gateway_proc.h — drive the `resil gateway` binary from tests and the
 * benchmark: start it on a free port, stop it with SIGTERM, run it to
 * completion for option checks, and make HTTP requests with libcurl.
 */
#ifndef RESIL_TEST_GATEWAY_PROC_H
#define RESIL_TEST_GATEWAY_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct gateway_proc {
    pid_t pid;
    int port;
    char url[64];   /* "http://127.0.0.1:PORT" (or the host it was started on) */
    char log[512];  /* its stderr */
} gateway_proc;

/* Start `binary gateway --listen 127.0.0.1:0 ARGS...` (args NULL-ended)
 * with stderr going to log_path, and wait until it listens. 0 or -1. */
int gateway_start(gateway_proc *g, const char *binary, const char *log_path,
                  const char *const args[]);
/* The same on `host` ("127.0.0.1", "[::1]"); url is then http://host:PORT. */
int gateway_start_on(gateway_proc *g, const char *binary, const char *log_path,
                     const char *host, const char *const args[]);
/* SIGTERM, then its exit status (-1 if it did not exit normally). */
int gateway_stop(gateway_proc *g);
/* Does its log contain `text`? */
bool gateway_log_contains(const gateway_proc *g, const char *text);

/* Run `binary ARGS...` to completion; its stderr (truncated) into err.
 * Returns the exit status, or -1. */
int run_capture(const char *binary, const char *const args[], char *err, size_t cap);

typedef struct http_reply {
    int curl_code;
    long status;
    char *body;
    size_t body_len;
    char headers[32768]; /* raw response header block */
} http_reply;

/* One request; headers is NULL-ended "Name: value" lines (may be NULL),
 * body may be NULL. Returns 0 when a response arrived. */
int http_request(const char *method, const char *url, const char *const headers[],
                 const char *body, http_reply *out);
void http_reply_free(http_reply *r);
/* A response header's value ("" and false when absent). */
bool http_reply_header(const http_reply *r, const char *name, char *buf, size_t cap);

/* ---- raw HTTP over a socket: for what libcurl will not send ---------------- */

/* A TCP connection to 127.0.0.1:port, from the loopback address `from`
 * (e.g. "127.0.0.2"; NULL: the default). The fd, or -1. */
int raw_connect(int port, const char *from);
/* Read what arrives on fd into reply (NUL-terminated, cut at cap) until the
 * peer closes the connection or wait_ms pass. True when it closed. */
bool raw_read_until_closed(int fd, char *reply, size_t cap, int wait_ms);
/* Send `len` bytes on a new connection and read as above; the status of
 * the first response line, 0 when none arrived, -1 when the connection
 * failed. *closed (may be NULL): the gateway closed it within wait_ms. */
int raw_exchange(int port, const void *request, size_t len, char *reply, size_t cap,
                 int wait_ms, bool *closed);
/* The status code of a raw response ("HTTP/1.1 400 ..."), 0 if none. */
int raw_status(const char *reply);

#endif
