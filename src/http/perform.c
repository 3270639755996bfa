/*
 * perform.c — the drop-in: an easy handle performed through the client's
 * pipeline, once per attempt.
 *
 * libcurl cannot read an option back, so the drop-in cannot wrap the
 * caller's callbacks behind its back: the request names them, the call
 * installs its own for its duration and puts the caller's back afterwards.
 * Its own callbacks buffer each attempt's body (and headers, when the
 * caller wants them: the lines as libcurl delivered them, bounded, see
 * head.h) and abort a transfer whose token has fired (a hedge
 * that lost, the caller's cancel); a failure's Retry-After is read from the
 * headers libcurl keeps anyway. Only when the pipeline has picked the final
 * attempt does anything reach the caller's callbacks — the one exception
 * being a body too large to buffer, which is streamed, and whose attempt is
 * then the last (what has been handed over cannot be taken back).
 *
 * The client builds its pipelines once: the strategies in Microsoft's
 * order, a bulkhead and a breaker registry shared by a plain pipeline and,
 * when hedging is on, a hedged one that only safe methods take. What an
 * HTTP request adds to the retry decision — its method, whether it carries
 * an Idempotency-Key, whether its body was streamed — is known only per
 * call, while the pipeline's policy is fixed at build; so the call is the
 * pipeline execution's user data, and the policy's classifier reads it
 * from the attempt context it is handed, as the operation does (and reads
 * there which hedge's handle an attempt uses). Nothing is per thread, so
 * calls nest or alternate on one thread freely. Attempt buffers are pooled
 * in the client (or, for calls on a loop, in their multi handle), so after
 * warm-up a call allocates nothing of its own.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "call.h"
#include "head.h"
#include "resil/http.h"
#include "route_internal.h"
#include "trace.h"
#include "resil/pipeline.h"

#define POOL_KEEP 64                    /* idle attempt states listed, besides the spare */
#define BUF_KEEP ((size_t)4 << 20)      /* larger buffers are freed when pooled */
#define METHOD_CAP 24
#define URL_COPY_MAX 256                /* a routed call's URL kept without malloc */
#define KEY_HEADER "Idempotency-Key"

/* Idle attempt states, with their buffers' memory. The client's pool
 * serves its blocking calls from any thread; a multi handle has its own,
 * used on its loop's thread and as deep as its calls have been at once.
 * The state given back last waits in `spare`, which a call takes and gives
 * back with one atomic exchange each: a call one at a time, the common
 * case, never reaches the list. The lock guards a push or a pop of one
 * list node: a spinlock, whose lock and unlock cost a tenth of a mutex's. */
struct http_pool {
    _Atomic(struct http_attempt *) spare; /* NULL, or an idle state off the list */
    pthread_spinlock_t mu;
    struct http_attempt *free;
    size_t n, keep;
    size_t buf_keep; /* larger buffers are freed when pooled */
};

typedef struct http_buf {
    char *p;
    size_t len, cap;
} http_buf;


/* One attempt's view of one handle: the caller's for the primary, a
 * duplicate for each hedge. Reset before every attempt it runs. */
typedef struct http_attempt {
    struct http_attempt *next_free;
    http_call *call;
    CURL *easy;
    resil_cancel *cancel; /* the attempt's token; may be NULL */
    http_buf body;
    size_t body_max;      /* bytes the body may buffer before it streams:
                             the client's bound, none for a hedged call */
    resil__http_head head;
    bool streaming;       /* the body goes straight to the caller */
    bool timed;           /* CURLOPT_TIMEOUT_MS is the call's on its handle */
    uint32_t attempt;     /* the retry attempt it last ran (0: none) */
    CURLcode code;
    long status;
    resil__http_trace_hdr trace; /* this attempt's trace headers, when traced */
} http_attempt;

/* A hedge-route endpoint and the breaker key its authority gives, read
 * once when the client is made rather than on every hedged call; an empty
 * key marks an endpoint without an authority. */
typedef struct route_key {
    const char *url; /* the route's own string: plans hand out this pointer */
    char key[RESIL_BREAKER_NAME_MAX];
} route_key;

struct resil_http_client {
    resil_http_opts opts;
    route_key *route_keys; /* with breakers and a hedge route */
    size_t nroute_keys;
    resil_registry *registry; /* NULL without breakers */
    bool own_registry;
    uint64_t id;              /* names the client in threads' memos */
    _Atomic bool memo_ok;     /* memos' breakers are still the registry's */
    _Atomic uint32_t made;    /* breakers its own registry has made */
    resil_bulkhead *bulkhead; /* NULL without a concurrency limit */
    resil_pipeline *plain;
    resil_pipeline *hedged;   /* NULL without hedging */
    http_pool pool;
};

struct http_call {
    resil_http_client *client;
    http_pool *pool;      /* where its attempt states come from */
    const resil_http_request *req;
    const char *method;   /* req->method, the learned one, or NULL */
    char learned[METHOD_CAP];
    bool has_key;
    bool last;            /* no further attempt: a body was streamed */
    bool hedged;
    bool watch;           /* a progress callback watches for cancellation */
    bool wants_headers;   /* caller_wants_headers(req): ours collect them */
    bool headers_set;     /* CURLOPT_HTTPHEADER carries our key */
    bool on_loop;         /* its attempts' timeouts are the loop's timers */
    const char *authority;  /* the breaker key: the memo's or authority_buf */
    resil_breaker *breaker; /* the authority's, from the thread's memo; NULL:
                               the pipeline looks it up (not a reference: the
                               execution takes its own before anything could
                               replace the memo) */
    uint32_t natt;
    char *url;                             /* the request's URL, copied, when routed:
                                              url_copy, or allocated when longer */
    size_t nplan;
    /* set as needed, not cleared per call: the arrays are read below natt
     * and nplan only, the text once written */
    http_attempt *att[RESIL_HEDGE_MAX + 1];
    const char *plan[RESIL_HEDGE_MAX + 1]; /* attempt k's endpoint (ctx->hedge = k) */
    const char *plan_keys[RESIL_HEDGE_MAX + 1]; /* their breakers' keys */
    struct curl_slist key_node;
    char key_header[sizeof KEY_HEADER + 2 + RESIL_HTTP_KEY_MAX];
    char key[RESIL_HTTP_KEY_MAX + 1];
    char authority_buf[RESIL_BREAKER_NAME_MAX]; /* a key too long to memo */
    char url_copy[URL_COPY_MAX];
    resil__http_tel tel;
    struct curl_slist *headers; /* what attempts send after their trace headers */
};

