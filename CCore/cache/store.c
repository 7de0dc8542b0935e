/*
 * store.c — the cache's LMDB environment and its entries.
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
#include "cache/store.h"
#include "base/lmdb_env.h"

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

#define CR_ENTRY_MAGIC 0x45435243u /* "CRCE" */
#define CR_ENTRY_HDR 96u
#define CR_READ_SLOTS 16 /* reset read transactions kept per store (each holds an LMDB reader slot) */
#define CR_MAX_KEY_FIELD (64u * 1024u * 1024u)

/* One cached read transaction. `busy` is taken with a compare-and-swap; whoever holds it owns
 * `txn` (NULL, or a reset read transaction). One cache line each, so two readers never write to
 * the same line. */
typedef struct read_slot {
    _Alignas(64) atomic_int busy;
    MDB_txn *txn;
} read_slot;

typedef struct totals {
    uint64_t bytes;
    uint64_t count;
    uint64_t seq;
} totals;

struct cr_store {
    cr_lmdb_env base;               /* first: the floor's registry entry (dir, env); 64-byte aligned */
    read_slot slots[CR_READ_SLOTS];
    MDB_dbi db_main, db_vary, db_meta; /* db_main: entries, index and totals */
    /* The totals as of committed transaction tot_txnid (0: none), so that a write transaction
     * whose snapshot is that commit (its id is tot_txnid + 1: nobody wrote since, in any process)
     * need not read them. Set only after a commit succeeded; under tot_lock. */
    pthread_mutex_t tot_lock;
    size_t tot_txnid;
    totals tot;
    pthread_rwlock_t rw; /* read: write transactions; write: resizing the map */
    atomic_int resizing;      /* a map resize waits for readers: new readers wait on rw */
    atomic_int extra_readers; /* read transactions running outside the slots (all were busy) */
    atomic_int broken;
    _Atomic(const char *) broken_why; /* static text: why it broke (each engine's backend logs it once) */
    _Atomic int64_t next_size_check; /* coarse monotonic ns: when a reader next checks the file's size */
    bool moved_aside; /* this process found the store unusable at open and moved it aside */
    bool verify; /* check every value's checksum on read (the no-sync setting, see cr_store_get) */
};

/* ---- small helpers ------------------------------------------------------------------------- */

/* Keys of the index records (see the top of the file): a 4-byte prefix 0 0 0 kind, then the
 * fields. No hash falls between or inside the two ranges in practice (it would have to start with
 * 0 0 0 1 or 0 0 0 2: one in 2^32). */
#define IX_EXPIRY 1
#define IX_ORDER 2
#define IX_PREFIX 4
#define IX_EXPIRY_LEN 28
#define IX_ORDER_LEN 12
#define IX_HASH_AT 12  /* the hash in an expiry key */
#define IX_ORDER_VAL 40 /* hash(16) | totals(24) */

static void ix_prefix(uint8_t *k, uint8_t kind) {
    k[0] = k[1] = k[2] = 0;
    k[3] = kind;
}

static void expiry_key(uint8_t k[IX_EXPIRY_LEN], int64_t discard_ms, const uint8_t hash[16]) {
    ix_prefix(k, IX_EXPIRY);
    cr_put_be64(k + IX_PREFIX, cr_be_time(discard_ms));
    memcpy(k + IX_HASH_AT, hash, 16);
}

/* The discard time of an expiry record. */
static uint64_t expiry_of(const MDB_val *k) { return cr_get_be64((const uint8_t *)k->mv_data + IX_PREFIX); }

/* Newest first: the complement of the sequence number. */
static void order_key(uint8_t k[IX_ORDER_LEN], uint64_t seq) {
    ix_prefix(k, IX_ORDER);
    cr_put_be64(k + IX_PREFIX, ~seq);
}

static bool is_ix(const MDB_val *k, uint8_t kind) {
    const uint8_t *b = k->mv_data;
    return k->mv_size >= IX_PREFIX && b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == kind;
}

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
static void mark_broken(cr_store *s, int rc) {
    if (atomic_exchange(&s->broken, 1)) return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/CORRUPT", s->base.dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    const char *expected = NULL; /* the first reason stays (cut_short's, when it set one) */
    atomic_compare_exchange_strong(&s->broken_why, &expected, mdb_strerror(rc));
}

