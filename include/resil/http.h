/*
 * http.h — resilience for libcurl: a drop-in for curl_easy_perform().
 *
 * libresil-http (its own library: -lresil-http -lresil -lcurl) runs an easy
 * handle the caller has already configured through a resilience pipeline,
 * re-performing it once per attempt. The caller keeps writing ordinary curl
 * code; only the perform call changes:
 *
 *     rc = curl_easy_perform(easy);
 * becomes
 *     resil_http_request req;
 *     resil_http_request_default(&req);
 *     req.method = "GET";
 *     resil_http_result res;
 *     rc = resil_http_perform(client, easy, &req, &res);
 *
 * A client is built once from options — a profile (standard, read, write,
 * microsoft-standard)
 * with the usual strategies in the standard order: concurrency limit →
 * total timeout → retry → (hedging, for safe methods when asked) →
 * per-authority circuit breaker → attempt timeout — and shared by every
 * thread.
 *
 * What the drop-in does to the handle, since libcurl cannot read options
 * back: for the duration of the call it takes over CURLOPT_WRITEFUNCTION/
 * WRITEDATA and TIMEOUT_MS, and as needed HEADERFUNCTION/HEADERDATA (when
 * the request names header callbacks), XFERINFOFUNCTION/XFERINFODATA and
 * NOPROGRESS (when there is a token to watch or a progress callback) and
 * HTTPHEADER (when it adds an Idempotency-Key). The request tells it the
 * caller's own values of those (NULL: libcurl's defaults), and it puts them
 * back before returning; TIMEOUT_MS is left at 0 (the client's timeouts
 * replace it). Each attempt's body and headers are buffered, and only the
 * final attempt's reach the caller's callbacks, so a failed attempt's error
 * page never mixes into the output. A body larger than body_buffer_max is
 * streamed instead, and the attempt it belongs to is then the last one (it
 * cannot be taken back); a hedged call buffers whole bodies, since its
 * winner is known only at the end. Retry-After is read from the headers
 * libcurl keeps (curl_easy_header, libcurl 7.84 or later). Everything else
 * on the handle — URL, method, body, TLS, proxies — is the caller's,
 * untouched and re-sent as is.
 *
 * Method safety follows RFC 9110 and Microsoft's handler: GET, HEAD,
 * OPTIONS, TRACE, PUT and DELETE may be retried; POST, PATCH (and any other
 * method) only when the request carries an Idempotency-Key header — the
 * caller's, or one generated once per logical request (a UUID v4 from the
 * OS's random source) and sent identically on every attempt. `retry_unsafe`
 * retries unsafe methods anyway; `disable_for` names methods never retried
 * (Microsoft's DisableFor). A request that may not be retried runs once.
 *
 * The execution path allocates nothing of its own once the client has
 * warmed up (attempt buffers are pooled in the client); libcurl allocates
 * what it allocates. Hedged calls duplicate the easy handle per hedge.
 */
#ifndef RESIL_HTTP_H
#define RESIL_HTTP_H

#include <curl/curl.h>

#include "../resil.h"
#include "hedge.h"
#include "route.h"
#include "telemetry.h"

RESIL_BEGIN_DECLS

/* ---- methods ------------------------------------------------------------- */

/* Methods as bits, for disable_for. Any method not listed is OTHER. */
#define RESIL_HTTP_GET (1u << 0)
#define RESIL_HTTP_HEAD (1u << 1)
#define RESIL_HTTP_OPTIONS (1u << 2)
#define RESIL_HTTP_TRACE (1u << 3)
#define RESIL_HTTP_PUT (1u << 4)
#define RESIL_HTTP_DELETE (1u << 5)
#define RESIL_HTTP_POST (1u << 6)
#define RESIL_HTTP_PATCH (1u << 7)
#define RESIL_HTTP_CONNECT (1u << 8)
#define RESIL_HTTP_OTHER (1u << 9)
/* Microsoft's DisableForUnsafeHttpMethods(): POST, PATCH, PUT, DELETE, CONNECT. */
#define RESIL_HTTP_UNSAFE_METHODS                                            \
    (RESIL_HTTP_POST | RESIL_HTTP_PATCH | RESIL_HTTP_PUT | RESIL_HTTP_DELETE | \
     RESIL_HTTP_CONNECT)

