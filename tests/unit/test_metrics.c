/*
 * test_metrics.c — the metrics sink, checked through a parser of the
 * Prometheus text exposition format: valid metric and label names, HELP
 * and TYPE once per family and before its samples, families contiguous,
 * label values escaped (and unescaped back to what was recorded), histogram
 * buckets cumulative and ending in +Inf equal to _count, with _sum. Then the
 * figures themselves: counters by event, bucket placement, gauges read from
 * watched objects, dropped series, bad options, and concurrent recording.
 */
#include <ctype.h>
#include <pthread.h>

#include "prom_text.h"

static char *scrape(resil_metrics *m, exposition *e)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(resil_metrics_prometheus_string(m, &text, &len), 0);
    assert_int_equal(len, strlen(text));
    prom_parse(e, text);
    prom_check_histograms(e);
    return text;
}

/* ---- events fed by hand --------------------------------------------------------- */

static resil_event event(resil_event_type t, const char *pipeline, const char *strategy)
{
    resil_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = t;
    ev.pipeline = pipeline;
    ev.strategy = strategy;
    ev.key = ev.reason = ev.from_name = ev.to_name = "";
    return ev;
}

static resil_metrics *metrics(uint32_t max_series)
{
    resil_metrics_opts o;
    resil_metrics_opts_default(&o);
    o.max_series = max_series;
    o.names = RESIL_METRICS_NAMES_RESIL; /* these tests pin the resil names */
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(&o, &m, NULL), 0);
    return m;
}

static void empty_sink_writes_only_the_drop_counter(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_string_equal(text,
                        "# HELP resil_metrics_dropped_series_total Series not recorded because "
                        "the metrics table was full.\n"
                        "# TYPE resil_metrics_dropped_series_total counter\n"
                        "resil_metrics_dropped_series_total 0\n");
    free(text);
    free(e);
    resil_metrics_free(m);
}

static void events_count_by_pipeline_strategy_and_event(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    resil_event retry = event(RESIL_EVENT_RETRY, "orders", "retry");
    resil_event opened = event(RESIL_EVENT_BREAKER_OPENED, "orders", "breaker");
    resil_metrics_on_event(&retry, m);
    resil_metrics_on_event(&retry, m);
    resil_metrics_on_event(&opened, m);
    assert_int_equal(resil_metrics_event_count(m, "orders", "retry", RESIL_EVENT_RETRY), 2);
    assert_int_equal(resil_metrics_event_count(m, "orders", "breaker", RESIL_EVENT_BREAKER_OPENED), 1);
    assert_int_equal(resil_metrics_event_count(m, "orders", "retry", RESIL_EVENT_TIMEOUT), 0);
    assert_int_equal(resil_metrics_event_count(m, "billing", "retry", RESIL_EVENT_RETRY), 0);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_non_null(strstr(text, "# TYPE resil_strategy_events_total counter\n"
                                 "resil_strategy_events_total{pipeline=\"orders\","
                                 "strategy=\"breaker\",event=\"breaker_opened\"} 1\n"
                                 "resil_strategy_events_total{pipeline=\"orders\","
                                 "strategy=\"retry\",event=\"retry\"} 2\n"));
    free(text);
    free(e);
    resil_metrics_free(m);
}

/* A hedge counts once, when launched; its end makes no series. */
static void a_hedges_end_is_not_counted(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    resil_event ended = event(RESIL_EVENT_HEDGE_ENDED, "orders", "hedging");
    resil_metrics_on_event(&ended, m);
    assert_int_equal(resil_metrics_event_count(m, "orders", "hedging", RESIL_EVENT_HEDGE_ENDED), 0);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_null(strstr(text, "hedge"));
    free(text);
    free(e);
    resil_metrics_free(m);
}

static void attempt_durations_fall_in_cumulative_buckets(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    static const resil_duration durations[] = {RESIL_US(500), RESIL_MS(1), RESIL_MS(3),
                                               RESIL_S(2), RESIL_S(100)};
    for (int i = 0; i < 5; i++) {
        resil_event a = event(RESIL_EVENT_ATTEMPT, "orders", "retry");
        a.duration = durations[i];
        a.handled = false;
        resil_metrics_on_event(&a, m);
    }
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    const char *key = "pipeline=orders;strategy=retry;handled=false;";
    static const struct {
        const char *le;
        double count;
    } want[] = {{"0.001", 2}, {"0.0025", 2}, {"0.005", 3}, {"1", 3}, {"2.5", 4},
                {"60", 4},    {"+Inf", 5}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char line[256];
        snprintf(line, sizeof line,
                 "resil_attempt_duration_seconds_bucket{pipeline=\"orders\",strategy=\"retry\","
                 "handled=\"false\",le=\"%s\"} %g\n",
                 want[i].le, want[i].count);
        if (strstr(text, line) == NULL)
            fail_msg("missing: %s", line);
    }
    const sample *sum = prom_find(e, "resil_attempt_duration_seconds_sum", key);
    assert_non_null(sum);
    assert_non_null(strstr(text, "resil_attempt_duration_seconds_sum{pipeline=\"orders\","
                                 "strategy=\"retry\",handled=\"false\"} 102.0045\n"));
    assert_true(prom_find(e, "resil_attempt_duration_seconds_count", key)->value == 5);
    free(text);
    free(e);
    resil_metrics_free(m);
}

