/*
 * resil.h — the umbrella header: include this and get every core concept.
 * Adapter libraries (http, store, redis, config) have their own headers so
 * that a program using only the core never sees their dependencies.
 */
#ifndef RESIL_H
#define RESIL_H

#include "resil/common.h"
#include "resil/time.h"
#include "resil/cancel.h"
#include "resil/rng.h"
#include "resil/outcome.h"
#include "resil/backoff.h"
#include "resil/retry_after.h"
#include "resil/budget.h"
#include "resil/retry.h"
#include "resil/breaker.h"
#include "resil/registry.h"
#include "resil/bulkhead.h"
#include "resil/ratelimit.h"
#include "resil/degrade.h"
#include "resil/timeout.h"
#include "resil/hedge.h"
#include "resil/chaos.h"
#include "resil/adaptive.h"
#include "resil/telemetry.h"
#include "resil/fallback.h"
#include "resil/route.h"
#include "resil/pipeline.h"
#include "resil/loop.h"
#include "resil/async.h"

#endif
