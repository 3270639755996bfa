/*
 * gateway_rules.c — the idempotency rules `resil gateway` applies to a
 * guarded request, apart from the listening side (gateway_http.c) that
 * frames requests and answers.
 *
 * The promise is "at most once": a guarded request with a key reaches the
 * upstream once, and every repeat gets the one answer that run produced.
 * Everything here follows from one rule: once request bytes may have
 * reached the upstream, the key is never given back for another run.
 *
 *   first        forward; then, by what came back (fate_of()):
 *                  a response            saved and replayed — whatever its
 *                                        status — except 408, 425, 429 and
 *                                        503, the upstream's own "I did not
 *                                        process it": released;
 *                  a failure before any  released (nothing was sent: no
 *                  request byte left     host, no connection, a connect that
 *                                        timed out);
 *                  anything else         (a timeout, a reset, a connection
 *                                        that died unanswered — it is not
 *                                        sent again — an answer
 *                                        over --max-body) the outcome is
 *                                        unknown: a 502/504 with
 *                                        Idempotent-Outcome: unknown is
 *                                        saved and replayed;
 *                with --upstream-dedupes every uncertain case is released
 *                instead: the upstream recognises the repeat by its key.
 *   takeover     a first whose lease number is above 1 took over a key whose
 *                holder vanished (a crash) after it may have forwarded: the
 *                unknown outcome is saved, nothing is forwarded (again,
 *                unless --upstream-dedupes).
 *   replay / in progress / mismatch   the saved answer, 409, 422.
 *
 * The rules run in steps on the request's loop, none of which blocks: the
 * store's verdict (begin, submitted asynchronously: the store's thread
 * posts its result back), the upstream call (no thread waits for it),
 * then the outcome saved or the key released (asynchronously again). Only
 * the fleet's Redis permits, and every store call when batching is off,
 * take a worker (gateway_http.c). The request carries its key, lease,
 * hold and the answer being saved between the steps.
 *
 * A key stays ours while the upstream runs: a renewer thread holds the set
 * of leases in flight and renews each every third of the lease, so a slow
 * call never loses its key to a takeover; the lease number is the fencing
 * token, and a run that lost it anyway is refused on complete and told so
 * (409), never answered as if its result were the key's. An answer the
 * store cannot save now (no journal, or the journal failed too) is not
 * reported as done: the client gets 503, the key stays held, and the
 * renewer keeps trying to save it; an answer it refuses for good becomes an
 * unknown outcome. Store errors map by class: a bad key 400, unavailable
 * 503 with Retry-After, refused 500 without.
 */
#include <curl/curl.h>
#include <microhttpd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway.h"

#define RETRY_AFTER "1"
#define OUTCOME_UNKNOWN "Idempotent-Outcome: unknown\r\n"

bool gw_guarded_method(const gw_config *cfg, const char *method)
{
    for (size_t i = 0; i < cfg->n_methods; i++) {
        if (strcmp(cfg->methods[i], method) == 0)
            return true;
    }
    return false;
}

/* ---- what an upstream answer means for the key ---------------------------- */

typedef enum fate {
    FATE_SAVE,    /* the operation's answer: save it, replay it */
    FATE_UNKNOWN, /* it may have run and its answer is lost: save "unknown" */
    FATE_RELEASE  /* it did not run: give the key back for the retry */
} fate;

/* A failure before any byte of the request left: the client never came
 * to sending it (libcurl's pre-request callback did not run, or the
 * gateway's own client had no byte taken by the socket) and failed
 * finding or reaching the upstream, or timed out connecting. The same codes after the request left — a resend's
 * reconnect refused, a timeout waiting for the answer — are not these. */
static bool never_sent(const gw_reply *up)
{
    if (up->may_have_sent)
        return false;
    return up->curl_code == CURLE_COULDNT_RESOLVE_HOST ||
           up->curl_code == CURLE_COULDNT_RESOLVE_PROXY ||
           up->curl_code == CURLE_COULDNT_CONNECT || up->curl_code == CURLE_OPERATION_TIMEDOUT;
}

/* The statuses by which an upstream says it did not process the request. */
static bool not_processed(long status)
{
    return status == 408 || status == 425 || status == 429 || status == 503;
}

