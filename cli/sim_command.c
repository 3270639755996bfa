/*
 * sim_command.c — `resil sim SCENARIO [flags]`: flags in, tables, JSON,
 * CSV and SVG out, over libresil_sim.
 *
 * The command is its own small library (resil_cli_sim), with its streams
 * passed in, so that tests run it in-process on memory streams and compare
 * bytes; the tool's cmd_sim.c only hands it stdout and stderr. Flags are one table
 * (name, the scenarios it applies to, how to parse it, where it goes), so a
 * flag is parsed, range-checked and rejected for the wrong scenario by one
 * mechanism, and every message names the flag as the user typed it. Bad
 * flags and values exit 125, like the rest of the tool.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "sim_command.h"
#include "model.h"

#define EXIT_USAGE 125
#define EXIT_FAILED 1

#define S_OCC (1u << RESIL_SIM_OCC)
#define S_FAIL (1u << RESIL_SIM_FAILOVER)
#define S_META (1u << RESIL_SIM_METASTABLE)
#define S_LAYERS (1u << RESIL_SIM_LAYERS)
#define S_BROWN (1u << RESIL_SIM_BROWNOUT)
#define S_STACK (S_FAIL | S_META | S_LAYERS | S_BROWN)
#define S_TIME (S_FAIL | S_META | S_BROWN)
#define S_ALL (S_OCC | S_STACK)

typedef struct options {
    resil_sim_config cfg;
    bool json, progress, help;
    const char *csv, *svg;
} options;

typedef enum flag_type { F_U32, F_U64, F_DOUBLE, F_DURATION, F_STRING, F_BOOL, F_POLICY,
                         F_BUDGET_AT } flag_type;

typedef struct flag {
    const char *name;
    unsigned scenarios;
    flag_type type;
    size_t offset; /* into options */
} flag;

#define CFG(field) (offsetof(options, cfg) + offsetof(resil_sim_config, field))
#define OPT(field) offsetof(options, field)

static const flag flags[] = {
    {"--policy", S_ALL, F_POLICY, 0},
    {"--seed", S_ALL, F_U64, CFG(seed)},
    {"--runs", S_ALL, F_U32, CFG(runs)},
    {"--json", S_ALL, F_BOOL, OPT(json)},
    {"--csv", S_ALL, F_STRING, OPT(csv)},
    {"--svg", S_ALL, F_STRING, OPT(svg)},
    {"--progress", S_ALL, F_BOOL, OPT(progress)},
    {"--help", S_ALL, F_BOOL, OPT(help)},
    {"-h", S_ALL, F_BOOL, OPT(help)},
    {"--base", S_ALL, F_DURATION, CFG(base)},
    {"--cap", S_ALL, F_DURATION, CFG(cap)},
    {"--clients", S_OCC | S_FAIL, F_U32, CFG(clients)},
    {"--net-mean", S_OCC, F_DURATION, CFG(net_mean)},
    {"--net-sd", S_OCC, F_DURATION, CFG(net_sd)},
    {"--rate", S_STACK, F_DOUBLE, CFG(rate)},
    {"--layers", S_STACK, F_U32, CFG(layers)},
    {"--attempts", S_STACK, F_U32, CFG(attempts)},
    {"--budget-at", S_STACK, F_BUDGET_AT, CFG(budget_at)},
    {"--requests", S_STACK, F_U32, CFG(requests)},
    {"--duration", S_TIME, F_DURATION, CFG(duration)},
    {"--bin", S_TIME, F_DURATION, CFG(bin)},
    {"--outage", S_TIME, F_DURATION, CFG(outage)},
    {"--outage-start", S_TIME, F_DURATION, CFG(outage_start)},
    {"--trigger", S_META, F_DURATION, CFG(outage)},
    {"--trigger-start", S_META, F_DURATION, CFG(outage_start)},
    {"--capacity", S_TIME, F_DOUBLE, CFG(capacity)},
    {"--latency", S_TIME, F_DURATION, CFG(latency)},
    {"--timeout", S_TIME, F_DURATION, CFG(timeout)},
    {"--slowdown", S_META, F_DOUBLE, CFG(slowdown)},
    {"--limit", S_BROWN, F_U32, CFG(limit)},
};

