/*
 * test_duration.c — saturating duration arithmetic, the human-duration
 * parser (every form and every error, each named in the report) and the
 * formatter that round-trips through it.
 */
#include <math.h>

#include "test.h"

#define MAX_TEXT "2562047h47m16.854775807s"

static resil_duration parse_ok(const char *text)
{
    resil_duration d = -12345;
    resil_err err = {0};
    int rc = resil_duration_parse_cstr(text, &d, &err);
    if (rc != 0)
        fail_msg("\"%s\" rejected: %s", text, err.message);
    return d;
}

/* Parse `text`, expect `code`, and expect `fragment` in the message. The
 * output must be left untouched on error. */
static void expect_error(const char *text, int code, const char *fragment)
{
    resil_duration d = -12345;
    resil_err err = {0};
    int rc = resil_duration_parse_cstr(text, &d, &err);
    if (rc != code || err.code != code || strstr(err.message, fragment) == NULL)
        fail_msg("\"%s\": rc=%d message \"%s\", wanted %d with \"%s\"", text, rc,
                 err.message, code, fragment);
    assert_duration_equal(d, -12345);
}

static const char *fmt(resil_duration d)
{
    static char buf[64];
    resil_duration_format(d, buf, sizeof buf);
    return buf;
}

/* ---- arithmetic -------------------------------------------------------- */

static void macros_scale_to_nanoseconds(void **state)
{
    (void)state;
    assert_duration_equal(RESIL_NS(7), 7);
    assert_duration_equal(RESIL_US(7), 7000);
    assert_duration_equal(RESIL_MS(7), 7000000);
    assert_duration_equal(RESIL_S(7), INT64_C(7000000000));
}

static void add_and_sub_are_exact_in_range(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_add(RESIL_S(1), RESIL_MS(500)), RESIL_MS(1500));
    assert_duration_equal(resil_dur_sub(RESIL_S(1), RESIL_MS(1500)), RESIL_MS(-500));
}

static void add_saturates_at_both_ends(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_add(INT64_MAX, 1), INT64_MAX);
    assert_duration_equal(resil_dur_add(INT64_MAX, INT64_MAX), INT64_MAX);
    assert_duration_equal(resil_dur_add(INT64_MIN, -1), INT64_MIN);
    assert_duration_equal(resil_dur_add(INT64_MAX, INT64_MIN), -1);
}

static void sub_saturates_at_both_ends(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_sub(INT64_MIN, 1), INT64_MIN);
    assert_duration_equal(resil_dur_sub(INT64_MAX, -1), INT64_MAX);
    assert_duration_equal(resil_dur_sub(0, INT64_MIN), INT64_MAX);
    assert_duration_equal(resil_dur_sub(-2, INT64_MAX), INT64_MIN);
}

static void mul_scales_and_truncates_toward_zero(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_mul(RESIL_S(1), 1.5), RESIL_MS(1500));
    assert_duration_equal(resil_dur_mul(RESIL_MS(100), 0.0), 0);
    assert_duration_equal(resil_dur_mul(10, 0.99), 9);
    assert_duration_equal(resil_dur_mul(RESIL_MS(-100), 2.0), RESIL_MS(-200));
}

static void mul_saturates_instead_of_wrapping(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_mul(RESIL_S(1), 1e30), INT64_MAX);
    assert_duration_equal(resil_dur_mul(RESIL_S(1), pow(2.0, 10000 - 1)), INT64_MAX);
    assert_duration_equal(resil_dur_mul(INT64_MAX, 1.0), INT64_MAX);
    assert_duration_equal(resil_dur_mul(INT64_MAX, 2.0), INT64_MAX);
    assert_duration_equal(resil_dur_mul(RESIL_MS(-1), 1e30), INT64_MIN);
}

static void mul_by_infinity_saturates(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_mul(RESIL_S(1), INFINITY), INT64_MAX);
    assert_duration_equal(resil_dur_mul(RESIL_S(-1), INFINITY), INT64_MIN);
}

static void mul_of_non_negative_never_goes_negative(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_mul(RESIL_S(1), -2.0), 0);
    assert_duration_equal(resil_dur_mul(RESIL_S(1), -INFINITY), 0);
}

static void mul_by_nan_is_zero(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_mul(RESIL_S(1), NAN), 0);
    assert_duration_equal(resil_dur_mul(INT64_MAX, NAN), 0);
}

