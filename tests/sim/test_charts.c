/*
 * test_charts.c — the time-series charts of `resil sim`, read back as a
 * browser would place them: the SVG is deterministic for a seed, so the
 * capacity line's pixels, the band where zero is drawn, the labels'
 * positions and the panel titles are asserted exactly, and every label's
 * box is checked against every plotted segment; the layers chart's
 * worst-case label against the bars' values.
 *
 * Geometry the assertions rest on (svg.c): the first panel's plot area is
 * x 80 to 870, y 112 to 282 (170 px high); on a log scale the bottom 24 px
 * are the zero band, so the decades span y 112 to 258 and zero is drawn at
 * 270. A label's box is 0.6 em per character wide, 0.8 em above its
 * baseline and 0.25 em below, with 2 px of margin.
 */
#include <math.h>

#include "simtest.h"

/* ---- reading the SVG -------------------------------------------------------- */

/* The lines (one element each) holding `needle`, copied; NULL-terminated. */
static char **lines_with(const char *svg, const char *needle)
{
    size_t n = 0, cap = 8;
    char **out = calloc(cap + 1, sizeof *out);
    for (const char *p = svg; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char *line = strndup(p, len);
        if (strstr(line, needle) != NULL) {
            if (n == cap) {
                cap *= 2;
                out = realloc(out, (cap + 1) * sizeof *out);
            }
            out[n++] = line;
            out[n] = NULL;
        } else {
            free(line);
        }
        p += len + (end != NULL);
    }
    return out;
}

static void free_lines(char **lines)
{
    for (size_t i = 0; lines[i] != NULL; i++)
        free(lines[i]);
    free(lines);
}

static size_t count(char **lines)
{
    size_t n = 0;
    while (lines[n] != NULL)
        n++;
    return n;
}

/* The value of attribute `name` in an element's line, as written. */
static const char *attr(const char *line, const char *name)
{
    static char buf[8192];
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *p = strstr(line, key);
    if (p == NULL)
        fail_msg("no %s in %s", name, line);
    p += strlen(key);
    const char *q = strchr(p, '"');
    snprintf(buf, sizeof buf, "%.*s", (int)(q - p), p);
    return buf;
}

static double num(const char *line, const char *name)
{
    return strtod(attr(line, name), NULL);
}

/* A <text> element's content. */
static const char *content(const char *line)
{
    static char buf[512];
    const char *p = strchr(line, '>') + 1;
    const char *q = strstr(p, "</text>");
    snprintf(buf, sizeof buf, "%.*s", (int)(q - p), p);
    return buf;
}

/* ---- geometry -------------------------------------------------------------- */

typedef struct rect {
    double x0, y0, x1, y1;
} rect;

static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static rect label_box(const char *line)
{
    double size = num(line, "font-size"), x = num(line, "x"), y = num(line, "y");
    double w = 0.6 * size * (double)chars(content(line));
    const char *anchor = attr(line, "text-anchor");
    double x0 = strcmp(anchor, "end") == 0 ? x - w : strcmp(anchor, "middle") == 0 ? x - w / 2 : x;
    return (rect){x0 - 2, y - 0.8 * size - 2, x0 + w + 2, y + 0.25 * size + 2};
}

/* Liang–Barsky: does the segment keep some part inside the rectangle? */
static bool segment_hits(const rect *r, double ax, double ay, double bx, double by)
{
    double t0 = 0, t1 = 1, dx = bx - ax, dy = by - ay;
    double p[4] = {-dx, dx, -dy, dy};
    double q[4] = {ax - r->x0, r->x1 - ax, ay - r->y0, r->y1 - ay};
    for (int i = 0; i < 4; i++) {
        if (p[i] == 0) {
            if (q[i] < 0)
                return false;
            continue;
        }
        double t = q[i] / p[i];
        if (p[i] < 0)
            t0 = fmax(t0, t);
        else
            t1 = fmin(t1, t);
    }
    return t0 <= t1;
}

/* How many segments of the polyline's points the rectangle meets. */
static size_t hits(const rect *r, const char *points)
{
    size_t n = 0;
    double ax = 0, ay = 0, bx, by;
    bool first = true;
    for (const char *p = points; *p;) {
        char *end;
        bx = strtod(p, &end);
        by = strtod(end + 1, &end);
        if (!first)
            n += segment_hits(r, ax, ay, bx, by);
        first = false;
        ax = bx, ay = by;
        p = *end == ' ' ? end + 1 : end;
    }
    return n;
}

