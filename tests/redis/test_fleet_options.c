/*
 * test_fleet_options.c — construction: the documented defaults, every
 * option refused by name at its boundaries, and the refusals that keep a
 * "shared" breaker from silently running alone: no URL, a URL of another
 * kind of store, a server that is not Redis, a Redis that refuses us.
 */
#include "../../src/redis/conn.h"
#include "fleet_test.h"

static resil_redis_opts good_opts(void)
{
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    o.url = redis_server_url(fleet_server);
    return o;
}

/* Construction fails with `code` and a message containing `needle`. */
static void refused(const resil_redis_opts *o, int code, const char *needle)
{
    resil_redis *r = (resil_redis *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_new(o, &r, &err), code);
    assert_null(r);
    assert_int_equal(err.code, code);
    if (strstr(err.message, needle) == NULL)
        fail_msg("'%s' does not mention '%s'", err.message, needle);
}

/* ---- defaults ------------------------------------------------------------ */

static void client_defaults_are_the_documented_ones(void **state)
{
    (void)state;
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    assert_null(o.url);
    assert_string_equal(o.prefix, "resil:");
    assert_duration_equal(o.timeout, RESIL_MS(50));
    assert_duration_equal(o.sync_interval, RESIL_MS(100));
    assert_duration_equal(o.refresh_interval, RESIL_S(1));
    assert_duration_equal(o.key_ttl, RESIL_S(86400));
    assert_int_equal(o.reconnect.kind, RESIL_BACKOFF_EXPONENTIAL);
    assert_duration_equal(o.reconnect.base, RESIL_MS(100));
    assert_int_equal(o.reconnect.jitter, RESIL_JITTER_FULL);
    assert_duration_equal(o.reconnect.max_delay, RESIL_S(5));
    assert_false(o.allow_offline_start);
}

static void breaker_and_budget_defaults_are_the_documented_ones(void **state)
{
    (void)state;
    resil_redis_breaker_opts b;
    resil_redis_breaker_opts_default(&b);
    resil_breaker_opts core;
    resil_breaker_opts_default(&core);
    assert_int_equal(b.counting, RESIL_REDIS_COUNT_FLEET);
    assert_null(b.fallback);
    assert_int_equal(b.rules.kind, core.kind);
    assert_duration_equal(b.rules.break_duration, core.break_duration);

    resil_redis_budget_opts g;
    resil_redis_budget_opts_default(&g);
    assert_true(g.max_tokens == 10);
    assert_true(g.token_ratio == 0.1);
    assert_true(g.lease_tokens == 2);
    assert_null(g.fallback);
}

/* ---- the URL ------------------------------------------------------------- */

static void a_missing_url_is_refused_naming_what_a_shared_breaker_needs(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    o.url = NULL;
    refused(&o, RESIL_EINVAL, "redis.url must be set");
    o.url = "";
    refused(&o, RESIL_EINVAL, "redis.url must be set");
}

static void a_url_of_another_store_is_refused(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    o.url = "memory://local";
    refused(&o, RESIL_EINVAL, "cannot share state between instances");
    o.url = "http://127.0.0.1:6379";
    refused(&o, RESIL_EINVAL, "redis.url must be redis://");
    o.url = "rediss://127.0.0.1:6380";
    refused(&o, RESIL_EINVAL, "TLS");
}

static void malformed_urls_are_refused_by_part(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    o.url = "redis://";
    refused(&o, RESIL_EINVAL, "must name a host");
    o.url = "redis://127.0.0.1:0";
    refused(&o, RESIL_EINVAL, "port in [1, 65535]");
    o.url = "redis://127.0.0.1:65536";
    refused(&o, RESIL_EINVAL, "port in [1, 65535]");
    o.url = "redis://127.0.0.1:6379/x";
    refused(&o, RESIL_EINVAL, "database number");
    o.url = "redis://nopassword@127.0.0.1";
    refused(&o, RESIL_EINVAL, "password");
    o.url = "redis://[::1";
    refused(&o, RESIL_EINVAL, "unclosed '['");
    o.url = "redis://[::1]6379";
    refused(&o, RESIL_EINVAL, "must have ':PORT' after ']'");
    o.url = "redis://[::1]:";
    refused(&o, RESIL_EINVAL, "port in [1, 65535]");
    o.url = "redis://127.0.0.1:";
    refused(&o, RESIL_EINVAL, "port in [1, 65535]");
}

