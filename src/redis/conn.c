/*
 * conn.c — the URL, the bounded connection, one script call and the
 * decoding of what Redis sends back (see conn.h).
 *
 * A breaker that is meant to be shared must never quietly run alone, so
 * connecting distinguishes three failures by what came back: nothing at all
 * (refused or silent: Redis may be down, which the caller may tolerate),
 * bytes that are not RESP or an answer to PING other than PONG (something
 * else listens there: always refused), and a Redis error (wrong password,
 * bad database: refused with Redis's own words).
 *
 * Every reader is bounded and every wait is by the call's deadline (see
 * conn.h for why and for the limits).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "conn.h"

/* ---- the URL ------------------------------------------------------------- */

static int url_fail(resil_err *err, const char *url, const char *what)
{
    return resil_err_set(err, RESIL_EINVAL, "redis.url %s, got '%s'", what, url);
}

static bool copy_part(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        return false;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return true;
}

static bool parse_uint(const char *s, size_t len, long max, long *out)
{
    if (len == 0 || len > 9)
        return false;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

static int parse_userinfo(const char *url, const char *s, size_t len, fleet_url *u,
                          resil_err *err)
{
    const char *colon = memchr(s, ':', len);
    if (colon == NULL)
        return url_fail(err, url, "must give the password after ':' in user:password@");
    if (!copy_part(u->user, sizeof u->user, s, (size_t)(colon - s)) ||
        !copy_part(u->password, sizeof u->password, colon + 1, len - (size_t)(colon - s) - 1))
        return url_fail(err, url, "has a user or password that is too long");
    return 0;
}

/* A host is a name or an IPv4 address (letters, digits, '-', '.', '_',
 * '~': RFC 3986's unreserved characters) or, in brackets, an IPv6 address
 * with its zone ("fe80::1%eth0"). Anything else (a space, a control
 * character, a '%' outside brackets) names no host: refused here rather
 * than found unreachable at every connect. */
static bool host_char(unsigned char c, bool bracketed)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    if (c == '-' || c == '.' || c == '_' || c == '~')
        return true;
    return bracketed && (c == ':' || c == '%');
}

static bool host_ok(const char *host, size_t len, bool bracketed)
{
    for (size_t i = 0; i < len; i++)
        if (!host_char((unsigned char)host[i], bracketed))
            return false;
    return true;
}

static int parse_hostport(const char *url, const char *s, size_t len, fleet_url *u,
                          resil_err *err)
{
    const char *host = s, *port = NULL;
    size_t host_len = len;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return url_fail(err, url, "has an unclosed '[' in its host");
        host = s + 1;
        host_len = (size_t)(close - host);
        if (close + 1 < s + len) {
            if (close[1] != ':')
                return url_fail(err, url, "must have ':PORT' after ']'");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        if (colon != NULL) {
            host_len = (size_t)(colon - s);
            port = colon + 1;
        }
    }
    if (host_len == 0)
        return url_fail(err, url, "must name a host");
    if (!host_ok(host, host_len, host != s))
        return url_fail(err, url, "has a character no host name holds in its host");
    if (!copy_part(u->host, sizeof u->host, host, host_len))
        return url_fail(err, url, "has a host name that is too long");
    if (port != NULL) {
        long p;
        if (!parse_uint(port, (size_t)(s + len - port), 65535, &p) || p == 0)
            return url_fail(err, url, "must have a port in [1, 65535]");
        u->port = (int)p;
    }
    return 0;
}

int resil__fleet_url_parse(const char *url, fleet_url *u, resil_err *err)
{
    static const char scheme[] = "redis://";
    memset(u, 0, sizeof *u);
    u->port = 6379;
    if (url == NULL || url[0] == '\0')
        return resil_err_set(err, RESIL_EINVAL,
                             "redis.url must be set: a shared breaker needs a Redis "
                             "server (for one process alone, use resil_breaker_new)");
    if (strncmp(url, "rediss://", 9) == 0)
        return url_fail(err, url, "uses TLS (rediss://), which this build does not support");
    if (strncmp(url, scheme, sizeof scheme - 1) != 0)
        return url_fail(err, url,
                        "must be redis://[[user]:password@]host[:port][/db]: an "
                        "in-process or other store cannot share state between instances");
    const char *s = url + sizeof scheme - 1;
    const char *end = s + strlen(s);
    const char *slash = memchr(s, '/', (size_t)(end - s));
    const char *auth_end = s;
    const char *at = memrchr(s, '@', (size_t)((slash != NULL ? slash : end) - s));
    if (at != NULL) {
        int rc = parse_userinfo(url, s, (size_t)(at - s), u, err);
        if (rc != 0)
            return rc;
        auth_end = at + 1;
    }
    const char *host_end = slash != NULL ? slash : end;
    int rc = parse_hostport(url, auth_end, (size_t)(host_end - auth_end), u, err);
    if (rc != 0)
        return rc;
    if (slash != NULL && slash + 1 < end) {
        long db;
        if (!parse_uint(slash + 1, (size_t)(end - slash - 1), 100000, &db))
            return url_fail(err, url, "must end with a database number after '/'");
        u->db = (int)db;
    }
    return 0;
}

