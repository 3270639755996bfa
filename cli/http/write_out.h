/*
 * write_out.h — `resil http -w FORMAT`: curl's --write-out, compiled once.
 *
 * The format is parsed when the options are read, so a misspelt variable
 * is refused by name before anything is sent (curl warns at the end and
 * prints nothing for it), then rendered after each URL from a callback
 * that knows the values. Parsing and rendering are pure, so a fuzz target
 * drives both on arbitrary text.
 *
 * The syntax is curl's: %{name} and %header{name}; %% for '%'; \n, \r and
 * \t for those characters; any other '%' or '\' is written as it stands
 * (so is an unclosed "%{"). %{stdout} and %{stderr} switch the stream the
 * rest is written to.
 */
#ifndef RESIL_CLI_HTTP_WRITE_OUT_H
#define RESIL_CLI_HTTP_WRITE_OUT_H

#include <stdio.h>

#include "resil.h"

/* The variables: curl's that mean something for resil http, then resil's. */
typedef enum wo_var {
    WO_CONTENT_TYPE,
    WO_ERRORMSG,
    WO_EXITCODE,
    WO_FILENAME_EFFECTIVE,
    WO_HTTP_CODE,
    WO_HTTP_VERSION,
    WO_LOCAL_IP,
    WO_LOCAL_PORT,
    WO_METHOD,
    WO_NUM_CONNECTS,
    WO_NUM_REDIRECTS,
    WO_NUM_RETRIES,
    WO_REDIRECT_URL,
    WO_REMOTE_IP,
    WO_REMOTE_PORT,
    WO_RESPONSE_CODE,
    WO_SCHEME,
    WO_SIZE_DOWNLOAD,
    WO_SIZE_HEADER,
    WO_SIZE_REQUEST,
    WO_SIZE_UPLOAD,
    WO_SPEED_DOWNLOAD,
    WO_SPEED_UPLOAD,
    WO_SSL_VERIFY_RESULT,
    WO_TIME_APPCONNECT,
    WO_TIME_CONNECT,
    WO_TIME_NAMELOOKUP,
    WO_TIME_PRETRANSFER,
    WO_TIME_REDIRECT,
    WO_TIME_STARTTRANSFER,
    WO_TIME_TOTAL,
    WO_URL,
    WO_URL_EFFECTIVE,
    /* resil's own */
    WO_ATTEMPTS,        /* attempts made, the first included */
    WO_STOP_REASON,     /* why the retrying stopped: "succeeded", "attempts exhausted" */
    WO_TIME_ELAPSED,    /* the whole call in seconds, waits between attempts included */
    WO_IDEMPOTENCY_KEY, /* the Idempotency-Key the call added, or empty */
    WO_HEADER,          /* %header{name}: internal */
    WO_VAR_COUNT
} wo_var;

typedef struct write_out write_out;

/* The value of `var` (for WO_HEADER, of the response header `header`, any
 * case) as text into buf; empty when there is none. */
typedef void (*wo_value_fn)(wo_var var, const char *header, char *buf, size_t cap, void *ud);

/* Compile `format`. RESIL_EINVAL naming the unknown variable (err set),
 * RESIL_ENOMEM. */
int write_out_parse(const char *format, write_out **out, resil_err *err);
void write_out_free(write_out *w);

/* Write the format to `out` (switching to `err_stream` after %{stderr}
 * and back after %{stdout}), asking `value` for each variable. */
void write_out_render(const write_out *w, FILE *out, FILE *err_stream, wo_value_fn value,
                      void *ud);

/* The variable's name as written in %{...}, or NULL for WO_HEADER. */
const char *write_out_name(wo_var var);

#endif