/* ---- entry format ---------------------------------------------------------------------------- */
/*
 * Value layout (host byte order; the magic catches a foreign byte order):
 *   0 u32 magic   4 u16 format   6 u16 header size (96)   8 u32 flags   12 i32 status
 *  16 i64 created   24 i64 expires   32 i64 discard   40 u64 seq
 *  48 u32 initial age   52 u32 stale-while-revalidate   56 u32 stale-if-error
 *  60 u32 key len   64 u32 method len   68 u32 url len   72 u32 etag len   76 u32 last-modified len
 *  80 u32 header block len   84 u32 checksum   88 u64 body len
 *  96 key, method, url, etag, last-modified, header block ("name\0value\0"...), body
 * The checksum (low 32 bits of a 64-bit hash of the payload seeded with a hash of bytes 0..83)
 * catches a torn or damaged value: such an entry reads as a miss and is replaced by the next write.
 */

static size_t header_block_len(const cr_store_put *p) {
    if (!p->headers) return p->entry.headers_len;
    size_t n = 0;
    for (size_t i = 0; i < p->headers->count; i++)
        n += strlen(p->headers->items[i].name) + 1 + strlen(p->headers->items[i].value) + 1;
    return n;
}

static size_t entry_size(const cr_store_put *p, size_t hb) {
    const cr_entry *e = &p->entry;
    return CR_ENTRY_HDR + e->key_len + e->method_len + e->url_len + e->etag_len + e->last_modified_len + hb +
           e->body_len;
}

bool cr_store_too_large(const cr_store_put *p, int64_t limit_bytes) {
    uint64_t limit = limit_bytes > 0 ? (uint64_t)limit_bytes : UINT64_MAX;
    /* One entry may take at most an eighth of the limit, so a large body never empties the cache. */
    return !p->remove_only && (uint64_t)entry_size(p, header_block_len(p)) + 16 > limit / 8;
}

