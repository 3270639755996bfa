/*
 * test_cli.c — `resil http`, end to end: the built tool against the
 * scripted server, in real time with millisecond delays. Each test asserts
 * what the server saw (how many requests, with which headers and bodies),
 * what the tool wrote and its exit status — never how long it took, except
 * the one lower bound a server's Retry-After demands.
 */
#include <dirent.h>

#include "../integration/cli_harness.h"
#include "http_server.h"

#define OK_STEP {.status = 200, .body = "ok\n"}
#define STEPS(...) ((const http_step[]){__VA_ARGS__}),                         \
                   (sizeof((const http_step[]){__VA_ARGS__}) / sizeof(http_step))

typedef struct cli_fx {
    char *dir;
    http_server *server;
    char url[256];
} cli_fx;

static int setup(void **state)
{
    cli_fx *f = calloc(1, sizeof *f);
    f->dir = test_tmpdir();
    f->server = http_server_start();
    *state = f;
    return f->dir != NULL && f->server != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    cli_fx *f = *state;
    http_server_stop(f->server);
    test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static const char *url(cli_fx *f, const char *path)
{
    http_server_url(f->server, path, f->url, sizeof f->url);
    return f->url;
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL)
        fail_msg("expected to find \"%s\" in:\n%s", needle, haystack);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct count_watch {
    http_server *server;
    const char *path;
    size_t n, seen;
} count_watch;

static bool count_reached(void *ud)
{
    count_watch *w = ud;
    w->seen = http_server_count(w->server, w->path);
    return w->seen >= w->n;
}

/* The requests recorded for `path` once they reach `n`, waited for
 * (test_wait_until): a guard against a hang, not a timing. A request the
 * tool sent just before it exited may still be on its way to the server's
 * thread for its connection when the tool's exit is seen. */
static size_t count_reaching(cli_fx *f, const char *path, size_t n)
{
    count_watch w = {f->server, path, n, 0};
    (void)test_wait_until(count_reached, &w, 5);
    return w.seen;
}

/* ---- retrying ----------------------------------------------------------------- */

static void two_503s_then_200_exit_0_after_three_requests(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, {.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/a"), 3);
    assert_string_equal(r.out, "ok\n");
    assert_contains(r.err, "#1 HTTP 503, wait");
    assert_contains(r.err, "(backoff)");
    assert_contains(r.err, "#3 ok");
    assert_contains(r.err, "-> succeeded");
    cli_result_free(&r);
}

static void status_400_exits_22_after_one_request(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 400}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    assert_contains(r.err, "#1 HTTP 400, not retryable");
    cli_result_free(&r);
}

/* resil gateway's lost answer is final: retrying would replay it. */
static void an_unknown_outcome_exits_22_after_one_request(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a",
                       STEPS({.status = 502, .headers = "Idempotent-Outcome: unknown\r\n"},
                             OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-d", "x", "--idempotency-key",
            "auto", url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    assert_contains(r.err, "#1 HTTP 502, outcome unknown, not retryable");
    assert_contains(r.err, "HTTP 502, outcome unknown (not retryable after 1 attempt)");
    cli_result_free(&r);
}

static void persistent_503_exits_22_after_four_requests(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/a"), 4);
    assert_contains(r.err, "attempts exhausted");
    cli_result_free(&r);
}

static void retry_after_one_second_is_waited(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 429, .retry_after = "1"}, OK_STEP));
    cli_result r;
    double start = now_seconds();
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/a"), NULL);
    double elapsed = now_seconds() - start;
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/a"), 2);
    assert_true(elapsed >= 1.0); /* the lower bound the server demanded */
    assert_contains(r.err, "#1 HTTP 429, wait 1s (Retry-After)");
    cli_result_free(&r);
}

static void retry_after_past_the_total_stops_at_once(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503, .retry_after = "10"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--total-timeout", "5s", "--attempt-timeout", "4s",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    assert_contains(r.err, "#1 HTTP 503, deadline");
    cli_result_free(&r);
}

static void retry_after_ignored_uses_backoff(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 429, .retry_after = "30"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry-after", "ignore", "--delay", "10ms",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/a"), 2);
    assert_contains(r.err, "(backoff)");
    cli_result_free(&r);
}

static void retry_after_max_caps_the_servers_wait(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 429, .retry_after = "30"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry-after-max", "20ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/a"), 2);
    assert_contains(r.err, "#1 HTTP 429, wait 20ms (Retry-After)");
    cli_result_free(&r);
}

