/*
 * lmdb_cache_bench.c — the cache benchmark's C side: raw LMDB with the sizes and durability the
 * Courier cache uses (the ceiling), and the Courier C cache API (courier_cache_put_key /
 * courier_cache_get_key) driven from C; and readers that let the caller measure their gets side by
 * side, in alternating chunks. See cbench.h.
 */
#define _GNU_SOURCE 1
#include "cbench.h"

#include <courier.h>
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cbench_cache_key(long i, char out[33]) { snprintf(out, 33, "cache-bench-key-%016ld", i); }

static void body_for(long i, char *out, size_t len) {
    for (size_t k = 0; k < len; k++) out[k] = (char)('a' + (i + (long)k) % 26);
}

/* A key index sequence that visits keys in a scattered order. */
static long pick(uint64_t *state, long n) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (long)((*state >> 33) % (uint64_t)n);
}

static long gcd_l(long a, long b) {
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct getter {
    int (*get)(void *ctx, long i);
    void *ctx;
    long entries;
    long gets;
    uint64_t seed;
    long errors;
    double seconds;
} getter;

static void *run_getter(void *arg) {
    getter *g = arg;
    uint64_t s = g->seed;
    double t0 = now_s();
    for (long i = 0; i < g->gets; i++)
        if (g->get(g->ctx, pick(&s, g->entries))) g->errors++;
    g->seconds = now_s() - t0;
    return NULL;
}

/* gets/s on 1 and 2 threads, and the median latency of single gets. */
static void measure_gets(int (*get)(void *, long), void *ctx1, void *ctx2, long entries, long gets,
                         cbench_cache_result *out) {
    getter a = {get, ctx1, entries, gets, 12345, 0, 0};
    run_getter(&a);
    out->get_ops = a.seconds > 0 ? (double)gets / a.seconds : 0;
    out->errors += a.errors;
    getter b1 = {get, ctx1, entries, gets, 777, 0, 0}, b2 = {get, ctx2, entries, gets, 999, 0, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, run_getter, &b2) == 0) {
        run_getter(&b1);
        pthread_join(th, NULL);
        double wall = b1.seconds > b2.seconds ? b1.seconds : b2.seconds;
        out->get_ops_2t = wall > 0 ? (double)(2 * gets) / wall : 0;
        out->errors += b1.errors + b2.errors;
    }
    enum { SAMPLES = 20001 };
    static double lat[SAMPLES];
    uint64_t s = 4242;
    for (int i = 0; i < SAMPLES; i++) {
        double t0 = now_s();
        if (get(ctx1, pick(&s, entries))) out->errors++;
        lat[i] = (now_s() - t0) * 1e9;
    }
    qsort(lat, SAMPLES, sizeof lat[0], cmp_double);
    out->get_ns_p50 = lat[SAMPLES / 2];
}

/* ---- raw LMDB -------------------------------------------------------------------------------- */

typedef struct raw_ctx {
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *txn; /* a reset read transaction, renewed per get */
    int nocopy;   /* only look at the value in the map (the ceiling as LMDB's own benchmarks take it) */
} raw_ctx;

static int raw_get(void *p, long i) {
    raw_ctx *c = p;
    char key[33];
    cbench_cache_key(i, key);
    if (mdb_txn_renew(c->txn)) return 1;
    MDB_val k = {32, key}, v;
    int rc = mdb_get(c->txn, c->dbi, &k, &v);
    if (rc == 0 && c->nocopy) {
        /* The first and last bytes only: the value stays in the map, unread. */
        volatile unsigned char sink = ((const unsigned char *)v.mv_data)[0] ^
                                      ((const unsigned char *)v.mv_data)[v.mv_size - 1];
        (void)sink;
    } else if (rc == 0) { /* the caller gets its own copy of the value, as a cache client would */
        void *copy = malloc(v.mv_size);
        if (copy) memcpy(copy, v.mv_data, v.mv_size);
        /* Without this barrier gcc and clang drop the malloc, the memcpy and the free altogether
         * (the copy is never read): the "ceiling" then never touched the value's bytes. */
        __asm__ __volatile__("" : : "r"(copy) : "memory");
        free(copy);
    }
    mdb_txn_reset(c->txn);
    return rc != 0;
}

static unsigned raw_flags(int durability) {
    return durability == COURIER_CACHE_FAST ? MDB_NOSYNC : durability == COURIER_CACHE_SYNCED ? 0u : MDB_NOMETASYNC;
}

