/*
 * store.c — the cache's LMDB environment and its entries (the entry's value layout is entry.c's;
 * verification is store_verify.c's; the seam's LMDB backend is store_lmdb.c's).
 *
 * One environment per store directory per process: a process-wide registry keyed by the
 * directory's device and inode shares it between engines (LMDB forbids opening one environment
 * twice in a process). MDB_NOTLS, so read transactions are not tied to threads: each store keeps
 * a small table of reset read transactions (slots), each taken with one compare-and-swap on its
 * own cache line; a thread starts at its own slot, so readers on different threads share no lock
 * and no written cache line (see "Read transactions" below).
 *
 * Databases (store format 2). The entries, their index and the totals are records of LMDB's main
 * (unnamed) database, told apart by key length (LMDB keeps the records of named databases there
 * too, under their names, which are 4 bytes here):
 *   hash(16)                             -> entry value (versioned header + payload)
 *   0 1 | discard_ms(be64) | hash(16)    -> ""      (expiry: purging is a range scan)
 *   0 2 | seq(be64)                      -> hash    (write order: least recently written first)
 *   0 2 0 0 0 0xff                       -> {bytes, count, seq}  (totals, in the same transactions)
 * and two named databases:
 *   vary     hash(primary key)          -> the Vary header names of that URL
 *   meta     "format" -> u32
 * Why one tree: a single-put commit writes every page it changed, and each named database it
 * changes costs its own pages plus the main database's leaf holding its record. Format 1 kept
 * entries, expiry, order and totals in four databases: 10.5 pages per single-put commit; one
 * tree, whose root is in LMDB's meta page, writes about 7 (raw LMDB with sequential keys: 4.5).
 * It also spares every read the named database's root lookup that a renewed transaction does.
 * The totals key sorts right after the write-order records (sequence numbers below 2^40; no hash
 * falls between in practice: it would have to start with those 5 bytes), so the leaf that takes
 * the new write record also holds the totals.
 * Index records are found by their prefix and their length: a hash that happens to start with
 * the same bytes is skipped, never taken for one.
 *
 * Durability: MDB_NOMETASYNC (docs/design/cache.md, "Durability"): one fdatasync per commit keeps the store
 * consistent across power loss (at worst the last commit is lost); writes from the network path
 * are grouped, one transaction per turn of the worker's loop.
 *
 * Recovery: a store that does not open (bad magic, truncated, other LMDB version), whose meta
 * says a newer format, or that reported corruption at run time (a CORRUPT marker file) is renamed
 * aside and recreated; a stderr line says so. Nothing here aborts or asserts on disk contents.
 */
#include "cache/store_lmdb.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- small helpers ------------------------------------------------------------------------- */

/* Positions c on the newest write record (the first of its range), which carries the totals. */
static int newest_order(MDB_cursor *c, MDB_val *k, MDB_val *v) {
    uint8_t prefix[IX_PREFIX];
    ix_prefix(prefix, IX_ORDER);
    k->mv_size = sizeof prefix;
    k->mv_data = prefix;
    int rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE);
    for (; rc == 0; rc = mdb_cursor_get(c, k, v, MDB_NEXT)) {
        if (!is_ix(k, IX_ORDER)) return MDB_NOTFOUND;
        if (k->mv_size == IX_ORDER_LEN) return 0;
    }
    return rc;
}

void cr_cache_note(courier_engine *e, int level, const char *event, const char *fmt, ...) {
    if (!e || !cr_log_wants(e, COURIER_LOG_CACHE, level)) return;
    va_list ap;
    char line[PATH_MAX + 512];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cr_log_fields(e, COURIER_LOG_CACHE, level, event, 0, line, NULL, 0);
}

/* The map, the disk (or the file size limit, or the quota) is full: evict, retry, else drop.
 * LMDB reports a write cut short by a full disk as EIO (its pwrite wrote part of the pages). */
static bool is_full(int rc) {
    return rc == MDB_MAP_FULL || rc == MDB_TXN_FULL || rc == ENOSPC || rc == EFBIG || rc == EDQUOT || rc == EIO;
}

/* A run-time corruption: the store keeps answering "miss", and the next open recreates it. */
void cr_store_mark_broken(cr_store *s, int rc) {
    if (atomic_exchange(&s->broken, 1)) return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/CORRUPT", s->base.dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    const char *expected = NULL; /* the first reason stays (cr_store_cut_short's, when it set one) */
    atomic_compare_exchange_strong(&s->broken_why, &expected, mdb_strerror(rc));
}

/* ---- opening (the floor, base/lmdb_env.c, keeps the registry) ------------------------------ */

/* The floor's kind->destroy: what a store keeps beside its environment. */
static void store_destroy(cr_lmdb_env *base) {
    cr_store *s = (cr_store *)base;
    for (int i = 0; i < CR_READ_SLOTS; i++)
        if (s->slots[i].txn) mdb_txn_abort(s->slots[i].txn);
    pthread_rwlock_destroy(&s->rw);
    pthread_mutex_destroy(&s->tot_lock);
}

static int totals_write(cr_store *s, MDB_txn *txn, const totals *t);

/* Format 1 kept the entries, the expiry index and the write order in named databases ("entries",
 * "expiry", "order") and the totals in meta. Moves the entries into the main database, rebuilds
 * the index and the totals from their headers, and drops the old databases. */
