/*
 * test_failures.c — the exporter when the collector does not take what it
 * is sent, against the loopback receiver: a 4xx (and a 500) refused for
 * good, sent once and its spans counted failed; 429, 502, 503 and 504, a
 * dropped or reset connection and a collector that is down retried as
 * OTLP/HTTP says, after the answer's Retry-After (seconds or a date) or
 * else an exponential backoff with jitter, at most five attempts and never
 * past the export's timeout; a partial success not retried and its
 * rejected spans counted; a slow collector cut at the timeout; the queue
 * filling while the collector answers 503; the close bounded by the
 * timeout with a batch in flight; the exporter's own schedule (a lone
 * span after the schedule delay, the metrics every interval) failing and
 * retrying as a flush does. The exporter's waits are on a fake clock
 * (recorded, instant), so only the tests of the real timeout take real
 * time, a few hundred milliseconds each.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "test.h"

#include "http_server.h"
#include "otlp_check.h"
#include "resil/otlp.h"

typedef struct world {
    http_server *receiver;
    resil_fake_clock *fc; /* the exporter's */
    resil_otlp *x;
    resil_otlp_opts o;
    char endpoint[128];
    uint8_t next_id;
} world;

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->receiver = http_server_start();
    assert_non_null(w->receiver);
    http_server_url(w->receiver, "", w->endpoint, sizeof w->endpoint);
    assert_int_equal(resil_fake_clock_new(RESIL_S(1), INT64_C(1700000000000000000), &w->fc), 0);
    resil_otlp_opts_default(&w->o);
    w->o.endpoint = w->endpoint;
    w->o.clock = resil_fake_clock_clock(w->fc);
    w->o.interval = RESIL_S(3600); /* only batches and flushes export here */
    w->o.schedule_delay = RESIL_S(3600);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    /* a test that failed mid-way must not hold the free */
    http_server_release(w->receiver);
    resil_fake_clock_advance(w->fc, RESIL_S(3600));
    resil_otlp_free(w->x);
    resil_fake_clock_free(w->fc);
    http_server_stop(w->receiver);
    free(w);
    return 0;
}

static void start(world *w)
{
    resil_err err = {0, ""};
    if (resil_otlp_new(&w->o, &w->x, &err) != 0)
        fail_msg("otlp: %s", err.message);
}

static void script(world *w, const http_step *steps, size_t n)
{
    http_server_script(w->receiver, "/v1/traces", steps, n);
}

/* n execution spans, each with its own span id. */
static void offer(world *w, int n)
{
    for (int i = 0; i < n; i++) {
        resil_span s;
        memset(&s, 0, sizeof s);
        s.type = RESIL_SPAN_EXECUTION;
        s.name = "execution";
        memset(s.trace_id, 0x4b, sizeof s.trace_id);
        s.span_id[7] = ++w->next_id;
        s.flags = 1;
        s.tracestate = "";
        s.start_unix_ns = INT64_C(1700000000000000000);
        s.end_unix_ns = s.start_unix_ns + RESIL_MS(10);
        s.pipeline = "orders";
        s.operation = "GetOrder";
        s.attempt = 1;
        resil_otlp_on_span(&s, w->x);
    }
}

static resil_otlp_stats stats(world *w)
{
    resil_otlp_stats st;
    resil_otlp_get_stats(w->x, &st);
    return st;
}

static size_t sent(world *w) { return http_server_count(w->receiver, "/v1/traces"); }

/* The spans of the i-th request, checked against the OTLP encoding. */
static size_t spans_in(world *w, size_t i)
{
    const http_request *r = http_server_request(w->receiver, "/v1/traces", i);
    if (r == NULL)
        fail_msg("no request %zu", i);
    char why[512];
    json_t *root = otlp_check_traces(r->body, r->body_len, why, sizeof why);
    if (root == NULL)
        fail_msg("invalid OTLP JSON: %s", why);
    json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    size_t n = json_array_size(json_object_get(ss, "spans"));
    json_decref(root);
    return n;
}