/* ---- buffers and the pool ------------------------------------------------ */

static int buf_append(http_buf *b, const char *p, size_t n)
{
    if (n == 0) /* libcurl's call for an empty body: p may be NULL yet */
        return 0;
    if (n > SIZE_MAX / 2 - b->len)
        return RESIL_ENOMEM;
    if (b->len + n > b->cap) {
        size_t cap = b->cap > 0 ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *grown = realloc(b->p, cap);
        if (grown == NULL)
            return RESIL_ENOMEM;
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static void buf_trim(http_buf *b, size_t keep)
{
    b->len = 0;
    if (b->cap > keep) {
        free(b->p);
        b->p = NULL;
        b->cap = 0;
    }
}

static void attempt_free(http_attempt *a)
{
    free(a->body.p);
    resil__http_head_free(&a->head);
    free(a);
}

static void pool_init(http_pool *p, size_t keep, size_t buf_keep)
{
    atomic_init(&p->spare, NULL);
    pthread_spin_init(&p->mu, PTHREAD_PROCESS_PRIVATE);
    p->free = NULL;
    p->n = 0;
    p->keep = keep;
    p->buf_keep = buf_keep;
}

static void pool_drain(http_pool *p)
{
    http_attempt *spare = atomic_load_explicit(&p->spare, memory_order_relaxed);
    if (spare != NULL)
        attempt_free(spare);
    for (http_attempt *a = p->free, *next; a != NULL; a = next) {
        next = a->next_free;
        attempt_free(a);
    }
    pthread_spin_destroy(&p->mu);
}

static http_attempt *pool_take(http_pool *p)
{
    http_attempt *a = atomic_exchange_explicit(&p->spare, NULL, memory_order_acquire);
    if (a != NULL)
        return a;
    pthread_spin_lock(&p->mu);
    a = p->free;
    if (a != NULL) {
        p->free = a->next_free;
        p->n--;
    }
    pthread_spin_unlock(&p->mu);
    return a != NULL ? a : calloc(1, sizeof *a);
}

static void pool_give(http_pool *p, http_attempt *a)
{
    buf_trim(&a->body, p->buf_keep);
    resil__http_head_clear(&a->head, p->buf_keep);
    a->easy = NULL;
    a->call = NULL;
    http_attempt *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&p->spare, &none, a, memory_order_release,
                                                memory_order_relaxed))
        return;
    pthread_spin_lock(&p->mu);
    bool keep = p->n < p->keep;
    if (keep) {
        a->next_free = p->free;
        p->free = a;
        p->n++;
    }
    pthread_spin_unlock(&p->mu);
    if (!keep)
        attempt_free(a);
}

http_pool *resil__http_pool_new(size_t buf_keep)
{
    http_pool *p = malloc(sizeof *p);
    if (p != NULL)
        pool_init(p, SIZE_MAX, buf_keep);
    return p;
}

void resil__http_pool_free(http_pool *p)
{
    if (p == NULL)
        return;
    pool_drain(p);
    free(p);
}

/* ---- handing data to the caller ------------------------------------------ */

static size_t caller_write(const resil_http_request *r, char *p, size_t n)
{
    if (r->write_fn != NULL)
        return r->write_fn(p, 1, n, r->write_data);
    return fwrite(p, 1, n, r->write_data != NULL ? (FILE *)r->write_data : stdout);
}

/* libcurl's rule: without a header function, HEADERDATA (when set) is a
 * stream for the write function; without either, headers are dropped. */
static bool caller_wants_headers(const resil_http_request *r)
{
    return r->header_fn != NULL || r->header_data != NULL;
}

static size_t caller_header(const resil_http_request *r, char *p, size_t n)
{
    if (r->header_fn != NULL)
        return r->header_fn(p, 1, n, r->header_data);
    if (r->write_fn != NULL)
        return r->write_fn(p, 1, n, r->header_data);
    return fwrite(p, 1, n, (FILE *)r->header_data);
}

/* In pieces of at most CURL_MAX_WRITE_SIZE, as libcurl promises. */
static int deliver_body(const resil_http_request *r, char *p, size_t n)
{
    while (n > 0) {
        size_t k = n < CURL_MAX_WRITE_SIZE ? n : CURL_MAX_WRITE_SIZE;
        if (caller_write(r, p, k) != k)
            return RESIL_EIO;
        p += k;
        n -= k;
    }
    return 0;
}

static int deliver_line(char *line, size_t n, void *ud)
{
    return caller_header(ud, line, n) == n ? 0 : RESIL_EIO;
}

/* One header line per call, each as libcurl delivered it. */
static int deliver_headers(const http_call *call, const resil__http_head *head)
{
    if (!call->wants_headers)
        return 0;
    return resil__http_head_each(head, deliver_line, (void *)call->req);
}

/* The body outgrew its buffer: hand over what this attempt has so far and
 * stream the rest; the attempt becomes the last. */
static int commit(http_attempt *a)
{
    const resil_http_request *r = a->call->req;
    a->streaming = true;
    a->call->last = true;
    int rc = deliver_headers(a->call, &a->head);
    if (rc == 0)
        rc = deliver_body(r, a->body.p, a->body.len);
    a->body.len = 0;
    return rc;
}

/* ---- libcurl's callbacks --------------------------------------------------- */