static int migrate_v1(cr_store *s, MDB_txn *txn) {
    static const char *const idx[] = {"expiry", "order"};
    int rc = 0;
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        MDB_dbi dbi;
        rc = mdb_dbi_open(txn, idx[i], 0, &dbi);
        if (rc == 0) rc = mdb_drop(txn, dbi, 1);
        else if (rc == MDB_NOTFOUND) rc = 0;
    }
    MDB_val tk = {6, "totals"};
    if (rc == 0 && (rc = mdb_del(txn, s->db_meta, &tk, NULL)) == MDB_NOTFOUND) rc = 0;
    MDB_dbi old;
    bool have_old = false;
    if (rc == 0) {
        rc = mdb_dbi_open(txn, "entries", 0, &old);
        have_old = rc == 0;
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    totals t = {0};
    MDB_cursor *c = NULL;
    if (rc == 0 && have_old) rc = mdb_cursor_open(txn, old, &c);
    MDB_val k, v;
    for (int op = MDB_FIRST; rc == 0 && c; op = MDB_NEXT) {
        rc = mdb_cursor_get(c, &k, &v, (MDB_cursor_op)op);
        if (rc) break;
        if (k.mv_size != 16 || v.mv_size < CR_ENTRY_HDR || cr_entry_u32(v.mv_data, 0) != CR_ENTRY_MAGIC) continue;
        uint8_t ek[IX_EXPIRY_LEN], ok[IX_ORDER_LEN];
        uint64_t seq = cr_entry_u64(v.mv_data, 40);
        expiry_key(ek, (int64_t)cr_entry_u64(v.mv_data, 32), k.mv_data);
        order_key(ok, seq);
        uint8_t ov[IX_ORDER_VAL] = {0};
        memcpy(ov, k.mv_data, 16);
        MDB_val ekv = {sizeof ek, ek}, okv = {sizeof ok, ok}, empty = {0, ""}, ovv = {sizeof ov, ov};
        if ((rc = mdb_put(txn, s->db_main, &k, &v, 0)) || (rc = mdb_put(txn, s->db_main, &ekv, &empty, 0)) ||
            (rc = mdb_put(txn, s->db_main, &okv, &ovv, 0)))
            break;
        t.bytes += v.mv_size + 16;
        t.count++;
        if (seq > t.seq) t.seq = seq;
    }
    if (c) mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) rc = 0;
    if (rc == 0 && have_old) rc = mdb_drop(txn, old, 1);
    if (rc == 0) rc = totals_write(s, txn, &t);
    return rc;
}

/* The shapes of the records this store writes (the open looks at both ends of each tree): the main
 * database holds entries (16-byte hashes), expiry and write-order records, and the records of the
 * named databases (4-byte names); vary records are keyed by hashes. */
static bool main_record_ok(const MDB_val *k, const MDB_val *v) {
    (void)v;
    return k->mv_size == 16 || k->mv_size == IX_EXPIRY_LEN || k->mv_size == IX_ORDER_LEN || k->mv_size == 4;
}

static bool vary_record_ok(const MDB_val *k, const MDB_val *v) {
    (void)v;
    return k->mv_size == 16;
}

static bool meta_record_ok(const MDB_val *k, const MDB_val *v) {
    (void)v;
    return k->mv_size > 0;
}

typedef struct store_open_arg {
    int64_t map_bytes;
    int durability;
    char *note; /* cr_store_acquire's: what the open did that its caller logs */
    size_t note_cap;
} store_open_arg;

/* The file beside data.mdb of a store that has opened once (cr_lmdb_data_lost). */
#define S_MARKER "CACHE"

/* The floor's kind->open: the environment in s->base.dir and the store's own state. Returns 0, or
 * an LMDB/errno code; *why says what was wrong with a store that exists but must be moved aside
 * (then the return is MDB_INVALID). */
static int store_open(cr_lmdb_env *base, void *arg, const char **why) {
    cr_store *s = (cr_store *)base;
    const store_open_arg *o = arg;
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
#if defined(__GLIBC__) /* elsewhere (macOS) the default kind; glibc's default starves writers */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&s->rw, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&s->tot_lock, NULL);
    for (int i = 0; i < CR_READ_SLOTS; i++) atomic_init(&s->slots[i].busy, 0);
    atomic_init(&s->resizing, 0);
    atomic_init(&s->extra_readers, 0);
    s->verify = o->durability == COURIER_CACHE_FAST;
    *why = NULL;
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s/CORRUPT", s->base.dir);
    if (access(marker, F_OK) == 0) {
        *why = "corruption was reported";
        return MDB_INVALID;
    }
    /* Opened once before (its marker is there) and its data file is gone or empty: cut to nothing
     * from outside. LMDB would start afresh in it without a word; it goes aside like any damage. */
    if (cr_lmdb_data_lost(s->base.dir, S_MARKER)) {
        *why = "its data file is missing or empty";
        return MDB_INVALID;
    }
    unsigned sync = o->durability == COURIER_CACHE_FAST     ? MDB_NOSYNC
                    : o->durability == COURIER_CACHE_SYNCED ? 0u
                                                            : MDB_NOMETASYNC;
    int rc = cr_lmdb_env_open(base, 8, (size_t)o->map_bytes, sync, why);
    if (rc) return rc;
    MDB_txn *txn = NULL;
    rc = cr_lmdb_begin_write(s->base.env, &txn);
    if (rc) goto corrupt_or_fail;
    if ((rc = mdb_dbi_open(txn, NULL, 0, &s->db_main)) || (rc = mdb_dbi_open(txn, "vary", MDB_CREATE, &s->db_vary)) ||
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->db_meta))) {
        mdb_txn_abort(txn);
        goto corrupt_or_fail;
    }
    MDB_val k = {6, "format"}, v;
    rc = mdb_get(txn, s->db_meta, &k, &v);
    uint32_t f = 0;
    if (rc == 0) {
        if (v.mv_size == 4) memcpy(&f, v.mv_data, 4);
        if (v.mv_size != 4 || f > CR_STORE_FORMAT || f == 0) {
            mdb_txn_abort(txn);
            *why = f > CR_STORE_FORMAT ? "written by a newer format" : "unknown format record";
            return MDB_INVALID;
        }
        if (f < CR_STORE_FORMAT) {
            rc = migrate_v1(s, txn);
            if (rc == 0 && o->note && o->note_cap)
                snprintf(o->note, o->note_cap, "the cache store '%s': format %u upgraded to %u", s->base.dir, f,
                         CR_STORE_FORMAT);
        }
    }
    if (rc == MDB_NOTFOUND || (rc == 0 && f < CR_STORE_FORMAT)) {
        f = CR_STORE_FORMAT;
        v.mv_size = 4;
        v.mv_data = &f;
        rc = mdb_put(txn, s->db_meta, &k, &v, 0);
    }
    if (rc == 0) {
        /* Touch both ends of every tree, so a damaged root shows up now rather than later, and
         * look at the records there (the floor looked at LMDB's free list: lmdb_env.c). */
        if ((rc = cr_lmdb_check_ends(txn, s->db_main, main_record_ok)) == 0 &&
            (rc = cr_lmdb_check_ends(txn, s->db_vary, vary_record_ok)) == 0)
            rc = cr_lmdb_check_ends(txn, s->db_meta, meta_record_ok);
    }
    if (rc) {
        mdb_txn_abort(txn);
        goto corrupt_or_fail;
    }
    rc = mdb_txn_commit(txn);
    if (rc) goto corrupt_or_fail;
    cr_lmdb_mark(s->base.dir, S_MARKER, "Courier cache store\n");
    return 0;

