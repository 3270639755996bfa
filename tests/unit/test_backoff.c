/*
 * test_backoff.c — the backoff formulas, jitter modes and cap, stated as
 * exact waits. Every random draw comes from a scripted source, so each
 * expected value is the formula worked by hand (or, for Polly's curve, the
 * figure Polly itself prints).
 */
#include <math.h>
#include <pthread.h>

#include "test.h"

#define BELOW_ONE 0x1.fffffffffffffp-1

/* ---- helpers -------------------------------------------------------------- */

/* A source that always draws the same value and counts its draws. */
typedef struct counting_rng {
    resil_rng base;
    double value;
    size_t draws;
} counting_rng;

static double counting_next(resil_rng *r)
{
    counting_rng *c = (counting_rng *)r;
    c->draws++;
    return c->value;
}

static resil_rng *counting(counting_rng *c, double value)
{
    c->base.next_double = counting_next;
    c->value = value;
    c->draws = 0;
    return &c->base;
}

static resil_rng *scripted(resil_rng_scripted *r, const double *values, size_t n)
{
    resil_rng_scripted_init(r, values, n);
    return &r->base;
}

#define DOUBLES(...) ((const double[]){__VA_ARGS__})
#define NDOUBLES(...) (sizeof(DOUBLES(__VA_ARGS__)) / sizeof(double))
#define SCRIPT(r, ...) scripted(&(r), DOUBLES(__VA_ARGS__), NDOUBLES(__VA_ARGS__))

static resil_backoff backoff(resil_backoff_kind kind, resil_duration base,
                             resil_jitter jitter, resil_duration max_delay)
{
    resil_backoff b;
    resil_backoff_default(&b);
    b.kind = kind;
    b.base = base;
    b.jitter = jitter;
    b.max_delay = max_delay;
    return b;
}

static resil_duration delay_with(const resil_backoff *b, uint32_t n, double u)
{
    resil_rng_scripted r;
    return resil_backoff_delay(b, n, NULL, SCRIPT(r, u));
}

static void assert_rejected(const resil_backoff *b, const char *message)
{
    resil_err err = {0, ""};
    assert_int_equal(resil_backoff_validate(b, &err), RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
}

#define NO_CAP RESIL_DURATION_MAX

/* ---- defaults and validation ---------------------------------------------- */

static void default_is_exponential_1s_doubling_full_jitter_capped_at_30s(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    assert_int_equal(b.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_duration_equal(b.base, RESIL_S(1));
    assert_true(b.factor == 2.0);
    assert_int_equal(b.jitter, RESIL_JITTER_FULL);
    assert_true(b.jitter_fraction == 0.25);
    assert_duration_equal(b.max_delay, RESIL_S(30));
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
}

static void validate_rejects_null(void **state)
{
    (void)state;
    resil_err err;
    assert_int_equal(resil_backoff_validate(NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "backoff must not be NULL");
}

static void validate_rejects_unknown_kind(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.kind = (resil_backoff_kind)7;
    assert_rejected(&b, "backoff.kind must be constant, linear, exponential, fibonacci or list, got 7");
}

static void validate_rejects_negative_base(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.base = -1;
    assert_rejected(&b, "backoff.base must be >= 0, got -1ns");
}

static void validate_accepts_zero_base(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.base = 0;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
}

static void validate_rejects_factor_below_one(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.factor = 0.5;
    assert_rejected(&b, "backoff.factor must be a finite number >= 1, got 0.5");
}

static void validate_rejects_non_finite_factor(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.factor = NAN;
    assert_rejected(&b, "backoff.factor must be a finite number >= 1, got nan");
    b.factor = INFINITY;
    assert_rejected(&b, "backoff.factor must be a finite number >= 1, got inf");
}

static void validate_accepts_factor_one(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.factor = 1.0;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
}

static void validate_rejects_unknown_jitter(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.jitter = (resil_jitter)-1;
    assert_rejected(&b, "backoff.jitter must be none, full, equal, decorrelated, proportional "
                        "or polly, got -1");
}

static void validate_rejects_fraction_outside_zero_one(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.jitter_fraction = -0.01;
    assert_rejected(&b, "backoff.jitter_fraction must be in [0,1], got -0.01");
    b.jitter_fraction = 1.5;
    assert_rejected(&b, "backoff.jitter_fraction must be in [0,1], got 1.5");
    b.jitter_fraction = NAN;
    assert_rejected(&b, "backoff.jitter_fraction must be in [0,1], got nan");
}

static void validate_accepts_fraction_zero_and_one(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.jitter_fraction = 0.0;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
    b.jitter_fraction = 1.0;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
}

static void validate_rejects_negative_max_delay(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.max_delay = RESIL_MS(-5);
    assert_rejected(&b, "backoff.max_delay must be >= 0, got -5ms");
}

static void validate_accepts_zero_and_no_max_delay(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.max_delay = 0;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
    b.max_delay = NO_CAP;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
}

static void validate_rejects_polly_exponential_not_doubling(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    b.factor = 3.0;
    assert_rejected(&b, "backoff.factor must be 2 with polly jitter on exponential backoff "
                        "(Polly's formula doubles), got 3");
    b.kind = RESIL_BACKOFF_LINEAR;
    assert_int_equal(resil_backoff_validate(&b, NULL), 0);
}

static void validate_reports_the_first_bad_field(void **state)
{
    (void)state;
    resil_backoff b;
    resil_backoff_default(&b);
    b.base = -1;
    b.factor = 0;
    b.max_delay = -1;
    assert_rejected(&b, "backoff.base must be >= 0, got -1ns");
}

/* ---- base formulas -------------------------------------------------------- */

static void constant_waits_base_after_every_failure(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_MS(200), RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_delay(&b, 1, NULL, NULL), RESIL_MS(200));
    assert_duration_equal(resil_backoff_delay(&b, 2, NULL, NULL), RESIL_MS(200));
    assert_duration_equal(resil_backoff_delay(&b, 50, NULL, NULL), RESIL_MS(200));
}

static void linear_waits_base_times_n(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_MS(200), RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_delay(&b, 1, NULL, NULL), RESIL_MS(200));
    assert_duration_equal(resil_backoff_delay(&b, 2, NULL, NULL), RESIL_MS(400));
    assert_duration_equal(resil_backoff_delay(&b, 7, NULL, NULL), RESIL_MS(1400));
}

static void exponential_multiplies_by_factor_per_failure(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_delay(&b, 1, NULL, NULL), RESIL_S(1));
    assert_duration_equal(resil_backoff_delay(&b, 2, NULL, NULL), RESIL_S(2));
    assert_duration_equal(resil_backoff_delay(&b, 3, NULL, NULL), RESIL_S(4));
    assert_duration_equal(resil_backoff_delay(&b, 4, NULL, NULL), RESIL_S(8));
}

