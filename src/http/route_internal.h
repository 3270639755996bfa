/*
 * route_internal.h — pointing a hedge's handle at another endpoint
 * (route.c). Internal to libresil-http.
 */
#ifndef RESIL_HTTP_ROUTE_INTERNAL_H
#define RESIL_HTTP_ROUTE_INTERNAL_H

#include "resil/http.h"

/* Set `easy`'s URL to `request_url` with `endpoint`'s scheme, host and
 * port (an endpoint without a port takes its scheme's default). 0, or
 * RESIL_EINVAL when either URL does not parse. */
int resil__http_route_to(CURL *easy, const char *request_url, const char *endpoint);

#endif
