/*
 * store.h — the cache's floor: the store (store.c, store_verify.c, store_lmdb.c; store_lmdb.h is
 * theirs), one LMDB environment per store directory, and the record it keeps for each entry
 * (entry.c: versioned header + payload). It stands on the base layer
 * alone: nothing here names the cache's keys, policies or HTTP rules, which stand on it
 * (cache_internal.h).
 */
#ifndef COURIER_CACHE_STORE_H
#define COURIER_CACHE_STORE_H

#include "base/base.h"

/* Hidden like internal.h's declarations (see there). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

struct MDB_txn;

/* ---- entries (entry.c: the value layout, the same on every backend) ------------------------- */

#define CR_ENTRY_MAGIC 0x45435243u /* "CRCE" */
#define CR_ENTRY_HDR 96u
/* A field of an encoded entry's header (host byte order, at byte `off`: entry.c has the layout). */
static inline uint32_t cr_entry_u32(const uint8_t *b, size_t off) {
    uint32_t v;
    memcpy(&v, b + off, 4);
    return v;
}
static inline uint64_t cr_entry_u64(const uint8_t *b, size_t off) {
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

#define CR_ENTRY_FORMAT 1u
#define CR_STORE_FORMAT 2u

/* Entry flags. */
#define CR_EF_MUST_REVALIDATE 0x1u /* Cache-Control: must-revalidate (no stale serving) */
#define CR_EF_NO_CACHE 0x2u        /* Cache-Control: no-cache (revalidate before every use) */
#define CR_EF_HTTP 0x4u            /* written by the HTTP policy */

/* A decoded entry. When it comes from the store the pointers are borrowed from the read
 * transaction (valid until cr_store_read_end); when it is given to cr_store_write they are the
 * sources to encode. */
typedef struct cr_entry {
    uint32_t flags;
    int status;
    int64_t created_ms;  /* when it was written (the response time) */
    int64_t expires_ms;  /* fresh until */
    int64_t discard_ms;  /* useless after (expiry index key); >= expires_ms */
    uint64_t seq;        /* store-wide write order (filled by the store) */
    uint32_t initial_age_s; /* RFC 9111 corrected initial age */
    uint32_t swr_s;      /* stale-while-revalidate */
    uint32_t sie_s;      /* stale-if-error */
    const char *key;
    size_t key_len;
    const char *method;
    size_t method_len;
    const char *url;
    size_t url_len;
    const char *etag;
    size_t etag_len;
    const char *last_modified;
    size_t last_modified_len;
    const char *headers; /* "name\0value\0" pairs */
    size_t headers_len;
    const uint8_t *body;
    size_t body_len;
    size_t stored_size; /* key + value bytes in the store (decoded entries only) */
} cr_entry;

/* Decodes a stored value; false when it is not a valid entry of a known format (or, with
 * `verify`, when its checksum does not match: a torn or damaged value). */
CR_HIDDEN bool cr_entry_decode(const void *data, size_t len, bool verify, cr_entry *out);

/* ---- the store (store.c; verification in store_verify.c) ---------------------------------------- */

typedef struct cr_store cr_store;

/* Opens (or shares) the cache environment in `dir` (created if absent). A corrupt store, or one
 * written by a newer format, is moved aside (renamed "<dir>.broken-<time>-<pid>") and a fresh one
 * created; an older format is upgraded. What this call did so is said in `note` (may be NULL;
 * note_cap bytes; "" when nothing) for the caller's engine to log: the store has no engine and
 * writes nothing to stderr. map_bytes sizes the map of a new environment in this process.
 * *out is new: release with cr_store_release. */
CR_HIDDEN int cr_store_acquire(const char *dir, int64_t map_bytes, int durability, cr_store **out, char *note,
                               size_t note_cap, courier_error *err);
CR_HIDDEN void cr_store_release(cr_store *s);
CR_HIDDEN const char *cr_store_dir(const cr_store *s);

/* A read transaction and the slot it came from; on Redis, the replies a read's borrowed pointers
 * point into (freed by read_end). */
typedef struct cr_read {
    struct MDB_txn *txn;
    int slot; /* the store's slot, or -1 for a transaction of its own */
    struct redisReply *held[2];   /* Redis: [0] the last vary_get's, [1] the last get's */
    bool pre;                     /* Redis: held[0] also holds the entry under pre_hash */
    uint8_t pre_hash[16];
} cr_read;

/* Read transactions, on any thread (MDB_NOTLS): a reset transaction from a slot of the store,
 * taken without a lock (see store.c). Never hold one across a write of the same thread. */
CR_HIDDEN int cr_store_read_begin(cr_store *s, cr_read *out);
CR_HIDDEN void cr_store_read_end(cr_store *s, cr_read *r);
/* The entry under hash: COURIER_OK, COURIER_E_NOT_FOUND (absent or invalid), COURIER_E_STORE. */
CR_HIDDEN int cr_store_get(cr_store *s, struct MDB_txn *txn, const uint8_t hash[16], cr_entry *out);
/* The Vary record of a primary key: the lowercase header names separated by '\n'. Borrowed from
 * the transaction. COURIER_OK or COURIER_E_NOT_FOUND. */
CR_HIDDEN int cr_store_vary_get(cr_store *s, struct MDB_txn *txn, const uint8_t hash[16], const char **names,
                                size_t *len);

/* One write. */
typedef struct cr_store_put {
    uint8_t hash[16];
    cr_entry entry;           /* sources; entry.seq is assigned */
    const cr_kvlist *headers; /* when non-NULL, encoded as the header block (else entry.headers) */
    const char *vary_names;   /* when non-NULL, written as the Vary record under vary_hash */
    uint8_t vary_hash[16];
    int remove_vary;          /* nonzero: remove the Vary record under vary_hash */
    int remove_only;          /* nonzero: remove the entry under hash instead of writing */
} cr_store_put;

/* What a write did, for the statistics. */
typedef struct cr_store_effect {
    uint64_t written;
    uint64_t evicted;
    uint64_t skipped; /* too large for the limit, or dropped after the store stayed full */
} cr_store_effect;

/* Writes several entries in one transaction, then evicts (expired first, then least recently
 * written) down to 90% of limit_bytes if the total is over it. A full map or disk evicts and
 * retries; what still does not fit is dropped (counted in effect->skipped), never an error.
 * Errors: COURIER_E_STORE for other storage failures. */
CR_HIDDEN int cr_store_write(cr_store *s, const cr_store_put *puts, size_t n, int64_t limit_bytes, int64_t now_ms,
                             cr_store_effect *effect, courier_error *err);
/* Whether a put is more than cr_store_write keeps under limit_bytes (an eighth of it). */
CR_HIDDEN bool cr_store_too_large(const cr_store_put *p, int64_t limit_bytes);
/* Removes one entry. COURIER_OK, COURIER_E_NOT_FOUND, COURIER_E_STORE. */
CR_HIDDEN int cr_store_remove(cr_store *s, const uint8_t hash[16], courier_error *err);
CR_HIDDEN int cr_store_remove_all(cr_store *s, int64_t *removed, courier_error *err);
/* Removes entries created at or after since_ms. */
CR_HIDDEN int cr_store_remove_since(cr_store *s, int64_t since_ms, int64_t *removed, courier_error *err);
/* Removes entries whose discard time is at or before now_ms (a range scan of the expiry index). */
CR_HIDDEN int cr_store_remove_expired(cr_store *s, int64_t now_ms, int64_t *removed, courier_error *err);
/* Exact totals, from the counters kept in the same transactions as the entries. */
CR_HIDDEN int cr_store_totals(cr_store *s, int64_t *bytes, int64_t *count, courier_error *err);

/* Reads the whole store in one read transaction: every entry decodes and its checksum matches,
 * has both index records, every index record names its entry, and the totals equal the scan.
 * COURIER_OK, COURIER_E_CACHE_INCONSISTENT (*r says what), COURIER_E_STORE. */
CR_HIDDEN int cr_store_verify(cr_store *s, courier_cache_verify_report *r, courier_error *err);

/* One listed entry (strings owned by the list). */
typedef struct cr_list_item {
    char *key;
    char *url;
    char id[33];
    int status;
    int64_t size;
    int64_t created_ms;
    int64_t expires_ms;
    int64_t discard_ms;
} cr_list_item;

CR_HIDDEN int cr_store_list(cr_store *s, cr_list_item **items, size_t *count, courier_error *err);
CR_HIDDEN void cr_list_items_free(cr_list_item *items, size_t count); /* entry.c */
/* entry.c: fills *it from a decoded entry and its hash (the strings copied; on COURIER_E_NO_MEMORY what was
 * copied is still *it's, freed with the list). */
CR_HIDDEN int cr_list_item_fill(cr_list_item *it, const cr_entry *e, const uint8_t hash[16]);

/* entry.c: the encoded size of a put's entry (its value in the store) and the encoding itself (the
 * value layout, the same on every backend): `out` has cr_entry_encoded_size bytes. */
CR_HIDDEN size_t cr_entry_encoded_size(const cr_store_put *p);
CR_HIDDEN void cr_entry_encode(const cr_store_put *p, uint8_t *out, size_t size);

/* ---- the backend seam: a table of store operations chosen when the cache opens ---------------- */

/* What the cache (cache.c) calls, on LMDB (store_lmdb.c) or Redis (store_redis.c). Every backend
 * handle starts with a cr_cache_store. The operations mean what the cr_store_* functions above
 * say; where a backend needs the key text beside its hash (Redis names keys by the URL's hash
 * tag), it is passed: `key` is the text that `hash` was made from. */
typedef struct cr_cache_store cr_cache_store;
typedef struct cr_store_ops {
    const char *name; /* "lmdb", "redis" */
    void (*release)(cr_cache_store *s);
    int (*read_begin)(cr_cache_store *s, cr_read *out);
    void (*read_end)(cr_cache_store *s, cr_read *r);
    int (*get)(cr_cache_store *s, cr_read *r, const char *key, size_t key_len, const uint8_t hash[16], cr_entry *out);
    int (*vary_get)(cr_cache_store *s, cr_read *r, const char *key, size_t key_len, const uint8_t hash[16],
                    const char **names, size_t *len);
    int (*write)(cr_cache_store *s, const cr_store_put *puts, size_t n, int64_t limit_bytes, int64_t now_ms,
                 cr_store_effect *effect, courier_error *err);
    int (*remove)(cr_cache_store *s, const char *key, size_t key_len, const uint8_t hash[16], courier_error *err);
    int (*remove_all)(cr_cache_store *s, int64_t *removed, courier_error *err);
    int (*remove_since)(cr_cache_store *s, int64_t since_ms, int64_t *removed, courier_error *err);
    int (*remove_expired)(cr_cache_store *s, int64_t now_ms, int64_t *removed, courier_error *err);
    int (*totals)(cr_cache_store *s, int64_t *bytes, int64_t *count, courier_error *err);
    int (*verify)(cr_cache_store *s, courier_cache_verify_report *r, courier_error *err);
    int (*list)(cr_cache_store *s, cr_list_item **items, size_t *count, courier_error *err);
} cr_store_ops;

struct cr_cache_store {
    const cr_store_ops *ops;
};

/* The LMDB backend on the store in `dir` for engine e (cr_store_acquire's arguments, note and
 * errors). The backend logs on e, once, that the store broke while open (cr_cache_note). */
CR_HIDDEN int cr_store_open_lmdb(courier_engine *e, const char *dir, int64_t map_bytes, int durability,
                                 cr_cache_store **out, char *note, size_t note_cap, courier_error *err);
/* The Redis backend (store_redis.c) on the server of a redis:// URL; no connection is made yet
 * (the first operation connects). timeout_ms bounds every call (the URL's timeout_ms wins).
 * Errors: those of cr_redis_open. */
CR_HIDDEN int cr_store_open_redis(const char *url, int64_t timeout_ms, cr_cache_store **out, courier_error *err);

/* The hash tag of an entry's or a Vary record's Redis keys: the primary key text (the key without
 * its Vary suffix, "\nvary:..."), so every variant of a URL and its Vary record share one Cluster
 * slot. Its length in the key text. */
CR_HIDDEN size_t cr_cache_primary_len(const char *key, size_t key_len);

/* A line of the cache component on e's logger (event `event`, at `level`); nothing anywhere else:
 * a library writes nothing to stderr of its own. Any thread that holds no store transaction. */
CR_HIDDEN void cr_cache_note(courier_engine *e, int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_CACHE_STORE_H */
