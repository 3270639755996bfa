/*
 * fetch.c — an ordinary libcurl program made resilient by changing its
 * perform call (docs/http.md walks through it).
 *
 *     example_http_fetch URL            GET, retried on 5xx, 429, resets...
 *     example_http_fetch URL BODY       POST with an Idempotency-Key, so it
 *                                       may be retried too
 *
 * The client is the standard profile (attempts of at most 10 s within a
 * 30 s total) with 3 attempts from 100 ms with jitter, built once and
 * shared; the easy handle is configured exactly as it would be without
 * resil. The body of the final attempt goes to standard output, the
 * attempt record to standard error.
 */
#include <stdio.h>

#include <resil/http.h>

static size_t to_stdout(char *p, size_t size, size_t n, void *ud)
{
    return fwrite(p, size, n, (FILE *)ud);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [POST-BODY]\n", argv[0]);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* Once per program: the client and its pipeline. */
    resil_http_opts opts;
    resil_http_opts_default(&opts); /* the standard profile */
    opts.retry.max_attempts = 3;
    opts.retry.backoff.base = RESIL_MS(100);
    resil_http_client *client;
    resil_err err;
    if (resil_http_client_new(&opts, &client, &err) != 0) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }

    /* The curl code you already have. */
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, to_stdout);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, stdout);
    if (argc == 3)
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, argv[2]);

    /* Instead of curl_easy_perform(easy): */
    resil_attempt_record records[8];
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = argc == 3 ? "POST" : "GET";
    req.key_mode = RESIL_HTTP_KEY_AUTO; /* a POST gets a key, so it may be retried */
    req.write_fn = to_stdout;           /* what CURLOPT_WRITE* were set to */
    req.write_data = stdout;
    req.records = records;
    req.records_cap = 8;
    resil_http_result res;
    int rc = resil_http_perform(client, easy, &req, &res);

    for (size_t i = 0; rc == 0 && i < res.records_len; i++) {
        const resil_attempt_record *r = &records[i];
        if (r->stop == RESIL_STOP_NONE)
            fprintf(stderr, "attempt %u: %s, retry in %lld ms (%s)\n", r->number,
                    r->outcome.detail, (long long)(r->wait / RESIL_MS(1)),
                    resil_wait_source_name(r->source));
        else
            fprintf(stderr, "attempt %u: %s, %s\n", r->number,
                    r->outcome.kind == RESIL_SUCCESS ? "ok" : r->outcome.detail,
                    resil_stop_name(r->stop));
    }
    if (rc == 0 && res.key[0] != '\0')
        fprintf(stderr, "Idempotency-Key: %s\n", res.key);

    curl_easy_cleanup(easy);
    resil_http_client_free(client);
    curl_global_cleanup();
    if (rc != 0)
        return 1;
    return res.outcome.kind == RESIL_SUCCESS ? 0 : 1;
}
