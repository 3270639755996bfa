/*
 * test_clock_kernel.c — RESIL_CLOCK=kernel in the environment keeps the
 * system clock on clock_gettime (CLOCK_MONOTONIC) for the whole process.
 * Its own executable: the choice is made once, at the first reading, and
 * main sets the variable before anything reads the clock.
 */
#include <time.h>

#include "test.h"

#include "../../src/core/internal.h"

/* Exactly between the kernel's readings around it, with no bound to widen
 * by, and the counter clock never started. */
static void resil_clock_kernel_reads_clock_monotonic_itself(void **state)
{
    (void)state;
    for (int i = 0; i < 100000; i++) {
        int64_t a = resil__clock_kernel(CLOCK_MONOTONIC);
        int64_t r = resil_clock_now(resil_clock_system());
        int64_t b = resil__clock_kernel(CLOCK_MONOTONIC);
        assert_true(a <= r && r <= b);
    }
#if RESIL__TSC_CLOCK
    assert_int_equal(atomic_load(&resil__tsc_system.state), RESIL__TSC_OFF);
#endif
}

int main(void)
{
    setenv("RESIL_CLOCK", "kernel", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resil_clock_kernel_reads_clock_monotonic_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
