/*
 * test_fleet_concurrency_limit.c — the fleet-wide concurrency limit against
 * a real redis-server: two instances sharing one limit, leases that lapse
 * unless renewed (on a shared fake clock), an instance killed with SIGKILL
 * whose permits come back after its lease (a second process renewing on
 * the system clock, judged here on a fake clock), the local bulkhead while
 * Redis is killed, and a pipeline.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet_test.h"

static resil_redis_concurrency_opts limit_of(const char *name, int32_t max, resil_fake_clock *fc)
{
    resil_redis_concurrency_opts o;
    resil_redis_concurrency_opts_default(&o);
    o.name = name;
    o.max_concurrency = max;
    o.lease = RESIL_S(1);
    o.instances = 2;
    o.clock = fc != NULL ? resil_fake_clock_clock(fc) : NULL;
    return o;
}

static resil_bulkhead *fleet_limit(resil_redis *r, const resil_redis_concurrency_opts *o)
{
    resil_bulkhead *b = NULL;
    resil_err err;
    int rc = resil_redis_concurrency_new(r, o, &b, &err);
    if (rc != 0)
        fprintf(stderr, "fleet_limit: %s\n", err.message);
    assert_int_equal(rc, 0);
    return b;
}

static resil_redis_concurrency_stats stats_of(resil_bulkhead *b)
{
    resil_redis_concurrency_stats s;
    assert_int_equal(resil_redis_concurrency_stats_get(b, &s), 0);
    return s;
}

typedef struct pair {
    resil_fake_clock *fc;
    resil_redis *ra, *rb;
    resil_bulkhead *a, *b;
} pair;

static void pair_open(pair *p, const char *name, int32_t max)
{
    p->fc = fleet_clock();
    p->ra = fleet_client(NULL);
    p->rb = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of(name, max, p->fc);
    p->a = fleet_limit(p->ra, &o);
    p->b = fleet_limit(p->rb, &o);
}

static void pair_close(pair *p)
{
    resil_bulkhead_free(p->a);
    resil_bulkhead_free(p->b);
    resil_redis_free(p->ra);
    resil_redis_free(p->rb);
    resil_fake_clock_free(p->fc);
}

static void two_instances_share_one_limit(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "share", 3);
    resil_bulkhead_ticket t[4] = {{0}};
    assert_int_equal(resil_bulkhead_acquire(p.a, NULL, &t[0]), 0);
    assert_int_equal(resil_bulkhead_acquire(p.a, NULL, &t[1]), 0);
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t[2]), 0);
    assert_int_equal(resil_bulkhead_acquire(p.b, NULL, &t[3]), RESIL_EREJECTED);
    assert_int_equal(resil_bulkhead_try_acquire(p.a, &t[3]), RESIL_EREJECTED);
    assert_int_equal(stats_of(p.a).fleet_in_use, 3);
    assert_int_equal(resil_bulkhead_in_flight(p.a), 2);
    assert_int_equal(resil_bulkhead_in_flight(p.b), 1);

    resil_bulkhead_release(&t[0]);
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t[3]), 0);
    assert_int_equal(stats_of(p.b).fleet_in_use, 3);
    for (int i = 0; i < 4; i++)
        resil_bulkhead_release(&t[i]);
    assert_int_equal(stats_of(p.b).fleet_in_use, 0);
    pair_close(&p);
}

static void a_lease_nobody_renews_lapses_and_its_permit_returns(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "lapse", 1);
    resil_bulkhead_ticket held = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(p.a, NULL, &held), 0);
    resil_fake_clock_advance(p.fc, RESIL_MS(999));
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t), RESIL_EREJECTED);
    resil_fake_clock_advance(p.fc, RESIL_MS(1));
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t), 0);
    resil_bulkhead_release(&t);
    resil_bulkhead_release(&held);
    pair_close(&p);
}

static void a_renewed_lease_holds_its_permit(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "renew", 1);
    resil_bulkhead_ticket held = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(p.a, NULL, &held), 0);
    resil_fake_clock_advance(p.fc, RESIL_MS(800));
    assert_int_equal(resil_redis_sync(p.ra), 0); /* renews: expiry 1800 ms */
    resil_fake_clock_advance(p.fc, RESIL_MS(999));
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t), RESIL_EREJECTED);
    resil_fake_clock_advance(p.fc, RESIL_MS(1));
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t), 0);
    resil_bulkhead_release(&t);
    resil_bulkhead_release(&held);
    pair_close(&p);
}

