/*
 * http/http.h — the HTTP layer as the layers above may use it: the configuration and the
 * request (request.c), the transfer and the wire (transport.c, transfer.c, redirect.c), the
 * response (response.c), serializers (serialize.c), mocks (mock.c), cookies and credentials
 * (cookies.c, auth.c).
 */
#ifndef COURIER_HTTP_H
#define COURIER_HTTP_H

#include "json/json_internal.h"

/* Hidden like every internal declaration (see base/base.h). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

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

/* ---- configuration (request.c) -------------------------------------------------------------- */

/* ---- security policies (security.c) --------------------------------------------------------- */

struct courier_security {
    int mode;             /* courier_pinning_mode */
    char *pins;           /* PUBLIC_KEY: libcurl's pin string or a key file; CERTIFICATE: a PEM file */
    char *ca_file;
    int allow_invalid;    /* CURLOPT_SSL_VERIFYPEER off (not with CERTIFICATE pinning) */
    int validates_domain; /* CURLOPT_SSL_VERIFYHOST 2 (the default) */
    char *cert, *key, *key_password; /* the client certificate (mutual TLS) */
    int requires_status;  /* CURLOPT_SSL_VERIFYSTATUS: a stapled OCSP response required */
};

CR_HIDDEN void cr_security_defaults(courier_security *s);
CR_HIDDEN courier_security *cr_security_copy(const courier_security *src); /* NULL: no memory */
/* The engine configuration's policy, created on first use; NULL on no memory. */
CR_HIDDEN courier_security *cr_config_security(courier_config *c);
/* The engine's policy (NULL: defaults) on a new or reset handle. CURLcode. */
CR_HIDDEN int cr_security_base(const courier_security *s, CURL *h);
/* Whether a connection under the policy (NULL: the defaults) had its certificate and name verified:
 * hsts.c learns Strict-Transport-Security only then (RFC 6797 8.1: no TLS errors). */
CR_HIDDEN bool cr_security_verifies(const courier_security *s);
struct cr_transfer;
/* A request's own policy on its handle, replacing the engine's (sets easy_dirty). CURLcode. */
CR_HIDDEN int cr_security_setup(struct cr_transfer *t);
/* Whether the transfer's policy (its own, else the engine's) pins whole certificates. */
CR_HIDDEN bool cr_security_pins_certificate(const struct cr_transfer *t);

/* pool.c: the connection pool's figures (docs/design/pool.md). The engine makes its cr_pool at open
 * (NULL: no memory) and frees it after the multi handle's cleanup (which closes the connections
 * through the pool's close callback). cr_pool_base puts the socket callbacks on a new or reset
 * handle (CURLcode); cr_pool_connected runs from the prerequest callback (the transfer's request is
 * about to go on a connection: its local address), cr_pool_release when the transfer leaves the
 * wire. Worker thread. */
typedef struct cr_pool cr_pool;
CR_HIDDEN cr_pool *cr_pool_new(void);
CR_HIDDEN void cr_pool_free(cr_pool *p);
CR_HIDDEN int cr_pool_base(cr_pool *p, CURL *h);
CR_HIDDEN void cr_pool_connected(struct cr_transfer *t, const char *local_ip, int local_port);
CR_HIDDEN void cr_pool_release(struct cr_transfer *t);

/* ---- names, addresses and sockets (netopts.c) ------------------------------------------------ */

#define CR_NET_DNS_CACHE 0x1u /* dns_cache_s was set */
#define CR_NET_IP 0x2u        /* ip_resolve */
#define CR_NET_EYEBALLS 0x4u  /* happy_eyeballs_ms */
#define CR_NET_UNIX 0x8u      /* unix_socket (NULL then: TCP, replacing the engine's socket) */
#define CR_NET_HTTPV 0x10u    /* http_version */
#define CR_NET_DECODE 0x20u   /* decode_content */
#define CR_NET_MAX_IDLE 0x40u /* max_idle */
#define CR_NET_IDLE_AGE 0x80u /* idle_age_s */

/* A configuration's or a request's DNS overrides and socket (courier_config_add_resolve...), and a
 * transfer's (its request's made final at prepare: connect_to then holds the request's resolve
 * entries, its own connect_to entries and the engine's, in that order). Lists in curl's formats
 * ("host:port:addr,addr", "host:port:to_host:to_port"), made with curl_slist_append. */
