/*
 * multi.c — calls through a client on an event loop, with curl multi
 * moving the bytes.
 *
 * A call here is the blocking perform's call (call.h): the same key, the
 * same callbacks on the handle, the same classification and Retry-After,
 * the same pipeline. What changes is the operation: instead of
 * curl_easy_perform() inside a blocking attempt, an attempt adds its handle
 * to the one CURLM and reports when curl multi says the transfer is done,
 * or when the attempt is cancelled (its timeout, a lost hedge, a cancelled
 * call), by taking the handle off the multi handle at once — or, for a
 * cancel made inside one of libcurl's callbacks, on the loop's next turn.
 *
 * curl multi is driven on the loop by curl_loop.c, the driver the
 * gateway's upstream uses too: it reports a finished transfer from the
 * loop, never from inside a libcurl callback, so whatever a report sets
 * off — the next attempt added, a hedge's losers removed, the call's
 * `done` starting a new call — may use the multi handle freely. The
 * handles are the caller's, so their socket callbacks stay the caller's:
 * a socket's watch stops when curl removes it, as the driver does for any
 * socket it did not open.
 *
 * Ownership: a call's state (this file's xfer with perform.c's call after
 * it) is one allocation; the multi handle owns it and keeps it when a call
 * ends, with the calls' attempt states in a pool of its own, so that after
 * warm-up a call allocates nothing here: the list is as long as the most
 * calls ever in use at once, and is freed with the handle. The handle's CURLOPT_PRIVATE points at the attempt's
 * slot during a transfer (it is read back and restored, since the caller
 * may use it too).
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "curl_loop.h"
#include "resil/async.h"

#define POOL_BUF_KEEP ((size_t)64 << 10) /* an idle call keeps no larger buffer */

typedef struct xfer_slot {
    resil_http_xfer *x;
    resil_attempt *a;            /* the attempt to report; NULL when idle */
    const resil_attempt_ctx *ctx;
    CURL *easy;
    bool in_multi;
    bool leaving;                /* its finish is posted (see finish) */
    CURLcode leave_code;
    resil_work leave;
} xfer_slot;

struct resil_http_multi {
    resil_http_client *client;
    resil_loop *loop;
    resil__curl_loop *driver;
    CURLM *multi; /* the driver's */
    size_t calls;
    resil_http_xfer *idle;    /* kept for the next call, through `next_idle` */
    http_pool *pool;
};

struct resil_http_xfer {
    resil_http_xfer *next_idle;
    resil_http_multi *m;
    CURL *easy;
    void *caller_private;
    resil_http_done_fn done;
    void *ud;
    resil_exec *exec;
    resil_http_request req;
    resil_http_result result;
    xfer_slot slots[RESIL_HEDGE_MAX + 1];
    alignas(max_align_t) unsigned char call[]; /* perform.c's http_call */
};

static resil_http_xfer *xfer_of(void *call)
{
    return (resil_http_xfer *)((unsigned char *)call - offsetof(resil_http_xfer, call));
}

/* ---- finished transfers ------------------------------------------------------ */

static void finish(xfer_slot *s, CURLcode code);

static void finish_posted(resil_work *w)
{
    xfer_slot *s = (xfer_slot *)(void *)((char *)w - offsetof(xfer_slot, leave));
    s->leaving = false;
    finish(s, s->leave_code);
}

/* Take the slot's transfer off the multi handle and report its attempt.
 * A cancel made inside one of libcurl's callbacks (the caller's progress
 * or streaming write callback calling resil_http_cancel) cannot take the
 * handle off there: libcurl refuses, and the handle would reach `done`
 * still in the multi handle. So the finish is posted to the loop, and
 * the attempt stays unreported (its call and slot alive) until then. */
static void finish(xfer_slot *s, CURLcode code)
{
    resil_http_multi *m = s->x->m;
    if (curl_multi_remove_handle(m->multi, s->easy) == CURLM_RECURSIVE_API_CALL) {
        s->leaving = true;
        s->leave_code = code;
        s->leave.fn = finish_posted;
        m->loop->ops->post(m->loop->self, &s->leave);
        return;
    }
    s->in_multi = false;
    resil_outcome o = resil__http_attempt_end(s->ctx, code);
    resil_attempt *a = s->a;
    s->a = NULL;
    resil_attempt_done(a, &o);
}

/* A transfer curl multi says is done (the driver's report). */
static void on_done(void *ud, CURL *easy, void *priv, CURLcode code)
{
    (void)ud;
    (void)easy;
    xfer_slot *s = priv;
    if (s->in_multi && !s->leaving)
        finish(s, code);
}

