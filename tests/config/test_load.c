/*
 * test_load.c — loading a document: what is read, what is ignored, and how
 * every error is reported (path, line:column, message, all of them, in
 * document order), and that a failing document yields nothing.
 */
#include "cfgtest.h"

static void excalibur_appsettings_shape_loads(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{\n"
                               "  'Resilience': {\n"
                               "    'Timeouts': {\n"
                               "      'DefaultTimeout': '00:00:30',\n"
                               "      'OperationTimeouts': {\n"
                               "        'database-query': '00:00:10',\n"
                               "        'external-api': '00:01:00'\n"
                               "      }\n"
                               "    },\n"
                               "    'GracefulDegradation': {\n"
                               "      'EnableAutoAdjustment': true,\n"
                               "      'HealthCheckInterval': '00:00:30',\n"
                               "      'ErrorRateWindow': '00:01:00',\n"
                               "      'ErrorRateWindowBuckets': 6\n"
                               "    },\n"
                               "    'DistributedCircuitBreaker': {\n"
                               "      'Enabled': false,\n"
                               "      'SyncInterval': '00:00:05',\n"
                               "      'FailureRatio': 0.5,\n"
                               "      'MinimumThroughput': 10,\n"
                               "      'SamplingDuration': '00:00:30',\n"
                               "      'BreakDuration': '00:00:30',\n"
                               "      'ConsecutiveFailureThreshold': 5,\n"
                               "      'SuccessThresholdToClose': 3\n"
                               "    }\n"
                               "  }\n"
                               "}\n");
    assert_duration_equal(resil_config_timeout(c, NULL), RESIL_S(30));
    assert_duration_equal(resil_config_timeout(c, "database-query"), RESIL_S(10));
    assert_duration_equal(resil_config_timeout(c, "external-api"), RESIL_S(60));
    assert_duration_equal(resil_config_timeout(c, "unknown"), RESIL_S(30));
    resil_degrade_opts d;
    assert_true(resil_config_degrade_get(c, &d));
    assert_duration_equal(d.check_interval, RESIL_S(30));
    assert_duration_equal(d.error_window, RESIL_S(60));
    resil_config_distributed x;
    assert_true(resil_config_distributed_get(c, &x));
    assert_false(x.enabled);
    assert_duration_equal(x.sync_interval, RESIL_S(5));
    assert_int_equal(x.breaker.success_threshold, 3);
    resil_config_free(c);
}

static void sections_outside_resilience_are_ignored(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Logging': {'LogLevel': {'Default': 'Information'}},"
                               " 'AllowedHosts': '*', 'Resilience': {}}");
    assert_int_equal(resil_config_count(c, RESIL_CONFIG_RETRY), 0);
    resil_config_free(c);
}

static void a_document_without_resilience_is_refused(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Logging': {}}"),
                        "1:1: the document has no Resilience section\n");
}

static void a_misspelt_resilience_section_is_named(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilence': {}}"),
                        "1:1: the document has no Resilience section (is \"Resilence\" a "
                        "typo?)\n");
}

static void the_document_must_be_an_object(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("[1, 2]"), "1:1: the document must be a JSON object "
                                              "with a Resilience section, got an array\n");
}

static void the_resilience_section_must_be_an_object(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': ['Retry']}"),
                        "Resilience at 1:16: must be an object, got an array\n");
}

/* Keys match without regard to case, so two spellings of one section are
 * one section given twice; the second is named by its path. */
static void a_second_resilience_section_is_named_by_its_path(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {}, 'resilience': {}}"),
                        "Resilience at 1:20: duplicate key: Resilience is already given at "
                        "1:2\n");
}

static void a_second_resilience_section_is_reported_in_document_order(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'r': {'Bad': 1}}},"
                                   " 'resilience': {}}"),
                        "Resilience.Retry.r.Bad at 1:33: unknown key\n"
                        "Resilience at 1:46: duplicate key: Resilience is already given at "
                        "1:2\n");
}

static void a_section_given_twice_is_a_duplicate(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {}, 'RETRY': {}}}"),
                        "Resilience.Retry at 1:30: duplicate key: Retry is already given at "
                        "1:17\n");
}

static void an_unknown_section_far_from_all_gets_no_suggestion(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Zzzzzzzz': {}}}"),
                        "Resilience.Zzzzzzzz at 1:17: unknown key\n");
}

