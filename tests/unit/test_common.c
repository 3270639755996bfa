/*
 * test_common.c — error codes and their names, and the allocation that
 * gives a shared object's hot words lines of their own.
 */
#include <malloc.h>
#include <stdint.h>

#include "test.h"

#include "../../src/core/internal.h"

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

static void a_line_allocation_starts_a_line_and_fills_whole_lines_with_zeros(void **state)
{
    (void)state;
    unsigned char *p = resil__line_alloc(RESIL__CACHE_LINE + 1);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % RESIL__CACHE_LINE, 0);
    assert_true(malloc_usable_size(p) >= 2 * RESIL__CACHE_LINE);
    for (size_t i = 0; i < 2 * RESIL__CACHE_LINE; i++)
        assert_int_equal(p[i], 0);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strerror_names_every_code),
        cmocka_unit_test(err_set_fills_report_and_returns_code),
        cmocka_unit_test(err_set_tolerates_null_report),
        cmocka_unit_test(a_line_allocation_starts_a_line_and_fills_whole_lines_with_zeros),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
