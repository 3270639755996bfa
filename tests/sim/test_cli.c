/*
 * test_cli.c — `resil sim` as a user meets it: every bad flag or value is
 * refused by name with exit 125, the outputs (table, JSON lines, CSV, SVG)
 * carry the figures, the same seed gives the same bytes, and independent
 * simulations may run on several threads at once.
 */
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "simtest.h"

static void expect_usage_error(captured c, const char *needle)
{
    if (c.status != 125 || strstr(c.err, needle) == NULL)
        fail_msg("status %d, stderr '%s', expected 125 and '%s'", c.status, c.err, needle);
    assert_string_equal(c.out, "");
    release(&c);
}

/* ---- refusals ---------------------------------------------------------------- */

static void no_scenario_prints_usage_and_exits_125(void **state)
{
    (void)state;
    char *argv[] = {(char *)"sim", NULL};
    char *out = NULL, *err = NULL;
    size_t ol = 0, el = 0;
    FILE *o = open_memstream(&out, &ol), *e = open_memstream(&err, &el);
    assert_int_equal(resil_sim_command(1, argv, o, e), 125);
    fclose(o);
    fclose(e);
    assert_non_null(strstr(err, "usage: resil sim SCENARIO"));
    free(out);
    free(err);
}

static void an_unknown_scenario_is_refused(void **state)
{
    (void)state;
    expect_usage_error(SIM("storm"), "unknown scenario 'storm'");
}

static void an_unknown_flag_is_refused(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--clinets", "5"), "unknown flag '--clinets'");
}

static void a_flag_of_another_scenario_is_refused(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--outage", "5s"), "--outage does not apply to occ");
    expect_usage_error(SIM("metastable", "--clients", "5"), "--clients does not apply to metastable");
    expect_usage_error(SIM("layers", "--slowdown", "3"), "--slowdown does not apply to layers");
}

static void a_flag_without_its_value_is_refused(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--clients"), "--clients needs a value");
}

static void a_switch_with_a_value_is_refused(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--json=yes"), "--json takes no value");
}

static void malformed_numbers_are_refused_by_name(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--clients", "ten"), "--clients must be a whole number, got 'ten'");
    expect_usage_error(SIM("occ", "--clients", "-3"), "--clients must be a whole number");
    expect_usage_error(SIM("occ", "--clients", "99999999999"), "--clients must be a whole number");
    expect_usage_error(SIM("occ", "--seed", "1x"), "--seed must be a whole number");
    expect_usage_error(SIM("metastable", "--rate", "fast"), "--rate must be a number, got 'fast'");
    expect_usage_error(SIM("metastable", "--rate", "inf"), "--rate must be a number");
    expect_usage_error(SIM("failover", "--outage", "20x"),
                       "--outage must be a duration like 250ms, 2s or 1m30s, got '20x' "
                       "(duration \"20x\": unknown unit");
    expect_usage_error(SIM("failover", "--outage", "-5s"),
                       "got '-5s' (duration \"-5s\": must not be negative)");
    expect_usage_error(SIM("failover", "--budget-at", "middle"), "--budget-at must be all, innermost");
}

/* strtod reads more than a number: leading spaces, hexadecimal, "nan",
 * "infinity". The fuzz target's round trip found "--rate 0x10" accepted as
 * 16; such a value is a typo or worse, and the tool's other numbers refuse
 * them, so the simulator's do too. */
static void only_decimal_numbers_are_numbers(void **state)
{
    (void)state;
    const char *bad[] = {"0x10", "0X1p4", " 5", "\t5", "nan", "-nan", "infinity", "+inf",
                         "1e400", "", "+", ".", "5 ", "1e", "--5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_usage_error(SIM("layers", "--rate", bad[i]), "--rate must be a number");
    const char *good[] = {"16", "1e1", ".5", "+2", "2.", "1E1", "0.25e+2"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        resil_sim_config c;
        char *argv[] = {(char *)"sim", (char *)"layers", (char *)"--rate", (char *)good[i], NULL};
        assert_int_equal(resil_sim_command_parse(4, argv, &c, stderr), 0);
        assert_true(c.rate > 0.4 && c.rate < 26);
    }
}

/* The fuzz target's round trip found "--policy none,none --policy none"
 * keeping the first list's second entry behind the new count, and a
 * refused list overwriting entries of the one in force. */
static void a_policy_list_replaces_the_whole_list_or_nothing(void **state)
{
    (void)state;
    resil_sim_config c, fresh;
    char *argv[] = {(char *)"sim", (char *)"occ", (char *)"--policy", (char *)"none,full",
                    (char *)"--policy", (char *)"equal", NULL};
    char *once[] = {(char *)"sim", (char *)"occ", (char *)"--policy", (char *)"equal", NULL};
    assert_int_equal(resil_sim_command_parse(6, argv, &c, stderr), 0);
    assert_int_equal(resil_sim_command_parse(4, once, &fresh, stderr), 0);
    assert_int_equal(c.npolicies, 1);
    assert_memory_equal(&c, &fresh, sizeof c);

    resil_sim_config_default(&c, RESIL_SIM_FAILOVER);
    resil_sim_config before = c;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_policies_parse("full,tokens,bogus", &c, &err), RESIL_EINVAL);
    assert_memory_equal(&c, &before, sizeof c);
}