static void a_named_millisecond_header_gives_the_wait(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a",
                       STEPS({.status = 503, .headers = "X-Wait-MS: 30\r\n"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--retry-after-header", "X-Wait-MS",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.err, "#1 HTTP 503, wait 30ms (Retry-After)");
    cli_result_free(&r);
}

static void retry_after_ms_is_read_without_being_named(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a",
                       STEPS({.status = 429, .headers = "retry-after-ms: 20\r\n"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.err, "#1 HTTP 429, wait 20ms (Retry-After)");
    cli_result_free(&r);
}

static void a_header_name_with_a_colon_is_refused(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry-after-header", "X-Wait: 3", url(f, "/a"), NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--retry-after-header");
    cli_result_free(&r);
}

static void microsoft_standard_retries_a_keyless_post_on_501(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 501}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--profile", "microsoft-standard", "--delay", "10ms",
            "-d", "order=1", url(f, "/p"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/p"), 2);
    cli_result_free(&r);
}

static void hedge_to_sends_the_hedge_to_another_endpoint(void **state)
{
    cli_fx *f = *state;
    http_server *other = http_server_start();
    assert_non_null(other);
    char base[128];
    http_server_url(other, "", base, sizeof base);
    http_server_script(f->server, "/a", STEPS({.status = 503}));
    http_server_script(other, "/a", STEPS({.status = 200, .body = "from the other\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--attempts", "1", "--hedge", "10s", "--hedge-to", base,
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "from the other\n");
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    assert_int_equal(http_server_count(other, "/a"), 1);
    cli_result_free(&r);
    cli_run(&r, f->dir, NULL, "http", "--hedge-to", "http://", url(f, "/a"), NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--hedge-to must be a URL such as https://eu.example.com");
    cli_result_free(&r);
    http_server_stop(other);
}

static void disable_for_keeps_a_method_from_being_retried(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--disable-for", "GET,HEAD",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    cli_result_free(&r);
}

/* ---- methods and keys ------------------------------------------------------------ */

static void post_without_key_is_sent_once(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-d", "order=1", url(f, "/p"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/p"), 1);
    const http_request *q = http_server_request(f->server, "/p", 0);
    assert_string_equal(q->method, "POST");
    assert_string_equal(q->body, "order=1");
    assert_int_equal(http_request_header_count(q, "Idempotency-Key"), 0);
    cli_result_free(&r);
}

static void post_with_auto_key_is_retried_with_one_key(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 503}, {.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-d", "order=1",
            "--idempotency-key", "auto", url(f, "/p"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/p"), 3);
    char first[300], key[300];
    assert_true(http_request_header(http_server_request(f->server, "/p", 0),
                                    "Idempotency-Key", first, sizeof first));
    assert_int_equal(strlen(first), 36);
    for (size_t i = 1; i < 3; i++) {
        assert_true(http_request_header(http_server_request(f->server, "/p", i),
                                        "Idempotency-Key", key, sizeof key));
        assert_string_equal(key, first);
    }
    cli_result_free(&r);
}

static void given_key_is_sent_on_every_attempt(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 502}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-X", "PATCH", "-d", "{}",
            "--idempotency-key", "order-42", url(f, "/p"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/p"), 2);
    char key[64];
    const http_request *q = http_server_request(f->server, "/p", 1);
    assert_true(http_request_header(q, "Idempotency-Key", key, sizeof key));
    assert_string_equal(key, "order-42");
    assert_string_equal(q->method, "PATCH");
    cli_result_free(&r);
}

static void retry_unsafe_retries_post_without_key(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-d", "x", "--retry-unsafe",
            url(f, "/p"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/p"), 2);
    cli_result_free(&r);
}

static void write_profile_sends_a_keyed_post_once(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--profile", "write", "--delay", "10ms", "-d", "x",
            "--idempotency-key", "auto", url(f, "/p"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/p"), 1);
    cli_result_free(&r);
}

static void headers_method_and_file_body_are_sent(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/u", STEPS(OK_STEP));
    cli_write(f->dir, "body.json", "{\"n\":1}");
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-X", "PUT", "-H", "X-Trace: abc", "-H",
            "Content-Type: application/json", "--data", "@body.json", url(f, "/u"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = http_server_request(f->server, "/u", 0);
    assert_string_equal(q->method, "PUT");
    assert_string_equal(q->body, "{\"n\":1}");
    char v[64];
    assert_true(http_request_header(q, "X-Trace", v, sizeof v));
    assert_string_equal(v, "abc");
    assert_true(http_request_header(q, "Content-Type", v, sizeof v));
    assert_string_equal(v, "application/json");
    cli_result_free(&r);
}

static void body_from_standard_input(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/u", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, "piped", "http", "-d", "@-", url(f, "/u"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(http_server_request(f->server, "/u", 0)->body, "piped");
    cli_result_free(&r);
}

/* ---- transfer failures ------------------------------------------------------------ */

/* Each attempt is held, so only its timeout ends it; the timeout is far
 * above what sending a request on loopback takes, so both requests are
 * sent whatever the load. */
static void attempt_timeouts_exit_28(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/slow", STEPS({.hold = true}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--attempts", "2", "--delay", "10ms",
            "--attempt-timeout", "500ms", url(f, "/slow"), NULL);
    assert_int_equal(r.status, 28);
    assert_int_equal(count_reaching(f, "/slow", 2), 2);
    assert_contains(r.err, "#2 timed out, attempts exhausted");
    cli_result_free(&r);
}

/* The first attempt is never answered, so only its timeout ends it; the
 * timeout (which also bounds the second attempt, answered at once) is a
 * second, far above a loopback attempt's few milliseconds. */
static void a_slow_attempt_is_retried_after_its_timeout(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/slow", STEPS({.hold = true}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--attempt-timeout", "1s",
            url(f, "/slow"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/slow"), 2);
    assert_string_equal(r.out, "ok\n");
    cli_result_free(&r);
}

static int closed_port(void)
{
    http_server *s = http_server_start();
    int port = http_server_port(s);
    http_server_stop(s);
    return port;
}

static void refused_connection_exits_7(void **state)
{
    cli_fx *f = *state;
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", closed_port());
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--attempts", "2", "--delay", "10ms", u, NULL);
    assert_int_equal(r.status, 7);
    assert_contains(r.err, "#2 curl 7");
    cli_result_free(&r);
}

static void unresolvable_host_exits_6(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--attempts", "1", "http://no-such-host.invalid/", NULL);
    assert_int_equal(r.status, 6);
    cli_result_free(&r);
}

static void dropped_connections_are_retried(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/d", STEPS({.status = HTTP_DROP}, {.status = HTTP_RESET},
                                              OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/d"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/d"), 3);
    assert_string_equal(r.out, "ok\n");
    cli_result_free(&r);
}

/* ---- output ---------------------------------------------------------------------------- */

static void only_the_final_body_is_written(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/b", STEPS({.status = 503, .body = "error page one\n"},
                                              {.status = 502, .body = "error page two\n"},
                                              {.status = 200, .body = "the answer\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", url(f, "/b"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "the answer\n");
    cli_result_free(&r);
}

static void include_shows_only_the_final_headers(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/b", STEPS({.status = 503, .headers = "X-Try: 1\r\n"},
                                              {.status = 200, .headers = "X-Try: 2\r\n",
                                               .body = "ok\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-i", "--delay", "10ms", url(f, "/b"), NULL);
    assert_int_equal(r.status, 0);
    assert_true(strncmp(r.out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_contains(r.out, "X-Try: 2\r\n");
    assert_null(strstr(r.out, "X-Try: 1"));
    assert_contains(r.out, "\r\n\r\nok\n");
    cli_result_free(&r);
}

static void output_file_receives_the_body(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/b", STEPS({.status = 503}, {.status = 200, .body = "saved\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-o", "out.txt", url(f, "/b"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    char *saved = cli_read(f->dir, "out.txt");
    assert_string_equal(saved, "saved\n");
    free(saved);
    cli_result_free(&r);
}

static void json_log_carries_each_status(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, {.status = 429,
                                              .retry_after = "0"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--log", "json", "--delay", "10ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.err, "\"attempt\":1,\"outcome\":\"transient\",\"code\":503,"
                           "\"detail\":\"HTTP 503\",\"decision\":\"retry\"");
    assert_contains(r.err, "\"source\":\"backoff\"");
    assert_contains(r.err, "\"status\":503}");
    assert_contains(r.err, "\"attempt\":2,\"outcome\":\"throttled\",\"code\":429");
    assert_contains(r.err, "\"source\":\"Retry-After\"");
    assert_contains(r.err, "\"attempt\":3,\"outcome\":\"success\",\"code\":200");
    assert_contains(r.err, "\"status\":200}");
    assert_contains(r.err, "\"stop\":\"succeeded\",\"attempts\":3}");
    cli_result_free(&r);
}

static void silent_prints_nothing_on_stderr(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 404}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_string_equal(r.err, "");
    cli_result_free(&r);
}

/* ---- several URLs, breakers, hedging ------------------------------------------------- */

static void breakers_isolate_hosts_across_urls(void **state)
{
    cli_fx *f = *state;
    http_server *other = http_server_start();
    http_server_script(f->server, "/down", STEPS({.status = 503}));
    http_server_script(other, "/up", STEPS({.status = 200, .body = "up\n"}));
    char down[128], up[128];
    http_server_url(f->server, "/down", down, sizeof down);
    http_server_url(other, "/up", up, sizeof up);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--attempts", "1", "--breaker-failures", "2", down,
            down, down, up, NULL);
    /* the third call to the failing host is refused without a request... */
    assert_int_equal(http_server_count(f->server, "/down"), 2);
    assert_contains(r.err, "circuit open");
    /* ...while the other host is served */
    assert_int_equal(http_server_count(other, "/up"), 1);
    assert_contains(r.out, "up\n");
    assert_int_equal(r.status, 0); /* one at a time, the last URL's status, as curl's */
    cli_result_free(&r);
    http_server_stop(other);
}

static void hedged_get_takes_the_faster_answer(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/h", STEPS({.hold = true}, {.status = 200, .body = "fast\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--hedge", "100ms", url(f, "/h"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "fast\n");
    assert_int_equal(http_server_count(f->server, "/h"), 2);
    cli_result_free(&r);
}

/* A wait longer than --heartbeat is a loop timer that beats every period. */
static void a_long_wait_beats_every_heartbeat(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "350ms", "--jitter", "none", "--heartbeat",
            "100ms", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    int beats = 0;
    for (const char *p = r.err; (p = strstr(p, "resil: waiting, next attempt in ")) != NULL; p++)
        beats++;
    assert_int_equal(beats, 3);
    cli_result_free(&r);
}

/* ---- several URLs at once: -Z ------------------------------------------------------- */

static void wait_for_requests(cli_fx *f, const char *path, size_t n)
{
    assert_true(count_reaching(f, path, n) >= n);
}

/* The threads of process `pid`, from /proc. */
static int threads_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The gate makes the first two wait for each other (the peak reaches 2
 * however slowly they come); the delay keeps every request in the server
 * long enough that a third sent beside them would be seen. */
static void parallel_max_bounds_the_requests_in_flight(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p",
                       STEPS({.status = 200, .gate = 2, .delay_ms = 150, .body = "p\n"}));
    char u[128];
    http_server_url(f->server, "/p", u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-Z", "--parallel-max", "2", u, u, u, u, u, u, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "p\np\np\np\np\np\n");
    assert_int_equal(http_server_count(f->server, "/p"), 6);
    assert_int_equal(http_server_peak(f->server), 2);
    cli_result_free(&r);
}

/* Each request waits at the gate for the other five: all six at once. */
static void without_a_max_six_urls_run_at_once(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 200, .gate = 6, .body = "p\n"}));
    char u[128];
    http_server_url(f->server, "/p", u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--parallel", u, u, u, u, u, u, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_peak(f->server), 6);
    cli_result_free(&r);
}

/* Forty transfers at once are forty sockets in one poll pass: the loop's
 * arrays grow past their first room (16) to what the pass needs. The
 * server answers none until all forty are in. */
static void forty_transfers_run_at_once(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 200, .gate = 40, .body = "p\n"}));
    char u[128];
    http_server_url(f->server, "/p", u, sizeof u);
#define TEN_URLS u, u, u, u, u, u, u, u, u, u
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-sZ", "--parallel-max", "40", TEN_URLS, TEN_URLS,
            TEN_URLS, TEN_URLS, NULL);
#undef TEN_URLS
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/p"), 40);
    assert_int_equal(http_server_peak(f->server), 40);
    assert_int_equal(strlen(r.out), 80);
    cli_result_free(&r);
}

static void without_parallel_one_url_at_a_time(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS({.status = 200, .delay_ms = 50, .body = "p\n"}));
    char u[128];
    http_server_url(f->server, "/p", u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--parallel-max", "5", u, u, u, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/p"), 3);
    assert_int_equal(http_server_peak(f->server), 1);
    cli_result_free(&r);
}

/* /wait's first answer asks for a retry in a second; /a answers at once:
 * its transfer ends (and its -w line is written) while /wait waits. The
 * gate holds each first request for the other, so /a's answer leaves
 * with /wait's 503, a second before /wait's retry can. */
static void a_retrying_transfer_holds_up_no_other(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/wait",
                       STEPS({.status = 503, .retry_after = "1", .gate = 2}, OK_STEP));
    http_server_script(f->server, "/a", STEPS({.status = 200, .gate = 2, .body = "ok\n"}));
    char w[128], a[128];
    http_server_url(f->server, "/wait", w, sizeof w);
    http_server_url(f->server, "/a", a, sizeof a);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-Z", "-o", "/dev/null", "-o", "/dev/null", "-w",
            "%{url} %{attempts}\\n", w, a, NULL);
    assert_int_equal(r.status, 0);
    char want[512];
    snprintf(want, sizeof want, "%s 1\n%s 2\n", a, w);
    assert_string_equal(r.out, want);
    cli_result_free(&r);
}

/* curl's rule for -Z: the exit status of the last transfer to fail. */
static void parallel_exit_status_is_the_last_failure(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/late", STEPS({.status = 404, .delay_ms = 300}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-Zs", "--retry", "0", url(f, "/late"),
            "http://127.0.0.1:1/", NULL);
    assert_int_equal(r.status, 22);
    cli_result_free(&r);
}

static void with_parallel_each_text_line_names_its_url(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, OK_STEP));
    http_server_script(f->server, "/b", STEPS(OK_STEP));
    char a[128], b[128], line[300];
    http_server_url(f->server, "/a", a, sizeof a);
    http_server_url(f->server, "/b", b, sizeof b);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-Z", "--delay", "10ms", a, b, NULL);
    assert_int_equal(r.status, 0);
    snprintf(line, sizeof line, "resil: %s: #1 HTTP 503, wait", a);
    assert_contains(r.err, line);
    snprintf(line, sizeof line, "resil: %s: #2 ok", a);
    assert_contains(r.err, line);
    snprintf(line, sizeof line, "resil: %s: -> succeeded", b);
    assert_contains(r.err, line);
    cli_result_free(&r);
}

/* The threads of the tool while a plain GET is held by the server: the
 * loop's and the signal thread (and a sanitizer's own, in those builds). */
static int threads_of_a_plain_get(cli_fx *f)
{
    http_server_script(f->server, "/plain", STEPS({.status = 200, .delay_ms = 20000}));
    pid_t pid = cli_start(f->dir, NULL, "http", url(f, "/plain"), NULL);
    wait_for_requests(f, "/plain", 1);
    int n = threads_of(pid);
    kill(pid, SIGTERM);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 143);
    cli_result_free(&r);
    return n;
}