static void the_options_are_checked_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("opts", 0, NULL);
    resil_bulkhead *b = NULL;
    resil_err err;
    assert_int_equal(resil_redis_concurrency_new(r, &o, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_concurrency.max_concurrency must be >= 1, got 0");
    o = limit_of("opts", 1, NULL);
    o.lease = RESIL_MS(9);
    assert_int_equal(resil_redis_concurrency_new(r, &o, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message,
                        "redis_concurrency.lease must be in [10ms, 1d], got 9000000 ns");
    assert_null(b);
    resil_redis_free(r);
}

/* ---- a killed instance ------------------------------------------------------ */

/* The other process renews on the system clock, which a loaded machine may
 * not run for a while; its lease is long enough beside its renewal (every
 * third of it) that no such stall lets it lapse while the process lives.
 * This side reads the leases' expiries in Redis and judges them on a fake
 * clock set to those instants, so what it checks does not depend on when
 * it runs. */
#define KILLED "killed"
#define KILLED_LEASE RESIL_S(6)

/* The other instance: take both permits on the system clock, say so on
 * stdout, and hold them (renewing) until killed. */
static int child(const char *url)
{
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = url;
    o.timeout = FLEET_TIMEOUT;
    resil_redis *r = NULL;
    resil_err err;
    if (resil_redis_new(&o, &r, &err) != 0)
        return 2;
    resil_redis_concurrency_opts co = limit_of(KILLED, 2, NULL);
    co.lease = KILLED_LEASE;
    resil_bulkhead *b = NULL;
    if (resil_redis_concurrency_new(r, &co, &b, &err) != 0)
        return 3;
    resil_bulkhead_ticket t[2];
    if (resil_bulkhead_try_acquire(b, &t[0]) != 0 || resil_bulkhead_try_acquire(b, &t[1]) != 0)
        return 4;
    if (write(STDOUT_FILENO, "k", 1) != 1)
        return 5;
    for (;;)
        pause();
}

typedef struct expiries {
    int64_t first, last; /* wall ms */
} expiries;

/* When the two leases held on the limit lapse, as Redis holds them. */
static expiries lease_expiries(void)
{
    static const char key[] = "resil:conc:" KILLED;
    const char *argv[] = {"ZRANGE", key, "0", "-1", "WITHSCORES"};
    redisReply *r = redis_server_command(fleet_server, 5, argv);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 4);
    expiries e = {INT64_MAX, INT64_MIN};
    for (size_t i = 1; i < r->elements; i += 2) {
        int64_t at = strtoll(r->element[i]->str, NULL, 10);
        e.first = at < e.first ? at : e.first;
        e.last = at > e.last ? at : e.last;
    }
    freeReplyObject(r);
    return e;
}

static pid_t start_child(void)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        execl("/proc/self/exe", "test_fleet_concurrency_limit", "--child",
              redis_server_url(fleet_server), (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char c = 0;
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    return pid;
}

static void a_killed_instance_permits_come_back_after_its_lease(void **state)
{
    (void)state;
    pid_t pid = start_child();
    expiries taken = lease_expiries();
    /* Alive, the other instance keeps renewing its leases (every third of
     * one): once it has a third of a lease after taking them, the limit is
     * still full then, a third of a lease after its first leases lapsed. */
    int64_t later = taken.last + KILLED_LEASE / RESIL_MS(1) / 3;
    fleet_wait_until(lease_expiries().first >= later);
    resil_fake_clock *fc = NULL;
    assert_int_equal(resil_fake_clock_new(0, later * 1000000, &fc), 0);
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of(KILLED, 2, fc);
    resil_bulkhead *b = fleet_limit(r, &o);
    resil_bulkhead_ticket t = {0}, u = {0};
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), RESIL_EREJECTED);

    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    /* Killed, it renews no more: its permits come back when its leases
     * lapse, and not a millisecond before. */
    expiries left = lease_expiries();
    resil_fake_clock_advance(fc, RESIL_MS(left.first - 1 - later));
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), RESIL_EREJECTED);
    resil_fake_clock_advance(fc, RESIL_MS(left.last - (left.first - 1)));
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), 0);
    assert_int_equal(resil_bulkhead_try_acquire(b, &u), 0);
    assert_int_equal(stats_of(b).fleet_in_use, 2);
    resil_bulkhead_release(&t);
    resil_bulkhead_release(&u);
    resil_bulkhead_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

