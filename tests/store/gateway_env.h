/*
 * gateway_env.h — the fixture a gateway test file starts from: a temporary
 * directory, the counting upstream, and `resil gateway` in front of it on
 * an SQLite store in that directory; and the check that a command line is
 * refused by name. Header-only (static inline), for the cmocka tests of
 * tests/store and tests/redis, so the testkit the benchmarks link stays
 * free of cmocka.
 */
#ifndef RESIL_TEST_GATEWAY_ENV_H
#define RESIL_TEST_GATEWAY_ENV_H

#include "gateway_proc.h"
#include "test.h"
#include "upstream.h"

typedef struct gateway_env {
    char *dir;
    upstream *up;
    gateway_proc gw;
    unsigned starts;
    char orders[128]; /* the gateway's URL + "/orders" */
} gateway_env;

/* cmocka's setup and teardown: *state is the gateway_env. */
static inline int gateway_env_setup(void **state)
{
    gateway_env *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -1;
    e->dir = test_tmpdir();
    e->up = upstream_start();
    *state = e;
    return e->dir == NULL || e->up == NULL ? -1 : 0;
}

static inline int gateway_env_teardown(void **state)
{
    gateway_env *e = *state;
    if (e->gw.pid > 0)
        gateway_stop(&e->gw);
    if (e->up != NULL)
        upstream_stop(e->up);
    if (e->dir != NULL)
        test_rmtree(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

/* Start the gateway with `extra` (NULL-ended, at most 16) after its
 * upstream and store. Each start logs to a file of its own, so a restarted
 * gateway's first line is never the previous one's. */
static inline void gateway_env_start(gateway_env *e, const char *const extra[])
{
    char store[600], log[600];
    snprintf(store, sizeof store, "sqlite:%s/gateway.db", e->dir);
    snprintf(log, sizeof log, "%s/gateway-%u.log", e->dir, ++e->starts);
    const char *args[24] = {"--upstream", upstream_url(e->up), "--store", store};
    size_t n = 4;
    for (size_t i = 0; extra[i] != NULL && n < 20; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    if (gateway_start(&e->gw, test_build_path("resil"), log, args) != 0)
        fail_msg("the gateway did not start");
    snprintf(e->orders, sizeof e->orders, "%s/orders", e->gw.url);
}

/* Run `resil gateway --listen … --upstream … ARGS` to completion: it exits
 * 125 with `text` on stderr. */
static inline void gateway_expect_usage(const char *text, const char *const args[])
{
    const char *argv[24] = {"gateway", "--listen", "127.0.0.1:0", "--upstream",
                            "http://127.0.0.1:9"};
    size_t n = 5;
    for (size_t i = 0; args[i] != NULL && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char err[4096];
    int rc = run_capture(test_build_path("resil"), argv, err, sizeof err);
    if (strstr(err, text) == NULL)
        fail_msg("expected '%s' in:\n%s", text, err);
    assert_int_equal(rc, 125);
}

typedef struct gateway_log_wait {
    const gateway_proc *g;
    const char *text;
} gateway_log_wait;

static inline bool gateway_log_says(void *ud)
{
    const gateway_log_wait *w = ud;
    return gateway_log_contains(w->g, w->text);
}

/* Whether the gateway's log comes to say `text` (test_wait_until): it acts
 * on a signal on its own thread, so its line is waited for, not read. */
static inline bool gateway_log_shows(const gateway_proc *g, const char *text)
{
    gateway_log_wait w = {g, text};
    return test_wait_until(gateway_log_says, &w, 5);
}

#endif
