/*
 * fuzz_http_write_out.c — `resil http -w FORMAT` on arbitrary text: the
 * format parser, then the renderer over fixed values.
 *
 * The properties: a rejection is RESIL_EINVAL naming the unknown variable,
 * and only a "%{" that closes on a name no table row has is rejected; an
 * accepted format renders without reading past it, and a format with no
 * '%' or '\' renders to itself. The value callback writes a known marker
 * so every variable shows in the output.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "write_out.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void value(wo_var var, const char *header, char *buf, size_t cap, void *ud)
{
    (void)ud;
    check(var >= 0 && var < WO_VAR_COUNT);
    check(header != NULL);
    snprintf(buf, cap, "<%d>", (int)var);
}

/* Is there a "%{NAME}" whose NAME is no variable (nor stdout, stderr)? */
static bool has_unknown(const char *f)
{
    for (const char *p = f; (p = strstr(p, "%")) != NULL; p++) {
        if (p[1] == '%') {
            p++;
            continue;
        }
        if (p[1] != '{')
            continue;
        const char *close = strchr(p + 2, '}');
        if (close == NULL)
            return false;
        size_t n = (size_t)(close - (p + 2));
        bool known = (n == 6 && (!memcmp(p + 2, "stdout", 6) || !memcmp(p + 2, "stderr", 6)));
        for (int v = 0; v < WO_HEADER && !known; v++)
            known = strlen(write_out_name((wo_var)v)) == n && !memcmp(write_out_name((wo_var)v), p + 2, n);
        if (!known)
            return true;
        p = close;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    write_out *w = NULL;
    resil_err err = {0};
    int rc = write_out_parse(text, &w, &err);
    if (rc != 0) {
        check(rc == RESIL_EINVAL && strstr(err.message, "unknown variable") != NULL);
        check(has_unknown(text));
        free(text);
        return 0;
    }
    char *out = NULL;
    size_t out_len = 0;
    FILE *mem = open_memstream(&out, &out_len);
    check(mem != NULL);
    write_out_render(w, mem, mem, value, NULL);
    fclose(mem);
    if (strpbrk(text, "%\\") == NULL)
        check(out_len == strlen(text) && memcmp(out, text, out_len) == 0);
    free(out);
    write_out_free(w);
    free(text);
    return 0;
}
