/*
 * test_metrics_otel.c — the default names: Polly's instruments and tags and
 * the HTTP resilience families, spelled by OpenTelemetry's Prometheus
 * mapping (dots to underscores, the unit as a suffix, _total on counters),
 * read back through the strict text parser with exact values.
 */
#include "prom_text.h"

typedef struct world {
    resil_fake_clock *fc;
    resil_metrics *m;
    resil_pipeline *p;
    const resil_outcome *script;
    size_t n;
    int calls;
    exposition *e;
    char *text;
} world;

static resil_outcome op(resil_attempt_ctx *ctx)
{
    world *w = ctx->user;
    size_t i = (size_t)w->calls < w->n ? (size_t)w->calls : w->n - 1;
    w->calls++;
    resil_fake_clock_advance(w->fc, RESIL_MS(10));
    return w->script[i];
}

static int setup(void **state)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->e = malloc(sizeof *w->e);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), 0, &w->fc), 0);
    static const resil_duration bounds[] = {RESIL_MS(5), RESIL_MS(20), RESIL_S(1)};
    resil_metrics_opts o;
    resil_metrics_opts_default(&o);
    o.buckets = bounds;
    o.nbuckets = 3;
    assert_int_equal(resil_metrics_new(&o, &w->m, NULL), 0);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(w->fc));
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = 3;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = RESIL_S(2);
    p.backoff.jitter = RESIL_JITTER_NONE;
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
    assert_int_equal(resil_pipeline_builder_metrics(b, w->m), 0);
    assert_int_equal(resil_pipeline_build(b, &w->p, NULL), 0);
    resil_pipeline_builder_free(b);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    resil_pipeline_free(w->p);
    resil_metrics_free(w->m);
    resil_fake_clock_free(w->fc);
    free(w->text);
    free(w->e);
    free(w);
    return 0;
}

static void run(world *w, const resil_http_attrs *http, const resil_outcome *script, size_t n)
{
    w->script = script;
    w->n = n;
    w->calls = 0;
    resil_call c;
    resil_call_default(&c);
    c.user = w;
    c.operation = "GetOrder";
    resil_call_telemetry tel = {.http = http};
    c.telemetry = &tel;
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(w->p, op, &c, &r), 0);
}

static void scrape(world *w)
{
    free(w->text);
    assert_int_equal(resil_metrics_prometheus_string(w->m, &w->text, NULL), 0);
    prom_parse(w->e, w->text);
    prom_check_histograms(w->e);
}

static double value(world *w, const char *name, const char *key)
{
    const sample *s = prom_find(w->e, name, key);
    if (s == NULL)
        fail_msg("no %s{%s} in\n%s", name, key, w->text);
    return s->value;
}

static const family *family_named(world *w, const char *name)
{
    for (int i = 0; i < w->e->nf; i++)
        if (strcmp(w->e->f[i].name, name) == 0)
            return &w->e->f[i];
    fail_msg("no family %s in\n%s", name, w->text);
    return NULL;
}

static resil_outcome unavailable(void)
{
    return resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
}

/* ---- Polly's instruments ---------------------------------------------------------- */

static void retries_count_as_polly_strategy_events_with_its_tags(void **state)
{
    world *w = *state;
    resil_outcome script[] = {unavailable(), unavailable(), resil_ok()};
    run(w, NULL, script, 3);
    scrape(w);
    assert_string_equal(family_named(w, "resilience_polly_strategy_events_total")->type,
                        "counter");
    assert_true(value(w, "resilience_polly_strategy_events_total",
                      "event_name=OnRetry;event_severity=Warning;pipeline_name=orders;"
                      "strategy_name=retry;operation_key=GetOrder;exception_type=transient;") ==
                2);
}

