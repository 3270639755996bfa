/*
 * test_perform.c — the drop-in, end to end against the scripted server: how
 * many requests a scenario makes, what they carried, what the caller's
 * callbacks received, and how the call stopped. Waits run on the fake
 * clock, so they are exact and instant; only libcurl's own timeouts (the
 * attempt timeout scenarios) take real time.
 */
#include <pthread.h>

#include "http_fixture.h"

#define OK_STEP {.status = 200, .body = "ok\n"}

/* ---- retrying by status -------------------------------------------------- */

static void two_503s_then_200_takes_three_requests(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503}, {.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 3);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->res.attempts, 3);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(f->res.curl_code, CURLE_OK);
    assert_int_equal(f->res.outcome.kind, RESIL_SUCCESS);
}

static void attempts_are_recorded_with_their_statuses(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503}, {.status = 502}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.records_len, 3);
    assert_int_equal(f->records[0].outcome.code, 503);
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
    assert_int_equal(f->records[1].outcome.code, 502);
    assert_int_equal(f->records[2].outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->records[2].stop, RESIL_STOP_SUCCEEDED);
}

/* A success's outcome is the table's whatever the response carries: its
 * status as the code, no wait hint (even when the server sent one), no
 * detail. */
static void a_success_outcome_is_its_status_without_a_hint(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 201, .retry_after = "5", .body = "made\n"}));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->res.outcome.code, 201);
    assert_int_equal(f->res.outcome.retry_after, RESIL_NO_HINT);
    assert_string_equal(f->res.outcome.detail, "");
    assert_int_equal(f->records[0].outcome.code, 201);
}

static void status_400_takes_one_request(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 400}));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->res.status, 400);
    assert_int_equal(f->res.outcome.kind, RESIL_PERMANENT);
    assert_int_equal(fx_sleeps(f), 0);
}

static void persistent_503_uses_every_attempt(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503}));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 4);
    assert_int_equal(f->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(f->res.status, 503);
    assert_int_equal(fx_sleeps(f), 3);
}

static void status_500_is_not_retried_when_configured(void **state)
{
    fx *f = *state;
    f->opts.retry_500 = false;
    fx_script(f, "/a", FX_STEPS({.status = 500}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
}

/* ---- Retry-After ----------------------------------------------------------- */

static void retry_after_seconds_is_waited_exactly(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 429, .retry_after = "1"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(fx_sleeps(f), 1);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(1));
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
    assert_int_equal(f->records[0].outcome.kind, RESIL_THROTTLED);
}

static void retry_after_http_date_is_waited_exactly(void **state)
{
    fx *f = *state;
    char date[40];
    resil_http_date_format(FX_WALL_START / RESIL_S(1) + 5, date, sizeof date);
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = date}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_int_equal(fx_sleeps(f), 1);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(5));
}

static void retry_after_past_the_total_stops_at_once(void **state)
{
    fx *f = *state;
    f->opts.retry.retry_after_max = RESIL_S(600);
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "120"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(f->res.status, 503);
    assert_int_equal(fx_sleeps(f), 0);
}

static void retry_after_is_capped(void **state)
{
    fx *f = *state;
    f->opts.retry.retry_after_max = RESIL_S(3);
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "20"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(3));
}

static void retry_after_ms_is_waited_exactly(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503, .headers = "retry-after-ms: 1250\r\n"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_MS(1250));
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
}

static void x_ms_retry_after_ms_wins_over_retry_after(void **state)
{
    fx *f = *state;
    fx_script(f, "/a",
              FX_STEPS({.status = 429, .retry_after = "9",
                        .headers = "x-ms-retry-after-ms: 40\r\n"},
                       OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_MS(40));
}

static void a_named_hint_header_is_read_first(void **state)
{
    fx *f = *state;
    static const char *const mine[] = {"X-Wait-Seconds", NULL};
    f->opts.retry_after_headers = mine;
    fx_script(f, "/a",
              FX_STEPS({.status = 503, .retry_after = "9", .headers = "X-Wait-Seconds: 2\r\n"},
                       OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(2));
}

/* ---- the microsoft-standard profile ------------------------------------------ */

static void post_501(fx *f)
{
    f->req.method = "POST";
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/a", FX_STEPS({.status = 501}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
}

static void microsoft_profile_retries_a_keyless_post_on_501(void **state)
{
    fx *f = *state;
    resil_http_opts_profile(&f->opts, RESIL_HTTP_MICROSOFT);
    f->opts.retry.backoff.jitter = RESIL_JITTER_NONE;
    post_501(f);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(2));
}

static void standard_profile_neither_retries_a_keyless_post_nor_a_501(void **state)
{
    fx *f = *state;
    post_501(f);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.status, 501);
}

static void microsoft_profile_with_unsafe_methods_disabled_runs_a_post_once(void **state)
{
    fx *f = *state;
    resil_http_opts_profile(&f->opts, RESIL_HTTP_MICROSOFT);
    f->opts.disable_for = RESIL_HTTP_UNSAFE_METHODS;
    post_501(f);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
}

static void malformed_retry_after_falls_back_to_backoff(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "soon"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
}

static void a_repeated_retry_after_that_disagrees_falls_back_to_backoff(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "5",
                                 .headers = "Retry-After: 9\r\n"},
                                OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
}

static void a_repeated_retry_after_that_agrees_is_waited(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "5",
                                 .headers = "Retry-After: 5\r\n"},
                                OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(5));
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
}

/* A repeated millisecond hint that disagrees is no hint; Retry-After,
 * next in the search, gives the wait. */
static void a_repeated_hint_that_disagrees_gives_way_to_the_next_header(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 429, .retry_after = "7",
                                 .headers = "retry-after-ms: 40\r\nretry-after-ms: 900\r\n"},
                                OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(7));
}

/* RFC 9110 has no negative delay; resil's parser reads "-5" as "now". */
static void a_negative_retry_after_is_waited_as_no_wait(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "-5"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_duration_equal(fx_sleep_at(f, 0), 0);
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
}

/* Digits past any duration saturate, and the cap applies to that. */
static void a_retry_after_past_any_duration_waits_the_cap(void **state)
{
    fx *f = *state;
    f->opts.total_timeout = 0;
    fx_script(f, "/a", FX_STEPS({.status = 503, .retry_after = "99999999999999999999999"},
                                OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(60));
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
}

static void ignored_retry_after_uses_backoff(void **state)
{
    fx *f = *state;
    f->opts.retry.retry_after = RESIL_RETRY_AFTER_IGNORE;
    f->opts.retry.backoff.jitter = RESIL_JITTER_NONE;
    fx_script(f, "/a", FX_STEPS({.status = 429, .retry_after = "9"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(2));
    assert_int_equal(f->records[0].source, RESIL_WAIT_BACKOFF);
}

/* ---- methods and idempotency keys ------------------------------------------ */

static void post_without_key_takes_one_request(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/orders", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/orders"), 0);
    assert_int_equal(fx_count(f, "/orders"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->res.status, 503);
    assert_string_equal(f->res.key, "");
    assert_false(http_request_header(http_server_request(f->server, "/orders", 0),
                                     "Idempotency-Key", NULL, 0));
}

static void post_with_auto_key_sends_the_same_key_every_attempt(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/orders", FX_STEPS({.status = 503}, {.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/orders"), 0);
    assert_int_equal(fx_count(f, "/orders"), 3);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(strlen(f->res.key), RESIL_HTTP_UUID_LEN);
    for (size_t i = 0; i < 3; i++) {
        const http_request *r = http_server_request(f->server, "/orders", i);
        char key[300];
        assert_true(http_request_header(r, "Idempotency-Key", key, sizeof key));
        assert_string_equal(key, f->res.key);
        assert_int_equal(http_request_header_count(r, "Idempotency-Key"), 1);
        assert_string_equal(r->method, "POST");
        assert_string_equal(r->body, "order=1");
    }
}

