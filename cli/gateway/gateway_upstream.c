/*
 * gateway_upstream.c — forward one request to the upstream: with the
 * gateway's own client for a plain http:// upstream given by its address
 * (gateway_client.c), with libcurl for every other.
 *
 * The gateway must be transparent: the upstream sees the client's method,
 * target (byte for byte after the base URL's prefix: no path
 * normalisation, percent-escapes as they were spelled), headers and body,
 * and the
 * client gets the upstream's status, headers and body back, compressed or
 * not, as it was sent. Only hop-by-hop headers stop at the proxy.
 *
 * Every call runs on the gateway's loop through one curl multi handle, so
 * no thread waits on the upstream: libresil-http's driver of curl multi on
 * a loop (src/http/curl_loop.c, under resil_http_multi too) turns curl's
 * sockets into watches and its timeout into a timer, and a call's `done`
 * runs from there once curl says the transfer ended, never from inside a
 * libcurl callback. The handles are the gateway's own, so curl opens and
 * closes their sockets through the driver: a kept connection's watch stays
 * armed between its calls. The multi handle keeps the upstream
 * connections open between calls (up to KEEP_CONNECTIONS), easy handles
 * are pooled with their shared options set (never reset: each call sets
 * its own options whole), and the upstream's base URL is
 * written once: a reverse proxy that reconnects, rebuilds its handles or
 * reparses its configuration for every request would measure TCP, malloc
 * and libcurl's setup, not itself. With several loops each has its own of
 * all of these (gw_upstream_open() per loop), so no lock is taken. Only the fleet's Redis permits block, and those
 * are taken and given back on a store worker (gw_upstream_admit/leave).
 *
 * Both clients sit behind gw_upstream_start(), so the request path has one
 * call site and one set of semantics: the breaker, the request's headers
 * (gw_forward_headers()), the response's kept header lines
 * (gw_reply_header_line()), the outcome's words and the metrics are this
 * file's for both; a plain http:// upstream only skips libcurl's transfer
 * machinery (gateway_client.c says why, and how it keeps the rule below).
 *
 * A kept connection has one hazard. When a reused connection closes before
 * any answer byte, libcurl sends the request again on a fresh one
 * (Curl_retry_request: the upstream probably closed an idle connection
 * just then) — but the upstream may have read, and run, the first copy.
 * libcurl writes a request only from its DO state, right after calling
 * the pre-request callback, on a new connection and on a reused one alike,
 * and every resend (a dead reused connection, a refused HTTP/2 stream, a
 * downgrade to HTTP/1.1) passes through DO again. So the callback tells
 * whether request bytes may have left (it ran) and catches a resend (it
 * runs twice in one transfer): for a request that must reach the upstream
 * at most once, the second call aborts the transfer.
 *
 * With a breaker (--breaker-failures or --breaker-break: this gateway's
 * own; --fleet: shared through Redis by the gateways in front of the
 * upstream) every call goes through it: while it is open a
 * request is refused before any handle is taken, so it provably never
 * left. No answer, or a 5xx, counts as a failure.
 */
#include <curl/curl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "curl_loop.h"
#include "gateway.h"
#ifdef RESIL_CLI_REDIS
#include "fleet_opts.h"
#endif

void gw_reply_free(gw_reply *r)
{
    gw_buf_free(&r->headers);
    gw_buf_free(&r->body);
}

/* ---- curl multi on the loop ---------------------------------------------- */

struct gw_upstream {
    gateway *gw;
    resil__curl_loop *driver;
    CURLM *multi;   /* the driver's */
    gw_call *calls; /* in flight */
    CURL *pool[64]; /* handles for the next calls, their shared options set */
    size_t pool_len;
    char *base;     /* the base URL as libcurl writes it, without a trailing '/' */
    size_t base_len;
    bool proxy_env; /* a proxy variable is set: libcurl reads them per transfer */
    struct gw_client *client; /* the gateway's own, for a plain http:// upstream; or NULL */
};