corrupt_or_fail:
    if (cr_lmdb_is_corruption(rc)) {
        *why = mdb_strerror(rc);
        return MDB_INVALID;
    }
    return rc;
}

const char *cr_store_dir(const cr_store *s) { return s ? s->base.dir : NULL; }

static const cr_lmdb_kind cache_kind = {
    .what = "cache store",
    .label = "broken",
    .size = sizeof(cr_store),
    .corrupt_code = COURIER_E_STORE,
    .recreate = true,
    .sync_at_close = true,
    .open = store_open,
    .destroy = store_destroy,
};

int cr_store_acquire(const char *dir, int64_t map_bytes, int durability, cr_store **out, char *note, size_t note_cap,
                     courier_error *err) {
    char moved[PATH_MAX * 2 + 200];
    store_open_arg arg = {map_bytes, durability, note, note_cap};
    if (note && note_cap) note[0] = '\0';
    cr_lmdb_env *base = NULL;
    int rc = cr_lmdb_env_acquire(&cache_kind, dir, &arg, &base, moved, sizeof moved, err);
    *out = (cr_store *)base;
    if (rc == COURIER_OK && moved[0]) {
        (*out)->moved_aside = true;
        if (note && note_cap) snprintf(note, note_cap, "%s", moved); /* the fresh store has nothing to upgrade */
    }
    return rc;
}

void cr_store_release(cr_store *s) {
    if (s) cr_lmdb_env_release(&s->base);
}

/* ---- transactions ---------------------------------------------------------------------------- */

/*
 * Read transactions. A reader takes a slot (one compare-and-swap on the slot's own cache line,
 * starting at the thread's home slot), renews the slot's reset transaction (or begins one), and
 * at the end resets it and frees the slot (one store). When every slot is busy it runs a
 * transaction of its own, counted in extra_readers. No mutex and no shared written line: two
 * threads reading at once do not slow each other down (the pooled version took a process-wide
 * rwlock and a mutex twice per read).
 *
 * Adopting a map grown by another process (mdb_env_set_mapsize) requires that no transaction of
 * this process is running: the resizer takes rw for writing (which excludes writers, who hold it
 * for reading), raises `resizing`, takes every slot itself (waiting out the readers in them) and
 * waits for extra_readers to drain. A reader checks `resizing` after taking its slot (or after
 * counting itself in extra_readers): both sides use sequentially consistent operations, so either
 * the reader sees the flag (and backs off, waiting on rw), or the resizer sees the reader.
 */

static atomic_uint next_home = 0;
static _Thread_local unsigned home_slot CR_TLS_FAST = UINT_MAX; /* base.h */

static unsigned my_home(void) {
    if (home_slot == UINT_MAX) home_slot = atomic_fetch_add_explicit(&next_home, 1, memory_order_relaxed) % CR_READ_SLOTS;
    return home_slot;
}

/* Waits until a running resize ends (the resizer holds rw for writing). */
static void wait_resize(cr_store *s) {
    pthread_rwlock_rdlock(&s->rw);
    pthread_rwlock_unlock(&s->rw);
}

/* Takes a slot (its index) or counts an extra reader (-1). */
static int reader_enter(cr_store *s) {
    for (;;) {
        unsigned home = my_home();
        bool backoff = false;
        for (unsigned i = 0; i < CR_READ_SLOTS && !backoff; i++) {
            unsigned idx = (home + i) % CR_READ_SLOTS;
            read_slot *sl = &s->slots[idx];
            int expect = 0;
            if (atomic_load_explicit(&sl->busy, memory_order_relaxed) != 0 ||
                !atomic_compare_exchange_strong(&sl->busy, &expect, 1))
                continue;
            if (!atomic_load(&s->resizing)) return (int)idx;
            atomic_store_explicit(&sl->busy, 0, memory_order_release);
            backoff = true;
        }
        if (!backoff) {
            atomic_fetch_add(&s->extra_readers, 1);
            if (!atomic_load(&s->resizing)) return -1;
            atomic_fetch_sub(&s->extra_readers, 1);
        }
        wait_resize(s);
    }
}

static void reader_leave(cr_store *s, int slot) {
    if (slot >= 0) atomic_store_explicit(&s->slots[slot].busy, 0, memory_order_release);
    else atomic_fetch_sub(&s->extra_readers, 1);
}

/* Adopts a map grown by another process. Called with no transaction of this thread running. */
static void adopt_map_size(cr_store *s) {
    pthread_rwlock_wrlock(&s->rw);
    atomic_store(&s->resizing, 1);
    for (int i = 0; i < CR_READ_SLOTS; i++) {
        int expect = 0;
        while (!atomic_compare_exchange_weak(&s->slots[i].busy, &expect, 1)) {
            expect = 0;
            sched_yield();
        }
    }
    while (atomic_load(&s->extra_readers) != 0) sched_yield();
    for (int i = 0; i < CR_READ_SLOTS; i++) {
        if (s->slots[i].txn) mdb_txn_abort(s->slots[i].txn);
        s->slots[i].txn = NULL;
    }
    mdb_env_set_mapsize(s->base.env, 0);
    for (int i = 0; i < CR_READ_SLOTS; i++) atomic_store_explicit(&s->slots[i].busy, 0, memory_order_release);
    atomic_store(&s->resizing, 0);
    pthread_rwlock_unlock(&s->rw);
}

/* A data file cut short from outside while open: before a read, at most once per CR_SIZE_CHECK_NS
 * of a coarse clock (the check is an fstat, half a get), and before every write. The pages past
 * the cut read as zeros from then on, and the store is recreated at the next open. */
#define CR_SIZE_CHECK_NS 2000000

