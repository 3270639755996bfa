/*
 * schema.c — the "Resilience" section: every key, its type, default and
 * bound, and the checks between keys.
 *
 * Each section is a table of fields — key, alias, type, where the value
 * goes, its bound — and one walker applies any table to any object: it
 * reports unknown keys (with the nearest known one), duplicates (also those
 * that differ only in case, or an alias next to its key), wrong types and
 * values out of bounds, and goes on after each error, so that one pass finds
 * them all. What a table cannot say (BackoffStrategy against Jitter, a
 * breaker kind inferred from the keys present, levels that must climb) is a
 * short `finish` step per section; the library's own validate() then runs
 * as the last word on the assembled options, so the two can never drift
 * apart silently.
 *
 * Values land in a per-section scratch struct whose first member is the
 * library's option struct, prefilled with the defaults; the document wins
 * field by field. Errors never stop the walk, but any error discards the
 * whole result: a failing document changes nothing.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define FIELDS_MAX 32
#define TEXT_MAX 48 /* a quoted value in a message */

/* ---- the walk's context ---------------------------------------------------- */

typedef struct vctx {
    const cfg_doc *doc;
    resil_config *cfg;
    resil_config_diags *diags;
    size_t errors;
    bool nomem;
    char path[RESIL_CONFIG_PATH_MAX];
    size_t plen;
} vctx;

/* Append to the path, cut at its capacity; returns where it stood. */
static size_t append(vctx *v, const char *text)
{
    size_t old = v->plen, n = strlen(text);
    if (n > sizeof v->path - 1 - old)
        n = sizeof v->path - 1 - old;
    memcpy(v->path + old, text, n);
    v->plen = old + n;
    v->path[v->plen] = '\0';
    return old;
}

static size_t push(vctx *v, const char *seg)
{
    size_t old = v->plen;
    if (old > 0)
        append(v, ".");
    append(v, seg);
    return old;
}

static size_t push_index(vctx *v, size_t i)
{
    char index[32];
    snprintf(index, sizeof index, "[%zu]", i);
    return append(v, index);
}

static void pop(vctx *v, size_t old)
{
    v->plen = old;
    v->path[old] = '\0';
}

static void fail_at(vctx *v, uint32_t line, uint32_t col, const char *fmt, ...)
    RESIL_PRINTF(4, 5);
static void fail_at(vctx *v, uint32_t line, uint32_t col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    resil__diag_addv(v->diags, v->path, line, col, fmt, ap);
    va_end(ap);
    v->errors++;
}

/* Errors about a value point at the value; about a key, at the key. */
#define fail_value(v, n, ...) fail_at((v), (n)->line, (n)->col, __VA_ARGS__)
#define fail_key(v, n, ...) fail_at((v), (n)->key_line, (n)->key_col, __VA_ARGS__)

