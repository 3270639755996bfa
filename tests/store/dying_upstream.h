/*
 * dying_upstream.h — an upstream whose keep-alive connection dies with a
 * request on it, for the gateway's "at most once" tests.
 *
 * libcurl resends a request on a fresh connection when a reused one closes
 * before any answer byte; an upstream that read the request, perhaps ran
 * it, and then lost the connection would see it twice. This server makes
 * that moment on purpose: it answers every request on keep-alive
 * connections, except request number `drop_at` (counting from 1 over all
 * connections), which it reads in full, counts, and closes the connection
 * on without answering. Then, by `after`, it keeps accepting connections
 * (a resend would arrive and be answered) or stops listening first (a
 * reconnect is refused, as when the upstream died). DYING_AFTER_ANSWERING
 * answers request `drop_at` and then closes its connection: the connection
 * dies idle, between requests, as when an upstream's keep-alive timeout
 * ends it.
 *
 * Answers: 201 for POST, 200 otherwise, Content-Type application/json,
 * body {"n":N} with N the request's number. 127.0.0.1, ephemeral port; raw
 * sockets and a thread per connection, because the point is the exact
 * moment a connection ends, which a server library does not let a test
 * choose.
 */
#ifndef RESIL_TEST_DYING_UPSTREAM_H
#define RESIL_TEST_DYING_UPSTREAM_H

typedef enum dying_after {
    DYING_KEEPS_LISTENING, /* a reconnect is accepted and served */
    DYING_STOPS_LISTENING, /* the listening socket is closed before the connection */
    DYING_AFTER_ANSWERING  /* request drop_at is answered, then its connection closed */
} dying_after;

typedef struct dying_upstream dying_upstream;

/* NULL on failure. */
dying_upstream *dying_upstream_start(unsigned drop_at, dying_after after);
void dying_upstream_stop(dying_upstream *u);
/* "http://127.0.0.1:PORT" */
const char *dying_upstream_url(const dying_upstream *u);
/* Requests received in full so far, the dropped one included. */
unsigned dying_upstream_requests(dying_upstream *u);
/* Of those, the requests with `Idempotency-Key: key`. */
unsigned dying_upstream_key_requests(dying_upstream *u, const char *key);
/* Wait until n of its connections have been closed. */
void dying_upstream_wait_closed(dying_upstream *u, unsigned n);

#endif
