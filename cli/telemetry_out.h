/*
 * telemetry_out.h — where a subcommand's telemetry goes: --metrics FILE
 * (the Prometheus text of every event, written once at exit) and
 * --otlp URL (the same metrics and the spans, exported by libresil-otlp
 * and flushed at exit).
 *
 * One listener (telemetry_out_on_event) feeds both outputs, so a
 * subcommand hands its events to one place whatever was asked for, and
 * both outputs are opened before anything runs: a file that cannot be
 * written or an endpoint the exporter refuses stops the command while
 * nothing has been done.
 */
#ifndef RESIL_CLI_TELEMETRY_OUT_H
#define RESIL_CLI_TELEMETRY_OUT_H

#include <stdio.h>

#include "args.h"
#include "resil.h"

struct resil_otlp;

typedef struct telemetry_out {
    const char *metrics_file; /* --metrics FILE ('-': standard error); NULL = none */
    const char *otlp_url;     /* --otlp URL, the OTLP/HTTP base endpoint; NULL = none */
    /* made by telemetry_out_open, released by telemetry_out_close: */
    FILE *metrics_out;
    resil_metrics *metrics;   /* NULL when neither output was asked for */
    struct resil_otlp *otlp;  /* NULL without --otlp */
    resil_tracer tracer;      /* the spans, to the exporter */
} telemetry_out;

/* One option's value, for a command whose own table matches the names:
 * 0, or RESIL_EINVAL after reporting it by name. */
int telemetry_out_metrics(telemetry_out *t, const args *a, const char *v);
int telemetry_out_otlp(telemetry_out *t, const args *a, const char *v);
/* 1 consumed, 0 not ours, RESIL_EINVAL after reporting the bad value. */
int telemetry_out_parse(telemetry_out *t, args *a);
/* The help text's lines for the options. */
extern const char telemetry_out_help[];

/* Open what was asked for; spans take their wall times from `clock`, the
 * clock the events' instants are on. 0, or RESIL_EINVAL after reporting
 * on stderr, as `tool` says (nothing is left open then). */
int telemetry_out_open(telemetry_out *t, const char *tool, resil_clock *clock);
/* The listener (ud = the telemetry_out *). */
void telemetry_out_on_event(const resil_event *ev, void *ud);
/* Whether spans are wanted: a command then makes its executions traced. */
bool telemetry_out_tracing(const telemetry_out *t);
/* Write the metrics file, flush the export, release everything: 0, or -1
 * after reporting what could not be written or sent. */
int telemetry_out_close(telemetry_out *t, const char *tool);

#endif
