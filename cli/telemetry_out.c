/*
 * telemetry_out.c — --metrics FILE and --otlp URL (see telemetry_out.h).
 *
 * Both outputs read one metrics sink: the file gets its Prometheus text
 * at exit, the exporter sends the same figures as OTLP, so the two never
 * disagree. The exporter takes its settings from the standard OTEL_*
 * variables first (headers, service name, resource), and --otlp then
 * names the endpoint, winning over any endpoint the environment gives.
 * Without libresil-otlp in the build, --otlp is refused by name.
 */
#include <errno.h>
#include <string.h>

#include "telemetry_out.h"

#ifdef RESIL_CLI_OTLP
#include "resil/otlp.h"
#endif

const char telemetry_out_help[] =
    "telemetry:\n"
    "      --metrics FILE         after the run, write its metrics (Prometheus\n"
    "                             text, OpenTelemetry names) to FILE ('-': stderr)\n"
    "      --otlp URL             export the metrics and a span per execution and\n"
    "                             attempt to the OTLP/HTTP endpoint URL (such as\n"
    "                             http://127.0.0.1:4318); OTEL_* variables apply\n";

int telemetry_out_metrics(telemetry_out *t, const args *a, const char *v)
{
    return args_nonempty(a, "--metrics", "a file name", v, &t->metrics_file);
}

#ifdef RESIL_CLI_OTLP
static bool http_url(const char *v)
{
    const char *rest = strncmp(v, "http://", 7) == 0    ? v + 7
                       : strncmp(v, "https://", 8) == 0 ? v + 8
                                                        : NULL;
    return rest != NULL && rest[0] != '\0' && rest[0] != '/';
}

int telemetry_out_otlp(telemetry_out *t, const args *a, const char *v)
{
    if (!http_url(v))
        return args_reject(a, "--otlp", "an http:// or https:// URL with a host", v);
    t->otlp_url = v;
    return 0;
}
#else
int telemetry_out_otlp(telemetry_out *t, const args *a, const char *v)
{
    (void)t;
    (void)v;
    return args_fail(a, "--otlp needs libresil-otlp, which this build of resil lacks");
}
#endif

static int consumed(int rc) { return rc < 0 ? rc : 1; }

int telemetry_out_parse(telemetry_out *t, args *a)
{
    const char *v;
    int m;
    if ((m = args_match(a, "--metrics", NULL, &v)) != 0)
        return m < 0 ? m : consumed(telemetry_out_metrics(t, a, v));
    if ((m = args_match(a, "--otlp", NULL, &v)) != 0)
        return m < 0 ? m : consumed(telemetry_out_otlp(t, a, v));
    return 0;
}

/* ---- the run ---------------------------------------------------------------- */

static void release(telemetry_out *t)
{
    if (t->metrics_out != NULL && t->metrics_out != stderr)
        fclose(t->metrics_out);
    t->metrics_out = NULL;
    resil_metrics_free(t->metrics);
    t->metrics = NULL;
}

static int open_file(telemetry_out *t, const char *tool)
{
    if (t->metrics_file == NULL)
        return 0;
    t->metrics_out = strcmp(t->metrics_file, "-") == 0 ? stderr : fopen(t->metrics_file, "w");
    if (t->metrics_out != NULL)
        return 0;
    fprintf(stderr, "%s: --metrics: cannot open '%s': %s\n", tool, t->metrics_file,
            strerror(errno));
    return RESIL_EINVAL;
}

#ifdef RESIL_CLI_OTLP
static int open_exporter(telemetry_out *t, const char *tool, resil_clock *clock)
{
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    resil_err err;
    if (resil_otlp_opts_from_env(&o, &err) != 0) {
        fprintf(stderr, "%s: --otlp: %s\n", tool, err.message);
        return RESIL_EINVAL;
    }
    o.endpoint = t->otlp_url;
    o.traces_endpoint = NULL;
    o.metrics_endpoint = NULL;
    if (o.service_name == NULL)
        o.service_name = "resil";
    o.metrics = t->metrics;
    if (resil_otlp_new(&o, &t->otlp, &err) != 0) {
        fprintf(stderr, "%s: --otlp: %s\n", tool, err.message);
        return RESIL_EINVAL;
    }
    resil_tracer_opts to;
    resil_tracer_opts_default(&to);
    to.on_span = resil_otlp_on_span;
    to.on_span_ud = t->otlp;
    to.clock = clock;
    return resil_tracer_init(&t->tracer, &to, NULL);
}
#endif

int telemetry_out_open(telemetry_out *t, const char *tool, resil_clock *clock)
{
    t->metrics_out = NULL;
    t->metrics = NULL;
    t->otlp = NULL;
    if (t->metrics_file == NULL && t->otlp_url == NULL)
        return 0;
    resil_err err;
    if (resil_metrics_new(NULL, &t->metrics, &err) != 0) {
        fprintf(stderr, "%s: metrics: %s\n", tool, err.message);
        return RESIL_EINVAL;
    }
    int rc = open_file(t, tool);
#ifdef RESIL_CLI_OTLP
    if (rc == 0 && t->otlp_url != NULL)
        rc = open_exporter(t, tool, clock);
#else
    (void)clock;
#endif
    if (rc != 0)
        release(t);
    return rc;
}

void telemetry_out_on_event(const resil_event *ev, void *ud)
{
    telemetry_out *t = ud;
    if (t->metrics != NULL)
        resil_metrics_on_event(ev, t->metrics);
    if (t->otlp != NULL)
        resil_tracer_on_event(ev, &t->tracer);
}

bool telemetry_out_tracing(const telemetry_out *t) { return t->otlp != NULL; }

static int write_piece(const char *text, size_t len, void *ud)
{
    return fwrite(text, 1, len, ud) == len ? 0 : RESIL_ESYS;
}

static int write_file(telemetry_out *t, const char *tool)
{
    if (t->metrics_out == NULL)
        return 0;
    int rc = resil_metrics_write_prometheus(t->metrics, write_piece, t->metrics_out);
    int err = rc != 0 ? errno : 0; /* the first failure's, as fwrite left it */
    if (t->metrics_out != stderr && fclose(t->metrics_out) != 0) {
        rc = RESIL_ESYS;
        err = err != 0 ? err : errno;
    }
    t->metrics_out = NULL;
    if (rc == 0)
        return 0;
    fprintf(stderr, "%s: --metrics: cannot write '%s': %s\n", tool, t->metrics_file,
            strerror(err != 0 ? err : EIO));
    return -1;
}

/* Everything queued is sent as the exporter goes, once: its close says
 * whether the receiver took it (a flush before the free would export the
 * metrics a second time). */
static int close_exporter(telemetry_out *t, const char *tool)
{
#ifdef RESIL_CLI_OTLP
    if (t->otlp == NULL)
        return 0;
    int rc = resil_otlp_close(t->otlp);
    t->otlp = NULL;
    if (rc == 0)
        return 0;
    fprintf(stderr, "%s: --otlp: the export to '%s' failed\n", tool, t->otlp_url);
    return -1;
#else
    (void)t;
    (void)tool;
    return 0;
#endif
}

int telemetry_out_close(telemetry_out *t, const char *tool)
{
    int rc = write_file(t, tool);
    if (close_exporter(t, tool) != 0)
        rc = -1;
    release(t);
    return rc;
}
