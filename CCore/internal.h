/*
 * internal.h — what the core's files share. Never installed, never exported: every function
 * here is built with hidden visibility (only COURIER_API symbols leave the library).
 */
#ifndef COURIER_INTERNAL_H
#define COURIER_INTERNAL_H

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

#define CR_DEFAULT_TIMEOUT_MS 60000L
#define CR_DEFAULT_MAX_PER_HOST 5L
#define CR_DEFAULT_MAX_TOTAL 64L
#define CR_DEFAULT_MAX_RESPONSE ((int64_t)64 * 1024 * 1024)

/* ---- errors (util.c) ---------------------------------------------------------------------- */

/* Fills *err (may be NULL) with code and a formatted message; returns code. */
CR_HIDDEN int cr_fail(courier_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Clears *err (may be NULL) to "no error". */
CR_HIDDEN void cr_error_clear(courier_error *err);

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
 * path, malloc serves small sizes from the thread's cache. */
static inline void *cr_zalloc(size_t size) {
    void *p = malloc(size);
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

/* ---- files (util.c) ------------------------------------------------------------------------ */

/* Reads a whole file (at most max bytes) into *out (new, NUL-terminated: free), its length in *len
 * (may be NULL). COURIER_E_NOT_FOUND (no such file; err->os_error), COURIER_E_INVALID_ARGUMENT
 * (unreadable), COURIER_E_TOO_LARGE; `what` names the file in err's message ("mock file"). */
CR_HIDDEN int cr_read_file(const char *path, const char *what, int64_t max, char **out, size_t *len,
                           courier_error *err);

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
 * they read as zeros, which LMDB reports as MDB_CORRUPTED. One fstat (about 0.6 us here). */
CR_HIDDEN int cr_lmdb_file_intact(struct MDB_env *env, int64_t *largest);
struct MDB_txn;
/* The records at both ends of LMDB's free list (in a read transaction of its own), and of the
 * main database of an environment that keeps only named databases in it: 0 when they have the
 * shapes LMDB writes, MDB_CORRUPTED when not (a damaged page: LMDB would overrun its copy of it
 * at the next write), or LMDB's code. Call at open, after cr_lmdb_file_pad, before writing. */
CR_HIDDEN int cr_lmdb_check_free_list(struct MDB_env *env);
struct MDB_val;
/* The same for the first and last records of database dbi, by a predicate of the store's (NULL:
 * only read them, so that a damaged root shows up). */
CR_HIDDEN int cr_lmdb_check_ends(struct MDB_txn *txn, unsigned dbi,
                                 bool (*ok)(const struct MDB_val *k, const struct MDB_val *v));
CR_HIDDEN int cr_lmdb_check_names(struct MDB_txn *txn);

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

/* ---- redirects and timeouts (redirect.c) --------------------------------------------------- */

#define CR_DEFAULT_MAX_REDIRECTS 20
/* Which fields of a request's cr_http_opts it set (the rest are the engine's). */
#define CR_HTTP_SET_FOLLOW 0x1u
#define CR_HTTP_SET_MAX 0x2u
#define CR_HTTP_SET_DOWNGRADE 0x4u
#define CR_HTTP_SET_CONNECT 0x8u
#define CR_HTTP_SET_IDLE 0x10u
#define CR_HTTP_SET_HOOK 0x20u

/* Redirect and timeout settings: the engine's (all set), a request's (`set` says which), and a
 * transfer's (the two merged at prepare; the total timeout is timeout_ms, as before). */
typedef struct cr_http_opts {
    unsigned set;
    int follow;
    int max_redirects;
    int allow_downgrade;
    int64_t connect_ms; /* 0: none */
    int64_t idle_ms;    /* 0: none */
    cr_callback *hook;  /* courier_redirect_fn, or NULL */
} cr_http_opts;

/* The redirects a chain went through (moved from hop to hop, then into the response). */
typedef struct cr_hops {
    size_t count;
    size_t cap;
    struct cr_hop { char *url; int status; } *items;
    char *origin; /* scheme://host:port of the first request */
    int64_t deadline_ms; /* monotonic: when the chain's total timeout runs out (0: none) */
    int left_origin; /* credentials were dropped */
} cr_hops;

CR_HIDDEN void cr_hops_free(cr_hops *h);
CR_HIDDEN void cr_http_opts_defaults(cr_http_opts *o);
/* Merges a request's settings over the engine's into a transfer's (hook retained). */
CR_HIDDEN void cr_http_opts_resolve(cr_http_opts *out, const cr_http_opts *engine, const cr_http_opts *request);

/* ---- security policies (security.c) --------------------------------------------------------- */

struct courier_security {
    int mode;             /* courier_pinning_mode */
    char *pins;           /* PUBLIC_KEY: libcurl's pin string or a key file; CERTIFICATE: a PEM file */
    char *ca_file;
    int allow_invalid;    /* CURLOPT_SSL_VERIFYPEER off (not with CERTIFICATE pinning) */
    int validates_domain; /* CURLOPT_SSL_VERIFYHOST 2 (the default) */
    char *cert, *key, *key_password; /* the client certificate (mutual TLS) */
};

CR_HIDDEN void cr_security_defaults(courier_security *s);
CR_HIDDEN courier_security *cr_security_copy(const courier_security *src); /* NULL: no memory */
/* The engine configuration's policy, created on first use; NULL on no memory. */
CR_HIDDEN courier_security *cr_config_security(courier_config *c);
/* The engine's policy (NULL: defaults) on a new or reset handle. CURLcode. */
CR_HIDDEN int cr_security_base(const courier_security *s, CURL *h);
struct cr_transfer;
/* A request's own policy on its handle, replacing the engine's (sets easy_dirty). CURLcode. */
CR_HIDDEN int cr_security_setup(struct cr_transfer *t);
/* Whether the transfer's policy (its own, else the engine's) pins whole certificates. */
CR_HIDDEN bool cr_security_pins_certificate(const struct cr_transfer *t);

/* ---- configuration (request.c) -------------------------------------------------------------- */

#define CR_API_VERSION_MAX 63 /* bytes of an API version segment */

/* The status codes a request accepts (route.c): n ranges lo..hi; n 0: below 400. Plain values. */
#define CR_STATUS_RANGES 8
typedef struct cr_status_set {
    int n;
    int lo[CR_STATUS_RANGES];
    int hi[CR_STATUS_RANGES];
} cr_status_set;
/* Whether `status` is a success for this set (the default: below 400). */
CR_HIDDEN bool cr_status_accepted(const cr_status_set *s, int status);
/* The version segment a relative path of r gets on an engine configured with cfg (written into
 * buf, returned), or NULL for none. */
CR_HIDDEN const char *cr_api_version_of(const courier_config *cfg, const courier_request *r,
                                        char buf[CR_API_VERSION_MAX + 2]);
/* base + "/" + version (when not NULL) + "/" + path, with the slashes between them collapsed. */
CR_HIDDEN int cr_join_url(cr_buf *out, const char *base, const char *version, const char *path);
/* Whether a path pattern parses (":name" parameters, backslash escapes, no '?', '#' or spaces). */
CR_HIDDEN bool cr_route_pattern_valid(const char *pattern);
/* Appends pattern filled from object (NULL: no parameters allowed) to out; each top-level member
 * used whole is set in `used` (may be NULL). COURIER_E_ROUTE_PARAMETER with err filled. */
CR_HIDDEN int cr_route_fill(const char *pattern, const json_t *object, cr_buf *out, json_t *used,
                            courier_error *err);
/* Whether path (path_len bytes, no query) matches the pattern. */
CR_HIDDEN bool cr_route_match(const char *pattern, const char *path, size_t path_len);
/* Adds an object's members to a list as form parameters: nested objects as name[key], arrays as
 * name[], true/false, null as "" (serialize.c). */
CR_HIDDEN int cr_form_flatten(const json_t *object, cr_kvlist *out);

struct courier_config {
    char *base_url;
    cr_kvlist headers;
    cr_kvlist params;
    long timeout_ms;
    char *user_agent;
    long max_per_host;
    long max_total;
    courier_body_encoding body_encoding;
    int64_t max_response_bytes;
    courier_security *security; /* TLS: verification, pinning, client certificate (security.c); NULL: defaults */
    /* Network kinds (monitor.c, netwatch.c): limits per courier_network_kind (0: the engine's own),
     * and whether the OS watch runs. */
    struct cr_kind_limits { long per_host, total, replay; } kind_limits[5];
    int network_watch;
    char *store_dir;
    char *app_id;        /* names the default store; NULL: the program's name */
    int temporary_store; /* no store_dir: a temporary store removed at close, not the default */
    cr_callback *validator;
    struct cr_jconf *jconf; /* JSON: envelope, decoders, parse limits (serialize.c); NULL: defaults */
    /* Scheduling, mock, interceptors, transports (schedule.c, mock.c). */
    struct cr_sched_conf *sched;
    /* Cache (cache.c): 0 means the default. */
    int64_t cache_max_bytes;
    int64_t cache_expiry_s;
    int cache_policy;
    cr_callback *clock; /* courier_clock_fn, or NULL: the system clock */
    int cache_durability; /* courier_cache_durability */
    int cache_status_header; /* nonzero: responses carry Cache-Status (RFC 9211) */
    /* Frozen requests and reachability (journal.c, monitor.c): plain values, 0 means the default. */
    struct cr_frozen_conf {
        long concurrency, backoff_base_ms, backoff_max_ms, lease_ms, poll_ms;
        int64_t expiry_ms;
        int paused;
        int monitor_from_errors;
        long probe_interval_ms;
        char probe[512];
    } frozen;
    /* Cookies, credentials, proxies, challenge handler (cookies.c, auth.c). */
    int cookies_off;
    struct cr_auth *auth; /* NULL: none set */
    cr_http_opts http; /* redirects, connect and idle timeouts (redirect.c) */
    char *param_charset; /* query and form parameters' charset (charset.c); NULL: UTF-8 */
    /* The API version segment (route.c): inserted between the base URL and a relative path,
     * followed by "r" when api_review is set; "" none. */
    char api_version[CR_API_VERSION_MAX + 1];
    int api_review;
};

/* A deep copy (callbacks retained). NULL on no memory. */
CR_HIDDEN courier_config *cr_config_copy(const courier_config *src);
CR_HIDDEN void cr_config_defaults(courier_config *c);

/* ---- requests (request.c) -------------------------------------------------------------------- */

struct courier_request {
    char *method;
    char *target;
    char *base_url;
    cr_kvlist params;
    int use_default_params;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    char *content_type;
    int body_encoding; /* -1: the engine's */
    long timeout_ms;   /* 0: the engine's */
    cr_callback *validator;
    cr_callback *customize;
    struct cr_jspec *jspec; /* JSON: key path, mapping, results, envelope (mapping.c); NULL: none */
    /* Scheduling (schedule.c): priority, retry, coalescing, guard; mock and transport (mock.c). */
    int priority;
    int has_retry;
    struct cr_retry_rule { int max; long base_ms; long max_ms; unsigned flags; } retry;
    int no_coalesce;
    int unguarded;
    struct cr_mock *mock;
    char *transport_name;
    struct cr_cache_req *cache; /* cache policy, expiry, key, filters (cache.c); NULL: defaults */
    /* Transfers (transfer.c): multipart parts, a file body, a download file, progress. */
    struct cr_parts *parts;
    char *body_file;
    char *body_file_type;
    char *download_path;
    unsigned download_flags;
    cr_callback *progress;
    /* Frozen requests (journal.c): plain values, copied with the request. */
    struct cr_freeze_req {
        int policy;         /* courier_freeze_policy */
        unsigned flags;     /* COURIER_FREEZE_* */
        int64_t expiry_ms;  /* 0: the engine's */
        int ignore_offline;
        int cache_set;      /* the cache settings below were captured at send (transfers only) */
        int cache_policy;
        int64_t cache_expiry_s;
        char id[COURIER_FROZEN_ID_MAX + 1]; /* "": generated at freeze time */
        char resend_policy[COURIER_RESEND_POLICY_ID_MAX + 1]; /* "": the policy's default (policy.c) */
    } freeze;
    struct cr_auth *auth; /* credentials, proxy, challenge handler (auth.c); NULL: the engine's */
    cr_http_opts http; /* redirects, connect and idle timeouts (redirect.c); `set` says which */
    char *param_charset; /* query and form parameters' charset (charset.c); NULL: the engine's */
    courier_security *security; /* the request's own TLS policy (security.c); NULL: the engine's */
    int no_cellular; /* monitor.c: fails with COURIER_E_CELLULAR while the path is cellular */
    /* Routes and API versions (route.c). */
    int api_version_set;                      /* 1: api_version replaces the engine's */
    char api_version[CR_API_VERSION_MAX + 1]; /* "" with api_version_set: no segment */
    json_t *object_rest; /* an object's members left after its route filled the path, sent in the
                            body at prepare (courier_request_set_object); NULL: none */
    cr_status_set status_codes;
};

struct courier_outgoing {
    char *method;
    char *url;
    cr_kvlist headers;
    uint64_t id; /* 0 until the send has an id (customize, before-send); set for mock callbacks */
};

/* ---- transfers: a request made final, and its state on the wire (transport.c) --------------- */

#define CR_URLH_SLOTS 32

typedef struct cr_transfer {
    uint64_t id;
    courier_engine *engine;
    /* What is sent. */
    char *method;
    char *url;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    long timeout_ms;
    int64_t max_bytes;
    cr_callback *validator;
    courier_completion_fn done;
    void *user;
    /* On the wire (worker thread only). */
    CURL *easy;
    struct cr_urlh *urlh;       /* t->url parsed (CURLOPT_CURLU), shared with the engine's cache */
    struct curl_slist *slist;   /* lines transfer.c adds (curl_slist_append) */
    struct curl_slist *lines;   /* the header lines, one allocation, ending in slist (transport.c) */
    cr_buf resp_body;
    cr_kvlist resp_headers;
    int too_large;
    int oom;
    int ce_raw;     /* a Content-Encoding curl cannot decode: the body is kept as received */
    int ce_decoded; /* a Content-Encoding curl decodes: the response drops the field */
    char errbuf[CURL_ERROR_SIZE];
    struct cr_transfer *next;
    struct cr_transfer *prev;
    struct cr_jspec *jspec; /* the request's JSON needs, copied at prepare (mapping.c) */
    cr_status_set status_codes; /* the request's accepted statuses (route.c) */
    /* Scheduling (schedule.c). */
    int priority;
    char *host;                  /* scheme://host:port, for per-host limits */
    struct cr_retry_rule retry;
    int attempts;                /* attempts started */
    double waited_s;             /* backoff chosen so far */
    int64_t due_ms;              /* when a timer (retry, mock delay) fires */
    int state;                   /* CR_T_* */
    int caller_gone;             /* the caller was already answered (cancelled); deliver to nobody */
    char *coalesce_key;          /* NULL: never shared */
    struct cr_transfer *leader;  /* a follower's leader */
    struct cr_transfer *followers;
    struct cr_transfer *next_follower;
    struct cr_mock *mock;        /* a copy, when the mock switch was on at send */
    const struct cr_transport_reg *custom; /* a custom transport, or NULL for curl */
    struct courier_call *call;
    int cancel_requested;
    int unguarded;               /* exempt from the frequent-request guard */
    struct cr_cache_xfer *cache; /* the cache's state for this send (cache.c), or NULL */
    int64_t obs_t0_ns;           /* log.c: monotonic time of WILL_SEND (0: nobody was listening) */
    int64_t obs_progress[2];     /* log.c: bytes received / sent at the last PROGRESS event */
    /* Transfers (transfer.c). */
    struct cr_parts *parts;
    char *body_file;
    char *download_path;
    unsigned download_flags;
    cr_callback *progress;
    FILE *upload_fp;
    FILE *download_fp;
    int download_mode;           /* 0 undecided, 1 appending a resumed part, 2 from the start, 3 in memory */
    int64_t resume_from;
    void *mime;                  /* curl_mime */
    int64_t progress_last[4];
    int64_t progress_at;
    int easy_dirty; /* the easy handle needs a reset before another transfer uses it */
    courier_security *security; /* the request's own TLS policy (security.c); NULL: the engine's */
    int no_cellular; /* the request's "not on cellular" (monitor.c) */
    int watch_progress; /* progress goes to the request's callback and/or event monitors */
    cr_buf hdr_block;   /* the response's header lines as "name\0value\0"... (transport.c) */
    size_t hdr_count;
    struct cr_freeze_req freeze; /* journal.c: the request's freeze settings (copied at send) */
    /* Cookies and authentication (cookies.c, auth.c). */
    struct cr_auth *auth;        /* the request's over the engine's, merged at prepare; NULL: none */
    int set_cookie;              /* a Set-Cookie line arrived in this attempt (worker) */
    courier_response *held;      /* the 401/407 kept while a challenge waits for its answer */
    /* Redirects, timeouts, framing (redirect.c, transport.c). */
    cr_http_opts http;           /* resolved at prepare (hook retained) */
    cr_hops *hops;               /* the chain so far (NULL: the first hop), moved to the next hop */
    struct {
        int status_seen;         /* a valid status line started the current response */
        int ended;               /* its header block ended (the blank line) */
        int fault;               /* COURIER_E_PROTOCOL / _HEADERS_TOO_LARGE found in the headers */
        size_t block_bytes;      /* header bytes of the current response */
        int64_t content_length;  /* the first Content-Length (-1: none) */
        int64_t last_rx_ms;      /* idle timeout: when a byte last moved (0: not connected yet) */
        int64_t sent;            /* idle timeout: request body bytes sent when last looked */
        int timeout_kind;        /* courier_timeout_kind of an idle timeout the engine fired */
    } wire;
} cr_transfer;

/* Builds the final transfer for a request sent on an engine: URL joined and validated, parameters
 * encoded, headers merged, customize callback run. On failure returns the code (err filled). */
CR_HIDDEN int cr_transfer_prepare(courier_engine *e, const courier_request *r, cr_transfer **out,
                                  courier_error *err);
CR_HIDDEN void cr_transfer_free(cr_transfer *t);

/* transport.c: whether the environment names a proxy (libcurl's variables). */
CR_HIDDEN bool cr_proxy_env_present(void);
/* A URL parsed into a curl URL handle, shared by the transfers sending it (read-only to curl) and
 * the engine's small cache of recent URLs; the last reference frees it. */
typedef struct cr_urlh cr_urlh;
CR_HIDDEN void cr_urlh_release(cr_urlh *h);
CR_HIDDEN void cr_urlh_cache_free(courier_engine *e);
/* "Accept-Encoding: " and the encodings this libcurl decodes ("" when none), for out (>= 64 bytes). */
CR_HIDDEN void cr_accept_encoding_line(char *out, size_t size);
/* transport.c: the options every transfer of the engine shares, on a new or reset handle. */
CR_HIDDEN int cr_transport_base(courier_engine *e, CURL *h);
/* transport.c: configures t->easy for t. Returns OK or a code. */
CR_HIDDEN int cr_transport_setup(courier_engine *e, cr_transfer *t);
/* transport.c: what curl brought back for a finished transfer: COURIER_OK with *out_resp (new)
 * whatever the HTTP status, or the transport's failure code (err filled, *out_resp NULL). */
CR_HIDDEN int cr_transport_result(cr_transfer *t, CURLcode result, courier_response **out_resp,
                                  courier_error *err);
/* transport.c: maps a CURLcode to a courier_code. `reached`: the server was connected to (decides
 * between a bad URL and a server that answered in something that is not HTTP). */
CR_HIDDEN int cr_code_from_curl(CURLcode c, bool reached);

/* redirect.c: "scheme://host:port" of an absolute URL, lowercase, the default port filled in (new;
 * NULL when it does not parse or no memory). The origin redirects and credentials are judged by. */
CR_HIDDEN char *cr_url_origin(const char *url);
/* redirect.c: whether resp is a redirect t follows (301/302/303/307/308 with a Location, following
 * on, a curl transfer). */
CR_HIDDEN bool cr_redirect_wanted(const cr_transfer *t, const courier_response *resp);
/* redirect.c: the next hop of t for its 3xx resp: COURIER_OK with *next (new; it takes t's caller,
 * id, settings and chain; t is left with caller_gone set, to be freed), COURIER_REDIRECT_STOP as a
 * positive 1 when the hook stopped the chain (deliver resp), or a failure code (err filled, t
 * unchanged). Worker thread. */
CR_HIDDEN int cr_redirect_next(courier_engine *e, cr_transfer *t, const courier_response *resp, cr_transfer **next,
                               courier_error *err);
/* redirect.c: moves t's chain into the response it is answered with (final hop). */
CR_HIDDEN void cr_redirect_attach(cr_transfer *t, courier_response *resp);
/* cache.c: the cache's send-path work (key, policy, lookup) for a redirect hop, with the policy and
 * expiry of the transfer that started the chain. Worker thread. */
CR_HIDDEN int cr_cache_before_hop(courier_engine *e, const cr_transfer *prev, cr_transfer *next, courier_error *err);

struct courier_response {
    int status;
    uint64_t id;
    char *method;
    char *url;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    courier_metrics metrics;
    _Atomic(struct cr_jresp *) jresp; /* JSON: parsed body, results (serialize.c); made on demand */
    int attempts;    /* attempts it took (schedule.c) */
    double waited_s; /* backoff waited between them */
    atomic_int extra_refs; /* courier_response_retain: references beyond the first */
    /* Cache (cache.c). */
    int cache_status;        /* courier_cache_status */
    int cache_reason;        /* courier_cache_reason */
    int64_t cache_created_ms;
    int64_t cache_expires_ms;
    int64_t cache_age_s;
    char *cache_key;         /* owned, or NULL */
    char *file; /* the downloaded file's path (transfer.c), or NULL */
    /* Cache (cache.c): nonzero when method, url, cache_key and the header items and strings are
     * parts of the response's own allocation (a cache hit is built in one block plus its body).
     * courier_response_free then frees the block alone; code that changes or frees one of those
     * parts must call cr_response_detach first. The body is always allocated on its own. */
    int one_block;
    cr_hops *hops; /* the redirect chain (redirect.c), or NULL; owned */
};

/* transport.c: gives a one-block response (see one_block) allocations of its own for method, url,
 * cache_key and headers, so they can be changed like those of any response. COURIER_OK (also for a
 * response that is not one block) or COURIER_E_NO_MEMORY (the response is unchanged). */
CR_HIDDEN int cr_response_detach(courier_response *r);

/* ---- the engine (engine.c) ------------------------------------------------------------------- */

struct courier_engine {
    courier_config *config; /* owned copy, read-only after open */
    char *store_dir;
    int store_is_temp;

    pthread_t worker;
    pthread_mutex_t lock;
    /* Guarded by lock. */
    cr_transfer *incoming_head;
    cr_transfer *incoming_tail;
    uint64_t *cancels;
    size_t ncancels;
    size_t cap_cancels;
    int cancel_all;
    int closing;
    int free_on_exit; /* closed from the worker itself: it frees the engine when its loop ends */
    bool proxy_env;   /* the environment named a proxy when the engine opened */
    struct cr_urlh *urlh[CR_URLH_SLOTS]; /* worker only: recently sent URLs, parsed (transport.c) */
    char accept_encoding[64]; /* "Accept-Encoding: <what this libcurl decodes>", sent as a header
                                 line (cheaper per request than curl's own, which it then skips) */
    cr_idset live; /* ids submitted and not yet completed */

    atomic_uint_fast64_t next_id;
    atomic_long queued;
    atomic_long active;

    /* Worker thread only. */
    CURLM *multi;
    cr_transfer *active_head;
    long idle_watch; /* transfers on the wire with an idle timeout (engine.c) */
    CURL **pool;
    size_t npool;
    /* Scheduling (schedule.c): worker-only unless noted. */
    struct cr_sched *sched;
    atomic_int mock_enabled;     /* any thread */
    struct courier_call *external_done; /* guarded by lock: custom transports' completed calls */
    struct cr_cache *cache; /* the cache (cache.c); the store opens on first use */
    _Atomic(struct cr_obs *) obs; /* logging and monitors (log.c), made on first use; any thread */
    struct cr_journal *journal;   /* frozen requests (journal.c); NULL before open, after close */
    struct cr_monitor *monitor;   /* reachability (monitor.c); owned by the journal's lifetime */
    struct cr_jar *jar;           /* the cookie jar (cookies.c); NULL when off */
    struct courier_challenge *challenges; /* guarded by lock: asked, not answered (auth.c) */
    struct courier_challenge *answered;   /* guarded by lock: answered, for the worker */
    struct cr_catalog *catalog;           /* APIs, routes, response descriptors (catalog.c) */
};

/* ---- APIs, routes, response descriptors by name (catalog.c) ------------------------------------ */

CR_HIDDEN int cr_catalog_new(courier_engine *e);
CR_HIDDEN void cr_catalog_free(courier_engine *e);
/* At send: the response descriptors whose method and path pattern match r go into t's jspec. */
CR_HIDDEN int cr_catalog_attach(courier_engine *e, const courier_request *r, cr_transfer *t);

/* ==== JSON, mapping, serializers (json.c, mapping.c, serialize.c) ============================= */

#define CR_JSON_DEFAULT_DEPTH 512
#define CR_JSON_MAX_DEPTH 2048 /* jansson's own compile-time limit */
#define CR_JSON_DEFAULT_MAX_BYTES CR_DEFAULT_MAX_RESPONSE
#define CR_JSON_DEFAULT_PARALLEL_MIN ((int64_t)256 * 1024) /* split top-level arrays from this size */
#define CR_JSON_MAX_PARTS 4

/* json.c */
/* Options with defaults filled in and limits clamped; `in` may be NULL. */
CR_HIDDEN void cr_json_options_resolve(const courier_json_options *in, courier_json_options *out);
/* Parses with resolved options. *out new (json_decref). COURIER_E_JSON, _TOO_LARGE, _NO_MEMORY. */
CR_HIDDEN int cr_json_parse(const void *data, size_t len, const courier_json_options *opts, json_t **out,
                            courier_error *err);
/* One key path component (object key or decimal array index), and a whole dotted path. Borrowed. */
CR_HIDDEN const json_t *cr_json_step(const json_t *v, const char *seg, size_t len);
CR_HIDDEN const json_t *cr_json_path(const json_t *v, const char *path, size_t len);
/* Shortest round-trip text of a finite double, always with '.' or an exponent. Length or -1. */
CR_HIDDEN int cr_json_format_real(double d, char *buf, size_t size);
/* Appends v's JSON text (COURIER_JSON_DUMP_* flags) to out. */
CR_HIDDEN int cr_json_dump(const json_t *v, unsigned flags, cr_buf *out);
/* The one JSON writer besides jansson's (cr_json_dump and the journal's records use it): v in
 * decimal at p (room for 21 bytes; returns the length; snprintf costs ~1,500 instructions a call);
 * v appended in decimal; s (len bytes of UTF-8) appended as a JSON string, with the
 * COURIER_JSON_DUMP_ASCII and _ESCAPE_SLASH flags and CR_JSON_PUT_CONTROL_U (every control
 * character as \u00XX, never \n and the like: the journal's records keep their bytes). The
 * appenders return 0, or -1 without memory. */
#define CR_JSON_PUT_CONTROL_U 0x100u
#define CR_JSON_CSTRING SIZE_MAX /* as cr_json_put_string's len: s is NUL-terminated */
CR_HIDDEN size_t cr_json_format_int(char *p, int64_t v);
CR_HIDDEN int cr_json_put_int(cr_buf *b, int64_t v);
CR_HIDDEN int cr_json_put_string(cr_buf *b, const char *s, size_t len, unsigned flags);

/* mapping.c */
/* Adds a reference and seals (no more changes). NULL in, NULL out. Released by the _free. */
CR_HIDDEN courier_mapping *cr_mapping_retain(const courier_mapping *m);
CR_HIDDEN courier_envelope *cr_envelope_retain(const courier_envelope *e);
/* Applies m to `in`; `prefix` is in's key path in its document, for error paths. *out new. */
CR_HIDDEN int cr_mapping_apply(const courier_mapping *m, const json_t *in, const char *prefix, json_t **out,
                               courier_mapping_error *where, courier_error *err);

typedef struct cr_result_spec {
    char *name;
    char *key_path; /* NULL: the envelope's data path, else the root */
    courier_mapping *mapping;
    unsigned flags; /* COURIER_RESULT_* */
} cr_result_spec;

/* What a request asks of its response's JSON. */
typedef struct cr_jspec {
    char *key_path;
    courier_mapping *mapping;
    cr_result_spec *results;
    size_t nresults;
    int envelope_set; /* 1: `envelope` replaces the engine's (NULL: none) */
    courier_envelope *envelope;
    /* Response descriptors whose method and path pattern matched at send (catalog.c), in
     * registration order: the first whose statuses hold the response's status applies its key
     * path and mapping (serialize.c), to a success without a key path or mapping of the request's
     * own, and to an error body (the error model, delivered with the failure). */
    struct cr_desc_spec { int lo, hi; char *key_path; courier_mapping *mapping; } *descs;
    size_t ndescs;
} cr_jspec;

/* A deep copy (NULL in: an empty spec); NULL on no memory. */
CR_HIDDEN cr_jspec *cr_jspec_copy(const cr_jspec *s);
CR_HIDDEN void cr_jspec_free(cr_jspec *s);
/* Appends a response descriptor (key path copied, mapping retained). */
CR_HIDDEN int cr_jspec_add_desc(cr_jspec *s, int lo, int hi, const char *key_path, const courier_mapping *mapping);

typedef struct cr_named {
    char *name;
    json_t *value; /* NULL when an optional result was absent */
} cr_named;

/* A response's JSON: the parsed body (on demand), the results and the envelope's verdict. */
typedef struct cr_jresp {
    _Atomic(json_t *) doc;     /* set once, by whichever thread parses first */
    int decodable;             /* the content type has a decoder */
    cr_callback *decoder;      /* a custom decoder (retained), or NULL for JSON */
    char *content_type;
    courier_json_options options;
    int applied;               /* a key path, mapping or envelope data path was applied */
    json_t *data;              /* the default result */
    cr_named *results;
    size_t nresults;
    int has_env_code;
    int64_t env_code;
    char *env_message;
    int has_merr;
    courier_mapping_error merr;
} cr_jresp;

/* Applies the envelope (may be NULL) and the spec (may be NULL) to doc, filling j. */
CR_HIDDEN int cr_json_apply_spec(const cr_jspec *s, const courier_envelope *env, const json_t *doc, cr_jresp *j,
                                 courier_error *err);

/* serialize.c */
typedef struct cr_codec {
    char *mime;           /* lower-case "type/subtype"; a subtype or type of "*" matches any */
    cr_callback *decoder; /* NULL: decode as JSON */
} cr_codec;

/* What an engine's configuration says about JSON. */
typedef struct cr_jconf {
    courier_json_options options;
    courier_envelope *envelope;
    cr_codec *codecs;
    size_t ncodecs;
} cr_jconf;

/* A deep copy (callbacks and envelope retained); NULL in or no memory: NULL. */
CR_HIDDEN struct cr_jconf *cr_jconf_copy(const struct cr_jconf *c);
CR_HIDDEN void cr_jconf_free(struct cr_jconf *c);
/* The response's JSON state, made on first use (from the content type alone when the transport did
 * not attach one). NULL on no memory. */
CR_HIDDEN cr_jresp *cr_jresp_of(const courier_response *r);
/* Frees a response's JSON state (courier_response_free calls it). */
CR_HIDDEN void cr_response_json_free(courier_response *r);
/* The engine's hook where an answer is judged, before the status check: chooses the decoder by
 * content type and, for a status below 400 when the request or engine asks for JSON, parses the
 * body and applies the envelope, key paths and mappings. Returns OK or the failure (COURIER_E_JSON,
 * COURIER_E_API, COURIER_E_MAPPING, COURIER_E_NO_MEMORY) with err filled; the response stays. */
CR_HIDDEN int cr_json_finish(const cr_transfer *t, courier_response *r, courier_error *err);

/* ==== Scheduling, mock, custom transports (schedule.c, mock.c) ================================ */

enum { CR_T_NEW = 0, CR_T_WAITING, CR_T_ACTIVE, CR_T_TIMER, CR_T_FOLLOWER, CR_T_CUSTOM };

typedef struct cr_interceptor {
    courier_before_send_fn before;
    courier_after_receive_fn after;
    cr_callback *owner; /* user + user_free */
} cr_interceptor;

typedef struct cr_transport_reg {
    char *name;
    courier_transport vt;
    cr_callback *owner;
} cr_transport_reg;

/* What a configuration says about scheduling (copied into the engine at open). */
typedef struct cr_sched_conf {
    int has_retry;
    struct cr_retry_rule retry;
    long guard_ms;
    int mock_enabled;
    cr_interceptor *interceptors;
    size_t ninterceptors;
    cr_transport_reg *transports;
    size_t ntransports;
} cr_sched_conf;

CR_HIDDEN cr_sched_conf *cr_sched_conf_copy(const cr_sched_conf *c); /* NULL in: defaults */
CR_HIDDEN void cr_sched_conf_free(cr_sched_conf *c);
/* The configuration's scheduling part, made on first use. NULL on no memory. */
CR_HIDDEN cr_sched_conf *cr_sched_conf_of(courier_config *c);

/* A request's mock answer (mock.c). */
typedef struct cr_mock {
    int status;
    int has_body;
    char *body;
    size_t body_len;
    char *file;
    cr_kvlist headers;
    int error;
    long delay_ms;
    cr_callback *fn;
} cr_mock;

CR_HIDDEN cr_mock *cr_mock_copy(const cr_mock *m); /* NULL in: a new empty mock */
CR_HIDDEN void cr_mock_free(cr_mock *m);
/* Makes the mock's answer for t (worker thread): COURIER_OK with *out, or a failure code. */
CR_HIDDEN int cr_mock_answer(cr_transfer *t, courier_response **out, courier_error *err);

/* A custom transport's call (the public courier_call). */
struct courier_call {
    cr_transfer *t;
    courier_engine *e;
    atomic_int completed;
    int code;
    courier_response *resp;
    char message[200];
    struct courier_call *next_done; /* in the engine's external list */
};

/* schedule.c: the worker's side of scheduling. */
CR_HIDDEN int cr_sched_new(courier_engine *e);
CR_HIDDEN void cr_sched_free(courier_engine *e);
/* Prepare-time work on the sending thread: host, priority, retry rule, coalesce key, mock copy,
 * transport, interceptors' before-send, and the frequent-request guard. */
CR_HIDDEN int cr_sched_prepare(courier_engine *e, const courier_request *r, cr_transfer *t, courier_outgoing *o,
                               courier_error *err);
/* After the outgoing view became the transfer: host key and coalescing key. */
CR_HIDDEN int cr_sched_finish_prepare(const courier_request *r, cr_transfer *t, courier_error *err);
/* The frequent-request guard: COURIER_OK (and recorded) or COURIER_E_TOO_FREQUENT. Caller holds
 * the engine's lock. *g is made on first use. */
struct cr_guard;
CR_HIDDEN int cr_guard_check(struct cr_guard **g, long window_ms, const cr_transfer *t, courier_error *err);
CR_HIDDEN void cr_guard_free(struct cr_guard *g);
/* Whether a transfer that ended with (code, resp) is tried again: the delay in ms, or -1. */
CR_HIDDEN long cr_retry_delay(const cr_transfer *t, int code, const courier_response *resp, uint64_t *rng);
/* Milliseconds from a monotonic clock. */
CR_HIDDEN int64_t cr_mono_ms(void);
/* Initialises a condition variable whose timed waits run on the clock cr_cond_deadline reads:
 * CLOCK_MONOTONIC where pthread_condattr_setclock exists, CLOCK_REALTIME on macOS, which lacks it
 * (and whose timed waits cannot use another clock). */
CR_HIDDEN void cr_cond_init(pthread_cond_t *cv);
/* The absolute time `us` microseconds from now, for pthread_cond_timedwait on a condition variable
 * made by cr_cond_init. */
CR_HIDDEN struct timespec cr_cond_deadline(int64_t us);


/* ==== Cache (store.c, cache.c, cache_key.c, cache_http.c) ======================================= */

struct cr_cache_req;
struct cr_cache_xfer;
/* The engine's completion and start steps, handed to the cache so it can finish transfers. */
typedef void (*cr_complete_fn)(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                               courier_error *err);
typedef void (*cr_start_fn)(courier_engine *e, cr_transfer *t);
/* Engine open/close: the cache's state (the store itself opens on first use). */
CR_HIDDEN int cr_cache_engine_init(courier_engine *e, courier_error *err);
CR_HIDDEN void cr_cache_engine_free(courier_engine *e);
CR_HIDDEN void cr_cache_req_free(struct cr_cache_req *c);
CR_HIDDEN void cr_cache_xfer_free(struct cr_cache_xfer *x);
/* courier_send, after the transfer is prepared and has its id: key, policy, lookup. A hit is kept
 * in t->cache for the worker; a revalidation adds conditional headers to t. */
CR_HIDDEN int cr_cache_before_send(courier_engine *e, const courier_request *r, cr_transfer *t,
                                   courier_error *err);
/* Worker, for each incoming transfer: true when the cache answered it (completed with `complete`;
 * a background revalidation is started with `start`). */
CR_HIDDEN bool cr_cache_answer(courier_engine *e, cr_transfer *t, cr_complete_fn complete, cr_start_fn start);
/* Worker, first thing when an answer arrives (before it is judged): a 304 merged into the stored
 * entry, or a stale entry served on error (stale-if-error). Returns the (possibly new) code. */
CR_HIDDEN int cr_cache_on_answer(courier_engine *e, cr_transfer *t, int code, courier_response **resp,
                                 courier_error *err);
/* Worker, after the judgement: true when the response is to be written; the completion then runs
 * from cr_cache_flush, after the turn's one write transaction. */
CR_HIDDEN bool cr_cache_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                              courier_error *err);
/* Worker, once per loop turn before waiting: writes what was deferred, then completes it. */
CR_HIDDEN void cr_cache_flush(courier_engine *e, cr_complete_fn complete);

/* ==== Logging and event monitors (log.c) ======================================================= */

/* Request lifecycle hooks: each emits a courier_event to the monitors and a log line to the sinks.
 * When nobody listens they cost one atomic load. Call them on the thread where the event happens
 * (the worker thread for all but custom callers); t is borrowed for the call. */
/* The worker took t from `incoming` (before routing it, or cancelling it because the engine
 * closes): records the time FINISHED measures from. Every WILL_SEND is followed by one FINISHED. */
CR_HIDDEN void cr_event_will_send(courier_engine *e, cr_transfer *t);
/* An attempt of t started on the wire (curl or a custom transport). */
CR_HIDDEN void cr_event_did_send(courier_engine *e, cr_transfer *t);
/* Bytes moved (from a curl progress callback): emits only when a count changed. Totals <= 0 mean
 * unknown. */
CR_HIDDEN void cr_event_progress(courier_engine *e, cr_transfer *t, int64_t down_now, int64_t down_total,
                                 int64_t up_now, int64_t up_total);
/* t's caller is about to be answered (once per caller, just before its completion runs). */
CR_HIDDEN void cr_event_finished(courier_engine *e, cr_transfer *t, int code, const courier_response *resp,
                                 const courier_error *err);
/* t's answer comes from the cache (before its FINISHED). */
CR_HIDDEN void cr_event_from_cache(courier_engine *e, cr_transfer *t, const courier_response *resp);
/* An attempt of t failed with code (resp may be NULL) and attempt number `attempt` (2 for the first
 * retry) starts after delay_ms. */
CR_HIDDEN void cr_event_retried(courier_engine *e, cr_transfer *t, int attempt, int code,
                                const courier_response *resp, long delay_ms);
/* A request was written to the journal (request_id may be 0 for one that never had an id). */
CR_HIDDEN void cr_event_frozen(courier_engine *e, uint64_t request_id, const char *method, const char *url);
/* Any event: for callers whose event has no transfer. ev->size must be sizeof(courier_event). */
CR_HIDDEN void cr_event_emit(courier_engine *e, const courier_event *ev);
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

/* ==== Transfers: multipart, file bodies, downloads with resume, progress (transfer.c) ========== */

typedef struct cr_part {
    char *name;
    char *data;
    size_t len;
    char *path; /* a file part, streamed from disk */
    char *filename;
    char *content_type;
    cr_kvlist headers;
} cr_part;

typedef struct cr_parts {
    cr_part *items;
    size_t count;
    size_t cap;
} cr_parts;

CR_HIDDEN void cr_parts_free(struct cr_parts *p);
/* Request -> transfer at prepare (copies; params become leading text parts when parts exist). */
CR_HIDDEN int cr_transfer_copy_transfers(const courier_request *r, cr_transfer *t, const cr_kvlist *params,
                                         courier_error *err);
/* Worker: the easy handle's upload, download and progress options for t (after the common ones). */
CR_HIDDEN int cr_transfer_setup(cr_transfer *t, struct curl_slist **extra_headers, courier_error *err);
/* Worker: the body callback's work for a download file; returns bytes taken (len) or 0 to abort. */
CR_HIDDEN size_t cr_transfer_write(cr_transfer *t, const char *data, size_t len);
/* Worker: after curl finished: closes files; a complete download moves into place and its path goes
 * into the response. Returns OK or a failure code. */
CR_HIDDEN int cr_transfer_done(cr_transfer *t, CURLcode result, courier_response *resp, courier_error *err);
/* Releases t's transfer state (files closed, mime freed). */
CR_HIDDEN void cr_transfer_release(cr_transfer *t);

/* ==== Frozen requests and reachability (journal.c, monitor.c) ================================== */

struct cr_journal;
struct cr_monitor;

/* Engine open, after the store directory and the cache, before the worker starts: opens the
 * journal (a corrupt one is moved aside: COURIER_E_JOURNAL_CORRUPT) and the monitor, and starts the
 * journal thread, which waits for cr_journal_start. `answer` answers a detached transfer and frees
 * it (the engine's cr_cache_flush step). On failure nothing is left open. */
CR_HIDDEN int cr_journal_open(courier_engine *e, cr_complete_fn answer, courier_error *err);
/* Engine open, once the worker runs: lets the journal thread start (replay at open). */
CR_HIDDEN void cr_journal_start(courier_engine *e);
/* engine_free, first (after the worker stopped, before logging and the store go): writes what is
 * queued, answers it, stops the journal thread and the monitor, releases the journal. NULL-safe. */
CR_HIDDEN void cr_journal_close(courier_engine *e);
/* courier_send, once the transfer is prepared: copies the request's freeze settings into t.
 * COURIER_E_RESEND_POLICY_UNKNOWN when a freezable request names a policy e does not have. */
CR_HIDDEN int cr_frozen_attach(courier_engine *e, const courier_request *r, cr_transfer *t, courier_error *err);
/* finish(), before the cache write: a network failure (or COURIER_E_OFFLINE) of a transfer whose
 * policy allows it is handed to the journal, which answers the caller with COURIER_E_FROZEN after
 * the durable commit. True when it took over answering (t->caller_gone is then set). Worker. */
CR_HIDDEN bool cr_frozen_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                               courier_error *err);
/* courier_send, after the cache lookup: a freezable request (no cache policy, no mock, no custom
 * transport) sent while the monitor says offline is handed to the journal at once, without a trip
 * through the worker; the journal answers it (COURIER_E_FROZEN) and frees it. True when taken
 * (courier_send then returns COURIER_OK with t's id and must not touch t). */