int cbench_cache_raw(const char *dir, long entries, long timed_puts, long gets, int durability, cbench_cache_result *out) {
    memset(out, 0, sizeof *out);
    mkdir(dir, 0700);
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    int rc = mdb_env_create(&env);
    if (!rc) rc = mdb_env_set_mapsize(env, (size_t)(entries + 1000) * 4096 + ((size_t)64 << 20));
    if (!rc) rc = mdb_env_open(env, dir, MDB_NOTLS | raw_flags(durability), 0600);
    if (!rc) rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (!rc) rc = mdb_dbi_open(txn, NULL, 0, &dbi);
    if (!rc) rc = mdb_txn_commit(txn);
    if (rc) {
        snprintf(out->first_error, sizeof out->first_error, "lmdb: %s", mdb_strerror(rc));
        if (env) mdb_env_close(env);
        return -1;
    }
    char key[33], body[1024];
    if (timed_puts > entries) timed_puts = entries;
    double t0 = now_s();
    for (long i = 0; i < timed_puts; i++) { /* one put, one commit */
        cbench_cache_key(i, key);
        body_for(i, body, sizeof body);
        MDB_val k = {32, key}, v = {sizeof body, body};
        if (mdb_txn_begin(env, NULL, 0, &txn) || mdb_put(txn, dbi, &k, &v, 0) || mdb_txn_commit(txn)) out->errors++;
    }
    double dt = now_s() - t0;
    out->put_ops = dt > 0 ? (double)timed_puts / dt : 0;
    for (long i = timed_puts; i < entries; i += 1000) { /* the rest, untimed, in big transactions */
        if (mdb_txn_begin(env, NULL, 0, &txn)) break;
        for (long j = i; j < i + 1000 && j < entries; j++) {
            cbench_cache_key(j, key);
            body_for(j, body, sizeof body);
            MDB_val k = {32, key}, v = {sizeof body, body};
            mdb_put(txn, dbi, &k, &v, 0);
        }
        mdb_txn_commit(txn);
    }
    if (gets > 0) {
        raw_ctx c1 = {env, dbi, NULL, 0}, c2 = {env, dbi, NULL, 0};
        mdb_txn_begin(env, NULL, MDB_RDONLY, &c1.txn);
        mdb_txn_begin(env, NULL, MDB_RDONLY, &c2.txn);
        mdb_txn_reset(c1.txn);
        mdb_txn_reset(c2.txn);
        measure_gets(raw_get, &c1, &c2, entries, gets, out);
        mdb_txn_abort(c1.txn);
        mdb_txn_abort(c2.txn);
    }
    mdb_env_close(env);
    return 0;
}

/* ---- the Courier C cache API -------------------------------------------------------------------- */

static int courier_get(void *p, long i) {
    courier_engine *e = p;
    char key[33];
    cbench_cache_key(i, key);
    courier_response *r = NULL;
    int rc = courier_cache_get_key(&r, e, key, 0, NULL);
    size_t len = 0;
    if (r) (void)courier_response_body(r, &len);
    courier_response_free(r);
    return rc != COURIER_OK || len != 1024;
}

int cbench_cache_courier(const char *dir, long entries, long timed_puts, long gets, int durability,
                         cbench_cache_result *out) {
    memset(out, 0, sizeof *out);
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, dir);
    courier_config_set_cache_durability(cfg, durability);
    courier_config_set_cache_max_bytes(cfg, (int64_t)(entries + 1000) * 2048 + ((int64_t)64 << 20));
    int rc = courier_engine_open(&e, cfg, &err);
    courier_config_free(cfg);
    if (rc) {
        snprintf(out->first_error, sizeof out->first_error, "%s", err.message);
        return rc;
    }
    static const char *const names[] = {"Content-Type"};
    static const char *const values[] = {"application/octet-stream"};
    char key[33], body[1024];
    if (timed_puts > entries) timed_puts = entries;
    double t0 = now_s();
    for (long i = 0; i < entries; i++) {
        if (i == timed_puts) {
            double dt = now_s() - t0;
            out->put_ops = dt > 0 ? (double)timed_puts / dt : 0;
        }
        cbench_cache_key(i, key);
        body_for(i, body, sizeof body);
        if (courier_cache_put_key(e, key, 200, names, values, 1, body, sizeof body, 3600000, &err) != COURIER_OK) {
            if (!out->errors++) snprintf(out->first_error, sizeof out->first_error, "%s", err.message);
        }
    }
    if (timed_puts == entries) {
        double dt = now_s() - t0;
        out->put_ops = dt > 0 ? (double)timed_puts / dt : 0;
    }
    courier_engine_close(e);
    if (gets > 0) {
        /* Reads under the cache's default (durable) setting, whatever the puts used. */
        courier_config_new(&cfg);
        courier_config_set_store_dir(cfg, dir);
        courier_config_set_cache_max_bytes(cfg, (int64_t)(entries + 1000) * 2048 + ((int64_t)64 << 20));
        rc = courier_engine_open(&e, cfg, &err);
        courier_config_free(cfg);
        if (rc) return rc;
        measure_gets(courier_get, e, e, entries, gets, out);
        courier_engine_close(e);
    }
    return 0;
}

