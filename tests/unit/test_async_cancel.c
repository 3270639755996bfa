/*
 * test_async_cancel.c — the caller's own token (call->cancel) on the
 * asynchronous path: its fire, from any thread and at any moment, reaches
 * an execution in flight through the loop's post queue and ends a wait as
 * resil_exec_cancel() does; only an execution that waits watches it, and
 * once the execution has ended the token is the caller's again (nothing
 * watches it, it may be destroyed); a fire posted just as the execution
 * ended keeps the execution's block until the post has run. And an
 * operation that cancels its own hedged execution as it starts ends it
 * then, not at the hedge's delay; one that cancels its own execution
 * returns before `done` runs, and an attempt is told to stop once, however
 * many cancels and timeouts come. `done` may free an unhedged execution's
 * pipeline; a loop table too short for in_loop gets its reports posted.
 * And what a start refuses before anything starts (NULL arguments, a key
 * the registry cannot hold): `done` is never called.
 *
 * The executions run on a virtual loop. The thread tests fire tokens from
 * a thread of their own while the loop runs (`make tsan` runs them under
 * TSan); the loop learns of each fire only through its posts.
 */
#include <stdatomic.h>

#include "test.h"
#include "virtual_loop.h"

#define T0 RESIL_S(1000)

typedef struct world {
    resil_fake_clock *fc;
    virtual_loop vl;
    resil_pipeline *p;
} world;

typedef struct call {
    world *w;
    resil_cancel token;
    resil_attempt *a;    /* a held attempt, reported later */
    bool fire_in_second; /* the second attempt fires the token, then succeeds */
    bool hold_first;     /* the first attempt fires the token and is held */
    bool ok_first;       /* the first attempt succeeds at once */
    int told;            /* cancel callbacks */
    int ended_in_op;     /* `ended` as the operation returned */
    int ended;
    resil_pipeline_result res;
    resil_instant ended_at;
} call;

static void world_open(world *w, void (*build)(resil_pipeline_builder *b))
{
    assert_int_equal(resil_fake_clock_new(T0, 0, &w->fc), 0);
    virtual_loop_init(&w->vl, w->fc);
    resil_pipeline_builder *b;
    assert_int_equal(resil_pipeline_builder_new("async cancel", &b, NULL), 0);
    resil_pipeline_builder_clock(b, resil_loop_clock(&w->vl.loop));
    build(b);
    assert_int_equal(resil_pipeline_build(b, &w->p, NULL), 0);
    resil_pipeline_builder_free(b);
}

static void world_close(world *w)
{
    resil_pipeline_free(w->p);
    virtual_loop_destroy(&w->vl);
    resil_fake_clock_free(w->fc);
}

static resil_instant now_of(world *w) { return w->vl.loop.ops->now(&w->vl); }

/* Fails once, then waits 1 s before the second attempt. */
static void retry_after_a_second(resil_pipeline_builder *b)
{
    test_add_retry_constant(b, 2, RESIL_S(1));
}

static void ended(const resil_pipeline_result *res, void *ud)
{
    call *c = ud;
    c->res = *res;
    c->ended++;
    c->ended_at = now_of(c->w);
}

static void told(resil_attempt *a, void *ud)
{
    call *c = ud;
    c->told++;
    resil_outcome o = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "stopped");
    resil_attempt_done(a, &o);
}

static void count_told(resil_attempt *a, void *ud)
{
    (void)a;
    ((call *)ud)->told++;
}

/* The first attempt fails at once (or succeeds at once, with ok_first,
 * or, with hold_first, is held after firing the token); the second
 * succeeds at once after firing the token (fire_in_second) or is held,
 * to be reported by the test. */
