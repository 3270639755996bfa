/*
 * pg_server.c — start and stop a throwaway PostgreSQL (see pg_server.h).
 *
 * Everything runs through fork+exec of the server's own tools (initdb,
 * pg_ctl) rather than a shell, so paths need no quoting, and under root the
 * child drops to the server's user with setgid/setuid itself instead of
 * relying on runuser or sudo being configured. The one shared resource, the
 * directory, is cleaned up twice over: by pg_server_stop(), and by a
 * watchdog child that waits for the test process to go away — a test that
 * crashes or is killed by CTest's timeout must not leave a server behind.
 */
#include "pg_server.h"
#include "../support/free_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct pg_server {
    char dir[512];
    char data[600];
    char bindir[512];
    char url[128];
    int port;
    uid_t uid;
    gid_t gid;
    bool drop; /* run the tools as uid/gid */
    bool durable;
    int watchdog_fd;
    pid_t watchdog;
};

static bool executable(const char *dir, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, X_OK) == 0;
}

/* pg_config's bindir, else the newest /usr/lib/postgresql/N/bin. */
static bool find_bindir(char *out, size_t cap)
{
    FILE *p = popen("pg_config --bindir 2>/dev/null", "r");
    if (p != NULL) {
        bool got = fgets(out, (int)cap, p) != NULL;
        pclose(p);
        out[strcspn(out, "\n")] = '\0';
        if (got && executable(out, "initdb") && executable(out, "pg_ctl"))
            return true;
    }
    glob_t g;
    bool found = false;
    if (glob("/usr/lib/postgresql/*/bin", 0, NULL, &g) == 0) {
        for (size_t i = g.gl_pathc; i-- > 0 && !found;) {
            if (executable(g.gl_pathv[i], "initdb") && executable(g.gl_pathv[i], "pg_ctl")) {
                snprintf(out, cap, "%s", g.gl_pathv[i]);
                found = true;
            }
        }
        globfree(&g);
    }
    return found;
}

/* Run argv (argv[0] a path) with output appended to `log`, as the server's
 * user when dropping privileges. Returns the exit status, or -1. */
