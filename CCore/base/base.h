/*
 * base/base.h — the bottom layer: what every file of the core may use (errors, buffers, name/value
 * lists, strings and encodings, clocks, hashing, LMDB file checks, feature-state hooks, callback
 * registrations, id sets, logging and lifecycle events). Never installed, never exported: every
 * function here is built with hidden visibility (only COURIER_API symbols leave the library).
 *
 * The layers, bottom to top, each with its header of what the layers above may use, each header
 * including the one below: base/base.h, json/json_internal.h, http/http.h, cache/cache.h,
 * journal/journal.h, engine/engine.h. A file includes its own layer's header (internal.h includes
 * them all, for code that stands on the whole core). scripts/check-layers holds the rule that a
 * file only calls into its own layer or lower ones.
 */
#ifndef COURIER_BASE_H
#define COURIER_BASE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "courier.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

/* Everything this header declares stays inside the library, however the core is compiled (CMake
 * adds -fvisibility=hidden too; SwiftPM cannot, so the sources decide). Only what include/courier.h
 * marks COURIER_API is exported. The pragma covers declarations, so no system header is included
 * between it and the pop at the end; a file that defines a non-static function declares it here
 * (or in cache_internal.h, which does the same) first. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

#define CR_HIDDEN __attribute__((visibility("hidden")))
/* The thread-locals a request or a cache get touches are initial-exec: read at a fixed offset of the
 * thread pointer, with no __tls_get_addr call (a send catches raises seven times; a get picks its
 * read slot; Benchmarks/callgrind). glibc keeps room in the static TLS block for a few bytes of a
 * library opened later with dlopen (Python's ctypes), which is all these need. */
#if defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define CR_TLS_FAST __attribute__((tls_model("initial-exec")))
#else
#define CR_TLS_FAST
#endif

#define CR_DEFAULT_TIMEOUT_MS 60000L
#define CR_DEFAULT_MAX_PER_HOST 5L
#define CR_DEFAULT_MAX_TOTAL 64L
#define CR_DEFAULT_MAX_RESPONSE ((int64_t)64 * 1024 * 1024)
/* Defaults of settings a binding may restate, told by courier_setting_default (util.c) and used
 * by the files that apply them. */
#define CR_DEFAULT_RETRY_MAX_RETRIES 3
#define CR_DEFAULT_RETRY_BASE_DELAY_MS 500L
#define CR_DEFAULT_RETRY_MAX_DELAY_MS 30000L
#define CR_DEFAULT_FROZEN_CONCURRENCY 4
#define CR_DEFAULT_FROZEN_BACKOFF_BASE_MS 1000L
#define CR_DEFAULT_FROZEN_BACKOFF_MAX_MS 300000L
#define CR_DEFAULT_MONITOR_INTERVAL_MS 5000L
#define CR_DEFAULT_LOG_FILE_MAX_BYTES ((int64_t)1 << 20)
#define CR_DEFAULT_LOG_FILE_MAX_FILES 5
#define CR_DEFAULT_STREAM_BUFFER_BYTES (1 << 20) /* a stream's unread body before its transfer pauses */
#define CR_DEFAULT_JSON_MAX_DEPTH 512

/* ---- errors (util.c) ---------------------------------------------------------------------- */

/* Fills *err (may be NULL) with code and a formatted message; returns code. */
CR_HIDDEN int cr_fail(courier_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The growth rule (docs/ABI.md): a struct crossing the ABI begins with `size_t size`, set by the
 * caller for a struct it allocates. CR_SIZED_OK: a struct at least as large as 0.2.0's (the first
 * version of each; when one grows, its check names the end of its 0.2.0 fields). CR_SIZED_OUT
 * writes a full struct's fields that end within the caller's size, keeping that size. */
#define CR_SIZED_OK(p, type) ((p) && (p)->size >= sizeof(type))
#define CR_SIZED_OUT(out, full)                                                                    \
    do {                                                                                           \
        size_t cr_size_ = (out)->size;                                                             \
        memcpy((out), &(full), cr_size_ < sizeof(full) ? cr_size_ : sizeof(full));                 \
        (out)->size = cr_size_;                                                                    \
    } while (0)
