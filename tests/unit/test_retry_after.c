/*
 * test_retry_after.c — Retry-After values and HTTP-dates: the three date
 * forms (RFC 9110's own examples), delta-seconds, the "past or negative is
 * 0" and "too large saturates" rules, and one test per kind of malformed
 * text, each of which must be RESIL_ESYNTAX rather than a guessed wait.
 */
#include "test.h"

/* RFC 9110 §5.6.7's example instant, in its three spellings. */
#define RFC_EXAMPLE INT64_C(784111777)
#define IMF "Sun, 06 Nov 1994 08:49:37 GMT"
#define RFC850 "Sunday, 06-Nov-94 08:49:37 GMT"
#define ASCTIME "Sun Nov  6 08:49:37 1994"

/* 2025-06-15 12:00:00 UTC, a Sunday. */
#define NOW_S INT64_C(1749988800)
#define NOW_NS (NOW_S * INT64_C(1000000000))

static int retry_after(const char *text, resil_duration *out)
{
    return resil_retry_after_parse(text, strlen(text), NOW_NS, out);
}

static int date(const char *text, int64_t *out)
{
    return resil_http_date_parse(text, strlen(text), out);
}

static void assert_syntax_error(const char *text, size_t len)
{
    resil_duration wait = -42;
    int64_t when = -42;
    assert_int_equal(resil_retry_after_parse(text, len, NOW_NS, &wait), RESIL_ESYNTAX);
    assert_int_equal(resil_http_date_parse(text, len, &when), RESIL_ESYNTAX);
    assert_int_equal(resil_http_date_parse_at(text, len, NOW_S, &when), RESIL_ESYNTAX);
    assert_int_equal(wait, -42);
    assert_int_equal(when, -42);
}

#define ASSERT_SYNTAX_ERROR(literal) assert_syntax_error(literal, sizeof(literal) - 1)

/* ---- delta-seconds -------------------------------------------------------- */

static void delta_seconds_is_that_many_seconds(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(retry_after("120", &wait), 0);
    assert_duration_equal(wait, RESIL_S(120));
}

static void delta_zero_is_no_wait(void **state)
{
    (void)state;
    resil_duration wait = -1;
    assert_int_equal(retry_after("0", &wait), 0);
    assert_duration_equal(wait, 0);
}

static void delta_accepts_leading_zeros(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(retry_after("007", &wait), 0);
    assert_duration_equal(wait, RESIL_S(7));
}

static void surrounding_spaces_and_tabs_are_allowed(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(retry_after(" \t 5 \t", &wait), 0);
    assert_duration_equal(wait, RESIL_S(5));
    assert_int_equal(retry_after("  " IMF "\t", &wait), 0);
    assert_duration_equal(wait, 0);
}

static void delta_at_the_edge_of_the_range_is_exact(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(retry_after("9223372036", &wait), 0);
    assert_duration_equal(wait, RESIL_S(INT64_C(9223372036)));
}

static void delta_beyond_the_range_saturates(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(retry_after("9223372037", &wait), 0);
    assert_duration_equal(wait, RESIL_DURATION_MAX);
    assert_int_equal(retry_after("18446744073709551616", &wait), 0);
    assert_duration_equal(wait, RESIL_DURATION_MAX);
    assert_int_equal(retry_after("99999999999999999999999999999999999999999999", &wait), 0);
    assert_duration_equal(wait, RESIL_DURATION_MAX);
}

static void negative_delta_is_no_wait(void **state)
{
    (void)state;
    resil_duration wait = -1;
    assert_int_equal(retry_after("-5", &wait), 0);
    assert_duration_equal(wait, 0);
    wait = -1;
    assert_int_equal(retry_after("-0", &wait), 0);
    assert_duration_equal(wait, 0);
    wait = -1;
    assert_int_equal(retry_after("-99999999999999999999999", &wait), 0);
    assert_duration_equal(wait, 0);
}

static void malformed_negatives_are_syntax_errors(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("-");
    ASSERT_SYNTAX_ERROR("--5");
    ASSERT_SYNTAX_ERROR("- 5");
    ASSERT_SYNTAX_ERROR("-5s");
    ASSERT_SYNTAX_ERROR("5-");
}

