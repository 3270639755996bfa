/*
 * test_doc_messages.c — every error message the documentation quotes is
 * one the library really says.
 *
 * The quotes are found at run time, in the source tree the build was made
 * from (RESIL_SOURCE_DIR): docs/ and include/, read the way a reader sees
 * them. A quote is an inline code span (`...`, which may run over a line
 * break), a double-quoted string (in a header comment too, over its " * "
 * line breaks), or one line of a fenced code block (and the text of a C
 * comment on it, after any "e.g."). It is an error message when it starts
 * the way the library's messages do — a component's name followed by a
 * field path and a space ("retry.backoff.factor must ...",
 * "degrade.levels[2].priority_threshold ...") or by ": " ("pipeline: ...")
 * — and refuses something (must, at most, at least, cannot, unknown,
 * already). A quote ending in "..." stands for the message's beginning.
 *
 * Each message has an entry below with the call that produces it. The test
 * fails for a quote no entry holds (add the entry, so the quote cannot
 * drift from then on) and for an entry whose call says something else.
 * Messages of the adapter libraries are produced by the built adapters,
 * loaded from the build tree; an adapter that was not built (its package is
 * missing) is skipped, with a note. The tool's own messages ("resil run:
 * ...") and a configuration file's located diagnostics are the CLI's and
 * config's tests' business and do not match the rule.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include "test.h"
#include "resil/redis.h"
#include "resil/store.h"
#if __has_include(<curl/curl.h>)
#include "resil/http.h"
#define HAVE_HTTP_HEADER 1
#endif

#define QUOTE_MAX 512
#define SKIPPED 1 /* a producer's answer when its adapter is not built */

/* ---- the producers ------------------------------------------------------- */

typedef int (*producer)(resil_err *err);

static int breaker_ratio_above_one(resil_err *err)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO;
    o.failure_ratio = 1.5;
    resil_breaker *b = NULL;
    int rc = resil_breaker_new(&o, &b, err);
    resil_breaker_free(b);
    return rc;
}

static int breaker_throughput_one(resil_err *err)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO;
    o.minimum_throughput = 1;
    return resil_breaker_opts_validate(&o, err);
}

static int breaker_sampling_499ms(resil_err *err)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.kind = RESIL_BREAKER_RATIO;
    o.sampling_duration = RESIL_MS(499);
    return resil_breaker_opts_validate(&o, err);
}

static int breaker_growth_nan(resil_err *err)
{
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    o.break_growth = NAN;
    return resil_breaker_opts_validate(&o, err);
}

static int bulkhead_no_concurrency(resil_err *err)
{
    resil_bulkhead_opts o;
    resil_bulkhead_opts_default(&o);
    o.max_concurrency = 0;
    resil_bulkhead *b = NULL;
    int rc = resil_bulkhead_new(&o, &b, err);
    resil_bulkhead_free(b);
    return rc;
}

static int ratelimit_window_zero(resil_err *err)
{
    resil_ratelimit_opts o;
    resil_ratelimit_opts_default(&o, RESIL_RATELIMIT_FIXED_WINDOW);
    o.window = 0;
    resil_ratelimit *rl = NULL;
    int rc = resil_ratelimit_new(&o, &rl, err);
    resil_ratelimit_free(rl);
    return rc;
}

static int degrade_thresholds_not_increasing(resil_err *err)
{
    resil_degrade_opts o;
    resil_degrade_opts_default(&o);
    o.levels[2].priority_threshold = o.levels[1].priority_threshold; /* 30 */
    resil_degrade *d = NULL;
    int rc = resil_degrade_new(&o, &d, err);
    resil_degrade_free(d);
    return rc;
}

/* The builder's first error, which its build reports. */
static int build(resil_pipeline_builder *b, resil_err *err)
{
    resil_pipeline *p = NULL;
    int rc = resil_pipeline_build(b, &p, err);
    resil_pipeline_free(p);
    resil_pipeline_builder_free(b);
    return rc;
}

static resil_pipeline_builder *builder(void)
{
    resil_pipeline_builder *b = NULL;
    assert_int_equal(resil_pipeline_builder_new("docs", &b, NULL), 0);
    return b;
}

static int pipeline_total_timeout_zero(resil_err *err)
{
    resil_pipeline_builder *b = builder();
    resil_timeout_opts t;
    resil_timeout_opts_default(&t);
    t.timeout = 0;
    resil_pipeline_add_total_timeout(b, &t);
    return build(b, err);
}