static void a_host_with_a_character_no_host_name_holds_is_refused(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    const char *bad[] = {
        "redis://a b:6379", "redis://a\r\nb",      "redis://host%20name", "redis://h\x7f",
        "redis://[::1 ]:6379", "redis://[::1\n]", "redis://caf\xc3\xa9",  "redis://h:p@a;b/0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.url = bad[i];
        refused(&o, RESIL_EINVAL, "has a character no host name holds in its host");
    }
}

static void hosts_of_every_kind_are_parsed(void **state)
{
    (void)state;
    const char *good[][2] = {
        {"redis://cache-1.zone_a.example~x:6380", "cache-1.zone_a.example~x"},
        {"redis://10.0.0.7", "10.0.0.7"},
        {"redis://[::1]:6379/2", "::1"},
        {"redis://[fe80::1%eth0]", "fe80::1%eth0"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        fleet_url u;
        resil_err err = {0};
        assert_int_equal(resil__fleet_url_parse(good[i][0], &u, &err), 0);
        assert_string_equal(u.host, good[i][1]);
    }
}

/* A URL whose host (256 bytes), user (128) or password (256) is one byte
 * past what the client keeps. */
static void url_parts_past_their_size_are_refused_by_part(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    char url[700], part[300];
    memset(part, 'h', 256);
    part[256] = '\0';
    snprintf(url, sizeof url, "redis://%s:6379", part);
    o.url = url;
    refused(&o, RESIL_EINVAL, "has a host name that is too long");
    part[128] = '\0';
    snprintf(url, sizeof url, "redis://%s:pw@127.0.0.1", part);
    refused(&o, RESIL_EINVAL, "has a user or password that is too long");
    memset(part, 'p', 256);
    part[256] = '\0';
    snprintf(url, sizeof url, "redis://user:%s@127.0.0.1", part);
    refused(&o, RESIL_EINVAL, "has a user or password that is too long");
}

static void a_server_that_is_not_redis_is_refused(void **state)
{
    (void)state;
    fake_server *http = fake_server_start("HTTP/1.1 400 Bad Request\r\n\r\n");
    fake_server *ok = fake_server_start("+OK\r\n");
    assert_non_null(http);
    assert_non_null(ok);
    char url[64];
    resil_redis_opts o = good_opts();
    o.allow_offline_start = true; /* being tolerant of outages changes nothing here */
    o.timeout = FLEET_TIMEOUT;    /* the fakes answer at once; a slow one must not look absent */
    o.url = url;

    snprintf(url, sizeof url, "redis://127.0.0.1:%d", fake_server_port(http));
    refused(&o, RESIL_EBACKEND, "not Redis");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", fake_server_port(ok));
    refused(&o, RESIL_EBACKEND, "PING got 'OK'");

    fake_server_stop(http);
    fake_server_stop(ok);
}

static void nothing_answering_is_refused_unless_offline_start_is_allowed(void **state)
{
    (void)state;
    fake_server *gone = fake_server_start("");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", fake_server_port(gone));
    fake_server_stop(gone); /* a port where nothing listens now */
    resil_redis_opts o = good_opts();
    o.url = url;
    refused(&o, RESIL_EBACKEND, "allow_offline_start");

    fleet_events ev;
    fleet_events_init(&ev);
    o.allow_offline_start = true;
    o.listener = fleet_record_event;
    o.listener_ud = &ev;
    resil_redis *r = NULL;
    assert_int_equal(resil_redis_new(&o, &r, NULL), 0);
    assert_false(resil_redis_connected(r));
    assert_int_equal(resil_redis_sync(r), RESIL_EBACKEND);
    fleet_wait_until(fleet_downs(&ev) == 1);
    resil_redis_free(r);
    fleet_events_destroy(&ev);
}

static void a_redis_that_refuses_auth_or_select_is_refused_in_its_words(void **state)
{
    (void)state;
    char url[96];
    resil_redis_opts o = good_opts();
    o.url = url;
    o.timeout = FLEET_TIMEOUT;
    snprintf(url, sizeof url, "redis://:secret@127.0.0.1:%d", redis_server_port(fleet_server));
    refused(&o, RESIL_EBACKEND, "Redis refused AUTH");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/99999", redis_server_port(fleet_server));
    refused(&o, RESIL_EBACKEND, "Redis refused SELECT");
}

/* A start against a fake Redis answering `answers` is refused with
 * "redis.url URL: " and `reason`, with allow_offline_start too when
 * `even_offline` (an answer that is not an outage is not tolerated). */
static void start_refused(const fake_answer *answers, const char *reason, bool even_offline)
{
    fake_server *f = fake_server_answering(answers);
    assert_non_null(f);
    resil_redis_opts o = good_opts();
    o.url = fake_server_url(f);
    o.timeout = FLEET_TIMEOUT;
    char want[256];
    snprintf(want, sizeof want, "redis.url %s: %s", fake_server_url(f), reason);
    resil_redis *r = (resil_redis *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_new(&o, &r, &err), RESIL_EBACKEND);
    assert_null(r);
    assert_string_equal(err.message, want);
    if (even_offline) {
        o.allow_offline_start = true;
        assert_int_equal(resil_redis_new(&o, &r, &err), RESIL_EBACKEND);
        assert_string_equal(err.message, want);
    }
    fake_server_stop(f);
}

static void a_redis_that_refuses_to_load_the_script_is_refused_in_its_words(void **state)
{
    (void)state;
    static const fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                                          {"SCRIPT", "-ERR scripting is disabled\r\n", 0, 0,
                                           NULL, 0},
                                          {NULL, NULL, 0, 0, NULL, 0}};
    start_refused(answers, "SCRIPT LOAD: ERR scripting is disabled", true);
}

