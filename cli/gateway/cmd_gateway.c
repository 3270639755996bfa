/*
 * cmd_gateway.c — `resil gateway`: options, start-up and shutdown.
 *
 * The gateway gives an HTTP service that knows nothing of idempotency keys
 * the server side of them, by standing in front of it. This file is its
 * lifecycle. Every option is checked before anything starts, and a bad one
 * is named (exit 125), so a typo never becomes a gateway that silently
 * guards the wrong methods. Signals are blocked before any thread exists
 * and taken synchronously by the main thread (sigtimedwait): no signal
 * handler runs concurrently with anything, and shutdown is ordinary code —
 * stop accepting, let the requests in flight finish, stop the purge,
 * close the store. Expired records are purged by a thread of their own,
 * at start-up and every minute: under requests a purge keeps to a tenth
 * of the time, so a large one lasts minutes, which the signals must not
 * wait for.
 */
#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "gateway.h"
#include "policy_opts.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

#define PURGE_EVERY_S 60

static const char usage_text[] =
    "usage: resil gateway --listen HOST:PORT --upstream URL [OPTIONS]\n"
    "\n"
    "An HTTP reverse proxy that makes retried requests safe: a request with an\n"
    "Idempotency-Key header on a guarded method runs upstream at most once; its\n"
    "repeats get the saved response (Idempotent-Replayed: true), 409 while the\n"
    "first is still running, 422 when the key comes with a different request.\n"
    "\n"
    "  --listen HOST:PORT     where to listen (port 0: any free port)\n"
    "  --upstream URL         the service, http:// or https:// (path prefix allowed)\n"
    "  --store URL            sqlite:PATH or postgres://... (default sqlite:resil-gateway.db)\n"
    "  --methods LIST         guarded methods (default POST,PATCH)\n"
    "  --require-key          answer 400 to a guarded request without a key\n"
    "  --retention DUR        keep saved responses this long (default 24h)\n"
    "  --lease DUR            a first request owns its key this long, renewed every\n"
    "                         third of it while the upstream runs (default 60s, >= 1s)\n"
    "  --timeout DUR          upstream timeout (default 30s)\n"
    "  --config FILE --policy NAME\n"
    "                         take the upstream timeout from a named policy of a\n"
    "                         configuration file (its attempt timeout, else its total)\n"
    "  --tenant-header NAME   scope keys by this request header's value\n"
    "  --operation NAME       scope keys by this name in a shared store (default http)\n"
    "  --max-body SIZE        largest request or response body, e.g. 10MB (default 10MB)\n"
    "  --max-connections N    open client connections at most (default 10000)\n"
    "  --max-connections-per-client N\n"
    "                         open connections from one client address (default 256)\n"
    "  --loops N              event loops, each a thread serving its share of the\n"
    "                         connections and their upstream calls (default: one per\n"
    "                         CPU, at most 16; 1 to 64)\n"
    "  --workers N            threads for what blocks: the fleet's Redis permits, and\n"
    "                         the idempotency store's calls with --batch-max 1 (with\n"
    "                         batching on they are asynchronous, from the loops)\n"
    "                         (default 64)\n"
    "  --header-timeout DUR   a request's line and headers must arrive within this, from\n"
    "                         the connection's start or its previous answer (default 10s)\n"
    "  --body-timeout DUR     a request's body must arrive within this (default 60s)\n"
    "  --idle-timeout DUR     close a connection where nothing moves this long (default 60s)\n"
    "  --journal PATH|off     where answers the store cannot take wait, fsync'ed (default:\n"
    "                         the SQLite file's path + .resil-journal; none for PostgreSQL)\n"
    "  --batch-max N          key writes of concurrent requests share one transaction and\n"
    "                         one sync, up to N of them (default 64; 1: each its own)\n"
    "  --batch-window DUR     a batch waits this long for company (default 0s: none;\n"
    "                         at most 1s)\n"
    "  --replay-cache SIZE|off\n"
    "                         completed answers kept in memory, e.g. 64MB, so a replay\n"
    "                         needs no database (default 16MB)\n"
    "  --sqlite-sync full|normal\n"
    "                         normal: a power cut may forget the last moments' keys and\n"
    "                         answers, never a crash of the gateway (default full)\n"
    "  --upstream-dedupes     the upstream recognises a repeated Idempotency-Key itself:\n"
    "                         give the key back when the outcome is unknown (a timeout)\n"
    "  --quiet                no access log\n"
#ifdef RESIL_CLI_REDIS
    "  --fleet redis://HOST[:PORT][/DB]\n"
    "                         a circuit breaker for the upstream, shared through Redis by\n"
    "                         every gateway given the same URL: while it is open, 503 with\n"
    "                         Retry-After and the upstream is not called (a guarded\n"
    "                         request's key is released). Redis not answering: each\n"
    "                         gateway's breaker counts alone until it does\n"
    "  --fleet-rate RATE/PER[:BURST]\n"
    "                         with --fleet: at most RATE upstream calls per PER (s, m, h\n"
    "                         or a duration) across every gateway, bursts of BURST\n"
    "                         (default RATE); beyond it, 503 fleet_rate_limited with\n"
    "                         Retry-After and the upstream is not called\n"
    "  --fleet-concurrency N[:LEASE]\n"
    "                         with --fleet: at most N upstream calls at once across every\n"
    "                         gateway (beyond it, 503 fleet_concurrency_full); a dead\n"
    "                         gateway's permits return after LEASE (default 5s)\n"
    "  --fleet-timeout DUR    with --fleet: how long one Redis call may take before this\n"
    "                         gateway decides alone (1ms to 10s, default 50ms)\n"