typedef struct cr_netopts {
    unsigned set;
    struct curl_slist *resolve;
    struct curl_slist *connect_to;
    char *doh_url;
    long dns_cache_s;
    long ip_resolve;        /* CURL_IPRESOLVE_* */
    long happy_eyeballs_ms;
    char *unix_socket;      /* "@name": an abstract socket */
    int http_version;       /* courier_http_version */
    int decode_content;     /* 0: bodies as the server coded them */
    long max_idle;          /* the pool's idle connections (CURLMOPT_MAXCONNECTS) */
    long idle_age_s;        /* CURLOPT_MAXAGE_CONN */
} cr_netopts;

CR_HIDDEN void cr_netopts_free(cr_netopts *n);
/* A deep copy into *out (NULL for NULL). COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_netopts_copy(const cr_netopts *src, cr_netopts **out);
/* The transfer's options from its request's (may be NULL: *out NULL) over the engine's.
 * COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_netopts_prepare(const cr_netopts *request, const cr_netopts *engine, cr_netopts **out);
/* transport.c: the engine's options on a new or reset handle (NULL: none). CURLcode. */
CR_HIDDEN int cr_netopts_base(const cr_netopts *engine, CURL *h);
struct cr_transfer;
/* transport.c, ws.c: the request's own options on its handle, for a transfer with t->net or
 * t->http2_only (sets easy_dirty when it changes the handle). CURLcode. */
CR_HIDDEN int cr_netopts_setup(struct cr_transfer *t);
/* Whether a transfer with these settings (the request's over the engine's; either may be NULL)
 * requires HTTP/2 (COURIER_HTTP_V2_ONLY). */
CR_HIDDEN bool cr_netopts_http2_only(const cr_netopts *request, const cr_netopts *engine);
/* Whether bodies are to arrive as the server coded them (the request's setting over the engine's). */
CR_HIDDEN bool cr_netopts_raw_content(const cr_netopts *request, const cr_netopts *engine);
/* engine.c: the pool's idle connections (the engine's setting, else `fallback`). */
CR_HIDDEN long cr_netopts_max_idle(const cr_netopts *engine, long fallback);

/* ---- routes and API versions (route.c) ----------------------------------------------------- */

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
    int store_must_exist; /* open only a store directory that exists (engine.c open_store_dir) */
    int64_t stream_buffer; /* a stream's unread body before its transfer pauses (0: the default) */
    cr_callback *validator;
    struct cr_jconf *jconf; /* JSON: envelope, decoders, parse limits (serialize.c); NULL: defaults */
    /* Scheduling, mock, interceptors, transports (schedule.c, mock.c). */
    struct cr_sched_conf *sched;
    /* Cache (cache.c): 0 means the default. */
    int64_t cache_max_bytes;
    int64_t cache_expiry_ms;
    int cache_policy;
    cr_callback *clock; /* courier_clock_fn, or NULL: the system clock */
    int cache_durability; /* courier_cache_durability */
    int cache_status_header; /* nonzero: responses carry Cache-Status (RFC 9211) */
    char *cache_store; /* the cache's store: a directory (LMDB) or a redis:// URL; NULL: "<store dir>/cache" */
    /* Frozen requests and reachability (journal.c, monitor.c): plain values, 0 means the default. */
    struct cr_frozen_conf {
        long concurrency, backoff_base_ms, backoff_max_ms, lease_ms, poll_ms;
        int64_t expiry_ms;
        int paused;
        int monitor_from_errors;
        long probe_interval_ms;
        char probe[512];
        char store[1024]; /* the journal's store: "" the engine's directory, a directory, or a redis:// URL */
        int replicas;                /* Redis: WAIT for this many replicas after a freeze (0: none) */
        int64_t replicas_timeout_ms; /* ... at most this long */
    } frozen;
    /* Cookies, credentials, proxies, challenge handler (cookies.c, auth.c). */
    int cookies_off;
    int hsts_off; /* hsts.c: HSTS off (courier_config_set_hsts(0)) */
    int alt_svc;  /* hsts.c: libcurl's Alt-Svc cache on, its file in the store directory */
    struct cr_auth *auth; /* NULL: none set */
    cr_http_opts http; /* redirects, connect and idle timeouts (redirect.c) */
    char *param_charset; /* query and form parameters' charset (charset.c); NULL: UTF-8 */
    cr_netopts *net; /* DNS overrides, DoH, IP version, Unix socket (netopts.c); NULL: none */
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
    char *method; /* in the request's own allocation (courier_request_new), or NULL (borrowed) */
    char *target; /* likewise, unless target_owned: then its own allocation (cr_request_take_target) */
    int target_owned;
    /* target is an API declaration's path pattern with parameters (catalog.c) that no object has
     * filled yet: the send fails with COURIER_E_ROUTE_PARAMETER rather than sending ":id" (issue 28) */
    int route_unfilled;
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
    struct cr_cache_req *cache; /* cache policy, expiry, key, filters (cache_settings.c); NULL: defaults */
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
        char id[COURIER_FROZEN_ID_MAX + 1]; /* "": generated at freeze time */
        char resend_policy[COURIER_RESEND_POLICY_ID_MAX + 1]; /* "": the policy's default (policy.c) */
    } freeze;
    struct cr_auth *auth; /* credentials, proxy, challenge handler (auth.c); NULL: the engine's */
    cr_http_opts http; /* redirects, connect and idle timeouts (redirect.c); `set` says which */
    char *param_charset; /* query and form parameters' charset (charset.c); NULL: the engine's */
    courier_security *security; /* the request's own TLS policy (security.c); NULL: the engine's */
    cr_netopts *net; /* the request's DNS overrides and socket (netopts.c); NULL: the engine's */
    int no_cellular; /* monitor.c: fails with COURIER_E_CELLULAR while the path is cellular */
    /* Routes and API versions (route.c). */
    int api_version_set;                      /* 1: api_version replaces the engine's */
    char api_version[CR_API_VERSION_MAX + 1]; /* "" with api_version_set: no segment */
    json_t *object_rest; /* an object's members left after its route filled the path, sent in the
                            body at prepare (courier_request_set_object); NULL: none */
    cr_status_set status_codes;
    void *session; /* adapters, retriers, authenticator opt-out (engine/session.c): a cr_ext, or NULL */
};