static int pipeline_no_hedges(resil_err *err)
{
    resil_pipeline_builder *b = builder();
    resil_hedge_opts h;
    resil_hedge_opts_default(&h);
    h.max_hedged = 0;
    resil_pipeline_add_hedging(b, &h);
    return build(b, err);
}

static int pipeline_two_breakers(resil_err *err)
{
    resil_pipeline_builder *b = builder();
    resil_breaker_opts o;
    resil_breaker_opts_default(&o);
    resil_pipeline_add_breaker(b, &o);
    resil_pipeline_add_breaker(b, &o);
    return build(b, err);
}

static int pipeline_five_retries(resil_err *err)
{
    resil_pipeline_builder *b = builder();
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    for (int i = 0; i < 5; i++)
        resil_pipeline_add_retry(b, &p);
    return build(b, err);
}

static int pipeline_attempt_longer_than_total(resil_err *err)
{
    resil_pipeline_builder *b = builder();
    resil_timeout_opts total, attempt;
    resil_timeout_opts_default(&total);
    total.timeout = RESIL_S(30);
    resil_timeout_opts_default(&attempt);
    attempt.timeout = RESIL_S(40);
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    resil_pipeline_add_total_timeout(b, &total);
    resil_pipeline_add_retry(b, &p);
    resil_pipeline_add_attempt_timeout(b, &attempt);
    return build(b, err);
}

static int retry_no_attempts(resil_err *err)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.max_attempts = 0;
    return resil_retry_policy_validate(&p, err);
}

static int retry_factor_half(resil_err *err)
{
    resil_retry_policy p;
    resil_retry_policy_default(&p);
    p.backoff.factor = 0.5;
    return resil_retry_policy_validate(&p, err);
}

static int backoff_factor_half(resil_err *err)
{
    resil_backoff b;
    resil_backoff_default(&b);
    b.factor = 0.5;
    return resil_backoff_validate(&b, err);
}

/* ---- adapters, from the build tree ------------------------------------- */

static void *adapter(const char *relative)
{
    const char *path = test_build_path(relative);
    void *h = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h == NULL)
        print_message("note: %s not loaded (%s): its messages are not checked\n", relative,
                      path == NULL ? "RESIL_BUILD_DIR unset" : dlerror());
    return h;
}

static void *symbol(void *h, const char *name)
{
    void *f = dlsym(h, name);
    if (f == NULL)
        fail_msg("%s: %s", name, dlerror());
    return f;
}

#ifdef HAVE_HTTP_HEADER
typedef void (*http_default_fn)(resil_http_opts *o);
typedef int (*http_validate_fn)(const resil_http_opts *o, resil_err *err);

static int http_refuses(void (*spoil)(resil_http_opts *o), resil_err *err)
{
    void *h = adapter("src/http/libresil-http.so");
    if (h == NULL)
        return SKIPPED;
    resil_http_opts o;
    ((http_default_fn)symbol(h, "resil_http_opts_default"))(&o);
    spoil(&o);
    int rc = ((http_validate_fn)symbol(h, "resil_http_opts_validate"))(&o, err);
    dlclose(h);
    return rc;
}

static void attempt_past_total(resil_http_opts *o) { o->attempt_timeout = o->total_timeout + 1; }
static void no_attempts(resil_http_opts *o) { o->retry.max_attempts = 0; }
static void ratio_above_one(resil_http_opts *o) { o->breaker.failure_ratio = 1.5; }

static int http_attempt_past_total(resil_err *err)
{
    return http_refuses(attempt_past_total, err);
}
static int http_no_attempts(resil_err *err) { return http_refuses(no_attempts, err); }
static int http_ratio_above_one(resil_err *err) { return http_refuses(ratio_above_one, err); }
#else
static int http_skipped(resil_err *err)
{
    (void)err;
    print_message("note: libcurl's headers are missing: HTTP messages are not checked\n");
    return SKIPPED;
}
#define http_attempt_past_total http_skipped
#define http_no_attempts http_skipped
#define http_ratio_above_one http_skipped
#endif