/* The value as the user wrote it, for "got ...". */
static const char *shown(const cfg_node *n, char *buf, size_t cap)
{
    switch (n->type) {
    case CFG_OBJECT:
        return "an object";
    case CFG_ARRAY:
        return "an array";
    case CFG_TRUE:
        return "true";
    case CFG_FALSE:
        return "false";
    case CFG_NULL:
        return "null";
    case CFG_NUMBER:
        snprintf(buf, cap, "%.*s", n->tok_len > TEXT_MAX ? TEXT_MAX : (int)n->tok_len, n->tok);
        return buf;
    case CFG_STRING:
        break;
    }
    size_t keep = n->str_len > TEXT_MAX ? TEXT_MAX : n->str_len;
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < keep && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)n->str[i];
        buf[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (keep < n->str_len && o + 5 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

#define GOT(n) shown((n), got_buf, sizeof got_buf)

/* ---- fields -------------------------------------------------------------- */

typedef enum ftype {
    F_U32,
    F_I32,
    F_I64,
    F_DOUBLE,
    F_BOOL,
    F_DUR,
    F_ENUM,
    F_CUSTOM
} ftype;

enum {
    LO_OPEN = 1,   /* the lower bound is excluded */
    HI_OPEN = 2,
    NULL_MAX = 4,  /* null means RESIL_DURATION_MAX (no cap) */
    NULL_ZERO = 8, /* null means 0 (none) */
    PERCENT = 16   /* said as "a percentage" */
};

typedef struct enum_name {
    const char *name;
    int value;
} enum_name;

typedef struct field field;
typedef void (*custom_fn)(vctx *v, const cfg_node *n, void *target);

struct field {
    const char *key;
    const char *alias;
    ftype type;
    unsigned flags;
    size_t off;
    double lo, hi;         /* numbers; durations in ns */
    const enum_name *names; /* F_ENUM, ended by a NULL name */
    custom_fn custom;
};

/* The fields of one object as they were given. */
typedef struct given {
    const cfg_node *node[FIELDS_MAX];
    bool bad[FIELDS_MAX]; /* given, but its value was refused */
} given;

/* Were all of these fields, when given, given well? */
static bool all_good(const given *g, size_t a, size_t b, size_t c)
{
    return !g->bad[a] && !g->bad[b] && !g->bad[c];
}

static const char *const foreign_hints[][2] = {
    {"MaxAttempts", "say MaxRetryAttempts, which counts the retries after the first "
                    "attempt"},
};

static void unknown_key(vctx *v, const cfg_node *n, const field *f, size_t nf)
{
    for (size_t i = 0; i < sizeof foreign_hints / sizeof foreign_hints[0]; i++) {
        if (resil__name_eq(n->key, foreign_hints[i][0])) {
            fail_key(v, n, "unknown key: %s", foreign_hints[i][1]);
            return;
        }
    }
    const char *cands[FIELDS_MAX * 2];
    size_t nc = 0;
    for (size_t i = 0; i < nf; i++) {
        cands[nc++] = f[i].key;
        if (f[i].alias)
            cands[nc++] = f[i].alias;
    }
    const char *s = resil__closest(n->key, cands, nc);
    if (s)
        fail_key(v, n, "unknown key (did you mean %s?)", s);
    else
        fail_key(v, n, "unknown key");
}

static void *at_off(void *target, size_t off) { return (char *)target + off; }

static bool null_allowed(vctx *v, const cfg_node *n, const field *f, void *target)
{
    if (n->type != CFG_NULL || !(f->flags & (NULL_MAX | NULL_ZERO)))
        return false;
    *(resil_duration *)at_off(target, f->off) = f->flags & NULL_MAX ? RESIL_DURATION_MAX : 0;
    return true;
}

/* "in (0,1]", "a whole number >= 1", "a whole number in [1,1000]": a
 * whole number's upper bound is not worth saying when it is its type's,
 * unless the value is `over` it. */
static void describe_bound(const field *f, bool whole, bool over, char *buf, size_t cap)
{
    const char *kind = f->flags & PERCENT ? "a percentage " : whole ? "a whole number " : "";
    int digits = whole ? 0 : 15;
    if (isinf(f->hi) || (whole && f->hi >= (double)INT32_MAX && !over))
        snprintf(buf, cap, "%s%s %.*g", kind, f->flags & LO_OPEN ? ">" : ">=",
                 whole ? 20 : digits, f->lo);
    else if (whole)
        snprintf(buf, cap, "%sin [%.0f,%.0f]", kind, f->lo, f->hi);
    else
        snprintf(buf, cap, "%sin %c%g,%g%c", kind, f->flags & LO_OPEN ? '(' : '[', f->lo,
                 f->hi, f->flags & HI_OPEN ? ')' : ']');
}

/* Whole numbers are compared as whole numbers: 2^53 + 1 is past a bound
 * of 2^53 though both are one double. Their bounds are closed. */
static bool in_bound(const field *f, double d, bool whole, long long i)
{
    if (whole)
        return i >= (long long)f->lo && i <= (long long)f->hi;
    if (f->flags & LO_OPEN ? !(d > f->lo) : !(d >= f->lo))
        return false;
    return f->flags & HI_OPEN ? d < f->hi : d <= f->hi;
}

static void set_number(vctx *v, const cfg_node *n, const field *f, void *target)
{
    char got_buf[TEXT_MAX + 8], rule[96];
    bool whole_wanted = f->type != F_DOUBLE;
    double d = 0;
    long long i = 0;
    bool whole = false;
    bool number = resil__cfg_number(n, &d, &i, &whole) == 0 && isfinite(d);
    if (!number || (whole_wanted && !whole) || !in_bound(f, d, whole_wanted, i)) {
        bool over = number && (whole_wanted && whole ? i > (long long)f->hi : d > f->hi);
        describe_bound(f, whole_wanted, over, rule, sizeof rule);
        fail_value(v, n, "must be %s, got %s", rule, GOT(n));
        return;
    }
    void *p = at_off(target, f->off);
    switch (f->type) {
    case F_U32:
        *(uint32_t *)p = (uint32_t)i;
        break;
    case F_I32:
        *(int32_t *)p = (int32_t)i;
        break;
    case F_I64:
        *(int64_t *)p = (int64_t)i;
        break;
    default:
        *(double *)p = d;
        break;
    }
}

static void set_bool(vctx *v, const cfg_node *n, const field *f, void *target)
{
    char got_buf[TEXT_MAX + 8];
    bool *p = at_off(target, f->off);
    if (n->type == CFG_TRUE || (n->type == CFG_STRING && resil__name_eq(n->str, "true")))
        *p = true;
    else if (n->type == CFG_FALSE || (n->type == CFG_STRING && resil__name_eq(n->str, "false")))
        *p = false;
    else
        fail_value(v, n, "must be true or false, got %s", GOT(n));
}

/* The parser's reason without its own "duration "...": " preamble. */
static const char *reason_of(const resil_err *e)
{
    const char *r = strstr(e->message, "\": ");
    return r ? r + 3 : e->message;
}

/* A duration string; 0 with *out set, or -1 after reporting. */
static int parse_duration(vctx *v, const cfg_node *n, resil_duration *out)
{
    char got_buf[TEXT_MAX + 8];
    if (n->type != CFG_STRING) {
        fail_value(v, n, "must be a duration such as \"30s\" or \"00:00:30\", got %s", GOT(n));
        return -1;
    }
    resil_err e = {0, ""};
    if (resil_duration_parse(n->str, n->str_len, out, &e) != 0) {
        fail_value(v, n, "must be a duration such as \"30s\" or \"00:00:30\", got %s: %s",
                   GOT(n), reason_of(&e));
        return -1;
    }
    return 0;
}

static void set_duration(vctx *v, const cfg_node *n, const field *f, void *target)
{
    char got_buf[TEXT_MAX + 8], lo[32];
    resil_duration d;
    if (null_allowed(v, n, f, target) || parse_duration(v, n, &d) != 0)
        return;
    resil_duration min = (resil_duration)f->lo;
    if (f->flags & LO_OPEN ? d <= min : d < min) {
        resil_duration_format(min, lo, sizeof lo);
        fail_value(v, n, "must be %s %s%s, got %s", f->flags & LO_OPEN ? ">" : ">=",
                   min == 0 ? "0" : lo, f->flags & NULL_ZERO ? " (0 or null = none)" : "",
                   GOT(n));
        return;
    }
    *(resil_duration *)at_off(target, f->off) = d;
}

/* An enum value; the value, or -1 after reporting. */
static int parse_enum(vctx *v, const cfg_node *n, const enum_name *names)
{
    char got_buf[TEXT_MAX + 8], list[256];
    if (n->type == CFG_STRING) {
        for (const enum_name *e = names; e->name; e++)
            if (resil__enum_eq(n->str, e->name))
                return e->value;
    }
    cfg_sb sb;
    resil__sb_init(&sb, list, sizeof list);
    const char *cands[32];
    size_t nc = 0;
    for (const enum_name *e = names; e->name; e++) {
        resil__sb_printf(&sb, "%s%s", e == names ? "" : e[1].name ? ", " : " or ", e->name);
        if (nc < 32)
            cands[nc++] = e->name;
    }
    const char *s = n->type == CFG_STRING ? resil__closest(n->str, cands, nc) : NULL;
    if (s)
        fail_value(v, n, "must be %s, got %s (did you mean %s?)", list, GOT(n), s);
    else
        fail_value(v, n, "must be %s, got %s", list, GOT(n));
    return -1;
}

static void set_field(vctx *v, const cfg_node *n, const field *f, void *target)
{
    switch (f->type) {
    case F_U32:
    case F_I32:
    case F_I64:
    case F_DOUBLE:
        set_number(v, n, f, target);
        return;
    case F_BOOL:
        set_bool(v, n, f, target);
        return;
    case F_DUR:
        set_duration(v, n, f, target);
        return;
    case F_ENUM: {
        int e = parse_enum(v, n, f->names);
        if (e >= 0)
            *(int *)at_off(target, f->off) = e;
        return;
    }
    case F_CUSTOM:
        f->custom(v, n, target);
        return;
    }
}

static bool is_object(vctx *v, const cfg_node *n)
{
    char got_buf[TEXT_MAX + 8];
    if (n->type == CFG_OBJECT)
        return true;
    fail_value(v, n, "must be an object, got %s", GOT(n));
    return false;
}

/* Apply a field table to an object's members. */
static void apply(vctx *v, const cfg_node *obj, const field *f, size_t nf, void *target,
                  given *g)
{
    memset(g, 0, sizeof *g);
    if (!is_object(v, obj))
        return;
    for (const cfg_node *m = cfg_child(v->doc, obj); m; m = cfg_next(v->doc, m)) {
        size_t i = 0;
        while (i < nf && !resil__name_eq(m->key, f[i].key) &&
               !(f[i].alias && resil__name_eq(m->key, f[i].alias)))
            i++;
        if (i == nf) {
            size_t old = push(v, m->key);
            unknown_key(v, m, f, nf);
            pop(v, old);
            continue;
        }
        size_t old = push(v, f[i].key);
        if (g->node[i]) {
            fail_key(v, m, "duplicate key: %s is already given at %u:%u", f[i].key,
                     g->node[i]->key_line, g->node[i]->key_col);
        } else {
            size_t before = v->errors;
            g->node[i] = m;
            set_field(v, m, &f[i], target);
            g->bad[i] = v->errors != before;
        }
        pop(v, old);
    }
}

/* Report a cross-field error at field i's value (or at the object when
 * the field was not given). */
static void fail_field(vctx *v, const cfg_node *obj, const field *f, const given *g, size_t i,
                       const char *fmt, ...) RESIL_PRINTF(6, 7);
static void fail_field(vctx *v, const cfg_node *obj, const field *f, const given *g, size_t i,
                       const char *fmt, ...)
{
    const cfg_node *n = g->node[i] ? g->node[i] : obj;
    size_t old = g->node[i] ? push(v, f[i].key) : v->plen;
    va_list ap;
    va_start(ap, fmt);
    resil__diag_addv(v->diags, v->path, n->line, n->col, fmt, ap);
    va_end(ap);
    v->errors++;
    pop(v, old);
}

/* The library's validate() as the last word, reported at the object. */
static void library_check(vctx *v, const cfg_node *obj, int rc, const resil_err *e)
{
    if (rc != 0)
        fail_value(v, obj, "%s", e->message);
}

#define FIELD_COUNT(t) (sizeof(t) / sizeof((t)[0]))
#define NUM(key, type, st, member, lo, hi, flags)                                     \
    {key, NULL, type, flags, offsetof(st, member), lo, hi, NULL, NULL}
#define DUR(key, st, member, lo, flags)                                               \
    {key, NULL, F_DUR, flags, offsetof(st, member), (double)(lo), 0, NULL, NULL}
#define BOOLF(key, st, member) {key, NULL, F_BOOL, 0, offsetof(st, member), 0, 0, NULL, NULL}
#define ENUMF(key, st, member, names)                                                 \
    {key, NULL, F_ENUM, 0, offsetof(st, member), 0, 0, names, NULL}
#define CUSTOM(key, fn) {key, NULL, F_CUSTOM, 0, 0, 0, 0, NULL, fn}

/* ---- Retry ----------------------------------------------------------------- */

typedef struct retry_scratch {
    resil_config_retry r;
    int strategy; /* kind | (jitter + 1) << 8; the jitter part 0 = none implied */
    int jitter;
    bool use_jitter;
    int retry_after;
    bool should_retry_after;
    int unsafe_mode;
    cfg_retry_more more; /* Delays, DisableFor, RetryAfterHeaders as read */
    size_t ndelays, nheaders;
} retry_scratch;

#define STRATEGY(kind, jitter) ((kind) | ((jitter) + 1) << 8)

static const enum_name backoff_strategies[] = {
    {"Constant", RESIL_BACKOFF_CONSTANT},
    {"Fixed", RESIL_BACKOFF_CONSTANT},
    {"Linear", RESIL_BACKOFF_LINEAR},
    {"Exponential", RESIL_BACKOFF_EXPONENTIAL},
    {"Fibonacci", RESIL_BACKOFF_FIBONACCI},
    {"ExponentialWithJitter", STRATEGY(RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_POLLY)},
    {"FullJitter", STRATEGY(RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_FULL)},
    {"DecorrelatedJitter", STRATEGY(RESIL_BACKOFF_EXPONENTIAL, RESIL_JITTER_DECORRELATED)},
    {NULL, 0},
};

static const enum_name jitters[] = {
    {"None", RESIL_JITTER_NONE},
    {"Full", RESIL_JITTER_FULL},
    {"Equal", RESIL_JITTER_EQUAL},
    {"Decorrelated", RESIL_JITTER_DECORRELATED},
    {"Proportional", RESIL_JITTER_PROPORTIONAL},
    {"Polly", RESIL_JITTER_POLLY},
    {NULL, 0},
};

static const enum_name retry_after_modes[] = {
    {"Honor", RESIL_RETRY_AFTER_HONOR},
    {"Honour", RESIL_RETRY_AFTER_HONOR},
    {"Ignore", RESIL_RETRY_AFTER_IGNORE},
    {"Bounded", RESIL_RETRY_AFTER_BOUNDED},
    {NULL, 0},
};

static const enum_name unsafe_modes[] = {
    {"Refuse", RESIL_UNSAFE_REFUSE},
    {"RunOnce", RESIL_UNSAFE_RUN_ONCE},
    {NULL, 0},
};

static void set_max_retries(vctx *v, const cfg_node *n, void *target)
{
    char got_buf[TEXT_MAX + 8];
    retry_scratch *s = target;
    if (n->type == CFG_STRING && resil__name_eq(n->str, "forever")) {
        s->r.policy.max_attempts = RESIL_ATTEMPTS_FOREVER;
        return;
    }
    double d;
    long long i;
    bool whole;
    if (resil__cfg_number(n, &d, &i, &whole) != 0 || !whole || i < 0 ||
        i > (long long)RESIL_ATTEMPTS_FOREVER - 2) {
        fail_value(v, n, "must be a whole number in [0,%u] or \"Forever\", got %s",
                   RESIL_ATTEMPTS_FOREVER - 2, GOT(n));
        return;
    }
    s->r.policy.max_attempts = (uint32_t)i + 1;
}

/* Each element of an array, with its index on the path; false (after
 * reporting) when `n` is no array of 1 to `max` elements. */
static bool each_element(vctx *v, const cfg_node *n, size_t max, const char *what,
                         void (*one)(vctx *, const cfg_node *, size_t, void *), void *target)
{
    char got_buf[TEXT_MAX + 8];
    if (n->type != CFG_ARRAY) {
        fail_value(v, n, "must be an array of 1 to %zu %s, got %s", max, what, GOT(n));
        return false;
    }
    if (n->count == 0 || n->count > max) {
        fail_value(v, n, "must hold 1 to %zu %s, got %u", max, what, n->count);
        return false;
    }
    size_t i = 0;
    for (const cfg_node *e = cfg_child(v->doc, n); e; e = cfg_next(v->doc, e), i++) {
        size_t old = push_index(v, i);
        one(v, e, i, target);
        pop(v, old);
    }
    return true;
}

static void one_delay(vctx *v, const cfg_node *e, size_t i, void *target)
{
    retry_scratch *s = target;
    resil_duration d;
    if (parse_duration(v, e, &d) == 0)
        s->more.delays[i] = d;
}

static void set_delays(vctx *v, const cfg_node *n, void *target)
{
    retry_scratch *s = target;
    if (each_element(v, n, RESIL_CONFIG_DELAYS_MAX, "durations", one_delay, s))
        s->ndelays = n->count;
}

/* An HTTP token (RFC 9110 tchar), as method and header names are. */
static bool is_token(const char *t)
{
    if (*t == '\0')
        return false;
    for (; *t; t++)
        if (!(((unsigned char)*t >= 'A' && (unsigned char)*t <= 'Z') ||
              ((unsigned char)*t >= 'a' && (unsigned char)*t <= 'z') ||
              (*t >= '0' && *t <= '9') || strchr("!#$%&'*+-.^_`|~", *t) != NULL))
            return false;
    return true;
}

static bool token_value(vctx *v, const cfg_node *e, const char *what)
{
    char got_buf[TEXT_MAX + 8];
    if (e->type == CFG_STRING && e->str_len < RESIL_CONFIG_NAME_MAX && is_token(e->str))
        return true;
    fail_value(v, e, "must be %s, got %s", what, GOT(e));
    return false;
}

static void one_method(vctx *v, const cfg_node *e, size_t i, void *target)
{
    retry_scratch *s = target;
    if (!token_value(v, e, "a method name such as \"POST\""))
        return;
    size_t len = strlen(s->more.disable_for), room = sizeof s->more.disable_for - 1;
    if (len + (i ? 1 : 0) + e->str_len > room) {
        fail_value(v, e, "DisableFor's methods take at most %zu bytes in all, commas included",
                   room);
        return;
    }
    snprintf(s->more.disable_for + len, sizeof s->more.disable_for - len, "%s%s",
             i ? "," : "", e->str);
}

static void set_disable_for(vctx *v, const cfg_node *n, void *target)
{
    retry_scratch *s = target;
    s->more.disable_for[0] = '\0';
    each_element(v, n, 8, "method names", one_method, s);
}

static void one_header(vctx *v, const cfg_node *e, size_t i, void *target)
{
    retry_scratch *s = target;
    if (token_value(v, e, "a header name such as \"retry-after-ms\""))
        snprintf(s->more.header_names[i], sizeof s->more.header_names[i], "%s", e->str);
}

static void set_budget_name(vctx *v, const cfg_node *n, void *target)
{
    char got_buf[TEXT_MAX + 8];
    retry_scratch *s = target;
    if (n->type != CFG_STRING || n->str_len == 0 || n->str_len >= RESIL_CONFIG_NAME_MAX) {
        fail_value(v, n, "must be the name of a RetryBudgets entry (1 to %d bytes), got %s",
                   RESIL_CONFIG_NAME_MAX - 1, GOT(n));
        return;
    }
    snprintf(s->more.budget, sizeof s->more.budget, "%s", n->str);
    s->more.budget_line = n->line;
    s->more.budget_col = n->col;
}

static void set_hint_headers(vctx *v, const cfg_node *n, void *target)
{
    retry_scratch *s = target;
    if (each_element(v, n, RESIL_CONFIG_HINT_HEADERS_MAX, "header names", one_header, s))
        s->nheaders = n->count;
}

enum {
    R_MAX_RETRIES,
    R_BASE_DELAY,
    R_STRATEGY,
    R_JITTER,
    R_USE_JITTER,
    R_JITTER_FRACTION,
    R_FACTOR,
    R_MAX_DELAY,
    R_TIME_BUDGET,
    R_RETRY_AFTER,
    R_SHOULD_RETRY_AFTER,
    R_MAX_RETRY_AFTER,
    R_UNSAFE_MODE,
    R_RETRY_UNSAFE,
    R_IDEMPOTENCY_KEYS,
    R_DELAYS,
    R_DISABLE_FOR,
    R_HINT_HEADERS,
    R_BUDGET
};

static const field retry_fields[] = {
    [R_MAX_RETRIES] = CUSTOM("MaxRetryAttempts", set_max_retries),
    [R_BASE_DELAY] = {"BaseDelay", "Delay", F_DUR, 0,
                      offsetof(retry_scratch, r.policy.backoff.base), 0, 0, NULL, NULL},
    [R_STRATEGY] = {"BackoffStrategy", "BackoffType", F_ENUM, 0,
                    offsetof(retry_scratch, strategy), 0, 0, backoff_strategies, NULL},
    [R_JITTER] = ENUMF("Jitter", retry_scratch, jitter, jitters),
    [R_USE_JITTER] = BOOLF("UseJitter", retry_scratch, use_jitter),
    [R_JITTER_FRACTION] = NUM("JitterFraction", F_DOUBLE, retry_scratch,
                              r.policy.backoff.jitter_fraction, 0, 1, 0),
    [R_FACTOR] = NUM("Factor", F_DOUBLE, retry_scratch, r.policy.backoff.factor, 1, INFINITY, 0),
    [R_MAX_DELAY] = DUR("MaxDelay", retry_scratch, r.policy.backoff.max_delay, 0, NULL_MAX),
    [R_TIME_BUDGET] = DUR("TimeBudget", retry_scratch, r.policy.max_total, 0, NULL_ZERO),
    [R_RETRY_AFTER] = ENUMF("RetryAfter", retry_scratch, retry_after, retry_after_modes),
    [R_SHOULD_RETRY_AFTER] = BOOLF("ShouldRetryAfterHeader", retry_scratch, should_retry_after),
    [R_MAX_RETRY_AFTER] = DUR("MaxRetryAfter", retry_scratch, r.policy.retry_after_max, 0, 0),
    [R_UNSAFE_MODE] = ENUMF("UnsafeMode", retry_scratch, unsafe_mode, unsafe_modes),
    [R_RETRY_UNSAFE] = BOOLF("RetryUnsafeMethods", retry_scratch, r.retry_unsafe_methods),
    [R_IDEMPOTENCY_KEYS] = BOOLF("IdempotencyKeys", retry_scratch, r.idempotency_keys),
    [R_DELAYS] = CUSTOM("Delays", set_delays),
    [R_DISABLE_FOR] = CUSTOM("DisableFor", set_disable_for),
    [R_HINT_HEADERS] = CUSTOM("RetryAfterHeaders", set_hint_headers),
    [R_BUDGET] = CUSTOM("Budget", set_budget_name),
};

static const char *enum_label(const enum_name *names, int value)
{
    for (const enum_name *e = names; e->name; e++)
        if (e->value == value)
            return e->name;
    return "?";
}

/* A key that only some kinds of an entry read (a TokenBucket's rate, an
 * AIMD limiter's backoff ratio): given with another kind it would be
 * ignored, so it is refused where it is written, saying which kinds read
 * it. `kinds` is a set of the kind enum's values, as bits. */
typedef struct kind_key {
    size_t field;
    unsigned kinds;
    const char *which; /* "a TokenBucket", "Fault and Outcome" */
} kind_key;

#define KIND(k) (1u << (k))

static const char *article(const char *word)
{
    return strchr("AEIOU", word[0]) != NULL ? "an" : "a";
}

/* Nothing is said when the entry is no object or its kind (the key
 * `kind_field`, named in `names`) was itself refused. */
static void refuse_other_kinds(vctx *v, const cfg_node *obj, const field *f, const given *g,
                               size_t kind_field, const enum_name *names, int kind,
                               const char *noun, const kind_key *keys, size_t n)
{
    if (obj->type != CFG_OBJECT || g->bad[kind_field])
        return;
    const char *label = enum_label(names, kind);
    for (size_t i = 0; i < n; i++)
        if (g->node[keys[i].field] && !(keys[i].kinds & KIND(kind)))
            fail_field(v, obj, f, g, keys[i].field, "applies to %s, not to %s %s %s",
                       keys[i].which, article(label), label, noun);
}

/* BackoffStrategy, Jitter and UseJitter say the same thing three ways;
 * take whichever were given and refuse them when they disagree. */
static void resolve_jitter(vctx *v, const cfg_node *obj, const given *g, retry_scratch *s)
{
    const field *f = retry_fields;
    resil_backoff *b = &s->r.policy.backoff;
    int implied = -1;
    if (g->node[R_STRATEGY]) {
        b->kind = (resil_backoff_kind)(s->strategy & 0xff);
        implied = (s->strategy >> 8) - 1;
    }
    if (g->node[R_JITTER] && implied >= 0 && s->jitter != implied)
        fail_field(v, obj, f, g, R_JITTER, "contradicts BackoffStrategy %s, which means %s jitter",
                   enum_label(backoff_strategies, s->strategy),
                   resil_jitter_name((resil_jitter)implied));
    int chosen = g->node[R_JITTER] ? s->jitter : implied;
    if (g->node[R_USE_JITTER] && chosen >= 0 && (chosen != RESIL_JITTER_NONE) != s->use_jitter)
        fail_field(v, obj, f, g, R_USE_JITTER, "contradicts %s, which means %s jitter",
                   g->node[R_JITTER] ? "Jitter" : "BackoffStrategy",
                   resil_jitter_name((resil_jitter)chosen));
    if (chosen >= 0)
        b->jitter = (resil_jitter)chosen;
    else if (g->node[R_USE_JITTER])
        b->jitter = s->use_jitter ? RESIL_JITTER_POLLY : RESIL_JITTER_NONE;
}

/* A Delays list is the backoff: one retry per wait unless MaxRetryAttempts
 * says otherwise; a formula's keys would be ignored, so they are refused. */
static void finish_delays(vctx *v, const cfg_node *obj, const given *g, retry_scratch *s)
{
    static const size_t formula[] = {R_BASE_DELAY, R_STRATEGY, R_FACTOR};
    if (!g->node[R_DELAYS] || g->bad[R_DELAYS])
        return;
    for (size_t i = 0; i < sizeof formula / sizeof formula[0]; i++)
        if (g->node[formula[i]])
            fail_field(v, obj, retry_fields, g, formula[i],
                       "Delays lists the waits: %s does not apply with it",
                       retry_fields[formula[i]].key);
    resil_backoff *b = &s->r.policy.backoff;
    b->kind = RESIL_BACKOFF_LIST;
    b->delays = s->more.delays;
    b->delays_len = s->ndelays;
    if (!g->node[R_MAX_RETRIES])
        s->r.policy.max_attempts = (uint32_t)s->ndelays + 1;
}

/* Checks between keys run on the keys that were given well; the library's
 * own check only on an entry without errors (`before` is the error count
 * when the entry started). */
static void finish_retry(vctx *v, const cfg_node *obj, const given *g, retry_scratch *s,
                         size_t before)
{
    const field *f = retry_fields;
    resil_retry_policy *p = &s->r.policy;
    finish_delays(v, obj, g, s);
    bool jitter_known = all_good(g, R_STRATEGY, R_JITTER, R_USE_JITTER);
    if (jitter_known)
        resolve_jitter(v, obj, g, s);
    if (all_good(g, R_RETRY_AFTER, R_SHOULD_RETRY_AFTER, R_RETRY_AFTER) &&
        g->node[R_RETRY_AFTER] && g->node[R_SHOULD_RETRY_AFTER] &&
        (s->retry_after != RESIL_RETRY_AFTER_IGNORE) != s->should_retry_after)
        fail_field(v, obj, f, g, R_SHOULD_RETRY_AFTER, "contradicts RetryAfter %s",
                   enum_label(retry_after_modes, s->retry_after));
    if (g->node[R_RETRY_AFTER])
        p->retry_after = (resil_retry_after_mode)s->retry_after;
    else if (g->node[R_SHOULD_RETRY_AFTER])
        p->retry_after = s->should_retry_after ? RESIL_RETRY_AFTER_HONOR : RESIL_RETRY_AFTER_IGNORE;
    if (g->node[R_UNSAFE_MODE])
        p->unsafe_mode = (resil_unsafe_mode)s->unsafe_mode;
    if (jitter_known && !g->bad[R_FACTOR] && p->backoff.jitter == RESIL_JITTER_POLLY &&
        p->backoff.kind == RESIL_BACKOFF_EXPONENTIAL && p->backoff.factor != 2.0)
        fail_field(v, obj, f, g, R_FACTOR,
                   "must be 2 with Polly's jitter on exponential backoff (Polly's formula "
                   "doubles), got %g", p->backoff.factor);
    if (v->errors == before) {
        resil_err e = {0, ""};
        library_check(v, obj, resil_retry_policy_validate(p, &e), &e);
    }
}

/* Polly v8's RetryStrategyOptions where a key is absent: 3 retries, 2 s,
 * constant, no jitter (UseJitter false), no cap on the delay. */
static void polly_retry_default(resil_retry_policy *p)
{
    resil_retry_policy_default(p);
    p->max_attempts = 4;
    p->backoff.kind = RESIL_BACKOFF_CONSTANT;
    p->backoff.base = RESIL_S(2);
    p->backoff.jitter = RESIL_JITTER_NONE;
    p->backoff.max_delay = RESIL_DURATION_MAX;
}

/* Move what the entry holds beyond its option struct to the heap, and
 * point the struct at it there. */
static void keep_more(vctx *v, retry_scratch *s, cfg_item *item)
{
    if (s->ndelays == 0 && s->more.disable_for[0] == '\0' && s->nheaders == 0 &&
        s->more.budget[0] == '\0')
        return;
    item->more = malloc(sizeof *item->more);
    if (item->more == NULL) {
        v->nomem = true;
        return;
    }
    *item->more = s->more;
    cfg_retry_more *m = item->more;
    if (s->ndelays > 0)
        item->u.retry.policy.backoff.delays = m->delays;
    if (m->disable_for[0] != '\0')
        item->u.retry.disable_for = m->disable_for;
    for (size_t i = 0; i < s->nheaders; i++)
        m->headers[i] = m->header_names[i];
    m->headers[s->nheaders] = NULL;
    if (s->nheaders > 0)
        item->u.retry.retry_after_headers = m->headers;
    if (m->budget[0] != '\0')
        item->u.retry.budget = m->budget;
}

static void parse_retry(vctx *v, const cfg_node *obj, cfg_item *item)
{
    retry_scratch s;
    memset(&s, 0, sizeof s);
    polly_retry_default(&s.r.policy);
    given g;
    size_t before = v->errors;
    apply(v, obj, retry_fields, FIELD_COUNT(retry_fields), &s, &g);
    if (obj->type == CFG_OBJECT)
        finish_retry(v, obj, &g, &s, before);
    item->u.retry = s.r;
    item->u.retry.policy.backoff.delays = NULL;
    keep_more(v, &s, item);
}

/* ---- CircuitBreakers and DistributedCircuitBreaker ------------------------- */

typedef struct breaker_scratch {
    resil_breaker_opts o;
    resil_duration operation_timeout; /* CircuitBreakers only */
    int kind;
    int window;
    bool enabled;                 /* DistributedCircuitBreaker only */
    resil_duration sync_interval; /* DistributedCircuitBreaker only */
} breaker_scratch;

static const enum_name breaker_kinds[] = {
    {"Consecutive", RESIL_BREAKER_CONSECUTIVE},
    {"Ratio", RESIL_BREAKER_RATIO},
    {"Both", RESIL_BREAKER_BOTH},
    {NULL, 0},
};

static const enum_name breaker_windows[] = {
    {"Time", RESIL_BREAKER_WINDOW_TIME},
    {"Count", RESIL_BREAKER_WINDOW_COUNT},
    {NULL, 0},
};

enum {
    B_KIND,
    B_CONSECUTIVE,
    B_RATIO,
    B_THROUGHPUT,
    B_SAMPLING,
    B_BREAK,
    B_GROWTH,
    B_MAX_BREAK,
    B_PROBES,
    B_SUCCESS,
    B_PROBE_TIMEOUT,
    B_SLOW_DURATION,
    B_SLOW_RATIO,
    B_WINDOW,
    B_WINDOW_SIZE,
    B_OP_TIMEOUT,
    B_ENABLED,
    B_SYNC
};

#define BREAKER_FIELDS                                                                      \
    [B_KIND] = ENUMF("Kind", breaker_scratch, kind, breaker_kinds),                         \
    [B_CONSECUTIVE] = NUM("ConsecutiveFailureThreshold", F_U32, breaker_scratch,            \
                          o.failure_threshold, 1, UINT32_MAX, 0),                           \
    [B_RATIO] = NUM("FailureRatio", F_DOUBLE, breaker_scratch, o.failure_ratio, 0, 1, LO_OPEN), \
    [B_THROUGHPUT] = {"MinimumThroughput", "FailureThreshold", F_U32, 0,                   \
                      offsetof(breaker_scratch, o.minimum_throughput), 2, UINT32_MAX, NULL, \
                      NULL},                                                                \
    [B_SAMPLING] = DUR("SamplingDuration", breaker_scratch, o.sampling_duration,           \
                       RESIL_MS(500), 0),                                                   \
    [B_BREAK] = DUR("BreakDuration", breaker_scratch, o.break_duration, 0, LO_OPEN),        \
    [B_GROWTH] = NUM("BreakGrowth", F_DOUBLE, breaker_scratch, o.break_growth, 1, INFINITY, 0), \
    [B_MAX_BREAK] = DUR("MaxBreakDuration", breaker_scratch, o.max_break_duration, 0, 0),   \
    [B_PROBES] = NUM("HalfOpenProbes", F_U32, breaker_scratch, o.half_open_probes, 1, 65535, 0), \
    [B_SUCCESS] = {"SuccessThresholdToClose", "SuccessThreshold", F_U32, 0,                 \
                   offsetof(breaker_scratch, o.success_threshold), 1, UINT32_MAX, NULL, NULL}, \
    [B_PROBE_TIMEOUT] = DUR("ProbeTimeout", breaker_scratch, o.probe_timeout, 0, 0),        \
    [B_SLOW_DURATION] = DUR("SlowCallDuration", breaker_scratch, o.slow_call_duration, 0, 0), \
    [B_SLOW_RATIO] = NUM("SlowCallRatio", F_DOUBLE, breaker_scratch, o.slow_call_ratio, 0, 1, \
                         LO_OPEN),                                                          \
    [B_WINDOW] = ENUMF("SlidingWindowType", breaker_scratch, window, breaker_windows),      \
    [B_WINDOW_SIZE] = NUM("SlidingWindowSize", F_U32, breaker_scratch, o.window_size, 1,    \
                          RESIL_BREAKER_WINDOW_SIZE_MAX, 0),                                \
    [B_OP_TIMEOUT] = DUR("OperationTimeout", breaker_scratch, operation_timeout, 0, LO_OPEN)

static const field breaker_fields[] = {BREAKER_FIELDS};

static const field distributed_fields[] = {
    BREAKER_FIELDS,
    [B_ENABLED] = BOOLF("Enabled", breaker_scratch, enabled),
    [B_SYNC] = DUR("SyncInterval", breaker_scratch, sync_interval, 0, LO_OPEN),
};

/* A SlidingWindowSize makes a count window unless SlidingWindowType says
 * otherwise; the fleet breaker (not `infer`) counts over time only. */
static void finish_window(vctx *v, const cfg_node *obj, const field *f, const given *g,
                          breaker_scratch *s, bool infer)
{
    if (g->node[B_WINDOW] && !g->bad[B_WINDOW])
        s->o.window = (resil_breaker_window)s->window;
    else if (g->node[B_WINDOW_SIZE])
        s->o.window = RESIL_BREAKER_WINDOW_COUNT;
    if (g->bad[B_WINDOW] || g->bad[B_WINDOW_SIZE])
        return;
    if (s->o.window == RESIL_BREAKER_WINDOW_TIME && g->node[B_WINDOW_SIZE])
        fail_field(v, obj, f, g, B_WINDOW_SIZE,
                   "SlidingWindowSize counts calls: it needs SlidingWindowType Count");
    else if (s->o.window == RESIL_BREAKER_WINDOW_COUNT && !infer)
        fail_field(v, obj, f, g, g->node[B_WINDOW] ? B_WINDOW : B_WINDOW_SIZE,
                   "the fleet breaker counts over SamplingDuration: a count window is for "
                   "CircuitBreakers");
}

/* Without a Kind, the keys present say which rules the author meant (when
 * `infer`; the distributed breaker keeps its "both"). */
static void finish_breaker(vctx *v, const cfg_node *obj, const field *f, const given *g,
                           breaker_scratch *s, size_t before, bool infer)
{
    resil_breaker_opts *o = &s->o;
    if (g->node[B_KIND]) {
        if (!g->bad[B_KIND])
            o->kind = (resil_breaker_kind)s->kind;
    } else if (infer) {
        bool consecutive = g->node[B_CONSECUTIVE] != NULL;
        bool ratio = g->node[B_RATIO] || g->node[B_THROUGHPUT] || g->node[B_SAMPLING] ||
                     g->node[B_WINDOW] || g->node[B_WINDOW_SIZE];
        if (consecutive)
            o->kind = ratio ? RESIL_BREAKER_BOTH : RESIL_BREAKER_CONSECUTIVE;
    }
    finish_window(v, obj, f, g, s, infer);
    if (!infer && g->node[B_OP_TIMEOUT])
        fail_field(v, obj, f, g, B_OP_TIMEOUT,
                   "OperationTimeout bounds the calls of a CircuitBreakers entry; the fleet "
                   "breaker's calls are bounded where it is used");
    if (all_good(g, B_GROWTH, B_MAX_BREAK, B_BREAK) && o->break_growth > 1.0 &&
        o->max_break_duration < o->break_duration) {
        char a[32], b[32];
        resil_duration_format(o->max_break_duration, a, sizeof a);
        resil_duration_format(o->break_duration, b, sizeof b);
        fail_field(v, obj, f, g, g->node[B_MAX_BREAK] ? B_MAX_BREAK : B_GROWTH,
                   "MaxBreakDuration (%s) must be >= BreakDuration (%s) when BreakGrowth > 1", a,
                   b);
    }
    if (v->errors == before) {
        resil_err e = {0, ""};
        library_check(v, obj, resil_breaker_opts_validate(o, &e), &e);
    }
}

static void parse_breaker(vctx *v, const cfg_node *obj, cfg_item *item)
{
    breaker_scratch s;
    memset(&s, 0, sizeof s);
    resil_breaker_opts_default(&s.o);
    given g;
    size_t before = v->errors;
    apply(v, obj, breaker_fields, FIELD_COUNT(breaker_fields), &s, &g);
    if (obj->type == CFG_OBJECT)
        finish_breaker(v, obj, breaker_fields, &g, &s, before, true);
    s.o.name = NULL;
    item->u.breaker = s.o;
    item->operation_timeout = s.operation_timeout;
}

/* Excalibur's DistributedCircuitBreakerOptions defaults. */
static void distributed_default(breaker_scratch *s)
{
    memset(s, 0, sizeof *s);
    resil_breaker_opts_default(&s->o);
    s->o.kind = RESIL_BREAKER_BOTH;
    s->o.failure_ratio = 0.5;
    s->o.minimum_throughput = 10;
    s->o.sampling_duration = RESIL_S(30);
    s->o.break_duration = RESIL_S(30);
    s->o.failure_threshold = 5;
    s->o.success_threshold = 3;
    s->sync_interval = RESIL_S(5);
}

static void parse_distributed(vctx *v, const cfg_node *obj)
{
    breaker_scratch s;
    distributed_default(&s);
    given g;
    size_t before = v->errors;
    apply(v, obj, distributed_fields, FIELD_COUNT(distributed_fields), &s, &g);
    if (obj->type == CFG_OBJECT)
        finish_breaker(v, obj, distributed_fields, &g, &s, before, false);
    v->cfg->has_distributed = true;
    v->cfg->distributed.enabled = s.enabled;
    v->cfg->distributed.sync_interval = s.sync_interval;
    v->cfg->distributed.breaker = s.o;
}

/* ---- Bulkheads ---------------------------------------------------------------- */

/* "Distributed": true hands the entry to the application's
 * bulkhead_factory (a fleet-wide concurrency limit) instead. */
typedef struct bulkhead_scratch {
    resil_bulkhead_opts o;
    bool distributed;
} bulkhead_scratch;

static const field bulkhead_fields[] = {
    NUM("MaxConcurrency", F_I32, bulkhead_scratch, o.max_concurrency, 1, INT32_MAX, 0),
    NUM("MaxQueueLength", F_I32, bulkhead_scratch, o.max_queue, 0, INT32_MAX, 0),
    BOOLF("AllowQueueing", bulkhead_scratch, o.queue),
    DUR("QueueTimeout", bulkhead_scratch, o.queue_timeout, 0, 0),
    BOOLF("Distributed", bulkhead_scratch, distributed),
};

static void parse_bulkhead(vctx *v, const cfg_node *obj, cfg_item *item)
{
    bulkhead_scratch s;
    memset(&s, 0, sizeof s);
    resil_bulkhead_opts_default(&s.o);
    given g;
    apply(v, obj, bulkhead_fields, FIELD_COUNT(bulkhead_fields), &s, &g);
    item->u.bulkhead = s.o;
    item->fleet = s.distributed;
}

/* ---- RateLimiters ------------------------------------------------------------- */

typedef struct limiter_scratch {
    resil_config_ratelimit l;
    int kind;
    bool distributed; /* built by the application's ratelimit_factory */
} limiter_scratch;

static const enum_name limiter_kinds[] = {
    {"TokenBucket", RESIL_RATELIMIT_TOKEN_BUCKET},
    {"FixedWindow", RESIL_RATELIMIT_FIXED_WINDOW},
    {"SlidingWindow", RESIL_RATELIMIT_SLIDING_WINDOW},
    {NULL, 0},
};

enum { L_KIND, L_RATE, L_PERIOD, L_BURST, L_PERMITS, L_WINDOW, L_MAX_WAIT, L_DISTRIBUTED };

static const field limiter_fields[] = {
    [L_KIND] = ENUMF("Kind", limiter_scratch, kind, limiter_kinds),
    [L_RATE] = NUM("TokensPerPeriod", F_I64, limiter_scratch, l.opts.rate, 1, 1e9, 0),
    [L_PERIOD] = DUR("ReplenishmentPeriod", limiter_scratch, l.opts.period, RESIL_MS(1), 0),
    [L_BURST] = NUM("TokenLimit", F_I64, limiter_scratch, l.opts.burst, 1, 1e9, 0),
    [L_PERMITS] = NUM("PermitLimit", F_I64, limiter_scratch, l.opts.permits, 1, 1e9, 0),
    [L_WINDOW] = DUR("Window", limiter_scratch, l.opts.window, RESIL_MS(1), 0),
    [L_MAX_WAIT] = DUR("MaxWait", limiter_scratch, l.max_wait, 0, 0),
    [L_DISTRIBUTED] = BOOLF("Distributed", limiter_scratch, distributed),
};

static void finish_limiter(vctx *v, const cfg_node *obj, const given *g, limiter_scratch *s)
{
    const field *f = limiter_fields;
    resil_ratelimit_opts *o = &s->l.opts;
    bool bucket = s->kind == RESIL_RATELIMIT_TOKEN_BUCKET;
    o->kind = (resil_ratelimit_kind)s->kind;
    if (g->bad[L_KIND])
        return;
    static const unsigned windows =
        KIND(RESIL_RATELIMIT_FIXED_WINDOW) | KIND(RESIL_RATELIMIT_SLIDING_WINDOW);
    static const kind_key keys[] = {
        {L_RATE, KIND(RESIL_RATELIMIT_TOKEN_BUCKET), "a TokenBucket"},
        {L_PERIOD, KIND(RESIL_RATELIMIT_TOKEN_BUCKET), "a TokenBucket"},
        {L_BURST, KIND(RESIL_RATELIMIT_TOKEN_BUCKET), "a TokenBucket"},
        {L_PERMITS, windows, "FixedWindow and SlidingWindow"},
        {L_WINDOW, windows, "FixedWindow and SlidingWindow"},
    };
    refuse_other_kinds(v, obj, f, g, L_KIND, limiter_kinds, s->kind, "limiter", keys,
                       sizeof keys / sizeof keys[0]);
    if (!g->bad[L_PERMITS] && s->kind == RESIL_RATELIMIT_SLIDING_WINDOW &&
        o->permits > RESIL_RATELIMIT_MAX_LOG)
        fail_field(v, obj, f, g, L_PERMITS,
                   "must be at most %d for a SlidingWindow (it keeps one entry per permit), "
                   "got %lld", RESIL_RATELIMIT_MAX_LOG, (long long)o->permits);
    /* The bucket counts in permit-nanoseconds, with headroom to divide. */
    if (all_good(g, L_BURST, L_PERIOD, L_BURST) && bucket &&
        o->burst > (INT64_MAX / 2) / o->period) {
        char period[32];
        resil_duration_format(o->period, period, sizeof period);
        fail_field(v, obj, f, g, g->node[L_BURST] ? L_BURST : L_PERIOD,
                   "TokenLimit × ReplenishmentPeriod must be at most %lld permit-ns, got "
                   "%lld × %s", (long long)(INT64_MAX / 2), (long long)o->burst, period);
    }
}

static void parse_limiter(vctx *v, const cfg_node *obj, cfg_item *item)
{
    limiter_scratch s;
    memset(&s, 0, sizeof s);
    resil_ratelimit_opts_default(&s.l.opts, RESIL_RATELIMIT_TOKEN_BUCKET);
    s.kind = RESIL_RATELIMIT_TOKEN_BUCKET;
    given g;
    apply(v, obj, limiter_fields, FIELD_COUNT(limiter_fields), &s, &g);
    if (obj->type == CFG_OBJECT)
        finish_limiter(v, obj, &g, &s);
    item->u.limiter = s.l;
    item->fleet = s.distributed;
}

/* ---- Chaos, AdaptiveLimiters, Throttles -------------------------------------- */

/* A behaviour injection is a callback: code, not configuration. */
static const enum_name chaos_kinds[] = {
    {"Fault", RESIL_CHAOS_FAULT},
    {"Outcome", RESIL_CHAOS_OUTCOME},
    {"Latency", RESIL_CHAOS_LATENCY},
    {NULL, 0},
};

static const enum_name outcome_kinds[] = {
    {"Transient", RESIL_TRANSIENT},
    {"Throttled", RESIL_THROTTLED},
    {"Timeout", RESIL_TIMEOUT},
    {"Permanent", RESIL_PERMANENT},
    {NULL, 0},
};

typedef struct chaos_scratch {
    resil_chaos_opts o;
    int kind, outcome;
    int64_t seed, code;
} chaos_scratch;

enum { C_KIND, C_RATE, C_ENABLED, C_SEED, C_LATENCY, C_OUTCOME, C_CODE };

static const field chaos_fields[] = {
    [C_KIND] = ENUMF("Kind", chaos_scratch, kind, chaos_kinds),
    [C_RATE] = NUM("InjectionRate", F_DOUBLE, chaos_scratch, o.rate, 0, 1, 0),
    [C_ENABLED] = BOOLF("Enabled", chaos_scratch, o.enabled),
    [C_SEED] = NUM("Seed", F_I64, chaos_scratch, seed, 0, 9007199254740992.0, 0),
    [C_LATENCY] = DUR("Latency", chaos_scratch, o.latency, 0, LO_OPEN),
    [C_OUTCOME] = ENUMF("OutcomeKind", chaos_scratch, outcome, outcome_kinds),
    [C_CODE] = NUM("Code", F_I64, chaos_scratch, code, -9007199254740992.0, 9007199254740992.0,
                   0),
};

static void finish_chaos(vctx *v, const cfg_node *obj, const given *g, const chaos_scratch *s)
{
    static const unsigned failing = KIND(RESIL_CHAOS_FAULT) | KIND(RESIL_CHAOS_OUTCOME);
    static const kind_key keys[] = {
        {C_LATENCY, KIND(RESIL_CHAOS_LATENCY), "a Latency injection"},
        {C_OUTCOME, failing, "Fault and Outcome"},
        {C_CODE, failing, "Fault and Outcome"},
    };
    refuse_other_kinds(v, obj, chaos_fields, g, C_KIND, chaos_kinds, s->kind, "injection", keys,
                       sizeof keys / sizeof keys[0]);
}

static void parse_chaos(vctx *v, const cfg_node *obj, cfg_item *item)
{
    chaos_scratch s;
    memset(&s, 0, sizeof s);
    resil_chaos_opts_default(&s.o, RESIL_CHAOS_FAULT);
    s.outcome = RESIL_TRANSIENT;
    given g;
    apply(v, obj, chaos_fields, FIELD_COUNT(chaos_fields), &s, &g);
    finish_chaos(v, obj, &g, &s);
    resil_chaos_opts o;
    resil_chaos_opts_default(&o, (resil_chaos_kind)s.kind);
    o.rate = s.o.rate;
    o.enabled = s.o.enabled;
    o.latency = s.o.latency;
    o.seed = (uint64_t)s.seed;
    o.outcome.kind = (resil_kind)s.outcome;
    o.outcome.code = s.code;
    item->u.chaos = o;
}

typedef struct adaptive_scratch {
    resil_limiter_opts o;
    int algorithm;
} adaptive_scratch;

static const enum_name limit_algorithms[] = {
    {"Vegas", RESIL_LIMIT_VEGAS},
    {"Gradient", RESIL_LIMIT_GRADIENT},
    {"Aimd", RESIL_LIMIT_AIMD},
    {NULL, 0},
};

enum {
    A_ALGORITHM,
    A_INITIAL,
    A_MIN,
    A_MAX,
    A_WINDOW,
    A_SAMPLES,
    A_SMOOTHING,
    A_QUEUE,
    A_QUEUE_TIMEOUT,
    A_BACKOFF,
    A_LATENCY,
    A_TOLERANCE
};

static const field adaptive_fields[] = {
    [A_ALGORITHM] = ENUMF("Algorithm", adaptive_scratch, algorithm, limit_algorithms),
    [A_INITIAL] = NUM("InitialLimit", F_I32, adaptive_scratch, o.initial_limit, 1, INT32_MAX, 0),
    [A_MIN] = NUM("MinLimit", F_I32, adaptive_scratch, o.min_limit, 1, INT32_MAX, 0),
    [A_MAX] = NUM("MaxLimit", F_I32, adaptive_scratch, o.max_limit, 1, INT32_MAX, 0),
    [A_WINDOW] = DUR("Window", adaptive_scratch, o.window, 0, 0),
    [A_SAMPLES] = NUM("WindowSamples", F_I32, adaptive_scratch, o.window_samples, 1, INT32_MAX, 0),
    [A_SMOOTHING] = NUM("Smoothing", F_DOUBLE, adaptive_scratch, o.smoothing, 0, 1, LO_OPEN),
    [A_QUEUE] = NUM("MaxQueueLength", F_I32, adaptive_scratch, o.max_queue, 0, INT32_MAX, 0),
    [A_QUEUE_TIMEOUT] = DUR("QueueTimeout", adaptive_scratch, o.queue_timeout, 0, 0),
    [A_BACKOFF] = NUM("BackoffRatio", F_DOUBLE, adaptive_scratch, o.aimd_backoff, 0, 1, LO_OPEN),
    [A_LATENCY] = DUR("LatencyThreshold", adaptive_scratch, o.aimd_latency, 0, 0),
    [A_TOLERANCE] = NUM("Tolerance", F_DOUBLE, adaptive_scratch, o.gradient_tolerance, 1, 1e6, 0),
};

static void finish_adaptive(vctx *v, const cfg_node *obj, const given *g,
                            const adaptive_scratch *s)
{
    static const kind_key keys[] = {
        {A_BACKOFF, KIND(RESIL_LIMIT_AIMD), "an Aimd limiter"},
        {A_LATENCY, KIND(RESIL_LIMIT_AIMD), "an Aimd limiter"},
        {A_TOLERANCE, KIND(RESIL_LIMIT_GRADIENT), "a Gradient limiter"},
    };
    refuse_other_kinds(v, obj, adaptive_fields, g, A_ALGORITHM, limit_algorithms, s->algorithm,
                       "limiter", keys, sizeof keys / sizeof keys[0]);
}

static void parse_adaptive(vctx *v, const cfg_node *obj, cfg_item *item)
{
    adaptive_scratch s;
    memset(&s, 0, sizeof s);
    s.algorithm = RESIL_LIMIT_GRADIENT;
    resil_limiter_opts_default(&s.o, RESIL_LIMIT_GRADIENT);
    given g;
    size_t before = v->errors;
    apply(v, obj, adaptive_fields, FIELD_COUNT(adaptive_fields), &s, &g);
    finish_adaptive(v, obj, &g, &s);
    /* The algorithm's own default smoothing unless one is given. */
    resil_limiter_opts d;
    resil_limiter_opts_default(&d, (resil_limit_algorithm)s.algorithm);
    if (!g.node[A_SMOOTHING])
        s.o.smoothing = d.smoothing;
    s.o.algorithm = (resil_limit_algorithm)s.algorithm;
    if (obj->type == CFG_OBJECT && v->errors == before) {
        resil_limiter *l = NULL;
        resil_err e;
        library_check(v, obj, resil_limiter_new(&s.o, &l, &e), &e);
        resil_limiter_free(l);
    }
    item->u.adaptive = s.o;
}

typedef struct throttle_scratch {
    resil_throttle_opts o;
    int64_t seed;
} throttle_scratch;

static const field throttle_fields[] = {
    NUM("K", F_DOUBLE, throttle_scratch, o.k, 1, 1e6, 0),
    DUR("Window", throttle_scratch, o.window, 0, LO_OPEN),
    NUM("Buckets", F_I32, throttle_scratch, o.buckets, 1, 120, 0),
    NUM("Seed", F_I64, throttle_scratch, seed, 0, 9007199254740992.0, 0),
};

static void parse_throttle(vctx *v, const cfg_node *obj, cfg_item *item)
{
    throttle_scratch s;
    memset(&s, 0, sizeof s);
    resil_throttle_opts_default(&s.o);
    given g;
    apply(v, obj, throttle_fields, FIELD_COUNT(throttle_fields), &s, &g);
    s.o.seed = (uint64_t)s.seed;
    item->u.throttle = s.o;
}

/* ---- named sections --------------------------------------------------------- */

static cfg_item *add_item(vctx *v, resil_config_section s, const cfg_node *m)
{
    cfg_list *l = &v->cfg->sec[s];
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        cfg_item *items = realloc(l->v, cap * sizeof *items);
        if (items == NULL)
            return NULL;
        l->v = items;
        l->cap = cap;
    }
    cfg_item *it = &l->v[l->n];
    memset(it, 0, sizeof *it);
    it->name = strdup(m->key);
    if (it->name == NULL)
        return NULL;
    it->line = m->key_line;
    it->col = m->key_col;
    l->n++;
    return it;
}

static bool good_name(vctx *v, const cfg_node *m)
{
    size_t len = strlen(m->key);
    if (len == 0 || len >= RESIL_CONFIG_NAME_MAX) {
        fail_key(v, m, "a name must be 1 to %d bytes, got %zu", RESIL_CONFIG_NAME_MAX - 1, len);
        return false;
    }
    for (const char *p = m->key; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            fail_key(v, m, "a name must not contain control characters");
            return false;
        }
    }
    return true;
}

