/*
 * test_fleet_deadline.c — a call to Redis is bounded by one deadline, set
 * when it starts: the connection's handshake, a reply that arrives in
 * pieces, and a script call resent after NOSCRIPT all end with "no answer
 * within" the timeout once it has passed, however each single read fares.
 *
 * Nothing here measures speed, and no verdict hangs on a race. Fake servers
 * on loopback answer slowly on purpose, each piece well within the timeout
 * and the whole in twice the bound below, or never: a per-read bound (or a
 * fresh deadline for the resend) would let the call succeed or keep it
 * waiting past that bound, while the bound on the whole call ends it at the
 * timeout. The bound is seconds away from the timeout, so a stalled machine
 * is not taken for a per-read bound.
 */
#include "../../src/redis/conn.h"
#include "fleet_test.h"

/* The timeout of the calls that time out, and the bound on how long they
 * may take: twenty times over, and half of what the slow answers take. */
#define TIMEOUT RESIL_MS(500)
#define GENEROUS RESIL_S(10)
/* A trickle's pace: each byte well within the timeout. */
#define PIECE_MS 200


/* FLEET_FAKE_CLOSED is 102 bytes: 20 s at PIECE_MS. */

/* A status line that never ends: 101 bytes (20 s at PIECE_MS), no CRLF. */
#define PONGS_10 "PONG PONG PONG PONG PONG PONG PONG PONG PONG PONG "
#define ENDLESS_PONG "+" PONGS_10 PONGS_10

/* The answer of a server that never answers: nothing, and the
 * connection stays open. */
#define SILENCE ""

static int64_t mono_ns(void) { return resil_clock_now(resil_clock_system()); }

static redisContext *connect_to(fake_server *f, resil_duration timeout, char *why, size_t cap)
{
    fleet_url u;
    assert_int_equal(resil__fleet_url_parse(fake_server_url(f), &u, NULL), 0);
    fleet_conn_fail fail;
    return resil__fleet_connect(&u, timeout, &fail, why, cap);
}

typedef struct call {
    int rc;
    resil_duration took;
    char why[200];
} call;

/* One probe request with a deadline `within` from its start, on a client
 * configured with `timeout` (which the library makes every deadline from,
 * and which the error names). */
static call script_call_within(fake_server *f, resil_duration within, resil_duration timeout)
{
    call c = {0};
    redisContext *ctx = connect_to(f, FLEET_TIMEOUT, c.why, sizeof c.why);
    assert_non_null(ctx);
    fleet_config cfg = {.prefix = "resil:", .channel = "resil:events", .timeout = timeout};
    fleet_cmd cmd = {.op = FLEET_PROBE, .key = "resil:breaker:x", .name = "x"};
    fleet_state s;
    uint64_t noscript = 0, sent = 0;
    int64_t t0 = mono_ns();
    c.rc = resil__fleet_run(ctx, &cmd, &cfg, FLEET_FAKE_SHA, resil__fleet_deadline(within), &s,
                            &noscript, &sent, c.why, sizeof c.why);
    c.took = mono_ns() - t0;
    resil__fleet_close(ctx);
    return c;
}

/* One probe request by `timeout`, as a caller makes it. */
static call script_call(fake_server *f, resil_duration timeout)
{
    return script_call_within(f, timeout, timeout);
}

static void an_answer_arriving_within_the_timeout_is_taken(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"EVALSHA", FLEET_FAKE_CLOSED, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    call c = script_call(f, FLEET_TIMEOUT); /* generous: a loaded machine is no outage */
    assert_int_equal(c.rc, 0);
    fake_server_stop(f);
}

static void an_answer_trickled_past_the_timeout_times_the_call_out(void **state)
{
    (void)state;
    /* Every read succeeds; the whole takes 20 s, and would succeed then. */
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"EVALSHA", FLEET_FAKE_CLOSED, 0, PIECE_MS, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    call c = script_call(f, TIMEOUT);
    assert_int_equal(c.rc, RESIL_EBACKEND);
    assert_string_equal(c.why, "EVALSHA: no answer within 500ms");
    assert_true(c.took < GENEROUS);
    fake_server_stop(f);
}

static void a_resend_after_noscript_shares_the_calls_deadline(void **state)
{
    (void)state;
    /* NOSCRIPT at once, the EVAL never answered. The call's deadline is
     * 2 s away, the configured timeout 30 s: a resend that took a fresh
     * deadline from the timeout would wait 30 s, one that shares the
     * call's ends at 2 s. */
    fake_answer answers[] = {
        {"PING", "+PONG\r\n", 0, 0, NULL, 0},
        {"EVALSHA", "-NOSCRIPT No matching script. Please use EVAL.\r\n", 0, 0, NULL, 0},
        {"EVAL", SILENCE, 0, 0, NULL, 0},
        {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    call c = script_call_within(f, FLEET_TIMEOUT, RESIL_S(30));
    assert_int_equal(c.rc, RESIL_EBACKEND);
    assert_string_equal(c.why, "EVAL: no answer within 30s");
    assert_true(c.took < GENEROUS);
    fake_server_stop(f);
}

static void the_handshake_is_bounded_as_a_whole(void **state)
{
    (void)state;
    /* A PONG that goes on for 20 s, a byte at a time: a per-read bound
     * would keep reading it to the end, the bound on the whole stops. */
    fake_answer answers[] = {{"PING", ENDLESS_PONG, 0, PIECE_MS, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    char why[200];
    int64_t t0 = mono_ns();
    redisContext *c = connect_to(f, TIMEOUT, why, sizeof why);
    resil_duration took = mono_ns() - t0;
    assert_null(c);
    assert_string_equal(why, "PING: no answer within 500ms");
    assert_true(took < GENEROUS);
    fake_server_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_answer_arriving_within_the_timeout_is_taken),
        cmocka_unit_test(an_answer_trickled_past_the_timeout_times_the_call_out),
        cmocka_unit_test(a_resend_after_noscript_shares_the_calls_deadline),
        cmocka_unit_test(the_handshake_is_bounded_as_a_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
