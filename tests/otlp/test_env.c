/*
 * test_env.c — the exporter's options from the standard OTEL_* variables:
 * each is read into its field, an unset or empty one leaves the field as
 * it was, and a bad value is refused with the variable named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "resil/otlp.h"

static const char *const vars[] = {
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES", "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", NULL};

static int clean(void **state)
{
    (void)state;
    for (int i = 0; vars[i] != NULL; i++)
        unsetenv(vars[i]);
    return 0;
}

static void every_variable_lands_in_its_field(void **state)
{
    (void)state;
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example/v1/traces", 1);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=abc,x-team=orders", 1);
    setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500", 1);
    setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", 1);
    setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none", 1);
    setenv("OTEL_SERVICE_NAME", "checkout", 1);
    setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod", 1);
    setenv("OTEL_METRIC_EXPORT_INTERVAL", "15000", 1);
    setenv("OTEL_BSP_SCHEDULE_DELAY", "0", 1);
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100", 1);
    setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10", 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_string_equal(o.endpoint, "http://collector:4318");
    assert_string_equal(o.traces_endpoint, "https://traces.example/v1/traces");
    assert_null(o.metrics_endpoint);
    assert_string_equal(o.headers, "api-key=abc,x-team=orders");
    assert_int_equal(o.timeout, RESIL_MS(2500));
    assert_string_equal(o.service_name, "checkout");
    assert_string_equal(o.resource_attributes, "deployment.environment=prod");
    assert_int_equal(o.interval, RESIL_S(15));
    assert_int_equal(o.schedule_delay, 0);
    assert_int_equal(o.max_queue, 100);
    assert_int_equal(o.max_batch, 10);
}

static void unset_and_empty_variables_keep_the_defaults(void **state)
{
    (void)state;
    setenv("OTEL_METRIC_EXPORT_INTERVAL", "", 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_null(o.endpoint);
    assert_int_equal(o.interval, RESIL_S(60));
    assert_int_equal(o.schedule_delay, RESIL_S(5));
    assert_int_equal(o.timeout, RESIL_S(10));
    assert_int_equal(o.max_queue, 2048);
    assert_int_equal(o.max_batch, 512);
}

static void expect_refused(const char *var, const char *value, const char *message)
{
    clean(NULL);
    setenv(var, value, 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    resil_err err = {0, ""};
    assert_int_equal(resil_otlp_opts_from_env(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
}

static void bad_values_are_refused_naming_the_variable(void **state)
{
    (void)state;
    expect_refused("OTEL_METRIC_EXPORT_INTERVAL", "15s",
                   "OTEL_METRIC_EXPORT_INTERVAL must be a whole number in [1, 86400000], got "
                   "\"15s\"");
    expect_refused("OTEL_METRIC_EXPORT_INTERVAL", "0",
                   "OTEL_METRIC_EXPORT_INTERVAL must be a whole number in [1, 86400000], got "
                   "\"0\"");
    expect_refused("OTEL_BSP_MAX_QUEUE_SIZE", "-1",
                   "OTEL_BSP_MAX_QUEUE_SIZE must be a whole number in [1, 1048576], got \"-1\"");
    expect_refused("OTEL_EXPORTER_OTLP_TIMEOUT", "99999999999999999999999",
                   "OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number in [1, 86400000], got "
                   "\"99999999999999999999999\"");
    expect_refused("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318",
                   "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, "
                   "got \"collector:4318\"");
    expect_refused("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
                   "OTEL_EXPORTER_OTLP_PROTOCOL must be http/json (the only encoding resil "
                   "speaks), got \"grpc\"");
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc",
                   "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/json (the only encoding "
                   "resil speaks), got \"grpc\"");
    expect_refused("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf",
                   "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL must be http/json (the only encoding "
                   "resil speaks), got \"http/protobuf\"");
    expect_refused("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip",
                   "OTEL_EXPORTER_OTLP_COMPRESSION must be none (resil sends uncompressed), got "
                   "\"gzip\"");
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip",
                   "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION must be none (resil sends "
                   "uncompressed), got \"gzip\"");
    expect_refused("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "deflate",
                   "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION must be none (resil sends "
                   "uncompressed), got \"deflate\"");
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", "api-key",
                   "OTEL_EXPORTER_OTLP_HEADERS: entry 1 has no '='");
    expect_refused("OTEL_RESOURCE_ATTRIBUTES", "a=1,b=%2",
                   "OTEL_RESOURCE_ATTRIBUTES: entry 2 has a '%' not followed by two hex digits");
    expect_refused("OTEL_RESOURCE_ATTRIBUTES", "a b=1",
                   "OTEL_RESOURCE_ATTRIBUTES: entry 1 key has a character outside an HTTP token");
}

static void an_endpoint_of_1008_bytes_is_refused_naming_the_variable(void **state)
{
    (void)state;
    char url[1009];
    memcpy(url, "http://", 7);
    memset(url + 7, 'h', 1001);
    url[1008] = '\0';
    expect_refused("OTEL_EXPORTER_OTLP_ENDPOINT", url,
                   "OTEL_EXPORTER_OTLP_ENDPOINT must be at most 1007 bytes long, got 1008");
}

/* A list of `n` entries "k<i>=v" (the first key `first_key` instead). */
static void list_of(char *buf, size_t cap, int n, const char *first_key)
{
    size_t used = (size_t)snprintf(buf, cap, "%s=v", first_key);
    for (int i = 1; i < n; i++)
        used += (size_t)snprintf(buf + used, cap - used, ",k%d=v", i);
}