static void a_script_load_answered_with_other_than_a_sha_is_refused_as_malformed(void **state)
{
    (void)state;
    static const fake_answer answers[] = {{"PING", "+PONG\r\n", 0, 0, NULL, 0},
                                          {"SCRIPT", "$3\r\nabc\r\n", 0, 0, NULL, 0},
                                          {NULL, NULL, 0, 0, NULL, 0}};
    start_refused(answers, "SCRIPT LOAD: malformed answer", false);
}

static void a_redis_still_loading_at_start_is_refused_saying_how_to_start_offline(void **state)
{
    (void)state;
    static const fake_answer answers[] = {
        {"PING", "+PONG\r\n", 0, 0, NULL, 0},
        {"SCRIPT", "-LOADING Redis is loading the dataset in memory\r\n", 0, 0, NULL, 0},
        {NULL, NULL, 0, 0, NULL, 0}};
    start_refused(answers,
                  "SCRIPT LOAD: Redis cannot serve: LOADING Redis is loading the dataset in "
                  "memory (set allow_offline_start to start on local state)",
                  false);
}

static void redis_new_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    resil_redis *r = (resil_redis *)1;
    resil_err err;
    assert_int_equal(resil_redis_new(NULL, &r, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis: opts and out must not be NULL");
    assert_int_equal(resil_redis_new(&o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis: opts and out must not be NULL");
}

static void sync_refuses_a_null_client(void **state)
{
    (void)state;
    assert_int_equal(resil_redis_sync(NULL), RESIL_EINVAL);
}

static void stats_get_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_stats st;
    assert_int_equal(resil_redis_stats_get(NULL, &st), RESIL_EINVAL);
    assert_int_equal(resil_redis_stats_get(r, NULL), RESIL_EINVAL);
    resil_redis_free(r);
}

static void a_database_number_selects_that_database(void **state)
{
    (void)state;
    char url[96];
    resil_redis_opts o = good_opts();
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", redis_server_port(fleet_server));
    o.url = url;
    resil_redis *r = NULL;
    assert_int_equal(resil_redis_new(&o, &r, NULL), 0);
    assert_int_equal(resil_redis_control(r, "in-db-3", RESIL_REDIS_RESET, NULL), 0);
    const char *exists[] = {"EXISTS", "resil:breaker:in-db-3"};
    assert_int_equal(redis_server_integer(fleet_server, 2, exists), 0); /* not in db 0 */
    resil_redis_free(r);
}

/* ---- client fields --------------------------------------------------------- */

static void client_fields_are_refused_by_name_at_their_bounds(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    o.prefix = "";
    refused(&o, RESIL_EINVAL, "redis.prefix");
    o.prefix = "has space:";
    refused(&o, RESIL_EINVAL, "redis.prefix");
    char longp[RESIL_REDIS_PREFIX_MAX + 1];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    o.prefix = longp;
    refused(&o, RESIL_EINVAL, "redis.prefix");

    o = good_opts();
    o.timeout = RESIL_MS(1) - 1;
    refused(&o, RESIL_EINVAL, "redis.timeout must be in [1ms, 10s]");
    o.timeout = RESIL_S(10) + 1;
    refused(&o, RESIL_EINVAL, "redis.timeout");

    o = good_opts();
    o.sync_interval = 0;
    refused(&o, RESIL_EINVAL, "redis.sync_interval must be in [1ms, 1h]");
    o.sync_interval = RESIL_S(3601);
    refused(&o, RESIL_EINVAL, "redis.sync_interval");

    o = good_opts();
    o.refresh_interval = RESIL_MS(99);
    refused(&o, RESIL_EINVAL, "redis.refresh_interval must be >= sync_interval");

    o = good_opts();
    o.key_ttl = RESIL_MS(999);
    refused(&o, RESIL_EINVAL, "redis.key_ttl must be >= 1s");

    o = good_opts();
    o.reconnect.factor = 0.5;
    refused(&o, RESIL_EINVAL, "redis.reconnect: backoff.factor");
}

static void client_fields_accept_their_bounds(void **state)
{
    (void)state;
    resil_redis_opts o = good_opts();
    o.allow_offline_start = true; /* a 1 ms timeout may miss a busy server: not the point */
    o.timeout = RESIL_MS(1);
    o.sync_interval = RESIL_MS(1);
    o.refresh_interval = RESIL_MS(1);
    o.key_ttl = RESIL_S(1);
    resil_redis *r = NULL;
    assert_int_equal(resil_redis_new(&o, &r, NULL), 0);
    resil_redis_free(r);
    o.timeout = RESIL_S(10);
    o.sync_interval = RESIL_S(3600);
    o.refresh_interval = RESIL_S(3600);
    assert_int_equal(resil_redis_new(&o, &r, NULL), 0);
    resil_redis_free(r);
}

/* ---- breaker and budget fields -------------------------------------------------- */

static void breaker_refused(resil_redis *r, const resil_redis_breaker_opts *o, const char *needle)
{
    resil_breaker *b = (resil_breaker *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_breaker_new(r, o, &b, &err), RESIL_EINVAL);
    assert_null(b);
    if (strstr(err.message, needle) == NULL)
        fail_msg("'%s' does not mention '%s'", err.message, needle);
}

static bool trip_always(const resil_breaker_counts *counts, void *ud)
{
    (void)counts;
    (void)ud;
    return true;
}

static void breaker_fields_are_refused_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o);
    breaker_refused(r, &o, "redis_breaker.name");
    o.name = "";
    breaker_refused(r, &o, "redis_breaker.name");
    o.name = "tab\there";
    breaker_refused(r, &o, "redis_breaker.name");
    o.name = " leading-space";
    breaker_refused(r, &o, "not starting with a space");
    char longname[RESIL_BREAKER_NAME_MAX + 1];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    o.name = longname;
    breaker_refused(r, &o, "redis_breaker.name");

    o.name = "ok";
    o.counting = (resil_redis_counting)7;
    breaker_refused(r, &o, "redis_breaker.counting");
    o.counting = RESIL_REDIS_COUNT_FLEET;
    o.rules.failure_ratio = 1.5;
    breaker_refused(r, &o, "redis_breaker.rules: breaker.failure_ratio must be in");
    o.rules.failure_ratio = 0.1;
    o.rules.break_duration = RESIL_MS(1) - 1;
    breaker_refused(r, &o, "redis_breaker.rules.break_duration must be >= 1ms");
    o.rules.break_duration = RESIL_S(5);
    o.rules.half_open_probes = RESIL_REDIS_MAX_PROBES + 1;
    breaker_refused(r, &o, "redis_breaker.rules.half_open_probes must be <= 64");
    o.rules.half_open_probes = RESIL_REDIS_MAX_PROBES;
    o.rules.window = RESIL_BREAKER_WINDOW_COUNT;
    breaker_refused(r, &o, "redis_breaker.rules.window must be time");
    o.rules.window = RESIL_BREAKER_WINDOW_TIME;
    o.rules.kind |= RESIL_BREAKER_PREDICATE;
    o.rules.trip = trip_always;
    breaker_refused(r, &o, "redis_breaker.rules.kind must not include predicate");
    o.rules.kind &= ~RESIL_BREAKER_PREDICATE;
    o.rules.trip = NULL;

    resil_breaker_opts bad;
    resil_breaker_opts_default(&bad);
    bad.failure_threshold = 0;
    o.fallback = &bad;
    breaker_refused(r, &o, "redis_breaker.fallback: breaker.failure_threshold must be");
    o.fallback = NULL;

    resil_breaker *b = fleet_breaker(r, &o); /* 64 probes and a 1ms break are fine */
    resil_breaker_free(b);
    resil_redis_free(r);
}

