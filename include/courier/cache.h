/*
 * courier/cache.h — the cache: policies, keys, expiry, the manager.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_CACHE_H
#define COURIER_INC_CACHE_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Cache: policies, keys, expiry, the manager                                                  */
/* ========================================================================================== */
/*
 * Responses are kept in an LMDB store in "<store dir>/cache", shared by every engine and process
 * that opens the same store directory. A request names a cache policy (the seeds' cacheId); the
 * engine computes the request's cache key and asks the policy before sending. A hit completes
 * through the normal completion (on the worker thread) without any network traffic, with the
 * response marked from-cache. A response is written only after it passed the request's judgement
 * (HTTP status < 400 and the validator), after which the completion runs: when a completion
 * runs, its entry is already readable. Failures are never cached, except that the HTTP policies
 * store the error statuses RFC 9111 allows (a 404 or 503 with explicit freshness, a 404, 405, 410,
 * 414 or 501 with heuristic freshness); such an entry answers with the same COURIER_E_HTTP_STATUS
 * and attached response as the network's answer did. A cache the configuration names (a cache
 * store, or a default policy other than COURIER_CACHE_NO_CACHE) is opened by courier_engine_open,
 * which fails with the store's error when it cannot be opened; otherwise the cache opens at first
 * use. A cache that cannot be opened there, or written, never fails a request (the request is sent
 * without the cache, reason "none"); the engine's logger says why (component cache, event
 * "cache_store_failed", level error) and the manager functions return COURIER_E_STORE. The library
 * never writes to stderr itself: what the store has to say (moved aside, upgraded, broken while
 * open) is a line on the engine's logger.
 *
 * The default key is: METHOD " " absolute URL (the target joined to the request's own base URL,
 * else the engine's; scheme and host lowercased; no fragment) "?" the parameters of the query
 * string, the engine's default parameters and the request's, percent-encoded, minus the names of
 * the request's key filter, sorted; then "\nbody:<hash>" when a raw body is set, then
 * "\nsensitive:<data>" when the request has sensitive data. The customize callback does not
 * change the key. Keys are stored by a 128-bit hash; the key text is kept in the entry.
 */

/* Cache policies. Ids 5..99 are reserved; ids >= COURIER_CACHE_POLICY_USER_MIN are user-defined
 * (courier_engine_register_cache_policy). */
typedef enum courier_cache_policy {
    COURIER_CACHE_POLICY_DEFAULT = -1, /* courier_request_set_cache_policy: the engine's policy */
    COURIER_CACHE_NO_CACHE = 0,    /* neither reads nor writes (the default) */
    COURIER_CACHE_CACHE_FIRST = 1, /* a fresh entry answers without the network; else the network
                                      answers and the response is written */
    COURIER_CACHE_WRITE_ONLY = 2,  /* never reads; writes what the network returns */
    COURIER_CACHE_HTTP = 3,        /* RFC 9111 for GET, as a private cache (a browser's): request
                                      and response Cache-Control, Expires, Age, heuristic freshness
                                      (10% of the time since Last-Modified, at most 24 h) for the
                                      heuristically cacheable statuses, any final status with
                                      explicit freshness (a stored 404 answers as a network 404
                                      does: COURIER_E_HTTP_STATUS with the response), ETag /
                                      Last-Modified revalidation with 304 and HEAD updates, Vary,
                                      stale-while-revalidate and stale-if-error (RFC 5861), and
                                      invalidation by a non-error answer to an unsafe method (POST,
                                      PUT, DELETE, PATCH or unknown) of its URL and the same-origin
                                      URLs of its Location and Content-Location. 206 answers are not
                                      stored. docs/design/cache.md lists every rule with its test. */
    COURIER_CACHE_HTTP_SHARED = 4  /* the same as a shared cache (a proxy's, RFC 9111 section 1):
                                      s-maxage and proxy-revalidate apply, "private" answers are not
                                      stored (private="field" drops the fields), and an answer to a
                                      request with Authorization is stored only when it says
                                      must-revalidate, public or s-maxage (section 3.5) */
} courier_cache_policy;
#define COURIER_CACHE_POLICY_USER_MIN 100

