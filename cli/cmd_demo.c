/*
 * cmd_demo.c — `resil demo retry-pattern [--rng dotnet|mulberry32]
 * [--seed N]` and `resil demo retry-pattern --basic`: the Retry Pattern
 * article's examples, run through the real executor.
 *
 * The demo is a proof, not a re-enactment: every line comes from
 * resil_retry_execute's own attempt records (through the same writer as
 * `resil run`), with the article's policy expressed as a resil policy — 4
 * attempts, exponential backoff from 100 ms capped at 2 s with full jitter,
 * Transient and Throttled retried, Retry-After honoured. Only the generator
 * (the article's own: .NET's System.Random or mulberry32) and a fake clock
 * are substituted, so it prints the published output byte for byte without
 * waiting. The scenarios are data; the "cancelled while waiting" one fires
 * the token from the fake clock's sleep hook, i.e. during the wait itself.
 * The basic example (two transient failures, then stock=7, under an
 * exponential backoff from 100 ms capped at 1 s without jitter) prints in
 * that example's own words, again from the executor's records.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "attempt_log.h"
#include "commands.h"

#define ARTICLE_SEED 42
#define ORDER_ID_MAX 24 /* "order-" and any int */

typedef enum demo_rng { RNG_DOTNET, RNG_MULBERRY32 } demo_rng;

/* One scripted answer of a fake dependency. */
typedef struct step {
    resil_kind kind;
    int64_t code;
    const char *detail;         /* shown instead of the code when set */
    resil_duration retry_after; /* RESIL_NO_HINT when none */
    const char *value;          /* a success's value */
} step;

typedef enum op_kind { OP_SCRIPTED, OP_ORDER } op_kind;

typedef struct scenario {
    const char *title;
    const char *name; /* the operation's name, as a refusal states it */
    op_kind op;
    const step *script; /* OP_SCRIPTED: answers in order, the last repeats */
    size_t script_len;
    bool non_idempotent;
    const char *order_key; /* OP_ORDER: the idempotency key, or NULL */
    bool cancel_during_wait;
} scenario;

#define OK(v) {RESIL_SUCCESS, 0, NULL, RESIL_NO_HINT, v}
#define FAIL(k, c) {k, c, NULL, RESIL_NO_HINT, NULL}
#define FAIL_AFTER(k, c, ra) {k, c, NULL, ra, NULL}
#define GET_STOCK(s) .name = "GetStock", .op = OP_SCRIPTED, .script = s, \
                     .script_len = sizeof s / sizeof s[0]

static const step transient_twice[] = {FAIL(RESIL_TRANSIENT, 503),
                                       FAIL(RESIL_TRANSIENT, 503), OK("stock=7")};
static const step permanent[] = {FAIL(RESIL_PERMANENT, 400)};
static const step transient_always[] = {FAIL(RESIL_TRANSIENT, 503)};
static const step throttled[] = {FAIL_AFTER(RESIL_THROTTLED, 429, RESIL_MS(2000)),
                                 OK("stock=7")};
static const step order_ok[] = {OK("order-1")};

/* The scenarios both programs share, in their order. */
#define COMMON_SCENARIOS                                                       \
    {.title = "transient twice", GET_STOCK(transient_twice)},                  \
    {.title = "permanent error", GET_STOCK(permanent)},                        \
    {.title = "transient every time", GET_STOCK(transient_always)},            \
    {.title = "throttled with Retry-After", GET_STOCK(throttled)},             \
    {.title = "cancelled while waiting", GET_STOCK(transient_always),          \
     .cancel_during_wait = true}

static const scenario dotnet_scenarios[] = {
    COMMON_SCENARIOS,
    {.title = "order without key", .name = "CreateOrder", .op = OP_ORDER,
     .non_idempotent = true},
    {.title = "order with key k-1", .name = "CreateOrder", .op = OP_ORDER,
     .order_key = "k-1"},
};

/* The TypeScript program's order is a plain operation that is refused. */
static const scenario typescript_scenarios[] = {
    COMMON_SCENARIOS,
    {.title = "order without key", .name = "CreateOrder", .op = OP_SCRIPTED,
     .script = order_ok, .script_len = 1, .non_idempotent = true},
};

/*
 * The article's OrderServer: it stores an order once per idempotency key and
 * loses the response to the very first request, so the client retries a
 * request that in fact succeeded.
 */
