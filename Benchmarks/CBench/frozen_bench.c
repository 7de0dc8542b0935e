/*
 * frozen_bench.c — the frozen-request benchmark's C side: the ceiling (raw LMDB synced commits,
 * one put each of a value the size of a frozen request, in a fresh environment opened as the journal
 * opens its own: LMDB's default durability, every commit synced),
 * freezing through the Courier C API (sends while offline, each answered COURIER_E_FROZEN after
 * its durable commit), replay of a store's frozen requests to a server, and the engine's own
 * transport rate for the same requests at the same concurrency.
 */
#include "cbench.h"

#include <courier.h>
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double fb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fb_clear(cbench_result *out) { memset(out, 0, sizeof *out); }

static void fb_note(cbench_result *out, const char *what) {
    if (!out->first_error[0]) snprintf(out->first_error, sizeof out->first_error, "%s", what);
}

/* ---- the ceiling ---------------------------------------------------------------------------- */

int cbench_lmdb_sync_commits(const char *dir, long n, size_t value_bytes, cbench_result *out) {
    fb_clear(out);
    if (!dir || n <= 0) return -EINVAL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fb_note(out, strerror(errno));
        return -errno;
    }
    MDB_env *env = NULL;
    int rc = mdb_env_create(&env);
    /* As journal.c opens the journal: default durability (synced commits), MDB_NOTLS. */
    if (!rc) rc = mdb_env_set_maxdbs(env, 10);
    if (!rc) rc = mdb_env_set_mapsize(env, (size_t)2 << 30);
    if (!rc) rc = mdb_env_open(env, dir, MDB_NOTLS, 0600);
    if (rc) {
        fb_note(out, mdb_strerror(rc));
        if (env) mdb_env_close(env);
        return -EIO;
    }
    char *value = malloc(value_bytes ? value_bytes : 1);
    if (!value) {
        mdb_env_close(env);
        return -ENOMEM;
    }
    memset(value, 'v', value_bytes ? value_bytes : 1);
    MDB_dbi dbi = 0;
    double t0 = fb_now(), c0 = cbench_process_cpu_seconds();
    for (long i = 0; i < n; i++) {
        MDB_txn *txn = NULL;
        uint8_t key[8];
        for (int b = 7, v = 0; b >= 0; b--, v++) key[b] = (uint8_t)((uint64_t)(i + 1) >> (8 * v));
        MDB_val k = {8, key}, v = {value_bytes, value};
        rc = mdb_txn_begin(env, NULL, 0, &txn);
        if (!rc && i == 0) rc = mdb_dbi_open(txn, NULL, 0, &dbi);
        /* Numbered records, appended: as the journal writes a frozen request. */
        if (!rc) rc = mdb_put(txn, dbi, &k, &v, MDB_APPEND);
        if (!rc) rc = mdb_txn_commit(txn);
        else if (txn) mdb_txn_abort(txn);
        if (rc) {
            out->errors++;
            fb_note(out, mdb_strerror(rc));
            break;
        }
        out->completed++;
    }
    out->seconds = fb_now() - t0;
    out->cpu_seconds = cbench_process_cpu_seconds() - c0;
    free(value);
    mdb_env_close(env);
    return rc ? -EIO : 0;
}

/* ---- sends that keep `concurrency` in flight -------------------------------------------------- */

typedef struct fb_phase {
    courier_engine *engine;
    courier_request *request;
    long total;
    int expect;          /* the code every completion should have */
    atomic_long started;
    atomic_long completed;
    atomic_long errors;
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
    char first_error[256];
} fb_phase;

static void fb_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user);

static void fb_next(fb_phase *p) {
    long k = atomic_fetch_add(&p->started, 1);
    if (k >= p->total) return;
    courier_error err;
    if (courier_send(NULL, p->engine, p->request, fb_done, p, &err) != COURIER_OK) {
        /* Counted as finished so the phase ends. */
        atomic_fetch_add(&p->errors, 1);
        pthread_mutex_lock(&p->m);
        if (!p->first_error[0]) snprintf(p->first_error, sizeof p->first_error, "%s", err.message);
        if (atomic_fetch_add(&p->completed, 1) + 1 == p->total) {
            p->done = 1;
            pthread_cond_broadcast(&p->c);
        }
        pthread_mutex_unlock(&p->m);
    }
}

