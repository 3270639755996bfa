/*
 * cmd_breaker.c — `resil breaker list|status|isolate|close|reset --redis
 * URL [NAME]`: look at and steer the fleet's shared breakers by hand.
 *
 * Built with libresil-redis and added to the tool by src/redis's CMakeLists,
 * so the core tool never links hiredis. It talks through the same library
 * calls an instance would (resil_redis_control and friends) rather than raw
 * commands, so what an operator does here goes through the same script,
 * publishes the same change, and is seen by every instance within
 * milliseconds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "attempt_log.h"
#include "commands.h"
#include "resil/redis.h"

#define EXIT_FAILED 1
#define MAX_TIMEOUT RESIL_S(10)

typedef struct breaker_opts {
    const char *action;
    const char *url;
    const char *url_from;   /* "--redis" or "RESIL_REDIS_URL" */
    const char *prefix;
    const char *name;
    resil_duration timeout;
    bool json;
} breaker_opts;

static void usage(FILE *out)
{
    fputs("usage: resil breaker ACTION --redis URL [--prefix P] [--timeout DUR] [--json] [NAME]\n"
          "\n"
          "Look at or steer the circuit breakers a fleet shares through Redis.\n"
          "\n"
          "actions:\n"
          "  list              every shared breaker under the prefix, with its state\n"
          "  status NAME       the shared state of one breaker, in full\n"
          "  isolate NAME      hold it open for every instance until closed or reset\n"
          "  close NAME        close it for every instance (fresh counts)\n"
          "  reset NAME        as if just created: closed, history forgotten\n"
          "\n"
          "options:\n"
          "      --redis URL      redis://[[user]:password@]host[:port][/db]\n"
          "                       (default: $RESIL_REDIS_URL)\n"
          "      --prefix P       the key prefix the instances use (default resil:)\n"
          "      --timeout DUR    bound on each Redis command, at most 10s (default 1s)\n"
          "      --json           one JSON object per breaker instead of text\n"
          "\n"
          "A NAME no instance has created is refused (exit 1), so a typo cannot\n"
          "create a breaker.\n",
          out);
}

static bool known_action(const char *a)
{
    static const char *const actions[] = {"list", "status", "isolate", "close", "reset"};
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if (strcmp(a, actions[i]) == 0)
            return true;
    return false;
}

static int parse_timeout(const args *a, const char *v, resil_duration *out)
{
    resil_duration d;
    if (args_duration(a, "--timeout", v, true, &d) != 0)
        return RESIL_EINVAL;
    if (d > MAX_TIMEOUT)
        return args_reject(a, "--timeout", "a duration in (0, 10s]", v);
    *out = d;
    return 0;
}

static int parse_option(args *a, breaker_opts *o)
{
    const char *v;
    int m;
    if ((m = args_match(a, "--redis", NULL, &v)) != 0) {
        if (m > 0)
            o->url = v;
        return m < 0 ? m : 0;
    }
    if ((m = args_match(a, "--prefix", NULL, &v)) != 0) {
        if (m > 0)
            o->prefix = v;
        return m < 0 ? m : 0;
    }
    if ((m = args_match(a, "--timeout", NULL, &v)) != 0)
        return m < 0 ? m : parse_timeout(a, v, &o->timeout);
    if (args_flag(a, "--json", NULL)) {
        o->json = true;
        return 0;
    }
    const char *arg = a->argv[a->i];
    if (arg[0] == '-' && arg[1] != '\0')
        return args_fail(a, "unknown option '%s'", arg);
    if (o->action == NULL) {
        if (!known_action(arg))
            return args_reject(a, "ACTION", "list, status, isolate, close or reset", arg);
        o->action = arg;
        return 0;
    }
    if (o->name == NULL) {
        o->name = arg;
        return 0;
    }
    return args_fail(a, "unexpected argument '%s'", arg);
}