/* Where a response's body came from (courier_response_cache_status). */
typedef enum courier_cache_status {
    COURIER_CACHE_STATUS_NETWORK = 0,     /* the network (or no cache involved) */
    COURIER_CACHE_STATUS_HIT = 1,         /* a fresh entry, without the network */
    COURIER_CACHE_STATUS_REVALIDATED = 2, /* a stored entry the server confirmed with 304 */
    COURIER_CACHE_STATUS_STALE = 3        /* a stale entry (stale-while-revalidate, stale-if-error,
                                             or courier_cache_get with COURIER_CACHE_ALLOW_STALE) */
} courier_cache_status;

/* Why the cache did what it did with a response (courier_response_cache_reason). A response from
 * the network that the HTTP policies did not store says why (the NOT_STORED_* reasons); one they
 * stored says what the lookup found (MISS, VARY_MISS, STALE_REFETCHED). Append-only: values are
 * never renumbered or reused. */
typedef enum courier_cache_reason {
    COURIER_CACHE_REASON_NONE = 0,                     /* no cache policy looked at it */
    COURIER_CACHE_REASON_MISS = 1,                     /* nothing stored: the network, stored */
    COURIER_CACHE_REASON_FRESH = 2,                    /* a fresh stored response, no network */
    COURIER_CACHE_REASON_STALE_WHILE_REVALIDATE = 3,   /* stale, served while revalidating */
    COURIER_CACHE_REASON_STALE_IF_ERROR = 4,           /* stale, served because the origin failed */
    COURIER_CACHE_REASON_REVALIDATED = 5,              /* stored, confirmed by a 304 */
    COURIER_CACHE_REASON_STALE_REFETCHED = 6,          /* stored was stale: the network's new answer */
    COURIER_CACHE_REASON_VARY_MISS = 7,                /* stored under another Vary variant */
    COURIER_CACHE_REASON_ONLY_IF_CACHED = 8,           /* only-if-cached, nothing usable: a 504 made
                                                          by the cache (no network) */
    COURIER_CACHE_REASON_NOT_STORED_NO_STORE = 9,      /* no-store (request or response) */
    COURIER_CACHE_REASON_NOT_STORED_STATUS = 10,       /* a status not stored (206, 5xx without
                                                          explicit freshness, ...) */
    COURIER_CACHE_REASON_NOT_STORED_PRIVATE = 11,      /* private, in the shared cache */
    COURIER_CACHE_REASON_NOT_STORED_AUTHORIZATION = 12,/* a request with Authorization, in the shared
                                                          cache (RFC 9111 section 3.5) */
    COURIER_CACHE_REASON_NOT_STORED_VARY = 13,         /* Vary: * */
    COURIER_CACHE_REASON_NOT_STORED_TOO_LARGE = 14,    /* more than an eighth of the cache */
    COURIER_CACHE_REASON_NOT_STORED_NO_FRESHNESS = 15, /* no freshness, no validator: useless */
    COURIER_CACHE_REASON_NOT_STORED_METHOD = 16,       /* a method whose answers are not stored */
    COURIER_CACHE_REASON_INVALIDATED = 17,             /* an unsafe method's answer: the stored
                                                          responses of its URLs were removed */
    COURIER_CACHE_REASON_STALE_ACCEPTED = 18,          /* stale, as the request allowed (max-stale,
                                                          or COURIER_CACHE_ALLOW_STALE) */
    COURIER_CACHE_REASON_UPDATED_STORED = 19,          /* a HEAD answer that freshened the stored GET */
    COURIER_CACHE_REASON_NOT_STORED_POLICY = 20        /* a user policy's should_write said no */
} courier_cache_reason;
/* The reason's name ("fresh", "not-stored-private", ...: lowercase, '-'-separated; stable, used
 * in log lines and the Cache-Status field); "unknown" for other values. Static; any thread. */
COURIER_API const char *courier_cache_reason_name(int reason);

/* A clock: the current time in milliseconds since the Unix epoch. Called on any thread that uses
 * the cache (senders, the worker); it must be thread-safe and must not call into the engine. */
typedef int64_t (*courier_clock_fn)(void *user);