__attribute__((noinline)) static size_t body_chunk_slow(http_attempt *a, char *p, size_t n)
{
    if (!a->streaming && n > a->body_max - a->body.len && commit(a) != 0)
        return 0;
    if (a->streaming)
        return deliver_body(a->call->req, p, n) == 0 ? n : 0;
    return buf_append(&a->body, p, n) == 0 ? n : 0;
}

/* A chunk that fits the buffer as it is, and the bound, is copied in
 * place; growing it, streaming, committing and an empty chunk (before the
 * buffer has memory) are the slow path's. */
static inline size_t body_chunk(http_attempt *a, char *p, size_t n)
{
    http_buf *b = &a->body;
    if (n == 0 || a->streaming || n > b->cap - b->len || n > a->body_max - b->len)
        return body_chunk_slow(a, p, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return n;
}

/* The attempt whose curl_easy_perform() runs on this thread (http_op sets
 * it around the transfer, and puts back the one of a call it nests in):
 * a blocking call's write callback finds its attempt here, so the call
 * does not set CURLOPT_WRITEDATA for its attempts — one curl_easy_setopt()
 * a request; the caller's is put back afterwards all the same (restore).
 * A call on a loop runs many transfers on one thread and hands each its
 * attempt in WRITEDATA. */
static _Thread_local http_attempt *running;

static size_t on_body_running(char *p, size_t size, size_t nmemb, void *ud)
{
    (void)ud; /* the caller's WRITEDATA */
    return body_chunk(running, p, size * nmemb);
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    return body_chunk(ud, p, size * nmemb);
}

static bool header_is(const char *p, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && p[k] == ':' && strncasecmp(p, name, k) == 0;
}

/* Only when the caller wants headers: libcurl keeps the response's
 * headers itself (curl_easy_header), which is where Retry-After is read.
 * Headers past RESIL__HTTP_HEAD_MAX fail the transfer (a write error, not
 * retried): the server would send them again. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    http_attempt *a = ud;
    size_t n = size * nmemb;
    const resil_http_request *r = a->call->req;
    if (a->streaming) /* trailers */
        return caller_header(r, p, n);
    return resil__http_head_add(&a->head, p, n, RESIL__HTTP_HEAD_MAX) == 0 ? n : 0;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    http_attempt *a = ud;
    if (resil_cancelled(a->cancel))
        return 1;
    const resil_http_request *r = a->call->req;
    if (r->xferinfo_fn != NULL)
        return r->xferinfo_fn(r->xferinfo_data, dltotal, dlnow, ultotal, ulnow);
    return 0;
}

static void install(http_attempt *a)
{
    CURL *e = a->easy;
    if (a->call->on_loop) {
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
    } else {
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body_running);
    }
    if (a->call->wants_headers) {
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, a);
    }
    if (a->call->watch) {
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, a);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    }
    if (a->call->headers_set)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, &a->call->key_node);
}

static void restore(CURL *e, const http_call *call)
{
    const resil_http_request *r = call->req;
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, r->write_fn);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r->write_data != NULL ? r->write_data : stdout);
    if (call->wants_headers) {
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, r->header_fn);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, r->header_data);
    }
    if (call->watch) {
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, r->xferinfo_fn);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, r->xferinfo_data);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, r->xferinfo_fn != NULL ? 0L : 1L);
    }
    if (call->natt > 0 && call->att[0]->timed)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 0L);
    if (call->headers_set || call->tel.traced)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
}

/* ---- one attempt ----------------------------------------------------------- */

static void reset_attempt(http_attempt *a, const resil_attempt_ctx *ctx)
{
    a->body.len = 0;
    resil__http_head_clear(&a->head, SIZE_MAX);
    a->streaming = false;
    a->cancel = ctx->cancel;
    a->attempt = ctx->attempt;
    a->code = CURLE_OK;
    a->status = 0;
}

/* Without a method from the caller, take libcurl's word for it after the
 * first transfer — unless a redirect was followed, which may have turned
 * a POST into a GET: then the method stays unknown, and is never retried. */
static void learn_method(http_call *call, CURL *e)
{
    char *m = NULL;
    long redirects = 0;
    curl_easy_getinfo(e, CURLINFO_REDIRECT_COUNT, &redirects);
    if (redirects > 0 || curl_easy_getinfo(e, CURLINFO_EFFECTIVE_METHOD, &m) != CURLE_OK ||
        m == NULL || strlen(m) >= sizeof call->learned)
        return;
    memcpy(call->learned, m, strlen(m) + 1);
    call->method = call->learned;
}

/* The hint from one header, when the response has it and it parses. A
 * header sent more than once must say the same wait each time: its lines
 * joined ("5, 9", RFC 9110's reading of a repeated field) are malformed,
 * and so are they apart. */