static void same_body(world *w, size_t i, size_t j)
{
    const http_request *a = http_server_request(w->receiver, "/v1/traces", i);
    const http_request *b = http_server_request(w->receiver, "/v1/traces", j);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->body_len, b->body_len);
    assert_memory_equal(a->body, b->body, a->body_len);
}

static size_t waits(world *w) { return resil_fake_clock_sleep_count(w->fc); }
static resil_duration wait_at(world *w, size_t i) { return resil_fake_clock_sleep_at(w->fc, i); }

static void expect_stats(world *w, uint64_t requests, uint64_t failed_requests, uint64_t exported,
                         uint64_t failed)
{
    resil_otlp_stats st = stats(w);
    assert_int_equal(st.requests, requests);
    assert_int_equal(st.failed_requests, failed_requests);
    assert_int_equal(st.spans_exported, exported);
    assert_int_equal(st.spans_failed, failed);
}

/* ---- refused for good ------------------------------------------------------------ */

/* A status OTLP/HTTP says must not be retried: sent once, refused, its
 * spans counted failed, nothing waited for. */
static void expect_refused_once(int status)
{
    world *w = NULL;
    setup((void **)&w);
    script(w, (const http_step[]){{.status = status}, {.status = 200}}, 2);
    start(w);
    offer(w, 3);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    assert_int_equal(sent(w), 1);
    assert_int_equal(waits(w), 0);
    expect_stats(w, 1, 1, 0, 3);
    assert_int_equal(stats(w).spans_queued, 3);
    teardown((void **)&w);
}

static void a_400_is_not_retried_and_its_spans_are_counted_failed(void **state)
{
    (void)state;
    expect_refused_once(400);
}

static void a_401_403_404_and_413_are_not_retried(void **state)
{
    (void)state;
    expect_refused_once(401);
    expect_refused_once(403);
    expect_refused_once(404);
    expect_refused_once(413);
}

static void a_500_and_a_501_are_not_retried(void **state)
{
    (void)state;
    expect_refused_once(500);
    expect_refused_once(501);
}

static void the_next_batch_after_a_refused_one_is_sent(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 400}, {.status = 200}}, 2);
    start(w);
    offer(w, 3);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 2);
    assert_int_equal(spans_in(w, 1), 2);
    expect_stats(w, 2, 1, 2, 3);
}

/* ---- retried ------------------------------------------------------------------- */

/* `status` then 200: sent twice, the same bytes, taken. */
static void expect_retried_once(int status)
{
    world *w = NULL;
    setup((void **)&w);
    script(w, (const http_step[]){{.status = status}, {.status = 200}}, 2);
    start(w);
    offer(w, 3);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 2);
    same_body(w, 0, 1);
    assert_int_equal(waits(w), 1);
    expect_stats(w, 2, 1, 3, 0);
    teardown((void **)&w);
}

static void a_429_502_503_and_504_are_retried_with_the_same_body(void **state)
{
    (void)state;
    expect_retried_once(429);
    expect_retried_once(502);
    expect_retried_once(503);
    expect_retried_once(504);
}

static void without_retry_after_the_waits_grow_exponentially_with_jitter(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 503}, {.status = 503}, {.status = 503}, {.status = 200}},
           4);
    start(w);
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 4);
    assert_int_equal(waits(w), 3);
    /* 1 s doubling, half of each wait drawn at random */
    for (size_t i = 0; i < 3; i++) {
        resil_duration base = RESIL_S(1) << i;
        assert_true(wait_at(w, i) >= base / 2);
        assert_true(wait_at(w, i) < base);
    }
    expect_stats(w, 4, 3, 2, 0);
}

static void a_retry_after_in_seconds_is_the_wait(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 429, .retry_after = "3"}, {.status = 200}}, 2);
    start(w);
    offer(w, 1);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 2);
    assert_int_equal(waits(w), 1);
    assert_duration_equal(wait_at(w, 0), RESIL_S(3));
}

static void a_retry_after_date_is_the_wait_until_it(void **state)
{
    world *w = *state;
    /* the fake wall clock reads 1700000000 s, Tue, 14 Nov 2023 22:13:20 GMT */
    script(w,
           (const http_step[]){{.status = 503, .retry_after = "Tue, 14 Nov 2023 22:13:22 GMT"},
                               {.status = 200}},
           2);
    start(w);
    offer(w, 1);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(waits(w), 1);
    assert_duration_equal(wait_at(w, 0), RESIL_S(2));
}