static void out_of_range_values_are_refused_by_name(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--clients", "0"), "--clients must be in [1, 100000], got 0");
    expect_usage_error(SIM("occ", "--runs", "0"), "--runs must be in [1, 1000000], got 0");
    expect_usage_error(SIM("occ", "--net-mean", "2m"), "--net-mean must be in [0s, 1m], got 2m");
    expect_usage_error(SIM("failover", "--layers", "11"), "--layers must be in [1, 10], got 11");
    expect_usage_error(SIM("failover", "--attempts", "0"), "--attempts must be in [1, 100], got 0");
    expect_usage_error(SIM("layers", "--layers", "10", "--attempts", "10"),
                       "--attempts^--layers must be at most 1000000");
    expect_usage_error(SIM("failover", "--budget-at", "4"), "--budget-at must be in [0, 3], got 4");
    expect_usage_error(SIM("failover", "--capacity", "0"), "--capacity must be in");
    expect_usage_error(SIM("failover", "--bin", "5m"), "--bin must be in [1ms, 2m], got 5m");
    expect_usage_error(SIM("failover", "--clients", "1000000", "--rate", "10"),
                       "--clients × --rate must be in");
    expect_usage_error(SIM("metastable", "--slowdown", "0.5"), "--slowdown must be in [1, 1e+06], got 0.5");
    expect_usage_error(SIM("metastable", "--timeout", "0"), "--timeout must be > 0 for metastable");
    expect_usage_error(SIM("metastable", "--duration", "0"), "--duration must be in [1ms, 24h], got 0s");
    expect_usage_error(SIM("metastable", "--duration", "20s"),
                       "--duration must extend past the trigger's end (20s)");
    expect_usage_error(SIM("failover", "--duration", "30s"),
                       "--duration must extend past the outage's end (30s)");
    expect_usage_error(SIM("layers", "--requests", "0"), "--requests must be >= 1 for layers");
}

static void bad_policies_are_refused_by_name(void **state)
{
    (void)state;
    expect_usage_error(SIM("occ", "--policy", "fast"), "--policy 'fast': unknown part 'fast'");
    expect_usage_error(SIM("failover", "--policy", "full+equal"), "--policy 'full+equal' names more than one wait");
    expect_usage_error(SIM("failover", "--policy", "tokens+quota"), "names more than one budget");
    expect_usage_error(SIM("failover", "--policy", "noretry+tokens"), "noretry takes no wait and no budget");
    expect_usage_error(SIM("failover", "--policy", "full,"), "--policy must not be empty");
    expect_usage_error(SIM("occ", "--policy", "full+tokens"), "only a wait applies");
    expect_usage_error(SIM("occ", "--policy", "none,none,none,none,none,none,none,none,none,none,"
                                              "none,none,none,none,none,none,none"),
                       "more than 16 policies");
}

/* Refused with exit 125 and exactly `message` on stderr. */
static void expect_refused_exactly(captured c, const char *message)
{
    char want[512];
    snprintf(want, sizeof want, "resil sim: %s\n", message);
    assert_int_equal(c.status, 125);
    assert_string_equal(c.err, want);
    assert_string_equal(c.out, "");
    release(&c);
}

/* Parsed and validated, without simulating. */
static void expect_accepted(const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)"sim";
    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    resil_sim_config c;
    assert_int_equal(resil_sim_command_parse(argc, argv, &c, stderr), 0);
}

#define ACCEPTED(...) expect_accepted((const char *const[]){__VA_ARGS__, NULL})

static void brownout_workers_under_one_are_refused_by_name(void **state)
{
    (void)state;
    expect_refused_exactly(SIM("brownout", "--capacity", "1", "--latency", "999ms"),
                           "--capacity × --latency must be 1 to 100000 workers, got 0.999");
}