static int64_t coarse_ns(void) {
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool cr_store_cut_short(cr_store *s, bool always) {
    if (!always) {
        int64_t now = coarse_ns(), due = atomic_load_explicit(&s->next_size_check, memory_order_relaxed);
        if (now < due || !atomic_compare_exchange_strong(&s->next_size_check, &due, now + CR_SIZE_CHECK_NS))
            return false;
    }
    int rc = cr_lmdb_file_intact(s->base.env, &s->base.file_largest);
    const char *expected = NULL;
    if (rc) atomic_compare_exchange_strong(&s->broken_why, &expected, "its data file was cut short while open");
    if (rc) cr_store_mark_broken(s, rc);
    return rc != 0;
}

int cr_store_read_begin(cr_store *s, cr_read *out) {
    out->txn = NULL;
    out->slot = -1;
    if (atomic_load_explicit(&s->broken, memory_order_relaxed) || cr_store_cut_short(s, false)) return COURIER_E_STORE;
    for (int attempt = 0; attempt < 2; attempt++) {
        int slot = reader_enter(s);
        MDB_txn *txn = slot >= 0 ? s->slots[slot].txn : NULL;
        int rc = txn ? mdb_txn_renew(txn) : mdb_txn_begin(s->base.env, NULL, MDB_RDONLY, &txn);
        if (rc == 0) {
            if (slot >= 0) s->slots[slot].txn = txn;
            out->txn = txn;
            out->slot = slot;
            return COURIER_OK; /* the slot (or the extra count) is held until cr_store_read_end */
        }
        if (txn) mdb_txn_abort(txn);
        if (slot >= 0) s->slots[slot].txn = NULL;
        reader_leave(s, slot);
        if (rc == MDB_MAP_RESIZED && attempt == 0) {
            adopt_map_size(s);
            continue;
        }
        if (cr_lmdb_is_corruption(rc)) cr_store_mark_broken(s, rc);
        return COURIER_E_STORE;
    }
    return COURIER_E_STORE;
}

void cr_store_read_end(cr_store *s, cr_read *r) {
    if (!r->txn) return;
    if (r->slot >= 0) mdb_txn_reset(r->txn); /* kept in its slot for the next reader */
    else mdb_txn_abort(r->txn);
    reader_leave(s, r->slot);
    r->txn = NULL;
    r->slot = -1;
}

int cr_store_get(cr_store *s, MDB_txn *txn, const uint8_t hash[16], cr_entry *out) {
    MDB_val k = {16, (void *)hash}, v;
    int rc = mdb_get(txn, s->db_main, &k, &v);
    if (rc == MDB_NOTFOUND) return COURIER_E_NOT_FOUND;
    if (rc) {
        if (cr_lmdb_is_corruption(rc)) cr_store_mark_broken(s, rc);
        return COURIER_E_STORE;
    }
    /* The entry is read in several passes (its header, the strings, the body's copy): ask for
     * all its cache lines at once, so their misses overlap instead of coming one pass at a time. */
    const char *p = v.mv_data;
    size_t span = v.mv_size < 8192 ? v.mv_size : 8192;
    for (size_t off = 0; off < span; off += 64) __builtin_prefetch(p + off);
    /* LMDB never shows a torn value when commits are synced (durable, synced settings); with
     * no-sync a power loss may leave damaged pages, so values are checked there. */
    return cr_entry_decode(v.mv_data, v.mv_size, s->verify, out) ? COURIER_OK : COURIER_E_NOT_FOUND;
}

int cr_store_vary_get(cr_store *s, MDB_txn *txn, const uint8_t hash[16], const char **names, size_t *len) {
    MDB_val k = {16, (void *)hash}, v;
    int rc = mdb_get(txn, s->db_vary, &k, &v);
    if (rc) {
        if (cr_lmdb_is_corruption(rc)) cr_store_mark_broken(s, rc);
        return COURIER_E_NOT_FOUND;
    }
    *names = v.mv_data;
    *len = v.mv_size;
    return COURIER_OK;
}

/* Begins a write transaction with the read lock held (released by write_end). */
static int write_begin(cr_store *s, MDB_txn **out) {
    *out = NULL;
    if (atomic_load_explicit(&s->broken, memory_order_relaxed)) return MDB_PANIC;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_rwlock_rdlock(&s->rw);
        int rc = mdb_txn_begin(s->base.env, NULL, 0, out);
        if (rc == 0 && cr_store_cut_short(s, true)) {
            mdb_txn_abort(*out);
            *out = NULL;
            rc = MDB_CORRUPTED;
        }
        if (rc == 0) return 0;
        pthread_rwlock_unlock(&s->rw);
        if (rc == MDB_MAP_RESIZED && attempt == 0) {
            adopt_map_size(s);
            continue;
        }
        if (cr_lmdb_is_corruption(rc)) cr_store_mark_broken(s, rc);
        return rc;
    }
    return MDB_MAP_RESIZED;
}

/* Commits; when it succeeded and t is given, remembers t as the totals of this commit. */
static int write_commit(cr_store *s, MDB_txn *txn, const totals *t) {
    size_t id = mdb_txn_id(txn);
    int rc = mdb_txn_commit(txn);
    pthread_rwlock_unlock(&s->rw);
    if (rc == 0 && t) {
        pthread_mutex_lock(&s->tot_lock);
        if (id > s->tot_txnid) {
            s->tot = *t;
            s->tot_txnid = id;
        }
        pthread_mutex_unlock(&s->tot_lock);
    }
    if (cr_lmdb_is_corruption(rc)) cr_store_mark_broken(s, rc);
    return rc;
}

static void write_abort(cr_store *s, MDB_txn *txn) {
    mdb_txn_abort(txn);
    pthread_rwlock_unlock(&s->rw);
}

/* The totals live in the newest write record (no record: an empty store, all zero). */
int cr_store_totals_read(cr_store *s, MDB_txn *txn, totals *t) {
    memset(t, 0, sizeof *t);
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, s->db_main, &c);
    if (rc) return rc;
    MDB_val k, v;
    rc = newest_order(c, &k, &v);
    if (rc == 0 && v.mv_size == IX_ORDER_VAL) memcpy(t, (uint8_t *)v.mv_data + 16, sizeof *t);
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The totals at the start of a write transaction: remembered from the last commit of this
 * process when that commit is the transaction's snapshot (no other writer since), else read. */
