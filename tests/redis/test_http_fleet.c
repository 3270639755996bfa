/*
 * test_http_fleet.c — `resil http --fleet`: separate processes of the tool
 * share each host's breaker through a real Redis, so a breaker the failures
 * of one process opened refuses the next process's request before it is
 * sent; and the fleet rate limit and concurrency limit (--fleet-rate,
 * --fleet-concurrency) bound every process together.
 *
 * Each run allows Redis FLEET_TIMEOUT_ARG per call: at the tool's 500 ms
 * default a loaded machine could stall a call past it, and the process
 * would count alone, which is a different outcome than the one asserted.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet_test.h"

#ifdef RESIL_TEST_HTTP_FLEET
#include "http_server.h"

static http_server *web;

#define FLEET_TIMEOUT_ARG "--fleet-timeout 5s"

typedef struct run_result {
    int status;
    char out[8192];
} run_result;

/* Run `resil http ARGS URL`, stdout and stderr together. */
static run_result resil_http(const char *args, const char *url)
{
    const char *tool = test_build_path("resil");
    assert_non_null(tool);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' http %s '%s' 2>&1", tool, args, url);
    run_result r = {0};
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = '\0';
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

static void assert_mentions(const run_result *r, const char *needle)
{
    if (strstr(r->out, needle) == NULL)
        fail_msg("output does not mention '%s':\n%s", needle, r->out);
}

static int web_setup(void **state)
{
    if (fleet_flush(state) != 0 || (web = http_server_start()) == NULL)
        return -1;
    static const http_step fail[] = {{.status = 503}};
    http_server_script(web, "/fail", fail, 1);
    static const http_step ok[] = {{.status = 200}};
    http_server_script(web, "/ok", ok, 1);
    return 0;
}

static int web_teardown(void **state)
{
    (void)state;
    http_server_stop(web);
    web = NULL;
    return 0;
}

/* Two failures in a row open a host's breaker; each process makes one. */
static run_result fleet_call(const char *fleet_url)
{
    char args[512], url[256];
    snprintf(args, sizeof args, "--fleet %s " FLEET_TIMEOUT_ARG " --breaker-failures 2 --attempts 1",
             fleet_url);
    http_server_url(web, "/fail", url, sizeof url);
    return resil_http(args, url);
}

static void a_breaker_opened_by_one_process_refuses_the_next_process(void **state)
{
    (void)state;
    const char *redis = redis_server_url(fleet_server);
    for (int i = 0; i < 2; i++) {
        run_result a = fleet_call(redis);
        assert_int_equal(a.status, 22); /* the 503, as curl --fail */
    }
    assert_int_equal(http_server_count(web, "/fail"), 2);

    run_result b = fleet_call(redis);
    assert_int_equal(b.status, 7); /* as curl's "could not connect" */
    char line[512], url[256];
    http_server_url(web, "/fail", url, sizeof url);
    snprintf(line, sizeof line, "resil http: %s: circuit open (not retryable after 1 attempt)",
             url);
    assert_mentions(&b, line);
    assert_int_equal(http_server_count(web, "/fail"), 2);
}

static void without_redis_each_process_counts_alone_and_still_calls(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        run_result r = fleet_call("redis://127.0.0.1:1");
        assert_int_equal(r.status, 22);
        assert_mentions(&r, "--fleet: no answer from redis://127.0.0.1:1");
    }
    assert_int_equal(http_server_count(web, "/fail"), 3);
}

static void fleet_must_be_a_redis_url(void **state)
{
    (void)state;
    run_result r = fleet_call("memory://here");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "resil http: --fleet must be a redis:// URL, got 'memory://here'");
    assert_int_equal(http_server_count(web, "/fail"), 0);
}

/* `resil http --fleet REDIS LIMITS --attempts 1` on /ok. */
static run_result limited_call(const char *limits)
{
    char args[512], url[256];
    snprintf(args, sizeof args, "--fleet %s " FLEET_TIMEOUT_ARG " %s --attempts 1",
             redis_server_url(fleet_server), limits);
    http_server_url(web, "/ok", url, sizeof url);
    return resil_http(args, url);
}

static void a_rate_spent_by_one_process_refuses_the_next_process(void **state)
{
    (void)state;
    run_result a = limited_call("--fleet-rate 1/h");
    assert_int_equal(a.status, 0);
    assert_int_equal(http_server_count(web, "/ok"), 1);

    /* The next permit is an hour away, beyond the 30 s a request waits for
     * one when it has no total timeout: the second process is refused at
     * once, without sending its request. */
    run_result b = limited_call("--fleet-rate 1/h");
    assert_int_equal(b.status, 7);
    char line[512], url[256];
    http_server_url(web, "/ok", url, sizeof url);
    snprintf(line, sizeof line,
             "resil http: %s: refused by the fleet rate limit; next permit in 1h (not attempted)",
             url);
    assert_mentions(&b, line);
    assert_int_equal(http_server_count(web, "/ok"), 1);
}

