/*
 * test_response.c — the gateway's framing of an upstream's HTTP/1.1
 * response (gw_resp_parse(), cli/gateway/gateway_response.c), without a
 * socket: the bytes are handed over as the client hands them, in pieces,
 * the unframed rest kept and given again with the next piece. Each test is
 * one framing case with its exact status, fields, body and verdict on the
 * connection. The client on real sockets is tests/store/test_gateway*.c.
 */
#include "test.h"

#include "gateway.h"

typedef struct got {
    char fields[8192];
    size_t fields_len, fields_limit; /* a limit of 0: the buffer's */
    char body[8192];
    size_t body_len, body_limit;
    gw_resp p;
    gw_resp_rc rc;
    size_t left; /* bytes not framed when it stopped */
} got;

static bool on_field(void *ud, const char *line, size_t len)
{
    got *g = ud;
    if (g->fields_limit != 0 && g->fields_len + len > g->fields_limit)
        return false;
    if (g->fields_len + len >= sizeof g->fields)
        return true; /* counted by the parser, not kept here */
    memcpy(g->fields + g->fields_len, line, len);
    g->fields_len += len;
    g->fields[g->fields_len] = '\0';
    return true;
}

static bool on_body(void *ud, const char *data, size_t len)
{
    got *g = ud;
    size_t limit = g->body_limit ? g->body_limit : sizeof g->body - 1;
    if (g->body_len + len > limit)
        return false;
    memcpy(g->body + g->body_len, data, len);
    g->body_len += len;
    g->body[g->body_len] = '\0';
    return true;
}

/* Hand text over in pieces of `piece` bytes (the first piece `first`
 * bytes when not 0), then the end of the connection when `eof`. */
static void feed_split(got *g, const char *text, bool head, size_t first, size_t piece, bool eof)
{
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    size_t pending = 0, at = 0;
    gw_resp_sink sink = {.field = on_field, .body = on_body, .ud = g};
    gw_resp_init(&g->p, head);
    g->rc = GW_RESP_MORE;
    while (at < len && g->rc == GW_RESP_MORE) {
        size_t n = at == 0 && first ? first : piece;
        if (n > len - at)
            n = len - at;
        memcpy(buf + pending, text + at, n);
        pending += n;
        at += n;
        size_t used;
        g->rc = gw_resp_parse(&g->p, buf, pending, &used, &sink);
        assert_true(used <= pending);
        memmove(buf, buf + used, pending - used);
        pending -= used;
    }
    if (g->rc == GW_RESP_MORE && eof)
        g->rc = gw_resp_eof(&g->p);
    g->left = pending + (len - at);
    free(buf);
}

static void feed(got *g, const char *text, bool eof)
{
    feed_split(g, text, false, 0, strlen(text) + 1, eof);
}

static got *new_got(void) { return calloc(1, sizeof(got)); }

/* The whole text handed over at once: a complete response. */
static got *framed(const char *text, bool eof)
{
    got *g = new_got();
    feed(g, text, eof);
    assert_int_equal(g->rc, GW_RESP_DONE);
    return g;
}

/* ---- bodies ------------------------------------------------------------------ */

static void a_content_length_body_is_taken_exactly(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhelloNEXT", false);
    assert_int_equal(g->p.status, 201);
    assert_string_equal(g->body, "hello");
    assert_string_equal(g->fields, "Content-Length: 5\r\nX-A: 1\r\n");
    assert_int_equal(g->left, 4); /* "NEXT" is not this response's */
    assert_true(g->p.keep);
    free(g);
}

static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "4\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n";

static void a_chunked_body_split_at_every_boundary_is_the_same_body(void **state)
{
    (void)state;
    for (size_t cut = 1; cut < sizeof chunked - 1; cut++) {
        got *g = new_got();
        feed_split(g, chunked, false, cut, sizeof chunked, false);
        assert_int_equal(g->rc, GW_RESP_DONE);
        assert_string_equal(g->body, "wikipedia in\r\n\r\nchunks.");
        assert_int_equal(g->left, 0);
        assert_true(g->p.keep);
        free(g);
    }
}

static void a_chunked_body_fed_a_byte_at_a_time_is_the_same_body(void **state)
{
    (void)state;
    got *g = new_got();
    feed_split(g, chunked, false, 0, 1, false);
    assert_int_equal(g->rc, GW_RESP_DONE);
    assert_string_equal(g->body, "wikipedia in\r\n\r\nchunks.");
    free(g);
}

static void chunk_extensions_are_skipped(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3;name=value;x\r\nabc\r\n2 ; q=\"1\"\r\nde\r\n0;last\r\n\r\n", false);
    assert_string_equal(g->body, "abcde");
    free(g);
}