/* A caller's struct read into `local` (already holding the defaults): the fields within its size. */
#define CR_SIZED_IN(local, in)                                                                     \
    do {                                                                                           \
        size_t cr_size_ = (in)->size;                                                              \
        memcpy(&(local), (in), cr_size_ < sizeof(local) ? cr_size_ : sizeof(local));               \
        (local).size = sizeof(local);                                                              \
    } while (0)
/* Clears *err (may be NULL) to "no error". */
CR_HIDDEN void cr_error_clear(courier_error *err);

/* ---- errors raised by user code (user_error.c) --------------------------------------------- */

/* One send's slot for an error a callback raised (courier_raise): empty while code is 0. */
typedef struct cr_raised {
    int code;
    void *user;
    courier_user_free_fn user_free;
    char *message; /* NULL: none */
} cr_raised;
/* Points this thread's courier_raise at `slot` (NULL: nowhere) around a user callback; returns
 * the previous target, to be restored after the call. */
CR_HIDDEN cr_raised *cr_raise_catch(cr_raised *slot);
/* Raises into a given slot (courier_call_raise, from any thread). */
CR_HIDDEN int cr_raise_into(cr_raised *slot, int code, const char *message, void *user, courier_user_free_fn user_free);
/* Releases what the slot holds (its user_free runs) and empties it. */
CR_HIDDEN void cr_raise_release(cr_raised *slot);
/* Moves src into dst (dst's former content released); src is left empty. */
CR_HIDDEN void cr_raise_move(cr_raised *dst, cr_raised *src);
/* Hands the slot's user data (and message) to err, which now owns it; err NULL: released. */
CR_HIDDEN void cr_raise_attach(cr_raised *slot, courier_error *err);
/* Releases the user data err holds, if any. */
CR_HIDDEN void cr_error_release_user(courier_error *err);
/* Forgets the user data of err without releasing it (it was copied to an owner). */
CR_HIDDEN void cr_error_forget_user(courier_error *err);

/* ---- growable byte buffer ---------------------------------------------------------------- */

typedef struct cr_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} cr_buf;

CR_HIDDEN int cr_buf_reserve(cr_buf *b, size_t extra);
CR_HIDDEN int cr_buf_append(cr_buf *b, const void *data, size_t len);
CR_HIDDEN int cr_buf_append_str(cr_buf *b, const char *s);
CR_HIDDEN int cr_buf_append_char(cr_buf *b, char c);
CR_HIDDEN void cr_buf_free(cr_buf *b);
/* Hands the buffer's memory to the caller (never NULL on success: "" for empty). */
CR_HIDDEN char *cr_buf_take(cr_buf *b, size_t *len);

/* ---- ordered name/value list -------------------------------------------------------------- */

typedef struct cr_kv {
    char *name;  /* owns one allocation holding "name\0value\0" */
    char *value; /* points into it: never freed or reallocated on its own */
} cr_kv;

typedef struct cr_kvlist {
    cr_kv *items;
    size_t count;
    size_t cap;
    char *block;      /* when set: one allocation that items added in bulk point into (not freed */
    size_t block_len; /* one by one); items added later own their own allocation as usual */
} cr_kvlist;

CR_HIDDEN int cr_kvlist_add(cr_kvlist *l, const char *name, size_t name_len, const char *value, size_t value_len);
/* Appends an item whose name and value already lie in l->block (NUL-terminated there; not copied,
 * freed with the block). COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_kvlist_add_in_block(cr_kvlist *l, char *name, char *value);
CR_HIDDEN int cr_kvlist_copy(cr_kvlist *dst, const cr_kvlist *src);
/* Removes every item whose name equals `name` case-insensitively. */
CR_HIDDEN void cr_kvlist_remove(cr_kvlist *l, const char *name);
/* First value whose name equals `name` case-insensitively, or NULL. */
CR_HIDDEN const char *cr_kvlist_get(const cr_kvlist *l, const char *name);
CR_HIDDEN void cr_kvlist_clear(cr_kvlist *l);
/* Replaces the value of item i (name and value share one allocation, owned through `name`). */
CR_HIDDEN int cr_kvlist_set_value(cr_kvlist *l, size_t i, const char *value, size_t value_len);

/* ---- strings and encodings ----------------------------------------------------------------- */