static void exponential_takes_a_fractional_factor(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_NONE, NO_CAP);
    b.factor = 1.5;
    assert_duration_equal(resil_backoff_delay(&b, 2, NULL, NULL), RESIL_MS(150));
    assert_duration_equal(resil_backoff_delay(&b, 3, NULL, NULL), RESIL_MS(225));
}

static void exponential_with_factor_one_is_constant(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_NONE, NO_CAP);
    b.factor = 1.0;
    assert_duration_equal(resil_backoff_delay(&b, 1, NULL, NULL), RESIL_MS(100));
    assert_duration_equal(resil_backoff_delay(&b, UINT32_MAX, NULL, NULL), RESIL_MS(100));
}

static void fibonacci_follows_1_1_2_3_5_8(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_FIBONACCI, RESIL_MS(100), RESIL_JITTER_NONE, NO_CAP);
    const int64_t fib[] = {1, 1, 2, 3, 5, 8, 13, 21};
    for (uint32_t n = 1; n <= 8; n++)
        assert_duration_equal(resil_backoff_delay(&b, n, NULL, NULL), RESIL_MS(100) * fib[n - 1]);
}

static void fibonacci_92_fits_and_93_saturates(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_FIBONACCI, 1, RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_base_delay(&b, 92), INT64_C(7540113804746346429));
    assert_duration_equal(resil_backoff_base_delay(&b, 93), RESIL_DURATION_MAX);
    assert_duration_equal(resil_backoff_base_delay(&b, UINT32_MAX), RESIL_DURATION_MAX);
}

static void n_zero_is_treated_as_one(void **state)
{
    (void)state;
    for (int k = RESIL_BACKOFF_CONSTANT; k <= RESIL_BACKOFF_FIBONACCI; k++) {
        resil_backoff b = backoff((resil_backoff_kind)k, RESIL_MS(300), RESIL_JITTER_NONE, NO_CAP);
        assert_duration_equal(resil_backoff_base_delay(&b, 0), RESIL_MS(300));
        assert_duration_equal(resil_backoff_delay(&b, 0, NULL, NULL), RESIL_MS(300));
        assert_duration_equal(resil_backoff_max_delay(&b, 0), RESIL_MS(300));
    }
}

static void linear_saturates_instead_of_wrapping(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_S(1), RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_base_delay(&b, UINT32_MAX), INT64_C(4294967295000000000));
    b.base = RESIL_S(3);
    assert_duration_equal(resil_backoff_base_delay(&b, UINT32_MAX), RESIL_DURATION_MAX);
}

