/*
 * test_fleet_connect.c — the client's link with Redis going wrong between
 * the first connection and a served round: a subscription refused or cut
 * off, a server still loading its dataset, one that refuses every script
 * call after each reconnect, EVAL standing in for a lost script and
 * failing too, an oversized message on the fleet's channel, a script reload
 * meeting a paused server, a round's answer or a SCAN cut off midway. Each
 * is a DOWN event whose detail says why, and exact counts of what the
 * client did. Listing walks SCAN's pages to the end.
 *
 * Fake servers on loopback answer as Redis never would, on demand; the
 * rest runs on a real server the test kills, pauses and resumes. Waits are
 * by condition with a generous deadline, never by duration.
 */
#include "fleet_test.h"

#define NOSCRIPT "-NOSCRIPT No matching script. Please use EVAL.\r\n"

static resil_redis_stats stats_of(resil_redis *r)
{
    resil_redis_stats st;
    assert_int_equal(resil_redis_stats_get(r, &st), 0);
    return st;
}

/* A client of the fake that makes one connection attempt of its thread's
 * own and none after. */
static resil_redis *fake_client(fake_server *f, fleet_events *ev)
{
    resil_redis_opts o = fleet_opts_at(fake_server_url(f), RESIL_S(3600), ev);
    return fleet_client_with(&o);
}

/* A fake server answering as told, a client of it recording its events,
 * and, when `breaker` names one, a fleet breaker on the client (its attach
 * runs the first round). */
typedef struct faked {
    fake_server *f;
    fleet_events ev;
    resil_redis *r;
    resil_fake_clock *fc;
    resil_breaker *b;
} faked;

static void faked_open(faked *w, const fake_answer *answers, const char *breaker)
{
    w->f = fake_server_answering(answers);
    assert_non_null(w->f);
    fleet_events_init(&w->ev);
    w->r = fake_client(w->f, &w->ev);
    w->fc = fleet_clock();
    w->b = NULL;
    if (breaker == NULL)
        return;
    resil_redis_breaker_opts bo = fleet_consecutive(breaker, 2, w->fc);
    w->b = fleet_breaker(w->r, &bo);
}

static void faked_close(faked *w)
{
    resil_breaker_free(w->b);
    resil_redis_free(w->r);
    resil_fake_clock_free(w->fc);
    fake_server_stop(w->f);
    fleet_events_destroy(&w->ev);
}

/* ---- the subscription --------------------------------------------------------- */

static void a_subscribe_answered_with_something_else_marks_the_client_down(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", "+OK\r\n", 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, NULL);
    fleet_wait_until(fleet_downs(&w.ev) == 1);
    assert_string_equal(w.ev.first_down, "SUBSCRIBE: unexpected reply");
    resil_redis_stats st = stats_of(w.r);
    assert_false(st.connected);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(st.reconnects, 0);
    assert_int_equal(st.rounds, 0);
    faked_close(&w);
}

static void a_subscribe_cut_off_marks_the_client_down(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", NULL, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, NULL);
    fleet_wait_until(fleet_downs(&w.ev) == 1);
    assert_string_equal(w.ev.first_down, "SUBSCRIBE: the server closed the connection");
    resil_redis_stats st = stats_of(w.r);
    assert_false(st.connected);
    assert_int_equal(st.disconnects, 1);
    faked_close(&w);
}

/* ---- connecting to a server that cannot serve ---------------------------------------- */

