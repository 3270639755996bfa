/*
 * cancel_inline.h — a token's making and dropping, inline for the
 * pipeline's timeout levels, which make one per level on every execution.
 *
 * On Linux a token needs nothing but its fields (a waiter sleeps on the
 * state word itself), so making one is seven stores and dropping one that
 * nothing waited on is two loads; a call into cancel.c for each cost as
 * much again. The rare parts — unlinking a child that was linked, waiting
 * for a firer to let go — stay in cancel.c, out of line. Elsewhere a token
 * also carries a mutex and a condition variable, and the inline versions
 * are the public functions.
 */
#ifndef RESIL_CANCEL_INLINE_H
#define RESIL_CANCEL_INLINE_H

#include "resil/cancel.h"

/* cancel.c: a linked child out of its parent's list; wait for a firer
 * inside the token to let go of it. */
void resil__cancel_unlink(resil_cancel *c);
void resil__cancel_wait_free(int *lock);

/* A watch: a child token whose fire calls `fn` once, on the firing
 * thread and inside the token's lock (so it must be short and touch no
 * token), where a waited-on token's fire wakes its sleepers. Nothing may
 * wait on it. resil__cancel_watch_start() links it under `parent` at once
 * (0, or RESIL_ESYS where a token needs a mutex that could not be made);
 * if `parent` has already fired, the start itself calls `fn`. The watch
 * stops with resil__cancel_destroy(&w->tok), after which `fn` is neither
 * running nor to come. */
typedef struct resil__cancel_watch resil__cancel_watch;
typedef void (*resil__cancel_watch_fn)(resil__cancel_watch *w);
struct resil__cancel_watch {
    resil_cancel tok; /* first: the fire finds the watch from its token */
    resil__cancel_watch_fn fn;
};
int resil__cancel_watch_start(resil__cancel_watch *w, resil_cancel *parent,
                              resil__cancel_watch_fn fn);

/* A token's fired state (cancel.c's FIRED). */
enum { RESIL__CANCEL_FIRED = 1 };

/* resil_cancelled() looking at the token itself inline: only a token out
 * of its parent's list that has not fired asks up its parents (cancel.c's
 * fired_from, whose order of loads this keeps: the flag before the state). */
static inline bool resil__token_fired(const resil_cancel *c)
{
    if (c == NULL)
        return false;
    bool unlinked = __atomic_load_n(&c->unlinked, __ATOMIC_ACQUIRE) != 0;
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == RESIL__CANCEL_FIRED)
        return true;
    return unlinked && resil_cancel_fired(c->parent);
}

/* Armed (state 0), no reason, unlocked; a child starts out of its
 * parent's list (cancel.c says why). */
static inline void resil__cancel_fields(resil_cancel *c, resil_cancel *parent)
{
    c->state = 0;
    c->reason = 0;
    c->lock = 0;
    c->unlinked = parent != NULL;
    c->parent = parent;
    c->first_child = c->next_sibling = c->prev_sibling = NULL;
}

/* Out of the parent's list and out of every firer's hands. */
static inline void resil__cancel_let_go(resil_cancel *c)
{
    if (c->parent != NULL && __atomic_load_n(&c->unlinked, __ATOMIC_ACQUIRE) == 0)
        resil__cancel_unlink(c); /* after this no fire can come down from above */
    if (__atomic_load_n(&c->lock, __ATOMIC_ACQUIRE) != 0)
        resil__cancel_wait_free(&c->lock); /* nor is one aimed at c still inside it */
}

#ifdef __linux__
static inline int resil__cancel_init(resil_cancel *c, resil_cancel *parent)
{
    resil__cancel_fields(c, parent);
    return 0;
}

static inline void resil__cancel_destroy(resil_cancel *c) { resil__cancel_let_go(c); }
#else
static inline int resil__cancel_init(resil_cancel *c, resil_cancel *parent)
{
    return resil_cancel_init(c, parent);
}

static inline void resil__cancel_destroy(resil_cancel *c) { resil_cancel_destroy(c); }
#endif

#endif