static void label_values_are_escaped_and_read_back_exactly(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    const char *weird = "a\"b\\c\nd";
    resil_event ev = event(RESIL_EVENT_RETRY, weird, "retry");
    resil_metrics_on_event(&ev, m);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_non_null(strstr(text, "{pipeline=\"a\\\"b\\\\c\\nd\","));
    assert_string_equal(prom_label(&e->s[0], "pipeline"), weird);
    free(text);
    free(e);
    resil_metrics_free(m);
}

static void full_table_drops_new_series_and_counts_them(void **state)
{
    (void)state;
    resil_metrics *m = metrics(2);
    resil_event a = event(RESIL_EVENT_RETRY, "a", "retry");
    resil_event b = event(RESIL_EVENT_RETRY, "b", "retry");
    resil_event c = event(RESIL_EVENT_RETRY, "c", "retry");
    resil_metrics_on_event(&a, m);
    resil_metrics_on_event(&b, m);
    resil_metrics_on_event(&c, m);
    resil_metrics_on_event(&c, m);
    resil_metrics_on_event(&a, m);
    assert_int_equal(resil_metrics_event_count(m, "a", "retry", RESIL_EVENT_RETRY), 2);
    assert_int_equal(resil_metrics_event_count(m, "c", "retry", RESIL_EVENT_RETRY), 0);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_non_null(strstr(text, "resil_metrics_dropped_series_total 2\n"));
    free(text);
    free(e);
    resil_metrics_free(m);
}

/* ---- through pipelines -------------------------------------------------------------- */

static resil_outcome fails(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_fail(RESIL_TRANSIENT, 503, "x");
}

static void pipeline_feeds_counters_histograms_and_gauges(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    resil_metrics *m = metrics(64);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(fc));
    assert_int_equal(resil_pipeline_builder_metrics(b, m), 0);
    assert_int_equal(resil_pipeline_builder_metrics(b, m), RESIL_EEXIST);
    resil_bulkhead_opts bo;
    resil_bulkhead_opts_default(&bo);
    resil_pipeline_add_bulkhead(b, &bo);
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = 2;
    p.backoff.jitter = RESIL_JITTER_NONE;
    resil_pipeline_add_retry(b, &p);
    resil_breaker_opts br;
    resil_breaker_opts_default(&br);
    br.kind = RESIL_BREAKER_CONSECUTIVE;
    br.failure_threshold = 2;
    resil_pipeline_add_breaker(b, &br);
    resil_pipeline *pl;
    resil_err err = {0, ""};
    /* the first error stuck: the second metrics sink */
    assert_int_equal(resil_pipeline_build(b, &pl, &err), RESIL_EEXIST);
    resil_pipeline_builder_free(b);

    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_fake_clock_clock(fc));
    resil_pipeline_builder_metrics(b, m);
    resil_pipeline_add_bulkhead(b, &bo);
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_add_breaker(b, &br);
    assert_int_equal(resil_pipeline_build(b, &pl, &err), 0);
    resil_pipeline_builder_free(b);
    resil_pipeline_result r;
    assert_int_equal(resil_pipeline_execute(pl, fails, NULL, &r), 0);

    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_non_null(strstr(text, "resil_strategy_events_total{pipeline=\"orders\","
                                 "strategy=\"retry\",event=\"retry\"} 1\n"));
    assert_non_null(strstr(text, "resil_strategy_events_total{pipeline=\"orders\","
                                 "strategy=\"breaker\",event=\"breaker_opened\"} 1\n"));
    assert_non_null(strstr(text, "resil_attempt_duration_seconds_count{pipeline=\"orders\","
                                 "strategy=\"retry\",handled=\"true\"} 2\n"));
    assert_non_null(strstr(text, "resil_pipeline_duration_seconds_count{pipeline=\"orders\","
                                 "outcome=\"transient\"} 1\n"));
    assert_non_null(strstr(text, "# TYPE resil_breaker_state gauge\n"
                                 "resil_breaker_state{pipeline=\"orders\",breaker=\"orders\"} 1\n"));
    assert_non_null(strstr(text, "resil_bulkhead_in_flight{pipeline=\"orders\"} 0\n"));
    assert_non_null(strstr(text, "resil_bulkhead_queued{pipeline=\"orders\"} 0\n"));
    free(text);

    resil_pipeline_free(pl); /* its gauges go with it */
    text = scrape(m, e);
    assert_null(strstr(text, "resil_breaker_state"));
    assert_null(strstr(text, "resil_bulkhead_in_flight"));
    assert_non_null(strstr(text, "event=\"retry\"} 1\n")); /* counters stay */
    free(text);
    free(e);
    resil_metrics_free(m);
    resil_fake_clock_free(fc);
}

