/*
 * head.c — an attempt's header lines, one record per libcurl call (see
 * head.h for why they are never re-split).
 *
 * A record is the line's length, copied in as a size_t (memcpy: records
 * are not aligned), then its bytes. One growing buffer holds them all, so
 * a pooled attempt that keeps its buffer allocates nothing per response.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "head.h"
#include "resil/common.h"

static int reserve(resil__http_head *h, size_t more)
{
    if (more > SIZE_MAX / 2 - h->len)
        return RESIL_ENOMEM;
    if (h->len + more <= h->cap)
        return 0;
    size_t cap = h->cap > 0 ? h->cap : 1024;
    while (cap < h->len + more)
        cap *= 2;
    char *grown = realloc(h->p, cap);
    if (grown == NULL)
        return RESIL_ENOMEM;
    h->p = grown;
    h->cap = cap;
    return 0;
}

int resil__http_head_add(resil__http_head *h, const char *line, size_t n, size_t limit)
{
    if (n > limit || h->bytes > limit - n)
        return RESIL_ERANGE;
    int rc = reserve(h, sizeof n + n);
    if (rc != 0)
        return rc;
    memcpy(h->p + h->len, &n, sizeof n);
    if (n > 0)
        memcpy(h->p + h->len + sizeof n, line, n);
    h->len += sizeof n + n;
    h->bytes += n;
    h->lines++;
    return 0;
}

int resil__http_head_each(const resil__http_head *h, resil__http_line_fn fn, void *ud)
{
    for (size_t at = 0; at < h->len;) {
        size_t n;
        memcpy(&n, h->p + at, sizeof n);
        at += sizeof n;
        int rc = fn(h->p + at, n, ud);
        if (rc != 0)
            return rc;
        at += n;
    }
    return 0;
}

void resil__http_head_free(resil__http_head *h)
{
    free(h->p);
    memset(h, 0, sizeof *h);
}

static bool tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

bool resil__http_token(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!tchar((unsigned char)s[i]))
            return false;
    return len > 0;
}
