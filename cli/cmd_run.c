/*
 * cmd_run.c — `resil run [OPTIONS] -- COMMAND [ARG...]`: run a command,
 * retrying it under a policy.
 *
 * The command is the operation of the library's own executor
 * (resil_retry_execute): each attempt spawns the command and turns how it
 * ended into an outcome, and the executor makes every decision — retry,
 * wait, stop and why — exactly as it does for a library caller. The tool
 * adds only what a process needs: the exit-code classification, the attempt
 * timeout enforced by killing the process group, and signals turned into
 * the executor's cancellation (see process.h). So `resil run` is also the
 * executor's most direct end-to-end test.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt_log.h"
#include "commands.h"
#include "chaos_opts.h"
#include "heartbeat.h"
#include "policy_opts.h"
#include "process.h"
#include "telemetry_out.h"

#define EXIT_TIMEOUT 124 /* as timeout(1) */

typedef struct run_opts {
    policy_opts po;
    chaos_opts chaos;
    resil_duration kill_after;
    code_set retry_on, stop_on;
    log_format log;
    const char *log_file;     /* --log-file: the record appended there */
    resil_duration heartbeat; /* --heartbeat; -1: the default */
    bool dry_run;
    telemetry_out tel;        /* --metrics, --otlp */
    char **command;
} run_opts;

/* What one execution shares with its attempts (the executor's `user`). */
typedef struct run_state {
    const run_opts *opts;
    sig_clock clock;
    child_result last; /* the attempt the executor is deciding about */
    bool started;      /* ... and whether its command was started at all */
    bool injected;     /* ... or a chaos fault stood in for it */
    bool handled;      /* ... and whether its failure is one the policy retries */
    attempt_log log;
    telemetry_out *tel;
    const resil_exec_trace *trace; /* the execution's span, when exporting spans */
    resil_exec_trace span;
    resil_duration waited; /* the wait before the attempt being reported */
} run_state;

static void usage(FILE *out)
{
    fputs("usage: resil run [OPTIONS] -- COMMAND [ARG...]\n"
          "\n"
          "Run COMMAND; when it fails, wait and run it again under a retry "
          "policy.\n"
          "\n",
          out);
    policy_opts defaults;
    policy_opts_default(&defaults);
    policy_opts_usage(out, &defaults);
    fputs("\n"
          "attempts:\n"
          "      --kill-after DUR       a timed-out attempt gets SIGTERM, then "
          "SIGKILL\n"
          "                             this much later (default 5s)\n"
          "      --retry-on CODES       retry only these exit codes (a comma "
          "list such\n"
          "                             as 1,75); any other failure stops the "
          "run\n"
          "      --stop-on CODES        these exit codes stop the run, as 126 "
          "and 127 do\n"
          "\n",
          out);
    fputs(chaos_opts_help, out);
    fputs("\n", out);
    fputs(telemetry_out_help, out);
    fputs("\n"
          "output:\n"
          "      --log text|json|none   the attempt record, on stderr (default "
          "text);\n"
          "                             each line timed (UTC) and marked 'resil:';\n"
          "                             json: an object per attempt, then\n"
          "                             {\"stop\":REASON,\"attempts\":N}, each with\n"
          "                             \"time\" and \"command\"\n"
          "      --log-file FILE        append the attempt record to FILE instead\n"
          "      --heartbeat DUR|none   during a longer wait, a line every DUR\n"
          "                             (default: 10s on a terminal, else none)\n"
          "      --dry-run              print the waits the policy would use if "
          "every\n"
          "                             attempt failed, and run nothing; with "
          "jitter,\n"
          "                             the largest possible waits, or with "
          "--seed the\n"
          "                             very waits that seed draws\n"
          "  -h, --help                 this text\n"
          "\n"
          "Exit code 0 is success. A death by signal, a timeout and any other "
          "exit\n"
          "code are retried, except 126 (cannot run) and 127 (not found). A "
          "death\n"
          "by signal N counts as exit code 128+N for --retry-on and "
          "--stop-on.\n"
          "\n"
          "Each attempt runs in its own process group: a timeout, or a SIGINT, "
          "SIGTERM\n"
          "or SIGHUP sent to resil, reaches the whole group. Standard input goes "
          "to\n"
          "the first attempt only; later attempts read /dev/null, since the "
          "first\n"
          "has consumed it. A command that reads the terminal is stopped by "
          "it\n"
          "(SIGTTIN), as any background job is. Each attempt finds its number in\n"
          "RESIL_ATTEMPT (1 for the first) and the most there will be in\n"
          "RESIL_ATTEMPTS (or 'forever').\n"
          "\n"
          "exit status:\n"
          "  0            the command succeeded\n"
          "  N            the last attempt's exit code when the run stopped on "
          "a failure\n"
          "               (128+N after a death by signal N; 126 and 127 as a "
          "shell's)\n"
          "  124          a timeout (--attempt-timeout, --total-timeout) ended "
          "the run\n"
          "  125          resil's own error, such as a bad option value\n"
          "  129/130/143  resil was cancelled by SIGHUP/SIGINT/SIGTERM\n",
          out);
}