static int totals_load(cr_store *s, MDB_txn *txn, totals *t) {
    size_t id = mdb_txn_id(txn);
    pthread_mutex_lock(&s->tot_lock);
    bool hit = s->tot_txnid != 0 && s->tot_txnid + 1 == id;
    if (hit) *t = s->tot;
    pthread_mutex_unlock(&s->tot_lock);
    return hit ? 0 : cr_store_totals_read(s, txn, t);
}

static int totals_write(cr_store *s, MDB_txn *txn, const totals *t) {
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, s->db_main, &c);
    if (rc) return rc;
    MDB_val k, v;
    rc = newest_order(c, &k, &v);
    if (rc == 0 && v.mv_size >= 16) {
        uint8_t val[IX_ORDER_VAL];
        memcpy(val, v.mv_data, 16);
        memcpy(val + 16, t, sizeof *t);
        MDB_val nv = {sizeof val, val};
        rc = mdb_cursor_put(c, &k, &nv, MDB_CURRENT);
    }
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc; /* no write record: nothing stored, nothing to keep */
}

/* Drops the index records of the stored value `old` of hash from the index and the totals (the
 * entry itself stays). The index keys come from the header fields, read even when the payload is
 * damaged. */
static int unindex(cr_store *s, MDB_txn *txn, totals *t, const uint8_t hash[16], const MDB_val *old) {
    size_t size = old->mv_size + 16;
    if (old->mv_size >= CR_ENTRY_HDR && cr_entry_u32(old->mv_data, 0) == CR_ENTRY_MAGIC) {
        uint8_t ek[IX_EXPIRY_LEN], ok[IX_ORDER_LEN];
        expiry_key(ek, (int64_t)cr_entry_u64(old->mv_data, 32), hash);
        order_key(ok, cr_entry_u64(old->mv_data, 40));
        MDB_val ekv = {sizeof ek, ek}, okv = {sizeof ok, ok};
        int rc = mdb_del(txn, s->db_main, &ekv, NULL);
        if (rc && rc != MDB_NOTFOUND) return rc;
        rc = mdb_del(txn, s->db_main, &okv, NULL);
        if (rc && rc != MDB_NOTFOUND) return rc;
    }
    t->bytes = t->bytes >= size ? t->bytes - size : 0;
    t->count = t->count ? t->count - 1 : 0;
    return 0;
}

/* Removes the entry under hash and its index records. Returns 0, MDB_NOTFOUND or an error. */
static int remove_in_txn(cr_store *s, MDB_txn *txn, totals *t, const uint8_t hash[16]) {
    MDB_val k = {16, (void *)hash}, v;
    int rc = mdb_get(txn, s->db_main, &k, &v);
    if (rc) return rc;
    if ((rc = unindex(s, txn, t, hash, &v))) return rc;
    return mdb_del(txn, s->db_main, &k, NULL);
}

/* Empties the store (entries, index, Vary records) and writes t, emptied, as the totals. The main
 * database cannot be dropped record by record cheaply, so it is dropped whole: that also drops the
 * records of the named databases, which LMDB writes back at commit for the databases changed in
 * the transaction; both are changed here (vary emptied, meta's format rewritten). */
static int clear_all(cr_store *s, MDB_txn *txn, totals *t) {
    uint32_t f = CR_STORE_FORMAT;
    MDB_val fk = {6, "format"}, fv = {4, &f};
    int rc = mdb_drop(txn, s->db_vary, 0);
    if (rc == 0) rc = mdb_drop(txn, s->db_meta, 0);
    if (rc == 0) rc = mdb_put(txn, s->db_meta, &fk, &fv, 0);
    if (rc == 0) rc = mdb_drop(txn, s->db_main, 0);
    /* No write record is left to carry the totals: they read as zero, and the write sequence may
     * start again, as no record is left that it orders. */
    t->bytes = t->count = 0;
    if (rc == 0) rc = totals_write(s, txn, t);
    return rc;
}

/* Positions c on the first index record of a kind: the earliest discard time (IX_EXPIRY: the first
 * of its range) or the oldest write (IX_ORDER: the last of its range). MDB_NOTFOUND when there is
 * none. Keys of another length with the same prefix (entries whose hash starts so) are skipped. */
static int first_of_kind(MDB_cursor *c, uint8_t kind, MDB_val *k, MDB_val *v) {
    size_t len = kind == IX_EXPIRY ? IX_EXPIRY_LEN : IX_ORDER_LEN;
    uint8_t prefix[IX_PREFIX];
    ix_prefix(prefix, kind == IX_EXPIRY ? kind : (uint8_t)(kind + 1));
    k->mv_size = sizeof prefix;
    k->mv_data = prefix;
    int rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE);
    MDB_cursor_op step = MDB_NEXT;
    if (kind == IX_ORDER) { /* from the start of the next range, backwards */
        rc = rc == MDB_NOTFOUND ? mdb_cursor_get(c, k, v, MDB_LAST) : rc == 0 ? mdb_cursor_get(c, k, v, MDB_PREV) : rc;
        step = MDB_PREV;
    }
    for (; rc == 0; rc = mdb_cursor_get(c, k, v, step)) {
        if (!is_ix(k, kind)) return MDB_NOTFOUND;
        if (k->mv_size == len) return 0;
    }
    return rc;
}

/* Bytes of the pages of the main tree as of txn (O(1): LMDB keeps the counts in the txn). */
static uint64_t tree_bytes(cr_store *s, MDB_txn *txn) {
    MDB_stat ms;
    if (mdb_stat(txn, s->db_main, &ms) != 0) return 0;
    return (uint64_t)(ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages) * ms.ms_psize;
}

/* The pages the main tree may take for a limit (docs/design/cache.md, "Disk bound"): 1.625 times
 * the limit, so that with LMDB's free list (the pages a commit frees, reused by the next: at most
 * about a fifth of the limit, measured) data.mdb stays under twice the limit. LMDB's pages are
 * 40-60% full under random inserts and removals, so with values under a page the cap, not the byte
 * count, bounds the cache: with 1 KiB values it then holds about 70% of the limit in entries. */
