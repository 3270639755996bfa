/*
 * test_fleet_replies.c — what Redis sends back is decoded without trusting
 * its shape: an answer or a message of another type, with an element
 * missing or extra, or with a number the script cannot produce (a state
 * that does not fit the cached word, a slot past the last, an epoch that
 * would overflow it) is malformed — counted, never applied.
 *
 * The decoders are pure, so most of this feeds them replies built by hand
 * from RESP text through hiredis's own reader; the last two tests stage
 * the same on a real server: a key edited by hand, and strangers
 * publishing on the fleet's channel.
 */
#include <inttypes.h>

#include "../../src/redis/conn.h"
#include "fleet_test.h"

/* ---- replies built by hand ----------------------------------------------- */

static redisReply *parse_resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(rd, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(rd);
    return reply;
}

/* An array of n integers. */
static redisReply *integers(const int64_t *v, size_t n)
{
    char text[1024];
    size_t len = (size_t)snprintf(text, sizeof text, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, ":%" PRId64 "\r\n", v[i]);
    return parse_resp(text);
}

/* A published message: ["message", "resil:events", payload]. */
static redisReply *message(const char *payload)
{
    char text[1024];
    snprintf(text, sizeof text, "*3\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n$%zu\r\n%s\r\n",
             strlen(payload), payload);
    return parse_resp(text);
}

enum { CODE, STATE, EPOCH, UNTIL, REASON, RUN, TOTAL, FAILURES, SLOW, BREAK, OPENS,
       LASTOPEN, SUCCESSES, INFLIGHT, SLOT, TICKET, RETRY, PTTL, ANSWER_LEN };

/* A half-open breaker granting slot 2 to ticket 7. */
static const int64_t good[ANSWER_LEN] = {
    [CODE] = FLEET_GRANTED, [STATE] = RESIL_BREAKER_HALF_OPEN, [EPOCH] = 1700000000000123,
    [UNTIL] = 1700000005000, [REASON] = RESIL_BREAKER_BY_BREAK_ELAPSED, [RUN] = 0,
    [TOTAL] = 12, [FAILURES] = 5, [SLOW] = 1, [BREAK] = 5000, [OPENS] = 3,
    [LASTOPEN] = 1700000000000, [SUCCESSES] = 1, [INFLIGHT] = 3, [SLOT] = 2, [TICKET] = 7,
    [RETRY] = 0, [PTTL] = 86400000,
};

static const fleet_cmd probe_cmd = {.op = FLEET_PROBE};
static const fleet_cmd status_cmd = {.op = FLEET_STATUS};
static const fleet_cmd lease_cmd = {.op = FLEET_LEASE};

static int decode(const fleet_cmd *c, redisReply *r, fleet_state *s)
{
    int rc = resil__fleet_decode(c, r, s);
    freeReplyObject(r);
    return rc;
}

/* The good answer with field i set to v. */
static int decode_with(size_t i, int64_t v)
{
    int64_t a[ANSWER_LEN];
    memcpy(a, good, sizeof a);
    a[i] = v;
    fleet_state s;
    return decode(&probe_cmd, integers(a, ANSWER_LEN), &s);
}

/* ---- script answers ---------------------------------------------------------- */

static void a_well_formed_answer_decodes_field_by_field(void **state)
{
    (void)state;
    fleet_state s;
    assert_int_equal(decode(&probe_cmd, integers(good, ANSWER_LEN), &s), 0);
    assert_int_equal(s.code, FLEET_GRANTED);
    assert_int_equal(s.state, RESIL_BREAKER_HALF_OPEN);
    assert_int_equal(s.epoch, 1700000000000123);
    assert_int_equal(s.until_ms, 1700000005000);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_BREAK_ELAPSED);
    assert_int_equal(s.window_total, 12);
    assert_int_equal(s.window_failures, 5);
    assert_int_equal(s.window_slow, 1);
    assert_int_equal(s.break_ms, 5000);
    assert_int_equal(s.opens, 3);
    assert_int_equal(s.lastopen_ms, 1700000000000);
    assert_int_equal(s.successes, 1);
    assert_int_equal(s.inflight, 3);
    assert_int_equal(s.slot, 2);
    assert_int_equal(s.ticket, 7);
    assert_int_equal(s.retry_ms, 0);
    assert_int_equal(s.pttl_ms, 86400000);
}

