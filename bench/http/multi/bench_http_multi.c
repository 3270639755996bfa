/*
 * bench_http_multi.c — what resil costs on curl multi: batches of 1,000
 * concurrent keep-alive GETs to the loopback server on one libuv loop,
 * through resil_http_multi (the standard profile: bulkhead, timeouts,
 * retry, a breaker per authority, one execution per call) against the
 * same 1,000 easy handles driven by a bare curl multi on the same loop
 * the way curl's own multi-uv example drives it (uv_poll per socket, one
 * uv timer). One operation is one batch; both sides reuse their handles
 * and so their kept-alive connections from batch to batch.
 *
 * The server runs a thread per connection, 2,000 of them, on a shared
 * two-core machine: the wall time moves by more than the overhead, so the
 * two sides are timed in alternating batches, and each side's median and
 * fastest batch are compared (ns_per_op is the median batch per request;
 * allocs_per_op counts everything both sides' batches allocate — resil's,
 * libcurl's and the server's — over both sides' requests).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "http_server.h"
#include "resil/http.h"
#include "resil/uv.h"

#define CALLS 1000

/* ---- bare curl multi on libuv ------------------------------------------------- */

typedef struct bare {
    uv_loop_t *uv;
    CURLM *multi;
    uv_timer_t timer;
    int left;
} bare;

typedef struct bare_sock {
    uv_poll_t poll;
    bare *b;
    curl_socket_t fd;
} bare_sock;

static void bare_finished(bare *b)
{
    CURLMsg *m;
    int n;
    while ((m = curl_multi_info_read(b->multi, &n)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        if (m->data.result != CURLE_OK)
            fprintf(stderr, "bench_http_multi: bare transfer failed: %s\n",
                    curl_easy_strerror(m->data.result));
        curl_multi_remove_handle(b->multi, m->easy_handle);
        b->left--;
    }
}

static void bare_on_poll(uv_poll_t *p, int status, int events)
{
    bare_sock *s = p->data;
    int flags = status < 0 ? CURL_CSELECT_ERR
                           : ((events & UV_READABLE) ? CURL_CSELECT_IN : 0) |
                                 ((events & UV_WRITABLE) ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(s->b->multi, s->fd, flags, &running);
    bare_finished(s->b);
}

static void bare_on_timeout(uv_timer_t *t)
{
    bare *b = t->data;
    int running;
    curl_multi_socket_action(b->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    bare_finished(b);
}

static void bare_closed(uv_handle_t *h) { free(h); }

static int bare_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)e;
    bare *b = userp;
    bare_sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            uv_poll_stop(&s->poll);
            uv_close((uv_handle_t *)&s->poll, bare_closed);
            curl_multi_assign(b->multi, fd, NULL);
        }
        return 0;
    }
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        s->b = b;
        s->fd = fd;
        uv_poll_init_socket(b->uv, &s->poll, fd);
        s->poll.data = s;
        curl_multi_assign(b->multi, fd, s);
    }
    int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, ev, bare_on_poll);
    return 0;
}

static int bare_timer(CURLM *m, long ms, void *userp)
{
    (void)m;
    bare *b = userp;
    if (ms < 0)
        uv_timer_stop(&b->timer);
    else
        uv_timer_start(&b->timer, bare_on_timeout, (uint64_t)ms, 0);
    return 0;
}

/* ---- the benchmark -------------------------------------------------------------- */

typedef struct bench_ctx {
    uv_loop_t *uv;
    bare bare;
    CURL *bare_easy[CALLS];
    resil_http_multi *multi;
    CURL *easy[CALLS];
    resil_http_request req;
    uint64_t bytes, failed;
} bench_ctx;

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    ((bench_ctx *)ud)->bytes += size * n;
    return size * n;
}

static void on_done(CURL *easy, const resil_http_result *res, void *ud)
{
    (void)easy;
    if (res->status != 200)
        ((bench_ctx *)ud)->failed++;
}

