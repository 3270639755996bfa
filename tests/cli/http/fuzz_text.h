/*
 * fuzz_text.h — what every fuzz target of resil http starts with: the
 * input as a NUL-terminated string (its own copy, so a parser reading up to
 * the NUL never reads past the input), and a check that aborts, which the
 * fuzzer reports as a finding.
 */
#ifndef RESIL_FUZZ_TEXT_H
#define RESIL_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void check(int ok)
{
    if (!ok)
        abort();
}

/* data[0..size) and a NUL after it (heap; the caller frees it). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    check(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

#endif