static void a_burst_admits_that_many_processes_before_the_rate_applies(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(limited_call("--fleet-rate 1/h:3").status, 0);
    assert_int_equal(limited_call("--fleet-rate 1/h:3").status, 7);
    assert_int_equal(http_server_count(web, "/ok"), 3);
}

/* The authority's fleet concurrency limit of 1, its permit held here. */
static resil_bulkhead *hold_the_only_permit(resil_redis *r, resil_bulkhead_ticket *t)
{
    char name[128];
    snprintf(name, sizeof name, "http://127.0.0.1:%d", http_server_port(web));
    resil_redis_concurrency_opts co;
    resil_redis_concurrency_opts_default(&co);
    co.name = name;
    co.max_concurrency = 1;
    co.lease = RESIL_S(60);
    resil_bulkhead *b = NULL;
    assert_int_equal(resil_redis_concurrency_new(r, &co, &b, NULL), 0);
    assert_int_equal(resil_bulkhead_try_acquire(b, t), 0);
    return b;
}

static void a_concurrency_permit_held_elsewhere_refuses_the_process(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_bulkhead_ticket t = {0};
    resil_bulkhead *b = hold_the_only_permit(r, &t);

    run_result held = limited_call("--fleet-concurrency 1");
    assert_int_equal(held.status, 7);
    assert_mentions(&held, "refused by the fleet concurrency limit (not attempted)");
    assert_int_equal(http_server_count(web, "/ok"), 0);

    resil_bulkhead_release(&t);
    run_result freed = limited_call("--fleet-concurrency 1");
    assert_int_equal(freed.status, 0);
    assert_int_equal(http_server_count(web, "/ok"), 1);

    /* and the process gave its permit back when it was done */
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), 0);
    resil_bulkhead_release(&t);
    resil_bulkhead_free(b);
    resil_redis_free(r);
}

/* `args` without --fleet on /ok: refused as a usage error. */
static run_result alone_call(const char *args)
{
    char url[256];
    http_server_url(web, "/ok", url, sizeof url);
    return resil_http(args, url);
}

static void assert_usage(const run_result *r, const char *says)
{
    assert_int_equal(r->status, 125);
    assert_mentions(r, says);
}

static void fleet_limits_are_checked_by_name(void **state)
{
    (void)state;
    run_result alone = alone_call("--fleet-rate 10/s");
    assert_usage(&alone, "resil http: --fleet-rate and --fleet-concurrency need --fleet");
    run_result zero = limited_call("--fleet-rate 0/s");
    assert_usage(&zero, "resil http: --fleet-rate must be RATE/PER[:BURST]");
    assert_mentions(&zero, "got '0/s'");
    run_result lease = limited_call("--fleet-concurrency 4:1ms");
    assert_usage(&lease, "resil http: --fleet-concurrency must be N[:LEASE]");
    assert_mentions(&lease, "got '4:1ms'");
    assert_int_equal(http_server_count(web, "/ok"), 0);
}

static void the_fleet_timeout_is_checked_by_name(void **state)
{
    (void)state;
    run_result alone = alone_call("--fleet-timeout 1s");
    assert_usage(&alone, "resil http: --fleet-timeout needs --fleet");
    run_result too_long = limited_call("--fleet-timeout 11s");
    assert_usage(&too_long,
                 "resil http: --fleet-timeout must be a duration from 1ms to 10s, got '11s'");
    assert_int_equal(http_server_count(web, "/ok"), 0);
}

/* ---- a rate permit waited for on the loop --------------------------------------- */

/* A connection that sees every command Redis runs (MONITOR), read after
 * the tool has exited: the rate limiters' script calls it saw, kept in
 * `lines`. */
typedef struct monitor {
    redisContext *c;
    char lines[64][512];
    int n;
} monitor;

static void monitor_start(monitor *m)
{
    m->n = 0;
    m->c = redisConnect("127.0.0.1", redis_server_port(fleet_server));
    assert_non_null(m->c);
    assert_int_equal(m->c->err, 0);
    redisReply *r = redisCommand(m->c, "MONITOR");
    assert_non_null(r);
    freeReplyObject(r);
}

/* Read what the monitor saw until it has `n` limiter calls or has been
 * quiet for `quiet_ms`. */
static void monitor_read(monitor *m, int n, int quiet_ms)
{
    struct timeval quiet = {quiet_ms / 1000, (quiet_ms % 1000) * 1000};
    redisSetTimeout(m->c, quiet);
    redisReply *r;
    while (m->n < n && redisGetReply(m->c, (void **)&r) == REDIS_OK) {
        if (r->type == REDIS_REPLY_STATUS && strstr(r->str, "\"gcra\"") != NULL)
            snprintf(m->lines[m->n++], sizeof m->lines[0], "%s", r->str);
        freeReplyObject(r);
    }
}

