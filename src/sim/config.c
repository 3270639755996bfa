/*
 * config.c — scenarios' defaults, policy names, validation, and the one
 * mapping from a simulator policy to the library's resil_retry_policy.
 *
 * The configuration is filled from command-line flags, so every message
 * names the flag a user typed ("--clients must be …"), not a struct field.
 * Policies are small words joined by '+', so that a comparison the articles
 * make ("full jitter", "with a token budget", "and a breaker") is typed the
 * way it is said.
 */
#include <math.h>
#include <string.h>

#include "model.h"

static const char *const scenario_names[] = {"occ", "failover", "metastable", "layers",
                                             "brownout"};

const char *resil_sim_scenario_name(resil_sim_scenario s)
{
    if ((size_t)s >= sizeof scenario_names / sizeof scenario_names[0])
        return "?";
    return scenario_names[s];
}

int resil_sim_scenario_parse(const char *s, resil_sim_scenario *out)
{
    for (size_t i = 0; i < sizeof scenario_names / sizeof scenario_names[0]; i++) {
        if (strcmp(s, scenario_names[i]) == 0) {
            *out = (resil_sim_scenario)i;
            return 0;
        }
    }
    return RESIL_EINVAL;
}

resil_duration resil__sim_outage_end(const resil_sim_config *c)
{
    return resil_dur_add(c->outage_start, c->outage);
}

resil_sim_wait resil__sim_default_wait(resil_sim_scenario s)
{
    return s == RESIL_SIM_METASTABLE ? RESIL_SIM_WAIT_NONE : RESIL_SIM_WAIT_EXPONENTIAL;
}

/* ---- policies ----------------------------------------------------------- */

typedef enum part_kind {
    PART_WAIT,
    PART_NORETRY,
    PART_BUDGET,
    PART_BREAKER,
    PART_LIMIT,
    PART_THROTTLE
} part_kind;

typedef struct part {
    const char *name;
    part_kind kind;
    int value; /* the wait or the budget model */
} part;

static const part parts[] = {
    {"naive", PART_WAIT, RESIL_SIM_WAIT_DEFAULT},
    {"none", PART_WAIT, RESIL_SIM_WAIT_NONE},
    {"exponential", PART_WAIT, RESIL_SIM_WAIT_EXPONENTIAL},
    {"full", PART_WAIT, RESIL_SIM_WAIT_FULL},
    {"equal", PART_WAIT, RESIL_SIM_WAIT_EQUAL},
    {"decorrelated", PART_WAIT, RESIL_SIM_WAIT_DECORRELATED},
    {"noretry", PART_NORETRY, 0},
    {"tokens", PART_BUDGET, RESIL_BUDGET_TOKENS},
    {"quota", PART_BUDGET, RESIL_BUDGET_QUOTA},
    {"ratio", PART_BUDGET, RESIL_BUDGET_RATIO},
    {"breaker", PART_BREAKER, 0},
    {"static", PART_LIMIT, RESIL_SIM_LIMIT_STATIC},
    {"vegas", PART_LIMIT, RESIL_SIM_LIMIT_VEGAS},
    {"gradient", PART_LIMIT, RESIL_SIM_LIMIT_GRADIENT},
    {"aimd", PART_LIMIT, RESIL_SIM_LIMIT_AIMD},
    {"throttle", PART_THROTTLE, 0},
};

#define PART_LIST "naive, none, exponential, full, equal, decorrelated, noretry, " \
                  "tokens, quota, ratio, breaker, static, vegas, gradient, aimd, throttle"

static const part *find_part(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (strlen(parts[i].name) == len && memcmp(parts[i].name, s, len) == 0)
            return &parts[i];
    }
    return NULL;
}

/* Apply one part; `seen` collects the kinds already given. */
static int apply_part(const part *pt, const char *text, unsigned *seen,
                      resil_sim_policy *out, resil_err *err)
{
    unsigned bit = 1u << pt->kind;
    if (*seen & bit)
        return resil_err_set(err, RESIL_EINVAL,
                             "--policy '%s' names more than one %s", text,
                             pt->kind == PART_WAIT     ? "wait"
                             : pt->kind == PART_BUDGET ? "budget"
                             : pt->kind == PART_LIMIT  ? "limit"
                                                       : "of the same part");
    *seen |= bit;
    switch (pt->kind) {
    case PART_WAIT:
        out->wait = (resil_sim_wait)pt->value;
        break;
    case PART_NORETRY:
        out->no_retry = true;
        break;
    case PART_BUDGET:
        out->has_budget = true;
        out->budget = (resil_budget_model)pt->value;
        break;
    case PART_BREAKER:
        out->breaker = true;
        break;
    case PART_LIMIT:
        out->limit = (resil_sim_limit)pt->value;
        break;
    case PART_THROTTLE:
        out->throttle = true;
        break;
    }
    return 0;
}

