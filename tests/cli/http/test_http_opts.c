/*
 * test_http_opts.c — `resil http`'s option parser, in-process: what each
 * curl flag sets, how bundles split, and the values it refuses by name.
 * The run itself is tested end to end in tests/http (test_cli.c, and
 * test_curl_compat.c against curl).
 */
#include "http_opts.h"
#include "test.h"

#define PARSE(o, err, ...)                                                     \
    parse((o), (err), (char *[]){"http", __VA_ARGS__, NULL})

static int parse(http_opts *o, resil_err *err, char **argv)
{
    int argc = 0;
    while (argv[argc] != NULL)
        argc++;
    memset(err, 0, sizeof *err);
    return http_opts_parse(o, argc, argv, err);
}

static void bundled_flags_split_as_curl_reads_them(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-sSfLXPOST", "-ofile", "u"), 0);
    assert_true(o.silent && o.show_error && o.location);
    assert_string_equal(o.method, "POST");
    assert_int_equal(o.noutputs, 1);
    assert_string_equal(o.outputs[0], "file");
    http_opts_free(&o);
}

static void a_value_that_looks_like_a_bundle_is_left_whole(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-H", "-sS: x", "-d", "-si", "u"), 0);
    assert_string_equal(o.headers->data, "-sS: x");
    assert_string_equal(o.data, "-si");
    assert_false(o.silent);
    http_opts_free(&o);
}

static void retry_n_is_n_plus_one_attempts(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--retry", "5", "u"), 0);
    assert_int_equal(o.po.policy.max_attempts, 6);
    http_opts_free(&o);
}

static void retry_delay_is_a_constant_wait_without_jitter(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--retry-delay", "2.5", "u"), 0);
    assert_int_equal(o.po.policy.backoff.kind, RESIL_BACKOFF_CONSTANT);
    assert_int_equal(o.po.policy.backoff.jitter, RESIL_JITTER_NONE);
    assert_duration_equal(o.po.policy.backoff.base, RESIL_MS(2500));
    http_opts_free(&o);
}

static void max_time_is_the_attempt_timeout_and_retry_max_time_the_total(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-m", "5", "--retry-max-time", "60", "u"), 0);
    assert_duration_equal(o.po.attempt_timeout, RESIL_S(5));
    assert_duration_equal(o.po.policy.max_total, RESIL_S(60));
    http_opts_free(&o);
}

static void without_a_profile_there_is_no_attempt_or_total_timeout(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "u"), 0);
    assert_duration_equal(o.po.attempt_timeout, 0);
    assert_duration_equal(o.po.policy.max_total, 0);
    assert_duration_equal(o.stall_timeout, RESIL_S(30));
    assert_duration_equal(o.connect_timeout, RESIL_S(10));
    assert_int_equal(o.po.policy.max_attempts, 4);
    http_opts_free(&o);
}

static void a_total_timeout_cuts_the_profiles_attempt_timeout(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--total-timeout", "3s", "--profile", "standard", "u"), 0);
    assert_duration_equal(o.po.attempt_timeout, RESIL_S(3));
    assert_duration_equal(o.po.policy.max_total, RESIL_S(3));
    http_opts_free(&o);
}

static void an_attempt_timeout_lifts_the_profiles_total(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--profile", "read", "--attempt-timeout", "5s", "u"), 0);
    assert_duration_equal(o.po.attempt_timeout, RESIL_S(5));
    assert_duration_equal(o.po.policy.max_total, 0);
    http_opts_free(&o);
}

static void seconds_take_curls_form_a_duration_or_none(void **state)
{
    (void)state;
    static char *argv[] = {"t", NULL};
    args a;
    args_init(&a, "t", 1, argv);
    resil_err err;
    a.err = &err;
    resil_duration d;
    assert_int_equal(http_seconds_parse(&a, "-m", "2.5", &d), 0);
    assert_duration_equal(d, RESIL_MS(2500));
    assert_int_equal(http_seconds_parse(&a, "-m", ".25", &d), 0);
    assert_duration_equal(d, RESIL_MS(250));
    assert_int_equal(http_seconds_parse(&a, "-m", "250ms", &d), 0);
    assert_duration_equal(d, RESIL_MS(250));
    assert_int_equal(http_seconds_parse(&a, "-m", "none", &d), 0);
    assert_duration_equal(d, 0);
    assert_int_equal(http_seconds_parse(&a, "-m", "1e3", &d), RESIL_EINVAL);
    assert_string_equal(err.message, "t: -m must be seconds (such as 5 or 2.5), a duration "
                                     "such as 250ms, or 'none', got '1e3'");
}

