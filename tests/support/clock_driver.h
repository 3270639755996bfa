/*
 * clock_driver.h — moving a manual-mode fake clock for code that sleeps on
 * several threads at once (a hedging pool's workers and its caller).
 *
 * A single-threaded test lets the fake clock advance itself at each sleep.
 * With several sleeping threads that is wrong: each would move time by its
 * own wait. The driver instead moves time as a loop with virtual time does:
 * only once nothing can happen without it — every other thread of the
 * process is blocked — and then straight to the earliest sleeper's wake-up.
 * So the instants a threaded execution reads are exact, whatever the
 * scheduler does, and no test waits for real time to pass.
 */
#ifndef RESIL_CLOCK_DRIVER_H
#define RESIL_CLOCK_DRIVER_H

#include "resil.h"

/* Run fn(arg) on a thread of its own while the calling thread drives `fc`
 * (manual mode is set here); return once fn has returned and no sleeper is
 * left. Fails the test when every thread is blocked and nobody sleeps on
 * the clock: nothing could ever wake them. */
void clock_driver_run(resil_fake_clock *fc, void *(*fn)(void *), void *arg);

#endif
