/*
 * health.c — CPU and memory readings from /proc for the degradation
 * monitor.
 *
 * The parsers are separate from the file reading so that they can be tested
 * on fixture text and fuzzed: they take a pointer and a length, read exactly
 * those bytes (no NUL, no strtoul that might run past the end), reject
 * numbers that overflow, and saturate sums. The sampler reads each file once
 * into a stack buffer — the lines it needs come first in both files — and
 * hands the parser only complete lines, so a cut-off number is never taken
 * for a small one.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "resil/degrade.h"

typedef struct cursor {
    const char *p, *end;
} cursor;

static bool at_end(const cursor *c) { return c->p >= c->end; }

static void skip_spaces(cursor *c)
{
    while (!at_end(c) && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static void skip_line(cursor *c)
{
    while (!at_end(c) && *c->p != '\n')
        c->p++;
    if (!at_end(c))
        c->p++;
}

static bool starts_with(const cursor *c, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0;
}

/* A decimal number; false when there is none or it overflows. */
static bool read_u64(cursor *c, uint64_t *out)
{
    skip_spaces(c);
    if (at_end(c) || *c->p < '0' || *c->p > '9')
        return false;
    uint64_t v = 0;
    while (!at_end(c) && *c->p >= '0' && *c->p <= '9') {
        uint64_t digit = (uint64_t)(*c->p - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
        c->p++;
    }
    *out = v;
    return true;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* "cpu  user nice system idle iowait irq softirq steal guest guest_nice";
 * guest time is already inside user and nice, so it is not added again.
 * Kernels before 2.6 print only the first four. */
static int parse_cpu_line(cursor *c, resil_cpu_times *out)
{
    enum { USER, NICE, SYSTEM, IDLE, IOWAIT, IRQ, SOFTIRQ, STEAL, NFIELDS };
    uint64_t f[NFIELDS] = {0};
    int n = 0;
    while (n < NFIELDS && read_u64(c, &f[n]))
        n++;
    if (n < 4)
        return RESIL_ESYNTAX;
    uint64_t total = 0;
    for (int i = 0; i < NFIELDS; i++)
        total = sat_add(total, f[i]);
    uint64_t idle = sat_add(f[IDLE], f[IOWAIT]);
    out->total = total;
    out->busy = total - (idle < total ? idle : total);
    return 0;
}

int resil_proc_stat_parse(const char *text, size_t len, resil_cpu_times *out)
{
    cursor c = {text, text + len};
    while (!at_end(&c)) {
        if (starts_with(&c, "cpu ")) {
            c.p += 4;
            return parse_cpu_line(&c, out);
        }
        skip_line(&c);
    }
    return RESIL_ESYNTAX;
}

double resil_cpu_busy_percent(const resil_cpu_times *before, const resil_cpu_times *after)
{
    if (after->total <= before->total)
        return NAN;
    double total = (double)(after->total - before->total);
    double busy = after->busy > before->busy ? (double)(after->busy - before->busy) : 0.0;
    double pct = busy * 100.0 / total;
    return pct > 100.0 ? 100.0 : pct;
}

/* ---- /proc/meminfo ------------------------------------------------------ */

enum { MEM_TOTAL, MEM_AVAILABLE, MEM_FREE, MEM_BUFFERS, MEM_CACHED, MEM_KEYS };

static const char *const mem_keys[MEM_KEYS] = {"MemTotal:", "MemAvailable:", "MemFree:",
                                               "Buffers:", "Cached:"};

int resil_proc_meminfo_parse(const char *text, size_t len, double *used_percent)
{
    uint64_t v[MEM_KEYS] = {0};
    bool seen[MEM_KEYS] = {false};
    cursor c = {text, text + len};
    while (!at_end(&c)) {
        for (int k = 0; k < MEM_KEYS; k++) {
            if (seen[k] || !starts_with(&c, mem_keys[k]))
                continue;
            c.p += strlen(mem_keys[k]);
            seen[k] = read_u64(&c, &v[k]);
            break;
        }
        skip_line(&c);
    }
    if (!seen[MEM_TOTAL] || v[MEM_TOTAL] == 0)
        return RESIL_ESYNTAX;
    uint64_t avail;
    if (seen[MEM_AVAILABLE])
        avail = v[MEM_AVAILABLE];
    else if (seen[MEM_FREE])
        avail = sat_add(sat_add(v[MEM_FREE], v[MEM_BUFFERS]), v[MEM_CACHED]);
    else
        return RESIL_ESYNTAX;
    if (avail > v[MEM_TOTAL])
        avail = v[MEM_TOTAL];
    /* From the available share, which rounding keeps within [0, 1]; the
     * used count itself could round above the total near 2^64. */
    double used = 100.0 - (double)avail * 100.0 / (double)v[MEM_TOTAL];
    *used_percent = used < 0.0 ? 0.0 : used;
    return 0;
}

/* ---- the sampler -------------------------------------------------------- */

void resil_proc_sampler_init(resil_proc_sampler *s, const char *root)
{
    memset(s, 0, sizeof *s);
    s->root = root != NULL ? root : "/proc";
}

/* Read the start of root/name, keeping only whole lines; length or -1. */
static ssize_t read_head(const char *root, const char *name, char *buf, size_t cap)
{
    char path[512];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, name) >= sizeof path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len == cap) /* the file goes on: drop the partial last line */
        while (len > 0 && buf[len - 1] != '\n')
            len--;
    return (ssize_t)len;
}

int resil_proc_sample(void *ud, resil_health_sample *out)
{
    resil_proc_sampler *s = ud;
    char buf[4096];
    out->cpu = NAN;
    out->memory = NAN;

    ssize_t n = read_head(s->root, "stat", buf, sizeof buf);
    resil_cpu_times now;
    if (n > 0 && resil_proc_stat_parse(buf, (size_t)n, &now) == 0) {
        if (s->primed)
            out->cpu = resil_cpu_busy_percent(&s->prev, &now);
        s->prev = now;
        s->primed = true;
    }
    n = read_head(s->root, "meminfo", buf, sizeof buf);
    double used;
    if (n > 0 && resil_proc_meminfo_parse(buf, (size_t)n, &used) == 0)
        out->memory = used;
    return isnan(out->cpu) && isnan(out->memory) ? RESIL_EIO : 0;
}