typedef struct order_server {
    const char *key; /* the one key the demo uses, once stored */
    char key_order[ORDER_ID_MAX];
    int stored;
    bool drop_next_response;
} order_server;

static step order_create(order_server *s, const char *key, char *id, size_t cap)
{
    if (key != NULL && s->key != NULL && strcmp(key, s->key) == 0) {
        snprintf(id, cap, "%s", s->key_order);
        return (step)OK(id);
    }
    s->stored++;
    snprintf(id, cap, "order-%d", s->stored);
    if (key != NULL) {
        s->key = key;
        snprintf(s->key_order, sizeof s->key_order, "%s", id);
    }
    if (!s->drop_next_response)
        return (step)OK(id);
    s->drop_next_response = false;
    return (step){RESIL_TRANSIENT, 0, "connection reset", RESIL_NO_HINT, NULL};
}

/* What one scenario's attempts share (the executor's `user`). */
typedef struct demo_run {
    const scenario *sc;
    size_t next;
    order_server *server;
    step last;        /* the answer being decided about */
    char order_id[ORDER_ID_MAX];
    resil_cancel cancel;
    attempt_log log;
} demo_run;

static resil_outcome demo_op(resil_attempt_ctx *ctx)
{
    demo_run *r = ctx->user;
    const scenario *sc = r->sc;
    if (sc->op == OP_ORDER) {
        r->last = order_create(r->server, sc->order_key, r->order_id, sizeof r->order_id);
    } else {
        size_t i = r->next < sc->script_len ? r->next : sc->script_len - 1;
        r->next++;
        r->last = sc->script[i];
    }
    if (r->last.kind == RESIL_SUCCESS)
        return resil_ok();
    return resil_fail_after(r->last.kind, r->last.code, r->last.detail,
                            r->last.retry_after);
}

static void demo_on_attempt(const resil_attempt_record *rec, void *ud)
{
    demo_run *r = ud;
    char what[96];
    if (r->last.detail != NULL)
        snprintf(what, sizeof what, "%s %s", resil_kind_name(r->last.kind), r->last.detail);
    else
        snprintf(what, sizeof what, "%s %lld", resil_kind_name(r->last.kind),
                 (long long)r->last.code);
    attempt_log_attempt(&r->log, rec, what, NULL);
}

static void cancel_in_wait(resil_fake_clock *fc, resil_duration d, void *ud)
{
    (void)fc;
    (void)d;
    resil_cancel_fire(ud);
}

static bool retry_transient_or_throttled(const resil_outcome *o, const resil_attempt_ctx *ctx,
                                         void *ud)
{
    (void)ctx;
    (void)ud;
    return o->kind == RESIL_TRANSIENT || o->kind == RESIL_THROTTLED;
}

static void article_policy(resil_retry_policy *p)
{
    resil_retry_policy_default(p);
    p->max_attempts = 4;
    p->retry_on = retry_transient_or_throttled;
    p->backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    p->backoff.base = RESIL_MS(100);
    p->backoff.factor = 2.0;
    p->backoff.jitter = RESIL_JITTER_FULL;
    p->backoff.max_delay = RESIL_MS(2000);
    p->retry_after = RESIL_RETRY_AFTER_HONOR;
}

static int show(const scenario *sc, const resil_retry_policy *p, resil_rng *rng,
                resil_fake_clock *fc, order_server *server)
{
    demo_run r = {.sc = sc, .server = server, .log = {.out = stdout, .format = LOG_TEXT, .indent = "  "}};
    if (resil_cancel_init(&r.cancel, NULL) != 0)
        return RESIL_ESYS;
    resil_fake_clock_set_hook(fc, sc->cancel_during_wait ? cancel_in_wait : NULL,
                              &r.cancel);
    resil_exec_opts xo = {
        .clock = resil_fake_clock_clock(fc),
        .rng = rng,
        .cancel = &r.cancel,
        .non_idempotent = sc->non_idempotent,
        .on_attempt = demo_on_attempt,
        .on_attempt_ud = &r,
    };
    resil_retry_result res;
    resil_err err;
    printf("== %s\n", sc->title);
    int rc = resil_retry_execute(p, &xo, demo_op, &r, &res, &err);
    resil_fake_clock_set_hook(fc, NULL, NULL);
    resil_cancel_destroy(&r.cancel);
    if (rc != 0) {
        fprintf(stderr, "resil demo: %s\n", err.message);
        return rc;
    }
    char refused[64];
    const char *value = res.stop == RESIL_STOP_SUCCEEDED ? r.last.value : NULL;
    if (res.stop == RESIL_STOP_REFUSED) {
        snprintf(refused, sizeof refused, "%s is not idempotent", sc->name);
        value = refused;
    }
    attempt_log_stop(&r.log, res.stop, res.attempts, value);
    return 0;
}

