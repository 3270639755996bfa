/*
 * test_cancel.c — the cancellation token: firing, reasons, parent/child
 * links, and waits that end at once when another thread fires. The token
 * has no lock of its own to wait on, so the thread tests also pin down the
 * races that makes delicate: fires racing links and unlinks, every sleeper
 * woken, and a token freed by its woken owner while the fire finishes.
 * The watch (the asynchronous executor's child that calls a function
 * when its parent fires) is specified here at the token's level.
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "test.h"

#include "../../src/core/cancel_inline.h"

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void new_token_is_not_fired(void **state)
{
    (void)state;
    resil_cancel c;
    assert_int_equal(resil_cancel_init(&c, NULL), 0);
    assert_false(resil_cancel_fired(&c));
    assert_false(resil_cancelled(&c));
    assert_int_equal(resil_cancel_reason(&c), 0);
    resil_cancel_destroy(&c);
}

static void fire_sets_flag_and_reason_canceled(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_true(resil_cancel_fired(&c));
    assert_true(resil_cancelled(&c));
    assert_int_equal(resil_cancel_reason(&c), RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void first_fire_reason_sticks(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire_reason(&c, RESIL_ETIMEDOUT);
    resil_cancel_fire(&c);
    assert_int_equal(resil_cancel_reason(&c), RESIL_ETIMEDOUT);
    resil_cancel_destroy(&c);
}

static void fire_is_idempotent(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    resil_cancel_fire(&c);
    resil_cancel_fire_reason(&c, RESIL_ETIMEDOUT);
    assert_true(resil_cancel_fired(&c));
    assert_int_equal(resil_cancel_reason(&c), RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void non_negative_reason_becomes_canceled(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire_reason(&c, 0);
    assert_int_equal(resil_cancel_reason(&c), RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void cancelled_is_false_for_null(void **state)
{
    (void)state;
    assert_false(resil_cancelled(NULL));
}

static void destroy_tolerates_null(void **state)
{
    (void)state;
    resil_cancel_destroy(NULL);
}

static void parent_fire_reaches_children_and_grandchildren(void **state)
{
    (void)state;
    resil_cancel root, a, b, grand;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&a, &root);
    resil_cancel_init(&b, &root);
    resil_cancel_init(&grand, &a);
    resil_cancel_fire_reason(&root, RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_reason(&a), RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_reason(&b), RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_reason(&grand), RESIL_ETIMEDOUT);
    resil_cancel_destroy(&grand);
    resil_cancel_destroy(&b);
    resil_cancel_destroy(&a);
    resil_cancel_destroy(&root);
}

static void child_fire_does_not_reach_parent_or_siblings(void **state)
{
    (void)state;
    resil_cancel root, a, b;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&a, &root);
    resil_cancel_init(&b, &root);
    resil_cancel_fire(&a);
    assert_true(resil_cancel_fired(&a));
    assert_false(resil_cancel_fired(&root));
    assert_false(resil_cancel_fired(&b));
    resil_cancel_destroy(&b);
    resil_cancel_destroy(&a);
    resil_cancel_destroy(&root);
}

static void child_of_fired_parent_starts_fired_with_its_reason(void **state)
{
    (void)state;
    resil_cancel root, child;
    resil_cancel_init(&root, NULL);
    resil_cancel_fire_reason(&root, RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_init(&child, &root), 0);
    assert_true(resil_cancel_fired(&child));
    assert_int_equal(resil_cancel_reason(&child), RESIL_ETIMEDOUT);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

static void destroyed_child_is_unlinked(void **state)
{
    (void)state;
    resil_cancel root, first, middle, last;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&first, &root);
    resil_cancel_init(&middle, &root);
    resil_cancel_init(&last, &root);
    resil_cancel_destroy(&middle); /* unlinked from the middle of the list */
    resil_cancel_fire(&root);      /* must not touch the destroyed token */
    assert_true(resil_cancel_fired(&first));
    assert_true(resil_cancel_fired(&last));
    resil_cancel_destroy(&last);
    resil_cancel_destroy(&first);
    resil_cancel_destroy(&root);
}