static fate fate_of(const gw_config *cfg, const gw_reply *up)
{
    if (up->curl_code == 0)
        return not_processed(up->status) ? FATE_RELEASE : FATE_SAVE;
    if (never_sent(up) || cfg->upstream_dedupes)
        return FATE_RELEASE;
    return FATE_UNKNOWN;
}

/* ---- answers of the gateway's own --------------------------------------- */

/* A store message in a JSON string: quotes, backslashes and control bytes
 * escaped, cut to fit. */
static void json_escape(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; *in != '\0' && n + 7 < cap; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
        else if (c < 0x20)
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
}

/* A store call failed: answer by its error class. */
static enum MHD_Result store_failed(gw_req *r, struct MHD_Connection *conn,
                                    const char *method, int rc, const resil_err *err)
{
    if (rc == RESIL_EINVAL) {
        char message[300];
        json_escape(err->message, message, sizeof message);
        r->idem = "bad-key";
        return gw_send_error(r, conn, method, 400, "invalid_idempotency_key", message, NULL);
    }
    r->idem = "store-error";
    fprintf(stderr, "resil gateway: %s\n", err->message);
    if (rc == RESIL_EBUSY || rc == RESIL_ENOMEM)
        return gw_send_error(r, conn, method, 503, "store_unavailable",
                             "the idempotency store is unavailable; retry later", RETRY_AFTER);
    return gw_send_error(r, conn, method, 500, "store_error",
                         "the idempotency store refused the request", NULL);
}

/* The answer saved when the outcome is unknown: the same bytes on the
 * first answer and on every replay. It is r's answer to save (r->resp),
 * its body in r->own, both kept until the store called back. */
static const char unknown_headers[] = "Content-Type: application/json\r\n" OUTCOME_UNKNOWN;

static void unknown_of(gw_req *r, int status, const char *code, const char *why)
{
    int n = snprintf(r->own, sizeof r->own,
                     "{\"error\":\"%s\",\"message\":\"%s; the request may have run upstream, "
                     "so it is not run again with this Idempotency-Key\"}\n",
                     code, why);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof r->own ? (size_t)n : sizeof r->own - 1;
    r->resp = (resil_store_response){.status = status, .headers = unknown_headers,
                                     .headers_len = sizeof unknown_headers - 1,
                                     .body = r->own, .body_len = len};
}

static void unknown_of_reply(gw_req *r, const gw_reply *up)
{
    if (up->timed_out)
        unknown_of(r, 504, "upstream_timeout", "the upstream did not answer in time");
    else if (up->resend_refused)
        unknown_of(r, 502, "upstream_unavailable",
                   "the upstream closed the connection without answering");
    else if (up->body.overflow || up->headers.overflow)
        unknown_of(r, 502, "upstream_response_too_large",
                   "the upstream's answer was larger than the gateway keeps");
    else
        unknown_of(r, 502, "upstream_unavailable", "the upstream connection failed");
}

/* ---- leases in flight: the renewer -------------------------------------- */

/* One key whose outcome is not yet durable: its upstream call is running,
 * or its answer is waiting to be saved (unsaved). Owned by the list; a
 * hold the renewer is using (busy) is freed by the renewer when its request
 * has finished with it (dropped). */
typedef struct gw_hold {
    struct gw_hold *prev, *next;
    char *tenant, *key;
    uint64_t lease;
    int64_t due; /* next renewal, monotonic ns */
    bool busy, dropped, lost, unsaved;
    bool failing; /* the last attempt failed (logged once per run of failures) */
    int status;   /* unsaved: the answer to save */
    char *headers, *body;
    size_t headers_len, body_len;
} gw_hold;