static void w32(uint8_t *b, size_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static void w64(uint8_t *b, size_t off, uint64_t v) { memcpy(b + off, &v, 8); }
static uint32_t r32(const uint8_t *b, size_t off) {
    uint32_t v;
    memcpy(&v, b + off, 4);
    return v;
}
static uint64_t r64(const uint8_t *b, size_t off) {
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

static void entry_encode(const cr_store_put *p, size_t hb, uint8_t *out, size_t size) {
    const cr_entry *e = &p->entry;
    memset(out, 0, CR_ENTRY_HDR);
    w32(out, 0, CR_ENTRY_MAGIC);
    uint16_t fmt = CR_ENTRY_FORMAT, hs = CR_ENTRY_HDR;
    memcpy(out + 4, &fmt, 2);
    memcpy(out + 6, &hs, 2);
    w32(out, 8, e->flags);
    w32(out, 12, (uint32_t)e->status);
    w64(out, 16, (uint64_t)e->created_ms);
    w64(out, 24, (uint64_t)e->expires_ms);
    w64(out, 32, (uint64_t)e->discard_ms);
    w64(out, 40, e->seq);
    w32(out, 48, e->initial_age_s);
    w32(out, 52, e->swr_s);
    w32(out, 56, e->sie_s);
    w32(out, 60, (uint32_t)e->key_len);
    w32(out, 64, (uint32_t)e->method_len);
    w32(out, 68, (uint32_t)e->url_len);
    w32(out, 72, (uint32_t)e->etag_len);
    w32(out, 76, (uint32_t)e->last_modified_len);
    w32(out, 80, (uint32_t)hb);
    w64(out, 88, (uint64_t)e->body_len);
    uint8_t *q = out + CR_ENTRY_HDR;
#define PUT(ptr, len)                         \
    do {                                      \
        if (len) memcpy(q, (ptr), (len));     \
        q += (len);                           \
    } while (0)
    PUT(e->key, e->key_len);
    PUT(e->method, e->method_len);
    PUT(e->url, e->url_len);
    PUT(e->etag, e->etag_len);
    PUT(e->last_modified, e->last_modified_len);
    if (p->headers) {
        for (size_t i = 0; i < p->headers->count; i++) {
            const cr_kv *kv = &p->headers->items[i];
            size_t nl = strlen(kv->name) + 1, vl = strlen(kv->value) + 1;
            PUT(kv->name, nl);
            PUT(kv->value, vl);
        }
    } else {
        PUT(e->headers, e->headers_len);
    }
    PUT(e->body, e->body_len);
#undef PUT
    uint64_t seed = cr_hash64(out, 84, 0x636f7572696572ULL);
    w32(out, 84, (uint32_t)cr_hash64(out + CR_ENTRY_HDR, size - CR_ENTRY_HDR, seed));
}

size_t cr_entry_encoded_size(const cr_store_put *p) { return entry_size(p, header_block_len(p)); }

void cr_entry_encode(const cr_store_put *p, uint8_t *out, size_t size) { entry_encode(p, header_block_len(p), out, size); }

bool cr_entry_decode(const void *data, size_t len, bool verify, cr_entry *out) {
    const uint8_t *b = data;
    if (len < CR_ENTRY_HDR || r32(b, 0) != CR_ENTRY_MAGIC) return false;
    uint16_t fmt, hs;
    memcpy(&fmt, b + 4, 2);
    memcpy(&hs, b + 6, 2);
    if (fmt != CR_ENTRY_FORMAT || hs != CR_ENTRY_HDR) return false;
    memset(out, 0, sizeof *out);
    out->flags = r32(b, 8);
    out->status = (int)r32(b, 12);
    out->created_ms = (int64_t)r64(b, 16);
    out->expires_ms = (int64_t)r64(b, 24);
    out->discard_ms = (int64_t)r64(b, 32);
    out->seq = r64(b, 40);
    out->initial_age_s = r32(b, 48);
    out->swr_s = r32(b, 52);
    out->sie_s = r32(b, 56);
    out->key_len = r32(b, 60);
    out->method_len = r32(b, 64);
    out->url_len = r32(b, 68);
    out->etag_len = r32(b, 72);
    out->last_modified_len = r32(b, 76);
    out->headers_len = r32(b, 80);
    uint64_t body_len = r64(b, 88);
    uint64_t total = (uint64_t)CR_ENTRY_HDR + out->key_len + out->method_len + out->url_len + out->etag_len +
                     out->last_modified_len + out->headers_len;
    if (body_len > len || total + body_len != len) return false;
    out->body_len = (size_t)body_len;
    if (verify) {
        uint64_t seed = cr_hash64(b, 84, 0x636f7572696572ULL);
        if ((uint32_t)cr_hash64(b + CR_ENTRY_HDR, len - CR_ENTRY_HDR, seed) != r32(b, 84)) return false;
    }
    const char *q = (const char *)b + CR_ENTRY_HDR;
    out->key = q;
    q += out->key_len;
    out->method = q;
    q += out->method_len;
    out->url = q;
    q += out->url_len;
    out->etag = q;
    q += out->etag_len;
    out->last_modified = q;
    q += out->last_modified_len;
    out->headers = q;
    q += out->headers_len;
    out->body = (const uint8_t *)q;
    if (out->headers_len && out->headers[out->headers_len - 1] != '\0') return false;
    out->stored_size = len + 16;
    return true;
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
        if (k.mv_size != 16 || v.mv_size < CR_ENTRY_HDR || r32(v.mv_data, 0) != CR_ENTRY_MAGIC) continue;
        uint8_t ek[IX_EXPIRY_LEN], ok[IX_ORDER_LEN];
        uint64_t seq = r64(v.mv_data, 40);
        expiry_key(ek, (int64_t)r64(v.mv_data, 32), k.mv_data);
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

static bool cut_short(cr_store *s, bool always) {
    if (!always) {
        int64_t now = coarse_ns(), due = atomic_load_explicit(&s->next_size_check, memory_order_relaxed);
        if (now < due || !atomic_compare_exchange_strong(&s->next_size_check, &due, now + CR_SIZE_CHECK_NS))
            return false;
    }
    int rc = cr_lmdb_file_intact(s->base.env, &s->base.file_largest);
    const char *expected = NULL;
    if (rc) atomic_compare_exchange_strong(&s->broken_why, &expected, "its data file was cut short while open");
    if (rc) mark_broken(s, rc);
    return rc != 0;
}

int cr_store_read_begin(cr_store *s, cr_read *out) {
    out->txn = NULL;
    out->slot = -1;
    if (atomic_load_explicit(&s->broken, memory_order_relaxed) || cut_short(s, false)) return COURIER_E_STORE;
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
        if (cr_lmdb_is_corruption(rc)) mark_broken(s, rc);
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
        if (cr_lmdb_is_corruption(rc)) mark_broken(s, rc);
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
        if (cr_lmdb_is_corruption(rc)) mark_broken(s, rc);
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
        if (rc == 0 && cut_short(s, true)) {
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
        if (cr_lmdb_is_corruption(rc)) mark_broken(s, rc);
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
    if (cr_lmdb_is_corruption(rc)) mark_broken(s, rc);
    return rc;
}

static void write_abort(cr_store *s, MDB_txn *txn) {
    mdb_txn_abort(txn);
    pthread_rwlock_unlock(&s->rw);
}

/* The totals live in the newest write record (no record: an empty store, all zero). */
static int totals_read(cr_store *s, MDB_txn *txn, totals *t) {
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
    return hit ? 0 : totals_read(s, txn, t);
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
    if (old->mv_size >= CR_ENTRY_HDR && r32(old->mv_data, 0) == CR_ENTRY_MAGIC) {
        uint8_t ek[IX_EXPIRY_LEN], ok[IX_ORDER_LEN];
        expiry_key(ek, (int64_t)r64(old->mv_data, 32), hash);
        order_key(ok, r64(old->mv_data, 40));
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

/* The pages the main tree may take for a limit (docs/design/cache.md, "Disk bound"): three times the
 * limit, the fill LMDB's pages reach under random inserts and removals of values of a third of a
 * page (the worst case: about 35% of each leaf used). */
static uint64_t tree_cap(uint64_t limit) { return limit > UINT64_MAX / 4 ? UINT64_MAX : limit * 3; }

static bool over(cr_store *s, MDB_txn *txn, const totals *t, uint64_t target) {
    return t->bytes > target || (target < UINT64_MAX / 4 && tree_bytes(s, txn) > tree_cap(target));
}

/* Evicts while over(target) (the bytes over target, or the trees over 3x target), at most max_n
 * entries (0: no bound): entries past their discard time first, then the least recently written. */
static int evict_in_txn(cr_store *s, MDB_txn *txn, totals *t, uint64_t target, int64_t now_ms, uint64_t max_n,
                        uint64_t *evicted) {
    int rc = 0;
    MDB_cursor *c = NULL;
    uint64_t n = 0;
    for (int phase = 0; phase < 2 && over(s, txn, t, target) && (max_n == 0 || n < max_n); phase++) {
        rc = mdb_cursor_open(txn, s->db_main, &c);
        if (rc) return rc;
        const uint8_t kind = phase == 0 ? IX_EXPIRY : IX_ORDER;
        while (over(s, txn, t, target) && (max_n == 0 || n < max_n)) {
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
    size_t hb = header_block_len(p);
    size_t size = entry_size(p, hb);
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
    entry_encode(&local, hb, v.mv_data, size);
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
    if (left) *left = over(s, txn, &t, keep_bytes) ? UINT64_MAX : t.bytes;
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
        uint64_t target = limit - limit / 64;
        if (rc == 0 && over(s, txn, &t, limit)) rc = evict_in_txn(s, txn, &t, target, now_ms, CR_EVICT_BATCH, &evicted);
        if (rc == 0 && (!carried || evicted)) rc = totals_write(s, txn, &t);
        uint64_t left = rc == 0 && over(s, txn, &t, limit) ? UINT64_MAX : t.bytes;
        if (rc == 0) {
            rc = write_commit(s, txn, &t);
        } else {
            write_abort(s, txn);
        }
        if (rc == 0) {
            effect->written += written;
            effect->skipped += skipped;
            while (left > limit) {
                uint64_t ev = 0;
                if (evict_txn(s, target, now_ms, &ev, &left) != 0 || ev == 0) break;
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
            if (totals_read(s, rt.txn, &cur) == 0) have = cur.bytes;
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
        if ((int64_t)r64(v.mv_data, 16) < since_ms) continue;
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
    int rc = totals_read(s, rd.txn, &t);
    cr_store_read_end(s, &rd);
    if (rc) return cr_lmdb_fail(err, rc, COURIER_E_STORE, "cannot read the cache");
    if (bytes) *bytes = (int64_t)t.bytes;
    if (count) *count = (int64_t)t.count;
    return COURIER_OK;
}

/* ---- listing -------------------------------------------------------------------------------- */

int cr_list_item_fill(cr_list_item *it, const cr_entry *e, const uint8_t hash[16]) {
    memset(it, 0, sizeof *it);
    it->key = cr_strndup(e->key, e->key_len);
    it->url = cr_strndup(e->url, e->url_len);
    if (!it->key || !it->url) return COURIER_E_NO_MEMORY;
    cr_key_hex(hash, it->id);
    it->status = e->status;
    it->size = (int64_t)e->stored_size;
    it->created_ms = e->created_ms;
    it->expires_ms = e->expires_ms;
    it->discard_ms = e->discard_ms;
    return COURIER_OK;
}

void cr_list_items_free(cr_list_item *items, size_t count) {
    for (size_t i = 0; i < count; i++) {
        free(items[i].key);
        free(items[i].url);
    }
    free(items);
}

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

/* ---- verification ---------------------------------------------------------------------------- */

/* Does the index record under key k (an expiry or a write-order record) name a stored entry whose
 * header agrees with it? */
static bool ix_matches(cr_store *s, MDB_txn *txn, const MDB_val *k, const MDB_val *v, bool expiry) {
    const uint8_t *hash;
    if (expiry) hash = (const uint8_t *)k->mv_data + IX_HASH_AT;
    else if (v->mv_size >= 16) hash = v->mv_data;
    else return false;
    MDB_val ek = {16, (void *)hash}, ev;
    if (mdb_get(txn, s->db_main, &ek, &ev) != 0) return false;
    if (ev.mv_size < CR_ENTRY_HDR || r32(ev.mv_data, 0) != CR_ENTRY_MAGIC) return false;
    if (expiry) return r64(ev.mv_data, 32) == expiry_of(k);
    return ~r64(ev.mv_data, 40) == cr_get_be64((const uint8_t *)k->mv_data + IX_PREFIX);
}

/* Has the entry (hash, decoded e) both of its index records? */
static bool entry_indexed(cr_store *s, MDB_txn *txn, const uint8_t hash[16], const cr_entry *e) {
    uint8_t ek[IX_EXPIRY_LEN], ok[IX_ORDER_LEN];
    expiry_key(ek, e->discard_ms, hash);
    order_key(ok, e->seq);
    MDB_val ekv = {sizeof ek, ek}, okv = {sizeof ok, ok}, v;
    if (mdb_get(txn, s->db_main, &ekv, &v) != 0) return false;
    if (mdb_get(txn, s->db_main, &okv, &v) != 0) return false;
    return v.mv_size >= 16 && memcmp(v.mv_data, hash, 16) == 0;
}

int cr_store_verify(cr_store *s, courier_cache_verify_report *r, courier_error *err) {
    memset(r, 0, sizeof *r);
    r->moved_aside = s->moved_aside;
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/data.mdb", s->base.dir);
    if (stat(path, &st) == 0) r->file_bytes = (int64_t)st.st_size;
    MDB_envinfo info;
    MDB_stat est;
    if (mdb_env_info(s->base.env, &info) == 0 && mdb_env_stat(s->base.env, &est) == 0) {
        r->map_bytes = (int64_t)info.me_mapsize;
        r->used_bytes = (int64_t)(info.me_last_pgno + 1) * (int64_t)est.ms_psize;
    }
    if (atomic_load(&s->broken) || cut_short(s, true)) {
        r->problems = 1;
        r->unreadable = 1;
        return cr_fail(err, COURIER_E_CACHE_INCONSISTENT, "the store reported corruption; it is recreated at the next open");
    }
    cr_read rd;
    if (cr_store_read_begin(s, &rd) != COURIER_OK) return cr_fail(err, COURIER_E_STORE, "cannot read the cache");
    MDB_cursor *c = NULL;
    int rc = mdb_cursor_open(rd.txn, s->db_main, &c);
    MDB_val k, v;
    for (int op = MDB_FIRST; rc == 0; op = MDB_NEXT) {
        rc = mdb_cursor_get(c, &k, &v, (MDB_cursor_op)op);
        if (rc) break;
        if (k.mv_size == 16) {
            r->entries++;
            r->bytes += (int64_t)v.mv_size + 16;
            cr_entry e;
            if (!cr_entry_decode(v.mv_data, v.mv_size, true, &e)) r->damaged++;
            else if (!entry_indexed(s, rd.txn, k.mv_data, &e)) r->missing_index++;
        } else if (is_ix(&k, IX_EXPIRY) && k.mv_size == IX_EXPIRY_LEN) {
            if (!ix_matches(s, rd.txn, &k, &v, true)) r->orphan_index++;
        } else if (is_ix(&k, IX_ORDER) && k.mv_size == IX_ORDER_LEN) {
            if (!ix_matches(s, rd.txn, &k, &v, false)) r->orphan_index++;
        } else if (k.mv_size != 4) {
            r->orphan_index++; /* a record of no known kind (named databases have 4-byte names) */
        }
    }
    if (c) mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) {
        /* Where the file's pages are: the trees, and LMDB's free list (database 0), whose records
         * each start with their count of page numbers. */
        MDB_dbi dbs[] = {s->db_main, s->db_vary, s->db_meta};
        for (size_t i = 0; i < 3; i++) {
            MDB_stat ms;
            if (mdb_stat(rd.txn, dbs[i], &ms) == 0)
                r->tree_bytes += (int64_t)(ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages) * ms.ms_psize;
        }
        MDB_cursor *fc = NULL;
        MDB_stat fs;
        if (mdb_stat(rd.txn, 0, &fs) == 0 && mdb_cursor_open(rd.txn, 0, &fc) == 0) {
            r->tree_bytes += (int64_t)(fs.ms_branch_pages + fs.ms_leaf_pages + fs.ms_overflow_pages) * fs.ms_psize;
            MDB_val fk, fv;
            for (int op = MDB_FIRST; mdb_cursor_get(fc, &fk, &fv, (MDB_cursor_op)op) == 0; op = MDB_NEXT) {
                size_t nfree = 0;
                if (fv.mv_size >= sizeof nfree) memcpy(&nfree, fv.mv_data, sizeof nfree);
                r->free_bytes += (int64_t)nfree * fs.ms_psize;
            }
            mdb_cursor_close(fc);
        }
    }
    totals t;
    int trc = rc == MDB_NOTFOUND ? totals_read(s, rd.txn, &t) : rc;
    cr_store_read_end(s, &rd);
    if (trc) {
        if (cr_lmdb_is_corruption(trc)) {
            mark_broken(s, trc);
            r->unreadable = 1;
            r->problems = 1;
            cr_fail(err, COURIER_E_CACHE_INCONSISTENT, "the store cannot be read through: %s", mdb_strerror(trc));
            if (err) err->store_error = trc;
            return COURIER_E_CACHE_INCONSISTENT;
        }
        return cr_lmdb_fail(err, trc, COURIER_E_STORE, "cannot read the cache");
    }
    r->total_entries = (int64_t)t.count;
    r->total_bytes = (int64_t)t.bytes;
    r->totals_mismatch = r->total_entries != r->entries || r->total_bytes != r->bytes;
    r->problems = r->damaged + r->orphan_index + r->missing_index + r->totals_mismatch;
    if (r->problems)
        return cr_fail(err, COURIER_E_CACHE_INCONSISTENT,
                       "%lld damaged, %lld orphan index records, %lld entries without index, totals %s",
                       (long long)r->damaged, (long long)r->orphan_index, (long long)r->missing_index,
                       r->totals_mismatch ? "differ from the scan" : "agree");
    return COURIER_OK;
}

/* ---- the LMDB backend of the seam (store.h) -------------------------------------------------- */

typedef struct lmdb_backend {
    cr_cache_store base;
    cr_store *s;
    courier_engine *e; /* the engine whose cache this is: told when the store breaks */
    atomic_bool told;
} lmdb_backend;

#define LB(b) (((lmdb_backend *)(b))->s)

/* After an operation (no transaction held): a store that broke while open is said once, on this
 * engine's logger; it answers "miss" until the next open moves it aside. */
static int told(cr_cache_store *b, int rc) {
    lmdb_backend *lb = (lmdb_backend *)b;
    if (atomic_load_explicit(&lb->s->broken, memory_order_relaxed) && !atomic_exchange(&lb->told, true)) {
        const char *why = atomic_load(&lb->s->broken_why);
        cr_cache_note(lb->e, COURIER_LOG_ERROR, "cache_store_broken",
                      "the cache store '%s' reported '%s'; it will be moved aside and recreated at the next open",
                      lb->s->base.dir, why ? why : "corrupt");
    }
    return rc;
}

static void lb_release(cr_cache_store *b) {
    if (!b) return;
    cr_store_release(LB(b));
    free(b);
}
static int lb_read_begin(cr_cache_store *b, cr_read *out) { return told(b, cr_store_read_begin(LB(b), out)); }
static void lb_read_end(cr_cache_store *b, cr_read *r) {
    cr_store_read_end(LB(b), r);
    (void)told(b, 0);
}
static int lb_get(cr_cache_store *b, cr_read *r, const char *key, size_t key_len, const uint8_t hash[16],
                  cr_entry *out) {
    (void)key, (void)key_len;
    return cr_store_get(LB(b), r->txn, hash, out);
}
static int lb_vary_get(cr_cache_store *b, cr_read *r, const char *key, size_t key_len, const uint8_t hash[16],
                       const char **names, size_t *len) {
    (void)key, (void)key_len;
    return cr_store_vary_get(LB(b), r->txn, hash, names, len);
}
static int lb_write(cr_cache_store *b, const cr_store_put *puts, size_t n, int64_t limit_bytes, int64_t now_ms,
                    cr_store_effect *effect, courier_error *err) {
    return told(b, cr_store_write(LB(b), puts, n, limit_bytes, now_ms, effect, err));
}
static int lb_remove(cr_cache_store *b, const char *key, size_t key_len, const uint8_t hash[16], courier_error *err) {
    (void)key, (void)key_len;
    return told(b, cr_store_remove(LB(b), hash, err));
}
static int lb_remove_all(cr_cache_store *b, int64_t *removed, courier_error *err) {
    return told(b, cr_store_remove_all(LB(b), removed, err));
}
static int lb_remove_since(cr_cache_store *b, int64_t since_ms, int64_t *removed, courier_error *err) {
    return told(b, cr_store_remove_since(LB(b), since_ms, removed, err));
}
static int lb_remove_expired(cr_cache_store *b, int64_t now_ms, int64_t *removed, courier_error *err) {
    return told(b, cr_store_remove_expired(LB(b), now_ms, removed, err));
}
static int lb_totals(cr_cache_store *b, int64_t *bytes, int64_t *count, courier_error *err) {
    return told(b, cr_store_totals(LB(b), bytes, count, err));
}
static int lb_verify(cr_cache_store *b, courier_cache_verify_report *r, courier_error *err) {
    return told(b, cr_store_verify(LB(b), r, err));
}
static int lb_list(cr_cache_store *b, cr_list_item **items, size_t *count, courier_error *err) {
    return told(b, cr_store_list(LB(b), items, count, err));
}

static const cr_store_ops lmdb_ops = {
    .name = "lmdb",
    .release = lb_release,
    .read_begin = lb_read_begin,
    .read_end = lb_read_end,
    .get = lb_get,
    .vary_get = lb_vary_get,
    .write = lb_write,
    .remove = lb_remove,
    .remove_all = lb_remove_all,
    .remove_since = lb_remove_since,
    .remove_expired = lb_remove_expired,
    .totals = lb_totals,
    .verify = lb_verify,
    .list = lb_list,
};

int cr_store_open_lmdb(courier_engine *e, const char *dir, int64_t map_bytes, int durability, cr_cache_store **out,
                       char *note, size_t note_cap, courier_error *err) {
    *out = NULL;
    lmdb_backend *b = calloc(1, sizeof *b);
    if (!b) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    b->e = e;
    atomic_init(&b->told, false);
    int rc = cr_store_acquire(dir, map_bytes, durability, &b->s, note, note_cap, err);
    if (rc) {
        free(b);
        return rc;
    }
    b->base.ops = &lmdb_ops;
    *out = &b->base;
    return COURIER_OK;
}
