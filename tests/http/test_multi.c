/*
 * test_multi.c — calls through curl multi on a loop (resil_http_multi):
 * many at once on one thread, retries with Retry-After, one breaker per
 * authority across transfers, cancels and timeouts that take a transfer
 * off the multi handle mid-flight, hedges as concurrent transfers, and the
 * method rules for POST.
 *
 * The loop is the tests' virtual loop over the fixture's fake clock: the
 * transfers are real, on the loopback server, but waits (a Retry-After, a
 * hedge's delay, an attempt's timeout) are jumped over once the server has
 * settled and no socket has anything to say, so the recorded instants are
 * exact and nothing sleeps. An answer that must come too late holds
 * (http_step.hold) rather than waits: a wait is the server at work.
 */
#include <sys/resource.h>

#include "http_fixture.h"
#include "virtual_loop.h"

typedef struct mx {
    virtual_loop vl;
    resil_http_multi *m;
} mx;

typedef struct done_box {
    bool done;
    resil_http_result res;
    CURL *easy;
    int *left; /* optional: calls of a batch not yet done */
    bool *all; /* set when *left reaches 0 */
    resil_attempt_record rec[4];
} done_box;

static void on_done(CURL *easy, const resil_http_result *res, void *ud)
{
    done_box *d = ud;
    d->res = *res;
    d->easy = easy;
    d->done = true;
    if (d->left != NULL && --*d->left == 0)
        *d->all = true;
}

/* The fixture's client on the virtual loop's clock, and a multi on it. */
static bool server_settled(void *server) { return http_server_settled(server); }

static void mx_open(fx *f, mx *x)
{
    virtual_loop_init(&x->vl, f->clock);
    virtual_loop_peer(&x->vl, server_settled, f->server);
    f->opts.clock = resil_loop_clock(&x->vl.loop);
    assert_int_equal(resil_http_multi_new(fx_client(f), &x->vl.loop, &x->m), 0);
}

static void mx_close(mx *x)
{
    assert_int_equal(resil_http_multi_calls(x->m), 0);
    resil_http_multi_free(x->m);
    virtual_loop_destroy(&x->vl);
}

/* Start one call of the fixture's handle on `path` and run the loop until
 * it is done. */
static void mx_call(fx *f, mx *x, const char *path, done_box *d)
{
    fx_url(f, path);
    f->body.len = 0;
    f->body.p[0] = '\0';
    *d = (done_box){.done = false};
    assert_int_equal(resil_http_start(x->m, f->easy, &f->req, on_done, d, NULL), 0);
    virtual_loop_run(&x->vl, &d->done);
}