static void each_logical_request_gets_its_own_key(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/orders", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/orders"), 0);
    char first[RESIL_HTTP_KEY_MAX + 1];
    strcpy(first, f->res.key);
    assert_int_equal(fx_perform(f, "/orders"), 0);
    assert_string_not_equal(first, f->res.key);
}

static void given_key_is_sent(void **state)
{
    fx *f = *state;
    f->req.method = "PATCH";
    f->req.key_mode = RESIL_HTTP_KEY_GIVEN;
    f->req.key = "invoice-42";
    curl_easy_setopt(f->easy, CURLOPT_CUSTOMREQUEST, "PATCH");
    fx_script(f, "/inv", FX_STEPS({.status = 502}, OK_STEP));
    assert_int_equal(fx_perform(f, "/inv"), 0);
    assert_int_equal(fx_count(f, "/inv"), 2);
    char key[64];
    assert_true(http_request_header(http_server_request(f->server, "/inv", 1),
                                    "Idempotency-Key", key, sizeof key));
    assert_string_equal(key, "invoice-42");
    assert_string_equal(f->res.key, "invoice-42");
}

static void callers_own_key_header_makes_post_retryable(void **state)
{
    fx *f = *state;
    struct curl_slist *h = curl_slist_append(NULL, "idempotency-key: mine-7");
    h = curl_slist_append(h, "X-Trace: 1");
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "x");
    f->req.method = "POST";
    f->req.headers = h;
    f->req.key_mode = RESIL_HTTP_KEY_AUTO; /* the caller's key wins */
    fx_script(f, "/p", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/p"), 0);
    assert_int_equal(fx_count(f, "/p"), 2);
    const http_request *r = http_server_request(f->server, "/p", 1);
    assert_int_equal(http_request_header_count(r, "Idempotency-Key"), 1);
    assert_int_equal(http_request_header_count(r, "X-Trace"), 1);
    assert_string_equal(f->res.key, "");
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
}

static void added_key_keeps_the_callers_headers(void **state)
{
    fx *f = *state;
    struct curl_slist *h = curl_slist_append(NULL, "X-Trace: 9");
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, h);
    f->req.method = "POST";
    f->req.headers = h;
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/p", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/p"), 0);
    const http_request *r = http_server_request(f->server, "/p", 0);
    assert_int_equal(http_request_header_count(r, "Idempotency-Key"), 1);
    assert_int_equal(http_request_header_count(r, "X-Trace"), 1);
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
}

static void retry_unsafe_retries_post_without_key(void **state)
{
    fx *f = *state;
    f->opts.retry_unsafe = true;
    f->req.method = "POST";
    fx_script(f, "/p", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/p"), 0);
    assert_int_equal(fx_count(f, "/p"), 2);
}

static void disable_for_stops_listed_methods(void **state)
{
    fx *f = *state;
    f->opts.disable_for = RESIL_HTTP_GET;
    fx_script(f, "/a", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
}

static void write_profile_runs_keyed_post_once_but_retries_get(void **state)
{
    fx *f = *state;
    resil_http_opts_profile(&f->opts, RESIL_HTTP_WRITE);
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/w", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/w"), 0);
    assert_int_equal(fx_count(f, "/w"), 1);
    f->req.method = "GET";
    f->req.key_mode = RESIL_HTTP_KEY_NONE;
    fx_script(f, "/r", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/r"), 0);
    assert_int_equal(fx_count(f, "/r"), 2);
}

static void put_and_delete_are_retried(void **state)
{
    fx *f = *state;
    f->req.method = "PUT";
    curl_easy_setopt(f->easy, CURLOPT_CUSTOMREQUEST, "PUT");
    fx_script(f, "/r", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/r"), 0);
    assert_int_equal(fx_count(f, "/r"), 2);
    f->req.method = "DELETE";
    curl_easy_setopt(f->easy, CURLOPT_CUSTOMREQUEST, "DELETE");
    fx_script(f, "/d", FX_STEPS({.status = 504}, OK_STEP));
    assert_int_equal(fx_perform(f, "/d"), 0);
    assert_int_equal(fx_count(f, "/d"), 2);
    assert_string_equal(http_server_request(f->server, "/d", 1)->method, "DELETE");
}

static void conflict_with_retry_after_for_a_keyed_post_is_retried(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/k", FX_STEPS({.status = 409, .retry_after = "2"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/k"), 0);
    assert_int_equal(fx_count(f, "/k"), 2);
    assert_duration_equal(fx_sleep_at(f, 0), RESIL_S(2));
    assert_int_equal(f->res.status, 200);
}

static void conflict_without_key_is_final(void **state)
{
    fx *f = *state;
    fx_script(f, "/k", FX_STEPS({.status = 409, .retry_after = "2"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/k"), 0);
    assert_int_equal(fx_count(f, "/k"), 1);
    assert_int_equal(f->res.status, 409);
}

/* resil gateway's answer when an upstream call's answer was lost: saved
 * for the key and replayed on every retry, so the first one is final. */
static void an_unknown_outcome_takes_one_attempt(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/o", FX_STEPS({.status = 502, .headers = "Idempotent-Outcome: unknown\r\n"},
                                OK_STEP));
    assert_int_equal(fx_perform(f, "/o"), 0);
    assert_int_equal(fx_count(f, "/o"), 1);
    assert_int_equal(f->res.attempts, 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->res.status, 502);
    assert_int_equal(f->res.outcome.kind, RESIL_PERMANENT);
    assert_string_equal(f->res.outcome.detail, "HTTP 502, outcome unknown");
    assert_int_equal(fx_sleeps(f), 0);
}

static void an_unknown_outcome_header_is_matched_in_any_case(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/o", FX_STEPS({.status = 504, .retry_after = "1",
                                 .headers = "idempotent-OUTCOME: unknown\r\n"},
                                OK_STEP));
    assert_int_equal(fx_perform(f, "/o"), 0);
    assert_int_equal(fx_count(f, "/o"), 1);
    assert_int_equal(f->res.attempts, 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(f->res.status, 504);
}

static void a_replayed_answer_is_classified_by_its_status(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/o", FX_STEPS({.status = 201, .headers = "Idempotent-Replayed: true\r\n"}));
    assert_int_equal(fx_perform(f, "/o"), 0);
    assert_int_equal(fx_count(f, "/o"), 1);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(f->res.status, 201);
    assert_int_equal(f->res.outcome.kind, RESIL_SUCCESS);
}