static bool hint_from(const http_attempt *a, const char *name, int64_t wall_now,
                      resil_duration *d)
{
    struct curl_header *h;
    if (curl_easy_header(a->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK ||
        resil_http_retry_after_value(name, h->value, wall_now, d) != 0)
        return false;
    for (size_t i = 1, n = h->amount; i < n; i++) {
        resil_duration again;
        if (curl_easy_header(a->easy, name, i, CURLH_HEADER, -1, &h) != CURLHE_OK ||
            resil_http_retry_after_value(name, h->value, wall_now, &again) != 0 ||
            again != *d)
            return false;
    }
    return true;
}

/* A failure's wait hint, from the headers libcurl kept of the last
 * response (redirects and 1xx answers excluded): the client's own header
 * names first, then the built-in ones. A success needs none. */
static resil_duration retry_after_of(const http_attempt *a, const resil_http_opts *o,
                                     resil_clock *clock)
{
    static const char *const builtin[] = {RESIL_HTTP_RETRY_AFTER_HEADERS};
    if (a->status < 400)
        return RESIL_NO_HINT;
    int64_t wall_now = resil_clock_wall_now(clock);
    resil_duration d;
    for (const char *const *n = o->retry_after_headers; n != NULL && *n != NULL; n++)
        if (hint_from(a, *n, wall_now, &d))
            return d;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (hint_from(a, builtin[i], wall_now, &d))
            return d;
    return RESIL_NO_HINT;
}

/* A failure marked `Idempotent-Outcome: unknown` (the name in any case,
 * as libcurl looks headers up): the idempotency layer's final answer. */
static bool outcome_unknown_of(const http_attempt *a)
{
    struct curl_header *h;
    return a->status >= 400 &&
           curl_easy_header(a->easy, "Idempotent-Outcome", 0, CURLH_HEADER, -1, &h) ==
               CURLHE_OK &&
           strcmp(h->value, "unknown") == 0;
}

/* What the caller's classifiers see of an attempt: our call state, the
 * attempt's user data inside the client, gives way to the request's own. */
static resil_attempt_ctx caller_ctx(const resil_attempt_ctx *ctx)
{
    const http_call *call = ctx->user;
    resil_attempt_ctx c = *ctx;
    c.user = call->req->user;
    return c;
}

static resil_outcome classify(const http_call *call, const http_attempt *a,
                              const resil_attempt_ctx *ctx)
{
    const resil_http_opts *o = &call->client->opts;
    resil_attempt_ctx c = caller_ctx(ctx);
    resil_http_response r = {a->easy,       a->code,
                             a->status,     call->method,
                             call->has_key, retry_after_of(a, o, ctx->clock),
                             outcome_unknown_of(a), &c};
    if (o->classify != NULL)
        return o->classify(&r, o->classify_ud);
    return resil_http_classify(&r, o->retry_500);
}

/* The state of the handle ctx's attempt runs on (its hedge's). */
static http_attempt *attempt_of(const http_call *call, const resil_attempt_ctx *ctx)
{
    return call->att[ctx->hedge < call->natt ? ctx->hedge : 0];
}

/* libcurl's timeout for the attempt: what it has left. On a loop the
 * attempt's deadline is already a loop timer that takes the transfer off
 * curl multi, so libcurl keeps no timeout of its own (which would cost it
 * a timer per transfer). An attempt with no deadline off a loop leaves the
 * handle's own timeout as it is — unless an earlier attempt of the call
 * set one there — and so spares the option's set and reset and libcurl's
 * timer. */
static void set_timeout(http_attempt *a, const http_call *call, const resil_attempt_ctx *ctx)
{
    long ms = call->on_loop ? 0L : resil_ctx_remaining_ms(ctx);
    if (ms == 0 && !call->on_loop && !a->timed)
        return;
    curl_easy_setopt(a->easy, CURLOPT_TIMEOUT_MS, ms);
    a->timed = true;
}

/* The state of the handle an attempt runs on (the caller's, or its
 * hedge's duplicate), reset for it, with libcurl's timeout set
 * (set_timeout). */
static inline http_attempt *attempt_start(const resil_attempt_ctx *ctx)
{
    http_call *call = ctx->user;
    http_attempt *a = attempt_of(call, ctx);
    reset_attempt(a, ctx);
    set_timeout(a, call, ctx);
    if (call->tel.traced)
        resil__http_tel_attempt(&call->tel, ctx, a->easy, &a->trace, call->headers);
    return a;
}

CURL *resil__http_attempt_begin(const resil_attempt_ctx *ctx)
{
    return attempt_start(ctx)->easy;
}

/* The attempt's outcome once its transfer ended with `code` (performed,
 * or finished by curl multi, or taken off it when cancelled). */
resil_outcome resil__http_attempt_end(const resil_attempt_ctx *ctx, CURLcode code)
{
    http_call *call = ctx->user;
    http_attempt *a = attempt_of(call, ctx);
    a->code = code;
    curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &a->status);
    if (call->method == NULL && ctx->hedge == 0)
        learn_method(call, a->easy);
    /* The built-in table's answer to a whole transfer below 400, built in
     * place: without the response's view that only a failure's row or a
     * caller's classifier reads, nor a copy out of classify(). */
    if (call->client->opts.classify == NULL && code == CURLE_OK && a->status < 400) {
        resil_outcome ok = resil_ok();
        ok.code = a->status;
        return ok;
    }
    resil_outcome o = classify(call, a, ctx);
    /* Aborted because the attempt's token fired: say which deadline or
     * cancel it was, rather than "callback aborted". */
    if (a->code == CURLE_ABORTED_BY_CALLBACK && resil_cancelled(ctx->cancel))
        o = resil_cancel_reason(ctx->cancel) == RESIL_ETIMEDOUT
                ? resil_fail(RESIL_TIMEOUT, RESIL_ETIMEDOUT, "timed out")
                : resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "cancelled");
    return o;
}

static resil_outcome http_op(resil_attempt_ctx *ctx)
{
    http_attempt *a = attempt_start(ctx), *outer = running;
    running = a;
    CURLcode code = curl_easy_perform(a->easy);
    running = outer;
    return resil__http_attempt_end(ctx, code);
}

/* ---- the retry decision ------------------------------------------------------ */

static bool method_may_retry(const http_call *call)
{
    const resil_http_opts *o = &call->client->opts;
    if (call->method == NULL || (o->disable_for & resil_http_method_bit(call->method)) != 0)
        return false;
    return o->retry_unsafe || resil_http_method_retryable(call->method, call->has_key);
}

/* The caller's classifier (or the kind's verdict), on the caller's view
 * of the attempt. */
static bool caller_retry_on(const resil_retry_policy *p, const resil_outcome *o,
                            const resil_attempt_ctx *ctx)
{
    if (p->retry_on == NULL)
        return resil_retry_on_default(o, NULL);
    resil_attempt_ctx c = caller_ctx(ctx);
    return p->retry_on(o, &c, p->retry_on_ud);
}

