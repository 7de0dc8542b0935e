/* mapping_mbps.c — `courier bench mapping`'s C figures, wall clock: jansson parse + walk against the
 * core's tape parse + courier_mapping_apply_tape on the 1 MB document, interleaved, medians of R runs
 * of 10 passes each, and the median of the per-run ratios. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *cbench_mapping_document(int count, size_t *len);
void *cbench_mapping_new(int renames);
long long cbench_jansson_parse_walk(const void *data, size_t len);
long long cbench_mapping_run(const void *data, size_t len, const void *mapping);
long long cbench_mapping_jansson_run(const void *data, size_t len, const void *mapping);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 15, passes = 10;
    size_t len = 0;
    char *doc = cbench_mapping_document(5000, &len);
    void *m = cbench_mapping_new(0);
    double j[64], t[64], old[64], ratio[64];
    for (int r = 0; r < runs && r < 64; r++) {
        double a = now();
        for (int i = 0; i < passes; i++) cbench_jansson_parse_walk(doc, len);
        double b = now();
        for (int i = 0; i < passes; i++) cbench_mapping_run(doc, len, m);
        double c = now();
        for (int i = 0; i < passes; i++) cbench_mapping_jansson_run(doc, len, m);
        double d = now();
        j[r] = len * passes / (b - a) / 1e6;
        t[r] = len * passes / (c - b) / 1e6;
        old[r] = len * passes / (d - c) / 1e6;
        ratio[r] = t[r] / j[r];
    }
    qsort(j, runs, sizeof *j, cmp);
    qsort(t, runs, sizeof *t, cmp);
    qsort(old, runs, sizeof *old, cmp);
    qsort(ratio, runs, sizeof *ratio, cmp);
    printf("bytes %zu runs %d: jansson_mbps %.1f mapping_mbps %.1f mapping_jansson_mbps %.1f ratio(median of runs) %.2fx [%.2f..%.2f]\n",
           len, runs, j[runs / 2], t[runs / 2], old[runs / 2], ratio[runs / 2], ratio[0], ratio[runs - 1]);
    return 0;
}
