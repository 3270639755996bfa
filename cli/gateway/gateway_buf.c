/*
 * gateway_buf.c — the gateway's growable byte buffer (gw_buf, gateway.h):
 * a request's body, an upstream answer's header lines and body, and the
 * request head the gateway's own client writes.
 *
 * One buffer type serves them all, capped by its limit, its storage
 * doubling from 1 KiB and always NUL-terminated so that text in it can be
 * read as a string. A buffer that lives longer than one request (the
 * client's request head, kept with its connection) is emptied with
 * gw_buf_reuse() rather than freed, so a steady stream of requests writes
 * into the storage the first one grew; past a bound it is let go, so one
 * huge request does not leave its size behind on every idle connection.
 * It sits in the parse library so that tests/gateway can check it without
 * a server.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway.h"

bool gw_buf_append(gw_buf *b, const void *data, size_t len)
{
    if (b->overflow || len > b->limit - b->len) {
        b->overflow = true;
        return false;
    }
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->overflow = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    if (len > 0)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return true;
}

void gw_buf_free(gw_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void gw_buf_reuse(gw_buf *b, size_t keep)
{
    if (b->cap > keep) {
        free(b->p);
        b->p = NULL;
        b->cap = 0;
    }
    b->len = 0;
    b->overflow = false;
}
