/*
 * test_check.c — the OTLP JSON validator the exporter's tests rely on
 * refuses what the encoding forbids, each with the rule it broke, and
 * accepts a minimal valid payload of each kind.
 */
#include "test.h"

#include "otlp_check.h"

#define SPAN_OK                                                                        \
    "\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spanId\":\"00f067aa0ba902b7\"," \
    "\"name\":\"x\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\""

static void expect_traces(const char *spans, const char *why)
{
    char body[1024], got[512];
    snprintf(body, sizeof body, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{%s}]}]}]}",
             spans);
    json_t *root = otlp_check_traces(body, strlen(body), got, sizeof got);
    if (why == NULL) {
        if (root == NULL)
            fail_msg("refused: %s", got);
        json_decref(root);
        return;
    }
    assert_null(root);
    assert_string_equal(got, why);
}

static void spans_are_held_to_the_encoding(void **state)
{
    (void)state;
    expect_traces(SPAN_OK, NULL);
    expect_traces(SPAN_OK ",\"kind\":\"SPAN_KIND_CLIENT\"",
                  "resourceSpans[0].scopeSpans[0].spans[0]: kind must be an integer in [0, 5]");
    expect_traces("\"traceId\":\"4BF92F3577B34DA6A3CE929D0E0E4736\",\"spanId\":\"00f067aa0ba902b7\"",
                  "resourceSpans[0].scopeSpans[0].spans[0]: traceId must be 32 lower-case hex "
                  "digits, got \"4BF92F3577B34DA6A3CE929D0E0E4736\"");
    expect_traces(SPAN_OK ",\"trace_id\":1",
                  "resourceSpans[0].scopeSpans[0].spans[0]: unknown field \"trace_id\"");
    expect_traces("\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spanId\":\"00f067aa0ba902b7\","
                  "\"name\":\"x\",\"startTimeUnixNano\":1,\"endTimeUnixNano\":\"2\"",
                  "resourceSpans[0].scopeSpans[0].spans[0]: startTimeUnixNano must be a decimal "
                  "string");
    expect_traces(SPAN_OK ",\"attributes\":[{\"key\":\"a\",\"value\":{\"intValue\":3}}]",
                  "resourceSpans[0].scopeSpans[0].spans[0].attributes[0]: intValue must be a "
                  "decimal string");
    expect_traces(SPAN_OK ",\"attributes\":[{\"key\":\"a\",\"value\":{\"stringValue\":\"1\"}},"
                  "{\"key\":\"a\",\"value\":{\"boolValue\":true}}]",
                  "resourceSpans[0].scopeSpans[0].spans[0].attributes[1]: key \"a\" appears twice");
    expect_traces(SPAN_OK ",\"attributes\":[{\"key\":\"a\",\"value\":{\"stringValue\":\"1\","
                  "\"boolValue\":true}}]",
                  "resourceSpans[0].scopeSpans[0].spans[0].attributes[0]: an AnyValue holds "
                  "exactly one value");
}

static void expect_metric(const char *metric, const char *why)
{
    char body[1024], got[512];
    snprintf(body, sizeof body,
             "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"name\":\"m\",%s}]}]}]}",
             metric);
    json_t *root = otlp_check_metrics(body, strlen(body), got, sizeof got);
    if (why == NULL) {
        if (root == NULL)
            fail_msg("refused: %s", got);
        json_decref(root);
        return;
    }
    assert_null(root);
    assert_string_equal(got, why);
}

#define HIST(counts, bounds)                                                                \
    "\"histogram\":{\"aggregationTemporality\":2,\"dataPoints\":[{\"timeUnixNano\":\"1\"," \
    "\"count\":\"3\",\"sum\":1.5,\"bucketCounts\":" counts ",\"explicitBounds\":" bounds "}]}"

static void metrics_are_held_to_the_encoding(void **state)
{
    (void)state;
    expect_metric(HIST("[\"1\",\"2\"]", "[5]"), NULL);
    expect_metric(HIST("[\"1\",\"1\"]", "[5]"),
                  "resourceMetrics[0].scopeMetrics[0].metrics[0].dataPoints[0]: bucketCounts add "
                  "up to 2, count is 3");
    expect_metric(HIST("[\"1\",\"2\"]", "[5,6]"),
                  "resourceMetrics[0].scopeMetrics[0].metrics[0].dataPoints[0]: bucketCounts must "
                  "have one more entry than explicitBounds");
    expect_metric(HIST("[\"1\",\"1\",\"1\"]", "[6,5]"),
                  "resourceMetrics[0].scopeMetrics[0].metrics[0].dataPoints[0]: explicitBounds "
                  "must be strictly increasing");
    expect_metric("\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":true,\"dataPoints\":"
                  "[{\"timeUnixNano\":\"1\",\"asInt\":\"1\",\"asDouble\":1}]}",
                  "resourceMetrics[0].scopeMetrics[0].metrics[0].dataPoints[0]: a data point "
                  "holds exactly one of asInt and asDouble");
    expect_metric("\"sum\":{\"dataPoints\":[]},\"gauge\":{\"dataPoints\":[]}",
                  "resourceMetrics[0].scopeMetrics[0].metrics[0]: a metric holds exactly one of "
                  "sum, gauge, histogram");
    expect_metric("\"sum\":{\"aggregationTemporality\":3,\"dataPoints\":[]}",
                  "resourceMetrics[0].scopeMetrics[0].metrics[0]: aggregationTemporality must be "
                  "an integer in [1, 2]");
}

static void duplicate_keys_and_other_text_are_not_json(void **state)
{
    (void)state;
    char why[256];
    const char *dup = "{\"resourceSpans\":[],\"resourceSpans\":[]}";
    assert_null(otlp_check_traces(dup, strlen(dup), why, sizeof why));
    assert_non_null(strstr(why, "not JSON"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spans_are_held_to_the_encoding),
        cmocka_unit_test(metrics_are_held_to_the_encoding),
        cmocka_unit_test(duplicate_keys_and_other_text_are_not_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
