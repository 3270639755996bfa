/*
 * opts.c — the HTTP client's options: the three profiles and validation.
 *
 * A profile is nothing but a set of option values, written out here in one
 * place per profile so that docs/http.md's table can be checked against
 * code that reads the same. The standard profile has Microsoft's standard
 * handler's strategies, order and numbers with resil's safer predicate;
 * microsoft-standard is that handler exactly, predicate and all; read and
 * write are the two typed clients of the ".NET 10 HTTP resilience" article
 * (read as its diagram draws it). Validation names the first bad field
 * and defers to the core's own validators for the embedded retry policy and
 * breaker options, so a message is never worded twice.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "resil/hedge.h"
#include "resil/http.h"
#include "resil/pipeline.h"
#include "head.h"
#include "route_internal.h"

#define MiB ((size_t)1 << 20)

const char *resil_http_profile_name(resil_http_profile p)
{
    switch (p) {
    case RESIL_HTTP_STANDARD:
        return "standard";
    case RESIL_HTTP_READ:
        return "read";
    case RESIL_HTTP_WRITE:
        return "write";
    case RESIL_HTTP_MICROSOFT:
        return "microsoft-standard";
    case RESIL_HTTP_MICROSOFT_HEDGING:
        return "microsoft-hedging";
    }
    return "unknown";
}

int resil_http_profile_parse(const char *name, resil_http_profile *out)
{
    static const resil_http_profile all[] = {RESIL_HTTP_STANDARD, RESIL_HTTP_READ,
                                             RESIL_HTTP_WRITE, RESIL_HTTP_MICROSOFT,
                                             RESIL_HTTP_MICROSOFT_HEDGING};
    if (name == NULL || out == NULL)
        return RESIL_EINVAL;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcasecmp(name, resil_http_profile_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return RESIL_EINVAL;
}

/* Microsoft's standard handler, whose numbers the core's standard pipeline
 * already holds (1000 concurrent calls, total 30 s, 3 retries exponential
 * from 2 s with jitter and Retry-After, breaker at a 10 % failure ratio
 * over 30 s once 100 calls were seen, 5 s break, attempt 10 s): taken from
 * there, so the two cannot drift apart. A request that may not be retried
 * runs once rather than being refused. */
static void standard(resil_http_opts *o)
{
    resil_standard_opts s;
    resil_standard_opts_default(&s);
    o->max_concurrency = (uint32_t)s.concurrency.max_concurrency;
    o->total_timeout = s.total.timeout;
    o->retry = s.retry;
    o->retry.unsafe_mode = RESIL_UNSAFE_RUN_ONCE;
    o->breakers = true;
    o->breaker = s.breaker;
    o->attempt_timeout = s.attempt.timeout;
    o->hedge_delay = -1;
    o->max_hedged = 1;
    o->retry_500 = true;
    o->classify = NULL;
    o->classify_ud = NULL;
    o->disable_for = 0;
    o->retry_unsafe = false;
}

/* Microsoft's handler exactly: the same numbers, its predicate (every
 * status >= 500, 408, 429, transport failures) and every method retried
 * unless the caller disables some (DisableFor, DisableForUnsafeHttpMethods). */
static void microsoft(resil_http_opts *o)
{
    standard(o);
    o->classify = resil_http_classify_microsoft;
    o->retry_unsafe = true;
}

/* Microsoft's standard hedging handler: its total timeout, then hedging
 * in place of the retry (one hedge after 2 s), then the breaker and the
 * attempt timeout per endpoint, with the standard handler's predicate and
 * limits. */
static void microsoft_hedging(resil_http_opts *o)
{
    microsoft(o);
    o->retry.max_attempts = 1;
    o->hedge_delay = RESIL_S(2);
    o->max_hedged = 1;
}

/* The article's read client as its diagram draws it: aggressive retries
 * (3), a fast attempt timeout (500 ms), a hedging candidate (one hedge
 * after half the attempt timeout), unsafe methods disabled; from its
 * registration, the 2 s total and the 100 ms first wait. */