/* No label of the chart meets a segment of any of its polylines (the
 * panels do not overlap, so each label is checked against them all). */
static void assert_labels_clear(const char *svg)
{
    char **labels = lines_with(svg, "class=\"label\"");
    char **lines = lines_with(svg, "<polyline");
    assert_true(count(labels) > 0);
    for (size_t i = 0; labels[i] != NULL; i++) {
        rect box = label_box(labels[i]);
        for (size_t k = 0; lines[k] != NULL; k++)
            if (hits(&box, attr(lines[k], "points")) != 0)
                fail_msg("label %s meets %s", labels[i], lines[k]);
    }
    free_lines(labels);
    free_lines(lines);
}

/* ---- the charts ------------------------------------------------------------ */

#define FAILOVER() SIM("failover", "--policy", "noretry,breaker", "--duration", "60s", "--svg", "-")

/* Decades 1 to 10k over 146 px: 2,000/s sits log10(2000)/4 of the way up
 * from y 258, at 137.5. */
static void the_capacity_line_is_drawn_at_the_failover_capacity(void **state)
{
    (void)state;
    captured c = FAILOVER();
    assert_int_equal(c.status, 0);
    char **cap = lines_with(c.out, "class=\"capacity\"");
    assert_int_equal(count(cap), 2);
    assert_string_equal(attr(cap[0], "points"), "80.0,137.5 870.0,137.5");
    assert_string_equal(attr(cap[1], "points"), "80.0,377.5 870.0,377.5");
    free_lines(cap);
    char **labels = lines_with(c.out, "capacity 2,000 calls/s</text>");
    assert_int_equal(count(labels), 2);
    free_lines(labels);
    release(&c);
}

/* Linear 0 to 600 over 170 px: 300/s at y 197; --capacity 250 at 211.2. */
static void the_capacity_line_follows_the_capacity_flag(void **state)
{
    (void)state;
    captured c = SIM("metastable", "--policy", "naive", "--duration", "30s", "--svg", "-");
    assert_int_equal(c.status, 0);
    char **cap = lines_with(c.out, "class=\"capacity\"");
    assert_int_equal(count(cap), 1);
    assert_string_equal(attr(cap[0], "points"), "80.0,197.0 870.0,197.0");
    assert_non_null(strstr(c.out, ">capacity 300 calls/s</text>"));
    free_lines(cap);
    release(&c);
    c = SIM("metastable", "--policy", "naive", "--duration", "30s", "--capacity", "250", "--svg",
            "-");
    assert_int_equal(c.status, 0);
    cap = lines_with(c.out, "class=\"capacity\"");
    assert_string_equal(attr(cap[0], "points"), "80.0,211.2 870.0,211.2");
    assert_non_null(strstr(c.out, ">capacity 250 calls/s</text>"));
    free_lines(cap);
    release(&c);
}

/* Brownout halves the capacity in its band: 0 to 250 linear, 200/s at
 * y 146 and 100/s at 214; the band is 30 s to 60 s of 90 s. */
static void the_brownout_capacity_steps_down_in_the_band(void **state)
{
    (void)state;
    captured c = SIM("brownout", "--policy", "static", "--duration", "90s", "--svg", "-");
    assert_int_equal(c.status, 0);
    char **cap = lines_with(c.out, "class=\"capacity\"");
    assert_int_equal(count(cap), 1);
    assert_string_equal(attr(cap[0], "points"), "80.0,146.0 343.3,146.0 343.3,214.0 "
                                                "606.7,214.0 606.7,146.0 870.0,146.0");
    free_lines(cap);
    release(&c);
}