static uint64_t tree_cap(uint64_t limit) { return limit > UINT64_MAX / 4 ? UINT64_MAX : limit / 8 * 13; }

static bool over(cr_store *s, MDB_txn *txn, const totals *t, uint64_t limit) {
    return t->bytes > limit || (limit < UINT64_MAX / 4 && tree_bytes(s, txn) > tree_cap(limit));
}

/* The bytes an eviction for `limit` goes down to: a little under the limit (1/64: a steady stream of
 * puts evicts about one entry per put) or, when the trees are over their cap, the bytes at which
 * they would fit it at their present fill (bytes x cap / trees), computed once per eviction. Not
 * "until the trees fit": removing entries of random keys seldom empties a page, so the trees shrink
 * late and that would evict far more than the overshoot; the puts that follow fill the holes, and
 * the trees stay at the cap. */
static uint64_t evict_goal(cr_store *s, MDB_txn *txn, const totals *t, uint64_t limit) {
    uint64_t goal = limit - limit / 64;
    if (limit >= UINT64_MAX / 4) return goal;
    uint64_t tb = tree_bytes(s, txn), cap = tree_cap(limit);
    if (tb > cap && t->bytes > 0) {
        double fit = (double)t->bytes * ((double)cap / (double)tb);
        uint64_t g = (uint64_t)(fit - fit / 64);
        if (g < goal) goal = g;
    }
    return goal;
}

/* Evicts while the store's bytes are over `goal`, at most max_n entries (0: no bound): entries past
 * their discard time first, then the least recently written. */
static int evict_in_txn(cr_store *s, MDB_txn *txn, totals *t, uint64_t goal, int64_t now_ms, uint64_t max_n,
                        uint64_t *evicted) {
    int rc = 0;
    MDB_cursor *c = NULL;
    uint64_t n = 0;
    for (int phase = 0; phase < 2 && t->bytes > goal && (max_n == 0 || n < max_n); phase++) {
        rc = mdb_cursor_open(txn, s->db_main, &c);
        if (rc) return rc;
        const uint8_t kind = phase == 0 ? IX_EXPIRY : IX_ORDER;
        while (t->bytes > goal && (max_n == 0 || n < max_n)) {
            MDB_val k, v;
            rc = first_of_kind(c, kind, &k, &v);
            if (rc == MDB_NOTFOUND) {
                rc = 0;
                break;
            }
            if (rc) break;
            uint8_t hash[16];
            if (phase == 0) {
                if (expiry_of(&k) > cr_be_time(now_ms)) break;
                memcpy(hash, (uint8_t *)k.mv_data + IX_HASH_AT, 16);
            } else {
                if (v.mv_size < 16) {
                    if ((rc = mdb_cursor_del(c, 0))) break;
                    continue;
                }
                memcpy(hash, v.mv_data, 16);
            }
            rc = remove_in_txn(s, txn, t, hash);
            if (rc == MDB_NOTFOUND) {
                /* An index record without its entry: drop it. */
                rc = first_of_kind(c, kind, &k, &v);
                if (rc == 0) rc = mdb_cursor_del(c, 0);
                if (rc) break;
                continue;
            }
            if (rc) break;
            (*evicted)++;
            n++;
        }
        mdb_cursor_close(c);
        c = NULL;
        if (rc) return rc;
    }
    return rc;
}

/* Writes one entry (or removes it) and its index records, updating t. With carry_totals the new
 * write record, the newest, carries t as it is after this put (the caller then need not call
 * totals_write unless something else changes t). */
