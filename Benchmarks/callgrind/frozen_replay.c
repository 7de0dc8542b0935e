/* frozen_replay.c — the replay of frozen requests against the engine's transport, from C
 * (Benchmarks/CBench/frozen_bench.c's cbench_frozen_freeze, _replay and _transport):
 *   freeze STORE URL N      : N POSTs to URL frozen into STORE (32 at once; not measured)
 *   single STORE URL N      : the same one at a time, as `courier bench frozen`'s freeze_ops (each
 *                             send answered "frozen" after its own synced commit); prints seconds
 *   size STORE URL          : the bytes a frozen POST takes in the journal (16 frozen into STORE)
 *   raw DIR N BYTES         : N raw LMDB synced commits of BYTES-byte values into a fresh
 *                             environment (the bench's ceiling, cbench_lmdb_sync_commits); prints seconds
 *   replay STORE            : STORE's frozen requests replayed, 8 in flight, with a listener; prints
 *                             the requests answered and the seconds
 *   transport URL N         : the same POSTs sent normally, 8 in flight
 *   ratio URL N RUNS DIR    : RUNS times: transport, freeze N into a fresh store under DIR, replay,
 *                             transport; prints each run's requests/s and CPU us per request (the
 *                             process's, over the phase), then the medians and replay_ratio by
 *                             wall and by CPU
 * FROZEN_JOURNAL=URL in the environment: the journals on that Redis (a redis:// or redis+cluster://
 * URL, cbench_frozen_set_journal) instead of LMDB, as `courier bench frozen --backend redis|redis-cluster`.
 * FROZEN_ORDERED=1: freeze's requests are frozen in their host's order (one host), not unordered.
 * URL is a server in another process (Benchmarks/callgrind/frozen_replay.sh starts
 * courier-test-server), so the client's CPU is all that is counted. Instructions per request:
 * callgrind at two N, the difference divided by the difference of N. */
#include "cbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONCURRENCY 8

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int check(const char *what, const cbench_result *r, long n) {
    if (r->errors || (n >= 0 && r->completed != n)) {
        fprintf(stderr, "%s: %ld of %ld, %ld errors: %s\n", what, r->completed, n, r->errors, r->first_error);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    cbench_result r;
    if (getenv("FROZEN_JOURNAL")) cbench_frozen_set_journal(getenv("FROZEN_JOURNAL"));
    if (argc >= 5 && strcmp(argv[1], "freeze") == 0) {
        cbench_frozen_freeze(argv[2], argv[3], atol(argv[4]), 32, &r);
        return check("freeze", &r, atol(argv[4]));
    }
    if (argc >= 5 && strcmp(argv[1], "single") == 0) {
        cbench_frozen_freeze(argv[2], argv[3], atol(argv[4]), 1, &r);
        printf("%.6f\n", r.seconds);
        return check("single", &r, atol(argv[4]));
    }
    if (argc >= 4 && strcmp(argv[1], "size") == 0) {
        printf("%ld\n", cbench_frozen_record_bytes(argv[2], argv[3]));
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "raw") == 0) {
        cbench_lmdb_sync_commits(argv[2], atol(argv[3]), (size_t)atol(argv[4]), &r);
        printf("%.6f\n", r.seconds);
        return check("raw", &r, atol(argv[3]));
    }
    if (argc >= 3 && strcmp(argv[1], "replay") == 0) {
        cbench_frozen_replay(argv[2], CONCURRENCY, 300000, &r);
        printf("%ld %.6f\n", r.completed, r.seconds);
        return check("replay", &r, -1);
    }
    if (argc >= 4 && strcmp(argv[1], "transport") == 0) {
        cbench_frozen_transport(argv[2], atol(argv[3]), CONCURRENCY, &r);
        return check("transport", &r, atol(argv[3]));
    }
    if (argc >= 6 && strcmp(argv[1], "ratio") == 0) {
        const char *url = argv[2], *dir = argv[5];
        long n = atol(argv[3]);
        int runs = atoi(argv[4]);
        if (runs < 1 || runs > 64 || n <= 0) return 2;
        double rr[64], tr[64], rc[64], tc[64], ratio[64], cratio[64];
        for (int i = 0; i < runs; i++) {
            char store[4096];
            snprintf(store, sizeof store, "%s/replay-%d", dir, i);
            cbench_frozen_transport(url, n, CONCURRENCY, &r);
            if (check("transport", &r, n)) return 1;
            double t1 = r.completed / r.seconds, c1 = r.cpu_seconds / r.completed;
            cbench_frozen_freeze(store, url, n, 32, &r);
            if (check("freeze", &r, n)) return 1;
            cbench_frozen_replay(store, CONCURRENCY, 300000, &r);
            if (check("replay", &r, n)) return 1;
            rr[i] = r.completed / r.seconds;
            rc[i] = r.cpu_seconds / r.completed * 1e6;
            cbench_frozen_transport(url, n, CONCURRENCY, &r);
            if (check("transport", &r, n)) return 1;
            tr[i] = (t1 + r.completed / r.seconds) / 2;
            tc[i] = (c1 + r.cpu_seconds / r.completed) / 2 * 1e6;
            ratio[i] = rr[i] / tr[i];
            cratio[i] = tc[i] / rc[i];
            printf("run %d: replay %.0f/s %.1f us CPU, transport %.0f/s %.1f us CPU, ratio %.2f wall %.2f CPU\n", i + 1,
                   rr[i], rc[i], tr[i], tc[i], ratio[i], cratio[i]);
            fflush(stdout);
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", store);
            if (system(cmd) != 0) return 1;
        }
        printf("medians of %d: replay_rps %.0f (%.1f us CPU), transport_rps %.0f (%.1f us CPU), replay_ratio %.2f "
               "by wall, %.2f by CPU\n",
               runs, median(rr, runs), median(rc, runs), median(tr, runs), median(tc, runs), median(ratio, runs),
               median(cratio, runs));
        return 0;
    }
    fprintf(stderr, "usage: frozen_replay freeze|single STORE URL N | size STORE URL | raw DIR N BYTES | replay STORE | transport URL N | ratio URL N RUNS DIR\n");
    return 2;
}
