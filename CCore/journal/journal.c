/*
 * journal.c — frozen requests: the durable journal, freezing, replay, expiry, events and the
 * management API (courier_frozen_*).
 *
 * Storage. The journal is its own LMDB environment in <store>/journal, opened with LMDB's
 * default durability (data and meta page synced at every commit), apart from the cache's
 * environment (which trades sync for speed and is recreated when damaged; a journal never is).
 * One environment per directory per process, shared by the engines of the process through a
 * small registry (LMDB forbids opening an environment twice in one process). Named databases,
 * few on purpose (every database a commit touches costs pages in its fsync):
 *   req     seq(be64)                   -> state (fixed layout below) + the request as JSON (any
 *                                           language reads it; docs/DESIGN.md has the keys)
 *   due     time(be64) | seq(be64)      -> ""   what the replayer looks at: every automatic record
 *                                               that is not ordered, and the head of each host's
 *                                               ordered queue; time = the lease's end when claimed,
 *                                               else the next attempt (0: never tried)
 *   hostq   host \0 seq(be64)           -> ""   ordered automatic records of a host, oldest first
 *   ids     freeze id                   -> seq(be64), for ids the app gave (a generated id is the
 *                                               seq in 16 hex digits + 64 random bits)
 *   outcome n(be64)                     -> JSON {"id","code","status","at_ms","attempts"}: the last
 *                                               1000+ final answers, written in the transaction that
 *                                               removes the request
 *   meta    "format" -> u32
 *   cookies "domain\tpath\tname"         -> the cookie as a Netscape cookie-file line; "" -> the jar's
 *                                               generation (u64, +1 at every write): cookies.c's
 * Sequence numbers are the last key + 1 (no counter to rewrite). Expiry is checked when a record
 * comes due, and by a scan of every record once per poll interval.
 *
 * State (version 1): u8 version, u8 policy, u16 flags, u32 attempts, i64 created_ms,
 * i64 expires_ms, i64 next_ms, i64 claim_ms (lease end, 0: unclaimed), i64 last_ms (last attempt),
 * u32 owner pid, u32 owner nonce, u64 owner start time, u64 owner boot id hash, i32 last code,
 * i32 last HTTP status, u64 reserved, then u16 host length + host, u16 id length + id.
 *
 * Threads. Each engine has one journal thread: it is this engine's only writer of the journal
 * except the management calls. One loop turn takes everything queued (freezes from the worker,
 * answers of replays, explicit resends), writes it in ONE transaction together with the claims of
 * the next replays and the expired records it removes, commits (synced: a group commit), and only
 * then answers the frozen sends and delivers the events. Claimed requests wait in a ready queue;
 * at most `concurrency` are on the wire, sent through the public courier_send, and each replay's
 * completion sends the next at once. No transaction is held across a callback.
 *
 * Claims. A record is claimed in a write transaction (so one process or engine sends it) with a
 * lease: the claimer's identity (pid, process start time, boot id, engine nonce) and an end time.
 * A claim whose owner is dead (no such process, a zombie, another boot, a closed engine of this
 * process) or whose lease has ended is taken over.
 */
#include "internal.h"
#include "cache/cache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#if defined(__APPLE__)
/* macOS has no getrandom: arc4random_buf (stdlib.h) fills the buffer and never fails. */
static ssize_t getrandom(void *buf, size_t n, unsigned flags) {
    (void)flags;
    arc4random_buf(buf, n);
    return (ssize_t)n;
}
#else
#include <sys/random.h>
#endif
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct cr_journal cr_journal;

#define J_FORMAT 1u
#define J_STATE_VERSION 1u
#define J_STATE_FIXED 88u
#define J_HOST_MAX 300
#define J_MAP_BYTES ((size_t)2 << 30)
#define J_OUTCOMES_KEPT 1000
#define J_DEFAULT_CONCURRENCY 4
#define J_DEFAULT_BACKOFF_BASE 1000L
#define J_DEFAULT_BACKOFF_MAX 300000L
#define J_DEFAULT_LEASE 300000L
#define J_DEFAULT_EXPIRY ((int64_t)24 * 3600 * 1000)
#define J_DEFAULT_POLL 10000L

/* Persisted flags (beside COURIER_FREEZE_UNORDERED 0x1 and COURIER_FREEZE_ON_AMBIGUOUS 0x2). */
#define JF_IN_DUE 0x100u

/* Replay-now modes. */
#define J_KICK_NOW 0x1u    /* records not tried since the kick are due now, whatever their backoff */
#define J_KICK_MANUAL 0x2u /* and so are manual records */

/* ==== small helpers ============================================================================ */

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

static uint64_t get_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t be_time(int64_t ms) { return ms < 0 ? 0 : (uint64_t)ms; }

static uint64_t fnv64(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void random_bytes(void *out, size_t n) {
    uint8_t *p = out;
    while (n) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            /* No entropy source: time and address bits, still unique enough for ids. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)p ^
                         ((uint64_t)getpid() << 40);
            for (; n; n--, p++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *p = (uint8_t)x;
            }
            return;
        }
        p += got;
        n -= (size_t)got;
    }
}

/* 64 bits from a per-thread splitmix64 sequence seeded once from the system's random source (a
 * bijection of a counter: never repeats within a thread; random seeds keep threads and processes
 * apart). Cheaper than a system call per id on the freeze path. */
static uint64_t random64(void) {
    static _Thread_local uint64_t state;
    static _Thread_local int seeded;
    if (!seeded) {
        random_bytes(&state, sizeof state);
        seeded = 1;
    }
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* 32 lowercase hex digits of 128 random bits. */
static void random_hex(char out[33]) {
    static const char hex[] = "0123456789abcdef";
    uint8_t b[16];
    uint64_t a = random64(), c = random64();
    memcpy(b, &a, 8);
    memcpy(b + 8, &c, 8);
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
}

static int64_t realtime_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool valid_id(const char *id, size_t n) {
    if (n == 0 || n > COURIER_FROZEN_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
        if (c && strchr("-._~:@+=", c)) continue;
        return false;
    }
    return true;
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes standard base64 (padding optional). *out new (malloc), NUL-terminated. */
static int b64_decode(const char *s, size_t n, char **out, size_t *out_len) {
    char *p = malloc(n / 4 * 3 + 4);
    if (!p) return COURIER_E_NO_MEMORY;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(p);
            return COURIER_E_INVALID_ARGUMENT;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            p[o++] = (char)(acc >> bits);
        }
    }
    p[o] = '\0';
    *out = p;
    *out_len = o;
    return COURIER_OK;
}

/* "scheme://host:port", lowercase, default ports filled in: the unit of per-host order. */
static int host_of(const char *url, char *out, size_t cap) {
    CURLU *u = curl_url();
    if (!u) return COURIER_E_NO_MEMORY;
    int rc = COURIER_E_INVALID_URL;
    char *scheme = NULL, *host = NULL, *port = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        int n = snprintf(out, cap, "%s://%s:%s", scheme, host, port);
        if (n > 0 && (size_t)n < cap) {
            for (char *c = out; *c; c++)
                if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
            rc = COURIER_OK;
        }
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

/* ==== who holds a claim ======================================================================== */

typedef struct jowner {
    uint32_t pid;
    uint32_t nonce;
    uint64_t start; /* the process's start time (clock ticks after boot), 0 if unknown */
    uint64_t boot;  /* hash of the boot id, 0 if unknown */
} jowner;

/* Reads /proc/<pid>/stat: the state letter and the start time. -1 when the process is absent. */
static int proc_stat(long pid, char *state, uint64_t *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ESRCH ? -1 : -2;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || !p[1] || !p[2]) return -2;
    p += 2; /* field 3: state */
    *state = *p;
    int field = 3;
    while (*p && field < 22) {
        if (*p == ' ') field++;
        p++;
    }
    *start = field == 22 ? strtoull(p, NULL, 10) : 0;
    return 0;
}

static uint64_t boot_hash(void) {
    char buf[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
    return fnv64(buf, (size_t)n) | 1;
}

/* ==== the environment registry ================================================================= */

typedef struct jenv {
    struct jenv *next;
    dev_t dev;
    ino_t ino;
    pid_t pid;
    int refs;           /* registry_lock */
    char *dir;
    MDB_env *env;
    MDB_dbi db_req, db_ids, db_due, db_hostq, db_outcome, db_meta;
    MDB_dbi db_cookies; /* cookies.c's: the engine's cookie jar */
    int64_t file_largest; /* the data file's largest size seen (cr_lmdb_file_intact) */
    pthread_mutex_t lock; /* nonces */
    uint32_t *nonces;     /* the journals of this process open on it */
    size_t nnonces, capnonces;
} jenv;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static jenv *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A child of fork() must not use its parent's environments: it forgets them. */
static void registry_child(void) {
    pthread_mutex_init(&registry_lock, NULL);
    registry = NULL;
}

static void registry_init(void) { pthread_atfork(NULL, NULL, registry_child); }

static bool is_corruption(int rc) {
    return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ||
           rc == MDB_INCOMPATIBLE || rc == MDB_BAD_TXN || rc == MDB_PANIC;
}

static int store_fail(courier_error *err, int rc, const char *what) {
    int code = is_corruption(rc) ? COURIER_E_JOURNAL_CORRUPT
               : rc == ENOMEM    ? COURIER_E_NO_MEMORY
                                 : COURIER_E_STORE;
    cr_fail(err, code, "%s: %s", what, mdb_strerror(rc));
    if (err) {
        if (rc > 0) err->os_error = rc;
        else err->store_error = rc;
    }
    return code;
}

static void jenv_destroy(jenv *v) {
    if (!v) return;
    if (v->env) mdb_env_close(v->env);
    pthread_mutex_destroy(&v->lock);
    free(v->nonces);
    free(v->dir);
    free(v);
}

/* mdb_txn_begin on an open journal, once its data file is found whole: MDB_CORRUPTED (the journal's
 * corruption) when it was cut short from outside since it was opened; the missing pages then read
 * as zeros, never SIGBUS (lmdb_file.c). One fstat per transaction. */
static int jtxn_begin(jenv *v, unsigned flags, MDB_txn **txn) {
    int rc = cr_lmdb_file_intact(v->env, &v->file_largest);
    return rc ? rc : mdb_txn_begin(v->env, NULL, flags, txn);
}

/* Files of a journal that has committed once; its absence beside a missing or empty data file
 * tells a fresh journal from one whose data was lost. */
#define J_MARKER "JOURNAL"

static int file_size(const char *dir, const char *name, off_t *size) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    *size = st.st_size;
    return 0;
}

/* Opens the environment of v->dir. 0, an LMDB/errno code, or MDB_INVALID with *why when the
 * journal exists but cannot be read (corrupt, truncated, foreign or newer). */
static int jenv_open_env(jenv *v, const char **why) {
    *why = NULL;
    off_t marker_size = 0, data_size = 0;
    bool had_marker = file_size(v->dir, J_MARKER, &marker_size) == 0;
    bool has_data = file_size(v->dir, "data.mdb", &data_size) == 0;
    if (had_marker && (!has_data || data_size == 0)) {
        *why = "its data file is missing or empty";
        return MDB_INVALID;
    }
    /* A data file cut short would open, then raise SIGBUS at the first page past its end. */
    int rc = cr_lmdb_file_check(v->dir, why);
    if (rc) return rc;
    rc = mdb_env_create(&v->env);
    if (rc) return rc;
    mdb_env_set_maxdbs(v->env, 10);
    mdb_env_set_maxreaders(v->env, 254);
    mdb_env_set_mapsize(v->env, J_MAP_BYTES);
    rc = mdb_env_open(v->env, v->dir, MDB_NOTLS, 0600);
    if (rc) {
        if (is_corruption(rc) || rc == EINVAL) {
            *why = mdb_strerror(rc);
            return MDB_INVALID;
        }
        return rc;
    }
    int dead = 0;
    mdb_reader_check(v->env, &dead);
    MDB_txn *txn = NULL;
    rc = mdb_txn_begin(v->env, NULL, 0, &txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(v->env, 0);
        rc = mdb_txn_begin(v->env, NULL, 0, &txn);
    }
    if (rc) goto bad;
    /* Damaged pages near the end of the file read zeros past it, not SIGBUS (lmdb_file.c). */
    cr_lmdb_file_pad(v->env, &v->file_largest);
    rc = cr_lmdb_check_names(txn); /* before a name is created in a damaged page */
    struct {
        const char *name;
        MDB_dbi *dbi;
    } dbs[] = {{"req", &v->db_req},       {"ids", &v->db_ids},
               {"due", &v->db_due},       {"hostq", &v->db_hostq},
               {"outcome", &v->db_outcome}, {"meta", &v->db_meta},
               {"cookies", &v->db_cookies}};
    for (size_t i = 0; i < sizeof dbs / sizeof dbs[0] && rc == 0; i++)
        rc = mdb_dbi_open(txn, dbs[i].name, MDB_CREATE, dbs[i].dbi);
    if (rc) {
        mdb_txn_abort(txn);
        goto bad;
    }
    MDB_val k = {6, "format"}, val;
    rc = mdb_get(txn, v->db_meta, &k, &val);
    bool fresh = rc == MDB_NOTFOUND;
    if (fresh) {
        MDB_stat ms;
        /* A journal that had records but lost its format record is not fresh. */
        if (mdb_stat(txn, v->db_req, &ms) == 0 && ms.ms_entries > 0) {
            mdb_txn_abort(txn);
            *why = "its format record is missing";
            return MDB_INVALID;
        }
        uint8_t f[4];
        put_le(f, J_FORMAT, 4);
        val.mv_size = 4;
        val.mv_data = f;
        rc = mdb_put(txn, v->db_meta, &k, &val, 0);
    } else if (rc == 0) {
        uint32_t f = val.mv_size == 4 ? (uint32_t)get_le(val.mv_data, 4) : 0;
        if (f == 0 || f > J_FORMAT) {
            mdb_txn_abort(txn);
            *why = f > J_FORMAT ? "it was written by a newer format" : "its format record is unknown";
            return f > J_FORMAT ? MDB_VERSION_MISMATCH : MDB_INVALID;
        }
    }
    /* Touch both ends of every tree so a damaged root shows up now. */
    for (size_t i = 0; i < sizeof dbs / sizeof dbs[0] && rc == 0; i++) {
        MDB_cursor *c = NULL;
        rc = mdb_cursor_open(txn, *dbs[i].dbi, &c);
        MDB_val ck, cv;
        if (rc == 0) rc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST);
        if (rc == 0) rc = mdb_cursor_get(c, &ck, &cv, MDB_LAST);
        if (rc == MDB_NOTFOUND) rc = 0;
        if (c) mdb_cursor_close(c);
    }
    if (rc) {
        mdb_txn_abort(txn);
        goto bad;
    }
    rc = mdb_txn_commit(txn);
    if (rc == 0) rc = cr_lmdb_check_free_list(v->env);
    if (rc) goto bad;
    if (!had_marker) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", v->dir, J_MARKER);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            static const char text[] = "Courier frozen-request journal, format 1\n";
            ssize_t w = write(fd, text, sizeof text - 1);
            (void)w;
            fsync(fd);
            close(fd);
        }
    }
    return 0;
bad:
    if (is_corruption(rc)) {
        *why = mdb_strerror(rc);
        return MDB_INVALID;
    }
    return rc;
}

