/*
 * classify.c — which HTTP attempts are worth another try: the method rules
 * and the status/transfer-error table.
 *
 * Pure functions of what an attempt produced, so the table is tested row by
 * row without a network — but for one question only the handle answers
 * (was a request sent before an answer libcurl could not read?), which
 * Microsoft's table asks of r->easy when there is one. A transfer error is
 * judged before any status, because a status that arrived over a transfer
 * that then broke (a 200 whose body was cut off) describes a response the
 * caller never fully got.
 *
 * Microsoft's standard handler has a predicate of its own, which the
 * microsoft-standard profile reproduces: it is a second table beside
 * resil's, sharing the transfer-error and detail code, so each reads as
 * its source states it.
 *
 * A failure status marked `Idempotent-Outcome: unknown` (resil gateway's
 * 502/504 when an upstream call's answer was lost) is a final answer, not
 * a transient failure: the server saved it for the key and replays it on
 * every retry, so retrying only spends attempts on the same bytes.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "head.h"
#include "resil/http.h"

/* ---- methods -------------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned bit;
} methods[] = {
    {"GET", RESIL_HTTP_GET},         {"HEAD", RESIL_HTTP_HEAD},
    {"OPTIONS", RESIL_HTTP_OPTIONS}, {"TRACE", RESIL_HTTP_TRACE},
    {"PUT", RESIL_HTTP_PUT},         {"DELETE", RESIL_HTTP_DELETE},
    {"POST", RESIL_HTTP_POST},       {"PATCH", RESIL_HTTP_PATCH},
    {"CONNECT", RESIL_HTTP_CONNECT},
};

#define IDEMPOTENT_METHODS                                                    \
    (RESIL_HTTP_GET | RESIL_HTTP_HEAD | RESIL_HTTP_OPTIONS | RESIL_HTTP_TRACE | \
     RESIL_HTTP_PUT | RESIL_HTTP_DELETE)

static unsigned method_bit_n(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        if (strlen(methods[i].name) == len && memcmp(methods[i].name, name, len) == 0)
            return methods[i].bit;
    }
    return RESIL_HTTP_OTHER;
}

unsigned resil_http_method_bit(const char *method)
{
    return method != NULL ? method_bit_n(method, strlen(method)) : 0;
}

bool resil_http_method_retryable(const char *method, bool has_idempotency_key)
{
    if (method == NULL)
        return false;
    return (resil_http_method_bit(method) & IDEMPOTENT_METHODS) != 0 || has_idempotency_key;
}

int resil_http_methods_parse(const char *list, unsigned *out)
{
    if (list == NULL || out == NULL || *list == '\0')
        return RESIL_EINVAL;
    unsigned bits = 0;
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        if (!resil__http_token(p, n))
            return RESIL_EINVAL;
        bits |= method_bit_n(p, n);
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    *out = bits;
    return 0;
}

/* ---- transfer errors ------------------------------------------------------- */

/* Errors of the path to the server, which a later attempt may not meet. */
static bool transient_transfer(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SSL_CONNECT_ERROR: /* a handshake cut off; certificate trouble has its own codes */
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_QUIC_CONNECT_ERROR:
    case CURLE_PROXY:
        return true;
    default:
        return false;
    }
}

/* Errors that mean the request could not be formed, which .NET raises
 * before sending (not as HttpRequestException): Microsoft's handler does
 * not retry them. Every other transfer error it does. */
static bool request_unformed(CURLcode c)
{
    switch (c) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_OUT_OF_MEMORY:
        return true;
    default:
        return false;
    }
}

/* libcurl reports an answer without a status line (HTTP/0.9, or bytes
 * that are no HTTP at all) as an unsupported protocol, as it does a URL
 * scheme it cannot speak; only the first comes after a request was sent
 * and before any status: .NET raises it as HttpRequestException. */
