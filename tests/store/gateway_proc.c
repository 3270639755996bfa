/*
 * gateway_proc.c — run `resil gateway` as the real process a user runs (see
 * gateway_proc.h). The gateway is started on port 0 and tells its port in
 * its first log line, so parallel tests never race for a port; readiness
 * is that line, never a fixed sleep.
 */
#include "gateway_proc.h"

#include <curl/curl.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static pid_t spawn(const char *binary, const char *const args[], const char *prefix[],
                   const char *log_path)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = binary;
    for (size_t i = 0; prefix && prefix[i]; i++)
        argv[n++] = prefix[i];
    for (size_t i = 0; args && args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(log, 2);
    execv(binary, (char *const *)argv);
    _exit(127);
}

static bool read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return true;
}

int gateway_start(gateway_proc *g, const char *binary, const char *log_path,
                  const char *const args[])
{
    return gateway_start_on(g, binary, log_path, "127.0.0.1", args);
}

int gateway_start_on(gateway_proc *g, const char *binary, const char *log_path,
                     const char *host, const char *const args[])
{
    memset(g, 0, sizeof *g);
    snprintf(g->log, sizeof g->log, "%s", log_path);
    char listen[80], said[96];
    snprintf(listen, sizeof listen, "%s:0", host);
    snprintf(said, sizeof said, "listening on http://%s:", host);
    const char *prefix[] = {"gateway", "--listen", listen, NULL};
    g->pid = spawn(binary, args, prefix, log_path);
    if (g->pid < 0)
        return -1;
    static char text[1 << 16];
    for (int i = 0; i < 3000; i++) {
        const char *at;
        if (read_file(log_path, text, sizeof text) && (at = strstr(text, said)) != NULL) {
            g->port = atoi(at + strlen(said));
            snprintf(g->url, sizeof g->url, "http://%s:%d", host, g->port);
            return 0;
        }
        if (waitpid(g->pid, NULL, WNOHANG) == g->pid) {
            fprintf(stderr, "gateway exited before listening:\n%s\n", text);
            g->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "gateway did not start:\n%s\n", text);
    gateway_stop(g);
    return -1;
}

int gateway_stop(gateway_proc *g)
{
    if (g->pid <= 0)
        return -1;
    kill(g->pid, SIGTERM);
    int status;
    while (waitpid(g->pid, &status, 0) < 0 && errno == EINTR)
        ;
    g->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool gateway_log_contains(const gateway_proc *g, const char *text)
{
    static char buf[1 << 20];
    return read_file(g->log, buf, sizeof buf) && strstr(buf, text) != NULL;
}

int run_capture(const char *binary, const char *const args[], char *err, size_t cap)
{
    char path[] = "/tmp/resil-gw-capture-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    pid_t pid = spawn(binary, args, NULL, path);
    int status = -1;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!read_file(path, err, cap))
        err[0] = '\0';
    unlink(path);
    return pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- HTTP ------------------------------------------------------------------ */

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    http_reply *r = ud;
    char *p = realloc(r->body, r->body_len + size * n + 1);
    if (p == NULL)
        return 0;
    memcpy(p + r->body_len, data, size * n);
    r->body = p;
    r->body_len += size * n;
    r->body[r->body_len] = '\0';
    return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    http_reply *r = ud;
    size_t used = strlen(r->headers);
    snprintf(r->headers + used, sizeof r->headers - used, "%.*s", (int)(size * n), data);
    return size * n;
}

int http_request(const char *method, const char *url, const char *const headers[],
                 const char *body, http_reply *out)
{
    memset(out, 0, sizeof *out);
    CURL *h = curl_easy_init();
    if (h == NULL)
        return -1;
    struct curl_slist *list = curl_slist_append(NULL, "Expect:");
    for (size_t i = 0; headers && headers[i]; i++)
        list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    out->curl_code = (int)curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    if (out->body == NULL)
        out->body = calloc(1, 1);
    return out->curl_code == 0 ? 0 : -1;
}

void http_reply_free(http_reply *r)
{
    free(r->body);
    r->body = NULL;
}

bool http_reply_header(const http_reply *r, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    buf[0] = '\0';
    for (const char *line = r->headers; *line != '\0';) {
        const char *end = strstr(line, "\r\n");
        if (end == NULL)
            break;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, cap, "%.*s", (int)(end - v), v);
            return true;
        }
        line = end + 2;
    }
    return false;
}

/* ---- raw HTTP ---------------------------------------------------------------- */

int raw_connect(int port, const char *from)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in src = {.sin_family = AF_INET};
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if ((from != NULL && (inet_pton(AF_INET, from, &src.sin_addr) != 1 ||
                          bind(fd, (struct sockaddr *)&src, sizeof src) != 0)) ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool raw_read_until_closed(int fd, char *reply, size_t cap, int wait_ms)
{
    size_t used = 0;
    long long until = now_ms() + wait_ms;
    reply[0] = '\0';
    for (;;) {
        long long left = until - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return false;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return n == 0 || errno == ECONNRESET;
        size_t keep = (size_t)n < cap - 1 - used ? (size_t)n : cap - 1 - used;
        memcpy(reply + used, buf, keep);
        used += keep;
        reply[used] = '\0';
    }
}

int raw_exchange(int port, const void *request, size_t len, char *reply, size_t cap,
                 int wait_ms, bool *closed)
{
    int fd = raw_connect(port, NULL);
    if (fd < 0)
        return -1;
    bool sent = send(fd, request, len, MSG_NOSIGNAL) == (ssize_t)len;
    bool was_closed = raw_read_until_closed(fd, reply, cap, wait_ms);
    close(fd);
    if (closed != NULL)
        *closed = was_closed;
    return sent || reply[0] ? raw_status(reply) : -1;
}

int raw_status(const char *reply)
{
    int status = 0;
    if (strncmp(reply, "HTTP/1.", 7) != 0 || sscanf(reply + 8, " %3d", &status) != 1)
        return 0;
    return status;
}