typedef void (*store_default_fn)(resil_store_opts *o);
typedef int (*store_new_fn)(const resil_store_opts *o, resil_store **out, resil_err *err);
typedef void (*store_free_fn)(resil_store *s);
typedef void (*store_result_fn)(resil_store_result *r);
typedef int (*store_begin_fn)(resil_store *s, const resil_store_key *k,
                              const uint8_t hash[RESIL_SHA256_LEN], resil_store_result *out,
                              resil_err *err);

static int store_lease_zero(resil_err *err)
{
    void *h = adapter("src/store/libresil-store.so");
    if (h == NULL)
        return SKIPPED;
    resil_store_opts o;
    ((store_default_fn)symbol(h, "resil_store_opts_default"))(&o);
    o.url = "sqlite::memory:";
    o.lease = 0;
    resil_store *s = NULL;
    int rc = ((store_new_fn)symbol(h, "resil_store_new"))(&o, &s, err);
    ((store_free_fn)symbol(h, "resil_store_free"))(s);
    dlclose(h);
    return rc;
}

static int store_key_with_a_tab(resil_err *err)
{
    void *h = adapter("src/store/libresil-store.so");
    if (h == NULL)
        return SKIPPED;
    resil_store_opts o;
    ((store_default_fn)symbol(h, "resil_store_opts_default"))(&o);
    o.url = "sqlite::memory:";
    resil_store *s = NULL;
    resil_err open_err = {0, ""};
    if (((store_new_fn)symbol(h, "resil_store_new"))(&o, &s, &open_err) != 0)
        fail_msg("store: %s", open_err.message);
    resil_store_key k = {.tenant = "acme", .operation = "create-order", .key = "abc\tdef"};
    uint8_t hash[RESIL_SHA256_LEN] = {0};
    resil_store_result res;
    ((store_result_fn)symbol(h, "resil_store_result_init"))(&res);
    int rc = ((store_begin_fn)symbol(h, "resil_store_begin"))(s, &k, hash, &res, err);
    ((store_result_fn)symbol(h, "resil_store_result_free"))(&res);
    ((store_free_fn)symbol(h, "resil_store_free"))(s);
    dlclose(h);
    return rc;
}

typedef void (*redis_default_fn)(resil_redis_opts *o);
typedef int (*redis_new_fn)(const resil_redis_opts *o, resil_redis **out, resil_err *err);
typedef void (*redis_free_fn)(resil_redis *r);

static int redis_timeout_zero(resil_err *err)
{
    void *h = adapter("src/redis/libresil-redis.so");
    if (h == NULL)
        return SKIPPED;
    resil_redis_opts o;
    ((redis_default_fn)symbol(h, "resil_redis_opts_default"))(&o);
    o.url = "redis://127.0.0.1:1"; /* refused before any connection */
    o.timeout = 0;
    resil_redis *r = NULL;
    int rc = ((redis_new_fn)symbol(h, "resil_redis_new"))(&o, &r, err);
    if (r != NULL)
        ((redis_free_fn)symbol(h, "resil_redis_free"))(r);
    dlclose(h);
    return rc;
}

/* ---- the table ----------------------------------------------------------- */

typedef struct entry {
    const char *quote; /* as quoted, whitespace collapsed */
    producer make;
} entry;

static const entry table[] = {
    {"backoff.factor must be a finite number >= 1, got 0.5", backoff_factor_half},
    {"breaker.break_growth must be a finite number >= 1, got nan", breaker_growth_nan},
    {"breaker.failure_ratio must be in (0,1], got 1.5", breaker_ratio_above_one},
    {"breaker.minimum_throughput must be >= 2, got 1", breaker_throughput_one},
    {"breaker.sampling_duration must be >= 500ms, got 499ms", breaker_sampling_499ms},
    {"bulkhead.max_concurrency must be >= 1, got 0", bulkhead_no_concurrency},
    {"degrade.levels[2].priority_threshold must be greater than levels[1].priority_threshold "
     "(30), got 30",
     degrade_thresholds_not_increasing},
    {"hedging.max_hedged must be in [1, 10], got 0", pipeline_no_hedges},
    {"pipeline: at most one breaker strategy per pipeline", pipeline_two_breakers},
    {"pipeline: at most 4 retry strategies per pipeline", pipeline_five_retries},
    {"pipeline: attempt_timeout.timeout (40s) must not exceed total_timeout.timeout (30s)",
     pipeline_attempt_longer_than_total},
    {"ratelimit.window must be >= 1ms, got 0s", ratelimit_window_zero},
    {"retry.backoff.factor must be a finite number >= 1, got 0.5", retry_factor_half},
    {"retry.max_attempts must be >= 1 (use RESIL_ATTEMPTS_FOREVER to retry forever), got 0",
     retry_no_attempts},
    {"total_timeout.timeout must be > 0, got 0s", pipeline_total_timeout_zero},
    /* adapters */
    {"http.attempt_timeout must not exceed http.total_timeout", http_attempt_past_total},
    {"http.breaker.failure_ratio must be in (0,1], got 1.5", http_ratio_above_one},
    {"http.retry.max_attempts must be >= 1 ...", http_no_attempts},
    {"redis.timeout must be in [1ms, 10s], got 0s", redis_timeout_zero},
    {"store.lease must be >= 1ms, got 0s", store_lease_zero},
    {"store: the key must be 1 to 255 printable ASCII characters (0x20-0x7E); byte 3 is 0x09",
     store_key_with_a_tab},
};

