/*
 * telemetry.c — events: their names and severities, how each is started
 * and delivered (the pipeline's own and those the adapters make of breaker
 * and degradation events alike), and the log sink.
 *
 * The log sink formats into a buffer on the stack and hands over a whole
 * line in one write, so concurrent events never interleave within a line
 * and logging allocates nothing. logfmt and JSON come from one field list:
 * each field is emitted once through a writer that knows the format, so
 * the two can never disagree about what an event says.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "pipeline_internal.h"

/* ---- names ------------------------------------------------------------- */

static const char *const event_names[RESIL_EVENT_TYPE_COUNT] = {
    "execution",       "attempt",           "retry",        "breaker_opened",
    "breaker_half_opened", "breaker_closed", "breaker_isolated", "breaker_rejected",
    "timeout",         "budget_denied",     "bulkhead_rejected", "rate_limited",
    "hedge",           "fallback",          "degrade_changed", "degrade_rejected",
    "chaos_injected",  "limit_changed",     "limit_rejected", "throttled",
    "hedge_ended"};

const char *resil_event_name(resil_event_type t)
{
    return (unsigned)t < RESIL_EVENT_TYPE_COUNT ? event_names[t] : "";
}

const char *resil_severity_name(resil_severity s)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    return (unsigned)s < 4 ? names[s] : "";
}

static bool failed(const resil_outcome *o) { return o != NULL && o->kind != RESIL_SUCCESS; }

resil_severity resil_event_severity(resil_event_type t, const resil_outcome *outcome)
{
    switch (t) {
    case RESIL_EVENT_EXECUTION:
        return failed(outcome) ? RESIL_SEVERITY_WARNING : RESIL_SEVERITY_DEBUG;
    case RESIL_EVENT_ATTEMPT:
        return failed(outcome) ? RESIL_SEVERITY_WARNING : RESIL_SEVERITY_INFO;
    case RESIL_EVENT_BREAKER_CLOSED:
    case RESIL_EVENT_LIMIT_CHANGED:
        return RESIL_SEVERITY_INFO;
    case RESIL_EVENT_HEDGE_ENDED:
        return RESIL_SEVERITY_DEBUG;
    case RESIL_EVENT_BREAKER_OPENED:
    case RESIL_EVENT_BREAKER_REJECTED:
    case RESIL_EVENT_TIMEOUT:
    case RESIL_EVENT_BULKHEAD_REJECTED:
    case RESIL_EVENT_RATE_LIMITED:
    case RESIL_EVENT_LIMIT_REJECTED:
    case RESIL_EVENT_THROTTLED:
        return RESIL_SEVERITY_ERROR;
    default:
        return RESIL_SEVERITY_WARNING;
    }
}

/* ---- making and delivering ----------------------------------------------- */

/* Every field at its "not said" value: what each event starts from. */
static void event_blank(resil_event *ev, resil_event_type t, const char *pipeline,
                        resil_strategy_kind k, resil_instant at)
{
    memset(ev, 0, sizeof *ev);
    ev->type = t;
    ev->pipeline = pipeline != NULL ? pipeline : "";
    ev->strategy = resil_strategy_name(k);
    ev->key = ev->reason = ev->from_name = ev->to_name = "";
    ev->delay = RESIL_NO_HINT;
    ev->at = at;
}

void resil__event_init(resil_event *ev, const resil_pipeline *p, resil_event_type t,
                       resil_strategy_kind k, resil_instant at)
{
    event_blank(ev, t, p->name, k, at);
}

void resil__event_init_run(resil_event *ev, const resil__run *r, resil_event_type t,
                           resil_strategy_kind k, resil_instant at)
{
    event_blank(ev, t, r->p->name, k, at);
    ev->trace = r->trace;
    ev->http = r->http;
}

void resil__emit(const resil_pipeline *p, resil_event *ev)
{
    ev->severity = resil_event_severity(ev->type, ev->outcome);
    for (size_t i = 0; i < p->nlisteners; i++)
        p->listeners[i].fn(ev, p->listeners[i].ud);
}