static void unknown_method_is_learned_from_libcurl(void **state)
{
    fx *f = *state;
    f->req.method = NULL;
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "x=1");
    fx_script(f, "/p", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/p"), 0);
    assert_int_equal(fx_count(f, "/p"), 1); /* libcurl says POST */
    curl_easy_setopt(f->easy, CURLOPT_HTTPGET, 1L);
    fx_script(f, "/g", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/g"), 0);
    assert_int_equal(fx_count(f, "/g"), 2); /* and GET here */
}

static void bad_given_keys_are_refused_before_any_request(void **state)
{
    fx *f = *state;
    f->req.key_mode = RESIL_HTTP_KEY_GIVEN;
    static const char *bad[] = {"", "two words", "line\r\nX-Evil: 1", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f->req.key = bad[i];
        assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    }
    char longkey[RESIL_HTTP_KEY_MAX + 2];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    f->req.key = longkey;
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    longkey[RESIL_HTTP_KEY_MAX] = '\0';
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
}

static void a_key_mode_out_of_range_is_refused_before_any_request(void **state)
{
    fx *f = *state;
    f->req.key_mode = (resil_http_key_mode)(RESIL_HTTP_KEY_GIVEN + 1);
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    assert_int_equal(fx_count(f, "/a"), 0);
}

/* The caller's own Idempotency-Key header is sent instead of a given
 * key, but a bad key or mode is refused all the same. */
static void a_bad_key_is_refused_even_beside_the_callers_own_key_header(void **state)
{
    fx *f = *state;
    struct curl_slist *h = curl_slist_append(NULL, "Idempotency-Key: order-7");
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, h);
    f->req.headers = h;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    f->req.key_mode = RESIL_HTTP_KEY_GIVEN;
    f->req.key = "line\r\nX-Evil: 1";
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    f->req.key = NULL;
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    f->req.key_mode = (resil_http_key_mode)(RESIL_HTTP_KEY_GIVEN + 1);
    assert_int_equal(fx_perform(f, "/a"), RESIL_EINVAL);
    assert_int_equal(fx_count(f, "/a"), 0);
    f->req.key_mode = RESIL_HTTP_KEY_GIVEN;
    f->req.key = "order-8";
    assert_int_equal(fx_perform(f, "/a"), 0);
    char key[64];
    assert_true(http_request_header(http_server_request(f->server, "/a", 0),
                                    "Idempotency-Key", key, sizeof key));
    assert_string_equal(key, "order-7");
    curl_slist_free_all(h);
}

/* ---- transfer failures -------------------------------------------------------- */

/* The first attempt is never answered, so only its timeout (real time:
 * libcurl's) ends it; the same timeout bounds the second attempt, answered
 * at once, so it is a second: far above a loopback attempt's few
 * milliseconds, and the one real wait of the test. */
static void slow_response_times_out_the_attempt(void **state)
{
    fx *f = *state;
    f->opts.attempt_timeout = RESIL_S(1);
    fx_script(f, "/slow", FX_STEPS({.hold = true}, OK_STEP));
    assert_int_equal(fx_perform(f, "/slow"), 0);
    assert_int_equal(fx_count(f, "/slow"), 2);
    assert_int_equal(f->records[0].outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_string_equal(f->body.p, "ok\n");
}

static void timeouts_on_every_attempt_end_as_timeout(void **state)
{
    fx *f = *state;
    f->opts.attempt_timeout = RESIL_MS(50);
    f->opts.retry.max_attempts = 2;
    fx_script(f, "/slow", FX_STEPS({.status = 200, .delay_ms = 3000}));
    assert_int_equal(fx_perform(f, "/slow"), 0);
    assert_int_equal(fx_count_reaching(f, "/slow", 2), 2);
    assert_int_equal(f->res.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(f->res.curl_code, CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(f->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

/* Without a total or an attempt timeout the call leaves the handle's own
 * CURLOPT_TIMEOUT_MS alone: in force for its attempts, there afterwards. */
static void a_call_without_a_deadline_keeps_the_handles_own_timeout(void **state)
{
    fx *f = *state;
    f->opts.total_timeout = 0;
    f->opts.attempt_timeout = 0;
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/slow", FX_STEPS({.status = 200, .delay_ms = 3000}));
    curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, 50L);
    assert_int_equal(fx_perform(f, "/slow"), 0);
    assert_int_equal(f->res.curl_code, CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(f->res.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(fx_count_reaching(f, "/slow", 1), 1);
    assert_int_equal(curl_easy_perform(f->easy), CURLE_OPERATION_TIMEDOUT);
}

/* With a deadline the attempt's time replaces the handle's own timeout
 * for the call, and none is put back. */
static void a_call_with_a_deadline_replaces_the_handles_timeout_and_puts_back_none(void **state)
{
    fx *f = *state;
    f->opts.attempt_timeout = RESIL_S(10);
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/late", FX_STEPS({.status = 200, .delay_ms = 200}));
    curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, 50L);
    assert_int_equal(fx_perform(f, "/late"), 0);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(f->res.curl_code, CURLE_OK);
    assert_int_equal(curl_easy_perform(f->easy), CURLE_OK);
    assert_int_equal(fx_count(f, "/late"), 2);
}

/* Calls one after another on a handle find the connection the last one
 * left: an attempt is a perform of the caller's handle, whose connection
 * cache outlives the call. */
static long connections_opened(CURL *easy)
{
    long n = -1;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &n);
    return n;
}

static void consecutive_calls_reuse_one_connection(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(connections_opened(f->easy), 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fx_perform(f, "/a"), 0);
        assert_int_equal(f->res.status, 200);
        assert_int_equal(connections_opened(f->easy), 0);
    }
    assert_int_equal(fx_count(f, "/a"), 4);
}

/* A handle that is on a multi handle cannot be performed (libcurl's rule
 * for curl_easy_perform too): the call reports it as the transfer's
 * failure, sends nothing, and leaves the handle where it was. */
static void a_handle_on_a_multi_handle_fails_without_a_request(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    CURLM *m = curl_multi_init();
    assert_int_equal(curl_multi_add_handle(m, f->easy), CURLM_OK);
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.curl_code, CURLE_FAILED_INIT);
    assert_int_equal(f->res.attempts, 1);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_int_equal(fx_count(f, "/a"), 0);
    assert_int_equal(curl_multi_remove_handle(m, f->easy), CURLM_OK);
    curl_multi_cleanup(m);
}

/* A port nobody listens on: bind one, note it, close it. */
static int closed_port(void)
{
    http_server *s = http_server_start();
    int port = http_server_port(s);
    http_server_stop(s);
    return port;
}

static void refused_connection_is_retried_then_reported(void **state)
{
    fx *f = *state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", closed_port());
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, &f->req, &f->res), 0);
    assert_int_equal(f->res.attempts, 4);
    assert_int_equal(f->res.curl_code, CURLE_COULDNT_CONNECT);
    assert_int_equal(f->res.status, 0);
    assert_int_equal(f->res.outcome.kind, RESIL_TRANSIENT);
    assert_int_equal(f->res.outcome.code, CURLE_COULDNT_CONNECT);
    assert_int_equal(f->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
}

static void dropped_reset_and_cut_off_answers_are_retried(void **state)
{
    fx *f = *state;
    fx_script(f, "/flaky",
              FX_STEPS({.status = HTTP_DROP}, {.status = HTTP_RESET},
                       {.status = 200, .body = "partial", .partial = true}, OK_STEP));
    assert_int_equal(fx_perform(f, "/flaky"), 0);
    assert_int_equal(fx_count(f, "/flaky"), 4);
    assert_int_equal(f->records[0].outcome.code, CURLE_GOT_NOTHING);
    assert_true(f->records[1].outcome.code == CURLE_RECV_ERROR ||
                f->records[1].outcome.code == CURLE_GOT_NOTHING);
    assert_int_equal(f->records[2].outcome.code, CURLE_PARTIAL_FILE);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_string_equal(f->body.p, "ok\n");
}

#define NOT_HTTP "hello world\r\n\r\n"

/* libcurl reports an answer without a status line as an unsupported
 * protocol (1): in resil's table a server that garbles its answer is not
 * asked again. */
static void an_answer_without_a_status_line_is_not_retried(void **state)
{
    fx *f = *state;
    fx_script(f, "/g", FX_STEPS({.raw = NOT_HTTP}, OK_STEP));
    assert_int_equal(fx_perform(f, "/g"), 0);
    assert_int_equal(fx_count(f, "/g"), 1);
    assert_int_equal(f->res.curl_code, CURLE_UNSUPPORTED_PROTOCOL);
    assert_int_equal(f->res.status, 0);
    assert_int_equal(f->res.outcome.kind, RESIL_PERMANENT);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
}

/* Microsoft's predicate retries every failure of a request that was
 * sent, as .NET's HttpRequestException for an invalid response; a URL
 * whose scheme libcurl cannot speak sent nothing and stays final. */
static void microsoft_profile_retries_an_answer_without_a_status_line(void **state)
{
    fx *f = *state;
    resil_http_opts_profile(&f->opts, RESIL_HTTP_MICROSOFT);
    fx_script(f, "/g", FX_STEPS({.raw = NOT_HTTP}, OK_STEP));
    assert_int_equal(fx_perform(f, "/g"), 0);
    assert_int_equal(fx_count(f, "/g"), 2);
    assert_int_equal(f->records[0].outcome.kind, RESIL_TRANSIENT);
    assert_int_equal(f->records[0].outcome.code, CURLE_UNSUPPORTED_PROTOCOL);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    curl_easy_setopt(f->easy, CURLOPT_URL, "nosuchscheme://127.0.0.1/");
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, &f->req, &f->res), 0);
    assert_int_equal(f->res.attempts, 1);
    assert_int_equal(f->res.curl_code, CURLE_UNSUPPORTED_PROTOCOL);
    assert_int_equal(f->res.outcome.kind, RESIL_PERMANENT);
}