/* The method's bit (names are case-sensitive, as in HTTP); OTHER for any
 * other token; 0 for NULL. */
RESIL_API unsigned resil_http_method_bit(const char *method);
/* May a failed request with this method be sent again? GET, HEAD, OPTIONS,
 * TRACE, PUT, DELETE always; others only with an Idempotency-Key. */
RESIL_API bool resil_http_method_retryable(const char *method, bool has_idempotency_key);
/* Parse a comma-separated list of method names ("POST,PATCH") into bits.
 * RESIL_EINVAL for an empty list, or a name that is empty or not an HTTP
 * token (RFC 9110: letters, digits and !#$%&'*+-.^_`|~; no spaces). */
RESIL_API int resil_http_methods_parse(const char *list, unsigned *out);

/* ---- classification ------------------------------------------------------ */

/* What a classifier sees of one attempt. */
typedef struct resil_http_response {
    CURL *easy;               /* the handle that ran it: getinfo, curl_easy_header */
    CURLcode curl_code;       /* the transfer's result */
    long status;              /* the final response's status; 0 if none arrived */
    const char *method;       /* NULL when not known */
    bool idempotency_key;     /* the request carried an Idempotency-Key */
    resil_duration retry_after; /* the response's Retry-After, parsed; RESIL_NO_HINT
                                   when absent or malformed */
    bool outcome_unknown;     /* a failure status with `Idempotent-Outcome: unknown`:
                                 an idempotency layer's final answer for the key */
    const resil_attempt_ctx *ctx; /* the attempt: its number, hedge index,
                                     deadline, token and ctx->user, the
                                     request's `user`; NULL outside a
                                     client's call */
} resil_http_response;

typedef resil_outcome (*resil_http_classify_fn)(const resil_http_response *r, void *ud);

/*
 * The classification table (docs/http.md):
 *  - a transfer error wins over any status: timeout → Timeout; couldn't
 *    connect, DNS, proxy, reset, empty reply, partial body, send/receive
 *    errors → Transient; TLS certificate problems, malformed URL,
 *    unsupported protocol and anything else → Permanent;
 *  - 1xx–3xx → Success;
 *  - 429 → Throttled; 408, 502, 503, 504 → Transient; 500 → Transient when
 *    `retry_500`, else Permanent;
 *  - 409 with Retry-After answering a request with an Idempotency-Key (the
 *    server still processing that key) → Transient;
 *  - any status ≥ 400 with `Idempotent-Outcome: unknown` (outcome_unknown:
 *    the request may have run and its answer is lost; every retry with
 *    the key gets this same answer) → Permanent, before the rows above;
 *  - any other status ≥ 400 → Permanent.
 * The outcome's code is the status when a response arrived (a success's
 * too), else the CURLcode (always below 100); its retry_after is the
 * response's hint; a failure's detail is "HTTP 503" or "curl 7: " and
 * libcurl's error text.
 */
RESIL_API resil_outcome resil_http_classify(const resil_http_response *r, bool retry_500);
/* The table with 500 transient, as a resil_http_classify_fn (ud unused). */
RESIL_API resil_outcome resil_http_classify_default(const resil_http_response *r, void *ud);

/*
 * Microsoft's standard handler's predicate, exactly (the microsoft-standard
 * profile): every status >= 500, 408 and 429 (Throttled) are retried; any
 * other status >= 400 is Permanent; every transfer failure of a request
 * that was sent or tried (what .NET raises as HttpRequestException) is
 * Transient — TLS and certificate failures included — a timeout is Timeout,
 * and only the errors that mean the request could not be formed (a
 * malformed URL, an unsupported protocol, a bad option) are Permanent —
 * not an answer without a status line, which libcurl reports as an
 * unsupported protocol after the request was sent (read from r->easy). No
 * 409 or Idempotent-Outcome rule. Code, detail and retry_after as above.
 * A resil_http_classify_fn (ud unused).
 */