static void delta_with_sign_fraction_unit_or_base_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("+5");
    ASSERT_SYNTAX_ERROR("1.5");
    ASSERT_SYNTAX_ERROR("5s");
    ASSERT_SYNTAX_ERROR("1e3");
    ASSERT_SYNTAX_ERROR("0x10");
    ASSERT_SYNTAX_ERROR("5 5");
    ASSERT_SYNTAX_ERROR("five");
}

static void only_len_bytes_are_read(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(resil_retry_after_parse("120abc", 3, NOW_NS, &wait), 0);
    assert_duration_equal(wait, RESIL_S(120));
    int64_t when;
    assert_int_equal(resil_http_date_parse(IMF "junk", strlen(IMF), &when), 0);
    assert_int_equal(when, RFC_EXAMPLE);
}

/* ---- the three date forms ------------------------------------------------- */

static void imf_fixdate_parses(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date(IMF, &when), 0);
    assert_int_equal(when, RFC_EXAMPLE);
}

static void rfc850_date_parses(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date(RFC850, &when), 0);
    assert_int_equal(when, RFC_EXAMPLE);
    assert_int_equal(resil_http_date_parse_at(RFC850, strlen(RFC850), NOW_S, &when), 0);
    assert_int_equal(when, RFC_EXAMPLE);
}

static void asctime_date_parses(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date(ASCTIME, &when), 0);
    assert_int_equal(when, RFC_EXAMPLE);
}

static void asctime_day_may_be_two_digits(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date("Sun Nov 06 08:49:37 1994", &when), 0);
    assert_int_equal(when, RFC_EXAMPLE);
    assert_int_equal(date("Wed Nov 16 08:49:37 1994", &when), 0);
    assert_int_equal(when, RFC_EXAMPLE + 10 * 86400);
}

static void every_form_gives_the_same_wait(void **state)
{
    (void)state;
    const char *forms[] = {IMF, RFC850, ASCTIME};
    int64_t now_ns = (RFC_EXAMPLE - 90) * INT64_C(1000000000);
    for (size_t i = 0; i < 3; i++) {
        resil_duration wait;
        assert_int_equal(resil_retry_after_parse(forms[i], strlen(forms[i]), now_ns, &wait), 0);
        assert_duration_equal(wait, RESIL_S(90));
    }
}

static void wait_counts_from_the_sub_second_now(void **state)
{
    (void)state;
    resil_duration wait;
    int64_t now_ns = (RFC_EXAMPLE - 1) * INT64_C(1000000000) + RESIL_MS(250);
    assert_int_equal(resil_retry_after_parse(IMF, strlen(IMF), now_ns, &wait), 0);
    assert_duration_equal(wait, RESIL_MS(750));
}

static void past_date_is_no_wait(void **state)
{
    (void)state;
    resil_duration wait = -1;
    assert_int_equal(retry_after(IMF, &wait), 0);
    assert_duration_equal(wait, 0);
}

static void date_equal_to_now_is_no_wait(void **state)
{
    (void)state;
    resil_duration wait = -1;
    int64_t now_ns = RFC_EXAMPLE * INT64_C(1000000000);
    assert_int_equal(resil_retry_after_parse(IMF, strlen(IMF), now_ns, &wait), 0);
    assert_duration_equal(wait, 0);
    now_ns += 1;
    assert_int_equal(resil_retry_after_parse(IMF, strlen(IMF), now_ns, &wait), 0);
    assert_duration_equal(wait, 0);
}

static void date_beyond_the_range_saturates(void **state)
{
    (void)state;
    resil_duration wait;
    assert_int_equal(retry_after("Fri, 31 Dec 9999 23:59:59 GMT", &wait), 0);
    assert_duration_equal(wait, RESIL_DURATION_MAX);
}

static void extreme_clocks_do_not_overflow(void **state)
{
    (void)state;
    resil_duration wait = -1;
    assert_int_equal(resil_retry_after_parse(IMF, strlen(IMF), INT64_MAX, &wait), 0);
    assert_duration_equal(wait, 0);
    assert_int_equal(resil_retry_after_parse(IMF, strlen(IMF), INT64_MIN, &wait), 0);
    assert_duration_equal(wait, RESIL_DURATION_MAX);
}