#endif
    "  --breaker-failures N   a circuit breaker for the upstream, this gateway's own (or\n"
    "                         with --fleet the shared one): it opens after N failures in\n"
    "                         a row (no answer or a 5xx), or a failure ratio of 0.1 over\n"
    "                         30s with at least 100 calls; while open, 503 with\n"
    "                         Retry-After and the upstream is not called\n"
    "  --breaker-break DUR    how long the breaker stays open (default 5s); alone, it\n"
    "                         gives the upstream a breaker of the ratio rule\n"
    "\n"
    "chaos (the upstream made to misbehave for the clients under test; each acts before\n"
    "the store or the upstream is asked, so no key is claimed; SIGUSR2 switches it all\n"
    "off and on again):\n"
    "  --chaos-status RATE:CODE[:RETRY_AFTER]\n"
    "                         a share RATE in [0,1] of requests get CODE (400..599) from\n"
    "                         the gateway, with Retry-After: RETRY_AFTER (seconds) when\n"
    "                         given; the upstream never sees them\n"
    "  --chaos-latency RATE:DURATION\n"
    "                         a share RATE of requests wait DURATION before going on\n"
    "  --chaos-drop RATE      a share RATE of requests have their connection closed\n"
    "                         without an answer\n"
    "  --chaos-seed N         the draws' seed, to replay a run (default: from the OS,\n"
    "                         and said at start)\n"
    "\n"
    "GET /healthz answers 200 \"ok\"; GET /metrics the gateway's metrics in Prometheus's\n"
    "text format (docs/telemetry.md). SIGTERM or SIGINT: finish what is in flight, exit 0.\n";

/* ---- option parsers: 0, or RESIL_EINVAL (reported by name) ------------- */

typedef int (*option_fn)(const args *a, const char *v, gw_config *cfg);

static int parse_listen(const args *a, const char *v, gw_config *cfg)
{
    switch (gw_parse_listen(v, cfg->host, sizeof cfg->host, &cfg->port)) {
    case GW_LISTEN_OK:
        return 0;
    case GW_LISTEN_PORT:
        return args_reject(a, "--listen port", "0..65535", strrchr(v, ':') + 1);
    case GW_LISTEN_FORM:
        break;
    }
    return args_reject(a, "--listen", "HOST:PORT", v);
}

/*
 * The upstream as libcurl reads it: "scheme://host:port" (the default port
 * spelled out), the name its breaker and metrics go by, and its host and
 * port apart. False when libcurl reads no host or port from it.
 */
static bool upstream_split(const char *url, char *authority, size_t cap, char *host,
                           size_t host_cap, int *port)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *name = NULL, *number = NULL;
    bool ok = u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, &name, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_PORT, &number, CURLU_DEFAULT_PORT) == CURLUE_OK &&
              snprintf(authority, cap, "%s://%s:%s", scheme, name, number) < (int)cap;
    curl_free(scheme);
    curl_free(name);
    curl_free(number);
    curl_url_cleanup(u);
    return ok && resil_authority_split(authority, host, host_cap, port) == 0;
}

static int parse_upstream(const args *a, const char *v, gw_config *cfg)
{
    size_t scheme = strncmp(v, "http://", 7) == 0 ? 7 : strncmp(v, "https://", 8) == 0 ? 8 : 0;
    char authority[sizeof ((gateway *)0)->authority], host[sizeof ((gateway *)0)->http_host];
    int port;
    if (scheme == 0 || v[scheme] == '\0' || v[scheme] == '/' ||
        !upstream_split(v, authority, sizeof authority, host, sizeof host, &port))
        return args_reject(a, "--upstream", "an http:// or https:// URL with a host", v);
    size_t len = strlen(v);
    while (len > scheme && v[len - 1] == '/')
        len--;
    if (len >= sizeof cfg->upstream || strchr(v, '?') || strchr(v, '#'))
        return args_reject(a, "--upstream", "a base URL without query or fragment", v);
    memcpy(cfg->upstream, v, len);
    cfg->upstream[len] = '\0';
    return 0;
}

static int parse_store(const args *a, const char *v, gw_config *cfg)
{
    bool sqlite = strncmp(v, "sqlite:", 7) == 0;
    bool pg = strncmp(v, "postgres://", 11) == 0 || strncmp(v, "postgresql://", 13) == 0;
    if (sqlite && v[7] == '\0')
        return args_fail(a, "--store 'sqlite:' needs a file path, as in sqlite:gateway.db");
    if (!sqlite && !pg) {
        /* Name only the scheme: the rest may hold a password. */
        size_t scheme = strcspn(v, ":");
        return args_fail(a, "--store must be sqlite:PATH or postgres://..., got scheme '%.*s'",
                         (int)(scheme > 32 ? 32 : scheme), v);
    }
    cfg->store_url = v;
    return 0;
}

static int parse_methods(const args *a, const char *v, gw_config *cfg)
{
    if (!gw_parse_methods(v, cfg->methods, GW_MAX_METHODS, &cfg->n_methods))
        return args_reject(a, "--methods", "a comma-separated list of HTTP methods", v);
    return 0;
}