static void call_finish(struct gw_upstream *u, gw_call *c, CURLcode rc);
static void client_finished(gw_call *c, void *ud);

/* A transfer curl multi says is done (the driver's report). */
static void on_done(void *ud, CURL *easy, void *priv, CURLcode code)
{
    (void)easy;
    call_finish(ud, priv, code);
}

/* The base URL parsed once and written back by libcurl's URL API (its
 * scheme, host, port and path prefix; no query or fragment: --upstream
 * refuses them), without the '/' that ends an empty path. */
static bool parse_base(struct gw_upstream *u, const char *base)
{
    CURLU *url = curl_url();
    char *text = NULL;
    bool ok = url != NULL && curl_url_set(url, CURLUPART_URL, base, 0) == CURLUE_OK &&
              curl_url_get(url, CURLUPART_URL, &text, 0) == CURLUE_OK;
    if (ok) {
        u->base_len = strlen(text);
        while (u->base_len > 0 && text[u->base_len - 1] == '/')
            u->base_len--;
        ok = (u->base = strndup(text, u->base_len)) != NULL;
    }
    curl_free(text);
    curl_url_cleanup(url);
    return ok;
}

/* libcurl looks the proxy variables up in the environment for every
 * transfer (up to five getenv() calls and copies). The gateway's
 * environment does not change while it runs, so when none is set the
 * handles say once that no proxy applies, which is what libcurl would
 * find each time; when one is set (empty or not), libcurl reads them as
 * before. */
static bool proxy_in_environment(void)
{
    static const char *const names[] = {"http_proxy", "HTTP_PROXY", "https_proxy",
                                        "HTTPS_PROXY", "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (getenv(names[i]) != NULL)
            return true;
    return false;
}

int gw_upstream_open(gateway *gw, resil_loop *loop, struct gw_upstream **out)
{
    struct gw_upstream *u = calloc(1, sizeof *u);
    if (u == NULL)
        return -1;
    if (!parse_base(u, gw->cfg.upstream) ||
        resil__curl_loop_new(loop, on_done, u, &u->driver) != 0) {
        free(u->base);
        free(u);
        return -1;
    }
    u->gw = gw;
    u->proxy_env = proxy_in_environment();
    u->multi = resil__curl_loop_multi(u->driver);
    curl_multi_setopt(u->multi, CURLMOPT_MAXCONNECTS, (long)GW_KEEP_CONNECTIONS);
    if (gw_client_open(loop, gw->cfg.upstream, u->proxy_env, gw->cfg.timeout, client_finished,
                       u, &u->client) != 0) {
        gw_upstream_close(u, NULL);
        return -1;
    }
    *out = u;
    return 0;
}

static void link_call(struct gw_upstream *u, gw_call *c)
{
    GW_LIST_PUSH(u->calls, c, prev, next);
}

static void call_unlink(struct gw_upstream *u, gw_call *c)
{
    GW_LIST_UNLINK(u->calls, c, prev, next);
}

static void call_release(struct gw_upstream *u, gw_call *c, resil_breaker_result verdict);

void gw_upstream_close(struct gw_upstream *u, void (*aborted)(gw_call *c))
{
    if (u == NULL)
        return;
    while (u->calls != NULL) {
        gw_call *c = u->calls;
        if (c->easy != NULL)
            curl_multi_remove_handle(u->multi, c->easy);
        else
            gw_client_abort(u->client, c);
        call_unlink(u, c);
        /* cut short by the shutdown: it says nothing about the upstream
         * (counted as a success, a half-open probe cut here would close
         * the fleet's breaker for every gateway) */
        call_release(u, c, RESIL_BREAKER_IGNORED);
        if (aborted != NULL)
            aborted(c);
    }
    for (size_t i = 0; i < u->pool_len; i++)
        curl_easy_cleanup(u->pool[i]);
    gw_client_close(u->client);
    resil__curl_loop_free(u->driver);
    free(u->base);
    free(u);
}

/* ---- the handle pool (the loop's alone) ------------------------------------ */

static size_t on_header(char *data, size_t size, size_t n, void *ud);
static size_t on_body(char *data, size_t size, size_t n, void *ud);

/* What every call sets alike, once per handle. */
static void set_shared(struct gw_upstream *u, CURL *h)
{
    long timeout_ms = gw_timeout_ms(u->gw->cfg.timeout);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, gw_connect_ms(timeout_ms));
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    if (!u->proxy_env)
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    resil__curl_loop_own_sockets(u->driver, h);
}