struct courier_outgoing {
    char *method;
    char *url;
    cr_kvlist headers;
    uint64_t id; /* the send's id (cr_transfer_prepare gives it before customize and before-send) */
    /* An adaptation's view (engine/session.c) also holds the body; the others do not see it. */
    int body_view;
    int multipart;   /* the request has parts: its body cannot be replaced */
    char *body;      /* owned; NULL with has_body 0: none */
    size_t body_len;
    int has_body;
    char *body_file; /* owned, or NULL */
};

/* ---- transfers: a request made final, and its state on the wire (transport.c) --------------- */

/* What a clean pooled easy handle's per-transfer options were last set to (transport.c), so the
 * next transfer on it sets only those that differ. known 0: a new or reset handle, whose options
 * are all set. The handle goes back to the pool with its record (engine.c), or reset without one. */
typedef struct cr_easy_set {
    int known;
    long pipewait;
    long timeout_ms;
    long connect_ms;
    curl_off_t max_file;
} cr_easy_set;

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
    cr_raised raised; /* an error a callback of this send raised (user_error.c) */
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
    int ce_raw_asked; /* netopts.c: the request (or engine) asked for bodies as coded (ce_raw from the start) */
    char *errbuf; /* CURL_ERROR_SIZE bytes, made when a curl attempt starts (engine.c); NULL before */
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
    void *stub;                  /* stubs.c: offered to the engine's stubs (a cr_ext: the matched stub, the
                                    state of its delays), or NULL */
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
    cr_easy_set easy_set; /* what the handle's per-transfer options are (transport.c) */
    courier_security *security; /* the request's own TLS policy (security.c); NULL: the engine's */
    cr_netopts *net; /* the request's DNS overrides and socket, made final (netopts.c); NULL: none */
    int http2_only;  /* netopts.c: a response over anything but HTTP/2 fails (COURIER_E_HTTP_VERSION) */
    int no_cellular; /* the request's "not on cellular" (monitor.c) */
    int watch_progress; /* progress goes to the request's callback and/or event monitors */
    unsigned set_cookie : 1;    /* cookies.c: a Set-Cookie line arrived in this attempt (worker); bits
                                   beside an int, so cr_transfer stays under 1,000 bytes (request.c) */
    unsigned sts_seen : 1;      /* hsts.c: a Strict-Transport-Security line arrived in this attempt */
    unsigned hsts_upgraded : 1; /* hsts.c: the URL (or a hop's) went from http:// to https:// */
    unsigned intercepted : 1;   /* the before-send interceptors' turn came (schedule.c): a refusal
                                   from then on has a FINISHED (cr_transfer_refuse) */
    unsigned will_sent : 1;     /* its WILL_SEND went (lifecycle.c): once a send, also when a freeze
                                   at once failed and the send went on to the worker (journal.c) */
    struct courier_stream *stream; /* stream.c: a streamed send's stream (borrowed: the send's own
                                      reference, released by its completion), or NULL */
    int stream_live;    /* its body goes to the stream as it arrives (the engine answers with it) */
    uint32_t pool_conn; /* pool.c: the connection it went on (0: none yet); in the hole after an int */
    cr_buf hdr_block;   /* the response's header lines as "name\0value\0"... (transport.c) */
    size_t hdr_count;
    /* journal.c: the request's freeze settings, copied at send (cr_frozen_attach). The two names are
     * allocated only when the request set them, so a transfer stays under 1,000 bytes: glibc
     * serves that from its small bins without consolidating its fast bins (a cache hit's malloc
     * cost, measured with Benchmarks/callgrind). */
    struct cr_freeze_xfer {
        int policy;            /* courier_freeze_policy */
        unsigned flags;        /* COURIER_FREEZE_* */
        int64_t expiry_ms;     /* 0: the engine's */
        int ignore_offline;
        int cache_set;         /* the cache settings below were captured at send */
        int cache_policy;
        int64_t cache_expiry_s; /* whole seconds, as the journal records it */
        char *id;              /* owned; NULL: generated at freeze time */
        char *resend_policy;   /* owned; NULL: the policy's default (policy.c) */
    } freeze;
    /* Cookies and authentication (cookies.c, auth.c). */
    struct cr_auth *auth;        /* the request's over the engine's, merged at prepare; NULL: none */
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
    void *sess; /* engine/session.c: adapters, retriers, the authenticator's state for this send (a
                   cr_ext), or NULL when none applies */
} cr_transfer;

