/*
 * bench_sim.c — how fast the simulator runs: the engine alone (the classic
 * "hold" workload: a thousand pending events, each handled event schedules
 * one more), then whole scenarios at their default sizes, reported per
 * event. The baseline is the floor any event queue pays: one push and one
 * pop on a bare binary heap of the same size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine.h"
#include "sim.h"

#define PENDING 1000

/* ---- baseline: a bare binary heap of 16-byte entries ---------------------- */

typedef struct entry {
    int64_t at;
    uint64_t key;
} entry;

typedef struct bare_heap {
    entry h[PENDING + 1];
    size_t len;
} bare_heap;

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static bool lt(const entry *a, const entry *b)
{
    return a->at != b->at ? a->at < b->at : a->key < b->key;
}

static void bare_push(bare_heap *q, entry x)
{
    size_t i = q->len++;
    while (i > 0 && lt(&x, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = x;
}

static entry bare_pop(bare_heap *q)
{
    entry top = q->h[0], x = q->h[--q->len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->len)
            break;
        if (c + 1 < q->len && lt(&q->h[c + 1], &q->h[c]))
            c++;
        if (!lt(&q->h[c], &x))
            break;
        q->h[i] = q->h[c];
        i = c;
    }
    q->h[i] = x;
    return top;
}

static void bench_bare_heap(void *ud, uint64_t iters)
{
    bare_heap *q = ud;
    uint64_t s = 88172645463325252u, seq = 0;
    q->len = 0;
    for (int i = 0; i < PENDING; i++)
        bare_push(q, (entry){(int64_t)(xorshift(&s) % 1000000), seq++});
    for (uint64_t i = 0; i < iters; i++) {
        entry e = bare_pop(q);
        bare_push(q, (entry){e.at + (int64_t)(xorshift(&s) % 1000000), seq++});
    }
    bench_consume((uint64_t)q->h[0].at);
}

/* ---- the engine: hold model ------------------------------------------------ */

typedef struct hold {
    resil__sim_engine engine;
    uint64_t rng;
    uint64_t left;
} hold;

static void hold_handler(void *model, resil__sim_engine *e, const resil__sim_event *ev)
{
    hold *h = model;
    if (h->left == 0) {
        resil__sim_stop(e);
        return;
    }
    h->left--;
    resil__sim_schedule(e, resil__sim_now(e) + (resil_instant)(xorshift(&h->rng) % 1000000), 0,
                        resil__sim_event_id(ev));
}

static void bench_engine(void *ud, uint64_t iters)
{
    hold *h = ud;
    resil__sim_engine_reset(&h->engine);
    h->rng = 88172645463325252u;
    h->left = iters;
    for (uint32_t i = 0; i < PENDING; i++)
        resil__sim_schedule(&h->engine, (resil_instant)(xorshift(&h->rng) % 1000000), 0, i);
    resil__sim_run(&h->engine, RESIL_INSTANT_MAX, hold_handler, h);
    bench_consume(h->engine.dispatched);
}

/* ---- whole scenarios ------------------------------------------------------- */

typedef struct scenario_figures {
    uint64_t events;
    uint64_t allocs;
    double ns;
    double worst_policy_ns;
} scenario_figures;

static scenario_figures run_scenario(resil_sim_scenario s)
{
    resil_sim_config c;
    resil_sim_config_default(&c, s);
    scenario_figures f = {0, 0, 0, 0};
    for (size_t i = 0; i < c.npolicies; i++) {
        resil_sim_result r;
        uint64_t a0 = bench_alloc_count(), t0 = bench_now_ns();
        if (resil_sim_run(&c, &c.policies[i], NULL, NULL, &r, NULL) != 0) {
            fprintf(stderr, "bench_sim: %s %s failed\n", resil_sim_scenario_name(s),
                    c.policies[i].name);
            exit(1);
        }
        double took = (double)(bench_now_ns() - t0);
        f.allocs += bench_alloc_count() - a0;
        f.ns += took;
        if (took > f.worst_policy_ns)
            f.worst_policy_ns = took;
        f.events += r.events;
        resil_sim_result_free(&r);
    }
    return f;
}

static void report_scenario(const char *name, resil_sim_scenario s, bench_result baseline)
{
    /* The median of three whole runs, with their spread. */
    scenario_figures f[3];
    for (int i = 0; i < 3; i++)
        f[i] = run_scenario(s);
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (f[j].ns < f[i].ns) {
                scenario_figures t = f[i];
                f[i] = f[j];
                f[j] = t;
            }
    double per = f[1].ns / (double)f[1].events;
    bench_result r = {.name = name, .ns_per_op = per,
                      .min_ns = f[0].ns / (double)f[0].events,
                      .max_ns = f[2].ns / (double)f[2].events,
                      .allocs_per_op = (double)f[1].allocs / (double)f[1].events,
                      .iters = f[1].events};
    char extra[256];
    snprintf(extra, sizeof extra,
             "events=%llu events_per_s=%.0f total_ms=%.0f slowest_policy_ms=%.0f",
             (unsigned long long)f[1].events, (double)f[1].events * 1e9 / f[1].ns,
             f[1].ns / 1e6, f[1].worst_policy_ns / 1e6);
    bench_report(r, baseline, extra);
}

int main(void)
{
    static bare_heap q;
    bench_result baseline = bench_run("heap.push_pop", bench_bare_heap, &q);

    hold *h = calloc(1, sizeof *h);
    if (h == NULL || resil__sim_engine_init(&h->engine, 2 * PENDING) != 0)
        return 1;
    bench_result engine = bench_run("sim.engine.hold", bench_engine, h);
    char extra[64];
    snprintf(extra, sizeof extra, "events_per_s=%.0f", 1e9 / engine.ns_per_op);
    bench_report(engine, baseline, extra);
    resil__sim_engine_free(&h->engine);
    free(h);

    report_scenario("sim.occ.event", RESIL_SIM_OCC, baseline);
    report_scenario("sim.failover.event", RESIL_SIM_FAILOVER, baseline);
    report_scenario("sim.metastable.event", RESIL_SIM_METASTABLE, baseline);
    return 0;
}
