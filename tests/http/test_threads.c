/*
 * test_threads.c — one client shared by many threads, each with its own
 * easy handle (libcurl's rule): every call must see its own attempts, its
 * own body and its own key, and the pooled attempt buffers, the shared
 * registry and the bulkhead must hold up under TSan.
 */
#include <pthread.h>

#include "http_fixture.h"

#define THREADS 8
#define CALLS 20

typedef struct worker {
    fx *f;
    int id;
    int ok;         /* calls that ended as expected */
    char keys[CALLS][RESIL_HTTP_KEY_MAX + 1];
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    CURL *easy = curl_easy_init();
    fx_text body;
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = "POST";
    req.key_mode = RESIL_HTTP_KEY_AUTO;
    req.write_fn = fx_take;
    req.write_data = &body;
    for (int i = 0; i < CALLS; i++) {
        char path[64], url[128], expected[64];
        snprintf(path, sizeof path, "/t%d/%d", w->id, i);
        snprintf(expected, sizeof expected, "answer %d %d\n", w->id, i);
        http_server_url(w->f->server, path, url, sizeof url);
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, path);
        body.len = 0;
        body.p[0] = '\0';
        resil_http_result res;
        int rc = resil_http_perform(w->f->client, easy, &req, &res);
        if (rc == 0 && res.stop == RESIL_STOP_SUCCEEDED && res.attempts == 2 &&
            strcmp(body.p, expected) == 0)
            w->ok++;
        snprintf(w->keys[i], sizeof w->keys[i], "%s", res.key);
    }
    curl_easy_cleanup(easy);
    return NULL;
}

static void threads_share_one_client(void **state)
{
    fx *f = *state;
    f->opts.breaker.failure_ratio = 1.0; /* half the attempts fail: stay closed */
    /* the threads' waits all move the one fake clock: no deadlines here */
    f->opts.total_timeout = 0;
    f->opts.attempt_timeout = 0;
    fx_client(f);
    static worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < CALLS; i++) {
            char path[64], body[64];
            snprintf(path, sizeof path, "/t%d/%d", t, i);
            snprintf(body, sizeof body, "answer %d %d\n", t, i);
            fx_script(f, path, FX_STEPS({.status = 503}, {.status = 200, .body = body}));
        }
        workers[t] = (worker){.f = f, .id = t};
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, run_worker, &workers[t]), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(workers[t].ok, CALLS);
    assert_int_equal(http_server_count(f->server, NULL), 2 * THREADS * CALLS);

    /* every request of a call carried that call's key, and no other call's */
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < CALLS; i++) {
            char path[64], key[300];
            snprintf(path, sizeof path, "/t%d/%d", t, i);
            for (size_t r = 0; r < 2; r++) {
                const http_request *req = http_server_request(f->server, path, r);
                assert_true(http_request_header(req, "Idempotency-Key", key, sizeof key));
                assert_string_equal(key, workers[t].keys[i]);
                assert_string_equal(req->body, path);
            }
            if (i > 0)
                assert_string_not_equal(workers[t].keys[i], workers[t].keys[i - 1]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(threads_share_one_client, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