static void leap_years_have_february_29(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date("Thu, 29 Feb 2024 00:00:00 GMT", &when), 0);
    assert_int_equal(when, INT64_C(1709164800));
    assert_int_equal(date("Tue, 29 Feb 2000 12:00:00 GMT", &when), 0);
    assert_int_equal(when, INT64_C(951825600));
}

static void common_years_have_no_february_29(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Wed, 29 Feb 2023 00:00:00 GMT");
    ASSERT_SYNTAX_ERROR("Thu, 29 Feb 1900 00:00:00 GMT");
}

static void leap_second_reads_as_the_next_minute(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date("Sat, 31 Dec 2016 23:59:60 GMT", &when), 0);
    assert_int_equal(when, INT64_C(1483228800));
}

static void earliest_and_latest_dates_parse(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date("Sat, 01 Jan 0000 00:00:00 GMT", &when), 0);
    assert_int_equal(when, INT64_C(-62167219200));
    assert_int_equal(date("Fri, 31 Dec 9999 23:59:59 GMT", &when), 0);
    assert_int_equal(when, INT64_C(253402300799));
}

static void leap_second_ending_9999_reads_as_year_10000(void **state)
{
    (void)state;
    int64_t when;
    char buf[30];
    assert_int_equal(date("Fri, 31 Dec 9999 23:59:60 GMT", &when), 0);
    assert_int_equal(when, INT64_C(253402300800));
    assert_int_equal(resil_http_date_format(when, buf, sizeof buf), 0);
}

/* ---- RFC 850's two-digit year --------------------------------------------- */

static void rfc850_year_up_to_50_years_ahead_is_this_century(void **state)
{
    (void)state;
    int64_t when;
    const char *text = "Tuesday, 01-Jan-75 00:00:00 GMT";
    assert_int_equal(resil_http_date_parse_at(text, strlen(text), NOW_S, &when), 0);
    assert_int_equal(when, INT64_C(3313526400));
}

static void rfc850_year_more_than_50_years_ahead_is_last_century(void **state)
{
    (void)state;
    int64_t when;
    const char *text = "Thursday, 01-Jan-76 00:00:00 GMT";
    assert_int_equal(resil_http_date_parse_at(text, strlen(text), NOW_S, &when), 0);
    assert_int_equal(when, INT64_C(189302400));
}

static void rfc850_year_window_moves_with_now(void **state)
{
    (void)state;
    int64_t when;
    const char *text = "Thursday, 01-Jun-30 00:00:00 GMT";
    int64_t in_2090 = INT64_C(3786912000); /* 2090-01-01 */
    assert_int_equal(resil_http_date_parse_at(text, strlen(text), in_2090, &when), 0);
    assert_int_equal(when, INT64_C(5062176000)); /* 2130 */
}

static void rfc850_without_now_uses_the_posix_window(void **state)
{
    (void)state;
    int64_t when;
    assert_int_equal(date("Wednesday, 01-Jan-69 00:00:00 GMT", &when), 0);
    assert_int_equal(when, INT64_C(-31536000));
    assert_int_equal(date("Sunday, 01-Jan-68 00:00:00 GMT", &when), 0);
    assert_int_equal(when, INT64_C(3092601600));
}

/* ---- malformed dates ------------------------------------------------------ */

static void wrong_weekday_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Mon, 06 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Monday, 06-Nov-94 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Mon Nov  6 08:49:37 1994");
}

static void day_outside_its_month_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Wed, 30 Feb 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 00 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 31 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 32 Oct 1994 08:49:37 GMT");
}

static void time_out_of_range_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 24:00:00 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:60:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:61 GMT");
}

static void names_are_case_sensitive(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Sun, 06 nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 NOV 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("sun, 06 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37 gmt");
    ASSERT_SYNTAX_ERROR("SUNDAY, 06-Nov-94 08:49:37 GMT");
}

static void missing_or_other_zone_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37 UTC");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37 +0000");
    ASSERT_SYNTAX_ERROR("Sunday, 06-Nov-94 08:49:37");
}

