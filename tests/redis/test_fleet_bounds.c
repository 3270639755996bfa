/*
 * test_fleet_bounds.c — a reply is read within bounds, whatever lengths it
 * announces: an array beyond 4096 elements, arrays nested deeper than a
 * SCAN page, a string beyond 64 KiB (refused from its header, before its
 * bytes are waited for), a reply beyond 4 MiB in memory, or more unparsed
 * bytes than a string's worth is malformed, and the connection it came on
 * is dropped. The largest answers the adapter legitimately gets still read.
 *
 * The reader is fed by hand first, then by fake servers on loopback that
 * speak RESP but announce what no Redis would. The announcements that
 * would make an unbounded client allocate or buffer gigabytes are run in a
 * child whose address space is capped at 1 GiB, so a regression fails the
 * test instead of taking memory from the machine; sanitizer builds reserve
 * terabytes of address space up front, so there the child runs uncapped and
 * only the verdict is checked (nothing is allocated with the bounds in
 * place either way).
 */
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/redis/conn.h"
#include "fleet_test.h"

/* ---- the reader, fed by hand ------------------------------------------------ */

typedef struct fed {
    int got; /* 1 a reply, 0 more needed, -1 refused */
    redisReply *reply;
    char why[128];
} fed;

/* Feed `len` bytes of text to a fresh bounded reader and take one reply. */
static fed feed(const char *text, size_t len)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    assert_int_equal(resil__fleet_reader_bound(rd), 0);
    assert_int_equal(redisReaderFeed(rd, text, len), REDIS_OK);
    fed f = {0};
    void *reply = NULL;
    f.got = resil__fleet_reader_next(rd, &reply, f.why, sizeof f.why);
    f.reply = reply;
    resil__fleet_reader_free(rd);
    return f;
}

static fed feed_text(const char *text) { return feed(text, strlen(text)); }

static void release(fed *f)
{
    if (f->reply != NULL)
        freeReplyObject(f->reply);
    f->reply = NULL;
}

/* A growing text buffer for replies built in a test. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, again);
    va_end(again);
    t->len += (size_t)n;
}

/* n integers in an array */
static text integer_array(int n)
{
    text t = {0};
    add(&t, "*%d\r\n", n);
    for (int i = 0; i < n; i++)
        add(&t, ":%d\r\n", i);
    return t;
}