/* Two URLs, each hedged, all four requests held by the server: the tool
 * runs them on its loop, with no more threads than for a plain GET. */
static void hedged_parallel_gets_make_no_threads(void **state)
{
    cli_fx *f = *state;
    int plain = threads_of_a_plain_get(f);
    http_server_script(f->server, "/h1", STEPS({.status = 200, .delay_ms = 20000}));
    http_server_script(f->server, "/h2", STEPS({.status = 200, .delay_ms = 20000}));
    char h1[128], h2[128];
    http_server_url(f->server, "/h1", h1, sizeof h1);
    http_server_url(f->server, "/h2", h2, sizeof h2);
    pid_t pid = cli_start(f->dir, NULL, "http", "-Z", "--hedge", "10ms", h1, h2, NULL);
    wait_for_requests(f, "/h1", 2);
    wait_for_requests(f, "/h2", 2);
    assert_int_equal(threads_of(pid), plain);
    kill(pid, SIGTERM);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 143);
    cli_result_free(&r);
}

static void a_hedged_get_without_parallel_makes_no_thread(void **state)
{
    cli_fx *f = *state;
    int plain = threads_of_a_plain_get(f);
    http_server_script(f->server, "/h", STEPS({.status = 200, .delay_ms = 20000}));
    pid_t pid = cli_start(f->dir, NULL, "http", "--hedge", "10ms", url(f, "/h"), NULL);
    wait_for_requests(f, "/h", 2);
    assert_int_equal(threads_of(pid), plain);
    kill(pid, SIGINT);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 130);
    cli_result_free(&r);
}

static void sigint_cancels_every_parallel_transfer(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/slow", STEPS({.status = 200, .delay_ms = 20000}));
    char u[128];
    http_server_url(f->server, "/slow", u, sizeof u);
    pid_t pid = cli_start(f->dir, NULL, "http", "-Z", "--parallel-max", "2", u, u, u, NULL);
    wait_for_requests(f, "/slow", 2);
    kill(pid, SIGINT);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 130);
    assert_int_equal(http_server_count(f->server, "/slow"), 2); /* the third never began */
    cli_result_free(&r);
}

static void parallel_max_out_of_range_is_refused(void **state)
{
    cli_fx *f = *state;
    const char *bad[] = {"0", "301", "-1", "ten"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_result r;
        cli_run(&r, f->dir, NULL, "http", "-Z", "--parallel-max", bad[i], url(f, "/a"), NULL);
        assert_int_equal(r.status, 125);
        assert_contains(r.err, "--parallel-max");
        assert_contains(r.err, "[1, 300]");
        assert_int_equal(http_server_count(f->server, "/a"), 0);
        cli_result_free(&r);
    }
}

static void output_dir_holds_the_o_and_O_files(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/dir/file.txt", STEPS({.status = 200, .body = "file\n"}));
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    char a[128], file[128], dir[512];
    http_server_url(f->server, "/a", a, sizeof a);
    http_server_url(f->server, "/dir/file.txt", file, sizeof file);
    snprintf(dir, sizeof dir, "%s/d", f->dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-Z", "--output-dir", "d", "-o", "x.txt", a, "-O", file,
            NULL);
    assert_int_equal(r.status, 0);
    char *x = cli_read(f->dir, "d/x.txt"), *y = cli_read(f->dir, "d/file.txt");
    assert_string_equal(x, "ok\n");
    assert_string_equal(y, "file\n");
    free(x);
    free(y);
    cli_result_free(&r);
}

/* ---- signals ------------------------------------------------------------------------- */

static void sigint_during_a_wait_exits_130_at_once(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}));
    pid_t pid = cli_start(f->dir, NULL, "http", "--delay", "20s", "--jitter", "none",
                          url(f, "/a"), NULL);
    cli_await(cli_err_contains, f->dir, "#1 HTTP 503, wait 20s");
    kill(pid, SIGINT);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 130);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    cli_result_free(&r);
}

static void sigterm_during_a_transfer_exits_143(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/slow", STEPS({.status = 200, .delay_ms = 20000}));
    pid_t pid = cli_start(f->dir, NULL, "http", url(f, "/slow"), NULL);
    while (http_server_count(f->server, "/slow") == 0) {
        struct timespec tick = {0, 5 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    kill(pid, SIGTERM);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 143);
    assert_int_equal(http_server_count(f->server, "/slow"), 1);
    cli_result_free(&r);
}

static void sighup_cancels_too(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}));
    pid_t pid = cli_start(f->dir, NULL, "http", "--delay", "20s", "--jitter", "none",
                          url(f, "/a"), NULL);
    cli_await(cli_err_contains, f->dir, "#1 HTTP 503, wait 20s");
    kill(pid, SIGHUP);
    cli_result r;
    cli_wait(pid, f->dir, &r);
    assert_int_equal(r.status, 129);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    cli_result_free(&r);
}

/* ---- bad options ---------------------------------------------------------------------- */

static void assert_usage_error(cli_fx *f, const char *needle, ...)
{
    const char *argv[16];
    int n = 0;
    va_list ap;
    va_start(ap, needle);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 15;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", n > 0 ? argv[0] : NULL, n > 1 ? argv[1] : NULL,
            n > 2 ? argv[2] : NULL, n > 3 ? argv[3] : NULL, n > 4 ? argv[4] : NULL,
            n > 5 ? argv[5] : NULL, NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, needle);
    cli_result_free(&r);
}

static void bad_options_exit_125_naming_the_option(void **state)
{
    cli_fx *f = *state;
    const char *u = "http://127.0.0.1:1/";
    assert_usage_error(f, "--profile must be one of standard, microsoft-standard, microsoft-hedging, "
                      "read, write, got 'fast'",
                       "--profile", "fast", u, NULL);
    assert_usage_error(f, "--retry-after must be honor or ignore", "--retry-after", "maybe",
                       u, NULL);
    assert_usage_error(f, "--idempotency-key must be", "--idempotency-key", "a b", u, NULL);
    assert_usage_error(f, "--header must be 'NAME: VALUE'", "-H", "nocolon", u, NULL);
    assert_usage_error(f, "--write-out: unknown variable '%{bogus}'", "-w", "%{bogus}", u,
                       NULL);
    assert_usage_error(f, "--resolve must be HOST:PORT:ADDRESS", "--resolve", "h:99999:1.2.3.4",
                       u, NULL);
    assert_usage_error(f, "--max-time must be seconds", "-m", "soon", u, NULL);
    assert_usage_error(f, "--connect-timeout must be seconds", "--connect-timeout", "-1", u,
                       NULL);
    assert_usage_error(f, "--retry must be a whole number", "--retry", "3x", u, NULL);
    assert_usage_error(f, "--retry-delay must be seconds", "--retry-delay", "x", u, NULL);
    assert_usage_error(f, "--retry-max-time must be seconds", "--retry-max-time", "x", u, NULL);
    assert_usage_error(f, "--max-redirs must be a whole number", "--max-redirs", "-2", u, NULL);
    assert_usage_error(f, "--user must be USER:PASSWORD", "-u", "ann", u, NULL);
    assert_usage_error(f, "--form must be NAME=VALUE", "-F", "novalue", u, NULL);
    assert_usage_error(f, "--stall-timeout must be a duration", "--stall-timeout", "x", u, NULL);
    assert_usage_error(f, "--log-file must be a file name", "--log-file", "", u, NULL);
    assert_usage_error(f, "--output must be a file name", "-o", "", u, NULL);
    assert_usage_error(f, "choose one of -d/--data*/--json, -F, -T and -I", "-d", "x", "-F",
                       "a=b", u, NULL);
    assert_usage_error(f, "more -o/-O than URLs", "-o", "a", "-o", "b", u, NULL);
    assert_usage_error(f, "--attempts must be", "--attempts", "0", u, NULL);
    assert_usage_error(f, "--hedge", "--hedge", "soon", u, NULL);
    assert_usage_error(f, "--breaker-failures", "--breaker-failures", "0", u, NULL);
    assert_usage_error(f, "--log must be one of text, json, none", "--log", "xml", u, NULL);
    assert_usage_error(f, "--attempt-timeout must not exceed --total-timeout",
                       "--attempt-timeout", "40s", "--total-timeout", "30s", u, NULL);
    assert_usage_error(f, "unknown option '--bogus'", "--bogus", u, NULL);
    assert_usage_error(f, "no URL given", NULL);
    assert_usage_error(f, "--data: cannot open", "-d", "@/no/such/file", u, NULL);
}

/* ---- limits: at most so many of an option, the one too many refused -------------- */

/* Room for an argv of `resil http` past the harness's variadic limit. */
typedef struct long_argv {
    const char *arg[600];
    char text[300][32]; /* numbered values ("f12=v"), kept for the run */
    int n, ntext;
} long_argv;

static void push(long_argv *l, const char *arg)
{
    assert_true(l->n < (int)(sizeof l->arg / sizeof l->arg[0]));
    l->arg[l->n++] = arg;
}

/* `option` followed by the i-th value `fmt` makes (fmt holds one %d). */
static void push_numbered(long_argv *l, const char *option, const char *fmt, int i)
{
    assert_true(l->ntext < (int)(sizeof l->text / sizeof l->text[0]));
    char *t = l->text[l->ntext++];
    snprintf(t, sizeof l->text[0], fmt, i);
    if (option != NULL)
        push(l, option);
    push(l, t);
}

static void run_long(cli_fx *f, cli_result *r, long_argv *l)
{
    cli_run_argv(r, f->dir, NULL, l->n, l->arg);
}

/* Exit 125 with exactly `expected` said, and no request made. */
static void assert_refused_unsent(cli_fx *f, cli_result *r, const char *path,
                                  const char *expected)
{
    assert_int_equal(r->status, 125);
    assert_string_equal(r->err, expected);
    assert_string_equal(r->out, "");
    assert_int_equal(http_server_count(f->server, path), 0);
}

