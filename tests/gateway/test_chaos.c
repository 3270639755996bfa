/*
 * test_chaos.c — `resil gateway --chaos-*` without a server: the values as
 * the command line gives them and their refusals word for word, then the
 * decision for each request on a fake clock with fixed seeds (a pinned
 * sequence, the library's own draws for the same seed, the order of the
 * kinds, the kill switch), the events /metrics counts, and the access
 * log's words. The gateway acting on the decisions is
 * tests/store/test_gateway_chaos.c.
 */
#include "test.h"

#include "gateway_chaos.h"

/* Read `words` (NULL-ended) as the gateway's chaos options: 0, or the
 * refusal with its message in *msg. */
static int parse(const char *const words[], gw_chaos_config *c, char *msg, size_t cap)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = "resil gateway";
    for (size_t i = 0; words[i] != NULL && argc < 15; i++)
        argv[argc++] = (char *)words[i];
    argv[argc] = NULL;
    resil_err err = {0, ""};
    args a;
    args_init(&a, "resil gateway", argc, argv);
    a.err = &err;
    gw_chaos_config_default(c);
    int rc = 0;
    for (a.i = 1; a.i < argc && rc == 0; a.i++) {
        rc = gw_chaos_parse(c, &a);
        rc = rc == 1 ? 0 : rc == 0 ? args_fail(&a, "not a chaos option: %s", argv[a.i]) : rc;
    }
    if (rc == 0)
        rc = gw_chaos_check(c, &a);
    snprintf(msg, cap, "%s", err.message);
    return rc;
}

static void expect_refused(const char *const words[], const char *message)
{
    gw_chaos_config c;
    char msg[512];
    assert_int_equal(parse(words, &c, msg, sizeof msg), RESIL_EINVAL);
    assert_string_equal(msg, message);
}

static gw_chaos_config read_ok(const char *const words[])
{
    gw_chaos_config c;
    char msg[512];
    assert_int_equal(parse(words, &c, msg, sizeof msg), 0);
    return c;
}

static void status_latency_drop_and_seed_are_read_whole(void **state)
{
    (void)state;
    gw_chaos_config c = read_ok((const char *[]){"--chaos-status", "0.25:503:30",
                                                 "--chaos-latency=0.5:1500ms", "--chaos-drop",
                                                 "0.05", "--chaos-seed", "7", NULL});
    assert_true(c.status_rate == 0.25);
    assert_int_equal(c.status, 503);
    assert_int_equal(c.retry_after, 30);
    assert_true(c.latency_rate == 0.5);
    assert_duration_equal(c.latency, RESIL_MS(1500));
    assert_true(c.drop_rate == 0.05);
    assert_int_equal(c.seed, 7);
    assert_true(gw_chaos_configured(&c));
}

static void retry_after_is_seconds_or_a_duration_of_whole_seconds(void **state)
{
    (void)state;
    assert_int_equal(read_ok((const char *[]){"--chaos-status", "1:429:2m", NULL}).retry_after,
                     120);
    assert_int_equal(read_ok((const char *[]){"--chaos-status", "1:429:0", NULL}).retry_after, 0);
    assert_int_equal(read_ok((const char *[]){"--chaos-status", "1:429:86400", NULL}).retry_after,
                     86400);
    gw_chaos_config c = read_ok((const char *[]){"--chaos-status", "0:500", NULL});
    assert_int_equal(c.retry_after, -1);
    assert_int_equal(c.status, 500);
    assert_true(c.status_rate == 0);
}

#define STATUS_FORM                                                                         \
    "RATE:CODE[:RETRY_AFTER], such as 0.1:503:30 (CODE from 400 to 599, RETRY_AFTER in " \
    "seconds up to a day)"