static void op(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    if (ctx->attempt == 1 && c->ok_first) {
        resil_outcome ok = resil_ok();
        resil_attempt_done(a, &ok);
        return;
    }
    if (ctx->attempt == 1 && c->hold_first) {
        resil_attempt_on_cancel(a, told, c);
        resil_cancel_fire(&c->token);
        return;
    }
    if (ctx->attempt == 1) {
        resil_outcome busy = resil_fail(RESIL_TRANSIENT, 503, "busy");
        resil_attempt_done(a, &busy);
        return;
    }
    if (c->fire_in_second) {
        resil_cancel_fire(&c->token);
        resil_outcome ok = resil_ok();
        resil_attempt_done(a, &ok);
        return;
    }
    c->a = a; /* held: reported by the test */
}

/* `fn` started on the world's loop for `c` (its user, and done's), with
 * `token` as the caller's (NULL: none); the execution in *x when x is
 * not NULL. */
static void start_op(world *w, call *c, resil_async_op_fn fn, resil_cancel *token,
                     resil_async_done_fn done, resil_exec **x)
{
    c->w = w;
    resil_call rc;
    resil_call_default(&rc);
    rc.user = c;
    rc.cancel = token;
    assert_int_equal(resil_pipeline_start(w->p, &w->vl.loop, fn, &rc, done, c, x), 0);
}

/* `op` started with a token of the call's own under `parent`. */
static void start(world *w, call *c, resil_cancel *parent)
{
    assert_int_equal(resil_cancel_init(&c->token, parent), 0);
    start_op(w, c, op, &c->token, ended, NULL);
}

typedef struct fire_at {
    resil_timer t;
    resil_cancel *token;
} fire_at;

static void fire_now(resil_timer *t) { resil_cancel_fire(((fire_at *)t)->token); }

static void fire_after(world *w, fire_at *f, resil_cancel *token, resil_duration d)
{
    f->t.fn = fire_now;
    f->token = token;
    w->vl.loop.ops->timer_start(&w->vl, &f->t, d);
}