static void budget_refused(resil_redis *r, const resil_redis_budget_opts *o, const char *needle)
{
    resil_budget *b = (resil_budget *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_budget_new(r, o, &b, &err), RESIL_EINVAL);
    assert_null(b);
    if (strstr(err.message, needle) == NULL)
        fail_msg("'%s' does not mention '%s'", err.message, needle);
}

static void budget_fields_are_refused_by_name(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_budget_opts o;
    resil_redis_budget_opts_default(&o);
    budget_refused(r, &o, "redis_budget.name");
    o.name = "retries";
    o.max_tokens = 0;
    budget_refused(r, &o, "redis_budget.max_tokens must be in [0.001, 1e6]");
    o.max_tokens = 1e6 + 1;
    budget_refused(r, &o, "redis_budget.max_tokens");
    o.max_tokens = NAN;
    budget_refused(r, &o, "redis_budget.max_tokens");
    o.max_tokens = 10;
    o.token_ratio = 0.0005;
    budget_refused(r, &o, "redis_budget.token_ratio");
    o.token_ratio = 11;
    budget_refused(r, &o, "redis_budget.token_ratio");
    o.token_ratio = 0.1;
    o.lease_tokens = 0;
    budget_refused(r, &o, "redis_budget.lease_tokens");
    o.lease_tokens = 10.5;
    budget_refused(r, &o, "redis_budget.lease_tokens");
    o.lease_tokens = 10;

    resil_budget_opts bad;
    resil_budget_opts_default(&bad, RESIL_BUDGET_TOKENS);
    bad.max_tokens = -1;
    o.fallback = &bad;
    budget_refused(r, &o, "redis_budget.fallback: budget.max_tokens");
    o.fallback = NULL;

    resil_budget *b = NULL;
    assert_int_equal(resil_redis_budget_new(r, &o, &b, NULL), 0);
    assert_string_equal(resil_budget_name(b), "redis");
    resil_budget_free(b);
    resil_redis_free(r);
}