static void mx_take_all_descriptors(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

#define MANY 1000

static void a_thousand_calls_run_at_once_on_one_thread(void **state)
{
    fx *f = *state;
    mx_take_all_descriptors();
    fx_script(f, "/many", FX_STEPS({.status = 200, .delay_ms = 20, .body = "ok\n"}));
    http_server_record(f->server, false);
    /* A thousand connections may take real seconds to be accepted; virtual
     * time would run past any timeout meanwhile. This test is about the
     * transfers, not time. */
    f->opts.attempt_timeout = f->opts.total_timeout = 0;
    mx x;
    mx_open(f, &x);
    static CURL *easy[MANY];
    static done_box box[MANY];
    char url[256];
    http_server_url(f->server, "/many", url, sizeof url);
    resil_http_request req;
    resil_http_request_default(&req);
    req.method = "GET";
    req.write_fn = fx_take;
    req.write_data = &f->body;
    int left = MANY;
    bool all = false;
    for (int i = 0; i < MANY; i++) {
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        box[i] = (done_box){.left = &left, .all = &all};
        req.records = box[i].rec;
        req.records_cap = 4;
        assert_int_equal(resil_http_start(x.m, easy[i], &req, on_done, &box[i], NULL), 0);
    }
    assert_int_equal(resil_http_multi_calls(x.m), MANY);
    virtual_loop_run(&x.vl, &all);
    for (int i = 0; i < MANY; i++) {
        if (box[i].res.attempts != 1)
            print_message("call %d: %s\n", i, box[i].rec[0].outcome.detail);
        assert_int_equal(box[i].res.stop, RESIL_STOP_SUCCEEDED);
        assert_int_equal(box[i].res.status, 200);
        assert_int_equal(box[i].res.attempts, 1);
        assert_ptr_equal(box[i].easy, easy[i]);
        curl_easy_cleanup(easy[i]);
    }
    assert_int_equal(f->body.len, 3 * MANY);
    mx_close(&x);
}

static void retry_after_is_waited_on_the_loops_time(void **state)
{
    fx *f = *state;
    f->opts.retry.max_attempts = 3;
    fx_script(f, "/ra", FX_STEPS({.status = 503, .retry_after = "3"}, {.status = 200, .body = "up\n"}));
    mx x;
    mx_open(f, &x);
    done_box d;
    mx_call(f, &x, "/ra", &d);
    assert_int_equal(d.res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(d.res.attempts, 2);
    assert_int_equal(d.res.status, 200);
    assert_string_equal(f->body.p, "up\n");
    assert_int_equal(f->records[0].source, RESIL_WAIT_RETRY_AFTER);
    assert_int_equal(f->records[0].wait, RESIL_S(3));
    resil_instant first_end = f->records[0].start + f->records[0].duration;
    assert_int_equal(f->records[1].start - first_end, RESIL_S(3));
    assert_int_equal(fx_count(f, "/ra"), 2);
    mx_close(&x);
}

static void one_breaker_guards_every_transfer_to_an_authority(void **state)
{
    fx *f = *state;
    f->opts.retry.max_attempts = 1;
    f->opts.breaker.minimum_throughput = 4;
    f->opts.breaker.failure_ratio = 0.5;
    fx_script(f, "/down", FX_STEPS({.status = 503}));
    mx x;
    mx_open(f, &x);
    char url[256];
    http_server_url(f->server, "/down", url, sizeof url);
    CURL *easy[4];
    done_box box[4];
    for (int i = 0; i < 4; i++) {
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        box[i] = (done_box){.done = false};
        assert_int_equal(resil_http_start(x.m, easy[i], &f->req, on_done, &box[i], NULL), 0);
    }
    for (int i = 0; i < 4; i++)
        virtual_loop_run(&x.vl, &box[i].done);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(box[i].res.status, 503);
        curl_easy_cleanup(easy[i]);
    }
    char authority[64];
    snprintf(authority, sizeof authority, "http://127.0.0.1:%d", http_server_port(f->server));
    assert_int_equal(resil_http_client_breaker_state(f->client, authority), RESIL_BREAKER_OPEN);
    done_box d;
    mx_call(f, &x, "/other-path", &d);
    assert_int_equal(d.res.outcome.kind, RESIL_REJECTED);
    assert_int_equal(d.res.status, 0); /* refused before a transfer */
    assert_int_equal(fx_count(f, "/down"), 4);
    assert_int_equal(fx_count(f, "/other-path"), 0);
    mx_close(&x);
}

typedef struct canceller {
    resil_timer timer;
    resil_http_xfer *x;
    resil_cancel *token; /* fired instead of resil_http_cancel() when set */
} canceller;

static void cancel_at(resil_timer *t)
{
    canceller *c = (canceller *)t;
    if (c->token != NULL)
        resil_cancel_fire(c->token);
    else
        resil_http_cancel(c->x);
}

/* A call the server holds, cancelled 100 ms in by `c`: it ends at once, cancelled,
 * and its handle is off the multi handle (it runs the next call). */
static void assert_a_cancel_mid_transfer_ends_it(fx *f, canceller *c)
{
    fx_script(f, "/slow", FX_STEPS({.hold = true}));
    fx_script(f, "/fast", FX_STEPS({.status = 200, .body = "fast\n"}));
    mx x;
    mx_open(f, &x);
    fx_url(f, "/slow");
    done_box d = {.done = false};
    c->timer.fn = cancel_at;
    assert_int_equal(resil_http_start(x.m, f->easy, &f->req, on_done, &d, &c->x), 0);
    x.vl.loop.ops->timer_start(x.vl.loop.self, &c->timer, RESIL_MS(100));
    virtual_loop_run(&x.vl, &d.done);
    assert_int_equal(d.res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(d.res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(d.res.attempts, 1);
    assert_int_equal(d.res.elapsed, RESIL_MS(100));
    assert_string_equal(f->body.p, "");
    f->req.cancel = NULL;
    mx_call(f, &x, "/fast", &d);
    assert_int_equal(d.res.status, 200);
    assert_string_equal(f->body.p, "fast\n");
    mx_close(&x);
}

static void a_cancel_mid_transfer_takes_it_off_the_multi_handle(void **state)
{
    canceller c = {.token = NULL};
    assert_a_cancel_mid_transfer_ends_it(*state, &c);
}

/* The request's own token does what resil_http_cancel() does. */
static void a_fired_request_token_takes_the_transfer_off_the_multi_handle(void **state)
{
    fx *f = *state;
    resil_cancel token;
    assert_int_equal(resil_cancel_init(&token, NULL), 0);
    f->req.cancel = &token;
    canceller c = {.token = &token};
    assert_a_cancel_mid_transfer_ends_it(f, &c);
    resil_cancel_destroy(&token);
}

/* The caller's progress callback cancels its own call: libcurl takes no
 * handle off its multi handle from inside one of its callbacks, so the
 * transfer must still be off it, and its handle the caller's alone, when
 * `done` hands it back. */
typedef struct self_cancel {
    resil_http_xfer *x;
    int calls;
} self_cancel;

static int cancel_from_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                                curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    self_cancel *c = ud;
    if (c->calls++ == 0)
        resil_http_cancel(c->x);
    return 0;
}

static void a_cancel_from_the_calls_own_progress_callback_takes_it_off(void **state)
{
    fx *f = *state;
    fx_script(f, "/slow", FX_STEPS({.hold = true}));
    fx_script(f, "/fast", FX_STEPS({.status = 200, .body = "fast\n"}));
    mx x;
    mx_open(f, &x);
    self_cancel c = {.x = NULL};
    f->req.xferinfo_fn = cancel_from_progress;
    f->req.xferinfo_data = &c;
    fx_url(f, "/slow");
    done_box d = {.done = false};
    assert_int_equal(resil_http_start(x.m, f->easy, &f->req, on_done, &d, &c.x), 0);
    virtual_loop_run(&x.vl, &d.done);
    assert_int_equal(d.res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(d.res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(d.res.attempts, 1);
    f->req.xferinfo_fn = NULL;
    mx_call(f, &x, "/fast", &d);
    assert_int_equal(d.res.curl_code, CURLE_OK);
    assert_int_equal(d.res.status, 200);
    assert_string_equal(f->body.p, "fast\n");
    mx_close(&x);
}

static void an_attempt_timeout_ends_the_transfer_on_virtual_time(void **state)
{
    fx *f = *state;
    f->opts.retry.max_attempts = 1;
    f->opts.attempt_timeout = RESIL_S(1);
    fx_script(f, "/slow", FX_STEPS({.hold = true}));
    mx x;
    mx_open(f, &x);
    done_box d;
    mx_call(f, &x, "/slow", &d);
    assert_int_equal(d.res.outcome.kind, RESIL_TIMEOUT);
    assert_int_equal(d.res.attempts, 1);
    assert_int_equal(d.res.elapsed, RESIL_S(1));
    mx_close(&x);
}

static void a_hedge_is_a_concurrent_transfer_and_the_loser_is_removed(void **state)
{
    fx *f = *state;
    f->opts.hedge_delay = RESIL_MS(100);
    fx_script(f, "/h", FX_STEPS({.hold = true},
                                {.status = 200, .body = "fast\n"}));
    fx_script(f, "/again", FX_STEPS({.status = 200, .body = "again\n"}));
    mx x;
    mx_open(f, &x);
    done_box d;
    mx_call(f, &x, "/h", &d);
    assert_int_equal(d.res.stop, RESIL_STOP_SUCCEEDED);
    assert_string_equal(f->body.p, "fast\n");
    assert_int_equal(d.res.hedges, 1);
    assert_int_equal(d.res.hedge_winner, 1);
    assert_int_equal(d.res.elapsed, RESIL_MS(100));
    assert_int_equal(fx_count(f, "/h"), 2);
    /* the slow primary is off the multi handle: the caller's handle runs
     * the next call */
    mx_call(f, &x, "/again", &d);
    assert_string_equal(f->body.p, "again\n");
    assert_int_equal(d.res.hedges, 0);
    mx_close(&x);
}

static void a_post_without_a_key_is_sent_once(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/order", FX_STEPS({.status = 503}, {.status = 200}));
    mx x;
    mx_open(f, &x);
    done_box d;
    mx_call(f, &x, "/order", &d);
    assert_int_equal(d.res.attempts, 1);
    assert_int_equal(d.res.status, 503);
    assert_string_equal(d.res.key, "");
    assert_int_equal(fx_count(f, "/order"), 1);
    mx_close(&x);
}

static void a_post_with_a_key_sends_the_same_key_on_every_attempt(void **state)
{
    fx *f = *state;
    f->req.method = "POST";
    f->req.key_mode = RESIL_HTTP_KEY_AUTO;
    f->opts.retry.max_attempts = 3;
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, "order=1");
    fx_script(f, "/order", FX_STEPS({.status = 503}, {.status = 503}, {.status = 201}));
    mx x;
    mx_open(f, &x);
    done_box d;
    mx_call(f, &x, "/order", &d);
    assert_int_equal(d.res.attempts, 3);
    assert_int_equal(d.res.status, 201);
    assert_int_equal(strlen(d.res.key), RESIL_HTTP_UUID_LEN);
    assert_int_equal(fx_count(f, "/order"), 3);
    for (size_t i = 0; i < 3; i++) {
        const http_request *r = http_server_request(f->server, "/order", i);
        char key[RESIL_HTTP_KEY_MAX + 1];
        assert_true(http_request_header(r, "Idempotency-Key", key, sizeof key));
        assert_string_equal(key, d.res.key);
        assert_string_equal(r->body, "order=1");
    }
    mx_close(&x);
}

static void callers_private_pointer_is_back_after_the_call(void **state)
{
    fx *f = *state;
    fx_script(f, "/p", FX_STEPS({.status = 200}));
    int mine;
    curl_easy_setopt(f->easy, CURLOPT_PRIVATE, &mine);
    mx x;
    mx_open(f, &x);
    done_box d;
    mx_call(f, &x, "/p", &d);
    char *p = NULL;
    curl_easy_getinfo(f->easy, CURLINFO_PRIVATE, &p);
    assert_ptr_equal(p, &mine);
    mx_close(&x);
}

/* A call's done starts the next call on the same handle: the result the
 * first `done` reads stays its own while the next call starts. */
typedef struct chain {
    fx *f;
    mx *x;
    long first_status_after_start;
    done_box second;
} chain;

static void start_next_on_done(CURL *easy, const resil_http_result *res, void *ud)
{
    chain *c = ud;
    long status = res->status;
    fx_url(c->f, "/second");
    assert_int_equal(resil_http_start(c->x->m, easy, &c->f->req, on_done, &c->second, NULL), 0);
    assert_int_equal(res->status, status);
    c->first_status_after_start = res->status;
}

static void a_calls_done_may_start_the_next_call_on_its_handle(void **state)
{
    fx *f = *state;
    fx_script(f, "/first", FX_STEPS({.status = 200}));
    fx_script(f, "/second", FX_STEPS({.status = 202}));
    fx_url(f, "/first");
    mx x;
    mx_open(f, &x);
    chain c = {.f = f, .x = &x};
    assert_int_equal(resil_http_start(x.m, f->easy, &f->req, start_next_on_done, &c, NULL), 0);
    virtual_loop_run(&x.vl, &c.second.done);
    assert_int_equal(c.first_status_after_start, 200);
    assert_int_equal(c.second.res.status, 202);
    assert_int_equal(c.second.res.stop, RESIL_STOP_SUCCEEDED);
    assert_ptr_equal(c.second.easy, f->easy);
    mx_close(&x);
}

static resil_instant no_now(void *self)
{
    (void)self;
    return 0;
}
static void no_timer(void *self, resil_timer *t, resil_duration d)
{
    (void)self, (void)t, (void)d;
}
static void no_stop(void *self, resil_timer *t) { (void)self, (void)t; }
static void no_post(void *self, resil_work *w) { (void)self, (void)w; }

static void a_loop_without_descriptor_watches_is_refused(void **state)
{
    fx *f = *state;
    /* a table written before io_start existed: its size ends at in_loop */
    static const resil_loop_ops older = {.size = offsetof(resil_loop_ops, io_start),
                                         .now = no_now,
                                         .timer_start = no_timer,
                                         .timer_stop = no_stop,
                                         .post = no_post};
    resil_loop loop;
    assert_int_equal(resil_loop_init(&loop, &older, NULL), 0);
    assert_false(resil_loop_has_io(&loop));
    resil_http_multi *m = NULL;
    assert_int_equal(resil_http_multi_new(fx_client(f), &loop, &m), RESIL_EUNSUPPORTED);
    assert_null(m);
}

static void a_multi_needs_a_client_a_loop_and_out(void **state)
{
    fx *f = *state;
    virtual_loop vl;
    virtual_loop_init(&vl, f->clock);
    resil_http_multi *m = NULL;
    assert_int_equal(resil_http_multi_new(NULL, &vl.loop, &m), RESIL_EINVAL);
    assert_int_equal(resil_http_multi_new(fx_client(f), NULL, &m), RESIL_EINVAL);
    assert_int_equal(resil_http_multi_new(fx_client(f), &vl.loop, NULL), RESIL_EINVAL);
    assert_null(m);
    virtual_loop_destroy(&vl);
}

static void a_start_needs_a_multi_a_handle_and_done(void **state)
{
    fx *f = *state;
    mx x;
    mx_open(f, &x);
    done_box d = {.done = false};
    assert_int_equal(resil_http_start(NULL, f->easy, &f->req, on_done, &d, NULL), RESIL_EINVAL);
    assert_int_equal(resil_http_start(x.m, NULL, &f->req, on_done, &d, NULL), RESIL_EINVAL);
    assert_int_equal(resil_http_start(x.m, f->easy, &f->req, NULL, &d, NULL), RESIL_EINVAL);
    assert_false(d.done);
    mx_close(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_thousand_calls_run_at_once_on_one_thread, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(retry_after_is_waited_on_the_loops_time, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(one_breaker_guards_every_transfer_to_an_authority,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_fired_request_token_takes_the_transfer_off_the_multi_handle,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_cancel_mid_transfer_takes_it_off_the_multi_handle,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(
            a_cancel_from_the_calls_own_progress_callback_takes_it_off, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(an_attempt_timeout_ends_the_transfer_on_virtual_time,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(
            a_hedge_is_a_concurrent_transfer_and_the_loser_is_removed, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_post_without_a_key_is_sent_once, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_post_with_a_key_sends_the_same_key_on_every_attempt,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(callers_private_pointer_is_back_after_the_call,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_calls_done_may_start_the_next_call_on_its_handle,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_loop_without_descriptor_watches_is_refused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_multi_needs_a_client_a_loop_and_out, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_start_needs_a_multi_a_handle_and_done, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