/* The pipeline's retry classifier: the caller's verdict, unless this
 * request may not be sent again. The call is the attempt's user data. */
static bool http_retry_on(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    const http_call *call = ctx->user;
    if (call->last || !method_may_retry(call))
        return false;
    return caller_retry_on(ud, o, ctx);
}

/* The caller's delay generator, on the caller's view of the attempt. */
static resil_duration http_delay(const resil_delay_info *info, void *ud)
{
    const resil_retry_policy *p = ud;
    resil_attempt_ctx c = caller_ctx(info->ctx);
    resil_delay_info mine = *info;
    mine.ctx = &c;
    return p->delay(&mine, p->delay_ud);
}

/* The hedging classifier: the caller's retry classifier, which answers
 * "worth another attempt?" for hedges too. */
static bool http_hedge_on(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    return caller_retry_on(ud, o, ctx);
}

/* ---- the thread's memo of the last URL ---------------------------------------- */

/* The URL this thread asked about last, remembered with its breaker key
 * and, for a client with a registry of its own, the key's breaker: a
 * handle is performed again and again on one URL, and comparing it with
 * the last one costs a tenth of reading its authority out again and a
 * fifth of looking the key up in the registry.
 *
 * The memo holds a reference, so its breaker never dangles; the question
 * is only whether it is still the registry's. A registry of the client's
 * own drops a breaker only to make room for another (nobody else holds
 * it: resil_registry_remove cannot reach it), and every breaker it makes
 * passes through the client's creation count first (new_authority): so
 * until that count reaches max_authorities nothing has been evicted, and
 * from then on the client stops trusting memos (memo_ok) and looks every
 * key up, as a shared registry, which others may change, always does. The
 * reference is dropped when the memo is replaced, when its client is
 * freed on the thread, or when the thread exits (memo_key's destructor). */
#define URL_MEMO_MAX 256

typedef struct url_memo {
    uint64_t client;        /* the client whose registry gave `breaker` */
    resil_breaker *breaker; /* a reference, or NULL */
    char url[URL_MEMO_MAX]; /* with its NUL; "": empty (no URL without an
                               authority is remembered) */
    char authority[RESIL_BREAKER_NAME_MAX];
} url_memo;

static _Thread_local url_memo memo;
static _Thread_local bool memo_keyed; /* memo_key knows this thread's memo */
static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t next_client_id = 1;

static void memo_forget(url_memo *m)
{
    resil_breaker_free(m->breaker);
    m->breaker = NULL;
    m->client = 0;
}

static void memo_at_exit(void *m) { memo_forget(m); }

static void memo_key_make(void) { pthread_key_create(&memo_key, memo_at_exit); }

/* The URL's breaker key: the memo's, or read into `out` when the URL is
 * too long to remember (NULL: the URL has none); *memoed says whether the
 * memo now describes this URL. The memo's text stays put until the
 * thread's next call, which is after this one has handed the key over. A
 * URL of another authority takes the memo's breaker away with it. A hit
 * is one comparison of the two strings; the URL's length is read only on
 * a miss. */
static const char *authority_of(const char *url, char *out, bool *memoed)
{
    *memoed = memo.url[0] != '\0' && strcmp(url, memo.url) == 0;
    if (*memoed)
        return memo.authority;
    if (resil_http_authority(url, out, RESIL_BREAKER_NAME_MAX) != 0)
        return NULL;
    size_t len = strlen(url);
    if (len >= URL_MEMO_MAX)
        return out;
    if (strcmp(out, memo.authority) != 0)
        memo_forget(&memo);
    *memoed = true;
    memcpy(memo.url, url, len + 1);
    memcpy(memo.authority, out, strlen(out) + 1);
    return memo.authority;
}

static bool memo_trusted(const resil_http_client *c)
{
    return atomic_load_explicit(&c->memo_ok, memory_order_acquire);
}

/* The breaker of the authority authority_of() just read, from the memo
 * (NULL: the pipeline looks the key up). On a miss the memo takes the
 * registry's breaker for the next call. */
static resil_breaker *memo_breaker(const resil_http_client *c, const char *authority)
{
    if (!c->own_registry || !memo_trusted(c))
        return NULL;
    if (memo.client == c->id)
        return memo.breaker;
    if (!memo_keyed) {
        pthread_once(&memo_once, memo_key_make);
        memo_keyed = pthread_setspecific(memo_key, &memo) == 0;
        if (!memo_keyed)
            return NULL;
    }
    memo_forget(&memo);
    if (resil_registry_get(c->registry, authority, NULL, &memo.breaker, NULL) != 0)
        return NULL;
    memo.client = c->id;
    return memo.breaker;
}

/* Every breaker the client's own registry makes passes here first: once
 * as many as it keeps have been made, the next may evict one a memo
 * holds, so memos are no longer trusted. Counting races that lost (two
 * threads making one key) only stops trusting them sooner. */
static int new_authority(const char *key, resil_breaker_opts *o, void *ud)
{
    (void)key;
    (void)o;
    resil_http_client *c = ud;
    if (atomic_fetch_add(&c->made, 1) + 1 >= c->opts.max_authorities)
        atomic_store_explicit(&c->memo_ok, false, memory_order_release);
    return 0;
}

/* ---- the client ------------------------------------------------------------ */