static void brownout_workers_over_100000_are_refused_by_name(void **state)
{
    (void)state;
    expect_refused_exactly(SIM("brownout", "--capacity", "100001", "--latency", "1s"),
                           "--capacity × --latency must be 1 to 100000 workers, got 100001");
}

static void brownout_workers_of_1_and_100000_are_accepted(void **state)
{
    (void)state;
    ACCEPTED("brownout", "--capacity", "1", "--latency", "1s");
    ACCEPTED("brownout", "--capacity", "100000", "--latency", "1s");
}

static void brownout_without_a_timeout_is_refused_by_name(void **state)
{
    (void)state;
    expect_refused_exactly(SIM("brownout", "--timeout", "0"),
                           "--timeout must be > 0 for brownout: callers give up on a queue");
}

static void brownout_with_a_nanosecond_timeout_is_accepted(void **state)
{
    (void)state;
    ACCEPTED("brownout", "--timeout", "1ns");
}

/* A limit starts at --limit, which only brownout has: elsewhere the
 * limiter was built at 0 and refused mid-run, naming its own field. */
static void a_concurrency_limit_outside_brownout_is_refused_by_name(void **state)
{
    (void)state;
    expect_refused_exactly(SIM("failover", "--policy", "full+static"),
                           "--policy 'full+static': a concurrency limit (static, vegas, "
                           "gradient, aimd) applies only to brownout, whose --limit sets it");
    expect_refused_exactly(SIM("metastable", "--policy", "naive,vegas"),
                           "--policy 'vegas': a concurrency limit (static, vegas, gradient, "
                           "aimd) applies only to brownout, whose --limit sets it");
    expect_refused_exactly(SIM("layers", "--policy", "tokens+aimd"),
                           "--policy 'tokens+aimd': a concurrency limit (static, vegas, "
                           "gradient, aimd) applies only to brownout, whose --limit sets it");
}

/* Metastable's flags are --trigger and --trigger-start: its refusals name
 * them, not failover's --outage and --outage-start. */
static void a_bad_trigger_is_refused_under_its_own_name(void **state)
{
    (void)state;
    expect_refused_exactly(SIM("metastable", "--trigger", "25h"),
                           "--trigger must be in [0s, 24h], got 25h");
    expect_refused_exactly(SIM("metastable", "--trigger-start", "3m"),
                           "--trigger-start must be in [0s, 2m], got 3m");
}

/* What the command line cannot produce but the simulator's own entry
 * points (sim.h) still refuse. */
static void a_scenario_out_of_range_is_refused_by_the_simulator(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_OCC);
    c.scenario = (resil_sim_scenario)5;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_config_validate(&c, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "scenario must be occ, failover, metastable, layers or brownout, got 5");
}

static void no_policy_is_refused_by_the_simulator(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_FAILOVER);
    c.npolicies = 0;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_config_validate(&c, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "--policy must list 1 to 16 policies, got 0");
}

static void seventeen_policies_are_refused_by_the_simulator(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_FAILOVER);
    c.npolicies = RESIL_SIM_MAX_POLICIES + 1;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_config_validate(&c, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "--policy must list 1 to 16 policies, got 17");
}

static void sixteen_policies_are_accepted(void **state)
{
    (void)state;
    resil_sim_config c;
    char *argv[] = {(char *)"sim", (char *)"occ", (char *)"--policy",
                    (char *)"none,none,none,none,none,none,none,none,none,none,none,none,none,"
                            "none,none,none",
                    NULL};
    assert_int_equal(resil_sim_command_parse(4, argv, &c, stderr), 0);
    assert_int_equal(c.npolicies, 16);
}

static void one_policy_of_48_characters_is_refused_by_the_simulator(void **state)
{
    (void)state;
    char text[64];
    snprintf(text, sizeof text, "%048d", 0);
    resil_sim_policy p;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_policy_parse(text, &p, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "--policy '00000000000000000000…' is longer than 47 characters");
}

/* 47 characters pass the length check and are read part by part (two
 * known parts, then one that is not: a message of 246 bytes, whole). */
static void one_policy_of_47_characters_is_read_part_by_part(void **state)
{
    (void)state;
    char text[64];
    snprintf(text, sizeof text, "decorrelated+tokens+%027d", 0);
    assert_int_equal(strlen(text), 47);
    resil_sim_policy p;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_policy_parse(text, &p, &err), RESIL_EINVAL);
    char want[320];
    snprintf(want, sizeof want,
             "--policy '%s': unknown part '%s' (expected naive, none, exponential, full, "
             "equal, decorrelated, noretry, tokens, quota, ratio, breaker, static, vegas, "
             "gradient, aimd, throttle)",
             text, text + strlen("decorrelated+tokens+"));
    assert_string_equal(err.message, want);
}