static int parse_retention(const args *a, const char *v, gw_config *cfg)
{
    return args_duration(a, "--retention", v, true, &cfg->retention);
}

static int parse_lease(const args *a, const char *v, gw_config *cfg)
{
    return args_duration(a, "--lease", v, true, &cfg->lease);
}

/* --config FILE --policy NAME: the upstream timeout from a named policy
 * (its attempt timeout, else its total); an explicit --timeout wins. */
static struct {
    const char *file, *name;
    bool timeout_given;
} named;

static int parse_timeout(const args *a, const char *v, gw_config *cfg)
{
    named.timeout_given = true;
    return args_duration(a, "--timeout", v, true, &cfg->timeout);
}

static int parse_config(const args *a, const char *v, gw_config *cfg)
{
    return args_nonempty(a, "--config", "a file name", v, &named.file);
}

static int parse_policy(const args *a, const char *v, gw_config *cfg)
{
    return args_nonempty(a, "--policy", "a policy name", v, &named.name);
}

static int apply_named_policy(const args *a, gw_config *cfg)
{
    if (named.file == NULL && named.name == NULL)
        return 0;
    if (named.file == NULL || named.name == NULL)
        return args_fail(a, "--config FILE and --policy NAME go together");
#ifdef RESIL_CLI_CONFIG
    config_policy cp;
    if (config_policy_load(a, named.file, named.name, &cp) != 0)
        return RESIL_EINVAL;
    if (cp.policy.max_attempts > 1 || cp.ignored[0] != '\0')
        fprintf(stderr, "%s: note: --policy %s: only its timeout is used: the gateway forwards "
                        "each request once and the client retries\n", a->cmd, named.name);
    resil_duration t = cp.attempt_timeout > 0 ? cp.attempt_timeout : cp.total_timeout;
    if (!named.timeout_given && t > 0)
        cfg->timeout = t;
    return 0;
#else
    return args_fail(a, "--config: this resil was built without configuration support "
                        "(libresil-config needs jansson)");
#endif
}

static int parse_max_body(const args *a, const char *v, gw_config *cfg)
{
    if (!gw_parse_size(v, &cfg->max_body))
        return args_reject(a, "--max-body", "a size from 1 to 1GB (e.g. 512KB, 10MB)", v);
    return 0;
}

/* The front door's limits. */
#define MAX_CONNECTIONS_LIMIT 1000000
#define MAX_WORKERS 1024
#define MAX_LOOPS 64
#define DEFAULT_LOOPS_MAX 16

static int parse_count(const args *a, const char *option, const char *v, uint64_t max,
                       unsigned *out)
{
    uint64_t n;
    if (args_uint64(a, option, v, 1, max, &n) != 0)
        return RESIL_EINVAL;
    *out = (unsigned)n;
    return 0;
}

static int parse_max_connections(const args *a, const char *v, gw_config *cfg)
{
    return parse_count(a, "--max-connections", v, MAX_CONNECTIONS_LIMIT, &cfg->max_connections);
}

static int parse_max_per_client(const args *a, const char *v, gw_config *cfg)
{
    return parse_count(a, "--max-connections-per-client", v, MAX_CONNECTIONS_LIMIT,
                       &cfg->max_per_client);
}

static int parse_workers(const args *a, const char *v, gw_config *cfg)
{
    return parse_count(a, "--workers", v, MAX_WORKERS, &cfg->workers);
}

static int parse_loops(const args *a, const char *v, gw_config *cfg)
{
    return parse_count(a, "--loops", v, MAX_LOOPS, &cfg->loops);
}

/* One loop per CPU, as a server with a worker per core runs. */
static unsigned default_loops(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > DEFAULT_LOOPS_MAX ? DEFAULT_LOOPS_MAX : (unsigned)n;
}

/* A client timeout: from 1ms to 1h; the idle one counts whole seconds
 * (libmicrohttpd's unit), so it starts at 1s. */
static int parse_client_timeout(const args *a, const char *option, const char *v,
                                resil_duration min, resil_duration *out)
{
    resil_duration d;
    if (args_duration(a, option, v, true, &d) != 0)
        return RESIL_EINVAL;
    if (d < min || d > RESIL_S(3600))
        return args_reject(a, option, min == RESIL_S(1) ? "a duration from 1s to 1h"
                                                        : "a duration from 1ms to 1h", v);
    *out = d;
    return 0;
}

static int parse_header_timeout(const args *a, const char *v, gw_config *cfg)
{
    return parse_client_timeout(a, "--header-timeout", v, RESIL_MS(1), &cfg->header_timeout);
}

static int parse_body_timeout(const args *a, const char *v, gw_config *cfg)
{
    return parse_client_timeout(a, "--body-timeout", v, RESIL_MS(1), &cfg->body_timeout);
}

static int parse_idle_timeout(const args *a, const char *v, gw_config *cfg)
{
    return parse_client_timeout(a, "--idle-timeout", v, RESIL_S(1), &cfg->idle_timeout);
}

static int parse_tenant_header(const args *a, const char *v, gw_config *cfg)
{
    size_t len = strlen(v);
    if (len > RESIL_STORE_FIELD_MAX || !args_token(v, len))
        return args_reject(a, "--tenant-header", "an HTTP header name", v);
    cfg->tenant_header = v;
    return 0;
}