RESIL_API resil_outcome resil_http_classify_microsoft(const resil_http_response *r, void *ud);

/*
 * A server wait hint from one header, read by the header's name: a name
 * ending in "-ms" (any case: retry-after-ms, x-ms-retry-after-ms) holds
 * whole milliseconds (resil_retry_after_ms_parse); any other name holds a
 * Retry-After value (delta-seconds or an HTTP-date, resil_retry_after_parse
 * against wall_now_ns). Returns as those parsers.
 */
RESIL_API int resil_http_retry_after_value(const char *name, const char *value,
                                           int64_t wall_now_ns, resil_duration *out);

/* The hint headers a failure's response is searched for, in this order,
 * after the client's own retry_after_headers: the first that is present
 * and parses gives the hint. */
#define RESIL_HTTP_RETRY_AFTER_HEADERS "retry-after-ms", "x-ms-retry-after-ms", "Retry-After"

/* ---- helpers --------------------------------------------------------------- */

/* The breaker key of a URL: "scheme://host:port", scheme and host in lower
 * case, the scheme's default port filled in (http 80, https 443, ws 80,
 * wss 443, ftp 21), user info, path, query and fragment dropped; a URL
 * without a scheme is http, as libcurl guesses. Returns 0, RESIL_ESYNTAX
 * for a URL without a host, or RESIL_ERANGE when it does not fit in cap. */
RESIL_API int resil_http_authority(const char *url, char *buf, size_t cap);

#define RESIL_HTTP_UUID_LEN 36 /* without the NUL */
/* A random UUID v4 ("xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx") from the
 * OS's random source (getrandom). out must hold 37 bytes. 0 or RESIL_ESYS. */
RESIL_API int resil_http_uuid4(char out[RESIL_HTTP_UUID_LEN + 1]);

/* ---- the client ------------------------------------------------------------ */

typedef enum resil_http_profile {
    RESIL_HTTP_STANDARD = 0, /* resil's default: Microsoft's strategies, order and
                                numbers, with resil's safer predicate (resil_http_classify:
                                408, 429, 500, 502–504 and path failures; POST and
                                PATCH only with an Idempotency-Key) */
    RESIL_HTTP_READ,         /* seed 004's read client: 3 retries from 100 ms,
                                attempt 500 ms, total 2 s, hedged after 250 ms,
                                unsafe methods never retried */
    RESIL_HTTP_WRITE,        /* conservative: total 6 s, attempt 2 s, unsafe methods
                                never retried, a stricter breaker */
    RESIL_HTTP_MICROSOFT,    /* Microsoft's standard handler exactly: the standard
                                numbers with its predicate (resil_http_classify_microsoft)
                                and every method retried, keys or not */
    RESIL_HTTP_MICROSOFT_HEDGING /* Microsoft's standard hedging handler: total 30 s →
                                    hedging (1 hedge after 2 s, no retry) → per-authority
                                    breaker → attempt 10 s, its predicate */
} resil_http_profile;

/* "standard", "read", "write", "microsoft-standard", "microsoft-hedging"
 * ("unknown" otherwise). */
RESIL_API const char *resil_http_profile_name(resil_http_profile p);
RESIL_API int resil_http_profile_parse(const char *name, resil_http_profile *out);

