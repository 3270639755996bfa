/*
 * fuzz_proc.c — the /proc/stat and /proc/meminfo parsers on arbitrary
 * bytes. The degradation monitor feeds them whatever the kernel (or a test's
 * fixture directory) hands it, so beyond "no crash, no read past `size`"
 * they must only ever answer 0 or RESIL_ESYNTAX, with busy never above
 * total and memory use always a percentage.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "resil/degrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    resil_cpu_times t = {.busy = 0, .total = 0};
    int rc = resil_proc_stat_parse(text, size, &t);
    if (rc != 0 && rc != RESIL_ESYNTAX)
        abort();
    if (rc == 0) {
        if (t.busy > t.total)
            abort();
        resil_cpu_times zero = {.busy = 0, .total = 0};
        double pct = resil_cpu_busy_percent(&zero, &t);
        if (!isnan(pct) && (pct < 0 || pct > 100))
            abort();
    }
    double used = -1;
    rc = resil_proc_meminfo_parse(text, size, &used);
    if (rc != 0 && rc != RESIL_ESYNTAX)
        abort();
    if (rc == 0 && !(used >= 0 && used <= 100))
        abort();
    return 0;
}
