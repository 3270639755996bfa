/*
 * test_common.c — error codes and their names.
 */
#include "test.h"

static void strerror_names_every_code(void **state)
{
    (void)state;
    assert_string_equal(resil_strerror(RESIL_OK), "success");
    assert_string_equal(resil_strerror(RESIL_EINVAL), "invalid argument");
    assert_string_equal(resil_strerror(RESIL_ECANCELED), "operation cancelled");
    assert_string_equal(resil_strerror(RESIL_EBACKEND), "backend error");
    assert_string_equal(resil_strerror(-9999), "unknown error");
}

static void err_set_fills_report_and_returns_code(void **state)
{
    (void)state;
    resil_err err;
    int rc = resil_err_set(&err, RESIL_EINVAL, "retry.max_attempts must be >= 1, got %d", 0);
    assert_int_equal(rc, RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, "retry.max_attempts must be >= 1, got 0");
}

static void err_set_tolerates_null_report(void **state)
{
    (void)state;
    assert_int_equal(resil_err_set(NULL, RESIL_ERANGE, "x"), RESIL_ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strerror_names_every_code),
        cmocka_unit_test(err_set_fills_report_and_returns_code),
        cmocka_unit_test(err_set_tolerates_null_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