static void a_run_without_config_policy_or_result_is_refused(void **state)
{
    (void)state;
    resil_sim_config c;
    resil_sim_config_default(&c, RESIL_SIM_OCC);
    resil_sim_result r;
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_run(NULL, &c.policies[0], NULL, NULL, &r, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "config, policy and result are required");
    assert_int_equal(resil_sim_run(&c, NULL, NULL, NULL, &r, &err), RESIL_EINVAL);
    assert_int_equal(resil_sim_run(&c, &c.policies[0], NULL, NULL, NULL, &err), RESIL_EINVAL);
}

/* ---- outputs ----------------------------------------------------------------- */

static void help_prints_usage_and_succeeds(void **state)
{
    (void)state;
    captured c = SIM("occ", "--help");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "usage: resil sim SCENARIO"));
    release(&c);
}

static void the_table_lists_every_policy(void **state)
{
    (void)state;
    captured c = SIM("occ", "--clients", "10", "--runs", "2", "--policy", "none,full");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "calls/run"));
    assert_non_null(strstr(c.out, "\nnone "));
    assert_non_null(strstr(c.out, "\nfull "));
    assert_string_equal(c.err, "");
    release(&c);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void json_is_one_object_per_policy(void **state)
{
    (void)state;
    captured c = SIM("metastable", "--duration", "30s", "--json", "--policy", "naive,tokens");
    assert_int_equal(c.status, 0);
    assert_int_equal(count_lines(c.out), 2);
    const char *head = "{\"scenario\":\"metastable\",\"policy\":\"naive\",";
    assert_true(strncmp(c.out, head, strlen(head)) == 0);
    assert_non_null(strstr(c.out, "\"policy\":\"tokens\""));
    assert_non_null(strstr(c.out, "\"series\":{\"bin_s\":1,\"arrivals\":["));
    assert_non_null(strstr(c.out, "\"recovered\":false"));
    assert_non_null(strstr(c.out, "\"recovered\":true"));
    release(&c);
}

/* The number after "key": in the JSON object `obj`. */
static double json_number(const char *obj, const char *key)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *p = strstr(obj, needle);
    if (p == NULL)
        fail_msg("no %s in %s", key, obj);
    return strtod(p + strlen(needle), NULL);
}

/* The brownout's table: its setup in words, then one row per policy whose
 * figures are the JSON's of the same run, rounded as the columns are. */
static void the_brownout_table_states_its_setup_and_agrees_with_the_json(void **state)
{
    (void)state;
    captured t = SIM("brownout", "--policy", "naive,static", "--duration", "90s");
    captured j = SIM("brownout", "--policy", "naive,static", "--duration", "90s", "--json");
    assert_int_equal(t.status, 0);
    assert_int_equal(j.status, 0);
    const char *head =
        "brownout: 150 requests/s to a dependency of 200 calls/s (20 workers, 100ms each), "
        "at half capacity for 30s from 30s;\n"
        "1 attempt with a 1s timeout; limits start at 40; 1m30s simulated, seed 1\n\n";
    assert_true(strncmp(t.out, head, strlen(head)) == 0);
    assert_non_null(strstr(t.out, "\npolicy                         run   brownout      after"
                                  "    p99 (ms)   recovered\n"));
    static const char *const policies[] = {"naive", "static"};
    const char *obj = j.out;
    for (int i = 0; i < 2; i++) {
        char row[160], recovered[32];
        double run = json_number(obj, "goodput_per_s");
        double brownout = json_number(obj, "outage_goodput_per_s");
        double after = json_number(obj, "after_goodput_per_s");
        double p99 = json_number(obj, "p99_ms");
        double at = json_number(obj, "recovery_s");
        if (at == 0)
            snprintf(recovered, sizeof recovered, "at once");
        else
            snprintf(recovered, sizeof recovered, "after %.0fs", at);
        snprintf(row, sizeof row, "\n%-24s %9.1f %10.1f %10.1f   %9.0f   %s\n", policies[i], run,
                 brownout, after, p99, recovered);
        if (strstr(t.out, row) == NULL)
            fail_msg("no row\n%s\nin\n%s", row + 1, t.out);
        obj = strchr(obj, '\n') + 1; /* the next policy's object */
    }
    release(&t);
    release(&j);
}