static void attempts_are_numbered_from_zero_with_handled_and_milliseconds(void **state)
{
    world *w = *state;
    resil_outcome script[] = {unavailable(), resil_ok()};
    run(w, NULL, script, 2);
    scrape(w);
    const char *name = "resilience_polly_strategy_attempt_duration_milliseconds";
    assert_string_equal(family_named(w, name)->type, "histogram");
    const char *first = "event_name=ExecutionAttempt;event_severity=Warning;pipeline_name=orders;"
                        "strategy_name=retry;operation_key=GetOrder;exception_type=transient;"
                        "attempt_number=0;attempt_handled=true;";
    const char *second = "event_name=ExecutionAttempt;event_severity=Information;"
                         "pipeline_name=orders;strategy_name=retry;operation_key=GetOrder;"
                         "attempt_number=1;attempt_handled=false;";
    assert_true(value(w, "resilience_polly_strategy_attempt_duration_milliseconds_count", first) ==
                1);
    assert_true(value(w, "resilience_polly_strategy_attempt_duration_milliseconds_sum", second) ==
                10);
    /* 10 ms falls in the 20 ms bucket, written as le="20" (milliseconds) */
    char key[512];
    snprintf(key, sizeof key, "%s", second);
    for (int i = 0; i < w->e->n; i++) {
        const sample *s = &w->e->s[i];
        char k[512];
        prom_series_key(s, k, sizeof k);
        if (strcmp(s->name, "resilience_polly_strategy_attempt_duration_milliseconds_bucket") != 0 ||
            strcmp(k, key) != 0)
            continue;
        const char *le = prom_label(s, "le");
        double want = strcmp(le, "5") == 0 ? 0 : 1;
        assert_true(strcmp(le, "5") == 0 || strcmp(le, "20") == 0 || strcmp(le, "1000") == 0 ||
                    strcmp(le, "+Inf") == 0);
        assert_true(s->value == want);
    }
}

static void executions_feed_the_pipeline_duration_by_operation_and_exception(void **state)
{
    world *w = *state;
    resil_outcome failing[] = {resil_fail(RESIL_PERMANENT, 404, "not found")};
    run(w, NULL, failing, 1);
    resil_outcome ok[] = {unavailable(), resil_ok()};
    run(w, NULL, ok, 2);
    scrape(w);
    assert_true(value(w, "resilience_polly_pipeline_duration_milliseconds_count",
                      "pipeline_name=orders;operation_key=GetOrder;exception_type=permanent;") ==
                1);
    /* the retried one took 10 ms + 2 s + 10 ms */
    assert_true(value(w, "resilience_polly_pipeline_duration_milliseconds_sum",
                      "pipeline_name=orders;operation_key=GetOrder;") == 2020);
}

/* ---- the HTTP families ------------------------------------------------------------ */

static void http_attributes_label_attempts_retries_and_statuses(void **state)
{
    world *w = *state;
    resil_http_attrs http = {.method = "GET", .server_address = "api.example", .server_port = 443};
    resil_outcome fine = resil_ok();
    fine.code = 200;
    resil_outcome script[] = {unavailable(), fine};
    run(w, &http, script, 2);
    scrape(w);
    const char *h = "http_client_request_resilience_attempt_duration_seconds";
    assert_string_equal(family_named(w, h)->type, "histogram");
    assert_true(value(w, "http_client_request_resilience_attempt_duration_seconds_count",
                      "http_request_method=GET;server_address=api.example;server_port=443;"
                      "http_response_status_code=503;error_type=503;") == 1);
    assert_true(value(w, "http_client_request_resilience_attempt_duration_seconds_sum",
                      "http_request_method=GET;server_address=api.example;server_port=443;"
                      "http_response_status_code=200;") == 0.01);
    assert_true(value(w, "http_client_request_resilience_retry_attempts_total",
                      "http_request_method=GET;server_address=api.example;server_port=443;") ==
                1);
}

static void transport_failures_name_their_kind_as_error_type(void **state)
{
    world *w = *state;
    resil_http_attrs http = {.method = "PUT", .server_address = "10.0.0.7", .server_port = 8080};
    resil_outcome script[] = {resil_fail(RESIL_TIMEOUT, 28, "curl 28: timed out"), resil_ok()};
    run(w, &http, script, 2);
    scrape(w);
    assert_true(value(w, "http_client_request_resilience_attempt_duration_seconds_count",
                      "http_request_method=PUT;server_address=10.0.0.7;server_port=8080;"
                      "error_type=timeout;") == 1);
}

