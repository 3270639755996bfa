/*
 * fuzz_gateway_saved_headers.c — the replay of saved response headers
 * (gw_saved_header_next(), the line splitting of add_saved_headers in
 * gateway_http.c), on an arbitrary block such as a store or a hand-edited
 * database could hold.
 *
 * The promises: the walk ends, moving forward on every field; each field
 * lies within the block, has a token name and a value without NUL, CR or
 * LF (what MHD_add_response_header() may be given); and the fields written
 * back as "Name: value\r\n" lines read back as the same fields.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FIELDS 4096

static void check(int ok)
{
    if (!ok)
        abort();
}

static size_t walk(const char *blob, size_t len, gw_field *fields)
{
    size_t pos = 0, n = 0, last = 0;
    gw_field f;
    while (gw_saved_header_next(blob, len, &pos, &f)) {
        check(pos > last && pos <= len && n < MAX_FIELDS);
        last = pos;
        check(f.name >= blob && f.name_len > 0 && f.name + f.name_len <= blob + len);
        check(f.value >= f.name + f.name_len && f.value + f.value_len <= blob + len);
        check(args_token(f.name, f.name_len));
        for (size_t i = 0; i < f.value_len; i++)
            check(f.value[i] != '\0' && f.value[i] != '\r' && f.value[i] != '\n');
        fields[n++] = f;
    }
    check(pos == len);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gw_field first[MAX_FIELDS], second[MAX_FIELDS];
    size_t n = walk((const char *)data, size, first);
    size_t cap = size + 4 * n + 1, used = 0;
    char *again = malloc(cap);
    check(again != NULL);
    for (size_t i = 0; i < n; i++) {
        memcpy(again + used, first[i].name, first[i].name_len);
        used += first[i].name_len;
        memcpy(again + used, ": ", 2);
        used += 2;
        memcpy(again + used, first[i].value, first[i].value_len);
        used += first[i].value_len;
        memcpy(again + used, "\r\n", 2);
        used += 2;
    }
    check(walk(again, used, second) == n);
    for (size_t i = 0; i < n; i++) {
        check(second[i].name_len == first[i].name_len &&
              memcmp(second[i].name, first[i].name, first[i].name_len) == 0);
        check(second[i].value_len == first[i].value_len &&
              memcmp(second[i].value, first[i].value, first[i].value_len) == 0);
    }
    free(again);
    return 0;
}