/* libcurl refuses a header line past its limit (100 KiB): a write of
 * its own (27 before libcurl 8.6, 100 from then), which the server would
 * send again, so it is final. */
static void an_over_long_header_line_is_not_retried(void **state)
{
    fx *f = *state;
    static const char head[] = "HTTP/1.1 200 OK\r\nX-Long: ";
    static const char tail[] = "\r\nContent-Length: 0\r\n\r\n";
    size_t fill = 150 * 1024;
    char *raw = malloc(sizeof head + fill + sizeof tail);
    assert_non_null(raw);
    memcpy(raw, head, sizeof head - 1);
    memset(raw + sizeof head - 1, 'a', fill);
    memcpy(raw + sizeof head - 1 + fill, tail, sizeof tail);
    fx_script(f, "/h", FX_STEPS({.raw = raw}, OK_STEP));
    free(raw);
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_int_equal(fx_count(f, "/h"), 1);
    assert_true(f->res.curl_code == CURLE_OUT_OF_MEMORY || f->res.curl_code == 100);
    assert_int_equal(f->res.outcome.kind, RESIL_PERMANENT);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
}

/* A keyless POST whose connection drops may have reached the server:
 * it is not sent again. */
static void a_keyless_post_whose_connection_drops_is_sent_once(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/orders", FX_STEPS({.status = HTTP_DROP}, OK_STEP));
    assert_int_equal(fx_perform(f, "/orders"), 0);
    assert_int_equal(fx_count(f, "/orders"), 1);
    assert_int_equal(f->res.curl_code, CURLE_GOT_NOTHING);
    assert_int_equal(f->res.outcome.kind, RESIL_TRANSIENT);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
}

/* ---- what reaches the caller -------------------------------------------------- */

static void only_the_final_body_reaches_the_caller(void **state)
{
    fx *f = *state;
    fx_script(f, "/b", FX_STEPS({.status = 503, .body = "fail one\n"},
                                {.status = 500, .body = "fail two\n"},
                                {.status = 200, .body = "the answer\n"}));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_string_equal(f->body.p, "the answer\n");
}

static void final_failure_body_reaches_the_caller(void **state)
{
    fx *f = *state;
    f->opts.retry.max_attempts = 2;
    fx_script(f, "/b", FX_STEPS({.status = 503, .body = "first\n"},
                                {.status = 503, .body = "second\n"}));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_string_equal(f->body.p, "second\n");
}

static void only_the_final_headers_reach_the_caller(void **state)
{
    fx *f = *state;
    f->req.header_fn = fx_take;
    f->req.header_data = &f->head;
    fx_script(f, "/b", FX_STEPS({.status = 503, .headers = "X-Try: 1\r\n"},
                                {.status = 200, .headers = "X-Try: 2\r\n"}));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_non_null(strstr(f->head.p, "HTTP/1.1 200"));
    assert_non_null(strstr(f->head.p, "X-Try: 2\r\n"));
    assert_null(strstr(f->head.p, "503"));
    assert_null(strstr(f->head.p, "X-Try: 1"));
    /* one call per line, as libcurl delivers them */
    int lines = 0;
    for (const char *p = f->head.p; *p != '\0'; p++)
        lines += *p == '\n';
    assert_int_equal(f->head.calls, lines);
}

/* libcurl's rule without a header function: HEADERDATA makes the headers
 * go to the write function, with HEADERDATA as its pointer. */
static void without_a_header_function_headers_go_to_the_write_function_with_header_data(
    void **state)
{
    fx *f = *state;
    f->req.header_data = &f->head;
    fx_script(f, "/b", FX_STEPS({.status = 503, .headers = "X-Try: 1\r\n"},
                                {.status = 200, .headers = "X-Try: 2\r\n", .body = "body\n"}));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_non_null(strstr(f->head.p, "HTTP/1.1 200"));
    assert_non_null(strstr(f->head.p, "X-Try: 2\r\n"));
    assert_null(strstr(f->head.p, "X-Try: 1"));
    assert_null(strstr(f->head.p, "body"));
    assert_string_equal(f->body.p, "body\n");
}

/* A stream's whole text, read back from its start. */
static void read_back(FILE *s, char *out, size_t cap)
{
    rewind(s);
    size_t n = fread(out, 1, cap - 1, s);
    out[n] = '\0';
}

/* ... and with neither function, the body goes to WRITEDATA and the
 * headers to HEADERDATA, each a stream. */
