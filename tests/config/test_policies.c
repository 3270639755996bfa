/*
 * test_policies.c — the registry of named policies: resolving a name gives
 * that name's pipeline (the unnamed default the standard one), names never
 * share state, and a reload swaps policies atomically for new executions,
 * leaves running ones alone, and keeps the state of every name whose
 * options did not change — also with executions running on other threads
 * (run under TSan).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "cfgtest.h"
#include "clock_driver.h"

typedef struct fixture {
    resil_fake_clock *fc;
    resil_policies *reg;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_int_equal(resil_fake_clock_new(0, 0, &f->fc), 0);
    resil_policies_opts o;
    resil_policies_opts_default(&o);
    o.clock = resil_fake_clock_clock(f->fc);
    assert_int_equal(resil_policies_new(&o, &f->reg, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_policies_free(f->reg);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

static void apply(fixture *f, const char *doc)
{
    resil_config *c = cfg_load(doc);
    resil_err e = {0, ""};
    int rc = resil_policies_apply(f->reg, c, &e);
    if (rc != 0)
        print_error("apply: %s\n", e.message);
    assert_int_equal(rc, 0);
    resil_config_free(c);
}

/* Operations: count calls in an atomic, fail or succeed. */
static resil_outcome fail_op(resil_attempt_ctx *ctx)
{
    atomic_fetch_add((atomic_int *)ctx->user, 1);
    return resil_fail(RESIL_TRANSIENT, 503, "unavailable");
}

static resil_outcome ok_op(resil_attempt_ctx *ctx)
{
    atomic_fetch_add((atomic_int *)ctx->user, 1);
    return resil_ok();
}

static int run(fixture *f, const char *name, resil_op_fn op, resil_pipeline_result *res)
{
    atomic_int calls = 0;
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, name, &p), 0);
    resil_call call;
    resil_call_default(&call);
    call.user = &calls;
    assert_int_equal(resil_policy_execute(&p, op, &call, res), 0);
    resil_policy_release(&p);
    return atomic_load(&calls);
}

#define TWO                                                                                    \
    "{'Resilience': {'Retry': {'three': {'MaxRetryAttempts': 2, 'BaseDelay': '1s'}},"          \
    " 'CircuitBreakers': {'shared': {'ConsecutiveFailureThreshold': 2, 'BreakDuration': '1m'},"\
    "  'other': {'ConsecutiveFailureThreshold': 2}},"                                          \
    " 'Pipelines': {'orders': ['Retry:three', 'CircuitBreaker:shared'],"                       \
    "  'billing': ['CircuitBreaker:shared'], 'search': ['CircuitBreaker:other']}}}"

static void a_name_resolves_to_its_own_pipeline(void **state)
{
    fixture *f = *state;
    apply(f, TWO);
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, "ORDERS", &p), 0);
    assert_string_equal(resil_pipeline_name(p.pipeline), "orders");
    assert_int_equal(resil_pipeline_strategy_count(p.pipeline), 2);
    resil_policy_release(&p);
    resil_pipeline_result res;
    assert_int_equal(run(f, "orders", ok_op, &res), 1);
    assert_true(resil_outcome_ok(&res.outcome));
    assert_int_equal(resil_policies_version(f->reg), 1);
}

static void the_unnamed_default_is_the_standard_pipeline(void **state)
{
    fixture *f = *state;
    apply(f, TWO);
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, NULL, &p), 0);
    assert_string_equal(resil_pipeline_name(p.pipeline), "standard");
    assert_int_equal(resil_pipeline_strategy_count(p.pipeline), 5);
    resil_policy_release(&p);
    assert_int_equal(resil_policies_get(f->reg, "", &p), 0);
    assert_string_equal(resil_pipeline_name(p.pipeline), "standard");
    resil_policy_release(&p);
}