static void layers_json_states_the_worst_case(void **state)
{
    (void)state;
    captured c = SIM("layers", "--layers", "5", "--attempts", "3", "--requests", "1", "--json",
                     "--policy", "naive");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "\"worst_case\":243"));
    assert_non_null(strstr(c.out, "\"calls_per_request\":243"));
    release(&c);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static void csv_and_svg_files_are_written(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char csv[512], svg[512];
    snprintf(csv, sizeof csv, "%s/m.csv", dir);
    snprintf(svg, sizeof svg, "%s/m.svg", dir);
    captured c = SIM("metastable", "--duration", "30s", "--policy", "naive,tokens", "--csv", csv,
                     "--svg", svg);
    assert_int_equal(c.status, 0);
    char *text = slurp(csv);
    assert_non_null(text);
    assert_true(strncmp(text, "policy,t_s,arrivals,offered,goodput,failed,retries\n", 51) == 0);
    assert_int_equal(count_lines(text), 1 + 2 * 30);
    free(text);
    text = slurp(svg);
    assert_non_null(text);
    assert_non_null(strstr(text, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(text, "time (s)"));
    assert_non_null(strstr(text, "per second"));
    assert_non_null(strstr(text, "goodput (requests/s)"));
    assert_non_null(strstr(text, "naive — did not recover"));
    assert_non_null(strstr(text, "tokens — recovered after"));
    assert_non_null(strstr(text, "</svg>\n"));
    free(text);
    release(&c);
    test_rmtree(dir);
    free(dir);
}

static void bar_charts_for_occ_and_layers(void **state)
{
    (void)state;
    captured c = SIM("occ", "--clients", "10", "--runs", "2", "--svg", "-");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "write calls per run"));
    assert_non_null(strstr(c.out, "milliseconds"));
    release(&c);
    c = SIM("layers", "--requests", "1", "--svg", "-");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "worst case 4^3 = 64"));
    release(&c);
}

