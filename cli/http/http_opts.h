/*
 * http_opts.h — what `resil http`'s command line says, read once.
 *
 * The options are a library of their own (resil_cli_http_parse) so that the
 * tool, its unit tests and its fuzz targets run the same parser. The run
 * (http_cmd.c) only reads the struct this fills; every value is checked
 * here, by the option's name, before anything is sent.
 *
 * Options are rows of a table (http_option): resil's own in http_opts.c,
 * curl's in curl_flags.c, then the shared policy options. A new option is a
 * row and a parser; the walk, the short-option bundles ("-sSfL") and the
 * "unknown option" message come from the tables.
 */
#ifndef RESIL_CLI_HTTP_OPTS_H
#define RESIL_CLI_HTTP_OPTS_H

#include <stdio.h>

#include "args.h"
#include "attempt_log.h"
#include "chaos_opts.h"
#include "fleet_values.h"
#include "policy_opts.h"
#include "telemetry_out.h"
#include "resil/http.h"
#include "write_out.h"

#define MAX_URLS 256
#define HTTP_PARALLEL_DEFAULT 50 /* curl's --parallel-max default and bound */
#define HTTP_PARALLEL_MAX 300
#define MAX_HINT_HEADERS 8

/* -O in an output slot: the file is named after the URL's last segment. */
extern const char HTTP_REMOTE_NAME[];

typedef struct http_opts {
    policy_opts po;
    resil_http_profile profile;
    bool profile_given;
    /* the request */
    const char *method;        /* -X; NULL: GET, POST with a body, PUT with -T */
    struct curl_slist *headers;
    char *data;                /* the body -d, --data-* and --json built (heap) */
    size_t data_len;
    bool json;                 /* --json: its two headers */
    bool get;                  /* -G: the body goes into the query instead */
    bool head;                 /* -I */
    char *upload;              /* -T FILE's contents (heap), or NULL */
    size_t upload_len;
    const char *upload_name;   /* its name, ending a URL whose path has none */
    const char *forms[64];     /* -F values as given, checked */
    int nforms;
    const char *user;          /* -u USER:PASSWORD */
    const char *user_agent;    /* -A; NULL: "resil/VERSION" */
    const char *referer;       /* -e */
    const char *cookie;        /* -b NAME=VALUE[; ...] */
    const char *cookie_file;   /* -b FILE */
    const char *cookie_jar;    /* -c FILE */
    bool insecure;             /* -k */
    const char *cacert, *cert, *cert_key; /* --cacert, --cert, --key */
    const char *proxy;         /* -x */
    struct curl_slist *resolve; /* --resolve entries */
    bool compressed;
    bool location;             /* -L */
    long max_redirs;           /* --max-redirs; -1: unlimited (curl's default 50) */
    resil_duration connect_timeout; /* 0: none (libcurl's own limit) */
    resil_duration stall_timeout;   /* an attempt receiving nothing this long fails */
    /* the output */
    const char *outputs[MAX_URLS]; /* -o FILE / -O per URL, in order; NULL: stdout */
    int noutputs;
    const char *output_dir;    /* --output-dir DIR: before every -o/-O name */
    const char *dump_header;   /* -D FILE ('-': standard output) */
    bool include_headers;      /* -i */
    bool fail_with_body;       /* --fail-with-body */
    bool silent;               /* -s */
    bool show_error;           /* -S */
    bool verbose;              /* -v */
    write_out *write_out;      /* -w */
    /* the transfers */
    bool parallel;             /* -Z: the URLs at once, not one after another */
    uint32_t parallel_max;     /* --parallel-max: at most this many at once */
    /* resilience */
    resil_retry_after_mode retry_after;
    resil_duration retry_after_max;
    bool retry_after_max_given;
    resil_http_key_mode key_mode;
    const char *key;
    bool retry_unsafe;
    bool retry_all_errors;     /* --retry-all-errors: every failure is transient */
    resil_duration hedge;      /* -1: the profile's hedging (none but read's) */
    const char *hint_headers[MAX_HINT_HEADERS + 1]; /* --retry-after-header, NULL-ended */
    int nhint;
    unsigned disable_for;      /* --disable-for: added to the profile's */
    /* [0] the request's own URL, for the primary; then --hedge-to, in order */
    resil_route_endpoint hedge_to[RESIL_HEDGE_MAX + 1];
    resil_route_group hedge_groups[RESIL_HEDGE_MAX + 1];
    resil_route_opts route;
    size_t nhedge_to;
    uint32_t breaker_failures; /* 0: the profile's ratio rule alone */
    const char *fleet;         /* --fleet redis://...: shared breakers, or NULL */
    fleet_limit_opts limits;   /* --fleet-rate, --fleet-concurrency */
    resil_duration fleet_timeout; /* --fleet-timeout: one Redis call's bound, 0: 500ms */
    chaos_opts chaos;          /* --chaos-fail, --chaos-latency, --chaos-seed */
    resil_chaos *chaos_list[CHAOS_OPTS_MAX + 1]; /* its strategies, for the client */
    log_format log;
    const char *log_file;      /* --log-file FILE: the attempt record, appended */
    resil_duration heartbeat;  /* --heartbeat; -1: the default */
    resil_span_context trace;  /* --traceparent: the parent of every call */
    bool trace_given;
    telemetry_out tel;         /* --metrics FILE, --otlp URL */
    const char *urls[MAX_URLS];
    int nurls;
    char **argv_owned;         /* argv with short-option bundles split (heap) */
} http_opts;

