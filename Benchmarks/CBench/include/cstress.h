/*
 * cstress.h — the worker loop of `courier stress cache`: worker threads driving the C core's cache
 * directly (courier_cache_get_key / put_key / remove_key), or the whole request path
 * (courier_send_sync with the HTTP cache policy against a loopback origin), so the figures are the
 * engine's, not the tool's. One call runs one process's share; `courier stress cache --processes N`
 * starts N processes on one store, each calling this.
 *
 * Every value written carries its key's number and a version, and its bytes follow from them: a
 * get checks the value it read is whole (a torn or foreign value counts as an error).
 * Latencies go into per-thread, per-second log-linear histograms (1/32 of a power of two, ~3%),
 * merged when the run ends.
 */
#ifndef CSTRESS_H
#define CSTRESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cstress_config {
    const char *store_dir;     /* the store directory (the cache is in <store_dir>/cache) */
    int threads;               /* worker threads (>= 1) */
    double duration_s;         /* stop after this long (0: only `ops` bounds the run) */
    int64_t ops;               /* stop after this many operations in this process (0: only the duration) */
    int64_t entries;           /* key space */
    int64_t value_min;         /* value sizes, uniform in [value_min, value_max] */
    int64_t value_max;
    int mix_get, mix_put, mix_remove; /* weights */
    int zipf;                  /* 0: uniform keys; 1: Zipf (s = zipf_s) */
    double zipf_s;
    int64_t size_limit;        /* courier_config_set_cache_max_bytes (0: the default) */
    int durability;            /* courier_cache_durability */
    int64_t expiry_s;          /* expiry of the entries written (0: the engine's default, one hour) */
    const char *http_base_url; /* non-NULL: the whole request path against this origin (/cache) */
    uint64_t seed;             /* random seed (the process index keeps processes apart) */
    /* Acknowledged writes (for --chaos), when ack_fd >= 0: each thread writes only its own keys
     * (key % (key_slots x threads) == key_slot x threads + thread), versions are the wall clock in
     * ns, and after each put that returned COURIER_OK, 16 bytes (key, version) are appended to
     * ack_fd with one write(2), so a process killed at any moment leaves only writes it knew had
     * committed. cstress_check_acks then checks none was lost. */
    int ack_fd;
    int key_slot, key_slots;
} cstress_config;

/* One second of the run (of this process). Latencies in nanoseconds. */
typedef struct cstress_second {
    int64_t ops, gets, puts, removes, hits, errors;
    int64_t get_p50, get_p99, get_p999, get_max;
    int64_t put_p50, put_p99, put_p999, put_max;
} cstress_second;

typedef struct cstress_result {
    double seconds;            /* wall time of the run */
    int64_t ops, gets, puts, removes;
    int64_t hits, misses;      /* gets that found their entry or not (HTTP: answered by the cache or not) */
    int64_t errors;            /* calls that failed, plus values that were not whole */
    int64_t torn;              /* of which: values read back not whole */
    int64_t evictions;         /* courier_cache_stats.evictions of this process's engine */
    int64_t write_failures;    /* writes the cache dropped (too large, full) */
    int64_t file_bytes_start;  /* data.mdb before and after the run */
    int64_t file_bytes_end;
    int64_t rss_anon_max;      /* the most private (anonymous) memory of this process seen during the run,
                                  sampled every 20 ms from /proc/self/status (RssAnon); 0 if unknown */
    int64_t get_p50, get_p99, get_p999, get_max; /* over the whole run */
    int64_t put_p50, put_p99, put_p999, put_max;
    int nseconds;
    cstress_second *series;    /* nseconds entries (new: cstress_result_free) */
    char first_error[256];
} cstress_result;

/* Live figures for a progress line, read by another thread while the run goes on. */
typedef struct cstress_live {
    int64_t ops, errors;
    int64_t last_get_p99; /* of the last complete second, ns */
    double elapsed_s;
} cstress_live;

/* Runs the workers, then fills *out. `progress` (may be NULL) is called about every 250 ms on the
 * calling thread. Returns 0, or a negative courier_code when the engine could not be opened
 * (out->first_error says why). */
int cstress_run(const cstress_config *cfg, cstress_result *out, void (*progress)(const cstress_live *live, void *user),
                void *user);
void cstress_result_free(cstress_result *r);

/* Writes every key of the key space once (sizes as the config says, version 0), before a run, on
 * `threads` threads of an engine of its own opened with the no-sync setting (a store's durability
 * is chosen per process when it opens: the run's own engine then uses cfg->durability). Returns
 * 0 or a negative courier_code (error, cap: why). */
int cstress_prefill(const cstress_config *cfg, char *error, size_t cap);

/* Reads the ack files (paths, n) of a chaos run and checks every acknowledged write against the
 * store: for each key, the stored value must be whole and its version at least the newest version
 * acknowledged for it. *checked: keys checked; *lost: keys missing or older than acknowledged;
 * *torn: values not whole. Returns 0 or a negative courier_code (error, cap: why). */
int cstress_check_acks(const char *store_dir, int64_t entries, const char *const *paths, size_t n, int64_t *checked,
                       int64_t *lost, int64_t *torn, char *error, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