typedef void (*item_fn)(vctx *v, const cfg_node *value, cfg_item *item);

/* A section of named entries: name → value. */
static void parse_named(vctx *v, const cfg_node *obj, resil_config_section s, item_fn parse)
{
    if (!is_object(v, obj))
        return;
    for (const cfg_node *m = cfg_child(v->doc, obj); m; m = cfg_next(v->doc, m)) {
        size_t old = push(v, m->key);
        size_t dup = resil__cfg_find(v->cfg, s, m->key);
        if (dup != SIZE_MAX) {
            const cfg_item *d = &v->cfg->sec[s].v[dup];
            fail_key(v, m, "duplicate name: %s is already defined at %u:%u", d->name, d->line,
                     d->col);
        } else if (good_name(v, m)) {
            cfg_item *it = add_item(v, s, m);
            if (it == NULL)
                v->nomem = true;
            else
                parse(v, m, it);
        }
        pop(v, old);
    }
}

/* ---- Timeouts ---------------------------------------------------------------- */

static void parse_operation_timeout(vctx *v, const cfg_node *n, cfg_item *item)
{
    resil_duration d;
    if (parse_duration(v, n, &d) != 0)
        return;
    if (d <= 0) {
        fail_value(v, n, "must be > 0, got \"%s\"", n->str);
        return;
    }
    item->u.timeout = d;
}

