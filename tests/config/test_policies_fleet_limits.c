/*
 * test_policies_fleet_limits.c — RateLimiters and Bulkheads entries marked
 * "Distributed": true are built by the factories the application registers
 * (a fleet adapter this library does not link; here, factories that note
 * what they were asked and build local objects), refused without them, and
 * rebuilt on a reload that flips the flag.
 */
#include "cfgtest.h"

#define DOC(distributed)                                                                     \
    "{'Resilience': {"                                                                       \
    " 'RateLimiters': {'api': {'Kind': 'TokenBucket', 'TokensPerPeriod': 2,"                \
    "                          'ReplenishmentPeriod': '1s', 'TokenLimit': 2,"               \
    "                          'Distributed': " distributed "}},"                            \
    " 'Bulkheads': {'db': {'MaxConcurrency': 3, 'Distributed': " distributed "}},"          \
    " 'Pipelines': {'orders': ['RateLimiter:api', 'Bulkhead:db']}}}"

typedef struct factory_log {
    int limiters, bulkheads;
    char name[64];
    int64_t burst;
    int32_t max_concurrency;
} factory_log;

static int limiter_factory(const char *name, const resil_ratelimit_opts *o, resil_ratelimit **out,
                           resil_err *err, void *ud)
{
    factory_log *log = ud;
    log->limiters++;
    snprintf(log->name, sizeof log->name, "%s", name);
    log->burst = o->burst;
    return resil_ratelimit_new(o, out, err);
}

static int bulkhead_factory(const char *name, const resil_bulkhead_opts *o, resil_bulkhead **out,
                            resil_err *err, void *ud)
{
    factory_log *log = ud;
    (void)name;
    log->bulkheads++;
    log->max_concurrency = o->max_concurrency;
    return resil_bulkhead_new(o, out, err);
}

typedef struct fixture {
    resil_fake_clock *fc;
    resil_policies *reg;
    factory_log log;
} fixture;

static int setup_with(void **state, bool factories)
{
    fixture *f = calloc(1, sizeof *f);
    assert_int_equal(resil_fake_clock_new(0, 0, &f->fc), 0);
    resil_policies_opts o;
    resil_policies_opts_default(&o);
    o.clock = resil_fake_clock_clock(f->fc);
    if (factories) {
        o.ratelimit_factory = limiter_factory;
        o.ratelimit_factory_ud = &f->log;
        o.bulkhead_factory = bulkhead_factory;
        o.bulkhead_factory_ud = &f->log;
    }
    assert_int_equal(resil_policies_new(&o, &f->reg, NULL), 0);
    *state = f;
    return 0;
}

static int setup(void **state) { return setup_with(state, true); }
static int setup_bare(void **state) { return setup_with(state, false); }

static int teardown(void **state)
{
    fixture *f = *state;
    resil_policies_free(f->reg);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

static int apply_doc(fixture *f, const char *doc, resil_err *e)
{
    resil_config *c = cfg_load(doc);
    int rc = resil_policies_apply(f->reg, c, e);
    resil_config_free(c);
    return rc;
}

static resil_outcome ok_op(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

static resil_outcome run(fixture *f)
{
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, "orders", &p), 0);
    resil_pipeline_result res;
    assert_int_equal(resil_policy_execute(&p, ok_op, NULL, &res), 0);
    resil_policy_release(&p);
    return res.outcome;
}

static void distributed_entries_are_built_by_the_factories(void **state)
{
    fixture *f = *state;
    assert_int_equal(apply_doc(f, DOC("true"), NULL), 0);
    assert_int_equal(f->log.limiters, 1);
    assert_int_equal(f->log.bulkheads, 1);
    assert_string_equal(f->log.name, "api");
    assert_int_equal(f->log.burst, 2);
    assert_int_equal(f->log.max_concurrency, 3);
    assert_int_equal(run(f).kind, RESIL_SUCCESS);
    assert_int_equal(run(f).kind, RESIL_SUCCESS);
    assert_int_equal(run(f).kind, RESIL_REJECTED); /* the factory's limiter: burst 2 */
}

static void entries_not_distributed_never_reach_the_factories(void **state)
{
    fixture *f = *state;
    assert_int_equal(apply_doc(f, DOC("false"), NULL), 0);
    assert_int_equal(f->log.limiters, 0);
    assert_int_equal(f->log.bulkheads, 0);
}

static void a_reload_that_flips_distributed_rebuilds_through_the_factory(void **state)
{
    fixture *f = *state;
    assert_int_equal(apply_doc(f, DOC("false"), NULL), 0);
    assert_int_equal(apply_doc(f, DOC("true"), NULL), 0);
    assert_int_equal(f->log.limiters, 1);
    assert_int_equal(f->log.bulkheads, 1);
    assert_int_equal(apply_doc(f, DOC("true"), NULL), 0); /* unchanged: kept */
    assert_int_equal(f->log.limiters, 1);
}

static void a_distributed_limiter_without_its_factory_is_refused(void **state)
{
    fixture *f = *state;
    resil_err e = {0, ""};
    const char *doc = "{'Resilience': {'RateLimiters': {'api': {'Distributed': true}},"
                      " 'Pipelines': {'orders': ['RateLimiter:api']}}}";
    assert_int_equal(apply_doc(f, doc, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "policies: rate limiter api is Distributed but no "
                                   "ratelimit_factory is registered");
    assert_int_equal(resil_policies_version(f->reg), 0);
}

static void a_distributed_bulkhead_without_its_factory_is_refused(void **state)
{
    fixture *f = *state;
    resil_err e = {0, ""};
    const char *doc = "{'Resilience': {'Bulkheads': {'db': {'Distributed': true}},"
                      " 'Pipelines': {'orders': ['Bulkhead:db']}}}";
    assert_int_equal(apply_doc(f, doc, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "policies: bulkhead db is Distributed but no "
                                   "bulkhead_factory is registered");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(distributed_entries_are_built_by_the_factories, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(entries_not_distributed_never_reach_the_factories, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_reload_that_flips_distributed_rebuilds_through_the_factory, setup, teardown),
        cmocka_unit_test_setup_teardown(a_distributed_limiter_without_its_factory_is_refused,
                                        setup_bare, teardown),
        cmocka_unit_test_setup_teardown(a_distributed_bulkhead_without_its_factory_is_refused,
                                        setup_bare, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
