/*
 * trace.c — W3C Trace Context (traceparent and tracestate, parsed and
 * formatted), the span ids of an execution and its attempts, and the
 * tracer: a listener that turns the events of a traced execution into
 * spans.
 *
 * Spans are made from the same events every other sink reads, so a
 * blocking walk and any other path that reports events produce the same
 * trace, and a pipeline pays for tracing only where it already pays for
 * telemetry. The execution's span id is drawn once when the call starts;
 * each attempt's (and each hedge's) is derived from it by a mixing
 * function of (attempt, hedge). The operation can then propagate its
 * attempt's span to the next service (resil_attempt_span) while the
 * tracer, seeing the attempt's event later, names the very same span —
 * without any state shared between them.
 *
 * The parsers are strict (the specification's grammar, lower-case hex,
 * no all-zero ids), read only the bytes they are given, and have a fuzz
 * target (tests/fuzz/fuzz_trace_context.c).
 */
#include <string.h>

#include "internal.h"
#include "pipeline_internal.h"

/* ---- ids ---------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t load64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

static void store64(uint8_t *b, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        b[i] = (uint8_t)v;
}

static uint64_t draw64(resil_rng *rng)
{
    uint64_t hi = (uint64_t)(resil_rng_next(rng) * 4294967296.0);
    uint64_t lo = (uint64_t)(resil_rng_next(rng) * 4294967296.0);
    return mix64(hi << 32 | lo);
}

/* Never zero: an all-zero id means "invalid". */
static void random_id(resil_rng *rng, uint8_t *b)
{
    uint64_t v = draw64(rng);
    store64(b, v != 0 ? v : 1);
}

void resil_trace_new(resil_rng *rng, bool sampled, resil_span_context *out)
{
    if (rng == NULL)
        rng = resil_rng_thread();
    random_id(rng, out->trace_id);
    random_id(rng, out->trace_id + 8);
    random_id(rng, out->span_id);
    out->flags = sampled ? RESIL_TRACE_SAMPLED : 0;
    out->tracestate[0] = '\0';
}

void resil_exec_trace_attempt(const resil_exec_trace *t, uint32_t attempt, uint32_t hedge,
                              resil_span_context *out)
{
    memcpy(out->trace_id, t->span.trace_id, sizeof out->trace_id);
    uint64_t id = mix64(load64(t->span.span_id) ^ ((uint64_t)attempt << 32 | hedge));
    store64(out->span_id, id != 0 ? id : 1);
    out->flags = t->span.flags;
    memcpy(out->tracestate, t->span.tracestate, sizeof out->tracestate);
}

int resil_attempt_span(const resil_attempt_ctx *ctx, resil_span_context *out)
{
    if (ctx == NULL || out == NULL)
        return RESIL_EINVAL;
    if (ctx->trace == NULL)
        return RESIL_ENOTFOUND;
    resil_exec_trace_attempt(ctx->trace, ctx->attempt, ctx->hedge, out);
    return 0;
}

/* The execution's own span under the caller's, or NULL when the call is
 * not traced or sampled out: then nothing below pays for tracing. */
const resil_exec_trace *resil__trace_begin(const resil_span_context *parent, resil_rng *rng,
                                           resil_exec_trace *t)
{
    if (parent == NULL || !(parent->flags & RESIL_TRACE_SAMPLED))
        return NULL;
    t->span = *parent;
    memcpy(t->parent_id, parent->span_id, sizeof t->parent_id);
    random_id(rng != NULL ? rng : resil_rng_thread(), t->span.span_id);
    return t;
}

/* ---- traceparent ------------------------------------------------------------ */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* upper case is invalid in traceparent */
}

/* n bytes from 2n lower-case hex digits. */
static bool hex_bytes(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static bool all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return false;
    return true;
}

static bool ows(char c) { return c == ' ' || c == '\t'; }

static void trim(const char **text, size_t *len)
{
    while (*len > 0 && ows(**text)) {
        (*text)++;
        (*len)--;
    }
    while (*len > 0 && ows((*text)[*len - 1]))
        (*len)--;
}

