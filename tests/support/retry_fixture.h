/*
 * retry_fixture.h — the blocking executor's test fixture: a fake clock, a
 * policy of four attempts with exponential waits from 100 ms and no
 * jitter, execution options on that clock that keep up to
 * TEST_RETRY_RECORDS attempt records, and the result of the last run. The
 * suites of the executor and of the delay schedules start from it, each at
 * its own instant, and change what a test needs.
 */
#ifndef RESIL_TEST_RETRY_FIXTURE_H
#define RESIL_TEST_RETRY_FIXTURE_H

#include "test.h"

#define TEST_RETRY_RECORDS 16

typedef struct test_retry_fixture {
    resil_fake_clock *fc;
    resil_retry_policy policy;
    resil_exec_opts opts;
    resil_attempt_record records[TEST_RETRY_RECORDS];
    resil_retry_result result;
} test_retry_fixture;

/* A fixture whose clock starts at t0 (asserted to succeed). */
test_retry_fixture *test_retry_fixture_new(resil_instant t0);
void test_retry_fixture_free(test_retry_fixture *f);

#endif