static void urlencode_pieces_follow_curls_forms(void **state)
{
    (void)state;
    static char *argv[] = {"t", NULL};
    args a;
    args_init(&a, "t", 1, argv);
    char *p;
    size_t n;
    assert_int_equal(http_urlencode_piece(&a, "n=a b/ü", &p, &n), 0);
    assert_string_equal(p, "n=a+b%2F%C3%BC");
    free(p);
    assert_int_equal(http_urlencode_piece(&a, "=x&y", &p, &n), 0);
    assert_string_equal(p, "x%26y");
    free(p);
}

static void parallel_is_off_and_fifty_at_most_by_default(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "u"), 0);
    assert_false(o.parallel);
    assert_int_equal(o.parallel_max, 50);
    http_opts_free(&o);
}

static void z_bundles_and_parallel_max_takes_one_to_300(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-sZ", "--parallel-max", "300", "u"), 0);
    assert_true(o.parallel && o.silent);
    assert_int_equal(o.parallel_max, 300);
    http_opts_free(&o);
    assert_int_equal(PARSE(&o, &err, "--parallel", "--parallel-max", "1", "u"), 0);
    assert_int_equal(o.parallel_max, 1);
    http_opts_free(&o);
}

static void parallel_max_zero_and_301_are_refused_by_name(void **state)
{
    (void)state;
    const char *bad[] = {"0", "301", "", "2x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_opts o;
        resil_err err;
        assert_int_equal(PARSE(&o, &err, "-Z", "--parallel-max", (char *)bad[i], "u"),
                         RESIL_EINVAL);
        assert_non_null(strstr(err.message, "--parallel-max"));
        assert_non_null(strstr(err.message, "[1, 300]"));
        http_opts_free(&o);
    }
}

/* "http", then each of `n` URLs preceded by `option` (or alone when it is
 * NULL), then NULL: an argv for the limits. */
static char **urls_argv(int n, const char *option)
{
    char **argv = calloc((size_t)(2 * n + 2), sizeof *argv);
    assert_non_null(argv);
    int k = 0;
    argv[k++] = "http";
    for (int i = 0; i < n; i++) {
        if (option != NULL)
            argv[k++] = (char *)option;
        argv[k++] = "u/f";
    }
    return argv;
}

static void two_hundred_fifty_six_urls_are_taken(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    char **argv = urls_argv(256, NULL);
    assert_int_equal(parse(&o, &err, argv), 0);
    assert_int_equal(o.nurls, 256);
    http_opts_free(&o);
    free(argv);
}

static void two_hundred_fifty_six_url_options_are_taken(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    char **argv = urls_argv(256, "--url");
    assert_int_equal(parse(&o, &err, argv), 0);
    assert_int_equal(o.nurls, 256);
    http_opts_free(&o);
    free(argv);
}

/* 256 -O before 256 URLs: one output for each. */
static void two_hundred_fifty_six_outputs_are_taken(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    char **argv = calloc(2 * 256 + 2, sizeof *argv);
    assert_non_null(argv);
    argv[0] = "http";
    for (int i = 1; i <= 256; i++) {
        argv[i] = "-O";
        argv[256 + i] = "u/f";
    }
    assert_int_equal(parse(&o, &err, argv), 0);
    assert_int_equal(o.noutputs, 256);
    assert_int_equal(o.nurls, 256);
    http_opts_free(&o);
    free(argv);
}

static void output_dir_is_kept_and_must_not_be_empty(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--output-dir", "out", "-O", "u/f"), 0);
    assert_string_equal(o.output_dir, "out");
    http_opts_free(&o);
    assert_int_equal(PARSE(&o, &err, "--output-dir", "", "u"), RESIL_EINVAL);
    assert_non_null(strstr(err.message, "--output-dir"));
    http_opts_free(&o);
}