static void set_operation_timeouts(vctx *v, const cfg_node *n, void *target)
{
    parse_named(v, n, RESIL_CONFIG_OPERATION_TIMEOUTS, parse_operation_timeout);
}

static const field timeouts_fields[] = {
    DUR("DefaultTimeout", resil_config, default_timeout, 0, LO_OPEN),
    CUSTOM("OperationTimeouts", set_operation_timeouts),
};

/* ---- GracefulDegradation --------------------------------------------------- */

typedef struct level_scratch {
    resil_degrade_level_opts l;
    const char *name;
} level_scratch;

static void set_level_name(vctx *v, const cfg_node *n, void *target)
{
    char got_buf[TEXT_MAX + 8];
    if (n->type != CFG_STRING || n->str_len == 0 || n->str_len >= RESIL_DEGRADE_NAME_MAX)
        fail_value(v, n, "must be a string of 1 to %d bytes, got %s", RESIL_DEGRADE_NAME_MAX - 1,
                   GOT(n));
    else
        ((level_scratch *)target)->name = n->str;
}

enum { LV_NAME, LV_PRIORITY, LV_ERROR, LV_CPU, LV_MEMORY };

static const field level_fields[] = {
    [LV_NAME] = CUSTOM("Name", set_level_name),
    [LV_PRIORITY] = NUM("PriorityThreshold", F_I32, level_scratch, l.priority_threshold,
                        INT32_MIN, INT32_MAX, 0),
    [LV_ERROR] = NUM("ErrorRateThreshold", F_DOUBLE, level_scratch, l.error_rate, 0, 100, PERCENT),
    [LV_CPU] = NUM("CpuThreshold", F_DOUBLE, level_scratch, l.cpu, 0, 100, PERCENT),
    [LV_MEMORY] = NUM("MemoryThreshold", F_DOUBLE, level_scratch, l.memory, 0, 100, PERCENT),
};