/* A failed add is kept by the builder and reported by build(). */
static void add_strategies(resil_http_client *c, resil_pipeline_builder *b, bool hedge)
{
    const resil_http_opts *o = &c->opts;
    if (o->listener != NULL)
        resil_pipeline_builder_listen(b, o->listener, o->listener_ud);
    if (c->bulkhead != NULL)
        resil_pipeline_use_bulkhead(b, c->bulkhead);
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    if (o->total_timeout > 0) {
        t.timeout = o->total_timeout;
        resil_pipeline_add_total_timeout(b, &t);
    }
    resil_retry_policy p = o->retry;
    p.retry_on = http_retry_on;
    p.retry_on_ud = &c->opts.retry;
    if (p.delay != NULL) {
        p.delay = http_delay;
        p.delay_ud = &c->opts.retry;
    }
    resil_pipeline_add_retry(b, &p);
    if (hedge) {
        resil_hedge_opts h;
        resil_hedge_opts_default(&h);
        h.delay = o->hedge_delay;
        h.max_hedged = o->max_hedged;
        if (o->retry.retry_on != NULL) {
            h.hedge_on = http_hedge_on;
            h.hedge_on_ud = &c->opts.retry;
        }
        h.wait_losers = true; /* the call's state lives on the caller's stack */
        resil_pipeline_add_hedging(b, &h);
    }
    if (c->registry != NULL)
        resil_pipeline_use_registry(b, c->registry);
    if (o->attempt_timeout > 0) {
        t.timeout = o->attempt_timeout;
        resil_pipeline_add_attempt_timeout(b, &t);
    }
    for (resil_chaos *const *k = o->chaos; k != NULL && *k != NULL; k++)
        resil_pipeline_use_chaos(b, *k);
}

static int build(resil_http_client *c, bool hedge, resil_pipeline **out, resil_err *err)
{
    resil_pipeline_builder *b;
    int rc = resil_pipeline_builder_new(c->opts.name, &b, err);
    if (rc != 0)
        return rc;
    resil_pipeline_builder_clock(b, c->opts.clock);
    add_strategies(c, b, hedge);
    rc = resil_pipeline_build(b, out, err);
    resil_pipeline_builder_free(b);
    return rc;
}

static int make_shared_objects(resil_http_client *c, resil_err *err)
{
    const resil_http_opts *o = &c->opts;
    if (o->max_concurrency > 0) {
        resil_bulkhead_opts bo;
        resil_bulkhead_opts_default(&bo);
        bo.max_concurrency = o->max_concurrency;
        bo.max_queue = 0;
        int rc = resil_bulkhead_new(&bo, &c->bulkhead, err);
        if (rc != 0)
            return rc;
    }
    if (!o->breakers)
        return 0;
    if (o->registry != NULL) {
        c->registry = o->registry;
        return 0;
    }
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    ro.max_breakers = o->max_authorities;
    ro.breaker = o->breaker;
    if (ro.breaker.clock == NULL)
        ro.breaker.clock = o->clock;
    ro.opts_for = new_authority;
    ro.opts_ud = c;
    c->own_registry = true;
    atomic_store(&c->memo_ok, true);
    return resil_registry_new(&ro, &c->registry, err);
}

/* Every hedge-route endpoint's breaker key, when breakers need them. */
static int read_route_keys(resil_http_client *c)
{
    const resil_route_opts *ro = c->opts.hedge_route;
    if (ro == NULL || c->registry == NULL)
        return 0;
    size_t n = 0;
    for (size_t g = 0; g < ro->ngroups; g++)
        n += ro->groups[g].len;
    c->route_keys = calloc(n, sizeof *c->route_keys);
    if (c->route_keys == NULL)
        return RESIL_ENOMEM;
    for (size_t g = 0; g < ro->ngroups; g++) {
        for (size_t e = 0; e < ro->groups[g].len; e++) {
            route_key *k = &c->route_keys[c->nroute_keys++];
            k->url = ro->groups[g].endpoints[e].url;
            if (resil_http_authority(k->url, k->key, sizeof k->key) != 0)
                k->key[0] = '\0';
        }
    }
    return 0;
}

