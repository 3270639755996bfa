/*
 * test_gateway_options.c — `resil gateway` refuses every bad option by name
 * with exit status 125, before it listens or opens a store; runtime
 * failures (a port in use, a database that is not there) exit 1.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway_proc.h"
#include "test.h"

#define UP "--upstream", "http://127.0.0.1:9"
#define LISTEN "--listen", "127.0.0.1:0"

static char *dir;
static char store_url[600];

/* Run `resil gateway ARGS` and expect `status` with `text` in stderr. */
static void expect(int status, const char *text, const char *const args[])
{
    const char *argv[40] = {"gateway"};
    size_t n = 1;
    for (size_t i = 0; args[i] != NULL; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char err[4096];
    int rc = run_capture(test_build_path("resil"), argv, err, sizeof err);
    if (strstr(err, text) == NULL)
        fail_msg("expected '%s' in:\n%s", text, err);
    assert_int_equal(rc, status);
}

#define EXPECT_USAGE(text, ...)                                                   \
    do {                                                                          \
        const char *const a_[] = {__VA_ARGS__, NULL};                             \
        expect(125, text, a_);                                                    \
    } while (0)

static void listen_and_upstream_are_required(void **state)
{
    (void)state;
    EXPECT_USAGE("--listen HOST:PORT is required", UP);
    EXPECT_USAGE("--upstream URL is required", "--listen", "127.0.0.1:0");
}

static void listen_must_be_host_and_port(void **state)
{
    (void)state;
    EXPECT_USAGE("--listen must be HOST:PORT, got '8080'", "--listen", "8080", UP);
    EXPECT_USAGE("--listen must be HOST:PORT, got ':8080'", "--listen", ":8080", UP);
    EXPECT_USAGE("--listen port must be 0..65535, got '65536'", "--listen", "127.0.0.1:65536", UP);
    EXPECT_USAGE("--listen port must be 0..65535, got '-1'", "--listen", "127.0.0.1:-1", UP);
    EXPECT_USAGE("--listen port must be 0..65535, got 'http'", "--listen", "127.0.0.1:http", UP);
    EXPECT_USAGE("--listen needs a value", UP, "--listen");
}

static void upstream_must_be_an_http_url(void **state)
{
    (void)state;
    EXPECT_USAGE("--upstream must be an http:// or https:// URL with a host, got 'ftp://x'",
                 "--listen", "127.0.0.1:0", "--upstream", "ftp://x");
    EXPECT_USAGE("--upstream must be an http:// or https:// URL with a host, got 'http://'",
                 "--listen", "127.0.0.1:0", "--upstream", "http://");
    EXPECT_USAGE("--upstream must be a base URL without query or fragment",
                 "--listen", "127.0.0.1:0", "--upstream", "http://x/?a=1");
}

static void store_must_be_sqlite_or_postgres_without_echoing_secrets(void **state)
{
    (void)state;
    const char *const args[] = {"--listen", "127.0.0.1:0", UP, "--store",
                                "mysql://root:hunter2@db/x", NULL};
    const char *argv[] = {"gateway", args[0], args[1], args[2], args[3], args[4], args[5], NULL};
    char err[4096];
    assert_int_equal(run_capture(test_build_path("resil"), argv, err, sizeof err), 125);
    assert_non_null(strstr(err, "--store must be sqlite:PATH or postgres://..., got scheme 'mysql'"));
    assert_null(strstr(err, "hunter2"));
}

static void store_sqlite_needs_a_path(void **state)
{
    (void)state;
    EXPECT_USAGE("--store 'sqlite:' needs a file path, as in sqlite:gateway.db", "--listen",
                 "127.0.0.1:0", UP, "--store", "sqlite:");
}

static void methods_must_be_a_list_of_method_names(void **state)
{
    (void)state;
    const char *bad[] = {"", "POST,", ",POST", "POST,,PUT", "PO ST", "POST;PUT",
                         "AVERYVERYLONGMETHODNAME"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_USAGE("--methods must be a comma-separated list of HTTP methods", "--listen",
                     "127.0.0.1:0", UP, "--methods", bad[i]);
}

static void durations_must_parse_and_be_positive(void **state)
{
    (void)state;
    EXPECT_USAGE("--retention must be a duration like 250ms, 2s or 1m30s, got 'soon'",
                 "--listen", "127.0.0.1:0", UP, "--retention", "soon");
    EXPECT_USAGE("--retention must be a duration greater than 0, got '0'", "--listen",
                 "127.0.0.1:0", UP, "--retention", "0");
    EXPECT_USAGE("--lease must be a duration greater than 0, got '0s'", "--listen",
                 "127.0.0.1:0", UP, "--lease", "0s");
    EXPECT_USAGE("--timeout must be a duration like 250ms, 2s or 1m30s, got '-5s'", "--listen",
                 "127.0.0.1:0", UP, "--timeout", "-5s");
}

/* The lease is renewed while the upstream runs, so --timeout may exceed it;
 * renewing every third of it needs a lease of a second at least. A purge
 * goes by age alone, so the retention must outlast the timeout. */
static void lease_must_fit_in_retention_and_last_a_second(void **state)
{
    (void)state;
    EXPECT_USAGE("--lease (25h) must not exceed --retention (24h)", "--listen", "127.0.0.1:0",
                 UP, "--lease", "25h");
    EXPECT_USAGE("--lease (500ms) must be at least 1s", "--listen", "127.0.0.1:0", UP,
                 "--lease", "500ms");
    EXPECT_USAGE("--timeout (2h) must be shorter than --retention (1h)", "--listen",
                 "127.0.0.1:0", UP, "--retention", "1h", "--timeout", "2h");
}

static void journal_must_be_a_path_or_off(void **state)
{
    (void)state;
    EXPECT_USAGE("--journal must be a file path or 'off', got ''", "--listen", "127.0.0.1:0",
                 UP, "--journal", "");
}

static void names_and_sizes_are_checked(void **state)
{
    (void)state;
    EXPECT_USAGE("--tenant-header must be an HTTP header name, got 'X Tenant'", "--listen",
                 "127.0.0.1:0", UP, "--tenant-header", "X Tenant");
    EXPECT_USAGE("--operation must be 1 to 255 bytes, got ''", "--listen", "127.0.0.1:0", UP,
                 "--operation", "");
    const char *bad[] = {"0", "2GB", "ten", "-1", "10XB", "1.5MB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_USAGE("--max-body must be a size from 1 to 1GB", "--listen", "127.0.0.1:0", UP,
                     "--max-body", bad[i]);
}

static void front_door_limits_must_be_whole_numbers_in_range(void **state)
{
    (void)state;
    EXPECT_USAGE("--max-connections must be a whole number in [1, 1000000], got '0'",
                 "--listen", "127.0.0.1:0", UP, "--max-connections", "0");
    EXPECT_USAGE("--max-connections must be a whole number in [1, 1000000], got '1000001'",
                 "--listen", "127.0.0.1:0", UP, "--max-connections", "1000001");
    EXPECT_USAGE("--max-connections must be a whole number in [1, 1000000], got 'many'",
                 "--listen", "127.0.0.1:0", UP, "--max-connections", "many");
    EXPECT_USAGE("--max-connections-per-client must be a whole number in [1, 1000000], got '0'",
                 "--listen", "127.0.0.1:0", UP, "--max-connections-per-client", "0");
    EXPECT_USAGE("--max-connections-per-client must be a whole number in [1, 1000000], "
                 "got '-3'",
                 "--listen", "127.0.0.1:0", UP, "--max-connections-per-client", "-3");
    EXPECT_USAGE("--workers must be a whole number in [1, 1024], got '0'", "--listen",
                 "127.0.0.1:0", UP, "--workers", "0");
    EXPECT_USAGE("--workers must be a whole number in [1, 1024], got '1025'", "--listen",
                 "127.0.0.1:0", UP, "--workers", "1025");
}

static void the_loops_must_be_a_whole_number_from_1_to_64(void **state)
{
    (void)state;
    EXPECT_USAGE("--loops must be a whole number in [1, 64], got '0'", "--listen",
                 "127.0.0.1:0", UP, "--loops", "0");
    EXPECT_USAGE("--loops must be a whole number in [1, 64], got '65'", "--listen",
                 "127.0.0.1:0", UP, "--loops", "65");
    EXPECT_USAGE("--loops must be a whole number in [1, 64], got 'all'", "--listen",
                 "127.0.0.1:0", UP, "--loops", "all");
}

static void the_per_client_limit_must_not_exceed_the_total(void **state)
{
    (void)state;
    EXPECT_USAGE("--max-connections-per-client (300) must not exceed --max-connections (200)",
                 "--listen", "127.0.0.1:0", UP, "--max-connections", "200",
                 "--max-connections-per-client", "300");
    EXPECT_USAGE("--max-connections-per-client (256) must not exceed --max-connections (100)",
                 "--listen", "127.0.0.1:0", UP, "--max-connections", "100");
}

static void client_timeouts_must_be_durations_in_range(void **state)
{
    (void)state;
    EXPECT_USAGE("--header-timeout must be a duration greater than 0, got '0'", "--listen",
                 "127.0.0.1:0", UP, "--header-timeout", "0");
    EXPECT_USAGE("--header-timeout must be a duration from 1ms to 1h, got '2h'", "--listen",
                 "127.0.0.1:0", UP, "--header-timeout", "2h");
    EXPECT_USAGE("--header-timeout must be a duration like 250ms, 2s or 1m30s, got 'soon'",
                 "--listen", "127.0.0.1:0", UP, "--header-timeout", "soon");
    EXPECT_USAGE("--body-timeout must be a duration from 1ms to 1h, got '61m'", "--listen",
                 "127.0.0.1:0", UP, "--body-timeout", "61m");
    EXPECT_USAGE("--body-timeout must be a duration greater than 0, got '0s'", "--listen",
                 "127.0.0.1:0", UP, "--body-timeout", "0s");
    EXPECT_USAGE("--idle-timeout must be a duration from 1s to 1h, got '500ms'", "--listen",
                 "127.0.0.1:0", UP, "--idle-timeout", "500ms");
    EXPECT_USAGE("--idle-timeout needs a value", UP, "--listen", "127.0.0.1:0",
                 "--idle-timeout");
}

static void batching_and_the_sqlite_sync_level_are_checked_by_name(void **state)
{
    (void)state;
    EXPECT_USAGE("--batch-max must be a whole number in [1, 1024], got '0'", LISTEN, UP,
                 "--batch-max", "0");
    EXPECT_USAGE("--batch-max must be a whole number in [1, 1024], got '1025'", LISTEN, UP,
                 "--batch-max", "1025");
    EXPECT_USAGE("--batch-window must be a duration from 0s to 1s, got '2s'", LISTEN, UP,
                 "--batch-window", "2s");
    EXPECT_USAGE("--batch-window needs --batch-max 2 or more", LISTEN, UP, "--batch-max", "1",
                 "--batch-window", "1ms");
    EXPECT_USAGE("--sqlite-sync must be full or normal, got 'off'", LISTEN, UP,
                 "--sqlite-sync", "off");
    EXPECT_USAGE("--replay-cache must be off or a size from 1 to 1GB (e.g. 64MB), got '0'",
                 LISTEN, UP, "--replay-cache", "0");
    EXPECT_USAGE("--sqlite-sync applies to a sqlite: store only", LISTEN, UP, "--store",
                 "postgres://127.0.0.1:1/x", "--sqlite-sync", "normal");
}

static void a_batch_window_that_is_no_duration_is_refused_by_name(void **state)
{
    (void)state;
    EXPECT_USAGE("resil gateway: --batch-window must be a duration like 250ms, 2s or 1m30s, "
                 "got 'soon'",
                 LISTEN, UP, "--batch-max", "8", "--batch-window", "soon");
}

/* `resil gateway ARGS` with a store of its own in the scratch directory:
 * exit 125 with exactly `expected` said, and the store never opened (its
 * file never made). Skipped when the build lacks the option `needs`. */
static void expect_refused_before_the_store(const char *needs, const char *expected,
                                            const char *o1, const char *v1, const char *o2,
                                            const char *v2)
{
    char file[700], store[720];
    snprintf(file, sizeof file, "%s/refused.db", dir);
    snprintf(store, sizeof store, "sqlite:%s", file);
    const char *argv[] = {"gateway", LISTEN, UP, "--store", store, o1, v1, o2, v2, NULL};
    char err[4096];
    int rc = run_capture(test_build_path("resil"), argv, err, sizeof err);
    char unknown[64];
    snprintf(unknown, sizeof unknown, "unknown option '%s'", needs);
    if (strstr(err, unknown) != NULL)
        skip();
    assert_string_equal(err, expected);
    assert_int_equal(rc, 125);
    assert_int_equal(access(file, F_OK), -1);
}

static void a_config_file_that_cannot_be_opened_is_refused_before_the_store(void **state)
{
    (void)state;
    char cfg[700], expected[1024];
    snprintf(cfg, sizeof cfg, "%s/missing.json", dir);
    snprintf(expected, sizeof expected,
             "resil gateway: --config %s: cannot open: No such file or directory\n", cfg);
    expect_refused_before_the_store("--config", expected, "--config", cfg, "--policy", "p");
}

static void an_empty_config_file_or_policy_name_is_refused_before_the_store(void **state)
{
    (void)state;
    expect_refused_before_the_store("--config",
                                    "resil gateway: --config must be a file name, got ''\n",
                                    "--config", "", "--policy", "p");
    expect_refused_before_the_store("--policy",
                                    "resil gateway: --policy must be a policy name, got ''\n",
                                    "--config", "c.json", "--policy", "");
}

/* The Redis client refuses the URL itself (the option's own check takes
 * any redis:// URL): still a bad value, refused with 125 before the store
 * opens. */
static void a_fleet_url_the_client_refuses_is_refused_before_the_store(void **state)
{
    (void)state;
    expect_refused_before_the_store("--fleet",
                                    "resil gateway: --fleet: redis.url must have a port in "
                                    "[1, 65535], got 'redis://127.0.0.1:0'\n",
                                    "--fleet", "redis://127.0.0.1:0", NULL, NULL);
}

/* The gateway names its upstream's breaker and metrics by scheme://host:port:
 * an upstream libcurl reads no host or port from is a bad value, refused
 * with 125 before the store is made, not a failure once it is. */
static void an_upstream_without_a_readable_host_and_port_is_refused_before_the_store(void **state)
{
    (void)state;
    static const char *const bad[] = {"http://h:99999", "http://h:port", "http://:80",
                                      "http://a b", "http://[::1", "http://h\r\nX: y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char expected[256];
        snprintf(expected, sizeof expected,
                 "resil gateway: --upstream must be an http:// or https:// URL with a host, "
                 "got '%s'\n",
                 bad[i]);
        expect_refused_before_the_store("--upstream", expected, "--upstream", bad[i], NULL, NULL);
    }
}

static void unknown_options_are_refused(void **state)
{
    (void)state;
    EXPECT_USAGE("unknown option '--bogus'", "--listen", "127.0.0.1:0", UP, "--bogus");
    EXPECT_USAGE("unknown option 'extra'", "--listen", "127.0.0.1:0", UP, "extra");
}

static void help_exits_zero(void **state)
{
    (void)state;
    const char *argv[] = {"gateway", "--help", NULL};
    char err[64];
    assert_int_equal(run_capture(test_build_path("resil"), argv, err, sizeof err), 0);
}

static void a_port_in_use_exits_1(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 1), 0);
    getsockname(fd, (struct sockaddr *)&a, &len);
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", ntohs(a.sin_port));
    const char *const args[] = {"--listen", listen_at, UP, "--store", store_url, NULL};
    expect(1, "cannot listen on 127.0.0.1:", args);
    close(fd);
}

