/*
 * store_verify.c — courier_cache_verify on the LMDB store: one read transaction over the main
 * tree (every entry decoded with its checksum, each index record matched to its entry), the pages
 * of the trees and of LMDB's free list, and the totals compared with the scan. Any thread; it
 * never writes (a store found cut short or unreadable is marked broken, as a read would).
 */
#include "cache/store_lmdb.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

/* Does the index record under key k (an expiry or a write-order record) name a stored entry whose
 * header agrees with it? */
static bool ix_matches(cr_store *s, MDB_txn *txn, const MDB_val *k, const MDB_val *v, bool expiry) {
    const uint8_t *hash;
    if (expiry) hash = (const uint8_t *)k->mv_data + IX_HASH_AT;
    else if (v->mv_size >= 16) hash = v->mv_data;
    else return false;
    MDB_val ek = {16, (void *)hash}, ev;
    if (mdb_get(txn, s->db_main, &ek, &ev) != 0) return false;
    if (ev.mv_size < CR_ENTRY_HDR || cr_entry_u32(ev.mv_data, 0) != CR_ENTRY_MAGIC) return false;
    if (expiry) return cr_entry_u64(ev.mv_data, 32) == expiry_of(k);
    return ~cr_entry_u64(ev.mv_data, 40) == cr_get_be64((const uint8_t *)k->mv_data + IX_PREFIX);
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
    if (atomic_load(&s->broken) || cr_store_cut_short(s, true)) {
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
    int trc = rc == MDB_NOTFOUND ? cr_store_totals_read(s, rd.txn, &t) : rc;
    cr_store_read_end(s, &rd);
    if (trc) {
        if (cr_lmdb_is_corruption(trc)) {
            cr_store_mark_broken(s, trc);
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