static void an_offline_start_on_a_redis_still_loading_runs_on_local_state(void **state)
{
    (void)state;
    fake_answer answers[] = {
        {"PING", "+PONG\r\n", 0, 0, NULL, 0},
        {"SCRIPT", "-LOADING Redis is loading the dataset in memory\r\n", 0, 0, NULL, 0},
        {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events s;
    fleet_events_init(&s);
    resil_redis_opts o = fleet_opts_at(fake_server_url(f), RESIL_MS(10), &s);
    o.allow_offline_start = true;
    resil_redis *r = NULL;
    resil_err err;
    assert_int_equal(resil_redis_new(&o, &r, &err), 0);
    assert_false(resil_redis_connected(r));
    fleet_wait_until(fleet_downs(&s) == 1);
    assert_string_equal(s.first_down,
                        "SCRIPT LOAD: Redis cannot serve: LOADING Redis is loading the "
                        "dataset in memory");

    /* Each reconnect meets the same answer: down it stays, announced once. */
    fleet_wait_until(stats_of(r).commands >= 3);
    resil_redis_stats st = stats_of(r);
    assert_false(st.connected);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(st.reconnects, 0);
    assert_int_equal(fleet_downs(&s), 1);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts bo = fleet_consecutive("loading", 2, fc);
    resil_breaker *b = fleet_breaker(r, &bo);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_true(resil_redis_permit_fallback(&p));
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fake_server_stop(f);
    fleet_events_destroy(&s);
}

static void a_server_refusing_every_script_call_never_comes_back_up(void **state)
{
    (void)state;
    fake_answer answers[] = {
        {"PING", "+PONG\r\n", 0, 0, NULL, 0},
        {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
        {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
        {"EVALSHA", "-READONLY You can't write against a read only replica.\r\n", 0, 0, NULL,
         0},
        {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events s;
    fleet_events_init(&s);
    resil_redis_opts o = fleet_opts_at(fake_server_url(f), RESIL_MS(10), &s);
    resil_redis *r = fleet_client_with(&o);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts bo = fleet_consecutive("refused", 2, fc);
    resil_breaker *b = fleet_breaker(r, &bo); /* its first round is refused */

    fleet_wait_until(fleet_downs(&s) == 1);
    assert_string_equal(s.first_down, "EVALSHA: Redis cannot serve: READONLY You can't write "
                                  "against a read only replica.");
    /* Every reconnect links up, then its re-sync round is refused: the
     * client tears down again, never announcing UP. */
    fleet_wait_until(stats_of(r).rounds >= 3);
    resil_redis_stats st = stats_of(r);
    assert_false(st.connected);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(st.reconnects, 0);
    assert_int_equal(st.command_errors, 0);
    assert_int_equal(fleet_downs(&s), 1);
    assert_int_equal(fleet_ups(&s), 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fake_server_stop(f);
    fleet_events_destroy(&s);
}

/* ---- EVAL standing in for a lost script --------------------------------------------- */

static void an_eval_rerun_answered_with_an_error_is_one_command_error(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"EVALSHA", NOSCRIPT, 0, 0, NULL, 0},
                             {"EVAL", "-ERR user_script:1: boom\r\n", 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, "boom"); /* its first round: NOSCRIPT, then EVAL */
    resil_redis_stats st = stats_of(w.r);
    assert_true(st.connected);
    assert_int_equal(st.noscript, 1);
    assert_int_equal(st.command_errors, 1);
    assert_int_equal(st.disconnects, 0);
    assert_int_equal(fleet_downs(&w.ev), 0);
    assert_int_equal(resil_breaker_state_of(w.b), RESIL_BREAKER_CLOSED);
    faked_close(&w);
}

static void an_eval_rerun_cut_off_marks_the_client_down(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"EVALSHA", NOSCRIPT, 0, 0, NULL, 0},
                             {"EVAL", NULL, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, "cut");
    fleet_wait_until(fleet_downs(&w.ev) == 1);
    assert_string_equal(w.ev.first_down, "EVAL: the server closed the connection");
    resil_redis_stats st = stats_of(w.r);
    assert_false(st.connected);
    assert_int_equal(st.noscript, 1);
    assert_int_equal(st.command_errors, 0);
    assert_int_equal(st.disconnects, 1);
    faked_close(&w);
}

static void an_eval_rerun_answered_beyond_the_bounds_marks_the_client_down(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"EVALSHA", NOSCRIPT, 0, 0, NULL, 0},
                             {"EVAL", "*1170000000\r\n", 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, "vast");
    fleet_wait_until(fleet_downs(&w.ev) == 1);
    assert_string_equal(w.ev.first_down,
                        "EVAL: malformed answer: an array of 1170000000 elements (at most 4096)");
    resil_redis_stats st = stats_of(w.r);
    assert_false(st.connected);
    assert_int_equal(st.noscript, 1);
    assert_int_equal(st.command_errors, 1);
    assert_int_equal(st.disconnects, 1);
    faked_close(&w);
}

static void a_nil_answer_to_a_round_is_one_command_error(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"EVALSHA", "$-1\r\n", 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, "nil");
    assert_int_equal(resil_redis_sync(w.r), 0);
    resil_redis_stats st = stats_of(w.r);
    assert_true(st.connected);
    assert_int_equal(st.command_errors, 2); /* the attach's round and this one */
    assert_int_equal(fleet_downs(&w.ev), 0);
    faked_close(&w);
}

static void a_round_answer_cut_off_midway_marks_the_client_down(void **state)
{
    (void)state;
    static char half[64];
    snprintf(half, sizeof half, "%.51s", FLEET_FAKE_CLOSED);
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"EVALSHA", half, 0, 0, fake_hang_up, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, "halved");
    fleet_wait_until(fleet_downs(&w.ev) == 1);
    assert_string_equal(w.ev.first_down, "EVALSHA: the server closed the connection");
    resil_redis_stats st = stats_of(w.r);
    assert_false(st.connected);
    assert_int_equal(st.command_errors, 0);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(resil_breaker_state_of(w.b), RESIL_BREAKER_CLOSED); /* local */
    faked_close(&w);
}

static int count_names(const char *name, void *ud)
{
    (void)name;
    (*(int *)ud)++;
    return 0;
}

static void a_listing_cut_off_fails_as_unreachable_and_marks_the_client_down(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"SCAN", NULL, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    faked w;
    faked_open(&w, answers, NULL);
    int names = 0;
    resil_err err = {0};
    assert_int_equal(resil_redis_list(w.r, count_names, &names, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "redis: SCAN: the server closed the connection");
    assert_int_equal(names, 0);
    fleet_wait_until(fleet_downs(&w.ev) == 1);
    assert_string_equal(w.ev.first_down, "admin: the server closed the connection");
    resil_redis_stats st = stats_of(w.r);
    assert_false(st.connected);
    assert_int_equal(st.command_errors, 0);
    faked_close(&w);
}

/* ---- on a real server ------------------------------------------------------------------- */

static resil_redis *real_client(fleet_events *ev)
{
    resil_redis_opts o = fleet_opts_at(redis_server_url(fleet_server), RESIL_MS(10), ev);
    return fleet_client_with(&o);
}

static void an_oversized_message_on_the_channel_drops_the_subscription_until_relinked(
    void **state)
{
    (void)state;
    fleet_events s;
    fleet_events_init(&s);
    resil_redis *r = real_client(&s);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts bo = fleet_consecutive("big-message", 2, fc);
    resil_breaker *b = fleet_breaker(r, &bo);

    static char payload[70001];
    memset(payload, 'x', sizeof payload - 1);
    const char *argv[] = {"PUBLISH", "resil:events", payload};
    assert_int_equal(redis_server_integer(fleet_server, 3, argv), 1);
    fleet_wait_until(fleet_downs(&s) == 1);
    assert_string_equal(s.first_down,
                        "SUBSCRIBE: malformed message: a string announced longer than 65536 bytes");

    fleet_wait_until(fleet_ups(&s) == 1);
    resil_redis_stats st = stats_of(r);
    assert_true(st.connected);
    assert_int_equal(st.messages, 0);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(st.reconnects, 1);
    resil_breaker_permit p;
    assert_int_equal(resil_breaker_acquire(b, &p), 0);
    assert_false(resil_redis_permit_fallback(&p));
    assert_int_equal(resil_breaker_record(b, &p, RESIL_BREAKER_SUCCESS), 0);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&s);
}

static void a_script_reload_that_meets_a_paused_redis_marks_the_client_down(void **state)
{
    (void)state;
    fleet_events s;
    fleet_events_init(&s);
    resil_redis *r = real_client(&s);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts bo = fleet_consecutive("reload", 2, fc);
    resil_breaker *b = fleet_breaker(r, &bo);

    /* The round after SCRIPT FLUSH meets NOSCRIPT, EVAL stands in, and
     * the next round reloads the script first. */
    const char *flush[] = {"SCRIPT", "FLUSH"};
    freeReplyObject(redis_server_command(fleet_server, 2, flush));
    assert_int_equal(resil_redis_sync(r), 0);
    assert_int_equal(stats_of(r).noscript, 1);

    redis_server_pause(fleet_server);
    assert_int_equal(resil_redis_sync(r), RESIL_EBACKEND);
    fleet_wait_until(fleet_downs(&s) == 1); /* the thread delivers it after the round */
    assert_string_equal(s.first_down, "SCRIPT LOAD: no answer within 2s");
    assert_false(resil_redis_connected(r));

    redis_server_resume(fleet_server);
    fleet_wait_until(fleet_ups(&s) == 1);
    assert_int_equal(resil_redis_sync(r), 0);
    resil_redis_stats st = stats_of(r);
    assert_int_equal(st.noscript, 1);
    assert_int_equal(st.disconnects, 1);
    assert_int_equal(st.reconnects, 1);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fleet_events_destroy(&s);
}

static int take_one(const char *name, void *ud)
{
    (void)name;
    (*(int *)ud)++;
    return 1;
}

static void listing_stops_at_the_first_name_the_callback_refuses(void **state)
{
    (void)state;
    resil_fake_clock *fc = fleet_clock();
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts oa = fleet_consecutive("listed-a", 2, fc);
    resil_redis_breaker_opts ob = fleet_consecutive("listed-b", 2, fc);
    resil_breaker *a = fleet_breaker(r, &oa), *b = fleet_breaker(r, &ob);
    int calls = 0;
    assert_int_equal(resil_redis_list(r, take_one, &calls, NULL), 0);
    assert_int_equal(calls, 1);
    resil_breaker_free(a);
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
}

/* Names "n1" .. "nN" seen, each counted. */
#define MANY 1000

static int tally(const char *name, void *ud)
{
    int *seen = ud;
    int i = atoi(name + 1);
    assert_true(name[0] == 'n' && i >= 1 && i <= MANY);
    seen[i - 1]++;
    return 0;
}

static void listing_walks_every_scan_page(void **state)
{
    (void)state;
    /* A thousand breaker keys: SCAN's COUNT of 200 takes several pages. */
    const char *script = "for i = 1, tonumber(ARGV[1]) do "
                         "redis.call('HSET', 'resil:breaker:n' .. i, 'state', 0) end";
    const char *make[] = {"EVAL", script, "0", "1000"};
    redisReply *made = redis_server_command(fleet_server, 4, make);
    assert_non_null(made);
    freeReplyObject(made);
    resil_redis *r = fleet_client(NULL);
    long long scans = redis_server_calls(fleet_server, "scan");
    int seen[MANY] = {0};
    assert_int_equal(resil_redis_list(r, tally, seen, NULL), 0);
    assert_true(redis_server_calls(fleet_server, "scan") - scans > 1);
    for (int i = 0; i < MANY; i++)
        assert_true(seen[i] >= 1); /* SCAN may return a key twice, never skip one */
    resil_redis_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(a_subscribe_answered_with_something_else_marks_the_client_down),
        T(a_subscribe_cut_off_marks_the_client_down),
        T(an_offline_start_on_a_redis_still_loading_runs_on_local_state),
        T(a_server_refusing_every_script_call_never_comes_back_up),
        T(an_eval_rerun_answered_with_an_error_is_one_command_error),
        T(an_eval_rerun_cut_off_marks_the_client_down),
        T(an_eval_rerun_answered_beyond_the_bounds_marks_the_client_down),
        T(a_nil_answer_to_a_round_is_one_command_error),
        T(a_round_answer_cut_off_midway_marks_the_client_down),
        T(a_listing_cut_off_fails_as_unreachable_and_marks_the_client_down),
        T(an_oversized_message_on_the_channel_drops_the_subscription_until_relinked),
        T(a_script_reload_that_meets_a_paused_redis_marks_the_client_down),
        T(listing_stops_at_the_first_name_the_callback_refuses),
        T(listing_walks_every_scan_page),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