static void exponential_saturates_instead_of_wrapping(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_base_delay(&b, 34), RESIL_S(1) << 33);
    assert_duration_equal(resil_backoff_base_delay(&b, 35), RESIL_DURATION_MAX);
    assert_duration_equal(resil_backoff_base_delay(&b, 10000), RESIL_DURATION_MAX);
    assert_duration_equal(resil_backoff_base_delay(&b, UINT32_MAX), RESIL_DURATION_MAX);
}

static void zero_base_waits_zero_for_every_kind_and_jitter(void **state)
{
    (void)state;
    for (int k = RESIL_BACKOFF_CONSTANT; k <= RESIL_BACKOFF_FIBONACCI; k++) {
        for (int j = RESIL_JITTER_NONE; j <= RESIL_JITTER_POLLY; j++) {
            resil_backoff b = backoff((resil_backoff_kind)k, 0, (resil_jitter)j, NO_CAP);
            resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
            resil_rng_scripted r;
            resil_rng *rng = SCRIPT(r, 0.0, 0.5, BELOW_ONE);
            for (uint32_t n = 1; n <= 3; n++)
                assert_duration_equal(resil_backoff_delay(&b, n, &st, rng), 0);
            assert_duration_equal(resil_backoff_max_delay(&b, 3), 0);
        }
    }
}

/* ---- max_delay ------------------------------------------------------------ */

static void attempt_10000_at_1s_doubling_gives_exactly_the_cap(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_NONE, RESIL_S(30));
    assert_duration_equal(resil_backoff_delay(&b, 10000, NULL, NULL), RESIL_S(30));
    assert_duration_equal(resil_backoff_delay(&b, UINT32_MAX, NULL, NULL), RESIL_S(30));
}

static void cap_applies_to_every_kind(void **state)
{
    (void)state;
    for (int k = RESIL_BACKOFF_CONSTANT; k <= RESIL_BACKOFF_FIBONACCI; k++) {
        resil_backoff b = backoff((resil_backoff_kind)k, RESIL_S(5), RESIL_JITTER_NONE, RESIL_S(2));
        assert_duration_equal(resil_backoff_delay(&b, 1, NULL, NULL), RESIL_S(2));
        assert_duration_equal(resil_backoff_delay(&b, UINT32_MAX, NULL, NULL), RESIL_S(2));
    }
}

static void no_cap_saturates_at_duration_max(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_NONE, NO_CAP);
    assert_duration_equal(resil_backoff_delay(&b, 10000, NULL, NULL), RESIL_DURATION_MAX);
}

static void zero_max_delay_waits_zero(void **state)
{
    (void)state;
    for (int j = RESIL_JITTER_NONE; j <= RESIL_JITTER_POLLY; j++) {
        resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), (resil_jitter)j, 0);
        assert_duration_equal(delay_with(&b, 3, 0.5), 0);
        assert_duration_equal(resil_backoff_max_delay(&b, 3), 0);
    }
}

static void cap_applies_before_full_jitter_so_huge_n_still_spreads(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_FULL, RESIL_S(30));
    assert_duration_equal(delay_with(&b, 10000, 0.5), RESIL_S(15));
    assert_duration_equal(delay_with(&b, UINT32_MAX, 0.1), RESIL_S(3));
}

/* ---- jitter: none, full, equal -------------------------------------------- */

static void no_jitter_draws_nothing(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_MS(10), RESIL_JITTER_NONE, NO_CAP);
    counting_rng c;
    assert_duration_equal(resil_backoff_delay(&b, 3, NULL, counting(&c, 0.5)), RESIL_MS(30));
    assert_int_equal(c.draws, 0);
    assert_duration_equal(resil_backoff_delay(&b, 3, NULL, NULL), RESIL_MS(30));
}

static void every_random_jitter_draws_exactly_once_per_wait(void **state)
{
    (void)state;
    for (int j = RESIL_JITTER_FULL; j <= RESIL_JITTER_POLLY; j++) {
        resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(10), (resil_jitter)j, NO_CAP);
        resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
        counting_rng c;
        resil_rng *rng = counting(&c, 0.5);
        for (uint32_t n = 1; n <= 4; n++)
            resil_backoff_delay(&b, n, &st, rng);
        assert_int_equal(c.draws, 4);
    }
}

static void full_jitter_is_draw_times_formula(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_FULL, NO_CAP);
    assert_duration_equal(delay_with(&b, 3, 0.25), RESIL_MS(100));
    assert_duration_equal(delay_with(&b, 1, 0.0), 0);
}

static void full_jitter_stays_below_the_formula(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_FULL, NO_CAP);
    assert_duration_equal(delay_with(&b, 3, BELOW_ONE), RESIL_MS(400) - 1);
    assert_duration_equal(delay_with(&b, 3, 1.0), RESIL_MS(400) - 1);
    b.max_delay = RESIL_DURATION_MAX - 1;
    assert_true(delay_with(&b, 200, 1.0) < RESIL_DURATION_MAX - 1);
}

