/*
 * vs_aws.c — one retry through a real event loop: resil on libuv beside
 * aws-c-io's standard retry strategy on its own epoll loop, in one process
 * and one run, rounds interleaved, so that both sides see the same machine
 * weather. Built and run by vs-aws.sh against an aws-c-io installation
 * (not part of the CMake build: aws-c-io is no dependency of resil).
 *
 *   resil/retry_1fail   resil_pipeline_start on libuv (retry, two attempts,
 *                       a zero wait): the first attempt fails, the wait is
 *                       a uv timer, one pass of the loop runs the second
 *                       attempt, which succeeds — bench_async.c's
 *                       async_one_retry_uv_timer
 *   uv/idle_pass        one pass of the same loop running one idle
 *                       callback and no timer: libuv's own floor
 *   aws/retry_1fail.zero     acquire a token → (1 tick) schedule_retry
 *                       (SERVER_ERROR) → (1 tick) record_success, release;
 *                       the backoff's generator returns 0 without reading
 *                       anything (a real wait would sleep). The whole
 *                       chain runs on the loop thread: the next acquire is
 *                       made from the callback that ended the previous one.
 *   aws/retry_1fail.devzero  the same with the generator the library uses
 *                       by default (aws_device_random_u64, one read of the
 *                       OS random source per backoff), its value dropped
 *                       for a zero wait — the configuration behind the
 *                       3.5 µs anchor
 *   aws/retry_success   acquire → (1 tick) record_success, release
 *
 * Usage: vs_aws time ROUNDS MS     interleaved timing, order rotated per
 *                                  round; ns/op per sample, then medians
 *                                  with their spread and the ratios taken
 *                                  within each round
 *        vs_aws run OP N           N operations of one, for callgrind
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aws/common/allocator.h>
#include <aws/common/byte_buf.h>
#include <aws/common/device_random.h>
#include <aws/io/event_loop.h>
#include <aws/io/io.h>
#include <aws/io/retry_strategy.h>

#include "resil/uv.h"

static void die(const char *what)
{
    fprintf(stderr, "vs_aws: %s\n", what);
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- resil on libuv ------------------------------------------------------------ */

static resil_uv *host;
static resil_pipeline *retry_once;
static uint64_t finished;

static void fail_then_ok(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    resil_outcome o = ctx->attempt == 1 ? resil_fail(RESIL_TRANSIENT, 503, "busy") : resil_ok();
    resil_attempt_done(a, &o);
}

static void mark_done(const resil_pipeline_result *res, void *ud)
{
    bool *done = ud;
    *done = true;
    finished += res->attempts == 2;
}

static void resil_side_retry(uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        bool done = false;
        resil_pipeline_start(retry_once, resil_uv_loop(host), fail_then_ok, NULL, mark_done,
                             &done, NULL);
        while (!done)
            uv_run(uv_default_loop(), UV_RUN_ONCE);
    }
}

static uv_idle_t idle;
static uint64_t idle_left;

static void on_idle(uv_idle_t *h)
{
    if (--idle_left == 0)
        uv_idle_stop(h);
}

static void uv_pass(uint64_t n)
{
    idle_left = n;
    uv_idle_start(&idle, on_idle);
    while (idle_left > 0)
        uv_run(uv_default_loop(), UV_RUN_ONCE);
}

static void resil_setup(void)
{
    uv_loop_t *loop = uv_default_loop();
    if (resil_uv_new(loop, &host) != 0)
        die("resil_uv_new");
    uv_idle_init(loop, &idle);
    resil_pipeline_builder *b;
    if (resil_pipeline_builder_new("retry-once", &b, NULL) != 0)
        die("builder");
    resil_pipeline_builder_clock(b, resil_loop_clock(resil_uv_loop(host)));
    resil_retry_policy r;
    resil_retry_policy_default(&r);
    r.max_attempts = 2;
    r.backoff.kind = RESIL_BACKOFF_CONSTANT;
    r.backoff.base = 0;
    r.backoff.jitter = RESIL_JITTER_NONE;
    resil_pipeline_add_retry(b, &r);
    if (resil_pipeline_build(b, &retry_once, NULL) != 0)
        die("the retry pipeline");
    resil_pipeline_builder_free(b);
}

