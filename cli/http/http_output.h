/*
 * http_output.h — where one URL's answer goes, as curl decides it.
 *
 * A sink stands for one URL's output: standard output, -o FILE or -O's
 * remote name. The file is created at the first byte written, so a
 * failure whose body is dropped leaves no file behind, as with curl
 * --fail; a success with an empty body still creates it (curl does). The
 * header callback sees every header line of the final attempt (the HTTP
 * client delivers only that attempt's), so the last status line it sees
 * decides whether the body that follows is an error body to drop.
 */
#ifndef RESIL_CLI_HTTP_OUTPUT_H
#define RESIL_CLI_HTTP_OUTPUT_H

#include <curl/curl.h>
#include <stdio.h>

#include "http_opts.h"

typedef struct http_sink {
    const http_opts *o;
    const char *path;      /* NULL: standard output */
    FILE *file;            /* the output once opened (stdout for NULL path) */
    FILE *dump;            /* -D's stream, or NULL */
    long status;           /* the last status line's code */
    curl_off_t body_bytes; /* written to the output */
    curl_off_t header_bytes;
    bool write_failed;
    int failed_errno; /* the first failure's errno, or 0 when none was known */
} http_sink;

/* The output of URL number i: its -o/-O file name (in --output-dir's
 * directory, when given) written into buf, or NULL for standard output.
 * -O without a name to take (a URL ending in '/') or a name longer than
 * buf gives RESIL_EINVAL and prints why, naming the option. */
int http_output_path(const http_opts *o, int i, const char *url, char *buf, size_t cap,
                     const char **out);

void http_sink_init(http_sink *s, const http_opts *o, const char *path, FILE *dump);
/* libcurl-style callbacks, data = the sink. */
size_t http_sink_body(char *p, size_t size, size_t n, void *data);
size_t http_sink_header(char *p, size_t size, size_t n, void *data);
/* The URL is done: create the file of an empty success, close it. 0, or
 * the exit status 23 when an output could not be written. */
int http_sink_finish(http_sink *s, bool ok);

#endif