static void a_syntax_error_has_jansson_position(void **state)
{
    (void)state;
    int rc;
    const char *out = cfg_errors_rc("{\n  'Resilience': }\n", &rc);
    assert_int_equal(rc, RESIL_ESYNTAX);
    assert_string_equal(out, "2:17: invalid JSON: unexpected token near '}'\n");
}

static void empty_text_is_a_syntax_error(void **state)
{
    (void)state;
    int rc;
    const char *out = cfg_errors_rc("", &rc);
    assert_int_equal(rc, RESIL_ESYNTAX);
    assert_string_equal(out, "1:1: invalid JSON: unexpected token near end of file\n");
}

/* No text at all, given as NULL and no length, is the empty text. */
static void no_text_is_a_syntax_error(void **state)
{
    (void)state;
    resil_config *c = (resil_config *)1;
    resil_config_diags d = {0};
    assert_int_equal(resil_config_parse(NULL, 0, &c, &d), RESIL_ESYNTAX);
    assert_null(c);
    assert_int_equal(d.len, 1);
    assert_string_equal(d.items[0].message, "invalid JSON: unexpected token near end of file");
    resil_config_diags_free(&d);
}

static void trailing_garbage_is_a_syntax_error(void **state)
{
    (void)state;
    int rc;
    cfg_errors_rc("{'Resilience': {}} x", &rc);
    assert_int_equal(rc, RESIL_ESYNTAX);
}

static void a_byte_order_mark_is_skipped(void **state)
{
    (void)state;
    const char *text = "\xEF\xBB\xBF{\"Resilience\": {\"Retry\": {\"a\": {\"Bogus\": 1}}}}";
    resil_config *c = NULL;
    resil_config_diags d = {0};
    assert_int_equal(resil_config_parse(text, strlen(text), &c, &d), RESIL_EINVAL);
    assert_int_equal(d.len, 1);
    assert_int_equal(d.items[0].line, 1);
    assert_int_equal(d.items[0].column, 33); /* counted from after the mark */
    resil_config_diags_free(&d);
}

static void keys_match_without_regard_to_case(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'RESILIENCE': {'retry': {'A': {'maxretryattempts': 5,"
                               " 'BASEDELAY': '2s'}}}}");
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "a", &r), 0);
    assert_int_equal(r.policy.max_attempts, 6);
    assert_duration_equal(r.policy.backoff.base, RESIL_S(2));
    assert_string_equal(resil_config_name_at(c, RESIL_CONFIG_RETRY, 0), "A");
    resil_config_free(c);
}

static void an_unknown_key_suggests_the_nearest(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'orders': {\n"
                                   "  'MaxRetryAttempt': 3}}}}"),
                        "Resilience.Retry.orders.MaxRetryAttempt at 2:3: unknown key (did you "
                        "mean MaxRetryAttempts?)\n");
}

static void an_unknown_key_far_from_all_gets_no_suggestion(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Bulkheads': {'db': {'Colour': 'blue'}}}}"),
                        "Resilience.Bulkheads.db.Colour at 1:38: unknown key\n");
}

static void an_unknown_section_suggests_the_nearest(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'CircuitBreaker': {}}}"),
                        "Resilience.CircuitBreaker at 1:17: unknown key (did you mean "
                        "CircuitBreakers?)\n");
}

static void a_seed_key_resil_names_otherwise_is_explained(void **state)
{
    (void)state;
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'x': "
                                          "{'MaxAttempts': 5}}}}"),
                        "unknown key: say MaxRetryAttempts, which counts the retries after "
                        "the first attempt");
}

static void keys_differing_only_in_case_are_duplicates(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'a': {\n"
                                   "  'BaseDelay': '1s',\n"
                                   "  'basedelay': '2s'}}}}"),
                        "Resilience.Retry.a.BaseDelay at 3:3: duplicate key: BaseDelay is "
                        "already given at 2:3\n");
}

static void an_exact_duplicate_key_is_reported_too(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'a': {\n"
                                   "  'BaseDelay': '1s',\n"
                                   "  'BaseDelay': '2s'}}}}"),
                        "Resilience.Retry.a.BaseDelay at 3:3: duplicate key: BaseDelay is "
                        "already given at 2:3\n");
}

static void an_alias_beside_its_key_is_a_duplicate(void **state)
{
    (void)state;
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'a': "
                                          "{'BaseDelay': '1s', 'Delay': '2s'}}}}"),
                        "duplicate key: BaseDelay is already given at 1:33");
}