static void assert_cancelled_waiting_to_retry(const call *c, resil_duration at)
{
    assert_int_equal(c->ended, 1);
    assert_int_equal(c->res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(c->res.outcome.kind, RESIL_CANCELLED);
    assert_string_equal(c->res.outcome.detail, "cancelled while waiting to retry");
    assert_int_equal(c->res.attempts, 1);
    assert_duration_equal(c->res.elapsed, at);
    assert_int_equal(c->ended_at, T0 + at);
}

static void a_fired_token_ends_a_retry_wait_at_the_fire(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {0};
    start(&w, &c, NULL);
    fire_at f = {0};
    fire_after(&w, &f, &c.token, RESIL_MS(250));
    virtual_loop_run(&w.vl, NULL);

    assert_cancelled_waiting_to_retry(&c, RESIL_MS(250));
    assert_null(c.a); /* the second attempt never started */
    resil_cancel_destroy(&c.token);
    world_close(&w);
}

/* The call's token is a child of the caller's own: a fire above it
 * reaches the execution too. */
static void a_fire_of_the_tokens_parent_ends_the_wait(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    resil_cancel parent;
    assert_int_equal(resil_cancel_init(&parent, NULL), 0);
    call c = {0};
    start(&w, &c, &parent);
    fire_at f = {0};
    fire_after(&w, &f, &parent, RESIL_MS(400));
    virtual_loop_run(&w.vl, NULL);

    assert_cancelled_waiting_to_retry(&c, RESIL_MS(400));
    resil_cancel_destroy(&c.token);
    resil_cancel_destroy(&parent);
    world_close(&w);
}

/* An execution that ends within its start (here its first attempt
 * succeeds at once) links nothing under the token: a later fire posts
 * nothing. One that waits is watched until it ends, and then the token is
 * the caller's again: a fire posts nothing, nothing is linked under it. */
static void only_an_execution_that_waits_watches_the_token(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call quick = {.ok_first = true};
    start(&w, &quick, NULL);
    assert_int_equal(quick.ended, 1);
    assert_null(quick.token.first_child);
    resil_cancel_fire(&quick.token);
    assert_int_equal(w.vl.pending, 0);

    call waiting = {.fire_in_second = false};
    start(&w, &waiting, NULL); /* the first attempt fails: a 1 s wait */
    assert_int_equal(waiting.ended, 0);
    assert_non_null(waiting.token.first_child);
    virtual_loop_run(&w.vl, NULL); /* the second attempt is held */
    resil_outcome ok = resil_ok();
    resil_attempt_done(waiting.a, &ok);
    assert_int_equal(waiting.ended, 1);
    assert_int_equal(waiting.res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(waiting.res.attempts, 2);
    assert_null(waiting.token.first_child);
    resil_cancel_fire(&waiting.token);
    assert_int_equal(w.vl.pending, 0);
    resil_cancel_destroy(&quick.token);
    resil_cancel_destroy(&waiting.token);
    world_close(&w);
}

/* The first attempt fires the token and holds on: the start tells it
 * once (its cancel callback reports at once), and nothing tells it
 * again. */
static void a_fire_inside_the_first_walk_tells_the_attempt_once(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {.hold_first = true};
    start(&w, &c, NULL);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(c.told, 1);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(c.res.attempts, 1);
    assert_string_equal(c.res.outcome.detail, "stopped");
    assert_duration_equal(c.res.elapsed, 0);
    resil_cancel_destroy(&c.token);
    world_close(&w);
}

/* Looks at the loop at the instant of the retry's wait's end, after the
 * wait's own timer (started earlier) has run the second attempt. */
typedef struct probe {
    resil_timer t;
    world *w;
    size_t pending;
    bool block_back;
    bool ran;
} probe;

static void look(resil_timer *t)
{
    probe *pr = (probe *)t;
    pthread_mutex_lock(&pr->w->vl.mu);
    pr->pending = pr->w->vl.pending;
    pthread_mutex_unlock(&pr->w->vl.mu);
    pr->block_back = pr->w->vl.loop.spare_ != NULL;
    pr->ran = true;
}

/* The second attempt fires the token and succeeds at once: the execution
 * ends (with the success: the fire came after it) while the fire is still
 * posted. Its block goes back to the loop only when the post has run. */
static void a_fire_posted_as_the_execution_ends_keeps_its_block_until_the_post_runs(
    void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {.fire_in_second = true};
    start(&w, &c, NULL);
    probe pr = {.t = {.fn = look}, .w = &w};
    w.vl.loop.ops->timer_start(&w.vl, &pr.t, RESIL_S(1));
    virtual_loop_run(&w.vl, NULL);

    assert_true(pr.ran);
    assert_int_equal(pr.pending, 1); /* the fire, posted */
    assert_false(pr.block_back);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.res.outcome.kind, RESIL_SUCCESS);
    assert_int_equal(c.res.stop, RESIL_STOP_SUCCEEDED);
    assert_int_equal(c.res.attempts, 2);
    assert_int_equal(w.vl.pending, 0);
    assert_non_null(w.vl.loop.spare_); /* back, once the post ran */
    resil_cancel_destroy(&c.token);
    world_close(&w);
}

/* ---- cancelled by its own operation while hedging ---------------------------- */

static resil_exec *self_cancelling;

static void hedged_after_a_second(resil_pipeline_builder *b)
{
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = RESIL_S(1);
    h.max_hedged = 1;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
}

/* The primary's operation cancels its own execution as it starts, and
 * holds on. */
static void cancel_own_execution(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    resil_attempt_on_cancel(a, told, c);
    resil_exec_cancel(self_cancelling);
}

static void an_operation_cancelling_its_own_hedged_execution_ends_it_at_once(void **state)
{
    (void)state;
    world w;
    world_open(&w, hedged_after_a_second);
    call c = {.w = &w};
    start_op(&w, &c, cancel_own_execution, NULL, ended, &self_cancelling);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.told, 1);
    assert_int_equal(c.res.outcome.kind, RESIL_CANCELLED);
    assert_int_equal(c.res.hedges, 0); /* the hedge's delay never ran out */
    assert_int_equal(c.ended_at, T0);
    world_close(&w);
}