/* ---- bounded readers ------------------------------------------------------
 *
 * hiredis calls the reader's object functions as it parses, an array's
 * before its elements are read: ours check the announced size against the
 * bounds and the reply's running memory, then let hiredis' own functions
 * build the object. A refusal returns NULL, which hiredis reports as out
 * of memory; the reason kept here tells the two apart. */

typedef struct fleet_bounds {
    redisReplyObjectFunctions fns;    /* ours, installed on the reader */
    redisReplyObjectFunctions *inner; /* hiredis' own, which build the objects */
    size_t charged;                   /* memory of the reply being read */
    char refused[112];                /* why the reply was refused; "" if not */
} fleet_bounds;

static bool charge(fleet_bounds *b, size_t n)
{
    if (n > FLEET_REPLY_MEMORY_MAX - b->charged) {
        snprintf(b->refused, sizeof b->refused,
                 "a reply taking more than %d bytes in memory", FLEET_REPLY_MEMORY_MAX);
        return false;
    }
    b->charged += n;
    return true;
}

static int depth(const redisReadTask *t)
{
    int d = 1;
    for (const redisReadTask *p = t->parent; p != NULL; p = p->parent)
        d++;
    return d;
}

/* hiredis 1.x counts elements in a size_t, 0.14 in an int. */
#if HIREDIS_MAJOR >= 1
typedef size_t element_count;
#else
typedef int element_count;
#endif

static void *bounded_array(const redisReadTask *t, element_count elements)
{
    fleet_bounds *b = t->privdata;
    long long n = (long long)elements;
    if (n < 0 || n > FLEET_REPLY_ELEMENTS_MAX) {
        snprintf(b->refused, sizeof b->refused, "an array of %lld elements (at most %d)", n,
                 FLEET_REPLY_ELEMENTS_MAX);
        return NULL;
    }
    if (depth(t) > FLEET_REPLY_DEPTH_MAX) {
        snprintf(b->refused, sizeof b->refused, "arrays nested %d deep (at most %d)",
                 depth(t), FLEET_REPLY_DEPTH_MAX);
        return NULL;
    }
    if (!charge(b, sizeof(redisReply) + (size_t)elements * sizeof(redisReply *)))
        return NULL;
    return b->inner->createArray(t, elements);
}

/* hiredis skips the two bytes after a bulk string's announced length as
 * its CRLF without looking at them: a string longer than announced would
 * be cut short and its tail read as the next reply, a shorter one would
 * swallow the next reply's first bytes. Both bytes are in the reader's
 * buffer (hiredis counts them before it builds the string), as is a
 * line's CRLF. */
static bool ends_where_announced(const char *str, size_t len)
{
    return str[len] == '\r' && str[len + 1] == '\n';
}

static void *bounded_string(const redisReadTask *t, char *str, size_t len)
{
    fleet_bounds *b = t->privdata;
    if (len > FLEET_REPLY_STRING_MAX) {
        snprintf(b->refused, sizeof b->refused, "a string of %zu bytes (at most %d)", len,
                 FLEET_REPLY_STRING_MAX);
        return NULL;
    }
    if (!ends_where_announced(str, len)) {
        snprintf(b->refused, sizeof b->refused,
                 "a string not ending where its header says (%zu bytes)", len);
        return NULL;
    }
    if (!charge(b, sizeof(redisReply) + len + 1))
        return NULL;
    return b->inner->createString(t, str, len);
}

static void *bounded_integer(const redisReadTask *t, long long v)
{
    fleet_bounds *b = t->privdata;
    return charge(b, sizeof(redisReply)) ? b->inner->createInteger(t, v) : NULL;
}