static void an_answer_of_another_type_is_malformed(void **state)
{
    (void)state;
    static const char *const others[] = {
        ":1\r\n", "$2\r\nok\r\n", "$-1\r\n", "+OK\r\n", "-ERR user_script:1: boom\r\n",
        "*0\r\n", "*-1\r\n",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        fleet_state s;
        assert_int_equal(decode(&probe_cmd, parse_resp(others[i]), &s), RESIL_EIO);
        assert_int_equal(decode(&lease_cmd, parse_resp(others[i]), &s), RESIL_EIO);
    }
}

static void an_answer_one_element_short_or_long_is_malformed(void **state)
{
    (void)state;
    int64_t a[ANSWER_LEN + 1] = {0};
    memcpy(a, good, sizeof good);
    fleet_state s;
    assert_int_equal(decode(&probe_cmd, integers(a, ANSWER_LEN - 1), &s), RESIL_EIO);
    assert_int_equal(decode(&probe_cmd, integers(a, ANSWER_LEN + 1), &s), RESIL_EIO);
}

static void an_answer_with_an_element_that_is_not_an_integer_is_malformed(void **state)
{
    (void)state;
    static const char *const odd[] = {"$-1\r\n", "$1\r\n1\r\n", "*1\r\n:1\r\n", "+1\r\n"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        char text[1024];
        size_t len = (size_t)snprintf(text, sizeof text, "*%d\r\n", ANSWER_LEN);
        for (size_t f = 0; f < ANSWER_LEN; f++)
            len += (size_t)(f == STATE ? snprintf(text + len, sizeof text - len, "%s", odd[i])
                                       : snprintf(text + len, sizeof text - len,
                                                  ":%" PRId64 "\r\n", good[f]));
        fleet_state s;
        assert_int_equal(decode(&probe_cmd, parse_resp(text), &s), RESIL_EIO);
    }
}