static void out_of_range_draws_are_clamped_into_zero_one(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_FULL, NO_CAP);
    assert_duration_equal(delay_with(&b, 1, -3.0), 0);
    assert_duration_equal(delay_with(&b, 1, NAN), 0);
    assert_duration_equal(delay_with(&b, 1, 7.0), RESIL_S(1) - 1);
}

/* The Retry Pattern article's C# example: full jitter of exponential 100 ms
 * capped at 2000 ms, the draws of .NET's new Random(42), truncated to ms. */
static void golden_full_jitter_schedule(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_FULL,
                              RESIL_MS(2000));
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.6681064659115423, 0.14090729837348093, 0.12551828945312568,
                            0.5227642760252413, 0.16843422416990353, 0.26259267528662117,
                            0.7244083647264207);
    const uint32_t n[] = {1, 2, 1, 2, 3, 1, 1};
    const int64_t ms[] = {66, 28, 12, 104, 67, 26, 72};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(resil_backoff_delay(&b, n[i], NULL, rng) / RESIL_MS(1), ms[i]);
}

static void golden_formula_draws_from_the_capped_ceiling(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_FULL,
                              RESIL_MS(2000));
    assert_duration_equal(delay_with(&b, 6, 0.5), RESIL_MS(1000));
}

static void equal_jitter_is_half_plus_draw_times_half(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_EQUAL, NO_CAP);
    assert_duration_equal(delay_with(&b, 1, 0.0), RESIL_MS(500));
    assert_duration_equal(delay_with(&b, 1, 0.5), RESIL_MS(750));
    assert_duration_equal(delay_with(&b, 1, 1.0), RESIL_S(1) - 1);
}

static void equal_jitter_rounds_the_fixed_half_up(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, 3, RESIL_JITTER_EQUAL, NO_CAP);
    assert_duration_equal(delay_with(&b, 1, 0.0), 2);
}

/* ---- jitter: decorrelated ------------------------------------------------- */

static void decorrelated_first_wait_draws_from_base_to_three_base(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_DECORRELATED,
                              NO_CAP);
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    assert_duration_equal(resil_backoff_delay(&b, 1, &st, SCRIPT(r, 0.5)), RESIL_MS(200));
    assert_duration_equal(st.previous, RESIL_MS(200));
}

static void decorrelated_grows_from_the_previous_wait(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_DECORRELATED,
                              NO_CAP);
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.5, 0.5, 0.0);
    assert_duration_equal(resil_backoff_delay(&b, 1, &st, rng), RESIL_MS(200));
    assert_duration_equal(resil_backoff_delay(&b, 2, &st, rng), RESIL_MS(350));
    assert_duration_equal(resil_backoff_delay(&b, 3, &st, rng), RESIL_MS(100));
}

static void decorrelated_is_capped_and_remembers_the_cap(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_DECORRELATED,
                              RESIL_MS(250));
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.9, 0.5);
    assert_duration_equal(resil_backoff_delay(&b, 1, &st, rng), RESIL_MS(250));
    assert_duration_equal(st.previous, RESIL_MS(250));
    assert_duration_equal(resil_backoff_delay(&b, 2, &st, rng), RESIL_MS(250));
}

static void decorrelated_with_cap_below_base_waits_the_cap(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_DECORRELATED,
                              RESIL_MS(10));
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.0);
    assert_duration_equal(resil_backoff_delay(&b, 1, &st, rng), RESIL_MS(10));
    assert_duration_equal(resil_backoff_delay(&b, 2, &st, rng), RESIL_MS(10));
}

static void decorrelated_ignores_the_kind(void **state)
{
    (void)state;
    for (int k = RESIL_BACKOFF_CONSTANT; k <= RESIL_BACKOFF_FIBONACCI; k++) {
        resil_backoff b = backoff((resil_backoff_kind)k, RESIL_MS(100), RESIL_JITTER_DECORRELATED,
                                  NO_CAP);
        assert_duration_equal(delay_with(&b, 5, 0.25), RESIL_MS(150));
    }
}

static void decorrelated_without_state_starts_from_base_each_time(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(100), RESIL_JITTER_DECORRELATED,
                              NO_CAP);
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.5);
    assert_duration_equal(resil_backoff_delay(&b, 1, NULL, rng), RESIL_MS(200));
    assert_duration_equal(resil_backoff_delay(&b, 2, NULL, rng), RESIL_MS(200));
}