static void *bounded_nil(const redisReadTask *t)
{
    fleet_bounds *b = t->privdata;
    return charge(b, sizeof(redisReply)) ? b->inner->createNil(t) : NULL;
}

#if HIREDIS_MAJOR >= 1
/* RESP3 types: never asked for (no HELLO 3), so never legitimate. */
static void *refuse_resp3(const redisReadTask *t)
{
    fleet_bounds *b = t->privdata;
    snprintf(b->refused, sizeof b->refused, "a RESP3 reply, never asked for");
    return NULL;
}

static void *bounded_double(const redisReadTask *t, double d, char *s, size_t len)
{
    (void)d, (void)s, (void)len;
    return refuse_resp3(t);
}

static void *bounded_bool(const redisReadTask *t, int v)
{
    (void)v;
    return refuse_resp3(t);
}
#endif

int resil__fleet_reader_bound(redisReader *rd)
{
    if (rd->fn == NULL)
        return RESIL_EINVAL; /* a reader that builds no objects */
    fleet_bounds *b = calloc(1, sizeof *b);
    if (b == NULL)
        return RESIL_ENOMEM;
    b->inner = rd->fn;
    b->fns.createString = bounded_string;
    b->fns.createArray = bounded_array;
    b->fns.createInteger = bounded_integer;
    b->fns.createNil = bounded_nil;
    b->fns.freeObject = b->inner->freeObject;
#if HIREDIS_MAJOR >= 1
    b->fns.createDouble = bounded_double;
    b->fns.createBool = bounded_bool;
#endif
    rd->fn = &b->fns;
    rd->privdata = b;
    return 0;
}

void resil__fleet_reader_free(redisReader *rd)
{
    if (rd == NULL)
        return;
    fleet_bounds *b = rd->privdata;
    redisReaderFree(rd); /* frees a partial reply with b's functions */
    free(b);
}

/* The task the reader is in the middle of, if any. */
static const redisReadTask *current_task(const redisReader *rd)
{
    if (rd->ridx < 0)
        return NULL;
#if HIREDIS_MAJOR >= 1
    return rd->task[rd->ridx];
#else
    return &rd->rstack[rd->ridx];
#endif
}

/* A string whose header announces more than the limit: refused before its
 * bytes are waited for. The reader stops at a string's length digits until
 * all of it has arrived. */
static bool announces_too_long(const redisReader *rd, fleet_bounds *b)
{
    const redisReadTask *t = current_task(rd);
    if (t == NULL || t->type != REDIS_REPLY_STRING)
        return false;
    unsigned long long n = 0;
    for (size_t i = rd->pos; i < rd->len && rd->buf[i] >= '0' && rd->buf[i] <= '9'; i++) {
        n = n * 10 + (unsigned long long)(rd->buf[i] - '0');
        if (n > FLEET_REPLY_STRING_MAX) {
            snprintf(b->refused, sizeof b->refused,
                     "a string announced longer than %d bytes", FLEET_REPLY_STRING_MAX);
            return true;
        }
    }
    return false;
}

static bool buffered_too_much(const redisReader *rd, fleet_bounds *b)
{
    if (rd->len - rd->pos <= FLEET_READ_BUFFER_MAX)
        return false;
    snprintf(b->refused, sizeof b->refused, "more than %d bytes without a complete item",
             FLEET_READ_BUFFER_MAX);
    return true;
}

static int refused(const redisReader *rd, const fleet_bounds *b, char *why, size_t cap)
{
    snprintf(why, cap, "%s", b->refused[0] != '\0' ? b->refused : rd->errstr);
    return -1;
}

int resil__fleet_reader_next(redisReader *rd, void **reply, char *why, size_t cap)
{
    fleet_bounds *b = rd->privdata;
    *reply = NULL;
    if (b->refused[0] != '\0' || redisReaderGetReply(rd, reply) != REDIS_OK)
        return refused(rd, b, why, cap);
    if (*reply != NULL) {
        b->charged = 0;
        return 1;
    }
    if (announces_too_long(rd, b) || buffered_too_much(rd, b))
        return refused(rd, b, why, cap);
    return 0;
}

/* ---- exchanges with a deadline --------------------------------------------- */

static int64_t mono_ns(void) { return resil_clock_now(resil_clock_system()); }

int64_t resil__fleet_deadline(resil_duration timeout) { return mono_ns() + timeout; }

