/*
 * bench_backoff.c — what one backoff wait costs for each kind, and what
 * parsing a Retry-After value costs in each form.
 *
 * Each figure is set against the cheapest code doing a similar job in the
 * same run, so it travels between machines: the waits against computing
 * base·2^(n−1) by hand (no jitter, no cap, no saturation), the parses
 * against strtol on the same delta. The waits cycle n through 1..8 and
 * restart the state every eight, as a retry loop would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "resil.h"

/* Keeps `v` in a register the optimiser must believe is used. */
#define ATTEMPTS_PER_EXECUTION 8u

typedef struct backoff_case {
    const char *name;
    resil_backoff options;
    resil_rng_seeded rng;
} backoff_case;

static void direct_exponential(void *ud, uint64_t iters)
{
    resil_duration base = *(const resil_duration *)ud;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        uint32_t n = (uint32_t)(i % ATTEMPTS_PER_EXECUTION) + 1;
        BENCH_KEEP(n);
        sum += (uint64_t)base << (n - 1);
    }
    bench_consume(sum);
}

static void backoff_waits(void *ud, uint64_t iters)
{
    backoff_case *c = ud;
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        uint32_t n = (uint32_t)(i % ATTEMPTS_PER_EXECUTION) + 1;
        if (n == 1)
            st = (resil_backoff_state){.previous = 0, .polly_previous = 0.0};
        sum += (uint64_t)resil_backoff_delay(&c->options, n, &st, &c->rng.base);
    }
    bench_consume(sum);
}

typedef struct parse_case {
    const char *name;
    const char *text;
    size_t len;
} parse_case;

static void strtol_delta(void *ud, uint64_t iters)
{
    const char *text = ud;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        BENCH_KEEP(text);
        sum += (uint64_t)strtol(text, NULL, 10);
    }
    bench_consume(sum);
}

static void retry_after_parse(void *ud, uint64_t iters)
{
    const parse_case *c = ud;
    const int64_t now_ns = INT64_C(1749988800000000000);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_duration wait = 0;
        BENCH_KEEP(c);
        if (resil_retry_after_parse(c->text, c->len, now_ns, &wait) != 0)
            abort();
        sum += (uint64_t)wait;
    }
    bench_consume(sum);
}

static backoff_case make_case(const char *name, resil_backoff_kind kind, resil_jitter jitter)
{
    backoff_case c;
    c.name = name;
    resil_backoff_default(&c.options);
    c.options.kind = kind;
    c.options.jitter = jitter;
    c.options.base = RESIL_MS(100);
    resil_rng_seeded_init(&c.rng, 42);
    return c;
}

int main(void)
{
    resil_duration base = RESIL_MS(100);
    bench_result direct = bench_run("direct_base_times_2_pow_n", direct_exponential, &base);

    backoff_case cases[] = {
        make_case("backoff_constant_full", RESIL_BACKOFF_CONSTANT, RESIL_JITTER_FULL),
        make_case("backoff_linear_full", RESIL_BACKOFF_LINEAR, RESIL_JITTER_FULL),
        make_case("backoff_exponential_full", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_FULL),
        make_case("backoff_fibonacci_full", RESIL_BACKOFF_FIBONACCI, RESIL_JITTER_FULL),
        make_case("backoff_exponential_none", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_NONE),
        make_case("backoff_exponential_decorrelated", RESIL_BACKOFF_EXPONENTIAL,
                  RESIL_JITTER_DECORRELATED),
        make_case("backoff_exponential_polly", RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_POLLY),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bench_report(bench_run(cases[i].name, backoff_waits, &cases[i]), direct, NULL);

    static const char delta[] = "120";
    bench_result baseline = bench_run("strtol", strtol_delta, (void *)delta);
    parse_case parses[] = {
        {"retry_after_delta", delta, sizeof delta - 1},
        {"retry_after_imf_fixdate", "Fri, 31 Dec 2027 23:59:59 GMT", 29},
        {"retry_after_rfc850", "Friday, 31-Dec-27 23:59:59 GMT", 30},
        {"retry_after_asctime", "Fri Dec 31 23:59:59 2027", 24},
    };
    for (size_t i = 0; i < sizeof parses / sizeof parses[0]; i++)
        bench_report(bench_run(parses[i].name, retry_after_parse, &parses[i]), baseline, NULL);
    return 0;
}