CR_HIDDEN bool cr_frozen_offline_send(courier_engine *e, cr_transfer *t);
/* Wakes the journal thread: CR_WAKE_TURN looks for work; CR_WAKE_REPLAY_NOW also makes every
 * request not tried since now due at once (the network came back). Any thread. */
#define CR_WAKE_TURN 0x1u
#define CR_WAKE_REPLAY_NOW 0x2u
CR_HIDDEN void cr_journal_wake(courier_engine *e, unsigned how);

/* monitor.c. Open/close run inside cr_journal_open/close. */
CR_HIDDEN int cr_monitor_open(courier_engine *e, courier_error *err);
CR_HIDDEN void cr_monitor_close(courier_engine *e);
/* Worker, after every attempt (mocks and custom transports are ignored): a response means online;
 * cannot-resolve / cannot-connect mean offline when the configuration says so. */
CR_HIDDEN void cr_monitor_observe(courier_engine *e, const cr_transfer *t, int code, const courier_response *resp);
/* Any thread: the monitor says offline. */
CR_HIDDEN bool cr_monitor_offline(courier_engine *e);
/* Worker, before an attempt goes on the wire: true when it must fail with COURIER_E_OFFLINE. */
CR_HIDDEN bool cr_monitor_blocks(courier_engine *e, const cr_transfer *t);
/* Journal thread: runs a due probe; returns the monotonic ms of the next one (INT64_MAX: none). */
CR_HIDDEN int64_t cr_monitor_tick(courier_engine *e, int64_t mono_ms);
/* Journal thread: gives a changed state to the listeners. */
CR_HIDDEN void cr_monitor_dispatch(courier_engine *e);
/* Any thread: a source's report (the OS watch, or courier_reachability_report): status (UNKNOWN:
 * leaves online/offline as it is), kind and expensive. A change of kind applies that kind's limits
 * at once (the worker is woken to start or fail what waits; the journal's replay concurrency). */
