/*
 * curl_loop.h — curl multi driven on a resil_loop, for libresil-http's
 * resil_http_multi (multi.c) and `resil gateway`'s upstream alike.
 *
 * Internal (resil__): not part of libresil-http's API. The tool links
 * libresil-http statically, which is how the gateway reaches it.
 */
#ifndef RESIL_HTTP_CURL_LOOP_H
#define RESIL_HTTP_CURL_LOOP_H

#include <curl/curl.h>

#include "resil/loop.h"

typedef struct resil__curl_loop resil__curl_loop;

/* A transfer ended with `code`: `priv` is its handle's CURLOPT_PRIVATE
 * (the call skips handles whose PRIVATE is NULL). Runs from the loop,
 * never from inside a libcurl callback; the handle is still in the multi
 * handle, for the callee to take off. */
typedef void resil__curl_done_fn(void *ud, CURL *easy, void *priv, CURLcode code);

/* A CURLM whose socket and timer callbacks are the loop's watches and
 * timer: 0, or RESIL_ENOMEM. The loop must have descriptor watches. */
int resil__curl_loop_new(resil_loop *loop, resil__curl_done_fn *done, void *ud,
                         resil__curl_loop **out);
/* Cleans up the multi handle (its handles must be off it by then; curl may
 * still close cached connections) and every watch. */
void resil__curl_loop_free(resil__curl_loop *cl);
CURLM *resil__curl_loop_multi(resil__curl_loop *cl);

/* Have curl open and close `easy`'s sockets through the driver, so that a
 * kept-alive connection's watch stays armed while it idles. Only for a
 * handle the caller owns outright: it takes the handle's open and close
 * socket callbacks, and they point at `cl`. */
void resil__curl_loop_own_sockets(resil__curl_loop *cl, CURL *easy);

#endif
