/*
 * svg.c — charts as hand-written SVG: time series for failover and
 * metastable, bars for occ and layers.
 *
 * A chart is written by a few primitives over one mapping from data to
 * pixels (axes with "nice" 1-2-5 ticks, lines, bars, a legend), not by a
 * plotting library: the simulator stays a C program with no dependency, and
 * the output is small, deterministic text that reads well in a browser and
 * diffs well in a repository. Time-series panels share one y scale so that
 * policies can be compared by eye, and each draws the dependency's
 * capacity (the scenario's own --capacity) as a dotted line: whether the
 * offered load is above it is what the scenarios are about. Zero on the
 * failover's log scale has a band of its own, and the labels inside a
 * panel are placed clear of the plotted lines (both explained where they
 * are drawn). Elements a reader or a test looks for carry a class
 * (capacity, zero-band, label, panel-title, one per series).
 */
#include <math.h>
#include <string.h>

#include "model.h"
#include "output.h"

#define FONT "font-family=\"Helvetica,Arial,sans-serif\""
#define COLOR_DEMAND "#7f7f7f"
#define COLOR_OFFERED "#1f77b4"
#define COLOR_GOODPUT "#2ca02c"
#define COLOR_RETRIES "#ff7f0e"
#define COLOR_CAPACITY "#9467bd"
#define COLOR_BAR "#4c78a8"
#define COLOR_BAR2 "#f58518"

/* On a log scale, the band at the bottom where zero is drawn (see the
 * time series below). */
#define ZERO_BAND 24.0

typedef struct plot {
    FILE *f;
    double x, y, w, h;     /* the plot area, in pixels */
    double x0, x1, y0, y1; /* the data it shows */
    bool log_y;            /* decades from y0 (a power of ten) to y1 */
} plot;

static double px(const plot *p, double v)
{
    return p->x + (v - p->x0) / (p->x1 - p->x0) * p->w;
}

static double py(const plot *p, double v)
{
    if (p->log_y) {
        if (v <= 0)
            return p->y + p->h - ZERO_BAND / 2;
        double lo = log10(p->y0), hi = log10(p->y1), span = p->h - ZERO_BAND;
        double lv = log10(fmax(v, p->y0));
        return p->y + span - (lv - lo) / (hi - lo) * span;
    }
    return p->y + p->h - (v - p->y0) / (p->y1 - p->y0) * p->h;
}

/* A 1, 2 or 5 times a power of ten, giving about `target` intervals. */
static double nice_step(double range, int target)
{
    if (!(range > 0))
        return 1;
    double raw = range / target;
    double mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    double step = r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10;
    return step * mag;
}

/* Round a maximum up to a whole number of steps (at least one). */
static double nice_max(double v, int target)
{
    if (!(v > 0))
        v = 1;
    double step = nice_step(v, target);
    return ceil(v / step - 1e-9) * step;
}

static void fmt_tick(double v, double step, char *buf, size_t cap)
{
    if (step >= 1 || v == 0)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%.*f", (int)ceil(-log10(step)), v);
}

static void text(FILE *f, double x, double y, const char *anchor, int size,
                 const char *extra, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\" %s%s>%s</text>\n",
            x, y, anchor, size, FONT, extra, s);
}

/* 0.01, 0.1, 1, 10, 100, 1k, 10k, 100k, 1M … */
static void fmt_decade(double v, char *buf, size_t cap)
{
    if (v < 1)
        snprintf(buf, cap, "%g", v);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.0fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, cap, "%.0fk", v / 1e3);
    else
        snprintf(buf, cap, "%.0f", v);
}

static void y_tick(const plot *p, double v, const char *label)
{
    double y = py(p, v);
    fprintf(p->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
            p->x, y, p->x + p->w, y);
    fprintf(p->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
            p->x - 4, y, p->x, y);
    text(p->f, p->x - 7, y + 4, "end", 11, "", label);
}

static void y_ticks_log(const plot *p)
{
    char buf[32];
    for (double v = p->y0; v <= p->y1 * (1 + 1e-9); v *= 10) {
        fmt_decade(v, buf, sizeof buf);
        y_tick(p, v, buf);
    }
}

