/*
 * write_out.c — curl's --write-out format, compiled into segments.
 *
 * One allocation holds the segments and the text they point into: literal
 * runs (escapes already resolved) and header names, copied from the format.
 * A format can yield no more segments than it has bytes, nor more text, so
 * both are sized from its length up front and the parser never grows a
 * buffer. Rendering walks the segments; nothing is parsed twice.
 */
#include <stdlib.h>
#include <string.h>

#include "write_out.h"

typedef enum seg_kind { SEG_TEXT, SEG_VAR, SEG_TO_STDOUT, SEG_TO_STDERR } seg_kind;

typedef struct segment {
    seg_kind kind;
    wo_var var;
    size_t off, len; /* into text: the literal, or WO_HEADER's name */
} segment;

struct write_out {
    segment *segs;
    size_t nsegs;
    char *text;
};

static const char *const names[WO_VAR_COUNT] = {
    [WO_CONTENT_TYPE] = "content_type",
    [WO_ERRORMSG] = "errormsg",
    [WO_EXITCODE] = "exitcode",
    [WO_FILENAME_EFFECTIVE] = "filename_effective",
    [WO_HTTP_CODE] = "http_code",
    [WO_HTTP_VERSION] = "http_version",
    [WO_LOCAL_IP] = "local_ip",
    [WO_LOCAL_PORT] = "local_port",
    [WO_METHOD] = "method",
    [WO_NUM_CONNECTS] = "num_connects",
    [WO_NUM_REDIRECTS] = "num_redirects",
    [WO_NUM_RETRIES] = "num_retries",
    [WO_REDIRECT_URL] = "redirect_url",
    [WO_REMOTE_IP] = "remote_ip",
    [WO_REMOTE_PORT] = "remote_port",
    [WO_RESPONSE_CODE] = "response_code",
    [WO_SCHEME] = "scheme",
    [WO_SIZE_DOWNLOAD] = "size_download",
    [WO_SIZE_HEADER] = "size_header",
    [WO_SIZE_REQUEST] = "size_request",
    [WO_SIZE_UPLOAD] = "size_upload",
    [WO_SPEED_DOWNLOAD] = "speed_download",
    [WO_SPEED_UPLOAD] = "speed_upload",
    [WO_SSL_VERIFY_RESULT] = "ssl_verify_result",
    [WO_TIME_APPCONNECT] = "time_appconnect",
    [WO_TIME_CONNECT] = "time_connect",
    [WO_TIME_NAMELOOKUP] = "time_namelookup",
    [WO_TIME_PRETRANSFER] = "time_pretransfer",
    [WO_TIME_REDIRECT] = "time_redirect",
    [WO_TIME_STARTTRANSFER] = "time_starttransfer",
    [WO_TIME_TOTAL] = "time_total",
    [WO_URL] = "url",
    [WO_URL_EFFECTIVE] = "url_effective",
    [WO_ATTEMPTS] = "attempts",
    [WO_STOP_REASON] = "stop_reason",
    [WO_TIME_ELAPSED] = "time_elapsed",
    [WO_IDEMPOTENCY_KEY] = "idempotency_key",
};

const char *write_out_name(wo_var var)
{
    return var >= 0 && var < WO_VAR_COUNT ? names[var] : NULL;
}

/* The variable named by the n bytes at p, or WO_VAR_COUNT. */
static wo_var lookup(const char *p, size_t n)
{
    for (int v = 0; v < WO_VAR_COUNT; v++) {
        if (names[v] != NULL && strlen(names[v]) == n && memcmp(names[v], p, n) == 0)
            return (wo_var)v;
    }
    return WO_VAR_COUNT;
}

typedef struct compiler {
    write_out *w;
    size_t text_len;
    bool in_text; /* the last segment is a literal still growing */
} compiler;

static void add_char(compiler *c, char ch)
{
    write_out *w = c->w;
    if (!c->in_text) {
        w->segs[w->nsegs++] = (segment){.kind = SEG_TEXT, .off = c->text_len};
        c->in_text = true;
    }
    w->text[c->text_len++] = ch;
    w->segs[w->nsegs - 1].len++;
}

