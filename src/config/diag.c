/*
 * diag.c — diagnostics and the little text machinery around them.
 *
 * A configuration check is only as useful as its messages, so every
 * diagnostic carries the path of what it is about and where that was
 * written, and a key that is not ours gets the nearest key that is (by edit
 * distance: a typo is one or two edits away). The list is capped so that a
 * hostile document with a million bad entries costs bounded memory; the
 * rest are counted, not lost silently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define SUGGEST_LEN_MAX 64 /* longer words are not typos worth a suggestion */

/* Names a document spells are quoted into paths and messages; a control
 * character among them would break a diagnostic's one line. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

void resil__diag_addv(resil_config_diags *d, const char *path, uint32_t line,
                      uint32_t col, const char *fmt, va_list ap)
{
    if (d == NULL)
        return;
    if (d->len >= RESIL_CONFIG_DIAG_KEEP) {
        d->dropped++;
        return;
    }
    if (d->len % 16 == 0) {
        resil_config_diag *items = realloc(d->items, (d->len + 16) * sizeof *items);
        if (items == NULL) {
            d->dropped++;
            return;
        }
        d->items = items;
    }
    resil_config_diag *g = &d->items[d->len++];
    snprintf(g->path, sizeof g->path, "%s", path ? path : "");
    g->line = line;
    g->column = col;
    vsnprintf(g->message, sizeof g->message, fmt, ap);
    printable(g->path);
    printable(g->message);
}

void resil__diag_add(resil_config_diags *d, const char *path, uint32_t line, uint32_t col,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    resil__diag_addv(d, path, line, col, fmt, ap);
    va_end(ap);
}

static bool before(const resil_config_diag *a, const resil_config_diag *b)
{
    return a->line < b->line || (a->line == b->line && a->column < b->column);
}

/* An insertion sort: stable, and at most RESIL_CONFIG_DIAG_KEEP items. */
void resil__diags_sort(resil_config_diags *d, size_t from)
{
    if (d == NULL)
        return;
    for (size_t i = from + 1; i < d->len; i++) {
        resil_config_diag x = d->items[i];
        size_t j = i;
        while (j > from && before(&x, &d->items[j - 1])) {
            d->items[j] = d->items[j - 1];
            j--;
        }
        d->items[j] = x;
    }
}

void resil_config_diags_free(resil_config_diags *d)
{
    if (d == NULL)
        return;
    free(d->items);
    memset(d, 0, sizeof *d);
}

size_t resil_config_diag_format(const resil_config_diag *d, char *buf, size_t cap)
{
    cfg_sb sb;
    resil__sb_init(&sb, buf, cap);
    if (d == NULL)
        return 0;
    if (d->path[0] != '\0')
        resil__sb_printf(&sb, "%s%s", d->path, d->line ? " at " : ": ");
    if (d->line)
        resil__sb_printf(&sb, "%u:%u: ", d->line, d->column);
    resil__sb_printf(&sb, "%s", d->message);
    return sb.len;
}

size_t resil_config_diags_write(const resil_config_diags *d, resil_config_format f,
                                char *buf, size_t cap)
{
    cfg_sb sb;
    resil__sb_init(&sb, buf, cap);
    size_t n = d ? d->len : 0;
    if (f == RESIL_CONFIG_JSON)
        resil__sb_printf(&sb, "{\"errors\":[");
    for (size_t i = 0; i < n; i++) {
        const resil_config_diag *g = &d->items[i];
        if (f == RESIL_CONFIG_JSON) {
            resil__sb_printf(&sb, "%s", i ? "," : "");
            resil__sb_diag_json(&sb, g);
        } else {
            char line[RESIL_CONFIG_PATH_MAX + 300];
            resil_config_diag_format(g, line, sizeof line);
            resil__sb_printf(&sb, "%s\n", line);
        }
    }
    size_t dropped = d ? d->dropped : 0;
    if (f == RESIL_CONFIG_JSON)
        resil__sb_printf(&sb, "],\"more\":%zu}\n", dropped);
    else if (dropped)
        resil__sb_printf(&sb, "... and %zu more\n", dropped);
    return sb.len;
}

