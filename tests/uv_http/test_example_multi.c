/*
 * test_example_multi.c — docs/async.md's curl multi example, run against
 * the scripted server: several URLs at once on a libuv loop, one of them
 * retried after its Retry-After, each reported on its own line.
 */
#include <sys/wait.h>

#include "http_server.h"
#include "test.h"

static char *run(const char *args)
{
    const char *example = test_build_path("examples/example_http_multi_uv");
    assert_non_null(example);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s", example, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = calloc(1, 65536);
    size_t n = fread(out, 1, 65535, p);
    out[n] = '\0';
    int st = pclose(p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    return out;
}

static void every_url_is_fetched_at_once_and_a_503_retried(void **state)
{
    (void)state;
    http_server *s = http_server_start();
    assert_non_null(s);
    http_server_script(s, "/a",
                       (const http_step[]){{.status = 503, .retry_after = "0"},
                                           {.status = 200, .body = "alpha\n"}},
                       2);
    http_server_script(s, "/b", (const http_step[]){{.status = 200, .body = "b\n"}}, 1);
    char a[128], b[128], args[300], line[256];
    http_server_url(s, "/a", a, sizeof a);
    http_server_url(s, "/b", b, sizeof b);
    snprintf(args, sizeof args, "'%s' '%s'", a, b);
    char *out = run(args);
    snprintf(line, sizeof line, "%s: HTTP 200, 6 bytes, 2 attempts\n", a);
    assert_non_null(strstr(out, line));
    snprintf(line, sizeof line, "%s: HTTP 200, 2 bytes, 1 attempt\n", b);
    assert_non_null(strstr(out, line));
    assert_int_equal(http_server_count(s, "/a"), 2);
    assert_int_equal(http_server_count(s, "/b"), 1);
    free(out);
    http_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_url_is_fetched_at_once_and_a_503_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
