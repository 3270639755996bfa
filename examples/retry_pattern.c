/*
 * retry_pattern.c — the Retry Pattern article's extended example, written
 * against resil.
 *
 * The article's C# program runs seven scenarios through a small retry
 * executor: full jitter drawn from `new Random(42)`, Retry-After, a
 * cancellation during a wait, and an order service that is safe to retry
 * only with an idempotency key. Here the executor is resil's own, so the
 * example is also a tour of the API: a policy value, an operation returning
 * outcomes, attempt records, the cancel token and the fake clock. The clock
 * is fake for the same reason the article's delay function only records:
 * the waits are printed, not slept. With the default seed the output is the
 * article's, byte for byte.
 *
 *   example_retry_pattern [SEED]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resil.h"

/* ---- the operations ------------------------------------------------------ */

/* One scripted answer: a failure (kind, code text, optional Retry-After) or,
 * with kind Success, a value. */
typedef struct answer {
    resil_kind kind;
    const char *text; /* the failure's code ("503") or the success's value */
    resil_duration retry_after;
} answer;

#define OK(value) {RESIL_SUCCESS, value, RESIL_NO_HINT}
#define FAIL(kind, code) {kind, code, RESIL_NO_HINT}

/* What every operation reads and writes: the value of a success goes here,
 * because an outcome only says how the attempt went. */
typedef struct call {
    const answer *script; /* scripted operations: answers in turn, last repeats */
    size_t script_len, next;
    struct order_server *server; /* the order operation */
    const char *idempotency_key;
    char value[32];
} call;

static resil_outcome answer_with(call *c, const answer *a)
{
    if (a->kind == RESIL_SUCCESS) {
        snprintf(c->value, sizeof c->value, "%s", a->text);
        return resil_ok();
    }
    return resil_fail_after(a->kind, strtol(a->text, NULL, 10), a->text, a->retry_after);
}

/* A fake dependency: preset answers, then the last one again. */
static resil_outcome scripted(resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    size_t i = c->next < c->script_len ? c->next : c->script_len - 1;
    c->next++;
    return answer_with(c, &c->script[i]);
}

/* The order service: it stores the first request for a key and answers a
 * repeat with the stored order. The first response is lost on the way back,
 * so the caller sees a failure although the order was saved. */
typedef struct order_server {
    char keys[8][24], ids[8][24];
    int stored;
    bool drop_next_response;
} order_server;

static resil_outcome create_order(resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    order_server *s = c->server;
    for (int i = 0; c->idempotency_key != NULL && i < s->stored && i < 8; i++)
        if (strcmp(s->keys[i], c->idempotency_key) == 0)
            return answer_with(c, &(answer)OK(s->ids[i]));
    int n = s->stored++;
    char id[24];
    snprintf(id, sizeof id, "order-%d", s->stored);
    if (c->idempotency_key != NULL && n < 8) {
        snprintf(s->keys[n], sizeof s->keys[n], "%s", c->idempotency_key);
        snprintf(s->ids[n], sizeof s->ids[n], "%s", id);
    }
    if (!s->drop_next_response)
        return answer_with(c, &(answer)OK(id));
    s->drop_next_response = false;
    return answer_with(c, &(answer)FAIL(RESIL_TRANSIENT, "connection reset"));
}

/* ---- running and printing a scenario ------------------------------------- */

typedef struct demo {
    resil_retry_policy policy;
    resil_exec_opts opts;
    resil_attempt_record records[8];
    resil_fake_clock *clock;
    FILE *out;
} demo;

typedef struct scenario {
    const char *title;
    const char *operation; /* its name, for the refusal */
    resil_op_fn op;
    bool idempotent;
    bool cancel_during_wait;
} scenario;

static void print_attempt(FILE *out, const resil_attempt_record *r)
{
    fprintf(out, "  #%u ", (unsigned)r->number);
    if (r->stop == RESIL_STOP_SUCCEEDED) {
        fprintf(out, "ok\n");
        return;
    }
    fprintf(out, "%s %s, ", resil_kind_name(r->outcome.kind), r->outcome.detail);
    if (r->stop != RESIL_STOP_NONE)
        fprintf(out, "%s\n", resil_stop_name(r->stop));
    else /* whole milliseconds, as the article's (int) cast */
        fprintf(out, "wait %lld ms (%s)\n", (long long)(r->wait / RESIL_MS(1)),
                resil_wait_source_name(r->source));
}

static void print_result(FILE *out, const scenario *s, const resil_retry_result *res,
                         const call *c)
{
    if (res->stop == RESIL_STOP_SUCCEEDED)
        fprintf(out, "  -> succeeded %s\n", c->value);
    else if (res->stop == RESIL_STOP_REFUSED)
        fprintf(out, "  -> refused: %s is not idempotent\n", s->operation);
    else
        fprintf(out, "  -> stopped: %s\n", resil_stop_name(res->stop));
}