/* Where the cache keeps its entries. NULL (the default): the LMDB store in "<store dir>/cache".
 * A directory: an LMDB store there (created at first use). A URL
 * "redis://[[user]:password@]host[:port][/db][?timeout_ms=N]" (user and password %-escaped; port
 * 6379 and database 0 by default): a Redis server, shared by every engine, process and machine
 * that names it; policies, keys, the HTTP rules and the manager work the same. A Redis Cluster:
 * "redis+cluster://[[user]:password@]host:port[,host:port...][/0][?timeout_ms=N&replica_reads=1]"
 * (seed nodes; each command goes to its slot's master, replica_reads=1 sends lookups to replicas,
 * which may lag: docs/design/redis-cluster.md). On Redis each
 * entry expires by itself when it becomes useless (its expiry plus its stale horizons), the size
 * limit is Redis' own (maxmemory and its policy; courier_config_set_cache_max_bytes still bounds
 * one entry to an eighth of it), the durability setting is the server's, and a call waits at
 * most the engine's timeout (courier_config_set_timeout_ms) or the URL's timeout_ms for Redis. Redis
 * down never fails a request (the policy sends it as on a miss); the manager functions then fail
 * with COURIER_E_REDIS. Copied; checked here, opened by courier_engine_open (a directory that
 * cannot be created or opened fails the open with COURIER_E_STORE), Redis connected at first use. A
 * setting that looks like a URL of another scheme or a mistyped one (a scheme followed by ":/" or
 * by "//": "http://h", "redis:/h", "redis//h") is refused rather than taken for a relative
 * directory; a directory of that shape is written "./redis//h". The configuration's thread
 * (it is not thread-safe), before the engine opens. Errors: COURIER_E_INVALID_ARGUMENT (empty, a
 * redis URL of another shape, a mistyped URL),
 * COURIER_E_REDIS_UNSUPPORTED (a library built without Redis, or rediss:// without TLS in its
 * hiredis).
 * An LMDB store's files (the cache's and the journal's data.mdb) are mapped by every engine that
 * has them open and, as LMDB and SQLite say of theirs, must not be changed by another program
 * meanwhile: a file cut short under a busy reader is a SIGBUS in the reading process (measured: a
 * reader looping on gets died in 3 runs of 3; one pausing 5 ms between gets in 1 of 3). Courier
 * notices a cut before every write and within 2 ms on the read path, pads the file back and
 * answers COURIER_E_STORE from then on; damage done while the store was closed is found at the
 * next open (the cache moved aside and started afresh, the journal kept aside), never a crash. */
COURIER_API int courier_config_set_cache_store(courier_config *config, const char *store);

/* The most the cache may hold, in bytes of keys and values (>= 65536; default 256 MiB). Over it,
 * writes evict entries past their expiry first, then the least recently written, to just under
 * it, in small transactions (at most 64 entries each), whose freed pages the next commits reuse.
 * It bounds the disk too: the pages of the store's trees are kept under 1.625 x the limit (an
 * eviction then goes down to the bytes at which they would fit), so data.mdb stays under 1.625 x
 * the limit + 1 MiB (LMDB's free list holds at most what one eviction batch frees): under 2 x the
 * limit from a 4 MiB limit up. LMDB's pages are 40-60% full under random inserts and removals, so
 * with small values the page cap rather than the bytes bounds the cache (with 1 KiB values it then
 * holds about 70% of the limit in entries).
 * One entry may take at most an eighth of it (larger responses are not cached). The store's map
 * is sized from it by the first engine of a process to open the store; a full map or disk evicts
 * and retries and is never an error a caller sees. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_cache_max_bytes(courier_config *config, int64_t max_bytes);
/* Default expiry, in milliseconds (> 0; default 3 600 000, an hour), of entries written by the
 * cache-first, write-only and user-defined policies when the request sets none. */
COURIER_API int courier_config_set_cache_expiry_ms(courier_config *config, int64_t expiry_ms);
/* How the cache's commits reach the disk. Chosen by the first engine of a process to open a store
 * directory (the setting is the environment's). */
typedef enum courier_cache_durability {
    COURIER_CACHE_DURABLE = 0, /* the default: one fdatasync per commit, meta page unsynced
                                  (MDB_NOMETASYNC): consistent across power loss, which may undo
                                  the last commit */
    COURIER_CACHE_FAST = 1,    /* no sync (MDB_NOSYNC): safe across process crashes (kill -9);
                                  power loss may lose recent writes or damage the store, which is
                                  then moved aside and recreated if LMDB notices */
    COURIER_CACHE_SYNCED = 2   /* data and meta synced on every commit */
} courier_cache_durability;
/* Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_cache_durability(courier_config *config, courier_cache_durability durability);
/* Nonzero: every response a cache policy looked at carries a "Cache-Status" header field (RFC
 * 9211) saying what the cache did, e.g. `Courier; hit; detail=fresh` or `Courier; fwd=uri-miss;
 * stored; detail=miss` (the detail is courier_cache_reason_name), so a service can pass it on.
 * Default 0. Errors: COURIER_E_INVALID_ARGUMENT (config NULL). */