static int parse_operation(const args *a, const char *v, gw_config *cfg)
{
    if (*v == '\0' || strlen(v) > RESIL_STORE_FIELD_MAX)
        return args_reject(a, "--operation", "1 to 255 bytes", v);
    cfg->operation = v;
    return 0;
}

/* Group commit and the SQLite sync level (the store checks the rest). */
static int parse_batch_max(const args *a, const char *v, gw_config *cfg)
{
    return parse_count(a, "--batch-max", v, 1024, &cfg->batch_max);
}

static int parse_batch_window(const args *a, const char *v, gw_config *cfg)
{
    resil_duration d;
    if (args_duration(a, "--batch-window", v, false, &d) != 0)
        return RESIL_EINVAL;
    if (d > RESIL_S(1))
        return args_reject(a, "--batch-window", "a duration from 0s to 1s", v);
    cfg->batch_window = d;
    return 0;
}

static int parse_replay_cache(const args *a, const char *v, gw_config *cfg)
{
    if (strcmp(v, "off") == 0) {
        cfg->replay_cache = 0;
        return 0;
    }
    if (!gw_parse_size(v, &cfg->replay_cache))
        return args_reject(a, "--replay-cache", "off or a size from 1 to 1GB (e.g. 64MB)", v);
    return 0;
}

static int parse_sqlite_sync(const args *a, const char *v, gw_config *cfg)
{
    if (strcmp(v, "full") != 0 && strcmp(v, "normal") != 0)
        return args_reject(a, "--sqlite-sync", "full or normal", v);
    cfg->sqlite_sync = strcmp(v, "normal") == 0 ? RESIL_STORE_SYNC_NORMAL : RESIL_STORE_SYNC_FULL;
    return 0;
}

static int parse_journal(const args *a, const char *v, gw_config *cfg)
{
    if (*v == '\0')
        return args_reject(a, "--journal", "a file path or 'off'", v);
    cfg->journal = v;
    return 0;
}

#ifdef RESIL_CLI_REDIS
static int parse_fleet(const args *a, const char *v, gw_config *cfg)
{
    return fleet_url_parse(a, v, &cfg->fleet);
}

static int parse_fleet_rate(const args *a, const char *v, gw_config *cfg)
{
    return fleet_rate_parse(a, v, &cfg->limits);
}

static int parse_fleet_concurrency(const args *a, const char *v, gw_config *cfg)
{
    return fleet_concurrency_parse(a, v, &cfg->limits);
}

static int parse_fleet_timeout(const args *a, const char *v, gw_config *cfg)
{
    return fleet_timeout_parse(a, v, &cfg->fleet_timeout);
}
#endif

static int parse_breaker_failures(const args *a, const char *v, gw_config *cfg)
{
    uint64_t n;
    if (args_uint64(a, "--breaker-failures", v, 1, UINT32_MAX, &n) != 0)
        return RESIL_EINVAL;
    cfg->breaker_failures = (uint32_t)n;
    return 0;
}

static int parse_breaker_break(const args *a, const char *v, gw_config *cfg)
{
    return args_duration(a, "--breaker-break", v, true, &cfg->breaker_break);
}

static const struct {
    const char *name;
    option_fn parse;
} options[] = {
    {"--listen", parse_listen},       {"--upstream", parse_upstream},
    {"--store", parse_store},         {"--methods", parse_methods},
    {"--retention", parse_retention}, {"--lease", parse_lease},
    {"--timeout", parse_timeout},     {"--tenant-header", parse_tenant_header},
    {"--operation", parse_operation}, {"--max-body", parse_max_body},
    {"--config", parse_config},       {"--policy", parse_policy},
    {"--max-connections", parse_max_connections},
    {"--max-connections-per-client", parse_max_per_client},
    {"--workers", parse_workers},     {"--loops", parse_loops},
    {"--header-timeout", parse_header_timeout},
    {"--body-timeout", parse_body_timeout}, {"--idle-timeout", parse_idle_timeout},
    {"--journal", parse_journal},
    {"--breaker-failures", parse_breaker_failures}, {"--breaker-break", parse_breaker_break},
    {"--batch-max", parse_batch_max}, {"--batch-window", parse_batch_window},
    {"--sqlite-sync", parse_sqlite_sync}, {"--replay-cache", parse_replay_cache},
#ifdef RESIL_CLI_REDIS
    {"--fleet", parse_fleet},         {"--fleet-rate", parse_fleet_rate},
    {"--fleet-concurrency", parse_fleet_concurrency},
    {"--fleet-timeout", parse_fleet_timeout},
#endif
};

static void config_default(gw_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->port = -1;
    cfg->store_url = "sqlite:resil-gateway.db";
    strcpy(cfg->methods[0], "POST");
    strcpy(cfg->methods[1], "PATCH");
    cfg->n_methods = 2;
    cfg->retention = RESIL_S(24 * 3600);
    cfg->lease = RESIL_S(60);
    cfg->timeout = RESIL_S(30);
    cfg->operation = "http";
    cfg->max_body = 10u * 1024 * 1024;
    cfg->max_connections = 10000;
    cfg->max_per_client = 256;
    cfg->workers = 64;
    cfg->loops = default_loops();
    cfg->header_timeout = RESIL_S(10);
    cfg->body_timeout = RESIL_S(60);
    cfg->idle_timeout = RESIL_S(60);
    cfg->batch_max = 64;
    cfg->replay_cache = (size_t)16 << 20; /* the store's default */
    gw_chaos_config_default(&cfg->chaos);
}