static void bad_values_are_refused_by_the_option_s_name(void **state)
{
    (void)state;
    expect_refused((const char *[]){"--chaos-status", "0.1:200", NULL},
                   "resil gateway: --chaos-status must be " STATUS_FORM ", got '0.1:200'");
    expect_refused((const char *[]){"--chaos-status", "0.1:600", NULL},
                   "resil gateway: --chaos-status must be " STATUS_FORM ", got '0.1:600'");
    expect_refused((const char *[]){"--chaos-status", "503", NULL},
                   "resil gateway: --chaos-status must be " STATUS_FORM ", got '503'");
    expect_refused((const char *[]){"--chaos-status", "0.1:503:1500ms", NULL},
                   "resil gateway: --chaos-status must be " STATUS_FORM
                   ", got '0.1:503:1500ms'");
    expect_refused((const char *[]){"--chaos-status", "0.1:503:86401", NULL},
                   "resil gateway: --chaos-status must be " STATUS_FORM ", got '0.1:503:86401'");
    expect_refused((const char *[]){"--chaos-status", "0.1:503:", NULL},
                   "resil gateway: --chaos-status must be " STATUS_FORM ", got '0.1:503:'");
    expect_refused((const char *[]){"--chaos-status", "1.5:503", NULL},
                   "resil gateway: --chaos-status must be a rate in [0, 1], got '1.5'");
    expect_refused((const char *[]){"--chaos-latency", "0.1", NULL},
                   "resil gateway: --chaos-latency must be RATE:DURATION, such as 0.1:2s, "
                   "got '0.1'");
    expect_refused((const char *[]){"--chaos-drop", "2", NULL},
                   "resil gateway: --chaos-drop must be a rate in [0, 1], got '2'");
    expect_refused((const char *[]){"--chaos-seed", "0", NULL},
                   "resil gateway: --chaos-seed must be a whole number in [1, "
                   "18446744073709551615], got '0'");
}

static void a_seed_without_chaos_is_refused(void **state)
{
    (void)state;
    expect_refused((const char *[]){"--chaos-seed", "7", NULL},
                   "resil gateway: --chaos-seed needs --chaos-status, --chaos-latency or "
                   "--chaos-drop");
}

/* ---- the decisions ------------------------------------------------------- */

typedef struct fixture {
    resil_fake_clock *fc;
    resil_metrics *m;
    gw_chaos *chaos;
} fixture;

static void open_chaos(fixture *f, const char *const words[])
{
    gw_chaos_config c = read_ok(words);
    resil_err err = {0, ""};
    assert_int_equal(resil_fake_clock_new(0, 0, &f->fc), 0);
    assert_int_equal(resil_metrics_new(NULL, &f->m, &err), 0);
    assert_int_equal(gw_chaos_new(&c, resil_fake_clock_clock(f->fc), f->m, &f->chaos), 0);
    assert_non_null(f->chaos);
}

static void close_chaos(fixture *f)
{
    gw_chaos_free(f->chaos);
    resil_metrics_free(f->m);
    resil_fake_clock_free(f->fc);
}

/* The next request's note ("-" when nothing was injected). */
static const char *next(gw_chaos *c, char *buf, size_t cap)
{
    gw_chaos_action a;
    bool any = gw_chaos_pick(c, &a);
    gw_chaos_note(&a, buf, cap);
    assert_true(any == (buf[0] != '\0'));
    if (!any)
        snprintf(buf, cap, "-");
    return buf;
}

static void no_chaos_option_makes_no_chaos(void **state)
{
    (void)state;
    gw_chaos_config c;
    gw_chaos_config_default(&c);
    static char sentinel;
    gw_chaos *chaos = (gw_chaos *)(void *)&sentinel; /* to see it set to NULL */
    assert_int_equal(gw_chaos_new(&c, resil_clock_system(), NULL, &chaos), 0);
    assert_null(chaos);
    gw_chaos_action a;
    assert_false(gw_chaos_pick(NULL, &a));
    assert_int_equal(a.end, GW_CHAOS_FORWARD);
    assert_duration_equal(a.delay, 0);
}

/* Without --chaos-seed a seed is drawn from the OS (the start-up line
 * says it, to replay the run): never 0, the value that means "none", and
 * another for each experiment. */
static void without_a_seed_one_is_drawn_never_0_and_new_each_time(void **state)
{
    (void)state;
    const char *const words[] = {"--chaos-status", "0.5:503", NULL};
    fixture a, b;
    open_chaos(&a, words);
    open_chaos(&b, words);
    assert_true(gw_chaos_seed(a.chaos) != 0);
    assert_true(gw_chaos_seed(b.chaos) != 0);
    assert_true(gw_chaos_seed(a.chaos) != gw_chaos_seed(b.chaos));
    close_chaos(&a);
    close_chaos(&b);
}

