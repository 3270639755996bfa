/*
 * test_example_tracing.c — examples/tracing.c prints the trace of a
 * retried call that docs/telemetry.md shows, byte for byte, so the page
 * cannot drift from what the tracer does.
 */
#include <sys/wait.h>

#include "test.h"

static char *read_all(FILE *f)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - 1 - len, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    return buf;
}

static void the_tracing_example_prints_what_the_docs_show(void **state)
{
    (void)state;
    const char *example = test_build_path("examples/example_tracing");
    assert_non_null(example);
    FILE *p = popen(example, "r");
    assert_non_null(p);
    char *out = read_all(p);
    int status = pclose(p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(strstr(out, "\n  `- attempt 3"));

    const char *src = getenv("RESIL_SOURCE_DIR");
    assert_non_null(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/telemetry.md", src);
    FILE *doc = fopen(path, "r");
    assert_non_null(doc);
    char *page = read_all(doc);
    fclose(doc);
    if (strstr(page, out) == NULL)
        fail_msg("docs/telemetry.md does not show the example's output:\n%s", out);
    free(page);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_tracing_example_prints_what_the_docs_show),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
