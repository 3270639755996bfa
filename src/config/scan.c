/*
 * scan.c — the located tree: where every value and member name of a JSON
 * document was written.
 *
 * jansson decides whether the text is JSON (and says where it is not), and
 * it decodes every scalar, so this file never has an opinion on JSON
 * grammar, escapes or numbers. What jansson's values lack is a position,
 * which every diagnostic needs; so once jansson has accepted the text, one
 * pass over the same bytes records, for each value, its line and column,
 * its member name and its bytes. Because the text is known to be valid the
 * pass is small, but it still checks every byte it relies on, so a
 * disagreement could only end the scan, never read past the end.
 *
 * Columns count characters (UTF-8 sequences), 1-based, as jansson's do.
 * Nodes live in one array addressed by index (it grows while scanning) and
 * decoded strings in one arena sized by the text, which no decoding can
 * outgrow.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define SCAN_DEPTH_MAX 4096 /* jansson itself stops at 2048 */

typedef struct scanner {
    const char *p, *end;
    uint32_t line, col;
    cfg_doc *doc;
    int depth;
} scanner;

static void advance(scanner *s)
{
    unsigned char c = (unsigned char)*s->p++;
    if (c == '\n') {
        s->line++;
        s->col = 1;
    } else if ((c & 0xC0) != 0x80) {
        s->col++;
    }
}

static void skip_ws(scanner *s)
{
    while (s->p < s->end &&
           (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        advance(s);
}

static bool at(const scanner *s, char c) { return s->p < s->end && *s->p == c; }

/* A new node's index, or 0 when out of memory (0 is the root, never new). */
static uint32_t new_node(scanner *s)
{
    cfg_doc *d = s->doc;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        if (cap > UINT32_MAX)
            return 0;
        cfg_node *nodes = realloc(d->nodes, cap * sizeof *nodes);
        if (nodes == NULL)
            return 0;
        d->nodes = nodes;
        d->cap = cap;
    }
    memset(&d->nodes[d->n], 0, sizeof d->nodes[d->n]);
    d->nodes[d->n].line = s->line;
    d->nodes[d->n].col = s->col;
    return (uint32_t)d->n++;
}

/* Decode the string token at s->p into the arena; 0 or a negative code. */
static int scan_string(scanner *s, const char **out, size_t *out_len)
{
    const char *start = s->p;
    bool escaped = false;
    advance(s); /* the opening quote */
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\') {
            escaped = true;
            advance(s);
            if (s->p == s->end)
                return RESIL_ESYNTAX;
        }
        advance(s);
    }
    if (s->p == s->end)
        return RESIL_ESYNTAX;
    advance(s); /* the closing quote */

    const char *text = start + 1;
    size_t len = (size_t)(s->p - start) - 2;
    json_t *decoded = NULL;
    if (escaped) {
        decoded = json_loadb(start, (size_t)(s->p - start), JSON_DECODE_ANY, NULL);
        if (!json_is_string(decoded)) {
            json_decref(decoded);
            return RESIL_ESYNTAX;
        }
        text = json_string_value(decoded);
        len = json_string_length(decoded);
    }
    cfg_doc *d = s->doc;
    int rc = 0;
    if (len + 1 > d->arena_cap - d->used) {
        rc = RESIL_ESYNTAX; /* cannot happen: decoding never grows text */
    } else {
        char *dst = d->arena + d->used;
        memcpy(dst, text, len);
        dst[len] = '\0';
        d->used += len + 1;
        *out = dst;
        *out_len = len;
    }
    json_decref(decoded);
    return rc;
}

static int scan_value(scanner *s, uint32_t *out);

/* The members or elements of the container node `self`, whose opening
 * bracket s->p is at. */
static int scan_container(scanner *s, uint32_t self, bool object)
{
    char close = object ? '}' : ']';
    uint32_t last = 0;
    advance(s);
    skip_ws(s);
    if (at(s, close)) {
        advance(s);
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        uint32_t key_line = 0, key_col = 0;
        skip_ws(s);
        if (object) {
            if (!at(s, '"'))
                return RESIL_ESYNTAX;
            key_line = s->line;
            key_col = s->col;
            int rc = scan_string(s, &key, &key_len);
            if (rc != 0)
                return rc;
            skip_ws(s);
            if (!at(s, ':'))
                return RESIL_ESYNTAX;
            advance(s);
        }
        uint32_t child;
        int rc = scan_value(s, &child);
        if (rc != 0)
            return rc;
        cfg_node *c = &s->doc->nodes[child];
        c->key = key;
        c->key_line = key_line;
        c->key_col = key_col;
        if (last == 0)
            s->doc->nodes[self].first = child;
        else
            s->doc->nodes[last].next = child;
        last = child;
        s->doc->nodes[self].count++;
        skip_ws(s);
        if (at(s, ',')) {
            advance(s);
            continue;
        }
        if (!at(s, close))
            return RESIL_ESYNTAX;
        advance(s);
        return 0;
    }
}