static void zero_has_a_band_of_its_own_on_the_log_scale(void **state)
{
    (void)state;
    captured c = FAILOVER();
    assert_int_equal(c.status, 0);
    char **bands = lines_with(c.out, "class=\"zero-band\"");
    assert_int_equal(count(bands), 2);
    assert_string_equal(attr(bands[0], "y"), "258.0");
    assert_string_equal(attr(bands[0], "height"), "24.0");
    assert_string_equal(attr(bands[1], "y"), "498.0");
    free_lines(bands);
    /* Ticks: 0 in the band's middle, the lowest decade (1/s) at its top. */
    assert_non_null(strstr(c.out, "<text x=\"73.0\" y=\"274.0\" text-anchor=\"end\" "
                                  "font-size=\"11\" font-family=\"Helvetica,Arial,sans-serif\">0"
                                  "</text>"));
    assert_non_null(strstr(c.out, "<text x=\"73.0\" y=\"262.0\" text-anchor=\"end\" "
                                  "font-size=\"11\" font-family=\"Helvetica,Arial,sans-serif\">1"
                                  "</text>"));
    /* noretry's goodput during the outage is 0, drawn on the 0 line; every
     * positive value stays in the decades. */
    char **goodput = lines_with(c.out, "class=\"goodput\"");
    size_t zeros = 0;
    const char *pts = attr(goodput[0], "points");
    for (const char *p = pts; *p;) {
        char *end;
        strtod(p, &end);
        double y = strtod(end + 1, &end);
        if (y > 258.0) {
            assert_true(y == 270.0);
            zeros++;
        }
        p = *end == ' ' ? end + 1 : end;
    }
    assert_int_equal(zeros, 19); /* bins 11 to 29: the outage less its first second */
    free_lines(goodput);
    release(&c);
}

static void labels_are_placed_clear_of_the_lines(void **state)
{
    (void)state;
    captured c = FAILOVER();
    assert_int_equal(c.status, 0);
    char **labels = lines_with(c.out, "class=\"label\"");
    assert_int_equal(count(labels), 4);
    /* Where nothing is in the way: the band's top left corner, and just
     * above the capacity line at the right edge. */
    assert_string_equal(content(labels[0]), "outage");
    assert_true(num(labels[0], "x") == 215.7 && num(labels[0], "y") == 126.0);
    assert_string_equal(content(labels[1]), "capacity 2,000 calls/s");
    assert_true(num(labels[1], "x") == 866.0 && num(labels[1], "y") == 131.5);
    free_lines(labels);
    assert_labels_clear(c.out);
    release(&c);

    /* Metastable's naive panel: offered load runs across the band's top
     * left corner, so the trigger label moves down the band. */
    c = SIM("metastable", "--svg", "-");
    assert_int_equal(c.status, 0);
    labels = lines_with(c.out, "class=\"label\"");
    assert_string_equal(content(labels[0]), "trigger");
    char **offered = lines_with(c.out, "class=\"offered\"");
    rect corner = label_box(labels[0]);
    double dy = 126.0 - num(labels[0], "y");
    corner.y0 += dy, corner.y1 += dy;
    assert_true(hits(&corner, attr(offered[0], "points")) > 0);
    assert_true(num(labels[0], "y") == 138.0);
    free_lines(offered);
    free_lines(labels);
    assert_labels_clear(c.out);
    release(&c);

    c = SIM("brownout", "--svg", "-");
    assert_int_equal(c.status, 0);
    assert_labels_clear(c.out);
    release(&c);
}

static bool boxes_meet(const rect *a, const rect *b)
{
    return a->x0 <= b->x1 && b->x0 <= a->x1 && a->y0 <= b->y1 && b->y0 <= a->y1;
}

/* Layers: 0 to 80 over 260 px from y 100, so the worst case (64) is at
 * y 152. naive's bar reaches it: its value goes above the line (144), and
 * the line's label leaves the right end, over naive's bar, for the left. */
static void the_worst_case_label_keeps_clear_of_the_bars(void **state)
{
    (void)state;
    captured c = SIM("layers", "--requests", "1", "--policy", "noretry,naive", "--svg", "-");
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "<line class=\"worst-case\" x1=\"110.0\" y1=\"152.0\" "
                                  "x2=\"590.0\" y2=\"152.0\""));
    char **values = lines_with(c.out, "class=\"value\"");
    assert_int_equal(count(values), 2);
    assert_string_equal(content(values[1]), "64.0");
    assert_true(num(values[1], "x") == 470.0 && num(values[1], "y") == 144.0);
    char **labels = lines_with(c.out, "class=\"label\"");
    assert_int_equal(count(labels), 1);
    assert_string_equal(content(labels[0]), "worst case 4^3 = 64");
    assert_true(num(labels[0], "x") == 114.0 && num(labels[0], "y") == 146.0);
    rect label = label_box(labels[0]);
    for (size_t i = 0; values[i] != NULL; i++) {
        rect v = label_box(values[i]);
        assert_false(boxes_meet(&label, &v));
        assert_true(v.y1 < 152.0 || v.y0 > 152.0); /* off the line */
    }
    free_lines(values);
    free_lines(labels);
    release(&c);
}