static void an_unknown_name_is_never_another_pipeline(void **state)
{
    fixture *f = *state;
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, "orders", &p), RESIL_ENOTFOUND);
    apply(f, TWO);
    assert_int_equal(resil_policies_get(f->reg, "order", &p), RESIL_ENOTFOUND);
    assert_null(p.pipeline);
    resil_policy_release(&p);
}

static void pipelines_naming_one_breaker_share_it(void **state)
{
    fixture *f = *state;
    apply(f, TWO);
    resil_pipeline_result res;
    assert_int_equal(run(f, "orders", fail_op, &res), 2); /* the 2nd failure trips it */
    assert_int_equal(run(f, "billing", ok_op, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(run(f, "search", ok_op, &res), 1); /* another name, another breaker */
    assert_true(resil_outcome_ok(&res.outcome));
}

static void a_reload_keeps_the_state_of_unchanged_breakers(void **state)
{
    fixture *f = *state;
    apply(f, TWO);
    resil_pipeline_result res;
    run(f, "orders", fail_op, &res);
    resil_breaker *before, *after;
    assert_int_equal(resil_policies_breaker(f->reg, "shared", &before), 0);
    assert_int_equal(resil_breaker_state_of(before), RESIL_BREAKER_OPEN);
    /* The retry changes; the breaker's options do not. */
    apply(f, "{'Resilience': {'Retry': {'three': {'MaxRetryAttempts': 5}},"
             " 'CircuitBreakers': {'shared': {'ConsecutiveFailureThreshold': 2,"
             "   'BreakDuration': '00:01:00'}, 'other': {'ConsecutiveFailureThreshold': 3}},"
             " 'Pipelines': {'orders': ['Retry:three', 'CircuitBreaker:shared']}}}");
    assert_int_equal(resil_policies_version(f->reg), 2);
    assert_int_equal(resil_policies_breaker(f->reg, "SHARED", &after), 0);
    assert_ptr_equal(before, after);
    assert_int_equal(resil_breaker_state_of(after), RESIL_BREAKER_OPEN);
    assert_int_equal(run(f, "orders", ok_op, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_REJECTED);
    resil_breaker_free(before);
    resil_breaker_free(after);
}

static void a_reload_gives_a_changed_breaker_a_fresh_start(void **state)
{
    fixture *f = *state;
    apply(f, TWO);
    resil_pipeline_result res;
    run(f, "orders", fail_op, &res);
    resil_breaker *before, *after;
    resil_policies_breaker(f->reg, "shared", &before);
    apply(f, "{'Resilience': {'CircuitBreakers': {'shared': {'ConsecutiveFailureThreshold': 3}},"
             " 'Pipelines': {'orders': ['CircuitBreaker:shared']}}}");
    resil_policies_breaker(f->reg, "shared", &after);
    assert_ptr_not_equal(before, after);
    assert_int_equal(resil_breaker_state_of(after), RESIL_BREAKER_CLOSED);
    assert_int_equal(resil_breaker_state_of(before), RESIL_BREAKER_OPEN); /* still ours */
    assert_int_equal(run(f, "orders", ok_op, &res), 1);
    resil_breaker_free(before);
    resil_breaker_free(after);
    assert_int_equal(resil_policies_breaker(f->reg, "other", &after), RESIL_ENOTFOUND);
    assert_null(after);
}

#define BUDGETED(retries, tokens)                                                          \
    "{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': " retries ", 'BaseDelay': '10ms',"  \
    "   'Budget': 'b'}}, 'RetryBudgets': {'b': {'MaxTokens': " tokens "}},"                    \
    " 'Pipelines': {'orders': ['Retry:r']}}}"

/* gRPC's tokens: each failure costs one, and a retry needs more than half
 * of MaxTokens left. Four tokens: a failing call retries once (4 → 3 → 2),
 * the next not at all (2 → 1). A reload that changes the retry but not the
 * budget keeps the spent one; another MaxTokens starts a full one. */
static void a_reload_keeps_an_unchanged_budgets_tokens(void **state)
{
    fixture *f = *state;
    resil_pipeline_result res;
    apply(f, BUDGETED("5", "4"));
    assert_int_equal(run(f, "orders", fail_op, &res), 2);
    assert_int_equal(res.stop, RESIL_STOP_BUDGET_EXHAUSTED);
    assert_int_equal(run(f, "orders", fail_op, &res), 1);
    apply(f, BUDGETED("4", "4"));
    assert_int_equal(run(f, "orders", fail_op, &res), 1);
    assert_int_equal(res.stop, RESIL_STOP_BUDGET_EXHAUSTED);
    apply(f, BUDGETED("4", "6")); /* 6 → 5 → 4 → 3: two retries */
    assert_int_equal(run(f, "orders", fail_op, &res), 3);
    assert_int_equal(res.stop, RESIL_STOP_BUDGET_EXHAUSTED);
}

#define COUNTED(size)                                                                    \
    "{'Resilience': {'CircuitBreakers': {'shared': {'SlidingWindowSize': " size "}},"   \
    " 'Pipelines': {'orders': ['CircuitBreaker:shared']}}}"

static void a_reload_with_another_window_size_gives_a_fresh_breaker(void **state)
{
    fixture *f = *state;
    resil_breaker *first, *same, *resized;
    apply(f, COUNTED("10"));
    assert_int_equal(resil_policies_breaker(f->reg, "shared", &first), 0);
    apply(f, COUNTED("10"));
    assert_int_equal(resil_policies_breaker(f->reg, "shared", &same), 0);
    assert_ptr_equal(first, same);
    apply(f, COUNTED("20"));
    assert_int_equal(resil_policies_breaker(f->reg, "shared", &resized), 0);
    assert_ptr_not_equal(first, resized);
    resil_breaker_free(first);
    resil_breaker_free(same);
    resil_breaker_free(resized);
}

static void a_document_with_errors_changes_nothing(void **state)
{
    fixture *f = *state;
    apply(f, TWO);
    char *dir = test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    FILE *fp = fopen(path, "w");
    fputs(cfg_json("{'Resilience': {'Pipelines': {'orders': ['Retry:gone']}}}"), fp);
    fclose(fp);
    resil_config_diags d = {0};
    assert_int_equal(resil_policies_load_file(f->reg, path, &d), RESIL_EINVAL);
    assert_int_equal(d.len, 1);
    resil_config_diags_free(&d);
    assert_int_equal(resil_policies_version(f->reg), 1);
    resil_pipeline_result res;
    assert_int_equal(run(f, "orders", fail_op, &res), 2); /* still Retry:three */
    assert_int_equal(run(f, "search", ok_op, &res), 1);
    /* A good file applies. */
    fp = fopen(path, "w");
    fputs(cfg_json("{'Resilience': {'Pipelines': {'orders': []}}}"), fp);
    fclose(fp);
    assert_int_equal(resil_policies_load_file(f->reg, path, NULL), 0);
    assert_int_equal(resil_policies_version(f->reg), 2);
    assert_int_equal(run(f, "orders", fail_op, &res), 1);
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, "search", &p), RESIL_ENOTFOUND);
    test_rmtree(dir);
    free(dir);
}

static void a_running_execution_keeps_the_policy_it_started_with(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 1}},"
             " 'Pipelines': {'p': ['Retry:r']}}}");
    resil_policy old;
    assert_int_equal(resil_policies_get(f->reg, "p", &old), 0);
    apply(f, "{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 4}},"
             " 'Pipelines': {'p': ['Retry:r']}}}");
    atomic_int calls = 0;
    resil_call call;
    resil_call_default(&call);
    call.user = &calls;
    resil_pipeline_result res;
    assert_int_equal(resil_policy_execute(&old, fail_op, &call, &res), 0);
    assert_int_equal(atomic_load(&calls), 2); /* the old snapshot's two attempts */
    resil_policy_release(&old);
    resil_policy_release(&old); /* emptied: harmless */
    assert_int_equal(run(f, "p", fail_op, &res), 5);
}