static void y_ticks_linear(const plot *p)
{
    double step = nice_step(p->y1 - p->y0, 5);
    char buf[32];
    for (double v = p->y0; v <= p->y1 + step * 1e-6; v += step) {
        fmt_tick(v, step, buf, sizeof buf);
        y_tick(p, v, buf);
    }
}

static void y_axis(const plot *p, const char *label)
{
    if (p->log_y)
        y_ticks_log(p);
    else
        y_ticks_linear(p);
    char rot[96];
    double cx = p->x - 52, cy = p->y + p->h / 2;
    snprintf(rot, sizeof rot, " transform=\"rotate(-90 %.1f %.1f)\"", cx, cy);
    text(p->f, cx, cy, "middle", 12, rot, label);
}

static void x_axis(const plot *p, const char *label)
{
    double step = nice_step(p->x1 - p->x0, 10);
    char buf[32];
    for (double v = p->x0; v <= p->x1 + step * 1e-6; v += step) {
        double x = px(p, v);
        fprintf(p->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                x, p->y + p->h, x, p->y + p->h + 4);
        fmt_tick(v, step, buf, sizeof buf);
        text(p->f, x, p->y + p->h + 16, "middle", 11, "", buf);
    }
    text(p->f, p->x + p->w / 2, p->y + p->h + 32, "middle", 12, "", label);
}

static void frame(const plot *p)
{
    fprintf(p->f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            p->x, p->y, p->w, p->h);
}

static void begin(FILE *f, double w, double h, const char *title, const char *subtitle)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\">\n",
            w, h, w, h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    text(f, w / 2, 26, "middle", 16, " font-weight=\"bold\"", title);
    text(f, w / 2, 46, "middle", 12, " fill=\"#555\"", subtitle);
}

static void legend(FILE *f, double x, double y, const char *const *names,
                   const char *const *colors, const char *const *dashes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"2.5\"",
                x, y - 4, x + 22, y - 4, colors[i]);
        if (dashes[i] != NULL)
            fprintf(f, " stroke-dasharray=\"%s\"", dashes[i]);
        fprintf(f, "/>\n");
        text(f, x + 28, y, "start", 12, "", names[i]);
        x += 34 + 8.0 * (double)strlen(names[i]);
    }
}

/* ---- time series ---------------------------------------------------------- */

/*
 * Zero on a log scale. A logarithm has no zero, and clamping a zero to the
 * lowest decade made a goodput of 0 read as 10/s. The scale's lowest
 * decade is therefore the one at or below the smallest positive value
 * shown (so that no positive value is clamped either), and zero gets a
 * band of its own beneath it, shaded and labelled 0. A symmetric-log axis
 * (linear near zero) was the alternative; it was not chosen because its
 * linear stretch gives values such as 0.5/s a place between 0 and the
 * first decade that reads like a scale it is not. With the band, a line
 * is either in the decades, where distances are ratios, or on the 0 line.
 */
#define LOG_FLOOR 1e-3 /* the lowest decade ever used */

static double decade_at_or_below(double v)
{
    if (!isfinite(v))
        return 1;
    return fmax(LOG_FLOOR, pow(10, floor(log10(v) + 1e-9)));
}

static void zero_band(const plot *p)
{
    double top = p->y + p->h - ZERO_BAND;
    fprintf(p->f, "<rect class=\"zero-band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\" fill=\"#f2f2f2\"/>\n",
            p->x, top, p->w, ZERO_BAND);
    fprintf(p->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                  "stroke-dasharray=\"2,2\"/>\n",
            p->x, top, p->x + p->w, top);
    y_tick(p, 0, "0");
}

/*
 * Labels inside a panel (the outage band's, the capacity line's) are
 * placed where no plotted line crosses them. Each label has a list of
 * candidate positions in order of preference; the first whose box meets
 * no segment of any polyline, no label placed before it and not the
 * panel's title wins, or, when every candidate is crossed, the one crossed
 * least (the earlier on a tie). The box is estimated, not measured: 0.6 em
 * per character across, 0.8 em above the baseline and 0.25 em below, 2 px
 * of margin. The same data always give the same positions.
 */
typedef struct box {
    double x0, y0, x1, y1;
} box;

typedef struct series_line {
    const double *v; /* per bin; NULL for the capacity line's points */
    const double (*pts)[2];
    size_t npts;
} series_line;

#define MAX_LINES 6
#define MAX_LABELS (2 * RESIL_SIM_MAX_POLICIES + 2)