CR_HIDDEN char *cr_strdup(const char *s);                 /* NULL in, NULL out */
/* calloc(1, size) for objects made per request: glibc's calloc always takes the allocator's slow
 * path, malloc serves small sizes from the thread's cache. The empty asm keeps the compiler from
 * folding the malloc and the memset back into a calloc (clang and gcc do at -O2: callgrind showed
 * calloc, 360 instructions, under courier_request_new and cr_transfer_prepare). */
static inline void *cr_zalloc(size_t size) {
    void *p = malloc(size);
#if defined(__GNUC__) || defined(__clang__)
    __asm__ __volatile__("" : : "r"(p) : "memory");
#endif
    if (p) memset(p, 0, size);
    return p;
}
CR_HIDDEN char *cr_strndup(const char *s, size_t len);
/* Replaces *slot with a copy of s (NULL clears). Returns COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_set_string(char **slot, const char *s);
CR_HIDDEN bool cr_utf8_valid(const char *s, size_t len);
/* A header name is an RFC 9110 token. */
CR_HIDDEN bool cr_is_token(const char *s, size_t len);
/* Checks a header for courier_request_add_header: returns OK or the code. */
CR_HIDDEN int cr_check_header(const char *name, size_t name_len, const char *value, size_t value_len);
/* Checks a parameter: UTF-8, no NUL. */
CR_HIDDEN int cr_check_param(const char *name, size_t name_len, const char *value, size_t value_len);
/* Appends s percent-encoded (RFC 3986 unreserved characters kept). */
CR_HIDDEN int cr_percent_encode(cr_buf *out, const char *s, size_t len);
CR_HIDDEN int cr_base64_encode(cr_buf *out, const void *data, size_t len);
/* The 64-bit FNV-1a hash of len bytes. */
CR_HIDDEN uint64_t cr_fnv1a64(const void *data, size_t len);
/* Checks that url parses as an absolute http or https URL. */
CR_HIDDEN bool cr_url_valid(const char *url);
/* Checks a path joined to an already checked base URL: no spaces or control bytes. */
CR_HIDDEN bool cr_url_path_valid(const char *path);
/* The length of the "scheme://" that s starts with (RFC 3986 section 3.1's scheme, ALPHA *( ALPHA /
 * DIGIT / "+" / "-" / "." ), then "://"), else 0. The one test of whether a request target, key or
 * logged URL is absolute: decided by its start alone, since a path's query may hold "://"
 * ("/go?to=http://x"). */
CR_HIDDEN size_t cr_url_scheme_len(const char *s);

/* ---- files (util.c) ------------------------------------------------------------------------ */

/* Reads a whole file (at most max bytes) into *out (new, NUL-terminated: free), its length in *len
 * (may be NULL). COURIER_E_NOT_FOUND (no such file; err->os_error), COURIER_E_INVALID_ARGUMENT
 * (unreadable), COURIER_E_TOO_LARGE; `what` names the file in err's message ("mock file"). */
CR_HIDDEN int cr_read_file(const char *path, const char *what, int64_t max, char **out, size_t *len,
                           courier_error *err);

/* ---- Redis (redis.c): the floor of the stores on Redis (cache/store_redis.c, the journal's) --------- */

/* A store URL: redis://[[user]:password@]host[:port][/db][?timeout_ms=N] (rediss:// for TLS), or a
 * cluster's: redis+cluster://[[user]:password@]host:port[,host:port...][/0][?timeout_ms=N&replica_reads=1]
 * (the seed nodes; docs/design/redis-cluster.md). */
typedef struct cr_redis_seed {
    char *host;
    int port;
} cr_redis_seed;
typedef struct cr_redis_url {
    char *host;     /* without the brackets of an IPv6 address (a cluster: the first seed's) */
    int port;       /* 6379 when not given */
    int db;         /* 0 when not given (always 0 in a cluster) */
    char *user;     /* NULL: AUTH with the password alone */
    char *password; /* NULL: no AUTH */
    bool tls;       /* rediss:// */
    int64_t timeout_ms; /* 0 when not given */
    bool cluster;       /* redis+cluster:// */
    bool replica_reads; /* cluster: ?replica_reads=1, reads marked CR_REDIS_READ go to a replica (READONLY) */
    int nseeds;         /* cluster: the seed nodes, seeds[0..nseeds) (new, freed by cr_redis_url_free) */
    cr_redis_seed *seeds;
} cr_redis_url;

