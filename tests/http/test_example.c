/*
 * test_example.c — docs/http.md's example program, run against the
 * scripted server: the example a user copies must do what the page says.
 */
#include <sys/wait.h>

#include "http_server.h"
#include "test.h"

typedef struct ex_fx {
    char *dir;
    http_server *server;
    char *out, *err;
} ex_fx;

static int setup(void **state)
{
    ex_fx *f = calloc(1, sizeof *f);
    f->dir = test_tmpdir();
    f->server = http_server_start();
    *state = f;
    return f->dir != NULL && f->server != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    ex_fx *f = *state;
    http_server_stop(f->server);
    test_rmtree(f->dir);
    free(f->dir);
    free(f->out);
    free(f->err);
    free(f);
    return 0;
}

static char *slurp(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    char *buf = calloc(1, 65536);
    fread(buf, 1, 65535, in);
    fclose(in);
    return buf;
}

/* Run the example with its arguments; its exit status. */
static int run_example(ex_fx *f, const char *path, const char *body)
{
    char url[128], cmd[1024];
    http_server_url(f->server, path, url, sizeof url);
    const char *example = test_build_path("examples/example_http_fetch");
    assert_non_null(example);
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s%s%s >'%s/out' 2>'%s/err'", example, url,
             body != NULL ? "'" : "", body != NULL ? body : "", body != NULL ? "'" : "",
             f->dir, f->dir);
    int st = system(cmd);
    f->out = slurp(f->dir, "out");
    f->err = slurp(f->dir, "err");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void example_get_retries_to_the_answer(void **state)
{
    ex_fx *f = *state;
    http_server_script(f->server, "/doc",
                       (const http_step[]){{.status = 503, .body = "busy\n"},
                                           {.status = 200, .body = "hello\n"}},
                       2);
    assert_int_equal(run_example(f, "/doc", NULL), 0);
    assert_string_equal(f->out, "hello\n");
    assert_non_null(strstr(f->err, "attempt 1: HTTP 503, retry in"));
    assert_non_null(strstr(f->err, "attempt 2: ok, succeeded"));
    assert_int_equal(http_server_count(f->server, "/doc"), 2);
}

static void example_post_is_retried_with_one_key(void **state)
{
    ex_fx *f = *state;
    http_server_script(f->server, "/orders",
                       (const http_step[]){{.status = 502}, {.status = 201, .body = "made\n"}},
                       2);
    assert_int_equal(run_example(f, "/orders", "item=7"), 0);
    assert_string_equal(f->out, "made\n");
    assert_non_null(strstr(f->err, "Idempotency-Key: "));
    char a[64], b[64];
    assert_true(http_request_header(http_server_request(f->server, "/orders", 0),
                                    "Idempotency-Key", a, sizeof a));
    assert_true(http_request_header(http_server_request(f->server, "/orders", 1),
                                    "Idempotency-Key", b, sizeof b));
    assert_string_equal(a, b);
    assert_non_null(strstr(f->err, a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(example_get_retries_to_the_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(example_post_is_retried_with_one_key, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