/* ---- a hedge's loser reporting after the execution ended --------------------- */

typedef struct late {
    resil_attempt *held; /* the losing hedge's attempt, reported by the test */
    char ended_key[64];  /* the key of the HEDGE_ENDED event */
    int ended;
} late;

static late the_late;

static void heard_hedge_end(const resil_event *ev, void *ud)
{
    late *l = ud;
    if (ev->type == RESIL_EVENT_HEDGE_ENDED)
        snprintf(l->ended_key, sizeof l->ended_key, "%s", ev->key);
}

static void hedged_at_once_and_heard(resil_pipeline_builder *b)
{
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.delay = 0;
    h.max_hedged = 1;
    assert_int_equal(resil_pipeline_add_hedging(b, &h), 0);
    assert_int_equal(resil_pipeline_builder_listen(b, heard_hedge_end, &the_late), 0);
}

/* The primary succeeds at once; the hedge ignores its cancellation. */
static void primary_wins_and_the_hedge_holds_on(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    late *l = ctx->user;
    if (ctx->hedge == 1) {
        l->held = a;
        return;
    }
    resil_outcome ok = resil_ok();
    resil_attempt_done(a, &ok);
}

static void late_ended(const resil_pipeline_result *res, void *ud)
{
    (void)res;
    ((late *)ud)->ended++;
}

/* Once `done` has run, the call's memory is the caller's again: a loser
 * reporting later is named from the execution's own copy. */
static void a_loser_reporting_after_done_is_named_from_the_executions_copy(void **state)
{
    (void)state;
    memset(&the_late, 0, sizeof the_late);
    world w;
    world_open(&w, hedged_at_once_and_heard);
    char operation[32] = "checkout";
    resil_call rc;
    resil_call_default(&rc);
    rc.user = &the_late;
    rc.operation = operation;
    assert_int_equal(resil_pipeline_start(w.p, &w.vl.loop, primary_wins_and_the_hedge_holds_on,
                                          &rc, late_ended, &the_late, NULL),
                     0);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(the_late.ended, 1);
    assert_non_null(the_late.held);
    assert_string_equal(the_late.ended_key, "");
    snprintf(operation, sizeof operation, "reused");
    resil_outcome lost = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "lost");
    resil_attempt_done(the_late.held, &lost);
    virtual_loop_run(&w.vl, NULL);
    assert_string_equal(the_late.ended_key, "checkout");
    world_close(&w);
}

/* ---- fired from another thread ---------------------------------------------- */

#define QUEUED 64

typedef struct crowd {
    world w;
    resil_bulkhead *bh;
    call holder;
    call queued[QUEUED];
    _Atomic bool all_cancelled;
    atomic_int cancelled;
} crowd;

static crowd *the_crowd;

static void one_permit(resil_pipeline_builder *b)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = 1;
    o.max_queue = QUEUED;
    o.clock = resil_loop_clock(&the_crowd->w.vl.loop);
    assert_int_equal(resil_bulkhead_new(&o, &the_crowd->bh, NULL), 0);
    assert_int_equal(resil_pipeline_use_bulkhead(b, the_crowd->bh), 0);
}

static void queued_ended(const resil_pipeline_result *res, void *ud)
{
    ended(res, ud);
    if (atomic_fetch_add(&the_crowd->cancelled, 1) + 1 == QUEUED)
        atomic_store(&the_crowd->all_cancelled, true);
}

static void *fire_every_queued_token(void *arg)
{
    crowd *cr = arg;
    for (int i = QUEUED - 1; i >= 0; i--)
        resil_cancel_fire(&cr->queued[i].token);
    return NULL;
}

static void hold(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    c->a = a;
}

