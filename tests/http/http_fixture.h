/*
 * http_fixture.h — what the HTTP adapter's library tests share: a scripted
 * server, a fake clock, a client built from options the test adjusts, and
 * an easy handle whose body and headers land in buffers the test reads.
 *
 * A header of static functions rather than a support library because only
 * this folder's tests use it. The fake clock makes every backoff and
 * Retry-After wait instant and exact (its sleep log is the proof of what
 * was waited); only libcurl's own timeouts run in real time.
 */
#ifndef RESIL_TEST_HTTP_FIXTURE_H
#define RESIL_TEST_HTTP_FIXTURE_H


#include "test.h"

#include "http_server.h"
#include "resil/http.h"

#define FX_WALL_START (INT64_C(1700000000) * INT64_C(1000000000))
#define FX_TEXT_CAP 65536

typedef struct fx_text {
    char p[FX_TEXT_CAP];
    size_t len;
    int calls;
} fx_text;

typedef struct fx {
    http_server *server;
    resil_fake_clock *clock;
    resil_http_opts opts;
    resil_http_client *client;
    CURL *easy;
    fx_text body, head;
    resil_http_request req;
    resil_http_result res;
    resil_attempt_record records[16];
} fx;

static inline size_t fx_take(char *p, size_t size, size_t n, void *ud)
{
    fx_text *t = ud;
    size_t len = size * n;
    size_t room = FX_TEXT_CAP - 1 - t->len;
    size_t k = len < room ? len : room;
    memcpy(t->p + t->len, p, k);
    t->len += k;
    t->p[t->len] = '\0';
    t->calls++;
    return len;
}

static inline int fx_setup(void **state)
{
    static bool global;
    if (!global) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        global = true;
    }
    fx *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    f->server = http_server_start();
    if (f->server == NULL || resil_fake_clock_new(0, FX_WALL_START, &f->clock) != 0)
        return -1;
    resil_http_opts_default(&f->opts);
    f->opts.clock = resil_fake_clock_clock(f->clock);
    f->easy = curl_easy_init();
    resil_http_request_default(&f->req);
    f->req.method = "GET";
    f->req.write_fn = fx_take;
    f->req.write_data = &f->body;
    f->req.records = f->records;
    f->req.records_cap = sizeof f->records / sizeof f->records[0];
    *state = f;
    return f->easy != NULL ? 0 : -1;
}

static inline int fx_teardown(void **state)
{
    fx *f = *state;
    resil_http_client_free(f->client);
    curl_easy_cleanup(f->easy);
    http_server_stop(f->server);
    resil_fake_clock_free(f->clock);
    free(f);
    return 0;
}

/* The client, built from f->opts on first use. */
static inline resil_http_client *fx_client(fx *f)
{
    if (f->client == NULL) {
        resil_err err = {0, ""};
        if (resil_http_client_new(&f->opts, &f->client, &err) != 0)
            fail_msg("client: %s", err.message);
    }
    return f->client;
}

static inline void fx_script(fx *f, const char *path, const http_step *steps, size_t n)
{
    http_server_script(f->server, path, steps, n);
}

static inline void fx_url(fx *f, const char *path)
{
    char url[256];
    http_server_url(f->server, path, url, sizeof url);
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
}

/* Perform path through the client; returns resil_http_perform's code. */
static inline int fx_perform(fx *f, const char *path)
{
    fx_url(f, path);
    f->body.len = f->head.len = 0;
    f->body.p[0] = f->head.p[0] = '\0';
    return resil_http_perform(fx_client(f), f->easy, &f->req, &f->res);
}

static inline size_t fx_count(fx *f, const char *path)
{
    return http_server_count(f->server, path);
}

static inline size_t fx_peak(fx *f, const char *path)
{
    (void)path;
    return http_server_peak(f->server);
}

typedef struct fx_watch {
    fx *f;
    size_t (*read)(fx *, const char *);
    const char *path;
    size_t n, seen;
} fx_watch;

static inline bool fx_reached(void *ud)
{
    fx_watch *w = ud;
    w->seen = w->read(w->f, w->path);
    return w->seen >= w->n;
}

/* read(f, path) once it reaches `n`, waited for (test_wait_until): a
 * guard against a hang, not a timing. */
static inline size_t fx_reaching(fx *f, size_t (*read)(fx *, const char *), const char *path,
                                 size_t n)
{
    fx_watch w = {f, read, path, n, 0};
    (void)test_wait_until(fx_reached, &w, 1);
    return w.seen;
}

/* fx_count once it reaches `n`: a request whose attempt timed out may
 * still be on its way to the server's thread for that connection when
 * the call returns, so the count is awaited instead of read at once. */
static inline size_t fx_count_reaching(fx *f, const char *path, size_t n)
{
    return fx_reaching(f, fx_count, path, n);
}

/* The most requests the server has answered at once, once it reaches `n`
 * (an answer is counted from the moment its step is taken). */
static inline size_t fx_peak_reaching(fx *f, size_t n)
{
    return fx_reaching(f, fx_peak, NULL, n);
}

/* The waits the executor slept, in order. */
static inline size_t fx_sleeps(fx *f) { return resil_fake_clock_sleep_count(f->clock); }
static inline resil_duration fx_sleep_at(fx *f, size_t i)
{
    return resil_fake_clock_sleep_at(f->clock, i);
}

#define FX_STEPS(...) ((const http_step[]){__VA_ARGS__}),                      \
                      (sizeof((const http_step[]){__VA_ARGS__}) / sizeof(http_step))

#endif