/* ---- Redis away -------------------------------------------------------------- */

static void killed_redis_hands_over_to_the_local_share_and_back(void **state)
{
    (void)state;
    fleet_events ev;
    fleet_events_init(&ev);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_opts ro = fleet_opts(&ev); /* a killed Redis refuses at once */
    ro.reconnect.base = RESIL_MS(10);
    ro.reconnect.max_delay = RESIL_MS(100);
    resil_redis *r = fleet_client_with(&ro);
    resil_redis_concurrency_opts o = limit_of("outage", 4, fc);
    resil_bulkhead *b = fleet_limit(r, &o);
    resil_bulkhead_ticket fleet = {0}, t[3] = {{0}};
    assert_int_equal(resil_bulkhead_try_acquire(b, &fleet), 0);

    redis_server_kill(fleet_server);
    /* Half the fleet's limit, no queue. */
    assert_int_equal(resil_bulkhead_try_acquire(b, &t[0]), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t[1]), 0);
    assert_int_equal(resil_bulkhead_acquire(b, NULL, &t[2]), RESIL_EREJECTED);
    resil_redis_concurrency_stats s = stats_of(b);
    assert_int_equal(s.fleet_admitted, 1);
    assert_int_equal(s.local_admitted, 2);
    assert_int_equal(s.local_rejected, 1);
    assert_int_equal(s.held, 3);
    /* Down, a release gives back a local permit first. */
    resil_bulkhead_release(&fleet);
    assert_int_equal(resil_bulkhead_try_acquire(b, &t[2]), 0);
    assert_int_equal(stats_of(b).local_admitted, 3);

    assert_int_equal(redis_server_restart(fleet_server), 0);
    fleet_wait_until(fleet_ups(&ev) == 1);
    resil_bulkhead_ticket back = {0};
    assert_int_equal(resil_bulkhead_try_acquire(b, &back), 0);
    s = stats_of(b);
    assert_int_equal(s.fleet_admitted, 2);
    assert_int_equal(s.fleet_in_use, 1); /* the restart lost the old lease */
    assert_int_equal(s.held, 4);
    resil_bulkhead_release(&back);
    for (int i = 0; i < 3; i++)
        resil_bulkhead_release(&t[i]);
    assert_int_equal(stats_of(b).held, 0);

    resil_bulkhead_free(b);
    resil_redis_free(r);
    fleet_events_destroy(&ev);
    resil_fake_clock_free(fc);
}

static resil_outcome ok(resil_attempt_ctx *ctx)
{
    (void)ctx;
    return resil_ok();
}

/* Construction refused with RESIL_EINVAL and exactly `message`. */
static void limit_refused(resil_redis *r, const resil_redis_concurrency_opts *o,
                          const char *message)
{
    resil_bulkhead *b = (resil_bulkhead *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_concurrency_new(r, o, &b, &err), RESIL_EINVAL);
    assert_null(b);
    assert_int_equal(err.code, RESIL_EINVAL);
    assert_string_equal(err.message, message);
}

