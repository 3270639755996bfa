/*
 * test_hedge.c — hedged GETs: a second easy handle races a slow first one
 * and its answer is the one the caller gets. The race is between two real
 * connections to the server, whose script hands its steps out in arrival
 * order, so the primary's request must reach the server (and take the slow
 * step) before the hedge's does. The hedge delay is timed on the fixture's
 * fake clock in manual mode: it runs out only when a test moves the clock,
 * which it does once the server is answering the primary. So whether a
 * hedge starts, and which attempt gets which step, never depends on how
 * fast a loaded machine is; a call the test does not drive is never
 * hedged, however long its answer takes.
 */
#include <pthread.h>

#include "http_fixture.h"

#define HEDGE_DELAY RESIL_MS(400)

static void hedge_setup_opts(fx *f)
{
    resil_fake_clock_set_manual(f->clock, true); /* the fixture's clock */
    f->opts.hedge_delay = HEDGE_DELAY;
}

/* A call performed on a thread of its own, so the test can move the
 * clock meanwhile. The client is made first, on the test's thread (only
 * there may cmocka fail). */
typedef struct performing {
    fx *f;
    const char *path;
    pthread_t thread;
    int rc;
} performing;

static void *perform_thread(void *arg)
{
    performing *p = arg;
    p->rc = fx_perform(p->f, p->path);
    return NULL;
}

static void perform_start(performing *p, fx *f, const char *path)
{
    fx_client(f);
    *p = (performing){.f = f, .path = path};
    assert_int_equal(pthread_create(&p->thread, NULL, perform_thread, p), 0);
}

static int perform_end(performing *p)
{
    pthread_join(p->thread, NULL);
    return p->rc;
}

/* Once the server is answering the primary (it took its step: the slow
 * one) and the caller waits out the delay, run the delay out: the hedge
 * starts, and its request takes the next step. */
static void run_the_delay_out_once_the_primary_is_served(fx *f)
{
    assert_true(fx_peak_reaching(f, 1) >= 1);
    resil_fake_clock_await_sleepers(f->clock, 1);
    resil_fake_clock_advance(f->clock, HEDGE_DELAY);
}

/* The primary's slow step outlasts any hedge's answer; once the hedge has
 * won, the primary's transfer is aborted (wait_losers: the call returns
 * after it) and the server's stop ends its wait. */
static void a_slow_get_is_answered_by_its_hedge(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    fx_script(f, "/h", FX_STEPS({.status = 200, .delay_ms = 30000, .body = "slow\n"},
                                {.status = 200, .body = "fast\n"}));
    performing p;
    perform_start(&p, f, "/h");
    run_the_delay_out_once_the_primary_is_served(f);
    assert_int_equal(perform_end(&p), 0);
    assert_int_equal(f->res.stop, RESIL_STOP_SUCCEEDED);
    assert_string_equal(f->body.p, "fast\n");
    assert_int_equal(f->res.hedges, 1);
    assert_int_equal(f->res.hedge_winner, 1);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(fx_count(f, "/h"), 2);
}

/* The clock is never moved: the answer comes before the delay runs out,
 * however long it takes in real time. */