/* Relations between options, once each is valid on its own. */
static int check_config(const args *a, const gw_config *cfg)
{
    char lease[32], other[32];
    if (cfg->port < 0)
        return args_fail(a, "--listen HOST:PORT is required");
    if (cfg->upstream[0] == '\0')
        return args_fail(a, "--upstream URL is required");
    if (fleet_limits_need_fleet(a, cfg->fleet, &cfg->limits) != 0)
        return RESIL_EINVAL;
    if (fleet_timeout_needs_fleet(a, cfg->fleet, cfg->fleet_timeout) != 0)
        return RESIL_EINVAL;
    if (cfg->batch_window > 0 && cfg->batch_max < 2)
        return args_fail(a, "--batch-window needs --batch-max 2 or more: without batching "
                            "it only adds latency");
    if (cfg->sqlite_sync != RESIL_STORE_SYNC_FULL && strncmp(cfg->store_url, "sqlite:", 7) != 0)
        return args_fail(a, "--sqlite-sync applies to a sqlite: store only");
    if (gw_chaos_check(&cfg->chaos, a) != 0)
        return RESIL_EINVAL;
    if (cfg->max_per_client > cfg->max_connections)
        return args_fail(a, "--max-connections-per-client (%u) must not exceed "
                            "--max-connections (%u)",
                         cfg->max_per_client, cfg->max_connections);
    resil_duration_format(cfg->lease, lease, sizeof lease);
    resil_duration_format(cfg->retention, other, sizeof other);
    if (cfg->lease > cfg->retention)
        return args_fail(a, "--lease (%s) must not exceed --retention (%s)", lease, other);
    if (cfg->lease < RESIL_S(1))
        return args_fail(a, "--lease (%s) must be at least 1s: it is renewed every third of "
                            "it while the upstream runs",
                         lease);
    /* The lease is renewed while the upstream runs, so --timeout may exceed
     * it; but a purge deletes a record by its age, running or not. */
    char timeout[32];
    resil_duration_format(cfg->timeout, timeout, sizeof timeout);
    if (cfg->timeout >= cfg->retention)
        return args_fail(a, "--timeout (%s) must be shorter than --retention (%s): a record "
                            "is purged by its age, even while its request runs",
                         timeout, other);
    return 0;
}

/* One argument: 1 when it was an option, 0 when unknown, or RESIL_EINVAL. */
static int parse_one(args *a, gw_config *cfg)
{
    if (args_flag(a, "--require-key", NULL)) {
        cfg->require_key = true;
        return 1;
    }
    if (args_flag(a, "--quiet", NULL)) {
        cfg->quiet = true;
        return 1;
    }
    if (args_flag(a, "--upstream-dedupes", NULL)) {
        cfg->upstream_dedupes = true;
        return 1;
    }
    int chaos = gw_chaos_parse(&cfg->chaos, a);
    if (chaos != 0)
        return chaos;
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const char *v;
        int m = args_match(a, options[i].name, NULL, &v);
        if (m != 0)
            return m < 0 ? m : options[i].parse(a, v, cfg) == 0 ? 1 : RESIL_EINVAL;
    }
    return 0;
}

#define PARSED_HELP 1

/* 0 to go on, PARSED_HELP after --help, or RESIL_EINVAL. */
static int parse_args(int argc, char **argv, gw_config *cfg)
{
    args a;
    args_init(&a, "resil gateway", argc, argv);
    config_default(cfg);
    for (; a.i < argc; a.i++) {
        if (args_flag(&a, "--help", "-h")) {
            fputs(usage_text, stdout);
            return PARSED_HELP;
        }
        int rc = parse_one(&a, cfg);
        if (rc == 0)
            rc = args_fail(&a, "unknown option '%s' (see resil gateway --help)", argv[a.i]);
        if (rc < 0)
            return rc;
    }
    if (apply_named_policy(&a, cfg) != 0)
        return RESIL_EINVAL;
    return check_config(&a, cfg);
}

/* ---- start-up --------------------------------------------------------- */

/* A listening socket on addr; with `shared`, others may listen on the same
 * address (SO_REUSEPORT: the kernel spreads the connections among them).
 * -1 with errno. */
static int listen_on(const struct sockaddr *addr, socklen_t len, bool shared)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (shared && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        bind(fd, addr, len) != 0 || listen(fd, 512) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* One listening socket per loop after the first, on the address the first
 * was bound to (its port, when --listen said 0). 0, or -1 with every
 * socket opened here closed (fds[0] stays the caller's). */
static int open_more_listeners(const gw_config *cfg, int *fds)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (cfg->loops > 1 && getsockname(fds[0], (struct sockaddr *)&ss, &len) != 0)
        return -1;
    for (unsigned i = 1; i < cfg->loops; i++) {
        if ((fds[i] = listen_on((struct sockaddr *)&ss, len, true)) >= 0)
            continue;
        fprintf(stderr, "resil gateway: cannot listen on %s:%d for loop %u of --loops %u: %s\n",
                cfg->host, cfg->port, i + 1, cfg->loops, strerror(errno));
        while (--i > 0)
            close(fds[i]);
        return -1;
    }
    return 0;
}

/* Bind and listen; the address actually bound goes to `shown`. */
static int open_listener(const gw_config *cfg, bool *ipv6, char *shown, size_t cap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    char port[8];
    snprintf(port, sizeof port, "%d", cfg->port);
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "resil gateway: cannot resolve --listen host '%s': %s\n", cfg->host,
                gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = listen_on(ai->ai_addr, ai->ai_addrlen, cfg->loops > 1);
        if (fd < 0)
            saved = errno;
        else
            *ipv6 = ai->ai_family == AF_INET6;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "resil gateway: cannot listen on %s:%d: %s\n", cfg->host, cfg->port,
                strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    int bound = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
            bound = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
            bound = ntohs(a->sin_port);
        }
    }
    snprintf(shown, cap, *ipv6 ? "[%s]:%d" : "%s:%d", ip, bound);
    return fd;
}