static void retry_after_max_takes_a_duration_and_refuses_the_rest_by_name(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--retry-after-max", "90s", "u"), 0);
    assert_true(o.retry_after_max_given);
    assert_duration_equal(o.retry_after_max, RESIL_S(90));
    http_opts_free(&o);
    /* 0 caps every hint at no wait at all */
    assert_int_equal(PARSE(&o, &err, "--retry-after-max", "0", "u"), 0);
    assert_duration_equal(o.retry_after_max, 0);
    http_opts_free(&o);
    assert_int_equal(PARSE(&o, &err, "--retry-after-max", "-5s", "u"), RESIL_EINVAL);
    assert_string_equal(err.message, "resil http: --retry-after-max must be a duration like "
                                     "250ms, 2s or 1m30s, got '-5s' (duration \"-5s\": must "
                                     "not be negative)");
    http_opts_free(&o);
    assert_int_equal(PARSE(&o, &err, "--retry-after-max", "soon", "u"), RESIL_EINVAL);
    assert_string_equal(err.message, "resil http: --retry-after-max must be a duration like "
                                     "250ms, 2s or 1m30s, got 'soon' (duration \"soon\": "
                                     "missing number before unit)");
    http_opts_free(&o);
}

static void tls_files_are_kept_and_must_not_be_empty(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--cacert", "ca.pem", "-E", "me.pem", "--key", "me.key",
                           "u"),
                     0);
    assert_string_equal(o.cacert, "ca.pem");
    assert_string_equal(o.cert, "me.pem");
    assert_string_equal(o.cert_key, "me.key");
    http_opts_free(&o);
    assert_int_equal(PARSE(&o, &err, "--cacert", "", "u"), RESIL_EINVAL);
    assert_non_null(strstr(err.message, "--cacert"));
    http_opts_free(&o);
    assert_int_equal(PARSE(&o, &err, "--key", "", "u"), RESIL_EINVAL);
    assert_non_null(strstr(err.message, "--key"));
    http_opts_free(&o);
}

/* A hedge goes to the URL's scheme, host and port: one libcurl cannot
 * read them from is refused with the option's name, before anything is
 * sent, rather than by the library's field when the client is made. */
static void a_hedge_to_url_without_a_readable_host_is_refused_by_name(void **state)
{
    (void)state;
    static const char *const bad[] = {" 5", "http://a b/", "http://h:99999", "http://h:port",
                                      "http://[::1", "http://h\r\nX: y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_opts o;
        resil_err err;
        char expected[256];
        snprintf(expected, sizeof expected,
                 "resil http: --hedge-to must be a URL such as https://eu.example.com, got '%s'",
                 bad[i]);
        assert_int_equal(PARSE(&o, &err, "--hedge-to", (char *)bad[i], "u"), RESIL_EINVAL);
        assert_string_equal(err.message, expected);
        http_opts_free(&o);
    }
}

/* With --hedge-to the URL is the route's first endpoint: the same rule,
 * said as the URL's. */
static void a_url_without_a_readable_host_is_refused_with_hedge_to(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--hedge-to", "http://b", "http://a b/"), RESIL_EINVAL);
    assert_string_equal(err.message, "resil http: with --hedge-to, each URL must be one such as "
                                     "https://api.example.com, got 'http://a b/'");
    http_opts_free(&o);
}

static void a_hedge_to_host_takes_curls_forms(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "--hedge-to", "eu.example.com:8443", "--hedge-to",
                           "https://[::1]/", "u"),
                     0);
    assert_int_equal(o.nhedge_to, 2);
    http_opts_free(&o);
}

/* Each of these goes out as a request header's value: a line break would
 * end the header and start one of the user's text, so it is refused. */
