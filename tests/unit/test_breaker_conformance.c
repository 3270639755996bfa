/*
 * test_breaker_conformance.c — the conformance suite against the built-in
 * breaker, directly and as a plug-in: the same breaker behind a table of
 * its own, so that every call goes through resil_breaker_ops and the
 * handle's dispatch, references and name are checked for other
 * implementations too.
 */
#include "breaker_conformance.h"

static resil_breaker *make_builtin(void *ud, const char *name, const resil_breaker_opts *o)
{
    (void)ud;
    resil_breaker_opts copy = *o;
    copy.name = name;
    resil_breaker *b = NULL;
    resil_err err;
    if (resil_breaker_new(&copy, &b, &err) != 0)
        fprintf(stderr, "make_builtin: %s\n", err.message);
    return b;
}

/* ---- the plug-in: a built-in breaker behind its own table ---------------- */

static int wrapped_acquire(void *self, resil_breaker_permit *p)
{
    return resil_breaker_acquire(self, p);
}
static int wrapped_record(void *self, const resil_breaker_permit *p, resil_breaker_result r)
{
    return resil_breaker_record(self, p, r);
}
static resil_breaker_state wrapped_state(void *self) { return resil_breaker_state_of(self); }
static int wrapped_stats(void *self, resil_breaker_stats *out)
{
    return resil_breaker_stats_get(self, out);
}
static int wrapped_control(void *self, resil_breaker_control op)
{
    switch (op) {
    case RESIL_BREAKER_DO_ISOLATE:
        return resil_breaker_isolate(self);
    case RESIL_BREAKER_DO_CLOSE:
        return resil_breaker_close(self);
    case RESIL_BREAKER_DO_RESET:
        return resil_breaker_reset(self);
    case RESIL_BREAKER_DO_DISABLE:
        return resil_breaker_disable(self);
    }
    return RESIL_EINVAL;
}
static void wrapped_destroy(void *self) { resil_breaker_free(self); }
static int wrapped_record_without_permit(void *self, resil_breaker_result r,
                                         resil_duration took)
{
    return r == RESIL_BREAKER_FAILURE ? resil_breaker_record_failure(self, took)
                                      : resil_breaker_record_success(self, took);
}

static const resil_breaker_ops wrapped_ops = {
    .size = sizeof(resil_breaker_ops),
    .kind = "wrapped",
    .acquire = wrapped_acquire,
    .record = wrapped_record,
    .state = wrapped_state,
    .stats = wrapped_stats,
    .control = wrapped_control,
    .destroy = wrapped_destroy,
    .record_without_permit = wrapped_record_without_permit,
};

static resil_breaker *make_wrapped(void *ud, const char *name, const resil_breaker_opts *o)
{
    resil_breaker *inner = make_builtin(ud, name, o), *b = NULL;
    if (inner == NULL || resil_breaker_new_custom(&wrapped_ops, inner, name, &b, NULL) != 0) {
        resil_breaker_free(inner);
        return NULL;
    }
    return b;
}

#define EVERYTHING                                                                   \
    (BREAKER_CAN_DISABLE | BREAKER_CAN_RECORD_WITHOUT_PERMIT | BREAKER_CAN_COUNT_WINDOW | \
     BREAKER_CAN_PREDICATE)

int main(void)
{
    const breaker_impl builtin = {.name = "builtin", .caps = EVERYTHING, .make = make_builtin};
    const breaker_impl wrapped = {.name = "wrapped", .caps = EVERYTHING, .make = make_wrapped};
    int failed = breaker_conformance_run(&builtin);
    failed += breaker_conformance_run(&wrapped);
    return failed;
}
