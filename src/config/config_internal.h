/*
 * config_internal.h — what the files of libresil-config share: the located
 * tree the scanner builds, the validated document, and the small helpers
 * for diagnostics and text.
 *
 * jansson is the authority on JSON: it accepts or rejects the text and
 * decodes every scalar. What it cannot give is where a value was written,
 * and every diagnostic needs that, so a scanner walks the accepted text once
 * more and builds a tree of nodes that know their line and column, their
 * member name, and the bytes of their value. Validation walks that tree;
 * nothing downstream sees JSON again.
 */
#ifndef RESIL_CONFIG_INTERNAL_H
#define RESIL_CONFIG_INTERNAL_H

#include <stdarg.h>

#include "resil/config.h"

/* ---- the located tree (scan.c) --------------------------------------------- */

typedef enum cfg_type {
    CFG_OBJECT,
    CFG_ARRAY,
    CFG_STRING,
    CFG_NUMBER,
    CFG_TRUE,
    CFG_FALSE,
    CFG_NULL
} cfg_type;

typedef struct cfg_node {
    cfg_type type;
    uint32_t line, col;         /* where the value starts */
    uint32_t key_line, key_col; /* where its member name starts (objects' members) */
    const char *key;            /* the decoded member name, NUL-terminated; NULL
                                   for array elements and the root */
    const char *str;            /* a string's decoded value, NUL-terminated */
    size_t str_len;             /* (jansson refuses \u0000, so no NUL inside) */
    const char *tok;            /* the value's bytes in the text (numbers) */
    size_t tok_len;
    uint32_t first, next;       /* first child, next sibling; 0 = none */
    uint32_t count;             /* children */
} cfg_node;

typedef struct cfg_doc {
    cfg_node *nodes; /* nodes[0] is the root */
    size_t n, cap;
    char *arena;     /* decoded strings; never larger than the text */
    size_t used, arena_cap;
} cfg_doc;

/* Check `len` bytes with jansson and build the located tree. Returns 0,
 * RESIL_ESYNTAX (one diagnostic added) or RESIL_ENOMEM. */
int resil__cfg_scan(const char *text, size_t len, cfg_doc *doc, resil_config_diags *diags);
void resil__cfg_doc_free(cfg_doc *doc);
/* A number node's value (or a string holding one, as .NET configuration
 * allows): 0, or RESIL_EINVAL when it is not a number. *whole tells
 * whether it was written as an integer that fits 64 bits (then *i holds
 * it); a larger one is read as a real. */
int resil__cfg_number(const cfg_node *n, double *d, long long *i, bool *whole);

static inline const cfg_node *cfg_child(const cfg_doc *doc, const cfg_node *n)
{
    return n->first ? &doc->nodes[n->first] : NULL;
}
static inline const cfg_node *cfg_next(const cfg_doc *doc, const cfg_node *n)
{
    return n->next ? &doc->nodes[n->next] : NULL;
}

/* ---- diagnostics and text (diag.c) ------------------------------------------ */

void resil__diag_addv(resil_config_diags *d, const char *path, uint32_t line,
                      uint32_t col, const char *fmt, va_list ap);
void resil__diag_add(resil_config_diags *d, const char *path, uint32_t line, uint32_t col,
                     const char *fmt, ...) RESIL_PRINTF(5, 6);
/* Put d->items[from..] in the order they stand in the text (line, then
 * column), keeping the order of those at one place: checks find errors
 * section by section, readers want them top to bottom. */
void resil__diags_sort(resil_config_diags *d, size_t from);

/* ASCII case-insensitive equality; and "equal ignoring case, '-', '_' and
 * ' '", which enum values use ("token-bucket" = "TokenBucket"). */
bool resil__name_eq(const char *a, const char *b);
bool resil__enum_eq(const char *a, const char *b);
/* The candidate closest to `word` by case-insensitive edit distance, when
 * it is close enough to be a likely typo; else NULL. */
const char *resil__closest(const char *word, const char *const *cands, size_t n);

/* An snprintf-like appender: writes what fits, counts everything. */
typedef struct cfg_sb {
    char *buf;
    size_t cap, len;
} cfg_sb;

void resil__sb_init(cfg_sb *sb, char *buf, size_t cap);
void resil__sb_printf(cfg_sb *sb, const char *fmt, ...) RESIL_PRINTF(2, 3);
/* A JSON string literal, escaped. */
void resil__sb_json_str(cfg_sb *sb, const char *s);
/* One diagnostic as a JSON object: {"path":…,"line":…,"column":…,"message":…}. */
void resil__sb_diag_json(cfg_sb *sb, const resil_config_diag *g);
/* A duration in the parser's units ("2s"), or "unbounded" for MAX. */
void resil__fmt_dur(resil_duration d, char *buf, size_t cap);

/* ---- the validated document ------------------------------------------------ */