static void decorrelated_without_cap_saturates(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_DECORRELATED,
                              NO_CAP);
    resil_backoff_state st = {.previous = RESIL_DURATION_MAX / 2, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 1.0);
    resil_duration d = resil_backoff_delay(&b, 60, &st, rng);
    assert_true(d > RESIL_DURATION_MAX / 2);
    assert_true(d < RESIL_DURATION_MAX);
    d = resil_backoff_delay(&b, 61, &st, rng);
    assert_true(d > RESIL_DURATION_MAX / 2 && d < RESIL_DURATION_MAX);
}

/* ---- jitter: proportional ------------------------------------------------- */

static void proportional_spreads_the_formula_by_the_fraction(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_PROPORTIONAL, NO_CAP);
    assert_duration_equal(delay_with(&b, 1, 0.0), RESIL_MS(750));
    assert_duration_equal(delay_with(&b, 1, 0.5), RESIL_S(1));
    assert_duration_equal(delay_with(&b, 1, 0.75), RESIL_MS(1125));
}

static void proportional_with_fraction_zero_is_the_formula(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_S(1), RESIL_JITTER_PROPORTIONAL, NO_CAP);
    b.jitter_fraction = 0.0;
    assert_duration_equal(delay_with(&b, 3, 0.9), RESIL_S(3));
}

static void proportional_with_fraction_one_spans_zero_to_double(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_PROPORTIONAL, NO_CAP);
    b.jitter_fraction = 1.0;
    assert_duration_equal(delay_with(&b, 1, 0.0), 0);
    assert_duration_equal(delay_with(&b, 1, 0.75), RESIL_MS(1500));
}

static void proportional_is_capped_after_jitter(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_PROPORTIONAL,
                              RESIL_S(1));
    b.jitter_fraction = 0.5;
    assert_duration_equal(delay_with(&b, 1, 0.9), RESIL_S(1));
    assert_duration_equal(delay_with(&b, 1, 0.0), RESIL_MS(500));
}

/* ---- jitter: polly -------------------------------------------------------- */

static void polly_constant_is_plus_minus_25_percent(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    assert_duration_equal(delay_with(&b, 4, 0.0), RESIL_MS(750));
    assert_duration_equal(delay_with(&b, 4, 0.5), RESIL_S(1));
    assert_duration_equal(delay_with(&b, 4, 0.75), RESIL_MS(1125));
}

static void polly_linear_jitters_base_times_n(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    assert_duration_equal(delay_with(&b, 3, 0.0), RESIL_MS(2250));
    assert_duration_equal(delay_with(&b, 3, 0.5), RESIL_S(3));
}

static void polly_fibonacci_gets_the_same_plus_minus_25_percent(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_FIBONACCI, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    assert_duration_equal(delay_with(&b, 5, 0.0), RESIL_MS(3750));
}

static void polly_jitters_the_raw_formula_then_caps(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_S(2), RESIL_JITTER_POLLY, RESIL_MS(1800));
    assert_duration_equal(delay_with(&b, 1, 0.0), RESIL_MS(1500));
    assert_duration_equal(delay_with(&b, 1, 0.5), RESIL_MS(1800));
}

/* The parity check: the figures Polly v8 produces for base 1 s with
 * every draw 0.5 and its state carried through one execution. */
static void polly_exponential_matches_decorrelated_jitter_backoff_v2(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.5);
    const double expected_ms[] = {897.40, 1093.00, 2035.75, 4045.98, 8083.63};
    for (uint32_t attempt = 0; attempt < 5; attempt++) {
        resil_duration d = resil_backoff_delay(&b, attempt + 1, &st, rng);
        assert_near(resil_dur_to_ms(d), expected_ms[attempt], 0.01);
    }
}

static void polly_exponential_without_state_does_not_subtract(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    assert_near(resil_dur_to_ms(delay_with(&b, 1, 0.5)), 897.40, 0.01);
    assert_near(resil_dur_to_ms(delay_with(&b, 2, 0.5)), 1990.41, 0.01);
}

static void polly_exponential_stale_state_gives_zero_not_negative(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    resil_backoff_state st = {.previous = 0, .polly_previous = 1e6};
    resil_rng_scripted r;
    assert_duration_equal(resil_backoff_delay(&b, 1, &st, SCRIPT(r, 0.5)), 0);
}

static void polly_exponential_past_double_range_gives_the_cap(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_POLLY, RESIL_S(30));
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.5);
    assert_duration_equal(resil_backoff_delay(&b, 70, &st, rng), RESIL_S(30));
    assert_duration_equal(resil_backoff_delay(&b, 1025, &st, rng), RESIL_S(30));
    assert_true(isinf(st.polly_previous));
    assert_duration_equal(resil_backoff_delay(&b, 1026, &st, rng), RESIL_S(30));
    assert_duration_equal(resil_backoff_delay(&b, UINT32_MAX, &st, rng), RESIL_S(30));
}

