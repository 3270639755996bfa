/*
 * test_outcome.c — outcome values and the default classifier.
 */
#include "test.h"

static void ok_is_success_without_hint(void **state)
{
    (void)state;
    resil_outcome o = resil_ok();
    assert_int_equal(o.kind, RESIL_SUCCESS);
    assert_int_equal(o.code, 0);
    assert_duration_equal(o.retry_after, RESIL_NO_HINT);
    assert_string_equal(o.detail, "");
    assert_true(resil_outcome_ok(&o));
}

static void fail_keeps_kind_code_and_detail(void **state)
{
    (void)state;
    resil_outcome o = resil_fail(RESIL_TRANSIENT, 503, "service unavailable");
    assert_int_equal(o.kind, RESIL_TRANSIENT);
    assert_int_equal(o.code, 503);
    assert_string_equal(o.detail, "service unavailable");
    assert_duration_equal(o.retry_after, RESIL_NO_HINT);
    assert_false(resil_outcome_ok(&o));
}

static void fail_accepts_null_detail(void **state)
{
    (void)state;
    resil_outcome o = resil_fail(RESIL_PERMANENT, 404, NULL);
    assert_string_equal(o.detail, "");
}

static void fail_after_carries_the_hint(void **state)
{
    (void)state;
    resil_outcome o = resil_fail_after(RESIL_THROTTLED, 429, "slow down", RESIL_S(2));
    assert_int_equal(o.kind, RESIL_THROTTLED);
    assert_int_equal(o.code, 429);
    assert_duration_equal(o.retry_after, RESIL_S(2));
}

static void fail_after_zero_hint_is_a_hint(void **state)
{
    (void)state;
    resil_outcome o = resil_fail_after(RESIL_THROTTLED, 429, NULL, 0);
    assert_duration_equal(o.retry_after, 0);
}

static void fail_after_negative_hint_means_no_hint(void **state)
{
    (void)state;
    resil_outcome o = resil_fail_after(RESIL_THROTTLED, 429, NULL, RESIL_MS(-5));
    assert_duration_equal(o.retry_after, RESIL_NO_HINT);
}

static void long_detail_is_truncated_and_terminated(void **state)
{
    (void)state;
    char longtext[200];
    memset(longtext, 'x', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    resil_outcome o = resil_fail(RESIL_TRANSIENT, 1, longtext);
    assert_int_equal(strlen(o.detail), RESIL_DETAIL_MAX - 1);
    assert_int_equal(o.detail[RESIL_DETAIL_MAX - 1], '\0');
    assert_int_equal(o.detail[0], 'x');
}

static void detail_of_exactly_max_minus_one_fits(void **state)
{
    (void)state;
    char text[RESIL_DETAIL_MAX];
    memset(text, 'y', RESIL_DETAIL_MAX - 1);
    text[RESIL_DETAIL_MAX - 1] = '\0';
    resil_outcome o = resil_fail(RESIL_TRANSIENT, 1, text);
    assert_string_equal(o.detail, text);
}

static void detail_is_not_read_past_its_terminator(void **state)
{
    (void)state;
    /* A heap string of exactly 4 bytes: ASan catches any over-read. */
    char *s = malloc(4);
    memcpy(s, "abc", 4);
    resil_outcome o = resil_fail(RESIL_TRANSIENT, 1, s);
    free(s);
    assert_string_equal(o.detail, "abc");
}

/* The detail is written in 8-byte words: every length across them, in a
 * heap string of exactly its size (ASan catches a read past it), keeps the
 * text's first RESIL_DETAIL_MAX - 1 bytes and every other field. */
static void every_detail_length_keeps_text_and_fields(void **state)
{
    (void)state;
    for (size_t n = 0; n <= RESIL_DETAIL_MAX + 8; n++) {
        char *s = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)('a' + i % 26);
        s[n] = '\0';
        resil_kind kind = (resil_kind)(RESIL_KIND_USER + 7);
        resil_outcome o = resil_fail_after(kind, -1234567890123, s, RESIL_MS(1500));
        size_t kept = n < RESIL_DETAIL_MAX - 1 ? n : RESIL_DETAIL_MAX - 1;
        assert_int_equal(strlen(o.detail), kept);
        assert_memory_equal(o.detail, s, kept);
        assert_int_equal(o.kind, kind);
        assert_int_equal(o.code, -1234567890123);
        assert_duration_equal(o.retry_after, RESIL_MS(1500));
        free(s);
    }
}

static void kind_names(void **state)
{
    (void)state;
    assert_string_equal(resil_kind_name(RESIL_SUCCESS), "Success");
    assert_string_equal(resil_kind_name(RESIL_TRANSIENT), "Transient");
    assert_string_equal(resil_kind_name(RESIL_THROTTLED), "Throttled");
    assert_string_equal(resil_kind_name(RESIL_TIMEOUT), "Timeout");
    assert_string_equal(resil_kind_name(RESIL_PERMANENT), "Permanent");
    assert_string_equal(resil_kind_name(RESIL_CANCELLED), "Cancelled");
    assert_string_equal(resil_kind_name(RESIL_REJECTED), "Rejected");
    assert_string_equal(resil_kind_name(RESIL_KIND_USER), "User");
    assert_string_equal(resil_kind_name((resil_kind)(RESIL_KIND_USER + 7)), "User");
}

static void default_classifier_retries_transient_throttled_timeout(void **state)
{
    (void)state;
    resil_outcome t = resil_fail(RESIL_TRANSIENT, 0, NULL);
    resil_outcome th = resil_fail(RESIL_THROTTLED, 0, NULL);
    resil_outcome to = resil_fail(RESIL_TIMEOUT, 0, NULL);
    assert_true(resil_retry_on_default(&t, NULL));
    assert_true(resil_retry_on_default(&th, NULL));
    assert_true(resil_retry_on_default(&to, NULL));
}

static void default_classifier_refuses_everything_else(void **state)
{
    (void)state;
    resil_kind others[] = {RESIL_SUCCESS, RESIL_PERMANENT, RESIL_CANCELLED,
                           RESIL_REJECTED, RESIL_KIND_USER};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        resil_outcome o = resil_fail(others[i], 0, NULL);
        assert_false(resil_retry_on_default(&o, NULL));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ok_is_success_without_hint),
        cmocka_unit_test(fail_keeps_kind_code_and_detail),
        cmocka_unit_test(fail_accepts_null_detail),
        cmocka_unit_test(fail_after_carries_the_hint),
        cmocka_unit_test(fail_after_zero_hint_is_a_hint),
        cmocka_unit_test(fail_after_negative_hint_means_no_hint),
        cmocka_unit_test(long_detail_is_truncated_and_terminated),
        cmocka_unit_test(detail_of_exactly_max_minus_one_fits),
        cmocka_unit_test(detail_is_not_read_past_its_terminator),
        cmocka_unit_test(every_detail_length_keeps_text_and_fields),
        cmocka_unit_test(kind_names),
        cmocka_unit_test(default_classifier_retries_transient_throttled_timeout),
        cmocka_unit_test(default_classifier_refuses_everything_else),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
