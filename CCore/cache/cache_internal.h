/*
 * cache_internal.h — what store.c, cache.c, cache_key.c and cache_http.c share, and nothing else
 * includes. The hooks the engine calls are declared in internal.h ("cache" section).
 *
 * Layers, inside the folder: the store is the floor (entry.c, the value layout; store.c, the LMDB
 * store, with store_verify.c and store_lmdb.c, its face behind the seam, sharing store_lmdb.h;
 * store_redis.c; their header, store.h, includes nothing of the cache's); the others stand on it.
 *   cache_key.c  the default cache key of a request.
 *   cache_http.c RFC 9111: Cache-Control, Expires, Age, freshness, validators, 304 merging.
 *   cache.c      configuration (a request's settings are http/cache_settings.c's), policies in the
 *                send path, the store opened on first use, the lookup.
 *   manager.c    the manager API (courier_cache_key, _get, _has, _remove..., _put_key, _size,
 *                _verify, _get_stats, _list_*), over what cache.c shares below.
 */
#ifndef COURIER_CACHE_INTERNAL_H
#define COURIER_CACHE_INTERNAL_H

#include "cache/store.h"
#include "cache/cache.h"

#include <time.h>

/* Hidden like internal.h's declarations (see there). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* ---- keys (cache_key.c) --------------------------------------------------------------------- */

/* The key string of a request sent on engine e (default or the request's own). *out new (free). */
CR_HIDDEN int cr_cache_key_for(const courier_engine *e, const courier_request *r, char **out);
/* The default GET key of `ref` (a Location or Content-Location value: absolute, or relative to
 * `base`, an absolute URL) when it has the same origin as `base`; COURIER_E_NOT_FOUND when not
 * (or when ref is empty). *out new (free). */
CR_HIDDEN int cr_cache_get_key_of_ref(const courier_engine *e, const char *base, const char *ref, char **out);
/* Appends "\nvary:" + name=value pairs for the names (lowercase, '\n'-separated) using `lookup`. */
CR_HIDDEN int cr_cache_vary_suffix(cr_buf *out, const char *names, size_t names_len,
                                   const char *(*lookup)(const void *ctx, const char *name), const void *ctx);

/* ---- HTTP semantics (cache_http.c) ---------------------------------------------------------- */

/* Field names of no-cache="..." or private="..." (borrowed from the parsed header values). */
typedef struct cr_cc_fields {
    const char *list[4];
    size_t len[4];
    size_t n;
    int overflow;
} cr_cc_fields;

/* Cache-Control directives of a response or a request. -1 = absent; *_invalid: malformed or
 * repeated with another value (taken as stale, section 4.2.1). */
typedef struct cr_cc {
    int no_store;
    int no_cache;         /* unqualified */
    int must_revalidate;
    int proxy_revalidate;
    int priv;             /* unqualified */
    int pub;
    int only_if_cached;
    int max_stale_any;    /* max-stale without a value */
    int max_age_invalid, s_maxage_invalid, min_fresh_invalid, max_stale_invalid;
    int64_t max_age;
    int64_t s_maxage;
    int64_t min_fresh;
    int64_t max_stale;
    int64_t swr;
    int64_t sie;
    cr_cc_fields no_cache_fields;
    cr_cc_fields private_fields;
} cr_cc;

CR_HIDDEN void cr_cc_parse(const cr_kvlist *headers, cr_cc *out);
/* An HTTP-date (IMF-fixdate, rfc850 or asctime) to unix seconds, -1 if absent or invalid. */
CR_HIDDEN int64_t cr_http_date(const char *s);

/* How the HTTP policies would store a response: 0 when it may be stored (the freshness fields of
 * *e filled, created_ms = now_ms), else the courier_cache_reason (NOT_STORED_*) it may not.
 * response_delay_s: how long the request took (section 4.2.3's response_delay). */
CR_HIDDEN int cr_http_storable(const char *method, const courier_response *resp, const cr_kvlist *req_headers,
                               bool shared, int64_t now_ms, double response_delay_s, cr_entry *e);
/* Whether field `name` of a response with these headers and directives is stored (section 3.1:
 * not hop-by-hop fields nor those named by Connection; not no-cache="name"; shared: not
 * private="name"). */
CR_HIDDEN bool cr_http_field_stored(const cr_kvlist *headers, const cr_cc *rc, bool shared, const char *name);
/* Whether any field of headers is not stored. */
CR_HIDDEN bool cr_http_fields_filtered(const cr_kvlist *headers, const cr_cc *rc, bool shared);
/* The lowercase, sorted, '\n'-separated names of a Vary header ("" for none, "*" for Vary: *).
 * *out new. */
