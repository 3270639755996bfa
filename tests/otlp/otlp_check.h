/*
 * otlp_check.h — a validator of OTLP/HTTP JSON payloads for the exporter's
 * tests: the loopback receiver (the scripted test HTTP server) records
 * every request, and each recorded body is checked here against the OTLP
 * JSON encoding rules before any value is read.
 *
 * The rules checked: the body is one JSON object (duplicate keys refused);
 * only the protobuf messages' fields appear, in lowerCamelCase; trace and
 * span ids are lower-case hex of 32 and 16 digits and not all zero; enums
 * (span kind, status code, aggregation temporality) are integers in range;
 * 64-bit integers (times, counts, intValue, asInt, bucketCounts) are
 * decimal strings; doubles are numbers; every AnyValue has exactly one
 * value; attribute keys are unique per list; a span ends no earlier than it
 * starts; a metric has exactly one of sum, gauge, histogram; a histogram
 * point has one more bucket count than bounds, bounds strictly increasing,
 * counts adding up to its count.
 */
#ifndef RESIL_TEST_OTLP_CHECK_H
#define RESIL_TEST_OTLP_CHECK_H

#include <jansson.h>
#include <stddef.h>

/* Parse and check; NULL and the first rule broken in `why` when invalid.
 * The caller json_decref()s the result. */
json_t *otlp_check_traces(const char *body, size_t len, char *why, size_t cap);
json_t *otlp_check_metrics(const char *body, size_t len, char *why, size_t cap);

/* The AnyValue of attribute `key` in an attribute list, or NULL. */
json_t *otlp_attr(json_t *attributes, const char *key);
/* Its stringValue, or NULL. */
const char *otlp_str_attr(json_t *attributes, const char *key);
/* The metric `name` of a checked metrics body's first scope, or NULL. */
json_t *otlp_metric(json_t *root, const char *name);

#endif