COURIER_API int courier_config_set_cache_status_header(courier_config *config, int on);
/* The policy of requests that name none (default COURIER_CACHE_NO_CACHE). Any other makes
 * courier_engine_open open the cache (and fail with its store's error when it cannot).
 * Errors: COURIER_E_INVALID_ARGUMENT (a reserved id). */
COURIER_API int courier_config_set_cache_policy(courier_config *config, courier_cache_policy policy);
/* The clock the cache reads (creation, expiry, age) and the engine's timers run on (retry backoff,
 * mock delays; the worker looks at the clock at least once a second). NULL restores the system
 * clocks (CLOCK_REALTIME for the cache, a monotonic clock for timers). user_free as for
 * validators. For tests of expiry and backoff without sleeping. */
COURIER_API int courier_config_set_clock(courier_config *config, courier_clock_fn fn, void *user,
                                         courier_user_free_fn user_free);

/* The request's cache policy: a courier_cache_policy or a registered user id (a value of the
 * enum's type); COURIER_CACHE_POLICY_DEFAULT (-1) restores the engine's default. An unregistered user id fails the send with COURIER_E_INVALID_ARGUMENT.
 * Errors: COURIER_E_INVALID_ARGUMENT (a reserved id). */
COURIER_API int courier_request_set_cache_policy(courier_request *request, courier_cache_policy policy);
/* How long (milliseconds, > 0) an entry written for this
 * request stays fresh; 0 restores the engine's default. Not used by the HTTP policy, which follows
 * the response's headers. */
COURIER_API int courier_request_set_cache_expiry_ms(courier_request *request, int64_t expiry_ms);
/* The request's own cache key, replacing the default key's first line (copied; NULL clears;
 * "" is COURIER_E_INVALID_ARGUMENT). */
COURIER_API int courier_request_set_cache_key(courier_request *request, const char *key);
/* Data that separates cache entries (an app version, a user id), appended to the key, so one
 * user's entries are never served to another. Copied; NULL clears. */
COURIER_API int courier_request_set_cache_sensitive_data(courier_request *request, const char *data);
/* Leaves a parameter (by exact name, e.g. a timestamp) out of the default key. Copied. */
COURIER_API int courier_request_add_cache_key_filter(courier_request *request, const char *param_name);

/* Nonzero when the body came from the cache (hit, revalidated or stale). Any thread. */
COURIER_API int courier_response_from_cache(const courier_response *response);
/* The courier_cache_status of a response. */
COURIER_API int courier_response_cache_status(const courier_response *response);
/* The courier_cache_reason of a response (COURIER_CACHE_REASON_NONE for NULL). Any thread. */
COURIER_API int courier_response_cache_reason(const courier_response *response);
/* Age in milliseconds of a response that came from the cache (RFC 9111 age for the HTTP policy,
 * whole seconds), else 0. */
COURIER_API int64_t courier_response_age_ms(const courier_response *response);
/* When the entry was written and until when it is fresh (ms since the epoch); 0 for a response
 * that did not come from the cache. */
COURIER_API int64_t courier_response_cache_created(const courier_response *response);
COURIER_API int64_t courier_response_cache_expires(const courier_response *response);
/* The key text of the entry a response came from, or NULL. Borrowed until the response is freed. */
COURIER_API const char *courier_response_cache_key(const courier_response *response);

/* A user-defined policy (the seeds' HTCachePolicyProtocol). Every callback may be NULL (then the
 * behaviour in brackets applies). `cached` is borrowed for the call and is NULL when there is no
 * entry. They run on the thread that sends (the two lookups) or on the worker (should_write),
 * with no storage transaction held; they must not close the engine. */
typedef struct courier_cache_policy_callbacks {
    size_t size; /* sizeof(courier_cache_policy_callbacks), set by the caller */
    /* Does the request have a usable entry? [an entry exists and is fresh] */
    int (*has_cache)(const courier_response *cached, int64_t now_ms, void *user);
    /* Given a usable entry, answer from it without the network? [yes] */
    int (*answer_from_cache)(const courier_response *cached, int64_t now_ms, void *user);
    /* After a successful, validated network response: write it? *expires_ms (in, out) is when it
     * would expire (now + the request's or engine's expiry) and may be changed. [yes] */
    int (*should_write)(const courier_response *response, int64_t *expires_ms, void *user);
} courier_cache_policy_callbacks;