static void without_either_function_body_and_headers_are_written_to_their_streams(void **state)
{
    fx *f = *state;
    FILE *body = tmpfile(), *head = tmpfile();
    assert_non_null(body);
    assert_non_null(head);
    f->req.write_fn = NULL;
    f->req.write_data = body;
    f->req.header_data = head;
    fx_script(f, "/b", FX_STEPS({.status = 200, .headers = "X-Try: 1\r\n", .body = "body\n"}));
    assert_int_equal(fx_perform(f, "/b"), 0);
    char text[4096];
    read_back(body, text, sizeof text);
    assert_string_equal(text, "body\n");
    read_back(head, text, sizeof text);
    assert_true(strncmp(text, "HTTP/1.1 200", 12) == 0);
    assert_non_null(strstr(text, "X-Try: 1\r\n"));
    assert_null(strstr(text, "body"));
    fclose(body);
    fclose(head);
}

static void a_body_over_the_buffer_is_streamed_and_ends_the_retrying(void **state)
{
    fx *f = *state;
    f->opts.body_buffer_max = 8;
    fx_script(f, "/big", FX_STEPS({.status = 503, .body = "a long error page\n"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/big"), 0);
    assert_int_equal(fx_count(f, "/big"), 1);
    assert_true(f->res.committed);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE);
    assert_string_equal(f->body.p, "a long error page\n");
}

static void a_body_within_the_buffer_is_not_streamed(void **state)
{
    fx *f = *state;
    f->opts.body_buffer_max = 3;
    fx_script(f, "/b", FX_STEPS({.status = 503, .body = "abc"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_int_equal(fx_count(f, "/b"), 2);
    assert_false(f->res.committed);
}

static size_t refuse(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)size;
    (void)n;
    (void)ud;
    return 0;
}

static void a_refusing_write_callback_is_a_write_error(void **state)
{
    fx *f = *state;
    f->req.write_fn = refuse;
    fx_script(f, "/b", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_int_equal(f->res.curl_code, CURLE_WRITE_ERROR);
    assert_int_equal(f->res.outcome.kind, RESIL_PERMANENT);
}

static void callers_callbacks_and_headers_are_restored(void **state)
{
    fx *f = *state;
    curl_easy_setopt(f->easy, CURLOPT_WRITEFUNCTION, fx_take);
    curl_easy_setopt(f->easy, CURLOPT_WRITEDATA, &f->body);
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/r", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/r"), 0);
    /* a plain perform afterwards: the caller's callback, no key, no timeout */
    f->body.len = 0;
    assert_int_equal(curl_easy_perform(f->easy), CURLE_OK);
    assert_string_equal(f->body.p, "ok\n");
    const http_request *r = http_server_request(f->server, "/r", 1);
    assert_int_equal(http_request_header_count(r, "Idempotency-Key"), 0);
}

static int count_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    (*(int *)ud)++;
    return 0;
}

/* Every option the call swaps, the caller's again afterwards, whatever the
 * call set in between: the header and progress callbacks with their data,
 * and the header list without the added key. */
static void every_swapped_option_is_the_callers_again(void **state)
{
    fx *f = *state;
    resil_cancel cancel;
    resil_cancel_init(&cancel, NULL);
    int progress = 0;
    struct curl_slist *headers = curl_slist_append(NULL, "X-Mine: 1");
    f->req.header_fn = fx_take;
    f->req.header_data = &f->head;
    f->req.xferinfo_fn = count_progress;
    f->req.xferinfo_data = &progress;
    f->req.cancel = &cancel;
    f->req.headers = headers;
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/r", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/r"), 0);
    assert_int_equal(f->res.status, 200);

    f->body.len = f->head.len = 0;
    f->head.p[0] = '\0';
    progress = 0;
    assert_int_equal(curl_easy_perform(f->easy), CURLE_OK);
    assert_string_equal(f->body.p, "ok\n");
    assert_non_null(strstr(f->head.p, "HTTP/1.1 200"));
    assert_true(progress > 0);
    const http_request *r = http_server_request(f->server, "/r", 1);
    assert_int_equal(http_request_header_count(r, "X-Mine"), 1);
    assert_int_equal(http_request_header_count(r, "Idempotency-Key"), 0);
    curl_slist_free_all(headers);
    resil_cancel_destroy(&cancel);
}

/* ---- breakers ------------------------------------------------------------------ */

static void breakers_are_per_authority(void **state)
{
    fx *f = *state;
    f->opts.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    f->opts.breaker.failure_threshold = 2;
    f->opts.retry.max_attempts = 1;
    http_server *other = http_server_start();
    fx_script(f, "/down", FX_STEPS({.status = 503}));
    http_server_script(other, "/up", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/down"), 0);
    assert_int_equal(fx_perform(f, "/down"), 0);
    char a[RESIL_BREAKER_NAME_MAX], b[RESIL_BREAKER_NAME_MAX];
    snprintf(a, sizeof a, "http://127.0.0.1:%d", http_server_port(f->server));
    snprintf(b, sizeof b, "http://127.0.0.1:%d", http_server_port(other));
    assert_int_equal(resil_http_client_breaker_state(f->client, a), RESIL_BREAKER_OPEN);

    /* the open authority fails fast, without a request */
    assert_int_equal(fx_perform(f, "/down"), 0);
    assert_int_equal(fx_count(f, "/down"), 2);
    assert_int_equal(f->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(f->res.status, 0);
    assert_int_equal(f->res.curl_code, CURLE_OK);

    /* another authority is untouched */
    char url[128];
    http_server_url(other, "/up", url, sizeof url);
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
    f->body.len = 0;
    assert_int_equal(resil_http_perform(f->client, f->easy, &f->req, &f->res), 0);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(http_server_count(other, "/up"), 1);
    assert_int_equal(resil_http_client_breaker_state(f->client, b), RESIL_BREAKER_CLOSED);
    http_server_stop(other);
}

static void client_errors_do_not_trip_the_breaker(void **state)
{
    fx *f = *state;
    f->opts.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    f->opts.breaker.failure_threshold = 1;
    fx_script(f, "/missing", FX_STEPS({.status = 404}));
    for (int i = 0; i < 3; i++)
        assert_int_equal(fx_perform(f, "/missing"), 0);
    assert_int_equal(fx_count(f, "/missing"), 3);
    char a[RESIL_BREAKER_NAME_MAX];
    snprintf(a, sizeof a, "http://127.0.0.1:%d", http_server_port(f->server));
    assert_int_equal(resil_http_client_breaker_state(f->client, a), RESIL_BREAKER_CLOSED);
}

static void without_breakers_there_is_no_breaker_state(void **state)
{
    fx *f = *state;
    f->opts.breakers = false;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    char a[RESIL_BREAKER_NAME_MAX];
    snprintf(a, sizeof a, "http://127.0.0.1:%d", http_server_port(f->server));
    assert_int_equal(resil_http_client_breaker_state(f->client, a), RESIL_BREAKER_NONE);
}

/* With breakers, a call's authority names its breaker: a URL whose
 * authority is too long for a breaker's name (256 bytes) is refused before
 * any request. */
static void a_url_whose_authority_cannot_name_a_breaker_is_refused(void **state)
{
    fx *f = *state;
    char url[300];
    memcpy(url, "http://", 7);
    memset(url + 7, 'h', 250);
    memcpy(url + 257, "/a", 3);
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, &f->req, &f->res), RESIL_EINVAL);
    assert_int_equal(f->body.len, 0);
}