static void an_inner_pipeline_runs_as_the_operation(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Retry': {'two': {'MaxRetryAttempts': 1},"
             " 'three': {'MaxRetryAttempts': 2}},"
             " 'Pipelines': {'edge': ['Retry:two', 'Pipeline:mid'],"
             "  'mid': ['Pipeline:core'], 'core': ['Retry:three']}}}");
    resil_pipeline_result res;
    assert_int_equal(run(f, "edge", fail_op, &res), 6);
    assert_int_equal(res.attempts, 2);
    assert_int_equal(res.outcome.kind, RESIL_TRANSIENT);
    assert_int_equal(res.outcome.code, 503);
    assert_int_equal(run(f, "mid", ok_op, &res), 1);
}

/* A bulkhead of one whose only permit is held by a call blocked on another
 * thread: a reload that leaves the bulkhead alone must keep it full. */
typedef struct blocker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inside, release;
} blocker;

static resil_outcome blocking_op(resil_attempt_ctx *ctx)
{
    blocker *b = ctx->user;
    pthread_mutex_lock(&b->mu);
    b->inside = true;
    pthread_cond_broadcast(&b->cv);
    while (!b->release)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return resil_ok();
}

typedef struct held_call {
    fixture *f;
    blocker *b;
    int rc; /* resolving "db"; asserted on the test's thread */
} held_call;

