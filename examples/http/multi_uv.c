/*
 * multi_uv.c — several URLs fetched at once on one thread: curl multi on a
 * libuv loop, each call with the standard HTTP pipeline (retries with
 * Retry-After, a breaker per authority, timeouts).
 *
 *   cc multi_uv.c $(pkg-config --cflags --libs resil-http resil-uv)
 *   ./a.out https://example.com/a https://example.com/b
 *
 * Each call prints one line when it ends; bodies are counted, not shown.
 * The exit status is 0 when every call succeeded.
 */
#include <stdio.h>
#include <stdlib.h>

#include "resil/http.h"
#include "resil/uv.h"

typedef struct fetch {
    const char *url;
    CURL *easy;
    size_t bytes;
} fetch;

static int failures;

static size_t count_body(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    ((fetch *)ud)->bytes += size * n;
    return size * n;
}

static void on_done(CURL *easy, const resil_http_result *res, void *ud)
{
    fetch *f = ud;
    if (res->stop == RESIL_STOP_SUCCEEDED)
        printf("%s: HTTP %ld, %zu bytes, %u attempt%s\n", f->url, res->status, f->bytes,
               res->attempts, res->attempts == 1 ? "" : "s");
    else {
        printf("%s: failed (%s), %u attempt%s\n", f->url, res->outcome.detail, res->attempts,
               res->attempts == 1 ? "" : "s");
        failures++;
    }
    curl_easy_cleanup(easy);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL...\n", argv[0]);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uv_loop_t *uv = uv_default_loop();
    resil_uv *u;
    if (resil_uv_new(uv, &u) != 0)
        return 1;
    resil_loop *loop = resil_uv_loop(u);

    resil_http_opts o;
    resil_http_opts_default(&o);
    o.clock = resil_loop_clock(loop); /* decisions and timers read one time */
    resil_http_client *client;
    resil_err err;
    if (resil_http_client_new(&o, &client, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    resil_http_multi *multi;
    if (resil_http_multi_new(client, loop, &multi) != 0)
        return 1;

    int n = argc - 1;
    fetch *fetches = calloc((size_t)n, sizeof *fetches);
    for (int i = 0; i < n; i++) {
        fetch *f = &fetches[i];
        f->url = argv[i + 1];
        f->easy = curl_easy_init();
        curl_easy_setopt(f->easy, CURLOPT_URL, f->url);
        resil_http_request req;
        resil_http_request_default(&req);
        req.method = "GET";
        req.write_fn = count_body;
        req.write_data = f;
        if (resil_http_start(multi, f->easy, &req, on_done, f, NULL) != 0)
            return 1;
    }
    while (resil_http_multi_calls(multi) > 0) /* idle connections keep the loop alive */
        uv_run(uv, UV_RUN_ONCE);

    resil_http_multi_free(multi);
    resil_http_client_free(client);
    resil_uv_close(u);
    uv_run(uv, UV_RUN_DEFAULT);
    free(fetches);
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
