/*
 * test_classify.c — the HTTP adapter's pure parts as specifications: the
 * classification table row by row, method safety, the breaker key of a URL,
 * Idempotency-Key generation, the profiles' numbers and every option's
 * validation. No network: these are functions of their inputs.
 */
#include "test.h"

#include "resil/http.h"

static resil_http_response response(CURLcode code, long status)
{
    resil_http_response r = {NULL, code, status, "GET", false, RESIL_NO_HINT, false, NULL};
    return r;
}

static resil_kind kind_of(CURLcode code, long status)
{
    resil_http_response r = response(code, status);
    return resil_http_classify(&r, true).kind;
}

/* ---- the status table ----------------------------------------------------- */

static void success_statuses_are_success(void **state)
{
    (void)state;
    assert_int_equal(kind_of(CURLE_OK, 200), RESIL_SUCCESS);
    assert_int_equal(kind_of(CURLE_OK, 204), RESIL_SUCCESS);
    assert_int_equal(kind_of(CURLE_OK, 304), RESIL_SUCCESS);
    assert_int_equal(kind_of(CURLE_OK, 399), RESIL_SUCCESS);
}

static void status_408_502_503_504_are_transient(void **state)
{
    (void)state;
    assert_int_equal(kind_of(CURLE_OK, 408), RESIL_TRANSIENT);
    assert_int_equal(kind_of(CURLE_OK, 502), RESIL_TRANSIENT);
    assert_int_equal(kind_of(CURLE_OK, 503), RESIL_TRANSIENT);
    assert_int_equal(kind_of(CURLE_OK, 504), RESIL_TRANSIENT);
}

static void status_429_is_throttled(void **state)
{
    (void)state;
    assert_int_equal(kind_of(CURLE_OK, 429), RESIL_THROTTLED);
}

static void status_500_is_transient_unless_configured(void **state)
{
    (void)state;
    resil_http_response r = response(CURLE_OK, 500);
    assert_int_equal(resil_http_classify(&r, true).kind, RESIL_TRANSIENT);
    assert_int_equal(resil_http_classify(&r, false).kind, RESIL_PERMANENT);
    assert_int_equal(resil_http_classify_default(&r, NULL).kind, RESIL_TRANSIENT);
}

static void other_client_and_server_errors_are_permanent(void **state)
{
    (void)state;
    static const long statuses[] = {400, 401, 403, 404, 405, 410, 422, 501, 505};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        assert_int_equal(kind_of(CURLE_OK, statuses[i]), RESIL_PERMANENT);
}

static void conflict_with_retry_after_and_key_is_transient(void **state)
{
    (void)state;
    resil_http_response r = response(CURLE_OK, 409);
    r.method = "POST";
    r.idempotency_key = true;
    r.retry_after = RESIL_S(1);
    resil_outcome o = resil_http_classify(&r, true);
    assert_int_equal(o.kind, RESIL_TRANSIENT);
    assert_duration_equal(o.retry_after, RESIL_S(1));
}

static void conflict_without_key_or_retry_after_is_permanent(void **state)
{
    (void)state;
    resil_http_response r = response(CURLE_OK, 409);
    r.retry_after = RESIL_S(1);
    assert_int_equal(resil_http_classify(&r, true).kind, RESIL_PERMANENT);
    r.idempotency_key = true;
    r.retry_after = RESIL_NO_HINT;
    assert_int_equal(resil_http_classify(&r, true).kind, RESIL_PERMANENT);
}

/* resil gateway's lost answer: the same bytes come back on every retry. */
static void an_unknown_outcome_is_permanent_whatever_its_status(void **state)
{
    (void)state;
    static const long statuses[] = {500, 502, 503, 504, 409};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        resil_http_response r = response(CURLE_OK, statuses[i]);
        r.method = "POST";
        r.idempotency_key = true;
        r.retry_after = RESIL_S(1);
        r.outcome_unknown = true;
        resil_outcome o = resil_http_classify(&r, true);
        assert_int_equal(o.kind, RESIL_PERMANENT);
        assert_int_equal(o.code, statuses[i]);
    }
    resil_http_response r = response(CURLE_OK, 502);
    r.outcome_unknown = true;
    assert_string_equal(resil_http_classify(&r, true).detail, "HTTP 502, outcome unknown");
}

static void status_outcome_carries_status_hint_and_detail(void **state)
{
    (void)state;
    resil_http_response r = response(CURLE_OK, 503);
    r.retry_after = RESIL_S(7);
    resil_outcome o = resil_http_classify(&r, true);
    assert_int_equal(o.code, 503);
    assert_duration_equal(o.retry_after, RESIL_S(7));
    assert_string_equal(o.detail, "HTTP 503");
}