static int run_tool(const pg_server *s, char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int null = open("/dev/null", O_RDONLY);
        if (s->drop && (setgroups(0, NULL) != 0 || setgid(s->gid) != 0 || setuid(s->uid) != 0))
            _exit(126);
        if (fd < 0)
            fd = open("/dev/null", O_WRONLY);
        dup2(null, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("LC_ALL", "C", 1);
        unsetenv("PGDATA");
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The server's user under root: postgres, or a system user made for it. */
static bool pick_user(pg_server *s)
{
    if (geteuid() != 0) {
        s->drop = false;
        return true;
    }
    struct passwd *pw = getpwnam("postgres");
    if (pw == NULL) {
        int rc = system("useradd --system --no-create-home --shell /usr/sbin/nologin "
                        "resil-pg >/dev/null 2>&1");
        (void)rc;
        pw = getpwnam("resil-pg");
    }
    if (pw == NULL) {
        fprintf(stderr, "pg_server: no unprivileged user to run PostgreSQL as\n");
        return false;
    }
    s->uid = pw->pw_uid;
    s->gid = pw->pw_gid;
    s->drop = true;
    return true;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rmtree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void stop_server(const pg_server *s)
{
    char pg_ctl[PATH_MAX], log[PATH_MAX];
    snprintf(pg_ctl, sizeof pg_ctl, "%s/pg_ctl", s->bindir);
    snprintf(log, sizeof log, "%s/pg_ctl.log", s->dir);
    char *argv[] = {pg_ctl, "-D", (char *)s->data, "-m", "immediate", "-w", "stop", NULL};
    run_tool(s, argv, log);
}

/* A child that outlives nothing: when the test process's end of the pipe
 * closes (normal exit, crash or kill), stop the server and remove its
 * directory if pg_server_stop() has not already. */
static void start_watchdog(pg_server *s)
{
    int fds[2];
    s->watchdog_fd = -1;
    s->watchdog = -1;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[1]);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        dup2(null, 2);
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        char buf[16];
        ssize_t n;
        do
            n = read(fds[0], buf, sizeof buf);
        while (n > 0 || (n < 0 && errno == EINTR));
        /* initdb or pg_ctl may still be running, orphaned: sweep until the
         * directory stays gone. */
        for (int i = 0; i < 10 && access(s->dir, F_OK) == 0; i++) {
            if (i > 0)
                sleep(1);
            stop_server(s);
            rmtree(s->dir);
        }
        _exit(0);
    }
    close(fds[0]);
    s->watchdog_fd = fds[1];
    s->watchdog = pid;
}

static bool init_cluster(pg_server *s)
{
    char initdb[PATH_MAX], log[PATH_MAX];
    snprintf(initdb, sizeof initdb, "%s/initdb", s->bindir);
    snprintf(log, sizeof log, "%s/initdb.log", s->dir);
    char *argv[] = {initdb, "-D", s->data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                    "--locale=C", "--no-sync", NULL};
    if (run_tool(s, argv, log) == 0)
        return true;
    fprintf(stderr, "pg_server: initdb failed, see %s\n", log);
    return false;
}

/* pg_ctl start on s->port; 0 when it is up. */
static int start_on_port(pg_server *s)
{
    char pg_ctl[PATH_MAX], log[PATH_MAX], server_log[PATH_MAX], opts[PATH_MAX + 256];
    snprintf(pg_ctl, sizeof pg_ctl, "%s/pg_ctl", s->bindir);
    snprintf(log, sizeof log, "%s/pg_ctl.log", s->dir);
    snprintf(server_log, sizeof server_log, "%s/server.log", s->dir);
    snprintf(opts, sizeof opts,
             "-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200%s", s->port,
             s->dir, s->durable ? "" : " -c fsync=off -c full_page_writes=off");
    char *argv[] = {pg_ctl, "-D", s->data, "-l", server_log, "-w", "-t", "60",
                    "-o", opts, "start", NULL};
    return s->port > 0 && run_tool(s, argv, log) == 0 ? 0 : -1;
}

static bool start_on_free_port(pg_server *s, bool durable)
{
    char log[PATH_MAX], server_log[PATH_MAX];
    snprintf(log, sizeof log, "%s/pg_ctl.log", s->dir);
    snprintf(server_log, sizeof server_log, "%s/server.log", s->dir);
    s->durable = durable;
    for (int tries = 0; tries < 5; tries++) {
        s->port = test_free_port();
        if (start_on_port(s) == 0)
            return true;
    }
    fprintf(stderr, "pg_server: pg_ctl start failed, see %s and %s\n", log, server_log);
    return false;
}

pg_server *pg_server_start_durable(int durable)
{
    pg_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->watchdog_fd = -1;
    s->watchdog = -1;
    if (!find_bindir(s->bindir, sizeof s->bindir)) {
        fprintf(stderr, "pg_server: cannot find initdb and pg_ctl (install postgresql)\n");
        free(s);
        return NULL;
    }
    if (!pick_user(s)) {
        free(s);
        return NULL;
    }
    /* Under root, /tmp: $TMPDIR may not be reachable by the server's user. */
    const char *base = s->drop ? NULL : getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/resil-pg-XXXXXX", base ? base : "/tmp");
    if (mkdtemp(s->dir) == NULL || (s->drop && chown(s->dir, s->uid, s->gid) != 0)) {
        fprintf(stderr, "pg_server: cannot create %s: %s\n", s->dir, strerror(errno));
        free(s);
        return NULL;
    }
    snprintf(s->data, sizeof s->data, "%s/data", s->dir);
    start_watchdog(s);
    if (!init_cluster(s) || !start_on_free_port(s, durable != 0)) {
        pg_server_stop(s);
        return NULL;
    }
    snprintf(s->url, sizeof s->url, "postgres://postgres@127.0.0.1:%d/postgres", s->port);
    return s;
}

pg_server *pg_server_start(void) { return pg_server_start_durable(0); }

const char *pg_server_url(const pg_server *s) { return s->url; }

int pg_server_port(const pg_server *s) { return s->port; }

int pg_server_pause(pg_server *s)
{
    char pg_ctl[PATH_MAX], log[PATH_MAX];
    snprintf(pg_ctl, sizeof pg_ctl, "%s/pg_ctl", s->bindir);
    snprintf(log, sizeof log, "%s/pg_ctl.log", s->dir);
    char *argv[] = {pg_ctl, "-D", s->data, "-m", "fast", "-w", "stop", NULL};
    return run_tool(s, argv, log) == 0 ? 0 : -1;
}

int pg_server_resume(pg_server *s) { return start_on_port(s); }

void pg_server_stop(pg_server *s)
{
    if (s == NULL)
        return;
    stop_server(s);
    rmtree(s->dir);
    if (s->watchdog_fd >= 0)
        close(s->watchdog_fd);
    if (s->watchdog > 0)
        waitpid(s->watchdog, NULL, 0);
    free(s);
}