static int jenv_acquire(const char *store_dir, uint32_t nonce, jenv **out, courier_error *err) {
    *out = NULL;
    pthread_once(&atfork_once, registry_init);
    char dir[PATH_MAX], lockpath[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/journal", store_dir) >= (int)sizeof dir)
        return cr_fail(err, COURIER_E_STORE, "the store path is too long");
    snprintf(lockpath, sizeof lockpath, "%s/journal.lock", store_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        int os = errno;
        cr_fail(err, COURIER_E_STORE, "cannot create the journal directory '%.180s': %s", dir, strerror(os));
        if (err) err->os_error = os;
        return COURIER_E_STORE;
    }
    /* Opening and moving aside are serialized across processes by a lock file. */
    int lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd >= 0)
        while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {
        }
    pthread_mutex_lock(&registry_lock);
    int result = COURIER_OK;
    struct stat st;
    if (stat(dir, &st) != 0) {
        int os = errno;
        result = cr_fail(err, COURIER_E_STORE, "cannot use the journal directory '%.180s': %s", dir, strerror(os));
        if (err) err->os_error = os;
        goto done;
    }
    for (jenv *v = registry; v; v = v->next) {
        if (v->dev == st.st_dev && v->ino == st.st_ino && v->pid == getpid()) {
            *out = v;
            break;
        }
    }
    if (!*out) {
        jenv *v = calloc(1, sizeof *v);
        if (!v || !(v->dir = cr_strdup(dir))) {
            free(v);
            result = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            goto done;
        }
        pthread_mutex_init(&v->lock, NULL);
        v->dev = st.st_dev;
        v->ino = st.st_ino;
        v->pid = getpid();
        const char *why = NULL;
        int rc = jenv_open_env(v, &why);
        if (rc == MDB_VERSION_MISMATCH && why) {
            /* A newer Courier wrote it: leave it where it is. */
            result = cr_fail(err, COURIER_E_JOURNAL_CORRUPT,
                             "the frozen-request journal '%.150s' cannot be read: %s; it was left in place", dir, why);
            jenv_destroy(v);
            goto done;
        }
        if (rc == MDB_INVALID) {
            jenv_destroy(v);
            char aside[PATH_MAX + 64];
            snprintf(aside, sizeof aside, "%s.corrupt-%lld-%d", dir, (long long)realtime_ms(), (int)getpid());
            if (rename(dir, aside) != 0) {
                int os = errno;
                result = cr_fail(err, COURIER_E_JOURNAL_CORRUPT,
                                 "the frozen-request journal '%.100s' is unreadable (%s) and could not be moved "
                                 "aside: %s",
                                 dir, why ? why : "corrupt", strerror(os));
                if (err) err->os_error = os;
            } else {
                fprintf(stderr, "courier: the frozen-request journal '%s' is unreadable (%s); kept as '%s'\n", dir,
                        why ? why : "corrupt", aside);
                result = cr_fail(err, COURIER_E_JOURNAL_CORRUPT,
                                 "the frozen-request journal is unreadable (%.60s); it was kept as '%.150s' and a new "
                                 "one starts at the next open",
                                 why ? why : "corrupt", aside);
            }
            goto done;
        }
        if (rc) {
            jenv_destroy(v);
            result = rc > 0 ? cr_fail(err, COURIER_E_STORE, "cannot open the journal '%.180s': %s", dir, strerror(rc))
                            : store_fail(err, rc, "cannot open the journal");
            if (err && rc > 0) err->os_error = rc;
            goto done;
        }
        v->next = registry;
        registry = v;
        *out = v;
    }
    (*out)->refs++;
    pthread_mutex_lock(&(*out)->lock);
    if ((*out)->nnonces == (*out)->capnonces) {
        size_t cap = (*out)->capnonces ? (*out)->capnonces * 2 : 4;
        uint32_t *p = realloc((*out)->nonces, cap * sizeof *p);
        if (p) {
            (*out)->nonces = p;
            (*out)->capnonces = cap;
        }
    }
    if ((*out)->nnonces < (*out)->capnonces) (*out)->nonces[(*out)->nnonces++] = nonce;
    pthread_mutex_unlock(&(*out)->lock);
done:
    pthread_mutex_unlock(&registry_lock);
    if (lockfd >= 0) close(lockfd);
    return result;
}

static void jenv_release(jenv *v, uint32_t nonce) {
    if (!v) return;
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < v->nnonces; i++) {
        if (v->nonces[i] == nonce) {
            v->nonces[i] = v->nonces[--v->nnonces];
            break;
        }
    }
    pthread_mutex_unlock(&v->lock);
    pthread_mutex_lock(&registry_lock);
    bool last = --v->refs == 0;
    if (last) {
        for (jenv **pp = &registry; *pp; pp = &(*pp)->next) {
            if (*pp == v) {
                *pp = v->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (last) jenv_destroy(v);
}

static bool jenv_has_nonce(jenv *v, uint32_t nonce) {
    bool found = false;
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < v->nnonces && !found; i++) found = v->nonces[i] == nonce;
    pthread_mutex_unlock(&v->lock);
    return found;
}

/* ==== the state record ========================================================================= */

typedef struct jstate {
    uint8_t policy;
    uint16_t flags;
    uint32_t attempts;
    int64_t created_ms, expires_ms, next_ms, claim_ms, last_ms;
    jowner owner;
    int32_t last_code, last_status;
    uint16_t host_len;
    char host[J_HOST_MAX + 1];
    uint16_t id_len;
    char id[COURIER_FROZEN_ID_MAX + 1];
} jstate;

static size_t state_encode(const jstate *s, uint8_t *b) {
    memset(b, 0, J_STATE_FIXED);
    b[0] = J_STATE_VERSION;
    b[1] = s->policy;
    put_le(b + 2, s->flags, 2);
    put_le(b + 4, s->attempts, 4);
    put_le(b + 8, (uint64_t)s->created_ms, 8);
    put_le(b + 16, (uint64_t)s->expires_ms, 8);
    put_le(b + 24, (uint64_t)s->next_ms, 8);
    put_le(b + 32, (uint64_t)s->claim_ms, 8);
    put_le(b + 40, (uint64_t)s->last_ms, 8);
    put_le(b + 48, s->owner.pid, 4);
    put_le(b + 52, s->owner.nonce, 4);
    put_le(b + 56, s->owner.start, 8);
    put_le(b + 64, s->owner.boot, 8);
    put_le(b + 72, (uint32_t)s->last_code, 4);
    put_le(b + 76, (uint32_t)s->last_status, 4);
    size_t o = J_STATE_FIXED;
    put_le(b + o, s->host_len, 2);
    memcpy(b + o + 2, s->host, s->host_len);
    o += 2u + s->host_len;
    put_le(b + o, s->id_len, 2);
    memcpy(b + o + 2, s->id, s->id_len);
    return o + 2u + s->id_len;
}

/* Decodes the state at the start of a record; returns the bytes it takes, 0 when invalid. */
static size_t state_decode(const void *data, size_t len, jstate *s) {
    const uint8_t *b = data;
    memset(s, 0, sizeof *s);
    if (len < J_STATE_FIXED + 4 || b[0] != J_STATE_VERSION) return 0;
    s->policy = b[1];
    s->flags = (uint16_t)get_le(b + 2, 2);
    s->attempts = (uint32_t)get_le(b + 4, 4);
    s->created_ms = (int64_t)get_le(b + 8, 8);
    s->expires_ms = (int64_t)get_le(b + 16, 8);
    s->next_ms = (int64_t)get_le(b + 24, 8);
    s->claim_ms = (int64_t)get_le(b + 32, 8);
    s->last_ms = (int64_t)get_le(b + 40, 8);
    s->owner.pid = (uint32_t)get_le(b + 48, 4);
    s->owner.nonce = (uint32_t)get_le(b + 52, 4);
    s->owner.start = get_le(b + 56, 8);
    s->owner.boot = get_le(b + 64, 8);
    s->last_code = (int32_t)(uint32_t)get_le(b + 72, 4);
    s->last_status = (int32_t)(uint32_t)get_le(b + 76, 4);
    size_t o = J_STATE_FIXED;
    s->host_len = (uint16_t)get_le(b + o, 2);
    if (s->host_len > J_HOST_MAX || o + 2u + s->host_len + 2u > len) return 0;
    memcpy(s->host, b + o + 2, s->host_len);
    o += 2u + s->host_len;
    s->id_len = (uint16_t)get_le(b + o, 2);
    if (s->id_len == 0 || s->id_len > COURIER_FROZEN_ID_MAX || o + 2u + s->id_len > len) return 0;
    memcpy(s->id, b + o + 2, s->id_len);
    if (s->policy != COURIER_FREEZE_AUTO && s->policy != COURIER_FREEZE_MANUAL) return 0;
    return o + 2u + s->id_len;
}

static int64_t due_time(const jstate *s) { return s->claim_ms ? s->claim_ms : s->next_ms; }
static bool is_ordered_auto(const jstate *s) {
    return s->policy == COURIER_FREEZE_AUTO && !(s->flags & COURIER_FREEZE_UNORDERED);
}

/* ==== reading a stored request ================================================================= */

/* The stored request, decoded. The text is JSON (any language reads it); the journal reads it
 * with the small reader below, straight into these fields, once per replay (no document tree: a
 * generic parser costs more than the request's whole trip through the transport). Every valid JSON
 * text is read; members of other types than expected read as absent, as jansson's accessors do. */
typedef struct jres {
    char *name, *key_path;
    unsigned flags;
} jres;

typedef struct jreq {
    int has_v;
    char *id, *method, *url, *idem, *body_b64;
    int has_headers; /* "headers" is an array */
    cr_kvlist headers;
    long timeout_ms;
    int has_retry, retry_max;
    long retry_base, retry_maxd;
    unsigned retry_flags;
    int priority;
    int has_cache, cache_policy;
    int64_t cache_expiry;
    int has_json, had_mapping;
    char *key_path;
    jres *results;
    size_t nresults;
} jreq;

static void jreq_clear(jreq *q) {
    free(q->id);
    free(q->method);
    free(q->url);
    free(q->idem);
    free(q->body_b64);
    cr_kvlist_clear(&q->headers);
    free(q->key_path);
    for (size_t i = 0; i < q->nresults; i++) {
        free(q->results[i].name);
        free(q->results[i].key_path);
    }
    free(q->results);
    memset(q, 0, sizeof *q);
}

typedef struct jrd {
    const char *p, *end;
    int depth;
} jrd;

enum { JR_OK = 0, JR_BAD = 1, JR_NOMEM = 2 };

static void jr_ws(jrd *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t')) r->p++;
}

static bool jr_peek(jrd *r, char c) {
    jr_ws(r);
    return r->p < r->end && *r->p == c;
}

static int jr_hex4(jrd *r, uint32_t *out) {
    if (r->end - r->p < 4) return JR_BAD;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return JR_BAD;
        v = v << 4 | (uint32_t)d;
    }
    r->p += 4;
    *out = v;
    return JR_OK;
}

/* A string; with `out`, decoded into a new NUL-terminated string (*len its length). A string with
 * \u0000 is refused, as jansson refuses it. */
static int jr_string(jrd *r, char **out, size_t *len) {
    jr_ws(r);
    if (r->p >= r->end || *r->p != '"') return JR_BAD;
    r->p++;
    const char *s = r->p;
    bool plain = true;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20) return JR_BAD;
        if (c == '\\') {
            plain = false;
            if (++r->p >= r->end) return JR_BAD;
        }
        r->p++;
    }
    if (r->p >= r->end) return JR_BAD;
    const char *e = r->p++;
    if (!out && plain) return JR_OK; /* skipped; escapes are still checked below */
    char *b = malloc((size_t)(e - s) + 1);
    if (!b) return JR_NOMEM;
    size_t o = 0;
    for (const char *q = s; q < e;) {
        if (*q != '\\') {
            b[o++] = *q++;
            continue;
        }
        q++;
        char c = *q++;
        switch (c) {
        case '"': b[o++] = '"'; break;
        case '\\': b[o++] = '\\'; break;
        case '/': b[o++] = '/'; break;
        case 'b': b[o++] = '\b'; break;
        case 'f': b[o++] = '\f'; break;
        case 'n': b[o++] = '\n'; break;
        case 'r': b[o++] = '\r'; break;
        case 't': b[o++] = '\t'; break;
        case 'u': {
            jrd h = {q, e, 0};
            uint32_t cp;
            if (jr_hex4(&h, &cp)) goto bad;
            if (cp >= 0xDC00 && cp <= 0xDFFF) goto bad;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (h.end - h.p < 6 || h.p[0] != '\\' || h.p[1] != 'u') goto bad;
                h.p += 2;
                if (jr_hex4(&h, &lo) || lo < 0xDC00 || lo > 0xDFFF) goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0) goto bad;
            q = h.p;
            /* UTF-8 is never longer than the escape it comes from (6 or 12 bytes). */
            if (cp < 0x80) {
                b[o++] = (char)cp;
            } else if (cp < 0x800) {
                b[o++] = (char)(0xC0 | cp >> 6);
                b[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                b[o++] = (char)(0xE0 | cp >> 12);
                b[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                b[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                b[o++] = (char)(0xF0 | cp >> 18);
                b[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
                b[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                b[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: goto bad;
        }
    }
    b[o] = '\0';
    if (out) {
        *out = b;
        if (len) *len = o;
    } else {
        free(b);
    }
    return JR_OK;
bad:
    free(b);
    return JR_BAD;
}

/* A number. *is_int says whether it is an integer (no fraction or exponent) that fits int64. */
static int jr_number(jrd *r, int64_t *v, bool *is_int) {
    jr_ws(r);
    bool neg = false, integer = true, overflow = false;
    uint64_t acc = 0;
    if (r->p < r->end && *r->p == '-') {
        neg = true;
        r->p++;
    }
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return JR_BAD;
    if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9') return JR_BAD;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p++ - '0');
        if (acc > (UINT64_MAX - d) / 10) overflow = true;
        else acc = acc * 10 + d;
    }
    if (r->p < r->end && *r->p == '.') {
        integer = false;
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') return JR_BAD;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        integer = false;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') return JR_BAD;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    if (overflow || acc > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) integer = false;
    *is_int = integer;
    *v = !integer ? 0 : neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return JR_OK;
}

static int jr_literal(jrd *r, const char *lit) {
    jr_ws(r);
    size_t n = strlen(lit);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0) return JR_BAD;
    r->p += n;
    return JR_OK;
}

static int jr_skip(jrd *r);

/* Walks an object: calls member(r, key, klen, ctx) at each value (the member reads or skips it). */
static int jr_object(jrd *r, int (*member)(jrd *, const char *, size_t, void *), void *ctx) {
    if (!jr_peek(r, '{')) return JR_BAD;
    if (++r->depth > 32) return JR_BAD;
    r->p++;
    if (jr_peek(r, '}')) {
        r->p++;
        r->depth--;
        return JR_OK;
    }
    for (;;) {
        jr_ws(r);
        /* Keys are compared raw: the keys the journal reads have no escapes. */
        if (r->p >= r->end || *r->p != '"') return JR_BAD;
        const char *k = r->p + 1;
        int rc = jr_string(r, NULL, NULL);
        if (rc) return rc;
        size_t klen = (size_t)(r->p - 1 - k);
        if (!jr_peek(r, ':')) return JR_BAD;
        r->p++;
        if ((rc = member(r, k, klen, ctx))) return rc;
        jr_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            r->depth--;
            return JR_OK;
        }
        return JR_BAD;
    }
}

static int skip_member(jrd *r, const char *k, size_t n, void *ctx) {
    (void)k;
    (void)n;
    (void)ctx;
    return jr_skip(r);
}

static int jr_skip(jrd *r) {
    jr_ws(r);
    if (r->p >= r->end) return JR_BAD;
    switch (*r->p) {
    case '"': return jr_string(r, NULL, NULL);
    case '{': return jr_object(r, skip_member, NULL);
    case '[': {
        if (++r->depth > 32) return JR_BAD;
        r->p++;
        if (jr_peek(r, ']')) {
            r->p++;
            r->depth--;
            return JR_OK;
        }
        for (;;) {
            int rc = jr_skip(r);
            if (rc) return rc;
            jr_ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == ']') {
                r->p++;
                r->depth--;
                return JR_OK;
            }
            return JR_BAD;
        }
    }
    case 't': return jr_literal(r, "true");
    case 'f': return jr_literal(r, "false");
    case 'n': return jr_literal(r, "null");
    default: {
        int64_t v;
        bool i;
        return jr_number(r, &v, &i);
    }
    }
}

/* A member expected to be a string: read (replacing an earlier one) or, of another type, skipped. */
static int jr_str_member(jrd *r, char **dst) {
    if (!jr_peek(r, '"')) return jr_skip(r);
    char *s = NULL;
    int rc = jr_string(r, &s, NULL);
    if (rc) return rc;
    free(*dst);
    *dst = s;
    return JR_OK;
}

/* A member expected to be an integer: its value, else 0 (and *is set false). */
static int jr_int_member(jrd *r, int64_t *dst, int *is) {
    jr_ws(r);
    if (r->p < r->end && (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))) {
        bool integer;
        int rc = jr_number(r, dst, &integer);
        if (is) *is = integer;
        return rc;
    }
    *dst = 0;
    if (is) *is = 0;
    return jr_skip(r);
}

static bool key_is(const char *k, size_t n, const char *name) { return strlen(name) == n && memcmp(k, name, n) == 0; }

static int retry_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    int64_t v = 0;
    int which = key_is(k, n, "max") ? 1 : key_is(k, n, "base_ms") ? 2 : key_is(k, n, "max_ms") ? 3 : key_is(k, n, "flags") ? 4 : 0;
    if (!which) return jr_skip(r);
    int rc = jr_int_member(r, &v, NULL);
    if (which == 1) q->retry_max = (int)v;
    else if (which == 2) q->retry_base = (long)v;
    else if (which == 3) q->retry_maxd = (long)v;
    else q->retry_flags = (unsigned)v;
    return rc;
}