int resil_traceparent_parse(const char *text, size_t len, resil_span_context *out,
                            resil_err *err)
{
    if (text == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "traceparent: text and out must not be NULL");
    trim(&text, &len);
    uint8_t version;
    if (len < RESIL_TRACEPARENT_LEN || !hex_bytes(text, &version, 1) || text[2] != '-')
        return resil_err_set(err, RESIL_ESYNTAX,
                             "traceparent must be 00-<32 hex>-<16 hex>-<2 hex>, got %zu bytes",
                             len);
    if (version == 0xff)
        return resil_err_set(err, RESIL_ESYNTAX, "traceparent version ff is invalid");
    if (version == 0 && len != RESIL_TRACEPARENT_LEN)
        return resil_err_set(err, RESIL_ESYNTAX,
                             "traceparent version 00 must be %d bytes, got %zu",
                             RESIL_TRACEPARENT_LEN, len);
    if (len > RESIL_TRACEPARENT_LEN && text[RESIL_TRACEPARENT_LEN] != '-')
        return resil_err_set(err, RESIL_ESYNTAX,
                             "traceparent: a later version's extra fields follow a '-'");
    resil_span_context c;
    if (!hex_bytes(text + 3, c.trace_id, 16) || text[35] != '-')
        return resil_err_set(err, RESIL_ESYNTAX, "traceparent trace-id must be 32 lower-case hex digits");
    if (!hex_bytes(text + 36, c.span_id, 8) || text[52] != '-')
        return resil_err_set(err, RESIL_ESYNTAX, "traceparent parent-id must be 16 lower-case hex digits");
    if (!hex_bytes(text + 53, &c.flags, 1))
        return resil_err_set(err, RESIL_ESYNTAX, "traceparent trace-flags must be 2 lower-case hex digits");
    if (all_zero(c.trace_id, 16))
        return resil_err_set(err, RESIL_ESYNTAX, "traceparent trace-id must not be all zero");
    if (all_zero(c.span_id, 8))
        return resil_err_set(err, RESIL_ESYNTAX, "traceparent parent-id must not be all zero");
    c.flags &= version == 0 ? 0xff : RESIL_TRACE_SAMPLED; /* later versions: known bits only */
    c.tracestate[0] = '\0';
    *out = c;
    return 0;
}

size_t resil_traceparent_format(const resil_span_context *c, char *buf, size_t cap)
{
    static const char digits[] = "0123456789abcdef";
    char text[RESIL_TRACEPARENT_LEN + 1];
    char *p = text;
    *p++ = '0';
    *p++ = '0';
    *p++ = '-';
    for (int i = 0; i < 16; i++, p += 2) {
        p[0] = digits[c->trace_id[i] >> 4];
        p[1] = digits[c->trace_id[i] & 15];
    }
    *p++ = '-';
    for (int i = 0; i < 8; i++, p += 2) {
        p[0] = digits[c->span_id[i] >> 4];
        p[1] = digits[c->span_id[i] & 15];
    }
    *p++ = '-';
    p[0] = digits[c->flags >> 4];
    p[1] = digits[c->flags & 15];
    p[2] = '\0';
    if (cap > 0) {
        size_t n = cap - 1 < RESIL_TRACEPARENT_LEN ? cap - 1 : RESIL_TRACEPARENT_LEN;
        memcpy(buf, text, n);
        buf[n] = '\0';
    }
    return RESIL_TRACEPARENT_LEN;
}

/* ---- tracestate --------------------------------------------------------------- */

static bool lcalpha(char c) { return c >= 'a' && c <= 'z'; }
static bool digit(char c) { return c >= '0' && c <= '9'; }
static bool key_char(char c)
{
    return lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}
/* A value's characters: printable ASCII but ',' and '='; space inside only. */
static bool value_char(char c) { return c >= 0x20 && c <= 0x7e && c != ',' && c != '='; }