static void trailing_junk_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37 GMTx");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37 GMT;");
    ASSERT_SYNTAX_ERROR("Sun Nov  6 08:49:37 1994 GMT");
    ASSERT_SYNTAX_ERROR("120 seconds");
    ASSERT_SYNTAX_ERROR("5\r\n");
}

static void fields_of_the_wrong_width_are_syntax_errors(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Sun, 6 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 94 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 01994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 8:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sunday, 06-Nov-1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun Nov  16 08:49:37 1994");
    ASSERT_SYNTAX_ERROR("Sun Nov 6 08:49:37 1994");
}

static void forms_do_not_mix(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("Sunday, 06 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06-Nov-94 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sunday Nov  6 08:49:37 1994");
    ASSERT_SYNTAX_ERROR("Sun,  06 Nov 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun 06 Nov 1994 08:49:37 GMT");
}

static void empty_or_blank_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("");
    ASSERT_SYNTAX_ERROR("   ");
    ASSERT_SYNTAX_ERROR("\t");
    assert_syntax_error(NULL, 0);
}

static void embedded_nul_is_a_syntax_error(void **state)
{
    (void)state;
    ASSERT_SYNTAX_ERROR("12\0");
    ASSERT_SYNTAX_ERROR("1\0002");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov\0 1994 08:49:37 GMT");
    ASSERT_SYNTAX_ERROR("Sun, 06 Nov 1994 08:49:37 GMT\0");
}

static void every_truncation_is_a_syntax_error(void **state)
{
    (void)state;
    const char *forms[] = {IMF, RFC850, ASCTIME};
    for (size_t i = 0; i < 3; i++) {
        size_t full = strlen(forms[i]);
        for (size_t len = 0; len < full; len++) {
            /* A heap copy of exactly len bytes, so ASan sees any overread. */
            char *copy = malloc(len ? len : 1);
            assert_non_null(copy);
            memcpy(copy, forms[i], len);
            assert_syntax_error(copy, len);
            free(copy);
        }
    }
}

static void null_out_is_invalid(void **state)
{
    (void)state;
    assert_int_equal(resil_retry_after_parse("5", 1, NOW_NS, NULL), RESIL_EINVAL);
    assert_int_equal(resil_http_date_parse(IMF, strlen(IMF), NULL), RESIL_EINVAL);
    assert_int_equal(resil_http_date_parse_at(IMF, strlen(IMF), NOW_S, NULL), RESIL_EINVAL);
}

/* ---- formatting ----------------------------------------------------------- */

static void format_writes_an_imf_fixdate(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(resil_http_date_format(RFC_EXAMPLE, buf, sizeof buf), 29);
    assert_string_equal(buf, IMF);
}