/* ---- adapters ------------------------------------------------------------- */

static resil_event_type breaker_event_type(resil_breaker_state to)
{
    switch (to) {
    case RESIL_BREAKER_OPEN:
        return RESIL_EVENT_BREAKER_OPENED;
    case RESIL_BREAKER_HALF_OPEN:
        return RESIL_EVENT_BREAKER_HALF_OPENED;
    case RESIL_BREAKER_CLOSED:
        return RESIL_EVENT_BREAKER_CLOSED;
    default:
        return RESIL_EVENT_BREAKER_ISOLATED;
    }
}

static void deliver(const resil_listener *l, resil_event *ev)
{
    ev->severity = resil_event_severity(ev->type, NULL);
    l->fn(ev, l->ud);
}

void resil_telemetry_breaker_listener(resil_breaker *b, const resil_breaker_event *bev,
                                      void *ud)
{
    const resil_listener *l = ud;
    if (l == NULL || l->fn == NULL || bev == NULL)
        return;
    resil_event ev;
    event_blank(&ev, breaker_event_type(bev->to), l->pipeline, RESIL_STRATEGY_BREAKER, bev->at);
    ev.key = resil_breaker_name(b);
    ev.duration = bev->to == RESIL_BREAKER_OPEN ? bev->break_duration : 0;
    ev.reason = resil_breaker_reason_name(bev->reason);
    ev.from = bev->from;
    ev.to = bev->to;
    ev.from_name = resil_breaker_state_name(bev->from);
    ev.to_name = resil_breaker_state_name(bev->to);
    deliver(l, &ev);
}

void resil_telemetry_degrade_listener(void *ud, const resil_degrade_event *dev)
{
    const resil_listener *l = ud;
    if (l == NULL || l->fn == NULL || dev == NULL)
        return;
    resil_event ev;
    event_blank(&ev, RESIL_EVENT_DEGRADE_CHANGED, l->pipeline, RESIL_STRATEGY_DEGRADE, dev->at);
    ev.reason = resil_degrade_cause_name(dev->cause);
    ev.from = dev->from;
    ev.to = dev->to;
    ev.from_name = dev->from_name != NULL ? dev->from_name : "";
    ev.to_name = dev->to_name != NULL ? dev->to_name : "";
    deliver(l, &ev);
}

/* ---- text ------------------------------------------------------------------ */

void resil__text_put(resil__text *t, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, t->len++)
        if (t->len + 1 < t->cap)
            t->buf[t->len] = s[i];
}

void resil__text_puts(resil__text *t, const char *s) { resil__text_put(t, s, strlen(s)); }

/* Straight into the buffer: vsnprintf keeps the last byte for the NUL as
 * resil__text_put does, and its count is the full text's, past cap too. */
void resil__text_printf(resil__text *t, const char *fmt, ...)
{
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room > 0 ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

void resil__text_escaped(resil__text *t, const char *s, bool json)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            resil__text_put(t, "\\", 1);
            resil__text_put(t, s, 1);
        } else if (c == '\n') {
            resil__text_puts(t, "\\n");
        } else if (c == '\t') {
            resil__text_puts(t, "\\t");
        } else if (c < 0x20) {
            resil__text_printf(t, json ? "\\u%04x" : "\\x%02x", c);
        } else {
            resil__text_put(t, s, 1);
        }
    }
}

size_t resil__text_end(resil__text *t)
{
    if (t->cap > 0)
        t->buf[t->len < t->cap ? t->len : t->cap - 1] = '\0';
    return t->len;
}

/* ---- the line writer ------------------------------------------------------------ */

typedef struct line {
    resil__text t;
    resil_log_format format;
    int fields;
} line;

static void puts_(line *w, const char *s) { resil__text_puts(&w->t, s); }

