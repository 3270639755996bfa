/*
 * http_loop.h — the loop `resil http` runs its transfers on: loop.h's
 * interface over poll(2), on the tool's one thread.
 *
 * Every URL of the command line is a call started on libresil-http's
 * curl multi (resil_http_multi), with and without -Z: serial transfers are
 * parallel ones at most one at a time. Retries wait on this loop's timers
 * and a hedge is a second transfer on the same multi handle, so the tool
 * makes no thread for either. The signal thread (http_cmd.c) is the only
 * other one, and it reaches the loop through `post`.
 *
 * Why a loop of the tool's own rather than libresil-uv: `resil http` is
 * built whenever libresil-http is, and libuv is an optional dependency; a
 * short-lived tool watches at most a few hundred sockets (--parallel-max
 * is at most 300), which poll(2) serves well, and the whole loop is the
 * two helpers loop.h provides (resil_timers, resil_posts) plus a pipe to
 * wake poll.
 */
#ifndef RESIL_CLI_HTTP_LOOP_H
#define RESIL_CLI_HTTP_LOOP_H

#include <poll.h>

#include "resil/loop.h"

typedef struct http_loop {
    resil_loop loop;
    resil_timers timers;
    resil_posts posts;
    int wake[2];           /* a post writes a byte to [1]; poll watches [0] */
    pthread_t thread;
    resil_io **watches;    /* the started watches, in no order */
    size_t nwatches, cap;
    resil_io **pass;       /* the watches of the poll pass being dispatched */
    struct pollfd *fds;    /* that pass's poll set: the wake pipe, then pass's */
    size_t npass, pass_cap; /* pass_cap: the room in both arrays */
} http_loop;

/* 0, or RESIL_ESYS / RESIL_ENOMEM. On the thread that will run it. */
int http_loop_init(http_loop *l);
/* Nothing may be watched or armed any more. */
void http_loop_destroy(http_loop *l);
/* One pass: wait for a descriptor, a due timer or a post (as long as it
 * takes when nothing is armed), then run what is ready. */
void http_loop_run_once(http_loop *l);

#endif