static void names_differing_only_in_case_are_duplicates(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {\n"
                                   "  'orders': {},\n"
                                   "  'Orders': {}}}}"),
                        "Resilience.Retry.Orders at 3:3: duplicate name: orders is already "
                        "defined at 2:3\n");
}

static void a_value_error_points_at_the_value(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{\n"
                                   "  'Resilience': {\n"
                                   "    'CircuitBreakers': {\n"
                                   "      'orders': {\n"
                                   "        'BreakDuration': '5s',\n"
                                   "        'SamplingDuration': '30s',\n"
                                   "        'MinimumThroughput': 20,\n"
                                   "        'BreakGrowth': 1,\n"
                                   "        'SlowCallRatio': 1,\n"
                                   "        'HalfOpenProbes': 1,\n"
                                   "        'FailureRatio': 1.5\n"
                                   "      }\n"
                                   "    }\n"
                                   "  }\n"
                                   "}\n"),
                        "Resilience.CircuitBreakers.orders.FailureRatio at 11:25: must be in "
                        "(0,1], got 1.5\n");
}

static void columns_count_characters_not_bytes(void **state)
{
    (void)state;
    /* "é" and "→" are one column each, as in jansson's own positions. */
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'café→': {'Factor': 0}}}}"),
                        "Resilience.Retry.café→.Factor at 1:47: must be >= 1, got 0\n");
}

static void every_error_is_collected_in_document_order(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {\n"
                                   "  'Pipelines': {'p': ['Retry:nope']},\n"
                                   "  'Retry': {'a': {'Factor': 0, 'Jitter': 'some'}},\n"
                                   "  'Bulkheads': {'b': {'MaxConcurrency': 0}}}}"),
                        "Resilience.Pipelines.p[0] at 2:23: no Retry named \"nope\" in "
                        "Resilience.Retry\n"
                        "Resilience.Retry.a.Factor at 3:29: must be >= 1, got 0\n"
                        "Resilience.Retry.a.Jitter at 3:42: must be None, Full, Equal, "
                        "Decorrelated, Proportional or Polly, got \"some\" (did you mean "
                        "None?)\n"
                        "Resilience.Bulkheads.b.MaxConcurrency at 4:41: must be a whole number "
                        ">= 1, got 0\n");
}

static void a_failing_document_yields_no_config(void **state)
{
    (void)state;
    const char *text = cfg_json("{'Resilience': {'Retry': {'a': {'Factor': 0}}}}");
    resil_config *c = (resil_config *)&c;
    assert_int_equal(resil_config_parse(text, strlen(text), &c, NULL), RESIL_EINVAL);
    assert_null(c);
}

static void errors_beyond_the_cap_are_counted(void **state)
{
    (void)state;
    char doc[16384];
    size_t n = (size_t)snprintf(doc, sizeof doc, "{'Resilience': {'Bulkheads': {");
    for (int i = 0; i < 150; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n, "%s'b%d': {'MaxQueueLength': -1}",
                              i ? ", " : "", i);
    snprintf(doc + n, sizeof doc - n, "}}}");
    const char *text = cfg_json(doc);
    resil_config *c;
    resil_config_diags d = {0};
    assert_int_equal(resil_config_parse(text, strlen(text), &c, &d), RESIL_EINVAL);
    assert_int_equal(d.len, RESIL_CONFIG_DIAG_KEEP);
    assert_int_equal(d.dropped, 50);
    char out[64];
    resil_config_diags_write(&d, RESIL_CONFIG_TEXT, NULL, 0);
    size_t need = resil_config_diags_write(&d, RESIL_CONFIG_TEXT, out, sizeof out);
    assert_true(need > sizeof out);
    assert_int_equal(strlen(out), sizeof out - 1);
    resil_config_diags_free(&d);
}

static void numbers_and_booleans_may_be_strings_as_in_dotnet(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'CircuitBreakers': {'a': {"
                               "'FailureRatio': '0.25', 'MinimumThroughput': '20'}},"
                               " 'Bulkheads': {'b': {'AllowQueueing': 'False'}}}}");
    resil_breaker_opts o;
    assert_int_equal(resil_config_breaker_get(c, "a", &o), 0);
    assert_near(o.failure_ratio, 0.25, 0);
    assert_int_equal(o.minimum_throughput, 20);
    resil_bulkhead_opts b;
    assert_int_equal(resil_config_bulkhead_get(c, "b", &b), 0);
    assert_false(b.queue);
    resil_config_free(c);
}

static void escaped_keys_are_decoded(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'\\u00e9t\\u00e9': "
                               "{'Max\\u0052etryAttempts': 1}}}}");
    resil_config_retry r;
    assert_int_equal(resil_config_retry_get(c, "\xC3\xA9t\xC3\xA9", &r), 0);
    assert_int_equal(r.policy.max_attempts, 2);
    resil_config_free(c);
}