/* ---- options ------------------------------------------------------------- */

static int parse_log(const args *a, const char *text, log_format *out)
{
    if (attempt_log_format_parse(text, out) != 0)
        return args_reject(a, "--log", "one of text, json, none", text);
    return 0;
}

/* A parser's 0 as "the option was consumed". */
static int consumed(int rc) { return rc < 0 ? rc : 1; }

/* One option of ours at a->i: 1 consumed, 0 unknown, <0 bad value. */
static int parse_run_option(run_opts *o, args *a)
{
    const char *v;
    int m;
    if ((m = args_match(a, "--kill-after", NULL, &v)) != 0)
        return m < 0 ? m : consumed(args_duration(a, "--kill-after", v, true, &o->kill_after));
    if ((m = args_match(a, "--retry-on", NULL, &v)) != 0)
        return m < 0 ? m : consumed(exit_codes_parse(a, "--retry-on", v, &o->retry_on));
    if ((m = args_match(a, "--stop-on", NULL, &v)) != 0)
        return m < 0 ? m : consumed(exit_codes_parse(a, "--stop-on", v, &o->stop_on));
    if ((m = args_match(a, "--log", NULL, &v)) != 0)
        return m < 0 ? m : consumed(parse_log(a, v, &o->log));
    if ((m = args_match(a, "--log-file", NULL, &v)) != 0)
        return m < 0 ? m : consumed(args_nonempty(a, "--log-file", "a file name", v, &o->log_file));
    if ((m = args_match(a, "--heartbeat", NULL, &v)) != 0)
        return m < 0 ? m : consumed(args_timeout(a, "--heartbeat", v, &o->heartbeat));
    if (args_flag(a, "--dry-run", NULL)) {
        o->dry_run = true;
        return 1;
    }
    int rc = chaos_opts_parse(&o->chaos, a);
    if (rc == 0)
        rc = telemetry_out_parse(&o->tel, a);
    if (rc != 0)
        return rc;
    return policy_opts_parse(&o->po, a);
}

/* 0 to run, 1 when --help was printed, or RESIL_EINVAL. */
static int parse_options(run_opts *o, int argc, char **argv)
{
    args a;
    args_init(&a, "resil run", argc, argv);
    memset(o, 0, sizeof *o);
    policy_opts_default(&o->po);
    chaos_opts_default(&o->chaos);
    o->kill_after = RESIL_S(5);
    o->log = LOG_TEXT;
    o->heartbeat = -1;
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (strcmp(arg, "--") == 0) {
            o->command = argv + a.i + 1;
            break;
        }
        if (args_flag(&a, "--help", "-h")) {
            usage(stdout);
            return 1;
        }
        int rc = parse_run_option(o, &a);
        if (rc < 0)
            return rc;
        if (rc == 0 && arg[0] == '-')
            return args_fail(&a, "unknown option '%s' (see resil run --help)", arg);
        if (rc == 0) {
            o->command = argv + a.i; /* the command, without "--" */
            break;
        }
    }
    if (o->command == NULL || o->command[0] == NULL)
        return args_fail(&a, "no command given: resil run [OPTIONS] -- COMMAND "
                             "[ARG...]");
    return policy_opts_finish(&o->po, &a);
}

/* ---- one attempt ---------------------------------------------------------- */