struct gw_leases {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC */
    gw_hold *head;
    bool stop;
    pthread_t thread;
    resil_store_journal_stats logged; /* the journal stats last logged */
    bool replay_failing;              /* logged once per outage */
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static resil_duration renew_every(const gateway *gw) { return gw->cfg.lease / 3; }

/* After a failed renewal: sooner, while the lease still runs. */
static resil_duration renew_retry(const gateway *gw)
{
    resil_duration d = gw->cfg.lease / 10;
    return d < RESIL_MS(50) ? RESIL_MS(50) : d > RESIL_S(1) ? RESIL_S(1) : d;
}

static void hold_free(gw_hold *h)
{
    free(h->tenant);
    free(h->key);
    free(h->headers);
    free(h->body);
    free(h);
}

static void hold_unlink(struct gw_leases *L, gw_hold *h)
{
    GW_LIST_UNLINK(L->head, h, prev, next);
}

/* Start renewing k's lease; NULL when out of memory. */
static gw_hold *hold_add(gateway *gw, const resil_store_key *k, uint64_t lease)
{
    struct gw_leases *L = gw->leases;
    gw_hold *h = calloc(1, sizeof *h);
    if (h == NULL || L == NULL)
        goto fail;
    h->tenant = strdup(k->tenant);
    h->key = strdup(k->key);
    if (h->tenant == NULL || h->key == NULL)
        goto fail;
    h->lease = lease;
    h->due = mono_ns() + renew_every(gw);
    pthread_mutex_lock(&L->mu);
    GW_LIST_PUSH(L->head, h, prev, next);
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->mu);
    return h;
fail:
    if (h != NULL)
        hold_free(h);
    return NULL;
}

/* The request is done with h: stop renewing it. */
static void hold_drop(gateway *gw, gw_hold *h)
{
    struct gw_leases *L = gw->leases;
    pthread_mutex_lock(&L->mu);
    bool busy = h->busy;
    if (busy)
        h->dropped = true;
    else
        hold_unlink(L, h);
    pthread_mutex_unlock(&L->mu);
    if (!busy)
        hold_free(h);
}

/* The answer could not be saved: hand it to the renewer, which keeps the
 * lease and tries again. False (and h dropped) when out of memory. */
static bool hold_keep_unsaved(gateway *gw, gw_hold *h, const resil_store_response *resp)
{
    char *headers = malloc(resp->headers_len + 1), *body = malloc(resp->body_len + 1);
    if (headers == NULL || body == NULL) {
        free(headers);
        free(body);
        hold_drop(gw, h);
        return false;
    }
    if (resp->headers_len > 0)
        memcpy(headers, resp->headers, resp->headers_len);
    if (resp->body_len > 0)
        memcpy(body, resp->body, resp->body_len);
    struct gw_leases *L = gw->leases;
    pthread_mutex_lock(&L->mu);
    h->status = resp->status;
    h->headers = headers;
    h->headers_len = resp->headers_len;
    h->body = body;
    h->body_len = resp->body_len;
    h->unsaved = true;
    h->due = mono_ns() + renew_retry(gw);
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->mu);
    return true;
}

/* The next hold to work on (not busy, due by now, still ours), or NULL. */
static gw_hold *next_due(struct gw_leases *L, int64_t now, int64_t *earliest)
{
    *earliest = now + RESIL_S(1);
    for (gw_hold *h = L->head; h != NULL; h = h->next) {
        if (h->busy || h->dropped || (h->lost && !h->unsaved))
            continue;
        if (h->due <= now)
            return h;
        if (h->due < *earliest)
            *earliest = h->due;
    }
    return NULL;
}

typedef enum work_result { WORK_RENEWED, WORK_RETRY, WORK_LOST, WORK_SAVED } work_result;

/* Outside the lock: h is busy, so nobody frees it, and its key, lease and
 * unsaved answer do not change. */
static work_result work_on(gateway *gw, gw_hold *h, bool unsaved)
{
    resil_store_key k = {.tenant = h->tenant, .operation = gw->cfg.operation, .key = h->key};
    resil_err err = {0};
    if (unsaved) {
        resil_store_response resp = {.status = h->status, .headers = h->headers,
                                     .headers_len = h->headers_len, .body = h->body,
                                     .body_len = h->body_len};
        int rc = resil_store_complete(gw->store, &k, h->lease, &resp, &err);
        if (rc == 0) {
            fprintf(stderr, "resil gateway: key '%s': the answer (%d) is saved now\n", h->key,
                    h->status);
            return WORK_SAVED;
        }
        if (rc == RESIL_ESTATE)
            return WORK_LOST;
    }
    int rc = resil_store_renew(gw->store, &k, h->lease, &err);
    bool was_failing = h->failing;
    h->failing = rc != 0 || unsaved;
    if (rc == 0)
        return unsaved ? WORK_RETRY : WORK_RENEWED;
    if (rc == RESIL_ESTATE)
        return WORK_LOST; /* logged by settle(), unless the request had finished */
    if (!was_failing)
        fprintf(stderr, "resil gateway: key '%s': %s failed: %s\n", h->key,
                unsaved ? "saving the answer" : "renewing the lease", err.message);
    return WORK_RETRY;
}