/* Whether a store setting names Redis: it starts with "redis://", "rediss://" or "redis+cluster://"
 * (any case). */
CR_HIDDEN bool cr_redis_is_url(const char *s);
/* Whether a store setting (cache or journal) that is neither a Redis URL nor "unix://..." looks
 * like a URL or a mistyped one rather than a directory: a scheme (RFC 3986 section 3.1's syntax)
 * then ":/" ("http://h", "redis:/h") or then "//" ("redis//h", which would otherwise be the
 * relative directory "redis/h"). Such settings are refused (COURIER_E_INVALID_ARGUMENT); a
 * directory of that shape is written "./redis//h". NULL: false. */
CR_HIDDEN bool cr_store_setting_mistyped(const char *s);
/* Whether this build has Redis (hiredis; CMake's COURIER_REDIS, SwiftPM's trait Redis). */
CR_HIDDEN bool cr_redis_available(void);
/* Parses a store URL into *out (release with cr_redis_url_free; zeroed on failure). Errors:
 * COURIER_E_INVALID_ARGUMENT (not of that shape; user and password may be %-escaped),
 * COURIER_E_REDIS_UNSUPPORTED (rediss://: the hiredis this builds with has no TLS),
 * COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_redis_url_parse(const char *url, cr_redis_url *out, courier_error *err);
CR_HIDDEN void cr_redis_url_free(cr_redis_url *u);

/* A small pool of connections to one server, shared by any threads. Connections are made on
 * first use with the timeout (the URL's timeout_ms, else timeout_ms, else the engine default),
 * which also bounds every read and write; then AUTH and SELECT. After a failed connect, calls fail
 * at once with COURIER_E_REDIS for a second rather than each waiting the timeout again. */
typedef struct cr_redis cr_redis;
struct redisReply; /* hiredis' (<hiredis/hiredis.h>, included by the files that read replies) */

/* *out is new (no connection yet): release with cr_redis_close. Errors: those of
 * cr_redis_url_parse, COURIER_E_REDIS_UNSUPPORTED (built without Redis). */
CR_HIDDEN int cr_redis_open(const char *url, int64_t timeout_ms, cr_redis **out, courier_error *err);
CR_HIDDEN void cr_redis_close(cr_redis *r); /* NULL-safe; no call may be running */
CR_HIDDEN const char *cr_redis_host(const cr_redis *r);
CR_HIDDEN int cr_redis_port(const cr_redis *r);
CR_HIDDEN int cr_redis_db(const cr_redis *r);

/* One command: argc arguments with their lengths (binary-safe). */
typedef struct cr_redis_cmd {
    int argc;
    const char **argv;
    const size_t *argvlen;
} cr_redis_cmd;

/* cr_redis_run flag: never send the commands a second time (they are not safe to repeat). In a
 * cluster they are still sent to another node when the first could not be reached (nothing sent),
 * or after MOVED/ASK (Redis did not run them). */
#define CR_REDIS_NO_RETRY 0x1
/* cr_redis_run flag: the commands only read; with replica_reads=1 in a cluster's URL they go to a
 * replica of their slot's master (READONLY: possibly behind the master). Ignored otherwise. */
#define CR_REDIS_READ 0x2

/* Sends n commands in one pipeline on one connection and reads their n replies into replies[]
 * (new: release with cr_redis_replies_free; an error reply is a reply: see cr_redis_reply_check).
 * When the connection turns out broken (the server restarted, closed an idle connection) it
 * reconnects and sends them once more, unless CR_REDIS_NO_RETRY; never after a timeout. Errors:
 * COURIER_E_REDIS (cannot connect, AUTH or SELECT refused, no answer within the timeout:
 * os_error ETIMEDOUT, a broken connection; replies[] all NULL), COURIER_E_REDIS_UNSUPPORTED.
 * In a cluster (redis_cluster.c) each command goes to the master of its key's slot (commands
 * without a key go with the command before them, a MULTI..EXEC goes whole; SCRIPT to every
 * master), one pipeline per node, MOVED/ASK/TRYAGAIN followed (at most CR_REDIS_MAX_REDIRECTS
 * redirections per command, within the timeout); a lost node is looked for again in a fresh map
 * (a promoted replica), and while the map still names it the call fails with COURIER_E_REDIS at
 * once, as with one server down. */
