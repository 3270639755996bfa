/*
 * bench_http.c — what the drop-in costs on top of libcurl: keep-alive GETs
 * to a loopback server, resil_http_perform() through the standard profile
 * against a bare curl_easy_perform() loop, in the same run, on the same
 * easy handle and so over the same kept-alive connection: both loops meet
 * the same server thread, wherever the scheduler has put it.
 *
 * The allocation counter is exported, so it sees libcurl's allocations as
 * well as resil's and the in-process server's (which, with recording off,
 * allocates nothing per request): allocs_per_op is the whole request, and
 * added_allocs_per_op what the drop-in adds to bare libcurl. Besides the
 * standard line it prints requests/s for both and the overhead in percent.
 * On a shared machine a 50 ms run's wall time moves by more than the
 * overhead itself, so the two loops are also timed in small alternating
 * blocks, and the overhead is the median of the per-pair ratios with its
 * quartiles (block_overhead_pct, block_overhead_q1_pct, _q3_pct):
 * alternation gives both sides the same weather, pair by pair.
 *
 * The drop-in runs once more with a client that has no timeouts
 * (http_resil_perform_get_untimed): its attempts have no deadline, so it
 * leaves the handle's CURLOPT_TIMEOUT_MS alone and libcurl keeps no timer.
 *
 * `bench_http N [bare|resil|both] [untimed]` instead runs N requests per
 * side (or of one side) after N of warm-up, for callgrind (`untimed`: the
 * client without timeouts): each side is a function of its own kept out of line, so its
 * inclusive cost over N is that side's instructions per request, and the
 * drop-in's own work is its side's less the curl_easy_perform() it calls.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "http_server.h"
#include "resil/http.h"

typedef struct bench_ctx {
    CURL *easy;
    resil_http_client *client;
    resil_http_client *untimed; /* no total or attempt timeout */
    resil_http_request req;
    uint64_t bytes;
} bench_ctx;

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    ((bench_ctx *)ud)->bytes += size * n;
    return size * n;
}

__attribute__((noinline)) static void bare_loop(void *ud, uint64_t iters)
{
    bench_ctx *b = ud;
    for (uint64_t i = 0; i < iters; i++) {
        if (curl_easy_perform(b->easy) != CURLE_OK)
            fprintf(stderr, "bench_http: bare perform failed\n");
    }
}

__attribute__((noinline)) static void resil_calls(void *ud, uint64_t iters)
{
    bench_ctx *b = ud;
    for (uint64_t i = 0; i < iters; i++) {
        resil_http_result res;
        if (resil_http_perform(b->client, b->easy, &b->req, &res) != 0 ||
            res.status != 200)
            fprintf(stderr, "bench_http: resil perform failed\n");
    }
}

/* The same calls through the client without timeouts. */
__attribute__((noinline)) static void resil_calls_untimed(void *ud, uint64_t iters)
{
    bench_ctx b = *(bench_ctx *)ud;
    b.client = b.untimed;
    resil_calls(&b, iters);
    ((bench_ctx *)ud)->bytes = b.bytes;
}

static CURL *handle(const char *url, bench_ctx *b)
{
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    return e;
}

#define BLOCK 200
#define BLOCKS 60

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct blocks {
    double bare, drop;   /* median ns per request of each side's blocks */
    double ratio[3];     /* drop / bare per pair: first quartile, median, third */
} blocks;

/* Alternating blocks; each pair's ratio is taken within the pair. */
static blocks paired_blocks(bench_ctx *b)
{
    double bare[BLOCKS], drop[BLOCKS], ratio[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        uint64_t t0 = bench_now_ns();
        bare_loop(b, BLOCK);
        uint64_t t1 = bench_now_ns();
        resil_calls(b, BLOCK);
        uint64_t t2 = bench_now_ns();
        bare[i] = (double)(t1 - t0) / BLOCK;
        drop[i] = (double)(t2 - t1) / BLOCK;
        ratio[i] = drop[i] / bare[i];
    }
    qsort(bare, BLOCKS, sizeof *bare, by_value);
    qsort(drop, BLOCKS, sizeof *drop, by_value);
    qsort(ratio, BLOCKS, sizeof *ratio, by_value);
    blocks r = {bare[BLOCKS / 2], drop[BLOCKS / 2],
                {ratio[BLOCKS / 4], ratio[BLOCKS / 2], ratio[3 * BLOCKS / 4]}};
    return r;
}

