/*
 * test_cli_main.c — the tool's own words before any subcommand: `resil
 * help COMMAND`, -V/--version, and the help that names them.
 */
#include "cli_harness.h"

static void help_command_prints_the_commands_help(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "help", "run", NULL);
    assert_int_equal(r.status, 0);
    assert_true(strncmp(r.out, "usage: resil run [OPTIONS] -- COMMAND [ARG...]\n", 47) == 0);
    cli_result_free(&r);
}

static void help_of_an_unknown_command_exits_125(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "help", "fly", NULL);
    assert_int_equal(r.status, 125);
    assert_true(strncmp(r.err, "resil: help: unknown command 'fly'\n", 35) == 0);
    cli_result_free(&r);
}

static void no_command_exits_125_with_the_tools_help(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.out, "");
    assert_true(strncmp(r.err, "usage: resil COMMAND [OPTIONS]\n", 31) == 0);
    cli_result_free(&r);
}

static void an_unknown_command_is_refused_by_name(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "fly", NULL);
    assert_int_equal(r.status, 125);
    assert_string_equal(r.out, "");
    assert_true(strncmp(r.err, "resil: unknown command 'fly'\nusage: resil COMMAND [OPTIONS]\n",
                        60) == 0);
    cli_result_free(&r);
}

static void dash_v_and_version_print_the_version(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "-V", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "resil " RESIL_VERSION_STRING "\n");
    cli_result_free(&r);
    cli_run(&r, *state, NULL, "--version", NULL);
    assert_string_equal(r.out, "resil " RESIL_VERSION_STRING "\n");
    cli_result_free(&r);
}

static void the_tools_help_names_version_and_help_command(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "  -V, --version   resil's version\n"));
    assert_non_null(strstr(r.out, "'resil help COMMAND'"));
    cli_result_free(&r);
}

/* An empty FILE is no file a user meant: a usage error (125), not a file
 * that failed to open (1). */
static void config_check_refuses_an_empty_file_name(void **state)
{
    cli_result r;
    cli_run(&r, *state, NULL, "config", "check", "", NULL);
    if (strstr(r.err, "unknown command 'config'") != NULL) { /* built without libresil-config */
        cli_result_free(&r);
        skip();
    }
    assert_int_equal(r.status, 125);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "resil config check: FILE must be a file name ('-': standard "
                               "input), got ''\n");
    cli_result_free(&r);
}

/* Run `resil ARGS` with standard output on the full device: the output
 * it could not write fails the run, saying why. */
static void assert_full_output_fails(const char *dir, const char *a1, const char *a2)
{
    int full = open("/dev/full", O_WRONLY);
    assert_true(full >= 0);
    cli_result r;
    cli_run_into(&r, dir, full, a1, a2, NULL);
    close(full);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "resil: cannot write standard output: No space left on device\n");
    cli_result_free(&r);
}

static void a_version_standard_output_cannot_take_fails(void **state)
{
    assert_full_output_fails(*state, "--version", NULL);
}

static void a_demo_standard_output_cannot_take_fails(void **state)
{
    assert_full_output_fails(*state, "demo", "retry-pattern");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, cli_setup, cli_teardown)
    const struct CMUnitTest tests[] = {
        T(help_command_prints_the_commands_help),
        T(help_of_an_unknown_command_exits_125),
        T(no_command_exits_125_with_the_tools_help),
        T(an_unknown_command_is_refused_by_name),
        T(dash_v_and_version_print_the_version),
        T(the_tools_help_names_version_and_help_command),
        T(config_check_refuses_an_empty_file_name),
        T(a_version_standard_output_cannot_take_fails),
        T(a_demo_standard_output_cannot_take_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