/* simple-key, or tenant-id "@" system-id. */
static bool key_ok(const char *k, size_t n)
{
    const char *at = memchr(k, '@', n);
    if (at == NULL) {
        if (n < 1 || n > 256 || !lcalpha(k[0]))
            return false;
        for (size_t i = 1; i < n; i++)
            if (!key_char(k[i]))
                return false;
        return true;
    }
    size_t tenant = (size_t)(at - k), system = n - tenant - 1;
    if (tenant < 1 || tenant > 241 || system < 1 || system > 14)
        return false;
    if (!lcalpha(k[0]) && !digit(k[0]))
        return false;
    for (size_t i = 1; i < tenant; i++)
        if (!key_char(k[i]))
            return false;
    if (!lcalpha(at[1]))
        return false;
    for (size_t i = 1; i < system; i++)
        if (!key_char(at[1 + i]))
            return false;
    return true;
}

static bool value_ok(const char *v, size_t n)
{
    if (n < 1 || n > 256 || v[n - 1] == ' ')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!value_char(v[i]))
            return false;
    return true;
}

typedef struct member {
    const char *key;
    size_t key_len;
} member;

static bool seen(const member *m, int n, const char *k, size_t len)
{
    for (int i = 0; i < n; i++)
        if (m[i].key_len == len && memcmp(m[i].key, k, len) == 0)
            return true;
    return false;
}

static int tracestate_fail(resil_span_context *out, resil_err *err, const char *why, int at)
{
    out->tracestate[0] = '\0';
    return resil_err_set(err, RESIL_ESYNTAX, "tracestate %s (member %d)", why, at);
}

int resil_tracestate_parse(const char *text, size_t len, resil_span_context *out,
                           resil_err *err)
{
    if (text == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "tracestate: text and out must not be NULL");
    member members[RESIL_TRACESTATE_MEMBERS];
    int n = 0;
    size_t used = 0;
    for (size_t start = 0; start <= len;) {
        const char *comma = memchr(text + start, ',', len - start);
        size_t end = comma != NULL ? (size_t)(comma - text) : len;
        const char *m = text + start;
        size_t mlen = end - start;
        trim(&m, &mlen);
        start = end + 1;
        if (mlen == 0)
            continue; /* empty members are allowed and dropped */
        const char *eq = memchr(m, '=', mlen);
        if (eq == NULL)
            return tracestate_fail(out, err, "member has no '='", n + 1);
        size_t klen = (size_t)(eq - m), vlen = mlen - klen - 1;
        if (!key_ok(m, klen))
            return tracestate_fail(out, err, "key is not lcalpha [a-z0-9_*/-] (or tenant@system)",
                                   n + 1);
        if (!value_ok(eq + 1, vlen))
            return tracestate_fail(out, err, "value must be 1-256 printable bytes but ',' '='",
                                   n + 1);
        if (n == RESIL_TRACESTATE_MEMBERS)
            return tracestate_fail(out, err, "has more than 32 members", n + 1);
        if (seen(members, n, m, klen))
            return tracestate_fail(out, err, "repeats a key", n + 1);
        if (used + (n > 0) + mlen > RESIL_TRACESTATE_MAX)
            return tracestate_fail(out, err, "is longer than 512 bytes", n + 1);
        if (n > 0)
            out->tracestate[used++] = ',';
        memcpy(out->tracestate + used, m, mlen);
        members[n].key = out->tracestate + used;
        members[n].key_len = klen;
        used += mlen;
        n++;
    }
    out->tracestate[used] = '\0';
    return 0;
}

/* ---- authorities ----------------------------------------------------------------- */