static int put_in_txn(cr_store *s, MDB_txn *txn, totals *t, const cr_store_put *p, bool carry_totals) {
    if (p->remove_vary || p->vary_names) {
        MDB_val vk = {16, (void *)p->vary_hash};
        int rc;
        if (p->vary_names) {
            MDB_val vv = {strlen(p->vary_names), (void *)p->vary_names};
            rc = mdb_put(txn, s->db_vary, &vk, &vv, 0);
        } else {
            rc = mdb_del(txn, s->db_vary, &vk, NULL);
            if (rc == MDB_NOTFOUND) rc = 0;
        }
        if (rc) return rc;
    }
    if (p->remove_only) {
        int rc = remove_in_txn(s, txn, t, p->hash);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    size_t size = cr_entry_encoded_size(p); /* entry.c */
    cr_store_put local = *p;
    local.entry.seq = ++t->seq;
    if (local.entry.discard_ms < local.entry.expires_ms) local.entry.discard_ms = local.entry.expires_ms;
    /* One search when the key is new: NOOVERWRITE hands back an older copy instead of writing. */
    MDB_val k = {16, (void *)p->hash}, v = {size, NULL};
    int rc = mdb_put(txn, s->db_main, &k, &v, MDB_NOOVERWRITE | MDB_RESERVE);
    if (rc == MDB_KEYEXIST) {
        if ((rc = unindex(s, txn, t, p->hash, &v))) return rc;
        v = (MDB_val){size, NULL};
        rc = mdb_put(txn, s->db_main, &k, &v, MDB_RESERVE);
    }
    if (rc) return rc;
    cr_entry_encode(&local, v.mv_data, size);
    uint8_t ek[IX_EXPIRY_LEN], ok[IX_ORDER_LEN];
    expiry_key(ek, local.entry.discard_ms, p->hash);
    order_key(ok, local.entry.seq);
    t->bytes += size + 16;
    t->count++;
    uint8_t ov[IX_ORDER_VAL] = {0};
    memcpy(ov, p->hash, 16);
    if (carry_totals) memcpy(ov + 16, t, sizeof *t);
    MDB_val ekv = {sizeof ek, ek}, empty = {0, ""}, okv = {sizeof ok, ok}, ovv = {sizeof ov, ov};
    /* One cursor for both: the second record usually goes to the leaf the first one did, and a
     * cursor already there skips the descent from the root. */
    MDB_cursor *c;
    if ((rc = mdb_cursor_open(txn, s->db_main, &c))) return rc;
    rc = mdb_cursor_put(c, &ekv, &empty, 0);
    if (rc == 0) rc = mdb_cursor_put(c, &okv, &ovv, 0);
    mdb_cursor_close(c);
    return rc;
}

/*
 * Eviction is done in bounded transactions (at most CR_EVICT_BATCH entries each). One transaction
 * that evicted 10% of a large store touched nearly every leaf of the tree (keys are hashes): LMDB
 * copies each page a transaction changes and cannot reuse the pages that transaction frees before
 * it commits, so each such eviction needed fresh pages for most of the tree (with 1 KiB values the
 * file settled at 2.75x the limit, 2.35-2.5x now), and the process's private memory grew by its
 * dirty pages (17 -> 110 MB in the issue). Small commits free a few pages each, which the next
 * commits reuse. See docs/design/cache.md, "Disk bound".
 */
#define CR_EVICT_BATCH 64

/* Evicts (at most CR_EVICT_BATCH entries) in its own transaction, so the freed pages can be reused
 * by the next one. *left: the store's bytes after it. */
static int evict_txn(cr_store *s, uint64_t keep_bytes, int64_t now_ms, uint64_t *evicted, uint64_t *left) {
    int dead = 0;
    mdb_reader_check(s->base.env, &dead);
    MDB_txn *txn;
    int rc = write_begin(s, &txn);
    if (rc) return rc;
    totals t;
    rc = totals_load(s, txn, &t);
    if (rc == 0) rc = evict_in_txn(s, txn, &t, keep_bytes, now_ms, CR_EVICT_BATCH, evicted);
    if (left) *left = t.bytes;
    if (rc == 0 && t.count == 0) rc = clear_all(s, txn, &t); /* everything went: also any stray records */
    else if (rc == 0) rc = totals_write(s, txn, &t);
    if (rc) {
        write_abort(s, txn);
        return rc;
    }
    return write_commit(s, txn, &t);
}

int cr_store_write(cr_store *s, const cr_store_put *puts, size_t n, int64_t limit_bytes, int64_t now_ms,
                   cr_store_effect *effect, courier_error *err) {
    cr_store_effect local = {0};
    if (!effect) effect = &local;
    int rc = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        MDB_txn *txn;
        rc = write_begin(s, &txn);
        if (rc) break;
        totals t;
        uint64_t written = 0, skipped = 0, evicted = 0;
        rc = totals_load(s, txn, &t);
        bool carried = false; /* the last write record holds the final totals */
        for (size_t i = 0; i < n && rc == 0; i++) {
            carried = false;
            if (cr_store_too_large(&puts[i], limit_bytes)) {
                /* Too large to keep: still remove the older copy so it is not served. */
                cr_store_put rm = puts[i];
                rm.remove_only = 1;
                rm.vary_names = NULL;
                rc = put_in_txn(s, txn, &t, &rm, false);
                skipped++;
                continue;
            }
            rc = put_in_txn(s, txn, &t, &puts[i], i == n - 1);
            if (rc == 0 && !puts[i].remove_only) written++;
            carried = rc == 0 && i == n - 1 && !puts[i].remove_only;
        }
        uint64_t limit = limit_bytes > 0 ? (uint64_t)limit_bytes : UINT64_MAX;
        /* Over the limit: a few entries go in this transaction, down to a little under it (so a
         * steady stream of puts evicts about one entry per put); more, if a batch wrote more, in
         * bounded transactions of their own after it. */
        uint64_t goal = limit;
        if (rc == 0 && over(s, txn, &t, limit)) {
            goal = evict_goal(s, txn, &t, limit);
            rc = evict_in_txn(s, txn, &t, goal, now_ms, CR_EVICT_BATCH, &evicted);
        }
        if (rc == 0 && (!carried || evicted)) rc = totals_write(s, txn, &t);
        uint64_t left = t.bytes;
        if (rc == 0) {
            rc = write_commit(s, txn, &t);
        } else {
            write_abort(s, txn);
        }
        if (rc == 0) {
            effect->written += written;
            effect->skipped += skipped;
            while (left > goal) {
                uint64_t ev = 0;
                if (evict_txn(s, goal, now_ms, &ev, &left) != 0 || ev == 0) break;
                evicted += ev;
            }
            effect->evicted += evicted;
            return COURIER_OK;
        }
        if (!is_full(rc)) break;
        /* Full: make room (half of what is there, then everything) and try again. */
        cr_read rt;
        uint64_t have = 0;
        if (cr_store_read_begin(s, &rt) == COURIER_OK) {
            totals cur;
            if (cr_store_totals_read(s, rt.txn, &cur) == 0) have = cur.bytes;
            cr_store_read_end(s, &rt);
        }
        uint64_t keep = attempt == 0 ? have / 2 : 0, ev = 0;
        left = have;
        int erc = 0;
        do {
            ev = 0;
            erc = evict_txn(s, keep, now_ms, &ev, &left);
            effect->evicted += ev;
        } while (erc == 0 && ev > 0 && left > keep);
        if (erc && !is_full(erc)) {
            rc = erc;
            break;
        }
    }
    if (is_full(rc)) {
        /* Still full after emptying: these writes are dropped; the caller never sees it. */
        effect->skipped += n;
        return COURIER_OK;
    }
    if (rc == MDB_PANIC) return cr_fail(err, COURIER_E_STORE, "the cache store is unusable until it is reopened");
    return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot write the cache");
}

/* ---- removal ------------------------------------------------------------------------------- */

int cr_store_remove(cr_store *s, const uint8_t hash[16], courier_error *err) {
    MDB_txn *txn;
    int rc = write_begin(s, &txn);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    totals t;
    rc = totals_load(s, txn, &t);
    if (rc == 0) rc = remove_in_txn(s, txn, &t, hash);
    if (rc == MDB_NOTFOUND) {
        write_abort(s, txn);
        return cr_fail(err, COURIER_E_NOT_FOUND, "no such cache entry");
    }
    if (rc == 0) rc = totals_write(s, txn, &t);
    if (rc) {
        write_abort(s, txn);
        return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    }
    rc = write_commit(s, txn, &t);
    return rc ? cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache") : COURIER_OK;
}

