/*
 * test_breaker_cli.c — `resil breaker` against a real Redis: what it lists
 * and prints for breakers instances created, and that what an operator
 * does with it (isolate, close, reset) is what every instance then sees.
 */
#include <sys/wait.h>

#include "fleet_test.h"

typedef struct run_result {
    int status;
    char out[8192];
} run_result;

/* Run the built tool with `args` (shell words), stdout and stderr together. */
static run_result resil_tool(const char *env, const char *args)
{
    const char *tool = test_build_path("resil");
    assert_non_null(tool);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s '%s' breaker %s 2>&1", env, tool, args);
    run_result r = {0};
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = '\0';
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

static run_result breaker_cmd(const char *fmt, const char *name)
{
    char args[512];
    snprintf(args, sizeof args, fmt, redis_server_url(fleet_server), name);
    return resil_tool("", args);
}

static void assert_mentions(const run_result *r, const char *needle)
{
    if (strstr(r->out, needle) == NULL)
        fail_msg("output does not mention '%s':\n%s", needle, r->out);
}

typedef struct instance {
    resil_fake_clock *fc;
    resil_redis *r;
    resil_breaker *b;
} instance;

static instance instance_of(const char *name)
{
    instance i = {.fc = fleet_clock()};
    i.r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive(name, 2, i.fc);
    i.b = fleet_breaker(i.r, &o);
    return i;
}

static void instance_free(instance *i)
{
    resil_breaker_free(i->b);
    resil_redis_free(i->r);
    resil_fake_clock_free(i->fc);
}

static void trip(instance *i)
{
    fleet_calls(i->b, 2, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(i->r), 0);
}

static void list_shows_every_shared_breaker_with_its_state(void **state)
{
    (void)state;
    instance pay = instance_of("payments"), search = instance_of("search");
    trip(&pay);
    run_result r = breaker_cmd("list --redis %s", "");
    assert_int_equal(r.status, 0);
    /* A header, then one row per breaker in the order SCAN found them. */
    static const char header[] = "NAME                             STATE       OPENS    RUN WINDOW\n";
    static const char payments_row[] = "payments                         open            1      0 0/0\n";
    static const char search_row[] = "search                           closed          0      0 0/0\n";
    assert_memory_equal(r.out, header, sizeof header - 1);
    assert_mentions(&r, payments_row);
    assert_mentions(&r, search_row);
    assert_int_equal(strlen(r.out), sizeof header + sizeof payments_row + sizeof search_row - 3);
    instance_free(&pay);
    instance_free(&search);
}

static void list_of_an_empty_fleet_says_so(void **state)
{
    (void)state;
    run_result r = breaker_cmd("list --redis %s", "");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "no shared breakers\n");
}

static void status_prints_the_shared_state_in_full(void **state)
{
    (void)state;
    instance pay = instance_of("payments");
    trip(&pay);
    run_result r = breaker_cmd("status --redis %s %s", "payments");
    assert_int_equal(r.status, 0);
    assert_mentions(&r, "name:                 payments\n");
    assert_mentions(&r, "state:                open (consecutive failures)\n");
    assert_mentions(&r, "opens:                1\n");
    assert_mentions(&r, "break:                5s\n");
    assert_mentions(&r, "probe allowed in:");
    instance_free(&pay);
}

static void isolate_from_the_tool_is_seen_by_every_instance(void **state)
{
    (void)state;
    instance pay = instance_of("payments");
    run_result r = breaker_cmd("isolate --redis %s %s", "payments");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "payments: isolated\n");
    fleet_wait_until(resil_breaker_state_of(pay.b) == RESIL_BREAKER_ISOLATED);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(pay.b, &p), RESIL_EREJECTED);
    instance_free(&pay);
}

static void close_and_reset_from_the_tool_reopen_the_way(void **state)
{
    (void)state;
    instance pay = instance_of("payments");
    trip(&pay);
    run_result r = breaker_cmd("close --redis %s %s", "payments");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "payments: closed\n");
    fleet_wait_until(resil_breaker_state_of(pay.b) == RESIL_BREAKER_CLOSED);

    trip(&pay);
    r = breaker_cmd("reset --redis %s %s", "payments");
    assert_int_equal(r.status, 0);
    fleet_wait_until(resil_breaker_state_of(pay.b) == RESIL_BREAKER_CLOSED);
    assert_int_equal(fleet_status(pay.b).opens, 0);
    instance_free(&pay);
}