static void calls_without_http_attributes_feed_no_http_family(void **state)
{
    world *w = *state;
    resil_outcome script[] = {unavailable(), resil_ok()};
    run(w, NULL, script, 2);
    scrape(w);
    for (int i = 0; i < w->e->nf; i++)
        assert_null(strstr(w->e->f[i].name, "http_client"));
}

static void authority_breakers_report_the_http_circuit_breaker_state(void **state)
{
    world *w = *state;
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.name = "https://api.example:443";
    resil_breaker *b;
    assert_int_equal(resil_breaker_new(&bo, &b, NULL), 0);
    assert_int_equal(resil_metrics_watch_breaker(w->m, "edge", b, w), 0);
    resil_breaker_isolate(b);
    scrape(w);
    assert_true(value(w, "http_client_request_resilience_circuit_breaker_state",
                      "server_address=api.example;server_port=443;") == 3);
    assert_true(value(w, "resilience_circuit_breaker_state",
                      "pipeline_name=edge;breaker_name=https://api.example:443;") == 3);
    resil_metrics_unwatch(w->m, w);
    resil_breaker_free(b);
}

/* An AIMD limiter at a limit of 7, watched as pipeline "db"'s. */
static resil_limiter *watched_limiter(world *w)
{
    resil_limiter_opts lo;
    resil_limiter_opts_default(&lo, RESIL_LIMIT_AIMD);
    lo.initial_limit = 7;
    resil_limiter *l;
    assert_int_equal(resil_limiter_new(&lo, &l, NULL), 0);
    assert_int_equal(resil_metrics_watch_limiter(w->m, "db", l, w), 0);
    return l;
}

static void an_adaptive_limiters_limit_is_a_gauge_under_the_otel_name(void **state)
{
    world *w = *state;
    resil_limiter *l = watched_limiter(w);
    scrape(w);
    assert_string_equal(family_named(w, "resilience_adaptive_limiter_limit")->type, "gauge");
    assert_true(value(w, "resilience_adaptive_limiter_limit", "pipeline_name=db;") == 7);
    resil_metrics_unwatch(w->m, w);
    resil_limiter_free(l);
}

static void event_count_reads_back_across_the_extra_labels(void **state)
{
    world *w = *state;
    resil_outcome script[] = {unavailable(), unavailable(), resil_ok()};
    run(w, NULL, script, 3);
    run(w, NULL, script, 3);
    assert_int_equal(resil_metrics_event_count(w->m, "orders", "retry", RESIL_EVENT_RETRY), 4);
}

/* ---- the visitor ------------------------------------------------------------------ */

typedef struct points {
    int n, histograms, counters, gauges;
    char seen[8][512];
} points;

static int keep_point(const resil_metric_point *p, void *ud)
{
    points *k = ud;
    k->n++;
    k->histograms += p->kind == RESIL_METRIC_HISTOGRAM;
    k->counters += p->kind == RESIL_METRIC_COUNTER;
    k->gauges += p->kind == RESIL_METRIC_GAUGE;
    if (strcmp(p->name, "resilience.polly.strategy.attempt.duration") != 0 || k->n > 8)
        return 0;
    assert_string_equal(p->unit, "ms");
    assert_int_equal(p->nbounds, 3);
    assert_true(p->bounds[0] == 5 && p->bounds[1] == 20 && p->bounds[2] == 1000);
    assert_int_equal(p->count, 1);
    assert_true(p->sum == 10);
    assert_int_equal(p->bucket_counts[0] + p->bucket_counts[2] + p->bucket_counts[3], 0);
    assert_int_equal(p->bucket_counts[1], 1);
    for (size_t i = 0; i < p->nattrs; i++) {
        if (strcmp(p->attrs[i].key, "attempt.number") != 0)
            continue;
        assert_true(p->attrs[i].is_int);
        assert_true(p->attrs[i].int_value == 0 || p->attrs[i].int_value == 1);
    }
    return 0;
}

static int stop_at_first(const resil_metric_point *p, void *ud)
{
    (void)p;
    (*(int *)ud)++;
    return 7;
}