/* Everything the monitor saw, once the tool has exited. */
static void monitor_stop(monitor *m)
{
    monitor_read(m, 64, 200);
    redisFree(m->c);
}

/* Two URLs on one host whose fleet rate is one per 2 s with no burst, and
 * one on another host (localhost: the same server, another authority), at
 * once with -Z: the second URL's permit is two seconds away, ample time
 * for the other host's transfer on a loaded machine. It waits on the
 * loop, so the other host's transfer goes on meanwhile; it asks the
 * limiter again once the wait is over, and gets the permit then. */
static void a_url_waiting_for_its_rate_permit_holds_up_no_other_transfer(void **state)
{
    (void)state;
    int port = http_server_port(web);
    char args[512], urls[512];
    snprintf(args, sizeof args,
             "-Z --fleet %s " FLEET_TIMEOUT_ARG " --fleet-rate 1/2s:1 --attempts 1 -s -o /dev/null",
             redis_server_url(fleet_server));
    snprintf(urls, sizeof urls,
             "http://127.0.0.1:%d/ok?a1' 'http://127.0.0.1:%d/ok?a2' 'http://localhost:%d/ok?b",
             port, port, port);
    monitor m;
    monitor_start(&m);
    run_result r = resil_http(args, urls);
    monitor_stop(&m);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(web, "/ok"), 3);
    /* the other host's request came before the waiting one's */
    assert_string_equal(http_server_request(web, NULL, 2)->target, "/ok?a2");
    /* The limiters were asked in this order: the first URL's permit, the
     * second's refusal with its wait, the other host's permit (asked
     * during the wait), then the second URL's permit once the wait was
     * over: one more call, not a busy loop. */
    const char *hosts[] = {"127.0.0.1", "127.0.0.1", "localhost", "127.0.0.1"};
    assert_int_equal(m.n, 4);
    for (int i = 0; i < 4; i++) {
        char key[128];
        snprintf(key, sizeof key, "\"resil:limit:http://%s:%d\"", hosts[i], port);
        if (strstr(m.lines[i], key) == NULL)
            fail_msg("limiter call %d is not %s's: %s", i, hosts[i], m.lines[i]);
    }
}

/* A signal during a rate permit's wait ends the run at once: the waiting
 * URL's call starts without its permit and ends as cancelled, and its
 * request is never sent. */
static void a_signal_ends_a_rate_permit_wait_at_once(void **state)
{
    (void)state;
    const char *tool = test_build_path("resil");
    assert_non_null(tool);
    char a1[128], a2[128];
    snprintf(a1, sizeof a1, "http://127.0.0.1:%d/ok?a1", http_server_port(web));
    snprintf(a2, sizeof a2, "http://127.0.0.1:%d/ok?a2", http_server_port(web));
    monitor m;
    monitor_start(&m);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(tool, tool, "http", "-Z", "--fleet", redis_server_url(fleet_server),
              "--fleet-timeout", "5s", "--fleet-rate", "1/20s:1", "--attempts", "1", a1, a2,
              (char *)NULL);
        _exit(127);
    }
    /* the second URL was refused its permit: it waits 20 s for the next,
     * while the first one's request is served */
    monitor_read(&m, 2, FLEET_PATIENCE_MS);
    assert_int_equal(m.n, 2);
    fleet_wait_until(http_server_count(web, "/ok") == 1);
    kill(pid, SIGINT);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    redisFree(m.c);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 128 + SIGINT);
    assert_int_equal(http_server_count(web, "/ok"), 1);
    assert_string_equal(http_server_request(web, NULL, 0)->target, "/ok?a1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, web_setup, web_teardown)
        T(a_breaker_opened_by_one_process_refuses_the_next_process),
        T(without_redis_each_process_counts_alone_and_still_calls),
        T(fleet_must_be_a_redis_url),
        T(a_rate_spent_by_one_process_refuses_the_next_process),
        T(a_burst_admits_that_many_processes_before_the_rate_applies),
        T(a_concurrency_permit_held_elsewhere_refuses_the_process),
        T(fleet_limits_are_checked_by_name),
        T(the_fleet_timeout_is_checked_by_name),
        T(a_url_waiting_for_its_rate_permit_holds_up_no_other_transfer),
        T(a_signal_ends_a_rate_permit_wait_at_once),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
#else
/* Built without the HTTP adapter or the tool: nothing to run. */
static void needs_the_http_adapter_and_the_tool(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(needs_the_http_adapter_and_the_tool)};
    return cmocka_run_tests(tests);
}
#endif
