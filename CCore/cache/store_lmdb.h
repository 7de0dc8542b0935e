/*
 * cache/store_lmdb.h — the LMDB store's own parts, shared by its files only: store.c (opening,
 * transactions, writes, removal, listing, the seam) and store_verify.c (courier_cache_verify's
 * scan). The store's struct, its key layout (store.c's top comment) and the few functions both
 * call.
 */
#ifndef COURIER_CACHE_STORE_LMDB_H
#define COURIER_CACHE_STORE_LMDB_H

#include "cache/store.h"
#include "base/lmdb_env.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Hidden like internal.h's declarations (see there). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

#define CR_READ_SLOTS 16 /* reset read transactions kept per store (each holds an LMDB reader slot) */

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

/* Keys of the index records (see the top of store.c): a 4-byte prefix 0 0 0 kind, then the
 * fields. No hash falls between or inside the two ranges in practice (it would have to start with
 * 0 0 0 1 or 0 0 0 2: one in 2^32). */
#define IX_EXPIRY 1
#define IX_ORDER 2
#define IX_PREFIX 4
#define IX_EXPIRY_LEN 28
#define IX_ORDER_LEN 12
#define IX_HASH_AT 12  /* the hash in an expiry key */
#define IX_ORDER_VAL 40 /* hash(16) | totals(24) */

static inline void ix_prefix(uint8_t *k, uint8_t kind) {
    k[0] = k[1] = k[2] = 0;
    k[3] = kind;
}

static inline void expiry_key(uint8_t k[IX_EXPIRY_LEN], int64_t discard_ms, const uint8_t hash[16]) {
    ix_prefix(k, IX_EXPIRY);
    cr_put_be64(k + IX_PREFIX, cr_be_time(discard_ms));
    memcpy(k + IX_HASH_AT, hash, 16);
}

/* The discard time of an expiry record. */
static inline uint64_t expiry_of(const MDB_val *k) { return cr_get_be64((const uint8_t *)k->mv_data + IX_PREFIX); }

/* Newest first: the complement of the sequence number. */
static inline void order_key(uint8_t k[IX_ORDER_LEN], uint64_t seq) {
    ix_prefix(k, IX_ORDER);
    cr_put_be64(k + IX_PREFIX, ~seq);
}

static inline bool is_ix(const MDB_val *k, uint8_t kind) {
    const uint8_t *b = k->mv_data;
    return k->mv_size >= IX_PREFIX && b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == kind;
}

/* store.c. A run-time corruption: the store keeps answering "miss", and the next open recreates it. */
void cr_store_mark_broken(cr_store *s, int rc);
/* store.c. Whether the data file was cut short while open (checked at most every few ms unless
 * `always`); a cut store is marked broken. */
bool cr_store_cut_short(cr_store *s, bool always);
/* store.c. The totals, from the newest write record (no record: an empty store, all zero). */
int cr_store_totals_read(cr_store *s, MDB_txn *txn, totals *t);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_CACHE_STORE_LMDB_H */