typedef struct cfg_step {
    resil_config_step_kind kind;
    size_t ref;             /* index in the step's section; SIZE_MAX = none */
    resil_duration timeout; /* timeouts */
    bool per_operation;
    uint32_t line, col;     /* where the reference is written */
    size_t index;           /* its place in the document's list */
    const char *pending;    /* while building: a Pipeline reference to resolve */
} cfg_step;

typedef struct cfg_pipeline_def {
    size_t nsteps;
    cfg_step steps[RESIL_CONFIG_MAX_STEPS];
} cfg_pipeline_def;

/* The pipeline's last step of kind k (only Retry may appear twice), or NULL. */
static inline const cfg_step *cfg_last_step_of(const cfg_pipeline_def *p,
                                               resil_config_step_kind k)
{
    for (size_t i = p->nsteps; i-- > 0;)
        if (p->steps[i].kind == k)
            return &p->steps[i];
    return NULL;
}

/* The pipeline's first step of kind k (each kind but Retry appears at most
 * once), or NULL. */
static inline const cfg_step *cfg_step_of(const cfg_pipeline_def *p, resil_config_step_kind k)
{
    for (size_t i = 0; i < p->nsteps; i++)
        if (p->steps[i].kind == k)
            return &p->steps[i];
    return NULL;
}

/* The section a step of kind k refers into (cfg_step.ref indexes it: the
 * named policy, pipeline or operation timeout), or -1 for none (schema.c). */
int resil__cfg_step_section(resil_config_step_kind k);

/* What a Retry entry holds beyond its option struct, which points here:
 * on the heap, so that it stays put while the item array grows. */
typedef struct cfg_retry_more {
    resil_duration delays[RESIL_CONFIG_DELAYS_MAX];
    char disable_for[RESIL_CONFIG_NAME_MAX * 2];
    char header_names[RESIL_CONFIG_HINT_HEADERS_MAX][RESIL_CONFIG_NAME_MAX];
    const char *headers[RESIL_CONFIG_HINT_HEADERS_MAX + 1];
    char budget[RESIL_CONFIG_NAME_MAX]; /* Budget, or "" */
    uint32_t budget_line, budget_col;   /* where it is written */
} cfg_retry_more;

#define CFG_URL_MAX 256
#define CFG_ROUTE_ENDPOINTS_MAX 32 /* endpoints of all of a route's groups */

/* A Hedging entry's endpoints and the route over them, which its option
 * struct points at: on the heap, as cfg_retry_more. The groups' endpoints
 * lie one group after another in `endpoints`. */
typedef struct cfg_hedge_more {
    char urls[CFG_ROUTE_ENDPOINTS_MAX][CFG_URL_MAX];
    resil_route_endpoint endpoints[CFG_ROUTE_ENDPOINTS_MAX];
    resil_route_group groups[RESIL_ROUTE_MAX_GROUPS];
    resil_route_opts route;
} cfg_hedge_more;

typedef struct cfg_item {
    char *name;
    uint32_t line, col; /* where the name is written */
    bool fleet;         /* RateLimiters, Bulkheads: "Distributed": true */
    cfg_retry_more *more;             /* Retry: owned; NULL when nothing more */
    cfg_hedge_more *hedge_more;       /* Hedging with Endpoints: owned */
    resil_duration operation_timeout; /* CircuitBreakers: OperationTimeout; 0 = none */
    union {
        resil_config_retry retry;
        resil_breaker_opts breaker;
        resil_bulkhead_opts bulkhead;
        resil_config_ratelimit limiter;
        resil_duration timeout;
        cfg_pipeline_def pipeline;
        resil_chaos_opts chaos;
        resil_limiter_opts adaptive;
        resil_throttle_opts throttle;
        resil_config_hedge hedge;
        resil_outcome fallback;
        resil_budget_opts budget;
    } u;
} cfg_item;

typedef struct cfg_list {
    cfg_item *v;
    size_t n, cap;
} cfg_list;

struct resil_config {
    cfg_list sec[RESIL_CONFIG_SECTION_COUNT];
    resil_duration default_timeout;
    bool has_degrade;
    resil_degrade_opts degrade;
    char level_names[RESIL_DEGRADE_MAX_LEVELS][RESIL_DEGRADE_NAME_MAX];
    bool has_distributed;
    resil_config_distributed distributed;
};

/* Build *out from the located tree (schema.c): 0, RESIL_EINVAL with every
 * error in diags, or RESIL_ENOMEM. */
int resil__cfg_build(const cfg_doc *doc, resil_config **out, resil_config_diags *diags);

/* A Hedging entry's defaults: Microsoft's (config.c). */
void resil__cfg_hedge_default(resil_config_hedge *h);

/* The index of a name in a section (case-insensitive), or SIZE_MAX. */
size_t resil__cfg_find(const resil_config *c, resil_config_section s, const char *name);

#endif