static void chunked_trailers_go_to_the_fields_after_the_headers(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "2\r\nab\r\n0\r\nX-Checksum: 7\r\n\r\n", false);
    assert_string_equal(g->body, "ab");
    assert_string_equal(g->fields, "Transfer-Encoding: chunked\r\nX-Checksum: 7\r\n");
    free(g);
}

static void a_body_without_length_runs_to_the_close_and_the_connection_is_not_kept(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it", true);
    assert_string_equal(g->body, "all of it");
    assert_false(g->p.keep);
    free(g);
}

static void a_transfer_coding_other_than_chunked_runs_to_the_close(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n"
                    "abcd", true);
    assert_string_equal(g->body, "abcd");
    assert_false(g->p.keep);
    free(g);
}

/* ---- answers without a body ---------------------------------------------------- */

static void a_100_continue_is_skipped_and_the_final_answer_framed(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
            "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false);
    assert_int_equal(g->p.status, 200);
    assert_string_equal(g->fields, "Content-Length: 2\r\n");
    assert_string_equal(g->body, "ok");
    free(g);
}

static void a_head_answer_has_no_body_whatever_its_content_length(void **state)
{
    (void)state;
    got *g = new_got();
    feed_split(g, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", true, 0, 1000, false);
    assert_int_equal(g->rc, GW_RESP_DONE);
    assert_int_equal(g->body_len, 0);
    assert_true(g->p.keep);
    free(g);
}

static void a_204_has_no_body(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1", false);
    assert_int_equal(g->p.status, 204);
    assert_int_equal(g->body_len, 0);
    assert_int_equal(g->left, 8);
    free(g);
}

static void a_304_has_no_body_whatever_its_content_length(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", false);
    assert_int_equal(g->p.status, 304);
    assert_int_equal(g->body_len, 0);
    free(g);
}

/* ---- the connection ------------------------------------------------------------- */

static void connection_close_is_not_kept(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false);
    assert_false(g->p.keep);
    free(g);
}

static void http10_is_kept_only_with_keep_alive(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
    assert_false(g->p.keep);
    feed(g, "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", false);
    assert_int_equal(g->rc, GW_RESP_DONE);
    assert_true(g->p.keep);
    free(g);
}

/* ---- malformed: a 502, never a partial answer -------------------------------- */

static void expect_malformed(const char *text, bool eof, const char *why)
{
    got *g = new_got();
    feed(g, text, eof);
    assert_int_equal(g->rc, GW_RESP_ERROR);
    assert_string_equal(g->p.error, why);
    free(g);
}

static void an_oversized_header_block_is_malformed(void **state)
{
    (void)state;
    size_t n = GW_RESP_HEADERS_MAX + 100;
    char *text = malloc(n + 1);
    strcpy(text, "HTTP/1.1 200 OK\r\n");
    size_t at = strlen(text);
    while (at + 12 < n) {
        memcpy(text + at, "X-Pad: 123\r\n", 12);
        at += 12;
    }
    text[at] = '\0';
    got *g = new_got();
    feed_split(g, text, false, 0, 4096, false);
    assert_int_equal(g->rc, GW_RESP_ERROR);
    assert_string_equal(g->p.error, "header block too large");
    free(g);
    free(text);
}

static void a_header_line_over_the_line_limit_is_malformed(void **state)
{
    (void)state;
    size_t n = GW_RESP_LINE_MAX + 64;
    char *text = malloc(n + 1);
    strcpy(text, "HTTP/1.1 200 OK\r\nX-Long: ");
    size_t at = strlen(text);
    memset(text + at, 'a', n - at);
    text[n] = '\0';
    got *g = new_got();
    feed_split(g, text, false, 0, 4096, false);
    assert_int_equal(g->rc, GW_RESP_ERROR);
    assert_string_equal(g->p.error, "header block too large");
    free(g);
    free(text);
}

static void a_bad_chunk_size_is_malformed(void **state)
{
    (void)state;
    expect_malformed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false,
                     "bad chunk size");
    expect_malformed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", false,
                     "bad chunk size");
    expect_malformed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
                     false, "chunk size too large");
}

static void a_chunk_not_followed_by_crlf_is_malformed(void **state)
{
    (void)state;
    expect_malformed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", false,
                     "chunk not followed by CRLF");
}

static void a_content_length_with_a_sign_is_malformed(void **state)
{
    (void)state;
    expect_malformed("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", false,
                     "Content-Length is not digits");
    expect_malformed("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false,
                     "Content-Length is not digits");
}

static void a_content_length_that_overflows_is_malformed(void **state)
{
    (void)state;
    expect_malformed("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false,
                     "Content-Length too large");
}

static void content_lengths_that_differ_are_malformed(void **state)
{
    (void)state;
    expect_malformed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
                     false, "Content-Length copies differ");
}

