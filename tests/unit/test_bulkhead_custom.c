/*
 * test_bulkhead_custom.c — a concurrency limit of the application's own
 * behind the resil_bulkhead handle: the table's checks, what the handle does
 * around the implementation (the ticket's owner, a second release ignored,
 * the counters from the return codes), the accessors, and a pipeline taking
 * it where it takes the built-in bulkhead.
 */
#include "test.h"

/* A counter of permits: `max` at once; records what it was asked. */
typedef struct slots {
    int32_t max, in_flight;
    int rc_when_full; /* what acquire returns when full */
    resil_duration queued; /* what an admission reports as its wait */
    int acquires, releases;
    bool last_wait;
    bool destroyed;
} slots;

static int slots_acquire(void *self, resil_cancel *cancel, bool wait, resil_bulkhead_ticket *t)
{
    (void)cancel;
    slots *s = self;
    s->acquires++;
    s->last_wait = wait;
    if (s->in_flight >= s->max)
        return s->rc_when_full;
    s->in_flight++;
    t->queued = s->queued;
    return 0;
}

static void slots_release(void *self, const resil_bulkhead_ticket *t)
{
    (void)t;
    slots *s = self;
    s->releases++;
    s->in_flight--;
}

static int32_t slots_in_flight(void *self) { return ((slots *)self)->in_flight; }

static void slots_opts(void *self, resil_bulkhead_opts *out)
{
    out->max_concurrency = ((slots *)self)->max;
    out->queue = false;
}

static void slots_destroy(void *self) { ((slots *)self)->destroyed = true; }

static const resil_bulkhead_ops slots_ops = {
    .size = sizeof(resil_bulkhead_ops),
    .kind = "slots",
    .acquire = slots_acquire,
    .release = slots_release,
    .in_flight = slots_in_flight,
    .opts = slots_opts,
    .destroy = slots_destroy,
};