static void escaped_values_are_decoded(void **state)
{
    (void)state;
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'a': {'BaseDelay': '\\u0033\\u0030s',"
                               " 'Jitter': '\\u0045qual'}}}}");
    resil_config_retry r;
    resil_config_retry_get(c, "a", &r);
    assert_duration_equal(r.policy.backoff.base, RESIL_S(30));
    assert_int_equal(r.policy.backoff.jitter, RESIL_JITTER_EQUAL);
    resil_config_free(c);
}

/* What a document spells is quoted in messages and paths, but a control
 * character there would break the one-line form (a newline starts a false
 * diagnostic): each is shown as '?'. */
static void control_characters_in_names_are_shown_as_question_marks(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': {'r': {'Bad\\nKey': 1}},\n"
                                   " 'Pipelines': {'p': ['Retry:a\\nb\\u001b']}}}"),
                        "Resilience.Retry.r.Bad?Key at 1:33: unknown key\n"
                        "Resilience.Pipelines.p[0] at 2:22: no Retry named \"a?b?\" in "
                        "Resilience.Retry\n");
}

/* A key longer than a diagnostic's path holds is cut at the path's end. */
static void a_path_past_its_capacity_is_cut_at_its_end(void **state)
{
    (void)state;
    char doc[1024], want[RESIL_CONFIG_PATH_MAX];
    snprintf(doc, sizeof doc, "{'Resilience': {'Retry': {'r': {'%0300d': 1}}}}", 0);
    size_t n = (size_t)snprintf(want, sizeof want, "Resilience.Retry.r.");
    memset(want + n, '0', sizeof want - 1 - n);
    want[sizeof want - 1] = '\0';
    assert_string_equal(cfg_first_path(doc), want);
    assert_string_equal(cfg_first_message(doc), "unknown key");
}

static void deep_nesting_is_read_or_refused_without_harm(void **state)
{
    (void)state;
    static char doc[8192];
    size_t n = (size_t)snprintf(doc, sizeof doc, "{'Logging': ");
    for (int i = 0; i < 1000; i++)
        doc[n++] = '[';
    for (int i = 0; i < 1000; i++)
        doc[n++] = ']';
    snprintf(doc + n, sizeof doc - n, ", 'Resilience': {'Retry': {'a': {'Factor': [[[1]]]}}}}");
    assert_string_equal(cfg_first_message(doc), "must be >= 1, got an array");
}

static void a_name_must_be_short_and_printable(void **state)
{
    (void)state;
    char doc[256];
    snprintf(doc, sizeof doc, "{'Resilience': {'Retry': {'%064d': {}}}}", 0);
    assert_string_equal(cfg_first_message(doc), "a name must be 1 to 63 bytes, got 64");
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'': {}}}}"),
                        "a name must be 1 to 63 bytes, got 0");
    assert_string_equal(cfg_first_message("{'Resilience': {'Retry': {'a\\tb': {}}}}"),
                        "a name must not contain control characters");
}

static void a_section_must_be_an_object(void **state)
{
    (void)state;
    assert_string_equal(cfg_errors("{'Resilience': {'Retry': [], 'Timeouts': 3}}"),
                        "Resilience.Retry at 1:26: must be an object, got an array\n"
                        "Resilience.Timeouts at 1:42: must be an object, got 3\n");
}