static void queued_executions_end_when_another_thread_fires_their_tokens(void **state)
{
    (void)state;
    static crowd cr;
    cr = (crowd){.cancelled = 0};
    the_crowd = &cr;
    world *w = &cr.w;
    world_open(w, one_permit);
    call *all[QUEUED + 1] = {&cr.holder};
    for (int i = 0; i < QUEUED; i++)
        all[i + 1] = &cr.queued[i];
    for (int i = 0; i <= QUEUED; i++) {
        call *c = all[i];
        assert_int_equal(resil_cancel_init(&c->token, NULL), 0);
        start_op(w, c, hold, &c->token, i == 0 ? ended : queued_ended, NULL);
    }
    assert_int_equal(resil_bulkhead_queued(cr.bh), QUEUED);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fire_every_queued_token, &cr), 0);
    virtual_loop_run(&w->vl, (const bool *)&cr.all_cancelled);
    pthread_join(t, NULL);

    for (int i = 0; i < QUEUED; i++) {
        const call *c = &cr.queued[i];
        assert_int_equal(c->ended, 1);
        assert_int_equal(c->res.outcome.kind, RESIL_CANCELLED);
        assert_string_equal(c->res.outcome.detail, "cancelled waiting for the bulkhead");
        assert_int_equal(c->res.attempts, 0);
        assert_int_equal(c->ended_at, T0);
    }
    resil_bulkhead_stats st;
    resil_bulkhead_stats_get(cr.bh, &st);
    assert_int_equal(st.cancelled, QUEUED);
    assert_int_equal(resil_bulkhead_queued(cr.bh), 0);
    assert_int_equal(cr.holder.ended, 0); /* the permit's call runs on */

    resil_outcome ok = resil_ok();
    resil_attempt_done(cr.holder.a, &ok);
    virtual_loop_run(&w->vl, NULL);
    assert_int_equal(cr.holder.ended, 1);
    assert_int_equal(cr.holder.res.outcome.kind, RESIL_SUCCESS);
    for (int i = 0; i <= QUEUED; i++)
        resil_cancel_destroy(&all[i]->token);
    world_close(w);
    resil_bulkhead_free(cr.bh);
}

/* ---- racing the end ----------------------------------------------------------- */

#define RACERS 400

typedef struct racer {
    resil_cancel token;
    resil_attempt *_Atomic a; /* set on the loop, reported from the thread */
    int ended;
    resil_pipeline_result res;
} racer;

static struct {
    racer r[RACERS];
    int ended;
    _Atomic bool all_ended;
} race;

static void to_the_thread(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    racer *r = ctx->user;
    atomic_store(&r->a, a);
}

static void racer_ended(const resil_pipeline_result *res, void *ud)
{
    racer *r = ud;
    r->ended++;
    r->res = *res;
    if (++race.ended == RACERS)
        atomic_store(&race.all_ended, true);
}

/* For each execution in turn: fire its token and report its attempt, in
 * an order that alternates, so that fires land before, during and after
 * the report's arrival on the loop. */
static void *fire_and_report(void *arg)
{
    (void)arg;
    for (int i = 0; i < RACERS; i++) {
        racer *r = &race.r[i];
        resil_attempt *a;
        while ((a = atomic_load(&r->a)) == NULL)
            sched_yield();
        resil_outcome ok = resil_ok();
        if (i % 2 == 0)
            resil_cancel_fire(&r->token);
        resil_attempt_done(a, &ok);
        if (i % 2 == 1)
            resil_cancel_fire(&r->token);
    }
    return NULL;
}