static void a_257th_url_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    char u[128], last[128], expected[256];
    http_server_url(f->server, "/u", u, sizeof u);
    http_server_url(f->server, "/last", last, sizeof last);
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 256; i++)
        push(&l, u);
    push(&l, last);
    cli_result r;
    run_long(f, &r, &l);
    snprintf(expected, sizeof expected, "resil http: at most 256 URLs; '%s' is one too many\n",
             last);
    assert_refused_unsent(f, &r, "/u", expected);
    assert_int_equal(http_server_count(f->server, "/last"), 0);
    cli_result_free(&r);
}

static void a_257th_url_option_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    char u[128], last[128], expected[256];
    http_server_url(f->server, "/u", u, sizeof u);
    http_server_url(f->server, "/last", last, sizeof last);
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 256; i++) {
        push(&l, "--url");
        push(&l, u);
    }
    push(&l, "--url");
    push(&l, last);
    cli_result r;
    run_long(f, &r, &l);
    snprintf(expected, sizeof expected,
             "resil http: --url: at most 256 URLs; '%s' is one too many\n", last);
    assert_refused_unsent(f, &r, "/u", expected);
    cli_result_free(&r);
}

static void a_257th_output_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 257; i++)
        push_numbered(&l, "-o", "out%d", i);
    push(&l, url(f, "/u"));
    cli_result r;
    run_long(f, &r, &l);
    assert_refused_unsent(f, &r, "/u",
                          "resil http: --output: at most 256 outputs (-o and -O together); "
                          "'out257' is one too many\n");
    assert_false(cli_exists(f->dir, "out1"));
    cli_result_free(&r);
}

static void a_257th_remote_name_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 257; i++)
        push(&l, "-O");
    push(&l, url(f, "/u"));
    cli_result r;
    run_long(f, &r, &l);
    assert_refused_unsent(f, &r, "/u",
                          "resil http: --remote-name: at most 256 outputs (-o and -O together); "
                          "this -O is one too many\n");
    assert_false(cli_exists(f->dir, "u"));
    cli_result_free(&r);
}

static void sixty_four_form_parts_reach_the_server(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/f", STEPS(OK_STEP));
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 64; i++)
        push_numbered(&l, "-F", "f%d=v", i);
    push(&l, url(f, "/f"));
    cli_result r;
    run_long(f, &r, &l);
    assert_int_equal(r.status, 0);
    const http_request *q = http_server_request(f->server, "/f", 0);
    assert_contains(q->body, "name=\"f1\"\r\n\r\nv\r\n");
    assert_contains(q->body, "name=\"f64\"\r\n\r\nv\r\n");
    cli_result_free(&r);
}

static void a_65th_form_part_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 65; i++)
        push_numbered(&l, "-F", "f%d=v", i);
    push(&l, url(f, "/f"));
    cli_result r;
    run_long(f, &r, &l);
    assert_refused_unsent(f, &r, "/f",
                          "resil http: --form: at most 64 parts; 'f65=v' is one too many\n");
    cli_result_free(&r);
}

static void eight_retry_after_headers_are_all_read(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a",
                       STEPS({.status = 503, .headers = "X-W8-MS: 30\r\n"}, OK_STEP));
    long_argv l = {.n = 0};
    push(&l, "http");
    push(&l, "--delay");
    push(&l, "10ms");
    for (int i = 1; i <= 8; i++)
        push_numbered(&l, "--retry-after-header", "X-W%d-MS", i);
    push(&l, url(f, "/a"));
    cli_result r;
    run_long(f, &r, &l);
    assert_int_equal(r.status, 0);
    assert_contains(r.err, "#1 HTTP 503, wait 30ms (Retry-After)");
    cli_result_free(&r);
}

static void a_ninth_retry_after_header_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 9; i++)
        push_numbered(&l, "--retry-after-header", "X-W%d-MS", i);
    push(&l, url(f, "/a"));
    cli_result r;
    run_long(f, &r, &l);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --retry-after-header: at most 8 names; 'X-W9-MS' is one "
                          "too many\n");
    cli_result_free(&r);
}

/* The configuration file's RetryAfterHeaders join the command line's, the
 * eight names at most counting both; a build without libresil-config has
 * no --config (skipped). */
#define HINT_CONFIG                                                                  \
    "{\"Resilience\": {\"Retry\": {\"r\": {\"MaxRetryAttempts\": 1, \"BaseDelay\": " \
    "\"10ms\", \"RetryAfterHeaders\": [\"X-From-File-MS\"]}}}}\n"

static void run_with_hint_config(cli_fx *f, cli_result *r, int names)
{
    cli_write(f->dir, "c.json", HINT_CONFIG);
    long_argv l = {.n = 0};
    push(&l, "http");
    push(&l, "--config");
    push(&l, "c.json");
    push(&l, "--policy");
    push(&l, "r");
    for (int i = 1; i <= names; i++)
        push_numbered(&l, "--retry-after-header", "X-W%d-MS", i);
    push(&l, url(f, "/a"));
    run_long(f, r, &l);
    if (strstr(r->err, "unknown option '--config'") != NULL) {
        cli_result_free(r);
        skip();
    }
}

static void a_policys_retry_after_header_is_read_beside_seven_named(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a",
                       STEPS({.status = 503, .headers = "X-From-File-MS: 30\r\n"}, OK_STEP));
    cli_result r;
    run_with_hint_config(f, &r, 7);
    assert_int_equal(r.status, 0);
    assert_contains(r.err, "#1 HTTP 503, wait 30ms (Retry-After)");
    cli_result_free(&r);
}

static void a_policys_retry_after_header_past_eight_is_refused_not_dropped(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    run_with_hint_config(f, &r, 8);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --retry-after-header: at most 8 names with --policy r's "
                          "RetryAfterHeaders, got 9\n");
    cli_result_free(&r);
}

static void ten_hedge_to_endpoints_are_accepted(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    long_argv l = {.n = 0};
    push(&l, "http");
    push(&l, "--hedge");
    push(&l, "10s");
    for (int i = 1; i <= 10; i++)
        push_numbered(&l, "--hedge-to", "http://127.0.0.1:%d", i);
    push(&l, url(f, "/a"));
    cli_result r;
    run_long(f, &r, &l);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "ok\n");
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    cli_result_free(&r);
}

static void an_eleventh_hedge_to_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    long_argv l = {.n = 0};
    push(&l, "http");
    for (int i = 1; i <= 11; i++)
        push_numbered(&l, "--hedge-to", "http://127.0.0.1:%d", i);
    push(&l, url(f, "/a"));
    cli_result r;
    run_long(f, &r, &l);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --hedge-to: at most 10 endpoints; 'http://127.0.0.1:11' "
                          "is one too many\n");
    cli_result_free(&r);
}

/* ---- files the options name, and where the answer goes ------------------------------- */

static void a_data_file_that_cannot_be_read_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/adir", f->dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-d", "@adir", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a", "resil http: --data: cannot read 'adir'\n");
    cli_result_free(&r);
}

static void a_data_urlencode_file_that_cannot_be_opened_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--data-urlencode", "q@missing.txt", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --data-urlencode: cannot open 'missing.txt': No such "
                          "file or directory\n");
    cli_result_free(&r);
}

static void a_write_out_file_that_cannot_be_opened_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-w", "@missing.txt", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --write-out: cannot open 'missing.txt': No such file or "
                          "directory\n");
    cli_result_free(&r);
}

static void a_form_file_that_cannot_be_read_is_refused_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-F", "doc=@missing.txt", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a", "resil http: --form: cannot read 'missing.txt'\n");
    cli_result_free(&r);
}

/* ---- values refused by name (each reaches no server) -------------------------------- */

static void an_empty_upload_file_name_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-T", "", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --upload-file must be a file name ('-': standard "
                          "input), got ''\n");
    cli_result_free(&r);
}

static void a_form_file_part_without_a_file_name_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-F", "doc=@", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --form must be NAME=VALUE, NAME=@FILE or NAME=<FILE, "
                          "got 'doc=@'\n");
    cli_result_free(&r);
}

static void an_empty_cookie_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--cookie", "", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --cookie must be NAME=VALUE[; NAME=VALUE] on one "
                          "line, or a file name, got ''\n");
    cli_result_free(&r);
}

static void a_user_agent_of_two_lines_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-A", "resil\r\nX-Injected: 1", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --user-agent must be one line of text, got "
                          "'resil\r\nX-Injected: 1'\n");
    cli_result_free(&r);
}

static void an_empty_url_option_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--url", "", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a", "resil http: --url must be a URL, got ''\n");
    cli_result_free(&r);
}

static void an_empty_disable_for_name_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--disable-for", "POST,", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --disable-for must be a comma-separated list of "
                          "methods, got 'POST,'\n");
    cli_result_free(&r);
}

/* A name that is no HTTP token would count as "any other method" and
 * leave POST and PUT retried: refused, as the configuration's DisableFor
 * refuses it. */
static void a_disable_for_name_that_is_no_method_is_refused_by_name(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--disable-for", "POST;PUT", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --disable-for must be a comma-separated list of "
                          "methods, got 'POST;PUT'\n");
    cli_result_free(&r);
}

static void a_log_file_that_cannot_be_opened_is_refused_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--log-file", "no/such/dir/log", url(f, "/a"), NULL);
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --log-file: cannot open 'no/such/dir/log': No such file "
                          "or directory\n");
    cli_result_free(&r);
}

/* curl's exit status for an output it cannot write (23), before the
 * request is sent. */
static void assert_unwritable_unsent(cli_fx *f, cli_result *r, const char *path,
                                     const char *expected)
{
    assert_int_equal(r->status, 23);
    assert_string_equal(r->err, expected);
    assert_int_equal(http_server_count(f->server, path), 0);
}

/* A body smaller than stdio's buffer meets the full device only when
 * the output is flushed: still curl's 23, with the device's own error. */