static void a_fast_get_starts_no_hedge(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    fx_script(f, "/h", FX_STEPS({.status = 200, .body = "first\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_string_equal(f->body.p, "first\n");
    assert_int_equal(f->res.hedges, 0);
    assert_int_equal(f->res.hedge_winner, 0);
    assert_int_equal(fx_count(f, "/h"), 1);
}

static void a_failed_primary_is_hedged_at_once(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    f->opts.hedge_delay = RESIL_S(20);
    f->opts.retry.max_attempts = 1;
    fx_script(f, "/h", FX_STEPS({.status = 503, .body = "down\n"}, {.status = 200, .body = "up\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_string_equal(f->body.p, "up\n");
    assert_int_equal(f->res.hedge_winner, 1);
    assert_int_equal(fx_count(f, "/h"), 2);
}

/* A second server stands for another region: the route's groups are the
 * fixture's server, then the other one; each attempt, the primary's too,
 * goes to its group's endpoint. */
typedef struct two_regions {
    http_server *other;
    char here[128], there[128];
    resil_route_endpoint ep[2];
    resil_route_group g[2];
    resil_route_opts route;
} two_regions;

static void route_to_regions(fx *f, two_regions *t, bool here_first)
{
    memset(t, 0, sizeof *t);
    t->other = http_server_start();
    assert_non_null(t->other);
    http_server_url(f->server, "", t->here, sizeof t->here);
    http_server_url(t->other, "", t->there, sizeof t->there);
    t->ep[0].url = t->here;
    t->ep[1].url = t->there;
    size_t first = here_first ? 0 : 1;
    t->g[0].endpoints = &t->ep[first];
    t->g[0].len = 1;
    t->g[1].endpoints = &t->ep[1 - first];
    t->g[1].len = 1;
    resil_route_opts_default(&t->route);
    t->route.groups = t->g;
    t->route.ngroups = 2;
    f->opts.hedge_route = &t->route;
}

static void leave_regions(fx *f, two_regions *t)
{
    resil_http_client_free(f->client);
    f->client = NULL;
    http_server_stop(t->other);
}

static void a_failed_primary_is_hedged_to_the_next_endpoint(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    f->opts.hedge_delay = RESIL_S(20);
    f->opts.retry.max_attempts = 1;
    two_regions t;
    route_to_regions(f, &t, true);
    http_server *other = t.other;
    fx_script(f, "/h", FX_STEPS({.status = 503, .body = "down\n"}));
    http_server_script(other, "/h", FX_STEPS({.status = 200, .body = "other\n"}));
    assert_int_equal(fx_perform(f, "/h?q=1"), 0);
    assert_string_equal(f->body.p, "other\n");
    assert_int_equal(f->res.hedge_winner, 1);
    assert_int_equal(fx_count(f, "/h"), 1);
    assert_int_equal(http_server_count(other, "/h"), 1);
    assert_string_equal(http_server_request(other, "/h", 0)->target, "/h?q=1");
    leave_regions(f, &t);
}

/* Microsoft routes every attempt: with the other region first, the
 * primary goes there and the handle's own server is the hedge's. */
static void primary_to_the_other_region(fx *f, two_regions *t)
{
    hedge_setup_opts(f);
    f->opts.hedge_delay = RESIL_S(20);
    f->opts.retry.max_attempts = 1;
    route_to_regions(f, t, false);
    http_server_script(t->other, "/p", FX_STEPS({.status = 200, .body = "there\n"}));
}

static void the_primary_goes_to_the_first_endpoint_of_the_plan(void **state)
{
    fx *f = *state;
    two_regions t;
    primary_to_the_other_region(f, &t);
    assert_int_equal(fx_perform(f, "/p"), 0);
    assert_string_equal(f->body.p, "there\n");
    assert_int_equal(f->res.hedges, 0);
    assert_int_equal(fx_count(f, "/p"), 0);
    assert_int_equal(http_server_count(t.other, "/p"), 1);
    char *url = NULL; /* the caller's handle has its own URL back */
    curl_easy_getinfo(f->easy, CURLINFO_EFFECTIVE_URL, &url);
    assert_non_null(url);
    assert_non_null(strstr(url, t.here));
    leave_regions(f, &t);
}

/* The caller's URL is kept aside while the primary is routed elsewhere:
 * one longer than the call keeps inline comes back whole too. */
static void a_routed_call_gives_a_long_url_back_to_the_callers_handle(void **state)
{
    fx *f = *state;
    two_regions t;
    primary_to_the_other_region(f, &t);
    char url[600];
    int n = snprintf(url, sizeof url, "%s/p?q=", t.here);
    memset(url + n, 'a', 400);
    url[n + 400] = '\0';
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, &f->req, &f->res), 0);
    assert_int_equal(http_server_count(t.other, "/p"), 1);
    char *back = NULL;
    curl_easy_getinfo(f->easy, CURLINFO_EFFECTIVE_URL, &back);
    assert_string_equal(back, url);
    leave_regions(f, &t);
}

/* One failure opens a breaker; the hedge to the other endpoint meets that
 * endpoint's breaker, still closed, and is answered. */
static void each_endpoint_of_a_routed_call_has_its_own_breaker(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    f->opts.hedge_delay = RESIL_S(20);
    f->opts.retry.max_attempts = 1;
    f->opts.breaker.kind = RESIL_BREAKER_CONSECUTIVE;
    f->opts.breaker.failure_threshold = 1;
    two_regions t;
    route_to_regions(f, &t, true);
    fx_script(f, "/b", FX_STEPS({.status = 503, .body = "down\n"}));
    http_server_script(t.other, "/b", FX_STEPS({.status = 200, .body = "other\n"}));
    assert_int_equal(fx_perform(f, "/b"), 0);
    assert_string_equal(f->body.p, "other\n");
    assert_int_equal(f->res.hedge_winner, 1);
    char here[RESIL_BREAKER_NAME_MAX], there[RESIL_BREAKER_NAME_MAX];
    assert_int_equal(resil_http_authority(t.here, here, sizeof here), 0);
    assert_int_equal(resil_http_authority(t.there, there, sizeof there), 0);
    assert_int_equal(resil_http_client_breaker_state(f->client, here), RESIL_BREAKER_OPEN);
    assert_int_equal(resil_http_client_breaker_state(f->client, there), RESIL_BREAKER_CLOSED);
    leave_regions(f, &t);
}

static void microsoft_hedging_profile_is_the_standard_hedging_handler(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    assert_int_equal(resil_http_opts_profile(&o, RESIL_HTTP_MICROSOFT_HEDGING), 0);
    assert_duration_equal(o.total_timeout, RESIL_S(30));
    assert_int_equal(o.retry.max_attempts, 1);
    assert_duration_equal(o.hedge_delay, RESIL_S(2));
    assert_int_equal(o.max_hedged, 1);
    assert_int_equal(o.max_concurrency, 1000);
    assert_near(o.breaker.failure_ratio, 0.1, 1e-12);
    assert_int_equal(o.breaker.minimum_throughput, 100);
    assert_duration_equal(o.breaker.break_duration, RESIL_S(5));
    assert_duration_equal(o.attempt_timeout, RESIL_S(10));
    assert_ptr_equal(o.classify, resil_http_classify_microsoft);
    assert_string_equal(resil_http_profile_name(RESIL_HTTP_MICROSOFT_HEDGING),
                        "microsoft-hedging");
    assert_int_equal(resil_http_opts_validate(&o, NULL), 0);
}

static void a_bad_hedge_route_is_refused_by_name(void **state)
{
    (void)state;
    resil_http_opts o;
    resil_http_opts_default(&o);
    resil_route_opts route;
    resil_route_opts_default(&route);
    o.hedge_route = &route;
    resil_err err;
    assert_int_equal(resil_http_opts_validate(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "http.hedge_route.ngroups must be in [1, 11], got 0");
}

/* A routed call rewrites the request's URL for each endpoint: one that
 * libcurl's URL parser refuses is refused before any attempt starts. */
static void a_routed_request_whose_url_does_not_parse_is_refused(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    two_regions t;
    route_to_regions(f, &t, true);
    curl_easy_setopt(f->easy, CURLOPT_URL, "http://exa mple.com/h");
    assert_int_equal(resil_http_perform(fx_client(f), f->easy, &f->req, &f->res), RESIL_EINVAL);
    assert_int_equal(fx_count(f, "/h"), 0);
    assert_int_equal(http_server_count(t.other, "/h"), 0);
    leave_regions(f, &t);
}

/* An endpoint the route cannot send a hedge to is refused when the client
 * is made, naming it, rather than failing every hedged call. */
static void route_refused(const char *url, const char *message)
{
    resil_http_opts o;
    resil_http_opts_default(&o);
    const resil_route_endpoint ep[] = {{.url = "https://eu.example.com"}, {.url = url}};
    const resil_route_group g[] = {{.endpoints = &ep[0], .len = 1},
                                   {.endpoints = &ep[1], .len = 1}};
    resil_route_opts route;
    resil_route_opts_default(&route);
    route.groups = g;
    route.ngroups = 2;
    o.hedge_route = &route;
    resil_err err = {0, ""};
    assert_int_equal(resil_http_opts_validate(&o, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
    resil_http_client *c = NULL;
    assert_int_equal(resil_http_client_new(&o, &c, &err), RESIL_EINVAL);
    assert_string_equal(err.message, message);
    assert_null(c);
}

static void a_hedge_endpoint_without_a_host_is_refused_by_name(void **state)
{
    (void)state;
    route_refused("https://", "http.hedge_route.groups[1].endpoints[0].url must be "
                              "scheme://host[:port] under 256 bytes, got \"https://\"");
}

static void a_hedge_endpoint_libcurl_cannot_parse_is_refused_by_name(void **state)
{
    (void)state;
    route_refused("http://exa mple.com", "http.hedge_route.groups[1].endpoints[0].url must be "
                                         "scheme://host[:port] under 256 bytes, got "
                                         "\"http://exa mple.com\"");
}

static void a_hedge_endpoint_of_256_bytes_is_refused_by_name(void **state)
{
    (void)state;
    char url[257]; /* http://hhh...:1, whose breaker key is itself */
    memcpy(url, "http://", 7);
    memset(url + 7, 'h', 247);
    memcpy(url + 254, ":1", 3);
    route_refused(url, "http.hedge_route.groups[1].endpoints[0].url must be "
                       "scheme://host[:port] under 256 bytes, got \"http://hhhhhhhhhhhhhhhhhhh"
                       "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh\"");
}

static void a_hedge_endpoint_of_255_bytes_is_accepted(void **state)
{
    (void)state;
    char url[256];
    memcpy(url, "http://", 7);
    memset(url + 7, 'h', 246);
    memcpy(url + 253, ":1", 3);
    resil_http_opts o;
    resil_http_opts_default(&o);
    const resil_route_endpoint ep[] = {{.url = url}};
    const resil_route_group g[] = {{.endpoints = ep, .len = 1}};
    resil_route_opts route;
    resil_route_opts_default(&route);
    route.groups = g;
    route.ngroups = 1;
    o.hedge_route = &route;
    resil_err err = {0, ""};
    if (resil_http_opts_validate(&o, &err) != 0)
        fail_msg("refused: %s", err.message);
}

static void post_is_never_hedged(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    fx_script(f, "/h", FX_STEPS({.status = 200, .delay_ms = 1500, .body = "slow\n"},
                                {.status = 200, .body = "fast\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_string_equal(f->body.p, "slow\n");
    assert_int_equal(f->res.hedges, 0);
    assert_int_equal(fx_count(f, "/h"), 1);
}

/* The caller's handle is the primary's, the loser: aborted, it still
 * answers the next call, which no hedge can answer for it (the clock is
 * not moved). */
static void the_losing_handle_leaves_the_callers_handle_usable(void **state)
{
    fx *f = *state;
    hedge_setup_opts(f);
    fx_script(f, "/h", FX_STEPS({.status = 200, .delay_ms = 30000, .body = "slow\n"},
                                {.status = 200, .body = "fast\n"}));
    performing p;
    perform_start(&p, f, "/h");
    run_the_delay_out_once_the_primary_is_served(f);
    assert_int_equal(perform_end(&p), 0);
    assert_int_equal(f->res.hedge_winner, 1);
    fx_script(f, "/again", FX_STEPS({.status = 200, .body = "again\n"}));
    assert_int_equal(fx_perform(f, "/again"), 0);
    assert_string_equal(f->body.p, "again\n");
    assert_int_equal(f->res.hedges, 0);
    assert_int_equal(f->res.hedge_winner, 0);
}

/* What the classifier and the retry classifier were shown, attempt by
 * attempt (attempts run on the hedging workers). */
typedef struct shown {
    pthread_mutex_t mu;
    int n;
    uint32_t hedge[4];
    long status[4];
    const void *user[4];
    int judged;
    uint32_t judged_hedge;
} shown;

static resil_outcome classify_and_keep(const resil_http_response *r, void *ud)
{
    shown *s = ud;
    pthread_mutex_lock(&s->mu);
    if (s->n < 4) {
        s->hedge[s->n] = r->ctx->hedge;
        s->status[s->n] = r->status;
        s->user[s->n] = r->ctx->user;
        s->n++;
    }
    pthread_mutex_unlock(&s->mu);
    return resil_http_classify_default(r, NULL);
}

static bool retry_and_keep(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    shown *s = ud;
    pthread_mutex_lock(&s->mu);
    s->judged++;
    s->judged_hedge = ctx->hedge;
    pthread_mutex_unlock(&s->mu);
    return resil_retry_on_default(o, NULL);
}

static void each_attempt_reaches_the_classifiers_with_its_hedge_index(void **state)
{
    fx *f = *state;
    shown s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    hedge_setup_opts(f);
    f->opts.hedge_delay = RESIL_S(20);
    f->opts.retry.max_attempts = 1;
    f->opts.classify = classify_and_keep;
    f->opts.classify_ud = &s;
    f->opts.retry.retry_on = retry_and_keep;
    f->opts.retry.retry_on_ud = &s;
    f->req.user = &s;
    fx_script(f, "/h", FX_STEPS({.status = 503, .body = "down\n"}, {.status = 200, .body = "up\n"}));
    assert_int_equal(fx_perform(f, "/h"), 0);
    assert_int_equal(f->res.hedge_winner, 1);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.hedge[0], 0);
    assert_int_equal(s.status[0], 503);
    assert_int_equal(s.hedge[1], 1);
    assert_int_equal(s.status[1], 200);
    assert_ptr_equal(s.user[0], &s); /* the request's, on every hedge */
    assert_ptr_equal(s.user[1], &s);
    assert_int_equal(s.judged, 1); /* the primary's 503, by hedging */
    assert_int_equal(s.judged_hedge, 0);
    pthread_mutex_destroy(&s.mu);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(a_slow_get_is_answered_by_its_hedge),
        T(a_fast_get_starts_no_hedge),
        T(a_failed_primary_is_hedged_at_once),
        T(a_failed_primary_is_hedged_to_the_next_endpoint),
        T(the_primary_goes_to_the_first_endpoint_of_the_plan),
        T(a_routed_call_gives_a_long_url_back_to_the_callers_handle),
        T(each_endpoint_of_a_routed_call_has_its_own_breaker),
        T(a_routed_request_whose_url_does_not_parse_is_refused),
        cmocka_unit_test(microsoft_hedging_profile_is_the_standard_hedging_handler),
        cmocka_unit_test(a_bad_hedge_route_is_refused_by_name),
        cmocka_unit_test(a_hedge_endpoint_without_a_host_is_refused_by_name),
        cmocka_unit_test(a_hedge_endpoint_libcurl_cannot_parse_is_refused_by_name),
        cmocka_unit_test(a_hedge_endpoint_of_256_bytes_is_refused_by_name),
        cmocka_unit_test(a_hedge_endpoint_of_255_bytes_is_accepted),
        T(post_is_never_hedged),
        T(the_losing_handle_leaves_the_callers_handle_usable),
        T(each_attempt_reaches_the_classifiers_with_its_hedge_index),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