static void from_seconds_rounds_to_the_nearest_nanosecond(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_from_seconds(1.5), RESIL_MS(1500));
    assert_duration_equal(resil_dur_from_seconds(0.3), RESIL_MS(300));
    assert_duration_equal(resil_dur_from_seconds(0.1), RESIL_MS(100));
    assert_duration_equal(resil_dur_from_seconds(1e-9), 1);
    assert_duration_equal(resil_dur_from_seconds(-2.0), RESIL_S(-2));
}

static void from_seconds_saturates_and_maps_nan_to_zero(void **state)
{
    (void)state;
    assert_duration_equal(resil_dur_from_seconds(1e300), INT64_MAX);
    assert_duration_equal(resil_dur_from_seconds(9223372036.854775807), INT64_MAX);
    assert_duration_equal(resil_dur_from_seconds(-1e300), INT64_MIN);
    assert_duration_equal(resil_dur_from_seconds(INFINITY), INT64_MAX);
    assert_duration_equal(resil_dur_from_seconds(-INFINITY), INT64_MIN);
    assert_duration_equal(resil_dur_from_seconds(NAN), 0);
}

static void to_ms_is_a_double(void **state)
{
    (void)state;
    assert_true(resil_dur_to_ms(RESIL_MS(250)) == 250.0);
    assert_true(resil_dur_to_ms(RESIL_US(1500)) == 1.5);
    assert_true(resil_dur_to_ms(RESIL_NS(1)) == 1e-6);
    assert_true(resil_dur_to_ms(0) == 0.0);
}

/* ---- parsing: units and compounds -------------------------------------- */

static void parses_every_unit(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("10ns"), 10);
    assert_duration_equal(parse_ok("750us"), RESIL_US(750));
    assert_duration_equal(parse_ok("3\xC2\xB5s"), RESIL_US(3)); /* micro sign */
    assert_duration_equal(parse_ok("3\xCE\xBCs"), RESIL_US(3)); /* Greek mu */
    assert_duration_equal(parse_ok("250ms"), RESIL_MS(250));
    assert_duration_equal(parse_ok("2s"), RESIL_S(2));
    assert_duration_equal(parse_ok("5m"), RESIL_S(300));
    assert_duration_equal(parse_ok("1h"), RESIL_S(3600));
    assert_duration_equal(parse_ok("1d"), RESIL_S(86400));
}

static void parses_compounds(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("1m30s"), RESIL_S(90));
    assert_duration_equal(parse_ok("1h2m3.5s"), RESIL_MS(3723500));
    assert_duration_equal(parse_ok("1s500ms"), RESIL_MS(1500));
    assert_duration_equal(parse_ok("1d1h"), RESIL_S(90000));
}

static void compound_components_are_summed_in_any_order(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("30s1m"), RESIL_S(90));
    assert_duration_equal(parse_ok("1s1s"), RESIL_S(2));
}

static void parses_decimals_exactly(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("1.5s"), RESIL_MS(1500));
    assert_duration_equal(parse_ok("0.1s"), RESIL_MS(100));
    assert_duration_equal(parse_ok("0.3s"), RESIL_MS(300));
    assert_duration_equal(parse_ok("1.5h"), RESIL_S(5400));
    assert_duration_equal(parse_ok("2.5ms"), RESIL_US(2500));
    assert_duration_equal(parse_ok(".5s"), RESIL_MS(500));
    assert_duration_equal(parse_ok("1.s"), RESIL_S(1));
}

static void fractions_below_a_nanosecond_round_down(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("1.9ns"), 1);
    assert_duration_equal(parse_ok("0.0000000019s"), 1);
    assert_duration_equal(parse_ok("0.99999999999999999999s"), 999999999);
    assert_duration_equal(parse_ok("0.000000000000000001d"), 0);
    assert_duration_equal(parse_ok("0.33333333333333333333h"), INT64_C(1199999999999));
}

static void zero_parses_bare_and_with_units(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("0"), 0);
    assert_duration_equal(parse_ok("0s"), 0);
    assert_duration_equal(parse_ok("0ms"), 0);
    assert_duration_equal(parse_ok("0.0s"), 0);
}

static void leading_zeros_are_fine(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("007s"), RESIL_S(7));
}

static void maximum_parses_exactly(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("9223372036854775807ns"), INT64_MAX);
    assert_duration_equal(parse_ok(MAX_TEXT), INT64_MAX);
    assert_duration_equal(parse_ok("106751d"), INT64_C(106751) * RESIL_S(86400));
}