static void an_unreadable_retry_after_falls_back_to_the_backoff(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 503, .retry_after = "soon"}, {.status = 200}}, 2);
    start(w);
    offer(w, 1);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(waits(w), 1);
    assert_true(wait_at(w, 0) >= RESIL_MS(500) && wait_at(w, 0) < RESIL_S(1));
}

static void a_retry_after_past_the_timeout_ends_the_export_at_once(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 503, .retry_after = "10"}, {.status = 200}}, 2);
    start(w); /* the timeout: 10 s */
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    assert_int_equal(sent(w), 1);
    assert_int_equal(waits(w), 0);
    expect_stats(w, 1, 1, 0, 2);
}

static void an_export_is_attempted_five_times_at_most(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 503, .retry_after = "0"}}, 1);
    start(w);
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    assert_int_equal(sent(w), 5);
    assert_int_equal(waits(w), 4);
    for (size_t i = 1; i < 5; i++)
        same_body(w, 0, i);
    expect_stats(w, 5, 5, 0, 2);
}

static void the_backoff_stops_where_the_next_wait_would_pass_the_timeout(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 503}}, 1);
    /* the first wait, in [0.5 s, 1 s), fits in 1 s; the second, in
     * [1 s, 2 s), no longer does */
    w->o.timeout = RESIL_S(1);
    start(w);
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    assert_int_equal(sent(w), 2);
    assert_int_equal(waits(w), 1);
    expect_stats(w, 2, 2, 0, 2);
}

static void a_dropped_connection_is_retried(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = HTTP_DROP}, {.status = 200}}, 2);
    start(w);
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 2);
    same_body(w, 0, 1);
    expect_stats(w, 2, 1, 2, 0);
}

static void a_reset_connection_is_retried(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = HTTP_RESET}, {.status = 200}}, 2);
    start(w);
    offer(w, 2);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 2);
    expect_stats(w, 2, 1, 2, 0);
}

static void a_collector_that_is_down_is_retried_then_its_spans_counted_failed(void **state)
{
    world *w = *state;
    /* a port that was just listened on and is closed now: refused */
    http_server *gone = http_server_start();
    assert_non_null(gone);
    char url[128];
    http_server_url(gone, "", url, sizeof url);
    http_server_stop(gone);
    w->o.endpoint = url;
    w->o.timeout = RESIL_S(1); /* room for one wait of the backoff */
    start(w);
    offer(w, 3);
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    assert_int_equal(waits(w), 1);
    expect_stats(w, 2, 2, 0, 3);
}

/* ---- partial success ------------------------------------------------------------- */

static void a_partial_success_is_not_retried_and_its_rejected_spans_count_failed(void **state)
{
    world *w = *state;
    script(w,
           (const http_step[]){{.status = 200,
                                .headers = "Content-Type: application/json\r\n",
                                .body = "{\"partialSuccess\":{\"rejectedSpans\":\"2\","
                                        "\"errorMessage\":\"2 spans too old\"}}"}},
           1);
    start(w);
    offer(w, 5);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 1);
    assert_int_equal(waits(w), 0);
    expect_stats(w, 1, 0, 3, 2);
}

static void a_partial_success_counting_as_a_number_is_read_too(void **state)
{
    world *w = *state;
    script(w,
           (const http_step[]){
               {.status = 200, .body = "{ \"partialSuccess\" : { \"rejectedSpans\" : 1 } }"}},
           1);
    start(w);
    offer(w, 4);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    expect_stats(w, 1, 0, 3, 1);
}

static void a_partial_success_that_only_warns_counts_every_span_exported(void **state)
{
    world *w = *state;
    script(w,
           (const http_step[]){{.status = 200,
                                .body = "{\"partialSuccess\":{\"errorMessage\":\"rejectedSpans "
                                        "soon: \\\"rejectedSpans\\\":9\"}}"}},
           1);
    start(w);
    offer(w, 4);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    expect_stats(w, 1, 0, 4, 0);
}