static void set_error(redisContext *c, int err, const char *text)
{
    c->err = err;
    snprintf(c->errstr, sizeof c->errstr, "%s", text);
}

static void set_timed_out(redisContext *c)
{
#ifdef REDIS_ERR_TIMEOUT
    set_error(c, REDIS_ERR_TIMEOUT, "timed out");
#else
    set_error(c, REDIS_ERR_IO, "timed out");
#endif
}

/* Wait until the socket is ready for `events`: false when the deadline
 * passed first. ppoll takes the time left to the nanosecond, so the wait
 * ends at the deadline, not at the next millisecond or tick after it. */
static bool wait_socket(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - mono_ns();
        if (left <= 0)
            return false;
        struct timespec ts = {(time_t)(left / RESIL_S(1)), (long)(left % RESIL_S(1))};
        struct pollfd p = {.fd = fd, .events = events};
        int n = ppoll(&p, 1, &ts, NULL);
        if (n > 0 || (n < 0 && errno != EINTR))
            return true; /* ready, or an error the next read or write reports */
    }
}

/* A write to a connection the server has reset raises SIGPIPE, which ends
 * a process that has not chosen to ignore it; hiredis writes without
 * MSG_NOSIGNAL. So each write runs with SIGPIPE blocked in the calling
 * thread, and a SIGPIPE it raised is taken back before the mask is
 * restored; one that was already pending is left for its owner. */
static int write_without_sigpipe(redisContext *c, int *done)
{
    sigset_t pipe, old, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    int rc = redisBufferWrite(c, done);
    if (rc != REDIS_OK && !was_pending) {
        struct timespec now = {0, 0};
        while (sigtimedwait(&pipe, NULL, &now) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static int flush(redisContext *c, int64_t deadline)
{
    for (;;) {
        int done = 0;
        if (write_without_sigpipe(c, &done) != REDIS_OK)
            return -1;
        if (done)
            return 0;
        if (!wait_socket(c->fd, POLLOUT, deadline)) {
            set_timed_out(c);
            return -1;
        }
    }
}

redisReply *resil__fleet_read(redisContext *c, int64_t deadline)
{
    if (c->err || flush(c, deadline) != 0)
        return NULL;
    for (;;) {
        void *reply;
        char why[128];
        int got = resil__fleet_reader_next(c->reader, &reply, why, sizeof why);
        if (got > 0)
            return reply;
        if (got < 0) {
            set_error(c, REDIS_ERR_PROTOCOL, why);
            return NULL;
        }
        if (!wait_socket(c->fd, POLLIN, deadline)) {
            set_timed_out(c);
            return NULL;
        }
        if (redisBufferRead(c) != REDIS_OK)
            return NULL;
    }
}

redisReply *resil__fleet_command(redisContext *c, int argc, const char **argv,
                                 const size_t *len, int64_t deadline)
{
    if (redisAppendCommandArgv(c, argc, argv, len) != REDIS_OK)
        return NULL;
    return resil__fleet_read(c, deadline);
}

bool resil__fleet_malformed(const redisContext *c) { return c->err == REDIS_ERR_PROTOCOL; }

void resil__fleet_close(redisContext *c)
{
    if (c == NULL)
        return;
    fleet_bounds *b = c->reader != NULL ? c->reader->privdata : NULL;
    redisFree(c); /* its reader frees a partial reply with b's functions */
    free(b);
}

/* ---- connecting ---------------------------------------------------------- */

/* What is left until the deadline, in whole milliseconds: hiredis rounds a
 * connect timeout up to the millisecond, so it is given one rounded down. */
static struct timeval left_timeval(int64_t deadline)
{
    int64_t left = deadline - mono_ns();
    int64_t ms = left > RESIL_MS(1) ? left / RESIL_MS(1) : 1;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
    return tv;
}

/* A read or write that hit the deadline: ours, or hiredis' own words for it. */
static bool timed_out(const redisContext *c)
{
#ifdef REDIS_ERR_TIMEOUT
    if (c->err == REDIS_ERR_TIMEOUT)
        return true;
#endif
    return c->err == REDIS_ERR_IO && (strstr(c->errstr, "temporarily unavailable") != NULL ||
                                      strstr(c->errstr, "timed out") != NULL ||
                                      strstr(c->errstr, "timeout") != NULL);
}

void resil__fleet_io_why(const redisContext *c, const char *command,
                         resil_duration timeout, char *why, size_t cap)
{
    char t[32];
    resil_duration_format(timeout, t, sizeof t);
    if (c == NULL) {
        snprintf(why, cap, "%s: out of memory", command);
        return;
    }
    if (timed_out(c))
        snprintf(why, cap, "%s: no answer within %s", command, t);
    else if (c->err == REDIS_ERR_EOF)
        snprintf(why, cap, "%s: the server closed the connection", command);
    else if (resil__fleet_malformed(c))
        snprintf(why, cap, "%s: malformed answer: %s", command, c->errstr);
    else
        snprintf(why, cap, "%s: %s", command, c->errstr);
}

static redisContext *fail_with(redisContext *c, fleet_conn_fail *fail, fleet_conn_fail kind)
{
    *fail = kind;
    resil__fleet_close(c);
    return NULL;
}

/* The I/O failure of a handshake command: silence is "unreachable", bytes
 * that do not parse or a closed connection mean something else listens. */
static redisContext *handshake_io(redisContext *c, const char *cmd, resil_duration timeout,
                                  fleet_conn_fail *fail, char *why, size_t cap)
{
    char io[200];
    resil__fleet_io_why(c, cmd, timeout, io, sizeof io);
    if (timed_out(c)) {
        snprintf(why, cap, "%s", io);
        return fail_with(c, fail, FLEET_UNREACHABLE);
    }
    snprintf(why, cap, "the server is not Redis (%s)", io);
    return fail_with(c, fail, FLEET_NOT_REDIS);
}

static redisContext *expect_ok(redisContext *c, int argc, const char **argv,
                               const char *expect, resil_duration timeout, int64_t deadline,
                               fleet_conn_fail *fail, char *why, size_t cap)
{
    redisReply *r = resil__fleet_command(c, argc, argv, NULL, deadline);
    if (r == NULL)
        return handshake_io(c, argv[0], timeout, fail, why, cap);
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, cap, "Redis refused %s: %s", argv[0], r->str);
        freeReplyObject(r);
        return fail_with(c, fail, FLEET_REFUSED);
    }
    bool ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, expect) == 0;
    if (!ok)
        snprintf(why, cap, "the server is not Redis (%s got %s%s%s)", argv[0],
                 r->type == REDIS_REPLY_STATUS ? "'" : "an unexpected reply",
                 r->type == REDIS_REPLY_STATUS ? r->str : "",
                 r->type == REDIS_REPLY_STATUS ? "'" : "");
    freeReplyObject(r);
    return ok ? c : fail_with(c, fail, FLEET_NOT_REDIS);
}