static void panel_titles_say_whether_and_when_it_recovered(void **state)
{
    (void)state;
    captured c = FAILOVER();
    char **titles = lines_with(c.out, "class=\"panel-title\"");
    assert_int_equal(count(titles), 2);
    assert_string_equal(content(titles[0]), "noretry — recovered at once");
    assert_string_equal(content(titles[1]), "breaker — recovered after 7 s");
    free_lines(titles);
    release(&c);
    c = SIM("metastable", "--policy", "naive,tokens", "--svg", "-");
    titles = lines_with(c.out, "class=\"panel-title\"");
    assert_string_equal(content(titles[0]), "naive — did not recover");
    assert_string_equal(content(titles[1]), "tokens — recovered after 1 s");
    free_lines(titles);
    release(&c);
}

/* Written from a result made by hand: a mean over some runs. */
static void a_partial_recovery_says_in_how_many_runs(void **state)
{
    (void)state;
    resil_sim_config cfg;
    resil_sim_config_default(&cfg, RESIL_SIM_METASTABLE);
    cfg.duration = RESIL_S(4);
    cfg.outage_start = RESIL_S(1);
    cfg.outage = RESIL_S(1);
    double zeros[4] = {0, 0, 0, 0}, load[4] = {280, 280, 280, 280};
    resil_sim_result r;
    memset(&r, 0, sizeof r);
    resil_err err = {0, ""};
    assert_int_equal(resil_sim_policy_parse("full", &r.policy, &err), 0);
    r.runs = 5;
    r.recovered_runs = 3;
    r.recovery_s = 2.5;
    r.series = (resil_sim_series){4, RESIL_S(1), load, load, load, zeros, zeros};
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_int_equal(resil_sim_write_svg(f, &cfg, &r, 1), 0);
    fclose(f);
    char **titles = lines_with(out, "class=\"panel-title\"");
    assert_string_equal(content(titles[0]), "full — recovered in 3 of 5 runs, after 2.5 s");
    free_lines(titles);
    free(out);
}

static void retries_are_said_to_span_all_layers_only_when_there_are_several(void **state)
{
    (void)state;
    captured c = FAILOVER();
    assert_non_null(strstr(c.out, ">retries/s (all layers)</text>"));
    release(&c);
    c = SIM("failover", "--policy", "noretry", "--duration", "60s", "--layers", "1", "--svg", "-");
    assert_non_null(strstr(c.out, ">retries/s</text>"));
    assert_null(strstr(c.out, "all layers"));
    release(&c);
    c = SIM("metastable", "--policy", "naive", "--duration", "30s", "--svg", "-");
    assert_non_null(strstr(c.out, ">retries/s</text>"));
    assert_null(strstr(c.out, "all layers"));
    release(&c);
}

static void a_chart_of_no_results_is_refused(void **state)
{
    (void)state;
    resil_sim_config cfg;
    resil_sim_config_default(&cfg, RESIL_SIM_FAILOVER);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_int_equal(resil_sim_write_svg(f, &cfg, NULL, 0), RESIL_EINVAL);
    fclose(f);
    assert_string_equal(out, "");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_capacity_line_is_drawn_at_the_failover_capacity),
        cmocka_unit_test(the_capacity_line_follows_the_capacity_flag),
        cmocka_unit_test(the_brownout_capacity_steps_down_in_the_band),
        cmocka_unit_test(zero_has_a_band_of_its_own_on_the_log_scale),
        cmocka_unit_test(labels_are_placed_clear_of_the_lines),
        cmocka_unit_test(the_worst_case_label_keeps_clear_of_the_bars),
        cmocka_unit_test(panel_titles_say_whether_and_when_it_recovered),
        cmocka_unit_test(a_partial_recovery_says_in_how_many_runs),
        cmocka_unit_test(retries_are_said_to_span_all_layers_only_when_there_are_several),
        cmocka_unit_test(a_chart_of_no_results_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