/* A pooled handle keeps what set_shared() gave it; a new one gets it. */
static CURL *take_handle(struct gw_upstream *u)
{
    if (u->pool_len > 0)
        return u->pool[--u->pool_len];
    CURL *h = curl_easy_init();
    if (h != NULL)
        set_shared(u, h);
    return h;
}

/* Back to the pool as its call left it, not reset: curl_easy_reset()
 * frees and rebuilds every option (the defaults' strings allocated
 * again) and set_shared() would then set its dozen again, for each
 * request. Every option a call sets is set by the next call whole
 * (set_transfer(), set_method()); what pointed into this call's memory
 * (its headers, body, reply, error buffer, itself) is cleared here so
 * that no handle holds a pointer to freed memory while it waits. */
static void give_handle(struct gw_upstream *u, CURL *h)
{
    if (u->pool_len == sizeof u->pool / sizeof u->pool[0]) {
        curl_easy_cleanup(h);
        return;
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, (char *)NULL);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, (void *)NULL);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)NULL);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, (char *)NULL);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, (void *)NULL);
    curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)NULL);
    u->pool[u->pool_len++] = h;
}

/* ---- request headers ----------------------------------------------------- */

typedef struct header_ctx {
    struct curl_slist *list;
    bool failed;
} header_ctx;

/* The line is built on the stack when it fits and on the heap when not: a
 * long header (a JWT, a cookie jar) must reach the upstream whole, never
 * cut at a buffer's size. */
static void add_header(void *ud, const char *name, const char *value)
{
    header_ctx *h = ud;
    char small[1024];
    size_t name_len = strlen(name), value_len = strlen(value);
    size_t cap = name_len + value_len + 3;
    char *line = cap <= sizeof small ? small : malloc(cap);
    if (line == NULL) {
        h->failed = true;
        return;
    }
    /* curl drops "Name:" (it means "remove"); "Name;" sends it empty. */
    memcpy(line, name, name_len);
    char *p = line + name_len;
    if (value_len == 0) {
        *p++ = ';';
    } else {
        memcpy(p, ": ", 2);
        memcpy(p + 2, value, value_len);
        p += 2 + value_len;
    }
    *p = '\0';
    struct curl_slist *l = curl_slist_append(h->list, line);
    if (line != small)
        free(line);
    if (l == NULL)
        h->failed = true;
    else
        h->list = l;
}

typedef struct forward_ctx {
    gw_header_fn *add;
    void *ud;
    char forwarded_for[512]; /* the client's X-Forwarded-For, if any */
} forward_ctx;

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    forward_ctx *h = cls;
    if (gw_hop_by_hop(key, strlen(key)))
        return MHD_YES;
    if (strcasecmp(key, "X-Forwarded-For") == 0) {
        snprintf(h->forwarded_for, sizeof h->forwarded_for, "%s", value ? value : "");
        return MHD_YES;
    }
    h->add(h->ud, key, value ? value : "");
    return MHD_YES;
}

void gw_forward_headers(const gw_forward *f, gw_header_fn *add, void *ud)
{
    forward_ctx h = {.add = add, .ud = ud};
    MHD_get_connection_values(f->conn, MHD_HEADER_KIND, copy_header, &h);
    char xff[600];
    if (h.forwarded_for[0] != '\0')
        snprintf(xff, sizeof xff, "%s, %s", h.forwarded_for, f->client_ip);
    else
        snprintf(xff, sizeof xff, "%s", f->client_ip);
    add(ud, "X-Forwarded-For", xff);
}