static void child_token_can_be_reused_after_destroy(void **state)
{
    (void)state;
    resil_cancel root, attempt;
    resil_cancel_init(&root, NULL);
    for (int i = 0; i < 3; i++) {
        resil_cancel_init(&attempt, &root);
        resil_cancel_fire(&attempt);
        resil_cancel_destroy(&attempt);
    }
    assert_false(resil_cancel_fired(&root));
    assert_null(root.first_child);
    resil_cancel_destroy(&root);
}

static void wait_until_past_deadline_returns_zero(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    assert_int_equal(resil_cancel_wait_until(&c, 0), 0);
    assert_int_equal(resil_cancel_wait_until(&c, -5), 0);
    assert_int_equal(resil_cancel_wait_until(&c, monotonic_ns()), 0);
    resil_cancel_destroy(&c);
}

static void wait_until_on_fired_token_returns_canceled(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    resil_cancel_fire(&c);
    assert_int_equal(resil_cancel_wait_until(&c, INT64_MAX), RESIL_ECANCELED);
    assert_int_equal(resil_cancel_wait_until(&c, 0), RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void wait_until_times_out_at_a_short_deadline(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    int64_t deadline = monotonic_ns() + 1000000; /* 1 ms */
    assert_int_equal(resil_cancel_wait_until(&c, deadline), 0);
    assert_true(monotonic_ns() >= deadline);
    resil_cancel_destroy(&c);
}

/* ---- threads ---------------------------------------------------------- */

typedef struct waiter {
    resil_cancel *token;
    int64_t deadline;
    int rc;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = resil_cancel_wait_until(w->token, w->deadline);
    return NULL;
}

static void fire_wakes_a_waiter_without_deadline(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    waiter w = {&c, INT64_MAX, 1};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    resil_cancel_fire(&c);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, RESIL_ECANCELED);
    resil_cancel_destroy(&c);
}

static void parent_fire_wakes_a_waiter_on_a_child(void **state)
{
    (void)state;
    resil_cancel root, child;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    waiter w = {&child, monotonic_ns() + RESIL_S(3600), 1};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    resil_cancel_fire(&root);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, RESIL_ECANCELED);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

#define RACERS 8

typedef struct racer {
    resil_cancel *token;
    int reason;
} racer;

static void *fire_thread(void *arg)
{
    racer *r = arg;
    resil_cancel_fire_reason(r->token, r->reason);
    return NULL;
}

static void concurrent_fires_agree_on_one_reason(void **state)
{
    (void)state;
    for (int round = 0; round < 50; round++) {
        resil_cancel root, child;
        resil_cancel_init(&root, NULL);
        resil_cancel_init(&child, &root);
        pthread_t t[RACERS];
        racer r[RACERS];
        for (int i = 0; i < RACERS; i++) {
            r[i].token = (i % 3 == 0) ? &child : &root;
            r[i].reason = (i % 2) ? RESIL_ETIMEDOUT : RESIL_ECANCELED;
            pthread_create(&t[i], NULL, fire_thread, &r[i]);
        }
        for (int i = 0; i < RACERS; i++)
            pthread_join(t[i], NULL);
        assert_true(resil_cancel_fired(&root));
        assert_true(resil_cancel_fired(&child));
        int reason = resil_cancel_reason(&root);
        assert_true(reason == RESIL_ECANCELED || reason == RESIL_ETIMEDOUT);
        resil_cancel_destroy(&child);
        resil_cancel_destroy(&root);
    }
}

static void *link_unlink_thread(void *arg)
{
    resil_cancel *root = arg;
    for (int i = 0; i < 200; i++) {
        resil_cancel child;
        resil_cancel_init(&child, root);
        resil_cancel_destroy(&child);
    }
    return NULL;
}

static void children_link_and_unlink_while_parent_fires(void **state)
{
    (void)state;
    resil_cancel root;
    resil_cancel_init(&root, NULL);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, link_unlink_thread, &root);
    resil_cancel_fire(&root);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_true(resil_cancel_fired(&root));
    assert_null(root.first_child);
    resil_cancel late;
    resil_cancel_init(&late, &root);
    assert_true(resil_cancel_fired(&late));
    resil_cancel_destroy(&late);
    resil_cancel_destroy(&root);
}