static void header_values_with_a_line_break_are_refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *option, *value, *message;
    } rows[] = {
        {"-H", "X-A: 1\r\nX-B: 2",
         "resil http: --header must be 'NAME: VALUE', 'NAME:' or 'NAME;' with NAME a header name, "
         "got 'X-A: 1\r\nX-B: 2'"},
        {"-A", "agent\nX-B: 2", "resil http: --user-agent must be one line of text, got "
                               "'agent\nX-B: 2'"},
        {"-e", "http://a/\r\nX-B: 2", "resil http: --referer must be one line of text, got "
                                     "'http://a/\r\nX-B: 2'"},
        {"--referer", "http://a/\rX-B: 2", "resil http: --referer must be one line of text, "
                                           "got 'http://a/\rX-B: 2'"},
        {"-b", "a=1\r\nX-B: 2", "resil http: --cookie must be NAME=VALUE[; NAME=VALUE] on one "
                                "line, or a file name, got 'a=1\r\nX-B: 2'"},
        {"--cookie", "a=1;\nb=2", "resil http: --cookie must be NAME=VALUE[; NAME=VALUE] on "
                                  "one line, or a file name, got 'a=1;\nb=2'"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        http_opts o;
        resil_err err;
        assert_int_equal(PARSE(&o, &err, (char *)rows[i].option, (char *)rows[i].value, "u"),
                         RESIL_EINVAL);
        assert_string_equal(err.message, rows[i].message);
        http_opts_free(&o);
    }
}

/* A header's name is an HTTP token: one with a space, a slash or a
 * control character would go out as a line no server reads as a header. */
static void header_names_that_are_not_tokens_are_refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *option, *value, *message;
    } rows[] = {
        {"-H", "X A: 1",
         "resil http: --header must be 'NAME: VALUE', 'NAME:' or 'NAME;' with NAME a header name, "
         "got 'X A: 1'"},
        {"-H", "X/A;", "resil http: --header must be 'NAME: VALUE', 'NAME:' or 'NAME;' with NAME "
                       "a header name, got 'X/A;'"},
        {"-H", ": 1", "resil http: --header must be 'NAME: VALUE', 'NAME:' or 'NAME;' with NAME "
                      "a header name, got ': 1'"},
        {"--retry-after-header", "X/Wait",
         "resil http: --retry-after-header must be a header name (letters, digits and "
         "!#$%&'*+-.^_`|~), got 'X/Wait'"},
        {"--retry-after-header", "",
         "resil http: --retry-after-header must be a header name (letters, digits and "
         "!#$%&'*+-.^_`|~), got ''"},
        {"--retry-after-header", "X-Wait\x7f",
         "resil http: --retry-after-header must be a header name (letters, digits and "
         "!#$%&'*+-.^_`|~), got 'X-Wait\x7f'"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        http_opts o;
        resil_err err;
        assert_int_equal(PARSE(&o, &err, (char *)rows[i].option, (char *)rows[i].value, "u"),
                         RESIL_EINVAL);
        assert_string_equal(err.message, rows[i].message);
        http_opts_free(&o);
    }
}

static void header_names_take_every_token_character(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-H", "X-a.b_c~1!#$%&'*+^`|: v", "--retry-after-header",
                           "X-a.b_c~1!#$%&'*+^`|", "u"),
                     0);
    assert_int_equal(o.nhint, 1);
    http_opts_free(&o);
}

/* A cookie value without '=' names a file, whose name may hold any byte. */
static void a_cookie_file_name_may_hold_a_line_break(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-b", "jar\nfile", "u"), 0);
    assert_string_equal(o.cookie_file, "jar\nfile");
    http_opts_free(&o);
}

static void unknown_write_out_variable_is_refused_by_name(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-w", "%{http_code} %{http_cod}", "u"), RESIL_EINVAL);
    assert_string_equal(err.message, "resil http: --write-out: unknown variable '%{http_cod}'");
    http_opts_free(&o);
}

static void a_bundle_with_an_unknown_letter_is_refused_whole(void **state)
{
    (void)state;
    http_opts o;
    resil_err err;
    assert_int_equal(PARSE(&o, &err, "-sq", "u"), RESIL_EINVAL);
    assert_string_equal(err.message, "resil http: unknown option '-sq' (see resil http --help)");
    http_opts_free(&o);
}

/* `text` names `flag` as a word: "--retry" is not "--retry-delay". */
static bool names_flag(const char *text, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = strstr(text, flag); p != NULL; p = strstr(p + 1, flag)) {
        char before = p == text ? ' ' : p[-1];
        char after = p[n];
        if (strchr(" ,(\n\"", before) != NULL && strchr(" ,)\n\"", after) != NULL)
            return true;
    }
    return false;
}

