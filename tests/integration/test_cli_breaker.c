/*
 * test_cli_breaker.c — `resil breaker`'s command line, refused before any
 * Redis is asked: exit 125 and the sentence that names the problem. Its
 * work against a real Redis is tests/redis/test_breaker_cli.c; these need
 * no server (the --redis URL given names a port nothing listens on, so a
 * command that got as far as connecting would exit 1 instead). Skipped in
 * a build without the Redis adapter, whose tool has no `breaker`.
 */
#include "cli_harness.h"

#define NOWHERE "redis://127.0.0.1:1"

/* Run `resil breaker ARGS...` and expect exit 125 and nothing on standard
 * output; the caller checks standard error in r->err and frees r. */
static void run_refused(cli_result *r, const char *dir, const char *a1, const char *a2,
                        const char *a3, const char *a4, const char *a5)
{
    cli_run(r, dir, NULL, "breaker", a1, a2, a3, a4, a5, NULL);
    if (strstr(r->err, "unknown command 'breaker'") != NULL) {
        cli_result_free(r);
        skip();
    }
    assert_int_equal(r->status, 125);
    assert_string_equal(r->out, "");
}

/* ... with exactly `expected` on standard error. */
static void assert_usage(const char *dir, const char *expected, const char *a1, const char *a2,
                         const char *a3, const char *a4, const char *a5)
{
    cli_result r;
    run_refused(&r, dir, a1, a2, a3, a4, a5);
    assert_string_equal(r.err, expected);
    cli_result_free(&r);
}

static void an_unknown_option_is_refused_by_name(void **state)
{
    assert_usage(*state,
                 "resil breaker: unknown option '--bogus'\n"
                 "try 'resil breaker --help'\n",
                 "list", "--redis", NOWHERE, "--bogus", NULL);
}

static void a_second_name_is_refused_as_unexpected(void **state)
{
    assert_usage(*state,
                 "resil breaker: unexpected argument 'billing'\n"
                 "try 'resil breaker --help'\n",
                 "status", "payments", "billing", "--redis", NOWHERE);
}

static void no_action_is_refused_naming_the_actions(void **state)
{
    assert_usage(*state,
                 "resil breaker: needs an ACTION: list, status, isolate, close or reset\n"
                 "try 'resil breaker --help'\n",
                 "--redis", NOWHERE, NULL, NULL, NULL);
}

/* The Redis client refuses the value itself (its words follow): exit 125,
 * the sentence starting with the option, or variable, that gave it. */
static void assert_client_refuses(const char *dir, const char *start, const char *a1,
                                  const char *a2, const char *a3, const char *a4,
                                  const char *a5)
{
    cli_result r;
    run_refused(&r, dir, a1, a2, a3, a4, a5);
    if (strncmp(r.err, start, strlen(start)) != 0)
        fail_msg("expected '%s' to start:\n%s", start, r.err);
    cli_result_free(&r);
}

static void a_url_the_client_refuses_is_refused_naming_redis(void **state)
{
    assert_client_refuses(*state, "resil breaker: --redis: redis.url must be ", "list",
                          "--redis", "http://x", NULL, NULL);
}

static void a_url_from_the_environment_is_refused_naming_the_variable(void **state)
{
    setenv("RESIL_REDIS_URL", "http://x", 1);
    assert_client_refuses(*state, "resil breaker: RESIL_REDIS_URL: redis.url must be ", "list",
                          NULL, NULL, NULL, NULL);
    unsetenv("RESIL_REDIS_URL");
}

static void a_prefix_the_client_refuses_is_refused_naming_prefix(void **state)
{
    assert_client_refuses(*state, "resil breaker: --prefix '': redis.prefix must be ", "list",
                          "--redis", NOWHERE, "--prefix", "");
    assert_client_refuses(*state, "resil breaker: --prefix 'a b': redis.prefix must be ", "list",
                          "--redis", NOWHERE, "--prefix", "a b");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, cli_setup, cli_teardown)
    const struct CMUnitTest tests[] = {
        T(an_unknown_option_is_refused_by_name),
        T(a_second_name_is_refused_as_unexpected),
        T(no_action_is_refused_naming_the_actions),
        T(a_url_the_client_refuses_is_refused_naming_redis),
        T(a_url_from_the_environment_is_refused_naming_the_variable),
        T(a_prefix_the_client_refuses_is_refused_naming_prefix),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
