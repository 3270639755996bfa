/*
 * test_encode.c — the JSON string every name, attribute and outcome detail
 * of an OTLP payload goes through: quotes and backslashes escaped, control
 * characters as \u escapes, valid UTF-8 of every length kept as it is, and
 * each byte that cannot start or continue a valid sequence (a stray
 * continuation, an overlong form, a surrogate, a code point past U+10FFFF,
 * a sequence cut short) replaced by U+FFFD, so that the payload stays JSON
 * whatever a caller's detail holds.
 */
#include "test.h"

#include "../../src/otlp/otlp_internal.h"

static void expect_json(const char *in, const char *want)
{
    otlp_text t = {0};
    resil__otlp_json_string(&t, in);
    resil__otlp_put(&t, "", 1); /* its terminator */
    assert_false(t.failed);
    assert_string_equal(t.p, want);
    free(t.p);
}

static void plain_text_is_quoted_as_it_is(void **state)
{
    (void)state;
    expect_json("", "\"\"");
    expect_json("attempt timeout (2s) elapsed", "\"attempt timeout (2s) elapsed\"");
}

static void quotes_and_backslashes_are_escaped(void **state)
{
    (void)state;
    expect_json("say \"hi\" \\ bye", "\"say \\\"hi\\\" \\\\ bye\"");
}

static void control_characters_become_u_escapes(void **state)
{
    (void)state;
    expect_json("a\nb\tc\x01\x1f", "\"a\\u000ab\\u0009c\\u0001\\u001f\"");
}

static void valid_utf8_of_every_length_is_kept(void **state)
{
    (void)state;
    /* é (2 bytes), € (3), 𝄞 (4), and the edges U+0080, U+07FF, U+0800,
     * U+FFFF, U+10000, U+10FFFF */
    const char *s = "\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e \xc2\x80\xdf\xbf\xe0\xa0\x80"
                    "\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
    char want[128];
    snprintf(want, sizeof want, "\"%s\"", s);
    expect_json(s, want);
}

static void each_byte_of_an_invalid_sequence_becomes_a_replacement(void **state)
{
    (void)state;
    expect_json("a\x80z", "\"a\\ufffdz\"");                        /* a stray continuation */
    expect_json("\xc0\x80", "\"\\ufffd\\ufffd\"");                  /* overlong NUL */
    expect_json("\xe0\x80\x80", "\"\\ufffd\\ufffd\\ufffd\"");       /* overlong, 3 bytes */
    expect_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");       /* a surrogate */
    expect_json("\xf0\x80\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* overlong, 4 */
    expect_json("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* past U+10FFFF */
    expect_json("\xf5\xff", "\"\\ufffd\\ufffd\"");                  /* never a lead byte */
    expect_json("\xe2\x82", "\"\\ufffd\\ufffd\"");                  /* cut short by the end */
    expect_json("\xe2\x82x", "\"\\ufffd\\ufffdx\"");                /* cut short by ASCII */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_text_is_quoted_as_it_is),
        cmocka_unit_test(quotes_and_backslashes_are_escaped),
        cmocka_unit_test(control_characters_become_u_escapes),
        cmocka_unit_test(valid_utf8_of_every_length_is_kept),
        cmocka_unit_test(each_byte_of_an_invalid_sequence_becomes_a_replacement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