static void zero_instances_are_refused_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("opts", 1, NULL);
    o.instances = 0;
    limit_refused(r, &o, "redis_concurrency.instances must be >= 1, got 0");
    resil_redis_free(r);
}

static void a_lease_over_a_day_is_refused_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("opts", 1, NULL);
    o.lease = RESIL_S(86400) + 1;
    limit_refused(r, &o, "redis_concurrency.lease must be in [10ms, 1d], got 86400000000001 ns");
    resil_redis_free(r);
}

static void a_lease_of_10ms_or_a_day_is_accepted(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("opts", 1, fc);
    o.lease = RESIL_MS(10);
    resil_bulkhead_free(fleet_limit(r, &o));
    o.lease = RESIL_S(86400);
    resil_bulkhead_free(fleet_limit(r, &o));
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void concurrency_new_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("opts", 1, NULL);
    resil_bulkhead *b = (resil_bulkhead *)1;
    resil_err err;
    assert_int_equal(resil_redis_concurrency_new(NULL, &o, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_concurrency: a client and options are required");
    assert_null(b);
    assert_int_equal(resil_redis_concurrency_new(r, NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_concurrency: a client and options are required");
    assert_int_equal(resil_redis_concurrency_new(r, &o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_concurrency: out must not be NULL");
    resil_redis_free(r);
}

static void stats_are_refused_for_a_bulkhead_that_is_not_a_fleet_limit(void **state)
{
    (void)state;
    resil_bulkhead_opts lo;
    resil_bulkhead_opts_default(&lo);
    resil_bulkhead *local = NULL;
    assert_int_equal(resil_bulkhead_new(&lo, &local, NULL), 0);
    resil_redis_concurrency_stats s;
    assert_int_equal(resil_redis_concurrency_stats_get(local, &s), RESIL_EINVAL);
    assert_int_equal(resil_redis_concurrency_stats_get(NULL, &s), RESIL_EINVAL);
    resil_bulkhead_free(local);
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("opts", 1, NULL);
    resil_bulkhead *b = fleet_limit(r, &o);
    assert_int_equal(resil_redis_concurrency_stats_get(b, NULL), RESIL_EINVAL);
    resil_bulkhead_free(b);
    resil_redis_free(r);
}

static void a_pipeline_takes_the_fleet_limit(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "pipeline", 1);
    resil_pipeline_builder *b = NULL;
    assert_int_equal(resil_pipeline_builder_new("fleet", &b, NULL), 0);
    assert_int_equal(resil_pipeline_use_bulkhead(b, p.a), 0);
    resil_pipeline *pl = NULL;
    assert_int_equal(resil_pipeline_build(b, &pl, NULL), 0);
    resil_pipeline_builder_free(b);

    resil_pipeline_result res;
    assert_int_equal(resil_pipeline_execute(pl, ok, NULL, &res), 0);
    assert_int_equal(res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(stats_of(p.a).fleet_in_use, 0);
    resil_bulkhead_ticket t = {0};
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t), 0);
    assert_int_equal(resil_pipeline_execute(pl, ok, NULL, &res), 0);
    assert_int_equal(res.rejected_by, RESIL_STRATEGY_BULKHEAD);
    resil_bulkhead_release(&t);
    resil_pipeline_free(pl);
    pair_close(&p);
}

static void the_factory_builds_a_fleet_limit_from_bulkhead_options(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_limits_factory f = {.client = r};
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = 1;
    resil_bulkhead *b = NULL;
    assert_int_equal(resil_redis_concurrency_factory("made", &o, &b, NULL, &f), 0);
    assert_string_equal(resil_bulkhead_impl_name(b), "redis");
    resil_bulkhead_ticket t = {0}, u = {0};
    assert_int_equal(resil_bulkhead_try_acquire(b, &t), 0);
    assert_int_equal(resil_bulkhead_try_acquire(b, &u), RESIL_EREJECTED);
    resil_bulkhead_release(&t);
    resil_bulkhead_free(b);
    resil_redis_free(r);
}

static void concurrency_factory_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_limits_factory f = {.client = r};
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    resil_bulkhead *b = NULL;
    resil_err err;
    assert_int_equal(resil_redis_concurrency_factory("made", &o, &b, &err, NULL), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_concurrency: the factory needs its client");
    assert_int_equal(resil_redis_concurrency_factory("made", NULL, &b, &err, &f), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_concurrency: the factory needs its client");
    assert_null(b);
    resil_redis_free(r);
}

static void a_lapsed_lease_its_holder_still_counts_is_forgotten_when_taken_again(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, "forgotten", 1);
    resil_bulkhead_ticket first = {0}, second = {0}, t = {0};
    assert_int_equal(resil_bulkhead_acquire(p.a, NULL, &first), 0);
    /* A stalled instance: its lease lapses before it renews or releases. */
    resil_fake_clock_advance(p.fc, RESIL_S(1));
    assert_int_equal(resil_bulkhead_acquire(p.a, NULL, &second), 0);
    resil_redis_concurrency_stats s = stats_of(p.a);
    assert_int_equal(s.fleet_admitted, 2);
    assert_int_equal(s.held, 1); /* the fleet keeps one lease: so does the instance */

    resil_bulkhead_release(&second); /* gives the live lease back */
    assert_int_equal(resil_bulkhead_try_acquire(p.b, &t), 0);
    resil_bulkhead_release(&first); /* nothing left to give */
    assert_int_equal(stats_of(p.a).held, 0);
    assert_int_equal(stats_of(p.b).held, 1);
    resil_bulkhead_release(&t);
    pair_close(&p);
}

static void a_fleet_limit_describes_itself_as_its_maximum_with_no_queue(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of("described", 3, NULL);
    resil_bulkhead *b = fleet_limit(r, &o);
    resil_bulkhead_opts d;
    memset(&d, 0xff, sizeof d);
    resil_bulkhead_opts_get(b, &d);
    assert_int_equal(d.max_concurrency, 3);
    assert_int_equal(d.max_queue, 0);
    assert_false(d.queue);
    resil_bulkhead_free(b);
    resil_redis_free(r);
}

static void a_bad_name_is_refused_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_concurrency_opts o = limit_of(" spaced", 1, NULL);
    limit_refused(r, &o,
                  "redis_concurrency.name must be 1 to 255 printable bytes, not starting "
                  "with a space");
    resil_redis_free(r);
}

static void a_fallback_the_bulkhead_refuses_is_refused_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_bulkhead_opts fallback;
    resil_bulkhead_opts_default(&fallback);
    fallback.max_concurrency = 0;
    resil_redis_concurrency_opts o = limit_of("bad-fallback", 1, NULL);
    o.fallback = &fallback;
    limit_refused(r, &o, "redis_concurrency.fallback: bulkhead.max_concurrency must be >= 1, got 0");
    resil_redis_free(r);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(two_instances_share_one_limit),
        T(a_lease_nobody_renews_lapses_and_its_permit_returns),
        T(a_renewed_lease_holds_its_permit),
        T(the_options_are_checked_by_name),
        T(a_lapsed_lease_its_holder_still_counts_is_forgotten_when_taken_again),
        T(a_fleet_limit_describes_itself_as_its_maximum_with_no_queue),
        T(a_bad_name_is_refused_by_name),
        T(a_fallback_the_bulkhead_refuses_is_refused_by_name),
        T(zero_instances_are_refused_by_name),
        T(a_lease_over_a_day_is_refused_by_name),
        T(a_lease_of_10ms_or_a_day_is_accepted),
        T(concurrency_new_refuses_null_arguments),
        T(stats_are_refused_for_a_bulkhead_that_is_not_a_fleet_limit),
        T(a_pipeline_takes_the_fleet_limit),
        T(a_killed_instance_permits_come_back_after_its_lease),
        T(killed_redis_hands_over_to_the_local_share_and_back),
        T(the_factory_builds_a_fleet_limit_from_bulkhead_options),
        T(concurrency_factory_refuses_null_arguments),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
