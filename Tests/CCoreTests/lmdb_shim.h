/*
 * lmdb_shim.h — LMDB itself, loaded at run time, for tests that change a store behind the
 * library's back (the tests link only the Courier library, whose LMDB symbols are hidden).
 */
#ifndef COURIER_TEST_LMDB_SHIM_H
#define COURIER_TEST_LMDB_SHIM_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct lmdb_val {
    size_t size;
    void *data;
} lmdb_val;

typedef struct lmdb_shim {
    void *lib;
    int (*env_create)(void **);
    int (*env_set_maxdbs)(void *, unsigned);
    int (*env_set_mapsize)(void *, size_t);
    int (*env_open)(void *, const char *, unsigned, int);
    void (*env_close)(void *);
    int (*txn_begin)(void *, void *, unsigned, void **);
    int (*dbi_open)(void *, const char *, unsigned, unsigned *);
    int (*put)(void *, unsigned, lmdb_val *, lmdb_val *, unsigned);
    int (*del)(void *, unsigned, lmdb_val *, lmdb_val *);
    int (*commit)(void *);
    void (*abort)(void *);
    int (*cursor_open)(void *, unsigned, void **);
    int (*cursor_get)(void *, lmdb_val *, lmdb_val *, int);
    void (*cursor_close)(void *);
} lmdb_shim;

#define LMDB_NOTLS 0x200000u
#define LMDB_RDONLY 0x20000u
#define LMDB_FIRST 0 /* MDB_cursor_op */
#define LMDB_NEXT 8

/* Loads liblmdb and its functions; false when it is not there (the test then says it skipped). */
static inline bool lmdb_shim_load(lmdb_shim *m) {
    m->lib = dlopen("liblmdb.so.0", RTLD_NOW);
    if (!m->lib) m->lib = dlopen("liblmdb.so", RTLD_NOW);
    if (!m->lib) return false;
    *(void **)&m->env_create = dlsym(m->lib, "mdb_env_create");
    *(void **)&m->env_set_maxdbs = dlsym(m->lib, "mdb_env_set_maxdbs");
    *(void **)&m->env_set_mapsize = dlsym(m->lib, "mdb_env_set_mapsize");
    *(void **)&m->env_open = dlsym(m->lib, "mdb_env_open");
    *(void **)&m->env_close = dlsym(m->lib, "mdb_env_close");
    *(void **)&m->txn_begin = dlsym(m->lib, "mdb_txn_begin");
    *(void **)&m->dbi_open = dlsym(m->lib, "mdb_dbi_open");
    *(void **)&m->put = dlsym(m->lib, "mdb_put");
    *(void **)&m->del = dlsym(m->lib, "mdb_del");
    *(void **)&m->commit = dlsym(m->lib, "mdb_txn_commit");
    *(void **)&m->abort = dlsym(m->lib, "mdb_txn_abort");
    *(void **)&m->cursor_open = dlsym(m->lib, "mdb_cursor_open");
    *(void **)&m->cursor_get = dlsym(m->lib, "mdb_cursor_get");
    *(void **)&m->cursor_close = dlsym(m->lib, "mdb_cursor_close");
    return m->env_create && m->env_set_maxdbs && m->env_set_mapsize && m->env_open && m->env_close && m->txn_begin &&
           m->dbi_open && m->put && m->del && m->commit && m->abort && m->cursor_open && m->cursor_get &&
           m->cursor_close;
}

/* How many keys database `db` of the LMDB environment in `dir` holds, read in a read-only
 * transaction (LMDB opens an environment once per process: no other handle on it may be open in
 * this one); -1 when it cannot be read, -2 without liblmdb. */
static inline long lmdb_shim_count_keys(const char *dir, const char *db) {
    lmdb_shim m;
    if (!lmdb_shim_load(&m)) return -2;
    void *env = NULL, *txn = NULL, *c = NULL;
    unsigned dbi = 0;
    if (m.env_create(&env) != 0) return -1;
    m.env_set_maxdbs(env, 10);
    m.env_set_mapsize(env, (size_t)2 << 30);
    int rc = m.env_open(env, dir, LMDB_NOTLS | LMDB_RDONLY, 0600);
    if (rc == 0) rc = m.txn_begin(env, NULL, LMDB_RDONLY, &txn);
    if (rc == 0) rc = m.dbi_open(txn, db, 0, &dbi);
    if (rc == 0) rc = m.cursor_open(txn, dbi, &c);
    long n = 0;
    lmdb_val k, v;
    for (int grc = rc == 0 ? m.cursor_get(c, &k, &v, LMDB_FIRST) : -1; grc == 0; grc = m.cursor_get(c, &k, &v, LMDB_NEXT))
        n++;
    if (c) m.cursor_close(c);
    if (txn) m.abort(txn);
    m.env_close(env);
    return rc == 0 ? n : -1;
}

#endif