static int open_store(gateway *gw)
{
    resil_store_opts o;
    resil_store_opts_default(&o);
    o.url = gw->cfg.store_url;
    o.lease = gw->cfg.lease;
    o.retention = gw->cfg.retention;
    o.connections = 8;
    o.batch_max = gw->cfg.batch_max;
    o.batch_window = gw->cfg.batch_window;
    o.sqlite_sync = gw->cfg.sqlite_sync;
    o.cache_bytes = gw->cfg.replay_cache;
    char journal[4096];
    o.journal = gw_journal_path(&gw->cfg, journal, sizeof journal);
    resil_err err = {0};
    int rc = resil_store_new(&o, &gw->store, &err);
    if (rc == 0) {
        if (gw->cfg.quiet)
            return 0;
        if (o.journal != NULL)
            fprintf(stderr, "resil gateway: journal %s\n", o.journal);
        else
            fprintf(stderr, "resil gateway: journal off: an answer the database cannot take "
                            "is answered 503 and kept in memory until it can (--journal PATH "
                            "makes it durable)\n");
        return 0;
    }
    fprintf(stderr, "resil gateway: --store: %s\n", err.message);
    return rc == RESIL_EINVAL ? RESIL_EXIT_USAGE : 1;
}

typedef struct purger {
    gateway *gw;
    resil_cancel stop; /* fired when the gateway stops */
    pthread_t thread;
} purger;

static void purge(gateway *gw, resil_cancel *stop)
{
    uint64_t deleted = 0;
    resil_err err = {0};
    int rc = resil_store_purge_cancellable(gw->store, stop, &deleted, &err);
    if (rc != 0 && rc != RESIL_ECANCELED)
        fprintf(stderr, "resil gateway: purge failed: %s\n", err.message);
    else if (deleted > 0 && !gw->cfg.quiet)
        fprintf(stderr, "resil gateway: purged %llu expired record%s\n",
                (unsigned long long)deleted, deleted == 1 ? "" : "s");
}

static void *purger_main(void *arg)
{
    purger *p = arg;
    while (!resil_cancelled(&p->stop)) {
        purge(p->gw, &p->stop);
        resil_clock_sleep(p->gw->clock, RESIL_S(PURGE_EVERY_S), &p->stop);
    }
    return NULL;
}

static int purger_start(gateway *gw, purger *p)
{
    p->gw = gw;
    if (resil_cancel_init(&p->stop, NULL) != 0)
        return -1;
    if (pthread_create(&p->thread, NULL, purger_main, p) == 0)
        return 0;
    resil_cancel_destroy(&p->stop);
    return -1;
}

/* The purge under way stops before its next chunk. */
static void purger_stop(purger *p)
{
    resil_cancel_fire(&p->stop);
    pthread_join(p->thread, NULL);
    resil_cancel_destroy(&p->stop);
}

/* SIGUSR2: the kill switch of a chaos experiment, said in the log
 * whatever --quiet says. */
static void switch_chaos(gateway *gw)
{
    bool on = gw_chaos_toggle(gw->chaos);
    fprintf(stderr, "resil gateway: SIGUSR2: chaos %s (%llu injected so far)\n",
            on ? "on again" : "off", (unsigned long long)gw_chaos_injected(gw->chaos));
}

/* Wait for SIGTERM/SIGINT, replaying the store's journal as often as
 * gw_rules_tick() asks; SIGUSR2 (only in the set with --chaos-*) flips
 * the chaos. */
static int wait_for_signal(gateway *gw, const sigset_t *set)
{
    for (;;) {
        resil_duration wait = gw_rules_tick(gw);
        struct timespec every = {(time_t)(wait / RESIL_S(1)), (long)(wait % RESIL_S(1))};
        int sig = sigtimedwait(set, NULL, &every);
        if (sig == SIGUSR2)
            switch_chaos(gw);
        else if (sig > 0)
            return sig;
    }
}

/* Every client connection is a file descriptor: raise the soft limit to
 * the hard one, and serve no more connections than it leaves room for
 * (the store, the upstream handles and the log need some too). */
#define FDS_RESERVED 256

static void fit_fd_limit(gw_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t room = rl.rlim_cur > FDS_RESERVED * 2 ? rl.rlim_cur - FDS_RESERVED : rl.rlim_cur / 2;
    if (rl.rlim_cur == RLIM_INFINITY || room >= cfg->max_connections)
        return;
    fprintf(stderr, "resil gateway: the file descriptor limit (%llu) leaves room for %llu "
                    "connections: --max-connections %u lowered to %llu\n",
            (unsigned long long)rl.rlim_cur, (unsigned long long)room, cfg->max_connections,
            (unsigned long long)room);
    cfg->max_connections = (unsigned)room;
    if (cfg->max_per_client > cfg->max_connections)
        cfg->max_per_client = cfg->max_connections;
}

