/*
 * http_handle.c — curl's flags onto libcurl's options, for one URL.
 *
 * Whatever curl's tool does with a flag is done here with the same libcurl
 * option, so behaviour follows libcurl's (redirects, cookies, TLS, proxy)
 * rather than an imitation of it. Where curl's tool itself builds
 * something — -G's query, --json's headers, -T's URL and method, -F's
 * parts — it is built here the way curl builds it.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_handle.h"

#define USER_AGENT "resil/" RESIL_VERSION_STRING

static bool has_header(const struct curl_slist *h, const char *name)
{
    size_t n = strlen(name);
    for (; h != NULL; h = h->next) {
        if (strncasecmp(h->data, name, n) == 0 && (h->data[n] == ':' || h->data[n] == ';'))
            return true;
    }
    return false;
}

static int add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *l = curl_slist_append(*list, line);
    if (l == NULL)
        return RESIL_ENOMEM;
    *list = l;
    return 0;
}

/* The user's headers, then what --json and -T add unless the user set it. */
static int build_headers(const http_opts *o, struct curl_slist **out)
{
    int rc = 0;
    for (const struct curl_slist *h = o->headers; h != NULL && rc == 0; h = h->next)
        rc = add_header(out, h->data);
    if (rc == 0 && o->json && !o->get && !has_header(o->headers, "Content-Type"))
        rc = add_header(out, "Content-Type: application/json");
    if (rc == 0 && o->json && !has_header(o->headers, "Accept"))
        rc = add_header(out, "Accept: application/json");
    if (rc == 0 && o->upload != NULL && !has_header(o->headers, "Content-Type"))
        rc = add_header(out, "Content-Type:"); /* a PUT body, not a form */
    return rc;
}

/* u's URL with `name`, URL-encoded, after its path `path`, into *out. */
static int with_name(CURL *e, CURLU *u, const char *path, const char *name, char **out)
{
    char *enc = curl_easy_escape(e, name, 0);
    if (enc == NULL)
        return RESIL_ENOMEM;
    bool slash = path[0] != '\0' && path[strlen(path) - 1] == '/';
    size_t n = strlen(path) + 1 + strlen(enc) + 1;
    char *grown = malloc(n);
    char *full = NULL;
    if (grown != NULL) {
        snprintf(grown, n, "%s%s%s", path, slash ? "" : "/", enc);
        if (curl_url_set(u, CURLUPART_PATH, grown, 0) == CURLUE_OK)
            (void)curl_url_get(u, CURLUPART_URL, &full, CURLU_DEFAULT_SCHEME);
    }
    *out = full != NULL ? strdup(full) : NULL;
    free(grown);
    curl_free(full);
    curl_free(enc);
    return *out != NULL ? 0 : RESIL_ENOMEM;
}

/* -T FILE, as curl's tool does it (add_file_name_to_url): when the URL's
 * path has no file name — empty, or ending in '/' — FILE's name,
 * URL-encoded, ends the path, before any query. *out stays NULL when the
 * URL is used as it is (one libcurl cannot read is left for it to refuse). */
static int upload_url(CURL *e, const char *url, const char *name, char **out)
{
    CURLU *u = curl_url();
    if (u == NULL)
        return RESIL_ENOMEM;
    char *path = NULL;
    int rc = 0;
    if (curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) ==
            CURLUE_OK &&
        curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK) {
        const char *slash = strrchr(path, '/');
        if (slash == NULL || slash[1] == '\0')
            rc = with_name(e, u, path, name, out);
    }
    curl_free(path);
    curl_url_cleanup(u);
    return rc;
}

/* -G: URL?DATA (or URL&DATA when it has a query); -T FILE: upload_url().
 * *out stays NULL when the URL is used as it is; RESIL_ENOMEM when the
 * derived one cannot be made (sending the URL as given would be a
 * different request). */
static int derived_url(CURL *e, const http_opts *o, const char *url, char **out)
{
    *out = NULL;
    if (o->upload_name != NULL)
        return upload_url(e, url, o->upload_name, out);
    if (!o->get || o->data == NULL)
        return 0;
    const char *sep = strchr(url, '?') != NULL ? "&" : "?";
    size_t n = strlen(url) + strlen(sep) + strlen(o->data) + 1;
    if ((*out = malloc(n)) == NULL)
        return RESIL_ENOMEM;
    snprintf(*out, n, "%s%s%s", url, sep, o->data);
    return 0;
}

