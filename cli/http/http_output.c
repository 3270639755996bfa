/*
 * http_output.c — writing one URL's answer where curl would: the body to
 * its output unless it is an error body (--fail-with-body keeps it), the
 * headers to -D's file and, with -i or -I, before the body.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http_output.h"

/* The file name -O takes from the URL: its path's last segment. */
static int remote_name(const char *url, char *buf, size_t cap)
{
    const char *start = strstr(url, "://");
    start = start != NULL ? start + 3 : url;
    size_t path_end = strcspn(start, "?#");
    const char *slash = NULL;
    for (const char *p = start; p < start + path_end; p++) {
        if (*p == '/')
            slash = p;
    }
    size_t n = slash != NULL ? (size_t)(start + path_end - slash - 1) : 0;
    if (n == 0) {
        fprintf(stderr, "resil http: %s: -O: the URL has no file name to take\n", url);
        return RESIL_EINVAL;
    }
    if (n >= cap) {
        fprintf(stderr, "resil http: %s: -O: the URL's file name is longer than %zu bytes\n",
                url, cap - 1);
        return RESIL_EINVAL;
    }
    memcpy(buf, slash + 1, n);
    buf[n] = '\0';
    return 0;
}

int http_output_path(const http_opts *o, int i, const char *url, char *buf, size_t cap,
                     const char **out)
{
    const char *slot = i < o->noutputs ? o->outputs[i] : NULL;
    const char *option = slot == HTTP_REMOTE_NAME ? "-O" : "--output";
    char remote[1024];
    *out = NULL;
    if (slot == NULL)
        return 0; /* standard output: --output-dir does not apply (curl) */
    if (slot == HTTP_REMOTE_NAME) {
        if (remote_name(url, remote, sizeof remote) != 0)
            return RESIL_EINVAL;
        slot = remote;
    }
    /* --output-dir goes before every name, as curl puts it ("DIR/NAME") */
    const char *dir = o->output_dir != NULL ? o->output_dir : "";
    int n = snprintf(buf, cap, "%s%s%s", dir, dir[0] != '\0' ? "/" : "", slot);
    if (n < 0 || (size_t)n >= cap) {
        if (dir[0] != '\0')
            fprintf(stderr, "resil http: %s: --output-dir and %s: the file name is longer than "
                            "%zu bytes\n", url, option, cap - 1);
        else
            fprintf(stderr, "resil http: %s: %s '%.32s...': the file name is longer than %zu "
                            "bytes\n", url, option, slot, cap - 1);
        return RESIL_EINVAL;
    }
    *out = buf;
    return 0;
}

void http_sink_init(http_sink *s, const http_opts *o, const char *path, FILE *dump)
{
    memset(s, 0, sizeof *s);
    s->o = o;
    s->path = path;
    s->dump = dump;
}

/* The first failure is the one reported, with its own errno. */
static void failed(http_sink *s, int err)
{
    if (!s->write_failed)
        s->failed_errno = err;
    s->write_failed = true;
}

static bool opened(http_sink *s)
{
    if (s->file != NULL)
        return true;
    if (s->write_failed)
        return false;
    s->file = s->path == NULL ? stdout : fopen(s->path, "wb");
    if (s->file == NULL) {
        failed(s, errno);
        return false;
    }
    return true;
}

static size_t put(http_sink *s, const char *p, size_t n)
{
    if (!opened(s))
        return 0;
    if (fwrite(p, 1, n, s->file) != n) {
        failed(s, errno);
        return 0;
    }
    return n;
}

/* An error body goes nowhere (as curl --fail), unless --fail-with-body. */
size_t http_sink_body(char *p, size_t size, size_t n, void *data)
{
    http_sink *s = data;
    size_t len = size * n;
    if (s->status >= 400 && !s->o->fail_with_body)
        return len;
    if (put(s, p, len) != len)
        return 0;
    s->body_bytes += (curl_off_t)len;
    return len;
}

static long status_line(const char *p, size_t n)
{
    if (n < 12 || strncmp(p, "HTTP/", 5) != 0)
        return -1;
    const char *sp = memchr(p, ' ', n);
    if (sp == NULL || (size_t)(sp - p) + 4 > n)
        return -1;
    long code = 0;
    for (int i = 1; i <= 3; i++) {
        if (sp[i] < '0' || sp[i] > '9')
            return -1;
        code = code * 10 + (sp[i] - '0');
    }
    return code;
}

size_t http_sink_header(char *p, size_t size, size_t n, void *data)
{
    http_sink *s = data;
    size_t len = size * n;
    long code = status_line(p, len);
    if (code >= 0) {
        s->status = code;
        s->header_bytes = 0;
    }
    s->header_bytes += (curl_off_t)len;
    if (s->dump != NULL && fwrite(p, 1, len, s->dump) != len)
        failed(s, errno);
    if ((s->o->include_headers || s->o->head) && put(s, p, len) != len)
        return 0;
    return len;
}

int http_sink_finish(http_sink *s, bool ok)
{
    if (ok && s->path != NULL)
        (void)opened(s); /* an empty body still makes its file */
    if (s->dump != NULL)
        fflush(s->dump);
    /* What stdio still holds is written here: a body smaller than its
     * buffer meets a full disk or a closed pipe only now. */
    if (s->file != NULL && s->file != stdout && fclose(s->file) != 0)
        failed(s, errno);
    if (s->file == stdout && fflush(stdout) != 0)
        failed(s, errno);
    s->file = NULL;
    if (s->write_failed) {
        fprintf(stderr, "resil http: cannot write '%s': %s\n",
                s->path != NULL ? s->path : "standard output",
                strerror(s->failed_errno != 0 ? s->failed_errno : EIO));
        return 23;
    }
    return 0;
}