static int cache_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    int64_t v = 0;
    int which = key_is(k, n, "policy") ? 1 : key_is(k, n, "expiry_s") ? 2 : 0;
    if (!which) return jr_skip(r);
    int rc = jr_int_member(r, &v, NULL);
    if (which == 1) q->cache_policy = (int)v;
    else q->cache_expiry = v;
    return rc;
}

static int result_member(jrd *r, const char *k, size_t n, void *ctx) {
    jres *x = ctx;
    if (key_is(k, n, "name")) return jr_str_member(r, &x->name);
    if (key_is(k, n, "key_path")) return jr_str_member(r, &x->key_path);
    if (key_is(k, n, "flags")) {
        int64_t v = 0;
        int rc = jr_int_member(r, &v, NULL);
        x->flags = (unsigned)v;
        return rc;
    }
    return jr_skip(r);
}

/* Arrays the journal reads: calls item(r, ctx) at each element. A value of another type is skipped
 * (*was_array false). */
static int jr_array(jrd *r, int (*item)(jrd *, void *), void *ctx, bool *was_array) {
    *was_array = false;
    if (!jr_peek(r, '[')) return jr_skip(r);
    *was_array = true;
    if (++r->depth > 32) return JR_BAD;
    r->p++;
    if (jr_peek(r, ']')) {
        r->p++;
        r->depth--;
        return JR_OK;
    }
    for (;;) {
        int rc = item(r, ctx);
        if (rc) return rc;
        jr_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            r->depth--;
            return JR_OK;
        }
        return JR_BAD;
    }
}

static int result_item(jrd *r, void *ctx) {
    jreq *q = ctx;
    if (!jr_peek(r, '{')) return jr_skip(r); /* not an object: its fields read as absent */
    jres *p = realloc(q->results, (q->nresults + 1) * sizeof *p);
    if (!p) return JR_NOMEM;
    q->results = p;
    jres *x = &p[q->nresults++];
    memset(x, 0, sizeof *x);
    return jr_object(r, result_member, x);
}

static int json_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    if (key_is(k, n, "key_path")) return jr_str_member(r, &q->key_path);
    if (key_is(k, n, "results")) {
        bool arr;
        for (size_t i = 0; i < q->nresults; i++) { /* a later member replaces an earlier one */
            free(q->results[i].name);
            free(q->results[i].key_path);
        }
        q->nresults = 0;
        return jr_array(r, result_item, q, &arr);
    }
    if (key_is(k, n, "had_mapping")) {
        jr_ws(r);
        q->had_mapping = r->p < r->end && *r->p == 't';
        return jr_skip(r);
    }
    return jr_skip(r);
}

/* One header: [name, value], both strings (anything else makes the record unreadable). */
static int header_item(jrd *r, void *ctx) {
    jreq *q = ctx;
    if (!jr_peek(r, '[')) return JR_BAD;
    r->p++;
    char *name = NULL, *value = NULL;
    size_t nl = 0, vl = 0;
    int rc = jr_string(r, &name, &nl);
    if (!rc && !jr_peek(r, ',')) rc = JR_BAD;
    if (!rc) {
        r->p++;
        rc = jr_string(r, &value, &vl);
    }
    /* Extra elements are allowed (skipped), as jansson's readers ignored them. */
    while (!rc && jr_peek(r, ',')) {
        r->p++;
        rc = jr_skip(r);
    }
    if (!rc && !jr_peek(r, ']')) rc = JR_BAD;
    if (!rc) r->p++;
    if (!rc && cr_kvlist_add(&q->headers, name, nl, value, vl)) rc = JR_NOMEM;
    free(name);
    free(value);
    return rc;
}

static int top_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    int64_t v = 0;
    int is = 0, rc;
    switch (n ? k[0] : 0) {
    case 'v':
        if (n == 1) {
            rc = jr_int_member(r, &v, &is);
            q->has_v = is;
            return rc;
        }
        break;
    case 'i':
        if (key_is(k, n, "id")) return jr_str_member(r, &q->id);
        if (key_is(k, n, "idempotency_key")) return jr_str_member(r, &q->idem);
        break;
    case 'm':
        if (key_is(k, n, "method")) return jr_str_member(r, &q->method);
        break;
    case 'u':
        if (key_is(k, n, "url")) return jr_str_member(r, &q->url);
        break;
    case 'b':
        if (key_is(k, n, "body_b64")) return jr_str_member(r, &q->body_b64);
        break;
    case 'h':
        if (key_is(k, n, "headers")) {
            bool arr;
            cr_kvlist_clear(&q->headers);
            rc = jr_array(r, header_item, q, &arr);
            q->has_headers = arr;
            return rc;
        }
        break;
    case 't':
        if (key_is(k, n, "timeout_ms")) {
            rc = jr_int_member(r, &v, NULL);
            q->timeout_ms = (long)v;
            return rc;
        }
        break;
    case 'p':
        if (key_is(k, n, "priority")) {
            rc = jr_int_member(r, &v, NULL);
            q->priority = (int)v;
            return rc;
        }
        break;
    case 'r':
        if (key_is(k, n, "retry")) {
            if (!jr_peek(r, '{')) return jr_skip(r);
            q->has_retry = 1;
            q->retry_max = 0;
            q->retry_base = q->retry_maxd = 0;
            q->retry_flags = 0;
            return jr_object(r, retry_member, q);
        }
        break;
    case 'c':
        if (key_is(k, n, "cache")) {
            if (!jr_peek(r, '{')) return jr_skip(r);
            q->has_cache = 1;
            q->cache_policy = 0;
            q->cache_expiry = 0;
            return jr_object(r, cache_member, q);
        }
        break;
    case 'j':
        if (key_is(k, n, "json")) {
            if (!jr_peek(r, '{')) return jr_skip(r);
            q->has_json = 1;
            return jr_object(r, json_member, q);
        }
        break;
    default: break;
    }
    return jr_skip(r);
}

/* Reads a stored request. COURIER_OK, COURIER_E_JOURNAL_CORRUPT (not a JSON object, or a header
 * that is not two strings) or COURIER_E_NO_MEMORY; *q is cleared on failure. */
static int jreq_read(const char *text, size_t len, jreq *q) {
    memset(q, 0, sizeof *q);
    jrd r = {text, text + len, 0};
    int rc = jr_object(&r, top_member, q);
    if (rc == JR_OK) {
        jr_ws(&r);
        if (r.p != r.end) rc = JR_BAD;
    }
    if (rc == JR_OK) return COURIER_OK;
    jreq_clear(q);
    return rc == JR_NOMEM ? COURIER_E_NO_MEMORY : COURIER_E_JOURNAL_CORRUPT;
}

/* ==== the snapshot handed to callers =========================================================== */

struct courier_frozen {
    atomic_int refs;
    uint64_t seq;
    char *id, *method, *url, *host, *idem, *json;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    courier_frozen_info info;
};

struct courier_frozen_list {
    courier_frozen **items;
    size_t count;
};

void courier_frozen_free(courier_frozen *f) {
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1) return;
    free(f->id);
    free(f->method);
    free(f->url);
    free(f->host);
    free(f->idem);
    free(f->json);
    cr_kvlist_clear(&f->headers);
    free(f->body);
    free(f);
}

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* Builds a snapshot from a decoded request (its strings and headers are taken: *q is left
 * cleared), the stored text (for the JSON view) and the state. NULL on a bad record or no memory
 * (*bad says which). */
static courier_frozen *snap_from(uint64_t seq, jreq *q, const char *text, size_t len, const jstate *st, bool *bad) {
    *bad = false;
    if (!q->method || !q->url || !q->id || !q->has_v) {
        *bad = true;
        jreq_clear(q);
        return NULL;
    }
    courier_frozen *f = calloc(1, sizeof *f);
    if (!f) {
        jreq_clear(q);
        return NULL;
    }
    atomic_init(&f->refs, 1);
    f->seq = seq;
    f->id = q->id;
    f->method = q->method;
    f->url = q->url;
    f->idem = q->idem ? q->idem : cr_strdup("");
    f->headers = q->headers;
    q->id = q->method = q->url = q->idem = NULL;
    memset(&q->headers, 0, sizeof q->headers);
    f->host = cr_strndup(st->host, st->host_len);
    if (!f->idem || !f->host) goto oom;
    if (q->body_b64) {
        int rc = b64_decode(q->body_b64, strlen(q->body_b64), &f->body, &f->body_len);
        if (rc == COURIER_E_NO_MEMORY) goto oom;
        if (rc) {
            *bad = true;
            goto fail;
        }
        f->has_body = 1;
    }
    courier_frozen_info *in = &f->info;
    in->size = sizeof *in;
    in->policy = st->policy;
    in->flags = st->flags & (COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS);
    in->timeout_ms = q->timeout_ms;
    in->attempts = (int)st->attempts;
    in->last_code = st->last_code;
    in->last_status = st->last_status;
    in->claimed = st->claim_ms != 0;
    in->created_ms = st->created_ms;
    in->expires_ms = st->expires_ms;
    in->next_attempt_ms = st->next_ms;
    in->last_attempt_ms = st->last_ms;
    /* The JSON view: the stored request text plus the replay state, spliced in as text. */
    size_t end = len;
    while (end && text[end - 1] != '}') end--;
    char state[256];
    int sl = snprintf(state, sizeof state,
                      ",\"state\":{\"attempts\":%u,\"next_attempt_ms\":%lld,\"last_attempt_ms\":%lld,\"claimed\":%s,"
                      "\"last_code\":%d,\"last_status\":%d}}",
                      st->attempts, (long long)st->next_ms, (long long)st->last_ms, st->claim_ms ? "true" : "false",
                      (int)st->last_code, (int)st->last_status);
    if (end == 0 || !(f->json = malloc(end + (size_t)sl + 1))) goto oom;
    memcpy(f->json, text, end - 1);
    memcpy(f->json + end - 1, state, (size_t)sl + 1);
    jreq_clear(q);
    return f;
oom:
fail:
    jreq_clear(q);
    courier_frozen_free(f);
    return NULL;
}

/* Builds a snapshot from the stored request text and its state. NULL on a bad record or no memory
 * (*bad says which). */
static courier_frozen *snap_make(uint64_t seq, const char *text, size_t len, const jstate *st, bool *bad) {
    jreq q;
    int rc = jreq_read(text, len, &q);
    if (rc) {
        *bad = rc == COURIER_E_JOURNAL_CORRUPT;
        return NULL;
    }
    return snap_from(seq, &q, text, len, st, bad);
}

static courier_frozen *snap_retain(courier_frozen *f) {
    if (f) atomic_fetch_add(&f->refs, 1);
    return f;
}

/* ==== the journal ============================================================================== */

typedef struct jfreeze {
    struct jfreeze *next;
    cr_transfer *answer; /* what answering the caller needs (detached), answered after the commit */
    int code;            /* why it is frozen */
    courier_error err;
    char id[COURIER_FROZEN_ID_MAX + 1];
    char *payload;   /* the request's JSON text but its opening (payload_of), built on the worker */
    char *method, *url; /* for the lifecycle event */
    jstate st;
    uint64_t seq;         /* once written */
    courier_frozen *snap; /* once written */
    uint64_t answer_id;   /* the original send's id */
    int generated;        /* the id is made at write time (from the record's number) */
} jfreeze;

typedef struct joutcome {
    struct joutcome *next;
    jstate st;            /* the state as claimed */
    struct cr_journal *journal;
    int tries; /* turns whose transaction failed */
    uint64_t seq;
    uint64_t request_id;
    int code;
    courier_response *resp;
    courier_error err;
    courier_frozen *snap;
    int not_sent; /* courier_send refused it: nothing reached the network */
} joutcome;

typedef struct jresend {
    struct jresend *next;
    char id[COURIER_FROZEN_ID_MAX + 1];
} jresend;

typedef struct jlistener {
    struct jlistener *next;
    uint64_t token;
    cr_callback *cb;
} jlistener;

typedef struct jevent {
    struct jevent *next;
    char id[COURIER_FROZEN_ID_MAX + 1];
    courier_frozen_event ev;
    courier_frozen *snap;
    courier_response *resp;
    courier_error err;
} jevent;

/* A claimed record about to be sent. */
typedef struct jsend {
    struct jsend *next;
    int explicit_; /* asked for by the app: sent even when the monitor says offline */
    jstate st;     /* as claimed */
    char *text;    /* the request text, parsed when it is sent (off the journal's transaction) */
    size_t tlen;
    uint64_t seq;
} jsend;

struct cr_journal {
    courier_engine *e;
    cr_complete_fn answer;
    jenv *env;
    jowner me;
    cr_callback *clock;
    long concurrency, backoff_base, backoff_max, lease_ms, poll_ms;
    int64_t default_expiry;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t idle_cv;
    /* Guarded by mu. */
    jfreeze *fz_head, *fz_tail;
    joutcome *oc_head, *oc_tail;
    long noc;             /* answers queued (oc_head's length) */
    jresend *rs_head;
    int go, closing, paused;
    int kick;             /* look for due records now */
    unsigned kick_mode;   /* J_KICK_* */
    int64_t kick_since;   /* the replay-now instant */
    long wire;            /* replays sent and not yet answered (at most `concurrency`) */
    long ahead;           /* claims kept ahead of the wire (journal thread writes, mu) */
    struct jsend *ready_head, *ready_tail; /* claimed, not yet sent */
    long nready;
    uint64_t turns;       /* loop turns completed */
    int idle;             /* the last turn found nothing to do now */
    atomic_int broken;    /* the journal reported corruption at run time */

    pthread_mutex_t lmu; /* listeners */
    jlistener *listeners;
    atomic_int nlisteners;
    uint64_t next_token;

    uint64_t rng; /* journal thread */
    int64_t next_recover_ms;
};

static int64_t jnow(const cr_journal *j) {
    if (j->clock) return ((courier_clock_fn)j->clock->fn)(j->clock->user);
    return realtime_ms();
}

static uint64_t jrand(cr_journal *j) {
    j->rng ^= j->rng << 13;
    j->rng ^= j->rng >> 7;
    j->rng ^= j->rng << 17;
    return j->rng;
}

/* Is the claimer of s still at work? */
static bool owner_alive(cr_journal *j, const jowner *o) {
    if (o->pid == 0) return false;
    if (o->boot && j->me.boot && o->boot != j->me.boot) return false;
    if (o->pid == j->me.pid && o->start == j->me.start) return jenv_has_nonce(j->env, o->nonce);
    char state = 0;
    uint64_t start = 0;
    int rc = proc_stat((long)o->pid, &state, &start);
    if (rc == -1) return false;
    if (rc == 0) return state != 'Z' && state != 'X' && (o->start == 0 || start == o->start);
    return !(kill((pid_t)o->pid, 0) != 0 && errno == ESRCH);
}

/* Takes a claim over when its owner is gone or its lease has ended. */
static bool claim_stale(cr_journal *j, const jstate *s, int64_t now) {
    return s->claim_ms && (s->claim_ms <= now || !owner_alive(j, &s->owner));
}

/* ---- transactions helpers ---- */

#define J_STATE_MAX (J_STATE_FIXED + 4 + J_HOST_MAX + COURIER_FROZEN_ID_MAX)

/* A record's value is its state (rewritten on each claim and answer) followed by the request
 * text (written once): one put per freeze. */
static int rec_get(cr_journal *j, MDB_txn *txn, uint64_t seq, jstate *st, MDB_val *payload) {
    uint8_t k[8];
    put_be64(k, seq);
    MDB_val key = {8, k}, val;
    int rc = mdb_get(txn, j->env->db_req, &key, &val);
    if (rc) return rc;
    size_t used = state_decode(val.mv_data, val.mv_size, st);
    if (!used) return MDB_CORRUPTED;
    if (payload) {
        payload->mv_data = (char *)val.mv_data + used;
        payload->mv_size = val.mv_size - used;
    }
    return 0;
}

static int st_get(cr_journal *j, MDB_txn *txn, uint64_t seq, jstate *st) { return rec_get(j, txn, seq, st, NULL); }

/* Writes a record: the state, then the request text. `append`: seq is past every key (a new
 * record), so LMDB fills pages to the end instead of splitting them in halves: fuller pages, a
 * shallower tree, fewer pages in each commit's fsync. */
static int rec_put(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *st, const void *payload, size_t plen,
                   bool append) {
    uint8_t k[8], b[J_STATE_MAX];
    put_be64(k, seq);
    size_t sl = state_encode(st, b);
    MDB_val key = {8, k}, val = {sl + plen, NULL};
    int rc = mdb_put(txn, j->env->db_req, &key, &val, MDB_RESERVE | (append ? MDB_APPEND : 0));
    if (rc) return rc;
    memcpy(val.mv_data, b, sl);
    if (plen) memcpy((char *)val.mv_data + sl, payload, plen);
    return 0;
}