/* Our waits from here on: a non-blocking socket, and a bounded reader. */
static bool make_ours(redisContext *c)
{
    int flags = fcntl(c->fd, F_GETFL);
    if (flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return false;
    c->flags &= ~REDIS_BLOCK;
    return resil__fleet_reader_bound(c->reader) == 0;
}

redisContext *resil__fleet_connect(const fleet_url *u, resil_duration timeout,
                                   fleet_conn_fail *fail, char *why, size_t cap)
{
    int64_t deadline = resil__fleet_deadline(timeout);
    redisContext *c = redisConnectWithTimeout(u->host, u->port, left_timeval(deadline));
    if (c == NULL || c->err) {
        resil__fleet_io_why(c, "connect", timeout, why, cap);
        if (c != NULL)
            redisFree(c);
        *fail = FLEET_UNREACHABLE;
        return NULL;
    }
    if (!make_ours(c)) {
        snprintf(why, cap, "connect: cannot set up the connection");
        return fail_with(c, fail, FLEET_UNREACHABLE);
    }
    if (u->password[0] != '\0') {
        const char *auth_user[] = {"AUTH", u->user, u->password};
        const char *auth[] = {"AUTH", u->password};
        bool with_user = u->user[0] != '\0';
        c = expect_ok(c, with_user ? 3 : 2, with_user ? auth_user : auth, "OK", timeout,
                      deadline, fail, why, cap);
        if (c == NULL)
            return NULL;
    }
    if (u->db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", u->db);
        const char *select[] = {"SELECT", db};
        c = expect_ok(c, 2, select, "OK", timeout, deadline, fail, why, cap);
        if (c == NULL)
            return NULL;
    }
    const char *ping[] = {"PING"};
    return expect_ok(c, 1, ping, "PONG", timeout, deadline, fail, why, cap);
}

/* ---- error replies ------------------------------------------------------- */

/* An error reply's code: its first word. */
static bool error_code_is(const redisReply *r, const char *code)
{
    size_t n = strlen(code);
    return r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, code, n) == 0 &&
           (r->str[n] == ' ' || r->str[n] == '\0');
}

