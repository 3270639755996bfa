/*
 * test_buf.c — the gateway's byte buffer (cli/gateway/gateway_buf.c) as
 * the gateway's own client uses it for a request head: grown once by the
 * first request on a connection, then emptied with gw_buf_reuse() and
 * written again by every later one. Reuse is checked on the storage
 * itself: still held once emptied (not freed), and the same pointer and
 * capacity once written again (not reallocated), so no request after the
 * first allocated. The client on real sockets is
 * tests/store/test_gateway_client.c.
 */
#include "test.h"

#include "gateway.h"

#define KEEP (16 * 1024) /* the bound the client keeps a head under */

static void put(gw_buf *b, const char *s) { assert_true(gw_buf_append(b, s, strlen(s))); }

/* A request head as the client writes one, for request i. */
static void write_head(gw_buf *b, int i)
{
    char line[64];
    snprintf(line, sizeof line, "GET /orders/%d HTTP/1.1\r\n", i);
    put(b, line);
    put(b, "Host: 127.0.0.1:8080\r\nAccept: */*\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n");
}

static void request_heads_after_the_first_reuse_its_storage(void **state)
{
    (void)state;
    gw_buf b = {.limit = (size_t)-1};
    write_head(&b, 0);
    char *storage = b.p;
    size_t cap = b.cap;
    assert_int_equal(cap, 1024);
    for (int i = 1; i <= 1000; i++) {
        gw_buf_reuse(&b, KEEP);
        assert_ptr_equal(b.p, storage); /* kept, not freed */
        assert_int_equal(b.len, 0);
        write_head(&b, i);
        assert_ptr_equal(b.p, storage);
        assert_int_equal(b.cap, cap);
    }
    assert_string_equal(b.p, "GET /orders/1000 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n"
                             "X-Forwarded-For: 127.0.0.1\r\n\r\n");
    gw_buf_free(&b);
}

static void storage_within_the_bound_is_kept_when_emptied(void **state)
{
    (void)state;
    gw_buf b = {.limit = (size_t)-1};
    char big[KEEP - 1];
    memset(big, 'a', sizeof big);
    assert_true(gw_buf_append(&b, big, sizeof big));
    char *storage = b.p;
    assert_int_equal(b.cap, KEEP);
    gw_buf_reuse(&b, KEEP);
    assert_ptr_equal(b.p, storage);
    assert_int_equal(b.cap, KEEP);
    assert_int_equal(b.len, 0);
    gw_buf_free(&b);
}

static void storage_past_the_bound_is_given_back_when_emptied(void **state)
{
    (void)state;
    gw_buf b = {.limit = (size_t)-1};
    char big[KEEP];
    memset(big, 'a', sizeof big);
    assert_true(gw_buf_append(&b, big, sizeof big)); /* and its NUL: 32 KiB */
    assert_int_equal(b.cap, 2 * KEEP);
    gw_buf_reuse(&b, KEEP);
    assert_null(b.p);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.len, 0);
    write_head(&b, 1);
    assert_int_equal(b.cap, 1024);
    gw_buf_free(&b);
}

static void emptying_clears_an_overflow_and_keeps_the_limit(void **state)
{
    (void)state;
    gw_buf b = {.limit = 8};
    assert_false(gw_buf_append(&b, "123456789", 9));
    assert_true(b.overflow);
    gw_buf_reuse(&b, KEEP);
    assert_false(b.overflow);
    assert_int_equal(b.limit, 8);
    assert_true(gw_buf_append(&b, "12345678", 8));
    assert_false(gw_buf_append(&b, "9", 1));
    gw_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_heads_after_the_first_reuse_its_storage),
        cmocka_unit_test(storage_within_the_bound_is_kept_when_emptied),
        cmocka_unit_test(storage_past_the_bound_is_given_back_when_emptied),
        cmocka_unit_test(emptying_clears_an_overflow_and_keeps_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