static void registry_breakers_appear_one_gauge_per_key(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    resil_registry *reg;
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    resil_breaker *x, *y;
    assert_int_equal(resil_registry_get(reg, "b.example", NULL, &x, NULL), 0);
    assert_int_equal(resil_registry_get(reg, "a.example", NULL, &y, NULL), 0);
    resil_breaker_isolate(x);
    assert_int_equal(resil_metrics_watch_registry(m, "edge", reg, m), 0);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_non_null(strstr(text, "resil_breaker_state{pipeline=\"edge\",breaker=\"a.example\"} 0\n"
                                 "resil_breaker_state{pipeline=\"edge\",breaker=\"b.example\"} 3\n"));
    free(text);
    free(e);
    resil_metrics_unwatch(m, m);
    resil_breaker_free(x);
    resil_breaker_free(y);
    resil_registry_free(reg);
    resil_metrics_free(m);
}

static int refuse(const char *text, size_t len, void *ud)
{
    (void)text;
    (void)len;
    (void)ud;
    return RESIL_EIO;
}

static void writer_errors_stop_the_write(void **state)
{
    (void)state;
    resil_metrics *m = metrics(4);
    assert_int_equal(resil_metrics_write_prometheus(m, refuse, NULL), RESIL_EIO);
    assert_int_equal(resil_metrics_write_prometheus(m, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_metrics_write_prometheus(NULL, refuse, NULL), RESIL_EINVAL);
    assert_int_equal(resil_metrics_watch_breaker(m, "p", NULL, NULL), RESIL_EINVAL);
    resil_metrics_free(m);
}

static void the_text_as_a_string_needs_out(void **state)
{
    (void)state;
    resil_metrics *m = metrics(4);
    size_t len = 7;
    assert_int_equal(resil_metrics_prometheus_string(m, NULL, &len), RESIL_EINVAL);
    assert_int_equal(len, 7);
    resil_metrics_free(m);
}

static void options_are_checked_by_name(void **state)
{
    (void)state;
    resil_metrics_opts o;
    resil_metrics_opts_default(&o);
    assert_int_equal(o.max_series, 1024);
    assert_null(o.buckets);
    assert_int_equal(o.names, RESIL_METRICS_NAMES_OTEL);
    resil_metrics *m;
    resil_err err = {0, ""};
    o.names = (resil_metrics_names)2;
    assert_int_equal(resil_metrics_new(&o, &m, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "metrics.names must be RESIL_METRICS_NAMES_OTEL or "
                                     "RESIL_METRICS_NAMES_RESIL, got 2");
    o.names = RESIL_METRICS_NAMES_OTEL;
    o.max_series = 0;
    assert_int_equal(resil_metrics_new(&o, &m, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "metrics.max_series must be in [1, 1048576], got 0");
    o.max_series = 8;
    resil_duration bounds[] = {RESIL_MS(10), RESIL_MS(10)};
    o.buckets = bounds;
    o.nbuckets = 0;
    assert_int_equal(resil_metrics_new(&o, &m, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "metrics.nbuckets must be in [1, 32], got 0");
    o.nbuckets = 2;
    assert_int_equal(resil_metrics_new(&o, &m, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "metrics.buckets must be > 0 and strictly increasing, "
                                     "bucket 1 is 10ms");
    bounds[1] = RESIL_MS(20);
    assert_int_equal(resil_metrics_new(&o, &m, &err), 0);
    resil_event a = event(RESIL_EVENT_EXECUTION, "p", "");
    a.duration = RESIL_MS(15);
    resil_outcome ok = resil_ok();
    a.outcome = &ok;
    resil_metrics_on_event(&a, m);
    char *text;
    assert_int_equal(resil_metrics_prometheus_string(m, &text, NULL), 0);
    /* the default names write milliseconds, as Polly's instruments do */
    assert_non_null(strstr(text, "le=\"10\"} 0\n"));
    assert_non_null(strstr(text, "le=\"20\"} 1\n"));
    free(text);
    resil_metrics_free(m);
    assert_int_equal(resil_metrics_new(NULL, NULL, &err), RESIL_EINVAL);
}

/* ---- concurrency -------------------------------------------------------------------------- */

#define THREADS 8
#define PER_THREAD 2000

static void *record_many(void *arg)
{
    resil_metrics *m = arg;
    resil_event r = event(RESIL_EVENT_RETRY, "orders", "retry");
    resil_event a = event(RESIL_EVENT_ATTEMPT, "orders", "retry");
    a.duration = RESIL_MS(2);
    for (int i = 0; i < PER_THREAD; i++) {
        resil_metrics_on_event(&r, m);
        resil_metrics_on_event(&a, m);
    }
    return NULL;
}

/* Returns how many scrapes failed: cmocka asserts only on the test's thread. */
static void *scrape_many(void *arg)
{
    resil_metrics *m = arg;
    intptr_t failed = 0;
    for (int i = 0; i < 20; i++) {
        char *text = NULL;
        failed += resil_metrics_prometheus_string(m, &text, NULL) != 0;
        free(text);
    }
    return (void *)failed;
}

static void concurrent_recording_loses_nothing(void **state)
{
    (void)state;
    resil_metrics *m = metrics(16);
    pthread_t t[THREADS + 1];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, record_many, m), 0);
    assert_int_equal(pthread_create(&t[THREADS], NULL, scrape_many, m), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    void *scrapes_failed;
    pthread_join(t[THREADS], &scrapes_failed);
    assert_int_equal((intptr_t)scrapes_failed, 0);
    assert_int_equal(resil_metrics_event_count(m, "orders", "retry", RESIL_EVENT_RETRY),
                     THREADS * PER_THREAD);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    char want[160];
    snprintf(want, sizeof want,
             "resil_attempt_duration_seconds_count{pipeline=\"orders\",strategy=\"retry\","
             "handled=\"false\"} %d\n",
             THREADS * PER_THREAD);
    assert_non_null(strstr(text, want));
    free(text);
    free(e);
    resil_metrics_free(m);
}

/* A pipeline's adaptive limiter is watched: its learned limit is a gauge
 * read at write time, gone with the pipeline. */
static void a_pipelines_adaptive_limit_is_a_gauge(void **state)
{
    (void)state;
    resil_metrics *m = metrics(64);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("orders", &b, NULL), 0);
    resil_pipeline_builder_metrics(b, m);
    resil_limiter_opts lo;
    resil_limiter_opts_default(&lo, RESIL_LIMIT_AIMD);
    lo.initial_limit = 7;
    resil_pipeline_add_adaptive_limiter(b, &lo);
    resil_pipeline *pl;
    assert_int_equal(resil_pipeline_build(b, &pl, NULL), 0);
    resil_pipeline_builder_free(b);
    exposition *e = malloc(sizeof *e);
    char *text = scrape(m, e);
    assert_non_null(strstr(text, "# TYPE resil_adaptive_limit gauge\n"
                                 "resil_adaptive_limit{pipeline=\"orders\"} 7\n"));
    free(text);
    resil_pipeline_free(pl);
    text = scrape(m, e);
    assert_null(strstr(text, "resil_adaptive_limit"));
    free(text);
    free(e);
    resil_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_sink_writes_only_the_drop_counter),
        cmocka_unit_test(events_count_by_pipeline_strategy_and_event),
        cmocka_unit_test(a_hedges_end_is_not_counted),
        cmocka_unit_test(attempt_durations_fall_in_cumulative_buckets),
        cmocka_unit_test(label_values_are_escaped_and_read_back_exactly),
        cmocka_unit_test(full_table_drops_new_series_and_counts_them),
        cmocka_unit_test(pipeline_feeds_counters_histograms_and_gauges),
        cmocka_unit_test(registry_breakers_appear_one_gauge_per_key),
        cmocka_unit_test(writer_errors_stop_the_write),
        cmocka_unit_test(the_text_as_a_string_needs_out),
        cmocka_unit_test(options_are_checked_by_name),
        cmocka_unit_test(concurrent_recording_loses_nothing),
        cmocka_unit_test(a_pipelines_adaptive_limit_is_a_gauge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