CR_HIDDEN int cr_redis_run(cr_redis *r, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies, int flags,
                           courier_error *err);
/* The number of shards (masters) to walk with cr_redis_run_shard: 1 for one server; a cluster's
 * masters by their first slot (learning the map first: COURIER_E_REDIS when no node answers). */
CR_HIDDEN int cr_redis_shards(cr_redis *r, int *count, courier_error *err);
/* cr_redis_run on shard i (0..count) for commands without a key (SCAN): one server, or that master
 * of the cluster's current map (COURIER_E_REDIS when the map changed under the walk: i gone). */
CR_HIDDEN int cr_redis_run_shard(cr_redis *r, int shard, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies,
                                 int flags, courier_error *err);
CR_HIDDEN void cr_redis_replies_free(struct redisReply **replies, size_t n);
/* COURIER_OK for a reply that is not an error; COURIER_E_REDIS naming `what` and Redis' message. */
CR_HIDDEN int cr_redis_reply_check(const struct redisReply *rep, const char *what, courier_error *err);
struct redisContext; /* hiredis' */
/* A connection of the caller's own, outside the pool, for a read that blocks until the server has
 * something to say (SUBSCRIBE): to the one server, or to a cluster's seed node number `which`
 * modulo their count (classic Pub/Sub reaches every node of a cluster, so any node will do; a
 * caller tries the next after a failure). Made within the timeout, then AUTH (no SELECT: Pub/Sub
 * does not depend on the database); then no read timeout, and TCP keepalive on, so a peer that
 * vanished is noticed. *out is new (redisFree), used by one thread at a time; a thread that must
 * end a blocked read from another calls shutdown() on its fd. Any thread. Errors: COURIER_E_REDIS
 * (cannot connect, AUTH refused), COURIER_E_REDIS_UNSUPPORTED (built without Redis). */
CR_HIDDEN int cr_redis_connect_alone(const cr_redis *r, int which, struct redisContext **out, courier_error *err);

/* ---- character sets (charset.c) ----------------------------------------------------------- */

/* NULL, "UTF-8" or "UTF8" (any case): no conversion. */
CR_HIDDEN bool cr_charset_is_utf8(const char *charset);
/* COURIER_OK when iconv converts between UTF-8 and `charset`, else COURIER_E_UNKNOWN_CHARSET. */
CR_HIDDEN int cr_charset_check(const char *charset);
/* Appends s (UTF-8) converted to `charset` / s (in `charset`) converted to UTF-8. Errors:
 * COURIER_E_CHARSET (a character the target cannot hold, bytes not valid in the source),
 * COURIER_E_UNKNOWN_CHARSET, COURIER_E_NO_MEMORY. On failure `out` may hold a part. */
CR_HIDDEN int cr_charset_from_utf8(cr_buf *out, const char *charset, const char *s, size_t len);
CR_HIDDEN int cr_charset_to_utf8(cr_buf *out, const char *charset, const char *s, size_t len);
/* The charset parameter of a Content-Type value into out: 1 found, 0 none, -1 longer than size. */
CR_HIDDEN int cr_content_type_charset(const char *content_type, char *out, size_t size);

/* ---- clocks (util.c) ------------------------------------------------------------------------ */

/* Milliseconds from a monotonic clock. */
CR_HIDDEN int64_t cr_mono_ms(void);
/* Initialises a condition variable whose timed waits run on the clock cr_cond_deadline reads:
 * CLOCK_MONOTONIC where pthread_condattr_setclock exists, CLOCK_REALTIME on macOS, which lacks it
 * (and whose timed waits cannot use another clock). */
CR_HIDDEN void cr_cond_init(pthread_cond_t *cv);
/* The absolute time `us` microseconds from now, for pthread_cond_timedwait on a condition variable
 * made by cr_cond_init. */
CR_HIDDEN struct timespec cr_cond_deadline(int64_t us);

/* ---- threads (util.c) ----------------------------------------------------------------------- */

/* Names the calling thread (at most 15 bytes; longer names are cut), so top -H, ps -L, perf, gdb
 * and /proc/PID/task/TID/comm tell the engine's threads apart: courier-worker, courier-journal,
 * courier-net, courier-probe, courier-json. Without it a thread keeps its creator's name (under
 * Swift, a dispatch pool thread's "...default-qos"). Best effort: a platform without
 * pthread_setname_np leaves the name as it was. */
