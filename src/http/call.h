/*
 * call.h — one HTTP call through a client, as the blocking perform
 * (perform.c) and curl multi (multi.c) both run it.
 *
 * Everything a call does around its transfers — the Idempotency-Key, the
 * breaker's authority, the callbacks installed on the handle and put back,
 * the buffered body handed over at the end, the classification and the
 * Retry-After — is one mechanism in perform.c. The two ways of running the
 * transfers differ only in who moves the bytes: curl_easy_perform() inside
 * a blocking operation, or curl multi on a loop. So this interface is the
 * call's life (open, close) and an attempt's two ends (begin hands out the
 * handle to run, end turns the transfer's CURLcode into the outcome);
 * the call's state stays private to perform.c.
 */
#ifndef RESIL_HTTP_CALL_H
#define RESIL_HTTP_CALL_H

#include "resil/http.h"

typedef struct http_call http_call;
typedef struct http_pool http_pool;

/* Idle attempt states for calls on one loop, kept as many as were in use
 * at once (the client's own pool keeps a few, for any thread), their
 * buffers above `buf_keep` bytes freed. */
http_pool *resil__http_pool_new(size_t buf_keep);
void resil__http_pool_free(http_pool *p);

/* Bytes of a call's state, for a caller that embeds it. */
size_t resil__http_call_size(void);

/* Prepare a call of `r` on `easy` (its key, authority and attempt states,
 * our callbacks on the handle): 0 and the execution's call and pipeline,
 * or an error with nothing left to close. `r` must live until close. A
 * call on a loop has its loop's `pool` (NULL for a blocking call: the
 * client's), and stops a lost hedge by taking its transfer off curl multi
 * rather than through the progress callback. */
int resil__http_call_open(http_call *call, resil_http_client *c, http_pool *pool, CURL *easy,
                          const resil_http_request *r, resil_call *pc,
                          const resil_pipeline **p);
/* Hand the final attempt's answer to the caller and fill `out` (when the
 * execution ran: `pr` not NULL), then put the caller's options back on the
 * handle and release the attempt states. */
void resil__http_call_close(http_call *call, const resil_pipeline_result *pr,
                            resil_http_result *out);

/* The handle attempt ctx runs on, reset for it (ctx->user is the call). */
CURL *resil__http_attempt_begin(const resil_attempt_ctx *ctx);
/* The attempt's outcome once its transfer ended with `code`. */
resil_outcome resil__http_attempt_end(const resil_attempt_ctx *ctx, CURLcode code);

#endif