/* One batch of the sides asked for, run until every call of both is done
 * (a side not asked for has none). With both, a call of each is started in
 * turn and the loop runs once before the next pair, so that each side
 * opens its connection for the pair before the next is started: the
 * warm-up (open_connections). */
static void batch(bench_ctx *c, bool with_bare, bool with_resil)
{
    c->bare.left = with_bare ? CALLS : 0;
    for (int k = 0; k < CALLS; k++) {
        if (with_bare)
            curl_multi_add_handle(c->bare.multi, c->bare_easy[k]);
        if (with_resil)
            resil_http_start(c->multi, c->easy[k], &c->req, on_done, c, NULL);
        if (with_bare && with_resil)
            uv_run(c->uv, UV_RUN_NOWAIT);
    }
    while (c->bare.left > 0 || resil_http_multi_calls(c->multi) > 0)
        uv_run(c->uv, UV_RUN_ONCE);
}

static void fresh_connects(bench_ctx *c, long on)
{
    for (int k = 0; k < CALLS; k++) {
        curl_easy_setopt(c->bare_easy[k], CURLOPT_FRESH_CONNECT, on);
        curl_easy_setopt(c->easy[k], CURLOPT_FRESH_CONNECT, on);
    }
}

/* Every handle of each side opens a connection of its own, which the
 * batches then reuse, the two sides' alternately. libcurl 7.88 walks its
 * whole connection cache each time a handle is taken off a multi handle,
 * and how fast that walk runs depends on where the connections lie: at
 * one stride, as on a fresh heap, it runs fast; scattered among holes,
 * slower (most likely because the processor can no longer fetch them
 * ahead). Opened one side after the other, the second side's connections
 * were laid among the holes the first side's batch left, and that side
 * read slower, whichever it was: resil by 13-18 % when it went second,
 * bare libcurl by 1-4 %. Opened alternately, neither side has the fresh
 * heap to itself (docs/performance.md). */
static void open_connections(bench_ctx *c)
{
    fresh_connects(c, 1L);
    batch(c, true, true);
    fresh_connects(c, 0L);
}

/* Each side's batches are a function of their own, kept out of line, so
 * that callgrind's inclusive cost of each counts that side alone. */
__attribute__((noinline)) static void bare_batches(void *ud, uint64_t iters)
{
    for (uint64_t i = 0; i < iters; i++)
        batch(ud, true, false);
}

__attribute__((noinline)) static void resil_batches(void *ud, uint64_t iters)
{
    for (uint64_t i = 0; i < iters; i++)
        batch(ud, false, true);
}

static CURL *handle(const char *url, bench_ctx *c)
{
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    return e;
}

