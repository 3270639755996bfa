/*
 * policy_opts.c — the retry-policy options, parsed once for every subcommand.
 *
 * Each option is checked here with the user's words ("--factor"), not the
 * library's field names ("backoff.factor"), so that a bad value is reported
 * as the option the user typed. The library's resil_retry_policy_validate()
 * still runs last, as the single authority on what a policy may be; if it
 * ever finds something these checks missed, its message is passed on as is.
 */
#include <string.h>

#include "attempt_log.h"
#include "policy_opts.h"

#define SCHEDULE_FOREVER_LINES 10 /* waits shown for "forever" */
#define SCHEDULE_MAX_LINES 50     /* waits shown before the rest is elided */

void policy_opts_default(policy_opts *po)
{
    memset(po, 0, sizeof *po);
    resil_retry_policy_default(&po->policy);
}

static int parse_attempts(policy_opts *po, const args *a, const char *v)
{
    if (strcmp(v, "forever") == 0) {
        po->policy.max_attempts = RESIL_ATTEMPTS_FOREVER;
        return 0;
    }
    uint64_t n;
    if (!args_whole(v, &n) || n < 1 || n >= RESIL_ATTEMPTS_FOREVER) {
        char what[64];
        snprintf(what, sizeof what, "a whole number in [1, %u] or 'forever'",
                 (unsigned)(RESIL_ATTEMPTS_FOREVER - 1));
        return args_reject(a, "--attempts", what, v);
    }
    po->policy.max_attempts = (uint32_t)n;
    return 0;
}

static int parse_backoff(policy_opts *po, const args *a, const char *v)
{
    resil_backoff_kind k;
    if (resil_backoff_kind_parse(v, &k) != 0 || k == RESIL_BACKOFF_LIST)
        return args_reject(a, "--backoff",
                           "one of constant, linear, exponential, fibonacci (a list of "
                           "waits is --delays)",
                           v);
    po->policy.backoff.kind = k;
    return 0;
}

int policy_keep_delays(resil_retry_policy *p, resil_duration *store)
{
    resil_backoff *b = &p->backoff;
    if (b->kind != RESIL_BACKOFF_LIST || b->delays == NULL || b->delays == store)
        return 0;
    if (b->delays_len > POLICY_DELAYS_MAX)
        return RESIL_ERANGE;
    memmove(store, b->delays, b->delays_len * sizeof *store);
    b->delays = store;
    return 0;
}

/* The waits a --delays value lists: one more than its commas. */
static size_t count_waits(const char *v)
{
    size_t n = 1;
    for (; *v != '\0'; v++)
        n += *v == ',';
    return n;
}