static const char usage_text[] =
    "usage: resil sim SCENARIO [flags]\n"
    "\n"
    "A deterministic discrete-event simulation of what retry policies do to a\n"
    "struggling service, using resil's own backoff, retry, budget and breaker code.\n"
    "\n"
    "scenarios:\n"
    "  occ         N clients contend to write one row (Brooker, \"Exponential Backoff\n"
    "              And Jitter\", AWS Architecture Blog 2015): calls and completion time\n"
    "  failover    a dependency fails every call for --outage under layered retries;\n"
    "              load multiplier, recovery, whether it stays down\n"
    "  metastable  Bronson et al. (HotOS 2021): a database slower above capacity, one\n"
    "              retry after a timeout, a short trigger; does it recover?\n"
    "  layers      retry amplification: attempts^layers calls per request, and what a\n"
    "              budget in one layer does to it\n"
    "  brownout    a dependency's capacity halves for a while under open-loop load:\n"
    "              static and adaptive concurrency limits and throttling compared by\n"
    "              goodput, p99 latency and time to recover\n"
    "\n"
    "policies (--policy P[,P...]): each P joins parts with '+':\n"
    "  a wait       none | exponential | full | equal | decorrelated | naive\n"
    "  noretry      one attempt per layer\n"
    "  a budget     tokens (gRPC) | quota (AWS) | ratio (Finagle)\n"
    "  breaker      the library's default circuit breaker in every layer\n"
    "  a limit      static (fixed at --limit) | vegas | gradient | aimd: the\n"
    "               library's adaptive concurrency limiter, starting at --limit\n"
    "  throttle     client-side adaptive throttling (the SRE book's, K = 2)\n"
    "  e.g. --policy naive,full,full+tokens,breaker\n"
    "\n"
    "common flags:\n"
    "  --seed N          random seed (default 1): the same seed gives the same output\n"
    "  --runs R          runs averaged per policy (occ 100, others 1)\n"
    "  --json            one JSON object per policy per line instead of the table\n"
    "  --csv FILE        write the figures as CSV ('-' = standard output)\n"
    "  --svg FILE        write a chart as SVG ('-' = standard output)\n"
    "  --progress        progress on stderr even when it is not a terminal\n"
    "  --base D --cap D  backoff base and cap (occ 5ms/2s; failover, layers 2s/30s;\n"
    "                    metastable, brownout 1s/30s)\n"
    "\n"
    "occ:        --clients N (100)  --net-mean D (10ms)  --net-sd D (2ms)\n"
    "failover:   --clients N (1000)  --rate R per client (1/s)  --layers N (3)\n"
    "            --attempts N (4)  --outage D (20s)  --outage-start D (10s)\n"
    "            --capacity C calls/s (2000)  --latency D (10ms)  --timeout D (none)\n"
    "            --duration D (120s)  --bin D (1s)  --budget-at all|innermost|N (all)\n"
    "metastable: --rate R (280/s)  --capacity C (300/s)  --latency D (150ms)\n"
    "            --slowdown X (10)  --timeout D (1s)  --attempts N (2)\n"
    "            --trigger D (10s)  --trigger-start D (10s)  --duration D (120s)\n"
    "layers:     --layers N (3)  --attempts N (4)  --requests N (100)  --rate R (10/s)\n"
    "            --budget-at all|innermost|N (innermost)\n"
    "brownout:   --rate R (150/s)  --capacity C (200/s)  --latency D (100ms: the\n"
    "            service time; capacity × latency workers)  --timeout D (1s)\n"
    "            --outage D (30s: half the capacity)  --outage-start D (30s)\n"
    "            --limit N (40)  --attempts N (1)  --duration D (120s)\n"
    "Every scenario but occ runs the same model of layered services, and takes\n"
    "its flags: --rate, --layers, --attempts, --budget-at, --requests (at most\n"
    "that many requests); failover, metastable and brownout also take --duration,\n"
    "--bin, --outage, --outage-start, --capacity, --latency and --timeout.\n"
    "\n"
    "Durations: 250ms, 2s, 1m30s. Bad flags or values exit 125.\n";