int resil_sim_policy_parse(const char *text, resil_sim_policy *out, resil_err *err)
{
    memset(out, 0, sizeof *out);
    size_t len = strlen(text);
    if (len == 0)
        return resil_err_set(err, RESIL_EINVAL, "--policy must not be empty");
    if (len >= sizeof out->name)
        return resil_err_set(err, RESIL_EINVAL, "--policy '%.20s…' is longer than %zu characters",
                             text, sizeof out->name - 1);
    memcpy(out->name, text, len + 1);
    unsigned seen = 0;
    for (const char *s = text; ; ) {
        const char *end = strchr(s, '+');
        size_t n = end != NULL ? (size_t)(end - s) : strlen(s);
        const part *pt = find_part(s, n);
        if (pt == NULL)
            return resil_err_set(err, RESIL_EINVAL,
                                 "--policy '%s': unknown part '%.*s' (expected " PART_LIST ")",
                                 text, (int)n, s);
        int rc = apply_part(pt, text, &seen, out, err);
        if (rc != 0)
            return rc;
        if (end == NULL)
            break;
        s = end + 1;
    }
    if (out->no_retry && (seen & ((1u << PART_WAIT) | (1u << PART_BUDGET))))
        return resil_err_set(err, RESIL_EINVAL,
                             "--policy '%s': noretry takes no wait and no budget", text);
    return 0;
}

/* Into a list of its own, so that a failure leaves c as it was and a
 * success replaces the whole list (a second --policy leaves no entry of
 * the first behind). */
int resil_sim_policies_parse(const char *text, resil_sim_config *c, resil_err *err)
{
    resil_sim_policy list[RESIL_SIM_MAX_POLICIES];
    size_t n = 0;
    memset(list, 0, sizeof list);
    for (const char *s = text; ; ) {
        const char *end = strchr(s, ',');
        size_t len = end != NULL ? (size_t)(end - s) : strlen(s);
        if (n == RESIL_SIM_MAX_POLICIES)
            return resil_err_set(err, RESIL_EINVAL, "--policy lists more than %d policies",
                                 RESIL_SIM_MAX_POLICIES);
        char one[sizeof list[0].name];
        if (len >= sizeof one)
            return resil_err_set(err, RESIL_EINVAL,
                                 "--policy '%.*s' is longer than %zu characters",
                                 (int)(len > 20 ? 20 : len), s, sizeof one - 1);
        memcpy(one, s, len);
        one[len] = '\0';
        int rc = resil_sim_policy_parse(one, &list[n], err);
        if (rc != 0)
            return rc;
        n++;
        if (end == NULL)
            break;
        s = end + 1;
    }
    memcpy(c->policies, list, sizeof list);
    c->npolicies = n;
    return 0;
}

/* ---- defaults ----------------------------------------------------------- */

static void set_policies(resil_sim_config *c, const char *list)
{
    int rc = resil_sim_policies_parse(list, c, NULL);
    (void)rc; /* the built-in lists are valid (tested) */
}

static void occ_defaults(resil_sim_config *c)
{
    c->runs = 100;
    c->clients = 100;
    c->base = RESIL_MS(5);
    c->cap = RESIL_S(2);
    set_policies(c, "none,exponential,full,equal,decorrelated");
}

static void failover_defaults(resil_sim_config *c)
{
    c->clients = 1000;
    c->rate = 1;
    c->layers = 3;
    c->attempts = 4;
    c->base = RESIL_S(2);
    c->outage_start = RESIL_S(10);
    c->outage = RESIL_S(20);
    c->capacity = 2000;
    set_policies(c, "noretry,naive,full,full+tokens,breaker");
}