/* Under the lock again: record what work_on() found. */
static void settle(gateway *gw, struct gw_leases *L, gw_hold *h, work_result w)
{
    h->busy = false;
    if (w == WORK_LOST && !h->dropped)
        fprintf(stderr, "resil gateway: key '%s': lease %llu lost; %s\n", h->key,
                (unsigned long long)h->lease,
                h->unsaved ? "its unsaved answer is discarded"
                           : "the answer of the call under way will be refused");
    /* An answer handed over meanwhile (unsaved) is retried soon, not at the
     * next renewal. */
    if (w == WORK_LOST)
        h->lost = true;
    else if (w == WORK_RENEWED && !h->unsaved)
        h->due = mono_ns() + renew_every(gw);
    else
        h->due = mono_ns() + renew_retry(gw);
    bool done = h->dropped || (h->unsaved && (w == WORK_SAVED || w == WORK_LOST));
    if (done) {
        hold_unlink(L, h);
        hold_free(h);
    }
}

static void wait_until(struct gw_leases *L, int64_t when)
{
    struct timespec ts = {(time_t)(when / 1000000000), (long)(when % 1000000000)};
    pthread_cond_timedwait(&L->wake, &L->mu, &ts);
}

static void *renewer(void *arg)
{
    gateway *gw = arg;
    struct gw_leases *L = gw->leases;
    pthread_mutex_lock(&L->mu);
    while (!L->stop) {
        int64_t earliest;
        gw_hold *h = next_due(L, mono_ns(), &earliest);
        if (h == NULL) {
            wait_until(L, earliest);
            continue;
        }
        h->busy = true;
        bool unsaved = h->unsaved;
        pthread_mutex_unlock(&L->mu);
        work_result w = work_on(gw, h, unsaved);
        pthread_mutex_lock(&L->mu);
        settle(gw, L, h, w);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

int gw_rules_start(gateway *gw)
{
    struct gw_leases *L = calloc(1, sizeof *L);
    if (L == NULL)
        return -1;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->wake, &attr);
    pthread_condattr_destroy(&attr);
    gw->leases = L;
    if (pthread_create(&L->thread, NULL, renewer, gw) != 0) {
        pthread_cond_destroy(&L->wake);
        pthread_mutex_destroy(&L->mu);
        free(L);
        gw->leases = NULL;
        return -1;
    }
    return 0;
}

/* After the requests are done: one last try for the unsaved answers. */
void gw_rules_stop(gateway *gw)
{
    struct gw_leases *L = gw->leases;
    if (L == NULL)
        return;
    pthread_mutex_lock(&L->mu);
    L->stop = true;
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->thread, NULL);
    unsigned lost = 0;
    while (L->head != NULL) {
        gw_hold *h = L->head;
        if (h->unsaved && work_on(gw, h, true) != WORK_SAVED)
            lost++;
        hold_unlink(L, h);
        hold_free(h);
    }
    if (lost > 0)
        fprintf(stderr, "resil gateway: %u answer%s could not be saved; %s answer 409 until "
                        "the lease ends, then an unknown outcome\n",
                lost, lost == 1 ? "" : "s", lost == 1 ? "its key" : "their keys");
    pthread_cond_destroy(&L->wake);
    pthread_mutex_destroy(&L->mu);
    free(L);
    gw->leases = NULL;
}

/* ---- forwarding (loop) ----------------------------------------------------- */

static gw_req *req_of_call(gw_call *c)
{
    return (gw_req *)(void *)((char *)c - offsetof(gw_req, call));
}

static void forwarded(gw_call *c)
{
    gw_req *r = req_of_call(c);
    if (r->up.curl_code != 0 && r->up.refused == NULL)
        snprintf(r->note, sizeof r->note, "upstream_error=\"%s\"", r->up.error);
    r->forwarded(r);
}

