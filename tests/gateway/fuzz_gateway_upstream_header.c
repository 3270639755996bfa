/*
 * fuzz_gateway_upstream_header.c — the gateway's capture of an upstream
 * response's header lines (gw_upstream_header_line(), the core of
 * on_header in gateway_upstream.c), on arbitrary bytes as libcurl might
 * hand them over: with or without CRLF, folded, binary.
 *
 * The promises: a status line is exactly a line starting "HTTP/"; a field
 * kept has a token name (never a hop-by-hop one) followed by ':' at the
 * start of the line, and a value that lies within the line, holds no NUL,
 * CR or LF and has no space or tab at either end. Whatever is kept is what
 * the saved-header reader reads back, byte for byte.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *line = (const char *)data;
    gw_field f;
    gw_line_kind kind = gw_upstream_header_line(line, size, &f);
    if (kind == GW_LINE_STATUS) {
        check(size >= 5 && memcmp(line, "HTTP/", 5) == 0);
        return 0;
    }
    if (kind == GW_LINE_SKIP)
        return 0;
    check(kind == GW_LINE_FIELD);
    check(f.name == line && f.name_len > 0 && f.name_len < size && line[f.name_len] == ':');
    check(args_token(f.name, f.name_len));
    check(!gw_hop_by_hop(f.name, f.name_len));
    check(f.value > f.name + f.name_len && f.value + f.value_len <= line + size);
    for (size_t i = 0; i < f.value_len; i++)
        check(f.value[i] != '\0' && f.value[i] != '\r' && f.value[i] != '\n');
    if (f.value_len > 0)
        check(f.value[0] != ' ' && f.value[0] != '\t' && f.value[f.value_len - 1] != ' ' &&
              f.value[f.value_len - 1] != '\t');
    /* Saved as "Name: value\r\n", it reads back as the same field. */
    size_t saved_len = f.name_len + f.value_len + 4;
    char *saved = malloc(saved_len);
    check(saved != NULL);
    memcpy(saved, f.name, f.name_len);
    memcpy(saved + f.name_len, ": ", 2);
    memcpy(saved + f.name_len + 2, f.value, f.value_len);
    memcpy(saved + saved_len - 2, "\r\n", 2);
    size_t pos = 0;
    gw_field back;
    check(gw_saved_header_next(saved, saved_len, &pos, &back));
    check(back.name_len == f.name_len && memcmp(back.name, f.name, f.name_len) == 0);
    check(back.value_len == f.value_len && memcmp(back.value, f.value, f.value_len) == 0);
    check(pos == saved_len && !gw_saved_header_next(saved, saved_len, &pos, &back));
    free(saved);
    return 0;
}