/* ---- aws-c-io on its event loop ------------------------------------------------- */

typedef struct aws_side {
    struct aws_event_loop_group *elg;
    struct aws_retry_strategy *strategy;
    struct aws_byte_cursor partition;
    int fails;
    uint64_t remaining;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finished;
} aws_side;

static uint64_t zero_rng(void *ud)
{
    (void)ud;
    return 0;
}

static uint64_t devzero_rng(void *ud)
{
    (void)ud;
    uint64_t v = 0;
    aws_device_random_u64(&v);
    return v & 0; /* read as the default does, then wait zero */
}

static void on_acquired(struct aws_retry_strategy *s, int error_code,
                        struct aws_retry_token *token, void *ud);

static void finish_one(aws_side *c)
{
    if (--c->remaining > 0) {
        if (aws_retry_strategy_acquire_retry_token(c->strategy, &c->partition, on_acquired, c,
                                                   0) != AWS_OP_SUCCESS)
            die("aws: acquire refused");
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->finished = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_ready(struct aws_retry_token *token, int error_code, void *ud)
{
    (void)error_code;
    aws_retry_token_record_success(token);
    aws_retry_token_release(token);
    finish_one(ud);
}

static void on_acquired(struct aws_retry_strategy *s, int error_code,
                        struct aws_retry_token *token, void *ud)
{
    aws_side *c = ud;
    (void)s;
    if (error_code != 0 || token == NULL)
        die("aws: acquire failed");
    if (c->fails > 0) {
        if (aws_retry_strategy_schedule_retry(token, AWS_RETRY_ERROR_TYPE_SERVER_ERROR, on_ready,
                                              c) != AWS_OP_SUCCESS)
            die("aws: schedule_retry refused");
        return;
    }
    aws_retry_token_record_success(token);
    aws_retry_token_release(token);
    finish_one(c);
}

static aws_side *aws_new(int fails, uint64_t (*rng)(void *))
{
    struct aws_allocator *alloc = aws_default_allocator();
    aws_side *c = calloc(1, sizeof *c);
    if (c == NULL)
        die("calloc");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->fails = fails;
    c->partition = aws_byte_cursor_from_c_str("service.region.example.com");
    struct aws_event_loop_group_options go = {.loop_count = 1};
    c->elg = aws_event_loop_group_new(alloc, &go);
    if (c->elg == NULL)
        die("aws: event loop group");
    struct aws_standard_retry_options so = {0};
    so.backoff_retry_options.el_group = c->elg;
    so.backoff_retry_options.generate_random_impl = rng;
    c->strategy = aws_retry_strategy_new_standard(alloc, &so);
    if (c->strategy == NULL)
        die("aws: strategy");
    return c;
}

static void aws_run(aws_side *c, uint64_t n)
{
    c->remaining = n;
    c->finished = 0;
    if (aws_retry_strategy_acquire_retry_token(c->strategy, &c->partition, on_acquired, c, 0) !=
        AWS_OP_SUCCESS)
        die("aws: acquire refused");
    pthread_mutex_lock(&c->mu);
    while (!c->finished)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static aws_side *aws_zero, *aws_devzero, *aws_success;
static void aws_retry_zero(uint64_t n) { aws_run(aws_zero, n); }
static void aws_retry_devzero(uint64_t n) { aws_run(aws_devzero, n); }
static void aws_retry_success(uint64_t n) { aws_run(aws_success, n); }

/* ---- the driver ----------------------------------------------------------------- */

typedef struct op {
    const char *name;
    void (*run)(uint64_t n);
    uint64_t n;          /* calibrated */
    double ns[64];       /* per round */
} op;

static op ops[] = {
    {"resil/retry_1fail", resil_side_retry, 0, {0}},
    {"uv/idle_pass", uv_pass, 0, {0}},
    {"aws/retry_1fail.zero", aws_retry_zero, 0, {0}},
    {"aws/retry_1fail.devzero", aws_retry_devzero, 0, {0}},
    {"aws/retry_success", aws_retry_success, 0, {0}},
};
#define NOPS (sizeof ops / sizeof ops[0])

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, by_value);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double sample(op *o)
{
    uint64_t t0 = now_ns();
    o->run(o->n);
    return (double)(now_ns() - t0) / (double)o->n;
}

static void calibrate(op *o, double ms)
{
    o->run(1000); /* warm-up */
    uint64_t n = 1000;
    for (;;) {
        uint64_t t0 = now_ns();
        o->run(n);
        double took = (double)(now_ns() - t0);
        if (took >= ms * 1e6 / 4 || n >= (1u << 26)) {
            o->n = (uint64_t)((double)n * ms * 1e6 / took) + 1;
            return;
        }
        n *= 4;
    }
}

static void load(const char *when)
{
    double l1 = 0, l5 = 0, l15 = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf %lf %lf", &l1, &l5, &l15) != 3)
            l1 = l5 = l15 = 0;
        fclose(f);
    }
    printf("load %s %.2f %.2f %.2f\n", when, l1, l5, l15);
}

/* Median, minimum and maximum of `n` values, printed after `what`. */
static void spread(const char *kind, const char *what, const double *v, int n, const char *unit)
{
    double lo = v[0], hi = v[0];
    for (int k = 1; k < n; k++) {
        lo = v[k] < lo ? v[k] : lo;
        hi = v[k] > hi ? v[k] : hi;
    }
    printf("%s %s %s=%.2f min=%.2f max=%.2f\n", kind, what, unit, median(v, n), lo, hi);
}

/* a ÷ b within each round, so that both sides of a ratio saw the same weather. */
static void ratio(const char *what, int ia, int ib, int rounds)
{
    double r[64] = {0};
    for (int k = 0; k < rounds; k++)
        r[k] = ops[ia].ns[k] / ops[ib].ns[k];
    spread("ratio", what, r, rounds, "median");
}

static int cmd_time(int rounds, double ms)
{
    if (rounds < 1 || rounds > 64)
        die("ROUNDS must be 1..64");
    load("before");
    for (size_t i = 0; i < NOPS; i++)
        calibrate(&ops[i], ms);
    for (int k = 0; k < rounds; k++)
        for (size_t j = 0; j < NOPS; j++) {
            op *o = &ops[(j + (size_t)k) % NOPS];
            o->ns[k] = sample(o);
            printf("sample %d %s %.1f %llu\n", k, o->name, o->ns[k], (unsigned long long)o->n);
        }
    for (size_t i = 0; i < NOPS; i++)
        spread("median", ops[i].name, ops[i].ns, rounds, "ns_per_op");
    ratio("aws/retry_1fail.zero:resil/retry_1fail", 2, 0, rounds);
    ratio("aws/retry_1fail.devzero:resil/retry_1fail", 3, 0, rounds);
    ratio("resil/retry_1fail:uv/idle_pass", 0, 1, rounds);
    load("after");
    return 0;
}

static int cmd_run(const char *name, uint64_t n)
{
    for (size_t i = 0; i < NOPS; i++)
        if (strcmp(ops[i].name, name) == 0) {
            ops[i].run(1000);
            ops[i].run(n);
            return 0;
        }
    die("no such operation");
    return 2;
}

int main(int argc, char **argv)
{
    aws_io_library_init(aws_default_allocator());
    resil_setup();
    aws_zero = aws_new(1, zero_rng);
    aws_devzero = aws_new(1, devzero_rng);
    aws_success = aws_new(0, zero_rng);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "time") == 0)
        return cmd_time(atoi(argv[2]), atof(argv[3]));
    if (argc == 4 && strcmp(argv[1], "run") == 0)
        return cmd_run(argv[2], strtoull(argv[3], NULL, 10));
    fprintf(stderr, "usage: vs_aws time ROUNDS MS | run OP N\n");
    return 2;
}