CR_HIDDEN void cr_thread_set_name(const char *name);
/* Names another thread, from its creator right after pthread_create (Linux; elsewhere only a thread
 * names itself): its name is then right before it first runs (the journal thread, named by itself
 * only, was still its creator's name when a loaded machine had not yet run it). */
CR_HIDDEN void cr_thread_name(pthread_t thread, const char *name);

/* ---- hashing (hash.c) --------------------------------------------------------------------------- */

/* A fast 64-bit hash (the XXH64 algorithm). */
CR_HIDDEN uint64_t cr_hash64(const void *data, size_t len, uint64_t seed);
/* The 128-bit identity of a key string: two 64-bit hashes with different seeds, big-endian. */
CR_HIDDEN void cr_key_hash(const char *key, size_t len, uint8_t out[16]);
/* 32 lowercase hex digits + NUL. */
CR_HIDDEN void cr_key_hex(const uint8_t hash[16], char out[33]);

/* ---- LMDB data files (lmdb_file.c) ----------------------------------------------------------- */

/* Reads the meta pages of "<dir>/data.mdb" without mapping it. 0 when the file is absent, empty
 * or as long as its newer meta page says; MDB_INVALID with *why (static text) when it must not be
 * mapped: cut short (LMDB would raise SIGBUS on the pages past its end), or not an LMDB file; an
 * errno value when the file cannot be read (EISDIR for a directory in its place). */
CR_HIDDEN int cr_lmdb_file_check(const char *dir, const char **why);
struct MDB_env;
/* Pads an open environment's data file (a hole, no disk blocks) to 256 KiB past its last used
 * page, so that a damaged page near its end, which LMDB follows past the end, reads zeros instead
 * of raising SIGBUS; sets *largest to the file's size. Call with LMDB's writer lock held (in a
 * write transaction) before reading the trees. 0 or an errno/LMDB code (usable without it). */
CR_HIDDEN int cr_lmdb_file_pad(struct MDB_env *env, int64_t *largest);
/* 0 while the data file is at least *largest bytes long (the most seen; raised as it grows),
 * MDB_CORRUPTED when it got shorter (cut from outside while open: LMDB never shortens it). Then
 * it is padded back to *largest, so no process reading it raises SIGBUS at the missing pages:
 * they read as zeros, which LMDB reports as MDB_CORRUPTED. One statx of the size alone (about 0.6 us here; lmdb_file.c, file_size). */
CR_HIDDEN int cr_lmdb_file_intact(struct MDB_env *env, int64_t *largest);
/* A store's marker file `marker` in dir is written once the store has opened (cr_lmdb_mark); a
 * fresh store has none. With the marker there, a missing or empty data.mdb was lost from outside
 * (LMDB writes its meta pages when it creates the file): cr_lmdb_data_lost says so, for the store
 * to report it instead of letting LMDB start afresh without a word. */
CR_HIDDEN bool cr_lmdb_data_lost(const char *dir, const char *marker);
/* Writes the marker (text, synced) if it is not there; best effort. */
CR_HIDDEN void cr_lmdb_mark(const char *dir, const char *marker, const char *text);
struct MDB_txn;
/* Walks every page reachable from the newer meta page (the free list, the main database, every
 * named database) as mdb_chk does, through a read-only map of its own bounded by the file's size:
 * page numbers in range and reached once, page kinds, bounds, node offsets and sizes, overflow
 * counts and free-list records as LMDB writes them (lmdb_file.c says exactly what). 0, or
 * MDB_CORRUPTED with *why (static text) naming the damage, or an errno/LMDB code. Call at open,
 * with LMDB's writer lock held (in a write transaction) after cr_lmdb_file_pad, before writing. */
CR_HIDDEN int cr_lmdb_walk(struct MDB_env *env, const char **why);
struct MDB_val;
/* The first and last records of database dbi: 0 when they have the shapes the store writes (its
 * predicate; NULL: only read them), MDB_CORRUPTED when not, or LMDB's code. */
CR_HIDDEN int cr_lmdb_check_ends(struct MDB_txn *txn, unsigned dbi,
                                 bool (*ok)(const struct MDB_val *k, const struct MDB_val *v));