static void add_segment(compiler *c, seg_kind kind, wo_var var, const char *name, size_t n)
{
    write_out *w = c->w;
    w->segs[w->nsegs++] = (segment){.kind = kind, .var = var, .off = c->text_len, .len = n};
    memcpy(w->text + c->text_len, name, n);
    c->text_len += n;
    c->in_text = false;
}

/* "%{name}" or "%header{name}" at p (p[0] == '%'): the bytes consumed, 0
 * when it is no variable reference (written as it stands), or -1 for an
 * unknown name (reported). */
static long variable(compiler *c, const char *p, resil_err *err)
{
    bool header = strncmp(p, "%header{", 8) == 0;
    size_t open = header ? 8 : 2;
    if (!header && p[1] != '{')
        return 0;
    const char *close = strchr(p + open, '}');
    if (close == NULL)
        return 0;
    size_t n = (size_t)(close - (p + open));
    const char *name = p + open;
    if (header) {
        add_segment(c, SEG_VAR, WO_HEADER, name, n);
        return (long)(open + n + 1);
    }
    if (n == 6 && memcmp(name, "stdout", 6) == 0)
        add_segment(c, SEG_TO_STDOUT, WO_VAR_COUNT, "", 0);
    else if (n == 6 && memcmp(name, "stderr", 6) == 0)
        add_segment(c, SEG_TO_STDERR, WO_VAR_COUNT, "", 0);
    else if (lookup(name, n) != WO_VAR_COUNT)
        add_segment(c, SEG_VAR, lookup(name, n), "", 0);
    else {
        resil_err_set(err, RESIL_EINVAL, "unknown variable '%%{%.*s}'", (int)(n > 64 ? 64 : n),
                      name);
        return -1;
    }
    return (long)(open + n + 1);
}

static char escape(char ch)
{
    return ch == 'n' ? '\n' : ch == 'r' ? '\r' : ch == 't' ? '\t' : '\0';
}

static int compile(compiler *c, const char *f, resil_err *err)
{
    while (*f != '\0') {
        if (f[0] == '%' && f[1] == '%') {
            add_char(c, '%');
            f += 2;
        } else if (f[0] == '%') {
            long k = variable(c, f, err);
            if (k < 0)
                return RESIL_EINVAL;
            if (k == 0)
                add_char(c, *f++);
            f += k;
        } else if (f[0] == '\\' && escape(f[1]) != '\0') {
            add_char(c, escape(f[1]));
            f += 2;
        } else {
            add_char(c, *f++);
        }
    }
    return 0;
}

int write_out_parse(const char *format, write_out **out, resil_err *err)
{
    size_t n = strlen(format);
    write_out *w = calloc(1, sizeof *w);
    if (w != NULL) {
        w->segs = calloc(n + 1, sizeof *w->segs);
        w->text = malloc(n + 1);
    }
    if (w == NULL || w->segs == NULL || w->text == NULL) {
        write_out_free(w);
        return resil_err_set(err, RESIL_ENOMEM, "out of memory");
    }
    compiler c = {.w = w};
    if (compile(&c, format, err) != 0) {
        write_out_free(w);
        return RESIL_EINVAL;
    }
    *out = w;
    return 0;
}

void write_out_free(write_out *w)
{
    if (w == NULL)
        return;
    free(w->segs);
    free(w->text);
    free(w);
}

void write_out_render(const write_out *w, FILE *out, FILE *err_stream, wo_value_fn value,
                      void *ud)
{
    FILE *to = out;
    for (size_t i = 0; i < w->nsegs; i++) {
        const segment *s = &w->segs[i];
        if (s->kind == SEG_TO_STDOUT) {
            to = out;
        } else if (s->kind == SEG_TO_STDERR) {
            to = err_stream;
        } else if (s->kind == SEG_TEXT) {
            fwrite(w->text + s->off, 1, s->len, to);
        } else {
            char name[256], buf[4096];
            size_t n = s->len < sizeof name - 1 ? s->len : sizeof name - 1;
            memcpy(name, w->text + s->off, n);
            name[n] = '\0';
            buf[0] = '\0';
            value(s->var, name, buf, sizeof buf, ud);
            fputs(buf, to);
        }
    }
    fflush(out);
    fflush(err_stream);
}