/* The "caller" cancels while the executor waits: the fake clock runs this
 * hook at the start of every sleep. */
static void cancel_now(resil_fake_clock *fc, resil_duration d, void *token)
{
    (void)fc;
    (void)d;
    resil_cancel_fire(token);
}

static int show(demo *d, const scenario *s, call *c)
{
    resil_cancel token;
    if (resil_cancel_init(&token, NULL) != 0)
        return -1;
    d->opts.cancel = &token;
    d->opts.non_idempotent = !s->idempotent;
    if (s->cancel_during_wait)
        resil_fake_clock_set_hook(d->clock, cancel_now, &token);

    resil_retry_result res;
    resil_err err;
    int rc = resil_retry_execute(&d->policy, &d->opts, s->op, c, &res, &err);
    resil_fake_clock_set_hook(d->clock, NULL, NULL);
    d->opts.cancel = NULL;
    resil_cancel_destroy(&token);
    if (rc != 0) {
        fprintf(stderr, "retry_pattern: %s\n", err.message);
        return rc;
    }
    fprintf(d->out, "== %s\n", s->title);
    for (size_t i = 0; i < res.records_len; i++)
        print_attempt(d->out, &d->records[i]);
    print_result(d->out, s, &res, c);
    return 0;
}

/* ---- the article's policy and scenarios ----------------------------------- */

/* RetryOn: transient failures and throttling, nothing else. */
static bool transient_or_throttled(const resil_outcome *o, const resil_attempt_ctx *ctx,
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
    p->retry_on = transient_or_throttled;
    p->backoff.kind = RESIL_BACKOFF_EXPONENTIAL; /* 100 ms · 2^(n-1) ... */
    p->backoff.base = RESIL_MS(100);
    p->backoff.factor = 2;
    p->backoff.jitter = RESIL_JITTER_FULL; /* ... times U[0, 1) ... */
    p->backoff.max_delay = RESIL_S(2);     /* ... under a 2 s cap */
}

#define SCRIPT(...) (const answer[]){__VA_ARGS__}, \
    sizeof((const answer[]){__VA_ARGS__}) / sizeof(answer)

static int scripted_scenario(demo *d, const char *title, const answer *script,
                             size_t len, bool cancel_during_wait)
{
    scenario s = {title, "GetStock", scripted, true, cancel_during_wait};
    call c = {script, len, 0, NULL, NULL, ""};
    return show(d, &s, &c);
}

static int order_scenario(demo *d, const char *title, order_server *server,
                          const char *key)
{
    scenario s = {title, "CreateOrder", create_order, key != NULL, false};
    call c = {NULL, 0, 0, server, key, ""};
    return show(d, &s, &c);
}

int main(int argc, char **argv)
{
    int32_t seed = argc > 1 ? (int32_t)strtol(argv[1], NULL, 10) : 42;
    resil_rng_dotnet rng;
    resil_rng_dotnet_init(&rng, seed);

    demo d;
    memset(&d, 0, sizeof d);
    d.out = stdout;
    article_policy(&d.policy);
    if (resil_fake_clock_new(0, 0, &d.clock) != 0)
        return 1;
    d.opts.clock = resil_fake_clock_clock(d.clock);
    d.opts.rng = &rng.base; /* one generator across all scenarios, in order */
    d.opts.records = d.records;
    d.opts.records_cap = 8;

    const resil_duration two_seconds = RESIL_MS(2000);
    order_server server = {.drop_next_response = true};
    int rc = 0;
    printf("jitter seed %d\n", (int)seed);
    rc |= scripted_scenario(&d, "transient twice",
                            SCRIPT(FAIL(RESIL_TRANSIENT, "503"), FAIL(RESIL_TRANSIENT, "503"),
                                   OK("stock=7")),
                            false);
    rc |= scripted_scenario(&d, "permanent error", SCRIPT(FAIL(RESIL_PERMANENT, "400")), false);
    rc |= scripted_scenario(&d, "transient every time", SCRIPT(FAIL(RESIL_TRANSIENT, "503")),
                            false);
    rc |= scripted_scenario(&d, "throttled with Retry-After",
                            SCRIPT({RESIL_THROTTLED, "429", two_seconds}, OK("stock=7")),
                            false);
    rc |= scripted_scenario(&d, "cancelled while waiting", SCRIPT(FAIL(RESIL_TRANSIENT, "503")),
                            true);
    rc |= order_scenario(&d, "order without key", &server, NULL);
    rc |= order_scenario(&d, "order with key k-1", &server, "k-1");
    printf("orders stored: %d\n", server.stored);

    resil_fake_clock_free(d.clock);
    return rc == 0 ? 0 : 1;
}
