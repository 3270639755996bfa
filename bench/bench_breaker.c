/*
 * bench_breaker.c — what a circuit breaker costs on the call path: a closed
 * breaker admitting a call and taking its success (consecutive rule alone,
 * and with the rolling window, which must read the clock), an open breaker
 * rejecting, two threads on separate breakers and on one shared breaker,
 * a registry lookup among 1024 keys, and the same closed breaker plugged
 * in behind a table of its own (resil_breaker_new_custom), which is what
 * any other implementation's handle adds on top of its own work. Then the
 * rules added later: a ratio over the last 100 calls (no clock read), a
 * failure asked of a trip predicate that says no, and a success reported
 * without a permit. The
 * baseline is one uncontended atomic increment measured in the same run,
 * so the figures travel.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "resil.h"

#define KEYS 1024

static void clock_read(void *ud, uint64_t iters)
{
    (void)ud;
    resil_clock *c = resil_clock_system();
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++)
        sum += (uint64_t)resil_clock_now(c);
    bench_consume(sum);
}

static void closed_success(void *ud, uint64_t iters)
{
    resil_breaker *b = ud;
    uint64_t admitted = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_breaker_permit p;
        if (resil_breaker_acquire(b, &p) == 0) {
            resil_breaker_record(b, &p, RESIL_BREAKER_SUCCESS);
            admitted++;
        }
    }
    bench_consume(admitted);
}

static void open_reject(void *ud, uint64_t iters)
{
    resil_breaker *b = ud;
    uint64_t rejected = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_breaker_permit p;
        rejected += resil_breaker_acquire(b, &p) == RESIL_EREJECTED;
    }
    bench_consume(rejected);
}

static void closed_failure(void *ud, uint64_t iters)
{
    resil_breaker *b = ud;
    uint64_t admitted = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_breaker_permit p;
        if (resil_breaker_acquire(b, &p) == 0) {
            resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE);
            admitted++;
        }
    }
    bench_consume(admitted);
}

static void success_without_permit(void *ud, uint64_t iters)
{
    resil_breaker *b = ud;
    uint64_t counted = 0;
    for (uint64_t i = 0; i < iters; i++)
        counted += resil_breaker_record_success(b, 0) == 0;
    bench_consume(counted);
}

static bool never_trip(const resil_breaker_counts *c, void *ud)
{
    (void)ud;
    return c->failures > UINT64_MAX - 1;
}

/* ---- two threads -------------------------------------------------------- */

typedef struct pair {
    resil_breaker *b[2]; /* the same breaker twice for the shared case */
} pair;

/* ---- registry ----------------------------------------------------------- */

typedef struct lookups {
    resil_registry *r;
    char keys[KEYS][48];
} lookups;

static void registry_lookup(void *ud, uint64_t iters)
{
    lookups *l = ud;
    uint64_t found = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_breaker *b;
        if (resil_registry_get(l->r, l->keys[(i * 7) % KEYS], NULL, &b, NULL) == 0) {
            found++;
            resil_breaker_free(b);
        }
    }
    bench_consume(found);
}

/* ---- a plug-in: the built-in breaker behind its own table ---------------- */

static int plug_acquire(void *self, resil_breaker_permit *p)
{
    return resil_breaker_acquire(self, p);
}
static int plug_record(void *self, const resil_breaker_permit *p, resil_breaker_result r)
{
    return resil_breaker_record(self, p, r);
}
static resil_breaker_state plug_state(void *self) { return resil_breaker_state_of(self); }
static int plug_stats(void *self, resil_breaker_stats *out)
{
    return resil_breaker_stats_get(self, out);
}
static int plug_control(void *self, resil_breaker_control op)
{
    (void)self, (void)op;
    return RESIL_EINVAL;
}

static const resil_breaker_ops plug_ops = {
    .size = sizeof(resil_breaker_ops), .kind = "plug-in", .acquire = plug_acquire,
    .record = plug_record, .state = plug_state, .stats = plug_stats, .control = plug_control,
};

/* ---- setup --------------------------------------------------------------- */

static resil_breaker *breaker(resil_breaker_kind kind, bool open)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = kind;
    o.break_duration = RESIL_S(3600);
    if (open)
        o.failure_threshold = 1;
    resil_breaker *b;
    resil_err err;
    if (resil_breaker_new(&o, &b, &err) != 0) {
        fprintf(stderr, "bench_breaker: %s\n", err.message);
        exit(1);
    }
    if (open) {
        resil_breaker_permit p;
        resil_breaker_acquire(b, &p);
        resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE);
    }
    return b;
}