static void *hold_permit(void *arg)
{
    held_call *h = arg;
    resil_policy p;
    if ((h->rc = resil_policies_get(h->f->reg, "db", &p)) != 0) {
        pthread_mutex_lock(&h->b->mu); /* do not leave the test waiting */
        h->b->inside = true;
        pthread_cond_broadcast(&h->b->cv);
        pthread_mutex_unlock(&h->b->mu);
        return NULL;
    }
    resil_call call;
    resil_call_default(&call);
    call.user = h->b;
    resil_pipeline_result res;
    resil_policy_execute(&p, blocking_op, &call, &res);
    resil_policy_release(&p);
    return NULL;
}

static void a_reload_keeps_an_unchanged_bulkheads_permits(void **state)
{
    fixture *f = *state;
    const char *doc = "{'Resilience': {'Bulkheads': {'one': {'MaxConcurrency': 1,"
                      " 'AllowQueueing': false}}, 'Pipelines': {'db': ['Bulkhead:one']}}}";
    apply(f, doc);
    blocker b = {.inside = false, .release = false};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    held_call h = {f, &b, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_permit, &h), 0);
    pthread_mutex_lock(&b.mu);
    while (!b.inside)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    assert_int_equal(h.rc, 0);
    apply(f, doc);
    resil_pipeline_result res;
    assert_int_equal(run(f, "db", ok_op, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(res.rejected_by, RESIL_STRATEGY_BULKHEAD);
    pthread_mutex_lock(&b.mu);
    b.release = true;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    pthread_join(t, NULL);
    assert_int_equal(run(f, "db", ok_op, &res), 1);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
}

static resil_outcome note_deadline(resil_attempt_ctx *ctx)
{
    *(resil_instant *)ctx->user = ctx->deadline;
    return resil_ok();
}

/* The deadline an operation named `operation` gets through policy `name`. */
static resil_instant deadline_for(fixture *f, const char *name, const char *operation)
{
    resil_instant deadline = 0;
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, name, &p), 0);
    resil_call call;
    resil_call_default(&call);
    call.user = &deadline;
    call.operation = operation;
    resil_pipeline_result res;
    assert_int_equal(resil_policy_execute(&p, note_deadline, &call, &res), 0);
    resil_policy_release(&p);
    return deadline;
}