static void the_visitor_hands_over_otel_points_with_units_and_typed_attributes(void **state)
{
    world *w = *state;
    resil_outcome script[] = {unavailable(), resil_ok()};
    run(w, NULL, script, 2);
    points k = {0};
    assert_int_equal(resil_metrics_visit(w->m, keep_point, &k), 0);
    /* OnRetry; two attempts; one execution */
    assert_int_equal(k.counters, 1);
    assert_int_equal(k.histograms, 3);
    assert_int_equal(k.gauges, 0);
    int calls = 0;
    assert_int_equal(resil_metrics_visit(w->m, stop_at_first, &calls), 7);
    assert_int_equal(calls, 1);
}

/* A gauge point the visitor handed over, its attributes as text. */
typedef struct gauge_seen {
    int n;
    char line[8][160];
} gauge_seen;

static int keep_gauge(const resil_metric_point *p, void *ud)
{
    gauge_seen *g = ud;
    if (p->kind != RESIL_METRIC_GAUGE || g->n == 8)
        return 0;
    char *out = g->line[g->n++];
    size_t len = (size_t)snprintf(out, 160, "%s=%lld", p->name, (long long)p->value);
    for (size_t i = 0; i < p->nattrs && len < 160; i++)
        len += (size_t)snprintf(out + len, 160 - len, " %s=%s%s", p->attrs[i].key,
                                p->attrs[i].value, p->attrs[i].is_int ? "(int)" : "");
    return 0;
}

static bool saw_gauge(const gauge_seen *g, const char *line)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->line[i], line) == 0)
            return true;
    return false;
}

/* What an exporter reads: the watched objects' gauges come after the
 * series, with their OpenTelemetry names and typed attributes; the gateway's
 * upstream breaker, watched by its authority, labels the HTTP family by
 * host and port. */
static void the_visitor_hands_over_every_watched_gauge(void **state)
{
    world *w = *state;
    resil_limiter *l = watched_limiter(w);
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    bo.name = "upstream";
    resil_breaker *b;
    assert_int_equal(resil_breaker_new(&bo, &b, NULL), 0);
    assert_int_equal(resil_metrics_watch_http_breaker(w->m, "gateway", b,
                                                      "http://orders.internal:8080", w),
                     0);
    resil_breaker_isolate(b);
    gauge_seen g = {0};
    assert_int_equal(resil_metrics_visit(w->m, keep_gauge, &g), 0);
    assert_int_equal(g.n, 3);
    assert_true(saw_gauge(&g, "resilience.adaptive_limiter.limit=7 pipeline.name=db"));
    assert_true(saw_gauge(&g, "resilience.circuit_breaker.state=3 pipeline.name=gateway "
                              "breaker.name=upstream"));
    assert_true(saw_gauge(&g, "http.client.request.resilience.circuit_breaker.state=3 "
                              "server.address=orders.internal server.port=8080(int)"));
    resil_metrics_unwatch(w->m, w);
    resil_breaker_free(b);
    resil_limiter_free(l);
}

static void an_http_breaker_needs_an_authority(void **state)
{
    world *w = *state;
    resil_breaker_opts bo;
    resil_breaker_opts_default(&bo);
    resil_breaker *b;
    assert_int_equal(resil_breaker_new(&bo, &b, NULL), 0);
    assert_int_equal(resil_metrics_watch_http_breaker(w->m, "gateway", b, "no authority", w),
                     RESIL_EINVAL);
    resil_breaker_free(b);
}

static void visiting_needs_a_sink_and_a_visitor(void **state)
{
    world *w = *state;
    int calls = 0;
    assert_int_equal(resil_metrics_visit(NULL, stop_at_first, &calls), RESIL_EINVAL);
    assert_int_equal(resil_metrics_visit(w->m, NULL, &calls), RESIL_EINVAL);
    assert_int_equal(calls, 0);
}

/* Each event as a listener hears it, by itself: the name it is counted
 * under is Polly's where Polly has the event and resil's own for the rest
 * (docs/telemetry.md lists both). */