/* request.c: a request whose method, target, headers and body are borrowed from the caller (the
 * journal's decoded record, sent again: docs/design/journal.md, "Where replay's time goes"), checked as
 * courier_request_new, _add_header and _set_body check them (the body's type: the first
 * Content-Type header, else application/octet-stream), with the engine's default parameters off.
 * The other setters work on it as on any request. The borrowed parts must outlive it; it is freed
 * with cr_request_free_borrowed (never courier_request_free), which leaves them alone. *out new.
 * COURIER_OK, COURIER_E_INVALID_ARGUMENT (a method that is not a token), COURIER_E_INVALID_HEADER or
 * _INVALID_ENCODING (a header that may not be sent, as courier_request_add_header says) or
 * COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_request_borrow(courier_request **out, const char *method, const char *target, const cr_kvlist *headers,
                                const char *body, size_t body_len, int has_body);
CR_HIDDEN void cr_request_free_borrowed(courier_request *r);
/* request.c: a copy of a request (the event source's, sent again at each reconnection): values
 * copied, callbacks retained. *out new. COURIER_OK, COURIER_E_INVALID_ARGUMENT (multipart parts, a
 * file body or a download: not copied) or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_request_copy(courier_request **out, const courier_request *src);
/* Replaces the request's target with `target` (takes it: malloc'ed, freed with the request). */
CR_HIDDEN void cr_request_take_target(courier_request *r, char *target);
/* request.c: COURIER_OK for a valid retry rule (counts and delays not negative, base <= max), else
 * COURIER_E_INVALID_ARGUMENT. */
CR_HIDDEN int cr_retry_check(int max_retries, long base_ms, long max_ms);
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
/* A pooled handle a transfer changed: reset (cr_easy_reset) and given the shared options again,
 * keeping what libcurl keeps across a reset (the Alt-Svc cache). */
CR_HIDDEN int cr_transport_rebase(courier_engine *e, CURL *h);
/* transport.c: configures t->easy for t. Returns OK or a code. */
CR_HIDDEN int cr_transport_setup(courier_engine *e, cr_transfer *t);
/* transport.c: what curl brought back for a finished transfer: COURIER_OK with *out_resp (new)
 * whatever the HTTP status, or the transport's failure code (err filled, *out_resp NULL). */
