/*
 * gateway_rules.c — the idempotency rules `resil gateway` applies to a
 * guarded request, apart from the listening side (gateway_http.c) that
 * frames requests and answers.
 *
 * The rules live in one function (gw_guarded()) that reads like the
 * protocol: first -> forward and save (or release on a failure the client
 * should retry), replay -> the saved answer, in progress -> 409,
 * mismatch -> 422.
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"

bool gw_guarded_method(const gw_config *cfg, const char *method)
{
    for (size_t i = 0; i < cfg->n_methods; i++) {
        if (strcmp(cfg->methods[i], method) == 0)
            return true;
    }
    return false;
}

/* Answers the client should retry were not a result: give the key back. */
static bool retry_worthy(const gw_reply *up)
{
    return up->curl_code != 0 || up->status >= 500 || up->status == 408 ||
           up->status == 429;
}

static void forward(gw_req *r, struct MHD_Connection *conn, const char *method,
                    gw_reply *up)
{
    char ip[64];
    gw_client_ip(conn, ip, sizeof ip);
    gw_forward f = {.method = method, .target = r->target, .client_ip = ip,
                    .body = r->body.p, .body_len = r->body.len, .conn = conn};
    gw_upstream_send(r->gw, &f, up);
    if (up->curl_code != 0)
        snprintf(r->note, sizeof r->note, "upstream_error=\"%s\"", up->error);
}

enum MHD_Result gw_pass_through(gw_req *r, struct MHD_Connection *conn,
                                    const char *method)
{
    gw_reply up;
    forward(r, conn, method, &up);
    enum MHD_Result ret = gw_send_reply(r, conn, method, &up);
    gw_reply_free(&up);
    return ret;
}

/* First: run it upstream; save what it answered, or release the key. */
static enum MHD_Result run_first(gw_req *r, struct MHD_Connection *conn,
                                 const char *method, const resil_store_key *k,
                                 uint64_t lease)
{
    gateway *gw = r->gw;
    gw_reply up;
    resil_err err = {0};
    forward(r, conn, method, &up);
    if (retry_worthy(&up)) {
        r->idem = "released";
        if (resil_store_release(gw->store, k, lease, &err) != 0)
            fprintf(stderr, "resil gateway: release failed: %s\n", err.message);
    } else {
        resil_store_response saved = {.status = (int)up.status,
                                      .headers = up.headers.p,
                                      .headers_len = up.headers.len,
                                      .body = up.body.p,
                                      .body_len = up.body.len};
        if (resil_store_complete(gw->store, k, lease, &saved, &err) != 0)
            fprintf(stderr, "resil gateway: saving the response failed: %s\n",
                    err.message);
    }
    enum MHD_Result ret = gw_send_reply(r, conn, method, &up);
    gw_reply_free(&up);
    return ret;
}

enum MHD_Result gw_guarded(gw_req *r, struct MHD_Connection *conn,
                               const char *method, const char *key)
{
    gateway *gw = r->gw;
    const char *tenant = "";
    if (gw->cfg.tenant_header != NULL) {
        tenant = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, gw->cfg.tenant_header);
        if (tenant == NULL || *tenant == '\0' || strlen(tenant) > RESIL_STORE_FIELD_MAX) {
            r->idem = "bad-tenant";
            return gw_send_error(r, conn, method, 400, "tenant_required",
                              "this gateway needs a tenant header of 1 to 255 bytes", NULL);
        }
    }
    if (*key == '\0' || strlen(key) > RESIL_STORE_FIELD_MAX) {
        r->idem = "bad-key";
        return gw_send_error(r, conn, method, 400, "invalid_idempotency_key",
                          "Idempotency-Key must be 1 to 255 bytes", NULL);
    }
    uint8_t hash[RESIL_SHA256_LEN];
    resil_store_request_hash(method, r->target, r->body.p, r->body.len, hash);
    resil_store_key k = {.tenant = tenant, .operation = gw->cfg.operation, .key = key};
    resil_store_result res;
    resil_store_result_init(&res);
    resil_err err = {0};
    enum MHD_Result ret;
    if (resil_store_begin(gw->store, &k, hash, &res, &err) != 0) {
        r->idem = "store-error";
        fprintf(stderr, "resil gateway: %s\n", err.message);
        ret = gw_send_error(r, conn, method, 503, "store_unavailable",
                         "the idempotency store is unavailable; retry later", "1");
    } else if (res.verdict == RESIL_STORE_FIRST) {
        r->idem = "first";
        ret = run_first(r, conn, method, &k, res.lease);
    } else if (res.verdict == RESIL_STORE_REPLAY) {
        r->idem = "replay";
        gw_answer a = {.status = res.status, .headers = res.headers,
                    .headers_len = res.headers_len, .body = res.body,
                    .body_len = res.body_len, .replayed = true};
        ret = gw_send_answer(r, conn, method, &a);
    } else if (res.verdict == RESIL_STORE_IN_PROGRESS) {
        r->idem = "in-progress";
        ret = gw_send_error(r, conn, method, 409, "request_in_progress",
                         "a request with this Idempotency-Key is still being processed; "
                         "retry later",
                         "1");
    } else {
        r->idem = "mismatch";
        ret = gw_send_error(r, conn, method, 422, "idempotency_key_reused",
                         "this Idempotency-Key was used with a different request", NULL);
    }
    resil_store_result_free(&res);
    return ret;
}

