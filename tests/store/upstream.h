/*
 * upstream.h — a counting HTTP server for the gateway's tests and benchmark.
 *
 * It stands in for the service behind `resil gateway`: it counts every
 * request it receives (the number the idempotency tests are about), answers
 * with a body that names that count, and can be told to be slow or to fail
 * the next few requests. Thread per connection on 127.0.0.1, ephemeral port.
 *
 * Every answer: status 201 for POST, 200 otherwise (or the scripted failure
 * status), Content-Type application/json, Location /orders/N, and the body
 *   {"n":N,"method":"POST","target":"/orders","body":"<request body>"}
 * where N counts requests from 1. GET /status/NNN answers NNN instead, and
 * a request to /long-header/LEN gets an X-Long header of LEN bytes ('h').
 * A request to a target starting with /hold is held (counted, not yet
 * answered) until upstream_release(): a slow upstream without a clock.
 */
#ifndef RESIL_TEST_UPSTREAM_H
#define RESIL_TEST_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

typedef struct upstream upstream;

/* NULL on failure. */
upstream *upstream_start(void);
void upstream_stop(upstream *u);
int upstream_port(const upstream *u);
/* "http://127.0.0.1:PORT" */
const char *upstream_url(const upstream *u);
/* Wait until n requests are held at once (see /hold); false after 10 s. */
bool upstream_wait_held(upstream *u, unsigned n);
/* Answer every held request, and every /hold request from now on. */
void upstream_release(upstream *u);
/* Requests received so far. */
unsigned upstream_requests(upstream *u);
/* Hold every answer this long (ms) before sending it. */
void upstream_set_delay_ms(upstream *u, int ms);
/* Answer the next n requests with `status` and body {"error":"scripted"}. */
void upstream_fail_next(upstream *u, unsigned n, int status);
/* The value of request header `name` on the last request ("" if absent). */
void upstream_last_header(upstream *u, const char *name, char *buf, size_t cap);
/* The raw request-target of the last request, exactly as received. */
void upstream_last_target(upstream *u, char *buf, size_t cap);
/* Requests received with `Idempotency-Key: key` (its value as sent). */
unsigned upstream_key_requests(upstream *u, const char *key);
/* How many keys arrived on more than one request. */
unsigned upstream_keys_seen_more_than_once(upstream *u);

#endif