static void metastable_defaults(resil_sim_config *c)
{
    c->rate = 280;
    c->layers = 1;
    c->attempts = 2;
    c->base = RESIL_S(1);
    c->outage_start = RESIL_S(10);
    c->outage = RESIL_S(10);
    c->capacity = 300;
    c->latency = RESIL_MS(150);
    c->slowdown = 10;
    c->timeout = RESIL_S(1);
    set_policies(c, "naive,full,tokens,quota,ratio,breaker,throttle");
}

/* A service of capacity / latency workers; the brownout doubles its
 * service time, halving its capacity. */
static void brownout_defaults(resil_sim_config *c)
{
    c->rate = 150;
    c->layers = 1;
    c->attempts = 1;
    c->outage_start = RESIL_S(30);
    c->outage = RESIL_S(30);
    c->capacity = 200;
    c->latency = RESIL_MS(100);
    c->timeout = RESIL_S(1);
    c->limit = 40;
    set_policies(c, "naive,static,vegas,gradient,aimd,throttle");
}

static void layers_defaults(resil_sim_config *c)
{
    c->rate = 10;
    c->layers = 3;
    c->attempts = 4;
    c->requests = 100;
    c->budget_at = RESIL_SIM_INNERMOST;
    c->base = RESIL_S(2);
    c->duration = RESIL_S(3600);
    c->outage_start = 0;
    c->outage = RESIL_S(3600);
    set_policies(c, "naive,tokens,quota,ratio");
}

void resil_sim_config_default(resil_sim_config *c, resil_sim_scenario s)
{
    memset(c, 0, sizeof *c);
    c->scenario = s;
    c->seed = 1;
    c->runs = 1;
    c->clients = 1;
    c->base = RESIL_S(1);
    c->cap = RESIL_S(30);
    c->net_mean = RESIL_MS(10);
    c->net_sd = RESIL_MS(2);
    c->rate = 1;
    c->layers = 1;
    c->attempts = 1;
    c->duration = RESIL_S(120);
    c->bin = RESIL_S(1);
    c->capacity = 1e9;
    c->latency = RESIL_MS(10);
    c->slowdown = 1;
    switch (s) {
    case RESIL_SIM_OCC:
        occ_defaults(c);
        break;
    case RESIL_SIM_FAILOVER:
        failover_defaults(c);
        break;
    case RESIL_SIM_METASTABLE:
        metastable_defaults(c);
        break;
    case RESIL_SIM_LAYERS:
        layers_defaults(c);
        break;
    case RESIL_SIM_BROWNOUT:
        brownout_defaults(c);
        break;
    }
}

/* ---- validation --------------------------------------------------------- */

static int check_u32(uint32_t v, uint32_t lo, uint32_t hi, const char *flag, resil_err *err)
{
    if (v < lo || v > hi)
        return resil_err_set(err, RESIL_EINVAL, "%s must be in [%u, %u], got %u", flag,
                             (unsigned)lo, (unsigned)hi, (unsigned)v);
    return 0;
}

static int check_double(double v, double lo, double hi, const char *flag, resil_err *err)
{
    if (!(v >= lo && v <= hi))
        return resil_err_set(err, RESIL_EINVAL, "%s must be in [%g, %g], got %g", flag, lo,
                             hi, v);
    return 0;
}

static int check_dur(resil_duration v, resil_duration lo, resil_duration hi,
                     const char *flag, resil_err *err)
{
    if (v >= lo && v <= hi)
        return 0;
    char a[32], b[32], got[32];
    resil_duration_format(lo, a, sizeof a);
    resil_duration_format(hi, b, sizeof b);
    if (v < 0)
        snprintf(got, sizeof got, "a negative duration");
    else
        resil_duration_format(v, got, sizeof got);
    return resil_err_set(err, RESIL_EINVAL, "%s must be in [%s, %s], got %s", flag, a, b, got);
}

static int check_occ_policy(const resil_sim_policy *p, resil_err *err)
{
    if (p->no_retry || p->has_budget || p->breaker || p->limit != RESIL_SIM_LIMIT_NONE ||
        p->throttle)
        return resil_err_set(err, RESIL_EINVAL,
                             "--policy '%s': occ clients retry until their write succeeds, "
                             "so only a wait applies (none, exponential, full, equal, "
                             "decorrelated)",
                             p->name);
    return 0;
}

