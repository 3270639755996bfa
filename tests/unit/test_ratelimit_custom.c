/*
 * test_ratelimit_custom.c — a limiter of the application's own behind the
 * resil_ratelimit handle: the table's checks, what the handle does around
 * the implementation's step (argument checks, counters, the blocking wait
 * on its clock, the retry-after it passes on), the accessors, and a
 * pipeline taking it where it takes a built-in limiter.
 */
#include "test.h"

#define T0 RESIL_S(100)

/* A quota: `left` permits, then a fixed wait; records what it was asked. */
typedef struct quota {
    int64_t left;
    resil_duration wait;
    int rc_when_out; /* RESIL_EREJECTED, or an error to return instead */
    int calls;
    int64_t last_n;
    resil_instant last_now;
    bool destroyed;
} quota;

static int quota_try_acquire(void *self, int64_t n, resil_instant now,
                             resil_duration *retry_after)
{
    quota *q = self;
    q->calls++;
    q->last_n = n;
    q->last_now = now;
    if (q->left >= n) {
        q->left -= n;
        return 0;
    }
    *retry_after = q->wait;
    return q->rc_when_out;
}

static int64_t quota_available(void *self, resil_instant now)
{
    (void)now;
    return ((quota *)self)->left;
}

static void quota_opts(void *self, resil_ratelimit_opts *out)
{
    out->kind = RESIL_RATELIMIT_TOKEN_BUCKET;
    out->rate = ((quota *)self)->left;
    out->period = RESIL_S(1);
    out->burst = 7;
}

static void quota_destroy(void *self) { ((quota *)self)->destroyed = true; }

static const resil_ratelimit_ops quota_ops = {
    .size = sizeof(resil_ratelimit_ops),
    .kind = "quota",
    .try_acquire = quota_try_acquire,
    .available = quota_available,
    .opts = quota_opts,
    .destroy = quota_destroy,
};

static const resil_ratelimit_ops bare_ops = {
    .size = sizeof(resil_ratelimit_ops),
    .try_acquire = quota_try_acquire,
};

