/*
 * fuzz_http_urlencode.c — --data-urlencode's encoding on arbitrary bytes,
 * and its NAME=CONTENT forms on arbitrary text (without '@': a fuzzer must
 * not read files).
 *
 * The properties: the encoding holds only unreserved characters, '+' and
 * %XX with capital hex digits, within 3 bytes per input byte, and decodes
 * back to the input; "NAME=CONTENT" gives NAME '=' and CONTENT's encoding,
 * "=CONTENT" and "CONTENT" give the encoding alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "http_opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void check_decodes(const char *enc, size_t n, const uint8_t *want, size_t want_len)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++, k++) {
        check(k < want_len);
        unsigned char c;
        if (enc[i] == '+') {
            c = ' ';
        } else if (enc[i] == '%') {
            check(i + 2 < n && hex(enc[i + 1]) >= 0 && hex(enc[i + 2]) >= 0);
            c = (unsigned char)(hex(enc[i + 1]) * 16 + hex(enc[i + 2]));
            i += 2;
        } else {
            c = (unsigned char)enc[i];
            check((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_' || c == '~');
        }
        check(c == want[k]);
    }
    check(k == want_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(3 * size + 1);
    check(buf != NULL);
    size_t n = http_urlencode((const char *)data, size, buf);
    check(n <= 3 * size && buf[n] == '\0');
    check_decodes(buf, n, data, size);
    free(buf);

    char *text = fuzz_text(data, size);
    if (strchr(text, '@') == NULL) {
        static char *argv[] = {"resil fuzz", NULL};
        args a;
        args_init(&a, "resil fuzz", 1, argv);
        char *piece = NULL;
        size_t len = 0;
        check(http_urlencode_piece(&a, text, &piece, &len) == 0);
        const char *eq = strchr(text, '=');
        size_t name = eq != NULL ? (size_t)(eq - text) : 0;
        const char *content = eq != NULL ? eq + 1 : text;
        if (name > 0)
            check(len > name && memcmp(piece, text, name) == 0 && piece[name] == '=');
        size_t skip = name > 0 ? name + 1 : 0;
        check_decodes(piece + skip, len - skip, (const uint8_t *)content, strlen(content));
        free(piece);
    }
    free(text);
    return 0;
}