/* once: a guarded request, which the client must not send a second time
 * on its own — unless the upstream recognises a repeated key. `then` runs on
 * the loop once r->up holds the reply. */
static void forward(gw_req *r, bool once, gw_step then)
{
    if (gw_stopping(r->gw)) { /* a claim back after the drain: nothing leaves */
        r->result = MHD_NO;
        gw_answered(r);
        return;
    }
    gw_forward f = {.method = r->method, .target = r->target,
                    .client_ip = gw_client_ip(r, r->conn),
                    .body = r->body.p, .body_len = r->body.len, .conn = r->conn,
                    .once = once && !r->gw->cfg.upstream_dedupes};
    r->forwarded = then;
    gw_upstream_start(r->upstream, &r->call, &f, &r->up, forwarded);
}

/* ---- a pass-through: on the loop, unless the fleet's permits are asked ---- */

static void pass_answer(gw_req *r)
{
    r->result = gw_send_reply(r, r->conn, r->method, &r->up);
    gw_reply_free(&r->up);
    gw_answered(r);
}

static void fleet_leave(gw_req *r) { gw_upstream_leave(&r->call); }

static void pass_forwarded(gw_req *r)
{
    if (r->gw->limit != NULL)
        gw_to_pool(r, fleet_leave, pass_answer);
    else
        pass_answer(r);
}

static void fleet_admit(gw_req *r)
{
    r->go_forward = gw_upstream_admit(r->gw, &r->call, &r->up);
}

static void pass_admitted(gw_req *r)
{
    if (!r->go_forward)
        pass_answer(r); /* refused: nothing was sent, nothing to give back */
    else
        forward(r, false, pass_forwarded);
}

void gw_pass_through(gw_req *r)
{
    if (r->gw->limit != NULL) {
        gw_to_pool(r, fleet_admit, pass_admitted);
        return;
    }
    forward(r, false, pass_forwarded);
}

/* ---- the store's calls, from the loop ------------------------------------- */

/* A keyed request makes one store call at a time: begin, then complete
 * (once more after a refusal) or release. With group commit on (the
 * default) the loop submits the call's asynchronous form and the store's
 * thread hands the result straight back to the loop, no worker between;
 * with batching off (--batch-max 1) there is no asynchronous form, and a
 * worker makes the blocking call. Either way the next step runs on the
 * loop with r->store_rc, r->store_err and, for begin, r->res. */
enum store_op { OP_BEGIN, OP_COMPLETE, OP_RELEASE };

/* store thread: the call's result, back to the request's loop. */
static void store_called(int rc, const resil_err *err, void *ud)
{
    gw_req *r = ud;
    r->store_rc = rc;
    if (rc != 0 && err != NULL)
        r->store_err = *err;
    gw_store_back(r);
}

static int store_submit(gw_req *r, resil_err *err)
{
    resil_store *s = r->gw->store;
    if (r->store_op == OP_BEGIN)
        return resil_store_begin_async(s, &r->k, r->hash, &r->res, store_called, r, err);
    if (r->store_op == OP_COMPLETE)
        return resil_store_complete_async(s, &r->k, r->lease, &r->resp, store_called, r, err);
    return resil_store_release_async(s, &r->k, r->lease, store_called, r, err);
}

/* worker, with batching off: the blocking call. */
static void store_blocking(gw_req *r)
{
    resil_store *s = r->gw->store;
    resil_err *err = &r->store_err;
    if (r->store_op == OP_BEGIN)
        r->store_rc = resil_store_begin(s, &r->k, r->hash, &r->res, err);
    else if (r->store_op == OP_COMPLETE)
        r->store_rc = resil_store_complete(s, &r->k, r->lease, &r->resp, err);
    else
        r->store_rc = resil_store_release(s, &r->k, r->lease, err);
}

/* loop: make r's store call `op`, then `then` on the loop. Nothing of r is
 * written once the call is submitted: its callback may run at once. */