/* Rewrites the state of an existing record, keeping its request text. */
static int st_put(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *st) {
    jstate old;
    MDB_val p;
    int rc = rec_get(j, txn, seq, &old, &p);
    if (rc) return rc;
    char stack[2048], *copy = p.mv_size <= sizeof stack ? stack : malloc(p.mv_size);
    if (!copy) return ENOMEM;
    memcpy(copy, p.mv_data, p.mv_size); /* the put may move the page the text lives in */
    rc = rec_put(j, txn, seq, st, copy, p.mv_size, false);
    if (copy != stack) free(copy);
    return rc;
}

/* Puts an index key with an empty value, appended (pages filled to the end, see rec_put) when it
 * sorts after every key of the database, as new records' keys usually do. */
static int index_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key) {
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc) return rc;
    MDB_val lk, lv, val = {0, ""};
    unsigned flags = 0;
    rc = mdb_cursor_get(c, &lk, &lv, MDB_LAST);
    if (rc == MDB_NOTFOUND) {
        flags = MDB_APPEND;
    } else if (rc == 0) {
        size_t n = lk.mv_size < key->mv_size ? lk.mv_size : key->mv_size;
        int cmp = memcmp(key->mv_data, lk.mv_data, n);
        if (cmp > 0 || (cmp == 0 && key->mv_size > lk.mv_size)) flags = MDB_APPEND;
    } else {
        mdb_cursor_close(c);
        return rc;
    }
    rc = mdb_cursor_put(c, key, &val, flags);
    mdb_cursor_close(c);
    return rc;
}

static int key2_op(cr_journal *j, MDB_txn *txn, MDB_dbi dbi, int64_t t, uint64_t seq, bool put) {
    uint8_t k[16];
    put_be64(k, be_time(t));
    put_be64(k + 8, seq);
    MDB_val key = {16, k};
    int rc = put ? index_put(txn, dbi, &key) : mdb_del(txn, dbi, &key, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static int hostq_op(cr_journal *j, MDB_txn *txn, const jstate *st, uint64_t seq, bool put) {
    uint8_t k[J_HOST_MAX + 9];
    memcpy(k, st->host, st->host_len);
    k[st->host_len] = 0;
    put_be64(k + st->host_len + 1, seq);
    MDB_val key = {st->host_len + 9u, k};
    int rc = put ? index_put(txn, j->env->db_hostq, &key) : mdb_del(txn, j->env->db_hostq, &key, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The oldest ordered record of a host, or 0. */
static int host_head(cr_journal *j, MDB_txn *txn, const char *host, size_t host_len, uint64_t *seq) {
    *seq = 0;
    uint8_t k[J_HOST_MAX + 9];
    memcpy(k, host, host_len);
    k[host_len] = 0;
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, j->env->db_hostq, &c);
    if (rc) return rc;
    MDB_val key = {host_len + 1u, k}, val;
    rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
    if (rc == 0 && key.mv_size == host_len + 9u && memcmp(key.mv_data, k, host_len + 1u) == 0)
        *seq = get_be64((const uint8_t *)key.mv_data + host_len + 1);
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Puts the new head of a host's ordered queue into `due`. */
static int host_promote(cr_journal *j, MDB_txn *txn, const char *host, size_t host_len) {
    uint64_t seq;
    int rc = host_head(j, txn, host, host_len, &seq);
    if (rc || !seq) return rc;
    jstate st;
    if ((rc = st_get(j, txn, seq, &st))) return rc == MDB_NOTFOUND ? 0 : rc;
    if (st.flags & JF_IN_DUE) return 0;
    st.flags |= JF_IN_DUE;
    if ((rc = key2_op(j, txn, j->env->db_due, due_time(&st), seq, true))) return rc;
    return st_put(j, txn, seq, &st);
}

/* The next key of a database keyed by be64 numbers: the last one + 1 (1 when empty). Numbers are
 * not kept in a counter, so a freeze writes one database page less. */
static int last_next(MDB_txn *txn, MDB_dbi dbi, uint64_t *out) {
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc) return rc;
    MDB_val k, v;
    rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
    *out = rc == 0 && k.mv_size == 8 ? get_be64(k.mv_data) + 1 : 1;
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static bool generated_id(const char *id, size_t n) {
    if (n != 32) return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
    return true;
}

/* The record a freeze id names: given ids through the `ids` index; generated ids carry their
 * record's number in their first 16 hex digits (checked against the stored id). */
static int find_seq(cr_journal *j, MDB_txn *txn, const char *id, uint64_t *seq) {
    size_t n = strlen(id);
    MDB_val k = {n, (void *)id}, v;
    int rc = mdb_get(txn, j->env->db_ids, &k, &v);
    if (rc == 0 && v.mv_size == 8) {
        *seq = get_be64(v.mv_data);
        return 0;
    }
    if (rc && rc != MDB_NOTFOUND) return rc;
    if (!generated_id(id, n)) return MDB_NOTFOUND;
    char hex[17];
    memcpy(hex, id, 16);
    hex[16] = '\0';
    uint64_t s = strtoull(hex, NULL, 16);
    jstate st;
    rc = st_get(j, txn, s, &st);
    if (rc == 0 && st.id_len == n && memcmp(st.id, id, n) == 0) {
        *seq = s;
        return 0;
    }
    return rc == 0 || rc == MDB_CORRUPTED ? MDB_NOTFOUND : rc;
}

/* Removes a record and every index entry of it; promotes the next of its host. */
static int rec_remove(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *st) {
    uint8_t k[8];
    put_be64(k, seq);
    MDB_val key = {8, k};
    int rc = mdb_del(txn, j->env->db_req, &key, NULL);
    if (rc == 0 || rc == MDB_NOTFOUND) {
        MDB_val idk = {st->id_len, (void *)st->id}, idv;
        /* Only if the id still names this record (a replacement keeps the id). */
        rc = mdb_get(txn, j->env->db_ids, &idk, &idv);
        if (rc == 0 && idv.mv_size == 8 && get_be64(idv.mv_data) == seq) rc = mdb_del(txn, j->env->db_ids, &idk, NULL);
    }
    if (rc == MDB_NOTFOUND) rc = 0;
    if (!rc && (st->flags & JF_IN_DUE)) rc = key2_op(j, txn, j->env->db_due, due_time(st), seq, false);
    if (!rc && is_ordered_auto(st)) {
        rc = hostq_op(j, txn, st, seq, false);
        if (!rc) rc = host_promote(j, txn, st->host, st->host_len);
    }
    return rc;
}

/* Rewrites a record's state, moving its `due` key when its due time changed. */
static int st_update(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *old, const jstate *st) {
    int rc = 0;
    if ((old->flags & JF_IN_DUE) && due_time(old) != due_time(st)) {
        rc = key2_op(j, txn, j->env->db_due, due_time(old), seq, false);
        if (!rc) rc = key2_op(j, txn, j->env->db_due, due_time(st), seq, true);
    }
    return rc ? rc : st_put(j, txn, seq, st);
}

static int req_text(cr_journal *j, MDB_txn *txn, uint64_t seq, MDB_val *val) {
    jstate st;
    return rec_get(j, txn, seq, &st, val);
}

/* A snapshot of a record inside a transaction (NULL when unreadable). */
static courier_frozen *snap_in(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *st) {
    MDB_val v;
    if (req_text(j, txn, seq, &v)) return NULL;
    bool bad;
    return snap_make(seq, v.mv_data, v.mv_size, st, &bad);
}

/* ---- events ---- */

static jevent *event_new(int kind, courier_frozen *snap, uint64_t request_id, int code) {
    jevent *ev = calloc(1, sizeof *ev);
    if (!ev) {
        courier_frozen_free(snap);
        return NULL;
    }
    ev->snap = snap;
    ev->ev.size = sizeof ev->ev;
    ev->ev.kind = kind;
    ev->ev.request_id = request_id;
    ev->ev.code = code;
    return ev;
}

static void events_push(jevent ***tail, jevent *ev) {
    if (!ev) return;
    **tail = ev;
    *tail = &ev->next;
}

/* Delivers events in order to every listener, then frees them. */
static void events_deliver(cr_journal *j, jevent *list) {
    while (list) {
        jevent *ev = list;
        list = ev->next;
        ev->ev.frozen = ev->snap;
        ev->ev.freeze_id = ev->snap ? ev->snap->id : ev->id;
        ev->ev.response = ev->resp;
        ev->ev.error = ev->ev.code == COURIER_OK ? NULL : &ev->err;
        pthread_mutex_lock(&j->lmu);
        size_t n = 0;
        for (jlistener *l = j->listeners; l; l = l->next) n++;
        cr_callback **cbs = n ? malloc(n * sizeof *cbs) : NULL;
        size_t k = 0;
        if (cbs)
            for (jlistener *l = j->listeners; l; l = l->next) cbs[k++] = cr_callback_retain(l->cb);
        pthread_mutex_unlock(&j->lmu);
        for (size_t i = 0; i < k; i++) {
            ((courier_frozen_event_fn)cbs[i]->fn)(&ev->ev, cbs[i]->user);
            cr_callback_release(cbs[i]);
        }
        free(cbs);
        courier_frozen_free(ev->snap);
        courier_response_free(ev->resp);
        free(ev);
    }
}

/* ==== what a frozen request keeps ============================================================== */

/* Appends s as a JSON string (quotes, escapes; s is UTF-8). */
static int json_str(cr_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    if (cr_buf_append_char(b, '"')) return COURIER_E_NO_MEMORY;
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c && c >= 0x20 && c != '"' && c != '\\') continue;
        if (p > run && cr_buf_append(b, run, (size_t)(p - run))) return COURIER_E_NO_MEMORY;
        if (!c) break;
        char esc[7] = {'\\', (char)c, 0};
        size_t n = 2;
        if (c < 0x20) {
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (cr_buf_append(b, esc, n)) return COURIER_E_NO_MEMORY;
        run = p + 1;
    }
    return cr_buf_append_char(b, '"');
}

/* Writes v in decimal at p (room for 21 bytes); returns the length. snprintf costs ~1,500
 * instructions a call, and a freeze formats a dozen numbers. */
static size_t dec_put(char *p, long long v) {
    char tmp[24];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t o = 0;
    if (v < 0) p[o++] = '-';
    while (n) p[o++] = tmp[--n];
    return o;
}

/* Appends lit then v in decimal. */
static int buf_num(cr_buf *b, const char *lit, long long v) {
    char d[24];
    int rc = cr_buf_append_str(b, lit);
    return rc ? rc : cr_buf_append(b, d, dec_put(d, v));
}

/* Builds the stored request of a transfer as JSON text, all but its opening: the journal puts
 * {"v":1,"id":...,"seq":... in front when it writes it (the id may be made then). The text is
 * written once, directly (no document tree), on the worker. *out new (free). */
static int payload_of(const cr_transfer *t, const char *idem, int64_t created, int64_t expires, const char *host,
                      char **out) {
    cr_buf b = {0};
    char num[96];
    int rc = cr_buf_append_str(&b, "\"method\":");
    if (!rc) rc = json_str(&b, t->method);
    if (!rc) rc = cr_buf_append_str(&b, ",\"url\":");
    if (!rc) rc = json_str(&b, t->url);
    if (!rc) rc = cr_buf_append_str(&b, ",\"headers\":[");
    for (size_t i = 0; !rc && i < t->headers.count; i++) {
        rc = cr_buf_append_str(&b, i ? ",[" : "[");
        if (!rc) rc = json_str(&b, t->headers.items[i].name);
        if (!rc) rc = cr_buf_append_char(&b, ',');
        if (!rc) rc = json_str(&b, t->headers.items[i].value);
        if (!rc) rc = cr_buf_append_char(&b, ']');
    }
    if (!rc && !cr_kvlist_get(&t->headers, "Idempotency-Key")) {
        rc = cr_buf_append_str(&b, t->headers.count ? ",[\"Idempotency-Key\"," : "[\"Idempotency-Key\",");
        if (!rc) rc = json_str(&b, idem);
        if (!rc) rc = cr_buf_append_char(&b, ']');
    }
    if (!rc) rc = cr_buf_append_char(&b, ']');
    if (!rc && t->has_body) {
        /* cr_base64_encode of nothing leaves a reserved, unterminated buffer: encode only bytes. */
        rc = cr_buf_append_str(&b, ",\"body_b64\":\"");
        if (!rc && t->body_len) rc = cr_base64_encode(&b, t->body, t->body_len);
        if (!rc) rc = cr_buf_append_char(&b, '"');
    }
    const struct cr_freeze_req *fr = &t->freeze;
    if (!rc) rc = buf_num(&b, ",\"timeout_ms\":", t->timeout_ms);
    if (!rc) rc = cr_buf_append_str(&b, ",\"idempotency_key\":");
    if (!rc) rc = json_str(&b, idem);
    if (!rc) rc = buf_num(&b, ",\"created_ms\":", (long long)created);
    if (!rc) rc = buf_num(&b, ",\"expires_ms\":", (long long)expires);
    if (!rc) rc = cr_buf_append_str(&b, fr->policy == COURIER_FREEZE_MANUAL ? ",\"policy\":\"manual\"" : ",\"policy\":\"auto\"");
    if (!rc) rc = cr_buf_append_str(&b, fr->flags & COURIER_FREEZE_UNORDERED ? ",\"ordered\":false" : ",\"ordered\":true");
    if (!rc) rc = cr_buf_append_str(&b, ",\"host\":");
    if (!rc) rc = json_str(&b, host);
    if (!rc) rc = buf_num(&b, ",\"priority\":", t->priority);
    if (!rc) rc = buf_num(&b, ",\"retry\":{\"max\":", t->retry.max);
    if (!rc) rc = buf_num(&b, ",\"base_ms\":", t->retry.base_ms);
    if (!rc) rc = buf_num(&b, ",\"max_ms\":", t->retry.max_ms);
    if (!rc) rc = buf_num(&b, ",\"flags\":", t->retry.flags);
    if (!rc) rc = cr_buf_append_char(&b, '}');
    if (!rc && fr->cache_set) {
        snprintf(num, sizeof num, ",\"cache\":{\"policy\":%d,\"expiry_s\":%lld}", fr->cache_policy,
                 (long long)fr->cache_expiry_s);
        rc = cr_buf_append_str(&b, num);
    }
    if (!rc && t->jspec) {
        /* Key paths and result names are kept; mapping objects live in memory only. */
        rc = cr_buf_append_str(&b, ",\"json\":{");
        if (!rc && t->jspec->key_path) {
            rc = cr_buf_append_str(&b, "\"key_path\":");
            if (!rc) rc = json_str(&b, t->jspec->key_path);
            if (!rc) rc = cr_buf_append_char(&b, ',');
        }
        if (!rc) rc = cr_buf_append_str(&b, t->jspec->mapping ? "\"had_mapping\":true" : "\"had_mapping\":false");
        if (!rc && t->jspec->nresults) {
            rc = cr_buf_append_str(&b, ",\"results\":[");
            for (size_t i = 0; !rc && i < t->jspec->nresults; i++) {
                const cr_result_spec *r = &t->jspec->results[i];
                rc = cr_buf_append_str(&b, i ? ",{\"name\":" : "{\"name\":");
                if (!rc) rc = json_str(&b, r->name);
                if (!rc && r->key_path) {
                    rc = cr_buf_append_str(&b, ",\"key_path\":");
                    if (!rc) rc = json_str(&b, r->key_path);
                }
                if (!rc) {
                    snprintf(num, sizeof num, ",\"flags\":%u}", r->flags);
                    rc = cr_buf_append_str(&b, num);
                }
            }
            if (!rc) rc = cr_buf_append_char(&b, ']');
        }
        if (!rc) rc = cr_buf_append_char(&b, '}');
    }
    if (!rc) rc = cr_buf_append_char(&b, '}');
    if (rc) {
        cr_buf_free(&b);
        return COURIER_E_NO_MEMORY;
    }
    *out = cr_buf_take(&b, NULL);
    return *out ? COURIER_OK : COURIER_E_NO_MEMORY;
}

/* Rebuilds the request from its decoded stored form (no snapshot needed). *out new.
 * COURIER_E_JOURNAL_CORRUPT when the text is not a request. */
static int request_from(const jreq *q, courier_request **out) {
    if (!q->method || !q->url || !q->has_headers) return COURIER_E_JOURNAL_CORRUPT;
    courier_request *r = NULL;
    int rc = courier_request_new(&r, q->method, q->url);
    if (rc) return rc;
    courier_request_set_use_default_params(r, 0);
    const char *ctype = NULL;
    for (size_t i = 0; rc == COURIER_OK && i < q->headers.count; i++) {
        const char *n = q->headers.items[i].name, *v = q->headers.items[i].value;
        rc = courier_request_add_header(r, n, v);
        if (rc == COURIER_OK && !ctype && strcasecmp(n, "Content-Type") == 0) ctype = v;
    }
    if (rc == COURIER_OK && q->body_b64) {
        char *body = NULL;
        size_t len = 0;
        rc = b64_decode(q->body_b64, strlen(q->body_b64), &body, &len);
        if (rc == COURIER_E_INVALID_ARGUMENT) rc = COURIER_E_JOURNAL_CORRUPT;
        if (rc == COURIER_OK) rc = courier_request_set_body(r, body, len, ctype);
        free(body);
    }
    if (rc == COURIER_OK && q->timeout_ms > 0) rc = courier_request_set_timeout_ms(r, q->timeout_ms);
    if (rc == COURIER_OK && q->has_retry && q->retry_max > 0 &&
        courier_request_set_retry(r, q->retry_max, q->retry_base, q->retry_maxd, q->retry_flags) != COURIER_OK)
        courier_request_set_retry(r, 0, 0, 0, 0);
    if (rc == COURIER_OK && q->priority)
        courier_request_set_priority(r, q->priority > 0 ? COURIER_PRIORITY_HIGH : COURIER_PRIORITY_LOW);
    if (rc == COURIER_OK && q->has_cache) {
        courier_request_set_cache_policy(r, q->cache_policy);
        if (q->cache_expiry > 0) courier_request_set_cache_expiry(r, q->cache_expiry);
    }
    if (rc == COURIER_OK && q->has_json) {
        if (q->key_path) courier_request_set_key_path(r, q->key_path);
        for (size_t k = 0; k < q->nresults; k++)
            courier_request_add_result(r, q->results[k].name, q->results[k].key_path, NULL, q->results[k].flags);
    }
    /* The frozen request's own settings never freeze it again: the journal keeps it. */
    if (rc) {
        courier_request_free(r);
        return rc;
    }
    *out = r;
    return COURIER_OK;
}

/* ==== one loop turn ============================================================================ */

/* What an answer means for a record. */
enum { J_FINAL_OK, J_FINAL_FAIL, J_RETRY, J_NOT_TRIED, J_SET_ASIDE };

static int classify(int code, const courier_response *resp, const courier_error *err) {
    int status = resp ? resp->status : err ? err->http_status : 0;
    switch (code) {
    case COURIER_OK: return J_FINAL_OK;
    case COURIER_E_HTTP_STATUS:
        return status == 408 || status == 425 || status == 429 || status >= 500 ? J_RETRY : J_FINAL_FAIL;
    case COURIER_E_CANNOT_RESOLVE:
    case COURIER_E_CANNOT_CONNECT:
    case COURIER_E_TIMEOUT:
    case COURIER_E_NETWORK:
    case COURIER_E_PARTIAL_RESPONSE:
    case COURIER_E_TLS:
    case COURIER_E_PINNING:
    case COURIER_E_NO_MEMORY:
    case COURIER_E_INTERNAL:
    case COURIER_E_STORE:
    case COURIER_E_TOO_FREQUENT: return J_RETRY;
    case COURIER_E_CANCELLED:
    case COURIER_E_CLOSED:
    case COURIER_E_OFFLINE:
    case COURIER_E_FROZEN: return J_NOT_TRIED;
    case COURIER_E_JOURNAL_CORRUPT: return J_SET_ASIDE;
    default: return J_FINAL_FAIL;
    }
}

static long backoff_ms(cr_journal *j, uint32_t attempts) {
    long d = j->backoff_base;
    for (uint32_t i = 1; i < attempts && d < j->backoff_max; i++) d *= 2;
    if (d > j->backoff_max) d = j->backoff_max;
    if (d > 1) d = d / 2 + (long)(jrand(j) % (uint64_t)(d - d / 2 + 1)); /* equal jitter */
    return d;
}

static int outcome_log(cr_journal *j, MDB_txn *txn, const jstate *st, int code, int status, int64_t now) {
    uint64_t n;
    int rc = last_next(txn, j->env->db_outcome, &n);
    if (rc) return rc;
    char text[COURIER_FROZEN_ID_MAX + 160];
    int len = snprintf(text, sizeof text, "{\"id\":\"%.*s\",\"code\":%d,\"status\":%d,\"at_ms\":%lld,\"attempts\":%u}",
                       (int)st->id_len, st->id, code, status, (long long)now, st->attempts);
    uint8_t k[8];
    put_be64(k, n);
    MDB_val key = {8, k}, val = {(size_t)len, text};
    if ((rc = mdb_put(txn, j->env->db_outcome, &key, &val, MDB_APPEND))) return rc; /* n is past every key */
    MDB_stat ms;
    if (mdb_stat(txn, j->env->db_outcome, &ms) == 0 && ms.ms_entries > J_OUTCOMES_KEPT + 100) { /* trims in batches */
        MDB_cursor *c;
        if ((rc = mdb_cursor_open(txn, j->env->db_outcome, &c))) return rc;
        size_t extra = ms.ms_entries - J_OUTCOMES_KEPT;
        MDB_val ck, cv;
        while (extra-- && (rc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST)) == 0) rc = mdb_cursor_del(c, 0);
        mdb_cursor_close(c);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    return rc;
}

/* Writes one frozen request. */
static int apply_freeze(cr_journal *j, MDB_txn *txn, jfreeze *f) {
    int rc = 0;
    MDB_val idk = {f->st.id_len, f->st.id}, idv;
    if (!f->generated) {
        rc = mdb_get(txn, j->env->db_ids, &idk, &idv);
        if (rc == 0 && idv.mv_size == 8) {
            /* The same freeze id again: the newer request replaces the older one. */
            uint64_t old = get_be64(idv.mv_data);
            jstate ost;
            rc = st_get(j, txn, old, &ost);
            if (rc == 0) rc = rec_remove(j, txn, old, &ost);
            else if (rc == MDB_NOTFOUND) rc = 0;
        } else if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
        if (rc) return rc;
    }
    uint64_t seq;
    if ((rc = last_next(txn, j->env->db_req, &seq))) return rc;
    if (f->generated) {
        /* Generated: the record's number, then 64 random bits (no `ids` entry needed). */
        char rnd[33];
        random_hex(rnd);
        static const char hex[] = "0123456789abcdef";
        for (int i = 0; i < 16; i++) f->id[i] = hex[(seq >> (60 - 4 * i)) & 15];
        memcpy(f->id + 16, rnd, 16);
        f->id[32] = '\0';
        f->st.id_len = 32;
        memcpy(f->st.id, f->id, 32);
    }
    /* The text: {"v":1,"id":...,"seq":..., then what the worker built. Ids need no escaping. */
    char opening[COURIER_FROZEN_ID_MAX + 64];
    size_t idl = strlen(f->id);
    memcpy(opening, "{\"v\":1,\"id\":\"", 13);
    memcpy(opening + 13, f->id, idl);
    memcpy(opening + 13 + idl, "\",\"seq\":", 8);
    size_t hl = 21 + idl;
    hl += dec_put(opening + hl, (long long)seq);
    opening[hl++] = ',';
    size_t pl = strlen(f->payload);
    char *text = malloc(hl + pl + 1);
    if (!text) return ENOMEM;
    memcpy(text, opening, hl);
    memcpy(text + hl, f->payload, pl + 1);
    if (!f->generated) {
        uint8_t sb[8];
        put_be64(sb, seq);
        idk.mv_size = f->st.id_len;
        idk.mv_data = f->st.id;
        idv.mv_size = 8;
        idv.mv_data = sb;
        rc = mdb_put(txn, j->env->db_ids, &idk, &idv, 0);
    }
    if (!rc && f->st.policy == COURIER_FREEZE_AUTO) {
        bool in_due = true;
        if (is_ordered_auto(&f->st)) {
            uint64_t head = 0;
            rc = hostq_op(j, txn, &f->st, seq, true);
            if (!rc) rc = host_head(j, txn, f->st.host, f->st.host_len, &head);
            in_due = head == seq;
        }
        if (!rc && in_due) {
            f->st.flags |= JF_IN_DUE;
            rc = key2_op(j, txn, j->env->db_due, due_time(&f->st), seq, true);
        }
    }
    if (!rc) rc = rec_put(j, txn, seq, &f->st, text, strlen(text), true);
    free(text);
    if (rc == 0) f->seq = seq;
    return rc;
}

/* Records a replay's answer: removal with the outcome log on a final answer, the next attempt's
 * time on a retryable one, the claim given back when nothing was tried. */
static int apply_outcome(cr_journal *j, MDB_txn *txn, joutcome *o, int64_t now, jevent ***events) {
    jstate st;
    int rc = st_get(j, txn, o->seq, &st);
    int kind = classify(o->code, o->resp, &o->err);
    int status = o->resp ? o->resp->status : o->err.http_status;
    int evkind = 0, final = 0, attempts = (int)o->st.attempts;
    bool expired = false;
    if (rc == MDB_NOTFOUND || (rc == 0 && (st.id_len != o->st.id_len || memcmp(st.id, o->st.id, st.id_len) != 0))) {
        /* Removed (or replaced) while on the wire: only the event remains to give. */
        if (kind != J_NOT_TRIED && kind != J_SET_ASIDE) {
            evkind = kind == J_FINAL_OK ? COURIER_FROZEN_EVENT_RESENT_SUCCEEDED : COURIER_FROZEN_EVENT_RESENT_FAILED;
            final = 1;
        }
    } else if (rc) {
        return rc;
    } else {
        bool mine = st.claim_ms && st.owner.pid == j->me.pid && st.owner.nonce == j->me.nonce &&
                    st.owner.start == j->me.start;
        jstate old = st;
        attempts = (int)st.attempts;
        if (kind == J_FINAL_OK || kind == J_FINAL_FAIL) {
            st.last_code = o->code;
            st.last_status = status;
            if ((rc = rec_remove(j, txn, o->seq, &old)) || (rc = outcome_log(j, txn, &st, o->code, status, now)))
                return rc;
            evkind = kind == J_FINAL_OK ? COURIER_FROZEN_EVENT_RESENT_SUCCEEDED : COURIER_FROZEN_EVENT_RESENT_FAILED;
            final = 1;
        } else if (!mine) {
            /* Another replayer took it over meanwhile and decides; report the failed attempt. */
            if (kind == J_RETRY) evkind = COURIER_FROZEN_EVENT_RESENT_FAILED;
        } else {
            st.claim_ms = 0;
            memset(&st.owner, 0, sizeof st.owner);
            if (kind == J_NOT_TRIED || kind == J_SET_ASIDE) {
                if (st.attempts) st.attempts--;
                attempts = (int)st.attempts;
                if (kind == J_SET_ASIDE) {
                    /* Its text does not decode: never sent; left (as late as backoff allows) for the
                     * app to see in the list and remove. */
                    st.last_code = COURIER_E_JOURNAL_CORRUPT;
                    st.next_ms = now + j->backoff_max;
                }
            } else {
                st.last_code = o->code;
                st.last_status = status;
                st.next_ms = now + backoff_ms(j, st.attempts);
                evkind = COURIER_FROZEN_EVENT_RESENT_FAILED;
            }
            if (kind == J_RETRY && st.expires_ms <= now) {
                /* Out of time after a failed attempt: removed and reported expired. */
                if ((rc = rec_remove(j, txn, o->seq, &old))) return rc;
                expired = true;
            } else if ((rc = st_update(j, txn, o->seq, &old, &st))) {
                return rc;
            }
        }
    }
    if (evkind) {
        jevent *ev = event_new(evkind, snap_retain(o->snap), o->request_id, o->code);
        if (ev) {
            memcpy(ev->id, o->st.id, o->st.id_len);
            ev->ev.final = final;
            ev->ev.attempts = attempts;
            ev->resp = o->resp;
            o->resp = NULL;
            ev->err = o->err;
        }
        events_push(events, ev);
    }
    if (expired) {
        jevent *ev = event_new(COURIER_FROZEN_EVENT_EXPIRED, snap_retain(o->snap), 0, COURIER_OK);
        if (ev) {
            memcpy(ev->id, o->st.id, o->st.id_len);
            ev->ev.final = 1;
            ev->ev.attempts = attempts;
        }
        events_push(events, ev);
    }
    return 0;
}

/* Claims a record for this engine: attempts + 1, lease until now + lease. */
static int claim(cr_journal *j, MDB_txn *txn, uint64_t seq, jstate *st, int64_t now, int explicit_, jsend ***sends) {
    jstate old = *st;
    st->claim_ms = now + j->lease_ms;
    st->owner = j->me;
    st->attempts++;
    st->last_ms = now;
    int rc = st_update(j, txn, seq, &old, st);
    if (rc) return rc;
    MDB_val p;
    jstate again;
    if ((rc = rec_get(j, txn, seq, &again, &p))) return rc;
    jsend *s = calloc(1, sizeof *s);
    char *text = malloc(p.mv_size ? p.mv_size : 1);
    if (!s || !text) {
        free(s);
        free(text);
        return ENOMEM;
    }
    memcpy(text, p.mv_data, p.mv_size);
    s->text = text;
    s->tlen = p.mv_size;
    s->st = *st;
    s->seq = seq;
    s->explicit_ = explicit_;
    **sends = s;
    *sends = &s->next;
    return 0;
}

/* Removes what expired by now among the records the periodic scan found (checked again here; not
 * what another live replayer holds), reporting each. Records that are due are also checked when
 * the replayer reaches them, so none is ever sent after its expiry. */
static int sweep_expired(cr_journal *j, MDB_txn *txn, const uint64_t *seqs, size_t n, int64_t now, jevent ***events) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        rc = st_get(j, txn, seqs[i], &st);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc) break;
        if (st.expires_ms > now) continue;
        if (st.claim_ms && !claim_stale(j, &st, now)) continue; /* on the wire: its answer decides */
        courier_frozen *snap = snap_in(j, txn, seqs[i], &st);
        if ((rc = rec_remove(j, txn, seqs[i], &st))) {
            courier_frozen_free(snap);
            break;
        }
        jevent *ev = event_new(COURIER_FROZEN_EVENT_EXPIRED, snap, 0, COURIER_OK);
        if (ev) {
            ev->ev.final = 1;
            ev->ev.attempts = (int)st.attempts;
        }
        events_push(events, ev);
    }
    return rc;
}

