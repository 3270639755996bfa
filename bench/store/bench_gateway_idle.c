/*
 * bench_gateway_idle.c — what idle connections cost the clients that are
 * not idle: `resil gateway` with 0, 5,000 and 10,000 open sockets that
 * never send a byte, and one legitimate client timing GET requests passed
 * through to the upstream, p50 and p99.
 *
 * The idle sockets come from 40 loopback addresses (127.0.1.1..40, 250
 * each: under the default per-client limit, and no address runs short of
 * ephemeral ports); the timed client comes from 127.0.0.1. The gateway's
 * header timeout is set to an hour so the idle sockets stay for the whole
 * run. Loopback only; the figures are relative to the 0-idle line.
 *
 * Beside each line, the gateway's resident memory (VmRSS) and what it grew
 * by per idle socket since the 0-idle line: what one idle connection
 * costs. RESIL_GATEWAY_BASELINE=path measures another resil binary (one
 * built from an earlier commit) the same way.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "gateway_proc.h"
#include "upstream.h"

#define REQUESTS 4000
#define SOURCES 40
#define MAX_IDLE 10000

static void die(const char *what)
{
    fprintf(stderr, "bench_gateway_idle: %s\n", what);
    exit(1);
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("getrlimit");
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < MAX_IDLE + 256)
        die("the file descriptor limit is too low for 10,000 sockets");
}

/* The process's resident memory in KiB, 0 when unknown. */
static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

static size_t discard(char *d, size_t s, size_t n, void *u)
{
    (void)d;
    (void)u;
    return s * n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* REQUESTS timed GETs on one kept-alive connection; p50 and p99 in ns. */
static void timed_gets(const char *url, double *p50, double *p99)
{
    static uint64_t lat[REQUESTS];
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    for (int i = 0; i < REQUESTS + 100; i++) { /* the first 100 warm up */
        uint64_t t0 = bench_now_ns();
        CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK || status != 200)
            die("a legitimate request failed");
        if (i >= 100)
            lat[i - 100] = bench_now_ns() - t0;
    }
    curl_easy_cleanup(h);
    qsort(lat, REQUESTS, sizeof lat[0], cmp_u64);
    *p50 = (double)lat[REQUESTS / 2];
    *p99 = (double)lat[REQUESTS * 99 / 100];
}

/* Open idle sockets until `want` are open. */
static void open_idle(int port, int *fds, int *open, int want)
{
    for (; *open < want; (*open)++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.1.%d", 1 + *open % SOURCES);
        fds[*open] = raw_connect(port, from);
        if (fds[*open] < 0)
            die("could not open an idle socket");
    }
    struct timespec settle = {1, 0}; /* let the gateway accept them all */
    nanosleep(&settle, NULL);
}

int main(void)
{
    raise_fd_limit();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char dir[] = "/tmp/resil-bench-idle-XXXXXX";
    if (mkdtemp(dir) == NULL)
        die("mkdtemp");
    char store[600], log[600], url[128];
    snprintf(store, sizeof store, "sqlite:%s/gateway.db", dir);
    snprintf(log, sizeof log, "%s/gateway.log", dir);
    upstream *up = upstream_start();
    gateway_proc gw;
    const char *args[] = {"--upstream", up ? upstream_url(up) : "", "--store", store,
                          "--max-connections", "12000", "--header-timeout", "1h",
                          "--quiet", NULL};
    const char *binary = getenv("RESIL_GATEWAY_BASELINE");
    if (binary == NULL || *binary == '\0')
        binary = RESIL_GATEWAY_BINARY;
    if (up == NULL || gateway_start(&gw, binary, log, args) != 0)
        die("the gateway did not start");
    snprintf(url, sizeof url, "%s/orders", gw.url);
    static int fds[MAX_IDLE];
    int open = 0;
    const int levels[] = {0, 5000, 10000};
    bench_result base = {0};
    long rss0 = 0;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        open_idle(gw.port, fds, &open, levels[i]);
        double p50, p99;
        timed_gets(url, &p50, &p99);
        long rss = rss_kib(gw.pid);
        if (i == 0)
            rss0 = rss;
        char name[64], extra[200];
        snprintf(name, sizeof name, "gateway_get_%d_idle", levels[i]);
        bench_result r = {.name = name, .ns_per_op = p50, .iters = REQUESTS};
        if (i == 0) {
            static char base_name[64];
            snprintf(base_name, sizeof base_name, "%s", name);
            base = r;
            base.name = base_name;
        }
        double per_conn = levels[i] > 0 ? (double)(rss - rss0) * 1024.0 / levels[i] : 0;
        snprintf(extra, sizeof extra,
                 "idle_sockets=%d p50_us=%.1f p99_us=%.1f rss_kib=%ld bytes_per_idle=%.0f",
                 levels[i], p50 / 1e3, p99 / 1e3, rss, per_conn);
        bench_report(r, base, extra);
    }
    for (int i = 0; i < open; i++)
        close(fds[i]);
    gateway_stop(&gw);
    upstream_stop(up);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_gateway_idle: could not remove %s\n", dir);
    curl_global_cleanup();
    return 0;
}
