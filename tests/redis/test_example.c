/*
 * test_example.c — docs/fleet.md's examples, run against a real Redis, so
 * the programs a new user copies keep doing what the page says.
 */
#include <sys/wait.h>

#include "fleet_test.h"

/* Run examples/NAME against the test's Redis; exit 0; its output. */
static void run_example(const char *name, char *out, size_t cap)
{
    char rel[256];
    snprintf(rel, sizeof rel, "examples/%s", name);
    const char *example = test_build_path(rel);
    assert_non_null(example);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", example, redis_server_url(fleet_server));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void the_shared_breaker_example_prints_what_the_docs_show(void **state)
{
    (void)state;
    char out[4096];
    run_example("example_redis_shared_breaker", out, sizeof out);
    assert_string_equal(out,
                        "instance A: payments failed (1/3): payments unavailable\n"
                        "instance A: payments failed (2/3): payments unavailable\n"
                        "instance A: payments failed (3/3): payments unavailable\n"
                        "instance B: rejected without calling payments: circuit open, "
                        "next probe in 30s\n"
                        "fleet: open (consecutive failures), opened 1 time(s)\n"
                        "instance B: closed it by hand\n"
                        "instance A: payments called again: succeeded\n");
}

static void the_fleet_pipeline_example_prints_what_the_docs_show(void **state)
{
    (void)state;
    char out[4096];
    run_example("example_redis_fleet_pipeline", out, sizeof out);
    assert_string_equal(out, "instance A: failed: payments unavailable\n"
                             "instance A: failed: payments unavailable\n"
                             "instance A: failed: payments unavailable\n"
                             "fleet breaker, as B sees it: open\n"
                             "instance B: refused by the breaker: circuit open\n"
                             "instance A: order placed\n"
                             "instance B: refused by the rate limiter: rate limited\n"
                             "payments called 4 times for 6 calls\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(the_shared_breaker_example_prints_what_the_docs_show,
                               fleet_flush),
        cmocka_unit_test_setup(the_fleet_pipeline_example_prints_what_the_docs_show,
                               fleet_flush),
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