static void fb_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    fb_phase *p = user;
    int status = resp ? courier_response_status(resp) : 0;
    courier_response_free(resp);
    if (code != p->expect || (p->expect == COURIER_OK && status != 200)) {
        atomic_fetch_add(&p->errors, 1);
        pthread_mutex_lock(&p->m);
        if (!p->first_error[0])
            snprintf(p->first_error, sizeof p->first_error, "%s (status %d)", err ? err->message : courier_strerror(code),
                     status);
        pthread_mutex_unlock(&p->m);
    }
    long n = atomic_fetch_add(&p->completed, 1) + 1;
    if (n == p->total) {
        pthread_mutex_lock(&p->m);
        p->done = 1;
        pthread_cond_broadcast(&p->c);
        pthread_mutex_unlock(&p->m);
        return;
    }
    fb_next(p);
}

static void fb_run(fb_phase *p, int concurrency, cbench_result *out) {
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->c, NULL);
    double t0 = fb_now(), c0 = cbench_process_cpu_seconds();
    for (int i = 0; i < concurrency && i < p->total; i++) fb_next(p);
    pthread_mutex_lock(&p->m);
    while (!p->done) pthread_cond_wait(&p->c, &p->m);
    pthread_mutex_unlock(&p->m);
    out->seconds = fb_now() - t0;
    out->cpu_seconds = cbench_process_cpu_seconds() - c0;
    out->completed = atomic_load(&p->completed);
    out->errors = atomic_load(&p->errors);
    if (p->first_error[0]) fb_note(out, p->first_error);
    pthread_cond_destroy(&p->c);
    pthread_mutex_destroy(&p->m);
}

/* The journal's store of the engines below: "" their store directory's (LMDB); a redis:// URL:
 * each store directory's journal becomes the Redis journal named after the directory's last
 * component (so the freezes of one phase are replayed by the next, as on LMDB). */
static char fb_journal[512];

void cbench_frozen_set_journal(const char *location) {
    snprintf(fb_journal, sizeof fb_journal, "%s", location ? location : "");
}

/* WAIT replicas after each freeze (courier_config_set_frozen_replicas), 0: none. */
static int fb_replicas;
static int64_t fb_replicas_timeout_ms;

void cbench_frozen_set_replicas(int replicas, int64_t timeout_ms) {
    fb_replicas = replicas;
    fb_replicas_timeout_ms = timeout_ms;
}

static courier_engine *fb_engine(const char *store, int concurrency, int paused, cbench_result *out) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    memset(&err, 0, sizeof err);
    int rc = courier_config_new(&cfg);
    if (!rc) rc = store ? courier_config_set_store_dir(cfg, store) : courier_config_set_temporary_store(cfg, 1);
    if (!rc) rc = courier_config_set_max_connections_per_host(cfg, concurrency > 6 ? concurrency : 6);
    if (!rc) rc = courier_config_set_max_connections(cfg, concurrency > 64 ? concurrency : 64);
    if (!rc) rc = courier_config_set_timeout_ms(cfg, 30000);
    if (!rc) rc = courier_config_set_frozen_replay(cfg, concurrency, 0, 0);
    if (!rc && paused) rc = courier_config_set_frozen_paused(cfg, 1);
    if (!rc && fb_journal[0] && store) {
        const char *name = strrchr(store, '/');
        char journal[1024];
        snprintf(journal, sizeof journal, "%s#%s", fb_journal, name ? name + 1 : store);
        rc = courier_config_set_frozen_store(cfg, journal);
        if (!rc && fb_replicas) rc = courier_config_set_frozen_replicas(cfg, fb_replicas, fb_replicas_timeout_ms);
    }
    if (!rc) rc = courier_engine_open(&e, cfg, &err);
    courier_config_free(cfg);
    if (rc) fb_note(out, err.message[0] ? err.message : courier_strerror(rc));
    return e;
}

static courier_request *fb_request(const char *url, int freeze) {
    static const char body[] = "{\"action\":\"like\",\"item\":42,\"note\":\"a benchmark body of about 64 bytes\"}";
    courier_request *r = NULL;
    if (courier_request_new(&r, "POST", url) != COURIER_OK) return NULL;
    courier_request_set_body(r, body, sizeof body - 1, "application/json");
    courier_request_set_coalesce(r, 0);
    /* FROZEN_ORDERED=1: frozen in their host's order (one host, so one request of the backlog in
     * flight at a time: docs/design/redis.md, "Ordered replay"), else unordered. */
    const char *ordered = getenv("FROZEN_ORDERED");
    unsigned flags = ordered && ordered[0] == '1' ? 0 : COURIER_FREEZE_UNORDERED;
    if (freeze) courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, flags);
    return r;
}

/* ---- freezing ------------------------------------------------------------------------------- */