/* The breaker's rules from --breaker-failures and --breaker-break, the
 * same for a gateway's own breaker and a shared one: a run of failures
 * when one is given, besides the default ratio rule. The upstream's
 * authority names it. */
static void breaker_rules(const gw_config *cfg, char *name, size_t cap, resil_breaker_opts *o)
{
    const char *host = strstr(cfg->upstream, "://") + 3;
    snprintf(name, cap, "%.*s", (int)strcspn(host, "/"), host);
    if (cfg->breaker_failures > 0) {
        o->kind = RESIL_BREAKER_BOTH;
        o->failure_threshold = cfg->breaker_failures;
    }
    if (cfg->breaker_break > 0)
        o->break_duration = cfg->breaker_break;
}

/* Without --fleet, --breaker-failures or --breaker-break: the upstream's
 * breaker, this gateway's alone. */
static int open_local_breaker(gateway *gw)
{
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    char name[RESIL_BREAKER_NAME_MAX];
    breaker_rules(&gw->cfg, name, sizeof name, &bo);
    bo.name = name;
    resil_err err;
    if (resil_breaker_new(&bo, &gw->breaker, &err) != 0) {
        fprintf(stderr, "resil gateway: --breaker-failures: %s\n", err.message);
        return 1;
    }
    return 0;
}

/* --fleet's client, before the store opens: a URL the client refuses (a
 * port out of range, say) is a bad option value, refused with 125 before
 * anything is opened. Redis not answering at start is not an error: the
 * breaker counts in this process alone until it does. */
static int open_fleet_client(gateway *gw)
{
#ifdef RESIL_CLI_REDIS
    const gw_config *cfg = &gw->cfg;
    if (cfg->fleet == NULL)
        return 0;
    int rc = fleet_connect("gateway", cfg->fleet, cfg->fleet_timeout,
                           "the upstream's breaker counts in this gateway alone", &gw->redis);
    if (rc != 0)
        return rc == RESIL_EINVAL ? RESIL_EXIT_USAGE : 1;
#else
    (void)gw;
#endif
    return 0;
}

#ifdef RESIL_CLI_REDIS
/* --fleet: the upstream's breaker, named by its authority (host[:port]) so
 * every gateway in front of it shares one, on the client open_fleet_client
 * made. */
static int open_fleet_breaker(gateway *gw)
{
    const gw_config *cfg = &gw->cfg;
    resil_err err;
    char name[256];
    resil_redis_breaker_opts bo;
    resil_redis_breaker_opts_default(&bo);
    breaker_rules(cfg, name, sizeof name, &bo.rules);
    bo.name = name;
    if (resil_redis_breaker_new(gw->redis, &bo, &gw->breaker, &err) != 0) {
        fprintf(stderr, "resil gateway: --fleet: %s\n", err.message);
        return 1;
    }
    /* Learn the fleet's state before the first request. */
    (void)resil_redis_sync(gw->redis);
    if (cfg->limits.rate == 0 && cfg->limits.concurrency == 0)
        return 0;
    /* The upstream's limits, under the breaker's name; got once here, so
     * the workers only read them. */
    if ((gw->limits = calloc(1, sizeof *gw->limits)) == NULL)
        return 1;
    *gw->limits = (fleet_limits){.cmd = "gateway", .client = gw->redis, .opts = cfg->limits};
    return (gw->limit = fleet_limit_get(gw->limits, name)) != NULL ? 0 : 1;
}
#endif

static int open_breaker(gateway *gw)
{
    const gw_config *cfg = &gw->cfg;
#ifdef RESIL_CLI_REDIS
    if (cfg->fleet != NULL)
        return open_fleet_breaker(gw);
#endif
    if (cfg->breaker_failures == 0 && cfg->breaker_break == 0)
        return 0;
    return open_local_breaker(gw);
}

/* Flush this gateway's counts, then let the breaker and the client go. */
static void close_breaker(gateway *gw)
{
#ifdef RESIL_CLI_REDIS
    if (gw->redis != NULL)
        (void)resil_redis_sync(gw->redis);
#endif
    resil_breaker_free(gw->breaker);
    gw->breaker = NULL;
#ifdef RESIL_CLI_REDIS
    if (gw->limits != NULL)
        fleet_limits_free(gw->limits);
    free(gw->limits);
    gw->limits = NULL;
    gw->limit = NULL;
    resil_redis_free(gw->redis);
    gw->redis = NULL;
#endif
}

/* GET /metrics: one sink for the whole gateway; the upstream's breaker is
 * watched under its authority (scheme://host:port, the default port
 * spelled out), the name the HTTP circuit-breaker gauge is labelled by. */
static int open_metrics(gateway *gw)
{
    resil_err err = {0};
    if (resil_metrics_new(NULL, &gw->metrics, &err) != 0) {
        fprintf(stderr, "resil gateway: metrics: %s\n", err.message);
        return 1;
    }
    if (!upstream_split(gw->cfg.upstream, gw->authority, sizeof gw->authority, gw->http_host,
                        sizeof gw->http_host, &gw->upstream_attrs.server_port)) {
        fprintf(stderr, "resil gateway: metrics: cannot read the upstream's host and port\n");
        return 1;
    }
    gw->upstream_attrs.server_address = gw->http_host;
    if (gw->breaker != NULL &&
        resil_metrics_watch_http_breaker(gw->metrics, "gateway", gw->breaker, gw->authority,
                                         gw) != 0) {
        fprintf(stderr, "resil gateway: metrics: cannot watch the upstream's breaker\n");
        return 1;
    }
    return 0;
}