static resil_kind classify_exit(const run_opts *o, int status)
{
    if (status == 0)
        return RESIL_SUCCESS;
    if (o->stop_on.has[status & 255])
        return RESIL_PERMANENT;
    if (o->retry_on.given)
        return o->retry_on.has[status & 255] ? RESIL_TRANSIENT : RESIL_PERMANENT;
    return status == 126 || status == 127 ? RESIL_PERMANENT : RESIL_TRANSIENT;
}

static resil_outcome classify(const run_opts *o, const child_result *r)
{
    if (r->cancel_signal != 0)
        return resil_fail(RESIL_CANCELLED, r->status, "cancelled");
    if (r->timed_out || r->deadline)
        return resil_fail(RESIL_TIMEOUT, r->status, "timed out");
    resil_kind k = classify_exit(o, r->status);
    return k == RESIL_SUCCESS ? resil_ok() : resil_fail(k, r->status, NULL);
}

/* The command learns which attempt it is: RESIL_ATTEMPT (1 for the first)
 * and RESIL_ATTEMPTS (the most there will be, or "forever"). */
static void export_attempt(uint32_t attempt, uint32_t max)
{
    char n[16], of[16];
    snprintf(n, sizeof n, "%u", attempt);
    if (max == RESIL_ATTEMPTS_FOREVER)
        snprintf(of, sizeof of, "forever");
    else
        snprintf(of, sizeof of, "%u", max);
    setenv("RESIL_ATTEMPT", n, 1);
    setenv("RESIL_ATTEMPTS", of, 1);
}

/* With spans exported, the command continues the trace: TRACEPARENT (the
 * name OpenTelemetry's environment propagation uses) names its attempt's
 * span as the parent. */
static void export_traceparent(const run_state *rs, uint32_t attempt)
{
    if (rs->trace == NULL)
        return;
    resil_span_context c;
    char text[RESIL_TRACEPARENT_LEN + 1];
    resil_exec_trace_attempt(rs->trace, attempt, 0, &c);
    resil_traceparent_format(&c, text, sizeof text);
    setenv("TRACEPARENT", text, 1);
}

static resil_outcome run_child(resil_attempt_ctx *ctx)
{
    run_state *rs = ctx->user;
    const run_opts *o = rs->opts;
    if (sig_clock_poll(&rs->clock)) {
        rs->last.cancel_signal = rs->clock.signo;
        rs->last.status = 128 + rs->clock.signo;
        return resil_fail(RESIL_CANCELLED, rs->last.status, "cancelled");
    }
    export_attempt(ctx->attempt, o->po.policy.max_attempts);
    export_traceparent(rs, ctx->attempt);
    child_spec spec = {
        .argv = o->command,
        .null_stdin = ctx->attempt > 1,
        .timeout = o->po.attempt_timeout,
        .deadline = ctx->deadline, /* --total-timeout, as the executor keeps it */
        .kill_after = o->kill_after,
    };
    rs->started = true;
    if (child_run(&rs->clock, &spec, &rs->last) != 0) {
        perror("resil run: waiting for the command");
        rs->last.status = 126;
        return resil_fail(RESIL_PERMANENT, 126, "wait failed");
    }
    if (rs->last.spawn_errno != 0)
        fprintf(stderr, "resil run: cannot run '%s': %s\n", o->command[0],
                strerror(rs->last.spawn_errno));
    return classify(o, &rs->last);
}

/* A failure the policy retries, as the pipeline's retry tells telemetry
 * (attempt.handled). */
static bool handled(const resil_retry_policy *p, const resil_outcome *o,
                    const resil_attempt_ctx *ctx)
{
    if (o->kind == RESIL_SUCCESS && !p->retry_on_results)
        return false;
    return p->retry_on != NULL ? p->retry_on(o, ctx, p->retry_on_ud)
                               : resil_retry_on_default(o, NULL);
}

static resil_outcome run_attempt(resil_attempt_ctx *ctx)
{
    run_state *rs = ctx->user;
    memset(&rs->last, 0, sizeof rs->last);
    rs->started = false;
    resil_outcome out = chaos_opts_run(&rs->opts->chaos, run_child, ctx, &rs->injected);
    if (rs->injected)
        rs->last.status = (int)out.code;
    rs->handled = handled(&rs->opts->po.policy, &out, ctx);
    return out;
}

/* ---- telemetry ------------------------------------------------------------- */