/* "1s,2s,5s": the waits after the first, second, third failure. */
static int parse_delays(policy_opts *po, const args *a, const char *v)
{
    const char *what = "a comma-separated list of durations, such as 1s,2s,5s";
    size_t n = 0;
    for (const char *p = v;; n++) {
        size_t len = strcspn(p, ",");
        char one[64];
        if (len == 0 || len >= sizeof one)
            return args_reject(a, "--delays", what, v);
        if (n == POLICY_DELAYS_MAX)
            return args_fail(a, "--delays: at most %d waits, got %zu", POLICY_DELAYS_MAX,
                             count_waits(v));
        memcpy(one, p, len);
        one[len] = '\0';
        if (args_duration(a, "--delays", one, false, &po->delays[n]) != 0)
            return RESIL_EINVAL;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    resil_backoff *b = &po->policy.backoff;
    b->kind = RESIL_BACKOFF_LIST;
    b->delays = po->delays;
    b->delays_len = n + 1;
    return 0;
}

/* A list's defaults, unless the command line said otherwise: one attempt
 * per wait and the first, and the waits exactly as listed. */
static void list_defaults(policy_opts *po)
{
    if (!(po->given & POLICY_GIVEN_DELAYS))
        return;
    if (!(po->given & POLICY_GIVEN_ATTEMPTS))
        po->policy.max_attempts = (uint32_t)po->policy.backoff.delays_len + 1;
    if (!(po->given & POLICY_GIVEN_JITTER))
        po->policy.backoff.jitter = RESIL_JITTER_NONE;
    if (!(po->given & POLICY_GIVEN_MAX_DELAY))
        po->policy.backoff.max_delay = RESIL_DURATION_MAX;
}

static int parse_jitter(policy_opts *po, const args *a, const char *v)
{
    if (resil_jitter_parse(v, &po->policy.backoff.jitter) != 0)
        return args_reject(a, "--jitter",
                           "one of none, full, equal, decorrelated, "
                           "proportional, polly", v);
    return 0;
}

static int parse_seed(policy_opts *po, const args *a, const char *v)
{
    int rc = args_uint64(a, "--seed", v, 0, UINT64_MAX, &po->seed);
    po->seeded = rc == 0;
    return rc;
}

int policy_opts_parse(policy_opts *po, args *a)
{
    resil_backoff *b = &po->policy.backoff;
    const char *v = NULL;
    int m;
#define TRY(long_name, short_name, bit, action)                            \
    if ((m = args_match(a, long_name, short_name, &v)) != 0) {             \
        if (m < 0)                                                         \
            return m;                                                      \
        int rc_ = (action);                                                \
        po->given |= (bit);                                                \
        return rc_ < 0 ? rc_ : 1;                                          \
    }
    TRY("--attempts", "-a", POLICY_GIVEN_ATTEMPTS, parse_attempts(po, a, v))
    TRY("--backoff", NULL, POLICY_GIVEN_BACKOFF, parse_backoff(po, a, v))
    TRY("--delay", NULL, POLICY_GIVEN_DELAY, args_duration(a, "--delay", v, false, &b->base))
    TRY("--delays", NULL, POLICY_GIVEN_DELAYS, parse_delays(po, a, v))
    TRY("--max-delay", NULL, POLICY_GIVEN_MAX_DELAY,
        args_duration(a, "--max-delay", v, false, &b->max_delay))
    TRY("--factor", NULL, POLICY_GIVEN_FACTOR, args_double(a, "--factor", v, 1.0, &b->factor))
    TRY("--jitter", NULL, POLICY_GIVEN_JITTER, parse_jitter(po, a, v))
    TRY("--seed", NULL, 0, parse_seed(po, a, v))
    TRY("--attempt-timeout", NULL, POLICY_GIVEN_ATTEMPT_TIMEOUT,
        args_timeout(a, "--attempt-timeout", v, &po->attempt_timeout))
    TRY("--total-timeout", NULL, POLICY_GIVEN_TOTAL_TIMEOUT,
        args_timeout(a, "--total-timeout", v, &po->policy.max_total))
    TRY("--config", NULL, 0, args_nonempty(a, "--config", "a file name", v, &po->config_file))
    TRY("--policy", NULL, 0, args_nonempty(a, "--policy", "a policy name", v, &po->policy_name))
#undef TRY
    return 0;
}

/* One code at *p, advancing past its digits: 0 when it is no code in
 * [1, 255] (no digit, or too large; reading stops once it is). */
static unsigned read_code(const char **p)
{
    const char *s = *p;
    unsigned v = 0;
    if (*s < '0' || *s > '9')
        return 0;
    while (*s >= '0' && *s <= '9' && v <= 255)
        v = v * 10 + (unsigned)(*s++ - '0');
    *p = s;
    return v <= 255 ? v : 0;
}

int exit_codes_parse(const args *a, const char *option, const char *text, code_set *set)
{
    const char *what = "a comma-separated list of exit codes in [1, 255]";
    const char *p = text;
    memset(set, 0, sizeof *set);
    set->given = true;
    for (;;) {
        unsigned v = read_code(&p);
        if (v == 0)
            return args_reject(a, option, what, text);
        set->has[v] = true;
        if (*p == '\0')
            return 0;
        if (*p++ != ',')
            return args_reject(a, option, what, text);
    }
}

#ifdef RESIL_CLI_CONFIG
/* The named policy under whatever the command line set itself. */
static int apply_config(policy_opts *po, const args *a)
{
    config_policy cp;
    if (config_policy_load(a, po->config_file, po->policy_name, &cp) != 0)
        return RESIL_EINVAL;
    if (cp.ignored[0] != '\0')
        fprintf(stderr, "%s: note: --policy %s: %s not used by this command\n", a->cmd,
                po->policy_name, cp.ignored);
    const policy_opts cli = *po;
    resil_backoff *b = &po->policy.backoff;
    po->policy = cp.policy; /* numbers only: the command's classifier and hooks stay */
    policy_keep_delays(&po->policy, po->delays); /* cp's list fits: it was kept in cp */
    po->policy.retry_on = cli.policy.retry_on;
    po->policy.retry_on_ud = cli.policy.retry_on_ud;
    po->policy.budget = cli.policy.budget;
    po->policy.on_retry = cli.policy.on_retry;
    po->policy.on_retry_ud = cli.policy.on_retry_ud;
    po->policy.max_total = cp.total_timeout;
    po->attempt_timeout = cp.attempt_timeout;
    memcpy(po->disable_for, cp.disable_for, sizeof po->disable_for);
    memcpy(po->hint_headers, cp.hint_headers, sizeof po->hint_headers);
    po->nhint_headers = cp.nhint_headers;
    if (cli.given & POLICY_GIVEN_ATTEMPTS)
        po->policy.max_attempts = cli.policy.max_attempts;
    if (cli.given & POLICY_GIVEN_BACKOFF)
        b->kind = cli.policy.backoff.kind;
    if (cli.given & POLICY_GIVEN_DELAYS) {
        memcpy(po->delays, cli.delays, sizeof po->delays);
        b->kind = RESIL_BACKOFF_LIST;
        b->delays = po->delays;
        b->delays_len = cli.policy.backoff.delays_len;
    }
    if (cli.given & POLICY_GIVEN_DELAY)
        b->base = cli.policy.backoff.base;
    if (cli.given & POLICY_GIVEN_MAX_DELAY)
        b->max_delay = cli.policy.backoff.max_delay;
    if (cli.given & POLICY_GIVEN_FACTOR)
        b->factor = cli.policy.backoff.factor;
    if (cli.given & POLICY_GIVEN_JITTER)
        b->jitter = cli.policy.backoff.jitter;
    if (cli.given & POLICY_GIVEN_ATTEMPT_TIMEOUT)
        po->attempt_timeout = cli.attempt_timeout;
    if (cli.given & POLICY_GIVEN_TOTAL_TIMEOUT)
        po->policy.max_total = cli.policy.max_total;
    return 0;
}
#endif

static int load_named_policy(policy_opts *po, const args *a)
{
    if (po->config_file == NULL && po->policy_name == NULL)
        return 0;
    if (po->config_file == NULL || po->policy_name == NULL)
        return args_fail(a, "--config FILE and --policy NAME go together");
#ifdef RESIL_CLI_CONFIG
    return apply_config(po, a);
#else
    return args_fail(a, "--config: this resil was built without configuration support "
                        "(libresil-config needs jansson)");
#endif
}

/* A default timeout never traps an explicit one: `--total-timeout 3s`
 * cuts a default 10 s attempt timeout to 3 s, and `--attempt-timeout 1m`
 * lifts a default 30 s total. Both given and clashing: RESIL_EINVAL. */
static int fit_timeouts(policy_opts *po)
{
    resil_duration *attempt = &po->attempt_timeout, *total = &po->policy.max_total;
    if (*attempt == 0 || *total == 0 || *attempt <= *total)
        return 0;
    bool attempt_given = po->given & POLICY_GIVEN_ATTEMPT_TIMEOUT;
    bool total_given = po->given & POLICY_GIVEN_TOTAL_TIMEOUT;
    if (attempt_given && total_given)
        return RESIL_EINVAL;
    if (total_given)
        *attempt = *total;
    else
        *total = 0;
    return 0;
}

int policy_opts_finish(policy_opts *po, const args *a)
{
    if (po->given & POLICY_GIVEN_BACKOFF && po->given & POLICY_GIVEN_DELAYS)
        return args_fail(a, "--delays lists the waits: it takes no --backoff");
    if (load_named_policy(po, a) != 0)
        return RESIL_EINVAL;
    list_defaults(po);
    const resil_retry_policy *p = &po->policy;
    if (fit_timeouts(po) != 0)
        return args_fail(a, "--attempt-timeout must not exceed --total-timeout");
    resil_err err;
    if (resil_retry_policy_validate(p, &err) != 0)
        return args_fail(a, "invalid policy: %s", err.message);
    resil_rng_seeded_init(&po->seeded_rng, po->seed);
    return 0;
}

resil_rng *policy_opts_rng(policy_opts *po)
{
    return po->seeded ? &po->seeded_rng.base : resil_rng_thread();
}

/* A default as the help writes it: `none` for the value meaning no bound
 * (0 for a timeout, RESIL_DURATION_MAX for a cap), else the duration. */
static void default_text(resil_duration d, resil_duration none, char *buf, size_t cap)
{
    if (d == none)
        snprintf(buf, cap, "none");
    else
        resil_duration_format(d, buf, cap);
}

void policy_opts_usage(FILE *out, const policy_opts *defaults)
{
    const resil_retry_policy *p = &defaults->policy;
    const resil_backoff *b = &p->backoff;
    char attempts[32], delay[32], max_delay[32], attempt_t[32], total_t[32];
    if (p->max_attempts == RESIL_ATTEMPTS_FOREVER)
        snprintf(attempts, sizeof attempts, "forever");
    else
        snprintf(attempts, sizeof attempts, "%u", p->max_attempts);
    resil_duration_format(b->base, delay, sizeof delay);
    default_text(b->max_delay, RESIL_DURATION_MAX, max_delay, sizeof max_delay);
    default_text(defaults->attempt_timeout, 0, attempt_t, sizeof attempt_t);
    default_text(p->max_total, 0, total_t, sizeof total_t);
    fprintf(out,
            "retry policy:\n"
            "  -a, --attempts N|forever   attempts in all, the first included (default %s)\n"
            "      --backoff KIND         constant, linear, exponential or fibonacci\n"
            "                             (default %s)\n"
            "      --delay DUR            the backoff's base delay (default %s)\n"
            "      --delays DUR,DUR,...   wait exactly these (1 to 32), in order, the last\n"
            "                             again past the end; sets --attempts to the\n"
            "                             count + 1, --jitter none and no --max-delay\n"
            "                             cap unless those are given; takes no --backoff\n"
            "      --max-delay DUR        cap on any backoff wait (default %s)\n"
            "      --factor F             exponential growth, >= 1 (default %g)\n"
            "      --jitter MODE          none, full, equal, decorrelated, proportional\n"
            "                             or polly (default %s)\n"
            "      --seed N               draw jitter from a generator seeded with N\n"
            "                             (default: seeded from the OS, so that two\n"
            "                             runs never synchronise)\n"
            "      --attempt-timeout DUR|none\n"
            "                             bound each attempt (default %s)\n"
            "      --total-timeout DUR|none\n"
            "                             bound the whole run, waits included; a wait\n"
            "                             that would pass it stops the run at once\n"
            "                             (default %s); a default attempt timeout is\n"
            "                             cut to it\n"
            "      --config FILE --policy NAME\n"
            "                             start from a named pipeline (its retry and\n"
            "                             timeouts) or retry policy of a configuration\n"
            "                             file; the options above override it\n"
            "DUR is a duration such as 250ms, 2s, 1m30s or 01:30:00; for a timeout,\n"
            "'none' or 0 switches it off.\n",
            attempts, resil_backoff_kind_name(b->kind), delay, max_delay, b->factor,
            resil_jitter_name(b->jitter), attempt_t, total_t);
}

static void print_policy(const policy_opts *po, FILE *out)
{
    const resil_retry_policy *p = &po->policy;
    const resil_backoff *b = &p->backoff;
    char text[32];
    if (p->max_attempts == RESIL_ATTEMPTS_FOREVER)
        fprintf(out, "attempts forever");
    else
        fprintf(out, "attempts %u", p->max_attempts);
    if (b->kind == RESIL_BACKOFF_LIST) {
        fprintf(out, ", backoff list, delays ");
        for (size_t i = 0; i < b->delays_len; i++) {
            resil_duration_format(b->delays[i], text, sizeof text);
            fprintf(out, "%s%s", i ? "," : "", text);
        }
    } else {
        resil_duration_format(b->base, text, sizeof text);
        fprintf(out, ", backoff %s, delay %s", resil_backoff_kind_name(b->kind), text);
    }
    if (b->kind == RESIL_BACKOFF_EXPONENTIAL)
        fprintf(out, ", factor %g", b->factor);
    resil_duration_format(b->max_delay, text, sizeof text);
    fprintf(out, ", max-delay %s, jitter %s", b->max_delay == RESIL_DURATION_MAX ? "none" : text,
            resil_jitter_name(b->jitter));
    if (po->attempt_timeout > 0) {
        resil_duration_format(po->attempt_timeout, text, sizeof text);
        fprintf(out, ", attempt-timeout %s", text);
    }
    if (p->max_total > 0) {
        resil_duration_format(p->max_total, text, sizeof text);
        fprintf(out, ", total-timeout %s", text);
    }
    fputc('\n', out);
}

/*
 * Known waits also show where --total-timeout stops the run: the executor
 * stops instead of a wait that would reach the deadline, and since the
 * attempts themselves take time, it stops there at the latest.
 */
void policy_opts_print_schedule(const policy_opts *po, FILE *out)
{
    const resil_retry_policy *p = &po->policy;
    const resil_backoff *b = &p->backoff;
    resil_rng_seeded rng = po->seeded_rng; /* a copy: the run keeps its seed */
    resil_backoff_state st = {0};
    bool exact = b->jitter == RESIL_JITTER_NONE || po->seeded;
    bool forever = p->max_attempts == RESIL_ATTEMPTS_FOREVER;
    uint32_t waits = forever ? SCHEDULE_FOREVER_LINES : p->max_attempts - 1;
    uint32_t shown = waits < SCHEDULE_MAX_LINES ? waits : SCHEDULE_MAX_LINES;
    resil_duration waited = 0;

    print_policy(po, out);
    for (uint32_t n = 1; n <= shown; n++) {
        char ms[32];
        resil_duration d = exact ? resil_backoff_delay(b, n, &st, &rng.base)
                                 : resil_backoff_max_delay(b, n);
        waited = resil_dur_add(waited, d);
        if (exact && p->max_total > 0 && waited >= p->max_total) {
            fprintf(out, "#%u fails, stop: deadline (at the latest)\n", n);
            return;
        }
        format_ms(d, false, ms, sizeof ms);
        fprintf(out, "#%u fails, wait %s%s ms\n", n, exact ? "" : "up to ", ms);
    }
    if (forever) {
        fprintf(out, "... and so on, until an attempt succeeds or is not "
                     "retryable\n");
        return;
    }
    if (shown < waits)
        fprintf(out, "... %u more wait%s not shown\n", waits - shown,
                waits - shown == 1 ? "" : "s");
    fprintf(out, "#%u fails, stop: attempts exhausted\n", p->max_attempts);
}
