/*
 * cfgtest.h — what the configuration tests share: documents written with
 * single quotes (turned into JSON's double quotes, column for column, so
 * the positions a test expects are the ones it reads), and short ways to
 * load one or to see the errors it gets.
 */
#ifndef RESIL_CFGTEST_H
#define RESIL_CFGTEST_H

#include "test.h"

#include "resil/config.h"

#define CFG_TEXT_MAX 65536

/* The document with ' turned into ". Static storage: one at a time. */
static inline const char *cfg_json(const char *single_quoted)
{
    static char buf[CFG_TEXT_MAX];
    size_t i = 0;
    for (; single_quoted[i] && i + 1 < sizeof buf; i++)
        buf[i] = single_quoted[i] == '\'' ? '"' : single_quoted[i];
    buf[i] = '\0';
    return buf;
}

/* Parse a document that must load. */
static inline resil_config *cfg_load(const char *single_quoted)
{
    const char *text = cfg_json(single_quoted);
    resil_config *c = NULL;
    resil_config_diags d = {0};
    int rc = resil_config_parse(text, strlen(text), &c, &d);
    if (rc != 0 && d.len > 0) {
        char line[1024];
        resil_config_diag_format(&d.items[0], line, sizeof line);
        print_error("unexpected error: %s\n", line);
    }
    resil_config_diags_free(&d);
    assert_int_equal(rc, 0);
    assert_non_null(c);
    return c;
}

/* Parse a document that must fail: the return code, and the diagnostics
 * formatted one per line (static storage). */
static inline const char *cfg_errors_rc(const char *single_quoted, int *rc)
{
    static char out[CFG_TEXT_MAX];
    const char *text = cfg_json(single_quoted);
    resil_config *c = (resil_config *)1;
    resil_config_diags d = {0};
    *rc = resil_config_parse(text, strlen(text), &c, &d);
    assert_null(c);
    resil_config_diags_write(&d, RESIL_CONFIG_TEXT, out, sizeof out);
    resil_config_diags_free(&d);
    return out;
}

/* The errors of a document that fails validation. */
static inline const char *cfg_errors(const char *single_quoted)
{
    int rc;
    const char *out = cfg_errors_rc(single_quoted, &rc);
    assert_int_equal(rc, RESIL_EINVAL);
    return out;
}

/* The first error's message alone (no path, no position). */
static inline const char *cfg_first_message(const char *single_quoted)
{
    static char out[512];
    const char *text = cfg_json(single_quoted);
    resil_config *c = NULL;
    resil_config_diags d = {0};
    int rc = resil_config_parse(text, strlen(text), &c, &d);
    assert_int_not_equal(rc, 0);
    assert_true(d.len > 0);
    snprintf(out, sizeof out, "%s", d.items[0].message);
    resil_config_diags_free(&d);
    return out;
}

/* The first error's path. */
static inline const char *cfg_first_path(const char *single_quoted)
{
    static char out[RESIL_CONFIG_PATH_MAX];
    const char *text = cfg_json(single_quoted);
    resil_config *c = NULL;
    resil_config_diags d = {0};
    assert_int_not_equal(resil_config_parse(text, strlen(text), &c, &d), 0);
    assert_true(d.len > 0);
    snprintf(out, sizeof out, "%s", d.items[0].path);
    resil_config_diags_free(&d);
    return out;
}

#endif