typedef struct scene {
    const plot *p;
    const resil_sim_series *s;
    double per_s;
    series_line lines[MAX_LINES];
    size_t nlines;
    box labels[MAX_LABELS];
    size_t nlabels;
} scene;

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static box text_box(double x, double y, const char *anchor, int size, const char *s)
{
    double w = 0.6 * size * (double)utf8_chars(s);
    double x0 = strcmp(anchor, "end") == 0 ? x - w : strcmp(anchor, "middle") == 0 ? x - w / 2 : x;
    return (box){x0 - 2, y - 0.8 * size - 2, x0 + w + 2, y + 0.25 * size + 2};
}

static bool inside(const box *b, double x, double y)
{
    return x >= b->x0 && x <= b->x1 && y >= b->y0 && y <= b->y1;
}

/* Does segment (ax,ay)-(bx,by) cross the line x = c between y0 and y1? */
static bool crosses_x(double ax, double ay, double bx, double by, double c, double y0, double y1)
{
    if ((ax - c) * (bx - c) > 0 || ax == bx)
        return false;
    double y = ay + (by - ay) * (c - ax) / (bx - ax);
    return y >= y0 && y <= y1;
}

static bool segment_meets(const box *b, double ax, double ay, double bx, double by)
{
    if (inside(b, ax, ay) || inside(b, bx, by))
        return true;
    return crosses_x(ax, ay, bx, by, b->x0, b->y0, b->y1) ||
           crosses_x(ax, ay, bx, by, b->x1, b->y0, b->y1) ||
           crosses_x(ay, ax, by, bx, b->y0, b->x0, b->x1) ||
           crosses_x(ay, ax, by, bx, b->y1, b->x0, b->x1);
}

static void point_of(const scene *sc, const series_line *l, size_t i, double *x, double *y)
{
    if (l->v == NULL) {
        *x = l->pts[i][0];
        *y = l->pts[i][1];
        return;
    }
    double bin_s = (double)sc->s->bin / 1e9;
    *x = px(sc->p, ((double)i + 0.5) * bin_s);
    *y = py(sc->p, l->v[i] * sc->per_s);
}

static bool boxes_meet(const box *a, const box *b)
{
    return a->x0 <= b->x1 && b->x0 <= a->x1 && a->y0 <= b->y1 && b->y0 <= a->y1;
}

static size_t crossings(const scene *sc, const box *b)
{
    size_t n = 0;
    for (size_t k = 0; k < sc->nlines; k++) {
        const series_line *l = &sc->lines[k];
        double ax, ay, bx, by;
        for (size_t i = 0; i + 1 < l->npts; i++) {
            point_of(sc, l, i, &ax, &ay);
            point_of(sc, l, i + 1, &bx, &by);
            n += segment_meets(b, ax, ay, bx, by);
        }
    }
    for (size_t k = 0; k < sc->nlabels; k++)
        n += boxes_meet(b, &sc->labels[k]);
    return n;
}

typedef struct spot {
    double x, y;
    const char *anchor;
} spot;

/* Write `s` at the first clear spot (see above) and remember its box. */
static void place_label(scene *sc, const spot *spots, size_t nspots, const char *color,
                        const char *s)
{
    size_t best = 0, least = SIZE_MAX;
    for (size_t i = 0; i < nspots && least > 0; i++) {
        box b = text_box(spots[i].x, spots[i].y, spots[i].anchor, 11, s);
        size_t n = crossings(sc, &b);
        if (n < least) {
            least = n;
            best = i;
        }
    }
    const spot *w = &spots[best];
    if (sc->nlabels < MAX_LABELS)
        sc->labels[sc->nlabels++] = text_box(w->x, w->y, w->anchor, 11, s);
    char extra[48];
    snprintf(extra, sizeof extra, " class=\"label\" fill=\"%s\"", color);
    text(sc->p->f, w->x, w->y, w->anchor, 11, extra, s);
}

#define MAX_SPOTS 128

/* Above the plot, at its right end, beside the panel's title: where a
 * label goes when every place inside is crossed. */
static spot margin_spot(const plot *p)
{
    return (spot){p->x + p->w, p->y - 8, "end"};
}

/* Down the band's inside left edge, its inside right edge, then just
 * outside it on the right and on the left; the margin last. */
