/*
 * test_cli_demo.c — `resil demo retry-pattern` reproduces the Retry Pattern
 * article's published outputs byte for byte, and any other seed changes only
 * the jittered waits.
 */
#include <ctype.h>

#include "cli_harness.h"

static char *golden(const char *name)
{
    const char *src = getenv("RESIL_SOURCE_DIR");
    assert_non_null(src);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/tests/golden", src);
    char *text = cli_read(dir, name);
    assert_non_null(text);
    return text;
}

static void assert_prints_golden(void **state, const char *golden_name,
                                 const char *rng, const char *seed)
{
    cli_result r;
    if (rng == NULL)
        cli_run(&r, *state, NULL, "demo", "retry-pattern", NULL);
    else
        cli_run(&r, *state, NULL, "demo", "retry-pattern", "--rng", rng, "--seed", seed,
                NULL);
    char *expected = golden(golden_name);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, expected);
    assert_string_equal(r.err, "");
    free(expected);
    cli_result_free(&r);
}

static void basic_matches_the_articles_basic_example(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "retry-pattern", "--basic", NULL);
    char *expected = golden("retry-pattern-basic.txt");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, expected);
    assert_string_equal(r.err, "");
    free(expected);
    cli_result_free(&r);
}

static void basic_refuses_a_seed(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "retry-pattern", "--basic", "--seed", "7", NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err,
                        "resil demo: --basic draws no random number: it takes no --rng or "
                        "--seed\n");
    cli_result_free(&r);
}

static void default_is_the_csharp_example_with_seed_42(void **state)
{
    assert_prints_golden(state, "retry-pattern-dotnet-seed42.txt", NULL, NULL);
}

static void dotnet_seed_42_matches_the_article(void **state)
{
    assert_prints_golden(state, "retry-pattern-dotnet-seed42.txt", "dotnet", "42");
}

static void mulberry32_seed_42_matches_the_article(void **state)
{
    assert_prints_golden(state, "retry-pattern-mulberry32-seed42.txt", "mulberry32", "42");
}

/*
 * Replace each number that depends on the draws — the seed in the header and
 * every backoff wait ("wait 66 ms (backoff)") — by '#', in place. Retry-After
 * waits are not draws and stay.
 */
static void mask_draws(char *text)
{
    char *out = text;
    for (const char *line = text; *line != '\0';) {
        size_t len = strcspn(line, "\n");
        const char *wait = strstr(line, "wait ");
        const char *backoff = strstr(line, "(backoff)");
        const char *digits = strncmp(line, "jitter seed ", 12) == 0 ? line + 12
                             : wait != NULL && backoff != NULL &&
                                       backoff < line + len && wait < backoff
                                 ? wait + 5
                                 : NULL;
        const char *end = line + len + (line[len] == '\n');
        for (const char *p = line; p < end;) {
            if (p == digits) {
                while (isdigit((unsigned char)*p))
                    p++;
                *out++ = '#'; /* after the digits are passed: out may be p */
            } else {
                *out++ = *p++;
            }
        }
        line = end;
    }
    *out = '\0';
}

static void other_seed_changes_only_the_waits(void **state, const char *golden_name,
                                              const char *rng)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "retry-pattern", "--rng", rng, "--seed", "7", NULL);
    assert_int_equal(r.status, 0);
    char *expected = golden(golden_name);
    assert_string_not_equal(r.out, expected);
    assert_true(strncmp(r.out, "jitter seed 7\n", 14) == 0);
    mask_draws(r.out);
    mask_draws(expected);
    assert_string_equal(r.out, expected);
    free(expected);
    cli_result_free(&r);
}

static void dotnet_seed_7_differs_only_in_the_waits(void **state)
{
    other_seed_changes_only_the_waits(state, "retry-pattern-dotnet-seed42.txt", "dotnet");
}

static void mulberry32_seed_7_differs_only_in_the_waits(void **state)
{
    other_seed_changes_only_the_waits(state, "retry-pattern-mulberry32-seed42.txt",
                                      "mulberry32");
}

static void same_seed_prints_the_same_output(void **state)
{
    cli_result a, b;
    cli_run(&a, *state, NULL, "demo", "retry-pattern", "--seed", "12345", NULL);
    cli_run(&b, *state, NULL, "demo", "retry-pattern", "--seed", "12345", NULL);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.out, b.out);
    cli_result_free(&a);
    cli_result_free(&b);
}

static void assert_demo_rejects(void **state, const char *option, const char *value,
                                const char *rng, const char *message)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "retry-pattern", "--rng", rng, option, value, NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.out, "");
    if (strstr(r.err, message) == NULL)
        fail_msg("expected \"%s\" in:\n%s", message, r.err);
    cli_result_free(&r);
}

static void bad_rng_is_rejected_by_name(void **state)
{
    assert_demo_rejects(state, "--rng", "xorshift", "dotnet",
                        "resil demo: --rng must be one of dotnet, mulberry32, got 'xorshift'");
}

static void bad_seed_is_rejected_by_name(void **state)
{
    assert_demo_rejects(state, "--seed", "x", "dotnet",
                        "resil demo: --seed must be a whole number in [0, 2147483647], "
                        "got 'x'");
    assert_demo_rejects(state, "--seed", "-3", "mulberry32",
                        "resil demo: --seed must be a whole number in [0, 4294967295], "
                        "got '-3'");
}

static void seed_range_follows_the_generator(void **state)
{
    assert_demo_rejects(state, "--seed", "2147483648", "dotnet",
                        "--seed must be a whole number in [0, 2147483647], "
                        "got '2147483648'");
    assert_demo_rejects(state, "--seed", "4294967296", "mulberry32",
                        "--seed must be a whole number in [0, 4294967295], "
                        "got '4294967296'");
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "retry-pattern", "--rng", "mulberry32", "--seed",
            "4294967295", NULL);
    assert_int_equal(r.status, 0);
    cli_result_free(&r);
}

static void unknown_demo_is_rejected(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "circuit-breaker", NULL);
    assert_int_equal(r.status, 125);
    assert_non_null(strstr(r.err, "resil demo: unknown demo 'circuit-breaker' "
                                  "(available: retry-pattern)"));
    cli_result_free(&r);
}

static void unknown_option_is_rejected(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "retry-pattern", "--fast", NULL);
    assert_int_equal(r.status, 125);
    assert_non_null(strstr(r.err, "resil demo: unknown option '--fast'"));
    cli_result_free(&r);
}

static void help_describes_the_options(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "demo", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--rng"));
    assert_non_null(strstr(r.out, "--seed"));
    cli_result_free(&r);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, cli_setup, cli_teardown)
    const struct CMUnitTest tests[] = {
        T(default_is_the_csharp_example_with_seed_42),
        T(basic_matches_the_articles_basic_example),
        T(basic_refuses_a_seed),
        T(dotnet_seed_42_matches_the_article),
        T(mulberry32_seed_42_matches_the_article),
        T(dotnet_seed_7_differs_only_in_the_waits),
        T(mulberry32_seed_7_differs_only_in_the_waits),
        T(same_seed_prints_the_same_output),
        T(bad_rng_is_rejected_by_name),
        T(bad_seed_is_rejected_by_name),
        T(seed_range_follows_the_generator),
        T(unknown_demo_is_rejected),
        T(unknown_option_is_rejected),
        T(help_describes_the_options),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
