/*
 * retry_fixture.c — the blocking executor's test fixture (retry_fixture.h).
 */
#include "retry_fixture.h"

test_retry_fixture *test_retry_fixture_new(resil_instant t0)
{
    test_retry_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(resil_fake_clock_new(t0, 0, &f->fc), 0);
    resil_retry_policy_default(&f->policy);
    f->policy.max_attempts = 4;
    f->policy.backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    f->policy.backoff.base = RESIL_MS(100);
    f->policy.backoff.jitter = RESIL_JITTER_NONE;
    f->opts.clock = resil_fake_clock_clock(f->fc);
    f->opts.records = f->records;
    f->opts.records_cap = TEST_RETRY_RECORDS;
    return f;
}

void test_retry_fixture_free(test_retry_fixture *f)
{
    resil_fake_clock_free(f->fc);
    free(f);
}
