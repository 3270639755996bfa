/*
 * svg.c — charts as hand-written SVG: time series for failover and
 * metastable, bars for occ and layers.
 *
 * A chart is written by a few primitives over one mapping from data to
 * pixels (axes with "nice" 1-2-5 ticks, lines, bars, a legend), not by a
 * plotting library: the simulator stays a C program with no dependency, and
 * the output is small, deterministic text that reads well in a browser and
 * diffs well in a repository. Time-series panels share one y scale so that
 * policies can be compared by eye.
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
#define COLOR_BAR "#4c78a8"
#define COLOR_BAR2 "#f58518"

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
        double lo = log10(p->y0), hi = log10(p->y1);
        double lv = log10(fmax(v, p->y0));
        return p->y + p->h - (lv - lo) / (hi - lo) * p->h;
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

/* 1, 10, 100, 1k, 10k, 100k, 1M … */
static void fmt_decade(double v, char *buf, size_t cap)
{
    if (v >= 1e6)
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

static double series_max(const resil_sim_result *r, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const resil_sim_series *s = &r[i].series;
        const double *all[] = {s->arrivals, s->offered, s->goodput, s->retries};
        for (size_t k = 0; k < 4; k++) {
            for (size_t b = 0; b < s->nbins; b++)
                m = fmax(m, all[k][b]);
        }
    }
    return m;
}

static void line(const plot *p, const resil_sim_series *s, const double *v, double per_s,
                 const char *color, const char *dashes)
{
    fprintf(p->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"", color);
    if (dashes != NULL)
        fprintf(p->f, " stroke-dasharray=\"%s\"", dashes);
    fprintf(p->f, " points=\"");
    double bin_s = (double)s->bin / 1e9;
    for (size_t b = 0; b < s->nbins; b++)
        fprintf(p->f, "%s%.1f,%.1f", b ? " " : "", px(p, ((double)b + 0.5) * bin_s),
                py(p, v[b] * per_s));
    fprintf(p->f, "\"/>\n");
}

static void outage_band(const plot *p, const resil_sim_config *c, const char *label)
{
    double a = (double)c->outage_start / 1e9;
    double b = fmin((double)resil__sim_outage_end(c) / 1e9, p->x1);
    if (!(b > a))
        return;
    fprintf(p->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#d62728\" "
                  "fill-opacity=\"0.08\"/>\n",
            px(p, a), p->y, px(p, b) - px(p, a), p->h);
    text(p->f, px(p, a) + 4, p->y + 14, "start", 11, " fill=\"#d62728\"", label);
}

/* Failover loads span decades (demand to 50× demand): a log scale shows the
 * healthy and the storming panels alike. Metastable stays within 2×. */
static bool log_scale(const resil_sim_config *c)
{
    return c->scenario == RESIL_SIM_FAILOVER;
}

static void panel(FILE *f, const resil_sim_config *c, const resil_sim_result *r, double top,
                  double ymax)
{
    const resil_sim_series *s = &r->series;
    plot p = {f, 80, top + 22, 790, 170, 0, (double)c->duration / 1e9, 0, ymax, false};
    if (log_scale(c)) {
        p.log_y = true;
        p.y0 = 10;
        p.y1 = fmax(100, pow(10, ceil(log10(fmax(ymax, 1)) - 1e-9)));
    }
    char title[128], rec[64];
    resil__sim_recovery_text(c, r, rec, sizeof rec);
    if (c->scenario == RESIL_SIM_BROWNOUT)
        snprintf(title, sizeof title, "%s — %.0f requests/s in the brownout, p99 %.0f ms, %s",
                 r->policy.name, r->outage_goodput, r->p99_ms, rec);
    else
        snprintf(title, sizeof title, "%s — %s", r->policy.name, rec);
    text(f, p.x, top + 14, "start", 13, " font-weight=\"bold\"", title);
    y_axis(&p, p.log_y ? "per second (log scale)" : "per second");
    outage_band(&p, c,
                c->scenario == RESIL_SIM_METASTABLE ? "trigger"
                : c->scenario == RESIL_SIM_BROWNOUT ? "half capacity"
                                                    : "outage");
    double per_s = 1e9 / (double)s->bin;
    /* Retries are dashed over offered load: in a storm they nearly coincide. */
    line(&p, s, s->offered, per_s, COLOR_OFFERED, NULL);
    line(&p, s, s->goodput, per_s, COLOR_GOODPUT, NULL);
    line(&p, s, s->retries, per_s, COLOR_RETRIES, "4,3");
    line(&p, s, s->arrivals, per_s, COLOR_DEMAND, "5,3");
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
                           "goodput (requests/s)", "retries/s (all layers)"};
    const char *colors[] = {COLOR_DEMAND, COLOR_OFFERED, COLOR_GOODPUT, COLOR_RETRIES};
    const char *dashes[] = {"5,3", NULL, NULL, "4,3"};
    legend(f, 80, 72, names, colors, dashes, 4);
    double ymax = series_max(r, n) * 1e9 / (double)c->bin;
    if (!log_scale(c))
        ymax = nice_max(ymax, 5);
    for (size_t i = 0; i < n; i++)
        panel(f, c, &r[i], top + panel_h * (double)i, ymax);
    fprintf(f, "</svg>\n");
}

/* ---- bars ----------------------------------------------------------------- */

typedef double (*value_fn)(const resil_sim_result *r);

static void bars(const plot *p, const resil_sim_result *r, size_t n, value_fn value,
                 const char *color, const char *unit_fmt)
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
        text(p->f, x + bw / 2, y - 5, "middle", 11, "", buf);
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
    bars(&p, r, n, value, color, fmt);
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
    bars(&p, r, n, calls_per_request, COLOR_BAR, "%.1f");
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
               "stroke-dasharray=\"6,4\"/>\n",
            p.x, py(&p, worst), p.x + p.w, py(&p, worst));
    char label[64];
    snprintf(label, sizeof label, "worst case %u^%u = %.0f", (unsigned)c->attempts,
             (unsigned)c->layers, worst);
    text(f, p.x + p.w - 4, py(&p, worst) - 5, "end", 11, " fill=\"#d62728\"", label);
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