/* ---- parsing one value ---------------------------------------------------- */

/*
 * The flags are read with the tool's option cursor (cli/args.h), like every
 * other subcommand's, so they take the same forms and are refused in the
 * same words. The cursor keeps each message (a->err) and report() writes it
 * to the command's own stream, which the tests read.
 */
static int report(const args *a, FILE *errout)
{
    fprintf(errout, "%s\n", a->err->message);
    return EXIT_USAGE;
}

static int bad(const args *a, FILE *errout, const char *fmt, ...) RESIL_PRINTF(3, 4);

static int bad(const args *a, FILE *errout, const char *fmt, ...)
{
    char msg[sizeof a->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    args_fail(a, "%s", msg);
    return report(a, errout);
}

/* A decimal number as a user types one: strtod's liberties (leading
 * spaces, hexadecimal, "inf", "nan") are refused, as the tool's other
 * numbers refuse them. */
static bool parse_double(const char *s, double *out)
{
    const char *t = *s == '+' || *s == '-' ? s + 1 : s;
    if (!((*t >= '0' && *t <= '9') || *t == '.') || strpbrk(t, "xX") != NULL)
        return false;
    errno = 0;
    char *end;
    double d = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(d))
        return false;
    *out = d;
    return true;
}

static int parse_budget_at(const char *value, uint32_t *out)
{
    uint64_t v;
    if (strcmp(value, "all") == 0)
        *out = 0;
    else if (strcmp(value, "innermost") == 0)
        *out = RESIL_SIM_INNERMOST;
    else if (args_whole(value, &v) && v >= 1 && v <= 10)
        *out = (uint32_t)v;
    else
        return RESIL_EINVAL;
    return 0;
}

static int set_value(options *o, const args *a, const flag *fl, const char *value,
                     FILE *errout)
{
    char *p = (char *)o + fl->offset;
    uint64_t u;
    switch (fl->type) {
    case F_U32:
        if (!args_whole(value, &u) || u > UINT32_MAX)
            return args_reject(a, fl->name, "a whole number", value), report(a, errout);
        *(uint32_t *)p = (uint32_t)u;
        return 0;
    case F_U64:
        if (!args_whole(value, &u))
            return args_reject(a, fl->name, "a whole number", value), report(a, errout);
        *(uint64_t *)p = u;
        return 0;
    case F_DOUBLE:
        if (!parse_double(value, (double *)p))
            return args_reject(a, fl->name, "a number", value), report(a, errout);
        return 0;
    case F_DURATION:
        if (args_duration(a, fl->name, value, false, (resil_duration *)p) != 0)
            return report(a, errout);
        return 0;
    case F_STRING:
        if (*value == '\0')
            return args_reject(a, fl->name, "a file name", value), report(a, errout);
        *(const char **)p = value;
        return 0;
    case F_BUDGET_AT:
        if (parse_budget_at(value, (uint32_t *)p) != 0)
            return args_reject(a, fl->name, "all, innermost or a layer number 1-10", value),
                   report(a, errout);
        return 0;
    case F_POLICY: {
        resil_err err = {0, ""};
        if (resil_sim_policies_parse(value, &o->cfg, &err) != 0)
            return bad(a, errout, "%s", err.message);
        return 0;
    }
    case F_BOOL:
        *(bool *)p = true;
        return 0;
    }
    return EXIT_USAGE;
}

/* ---- parsing the command line --------------------------------------------- */

