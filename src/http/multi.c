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
 * call), by taking the handle off the multi handle at once.
 *
 * curl multi is driven the way its socket interface asks: its socket
 * callback turns into descriptor watches on the loop (a small struct per
 * socket, attached with curl_multi_assign()), its timer callback into one
 * loop timer, and both call curl_multi_socket_action() and then read the
 * finished transfers. Attempts are reported only from there, never from
 * inside a libcurl callback, so whatever a report sets off — the next
 * attempt added, a hedge's losers removed, the call's `done` starting a new
 * call — may use the multi handle freely.
 *
 * Ownership: a call's state (this file's xfer with perform.c's call after
 * it) is one allocation, and a socket's watch another; the multi handle
 * owns both and keeps them when a call ends or curl removes a socket
 * (curl drops a socket's watch between transfers at times, even on a
 * kept-alive connection), with the calls' attempt states in a pool of its
 * own, so that after warm-up a call allocates nothing here: each list is
 * as long as the most calls or sockets ever in use at once, and is freed
 * with the handle. The handle's CURLOPT_PRIVATE points at the attempt's
 * slot during a transfer (it is read back and restored, since the caller
 * may use it too).
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "resil/async.h"

#define POOL_BUF_KEEP ((size_t)64 << 10) /* an idle call keeps no larger buffer */

typedef struct xfer_slot {
    resil_http_xfer *x;
    resil_attempt *a;            /* the attempt to report; NULL when idle */
    const resil_attempt_ctx *ctx;
    CURL *easy;
    bool in_multi;
} xfer_slot;

typedef struct sock_watch {
    resil_io io;
    resil_http_multi *m;
    struct sock_watch *next, *prev; /* every watch, so that free finds them */
} sock_watch;

struct resil_http_multi {
    resil_http_client *client;
    resil_loop *loop;
    CURLM *multi;
    resil_timer timer; /* curl's timeout */
    size_t calls;
    sock_watch *watches;
    sock_watch *idle_watches; /* kept for the next socket, through `next` */
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

/* Take the slot's transfer off the multi handle and report its attempt. */
static void finish(xfer_slot *s, CURLcode code)
{
    curl_multi_remove_handle(s->x->m->multi, s->easy);
    s->in_multi = false;
    resil_outcome o = resil__http_attempt_end(s->ctx, code);
    resil_attempt *a = s->a;
    s->a = NULL;
    resil_attempt_done(a, &o);
}

static void read_finished(resil_http_multi *m)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        xfer_slot *s = NULL;
        CURLcode code = msg->data.result;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        if (s != NULL && s->in_multi)
            finish(s, code);
    }
}

/* ---- curl multi on the loop ---------------------------------------------------- */

static void on_io(resil_io *io, int fd, unsigned events)
{
    resil_http_multi *m = ((sock_watch *)io)->m;
    int flags = ((events & RESIL_IO_READ) ? CURL_CSELECT_IN : 0) |
                ((events & RESIL_IO_WRITE) ? CURL_CSELECT_OUT : 0) |
                ((events & RESIL_IO_ERROR) ? CURL_CSELECT_ERR : 0);
    int running;
    curl_multi_socket_action(m->multi, fd, flags, &running);
    read_finished(m);
}

static void on_timer(resil_timer *t)
{
    resil_http_multi *m = (resil_http_multi *)((char *)t - offsetof(resil_http_multi, timer));
    int running;
    curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    read_finished(m);
}

/* The watch stops and waits in the idle list. */
static void watch_end(resil_http_multi *m, sock_watch *w)
{
    resil_loop_io_stop(m->loop, &w->io);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        m->watches = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->next = m->idle_watches;
    m->idle_watches = w;
}

static sock_watch *watch_new(resil_http_multi *m, curl_socket_t s)
{
    sock_watch *w = m->idle_watches;
    if (w != NULL)
        m->idle_watches = w->next;
    else if ((w = malloc(sizeof *w)) == NULL)
        return NULL;
    memset(w, 0, sizeof *w);
    w->io.fn = on_io;
    w->m = m;
    w->next = m->watches;
    if (w->next != NULL)
        w->next->prev = w;
    m->watches = w;
    curl_multi_assign(m->multi, s, w);
    return w;
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    resil_http_multi *m = userp;
    sock_watch *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (w != NULL) {
            curl_multi_assign(m->multi, s, NULL);
            watch_end(m, w);
        }
        return 0;
    }
    if (w == NULL && (w = watch_new(m, s)) == NULL)
        return -1;
    unsigned events = ((what & CURL_POLL_IN) ? RESIL_IO_READ : 0) |
                      ((what & CURL_POLL_OUT) ? RESIL_IO_WRITE : 0);
    return resil_loop_io_start(m->loop, &w->io, s, events) == 0 ? 0 : -1;
}

static int on_curl_timer(CURLM *multi, long ms, void *userp)
{
    (void)multi;
    resil_http_multi *m = userp;
    const resil_loop_ops *ops = m->loop->ops;
    if (ms < 0)
        ops->timer_stop(m->loop->self, &m->timer);
    else
        ops->timer_start(m->loop->self, &m->timer, RESIL_MS(ms));
    return 0;
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
    m->multi = curl_multi_init();
    m->pool = resil__http_pool_new(POOL_BUF_KEEP);
    if (m->multi == NULL || m->pool == NULL) {
        curl_multi_cleanup(m->multi);
        resil__http_pool_free(m->pool);
        free(m);
        return RESIL_ENOMEM;
    }
    m->client = c;
    m->loop = loop;
    m->timer.fn = on_timer;
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
    *out = m;
    return 0;
}

void resil_http_multi_free(resil_http_multi *m)
{
    if (m == NULL)
        return;
    curl_multi_cleanup(m->multi); /* may remove sockets through on_socket */
    while (m->watches != NULL)
        watch_end(m, m->watches);
    for (sock_watch *w = m->idle_watches, *next; w != NULL; w = next) {
        next = w->next;
        free(w);
    }
    for (resil_http_xfer *x = m->idle, *next; x != NULL; x = next) {
        next = x->next_idle;
        free(x);
    }
    resil__http_pool_free(m->pool);
    m->loop->ops->timer_stop(m->loop->self, &m->timer);
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
    if (s->in_multi)
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
