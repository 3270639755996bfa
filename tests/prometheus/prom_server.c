/*
 * prom_server.c — a real Prometheus for the scrape tests (prom_server.h).
 *
 * The port is found by binding port 0 and closing it again; another
 * process may take it in between, so a Prometheus that exits at once is
 * retried on a fresh port. Readiness is Prometheus's own /-/ready,
 * polled; queries are plain HTTP/1.0 GETs on a socket, so the test needs
 * no client library. Only the first sample's value is read from the JSON
 * answer: the queries are written to have exactly one.
 */
#include "prom_server.h"
#include "free_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define START_TRIES 5
#define READY_WAIT_MS 30000
#define ANSWER_MAX (64 * 1024)

struct prom_server {
    pid_t pid;
    int port;
    char *dir;
    char log[512];
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* An HTTP/1.0 GET on loopback: the body into buf, the status returned
 * (0 when nothing answered). */
static int http_get(int port, const char *target, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", target);
    size_t len = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, (size_t)n) == n) {
        ssize_t got;
        while (len + 1 < cap && (got = read(fd, buf + len, cap - 1 - len)) > 0)
            len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/%*s %d", &status) != 1)
        return 0;
    char *body = strstr(buf, "\r\n\r\n");
    if (body == NULL)
        buf[0] = '\0';
    else
        memmove(buf, body + 4, strlen(body + 4) + 1);
    return status;
}

static bool write_config(prom_server *s, const char *target)
{
    char path[512];
    snprintf(path, sizeof path, "%s/prometheus.yml", s->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return false;
    fprintf(f,
            "global:\n"
            "  scrape_interval: 200ms\n"
            "  scrape_timeout: 150ms\n"
            "  evaluation_interval: 200ms\n"
            "scrape_configs:\n"
            "  - job_name: resil\n"
            "    static_configs:\n"
            "      - targets: [\"%s\"]\n",
            target);
    return fclose(f) == 0;
}

static pid_t spawn(const prom_server *s)
{
    char config[512], storage[512], listen[64];
    snprintf(config, sizeof config, "--config.file=%s/prometheus.yml", s->dir);
    snprintf(storage, sizeof storage, "--storage.tsdb.path=%s/data", s->dir);
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", s->port);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* The child: only async-signal-safe calls until exec. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int null = open("/dev/null", O_RDONLY);
    int log = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (null >= 0)
        dup2(null, 0);
    if (log >= 0) {
        dup2(log, 1);
        dup2(log, 2);
    }
    execlp("prometheus", "prometheus", config, storage, listen, "--log.level=warn",
           "--storage.tsdb.retention.time=1h", (char *)NULL);
    _exit(127);
}

static void reap(prom_server *s, int sig)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, sig);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
}

static bool wait_ready(prom_server *s)
{
    char answer[1024];
    for (int waited = 0; waited < READY_WAIT_MS; waited += 20) {
        if (http_get(s->port, "/-/ready", answer, sizeof answer) == 200)
            return true;
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return false;
        }
        sleep_ms(20);
    }
    reap(s, SIGKILL);
    return false;
}

static void print_log(const prom_server *s)
{
    FILE *f = fopen(s->log, "r");
    char line[512];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        fprintf(stderr, "prometheus: %s", line);
    if (f != NULL)
        fclose(f);
}

prom_server *prom_server_start(const char *target)
{
    prom_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->dir = test_tmpdir();
    snprintf(s->log, sizeof s->log, "%s/prometheus.log", s->dir);
    if (!write_config(s, target)) {
        fprintf(stderr, "prom_server: cannot write the configuration in %s\n", s->dir);
        prom_server_stop(s);
        return NULL;
    }
    for (int i = 0; i < START_TRIES; i++) {
        s->port = test_free_port();
        s->pid = s->port > 0 ? spawn(s) : -1;
        if (s->pid > 0 && wait_ready(s))
            return s;
    }
    fprintf(stderr, "prom_server: prometheus did not start (is it installed? "
                    "scripts/deps.sh installs it)\n");
    print_log(s);
    prom_server_stop(s);
    return NULL;
}

void prom_server_stop(prom_server *s)
{
    if (s == NULL)
        return;
    reap(s, SIGTERM);
    if (s->dir != NULL)
        test_rmtree(s->dir);
    free(s->dir);
    free(s);
}

static void url_encode(const char *in, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *in && n + 4 < cap; in++) {
        unsigned char c = (unsigned char)*in;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '.' || c == '-') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
}

bool prom_query(prom_server *s, const char *promql, double *value)
{
    char encoded[2048], target[2200];
    url_encode(promql, encoded, sizeof encoded);
    snprintf(target, sizeof target, "/api/v1/query?query=%s", encoded);
    char *answer = malloc(ANSWER_MAX);
    if (answer == NULL)
        return false;
    bool ok = false;
    if (http_get(s->port, target, answer, ANSWER_MAX) == 200 &&
        strstr(answer, "\"status\":\"success\"") != NULL) {
        /* "value":[<time>,"<number>"] */
        const char *v = strstr(answer, "\"value\":[");
        const char *q = v != NULL ? strchr(v, ',') : NULL;
        ok = q != NULL && sscanf(q, ",\"%lf\"", value) == 1;
    }
    free(answer);
    return ok;
}

bool prom_wait_for(prom_server *s, const char *promql, double want, int seconds)
{
    double got = -1;
    for (int waited = 0; waited < seconds * 1000; waited += 50) {
        if (prom_query(s, promql, &got) && got == want)
            return true;
        sleep_ms(50);
    }
    fprintf(stderr, "prom_wait_for: %s is %g, wanted %g\n", promql, got, want);
    return false;
}
