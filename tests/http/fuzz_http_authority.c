/*
 * fuzz_http_authority.c — the breaker key of arbitrary URL text, and the
 * method-list parser.
 *
 * The properties: the authority scanner writes within the buffer it is
 * given, at every capacity; a success is a NUL-terminated
 * "scheme://host[:port]" whose scheme is a scheme (a letter, then letters,
 * digits, '+', '-', '.'), whose authority holds no '/', '?' or '#', with no
 * upper-case ASCII in scheme and host, and which is its own key (normalising twice changes nothing); a failure
 * leaves an empty string; a key that fits a larger buffer and not a
 * smaller one is exactly one byte too long for it. The method parser
 * returns only known bits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resil/http.h"

#define CAP 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static bool scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
           c == '.';
}

static void check_key(const char *key)
{
    const char *sep = strstr(key, "://");
    check(sep != NULL && sep != key && key[0] >= 'a' && key[0] <= 'z');
    for (const char *p = key; p < sep; p++)
        check(scheme_char(*p));
    check(strpbrk(sep + 3, "/?#") == NULL);
    for (const char *p = key; *p != '\0'; p++)
        check(!(*p >= 'A' && *p <= 'Z'));
    char again[CAP];
    check(resil_http_authority(key, again, sizeof again) == 0);
    check(strcmp(again, key) == 0);
}

static void check_authority(const char *url)
{
    char full[CAP];
    int rc = resil_http_authority(url, full, sizeof full);
    check(rc == 0 || rc == RESIL_ESYNTAX || rc == RESIL_ERANGE);
    if (rc != 0) {
        check(full[0] == '\0');
        return;
    }
    check_key(full);
    size_t len = strlen(full);
    for (size_t cap = 1; cap <= len + 1; cap++) {
        char *small = malloc(cap);
        int r = resil_http_authority(url, small, cap);
        check(cap > len ? r == 0 && strcmp(small, full) == 0
                        : r == RESIL_ERANGE && small[0] == '\0');
        free(small);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= CAP)
        return 0;
    char text[CAP];
    memcpy(text, data, size);
    text[size] = '\0';
    check_authority(text);
    unsigned bits = 0;
    if (resil_http_methods_parse(text, &bits) == 0)
        check(bits != 0 && (bits & ~((RESIL_HTTP_OTHER << 1) - 1)) == 0);
    return 0;
}