static void store_call(gw_req *r, enum store_op op, gw_step then)
{
    r->store_op = (int)op;
    r->store_rc = 0;
    r->store_err = (resil_err){0};
    if (r->gw->cfg.batch_max < 2) {
        gw_to_pool(r, store_blocking, then);
        return;
    }
    if (!gw_store_enter(r, then))
        return;
    resil_err err = {0};
    int rc = store_submit(r, &err);
    if (rc == 0)
        return;
    r->store_rc = rc;
    r->store_err = err;
    gw_store_back(r);
}

/* ---- saving an outcome (loop) -------------------------------------------- */

/* The run lost its key (taken over after its lease ran out): its answer
 * is not the key's. The client's retry gets whatever the key holds. */
static enum MHD_Result fenced(gw_req *r, int status, const resil_err *err)
{
    r->idem = "fenced";
    fprintf(stderr, "resil gateway: key '%s': lease %llu was taken over; this run's answer "
                    "(%d) is discarded: %s\n",
            r->k.key, (unsigned long long)r->lease, status, err->message);
    return gw_send_error(r, r->conn, r->method, 409, "request_in_progress",
                         "another run took this Idempotency-Key over; retry for its answer",
                         RETRY_AFTER);
}

/* The answer could not be saved: never answered as done. */
static enum MHD_Result unsaved(gw_req *r, const resil_store_response *resp, int rc,
                               const resil_err *err)
{
    r->idem = "unsaved";
    fprintf(stderr, "resil gateway: key '%s': saving the answer (%d) failed: %s\n", r->k.key,
            resp->status, err->message);
    if (r->hold == NULL || !hold_keep_unsaved(r->gw, r->hold, resp))
        fprintf(stderr, "resil gateway: key '%s': out of memory; the answer is lost\n",
                r->k.key);
    r->hold = NULL;
    if (rc == RESIL_EBUSY || rc == RESIL_ENOMEM)
        return gw_send_error(r, r->conn, r->method, 503, "store_unavailable",
                             "the upstream answered but the answer could not be saved yet; "
                             "retry with the same Idempotency-Key to get it",
                             RETRY_AFTER);
    return gw_send_error(r, r->conn, r->method, 500, "store_error",
                         "the upstream answered but the idempotency store refused to save "
                         "the answer",
                         NULL);
}

static void saved(gw_req *r);

/* Save r->resp as the key's answer; it is sent once it is durable. */
static void save(gw_req *r) { store_call(r, OP_COMPLETE, saved); }

static void save_unknown(gw_req *r)
{
    r->idem = "unknown";
    save(r);
}

/* The store refuses this answer for good (a data or constraint error), not
 * for now: keep what is known instead, an outcome the client cannot get. */
static void save_refused(gw_req *r)
{
    fprintf(stderr, "resil gateway: key '%s': the store refused the answer (%d): %s; saving "
                    "an unknown outcome\n",
            r->k.key, r->resp.status, r->store_err.message);
    r->refused_for_good = true;
    unknown_of(r, 502, "upstream_answer_refused",
               "the upstream answered but the idempotency store refused to keep the answer");
    save_unknown(r);
}

/* loop: complete has spoken. */
static void saved(gw_req *r)
{
    gateway *gw = r->gw;
    int rc = r->store_rc;
    const resil_store_response *resp = &r->resp;
    bool for_now = rc == RESIL_EBUSY || rc == RESIL_ENOMEM;
    if (rc != 0 && rc != RESIL_ESTATE && !for_now && !r->refused_for_good) {
        save_refused(r);
        return;
    }
    if (rc != 0 && rc != RESIL_ESTATE) {
        r->result = unsaved(r, resp, rc, &r->store_err);
    } else {
        if (r->hold != NULL)
            hold_drop(gw, r->hold);
        r->hold = NULL;
        if (rc == RESIL_ESTATE) {
            r->result = fenced(r, resp->status, &r->store_err);
        } else {
            gw_answer a = {.status = resp->status, .headers = resp->headers,
                           .headers_len = resp->headers_len, .body = resp->body,
                           .body_len = resp->body_len};
            r->result = gw_send_answer(r, r->conn, r->method, &a);
        }
    }
    gw_reply_free(&r->up);
    gw_answered(r);
}

/* loop: the key is given back (or could not be: it stays held until its
 * lease ends). The answer was made before. */