static void failonerror_status_is_judged_by_the_status(void **state)
{
    (void)state;
    assert_int_equal(kind_of(CURLE_HTTP_RETURNED_ERROR, 503), RESIL_TRANSIENT);
    assert_int_equal(kind_of(CURLE_HTTP_RETURNED_ERROR, 404), RESIL_PERMANENT);
}

/* ---- the transfer table ------------------------------------------------------ */

static void transport_errors_are_transient(void **state)
{
    (void)state;
    static const CURLcode codes[] = {
        CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY,
        CURLE_PARTIAL_FILE,    CURLE_GOT_NOTHING,          CURLE_SEND_ERROR,
        CURLE_RECV_ERROR,      CURLE_SSL_CONNECT_ERROR,    CURLE_HTTP2,
        CURLE_HTTP2_STREAM,
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_int_equal(kind_of(codes[i], 0), RESIL_TRANSIENT);
}

static void curl_timeout_is_timeout(void **state)
{
    (void)state;
    assert_int_equal(kind_of(CURLE_OPERATION_TIMEDOUT, 0), RESIL_TIMEOUT);
}

static void tls_certificate_url_and_protocol_errors_are_permanent(void **state)
{
    (void)state;
    static const CURLcode codes[] = {
        CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE,
        CURLE_URL_MALFORMAT,            CURLE_UNSUPPORTED_PROTOCOL,
        CURLE_WRITE_ERROR,              CURLE_TOO_MANY_REDIRECTS,
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_int_equal(kind_of(codes[i], 0), RESIL_PERMANENT);
}

static void aborted_by_callback_is_cancelled(void **state)
{
    (void)state;
    assert_int_equal(kind_of(CURLE_ABORTED_BY_CALLBACK, 0), RESIL_CANCELLED);
}

static void transfer_error_wins_over_status(void **state)
{
    (void)state;
    resil_http_response r = response(CURLE_PARTIAL_FILE, 200);
    resil_outcome o = resil_http_classify(&r, true);
    assert_int_equal(o.kind, RESIL_TRANSIENT);
    assert_int_equal(o.code, CURLE_PARTIAL_FILE);
    assert_non_null(strstr(o.detail, "curl 18"));
}

/* ---- methods ------------------------------------------------------------------- */

static void safe_and_idempotent_methods_retry_without_key(void **state)
{
    (void)state;
    static const char *ok[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_true(resil_http_method_retryable(ok[i], false));
}

static void post_and_patch_retry_only_with_key(void **state)
{
    (void)state;
    assert_false(resil_http_method_retryable("POST", false));
    assert_false(resil_http_method_retryable("PATCH", false));
    assert_true(resil_http_method_retryable("POST", true));
    assert_true(resil_http_method_retryable("PATCH", true));
}

static void unknown_and_lower_case_methods_are_unsafe(void **state)
{
    (void)state;
    assert_false(resil_http_method_retryable("PURGE", false));
    assert_false(resil_http_method_retryable("get", false));
    assert_false(resil_http_method_retryable(NULL, true));
    assert_int_equal(resil_http_method_bit("get"), RESIL_HTTP_OTHER);
    assert_int_equal(resil_http_method_bit(NULL), 0);
}

static void method_list_parses_to_bits(void **state)
{
    (void)state;
    unsigned bits = 0;
    assert_int_equal(resil_http_methods_parse("POST,PATCH", &bits), 0);
    assert_int_equal(bits, RESIL_HTTP_POST | RESIL_HTTP_PATCH);
    assert_int_equal(resil_http_methods_parse("GET", &bits), 0);
    assert_int_equal(bits, RESIL_HTTP_GET);
    assert_int_equal(resil_http_methods_parse("PURGE", &bits), 0);
    assert_int_equal(bits, RESIL_HTTP_OTHER);
}

static void empty_method_lists_are_refused(void **state)
{
    (void)state;
    unsigned bits = 99;
    assert_int_equal(resil_http_methods_parse("", &bits), RESIL_EINVAL);
    assert_int_equal(resil_http_methods_parse("POST,", &bits), RESIL_EINVAL);
    assert_int_equal(resil_http_methods_parse(",POST", &bits), RESIL_EINVAL);
    assert_int_equal(resil_http_methods_parse(NULL, &bits), RESIL_EINVAL);
    assert_int_equal(bits, 99);
}

static void a_method_name_that_is_no_http_token_is_refused(void **state)
{
    (void)state;
    unsigned bits = 99;
    assert_int_equal(resil_http_methods_parse("POST;PUT", &bits), RESIL_EINVAL);
    assert_int_equal(resil_http_methods_parse("POST, PUT", &bits), RESIL_EINVAL);
    assert_int_equal(resil_http_methods_parse("GET\n", &bits), RESIL_EINVAL);
    assert_int_equal(resil_http_methods_parse("P\xc3\x96ST", &bits), RESIL_EINVAL);
    assert_int_equal(bits, 99);
}

static void every_token_character_makes_a_method_name(void **state)
{
    (void)state;
    unsigned bits = 0;
    assert_int_equal(resil_http_methods_parse("!#$%&'*+-.^_`|~09azAZ,GET", &bits), 0);
    assert_int_equal(bits, RESIL_HTTP_OTHER | RESIL_HTTP_GET);
}

static void unsafe_method_set_is_microsofts(void **state)
{
    (void)state;
    unsigned bits = 0;
    assert_int_equal(resil_http_methods_parse("POST,PATCH,PUT,DELETE,CONNECT", &bits), 0);
    assert_int_equal(bits, RESIL_HTTP_UNSAFE_METHODS);
}

/* ---- authorities ------------------------------------------------------------------ */

static void assert_authority(const char *url, const char *expected)
{
    char buf[RESIL_BREAKER_NAME_MAX];
    assert_int_equal(resil_http_authority(url, buf, sizeof buf), 0);
    assert_string_equal(buf, expected);
}

static void authority_fills_default_ports(void **state)
{
    (void)state;
    assert_authority("http://example.com/a", "http://example.com:80");
    assert_authority("https://example.com", "https://example.com:443");
    assert_authority("ws://example.com?x", "ws://example.com:80");
    assert_authority("wss://example.com#f", "wss://example.com:443");
    assert_authority("ftp://example.com/file", "ftp://example.com:21");
}

static void authority_lowercases_scheme_and_host(void **state)
{
    (void)state;
    assert_authority("HTTP://Example.COM:8080/Path", "http://example.com:8080");
}

static void authority_drops_user_info_path_query_fragment(void **state)
{
    (void)state;
    assert_authority("https://user:pw@api.example.com:8443/v1?q=1#x",
                     "https://api.example.com:8443");
}

static void authority_keeps_ipv6_literals(void **state)
{
    (void)state;
    assert_authority("http://[::1]:8080/", "http://[::1]:8080");
    assert_authority("https://[2001:db8::1]/", "https://[2001:db8::1]:443");
}

static void authority_host_follows_the_last_at_sign(void **state)
{
    (void)state;
    assert_authority("http://a@b@Host.example/", "http://host.example:80");
}

static void authority_of_a_key_is_the_key(void **state)
{
    (void)state;
    assert_authority("http://h:80:90/", "http://h:80:90");
    assert_authority("http://h:80:90", "http://h:80:90");
    assert_authority("http://[::1]x:81/", "http://[::1]x:81");
    assert_authority("http://[::1]x:81", "http://[::1]x:81");
}

static void authority_without_scheme_is_http(void **state)
{
    (void)state;
    assert_authority("example.com/x", "http://example.com:80");
}

static void authority_of_a_schemeless_url_ignores_a_url_in_its_query(void **state)
{
    (void)state;
    assert_authority("example.com/login?next=https://other.example/", "http://example.com:80");
    assert_authority("example.com:8080/a#see://x", "http://example.com:8080");
    assert_authority("a.example/b://c", "http://a.example:80");
}

static void authority_scheme_may_hold_digits_plus_dot_and_dash(void **state)
{
    (void)state;
    assert_authority("Svn+SSH://Host/repo", "svn+ssh://host");
    assert_authority("x-1.y://h:9/", "x-1.y://h:9");
    /* not a scheme: a digit first */
    assert_authority("1http://h/", "http://1http:80");
}

static void authority_of_unknown_scheme_has_no_default_port(void **state)
{
    (void)state;
    assert_authority("gopher://host/", "gopher://host");
    assert_authority("gopher://host:70/", "gopher://host:70");
}

static void authority_errors(void **state)
{
    (void)state;
    char buf[32];
    assert_int_equal(resil_http_authority("http:///path", buf, sizeof buf), RESIL_ESYNTAX);
    assert_int_equal(resil_http_authority("http://a-rather-long-host-name.example.com/",
                                          buf, sizeof buf),
                     RESIL_ERANGE);
    assert_string_equal(buf, "");
    assert_int_equal(resil_http_authority(NULL, buf, sizeof buf), RESIL_EINVAL);
}

/* ---- keys ----------------------------------------------------------------------------- */

static void uuid4_has_version_and_variant(void **state)
{
    (void)state;
    char u[RESIL_HTTP_UUID_LEN + 1];
    assert_int_equal(resil_http_uuid4(u), 0);
    assert_int_equal(strlen(u), 36);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(u[i], '-');
        else
            assert_non_null(strchr("0123456789abcdef", u[i]));
    }
    assert_int_equal(u[14], '4');
    assert_non_null(strchr("89ab", u[19]));
}

static void uuid4s_differ(void **state)
{
    (void)state;
    char a[RESIL_HTTP_UUID_LEN + 1], b[RESIL_HTTP_UUID_LEN + 1];
    assert_int_equal(resil_http_uuid4(a), 0);
    assert_int_equal(resil_http_uuid4(b), 0);
    assert_string_not_equal(a, b);
}

/* ---- profiles ------------------------------------------------------------------------ */

static void standard_profile_is_microsofts_handler(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    assert_string_equal(o.name, "http");
    assert_int_equal(o.max_concurrency, 1000);
    assert_duration_equal(o.total_timeout, RESIL_S(30));
    assert_int_equal(o.retry.max_attempts, 4);
    assert_int_equal(o.retry.backoff.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_duration_equal(o.retry.backoff.base, RESIL_S(2));
    assert_int_equal(o.retry.backoff.jitter, RESIL_JITTER_POLLY);
    assert_int_equal(o.retry.retry_after, RESIL_RETRY_AFTER_HONOR);
    assert_true(o.breakers);
    assert_int_equal(o.breaker.kind, RESIL_BREAKER_RATIO);
    assert_near(o.breaker.failure_ratio, 0.1, 1e-12);
    assert_int_equal(o.breaker.minimum_throughput, 100);
    assert_duration_equal(o.breaker.sampling_duration, RESIL_S(30));
    assert_duration_equal(o.breaker.break_duration, RESIL_S(5));
    assert_duration_equal(o.attempt_timeout, RESIL_S(10));
    assert_duration_equal(o.hedge_delay, -1);
    assert_true(o.retry_500);
    assert_int_equal(o.disable_for, 0);
    assert_false(o.retry_unsafe);
    assert_int_equal(o.body_buffer_max, 16u << 20);
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

/* Seed 004's diagram: aggressive retries (3x), fast attempt timeout
 * (500 ms), a hedging candidate, unsafe methods disabled. */
static void read_profile_is_the_diagrams_read_client(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    assert_int_equal(resil_http_opts_profile(&o, RESIL_HTTP_READ), 0);
    assert_duration_equal(o.total_timeout, RESIL_S(2));
    assert_duration_equal(o.attempt_timeout, RESIL_MS(500));
    assert_int_equal(o.retry.max_attempts, 4);
    assert_duration_equal(o.retry.backoff.base, RESIL_MS(100));
    assert_int_equal(o.retry.backoff.jitter, RESIL_JITTER_POLLY);
    assert_duration_equal(o.hedge_delay, RESIL_MS(250));
    assert_int_equal(o.max_hedged, 1);
    assert_int_equal(o.disable_for, RESIL_HTTP_UNSAFE_METHODS);
    assert_false(o.retry_unsafe);
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

/* Microsoft's standard handler exactly: its numbers, its predicate, every
 * method. */
static void microsoft_profile_is_the_standard_handler_exactly(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    assert_int_equal(resil_http_opts_profile(&o, RESIL_HTTP_MICROSOFT), 0);
    assert_int_equal(o.max_concurrency, 1000);
    assert_duration_equal(o.total_timeout, RESIL_S(30));
    assert_int_equal(o.retry.max_attempts, 4);
    assert_int_equal(o.retry.backoff.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_duration_equal(o.retry.backoff.base, RESIL_S(2));
    assert_int_equal(o.retry.backoff.jitter, RESIL_JITTER_POLLY);
    assert_int_equal(o.retry.retry_after, RESIL_RETRY_AFTER_HONOR);
    assert_near(o.breaker.failure_ratio, 0.1, 1e-12);
    assert_int_equal(o.breaker.minimum_throughput, 100);
    assert_duration_equal(o.breaker.sampling_duration, RESIL_S(30));
    assert_duration_equal(o.breaker.break_duration, RESIL_S(5));
    assert_duration_equal(o.attempt_timeout, RESIL_S(10));
    assert_ptr_equal(o.classify, resil_http_classify_microsoft);
    assert_true(o.retry_unsafe);
    assert_int_equal(o.disable_for, 0);
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    assert_string_equal(resil_http_profile_name(RESIL_HTTP_MICROSOFT), "microsoft-standard");
    resil_http_profile p;
    assert_int_equal(resil_http_profile_parse("Microsoft-Standard", &p), 0);
    assert_int_equal(p, RESIL_HTTP_MICROSOFT);
    /* and back: the standard profile takes the classifier away again */
    assert_int_equal(resil_http_opts_profile(&o, RESIL_HTTP_STANDARD), 0);
    assert_null(o.classify);
    assert_false(o.retry_unsafe);
}

static resil_outcome ms(long status, CURLcode code)
{
    resil_http_response r = {.curl_code = code, .status = status, .retry_after = RESIL_NO_HINT};
    return resil_http_classify_microsoft(&r, NULL);
}

static void microsoft_retries_every_status_from_500(void **state)
{
    (void)state;
    static const long retried[] = {500, 501, 502, 503, 504, 505, 507, 511, 599};
    for (size_t i = 0; i < sizeof retried / sizeof retried[0]; i++) {
        resil_outcome o = ms(retried[i], CURLE_OK);
        assert_int_equal(o.kind, RESIL_TRANSIENT);
        assert_int_equal(o.code, retried[i]);
    }
    assert_int_equal(ms(408, CURLE_OK).kind, RESIL_TRANSIENT);
    assert_int_equal(ms(429, CURLE_OK).kind, RESIL_THROTTLED);
}

static void microsoft_leaves_other_4xx_alone(void **state)
{
    (void)state;
    static const long kept[] = {400, 401, 403, 404, 409, 410, 422, 499};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        assert_int_equal(ms(kept[i], CURLE_OK).kind, RESIL_PERMANENT);
    assert_int_equal(ms(200, CURLE_OK).kind, RESIL_SUCCESS);
    assert_int_equal(ms(304, CURLE_OK).kind, RESIL_SUCCESS);
}

static void microsoft_retries_every_transport_failure(void **state)
{
    (void)state;
    assert_int_equal(ms(0, CURLE_COULDNT_CONNECT).kind, RESIL_TRANSIENT);
    assert_int_equal(ms(0, CURLE_PEER_FAILED_VERIFICATION).kind, RESIL_TRANSIENT);
    assert_int_equal(ms(0, CURLE_SSL_CERTPROBLEM).kind, RESIL_TRANSIENT);
    assert_int_equal(ms(0, CURLE_TOO_MANY_REDIRECTS).kind, RESIL_TRANSIENT);
    assert_int_equal(ms(0, CURLE_OPERATION_TIMEDOUT).kind, RESIL_TIMEOUT);
    assert_int_equal(ms(0, CURLE_URL_MALFORMAT).kind, RESIL_PERMANENT);
    assert_int_equal(ms(0, CURLE_UNSUPPORTED_PROTOCOL).kind, RESIL_PERMANENT);
    /* resil's own table is stricter on the same rows */
    resil_http_response r = {.curl_code = CURLE_PEER_FAILED_VERIFICATION,
                             .retry_after = RESIL_NO_HINT};
    assert_int_equal(resil_http_classify(&r, true).kind, RESIL_PERMANENT);
    r.curl_code = CURLE_OK;
    r.status = 501;
    assert_int_equal(resil_http_classify(&r, true).kind, RESIL_PERMANENT);
}

static void microsoft_keeps_the_servers_hint(void **state)
{
    (void)state;
    resil_http_response r = {.curl_code = CURLE_OK, .status = 503, .retry_after = RESIL_S(7)};
    resil_outcome o = resil_http_classify_microsoft(&r, NULL);
    assert_duration_equal(o.retry_after, RESIL_S(7));
    assert_string_equal(o.detail, "HTTP 503");
}

static void a_header_ending_in_ms_holds_milliseconds(void **state)
{
    (void)state;
    resil_duration d = -42;
    assert_int_equal(resil_http_retry_after_value("retry-after-ms", "1500", 0, &d), 0);
    assert_duration_equal(d, RESIL_MS(1500));
    assert_int_equal(resil_http_retry_after_value("x-ms-retry-after-ms", " 250 ", 0, &d), 0);
    assert_duration_equal(d, RESIL_MS(250));
    assert_int_equal(resil_http_retry_after_value("X-Throttle-Wait-MS", "-3", 0, &d), 0);
    assert_duration_equal(d, 0);
    d = -42;
    assert_int_equal(resil_http_retry_after_value("retry-after-ms", "1.5", 0, &d),
                     RESIL_ESYNTAX);
    assert_duration_equal(d, -42);
}

static void any_other_header_holds_a_retry_after_value(void **state)
{
    (void)state;
    resil_duration d;
    assert_int_equal(resil_http_retry_after_value("Retry-After", "3", 0, &d), 0);
    assert_duration_equal(d, RESIL_S(3));
    /* 1994-11-06 08:49:37 UTC is 784111777; now is 10 s before it */
    assert_int_equal(resil_http_retry_after_value("x-rate-wait", "Sun, 06 Nov 1994 08:49:37 GMT",
                                                  INT64_C(784111767) * RESIL_S(1), &d),
                     0);
    assert_duration_equal(d, RESIL_S(10));
}

static void a_hint_needs_a_header_name_and_out(void **state)
{
    (void)state;
    resil_duration d = -42;
    assert_int_equal(resil_http_retry_after_value(NULL, "3", 0, &d), RESIL_EINVAL);
    assert_int_equal(resil_http_retry_after_value("Retry-After", "3", 0, NULL), RESIL_EINVAL);
    assert_duration_equal(d, -42);
}

static void a_header_without_a_value_holds_no_hint(void **state)
{
    (void)state;
    resil_duration d = -42;
    assert_int_equal(resil_http_retry_after_value("Retry-After", NULL, 0, &d), RESIL_ESYNTAX);
    assert_duration_equal(d, -42);
}

static void write_profile_never_retries_unsafe_methods(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    assert_int_equal(resil_http_opts_profile(&o, RESIL_HTTP_WRITE), 0);
    assert_duration_equal(o.total_timeout, RESIL_S(6));
    assert_duration_equal(o.attempt_timeout, RESIL_S(2));
    assert_int_equal(o.disable_for, RESIL_HTTP_UNSAFE_METHODS);
    assert_near(o.breaker.failure_ratio, 0.2, 1e-12);
    assert_int_equal(o.breaker.minimum_throughput, 15);
    assert_duration_equal(o.breaker.sampling_duration, RESIL_S(30));
    assert_duration_equal(o.breaker.break_duration, RESIL_S(10));
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void profile_leaves_wiring_alone(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.name = "payments";
    o.body_buffer_max = 1;
    assert_int_equal(resil_http_opts_profile(&o, RESIL_HTTP_WRITE), 0);
    assert_string_equal(o.name, "payments");
    assert_int_equal(o.body_buffer_max, 1);
}

static void profile_names_round_trip(void **state)
{
    (void)state;
    resil_http_profile p;
    assert_int_equal(resil_http_profile_parse("read", &p), 0);
    assert_int_equal(p, RESIL_HTTP_READ);
    assert_string_equal(resil_http_profile_name(RESIL_HTTP_WRITE), "write");
    assert_string_equal(resil_http_profile_name(RESIL_HTTP_STANDARD), "standard");
    assert_int_equal(resil_http_profile_parse("fast", &p), RESIL_EINVAL);
    assert_string_equal(resil_http_profile_name((resil_http_profile)9), "unknown");
    resil_http_opts o;
    resil_http_opts_default(&o);
    assert_int_equal(resil_http_opts_profile(&o, (resil_http_profile)9), RESIL_EINVAL);
}

static void parsing_a_profile_needs_a_name_and_out(void **state)
{
    (void)state;
    resil_http_profile p = RESIL_HTTP_WRITE;
    assert_int_equal(resil_http_profile_parse(NULL, &p), RESIL_EINVAL);
    assert_int_equal(resil_http_profile_parse("read", NULL), RESIL_EINVAL);
    assert_int_equal(p, RESIL_HTTP_WRITE);
}

static void a_profile_needs_options_to_fill(void **state)
{
    (void)state;
    assert_int_equal(resil_http_opts_profile(NULL, RESIL_HTTP_READ), RESIL_EINVAL);
}

/* ---- validation ---------------------------------------------------------------------- */

static void assert_refused(const resil_http_opts *o, const char *field)
{
    resil_err err = {0, ""};
    assert_int_equal(resil_http_opts_validate(o, &err), RESIL_EINVAL);
    if (strstr(err.message, field) == NULL)
        fail_msg("expected '%s' in: %s", field, err.message);
    resil_http_client *c = (resil_http_client *)1;
    assert_int_equal(resil_http_client_new(o, &c, NULL), RESIL_EINVAL);
    assert_null(c);
}

static void negative_timeouts_are_refused_in_the_parsers_units(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.total_timeout = -RESIL_MS(1500);
    assert_refused(&o, "http.total_timeout must be >= 0 (0 = none), got -1.5s");
    resil_http_opts_default(&o);
    o.attempt_timeout = -1;
    assert_refused(&o, "http.attempt_timeout must be >= 0 (0 = none), got -1ns");
}

static void zero_timeouts_mean_none(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.total_timeout = 0;
    o.attempt_timeout = 0;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void attempt_timeout_over_total_is_refused(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.attempt_timeout = RESIL_S(31);
    assert_refused(&o, "http.attempt_timeout must not exceed http.total_timeout");
    o.attempt_timeout = RESIL_S(30);
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    o.total_timeout = 0; /* no total: any attempt timeout */
    o.attempt_timeout = RESIL_S(300);
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void hedging_bounds_are_checked(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.hedge_delay = -RESIL_MS(2);
    assert_refused(&o, "http.hedge_delay must be >= 0 (or -1 = no hedging), got -2ms");
    o.hedge_delay = -2;
    assert_refused(&o, "http.hedge_delay must be >= 0 (or -1 = no hedging), got -2ns");
    o.hedge_delay = 0;
    o.max_hedged = 0;
    assert_refused(&o, "http.max_hedged");
    o.max_hedged = RESIL_HEDGE_MAX + 1;
    assert_refused(&o, "http.max_hedged");
    o.max_hedged = RESIL_HEDGE_MAX;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    o.hedge_delay = -1; /* off: max_hedged is not read */
    o.max_hedged = 0;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void nested_retry_and_breaker_options_are_named(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.retry.max_attempts = 0;
    assert_refused(&o, "http.retry.max_attempts");
    resil_http_opts_default(&o);
    o.retry.max_total = RESIL_S(1);
    assert_refused(&o, "http.retry.max_total must be 0 (http.total_timeout bounds the call), "
                       "got 1s");
    resil_http_opts_default(&o);
    o.breaker.failure_ratio = 1.5;
    assert_refused(&o, "http.breaker.failure_ratio");
    resil_http_opts_default(&o);
    o.max_authorities = 0;
    assert_refused(&o, "http.max_authorities");
    o.max_authorities = RESIL_REGISTRY_MAX_LIMIT + 1;
    assert_refused(&o, "http.max_authorities");
    o.max_authorities = RESIL_REGISTRY_MAX_LIMIT;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    o.max_authorities = 1;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void breaker_options_are_not_read_without_breakers(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.breakers = false;
    o.breaker.failure_ratio = 1.5;
    o.max_authorities = 0;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void name_disable_for_and_buffer_are_checked(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.name = "";
    assert_refused(&o, "http.name");
    char name[65];
    memset(name, 'n', 64);
    name[64] = '\0';
    o.name = name;
    assert_refused(&o, "http.name must be 1 to 63 bytes");
    name[63] = '\0';
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    resil_http_opts_default(&o);
    o.disable_for = RESIL_HTTP_OTHER << 1;
    assert_refused(&o, "http.disable_for");
    o.disable_for = (RESIL_HTTP_OTHER << 1) - 1; /* every method */
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    resil_http_opts_default(&o);
    o.body_buffer_max = 0;
    assert_refused(&o, "http.body_buffer_max");
    o.body_buffer_max = 1;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
    assert_int_equal(resil_http_opts_validate(NULL, NULL), RESIL_EINVAL);
}

static void a_concurrency_past_the_bulkheads_count_is_refused_by_name(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    o.max_concurrency = (uint32_t)INT32_MAX + 1;
    assert_refused(&o, "http.max_concurrency must be at most 2147483647 (0 = unlimited), "
                       "got 2147483648");
    o.max_concurrency = UINT32_MAX;
    assert_refused(&o, "http.max_concurrency must be at most 2147483647 (0 = unlimited), "
                       "got 4294967295");
    o.max_concurrency = INT32_MAX;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void a_hint_header_that_is_no_header_name_is_refused_by_name(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    const char *empty[] = {"x-wait", "", NULL};
    o.retry_after_headers = empty;
    assert_refused(&o, "http.retry_after_headers[1] must be a header name "
                       "(letters, digits and !#$%&'*+-.^_`|~), got \"\"");
    const char *colon[] = {"Retry-After:", NULL};
    o.retry_after_headers = colon;
    assert_refused(&o, "http.retry_after_headers[0] must be a header name");
    const char *crlf[] = {"X-Wait\r\nX-Evil", NULL};
    o.retry_after_headers = crlf;
    assert_refused(&o, "http.retry_after_headers[0] must be a header name");
    const char *space[] = {"X Wait", NULL};
    o.retry_after_headers = space;
    assert_refused(&o, "http.retry_after_headers[0] must be a header name");
    const char *good[] = {"X-Wait-ms", "x_retry.after~1", NULL};
    o.retry_after_headers = good;
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(success_statuses_are_success),
        cmocka_unit_test(status_408_502_503_504_are_transient),
        cmocka_unit_test(status_429_is_throttled),
        cmocka_unit_test(status_500_is_transient_unless_configured),
        cmocka_unit_test(other_client_and_server_errors_are_permanent),
        cmocka_unit_test(conflict_with_retry_after_and_key_is_transient),
        cmocka_unit_test(conflict_without_key_or_retry_after_is_permanent),
        cmocka_unit_test(an_unknown_outcome_is_permanent_whatever_its_status),
        cmocka_unit_test(status_outcome_carries_status_hint_and_detail),
        cmocka_unit_test(failonerror_status_is_judged_by_the_status),
        cmocka_unit_test(transport_errors_are_transient),
        cmocka_unit_test(curl_timeout_is_timeout),
        cmocka_unit_test(tls_certificate_url_and_protocol_errors_are_permanent),
        cmocka_unit_test(aborted_by_callback_is_cancelled),
        cmocka_unit_test(transfer_error_wins_over_status),
        cmocka_unit_test(safe_and_idempotent_methods_retry_without_key),
        cmocka_unit_test(post_and_patch_retry_only_with_key),
        cmocka_unit_test(unknown_and_lower_case_methods_are_unsafe),
        cmocka_unit_test(method_list_parses_to_bits),
        cmocka_unit_test(empty_method_lists_are_refused),
        cmocka_unit_test(a_method_name_that_is_no_http_token_is_refused),
        cmocka_unit_test(every_token_character_makes_a_method_name),
        cmocka_unit_test(unsafe_method_set_is_microsofts),
        cmocka_unit_test(authority_fills_default_ports),
        cmocka_unit_test(authority_lowercases_scheme_and_host),
        cmocka_unit_test(authority_drops_user_info_path_query_fragment),
        cmocka_unit_test(authority_keeps_ipv6_literals),
        cmocka_unit_test(authority_host_follows_the_last_at_sign),
        cmocka_unit_test(authority_of_a_key_is_the_key),
        cmocka_unit_test(authority_without_scheme_is_http),
        cmocka_unit_test(authority_of_a_schemeless_url_ignores_a_url_in_its_query),
        cmocka_unit_test(authority_scheme_may_hold_digits_plus_dot_and_dash),
        cmocka_unit_test(authority_of_unknown_scheme_has_no_default_port),
        cmocka_unit_test(authority_errors),
        cmocka_unit_test(uuid4_has_version_and_variant),
        cmocka_unit_test(uuid4s_differ),
        cmocka_unit_test(standard_profile_is_microsofts_handler),
        cmocka_unit_test(read_profile_is_the_diagrams_read_client),
        cmocka_unit_test(microsoft_profile_is_the_standard_handler_exactly),
        cmocka_unit_test(microsoft_retries_every_status_from_500),
        cmocka_unit_test(microsoft_leaves_other_4xx_alone),
        cmocka_unit_test(microsoft_retries_every_transport_failure),
        cmocka_unit_test(microsoft_keeps_the_servers_hint),
        cmocka_unit_test(a_header_ending_in_ms_holds_milliseconds),
        cmocka_unit_test(any_other_header_holds_a_retry_after_value),
        cmocka_unit_test(a_hint_needs_a_header_name_and_out),
        cmocka_unit_test(a_header_without_a_value_holds_no_hint),
        cmocka_unit_test(write_profile_never_retries_unsafe_methods),
        cmocka_unit_test(profile_leaves_wiring_alone),
        cmocka_unit_test(profile_names_round_trip),
        cmocka_unit_test(parsing_a_profile_needs_a_name_and_out),
        cmocka_unit_test(a_profile_needs_options_to_fill),
        cmocka_unit_test(negative_timeouts_are_refused_in_the_parsers_units),
        cmocka_unit_test(a_concurrency_past_the_bulkheads_count_is_refused_by_name),
        cmocka_unit_test(a_hint_header_that_is_no_header_name_is_refused_by_name),
        cmocka_unit_test(zero_timeouts_mean_none),
        cmocka_unit_test(attempt_timeout_over_total_is_refused),
        cmocka_unit_test(hedging_bounds_are_checked),
        cmocka_unit_test(nested_retry_and_breaker_options_are_named),
        cmocka_unit_test(breaker_options_are_not_read_without_breakers),
        cmocka_unit_test(name_disable_for_and_buffer_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