CR_HIDDEN int cr_lmdb_check_names(struct MDB_txn *txn);

/* ---- a feature's state on a configuration, a request or a transfer ----------------------------- */

/* The hooks of a feature's state (the cache's, the scheduler's, the JSON mapping's, ...): the layer
 * that holds the state (request.c) copies and frees it through them, never naming a function of the
 * feature, which may sit in a layer above. The feature sets them where it makes the state. */
typedef struct cr_ext_ops {
    void *(*copy)(const void *state); /* a deep copy; NULL on no memory */
    void (*free)(void *state);
} cr_ext_ops;

/* The first member of every such state. */
typedef struct cr_ext {
    const cr_ext_ops *ops;
} cr_ext;

/* NULL-safe. */
static inline void cr_ext_free(void *state) {
    if (state) (*(const cr_ext_ops *const *)state)->free(state);
}
/* A copy of a state (NULL in: NULL out; NULL also on no memory). */
static inline void *cr_ext_copy(const void *state) {
    return state ? (*(const cr_ext_ops *const *)state)->copy(state) : NULL;
}

/* ---- callback registrations (shared, reference counted) ------------------------------------ */

typedef struct cr_callback {
    atomic_int refs;
    void (*fn)(void); /* cast to the real type at the call site */
    void *user;
    courier_user_free_fn user_free;
} cr_callback;

/* A new registration with one reference, or NULL (fn NULL, or no memory: then user_free(user)
 * has already been called if fn was not NULL, so the user pointer never leaks). */
CR_HIDDEN cr_callback *cr_callback_new(void (*fn)(void), void *user, courier_user_free_fn user_free, int *code);
/* The setters' pattern: replaces *slot with a registration of (fn, user, user_free), releasing the
 * old one; fn NULL clears it (and releases user at once). slot NULL (the owner was NULL): user is
 * released and COURIER_E_INVALID_ARGUMENT returned. */
CR_HIDDEN int cr_callback_set(cr_callback **slot, void (*fn)(void), void *user, courier_user_free_fn user_free);
CR_HIDDEN cr_callback *cr_callback_retain(cr_callback *cb);
CR_HIDDEN void cr_callback_release(cr_callback *cb);

/* ---- a set of uint64 ids (open addressing) -------------------------------------------------- */

typedef struct cr_idset {
    uint64_t *slots; /* 0 = empty, UINT64_MAX = deleted */
    size_t cap;      /* power of two */
    size_t used;     /* live + deleted */
    size_t live;
} cr_idset;

CR_HIDDEN int cr_idset_add(cr_idset *s, uint64_t id);
CR_HIDDEN bool cr_idset_has(const cr_idset *s, uint64_t id);
CR_HIDDEN bool cr_idset_remove(cr_idset *s, uint64_t id);
CR_HIDDEN void cr_idset_free(cr_idset *s);

/* Types of the layers above (defined in http/http.h), opaque here. */
typedef struct cr_transfer cr_transfer;

/* ==== The engine's state as the layers below the engine read it ================================= */

/* The part of the engine's state (struct courier_engine, engine/engine.h) that base, http, cache
 * and journal read: the engine embeds it as its first member and fills it at open; a lower layer
 * reaches it with cr_core(e) and never sees struct courier_engine. What points up is opaque here
 * (each handle's struct is its own layer's) or a function pointer the engine sets: the lower
 * layers call no engine function. */