static void each_numeric_variable_refuses_its_own_bad_values(void **state)
{
    (void)state;
    expect_refused("OTEL_EXPORTER_OTLP_TIMEOUT", "0",
                   "OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number in [1, 86400000], got "
                   "\"0\"");
    expect_refused("OTEL_EXPORTER_OTLP_TIMEOUT", "10 ",
                   "OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number in [1, 86400000], got "
                   "\"10 \"");
    expect_refused("OTEL_BSP_SCHEDULE_DELAY", "-5",
                   "OTEL_BSP_SCHEDULE_DELAY must be a whole number in [0, 86400000], got \"-5\"");
    expect_refused("OTEL_BSP_SCHEDULE_DELAY", "86400001",
                   "OTEL_BSP_SCHEDULE_DELAY must be a whole number in [0, 86400000], got "
                   "\"86400001\"");
    expect_refused("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0",
                   "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be a whole number in [1, 1048576], got "
                   "\"0\"");
    expect_refused("OTEL_BSP_MAX_QUEUE_SIZE", "1048577",
                   "OTEL_BSP_MAX_QUEUE_SIZE must be a whole number in [1, 1048576], got "
                   "\"1048577\"");
}

static void each_url_variable_refuses_a_url_without_http_or_a_host(void **state)
{
    (void)state;
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector/v1/traces",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL with a "
                   "host, got \"ftp://collector/v1/traces\"");
    expect_refused("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http:///v1/metrics",
                   "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT must be an http:// or https:// URL with "
                   "a host, got \"http:///v1/metrics\"");
    expect_refused("OTEL_EXPORTER_OTLP_ENDPOINT", "https://",
                   "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, "
                   "got \"https://\"");
}

/* A space or a control character would reach libcurl as part of the URL. */
static void a_url_with_a_space_or_a_control_character_is_refused(void **state)
{
    (void)state;
    expect_refused("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector :4318",
                   "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, "
                   "got \"http://collector :4318\"");
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector/v1\ttraces",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL with a "
                   "host, got \"http://collector/v1\ttraces\"");
}

static void another_protocol_is_refused_naming_the_variable(void **state)
{
    (void)state;
    expect_refused("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
                   "OTEL_EXPORTER_OTLP_PROTOCOL must be http/json (the only encoding resil "
                   "speaks), got \"http/protobuf\"");
}

static void a_value_of_256_bytes_is_refused_naming_the_variable(void **state)
{
    (void)state;
    char list[300];
    memcpy(list, "api-key=", 8);
    memset(list + 8, 'v', 256);
    list[8 + 256] = '\0';
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", list,
                   "OTEL_EXPORTER_OTLP_HEADERS: entry 1 value is longer than 255 bytes");
    list[8 + 255] = '\0';
    clean(NULL);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", list, 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_string_equal(o.headers, list);
}

static void a_key_of_256_bytes_is_refused_naming_the_variable(void **state)
{
    (void)state;
    char key[257];
    memset(key, 'k', 256);
    key[256] = '\0';
    char list[300];
    list_of(list, sizeof list, 1, key);
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", list,
                   "OTEL_EXPORTER_OTLP_HEADERS: entry 1 key is longer than 255 bytes, got 256");
}

static void a_key_of_255_bytes_is_accepted(void **state)
{
    (void)state;
    char key[256];
    memset(key, 'k', 255);
    key[255] = '\0';
    char list[300];
    list_of(list, sizeof list, 1, key);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", list, 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_string_equal(o.headers, list);
}