static void reads_exactly_len_bytes(void **state)
{
    (void)state;
    resil_duration d = 0;
    assert_int_equal(resil_duration_parse("250msXYZ", 5, &d, NULL), 0);
    assert_duration_equal(d, RESIL_MS(250));
    assert_int_equal(resil_duration_parse("1m30s", 2, &d, NULL), 0);
    assert_duration_equal(d, RESIL_S(60));
    /* Not NUL-terminated at all: only `len` bytes exist. */
    char raw[3] = {'2', 'm', 's'};
    assert_int_equal(resil_duration_parse(raw, sizeof raw, &d, NULL), 0);
    assert_duration_equal(d, RESIL_MS(2));
}

/* ---- parsing: .NET TimeSpan -------------------------------------------- */

static void parses_timespan_hh_mm_ss(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("00:00:30"), RESIL_S(30));
    assert_duration_equal(parse_ok("01:02:03"), RESIL_S(3723));
    assert_duration_equal(parse_ok("1:2:3"), RESIL_S(3723));
    assert_duration_equal(parse_ok("00:00:00"), 0);
}

static void parses_timespan_fraction(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("00:00:01.5"), RESIL_MS(1500));
    assert_duration_equal(parse_ok("00:00:00.1234567"), INT64_C(123456700));
    assert_duration_equal(parse_ok("00:00:00.123456789"), INT64_C(123456789));
    assert_duration_equal(parse_ok("00:00:00.0000000009"), 0);
}

static void parses_timespan_with_days(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("1.02:03:04"), RESIL_S(86400 + 7384));
    assert_duration_equal(parse_ok("2.00:00:00.5"), RESIL_S(172800) + RESIL_MS(500));
    assert_duration_equal(parse_ok("0.23:59:59"), RESIL_S(86399));
}

static void timespan_hours_are_unbounded_without_days(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("36:00:00"), RESIL_S(36 * 3600));
}

static void timespan_out_of_range_fields_are_named(void **state)
{
    (void)state;
    expect_error("1.24:00:00", RESIL_ERANGE, "hours must be below 24 when days are given");
    expect_error("00:60:00", RESIL_ERANGE, "minutes must be below 60");
    expect_error("00:00:60", RESIL_ERANGE, "seconds must be below 60");
    expect_error("00:59:99", RESIL_ERANGE, "seconds must be below 60");
}

static void timespan_boundaries_just_inside_are_accepted(void **state)
{
    (void)state;
    assert_duration_equal(parse_ok("1.23:59:59.999999999"),
                          RESIL_S(86400 + 86399) + 999999999);
}

