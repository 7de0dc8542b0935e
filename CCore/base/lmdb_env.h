/*
 * lmdb_env.h — the LMDB floor: what the cache's store (cache/store.c) and the journal
 * (journal/store.c) share about their environments, and nothing else includes.
 *
 *   - The registry: one environment per directory per process (LMDB forbids opening one twice in
 *     a process), keyed by the directory's device and inode and the process id (a child of fork()
 *     forgets its parent's), reference counted. Opening and moving aside are serialized across
 *     processes by a lock file beside the directory ("<dir>.lock").
 *   - Opening: the pre-mmap check of the data file (lmdb_file.c), the map's size (the file's when
 *     it is larger), dead readers cleared, the file padded and every page of its trees walked
 *     (lmdb_file.c), a write transaction that adopts a map another process grew, and the check of
 *     both ends of every tree.
 *   - Moving a store that does not open aside ("<dir>.<label>-<ms>-<pid>") with one line on stderr;
 *     then a fresh one (the cache) or an error that says where it was kept (the journal).
 *   - Which LMDB results mean damaged data, and the mapping of an LMDB or errno result to a
 *     courier code in a courier_error.
 *   - Byte order of keys: big-endian numbers sort as numbers; little-endian fixed fields.
 */
#ifndef COURIER_LMDB_ENV_H
#define COURIER_LMDB_ENV_H

#include "base/base.h"

#include <lmdb.h>
#include <string.h>
#include <sys/types.h>

/* ---- byte order (inline: on every key) ---------------------------------------------------- */