static void a_fixed_seed_picks_a_pinned_sequence(void **state)
{
    (void)state;
    static const char *const expected[12] = {
        "chaos=latency:2s,status:503", "chaos=drop", "-", "chaos=latency:2s,status:503",
        "chaos=drop", "chaos=latency:2s", "chaos=latency:2s", "-", "-", "chaos=status:503",
        "-", "chaos=latency:2s,status:503"};
    const char *const words[] = {"--chaos-status", "0.4:503:30", "--chaos-latency", "0.5:2s",
                                 "--chaos-drop", "0.2", "--chaos-seed", "40", NULL};
    for (int run = 0; run < 2; run++) { /* the same in every run */
        fixture f;
        open_chaos(&f, words);
        assert_int_equal(gw_chaos_seed(f.chaos), 40);
        char note[64];
        for (int i = 0; i < 12; i++)
            assert_string_equal(next(f.chaos, note, sizeof note), expected[i]);
        close_chaos(&f);
    }
}

/* --chaos-status at seed S draws what --chaos-fail of `resil run` draws at
 * the same seed (a fault strategy seeded S + 1), and --chaos-latency what
 * its --chaos-latency draws (seeded S). */
static void the_draws_are_the_library_s_for_the_same_seed(void **state)
{
    (void)state;
    fixture f;
    open_chaos(&f, (const char *[]){"--chaos-status", "0.3:429", "--chaos-latency", "0.6:1s",
                                    "--chaos-seed", "1234", NULL});
    resil_chaos *fault, *latency;
    resil_chaos_opts o;
    resil_err err = {0, ""};
    resil_chaos_opts_default(&o, RESIL_CHAOS_FAULT);
    o.rate = 0.3;
    o.seed = 1235;
    assert_int_equal(resil_chaos_new(&o, &fault, &err), 0);
    resil_chaos_opts_default(&o, RESIL_CHAOS_LATENCY);
    o.rate = 0.6;
    o.seed = 1234;
    assert_int_equal(resil_chaos_new(&o, &latency, &err), 0);
    for (int i = 0; i < 200; i++) {
        gw_chaos_action a;
        gw_chaos_pick(f.chaos, &a);
        assert_int_equal(a.delay > 0, resil_chaos_decide(latency));
        assert_int_equal(a.end == GW_CHAOS_STATUS, resil_chaos_decide(fault));
    }
    resil_chaos_free(fault);
    resil_chaos_free(latency);
    close_chaos(&f);
}

static void a_status_carries_its_code_and_retry_after(void **state)
{
    (void)state;
    fixture f;
    open_chaos(&f, (const char *[]){"--chaos-status", "1:429:30s", NULL});
    gw_chaos_action a;
    assert_true(gw_chaos_pick(f.chaos, &a));
    assert_int_equal(a.end, GW_CHAOS_STATUS);
    assert_int_equal(a.status, 429);
    assert_string_equal(a.retry_after, "30");
    assert_duration_equal(a.delay, 0);
    close_chaos(&f);
    open_chaos(&f, (const char *[]){"--chaos-status", "1:500", NULL});
    assert_true(gw_chaos_pick(f.chaos, &a));
    assert_int_equal(a.status, 500);
    assert_null(a.retry_after);
    close_chaos(&f);
}

/* Latency first, then drop, then status: a dropped request draws no
 * status, and a delayed one still goes on to either. */
static void a_dropped_request_draws_no_status(void **state)
{
    (void)state;
    fixture f;
    open_chaos(&f, (const char *[]){"--chaos-status", "1:503", "--chaos-drop", "1",
                                    "--chaos-latency", "1:250ms", "--chaos-seed", "3", NULL});
    char note[64];
    for (int i = 0; i < 5; i++)
        assert_string_equal(next(f.chaos, note, sizeof note), "chaos=latency:250ms,drop");
    assert_int_equal(resil_metrics_event_count(f.m, "gateway", "chaos-behavior",
                                               RESIL_EVENT_CHAOS_INJECTED), 5);
    assert_int_equal(resil_metrics_event_count(f.m, "gateway", "chaos-latency",
                                               RESIL_EVENT_CHAOS_INJECTED), 5);
    assert_int_equal(resil_metrics_event_count(f.m, "gateway", "chaos-fault",
                                               RESIL_EVENT_CHAOS_INJECTED), 0);
    assert_int_equal(gw_chaos_injected(f.chaos), 10);
    close_chaos(&f);
}