/* A concurrency limit starts at --limit, which only brownout has. */
static int check_policy(const resil_sim_config *c, const resil_sim_policy *p, resil_err *err)
{
    if (c->scenario == RESIL_SIM_OCC)
        return check_occ_policy(p, err);
    if (p->limit != RESIL_SIM_LIMIT_NONE && c->scenario != RESIL_SIM_BROWNOUT)
        return resil_err_set(err, RESIL_EINVAL,
                             "--policy '%s': a concurrency limit (static, vegas, gradient, "
                             "aimd) applies only to brownout, whose --limit sets it",
                             p->name);
    return 0;
}

static int validate_occ(const resil_sim_config *c, resil_err *err)
{
    int rc;
    if ((rc = check_u32(c->clients, 1, 100000, "--clients", err)) != 0 ||
        (rc = check_dur(c->net_mean, 0, RESIL_S(60), "--net-mean", err)) != 0 ||
        (rc = check_dur(c->net_sd, 0, RESIL_S(60), "--net-sd", err)) != 0)
        return rc;
    return 0;
}

/* The worst case of one user request, attempts^layers, must stay countable. */
static int check_worst_case(const resil_sim_config *c, resil_err *err)
{
    double worst = pow((double)c->attempts, (double)c->layers);
    if (worst > 1e6)
        return resil_err_set(err, RESIL_EINVAL,
                             "--attempts^--layers must be at most 1000000 calls per request, "
                             "got %u^%u",
                             (unsigned)c->attempts, (unsigned)c->layers);
    return 0;
}

/* The dependency's workers, capacity × latency, must be a countable pool;
 * a limit starts somewhere the library's limiter accepts. */
static int validate_brownout(const resil_sim_config *c, resil_err *err)
{
    int rc;
    if ((rc = check_u32(c->limit, 1, 10000, "--limit", err)) != 0)
        return rc;
    double workers = c->capacity * (double)c->latency / 1e9;
    if (workers < 1 || workers > 100000)
        return resil_err_set(err, RESIL_EINVAL,
                             "--capacity × --latency must be 1 to 100000 workers, got %g",
                             workers);
    if (c->timeout == 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "--timeout must be > 0 for brownout: callers give up on a queue");
    return 0;
}

/* Metastable's outage is its trigger, and its flags say so. */
static const char *outage_flag(const resil_sim_config *c, bool start)
{
    if (c->scenario == RESIL_SIM_METASTABLE)
        return start ? "--trigger-start" : "--trigger";
    return start ? "--outage-start" : "--outage";
}

static int validate_stack(const resil_sim_config *c, resil_err *err)
{
    int rc;
    if ((rc = check_u32(c->clients, 1, 1000000, "--clients", err)) != 0 ||
        (rc = check_double(c->rate, 1e-3, 1e6, "--rate", err)) != 0 ||
        (rc = check_double(c->rate * (c->scenario == RESIL_SIM_FAILOVER ? c->clients : 1), 1e-3,
                           1e6, "--clients × --rate", err)) != 0 ||
        (rc = check_u32(c->layers, 1, 10, "--layers", err)) != 0 ||
        (rc = check_u32(c->attempts, 1, 100, "--attempts", err)) != 0 ||
        (rc = check_worst_case(c, err)) != 0 ||
        (c->budget_at != RESIL_SIM_INNERMOST &&
         (rc = check_u32(c->budget_at, 0, c->layers, "--budget-at", err)) != 0) ||
        (rc = check_u32(c->requests, 0, 10000000, "--requests", err)) != 0 ||
        (rc = check_dur(c->duration, RESIL_MS(1), RESIL_S(86400), "--duration", err)) != 0 ||
        (rc = check_dur(c->bin, RESIL_MS(1), c->duration, "--bin", err)) != 0 ||
        (rc = check_dur(c->outage_start, 0, c->duration, outage_flag(c, true), err)) != 0 ||
        (rc = check_dur(c->outage, 0, RESIL_S(86400), outage_flag(c, false), err)) != 0 ||
        (rc = check_double(c->capacity, 1e-3, 1e9, "--capacity", err)) != 0 ||
        (rc = check_dur(c->latency, 0, RESIL_S(60), "--latency", err)) != 0 ||
        (rc = check_double(c->slowdown, 1, 1e6, "--slowdown", err)) != 0 ||
        (rc = check_dur(c->timeout, 0, RESIL_S(3600), "--timeout", err)) != 0)
        return rc;
    if (c->duration / c->bin > 1000000)
        return resil_err_set(err, RESIL_EINVAL,
                             "--duration / --bin must be at most 1000000 bins");
    if (c->scenario != RESIL_SIM_LAYERS &&
        resil__sim_outage_end(c) >= c->duration) {
        char end[32];
        resil_duration_format(resil__sim_outage_end(c), end, sizeof end);
        return resil_err_set(err, RESIL_EINVAL,
                             "--duration must extend past the %s's end (%s), to see "
                             "whether it recovers",
                             c->scenario == RESIL_SIM_METASTABLE ? "trigger" : "outage", end);
    }
    if (c->scenario == RESIL_SIM_LAYERS && c->requests == 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "--requests must be >= 1 for layers, got 0");
    if (c->scenario == RESIL_SIM_METASTABLE && c->timeout == 0)
        return resil_err_set(err, RESIL_EINVAL,
                             "--timeout must be > 0 for metastable: a stalled database "
                             "never answers");
    return c->scenario == RESIL_SIM_BROWNOUT ? validate_brownout(c, err) : 0;
}