static void root_fire_wakes_a_waiter_on_a_grandchild(void **state)
{
    (void)state;
    resil_cancel root, child, grand;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    resil_cancel_init(&grand, &child);
    waiter w = {&grand, INT64_MAX, 1};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    resil_cancel_fire_reason(&root, RESIL_ETIMEDOUT);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, RESIL_ECANCELED);
    assert_int_equal(resil_cancel_reason(&grand), RESIL_ETIMEDOUT);
    resil_cancel_destroy(&grand);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

#define WAITERS 8

static void one_fire_wakes_every_waiter_on_the_token(void **state)
{
    (void)state;
    resil_cancel c;
    resil_cancel_init(&c, NULL);
    waiter w[WAITERS];
    pthread_t t[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){&c, i % 2 ? INT64_MAX : monotonic_ns() + RESIL_S(3600), 1};
        pthread_create(&t[i], NULL, wait_thread, &w[i]);
    }
    for (int i = 0; i < 100; i++)
        sched_yield(); /* let most of them fall asleep: more to wake */
    resil_cancel_fire(&c);
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, RESIL_ECANCELED);
    }
    resil_cancel_destroy(&c);
}

static void fire_after_a_timed_out_wait_still_fires_and_ends_the_next_wait(void **state)
{
    (void)state;
    resil_cancel root, child;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    assert_int_equal(resil_cancel_wait_until(&root, 0), 0); /* left a sleeper mark */
    assert_int_equal(resil_cancel_wait_until(&child, 0), 0);
    assert_false(resil_cancel_fired(&root));
    assert_int_equal(resil_cancel_reason(&root), 0);
    resil_cancel_fire_reason(&root, RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_reason(&root), RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_reason(&child), RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_wait_until(&child, INT64_MAX), RESIL_ECANCELED);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

/* Each thread links a child to the shared root, waits on it without a
 * deadline and unlinks it; the root fires while they do. */
typedef struct linker {
    resil_cancel *root;
    pthread_barrier_t *start;
    int rc;
} linker;

static void *link_wait_thread(void *arg)
{
    linker *l = arg;
    pthread_barrier_wait(l->start);
    resil_cancel child;
    resil_cancel_init(&child, l->root);
    l->rc = resil_cancel_wait_until(&child, INT64_MAX);
    resil_cancel_destroy(&child);
    return NULL;
}

static void children_linked_while_the_parent_fires_all_wake(void **state)
{
    (void)state;
    for (int round = 0; round < 50; round++) {
        resil_cancel root;
        resil_cancel_init(&root, NULL);
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, RACERS + 1);
        pthread_t t[RACERS];
        linker l[RACERS];
        for (int i = 0; i < RACERS; i++) {
            l[i] = (linker){&root, &start, 1};
            pthread_create(&t[i], NULL, link_wait_thread, &l[i]);
        }
        pthread_barrier_wait(&start);
        resil_cancel_fire(&root);
        for (int i = 0; i < RACERS; i++) {
            pthread_join(t[i], NULL);
            assert_int_equal(l[i].rc, RESIL_ECANCELED);
        }
        assert_null(root.first_child);
        pthread_barrier_destroy(&start);
        resil_cancel_destroy(&root);
    }
}

/* The child's memory is scribbled on the moment it is destroyed, so a fire
 * that still followed a link into it would crash or fire garbage. */
static void *link_scribble_thread(void *arg)
{
    resil_cancel *root = arg;
    resil_cancel child;
    for (int i = 0; i < 500; i++) {
        resil_cancel_init(&child, root);
        resil_cancel_destroy(&child);
        memset(&child, 0xA5, sizeof child);
    }
    return NULL;
}

static void a_destroyed_child_may_be_reused_at_once_while_its_parent_fires(void **state)
{
    (void)state;
    for (int round = 0; round < 20; round++) {
        resil_cancel root;
        resil_cancel_init(&root, NULL);
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, link_scribble_thread, &root);
        resil_cancel_fire(&root);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        assert_null(root.first_child);
        resil_cancel_destroy(&root);
    }
}

/* The waiter owns heap tokens: once woken it checks the child (if any),
 * destroys and frees them while the firing thread may still be finishing
 * the fire. ASan and TSan see any touch of the freed memory. */
typedef struct owned {
    resil_cancel *token, *child; /* child may be NULL */
    int rc;
    bool child_fired;
} owned;