static const flag *find_flag(const char *arg, size_t len)
{
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, arg, len) == 0)
            return &flags[i];
    }
    return NULL;
}

/* One flag at the cursor: "--name value" or "--name=value". */
static int parse_flag(options *o, args *a, FILE *errout)
{
    const char *arg = a->argv[a->i];
    const char *eq = strchr(arg, '=');
    size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
    const flag *fl = find_flag(arg, len);
    if (fl == NULL)
        return bad(a, errout, "unknown flag '%s' (see resil sim --help)", arg);
    if (!(fl->scenarios & (1u << o->cfg.scenario)))
        return bad(a, errout, "%s does not apply to %s", fl->name,
                   resil_sim_scenario_name(o->cfg.scenario));
    if (fl->type == F_BOOL) {
        if (eq != NULL)
            return bad(a, errout, "%s takes no value, got '%s'", fl->name, eq + 1);
        return set_value(o, a, fl, "", errout);
    }
    const char *value = NULL;
    if (args_match(a, fl->name, NULL, &value) != 1)
        return report(a, errout);
    return set_value(o, a, fl, value, errout);
}

static int parse_args(options *o, int argc, char **argv, FILE *errout)
{
    memset(o, 0, sizeof *o);
    if (argc < 2) {
        fputs(usage_text, errout);
        return EXIT_USAGE;
    }
    if (args_is_help(argv[1])) {
        o->help = true;
        return 0;
    }
    resil_err msg = {0, ""};
    args a;
    args_init(&a, "resil sim", argc, argv);
    a.err = &msg;
    resil_sim_scenario s;
    if (resil_sim_scenario_parse(argv[1], &s) != 0)
        return bad(&a, errout, "unknown scenario '%s' (expected occ, failover, metastable, "
                               "layers or brownout)",
                   argv[1]);
    resil_sim_config_default(&o->cfg, s);
    for (a.i = 2; a.i < argc; a.i++) {
        int rc = parse_flag(o, &a, errout);
        if (rc != 0)
            return rc;
    }
    resil_err err = {0, ""};
    if (!o->help && resil_sim_config_validate(&o->cfg, &err) != 0) {
        fprintf(errout, "resil sim: %s\n", err.message);
        return EXIT_USAGE;
    }
    return 0;
}

/* ---- progress ------------------------------------------------------------- */

typedef struct progress_state {
    FILE *errout;
    const char *scenario;
    int last;
} progress_state;

static void show_progress(const resil_sim_policy *p, double done, void *ud)
{
    progress_state *ps = ud;
    int pct = (int)(done * 100);
    if (pct == ps->last)
        return;
    ps->last = pct;
    fprintf(ps->errout, "\rresil sim %s: %-24s %3d%%", ps->scenario, p->name, pct);
    fflush(ps->errout);
}

static bool wants_progress(const options *o, FILE *errout)
{
    return o->progress || isatty(fileno(errout));
}

/* ---- running and writing -------------------------------------------------- */

typedef int (*writer_fn)(FILE *f, const resil_sim_config *c, const resil_sim_result *r,
                         size_t n);

/* An output named by --csv/--svg PATH ("-": standard output). It is
 * opened before the simulation runs, so that a path that cannot be
 * written is said at once, not after minutes of simulating; and it is
 * written beside its path under a temporary name and renamed over it only
 * once complete, so that a failed run, or the other output's path being
 * refused, leaves the file that was there untouched. A symbolic link is
 * followed: the file it names is the one replaced. */
typedef struct output {
    const char *option;
    char path[PATH_MAX]; /* the file to replace; "" for none or "-" */
    char tmp[PATH_MAX + 8];
    FILE *f;
} output;

