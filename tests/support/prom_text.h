/*
 * prom_text.h — a strict parser of the Prometheus text exposition format
 * (version 0.0.4) for tests: valid metric and label names, HELP and TYPE
 * once per family and before its samples, families contiguous, label
 * values unescaped back to what was recorded, and (prom_check_histograms)
 * buckets cumulative, le ascending, +Inf equal to _count, _sum present.
 * Every violation fails the running cmocka test.
 */
#ifndef RESIL_TEST_PROM_TEXT_H
#define RESIL_TEST_PROM_TEXT_H

#include "test.h"

#define MAX_LABELS 12
#define MAX_SAMPLES 2048
#define MAX_FAMILIES 48

typedef struct sample {
    char name[96];
    int nlabels;
    char label[MAX_LABELS][32];
    char value_text[MAX_LABELS][128];
    double value;
} sample;

typedef struct family {
    char name[96];
    char type[16];
    bool help;
    int first, last; /* sample index range */
} family;

typedef struct exposition {
    sample s[MAX_SAMPLES];
    int n;
    family f[MAX_FAMILIES];
    int nf;
} exposition;

/* Parse `text` into e (zeroed first). */
void prom_parse(exposition *e, const char *text);
/* The value of label `name` of s, or NULL. */
const char *prom_label(const sample *s, const char *name);
/* The labels of s other than le, as "name=value;…", to group a series. */
void prom_series_key(const sample *s, char *out, size_t cap);
/* The sample named `name` whose prom_series_key is `key`, or NULL. */
const sample *prom_find(const exposition *e, const char *name, const char *key);
void prom_check_histograms(const exposition *e);

#endif