static void a_body_standard_output_cannot_take_exits_23(void **state)
{
    cli_fx *f = *state;
    int full = open("/dev/full", O_WRONLY);
    assert_true(full >= 0);
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run_into(&r, f->dir, full, "http", url(f, "/a"), NULL);
    close(full);
    assert_int_equal(r.status, 23);
    assert_contains(r.err, "resil http: cannot write 'standard output': No space left on device\n");
    cli_result_free(&r);
}

static void a_body_an_output_file_cannot_take_exits_23_with_its_error(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-o", "/dev/full", url(f, "/a"), NULL);
    assert_int_equal(r.status, 23);
    assert_contains(r.err, "resil http: cannot write '/dev/full': No space left on device\n");
    cli_result_free(&r);
}

/* As curl: a reader that went away is a failed write, not SIGPIPE. */
static void an_output_pipe_whose_reader_has_gone_exits_23(void **state)
{
    cli_fx *f = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[0]);
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run_into(&r, f->dir, p[1], "http", url(f, "/a"), NULL);
    close(p[1]);
    assert_int_equal(r.status, 23);
    assert_contains(r.err, "resil http: cannot write 'standard output': Broken pipe\n");
    cli_result_free(&r);
}

static void a_dump_header_file_that_cannot_be_written_exits_23_unsent(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-D", "no/such/dir/h", url(f, "/a"), NULL);
    assert_unwritable_unsent(f, &r, "/a",
                             "resil http: --dump-header: cannot write 'no/such/dir/h': No such "
                             "file or directory\n");
    cli_result_free(&r);
}

static void remote_name_of_a_url_without_a_file_name_exits_23_unsent(void **state)
{
    cli_fx *f = *state;
    char u[128], expected[512];
    http_server_url(f->server, "/dir/", u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-O", u, NULL);
    snprintf(expected, sizeof expected,
             "resil http: %s: -O: the URL has no file name to take\n", u);
    assert_unwritable_unsent(f, &r, "/dir/", expected);
    cli_result_free(&r);
}

/* n 'a's: a file name longer than the 1023 bytes an output name may take
 * when n > 1023. */
static void long_name(char *buf, size_t n)
{
    memset(buf, 'a', n);
    buf[n] = '\0';
}

static void remote_name_past_1023_bytes_exits_23_naming_the_length(void **state)
{
    cli_fx *f = *state;
    char path[1100], u[1200], expected[1400];
    path[0] = '/';
    long_name(path + 1, 1024);
    http_server_url(f->server, path, u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-O", u, NULL);
    snprintf(expected, sizeof expected,
             "resil http: %s: -O: the URL's file name is longer than 1023 bytes\n", u);
    assert_unwritable_unsent(f, &r, path, expected);
    cli_result_free(&r);
}

static void an_output_name_past_1023_bytes_exits_23_naming_the_option(void **state)
{
    cli_fx *f = *state;
    char name[1100], expected[512];
    long_name(name, 1024);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-o", name, url(f, "/a"), NULL);
    snprintf(expected, sizeof expected,
             "resil http: %s: --output '%.32s...': the file name is longer than 1023 bytes\n",
             url(f, "/a"), name);
    assert_unwritable_unsent(f, &r, "/a", expected);
    cli_result_free(&r);
}

static void an_output_dir_making_the_name_too_long_exits_23_naming_both(void **state)
{
    cli_fx *f = *state;
    char dir[1100], expected[512];
    long_name(dir, 1020);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--output-dir", dir, "-o", "x.txt", url(f, "/a"), NULL);
    snprintf(expected, sizeof expected,
             "resil http: %s: --output-dir and --output: the file name is longer than 1023 "
             "bytes\n", url(f, "/a"));
    assert_unwritable_unsent(f, &r, "/a", expected);
    cli_result_free(&r);
}

/* A --fleet URL the Redis client refuses (a port out of range) is refused
 * by name before any request; a build without the Redis adapter has no
 * --fleet (skipped). */
static void a_fleet_url_the_client_refuses_is_refused_by_name_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--fleet", "redis://127.0.0.1:0", url(f, "/a"), NULL);
    if (strstr(r.err, "unknown option '--fleet'") != NULL) {
        cli_result_free(&r);
        skip();
    }
    assert_refused_unsent(f, &r, "/a",
                          "resil http: --fleet: redis.url must have a port in [1, 65535], got "
                          "'redis://127.0.0.1:0'\n");
    cli_result_free(&r);
}

/* ---- chaos ------------------------------------------------------------------------- */

static void chaos_fail_one_sends_nothing_and_exits_7(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "1ms", "--chaos-fail", "1", "--chaos-seed",
            "1", "--attempts", "2", url(f, "/a"), NULL);
    assert_int_equal(r.status, 7);
    assert_int_equal(http_server_count(f->server, "/a"), 0);
    assert_string_equal(r.out, "");
    assert_contains(r.err, "#1 injected failure (not sent), wait");
    assert_contains(r.err, "#2 injected failure (not sent), attempts exhausted");
    cli_result_free(&r);
}

/* Seed 7 gives the fault strategy seed 8, whose first six draws are 0.5
 * or above four times, then below (as in resil run): attempts 5 and 6 are
 * injected, on every run. */
static void a_chaos_seed_replays_the_same_injections(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}));
    for (int run = 1; run <= 2; run++) {
        cli_result r;
        cli_run(&r, f->dir, NULL, "http", "--delay", "1ms", "--attempts", "6", "--chaos-fail",
                "0.5", "--chaos-seed", "7", url(f, "/a"), NULL);
        assert_int_equal(r.status, 7);
        assert_int_equal(http_server_count(f->server, "/a"), 4 * run);
        assert_contains(r.err, "#4 HTTP 503, wait");
        assert_contains(r.err, "#5 injected failure (not sent), wait");
        assert_contains(r.err, "#6 injected failure (not sent), attempts exhausted");
        cli_result_free(&r);
    }
}

/* The injected wait is inside the attempt: the attempt timeout ends it. */
static void chaos_latency_counts_against_the_attempt_timeout(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--chaos-latency", "1:30s", "--chaos-seed", "1",
            "--attempt-timeout", "50ms", "--attempts", "1", url(f, "/a"), NULL);
    assert_int_equal(r.status, 28);
    assert_int_equal(http_server_count(f->server, "/a"), 0);
    assert_contains(r.err, "#1 attempt timeout (50ms) elapsed, attempts exhausted");
    cli_result_free(&r);
}

static void a_bad_chaos_value_is_named(void **state)
{
    cli_fx *f = *state;
    const char *u = "http://127.0.0.1:1/";
    assert_usage_error(f, "--chaos-fail must be a rate in [0, 1], got '1.5'", "--chaos-fail",
                       "1.5", u, NULL);
    assert_usage_error(f, "--chaos-latency must be RATE:DURATION, such as 0.1:2s, got '0.1'",
                       "--chaos-latency", "0.1", u, NULL);
    assert_usage_error(f, "--chaos-latency must be a duration greater than 0, got '0'",
                       "--chaos-latency", "1:0", u, NULL);
    assert_usage_error(f, "--chaos-seed must be a whole number", "--chaos-seed", "0", u, NULL);
}

/* ---- timeouts that do not trap -------------------------------------------------------- */

/* The standard profile's 10 s attempt timeout yields to an explicit 3 s total. */
static void a_total_timeout_alone_cuts_the_profiles_attempt_timeout(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--profile", "standard", "--total-timeout", "3s",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "ok\n");
    cli_result_free(&r);
}

/* The read profile's 500 ms attempt and 2 s total, both switched off (its
 * hedge after 250 ms moved past the answer, so one request is sent). */
static void none_and_zero_switch_the_profiles_timeouts_off(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 200, .delay_ms = 700, .body = "ok\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--profile", "read", "--attempt-timeout", "none",
            "--total-timeout", "0", "--hedge", "10s", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    cli_result_free(&r);
}

/* Without --profile no attempt timeout cuts a slow answer; with one it does
 * (the read profile's 500 ms, against an answer that never comes, the
 * hedge's included). */
static void by_default_a_slow_answer_is_not_cut(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 200, .delay_ms = 700, .body = "ok\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    cli_result_free(&r);
    http_server_script(f->server, "/a", STEPS({.hold = true}));
    cli_run(&r, f->dir, NULL, "http", "--profile", "read", "--attempts", "1", url(f, "/a"), NULL);
    assert_int_equal(r.status, 28);
    cli_result_free(&r);
}

/* An attempt that receives nothing for --stall-timeout fails as a timeout
 * (the held request's connection stays open, silent, until it does). */
static void a_stalled_transfer_fails_with_28(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.hold = true}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--stall-timeout", "1s", "--attempts", "1", url(f, "/a"),
            NULL);
    assert_int_equal(r.status, 28);
    cli_result_free(&r);
}

static void help_gives_one_default_for_attempts(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.out, "attempts in all, the first included (default 4)");
    assert_null(strstr(r.out, "default 3)"));
    cli_result_free(&r);
}

/* The profile's waits have no cap: the help says none, not the largest duration. */
static void help_says_the_max_delay_has_no_default_cap(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.out, "cap on any backoff wait (default none)");
    cli_result_free(&r);
}

/* ---- curl's flags where resil has more to say ----------------------------------------- */

static void the_default_user_agent_names_resil_and_its_version(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", url(f, "/a"), NULL);
    char ua[64];
    assert_true(http_request_header(http_server_request(f->server, "/a", 0), "User-Agent", ua,
                                    sizeof ua));
    assert_string_equal(ua, "resil/" RESIL_VERSION_STRING);
    cli_result_free(&r);
}

static void write_out_gives_the_attempts_and_the_stop(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "--delay", "10ms", "-o", "/dev/null", "-w",
            "%{http_code} %{attempts} %{num_retries} %{stop_reason}\\n", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "200 2 1 succeeded\n");
    cli_result_free(&r);
}

