/*
 * test_http_fleet.c — `resil http --fleet`: separate processes of the tool
 * share each host's breaker through a real Redis, so a breaker the failures
 * of one process opened refuses the next process's request before it is
 * sent.
 */
#include <sys/wait.h>

#include "fleet_test.h"

#ifdef RESIL_TEST_HTTP_FLEET
#include "http_server.h"

static http_server *web;

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
    snprintf(args, sizeof args, "--fleet %s --breaker-failures 2 --attempts 1", fleet_url);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, web_setup, web_teardown)
        T(a_breaker_opened_by_one_process_refuses_the_next_process),
        T(without_redis_each_process_counts_alone_and_still_calls),
        T(fleet_must_be_a_redis_url),
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