int resil_authority_split(const char *authority, char *host, size_t cap, int *port)
{
    const char *p = authority != NULL ? strstr(authority, "://") : NULL;
    if (p == NULL || host == NULL || port == NULL)
        return RESIL_ESYNTAX;
    p += 3;
    const char *colon = strrchr(p, ':');
    if (colon == NULL || colon[1] == '\0')
        return RESIL_ESYNTAX;
    long v = 0;
    for (const char *d = colon + 1; *d; d++) {
        if (!digit(*d) || (v = v * 10 + (*d - '0')) > 65535)
            return RESIL_ESYNTAX;
    }
    const char *h = p, *e = colon;
    if (*h == '[' && e > h + 1 && e[-1] == ']') {
        h++;
        e--;
    }
    if (e <= h)
        return RESIL_ESYNTAX;
    if ((size_t)(e - h) >= cap)
        return RESIL_ERANGE;
    memcpy(host, h, (size_t)(e - h));
    host[e - h] = '\0';
    *port = (int)v;
    return 0;
}

/* ---- the tracer ------------------------------------------------------------------ */

void resil_tracer_opts_default(resil_tracer_opts *o) { memset(o, 0, sizeof *o); }

int resil_tracer_init(resil_tracer *t, const resil_tracer_opts *o, resil_err *err)
{
    if (t == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "tracer: tracer and options must not be NULL");
    if (o->on_span == NULL)
        return resil_err_set(err, RESIL_EINVAL, "tracer.on_span must not be NULL");
    t->opts = *o;
    if (t->opts.clock == NULL)
        t->opts.clock = resil_clock_system();
    return 0;
}

/* The wall time of instant `at` on the tracer's clock. */
static int64_t wall_at(resil_clock *c, resil_instant at)
{
    return resil_clock_wall_now(c) - resil_dur_sub(resil_clock_now(c), at);
}

static void span_blank(resil_span *s, const resil_event *ev, resil_span_type type,
                       const char *name)
{
    memset(s, 0, sizeof *s);
    s->type = type;
    s->name = name;
    memcpy(s->trace_id, ev->trace->span.trace_id, sizeof s->trace_id);
    s->flags = ev->trace->span.flags;
    s->tracestate = ev->trace->span.tracestate;
    s->pipeline = ev->pipeline;
    s->operation = ev->key;
    s->attempt = ev->attempt;
    s->stop = ev->stop;
    s->outcome = ev->outcome;
    s->http = ev->http;
}

static void attempt_id(const resil_event *ev, uint32_t hedge, uint8_t *id)
{
    resil_span_context a;
    resil_exec_trace_attempt(ev->trace, ev->attempt, hedge, &a);
    memcpy(id, a.span_id, 8);
}

void resil_tracer_on_event(const resil_event *ev, void *ud)
{
    const resil_tracer *t = ud;
    if (ev->trace == NULL || t == NULL)
        return;
    resil_span s;
    int64_t end = 0;
    switch (ev->type) {
    case RESIL_EVENT_EXECUTION:
        span_blank(&s, ev, RESIL_SPAN_EXECUTION, "execution");
        memcpy(s.span_id, ev->trace->span.span_id, 8);
        memcpy(s.parent_id, ev->trace->parent_id, 8);
        end = wall_at(t->opts.clock, ev->at);
        s.start_unix_ns = end - ev->duration;
        break;
    case RESIL_EVENT_ATTEMPT:
        span_blank(&s, ev, RESIL_SPAN_ATTEMPT, "attempt");
        attempt_id(ev, 0, s.span_id);
        memcpy(s.parent_id, ev->trace->span.span_id, 8);
        s.wait_before = ev->delay > 0 ? ev->delay : 0;
        s.handled = ev->handled;
        end = wall_at(t->opts.clock, ev->at);
        s.start_unix_ns = end - ev->duration;
        break;
    case RESIL_EVENT_HEDGE_ENDED:
        span_blank(&s, ev, RESIL_SPAN_HEDGE, "hedge");
        s.hedge = ev->hedge;
        attempt_id(ev, ev->hedge, s.span_id);
        memcpy(s.parent_id, ev->trace->span.span_id, 8);
        attempt_id(ev, 0, s.link_id);
        s.linked = true;
        end = wall_at(t->opts.clock, ev->at);
        s.start_unix_ns = end - ev->duration;
        break;
    default:
        return;
    }
    s.end_unix_ns = end;
    t->opts.on_span(&s, t->opts.on_span_ud);
}