static char *file_text(FILE *f)
{
    static char buf[1 << 16];
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

/* Each row of the option tables, by both its names, in `text`. */
static void assert_every_row_named(const char *text, const char *what)
{
    for (int t = 0; t < 2; t++) {
        size_t len;
        const http_option *rows = http_options_table(t, &len);
        for (size_t i = 0; i < len; i++) {
            if (!names_flag(text, rows[i].long_name))
                fail_msg("%s does not name %s", what, rows[i].long_name);
            if (rows[i].short_name != NULL && !names_flag(text, rows[i].short_name))
                fail_msg("%s does not name %s", what, rows[i].short_name);
        }
    }
}

static void the_help_names_every_option(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    http_opts_help(f);
    assert_every_row_named(file_text(f), "resil http --help");
    fclose(f);
}

/* The completions the build generated (scripts/gen-man.sh), read whole.
 * A sanitizer build generates none (cmake/docs.cmake): skipped there. */
static void assert_completion_names_every_option(const char *file)
{
#ifndef RESIL_WITH_DOCS
    (void)file;
    skip();
#else
    const char *dir = getenv("RESIL_BUILD_DIR");
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/doc/completion/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("no %s: the build generates it with the tool", path);
    char *text = file_text(f);
    char *arm = strstr(text, "\n    http)"); /* the http case of either shell */
    assert_non_null(arm);
    *strchr(arm + 1, '\n') = '\0';
    assert_every_row_named(arm, path);
    fclose(f);
#endif
}

static void the_bash_completion_offers_every_option(void **state)
{
    (void)state;
    assert_completion_names_every_option("resil.bash");
}

static void the_zsh_completion_offers_every_option(void **state)
{
    (void)state;
    assert_completion_names_every_option("_resil");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bundled_flags_split_as_curl_reads_them),
        cmocka_unit_test(two_hundred_fifty_six_urls_are_taken),
        cmocka_unit_test(two_hundred_fifty_six_url_options_are_taken),
        cmocka_unit_test(two_hundred_fifty_six_outputs_are_taken),
        cmocka_unit_test(a_value_that_looks_like_a_bundle_is_left_whole),
        cmocka_unit_test(retry_n_is_n_plus_one_attempts),
        cmocka_unit_test(retry_delay_is_a_constant_wait_without_jitter),
        cmocka_unit_test(max_time_is_the_attempt_timeout_and_retry_max_time_the_total),
        cmocka_unit_test(without_a_profile_there_is_no_attempt_or_total_timeout),
        cmocka_unit_test(a_total_timeout_cuts_the_profiles_attempt_timeout),
        cmocka_unit_test(an_attempt_timeout_lifts_the_profiles_total),
        cmocka_unit_test(seconds_take_curls_form_a_duration_or_none),
        cmocka_unit_test(urlencode_pieces_follow_curls_forms),
        cmocka_unit_test(parallel_is_off_and_fifty_at_most_by_default),
        cmocka_unit_test(z_bundles_and_parallel_max_takes_one_to_300),
        cmocka_unit_test(parallel_max_zero_and_301_are_refused_by_name),
        cmocka_unit_test(output_dir_is_kept_and_must_not_be_empty),
        cmocka_unit_test(retry_after_max_takes_a_duration_and_refuses_the_rest_by_name),
        cmocka_unit_test(tls_files_are_kept_and_must_not_be_empty),
        cmocka_unit_test(unknown_write_out_variable_is_refused_by_name),
        cmocka_unit_test(header_values_with_a_line_break_are_refused_by_name),
        cmocka_unit_test(header_names_that_are_not_tokens_are_refused_by_name),
        cmocka_unit_test(header_names_take_every_token_character),
        cmocka_unit_test(a_hedge_to_url_without_a_readable_host_is_refused_by_name),
        cmocka_unit_test(a_url_without_a_readable_host_is_refused_with_hedge_to),
        cmocka_unit_test(a_hedge_to_host_takes_curls_forms),
        cmocka_unit_test(a_cookie_file_name_may_hold_a_line_break),
        cmocka_unit_test(a_bundle_with_an_unknown_letter_is_refused_whole),
        cmocka_unit_test(the_help_names_every_option),
        cmocka_unit_test(the_bash_completion_offers_every_option),
        cmocka_unit_test(the_zsh_completion_offers_every_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