/* Gives back the claims of dead owners (found by a read scan, checked again here). */
static int recover_claims(cr_journal *j, MDB_txn *txn, const uint64_t *seqs, size_t n, int64_t now) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        rc = st_get(j, txn, seqs[i], &st);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc || !st.claim_ms || !claim_stale(j, &st, now)) continue;
        jstate old = st;
        st.claim_ms = 0;
        memset(&st.owner, 0, sizeof st.owner);
        rc = st_update(j, txn, seqs[i], &old, &st);
    }
    return rc;
}

/* Claims due records while this engine has free slots. Returns the earliest future due time in
 * *next (INT64_MAX if none) and whether a replay-now scan found nothing left. */
static int pass(cr_journal *j, MDB_txn *txn, int64_t now, long slots, unsigned mode, int64_t since, jsend ***sends,
                jevent ***events, int64_t *next, bool *mode_done) {
    *next = INT64_MAX;
    *mode_done = true;
    MDB_cursor *c;
    int rc = 0;
    uint64_t *cand = NULL;
    size_t n = 0, cap = 0;
    MDB_val k, v;
    bool full = false; /* out of slots with candidates left */
    /* `due` in batches a little larger than the free slots: a batch is collected first (changing
     * `due` under the cursor would move it), then claimed, and the next one starts at the key the
     * last one stopped at (a claim moves its key to the lease's end, past now). So a pass costs what
     * it claims, not the journal's length. The first sweep takes what is due now; a replay-now then
     * sweeps what is not due yet. */
    for (int sweep = 0; sweep < ((mode & J_KICK_NOW) ? 2 : 1) && rc == 0 && !full; sweep++) {
        uint8_t from[16];
        bool have_from = sweep == 1, more = true;
        if (have_from) {
            put_be64(from, be_time(now + 1));
            memset(from + 8, 0, 8);
        }
        while (more && rc == 0 && !full) {
            more = false;
            n = 0;
            if ((rc = mdb_cursor_open(txn, j->env->db_due, &c))) break;
            size_t limit = (size_t)(slots > 0 ? slots : 0) + 16;
            if (have_from) {
                k.mv_size = 16;
                k.mv_data = from;
                rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
            } else {
                rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
            }
            for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                if (k.mv_size != 16) continue;
                int64_t t = (int64_t)get_be64(k.mv_data);
                if (sweep == 0 && t > now) {
                    *next = t;
                    break;
                }
                if (n == limit) {
                    memcpy(from, k.mv_data, 16); /* the next batch starts here */
                    have_from = more = true;
                    break;
                }
                if (n == cap) {
                    cap = cap ? cap * 2 : 32;
                    uint64_t *p = realloc(cand, cap * sizeof *p);
                    if (!p) {
                        rc = ENOMEM;
                        break;
                    }
                    cand = p;
                }
                cand[n++] = get_be64((const uint8_t *)k.mv_data + 8);
            }
            mdb_cursor_close(c);
            if (rc == MDB_NOTFOUND) rc = 0;
            for (size_t i = 0; i < n && rc == 0; i++) {
                jstate st;
                rc = st_get(j, txn, cand[i], &st);
                if (rc == MDB_NOTFOUND) {
                    rc = 0;
                    continue;
                }
                if (rc) break;
                bool eligible = due_time(&st) <= now ||
                                ((mode & J_KICK_NOW) && st.last_ms < since && (!st.claim_ms || claim_stale(j, &st, now)));
                if (st.claim_ms && !claim_stale(j, &st, now)) eligible = false;
                if (!eligible) {
                    int64_t t = due_time(&st);
                    if (t > now && t < *next) *next = t;
                    continue;
                }
                if (st.expires_ms <= now) {
                    courier_frozen *snap = snap_in(j, txn, cand[i], &st);
                    if ((rc = rec_remove(j, txn, cand[i], &st))) {
                        courier_frozen_free(snap);
                        break;
                    }
                    jevent *ev = event_new(COURIER_FROZEN_EVENT_EXPIRED, snap, 0, COURIER_OK);
                    if (ev) ev->ev.final = 1;
                    events_push(events, ev);
                    continue;
                }
                if (slots <= 0) {
                    *mode_done = false;
                    *next = now;
                    full = true;
                    break;
                }
                if ((rc = claim(j, txn, cand[i], &st, now, mode != 0, sends))) break;
                slots--;
            }
        }
    }
    free(cand);
    if (rc || !(mode & J_KICK_MANUAL)) return rc;
    /* Manual records are not in `due`: a replay-now that includes them scans every record. */
    if ((rc = mdb_cursor_open(txn, j->env->db_req, &c))) return rc;
    n = 0;
    cand = NULL;
    cap = 0;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        jstate st;
        if (k.mv_size != 8 || !state_decode(v.mv_data, v.mv_size, &st)) continue;
        if (st.policy != COURIER_FREEZE_MANUAL || st.last_ms >= since) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            uint64_t *p = realloc(cand, cap * sizeof *p);
            if (!p) {
                rc = ENOMEM;
                break;
            }
            cand = p;
        }
        cand[n++] = get_be64(k.mv_data);
    }
    mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        if ((rc = st_get(j, txn, cand[i], &st))) {
            if (rc == MDB_NOTFOUND) rc = 0;
            continue;
        }
        if (st.claim_ms && !claim_stale(j, &st, now)) continue;
        if (slots <= 0) {
            *mode_done = false;
            *next = now;
            break;
        }
        if ((rc = claim(j, txn, cand[i], &st, now, mode != 0, sends))) break;
        slots--;
    }
    free(cand);
    return rc;
}

