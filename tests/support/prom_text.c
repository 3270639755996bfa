/*
 * prom_text.c — the test parser of the Prometheus text format
 * (prom_text.h), shared by the metrics tests and the scrape tests.
 */
#include <ctype.h>
#include <stdlib.h>

#include "prom_text.h"

static bool name_ok(const char *n, bool metric)
{
    if (!(isalpha((unsigned char)*n) || *n == '_' || (metric && *n == ':')))
        return false;
    for (n++; *n; n++)
        if (!(isalnum((unsigned char)*n) || *n == '_' || (metric && *n == ':')))
            return false;
    return true;
}

static family *family_of(exposition *e, const char *name)
{
    for (int i = 0; i < e->nf; i++)
        if (strcmp(e->f[i].name, name) == 0)
            return &e->f[i];
    return NULL;
}

/* The family a sample belongs to: itself, or a histogram's _bucket/_sum/_count. */
static family *owner(exposition *e, const char *sample_name)
{
    family *f = family_of(e, sample_name);
    if (f != NULL)
        return f;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(sample_name), k = strlen(suffixes[i]);
        if (n <= k || strcmp(sample_name + n - k, suffixes[i]) != 0)
            continue;
        char base[96];
        snprintf(base, sizeof base, "%.*s", (int)(n - k), sample_name);
        f = family_of(e, base);
        if (f != NULL && strcmp(f->type, "histogram") == 0)
            return f;
    }
    return NULL;
}

static void parse_comment(exposition *e, const char *line)
{
    char kind[8], name[96], rest[256] = "";
    int n = sscanf(line, "# %7s %95s %255[^\n]", kind, name, rest);
    assert_true(n >= 2);
    assert_true(name_ok(name, true));
    family *f = family_of(e, name);
    if (f == NULL) {
        assert_true(e->nf < MAX_FAMILIES);
        f = &e->f[e->nf++];
        snprintf(f->name, sizeof f->name, "%s", name);
        f->first = f->last = -1;
    }
    assert_int_equal(f->first, -1); /* HELP and TYPE come before the samples */
    if (strcmp(kind, "HELP") == 0) {
        assert_false(f->help);
        f->help = true;
        assert_true(rest[0] != '\0');
        return;
    }
    assert_string_equal(kind, "TYPE");
    assert_string_equal(f->type, "");
    assert_true(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0 ||
                strcmp(rest, "histogram") == 0);
    snprintf(f->type, sizeof f->type, "%.15s", rest);
}

static const char *parse_label_value(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    assert_int_equal(*p++, '"');
    for (; *p != '"'; p++) {
        assert_true(*p != '\0' && *p != '\n');
        char c = *p;
        if (c == '\\') {
            p++;
            assert_true(*p == '\\' || *p == '"' || *p == 'n');
            c = *p == 'n' ? '\n' : *p;
        }
        assert_true(n + 1 < cap);
        out[n++] = c;
    }
    out[n] = '\0';
    return p + 1;
}

static void parse_sample(exposition *e, const char *line)
{
    assert_true(e->n < MAX_SAMPLES);
    sample *s = &e->s[e->n];
    memset(s, 0, sizeof *s);
    size_t k = strcspn(line, "{ ");
    assert_true(k > 0 && k < sizeof s->name);
    memcpy(s->name, line, k);
    assert_true(name_ok(s->name, true));
    const char *p = line + k;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            assert_true(s->nlabels < MAX_LABELS);
            size_t m = strcspn(p, "=");
            assert_true(m > 0 && m < sizeof s->label[0]);
            memcpy(s->label[s->nlabels], p, m);
            assert_true(name_ok(s->label[s->nlabels], false));
            p = parse_label_value(p + m + 1, s->value_text[s->nlabels], sizeof s->value_text[0]);
            s->nlabels++;
            if (*p == ',')
                p++;
        }
        p++;
    }
    assert_int_equal(*p++, ' ');
    char *end;
    s->value = strtod(p, &end);
    assert_true(end != p && *end == '\0');
    family *f = owner(e, s->name);
    assert_non_null(f);
    assert_string_not_equal(f->type, "");
    if (f->first == -1)
        f->first = e->n;
    assert_int_equal(f->last, f->first == e->n ? -1 : e->n - 1); /* contiguous */
    f->last = e->n;
    e->n++;
}

void prom_parse(exposition *e, const char *text)
{
    memset(e, 0, sizeof *e);
    char line[1024];
    while (*text) {
        size_t k = strcspn(text, "\n");
        assert_int_equal(text[k], '\n'); /* every line ends */
        assert_true(k < sizeof line);
        memcpy(line, text, k);
        line[k] = '\0';
        text += k + 1;
        assert_true(k > 0);
        if (line[0] == '#')
            parse_comment(e, line);
        else
            parse_sample(e, line);
    }
}

const char *prom_label(const sample *s, const char *name)
{
    for (int i = 0; i < s->nlabels; i++)
        if (strcmp(s->label[i], name) == 0)
            return s->value_text[i];
    return NULL;
}

/* The labels of `s` other than le, as one string, to group a histogram's series. */
void prom_series_key(const sample *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < s->nlabels; i++) {
        if (strcmp(s->label[i], "le") == 0)
            continue;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s=%s;", s->label[i], s->value_text[i]);
    }
}

const sample *prom_find(const exposition *e, const char *name, const char *key)
{
    char k[512];
    for (int i = 0; i < e->n; i++) {
        prom_series_key(&e->s[i], k, sizeof k);
        if (strcmp(e->s[i].name, name) == 0 && strcmp(k, key) == 0)
            return &e->s[i];
    }
    return NULL;
}

/* Every histogram series: le ascending, counts cumulative, +Inf == _count, _sum present. */
void prom_check_histograms(const exposition *e)
{
    for (int fi = 0; fi < e->nf; fi++) {
        const family *f = &e->f[fi];
        if (strcmp(f->type, "histogram") != 0 || f->first < 0)
            continue;
        char bucket[112], sum[112], count[112];
        snprintf(bucket, sizeof bucket, "%s_bucket", f->name);
        snprintf(sum, sizeof sum, "%s_sum", f->name);
        snprintf(count, sizeof count, "%s_count", f->name);
        for (int i = f->first; i <= f->last; i++) {
            const sample *s = &e->s[i];
            if (strcmp(s->name, bucket) != 0 || strcmp(prom_label(s, "le"), "+Inf") != 0)
                continue;
            char key[512];
            prom_series_key(s, key, sizeof key);
            double prev_le = -1, prev = -1;
            for (int j = f->first; j <= i; j++) {
                char kj[512];
                prom_series_key(&e->s[j], kj, sizeof kj);
                if (strcmp(e->s[j].name, bucket) != 0 || strcmp(kj, key) != 0)
                    continue;
                const char *le = prom_label(&e->s[j], "le");
                double bound = strcmp(le, "+Inf") == 0 ? 1e300 : strtod(le, NULL);
                assert_true(bound > prev_le);
                assert_true(e->s[j].value >= prev);
                prev_le = bound;
                prev = e->s[j].value;
            }
            const sample *c = prom_find(e, count, key);
            assert_non_null(c);
            assert_true(c->value == s->value);
            assert_non_null(prom_find(e, sum, key));
        }
    }
}