static mode_t new_file_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* Where the output goes and the mode it gets; errno set when it cannot go. */
static bool place_output(output *o, const char *path, mode_t *mode)
{
    struct stat st;
    *mode = new_file_mode();
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        if (realpath(path, o->path) == NULL)
            return false;
    } else if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path) {
        errno = ENAMETOOLONG;
        return false;
    }
    if (stat(o->path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            errno = EISDIR;
            return false;
        }
        *mode = st.st_mode & 07777;
    }
    snprintf(o->tmp, sizeof o->tmp, "%s.XXXXXX", o->path);
    return true;
}

static int open_output(output *o, const char *option, const char *path, FILE *out,
                       FILE *errout)
{
    *o = (output){.option = option};
    if (path == NULL)
        return 0;
    if (strcmp(path, "-") == 0) {
        o->f = out;
        return 0;
    }
    mode_t mode;
    int fd = place_output(o, path, &mode) ? mkstemp(o->tmp) : -1;
    if (fd >= 0 && (fchmod(fd, mode) != 0 || (o->f = fdopen(fd, "w")) == NULL)) {
        int saved = errno;
        close(fd);
        unlink(o->tmp);
        errno = saved;
        fd = -1;
    }
    if (fd < 0) {
        fprintf(errout, "resil sim: %s: cannot write '%s': %s\n", option, path, strerror(errno));
        o->tmp[0] = '\0';
        return EXIT_FAILED;
    }
    return 0;
}

/* Give up an output: the file at its path stays as it was. */
static void discard_output(output *o, FILE *out)
{
    if (o->f != NULL && o->f != out)
        fclose(o->f);
    if (o->tmp[0] != '\0')
        unlink(o->tmp);
    o->f = NULL;
    o->tmp[0] = '\0';
}

/* What `w` writes on standard output, flushed there, so that standard
 * output refusing it is said with the first failure's reason; `option`
 * names the output that took standard output (NULL: the table). */
static int write_stdout(writer_fn w, const options *opts, const resil_sim_result *r, FILE *out,
                        const char *option, FILE *errout)
{
    errno = 0;
    int rc = w(out, &opts->cfg, r, opts->cfg.npolicies);
    int err = rc != 0 ? errno : 0;
    if (rc == 0 && fflush(out) == 0)
        return 0;
    if (rc == 0)
        err = errno;
    fprintf(errout, "resil sim: %s%scannot write standard output: %s\n",
            option != NULL ? option : "", option != NULL ? ": " : "",
            strerror(err != 0 ? err : EIO));
    return EXIT_FAILED;
}

static int write_output(output *o, writer_fn w, const options *opts, const resil_sim_result *r,
                        FILE *out, FILE *errout)
{
    if (o->f == NULL)
        return 0;
    if (o->f == out)
        return write_stdout(w, opts, r, out, o->option, errout);
    errno = 0;
    int rc = w(o->f, &opts->cfg, r, opts->cfg.npolicies);
    int err = rc != 0 ? errno : 0; /* the first failure's reason */
    FILE *f = o->f;
    o->f = NULL;
    bool written = rc == 0;
    if (fclose(f) != 0 && written) {
        written = false;
        err = errno;
    }
    if (written && rename(o->tmp, o->path) != 0) {
        written = false;
        err = errno;
    }
    if (!written) {
        fprintf(errout, "resil sim: %s: cannot write '%s': %s\n", o->option, o->path,
                strerror(err != 0 ? err : EIO));
        discard_output(o, out);
        return EXIT_FAILED;
    }
    o->tmp[0] = '\0';
    return 0;
}

/* Where a file output's directory is: its device and inode, in *st. */
static bool stat_dir_of(const char *path, struct stat *st)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return stat(".", st) == 0;
    char dir[PATH_MAX];
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, len);
    dir[len] = '\0';
    return stat(dir, st) == 0;
}

static const char *file_name_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* Two file outputs with one name in one directory are one file, however
 * their paths are spelled ("x.svg", "./x.svg", a link to it): the second
 * written would replace the first. */