static void every_execution_ends_once_when_its_token_races_its_report(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    race.ended = 0;
    atomic_store(&race.all_ended, false);
    for (int i = 0; i < RACERS; i++) {
        racer *r = &race.r[i];
        r->ended = 0;
        atomic_store(&r->a, NULL);
        assert_int_equal(resil_cancel_init(&r->token, NULL), 0);
    }
    /* Every attempt is started before the thread begins: the first
     * attempt is the one the thread reports. */
    for (int i = 0; i < RACERS; i++) {
        resil_call rc;
        resil_call_default(&rc);
        rc.user = &race.r[i];
        rc.cancel = &race.r[i].token;
        assert_int_equal(
            resil_pipeline_start(w.p, &w.vl.loop, to_the_thread, &rc, racer_ended, &race.r[i],
                                 NULL),
            0);
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fire_and_report, NULL), 0);
    virtual_loop_run(&w.vl, (const bool *)&race.all_ended);
    pthread_join(t, NULL);
    virtual_loop_run(&w.vl, NULL); /* fires still posted */

    assert_int_equal(w.vl.pending, 0);
    for (int i = 0; i < RACERS; i++) {
        const racer *r = &race.r[i];
        assert_int_equal(r->ended, 1);
        /* The attempt reported success: the fire, whenever it landed, came
         * while the attempt ran and no wait was left to cut. */
        assert_int_equal(r->res.outcome.kind, RESIL_SUCCESS);
        assert_int_equal(r->res.attempts, 1);
        resil_cancel_destroy(&race.r[i].token);
    }
    world_close(&w);
}

/* ---- cancelling from inside the operation ------------------------------------- */

static resil_exec *cancelled_from_op;

/* Cancels its own execution as it starts: its cancel callback (told)
 * reports at once, inside that cancel. */
static void cancel_own_and_look(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    resil_attempt_on_cancel(a, told, c);
    resil_exec_cancel(cancelled_from_op);
    c->ended_in_op = c->ended;
}

/* The report its cancel callback makes inside the operation is held until
 * the operation returns, as one the operation makes itself is: `done`
 * does not run under the operation's feet (nor does the execution's block
 * go back to the loop while the start still uses it). */
static void an_operation_cancelling_its_own_execution_returns_before_done(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {.w = &w, .ended_in_op = -1};
    start_op(&w, &c, cancel_own_and_look, NULL, ended, &cancelled_from_op);
    assert_int_equal(c.ended_in_op, 0);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.told, 1);
    assert_int_equal(c.res.stop, RESIL_STOP_CANCELLED);
    assert_int_equal(c.res.outcome.kind, RESIL_CANCELLED);
    assert_string_equal(c.res.outcome.detail, "stopped");
    assert_int_equal(c.res.attempts, 1);
    world_close(&w);
}

/* Held; its cancel callback counts and reports nothing. */
static void hold_and_count(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    resil_attempt_on_cancel(a, count_told, c);
    c->a = a;
}

/* A second cancel finds the attempt told already: its callback runs
 * once, and the execution ends once, when the attempt reports. */
static void cancelling_twice_tells_the_running_attempt_once(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {.w = &w};
    resil_exec *x = NULL;
    start_op(&w, &c, hold_and_count, NULL, ended, &x);
    resil_exec_cancel(x);
    resil_exec_cancel(x);
    assert_int_equal(c.told, 1);
    assert_int_equal(c.ended, 0);
    resil_outcome o = resil_fail(RESIL_CANCELLED, RESIL_ECANCELED, "stopped late");
    resil_attempt_done(c.a, &o);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.res.stop, RESIL_STOP_CANCELLED);
    assert_string_equal(c.res.outcome.detail, "stopped late");
    assert_int_equal(c.res.attempts, 1);
    world_close(&w);
}

/* ---- both timeouts fire on one attempt ---------------------------------------- */

/* A 5 s total around a retry (1 s waits) around a 2 s attempt timeout. */
static void total_and_attempt_timeouts(resil_pipeline_builder *b)
{
    test_add_total_timeout(b, RESIL_S(5));
    test_add_retry_constant(b, 3, RESIL_S(1));
    test_add_attempt_timeout(b, RESIL_S(2));
}

typedef struct slow_stop {
    resil_timer t;
    call *c;
} slow_stop;

static slow_stop the_slow_stop;

static void report_stopped(resil_timer *t)
{
    call *c = ((slow_stop *)t)->c;
    resil_outcome o = resil_fail(RESIL_CANCELLED, RESIL_ETIMEDOUT, "stopped");
    resil_attempt_done(c->a, &o);
}