static void report(bench_result r, bench_result base, blocks bl)
{
    char extra[400];
    snprintf(extra, sizeof extra,
             "requests_per_s=%.0f baseline_requests_per_s=%.0f overhead_pct=%.2f "
             "baseline_allocs_per_op=%.2f added_allocs_per_op=%.2f block_ns_per_op=%.0f "
             "baseline_block_ns_per_op=%.0f block_overhead_pct=%.2f "
             "block_overhead_q1_pct=%.2f block_overhead_q3_pct=%.2f",
             1e9 / r.ns_per_op, 1e9 / base.ns_per_op,
             100.0 * (r.ns_per_op - base.ns_per_op) / base.ns_per_op, base.allocs_per_op,
             r.allocs_per_op - base.allocs_per_op, bl.drop, bl.bare,
             100.0 * (bl.ratio[1] - 1), 100.0 * (bl.ratio[0] - 1), 100.0 * (bl.ratio[2] - 1));
    bench_report(r, base, extra);
}

/* N requests per side after N of warm-up, nothing timed (for callgrind). */
static void counted(bench_ctx *b, uint64_t n, const char *side)
{
    bool bare = strcmp(side, "resil") != 0, drop = strcmp(side, "bare") != 0;
    for (uint64_t i = 0; i < 2 * n; i++) { /* alternating: the same weather */
        if (bare)
            bare_loop(b, 1);
        if (drop)
            resil_calls(b, 1);
    }
    printf("bench_http: %llu requests per side\n", (unsigned long long)n);
}

int main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    http_server *s = http_server_start();
    if (s == NULL) {
        perror("bench_http: server");
        return 1;
    }
    http_server_record(s, false);
    http_server_script(s, "/b", (const http_step[]){{.status = 200, .body = "hello\n"}}, 1);
    char url[128];
    http_server_url(s, "/b", url, sizeof url);

    bench_ctx b;
    memset(&b, 0, sizeof b);
    b.easy = handle(url, &b); /* the drop-in restores what it changes */
    resil_http_opts o;
    resil_http_opts_default(&o);
    resil_err err;
    if (resil_http_client_new(&o, &b.client, &err) != 0) {
        fprintf(stderr, "bench_http: %s\n", err.message);
        return 1;
    }
    o.total_timeout = o.attempt_timeout = 0;
    if (resil_http_client_new(&o, &b.untimed, &err) != 0) {
        fprintf(stderr, "bench_http: %s\n", err.message);
        return 1;
    }
    resil_http_request_default(&b.req);
    b.req.method = "GET";
    b.req.write_fn = discard;
    b.req.write_data = &b;

    if (argc > 1) {
        resil_http_client *timed = b.client;
        if (argc > 3 && strcmp(argv[3], "untimed") == 0)
            b.client = b.untimed;
        counted(&b, strtoull(argv[1], NULL, 10), argc > 2 ? argv[2] : "both");
        b.client = timed;
    } else {
        bench_result base = bench_run("http_bare_curl_easy_perform", bare_loop, &b);
        bench_result drop = bench_run("http_resil_perform_get", resil_calls, &b);
        report(drop, base, paired_blocks(&b));
        bench_result loose = bench_run("http_resil_perform_get_untimed", resil_calls_untimed, &b);
        bench_report(loose, base, "timeouts=none");
    }
    bench_consume(b.bytes);

    resil_http_client_free(b.client);
    resil_http_client_free(b.untimed);
    curl_easy_cleanup(b.easy);
    http_server_stop(s);
    curl_global_cleanup();
    return 0;
}