/*
 * The executor tells the tool each attempt as decided (on_attempt); for
 * --metrics and --otlp the tool reports the same decisions as the events a
 * pipeline's retry reports — an ATTEMPT, a RETRY when another follows, an
 * EXECUTION at the end — so a run's metrics and spans carry the names a
 * program's pipeline emits. The pipeline is called "run", the operation
 * is the command's name.
 */
static void run_event(const run_state *rs, resil_event *ev, resil_event_type type,
                      resil_strategy_kind reporter, resil_instant at, const resil_outcome *o)
{
    *ev = (resil_event){.type = type,
                        .severity = resil_event_severity(type, o),
                        .pipeline = "run",
                        .strategy = resil_strategy_name(reporter),
                        .key = rs->opts->command[0],
                        .at = at,
                        .delay = RESIL_NO_HINT,
                        .outcome = o,
                        .reason = "",
                        .from_name = "",
                        .to_name = "",
                        .trace = rs->trace};
}

static void report_attempt(run_state *rs, const resil_attempt_record *rec)
{
    if (rs->tel->metrics == NULL)
        return;
    resil_event ev;
    resil_instant end = resil_dur_add(rec->start, rec->duration);
    run_event(rs, &ev, RESIL_EVENT_ATTEMPT, RESIL_STRATEGY_RETRY, end, &rec->outcome);
    ev.attempt = rec->number;
    ev.duration = rec->duration;
    ev.stop = rec->stop;
    ev.handled = rs->handled;
    ev.delay = rs->waited;
    rs->waited = rec->wait;
    telemetry_out_on_event(&ev, rs->tel);
    if (rec->stop != RESIL_STOP_NONE)
        return;
    run_event(rs, &ev, RESIL_EVENT_RETRY, RESIL_STRATEGY_RETRY, end, &rec->outcome);
    ev.attempt = rec->number;
    ev.delay = rec->wait;
    ev.source = rec->source;
    telemetry_out_on_event(&ev, rs->tel);
}

static void report_execution(run_state *rs, resil_instant start, const resil_retry_result *res)
{
    if (rs->tel->metrics == NULL)
        return;
    resil_event ev;
    run_event(rs, &ev, RESIL_EVENT_EXECUTION, RESIL_STRATEGY_NONE,
              resil_dur_add(start, res->elapsed), &res->final);
    ev.attempt = res->attempts;
    ev.duration = res->elapsed;
    ev.stop = res->stop;
    telemetry_out_on_event(&ev, rs->tel);
}

/* A new trace whose root is the execution's span. */
static void begin_trace(run_state *rs)
{
    if (!telemetry_out_tracing(rs->tel))
        return;
    resil_trace_new(NULL, true, &rs->span.span);
    memset(rs->span.parent_id, 0, sizeof rs->span.parent_id);
    rs->trace = &rs->span;
}

/* ---- the record ----------------------------------------------------------- */

/* How the attempt ended, in words: "exit 1", "killed by SIGKILL", ... */
static void describe(const run_state *rs, char *buf, size_t cap)
{
    const child_result *r = &rs->last;
    char how[64];
    if (rs->injected) {
        snprintf(buf, cap, "injected failure (exit %d, not run)", r->status);
        return;
    }
    if (!rs->started) {
        snprintf(buf, cap, "cancelled by %s before it started",
                 signal_name(r->cancel_signal));
        return;
    }
    if (r->term_signal != 0)
        snprintf(how, sizeof how, "killed by %s", signal_name(r->term_signal));
    else
        snprintf(how, sizeof how, "exit %d", r->status);
    if (r->cancel_signal != 0)
        snprintf(buf, cap, "cancelled by %s (%s)", signal_name(r->cancel_signal), how);
    else if (r->deadline)
        snprintf(buf, cap, "total timeout (%s)", how);
    else if (r->timed_out)
        snprintf(buf, cap, "attempt timeout (%s)", how);
    else if (r->spawn_errno != 0)
        snprintf(buf, cap, "%s (%s)", how, r->status == 127 ? "not found" : "cannot run");
    else
        snprintf(buf, cap, "%s", how);
}