static size_t band_spots(const plot *p, double a, double b, spot *out)
{
    double bottom = p->y + p->h - (p->log_y ? ZERO_BAND : 0) - 4;
    const spot columns[] = {{a + 4, 0, "start"}, {b - 4, 0, "end"},
                            {b + 4, 0, "start"}, {a - 4, 0, "end"}};
    size_t n = 0;
    for (size_t k = 0; k < sizeof columns / sizeof columns[0]; k++)
        for (double y = p->y + 14; y <= bottom && n + 1 < MAX_SPOTS; y += 12)
            out[n++] = (spot){columns[k].x, y, columns[k].anchor};
    out[n++] = margin_spot(p);
    return n;
}

/* Rows just above and just below the line, then farther off, each from the
 * right edge leftwards; the margin last. */
static size_t line_spots(const plot *p, double y, spot *out)
{
    static const double rows[] = {-6, 14, -18, 26, -30, 38};
    size_t n = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        double ty = y + rows[r];
        if (ty - 11 < p->y || ty + 3 > p->y + p->h - (p->log_y ? ZERO_BAND : 0))
            continue;
        for (double x = p->x + p->w - 4; x > p->x + 150 && n + 1 < MAX_SPOTS; x -= p->w / 16)
            out[n++] = (spot){x, ty, "end"};
    }
    out[n++] = margin_spot(p);
    return n;
}

/* The largest value of every series of every result, and the smallest
 * positive one (INFINITY when none is), per second. */
static void series_range(const resil_sim_result *r, size_t n, double per_s, double *lo,
                         double *hi)
{
    *lo = INFINITY;
    *hi = 0;
    for (size_t i = 0; i < n; i++) {
        const resil_sim_series *s = &r[i].series;
        const double *all[] = {s->arrivals, s->offered, s->goodput, s->retries};
        for (size_t k = 0; k < 4; k++) {
            for (size_t b = 0; b < s->nbins; b++) {
                double v = all[k][b] * per_s;
                *hi = fmax(*hi, v);
                if (v > 0)
                    *lo = fmin(*lo, v);
            }
        }
    }
}

static void polyline(const scene *sc, const series_line *l, const char *cls, const char *color,
                     const char *dashes)
{
    FILE *f = sc->p->f;
    fprintf(f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"", cls,
            color);
    if (dashes != NULL)
        fprintf(f, " stroke-dasharray=\"%s\"", dashes);
    fprintf(f, " points=\"");
    for (size_t i = 0; i < l->npts; i++) {
        double x, y;
        point_of(sc, l, i, &x, &y);
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", x, y);
    }
    fprintf(f, "\"/>\n");
}

static double outage_from(const resil_sim_config *c) { return (double)c->outage_start / 1e9; }

static double outage_to(const resil_sim_config *c, const plot *p)
{
    return fmin((double)resil__sim_outage_end(c) / 1e9, p->x1);
}

/* The dependency's capacity over time, as pixels: flat, but halved in the
 * band for brownout, whose band is exactly that. */
static size_t capacity_points(const plot *p, const resil_sim_config *c, double pts[6][2])
{
    double cap = c->capacity, y = py(p, cap);
    double a = outage_from(c), b = outage_to(c, p);
    if (c->scenario != RESIL_SIM_BROWNOUT || !(b > a)) {
        pts[0][0] = p->x, pts[0][1] = y;
        pts[1][0] = p->x + p->w, pts[1][1] = y;
        return 2;
    }
    double half = py(p, cap / 2);
    double xs[6] = {p->x, px(p, a), px(p, a), px(p, b), px(p, b), p->x + p->w};
    double ys[6] = {y, y, half, half, y, y};
    for (int i = 0; i < 6; i++)
        pts[i][0] = xs[i], pts[i][1] = ys[i];
    return 6;
}

static void outage_band(const plot *p, const resil_sim_config *c)
{
    double a = outage_from(c), b = outage_to(c, p);
    if (!(b > a))
        return;
    fprintf(p->f, "<rect class=\"outage\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                  "fill=\"#d62728\" fill-opacity=\"0.08\"/>\n",
            px(p, a), p->y, px(p, b) - px(p, a), p->h);
}

static const char *band_name(const resil_sim_config *c)
{
    return c->scenario == RESIL_SIM_METASTABLE ? "trigger"
           : c->scenario == RESIL_SIM_BROWNOUT ? "half capacity"
                                               : "outage";
}