int resil_http_multi_new(resil_http_client *c, resil_loop *loop, resil_http_multi **out)
{
    if (c == NULL || loop == NULL || loop->ops == NULL || out == NULL)
        return RESIL_EINVAL;
    if (!resil_loop_has_io(loop))
        return RESIL_EUNSUPPORTED;
    resil_http_multi *m = calloc(1, sizeof *m);
    if (m == NULL)
        return RESIL_ENOMEM;
    m->pool = resil__http_pool_new(POOL_BUF_KEEP);
    if (m->pool == NULL || resil__curl_loop_new(loop, on_done, m, &m->driver) != 0) {
        resil__http_pool_free(m->pool);
        free(m);
        return RESIL_ENOMEM;
    }
    m->multi = resil__curl_loop_multi(m->driver);
    m->client = c;
    m->loop = loop;
    *out = m;
    return 0;
}

void resil_http_multi_free(resil_http_multi *m)
{
    if (m == NULL)
        return;
    resil__curl_loop_free(m->driver);
    for (resil_http_xfer *x = m->idle, *next; x != NULL; x = next) {
        next = x->next_idle;
        free(x);
    }
    resil__http_pool_free(m->pool);
    free(m);
}

CURLM *resil_http_multi_handle(resil_http_multi *m) { return m != NULL ? m->multi : NULL; }

size_t resil_http_multi_calls(const resil_http_multi *m) { return m != NULL ? m->calls : 0; }

/* ---- one call ------------------------------------------------------------------ */

/* Cancelled: take the transfer off at once and report what it had. */
static void on_cancel(resil_attempt *a, void *ud)
{
    (void)a;
    xfer_slot *s = ud;
    if (s->in_multi && !s->leaving)
        finish(s, CURLE_ABORTED_BY_CALLBACK);
}

/* The operation: the attempt's handle joins the multi handle. */
static void start_attempt(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    resil_http_xfer *x = xfer_of(ctx->user);
    CURL *easy = resil__http_attempt_begin(ctx);
    xfer_slot *s = &x->slots[ctx->hedge <= RESIL_HEDGE_MAX ? ctx->hedge : 0];
    s->x = x;
    s->a = a;
    s->ctx = ctx;
    s->easy = easy;
    curl_easy_setopt(easy, CURLOPT_PRIVATE, s);
    resil_attempt_on_cancel(a, on_cancel, s);
    if (curl_multi_add_handle(x->m->multi, easy) != CURLM_OK) {
        resil_outcome o = resil__http_attempt_end(ctx, CURLE_FAILED_INIT);
        s->a = NULL;
        resil_attempt_done(a, &o);
        return;
    }
    s->in_multi = true;
}

static resil_http_xfer *xfer_new(resil_http_multi *m)
{
    resil_http_xfer *x = m->idle;
    if (x != NULL)
        m->idle = x->next_idle;
    else if ((x = malloc(sizeof *x + resil__http_call_size())) == NULL)
        return NULL;
    memset(x, 0, offsetof(resil_http_xfer, call)); /* the call is prepared by its open */
    x->m = m;
    return x;
}

static void xfer_end(resil_http_multi *m, resil_http_xfer *x)
{
    x->next_idle = m->idle;
    m->idle = x;
}

/* The xfer goes idle after `done`, so that a call `done` starts on the same
 * handle takes another and the result `done` reads stays this call's. */
static void call_done(const resil_pipeline_result *pr, void *ud)
{
    resil_http_xfer *x = ud;
    resil_http_multi *m = x->m;
    resil__http_call_close((http_call *)x->call, pr, &x->result);
    curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x->caller_private);
    m->calls--;
    x->done(x->easy, &x->result, x->ud);
    xfer_end(m, x);
}

int resil_http_start(resil_http_multi *m, CURL *easy, const resil_http_request *req,
                     resil_http_done_fn done, void *ud, resil_http_xfer **out)
{
    if (m == NULL || easy == NULL || done == NULL)
        return RESIL_EINVAL;
    resil_http_xfer *x = xfer_new(m);
    if (x == NULL)
        return RESIL_ENOMEM;
    x->easy = easy;
    x->done = done;
    x->ud = ud;
    if (req != NULL)
        x->req = *req;
    else
        resil_http_request_default(&x->req);
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x->caller_private);
    resil_call pc;
    const resil_pipeline *p;
    http_call *call = (http_call *)x->call;
    int rc = resil__http_call_open(call, m->client, m->pool, easy, &x->req, &pc, &p);
    if (rc != 0) {
        xfer_end(m, x);
        return rc;
    }
    if (out != NULL)
        *out = x;
    m->calls++;
    rc = resil_pipeline_start(p, m->loop, start_attempt, &pc, call_done, x, &x->exec);
    if (rc != 0) {
        m->calls--;
        resil__http_call_close(call, NULL, NULL);
        xfer_end(m, x);
    }
    return rc;
}

void resil_http_cancel(resil_http_xfer *x)
{
    if (x != NULL)
        resil_exec_cancel(x->exec);
}