bool resil__fleet_noscript(const redisReply *r) { return error_code_is(r, "NOSCRIPT"); }

bool resil__fleet_unavailable(const redisReply *r)
{
    static const char *const codes[] = {
        "ASK",    "BUSY",   "CLUSTERDOWN", "LOADING", "MASTERDOWN", "MISCONF",  "MOVED",
        "NOAUTH", "NOPERM", "NOREPLICAS",  "OOM",     "READONLY",   "TRYAGAIN",
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (error_code_is(r, codes[i]))
            return true;
    return false;
}

/* An error reply's sentence, with the error as Redis worded it; the
 * server's refusal to serve at all is RESIL_EBACKEND, one command's trouble
 * RESIL_EIO. */
static int error_why(const redisReply *r, const char *what, char *why, size_t cap)
{
    if (resil__fleet_unavailable(r)) {
        snprintf(why, cap, "%s: Redis cannot serve: %s", what, r->str);
        return RESIL_EBACKEND;
    }
    snprintf(why, cap, "%s: %s", what, r->type == REDIS_REPLY_ERROR ? r->str : "malformed answer");
    return RESIL_EIO;
}

int resil__fleet_load_script(redisContext *ctx, char sha[41], resil_duration timeout,
                             char *why, size_t cap)
{
    const char *argv[] = {"SCRIPT", "LOAD", resil__fleet_script};
    redisReply *r = resil__fleet_command(ctx, 3, argv, NULL, resil__fleet_deadline(timeout));
    if (r == NULL) {
        resil__fleet_io_why(ctx, "SCRIPT LOAD", timeout, why, cap);
        return RESIL_EBACKEND;
    }
    int rc = 0;
    if (r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(sha, r->str, 40);
        sha[40] = '\0';
    } else {
        rc = error_why(r, "SCRIPT LOAD", why, cap);
    }
    freeReplyObject(r);
    return rc;
}

/* ---- one script call ------------------------------------------------------ */

static const char *op_name(fleet_op op)
{
    static const char *const names[] = {"sync",  "probe", "result", "isolate",
                                        "close", "reset", "status", "lease", "gcra",
                                        "cacquire", "crelease", "crenew"};
    return names[op];
}

static void push_str(fleet_argv *a, const char *s)
{
    a->argv[a->argc] = s;
    a->len[a->argc] = strlen(s);
    a->argc++;
}

static void push_i64(fleet_argv *a, int64_t v)
{
    snprintf(a->num[a->argc], sizeof a->num[0], "%lld", (long long)v);
    push_str(a, a->num[a->argc]);
}

static void push_f64(fleet_argv *a, double v)
{
    snprintf(a->num[a->argc], sizeof a->num[0], "%.17g", v);
    push_str(a, a->num[a->argc]);
}

static void push_rules(fleet_argv *a, const fleet_rules *r)
{
    if (r == NULL) {
        for (int i = 0; i < 13; i++)
            push_str(a, "");
        return;
    }
    push_i64(a, r->kind);
    push_i64(a, r->threshold);
    push_f64(a, r->ratio);
    push_i64(a, r->minimum);
    push_i64(a, r->sampling_ms);
    push_i64(a, r->slow_on ? 1 : 0);
    push_f64(a, r->slow_ratio);
    push_i64(a, r->break_ms);
    push_f64(a, r->growth);
    push_i64(a, r->max_break_ms);
    push_i64(a, r->probes);
    push_i64(a, r->success_threshold);
    push_i64(a, r->probe_timeout_ms);
}

static int op_args(fleet_op op)
{
    switch (op) {
    case FLEET_SYNC:
        return 7;
    case FLEET_RESULT:
        return 4;
    case FLEET_LEASE:
        return 3;
    case FLEET_GCRA:
        return 4;
    case FLEET_CACQUIRE:
        return 3;
    case FLEET_CRELEASE:
    case FLEET_CRENEW:
        return 1;
    default:
        return 0;
    }
}

void resil__fleet_argv(fleet_argv *a, const fleet_cmd *c, const fleet_config *cfg,
                       const char *sha)
{
    a->argc = 0;
    push_str(a, sha != NULL ? "EVALSHA" : "EVAL");
    push_str(a, sha != NULL ? sha : resil__fleet_script);
    push_str(a, "1");
    push_str(a, c->key);
    push_str(a, op_name(c->op));
    push_str(a, cfg->channel);
    push_str(a, c->name);
    push_i64(a, c->now_ms);
    push_i64(a, cfg->ttl_ms);
    if (c->op < FLEET_LEASE)
        push_rules(a, c->rules);
    for (int i = 0; i < op_args(c->op); i++)
        push_i64(a, c->arg[i]);
}


/* ---- decoding what Redis sends ----------------------------------------------
 *
 * Redis is trusted to run the script, not to hand back only what the script
 * meant: an operator may have edited a key by hand, a proxy may answer in
 * its stead, anyone may PUBLISH on the channel. So every number is checked
 * against the range the script can produce before it reaches a cache whose
 * word packs the state into three bits, and anything else is a malformed
 * answer — counted, never applied. */

typedef struct field_range {
    int64_t lo, hi;
} field_range;

#define ANY {INT64_MIN, INT64_MAX}
#define COUNT {0, INT64_MAX}
#define WALL_MS {0, FLEET_WALL_MS_MAX} /* Unix ms that convert to ns */

/* A breaker answer, field by field in the script's order. */
static const field_range breaker_answer[] = {
    {FLEET_OK, FLEET_STALE},                         /* code */
    {RESIL_BREAKER_CLOSED, RESIL_BREAKER_ISOLATED},  /* state */
    {0, FLEET_EPOCH_MAX},                            /* epoch */
    WALL_MS,                                         /* until */
    {0, RESIL_BREAKER_BY_DISABLE},                   /* reason */
    {0, UINT32_MAX},                                 /* run */
    COUNT, COUNT, COUNT,                             /* window total, failures, slow */
    COUNT,                                           /* break */
    COUNT,                                           /* opens */
    WALL_MS,                                         /* last opened */
    {0, UINT32_MAX},                                 /* half-open successes */
    {0, RESIL_REDIS_MAX_PROBES},                     /* probes in flight */
    {0, RESIL_REDIS_MAX_PROBES - 1},                 /* slot */
    COUNT,                                           /* ticket */
    {-1, INT64_MAX},                                 /* retry (-1: isolated) */
    ANY,                                             /* pttl */
};

/* A lease answer: the fleet's tokens and the grant, in thousandths. */
static const field_range lease_answer[] = {COUNT, COUNT};
/* A rate limiter's answer: granted or denied, and the wait in µs. */
static const field_range gcra_answer[] = {{FLEET_GRANTED, FLEET_DENIED}, COUNT};
/* A concurrency op's answer: granted or denied, the leases live, and (on
 * acquire) the ms until the oldest lapses or (on renew) the leases renewed. */
static const field_range lease_set_answer[] = {{FLEET_GRANTED, FLEET_DENIED}, COUNT, COUNT};

#undef ANY
#undef COUNT
#undef WALL_MS

#define FIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* An array of exactly n integers, each within its range, into v. */
static bool integers_in(const redisReply *r, const field_range *range, size_t n, int64_t *v)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < range[i].lo ||
            e->integer > range[i].hi)
            return false;
        v[i] = (int64_t)e->integer;
    }
    return true;
}

