/*
 * store_lmdb.c — the LMDB store behind the backend seam (cr_store_ops, store.h): each operation
 * goes to store.c (or store_verify.c), and a store that broke while open is told once on its
 * engine's logger. The top of the LMDB store: the cache opens it here (cr_store_open_lmdb).
 */
#include "cache/store_lmdb.h"

#include <stdlib.h>

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
