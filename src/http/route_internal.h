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

/* Can a hedge be sent to `endpoint`: does libcurl's URL parser take it with
 * a host, and does its authority (the key of its breaker) fit in
 * RESIL_BREAKER_NAME_MAX? resil_http_opts_validate asks, so that a route
 * the calls could not follow is refused by name when the client is made. */
bool resil__http_route_endpoint_ok(const char *endpoint);

#endif
