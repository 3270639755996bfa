/*
 * test_route.c — endpoint plans for hedged calls: ordered groups, weighted
 * groups in both selection modes, weighted endpoints inside a group, and
 * the options' checks. Draws come from a scripted generator, so every plan
 * is stated exactly.
 */
#include "test.h"

static const resil_route_endpoint primary[] = {{.url = "https://a.example"}};
static const resil_route_endpoint second[] = {{.url = "https://b1.example", .weight = 1},
                                              {.url = "https://b2.example", .weight = 3}};
static const resil_route_endpoint third[] = {{.url = "https://c.example"}};

#define G(e, n, w) {.endpoints = e, .len = n, .weight = w}

static resil_route_opts route(resil_route_kind k, const resil_route_group *g, size_t n)
{
    resil_route_opts o;
    resil_route_opts_default(&o);
    o.kind = k;
    o.groups = g;
    o.ngroups = n;
    return o;
}

/* Draws in turn, counting them. */
typedef struct counting {
    resil_rng base;
    const double *draws;
    size_t n, calls;
} counting;

static double counted(resil_rng *r)
{
    counting *c = (counting *)r;
    assert_true(c->calls < c->n);
    return c->draws[c->calls++];
}

static size_t plan(const resil_route_opts *o, const double *draws, size_t ndraws,
                   const char **out, size_t cap, size_t *used)
{
    counting rng = {{counted}, draws, ndraws, 0};
    size_t len = 0;
    assert_int_equal(resil_route_plan(o, &rng.base, out, cap, &len), 0);
    *used = rng.calls;
    return len;
}

static void ordered_groups_serve_the_attempts_in_order(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 0), G(second, 2, 0), G(third, 1, 0)};
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, 3);
    const char *out[4];
    size_t used;
    static const double draws[] = {0.9}; /* second group: 0.9 × 4 = 3.6 -> b2 */
    assert_int_equal(plan(&o, draws, 1, out, 4, &used), 3);
    assert_string_equal(out[0], "https://a.example");
    assert_string_equal(out[1], "https://b2.example");
    assert_string_equal(out[2], "https://c.example");
    assert_int_equal(used, 1); /* only the group with a choice drew */
}

static void endpoint_weights_split_the_draws(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(second, 2, 0)};
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, 1);
    const char *out[1];
    size_t used;
    static const double low[] = {0.2499}; /* 0.9996 of 4: b1's share is [0, 1) */
    plan(&o, low, 1, out, 1, &used);
    assert_string_equal(out[0], "https://b1.example");
    static const double high[] = {0.25};
    plan(&o, high, 1, out, 1, &used);
    assert_string_equal(out[0], "https://b2.example");
}

static void a_plan_is_cut_to_the_attempts_asked_for(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 0), G(third, 1, 0)};
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, 2);
    const char *out[1];
    size_t used;
    assert_int_equal(plan(&o, NULL, 0, out, 1, &used), 1);
    assert_string_equal(out[0], "https://a.example");
}

static void weighted_groups_draw_the_first_then_follow_the_order(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 1), G(second, 2, 1), G(third, 1, 2)};
    resil_route_opts o = route(RESIL_ROUTE_WEIGHTED, g, 3);
    const char *out[3];
    size_t used;
    /* 0.6 × 4 = 2.4: the third group (weights 1, 1, 2); then the first,
     * then the second, whose endpoint 0.0 picks b1 */
    static const double draws[] = {0.6, 0.0};
    assert_int_equal(plan(&o, draws, 2, out, 3, &used), 3);
    assert_string_equal(out[0], "https://c.example");
    assert_string_equal(out[1], "https://a.example");
    assert_string_equal(out[2], "https://b1.example");
    assert_int_equal(used, 2);
}

static void weighted_groups_can_draw_every_attempt(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 1), G(second, 2, 1), G(third, 1, 2)};
    resil_route_opts o = route(RESIL_ROUTE_WEIGHTED, g, 3);
    o.selection = RESIL_ROUTE_EVERY_ATTEMPT;
    const char *out[3];
    size_t used;
    /* first: 0.6 × 4 -> third; then among a (1) and b (1): 0.7 × 2 -> b,
     * whose endpoint 0.1 × 4 -> b1; then a alone, no draw */
    static const double draws[] = {0.6, 0.7, 0.1};
    assert_int_equal(plan(&o, draws, 3, out, 3, &used), 3);
    assert_string_equal(out[0], "https://c.example");
    assert_string_equal(out[1], "https://b1.example");
    assert_string_equal(out[2], "https://a.example");
    assert_int_equal(used, 3);
}