typedef struct fixture {
    resil_fake_clock *fc;
    resil_clock *clock;
    quota q;
    resil_ratelimit *rl;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || resil_fake_clock_new(T0, 0, &f->fc) != 0)
        return -1;
    f->clock = resil_fake_clock_clock(f->fc);
    f->q = (quota){.left = 2, .wait = RESIL_MS(250), .rc_when_out = RESIL_EREJECTED};
    if (resil_ratelimit_new_custom(&quota_ops, &f->q, f->clock, &f->rl, NULL) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_ratelimit_free(f->rl);
    resil_fake_clock_free(f->fc);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static void a_table_without_try_acquire_is_refused_by_name(void **state)
{
    (void)state;
    resil_ratelimit_ops ops = {.size = sizeof ops};
    resil_ratelimit *rl = NULL;
    resil_err e;
    assert_int_equal(resil_ratelimit_new_custom(&ops, NULL, NULL, &rl, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "ratelimit: ops needs size and try_acquire");
    assert_null(rl);
}

static void a_table_that_does_not_reach_try_acquire_is_refused(void **state)
{
    (void)state;
    resil_ratelimit_ops ops = quota_ops;
    ops.size = offsetof(resil_ratelimit_ops, try_acquire);
    resil_ratelimit *rl = NULL;
    resil_err e;
    assert_int_equal(resil_ratelimit_new_custom(&ops, NULL, NULL, &rl, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "ratelimit: ops needs size and try_acquire");
}

static void a_table_and_out_must_be_given(void **state)
{
    (void)state;
    resil_ratelimit *rl = NULL;
    resil_err e = {0, ""};
    assert_int_equal(resil_ratelimit_new_custom(NULL, NULL, NULL, &rl, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "ratelimit: ops and out must not be NULL");
    assert_int_equal(resil_ratelimit_new_custom(&quota_ops, NULL, NULL, NULL, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "ratelimit: ops and out must not be NULL");
}

/* An implementation built against a header whose table ended after
 * try_acquire: what lies beyond its size is not read, even when set. */
static void operations_beyond_the_table_size_are_absent(void **state)
{
    fixture *f = *state;
    quota q = {.left = 3};
    resil_ratelimit_ops ops = quota_ops;
    ops.size = offsetof(resil_ratelimit_ops, available);
    resil_ratelimit *rl = NULL;
    assert_int_equal(resil_ratelimit_new_custom(&ops, &q, f->clock, &rl, NULL), 0);
    assert_int_equal(resil_ratelimit_available(rl), -1);
    assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), 0);
    resil_ratelimit_free(rl);
    assert_false(q.destroyed);
}

static void try_acquire_asks_the_implementation_at_the_handle_clock(void **state)
{
    fixture *f = *state;
    resil_duration ra = -5;
    assert_int_equal(resil_ratelimit_try_acquire(f->rl, 2, &ra), 0);
    assert_int_equal(ra, 0);
    assert_int_equal(f->q.calls, 1);
    assert_int_equal(f->q.last_n, 2);
    assert_int_equal(f->q.last_now, T0);
}

static void try_acquire_at_passes_the_caller_instant(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_ratelimit_try_acquire_at(f->rl, 1, T0 + 42, NULL), 0);
    assert_int_equal(f->q.last_now, T0 + 42);
}

static void a_rejection_carries_the_implementation_retry_after(void **state)
{
    fixture *f = *state;
    resil_duration ra = 0;
    assert_int_equal(resil_ratelimit_try_acquire(f->rl, 2, &ra), 0);
    assert_int_equal(resil_ratelimit_try_acquire(f->rl, 1, &ra), RESIL_EREJECTED);
    assert_int_equal(ra, RESIL_MS(250));
}

static void n_below_one_is_refused_without_asking_the_implementation(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_ratelimit_try_acquire(f->rl, 0, NULL), RESIL_EINVAL);
    assert_int_equal(resil_ratelimit_acquire(f->rl, -1, NULL, 0), RESIL_EINVAL);
    assert_int_equal(f->q.calls, 0);
}

static void the_handle_counts_admissions_and_rejections(void **state)
{
    fixture *f = *state;
    resil_ratelimit_try_acquire(f->rl, 1, NULL);
    resil_ratelimit_try_acquire(f->rl, 1, NULL);
    resil_ratelimit_try_acquire(f->rl, 1, NULL);
    resil_ratelimit_stats s;
    resil_ratelimit_stats_get(f->rl, &s);
    assert_int_equal(s.admitted, 2);
    assert_int_equal(s.rejected, 1);
    assert_int_equal(s.timed_out, 0);
    assert_int_equal(s.cancelled, 0);
}

static void an_undecided_step_is_neither_admitted_nor_rejected(void **state)
{
    fixture *f = *state;
    f->q.left = 0;
    f->q.rc_when_out = RESIL_EBACKEND;
    assert_int_equal(resil_ratelimit_try_acquire(f->rl, 1, NULL), RESIL_EBACKEND);
    resil_ratelimit_stats s;
    resil_ratelimit_stats_get(f->rl, &s);
    assert_int_equal(s.admitted, 0);
    assert_int_equal(s.rejected, 0);
}

static void the_blocking_acquire_sleeps_the_hint_on_the_handle_clock(void **state)
{
    fixture *f = *state;
    f->q.left = 0;
    f->q.wait = RESIL_MS(250);
    /* Out for good: three waits of 250 ms fit in 800 ms, the fourth does not. */
    assert_int_equal(resil_ratelimit_acquire(f->rl, 1, NULL, RESIL_MS(800)), RESIL_ETIMEDOUT);
    assert_int_equal(resil_clock_now(f->clock), T0 + RESIL_MS(750));
    assert_int_equal(f->q.calls, 4);
    assert_int_equal(f->q.last_now, T0 + RESIL_MS(750));
}

static void the_blocking_acquire_admits_once_the_implementation_does(void **state)
{
    fixture *f = *state;
    f->q.left = 0;
    f->q.rc_when_out = RESIL_EREJECTED;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_ratelimit_acquire(f->rl, 1, &c, 0), RESIL_ECANCELED);
    resil_cancel_destroy(&c);
    f->q.left = 1;
    assert_int_equal(resil_ratelimit_acquire(f->rl, 1, NULL, 0), 0);
    resil_ratelimit_stats s;
    resil_ratelimit_stats_get(f->rl, &s);
    assert_int_equal(s.admitted, 1);
    assert_int_equal(s.cancelled, 1);
}