static void a_field_outside_what_the_script_produces_is_malformed(void **state)
{
    (void)state;
    static const struct {
        size_t field;
        int64_t value;
    } bad[] = {
        {CODE, -1},
        {CODE, FLEET_MISSING}, /* only for status, and alone */
        {STATE, RESIL_BREAKER_NONE},
        {STATE, RESIL_BREAKER_DISABLED},
        {STATE, 9}, /* would spill into the cached word's epoch */
        {EPOCH, -1},
        {EPOCH, FLEET_EPOCH_MAX + 1},
        {UNTIL, -1},
        {UNTIL, FLEET_WALL_MS_MAX + 1}, /* would overflow in ns */
        {LASTOPEN, -1},
        {LASTOPEN, INT64_MAX},
        {REASON, -1},
        {REASON, RESIL_BREAKER_BY_DISABLE + 1},
        {RUN, -1},
        {RUN, (int64_t)UINT32_MAX + 1},
        {TOTAL, -1},
        {FAILURES, -1},
        {SLOW, -1},
        {BREAK, -1},
        {OPENS, -1},
        {SUCCESSES, -1},
        {INFLIGHT, RESIL_REDIS_MAX_PROBES + 1},
        {SLOT, -1},
        {SLOT, RESIL_REDIS_MAX_PROBES},
        {TICKET, -1},
        {RETRY, -2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (decode_with(bad[i].field, bad[i].value) != RESIL_EIO)
            fail_msg("field %zu = %" PRId64 " was accepted", bad[i].field, bad[i].value);
}

static void every_field_accepts_the_bounds_the_script_can_reach(void **state)
{
    (void)state;
    assert_int_equal(decode_with(STATE, RESIL_BREAKER_CLOSED), 0);
    assert_int_equal(decode_with(STATE, RESIL_BREAKER_ISOLATED), 0);
    assert_int_equal(decode_with(EPOCH, FLEET_EPOCH_MAX), 0);
    assert_int_equal(decode_with(UNTIL, 0), 0); /* never opened */
    assert_int_equal(decode_with(UNTIL, FLEET_WALL_MS_MAX), 0);
    assert_int_equal(decode_with(LASTOPEN, 0), 0);
    assert_int_equal(decode_with(REASON, 0), 0);
    assert_int_equal(decode_with(REASON, RESIL_BREAKER_BY_DISABLE), 0);
    assert_int_equal(decode_with(RUN, UINT32_MAX), 0);
    assert_int_equal(decode_with(INFLIGHT, RESIL_REDIS_MAX_PROBES), 0);
    assert_int_equal(decode_with(SLOT, RESIL_REDIS_MAX_PROBES - 1), 0);
    assert_int_equal(decode_with(RETRY, -1), 0); /* isolated */
    assert_int_equal(decode_with(PTTL, -2), 0);  /* PTTL of a missing key */
}

static void the_missing_key_answer_is_taken_only_from_status(void **state)
{
    (void)state;
    int64_t missing = FLEET_MISSING;
    fleet_state s;
    assert_int_equal(decode(&status_cmd, integers(&missing, 1), &s), 0);
    assert_int_equal(s.code, FLEET_MISSING);
    assert_int_equal(decode(&probe_cmd, integers(&missing, 1), &s), RESIL_EIO);
    int64_t other = FLEET_OK;
    assert_int_equal(decode(&status_cmd, integers(&other, 1), &s), RESIL_EIO);
}

static void a_lease_answer_is_exactly_two_counts(void **state)
{
    (void)state;
    fleet_state s;
    int64_t ok[] = {6000, 2000};
    assert_int_equal(decode(&lease_cmd, integers(ok, 2), &s), 0);
    assert_int_equal(s.tokens, 6000);
    assert_int_equal(s.granted, 2000);

    int64_t three[] = {6000, 2000, 1};
    assert_int_equal(decode(&lease_cmd, integers(three, 1), &s), RESIL_EIO);
    assert_int_equal(decode(&lease_cmd, integers(three, 3), &s), RESIL_EIO);
    int64_t negative[] = {-1, 2000};
    assert_int_equal(decode(&lease_cmd, integers(negative, 2), &s), RESIL_EIO);
    negative[0] = 6000;
    negative[1] = -1;
    assert_int_equal(decode(&lease_cmd, integers(negative, 2), &s), RESIL_EIO);
    assert_int_equal(decode(&lease_cmd, parse_resp("*2\r\n:6000\r\n$4\r\n2000\r\n"), &s),
                     RESIL_EIO);
}

static void a_rate_limit_answer_is_a_verdict_and_a_wait(void **state)
{
    (void)state;
    const fleet_cmd gcra = {.op = FLEET_GCRA};
    fleet_state s;
    int64_t ok[] = {FLEET_DENIED, 2500};
    assert_int_equal(decode(&gcra, integers(ok, 2), &s), 0);
    assert_int_equal(s.code, FLEET_DENIED);
    assert_int_equal(s.retry_us, 2500);

    assert_int_equal(decode(&gcra, integers(ok, 1), &s), RESIL_EIO);
    int64_t verdict[] = {FLEET_DENIED + 1, 0};
    assert_int_equal(decode(&gcra, integers(verdict, 2), &s), RESIL_EIO);
    int64_t wait[] = {FLEET_GRANTED, -1};
    assert_int_equal(decode(&gcra, integers(wait, 2), &s), RESIL_EIO);
}

static void a_concurrency_answer_is_a_verdict_and_two_counts(void **state)
{
    (void)state;
    const fleet_cmd acquire = {.op = FLEET_CACQUIRE};
    fleet_state s;
    int64_t ok[] = {FLEET_GRANTED, 4, 1500};
    assert_int_equal(decode(&acquire, integers(ok, 3), &s), 0);
    assert_int_equal(s.code, FLEET_GRANTED);
    assert_int_equal(s.in_use, 4);
    assert_int_equal(s.retry_ms, 1500);

    assert_int_equal(decode(&acquire, integers(ok, 2), &s), RESIL_EIO);
    int64_t verdict[] = {FLEET_GRANTED - 1, 4, 1500};
    assert_int_equal(decode(&acquire, integers(verdict, 3), &s), RESIL_EIO);
    int64_t live[] = {FLEET_GRANTED, -1, 1500};
    assert_int_equal(decode(&acquire, integers(live, 3), &s), RESIL_EIO);
}

static void error_replies_that_say_redis_cannot_serve_are_told_apart(void **state)
{
    (void)state;
    static const char *const down[] = {
        "-READONLY You can't write against a read only replica. script: x\r\n",
        "-OOM command not allowed when used memory > 'maxmemory'. script: x\r\n",
        "-LOADING Redis is loading the dataset in memory\r\n",
        "-BUSY Redis is busy running a script.\r\n",
        "-MISCONF Redis is configured to save RDB snapshots\r\n",
        "-MASTERDOWN Link with MASTER is down\r\n",
        "-NOAUTH Authentication required.\r\n",
        "-NOPERM User has no permissions to run the 'evalsha' command\r\n",
        "-MOVED 3999 127.0.0.1:6381\r\n",
        "-CLUSTERDOWN The cluster is down\r\n",
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        "-NOREPLICAS Not enough good replicas to write.\r\n",
        "-ASK 3999 127.0.0.1:6381\r\n",
        "-OOM\r\n",
    };
    static const char *const one_command[] = {
        "-ERR user_script:1: Script attempted to access a non local key\r\n",
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        "-NOSCRIPT No matching script. Please use EVAL.\r\n",
        "-READONLYX not a code we know\r\n",
        "-OOMPH\r\n",
        "+READONLY\r\n",
        "$8\r\nREADONLY\r\n",
        "*1\r\n:0\r\n",
    };
    for (size_t i = 0; i < sizeof down / sizeof down[0]; i++) {
        redisReply *r = parse_resp(down[i]);
        if (!resil__fleet_unavailable(r))
            fail_msg("'%s' not taken for Redis being unable to serve", down[i]);
        freeReplyObject(r);
    }
    for (size_t i = 0; i < sizeof one_command / sizeof one_command[0]; i++) {
        redisReply *r = parse_resp(one_command[i]);
        if (resil__fleet_unavailable(r))
            fail_msg("'%s' taken for Redis being unable to serve", one_command[i]);
        freeReplyObject(r);
    }
}

/* ---- published messages --------------------------------------------------------- */

static bool parses(redisReply *m, fleet_state *s, char *name, size_t cap)
{
    const char *at = NULL;
    bool ok = resil__fleet_parse_message(m, s, &at);
    if (ok)
        snprintf(name, cap, "%s", at);
    freeReplyObject(m);
    return ok;
}

static void a_published_state_change_decodes_with_its_name(void **state)
{
    (void)state;
    fleet_state s;
    char name[RESIL_BREAKER_NAME_MAX];
    assert_true(parses(message("1 1700000000000123 1700000005000 1 payments eu-west"), &s, name,
                       sizeof name));
    assert_int_equal(s.state, RESIL_BREAKER_OPEN);
    assert_int_equal(s.epoch, 1700000000000123);
    assert_int_equal(s.until_ms, 1700000005000);
    assert_int_equal(s.reason, RESIL_BREAKER_BY_CONSECUTIVE);
    assert_string_equal(name, "payments eu-west");
    assert_true(parses(message("3 9 0 7 x"), &s, name, sizeof name));
    assert_int_equal(s.until_ms, 0);
}

static void subscription_replies_that_are_not_messages_are_ignored(void **state)
{
    (void)state;
    static const char *const others[] = {
        "*3\r\n$9\r\nsubscribe\r\n$12\r\nresil:events\r\n:1\r\n",
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$12\r\nresil:events\r\n$5\r\n1 2 3\r\n",
        "*2\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n",
        "*3\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n:1\r\n",
        "*3\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n$-1\r\n",
        "*3\r\n:1\r\n$12\r\nresil:events\r\n$11\r\n1 2 3 1 abc\r\n",
        "$7\r\nmessage\r\n",
        "-ERR wrong\r\n",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        fleet_state s;
        char name[RESIL_BREAKER_NAME_MAX];
        if (parses(parse_resp(others[i]), &s, name, sizeof name))
            fail_msg("reply %zu was taken for a state change", i);
    }
}

static void a_message_with_a_number_out_of_range_or_no_name_is_ignored(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "1 2 3",
        "1 2 3 1",
        "1 2 3 1 ",
        "1 2 3 1  leading-space",
        "1 2 3 1 tab\there",
        "9 2 3 1 name",                       /* no such state */
        "4 2 3 1 name",                       /* disabled is never shared */
        "-1 2 3 1 name",
        "1 -2 3 1 name",
        "1 2305843009213693952 3 1 name",     /* FLEET_EPOCH_MAX + 1 */
        "1 99999999999999999999999 3 1 name", /* past int64 */
        "1 2 3 11 name",
        "1 2 -3 1 name",
        "1 2 9223372036855 1 name",            /* FLEET_WALL_MS_MAX + 1 */
        "1x 2 3 1 name",
        "1  2 3 1 name",
        "+1 2 3 1 name",
        "- 2 3 1 name",
        "1 2 3 1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fleet_state s;
        char name[RESIL_BREAKER_NAME_MAX];
        if (parses(message(bad[i]), &s, name, sizeof name))
            fail_msg("'%s' was taken for a state change", bad[i]);
    }
}

/* ---- the same, from a real server ------------------------------------------------- */

static void a_key_edited_by_hand_is_a_command_error_not_a_state(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("edited", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    const char *edit[] = {"HSET", "resil:breaker:edited", "state", "9"};
    assert_int_equal(redis_server_integer(fleet_server, 4, edit), 0);

    fleet_calls(b, 1, RESIL_BREAKER_FAILURE);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.command_errors, 1);
    assert_true(st.connected);
    resil_redis_breaker_status s;
    assert_int_equal(resil_redis_breaker_status_get(b, &s), RESIL_EIO);
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED);
    fleet_calls(b, 1, RESIL_BREAKER_SUCCESS);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

static void publish(const char *payload)
{
    const char *argv[] = {"PUBLISH", "resil:events", payload};
    assert_true(redis_server_integer(fleet_server, 3, argv) >= 0);
}

static void publish_at(const char *before, uint64_t epoch, const char *after)
{
    char text[256];
    snprintf(text, sizeof text, "%s%" PRIu64 "%s", before, epoch, after);
    publish(text);
}

static void strangers_publishing_on_the_channel_change_nothing(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o = fleet_consecutive("overheard", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o);
    uint64_t epoch = fleet_status(b).epoch;

    /* Each is newer than the real change below: taken, it would win. */
    static const char *const shapes[][2] = {
        {"9 ", " 0 1 overheard"},  {"4 ", " 0 1 overheard"},    {"1 ", " 0 99 overheard"},
        {"1 ", " 0x10 1 overheard"}, {"1 ", " 0 1"},            {"1 ", " 0 1 overheard\x01"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        publish_at(shapes[i][0], epoch + 10 + i, shapes[i][1]);
    publish("1 2305843009213693952 0 1 overheard");
    publish("hello");
    publish_at("3 ", epoch + 1, " 0 7 overheard");

    fleet_wait_until(resil_breaker_state_of(b) == RESIL_BREAKER_ISOLATED);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.messages, 1);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), RESIL_EREJECTED);
    assert_duration_equal(p.retry_after, RESIL_DURATION_MAX);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_well_formed_answer_decodes_field_by_field),
        T(an_answer_of_another_type_is_malformed),
        T(an_answer_one_element_short_or_long_is_malformed),
        T(an_answer_with_an_element_that_is_not_an_integer_is_malformed),
        T(a_field_outside_what_the_script_produces_is_malformed),
        T(every_field_accepts_the_bounds_the_script_can_reach),
        T(the_missing_key_answer_is_taken_only_from_status),
        T(a_lease_answer_is_exactly_two_counts),
        T(a_rate_limit_answer_is_a_verdict_and_a_wait),
        T(a_concurrency_answer_is_a_verdict_and_two_counts),
        T(error_replies_that_say_redis_cannot_serve_are_told_apart),
        T(a_published_state_change_decodes_with_its_name),
        T(subscription_replies_that_are_not_messages_are_ignored),
        T(a_message_with_a_number_out_of_range_or_no_name_is_ignored),
        T(a_key_edited_by_hand_is_a_command_error_not_a_state),
        T(strangers_publishing_on_the_channel_change_nothing),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