/* An explicit resend by id: claimed whatever its policy, order or backoff. */
static int resend_one(cr_journal *j, MDB_txn *txn, const char *id, int64_t now, jsend ***sends) {
    uint64_t seq;
    int rc = find_seq(j, txn, id, &seq);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return rc;
    jstate st;
    if ((rc = st_get(j, txn, seq, &st))) return rc == MDB_NOTFOUND ? 0 : rc;
    if (st.claim_ms && !claim_stale(j, &st, now)) return 0;
    return claim(j, txn, seq, &st, now, 1, sends);
}

/* Read-only look: is anything due or expired now, and which claims are held by the dead? */
/* A list of record numbers. */
typedef struct jseqs {
    uint64_t *v;
    size_t n, cap;
} jseqs;

static void seqs_add(jseqs *l, uint64_t seq) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uint64_t *p = realloc(l->v, cap * sizeof *p);
        if (!p) return; /* found again by the next scan */
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = seq;
}

/* In any transaction: is a record due now, and when is the next one due after now? */
static void due_edges(cr_journal *j, MDB_txn *txn, int64_t now, bool *due_now, int64_t *next_due) {
    *due_now = false;
    *next_due = INT64_MAX;
    MDB_cursor *c;
    if (mdb_cursor_open(txn, j->env->db_due, &c)) return;
    MDB_val k, v;
    if (mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0 && k.mv_size == 16) {
        int64_t t = (int64_t)get_be64(k.mv_data);
        if (t <= now) {
            *due_now = true;
            uint8_t kb[16];
            put_be64(kb, be_time(now + 1));
            memset(kb + 8, 0, 8);
            k.mv_size = 16;
            k.mv_data = kb;
            if (mdb_cursor_get(c, &k, &v, MDB_SET_RANGE) == 0 && k.mv_size == 16)
                *next_due = (int64_t)get_be64(k.mv_data);
        } else {
            *next_due = t;
        }
    }
    mdb_cursor_close(c);
}

/* Read-only look: is anything due now, and when next? With `scan`, also which claims are held by
 * the dead and which records expired (a pass over every record: only every poll interval). */
static int peek(cr_journal *j, int64_t now, bool scan, bool *due_now, int64_t *next_due, jseqs *dead,
                jseqs *expired) {
    *due_now = false;
    *next_due = INT64_MAX;
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, MDB_RDONLY, &txn);
    if (rc) return rc;
    MDB_cursor *c;
    MDB_val k, v;
    due_edges(j, txn, now, due_now, next_due);
    if (rc == 0 && scan && (rc = mdb_cursor_open(txn, j->env->db_req, &c)) == 0) {
        int grc;
        for (grc = mdb_cursor_get(c, &k, &v, MDB_FIRST); grc == 0; grc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            jstate st;
            if (k.mv_size != 8 || !state_decode(v.mv_data, v.mv_size, &st)) continue;
            bool stale = st.claim_ms && claim_stale(j, &st, now);
            if (stale) seqs_add(dead, get_be64(k.mv_data));
            if (st.expires_ms <= now && (!st.claim_ms || stale)) seqs_add(expired, get_be64(k.mv_data));
        }
        mdb_cursor_close(c);
        if (grc != 0 && grc != MDB_NOTFOUND) rc = grc;
    }
    mdb_txn_abort(txn);
    return rc;
}

static void replay_done(uint64_t request_id, int code, courier_response *resp, const courier_error *err, void *user);

/* Answers that make a commit worth it without waiting longer (see linger). */
static long linger_target(const cr_journal *j) { return j->concurrency * 4 > 32 ? j->concurrency * 4 : 32; }