/* ---- writers: puts measured side by side -------------------------------------------------------- */

struct cbench_cache_writer {
    int kind;
    long capacity;
    long step; /* scattered raw puts: key i*step mod capacity */
    MDB_env *env;
    MDB_dbi dbi;
    courier_engine *engine;
};

cbench_cache_writer *cbench_cache_writer_open(int kind, const char *dir, long capacity, int durability, int scattered) {
    cbench_cache_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->kind = kind;
    w->capacity = capacity;
    w->step = 1;
    if (scattered && capacity > 2) {
        w->step = 2654435761 % capacity;
        while (w->step < 2 || gcd_l(w->step, capacity) != 1) w->step++;
    }
    mkdir(dir, 0700);
    if (kind == CBENCH_CACHE_RAW) {
        MDB_txn *txn = NULL;
        int rc = mdb_env_create(&w->env);
        if (!rc) rc = mdb_env_set_mapsize(w->env, (size_t)(capacity + 1000) * 4096 + ((size_t)64 << 20));
        if (!rc) rc = mdb_env_open(w->env, dir, MDB_NOTLS | raw_flags(durability), 0600);
        if (!rc) rc = mdb_txn_begin(w->env, NULL, 0, &txn);
        if (!rc) rc = mdb_dbi_open(txn, NULL, 0, &w->dbi);
        if (!rc) rc = mdb_txn_commit(txn);
        if (rc) {
            cbench_cache_writer_close(w);
            return NULL;
        }
        return w;
    }
    courier_config *cfg = NULL;
    courier_error err;
    if (courier_config_new(&cfg) != COURIER_OK) {
        free(w);
        return NULL;
    }
    courier_config_set_store_dir(cfg, dir);
    courier_config_set_cache_durability(cfg, durability);
    courier_config_set_cache_max_bytes(cfg, (int64_t)(capacity + 1000) * 2048 + ((int64_t)64 << 20));
    int rc = courier_engine_open(&w->engine, cfg, &err);
    courier_config_free(cfg);
    if (rc) {
        free(w);
        return NULL;
    }
    return w;
}

long cbench_cache_writer_puts(cbench_cache_writer *w, long from, long n, double *wall_s, double *cpu_s) {
    if (!w || n <= 0) return 0;
    static const char *const names[] = {"Content-Type"};
    static const char *const values[] = {"application/octet-stream"};
    char key[33], body[1024];
    long errors = 0;
    double c0 = cbench_thread_cpu_seconds(), t0 = now_s();
    for (long i = from; i < from + n; i++) { /* one put, one commit */
        long j = (long)(((unsigned long long)i * (unsigned long long)w->step) % (unsigned long long)w->capacity);
        cbench_cache_key(j, key);
        body_for(j, body, sizeof body);
        if (w->kind == CBENCH_CACHE_RAW) {
            MDB_txn *txn;
            MDB_val k = {32, key}, v = {sizeof body, body};
            if (mdb_txn_begin(w->env, NULL, 0, &txn)) {
                errors++;
                continue;
            }
            if (mdb_put(txn, w->dbi, &k, &v, 0)) {
                mdb_txn_abort(txn);
                errors++;
            } else if (mdb_txn_commit(txn)) {
                errors++;
            }
        } else if (courier_cache_put_key(w->engine, key, 200, names, values, 1, body, sizeof body, 3600000, NULL) !=
                   COURIER_OK) {
            errors++;
        }
    }
    *wall_s += now_s() - t0;
    *cpu_s += cbench_thread_cpu_seconds() - c0;
    return errors;
}

void cbench_cache_writer_close(cbench_cache_writer *w) {
    if (!w) return;
    if (w->env) mdb_env_close(w->env);
    if (w->engine) courier_engine_close(w->engine);
    free(w);
}

/* ---- readers: gets measured side by side -------------------------------------------------------- */

double cbench_thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct cbench_cache_reader {
    int kind;
    long entries;
    MDB_env *env;   /* raw */
    raw_ctx raw[2]; /* one reset read transaction per thread */
    courier_engine *engine;
};

