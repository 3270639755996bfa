/*
 * bench_config.c — what named policies cost: resolving a name in the
 * registry (a read lock and a reference count) and executing through it,
 * against executing the same pipeline directly; and loading a document
 * (jansson's check, the scanner, validation), against jansson parsing the
 * same text alone. Loading happens at start-up and on reload, never per
 * call, but its cost says how often a file can be re-read.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "resil/config.h"

static const char document[] =
    "{\"Resilience\": {"
    "\"Timeouts\": {\"DefaultTimeout\": \"00:00:30\","
    " \"OperationTimeouts\": {\"database-query\": \"00:00:10\", \"external-api\": \"00:01:00\"}},"
    "\"Retry\": {\"orders\": {\"MaxRetryAttempts\": 3, \"BaseDelay\": \"500ms\","
    " \"BackoffStrategy\": \"Exponential\", \"UseJitter\": true}},"
    "\"CircuitBreakers\": {\"orders\": {\"ConsecutiveFailureThreshold\": 5,"
    " \"FailureRatio\": 0.5, \"MinimumThroughput\": 10, \"SamplingDuration\": \"00:00:30\","
    " \"BreakDuration\": \"00:00:30\"}},"
    "\"Bulkheads\": {\"orders-db\": {\"MaxConcurrency\": 10, \"MaxQueueLength\": 50}},"
    "\"Pipelines\": {\"orders\": [\"Bulkhead:orders-db\", \"TotalTimeout:10s\","
    " \"Retry:orders\", \"CircuitBreaker:orders\", \"AttemptTimeout:2s\"]}}}";

typedef struct ctx {
    resil_policies *reg;
    const resil_pipeline *direct; /* the same pipeline, held */
} ctx;

static resil_outcome ok(resil_attempt_ctx *a)
{
    (void)a;
    return resil_ok();
}

static void through_registry(void *ud, uint64_t iters)
{
    ctx *c = ud;
    uint64_t good = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_policy p;
        resil_pipeline_result res;
        if (resil_policies_get(c->reg, "orders", &p) == 0 &&
            resil_policy_execute(&p, ok, NULL, &res) == 0)
            good += resil_outcome_ok(&res.outcome);
        resil_policy_release(&p);
    }
    bench_consume(good);
}

static void direct(void *ud, uint64_t iters)
{
    ctx *c = ud;
    uint64_t good = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_pipeline_result res;
        if (resil_pipeline_execute(c->direct, ok, NULL, &res) == 0)
            good += resil_outcome_ok(&res.outcome);
    }
    bench_consume(good);
}

static void resolve_only(void *ud, uint64_t iters)
{
    ctx *c = ud;
    uint64_t found = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_policy p;
        found += resil_policies_get(c->reg, "orders", &p) == 0;
        resil_policy_release(&p);
    }
    bench_consume(found);
}

static void load(void *ud, uint64_t iters)
{
    (void)ud;
    uint64_t ok_count = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_config *c;
        if (resil_config_parse(document, sizeof document - 1, &c, NULL) == 0)
            ok_count++;
        resil_config_free(c);
    }
    bench_consume(ok_count);
}

static void jansson_alone(void *ud, uint64_t iters)
{
    (void)ud;
    uint64_t ok_count = 0;
    for (uint64_t i = 0; i < iters; i++) {
        json_t *j = json_loadb(document, sizeof document - 1, 0, NULL);
        ok_count += j != NULL;
        json_decref(j);
    }
    bench_consume(ok_count);
}

int main(void)
{
    ctx c;
    resil_config *cfg;
    resil_err err;
    if (resil_config_parse(document, sizeof document - 1, &cfg, NULL) != 0 ||
        resil_policies_new(NULL, &c.reg, &err) != 0 || resil_policies_apply(c.reg, cfg, &err) != 0) {
        fprintf(stderr, "bench_config: setup failed\n");
        return 1;
    }
    resil_config_free(cfg);
    resil_policy held;
    resil_policies_get(c.reg, "orders", &held);
    c.direct = held.pipeline;

    bench_result base = bench_run("pipeline_execute_direct", direct, &c);
    bench_result r = bench_run("policy_get_execute_release", through_registry, &c);
    char extra[64];
    snprintf(extra, sizeof extra, "overhead_ns=%.1f", r.ns_per_op - base.ns_per_op);
    bench_report(r, base, extra);

    bench_result atomic = bench_run("atomic_increment", bench_atomic_increment, NULL);
    bench_report(bench_run("policy_get_release", resolve_only, &c), atomic, NULL);

    bench_result parse = bench_run("jansson_loadb", jansson_alone, NULL);
    snprintf(extra, sizeof extra, "bytes=%zu", sizeof document - 1);
    bench_report(bench_run("config_parse_validate", load, NULL), parse, extra);

    resil_policy_release(&held);
    resil_policies_free(c.reg);
    return 0;
}
