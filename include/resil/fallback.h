/*
 * fallback.h — the last resort: when the execution fails or is refused,
 * produce the answer some other way (a cached value, a default, a degraded
 * response).
 *
 * The fallback is told why it was called — the failed outcome, which
 * strategy refused if one did, the retry's stop reason and how many
 * attempts ran — so that one function can tell "the circuit is open" from
 * "three attempts failed". Values travel the way they do for the operation:
 * through the caller's context pointer; the returned outcome replaces the
 * pipeline's, and the result keeps the original as its cause.
 *
 * A caller who gave up wants no substitute answer: once the caller's cancel
 * token has fired (with any reason but RESIL_ETIMEDOUT), the fallback is not
 * called, whatever the outcome and `handle` say — a cancel before the call
 * and a cancel during a retry's wait both end with kind Cancelled, code
 * RESIL_ECANCELED and stop "cancelled". A timeout is not the caller giving
 * up: a total timeout that ends the retry ("deadline") still goes to the
 * fallback.
 */
#ifndef RESIL_FALLBACK_H
#define RESIL_FALLBACK_H

#include "telemetry.h"

RESIL_BEGIN_DECLS

typedef struct resil_fallback_info {
    const resil_outcome *outcome;    /* the failure or rejection being replaced */
    resil_strategy_kind rejected_by; /* who refused, or RESIL_STRATEGY_NONE */
    resil_stop stop;                 /* the retry's stop reason (NONE if none ran yet) */
    uint32_t attempts;               /* attempts made so far */
    const resil_attempt_ctx *ctx;    /* the call as the fallback sees it: its
                                        user data, token and deadline
                                        (attempt 0 outside a retry) */
} resil_fallback_info;

/* Produce the outcome (and, through `user`, the value). */
typedef resil_outcome (*resil_fallback_fn)(const resil_fallback_info *info, void *user,
                                           void *ud);

typedef struct resil_fallback_opts {
    resil_fallback_fn action;    /* required */
    void *action_ud;
    resil_retry_on_fn handle;    /* which outcomes go to the fallback (never
                                    once the caller's token fired); ctx as in
                                    resil_fallback_info; NULL =
                                    resil_fallback_handle_default */
    void *handle_ud;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_fallback_opts;

RESIL_API void resil_fallback_opts_default(resil_fallback_opts *o);
RESIL_API int resil_fallback_opts_validate(const resil_fallback_opts *o, resil_err *err);
/* The default rule: every failure and rejection, but not a cancellation:
 * a caller who gave up wants no substitute answer (Polly's default too). */
RESIL_API bool resil_fallback_handle_default(const resil_outcome *o, void *ud);

RESIL_END_DECLS

#endif