cbench_cache_reader *cbench_cache_reader_open(int kind, const char *dir, long entries) {
    cbench_cache_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->kind = kind;
    r->entries = entries;
    if (kind == CBENCH_CACHE_RAW) {
        MDB_txn *txn = NULL;
        MDB_dbi dbi;
        int rc = mdb_env_create(&r->env);
        if (!rc) rc = mdb_env_set_mapsize(r->env, (size_t)(entries + 1000) * 4096 + ((size_t)64 << 20));
        if (!rc) rc = mdb_env_open(r->env, dir, MDB_NOTLS | raw_flags(COURIER_CACHE_DURABLE), 0600);
        if (!rc) rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &txn);
        if (!rc) rc = mdb_dbi_open(txn, NULL, 0, &dbi);
        if (txn) mdb_txn_abort(txn);
        for (int i = 0; i < 2 && !rc; i++) {
            r->raw[i].env = r->env;
            r->raw[i].dbi = dbi;
            rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &r->raw[i].txn);
            if (!rc) mdb_txn_reset(r->raw[i].txn);
        }
        if (rc) {
            cbench_cache_reader_close(r);
            return NULL;
        }
        return r;
    }
    courier_config *cfg = NULL;
    courier_error err;
    if (courier_config_new(&cfg) != COURIER_OK) {
        free(r);
        return NULL;
    }
    courier_config_set_store_dir(cfg, dir);
    courier_config_set_cache_max_bytes(cfg, (int64_t)(entries + 1000) * 2048 + ((int64_t)64 << 20));
    int rc = courier_engine_open(&r->engine, cfg, &err);
    courier_config_free(cfg);
    if (rc) {
        free(r);
        return NULL;
    }
    return r;
}

void cbench_cache_reader_set_nocopy(cbench_cache_reader *r, int nocopy) {
    if (!r || r->kind != CBENCH_CACHE_RAW) return;
    r->raw[0].nocopy = r->raw[1].nocopy = nocopy != 0;
}

void cbench_cache_reader_close(cbench_cache_reader *r) {
    if (!r) return;
    for (int i = 0; i < 2; i++)
        if (r->raw[i].txn) mdb_txn_abort(r->raw[i].txn);
    if (r->env) mdb_env_close(r->env);
    if (r->engine) courier_engine_close(r->engine);
    free(r);
}

typedef struct chunk_run {
    getter g;
    double cpu;
} chunk_run;

static void *run_chunk(void *arg) {
    chunk_run *c = arg;
    double c0 = cbench_thread_cpu_seconds();
    run_getter(&c->g);
    c->cpu = cbench_thread_cpu_seconds() - c0;
    return NULL;
}

long cbench_cache_reader_gets(cbench_cache_reader *r, long n, int threads, uint64_t seed, double *wall_s,
                              double *cpu_s) {
    if (!r || n <= 0) return 0;
    if (threads < 1) threads = 1;
    if (threads > 2) threads = 2;
    int (*get)(void *, long) = r->kind == CBENCH_CACHE_RAW ? raw_get : courier_get;
    chunk_run runs[2];
    for (int i = 0; i < threads; i++) {
        void *ctx = r->kind == CBENCH_CACHE_RAW ? (void *)&r->raw[i] : (void *)r->engine;
        runs[i] = (chunk_run){{get, ctx, r->entries, n, seed + 7919u * (uint64_t)i, 0, 0}, 0};
    }
    double t0 = now_s();
    pthread_t th;
    int second = threads == 2 && pthread_create(&th, NULL, run_chunk, &runs[1]) == 0;
    run_chunk(&runs[0]);
    if (second) pthread_join(th, NULL);
    *wall_s += now_s() - t0;
    long errors = runs[0].g.errors;
    *cpu_s += runs[0].cpu;
    if (second) {
        errors += runs[1].g.errors;
        *cpu_s += runs[1].cpu;
    } else if (threads == 2) {
        errors += n; /* the second thread could not start: its gets count as failed */
    }
    return errors;
}

double cbench_cache_reader_p50(cbench_cache_reader *r, int samples, uint64_t seed) {
    if (!r || samples <= 0) return 0;
    double *lat = malloc((size_t)samples * sizeof *lat);
    if (!lat) return 0;
    int (*get)(void *, long) = r->kind == CBENCH_CACHE_RAW ? raw_get : courier_get;
    void *ctx = r->kind == CBENCH_CACHE_RAW ? (void *)&r->raw[0] : (void *)r->engine;
    uint64_t s = seed;
    for (int i = 0; i < samples; i++) {
        long k = pick(&s, r->entries);
        double t0 = now_s();
        (void)get(ctx, k);
        lat[i] = (now_s() - t0) * 1e9;
    }
    qsort(lat, (size_t)samples, sizeof lat[0], cmp_double);
    double p50 = lat[samples / 2];
    free(lat);
    return p50;
}
