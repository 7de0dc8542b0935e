/*
 * lmdb_env.c — the LMDB floor: the registry of environments, opening, verifying, moving a store
 * aside, and what LMDB's results mean (see lmdb_env.h).
 */
#include "base/lmdb_env.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- results ------------------------------------------------------------------------------ */

bool cr_lmdb_is_corruption(int rc) {
    return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH;
}

bool cr_lmdb_is_broken(int rc) {
    return cr_lmdb_is_corruption(rc) || rc == MDB_INCOMPATIBLE || rc == MDB_BAD_TXN || rc == MDB_PANIC;
}

int cr_lmdb_fail(courier_error *err, int rc, int corrupt_code, const char *what) {
    int code = cr_lmdb_is_broken(rc) ? corrupt_code : rc == ENOMEM ? COURIER_E_NO_MEMORY : COURIER_E_STORE;
    cr_fail(err, code, "%s: %s", what, mdb_strerror(rc));
    if (err) {
        if (rc > 0) err->os_error = rc;
        else err->store_error = rc;
    }
    return code;
}

/* ---- opening ------------------------------------------------------------------------------ */

int cr_lmdb_env_open(cr_lmdb_env *v, unsigned maxdbs, size_t map_bytes, unsigned flags, const char **why) {
    *why = NULL;
    /* A data file cut short would open, then raise SIGBUS at the first page past its end. */
    int rc = cr_lmdb_file_check(v->dir, why);
    if (rc) return rc;
    rc = mdb_env_create(&v->env);
    if (rc) return rc;
    mdb_env_set_maxdbs(v->env, (MDB_dbi)maxdbs);
    mdb_env_set_maxreaders(v->env, 254);
    mdb_env_set_mapsize(v->env, map_bytes);
    rc = mdb_env_open(v->env, v->dir, MDB_NOTLS | flags, 0600);
    if (rc) {
        if (cr_lmdb_is_broken(rc) || rc == EINVAL) {
            *why = mdb_strerror(rc);
            return MDB_INVALID;
        }
        return rc;
    }
    int dead = 0;
    mdb_reader_check(v->env, &dead); /* slots of killed processes */
    /* An environment opened with a smaller map than asked for: take the size asked for. */
    MDB_envinfo info;
    if (mdb_env_info(v->env, &info) == 0 && info.me_mapsize < map_bytes) mdb_env_set_mapsize(v->env, map_bytes);
    /* Under LMDB's writer lock (no commit moves a page meanwhile): damaged pages near the end of
     * the file read zeros past it, not SIGBUS; then every page LMDB would trust is walked before
     * anything reads or writes the trees (lmdb_file.c). */
    MDB_txn *txn = NULL;
    rc = cr_lmdb_begin_write(v->env, &txn);
    if (rc == 0) {
        cr_lmdb_file_pad(v->env, &v->file_largest); /* usable without it (a file size limit) */
        rc = cr_lmdb_walk(v->env, why);
        mdb_txn_abort(txn);
    }
    if (cr_lmdb_is_corruption(rc)) {
        if (!*why) *why = mdb_strerror(rc);
        return MDB_INVALID;
    }
    return rc;
}

int cr_lmdb_begin_write(MDB_env *env, MDB_txn **txn) {
    int rc = mdb_txn_begin(env, NULL, 0, txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(env, 0);
        rc = mdb_txn_begin(env, NULL, 0, txn);
    }
    return rc;
}

int cr_lmdb_verify(MDB_txn *txn, const MDB_dbi *dbis, size_t n) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = cr_lmdb_check_ends(txn, dbis[i], NULL);
    return rc;
}

int cr_lmdb_begin(cr_lmdb_env *v, unsigned flags, MDB_txn **txn) {
    int rc = cr_lmdb_file_intact(v->env, &v->file_largest);
    return rc ? rc : mdb_txn_begin(v->env, NULL, flags, txn);
}

/* ---- the registry ------------------------------------------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_lmdb_env *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A child of fork() must not use its parent's environments (LMDB's rule): it forgets them and
 * opens its own. Their memory is not freed (their handles belong to the parent). */
static void registry_child(void) {
    pthread_mutex_init(&registry_lock, NULL);
    registry = NULL;
}

static void registry_init(void) { pthread_atfork(NULL, NULL, registry_child); }

static int mkdir_one(const char *path) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST) return 0;
    return errno;
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Renames dir to "<dir>.<label>-<ms>-<pid>" (then "-1", "-2"... when taken). 0 (aside holds the
 * new name) or an errno value. */
static int move_aside(const cr_lmdb_kind *kind, const char *dir, char *aside, size_t cap) {
    int rc = -1;
    long long ms = (long long)wall_ms();
    for (int n = 0; n < 100 && rc != 0; n++) {
        if (n) snprintf(aside, cap, "%s.%s-%lld-%d-%d", dir, kind->label, ms, (int)getpid(), n);
        else snprintf(aside, cap, "%s.%s-%lld-%d", dir, kind->label, ms, (int)getpid());
        if (access(aside, F_OK) == 0) continue;
        rc = rename(dir, aside);
    }
    if (rc != 0) return errno ? errno : EEXIST;
    return 0;
}