static int parse(int argc, char **argv, breaker_opts *o)
{
    args a;
    args_init(&a, "resil breaker", argc, argv);
    memset(o, 0, sizeof *o);
    o->prefix = "resil:";
    o->timeout = RESIL_S(1);
    for (; a.i < argc; a.i++) {
        int rc = parse_option(&a, o);
        if (rc != 0)
            return rc;
    }
    if (o->action == NULL)
        return args_fail(&a, "needs an ACTION: list, status, isolate, close or reset");
    o->url_from = o->url != NULL ? "--redis" : "RESIL_REDIS_URL";
    if (o->url == NULL)
        o->url = getenv("RESIL_REDIS_URL");
    if (o->url == NULL || o->url[0] == '\0')
        return args_fail(&a, "needs --redis URL (or RESIL_REDIS_URL)");
    bool wants_name = strcmp(o->action, "list") != 0;
    if (wants_name && o->name == NULL)
        return args_fail(&a, "%s needs the breaker's NAME", o->action);
    if (!wants_name && o->name != NULL)
        return args_fail(&a, "list takes no NAME, got '%s'", o->name);
    return 0;
}

/* ---- output ---------------------------------------------------------------- */

static void print_duration(FILE *out, resil_duration d)
{
    char text[32];
    resil_duration_format(d, text, sizeof text);
    fputs(text, out);
}

static const char *reason_text(resil_breaker_reason r)
{
    return r == 0 ? "never changed" : resil_breaker_reason_name(r);
}

static void print_status(const char *name, const resil_redis_breaker_status *s, int64_t now_ms)
{
    printf("name:                 %s\n", name);
    printf("state:                %s (%s)\n", resil_breaker_state_name(s->state),
           reason_text(s->reason));
    if (s->state == RESIL_BREAKER_OPEN) {
        printf("probe allowed in:     ");
        print_duration(stdout, s->open_until_ms > now_ms
                                   ? RESIL_MS(s->open_until_ms - now_ms) : 0);
        putchar('\n');
    }
    printf("epoch:                %" PRIu64 "\n", s->epoch);
    printf("opens:                %" PRIu64 "\n", s->opens);
    if (s->last_opened_ms > 0) {
        printf("last opened:          ");
        int64_t ago = now_ms > s->last_opened_ms ? now_ms - s->last_opened_ms : 0;
        print_duration(stdout, RESIL_MS(ago));
        printf(" ago\n");
    }
    printf("consecutive failures: %" PRIu32 "\n", s->consecutive_failures);
    printf("window:               %" PRIu64 " calls, %" PRIu64 " failures, %" PRIu64 " slow\n",
           s->window_total, s->window_failures, s->window_slow);
    printf("probes:               %" PRIu32 " in flight, %" PRIu32 " succeeded\n",
           s->probes_in_flight, s->probe_successes);
    printf("break:                ");
    print_duration(stdout, s->current_break);
    printf("\nexpires in:           ");
    print_duration(stdout, s->ttl);
    putchar('\n');
}

static void print_json(const char *name, const resil_redis_breaker_status *s, bool full)
{
    char quoted[600];
    json_quote(name, quoted, sizeof quoted);
    printf("{\"name\":%s,\"state\":\"%s\"", quoted, resil_breaker_state_name(s->state));
    if (full)
        printf(",\"reason\":\"%s\",\"open_until_ms\":%" PRId64 ",\"epoch\":%" PRIu64
               ",\"last_opened_ms\":%" PRId64 ",\"break_ms\":%" PRId64
               ",\"expires_in_ms\":%" PRId64 ",\"probes_in_flight\":%" PRIu32
               ",\"probe_successes\":%" PRIu32,
               reason_text(s->reason), s->open_until_ms, s->epoch, s->last_opened_ms,
               s->current_break / RESIL_MS(1), s->ttl / RESIL_MS(1), s->probes_in_flight,
               s->probe_successes);
    printf(",\"opens\":%" PRIu64 ",\"consecutive_failures\":%" PRIu32
           ",\"window_total\":%" PRIu64 ",\"window_failures\":%" PRIu64
           ",\"window_slow\":%" PRIu64 "}\n",
           s->opens, s->consecutive_failures, s->window_total, s->window_failures,
           s->window_slow);
}

typedef struct list_ctx {
    resil_redis *r;
    size_t count;
    int rc;
    bool json;
} list_ctx;

static int list_one(const char *name, void *ud)
{
    list_ctx *l = ud;
    resil_redis_breaker_status s;
    resil_err err;
    int rc = resil_redis_status_get(l->r, name, &s, &err);
    if (rc == RESIL_ENOTFOUND)
        return 0; /* expired between SCAN and now */
    if (rc != 0) {
        fprintf(stderr, "resil breaker: %s\n", err.message);
        l->rc = rc;
        return 1;
    }
    if (l->json) {
        l->count++;
        print_json(name, &s, false);
        return 0;
    }
    if (l->count++ == 0)
        printf("%-32s %-10s %6s %6s %s\n", "NAME", "STATE", "OPENS", "RUN", "WINDOW");
    printf("%-32s %-10s %6" PRIu64 " %6" PRIu32 " %" PRIu64 "/%" PRIu64 "\n", name,
           resil_breaker_state_name(s.state), s.opens, s.consecutive_failures,
           s.window_failures, s.window_total);
    return 0;
}