static void per_operation_timeouts_reach_the_pipeline(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Timeouts': {'DefaultTimeout': '30s',"
             " 'OperationTimeouts': {'quick': '2s'}}, 'Pipelines': {'p': ['TotalTimeout']}}}");
    resil_instant now = resil_fake_clock_now(f->fc);
    assert_int_equal(deadline_for(f, "p", "quick"), now + RESIL_S(2));
    assert_int_equal(deadline_for(f, "p", "slow"), now + RESIL_S(30));
    assert_int_equal(deadline_for(f, "p", NULL), now + RESIL_S(30));
}

static void events_reach_the_registrys_listener(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    resil_fake_clock_new(0, 0, &fc);
    resil_metrics *m;
    assert_int_equal(resil_metrics_new(NULL, &m, NULL), 0);
    resil_policies_opts o;
    resil_policies_opts_default(&o);
    o.clock = resil_fake_clock_clock(fc);
    o.listener = resil_metrics_on_event;
    o.listener_ud = m;
    resil_policies *reg;
    assert_int_equal(resil_policies_new(&o, &reg, NULL), 0);
    resil_config *c = cfg_load("{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 2}},"
                               " 'Pipelines': {'p': ['Retry:r']}}}");
    assert_int_equal(resil_policies_apply(reg, c, NULL), 0);
    resil_config_free(c);
    resil_policy p;
    resil_policies_get(reg, "p", &p);
    atomic_int calls = 0;
    resil_call call;
    resil_call_default(&call);
    call.user = &calls;
    resil_pipeline_result res;
    resil_policy_execute(&p, fail_op, &call, &res);
    resil_policy_release(&p);
    assert_int_equal(resil_metrics_event_count(m, "p", "retry", RESIL_EVENT_RETRY), 2);
    resil_policies_free(reg);
    resil_metrics_free(m);
    resil_fake_clock_free(fc);
}

/* ---- reloads under concurrent executions (TSan) ------------------------------------ */

#define THREADS 4
#define RELOADS 60

typedef struct race {
    resil_policies *reg;
    atomic_bool stop;
    atomic_long executions;
    atomic_long broken; /* a worker's failed expectations */
} race;

static void *execute_loop(void *arg)
{
    race *r = arg;
    while (!atomic_load(&r->stop)) {
        resil_policy p;
        if (resil_policies_get(r->reg, "p", &p) != 0)
            continue;
        atomic_int calls = 0;
        resil_call call;
        resil_call_default(&call);
        call.user = &calls;
        resil_pipeline_result res;
        bool ran = resil_policy_execute(&p, ok_op, &call, &res) == 0;
        if (!ran || !(resil_outcome_ok(&res.outcome) || res.outcome.kind == RESIL_REJECTED))
            atomic_fetch_add(&r->broken, 1);
        resil_policy_release(&p);
        atomic_fetch_add(&r->executions, 1);
    }
    return NULL;
}

static void reloads_race_executions_safely(void **state)
{
    (void)state;
    race r = {.stop = false, .executions = 0, .broken = 0};
    assert_int_equal(resil_policies_new(NULL, &r.reg, NULL), 0);
    static const char *const docs[2] = {
        "{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 1}},"
        " 'CircuitBreakers': {'b': {}}, 'Bulkheads': {'h': {'MaxConcurrency': 64}},"
        " 'RateLimiters': {'l': {'TokenLimit': 1000000, 'TokensPerPeriod': 1000000}},"
        " 'Pipelines': {'p': ['RateLimiter:l', 'Bulkhead:h', 'Retry:r', 'CircuitBreaker:b']}}}",
        "{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 2}},"
        " 'CircuitBreakers': {'b': {}}, 'Bulkheads': {'h': {'MaxConcurrency': 64}},"
        " 'RateLimiters': {'l': {'TokenLimit': 1000000, 'TokensPerPeriod': 1000000}},"
        " 'Pipelines': {'p': ['RateLimiter:l', 'Bulkhead:h', 'Retry:r', 'CircuitBreaker:b'],"
        "  'q': []}}}",
    };
    resil_config *c[2] = {cfg_load(docs[0]), cfg_load(docs[1])};
    assert_int_equal(resil_policies_apply(r.reg, c[0], NULL), 0);
    resil_breaker *first;
    resil_policies_breaker(r.reg, "b", &first);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, execute_loop, &r), 0);
    for (int i = 1; i <= RELOADS; i++) {
        long seen = atomic_load(&r.executions);
        assert_int_equal(resil_policies_apply(r.reg, c[i % 2], NULL), 0);
        while (atomic_load(&r.executions) < seen + THREADS) /* let them run on it */
            sched_yield();
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&r.broken), 0);
    assert_int_equal(resil_policies_version(r.reg), RELOADS + 1);
    resil_breaker *last;
    resil_policies_breaker(r.reg, "b", &last);
    assert_ptr_equal(first, last); /* unchanged options: the same breaker throughout */
    resil_breaker_free(first);
    resil_breaker_free(last);
    resil_config_free(c[0]);
    resil_config_free(c[1]);
    resil_policies_free(r.reg);
}