static void on_attempt(const resil_attempt_record *rec, void *ud)
{
    run_state *rs = ud;
    char what[160], extra[64];
    describe(rs, what, sizeof what);
    snprintf(extra, sizeof extra, "\"signal\":%d,\"timed_out\":%s",
             rs->last.term_signal,
             rs->last.timed_out || rs->last.deadline ? "true" : "false");
    attempt_log_attempt(&rs->log, rec, what, extra);
    report_attempt(rs, rec);
}

/* ---- the run -------------------------------------------------------------- */

static int exit_status(const run_state *rs, const resil_retry_result *res)
{
    switch (res->stop) {
    case RESIL_STOP_SUCCEEDED:
        return 0;
    case RESIL_STOP_CANCELLED:
        return 128 + (rs->clock.signo != 0 ? rs->clock.signo : SIGTERM);
    case RESIL_STOP_DEADLINE:
        return EXIT_TIMEOUT;
    default:
        break;
    }
    if (res->final.kind == RESIL_TIMEOUT)
        return EXIT_TIMEOUT;
    if (res->attempts == 0)
        return RESIL_EXIT_USAGE;
    return (int)(res->final.code & 255);
}

/* The command as one line for the JSON records, words joined by spaces. */
static void join_command(char **argv, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; argv[i] != NULL && n + 1 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i > 0 ? " " : "", argv[i]);
}

/* The run, once its record has somewhere to go and signals a token to
 * fire: every other resource is taken and given back here. */
static int run_with(run_opts *o, FILE *log, resil_cancel *cancel)
{
    char command[512];
    join_command(o->command, command, sizeof command);
    run_state rs = {.opts = o,
                    .tel = &o->tel,
                    .log = {.out = log, .format = o->log, .indent = "", .stamped = true,
                            .subject_key = "command",
                            .subject = command}};
    sig_clock_init(&rs.clock, cancel);
    if (chaos_opts_finish(&o->chaos, "resil run", &rs.clock.base,
                          resil_fail(RESIL_TRANSIENT, 1, "injected failure")) != 0)
        return RESIL_EXIT_USAGE;
    heartbeat_clock hb;
    heartbeat_init(&hb, &rs.clock.base,
                   o->heartbeat >= 0 ? o->heartbeat : heartbeat_default(&rs.log), &rs.log);
    if (telemetry_out_open(&o->tel, "resil run", &hb.base) != 0) {
        chaos_opts_free(&o->chaos);
        return RESIL_EXIT_USAGE;
    }
    begin_trace(&rs);
    resil_exec_opts xo = {
        .clock = &hb.base,
        .rng = policy_opts_rng(&o->po),
        .cancel = cancel,
        .deadline = RESIL_INSTANT_MAX,
        .on_attempt = on_attempt,
        .on_attempt_ud = &rs,
    };
    resil_instant start = resil_clock_now(&hb.base);
    resil_retry_result res;
    resil_err err;
    int rc = resil_retry_execute(&o->po.policy, &xo, run_attempt, &rs, &res, &err);
    int status = RESIL_EXIT_USAGE;
    if (rc != 0) {
        fprintf(stderr, "resil run: %s\n", err.message);
    } else {
        report_execution(&rs, start, &res);
        attempt_log_stop(&rs.log, res.stop, res.attempts, NULL);
        status = exit_status(&rs, &res);
    }
    /* The exit status is the command's: telemetry that could not be
     * written or sent is said on stderr, and changes nothing else. */
    telemetry_out_close(&o->tel, "resil run");
    chaos_opts_free(&o->chaos);
    return status;
}

/* The log file's one owner: opened here, closed here on every path. */
static int execute(run_opts *o)
{
    FILE *log = attempt_log_open("resil run", o->log_file);
    if (log == NULL)
        return RESIL_EXIT_USAGE;
    resil_cancel cancel;
    int status = RESIL_EXIT_USAGE;
    if (resil_cancel_init(&cancel, NULL) != 0) {
        fprintf(stderr, "resil run: cannot create the cancellation token\n");
    } else {
        status = run_with(o, log, &cancel);
        resil_cancel_destroy(&cancel);
    }
    if (log != stderr)
        fclose(log);
    return status;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse_options(&o, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : RESIL_EXIT_USAGE;
    if (o.dry_run) {
        policy_opts_print_schedule(&o.po, stdout);
        return 0;
    }
    if (sig_setup() != 0) {
        perror("resil run: blocking signals");
        return RESIL_EXIT_USAGE;
    }
    return execute(&o);
}