static void a_message_that_names_rejected_spans_rejects_nothing(void **state)
{
    world *w = *state;
    script(w,
           (const http_step[]){
               {.status = 200, .body = "{\"partialSuccess\":{\"errorMessage\":\"rejectedSpans\"}}"}},
           1);
    start(w);
    offer(w, 4);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    expect_stats(w, 1, 0, 4, 0);
}

static void a_partial_success_rejecting_more_than_was_sent_fails_the_batch_only(void **state)
{
    world *w = *state;
    script(w,
           (const http_step[]){
               {.status = 200, .body = "{\"partialSuccess\":{\"rejectedSpans\":\"99\"}}"}},
           1);
    start(w);
    offer(w, 4);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    expect_stats(w, 1, 0, 0, 4);
}

/* ---- time ------------------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool one_batch_failed(void *ud)
{
    resil_otlp_stats st;
    resil_otlp_get_stats(ud, &st);
    return st.spans_failed == 1;
}

/* The exporter's own schedule, no flush: a lone span goes when it has
 * waited the schedule delay, and a refusal then is counted as a flush's.
 * The thread is first put to sleep for the metrics' interval (a minute):
 * flushing nothing returns only once it waits again, so the span comes to
 * a thread that must be woken for it. */
static void a_lone_span_refused_after_the_schedule_delay_is_counted(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 400}}, 1);
    w->o.schedule_delay = RESIL_MS(20);
    start(w);
    assert_int_equal(resil_otlp_flush(w->x), 0);
    offer(w, 1);
    assert_true(test_wait_until(one_batch_failed, w->x, 5));
    assert_int_equal(sent(w), 1);
    expect_stats(w, 1, 1, 0, 1);
}

static bool two_requests(void *ud)
{
    resil_otlp_stats st;
    resil_otlp_get_stats(ud, &st);
    return st.requests >= 2;
}

static void the_metrics_interval_exports_and_retries_on_its_own(void **state)
{
    world *w = *state;
    http_server_script(w->receiver, "/v1/metrics",
                       (const http_step[]){{.status = 503, .retry_after = "1"}, {.status = 200}},
                       2);
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);
    w->o.metrics = m;
    w->o.interval = RESIL_MS(20);
    start(w);
    /* the retry follows at once: its wait is on the fake clock */
    assert_true(test_wait_until(two_requests, w->x, 5));
    assert_int_equal(stats(w).failed_requests, 1);
    assert_duration_equal(wait_at(w, 0), RESIL_S(1));
    resil_otlp_free(w->x);
    w->x = NULL;
    resil_metrics_free(m);
}

static void null_handles_are_ignored(void **state)
{
    world *w = *state;
    start(w);
    resil_otlp_on_span(NULL, w->x);
    resil_otlp_on_span(NULL, NULL);
    resil_otlp_get_stats(NULL, NULL);
    resil_otlp_stats st;
    resil_otlp_get_stats(w->x, NULL);
    resil_otlp_get_stats(w->x, &st);
    assert_int_equal(st.spans_queued + st.spans_dropped, 0);
    assert_int_equal(resil_otlp_close(NULL), 0);
    resil_otlp_free(NULL);
}

static void a_slow_collector_is_cut_at_the_timeout_and_not_retried(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 200, .delay_ms = 5000}}, 1);
    w->o.timeout = RESIL_MS(200);
    start(w);
    offer(w, 2);
    int64_t t0 = mono_ms();
    assert_int_equal(resil_otlp_flush(w->x), RESIL_EIO);
    int64_t took = mono_ms() - t0;
    assert_true(took >= 190);  /* the timeout is waited for ... */
    assert_true(took < 5000); /* ... and ends the request (the collector would take 5 s) */
    assert_int_equal(sent(w), 1);
    assert_int_equal(waits(w), 0);
    expect_stats(w, 1, 1, 0, 2);
}