/* ---- DistributedCircuitBreaker: breakers from the application's factory -- */

#define FLEET                                                                                  \
    "{'Resilience': {'DistributedCircuitBreaker': {'Enabled': true},"                          \
    " 'CircuitBreakers': {'shared': {'ConsecutiveFailureThreshold': 2, 'BreakDuration': '1m'}},"\
    " 'Pipelines': {'orders': ['CircuitBreaker:shared'], 'billing': ['CircuitBreaker:shared']}}}"

typedef struct factory_log {
    int calls;
    char name[64];
    uint32_t threshold;
} factory_log;

/* Stands in for a fleet adapter: notes what it was asked, builds a local one. */
static int logging_factory(const char *name, const resil_breaker_opts *o, resil_breaker **out,
                           resil_err *err, void *ud)
{
    factory_log *log = ud;
    log->calls++;
    snprintf(log->name, sizeof log->name, "%s", name);
    log->threshold = o->failure_threshold;
    return resil_breaker_new(o, out, err);
}

static void a_distributed_document_builds_its_breakers_through_the_factory(void **state)
{
    (void)state;
    factory_log log = {0};
    resil_policies_opts o;
    resil_policies_opts_default(&o);
    o.breaker_factory = logging_factory;
    o.breaker_factory_ud = &log;
    fixture f = {0};
    assert_int_equal(resil_fake_clock_new(0, 0, &f.fc), 0);
    o.clock = resil_fake_clock_clock(f.fc);
    assert_int_equal(resil_policies_new(&o, &f.reg, NULL), 0);
    apply(&f, FLEET);
    assert_int_equal(log.calls, 1);
    assert_string_equal(log.name, "shared");
    assert_int_equal(log.threshold, 2);
    resil_pipeline_result res;
    assert_int_equal(run(&f, "orders", fail_op, &res), 1);
    assert_int_equal(run(&f, "orders", fail_op, &res), 1); /* the 2nd failure trips it */
    assert_int_equal(run(&f, "billing", ok_op, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_REJECTED);
    resil_policies_free(f.reg);
    resil_fake_clock_free(f.fc);
}

static void a_distributed_document_without_a_factory_is_refused(void **state)
{
    fixture *f = *state;
    resil_config *c = cfg_load(FLEET);
    resil_err e = {0, ""};
    assert_int_equal(resil_policies_apply(f->reg, c, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "policies: DistributedCircuitBreaker is enabled but no "
                                   "breaker_factory is registered");
    assert_int_equal(resil_policies_version(f->reg), 0);
    resil_config_free(c);
}

/* A file that parses but that the registry cannot apply: the reason is
 * a diagnostic under the file's path, and nothing changes. */
static void a_file_the_registry_cannot_apply_is_refused_under_its_path(void **state)
{
    fixture *f = *state;
    char *dir = test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/fleet.json", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(cfg_json(FLEET), fp);
    fclose(fp);
    resil_config_diags d = {0};
    assert_int_equal(resil_policies_load_file(f->reg, path, &d), RESIL_EINVAL);
    assert_int_equal(d.len, 1);
    assert_string_equal(d.items[0].path, path);
    assert_string_equal(d.items[0].message, "policies: DistributedCircuitBreaker is enabled "
                                            "but no breaker_factory is registered");
    resil_config_diags_free(&d);
    assert_int_equal(resil_policies_version(f->reg), 0);
    test_rmtree(dir);
    free(dir);
}

/* ---- Fallbacks, RetryBudgets, Hedging ---------------------------------------------- */

static void a_fallback_step_answers_for_a_failed_call(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Retry': {'r': {'MaxRetryAttempts': 1, 'BaseDelay': '0s'}},"
             " 'Fallbacks': {'cached': {'Code': 203, 'Detail': 'from cache'}},"
             " 'Pipelines': {'p': ['Fallback:cached', 'Retry:r']}}}");
    resil_pipeline_result res;
    assert_int_equal(run(f, "p", fail_op, &res), 2);
    assert_true(res.fallback);
    assert_int_equal(res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(res.outcome.code, 203);
    assert_string_equal(res.outcome.detail, "from cache");
    assert_int_equal(res.cause.code, 503);
}

/* gRPC's tokens: 10 at the start, -1 per failure, retries only while
 * more than half remain: a retry is granted at 9, 8, 7, 6 tokens and
 * refused at 5. Both pipelines draw from the one budget. */
static void pipelines_naming_one_budget_share_it(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'RetryBudgets': {'calls': {'Model': 'Tokens', 'MaxTokens': 10}},"
             " 'Retry': {'r': {'MaxRetryAttempts': 3, 'BaseDelay': '0s', 'Budget': 'calls'}},"
             " 'Pipelines': {'a': ['Retry:r'], 'b': ['Retry:r']}}}");
    resil_pipeline_result res;
    assert_int_equal(run(f, "a", fail_op, &res), 4);
    assert_int_equal(res.stop, RESIL_STOP_ATTEMPTS_EXHAUSTED);
    assert_int_equal(run(f, "b", fail_op, &res), 1);
    assert_int_equal(res.stop, RESIL_STOP_BUDGET_EXHAUSTED);
}

/* A failed attempt is hedged at once: Microsoft's one hedge, then the
 * primary's outcome when both fail. */
static void a_hedging_step_hedges_once_by_default(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Hedging': {'h': {}}, 'Pipelines': {'p': ['Hedging:h']}}}");
    resil_pipeline_result res;
    assert_int_equal(run(f, "p", fail_op, &res), 2);
    assert_int_equal(res.hedges, 1);
    assert_int_equal(res.outcome.code, 503);
}

/* A failing call through a hedged pipeline: its attempts sleep on the
 * pool's threads, so the clock moves only once every thread waits. */
typedef struct hedged_run {
    fixture *f;
    const char *name;
    resil_pipeline_result *res;
    int calls;
} hedged_run;

static void *hedged_call(void *arg)
{
    hedged_run *h = arg;
    h->calls = run(h->f, h->name, fail_op, h->res);
    return NULL;
}

static int run_hedged(fixture *f, const char *name, resil_pipeline_result *res)
{
    hedged_run h = {f, name, res, 0};
    clock_driver_run(f->fc, hedged_call, &h);
    return h.calls;
}

static void expect_standard_hedging_order(const resil_pipeline *p)
{
    static const resil_strategy_kind order[] = {
        RESIL_STRATEGY_TOTAL_TIMEOUT, RESIL_STRATEGY_HEDGING, RESIL_STRATEGY_BULKHEAD,
        RESIL_STRATEGY_BREAKER, RESIL_STRATEGY_ATTEMPT_TIMEOUT};
    assert_int_equal(resil_pipeline_strategy_count(p), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(resil_pipeline_strategy_at(p, i), order[i]);
}

/* "StandardHedging" alone is resil_pipeline_standard_hedging(): Microsoft's
 * order, and its one hedge, started at once when the primary fails. */
static void a_bare_standard_hedging_step_is_microsofts_handler(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Pipelines': {'p': ['StandardHedging']}}}");
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, "p", &p), 0);
    expect_standard_hedging_order(p.pipeline);
    assert_string_equal(resil_pipeline_name(p.pipeline), "p");
    resil_policy_release(&p);
    resil_pipeline_result res;
    assert_int_equal(run_hedged(f, "p", &res), 2);
    assert_int_equal(res.hedges, 1);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.outcome.code, 503);
    assert_duration_equal(res.elapsed, 0);
}

