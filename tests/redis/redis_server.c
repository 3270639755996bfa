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
 *
 * The fake servers stand in for what a real one never does: answer with
 * something that is not RESP, with lengths no Redis would send, or one
 * byte at a time. Each connection of an answering fake has its own thread,
 * joined at stop.
 */
#include "redis_server.h"
#include "../support/free_port.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
        s->port = test_free_port();
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

/* ---- servers that are not Redis ------------------------------------------- */

#define FAKE_CONNS 64

struct fake_server {
    int fd;
    int port;
    char url[64];
    char *reply;                 /* fake_server_start */
    const fake_answer *answers;  /* fake_server_answering */
    pthread_t thread;
    pthread_mutex_t mu;
    int conns[FAKE_CONNS];
    pthread_t conn_threads[FAKE_CONNS];
    int nconns;
};

typedef struct fake_conn {
    fake_server *f;
    int fd;
} fake_conn;

/* Write all of it (one byte at a time, `trickle_ms` apart, when asked);
 * false once the client is gone. */
static bool send_text(int fd, const char *text, int trickle_ms)
{
    size_t len = strlen(text);
    for (size_t at = 0; at < len;) {
        if (trickle_ms > 0 && at > 0)
            sleep_ms(trickle_ms);
        ssize_t n = send(fd, text + at, trickle_ms > 0 ? 1 : len - at, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        at += (size_t)n;
    }
    return true;
}

static const fake_answer *answer_for(const fake_answer *answers, const redisReply *cmd)
{
    static const fake_answer unknown = {"", "-ERR unknown command\r\n", 0, 0, NULL, 0};
    if (cmd->type != REDIS_REPLY_ARRAY || cmd->elements == 0 ||
        cmd->element[0]->type != REDIS_REPLY_STRING)
        return &unknown;
    for (const fake_answer *a = answers; a->command != NULL; a++)
        if (strcasecmp(a->command, cmd->element[0]->str) == 0)
            return a;
    return &unknown;
}

const char fake_hang_up[] = "";

/* false: close the connection. */
static bool answer_one(int fd, const fake_answer *a)
{
    if (a->delay_ms > 0)
        sleep_ms(a->delay_ms);
    if (a->reply == NULL || !send_text(fd, a->reply, a->trickle_ms))
        return false;
    if (a->then == NULL)
        return true;
    sleep_ms(a->then_ms);
    return a->then != fake_hang_up && send_text(fd, a->then, 0);
}

static void *conn_main(void *arg)
{
    fake_conn *c = arg;
    redisReader *rd = redisReaderCreate();
    char buf[16384];
    bool open = rd != NULL;
    while (open) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n <= 0 || redisReaderFeed(rd, buf, (size_t)n) != REDIS_OK)
            break;
        void *cmd = NULL;
        while (open && redisReaderGetReply(rd, &cmd) == REDIS_OK && cmd != NULL) {
            open = answer_one(c->fd, answer_for(c->f->answers, cmd));
            freeReplyObject(cmd);
        }
    }
    if (rd != NULL)
        redisReaderFree(rd);
    shutdown(c->fd, SHUT_RDWR); /* closed by fake_server_stop, never reused before */
    free(c);
    return NULL;
}

static void serve_conn(fake_server *f, int fd)
{
    fake_conn *c = malloc(sizeof *c);
    pthread_mutex_lock(&f->mu);
    bool room = c != NULL && f->nconns < FAKE_CONNS;
    if (room) {
        c->f = f;
        c->fd = fd;
        room = pthread_create(&f->conn_threads[f->nconns], NULL, conn_main, c) == 0;
    }
    if (room)
        f->conns[f->nconns++] = fd;
    pthread_mutex_unlock(&f->mu);
    if (!room) {
        free(c);
        close(fd);
    }
}

static void *fake_main(void *arg)
{
    fake_server *f = arg;
    for (;;) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            return NULL; /* closed by fake_server_stop */
        if (f->answers != NULL) {
            serve_conn(f, c);
            continue;
        }
        ssize_t n = write(c, f->reply, strlen(f->reply));
        (void)n;
        shutdown(c, SHUT_WR);
        close(c);
    }
}

static fake_server *fake_listen(const char *reply, const fake_answer *answers)
{
    fake_server *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->answers = answers;
    f->reply = reply != NULL ? strdup(reply) : NULL;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if ((reply != NULL && f->reply == NULL) || f->fd < 0 ||
        bind(f->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(f->fd, 16) != 0 ||
        getsockname(f->fd, (struct sockaddr *)&a, &len) != 0 ||
        pthread_create(&f->thread, NULL, fake_main, f) != 0) {
        if (f->fd >= 0)
            close(f->fd);
        free(f->reply);
        pthread_mutex_destroy(&f->mu);
        free(f);
        return NULL;
    }
    f->port = ntohs(a.sin_port);
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", f->port);
    return f;
}

fake_server *fake_server_start(const char *reply) { return fake_listen(reply, NULL); }

fake_server *fake_server_answering(const fake_answer *answers)
{
    return fake_listen(NULL, answers);
}

int fake_server_port(const fake_server *f) { return f->port; }
const char *fake_server_url(const fake_server *f) { return f->url; }

void fake_server_stop(fake_server *f)
{
    if (f == NULL)
        return;
    shutdown(f->fd, SHUT_RDWR);
    close(f->fd);
    pthread_join(f->thread, NULL);
    for (int i = 0; i < f->nconns; i++) {
        shutdown(f->conns[i], SHUT_RDWR);
        pthread_join(f->conn_threads[i], NULL);
        close(f->conns[i]);
    }
    pthread_mutex_destroy(&f->mu);
    free(f->reply);
    free(f);
}