static struct curl_slist *request_headers(const gw_forward *f)
{
    header_ctx h = {0};
    gw_forward_headers(f, add_header, &h);
    struct curl_slist *l = curl_slist_append(h.list, "Expect:");
    if (l == NULL || h.failed) {
        curl_slist_free_all(l ? l : h.list);
        return NULL;
    }
    return l;
}

/* ---- response capture ---------------------------------------------------- */

bool gw_reply_header_line(gw_reply *r, const char *data, size_t len)
{
    gw_field f;
    switch (gw_upstream_header_line(data, len, &f)) {
    case GW_LINE_STATUS: /* a new response begins (after a 100 Continue, say) */
        r->headers.len = 0;
        return true;
    case GW_LINE_SKIP:
        return true;
    case GW_LINE_FIELD:
        break;
    }
    return gw_buf_append(&r->headers, f.name, f.name_len) &&
           gw_buf_append(&r->headers, ": ", 2) &&
           gw_buf_append(&r->headers, f.value, f.value_len) &&
           gw_buf_append(&r->headers, "\r\n", 2);
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    return gw_reply_header_line(ud, data, size * n) ? size * n : 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    gw_reply *r = ud;
    return gw_buf_append(&r->body, data, size * n) ? size * n : 0;
}

/* ---- the upstream URL ------------------------------------------------------ */

/* The base URL (parsed once, its prefix included) followed by the
 * client's target. Only an origin-form target reaches here
 * (gw_target_is_origin_form(): a '/' first, then path and query
 * characters and %XX escapes only), so what follows the base can only be
 * path and query: no target names another host, whatever it holds.
 * NULL when it is not so, or out of memory; free(). */
static char *upstream_url(struct gw_upstream *u, const char *target)
{
    size_t len = strlen(target);
    if (!gw_target_is_origin_form(target, len))
        return NULL;
    char *url = malloc(u->base_len + len + 1);
    if (url == NULL)
        return NULL;
    memcpy(url, u->base, u->base_len);
    memcpy(url + u->base_len, target, len + 1);
    return url;
}

/* ---- sending at most once ------------------------------------------------ */

/* libcurl's pre-request callback: the request is about to be written. */
static int before_send(void *ud, char *primary_ip, char *local_ip, int primary_port,
                       int local_port)
{
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    gw_call *c = ud;
    if (c->out->may_have_sent && c->once) {
        c->out->resend_refused = true;
        return CURL_PREREQFUNC_ABORT;
    }
    c->out->may_have_sent = true;
    return CURL_PREREQFUNC_OK;
}

/* Without the callback nothing tells a request that never left from one
 * that did: take it as sent, so no key is released on a guess. */
static void watch_sending(CURL *h, gw_call *c)
{
    if (curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, before_send) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_PREREQDATA, c) != CURLE_OK)
        c->out->may_have_sent = true;
}

/* ---- forwarding ---------------------------------------------------------- */

/* Every method option is set, whatever the handle's last call set: no
 * custom method, no body, not HEAD, unless this call is so. (In libcurl
 * NOBODY 0 turns a HEAD back into a GET, POSTFIELDS makes a POST and
 * HTTPGET a GET, so the order matters.) */
bool gw_forward_sends_body(const gw_forward *f)
{
    const char *m = f->method;
    return strcmp(m, "HEAD") != 0 && (f->body_len > 0 || strcmp(m, "POST") == 0 ||
                                      strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0);
}