/* "StandardHedging:NAME" takes its hedging from the Hedging entry and the
 * rest from Microsoft's handler. */
static void a_named_standard_hedging_step_hedges_as_its_entry_says(void **state)
{
    fixture *f = *state;
    apply(f, "{'Resilience': {'Hedging': {'wide': {'MaxHedgedAttempts': 3, 'Delay': '0s'}},"
             " 'Pipelines': {'p': ['StandardHedging:wide']}}}");
    resil_policy p;
    assert_int_equal(resil_policies_get(f->reg, "p", &p), 0);
    expect_standard_hedging_order(p.pipeline);
    resil_policy_release(&p);
    resil_pipeline_result res;
    assert_int_equal(run_hedged(f, "p", &res), 4);
    assert_int_equal(res.hedges, 3);
    assert_int_equal(res.outcome.code, 503);
}

static void null_arguments_are_refused(void **state)
{
    fixture *f = *state;
    resil_policy p;
    resil_breaker *b;
    assert_int_equal(resil_policies_new(NULL, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_policies_apply(f->reg, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_policies_get(NULL, "p", &p), RESIL_EINVAL);
    assert_int_equal(resil_policies_breaker(f->reg, NULL, &b), RESIL_EINVAL);
    assert_int_equal(resil_policy_execute(NULL, ok_op, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_policies_load_file(f->reg, NULL, NULL), RESIL_EINVAL);
    assert_int_equal(resil_policies_version(NULL), 0);
    resil_policy_release(NULL);
    resil_policies_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_name_resolves_to_its_own_pipeline, setup, teardown),
        cmocka_unit_test_setup_teardown(the_unnamed_default_is_the_standard_pipeline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_unknown_name_is_never_another_pipeline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pipelines_naming_one_breaker_share_it, setup, teardown),
        cmocka_unit_test_setup_teardown(a_reload_keeps_the_state_of_unchanged_breakers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_reload_gives_a_changed_breaker_a_fresh_start, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_reload_keeps_an_unchanged_budgets_tokens, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_reload_with_another_window_size_gives_a_fresh_breaker,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_document_with_errors_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(a_running_execution_keeps_the_policy_it_started_with,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_inner_pipeline_runs_as_the_operation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_reload_keeps_an_unchanged_bulkheads_permits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(per_operation_timeouts_reach_the_pipeline, setup,
                                        teardown),
        cmocka_unit_test(events_reach_the_registrys_listener),
        cmocka_unit_test(reloads_race_executions_safely),
        cmocka_unit_test_setup_teardown(a_fallback_step_answers_for_a_failed_call, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_bare_standard_hedging_step_is_microsofts_handler,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_named_standard_hedging_step_hedges_as_its_entry_says,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(pipelines_naming_one_budget_share_it, setup, teardown),
        cmocka_unit_test_setup_teardown(a_hedging_step_hedges_once_by_default, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(null_arguments_are_refused, setup, teardown),
        cmocka_unit_test(a_distributed_document_builds_its_breakers_through_the_factory),
        cmocka_unit_test_setup_teardown(a_distributed_document_without_a_factory_is_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_file_the_registry_cannot_apply_is_refused_under_its_path,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