typedef struct fixture {
    slots s;
    resil_bulkhead *b;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    f->s = (slots){.max = 2, .rc_when_full = RESIL_EREJECTED};
    if (resil_bulkhead_new_custom(&slots_ops, &f->s, &f->b, NULL) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    resil_bulkhead_free(f->b);
    free(f);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static void a_table_without_release_is_refused_by_name(void **state)
{
    (void)state;
    resil_bulkhead_ops ops = slots_ops;
    ops.release = NULL;
    resil_bulkhead *b = NULL;
    resil_err e;
    assert_int_equal(resil_bulkhead_new_custom(&ops, NULL, &b, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "bulkhead: ops needs size, acquire and release");
    assert_null(b);
}

static void a_table_that_does_not_reach_release_is_refused(void **state)
{
    (void)state;
    resil_bulkhead_ops ops = slots_ops;
    ops.size = offsetof(resil_bulkhead_ops, release);
    resil_bulkhead *b = NULL;
    resil_err e;
    assert_int_equal(resil_bulkhead_new_custom(&ops, NULL, &b, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "bulkhead: ops needs size, acquire and release");
}

static void a_table_and_out_must_be_given(void **state)
{
    (void)state;
    resil_bulkhead *b = NULL;
    resil_err e = {0, ""};
    assert_int_equal(resil_bulkhead_new_custom(NULL, NULL, &b, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "bulkhead: ops and out must not be NULL");
    assert_int_equal(resil_bulkhead_new_custom(&slots_ops, NULL, NULL, &e), RESIL_EINVAL);
    assert_string_equal(e.message, "bulkhead: ops and out must not be NULL");
}

/* An implementation built against a header whose table ended after
 * release: what lies beyond its size is not read, even when set. */
static void operations_beyond_the_table_size_are_absent(void **state)
{
    (void)state;
    slots s = {.max = 2, .in_flight = 1, .rc_when_full = RESIL_EREJECTED};
    resil_bulkhead_ops ops = slots_ops;
    ops.size = offsetof(resil_bulkhead_ops, in_flight);
    resil_bulkhead *b = NULL;
    assert_int_equal(resil_bulkhead_new_custom(&ops, &s, &b, NULL), 0);
    assert_int_equal(resil_bulkhead_in_flight(b), 0);
    resil_bulkhead_opts o;
    resil_bulkhead_opts_get(b, &o);
    assert_int_equal(o.max_concurrency, 0);
    resil_bulkhead_free(b);
    assert_false(s.destroyed);
}

static void acquire_asks_the_implementation_and_may_wait(void **state)
{
    fixture *f = *state;
    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_acquire(f->b, NULL, &t), 0);
    assert_ptr_equal(t.owner, f->b);
    assert_true(f->s.last_wait);
    assert_int_equal(resil_bulkhead_in_flight(f->b), 1);
    resil_bulkhead_release(&t);
    assert_int_equal(resil_bulkhead_in_flight(f->b), 0);
}

static void try_acquire_asks_it_not_to_wait(void **state)
{
    fixture *f = *state;
    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_try_acquire(f->b, &t), 0);
    assert_false(f->s.last_wait);
    resil_bulkhead_release(&t);
}

static void a_refusal_leaves_a_ticket_that_release_ignores(void **state)
{
    fixture *f = *state;
    resil_bulkhead_ticket a = {0}, b = {0}, c = {.queued = 9};
    resil_bulkhead_acquire(f->b, NULL, &a);
    resil_bulkhead_acquire(f->b, NULL, &b);
    assert_int_equal(resil_bulkhead_acquire(f->b, NULL, &c), RESIL_EREJECTED);
    assert_null(c.owner);
    assert_int_equal(c.queued, 0);
    resil_bulkhead_release(&c);
    assert_int_equal(f->s.releases, 0);
    resil_bulkhead_release(&a);
    resil_bulkhead_release(&b);
}

static void releasing_twice_gives_back_one_permit(void **state)
{
    fixture *f = *state;
    resil_bulkhead_ticket t = {0};
    resil_bulkhead_acquire(f->b, NULL, &t);
    resil_bulkhead_release(&t);
    resil_bulkhead_release(&t);
    assert_int_equal(f->s.releases, 1);
    assert_int_equal(f->s.in_flight, 0);
}

static void the_handle_counts_each_ending_from_the_codes(void **state)
{
    fixture *f = *state;
    resil_bulkhead_ticket t[5] = {{0}};
    f->s.queued = RESIL_MS(3);
    resil_bulkhead_acquire(f->b, NULL, &t[0]);
    f->s.queued = 0;
    resil_bulkhead_try_acquire(f->b, &t[1]);
    resil_bulkhead_acquire(f->b, NULL, &t[2]);
    f->s.rc_when_full = RESIL_ETIMEDOUT;
    resil_bulkhead_acquire(f->b, NULL, &t[3]);
    f->s.rc_when_full = RESIL_ECANCELED;
    resil_bulkhead_acquire(f->b, NULL, &t[4]);
    resil_bulkhead_stats s;
    resil_bulkhead_stats_get(f->b, &s);
    assert_int_equal(s.admitted, 2);
    assert_int_equal(s.queued, 1);
    assert_int_equal(s.rejected, 1);
    assert_int_equal(s.timed_out, 1);
    assert_int_equal(s.cancelled, 1);
    assert_int_equal(t[0].queued, RESIL_MS(3));
    for (int i = 0; i < 5; i++)
        resil_bulkhead_release(&t[i]);
}

static void a_fired_token_is_refused_before_the_implementation_is_asked(void **state)
{
    fixture *f = *state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_acquire(f->b, &c, &t), RESIL_ECANCELED);
    assert_int_equal(f->s.acquires, 0);
    resil_cancel_destroy(&c);
}

static void opts_and_snapshots_come_from_the_table(void **state)
{
    fixture *f = *state;
    resil_bulkhead_opts o;
    resil_bulkhead_opts_get(f->b, &o);
    assert_int_equal(o.max_concurrency, 2);
    assert_false(o.queue);
    assert_int_equal(resil_bulkhead_queued(f->b), 0); /* no queued op: 0 */
}

static void impl_name_and_self_tell_the_implementations_apart(void **state)
{
    fixture *f = *state;
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    resil_bulkhead *builtin = NULL;
    assert_int_equal(resil_bulkhead_new(&o, &builtin, NULL), 0);
    assert_string_equal(resil_bulkhead_impl_name(f->b), "slots");
    assert_string_equal(resil_bulkhead_impl_name(builtin), "builtin");
    assert_string_equal(resil_bulkhead_impl_name(NULL), "none");
    assert_ptr_equal(resil_bulkhead_self(f->b, &slots_ops), &f->s);
    assert_null(resil_bulkhead_self(builtin, &slots_ops));
    resil_bulkhead_free(builtin);
}

static void free_destroys_the_implementation(void **state)
{
    fixture *f = *state;
    resil_bulkhead_free(f->b);
    f->b = NULL;
    assert_true(f->s.destroyed);
}

static resil_outcome hold_and_try_another(resil_attempt_ctx *ctx)
{
    slots *s = ctx->user;
    return s->in_flight == 1 ? resil_ok() : resil_fail(RESIL_PERMANENT, 1, "not held");
}

static void a_pipeline_takes_it_and_gives_the_permit_back(void **state)
{
    fixture *f = *state;
    resil_pipeline_builder *b = NULL;
    assert_int_equal(resil_pipeline_builder_new("custom", &b, NULL), 0);
    assert_int_equal(resil_pipeline_use_bulkhead(b, f->b), 0);
    resil_pipeline *p = NULL;
    assert_int_equal(resil_pipeline_build(b, &p, NULL), 0);
    resil_pipeline_builder_free(b);

    resil_call call;
    resil_call_default(&call);
    call.user = &f->s;
    resil_pipeline_result res;
    assert_int_equal(resil_pipeline_execute(p, hold_and_try_another, &call, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(f->s.in_flight, 0);
    assert_int_equal(f->s.releases, 1);

    f->s.max = 0;
    assert_int_equal(resil_pipeline_execute(p, hold_and_try_another, &call, &res), 0);
    assert_int_equal(res.rejected_by, RESIL_STRATEGY_BULKHEAD);
    assert_string_equal(res.outcome.detail, "bulkhead full");
    resil_pipeline_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(a_table_without_release_is_refused_by_name),
        TEST(a_table_that_does_not_reach_release_is_refused),
        TEST(a_table_and_out_must_be_given),
        TEST(operations_beyond_the_table_size_are_absent),
        TEST(acquire_asks_the_implementation_and_may_wait),
        TEST(try_acquire_asks_it_not_to_wait),
        TEST(a_refusal_leaves_a_ticket_that_release_ignores),
        TEST(releasing_twice_gives_back_one_permit),
        TEST(the_handle_counts_each_ending_from_the_codes),
        TEST(a_fired_token_is_refused_before_the_implementation_is_asked),
        TEST(opts_and_snapshots_come_from_the_table),
        TEST(impl_name_and_self_tell_the_implementations_apart),
        TEST(free_destroys_the_implementation),
        TEST(a_pipeline_takes_it_and_gives_the_permit_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