static int do_list(resil_redis *r, bool json)
{
    list_ctx l = {r, 0, 0, json};
    resil_err err;
    if (resil_redis_list(r, list_one, &l, &err) != 0) {
        fprintf(stderr, "resil breaker: %s\n", err.message);
        return EXIT_FAILED;
    }
    if (l.rc != 0)
        return EXIT_FAILED;
    if (l.count == 0 && !json)
        printf("no shared breakers\n");
    return 0;
}

static int do_status(resil_redis *r, const char *name, bool json)
{
    resil_redis_breaker_status s;
    resil_err err;
    if (resil_redis_status_get(r, name, &s, &err) != 0) {
        fprintf(stderr, "resil breaker: %s\n", err.message);
        return EXIT_FAILED;
    }
    if (json)
        print_json(name, &s, true);
    else
        print_status(name, &s, resil_clock_wall_now(resil_clock_system()) / 1000000);
    return 0;
}

/* Every action needs a breaker some instance created: steering a name
 * nobody uses (a typo) would create one, so it is refused. */
static int do_control(resil_redis *r, const char *action, const char *name, bool json)
{
    resil_redis_control_op op = strcmp(action, "isolate") == 0 ? RESIL_REDIS_ISOLATE
                                : strcmp(action, "close") == 0 ? RESIL_REDIS_CLOSE
                                                               : RESIL_REDIS_RESET;
    resil_err err;
    resil_redis_breaker_status s;
    if (resil_redis_status_get(r, name, &s, &err) != 0 ||
        resil_redis_control(r, name, op, &err) != 0 ||
        resil_redis_status_get(r, name, &s, &err) != 0) {
        fprintf(stderr, "resil breaker: %s\n", err.message);
        return EXIT_FAILED;
    }
    if (json)
        print_json(name, &s, false);
    else
        printf("%s: %s\n", name, resil_breaker_state_name(s.state));
    return 0;
}

/* The library's hint names its own option (allow_offline_start), which
 * this command has no use for: say what the user can change instead. */
static void report_connect(const char *message)
{
    static const char hint[] = " (set allow_offline_start";
    const char *cut = strstr(message, hint);
    int n = cut != NULL ? (int)(cut - message) : (int)strlen(message);
    fprintf(stderr, "resil breaker: %.*s%s\n", n, message,
            cut != NULL ? " (is Redis running there? --redis URL or RESIL_REDIS_URL says "
                          "where)"
                        : "");
}

/* The client refused the URL or the prefix: a bad value, said with the
 * option (or the variable) that gave it, as --fleet's are. */
static void report_refused(const breaker_opts *o, const char *message)
{
    if (strncmp(message, "redis.prefix", 12) == 0)
        fprintf(stderr, "resil breaker: --prefix '%s': %s\n", o->prefix, message);
    else
        fprintf(stderr, "resil breaker: %s: %s\n", o->url_from, message);
    fputs("try 'resil breaker --help'\n", stderr);
}

int cmd_breaker(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (args_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
    }
    breaker_opts o;
    if (parse(argc, argv, &o) != 0) {
        fputs("try 'resil breaker --help'\n", stderr);
        return RESIL_EXIT_USAGE;
    }
    resil_redis_opts ro;
    resil_redis_opts_default(&ro);
    ro.url = o.url;
    ro.prefix = o.prefix;
    ro.timeout = o.timeout;
    resil_redis *r;
    resil_err err;
    int rc = resil_redis_new(&ro, &r, &err);
    if (rc == RESIL_EINVAL) {
        report_refused(&o, err.message);
        return RESIL_EXIT_USAGE;
    }
    if (rc != 0) {
        report_connect(err.message);
        return EXIT_FAILED;
    }
    int status = strcmp(o.action, "list") == 0     ? do_list(r, o.json)
                 : strcmp(o.action, "status") == 0 ? do_status(r, o.name, o.json)
                                                   : do_control(r, o.action, o.name, o.json);
    resil_redis_free(r);
    return status;
}
