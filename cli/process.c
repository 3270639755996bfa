/*
 * process.c — spawning an attempt in its own process group, bounding it in
 * time, and turning the tool's SIGINT/SIGTERM/SIGHUP into cancellation.
 *
 * The attempt gets its own process group so that a timeout or a forwarded
 * signal reaches everything the command started (a shell script's children
 * too), not just the process we spawned. posix_spawn sets the group and the
 * default signal mask in the child before exec, so there is no window in
 * which the child runs with our blocked signals, and a command that cannot
 * be started is reported by the spawn itself (ENOENT -> 127, else 126, as a
 * shell does). Waiting is one loop around sigtimedwait() on SIGCHLD and the
 * cancelling signals with the nearest pending deadline as its timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process.h"

extern char **environ;

static sigset_t cancel_set; /* SIGINT, SIGTERM, SIGHUP, unless inherited ignored */
static sigset_t wait_set;   /* cancel_set plus SIGCHLD */

static void on_sigchld(int signo) { (void)signo; }

static bool inherited_ignored(int signo)
{
    struct sigaction sa;
    return sigaction(signo, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

int sig_setup(void)
{
    static const int cancelling[] = {SIGINT, SIGTERM, SIGHUP};
    sigemptyset(&cancel_set);
    for (size_t i = 0; i < sizeof cancelling / sizeof cancelling[0]; i++) {
        if (!inherited_ignored(cancelling[i]))
            sigaddset(&cancel_set, cancelling[i]);
    }
    wait_set = cancel_set;
    sigaddset(&wait_set, SIGCHLD);

    /* A handler (never run: the signal stays blocked) so that no system may
     * discard a SIGCHLD whose default action is to be ignored. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        return RESIL_ESYS;
    if (sigprocmask(SIG_BLOCK, &wait_set, NULL) != 0)
        return RESIL_ESYS;
    return 0;
}

/* ---- waiting for signals ------------------------------------------------ */

static resil_instant sys_now(void)
{
    return resil_clock_now(resil_clock_system());
}

/* Wait until `until` (RESIL_INSTANT_MAX: no bound) for a signal in `set`:
 * the signal, or 0 when the time came first. */
static int wait_signal(const sigset_t *set, resil_instant until)
{
    for (;;) {
        int sig;
        if (until == RESIL_INSTANT_MAX) {
            sig = sigwaitinfo(set, NULL);
        } else {
            resil_duration left = resil_dur_sub(until, sys_now());
            if (left <= 0)
                return 0;
            struct timespec ts = {.tv_sec = (time_t)(left / RESIL_S(1)),
                                  .tv_nsec = (long)(left % RESIL_S(1))};
            sig = sigtimedwait(set, NULL, &ts);
        }
        if (sig > 0)
            return sig;
        if (errno != EINTR && errno != EAGAIN)
            return 0;
    }
}

static bool is_cancel_signal(int sig)
{
    return sig > 0 && sig != SIGCHLD && sigismember(&cancel_set, sig) == 1;
}

static void take_cancel(sig_clock *sc, int sig)
{
    if (sc->signo == 0)
        sc->signo = sig;
    resil_cancel_fire(sc->cancel);
}

bool sig_clock_poll(sig_clock *sc)
{
    struct timespec zero = {0, 0};
    int sig = sigtimedwait(&cancel_set, NULL, &zero);
    if (!is_cancel_signal(sig))
        return false;
    take_cancel(sc, sig);
    return true;
}

/* ---- the clock ------------------------------------------------------------ */

static resil_instant sc_now(resil_clock *self)
{
    (void)self;
    return sys_now();
}

static int64_t sc_wall_now(resil_clock *self)
{
    (void)self;
    return resil_clock_wall_now(resil_clock_system());
}

static int sc_sleep(resil_clock *self, resil_duration d, resil_cancel *cancel)
{
    sig_clock *sc = (sig_clock *)self;
    if (resil_cancelled(cancel) || resil_cancelled(sc->cancel))
        return RESIL_ECANCELED;
    if (d <= 0)
        return 0;
    int sig = wait_signal(&cancel_set, resil_dur_add(sys_now(), d));
    if (!is_cancel_signal(sig))
        return 0;
    take_cancel(sc, sig);
    return RESIL_ECANCELED;
}

void sig_clock_init(sig_clock *sc, resil_cancel *cancel)
{
    sc->base.now = sc_now;
    sc->base.wall_now = sc_wall_now;
    sc->base.sleep = sc_sleep;
    sc->cancel = cancel;
    sc->signo = 0;
}

/* ---- the attempt ---------------------------------------------------------- */

static int spawn(const child_spec *spec, pid_t *pid)
{
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawn_file_actions_init(&fa);
    if (spec->null_stdin)
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    int rc = posix_spawnp(pid, spec->argv[0], &fa, &attr, spec->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}

/* The state of one attempt's ending: once it is being ended (timeout or a
 * forwarded signal) only the SIGKILL escalation remains to come. */
typedef struct watch {
    pid_t pid;
    bool ending;
    resil_instant kill_at;
    resil_duration kill_after;
} watch;

static void end_group(watch *w, int sig, resil_instant now)
{
    killpg(w->pid, sig);
    w->ending = true;
    if (w->kill_at == RESIL_INSTANT_MAX)
        w->kill_at = resil_dur_add(now, w->kill_after);
}

/* Act on whatever is due at `now`; true when something was done (look
 * again before waiting). */
static bool act_on_deadlines(watch *w, const child_spec *spec,
                             resil_instant timeout_at, resil_instant now,
                             child_result *out)
{
    if (!w->ending && now >= spec->deadline) {
        out->deadline = true;
        end_group(w, SIGTERM, now);
        return true;
    }
    if (!w->ending && now >= timeout_at) {
        out->timed_out = true;
        end_group(w, SIGTERM, now);
        return true;
    }
    if (now >= w->kill_at) {
        killpg(w->pid, SIGKILL);
        w->kill_at = RESIL_INSTANT_MAX;
        return true;
    }
    return false;
}

static resil_instant next_wake(const watch *w, const child_spec *spec,
                               resil_instant timeout_at)
{
    if (w->ending)
        return w->kill_at;
    resil_instant t = w->kill_at;
    if (timeout_at < t)
        t = timeout_at;
    if (spec->deadline < t)
        t = spec->deadline;
    return t;
}

static void record_status(int st, child_result *out)
{
    if (WIFSIGNALED(st)) {
        out->term_signal = WTERMSIG(st);
        out->status = 128 + out->term_signal;
    } else {
        out->status = WEXITSTATUS(st);
    }
}

static int wait_child(sig_clock *sc, const child_spec *spec, pid_t pid,
                      child_result *out)
{
    resil_instant start = sys_now();
    resil_instant timeout_at = spec->timeout > 0 ? resil_dur_add(start, spec->timeout)
                                                 : RESIL_INSTANT_MAX;
    watch w = {pid, false, RESIL_INSTANT_MAX, spec->kill_after};
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            record_status(st, out);
            break;
        }
        if (r < 0 && errno != EINTR)
            return RESIL_ESYS;
        resil_instant now = sys_now();
        if (act_on_deadlines(&w, spec, timeout_at, now, out))
            continue;
        int sig = wait_signal(&wait_set, next_wake(&w, spec, timeout_at));
        if (!is_cancel_signal(sig))
            continue;
        take_cancel(sc, sig);
        if (out->cancel_signal == 0)
            out->cancel_signal = sig;
        end_group(&w, sig, sys_now());
    }
    if (w.ending)
        killpg(pid, SIGKILL); /* whatever the leader left behind */
    return 0;
}

int child_run(sig_clock *sc, const child_spec *spec, child_result *out)
{
    memset(out, 0, sizeof *out);
    pid_t pid;
    int rc = spawn(spec, &pid);
    if (rc != 0) {
        out->spawn_errno = rc;
        out->status = rc == ENOENT ? 127 : 126;
        return 0;
    }
    return wait_child(sc, spec, pid, out);
}

const char *signal_name(int signo)
{
    static const struct { int signo; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
        {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
        {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
        {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
        {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},
        {SIGTSTP, "SIGTSTP"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i].signo == signo)
            return names[i].name;
    }
    return "SIG?";
}