static void outcome_push(cr_journal *j, joutcome *o) {
    pthread_mutex_lock(&j->mu);
    if (j->oc_tail) j->oc_tail->next = o;
    else j->oc_head = o;
    j->oc_tail = o;
    j->noc++;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Sends one claimed record through the public send path (retry, cache, mapping apply unchanged).
 * j->wire already counts it. */
static void send_one(cr_journal *j, jsend *s) {
    joutcome *o = calloc(1, sizeof *o);
    if (!o) {
        /* The claim stays; its lease ends and it is sent again. */
        pthread_mutex_lock(&j->mu);
        j->wire--;
        pthread_mutex_unlock(&j->mu);
        free(s->text);
        free(s);
        return;
    }
    o->journal = j;
    o->seq = s->seq;
    o->st = s->st;
    int explicit_ = s->explicit_;
    courier_request *r = NULL;
    jreq q;
    int rc = jreq_read(s->text, s->tlen, &q); /* decoded once: for the request and the snapshot */
    if (rc == COURIER_OK) rc = request_from(&q, &r);
    if (rc == COURIER_OK && atomic_load(&j->nlisteners) > 0) {
        /* The events carry a snapshot of the request; built only when someone listens. */
        bool bad = false;
        o->snap = snap_from(s->seq, &q, s->text, s->tlen, &s->st, &bad);
    }
    jreq_clear(&q);
    free(s->text);
    free(s);
    if (rc == COURIER_OK && explicit_) rc = courier_request_set_ignore_offline(r, 1);
    if (rc == COURIER_OK) rc = courier_send(j->e, r, replay_done, o, NULL, &o->err);
    else if (rc == COURIER_E_JOURNAL_CORRUPT) cr_fail(&o->err, rc, "the stored request does not decode");
    else cr_fail(&o->err, rc, "the frozen request cannot be rebuilt");
    courier_request_free(r);
    if (rc != COURIER_OK) {
        o->code = rc;
        o->not_sent = 1;
        pthread_mutex_lock(&j->mu);
        j->wire--;
        pthread_mutex_unlock(&j->mu);
        outcome_push(j, o);
    }
}

/* Sends claimed records while fewer than `concurrency` are on the wire: from the journal thread
 * after a turn, and from each replay's completion (the worker), so the next request goes out
 * without waiting for the journal's next commit. */
static void pump_ready(cr_journal *j) {
    for (;;) {
        pthread_mutex_lock(&j->mu);
        jsend *s = j->ready_head;
        if (!s || j->wire >= j->concurrency) {
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->ready_head = s->next;
        if (!j->ready_head) j->ready_tail = NULL;
        j->nready--;
        j->wire++;
        pthread_mutex_unlock(&j->mu);
        s->next = NULL;
        send_one(j, s);
    }
}

static void ready_push(cr_journal *j, jsend *list) {
    if (!list) return;
    pthread_mutex_lock(&j->mu);
    while (list) {
        jsend *n = list->next;
        list->next = NULL;
        if (j->ready_tail) j->ready_tail->next = list;
        else j->ready_head = list;
        j->ready_tail = list;
        j->nready++;
        list = n;
    }
    pthread_mutex_unlock(&j->mu);
}

static void replay_done(uint64_t request_id, int code, courier_response *resp, const courier_error *err, void *user) {
    joutcome *o = user;
    cr_journal *j = o->journal;
    o->request_id = request_id;
    o->code = code;
    o->resp = resp;
    if (err) o->err = *err;
    else cr_error_clear(&o->err);
    pthread_mutex_lock(&j->mu);
    j->wire--;
    if (j->oc_tail) j->oc_tail->next = o;
    else j->oc_head = o;
    j->oc_tail = o;
    /* The journal thread is woken by the first answer (it may be waiting for work), and then only
     * when enough answers for one commit are queued or the claimed records run low (see linger). */
    if (++j->noc == 1 || j->noc >= linger_target(j) || j->nready < j->concurrency) pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pump_ready(j);
}

/* ---- the turn ---- */

static void freeze_answer(cr_journal *j, jfreeze *f, bool frozen, const char *why) {
    courier_error err;
    int code;
    if (frozen) {
        code = cr_fail(&err, COURIER_E_FROZEN, "frozen as %s", f->id);
    } else {
        err = f->err;
        code = f->code;
        size_t len = strlen(err.message);
        snprintf(err.message + len, sizeof err.message - len, "%s(not frozen: %s)", len ? " " : "", why);
    }
    j->answer(j->e, f->answer, code, NULL, &err);
    f->answer = NULL;
}

static void freeze_free(jfreeze *f) {
    free(f->payload);
    free(f->method);
    free(f->url);
    courier_frozen_free(f->snap);
    cr_transfer_free(f->answer); /* only when never answered */
    free(f);
}

static void outcome_free(joutcome *o) {
    courier_response_free(o->resp);
    courier_frozen_free(o->snap);
    free(o);
}

/* A freeze committed: the lifecycle event, and a warning when the store will not outlive the
 * engine (a temporary store is removed at close, and the request with it, never replayed). */
static void frozen_committed(cr_journal *j, const jfreeze *f) {
    cr_event_frozen(j->e, f->answer_id, f->method, f->url);
    if (j->e->store_is_temp)
        cr_log(j->e, COURIER_LOG_WARNING, "frozen_temporary_store",
               "a %s request (id %llu) was frozen into the temporary store '%s', which is removed when the "
               "engine closes: it will not be sent again after that (give the engine a durable store: the "
               "default one, or a store directory)", f->method, (unsigned long long)f->answer_id,
               j->e->store_dir);
}

/* Writes the freezes one per transaction (after a group transaction failed), answering each. */
static void freezes_alone(cr_journal *j, jfreeze *fz, jevent ***events) {
    for (jfreeze *f = fz; f; f = f->next) {
        MDB_txn *txn;
        int rc = jtxn_begin(j->env, 0, &txn);
        if (rc == 0) {
            rc = apply_freeze(j, txn, f);
            if (rc == 0) f->snap = snap_in(j, txn, f->seq, &f->st);
            if (rc == 0) rc = mdb_txn_commit(txn);
            else mdb_txn_abort(txn);
        }
        if (is_corruption(rc)) j->broken = 1;
        if (rc == 0) frozen_committed(j, f);
        freeze_answer(j, f, rc == 0, rc ? mdb_strerror(rc) : "");
        if (rc == 0) {
            jevent *ev = event_new(COURIER_FROZEN_EVENT_FROZEN, snap_retain(f->snap), f->answer_id, COURIER_OK);
            events_push(events, ev);
        }
    }
}

/* One turn of the journal thread. Returns the monotonic time of the next turn. */
static int64_t turn(cr_journal *j) {
    pthread_mutex_lock(&j->mu);
    jfreeze *fz = j->fz_head;
    j->fz_head = j->fz_tail = NULL;
    joutcome *oc = j->oc_head;
    j->oc_head = j->oc_tail = NULL;
    j->noc = 0;
    jresend *rs = j->rs_head;
    j->rs_head = NULL;
    j->kick = 0;
    unsigned mode = j->kick_mode;
    int64_t since = j->kick_since;
    int paused = j->paused, closing = j->closing;
    bool offline = cr_monitor_offline(j->e);
    bool auto_ok = !paused && !closing && !offline && !j->broken;
    bool pass_ok = (auto_ok || (mode && !closing)) && !j->broken;
    /* Claimed records not sent yet are given back when nothing should be sent now. */
    jsend *unsent = NULL;
    if (!pass_ok && j->ready_head) {
        unsent = j->ready_head;
        j->ready_head = j->ready_tail = NULL;
        j->nready = 0;
    }
    /* Claims ahead of the wire, so a completion sends the next at once and one commit records
     * many answers (the wire itself stays bounded by the concurrency). How far ahead follows the
     * answers of the last turn: a slow disk (long commits) gets bigger batches. */
    long slots = j->ahead - j->wire - j->nready;
    pthread_mutex_unlock(&j->mu);
    while (unsent) {
        jsend *n = unsent->next;
        joutcome *o = calloc(1, sizeof *o);
        if (o) {
            o->journal = j;
            o->seq = unsent->seq;
            o->st = unsent->st;
            o->code = cr_fail(&o->err, COURIER_E_CANCELLED, "not sent: replay paused, offline or closing");
            o->not_sent = 1;
            o->next = oc;
            oc = o;
        }
        free(unsent->text);
        free(unsent);
        unsent = n;
    }
    pthread_mutex_lock(&j->lmu);
    bool listening = j->listeners != NULL;
    pthread_mutex_unlock(&j->lmu);

    int64_t mono = cr_mono_ms();
    int64_t now = jnow(j);
    int64_t wake = mono + j->poll_ms;
    bool want_scan = mono >= j->next_recover_ms && !j->broken && !closing;
    bool has_work = fz || oc || rs;
    bool due_now = false;
    int64_t next_due = INT64_MAX;
    jseqs dead = {0}, expired = {0};
    /* A turn that writes anyway looks at `due` inside its transaction: no extra read. */
    if (!j->broken && (!has_work || want_scan) &&
        peek(j, now, want_scan, &due_now, &next_due, &dead, &expired) == 0 && want_scan)
        j->next_recover_ms = mono + j->poll_ms;
    bool want_pass = pass_ok && slots > 0 && (due_now || mode || has_work);
    jevent *events = NULL, **etail = &events;
    jsend *sends = NULL, **stail = &sends;
    bool mode_done = false;

    if (has_work || want_pass || expired.n || dead.n) {
        MDB_txn *txn = NULL;
        int rc = j->broken ? MDB_PANIC : jtxn_begin(j->env, 0, &txn);
        jfreeze *f;
        for (f = fz; rc == 0 && f; f = f->next) {
            rc = apply_freeze(j, txn, f);
            /* The event's snapshot is read back from the written bytes, when someone listens. */
            if (rc == 0 && listening && !(f->snap = snap_in(j, txn, f->seq, &f->st))) rc = ENOMEM;
        }
        for (joutcome *o = oc; rc == 0 && o; o = o->next) rc = apply_outcome(j, txn, o, now, &etail);
        if (rc == 0 && dead.n) rc = recover_claims(j, txn, dead.v, dead.n, now);
        if (rc == 0 && expired.n) rc = sweep_expired(j, txn, expired.v, expired.n, now, &etail);
        for (jresend *r = rs; rc == 0 && r && !closing; r = r->next) rc = resend_one(j, txn, r->id, now, &stail);
        if (rc == 0 && want_pass) {
            long left = slots;
            int64_t unused;
            for (jsend *s = sends; s; s = s->next) left--;
            rc = pass(j, txn, now, left, mode, since, &stail, &etail, &unused, &mode_done);
        }
        if (rc == 0) due_edges(j, txn, now, &due_now, &next_due); /* what is left, after the claims */
        if (rc == 0) rc = mdb_txn_commit(txn);
        else if (txn) mdb_txn_abort(txn);
        if (is_corruption(rc) && rc != MDB_PANIC) {
            j->broken = 1;
            cr_log(j->e, COURIER_LOG_ERROR, "journal", "the frozen-request journal '%s' reported corruption: %s",
                   j->env->dir, mdb_strerror(rc));
        }
        if (rc == 0) {
            for (f = fz; f; f = f->next) {
                frozen_committed(j, f);
                freeze_answer(j, f, true, "");
                if (f->snap)
                    events_push(&etail, event_new(COURIER_FROZEN_EVENT_FROZEN, snap_retain(f->snap), f->answer_id,
                                                  COURIER_OK));
            }
            if (mode_done && mode) {
                pthread_mutex_lock(&j->mu);
                if (j->kick_since == since) j->kick_mode = 0;
                pthread_mutex_unlock(&j->mu);
            }
        } else {
            /* Nothing of this turn happened. Freezes are tried alone (so one cannot sink the others);
             * answers wait for the next turn (a few times, then their claims' leases decide). */
            jevent *ev = events;
            while (ev) {
                jevent *n = ev->next;
                courier_frozen_free(ev->snap);
                courier_response_free(ev->resp);
                free(ev);
                ev = n;
            }
            events = NULL;
            etail = &events;
            while (sends) {
                jsend *n = sends->next;
                free(sends->text);
                free(sends);
                sends = n;
            }
            for (f = fz; f; f = f->next) {
                courier_frozen_free(f->snap);
                f->snap = NULL;
            }
            freezes_alone(j, fz, &etail);
            joutcome *keep = NULL, *last = NULL;
            while (oc) {
                joutcome *n = oc->next;
                oc->next = NULL;
                if (++oc->tries < 3 && !j->broken) {
                    if (last) last->next = oc;
                    else keep = oc;
                    last = oc;
                } else {
                    outcome_free(oc); /* its claim stays until the lease ends or this engine closes */
                }
                oc = n;
            }
            pthread_mutex_lock(&j->mu);
            for (joutcome *o = keep; o; o = o->next) j->noc++;
            if (keep) {
                last->next = j->oc_head;
                if (!j->oc_head) j->oc_tail = last;
                j->oc_head = keep;
            }
            pthread_mutex_unlock(&j->mu);
            if (keep) wake = mono + 100;
            due_now = false;
            next_due = now + 100;
        }
    }
    free(dead.v);
    free(expired.v);
    while (fz) {
        jfreeze *n = fz->next;
        freeze_free(fz);
        fz = n;
    }
    while (rs) {
        jresend *n = rs->next;
        free(rs);
        rs = n;
    }
    long answers = 0;
    while (oc) {
        joutcome *n = oc->next;
        outcome_free(oc);
        oc = n;
        answers++;
    }
    long base = j->concurrency * 8 > 64 ? j->concurrency * 8 : 64;
    long ahead = answers * 4 < base ? base : answers * 4 > 4096 ? 4096 : answers * 4;
    pthread_mutex_lock(&j->mu);
    j->ahead = ahead;
    pthread_mutex_unlock(&j->mu);
    events_deliver(j, events);
    cr_monitor_dispatch(j->e);
    ready_push(j, sends); /* nothing is claimed while closing: the next turn gives back the rest */
    if (!closing) pump_ready(j);

    /* When to look again: the next due record, a probe, the poll. */
    if (!j->broken && next_due != INT64_MAX) {
        int64_t delta = next_due - now;
        if (delta < 0) delta = 0;
        if (mono + delta < wake) wake = mono + delta;
    }
    int64_t probe = cr_monitor_tick(j->e, mono);
    if (probe < wake) wake = probe;
    /* Records still due now that this engine would send: not idle (a free slot will take them). */
    bool pending_now = pass_ok && !closing && due_now;
    pthread_mutex_lock(&j->mu);
    bool busy = j->fz_head || j->oc_head || j->rs_head || j->kick || j->kick_mode || j->wire > 0 || j->ready_head;
    j->idle = !busy && !pending_now;
    j->turns++;
    pthread_cond_broadcast(&j->idle_cv);
    pthread_mutex_unlock(&j->mu);
    return wake;
}

/* Group commit of replay answers. A turn whose only work is answers waits a little (at most
 * J_LINGER_US) while more are on their way, so one synced commit records many answers instead of
 * one or two: the wire stays full meanwhile (claimed records wait in the ready queue, and each
 * completion sends the next without the journal), and the linger ends early for a freeze, a
 * resend, a kick, closing, enough answers, or a ready queue running low. Nothing is promised
 * before the commit, so a crash meanwhile costs a resend (at least once), never a request.
 * Called with mu held. */
#define J_LINGER_US 2000
static void linger(cr_journal *j) {
    if (!j->oc_head) return;
    struct timespec until = cr_cond_deadline(J_LINGER_US);
    while (!j->closing && !j->fz_head && !j->rs_head && !j->kick && j->noc < linger_target(j) && j->wire > 0 &&
           j->nready >= j->concurrency) {
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
    }
}

static void *jthread(void *arg) {
    cr_journal *j = arg;
    pthread_mutex_lock(&j->mu);
    while (!j->go && !j->closing) pthread_cond_wait(&j->cv, &j->mu);
    j->kick = 1;
    pthread_mutex_unlock(&j->mu);
    for (;;) {
        int64_t wake = turn(j);
        pthread_mutex_lock(&j->mu);
        if (j->closing && !j->fz_head && !j->oc_head && !j->rs_head && !j->ready_head) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        while (!j->closing && !j->fz_head && !j->oc_head && !j->rs_head && !j->kick) {
            int64_t left = wake - cr_mono_ms();
            if (left <= 0) break;
            struct timespec ts = cr_cond_deadline(left * 1000);
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        }
        linger(j);
        pthread_mutex_unlock(&j->mu);
    }
    return NULL;
}

/* ==== engine hooks ============================================================================= */

void cr_journal_wake(courier_engine *e, unsigned how) {
    cr_journal *j = e ? e->journal : NULL;
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->kick = 1;
    if (how & CR_WAKE_REPLAY_NOW) {
        j->kick_mode |= J_KICK_NOW;
        j->kick_since = jnow(j);
    }
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void journal_free(cr_journal *j) {
    if (!j) return;
    while (j->listeners) {
        jlistener *l = j->listeners;
        j->listeners = l->next;
        cr_callback_release(l->cb);
        free(l);
    }
    jenv_release(j->env, j->me.nonce);
    cr_callback_release(j->clock);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->lmu);
    pthread_cond_destroy(&j->cv);
    pthread_cond_destroy(&j->idle_cv);
    free(j);
}

int cr_journal_open(courier_engine *e, cr_complete_fn answer, courier_error *err) {
    cr_journal *j = calloc(1, sizeof *j);
    if (!j) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->lmu, NULL);
    cr_cond_init(&j->cv);
    cr_cond_init(&j->idle_cv);
    j->e = e;
    j->answer = answer;
    const struct cr_frozen_conf *fc = &e->config->frozen;
    j->concurrency = fc->concurrency > 0 ? fc->concurrency : J_DEFAULT_CONCURRENCY;
    j->backoff_base = fc->backoff_base_ms > 0 ? fc->backoff_base_ms : J_DEFAULT_BACKOFF_BASE;
    j->backoff_max = fc->backoff_max_ms > 0 ? fc->backoff_max_ms : J_DEFAULT_BACKOFF_MAX;
    if (j->backoff_max < j->backoff_base) j->backoff_max = j->backoff_base;
    j->lease_ms = fc->lease_ms > 0 ? fc->lease_ms : J_DEFAULT_LEASE;
    j->poll_ms = fc->poll_ms > 0 ? fc->poll_ms : J_DEFAULT_POLL;
    j->default_expiry = fc->expiry_ms > 0 ? fc->expiry_ms : J_DEFAULT_EXPIRY;
    j->paused = fc->paused;
    j->ahead = j->concurrency * 8 > 64 ? j->concurrency * 8 : 64;
    j->clock = cr_callback_retain(e->config->clock);
    uint32_t nonce = 0;
    while (!nonce) random_bytes(&nonce, sizeof nonce);
    random_bytes(&j->rng, sizeof j->rng);
    j->rng |= 1;
    j->me.pid = (uint32_t)getpid();
    j->me.nonce = nonce;
    char state;
    if (proc_stat((long)getpid(), &state, &j->me.start) != 0) j->me.start = 0;
    j->me.boot = boot_hash();
    j->next_token = 1;
    e->journal = j;
    int rc = jenv_acquire(e->store_dir, nonce, &j->env, err);
    if (rc == COURIER_OK) rc = cr_monitor_open(e, err);
    if (rc == COURIER_OK) {
        int prc = pthread_create(&j->thread, NULL, jthread, j);
        if (prc) {
            rc = cr_fail(err, COURIER_E_INTERNAL, "cannot start the journal thread: %s", strerror(prc));
            if (err) err->os_error = prc;
        } else {
            j->thread_started = 1;
        }
    }
    if (rc) {
        cr_monitor_close(e);
        e->journal = NULL;
        journal_free(j);
    }
    return rc;
}

void cr_journal_start(courier_engine *e) {
    cr_journal *j = e ? e->journal : NULL;
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->go = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void cr_journal_close(courier_engine *e) {
    cr_journal *j = e ? e->journal : NULL;
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->closing = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->thread_started) pthread_join(j->thread, NULL);
    /* Nothing is left queued: the thread drained it. Defensive frees for a thread that never ran. */
    while (j->fz_head) {
        jfreeze *n = j->fz_head->next;
        freeze_answer(j, j->fz_head, false, "the engine closed");
        freeze_free(j->fz_head);
        j->fz_head = n;
    }
    while (j->oc_head) {
        joutcome *n = j->oc_head->next;
        outcome_free(j->oc_head);
        j->oc_head = n;
    }
    while (j->rs_head) {
        jresend *n = j->rs_head->next;
        free(j->rs_head);
        j->rs_head = n;
    }
    while (j->ready_head) {
        jsend *n = j->ready_head->next;
        free(j->ready_head->text);
        free(j->ready_head);
        j->ready_head = n;
    }
    cr_monitor_close(e);
    e->journal = NULL;
    journal_free(j);
}

void cr_frozen_attach(courier_engine *e, const courier_request *r, cr_transfer *t) {
    (void)e;
    t->freeze = r->freeze;
    if (r->freeze.policy != COURIER_FREEZE_NEVER && r->cache) {
        t->freeze.cache_set = 1;
        t->freeze.cache_policy = r->cache->policy;
        t->freeze.cache_expiry_s = r->cache->expiry_s;
    }
}

static bool freezable(const cr_transfer *t, int code) {
    switch (code) {
    case COURIER_E_CANNOT_RESOLVE:
    case COURIER_E_CANNOT_CONNECT:
    case COURIER_E_OFFLINE: return true;
    case COURIER_E_TIMEOUT:
    case COURIER_E_NETWORK:
    case COURIER_E_PARTIAL_RESPONSE: return (t->freeze.flags & COURIER_FREEZE_ON_AMBIGUOUS) != 0;
    default: return false;
    }
}

/* Hands t's freeze to the journal thread. With `own`, the journal answers t itself and frees it
 * (a transfer that never reached the worker); else a detached copy of what answering needs, and
 * t->caller_gone is set (the engine frees t). False (nothing taken) on no memory or a closing or
 * broken journal. */
static bool freeze_take(courier_engine *e, cr_transfer *t, int code, const courier_error *err, bool own) {
    cr_journal *j = e->journal;
    /* Bodies from files or multipart parts, and downloads to files, are not kept: a file may change
     * or vanish before the resend. Those fail as they are. */
    if (t->parts || t->body_file || t->download_path || t->mime) return false;
    pthread_mutex_lock(&j->mu);
    bool closing = j->closing;
    pthread_mutex_unlock(&j->mu);
    if (closing || j->broken) return false;
    jfreeze *f = calloc(1, sizeof *f);
    cr_transfer *a = own ? t : calloc(1, sizeof *a);
    if (!f || !a) goto fail;
    jstate *st = &f->st;
    if (t->freeze.id[0]) snprintf(f->id, sizeof f->id, "%s", t->freeze.id);
    else f->generated = 1; /* made in the write transaction */
    char idem[COURIER_FROZEN_ID_MAX + 1], host[J_HOST_MAX + 1];
    const char *given = cr_kvlist_get(&t->headers, "Idempotency-Key");
    if (given) snprintf(idem, sizeof idem, "%s", given);
    else random_hex(idem);
    /* The scheduler's "scheme://host:port" when it has one (lowercase, default port filled in). */
    if (t->host && strlen(t->host) < sizeof host && strstr(t->host, "://") && strrchr(t->host, ':') > strstr(t->host, "://"))
        snprintf(host, sizeof host, "%s", t->host);
    else if (host_of(t->url, host, sizeof host))
        snprintf(host, sizeof host, "%s", "unknown://");
    int64_t now = jnow(j);
    st->policy = (uint8_t)t->freeze.policy;
    st->flags = (uint16_t)(t->freeze.flags & (COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS));
    st->created_ms = now;
    st->expires_ms = now + (t->freeze.expiry_ms > 0 ? t->freeze.expiry_ms : j->default_expiry);
    /* Frozen because the network failed: the first resend waits one backoff step. Frozen because
     * the monitor said offline: due as soon as the monitor says online. */
    st->next_ms = code == COURIER_E_OFFLINE ? 0 : now + j->backoff_base;
    st->host_len = (uint16_t)strlen(host);
    memcpy(st->host, host, st->host_len);
    st->id_len = (uint16_t)strlen(f->id);
    memcpy(st->id, f->id, st->id_len);
    if (payload_of(t, idem, st->created_ms, st->expires_ms, host, &f->payload) || !(f->method = cr_strdup(t->method)) ||
        !(f->url = cr_strdup(t->url)))
        goto fail;
    f->code = code;
    if (err) f->err = *err;
    else cr_fail(&f->err, code, NULL);
    /* The caller is answered after the commit, from a detached copy of what answering needs. */
    if (!own) {
        a->id = t->id;
        a->engine = e;
        a->done = t->done;
        a->user = t->user;
        a->attempts = t->attempts;
        a->waited_s = t->waited_s;
        t->caller_gone = 1;
    }
    f->answer = a;
    f->answer_id = t->id;
    pthread_mutex_lock(&j->mu);
    if (j->fz_tail) j->fz_tail->next = f;
    else j->fz_head = f;
    j->fz_tail = f;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return true;
fail:
    if (f) {
        free(f->payload);
        free(f->method);
        free(f->url);
    }
    free(f);
    if (!own) free(a);
    return false; /* answered with its own failure */
}

bool cr_frozen_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    if (!e->journal || t->freeze.policy == COURIER_FREEZE_NEVER || t->caller_gone || resp || !freezable(t, code))
        return false;
    return freeze_take(e, t, code, err, false);
}

bool cr_frozen_offline_send(courier_engine *e, cr_transfer *t) {
    if (!e->journal || t->freeze.policy == COURIER_FREEZE_NEVER || t->freeze.ignore_offline || t->mock || t->custom ||
        t->cache || !cr_monitor_offline(e))
        return false;
    pthread_mutex_lock(&e->lock);
    bool closing = e->closing;
    pthread_mutex_unlock(&e->lock);
    if (closing) return false; /* courier_send says COURIER_E_CLOSED */
    courier_error err;
    cr_fail(&err, COURIER_E_OFFLINE, "the network monitor says offline");
    cr_event_will_send(e, t);
    if (freeze_take(e, t, COURIER_E_OFFLINE, &err, true)) return true;
    return false;
}

/* ==== public API =============================================================================== */

static cr_journal *journal_of(courier_engine *e, courier_error *err) {
    if (!e) {
        cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
        return NULL;
    }
    if (!e->journal) cr_fail(err, COURIER_E_CLOSED, "the engine has no journal");
    return e->journal;
}