static resil_breaker *made(const resil_breaker_opts *o)
{
    resil_breaker *b;
    resil_err err;
    if (resil_breaker_new(o, &b, &err) != 0) {
        fprintf(stderr, "bench_breaker: %s\n", err.message);
        exit(1);
    }
    return b;
}

/* A ratio breaker over the last 100 calls. */
static resil_breaker *count_window_breaker(void)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    o.window_size = 100;
    return made(&o);
}

/* Only a predicate that never trips: every failure is asked. */
static resil_breaker *predicate_breaker(void)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_PREDICATE;
    o.trip = never_trip;
    o.window = RESIL_BREAKER_WINDOW_COUNT;
    return made(&o);
}

static lookups *registry_of_1024(void)
{
    lookups *l = calloc(1, sizeof *l);
    resil_registry_opts o;
    resil_registry_opts_default(&o);
    if (l == NULL || resil_registry_new(&o, &l->r, NULL) != 0)
        exit(1);
    for (int i = 0; i < KEYS; i++) {
        snprintf(l->keys[i], sizeof l->keys[i], "https://api-%04d.example.com:443", i);
        resil_breaker *b;
        if (resil_registry_get(l->r, l->keys[i], NULL, &b, NULL) != 0)
            exit(1);
        resil_breaker_free(b);
    }
    return l;
}

static void report_pair(const char *name, pair *p, bench_result single, bench_result base)
{
    bench_report_2t(bench_run_2t(name, closed_success, p->b[0], p->b[1]), single, base);
}

int main(void)
{
    bench_result base = bench_run("atomic_increment", bench_atomic_increment, NULL);
    bench_result clock = bench_run("clock_read", clock_read, NULL);
    char extra[96];
    snprintf(extra, sizeof extra, "clock_read_ns=%.2f", clock.ns_per_op);

    resil_breaker *consec = breaker(RESIL_BREAKER_CONSECUTIVE, false);
    resil_breaker *ratio = breaker(RESIL_BREAKER_RATIO, false);
    resil_breaker *open = breaker(RESIL_BREAKER_CONSECUTIVE, true);
    bench_result c1 = bench_run("breaker_closed_consecutive", closed_success, consec);
    bench_report(c1, base, "kind=consecutive");
    bench_result r1 = bench_run("breaker_closed_ratio", closed_success, ratio);
    bench_report(r1, base, extra);
    bench_report(bench_run("breaker_open_reject", open_reject, open), base, extra);

    resil_breaker *consec2 = breaker(RESIL_BREAKER_CONSECUTIVE, false);
    resil_breaker *ratio2 = breaker(RESIL_BREAKER_RATIO, false);
    pair sep_c = {{consec, consec2}}, shared_c = {{consec, consec}};
    pair sep_r = {{ratio, ratio2}}, shared_r = {{ratio, ratio}};
    report_pair("breaker_closed_consecutive_2t_separate", &sep_c, c1, base);
    report_pair("breaker_closed_consecutive_2t_shared", &shared_c, c1, base);
    report_pair("breaker_closed_ratio_2t_separate", &sep_r, r1, base);
    report_pair("breaker_closed_ratio_2t_shared", &shared_r, r1, base);

    resil_breaker *plug = NULL;
    if (resil_breaker_new_custom(&plug_ops, consec, "plug-in", &plug, NULL) != 0)
        exit(1);
    bench_report(bench_run("breaker_closed_consecutive_plugin", closed_success, plug), base,
                 "kind=consecutive via=resil_breaker_ops");
    resil_breaker_free(plug);

    resil_breaker *counted = count_window_breaker(), *asked = predicate_breaker();
    bench_report(bench_run("breaker_closed_count_window", closed_success, counted), base,
                 "window=count size=100");
    bench_report(bench_run("breaker_closed_failure_predicate", closed_failure, asked), base,
                 "kind=predicate window=count");
    bench_report(bench_run("breaker_success_without_permit", success_without_permit, consec),
                 base, "kind=consecutive");
    resil_breaker_free(counted);
    resil_breaker_free(asked);

    lookups *l = registry_of_1024();
    bench_report(bench_run("registry_lookup_1024", registry_lookup, l), base, "keys=1024");

    resil_registry_free(l->r);
    free(l);
    resil_breaker_free(consec);
    resil_breaker_free(consec2);
    resil_breaker_free(ratio);
    resil_breaker_free(ratio2);
    resil_breaker_free(open);
    return 0;
}