/* ---- names -------------------------------------------------------------- */

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

bool resil__name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (lower((unsigned char)*a) != lower((unsigned char)*b))
            return false;
    return *a == *b;
}

static const char *skip_seps(const char *s)
{
    while (*s == '-' || *s == '_' || *s == ' ')
        s++;
    return s;
}

bool resil__enum_eq(const char *a, const char *b)
{
    for (;;) {
        a = skip_seps(a);
        b = skip_seps(b);
        if (*a == '\0' || *b == '\0')
            return *a == *b;
        if (lower((unsigned char)*a) != lower((unsigned char)*b))
            return false;
        a++;
        b++;
    }
}

/* Levenshtein distance, case-insensitive, over words of at most
 * SUGGEST_LEN_MAX bytes (two rows). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[2][SUGGEST_LEN_MAX + 1];
    for (size_t j = 0; j <= lb; j++)
        row[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t *prev = row[(i - 1) & 1], *cur = row[i & 1];
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = lower((unsigned char)a[i - 1]) != lower((unsigned char)b[j - 1]);
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
    }
    return row[la & 1][lb];
}

static bool is_prefix(const char *p, const char *s)
{
    for (; *p; p++, s++)
        if (lower((unsigned char)*p) != lower((unsigned char)*s))
            return false;
    return true;
}

/* A shortened key ("Default" for DefaultTimeout) is the other common slip:
 * the one candidate it begins, if only one. */
static const char *only_extension(const char *word, const char *const *cands, size_t n)
{
    const char *found = NULL;
    if (strlen(word) < 3)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (cands[i] == NULL || !is_prefix(word, cands[i]))
            continue;
        if (found)
            return NULL;
        found = cands[i];
    }
    return found;
}

const char *resil__closest(const char *word, const char *const *cands, size_t n)
{
    size_t wl = strlen(word);
    if (wl == 0 || wl > SUGGEST_LEN_MAX)
        return NULL;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (cands[i] == NULL || strlen(cands[i]) > SUGGEST_LEN_MAX)
            continue;
        size_t d = distance(word, cands[i]);
        size_t shorter = wl < strlen(cands[i]) ? wl : strlen(cands[i]);
        size_t limit = shorter / 3 > 2 ? shorter / 3 : 2;
        if (d <= limit && d < best_d && d < wl) {
            best = cands[i];
            best_d = d;
        }
    }
    return best ? best : only_extension(word, cands, n);
}

/* ---- text ---------------------------------------------------------------- */

void resil__sb_init(cfg_sb *sb, char *buf, size_t cap)
{
    sb->buf = buf;
    sb->cap = buf ? cap : 0;
    sb->len = 0;
    if (sb->cap > 0)
        buf[0] = '\0';
}

void resil__sb_printf(cfg_sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = sb->len < sb->cap ? sb->cap - sb->len : 0;
    int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb->len += (size_t)n;
}

void resil__sb_json_str(cfg_sb *sb, const char *s)
{
    resil__sb_printf(sb, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            resil__sb_printf(sb, "\\%c", c);
        else if (c == '\n')
            resil__sb_printf(sb, "\\n");
        else if (c < 0x20)
            resil__sb_printf(sb, "\\u%04x", c);
        else
            resil__sb_printf(sb, "%c", c);
    }
    resil__sb_printf(sb, "\"");
}

void resil__sb_diag_json(cfg_sb *sb, const resil_config_diag *g)
{
    resil__sb_printf(sb, "{\"path\":");
    resil__sb_json_str(sb, g->path);
    resil__sb_printf(sb, ",\"line\":%u,\"column\":%u,\"message\":", g->line, g->column);
    resil__sb_json_str(sb, g->message);
    resil__sb_printf(sb, "}");
}

void resil__fmt_dur(resil_duration d, char *buf, size_t cap)
{
    if (d == RESIL_DURATION_MAX)
        snprintf(buf, cap, "unbounded");
    else
        resil_duration_format(d, buf, cap);
}