static void set_method(CURL *h, const gw_forward *f)
{
    const char *m = f->method;
    bool head = strcmp(m, "HEAD") == 0;
    bool sends_body = gw_forward_sends_body(f);
    curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, (char *)NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, sends_body && f->body_len > 0 ? f->body
                                            : sends_body                  ? ""
                                                                          : NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                     sends_body ? (curl_off_t)f->body_len : (curl_off_t)-1);
    if (head) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        return;
    }
    if (sends_body) {
        if (strcmp(m, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
        return;
    }
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    if (strcmp(m, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
}

/* Refused by the breaker or a fleet limit: a failure to connect that never
 * sent a byte, so a guarded request's key is released. Retry-After is the
 * wait in whole seconds, at least 1. */
static void refused(gw_reply *out, const char *code, const char *detail, const char *message,
                    resil_duration wait)
{
    int64_t s = wait / RESIL_S(1) + (wait % RESIL_S(1) != 0);
    out->refused = code;
    out->refused_message = message;
    out->curl_code = CURLE_COULDNT_CONNECT;
    snprintf(out->retry_after, sizeof out->retry_after, "%lld",
             (long long)(s < 1 ? 1 : s > 86400 ? 86400 : s));
    snprintf(out->error, sizeof out->error, "%s", detail);
}

/* --fleet-rate, --fleet-concurrency: the upstream's permits, never waited
 * for (a worker is not held for a rate permit). */
bool gw_upstream_admit(gateway *gw, gw_call *c, gw_reply *out)
{
    memset(&c->fleet_permit, 0, sizeof c->fleet_permit);
#ifdef RESIL_CLI_REDIS
    if (gw->limit == NULL)
        return true;
    const char *why = NULL;
    resil_duration wait = 0;
    if (fleet_limit_enter(gw->limit, &c->fleet_permit, &why, &wait) == 0)
        return true;
    bool rate = strcmp(why, "fleet rate limit") == 0;
    refused(out, rate ? "fleet_rate_limited" : "fleet_concurrency_full", why,
            rate ? "the upstream's fleet rate limit is spent; retry later"
                 : "the upstream's fleet concurrency limit is full; retry later",
            wait);
    return false;
#else
    (void)gw;
    (void)out;
    return true;
#endif
}

void gw_upstream_leave(gw_call *c)
{
#ifdef RESIL_CLI_REDIS
    fleet_limit_leave(&c->fleet_permit);
#else
    (void)c;
#endif
}

/* The call as an attempt of pipeline "gateway": its duration goes to
 * http.client.request.resilience.attempt.duration. A 5xx or no answer is a
 * failure, as the breaker counts it. */
static void record_attempt(gateway *gw, const gw_call *c, const gw_reply *out,
                           resil_duration took)
{
    resil_outcome o = resil_ok();
    o.code = out->status;
    if (out->curl_code != 0) {
        o.kind = out->timed_out ? RESIL_TIMEOUT : RESIL_TRANSIENT;
        o.code = 0;
    } else if (out->status >= 500) {
        o.kind = RESIL_TRANSIENT;
    }
    resil_http_attrs http = gw->upstream_attrs;
    http.method = gw_known_method(c->method);
    resil_event ev = {.type = RESIL_EVENT_ATTEMPT, .pipeline = "gateway", .strategy = "",
                      .key = "", .at = resil_clock_now(gw->clock), .attempt = 1,
                      .duration = took, .outcome = &o, .reason = "", .from_name = "",
                      .to_name = "", .http = &http};
    ev.severity = resil_event_severity(ev.type, &o);
    resil_metrics_on_event(&ev, gw->metrics);
}

/* The transfer's outcome into the reply, as the breaker and the metrics
 * count it. */
/* What a finished call says about the upstream. */
static resil_breaker_result verdict_of(const gw_reply *out)
{
    return out->curl_code != 0 || out->status >= 500 ? RESIL_BREAKER_FAILURE
                                                     : RESIL_BREAKER_SUCCESS;
}

/* The message of a call that got no answer, by why (detail: the client's
 * own words, when it has them). */
static void describe_failure(gw_reply *out, const char *detail)
{
    if (out->resend_refused)
        snprintf(out->error, sizeof out->error,
                 "the upstream closed the connection without answering; not sent again");
    else if (out->headers.overflow)
        snprintf(out->error, sizeof out->error,
                 "upstream response headers larger than the gateway sends back (%d KB)",
                 GW_REPLY_HEADERS_MAX / 1024);
    else if (out->body.overflow)
        snprintf(out->error, sizeof out->error, "upstream response larger than --max-body");
    else if (detail != out->error)
        snprintf(out->error, sizeof out->error, "%s", detail);
}

static void read_outcome(gateway *gw, gw_call *c, CURLcode rc)
{
    gw_reply *out = c->out;
    resil_duration took = resil_clock_now(gw->clock) - c->start;
    out->curl_code = (int)rc;
    out->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &out->status);
    else
        describe_failure(out, c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
    record_attempt(gw, c, out, took);
}

/* The gateway's own client is done with c (gateway_client.c). */
static void client_finished(gw_call *c, void *ud)
{
    struct gw_upstream *u = ud;
    gw_reply *out = c->out;
    call_unlink(u, c);
    if (out->curl_code != 0)
        describe_failure(out, out->error);
    record_attempt(u->gw, c, out, resil_clock_now(u->gw->clock) - c->start);
    call_release(u, c, verdict_of(out));
    c->done(c);
}

/* The call's breaker verdict is recorded; its handle, headers and URL go. */
static void call_release(struct gw_upstream *u, gw_call *c, resil_breaker_result verdict)
{
    resil_breaker_record(u->gw->breaker, &c->permit, verdict);
    if (c->easy != NULL)
        give_handle(u, c->easy);
    c->easy = NULL;
    curl_slist_free_all(c->headers);
    c->headers = NULL;
    free(c->url);
    c->url = NULL;
}

static void call_finish(struct gw_upstream *u, gw_call *c, CURLcode rc)
{
    curl_multi_remove_handle(u->multi, c->easy);
    call_unlink(u, c);
    read_outcome(u->gw, c, rc);
    call_release(u, c, verdict_of(c->out));
    c->done(c);
}

/* Failed before any transfer began: the permit goes, then done. */
static void call_failed(struct gw_upstream *u, gw_call *c, int code, const char *why)
{
    c->out->curl_code = code;
    snprintf(c->out->error, sizeof c->out->error, "%s", why);
    call_release(u, c, verdict_of(c->out));
    c->done(c);
}

/* The call's own options (set_shared() set the rest). */
static void set_transfer(CURL *h, gw_call *c)
{
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c->out);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c->out);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_PRIVATE, c);
    watch_sending(h, c);
}