int cr_store_remove_all(cr_store *s, int64_t *removed, courier_error *err) {
    if (removed) *removed = 0;
    MDB_txn *txn;
    int rc = write_begin(s, &txn);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot clear the cache");
    totals t;
    rc = totals_load(s, txn, &t);
    uint64_t count = t.count;
    if (rc == 0) rc = clear_all(s, txn, &t);
    if (rc) {
        write_abort(s, txn);
        return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot clear the cache");
    }
    rc = write_commit(s, txn, &t);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot clear the cache");
    if (removed) *removed = (int64_t)count;
    return COURIER_OK;
}

int cr_store_remove_since(cr_store *s, int64_t since_ms, int64_t *removed, courier_error *err) {
    if (removed) *removed = 0;
    MDB_txn *txn;
    int rc = write_begin(s, &txn);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    totals t;
    int64_t n = 0;
    rc = totals_load(s, txn, &t);
    /* Collect first: deleting under a cursor of the same tree is easy to get wrong. */
    uint8_t *hashes = NULL;
    size_t nh = 0, cap = 0;
    MDB_cursor *c = NULL;
    if (rc == 0) rc = mdb_cursor_open(txn, s->db_main, &c);
    MDB_val k, v;
    for (int op = MDB_FIRST; rc == 0; op = MDB_NEXT) {
        rc = mdb_cursor_get(c, &k, &v, (MDB_cursor_op)op);
        if (rc) break;
        if (k.mv_size != 16 || v.mv_size < CR_ENTRY_HDR) continue;
        if ((int64_t)cr_entry_u64(v.mv_data, 16) < since_ms) continue;
        if (nh == cap) {
            size_t nc = cap ? cap * 2 : 64;
            uint8_t *p = realloc(hashes, nc * 16);
            if (!p) {
                rc = ENOMEM;
                break;
            }
            hashes = p;
            cap = nc;
        }
        memcpy(hashes + 16 * nh++, k.mv_data, 16);
    }
    if (c) mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) rc = 0;
    for (size_t i = 0; i < nh && rc == 0; i++) {
        rc = remove_in_txn(s, txn, &t, hashes + 16 * i);
        if (rc == MDB_NOTFOUND) rc = 0;
        else if (rc == 0) n++;
    }
    free(hashes);
    if (rc == 0) rc = totals_write(s, txn, &t);
    if (rc) {
        write_abort(s, txn);
        return rc == ENOMEM ? cr_fail(err, COURIER_E_NO_MEMORY, NULL) : cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    }
    rc = write_commit(s, txn, &t);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    if (removed) *removed = n;
    return COURIER_OK;
}

int cr_store_remove_expired(cr_store *s, int64_t now_ms, int64_t *removed, courier_error *err) {
    if (removed) *removed = 0;
    MDB_txn *txn;
    int rc = write_begin(s, &txn);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    totals t;
    uint64_t n = 0;
    rc = totals_load(s, txn, &t);
    /* A range scan of the expiry records, up to now. */
    MDB_cursor *c = NULL;
    if (rc == 0) rc = mdb_cursor_open(txn, s->db_main, &c);
    while (rc == 0) {
        MDB_val k, v;
        rc = first_of_kind(c, IX_EXPIRY, &k, &v);
        if (rc) break;
        if (expiry_of(&k) > cr_be_time(now_ms)) break;
        uint8_t hash[16];
        memcpy(hash, (uint8_t *)k.mv_data + IX_HASH_AT, 16);
        rc = remove_in_txn(s, txn, &t, hash);
        if (rc == MDB_NOTFOUND) {
            rc = first_of_kind(c, IX_EXPIRY, &k, &v);
            if (rc == 0) rc = mdb_cursor_del(c, 0);
        } else if (rc == 0) {
            n++;
        }
    }
    if (c) mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) rc = 0;
    if (rc == 0) rc = totals_write(s, txn, &t);
    if (rc) {
        write_abort(s, txn);
        return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    }
    rc = write_commit(s, txn, &t);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot remove from the cache");
    if (removed) *removed = (int64_t)n;
    return COURIER_OK;
}

int cr_store_totals(cr_store *s, int64_t *bytes, int64_t *count, courier_error *err) {
    cr_read rd;
    if (cr_store_read_begin(s, &rd) != COURIER_OK) return cr_fail(err, COURIER_E_STORE, "cannot read the cache");
    totals t;
    int rc = cr_store_totals_read(s, rd.txn, &t);
    cr_store_read_end(s, &rd);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot read the cache");
    if (bytes) *bytes = (int64_t)t.bytes;
    if (count) *count = (int64_t)t.count;
    return COURIER_OK;
}

/* ---- listing -------------------------------------------------------------------------------- */

int cr_store_list(cr_store *s, cr_list_item **items, size_t *count, courier_error *err) {
    *items = NULL;
    *count = 0;
    cr_read rd;
    if (cr_store_read_begin(s, &rd) != COURIER_OK) return cr_fail(err, COURIER_E_STORE, "cannot read the cache");
    MDB_cursor *c = NULL;
    int rc = mdb_cursor_open(rd.txn, s->db_main, &c);
    cr_list_item *out = NULL;
    size_t n = 0, cap = 0;
    int code = COURIER_OK;
    MDB_val k, v;
    for (int op = MDB_FIRST; rc == 0; op = MDB_NEXT) {
        rc = mdb_cursor_get(c, &k, &v, (MDB_cursor_op)op);
        if (rc) break;
        cr_entry e;
        if (k.mv_size != 16 || !cr_entry_decode(v.mv_data, v.mv_size, true, &e)) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            cr_list_item *p = realloc(out, nc * sizeof *p);
            if (!p) {
                code = COURIER_E_NO_MEMORY;
                break;
            }
            out = p;
            cap = nc;
        }
        n++;
        if (cr_list_item_fill(&out[n - 1], &e, k.mv_data)) {
            code = COURIER_E_NO_MEMORY;
            break;
        }
    }
    if (c) mdb_cursor_close(c);
    cr_store_read_end(s, &rd);
    if (code == COURIER_OK && rc && rc != MDB_NOTFOUND) code = cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot list the cache");
    else if (code) cr_fail(err, code, NULL);
    if (code) {
        cr_list_items_free(out, n);
        return code;
    }
    *items = out;
    *count = n;
    return COURIER_OK;
}