/* One -F part: NAME=VALUE, NAME=@FILE[;type=T][;filename=F], NAME=<FILE. */
static int add_form_part(curl_mime *mime, const char *spec)
{
    curl_mimepart *part = curl_mime_addpart(mime);
    if (part == NULL)
        return RESIL_ENOMEM;
    const char *eq = strchr(spec, '=');
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
    curl_mime_name(part, name);
    const char *v = eq + 1;
    if (v[0] != '@' && v[0] != '<')
        return curl_mime_data(part, v, CURL_ZERO_TERMINATED) == CURLE_OK ? 0 : RESIL_ENOMEM;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", v + 1);
    char *params = strchr(buf, ';');
    if (params != NULL)
        *params++ = '\0';
    if (curl_mime_filedata(part, buf) != CURLE_OK) {
        fprintf(stderr, "resil http: --form: cannot read '%s'\n", buf);
        return RESIL_EINVAL;
    }
    if (v[0] == '<')
        curl_mime_filename(part, NULL);
    for (char *p = params; p != NULL && *p != '\0';) {
        char *next = strchr(p, ';');
        if (next != NULL)
            *next++ = '\0';
        if (strncmp(p, "type=", 5) == 0)
            curl_mime_type(part, p + 5);
        else if (strncmp(p, "filename=", 9) == 0)
            curl_mime_filename(part, p + 9);
        p = next;
    }
    return 0;
}

static int build_form(CURL *e, const http_opts *o, curl_mime **out)
{
    if (o->nforms == 0)
        return 0;
    *out = curl_mime_init(e);
    if (*out == NULL)
        return RESIL_ENOMEM;
    for (int i = 0; i < o->nforms; i++) {
        int rc = add_form_part(*out, o->forms[i]);
        if (rc != 0)
            return rc;
    }
    curl_easy_setopt(e, CURLOPT_MIMEPOST, *out);
    return 0;
}

static void set_body(CURL *e, const http_opts *o)
{
    const char *m = http_opts_method(o);
    const char *body = o->upload != NULL ? o->upload : o->get ? NULL : o->data;
    size_t len = o->upload != NULL ? o->upload_len : o->data_len;
    if (body != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    }
    /* libcurl sends a POST when it has a body or a form, else a GET; any
     * other method is named on that request, as curl's -X does, so a
     * bodiless POST carries no Content-Length or form Content-Type. */
    const char *shaped = body != NULL || o->nforms > 0 ? "POST" : "GET";
    if (strcmp(m, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    else if (strcmp(m, shaped) != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
}

static void set_transport(CURL *e, const http_opts *o)
{
    curl_easy_setopt(e, CURLOPT_USERAGENT,
                     o->user_agent == NULL ? USER_AGENT
                     : o->user_agent[0] == '\0' ? NULL
                                                : o->user_agent);
    if (o->user != NULL)
        curl_easy_setopt(e, CURLOPT_USERPWD, o->user);
    if (o->referer != NULL)
        curl_easy_setopt(e, CURLOPT_REFERER, o->referer);
    if (o->cookie != NULL)
        curl_easy_setopt(e, CURLOPT_COOKIE, o->cookie);
    if (o->cookie_file != NULL)
        curl_easy_setopt(e, CURLOPT_COOKIEFILE, o->cookie_file);
    if (o->cookie_jar != NULL)
        curl_easy_setopt(e, CURLOPT_COOKIEJAR, o->cookie_jar);
    if (o->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (o->cacert != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, o->cacert);
    if (o->cert != NULL)
        curl_easy_setopt(e, CURLOPT_SSLCERT, o->cert);
    if (o->cert_key != NULL)
        curl_easy_setopt(e, CURLOPT_SSLKEY, o->cert_key);
    if (o->proxy != NULL)
        curl_easy_setopt(e, CURLOPT_PROXY, o->proxy);
    if (o->resolve != NULL)
        curl_easy_setopt(e, CURLOPT_RESOLVE, o->resolve);
    if (o->compressed)
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    if (o->location) {
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, o->max_redirs);
    }
    if (o->verbose)
        curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
}

static void set_timeouts(CURL *e, const http_opts *o)
{
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(o->connect_timeout / RESIL_MS(1)));
    if (o->stall_timeout > 0) {
        long secs = (long)((o->stall_timeout + RESIL_S(1) - 1) / RESIL_S(1));
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs);
    }
}

int http_handle_setup(CURL *e, const http_opts *o, const char *url, http_handle_parts *parts)
{
    memset(parts, 0, sizeof *parts);
    curl_easy_reset(e);
    int rc = derived_url(e, o, url, &parts->url);
    if (rc == 0)
        rc = build_headers(o, &parts->headers);
    if (rc == 0)
        rc = build_form(e, o, &parts->mime);
    if (rc != 0) {
        if (rc == RESIL_ENOMEM)
            fprintf(stderr, "resil http: out of memory\n");
        return rc;
    }
    curl_easy_setopt(e, CURLOPT_URL, parts->url != NULL ? parts->url : url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, parts->headers);
    set_body(e, o);
    set_transport(e, o);
    set_timeouts(e, o);
    return 0;
}

void http_handle_parts_free(http_handle_parts *parts)
{
    curl_slist_free_all(parts->headers);
    curl_mime_free(parts->mime);
    free(parts->url);
    memset(parts, 0, sizeof *parts);
}

resil_outcome http_classify_all_errors(const resil_http_response *r, void *ud)
{
    (void)ud;
    resil_outcome o = resil_http_classify(r, true);
    if (o.kind == RESIL_PERMANENT && !r->outcome_unknown)
        o.kind = RESIL_TRANSIENT;
    return o;
}