static void *wait_destroy_free_thread(void *arg)
{
    owned *o = arg;
    o->rc = resil_cancel_wait_until(o->token, INT64_MAX);
    if (o->child != NULL) {
        o->child_fired = resil_cancel_fired(o->child);
        resil_cancel_destroy(o->child);
        free(o->child);
    }
    resil_cancel_destroy(o->token);
    free(o->token);
    return NULL;
}

static void fire_while_the_owner_waits_to_free(bool with_child, owned *o)
{
    o->token = malloc(sizeof(resil_cancel));
    o->child = with_child ? malloc(sizeof(resil_cancel)) : NULL;
    o->rc = 1;
    o->child_fired = false;
    assert_non_null(o->token);
    resil_cancel_init(o->token, NULL);
    if (with_child) {
        assert_non_null(o->child);
        resil_cancel_init(o->child, o->token);
    }
    pthread_t t;
    pthread_create(&t, NULL, wait_destroy_free_thread, o);
    resil_cancel_fire(o->token);
    pthread_join(t, NULL);
}

static void a_woken_waiter_finds_the_children_fired_and_may_free_the_tokens(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        owned o;
        fire_while_the_owner_waits_to_free(true, &o);
        assert_int_equal(o.rc, RESIL_ECANCELED);
        assert_true(o.child_fired);
    }
}

static void a_woken_waiter_may_free_a_childless_token_while_the_fire_finishes(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        owned o;
        fire_while_the_owner_waits_to_free(false, &o);
        assert_int_equal(o.rc, RESIL_ECANCELED);
    }
}

static void a_sibling_fire_does_not_end_a_wait_that_times_out(void **state)
{
    (void)state;
    resil_cancel root, a, b;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&a, &root);
    resil_cancel_init(&b, &root);
    resil_cancel_fire(&a);
    int64_t deadline = monotonic_ns() + 1000000; /* 1 ms */
    assert_int_equal(resil_cancel_wait_until(&b, deadline), 0);
    assert_true(monotonic_ns() >= deadline);
    resil_cancel_destroy(&b);
    resil_cancel_destroy(&a);
    resil_cancel_destroy(&root);
}

/* A child joins its parent's list only when something waits on it: the
 * two lock round trips of linking are spent only when a wait needs them. */
static void a_child_joins_its_parents_list_only_when_waited_on(void **state)
{
    (void)state;
    resil_cancel root, child;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    assert_null(root.first_child);
    assert_int_equal(resil_cancel_wait_until(&child, 0), 0);
    assert_ptr_equal(root.first_child, &child);
    resil_cancel_destroy(&child);
    assert_null(root.first_child);
    resil_cancel_destroy(&root);
}