int cbench_frozen_freeze(const char *store, const char *url, long n, int concurrency, cbench_result *out) {
    fb_clear(out);
    if (!store || !url || n <= 0 || concurrency <= 0) return COURIER_E_INVALID_ARGUMENT;
    courier_engine *e = fb_engine(store, concurrency, 1, out);
    if (!e) return COURIER_E_STORE;
    courier_reachability_set_offline(e); /* every send is frozen at once, without the network */
    fb_phase p;
    memset(&p, 0, sizeof p);
    p.engine = e;
    p.request = fb_request(url, 1);
    p.total = n;
    p.expect = COURIER_E_FROZEN;
    if (!p.request) {
        courier_engine_close(e);
        return COURIER_E_NO_MEMORY;
    }
    fb_run(&p, concurrency, out);
    courier_engine_close(e);
    courier_request_free(p.request);
    return 0;
}

long cbench_frozen_record_bytes(const char *store, const char *url) {
    cbench_result r;
    if (cbench_frozen_freeze(store, url, 16, 1, &r) != 0 || r.completed <= 0) return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/journal", store);
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    MDB_cursor *c = NULL;
    long total = 0, count = 0;
    int rc = mdb_env_create(&env);
    if (!rc) rc = mdb_env_set_maxdbs(env, 10);
    if (!rc) rc = mdb_env_set_mapsize(env, (size_t)2 << 30);
    if (!rc) rc = mdb_env_open(env, dir, MDB_NOTLS | MDB_RDONLY, 0600);
    if (!rc) rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (!rc) rc = mdb_dbi_open(txn, "req", 0, &dbi);
    if (!rc) rc = mdb_cursor_open(txn, dbi, &c);
    MDB_val k, v;
    for (int g = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0; g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        total += (long)v.mv_size;
        count++;
    }
    if (c) mdb_cursor_close(c);
    if (txn) mdb_txn_abort(txn);
    if (env) mdb_env_close(env);
    return count ? total / count : 0;
}

/* ---- replay --------------------------------------------------------------------------------- */

typedef struct fb_events {
    atomic_long ok, failed;
} fb_events;

static void fb_event(const courier_frozen_event *ev, void *user) {
    fb_events *c = user;
    if (ev->kind == COURIER_FROZEN_EVENT_RESENT_SUCCEEDED) atomic_fetch_add(&c->ok, 1);
    else if (ev->kind == COURIER_FROZEN_EVENT_RESENT_FAILED) atomic_fetch_add(&c->failed, 1);
}

int cbench_frozen_replay(const char *store, int concurrency, long timeout_ms, cbench_result *out) {
    fb_clear(out);
    if (!store || concurrency <= 0) return COURIER_E_INVALID_ARGUMENT;
    courier_engine *e = fb_engine(store, concurrency, 1, out);
    if (!e) return COURIER_E_STORE;
    fb_events counts;
    atomic_init(&counts.ok, 0);
    atomic_init(&counts.failed, 0);
    courier_frozen_add_listener(NULL, e, fb_event, &counts, NULL);
    int64_t before = 0, left = 0;
    courier_frozen_count(&before, e, NULL);
    double t0 = fb_now(), c0 = cbench_process_cpu_seconds();
    courier_frozen_resume(e);
    double end = t0 + (double)timeout_ms / 1000.0;
    int rc = 0;
    do {
        rc = courier_frozen_wait_idle(e, 1000);
        courier_frozen_count(&left, e, NULL);
    } while (left > 0 && fb_now() < end);
    out->seconds = fb_now() - t0;
    out->cpu_seconds = cbench_process_cpu_seconds() - c0;
    out->completed = atomic_load(&counts.ok) + atomic_load(&counts.failed);
    out->errors = atomic_load(&counts.failed) + (long)left;
    if (left > 0) fb_note(out, rc ? "timed out" : "requests left in the journal");
    if (atomic_load(&counts.failed)) fb_note(out, "some resends failed");
    (void)before;
    courier_engine_close(e);
    return 0;
}

/* ---- the transport at the same concurrency -------------------------------------------------- */

int cbench_frozen_transport(const char *url, long n, int concurrency, cbench_result *out) {
    fb_clear(out);
    if (!url || n <= 0 || concurrency <= 0) return COURIER_E_INVALID_ARGUMENT;
    courier_engine *e = fb_engine(NULL, concurrency, 1, out);
    if (!e) return COURIER_E_INTERNAL;
    fb_phase p;
    memset(&p, 0, sizeof p);
    p.engine = e;
    p.request = fb_request(url, 0);
    p.total = n;
    p.expect = COURIER_OK;
    if (!p.request) {
        courier_engine_close(e);
        return COURIER_E_NO_MEMORY;
    }
    fb_run(&p, concurrency, out);
    courier_engine_close(e);
    courier_request_free(p.request);
    return 0;
}
