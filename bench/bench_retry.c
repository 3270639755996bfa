/*
 * bench_retry.c — what retrying costs when nothing goes wrong, what one
 * failing attempt's decision costs, and what a shared budget adds per retry
 * and per call that succeeds at once, on one thread and on two.
 *
 * Each figure sits next to the thing it wraps, measured in the same run: the
 * executor against calling the operation directly (through the same kind of
 * function pointer, so only resil's work differs), a failing execution
 * against the same number of direct calls, and a budget's
 * try_retry + on_result against one uncontended atomic increment, the least
 * any shared counter can cost. The failing runs use the fake clock so that
 * the waits cost nothing but their bookkeeping. Every two-thread figure on a
 * shared budget has a control beside it, two threads with a budget each,
 * and the direct call runs on two threads as well: how well two threads
 * scale when they share nothing belongs to the machine, not to resil.
 */
#include <stdio.h>

#include "bench.h"
#include "resil.h"

/* ---- operations ----------------------------------------------------------- */

static resil_outcome op_ok(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

/* Fails three times, then succeeds; reset per execution through `user`. */
static resil_outcome op_fail3(resil_attempt_ctx *ctx)
{
    int *calls = ctx->user;
    if (++*calls <= 3)
        return resil_fail(RESIL_TRANSIENT, 503, NULL);
    return resil_ok();
}

/* Called through a volatile pointer so the compiler cannot inline it away:
 * the executor calls through a pointer too. */
static resil_op_fn volatile direct_ok = op_ok;
static resil_op_fn volatile direct_fail3 = op_fail3;

static void direct_call(void *ud, uint64_t iters)
{
    (void)ud;
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX};
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_outcome o = direct_ok(&ctx);
        n += (uint64_t)o.kind;
        BENCH_KEEP(n);
    }
    bench_consume(n);
}

static void direct_calls_4(void *ud, uint64_t iters)
{
    (void)ud;
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        int calls = 0;
        resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX, .user = &calls};
        for (int a = 0; a < 4; a++) {
            resil_outcome o = direct_fail3(&ctx);
            n += (uint64_t)o.kind;
        }
        BENCH_KEEP(n);
    }
    bench_consume(n);
}

/* A clock that costs nothing: it isolates the executor's own work from the
 * two clock reads every execution makes (elapsed needs a start and an end). */
static resil_instant frozen_now(resil_clock *self)
{
    (void)self;
    return 0;
}
static int64_t frozen_wall(resil_clock *self)
{
    (void)self;
    return 0;
}
static int frozen_sleep(resil_clock *self, resil_duration d, resil_cancel *cancel)
{
    (void)self;
    (void)d;
    return resil_cancelled(cancel) ? RESIL_ECANCELED : 0;
}
static resil_clock frozen_clock = {frozen_now, frozen_wall, frozen_sleep};

/* ---- the executor ----------------------------------------------------------- */

typedef struct exec_case {
    resil_retry_policy policy;
    resil_exec_opts opts;
} exec_case;

static void execute_ok(void *ud, uint64_t iters)
{
    exec_case *c = ud;
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_retry_result r;
        resil_retry_execute(&c->policy, &c->opts, direct_ok, NULL, &r, NULL);
        n += r.attempts;
    }
    bench_consume(n);
}

static void execute_fail3(void *ud, uint64_t iters)
{
    exec_case *c = ud;
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        int calls = 0;
        resil_retry_result r;
        resil_retry_execute(&c->policy, &c->opts, direct_fail3, &calls, &r, NULL);
        n += r.attempts;
    }
    bench_consume(n);
}

/* The decision alone, as an event loop would drive it: every iteration
 * begins an execution, starts attempt 1 and decides on its failure, which
 * under the default policy is always a real retry (a backoff wait with a
 * jitter draw), never the cheaper "attempts exhausted" stop. */
static void step_failure_decisions(void *ud, uint64_t iters)
{
    exec_case *c = ud;
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, NULL);
    resil_retry r;
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_retry_begin(&r, &c->policy, 0, RESIL_INSTANT_MAX, true);
        resil_retry_before_attempt(&r, false);
        resil_retry_decision d = resil_retry_after_attempt(&r, NULL, &fail, 0, c->opts.rng);
        n += (uint64_t)d.wait + (uint64_t)d.stop;
    }
    bench_consume(n);
}

static void backoff_only(void *ud, uint64_t iters)
{
    exec_case *c = ud;
    resil_backoff_state st = {.previous = 0, .polly_previous = 0};
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++)
        n += (uint64_t)resil_backoff_delay(&c->policy.backoff, (uint32_t)(i % 3) + 1, &st,
                                           c->opts.rng);
    bench_consume(n);
}

/* ---- budgets ------------------------------------------------------------------ */

/* One retry's worth of budget traffic: ask, then report the retry's success
 * (which also keeps every model from running dry). */
static void budget_retry_cycle(void *ud, uint64_t iters)
{
    resil_budget *b = ud;
    resil_outcome fail = resil_fail(RESIL_TRANSIENT, 503, NULL);
    resil_outcome ok = resil_ok();
    uint64_t n = 0;
    for (uint64_t i = 0; i < iters; i++) {
        resil_budget_ticket t = {0};
        n += resil_budget_try_retry(b, &fail, &t);
        resil_budget_on_result(b, &ok, 2, &t);
    }
    bench_consume(n);
}

/* A call that succeeds at once: its request, then its first-try success,
 * the path on which a shared budget must write nothing every thread
 * shares. */