typedef struct degrade_scratch {
    resil_degrade_opts o;
    given levels[RESIL_DEGRADE_MAX_LEVELS];
} degrade_scratch;

/* Each level must ask for more than the one before. */
static void check_climb(vctx *v, const cfg_node *lv, const given *g, const level_scratch *cur,
                        const resil_degrade_level_opts *prev, size_t i)
{
    if (cur->l.priority_threshold <= prev->priority_threshold)
        fail_field(v, lv, level_fields, g, LV_PRIORITY,
                   "must be greater than Levels[%zu].PriorityThreshold (%d), got %d", i - 1,
                   (int)prev->priority_threshold, (int)cur->l.priority_threshold);
    const double now[] = {cur->l.error_rate, cur->l.cpu, cur->l.memory};
    const double before[] = {prev->error_rate, prev->cpu, prev->memory};
    for (size_t k = 0; k < 3; k++) {
        if (now[k] < before[k])
            fail_field(v, lv, level_fields, g, LV_ERROR + k,
                       "must not be below Levels[%zu].%s (%g), got %g", i - 1,
                       level_fields[LV_ERROR + k].key, before[k], now[k]);
    }
}

static void parse_level(vctx *v, const cfg_node *lv, size_t i, degrade_scratch *s)
{
    level_scratch ls;
    memset(&ls, 0, sizeof ls);
    given *g = &s->levels[i];
    size_t before = v->errors;
    apply(v, lv, level_fields, FIELD_COUNT(level_fields), &ls, g);
    if (lv->type != CFG_OBJECT)
        return;
    for (size_t k = 0; k < FIELD_COUNT(level_fields); k++)
        if (g->node[k] == NULL)
            fail_value(v, lv, "a level needs %s", level_fields[k].key);
    if (v->errors != before)
        return;
    if (i > 0)
        check_climb(v, lv, g, &ls, &s->o.levels[i - 1], i);
    snprintf(v->cfg->level_names[i], sizeof v->cfg->level_names[i], "%s", ls.name);
    ls.l.name = v->cfg->level_names[i];
    s->o.levels[i] = ls.l;
}

static void set_levels(vctx *v, const cfg_node *n, void *target)
{
    char got_buf[TEXT_MAX + 8];
    degrade_scratch *s = target;
    if (n->type != CFG_ARRAY) {
        fail_value(v, n, "must be an array of 1 to %d levels, mildest first, got %s",
                   RESIL_DEGRADE_MAX_LEVELS, GOT(n));
        return;
    }
    if (n->count < 1 || n->count > RESIL_DEGRADE_MAX_LEVELS) {
        fail_value(v, n, "must hold 1 to %d levels, got %u", RESIL_DEGRADE_MAX_LEVELS, n->count);
        return;
    }
    size_t i = 0;
    for (const cfg_node *lv = cfg_child(v->doc, n); lv; lv = cfg_next(v->doc, lv), i++) {
        size_t old = push_index(v, i);
        parse_level(v, lv, i, s);
        pop(v, old);
    }
    s->o.level_count = (int32_t)n->count;
}

enum { D_AUTO, D_ON_CALL, D_INTERVAL, D_MIN_LEVEL, D_WINDOW, D_BUCKETS, D_THROUGHPUT, D_LEVELS };

static const field degrade_fields[] = {
    [D_AUTO] = BOOLF("EnableAutoAdjustment", degrade_scratch, o.auto_adjust),
    [D_ON_CALL] = BOOLF("EvaluateOnCall", degrade_scratch, o.evaluate_on_call),
    [D_INTERVAL] = DUR("HealthCheckInterval", degrade_scratch, o.check_interval, 0, LO_OPEN),
    [D_MIN_LEVEL] = DUR("MinimumLevelDuration", degrade_scratch, o.min_level_duration, 0, 0),
    [D_WINDOW] = DUR("ErrorRateWindow", degrade_scratch, o.error_window, 0, LO_OPEN),
    [D_BUCKETS] = NUM("ErrorRateWindowBuckets", F_I32, degrade_scratch, o.error_buckets, 1,
                      1000, 0),
    [D_THROUGHPUT] = NUM("MinimumThroughput", F_I32, degrade_scratch, o.min_throughput, 1,
                         INT32_MAX, 0),
    [D_LEVELS] = CUSTOM("Levels", set_levels),
};

static void parse_degrade(vctx *v, const cfg_node *obj)
{
    degrade_scratch *s = calloc(1, sizeof *s);
    if (s == NULL) {
        v->nomem = true;
        return;
    }
    resil_degrade_opts_default(&s->o);
    given g;
    apply(v, obj, degrade_fields, FIELD_COUNT(degrade_fields), s, &g);
    if (obj->type == CFG_OBJECT && all_good(&g, D_WINDOW, D_BUCKETS, D_WINDOW) &&
        s->o.error_window / s->o.error_buckets < RESIL_MS(1))
        fail_field(v, obj, degrade_fields, &g, g.node[D_BUCKETS] ? D_BUCKETS : D_WINDOW,
                   "ErrorRateWindow / ErrorRateWindowBuckets must be at least 1ms");
    v->cfg->has_degrade = true;
    v->cfg->degrade = s->o;
    free(s);
}

/* ---- Hedging, Fallbacks, RetryBudgets --------------------------------------- */

typedef struct hedge_scratch {
    resil_config_hedge h;
    cfg_hedge_more more;
    size_t nurls, nweights; /* groups, and weights of groups */
    size_t nendpoints;      /* endpoints of every group so far */
    size_t first[RESIL_ROUTE_MAX_GROUPS], len[RESIL_ROUTE_MAX_GROUPS];
    int routing, selection;
} hedge_scratch;

/* One group written as an object: its endpoints and their weights. */
typedef struct group_scratch {
    hedge_scratch *h;
    size_t n, nweights;
} group_scratch;

static const enum_name routings[] = {
    {"Ordered", RESIL_ROUTE_ORDERED},
    {"Weighted", RESIL_ROUTE_WEIGHTED},
    {NULL, 0},
};