/* One option: `value` false for a flag (fn gets v == NULL). fn returns 0
 * or RESIL_EINVAL after reporting by name. */
typedef struct http_option {
    const char *long_name;
    const char *short_name; /* "-X", or NULL */
    bool value;
    int (*fn)(http_opts *o, const args *a, const char *v);
} http_option;

/* A flag's row function: it sets the bool `field`. */
#define HTTP_FLAG(fn, field)                                                   \
    static int fn(http_opts *o, const args *a, const char *v)                  \
    {                                                                          \
        (void)a, (void)v;                                                      \
        o->field = true;                                                       \
        return 0;                                                              \
    }

extern const http_option http_curl_options[]; /* curl_flags.c */
extern const size_t http_curl_options_len;

/* The option tables, resil's own (t = 0) and curl's (t = 1), for the
 * tests that check the help and the completions name every row; NULL
 * beyond them. */
const http_option *http_options_table(int t, size_t *len);
/* The --help text. */
void http_opts_help(FILE *out);

/* Read argv into *o: 0 to run, 1 when --help was printed, or RESIL_EINVAL
 * after reporting (on stderr, or into err when non-NULL). */
int http_opts_parse(http_opts *o, int argc, char **argv, resil_err *err);
/* What http_opts_parse allocated. */
void http_opts_free(http_opts *o);
/* The method the request goes out with. */
const char *http_opts_method(const http_opts *o);

/* ---- value parsers shared with the fuzz targets (curl_flags.c) ---------- */

/* curl's seconds ("5", "2.5"), a duration ("250ms"), or "none"; 0 = none. */
int http_seconds_parse(const args *a, const char *option, const char *text,
                       resil_duration *out);
/* --resolve HOST:PORT:ADDR[,ADDR]... (a leading '+' or '-' as curl's):
 * checked, then appended to *list. */
int http_resolve_parse(const args *a, const char *text, struct curl_slist **list);
/* --data-urlencode's forms (content, =content, name=content, @file,
 * name@file) into the URL-encoded piece *out (heap), as curl encodes:
 * unreserved bytes as they are, space as '+', the rest %XX. */
int http_urlencode_piece(const args *a, const char *text, char **out, size_t *len);
/* s URL-encoded as above, appended to buf (cap at least 3 * n + 1). */
size_t http_urlencode(const char *s, size_t n, char *buf);
/* -F's NAME=VALUE, NAME=@FILE[;type=T][;filename=F] or NAME=<FILE. */
int http_form_check(const args *a, const char *text);

/* Split "-sSfL" and "-XPOST" into single options, as curl reads them:
 * flags bundle, and a letter taking a value takes the rest of the word.
 * *out is a new argv (heap, its strings too); *out_argc its length. */
int http_split_short(const args *a, int argc, char **argv, char ***out, int *out_argc);
void http_split_free(char **argv);

#endif
