/*
 * test_degrade_proc.c — the /proc readings behind the degradation
 * monitor's default sampler: the /proc/stat and /proc/meminfo parsers on
 * fixture text (reading exactly the bytes they are given), the CPU share
 * between two readings, and the sampler itself on a fixture directory.
 */
#include <math.h>

#include "test.h"

static const char stat_fixture[] =
    "cpu  100 20 30 400 50 6 7 8 9 10\n"
    "cpu0 50 10 15 200 25 3 3 4 4 5\n"
    "cpu1 50 10 15 200 25 3 4 4 5 5\n"
    "intr 12345 0 0 0\n"
    "ctxt 999\n";

static const char meminfo_fixture[] = "MemTotal:        1000 kB\n"
                                      "MemFree:          100 kB\n"
                                      "MemAvailable:     250 kB\n"
                                      "Buffers:           50 kB\n"
                                      "Cached:           150 kB\n"
                                      "SwapTotal:          0 kB\n";

static int stat_of(const char *text, resil_cpu_times *out)
{
    return resil_proc_stat_parse(text, strlen(text), out);
}

static int meminfo_of(const char *text, double *out)
{
    return resil_proc_meminfo_parse(text, strlen(text), out);
}

/* ---- /proc/stat ---------------------------------------------------------- */

static void stat_reads_the_aggregate_line_without_counting_guest_twice(void **state)
{
    (void)state;
    resil_cpu_times t;
    assert_int_equal(stat_of(stat_fixture, &t), 0);
    assert_int_equal(t.total, 100 + 20 + 30 + 400 + 50 + 6 + 7 + 8);
    assert_int_equal(t.busy, 100 + 20 + 30 + 6 + 7 + 8);
}

static void stat_accepts_the_four_field_form_of_old_kernels(void **state)
{
    (void)state;
    resil_cpu_times t;
    assert_int_equal(stat_of("cpu 1 2 3 4\n", &t), 0);
    assert_int_equal(t.total, 10);
    assert_int_equal(t.busy, 6);
}

static void stat_finds_the_aggregate_line_anywhere(void **state)
{
    (void)state;
    resil_cpu_times t;
    assert_int_equal(stat_of("cpu0 9 9 9 9\nbtime 1\ncpu  1 1 1 1\n", &t), 0);
    assert_int_equal(t.total, 4);
}

static void stat_without_a_usable_aggregate_line_is_a_syntax_error(void **state)
{
    (void)state;
    resil_cpu_times t;
    assert_int_equal(stat_of("", &t), RESIL_ESYNTAX);
    assert_int_equal(stat_of("cpu0 1 2 3 4\n", &t), RESIL_ESYNTAX);
    assert_int_equal(stat_of("cpu 1 2 3\n", &t), RESIL_ESYNTAX);
    assert_int_equal(stat_of("cpu a b c d\n", &t), RESIL_ESYNTAX);
    assert_int_equal(stat_of("cpu", &t), RESIL_ESYNTAX);
    assert_int_equal(stat_of("cpu 1 2 3 99999999999999999999999\n", &t), RESIL_ESYNTAX);
}

static void stat_reads_exactly_the_bytes_it_is_given(void **state)
{
    (void)state;
    const char text[] = {'c', 'p', 'u', ' ', '1', ' ', '2', ' ', '3', ' ', '4', '5', '6'};
    resil_cpu_times t;
    assert_int_equal(resil_proc_stat_parse(text, sizeof text - 2, &t), 0);
    assert_int_equal(t.total, 1 + 2 + 3 + 4);
    assert_int_equal(resil_proc_stat_parse(text, 9, &t), RESIL_ESYNTAX);
}

static void stat_sums_saturate_instead_of_wrapping(void **state)
{
    (void)state;
    resil_cpu_times t;
    assert_int_equal(stat_of("cpu 18446744073709551615 5 0 1\n", &t), 0);
    assert_true(t.total == UINT64_MAX);
    assert_true(t.busy == UINT64_MAX - 1);
}

/* ---- the CPU share ------------------------------------------------------- */

static void busy_percent_is_the_busy_share_of_the_elapsed_ticks(void **state)
{
    (void)state;
    resil_cpu_times a = {.busy = 100, .total = 1000}, b = {.busy = 150, .total = 1100},
                    c = {.busy = 140, .total = 1200};
    assert_true(resil_cpu_busy_percent(&a, &b) == 50.0);
    assert_true(resil_cpu_busy_percent(&b, &c) == 0.0); /* busy cannot go back */
    assert_true(isnan(resil_cpu_busy_percent(&a, &a)));
    assert_true(isnan(resil_cpu_busy_percent(&b, &a)));
}

/* ---- /proc/meminfo ------------------------------------------------------- */

static void meminfo_uses_mem_available(void **state)
{
    (void)state;
    double used;
    assert_int_equal(meminfo_of(meminfo_fixture, &used), 0);
    assert_true(used == 75.0);
}

static void meminfo_falls_back_to_free_buffers_and_cached(void **state)
{
    (void)state;
    double used;
    assert_int_equal(meminfo_of("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\n"
                                "Cached: 150 kB\n",
                                &used),
                     0);
    assert_true(used == 70.0);
}