#define TABLE_LEN (sizeof table / sizeof table[0])

/* ---- recognising a message ------------------------------------------------ */

static const char *const components[] = {
    "attempt_timeout", "backoff",   "breaker",   "budget",        "bulkhead",
    "config",          "degrade",   "fallback",  "hedge",         "hedging",
    "http",            "metrics",   "pipeline",  "ratelimit",     "redis",
    "registry",        "retry",     "store",     "telemetry",     "timeout",
    "timeouts",        "total_timeout"};

static const char *const refusals[] = {" must ", " at most ", " at least ", " cannot ",
                                       " unknown ", " already "};

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* An optional "[digits]" after a name. */
static const char *skip_index(const char *p)
{
    if (*p != '[')
        return p;
    const char *q = p + 1;
    while (*q >= '0' && *q <= '9')
        q++;
    return q > p + 1 && *q == ']' ? q + 1 : p;
}

/* Past "component" plus either ": " or at least one ".field" and a space;
 * NULL when `s` does not start like a message. */
static const char *after_subject(const char *s)
{
    for (size_t i = 0; i < sizeof components / sizeof components[0]; i++) {
        size_t n = strlen(components[i]);
        if (strncmp(s, components[i], n) != 0 || ident_char(s[n]))
            continue;
        const char *p = skip_index(s + n);
        if (p[0] == ':' && p[1] == ' ')
            return p + 1;
        int fields = 0;
        while (p[0] == '.' && p[1] >= 'a' && p[1] <= 'z') {
            p++;
            while (ident_char(*p))
                p++;
            p = skip_index(p);
            fields++;
        }
        if (fields > 0 && p[0] == ' ' && p[1] != '\0' && p[1] != '=')
            return p;
    }
    return NULL;
}

static bool is_message(const char *s)
{
    const char *rest = after_subject(s);
    if (rest == NULL)
        return false;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        if (strstr(rest, refusals[i]) != NULL)
            return true;
    }
    return false;
}

/* ---- finding the quotes ------------------------------------------------------ */

typedef struct found {
    char text[QUOTE_MAX];
    char where[256];
} found;

typedef struct quotes {
    found *q;
    size_t n, cap;
} quotes;

/* Copy [s, s + n) with runs of white space made one space, trimmed. */
static void collapse(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    bool space = false;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = k > 0;
            continue;
        }
        if (space && k + 2 < cap)
            out[k++] = ' ';
        space = false;
        out[k++] = c;
    }
    out[k] = '\0';
}

static void consider(quotes *qs, const char *s, size_t n, const char *file, int line)
{
    char text[QUOTE_MAX];
    if (n >= QUOTE_MAX)
        return;
    collapse(s, n, text, sizeof text);
    if (!is_message(text))
        return;
    if (qs->n == qs->cap) {
        qs->cap = qs->cap ? 2 * qs->cap : 64;
        qs->q = realloc(qs->q, qs->cap * sizeof *qs->q);
        assert_non_null(qs->q);
    }
    found *f = &qs->q[qs->n++];
    snprintf(f->text, sizeof f->text, "%s", text);
    snprintf(f->where, sizeof f->where, "%s:%d", file, line);
}

static int line_at(const char *text, const char *p)
{
    int line = 1;
    for (const char *c = text; c < p; c++)
        line += *c == '\n';
    return line;
}

