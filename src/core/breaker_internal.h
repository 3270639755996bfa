/*
 * breaker_internal.h — what the registry may ask a breaker that the public
 * API does not offer: a lock-free "is it idle?" for the eviction rule, which
 * scans every breaker and must not take each one's mutex.
 */
#ifndef RESIL_BREAKER_INTERNAL_H
#define RESIL_BREAKER_INTERNAL_H

#include "resil/breaker.h"

/* Safe to forget: for the built-in breaker, closed with no consecutive
 * failures; for another, what its ops->idle says (never, without one). */
bool resil__breaker_idle(const resil_breaker *b);

#endif