static bool answer_unreadable(const resil_http_response *r)
{
    long sent = 0;
    return r->curl_code == CURLE_UNSUPPORTED_PROTOCOL && r->status == 0 && r->easy != NULL &&
           curl_easy_getinfo(r->easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent > 0;
}

static bool transient_path(const resil_http_response *r)
{
    return transient_transfer(r->curl_code);
}

static bool transient_for_microsoft(const resil_http_response *r)
{
    return !request_unformed(r->curl_code) || answer_unreadable(r);
}

static resil_outcome transfer_outcome(const resil_http_response *r,
                                      bool (*transient)(const resil_http_response *))
{
    char detail[RESIL_DETAIL_MAX];
    snprintf(detail, sizeof detail, "curl %d: %s", (int)r->curl_code,
             curl_easy_strerror(r->curl_code));
    resil_kind k = RESIL_PERMANENT;
    if (r->curl_code == CURLE_OPERATION_TIMEDOUT)
        k = RESIL_TIMEOUT;
    else if (r->curl_code == CURLE_ABORTED_BY_CALLBACK)
        k = RESIL_CANCELLED;
    else if (transient(r))
        k = RESIL_TRANSIENT;
    return resil_fail(k, (int64_t)r->curl_code, detail);
}

/* ---- statuses --------------------------------------------------------------- */

static resil_kind status_kind(const resil_http_response *r, bool retry_500)
{
    switch (r->status) {
    case 429:
        return RESIL_THROTTLED;
    case 408:
    case 502:
    case 503:
    case 504:
        return RESIL_TRANSIENT;
    case 500:
        return retry_500 ? RESIL_TRANSIENT : RESIL_PERMANENT;
    case 409: /* "still processing this key": the key's first request is running */
        return r->idempotency_key && r->retry_after >= 0 ? RESIL_TRANSIENT
                                                         : RESIL_PERMANENT;
    default:
        return RESIL_PERMANENT;
    }
}

static resil_kind microsoft_status_kind(long status)
{
    if (status == 429)
        return RESIL_THROTTLED;
    return status >= 500 || status == 408 ? RESIL_TRANSIENT : RESIL_PERMANENT;
}

/* The rows both tables share: a transfer error first (with CURLOPT_FAILONERROR
 * libcurl reports a status >= 400 as an error of its own; the status says
 * more), then a success. True when one of them answered. */
static bool before_status(const resil_http_response *r,
                          bool (*transient)(const resil_http_response *), resil_outcome *out)
{
    bool status_error = r->curl_code == CURLE_HTTP_RETURNED_ERROR && r->status >= 400;
    if (r->curl_code != CURLE_OK && !status_error) {
        *out = transfer_outcome(r, transient);
        return true;
    }
    if (r->status >= 400)
        return false;
    *out = resil_ok();
    out->code = r->status;
    return true;
}

static resil_outcome status_failure(const resil_http_response *r, resil_kind k)
{
    char detail[RESIL_DETAIL_MAX];
    snprintf(detail, sizeof detail, "HTTP %ld", r->status);
    return resil_fail_after(k, r->status, detail, r->retry_after);
}

resil_outcome resil_http_classify_microsoft(const resil_http_response *r, void *ud)
{
    (void)ud;
    resil_outcome o;
    if (before_status(r, transient_for_microsoft, &o))
        return o;
    return status_failure(r, microsoft_status_kind(r->status));
}

resil_outcome resil_http_classify(const resil_http_response *r, bool retry_500)
{
    resil_outcome o;
    if (before_status(r, transient_path, &o))
        return o;
    char detail[RESIL_DETAIL_MAX];
    if (r->outcome_unknown) {
        snprintf(detail, sizeof detail, "HTTP %ld, outcome unknown", r->status);
        return resil_fail(RESIL_PERMANENT, r->status, detail);
    }
    return status_failure(r, status_kind(r, retry_500));
}

resil_outcome resil_http_classify_default(const resil_http_response *r, void *ud)
{
    (void)ud;
    return resil_http_classify(r, true);
}

/* ---- wait hints ------------------------------------------------------------- */

static bool names_milliseconds(const char *name)
{
    size_t n = strlen(name);
    return n >= 3 && strcasecmp(name + n - 3, "-ms") == 0;
}

int resil_http_retry_after_value(const char *name, const char *value, int64_t wall_now_ns,
                                 resil_duration *out)
{
    if (name == NULL || out == NULL)
        return RESIL_EINVAL;
    if (value == NULL)
        return RESIL_ESYNTAX;
    if (names_milliseconds(name))
        return resil_retry_after_ms_parse(value, strlen(value), out);
    return resil_retry_after_parse(value, strlen(value), wall_now_ns, out);
}