typedef struct resil_http_opts {
    const char *name;               /* pipeline name in events; default "http" */
    /* the strategies, outermost first */
    uint32_t max_concurrency;       /* calls in flight; default 1000 (queue 0);
                                       0 = unlimited */
    resil_duration total_timeout;   /* whole call, waits included; default 30 s;
                                       0 = none */
    resil_retry_policy retry;       /* default 4 attempts, exponential from 2 s,
                                       Polly's jitter, Retry-After honoured (capped
                                       by retry_after_max, 60 s); max_total must be
                                       0 (total_timeout is the bound); retry_on
                                       NULL = the outcome's kind decides; its
                                       ctx->user is the request's `user`, as
                                       the classifier's */
    bool breakers;                  /* a breaker per authority; default true */
    resil_breaker_opts breaker;     /* default ratio 0.1 over 30 s, throughput 100,
                                       break 5 s */
    uint32_t max_authorities;       /* breakers kept (registry bound); default 1024 */
    resil_registry *registry;       /* share this registry instead (not owned; its
                                       options win); NULL = the client's own */
    resil_duration attempt_timeout; /* each attempt; default 10 s; 0 = none */
    resil_duration hedge_delay;     /* hedge safe methods (GET, HEAD, OPTIONS, TRACE)
                                       after this; default -1 = no hedging */
    uint32_t max_hedged;            /* extra attempts when hedging; default 1 */
    /* HTTP */
    bool retry_500;                 /* default true */
    resil_http_classify_fn classify; /* NULL = resil_http_classify with retry_500 */
    void *classify_ud;
    unsigned disable_for;           /* methods never retried (RESIL_HTTP_* bits);
                                       default 0 */
    bool retry_unsafe;              /* retry POST, PATCH, ... without a key too */
    size_t body_buffer_max;         /* bytes of body buffered per attempt before it
                                       is streamed; default 16 MiB; >= 1 */
    /* wiring */
    resil_clock *clock;             /* NULL = the system clock */
    resil_event_fn listener;        /* optional: the pipeline's events */
    void *listener_ud;
    /* Members added under this SONAME, each in a reserved slot (docs/abi.md). */
    union {
        const char *const *retry_after_headers; /* more hint headers, NULL-terminated,
                                                   searched first (names as in
                                                   resil_http_retry_after_value);
                                                   not owned; NULL = the built-in
                                                   ones only */
        resil_reserved retry_after_headers_r_;
    };
    union {
        const resil_route_opts *hedge_route; /* where a hedged call's attempts go
                                                (route.h), as Microsoft routes every
                                                attempt: the primary to the plan's
                                                first endpoint, hedge k to its
                                                (k+1)-th, the request's path and
                                                query kept (the caller's handle gets
                                                its URL back); with breakers, each
                                                endpoint's authority keys its own.
                                                Not owned; NULL = every attempt to
                                                the handle's URL */
        resil_reserved hedge_route_r_;
    };
    union {
        resil_chaos *const *chaos; /* chaos strategies (chaos.h) every attempt
                                      runs through, innermost (inside the attempt
                                      timeout, so injected latency counts against
                                      it; a fault counts for the breaker and is
                                      retried as its outcome says), in order,
                                      NULL-terminated; shared, not owned;
                                      NULL = none */
        resil_reserved chaos_r_;
    };
    resil_reserved reserved_[1]; /* room to grow (docs/abi.md) */
} resil_http_opts;

/* The standard profile. */
RESIL_API void resil_http_opts_default(resil_http_opts *o);
/* Set a profile's values (its timeouts, retry, breaker and method rules),
 * leaving the wiring fields alone. RESIL_EINVAL for an unknown profile. */
RESIL_API int resil_http_opts_profile(resil_http_opts *o, resil_http_profile p);
/* Check every field, naming the first bad one ("http.attempt_timeout must
 * not exceed http.total_timeout"). */
RESIL_API int resil_http_opts_validate(const resil_http_opts *o, resil_err *err);

typedef struct resil_http_client resil_http_client;

/* RESIL_EINVAL (err names the field), RESIL_ENOMEM. The client is
 * thread-safe: any number of threads may perform through it at once (each
 * with its own easy handle, as libcurl requires). */
RESIL_API int resil_http_client_new(const resil_http_opts *o, resil_http_client **out,
                                    resil_err *err);
/* No call may be running. */
RESIL_API void resil_http_client_free(resil_http_client *c);

/* The state of the breaker guarding `authority` ("http://host:80"):
 * RESIL_BREAKER_NONE when the client has none for it (yet). */
RESIL_API resil_breaker_state resil_http_client_breaker_state(resil_http_client *c,
                                                              const char *authority);