static void polly_exponential_without_cap_saturates(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    resil_rng *rng = SCRIPT(r, 0.5);
    assert_duration_equal(resil_backoff_delay(&b, 70, &st, rng), RESIL_DURATION_MAX);
    assert_duration_equal(resil_backoff_delay(&b, 2000, &st, rng), RESIL_DURATION_MAX);
    assert_duration_equal(resil_backoff_delay(&b, 2001, &st, rng), RESIL_DURATION_MAX);
}

static void polly_zero_base_leaves_the_state_alone(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, 0, RESIL_JITTER_POLLY, NO_CAP);
    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
    resil_rng_scripted r;
    assert_duration_equal(resil_backoff_delay(&b, 3, &st, SCRIPT(r, 0.5)), 0);
    assert_true(st.polly_previous == 0.0);
}

/* ---- upper bounds --------------------------------------------------------- */

static void max_delay_of_none_full_and_equal_is_the_capped_formula(void **state)
{
    (void)state;
    const resil_jitter modes[] = {RESIL_JITTER_NONE, RESIL_JITTER_FULL, RESIL_JITTER_EQUAL};
    for (size_t i = 0; i < 3; i++) {
        resil_backoff b = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_S(1), modes[i], RESIL_S(30));
        assert_duration_equal(resil_backoff_max_delay(&b, 3), RESIL_S(4));
        assert_duration_equal(resil_backoff_max_delay(&b, 10000), RESIL_S(30));
    }
}

static void max_delay_of_proportional_is_one_plus_fraction(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_S(1), RESIL_JITTER_PROPORTIONAL, RESIL_S(5));
    assert_duration_equal(resil_backoff_max_delay(&b, 2), RESIL_MS(2500));
    assert_duration_equal(resil_backoff_max_delay(&b, 4), RESIL_S(5));
}

static void max_delay_of_decorrelated_is_base_times_three_to_the_n(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_CONSTANT, RESIL_MS(100), RESIL_JITTER_DECORRELATED,
                              RESIL_S(30));
    assert_duration_equal(resil_backoff_max_delay(&b, 1), RESIL_MS(300));
    assert_duration_equal(resil_backoff_max_delay(&b, 3), RESIL_MS(2700));
    assert_duration_equal(resil_backoff_max_delay(&b, UINT32_MAX), RESIL_S(30));
}

static void max_delay_of_polly(void **state)
{
    (void)state;
    resil_backoff b = backoff(RESIL_BACKOFF_LINEAR, RESIL_S(1), RESIL_JITTER_POLLY, NO_CAP);
    assert_duration_equal(resil_backoff_max_delay(&b, 2), RESIL_MS(2500));
    b.kind = RESIL_BACKOFF_EXPONENTIAL;
    assert_near(resil_dur_to_ms(resil_backoff_max_delay(&b, 1)), 1377.18, 0.01);
    assert_duration_equal(resil_backoff_max_delay(&b, UINT32_MAX), RESIL_DURATION_MAX);
}

/* xorshift64*, so the property test below covers many draws repeatably. */
typedef struct sweep_rng {
    resil_rng base;
    uint64_t s;
} sweep_rng;

static double sweep_next(resil_rng *r)
{
    sweep_rng *x = (sweep_rng *)r;
    x->s ^= x->s >> 12;
    x->s ^= x->s << 25;
    x->s ^= x->s >> 27;
    return (double)((x->s * UINT64_C(2685821657736338717)) >> 11) * 0x1p-53;
}

static void every_wait_lies_between_zero_and_max_delay(void **state)
{
    (void)state;
    const resil_duration caps[] = {0, RESIL_MS(1), RESIL_S(30), NO_CAP};
    for (int k = RESIL_BACKOFF_CONSTANT; k <= RESIL_BACKOFF_FIBONACCI; k++) {
        for (int j = RESIL_JITTER_NONE; j <= RESIL_JITTER_POLLY; j++) {
            for (size_t c = 0; c < 4; c++) {
                resil_backoff b = backoff((resil_backoff_kind)k, RESIL_MS(7), (resil_jitter)j, caps[c]);
                sweep_rng rng = {{sweep_next}, UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)(k * 31 + j)};
                for (int run = 0; run < 20; run++) {
                    resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
                    for (uint32_t n = 1; n <= 80; n++) {
                        resil_duration d = resil_backoff_delay(&b, n, &st, &rng.base);
                        assert_true(d >= 0);
                        assert_true(d <= resil_backoff_max_delay(&b, n));
                    }
                }
            }
        }
    }
}

/* Without an rng each thread draws from its own generator, and the
 * functions keep no state of their own: run under TSan, this is the proof. */