static void meminfo_without_a_usable_total_is_a_syntax_error(void **state)
{
    (void)state;
    double used;
    assert_int_equal(meminfo_of("", &used), RESIL_ESYNTAX);
    assert_int_equal(meminfo_of("MemAvailable: 5 kB\n", &used), RESIL_ESYNTAX);
    assert_int_equal(meminfo_of("MemTotal: 0 kB\nMemAvailable: 0 kB\n", &used), RESIL_ESYNTAX);
    assert_int_equal(meminfo_of("MemTotal: x kB\nMemAvailable: 0 kB\n", &used), RESIL_ESYNTAX);
    assert_int_equal(meminfo_of("MemTotal: 100 kB\n", &used), RESIL_ESYNTAX);
}

static void meminfo_available_above_total_counts_as_nothing_used(void **state)
{
    (void)state;
    double used;
    assert_int_equal(meminfo_of("MemTotal: 100 kB\nMemAvailable: 500 kB\n", &used), 0);
    assert_true(used == 0.0);
}

static void meminfo_reads_exactly_the_bytes_it_is_given(void **state)
{
    (void)state;
    const char *text = "MemTotal: 1000 kB\nMemAvailable: 250 kB\n";
    double used;
    size_t cut = strlen("MemTotal: 1000 kB\nMemAvailable: 25");
    assert_int_equal(resil_proc_meminfo_parse(text, cut, &used), 0);
    assert_true(used == 97.5);
}

/* ---- the sampler on a fixture directory ---------------------------------- */

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void sampler_measures_cpu_between_two_samples(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    assert_non_null(dir);
    write_file(dir, "stat", "cpu  100 0 0 900 0 0 0 0 0 0\n");
    write_file(dir, "meminfo", meminfo_fixture);
    resil_proc_sampler s;
    resil_proc_sampler_init(&s, dir);
    resil_health_sample h;

    assert_int_equal(resil_proc_sample(&s, &h), 0);
    assert_true(isnan(h.cpu)); /* nothing to compare with yet */
    assert_true(h.memory == 75.0);

    write_file(dir, "stat", "cpu  130 0 0 970 0 0 0 0 0 0\n");
    assert_int_equal(resil_proc_sample(&s, &h), 0);
    assert_true(h.cpu == 30.0);
    test_rmtree(dir);
    free(dir);
}

static void sampler_without_files_knows_nothing(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    assert_non_null(dir);
    resil_proc_sampler s;
    resil_proc_sampler_init(&s, dir);
    resil_health_sample h;
    assert_int_equal(resil_proc_sample(&s, &h), RESIL_EIO);
    assert_true(isnan(h.cpu));
    assert_true(isnan(h.memory));
    test_rmtree(dir);
    free(dir);
}

static void sampler_ignores_a_line_cut_by_its_buffer(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    assert_non_null(dir);
    /* MemAvailable straddles the sampler's 4096-byte read: it must not be
     * taken as a shorter number, so memory is unknown. */
    char text[8192];
    size_t len = (size_t)snprintf(text, sizeof text, "MemTotal: 1000 kB\n");
    while (len < 4096 - 8)
        len += (size_t)snprintf(text + len, sizeof text - len, "X: 0\n");
    snprintf(text + len, sizeof text - len, "MemAvailable: 250 kB\n");
    write_file(dir, "meminfo", text);
    resil_proc_sampler s;
    resil_proc_sampler_init(&s, dir);
    resil_health_sample h;
    assert_int_equal(resil_proc_sample(&s, &h), RESIL_EIO);
    assert_true(isnan(h.memory));
    test_rmtree(dir);
    free(dir);
}

static void sampler_defaults_to_proc(void **state)
{
    (void)state;
    resil_proc_sampler s;
    resil_proc_sampler_init(&s, NULL);
    assert_string_equal(s.root, "/proc");
    assert_false(s.primed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stat_reads_the_aggregate_line_without_counting_guest_twice),
        cmocka_unit_test(stat_accepts_the_four_field_form_of_old_kernels),
        cmocka_unit_test(stat_finds_the_aggregate_line_anywhere),
        cmocka_unit_test(stat_without_a_usable_aggregate_line_is_a_syntax_error),
        cmocka_unit_test(stat_reads_exactly_the_bytes_it_is_given),
        cmocka_unit_test(stat_sums_saturate_instead_of_wrapping),
        cmocka_unit_test(busy_percent_is_the_busy_share_of_the_elapsed_ticks),
        cmocka_unit_test(meminfo_uses_mem_available),
        cmocka_unit_test(meminfo_falls_back_to_free_buffers_and_cached),
        cmocka_unit_test(meminfo_without_a_usable_total_is_a_syntax_error),
        cmocka_unit_test(meminfo_available_above_total_counts_as_nothing_used),
        cmocka_unit_test(meminfo_reads_exactly_the_bytes_it_is_given),
        cmocka_unit_test(sampler_measures_cpu_between_two_samples),
        cmocka_unit_test(sampler_without_files_knows_nothing),
        cmocka_unit_test(sampler_ignores_a_line_cut_by_its_buffer),
        cmocka_unit_test(sampler_defaults_to_proc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