CR_HIDDEN void cr_monitor_report(courier_engine *e, int status, courier_network_kind kind, int expensive);
/* Engine open, once the worker's multi handle exists: starts the OS watch when configured. */
CR_HIDDEN void cr_monitor_start_watch(courier_engine *e);
/* Worker: the request limits of the current kind (the engine's own where the kind sets none). */
CR_HIDDEN void cr_monitor_limits(courier_engine *e, long *per_host, long *total);
/* Worker: true when t must fail with COURIER_E_CELLULAR (it said "not on cellular"). */
CR_HIDDEN bool cr_monitor_refuses(courier_engine *e, const cr_transfer *t);
/* netwatch.c: the OS watch (a thread, or the platform's monitor) reporting to cr_monitor_report;
 * NULL when it cannot start or the platform has none. */
struct cr_netwatch;
CR_HIDDEN struct cr_netwatch *cr_netwatch_start(courier_engine *e);
CR_HIDDEN void cr_netwatch_stop(struct cr_netwatch *w);
/* journal.c: the replay concurrency (n <= 0: the configured one); any thread. */
CR_HIDDEN void cr_journal_set_concurrency(courier_engine *e, long n);

/* ==== Cookies, credentials, proxies, challenges (cookies.c, auth.c) ========================== */

/* What a configuration or a request says; a transfer holds the two merged. Each group is set or
 * not as a whole (a request's group replaces the engine's). */