/* Registers (or replaces) user policy `id` (>= COURIER_CACHE_POLICY_USER_MIN) on an engine.
 * `callbacks` is copied; NULL unregisters. user_free runs once when the registration ends
 * (replaced, unregistered, or the engine closed) and after every request using it completed.
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT (id, size), COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_register_cache_policy(courier_engine *engine, int id,
                                                     const courier_cache_policy_callbacks *callbacks, void *user,
                                                     courier_user_free_fn user_free);

/* The manager. All functions are thread-safe and open the store on first use; reads do not block
 * writers. Errors common to all: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE (the store cannot
 * be opened or used; store_error set), COURIER_E_NO_MEMORY. */

/* The key text of a request (*out new: release with courier_free). */
COURIER_API int courier_cache_key(char **out, courier_engine *engine, const courier_request *request);

/* courier_cache_get flag: also return an entry past its expiry (marked COURIER_CACHE_STATUS_STALE). */
#define COURIER_CACHE_ALLOW_STALE 1
/* *out_has = 1 when the request has a fresh entry (for a request with a user policy: as its
 * has_cache says), else 0. */
COURIER_API int courier_cache_has(int *out_has, courier_engine *engine, const courier_request *request,
                                  courier_error *err);
/* The cached response of a request (with the HTTP policy's Vary variant the request selects):
 * *out new (courier_response_free), marked from-cache, with age and expiry.
 * Errors: COURIER_E_NOT_FOUND (none, or none fresh without COURIER_CACHE_ALLOW_STALE). */
COURIER_API int courier_cache_get(courier_response **out, courier_engine *engine, const courier_request *request,
                                  int flags, courier_error *err);
/* Removes a request's entry. Errors: COURIER_E_NOT_FOUND. */
COURIER_API int courier_cache_remove(courier_engine *engine, const courier_request *request, courier_error *err);
/* The same by key text (as listed, or as given to courier_request_set_cache_key). */
COURIER_API int courier_cache_has_key(int *out_has, courier_engine *engine, const char *key, courier_error *err);
COURIER_API int courier_cache_get_key(courier_response **out, courier_engine *engine, const char *key, int flags,
                                      courier_error *err);
COURIER_API int courier_cache_remove_key(courier_engine *engine, const char *key, courier_error *err);
/* Writes an entry under a key text: status, `nheaders` header lines (names[i], values[i]; copied),
 * a body (copied; len may be 0) and an expiry in milliseconds (0: the engine's default). A key of the
 * default form ("GET http://...") also records its method and URL. One transaction, committed
 * before return. Errors: COURIER_E_INVALID_HEADER, COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_cache_put_key(courier_engine *engine, const char *key, int status,
                                      const char *const *names, const char *const *values, size_t nheaders,
                                      const void *body, size_t body_len, int64_t expiry_ms, courier_error *err);
/* Removes every entry; *out_removed (may be NULL) receives how many. */
COURIER_API int courier_cache_remove_all(int64_t *out_removed, courier_engine *engine, courier_error *err);
/* Removes the entries written at or after since_ms (ms since the epoch, on the engine's clock). */
COURIER_API int courier_cache_remove_since(int64_t *out_removed, courier_engine *engine, int64_t since_ms,
                                           courier_error *err);
/* Removes the entries past their use (a range scan of the expiry index). For the HTTP policy an
 * entry with validators is kept for revalidation up to 7 days past its freshness. */
COURIER_API int courier_cache_remove_expired(int64_t *out_removed, courier_engine *engine, courier_error *err);
/* Exact total bytes and entry count of the store (all engines and processes), kept in the same
 * transactions as the entries. Either pointer may be NULL. */
COURIER_API int courier_cache_size(int64_t *out_bytes, int64_t *out_count, courier_engine *engine, courier_error *err);

/* Statistics. hits/misses/writes/evictions/revalidations/stale_served/write_failures count what
 * this engine did since it opened; bytes/count are the store's totals. */