static bool same_file(const output *a, const output *b)
{
    if (a->tmp[0] == '\0' || b->tmp[0] == '\0' ||
        strcmp(file_name_of(a->path), file_name_of(b->path)) != 0)
        return false;
    struct stat da, db;
    return stat_dir_of(a->path, &da) && stat_dir_of(b->path, &db) && da.st_dev == db.st_dev &&
           da.st_ino == db.st_ino;
}

static int run_policies(const options *o, resil_sim_result *r, FILE *errout)
{
    progress_state ps = {errout, resil_sim_scenario_name(o->cfg.scenario), -1};
    bool show = wants_progress(o, errout);
    for (size_t i = 0; i < o->cfg.npolicies; i++) {
        resil_err err = {0, ""};
        ps.last = -1;
        int rc = resil_sim_run(&o->cfg, &o->cfg.policies[i], show ? show_progress : NULL, &ps,
                               &r[i], &err);
        if (rc != 0) {
            if (show)
                fputc('\n', errout);
            fprintf(errout, "resil sim: %s\n", err.message);
            return rc == RESIL_EINVAL ? EXIT_USAGE : EXIT_FAILED;
        }
    }
    if (show)
        fprintf(errout, "\r%-60s\r", "");
    return 0;
}

static bool is_stdout(const char *path)
{
    return path != NULL && strcmp(path, "-") == 0;
}

/* The table (or JSON) on standard output, unless --csv or --svg took it:
 * a CSV or SVG written there must be the whole of it. Each output is
 * written whatever became of the others: a full standard output does not
 * cost the file named by --csv. */
static int emit(const options *o, const resil_sim_result *r, output *csv, output *svg,
                FILE *out, FILE *errout)
{
    bool taken = is_stdout(o->csv) || is_stdout(o->svg);
    writer_fn table = o->json ? resil_sim_write_json : resil_sim_write_text;
    int rc = taken ? 0 : write_stdout(table, o, r, out, NULL, errout);
    int rc2 = write_output(csv, resil_sim_write_csv, o, r, out, errout);
    int rc3 = write_output(svg, resil_sim_write_svg, o, r, out, errout);
    return rc != 0 ? rc : rc2 != 0 ? rc2 : rc3;
}

int resil_sim_command_parse(int argc, char **argv, resil_sim_config *out, FILE *errout)
{
    options o;
    int rc = parse_args(&o, argc, argv, errout);
    if (rc != 0)
        return rc;
    *out = o.cfg;
    return o.help ? 1 : 0;
}

int resil_sim_command(int argc, char **argv, FILE *out, FILE *errout)
{
    options o;
    int rc = parse_args(&o, argc, argv, errout);
    if (rc != 0)
        return rc;
    if (o.help) {
        fputs(usage_text, out);
        return 0;
    }
    if (is_stdout(o.csv) && is_stdout(o.svg)) {
        fprintf(errout, "resil sim: --csv and --svg cannot both be '-' (standard output)\n");
        return EXIT_USAGE;
    }
    output csv, svg;
    if (open_output(&csv, "--csv", o.csv, out, errout) != 0)
        return EXIT_FAILED;
    if (open_output(&svg, "--svg", o.svg, out, errout) != 0) {
        discard_output(&csv, out);
        return EXIT_FAILED;
    }
    if (same_file(&csv, &svg)) {
        fprintf(errout, "resil sim: --csv and --svg name the same file '%s': the chart would "
                        "replace the figures\n",
                o.svg);
        discard_output(&csv, out);
        discard_output(&svg, out);
        return EXIT_USAGE;
    }
    resil_sim_result r[RESIL_SIM_MAX_POLICIES];
    memset(r, 0, sizeof r);
    rc = run_policies(&o, r, errout);
    if (rc == 0)
        rc = emit(&o, r, &csv, &svg, out, errout);
    discard_output(&csv, out);
    discard_output(&svg, out);
    for (size_t i = 0; i < o.cfg.npolicies; i++)
        resil_sim_result_free(&r[i]);
    return rc;
}