/* ---- the thread's memo of the authority's breaker ---------------------------------- */

static void authority_of(http_server *s, char *out, size_t cap)
{
    snprintf(out, cap, "http://127.0.0.1:%d", http_server_port(s));
}

static void fail_twice_then_fast(fx *f, const char *authority)
{
    assert_int_equal(fx_perform(f, "/down"), 0);
    assert_int_equal(fx_perform(f, "/down"), 0);
    assert_int_equal(resil_http_client_breaker_state(f->client, authority), RESIL_BREAKER_OPEN);
    assert_int_equal(fx_perform(f, "/down"), 0);
    assert_int_equal(f->res.outcome.kind, RESIL_REJECTED);
}

static void paths_of_one_authority_share_the_registrys_breaker(void **state)
{
    fx *f = *state;
    f->opts.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    f->opts.breaker.failure_threshold = 2;
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/up", FX_STEPS(OK_STEP));
    fx_script(f, "/down", FX_STEPS({.status = 503}));
    char a[RESIL_BREAKER_NAME_MAX];
    authority_of(f->server, a, sizeof a);
    assert_int_equal(fx_perform(f, "/up"), 0);
    fail_twice_then_fast(f, a);
    assert_int_equal(fx_count(f, "/down"), 2);
    /* and a path never asked before finds it open too */
    assert_int_equal(fx_perform(f, "/up"), 0);
    assert_int_equal(f->res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(fx_count(f, "/up"), 1);
}

typedef struct other_thread {
    resil_http_client *client;
    http_server *servers[2];
    long status[2];
} other_thread;

static void *perform_on_other_servers(void *ud)
{
    other_thread *t = ud;
    CURL *e = curl_easy_init();
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = "GET";
    req.write_fn = fx_take;
    fx_text *sink = calloc(1, sizeof *sink);
    req.write_data = sink;
    for (int i = 0; i < 2; i++) {
        char url[128];
        http_server_url(t->servers[i], "/up", url, sizeof url);
        curl_easy_setopt(e, CURLOPT_URL, url);
        resil_http_result res;
        if (resil_http_perform(t->client, e, &req, &res) == 0)
            t->status[i] = res.status;
    }
    free(sink);
    curl_easy_cleanup(e);
    return NULL;
}

/* The main thread remembers A's breaker; another thread's calls to B and
 * C make the client's registry (room for two) evict it. The main
 * thread's next calls to A must meet the registry's new breaker for A,
 * never the evicted one it remembered. */
static void a_breaker_evicted_while_remembered_is_not_used_again(void **state)
{
    fx *f = *state;
    f->opts.max_authorities = 2;
    f->opts.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    f->opts.breaker.failure_threshold = 2;
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/up", FX_STEPS(OK_STEP));
    fx_script(f, "/down", FX_STEPS({.status = 503}));
    other_thread t = {fx_client(f), {http_server_start(), http_server_start()}, {0, 0}};
    for (int i = 0; i < 2; i++)
        http_server_script(t.servers[i], "/up", FX_STEPS(OK_STEP));
    char a[RESIL_BREAKER_NAME_MAX];
    authority_of(f->server, a, sizeof a);

    assert_int_equal(fx_perform(f, "/up"), 0);
    assert_int_equal(f->res.status, 200);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, perform_on_other_servers, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.status[0], 200);
    assert_int_equal(t.status[1], 200);
    assert_int_equal(resil_http_client_breaker_state(f->client, a), RESIL_BREAKER_NONE);

    fail_twice_then_fast(f, a);
    assert_int_equal(fx_count(f, "/down"), 2);
    for (int i = 0; i < 2; i++)
        http_server_stop(t.servers[i]);
}

/* A registry shared with the application may lose a breaker at any time
 * (here removed, to close a host's circuit by hand): every call asks it. */
static void a_shared_registry_is_asked_on_every_call(void **state)
{
    fx *f = *state;
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    ro.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    ro.breaker.failure_threshold = 2;
    ro.breaker.clock = f->opts.clock;
    resil_registry *reg;
    assert_int_equal(resil_registry_new(&ro, &reg, NULL), 0);
    f->opts.registry = reg;
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/down", FX_STEPS({.status = 503}));
    char a[RESIL_BREAKER_NAME_MAX];
    authority_of(f->server, a, sizeof a);
    fail_twice_then_fast(f, a);
    assert_int_equal(fx_count(f, "/down"), 2);

    assert_int_equal(resil_registry_remove(reg, a), 0);
    assert_int_equal(fx_perform(f, "/down"), 0);
    assert_int_equal(f->res.status, 503);
    assert_int_equal(fx_count(f, "/down"), 3);
    assert_int_equal(resil_http_client_breaker_state(f->client, a), RESIL_BREAKER_CLOSED);
    resil_http_client_free(f->client);
    f->client = NULL;
    resil_registry_free(reg);
}

/* ---- cancellation and misuse ------------------------------------------------------ */

static void a_cancelled_call_sends_nothing(void **state)
{
    fx *f = *state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    f->req.cancel = &c;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 0);
    assert_int_equal(f->res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(f->res.attempts, 0);
    assert_int_equal(f->res.status, 0);
    resil_cancel_destroy(&c);
}

static int abort_transfer(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)ud;
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return 1;
}

static void callers_progress_abort_cancels_the_call(void **state)
{
    fx *f = *state;
    f->req.xferinfo_fn = abort_transfer;
    fx_script(f, "/a", FX_STEPS({.status = 200, .delay_ms = 200}));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.curl_code, CURLE_ABORTED_BY_CALLBACK);
    assert_int_equal(f->res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(f->res.attempts, 1);
}

/* ---- the call's context ------------------------------------------------------ */

typedef struct attempt_view {
    int n;
    uint32_t attempt[4];
    uint32_t hedge[4];
    const void *user[4];
    resil_instant deadline[4];
    int judged;
    uint32_t judged_attempt[4];
    const void *judged_user[4];
} attempt_view;

static resil_outcome view_and_classify(const resil_http_response *r, void *ud)
{
    attempt_view *v = ud;
    if (v->n < 4) {
        v->attempt[v->n] = r->ctx->attempt;
        v->hedge[v->n] = r->ctx->hedge;
        v->user[v->n] = r->ctx->user;
        v->deadline[v->n] = r->ctx->deadline;
        v->n++;
    }
    return resil_http_classify_default(r, NULL);
}

static bool view_and_retry(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    attempt_view *v = ud;
    if (v->judged < 4) {
        v->judged_user[v->judged] = ctx->user;
        v->judged_attempt[v->judged++] = ctx->attempt;
    }
    return resil_retry_on_default(o, NULL);
}

