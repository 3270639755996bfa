/*
 * replay.c — the driver that lets `make check` exercise every fuzz target
 * without libFuzzer: it feeds the target each file of its seed corpus, every
 * prefix of each file (truncation is where parsers read past the end), and a
 * fixed number of seeded mutations (byte flips, insertions, splices of two
 * seeds). Each input is copied into a buffer of exactly its size, so under
 * ASan any read past `size` is caught. Deterministic: same corpus, same run.
 * Real coverage-guided fuzzing is `make fuzz` (clang, libFuzzer).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS 256
#define MAX_SEED_SIZE 4096
#define MUTATIONS 20000

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_sizes[MAX_SEEDS];
static size_t nseeds;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void run_exact(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (copy == NULL)
        abort();
    if (size)
        memcpy(copy, data, size);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
}

static void load_seed(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL || nseeds == MAX_SEEDS) {
        if (f)
            fclose(f);
        return;
    }
    uint8_t *buf = malloc(MAX_SEED_SIZE);
    size_t n = buf ? fread(buf, 1, MAX_SEED_SIZE, f) : 0;
    fclose(f);
    if (buf == NULL)
        return;
    seeds[nseeds] = buf;
    seed_sizes[nseeds] = n;
    nseeds++;
}

static void load_corpus(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        load_seed(path);
    }
    closedir(d);
}

static size_t mutate(uint8_t *out, size_t cap)
{
    size_t n = 0;
    if (nseeds) {
        size_t pick = next_random() % nseeds;
        n = seed_sizes[pick] < cap ? seed_sizes[pick] : cap;
        memcpy(out, seeds[pick], n);
    }
    int ops = 1 + (int)(next_random() % 4);
    for (int i = 0; i < ops; i++) {
        switch (next_random() % 5) {
        case 0: /* flip a byte */
            if (n)
                out[next_random() % n] ^= (uint8_t)(1u << (next_random() % 8));
            break;
        case 1: /* random byte */
            if (n)
                out[next_random() % n] = (uint8_t)next_random();
            break;
        case 2: /* insert a byte */
            if (n < cap) {
                size_t at = n ? next_random() % (n + 1) : 0;
                memmove(out + at + 1, out + at, n - at);
                out[at] = (uint8_t)next_random();
                n++;
            }
            break;
        case 3: /* truncate */
            if (n)
                n = next_random() % n;
            break;
        default: /* splice another seed's tail */
            if (nseeds && n < cap) {
                size_t other = next_random() % nseeds;
                size_t on = seed_sizes[other];
                size_t from = on ? next_random() % on : 0;
                size_t take = on - from;
                if (take > cap - n)
                    take = cap - n;
                memcpy(out + n, seeds[other] + from, take);
                n += take;
            }
            break;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        load_corpus(argv[i]);
    size_t runs = 0;
    for (size_t s = 0; s < nseeds; s++) {
        for (size_t len = 0; len <= seed_sizes[s]; len++, runs++)
            run_exact(seeds[s], len);
    }
    static uint8_t buf[MAX_SEED_SIZE * 2];
    for (int i = 0; i < MUTATIONS; i++, runs++)
        run_exact(buf, mutate(buf, sizeof buf));
    for (size_t s = 0; s < nseeds; s++)
        free(seeds[s]);
    printf("replayed %zu inputs from %zu seeds\n", runs, nseeds);
    return 0;
}
