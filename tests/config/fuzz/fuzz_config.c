/*
 * fuzz_config.c — the configuration loader on arbitrary bytes, and what a
 * loaded config feeds: the analysis, both report formats, and a registry
 * that applies it (so every accepted document is also built and swapped).
 * Beyond "no crash, no read past `size`", it checks the loader's promises:
 * a failure yields no config and says why; a success says nothing; every
 * pipeline it accepts can be looked up and built.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resil/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static resil_policies *registry(void)
{
    static resil_policies *reg;
    if (reg == NULL && resil_policies_new(NULL, &reg, NULL) != 0)
        abort();
    return reg;
}

static void check_accepted(resil_config *c)
{
    static char text[1 << 16];
    resil_config_analysis_opts o = {.rate = 3.5};
    resil_config_report r;
    if (resil_config_analyze(c, &o, &r) != 0)
        abort();
    for (int f = RESIL_CONFIG_TEXT; f <= RESIL_CONFIG_JSON; f++) {
        size_t n = resil_config_report_write(&r, (resil_config_format)f, text, sizeof text);
        if (n < sizeof text && strlen(text) != n)
            abort();
    }
    resil_config_report_free(&r);
    for (size_t i = 0; i < resil_config_count(c, RESIL_CONFIG_PIPELINES); i++) {
        resil_config_pipeline p;
        if (resil_config_pipeline_get(c, resil_config_name_at(c, RESIL_CONFIG_PIPELINES, i),
                                      &p) != 0)
            abort();
    }
    resil_err e;
    if (resil_policies_apply(registry(), c, &e) != 0)
        abort(); /* validation must have refused whatever cannot be built */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    resil_config *c = (resil_config *)&c;
    resil_config_diags d = {0};
    int rc = resil_config_parse((const char *)data, size, &c, &d);
    if (rc == 0) {
        if (c == NULL || d.len != 0)
            abort();
        check_accepted(c);
        resil_config_free(c);
    } else {
        if ((rc != RESIL_ESYNTAX && rc != RESIL_EINVAL && rc != RESIL_ENOMEM) || c != NULL)
            abort();
        if (rc != RESIL_ENOMEM && d.len == 0 && d.dropped == 0)
            abort();
        char line[RESIL_CONFIG_PATH_MAX + 300];
        for (size_t i = 0; i < d.len; i++)
            resil_config_diag_format(&d.items[i], line, sizeof line);
    }
    resil_config_diags_free(&d);
    return 0;
}