CR_HIDDEN int cr_transport_result(cr_transfer *t, CURLcode result, courier_response **out_resp,
                                  courier_error *err);
/* transport.c: maps a CURLcode to a courier_code. `reached`: the server was connected to (decides
 * between a bad URL and a server that answered in something that is not HTTP). */
CR_HIDDEN int cr_code_from_curl(CURLcode c, bool reached);

/* stream.c: streamed responses (courier_stream). What the stream asks of the engine's layer. */
typedef struct cr_stream_ops {
    courier_engine *engine;
    /* From the reader's thread, the stream's lock held (so never past its end, after which the
     * engine may be freed): the reader made room in a paused stream; the engine has the worker
     * call cr_stream_take_resume and unpause what it returns (queued, never run inline). */
    void (*resume)(courier_stream *s, courier_engine *engine);
    /* courier_cancel: called with the stream's lock held, so that a cancel never runs past the
     * stream's end (after which the engine may be freed by its close). */
    int (*cancel)(courier_engine *engine, uint64_t id);
} cr_stream_ops;
/* A stream holding at most `limit` unread bytes before its transfer pauses; two references (the
 * caller's and the send's, released by cr_stream_done). NULL on no memory. */
CR_HIDDEN courier_stream *cr_stream_new(size_t limit, pthread_t worker, courier_stream_notify_fn notify, void *user,
                                        courier_user_free_fn user_free, const cr_stream_ops *ops);
CR_HIDDEN void cr_stream_set_id(courier_stream *s, uint64_t id);
/* The longest line courier_stream_next_line gathers (the engine's maximum response size). */
CR_HIDDEN void cr_stream_set_max_line(courier_stream *s, size_t max);
CR_HIDDEN void cr_stream_retain(courier_stream *s);
CR_HIDDEN void cr_stream_release(courier_stream *s);
CR_HIDDEN courier_engine *cr_stream_engine(const courier_stream *s);
/* The send's completion (courier_completion_fn, user = the stream): the end. */
CR_HIDDEN void cr_stream_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user);
/* transport.c, worker: the header block of t's response ended; when the engine answers with it, the
 * stream gets its head (made by head_of) and t->stream_live is set. */
CR_HIDDEN void cr_stream_headers_ended(cr_transfer *t, courier_response *(*head_of)(cr_transfer *t));
/* transport.c, worker: body bytes of a live stream: len, CURL_WRITEFUNC_PAUSE when full, 0 on no memory. */
CR_HIDDEN size_t cr_stream_on_body(cr_transfer *t, const char *data, size_t len);
/* engine.c, worker: whether t is a live stream the reader has paused (not idle). */
CR_HIDDEN bool cr_stream_paused(const cr_transfer *t);
/* Worker: the easy handle to unpause (NULL: nothing to do), after the reader made room. */
CR_HIDDEN CURL *cr_stream_take_resume(courier_stream *s);
CR_HIDDEN bool cr_stream_ended(courier_stream *s);
/* Cancels the stream's send unless it ended: COURIER_OK, COURIER_E_NOT_FOUND (ended). Any thread,
 * safe against a close of the engine running at the same time (the close ends the stream first). */
CR_HIDDEN int cr_stream_cancel(courier_stream *s);

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
    int hsts_upgraded; /* hsts.c: the URL went from http:// to https:// (courier_response_hsts_upgraded) */
};

/* response.c: gives a one-block response (see one_block) allocations of its own for method, url,
 * cache_key and headers, so they can be changed like those of any response. COURIER_OK (also for a
 * response that is not one block) or COURIER_E_NO_MEMORY (the response is unchanged). */
CR_HIDDEN int cr_response_detach(courier_response *r);
/* response.c: a deep copy of what a response says (status, metrics, method, URL, headers, body, the
 * cache's marks and key): for a coalesced follower and the cache's background revalidation. Not
 * copied: the request id, attempts and wait (set when the copy is answered), the redirect chain
 * (attached at the final hop), the downloaded file (the requester's own) and the JSON state (made
 * again on demand). NULL on no memory. */
CR_HIDDEN courier_response *cr_response_copy(const courier_response *src);