static void available_and_opts_come_from_the_table(void **state)
{
    fixture *f = *state;
    assert_int_equal(resil_ratelimit_available(f->rl), 2);
    resil_ratelimit_opts o;
    resil_ratelimit_opts_get(f->rl, &o);
    assert_int_equal(o.kind, RESIL_RATELIMIT_TOKEN_BUCKET);
    assert_int_equal(o.rate, 2);
    assert_int_equal(o.burst, 7);
    assert_ptr_equal(o.clock, f->clock);
}

static void optional_operations_left_out_read_as_unknown(void **state)
{
    fixture *f = *state;
    resil_ratelimit *rl = NULL;
    assert_int_equal(resil_ratelimit_new_custom(&bare_ops, &f->q, NULL, &rl, NULL), 0);
    assert_int_equal(resil_ratelimit_available(rl), -1);
    resil_ratelimit_opts o;
    resil_ratelimit_opts_get(rl, &o);
    assert_int_equal(o.rate, 0);
    assert_null(o.clock);
    assert_string_equal(resil_ratelimit_impl_name(rl), "custom");
    resil_ratelimit_free(rl); /* no destroy: nothing to call */
    assert_false(f->q.destroyed);
}

static void impl_name_and_self_tell_the_implementations_apart(void **state)
{
    fixture *f = *state;
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_FIXED_WINDOW);
    resil_ratelimit *builtin = NULL;
    assert_int_equal(resil_ratelimit_new(&o, &builtin, NULL), 0);
    assert_string_equal(resil_ratelimit_impl_name(f->rl), "quota");
    assert_string_equal(resil_ratelimit_impl_name(builtin), "builtin");
    assert_string_equal(resil_ratelimit_impl_name(NULL), "none");
    assert_ptr_equal(resil_ratelimit_self(f->rl, &quota_ops), &f->q);
    assert_null(resil_ratelimit_self(f->rl, &bare_ops));
    assert_null(resil_ratelimit_self(builtin, &quota_ops));
    resil_ratelimit_free(builtin);
}

static void free_destroys_the_implementation(void **state)
{
    fixture *f = *state;
    resil_ratelimit_free(f->rl);
    f->rl = NULL;
    assert_true(f->q.destroyed);
}

static resil_outcome succeed(resil_attempt_ctx *ctx)
{
    (*(int *)ctx->user)++;
    return resil_ok();
}

static void a_pipeline_takes_it_and_passes_its_hint_on(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = NULL;
    assert_int_equal(resil_pipeline_builder_new("custom", &b, NULL), 0);
    resil_pipeline_builder_clock(b, f->clock);
    assert_int_equal(resil_pipeline_use_rate_limiter(b, f->rl, 0), 0);
    resil_pipeline *p = NULL;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);

    int ran = 0;
    resil_call call;
    resil_call_default(&call);
    call.user = &ran;
    resil_pipeline_result res;
    for (int i = 0; i < 3; i++)
        assert_int_equal(resil_pipeline_execute(p, succeed, &call, &res), 0);
    assert_int_equal(ran, 2);
    assert_int_equal(res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(res.rejected_by, RESIL_STRATEGY_RATE_LIMITER);
    assert_string_equal(res.outcome.detail, "rate limited");
    assert_int_equal(res.outcome.retry_after, RESIL_MS(250));
    resil_pipeline_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(a_table_without_try_acquire_is_refused_by_name),
        TEST(a_table_that_does_not_reach_try_acquire_is_refused),
        TEST(a_table_and_out_must_be_given),
        TEST(operations_beyond_the_table_size_are_absent),
        TEST(try_acquire_asks_the_implementation_at_the_handle_clock),
        TEST(try_acquire_at_passes_the_caller_instant),
        TEST(a_rejection_carries_the_implementation_retry_after),
        TEST(n_below_one_is_refused_without_asking_the_implementation),
        TEST(the_handle_counts_admissions_and_rejections),
        TEST(an_undecided_step_is_neither_admitted_nor_rejected),
        TEST(the_blocking_acquire_sleeps_the_hint_on_the_handle_clock),
        TEST(the_blocking_acquire_admits_once_the_implementation_does),
        TEST(available_and_opts_come_from_the_table),
        TEST(optional_operations_left_out_read_as_unknown),
        TEST(impl_name_and_self_tell_the_implementations_apart),
        TEST(free_destroys_the_implementation),
        TEST(a_pipeline_takes_it_and_passes_its_hint_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