typedef struct courier_cache_stats {
    size_t size;            /* sizeof(courier_cache_stats), set by the caller */
    int64_t hits;           /* requests answered from the cache without the network */
    int64_t misses;         /* lookups that found no usable entry */
    int64_t writes;         /* entries written */
    int64_t evictions;      /* entries evicted to stay under the limit or to make room */
    int64_t revalidations;  /* 304 answers merged into stored entries */
    int64_t stale_served;   /* stale entries served (stale-while-revalidate, stale-if-error) */
    int64_t write_failures; /* writes dropped (too large, store full, store failure) */
    int64_t bytes;          /* the store's total bytes */
    int64_t count;          /* the store's entry count */
    int64_t max_bytes;      /* this engine's limit */
} courier_cache_stats;
/* Copies the statistics into *out (its `size` set by the caller; the fields within it are written). */
COURIER_API int courier_cache_get_stats(courier_cache_stats *out, courier_engine *engine, courier_error *err);

/* What courier_cache_verify found. Counts are of records in the store's one read snapshot. */
typedef struct courier_cache_verify_report {
    size_t size;            /* sizeof(courier_cache_verify_report), set by the caller */
    int64_t entries;        /* entries the scan found */
    int64_t bytes;          /* their bytes (key + value), counted as the totals count them */
    int64_t total_entries;  /* the store's own totals (courier_cache_size) */
    int64_t total_bytes;
    int64_t damaged;        /* entries that do not decode or whose checksum does not match */
    int64_t orphan_index;   /* index records (expiry, write order) whose entry is absent or newer,
                               and records of no known kind */
    int64_t missing_index;  /* entries without their expiry or write-order record */
    int64_t totals_mismatch; /* 1 when the totals differ from the scan */
    int64_t problems;       /* damaged + orphan_index + missing_index + totals_mismatch (+1 unreadable) */
    int64_t file_bytes;     /* size of data.mdb on disk */
    int64_t map_bytes;      /* the size of this process's map of it */
    int64_t used_bytes;     /* the pages LMDB uses: (last page + 1) x page size */
    int unreadable;         /* 1 when LMDB reported a damaged page (the store is recreated at the next open) */
    int moved_aside;        /* 1 when this process found the store unusable (truncated, zeroed,
                               overwritten, newer) when it opened it, moved it aside and started anew */
    int64_t tree_bytes;     /* pages of the trees (entries, index, LMDB's own), x page size */
    int64_t free_bytes;     /* pages on LMDB's free list, reused by later commits */
} courier_cache_verify_report;
/* Checks the whole store (all engines and processes) in one read transaction, without blocking
 * writers: every entry readable and whole (its checksum matches), both index records of every
 * entry present, no index record without its entry, and the totals equal to the scan. Fills *out
 * (the fields within its `size`, set by the caller) in every case but an
 * argument error. Reads only: nothing is repaired (a damaged entry already reads as a miss and
 * is replaced by the next write). Any thread; it reads every entry, so it takes time in
 * proportion to the store. Returns COURIER_OK when the store is consistent,
 * COURIER_E_CACHE_INCONSISTENT when it is not (the report says what). Errors:
 * COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE. */
COURIER_API int courier_cache_verify(courier_cache_verify_report *out, courier_engine *engine, courier_error *err);

/* A snapshot of the entries (one read transaction). */
typedef struct courier_cache_list courier_cache_list;
typedef struct courier_cache_entry_info {
    size_t size;        /* sizeof(courier_cache_entry_info), set by the caller */
    const char *key;    /* the key text; borrowed until the list is freed */
    const char *url;    /* the URL that answered */
    const char *id;     /* the key's hash, 32 hex digits */
    int status;         /* HTTP status */
    int64_t bytes;      /* bytes in the store */
    int64_t created_ms; /* written at */
    int64_t expires_ms; /* fresh until */
} courier_cache_entry_info;
/* *out new: release with courier_cache_list_free. */
COURIER_API int courier_cache_list_entries(courier_cache_list **out, courier_engine *engine, courier_error *err);
COURIER_API size_t courier_cache_list_count(const courier_cache_list *list);
/* Copies entry `index` into *out (the fields within its `size`, set by the caller). Errors: COURIER_E_NOT_FOUND (index out of range). */
COURIER_API int courier_cache_list_at(courier_cache_entry_info *out, const courier_cache_list *list, size_t index);
/* Accepts NULL. */
COURIER_API void courier_cache_list_free(courier_cache_list *list);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_CACHE_H */