static void every_strategy_event_is_counted_under_its_documented_name(void **state)
{
    world *w = *state;
    static const struct {
        resil_event_type type;
        const char *strategy;
        const char *name;
    } cases[] = {
        {RESIL_EVENT_RETRY, "retry", "OnRetry"},
        {RESIL_EVENT_BREAKER_OPENED, "breaker", "OnCircuitOpened"},
        {RESIL_EVENT_BREAKER_HALF_OPENED, "breaker", "OnCircuitHalfOpened"},
        {RESIL_EVENT_BREAKER_CLOSED, "breaker", "OnCircuitClosed"},
        {RESIL_EVENT_TIMEOUT, "attempt-timeout", "OnTimeout"},
        {RESIL_EVENT_HEDGE, "hedging", "OnHedging"},
        {RESIL_EVENT_FALLBACK, "fallback", "OnFallback"},
        {RESIL_EVENT_RATE_LIMITED, "rate-limiter", "OnRateLimiterRejected"},
        {RESIL_EVENT_CHAOS_INJECTED, "chaos-fault", "Chaos.OnFault"},
        {RESIL_EVENT_CHAOS_INJECTED, "chaos-outcome", "Chaos.OnOutcome"},
        {RESIL_EVENT_CHAOS_INJECTED, "chaos-latency", "Chaos.OnLatency"},
        {RESIL_EVENT_CHAOS_INJECTED, "chaos-behavior", "Chaos.OnBehavior"},
        {RESIL_EVENT_BREAKER_REJECTED, "breaker", "breaker_rejected"},
        {RESIL_EVENT_BREAKER_ISOLATED, "breaker", "breaker_isolated"},
        {RESIL_EVENT_BUDGET_DENIED, "retry", "budget_denied"},
        {RESIL_EVENT_BULKHEAD_REJECTED, "bulkhead", "bulkhead_rejected"},
        {RESIL_EVENT_DEGRADE_CHANGED, "degrade", "degrade_changed"},
        {RESIL_EVENT_DEGRADE_REJECTED, "degrade", "degrade_rejected"},
        {RESIL_EVENT_LIMIT_CHANGED, "adaptive-limiter", "limit_changed"},
        {RESIL_EVENT_LIMIT_REJECTED, "adaptive-limiter", "limit_rejected"},
        {RESIL_EVENT_THROTTLED, "throttle", "throttled"},
    };
    size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) {
        resil_event ev = {.type = cases[i].type, .pipeline = "names",
                          .strategy = cases[i].strategy, .key = "", .reason = "",
                          .from_name = "", .to_name = ""};
        ev.severity = resil_event_severity(ev.type, NULL);
        resil_metrics_on_event(&ev, w->m);
    }
    scrape(w);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < w->e->n; k++) {
            const sample *sm = &w->e->s[k];
            const char *name = prom_label(sm, "event_name");
            const char *strategy = prom_label(sm, "strategy_name");
            found += strcmp(sm->name, "resilience_polly_strategy_events_total") == 0 &&
                     name != NULL && strcmp(name, cases[i].name) == 0 && strategy != NULL &&
                     strcmp(strategy, cases[i].strategy) == 0 && sm->value == 1;
        }
        if (found != 1)
            fail_msg("%s from %s: %d series counting 1 in\n%s", cases[i].name,
                     cases[i].strategy, found, w->text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(retries_count_as_polly_strategy_events_with_its_tags,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            attempts_are_numbered_from_zero_with_handled_and_milliseconds, setup, teardown),
        cmocka_unit_test_setup_teardown(
            executions_feed_the_pipeline_duration_by_operation_and_exception, setup, teardown),
        cmocka_unit_test_setup_teardown(http_attributes_label_attempts_retries_and_statuses,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(transport_failures_name_their_kind_as_error_type, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(calls_without_http_attributes_feed_no_http_family, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(authority_breakers_report_the_http_circuit_breaker_state,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(event_count_reads_back_across_the_extra_labels, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_adaptive_limiters_limit_is_a_gauge_under_the_otel_name,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_visitor_hands_over_otel_points_with_units_and_typed_attributes, setup, teardown),
        cmocka_unit_test_setup_teardown(every_strategy_event_is_counted_under_its_documented_name,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(the_visitor_hands_over_every_watched_gauge, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_http_breaker_needs_an_authority, setup, teardown),
        cmocka_unit_test_setup_teardown(visiting_needs_a_sink_and_a_visitor, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