static void an_unreachable_store_exits_1(void **state)
{
    (void)state;
    const char *const args[] = {"--listen", "127.0.0.1:0", UP, "--store",
                                "postgres://nobody@127.0.0.1:1/none", NULL};
    expect(1, "resil gateway: --store: store: postgres: connection to server", args);
}

int main(void)
{
    dir = test_tmpdir();
    snprintf(store_url, sizeof store_url, "sqlite:%s/gw.db", dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(listen_and_upstream_are_required),
        cmocka_unit_test(listen_must_be_host_and_port),
        cmocka_unit_test(upstream_must_be_an_http_url),
        cmocka_unit_test(store_must_be_sqlite_or_postgres_without_echoing_secrets),
        cmocka_unit_test(store_sqlite_needs_a_path),
        cmocka_unit_test(methods_must_be_a_list_of_method_names),
        cmocka_unit_test(durations_must_parse_and_be_positive),
        cmocka_unit_test(lease_must_fit_in_retention_and_last_a_second),
        cmocka_unit_test(journal_must_be_a_path_or_off),
        cmocka_unit_test(names_and_sizes_are_checked),
        cmocka_unit_test(front_door_limits_must_be_whole_numbers_in_range),
        cmocka_unit_test(the_loops_must_be_a_whole_number_from_1_to_64),
        cmocka_unit_test(the_per_client_limit_must_not_exceed_the_total),
        cmocka_unit_test(client_timeouts_must_be_durations_in_range),
        cmocka_unit_test(batching_and_the_sqlite_sync_level_are_checked_by_name),
        cmocka_unit_test(a_batch_window_that_is_no_duration_is_refused_by_name),
        cmocka_unit_test(a_config_file_that_cannot_be_opened_is_refused_before_the_store),
        cmocka_unit_test(an_empty_config_file_or_policy_name_is_refused_before_the_store),
        cmocka_unit_test(a_fleet_url_the_client_refuses_is_refused_before_the_store),
        cmocka_unit_test(an_upstream_without_a_readable_host_and_port_is_refused_before_the_store),
        cmocka_unit_test(unknown_options_are_refused),
        cmocka_unit_test(help_exits_zero),
        cmocka_unit_test(a_port_in_use_exits_1),
        cmocka_unit_test(an_unreachable_store_exits_1),
    };
    int failed = cmocka_run_group_tests_name("store.gateway_options", tests, NULL, NULL);
    test_rmtree(dir);
    free(dir);
    return failed;
}