CR_HIDDEN int cr_http_vary_names(const cr_kvlist *headers, char **out);
/* Current age in seconds of a stored entry at now_ms (RFC 9111 section 4.2.3). */
CR_HIDDEN int64_t cr_http_age_s(const cr_entry *e, int64_t now_ms);
/* Updates stored headers with those of a 304 (RFC 9111 section 3.2): same names replaced. */
CR_HIDDEN int cr_http_merge_304(cr_kvlist *stored, const cr_kvlist *fresh);
/* A request's single byte Range answered from a stored complete response (RFC 9110 section 14, RFC
 * 9111 section 3.4): *r, a 200 from the cache, becomes a 206 with Content-Range and the part of
 * its body (or a 416 with "bytes * /length" when no byte of it is in range). Left whole: no Range,
 * an invalid one or several ranges (a server may ignore them), an If-Range that does not
 * strongly match the stored ETag or equal its Last-Modified, a status other than 200. The body is
 * the one stored (decoded when the origin coded it). COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_http_range_answer(courier_response *r, const cr_kvlist *req_headers);

/* ---- the engine's cache (cache.c; manager.c reads it too) ------------------------------------ */

/* A user policy registered by id (courier_engine_register_cache_policy); counted: a send holds one. */
typedef struct policy_reg {
    atomic_int refs;
    int id;
    courier_cache_policy_callbacks fns;
    void *user;
    courier_user_free_fn user_free;
    struct policy_reg *next;
} policy_reg;

struct cr_deferred; /* a write the worker does at the end of its turn (cache.c) */

/* The engine's cache (e->cache), made at engine open. */
struct cr_cache {
    pthread_mutex_t lock; /* store opening, policy registry */
    cr_cache_store *store; /* the backend chosen at open: LMDB or Redis (store.h) */
    int open_failed;      /* the code, when the store could not be opened (not retried) */
    courier_error open_error;
    int64_t max_bytes;
    int64_t expiry_ms;
    int default_policy;
    cr_callback *clock;
    const cr_answer_ops *answer; /* the engine's, for the callers of deferred writes */
    policy_reg *policies;
    atomic_llong hits, misses, writes, evictions, revalidations, stale, write_failures;
    /* Worker thread only. */
    struct cr_deferred *dhead, *dtail;
};

/* The cache's clock: the configuration's (courier_config_set_clock) or the real time, in unix ms. */
static inline int64_t cr_cache_now_ms(const struct cr_cache *c) {
    if (c && c->clock) return ((courier_clock_fn)c->clock->fn)(c->clock->user);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The store, opened on first use: the LMDB store in "<store dir>/cache" or the directory the cache
 * store setting names, or Redis for a redis:// URL. NULL when it cannot be opened (logged once;
 * err filled). Any thread. */
CR_HIDDEN cr_cache_store *cr_cache_open_store(courier_engine *e, courier_error *err);
/* The code of a store that cannot be opened (cr_cache_open_store returned NULL). */
CR_HIDDEN int cr_cache_store_code(courier_engine *e);
/* The user policy registered under id, retained (release with cr_cache_policy_release), or NULL. */
CR_HIDDEN policy_reg *cr_cache_find_policy(struct cr_cache *c, int id);
CR_HIDDEN void cr_cache_policy_release(policy_reg *p);

/* Where a lookup reads the request headers a Vary record names: a transfer's headers, or (for the
 * manager) a request's with the configuration's defaults. */
typedef struct cr_header_ctx {
    const courier_engine *e;
    const courier_request *r; /* when looking up for the manager */
    const cr_kvlist *headers; /* when looking up for a transfer */
} cr_header_ctx;
/* cr_cache_vary_suffix's lookup over a cr_header_ctx. */
CR_HIDDEN const char *cr_cache_header_lookup(const void *ctx, const char *name);
/* Looks up the entry of a key (following a Vary record when hc is given) and turns it into a
 * response (new). Returns COURIER_OK, COURIER_E_NOT_FOUND, or an error. *fresh says whether it is
 * fresh. With fresh_only, an entry that is not fresh is reported (COURIER_OK, *fresh false, *out
 * NULL) without building its response. meta (optional): the entry's numbers; had_vary (optional):
 * whether a Vary record was followed. key_hash (optional): the key's cr_key_hash, when the caller
 * has it (a send hashes its key once, in its cache state). */
CR_HIDDEN int cr_cache_lookup(courier_engine *e, cr_cache_store *s, const char *key, const uint8_t key_hash[16],
                              const cr_header_ctx *hc, int64_t now, bool fresh_only, courier_response **out,
                              cr_entry *meta, bool *fresh, bool *had_vary);

/* ---- shared helpers (cache.c) --------------------------------------------------------------- */

/* Builds a response (new) from an entry: from-cache fields set, Age recomputed. */
CR_HIDDEN courier_response *cr_cache_response_from_entry(const cr_entry *e, int cache_status, int64_t now_ms);
/* Fills a kvlist from an entry's header block. */
CR_HIDDEN int cr_entry_headers(const cr_entry *e, cr_kvlist *out);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_CACHE_INTERNAL_H */