/* A custom transport's call (the public courier_call; schedule.c makes and completes it). The
 * transfer owns it (t->call, freed with the transfer). */
struct courier_call {
    cr_transfer *t;
    courier_engine *e;
    atomic_int completed;
    int code;
    courier_response *resp;
    char message[200];
    cr_raised raised; /* courier_call_raise's user error, moved to the transfer when finished */
    struct courier_call *next_done; /* in the engine's external list */
};

/* ---- a transfer's lifecycle events (lifecycle.c) ------------------------------------------------ */

/* Request lifecycle hooks: each emits a courier_event to the monitors and a log line to the sinks.
 * When nobody listens they cost one atomic load. Call them on the thread where the event happens
 * (the worker thread for all but custom callers); t is borrowed for the call. */
/* The worker took t from `incoming` (before routing it, or cancelling it because the engine
 * closes), or the journal is about to freeze it at once (offline): records the time FINISHED
 * measures from. Once per send (t->will_sent); every WILL_SEND is followed by one FINISHED. */
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
/* t is refused on the sending thread, before courier_send (or the WebSocket open) returns `code`:
 * when its before-send interceptors' turn came (t->intercepted), a FINISHED (code, error_type, no
 * response, no WILL_SEND before it), so a span an interceptor started ends; monitors raise nowhere.
 * Then frees t. Returns code. err may be NULL. */
CR_HIDDEN int cr_transfer_refuse(courier_engine *e, cr_transfer *t, int code, const courier_error *err);
/* t's answer comes from the cache (before its FINISHED). */
CR_HIDDEN void cr_event_from_cache(courier_engine *e, cr_transfer *t, const courier_response *resp);
/* An attempt of t failed with code (resp may be NULL) and attempt number `attempt` (2 for the first
 * retry) starts after delay_ms. */
CR_HIDDEN void cr_event_retried(courier_engine *e, cr_transfer *t, int attempt, int code,
                                const courier_response *resp, long delay_ms);
/* A redirect with status `status` is followed: next is the hop about to start (its chain counts it). */
CR_HIDDEN void cr_event_redirected(courier_engine *e, const cr_transfer *next, int status);

/* ==== A request's cache settings (cache_settings.c) and answering after a commit ============= */

/* What a request asks of the cache; the cache (cache/) reads it and a frozen request (journal/)
 * keeps it: both stand on this layer, neither calls the other. */
/* Per-request cache settings (courier_request_set_cache_*). */
typedef struct cr_cache_req {
    cr_ext ext;         /* cache_settings.c's hooks (request.c frees it through them) */
    int policy;         /* -1: the engine's default */
    int64_t expiry_ms;  /* 0: the engine's default */
    char *key;          /* the request's own key, or NULL */
    char *sensitive;    /* appended to the key, or NULL */
    char **filters;     /* parameter names left out of the key */
    size_t nfilters;
} cr_cache_req;

/* Answering a caller after a commit: the cache's write (cr_cache_flush) and the journal's durable
 * commit answer a caller once their write is done, after the engine has freed the transfer. The
 * engine owns how (engine.c); the layers below receive this table at open and never name the
 * engine's functions. A handle holds what answering needs (id, completion, user, attempts). */
typedef struct cr_later cr_later;
typedef struct cr_answer_ops {
    /* Takes over answering t's caller: a handle, or NULL on no memory (t unchanged). Without `take`
     * the handle is a detached copy and t's caller_gone is set (t stays its owner's to free); with
     * `take` the caller hands t itself over (a transfer nobody else holds). */
    cr_later *(*detach)(courier_engine *e, cr_transfer *t, bool take);
    /* Answers the caller once (the completion runs on this thread) and frees the handle. */
    void (*answer)(courier_engine *e, cr_later *l, int code, courier_response *resp, courier_error *err);
    /* Frees a handle that was never answered. NULL-safe. */
    void (*discard)(cr_later *l);
} cr_answer_ops;

/* ==== Serializers: response decoders by MIME type, the response's JSON (serialize.c) ========= */

/* serialize.c */
typedef struct cr_codec {
    char *mime;           /* lower-case "type/subtype"; a subtype or type of "*" matches any */
    cr_callback *decoder; /* NULL: decode as JSON */
} cr_codec;