static void timespan_shape_errors(void **state)
{
    (void)state;
    const char *bad[] = {"1:2",       "1:2:",      ":1:2",     "1::2",     "1:2:3:4",
                         "1:123:4",   "1:2:345",   "1.123:00:00", "1:2:3x", "1.:2:3",
                         ".1:2:3",    "1:2:3.4.5", "a:b:c"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(bad[i], RESIL_ESYNTAX, "expected [d.]hh:mm:ss[.fffffff]");
}

static void timespan_dot_without_fraction_digits_is_rejected(void **state)
{
    (void)state;
    expect_error("00:00:01.", RESIL_ESYNTAX, "missing digits after the seconds' '.'");
}

static void timespan_overflow_is_a_range_error(void **state)
{
    (void)state;
    expect_error("106752.00:00:00", RESIL_ERANGE, "out of range");
    expect_error("99999999999999999999:00:00", RESIL_ERANGE, "out of range");
    expect_error("2562048:00:00", RESIL_ERANGE, "out of range");
    assert_duration_equal(parse_ok("2562047:47:16.854775807"), INT64_MAX);
    expect_error("2562047:47:16.854775808", RESIL_ERANGE, "out of range");
}

/* ---- parsing: errors --------------------------------------------------- */

static void empty_text_is_rejected(void **state)
{
    (void)state;
    expect_error("", RESIL_ESYNTAX, "duration is empty");
    resil_duration d;
    resil_err err;
    assert_int_equal(resil_duration_parse(NULL, 0, &d, &err), RESIL_ESYNTAX);
    assert_int_equal(resil_duration_parse("5s", 0, &d, &err), RESIL_ESYNTAX);
    assert_int_equal(resil_duration_parse_cstr(NULL, &d, &err), RESIL_ESYNTAX);
}

static void negative_is_a_range_error(void **state)
{
    (void)state;
    expect_error("-5s", RESIL_ERANGE, "duration \"-5s\": must not be negative");
    expect_error("-0", RESIL_ERANGE, "must not be negative");
    expect_error("-00:00:01", RESIL_ERANGE, "must not be negative");
}

static void bare_number_other_than_zero_needs_a_unit(void **state)
{
    (void)state;
    expect_error("5", RESIL_ESYNTAX, "duration \"5\": missing unit");
    expect_error("00", RESIL_ESYNTAX, "missing unit");
    expect_error("1.5", RESIL_ESYNTAX, "missing unit");
    expect_error("1m30", RESIL_ESYNTAX, "missing unit");
}

static void unit_without_number_is_rejected(void **state)
{
    (void)state;
    expect_error("ms", RESIL_ESYNTAX, "missing number before unit");
    expect_error(".s", RESIL_ESYNTAX, "missing number before unit");
    expect_error("1s.m", RESIL_ESYNTAX, "missing number before unit");
    expect_error("+5s", RESIL_ESYNTAX, "missing number before unit");
    expect_error(" 5s", RESIL_ESYNTAX, "missing number before unit");
}

static void unknown_unit_is_named(void **state)
{
    (void)state;
    expect_error("5x", RESIL_ESYNTAX, "unknown unit \"x\"");
    expect_error("5sec", RESIL_ESYNTAX, "unknown unit \"sec\"");
    expect_error("5S", RESIL_ESYNTAX, "unknown unit \"S\"");
    expect_error("5s ", RESIL_ESYNTAX, "unknown unit \"s \"");
    expect_error("1h 5m", RESIL_ESYNTAX, "unknown unit \"h \"");
}

static void second_decimal_point_is_rejected(void **state)
{
    (void)state;
    expect_error("1.5.3s", RESIL_ESYNTAX, "missing unit before the next number");
}

static void overflow_is_a_range_error(void **state)
{
    (void)state;
    expect_error("9223372036854775808ns", RESIL_ERANGE, "out of range");
    expect_error("2562047h47m16.854775808s", RESIL_ERANGE, "out of range");
    expect_error("106752d", RESIL_ERANGE, "out of range");
    expect_error("99999999999999999999999s", RESIL_ERANGE, "out of range");
    expect_error(MAX_TEXT "1ns", RESIL_ERANGE, "out of range");
}

static void long_text_is_shortened_in_the_message(void **state)
{
    (void)state;
    char text[300];
    memset(text, '1', sizeof text - 2);
    text[sizeof text - 2] = 's';
    text[sizeof text - 1] = '\0';
    resil_err err;
    resil_duration d;
    assert_int_equal(resil_duration_parse_cstr(text, &d, &err), RESIL_ERANGE);
    assert_non_null(strstr(err.message, "...\": out of range"));
}

static void errors_without_report_still_return_the_code(void **state)
{
    (void)state;
    resil_duration d;
    assert_int_equal(resil_duration_parse_cstr("5x", &d, NULL), RESIL_ESYNTAX);
    assert_int_equal(resil_duration_parse_cstr("-1s", &d, NULL), RESIL_ERANGE);
}

/* ---- formatting -------------------------------------------------------- */

static void formats_the_shortest_exact_form(void **state)
{
    (void)state;
    assert_string_equal(fmt(0), "0s");
    assert_string_equal(fmt(RESIL_MS(250)), "250ms");
    assert_string_equal(fmt(RESIL_S(90)), "1m30s");
    assert_string_equal(fmt(RESIL_MS(1500)), "1.5s");
    assert_string_equal(fmt(RESIL_S(7200)), "2h");
    assert_string_equal(fmt(RESIL_S(60)), "1m");
    assert_string_equal(fmt(RESIL_US(750)), "750us");
    assert_string_equal(fmt(RESIL_US(1500)), "1.5ms");
    assert_string_equal(fmt(1), "1ns");
    assert_string_equal(fmt(999), "999ns");
}

static void hours_are_the_largest_unit(void **state)
{
    (void)state;
    assert_string_equal(fmt(RESIL_S(86400)), "24h");
    assert_string_equal(fmt(RESIL_S(90000)), "25h");
}

static void zero_parts_are_left_out(void **state)
{
    (void)state;
    assert_string_equal(fmt(RESIL_S(3605)), "1h5s");
    assert_string_equal(fmt(RESIL_S(3660) + RESIL_MS(500)), "1h1m500ms");
    assert_string_equal(fmt(RESIL_S(3600) + 1), "1h1ns");
}

static void sub_minute_part_picks_the_shortest_unit(void **state)
{
    (void)state;
    assert_string_equal(fmt(1000001), "1000001ns"); /* shorter than 1.000001ms */
    assert_string_equal(fmt(RESIL_MS(1001)), "1.001s");
    assert_string_equal(fmt(999999999), "999999999ns");
    assert_string_equal(fmt(RESIL_S(59) + 1), "59.000000001s");
}

static void formats_extremes(void **state)
{
    (void)state;
    assert_string_equal(fmt(INT64_MAX), MAX_TEXT);
    assert_string_equal(fmt(INT64_MIN), "-2562047h47m16.854775808s");
    assert_string_equal(fmt(RESIL_MS(-1500)), "-1.5s");
}

static void format_truncates_like_snprintf(void **state)
{
    (void)state;
    char buf[4];
    assert_int_equal(resil_duration_format(RESIL_S(90), buf, sizeof buf), 5);
    assert_string_equal(buf, "1m3");
    assert_int_equal(resil_duration_format(RESIL_S(90), buf, 1), 5);
    assert_string_equal(buf, "");
    assert_int_equal(resil_duration_format(RESIL_S(90), NULL, 0), 5);
}

static void format_round_trips_through_the_parser(void **state)
{
    (void)state;
    const resil_duration samples[] = {
        0, 1, 999, 1000, 1001, RESIL_US(1500), RESIL_MS(250), 999999999,
        RESIL_S(1), RESIL_MS(1500), RESIL_S(59) + 1, RESIL_S(60), RESIL_S(90),
        RESIL_S(3600), RESIL_S(3605), RESIL_S(86400) + 12345, INT64_MAX, INT64_MAX - 1,
    };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        assert_duration_equal(parse_ok(fmt(samples[i])), samples[i]);
    resil_rng_seeded r;
    resil_rng_seeded_init(&r, 2024);
    for (int i = 0; i < 10000; i++) {
        resil_duration d = (resil_duration)(resil_rng_seeded_next_u64(&r) >> (1 + i % 63));
        assert_duration_equal(parse_ok(fmt(d)), d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(macros_scale_to_nanoseconds),
        cmocka_unit_test(add_and_sub_are_exact_in_range),
        cmocka_unit_test(add_saturates_at_both_ends),
        cmocka_unit_test(sub_saturates_at_both_ends),
        cmocka_unit_test(mul_scales_and_truncates_toward_zero),
        cmocka_unit_test(mul_saturates_instead_of_wrapping),
        cmocka_unit_test(mul_by_infinity_saturates),
        cmocka_unit_test(mul_of_non_negative_never_goes_negative),
        cmocka_unit_test(mul_by_nan_is_zero),
        cmocka_unit_test(from_seconds_rounds_to_the_nearest_nanosecond),
        cmocka_unit_test(from_seconds_saturates_and_maps_nan_to_zero),
        cmocka_unit_test(to_ms_is_a_double),
        cmocka_unit_test(parses_every_unit),
        cmocka_unit_test(parses_compounds),
        cmocka_unit_test(compound_components_are_summed_in_any_order),
        cmocka_unit_test(parses_decimals_exactly),
        cmocka_unit_test(fractions_below_a_nanosecond_round_down),
        cmocka_unit_test(zero_parses_bare_and_with_units),
        cmocka_unit_test(leading_zeros_are_fine),
        cmocka_unit_test(maximum_parses_exactly),
        cmocka_unit_test(reads_exactly_len_bytes),
        cmocka_unit_test(parses_timespan_hh_mm_ss),
        cmocka_unit_test(parses_timespan_fraction),
        cmocka_unit_test(parses_timespan_with_days),
        cmocka_unit_test(timespan_hours_are_unbounded_without_days),
        cmocka_unit_test(timespan_out_of_range_fields_are_named),
        cmocka_unit_test(timespan_boundaries_just_inside_are_accepted),
        cmocka_unit_test(timespan_shape_errors),
        cmocka_unit_test(timespan_dot_without_fraction_digits_is_rejected),
        cmocka_unit_test(timespan_overflow_is_a_range_error),
        cmocka_unit_test(empty_text_is_rejected),
        cmocka_unit_test(negative_is_a_range_error),
        cmocka_unit_test(bare_number_other_than_zero_needs_a_unit),
        cmocka_unit_test(unit_without_number_is_rejected),
        cmocka_unit_test(unknown_unit_is_named),
        cmocka_unit_test(second_decimal_point_is_rejected),
        cmocka_unit_test(overflow_is_a_range_error),
        cmocka_unit_test(long_text_is_shortened_in_the_message),
        cmocka_unit_test(errors_without_report_still_return_the_code),
        cmocka_unit_test(formats_the_shortest_exact_form),
        cmocka_unit_test(hours_are_the_largest_unit),
        cmocka_unit_test(zero_parts_are_left_out),
        cmocka_unit_test(sub_minute_part_picks_the_shortest_unit),
        cmocka_unit_test(formats_extremes),
        cmocka_unit_test(format_truncates_like_snprintf),
        cmocka_unit_test(format_round_trips_through_the_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
