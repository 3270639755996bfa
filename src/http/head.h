/*
 * head.h — the response header lines of one attempt, held until the
 * pipeline knows whether that attempt is the one the caller gets.
 *
 * libcurl calls the header function once per header line, for every
 * response of a transfer (a 100 Continue, each redirect, the final answer),
 * and a caller's header function may rely on exactly that. So the lines are
 * kept as they were delivered — one record per call, whatever bytes it
 * holds, CRLF or not — and handed on the same way, never re-split: a line
 * without a line feed, or with one inside it, reaches the caller as the one
 * piece libcurl gave. The bytes held are bounded (the limit is the
 * caller's), since a server choosing the headers must not choose how much
 * memory a client spends on them.
 *
 * Pure memory, no libcurl: the fuzz target (tests/http/fuzz_http_headers.c)
 * drives it with arbitrary lines in sequence. The token rule that header
 * and method names follow lives here too, for the options and the
 * method lists alike. Internal to libresil-http.
 */
#ifndef RESIL_HTTP_HEAD_H
#define RESIL_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* What an attempt holds at most, in header bytes, over all its responses:
 * above libcurl's own limit where it has one (300 KiB, from libcurl 8.3 or
 * a distribution's backport) and any real response, and small enough that
 * with a libcurl that has none, a hostile server cannot grow a client
 * without end. */
#define RESIL__HTTP_HEAD_MAX ((size_t)1 << 20)

typedef struct resil__http_head {
    char *p;      /* records: a size_t length, then that many bytes */
    size_t len;   /* bytes of records in p */
    size_t cap;
    size_t bytes; /* header bytes held (the lines alone) */
    size_t lines;
} resil__http_head;

/* Keep one line as delivered. 0; RESIL_ERANGE, keeping nothing of it, when
 * the lines would then pass `limit` bytes; RESIL_ENOMEM. */
int resil__http_head_add(resil__http_head *h, const char *line, size_t n, size_t limit);

/* Hand each line, in order and as it was kept, to fn; stop at and return
 * the first nonzero fn returns. 0 when every line was handed on. */
typedef int (*resil__http_line_fn)(char *line, size_t n, void *ud);
int resil__http_head_each(const resil__http_head *h, resil__http_line_fn fn, void *ud);

/* Empty, keeping the memory unless it is larger than `keep` bytes. Inline:
 * every attempt and every call's end clears one, most often empty. */
static inline void resil__http_head_clear(resil__http_head *h, size_t keep)
{
    h->len = h->bytes = h->lines = 0;
    if (h->cap > keep) {
        free(h->p);
        h->p = NULL;
        h->cap = 0;
    }
}
void resil__http_head_free(resil__http_head *h);

/* Are the `len` bytes at `s` an HTTP token (RFC 9110: letters, digits and
 * !#$%&'*+-.^_`|~), as a header's or a method's name is? */
bool resil__http_token(const char *s, size_t len);

#endif