static void env_destroy(cr_lmdb_env *v) {
    if (!v) return;
    if (v->kind->destroy) v->kind->destroy(v);
    if (v->env) mdb_env_close(v->env);
    free(v->dir);
    free(v);
}

int cr_lmdb_env_acquire(const cr_lmdb_kind *kind, const char *dir, void *arg, cr_lmdb_env **out, char *note,
                        size_t note_cap, courier_error *err) {
    *out = NULL;
    if (note && note_cap) note[0] = '\0';
    pthread_once(&atfork_once, registry_init);
    char lockpath[PATH_MAX];
    if (snprintf(lockpath, sizeof lockpath, "%s.lock", dir) >= (int)sizeof lockpath)
        return cr_fail(err, COURIER_E_STORE, "the store path is too long");
    int os = mkdir_one(dir);
    if (os) {
        cr_fail(err, COURIER_E_STORE, "cannot create the %s directory '%.180s': %s", kind->what, dir, strerror(os));
        if (err) err->os_error = os;
        return COURIER_E_STORE;
    }
    /* Opening and moving aside are serialized across processes by a lock file beside the directory. */
    int lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd >= 0)
        while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {
        }
    pthread_mutex_lock(&registry_lock);
    int result = COURIER_OK;
    bool moved = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            if ((os = mkdir_one(dir)) != 0 || stat(dir, &st) != 0) {
                if (!os) os = errno;
                result = cr_fail(err, COURIER_E_STORE, "cannot use the %s directory '%.180s': %s", kind->what, dir,
                                 strerror(os));
                if (err) err->os_error = os;
                break;
            }
        }
        for (cr_lmdb_env *v = registry; v; v = v->next) {
            if (v->kind == kind && v->dev == st.st_dev && v->ino == st.st_ino && v->pid == getpid()) {
                v->refs++;
                *out = v;
                break;
            }
        }
        if (*out) break;
        cr_lmdb_env *v = NULL;
        if (posix_memalign((void **)&v, 64, kind->size) != 0) v = NULL;
        if (v) memset(v, 0, kind->size);
        if (!v || !(v->dir = cr_strdup(dir))) {
            free(v);
            result = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            break;
        }
        v->kind = kind;
        v->dev = st.st_dev;
        v->ino = st.st_ino;
        v->pid = getpid();
        v->refs = 1;
        const char *why = NULL;
        int rc = kind->open(v, arg, &why);
        if (rc == 0) {
            v->next = registry;
            registry = v;
            *out = v;
            break;
        }
        env_destroy(v);
        if (rc == MDB_VERSION_MISMATCH && why) {
            /* A newer Courier wrote it: leave it where it is. */
            result = cr_fail(err, kind->corrupt_code, "the %s '%.150s' cannot be read: %s; it was left in place",
                             kind->what, dir, why);
            break;
        }
        if (rc == MDB_INVALID && attempt == 0) {
            char aside[PATH_MAX + 64];
            if (!why) why = "corrupt";
            os = move_aside(kind, dir, aside, sizeof aside);
            if (os) {
                result = cr_fail(err, kind->corrupt_code, "the %s '%.100s' is unreadable (%s) and could not be moved aside: %s",
                                 kind->what, dir, why, strerror(os));
                if (err) err->os_error = os;
                break;
            }
            if (kind->recreate && mkdir_one(dir) == 0) {
                moved = true;
                if (note && note_cap)
                    snprintf(note, note_cap, "the %s '%s' is unreadable (%s); kept as '%s', starting a fresh one",
                             kind->what, dir, why, aside);
                continue;
            }
            if (!kind->recreate) {
                result = cr_fail(err, kind->corrupt_code,
                                 "the %s is unreadable (%.60s); it was kept as '%.150s' and a new one starts at the "
                                 "next open",
                                 kind->what, why, aside);
                break;
            }
        }
        if (rc > 0) {
            result = cr_fail(err, COURIER_E_STORE, "cannot open the %s '%.180s': %s", kind->what, dir, strerror(rc));
            if (err) err->os_error = rc;
        } else {
            char what[96];
            snprintf(what, sizeof what, "cannot open the %s", kind->what);
            result = cr_lmdb_fail(err, rc, kind->corrupt_code, what);
        }
        break;
    }
    pthread_mutex_unlock(&registry_lock);
    if (lockfd >= 0) close(lockfd); /* releases the flock */
    if (note && note_cap && !(moved && *out)) note[0] = '\0';
    return result;
}

void cr_lmdb_env_release(cr_lmdb_env *v) {
    if (!v) return;
    pthread_mutex_lock(&registry_lock);
    bool last = --v->refs == 0;
    if (last) {
        for (cr_lmdb_env **pp = &registry; *pp; pp = &(*pp)->next) {
            if (*pp == v) {
                *pp = v->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (last) {
        if (v->kind->sync_at_close && v->env) mdb_env_sync(v->env, 1);
        env_destroy(v);
    }
}