/* ---- one call -------------------------------------------------------------- */

typedef enum resil_http_key_mode {
    RESIL_HTTP_KEY_NONE = 0, /* send the caller's headers as they are */
    RESIL_HTTP_KEY_AUTO,     /* generate a UUID v4 for this call, unless the
                                headers already carry an Idempotency-Key */
    RESIL_HTTP_KEY_GIVEN     /* send `key` as the Idempotency-Key */
} resil_http_key_mode;

#define RESIL_HTTP_KEY_MAX 255 /* bytes of a key, printable ASCII */

typedef struct resil_http_request {
    const char *method;        /* "GET", "POST", ...; NULL = learn it from libcurl
                                  after the first attempt (only a method libcurl
                                  reports as safe is then retried) */
    struct curl_slist *headers; /* the list set with CURLOPT_HTTPHEADER, if any */
    resil_http_key_mode key_mode;
    const char *key;           /* KEY_GIVEN: the key */
    /* the caller's callbacks, restored afterwards; NULL = libcurl's default */
    curl_write_callback write_fn;
    void *write_data;          /* NULL with write_fn NULL: stdout */
    curl_write_callback header_fn;
    void *header_data;
    curl_xferinfo_callback xferinfo_fn; /* return non-zero to abort the call */
    void *xferinfo_data;
    /* the execution */
    resil_cancel *cancel;      /* fire to abandon the call (a running transfer is
                                  aborted at libcurl's next progress check;
                                  on curl multi, taken off it at once) */
    resil_rng *rng;            /* jitter source; NULL = the thread's */
    resil_attempt_record *records; /* optional: the first records_cap attempts */
    size_t records_cap;
    union {            /* (a member that took a reserved slot: docs/abi.md) */
        void *user;    /* the call's own data, handed to the client's
                          classifiers as ctx->user and to its listener as
                          ev->http->user; NULL = none */
        resil_reserved user_slot_;
    };
    union {            /* (a member that took a reserved slot: docs/abi.md) */
        const resil_span_context *trace; /* the parent span; NULL = a valid
                                            traceparent (and tracestate) among
                                            `headers`, else untraced. A traced
                                            call sends each attempt's own
                                            traceparent (docs/telemetry.md).
                                            Its ids must not be all zero and
                                            its tracestate must parse
                                            (resil_tracestate_parse): the
                                            call refuses another */
        resil_reserved trace_slot_;
    };
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_http_request;

RESIL_API void resil_http_request_default(resil_http_request *r);

typedef struct resil_http_result {
    resil_outcome outcome;     /* the final outcome (kind Rejected when a
                                  strategy refused the call) */
    resil_stop stop;           /* why the retrying stopped */
    uint32_t attempts;
    size_t records_len;
    CURLcode curl_code;        /* the final attempt's transfer result */
    long status;               /* the final attempt's HTTP status; 0 if none */
    bool committed;            /* the body was streamed: no retry after it */
    uint32_t hedges;           /* hedged attempts started */
    uint32_t hedge_winner;     /* 0 = the caller's handle gave the answer */
    char key[RESIL_HTTP_KEY_MAX + 1]; /* the Idempotency-Key the call added,
                                         generated or given; "" when it added
                                         none (also when the caller's own
                                         header carried the key) */
    resil_duration elapsed;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_http_result;

/*
 * Perform `easy` through the client. Returns 0 when the call ran to a stop
 * (read out->outcome and out->status: failures are results, not errors),
 * or RESIL_EINVAL for a NULL argument or a bad request (a KEY_GIVEN key
 * that is empty, too long or not printable ASCII, a key_mode out of range,
 * a `trace` context no traceparent could carry), RESIL_ESYS when no key
 * could be generated, or RESIL_ENOMEM. After a hedged call the caller's
 * handle may not be the one that answered (out->hedge_winner > 0): read the
 * result, not the handle's getinfo.
 */
RESIL_API int resil_http_perform(resil_http_client *c, CURL *easy,
                                 const resil_http_request *req, resil_http_result *out);

/* ---- many calls at once on a loop: curl multi -------------------------------- */

/*
 * A resil_http_multi runs calls through a client on an event loop (loop.h)
 * with curl's multi interface: every call's transfers share one CURLM, whose
 * sockets the loop watches and whose timeout is a loop timer, so one thread
 * drives thousands of calls. Each call is its own execution of the client's
 * pipeline (resil_pipeline_start): retries wait on loop timers, Retry-After
 * is honoured, the Idempotency-Key is sent identically on every attempt,
 * the per-authority breakers are the client's (shared with its blocking
 * calls), and a hedged call's attempts are concurrent transfers, the
 * losers taken off the multi handle as soon as one wins. A call behaves as
 * resil_http_perform() of the same handle and request would, and its
 * result is the same; only the waiting moved onto the loop. An attempt's
 * timeout or a cancel takes its transfer off the multi handle at once.
 *
 * The loop must watch descriptors (resil_loop_has_io(): libresil-uv's
 * does); the client's clock should be the loop's
 * (resil_loop_clock()), so that its decisions and the loop's timers read one
 * time. Everything happens on the loop's thread.
 *
 *   resil_http_multi *m;
 *   resil_http_multi_new(client, resil_uv_loop(u), &m);
 *   resil_http_start(m, easy, &req, on_done, ud, NULL);   // as many as wanted
 *   uv_run(uv, UV_RUN_DEFAULT);                            // on_done per call
 */
typedef struct resil_http_multi resil_http_multi;
typedef struct resil_http_xfer resil_http_xfer;

/* A call ended: `res` (valid during the call) is what resil_http_perform()
 * would have filled; the caller's options are back on `easy`, which is the
 * caller's again (reuse it, or clean it up). */
typedef void (*resil_http_done_fn)(CURL *easy, const resil_http_result *res, void *ud);

/* RESIL_EINVAL for NULL arguments, RESIL_EUNSUPPORTED for a loop that
 * cannot watch descriptors, RESIL_ENOMEM. `c` and `loop` must outlive it. */
RESIL_API int resil_http_multi_new(resil_http_client *c, resil_loop *loop,
                                   resil_http_multi **out);
/* No call may be in flight (nor may a call's `done` free it). Closes the
 * connections it kept. */
RESIL_API void resil_http_multi_free(resil_http_multi *m);
/* The CURLM, for curl_multi_setopt() (CURLMOPT_MAX_HOST_CONNECTIONS,
 * CURLMOPT_MAX_TOTAL_CONNECTIONS, ...). Its socket and timer functions
 * are resil's: leave them alone. */
RESIL_API CURLM *resil_http_multi_handle(resil_http_multi *m);
/* Calls started and not yet done. */
RESIL_API size_t resil_http_multi_calls(const resil_http_multi *m);

/*
 * Start a call of `easy` (configured as for resil_http_perform()) with
 * request `req` (copied; NULL = defaults; the strings, header list and
 * records it points at must live until `done`). Returns 0 and, when `out`
 * is not NULL, the call's handle in *out (valid until `done` ran); or
 * RESIL_EINVAL (as resil_http_perform()), RESIL_ESYS, RESIL_ENOMEM, or the
 * pipeline's error (nothing started, `done` not called). `done` may run
 * before this returns (a call the breaker or the concurrency limit
 * refused). An easy handle runs one call at a time. CURLOPT_PRIVATE is
 * resil's during the call and the caller's again at `done`.
 */
RESIL_API int resil_http_start(resil_http_multi *m, CURL *easy, const resil_http_request *req,
                               resil_http_done_fn done, void *ud, resil_http_xfer **out);
/* Cancel a call in flight: its transfers are taken off the multi handle,
 * every wait ends, and `done` follows with a cancelled result. From inside
 * the call's own libcurl callbacks (its progress or streaming write
 * callback) the transfer comes off on the loop's next turn. */
RESIL_API void resil_http_cancel(resil_http_xfer *x);

RESIL_END_DECLS

#endif
