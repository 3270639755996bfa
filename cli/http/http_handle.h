/*
 * http_handle.h — the easy handle for one URL, set as curl's flags would
 * set it. The HTTP client takes over only its write, header, progress and
 * timeout options for the call; everything set here is re-sent as is on
 * every attempt.
 */
#ifndef RESIL_CLI_HTTP_HANDLE_H
#define RESIL_CLI_HTTP_HANDLE_H

#include <curl/curl.h>

#include "http_opts.h"

/* What configuring a handle allocated, freed after the call. */
typedef struct http_handle_parts {
    struct curl_slist *headers; /* the user's plus --json's and -T's */
    curl_mime *mime;            /* -F */
    char *url;                  /* -G's or -T's URL */
} http_handle_parts;

/* Reset `e` and set it up for `url`. 0, or RESIL_ENOMEM / RESIL_EINVAL
 * (a -F file that cannot be read) after printing why. */
int http_handle_setup(CURL *e, const http_opts *o, const char *url, http_handle_parts *parts);
void http_handle_parts_free(http_handle_parts *parts);

/* --retry-all-errors: the client's table, with every permanent failure
 * made transient (ud unused). */
resil_outcome http_classify_all_errors(const resil_http_response *r, void *ud);

#endif