static void *waits_from_the_thread_generator(void *arg)
{
    const resil_backoff *b = arg;
    for (int run = 0; run < 500; run++) {
        resil_backoff_state st = {.previous = 0, .polly_previous = 0.0};
        for (uint32_t n = 1; n <= 10; n++) {
            resil_duration d = resil_backoff_delay(b, n, &st, NULL);
            if (d < 0 || d > resil_backoff_max_delay(b, n))
                return (void *)1;
        }
    }
    return NULL;
}

static void threads_without_an_rng_draw_independently(void **state)
{
    (void)state;
    enum { THREADS = 4 };
    resil_backoff b[THREADS];
    const resil_jitter modes[THREADS] = {RESIL_JITTER_FULL, RESIL_JITTER_DECORRELATED,
                                         RESIL_JITTER_POLLY, RESIL_JITTER_EQUAL};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        b[i] = backoff(RESIL_BACKOFF_EXPONENTIAL, RESIL_MS(10), modes[i], RESIL_S(5));
        assert_int_equal(pthread_create(&t[i], NULL, waits_from_the_thread_generator, &b[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *failed = (void *)1;
        assert_int_equal(pthread_join(t[i], &failed), 0);
        assert_null(failed);
    }
}

/* ---- names ---------------------------------------------------------------- */

static void kind_names_round_trip(void **state)
{
    (void)state;
    for (int k = RESIL_BACKOFF_CONSTANT; k <= RESIL_BACKOFF_FIBONACCI; k++) {
        resil_backoff_kind parsed = RESIL_BACKOFF_CONSTANT;
        assert_int_equal(resil_backoff_kind_parse(resil_backoff_kind_name((resil_backoff_kind)k),
                                                  &parsed),
                         0);
        assert_int_equal(parsed, k);
    }
    assert_string_equal(resil_backoff_kind_name(RESIL_BACKOFF_FIBONACCI), "fibonacci");
}

static void jitter_names_round_trip(void **state)
{
    (void)state;
    for (int j = RESIL_JITTER_NONE; j <= RESIL_JITTER_POLLY; j++) {
        resil_jitter parsed = RESIL_JITTER_NONE;
        assert_int_equal(resil_jitter_parse(resil_jitter_name((resil_jitter)j), &parsed), 0);
        assert_int_equal(parsed, j);
    }
    assert_string_equal(resil_jitter_name(RESIL_JITTER_DECORRELATED), "decorrelated");
}

static void names_parse_ignoring_ascii_case(void **state)
{
    (void)state;
    resil_backoff_kind k;
    resil_jitter j;
    assert_int_equal(resil_backoff_kind_parse("Exponential", &k), 0);
    assert_int_equal(k, RESIL_BACKOFF_EXPONENTIAL);
    assert_int_equal(resil_jitter_parse("POLLY", &j), 0);
    assert_int_equal(j, RESIL_JITTER_POLLY);
}

static void unknown_names_are_rejected(void **state)
{
    (void)state;
    resil_backoff_kind k = RESIL_BACKOFF_LINEAR;
    resil_jitter j = RESIL_JITTER_EQUAL;
    assert_int_equal(resil_backoff_kind_parse("quadratic", &k), RESIL_EINVAL);
    assert_int_equal(resil_backoff_kind_parse("", &k), RESIL_EINVAL);
    assert_int_equal(resil_backoff_kind_parse("linear ", &k), RESIL_EINVAL);
    assert_int_equal(resil_backoff_kind_parse(NULL, &k), RESIL_EINVAL);
    assert_int_equal(k, RESIL_BACKOFF_LINEAR);
    assert_int_equal(resil_jitter_parse("ful", &j), RESIL_EINVAL);
    assert_int_equal(resil_jitter_parse(NULL, &j), RESIL_EINVAL);
    assert_int_equal(j, RESIL_JITTER_EQUAL);
}

static void unknown_values_are_named_unknown(void **state)
{
    (void)state;
    assert_string_equal(resil_backoff_kind_name((resil_backoff_kind)42), "unknown");
    assert_string_equal(resil_jitter_name((resil_jitter)-1), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_is_exponential_1s_doubling_full_jitter_capped_at_30s),
        cmocka_unit_test(validate_rejects_null),
        cmocka_unit_test(validate_rejects_unknown_kind),
        cmocka_unit_test(validate_rejects_negative_base),
        cmocka_unit_test(validate_accepts_zero_base),
        cmocka_unit_test(validate_rejects_factor_below_one),
        cmocka_unit_test(validate_rejects_non_finite_factor),
        cmocka_unit_test(validate_accepts_factor_one),
        cmocka_unit_test(validate_rejects_unknown_jitter),
        cmocka_unit_test(validate_rejects_fraction_outside_zero_one),
        cmocka_unit_test(validate_accepts_fraction_zero_and_one),
        cmocka_unit_test(validate_rejects_negative_max_delay),
        cmocka_unit_test(validate_accepts_zero_and_no_max_delay),
        cmocka_unit_test(validate_rejects_polly_exponential_not_doubling),
        cmocka_unit_test(validate_reports_the_first_bad_field),
        cmocka_unit_test(constant_waits_base_after_every_failure),
        cmocka_unit_test(linear_waits_base_times_n),
        cmocka_unit_test(exponential_multiplies_by_factor_per_failure),
        cmocka_unit_test(exponential_takes_a_fractional_factor),
        cmocka_unit_test(exponential_with_factor_one_is_constant),
        cmocka_unit_test(fibonacci_follows_1_1_2_3_5_8),
        cmocka_unit_test(fibonacci_92_fits_and_93_saturates),
        cmocka_unit_test(n_zero_is_treated_as_one),
        cmocka_unit_test(linear_saturates_instead_of_wrapping),
        cmocka_unit_test(exponential_saturates_instead_of_wrapping),
        cmocka_unit_test(zero_base_waits_zero_for_every_kind_and_jitter),
        cmocka_unit_test(attempt_10000_at_1s_doubling_gives_exactly_the_cap),
        cmocka_unit_test(cap_applies_to_every_kind),
        cmocka_unit_test(no_cap_saturates_at_duration_max),
        cmocka_unit_test(zero_max_delay_waits_zero),
        cmocka_unit_test(cap_applies_before_full_jitter_so_huge_n_still_spreads),
        cmocka_unit_test(no_jitter_draws_nothing),
        cmocka_unit_test(every_random_jitter_draws_exactly_once_per_wait),
        cmocka_unit_test(full_jitter_is_draw_times_formula),
        cmocka_unit_test(full_jitter_stays_below_the_formula),
        cmocka_unit_test(out_of_range_draws_are_clamped_into_zero_one),
        cmocka_unit_test(golden_full_jitter_schedule),
        cmocka_unit_test(golden_formula_draws_from_the_capped_ceiling),
        cmocka_unit_test(equal_jitter_is_half_plus_draw_times_half),
        cmocka_unit_test(equal_jitter_rounds_the_fixed_half_up),
        cmocka_unit_test(decorrelated_first_wait_draws_from_base_to_three_base),
        cmocka_unit_test(decorrelated_grows_from_the_previous_wait),
        cmocka_unit_test(decorrelated_is_capped_and_remembers_the_cap),
        cmocka_unit_test(decorrelated_with_cap_below_base_waits_the_cap),
        cmocka_unit_test(decorrelated_ignores_the_kind),
        cmocka_unit_test(decorrelated_without_state_starts_from_base_each_time),
        cmocka_unit_test(decorrelated_without_cap_saturates),
        cmocka_unit_test(proportional_spreads_the_formula_by_the_fraction),
        cmocka_unit_test(proportional_with_fraction_zero_is_the_formula),
        cmocka_unit_test(proportional_with_fraction_one_spans_zero_to_double),
        cmocka_unit_test(proportional_is_capped_after_jitter),
        cmocka_unit_test(polly_constant_is_plus_minus_25_percent),
        cmocka_unit_test(polly_linear_jitters_base_times_n),
        cmocka_unit_test(polly_fibonacci_gets_the_same_plus_minus_25_percent),
        cmocka_unit_test(polly_jitters_the_raw_formula_then_caps),
        cmocka_unit_test(polly_exponential_matches_decorrelated_jitter_backoff_v2),
        cmocka_unit_test(polly_exponential_without_state_does_not_subtract),
        cmocka_unit_test(polly_exponential_stale_state_gives_zero_not_negative),
        cmocka_unit_test(polly_exponential_past_double_range_gives_the_cap),
        cmocka_unit_test(polly_exponential_without_cap_saturates),
        cmocka_unit_test(polly_zero_base_leaves_the_state_alone),
        cmocka_unit_test(max_delay_of_none_full_and_equal_is_the_capped_formula),
        cmocka_unit_test(max_delay_of_proportional_is_one_plus_fraction),
        cmocka_unit_test(max_delay_of_decorrelated_is_base_times_three_to_the_n),
        cmocka_unit_test(max_delay_of_polly),
        cmocka_unit_test(every_wait_lies_between_zero_and_max_delay),
        cmocka_unit_test(threads_without_an_rng_draw_independently),
        cmocka_unit_test(kind_names_round_trip),
        cmocka_unit_test(jitter_names_round_trip),
        cmocka_unit_test(names_parse_ignoring_ascii_case),
        cmocka_unit_test(unknown_names_are_rejected),
        cmocka_unit_test(unknown_values_are_named_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