#define BLOCKS 41 /* alternating batches per side; fewer as argv[1] (a profiler's run) */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int blocks = argc > 1 ? atoi(argv[1]) : BLOCKS;
    if (blocks < 1 || blocks > BLOCKS)
        blocks = BLOCKS;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    http_server *s = http_server_start();
    if (s == NULL) {
        perror("bench_http_multi: server");
        return 1;
    }
    http_server_record(s, false);
    http_server_script(s, "/b", (const http_step[]){{.status = 200, .body = "ok\n"}}, 1);
    char url[128];
    http_server_url(s, "/b", url, sizeof url);

    static bench_ctx c;
    c.uv = uv_default_loop();
    c.bare.uv = c.uv;
    c.bare.multi = curl_multi_init();
    uv_timer_init(c.uv, &c.bare.timer);
    c.bare.timer.data = &c.bare;
    curl_multi_setopt(c.bare.multi, CURLMOPT_SOCKETFUNCTION, bare_socket);
    curl_multi_setopt(c.bare.multi, CURLMOPT_SOCKETDATA, &c.bare);
    curl_multi_setopt(c.bare.multi, CURLMOPT_TIMERFUNCTION, bare_timer);
    curl_multi_setopt(c.bare.multi, CURLMOPT_TIMERDATA, &c.bare);
    /* keep every connection between batches (the default cache is sized by
     * the handles added, which is none between batches) */
    curl_multi_setopt(c.bare.multi, CURLMOPT_MAXCONNECTS, (long)CALLS);

    resil_uv *u;
    resil_uv_new(c.uv, &u);
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.clock = resil_loop_clock(resil_uv_loop(u));
    if (argc > 1) /* under a profiler a batch takes seconds: the same timers, never due */
        o.attempt_timeout = o.total_timeout = RESIL_S(600);
    resil_http_client *client;
    resil_err err;
    if (resil_http_client_new(&o, &client, &err) != 0 ||
        resil_http_multi_new(client, resil_uv_loop(u), &c.multi) != 0) {
        fprintf(stderr, "bench_http_multi: %s\n", err.message);
        return 1;
    }
    curl_multi_setopt(resil_http_multi_handle(c.multi), CURLMOPT_MAXCONNECTS, (long)CALLS);
    resil_http_request_default(&c.req);
    c.req.method = "GET";
    c.req.write_fn = discard;
    c.req.write_data = &c;
    for (int k = 0; k < CALLS; k++) {
        c.bare_easy[k] = handle(url, &c);
        c.easy[k] = handle(url, &c);
    }
    open_connections(&c);

    /* A batch takes tens of milliseconds: time alternating batches rather
     * than calibrating a loop; each side keeps its fastest and its median. */
    static uint64_t t_bare[BLOCKS], t_resil[BLOCKS];
    uint64_t a0 = bench_alloc_count();
    for (int i = 0; i < blocks; i++) {
        uint64_t t0 = bench_now_ns();
        bare_batches(&c, 1);
        uint64_t t1 = bench_now_ns();
        resil_batches(&c, 1);
        uint64_t t2 = bench_now_ns();
        t_bare[i] = t1 - t0;
        t_resil[i] = t2 - t1;
    }
    uint64_t allocs = bench_alloc_count() - a0;
    qsort(t_bare, (size_t)blocks, sizeof t_bare[0], cmp_u64);
    qsort(t_resil, (size_t)blocks, sizeof t_resil[0], cmp_u64);
    double med_bare = (double)t_bare[blocks / 2], med_resil = (double)t_resil[blocks / 2];
    bench_result base = {.name = "http_multi_bare_1000_concurrent",
                         .ns_per_op = med_bare / CALLS,
                         .min_ns = (double)t_bare[0] / CALLS,
                         .max_ns = (double)t_bare[blocks - 1] / CALLS,
                         .iters = (uint64_t)blocks};
    bench_result r = {.name = "http_multi_resil_1000_concurrent",
                      .ns_per_op = med_resil / CALLS,
                      .min_ns = (double)t_resil[0] / CALLS,
                      .max_ns = (double)t_resil[blocks - 1] / CALLS,
                      .allocs_per_op = (double)allocs / (2.0 * blocks * CALLS),
                      .iters = (uint64_t)blocks};
    char extra[320];
    snprintf(extra, sizeof extra,
             "requests_per_s=%.0f baseline_requests_per_s=%.0f median_overhead_pct=%.2f "
             "best_batch_ns=%llu baseline_best_batch_ns=%llu best_overhead_pct=%.2f "
             "failed=%llu",
             CALLS * 1e9 / med_resil, CALLS * 1e9 / med_bare,
             100.0 * (med_resil - med_bare) / med_bare, (unsigned long long)t_resil[0],
             (unsigned long long)t_bare[0],
             100.0 * ((double)t_resil[0] - (double)t_bare[0]) / (double)t_bare[0],
             (unsigned long long)c.failed);
    bench_report(r, base, extra);
    bench_consume(c.bytes);

    for (int k = 0; k < CALLS; k++) {
        curl_easy_cleanup(c.bare_easy[k]);
        curl_easy_cleanup(c.easy[k]);
    }
    resil_http_multi_free(c.multi);
    resil_http_client_free(client);
    curl_multi_cleanup(c.bare.multi);
    uv_close((uv_handle_t *)&c.bare.timer, NULL);
    resil_uv_close(u);
    uv_run(c.uv, UV_RUN_DEFAULT);
    http_server_stop(s);
    curl_global_cleanup();
    return 0;
}
