/*
 * http_opts.h — what `resil http`'s command line says, read once.
 *
 * The options are a library of their own (resil_cli_http_parse) so that the
 * tool, its unit tests and its fuzz targets run the same parser. The run
 * (http_cmd.c) only reads the struct this fills; every value is checked
 * here, by the option's name, before anything is sent.
 */
#ifndef RESIL_CLI_HTTP_OPTS_H
#define RESIL_CLI_HTTP_OPTS_H

#include <stdio.h>

#include "args.h"
#include "attempt_log.h"
#include "policy_opts.h"
#include "resil/http.h"

#define MAX_URLS 256

typedef struct http_opts {
    policy_opts po;
    resil_http_profile profile;
    const char *method;
    struct curl_slist *headers;
    char *data;                /* the request body (heap), or NULL */
    size_t data_len;
    const char *output;        /* -o FILE */
    bool include_headers;      /* -i */
    bool silent;               /* -s */
    resil_retry_after_mode retry_after;
    resil_duration retry_after_max;
    bool retry_after_max_given;
    resil_http_key_mode key_mode;
    const char *key;
    bool retry_unsafe;
    resil_duration hedge;      /* -1: no hedging */
    uint32_t breaker_failures; /* 0: the profile's ratio rule alone */
    const char *fleet;         /* --fleet redis://...: shared breakers, or NULL */
    log_format log;
    const char *urls[MAX_URLS];
    int nurls;
} http_opts;

/* Read argv into *o: 0 to run, 1 when --help was printed, or RESIL_EINVAL
 * after reporting (on stderr, or into err when non-NULL). */
int http_opts_parse(http_opts *o, int argc, char **argv, resil_err *err);
/* What http_opts_parse allocated (headers, body). */
void http_opts_free(http_opts *o);
/* The method the request goes out with. */
const char *http_opts_method(const http_opts *o);

#endif