/* 2000 → "2,000"; 2.5 → "2.5". */
static void fmt_amount(double v, char *buf, size_t cap)
{
    if (v != floor(v) || v >= 1e15) {
        snprintf(buf, cap, "%g", v);
        return;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t len = strlen(digits), o = 0;
    for (size_t i = 0; i < len && o + 2 < cap; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

static void panel_labels(scene *sc, const resil_sim_config *c, double cap_y)
{
    const plot *p = sc->p;
    spot spots[MAX_SPOTS];
    double a = outage_from(c), b = outage_to(c, p);
    if (b > a)
        place_label(sc, spots, band_spots(p, px(p, a), px(p, b), spots), "#d62728",
                    band_name(c));
    char amount[32], label[64];
    fmt_amount(c->capacity, amount, sizeof amount);
    snprintf(label, sizeof label, "capacity %s calls/s", amount);
    place_label(sc, spots, line_spots(p, cap_y, spots), COLOR_CAPACITY, label);
}

/* Writes the title and returns its box, for the labels to keep clear of. */
static box panel_title(FILE *f, const resil_sim_config *c, const resil_sim_result *r, double x,
                       double y)
{
    char title[1024], rec[96]; /* room for every value the formats can print */
    resil__sim_recovery_text(r, RESIL__SIM_TITLE, rec, sizeof rec);
    if (c->scenario == RESIL_SIM_BROWNOUT)
        snprintf(title, sizeof title, "%s — %.0f requests/s during the brownout, p99 %.0f ms, %s",
                 r->policy.name, r->outage_goodput, r->p99_ms, rec);
    else
        snprintf(title, sizeof title, "%s — %s", r->policy.name, rec);
    text(f, x, y, "start", 13, " class=\"panel-title\" font-weight=\"bold\"", title);
    return text_box(x, y, "start", 13, title);
}

/* The shared y scale: linear to a nice maximum, or decades (see above). */
typedef struct yscale {
    bool log;
    double y0, y1;
} yscale;

/* Failover loads span decades (demand to 50× demand): a log scale shows the
 * healthy and the storming panels alike. Metastable stays within 2×. */
static yscale shared_scale(const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    double lo, hi;
    series_range(r, n, 1e9 / (double)c->bin, &lo, &hi);
    if (c->scenario != RESIL_SIM_FAILOVER) /* room above the capacity line */
        return (yscale){false, 0, nice_max(fmax(hi, c->capacity * 1.05), 5)};
    double y0 = decade_at_or_below(fmin(lo, c->capacity));
    double y1 = pow(10, ceil(log10(fmax(fmax(hi, c->capacity), y0)) - 1e-9));
    return (yscale){true, y0, fmax(y1, y0 * 100)};
}

static void panel(FILE *f, const resil_sim_config *c, const resil_sim_result *r, double top,
                  const yscale *ys)
{
    const resil_sim_series *s = &r->series;
    plot p = {f, 80, top + 22, 790, 170, 0, (double)c->duration / 1e9, ys->y0, ys->y1, ys->log};
    box title = panel_title(f, c, r, p.x, top + 14);
    y_axis(&p, p.log_y ? "per second (log scale)" : "per second");
    if (p.log_y)
        zero_band(&p);
    outage_band(&p, c);
    scene sc = {.p = &p, .s = s, .per_s = 1e9 / (double)s->bin, .labels = {title}, .nlabels = 1};
    double cap[6][2];
    size_t ncap = capacity_points(&p, c, cap);
    /* Retries are dashed over offered load: in a storm they nearly coincide. */
    const series_line lines[] = {
        {s->offered, NULL, s->nbins},  {s->goodput, NULL, s->nbins},
        {s->retries, NULL, s->nbins},  {s->arrivals, NULL, s->nbins},
        {NULL, (const double(*)[2])cap, ncap},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        sc.lines[sc.nlines++] = lines[i];
    polyline(&sc, &lines[4], "capacity", COLOR_CAPACITY, "1,3");
    polyline(&sc, &lines[0], "offered", COLOR_OFFERED, NULL);
    polyline(&sc, &lines[1], "goodput", COLOR_GOODPUT, NULL);
    polyline(&sc, &lines[2], "retries", COLOR_RETRIES, "4,3");
    polyline(&sc, &lines[3], "demand", COLOR_DEMAND, "5,3");
    panel_labels(&sc, c, py(&p, c->capacity));
    frame(&p);
    x_axis(&p, "time (s)");
}

static void svg_series(FILE *f, const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    const double panel_h = 240, top = 90;
    double h = top + panel_h * (double)n + 10;
    char title[160], sub[200];
    if (c->scenario == RESIL_SIM_FAILOVER) {
        snprintf(title, sizeof title, "resil sim failover: load at the dependency");
        snprintf(sub, sizeof sub,
                 "%u clients × %g/s, %u layers × %u attempts, capacity %g calls/s, seed %llu",
                 (unsigned)c->clients, c->rate, (unsigned)c->layers, (unsigned)c->attempts,
                 c->capacity, (unsigned long long)c->seed);
    } else if (c->scenario == RESIL_SIM_BROWNOUT) {
        snprintf(title, sizeof title, "resil sim brownout: the dependency's capacity halves");
        snprintf(sub, sizeof sub,
                 "%g requests/s, capacity %g/s (half in the band), timeout %.0f ms, limits "
                 "from %u, seed %llu",
                 c->rate, c->capacity, (double)c->timeout / 1e6, (unsigned)c->limit,
                 (unsigned long long)c->seed);
    } else {
        snprintf(title, sizeof title, "resil sim metastable: a retry-sustained overload");
        snprintf(sub, sizeof sub,
                 "%g requests/s, capacity %g/s (%g× slower above), %u attempts, seed %llu",
                 c->rate, c->capacity, c->slowdown, (unsigned)c->attempts,
                 (unsigned long long)c->seed);
    }
    begin(f, 900, h, title, sub);
    const char *names[] = {"demand (requests/s)", "offered load (calls/s)",
                           "goodput (requests/s)",
                           c->layers > 1 ? "retries/s (all layers)" : "retries/s"};
    const char *colors[] = {COLOR_DEMAND, COLOR_OFFERED, COLOR_GOODPUT, COLOR_RETRIES};
    const char *dashes[] = {"5,3", NULL, NULL, "4,3"};
    legend(f, 80, 72, names, colors, dashes, 4);
    yscale ys = shared_scale(c, r, n);
    for (size_t i = 0; i < n; i++)
        panel(f, c, &r[i], top + panel_h * (double)i, &ys);
    fprintf(f, "</svg>\n");
}

/* ---- bars ----------------------------------------------------------------- */

typedef double (*value_fn)(const resil_sim_result *r);

/* A bar's value sits above it, or above the line at `clear_of` (a y, or
 * NAN) when it would come within 2 px of that line. With `sc`, each bar and its
 * value are kept as boxes for a label placed afterwards to avoid. */
static void bars(const plot *p, const resil_sim_result *r, size_t n, value_fn value,
                 const char *color, const char *unit_fmt, double clear_of, scene *sc)
{
    double slot = p->w / (double)n;
    double bw = slot * 0.6;
    char buf[64];
    for (size_t i = 0; i < n; i++) {
        double v = value(&r[i]);
        double x = p->x + slot * (double)i + (slot - bw) / 2;
        double y = py(p, v);
        fprintf(p->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                x, y, bw, p->y + p->h - y, color);
        snprintf(buf, sizeof buf, unit_fmt, v);
        double vy = y - 5;
        box vb = text_box(x + bw / 2, vy, "middle", 11, buf);
        if (vb.y0 <= clear_of + 2 && clear_of - 2 <= vb.y1) {
            vy = clear_of - 8;
            vb = text_box(x + bw / 2, vy, "middle", 11, buf);
        }
        text(p->f, x + bw / 2, vy, "middle", 11, " class=\"value\"", buf);
        if (sc != NULL && sc->nlabels + 2 <= MAX_LABELS) {
            sc->labels[sc->nlabels++] = vb;
            sc->labels[sc->nlabels++] = (box){x, y, x + bw, p->y + p->h};
        }
        char rot[96];
        double lx = x + bw / 2, ly = p->y + p->h + 14;
        snprintf(rot, sizeof rot, " transform=\"rotate(-20 %.1f %.1f)\"", lx, ly);
        text(p->f, lx, ly, n > 4 ? "end" : "middle", 11, n > 4 ? rot : "", r[i].policy.name);
    }
}

static double max_of(const resil_sim_result *r, size_t n, value_fn value)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, value(&r[i]));
    return m;
}

static double calls_per_run(const resil_sim_result *r) { return r->calls_per_run; }
static double completion_ms(const resil_sim_result *r) { return r->completion_ms; }
static double calls_per_request(const resil_sim_result *r) { return r->calls_per_request; }

static void bar_panel(FILE *f, double x, double top, const char *heading, const char *ylabel,
                      const resil_sim_result *r, size_t n, value_fn value, const char *color,
                      const char *fmt)
{
    plot p = {f, x, top + 30, 340, 260, 0, 1, 0, nice_max(max_of(r, n, value) * 1.08, 5), false};
    text(f, p.x + p.w / 2, top + 16, "middle", 13, " font-weight=\"bold\"", heading);
    y_axis(&p, ylabel);
    bars(&p, r, n, value, color, fmt, NAN, NULL);
    frame(&p);
}

static void svg_occ(FILE *f, const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    char sub[200];
    snprintf(sub, sizeof sub, "%u clients, one write each; mean of %u runs; base %g ms, "
                              "cap %g s; seed %llu",
             (unsigned)c->clients, (unsigned)c->runs, resil_dur_to_ms(c->base),
             resil_dur_to_ms(c->cap) / 1000, (unsigned long long)c->seed);
    begin(f, 900, 420, "resil sim occ: contention under each backoff policy", sub);
    bar_panel(f, 80, 70, "work: write calls per run", "calls", r, n, calls_per_run, COLOR_BAR,
              "%.0f");
    bar_panel(f, 530, 70, "time until the last client finishes", "milliseconds", r, n,
              completion_ms, COLOR_BAR2, "%.0f");
    fprintf(f, "</svg>\n");
}

static void svg_layers(FILE *f, const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    char sub[200];
    uint32_t at = resil__sim_budget_layer(c);
    char where[48];
    if (at == 0)
        snprintf(where, sizeof where, "a budget in every layer");
    else
        snprintf(where, sizeof where, "a budget in layer %u", (unsigned)at);
    snprintf(sub, sizeof sub, "%u layers × %u attempts, dependency always failing, %s, "
                              "%u requests",
             (unsigned)c->layers, (unsigned)c->attempts, where, (unsigned)c->requests);
    begin(f, 640, 420, "resil sim layers: retry amplification", sub);
    double worst = (double)resil__sim_worst_case(c);
    plot p = {f, 110, 100, 480, 260, 0, 1, 0, nice_max(worst * 1.1, 5), false};
    text(f, p.x + p.w / 2, 86, "middle", 13, " font-weight=\"bold\"",
         "dependency calls per user request");
    y_axis(&p, "calls");
    double wy = py(&p, worst);
    scene sc = {.p = &p};
    bars(&p, r, n, calls_per_request, COLOR_BAR, "%.1f", wy, &sc);
    fprintf(f, "<line class=\"worst-case\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#d62728\" stroke-dasharray=\"6,4\"/>\n",
            p.x, wy, p.x + p.w, wy);
    char label[64];
    snprintf(label, sizeof label, "worst case %u^%u = %.0f", (unsigned)c->attempts,
             (unsigned)c->layers, worst);
    /* Above or below the line, at its right end or its left, clear of the
     * bars and their values. */
    const spot spots[] = {{p.x + p.w - 4, wy - 6, "end"}, {p.x + p.w - 4, wy + 14, "end"},
                          {p.x + 4, wy - 6, "start"}, {p.x + 4, wy + 14, "start"}};
    place_label(&sc, spots, sizeof spots / sizeof spots[0], "#d62728", label);
    frame(&p);
    fprintf(f, "</svg>\n");
}

int resil_sim_write_svg(FILE *f, const resil_sim_config *c, const resil_sim_result *r,
                        size_t n)
{
    if (n == 0)
        return RESIL_EINVAL;
    switch (c->scenario) {
    case RESIL_SIM_OCC:
        svg_occ(f, c, r, n);
        break;
    case RESIL_SIM_LAYERS:
        svg_layers(f, c, r, n);
        break;
    default:
        svg_series(f, c, r, n);
        break;
    }
    return ferror(f) ? RESIL_EIO : 0;
}