static void a_route_names_its_first_bad_field(void **state)
{
    (void)state;
    resil_err err;
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, NULL, 0);
    assert_int_equal(resil_route_opts_validate(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "route.ngroups must be in [1, 11], got 0");
    static const resil_route_endpoint nameless[] = {{.url = ""}};
    const resil_route_group g[] = {G(primary, 1, 0), G(nameless, 1, 0)};
    o = route(RESIL_ROUTE_ORDERED, g, 2);
    assert_int_equal(resil_route_opts_validate(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "route.groups[1].endpoints[0].url must not be NULL or empty");
    static const resil_route_endpoint heavy[] = {{.url = "https://x", .weight = 64001}};
    const resil_route_group h[] = {G(heavy, 1, 0)};
    o = route(RESIL_ROUTE_ORDERED, h, 1);
    assert_int_equal(resil_route_opts_validate(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "route.groups[0].endpoints[0].weight must be in [0, 64000], got 64001");
    const char *out[1];
    size_t len;
    assert_int_equal(resil_route_plan(&o, NULL, out, 1, &len), RESIL_EINVAL);
}

/* ---- the options' checks, one refusal each ----------------------------------- */

static void refused(const resil_route_opts *o, const char *message)
{
    resil_err err = {0, ""};
    assert_int_equal(resil_route_opts_validate(o, &err), RESIL_EINVAL);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
    const char *out[1];
    size_t len = 7;
    assert_int_equal(resil_route_plan(o, NULL, out, 1, &len), RESIL_EINVAL);
}

static void accepted(const resil_route_opts *o)
{
    resil_err err = {0, ""};
    if (resil_route_opts_validate(o, &err) != 0)
        fail_msg("refused: %s", err.message);
}

static void route_options_must_not_be_null(void **state)
{
    (void)state;
    resil_err err = {0, ""};
    assert_int_equal(resil_route_opts_validate(NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "route: options must not be NULL");
}

static void route_kind_out_of_range_is_refused_by_name(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 0)};
    resil_route_opts o = route((resil_route_kind)2, g, 1);
    refused(&o, "route.kind must be ordered or weighted, got 2");
}

static void route_selection_out_of_range_is_refused_by_name(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 0)};
    resil_route_opts o = route(RESIL_ROUTE_WEIGHTED, g, 1);
    o.selection = (resil_route_selection)2;
    refused(&o, "route.selection must be initial-attempt or every-attempt, got 2");
}

static void route_of_more_groups_than_attempts_is_refused_by_name(void **state)
{
    (void)state;
    resil_route_group g[RESIL_ROUTE_MAX_GROUPS + 1];
    for (size_t i = 0; i < RESIL_ROUTE_MAX_GROUPS + 1; i++)
        g[i] = (resil_route_group)G(primary, 1, 0);
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, RESIL_ROUTE_MAX_GROUPS + 1);
    refused(&o, "route.ngroups must be in [1, 11], got 12");
}

static void route_of_one_group_per_attempt_is_accepted(void **state)
{
    (void)state;
    resil_route_group g[RESIL_ROUTE_MAX_GROUPS];
    for (size_t i = 0; i < RESIL_ROUTE_MAX_GROUPS; i++)
        g[i] = (resil_route_group)G(primary, 1, 0);
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, RESIL_ROUTE_MAX_GROUPS);
    accepted(&o);
}

static void route_group_without_endpoints_is_refused_by_name(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 0), G(NULL, 1, 0)};
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, 2);
    refused(&o, "route.groups[1].endpoints must not be NULL");
}

static void route_group_of_no_endpoints_is_refused_by_name(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 0), G(third, 0, 0)};
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, 2);
    refused(&o, "route.groups[1].len must be >= 1, got 0");
}

static void route_group_weight_above_max_is_refused_by_name(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 1), G(third, 1, RESIL_ROUTE_WEIGHT_MAX + 1)};
    resil_route_opts o = route(RESIL_ROUTE_WEIGHTED, g, 2);
    refused(&o, "route.groups[1].weight must be in [0, 64000], got 64001");
}

static void route_group_weight_at_max_is_accepted(void **state)
{
    (void)state;
    const resil_route_group g[] = {G(primary, 1, 1), G(third, 1, RESIL_ROUTE_WEIGHT_MAX)};
    resil_route_opts o = route(RESIL_ROUTE_WEIGHTED, g, 2);
    accepted(&o);
}

static void route_endpoint_weight_at_max_is_accepted(void **state)
{
    (void)state;
    static const resil_route_endpoint heaviest[] = {
        {.url = "https://x", .weight = RESIL_ROUTE_WEIGHT_MAX}};
    const resil_route_group g[] = {G(heaviest, 1, 0)};
    resil_route_opts o = route(RESIL_ROUTE_ORDERED, g, 1);
    accepted(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ordered_groups_serve_the_attempts_in_order),
        cmocka_unit_test(endpoint_weights_split_the_draws),
        cmocka_unit_test(a_plan_is_cut_to_the_attempts_asked_for),
        cmocka_unit_test(weighted_groups_draw_the_first_then_follow_the_order),
        cmocka_unit_test(weighted_groups_can_draw_every_attempt),
        cmocka_unit_test(a_route_names_its_first_bad_field),
        cmocka_unit_test(route_options_must_not_be_null),
        cmocka_unit_test(route_kind_out_of_range_is_refused_by_name),
        cmocka_unit_test(route_selection_out_of_range_is_refused_by_name),
        cmocka_unit_test(route_of_more_groups_than_attempts_is_refused_by_name),
        cmocka_unit_test(route_of_one_group_per_attempt_is_accepted),
        cmocka_unit_test(route_group_without_endpoints_is_refused_by_name),
        cmocka_unit_test(route_group_of_no_endpoints_is_refused_by_name),
        cmocka_unit_test(route_group_weight_above_max_is_refused_by_name),
        cmocka_unit_test(route_group_weight_at_max_is_accepted),
        cmocka_unit_test(route_endpoint_weight_at_max_is_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
