/*
 * test_support.c — helpers for tests that run programs from the build tree,
 * need scratch directories or wait for another thread or process. Kept
 * tiny: tests should read on their own.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

const char *test_build_path(const char *relative)
{
    static char path[PATH_MAX];
    const char *dir = getenv("RESIL_BUILD_DIR");
    if (dir == NULL)
        return NULL;
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    return path;
}

void test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

resil_retry_policy test_retry_constant(uint32_t attempts, resil_duration wait)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = attempts;
    p.backoff.kind = RESIL_BACKOFF_CONSTANT;
    p.backoff.base = wait;
    p.backoff.jitter = RESIL_JITTER_NONE;
    return p;
}

void test_add_retry_constant(resil_pipeline_builder *b, uint32_t attempts, resil_duration wait)
{
    resil_retry_policy p = test_retry_constant(attempts, wait);
    assert_int_equal(resil_pipeline_add_retry(b, &p), 0);
}

void test_add_total_timeout(resil_pipeline_builder *b, resil_duration d)
{
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = d;
    assert_int_equal(resil_pipeline_add_total_timeout(b, &t), 0);
}

void test_add_attempt_timeout(resil_pipeline_builder *b, resil_duration d)
{
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = d;
    assert_int_equal(resil_pipeline_add_attempt_timeout(b, &t), 0);
}

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool test_wait_until(bool (*cond)(void *ud), void *ud, int every_ms)
{
    int64_t until = monotonic_ms() + TEST_PATIENCE_MS;
    for (;;) {
        if (cond(ud))
            return true;
        if (monotonic_ms() >= until)
            return false;
        test_sleep_ms(every_ms);
    }
}

char *test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/resil-test-XXXXXX", base ? base : "/tmp");
    if (mkdtemp(tmpl) == NULL)
        return NULL;
    return strdup(tmpl);
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_rmtree(const char *path)
{
    if (path != NULL)
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void assert_records_equal(const resil_attempt_record *a, const resil_attempt_record *b,
                          size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(a[i].number, b[i].number);
        assert_int_equal(a[i].outcome.kind, b[i].outcome.kind);
        assert_int_equal(a[i].outcome.code, b[i].outcome.code);
        assert_string_equal(a[i].outcome.detail, b[i].outcome.detail);
        assert_int_equal(a[i].stop, b[i].stop);
        assert_duration_equal(a[i].wait, b[i].wait);
        assert_int_equal(a[i].source, b[i].source);
        assert_int_equal(a[i].start, b[i].start);
        assert_duration_equal(a[i].duration, b[i].duration);
    }
}