/* Standard output holds the SVG alone: no table before it. */
static void svg_to_standard_output_is_the_whole_output(void **state)
{
    (void)state;
    captured c = SIM("layers", "--requests", "1", "--svg", "-");
    assert_int_equal(c.status, 0);
    assert_true(strncmp(c.out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=", 50) == 0);
    assert_true(strcmp(c.out + strlen(c.out) - 7, "</svg>\n") == 0);
    release(&c);
    c = SIM("metastable", "--duration", "30s", "--policy", "naive", "--csv", "-");
    assert_int_equal(c.status, 0);
    assert_true(strncmp(c.out, "policy,t_s,", 11) == 0);
    assert_int_equal(count_lines(c.out), 1 + 30);
    release(&c);
}

/* Each row of CSV `text` after the header has `fields` fields and starts
 * with one of `names` in order, each for `per_name` rows. */
static void assert_csv(const char *text, const char *header, size_t fields,
                       const char *const *names, size_t nnames, size_t per_name)
{
    size_t hl = strlen(header);
    assert_true(strncmp(text, header, hl) == 0 && text[hl] == '\n');
    assert_int_equal(count_lines(text), 1 + nnames * per_name);
    const char *row = text + hl + 1;
    for (size_t r = 0; r < nnames * per_name; r++) {
        const char *end = strchr(row, '\n');
        size_t commas = 0;
        for (const char *p = row; p < end; p++)
            commas += *p == ',';
        assert_int_equal(commas + 1, fields);
        const char *name = names[r / per_name];
        assert_true(strncmp(row, name, strlen(name)) == 0 && row[strlen(name)] == ',');
        row = end + 1;
    }
}

static void csv_on_standard_output_is_its_header_and_one_row_per_figure(void **state)
{
    (void)state;
    captured c = SIM("metastable", "--duration", "30s", "--policy", "naive,tokens", "--csv", "-");
    assert_int_equal(c.status, 0);
    assert_csv(c.out, "policy,t_s,arrivals,offered,goodput,failed,retries", 7,
               (const char *const[]){"naive", "tokens"}, 2, 30);
    release(&c);
    c = SIM("occ", "--clients", "10", "--runs", "2", "--policy", "none,full", "--csv", "-");
    assert_int_equal(c.status, 0);
    assert_csv(c.out, "policy,clients,runs,calls_per_run,calls_per_client,completion_ms", 6,
               (const char *const[]){"none", "full"}, 2, 1);
    release(&c);
    c = SIM("layers", "--requests", "1", "--policy", "naive", "--csv", "-");
    assert_int_equal(c.status, 0);
    assert_csv(c.out, "policy,layers,attempts,worst_case,requests,calls_per_request,max_calls",
               7, (const char *const[]){"naive"}, 1, 1);
    release(&c);
}

static void csv_and_svg_cannot_both_take_standard_output(void **state)
{
    (void)state;
    captured c = SIM("layers", "--requests", "1", "--svg", "-", "--csv", "-");
    assert_int_equal(c.status, 125);
    assert_non_null(strstr(c.err, "--csv and --svg cannot both be '-'"));
    release(&c);
}

/* The path is checked before the simulation runs: nothing is simulated. */
static void an_unwritable_path_is_refused_before_simulating(void **state)
{
    (void)state;
    captured c = SIM("metastable", "--duration", "1h", "--svg", "/nonexistent-dir/x.svg");
    assert_int_equal(c.status, 1);
    assert_string_equal(c.err, "resil sim: --svg: cannot write '/nonexistent-dir/x.svg': "
                               "No such file or directory\n");
    assert_string_equal(c.out, "");
    release(&c);
}

/* A directory is no file to write, whoever owns it. */
static void a_directory_is_refused_as_an_output_path(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    captured c = SIM("metastable", "--duration", "1h", "--csv", dir);
    assert_int_equal(c.status, 1);
    char want[600];
    snprintf(want, sizeof want, "resil sim: --csv: cannot write '%s': Is a directory\n", dir);
    assert_string_equal(c.err, want);
    assert_string_equal(c.out, "");
    release(&c);
    test_rmtree(dir);
    free(dir);
}

static void a_path_through_a_file_is_refused(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char file[512], path[600];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/x.svg", file);
    captured c = SIM("metastable", "--duration", "1h", "--svg", path);
    assert_int_equal(c.status, 1);
    char want[700];
    snprintf(want, sizeof want, "resil sim: --svg: cannot write '%s': Not a directory\n", path);
    assert_string_equal(c.err, want);
    release(&c);
    test_rmtree(dir);
    free(dir);
}

static size_t entries_in(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* One file named twice, spelled two ways: the chart would replace the
 * figures. Refused, and nothing is written there. */
static void csv_and_svg_cannot_name_the_same_file(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char csv[512], svg[512];
    snprintf(csv, sizeof csv, "%s/out", dir);
    snprintf(svg, sizeof svg, "%s/./out", dir);
    captured c = SIM("layers", "--requests", "1", "--csv", csv, "--svg", svg);
    char want[1200];
    snprintf(want, sizeof want,
             "resil sim: --csv and --svg name the same file '%s': the chart would replace the "
             "figures\n",
             svg);
    assert_int_equal(c.status, 125);
    assert_string_equal(c.err, want);
    assert_string_equal(c.out, "");
    assert_int_equal(entries_in(dir), 0);
    release(&c);
    test_rmtree(dir);
    free(dir);
}

/* The --svg path is refused after --csv's was opened: the CSV file that
 * was there is left as it was, and no temporary file stays behind. */
static void a_refused_run_leaves_an_existing_output_untouched(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char csv[512];
    snprintf(csv, sizeof csv, "%s/kept.csv", dir);
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    fputs("yesterday's figures\n", f);
    fclose(f);
    captured c = SIM("layers", "--requests", "1", "--csv", csv, "--svg", "/nonexistent-dir/x.svg");
    assert_int_equal(c.status, 1);
    char *text = slurp(csv);
    assert_string_equal(text, "yesterday's figures\n");
    free(text);
    assert_int_equal(entries_in(dir), 1);
    release(&c);
    test_rmtree(dir);
    free(dir);
}

/* A written output replaces the file at its path whole, keeping its mode,
 * and leaves nothing else in the directory. */
static void a_written_output_replaces_the_file_and_keeps_its_mode(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char csv[512];
    snprintf(csv, sizeof csv, "%s/figures.csv", dir);
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    fputs("old\n", f);
    fclose(f);
    assert_int_equal(chmod(csv, 0640), 0);
    captured c = SIM("layers", "--requests", "1", "--policy", "naive", "--csv", csv);
    assert_int_equal(c.status, 0);
    char *text = slurp(csv);
    assert_true(strncmp(text, "policy,layers,", 14) == 0);
    free(text);
    struct stat st;
    assert_int_equal(stat(csv, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(entries_in(dir), 1);
    release(&c);
    test_rmtree(dir);
    free(dir);
}

static void an_unwritable_file_fails_with_status_1(void **state)
{
    (void)state;
    captured c = SIM("layers", "--requests", "1", "--csv", "/nonexistent-dir/x.csv");
    assert_int_equal(c.status, 1);
    assert_non_null(strstr(c.err, "cannot write '/nonexistent-dir/x.csv'"));
    release(&c);
}

/* '--csv -' on an output that takes nothing: status 1, saying why. */
static void a_standard_output_that_takes_nothing_fails_with_status_1(void **state)
{
    (void)state;
    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    char *err = NULL;
    size_t err_len = 0;
    FILE *e = open_memstream(&err, &err_len);
    char *argv[] = {"sim", "layers", "--requests", "1", "--json", "--csv", "-", NULL};
    int status = resil_sim_command(7, argv, full, e);
    fclose(e);
    fclose(full);
    assert_int_equal(status, 1);
    assert_string_equal(err, "resil sim: --csv: cannot write standard output: No space left on "
                             "device\n");
    free(err);
}

/* Runs the command with `out` as its standard output; its stderr is
 * returned (free it). */
static char *run_on(FILE *out, char **argv, int argc, int *status)
{
    char *err = NULL;
    size_t err_len = 0;
    FILE *e = open_memstream(&err, &err_len);
    *status = resil_sim_command(argc, argv, out, e);
    fclose(e);
    return err;
}

/* The table that standard output cannot take: status 1, saying why. It
 * was lost before: a small table stayed in the stream's buffer and the
 * command succeeded, a large one failed with nothing said. */
static void a_table_standard_output_cannot_take_fails_saying_why(void **state)
{
    (void)state;
    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    char *argv[] = {"sim", "layers", "--requests", "1", "--policy", "naive", NULL};
    int status;
    char *err = run_on(full, argv, 6, &status);
    fclose(full);
    assert_int_equal(status, 1);
    assert_string_equal(err, "resil sim: cannot write standard output: No space left on "
                             "device\n");
    free(err);
}

/* JSON lines larger than a stream buffer, refused by standard output: the
 * file --csv names is written all the same. */
static void a_csv_file_is_written_when_standard_output_fails(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char csv[512];
    snprintf(csv, sizeof csv, "%s/figures.csv", dir);
    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    char *argv[] = {"sim", "metastable", "--json", "--csv", csv, NULL};
    int status;
    char *err = run_on(full, argv, 5, &status);
    fclose(full);
    assert_int_equal(status, 1);
    assert_string_equal(err, "resil sim: cannot write standard output: No space left on "
                             "device\n");
    char *text = slurp(csv);
    assert_non_null(text);
    assert_true(strncmp(text, "policy,t_s,arrivals,offered,goodput,failed,retries\n", 51) == 0);
    free(text);
    free(err);
    test_rmtree(dir);
    free(dir);
}

static void the_same_seed_gives_the_same_bytes(void **state)
{
    (void)state;
    captured a = SIM("occ", "--clients", "30", "--runs", "3", "--seed", "9", "--json");
    captured b = SIM("occ", "--clients", "30", "--runs", "3", "--seed", "9", "--json");
    captured c = SIM("occ", "--clients", "30", "--runs", "3", "--seed", "10", "--json");
    assert_string_equal(a.out, b.out);
    assert_true(strcmp(a.out, c.out) != 0);
    release(&a);
    release(&b);
    release(&c);
}

static void progress_goes_to_stderr_when_asked(void **state)
{
    (void)state;
    captured c = SIM("occ", "--clients", "5", "--runs", "4", "--policy", "full", "--progress");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.err, "resil sim occ: full"));
    assert_non_null(strstr(c.err, "100%"));
    release(&c);
}

static void the_tool_runs_the_subcommand(void **state)
{
    (void)state;
    const char *resil = test_build_path("resil");
    if (resil == NULL)
        skip();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' sim occ --clients 0 2>/dev/null", resil);
    int status = system(cmd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 125);
    snprintf(cmd, sizeof cmd, "'%s' sim layers --requests 1 --policy naive >/dev/null", resil);
    status = system(cmd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- threads ----------------------------------------------------------------- */

typedef struct job {
    uint64_t seed;
    double calls;
    double completion;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    resil_sim_config c;
    resil_sim_config_default(&c, j->seed % 2 ? RESIL_SIM_OCC : RESIL_SIM_METASTABLE);
    c.seed = j->seed;
    c.runs = 2;
    if (c.scenario == RESIL_SIM_OCC)
        c.clients = 40;
    else
        c.duration = RESIL_S(30);
    resil_sim_result r;
    if (resil_sim_run(&c, &c.policies[c.npolicies - 1], NULL, NULL, &r, NULL) != 0)
        return NULL;
    j->calls = r.calls_per_run + r.calls_per_request;
    j->completion = r.completion_ms + r.succeeded;
    resil_sim_result_free(&r);
    return NULL;
}

static void simulations_on_several_threads_match_sequential_runs(void **state)
{
    (void)state;
    enum { N = 4 };
    job alone[N], together[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        alone[i] = (job){(uint64_t)i + 1, 0, 0};
        together[i] = alone[i];
        run_job(&alone[i]);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_create(&t[i], NULL, run_job, &together[i]), 0);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_true(alone[i].calls > 0);
        assert_true(alone[i].calls == together[i].calls);
        assert_true(alone[i].completion == together[i].completion);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_scenario_prints_usage_and_exits_125),
        cmocka_unit_test(an_unknown_scenario_is_refused),
        cmocka_unit_test(an_unknown_flag_is_refused),
        cmocka_unit_test(a_flag_of_another_scenario_is_refused),
        cmocka_unit_test(a_flag_without_its_value_is_refused),
        cmocka_unit_test(a_switch_with_a_value_is_refused),
        cmocka_unit_test(malformed_numbers_are_refused_by_name),
        cmocka_unit_test(only_decimal_numbers_are_numbers),
        cmocka_unit_test(a_policy_list_replaces_the_whole_list_or_nothing),
        cmocka_unit_test(out_of_range_values_are_refused_by_name),
        cmocka_unit_test(bad_policies_are_refused_by_name),
        cmocka_unit_test(brownout_workers_under_one_are_refused_by_name),
        cmocka_unit_test(brownout_workers_over_100000_are_refused_by_name),
        cmocka_unit_test(brownout_workers_of_1_and_100000_are_accepted),
        cmocka_unit_test(brownout_without_a_timeout_is_refused_by_name),
        cmocka_unit_test(brownout_with_a_nanosecond_timeout_is_accepted),
        cmocka_unit_test(a_concurrency_limit_outside_brownout_is_refused_by_name),
        cmocka_unit_test(a_bad_trigger_is_refused_under_its_own_name),
        cmocka_unit_test(a_scenario_out_of_range_is_refused_by_the_simulator),
        cmocka_unit_test(no_policy_is_refused_by_the_simulator),
        cmocka_unit_test(seventeen_policies_are_refused_by_the_simulator),
        cmocka_unit_test(sixteen_policies_are_accepted),
        cmocka_unit_test(one_policy_of_48_characters_is_refused_by_the_simulator),
        cmocka_unit_test(one_policy_of_47_characters_is_read_part_by_part),
        cmocka_unit_test(a_run_without_config_policy_or_result_is_refused),
        cmocka_unit_test(help_prints_usage_and_succeeds),
        cmocka_unit_test(the_table_lists_every_policy),
        cmocka_unit_test(json_is_one_object_per_policy),
        cmocka_unit_test(layers_json_states_the_worst_case),
        cmocka_unit_test(the_brownout_table_states_its_setup_and_agrees_with_the_json),
        cmocka_unit_test(csv_and_svg_files_are_written),
        cmocka_unit_test(svg_to_standard_output_is_the_whole_output),
        cmocka_unit_test(csv_on_standard_output_is_its_header_and_one_row_per_figure),
        cmocka_unit_test(csv_and_svg_cannot_both_take_standard_output),
        cmocka_unit_test(csv_and_svg_cannot_name_the_same_file),
        cmocka_unit_test(an_unwritable_path_is_refused_before_simulating),
        cmocka_unit_test(bar_charts_for_occ_and_layers),
        cmocka_unit_test(a_directory_is_refused_as_an_output_path),
        cmocka_unit_test(a_path_through_a_file_is_refused),
        cmocka_unit_test(a_refused_run_leaves_an_existing_output_untouched),
        cmocka_unit_test(a_written_output_replaces_the_file_and_keeps_its_mode),
        cmocka_unit_test(an_unwritable_file_fails_with_status_1),
        cmocka_unit_test(a_standard_output_that_takes_nothing_fails_with_status_1),
        cmocka_unit_test(a_table_standard_output_cannot_take_fails_saying_why),
        cmocka_unit_test(a_csv_file_is_written_when_standard_output_fails),
        cmocka_unit_test(the_same_seed_gives_the_same_bytes),
        cmocka_unit_test(progress_goes_to_stderr_when_asked),
        cmocka_unit_test(the_tool_runs_the_subcommand),
        cmocka_unit_test(simulations_on_several_threads_match_sequential_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