int resil_sim_config_validate(const resil_sim_config *c, resil_err *err)
{
    int rc;
    if ((size_t)c->scenario >= sizeof scenario_names / sizeof scenario_names[0])
        return resil_err_set(err, RESIL_EINVAL, "scenario must be occ, failover, metastable, "
                                                "layers or brownout, got %d", (int)c->scenario);
    if ((rc = check_u32(c->runs, 1, 1000000, "--runs", err)) != 0 ||
        (rc = check_dur(c->base, 0, RESIL_S(3600), "--base", err)) != 0 ||
        (rc = check_dur(c->cap, 0, RESIL_S(86400), "--cap", err)) != 0)
        return rc;
    if (c->npolicies == 0 || c->npolicies > RESIL_SIM_MAX_POLICIES)
        return resil_err_set(err, RESIL_EINVAL, "--policy must list 1 to %d policies, got %zu",
                             RESIL_SIM_MAX_POLICIES, c->npolicies);
    for (size_t i = 0; i < c->npolicies; i++) {
        if ((rc = check_policy(c, &c->policies[i], err)) != 0)
            return rc;
    }
    return c->scenario == RESIL_SIM_OCC ? validate_occ(c, err) : validate_stack(c, err);
}

/* ---- the mapping onto the library --------------------------------------- */

static resil_jitter jitter_of(resil_sim_wait w)
{
    switch (w) {
    case RESIL_SIM_WAIT_FULL:
        return RESIL_JITTER_FULL;
    case RESIL_SIM_WAIT_EQUAL:
        return RESIL_JITTER_EQUAL;
    case RESIL_SIM_WAIT_DECORRELATED:
        return RESIL_JITTER_DECORRELATED;
    default:
        return RESIL_JITTER_NONE;
    }
}

void resil__sim_backoff(const resil_sim_config *c, const resil_sim_policy *p,
                        resil_backoff *out)
{
    resil_sim_wait w = p->wait == RESIL_SIM_WAIT_DEFAULT ? resil__sim_default_wait(c->scenario)
                                                         : p->wait;
    resil_backoff_default(out);
    out->kind = RESIL_BACKOFF_EXPONENTIAL;
    out->factor = 2.0;
    out->jitter = jitter_of(w);
    out->max_delay = c->cap;
    out->base = c->scenario == RESIL_SIM_OCC ? resil_dur_mul(c->base, 2.0) : c->base;
    if (w == RESIL_SIM_WAIT_DECORRELATED)
        out->base = c->base;
    if (w == RESIL_SIM_WAIT_NONE) {
        out->kind = RESIL_BACKOFF_CONSTANT;
        out->base = 0;
    }
}

void resil__sim_retry_policy(const resil_sim_config *c, const resil_sim_policy *p,
                             resil_retry_policy *out)
{
    resil_retry_policy_default(out);
    out->max_attempts = p->no_retry ? 1 : c->attempts;
    resil__sim_backoff(c, p, &out->backoff);
    out->retry_after = RESIL_RETRY_AFTER_IGNORE;
    out->max_total = 0;
    out->budget = NULL;
}