int resil_http_client_new(const resil_http_opts *o, resil_http_client **out, resil_err *err)
{
    if (out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "http: out must not be NULL");
    *out = NULL;
    int rc = resil_http_opts_validate(o, err);
    if (rc != 0)
        return rc;
    resil_http_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "http: out of memory");
    c->opts = *o;
    c->id = atomic_fetch_add(&next_client_id, 1);
    pool_init(&c->pool, POOL_KEEP, BUF_KEEP);
    rc = make_shared_objects(c, err);
    if (rc == 0 && read_route_keys(c) != 0)
        rc = resil_err_set(err, RESIL_ENOMEM, "http: out of memory");
    if (rc == 0)
        rc = build(c, false, &c->plain, err);
    if (rc == 0 && o->hedge_delay >= 0)
        rc = build(c, true, &c->hedged, err);
    if (rc != 0) {
        resil_http_client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void resil_http_client_free(resil_http_client *c)
{
    if (c == NULL)
        return;
    if (memo.client == c->id)
        memo_forget(&memo);
    resil_pipeline_free(c->hedged);
    resil_pipeline_free(c->plain);
    if (c->own_registry)
        resil_registry_free(c->registry);
    resil_bulkhead_free(c->bulkhead);
    pool_drain(&c->pool);
    free(c->route_keys);
    free(c);
}

resil_breaker_state resil_http_client_breaker_state(resil_http_client *c,
                                                    const char *authority)
{
    resil_breaker *b = NULL;
    if (c == NULL || c->registry == NULL || authority == NULL ||
        resil_registry_try_get(c->registry, authority, &b) != 0)
        return RESIL_BREAKER_NONE;
    resil_breaker_state s = resil_breaker_state_of(b);
    resil_breaker_free(b);
    return s;
}

/* ---- one call ---------------------------------------------------------------- */

void resil_http_request_default(resil_http_request *r)
{
    memset(r, 0, sizeof *r);
}

static bool key_printable(const char *k)
{
    size_t n = 0;
    for (; k[n] != '\0'; n++) {
        if (k[n] < 0x21 || k[n] > 0x7e)
            return false;
    }
    return n > 0 && n <= RESIL_HTTP_KEY_MAX;
}

static bool headers_have_key(const struct curl_slist *h)
{
    for (; h != NULL; h = h->next) {
        if (h->data != NULL && header_is(h->data, strlen(h->data), KEY_HEADER))
            return true;
    }
    return false;
}

/* The request's key mode and given key, whether or not the caller's own
 * header carries a key: a bad value is the caller's mistake either way. */
static bool key_request_ok(const resil_http_request *r)
{
    if (r->key_mode == RESIL_HTTP_KEY_GIVEN)
        return r->key != NULL && key_printable(r->key);
    return r->key_mode == RESIL_HTTP_KEY_NONE || r->key_mode == RESIL_HTTP_KEY_AUTO;
}

/* The key this call sends: the caller's header, a given key or a new one.
 * A key of ours goes in front of the caller's list, in a node on the
 * call's stack, so adding it allocates nothing. */
static int prepare_key(http_call *call, const resil_http_request *r)
{
    if (!key_request_ok(r))
        return RESIL_EINVAL;
    call->has_key = headers_have_key(r->headers);
    if (call->has_key || r->key_mode == RESIL_HTTP_KEY_NONE)
        return 0;
    if (r->key_mode == RESIL_HTTP_KEY_GIVEN)
        memcpy(call->key, r->key, strlen(r->key) + 1);
    else if (resil_http_uuid4(call->key) != 0)
        return RESIL_ESYS;
    snprintf(call->key_header, sizeof call->key_header, KEY_HEADER ": %s", call->key);
    call->key_node.data = call->key_header;
    call->has_key = call->headers_set = true;
    return 0;
}

static bool hedgeable(const http_call *call)
{
    unsigned safe = RESIL_HTTP_GET | RESIL_HTTP_HEAD | RESIL_HTTP_OPTIONS | RESIL_HTTP_TRACE;
    return call->client->hedged != NULL && (resil_http_method_bit(call->method) & safe) != 0;
}

static void release_attempts(http_call *call)
{
    for (uint32_t i = 0; i < call->natt; i++) {
        http_attempt *a = call->att[i];
        if (i > 0 && a->easy != NULL)
            curl_easy_cleanup(a->easy);
        pool_give(call->pool, a);
    }
    call->natt = 0;
}

/* An attempt state per handle: the caller's, and a duplicate per hedge
 * (made after our callbacks are on the original, then pointed at its own
 * state). */
static int take_attempts(http_call *call, CURL *easy)
{
    uint32_t n = call->hedged ? 1 + call->client->opts.max_hedged : 1;
    for (uint32_t i = 0; i < n; i++) {
        http_attempt *a = pool_take(call->pool);
        if (a == NULL)
            return RESIL_ENOMEM;
        call->att[call->natt++] = a;
        a->call = call;
        a->attempt = 0;
        a->timed = false;
        a->body_max = call->hedged ? SIZE_MAX : call->client->opts.body_buffer_max;
        a->easy = i == 0 ? easy : curl_easy_duphandle(easy);
        if (a->easy == NULL)
            return RESIL_ENOMEM;
        if (i < call->nplan && resil__http_route_to(a->easy, call->url, call->plan[i]) != 0)
            return RESIL_EINVAL;
        install(a);
    }
    return 0;
}

/* Each endpoint's authority names its breaker, as Microsoft keeps one
 * per endpoint: a broken region does not trip the breaker of the rest.
 * The client read them when it was made. */
static const char *route_key_of(const resil_http_client *c, const char *endpoint)
{
    for (size_t i = 0; i < c->nroute_keys; i++)
        if (c->route_keys[i].url == endpoint)
            return c->route_keys[i].key[0] != '\0' ? c->route_keys[i].key : NULL;
    return NULL;
}

static int plan_keys(http_call *call)
{
    for (size_t k = 0; k < call->nplan; k++)
        if ((call->plan_keys[k] = route_key_of(call->client, call->plan[k])) == NULL)
            return RESIL_EINVAL;
    return 0;
}

/* The request's URL, kept for unroute(): in the call when it fits. */
static int keep_url(http_call *call, const char *url)
{
    size_t n = strlen(url) + 1;
    call->url = n <= sizeof call->url_copy ? call->url_copy : malloc(n);
    if (call->url == NULL)
        return RESIL_ENOMEM;
    memcpy(call->url, url, n);
    return 0;
}

static void drop_url(http_call *call)
{
    if (call->url != NULL && call->url != call->url_copy)
        free(call->url);
    call->url = NULL;
}

/* Where this call's attempts go, the primary's included, drawn once
 * before any of them starts. The request's URL is copied: routing the
 * primary rewrites the caller's handle, which gets it back afterwards. */
static int plan_route(http_call *call, CURL *easy, const resil_http_request *r)
{
    char *url = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || url == NULL)
        return RESIL_EINVAL;
    if (keep_url(call, url) != 0)
        return RESIL_ENOMEM;
    int rc = resil_route_plan(call->client->opts.hedge_route, r->rng, call->plan,
                              1 + call->client->opts.max_hedged, &call->nplan);
    if (rc == 0 && call->client->registry != NULL)
        rc = plan_keys(call);
    return rc;
}

/* The caller's handle points at the request's URL again. */
static void unroute(CURL *easy, http_call *call)
{
    if (call->url == NULL)
        return;
    curl_easy_setopt(easy, CURLOPT_URL, call->url);
    drop_url(call);
}