static void a_33rd_entry_is_refused_naming_the_variable(void **state)
{
    (void)state;
    char list[512];
    list_of(list, sizeof list, 33, "k0");
    expect_refused("OTEL_RESOURCE_ATTRIBUTES", list,
                   "OTEL_RESOURCE_ATTRIBUTES: entry 33 is one more than the 32 allowed");
}

static void thirty_two_entries_are_accepted(void **state)
{
    (void)state;
    char list[512];
    list_of(list, sizeof list, 32, "k0");
    setenv("OTEL_RESOURCE_ATTRIBUTES", list, 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_string_equal(o.resource_attributes, list);
}

static void reading_the_environment_needs_options(void **state)
{
    (void)state;
    resil_err err = {0, ""};
    assert_int_equal(resil_otlp_opts_from_env(NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "otlp: options must not be NULL");
}

static void a_batch_above_the_queue_is_refused_naming_both_variables(void **state)
{
    (void)state;
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100", 1);
    setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "101", 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    resil_err err = {0, ""};
    assert_int_equal(resil_otlp_opts_from_env(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be at most "
                                     "OTEL_BSP_MAX_QUEUE_SIZE (100), got 101");
}

static void a_batch_equal_to_the_queue_is_accepted(void **state)
{
    (void)state;
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100", 1);
    setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100", 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_int_equal(o.max_queue, 100);
    assert_int_equal(o.max_batch, 100);
}

static void a_queue_below_the_default_batch_is_refused_naming_the_batch(void **state)
{
    (void)state;
    expect_refused("OTEL_BSP_MAX_QUEUE_SIZE", "511",
                   "OTEL_BSP_MAX_QUEUE_SIZE must be at least the export batch size (512), got "
                   "511");
}

static void a_queue_set_in_code_is_left_to_the_exporter_to_judge(void **state)
{
    (void)state;
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    o.max_queue = 100;
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_int_equal(o.max_queue, 100);
    assert_int_equal(o.max_batch, 512);
}

static void a_service_name_of_256_bytes_is_refused_naming_the_variable(void **state)
{
    (void)state;
    char name[257];
    memset(name, 's', 256);
    name[256] = '\0';
    expect_refused("OTEL_SERVICE_NAME", name,
                   "OTEL_SERVICE_NAME must be at most 255 bytes, got 256");
}

static void a_service_name_of_255_bytes_is_accepted(void **state)
{
    (void)state;
    char name[256];
    memset(name, 's', 255);
    name[255] = '\0';
    setenv("OTEL_SERVICE_NAME", name, 1);
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    assert_int_equal(resil_otlp_opts_from_env(&o, NULL), 0);
    assert_int_equal(strlen(o.service_name), 255);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_variable_lands_in_its_field, clean, clean),
        cmocka_unit_test_setup_teardown(unset_and_empty_variables_keep_the_defaults, clean, clean),
        cmocka_unit_test_setup_teardown(bad_values_are_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(an_endpoint_of_1008_bytes_is_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(each_numeric_variable_refuses_its_own_bad_values, clean, clean),
        cmocka_unit_test_setup_teardown(each_url_variable_refuses_a_url_without_http_or_a_host, clean, clean),
        cmocka_unit_test_setup_teardown(a_url_with_a_space_or_a_control_character_is_refused, clean, clean),
        cmocka_unit_test_setup_teardown(another_protocol_is_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(a_value_of_256_bytes_is_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(a_key_of_256_bytes_is_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(a_key_of_255_bytes_is_accepted, clean, clean),
        cmocka_unit_test_setup_teardown(a_33rd_entry_is_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(thirty_two_entries_are_accepted, clean, clean),
        cmocka_unit_test_setup_teardown(reading_the_environment_needs_options, clean, clean),
        cmocka_unit_test_setup_teardown(a_batch_above_the_queue_is_refused_naming_both_variables, clean, clean),
        cmocka_unit_test_setup_teardown(a_batch_equal_to_the_queue_is_accepted, clean, clean),
        cmocka_unit_test_setup_teardown(a_queue_below_the_default_batch_is_refused_naming_the_batch, clean, clean),
        cmocka_unit_test_setup_teardown(a_queue_set_in_code_is_left_to_the_exporter_to_judge, clean, clean),
        cmocka_unit_test_setup_teardown(a_service_name_of_256_bytes_is_refused_naming_the_variable, clean, clean),
        cmocka_unit_test_setup_teardown(a_service_name_of_255_bytes_is_accepted, clean, clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