/* What an engine's configuration says about JSON. */
typedef struct cr_jconf {
    cr_ext ext; /* serialize.c's hooks (request.c copies and frees it through them) */
    courier_json_options options;
    courier_envelope *envelope;
    cr_codec *codecs;
    size_t ncodecs;
} cr_jconf;

/* The response's JSON state, made on first use (from the content type alone when the transport did
 * not attach one). NULL on no memory. */
CR_HIDDEN cr_jresp *cr_jresp_of(const courier_response *r);
/* Parses (or decodes) the body once into j; later calls, from any thread, get the same document. */
CR_HIDDEN int cr_jresp_doc(const courier_response *r, cr_jresp *j, const json_t **out, courier_error *err);
/* The same for the body's tape (parsed with courier_json_tape_parse; a custom decoder's document
 * copied into one): made once, later calls from any thread get the same tape. */
CR_HIDDEN int cr_jresp_tape(const courier_response *r, cr_jresp *j, const courier_json_tape **out, courier_error *err);
/* A result's jansson value, made on first ask (NULL when absent or without memory). */
CR_HIDDEN const json_t *cr_jresp_value(const courier_response *r, cr_jresp *j, cr_jval *v);
/* The engine's hook where an answer is judged, before the status check: chooses the decoder by
 * content type and, for a status below 400 when the request or engine asks for JSON, parses the
 * body and applies the envelope, key paths and mappings. Returns OK or the failure (COURIER_E_JSON,
 * COURIER_E_API, COURIER_E_MAPPING, COURIER_E_NO_MEMORY) with err filled; the response stays. */
CR_HIDDEN int cr_json_finish(const cr_transfer *t, courier_response *r, courier_error *err);

/* ==== Mock answers (mock.c) ===================================================================== */

/* A request's mock answer (mock.c). */
typedef struct cr_mock {
    int status;
    int has_body;
    char *body;
    size_t body_len;
    char *file;
    cr_kvlist headers;
    int error;
    char *why; /* the error's message (stubs.c: an unmatched request), or NULL: a generic one */
    long delay_ms;
    cr_callback *fn;
} cr_mock;

CR_HIDDEN cr_mock *cr_mock_copy(const cr_mock *m); /* NULL in: a new empty mock */
CR_HIDDEN void cr_mock_free(cr_mock *m);
/* Makes the mock's answer for t (worker thread): COURIER_OK with *out, or a failure code. */
CR_HIDDEN int cr_mock_answer(cr_transfer *t, courier_response **out, courier_error *err);

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
/* Worker: closes t's upload and download files (a download's part keeps what was received, all of
 * it on disk): for a transfer that stops before curl finished it, before its caller is answered. */
CR_HIDDEN void cr_transfer_close_files(cr_transfer *t);
/* Releases t's transfer state (files closed, mime freed). */
CR_HIDDEN void cr_transfer_release(cr_transfer *t);

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
/* Engine open, after the journal opened: the jar, read from the store (nothing when off). env and
 * dbi: the journal's cookie database (cr_journal_cookie_db, which the engine asks); env NULL with a
 * store that is not temporary fails with COURIER_E_STORE. */
struct MDB_env;
CR_HIDDEN int cr_jar_open(courier_engine *e, struct MDB_env *env, unsigned dbi, courier_error *err);
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

/* hsts.c */
struct cr_hsts;
/* Engine open, after the journal opened: env and dbi the journal's "hsts" database
 * (cr_journal_hsts_db), or env NULL: the list in memory. Nothing when HSTS is off. */
CR_HIDDEN int cr_hsts_open(courier_engine *e, struct MDB_env *env, unsigned dbi, courier_error *err);
CR_HIDDEN void cr_hsts_close(courier_engine *e);
/* Any thread: when *url is http:// to a known HSTS host, replaces it (freed) by its https:// form
 * and sets *upgraded to 1. COURIER_OK (also when nothing changed) or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_hsts_upgrade(courier_engine *e, char **url, int *upgraded);
/* Worker, after an attempt: the Strict-Transport-Security value of a response from url (ignored
 * unless url is https://). Store failures are logged. */
CR_HIDDEN void cr_hsts_note(courier_engine *e, const char *url, const char *value);
/* transport.c: libcurl's Alt-Svc cache on a new or reset easy handle, when the setting is on. */
CR_HIDDEN int cr_altsvc_base(courier_engine *e, CURL *h);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_HTTP_H */