int courier_request_set_freeze(courier_request *r, int policy, int64_t expiry_ms, unsigned flags) {
    if (!r || policy < COURIER_FREEZE_NEVER || policy > COURIER_FREEZE_MANUAL || expiry_ms < 0 ||
        (flags & ~(COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS)))
        return COURIER_E_INVALID_ARGUMENT;
    r->freeze.policy = policy;
    r->freeze.expiry_ms = expiry_ms;
    r->freeze.flags = flags;
    return COURIER_OK;
}

int courier_request_set_freeze_id(courier_request *r, const char *id) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (!id) {
        r->freeze.id[0] = '\0';
        return COURIER_OK;
    }
    if (!valid_id(id, strlen(id))) return COURIER_E_INVALID_ARGUMENT;
    snprintf(r->freeze.id, sizeof r->freeze.id, "%s", id);
    return COURIER_OK;
}

int courier_request_set_ignore_offline(courier_request *r, int ignore) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->freeze.ignore_offline = ignore ? 1 : 0;
    return COURIER_OK;
}

const char *courier_error_freeze_id(const courier_error *err) {
    if (!err || err->code != COURIER_E_FROZEN || strncmp(err->message, "frozen as ", 10) != 0) return NULL;
    return err->message + 10;
}

int courier_config_set_frozen_replay(courier_config *c, long concurrency, long backoff_base_ms, long backoff_max_ms) {
    if (!c || concurrency < 0 || backoff_base_ms < 0 || backoff_max_ms < 0 ||
        (backoff_base_ms && backoff_max_ms && backoff_max_ms < backoff_base_ms))
        return COURIER_E_INVALID_ARGUMENT;
    c->frozen.concurrency = concurrency;
    c->frozen.backoff_base_ms = backoff_base_ms;
    c->frozen.backoff_max_ms = backoff_max_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_expiry_ms(courier_config *c, int64_t expiry_ms) {
    if (!c || expiry_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.expiry_ms = expiry_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_lease_ms(courier_config *c, long lease_ms) {
    if (!c || lease_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.lease_ms = lease_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_poll_ms(courier_config *c, long poll_ms) {
    if (!c || poll_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.poll_ms = poll_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_paused(courier_config *c, int paused) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.paused = paused ? 1 : 0;
    return COURIER_OK;
}

int courier_frozen_pause(courier_engine *e) {
    cr_journal *j = journal_of(e, NULL);
    if (!j) return e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&j->mu);
    j->paused = 1;
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

int courier_frozen_resume(courier_engine *e) {
    cr_journal *j = journal_of(e, NULL);
    if (!j) return e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&j->mu);
    j->paused = 0;
    j->kick = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

int courier_frozen_replay(courier_engine *e, unsigned flags, courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (flags & ~COURIER_REPLAY_MANUAL) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "unknown flags");
    if (j->broken) return cr_fail(err, COURIER_E_JOURNAL_CORRUPT, "the journal reported corruption");
    pthread_mutex_lock(&j->mu);
    j->kick = 1;
    j->kick_mode |= J_KICK_NOW | ((flags & COURIER_REPLAY_MANUAL) ? J_KICK_MANUAL : 0);
    j->kick_since = jnow(j);
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

int courier_frozen_wait_idle(courier_engine *e, long timeout_ms) {
    cr_journal *j = journal_of(e, NULL);
    if (!j) return e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT;
    int64_t end = cr_mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&j->mu);
    uint64_t start = j->turns;
    j->kick = 1;
    pthread_cond_signal(&j->cv);
    int rc = COURIER_OK;
    while (!(j->turns > start && j->idle)) {
        int64_t left = end - cr_mono_ms();
        if (left <= 0) {
            rc = COURIER_E_TIMEOUT;
            break;
        }
        if (left > 200) left = 200; /* a turn may not wake us: look again */
        struct timespec ts = cr_cond_deadline(left * 1000);
        /* Every turn ends with a broadcast: a busy journal is left to its work (kicking it at each
         * turn would make a turn of every turn); only a wait that timed out looks again. */
        if (pthread_cond_timedwait(&j->idle_cv, &j->mu, &ts) == ETIMEDOUT && !j->idle) {
            j->kick = 1;
            pthread_cond_signal(&j->cv);
        }
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int courier_frozen_resend(courier_engine *e, const char *id, courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id || !valid_id(id, strlen(id))) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid freeze id");
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, MDB_RDONLY, &txn);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    uint64_t seq;
    rc = find_seq(j, txn, id, &seq);
    mdb_txn_abort(txn);
    if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    jresend *r = calloc(1, sizeof *r);
    if (!r) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    snprintf(r->id, sizeof r->id, "%s", id);
    pthread_mutex_lock(&j->mu);
    r->next = j->rs_head;
    j->rs_head = r;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

/* A snapshot of a record that does not decode: its id and the fact, so it can be seen and removed. */
static courier_frozen *snap_bad(uint64_t seq, const jstate *st, bool state_ok, const void *key) {
    courier_frozen *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    atomic_init(&f->refs, 1);
    f->seq = seq;
    char idbuf[40];
    if (!state_ok) snprintf(idbuf, sizeof idbuf, "#%llu", (unsigned long long)seq);
    (void)key;
    f->id = state_ok ? cr_strndup(st->id, st->id_len) : cr_strdup(idbuf);
    f->method = cr_strdup("");
    f->url = cr_strdup("");
    f->host = state_ok ? cr_strndup(st->host, st->host_len) : cr_strdup("");
    f->idem = cr_strdup("");
    json_t *o = json_pack("{s:i,s:s,s:b,s:I}", "v", 1, "id", f->id ? f->id : "", "corrupt", 1, "seq", (json_int_t)seq);
    f->json = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    f->info.size = sizeof f->info;
    f->info.last_code = COURIER_E_JOURNAL_CORRUPT;
    if (state_ok) {
        f->info.policy = st->policy;
        f->info.created_ms = st->created_ms;
        f->info.expires_ms = st->expires_ms;
        f->info.attempts = (int)st->attempts;
    }
    if (!f->id || !f->method || !f->url || !f->host || !f->idem || !f->json) {
        courier_frozen_free(f);
        return NULL;
    }
    return f;
}

int courier_frozen_list_requests(courier_engine *e, courier_frozen_list **out, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    cr_journal *j = journal_of(e, err);
    if (!j || !out) return !out ? cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL") : err ? err->code : COURIER_E_CLOSED;
    courier_frozen_list *l = calloc(1, sizeof *l);
    if (!l) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, MDB_RDONLY, &txn);
    if (rc) {
        free(l);
        return store_fail(err, rc, "cannot read the journal");
    }
    MDB_cursor *c;
    rc = mdb_cursor_open(txn, j->env->db_req, &c);
    size_t cap = 0;
    MDB_val k, v;
    int code = COURIER_OK;
    for (rc = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 8) continue;
        uint64_t seq = get_be64(k.mv_data);
        jstate st;
        size_t used = state_decode(v.mv_data, v.mv_size, &st);
        bool ok = used != 0;
        courier_frozen *f = NULL;
        bool bad = !ok;
        if (ok) f = snap_make(seq, (const char *)v.mv_data + used, v.mv_size - used, &st, &bad);
        if (!f && bad) f = snap_bad(seq, &st, ok, NULL);
        if (!f) {
            code = COURIER_E_NO_MEMORY;
            break;
        }
        if (l->count == cap) {
            cap = cap ? cap * 2 : 16;
            courier_frozen **p = realloc(l->items, cap * sizeof *p);
            if (!p) {
                courier_frozen_free(f);
                code = COURIER_E_NO_MEMORY;
                break;
            }
            l->items = p;
        }
        l->items[l->count++] = f;
    }
    if (c) mdb_cursor_close(c);
    mdb_txn_abort(txn);
    if (code == COURIER_OK && rc != MDB_NOTFOUND && rc != 0) code = store_fail(err, rc, "cannot read the journal");
    else if (code) cr_fail(err, code, NULL);
    if (code) {
        courier_frozen_list_free(l);
        return code;
    }
    *out = l;
    return COURIER_OK;
}

size_t courier_frozen_list_count(const courier_frozen_list *l) { return l ? l->count : 0; }

const courier_frozen *courier_frozen_list_at(const courier_frozen_list *l, size_t i) {
    return l && i < l->count ? l->items[i] : NULL;
}

void courier_frozen_list_free(courier_frozen_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) courier_frozen_free(l->items[i]);
    free(l->items);
    free(l);
}

int courier_frozen_get(courier_engine *e, const char *id, courier_frozen **out, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id || !out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "id or out is NULL");
    if (!valid_id(id, strlen(id))) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, MDB_RDONLY, &txn);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    uint64_t seq = 0;
    rc = find_seq(j, txn, id, &seq);
    int code = COURIER_OK;
    if (rc == 0) {
        jstate st;
        MDB_val rv;
        rc = rec_get(j, txn, seq, &st, &rv);
        if (rc == 0) {
            bool bad = true;
            *out = snap_make(seq, rv.mv_data, rv.mv_size, &st, &bad);
            if (!*out && bad) *out = snap_bad(seq, &st, true, NULL);
            if (!*out) code = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        } else if (rc == MDB_CORRUPTED) {
            code = cr_fail(err, COURIER_E_JOURNAL_CORRUPT, "the state of '%.150s' does not decode", id);
        }
    }
    mdb_txn_abort(txn);
    if (code) return code;
    if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    return COURIER_OK;
}

int courier_frozen_remove(courier_engine *e, const char *id, courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "id is NULL");
    size_t n = strlen(id);
    uint64_t seq = 0;
    if (n > 1 && id[0] == '#') seq = strtoull(id + 1, NULL, 10); /* a record whose state is unreadable */
    else if (!valid_id(id, n)) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, 0, &txn);
    if (rc) return store_fail(err, rc, "cannot write the journal");
    if (!seq) rc = find_seq(j, txn, id, &seq);
    jstate st;
    if (rc == 0) rc = st_get(j, txn, seq, &st);
    if (rc == 0) {
        rc = rec_remove(j, txn, seq, &st);
    } else if (rc == MDB_CORRUPTED) {
        /* An unreadable state: remove what can be found by its number. */
        uint8_t kb[8];
        put_be64(kb, seq);
        MDB_val k = {8, kb};
        rc = mdb_del(txn, j->env->db_req, &k, NULL);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    if (rc == 0) rc = mdb_txn_commit(txn);
    else mdb_txn_abort(txn);
    if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    if (rc) return store_fail(err, rc, "cannot write the journal");
    return COURIER_OK;
}

int courier_frozen_remove_all(courier_engine *e, int64_t *removed, courier_error *err) {
    cr_error_clear(err);
    if (removed) *removed = 0;
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, 0, &txn);
    if (rc) return store_fail(err, rc, "cannot write the journal");
    MDB_stat ms;
    rc = mdb_stat(txn, j->env->db_req, &ms);
    MDB_dbi dbs[] = {j->env->db_req, j->env->db_ids, j->env->db_due, j->env->db_hostq};
    for (size_t i = 0; rc == 0 && i < sizeof dbs / sizeof dbs[0]; i++) rc = mdb_drop(txn, dbs[i], 0);
    if (rc == 0) rc = mdb_txn_commit(txn);
    else mdb_txn_abort(txn);
    if (rc) return store_fail(err, rc, "cannot write the journal");
    if (removed) *removed = (int64_t)ms.ms_entries;
    return COURIER_OK;
}

int courier_frozen_count(courier_engine *e, int64_t *count, courier_error *err) {
    cr_error_clear(err);
    if (count) *count = 0;
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!count) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "count is NULL");
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, MDB_RDONLY, &txn);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    MDB_stat ms;
    rc = mdb_stat(txn, j->env->db_req, &ms);
    mdb_txn_abort(txn);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    *count = (int64_t)ms.ms_entries;
    return COURIER_OK;
}

int courier_frozen_last_outcome(courier_engine *e, const char *id, int *code, int *http_status, int64_t *at_ms,
                                courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "id is NULL");
    MDB_txn *txn;
    int rc = jtxn_begin(j->env, MDB_RDONLY, &txn);
    if (rc) return store_fail(err, rc, "cannot read the journal");
    MDB_cursor *c;
    rc = mdb_cursor_open(txn, j->env->db_outcome, &c);
    MDB_val k, v;
    bool found = false;
    for (rc = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_LAST); rc == 0 && !found; rc = mdb_cursor_get(c, &k, &v, MDB_PREV)) {
        json_t *o = json_loadb(v.mv_data, v.mv_size, 0, NULL);
        const char *oid = jstr(o, "id");
        if (oid && strcmp(oid, id) == 0) {
            found = true;
            if (code) *code = (int)json_integer_value(json_object_get(o, "code"));
            if (http_status) *http_status = (int)json_integer_value(json_object_get(o, "status"));
            if (at_ms) *at_ms = json_integer_value(json_object_get(o, "at_ms"));
        }
        json_decref(o);
    }
    if (c) mdb_cursor_close(c);
    mdb_txn_abort(txn);
    if (!found) return cr_fail(err, COURIER_E_NOT_FOUND, "no recorded outcome for '%.150s'", id);
    return COURIER_OK;
}

int courier_frozen_add_listener(courier_engine *e, courier_frozen_event_fn fn, void *user,
                                courier_user_free_fn user_free, uint64_t *out_token) {
    if (out_token) *out_token = 0;
    cr_journal *j = e ? e->journal : NULL;
    if (!j || !fn) {
        if (user_free) user_free(user);
        return !e || !fn ? COURIER_E_INVALID_ARGUMENT : COURIER_E_CLOSED;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (!cb) return rc ? rc : COURIER_E_INVALID_ARGUMENT;
    jlistener *l = calloc(1, sizeof *l);
    if (!l) {
        cr_callback_release(cb);
        return COURIER_E_NO_MEMORY;
    }
    l->cb = cb;
    pthread_mutex_lock(&j->lmu);
    l->token = j->next_token++;
    jlistener **pp = &j->listeners;
    while (*pp) pp = &(*pp)->next;
    *pp = l;
    atomic_fetch_add(&j->nlisteners, 1);
    pthread_mutex_unlock(&j->lmu);
    if (out_token) *out_token = l->token;
    return COURIER_OK;
}

int courier_frozen_remove_listener(courier_engine *e, uint64_t token) {
    cr_journal *j = e ? e->journal : NULL;
    if (!j) return COURIER_E_INVALID_ARGUMENT;
    jlistener *found = NULL;
    pthread_mutex_lock(&j->lmu);
    for (jlistener **pp = &j->listeners; *pp; pp = &(*pp)->next) {
        if ((*pp)->token == token) {
            found = *pp;
            *pp = found->next;
            atomic_fetch_sub(&j->nlisteners, 1);
            break;
        }
    }
    pthread_mutex_unlock(&j->lmu);
    if (!found) return COURIER_E_NOT_FOUND;
    cr_callback_release(found->cb);
    free(found);
    return COURIER_OK;
}

/* ---- snapshots ---- */

const char *courier_frozen_id(const courier_frozen *f) { return f ? f->id : NULL; }
const char *courier_frozen_method(const courier_frozen *f) { return f ? f->method : NULL; }
const char *courier_frozen_url(const courier_frozen *f) { return f ? f->url : NULL; }
const char *courier_frozen_host(const courier_frozen *f) { return f ? f->host : NULL; }
const char *courier_frozen_idempotency_key(const courier_frozen *f) { return f ? f->idem : NULL; }
const char *courier_frozen_json(const courier_frozen *f) { return f ? f->json : NULL; }

const uint8_t *courier_frozen_body(const courier_frozen *f, size_t *len) {
    if (len) *len = f && f->has_body ? f->body_len : 0;
    return f && f->has_body ? (const uint8_t *)f->body : NULL;
}

size_t courier_frozen_header_count(const courier_frozen *f) { return f ? f->headers.count : 0; }

int courier_frozen_header_at(const courier_frozen *f, size_t i, const char **name, const char **value) {
    if (!f) return COURIER_E_INVALID_ARGUMENT;
    if (i >= f->headers.count) return COURIER_E_NOT_FOUND;
    if (name) *name = f->headers.items[i].name;
    if (value) *value = f->headers.items[i].value;
    return COURIER_OK;
}

int courier_frozen_get_info(const courier_frozen *f, courier_frozen_info *out, size_t size) {
    if (!f || !out) return COURIER_E_INVALID_ARGUMENT;
    memcpy(out, &f->info, size < sizeof f->info ? size : sizeof f->info);
    if (size >= sizeof out->size) out->size = size < sizeof f->info ? size : sizeof f->info;
    return COURIER_OK;
}

/* ==== the cookie jar's database (cookies.c) ==================================================== */

int cr_journal_cookie_db(courier_engine *e, MDB_env **env, unsigned *dbi) {
    if (!e->journal || !e->journal->env) return COURIER_E_STORE;
    *env = e->journal->env->env;
    *dbi = e->journal->env->db_cookies;
    return COURIER_OK;
}