static void classifiers_see_each_attempts_context(void **state)
{
    fx *f = *state;
    attempt_view v = {0};
    f->opts.classify = view_and_classify;
    f->opts.classify_ud = &v;
    f->opts.retry.retry_on = view_and_retry;
    f->opts.retry.retry_on_ud = &v;
    fx_script(f, "/a", FX_STEPS({.status = 503}, {.status = 502}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(v.n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(v.attempt[i], (uint32_t)i + 1);
        assert_int_equal(v.hedge[i], 0);
        assert_null(v.user[i]);
        assert_true(v.deadline[i] != RESIL_INSTANT_MAX); /* the attempt timeout's */
    }
    assert_int_equal(v.judged, 2);
    assert_int_equal(v.judged_attempt[0], 1);
    assert_int_equal(v.judged_attempt[1], 2);
    assert_null(v.judged_user[0]);
}

/* One classifier shared by many calls tells them apart by the request's
 * user data, which both the response classifier and the retry classifier
 * see as ctx->user, attempt after attempt. */
static void classifiers_see_the_requests_user_data(void **state)
{
    fx *f = *state;
    attempt_view v = {0};
    int mine = 0;
    f->opts.classify = view_and_classify;
    f->opts.classify_ud = &v;
    f->opts.retry.retry_on = view_and_retry;
    f->opts.retry.retry_on_ud = &v;
    f->req.user = &mine;
    fx_script(f, "/a", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(v.n, 2);
    assert_ptr_equal(v.user[0], &mine);
    assert_ptr_equal(v.user[1], &mine);
    assert_int_equal(v.judged, 1);
    assert_ptr_equal(v.judged_user[0], &mine);
}

typedef struct delay_view {
    int calls;
    uint32_t attempt;
    int code;
    void *user;
} delay_view;

static resil_duration view_and_wait(const resil_delay_info *info, void *ud)
{
    delay_view *v = ud;
    v->calls++;
    v->attempt = info->attempt;
    v->code = info->outcome->code;
    v->user = info->ctx->user;
    return RESIL_MS(7);
}

/* The policy's delay generator chooses the wait, asked with the failed
 * attempt, its outcome and the request's own user data. */
static void a_delay_generator_sees_the_requests_user_data_and_sets_the_wait(void **state)
{
    fx *f = *state;
    delay_view v = {0};
    int mine = 0;
    f->opts.retry.delay = view_and_wait;
    f->opts.retry.delay_ud = &v;
    f->req.user = &mine;
    fx_script(f, "/a", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(v.calls, 1);
    assert_int_equal(v.attempt, 1);
    assert_int_equal(v.code, 503);
    assert_ptr_equal(v.user, &mine);
    assert_int_equal(f->records[0].source, RESIL_WAIT_GENERATOR);
    assert_duration_equal(f->records[0].wait, RESIL_MS(7));
}

/* The outer call's progress callback performs a whole second call on the
 * same thread, between the outer attempt's start and its decision. */
typedef struct nested {
    fx *f;
    CURL *easy;
    resil_http_result res;
    int runs;
} nested;

static int perform_nested_once(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    nested *n = ud;
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    if (n->runs++ > 0)
        return 0;
    char url[256];
    http_server_url(n->f->server, "/inner", url, sizeof url);
    curl_easy_setopt(n->easy, CURLOPT_URL, url);
    curl_easy_setopt(n->easy, CURLOPT_WRITEFUNCTION, fx_take);
    curl_easy_setopt(n->easy, CURLOPT_WRITEDATA, &n->f->head); /* any sink */
    resil_http_request r;
    resil_http_request_default(&r);
    r.method = "GET";
    r.write_fn = fx_take;
    r.write_data = &n->f->head;
    assert_int_equal(resil_http_perform(n->f->client, n->easy, &r, &n->res), 0);
    return 0;
}

static void a_call_nested_in_another_on_one_thread_is_judged_as_itself(void **state)
{
    fx *f = *state;
    nested n = {.f = f, .easy = curl_easy_init()};
    assert_non_null(n.easy);
    fx_client(f);
    f->req.method = "POST"; /* no key: never retried */
    f->req.xferinfo_fn = perform_nested_once;
    f->req.xferinfo_data = &n;
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/orders", FX_STEPS({.status = 503, .delay_ms = 100}, OK_STEP));
    fx_script(f, "/inner", FX_STEPS({.status = 503}, OK_STEP));
    assert_int_equal(fx_perform(f, "/orders"), 0);
    assert_int_equal(n.runs > 0, 1);
    assert_int_equal(n.res.stop, RESIL_STOP_SUCCEEDED); /* the GET was retried */
    assert_int_equal(n.res.attempts, 2);
    assert_int_equal(f->res.stop, RESIL_STOP_NOT_RETRYABLE); /* the POST was not */
    assert_int_equal(f->res.attempts, 1);
    assert_int_equal(fx_count(f, "/orders"), 1);
    assert_int_equal(fx_count(f, "/inner"), 2);
    curl_easy_cleanup(n.easy);
}

/* The outer call's body arrives after a whole call nested in its progress
 * callback has run on the same thread: each body reaches its own sink. */
static void a_nested_calls_body_and_the_outer_calls_reach_their_own_sinks(void **state)
{
    fx *f = *state;
    nested n = {.f = f, .easy = curl_easy_init()};
    assert_non_null(n.easy);
    f->req.xferinfo_fn = perform_nested_once;
    f->req.xferinfo_data = &n;
    fx_script(f, "/outer", FX_STEPS({.status = 200, .body = "outer\n", .delay_ms = 100}));
    fx_script(f, "/inner", FX_STEPS({.status = 200, .body = "inner\n"}));
    assert_int_equal(fx_perform(f, "/outer"), 0);
    assert_int_equal(n.runs > 0, 1);
    assert_int_equal(n.res.status, 200);
    assert_string_equal(f->head.p, "inner\n");
    assert_int_equal(f->res.status, 200);
    assert_string_equal(f->body.p, "outer\n");
    curl_easy_cleanup(n.easy);
}

/* A blocking call's attempts do not write to the handle's CURLOPT_WRITEDATA
 * (their write callback finds its attempt without it), and afterwards the
 * handle carries the request's write data, as before. */
static void a_call_writes_to_the_requests_sink_whatever_the_handles_write_data(void **state)
{
    fx *f = *state;
    curl_easy_setopt(f->easy, CURLOPT_WRITEFUNCTION, fx_take);
    curl_easy_setopt(f->easy, CURLOPT_WRITEDATA, &f->head);
    fx_script(f, "/w", FX_STEPS({.status = 503, .body = "busy\n"}, OK_STEP));
    assert_int_equal(fx_perform(f, "/w"), 0);
    assert_int_equal(f->res.attempts, 2);
    assert_string_equal(f->body.p, "ok\n");
    assert_int_equal(f->head.len, 0);
    f->body.len = 0;
    assert_int_equal(curl_easy_perform(f->easy), CURLE_OK);
    assert_string_equal(f->body.p, "ok\n");
    assert_int_equal(f->head.len, 0);
}

static void null_arguments_are_refused(void **state)
{
    fx *f = *state;
    assert_int_equal(resil_http_perform(NULL, f->easy, &f->req, &f->res), RESIL_EINVAL);
    assert_int_equal(resil_http_perform(fx_client(f), NULL, &f->req, &f->res), RESIL_EINVAL);
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, &f->req, NULL), RESIL_EINVAL);
    assert_int_equal(resil_http_client_new(&f->opts, NULL, NULL), RESIL_EINVAL);
    resil_http_client_free(NULL);
}

static void null_request_performs_with_defaults(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS({.status = 503, .body = ""}, {.status = 204, .body = ""}));
    fx_url(f, "/a");
    /* without a method the first transfer tells: GET, so it is retried */
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, NULL, &f->res), 0);
    assert_int_equal(fx_count(f, "/a"), 2);
    assert_int_equal(f->res.status, 204);
}