/* One load or store where the host's order allows (GCC 12 at -O2 kept the byte loops: a record's
 * state, 20 fields, decoded a byte at a time was ~700 instructions a replay). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && (defined(__GNUC__) || defined(__clang__))
#define CR_LE_HOST 1
#else
#define CR_LE_HOST 0
#endif

static inline void cr_put_be64(uint8_t *p, uint64_t v) {
#if CR_LE_HOST
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
#else
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
#endif
}

static inline uint64_t cr_get_be64(const uint8_t *p) {
#if CR_LE_HOST
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
#else
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
#endif
}

/* n bytes, little-endian (n <= 8). */
static inline void cr_put_le(uint8_t *p, uint64_t v, int n) {
#if CR_LE_HOST
    if (n == 8) {
        memcpy(p, &v, 8);
        return;
    }
    if (n == 4) {
        uint32_t w = (uint32_t)v;
        memcpy(p, &w, 4);
        return;
    }
    if (n == 2) {
        uint16_t w = (uint16_t)v;
        memcpy(p, &w, 2);
        return;
    }
#endif
    for (int i = 0; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

static inline uint64_t cr_get_le(const uint8_t *p, int n) {
#if CR_LE_HOST
    if (n == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    if (n == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    if (n == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
#endif
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A time in milliseconds as a key number: negative times sort first, as 0. */
static inline uint64_t cr_be_time(int64_t ms) { return ms < 0 ? 0 : (uint64_t)ms; }

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* ---- results ------------------------------------------------------------------------------ */

/* The data is damaged or not LMDB's: MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID,
 * MDB_VERSION_MISMATCH. */
bool cr_lmdb_is_corruption(int rc);
/* Corruption, or an environment or transaction that can no longer be used after one
 * (MDB_INCOMPATIBLE, MDB_BAD_TXN, MDB_PANIC). */
bool cr_lmdb_is_broken(int rc);
/* Fails *err (may be NULL) with "what: <LMDB's text>". The code: `corrupt_code` when
 * cr_lmdb_is_broken(rc), COURIER_E_NO_MEMORY for ENOMEM, else COURIER_E_STORE. rc goes to
 * err->os_error when it is an errno value (> 0), else to err->store_error. Returns the code. */
int cr_lmdb_fail(courier_error *err, int rc, int corrupt_code, const char *what);

/* ---- the registry ------------------------------------------------------------------------- */

typedef struct cr_lmdb_env cr_lmdb_env;

/* What kind of store an environment holds, and how it opens: one static instance per kind. */
typedef struct cr_lmdb_kind {
    const char *what;  /* "cache store", "frozen-request journal": in messages */
    const char *label; /* the moved-aside directory: "<dir>.<label>-<ms>-<pid>" */
    size_t size;       /* the owner's struct, which starts with a cr_lmdb_env (64-byte aligned) */
    int corrupt_code;  /* the code of a store that does not open (or was moved aside) */
    bool recreate;     /* moved aside: open a fresh one at once (else fail with corrupt_code) */
    bool sync_at_close; /* mdb_env_sync before the last release closes the environment */
    /* Opens v->env in v->dir (v zeroed but for the registry's fields) and whatever the owner keeps
     * beside it. 0, an LMDB or errno code, MDB_INVALID with *why (static text) for a store that
     * must be moved aside, or MDB_VERSION_MISMATCH with *why for one a newer version wrote, which
     * is left in place. */
    int (*open)(cr_lmdb_env *v, void *arg, const char **why);
    /* Frees the owner's parts (the environment is closed after it). Also after a failed open. */
    void (*destroy)(cr_lmdb_env *v);
} cr_lmdb_kind;

struct cr_lmdb_env {
    struct cr_lmdb_env *next; /* the registry */
    const cr_lmdb_kind *kind;
    dev_t dev;
    ino_t ino;
    pid_t pid;
    int refs; /* the registry's lock */
    char *dir;
    MDB_env *env;
    int64_t file_largest; /* the data file's largest size seen (cr_lmdb_file_intact) */
};

/* The environment of `dir` (created when absent) for this process: the one already open, with one
 * more reference, or a new one opened by kind->open (arg is its argument). A store that does not
 * open is moved aside; when this call did so and recreated it, `note` (may be NULL; note_cap bytes)
 * says so in a sentence for the caller's engine to log (the floor has no engine and writes nothing
 * to stderr), else it is "". *out new: release with cr_lmdb_env_release. Returns COURIER_OK or a
 * courier code in *err. */
int cr_lmdb_env_acquire(const cr_lmdb_kind *kind, const char *dir, void *arg, cr_lmdb_env **out, char *note,
                        size_t note_cap, courier_error *err);
/* Drops a reference; the last closes the environment. NULL-safe. */
void cr_lmdb_env_release(cr_lmdb_env *v);

/* ---- for the kinds' open functions -------------------------------------------------------- */

/* Creates and opens v->env: the pre-mmap check (cr_lmdb_file_check), `maxdbs` named databases,
 * 254 readers, a map of map_bytes (the file's size when larger), `flags` | MDB_NOTLS, dead readers
 * cleared; then the data file padded past its last page (cr_lmdb_file_pad, with LMDB's writer
 * lock) and every page LMDB would trust walked (cr_lmdb_walk), before anything is read or
 * written. 0, an LMDB or errno code, or MDB_INVALID with *why when the file must not be used. */
int cr_lmdb_env_open(cr_lmdb_env *v, unsigned maxdbs, size_t map_bytes, unsigned flags, const char **why);
/* Begins a write transaction, adopting a map another process grew (MDB_MAP_RESIZED) once. */
int cr_lmdb_begin_write(MDB_env *env, MDB_txn **txn);
/* Reads both ends of every tree, so a damaged root shows up now rather than later. 0 or the first
 * LMDB error. */
int cr_lmdb_verify(MDB_txn *txn, const MDB_dbi *dbis, size_t n);
/* mdb_txn_begin once the data file is found whole (cr_lmdb_file_intact: one statx): MDB_CORRUPTED
 * when it was cut short from outside since it was opened (the missing pages then read as zeros
 * for every process, never SIGBUS). */
int cr_lmdb_begin(cr_lmdb_env *v, unsigned flags, MDB_txn **txn);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif
