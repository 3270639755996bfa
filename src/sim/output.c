/*
 * output.c — the text table, JSON lines and CSV writers.
 *
 * Every figure printed is derived here from the result structs alone, with
 * fixed formats and no locale or clock involved, so the same seed gives the
 * same bytes. The text table is for a person (units in the headings, a
 * one-line description of the model above it); JSON is one object per
 * policy per line, for jq and scripts; CSV is the long form a spreadsheet
 * or plotting tool wants (one row per policy, or per policy and time bin).
 */
#include <math.h>
#include <string.h>

#include "model.h"
#include "output.h"

/* ---- derived figures ------------------------------------------------------ */

/* Means per second over the bins that start at or after the outage's end. */
resil__sim_after resil__sim_after_outage(const resil_sim_config *c, const resil_sim_result *r)
{
    resil__sim_after a = {0, 0, 0, 0};
    const resil_sim_series *s = &r->series;
    resil_instant end = resil__sim_outage_end(c);
    double secs_per_bin = (double)s->bin / 1e9;
    for (size_t b = 0; b < s->nbins; b++) {
        if ((resil_instant)b * s->bin < end)
            continue;
        a.offered += s->offered[b];
        a.goodput += s->goodput[b];
        a.retries += s->retries[b];
        a.bins++;
    }
    if (a.bins > 0) {
        double span = (double)a.bins * secs_per_bin;
        a.offered /= span;
        a.goodput /= span;
        a.retries /= span;
    }
    return a;
}

uint64_t resil__sim_worst_case(const resil_sim_config *c)
{
    uint64_t w = 1;
    for (uint32_t i = 0; i < c->layers; i++)
        w *= c->attempts;
    return w;
}

uint32_t resil__sim_budget_layer(const resil_sim_config *c)
{
    return c->budget_at == RESIL_SIM_INNERMOST ? c->layers : c->budget_at;
}

/* "after 7 s", "after 2.5 s": a tenth of a second where it shows. */
static void seconds_text(double v, char *buf, size_t cap)
{
    if (v < 10 && v != floor(v + 0.05))
        snprintf(buf, cap, "after %.1f s", v);
    else
        snprintf(buf, cap, "after %.0f s", v);
}

void resil__sim_recovery_text(const resil_sim_result *r, resil__sim_wording w, char *buf,
                              size_t cap)
{
    bool title = w == RESIL__SIM_TITLE;
    if (r->recovered_runs == 0) {
        snprintf(buf, cap, title ? "did not recover" : "stays down");
        return;
    }
    char when[32];
    if (r->recovery_s <= 0)
        snprintf(when, sizeof when, "at once");
    else if (title)
        seconds_text(r->recovery_s, when, sizeof when);
    else
        snprintf(when, sizeof when, "after %.0fs", r->recovery_s);
    if (r->recovered_runs == r->runs)
        snprintf(buf, cap, title ? "recovered %s" : "%s", when);
    else if (title)
        snprintf(buf, cap, "recovered in %u of %u runs, %s", (unsigned)r->recovered_runs,
                 (unsigned)r->runs, when);
    else
        snprintf(buf, cap, "%u/%u runs, %s", (unsigned)r->recovered_runs, (unsigned)r->runs,
                 when);
}

static void dur(resil_duration d, char *buf, size_t cap)
{
    resil_duration_format(d, buf, cap);
}

/* ---- text ----------------------------------------------------------------- */

static void text_occ(FILE *f, const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    char base[32], cap[32], mean[32], sd[32];
    dur(c->base, base, sizeof base);
    dur(c->cap, cap, sizeof cap);
    dur(c->net_mean, mean, sizeof mean);
    dur(c->net_sd, sd, sizeof sd);
    fprintf(f, "occ: %u clients each make one successful write to one row (optimistic "
               "concurrency)\n",
            (unsigned)c->clients);
    fprintf(f, "messages |N(%s, %s)| one way; backoff base %s, cap %s; mean of %u runs, "
               "seed %llu\n\n",
            mean, sd, base, cap, (unsigned)c->runs, (unsigned long long)c->seed);
    fprintf(f, "%-24s %12s %14s %16s\n", "policy", "calls/run", "calls/client",
            "completion (ms)");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-24s %12.1f %14.2f %16.1f\n", r[i].policy.name, r[i].calls_per_run,
                r[i].calls_per_client, r[i].completion_ms);
}

static void text_stack_header(FILE *f, const resil_sim_config *c)
{
    char outage[32], at[32], duration[32], latency[32], timeout[32];
    dur(c->outage, outage, sizeof outage);
    dur(c->outage_start, at, sizeof at);
    dur(c->duration, duration, sizeof duration);
    dur(c->latency, latency, sizeof latency);
    dur(c->timeout, timeout, sizeof timeout);
    if (c->scenario == RESIL_SIM_FAILOVER) {
        fprintf(f, "failover: %u clients × %g requests/s through %u layers × %u attempts; "
                   "the dependency fails every call for %s from %s,\n",
                (unsigned)c->clients, c->rate, (unsigned)c->layers, (unsigned)c->attempts,
                outage, at);
        fprintf(f, "then takes %g calls/s (more in a second: it fails them all); %s "
                   "simulated, seed %llu\n\n",
                c->capacity, duration, (unsigned long long)c->seed);
    } else {
        fprintf(f, "metastable: %g requests/s to a database that answers in %s below %g "
                   "calls/s and %g× slower above;\n",
                c->rate, latency, c->capacity, c->slowdown);
        fprintf(f, "%u attempts with a %s timeout; the database stalls for %s from %s; %s "
                   "simulated, seed %llu\n\n",
                (unsigned)c->attempts, timeout, outage, at, duration,
                (unsigned long long)c->seed);
    }
}

static void text_stack(FILE *f, const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    text_stack_header(f, c);
    fprintf(f, "%-24s %28s   %31s   %s\n", "", "load multiplier at dependency",
            "after the outage, per second", "");
    fprintf(f, "%-24s %8s %9s %9s   %9s %10s %10s   %s\n", "policy", "peak", "mean",
            "after", "offered", "goodput", "retries", "recovered");
    for (size_t i = 0; i < n; i++) {
        resil__sim_after a = resil__sim_after_outage(c, &r[i]);
        char rec[64];
        resil__sim_recovery_text(&r[i], RESIL__SIM_COLUMN, rec, sizeof rec);
        fprintf(f, "%-24s %8.2f %9.2f %9.2f   %9.1f %10.1f %10.1f   %s\n", r[i].policy.name,
                r[i].peak_multiplier, r[i].mean_multiplier, r[i].after_multiplier, a.offered,
                a.goodput, a.retries, rec);
    }
}

static void text_brownout(FILE *f, const resil_sim_config *c, const resil_sim_result *r,
                          size_t n)
{
    char outage[32], at[32], duration[32], latency[32], timeout[32];
    dur(c->outage, outage, sizeof outage);
    dur(c->outage_start, at, sizeof at);
    dur(c->duration, duration, sizeof duration);
    dur(c->latency, latency, sizeof latency);
    dur(c->timeout, timeout, sizeof timeout);
    fprintf(f, "brownout: %g requests/s to a dependency of %g calls/s (%.0f workers, %s "
               "each), at half capacity for %s from %s;\n",
            c->rate, c->capacity, c->capacity * (double)c->latency / 1e9, latency, outage, at);
    fprintf(f, "%u attempt%s with a %s timeout; limits start at %u; %s simulated, seed %llu\n\n",
            (unsigned)c->attempts, c->attempts == 1 ? "" : "s", timeout, (unsigned)c->limit,
            duration, (unsigned long long)c->seed);
    fprintf(f, "%-24s %31s\n", "", "goodput, requests/s");
    fprintf(f, "%-24s %9s %10s %10s   %9s   %s\n", "policy", "run", "brownout", "after",
            "p99 (ms)", "recovered");
    for (size_t i = 0; i < n; i++) {
        resil__sim_after a = resil__sim_after_outage(c, &r[i]);
        char rec[64];
        resil__sim_recovery_text(&r[i], RESIL__SIM_COLUMN, rec, sizeof rec);
        fprintf(f, "%-24s %9.1f %10.1f %10.1f   %9.0f   %s\n", r[i].policy.name, r[i].goodput,
                r[i].outage_goodput, a.goodput, r[i].p99_ms, rec);
    }
}

static void text_layers(FILE *f, const resil_sim_config *c, const resil_sim_result *r, size_t n)
{
    uint32_t at = resil__sim_budget_layer(c);
    fprintf(f, "layers: %u layers × %u attempts against a dependency that always fails: "
               "worst case %u^%u = %llu calls per request\n",
            (unsigned)c->layers, (unsigned)c->attempts, (unsigned)c->attempts,
            (unsigned)c->layers, (unsigned long long)resil__sim_worst_case(c));
    if (at == 0)
        fprintf(f, "a budget (when the policy has one) in every layer; ");
    else
        fprintf(f, "a budget (when the policy has one) in layer %u of %u%s; ", (unsigned)at,
                (unsigned)c->layers, at == c->layers ? " (the innermost)" : "");
    fprintf(f, "%u requests at %g/s, seed %llu\n\n", (unsigned)c->requests, c->rate,
            (unsigned long long)c->seed);
    fprintf(f, "%-24s %16s %16s\n", "policy", "calls/request", "worst request");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-24s %16.2f %16llu\n", r[i].policy.name, r[i].calls_per_request,
                (unsigned long long)r[i].max_calls);
}

int resil_sim_write_text(FILE *f, const resil_sim_config *c, const resil_sim_result *r,
                         size_t n)
{
    switch (c->scenario) {
    case RESIL_SIM_OCC:
        text_occ(f, c, r, n);
        break;
    case RESIL_SIM_LAYERS:
        text_layers(f, c, r, n);
        break;
    case RESIL_SIM_BROWNOUT:
        text_brownout(f, c, r, n);
        break;
    default:
        text_stack(f, c, r, n);
        break;
    }
    return ferror(f) ? RESIL_EIO : 0;
}

/* ---- JSON ----------------------------------------------------------------- */

/* Shortest round-trip-safe enough form; never "nan" or "inf" (not JSON). */
static void num(FILE *f, double v)
{
    if (!isfinite(v))
        v = 0;
    fprintf(f, "%.10g", v);
}

static void json_field(FILE *f, const char *key, double v)
{
    fprintf(f, ",\"%s\":", key);
    num(f, v);
}

static void json_array(FILE *f, const char *key, const double *v, size_t n)
{
    fprintf(f, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            fputc(',', f);
        num(f, v[i]);
    }
    fputc(']', f);
}

/* Policy names are built from [a-z+] only (the parser accepts nothing
 * else), so they need no escaping. */
static void json_head(FILE *f, const resil_sim_config *c, const resil_sim_result *r)
{
    fprintf(f, "{\"scenario\":\"%s\",\"policy\":\"%s\",\"seed\":%llu,\"runs\":%u",
            resil_sim_scenario_name(c->scenario), r->policy.name,
            (unsigned long long)c->seed, (unsigned)r->runs);
}

static void json_occ(FILE *f, const resil_sim_config *c, const resil_sim_result *r)
{
    json_field(f, "clients", c->clients);
    json_field(f, "calls_per_run", r->calls_per_run);
    json_field(f, "calls_per_client", r->calls_per_client);
    json_field(f, "completion_ms", r->completion_ms);
}

static void json_stack(FILE *f, const resil_sim_config *c, const resil_sim_result *r)
{
    resil__sim_after a = resil__sim_after_outage(c, r);
    json_field(f, "requests", r->requests);
    json_field(f, "succeeded", r->succeeded);
    json_field(f, "calls_per_request", r->calls_per_request);
    json_field(f, "peak_multiplier", r->peak_multiplier);
    json_field(f, "mean_multiplier", r->mean_multiplier);
    json_field(f, "after_multiplier", r->after_multiplier);
    json_field(f, "after_offered_per_s", a.offered);
    json_field(f, "after_goodput_per_s", a.goodput);
    json_field(f, "after_retries_per_s", a.retries);
    json_field(f, "goodput_per_s", r->goodput);
    json_field(f, "outage_goodput_per_s", r->outage_goodput);
    json_field(f, "p99_ms", r->p99_ms);
    fprintf(f, ",\"recovered\":%s", r->recovered_runs == r->runs ? "true" : "false");
    json_field(f, "recovered_runs", r->recovered_runs);
    if (r->recovered_runs > 0)
        json_field(f, "recovery_s", r->recovery_s);
    else
        fprintf(f, ",\"recovery_s\":null");
    fprintf(f, ",\"series\":{\"bin_s\":");
    num(f, (double)r->series.bin / 1e9);
    json_array(f, "arrivals", r->series.arrivals, r->series.nbins);
    json_array(f, "offered", r->series.offered, r->series.nbins);
    json_array(f, "goodput", r->series.goodput, r->series.nbins);
    json_array(f, "failed", r->series.failed, r->series.nbins);
    json_array(f, "retries", r->series.retries, r->series.nbins);
    fputc('}', f);
}

static void json_layers(FILE *f, const resil_sim_config *c, const resil_sim_result *r)
{
    json_field(f, "layers", c->layers);
    json_field(f, "attempts", c->attempts);
    json_field(f, "worst_case", (double)resil__sim_worst_case(c));
    json_field(f, "budget_layer", resil__sim_budget_layer(c));
    json_field(f, "requests", r->requests);
    json_field(f, "calls_per_request", r->calls_per_request);
    json_field(f, "max_calls", (double)r->max_calls);
}

int resil_sim_write_json(FILE *f, const resil_sim_config *c, const resil_sim_result *r,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_head(f, c, &r[i]);
        switch (c->scenario) {
        case RESIL_SIM_OCC:
            json_occ(f, c, &r[i]);
            break;
        case RESIL_SIM_LAYERS:
            json_layers(f, c, &r[i]);
            break;
        default:
            json_stack(f, c, &r[i]);
            break;
        }
        fputs("}\n", f);
    }
    return ferror(f) ? RESIL_EIO : 0;
}

/* ---- CSV ------------------------------------------------------------------ */

int resil_sim_write_csv(FILE *f, const resil_sim_config *c, const resil_sim_result *r,
                        size_t n)
{
    switch (c->scenario) {
    case RESIL_SIM_OCC:
        fputs("policy,clients,runs,calls_per_run,calls_per_client,completion_ms\n", f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s,%u,%u,%.10g,%.10g,%.10g\n", r[i].policy.name, (unsigned)c->clients,
                    (unsigned)r[i].runs, r[i].calls_per_run, r[i].calls_per_client,
                    r[i].completion_ms);
        break;
    case RESIL_SIM_LAYERS:
        fputs("policy,layers,attempts,worst_case,requests,calls_per_request,max_calls\n", f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s,%u,%u,%llu,%.10g,%.10g,%llu\n", r[i].policy.name,
                    (unsigned)c->layers, (unsigned)c->attempts,
                    (unsigned long long)resil__sim_worst_case(c), r[i].requests,
                    r[i].calls_per_request, (unsigned long long)r[i].max_calls);
        break;
    default:
        fputs("policy,t_s,arrivals,offered,goodput,failed,retries\n", f);
        for (size_t i = 0; i < n; i++) {
            const resil_sim_series *s = &r[i].series;
            for (size_t b = 0; b < s->nbins; b++)
                fprintf(f, "%s,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g\n", r[i].policy.name,
                        (double)((resil_instant)b * s->bin) / 1e9, s->arrivals[b],
                        s->offered[b], s->goodput[b], s->failed[b], s->retries[b]);
        }
        break;
    }
    return ferror(f) ? RESIL_EIO : 0;
}