/* Spans between `open` and the next `close`, crossing at most three line
 * breaks (a quote wrapped by a paragraph or a comment, never a stray mark
 * pairing up with one far away). */
static void spans(quotes *qs, const char *text, char mark, const char *file)
{
    for (const char *p = text; (p = strchr(p, mark)) != NULL;) {
        if (mark == '`' && (p[1] == '`' || (p > text && p[-1] == '`'))) {
            p++;
            continue;
        }
        const char *end = strchr(p + 1, mark);
        if (end == NULL)
            return;
        int breaks = 0;
        for (const char *c = p + 1; c < end; c++)
            breaks += *c == '\n';
        if (breaks <= 3)
            consider(qs, p + 1, (size_t)(end - p - 1), file, line_at(text, p));
        p = breaks <= 3 ? end + 1 : p + 1;
    }
}

/* A fenced line: the line itself, each double-quoted string on it and
 * each C comment on it. */
static void fenced_line(quotes *qs, const char *s, size_t n, const char *file, int line)
{
    consider(qs, s, n, file, line);
    const char *end = s + n;
    for (const char *p = s; p < end; p++) {
        if (*p != '"')
            continue;
        const char *close = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (close == NULL)
            break;
        consider(qs, p + 1, (size_t)(close - p - 1), file, line);
        p = close;
    }
    for (const char *p = s; p + 1 < end; p++) {
        if (p[0] != '/' || p[1] != '*')
            continue;
        const char *c = p + 2;
        while (c < end && *c == ' ')
            c++;
        if (end - c >= 5 && strncmp(c, "e.g. ", 5) == 0)
            c += 5;
        const char *close = c;
        while (close + 1 < end && !(close[0] == '*' && close[1] == '/'))
            close++;
        if (close + 1 < end)
            consider(qs, c, (size_t)(close - c), file, line);
        p = close;
    }
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    size_t got = fread(buf, 1, (size_t)size, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/*
 * The text a reader sees: a header's comment margins (a line's leading
 * star, a comment's opening) become spaces, and a fence's lines are taken
 * whole (and blanked, so that their marks pair with nothing outside).
 */
static void scan_file(quotes *qs, const char *path, const char *file, bool header)
{
    char *text = read_file(path);
    bool fenced = false;
    int line = 1;
    for (char *p = text; *p != '\0'; line++) {
        char *eol = strchr(p, '\n');
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        char *s = p;
        while (s < p + len && (*s == ' ' || *s == '\t'))
            s++;
        if (!header && len - (size_t)(s - p) >= 3 && strncmp(s, "```", 3) == 0) {
            fenced = !fenced;
            memset(p, ' ', len);
        } else if (fenced) {
            fenced_line(qs, s, len - (size_t)(s - p), file, line);
            memset(p, ' ', len);
        } else if (header) {
            if (s + 1 < p + len && s[0] == '/' && s[1] == '*')
                s[0] = s[1] = ' ';
            else if (s < p + len && s[0] == '*')
                s[0] = ' ';
        }
        p += len + (eol != NULL);
    }
    spans(qs, text, '`', file);
    spans(qs, text, '"', file);
    free(text);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

static void scan_dir(quotes *qs, const char *root, const char *dir, const char *ext)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    DIR *d = opendir(path);
    if (d == NULL)
        fail_msg("cannot open %s", path);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char rel[512], full[1536];
        snprintf(rel, sizeof rel, "%s/%s", dir, e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, rel);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            scan_dir(qs, root, rel, ext);
        else if (ends_with(e->d_name, ext))
            scan_file(qs, full, rel, strcmp(ext, ".h") == 0);
    }
    closedir(d);
}

static quotes scan_sources(void)
{
    const char *root = getenv("RESIL_SOURCE_DIR");
    if (root == NULL)
        fail_msg("RESIL_SOURCE_DIR is not set (CTest sets it)");
    quotes qs = {NULL, 0, 0};
    scan_dir(&qs, root, "docs", ".md");
    scan_dir(&qs, root, "include", ".h");
    return qs;
}

/* ---- matching -------------------------------------------------------------- */

static const entry *entry_for(const char *quote)
{
    for (size_t i = 0; i < TABLE_LEN; i++) {
        if (strcmp(table[i].quote, quote) == 0)
            return &table[i];
    }
    return NULL;
}

/* The quote, or its beginning when it ends in an ellipsis, is the message. */
static bool says(const char *quote, const char *message)
{
    size_t n = strlen(quote);
    if (ends_with(quote, "..."))
        n -= 3;
    else if (ends_with(quote, "\xe2\x80\xa6")) /* … */
        n -= 3;
    else
        return strcmp(quote, message) == 0;
    while (n > 0 && quote[n - 1] == ' ')
        n--;
    return strncmp(quote, message, n) == 0;
}

/* 0 when the entry's call says its quote (or is skipped), else 1. */
static int check_entry(const entry *e)
{
    resil_err err = {0, ""};
    int rc = e->make(&err);
    if (rc == SKIPPED)
        return 0;
    if (rc == 0) {
        print_error("\"%s\": the call meant to produce it succeeded\n", e->quote);
        return 1;
    }
    if (says(e->quote, err.message))
        return 0;
    print_error("quoted \"%s\"\n   but it says \"%s\"\n", e->quote, err.message);
    return 1;
}

/* ---- the tests ------------------------------------------------------------- */

static void every_quoted_message_has_an_entry(void **state)
{
    (void)state;
    quotes qs = scan_sources();
    int missing = 0;
    for (size_t i = 0; i < qs.n; i++) {
        if (entry_for(qs.q[i].text) != NULL)
            continue;
        print_error("%s quotes \"%s\", which no entry produces\n", qs.q[i].where,
                    qs.q[i].text);
        missing++;
    }
    free(qs.q);
    assert_int_equal(missing, 0);
}

static void every_quoted_message_is_what_the_library_says(void **state)
{
    (void)state;
    quotes qs = scan_sources();
    int wrong = 0;
    for (size_t i = 0; i < qs.n; i++) {
        const entry *e = entry_for(qs.q[i].text);
        if (e == NULL)
            continue;
        if (check_entry(e) != 0) {
            print_error("   (quoted at %s)\n", qs.q[i].where);
            wrong++;
        }
    }
    free(qs.q);
    assert_int_equal(wrong, 0);
}

static void every_entry_is_quoted_somewhere(void **state)
{
    (void)state;
    quotes qs = scan_sources();
    int stale = 0;
    for (size_t i = 0; i < TABLE_LEN; i++) {
        bool seen = false;
        for (size_t j = 0; j < qs.n && !seen; j++)
            seen = strcmp(qs.q[j].text, table[i].quote) == 0;
        if (!seen) {
            print_error("\"%s\" is in the table but quoted nowhere\n", table[i].quote);
            stale++;
        }
    }
    free(qs.q);
    assert_int_equal(stale, 0);
}

/* The rule itself, on quotes it must take and quotes it must leave. */
static void the_rule_takes_messages_and_leaves_other_text(void **state)
{
    (void)state;
    assert_true(is_message("retry.backoff.factor must be a finite number >= 1, got 0.5"));
    assert_true(is_message("degrade.levels[2].priority_threshold must be greater than x"));
    assert_true(is_message("pipeline: at most one breaker strategy per pipeline"));
    assert_true(is_message("http.retry.max_attempts must be >= 1 ..."));
    assert_false(is_message("breaker.failure_ratio"));
    assert_false(is_message("retry.retry_after = RESIL_RETRY_AFTER_IGNORE"));
    assert_false(is_message("bulkhead: call 3 rejected (in flight 2)"));
    assert_false(is_message("resil run: --attempts must be a whole number >= 1"));
    assert_false(is_message("must be in (0,1], got 1.5"));
    assert_false(is_message("retrying.x must be 1"));
}

static void an_ellipsis_stands_for_the_messages_beginning(void **state)
{
    (void)state;
    assert_true(says("http.retry.max_attempts must be >= 1 ...",
                     "http.retry.max_attempts must be >= 1 (use RESIL_ATTEMPTS_FOREVER to "
                     "retry forever), got 0"));
    assert_false(says("store.lease must be > 0", "store.lease must be >= 1ms, got 0s"));
    assert_false(says("a must b", "a must b, got 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_rule_takes_messages_and_leaves_other_text),
        cmocka_unit_test(an_ellipsis_stands_for_the_messages_beginning),
        cmocka_unit_test(every_quoted_message_has_an_entry),
        cmocka_unit_test(every_quoted_message_is_what_the_library_says),
        cmocka_unit_test(every_entry_is_quoted_somewhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