static void released(gw_req *r)
{
    if (r->store_rc != 0)
        fprintf(stderr, "resil gateway: key '%s': release failed: %s\n", r->k.key,
                r->store_err.message);
    gw_answered(r);
}

/* Give the key back, and pass on what the upstream said (or that a fleet
 * limit refused it) once the key is free again. */
static void release_and_send(gw_req *r)
{
    if (r->hold != NULL)
        hold_drop(r->gw, r->hold);
    r->hold = NULL;
    r->idem = "released";
    r->result = gw_send_reply(r, r->conn, r->method, &r->up);
    gw_reply_free(&r->up);
    store_call(r, OP_RELEASE, released);
}

/* loop, after the upstream call (and the fleet's permits given back):
 * save what it answered, save "unknown", or release the key, by fate_of(). */
static void settle_first(gw_req *r)
{
    gw_reply *up = &r->up;
    fate fa = fate_of(&r->gw->cfg, up);
    if (fa == FATE_RELEASE) {
        release_and_send(r);
    } else if (fa == FATE_UNKNOWN) {
        unknown_of_reply(r, up);
        save_unknown(r);
    } else {
        r->resp = (resil_store_response){.status = (int)up->status, .headers = up->headers.p,
                                         .headers_len = up->headers.len, .body = up->body.p,
                                         .body_len = up->body.len};
        save(r);
    }
}

/* loop: the upstream answered (or did not): give the fleet's permits back
 * (Redis: on a worker), then settle the key. */
static void first_forwarded(gw_req *r)
{
    if (r->gw->limit != NULL)
        gw_to_pool(r, fleet_leave, settle_first);
    else
        settle_first(r);
}

/* A takeover: the key's previous holder vanished without saving an answer,
 * possibly after forwarding. Running it again could run it twice. */
static void run_takeover(gw_req *r)
{
    fprintf(stderr, "resil gateway: key '%s': taken over (lease %llu) from a run that ended "
                    "without an answer; saved as an unknown outcome\n",
            r->k.key, (unsigned long long)r->lease);
    unknown_of(r, 502, "upstream_outcome_unknown",
               "the gateway that forwarded this request stopped before saving the answer");
    save_unknown(r);
}

/* loop: the fleet has admitted the call, or refused it (nothing left). */
static void first_admitted(gw_req *r)
{
    if (!r->go_forward)
        release_and_send(r);
    else
        forward(r, true, first_forwarded);
}

/* loop: the key is ours: hold it (renewed until its outcome is saved),
 * then forward it (once the fleet admits it), or settle a takeover. */
static void own_key(gw_req *r)
{
    gateway *gw = r->gw;
    r->idem = "first";
    r->hold = hold_add(gw, &r->k, r->lease);
    if (r->hold == NULL) {
        r->idem = "released";
        r->result = gw_send_error(r, r->conn, r->method, 503, "out_of_memory",
                                  "the gateway is out of memory; retry later", RETRY_AFTER);
        store_call(r, OP_RELEASE, released);
        return;
    }
    if (r->taken_over && !gw->cfg.upstream_dedupes) {
        run_takeover(r);
        return;
    }
    if (gw->limit != NULL)
        gw_to_pool(r, fleet_admit, first_admitted);
    else
        forward(r, true, first_forwarded);
}

/* loop: the store's verdict on the key. */
static void begun(gw_req *r)
{
    resil_store_result *res = &r->res;
    if (r->store_rc != 0) {
        r->result = store_failed(r, r->conn, r->method, r->store_rc, &r->store_err);
    } else if (res->verdict == RESIL_STORE_FIRST) {
        r->lease = res->lease;
        r->taken_over = res->taken_over;
        resil_store_result_free(res);
        own_key(r);
        return;
    } else if (res->verdict == RESIL_STORE_REPLAY) {
        r->idem = "replay";
        gw_answer a = {.status = res->status, .headers = res->headers,
                       .headers_len = res->headers_len, .body = res->body,
                       .body_len = res->body_len, .replayed = true};
        r->result = gw_send_answer(r, r->conn, r->method, &a);
    } else if (res->verdict == RESIL_STORE_IN_PROGRESS) {
        r->idem = "in-progress";
        r->result = gw_send_error(r, r->conn, r->method, 409, "request_in_progress",
                                  "a request with this Idempotency-Key is still being "
                                  "processed; retry later",
                                  RETRY_AFTER);
    } else {
        r->idem = "mismatch";
        r->result = gw_send_error(r, r->conn, r->method, 422, "idempotency_key_reused",
                                  "this Idempotency-Key was used with a different request",
                                  NULL);
    }
    resil_store_result_free(res);
    gw_answered(r);
}