static void budget_success(void *ud, uint64_t iters)
{
    resil_budget *b = ud;
    resil_outcome ok = resil_ok();
    for (uint64_t i = 0; i < iters; i++) {
        resil_budget_on_request(b);
        resil_budget_on_result(b, &ok, 1, NULL);
    }
    bench_consume(iters);
}

/* One figure on one thread, then on two threads sharing the budget, then on
 * two threads with a budget each. The last is the control: it shares
 * nothing, so what it loses against one thread is the machine's (two
 * virtual CPUs are not always two whole cores), and only the gap between
 * it and the shared figure is the budget's. */
static void bench_pair(const char *name, bench_fn fn, resil_budget *b, resil_budget *own,
                       bench_result baseline)
{
    bench_result one = bench_run(name, fn, b);
    bench_report(one, baseline, NULL);
    char name2[96];
    snprintf(name2, sizeof name2, "%s_2t_shared", name);
    bench_report_2t(bench_run_2t(name2, fn, b, b), one, baseline);
    snprintf(name2, sizeof name2, "%s_2t_separate", name);
    bench_report_2t(bench_run_2t(name2, fn, b, own), one, baseline);
}

/* A budget that has seen 1,000 requests, so that every model has the
 * history a retry is judged against. */
static resil_budget *primed_budget(const resil_budget_opts *o)
{
    resil_budget *b;
    if (resil_budget_new(o, &b, NULL) != 0)
        return NULL;
    for (int i = 0; i < 1000; i++)
        resil_budget_on_request(b);
    return b;
}

/* budget_MODEL_retry_cycle[_VARIANT] and budget_MODEL_success[_VARIANT]. */
static int bench_budget(resil_budget_model m, const char *variant, bench_result baseline,
                        resil_clock *clock)
{
    resil_budget_opts o;
    resil_budget_opts_default(&o, m);
    o.clock = clock;
    o.percent = 1000; /* the ratio model: let every retry through */
    resil_budget *b = primed_budget(&o);
    resil_budget *own = primed_budget(&o);
    if (b == NULL || own == NULL) {
        resil_budget_free(b);
        resil_budget_free(own);
        return 1;
    }
    char name[96];
    snprintf(name, sizeof name, "budget_%s_retry_cycle%s", resil_budget_model_name(m), variant);
    bench_pair(name, budget_retry_cycle, b, own, baseline);
    /* The fake clock is one shared value behind a lock: on the success
     * path, which reads the clock for each request, it would measure
     * itself. */
    if (clock == NULL) {
        snprintf(name, sizeof name, "budget_%s_success%s", resil_budget_model_name(m),
                 variant);
        bench_pair(name, budget_success, b, own, baseline);
    }
    resil_budget_free(b);
    resil_budget_free(own);
    return 0;
}

int main(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;
    resil_rng_seeded rng;
    resil_rng_seeded_init(&rng, 42);

    exec_case c;
    resil_retry_policy_default(&c.policy);
    c.opts = (resil_exec_opts){0};
    c.opts.rng = &rng.base;

    bench_result direct = bench_run("direct_call", direct_call, NULL);
    /* The machine's own two-thread scaling, sharing nothing at all. */
    bench_report_2t(bench_run_2t("direct_call_2t", direct_call, NULL, NULL), direct, direct);
    bench_result ok_sys = bench_run("retry_execute_success", execute_ok, &c);
    char extra[96];
    snprintf(extra, sizeof extra, "overhead_ns=%.2f clock=system",
             ok_sys.ns_per_op - direct.ns_per_op);
    bench_report(ok_sys, direct, extra);

    c.opts.clock = &frozen_clock;
    bench_result ok_frozen = bench_run("retry_execute_success_free_clock", execute_ok, &c);
    snprintf(extra, sizeof extra, "overhead_ns=%.2f clock=free",
             ok_frozen.ns_per_op - direct.ns_per_op);
    bench_report(ok_frozen, direct, extra);

    c.opts.clock = resil_fake_clock_clock(fc);
    bench_result ok_fake = bench_run("retry_execute_success_fake_clock", execute_ok, &c);
    snprintf(extra, sizeof extra, "overhead_ns=%.2f clock=fake",
             ok_fake.ns_per_op - direct.ns_per_op);
    bench_report(ok_fake, direct, extra);

    bench_result direct4 = bench_run("direct_calls_x4", direct_calls_4, NULL);
    bench_result fail3 = bench_run("retry_execute_3_failures_fake_clock", execute_fail3, &c);
    snprintf(extra, sizeof extra, "ns_per_failed_attempt=%.2f",
             (fail3.ns_per_op - ok_fake.ns_per_op - 3 * direct.ns_per_op) / 3);
    bench_report(fail3, direct4, extra);

    bench_result backoff = bench_run("backoff_delay_full_jitter", backoff_only, &c);
    bench_report(bench_run("retry_step_failure_decision", step_failure_decisions, &c),
                 backoff, "decision=retry (begin, before, after with a backoff draw)");

    bench_result inc = bench_run("atomic_increment", bench_atomic_increment, NULL);
    int rc = bench_budget(RESIL_BUDGET_TOKENS, "", inc, NULL);
    rc |= bench_budget(RESIL_BUDGET_QUOTA, "", inc, NULL);
    rc |= bench_budget(RESIL_BUDGET_RATIO, "", inc, resil_fake_clock_clock(fc));
    rc |= bench_budget(RESIL_BUDGET_RATIO, "_system_clock", inc, NULL);
    resil_fake_clock_free(fc);
    return rc;
}