static int scan_literal(scanner *s, const char *word, cfg_type type, uint32_t self)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return RESIL_ESYNTAX;
    for (size_t i = 0; i < n; i++)
        advance(s);
    s->doc->nodes[self].type = type;
    return 0;
}

/* memchr, not strchr: strchr finds a NUL byte in any set. */
static bool number_char(char c)
{
    return (c >= '0' && c <= '9') || memchr("+-.eE", c, 5) != NULL;
}

static int scan_number(scanner *s, uint32_t self)
{
    const char *start = s->p;
    while (s->p < s->end && number_char(*s->p))
        advance(s);
    if (s->p == start)
        return RESIL_ESYNTAX;
    cfg_node *n = &s->doc->nodes[self];
    n->type = CFG_NUMBER;
    n->tok = start;
    n->tok_len = (size_t)(s->p - start);
    return 0;
}

static int scan_value(scanner *s, uint32_t *out)
{
    skip_ws(s);
    if (s->p == s->end || ++s->depth > SCAN_DEPTH_MAX)
        return RESIL_ESYNTAX;
    uint32_t self = new_node(s);
    if (self == 0 && s->doc->n != 1)
        return RESIL_ENOMEM;
    *out = self;
    int rc;
    switch (*s->p) {
    case '{':
        s->doc->nodes[self].type = CFG_OBJECT;
        rc = scan_container(s, self, true);
        break;
    case '[':
        s->doc->nodes[self].type = CFG_ARRAY;
        rc = scan_container(s, self, false);
        break;
    case '"': {
        const char *str = NULL;
        size_t len = 0;
        const char *tok = s->p;
        rc = scan_string(s, &str, &len);
        cfg_node *n = &s->doc->nodes[self];
        n->type = CFG_STRING;
        n->str = str;
        n->str_len = len;
        n->tok = tok;
        n->tok_len = (size_t)(s->p - tok);
        break;
    }
    case 't':
        rc = scan_literal(s, "true", CFG_TRUE, self);
        break;
    case 'f':
        rc = scan_literal(s, "false", CFG_FALSE, self);
        break;
    case 'n':
        rc = scan_literal(s, "null", CFG_NULL, self);
        break;
    default:
        rc = scan_number(s, self);
        break;
    }
    s->depth--;
    return rc;
}

static void jansson_error(resil_config_diags *diags, const json_error_t *e)
{
    uint32_t line = e->line > 0 ? (uint32_t)e->line : 0;
    uint32_t col = line == 0 ? 0 : e->column > 0 ? (uint32_t)e->column : 1;
    resil__diag_add(diags, "", line, col, "invalid JSON: %s", e->text);
}

int resil__cfg_scan(const char *text, size_t len, cfg_doc *doc, resil_config_diags *diags)
{
    memset(doc, 0, sizeof *doc);
    json_error_t e;
    /* Integers as reals: one past any integer type is still JSON, refused
     * by the key that holds it rather than as text that is not JSON. */
    json_t *checked = json_loadb(text, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &e);
    if (checked == NULL) {
        jansson_error(diags, &e);
        return RESIL_ESYNTAX;
    }
    json_decref(checked);

    doc->arena_cap = len + 1;
    doc->arena = malloc(doc->arena_cap);
    if (doc->arena == NULL)
        return RESIL_ENOMEM;
    scanner s = {text, text + len, 1, 1, doc, 0};
    uint32_t root;
    int rc = scan_value(&s, &root);
    if (rc == RESIL_ESYNTAX)
        resil__diag_add(diags, "", s.line, s.col,
                        "invalid JSON: the scanner and jansson disagree here");
    if (rc != 0)
        resil__cfg_doc_free(doc);
    return rc;
}

void resil__cfg_doc_free(cfg_doc *doc)
{
    free(doc->nodes);
    free(doc->arena);
    memset(doc, 0, sizeof *doc);
}

int resil__cfg_number(const cfg_node *n, double *d, long long *i, bool *whole)
{
    const char *text;
    size_t len;
    if (n->type == CFG_NUMBER) {
        text = n->tok;
        len = n->tok_len;
    } else if (n->type == CFG_STRING) {
        text = n->str;
        len = n->str_len;
    } else {
        return RESIL_EINVAL;
    }
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    if (v == NULL) /* an integer past 64 bits is the real it is */
        v = json_loadb(text, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
    int rc = 0;
    if (json_is_integer(v)) {
        *whole = true;
        *i = json_integer_value(v);
        *d = (double)*i;
    } else if (json_is_real(v)) {
        *whole = false;
        *i = 0;
        *d = json_real_value(v);
    } else {
        rc = RESIL_EINVAL;
    }
    json_decref(v);
    return rc;
}