typedef struct cr_auth {
    char *user, *password; /* user NULL: no credentials */
    unsigned schemes;
    char *proxy_user, *proxy_password;
    unsigned proxy_schemes;
    int has_proxy;         /* proxy and no_proxy were set ("" proxy: direct) */
    char *proxy, *no_proxy;
    cr_callback *challenge; /* courier_challenge_fn */
    /* A transfer's only (they travel with it from hop to hop of a redirect chain): */
    char *origin;           /* scheme://host:port of the request's URL: credentials and the handler
                               are for it alone */
    int challenged;         /* the handler was asked for this request */
} cr_auth;

/* auth.c */
CR_HIDDEN void cr_auth_free(cr_auth *a);
/* The request's groups over the engine's (either may be NULL) for a transfer to `url`: *out new, or
 * NULL when nothing is set. COURIER_OK or COURIER_E_NO_MEMORY. A redirect hop takes its previous
 * hop's cr_auth whole (origin and challenged included). */
CR_HIDDEN int cr_auth_merge(const cr_auth *req, const cr_auth *cfg, const char *url, cr_auth **out);
CR_HIDDEN cr_auth *cr_auth_copy(const cr_auth *a); /* NULL in or no memory: NULL */
/* transport.c's options: the engine's proxy on every handle (base), the transfer's own (setup:
 * credentials, and a proxy that differs from the engine's; sets easy_dirty). CURLcode. */