/* Told to stop, the attempt takes 4 s to do so. */
static void stop_in_four_seconds(resil_attempt *a, void *ud)
{
    (void)a;
    call *c = ud;
    c->told++;
    the_slow_stop.t.fn = report_stopped;
    the_slow_stop.c = c;
    c->w->vl.loop.ops->timer_start(&c->w->vl, &the_slow_stop.t, RESIL_S(4));
}

static void never_reports_until_told(resil_attempt *a, const resil_attempt_ctx *ctx)
{
    call *c = ctx->user;
    resil_attempt_on_cancel(a, stop_in_four_seconds, c);
    c->a = a;
}

/* The attempt timeout tells the first attempt at 2 s; the total timeout
 * fires at 5 s while it is still stopping, and does not tell it again.
 * Its report at 6 s ends the execution as the total timeout's. */
static void an_attempt_told_by_its_timeout_is_not_told_again_by_the_total(void **state)
{
    (void)state;
    memset(&the_slow_stop, 0, sizeof the_slow_stop);
    world w;
    world_open(&w, total_and_attempt_timeouts);
    call c = {.w = &w};
    start_op(&w, &c, never_reports_until_told, NULL, ended, NULL);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(c.told, 1);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.res.stop, RESIL_STOP_DEADLINE);
    assert_int_equal(c.res.outcome.kind, RESIL_TIMEOUT);
    assert_string_equal(c.res.outcome.detail, "total timeout (5s) elapsed");
    assert_int_equal(c.res.attempts, 1);
    assert_duration_equal(c.res.elapsed, RESIL_S(6));
    assert_int_equal(c.ended_at, T0 + RESIL_S(6));
    world_close(&w);
}

/* ---- done lets go of the pipeline --------------------------------------------- */

static void ended_and_free_the_pipeline(const resil_pipeline_result *res, void *ud)
{
    call *c = ud;
    ended(res, ud);
    resil_pipeline_free(c->w->p);
    c->w->p = NULL;
}

/* An execution without hedging holds nothing of its pipeline once `done`
 * runs: `done` may free it (ASan sees any later read). */
static void done_may_free_the_pipeline_of_an_unhedged_execution(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {.w = &w, .fire_in_second = true};
    assert_int_equal(resil_cancel_init(&c.token, NULL), 0);
    start_op(&w, &c, op, &c.token, ended_and_free_the_pipeline, NULL);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(c.ended, 1);
    assert_null(w.p);
    assert_int_equal(c.res.attempts, 2);
    assert_int_equal(c.res.outcome.kind, RESIL_SUCCESS);
    resil_cancel_destroy(&c.token);
    world_close(&w);
}

/* ---- a loop table that ends before in_loop ------------------------------------- */

static int in_loop_asked;

static bool in_loop_spy(void *self)
{
    (void)self;
    in_loop_asked++;
    return true;
}

/* A table whose size stops before in_loop has none, whatever lies past
 * its end: a report made on the loop's thread outside the operation is
 * posted, and the loop takes it on its next run. */
static void a_table_that_ends_before_in_loop_posts_the_report(void **state)
{
    (void)state;
    in_loop_asked = 0;
    world w;
    world_open(&w, retry_after_a_second);
    resil_loop_ops ops = *w.vl.loop.ops;
    ops.size = offsetof(resil_loop_ops, in_loop);
    ops.in_loop = in_loop_spy;
    resil_loop older;
    assert_int_equal(resil_loop_init(&older, &ops, &w.vl), 0);
    call c = {.w = &w};
    resil_call rc;
    resil_call_default(&rc);
    rc.user = &c;
    assert_int_equal(resil_pipeline_start(w.p, &older, hold, &rc, ended, &c, NULL), 0);
    resil_outcome ok = resil_ok();
    resil_attempt_done(c.a, &ok);
    assert_int_equal(c.ended, 0);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(in_loop_asked, 0);
    assert_int_equal(c.ended, 1);
    assert_int_equal(c.res.outcome.kind, RESIL_SUCCESS);
    resil_loop_drain(&older);
    world_close(&w);
}