/* --chaos-*: the strategies, said at start with the seed that replays
 * them (whatever --quiet says: the gateway is failing requests on
 * purpose). */
static int open_chaos(gateway *gw)
{
    if (gw_chaos_new(&gw->cfg.chaos, gw->clock, gw->metrics, &gw->chaos) != 0) {
        fprintf(stderr, "resil gateway: chaos: out of memory\n");
        return 1;
    }
    if (gw->chaos == NULL)
        return 0;
    char what[256];
    gw_chaos_describe(gw->chaos, what, sizeof what);
    fprintf(stderr, "resil gateway: chaos on: %s (--chaos-seed %llu replays it; SIGUSR2 "
                    "switches it off and on)\n",
            what, (unsigned long long)gw_chaos_seed(gw->chaos));
    return 0;
}

/* Listen, serve until a stopping signal, and stop serving. */
static int serve_until_signal(gateway *gw, const sigset_t *signals)
{
    bool ipv6 = false;
    char shown[INET6_ADDRSTRLEN + 16];
    int fds[MAX_LOOPS];
    if ((fds[0] = open_listener(&gw->cfg, &ipv6, shown, sizeof shown)) < 0)
        return 1;
    if (open_more_listeners(&gw->cfg, fds) != 0) {
        close(fds[0]);
        return 1;
    }
    if (gw_http_start(gw, fds, ipv6) != 0) { /* it closed them */
        fprintf(stderr, "resil gateway: cannot start the HTTP server\n");
        return 1;
    }
    fprintf(stderr, "resil gateway: listening on http://%s, upstream %s, store %s\n", shown,
            gw->cfg.upstream, resil_store_backend(gw->store));
    int sig = wait_for_signal(gw, signals);
    unsigned in_flight = gw_http_quiesce(gw); /* counted before the signal is said */
    if (!gw->cfg.quiet)
        fprintf(stderr, "resil gateway: %s received\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    gw_http_stop(gw, in_flight, gw->cfg.timeout);
    return 0;
}

static int serve(gateway *gw, const sigset_t *signals)
{
    fit_fd_limit(&gw->cfg);
    if (gw->cfg.loops > gw->cfg.max_connections) /* each loop serves one at least */
        gw->cfg.loops = gw->cfg.max_connections;
    int rc = open_fleet_client(gw);
    if (rc != 0 || (rc = open_store(gw)) != 0)
        return rc;
    if ((rc = open_breaker(gw)) != 0 || (rc = open_metrics(gw)) != 0 ||
        (rc = open_chaos(gw)) != 0)
        return rc;
    if (gw_rules_start(gw) != 0) {
        fprintf(stderr, "resil gateway: cannot start the lease renewer\n");
        return 1;
    }
    purger p;
    if (purger_start(gw, &p) != 0) {
        fprintf(stderr, "resil gateway: cannot start the purge\n");
        return 1;
    }
    rc = serve_until_signal(gw, signals);
    purger_stop(&p);
    if (rc != 0)
        return rc;
    resil_store_batch_stats bs;
    resil_store_batch_stats_get(gw->store, &bs);
    if (bs.batches > 0)
        fprintf(stderr, "resil gateway: the store committed %llu key writes in %llu batches "
                        "(%.1f on average, at most %u)\n",
                (unsigned long long)bs.calls, (unsigned long long)bs.batches,
                (double)bs.calls / (double)bs.batches, bs.largest);
    if (bs.reads > 0 || bs.cache_hits > 0)
        fprintf(stderr, "resil gateway: the store read %llu begins (%llu answered by the "
                        "read alone); the replay cache answered %llu\n",
                (unsigned long long)bs.reads, (unsigned long long)bs.read_answers,
                (unsigned long long)bs.cache_hits);
    fprintf(stderr, "resil gateway: stopped\n");
    return 0;
}

int cmd_gateway(int argc, char **argv)
{
    static gateway gw; /* one per process; large (paths, pool) */
    int rc = parse_args(argc, argv, &gw.cfg);
    if (rc != 0)
        return rc == PARSED_HELP ? 0 : RESIL_EXIT_USAGE;
    /* Before any thread exists, so every thread inherits the mask. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    if (gw_chaos_configured(&gw.cfg.chaos))
        sigaddset(&signals, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "resil gateway: cannot initialise libcurl\n");
        return 1;
    }
    gw.clock = resil_clock_system();
    pthread_mutex_init(&gw.mu, NULL);
    pthread_cond_init(&gw.idle, NULL);
    rc = serve(&gw, &signals);
    gw_rules_stop(&gw);
    gw_chaos_free(gw.chaos);
    resil_metrics_free(gw.metrics); /* lets its watch of the breaker go */
    close_breaker(&gw);
    resil_store_free(gw.store);
    pthread_cond_destroy(&gw.idle);
    pthread_mutex_destroy(&gw.mu);
    curl_global_cleanup();
    return rc;
}
