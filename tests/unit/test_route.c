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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ordered_groups_serve_the_attempts_in_order),
        cmocka_unit_test(endpoint_weights_split_the_draws),
        cmocka_unit_test(a_plan_is_cut_to_the_attempts_asked_for),
        cmocka_unit_test(weighted_groups_draw_the_first_then_follow_the_order),
        cmocka_unit_test(weighted_groups_can_draw_every_attempt),
        cmocka_unit_test(a_route_names_its_first_bad_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