/* loop: the key and the tenant; false when answered (refused). */
static bool key_of(gw_req *r)
{
    gateway *gw = r->gw;
    const char *tenant = "";
    if (gw->cfg.tenant_header != NULL) {
        tenant = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, gw->cfg.tenant_header);
        if (tenant == NULL || *tenant == '\0' || strlen(tenant) > RESIL_STORE_FIELD_MAX) {
            r->idem = "bad-tenant";
            r->result = gw_send_error(r, r->conn, r->method, 400, "tenant_required",
                                      "this gateway needs a tenant header of 1 to 255 bytes",
                                      NULL);
            return false;
        }
    }
    if (*r->key == '\0' || strlen(r->key) > RESIL_STORE_FIELD_MAX) {
        r->idem = "bad-key";
        r->result = gw_send_error(r, r->conn, r->method, 400, "invalid_idempotency_key",
                                  "Idempotency-Key must be 1 to 255 bytes", NULL);
        return false;
    }
    r->k = (resil_store_key){.tenant = tenant, .operation = gw->cfg.operation, .key = r->key};
    return true;
}

/* loop: a replay or a mismatch the store's replay cache holds is answered
 * here, on the loop, with no store thread and no wake-up between; false
 * when the begin must be made. */
static bool begun_from_cache(gw_req *r)
{
    resil_err err = {0};
    if (resil_store_begin_cached(r->gw->store, &r->k, r->hash, &r->res, &err) != 0 ||
        r->res.verdict == RESIL_STORE_NONE)
        return false;
    r->store_rc = 0;
    begun(r);
    return true;
}

void gw_guarded(gw_req *r)
{
    if (!key_of(r)) {
        gw_answered(r);
        return;
    }
    resil_store_request_hash(r->method, r->target, r->body.p, r->body.len, r->hash);
    resil_store_result_init(&r->res);
    if (!begun_from_cache(r))
        store_call(r, OP_BEGIN, begun);
}

/* ---- the journal and the main thread's timer --------------------------- */

const char *gw_journal_path(const gw_config *cfg, char *buf, size_t cap)
{
    if (cfg->journal != NULL)
        return strcmp(cfg->journal, "off") == 0 ? NULL : cfg->journal;
    const char *url = cfg->store_url;
    if (strncmp(url, "sqlite:", 7) != 0 || strcmp(url, "sqlite::memory:") == 0)
        return NULL;
    int n = snprintf(buf, cap, "%s.resil-journal", url + 7);
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

static bool stats_equal(const resil_store_journal_stats *a, const resil_store_journal_stats *b)
{
    return a->pending == b->pending && a->written == b->written &&
           a->replayed == b->replayed && a->conflicts == b->conflicts;
}

resil_duration gw_rules_tick(gateway *gw)
{
    struct gw_leases *L = gw->leases;
    resil_store_journal_stats st;
    resil_store_journal_stats_get(gw->store, &st);
    if (L == NULL)
        return RESIL_S(1);
    if (st.pending > 0) {
        resil_err err = {0};
        bool failed = resil_store_journal_replay(gw->store, NULL, &err) != 0;
        if (failed && !L->replay_failing)
            fprintf(stderr, "resil gateway: journal replay: %s\n", err.message);
        L->replay_failing = failed;
        resil_store_journal_stats_get(gw->store, &st);
    }
    if (!stats_equal(&st, &L->logged)) {
        fprintf(stderr, "resil gateway: journal: %zu pending, %llu written, %llu replayed, "
                        "%llu conflicts\n",
                st.pending, (unsigned long long)st.written, (unsigned long long)st.replayed,
                (unsigned long long)st.conflicts);
        L->logged = st;
    }
    return st.pending > 0 ? RESIL_MS(200) : RESIL_S(1);
}