static void format_handles_the_epoch_and_before(void **state)
{
    (void)state;
    char buf[30];
    resil_http_date_format(0, buf, sizeof buf);
    assert_string_equal(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    resil_http_date_format(-1, buf, sizeof buf);
    assert_string_equal(buf, "Wed, 31 Dec 1969 23:59:59 GMT");
}

static void format_spells_years_0000_to_9999(void **state)
{
    (void)state;
    char buf[30];
    assert_int_equal(resil_http_date_format(INT64_C(-62167219200), buf, sizeof buf), 29);
    assert_string_equal(buf, "Sat, 01 Jan 0000 00:00:00 GMT");
    assert_int_equal(resil_http_date_format(INT64_C(253402300799), buf, sizeof buf), 29);
    assert_string_equal(buf, "Fri, 31 Dec 9999 23:59:59 GMT");
}

static void format_outside_four_digit_years_writes_nothing(void **state)
{
    (void)state;
    char buf[30] = "x";
    assert_int_equal(resil_http_date_format(INT64_C(253402300800), buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    assert_int_equal(resil_http_date_format(INT64_C(-62167219201), buf, sizeof buf), 0);
    assert_int_equal(resil_http_date_format(INT64_MAX, buf, sizeof buf), 0);
    assert_int_equal(resil_http_date_format(INT64_MIN, buf, sizeof buf), 0);
    assert_int_equal(resil_http_date_format(INT64_MIN, NULL, 0), 0);
}

static void format_truncates_like_snprintf(void **state)
{
    (void)state;
    char buf[10];
    assert_int_equal(resil_http_date_format(RFC_EXAMPLE, buf, sizeof buf), 29);
    assert_string_equal(buf, "Sun, 06 N");
    assert_int_equal(resil_http_date_format(RFC_EXAMPLE, NULL, 0), 29);
}

static void format_then_parse_round_trips(void **state)
{
    (void)state;
    char buf[30];
    /* A stride coprime with 86400 lands on ever-different times of day. */
    for (int64_t s = INT64_C(-62167219200); s <= INT64_C(253402300799);
         s += INT64_C(98765431)) {
        int64_t back = 0;
        assert_int_equal(resil_http_date_format(s, buf, sizeof buf), 29);
        assert_int_equal(resil_http_date_parse(buf, 29, &back), 0);
        assert_int_equal(back, s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delta_seconds_is_that_many_seconds),
        cmocka_unit_test(delta_zero_is_no_wait),
        cmocka_unit_test(delta_accepts_leading_zeros),
        cmocka_unit_test(surrounding_spaces_and_tabs_are_allowed),
        cmocka_unit_test(delta_at_the_edge_of_the_range_is_exact),
        cmocka_unit_test(delta_beyond_the_range_saturates),
        cmocka_unit_test(negative_delta_is_no_wait),
        cmocka_unit_test(malformed_negatives_are_syntax_errors),
        cmocka_unit_test(delta_with_sign_fraction_unit_or_base_is_a_syntax_error),
        cmocka_unit_test(only_len_bytes_are_read),
        cmocka_unit_test(imf_fixdate_parses),
        cmocka_unit_test(rfc850_date_parses),
        cmocka_unit_test(asctime_date_parses),
        cmocka_unit_test(asctime_day_may_be_two_digits),
        cmocka_unit_test(every_form_gives_the_same_wait),
        cmocka_unit_test(wait_counts_from_the_sub_second_now),
        cmocka_unit_test(past_date_is_no_wait),
        cmocka_unit_test(date_equal_to_now_is_no_wait),
        cmocka_unit_test(date_beyond_the_range_saturates),
        cmocka_unit_test(extreme_clocks_do_not_overflow),
        cmocka_unit_test(leap_years_have_february_29),
        cmocka_unit_test(common_years_have_no_february_29),
        cmocka_unit_test(leap_second_reads_as_the_next_minute),
        cmocka_unit_test(earliest_and_latest_dates_parse),
        cmocka_unit_test(leap_second_ending_9999_reads_as_year_10000),
        cmocka_unit_test(rfc850_year_up_to_50_years_ahead_is_this_century),
        cmocka_unit_test(rfc850_year_more_than_50_years_ahead_is_last_century),
        cmocka_unit_test(rfc850_year_window_moves_with_now),
        cmocka_unit_test(rfc850_without_now_uses_the_posix_window),
        cmocka_unit_test(wrong_weekday_is_a_syntax_error),
        cmocka_unit_test(day_outside_its_month_is_a_syntax_error),
        cmocka_unit_test(time_out_of_range_is_a_syntax_error),
        cmocka_unit_test(names_are_case_sensitive),
        cmocka_unit_test(missing_or_other_zone_is_a_syntax_error),
        cmocka_unit_test(trailing_junk_is_a_syntax_error),
        cmocka_unit_test(fields_of_the_wrong_width_are_syntax_errors),
        cmocka_unit_test(forms_do_not_mix),
        cmocka_unit_test(empty_or_blank_is_a_syntax_error),
        cmocka_unit_test(embedded_nul_is_a_syntax_error),
        cmocka_unit_test(every_truncation_is_a_syntax_error),
        cmocka_unit_test(null_out_is_invalid),
        cmocka_unit_test(format_writes_an_imf_fixdate),
        cmocka_unit_test(format_handles_the_epoch_and_before),
        cmocka_unit_test(format_spells_years_0000_to_9999),
        cmocka_unit_test(format_outside_four_digit_years_writes_nothing),
        cmocka_unit_test(format_truncates_like_snprintf),
        cmocka_unit_test(format_then_parse_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