CR_HIDDEN int cr_auth_base(const cr_auth *cfg, CURL *h);
CR_HIDDEN int cr_auth_setup(courier_engine *e, cr_transfer *t);
/* Worker, when an attempt ends with a response: true when it is a challenge the handler takes
 * (the handler was called; the transfer must wait off the wire: `hold` puts it there first). */
CR_HIDDEN bool cr_challenge_offer(courier_engine *e, cr_transfer *t, courier_response *resp,
                                  void (*hold)(courier_engine *e, cr_transfer *t));
/* Worker, each turn: the answered challenges (taken under the engine's lock), in answer order, a
 * list linked by cr_challenge_next; each is consumed with cr_challenge_apply or cr_challenge_free. */
CR_HIDDEN struct courier_challenge *cr_challenges_take(courier_engine *e);
/* Applies an answer to t (credentials into t->auth) and frees the challenge; returns true when t
 * is to be sent again, false when the answer declined (t->held is then the response to deliver). */
CR_HIDDEN bool cr_challenge_apply(struct courier_challenge *ch, cr_transfer *t);
CR_HIDDEN uint64_t cr_challenge_id(const struct courier_challenge *ch);
CR_HIDDEN struct courier_challenge *cr_challenge_next(const struct courier_challenge *ch);
CR_HIDDEN void cr_challenge_free(struct courier_challenge *ch);
/* engine_free, first: challenges not answered yet are cut off from the engine (their answers
 * become no-ops), answered ones not taken are freed. */