/* `text` is curl's seconds: digits, a point, six digits. */
static double curl_seconds(const char *text)
{
    size_t n = strlen(text);
    const char *dot = strchr(text, '.');
    if (dot == NULL || dot == text || (size_t)(dot - text) + 7 != n ||
        strspn(text, "0123456789") != (size_t)(dot - text) ||
        strspn(dot + 1, "0123456789") != 6)
        fail_msg("'%s' is not seconds with six decimals", text);
    return strtod(text, NULL);
}

/* resil's own variables: the key the call sent, the failure's detail
 * (empty on success), the whole call's time in curl's seconds. */
static void write_out_gives_the_key_the_error_and_the_whole_calls_time(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, OK_STEP));
    http_server_script(f->server, "/nf", STEPS({.status = 404}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "-X", "POST", "-d", "x=1", "--idempotency-key",
            "k-77", "--retry-delay", "0.02", "-o", "/dev/null", "-w",
            "%{idempotency_key}|%{errormsg}|%{time_elapsed}\\n", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    char key[32], rest[64];
    assert_int_equal(sscanf(r.out, "%31[^|]|%63s", key, rest), 2);
    assert_string_equal(key, "k-77");
    assert_true(rest[0] == '|'); /* no error */
    char *nl = strchr(rest, '\n');
    if (nl != NULL)
        *nl = '\0';
    /* curl's --retry-delay is a constant wait, without jitter: it is in it */
    assert_true(curl_seconds(rest + 1) >= 0.020);
    cli_result_free(&r);
    cli_run(&r, f->dir, NULL, "http", "-s", "-o", "/dev/null", "-w", "%{errormsg}|%{exitcode}",
            url(f, "/nf"), NULL);
    assert_int_equal(r.status, 22);
    assert_string_equal(r.out, "The requested URL returned error: 404|22"); /* curl's */
    cli_result_free(&r);
}

/* The timing variables as curl prints them, in the order a transfer
 * passes its points; plain HTTP has no TLS handshake and one URL no
 * redirect; the sizes and speeds are whole bytes. */
static void write_out_times_are_seconds_in_transfer_order_and_sizes_whole(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "-o", "/dev/null", "-d", "x=12", "-w",
            "%{time_namelookup} %{time_connect} %{time_appconnect} %{time_pretransfer} "
            "%{time_starttransfer} %{time_total} %{time_redirect} %{size_upload} "
            "%{speed_download} %{speed_upload}\n",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    char field[10][32];
    int got = sscanf(r.out, "%31s %31s %31s %31s %31s %31s %31s %31s %31s %31s", field[0],
                     field[1], field[2], field[3], field[4], field[5], field[6], field[7],
                     field[8], field[9]);
    assert_int_equal(got, 10);
    double namelookup = curl_seconds(field[0]), connect = curl_seconds(field[1]);
    double pretransfer = curl_seconds(field[3]), starttransfer = curl_seconds(field[4]);
    double total = curl_seconds(field[5]);
    assert_string_equal(field[2], "0.000000");
    assert_string_equal(field[6], "0.000000");
    assert_true(namelookup <= connect && connect <= pretransfer);
    assert_true(pretransfer <= starttransfer && starttransfer <= total && total > 0);
    assert_string_equal(field[7], "4");
    assert_int_equal(strspn(field[8], "0123456789"), strlen(field[8]));
    assert_int_equal(strspn(field[9], "0123456789"), strlen(field[9]));
    cli_result_free(&r);
}

/* The failed attempt's error page never reaches the -o file. */
static void only_the_final_body_reaches_the_output_file(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503, .body = "busy\n"}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "-o", "out.txt", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    char *text = cli_read(f->dir, "out.txt");
    assert_string_equal(text, "ok\n");
    free(text);
    cli_result_free(&r);
}

static void retry_all_errors_retries_a_404(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 404}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry-all-errors", "--delay", "10ms", url(f, "/a"),
            NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/a"), 2);
    cli_result_free(&r);
}

static void retry_zero_sends_one_request(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry", "0", url(f, "/a"), NULL);
    assert_int_equal(r.status, 22);
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    cli_result_free(&r);
}

static void a_form_part_reaches_the_server_as_multipart(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/f", STEPS(OK_STEP));
    cli_write(f->dir, "up.txt", "file body");
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-F", "name=ann", "-F", "doc=@up.txt;type=text/plain",
            url(f, "/f"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = http_server_request(f->server, "/f", 0);
    assert_string_equal(q->method, "POST");
    char ct[128];
    assert_true(http_request_header(q, "Content-Type", ct, sizeof ct));
    assert_true(strncmp(ct, "multipart/form-data; boundary=", 30) == 0);
    assert_contains(q->body, "name=\"name\"\r\n\r\nann\r\n");
    assert_contains(q->body, "filename=\"up.txt\"\r\nContent-Type: text/plain\r\n\r\nfile body");
    cli_result_free(&r);
}

/* ---- curl's options, taken: what each one does to the request --------------------- */

/* The one request the server received for `path`. */
static const http_request *only_request(cli_fx *f, const char *path)
{
    assert_int_equal(http_server_count(f->server, path), 1);
    return http_server_request(f->server, path, 0);
}

static void assert_header(const http_request *q, const char *name, const char *value)
{
    char v[256];
    if (!http_request_header(q, name, v, sizeof v))
        fail_msg("no %s header in:\n%s", name, q->head);
    assert_string_equal(v, value);
}

/* curl's 'NAME;' sends NAME empty, and counts as the user's own: --json
 * adds no Content-Type of its own beside it. */
static void a_header_sent_empty_with_a_semicolon_replaces_jsons_content_type(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/j", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--json", "{\"a\":1}", "-H", "Content-Type;", url(f, "/j"),
            NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/j");
    assert_int_equal(http_request_header_count(q, "Content-Type"), 1);
    assert_header(q, "Content-Type", "");
    assert_header(q, "Accept", "application/json");
    assert_string_equal(q->body, "{\"a\":1}");
    cli_result_free(&r);
}

/* `resil http -T FILE` (FILE holding `body`) to `path`: the request the
 * server saw at `served`, a PUT of the body. */
static const http_request *put_file(cli_fx *f, const char *file, const char *body,
                                    const char *path, const char *served)
{
    http_server_script(f->server, served, STEPS(OK_STEP));
    cli_write(f->dir, file, body);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-T", file, url(f, path), NULL);
    assert_int_equal(r.status, 0);
    cli_result_free(&r);
    const http_request *q = only_request(f, served);
    assert_string_equal(q->method, "PUT");
    assert_string_equal(q->body, body);
    return q;
}

/* -T PUTs the file as it is, with no form Content-Type (curl sends none). */
static void an_upload_puts_the_files_bytes_without_a_content_type(void **state)
{
    cli_fx *f = *state;
    const http_request *q = put_file(f, "up.txt", "line one\r\nline two\n", "/u", "/u");
    assert_int_equal(http_request_header_count(q, "Content-Type"), 0);
}

/* The file's own name, without its directory, ends a URL ending in '/'. */
static void an_upload_to_a_url_ending_in_a_slash_appends_the_files_name(void **state)
{
    cli_fx *f = *state;
    char sub[CLI_PATH_MAX];
    snprintf(sub, sizeof sub, "%s/sub", f->dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    put_file(f, "sub/up.txt", "put body", "/d/", "/d/up.txt");
}

/* curl appends the name whenever the URL's path has no file name, an
 * empty path included. */
static void an_upload_to_a_url_without_a_path_appends_the_files_name(void **state)
{
    put_file(*state, "up.txt", "put body", "", "/up.txt");
}

/* The path decides, not the URL's last character: a query stays after
 * the name. */
static void an_upload_to_a_directory_url_with_a_query_puts_the_name_before_it(void **state)
{
    const http_request *q = put_file(*state, "up.txt", "put body", "/d/?q=1", "/d/up.txt");
    assert_string_equal(q->target, "/d/up.txt?q=1");
}

/* The name goes into the URL URL-encoded, as curl_easy_escape encodes it. */
static void an_uploaded_files_name_is_url_encoded_in_the_url(void **state)
{
    put_file(*state, "my notes&more.txt", "put body", "/d/", "/d/my%20notes%26more.txt");
}

static void a_form_files_filename_attribute_names_the_part(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/f", STEPS(OK_STEP));
    cli_write(f->dir, "up.txt", "file body");
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-F", "doc=@up.txt;filename=report.csv", url(f, "/f"),
            NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/f");
    assert_contains(q->body, "name=\"doc\"; filename=\"report.csv\"\r\n");
    assert_contains(q->body, "\r\n\r\nfile body\r\n");
    assert_null(strstr(q->body, "up.txt"));
    cli_result_free(&r);
}

/* Attributes after the file are each read, in any number. */
static void a_form_files_type_and_filename_attributes_both_apply(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/f", STEPS(OK_STEP));
    cli_write(f->dir, "up.txt", "file body");
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-F", "doc=@up.txt;type=application/x-thing;filename=y.bin",
            url(f, "/f"), NULL);
    assert_int_equal(r.status, 0);
    assert_contains(only_request(f, "/f")->body,
                    "name=\"doc\"; filename=\"y.bin\"\r\nContent-Type: application/x-thing\r\n"
                    "\r\nfile body\r\n");
    cli_result_free(&r);
}

/* NAME=<FILE: the file's text as the part's value, not a file upload. */
static void a_form_part_read_with_less_than_is_a_value_without_a_filename(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/f", STEPS(OK_STEP));
    cli_write(f->dir, "note.txt", "from a file");
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-F", "note=<note.txt", url(f, "/f"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/f");
    assert_contains(q->body, "Content-Disposition: form-data; name=\"note\"\r\n\r\nfrom a file\r\n");
    assert_null(strstr(q->body, "filename="));
    cli_result_free(&r);
}

/* -X POST alone is a POST without a body, as curl sends it: no
 * Content-Length, and no form Content-Type for a form that is not there. */