/* ---- what is refused before anything starts ----------------------------------- */

static void starting_needs_a_pipeline_a_loop_an_operation_and_done(void **state)
{
    (void)state;
    world w;
    world_open(&w, retry_after_a_second);
    call c = {.w = &w};
    resil_exec *x = NULL;
    assert_int_equal(resil_pipeline_start(NULL, &w.vl.loop, op, NULL, ended, &c, &x),
                     RESIL_EINVAL);
    assert_int_equal(resil_pipeline_start(w.p, NULL, op, NULL, ended, &c, &x), RESIL_EINVAL);
    assert_int_equal(resil_pipeline_start(w.p, &w.vl.loop, NULL, NULL, ended, &c, &x),
                     RESIL_EINVAL);
    assert_int_equal(resil_pipeline_start(w.p, &w.vl.loop, op, NULL, NULL, &c, &x),
                     RESIL_EINVAL);
    assert_null(x);
    assert_int_equal(c.ended, 0);
    world_close(&w);
}

static resil_registry *start_registry; /* the registry with_registry builds on */

static void with_registry(resil_pipeline_builder *b)
{
    assert_int_equal(resil_pipeline_use_registry(b, start_registry), 0);
}

/* A key the registry cannot hold (256 bytes) has no breaker: the start
 * answers the registry's code, and `done` is never called. */
static void a_key_too_long_for_the_registry_starts_nothing(void **state)
{
    (void)state;
    resil_registry_opts ro;
    resil_registry_opts_default(&ro);
    assert_int_equal(resil_registry_new(&ro, &start_registry, NULL), 0);
    world w;
    world_open(&w, with_registry);
    char key[RESIL_BREAKER_NAME_MAX + 1];
    memset(key, 'k', RESIL_BREAKER_NAME_MAX);
    key[RESIL_BREAKER_NAME_MAX] = '\0';
    call c = {.w = &w};
    resil_call rc;
    resil_call_default(&rc);
    rc.user = &c;
    rc.key = key;
    resil_exec *x = NULL;
    assert_int_equal(resil_pipeline_start(w.p, &w.vl.loop, op, &rc, ended, &c, &x),
                     RESIL_EINVAL);
    assert_null(x);
    virtual_loop_run(&w.vl, NULL);
    assert_int_equal(c.ended, 0);
    assert_int_equal(resil_registry_count(start_registry), 0);
    world_close(&w);
    resil_registry_free(start_registry);
    start_registry = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fired_token_ends_a_retry_wait_at_the_fire),
        cmocka_unit_test(a_fire_of_the_tokens_parent_ends_the_wait),
        cmocka_unit_test(only_an_execution_that_waits_watches_the_token),
        cmocka_unit_test(a_fire_inside_the_first_walk_tells_the_attempt_once),
        cmocka_unit_test(a_fire_posted_as_the_execution_ends_keeps_its_block_until_the_post_runs),
        cmocka_unit_test(an_operation_cancelling_its_own_hedged_execution_ends_it_at_once),
        cmocka_unit_test(a_loser_reporting_after_done_is_named_from_the_executions_copy),
        cmocka_unit_test(queued_executions_end_when_another_thread_fires_their_tokens),
        cmocka_unit_test(every_execution_ends_once_when_its_token_races_its_report),
        cmocka_unit_test(an_operation_cancelling_its_own_execution_returns_before_done),
        cmocka_unit_test(cancelling_twice_tells_the_running_attempt_once),
        cmocka_unit_test(an_attempt_told_by_its_timeout_is_not_told_again_by_the_total),
        cmocka_unit_test(done_may_free_the_pipeline_of_an_unhedged_execution),
        cmocka_unit_test(a_table_that_ends_before_in_loop_posts_the_report),
        cmocka_unit_test(starting_needs_a_pipeline_a_loop_an_operation_and_done),
        cmocka_unit_test(a_key_too_long_for_the_registry_starts_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