static const enum_name selections[] = {
    {"InitialAttempt", RESIL_ROUTE_INITIAL_ATTEMPT},
    {"EveryAttempt", RESIL_ROUTE_EVERY_ATTEMPT},
    {NULL, 0},
};

/* The endpoint URL `e` into slot k of the route's endpoints. */
static void endpoint_url(vctx *v, const cfg_node *e, hedge_scratch *s, size_t k)
{
    char got_buf[TEXT_MAX + 8];
    if (e->type != CFG_STRING || e->str_len == 0 || e->str_len >= CFG_URL_MAX ||
        strstr(e->str, "://") == NULL) {
        fail_value(v, e, "must be an endpoint URL such as \"https://eu.example.com\", got %s",
                   GOT(e));
        return;
    }
    snprintf(s->more.urls[k], sizeof s->more.urls[k], "%s", e->str);
}

/* A weight in [1, RESIL_ROUTE_WEIGHT_MAX]; 0 when `e` is none. */
static uint32_t route_weight(vctx *v, const cfg_node *e)
{
    char got_buf[TEXT_MAX + 8];
    double d;
    long long w;
    bool whole;
    if (resil__cfg_number(e, &d, &w, &whole) != 0 || !whole || w < 1 ||
        w > RESIL_ROUTE_WEIGHT_MAX) {
        fail_value(v, e, "must be a whole number in [1,%u], got %s", RESIL_ROUTE_WEIGHT_MAX,
                   GOT(e));
        return 0;
    }
    return (uint32_t)w;
}

static void one_member(vctx *v, const cfg_node *e, size_t i, void *target)
{
    group_scratch *g = target;
    endpoint_url(v, e, g->h, g->h->nendpoints + i);
}

static void set_members(vctx *v, const cfg_node *n, void *target)
{
    group_scratch *g = target;
    size_t room = CFG_ROUTE_ENDPOINTS_MAX - g->h->nendpoints;
    if (each_element(v, n, room, "endpoint URLs (a route holds at most 32)", one_member, g))
        g->n = n->count;
}

static void one_member_weight(vctx *v, const cfg_node *e, size_t i, void *target)
{
    group_scratch *g = target;
    size_t k = g->h->nendpoints + i;
    if (k < CFG_ROUTE_ENDPOINTS_MAX)
        g->h->more.endpoints[k].weight = route_weight(v, e);
}

static void set_member_weights(vctx *v, const cfg_node *n, void *target)
{
    group_scratch *g = target;
    if (each_element(v, n, CFG_ROUTE_ENDPOINTS_MAX, "weights", one_member_weight, g))
        g->nweights = n->count;
}

enum { G_ENDPOINTS, G_WEIGHTS };

static const field group_fields[] = {
    [G_ENDPOINTS] = CUSTOM("Endpoints", set_members),
    [G_WEIGHTS] = CUSTOM("Weights", set_member_weights),
};

/* A group of several endpoints, drawn by their Weights (1 each unless given). */
static size_t endpoint_group(vctx *v, const cfg_node *e, hedge_scratch *s)
{
    const field *f = group_fields;
    group_scratch gs = {s, 0, 0};
    given g;
    apply(v, e, f, FIELD_COUNT(group_fields), &gs, &g);
    if (!g.node[G_ENDPOINTS])
        fail_field(v, e, f, &g, G_ENDPOINTS, "a group needs Endpoints");
    else if (g.node[G_WEIGHTS] && !g.bad[G_WEIGHTS] && !g.bad[G_ENDPOINTS] && gs.nweights != gs.n)
        fail_field(v, e, f, &g, G_WEIGHTS, "must give one weight per endpoint: %zu for %zu",
                   gs.nweights, gs.n);
    return gs.n;
}

/* An element of Endpoints: a URL (a group of one) or a group object. */
static void one_url(vctx *v, const cfg_node *e, size_t i, void *target)
{
    hedge_scratch *s = target;
    s->first[i] = s->nendpoints;
    if (s->nendpoints == CFG_ROUTE_ENDPOINTS_MAX) {
        fail_value(v, e, "one endpoint too many: a route holds at most %d",
                   CFG_ROUTE_ENDPOINTS_MAX);
    } else if (e->type == CFG_OBJECT) {
        s->len[i] = endpoint_group(v, e, s);
    } else {
        endpoint_url(v, e, s, s->nendpoints);
        s->len[i] = 1;
    }
    s->nendpoints += s->len[i];
}

static void set_endpoints(vctx *v, const cfg_node *n, void *target)
{
    hedge_scratch *s = target;
    if (each_element(v, n, RESIL_ROUTE_MAX_GROUPS, "endpoint URLs or groups", one_url, s))
        s->nurls = n->count;
}

static void one_weight(vctx *v, const cfg_node *e, size_t i, void *target)
{
    hedge_scratch *s = target;
    s->more.groups[i].weight = route_weight(v, e);
}

static void set_weights(vctx *v, const cfg_node *n, void *target)
{
    hedge_scratch *s = target;
    if (each_element(v, n, RESIL_ROUTE_MAX_GROUPS, "weights", one_weight, s))
        s->nweights = n->count;
}

enum { H_MAX_HEDGED, H_DELAY, H_ENDPOINTS, H_ROUTING, H_WEIGHTS, H_SELECTION };

static const field hedge_fields[] = {
    [H_MAX_HEDGED] = NUM("MaxHedgedAttempts", F_U32, hedge_scratch, h.opts.max_hedged, 1,
                         RESIL_HEDGE_MAX, 0),
    [H_DELAY] = DUR("Delay", hedge_scratch, h.opts.delay, 0, 0),
    [H_ENDPOINTS] = CUSTOM("Endpoints", set_endpoints),
    [H_ROUTING] = ENUMF("Routing", hedge_scratch, routing, routings),
    [H_WEIGHTS] = CUSTOM("Weights", set_weights),
    [H_SELECTION] = ENUMF("SelectionMode", hedge_scratch, selection, selections),
};

/* Endpoints make a route of one group per element: in order, or drawn by
 * Weights (one per group). */
static void finish_hedge(vctx *v, const cfg_node *obj, const given *g, hedge_scratch *s)
{
    const field *f = hedge_fields;
    bool weighted = g->node[H_ROUTING] && s->routing == RESIL_ROUTE_WEIGHTED;
    if (!g->node[H_ENDPOINTS]) {
        for (size_t k = H_ROUTING; k <= H_SELECTION; k++)
            if (g->node[k])
                fail_field(v, obj, f, g, k, "%s routes Endpoints: it needs them", f[k].key);
        return;
    }
    if (g->node[H_WEIGHTS] && !weighted)
        fail_field(v, obj, f, g, H_WEIGHTS, "Weights need Routing Weighted");
    if (g->node[H_SELECTION] && !weighted)
        fail_field(v, obj, f, g, H_SELECTION, "SelectionMode needs Routing Weighted");
    if (g->node[H_WEIGHTS] && !g->bad[H_WEIGHTS] && !g->bad[H_ENDPOINTS] &&
        s->nweights != s->nurls)
        fail_field(v, obj, f, g, H_WEIGHTS, "must give one weight per group: %zu for %zu",
                   s->nweights, s->nurls);
    resil_route_opts *r = &s->more.route;
    resil_route_opts_default(r);
    r->kind = weighted ? RESIL_ROUTE_WEIGHTED : RESIL_ROUTE_ORDERED;
    r->selection = (resil_route_selection)s->selection;
    r->ngroups = s->nurls;
}

static void keep_route(vctx *v, hedge_scratch *s, cfg_item *item)
{
    if (s->nurls == 0)
        return;
    item->hedge_more = malloc(sizeof *item->hedge_more);
    if (item->hedge_more == NULL) {
        v->nomem = true;
        return;
    }
    cfg_hedge_more *m = item->hedge_more;
    *m = s->more;
    for (size_t k = 0; k < s->nendpoints && k < CFG_ROUTE_ENDPOINTS_MAX; k++)
        m->endpoints[k].url = m->urls[k];
    for (size_t i = 0; i < s->nurls; i++) {
        m->groups[i].endpoints = &m->endpoints[s->first[i]];
        m->groups[i].len = s->len[i];
    }
    m->route.groups = m->groups;
    item->u.hedge.route = &m->route;
}

static void parse_hedge(vctx *v, const cfg_node *obj, cfg_item *item)
{
    hedge_scratch s;
    memset(&s, 0, sizeof s);
    resil__cfg_hedge_default(&s.h);
    given g;
    size_t before = v->errors;
    apply(v, obj, hedge_fields, FIELD_COUNT(hedge_fields), &s, &g);
    if (obj->type == CFG_OBJECT)
        finish_hedge(v, obj, &g, &s);
    if (v->errors == before) {
        resil_err e = {0, ""};
        library_check(v, obj, resil_hedge_opts_validate(&s.h.opts, &e), &e);
    }
    item->u.hedge = s.h;
    keep_route(v, &s, item);
}

typedef struct fallback_scratch {
    resil_outcome o;
    int kind;
} fallback_scratch;

/* A fallback answers with any kind an operation could, a success first. */
static const enum_name answer_kinds[] = {
    {"Success", RESIL_SUCCESS},     {"Transient", RESIL_TRANSIENT},
    {"Throttled", RESIL_THROTTLED}, {"Timeout", RESIL_TIMEOUT},
    {"Permanent", RESIL_PERMANENT}, {"Rejected", RESIL_REJECTED},
    {NULL, 0},
};

static void set_detail(vctx *v, const cfg_node *n, void *target)
{
    char got_buf[TEXT_MAX + 8];
    fallback_scratch *s = target;
    if (n->type != CFG_STRING || n->str_len >= RESIL_DETAIL_MAX) {
        fail_value(v, n, "must be a text of at most %d bytes, got %s", RESIL_DETAIL_MAX - 1,
                   GOT(n));
        return;
    }
    snprintf(s->o.detail, sizeof s->o.detail, "%s", n->str);
}

enum { FB_KIND, FB_CODE, FB_DETAIL };

static const field fallback_fields[] = {
    [FB_KIND] = ENUMF("Kind", fallback_scratch, kind, answer_kinds),
    [FB_CODE] = NUM("Code", F_I64, fallback_scratch, o.code, -9007199254740991.0,
                    9007199254740991.0, 0),
    [FB_DETAIL] = CUSTOM("Detail", set_detail),
};

static void parse_fallback(vctx *v, const cfg_node *obj, cfg_item *item)
{
    fallback_scratch s;
    memset(&s, 0, sizeof s);
    s.o = resil_ok();
    given g;
    apply(v, obj, fallback_fields, FIELD_COUNT(fallback_fields), &s, &g);
    s.o.kind = (resil_kind)s.kind;
    item->u.fallback = s.o;
}

typedef struct budget_scratch {
    resil_budget_opts o;
    int model;
} budget_scratch;

static const enum_name budget_models[] = {
    {"Tokens", RESIL_BUDGET_TOKENS},
    {"Quota", RESIL_BUDGET_QUOTA},
    {"Ratio", RESIL_BUDGET_RATIO},
    {NULL, 0},
};

enum {
    BU_MODEL,
    BU_MAX_TOKENS,
    BU_TOKEN_RATIO,
    BU_CAPACITY,
    BU_RETRY_COST,
    BU_TIMEOUT_COST,
    BU_SUCCESS,
    BU_TTL,
    BU_PERCENT,
    BU_MIN_PER_SECOND
};

static const field budget_fields[] = {
    [BU_MODEL] = ENUMF("Model", budget_scratch, model, budget_models),
    [BU_MAX_TOKENS] = NUM("MaxTokens", F_DOUBLE, budget_scratch, o.max_tokens, 0, 1000, LO_OPEN),
    [BU_TOKEN_RATIO] = NUM("TokenRatio", F_DOUBLE, budget_scratch, o.token_ratio, 0.001, 1000, 0),
    [BU_CAPACITY] = NUM("Capacity", F_I32, budget_scratch, o.capacity, 1, INT32_MAX, 0),
    [BU_RETRY_COST] = NUM("RetryCost", F_I32, budget_scratch, o.retry_cost, 0, INT32_MAX, 0),
    [BU_TIMEOUT_COST] = NUM("TimeoutCost", F_I32, budget_scratch, o.timeout_cost, 0, INT32_MAX, 0),
    [BU_SUCCESS] =
        NUM("SuccessIncrement", F_I32, budget_scratch, o.success_increment, 0, INT32_MAX, 0),
    [BU_TTL] = DUR("Ttl", budget_scratch, o.ttl, RESIL_S(1), 0),
    [BU_PERCENT] = NUM("Percent", F_DOUBLE, budget_scratch, o.percent, 0, 1000, 0),
    [BU_MIN_PER_SECOND] =
        NUM("MinRetriesPerSecond", F_I32, budget_scratch, o.min_per_second, 0, INT32_MAX, 0),
};

static void finish_budget(vctx *v, const cfg_node *obj, const given *g, const budget_scratch *s)
{
    static const unsigned tokens = KIND(RESIL_BUDGET_TOKENS), quota = KIND(RESIL_BUDGET_QUOTA),
                          ratio = KIND(RESIL_BUDGET_RATIO);
    static const kind_key keys[] = {
        {BU_MAX_TOKENS, tokens, "the Tokens model"},
        {BU_TOKEN_RATIO, tokens, "the Tokens model"},
        {BU_CAPACITY, quota, "the Quota model"},
        {BU_RETRY_COST, quota, "the Quota model"},
        {BU_TIMEOUT_COST, quota, "the Quota model"},
        {BU_SUCCESS, quota, "the Quota model"},
        {BU_TTL, ratio, "the Ratio model"},
        {BU_PERCENT, ratio, "the Ratio model"},
        {BU_MIN_PER_SECOND, ratio, "the Ratio model"},
    };
    refuse_other_kinds(v, obj, budget_fields, g, BU_MODEL, budget_models, s->model, "budget",
                       keys, sizeof keys / sizeof keys[0]);
}

