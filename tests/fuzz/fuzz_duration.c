/*
 * fuzz_duration.c — the duration parser on arbitrary bytes. Beyond "no
 * crash, no read past `size`", it checks the two promises the rest of the
 * library leans on: a failure always names itself in the report with the
 * code it returned, and whatever parses formats back to text that parses to
 * the same value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resil/time.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    resil_duration d = -1;
    resil_err err = {0};
    int rc = resil_duration_parse((const char *)data, size, &d, &err);
    if (rc != 0) {
        if (rc != RESIL_ESYNTAX && rc != RESIL_ERANGE)
            abort();
        if (err.code != rc || err.message[0] == '\0')
            abort();
        return 0;
    }
    if (d < 0)
        abort();
    char text[64];
    size_t n = resil_duration_format(d, text, sizeof text);
    if (n >= sizeof text)
        abort();
    resil_duration again = -1;
    if (resil_duration_parse(text, n, &again, NULL) != 0 || again != d)
        abort();
    return 0;
}