/* Status of a key that does not exist: the script's one-element {4}. */
static bool missing(const fleet_cmd *c, const redisReply *r)
{
    return c->op == FLEET_STATUS && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
           r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == FLEET_MISSING;
}

int resil__fleet_decode(const fleet_cmd *c, const redisReply *r, fleet_state *out)
{
    int64_t v[FIELDS(breaker_answer)];
    memset(out, 0, sizeof *out);
    if (c->op == FLEET_LEASE) {
        if (!integers_in(r, lease_answer, FIELDS(lease_answer), v))
            return RESIL_EIO;
        out->tokens = v[0];
        out->granted = v[1];
        return 0;
    }
    if (c->op == FLEET_GCRA) {
        if (!integers_in(r, gcra_answer, FIELDS(gcra_answer), v))
            return RESIL_EIO;
        out->code = (int)v[0];
        out->retry_us = v[1];
        return 0;
    }
    if (c->op >= FLEET_CACQUIRE) {
        if (!integers_in(r, lease_set_answer, FIELDS(lease_set_answer), v))
            return RESIL_EIO;
        out->code = (int)v[0];
        out->in_use = v[1];
        out->retry_ms = v[2];
        return 0;
    }
    if (missing(c, r)) {
        out->code = FLEET_MISSING;
        return 0;
    }
    if (!integers_in(r, breaker_answer, FIELDS(breaker_answer), v))
        return RESIL_EIO;
    out->code = (int)v[0];
    out->state = (resil_breaker_state)v[1];
    out->epoch = (uint64_t)v[2];
    out->until_ms = v[3];
    out->reason = (resil_breaker_reason)v[4];
    out->run = (uint32_t)v[5];
    out->window_total = (uint64_t)v[6];
    out->window_failures = (uint64_t)v[7];
    out->window_slow = (uint64_t)v[8];
    out->break_ms = v[9];
    out->opens = (uint64_t)v[10];
    out->lastopen_ms = v[11];
    out->successes = (uint32_t)v[12];
    out->inflight = (uint32_t)v[13];
    out->slot = (uint32_t)v[14];
    out->ticket = (uint64_t)v[15];
    out->retry_ms = v[16];
    out->pttl_ms = v[17];
    return 0;
}