static void parse_budget(vctx *v, const cfg_node *obj, cfg_item *item)
{
    budget_scratch s;
    memset(&s, 0, sizeof s);
    resil_budget_opts_default(&s.o, RESIL_BUDGET_TOKENS);
    given g;
    size_t before = v->errors;
    apply(v, obj, budget_fields, FIELD_COUNT(budget_fields), &s, &g);
    finish_budget(v, obj, &g, &s);
    s.o.model = (resil_budget_model)s.model;
    if (v->errors == before) {
        resil_budget *b = NULL;
        resil_err e = {0, ""};
        library_check(v, obj, resil_budget_new(&s.o, &b, &e), &e);
        resil_budget_free(b);
    }
    item->u.budget = s.o;
}

/* Every Retry entry's Budget names a RetryBudgets entry (which may be
 * written after it). */
static void check_budget_refs(vctx *v)
{
    const cfg_list *l = &v->cfg->sec[RESIL_CONFIG_RETRY];
    for (size_t i = 0; i < l->n; i++) {
        const cfg_retry_more *m = l->v[i].more;
        if (m == NULL || m->budget[0] == '\0' ||
            resil__cfg_find(v->cfg, RESIL_CONFIG_BUDGETS, m->budget) != SIZE_MAX)
            continue;
        size_t old = push(v, "Retry");
        push(v, l->v[i].name);
        push(v, "Budget");
        fail_at(v, m->budget_line, m->budget_col, "no RetryBudgets entry named \"%s\"",
                m->budget);
        pop(v, old);
    }
}

/* ---- Pipelines -------------------------------------------------------------- */

typedef struct step_kind {
    const char *name, *plural;
    resil_config_step_kind kind;
    int section; /* what the step's reference indexes; -1: none */
} step_kind;

static const step_kind step_kinds[] = {
    {"RateLimiter", "RateLimiters", RESIL_CONFIG_STEP_RATE_LIMITER, RESIL_CONFIG_RATE_LIMITERS},
    {"Bulkhead", "Bulkheads", RESIL_CONFIG_STEP_BULKHEAD, RESIL_CONFIG_BULKHEADS},
    {"TotalTimeout", NULL, RESIL_CONFIG_STEP_TOTAL_TIMEOUT, RESIL_CONFIG_OPERATION_TIMEOUTS},
    {"Retry", NULL, RESIL_CONFIG_STEP_RETRY, RESIL_CONFIG_RETRY},
    {"CircuitBreaker", "CircuitBreakers", RESIL_CONFIG_STEP_BREAKER, RESIL_CONFIG_BREAKERS},
    {"AttemptTimeout", NULL, RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT, RESIL_CONFIG_OPERATION_TIMEOUTS},
    {"GracefulDegradation", "Degradation", RESIL_CONFIG_STEP_DEGRADE, -1},
    {"Chaos", NULL, RESIL_CONFIG_STEP_CHAOS, RESIL_CONFIG_CHAOS},
    {"AdaptiveLimiter", "AdaptiveLimiters", RESIL_CONFIG_STEP_ADAPTIVE_LIMITER,
     RESIL_CONFIG_ADAPTIVE_LIMITERS},
    {"Throttle", "Throttles", RESIL_CONFIG_STEP_THROTTLE, RESIL_CONFIG_THROTTLES},
    {"Hedging", NULL, RESIL_CONFIG_STEP_HEDGING, RESIL_CONFIG_HEDGING},
    {"Fallback", "Fallbacks", RESIL_CONFIG_STEP_FALLBACK, RESIL_CONFIG_FALLBACKS},
    {"StandardHedging", NULL, RESIL_CONFIG_STEP_STANDARD_HEDGING, RESIL_CONFIG_HEDGING},
    {"Pipeline", "Pipelines", RESIL_CONFIG_STEP_PIPELINE, RESIL_CONFIG_PIPELINES},
};

#define STEP_KINDS (sizeof step_kinds / sizeof step_kinds[0])
#define PIPELINE_KIND (STEP_KINDS - 1) /* "Pipeline:NAME" */

static const step_kind *step_kind_of(resil_config_step_kind k)
{
    for (size_t i = 0; i < STEP_KINDS; i++)
        if (step_kinds[i].kind == k)
            return &step_kinds[i];
    return NULL;
}

const char *resil_config_step_name(resil_config_step_kind k)
{
    const step_kind *sk = step_kind_of(k);
    return sk != NULL ? sk->name : "";
}

int resil__cfg_step_section(resil_config_step_kind k)
{
    const step_kind *sk = step_kind_of(k);
    return sk != NULL ? sk->section : -1;
}

/* Split "Kind:arg" (spaces around either part ignored) into buffers. */
static void split_step(const char *s, char *kind, char *arg, size_t cap)
{
    const char *colon = strchr(s, ':');
    size_t klen = colon ? (size_t)(colon - s) : strlen(s);
    const char *a = colon ? colon + 1 : "";
    while (klen && s[klen - 1] == ' ')
        klen--;
    while (*s == ' ' && klen) {
        s++;
        klen--;
    }
    while (*a == ' ')
        a++;
    size_t alen = strlen(a);
    while (alen && a[alen - 1] == ' ')
        alen--;
    snprintf(kind, cap, "%.*s", klen > cap - 1 ? (int)(cap - 1) : (int)klen, s);
    snprintf(arg, cap, "%.*s", alen > cap - 1 ? (int)(cap - 1) : (int)alen, a);
}

