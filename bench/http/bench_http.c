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
 * A deadline costs libcurl a timer per transfer whoever sets it, so bare
 * libcurl is also measured doing the same timeout
 * (http_bare_curl_timeout_ms): the bare loop with the CURLOPT_TIMEOUT_MS
 * the profile's attempt deadline sets, put on the handle before its
 * requests and taken off after them, as a caller who wants that bound
 * keeps it there (its requests are a function of their own, so callgrind
 * counts them without the two curl_easy_setopt calls). It is the same
 * handle and connection as the other loops': a second connection has a
 * server thread of its own, which the scheduler places apart, and its
 * wall time then differs from the first's by several times over, whatever
 * the loop. The alternating blocks run the three loops in turn, and the
 * drop-in's row gives its overhead over both: bare libcurl, and bare
 * libcurl with the same timeout (block_overhead_same_timeout_pct and its
 * quartiles); the timed loop's row, what the timeout costs bare libcurl.
 * Only the blocks' ratios are given for it: the calibrated runs' medians
 * come seconds apart, and this machine's loopback round trip moves
 * between about 14 and 90 µs with the scheduler's placement of the two
 * threads, so a ratio of two such medians can read several hundred
 * percent either way (overhead_pct, kept for the drop-in's row as it was,
 * does so at times).
 *
 * `bench_http N [bare|timed|resil|both|all] [untimed]` instead runs N
 * requests per side (or of one side) after N of warm-up, for callgrind
 * (`timed`: bare libcurl with the timeout; `both`: bare and the drop-in;
 * `all`: the three; `untimed`: the client without timeouts): each side is a
 * function of its own kept out of line, so its inclusive cost over N is
 * that side's instructions per request, and the drop-in's own work is its
 * side's less the curl_easy_perform() it calls.
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
    long timeout_ms;  /* the profile's attempt deadline */
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

__attribute__((noinline)) static void timed_performs(bench_ctx *b, uint64_t iters)
{
    for (uint64_t i = 0; i < iters; i++) {
        if (curl_easy_perform(b->easy) != CURLE_OK)
            fprintf(stderr, "bench_http: bare perform with a timeout failed\n");
    }
}

/* The bare loop with the profile's timeout on the handle meanwhile. */
__attribute__((noinline)) static void bare_timed_loop(void *ud, uint64_t iters)
{
    bench_ctx *b = ud;
    curl_easy_setopt(b->easy, CURLOPT_TIMEOUT_MS, b->timeout_ms);
    timed_performs(b, iters);
    curl_easy_setopt(b->easy, CURLOPT_TIMEOUT_MS, 0L);
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
    double bare, timed, drop; /* median ns per request of each loop's blocks */
    /* per pair, the first quartile, median and third of: */
    double drop_bare[3];      /* the drop-in over bare libcurl */
    double timed_bare[3];     /* bare libcurl with the timeout over without */
    double drop_timed[3];     /* the drop-in over bare libcurl with the timeout */
} blocks;

static double median(double *v)
{
    qsort(v, BLOCKS, sizeof *v, by_value);
    return v[BLOCKS / 2];
}

static void quartiles(double *v, double out[3])
{
    out[1] = median(v);
    out[0] = v[BLOCKS / 4];
    out[2] = v[3 * BLOCKS / 4];
}

/* Alternating blocks, the three loops in turn; each pair's ratios are
 * taken within the pair. */
static blocks paired_blocks(bench_ctx *b)
{
    double bare[BLOCKS], timed[BLOCKS], drop[BLOCKS];
    double drop_bare[BLOCKS], timed_bare[BLOCKS], drop_timed[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        uint64_t t0 = bench_now_ns();
        bare_loop(b, BLOCK);
        uint64_t t1 = bench_now_ns();
        bare_timed_loop(b, BLOCK);
        uint64_t t2 = bench_now_ns();
        resil_calls(b, BLOCK);
        uint64_t t3 = bench_now_ns();
        bare[i] = (double)(t1 - t0) / BLOCK;
        timed[i] = (double)(t2 - t1) / BLOCK;
        drop[i] = (double)(t3 - t2) / BLOCK;
        drop_bare[i] = drop[i] / bare[i];
        timed_bare[i] = timed[i] / bare[i];
        drop_timed[i] = drop[i] / timed[i];
    }
    blocks r = {.bare = median(bare), .timed = median(timed), .drop = median(drop)};
    quartiles(drop_bare, r.drop_bare);
    quartiles(timed_bare, r.timed_bare);
    quartiles(drop_timed, r.drop_timed);
    return r;
}

static double pct(double ratio) { return 100.0 * (ratio - 1); }

/* The timed loop's row: what the timeout costs bare libcurl. */
static void report_timed(bench_result r, bench_result base, long timeout_ms, blocks bl)
{
    char extra[300];
    snprintf(extra, sizeof extra,
             "timeout_ms=%ld block_ns_per_op=%.0f baseline_block_ns_per_op=%.0f "
             "block_overhead_pct=%.2f block_overhead_q1_pct=%.2f block_overhead_q3_pct=%.2f",
             timeout_ms, bl.timed, bl.bare, pct(bl.timed_bare[1]), pct(bl.timed_bare[0]),
             pct(bl.timed_bare[2]));
    bench_report(r, base, extra);
}

static void report(bench_result r, bench_result base, blocks bl)
{
    char extra[700];
    snprintf(extra, sizeof extra,
             "requests_per_s=%.0f baseline_requests_per_s=%.0f overhead_pct=%.2f "
             "baseline_allocs_per_op=%.2f added_allocs_per_op=%.2f block_ns_per_op=%.0f "
             "baseline_block_ns_per_op=%.0f block_overhead_pct=%.2f "
             "block_overhead_q1_pct=%.2f block_overhead_q3_pct=%.2f "
             "same_timeout_block_ns_per_op=%.0f block_overhead_same_timeout_pct=%.2f "
             "block_overhead_same_timeout_q1_pct=%.2f block_overhead_same_timeout_q3_pct=%.2f",
             1e9 / r.ns_per_op, 1e9 / base.ns_per_op,
             100.0 * (r.ns_per_op - base.ns_per_op) / base.ns_per_op, base.allocs_per_op,
             r.allocs_per_op - base.allocs_per_op, bl.drop, bl.bare, pct(bl.drop_bare[1]),
             pct(bl.drop_bare[0]), pct(bl.drop_bare[2]), bl.timed, pct(bl.drop_timed[1]),
             pct(bl.drop_timed[0]), pct(bl.drop_timed[2]));
    bench_report(r, base, extra);
}

/* N requests per side after N of warm-up, nothing timed (for callgrind). */
static void counted(bench_ctx *b, uint64_t n, const char *side)
{
    bool all = strcmp(side, "all") == 0, both = all || strcmp(side, "both") == 0;
    bool bare = both || strcmp(side, "bare") == 0, timed = all || strcmp(side, "timed") == 0;
    bool drop = both || strcmp(side, "resil") == 0;
    for (uint64_t i = 0; i < 2 * n; i++) { /* alternating: the same weather */
        if (bare)
            bare_loop(b, 1);
        if (timed)
            bare_timed_loop(b, 1);
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
    b.timeout_ms = (long)(o.attempt_timeout / RESIL_MS(1));
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
        bench_result timed = bench_run("http_bare_curl_timeout_ms", bare_timed_loop, &b);
        bench_result drop = bench_run("http_resil_perform_get", resil_calls, &b);
        blocks bl = paired_blocks(&b);
        report_timed(timed, base, b.timeout_ms, bl);
        report(drop, base, bl);
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
