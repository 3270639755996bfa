/*
 * route.c — sending a hedge to another endpoint: the request's URL with
 * the endpoint's scheme, host and port, its path and query kept.
 *
 * libcurl's URL API does the surgery, so a URL is never taken apart by
 * hand here: the endpoint is parsed as a URL of its own and its parts are
 * set on a copy of the request's. The handle copies the string it is
 * given, so nothing here outlives the call that makes it.
 */
#include <string.h>

#include "route_internal.h"

static CURLUcode copy_part(CURLU *to, CURLU *from, CURLUPart part)
{
    char *v = NULL;
    CURLUcode rc = curl_url_get(from, part, &v, 0);
    if (rc == CURLUE_NO_PORT)
        return curl_url_set(to, part, NULL, 0);
    if (rc != CURLUE_OK)
        return rc;
    rc = curl_url_set(to, part, v, 0);
    curl_free(v);
    return rc;
}

int resil__http_route_to(CURL *easy, const char *request_url, const char *endpoint)
{
    CURLU *req = curl_url(), *ep = curl_url();
    char *joined = NULL;
    int rc = RESIL_EINVAL;
    if (req != NULL && ep != NULL &&
        curl_url_set(req, CURLUPART_URL, request_url, CURLU_GUESS_SCHEME) == CURLUE_OK &&
        curl_url_set(ep, CURLUPART_URL, endpoint, CURLU_GUESS_SCHEME) == CURLUE_OK &&
        copy_part(req, ep, CURLUPART_SCHEME) == CURLUE_OK &&
        copy_part(req, ep, CURLUPART_HOST) == CURLUE_OK &&
        copy_part(req, ep, CURLUPART_PORT) == CURLUE_OK &&
        curl_url_get(req, CURLUPART_URL, &joined, 0) == CURLUE_OK &&
        curl_easy_setopt(easy, CURLOPT_URL, joined) == CURLE_OK)
        rc = 0;
    curl_free(joined);
    curl_url_cleanup(ep);
    curl_url_cleanup(req);
    return rc;
}

bool resil__http_route_endpoint_ok(const char *endpoint)
{
    char authority[RESIL_BREAKER_NAME_MAX];
    if (endpoint == NULL || resil_http_authority(endpoint, authority, sizeof authority) != 0)
        return false;
    CURLU *ep = curl_url();
    char *host = NULL;
    bool ok = ep != NULL &&
              curl_url_set(ep, CURLUPART_URL, endpoint, CURLU_GUESS_SCHEME) == CURLUE_OK &&
              curl_url_get(ep, CURLUPART_HOST, &host, 0) == CURLUE_OK;
    curl_free(host);
    curl_url_cleanup(ep);
    return ok;
}
