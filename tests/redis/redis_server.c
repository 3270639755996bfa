/*
 * redis_server.c — starting, staging outages of and cleaning up after a
 * real redis-server (see redis_server.h).
 *
 * The port is found by binding port 0 and closing it again; another process
 * may take it in between, so a server that exits at once is retried on a
 * fresh port. Readiness is "our server answers", polled briefly: the one real
 * wait the tests cannot avoid, since it is Redis's own start-up.
 *
 * The server persists nothing, so it needs no directory of its own: it
 * runs in the temporary directory and logs to a file that is unlinked from
 * the start (printed when it fails to start). So even a test process
 * killed outright leaves nothing behind: its servers die with it, and
 * there is no file to remove.
 */
#include "redis_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERVERS 8
#define START_TRIES 5
#define READY_WAIT_MS 10000

struct redis_server {
    pid_t pid;
    int port;
    char url[64];
};

static redis_server *started[MAX_SERVERS];
static pthread_mutex_t started_mu = PTHREAD_MUTEX_INITIALIZER;
static bool cleanup_registered;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void reap(redis_server *s, int sig)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGCONT);
    kill(s->pid, sig);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
}

static void cleanup_all(void)
{
    pthread_mutex_lock(&started_mu);
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (started[i] != NULL)
            reap(started[i], SIGKILL);
        started[i] = NULL;
    }
    pthread_mutex_unlock(&started_mu);
}

static void track(redis_server *s, bool add)
{
    pthread_mutex_lock(&started_mu);
    if (!cleanup_registered) {
        atexit(cleanup_all);
        cleanup_registered = true;
    }
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (add && started[i] == NULL) {
            started[i] = s;
            break;
        }
        if (!add && started[i] == s)
            started[i] = NULL;
    }
    pthread_mutex_unlock(&started_mu);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static const char *temp_dir(void)
{
    const char *base = getenv("TMPDIR");
    return base != NULL ? base : "/tmp";
}

static pid_t spawn(const redis_server *s, int log)
{
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    const char *dir = temp_dir();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* The child: only async-signal-safe calls until exec. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0)
        dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
           "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "",
           "--daemonize", "no", "--protected-mode", "no", (char *)NULL);
    _exit(127);
}

/* Does our server answer? A server another test program started on the
 * same port (both drew it as free) would answer too: the pid tells. */
static bool answers_as(int port, pid_t pid)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (c != NULL && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "INFO server");
        const char *at = r != NULL && r->type == REDIS_REPLY_STRING
                             ? strstr(r->str, "process_id:")
                             : NULL;
        ok = at != NULL && strtol(at + strlen("process_id:"), NULL, 10) == (long)pid;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return ok;
}

/* Wait until it answers, or it exits (port taken), or time runs out. */
static bool wait_ready(redis_server *s)
{
    for (int waited = 0; waited < READY_WAIT_MS; waited += 10) {
        if (answers_as(s->port, s->pid))
            return true;
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return false;
        }
        sleep_ms(10);
    }
    reap(s, SIGKILL);
    return false;
}

static void print_log(FILE *log)
{
    char line[512];
    rewind(log);
    while (fgets(line, sizeof line, log) != NULL)
        fprintf(stderr, "redis-server: %s", line);
}

static int launch(redis_server *s)
{
    FILE *log = tmpfile(); /* already unlinked */
    if (log == NULL) {
        fprintf(stderr, "redis_server: tmpfile: %s\n", strerror(errno));
        return -1;
    }
    s->pid = spawn(s, fileno(log));
    bool ready = s->pid > 0 && wait_ready(s);
    if (s->pid < 0)
        fprintf(stderr, "redis_server: fork: %s\n", strerror(errno));
    if (!ready)
        print_log(log);
    fclose(log);
    return ready ? 0 : -1;
}

redis_server *redis_server_start(void)
{
    redis_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    track(s, true);
    for (int i = 0; i < START_TRIES; i++) {
        s->port = free_port();
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
        if (s->port > 0 && launch(s) == 0)
            return s;
    }
    fprintf(stderr, "redis_server: redis-server did not start (is it installed? "
                    "scripts/deps.sh installs it)\n");
    track(s, false);
    free(s);
    return NULL;
}

void redis_server_stop(redis_server *s)
{
    if (s == NULL)
        return;
    reap(s, SIGTERM);
    track(s, false);
    free(s);
}

int redis_server_port(const redis_server *s) { return s->port; }
const char *redis_server_url(const redis_server *s) { return s->url; }
int redis_server_pid(const redis_server *s) { return (int)s->pid; }

void redis_server_kill(redis_server *s) { reap(s, SIGKILL); }

int redis_server_restart(redis_server *s)
{
    reap(s, SIGKILL);
    /* The old socket may linger a moment; Redis binds with SO_REUSEADDR. */
    for (int i = 0; i < START_TRIES; i++) {
        if (launch(s) == 0)
            return 0;
        sleep_ms(100);
    }
    fprintf(stderr, "redis_server: could not restart on port %d\n", s->port);
    return -1;
}

void redis_server_pause(redis_server *s)
{
    if (s->pid > 0)
        kill(s->pid, SIGSTOP);
}

void redis_server_resume(redis_server *s)
{
    if (s->pid > 0)
        kill(s->pid, SIGCONT);
}

redisReply *redis_server_command(redis_server *s, int argc, const char **argv)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    redisFree(c);
    return r;
}

long long redis_server_integer(redis_server *s, int argc, const char **argv)
{
    redisReply *r = redis_server_command(s, argc, argv);
    long long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

long long redis_server_calls(redis_server *s, const char *command)
{
    const char *argv[] = {"INFO", "commandstats"};
    redisReply *r = redis_server_command(s, 2, argv);
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", command);
    const char *at = strstr(r->str, needle);
    long long calls = at != NULL ? strtoll(at + strlen(needle), NULL, 10) : 0;
    freeReplyObject(r);
    return calls;
}

/* ---- a server that is not Redis ------------------------------------------ */

struct fake_server {
    int fd;
    int port;
    char *reply;
    pthread_t thread;
};

static void *fake_main(void *arg)
{
    fake_server *f = arg;
    for (;;) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            return NULL; /* closed by fake_server_stop */
        ssize_t n = write(c, f->reply, strlen(f->reply));
        (void)n;
        shutdown(c, SHUT_WR);
        close(c);
    }
}

fake_server *fake_server_start(const char *reply)
{
    fake_server *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->reply = strdup(reply);
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (f->reply == NULL || f->fd < 0 || bind(f->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(f->fd, 16) != 0 || getsockname(f->fd, (struct sockaddr *)&a, &len) != 0 ||
        pthread_create(&f->thread, NULL, fake_main, f) != 0) {
        if (f->fd >= 0)
            close(f->fd);
        free(f->reply);
        free(f);
        return NULL;
    }
    f->port = ntohs(a.sin_port);
    return f;
}

int fake_server_port(const fake_server *f) { return f->port; }

void fake_server_stop(fake_server *f)
{
    if (f == NULL)
        return;
    shutdown(f->fd, SHUT_RDWR);
    close(f->fd);
    pthread_join(f->thread, NULL);
    free(f->reply);
    free(f);
}