static void a_post_without_data_sends_no_body_headers(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/p", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-X", "POST", url(f, "/p"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/p");
    assert_string_equal(q->method, "POST");
    assert_int_equal(q->body_len, 0);
    assert_int_equal(http_request_header_count(q, "Content-Length"), 0);
    assert_int_equal(http_request_header_count(q, "Content-Type"), 0);
    cli_result_free(&r);
}

/* -X GET with -d sends a GET that carries the body, as curl does. */
static void get_with_data_sends_a_get_with_a_body(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/g", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-X", "GET", "-d", "a=1", url(f, "/g"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/g");
    assert_string_equal(q->method, "GET");
    assert_string_equal(q->target, "/g");
    assert_string_equal(q->body, "a=1");
    assert_header(q, "Content-Length", "3");
    cli_result_free(&r);
}

/* -X GET with -F: a GET carrying the form, not the POST a form makes. */
static void get_with_a_form_sends_a_get_with_the_form(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/g", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-X", "GET", "-F", "a=b", url(f, "/g"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/g");
    assert_string_equal(q->method, "GET");
    assert_contains(q->body, "Content-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n");
    cli_result_free(&r);
}

static void get_flag_puts_the_data_in_the_query_and_sends_no_body(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-G", "-d", "a=1", "-d", "b=2", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/a");
    assert_string_equal(q->method, "GET");
    assert_string_equal(q->target, "/a?a=1&b=2");
    assert_int_equal(q->body_len, 0);
    assert_int_equal(http_request_header_count(q, "Content-Length"), 0);
    cli_result_free(&r);
}

/* -b FILE (a value without '=') reads a cookie file. */
static void a_cookie_file_sends_its_cookies(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_write(f->dir, "cookies.txt",
              "# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\tv1\n");
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-b", "cookies.txt", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_header(only_request(f, "/a"), "Cookie", "fromfile=v1");
    cli_result_free(&r);
}

static void a_cookie_jar_receives_the_servers_cookie(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 200, .body = "ok\n",
                                               .headers = "Set-Cookie: sid=abc; Path=/\r\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-c", "jar.txt", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    char *jar = cli_read(f->dir, "jar.txt");
    assert_non_null(jar);
    assert_contains(jar, "\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\tabc\n");
    free(jar);
    cli_result_free(&r);
}

/* The TLS options, against a server that speaks no TLS: libcurl reads
 * their files before the handshake, so what it makes of them shows in
 * the exit status, nothing sent. The handshake itself never completes,
 * so a run that gets that far ends at its --connect-timeout (28). */
static void https_url(cli_fx *f, const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "https://127.0.0.1:%d%s", http_server_port(f->server), path);
}

/* `option missing.pem` on an https URL: curl's `code`, and nothing sent. */
static void an_unreadable_tls_file_fails_unsent(cli_fx *f, const char *option, int code)
{
    char u[128], why[16];
    https_url(f, "/a", u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry", "0", option, "missing.pem", u, NULL);
    assert_int_equal(r.status, code);
    snprintf(why, sizeof why, "curl %d: ", code);
    assert_contains(r.err, why);
    assert_int_equal(http_server_count(f->server, NULL), 0);
    cli_result_free(&r);
}

static void a_ca_file_that_cannot_be_read_fails_77_with_nothing_sent(void **state)
{
    an_unreadable_tls_file_fails_unsent(*state, "--cacert", 77);
}

/* -k verifies nothing, so the CA file is not needed: the run gets past it
 * to the handshake. */
static void insecure_does_without_the_ca_file(void **state)
{
    cli_fx *f = *state;
    char u[128];
    https_url(f, "/a", u, sizeof u);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--retry", "0", "--connect-timeout", "100ms", "-k",
            "--cacert", "missing.pem", u, NULL);
    assert_int_equal(r.status, 28);
    assert_int_equal(http_server_count(f->server, NULL), 0);
    cli_result_free(&r);
}

static void a_client_certificate_that_cannot_be_read_fails_58_with_nothing_sent(void **state)
{
    an_unreadable_tls_file_fails_unsent(*state, "-E", 58);
}

/* -x: the proxy (here the server itself) gets the absolute-form target. */
static void a_proxy_receives_the_absolute_url(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "http://origin.test/p", STEPS(OK_STEP));
    char proxy[128];
    http_server_url(f->server, "", proxy, sizeof proxy);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-x", proxy, "http://origin.test/p", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "ok\n");
    const http_request *q = only_request(f, "http://origin.test/p");
    assert_string_equal(q->method, "GET");
    assert_header(q, "Host", "origin.test");
    cli_result_free(&r);
}

static void resolve_sends_a_named_host_to_the_given_address(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    int port = http_server_port(f->server);
    char entry[64], u[128], host[64];
    snprintf(entry, sizeof entry, "name.test:%d:127.0.0.1", port);
    snprintf(u, sizeof u, "http://name.test:%d/a", port);
    snprintf(host, sizeof host, "name.test:%d", port);
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--resolve", entry, u, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "ok\n");
    assert_header(only_request(f, "/a"), "Host", host);
    cli_result_free(&r);
}

static void verbose_writes_the_request_and_the_answer_on_stderr(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-v", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "ok\n");
    assert_contains(r.err, "> GET /a HTTP/1.1\r\n");
    assert_contains(r.err, "< HTTP/1.1 200 OK\r\n");
    cli_result_free(&r);
}

/* curl 7.88 writes HTTP/1.0 as "1". */
static void write_out_http_version_of_an_http_1_0_answer_is_1(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 200, .body = "ok\n", .http10 = true}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "-o", "/dev/null", "-w", "%{http_version}",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "1");
    cli_result_free(&r);
}

static void write_out_http_version_without_an_answer_is_0(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "--retry", "0", "-w", "%{http_version}",
            "http://127.0.0.1:1/", NULL);
    assert_int_equal(r.status, 7);
    assert_string_equal(r.out, "0");
    cli_result_free(&r);
}

static void write_out_local_port_is_the_port_the_server_saw(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "-o", "/dev/null", "-w", "%{local_port}",
            url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    char port[16];
    snprintf(port, sizeof port, "%d", only_request(f, "/a")->client_port);
    assert_string_equal(r.out, port);
    cli_result_free(&r);
}

/* size_request: every byte of the request sent, its request line, header
 * block and (sent with them) its small body. */
static void write_out_size_request_counts_every_byte_sent(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "-s", "-o", "/dev/null", "-d", "x=12", "-w",
            "%{size_request}", url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    const http_request *q = only_request(f, "/a");
    size_t line = strlen("POST /a HTTP/1.1\r\n");
    char sent[16];
    snprintf(sent, sizeof sent, "%zu", line + strlen(q->head) + strlen("\r\n") + q->body_len);
    assert_string_equal(r.out, sent);
    cli_result_free(&r);
}

/* --hedge-to alone turns hedging on (after 2 s, Microsoft's delay, which
 * only real time could show): the primary's failure sends the hedge to
 * the other endpoint at once. */
static void hedge_to_without_a_hedge_delay_still_hedges(void **state)
{
    cli_fx *f = *state;
    http_server *other = http_server_start();
    assert_non_null(other);
    char base[128];
    http_server_url(other, "", base, sizeof base);
    http_server_script(f->server, "/a", STEPS({.status = 503}));
    http_server_script(other, "/a", STEPS({.status = 200, .body = "from the other\n"}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--attempts", "1", "--hedge-to", base, url(f, "/a"), NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "from the other\n");
    assert_int_equal(http_server_count(f->server, "/a"), 1);
    assert_int_equal(http_server_count(other, "/a"), 1);
    cli_result_free(&r);
    http_server_stop(other);
}

static void each_json_record_names_its_url(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/a", STEPS({.status = 404}));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--log", "json", "-s", url(f, "/a"), NULL);
    cli_result_free(&r);
    cli_run(&r, f->dir, NULL, "http", "--log", "json", "--log-file", "http.log", url(f, "/a"),
            NULL);
    assert_int_equal(r.status, 22);
    char *log = cli_read(f->dir, "http.log"), want[300];
    snprintf(want, sizeof want, "\"url\":\"%s\",\"attempt\":1,", url(f, "/a"));
    assert_contains(log, want);
    snprintf(want, sizeof want, "\"url\":\"%s\",\"stop\":\"not retryable\"", url(f, "/a"));
    assert_contains(log, want);
    assert_null(strstr(r.err, "\"attempt\""));
    free(log);
    cli_result_free(&r);
}

/* ---- telemetry ---------------------------------------------------------------------- */

#define GIVEN_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define GIVEN_PARENT "00f067aa0ba902b7"

/* The trace id and the span id of a recorded traceparent "00-T-S-01". */
static void sent_trace(cli_fx *f, size_t i, char *trace, char *span)
{
    char tp[128];
    assert_true(http_request_header(http_server_request(f->server, "/t", i), "traceparent", tp,
                                    sizeof tp));
    assert_int_equal(strlen(tp), 55);
    assert_memory_equal(tp, "00-", 3);
    assert_string_equal(tp + 52, "-01");
    snprintf(trace, 33, "%.32s", tp + 3);
    snprintf(span, 17, "%.16s", tp + 36);
}

static void traceparent_makes_each_attempt_a_child_of_the_given_trace(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/t", STEPS({.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--traceparent",
            "00-" GIVEN_TRACE "-" GIVEN_PARENT "-01", url(f, "/t"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/t"), 2);
    char trace1[33], span1[17], trace2[33], span2[17];
    sent_trace(f, 0, trace1, span1);
    sent_trace(f, 1, trace2, span2);
    assert_string_equal(trace1, GIVEN_TRACE);
    assert_string_equal(trace2, GIVEN_TRACE);
    assert_string_not_equal(span1, GIVEN_PARENT);
    assert_string_not_equal(span2, GIVEN_PARENT);
    assert_string_not_equal(span1, span2);
    cli_result_free(&r);
}

static void an_invalid_traceparent_is_refused_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/t", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--traceparent",
            "00-" GIVEN_TRACE "-0000000000000000-01", url(f, "/t"), NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--traceparent must be a W3C traceparent");
    assert_int_equal(http_server_count(f->server, "/t"), 0);
    cli_result_free(&r);
}

static void metrics_file_counts_every_attempt(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/m", STEPS({.status = 503}, {.status = 503}, OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--delay", "10ms", "--metrics", "metrics.txt",
            url(f, "/m"), NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(http_server_count(f->server, "/m"), 3);
    char *text = cli_read(f->dir, "metrics.txt");
    assert_non_null(text);
    assert_contains(text, "# TYPE http_client_request_resilience_attempt_duration_seconds "
                          "histogram\n");
    char series[512];
    int port = http_server_port(f->server);
    snprintf(series, sizeof series,
             "\nhttp_client_request_resilience_attempt_duration_seconds_count{"
             "http_request_method=\"GET\",server_address=\"127.0.0.1\",server_port=\"%d\","
             "http_response_status_code=\"503\",error_type=\"503\"} 2\n", port);
    assert_contains(text, series);
    snprintf(series, sizeof series,
             "\nhttp_client_request_resilience_attempt_duration_seconds_count{"
             "http_request_method=\"GET\",server_address=\"127.0.0.1\",server_port=\"%d\","
             "http_response_status_code=\"200\"} 1\n", port);
    assert_contains(text, series);
    free(text);
    cli_result_free(&r);
}

static void an_unwritable_metrics_file_is_refused_with_nothing_sent(void **state)
{
    cli_fx *f = *state;
    http_server_script(f->server, "/m", STEPS(OK_STEP));
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--metrics", "no/such/dir/metrics.txt", url(f, "/m"),
            NULL);
    assert_int_equal(r.status, 125);
    assert_contains(r.err, "--metrics: cannot open 'no/such/dir/metrics.txt'");
    assert_int_equal(http_server_count(f->server, "/m"), 0);
    cli_result_free(&r);
}