void gw_upstream_start(struct gw_upstream *u, gw_call *c, const gw_forward *f, gw_reply *out,
                       void (*done)(gw_call *c))
{
    gateway *gw = u->gw;
    resil_bulkhead_ticket fleet_permit = c->fleet_permit; /* taken by gw_upstream_admit() */
    memset(c, 0, sizeof *c);
    c->fleet_permit = fleet_permit;
    memset(out, 0, sizeof *out);
    out->headers.limit = GW_REPLY_HEADERS_MAX;
    out->body.limit = gw->cfg.max_body;
    c->out = out;
    c->done = done;
    c->method = f->method;
    c->once = f->once;
    /* a NULL breaker admits every call */
    if (resil_breaker_acquire(gw->breaker, &c->permit) != 0) {
        refused(out, "circuit_open", "circuit open",
                "the upstream's circuit breaker is open; retry later", c->permit.retry_after);
        done(c);
        return;
    }
    if (u->client != NULL) { /* a plain http:// upstream: the gateway's own client */
        c->start = resil_clock_now(gw->clock);
        link_call(u, c);
        gw_client_start(u->client, c, f);
        return;
    }
    c->url = upstream_url(u, f->target);
    c->headers = request_headers(f);
    c->easy = take_handle(u);
    if (c->url == NULL) {
        call_failed(u, c, CURLE_URL_MALFORMAT, "cannot build the upstream URL");
        return;
    }
    if (c->headers == NULL || c->easy == NULL) {
        call_failed(u, c, CURLE_OUT_OF_MEMORY, "out of memory");
        return;
    }
    set_transfer(c->easy, c);
    set_method(c->easy, f);
    c->start = resil_clock_now(gw->clock);
    if (curl_multi_add_handle(u->multi, c->easy) != CURLM_OK) {
        call_failed(u, c, CURLE_FAILED_INIT, "cannot start the upstream transfer");
        return;
    }
    link_call(u, c);
}