static void the_queue_fills_and_drops_while_the_collector_answers_503(void **state)
{
    world *w = *state;
    script(w, (const http_step[]){{.status = 503}, {.status = 200}}, 2);
    resil_fake_clock_set_manual(w->fc, true);
    w->o.max_queue = 4;
    w->o.max_batch = 2;
    start(w);
    offer(w, 2); /* a full batch: sent, refused with 503, then the backoff */
    resil_fake_clock_await_sleepers(w->fc, 1);
    offer(w, 5); /* the batch waiting keeps its two slots: two more fit */
    resil_otlp_stats st = stats(w);
    assert_int_equal(st.spans_queued, 4);
    assert_int_equal(st.spans_dropped, 3);
    resil_fake_clock_advance(w->fc, RESIL_S(1)); /* past the wait, in [0.5 s, 1 s) */
    assert_int_equal(resil_otlp_flush(w->x), 0);
    assert_int_equal(sent(w), 3);
    same_body(w, 0, 1);
    assert_int_equal(spans_in(w, 2), 2);
    expect_stats(w, 3, 1, 4, 0);
    assert_int_equal(stats(w).spans_dropped, 3);
}

static void closing_with_a_batch_in_flight_ends_within_the_timeout(void **state)
{
    world *w = *state;
    /* the collector takes every request and never answers */
    script(w, (const http_step[]){{.status = 200, .hold = true}}, 1);
    w->o.clock = NULL; /* the real timeout, on the system clock */
    w->o.timeout = RESIL_MS(300);
    w->o.max_batch = 2;
    start(w);
    offer(w, 2); /* in flight */
    assert_true(http_server_wait_held(w->receiver, 1));
    offer(w, 4); /* two batches behind it */
    nanosleep(&(struct timespec){0, 150 * 1000000}, NULL);
    int64_t t0 = mono_ms();
    /* the batch in flight is cut at its own timeout, about 150 ms from
     * now; the close's drain then sends the next until the close's own
     * timeout, 300 ms from now, cuts it too; the last is not sent. A sleep
     * that overran the first batch's timeout (a loaded machine) lets the
     * second go out before the close and the third within it, so the
     * count is 2 or 3; the close's own bound holds either way. */
    assert_int_equal(resil_otlp_close(w->x), RESIL_EIO);
    w->x = NULL;
    int64_t took = mono_ms() - t0;
    assert_true(took >= 250);  /* the close's timeout, less the clocks' slack */
    assert_true(took < 5000); /* and no later than a guard against a hang */
    assert_in_range(sent(w), 2, 3);
    assert_int_equal(spans_in(w, 1), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_400_is_not_retried_and_its_spans_are_counted_failed),
        cmocka_unit_test(a_401_403_404_and_413_are_not_retried),
        cmocka_unit_test(a_500_and_a_501_are_not_retried),
        cmocka_unit_test_setup_teardown(the_next_batch_after_a_refused_one_is_sent, setup,
                                        teardown),
        cmocka_unit_test(a_429_502_503_and_504_are_retried_with_the_same_body),
        cmocka_unit_test_setup_teardown(without_retry_after_the_waits_grow_exponentially_with_jitter,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_retry_after_in_seconds_is_the_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(a_retry_after_date_is_the_wait_until_it, setup, teardown),
        cmocka_unit_test_setup_teardown(an_unreadable_retry_after_falls_back_to_the_backoff, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_retry_after_past_the_timeout_ends_the_export_at_once,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_export_is_attempted_five_times_at_most, setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_backoff_stops_where_the_next_wait_would_pass_the_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(a_dropped_connection_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(a_reset_connection_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_collector_that_is_down_is_retried_then_its_spans_counted_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_partial_success_is_not_retried_and_its_rejected_spans_count_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(a_partial_success_counting_as_a_number_is_read_too, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_partial_success_that_only_warns_counts_every_span_exported, setup, teardown),
        cmocka_unit_test_setup_teardown(a_message_that_names_rejected_spans_rejects_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_partial_success_rejecting_more_than_was_sent_fails_the_batch_only, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lone_span_refused_after_the_schedule_delay_is_counted,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(the_metrics_interval_exports_and_retries_on_its_own, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(null_handles_are_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(a_slow_collector_is_cut_at_the_timeout_and_not_retried,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(the_queue_fills_and_drops_while_the_collector_answers_503,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(closing_with_a_batch_in_flight_ends_within_the_timeout,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
