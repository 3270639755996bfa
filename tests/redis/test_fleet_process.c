/*
 * test_fleet_process.c — two separate processes sharing a breaker: what an
 * instance in another process does (trip it, close it by hand) is seen
 * here, by PUBLISH, without this process asking.
 *
 * The other process is this test program run again with --child, so it
 * links exactly the same library; both use the system clock, as separate
 * processes on one machine would.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "fleet_test.h"

#define NAME "cross-process"

static resil_redis_breaker_opts real_time_opts(void)
{
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o);
    o.name = NAME;
    o.rules.kind = RESIL_BREAKER_CONSECUTIVE;
    o.rules.failure_threshold = 3;
    o.rules.break_duration = RESIL_S(60); /* never elapses during the test */
    return o;
}

/* The other instance: `trip` records three failures, `close` closes the
 * shared breaker by hand. Exit status 0 when it did so. */
static int child(const char *url, const char *action)
{
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = url;
    o.timeout = FLEET_TIMEOUT;
    resil_redis *r = NULL;
    resil_err err;
    if (resil_redis_new(&o, &r, &err) != 0) {
        fprintf(stderr, "child: %s\n", err.message);
        return 2;
    }
    resil_redis_breaker_opts bo = real_time_opts();
    resil_breaker *b = NULL;
    if (resil_redis_breaker_new(r, &bo, &b, &err) != 0) {
        fprintf(stderr, "child: %s\n", err.message);
        return 3;
    }
    int rc = 0;
    if (strcmp(action, "trip") == 0) {
        for (int i = 0; i < 3; i++) {
            resil_breaker_permit p;
            rc |= resil_breaker_acquire(b, &p);
            rc |= resil_breaker_record(b, &p, RESIL_BREAKER_FAILURE);
        }
        rc |= resil_redis_sync(r);
        rc |= resil_breaker_state_of(b) != RESIL_BREAKER_OPEN;
    } else {
        rc = resil_breaker_close(b);
    }
    resil_breaker_free(b);
    resil_redis_free(r);
    return rc == 0 ? 0 : 4;
}

static void run_child(const char *action)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_fleet_process", "--child",
              redis_server_url(fleet_server), action, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static resil_outcome count_call_op(resil_attempt_ctx *ctx)
{
    (*(int *)ctx->user)++;
    return resil_ok();
}

static void a_trip_in_another_process_makes_this_one_reject(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = real_time_opts();
    resil_breaker *b = fleet_breaker(r, &o);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);

    run_child("trip");
    fleet_wait_until(resil_breaker_state_of(b) == RESIL_BREAKER_OPEN);

    int calls = 0;
    resil_attempt_ctx ctx = {.attempt = 1, .deadline = RESIL_INSTANT_MAX,
                             .clock = resil_clock_system(), .user = &calls};
    resil_outcome out;
    assert_int_equal(resil_breaker_execute(b, count_call_op, &ctx, NULL, NULL, &out),
                     RESIL_EREJECTED);
    assert_int_equal(calls, 0);
    assert_true(out.retry_after > RESIL_S(50) && out.retry_after <= RESIL_S(60));
    resil_breaker_free(b);
    resil_redis_free(r);
}

static void a_close_by_hand_in_another_process_reopens_the_way_here(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = real_time_opts();
    resil_breaker *b = fleet_breaker(r, &o);
    fleet_calls(b, 3, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_OPEN);

    run_child("close");
    fleet_wait_until(resil_breaker_state_of(b) == RESIL_BREAKER_CLOSED);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    resil_breaker_free(b);
    resil_redis_free(r);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_trip_in_another_process_makes_this_one_reject),
        T(a_close_by_hand_in_another_process_reopens_the_way_here),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