CR_HIDDEN void cr_challenges_detach(courier_engine *e);

/* cookies.c */
struct cr_jar;
/* Engine open, after the journal opened: the jar, read from the store (nothing when off). */
CR_HIDDEN int cr_jar_open(courier_engine *e, courier_error *err);
CR_HIDDEN void cr_jar_close(courier_engine *e);
/* transport.c: the jar on a new or reset easy handle (share handle, cookie engine on). */
CR_HIDDEN int cr_jar_base(courier_engine *e, CURL *h);
/* curl_easy_cleanup for the engine's easy handles (frees what cr_jar_base left on one). NULL-safe. */
CR_HIDDEN void cr_easy_cleanup(CURL *h);
CR_HIDDEN void cr_easy_reset(CURL *h);
/* Worker, before a transfer goes on the wire: re-reads the store's jar when another engine or
 * process changed it. */
CR_HIDDEN void cr_jar_refresh(courier_engine *e);
/* Worker, after an attempt whose response carried Set-Cookie: writes what changed to the store. */
CR_HIDDEN void cr_jar_save(courier_engine *e);
/* journal.c: the journal environment's cookie database, for cookies.c (NULL/0 when none). */
struct MDB_env;
CR_HIDDEN int cr_journal_cookie_db(courier_engine *e, struct MDB_env **env, unsigned *dbi);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_INTERNAL_H */