static void an_array_header_beyond_the_element_limit_is_malformed(void **state)
{
    (void)state;
    fed f = feed_text("*4097\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "an array of 4097 elements (at most 4096)");
    f = feed_text("*1170000000\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "an array of 1170000000 elements (at most 4096)");
}

static void an_array_at_the_element_limit_is_read(void **state)
{
    (void)state;
    text t = integer_array(FLEET_REPLY_ELEMENTS_MAX);
    fed f = feed(t.s, t.len);
    assert_int_equal(f.got, 1);
    assert_int_equal(f.reply->type, REDIS_REPLY_ARRAY);
    assert_int_equal(f.reply->elements, 4096);
    assert_int_equal(f.reply->element[4095]->integer, 4095);
    release(&f);
    free(t.s);
}

static void arrays_nested_deeper_than_a_scan_page_are_malformed(void **state)
{
    (void)state;
    fed f = feed_text("*1\r\n*1\r\n*1\r\n:1\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "arrays nested 3 deep (at most 2)");
    f = feed_text("*1\r\n*1\r\n:1\r\n");
    assert_int_equal(f.got, 1);
    assert_int_equal(f.reply->element[0]->element[0]->integer, 1);
    release(&f);
}

static void a_string_header_beyond_the_length_limit_is_malformed_before_its_bytes(void **state)
{
    (void)state;
    fed f = feed_text("$65537\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "a string announced longer than 65536 bytes");
    /* Refused while the header is still arriving: */
    f = feed_text("$200000");
    assert_int_equal(f.got, -1);
    f = feed_text("*3\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n$2000000000\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "a string announced longer than 65536 bytes");
}

static void a_string_at_the_length_limit_is_read(void **state)
{
    (void)state;
    text t = {0};
    add(&t, "$%d\r\n", FLEET_REPLY_STRING_MAX);
    fed f = feed(t.s, t.len);
    assert_int_equal(f.got, 0); /* waits for its bytes */
    for (int i = 0; i < FLEET_REPLY_STRING_MAX; i++)
        add(&t, "k");
    add(&t, "\r\n");
    f = feed(t.s, t.len);
    assert_int_equal(f.got, 1);
    assert_int_equal(f.reply->len, FLEET_REPLY_STRING_MAX);
    release(&f);
    free(t.s);
}

static void a_string_running_past_its_announced_length_is_malformed(void **state)
{
    (void)state;
    /* Six bytes where the header says three: not "abc" with "de" taken
     * for its CRLF. */
    fed f = feed_text("$3\r\nabcdef\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "a string not ending where its header says (3 bytes)");
}

static void a_string_shorter_than_its_announced_length_is_malformed(void **state)
{
    (void)state;
    /* Three bytes and CRLF where the header says five: not "abc\r\n" with
     * the next reply's first two bytes taken for its CRLF. */
    fed f = feed_text("$5\r\nabc\r\n+OK\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "a string not ending where its header says (5 bytes)");
}

/* A reply as text: RESP's type byte and the content, arrays bracketed. */
static void render(const redisReply *r, text *t)
{
    switch (r->type) {
    case REDIS_REPLY_ARRAY:
        add(t, "[");
        for (size_t i = 0; i < r->elements; i++) {
            add(t, i > 0 ? " " : "");
            render(r->element[i], t);
        }
        add(t, "]");
        return;
    case REDIS_REPLY_INTEGER:
        add(t, ":%lld", r->integer);
        return;
    case REDIS_REPLY_NIL:
        add(t, "nil");
        return;
    default:
        add(t, "%c%s", r->type == REDIS_REPLY_STRING   ? '$'
                       : r->type == REDIS_REPLY_STATUS ? '+'
                                                       : '-',
            r->str);
    }
}

/* Feed `len` bytes of text to `rd` and render every reply they complete. */
static void feed_and_render(redisReader *rd, const char *text_, size_t len, text *seen)
{
    assert_int_equal(redisReaderFeed(rd, text_, len), REDIS_OK);
    for (;;) {
        void *reply = NULL;
        char why[128];
        int got = resil__fleet_reader_next(rd, &reply, why, sizeof why);
        assert_int_not_equal(got, -1);
        if (got == 0)
            return;
        render(reply, seen);
        add(seen, " ");
        freeReplyObject(reply);
    }
}

static void replies_split_at_any_byte_read_as_when_whole(void **state)
{
    (void)state;
    /* A SCAN page (nested, with a nil), then every other kind of reply;
     * split into two reads at each byte, as a socket may deliver them. */
    static const char stream[] = "*2\r\n$3\r\n128\r\n*3\r\n$16\r\nresil:breaker:ab\r\n$-1\r\n:42\r\n"
                                 "+OK\r\n-ERR x\r\n:-7\r\n$0\r\n\r\n";
    size_t len = sizeof stream - 1;
    for (size_t k = 1; k < len; k++) {
        redisReader *rd = redisReaderCreate();
        assert_int_equal(resil__fleet_reader_bound(rd), 0);
        text seen = {0};
        add(&seen, "");
        feed_and_render(rd, stream, k, &seen);
        feed_and_render(rd, stream + k, len - k, &seen);
        assert_string_equal(seen.s, "[$128 [$resil:breaker:ab nil :42]] +OK -ERR x :-7 $ ");
        resil__fleet_reader_free(rd);
        free(seen.s);
    }
}

static void a_reply_beyond_the_memory_budget_is_malformed(void **state)
{
    (void)state;
    /* 70 strings of 64 KiB: each within the limit, 4.4 MiB together. */
    text t = {0};
    add(&t, "*70\r\n");
    for (int i = 0; i < 70; i++) {
        add(&t, "$%d\r\n", FLEET_REPLY_STRING_MAX);
        for (int j = 0; j < FLEET_REPLY_STRING_MAX / 64; j++)
            add(&t, "%064d", j);
        add(&t, "\r\n");
    }
    fed f = feed(t.s, t.len);
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "a reply taking more than 4194304 bytes in memory");
    free(t.s);
}

static void an_array_that_would_pass_the_memory_budget_is_malformed(void **state)
{
    (void)state;
    /* 63 strings of 64 KiB and one of 30000 bytes (31 KiB short of the
     * budget), then an array whose 4096 element pointers would pass it:
     * refused from its header. */
    text t = {0};
    add(&t, "*2\r\n*64\r\n");
    for (int i = 0; i < 63; i++) {
        add(&t, "$%d\r\n", FLEET_REPLY_STRING_MAX);
        for (int j = 0; j < FLEET_REPLY_STRING_MAX / 64; j++)
            add(&t, "%064d", j);
        add(&t, "\r\n");
    }
    add(&t, "$30000\r\n");
    for (int j = 0; j < 30000 / 100; j++)
        add(&t, "%0100d", j);
    add(&t, "\r\n*4096\r\n");
    fed f = feed(t.s, t.len);
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "a reply taking more than 4194304 bytes in memory");
    free(t.s);
}

static void the_memory_budget_is_per_reply(void **state)
{
    (void)state;
    /* Two pipelined replies of 40 strings of 64 KiB: 2.6 MiB each. */
    text one = {0};
    add(&one, "*40\r\n");
    for (int i = 0; i < 40; i++) {
        add(&one, "$%d\r\n", FLEET_REPLY_STRING_MAX);
        for (int j = 0; j < FLEET_REPLY_STRING_MAX / 64; j++)
            add(&one, "%064d", j);
        add(&one, "\r\n");
    }
    redisReader *rd = redisReaderCreate();
    assert_int_equal(resil__fleet_reader_bound(rd), 0);
    for (int k = 0; k < 2; k++)
        assert_int_equal(redisReaderFeed(rd, one.s, one.len), REDIS_OK);
    for (int k = 0; k < 2; k++) {
        void *reply = NULL;
        char why[128];
        assert_int_equal(resil__fleet_reader_next(rd, &reply, why, sizeof why), 1);
        assert_int_equal(((redisReply *)reply)->elements, 40);
        freeReplyObject(reply);
    }
    resil__fleet_reader_free(rd);
    free(one.s);
}

static void unparsed_bytes_beyond_the_buffer_limit_are_malformed(void **state)
{
    (void)state;
    /* A status line that never ends. */
    text t = {0};
    add(&t, "+");
    for (int i = 0; i <= FLEET_READ_BUFFER_MAX; i++)
        add(&t, "a");
    fed f = feed(t.s, t.len);
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "more than 98304 bytes without a complete item");
    free(t.s);
}

static void bytes_that_are_not_resp_are_malformed_with_the_readers_words(void **state)
{
    (void)state;
    fed f = feed_text("HTTP/1.1 400 Bad Request\r\n");
    assert_int_equal(f.got, -1);
    assert_string_equal(f.why, "Protocol error, got \"H\" as reply type byte");
}

/* The longest key a breaker can have: a 63-byte prefix, "breaker:", a
 * 255-byte name (distinct by its first four characters). */
#define LONG_PREFIX "p23456789012345678901234567890123456789012345678901234567890ab:"

static void long_key(char *out, size_t cap, int i)
{
    char name[RESIL_BREAKER_NAME_MAX];
    snprintf(name, sizeof name, "%04d", i);
    memset(name + 4, 'n', RESIL_BREAKER_NAME_MAX - 5);
    name[RESIL_BREAKER_NAME_MAX - 1] = '\0';
    snprintf(out, cap, "%sbreaker:%s", LONG_PREFIX, name);
}

/* A last SCAN page of n of the longest keys. */
static text scan_page(int n)
{
    text t = {0};
    add(&t, "*2\r\n$1\r\n0\r\n*%d\r\n", n);
    for (int i = 0; i < n; i++) {
        char key[512];
        long_key(key, sizeof key, i);
        add(&t, "$%zu\r\n%s\r\n", strlen(key), key);
    }
    return t;
}

static void the_largest_scan_page_and_message_the_adapter_expects_are_read(void **state)
{
    (void)state;
    assert_int_equal(strlen(LONG_PREFIX), RESIL_REDIS_PREFIX_MAX - 1);
    text page = scan_page(FLEET_REPLY_ELEMENTS_MAX);
    fed f = feed(page.s, page.len);
    assert_int_equal(f.got, 1);
    assert_int_equal(f.reply->element[1]->elements, 4096);
    assert_int_equal(f.reply->element[1]->element[4095]->len, 63 + 8 + 255);
    release(&f);
    free(page.s);

    char name[RESIL_BREAKER_NAME_MAX];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    char payload[400], msg[600];
    snprintf(payload, sizeof payload, "3 2305843009213693951 9223372036854 10 %s", name);
    snprintf(msg, sizeof msg, "*3\r\n$7\r\nmessage\r\n$%zu\r\n%sevents\r\n$%zu\r\n%s\r\n",
             strlen(LONG_PREFIX) + 6, LONG_PREFIX, strlen(payload), payload);
    f = feed_text(msg);
    assert_int_equal(f.got, 1);
    fleet_state s;
    const char *at;
    assert_true(resil__fleet_parse_message(f.reply, &s, &at));
    assert_string_equal(at, name);
    release(&f);
}

/* ---- fake servers on loopback ------------------------------------------------ */

/* What happened to one script call, as a child's exit status. */
enum { V_OK = 10, V_MALFORMED, V_REJECTED, V_FAILED, V_UNREACHABLE, V_SETUP };

static int script_call_verdict(const char *url)
{
    fleet_url u;
    if (resil__fleet_url_parse(url, &u, NULL) != 0)
        return V_SETUP;
    fleet_conn_fail fail;
    char why[200];
    redisContext *c = resil__fleet_connect(&u, RESIL_S(2), &fail, why, sizeof why);
    if (c == NULL)
        return V_UNREACHABLE;
    fleet_config cfg = {.prefix = "resil:", .channel = "resil:events", .timeout = RESIL_S(2)};
    fleet_cmd cmd = {.op = FLEET_PROBE, .key = "resil:breaker:x", .name = "x"};
    fleet_state s;
    uint64_t noscript = 0, sent = 0;
    int rc = resil__fleet_run(c, &cmd, &cfg, FLEET_FAKE_SHA, resil__fleet_deadline(cfg.timeout), &s,
                              &noscript, &sent, why, sizeof why);
    int v = rc == 0                                               ? V_OK
            : rc == RESIL_EIO && resil__fleet_malformed(c)        ? V_MALFORMED
            : rc == RESIL_EIO                                     ? V_REJECTED
                                                                  : V_FAILED;
    resil__fleet_close(c);
    return v;
}

#define CAP_BYTES (INT64_C(1) << 30)

/* One script call to a fake that answers EVALSHA with `reply`, made in a
 * child capped at 1 GiB of address space (uncapped under sanitizers). */
static int capped_script_call(const char *reply)
{
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"EVALSHA", reply, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
#ifndef RESIL_SANITIZED
        struct rlimit cap = {(rlim_t)CAP_BYTES, (rlim_t)CAP_BYTES};
        if (setrlimit(RLIMIT_AS, &cap) != 0)
            _exit(V_SETUP);
#endif
        _exit(script_call_verdict(fake_server_url(f)));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    fake_server_stop(f);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void a_billion_element_answer_is_malformed_without_allocating_it(void **state)
{
    (void)state;
    assert_int_equal(capped_script_call("*1170000000\r\n"), V_MALFORMED);
}

static void a_two_gigabyte_string_answer_is_malformed_without_waiting_for_it(void **state)
{
    (void)state;
    assert_int_equal(capped_script_call("$2000000000\r\nxxxxxxxx"), V_MALFORMED);
}

static void a_deeply_nested_answer_is_malformed(void **state)
{
    (void)state;
    assert_int_equal(capped_script_call("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"),
                     V_MALFORMED);
}

static void an_answer_within_the_bounds_but_of_another_shape_keeps_its_connection(void **state)
{
    (void)state;
    assert_int_equal(capped_script_call("*1\r\n*1\r\n:1\r\n"), V_REJECTED);
}

/* ---- the client on a fake Redis ----------------------------------------------- */

/* A client of the fake that never reconnects during a test. */
static resil_redis *fake_client(fake_server *f, const char *prefix, fleet_events *ev)
{
    resil_redis_opts o = fleet_opts_at(fake_server_url(f), RESIL_S(3600), ev);
    o.prefix = prefix;
    return fleet_client_with(&o);
}

static void a_round_answer_beyond_the_bounds_is_a_command_error_and_drops_the_link(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"EVALSHA", "*1170000000\r\n", 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events d;
    fleet_events_init(&d);
    resil_redis *r = fake_client(f, "resil:", &d);
    resil_fake_clock *fc = fleet_clock();
    resil_redis_breaker_opts o = fleet_consecutive("bounded", 3, fc);
    resil_breaker *b = fleet_breaker(r, &o); /* its first round meets the answer */

    fleet_wait_until(fleet_downs(&d) == 1);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.command_errors, 1);
    assert_false(st.connected);
    assert_string_equal(d.first_down, "EVALSHA: malformed answer: an array of 1170000000 "
                                  "elements (at most 4096)");
    assert_int_equal(resil_breaker_state_of(b), RESIL_BREAKER_CLOSED); /* local */
    resil_breaker_free(b);
    resil_redis_free(r);
    resil_fake_clock_free(fc);
    fake_server_stop(f);
    fleet_events_destroy(&d);
}

static void a_message_beyond_the_bounds_drops_the_subscription(void **state)
{
    (void)state;
    fake_answer answers[] = {
        {"PING", "+PONG\r\n", 0, 0, NULL, 0},
        {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
        {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0,
         "*3\r\n$7\r\nmessage\r\n$12\r\nresil:events\r\n$2000000000\r\n", 50},
        {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events d;
    fleet_events_init(&d);
    resil_redis *r = fake_client(f, "resil:", &d);
    fleet_wait_until(fleet_downs(&d) == 1);
    assert_string_equal(d.first_down, "SUBSCRIBE: malformed message: a string announced longer "
                                  "than 65536 bytes");
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.messages, 0);
    resil_redis_free(r);
    fake_server_stop(f);
    fleet_events_destroy(&d);
}

typedef struct listed {
    int n;
    bool in_order;
} listed;

static int count_name(const char *name, void *ud)
{
    listed *l = ud;
    char want[8];
    snprintf(want, sizeof want, "%04d", l->n);
    l->in_order = l->in_order && strncmp(name, want, 4) == 0 &&
                  strlen(name) == RESIL_BREAKER_NAME_MAX - 1;
    l->n++;
    return 0;
}

static void a_scan_page_at_the_limits_is_listed_in_full(void **state)
{
    (void)state;
    text page = scan_page(FLEET_REPLY_ELEMENTS_MAX);
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"SCAN", page.s, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events d;
    fleet_events_init(&d);
    resil_redis *r = fake_client(f, LONG_PREFIX, &d);
    listed l = {0, true};
    resil_err err;
    assert_int_equal(resil_redis_list(r, count_name, &l, &err), 0);
    assert_int_equal(l.n, 4096);
    assert_true(l.in_order);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.command_errors, 0);
    assert_true(st.connected);
    resil_redis_free(r);
    fake_server_stop(f);
    fleet_events_destroy(&d);
    free(page.s);
}

static void a_scan_page_beyond_the_limits_fails_the_listing_as_malformed(void **state)
{
    (void)state;
    text page = scan_page(FLEET_REPLY_ELEMENTS_MAX + 1);
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"SCAN", page.s, 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events d;
    fleet_events_init(&d);
    resil_redis *r = fake_client(f, LONG_PREFIX, &d);
    listed l = {0, true};
    resil_err err;
    assert_int_equal(resil_redis_list(r, count_name, &l, &err), RESIL_EIO);
    assert_string_equal(err.message, "redis: SCAN: malformed answer: an array of 4097 "
                                     "elements (at most 4096)");
    assert_int_equal(l.n, 0);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.command_errors, 1);
    fleet_wait_until(fleet_downs(&d) == 1);
    resil_redis_free(r);
    fake_server_stop(f);
    fleet_events_destroy(&d);
    free(page.s);
}

/* Within the bounds but not [cursor, [keys...]]: nothing Redis sends. */
static void a_scan_answer_of_another_shape_fails_the_listing_as_unexpected(void **state)
{
    (void)state;
    fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                             {"SCRIPT", "$40\r\n" FLEET_FAKE_SHA "\r\n", 0, 0, NULL, 0},
                             {"SUBSCRIBE", FLEET_FAKE_SUBSCRIBED, 0, 0, NULL, 0},
                             {"SCAN", "*2\r\n:0\r\n*0\r\n", 0, 0, NULL, 0},
                             {NULL, NULL, 0, 0, NULL, 0}};
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    fleet_events d;
    fleet_events_init(&d);
    resil_redis *r = fake_client(f, "resil:", &d);
    listed l = {0, true};
    resil_err err;
    assert_int_equal(resil_redis_list(r, count_name, &l, &err), RESIL_EIO);
    assert_string_equal(err.message, "redis: SCAN: unexpected reply");
    assert_int_equal(l.n, 0);
    resil_redis_stats st;
    resil_redis_stats_get(r, &st);
    assert_int_equal(st.command_errors, 1);
    assert_true(st.connected);
    resil_redis_free(r);
    fake_server_stop(f);
    fleet_events_destroy(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_array_header_beyond_the_element_limit_is_malformed),
        cmocka_unit_test(an_array_at_the_element_limit_is_read),
        cmocka_unit_test(arrays_nested_deeper_than_a_scan_page_are_malformed),
        cmocka_unit_test(a_string_header_beyond_the_length_limit_is_malformed_before_its_bytes),
        cmocka_unit_test(a_string_at_the_length_limit_is_read),
        cmocka_unit_test(a_string_running_past_its_announced_length_is_malformed),
        cmocka_unit_test(a_string_shorter_than_its_announced_length_is_malformed),
        cmocka_unit_test(replies_split_at_any_byte_read_as_when_whole),
        cmocka_unit_test(a_reply_beyond_the_memory_budget_is_malformed),
        cmocka_unit_test(an_array_that_would_pass_the_memory_budget_is_malformed),
        cmocka_unit_test(the_memory_budget_is_per_reply),
        cmocka_unit_test(unparsed_bytes_beyond_the_buffer_limit_are_malformed),
        cmocka_unit_test(bytes_that_are_not_resp_are_malformed_with_the_readers_words),
        cmocka_unit_test(the_largest_scan_page_and_message_the_adapter_expects_are_read),
        cmocka_unit_test(a_billion_element_answer_is_malformed_without_allocating_it),
        cmocka_unit_test(a_two_gigabyte_string_answer_is_malformed_without_waiting_for_it),
        cmocka_unit_test(a_deeply_nested_answer_is_malformed),
        cmocka_unit_test(an_answer_within_the_bounds_but_of_another_shape_keeps_its_connection),
        cmocka_unit_test(a_round_answer_beyond_the_bounds_is_a_command_error_and_drops_the_link),
        cmocka_unit_test(a_message_beyond_the_bounds_drops_the_subscription),
        cmocka_unit_test(a_scan_page_at_the_limits_is_listed_in_full),
        cmocka_unit_test(a_scan_page_beyond_the_limits_fails_the_listing_as_malformed),
        cmocka_unit_test(a_scan_answer_of_another_shape_fails_the_listing_as_unexpected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