static void a_grandchild_nobody_waits_on_sees_the_roots_fire(void **state)
{
    (void)state;
    resil_cancel root, child, grand;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    resil_cancel_init(&grand, &child);
    resil_cancel_fire_reason(&root, RESIL_ETIMEDOUT);
    assert_true(resil_cancel_fired(&grand));
    assert_int_equal(resil_cancel_reason(&grand), RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_wait_until(&grand, INT64_MAX), RESIL_ECANCELED);
    resil_cancel_destroy(&grand);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

static void firing_a_child_after_its_parent_keeps_the_parents_reason(void **state)
{
    (void)state;
    resil_cancel root, child;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    resil_cancel_fire_reason(&root, RESIL_ETIMEDOUT);
    resil_cancel_fire(&child);
    assert_int_equal(resil_cancel_reason(&child), RESIL_ETIMEDOUT);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

static void a_child_fired_first_keeps_its_reason_when_linked_after_its_parent_fires(void **state)
{
    (void)state;
    resil_cancel root, child;
    resil_cancel_init(&root, NULL);
    resil_cancel_init(&child, &root);
    resil_cancel_fire_reason(&child, RESIL_ETIMEDOUT);
    resil_cancel_fire(&root);
    assert_int_equal(resil_cancel_wait_until(&child, INT64_MAX), RESIL_ECANCELED);
    assert_int_equal(resil_cancel_reason(&child), RESIL_ETIMEDOUT);
    assert_int_equal(resil_cancel_reason(&root), RESIL_ECANCELED);
    resil_cancel_destroy(&child);
    resil_cancel_destroy(&root);
}

/* ---- the watch --------------------------------------------------------------- */

typedef struct watched {
    resil__cancel_watch w;
    int calls;
    int reason_seen;
} watched;

static void heard(resil__cancel_watch *w)
{
    watched *v = (watched *)w;
    v->calls++;
    v->reason_seen = resil_cancel_reason(&w->tok);
}

static void a_watch_is_called_once_with_the_parents_reason(void **state)
{
    (void)state;
    resil_cancel parent;
    assert_int_equal(resil_cancel_init(&parent, NULL), 0);
    watched v = {.calls = 0};
    assert_int_equal(resil__cancel_watch_start(&v.w, &parent, heard), 0);
    assert_int_equal(v.calls, 0);
    assert_false(resil_cancel_fired(&v.w.tok));
    resil_cancel_fire_reason(&parent, RESIL_ETIMEDOUT);
    resil_cancel_fire(&parent);
    assert_int_equal(v.calls, 1);
    assert_int_equal(v.reason_seen, RESIL_ETIMEDOUT);
    resil__cancel_destroy(&v.w.tok);
    resil_cancel_destroy(&parent);
}

/* The watch links every token above it: a fire two levels up reaches it. */
static void a_fire_above_the_parent_reaches_the_watch(void **state)
{
    (void)state;
    resil_cancel top, parent;
    assert_int_equal(resil_cancel_init(&top, NULL), 0);
    assert_int_equal(resil_cancel_init(&parent, &top), 0);
    watched v = {.calls = 0};
    assert_int_equal(resil__cancel_watch_start(&v.w, &parent, heard), 0);
    resil_cancel_fire(&top);
    assert_int_equal(v.calls, 1);
    assert_int_equal(v.reason_seen, RESIL_ECANCELED);
    assert_true(resil_cancel_fired(&parent));
    resil__cancel_destroy(&v.w.tok);
    resil_cancel_destroy(&parent);
    resil_cancel_destroy(&top);
}

/* A parent that fired before the watch began: the start calls it, once,
 * with the parent's reason. */
static void a_watch_of_a_fired_parent_is_called_by_its_start(void **state)
{
    (void)state;
    resil_cancel parent;
    assert_int_equal(resil_cancel_init(&parent, NULL), 0);
    resil_cancel_fire_reason(&parent, RESIL_ETIMEDOUT);
    watched v = {.calls = 0};
    assert_int_equal(resil__cancel_watch_start(&v.w, &parent, heard), 0);
    assert_int_equal(v.calls, 1);
    assert_int_equal(v.reason_seen, RESIL_ETIMEDOUT);
    resil_cancel_fire(&parent);
    assert_int_equal(v.calls, 1);
    resil__cancel_destroy(&v.w.tok);
    resil_cancel_destroy(&parent);
}

/* A fire racing the start from another thread: the watch is called once,
 * by whichever came second. */
static void *fire_parent(void *p)
{
    resil_cancel_fire(p);
    return NULL;
}

static void a_fire_racing_the_watchs_start_calls_it_once(void **state)
{
    (void)state;
    for (int i = 0; i < 500; i++) {
        resil_cancel parent;
        assert_int_equal(resil_cancel_init(&parent, NULL), 0);
        watched v = {.calls = 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, fire_parent, &parent), 0);
        assert_int_equal(resil__cancel_watch_start(&v.w, &parent, heard), 0);
        pthread_join(t, NULL);
        assert_int_equal(v.calls, 1);
        resil__cancel_destroy(&v.w.tok);
        resil_cancel_destroy(&parent);
    }
}

/* Stopped, the watch is out of the parent's list: a later fire calls
 * nothing, and the parent can be destroyed. */
static void a_stopped_watch_is_not_called(void **state)
{
    (void)state;
    resil_cancel parent;
    assert_int_equal(resil_cancel_init(&parent, NULL), 0);
    watched v = {.calls = 0};
    assert_int_equal(resil__cancel_watch_start(&v.w, &parent, heard), 0);
    resil__cancel_destroy(&v.w.tok);
    assert_null(parent.first_child);
    resil_cancel_fire(&parent);
    assert_int_equal(v.calls, 0);
    resil_cancel_destroy(&parent);
}

/* A watch beside a waiter: the fire both wakes the sleeper and calls the
 * watch, and neither gets in the other's way. */
typedef struct waiter_arg {
    resil_cancel *c;
    int rc;
} waiter_arg;

static void *wait_on(void *p)
{
    waiter_arg *a = p;
    a->rc = resil_cancel_wait_until(a->c, INT64_MAX);
    return NULL;
}

static void a_watch_and_a_sleeper_under_one_parent_both_hear_the_fire(void **state)
{
    (void)state;
    resil_cancel parent, sleeper;
    assert_int_equal(resil_cancel_init(&parent, NULL), 0);
    assert_int_equal(resil_cancel_init(&sleeper, &parent), 0);
    watched v = {.calls = 0};
    assert_int_equal(resil__cancel_watch_start(&v.w, &parent, heard), 0);
    waiter_arg a = {&sleeper, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_on, &a), 0);
    while (__atomic_load_n(&sleeper.state, __ATOMIC_ACQUIRE) != 2) /* SLEEPING */
        sched_yield();
    resil_cancel_fire(&parent);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, RESIL_ECANCELED);
    assert_int_equal(v.calls, 1);
    resil__cancel_destroy(&v.w.tok);
    resil_cancel_destroy(&sleeper);
    resil_cancel_destroy(&parent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_token_is_not_fired),
        cmocka_unit_test(a_child_joins_its_parents_list_only_when_waited_on),
        cmocka_unit_test(a_grandchild_nobody_waits_on_sees_the_roots_fire),
        cmocka_unit_test(firing_a_child_after_its_parent_keeps_the_parents_reason),
        cmocka_unit_test(a_child_fired_first_keeps_its_reason_when_linked_after_its_parent_fires),
        cmocka_unit_test(fire_sets_flag_and_reason_canceled),
        cmocka_unit_test(first_fire_reason_sticks),
        cmocka_unit_test(fire_is_idempotent),
        cmocka_unit_test(non_negative_reason_becomes_canceled),
        cmocka_unit_test(cancelled_is_false_for_null),
        cmocka_unit_test(destroy_tolerates_null),
        cmocka_unit_test(parent_fire_reaches_children_and_grandchildren),
        cmocka_unit_test(child_fire_does_not_reach_parent_or_siblings),
        cmocka_unit_test(child_of_fired_parent_starts_fired_with_its_reason),
        cmocka_unit_test(destroyed_child_is_unlinked),
        cmocka_unit_test(child_token_can_be_reused_after_destroy),
        cmocka_unit_test(wait_until_past_deadline_returns_zero),
        cmocka_unit_test(wait_until_on_fired_token_returns_canceled),
        cmocka_unit_test(wait_until_times_out_at_a_short_deadline),
        cmocka_unit_test(fire_wakes_a_waiter_without_deadline),
        cmocka_unit_test(parent_fire_wakes_a_waiter_on_a_child),
        cmocka_unit_test(concurrent_fires_agree_on_one_reason),
        cmocka_unit_test(children_link_and_unlink_while_parent_fires),
        cmocka_unit_test(root_fire_wakes_a_waiter_on_a_grandchild),
        cmocka_unit_test(one_fire_wakes_every_waiter_on_the_token),
        cmocka_unit_test(fire_after_a_timed_out_wait_still_fires_and_ends_the_next_wait),
        cmocka_unit_test(children_linked_while_the_parent_fires_all_wake),
        cmocka_unit_test(a_destroyed_child_may_be_reused_at_once_while_its_parent_fires),
        cmocka_unit_test(a_woken_waiter_finds_the_children_fired_and_may_free_the_tokens),
        cmocka_unit_test(a_woken_waiter_may_free_a_childless_token_while_the_fire_finishes),
        cmocka_unit_test(a_sibling_fire_does_not_end_a_wait_that_times_out),
        cmocka_unit_test(a_watch_is_called_once_with_the_parents_reason),
        cmocka_unit_test(a_fire_above_the_parent_reaches_the_watch),
        cmocka_unit_test(a_watch_of_a_fired_parent_is_called_by_its_start),
        cmocka_unit_test(a_fire_racing_the_watchs_start_calls_it_once),
        cmocka_unit_test(a_stopped_watch_is_not_called),
        cmocka_unit_test(a_watch_and_a_sleeper_under_one_parent_both_hear_the_fire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