static void equal_content_length_copies_are_one(void **state)
{
    (void)state;
    got *g = new_got();
    feed(g, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab", false);
    assert_string_equal(g->body, "ab");
    free(g);
}

/* RFC 9112 §6.3: Transfer-Encoding overrides Content-Length, and the
 * connection, which may have been smuggled on, is not reused. */
static void chunked_with_a_content_length_follows_chunked_and_is_not_kept(void **state)
{
    (void)state;
    got *g = framed("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\nabc\r\n0\r\n\r\n", false);
    assert_string_equal(g->body, "abc");
    assert_false(g->p.keep);
    free(g);
}

static void a_connection_closed_mid_body_is_an_error(void **state)
{
    (void)state;
    expect_malformed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true,
                     "connection closed before the response ended");
    expect_malformed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", true,
                     "connection closed before the response ended");
}

static void a_connection_closed_before_any_byte_says_so(void **state)
{
    (void)state;
    got *g = new_got();
    gw_resp_init(&g->p, false);
    assert_int_equal(gw_resp_eof(&g->p), GW_RESP_ERROR);
    assert_string_equal(g->p.error, "connection closed before any response");
    free(g);
}

static void a_malformed_status_line_is_malformed(void **state)
{
    (void)state;
    expect_malformed("HTTP/2 200\r\n\r\n", false, "malformed status line");
    expect_malformed("HTTP/1.1 20\r\n\r\n", false, "malformed status line");
    expect_malformed("HTTP/1.1 2000 OK\r\n\r\n", false, "malformed status line");
    expect_malformed("hello\r\n", false, "malformed status line");
    expect_malformed("HTTP/1.1 099 Low\r\n\r\n", false, "unexpected status code");
    expect_malformed("HTTP/1.1 101 Switching Protocols\r\n\r\n", false,
                     "unexpected status code");
}

static void a_body_the_sink_refuses_is_an_error(void **state)
{
    (void)state;
    got *g = new_got();
    g->body_limit = 3;
    feed(g, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false);
    assert_int_equal(g->rc, GW_RESP_ERROR);
    assert_string_equal(g->p.error, "body refused by the sink");
    free(g);
}

/* The gateway's sink refuses a field once its header buffer is full (the
 * upstream's answer is then "larger than the gateway keeps"). */
static void a_header_the_sink_refuses_is_an_error(void **state)
{
    (void)state;
    got *g = new_got();
    g->fields_limit = 20;
    feed(g, "HTTP/1.1 200 OK\r\nX-A: 1\r\nX-Long: abcdefghijklmnop\r\n\r\n", false);
    assert_int_equal(g->rc, GW_RESP_ERROR);
    assert_string_equal(g->p.error, "header refused by the sink");
    assert_string_equal(g->fields, "X-A: 1\r\n");
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_content_length_body_is_taken_exactly),
        cmocka_unit_test(a_chunked_body_split_at_every_boundary_is_the_same_body),
        cmocka_unit_test(a_chunked_body_fed_a_byte_at_a_time_is_the_same_body),
        cmocka_unit_test(chunk_extensions_are_skipped),
        cmocka_unit_test(chunked_trailers_go_to_the_fields_after_the_headers),
        cmocka_unit_test(a_body_without_length_runs_to_the_close_and_the_connection_is_not_kept),
        cmocka_unit_test(a_transfer_coding_other_than_chunked_runs_to_the_close),
        cmocka_unit_test(a_100_continue_is_skipped_and_the_final_answer_framed),
        cmocka_unit_test(a_head_answer_has_no_body_whatever_its_content_length),
        cmocka_unit_test(a_204_has_no_body),
        cmocka_unit_test(a_304_has_no_body_whatever_its_content_length),
        cmocka_unit_test(connection_close_is_not_kept),
        cmocka_unit_test(http10_is_kept_only_with_keep_alive),
        cmocka_unit_test(an_oversized_header_block_is_malformed),
        cmocka_unit_test(a_header_line_over_the_line_limit_is_malformed),
        cmocka_unit_test(a_bad_chunk_size_is_malformed),
        cmocka_unit_test(a_chunk_not_followed_by_crlf_is_malformed),
        cmocka_unit_test(a_content_length_with_a_sign_is_malformed),
        cmocka_unit_test(a_content_length_that_overflows_is_malformed),
        cmocka_unit_test(content_lengths_that_differ_are_malformed),
        cmocka_unit_test(equal_content_length_copies_are_one),
        cmocka_unit_test(chunked_with_a_content_length_follows_chunked_and_is_not_kept),
        cmocka_unit_test(a_connection_closed_mid_body_is_an_error),
        cmocka_unit_test(a_connection_closed_before_any_byte_says_so),
        cmocka_unit_test(a_malformed_status_line_is_malformed),
        cmocka_unit_test(a_body_the_sink_refuses_is_an_error),
        cmocka_unit_test(a_header_the_sink_refuses_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
