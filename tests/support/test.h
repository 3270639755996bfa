/*
 * test.h — what every test file includes: cmocka (which needs these system
 * headers first, in this order) and resil, plus small helpers that keep the
 * tests reading as specifications.
 */
#ifndef RESIL_TEST_H
#define RESIL_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* Waiting for another thread or process to get somewhere: cond(ud) asked
 * every `every_ms` until it holds (true) or TEST_PATIENCE_MS of monotonic
 * time have passed (false). The bound guards against a hang on a loaded
 * machine; it is never a timing the test asserts. */
#define TEST_PATIENCE_MS 10000
bool test_wait_until(bool (*cond)(void *ud), void *ud, int every_ms);
void test_sleep_ms(int ms);

/* A retry policy of `attempts` attempts with exactly `wait` between them
 * (constant backoff, no jitter), the rest the defaults. */
resil_retry_policy test_retry_constant(uint32_t attempts, resil_duration wait);
/* That policy added to `b`. */
void test_add_retry_constant(resil_pipeline_builder *b, uint32_t attempts, resil_duration wait);
/* A total or an attempt timeout of `d`, its other options the defaults,
 * added to `b` (asserted to succeed). */
void test_add_total_timeout(resil_pipeline_builder *b, resil_duration d);
void test_add_attempt_timeout(resil_pipeline_builder *b, resil_duration d);

/* Assert that the first n attempt records of two runs agree field by field
 * (the dual-path tests: the blocking and asynchronous walks). */
void assert_records_equal(const resil_attempt_record *a, const resil_attempt_record *b,
                          size_t n);

#endif
