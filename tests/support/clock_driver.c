/*
 * clock_driver.c — the driver's one question is "is every other thread
 * blocked?", and Linux answers it in /proc/self/task: each thread's state
 * and its count of context switches. One look is not enough (a thread read
 * as sleeping may be woken by one read later, which then sleeps too), so
 * the driver looks twice: if every thread was asleep both times with the
 * same switch counts, none of them ran in between, so there was an instant
 * at which all were asleep at once — and then only the driver can wake any
 * of them. It polls (yielding) until that holds; it never waits on time.
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock_driver.h"
#include "test.h"

#define MAX_THREADS 64

typedef struct thread_look {
    long tid;
    char state;
    unsigned long switches; /* voluntary + involuntary */
} thread_look;

typedef struct census {
    thread_look t[MAX_THREADS];
    size_t n;
    bool all_blocked;
} census;

static void look_at(long tid, thread_look *t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    t->tid = tid;
    t->state = 'X'; /* gone: it cannot run any more */
    t->switches = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[128];
    unsigned long n;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "State:", 6) == 0)
            t->state = line[7];
        else if (sscanf(line, "voluntary_ctxt_switches: %lu", &n) == 1 ||
                 sscanf(line, "nonvoluntary_ctxt_switches: %lu", &n) == 1)
            t->switches += n;
    }
    fclose(f);
}

static bool blocked(char state) { return state == 'S' || state == 'Z' || state == 'X'; }

static void take_census(long self, census *c)
{
    c->n = 0;
    c->all_blocked = true;
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        fail_msg("clock driver: cannot read /proc/self/task");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long tid = strtol(e->d_name, NULL, 10);
        if (tid <= 0 || tid == self)
            continue;
        if (c->n == MAX_THREADS)
            fail_msg("clock driver: more than %d threads", MAX_THREADS);
        thread_look *t = &c->t[c->n++];
        look_at(tid, t);
        c->all_blocked = c->all_blocked && blocked(t->state);
    }
    closedir(d);
}

static bool same(const census *a, const census *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->t[i].tid != b->t[i].tid || a->t[i].switches != b->t[i].switches)
            return false;
    return true;
}

/* Every thread but this one was blocked at one instant. */
static bool quiescent(long self)
{
    static census first, second; /* the driver runs on one thread at a time */
    take_census(self, &first);
    if (!first.all_blocked)
        return false;
    take_census(self, &second);
    return second.all_blocked && same(&first, &second);
}

typedef struct job {
    void *(*fn)(void *);
    void *arg;
    atomic_bool returned;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    j->fn(j->arg);
    atomic_store(&j->returned, true);
    return NULL;
}

void clock_driver_run(resil_fake_clock *fc, void *(*fn)(void *), void *arg)
{
    resil_fake_clock_set_manual(fc, true);
    job j = {fn, arg, false};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, run_job, &j), 0);
    long self = (long)syscall(SYS_gettid);
    for (;;) {
        if (!quiescent(self)) {
            sched_yield();
            continue;
        }
        resil_instant next = resil_fake_clock_next_wake(fc);
        if (next == RESIL_INSTANT_MAX) {
            if (atomic_load(&j.returned))
                break;
            fail_msg("clock driver: every thread is blocked and none sleeps on the clock");
        }
        resil_fake_clock_advance(fc, resil_dur_sub(next, resil_fake_clock_now(fc)));
    }
    pthread_join(thread, NULL);
}