/* ---- chaos ---------------------------------------------------------------- */

static resil_chaos *chaos_of(resil_chaos_kind kind, resil_duration latency)
{
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, kind);
    o.rate = 1;
    o.seed = 1;
    o.latency = latency;
    resil_chaos *c = NULL;
    resil_err err = {0, ""};
    if (resil_chaos_new(&o, &c, &err) != 0)
        fail_msg("chaos: %s", err.message);
    return c;
}

static void an_injected_fault_fails_every_attempt_without_a_request(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    resil_chaos *c = chaos_of(RESIL_CHAOS_FAULT, 0);
    resil_chaos *const list[] = {c, NULL};
    f->opts.chaos = list;
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 0);
    assert_int_equal(f->res.attempts, 4);
    assert_int_equal(f->res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_string_equal(f->res.outcome.detail, "injected fault");
    assert_int_equal(f->res.status, 0);
    assert_int_equal(f->res.curl_code, CURLE_OK);
    assert_int_equal(resil_chaos_injected(c), 4);
    resil_http_client_free(f->client);
    f->client = NULL;
    resil_chaos_free(c);
}

static void injected_latency_waits_on_the_clock_before_the_request(void **state)
{
    fx *f = *state;
    fx_script(f, "/a", FX_STEPS(OK_STEP));
    resil_chaos *c = chaos_of(RESIL_CHAOS_LATENCY, RESIL_MS(1500));
    resil_chaos *const list[] = {c, NULL};
    f->opts.chaos = list;
    assert_int_equal(fx_perform(f, "/a"), 0);
    assert_int_equal(fx_count(f, "/a"), 1);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(fx_sleeps(f), 1);
    assert_int_equal(fx_sleep_at(f, 0), RESIL_MS(1500));
    resil_http_client_free(f->client);
    f->client = NULL;
    resil_chaos_free(c);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(two_503s_then_200_takes_three_requests),
        T(a_success_outcome_is_its_status_without_a_hint),
        T(an_injected_fault_fails_every_attempt_without_a_request),
        T(injected_latency_waits_on_the_clock_before_the_request),
        T(attempts_are_recorded_with_their_statuses),
        T(status_400_takes_one_request),
        T(persistent_503_uses_every_attempt),
        T(status_500_is_not_retried_when_configured),
        T(retry_after_seconds_is_waited_exactly),
        T(retry_after_http_date_is_waited_exactly),
        T(retry_after_past_the_total_stops_at_once),
        T(retry_after_is_capped),
        T(retry_after_ms_is_waited_exactly),
        T(x_ms_retry_after_ms_wins_over_retry_after),
        T(a_named_hint_header_is_read_first),
        T(microsoft_profile_retries_a_keyless_post_on_501),
        T(standard_profile_neither_retries_a_keyless_post_nor_a_501),
        T(microsoft_profile_with_unsafe_methods_disabled_runs_a_post_once),
        T(malformed_retry_after_falls_back_to_backoff),
        T(ignored_retry_after_uses_backoff),
        T(a_repeated_retry_after_that_disagrees_falls_back_to_backoff),
        T(a_repeated_retry_after_that_agrees_is_waited),
        T(a_repeated_hint_that_disagrees_gives_way_to_the_next_header),
        T(a_negative_retry_after_is_waited_as_no_wait),
        T(a_retry_after_past_any_duration_waits_the_cap),
        T(post_without_key_takes_one_request),
        T(post_with_auto_key_sends_the_same_key_every_attempt),
        T(each_logical_request_gets_its_own_key),
        T(given_key_is_sent),
        T(callers_own_key_header_makes_post_retryable),
        T(added_key_keeps_the_callers_headers),
        T(retry_unsafe_retries_post_without_key),
        T(disable_for_stops_listed_methods),
        T(write_profile_runs_keyed_post_once_but_retries_get),
        T(put_and_delete_are_retried),
        T(conflict_with_retry_after_for_a_keyed_post_is_retried),
        T(conflict_without_key_is_final),
        T(an_unknown_outcome_takes_one_attempt),
        T(an_unknown_outcome_header_is_matched_in_any_case),
        T(a_replayed_answer_is_classified_by_its_status),
        T(unknown_method_is_learned_from_libcurl),
        T(bad_given_keys_are_refused_before_any_request),
        T(a_key_mode_out_of_range_is_refused_before_any_request),
        T(a_bad_key_is_refused_even_beside_the_callers_own_key_header),
        T(slow_response_times_out_the_attempt),
        T(timeouts_on_every_attempt_end_as_timeout),
        T(a_call_without_a_deadline_keeps_the_handles_own_timeout),
        T(a_call_with_a_deadline_replaces_the_handles_timeout_and_puts_back_none),
        T(consecutive_calls_reuse_one_connection),
        T(a_handle_on_a_multi_handle_fails_without_a_request),
        T(refused_connection_is_retried_then_reported),
        T(dropped_reset_and_cut_off_answers_are_retried),
        T(an_answer_without_a_status_line_is_not_retried),
        T(microsoft_profile_retries_an_answer_without_a_status_line),
        T(an_over_long_header_line_is_not_retried),
        T(a_keyless_post_whose_connection_drops_is_sent_once),
        T(only_the_final_body_reaches_the_caller),
        T(final_failure_body_reaches_the_caller),
        T(only_the_final_headers_reach_the_caller),
        T(without_a_header_function_headers_go_to_the_write_function_with_header_data),
        T(without_either_function_body_and_headers_are_written_to_their_streams),
        T(a_body_over_the_buffer_is_streamed_and_ends_the_retrying),
        T(a_body_within_the_buffer_is_not_streamed),
        T(a_refusing_write_callback_is_a_write_error),
        T(callers_callbacks_and_headers_are_restored),
        T(every_swapped_option_is_the_callers_again),
        T(breakers_are_per_authority),
        T(client_errors_do_not_trip_the_breaker),
        T(without_breakers_there_is_no_breaker_state),
        T(a_url_whose_authority_cannot_name_a_breaker_is_refused),
        T(paths_of_one_authority_share_the_registrys_breaker),
        T(a_breaker_evicted_while_remembered_is_not_used_again),
        T(a_shared_registry_is_asked_on_every_call),
        T(a_cancelled_call_sends_nothing),
        T(callers_progress_abort_cancels_the_call),
        T(classifiers_see_each_attempts_context),
        T(classifiers_see_the_requests_user_data),
        T(a_delay_generator_sees_the_requests_user_data_and_sets_the_wait),
        T(a_call_nested_in_another_on_one_thread_is_judged_as_itself),
        T(a_nested_calls_body_and_the_outer_calls_reach_their_own_sinks),
        T(a_call_writes_to_the_requests_sink_whatever_the_handles_write_data),
        T(null_arguments_are_refused),
        T(null_request_performs_with_defaults),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
