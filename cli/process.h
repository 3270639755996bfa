/*
 * process.h — running a command as one attempt: its own process group, its
 * deadlines, and the signals that cancel it.
 *
 * The tool handles signals synchronously. SIGINT, SIGTERM, SIGHUP and SIGCHLD
 * are blocked for the whole process and collected with sigtimedwait() at the
 * only two places the tool ever waits: while an attempt runs (child_run) and
 * while the executor sleeps between attempts (the clock from sig_clock_init,
 * whose sleep is a sigtimedwait). So there is no signal handler doing work,
 * no watcher thread and no self-pipe; a signal is taken exactly where the
 * tool can act on it — forward it to the attempt, or end the wait at once —
 * and a signal that lands anywhere else stays pending until the next wait.
 */
#ifndef RESIL_CLI_PROCESS_H
#define RESIL_CLI_PROCESS_H

#include <stdbool.h>

#include "resil.h"

/*
 * A clock that reads the system clock and sleeps by waiting for a cancelling
 * signal: when SIGINT, SIGTERM or SIGHUP arrives during a sleep, it records
 * the signal, fires `cancel` and returns RESIL_ECANCELED at once. A token
 * fired by anything else is seen only when a sleep begins: the tool has no
 * other thread that could fire it.
 */
typedef struct sig_clock {
    resil_clock base;
    resil_cancel *cancel; /* fired on SIGINT/SIGTERM/SIGHUP; not owned */
    int signo;            /* the first cancelling signal taken, or 0 */
} sig_clock;

/*
 * Block the signals the tool collects; call once, before anything else runs.
 * A signal the tool's parent set to be ignored (SIGINT for a background job,
 * SIGHUP under nohup) stays ignored, for the tool and the commands it runs.
 * Returns 0 or RESIL_ESYS.
 */
int sig_setup(void);

void sig_clock_init(sig_clock *sc, resil_cancel *cancel);

/* Take a cancelling signal already pending, without waiting: true (and the
 * token fired) when one was. */
bool sig_clock_poll(sig_clock *sc);

typedef struct child_spec {
    char *const *argv;         /* argv[0] is looked up in PATH */
    bool null_stdin;           /* stdin from /dev/null instead of ours */
    resil_duration timeout;    /* the attempt's own bound; 0 = none */
    resil_instant deadline;    /* the whole run's bound; RESIL_INSTANT_MAX = none */
    resil_duration kill_after; /* SIGTERM, then SIGKILL this much later */
} child_spec;

typedef struct child_result {
    int status;        /* as a shell reports it: the exit code, 128+signal */
    int term_signal;   /* the signal that ended it, 0 if it exited */
    bool timed_out;    /* ended because `timeout` ran out */
    bool deadline;     /* ended because `deadline` passed */
    int spawn_errno;   /* it could not be started (status 126 or 127) */
    int cancel_signal; /* SIGINT/SIGTERM/SIGHUP reached the tool meanwhile */
} child_result;

/*
 * Run one attempt to its end. The command runs in a new process group with
 * the default signal mask. When a bound passes, the group gets SIGTERM and,
 * `kill_after` later, SIGKILL; a cancelling signal to the tool is forwarded
 * to the group as is (with the same SIGKILL escalation). The child is always
 * reaped before this returns; after a timeout or cancel, anything left in
 * its process group is killed. Returns 0 (read *out), or RESIL_ESYS when the
 * tool itself could not spawn or wait (errno is kept).
 */
int child_run(sig_clock *sc, const child_spec *spec, child_result *out);

/* "SIGTERM", "SIGKILL", ...; "SIG?" for a signal it does not know. */
const char *signal_name(int signo);

#endif