static const step_kind *find_step_kind(vctx *v, const cfg_node *n, const char *kind)
{
    const char *cands[STEP_KINDS * 2];
    size_t nc = 0;
    for (size_t i = 0; i < STEP_KINDS; i++) {
        if (resil__name_eq(kind, step_kinds[i].name) ||
            (step_kinds[i].plural && resil__name_eq(kind, step_kinds[i].plural)))
            return &step_kinds[i];
        cands[nc++] = step_kinds[i].name;
    }
    const char *s = resil__closest(kind, cands, nc);
    fail_value(v, n, "unknown strategy \"%s\"%s%s%s; use RateLimiter, Bulkhead, TotalTimeout, "
               "Retry, CircuitBreaker, AttemptTimeout, GracefulDegradation, Chaos, "
               "AdaptiveLimiter, Throttle, Hedging, Fallback, StandardHedging or Pipeline",
               kind, s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
    return NULL;
}

/* The policy `name` in section s, or SIZE_MAX after reporting. */
static size_t resolve_name(vctx *v, uint32_t line, uint32_t col, const step_kind *k,
                           const char *name)
{
    if (name[0] == '\0') {
        fail_at(v, line, col, "%s needs a name: \"%s:NAME\"", k->name, k->name);
        return SIZE_MAX;
    }
    const cfg_list *l = &v->cfg->sec[k->section];
    size_t i = resil__cfg_find(v->cfg, (resil_config_section)k->section, name);
    if (i != SIZE_MAX)
        return i;
    const char *cands[64];
    size_t nc = 0;
    for (size_t j = 0; j < l->n && nc < 64; j++)
        cands[nc++] = l->v[j].name;
    const char *s = resil__closest(name, cands, nc);
    fail_at(v, line, col, "no %s named \"%s\" in Resilience.%s%s%s%s", k->name, name,
               resil_config_section_name((resil_config_section)k->section),
               s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
    return SIZE_MAX;
}

/* A timeout step's argument: a duration, or an operation's timeout. */
static void resolve_timeout(vctx *v, const cfg_node *n, const step_kind *k, const char *arg,
                            cfg_step *st)
{
    if (arg[0] == '\0') {
        if (st->kind == RESIL_CONFIG_STEP_TOTAL_TIMEOUT) {
            st->per_operation = true;
            return;
        }
        fail_value(v, n, "AttemptTimeout needs a duration or an operation: "
                         "\"AttemptTimeout:2s\"");
        return;
    }
    resil_duration d;
    resil_err why = {0, ""};
    int rc = resil_duration_parse_cstr(arg, &d, &why);
    if (rc == 0) {
        if (d <= 0)
            fail_value(v, n, "%s must be > 0, got \"%s\"", k->name, arg);
        st->timeout = d;
        return;
    }
    size_t op = resil__cfg_find(v->cfg, RESIL_CONFIG_OPERATION_TIMEOUTS, arg);
    if (op == SIZE_MAX && rc == RESIL_ERANGE) { /* a duration, out of range */
        fail_value(v, n, "%s: %s", k->name, why.message);
        return;
    }
    if (op == SIZE_MAX) {
        fail_value(v, n, "\"%s\" is neither a duration nor an operation of "
                         "Timeouts.OperationTimeouts", arg);
        return;
    }
    st->ref = op;
    st->timeout = v->cfg->sec[RESIL_CONFIG_OPERATION_TIMEOUTS].v[op].u.timeout;
}

static void parse_step(vctx *v, const cfg_node *n, cfg_step *st)
{
    char got_buf[TEXT_MAX + 8], kind[RESIL_CONFIG_NAME_MAX + 32], arg[RESIL_CONFIG_NAME_MAX + 32];
    memset(st, 0, sizeof *st);
    st->ref = SIZE_MAX;
    st->line = n->line;
    st->col = n->col;
    if (n->type != CFG_STRING) {
        fail_value(v, n, "must be a strategy such as \"Retry:NAME\", got %s", GOT(n));
        return;
    }
    split_step(n->str, kind, arg, sizeof kind);
    const step_kind *k = find_step_kind(v, n, kind);
    if (k == NULL)
        return;
    st->kind = k->kind;
    if (k->kind == RESIL_CONFIG_STEP_TOTAL_TIMEOUT || k->kind == RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT)
        resolve_timeout(v, n, k, arg, st);
    else if (k->kind == RESIL_CONFIG_STEP_DEGRADE && arg[0] != '\0')
        fail_value(v, n, "GracefulDegradation takes no name: there is one monitor");
    else if (k->kind == RESIL_CONFIG_STEP_PIPELINE && arg[0] == '\0')
        fail_value(v, n, "Pipeline needs a name: \"Pipeline:NAME\"");
    else if (k->kind == RESIL_CONFIG_STEP_PIPELINE)
        st->pending = n->str; /* resolved once every pipeline is known */
    else if (k->kind == RESIL_CONFIG_STEP_STANDARD_HEDGING && arg[0] == '\0')
        return; /* Microsoft's hedging defaults */
    else if (k->section >= 0)
        st->ref = resolve_name(v, n->line, n->col, k, arg);
}

static void fail_step(vctx *v, const cfg_step *st, const char *fmt, ...) RESIL_PRINTF(3, 4);
static void fail_step(vctx *v, const cfg_step *st, const char *fmt, ...)
{
    size_t old = push_index(v, st->index);
    va_list ap;
    va_start(ap, fmt);
    resil__diag_addv(v->diags, v->path, st->line, st->col, fmt, ap);
    va_end(ap);
    v->errors++;
    pop(v, old);
}

/* The order rules the pipeline builder enforces, with positions. */
static void check_order(vctx *v, const cfg_pipeline_def *p)
{
    const cfg_step *retry = cfg_step_of(p, RESIL_CONFIG_STEP_RETRY);
    const cfg_step *last_retry = cfg_last_step_of(p, RESIL_CONFIG_STEP_RETRY);
    const cfg_step *total = cfg_step_of(p, RESIL_CONFIG_STEP_TOTAL_TIMEOUT);
    const cfg_step *attempt = cfg_step_of(p, RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT);
    const cfg_step *hedging = cfg_step_of(p, RESIL_CONFIG_STEP_HEDGING);
    const cfg_step *fallback = cfg_step_of(p, RESIL_CONFIG_STEP_FALLBACK);
    if (retry && total && total > retry)
        fail_step(v, total,
                  "TotalTimeout must come before Retry: it bounds every attempt and wait");
    if (last_retry && attempt && attempt < last_retry)
        fail_step(v, attempt, "AttemptTimeout must come after Retry: it bounds one attempt");
    if (last_retry && hedging && hedging < last_retry)
        fail_step(v, hedging, "Hedging must come after Retry: each attempt is hedged");
    if (fallback && hedging && hedging < fallback)
        fail_step(v, hedging, "Hedging must come after Fallback");
    if (total && attempt && attempt < total)
        fail_step(v, attempt, "AttemptTimeout must come after TotalTimeout");
    if (total && attempt && attempt->timeout > 0) {
        resil_duration t = total->per_operation ? v->cfg->default_timeout : total->timeout;
        if (t > 0 && attempt->timeout > t) {
            char a[32], b[32];
            resil_duration_format(attempt->timeout, a, sizeof a);
            resil_duration_format(t, b, sizeof b);
            fail_step(v, attempt, "the attempt timeout %s exceeds the total timeout %s%s", a, b,
                      total->per_operation ? " (Timeouts.DefaultTimeout)" : "");
        }
    }
}

/* A breaker with Excalibur's OperationTimeout bounds each call through it:
 * the pipeline gets that attempt timeout right after the breaker, unless it
 * names an AttemptTimeout of its own, which would be a second bound. */
static void breaker_operation_timeout(vctx *v, cfg_pipeline_def *p)
{
    const cfg_step *br = cfg_step_of(p, RESIL_CONFIG_STEP_BREAKER);
    if (br == NULL || br->ref == SIZE_MAX)
        return;
    const cfg_item *it = &v->cfg->sec[RESIL_CONFIG_BREAKERS].v[br->ref];
    if (it->operation_timeout <= 0)
        return;
    const cfg_step *at = cfg_step_of(p, RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT);
    if (at != NULL) {
        fail_step(v, at, "CircuitBreaker:%s bounds each call with its OperationTimeout: "
                         "an AttemptTimeout too would be a second bound; keep one",
                  it->name);
        return;
    }
    if (p->nsteps == RESIL_CONFIG_MAX_STEPS) {
        fail_step(v, br, "CircuitBreaker:%s's OperationTimeout adds an AttemptTimeout, and "
                         "the pipeline has no room for it (at most %d strategies)",
                  it->name, RESIL_CONFIG_MAX_STEPS);
        return;
    }
    size_t at_index = (size_t)(br - p->steps) + 1;
    cfg_step own = *br;
    own.kind = RESIL_CONFIG_STEP_ATTEMPT_TIMEOUT;
    own.ref = SIZE_MAX;
    own.timeout = it->operation_timeout;
    memmove(&p->steps[at_index + 1], &p->steps[at_index],
            (p->nsteps - at_index) * sizeof p->steps[0]);
    p->steps[at_index] = own;
    p->nsteps++;
}

static size_t retries_in(const cfg_pipeline_def *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nsteps; i++)
        n += p->steps[i].kind == RESIL_CONFIG_STEP_RETRY;
    return n;
}

/* Microsoft's hedging handler brings its own five strategies, in its order:
 * another strategy beside it would have no place that order defines. */
static bool standard_hedging_with_others(const cfg_pipeline_def *p, const cfg_step *st)
{
    return st->kind == RESIL_CONFIG_STEP_STANDARD_HEDGING ||
           cfg_step_of(p, RESIL_CONFIG_STEP_STANDARD_HEDGING) != NULL;
}

static void parse_pipeline(vctx *v, const cfg_node *n, cfg_item *item)
{
    char got_buf[TEXT_MAX + 8];
    cfg_pipeline_def *p = &item->u.pipeline;
    if (n->type != CFG_ARRAY) {
        fail_value(v, n, "must be an array of strategies, outermost first, got %s", GOT(n));
        return;
    }
    size_t i = 0;
    for (const cfg_node *e = cfg_child(v->doc, n); e; e = cfg_next(v->doc, e), i++) {
        size_t old = push_index(v, i);
        cfg_step st;
        parse_step(v, e, &st);
        st.index = i;
        const cfg_step *seen = st.kind ? cfg_step_of(p, st.kind) : NULL;
        if (seen && st.kind == RESIL_CONFIG_STEP_RETRY && retries_in(p) < RESIL_PIPELINE_MAX_RETRIES)
            seen = NULL; /* an outer retry around an inner one */
        if (seen && st.kind == RESIL_CONFIG_STEP_RETRY)
            fail_value(v, e, "a pipeline takes Retry at most %d times",
                       RESIL_PIPELINE_MAX_RETRIES);
        else if (seen)
            fail_value(v, e, "a pipeline takes each strategy once: %s is already at %u:%u",
                       resil_config_step_name(st.kind), seen->line, seen->col);
        else if (p->nsteps > 0 && p->steps[p->nsteps - 1].kind == RESIL_CONFIG_STEP_PIPELINE)
            fail_value(v, e, "nothing may follow Pipeline: the inner pipeline is the operation");
        else if (st.kind && p->nsteps > 0 && standard_hedging_with_others(p, &st))
            fail_value(v, e, "StandardHedging is a whole pipeline (total timeout, hedging, "
                             "concurrency limit, breaker, attempt timeout): it stands alone");
        else if (st.kind && p->nsteps == RESIL_CONFIG_MAX_STEPS)
            fail_value(v, e, "one strategy too many: a pipeline holds at most %d",
                       RESIL_CONFIG_MAX_STEPS);
        else if (st.kind)
            p->steps[p->nsteps++] = st;
        pop(v, old);
    }
    breaker_operation_timeout(v, p);
    check_order(v, p);
}

/* Pipeline references, once every pipeline's name is known. */
static void resolve_pipeline_refs(vctx *v)
{
    cfg_list *l = &v->cfg->sec[RESIL_CONFIG_PIPELINES];
    for (size_t i = 0; i < l->n; i++) {
        cfg_pipeline_def *p = &l->v[i].u.pipeline;
        cfg_step *st = p->nsteps ? &p->steps[p->nsteps - 1] : NULL;
        if (st == NULL || st->pending == NULL)
            continue;
        char kind[RESIL_CONFIG_NAME_MAX + 32], arg[RESIL_CONFIG_NAME_MAX + 32];
        split_step(st->pending, kind, arg, sizeof kind);
        size_t old = push(v, l->v[i].name);
        size_t old2 = push_index(v, st->index);
        st->ref = resolve_name(v, st->line, st->col, &step_kinds[PIPELINE_KIND], arg);
        st->pending = NULL;
        pop(v, old2);
        pop(v, old);
    }
}

/* The pipeline a pipeline runs as its operation, or SIZE_MAX. */
static size_t inner_of(const resil_config *c, size_t i)
{
    const cfg_pipeline_def *p = &c->sec[RESIL_CONFIG_PIPELINES].v[i].u.pipeline;
    const cfg_step *st = p->nsteps ? &p->steps[p->nsteps - 1] : NULL;
    if (st == NULL || st->kind != RESIL_CONFIG_STEP_PIPELINE || st->ref >= SIZE_MAX - 1)
        return SIZE_MAX;
    return st->ref;
}

/* Each pipeline has at most one inner pipeline, so following the chain
 * from each for RESIL_CONFIG_NEST_MAX steps finds both a loop back to it
 * and a chain too deep to run (a long loop is both). */
static void check_nesting(vctx *v)
{
    const cfg_list *l = &v->cfg->sec[RESIL_CONFIG_PIPELINES];
    for (size_t i = 0; i < l->n; i++) {
        size_t at = i, levels = 1;
        for (;;) {
            at = inner_of(v->cfg, at);
            if (at == SIZE_MAX || at == i || ++levels > RESIL_CONFIG_NEST_MAX)
                break;
        }
        if (at == SIZE_MAX)
            continue;
        const cfg_pipeline_def *p = &l->v[i].u.pipeline;
        const cfg_step *st = &p->steps[p->nsteps - 1];
        size_t old = push(v, "Pipelines");
        size_t old2 = push(v, l->v[i].name);
        if (at == i)
            fail_step(v, st, "pipelines must not contain themselves: %s leads back to %s",
                      l->v[st->ref].name, l->v[i].name);
        else
            fail_step(v, st, "pipelines nest at most %d deep", RESIL_CONFIG_NEST_MAX);
        pop(v, old2);
        pop(v, old);
    }
}

/* ---- the document ------------------------------------------------------------- */

enum {
    S_TIMEOUTS,
    S_RETRY,
    S_BREAKERS,
    S_BULKHEADS,
    S_LIMITERS,
    S_DEGRADE,
    S_DISTRIBUTED,
    S_CHAOS,
    S_ADAPTIVE,
    S_THROTTLES,
    S_HEDGING,
    S_FALLBACKS,
    S_BUDGETS,
    S_PIPELINES
};

static const char *const section_keys[] = {
    [S_TIMEOUTS] = "Timeouts",
    [S_RETRY] = "Retry",
    [S_BREAKERS] = "CircuitBreakers",
    [S_BULKHEADS] = "Bulkheads",
    [S_LIMITERS] = "RateLimiters",
    [S_DEGRADE] = "GracefulDegradation",
    [S_DISTRIBUTED] = "DistributedCircuitBreaker",
    [S_CHAOS] = "Chaos",
    [S_ADAPTIVE] = "AdaptiveLimiters",
    [S_THROTTLES] = "Throttles",
    [S_HEDGING] = "Hedging",
    [S_FALLBACKS] = "Fallbacks",
    [S_BUDGETS] = "RetryBudgets",
    [S_PIPELINES] = "Pipelines",
};

#define SECTIONS (sizeof section_keys / sizeof section_keys[0])

static void parse_section(vctx *v, size_t s, const cfg_node *n)
{
    given g;
    switch (s) {
    case S_TIMEOUTS:
        apply(v, n, timeouts_fields, FIELD_COUNT(timeouts_fields), v->cfg, &g);
        break;
    case S_RETRY:
        parse_named(v, n, RESIL_CONFIG_RETRY, parse_retry);
        break;
    case S_BREAKERS:
        parse_named(v, n, RESIL_CONFIG_BREAKERS, parse_breaker);
        break;
    case S_BULKHEADS:
        parse_named(v, n, RESIL_CONFIG_BULKHEADS, parse_bulkhead);
        break;
    case S_LIMITERS:
        parse_named(v, n, RESIL_CONFIG_RATE_LIMITERS, parse_limiter);
        break;
    case S_DEGRADE:
        parse_degrade(v, n);
        break;
    case S_DISTRIBUTED:
        parse_distributed(v, n);
        break;
    case S_CHAOS:
        parse_named(v, n, RESIL_CONFIG_CHAOS, parse_chaos);
        break;
    case S_ADAPTIVE:
        parse_named(v, n, RESIL_CONFIG_ADAPTIVE_LIMITERS, parse_adaptive);
        break;
    case S_THROTTLES:
        parse_named(v, n, RESIL_CONFIG_THROTTLES, parse_throttle);
        break;
    case S_HEDGING:
        parse_named(v, n, RESIL_CONFIG_HEDGING, parse_hedge);
        break;
    case S_FALLBACKS:
        parse_named(v, n, RESIL_CONFIG_FALLBACKS, parse_fallback);
        break;
    case S_BUDGETS:
        parse_named(v, n, RESIL_CONFIG_BUDGETS, parse_budget);
        break;
    case S_PIPELINES:
        parse_named(v, n, RESIL_CONFIG_PIPELINES, parse_pipeline);
        if (n->type == CFG_OBJECT)
            resolve_pipeline_refs(v);
        break;
    }
}

/* The sections in document order, Pipelines last: a pipeline names
 * strategies that may be defined after it. */
static void parse_resilience(vctx *v, const cfg_node *res)
{
    const cfg_node *seen[SECTIONS] = {0};
    if (!is_object(v, res))
        return;
    for (int pass = 0; pass < 2; pass++) {
        for (const cfg_node *m = cfg_child(v->doc, res); m; m = cfg_next(v->doc, m)) {
            size_t s = 0;
            while (s < SECTIONS && !resil__name_eq(m->key, section_keys[s]))
                s++;
            if (pass == 0 && s == SECTIONS) {
                size_t old = push(v, m->key);
                const char *hint = resil__closest(m->key, section_keys, SECTIONS);
                if (hint)
                    fail_key(v, m, "unknown key (did you mean %s?)", hint);
                else
                    fail_key(v, m, "unknown key");
                pop(v, old);
                continue;
            }
            if (s == SECTIONS || (pass == 1) != (s == S_PIPELINES))
                continue;
            size_t old = push(v, section_keys[s]);
            if (seen[s] && seen[s] != m) {
                fail_key(v, m, "duplicate key: %s is already given at %u:%u", section_keys[s],
                         seen[s]->key_line, seen[s]->key_col);
            } else {
                seen[s] = m;
                parse_section(v, s, m);
            }
            pop(v, old);
        }
    }
    check_nesting(v);
    check_budget_refs(v);
}

static void config_init(resil_config *c)
{
    memset(c, 0, sizeof *c);
    c->default_timeout = RESIL_TIMEOUT_DEFAULT;
    resil_degrade_opts_default(&c->degrade);
    breaker_scratch s;
    distributed_default(&s);
    c->distributed.enabled = s.enabled;
    c->distributed.sync_interval = s.sync_interval;
    c->distributed.breaker = s.o;
}

/* The root's Resilience member (other members are the application's own
 * settings), or NULL after saying why there is none. */
static const cfg_node *find_resilience(vctx *v, const cfg_node *root)
{
    char got_buf[TEXT_MAX + 8];
    if (root->type != CFG_OBJECT) {
        fail_value(v, root, "the document must be a JSON object with a Resilience section, "
                            "got %s", GOT(root));
        return NULL;
    }
    const cfg_node *res = NULL;
    for (const cfg_node *m = cfg_child(v->doc, root); m; m = cfg_next(v->doc, m)) {
        if (!resil__name_eq(m->key, "Resilience"))
            continue;
        if (res == NULL) {
            res = m;
            continue;
        }
        size_t old = push(v, "Resilience");
        fail_key(v, m, "duplicate key: Resilience is already given at %u:%u", res->key_line,
                 res->key_col);
        pop(v, old);
    }
    if (res != NULL)
        return res;
    const char *cands[] = {"Resilience"};
    const char *near = NULL;
    for (const cfg_node *m = cfg_child(v->doc, root); m && !near; m = cfg_next(v->doc, m))
        if (resil__closest(m->key, cands, 1))
            near = m->key;
    fail_value(v, root, "the document has no Resilience section%s%s%s",
               near ? " (is \"" : "", near ? near : "", near ? "\" a typo?)" : "");
    return NULL;
}

int resil__cfg_build(const cfg_doc *doc, resil_config **out, resil_config_diags *diags)
{
    *out = NULL;
    resil_config *c = malloc(sizeof *c);
    if (c == NULL)
        return RESIL_ENOMEM;
    config_init(c);
    vctx v = {.doc = doc, .cfg = c, .diags = diags};
    size_t first = diags ? diags->len : 0;
    const cfg_node *res = find_resilience(&v, &doc->nodes[0]);
    if (res) {
        push(&v, "Resilience");
        parse_resilience(&v, res);
    }
    resil__diags_sort(diags, first); /* found section by section, pipelines last */
    if (v.nomem || v.errors > 0) {
        resil_config_free(c);
        return v.nomem ? RESIL_ENOMEM : RESIL_EINVAL;
    }
    *out = c;
    return 0;
}