static void read_profile(resil_http_opts *o)
{
    standard(o);
    o->total_timeout = RESIL_S(2);
    o->attempt_timeout = RESIL_MS(500);
    o->retry.max_attempts = 4;
    o->retry.backoff.base = RESIL_MS(100);
    o->hedge_delay = RESIL_MS(250);
    o->max_hedged = 1;
    o->disable_for = RESIL_HTTP_UNSAFE_METHODS;
}

/* The article's write client: total 6 s, attempt 2 s, unsafe methods never
 * retried (DisableForUnsafeHttpMethods), breaker at 20 % over 30 s once 15
 * calls were seen, 10 s break. */
static void write_profile(resil_http_opts *o)
{
    standard(o);
    o->total_timeout = RESIL_S(6);
    o->attempt_timeout = RESIL_S(2);
    o->disable_for = RESIL_HTTP_UNSAFE_METHODS;
    o->breaker.failure_ratio = 0.2;
    o->breaker.minimum_throughput = 15;
    o->breaker.sampling_duration = RESIL_S(30);
    o->breaker.break_duration = RESIL_S(10);
}

void resil_http_opts_default(resil_http_opts *o)
{
    memset(o, 0, sizeof *o);
    o->name = "http";
    o->max_authorities = 1024;
    o->body_buffer_max = 16 * MiB;
    standard(o);
}

int resil_http_opts_profile(resil_http_opts *o, resil_http_profile p)
{
    if (o == NULL)
        return RESIL_EINVAL;
    switch (p) {
    case RESIL_HTTP_STANDARD:
        standard(o);
        return 0;
    case RESIL_HTTP_READ:
        read_profile(o);
        return 0;
    case RESIL_HTTP_WRITE:
        write_profile(o);
        return 0;
    case RESIL_HTTP_MICROSOFT:
        microsoft(o);
        return 0;
    case RESIL_HTTP_MICROSOFT_HEDGING:
        microsoft_hedging(o);
        return 0;
    }
    return RESIL_EINVAL;
}

/* "FIELD must be RULE, got D" with D in the duration parser's units, as
 * the core words it (the core's helper is internal to libresil). */
static int bad_duration(resil_err *err, const char *field, const char *rule, resil_duration d)
{
    char text[32];
    resil_duration_format(d, text, sizeof text);
    return resil_err_set(err, RESIL_EINVAL, "%s must be %s, got %s", field, rule, text);
}

/* The bulkhead counts calls in an int32_t. */
static int check_concurrency(const resil_http_opts *o, resil_err *err)
{
    if (o->max_concurrency > INT32_MAX)
        return resil_err_set(err, RESIL_EINVAL,
                             "http.max_concurrency must be at most %d (0 = unlimited), got %u",
                             INT32_MAX, (unsigned)o->max_concurrency);
    return 0;
}

static int check_hint_headers(const resil_http_opts *o, resil_err *err)
{
    for (size_t i = 0; o->retry_after_headers != NULL && o->retry_after_headers[i] != NULL;
         i++) {
        const char *name = o->retry_after_headers[i];
        if (!resil__http_token(name, strlen(name)))
            return resil_err_set(err, RESIL_EINVAL,
                                 "http.retry_after_headers[%zu] must be a header name "
                                 "(letters, digits and !#$%%&'*+-.^_`|~), got \"%.64s\"",
                                 i, name);
    }
    return 0;
}

static int check_timeouts(const resil_http_opts *o, resil_err *err)
{
    if (o->total_timeout < 0)
        return bad_duration(err, "http.total_timeout", ">= 0 (0 = none)", o->total_timeout);
    if (o->attempt_timeout < 0)
        return bad_duration(err, "http.attempt_timeout", ">= 0 (0 = none)",
                            o->attempt_timeout);
    if (o->total_timeout > 0 && o->attempt_timeout > o->total_timeout)
        return resil_err_set(err, RESIL_EINVAL,
                             "http.attempt_timeout must not exceed http.total_timeout");
    return 0;
}