static void help_exits_0(void **state)
{
    cli_fx *f = *state;
    cli_result r;
    cli_run(&r, f->dir, NULL, "http", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_contains(r.out, "usage: resil http [OPTIONS] URL...");
    cli_result_free(&r);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(two_503s_then_200_exit_0_after_three_requests),
        T(a_long_wait_beats_every_heartbeat),
        T(parallel_max_bounds_the_requests_in_flight),
        T(without_a_max_six_urls_run_at_once),
        T(forty_transfers_run_at_once),
        T(without_parallel_one_url_at_a_time),
        T(a_retrying_transfer_holds_up_no_other),
        T(parallel_exit_status_is_the_last_failure),
        T(with_parallel_each_text_line_names_its_url),
        T(hedged_parallel_gets_make_no_threads),
        T(a_hedged_get_without_parallel_makes_no_thread),
        T(sigint_cancels_every_parallel_transfer),
        T(parallel_max_out_of_range_is_refused),
        T(output_dir_holds_the_o_and_O_files),
        T(a_total_timeout_alone_cuts_the_profiles_attempt_timeout),
        T(none_and_zero_switch_the_profiles_timeouts_off),
        T(by_default_a_slow_answer_is_not_cut),
        T(a_stalled_transfer_fails_with_28),
        T(help_gives_one_default_for_attempts),
        T(help_says_the_max_delay_has_no_default_cap),
        T(the_default_user_agent_names_resil_and_its_version),
        T(write_out_gives_the_attempts_and_the_stop),
        T(write_out_times_are_seconds_in_transfer_order_and_sizes_whole),
        T(write_out_gives_the_key_the_error_and_the_whole_calls_time),
        T(only_the_final_body_reaches_the_output_file),
        T(retry_all_errors_retries_a_404),
        T(retry_zero_sends_one_request),
        T(a_form_part_reaches_the_server_as_multipart),
        T(each_json_record_names_its_url),
        T(status_400_exits_22_after_one_request),
        T(an_unknown_outcome_exits_22_after_one_request),
        T(persistent_503_exits_22_after_four_requests),
        T(retry_after_max_caps_the_servers_wait),
        T(a_named_millisecond_header_gives_the_wait),
        T(retry_after_ms_is_read_without_being_named),
        T(a_header_name_with_a_colon_is_refused),
        T(microsoft_standard_retries_a_keyless_post_on_501),
        T(disable_for_keeps_a_method_from_being_retried),
        T(hedge_to_sends_the_hedge_to_another_endpoint),
        T(retry_after_one_second_is_waited),
        T(retry_after_past_the_total_stops_at_once),
        T(retry_after_ignored_uses_backoff),
        T(post_without_key_is_sent_once),
        T(post_with_auto_key_is_retried_with_one_key),
        T(given_key_is_sent_on_every_attempt),
        T(retry_unsafe_retries_post_without_key),
        T(write_profile_sends_a_keyed_post_once),
        T(headers_method_and_file_body_are_sent),
        T(body_from_standard_input),
        T(attempt_timeouts_exit_28),
        T(a_slow_attempt_is_retried_after_its_timeout),
        T(refused_connection_exits_7),
        T(unresolvable_host_exits_6),
        T(dropped_connections_are_retried),
        T(only_the_final_body_is_written),
        T(include_shows_only_the_final_headers),
        T(output_file_receives_the_body),
        T(json_log_carries_each_status),
        T(silent_prints_nothing_on_stderr),
        T(breakers_isolate_hosts_across_urls),
        T(hedged_get_takes_the_faster_answer),
        T(sigint_during_a_wait_exits_130_at_once),
        T(sigterm_during_a_transfer_exits_143),
        T(sighup_cancels_too),
        T(bad_options_exit_125_naming_the_option),
        T(traceparent_makes_each_attempt_a_child_of_the_given_trace),
        T(an_invalid_traceparent_is_refused_with_nothing_sent),
        T(metrics_file_counts_every_attempt),
        T(an_unwritable_metrics_file_is_refused_with_nothing_sent),
        T(help_exits_0),
        T(chaos_fail_one_sends_nothing_and_exits_7),
        T(a_chaos_seed_replays_the_same_injections),
        T(chaos_latency_counts_against_the_attempt_timeout),
        T(a_bad_chaos_value_is_named),
        T(a_257th_url_is_refused_by_name_with_nothing_sent),
        T(a_257th_url_option_is_refused_by_name_with_nothing_sent),
        T(a_257th_output_is_refused_by_name_with_nothing_sent),
        T(a_257th_remote_name_is_refused_by_name_with_nothing_sent),
        T(sixty_four_form_parts_reach_the_server),
        T(a_65th_form_part_is_refused_by_name_with_nothing_sent),
        T(eight_retry_after_headers_are_all_read),
        T(a_ninth_retry_after_header_is_refused_by_name_with_nothing_sent),
        T(a_policys_retry_after_header_is_read_beside_seven_named),
        T(a_policys_retry_after_header_past_eight_is_refused_not_dropped),
        T(ten_hedge_to_endpoints_are_accepted),
        T(an_eleventh_hedge_to_is_refused_by_name_with_nothing_sent),
        T(a_data_file_that_cannot_be_read_is_refused_by_name),
        T(a_data_urlencode_file_that_cannot_be_opened_is_refused_by_name),
        T(a_write_out_file_that_cannot_be_opened_is_refused_by_name),
        T(a_form_file_that_cannot_be_read_is_refused_with_nothing_sent),
        T(an_empty_upload_file_name_is_refused_by_name),
        T(a_form_file_part_without_a_file_name_is_refused_by_name),
        T(an_empty_cookie_is_refused_by_name),
        T(a_user_agent_of_two_lines_is_refused_by_name),
        T(an_empty_url_option_is_refused_by_name),
        T(an_empty_disable_for_name_is_refused_by_name),
        T(a_disable_for_name_that_is_no_method_is_refused_by_name),
        T(a_log_file_that_cannot_be_opened_is_refused_with_nothing_sent),
        T(a_dump_header_file_that_cannot_be_written_exits_23_unsent),
        T(a_body_standard_output_cannot_take_exits_23),
        T(a_body_an_output_file_cannot_take_exits_23_with_its_error),
        T(an_output_pipe_whose_reader_has_gone_exits_23),
        T(remote_name_of_a_url_without_a_file_name_exits_23_unsent),
        T(remote_name_past_1023_bytes_exits_23_naming_the_length),
        T(an_output_name_past_1023_bytes_exits_23_naming_the_option),
        T(an_output_dir_making_the_name_too_long_exits_23_naming_both),
        T(a_fleet_url_the_client_refuses_is_refused_by_name_with_nothing_sent),
        T(a_header_sent_empty_with_a_semicolon_replaces_jsons_content_type),
        T(an_upload_puts_the_files_bytes_without_a_content_type),
        T(an_upload_to_a_url_ending_in_a_slash_appends_the_files_name),
        T(an_upload_to_a_url_without_a_path_appends_the_files_name),
        T(an_upload_to_a_directory_url_with_a_query_puts_the_name_before_it),
        T(an_uploaded_files_name_is_url_encoded_in_the_url),
        T(a_form_files_filename_attribute_names_the_part),
        T(a_form_files_type_and_filename_attributes_both_apply),
        T(a_form_part_read_with_less_than_is_a_value_without_a_filename),
        T(a_post_without_data_sends_no_body_headers),
        T(get_with_data_sends_a_get_with_a_body),
        T(get_with_a_form_sends_a_get_with_the_form),
        T(get_flag_puts_the_data_in_the_query_and_sends_no_body),
        T(a_cookie_file_sends_its_cookies),
        T(a_cookie_jar_receives_the_servers_cookie),
        T(a_ca_file_that_cannot_be_read_fails_77_with_nothing_sent),
        T(insecure_does_without_the_ca_file),
        T(a_client_certificate_that_cannot_be_read_fails_58_with_nothing_sent),
        T(a_proxy_receives_the_absolute_url),
        T(resolve_sends_a_named_host_to_the_given_address),
        T(verbose_writes_the_request_and_the_answer_on_stderr),
        T(write_out_http_version_of_an_http_1_0_answer_is_1),
        T(write_out_http_version_without_an_answer_is_0),
        T(write_out_local_port_is_the_port_the_server_saw),
        T(write_out_size_request_counts_every_byte_sent),
        T(hedge_to_without_a_hedge_delay_still_hedges),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
