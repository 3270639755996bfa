/*
 * test_example.c — docs/fleet.md's example, run against a real Redis, so
 * the program a new user copies keeps doing what the page says.
 */
#include <sys/wait.h>

#include "fleet_test.h"

static void the_shared_breaker_example_prints_what_the_docs_show(void **state)
{
    (void)state;
    const char *example = test_build_path("examples/example_redis_shared_breaker");
    assert_non_null(example);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", example, redis_server_url(fleet_server));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(the_shared_breaker_example_prints_what_the_docs_show,
                               fleet_flush),
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