static int check_hedging(const resil_http_opts *o, resil_err *err)
{
    if (o->hedge_delay < -1)
        return bad_duration(err, "http.hedge_delay", ">= 0 (or -1 = no hedging)",
                            o->hedge_delay);
    if (o->hedge_delay >= 0 && (o->max_hedged < 1 || o->max_hedged > RESIL_HEDGE_MAX))
        return resil_err_set(err, RESIL_EINVAL, "http.max_hedged must be in [1, %d], got %u",
                             RESIL_HEDGE_MAX, (unsigned)o->max_hedged);
    resil_err inner = {0, ""};
    if (o->hedge_route == NULL)
        return 0;
    if (resil_route_opts_validate(o->hedge_route, &inner) != 0)
        return resil_err_set(err, RESIL_EINVAL, "http.hedge_%s", inner.message);
    /* the calls rewrite the request's URL for each endpoint and key its
     * breaker by its authority: one they could not follow is refused now */
    const resil_route_opts *r = o->hedge_route;
    for (size_t g = 0; g < r->ngroups; g++) {
        for (size_t e = 0; e < r->groups[g].len; e++) {
            const char *url = r->groups[g].endpoints[e].url;
            if (!resil__http_route_endpoint_ok(url))
                return resil_err_set(err, RESIL_EINVAL,
                                     "http.hedge_route.groups[%zu].endpoints[%zu].url must be "
                                     "scheme://host[:port] under %d bytes, got \"%.64s\"",
                                     g, e, RESIL_BREAKER_NAME_MAX, url);
        }
    }
    return 0;
}

static int check_nested(const resil_http_opts *o, resil_err *err)
{
    resil_err inner = {0, ""};
    int rc = resil_retry_policy_validate(&o->retry, &inner);
    if (rc != 0)
        return resil_err_set(err, rc, "http.%s", inner.message);
    if (o->retry.max_total != 0)
        return bad_duration(err, "http.retry.max_total",
                            "0 (http.total_timeout bounds the call)", o->retry.max_total);
    if (o->breakers && o->registry == NULL) {
        rc = resil_breaker_opts_validate(&o->breaker, &inner);
        if (rc != 0)
            return resil_err_set(err, rc, "http.%s", inner.message);
        if (o->max_authorities < 1 || o->max_authorities > RESIL_REGISTRY_MAX_LIMIT)
            return resil_err_set(err, RESIL_EINVAL,
                                 "http.max_authorities must be in [1, %u], got %u",
                                 (unsigned)RESIL_REGISTRY_MAX_LIMIT,
                                 (unsigned)o->max_authorities);
    }
    return 0;
}

int resil_http_opts_validate(const resil_http_opts *o, resil_err *err)
{
    if (o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "http: options must not be NULL");
    if (o->name == NULL || o->name[0] == '\0' || strlen(o->name) >= 64)
        return resil_err_set(err, RESIL_EINVAL, "http.name must be 1 to 63 bytes");
    int rc = check_concurrency(o, err);
    if (rc == 0)
        rc = check_timeouts(o, err);
    if (rc == 0)
        rc = check_hedging(o, err);
    if (rc == 0)
        rc = check_nested(o, err);
    if (rc == 0)
        rc = check_hint_headers(o, err);
    if (rc != 0)
        return rc;
    if (o->disable_for > (RESIL_HTTP_OTHER << 1) - 1)
        return resil_err_set(err, RESIL_EINVAL,
                             "http.disable_for must be RESIL_HTTP_* method bits, got %#x",
                             o->disable_for);
    if (o->body_buffer_max < 1)
        return resil_err_set(err, RESIL_EINVAL, "http.body_buffer_max must be >= 1, got 0");
    return 0;
}
