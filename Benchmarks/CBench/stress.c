/*
 * stress.c — the worker loop of `courier stress cache` (see cstress.h).
 */
#include "cstress.h"

#include <courier.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_SECONDS 7200
#define NBUCKETS 2048
enum { OP_GET, OP_PUT, OP_REMOVE };
enum { C_OPS, C_GETS, C_PUTS, C_REMOVES, C_HITS, C_ERRORS, C_N };

typedef _Atomic uint32_t hist_t[NBUCKETS];

typedef struct worker {
    struct run *run;
    int index;
    pthread_t thread;
    uint64_t rng;
    hist_t *hist[MAX_SECONDS][2]; /* get, put; allocated by the worker when it reaches a second */
    _Atomic int64_t counts[MAX_SECONDS][C_N];
    _Atomic int64_t max_ns[MAX_SECONDS][2];
    int64_t misses, torn;
    char first_error[256];
} worker;

typedef struct run {
    const cstress_config *cfg;
    courier_engine *engine;
    int64_t t0_ns, end_ns;
    atomic_llong issued;
    atomic_int stop;
    atomic_int last_second; /* the highest second any worker reached */
    worker *workers;
    double zipf_norm; /* N^(1-s) - 1 */
} run;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t next_rand(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (double)(next_rand(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ---- histograms ---------------------------------------------------------------------------- */

static int bucket_of(int64_t v) {
    if (v < 32) return v < 0 ? 0 : (int)v;
    int msb = 63 - __builtin_clzll((unsigned long long)v);
    int sub = (int)((v >> (msb - 5)) - 32);
    int idx = 32 + (msb - 5) * 32 + sub;
    return idx < NBUCKETS ? idx : NBUCKETS - 1;
}

static int64_t value_of(int idx) {
    if (idx < 32) return idx;
    int msb = (idx - 32) / 32 + 5, sub = (idx - 32) % 32;
    int64_t lo = (int64_t)(32 + sub) << (msb - 5);
    return lo + ((int64_t)1 << (msb - 5)) / 2;
}

static void record(worker *w, int sec, int which, int64_t ns) {
    hist_t *h = w->hist[sec][which];
    if (!h) {
        h = calloc(1, sizeof *h);
        if (!h) return;
        w->hist[sec][which] = h;
    }
    _Atomic uint32_t *b = &(*h)[bucket_of(ns)];
    atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + 1, memory_order_relaxed);
    _Atomic int64_t *m = &w->max_ns[sec][which];
    if (ns > atomic_load_explicit(m, memory_order_relaxed)) atomic_store_explicit(m, ns, memory_order_relaxed);
}

static void count(worker *w, int sec, int which) {
    _Atomic int64_t *c = &w->counts[sec][which];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Percentiles of a merged histogram: p50, p99, p99.9. */
static void percentiles(const uint64_t *h, int64_t out[3]) {
    uint64_t total = 0;
    for (int i = 0; i < NBUCKETS; i++) total += h[i];
    out[0] = out[1] = out[2] = 0;
    if (!total) return;
    const double q[3] = {0.50, 0.99, 0.999};
    for (int k = 0; k < 3; k++) {
        uint64_t want = (uint64_t)ceil(q[k] * (double)total), seen = 0;
        for (int i = 0; i < NBUCKETS; i++) {
            seen += h[i];
            if (seen >= want) {
                out[k] = value_of(i);
                break;
            }
        }
    }
}

/* Adds second `sec` of every worker's histogram `which` into h. */
static void merge_second(run *r, int sec, int which, uint64_t *h) {
    for (int t = 0; t < r->cfg->threads; t++) {
        hist_t *src = r->workers[t].hist[sec][which];
        if (!src) continue;
        for (int i = 0; i < NBUCKETS; i++) h[i] += atomic_load_explicit(&(*src)[i], memory_order_relaxed);
    }
}

/* ---- values -------------------------------------------------------------------------------- */

/* 16 bytes of header (key number, version), then bytes that follow from both. */
static void fill_value(uint8_t *v, size_t len, uint64_t key, uint64_t version) {
    uint8_t head[16];
    memcpy(head, &key, 8);
    memcpy(head + 8, &version, 8);
    memcpy(v, head, len < 16 ? len : 16);
    uint64_t s = key * 0x9E3779B97F4A7C15ULL ^ version;
    size_t i = 16;
    for (; i + 8 <= len; i += 8) {
        uint64_t x = next_rand(&s);
        memcpy(v + i, &x, 8);
    }
    if (i < len) {
        uint64_t x = next_rand(&s);
        memcpy(v + i, &x, len - i);
    }
}

static bool value_whole(const uint8_t *v, size_t len, uint64_t key, uint8_t *scratch) {
    if (len < 16) return false;
    uint64_t k, version;
    memcpy(&k, v, 8);
    memcpy(&version, v + 8, 8);
    if (k != key) return false;
    fill_value(scratch, len, key, version);
    return memcmp(scratch, v, len) == 0;
}

/* ---- keys ---------------------------------------------------------------------------------- */

/* With acknowledged writes, only this thread's own keys (see cstress_config.ack_fd). */
static uint64_t own_key(run *r, worker *w, uint64_t k) {
    const cstress_config *cfg = r->cfg;
    if (cfg->ack_fd < 0 || cfg->key_slots <= 0) return k;
    uint64_t m = (uint64_t)cfg->key_slots * (uint64_t)cfg->threads;
    uint64_t own = (uint64_t)cfg->key_slot * (uint64_t)cfg->threads + (uint64_t)(w->index - 1);
    k = k - k % m + own;
    while (k >= (uint64_t)cfg->entries && k >= m) k -= m;
    return k;
}

static uint64_t pick_key_any(run *r, worker *w) {
    uint64_t n = (uint64_t)r->cfg->entries;
    if (!r->cfg->zipf) return next_rand(&w->rng) % n;
    /* Continuous Zipf by inversion, then the rank spread over the key space (hot keys are not
     * neighbours in the store). */
    double u = unit(&w->rng), s = r->cfg->zipf_s, x;
    if (fabs(s - 1.0) < 1e-9) x = pow((double)n, u);
    else x = pow(r->zipf_norm * u + 1.0, 1.0 / (1.0 - s));
    uint64_t rank = (uint64_t)x;
    if (rank >= 1) rank -= 1;
    if (rank >= n) rank = n - 1;
    return (rank * 0x9E3779B97F4A7C15ULL) % n;
}

static uint64_t pick_key(run *r, worker *w) { return own_key(r, w, pick_key_any(r, w)); }

static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void note_error(worker *w, const char *what, const courier_error *err, int rc) {
    if (w->first_error[0]) return;
    snprintf(w->first_error, sizeof w->first_error, "%s: %s (%d): %.160s", what, courier_strerror(rc), rc,
             err ? err->message : "");
}

/* ---- the worker ---------------------------------------------------------------------------- */

static void *work(void *arg) {
    worker *w = arg;
    run *r = w->run;
    const cstress_config *cfg = r->cfg;
    size_t cap = (size_t)cfg->value_max;
    uint8_t *value = malloc(cap ? cap : 1), *scratch = malloc(cap ? cap : 1);
    int total_w = cfg->mix_get + cfg->mix_put + cfg->mix_remove;
    uint64_t version = (uint64_t)w->index << 40;
    char key[96];
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        if (cfg->ops > 0 && atomic_fetch_add(&r->issued, 1) >= cfg->ops) break;
        int64_t t = now_ns();
        if (r->end_ns && t >= r->end_ns) break;
        int sec = (int)((t - r->t0_ns) / 1000000000);
        if (sec >= MAX_SECONDS) break;
        if (sec > atomic_load_explicit(&r->last_second, memory_order_relaxed)) atomic_store(&r->last_second, sec);
        int roll = (int)(next_rand(&w->rng) % (uint64_t)total_w);
        int op = roll < cfg->mix_get ? OP_GET : roll < cfg->mix_get + cfg->mix_put ? OP_PUT : OP_REMOVE;
        uint64_t k = pick_key(r, w);
        courier_error err;
        int rc;
        bool failed = false;
        int64_t t1;
        if (cfg->http_base_url) {
            snprintf(key, sizeof key, "/cache?k=%llu&max_age=%lld", (unsigned long long)k,
                     (long long)(cfg->expiry_s > 0 ? cfg->expiry_s : 3600));
            courier_request *req = NULL;
            courier_request_new(&req, "GET", key);
            courier_request_set_cache_policy(req, op == OP_PUT ? COURIER_CACHE_WRITE_ONLY : COURIER_CACHE_HTTP);
            if (op == OP_REMOVE) {
                rc = courier_cache_remove(r->engine, req, &err);
                failed = rc != COURIER_OK && rc != COURIER_E_NOT_FOUND;
                t1 = now_ns();
            } else {
                courier_response *resp = NULL;
                rc = courier_send_sync(&resp, r->engine, req, &err);
                t1 = now_ns();
                failed = rc != COURIER_OK || courier_response_status(resp) != 200;
                if (!failed && op == OP_GET) {
                    if (courier_response_from_cache(resp)) count(w, sec, C_HITS);
                    else w->misses++;
                }
                courier_response_free(resp);
            }
            courier_request_free(req);
            if (failed) note_error(w, op == OP_REMOVE ? "remove" : "request", &err, rc);
        } else {
            snprintf(key, sizeof key, "stress/%llu", (unsigned long long)k);
            if (op == OP_GET) {
                courier_response *resp = NULL;
                rc = courier_cache_get_key(&resp, r->engine, key, 0, &err);
                t1 = now_ns();
                if (rc == COURIER_OK) {
                    size_t len = 0;
                    const uint8_t *b = courier_response_body(resp, &len);
                    if (len > cap || !value_whole(b, len, k, scratch)) {
                        w->torn++;
                        failed = true;
                        if (!w->first_error[0])
                            snprintf(w->first_error, sizeof w->first_error, "get %s: the value read is not whole", key);
                    } else {
                        count(w, sec, C_HITS);
                    }
                } else if (rc == COURIER_E_NOT_FOUND) {
                    w->misses++;
                } else {
                    failed = true;
                    note_error(w, "get", &err, rc);
                }
                courier_response_free(resp);
            } else if (op == OP_PUT) {
                size_t len = (size_t)cfg->value_min;
                if (cfg->value_max > cfg->value_min)
                    len += (size_t)(next_rand(&w->rng) % (uint64_t)(cfg->value_max - cfg->value_min + 1));
                uint64_t v = cfg->ack_fd >= 0 ? wall_ns() : ++version;
                fill_value(value, len, k, v);
                t = now_ns(); /* the value is made before the clock starts */
                rc = courier_cache_put_key(r->engine, key, 200, NULL, NULL, 0, value, len, (cfg->expiry_s) * 1000, &err);
                t1 = now_ns();
                if (rc != COURIER_OK) {
                    failed = true;
                    note_error(w, "put", &err, rc);
                } else if (cfg->ack_fd >= 0) {
                    uint64_t rec[2] = {k, v};
                    if (write(cfg->ack_fd, rec, sizeof rec) != (ssize_t)sizeof rec) failed = true;
                }
            } else {
                rc = courier_cache_remove_key(r->engine, key, &err);
                t1 = now_ns();
                if (rc != COURIER_OK && rc != COURIER_E_NOT_FOUND) {
                    failed = true;
                    note_error(w, "remove", &err, rc);
                }
            }
        }
        count(w, sec, C_OPS);
        count(w, sec, op == OP_GET ? C_GETS : op == OP_PUT ? C_PUTS : C_REMOVES);
        if (failed) count(w, sec, C_ERRORS);
        if (op != OP_REMOVE) record(w, sec, op == OP_GET ? 0 : 1, t1 - t);
    }
    free(value);
    free(scratch);
    return NULL;
}

static int64_t data_file_bytes(const char *store_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cache/data.mdb", store_dir);
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

static int64_t total_of(run *r, int sec, int which) {
    int64_t n = 0;
    for (int t = 0; t < r->cfg->threads; t++) n += atomic_load_explicit(&r->workers[t].counts[sec][which], memory_order_relaxed);
    return n;
}

static int64_t max_of(run *r, int sec, int which) {
    int64_t m = 0;
    for (int t = 0; t < r->cfg->threads; t++) {
        int64_t v = atomic_load_explicit(&r->workers[t].max_ns[sec][which], memory_order_relaxed);
        if (v > m) m = v;
    }
    return m;
}

/* RssAnon of /proc/self/status in bytes, or 0. */
static int64_t rss_anon(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %lld kB", &kb) == 1) break;
    fclose(f);
    return (int64_t)kb * 1024;
}

int cstress_run(const cstress_config *cfg, cstress_result *out, void (*progress)(const cstress_live *, void *),
                void *user) {
    memset(out, 0, sizeof *out);
    if (cfg->threads < 1 || cfg->entries < 1 || cfg->value_min < 16 || cfg->value_max < cfg->value_min ||
        cfg->mix_get + cfg->mix_put + cfg->mix_remove <= 0 || (cfg->ops <= 0 && cfg->duration_s <= 0)) {
        snprintf(out->first_error, sizeof out->first_error, "invalid settings");
        return COURIER_E_INVALID_ARGUMENT;
    }
    courier_config *cc = NULL;
    courier_error err;
    int rc = courier_config_new(&cc);
    if (rc == COURIER_OK) rc = courier_config_set_store_dir(cc, cfg->store_dir);
    if (rc == COURIER_OK && cfg->size_limit > 0) rc = courier_config_set_cache_max_bytes(cc, cfg->size_limit);
    if (rc == COURIER_OK) rc = courier_config_set_cache_durability(cc, cfg->durability);
    if (rc == COURIER_OK && cfg->http_base_url) rc = courier_config_set_base_url(cc, cfg->http_base_url);
    if (rc == COURIER_OK) rc = courier_config_set_max_connections_per_host(cc, cfg->threads + 2);
    run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    if (rc == COURIER_OK) rc = courier_engine_open(&r.engine, cc, &err);
    courier_config_free(cc);
    if (rc != COURIER_OK) {
        snprintf(out->first_error, sizeof out->first_error, "cannot open the engine: %s", courier_strerror(rc));
        return rc;
    }
    if (cfg->zipf && fabs(cfg->zipf_s - 1.0) >= 1e-9) r.zipf_norm = pow((double)cfg->entries, 1.0 - cfg->zipf_s) - 1.0;
    /* Open the store before the clock starts (its first use opens it). */
    int64_t dummy = 0;
    courier_cache_size(&dummy, NULL, r.engine, NULL);
    out->file_bytes_start = data_file_bytes(cfg->store_dir);
    r.workers = calloc((size_t)cfg->threads, sizeof *r.workers);
    if (!r.workers) {
        courier_engine_close(r.engine);
        return COURIER_E_NO_MEMORY;
    }
    r.t0_ns = now_ns();
    r.end_ns = cfg->duration_s > 0 ? r.t0_ns + (int64_t)(cfg->duration_s * 1e9) : 0;
    int started = 0;
    for (int t = 0; t < cfg->threads; t++) {
        worker *w = &r.workers[t];
        w->run = &r;
        w->index = t + 1;
        w->rng = cfg->seed * 0x100000001B3ULL + (uint64_t)t * 0x9E3779B97F4A7C15ULL + 1;
        if (pthread_create(&w->thread, NULL, work, w) != 0) break;
        started++;
    }
    if (started < cfg->threads) atomic_store(&r.stop, 1);
    /* Progress (every 250 ms) and the private memory (every 20 ms), on this thread, while the
     * workers run. */
    int64_t last_progress = now_ns();
    out->rss_anon_max = rss_anon();
    for (;;) {
        bool done = true;
        for (int t = 0; t < started && done; t++) {
            if (!r.workers[t].thread) continue; /* joined already */
            if (pthread_tryjoin_np(r.workers[t].thread, NULL) == EBUSY) done = false;
            else r.workers[t].thread = 0;
        }
        if (done) break;
        usleep(20000);
        int64_t rss = rss_anon();
        if (rss > out->rss_anon_max) out->rss_anon_max = rss;
        if (progress && now_ns() - last_progress >= 250000000) {
            last_progress = now_ns();
            cstress_live live;
            memset(&live, 0, sizeof live);
            int last = atomic_load(&r.last_second);
            for (int s = 0; s <= last; s++) {
                live.ops += total_of(&r, s, C_OPS);
                live.errors += total_of(&r, s, C_ERRORS);
            }
            if (last > 0) {
                uint64_t *h = calloc(NBUCKETS, sizeof *h);
                if (h) {
                    int64_t p[3];
                    merge_second(&r, last - 1, 0, h);
                    percentiles(h, p);
                    live.last_get_p99 = p[1];
                    free(h);
                }
            }
            live.elapsed_s = (double)(now_ns() - r.t0_ns) / 1e9;
            progress(&live, user);
        }
    }
    for (int t = 0; t < started; t++)
        if (r.workers[t].thread) pthread_join(r.workers[t].thread, NULL);
    out->seconds = (double)(now_ns() - r.t0_ns) / 1e9;

    int nsec = atomic_load(&r.last_second) + 1;
    out->series = calloc((size_t)nsec, sizeof *out->series);
    out->nseconds = out->series ? nsec : 0;
    uint64_t *all[2] = {calloc(NBUCKETS, sizeof(uint64_t)), calloc(NBUCKETS, sizeof(uint64_t))};
    uint64_t *h = calloc(NBUCKETS, sizeof(uint64_t));
    for (int s = 0; s < nsec; s++) {
        cstress_second sec;
        memset(&sec, 0, sizeof sec);
        sec.ops = total_of(&r, s, C_OPS);
        sec.gets = total_of(&r, s, C_GETS);
        sec.puts = total_of(&r, s, C_PUTS);
        sec.removes = total_of(&r, s, C_REMOVES);
        sec.hits = total_of(&r, s, C_HITS);
        sec.errors = total_of(&r, s, C_ERRORS);
        for (int which = 0; which < 2 && h && all[which]; which++) {
            memset(h, 0, NBUCKETS * sizeof *h);
            merge_second(&r, s, which, h);
            for (int i = 0; i < NBUCKETS; i++) all[which][i] += h[i];
            int64_t p[3];
            percentiles(h, p);
            int64_t mx = max_of(&r, s, which);
            for (int k = 0; k < 3; k++)
                if (p[k] > mx) p[k] = mx; /* a bucket's middle may lie above the largest value in it */
            if (which == 0) {
                sec.get_p50 = p[0], sec.get_p99 = p[1], sec.get_p999 = p[2], sec.get_max = mx;
                if (mx > out->get_max) out->get_max = mx;
            } else {
                sec.put_p50 = p[0], sec.put_p99 = p[1], sec.put_p999 = p[2], sec.put_max = mx;
                if (mx > out->put_max) out->put_max = mx;
            }
        }
        if (out->series) out->series[s] = sec;
        out->ops += sec.ops;
        out->gets += sec.gets;
        out->puts += sec.puts;
        out->removes += sec.removes;
        out->hits += sec.hits;
        out->errors += sec.errors;
    }
    int64_t p[3];
    if (all[0]) {
        percentiles(all[0], p);
        for (int k = 0; k < 3; k++)
            if (p[k] > out->get_max) p[k] = out->get_max;
        out->get_p50 = p[0], out->get_p99 = p[1], out->get_p999 = p[2];
    }
    if (all[1]) {
        percentiles(all[1], p);
        for (int k = 0; k < 3; k++)
            if (p[k] > out->put_max) p[k] = out->put_max;
        out->put_p50 = p[0], out->put_p99 = p[1], out->put_p999 = p[2];
    }
    free(all[0]);
    free(all[1]);
    free(h);
    for (int t = 0; t < cfg->threads; t++) {
        worker *w = &r.workers[t];
        out->misses += w->misses;
        out->torn += w->torn;
        if (!out->first_error[0] && w->first_error[0]) memcpy(out->first_error, w->first_error, sizeof w->first_error);
        for (int s = 0; s < MAX_SECONDS; s++) {
            free(w->hist[s][0]);
            free(w->hist[s][1]);
        }
    }
    free(r.workers);
    courier_cache_stats st = {.size = sizeof st};
    if (courier_cache_get_stats(&st, r.engine, NULL) == COURIER_OK) {
        out->evictions = st.evictions;
        out->write_failures = st.write_failures;
    }
    courier_engine_close(r.engine);
    out->file_bytes_end = data_file_bytes(cfg->store_dir);
    return COURIER_OK;
}

void cstress_result_free(cstress_result *r) {
    if (!r) return;
    free(r->series);
    r->series = NULL;
    r->nseconds = 0;
}

/* ---- prefill ------------------------------------------------------------------------------- */

typedef struct prefill_arg {
    const cstress_config *cfg;
    courier_engine *engine;
    int index, of;
    int rc;
    char error[200];
} prefill_arg;

static void *prefill_work(void *p) {
    prefill_arg *a = p;
    const cstress_config *cfg = a->cfg;
    uint8_t *value = malloc((size_t)cfg->value_max);
    char key[96];
    uint64_t rng = (uint64_t)a->index * 0x9E3779B97F4A7C15ULL + 17;
    for (int64_t k = a->index; value && k < cfg->entries && a->rc == 0; k += a->of) {
        size_t len = (size_t)cfg->value_min;
        if (cfg->value_max > cfg->value_min) len += (size_t)(next_rand(&rng) % (uint64_t)(cfg->value_max - cfg->value_min + 1));
        fill_value(value, len, (uint64_t)k, 0);
        snprintf(key, sizeof key, "stress/%lld", (long long)k);
        courier_error err;
        int rc = courier_cache_put_key(a->engine, key, 200, NULL, NULL, 0, value, len, (cfg->expiry_s) * 1000, &err);
        if (rc != COURIER_OK) {
            a->rc = rc;
            snprintf(a->error, sizeof a->error, "prefill put: %.150s", err.message);
        }
    }
    free(value);
    return NULL;
}

int cstress_prefill(const cstress_config *cfg, char *error, size_t cap) {
    courier_config *cc = NULL;
    courier_engine *e = NULL;
    courier_error err;
    int rc = courier_config_new(&cc);
    if (rc == COURIER_OK) rc = courier_config_set_store_dir(cc, cfg->store_dir);
    if (rc == COURIER_OK && cfg->size_limit > 0) rc = courier_config_set_cache_max_bytes(cc, cfg->size_limit);
    if (rc == COURIER_OK) rc = courier_config_set_cache_durability(cc, COURIER_CACHE_FAST);
    if (rc == COURIER_OK) rc = courier_engine_open(&e, cc, &err);
    courier_config_free(cc);
    if (rc != COURIER_OK) {
        snprintf(error, cap, "cannot open the engine: %s", courier_strerror(rc));
        return rc;
    }
    int n = cfg->threads > 0 ? cfg->threads : 1;
    prefill_arg *args = calloc((size_t)n, sizeof *args);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int started = 0;
    for (int i = 0; args && th && i < n; i++) {
        args[i] = (prefill_arg){.cfg = cfg, .engine = e, .index = i, .of = n};
        if (pthread_create(&th[i], NULL, prefill_work, &args[i]) != 0) break;
        started++;
    }
    rc = started == n ? COURIER_OK : COURIER_E_INTERNAL;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (rc == COURIER_OK && args[i].rc) {
            rc = args[i].rc;
            snprintf(error, cap, "%s", args[i].error);
        }
    }
    free(args);
    free(th);
    courier_engine_close(e);
    return rc;
}

/* ---- acknowledged writes ------------------------------------------------------------------- */

int cstress_check_acks(const char *store_dir, int64_t entries, const char *const *paths, size_t n, int64_t *checked,
                       int64_t *lost, int64_t *torn, char *error, size_t cap) {
    *checked = *lost = *torn = 0;
    uint64_t *acked = calloc((size_t)entries, sizeof *acked);
    if (!acked) return COURIER_E_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) continue; /* a worker killed before it opened its file acknowledged nothing */
        uint64_t rec[2];
        while (fread(rec, sizeof rec, 1, f) == 1)
            if (rec[0] < (uint64_t)entries && rec[1] > acked[rec[0]]) acked[rec[0]] = rec[1];
        fclose(f);
    }
    courier_config *cc = NULL;
    courier_engine *e = NULL;
    courier_error err;
    int rc = courier_config_new(&cc);
    if (rc == COURIER_OK) rc = courier_config_set_store_dir(cc, store_dir);
    if (rc == COURIER_OK) rc = courier_engine_open(&e, cc, &err);
    courier_config_free(cc);
    if (rc != COURIER_OK) {
        free(acked);
        snprintf(error, cap, "cannot open the engine: %s", courier_strerror(rc));
        return rc;
    }
    char key[96];
    uint8_t *scratch = NULL;
    size_t scratch_cap = 0;
    for (int64_t k = 0; k < entries && rc == COURIER_OK; k++) {
        if (!acked[k]) continue;
        (*checked)++;
        snprintf(key, sizeof key, "stress/%lld", (long long)k);
        courier_response *resp = NULL;
        int grc = courier_cache_get_key(&resp, e, key, COURIER_CACHE_ALLOW_STALE, &err);
        if (grc == COURIER_E_NOT_FOUND) {
            (*lost)++;
        } else if (grc != COURIER_OK) {
            rc = grc;
            snprintf(error, cap, "get %s: %.150s", key, err.message);
        } else {
            size_t len = 0;
            const uint8_t *b = courier_response_body(resp, &len);
            if (len > scratch_cap) {
                free(scratch);
                scratch = malloc(len);
                scratch_cap = scratch ? len : 0;
            }
            uint64_t version = 0;
            if (len >= 16) memcpy(&version, b + 8, 8);
            if (!scratch || !value_whole(b, len, (uint64_t)k, scratch)) (*torn)++;
            else if (version < acked[k]) (*lost)++;
        }
        courier_response_free(resp);
    }
    free(scratch);
    free(acked);
    courier_engine_close(e);
    return rc;
}