#define CR_URLH_SLOTS 32
typedef struct cr_engine_core {
    courier_config *config; /* owned copy, read-only after open (its struct is http's) */
    cr_callback *clock;     /* the configuration's clock (courier_clock_fn; NULL: the system's), borrowed */
    /* The scheduler's prepare-time steps (cr_sched_prepare, cr_sched_finish_prepare), set at open:
     * cr_transfer_prepare (request.c) runs them through these, never naming a layer above it. */
    int (*sched_prepare)(courier_engine *e, const courier_request *r, cr_transfer *t, courier_outgoing *o,
                         courier_error *err);
    int (*sched_finish_prepare)(const courier_request *r, cr_transfer *t, courier_error *err);
    char *store_dir;   /* the store directory (journal, cache, cookie jar under it) */
    int store_is_temp; /* made for this engine, removed at close */
    pthread_mutex_t lock; /* the engine's lock */
    int closing;          /* guarded by lock: the engine is closing */
    bool proxy_env;   /* the environment named a proxy when the engine opened */
    atomic_uint_fast64_t next_id; /* request ids (a background revalidation takes one too) */
    atomic_long queued;           /* submitted, not yet on the worker */
    CURLM *multi;                 /* the worker's curl multi handle (curl_multi_wakeup from any thread) */
    struct cr_urlh *urlh[CR_URLH_SLOTS]; /* worker only: recently sent URLs, parsed (transport.c) */
    char accept_encoding[64]; /* "Accept-Encoding: <what this libcurl decodes>", sent as a header
                                 line (cheaper per request than curl's own, which it then skips) */
    struct cr_cache *cache; /* the cache (cache/cache.c); the store opens on first use */
    _Atomic(struct cr_obs *) obs; /* logging and monitors (log.c), made on first use; any thread */
    struct cr_journal *journal;   /* frozen requests (journal/); NULL before open, after close */
    struct cr_jar *jar;           /* the cookie jar (cookies.c); NULL when off */
    struct cr_pool *pool;         /* the connection pool's figures (http/pool.c); NULL: not kept */
    struct cr_hsts *hsts;         /* the HSTS list (hsts.c); NULL when off */
    struct courier_challenge *challenges; /* guarded by lock: asked, not answered (auth.c) */
    struct courier_challenge *answered;   /* guarded by lock: answered, for the worker */
} cr_engine_core;

/* The core of an engine (its first member; engine/engine.h asserts it), const when e is. Only an
 * engine pointer compiles (no default branch). */
#define cr_core(e)                                                                            \
    _Generic((e), courier_engine *: (cr_engine_core *)(void *)(e),                          \
             const courier_engine *: (const cr_engine_core *)(const void *)(e))

/* ==== Logging and event monitors (log.c) ======================================================= */

/* Request lifecycle hooks that take a transfer (will send, sent, progress, from the cache, retried,
 * finished) are http's (http/http.h, http/lifecycle.c); they emit through the functions below. */
/* Whether a monitor or a sink listens at all (one atomic load): the hooks return at once when not. */
CR_HIDDEN bool cr_event_listening(courier_engine *e);
/* The monotonic clock in nanoseconds (an event's duration). */
CR_HIDDEN int64_t cr_mono_ns(void);
/* A request was written to the journal (request_id may be 0 for one that never had an id). */
CR_HIDDEN void cr_event_frozen(courier_engine *e, uint64_t request_id, const char *method, const char *url);
/* Any event: for callers whose event has no transfer. ev->size must be sizeof(courier_event). */
CR_HIDDEN void cr_event_emit(courier_engine *e, const courier_event *ev);
/* The same, with the cache's reason for ev->response (a FINISHED or FROM_CACHE line prints it; base
 * does not read the response). */
CR_HIDDEN void cr_event_emit_reason(courier_engine *e, const courier_event *ev, int cache_reason);
/* Whether a monitor or a sink would receive an event of this kind now (e.g. to install curl's
 * progress callback only when PROGRESS events are wanted). */
CR_HIDDEN bool cr_event_wants(courier_engine *e, int kind);
/* Whether a line of `level` would reach a sink (to skip costly formatting). */
CR_HIDDEN bool cr_log_enabled(courier_engine *e, int level);
/* A line of the engine's own, e.g. cr_log(e, COURIER_LOG_WARNING, "cache", "moved aside %s", path). */
CR_HIDDEN void cr_log(courier_engine *e, int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Lines of a component (courier_log_component): whether one of `level` would reach a sink, and
 * one with the standard keys, "component" and the given fields. request_id 0: none. */
typedef struct cr_logf {
    const char *key;
    const char *str; /* a string field when not NULL */
    int64_t num;     /* else a number, or a boolean when is_bool */
    int is_bool;
} cr_logf;
CR_HIDDEN bool cr_log_wants(courier_engine *e, int component, int level);
CR_HIDDEN void cr_log_fields(courier_engine *e, int component, int level, const char *event, uint64_t request_id,
                             const char *message, const cr_logf *fields, size_t nfields);
/* Releases the engine's logging state (sinks closed, monitors' user_free run). engine_free calls
 * it after the worker has stopped. */
CR_HIDDEN void cr_obs_free(courier_engine *e);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_BASE_H */