static void the_url_may_come_from_the_environment_and_the_prefix_chooses_the_fleet(void **state)
{
    (void)state;
    instance pay = instance_of("payments");
    char env[128];
    snprintf(env, sizeof env, "RESIL_REDIS_URL=%s", redis_server_url(fleet_server));
    run_result r = resil_tool(env, "list");
    assert_int_equal(r.status, 0);
    assert_mentions(&r, "payments");
    r = resil_tool(env, "list --prefix other:");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "no shared breakers\n");
    instance_free(&pay);
}

static void unknown_breakers_and_unreachable_redis_exit_1(void **state)
{
    (void)state;
    run_result r = breaker_cmd("status --redis %s %s", "nobody");
    assert_int_equal(r.status, 1);
    assert_mentions(&r, "no shared breaker named 'nobody'");
    r = breaker_cmd("isolate --redis %s %s", "nobody");
    assert_int_equal(r.status, 1);
    fake_server *gone = fake_server_start("");
    char args[128];
    snprintf(args, sizeof args, "list --redis redis://127.0.0.1:%d", fake_server_port(gone));
    fake_server_stop(gone);
    r = resil_tool("", args);
    assert_int_equal(r.status, 1);
    assert_mentions(&r, "redis.url");
    assert_mentions(&r, "(is Redis running there? --redis URL or RESIL_REDIS_URL says where)");
    assert_null(strstr(r.out, "allow_offline_start"));
}

/* A typo must not create a breaker: close and reset refuse it as isolate does. */
static void close_and_reset_of_an_unknown_name_are_refused(void **state)
{
    (void)state;
    run_result r = breaker_cmd("reset --redis %s %s", "paymnets");
    assert_int_equal(r.status, 1);
    assert_mentions(&r, "no shared breaker named 'paymnets'");
    r = breaker_cmd("close --redis %s %s", "paymnets");
    assert_int_equal(r.status, 1);
    assert_mentions(&r, "no shared breaker named 'paymnets'");
    r = breaker_cmd("list --json --redis %s%s", "");
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "paymnets"));
}

static void json_gives_one_object_per_breaker(void **state)
{
    (void)state;
    instance pay = instance_of("payments");
    trip(&pay);
    run_result r = breaker_cmd("status --json --redis %s %s", "payments");
    assert_int_equal(r.status, 0);
    assert_true(strncmp(r.out, "{\"name\":\"payments\",\"state\":\"open\",\"reason\":", 43) == 0);
    assert_mentions(&r, "\"opens\":1,");
    r = breaker_cmd("list --json --redis %s%s", "");
    assert_int_equal(r.status, 0);
    assert_mentions(&r, "{\"name\":\"payments\",\"state\":\"open\",\"opens\":1,");
    r = breaker_cmd("isolate --json --redis %s %s", "payments");
    assert_int_equal(r.status, 0);
    assert_mentions(&r, "{\"name\":\"payments\",\"state\":\"isolated\",");
    instance_free(&pay);
}

static void usage_errors_exit_125_naming_the_problem(void **state)
{
    (void)state;
    run_result r = resil_tool("RESIL_REDIS_URL=", "list");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "needs --redis URL");
    r = breaker_cmd("frob --redis %s", "");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "ACTION must be list, status, isolate, close or reset, got 'frob'");
    r = breaker_cmd("status --redis %s", "");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "status needs the breaker's NAME");
    r = breaker_cmd("list --redis %s %s", "extra");
    assert_int_equal(r.status, 125);
    r = breaker_cmd("list --redis %s --timeout 0", "");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "--timeout");
    r = breaker_cmd("list --redis %s --timeout 30s", "");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "--timeout must be a duration in (0, 10s], got '30s'");
    r = resil_tool("", "list --redis memory://here");
    assert_int_equal(r.status, 125);
    assert_mentions(&r, "cannot share state between instances");
    r = resil_tool("", "--help");
    assert_int_equal(r.status, 0);
    assert_mentions(&r, "usage: resil breaker ACTION --redis URL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(list_shows_every_shared_breaker_with_its_state),
        T(list_of_an_empty_fleet_says_so),
        T(status_prints_the_shared_state_in_full),
        T(isolate_from_the_tool_is_seen_by_every_instance),
        T(close_and_reset_from_the_tool_reopen_the_way),
        T(the_url_may_come_from_the_environment_and_the_prefix_chooses_the_fleet),
        T(unknown_breakers_and_unreachable_redis_exit_1),
        T(close_and_reset_of_an_unknown_name_are_refused),
        T(json_gives_one_object_per_breaker),
        T(usage_errors_exit_125_naming_the_problem),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
