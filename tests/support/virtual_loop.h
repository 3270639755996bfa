/*
 * virtual_loop.h — a loop for tests: resil's loop interface on virtual
 * time.
 *
 * Its clock is a fake clock (the same one the blocking tests use), and
 * running the loop jumps that clock straight to the next timer's instant,
 * so an asynchronous execution with seconds of backoff finishes at once and
 * reads the same instants the blocking executor reads on the fake clock.
 * Work posted from other threads wakes a loop that has nothing else to do,
 * which is how the thread tests wait for their reports without sleeping.
 *
 * It watches descriptors too (poll(2)), for the HTTP tests' transfers on a
 * real loopback server: I/O is real, time is not. Time moves only when the
 * descriptors cannot become ready unless the loop acts first: every byte
 * the loop sent has reached the other end, the peer serving those ends has
 * nothing of its own left to do (virtual_loop_peer), and no descriptor is
 * ready after that. So a transfer in progress never sees a virtual second
 * pass while its answer is on the way, however slowly the peer's threads
 * are scheduled, and a Retry-After wait with nothing on the wire is jumped
 * over at once.
 */
#ifndef RESIL_VIRTUAL_LOOP_H
#define RESIL_VIRTUAL_LOOP_H

#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>

#include "resil.h"

typedef struct virtual_loop {
    resil_loop loop;
    resil_fake_clock *fc;
    resil_timers timers;
    resil_posts posts;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t posted;
    size_t pending; /* posts not yet run; guarded by mu */
    _Atomic size_t reads; /* ops->now calls: the clock readings resil asked for */
    /* watched descriptors: a slot per watch (loop_data is slot + 1) */
    resil_io **ios;
    size_t nios, ios_cap;
    struct pollfd *pfd;
    size_t *pslot;
    bool (*peer_settled)(void *peer);
    void *peer;
} virtual_loop;

/* How long a loop waiting for its peer to settle polls its descriptors
 * before asking again: only how promptly it notices, never whether. */
#define VIRTUAL_LOOP_RECHECK_MS 2

/* The loop reads and moves `fc`; create it on the thread that runs it. */
void virtual_loop_init(virtual_loop *v, resil_fake_clock *fc);
void virtual_loop_destroy(virtual_loop *v);
/* What the watched descriptors talk to, when it works on threads of its
 * own (a test server): `settled` is true when it has nothing of its own
 * left to do, so that whatever it does next waits on the loop's bytes.
 * Without a peer the other ends are the kernel's, and time moves as soon
 * as the descriptors are quiet. */
void virtual_loop_peer(virtual_loop *v, bool (*settled)(void *peer), void *peer);
/* Run posted work and due timers, moving time to each next timer, until
 * nothing is left to run and *until (if given) is true. While *until is
 * false and nothing is runnable, wait for work posted by another thread. */
void virtual_loop_run(virtual_loop *v, const bool *until);

#endif