static void every_injection_is_counted_under_polly_s_event_name(void **state)
{
    (void)state;
    fixture f;
    open_chaos(&f, (const char *[]){"--chaos-status", "1:503:5", NULL});
    gw_chaos_action a;
    for (int i = 0; i < 3; i++)
        gw_chaos_pick(f.chaos, &a);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(resil_metrics_prometheus_string(f.m, &text, &len), 0);
    assert_non_null(strstr(text, "resilience_polly_strategy_events_total{event_name="
                                 "\"Chaos.OnFault\",event_severity=\"Warning\","
                                 "pipeline_name=\"gateway\",strategy_name=\"chaos-fault\","
                                 "exception_type=\"transient\"} 3\n"));
    free(text);
    close_chaos(&f);
}

/* Off: nothing is injected and no draw is spent, so switched on again the
 * sequence goes on where it stopped. */
static void the_kill_switch_stops_every_injection_and_spends_no_draw(void **state)
{
    (void)state;
    const char *const words[] = {"--chaos-status", "0.5:503", "--chaos-latency", "0.5:1s",
                                 "--chaos-seed", "9", NULL};
    fixture ref, f;
    open_chaos(&ref, words);
    open_chaos(&f, words);
    char want[64], got[64];
    for (int i = 0; i < 4; i++)
        assert_string_equal(next(f.chaos, got, sizeof got), next(ref.chaos, want, sizeof want));
    assert_true(gw_chaos_enabled(f.chaos));
    assert_false(gw_chaos_toggle(f.chaos));
    assert_false(gw_chaos_enabled(f.chaos));
    uint64_t before = gw_chaos_injected(f.chaos);
    for (int i = 0; i < 50; i++)
        assert_string_equal(next(f.chaos, got, sizeof got), "-");
    assert_int_equal(gw_chaos_injected(f.chaos), before);
    assert_true(gw_chaos_toggle(f.chaos));
    for (int i = 0; i < 8; i++)
        assert_string_equal(next(f.chaos, got, sizeof got), next(ref.chaos, want, sizeof want));
    close_chaos(&f);
    close_chaos(&ref);
}

static void the_start_line_says_what_is_on(void **state)
{
    (void)state;
    fixture f;
    open_chaos(&f, (const char *[]){"--chaos-drop", "0.05", "--chaos-status", "0.1:503:30",
                                    "--chaos-latency", "0.2:2s", NULL});
    char what[128];
    gw_chaos_describe(f.chaos, what, sizeof what);
    assert_string_equal(what, "status 0.1:503:30, latency 0.2:2s, drop 0.05");
    assert_true(gw_chaos_seed(f.chaos) != 0); /* drawn, to be said */
    close_chaos(&f);
    open_chaos(&f, (const char *[]){"--chaos-drop", "1", NULL});
    gw_chaos_describe(f.chaos, what, sizeof what);
    assert_string_equal(what, "drop 1");
    close_chaos(&f);
}

static void a_note_fits_its_buffer(void **state)
{
    (void)state;
    gw_chaos_action a = {.delay = RESIL_MS(1500), .end = GW_CHAOS_STATUS, .status = 503};
    char buf[64];
    gw_chaos_note(&a, buf, sizeof buf);
    assert_string_equal(buf, "chaos=latency:1.5s,status:503");
    char small[10];
    gw_chaos_note(&a, small, sizeof small);
    assert_string_equal(small, "chaos=lat");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_latency_drop_and_seed_are_read_whole),
        cmocka_unit_test(retry_after_is_seconds_or_a_duration_of_whole_seconds),
        cmocka_unit_test(bad_values_are_refused_by_the_option_s_name),
        cmocka_unit_test(a_seed_without_chaos_is_refused),
        cmocka_unit_test(no_chaos_option_makes_no_chaos),
        cmocka_unit_test(without_a_seed_one_is_drawn_never_0_and_new_each_time),
        cmocka_unit_test(a_fixed_seed_picks_a_pinned_sequence),
        cmocka_unit_test(the_draws_are_the_library_s_for_the_same_seed),
        cmocka_unit_test(a_status_carries_its_code_and_retry_after),
        cmocka_unit_test(a_dropped_request_draws_no_status),
        cmocka_unit_test(every_injection_is_counted_under_polly_s_event_name),
        cmocka_unit_test(the_kill_switch_stops_every_injection_and_spends_no_draw),
        cmocka_unit_test(the_start_line_says_what_is_on),
        cmocka_unit_test(a_note_fits_its_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
