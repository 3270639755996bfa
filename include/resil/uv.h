/*
 * uv.h — libresil-uv: resil hosted on a libuv loop.
 *
 * One resil_uv per uv_loop_t gives that loop the interface of loop.h: the
 * loop's time is the system clock's (resil_clock_system(): CLOCK_MONOTONIC,
 * the clock libuv's timers count on; elsewhere than Linux, uv_hrtime()),
 * every resil timer shares one uv_timer_t through a timer heap, and work posted
 * from other threads (a report from a worker) wakes the loop through one
 * uv_async_t. Executions then run with resil_pipeline_start(p,
 * resil_uv_loop(u), ...) and cost the loop nothing while they wait.
 *
 *   resil_uv *u;
 *   resil_uv_new(uv_default_loop(), &u);
 *   ... build pipelines with resil_pipeline_builder_clock(b, resil_loop_clock(resil_uv_loop(u)))
 *   ... resil_pipeline_start(p, resil_uv_loop(u), op, &call, done, ud, NULL);
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT);  // returns when nothing is left
 *
 * resil keeps the loop alive only while one of its timers is armed (a
 * retry's wait, a timeout): its async handle is unreferenced. An
 * operation in flight keeps the loop alive by its own I/O handle; one
 * that reports from another thread must keep it alive itself until it
 * reported (uv_queue_work() does; a thread of one's own holds a
 * referenced handle, e.g. a uv_async_t of its own). resil_uv_close()
 * closes the handles once no execution is left.
 */
#ifndef RESIL_UV_H
#define RESIL_UV_H

#include <uv.h>

#include "async.h"

RESIL_BEGIN_DECLS

typedef struct resil_uv resil_uv;

/* Call on the loop's thread (the one that runs uv_run). RESIL_ENOMEM,
 * RESIL_ESYS (a libuv handle could not be made). */
RESIL_API int resil_uv_new(uv_loop_t *loop, resil_uv **out);
RESIL_API resil_loop *resil_uv_loop(resil_uv *u);
/* Close the handles; the memory goes when libuv has closed them (run the
 * loop once more). Work still posted to the loop (from other threads)
 * runs first, on the calling thread, which is the loop's. Call it once,
 * with no execution in flight (async.h, "Lifetimes": a hedge's loser
 * still out counts): an execution still in flight would never end (its
 * timers never run, `done` never called, its memory never freed) and a
 * later report would reach freed memory, so that is undefined. */
RESIL_API void resil_uv_close(resil_uv *u);

RESIL_END_DECLS

#endif