static int prepare(http_call *call, resil_http_client *c, http_pool *pool, CURL *easy,
                   const resil_http_request *r)
{
    bool on_loop = pool != NULL;
    memset(call, 0, offsetof(http_call, att));
    call->client = c;
    call->on_loop = on_loop;
    call->pool = on_loop ? pool : &c->pool;
    call->req = r;
    call->method = r->method;
    call->wants_headers = caller_wants_headers(r);
    call->key[0] = '\0';
    call->headers = r->headers;
    int rc = resil__http_tel_trace(&call->tel, r, &call->headers);
    if (rc == 0)
        rc = prepare_key(call, r);
    if (rc != 0)
        return rc;
    if (call->headers_set) {
        call->key_node.next = call->headers;
        call->headers = &call->key_node;
    }
    /* The authority names the breaker and the telemetry's server: read once. */
    bool listened = c->opts.listener != NULL;
    char *url = NULL;
    bool memoed = false;
    if ((c->registry != NULL || listened) &&
        curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url != NULL)
        call->authority = authority_of(url, call->authority_buf, &memoed);
    bool known = call->authority != NULL;
    if (known && memoed && c->registry != NULL)
        call->breaker = memo_breaker(c, call->authority);
    if (listened) {
        resil__http_tel_attrs(&call->tel, known ? call->authority : NULL, call->method);
        call->tel.attrs.user = r->user;
    }
    if (c->registry != NULL && !known)
        return RESIL_EINVAL;
    call->hedged = hedgeable(call);
    if (call->hedged && c->opts.hedge_route != NULL && (rc = plan_route(call, easy, r)) != 0) {
        drop_url(call);
        return rc == RESIL_ENOMEM ? rc : RESIL_EINVAL;
    }
    /* Deadlines are libcurl's own timeout; only a token someone else may
     * fire (the caller's, a lost hedge's) needs a transfer to look. On a
     * loop a lost hedge is taken off curl multi by its cancel callback. */
    call->watch = r->cancel != NULL || r->xferinfo_fn != NULL || (call->hedged && !on_loop);
    return 0;
}

/* The final attempt's answer, if a transfer gave it. */
static const http_attempt *final_attempt(const http_call *call,
                                         const resil_pipeline_result *pr)
{
    if (pr->attempts == 0 || pr->cause.kind == RESIL_REJECTED)
        return NULL;
    const http_attempt *a = call->att[pr->hedge_winner < call->natt ? pr->hedge_winner : 0];
    return a->attempt == pr->attempts ? a : NULL;
}

static void fill_result(http_call *call, const resil_pipeline_result *pr,
                        resil_http_result *out)
{
    out->outcome = pr->outcome;
    out->stop = pr->stop;
    out->attempts = pr->attempts;
    out->records_len = pr->records_len;
    out->hedges = pr->hedges;
    out->hedge_winner = pr->hedge_winner;
    out->elapsed = pr->elapsed;
    out->curl_code = CURLE_OK;
    out->status = 0;
    out->committed = false;
    memset(out->reserved_, 0, sizeof out->reserved_);
    if (call->key[0] == '\0')
        out->key[0] = '\0';
    else
        memcpy(out->key, call->key, strlen(call->key) + 1);
    const http_attempt *a = final_attempt(call, pr);
    if (a == NULL)
        return;
    out->curl_code = a->code;
    out->status = a->status;
    out->committed = a->streaming;
    if (a->streaming)
        return;
    const resil_http_request *r = call->req;
    if (deliver_headers(call, &a->head) != 0 || deliver_body(r, a->body.p, a->body.len) != 0) {
        out->curl_code = CURLE_WRITE_ERROR;
        out->outcome = resil_fail(RESIL_PERMANENT, CURLE_WRITE_ERROR,
                                  "the write callback refused the body");
    }
}

/* The execution's call and pipeline for this request. */
static const resil_pipeline *call_setup(http_call *call, resil_call *pc)
{
    const resil_http_request *r = call->req;
    resil_call_default(pc);
    pc->user = call;
    pc->cancel = r->cancel;
    pc->key = call->client->registry != NULL ? call->authority : NULL;
    pc->breaker = call->breaker;
    if (pc->key != NULL && call->nplan > 0) {
        pc->hedge_keys = call->plan_keys;
        pc->hedge_keys_len = call->nplan;
    }
    pc->rng = r->rng;
    pc->records = r->records;
    pc->records_cap = r->records_cap;
    resil_call_telemetry *tel = &call->tel.call;
    tel->trace = call->tel.traced ? &call->tel.parent : NULL;
    tel->http = call->client->opts.listener != NULL ? &call->tel.attrs : NULL;
    if (tel->trace != NULL || tel->http != NULL)
        pc->telemetry = tel;
    return call->hedged ? call->client->hedged : call->client->plain;
}

size_t resil__http_call_size(void) { return sizeof(http_call); }

int resil__http_call_open(http_call *call, resil_http_client *c, http_pool *pool, CURL *easy,
                          const resil_http_request *r, resil_call *pc,
                          const resil_pipeline **p)
{
    int rc = prepare(call, c, pool, easy, r);
    if (rc != 0) {
        resil__http_tel_done(&call->tel);
        return rc;
    }
    rc = take_attempts(call, easy);
    if (rc != 0) {
        resil__http_call_close(call, NULL, NULL);
        return rc;
    }
    *p = call_setup(call, pc);
    return 0;
}

void resil__http_call_close(http_call *call, const resil_pipeline_result *pr,
                            resil_http_result *out)
{
    if (pr != NULL)
        fill_result(call, pr, out);
    if (call->natt > 0) { /* att[0] holds the caller's handle */
        restore(call->att[0]->easy, call);
        unroute(call->att[0]->easy, call);
    }
    drop_url(call); /* NULL once unrouted */
    release_attempts(call);
    resil__http_tel_done(&call->tel);
}

int resil_http_perform(resil_http_client *c, CURL *easy, const resil_http_request *req,
                       resil_http_result *out)
{
    if (c == NULL || easy == NULL || out == NULL)
        return RESIL_EINVAL;
    resil_http_request defaults;
    if (req == NULL) {
        resil_http_request_default(&defaults);
        req = &defaults;
    }
    http_call call;
    resil_call pc;
    const resil_pipeline *p;
    int rc = resil__http_call_open(&call, c, NULL, easy, req, &pc, &p);
    if (rc != 0) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    resil_pipeline_result pr;
    rc = resil_pipeline_execute(p, http_op, &pc, &pr);
    if (rc != 0) /* the call did not run: nothing of it to report */
        memset(out, 0, sizeof *out);
    resil__http_call_close(&call, rc == 0 ? &pr : NULL, out);
    return rc;
}