static char *write_temp(const char *dir, const char *name, const char *text)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void a_file_loads_like_text(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char *path = write_temp(dir, "ok.json", cfg_json("{'Resilience': {'Retry': {'a': {}}}}"));
    resil_config *c;
    assert_int_equal(resil_config_load_file(path, &c, NULL), 0);
    assert_int_equal(resil_config_count(c, RESIL_CONFIG_RETRY), 1);
    resil_config_free(c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* A file of `pad` spaces followed by `json`. */
static char *write_padded(const char *dir, const char *name, size_t pad, const char *json)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputs(json, f);
    fclose(f);
    return path;
}

static void a_file_larger_than_the_first_buffer_loads_whole(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char *path = write_padded(dir, "big.json", 100000, "{\"Resilience\": {\"Retry\": {\"a\": {}}}}");
    resil_config *c;
    assert_int_equal(resil_config_load_file(path, &c, NULL), 0);
    assert_int_equal(resil_config_count(c, RESIL_CONFIG_RETRY), 1);
    resil_config_free(c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

static void a_file_over_16_mib_is_refused_naming_the_limit(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char *path = write_padded(dir, "huge.json", (16u << 20) - 1, "{}");
    resil_config *c;
    resil_config_diags d = {0};
    assert_int_equal(resil_config_load_file(path, &c, &d), RESIL_EIO);
    assert_null(c);
    assert_int_equal(d.len, 1);
    char line[1024];
    resil_config_diag_format(&d.items[0], line, sizeof line);
    assert_non_null(strstr(line, "huge.json: larger than 16 MiB"));
    resil_config_diags_free(&d);
    free(path);
    test_rmtree(dir);
    free(dir);
}

static void a_missing_file_is_an_io_error_naming_it(void **state)
{
    (void)state;
    resil_config *c;
    resil_config_diags d = {0};
    assert_int_equal(resil_config_load_file("/nonexistent/resil.json", &c, &d), RESIL_EIO);
    assert_null(c);
    assert_int_equal(d.len, 1);
    char line[512];
    resil_config_diag_format(&d.items[0], line, sizeof line);
    assert_string_equal(line, "/nonexistent/resil.json: cannot open: No such file or directory");
    resil_config_diags_free(&d);
}

static void diagnostics_write_as_json(void **state)
{
    (void)state;
    const char *text = cfg_json("{'Resilience': {'Retry': {'a\\\"b': {'Factor': 0}}}}");
    resil_config *c;
    resil_config_diags d = {0};
    assert_int_equal(resil_config_parse(text, strlen(text), &c, &d), RESIL_EINVAL);
    char out[512];
    resil_config_diags_write(&d, RESIL_CONFIG_JSON, out, sizeof out);
    assert_string_equal(out, "{\"errors\":[{\"path\":\"Resilience.Retry.a\\\"b.Factor\","
                             "\"line\":1,\"column\":46,\"message\":\"must be >= 1, got 0\"}],"
                             "\"more\":0}\n");
    resil_config_diags_free(&d);
}

static void null_arguments_are_refused(void **state)
{
    (void)state;
    resil_config *c;
    assert_int_equal(resil_config_parse("{}", 2, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_config_parse(NULL, 2, &c, NULL), RESIL_EINVAL);
    assert_int_equal(resil_config_load_file(NULL, &c, NULL), RESIL_EINVAL);
    resil_config_free(NULL);
    resil_config_diags_free(NULL);
    assert_int_equal(resil_config_count(NULL, RESIL_CONFIG_RETRY), 0);
    assert_null(resil_config_name_at(NULL, RESIL_CONFIG_RETRY, 0));
}

/* Each getter refuses a NULL config or a NULL out with RESIL_EINVAL. */
#define GETTER_REFUSES_NULL(test, getter, type)                                    \
    static void test(void **state)                                                 \
    {                                                                              \
        (void)state;                                                               \
        resil_config *c = cfg_load("{'Resilience': {}}");                          \
        type out;                                                                  \
        assert_int_equal(getter(NULL, "a", &out), RESIL_EINVAL);                   \
        assert_int_equal(getter(c, "a", NULL), RESIL_EINVAL);                      \
        resil_config_free(c);                                                      \
    }

GETTER_REFUSES_NULL(breaker_get_refuses_a_null_config_or_out, resil_config_breaker_get,
                    resil_breaker_opts)
GETTER_REFUSES_NULL(bulkhead_get_refuses_a_null_config_or_out, resil_config_bulkhead_get,
                    resil_bulkhead_opts)
GETTER_REFUSES_NULL(ratelimit_get_refuses_a_null_config_or_out, resil_config_ratelimit_get,
                    resil_config_ratelimit)
GETTER_REFUSES_NULL(chaos_get_refuses_a_null_config_or_out, resil_config_chaos_get,
                    resil_chaos_opts)
GETTER_REFUSES_NULL(adaptive_limiter_get_refuses_a_null_config_or_out,
                    resil_config_adaptive_limiter_get, resil_limiter_opts)
GETTER_REFUSES_NULL(throttle_get_refuses_a_null_config_or_out, resil_config_throttle_get,
                    resil_throttle_opts)
GETTER_REFUSES_NULL(hedge_get_refuses_a_null_config_or_out, resil_config_hedge_get,
                    resil_config_hedge)
GETTER_REFUSES_NULL(fallback_get_refuses_a_null_config_or_out, resil_config_fallback_get,
                    resil_outcome)
GETTER_REFUSES_NULL(budget_get_refuses_a_null_config_or_out, resil_config_budget_get,
                    resil_budget_opts)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(excalibur_appsettings_shape_loads),
        cmocka_unit_test(sections_outside_resilience_are_ignored),
        cmocka_unit_test(a_document_without_resilience_is_refused),
        cmocka_unit_test(a_misspelt_resilience_section_is_named),
        cmocka_unit_test(the_document_must_be_an_object),
        cmocka_unit_test(the_resilience_section_must_be_an_object),
        cmocka_unit_test(a_second_resilience_section_is_named_by_its_path),
        cmocka_unit_test(a_second_resilience_section_is_reported_in_document_order),
        cmocka_unit_test(a_section_given_twice_is_a_duplicate),
        cmocka_unit_test(an_unknown_section_far_from_all_gets_no_suggestion),
        cmocka_unit_test(a_syntax_error_has_jansson_position),
        cmocka_unit_test(empty_text_is_a_syntax_error),
        cmocka_unit_test(no_text_is_a_syntax_error),
        cmocka_unit_test(trailing_garbage_is_a_syntax_error),
        cmocka_unit_test(a_byte_order_mark_is_skipped),
        cmocka_unit_test(keys_match_without_regard_to_case),
        cmocka_unit_test(an_unknown_key_suggests_the_nearest),
        cmocka_unit_test(an_unknown_key_far_from_all_gets_no_suggestion),
        cmocka_unit_test(an_unknown_section_suggests_the_nearest),
        cmocka_unit_test(a_seed_key_resil_names_otherwise_is_explained),
        cmocka_unit_test(keys_differing_only_in_case_are_duplicates),
        cmocka_unit_test(an_exact_duplicate_key_is_reported_too),
        cmocka_unit_test(an_alias_beside_its_key_is_a_duplicate),
        cmocka_unit_test(names_differing_only_in_case_are_duplicates),
        cmocka_unit_test(a_value_error_points_at_the_value),
        cmocka_unit_test(columns_count_characters_not_bytes),
        cmocka_unit_test(every_error_is_collected_in_document_order),
        cmocka_unit_test(a_failing_document_yields_no_config),
        cmocka_unit_test(errors_beyond_the_cap_are_counted),
        cmocka_unit_test(numbers_and_booleans_may_be_strings_as_in_dotnet),
        cmocka_unit_test(escaped_keys_are_decoded),
        cmocka_unit_test(escaped_values_are_decoded),
        cmocka_unit_test(control_characters_in_names_are_shown_as_question_marks),
        cmocka_unit_test(a_path_past_its_capacity_is_cut_at_its_end),
        cmocka_unit_test(deep_nesting_is_read_or_refused_without_harm),
        cmocka_unit_test(a_name_must_be_short_and_printable),
        cmocka_unit_test(a_section_must_be_an_object),
        cmocka_unit_test(a_file_loads_like_text),
        cmocka_unit_test(a_file_larger_than_the_first_buffer_loads_whole),
        cmocka_unit_test(a_file_over_16_mib_is_refused_naming_the_limit),
        cmocka_unit_test(a_missing_file_is_an_io_error_naming_it),
        cmocka_unit_test(diagnostics_write_as_json),
        cmocka_unit_test(null_arguments_are_refused),
        cmocka_unit_test(breaker_get_refuses_a_null_config_or_out),
        cmocka_unit_test(bulkhead_get_refuses_a_null_config_or_out),
        cmocka_unit_test(ratelimit_get_refuses_a_null_config_or_out),
        cmocka_unit_test(chaos_get_refuses_a_null_config_or_out),
        cmocka_unit_test(adaptive_limiter_get_refuses_a_null_config_or_out),
        cmocka_unit_test(throttle_get_refuses_a_null_config_or_out),
        cmocka_unit_test(hedge_get_refuses_a_null_config_or_out),
        cmocka_unit_test(fallback_get_refuses_a_null_config_or_out),
        cmocka_unit_test(budget_get_refuses_a_null_config_or_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