static void breaker_new_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_breaker_opts o;
    resil_redis_breaker_opts_default(&o);
    o.name = "ok";
    resil_breaker *b = (resil_breaker *)1;
    resil_err err;
    assert_int_equal(resil_redis_breaker_new(NULL, &o, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_breaker: a client and options are required");
    assert_null(b);
    assert_int_equal(resil_redis_breaker_new(r, NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_breaker: a client and options are required");
    assert_int_equal(resil_redis_breaker_new(r, &o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_breaker: out must not be NULL");
    resil_redis_free(r);
}

static void breaker_factory_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_factory f = {.client = r, .counting = RESIL_REDIS_COUNT_FLEET};
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    resil_breaker *b = NULL;
    resil_err err;
    assert_int_equal(resil_redis_breaker_factory("k", &o, &b, &err, NULL), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_breaker: the factory needs its client");
    assert_int_equal(resil_redis_breaker_factory("k", NULL, &b, &err, &f), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_breaker: the factory needs its client");
    assert_null(b);
    resil_redis_free(r);
}

/* The message named the range (0, 1e6] but refused anything under a
 * thousandth, the unit Redis keeps the tokens in. */
static void max_tokens_under_a_thousandth_are_refused_naming_the_real_bound(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_budget_opts o;
    resil_redis_budget_opts_default(&o);
    o.name = "retries";
    o.max_tokens = 0.0005;
    resil_budget *b = (resil_budget *)1;
    resil_err err = {0};
    assert_int_equal(resil_redis_budget_new(r, &o, &b, &err), RESIL_EINVAL);
    assert_null(b);
    assert_string_equal(err.message, "redis_budget.max_tokens must be in [0.001, 1e6], got 0.0005");
    resil_redis_free(r);
}

static void max_tokens_of_a_thousandth_are_accepted(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_budget_opts o;
    resil_redis_budget_opts_default(&o);
    o.name = "retries";
    o.max_tokens = 0.001;
    o.token_ratio = 0.001;
    o.lease_tokens = 0.001;
    resil_budget *b = NULL;
    assert_int_equal(resil_redis_budget_new(r, &o, &b, NULL), 0);
    resil_budget_free(b);
    resil_redis_free(r);
}

static void budget_new_refuses_null_arguments(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_budget_opts o;
    resil_redis_budget_opts_default(&o);
    o.name = "retries";
    resil_budget *b = (resil_budget *)1;
    resil_err err;
    assert_int_equal(resil_redis_budget_new(NULL, &o, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_budget: a client and options are required");
    assert_null(b);
    assert_int_equal(resil_redis_budget_new(r, NULL, &b, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_budget: a client and options are required");
    assert_int_equal(resil_redis_budget_new(r, &o, NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis_budget: out must not be NULL");
    resil_redis_free(r);
}

/* ---- admin by name ----------------------------------------------------------------- */

static void admin_calls_by_name_refuse_bad_names_and_unknown_breakers(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_err err;
    resil_redis_breaker_status st;
    assert_int_equal(resil_redis_control(r, "", RESIL_REDIS_ISOLATE, &err), RESIL_EINVAL);
    assert_int_equal(resil_redis_control(r, "x", (resil_redis_control_op)0, &err), RESIL_EINVAL);
    assert_int_equal(resil_redis_control(r, "nobody", RESIL_REDIS_ISOLATE, &err), RESIL_ENOTFOUND);
    assert_non_null(strstr(err.message, "no shared breaker named 'nobody'"));
    assert_int_equal(resil_redis_control(r, "nobody", RESIL_REDIS_CLOSE, &err), RESIL_ENOTFOUND);
    assert_int_equal(resil_redis_status_get(r, "nobody", &st, &err), RESIL_ENOTFOUND);

    /* reset creates: an operator may pre-create or wipe a breaker */
    assert_int_equal(resil_redis_control(r, "nobody", RESIL_REDIS_RESET, &err), 0);
    assert_int_equal(resil_redis_status_get(r, "nobody", &st, &err), 0);
    assert_int_equal(st.state, RESIL_BREAKER_CLOSED);
    assert_true(st.ttl > RESIL_S(86000) && st.ttl <= RESIL_S(86400));
    resil_redis_free(r);
}

static int collect_name(const char *name, void *ud)
{
    char *all = ud;
    strcat(all, name);
    strcat(all, ";");
    return 0;
}

static void list_names_every_breaker_under_the_prefix_only(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_redis_opts o = good_opts();
    o.prefix = "other*[app]:";
    resil_redis *other = NULL;
    assert_int_equal(resil_redis_new(&o, &other, NULL), 0);
    assert_int_equal(resil_redis_control(r, "a", RESIL_REDIS_RESET, NULL), 0);
    assert_int_equal(resil_redis_control(other, "b", RESIL_REDIS_RESET, NULL), 0);

    char names[256] = "";
    assert_int_equal(resil_redis_list(r, collect_name, names, NULL), 0);
    assert_string_equal(names, "a;");
    names[0] = '\0';
    assert_int_equal(resil_redis_list(other, collect_name, names, NULL), 0);
    assert_string_equal(names, "b;");
    resil_redis_free(other);
    resil_redis_free(r);
}

static void list_skips_keys_no_breaker_could_have_made(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    assert_int_equal(resil_redis_control(r, "real", RESIL_REDIS_RESET, NULL), 0);
    char longname[RESIL_BREAKER_NAME_MAX + 32] = "resil:breaker:";
    memset(longname + strlen(longname), 'n', RESIL_BREAKER_NAME_MAX);
    const char *strays[] = {"resil:breaker: leading-space", "resil:breaker:tab\there",
                            longname};
    for (size_t i = 0; i < sizeof strays / sizeof strays[0]; i++) {
        const char *set[] = {"SET", strays[i], "x"};
        freeReplyObject(redis_server_command(fleet_server, 3, set));
    }
    static const char with_nul[] = "resil:breaker:nul\0byte";
    redisContext *c = redisConnect("127.0.0.1", redis_server_port(fleet_server));
    assert_true(c != NULL && c->err == 0);
    freeReplyObject(redisCommand(c, "SET %b x", with_nul, sizeof with_nul - 1));
    redisFree(c);

    char names[2048] = ""; /* room for the strays, should the test fail */
    assert_int_equal(resil_redis_list(r, collect_name, names, NULL), 0);
    assert_string_equal(names, "real;");
    resil_redis_free(r);
}

static void status_by_name_refuses_a_null_out(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    resil_err err;
    assert_int_equal(resil_redis_status_get(r, "nobody", NULL, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis: out must not be NULL");
    resil_redis_free(r);
}

static void status_by_name_of_a_key_edited_by_hand_is_a_script_failure(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    assert_int_equal(resil_redis_control(r, "edited", RESIL_REDIS_RESET, NULL), 0);
    const char *edit[] = {"HSET", "resil:breaker:edited", "state", "9"};
    assert_int_equal(redis_server_integer(fleet_server, 4, edit), 0);
    resil_redis_breaker_status st;
    resil_err err;
    assert_int_equal(resil_redis_status_get(r, "edited", &st, &err), RESIL_EIO);
    assert_string_equal(err.message, "redis: the script failed on 'edited'");
    assert_true(resil_redis_connected(r));
    resil_redis_free(r);
}

/* A client started on local state where nothing answers. */
static resil_redis *offline_client(void)
{
    fake_server *gone = fake_server_start("");
    assert_non_null(gone);
    char url[64];
    snprintf(url, sizeof url, "%s", fake_server_url(gone));
    fake_server_stop(gone); /* a port where nothing listens now */
    resil_redis_opts o = good_opts();
    o.url = url;
    o.allow_offline_start = true;
    return fleet_client_with(&o);
}

static void control_by_name_without_redis_is_refused_as_not_connected(void **state)
{
    (void)state;
    resil_redis *r = offline_client();
    resil_err err;
    assert_int_equal(resil_redis_control(r, "any", RESIL_REDIS_RESET, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "redis: not connected");
    assert_int_equal(resil_redis_control(r, "any", RESIL_REDIS_ISOLATE, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "redis: not connected");
    resil_redis_free(r);
}

static void list_without_redis_is_refused_as_not_connected(void **state)
{
    (void)state;
    resil_redis *r = offline_client();
    char names[64] = "";
    resil_err err;
    assert_int_equal(resil_redis_list(r, collect_name, names, &err), RESIL_EBACKEND);
    assert_string_equal(err.message, "redis: not connected");
    assert_string_equal(names, "");
    resil_redis_free(r);
}

static void list_refuses_a_null_client_or_function(void **state)
{
    (void)state;
    resil_redis *r = fleet_client(NULL);
    char names[64] = "";
    resil_err err;
    assert_int_equal(resil_redis_list(NULL, collect_name, names, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis: list needs a client and a function");
    assert_int_equal(resil_redis_list(r, NULL, names, &err), RESIL_EINVAL);
    assert_string_equal(err.message, "redis: list needs a client and a function");
    resil_redis_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, fleet_flush)
        T(client_defaults_are_the_documented_ones),
        T(breaker_and_budget_defaults_are_the_documented_ones),
        T(a_missing_url_is_refused_naming_what_a_shared_breaker_needs),
        T(a_url_of_another_store_is_refused),
        T(malformed_urls_are_refused_by_part),
        T(a_host_with_a_character_no_host_name_holds_is_refused),
        T(hosts_of_every_kind_are_parsed),
        T(url_parts_past_their_size_are_refused_by_part),
        T(a_server_that_is_not_redis_is_refused),
        T(nothing_answering_is_refused_unless_offline_start_is_allowed),
        T(a_redis_that_refuses_auth_or_select_is_refused_in_its_words),
        T(a_redis_that_refuses_to_load_the_script_is_refused_in_its_words),
        T(a_script_load_answered_with_other_than_a_sha_is_refused_as_malformed),
        T(a_redis_still_loading_at_start_is_refused_saying_how_to_start_offline),
        T(redis_new_refuses_null_arguments),
        T(sync_refuses_a_null_client),
        T(stats_get_refuses_null_arguments),
        T(a_database_number_selects_that_database),
        T(client_fields_are_refused_by_name_at_their_bounds),
        T(client_fields_accept_their_bounds),
        T(breaker_fields_are_refused_by_name),
        T(budget_fields_are_refused_by_name),
        T(breaker_new_refuses_null_arguments),
        T(breaker_factory_refuses_null_arguments),
        T(max_tokens_under_a_thousandth_are_refused_naming_the_real_bound),
        T(max_tokens_of_a_thousandth_are_accepted),
        T(budget_new_refuses_null_arguments),
        T(admin_calls_by_name_refuse_bad_names_and_unknown_breakers),
        T(list_names_every_breaker_under_the_prefix_only),
        T(list_skips_keys_no_breaker_could_have_made),
        T(status_by_name_refuses_a_null_out),
        T(status_by_name_of_a_key_edited_by_hand_is_a_script_failure),
        T(control_by_name_without_redis_is_refused_as_not_connected),
        T(list_without_redis_is_refused_as_not_connected),
        T(list_refuses_a_null_client_or_function),
#undef T
    };
    return cmocka_run_group_tests(tests, fleet_group_setup, fleet_group_teardown);
}
