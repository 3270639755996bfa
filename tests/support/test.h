/*
 * test.h — what every test file includes: cmocka (which needs these system
 * headers first, in this order) and resil, plus small helpers that keep the
 * tests reading as specifications.
 */
#ifndef RESIL_TEST_H
#define RESIL_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resil.h"

/* Assert that a duration equals an expected value in ns, printing both. */
#define assert_duration_equal(actual, expected) \
    assert_int_equal((int64_t)(actual), (int64_t)(expected))

/* Assert |a - b| <= tol for doubles. */
#define assert_near(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

/* Absolute path of a built program (e.g. "resil") inside the build tree,
 * from RESIL_BUILD_DIR; NULL when the variable is unset. Static storage. */
const char *test_build_path(const char *relative);
/* A fresh temporary directory (mkdtemp under $TMPDIR or /tmp), removed by
 * test_rmtree(). Returns a heap string the caller frees. */
char *test_tmpdir(void);
void test_rmtree(const char *path);

/* Assert that the first n attempt records of two runs agree field by field
 * (the dual-path tests: the blocking and asynchronous walks). */
void assert_records_equal(const resil_attempt_record *a, const resil_attempt_record *b,
                          size_t n);

#endif