static bool needs_quotes(const char *s)
{
    if (*s == '\0')
        return true;
    for (; *s; s++)
        if (*s == ' ' || *s == '=' || *s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            return true;
    return false;
}

static void field_name(line *w, const char *name)
{
    if (w->format == RESIL_LOG_JSON) {
        puts_(w, w->fields++ ? ",\"" : "{\"");
        puts_(w, name);
        puts_(w, "\":");
    } else {
        if (w->fields++)
            puts_(w, " ");
        puts_(w, name);
        puts_(w, "=");
    }
}

static void field_str(line *w, const char *name, const char *value)
{
    field_name(w, name);
    bool json = w->format == RESIL_LOG_JSON;
    bool quote = json || needs_quotes(value);
    if (quote)
        puts_(w, "\"");
    resil__text_escaped(&w->t, value, json);
    if (quote)
        puts_(w, "\"");
}

static void field_int(line *w, const char *name, long long value)
{
    field_name(w, name);
    resil__text_printf(&w->t, "%lld", value);
}

static void field_bool(line *w, const char *name, bool value)
{
    field_name(w, name);
    puts_(w, value ? "true" : "false");
}

static void field_dur(line *w, const char *name, resil_duration d)
{
    char text[32];
    resil_duration_format(d, text, sizeof text);
    field_str(w, name, text);
}

static void field_time(line *w, int64_t wall_ns)
{
    time_t secs = (time_t)(wall_ns / 1000000000);
    int ms = (int)((wall_ns % 1000000000) / 1000000);
    if (ms < 0) {
        ms += 1000;
        secs--;
    }
    struct tm tm;
    char text[40];
    if (gmtime_r(&secs, &tm) == NULL)
        return;
    size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(text + n, sizeof text - n, ".%03dZ", ms);
    field_str(w, "time", text);
}

/* ---- the log sink ------------------------------------------------------------------ */

void resil_log_opts_default(resil_log_opts *o)
{
    memset(o, 0, sizeof *o);
    o->format = RESIL_LOG_LOGFMT;
    o->min_severity = RESIL_SEVERITY_INFO;
    o->timestamps = true;
}

int resil_log_sink_init(resil_log_sink *s, const resil_log_opts *o, resil_err *err)
{
    if (s == NULL || o == NULL)
        return resil_err_set(err, RESIL_EINVAL, "log: sink and options must not be NULL");
    if ((unsigned)o->format > RESIL_LOG_JSON)
        return resil_err_set(err, RESIL_EINVAL, "log.format must be logfmt or json, got %d",
                             (int)o->format);
    if ((unsigned)o->min_severity > RESIL_SEVERITY_ERROR)
        return resil_err_set(err, RESIL_EINVAL,
                             "log.min_severity must be debug, info, warning or error, got %d",
                             (int)o->min_severity);
    s->opts = *o;
    if (s->opts.clock == NULL)
        s->opts.clock = resil_clock_system();
    if (s->opts.write == NULL && s->opts.file == NULL)
        s->opts.file = stderr;
    return 0;
}

/* The outcome is the cause of what these events report. */
static const char *outcome_label(resil_event_type t)
{
    switch (t) {
    case RESIL_EVENT_RETRY:
    case RESIL_EVENT_FALLBACK:
    case RESIL_EVENT_TIMEOUT:
    case RESIL_EVENT_BUDGET_DENIED:
        return "cause";
    default:
        return "outcome";
    }
}

static bool has_delay(resil_event_type t)
{
    return t == RESIL_EVENT_RETRY || t == RESIL_EVENT_HEDGE ||
           t == RESIL_EVENT_BREAKER_REJECTED || t == RESIL_EVENT_RATE_LIMITED;
}

static bool has_duration(resil_event_type t)
{
    return t == RESIL_EVENT_EXECUTION || t == RESIL_EVENT_ATTEMPT ||
           t == RESIL_EVENT_TIMEOUT || t == RESIL_EVENT_BREAKER_OPENED ||
           t == RESIL_EVENT_HEDGE_ENDED;
}

static void put_outcome(line *w, resil_event_type t, const resil_outcome *o)
{
    if (o == NULL)
        return;
    char kind[16];
    resil__lower_copy(kind, sizeof kind, resil_kind_name(o->kind));
    field_str(w, outcome_label(t), kind);
    if (o->kind == RESIL_SUCCESS)
        return;
    field_int(w, "code", (long long)o->code);
    if (o->detail[0] != '\0')
        field_str(w, "detail", o->detail);
    if (o->retry_after >= 0 && t != RESIL_EVENT_RATE_LIMITED && t != RESIL_EVENT_BREAKER_REJECTED)
        field_dur(w, "retry_after", o->retry_after);
}

static void put_fields(line *w, const resil_log_sink *s, const resil_event *ev)
{
    if (s->opts.timestamps)
        field_time(w, resil_clock_wall_now(s->opts.clock));
    field_str(w, "level", resil_severity_name(ev->severity));
    field_str(w, "event", resil_event_name(ev->type));
    field_str(w, "pipeline", ev->pipeline != NULL ? ev->pipeline : "");
    if (ev->strategy != NULL && ev->strategy[0] != '\0')
        field_str(w, "strategy", ev->strategy);
    if (ev->key != NULL && ev->key[0] != '\0')
        field_str(w, "key", ev->key);
    if (ev->attempt > 0)
        field_int(w, "attempt", ev->attempt);
    if (ev->type == RESIL_EVENT_HEDGE || ev->type == RESIL_EVENT_HEDGE_ENDED)
        field_int(w, "hedge", ev->hedge);
    if (has_delay(ev->type) && ev->delay >= 0)
        field_dur(w, "delay", ev->delay);
    if (ev->type == RESIL_EVENT_RETRY)
        field_str(w, "source", resil_wait_source_name(ev->source));
    if (has_duration(ev->type))
        field_dur(w, "duration", ev->duration);
    if (ev->stop != RESIL_STOP_NONE)
        field_str(w, "stop", resil_stop_name(ev->stop));
    if (ev->type == RESIL_EVENT_ATTEMPT)
        field_bool(w, "handled", ev->handled);
    if (ev->from_name != NULL && ev->from_name[0] != '\0') {
        field_str(w, "from", ev->from_name);
        field_str(w, "to", ev->to_name != NULL ? ev->to_name : "");
    }
    if (ev->reason != NULL && ev->reason[0] != '\0')
        field_str(w, "reason", ev->reason);
    put_outcome(w, ev->type, ev->outcome);
}

size_t resil_log_format_event(const resil_log_sink *s, const resil_event *ev, char *buf,
                              size_t cap)
{
    line w = {{buf, cap, 0}, s->opts.format, 0};
    put_fields(&w, s, ev);
    if (s->opts.format == RESIL_LOG_JSON)
        puts_(&w, "}");
    puts_(&w, "\n");
    return resil__text_end(&w.t);
}

static bool wanted(const resil_log_sink *s, const resil_event *ev)
{
    if (!s->opts.verbose &&
        (ev->type == RESIL_EVENT_ATTEMPT || ev->type == RESIL_EVENT_EXECUTION))
        return false;
    return ev->severity >= s->opts.min_severity;
}

void resil_log_on_event(const resil_event *ev, void *ud)
{
    const resil_log_sink *s = ud;
    if (s == NULL || ev == NULL || !wanted(s, ev))
        return;
    char buf[RESIL_LOG_LINE_MAX];
    size_t n = resil_log_format_event(s, ev, buf, sizeof buf);
    if (n >= sizeof buf) {
        /* Cut, and say so, keeping the line a line. */
        memcpy(buf + sizeof buf - 5, "...\n", 5);
        n = sizeof buf - 1;
    }
    if (s->opts.write != NULL)
        s->opts.write(buf, n, s->opts.write_ud);
    else
        fwrite(buf, 1, n, s->opts.file);
}