static int retry_pattern(demo_rng which, uint64_t seed)
{
    resil_rng_dotnet dotnet;
    resil_rng_mulberry32 mulberry;
    resil_rng *rng;
    const scenario *list;
    size_t n;
    if (which == RNG_DOTNET) {
        resil_rng_dotnet_init(&dotnet, (int32_t)seed);
        rng = &dotnet.base;
        list = dotnet_scenarios;
        n = sizeof dotnet_scenarios / sizeof dotnet_scenarios[0];
    } else {
        resil_rng_mulberry32_init(&mulberry, (uint32_t)seed);
        rng = &mulberry.base;
        list = typescript_scenarios;
        n = sizeof typescript_scenarios / sizeof typescript_scenarios[0];
    }
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return RESIL_EXIT_USAGE;
    resil_retry_policy p;
    article_policy(&p);
    order_server server = {.drop_next_response = true};
    int rc = 0;
    printf("jitter seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = show(&list[i], &p, rng, fc, &server);
    if (rc == 0 && which == RNG_DOTNET)
        printf("orders stored: %d\n", server.stored);
    resil_fake_clock_free(fc);
    return rc == 0 ? 0 : RESIL_EXIT_USAGE;
}

/* ---- the basic example ---------------------------------------------------------- */

#define BASIC_MAX_ATTEMPTS 4

typedef struct basic_run {
    int calls;
    resil_duration waits[BASIC_MAX_ATTEMPTS];
    size_t nwaits;
} basic_run;

/* The article's fake inventory service: two transient failures, then
 * success. */
static resil_outcome get_stock(resil_attempt_ctx *ctx)
{
    basic_run *r = ctx->user;
    return ++r->calls <= 2 ? resil_fail(RESIL_TRANSIENT, 0, NULL) : resil_ok();
}

static bool retry_transient(const resil_outcome *o, const resil_attempt_ctx *ctx, void *ud)
{
    (void)ctx;
    (void)ud;
    return o->kind == RESIL_TRANSIENT;
}

/* "attempt 1: Transient, retry in 100 ms", "attempt 3: ok",
 * "attempt 4: Transient, attempts exhausted". */
static void basic_on_attempt(const resil_attempt_record *rec, void *ud)
{
    basic_run *r = ud;
    char ms[32];
    if (rec->outcome.kind == RESIL_SUCCESS) {
        printf("attempt %u: ok\n", rec->number);
        return;
    }
    const char *kind = resil_kind_name(rec->outcome.kind);
    if (rec->stop != RESIL_STOP_NONE) {
        printf("attempt %u: %s, %s\n", rec->number, kind, resil_stop_name(rec->stop));
        return;
    }
    format_ms(rec->wait, false, ms, sizeof ms);
    printf("attempt %u: %s, retry in %s ms\n", rec->number, kind, ms);
    if (r->nwaits < BASIC_MAX_ATTEMPTS)
        r->waits[r->nwaits++] = rec->wait;
}

static int retry_pattern_basic(void)
{
    resil_fake_clock *fc;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return RESIL_EXIT_USAGE;
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = BASIC_MAX_ATTEMPTS;
    p.retry_on = retry_transient;
    p.backoff.kind = RESIL_BACKOFF_EXPONENTIAL;
    p.backoff.base = RESIL_MS(100);
    p.backoff.factor = 2.0;
    p.backoff.jitter = RESIL_JITTER_NONE;
    p.backoff.max_delay = RESIL_MS(1000);
    basic_run r = {0};
    resil_exec_opts xo = {.clock = resil_fake_clock_clock(fc),
                          .on_attempt = basic_on_attempt,
                          .on_attempt_ud = &r};
    resil_retry_result res;
    resil_err err;
    int rc = resil_retry_execute(&p, &xo, get_stock, &r, &res, &err);
    resil_fake_clock_free(fc);
    if (rc != 0) {
        fprintf(stderr, "resil demo: %s\n", err.message);
        return RESIL_EXIT_USAGE;
    }
    printf("value=%s, attempts=%u, delays=[", res.stop == RESIL_STOP_SUCCEEDED ? "stock=7" : "",
           res.attempts);
    for (size_t i = 0; i < r.nwaits; i++) {
        char ms[32];
        format_ms(r.waits[i], false, ms, sizeof ms);
        printf("%s%s", i ? ", " : "", ms);
    }
    printf("] ms\n");
    return 0;
}

static void usage(FILE *out)
{
    fputs("usage: resil demo retry-pattern [--rng dotnet|mulberry32] [--seed N]\n"
          "       resil demo retry-pattern --basic\n"
          "\n"
          "Print the Retry Pattern article's examples, run through resil's own "
          "retry\n"
          "executor on a fake clock (nothing waits): 4 attempts, exponential "
          "backoff\n"
          "from 100 ms capped at 2 s with full jitter, Transient and Throttled "
          "retried,\n"
          "Retry-After honoured.\n"
          "\n"
          "  --rng dotnet      the C# example: .NET's System.Random(seed), seven "
          "scenarios\n"
          "                    and the stored-order count (default)\n"
          "  --rng mulberry32  the TypeScript example: mulberry32(seed), six "
          "scenarios\n"
          "  --seed N          the generator's seed (default 42, the article's); "
          "N is in\n"
          "                    [0, 2147483647] for dotnet, [0, 4294967295] for "
          "mulberry32\n"
          "  --basic           the article's basic example instead: two transient\n"
          "                    failures, exponential backoff from 100 ms capped at\n"
          "                    1 s, no jitter (draws nothing, so takes no --rng or\n"
          "                    --seed)\n",
          out);
}

static int parse_rng(const args *a, const char *v, demo_rng *out)
{
    if (strcmp(v, "dotnet") == 0)
        *out = RNG_DOTNET;
    else if (strcmp(v, "mulberry32") == 0)
        *out = RNG_MULBERRY32;
    else
        return args_reject(a, "--rng", "one of dotnet, mulberry32", v);
    return 0;
}

int cmd_demo(int argc, char **argv)
{
    args a;
    args_init(&a, "resil demo", argc, argv);
    if (argc < 2) {
        usage(stderr);
        return RESIL_EXIT_USAGE;
    }
    if (args_flag(&a, "--help", "-h")) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "retry-pattern") != 0) {
        args_fail(&a, "unknown demo '%s' (available: retry-pattern)", argv[1]);
        return RESIL_EXIT_USAGE;
    }
    demo_rng which = RNG_DOTNET;
    const char *seed_text = NULL;
    bool basic = false, rng_given = false;
    for (a.i = 2; a.i < argc; a.i++) {
        const char *v;
        int m;
        if (args_flag(&a, "--help", "-h")) {
            usage(stdout);
            return 0;
        }
        if (args_flag(&a, "--basic", NULL)) {
            basic = true;
        } else if ((m = args_match(&a, "--rng", NULL, &v)) != 0) {
            rng_given = true;
            if (m < 0 || parse_rng(&a, v, &which) != 0)
                return RESIL_EXIT_USAGE;
        } else if ((m = args_match(&a, "--seed", NULL, &v)) != 0) {
            if (m < 0)
                return RESIL_EXIT_USAGE;
            seed_text = v;
        } else {
            args_fail(&a, "unknown option '%s' (see resil demo --help)", argv[a.i]);
            return RESIL_EXIT_USAGE;
        }
    }
    if (basic && (rng_given || seed_text != NULL)) {
        args_fail(&a, "--basic draws no random number: it takes no --rng or --seed");
        return RESIL_EXIT_USAGE;
    }
    if (basic)
        return retry_pattern_basic();
    uint64_t seed = ARTICLE_SEED;
    uint64_t max = which == RNG_DOTNET ? INT32_MAX : UINT32_MAX;
    if (seed_text != NULL && args_uint64(&a, "--seed", seed_text, 0, max, &seed) != 0)
        return RESIL_EXIT_USAGE;
    return retry_pattern(which, seed);
}