/* One decimal integer of a message, ending at a space, within [lo, hi]. */
static bool message_number(const char **p, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = *p;
    bool negative = *s == '-';
    if (negative)
        s++;
    if (*s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (*s != ' ' || v > (uint64_t)INT64_MAX)
        return false;
    int64_t n = negative ? -(int64_t)v : (int64_t)v;
    if (n < lo || n > hi)
        return false;
    *out = n;
    *p = s + 1;
    return true;
}

bool resil__fleet_parse_message(const redisReply *m, fleet_state *s, const char **name)
{
    memset(s, 0, sizeof *s);
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[0]->type != REDIS_REPLY_STRING || strcmp(m->element[0]->str, "message") != 0 ||
        m->element[2]->type != REDIS_REPLY_STRING)
        return false;
    const char *p = m->element[2]->str;
    int64_t state, epoch, until, reason;
    if (!message_number(&p, RESIL_BREAKER_CLOSED, RESIL_BREAKER_ISOLATED, &state) ||
        !message_number(&p, 0, FLEET_EPOCH_MAX, &epoch) ||
        !message_number(&p, 0, FLEET_WALL_MS_MAX, &until) ||
        !message_number(&p, 0, RESIL_BREAKER_BY_DISABLE, &reason) || !resil__fleet_name_ok(p))
        return false;
    s->state = (resil_breaker_state)state;
    s->epoch = (uint64_t)epoch;
    s->until_ms = until;
    s->reason = (resil_breaker_reason)reason;
    *name = p;
    return true;
}

const char *resil__fleet_key_name(const redisReply *key, size_t skip)
{
    if (key->type != REDIS_REPLY_STRING || key->len <= skip ||
        strlen(key->str) != key->len || !resil__fleet_name_ok(key->str + skip))
        return NULL;
    return key->str + skip;
}

static redisReply *send_script(redisContext *ctx, const fleet_cmd *c, const fleet_config *cfg,
                               const char *sha, int64_t deadline, uint64_t *sent)
{
    fleet_argv a;
    resil__fleet_argv(&a, c, cfg, sha);
    (*sent)++;
    return resil__fleet_command(ctx, a.argc, a.argv, a.len, deadline);
}

static int answer(const fleet_cmd *c, redisReply *r, fleet_state *out, char *why, size_t cap)
{
    int rc = resil__fleet_decode(c, r, out);
    if (rc != 0)
        rc = error_why(r, "script", why, cap);
    freeReplyObject(r);
    return rc;
}

int resil__fleet_run(redisContext *ctx, const fleet_cmd *c, const fleet_config *cfg,
                     const char *sha, int64_t deadline, fleet_state *out,
                     uint64_t *noscript, uint64_t *sent, char *why, size_t cap)
{
    redisReply *r = send_script(ctx, c, cfg, sha, deadline, sent);
    if (resil__fleet_noscript(r)) {
        freeReplyObject(r);
        (*noscript)++;
        sha = NULL;
        r = send_script(ctx, c, cfg, NULL, deadline, sent);
    }
    if (r == NULL) {
        resil__fleet_io_why(ctx, sha != NULL ? "EVALSHA" : "EVAL", cfg->timeout, why, cap);
        return resil__fleet_malformed(ctx) ? RESIL_EIO : RESIL_EBACKEND;
    }
    return answer(c, r, out, why, cap);
}
