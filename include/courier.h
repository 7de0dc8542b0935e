/*
 * courier.h — the public C API of Courier, a networking engine.
 *
 * This header is the whole contract that C, Swift, Python and every other language see.
 * Rules (see docs/ABI.md):
 *   - every function is prefixed courier_, every type courier_, every macro COURIER_;
 *   - functions return an int: COURIER_OK (0) or a negative courier_code;
 *   - codes are append-only and never reused; nothing is removed once released;
 *   - ownership is written beside every pointer: "new" (the caller releases it with the named
 *     function), "borrowed" (valid until the stated moment), "copied" (the callee copies it; the
 *     caller keeps ownership);
 *   - memory the library allocates is released by the library's own free functions: courier_free
 *     for strings and buffers, the handle's own free function for handles;
 *   - one grammar (docs/ABI.md, checked by scripts/check_header_grammar.py): out-parameters first
 *     and courier_error * last; a struct that may grow begins with size_t size (set by the caller
 *     for the structs it allocates); durations are int64_t milliseconds; a parameter that takes an
 *     enum has the enum's type; no long;
 *   - no curl, LMDB or jansson type appears here; no variadic functions; no static inline.
 *
 * Threads: an engine is thread-safe. A request object is used by one thread at a time until it is
 * sent (sending copies it, so it may be reused or freed right after). A response is immutable and
 * may be read from any thread. Completion callbacks run on the engine's worker thread. The threads
 * an engine starts carry names (where pthread_setname_np exists: Linux, macOS) that top -H, perf and
 * debuggers show: courier-worker (the transport; completions and posts run there), courier-journal
 * (frozen requests), courier-net (Linux's network watch), courier-probe (a reachability probe),
 * courier-json (a large document's parallel parse).
 */
#ifndef COURIER_H
#define COURIER_H

#include <stddef.h>
#include <stdint.h>

#define COURIER_VERSION_MAJOR 0
#define COURIER_VERSION_MINOR 2
#define COURIER_VERSION_PATCH 1
/* 0xMMmmpp: major, minor, patch, one byte each. */
#define COURIER_VERSION_NUM ((COURIER_VERSION_MAJOR << 16) | (COURIER_VERSION_MINOR << 8) | COURIER_VERSION_PATCH)
#define COURIER_VERSION_STRING "0.2.1"

/* COURIER_API marks what the library exports. The library's own build defines COURIER_BUILDING
 * (export); users of the Windows DLL import; users of the static library on Windows define
 * COURIER_STATIC. Elsewhere the library is built with hidden visibility and these stay visible. */
#if defined(_WIN32)
#  if defined(COURIER_BUILDING)
#    define COURIER_API __declspec(dllexport)
#  elif defined(COURIER_STATIC)
#    define COURIER_API
#  else
#    define COURIER_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define COURIER_API __attribute__((visibility("default")))
#else
#  define COURIER_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Versions and errors                                                                         */
/* ========================================================================================== */

/* The library's version at run time, "MAJOR.MINOR.PATCH". Static storage; never NULL. Any thread. */
COURIER_API const char *courier_version(void);
/* COURIER_VERSION_NUM of the library at run time. Any thread. */
COURIER_API unsigned courier_version_num(void);

/* Result codes. Append-only: values are never changed, removed or reused. */
typedef enum courier_code {
    COURIER_OK = 0,
    COURIER_E_INVALID_ARGUMENT = -1,  /* a NULL handle, an out-of-range value, a misuse */
    COURIER_E_INVALID_URL = -2,       /* a URL that does not parse, or not http/https */
    COURIER_E_CANNOT_RESOLVE = -3,    /* the host name did not resolve */
    COURIER_E_CANNOT_CONNECT = -4,    /* the TCP connection was refused or unreachable */
    COURIER_E_TIMEOUT = -5,           /* the request's timeout passed */
    COURIER_E_TLS = -6,               /* TLS handshake or certificate verification failed */
    COURIER_E_PINNING = -7,           /* the server's public key did not match the pinned key */
    COURIER_E_CANCELLED = -8,         /* cancelled by the caller, or the engine closed */
    COURIER_E_HTTP_STATUS = -9,       /* the server answered with status >= 400 (or one outside the
                                         request's courier_request_add_status_codes); response attached */
    COURIER_E_INVALID_RESULT = -10,   /* a validator rejected the response; response attached */
    COURIER_E_TOO_LARGE = -11,        /* the response body exceeded the maximum size */
    COURIER_E_INTERNAL = -12,         /* a bug or an unexpected failure of a dependency */
    COURIER_E_NO_MEMORY = -13,        /* an allocation failed */
    COURIER_E_INVALID_HEADER = -14,   /* a header name that is not a token, or CR/LF/NUL in a header */
    COURIER_E_INVALID_ENCODING = -15, /* a parameter or header that is not valid UTF-8 */
    COURIER_E_PARTIAL_RESPONSE = -16, /* the server closed the connection in the middle of the body */
    COURIER_E_NETWORK = -17,          /* another network failure: reset, send or receive error */
    COURIER_E_CLOSED = -18,           /* the engine is closing or closed */
    COURIER_E_STORE = -19,            /* the store directory cannot be created or used */
    COURIER_E_NOT_FOUND = -20,        /* no such item (request id, entry) */
    COURIER_E_TOO_FREQUENT = -21,     /* an identical request was sent within the engine's guard window */
    COURIER_E_JSON = -22,             /* not acceptable JSON (malformed, too deep, bad UTF-8, duplicate key), or no decoder */
    COURIER_E_MAPPING = -23,          /* a document does not fit its mapping or key path; response attached */
    COURIER_E_API = -24,              /* the envelope's code is not a success; response attached */
    COURIER_E_FROZEN = -25,           /* the request was written to the journal, to be sent later;
                                         courier_error_freeze_id gives its freeze id */
    COURIER_E_OFFLINE = -26,          /* the network monitor says offline; nothing was sent */
    COURIER_E_JOURNAL_CORRUPT = -27,  /* the frozen-request journal is unreadable (kept aside, never emptied) */
    COURIER_E_TOO_MANY_REDIRECTS = -28, /* more redirects than the maximum; the last 3xx is attached */
    COURIER_E_REDIRECT_REFUSED = -29, /* a redirect was refused: HTTPS to HTTP without permission, a
                                         scheme other than http/https, or the redirect hook said no;
                                         the 3xx is attached */
    COURIER_E_BODY_NOT_REPLAYABLE = -30, /* a redirect (307, 308, or 301/302 of a method other than
                                            POST) must send the body again and it was streamed from
                                            a file; the 3xx is attached */
    COURIER_E_PROTOCOL = -31,         /* the server broke HTTP: a garbage status line, conflicting
                                         Content-Length fields, bad framing or content coding, an
                                         unusable Location */
    COURIER_E_HEADERS_TOO_LARGE = -32, /* a response header line or the header block is over the limit */
    COURIER_E_PROXY = -34,            /* the proxy failed: its name did not resolve, it refused the tunnel
                                         (http_status tells, e.g. 407), or its SOCKS handshake failed */
    COURIER_E_CACHE_INCONSISTENT = -40, /* courier_cache_verify found damaged entries, index records
                                          without their entry, or totals that differ from a scan */
    COURIER_E_USER = -41,             /* user code raised an error (a callback: courier_raise); the
                                         error's courier_error_user_data carries what it raised */
    COURIER_E_RESEND_POLICY_UNKNOWN = -43, /* no resend policy is registered under the id a freezable
                                              request names (courier_request_set_resend_policy) */
    COURIER_E_DELETED_BY_POLICY = -44, /* a frozen request's resend policy deleted it (can_delete said
                                         yes): the recorded outcome of a request never sent again */
    COURIER_E_UNKNOWN_CHARSET = -46,  /* a character set the system's iconv does not know */
    COURIER_E_CHARSET = -47,          /* text that cannot be converted: a parameter character the
                                         chosen charset cannot hold, or a body whose bytes are not
                                         valid in its charset */
    COURIER_E_CLIENT_CERTIFICATE = -48, /* the client certificate or its key could not be loaded: not
                                          PEM/PKCS#12, a wrong password, a key of another certificate */
    COURIER_E_CELLULAR = -49,         /* the request is not allowed on a cellular network
                                         (courier_request_set_allow_cellular) and the path is one */
    COURIER_E_UNKNOWN_NAME = -51,     /* no API is declared under that name, or no route under that name
                                         (or for that object type and method) */
    COURIER_E_ROUTE_PARAMETER = -52,  /* a path pattern's parameter (":id") is missing from the object,
                                         or its value is not a string, number or boolean */
    COURIER_E_CATALOG = -53,          /* an API declaration or catalogue document of the wrong shape:
                                         an unknown field, a value of the wrong type, no path; the
                                         error's message names the field */
    COURIER_E_REDIS = -54,            /* a Redis store failed: the server is unreachable or did not
                                         answer within the engine's timeout, refused the password or
                                         the database, or answered with an error */
    COURIER_E_REDIS_UNSUPPORTED = -55, /* a redis:// store in a library built without Redis
                                         (COURIER_REDIS off), or rediss:// (TLS) with a hiredis
                                         that has no TLS */
    COURIER_E_NUMBER_RANGE = -56,     /* a JSON number read as a type that cannot hold it: beyond
                                         int64/uint64/double, or a fraction read as an integer
                                         (courier_json_read_int64 and the like) */
    COURIER_E_AGAIN = -58,            /* nothing to read yet: a stream's head or body did not arrive
                                         within the wait asked for (not a failure; ask again) */
    COURIER_E_WS_HANDSHAKE = -60,     /* a WebSocket's opening handshake failed: the server answered
                                         without 101 (http_status tells), or without Upgrade:
                                         websocket, Connection: upgrade or the right
                                         Sec-WebSocket-Accept, or with a subprotocol or an extension
                                         that was not offered; no close frame is sent */
    COURIER_E_WS_PROTOCOL = -61,      /* the server broke RFC 6455 (a masked frame, reserved bits, an
                                         unknown opcode, a control frame over 125 bytes or fragmented,
                                         invalid UTF-8 in a text message or close reason, a bad close
                                         code): the connection was failed with the close code RFC
                                         6455 names (courier_ws_close_code_sent: 1002 or 1007) */
    COURIER_E_WS_CLOSED = -62,        /* the WebSocket is closed: its closing handshake ended (either
                                         side began it); courier_ws_close_code and _reason give the
                                         peer's code and reason. Not a failure */
    COURIER_E_CREDENTIAL_REFUSED = -63 /* the authenticator's credential was refused again right after
                                         a refresh (the loop guard): the refusing response (a 401)
                                         is attached */
} courier_code;

/* Static English text for a code ("unknown error" for an unknown code). Never NULL. Any thread. */
COURIER_API const char *courier_strerror(int code);

/* Settings whose default courier_setting_default tells, so that a binding offering the setting
 * (a Swift default argument, a Python keyword's default) reads it instead of restating it.
 * Append-only, like the codes. */
typedef enum courier_setting {
    COURIER_SETTING_TIMEOUT_MS = 1,                /* courier_config_set_timeout_ms: 60 000 */
    COURIER_SETTING_MAX_CONNECTIONS_PER_HOST = 2,  /* courier_config_set_max_connections_per_host: 5 */
    COURIER_SETTING_MAX_CONNECTIONS = 3,           /* courier_config_set_max_connections: 64 */
    COURIER_SETTING_MAX_RESPONSE_BYTES = 4,        /* courier_config_set_max_response_bytes: 64 MiB */
    COURIER_SETTING_RETRY_MAX_RETRIES = 5,         /* a retry rule (courier_config_set_retry) made
                                                      without a count: 3 further attempts */
    COURIER_SETTING_RETRY_BASE_DELAY_MS = 6,       /* its base_delay_ms: 500 */
    COURIER_SETTING_RETRY_MAX_DELAY_MS = 7,        /* its max_delay_ms: 30 000 */
    COURIER_SETTING_FROZEN_REPLAY_CONCURRENCY = 8, /* courier_config_set_frozen_replay: 4 */
    COURIER_SETTING_FROZEN_BACKOFF_BASE_MS = 9,    /* its backoff_base_ms: 1 000 */
    COURIER_SETTING_FROZEN_BACKOFF_MAX_MS = 10,    /* its backoff_max_ms: 300 000 */
    COURIER_SETTING_JSON_MAX_DEPTH = 11,           /* courier_json_options.max_depth: 512 */
    COURIER_SETTING_MONITOR_INTERVAL_MS = 12,      /* the network monitor's probe interval_ms: 5 000 */
    COURIER_SETTING_LOG_FILE_MAX_BYTES = 13,       /* courier_log_add_file's max_bytes when a binding's
                                                      caller names none: 1 MiB */
    COURIER_SETTING_LOG_FILE_MAX_FILES = 14,       /* its max_files: 5 */
    COURIER_SETTING_STREAM_BUFFER_BYTES = 15       /* courier_config_set_stream_buffer_bytes: 1 MiB */
} courier_setting;

/* *out_value receives the default of a setting (milliseconds, bytes or a count, as its name says):
 * what the engine uses when the setting is not set (0 or nothing passed), or, for a retry rule
 * and a log file, what a binding's rule or sink made without that value uses. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL out_value, unknown setting). */
COURIER_API int courier_setting_default(int64_t *out_value, courier_setting setting);

/* The detail of an error, filled by functions that take a courier_error * (NULL is allowed
 * everywhere one is taken). Caller-allocated; the library writes every field. */
typedef struct courier_error {
    int code;          /* the courier_code, also returned by the function */
    int http_status;   /* the HTTP status when one was received, else 0 */
    int curl_code;     /* the underlying CURLcode, else 0 */
    int os_error;      /* the underlying errno, else 0 */
    int store_error;   /* the underlying storage (LMDB) error, else 0 */
    int reserved[7];   /* room to grow without changing the size: [0] holds the courier_timeout_kind
                          of a COURIER_E_TIMEOUT (read it with courier_error_timeout_kind); [1..5]
                          the user data a callback raised (courier_error_user_data); the rest zero */
    char message[256]; /* NUL-terminated English detail, possibly truncated; "" when none. Whole on
                        * its own (it names the failure, often starting with courier_strerror's
                        * text): print it alone, not after courier_strerror(code). */
} courier_error;

/* ========================================================================================== */
/* Handles                                                                                     */
/* ========================================================================================== */

typedef struct courier_config courier_config;
typedef struct courier_engine courier_engine;
typedef struct courier_request courier_request;
typedef struct courier_response courier_response;
typedef struct courier_outgoing courier_outgoing;

/* How parameters of a request that carries them in its body are encoded. */
typedef enum courier_body_encoding {
    COURIER_BODY_FORM = 0, /* application/x-www-form-urlencoded (the default) */
    COURIER_BODY_JSON = 1  /* application/json: an object whose values are the parameter strings */
} courier_body_encoding;

/* A validator looks at a finished response and says whether it is a valid result.
 * Return nonzero for valid, 0 for invalid (the request then fails with COURIER_E_INVALID_RESULT
 * and the response stays attached). `response` is borrowed for the duration of the call.
 * Runs on the engine's worker thread; it must not block for long and must not close the engine. */
typedef int (*courier_validator_fn)(const courier_response *response, void *user);

/* Releases the `user` pointer of a callback registration. Called exactly once, when the
 * registration ends (replaced, or the owning object freed), on whichever thread ends it. */
typedef void (*courier_user_free_fn)(void *user);

/* ========================================================================================== */
/* Configuration                                                                               */
/* ========================================================================================== */

/* A configuration for courier_engine_open. Not thread-safe: build it on one thread. Every string
 * setter copies its argument. Defaults: no base URL; timeout 60 000 ms; user agent
 * "Courier/<version>"; 5 requests (and connections) per host, 64 in all; form body encoding; TLS verification on
 * with the system's CA store; maximum response body 64 MiB; the durable default store directory
 * named by the app id (see courier_config_set_app_id).
 * *out is new: release it with courier_config_free (the engine copies what it needs at open).
 * Errors: COURIER_E_INVALID_ARGUMENT (out is NULL), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_new(courier_config **out);
/* Accepts NULL. */
COURIER_API void courier_config_free(courier_config *config);

/* The base URL that relative request paths are joined to (http or https; may end with a path).
 * NULL clears it. Errors: COURIER_E_INVALID_URL. */
COURIER_API int courier_config_set_base_url(courier_config *config, const char *base_url);
/* A header added to every request unless the request sets the same name. Added in order; a
 * repeated name adds another line. Errors: COURIER_E_INVALID_HEADER, COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_config_add_header(courier_config *config, const char *name, const char *value);
/* A parameter added to every request unless the request opts out
 * (courier_request_set_use_default_params). Errors: COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_config_add_param(courier_config *config, const char *name, const char *value);
/* Default timeout of a request, whole transfer (all its redirects), in milliseconds (> 0): the
 * total timeout (courier_config_set_timeout has the connect and idle ones). */
COURIER_API int courier_config_set_timeout_ms(courier_config *config, int64_t timeout_ms);
/* The User-Agent header. NULL restores the default. Errors: COURIER_E_INVALID_HEADER. */
COURIER_API int courier_config_set_user_agent(courier_config *config, const char *user_agent);
/* Connection limits (>= 1). Requests over the limit wait in the engine's queue. */
COURIER_API int courier_config_set_max_connections_per_host(courier_config *config, int n);
COURIER_API int courier_config_set_max_connections(courier_config *config, int n);
/* How parameters are encoded when they go in the body (POST, PUT, PATCH, other methods). */
COURIER_API int courier_config_set_body_encoding(courier_config *config, courier_body_encoding encoding);
/* Largest response body accepted, in bytes (> 0). Larger bodies fail with COURIER_E_TOO_LARGE. */
COURIER_API int courier_config_set_max_response_bytes(courier_config *config, int64_t max_bytes);
/* A PEM file of CA certificates to verify servers with, instead of the system's. NULL restores. */
COURIER_API int courier_config_set_ca_file(courier_config *config, const char *path);
/* Pins the server's public key, in libcurl's form: "sha256//BASE64HASH" (several separated by ';')
 * or a path to a PEM/DER public key file. NULL removes the pin. A mismatch fails a request with
 * COURIER_E_PINNING. */
COURIER_API int courier_config_set_pinned_public_key(courier_config *config, const char *pin);
/* For development only: nonzero turns certificate and host name verification OFF (both of a
 * security policy's switches, below). */
COURIER_API int courier_config_set_insecure(courier_config *config, int insecure);

/* ========================================================================================== */
/* Security policies (HLNetworking's HLSecurityPolicyConfig), per engine and per request        */
/* ========================================================================================== */

/* How the server's certificate is pinned. */
typedef enum courier_pinning_mode {
    COURIER_PINNING_NONE = 0,       /* the CA verification alone (the default) */
    COURIER_PINNING_PUBLIC_KEY = 1, /* the server's public key must match a pin: libcurl's form,
                                       "sha256//BASE64" (several separated by ';'), or a PEM/DER
                                       public key file; a mismatch fails with COURIER_E_PINNING */
    COURIER_PINNING_CERTIFICATE = 2 /* the server's chain must hold one of the certificates of a PEM
                                       file (the leaf or a CA): they are the only trust anchors; a
                                       chain without one fails with COURIER_E_PINNING. Never turned
                                       off by allow_invalid_certificates */
} courier_pinning_mode;

/* A security policy: a value built with the setters below, copied by the functions that take it
 * (courier_config_set_security, courier_request_set_security), so it may be changed or freed
 * right after. Not thread-safe: build it on one thread. Defaults: no pinning, invalid certificates
 * refused, the domain name validated, the system's CA store, no client certificate.
 * *out is new: release it with courier_security_free. Errors: COURIER_E_INVALID_ARGUMENT,
 * COURIER_E_NO_MEMORY. */
typedef struct courier_security courier_security;
COURIER_API int courier_security_new(courier_security **out);
/* Accepts NULL. */
COURIER_API void courier_security_free(courier_security *security);
/* The pinning mode and its pins (copied; ignored for NONE). Errors: COURIER_E_INVALID_ARGUMENT (an
 * unknown mode, no pins), COURIER_E_NOT_FOUND (a file that cannot be read now). */
COURIER_API int courier_security_set_pinning(courier_security *security, courier_pinning_mode mode, const char *pins);
/* Nonzero accepts a certificate that does not verify (self-signed, expired, unknown CA): libcurl's
 * CURLOPT_SSL_VERIFYPEER off. Development only. Default 0. */
COURIER_API int courier_security_set_allow_invalid_certificates(courier_security *security, int allow);
/* 0 accepts a certificate that names another host: CURLOPT_SSL_VERIFYHOST off. Independent of
 * allow_invalid_certificates. Default 1. */
COURIER_API int courier_security_set_validates_domain_name(courier_security *security, int validate);
/* A PEM file of the CA certificates servers are verified with, instead of the system's (NULL
 * restores). Copied. Errors: COURIER_E_NOT_FOUND (cannot be read now). */
COURIER_API int courier_security_set_ca_file(courier_security *security, const char *path);
/* The client certificate sent when a server asks for one (mutual TLS): a PEM certificate with
 * its key in `key_path` (NULL: in the certificate's file), or a PKCS#12 file (".p12", ".pfx") with
 * both; `password` decrypts the key (NULL: none). cert_path NULL removes it. Copied. A certificate
 * or key that cannot be used (wrong password, mismatched key) fails requests with
 * COURIER_E_CLIENT_CERTIFICATE; a server that refuses it answers as it does (nginx: 400, or a TLS
 * alert: COURIER_E_TLS). Errors: COURIER_E_NOT_FOUND (a file that cannot be read now),
 * COURIER_E_INVALID_ARGUMENT (a key or password without a certificate). */
COURIER_API int courier_security_set_client_certificate(courier_security *security, const char *cert_path,
                                                        const char *key_path, const char *password);
/* The engine's policy: replaces the whole of it (NULL: the defaults), including what
 * courier_config_set_ca_file, _pinned_public_key and _insecure set (they change fields of it).
 * `security` is copied. Errors: COURIER_E_INVALID_ARGUMENT (NULL config), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_security(courier_config *config, const courier_security *security);
/* This request's own policy, replacing the whole of the engine's for it and every hop of its
 * redirects (NULL: the engine's). Copied. A request with its own policy never shares a connection
 * verified under another policy (libcurl keys reuse on them), is never coalesced with another, and
 * is not frozen (a frozen request is replayed under the engine's policy, so it fails instead).
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL request), COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_set_security(courier_request *request, const courier_security *security);
/* The directory the engine keeps its store in (cache, journal). It is created (with parents,
 * mode 0700) at open. NULL restores the default: the durable default store named by the app id
 * (courier_config_set_app_id), or with courier_config_set_temporary_store a private temporary
 * directory removed at close. Errors: COURIER_E_INVALID_ARGUMENT (empty). */
COURIER_API int courier_config_set_store_dir(courier_config *config, const char *path);
/* The app's id ("com.example.notes", "notes"): names the default store, the directory where the
 * platform keeps an app's data, so frozen requests and the cache outlive the engine and the
 * process: "$XDG_DATA_HOME/<app id>/courier" (XDG_DATA_HOME when absolute, else
 * "~/.local/share/<app id>/courier") on Linux and other Unix systems,
 * "~/Library/Application Support/<app id>/courier" on Darwin. Engines of one app id share that
 * store (across processes and languages). Copied. NULL restores the default: the program's name
 * (glibc's program_invocation_short_name, Darwin's getprogname; "courier" when there is none).
 * Where the program is an interpreter (python3, node), that name is the interpreter's, the same
 * for every script it runs: a binding for one sets the app id itself (the Python binding: the
 * main script's name, or a temporary store when there is no script).
 * Unused when a store directory is set. Errors: COURIER_E_INVALID_ARGUMENT (empty, "." or "..",
 * a '/', or longer than 255 bytes). */
COURIER_API int courier_config_set_app_id(courier_config *config, const char *app_id);
/* Nonzero: when no store directory is set, the engine keeps its store in a private temporary
 * directory (under $TMPDIR, else /tmp) removed when it closes, instead of the default store: for
 * tests, demos and one-shot tools. Frozen requests then do not outlive the engine, and each
 * freeze logs a warning (event "frozen_temporary_store", level WARNING) on the engine's logger.
 * 0 (the default): the durable default store. A store directory, when set, wins. */
COURIER_API int courier_config_set_temporary_store(courier_config *config, int temporary);
/* Nonzero: open only a store that exists. When the store directory (the one set, or the default
 * store of the app id) does not exist or is not a directory, courier_engine_open fails with
 * COURIER_E_STORE (message "no store at '<path>'", os_error ENOENT or ENOTDIR) and creates
 * nothing; for tools and scripts that inspect or clean a store and must not make one by a typo.
 * 0 (the default): the directory is created at open. No effect with a temporary store; the
 * cache's and journal's own stores (courier_config_set_cache_store, _frozen_store) are not
 * checked. Errors: COURIER_E_INVALID_ARGUMENT (NULL config). */
COURIER_API int courier_config_set_store_must_exist(courier_config *config, int must_exist);
/* A validator run on every response of requests that have none of their own. NULL removes it.
 * user_free (may be NULL) is called once when the registration ends (config freed or replaced);
 * the engine keeps its own reference, so `user` must stay valid until the engine that was opened
 * with this configuration has closed, or use user_free to release it. */
COURIER_API int courier_config_set_validator(courier_config *config, courier_validator_fn fn, void *user,
                                             courier_user_free_fn user_free);

/* ========================================================================================== */
/* Engine                                                                                      */
/* ========================================================================================== */

/* Opens an engine: validates the configuration, creates the store directory, starts the worker
 * thread. `config` is borrowed for the call (NULL means all defaults). *out is new: release it with
 * courier_engine_close. Any thread.
 * Proxies come from the environment as libcurl reads them (http_proxy, https_proxy, all_proxy,
 * no_proxy) unless courier_config_set_proxy set one; whether any is set is read once, here. The
 * cookie jar is read from the store here (courier_config_set_cookies). A cache the configuration
 * names (courier_config_set_cache_store, or a default cache policy) is opened here.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE (the store directory or the cache's store
 * cannot be created or opened; os_error or store_error set), COURIER_E_NO_MEMORY,
 * COURIER_E_INTERNAL (libcurl or the thread could not start). */
COURIER_API int courier_engine_open(courier_engine **out, const courier_config *config, courier_error *err);

/* Closes an engine: every request still queued or in flight completes with COURIER_E_CANCELLED,
 * exactly once, on the worker thread, before this returns; then the worker stops and all memory is
 * released. Accepts NULL. Any thread. Called from inside one of the engine's own callbacks (on its
 * worker thread, e.g. when a binding drops its last reference there), it returns at once: the
 * worker cancels what is left after the callback returns, then frees the engine itself. The
 * handle must not be used after this call either way. */
COURIER_API void courier_engine_close(courier_engine *engine);

/* A function the engine's worker thread runs for courier_engine_post. */
typedef void (*courier_work_fn)(void *user);

/* Runs fn(user) on the engine's worker thread, once, soon: at the start of the worker's next turn
 * (from one of the engine's own callbacks: within the same burst of work, before the worker waits
 * for the network again), in the order the posts were made. While fn runs the worker does nothing
 * else, so fn must not block for long; it may send (courier_send: the request joins that turn's
 * sends with no wakeup), cancel and post again, and must not call courier_send_sync or close the
 * engine. A function posted before courier_engine_close began runs before the worker stops (after
 * the cancelled completions), so `user` is never left behind. This is what an executor needs to
 * run a language's tasks on the worker, so a task that sends the next request when its response
 * arrives changes no thread (Swift: Engine.taskExecutor). `user` is the caller's; the engine never
 * frees it. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine or fn), COURIER_E_CLOSED (the engine is closing:
 * fn will not run), COURIER_E_NO_MEMORY (fn will not run). */
COURIER_API int courier_engine_post(courier_engine *engine, courier_work_fn fn, void *user, courier_error *err);

/* The engine's store directory. Borrowed: valid until the engine closes. Any thread. */
COURIER_API const char *courier_engine_store_dir(const courier_engine *engine);

/* Counts of the requests whose caller has not been answered yet: waiting (queued under the limits,
 * for a retry or a mock's delay, or sharing another's answer) and on the wire. A request leaves
 * the counts just before its completion runs. Any thread. */
COURIER_API int courier_engine_pending(int64_t *out_queued, int64_t *out_active, const courier_engine *engine);

/* ========================================================================================== */
/* Requests                                                                                    */
/* ========================================================================================== */

/* A new request. `method` is an HTTP token ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", or
 * any other token). `target` is a path joined to the base URL (the request's own, else the
 * engine's), or an absolute http/https URL. It is absolute when it starts with a scheme (RFC 3986
 * section 3.1: a letter, then letters, digits, '+', '-' or '.') followed by "://"; anything else is
 * a path, including one whose query holds a URL ("/go?to=http://x"). Joining puts exactly one
 * '/' between base and path: base "http://h/api" or "http://h/api/" with "v1/items" or "/v1/items" gives
 * "http://h/api/v1/items". Both strings are copied. *out is new: release it with
 * courier_request_free. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or a method that is not a token),
 * COURIER_E_NO_MEMORY. A bad URL is reported when the request is sent (COURIER_E_INVALID_URL). */
COURIER_API int courier_request_new(courier_request **out, const char *method, const char *target);
/* Accepts NULL. */
COURIER_API void courier_request_free(courier_request *request);

/* A base URL for this request alone, replacing the engine's. NULL clears it.
 * Errors: COURIER_E_INVALID_URL (not an absolute http/https URL). */
COURIER_API int courier_request_set_base_url(courier_request *request, const char *base_url);
/* Adds a parameter. For GET, HEAD and DELETE parameters go in the query string; for other
 * methods in the body, encoded as configured (unless a raw body is set, then in the query).
 * Percent-encoded per RFC 3986. Errors: COURIER_E_INVALID_ENCODING (not UTF-8). */
COURIER_API int courier_request_add_param(courier_request *request, const char *name, const char *value);
/* The same with explicit lengths, so embedded NUL bytes are seen (and refused with
 * COURIER_E_INVALID_ENCODING) rather than silently truncating. */
COURIER_API int courier_request_add_param_n(courier_request *request, const char *name, size_t name_len,
                                            const char *value, size_t value_len);
/* The character set query and form parameters are written in (HTHttp's stringEncoding): names and
 * values, given as UTF-8, are converted to it before they are percent-encoded ("中" in "GBK" goes
 * as %D6%D0). Any name the system's iconv knows: "UTF-8" (the default; NULL restores it), "GBK",
 * "GB18030", "Shift_JIS", "EUC-JP", "Big5", "ISO-8859-1", "windows-1252", ... A form body then says
 * so: "application/x-www-form-urlencoded; charset=GBK". JSON bodies are always UTF-8 (RFC 8259);
 * multipart parts are sent as given. The request's setting (any charset, "UTF-8" included)
 * replaces the engine's; NULL gives it back to the engine. Copied. A parameter with a character the
 * charset cannot hold fails the send (courier_send returns it) with COURIER_E_CHARSET, naming the
 * parameter in err. Errors: COURIER_E_INVALID_ARGUMENT (NULL config or request),
 * COURIER_E_UNKNOWN_CHARSET (a name iconv does not know, or with "//" options). */
COURIER_API int courier_config_set_param_charset(courier_config *config, const char *charset);
COURIER_API int courier_request_set_param_charset(courier_request *request, const char *charset);
/* Nonzero (the default) adds the engine's default parameters; 0 leaves them out. */
COURIER_API int courier_request_set_use_default_params(courier_request *request, int use);
/* Adds a header line. A request header replaces every default header of the same name
 * (case-insensitively). Errors: COURIER_E_INVALID_HEADER (name not a token: empty, spaces,
 * separators; CR, LF or NUL in name or value), COURIER_E_INVALID_ENCODING (value not UTF-8). */
COURIER_API int courier_request_add_header(courier_request *request, const char *name, const char *value);
/* The same with explicit lengths (an embedded NUL gives COURIER_E_INVALID_HEADER). */
COURIER_API int courier_request_add_header_n(courier_request *request, const char *name, size_t name_len,
                                             const char *value, size_t value_len);
/* A raw body (copied; len may be 0) with its content type (NULL: application/octet-stream).
 * Parameters then go in the query string. Passing body NULL clears the body. */
COURIER_API int courier_request_set_body(courier_request *request, const void *body, size_t len,
                                         const char *content_type);
/* Body encoding of this request's parameters, overriding the engine's. */
COURIER_API int courier_request_set_body_encoding(courier_request *request, courier_body_encoding encoding);
/* Timeout of this request in milliseconds (> 0), overriding the engine's default. */
COURIER_API int courier_request_set_timeout_ms(courier_request *request, int64_t timeout_ms);
/* Authorization: Basic base64(user ":" password). Errors: COURIER_E_INVALID_HEADER (CR/LF),
 * COURIER_E_INVALID_ARGUMENT (a ':' in the user id, which RFC 7617 forbids). */
COURIER_API int courier_request_set_basic_auth(courier_request *request, const char *user, const char *password);
/* Authorization: <scheme> <token>, e.g. scheme "Bearer" or "Token". scheme NULL means "Bearer". */
COURIER_API int courier_request_set_auth_token(courier_request *request, const char *scheme, const char *token);
/* A validator for this request alone, replacing the engine's. See courier_validator_fn. user_free
 * (may be NULL) runs once when the request is freed or the validator replaced; sending keeps its
 * own reference, so user_free runs only after every send of this request has completed. */
COURIER_API int courier_request_set_validator(courier_request *request, courier_validator_fn fn, void *user,
                                              courier_user_free_fn user_free);

/* The final request just before it is sent: the seeds' customRequest. Handed to a customize
 * callback, borrowed for the duration of the call. */
/* The final URL. Borrowed until the next change or the end of the callback. */
COURIER_API const char *courier_outgoing_url(const courier_outgoing *outgoing);
COURIER_API const char *courier_outgoing_method(const courier_outgoing *outgoing);
/* The id of the send: 0 in customize and before-send callbacks (the send has no id yet), the id
 * in mock callbacks. */
COURIER_API uint64_t courier_outgoing_request_id(const courier_outgoing *outgoing);
/* Replaces the URL (must be absolute http/https). Errors: COURIER_E_INVALID_URL. */
COURIER_API int courier_outgoing_set_url(courier_outgoing *outgoing, const char *url);
/* Sets a header, replacing every line of that name; value NULL removes it.
 * Errors: COURIER_E_INVALID_HEADER, COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_outgoing_set_header(courier_outgoing *outgoing, const char *name, const char *value);
/* The value of a header (first line of that name, case-insensitive), or NULL. Borrowed until the
 * next change or the end of the callback. */
COURIER_API const char *courier_outgoing_header(const courier_outgoing *outgoing, const char *name);
/* Number of header lines, and the i-th (0-based) in order. Borrowed as above. */
COURIER_API size_t courier_outgoing_header_count(const courier_outgoing *outgoing);
COURIER_API int courier_outgoing_header_at(const char **out_name, const char **out_value,
                                           const courier_outgoing *outgoing, size_t index);
/* Replaces the method (a token, e.g. "PUT"). Errors: COURIER_E_INVALID_ARGUMENT (NULL, not a token). */
COURIER_API int courier_outgoing_set_method(courier_outgoing *outgoing, const char *method);
/* The body an adapter sees (courier_adaptation_outgoing): *out_body (borrowed until the next change
 * or the adaptation's completion; NULL when the request has no body in memory) and *out_len (either
 * out pointer may be NULL). Errors: COURIER_E_INVALID_ARGUMENT (NULL outgoing, or not an
 * adaptation's: customize, before-send and mock callbacks do not see the body). */
COURIER_API int courier_outgoing_body(const uint8_t **out_body, size_t *out_len, const courier_outgoing *outgoing);
/* Replaces the body with bytes (copied; body NULL with len 0: an empty body), dropping a file body.
 * The Content-Type header stays as it is (set it with courier_outgoing_set_header). Errors:
 * COURIER_E_INVALID_ARGUMENT (not an adaptation's, a multipart request, body NULL with len > 0). */
COURIER_API int courier_outgoing_set_body(courier_outgoing *outgoing, const void *body, size_t len);
/* The path of a file body (courier_request_set_body_file), or NULL. Borrowed as above. */
COURIER_API const char *courier_outgoing_body_file(const courier_outgoing *outgoing);
/* Replaces the body with the file at path (copied; read when the attempt goes out: a file that
 * cannot be read fails the attempt with COURIER_E_NOT_FOUND), dropping a body in memory. Errors:
 * COURIER_E_INVALID_ARGUMENT (not an adaptation's, NULL or empty path, a multipart request). */
COURIER_API int courier_outgoing_set_body_file(courier_outgoing *outgoing, const char *path);

/* Called once per send, on the sending thread inside courier_send / courier_send_sync, after the
 * URL, parameters and headers are final. Return COURIER_OK to send, or a negative code to fail
 * the send with that code (the completion is then not called; courier_send returns it). */
typedef int (*courier_customize_fn)(courier_outgoing *outgoing, void *user);
/* Registers the customize callback (NULL removes it). user_free as for validators. */
COURIER_API int courier_request_set_customize(courier_request *request, courier_customize_fn fn, void *user,
                                              courier_user_free_fn user_free);

/* ========================================================================================== */
/* Sending                                                                                     */
/* ========================================================================================== */

/* Called exactly once per successful courier_send, on the engine's worker thread.
 * code: COURIER_OK, or the failure's courier_code.
 * response: new, or NULL when no response was received: release it with courier_response_free
 *   (from any thread, at any time, even after the engine closed). On COURIER_E_HTTP_STATUS and
 *   COURIER_E_INVALID_RESULT the response is attached.
 * error: borrowed for the duration of the call; NULL when code is COURIER_OK.
 * Must not call courier_engine_close on its own engine; may send new requests. */
typedef void (*courier_completion_fn)(uint64_t request_id, int code, courier_response *response,
                                      const courier_error *error, void *user);

/* Sends a request asynchronously. The request is copied (borrowed for the call): it may be
 * changed, reused or freed on return. On success *out_id (may be NULL) receives the request id,
 * never 0, and `done` will be called exactly once. On failure nothing is sent, `done` is not
 * called, and the code is returned (COURIER_E_INVALID_ARGUMENT, COURIER_E_INVALID_URL,
 * COURIER_E_INVALID_ENCODING, COURIER_E_ROUTE_PARAMETER (a catalogue API's path parameter that no
 * object filled: courier_request_new_api), COURIER_E_CLOSED, COURIER_E_NO_MEMORY, or a customize
 * callback's code). Any thread. */
COURIER_API int courier_send(uint64_t *out_id, courier_engine *engine, const courier_request *request,
                             courier_completion_fn done, void *user, courier_error *err);

/* Sends a request and waits for its completion. *out_response receives the response (new,
 * release with courier_response_free) whenever one exists, including on COURIER_E_HTTP_STATUS and
 * COURIER_E_INVALID_RESULT; otherwise NULL. Returns the completion's code. Any thread except the
 * engine's worker thread (calling it from a completion callback returns COURIER_E_INVALID_ARGUMENT). */
COURIER_API int courier_send_sync(courier_response **out_response, courier_engine *engine,
                                  const courier_request *request, courier_error *err);

/* Cancels a request by id: it completes with COURIER_E_CANCELLED (unless it completes otherwise
 * first). Any thread. Returns COURIER_OK when the id is known and not yet completed, else
 * COURIER_E_NOT_FOUND. Completion may run before or after this returns. */
COURIER_API int courier_cancel(courier_engine *engine, uint64_t request_id);
/* Cancels every request the engine holds. Any thread. */
COURIER_API int courier_cancel_all(courier_engine *engine);

/* ========================================================================================== */
/* Streamed responses                                                                          */
/* ========================================================================================== */

/* A response read as it arrives: its head (status, headers, metrics so far) as soon as the header
 * block is read, then its body in chunks as libcurl hands them over, then its end (the final
 * metrics, or the error that ended it). A pull API: the caller reads from any one thread at a
 * time, blocking with a bound or not at all, and an optional notify callback tells an event loop
 * (Swift's async sequences, Python's asyncio) when there is something to read. The engine keeps at
 * most the stream buffer (courier_config_set_stream_buffer_bytes, 1 MiB by default) of unread body
 * per stream, plus the chunk being handed over: past it, that transfer is paused (libcurl's pause)
 * until the reader has taken half of it, while the engine's other transfers go on. So a slow
 * reader holds a flat amount of memory whatever the body's size.
 *
 * What the engine does for a request applies to a stream until its body starts: base URL,
 * parameters, headers, before-send interceptors, credentials and the challenge handler, cookies,
 * proxies, TLS policy, redirects (each hop's body is read and dropped; the last hop streams),
 * retries (before the first byte of the final body, never after), metrics, logs and events. A
 * response the engine may still act on (a redirect it follows, a 401 or 407, a status the retry
 * rule may retry) is read whole first (bounded by the maximum response size) and then handed to
 * the stream as its head and one chunk. Not for streams: the cache (never read or written for a
 * stream), freezing (a request that may be frozen is refused), downloads to a file, and what judges
 * a whole body (after-receive interceptors, JSON and mapping, validators, the accepted statuses):
 * a stream's head carries any status, and the reader decides. The engine's default timeout does
 * not bound a stream (it may last hours); a timeout set on the request bounds the whole transfer,
 * paused time included, and an idle timeout (COURIER_TIMEOUT_IDLE) counts only
 * while the transfer is not paused. */
typedef struct courier_stream courier_stream;

/* Told, on the engine's worker thread, each time the stream becomes readable: its head arrived,
 * body bytes arrived while none were unread, or it ended. Must not block or read the stream with a
 * wait (a read with timeout 0 is fine); typically it wakes the reader. May be called once more
 * after the reader has read everything (spurious: the reader then gets COURIER_E_AGAIN). */
typedef void (*courier_stream_notify_fn)(courier_stream *stream, void *user);

/* Sends `request` as a stream. The request is copied (borrowed for the call). On success *out is
 * the stream (release it with courier_stream_free) and the request is on its way; `notify` (may
 * be NULL) is called as above, and user_free (may be NULL) once when the stream is freed.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL arguments; a request that may be frozen or downloads to
 * a file, with a message saying which), and every error of courier_send (nothing is sent). Any
 * thread. */
COURIER_API int courier_stream_open(courier_stream **out, courier_engine *engine, const courier_request *request,
                                    courier_stream_notify_fn notify, void *user, courier_user_free_fn user_free,
                                    courier_error *err);
/* The send's request id (the one events, logs and courier_cancel know). Any thread. */
COURIER_API uint64_t courier_stream_id(const courier_stream *stream);
/* Waits at most timeout_ms (0: do not wait; -1: no bound) for the head. COURIER_OK: *out_head is the
 * response's status, headers, URL and metrics so far, with an empty body, borrowed until the
 * stream is freed. COURIER_E_AGAIN: not yet. Any other code: the send failed before a head
 * arrived (err filled: the error, with the response attached when the engine judged one, as
 * courier_send's completion has it). A waiting call returns COURIER_E_INVALID_ARGUMENT on the
 * engine's worker thread. */
COURIER_API int courier_stream_head(const courier_response **out_head, courier_stream *stream, int64_t timeout_ms,
                                    courier_error *err);
/* Reads the next chunk of the body, waiting at most timeout_ms (0, -1 as above; the head is
 * waited for first). COURIER_OK with *out_len > 0: *out_data is the chunk, borrowed until the next read
 * or courier_stream_free; COURIER_OK with *out_len == 0: the body ended and the response is complete
 * (courier_stream_response). COURIER_E_AGAIN: nothing yet. Any other code: the stream failed
 * (a cut connection is COURIER_E_PARTIAL_RESPONSE, a timeout COURIER_E_TIMEOUT with its kind,
 * a cancel COURIER_E_CANCELLED; err filled), after the bytes that came before it were read. */
COURIER_API int courier_stream_next(const void **out_data, size_t *out_len, courier_stream *stream, int64_t timeout_ms,
                                    courier_error *err);
/* courier_stream_next into the caller's buffer: up to cap bytes (a chunk larger than cap is read
 * over several calls). *out_n as *out_len above. */
COURIER_API int courier_stream_read(size_t *out_n, courier_stream *stream, void *buffer, size_t cap, int64_t timeout_ms,
                                    courier_error *err);
/* The whole response once the stream ended well: status, headers, the final metrics and the
 * redirects, with an empty body (the body was streamed). NULL before the end or after a failure.
 * Borrowed until the stream is freed. */
COURIER_API const courier_response *courier_stream_response(const courier_stream *stream);
/* Body bytes the engine holds for the stream, not yet read (at most the stream buffer plus one
 * chunk). Any thread. */
COURIER_API int64_t courier_stream_buffered(const courier_stream *stream);
/* Cancels the stream (from any thread, even while the engine closes: a close ends every stream
 * before it frees the engine, and a stream that ended never reaches the engine again): a waiting
 * read returns COURIER_E_CANCELLED once the bytes already held are read. COURIER_OK, or
 * COURIER_E_NOT_FOUND when it had ended. */
COURIER_API int courier_stream_cancel(courier_stream *stream);
/* Releases the stream: cancels it when it has not ended (its connection is closed, never reused
 * mid-body) and frees what it holds. Not while another thread reads it. Accepts NULL. Before,
 * during or after courier_engine_close (the close ends every stream; an ended stream stays
 * readable and never reaches the engine again). */
COURIER_API void courier_stream_free(courier_stream *stream);
/* The most unread body a stream of the engine holds before its transfer is paused (bytes, >= 16
 * KiB; 0: the default, 1 MiB). Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_stream_buffer_bytes(courier_config *config, int64_t bytes);

/* ========================================================================================== */
/* Server-sent events                                                                          */
/* ========================================================================================== */

/* An event source (text/event-stream) read by the WHATWG HTML "Server-sent events" rules, over a
 * courier_stream: lines end at CRLF, LF or CR (a CR at the end of one chunk and an LF at the start
 * of the next are one line end); a leading BOM is skipped once per connection; invalid UTF-8
 * becomes U+FFFD; a line starting with ':' is a comment; "field: value" loses one leading space;
 * a line with no ':' is a field with an empty value; "data" lines are joined by LF; "id" sets the
 * last event ID unless its value holds NUL; "retry" counts only when all ASCII digits; a blank line
 * dispatches, and a block with no data moves the last event ID but dispatches nothing; an
 * unfinished block at the end of a connection is dropped.
 *
 * Reconnection as EventSource does it: after a connection ends (a clean end of the body, a dropped
 * connection or another network failure) the source waits the reconnection time (the server's
 * last "retry", else 3 s; doubled after each failure that brought no event, up to 30 s) and
 * connects again with Last-Event-ID. A status other than 200 (204 is how a server says "stop") or
 * a Content-Type other than text/event-stream ends it for good. Each connection is a GET of the
 * request's URL with Accept: text/event-stream (the request's headers, credentials and settings
 * apply; no cache; a request that may be frozen, a body, multipart parts or a download are
 * refused). Read from one thread at a time. */
typedef struct courier_sse courier_sse;

/* The state of an event source (EventSource's readyState). */
typedef enum courier_sse_state {
    COURIER_SSE_CONNECTING = 0, /* connecting, or waiting to reconnect */
    COURIER_SSE_OPEN = 1,       /* a 200 text/event-stream is being read */
    COURIER_SSE_CLOSED = 2      /* ended for good (failed, or closed by the app) */
} courier_sse_state;

/* An event. Its strings are borrowed until the next courier_sse_next or courier_sse_free. */
typedef struct courier_sse_event {
    size_t size;               /* set by the caller: sizeof(courier_sse_event) */
    const char *type;          /* the "event" field, or "message" */
    const char *data;          /* the data lines joined by LF (UTF-8, NUL-terminated) */
    size_t data_len;           /* bytes of data */
    const char *last_event_id; /* the source's last event ID when it was dispatched ("" none) */
} courier_sse_event;

/* Told (on the engine's worker thread) when the source may have something new: an event, a state
 * change, an end. Must not block; may be called when nothing is new. */
typedef void (*courier_sse_notify_fn)(courier_sse *source, void *user);

/* Opens an event source for `request` (copied). On success *out is the source (release it with
 * courier_sse_free), already connecting; notify (may be NULL) is called as above, user_free
 * (may be NULL) once when the source is freed. Errors: COURIER_E_INVALID_ARGUMENT (NULL arguments;
 * a request that may be frozen, has a body, parts or a download), COURIER_E_NO_MEMORY, and the
 * errors of courier_stream_open for the first connection. Any thread. */
COURIER_API int courier_sse_open(courier_sse **out, courier_engine *engine, const courier_request *request,
                                    courier_sse_notify_fn notify, void *user, courier_user_free_fn user_free,
                                    courier_error *err);
/* The next event, waiting at most timeout_ms (0: do not wait; -1: no bound), connecting and
 * reconnecting meanwhile. COURIER_OK: *out_event filled (its size set by the caller beforehand).
 * COURIER_E_AGAIN: none yet (courier_sse_retry_in_ms says when a reconnection is due, for event
 * loops that do not wait here). Any other code: the source ended for good, with the same code on
 * every later call: COURIER_E_HTTP_STATUS (err's http_status: 204, or another status than 200),
 * COURIER_E_INVALID_RESULT (not text/event-stream), COURIER_E_CANCELLED (courier_sse_close),
 * COURIER_E_CLOSED (the engine closed), or the request's own failure (an invalid URL...). A waiting
 * call returns COURIER_E_INVALID_ARGUMENT on the engine's worker thread. */
COURIER_API int courier_sse_next(courier_sse_event *out_event, courier_sse *source, int64_t timeout_ms,
                                    courier_error *err);
/* The state now. Any thread. */
COURIER_API courier_sse_state courier_sse_get_state(const courier_sse *source);
/* While waiting to reconnect: milliseconds until the next connection (>= 0); otherwise -1. */
COURIER_API int64_t courier_sse_retry_in_ms(const courier_sse *source);
/* The reconnection time in force (the server's last "retry", else 3000). */
COURIER_API int64_t courier_sse_retry_ms(const courier_sse *source);
/* Stops the source (from any thread, also while the engine closes): no more connections; a
 * waiting read returns COURIER_E_CANCELLED. COURIER_OK, or COURIER_E_NOT_FOUND when it had ended.
 * courier_sse_next connects with the engine: it must not run while or after the engine closes
 * (free the source first; once the engine closed, the source's read ends with COURIER_E_CLOSED
 * only when its connection was open). */
COURIER_API int courier_sse_close(courier_sse *source);
/* Closes the source if needed and releases it. Not while another thread reads it. Accepts NULL. */
COURIER_API void courier_sse_free(courier_sse *source);

/* ========================================================================================== */
/* WebSocket                                                                                   */
/* ========================================================================================== */

/* A WebSocket client (RFC 6455) for ws:// and wss:// URLs, driven by the engine's worker thread
 * beside its other transfers (no thread per socket). libcurl makes the connection (DNS, TCP, the
 * engine's proxies and TLS policy with pinning and client certificates, HTTP/1.1 only); Courier
 * writes the opening handshake and checks the answer (101, Upgrade, Connection,
 * Sec-WebSocket-Accept, the subprotocol); wslay frames the messages, reassembles fragmented ones,
 * answers pings and checks what the server sends (masking, reserved bits, opcodes, control frames,
 * UTF-8 of text messages and close reasons, close codes, the maximum message size). A server that
 * breaks the protocol fails the connection with the close code RFC 6455 names (1002, 1007, 1009)
 * and the reader gets the error after the messages that came before it. No extension is offered
 * (permessage-deflate is not supported yet).
 *
 * The request gives the URL (ws://, wss://, or http(s):// taken as ws(s)://; a relative target is
 * joined with the base URL), the extra headers of the handshake (the engine's default headers
 * too), Basic credentials for the URL's own origin (courier_request_set_basic_auth), the
 * connect timeout, and the request's TLS policy. The engine's cookies for the URL go in a Cookie
 * header. Not for WebSocket: the cache, freezing, retries, redirects (a 3xx is a failed
 * handshake), bodies and downloads (refused).
 *
 * A pull API, as courier_stream: one thread at a time reads messages, with a bounded wait or none,
 * and an optional notify callback tells an event loop when there is something to read. Any thread
 * sends; sends are queued to the worker, which writes them when the socket takes them. */
typedef struct courier_ws courier_ws;

/* The state of a WebSocket (the browser's readyState). */
typedef enum courier_ws_state {
    COURIER_WS_CONNECTING = 0, /* connecting, or in the opening handshake */
    COURIER_WS_OPEN = 1,       /* messages flow both ways */
    COURIER_WS_CLOSING = 2,    /* a close frame was sent or received; the handshake is not over */
    COURIER_WS_CLOSED = 3      /* ended: closed, failed, or the engine closed */
} courier_ws_state;

/* The type of a message. */
typedef enum courier_ws_type {
    COURIER_WS_TEXT = 1,  /* UTF-8 text (checked both ways) */
    COURIER_WS_BINARY = 2 /* bytes */
} courier_ws_type;

/* Options of a WebSocket. Set `size`, initialize with courier_ws_options_init, then change fields:
 *   courier_ws_options o = {sizeof o}; courier_ws_options_init(&o); o.ping_interval_ms = 20000;
 * The struct only grows at its end; the fields beyond a caller's size are read as their defaults. */
typedef struct courier_ws_options {
    size_t size;                /* sizeof(courier_ws_options), set by the caller */
    const char *subprotocols;   /* offered subprotocols, comma-separated ("chat, superchat"), or
                                   NULL (default): none. Borrowed for courier_ws_open */
    int64_t max_message_bytes;  /* largest message received, all fragments together; a larger one
                                   fails the connection with 1009 and COURIER_E_TOO_LARGE
                                   (default 1 MiB) */
    int64_t ping_interval_ms;   /* keepalive: a ping after this long without one (0, default: none) */
    int64_t ping_timeout_ms;    /* a ping's pong not back within this fails the connection with
                                   COURIER_E_TIMEOUT, a close 1011 sent (default: ping_interval_ms) */
    int64_t close_timeout_ms;   /* after a close frame is sent, how long to wait for the server's
                                   (then COURIER_E_TIMEOUT; default 10000) */
    int64_t handshake_timeout_ms; /* connecting and the opening handshake together (default: the
                                     request's timeout if it set one, else 30000) */
    int64_t max_send_queue_bytes; /* messages queued and not yet written, at most (default 16 MiB);
                                     a send past it returns COURIER_E_AGAIN */
} courier_ws_options;
/* Fills *options with the defaults, writing only the fields that end within options->size (which
 * it keeps). Errors: COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the first version's). */
COURIER_API int courier_ws_options_init(courier_ws_options *options);

/* A message received. Its data is borrowed until the next courier_ws_next or courier_ws_free. */
typedef struct courier_ws_message {
    size_t size;          /* set by the caller: sizeof(courier_ws_message) */
    courier_ws_type type; /* COURIER_WS_TEXT or COURIER_WS_BINARY */
    const uint8_t *data;  /* the payload, followed by a NUL that is not counted (text reads as a C
                             string unless it holds NUL) */
    size_t len;           /* bytes of data */
} courier_ws_message;

/* Told (on the engine's worker thread) when the WebSocket may have something new: opened, a
 * message, closing, ended. Must not block or read with a wait (a read with timeout 0 is fine); may
 * be called when nothing is new. Not called once courier_ws_free has returned, except a call
 * already under way then (user_free runs after it). */
typedef void (*courier_ws_notify_fn)(courier_ws *ws, void *user);

/* Opens a WebSocket for `request` (borrowed for the call) with `options` (NULL: the defaults). On
 * success *out is the WebSocket (release it with courier_ws_free), connecting: messages may be sent
 * at once (they wait for the handshake). notify (may be NULL) is called as above, user_free (may
 * be NULL) once when the WebSocket is released, on whichever thread releases it last (the caller's
 * or the worker). Errors here: COURIER_E_INVALID_ARGUMENT (NULL arguments; a request with a body,
 * parts, a download or that may be frozen; a subprotocol that is not a token; bad options),
 * COURIER_E_INVALID_URL (not ws, wss, http or https), COURIER_E_CLOSED, COURIER_E_NO_MEMORY, and
 * the errors of courier_send for the request. Connecting and the handshake fail later, through
 * courier_ws_next: COURIER_E_CANNOT_RESOLVE, _CANNOT_CONNECT, _TLS, _PINNING, _PROXY, _TIMEOUT,
 * COURIER_E_WS_HANDSHAKE. Any thread; on failure user_free (if any) has been called. */
COURIER_API int courier_ws_open(courier_ws **out, courier_engine *engine, const courier_request *request,
                                const courier_ws_options *options, courier_ws_notify_fn notify, void *user,
                                courier_user_free_fn user_free, courier_error *err);
/* Queues a message (data copied; len 0 allowed). Returns when it is queued, not when it is
 * written: messages go out in the order sent. Any thread. Errors: COURIER_E_INVALID_ARGUMENT
 * (NULL, a bad type), COURIER_E_INVALID_ENCODING (text that is not UTF-8), COURIER_E_AGAIN (the
 * send queue is full: max_send_queue_bytes; try again once courier_ws_queued_bytes has fallen),
 * COURIER_E_WS_CLOSED (a close was sent or the WebSocket ended), COURIER_E_CLOSED (the engine is
 * closing), COURIER_E_NO_MEMORY. */
COURIER_API int courier_ws_send(courier_ws *ws, courier_ws_type type, const void *data, size_t len,
                                courier_error *err);
/* The next message, waiting at most timeout_ms (0: do not wait; -1: no bound). COURIER_OK: *out_message
 * filled (its size set by the caller beforehand). COURIER_E_AGAIN: none yet. Any other code: the WebSocket
 * ended, after every message that arrived before; the same code on every later call: COURIER_E_WS_CLOSED
 * (the closing handshake ended: courier_ws_close_code gives the server's code), COURIER_E_WS_PROTOCOL (the
 * server broke the protocol; courier_ws_close_code_sent: 1002 or 1007), COURIER_E_TOO_LARGE (a message
 * over max_message_bytes; 1009 sent), COURIER_E_NETWORK (the connection dropped without a close frame:
 * close code 1006), COURIER_E_TIMEOUT (the handshake, a keepalive pong or the server's close did not come
 * in time), COURIER_E_WS_HANDSHAKE and the connection's errors (above), COURIER_E_CANCELLED (closed before
 * the handshake ended), COURIER_E_CLOSED (the engine closed). err (may be NULL) gets the detail. A waiting
 * call returns COURIER_E_INVALID_ARGUMENT on the engine's worker thread. */
COURIER_API int courier_ws_next(courier_ws_message *out_message, courier_ws *ws, int64_t timeout_ms,
                                courier_error *err);
/* Starts the closing handshake: a close frame with `close_code` (1000, 1001, 1002, 1003, 1007 to 1011,
 * or 3000 to 4999) and `reason` (NULL or UTF-8 of at most 123 bytes) is queued after the messages
 * already sent; the reader then gets the messages still arriving, and COURIER_E_WS_CLOSED once the
 * server's close frame came (or COURIER_E_TIMEOUT after close_timeout_ms). Before the handshake
 * ended, it abandons the connection (COURIER_E_CANCELLED). Any thread. Errors:
 * COURIER_E_INVALID_ARGUMENT (a code that may not be sent, a reason too long or not UTF-8),
 * COURIER_E_WS_CLOSED (closing or ended already), COURIER_E_CLOSED (the engine is closing),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_ws_close(courier_ws *ws, int close_code, const char *reason);
/* The state now. Any thread. */
COURIER_API courier_ws_state courier_ws_get_state(const courier_ws *ws);
/* The subprotocol the server chose ("" none), once the handshake ended ("" before). Borrowed until
 * courier_ws_free. Any thread. */
COURIER_API const char *courier_ws_protocol(const courier_ws *ws);
/* The close code the server sent (1005 when its close frame had none), 1006 when the connection
 * ended without one, 0 while it is open. Any thread. */
COURIER_API int courier_ws_close_code(const courier_ws *ws);
/* The reason the server sent with its close code (UTF-8, "" none), once the state is
 * COURIER_WS_CLOSED ("" before). Borrowed until courier_ws_free. Any thread. */
COURIER_API const char *courier_ws_close_reason(const courier_ws *ws);
/* The close code Courier sent (the caller's, an echo of the server's, or 1002/1007/1009/1011 when
 * it failed the connection); 0 when none was sent. Any thread. */
COURIER_API int courier_ws_close_code_sent(const courier_ws *ws);
/* Bytes of messages sent and not yet written to the socket. Any thread. */
COURIER_API int64_t courier_ws_queued_bytes(const courier_ws *ws);
/* Releases the WebSocket. One still open is dropped at once, without a close frame (close first
 * and read until COURIER_E_WS_CLOSED for a clean end). Not while another thread reads it. Accepts
 * NULL. Call it before courier_engine_close, or after (the close ends every WebSocket with
 * COURIER_E_CLOSED; it stays readable). Any thread. */
COURIER_API void courier_ws_free(courier_ws *ws);

/* ========================================================================================== */
/* Responses                                                                                   */
/* ========================================================================================== */

/* Releases a response (one reference of it, if it was retained). Accepts NULL. Any thread. */
COURIER_API void courier_response_free(courier_response *response);
/* A new reference to the same response (responses are immutable once delivered), released with
 * courier_response_free; the response is freed when the last one is. Lets a callback keep a response
 * it only borrows (a validator's, an after-receive interceptor's). Any thread. NULL in, NULL out. */
COURIER_API courier_response *courier_response_retain(const courier_response *response);
/* The HTTP status code (0 if none). */
COURIER_API int courier_response_status(const courier_response *response);
/* The body. Borrowed until the response is freed; *len (may be NULL) receives its length. The
 * bytes are followed by a NUL that is not counted, so text bodies may be read as C strings.
 * Never NULL: an empty body is "". */
COURIER_API const uint8_t *courier_response_body(const courier_response *response, size_t *len);
/* The body as UTF-8 text, converted from the charset its Content-Type names ("text/plain;
 * charset=GBK"), else from `default_charset` (NULL: UTF-8). A UTF-8 body loses a leading byte order
 * mark. *out_text is new: release it with courier_free; it is NUL-terminated, and *out_len (may be
 * NULL) receives its length in bytes (a body holding NUL bytes keeps them). Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL out_text or response), COURIER_E_UNKNOWN_CHARSET (the
 * charset is one iconv does not know), COURIER_E_CHARSET (bytes that are not valid in the charset,
 * or cut short), COURIER_E_NO_MEMORY. */
COURIER_API int courier_response_text(char **out_text, size_t *out_len, const courier_response *response,
                                      const char *default_charset, courier_error *err);
/* The first value of a header, case-insensitive; NULL if absent. Borrowed until freed. */
COURIER_API const char *courier_response_header(const courier_response *response, const char *name);
/* Number of header lines of the final response, and the i-th in received order.
 * Errors: COURIER_E_NOT_FOUND (index out of range). Borrowed until freed. */
COURIER_API size_t courier_response_header_count(const courier_response *response);
COURIER_API int courier_response_header_at(const char **out_name, const char **out_value,
                                           const courier_response *response, size_t index);
/* The URL that answered, after redirects. Borrowed until freed. */
COURIER_API const char *courier_response_url(const courier_response *response);
/* The method that was sent. Borrowed until freed. */
COURIER_API const char *courier_response_method(const courier_response *response);
/* The id of the send that produced it. */
COURIER_API uint64_t courier_response_request_id(const courier_response *response);

/* Timing and size of one transfer. Times are seconds from the start of the transfer (0 if the
 * phase did not happen, e.g. DNS and connect on a reused connection): measured timings are
 * double seconds (_s); durations a caller sets or reads are int64_t milliseconds (_ms). */
typedef struct courier_metrics {
    size_t size;           /* sizeof(courier_metrics), set by the caller (see "Growth" in docs/ABI.md) */
    double dns_s;          /* name resolution done */
    double connect_s;      /* TCP connected */
    double tls_s;          /* TLS handshake done (0 for http) */
    double first_byte_s;   /* first response byte */
    double total_s;        /* transfer done */
    int64_t bytes_sent;    /* request headers + body */
    int64_t bytes_received;/* response headers + body */
    int connection_reused; /* 1 if no new connection was made */
    int http_version;      /* 10, 11, 20, 30, or 0 */
    int redirects;         /* redirects followed */
} courier_metrics;
/* Copies the metrics into *out, whose `size` the caller set to sizeof(courier_metrics) as it knows
 * it, so the struct can grow: only the fields that end within it are written (size is kept).
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, or a size smaller than the first version's). */
COURIER_API int courier_response_metrics(courier_metrics *out, const courier_response *response);

/* ========================================================================================== */
/* Redirects and timeouts (RFC 9110 15.4)                                                      */
/* ========================================================================================== */

/* Redirects are followed by the engine, hop by hop: each hop is a transfer of its own that goes
 * through the cache (lookup, and storing a 301 or 308 under its rules) and the scheduler like any
 * send, under the same request id (courier_cancel stops the chain wherever it is). Only
 * 301, 302, 303, 307 and 308 with a Location are followed; the method and body of the next hop:
 *   301, 302: POST becomes GET without its body and its Content-* fields (what browsers and every
 *             peer do, though RFC 9110 allows keeping it); every other method keeps method and body.
 *   303:      every method but HEAD becomes GET without body and Content-* fields.
 *   307, 308: method and body kept.
 * A body that must be sent again and was streamed from a file (courier_request_set_body_file, file
 * parts) is not read twice: the request fails with COURIER_E_BODY_NOT_REPLAYABLE. An HTTPS URL that
 * redirects to HTTP fails with COURIER_E_REDIRECT_REFUSED unless downgrades are allowed. Once the
 * chain leaves the origin (scheme, host, port) of the first request, the Authorization, Cookie and
 * Proxy-Authorization fields of the request are dropped for the rest of the chain. Mock answers and
 * custom transports are delivered as they are, never followed. Not following (the setting off, or
 * the hook saying COURIER_REDIRECT_STOP) delivers the 3xx, its Location included, as the response:
 * a success (COURIER_OK), like any status below 400. */

/* Defaults: follow on; at most 20 redirects (OkHttp's and the browsers' limit; requests allows 30,
 * more than any real chain needs, and loops are found sooner); HTTPS to HTTP refused. */
COURIER_API int courier_config_set_follow_redirects(courier_config *config, int follow);
/* The engine's settings. max_redirects >= 0 (0: the first redirect fails with
 * COURIER_E_TOO_MANY_REDIRECTS). Errors: COURIER_E_INVALID_ARGUMENT (NULL config, max_redirects < 0). */
COURIER_API int courier_config_set_max_redirects(courier_config *config, int max_redirects);
COURIER_API int courier_config_set_allow_redirect_downgrade(courier_config *config, int allow);
/* The same for one request, replacing the engine's setting. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_request_set_follow_redirects(courier_request *request, int follow);
COURIER_API int courier_request_set_max_redirects(courier_request *request, int max_redirects);
COURIER_API int courier_request_set_allow_redirect_downgrade(courier_request *request, int allow);

/* What a redirect hook returns (or a negative value: refuse, and the request fails with
 * COURIER_E_REDIRECT_REFUSED). */
#define COURIER_REDIRECT_FOLLOW 0 /* send `next` as it now is */
#define COURIER_REDIRECT_STOP 1   /* follow no further: the 3xx is the response */

/* A redirect hook sees every redirect the engine is about to follow: `response` is the 3xx
 * (borrowed for the call), `next` the next hop as the rules above made it (method, absolute URL,
 * headers; borrowed for the call), which the hook may change (courier_outgoing_set_url,
 * courier_outgoing_set_header); courier_outgoing_request_id gives the send's id. The downgrade and
 * scheme checks apply to the URL the hook leaves, and so does the credentials rule: a hop the hook
 * moves off the first origin loses the request's credential fields (a value the hook set goes). Runs on the engine's worker thread: it must not
 * block for long, wait for another send, or close the engine. */
typedef int (*courier_redirect_fn)(const courier_response *response, courier_outgoing *next, void *user);
/* Registers the hook of every request of engines opened with this configuration (NULL removes it),
 * and of one request (replacing the engine's). user_free as for validators (called when the hook is
 * replaced or its owner freed, also when registration fails). Errors: COURIER_E_INVALID_ARGUMENT
 * (NULL config or request), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_redirect_hook(courier_config *config, courier_redirect_fn fn, void *user,
                                                 courier_user_free_fn user_free);
COURIER_API int courier_request_set_redirect_hook(courier_request *request, courier_redirect_fn fn, void *user,
                                                  courier_user_free_fn user_free);

/* The redirects a response's chain went through, in order: hop i's URL (the URL that answered with
 * a redirect) and its status. The final URL is courier_response_url. 0 for a response that was not
 * redirected (and for mock and custom-transport responses). Borrowed until the response is freed.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL response), COURIER_E_NOT_FOUND (index out of range). */
COURIER_API size_t courier_response_redirect_count(const courier_response *response);
COURIER_API int courier_response_redirect_at(const char **out_url, int *out_status, const courier_response *response,
                                             size_t index);

/* The three timeouts of a request. Connect and idle apply to each hop of a redirect chain, the
 * total to the whole chain. All fail with COURIER_E_TIMEOUT; courier_error_timeout_kind says which
 * one fired. */
typedef enum courier_timeout_kind {
    COURIER_TIMEOUT_NONE = 0,
    COURIER_TIMEOUT_CONNECT = 1, /* no connection (TCP and TLS) within the time: nothing was sent */
    COURIER_TIMEOUT_IDLE = 2,    /* connected, and no byte received for the time (waiting for the
                                    response included) while no request body byte went out */
    COURIER_TIMEOUT_TOTAL = 3    /* the whole transfer took longer (courier_config_set_timeout_ms) */
} courier_timeout_kind;
/* Sets one timeout in milliseconds: ms > 0 a limit, 0 none. TOTAL is the same setting as
 * courier_config_set_timeout_ms / courier_request_set_timeout_ms. Engine defaults: connect none
 * (bounded by the total), idle none, total 60 000. For a request, ms < 0 gives the setting back to
 * the engine. Errors: COURIER_E_INVALID_ARGUMENT (unknown kind, negative engine value). */
COURIER_API int courier_config_set_timeout(courier_config *config, courier_timeout_kind kind, int64_t ms);
COURIER_API int courier_request_set_timeout(courier_request *request, courier_timeout_kind kind, int64_t ms);
/* Which timeout a COURIER_E_TIMEOUT error was: a courier_timeout_kind (NONE for any other error,
 * or for a NULL err). Any thread. */
COURIER_API int courier_error_timeout_kind(const courier_error *err);

/* ========================================================================================== */
/* Building responses (mock callbacks, after-receive interceptors, custom transports)          */
/* ========================================================================================== */

/* A new response with a status (100..999), no headers, an empty body and url "". *out is new:
 * hand it to a function that takes it, or release it with courier_response_free. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_response_new(courier_response **out, int status);
/* Adds a header line to a response being built (not to one the engine handed out: responses are
 * immutable once delivered). Errors: COURIER_E_INVALID_HEADER, COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_response_add_header(courier_response *response, const char *name, const char *value);
/* Replaces the body of a response being built (copied; len may be 0). */
COURIER_API int courier_response_set_body(courier_response *response, const void *body, size_t len);

/* ========================================================================================== */
/* Scheduling: limits, priorities, retry, coalescing, the frequent-request guard              */
/* ========================================================================================== */

/* Priorities decide which waiting request starts first when the engine's limits hold requests
 * back (courier_config_set_max_connections_per_host / _max_connections limit the requests in
 * flight, per host and in all). Equal priorities start in the order they were sent. */
typedef enum courier_priority {
    COURIER_PRIORITY_LOW = -1,
    COURIER_PRIORITY_NORMAL = 0, /* the default */
    COURIER_PRIORITY_HIGH = 1
} courier_priority;
COURIER_API int courier_request_set_priority(courier_request *request, courier_priority priority);

/* Retry rule flags. */
#define COURIER_RETRY_NON_IDEMPOTENT 0x1u /* also retry POST, PATCH and other non-idempotent methods */
#define COURIER_RETRY_IGNORE_RETRY_AFTER 0x2u /* do not wait for a server's Retry-After */

/* A retry rule: at most max_retries further attempts after the first, waiting base_delay_ms *
 * 2^(attempt-1), capped at max_delay_ms, with jitter (a random wait between half and all of it).
 * A server's Retry-After (seconds or an HTTP date, on 429 and 503) is waited for when it is at
 * most max_delay_ms; a longer one ends the retries with the response. Retried: network failures
 * (cannot resolve, cannot connect, timeout, partial response, network) and HTTP 408, 429 and 5xx;
 * only for idempotent methods (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) unless
 * COURIER_RETRY_NON_IDEMPOTENT. Never after a cancel, TLS or pinning failure, a validator's "no",
 * or a body too large. max_retries 0 turns retrying off (the engine default unless set).
 * Errors: COURIER_E_INVALID_ARGUMENT (negative values, base > max). */
COURIER_API int courier_config_set_retry(courier_config *config, int max_retries, int64_t base_delay_ms,
                                         int64_t max_delay_ms, unsigned flags);
/* The same for one request, replacing the engine's rule. */
COURIER_API int courier_request_set_retry(courier_request *request, int max_retries, int64_t base_delay_ms,
                                          int64_t max_delay_ms, unsigned flags);
/* How many attempts the response took (1 without retries), and the total time the engine chose
 * to wait between them, in milliseconds (backoff and Retry-After; computed, not measured). Either
 * out pointer may be NULL. */
COURIER_API int courier_response_attempts(int *out_attempts, int64_t *out_waited_ms, const courier_response *response);

/* Identical GET and HEAD requests in flight at once (same URL, same header lines) share one
 * network request, whose answer goes to every caller (each gets its own response copy and runs
 * its own validator). On by default; 0 opts this request out. */
COURIER_API int courier_request_set_coalesce(courier_request *request, int coalesce);

/* The frequent-request guard (HLNetworking's): when window_ms > 0, a request identical to one
 * sent less than window_ms ago (same method, URL, header lines and body) is refused by
 * courier_send with COURIER_E_TOO_FREQUENT and nothing is sent. 0 (the default) turns it off. */
COURIER_API int courier_config_set_frequent_guard_ms(courier_config *config, int64_t window_ms);
/* 0 exempts this request from the guard (it is neither refused nor recorded). */
COURIER_API int courier_request_set_frequent_guard(courier_request *request, int guarded);

/* ========================================================================================== */
/* Mock data (HTNetworking's enableMockTest)                                                   */
/* ========================================================================================== */

/* A mocked request never reaches the network: its answer is made from the request's mock and
 * then goes through the same judging (status, validator), mapping and cache policy as a real
 * one. Mocks are used only while the engine's mock switch is on (off by default). */
COURIER_API int courier_config_set_mock_enabled(courier_config *config, int enabled);
/* Whether the mock switch is on (1) or off (0). Any thread. */
COURIER_API int courier_engine_mock_enabled(const courier_engine *engine);
/* Turns the switch on or off at run time; affects requests sent afterwards. Any thread. */
COURIER_API int courier_engine_set_mock_enabled(courier_engine *engine, int enabled);

/* The mock answer: a status and a body (copied; NULL with len 0 for none) with its content type
 * (NULL: none). Replaces any earlier mock answer, file, error or callback of the request. */
COURIER_API int courier_request_set_mock_response(courier_request *request, int status, const void *body, size_t len,
                                                  const char *content_type);
/* The mock answer's body is read from a file when the request is sent (status 200 unless
 * courier_request_set_mock_status; content type from the extension: .json -> application/json).
 * A missing file fails the request with COURIER_E_NOT_FOUND. The path is copied. */
COURIER_API int courier_request_set_mock_file(courier_request *request, const char *path);
/* The status of a mock answer made from a file. */
COURIER_API int courier_request_set_mock_status(courier_request *request, int status);
/* Adds a header to the mock answer. Errors as courier_request_add_header. */
COURIER_API int courier_request_add_mock_header(courier_request *request, const char *name, const char *value);
/* The mock fails the request with this code (e.g. COURIER_E_TIMEOUT) and no response. */
COURIER_API int courier_request_set_mock_error(courier_request *request, courier_code code);
/* The mock answers after this delay (ms >= 0), without blocking anything. */
COURIER_API int courier_request_set_mock_delay_ms(courier_request *request, int64_t delay_ms);
/* The mock answer is built by a callback from the final request: return COURIER_OK with *out set
 * (new: the engine takes it; build it with courier_response_new), or a negative code to fail the
 * request with it. Runs on the engine's worker thread. user_free as for validators. */
typedef int (*courier_mock_fn)(const courier_outgoing *request, courier_response **out, void *user);
COURIER_API int courier_request_set_mock_callback(courier_request *request, courier_mock_fn fn, void *user,
                                                  courier_user_free_fn user_free);

/* ========================================================================================== */
/* Interceptors                                                                                */
/* ========================================================================================== */

/* Before-send: adapts the final request (like a customize callback, for every request of the
 * engine), on the sending thread inside courier_send, after the request's own customize callback.
 * Return COURIER_OK, or a negative code to refuse the send (courier_send returns it).
 * After-receive: sees each response a transport produced, before it is judged, on the worker
 * thread. It may replace *response (free the old one with courier_response_free, set a new one
 * built with courier_response_new), or return a negative code to fail the request with that code
 * (the response stays attached). Interceptors run in the order they were added; either function
 * may be NULL. user_free (may be NULL) runs once when the last engine using it closes and the
 * configuration is freed. */
typedef int (*courier_before_send_fn)(courier_outgoing *outgoing, void *user);
typedef int (*courier_after_receive_fn)(uint64_t request_id, courier_response **response, void *user);
COURIER_API int courier_config_add_interceptor(courier_config *config, courier_before_send_fn before,
                                               courier_after_receive_fn after, void *user,
                                               courier_user_free_fn user_free);

/* ========================================================================================== */
/* Sessions: adapters, retriers, an authenticator                                              */
/* ========================================================================================== */

/* Where they run (docs/design/session.md). Before each attempt of a send (the first, each retry,
 * each redirect hop, each resend of a frozen request), on the engine's worker thread, after the
 * cache was looked up and before the attempt goes out (to the network, a mock or a custom
 * transport): first the adapters (the engine's in the order added, then the request's), then the
 * authenticator applies its credential. What they change holds for that attempt alone: the next
 * attempt starts again from the request as courier_send made it (an adapter that signs or encrypts
 * the body does it once per attempt), and the journal stores the request as courier_send made it,
 * never what an adapter or the authenticator added (so a frozen request carries no credential: it
 * gets the credential in force when it is sent again).
 * After an attempt that failed (a failure code, or a status the request does not accept), in this
 * order: a challenge handler (a 401 or 407 it answers), the authenticator (a refused credential:
 * refresh, then send again), the fixed retry rule (courier_config_set_retry), and, only when the
 * rule does not retry, the retriers in order (the engine's, then the request's) until one retries.
 * Never after a cancel, and never once a stream's body began. While an adapter, a retrier or a
 * refresh has not answered, the send waits off the wire without holding the worker thread; a
 * cancel or the engine's close ends it as usual (a later answer is then a no-op). */

/* One attempt's request handed to an adapter. */
typedef struct courier_adaptation courier_adaptation;
/* An adapter: called on the engine's worker thread before each attempt; it must not block. It reads
 * and changes the attempt's request (courier_adaptation_outgoing: URL, method, headers, body) and
 * completes the adaptation exactly once, now or later, from any thread. */
typedef void (*courier_adapter_fn)(courier_adaptation *adaptation, void *user);
/* Adds an adapter to every request of the engine (after those added before). user_free (may be
 * NULL) runs once when the last engine using it closes and the configuration is freed. Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL config or fn; user is released), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_add_adapter(courier_config *config, courier_adapter_fn fn, void *user,
                                           courier_user_free_fn user_free);
/* Adds an adapter to this request (run after the engine's). user_free runs once when the request
 * and every send of it are done. Errors as above. A request with adapters is never coalesced with
 * another (courier_request_set_coalesce). */
COURIER_API int courier_request_add_adapter(courier_request *request, courier_adapter_fn fn, void *user,
                                            courier_user_free_fn user_free);
/* The attempt's request, read and changed with the courier_outgoing functions (the body too), from
 * one thread at a time until the adaptation completes. Borrowed until then. NULL for NULL. */
COURIER_API courier_outgoing *courier_adaptation_outgoing(courier_adaptation *adaptation);
/* The attempt it is for: 1 for the first, 2 for the first retry or resend... 0 for NULL. */
COURIER_API int courier_adaptation_attempt(const courier_adaptation *adaptation);
/* Completes the adaptation and releases it (it must not be used after): code COURIER_OK sends the
 * attempt as changed (the next adapter first); a negative code fails the send with it (message
 * copied, NULL: the code's text) and no retrier is asked. Exactly once, any thread. Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, code > 0: the adaptation is then failed with COURIER_E_INTERNAL
 * and released all the same). */
COURIER_API int courier_adaptation_complete(courier_adaptation *adaptation, courier_code code, const char *message);
/* courier_adaptation_complete with a user error (courier_raise's): fails the send with code
 * (negative), message and user, which the failure carries back (courier_error_user_data); user is
 * released with user_free (may be NULL) exactly once. Exactly once per adaptation instead of
 * courier_adaptation_complete, any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL adaptation:
 * user released; code >= 0: the send fails with COURIER_E_USER). */
COURIER_API int courier_adaptation_raise(courier_adaptation *adaptation, courier_code code, const char *message,
                                         void *user, courier_user_free_fn user_free);

/* A failed attempt handed to a retrier. */
typedef struct courier_retry_question courier_retry_question;
/* A retrier: called on the engine's worker thread after an attempt failed and the fixed retry rule
 * did not retry it (see above); it must not block. It answers exactly once, now or later, from any
 * thread, with courier_retry_question_answer. */
typedef void (*courier_retrier_fn)(courier_retry_question *question, void *user);
/* Adds a retrier to every request of the engine (asked after those added before). user_free as for
 * adapters. Errors: COURIER_E_INVALID_ARGUMENT (NULL config or fn; user is released),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_add_retrier(courier_config *config, courier_retrier_fn fn, void *user,
                                           courier_user_free_fn user_free);
/* Adds a retrier to this request (asked after the engine's). Errors as above. */
COURIER_API int courier_request_add_retrier(courier_request *request, courier_retrier_fn fn, void *user,
                                            courier_user_free_fn user_free);
/* The failure: its code (COURIER_OK when the response's status is what failed; then
 * courier_retry_question_response has it). Readable from any thread until answered; a NULL
 * question gives 0, NULL or "". */
COURIER_API int courier_retry_question_code(const courier_retry_question *question);
/* The response, if any (borrowed until answered), else NULL. */
COURIER_API const courier_response *courier_retry_question_response(const courier_retry_question *question);
/* Attempts made so far (1 after the first). */
COURIER_API int courier_retry_question_attempt(const courier_retry_question *question);
/* The send's request id, and the attempt's method and URL (before adapters; borrowed until answered). */
COURIER_API uint64_t courier_retry_question_request_id(const courier_retry_question *question);
COURIER_API const char *courier_retry_question_method(const courier_retry_question *question);
COURIER_API const char *courier_retry_question_url(const courier_retry_question *question);
/* Answers: delay_ms < 0 (COURIER_DO_NOT_RETRY): no (the next retrier is asked; after the last, the
 * failure goes to the caller); 0: retry now; > 0: retry after that many milliseconds (counted in
 * courier_response_attempts' wait). Releases the question (it must not be used after). Exactly once,
 * any thread. A send cancelled meanwhile, or an engine closed, makes it a no-op. Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL). */
#define COURIER_DO_NOT_RETRY (-1)
COURIER_API int courier_retry_question_answer(courier_retry_question *question, int64_t delay_ms);

/* A credential refresh asked of an authenticator. */
typedef struct courier_refresh courier_refresh;
/* Returns a new reference to user (a binding's retain: Py_INCREF, a Swift retain), so that one user
 * error can ride with several failures, each releasing its own with user_free. */
typedef void *(*courier_user_retain_fn)(void *user);
/* An authenticator: owns the engine's credential (a string: a bearer token, or anything the app
 * defines), puts it on the requests of its origin, decides which failures mean "refused" and
 * refreshes it, once at a time however many requests wait (single-flight):
 * - Before each attempt of a request it applies to (after the adapters): with no credential, or one
 *   past its expiry (by the engine's clock, courier_config_set_clock), a refresh starts first; while a
 *   refresh runs, the attempt waits for it. Then `apply` puts the credential on the attempt.
 * - After an attempt that carried it: when `refused` says so, an attempt that carried an older
 *   credential than the current one is sent again at once; otherwise a refresh starts (unless one
 *   runs) and the request waits and is then sent again with the new credential. A request refused
 *   again after it waited for a refresh fails with COURIER_E_CREDENTIAL_REFUSED (the loop guard).
 * - A refresh that fails fails every request waiting for it with its error; the credential stays as
 *   it was, and the next request that needs one starts a new refresh.
 * The credential goes only to URLs of its origin (scheme, host and port) and that `applies` accepts:
 * never to another origin, a redirect's included. The callbacks run on the engine's worker thread
 * and must not block. A request sent from `refresh` to the same origin must opt out
 * (courier_request_set_authenticated 0), or it would wait for the refresh it is part of. */
typedef struct courier_authenticator {
    size_t size; /* sizeof(courier_authenticator), set by the caller */
    /* Nonzero when the credential goes to this URL (NULL: every URL of the origin). */
    int (*applies)(const char *url, void *user);
    /* Puts the credential (borrowed for the call) on the attempt; returns COURIER_OK or a negative
     * code that fails the send (courier_raise may carry a user error). NULL: "Authorization: Bearer
     * <credential>". */
    int (*apply)(courier_outgoing *outgoing, const char *credential, void *user);
    /* Nonzero when an attempt's failure (code, and the response or NULL) means the credential was
     * refused. NULL: a response with status 401. */
    int (*refused)(int code, const courier_response *response, void *user);
    /* Starts a refresh; required. Complete it exactly once, now or later, from any thread, with
     * courier_refresh_complete or courier_refresh_fail. */
    void (*refresh)(courier_refresh *refresh, void *user);
} courier_authenticator;
/* Sets the engine's authenticator for origin ("scheme://host[:port]", or any URL of it). The
 * functions are copied (size as the caller knows it); user_free as for adapters. Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the first version's, no refresh),
 * COURIER_E_INVALID_URL (origin not http/https). */
COURIER_API int courier_config_set_authenticator(courier_config *config, const char *origin,
                                                 const courier_authenticator *authenticator, void *user,
                                                 courier_user_free_fn user_free);
/* The credential the engine starts with (copied; NULL: none, the first request refreshes) and its
 * expiry in milliseconds since the Unix epoch (0: none). Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_credential(courier_config *config, const char *credential, int64_t expires_at_ms);
/* Replaces the engine's credential (after a login or a logout: NULL) for the attempts that start
 * afterwards. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL engine or no authenticator). */
COURIER_API int courier_engine_set_credential(courier_engine *engine, const char *credential, int64_t expires_at_ms);
/* 0: the authenticator leaves this request alone (a refresh's own request to the origin); 1 (the
 * default): it applies. */
COURIER_API int courier_request_set_authenticated(courier_request *request, int authenticated);
/* The credential being replaced (NULL when none), borrowed until the refresh completes. */
COURIER_API const char *courier_refresh_credential(const courier_refresh *refresh);
/* Completes a refresh with the new credential (copied) and its expiry (ms since the Unix epoch, 0:
 * none), and releases it: the waiting requests go out with it. Exactly once per refresh (or
 * courier_refresh_fail), any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL refresh; NULL
 * credential: the refresh is then failed with COURIER_E_INVALID_ARGUMENT and released). */
COURIER_API int courier_refresh_complete(courier_refresh *refresh, const char *credential, int64_t expires_at_ms);
/* Fails a refresh and releases it: every waiting request fails with code (negative), message
 * (copied; NULL: the code's text) and user (may be NULL), which each failure carries back
 * (courier_error_user_data), each with a reference of its own from user_retain(user) (user_retain
 * NULL: only the first failure carries user). Every reference, user's own included, is released
 * with user_free exactly once.
 * Exactly once per refresh, any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL refresh: user
 * released; code >= 0: failed with COURIER_E_USER). */
COURIER_API int courier_refresh_fail(courier_refresh *refresh, courier_code code, const char *message, void *user,
                                     courier_user_free_fn user_free, courier_user_retain_fn user_retain);

/* ========================================================================================== */
/* Custom transports (HTNetworking's request types)                                            */
/* ========================================================================================== */

/* One request handed to a custom transport. Borrowed from start until the transport completes it
 * (courier_call_complete) — after that it must not be touched. */
typedef struct courier_call courier_call;

/* The final request. Borrowed for as long as the call. */
COURIER_API const char *courier_call_method(const courier_call *call);
COURIER_API const char *courier_call_url(const courier_call *call);
COURIER_API const char *courier_call_header(const courier_call *call, const char *name);
COURIER_API size_t courier_call_header_count(const courier_call *call);
COURIER_API int courier_call_header_at(const char **out_name, const char **out_value, const courier_call *call,
                                       size_t index);
COURIER_API const uint8_t *courier_call_body(const courier_call *call, size_t *len);
COURIER_API int64_t courier_call_timeout_ms(const courier_call *call);
COURIER_API uint64_t courier_call_request_id(const courier_call *call);

/* Ends a call, exactly once, from any thread (also from inside start): code COURIER_OK with a
 * response (taken; built with courier_response_new), or a negative code with response NULL (or a
 * response to attach). After cancel was called, completing is still required (with
 * COURIER_E_CANCELLED or any code: the caller is told "cancelled" either way).
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL call, or OK without a response). */
COURIER_API int courier_call_complete(courier_call *call, courier_code code, courier_response *response,
                                      const char *message);

/* A transport's functions. `start` begins the call and returns COURIER_OK (then it must complete
 * it later or from inside start), or a negative code (the request fails with it, and the call
 * must not be completed). `cancel` (may be NULL) asks it to stop early; it runs on the worker
 * thread, at most once, only between start and completion. */
typedef struct courier_transport {
    size_t size; /* sizeof(courier_transport), set by the caller */
    int (*start)(courier_call *call, void *user);
    void (*cancel)(courier_call *call, void *user);
} courier_transport;

/* Registers a transport under a name (copied; "http" is reserved). `transport` is copied; its size
 * is sizeof(courier_transport) as the caller knows it. user_free runs once when the registration
 * ends. Errors: COURIER_E_INVALID_ARGUMENT (NULL, empty or reserved name, duplicate). */
COURIER_API int courier_config_register_transport(courier_config *config, const char *name,
                                                  const courier_transport *transport, void *user, courier_user_free_fn user_free);
/* Sends this request through the transport registered under name (NULL: the built-in HTTP one).
 * An unknown name fails courier_send with COURIER_E_NOT_FOUND. */
COURIER_API int courier_request_set_transport(courier_request *request, const char *name);

/* ========================================================================================== */
/* Errors raised by user code                                                                  */
/* ========================================================================================== */

/* A callback the engine runs for one send may fail it with an error of the caller's own (a Swift
 * error, a Python exception): it raises it with courier_raise, returns what courier_raise
 * returned, and the send's failure carries `user` back to whoever waits for it, so a binding
 * re-raises the very object its callback raised. One slot per send: a later raise of the same
 * send replaces an earlier one (its user_free runs). The user data reaches:
 * - the completion: courier_error_user_data(error) during the call; the library releases it
 *   (user_free) when the completion returns;
 * - courier_send / courier_send_sync: their err owns it when they return a failure; read it with
 *   courier_error_user_data and release it with courier_error_clear (a NULL err releases it at once).
 * A send that ends in success (a retry succeeded) releases it. Callbacks that may raise: the
 * request's customize and validator, the engine's validator, before-send and after-receive
 * interceptors, mock callbacks, redirect hooks, progress callbacks, challenge handlers, body
 * encoders and response decoders run for the send, and a custom transport's start (later, from
 * any thread: courier_call_raise). */

/* Raises an error of user code from inside a callback run for a send (above), on the thread that
 * runs it: code is the failure's code (negative: COURIER_E_USER, or a code of the caller's
 * choosing, e.g. COURIER_E_TIMEOUT); message (copied; NULL: the engine's) becomes the error's
 * message; user (may be NULL) is released with user_free (may be NULL) exactly once. Returns code,
 * for the callback to return (a validator returns 0). Errors (user released at once):
 * COURIER_E_INVALID_ARGUMENT (code >= 0, or not inside such a callback). */
COURIER_API int courier_raise(courier_code code, const char *message, void *user, courier_user_free_fn user_free);
/* courier_call_complete with a user error: ends the call with code (negative), response (taken,
 * may be NULL: attached to the failure) and message, and raises user (released with user_free
 * exactly once, also on error) for the send. Any thread, exactly once per call.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL call, code >= 0, completed twice). */
COURIER_API int courier_call_raise(courier_call *call, courier_code code, courier_response *response,
                                   const char *message, void *user, courier_user_free_fn user_free);
/* The user data a callback raised for the send that failed with err, or NULL. Borrowed: owned
 * by err (see above). Any thread. */
COURIER_API void *courier_error_user_data(const courier_error *err);
/* Releases what an error filled by courier_send or courier_send_sync owns (its user data's
 * user_free runs) and zeroes it. Never on the error a completion borrows. Accepts NULL. Any thread. */
COURIER_API void courier_error_clear(courier_error *err);

/* ========================================================================================== */
/* Transfers: multipart upload, file bodies, downloads with resume, progress (HLNetworking's   */
/* HLTask)                                                                                     */
/* ========================================================================================== */

/* Adds a part to a multipart/form-data body (the request's parameters then become its first text
 * parts, in order). `data` is copied (len may be 0); filename and content_type may be NULL.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_INVALID_HEADER (CR/LF in filename or type),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_add_part_data(courier_request *request, const char *name, const void *data,
                                              size_t len, const char *filename, const char *content_type);
/* Adds a part whose bytes are streamed from a file when the request is sent (never loaded into
 * memory whole). filename NULL means the path's last component. A file that cannot be opened fails
 * the send with COURIER_E_NOT_FOUND (or COURIER_E_INVALID_ARGUMENT), nothing sent. */
COURIER_API int courier_request_add_part_file(courier_request *request, const char *name, const char *path,
                                              const char *filename, const char *content_type);
/* Adds a header line to the last part added. Errors as courier_request_add_header, and
 * COURIER_E_INVALID_ARGUMENT when there is no part yet. */
COURIER_API int courier_request_add_part_header(courier_request *request, const char *name, const char *value);

/* The body is a file, streamed from disk when sent, with its content type (NULL:
 * application/octet-stream); parameters go in the query. NULL path clears it. A missing file
 * fails the send with COURIER_E_NOT_FOUND. */
COURIER_API int courier_request_set_body_file(courier_request *request, const char *path, const char *content_type);

/* Resume an interrupted download: keep "<path>.part" and its validator, and continue with an HTTP
 * Range request when sent again (after a cancel, a failure, or in a later process). */
#define COURIER_DOWNLOAD_RESUME 0x1u
/* The response body (status < 400) is written to `path` instead of memory: first into
 * "<path>.part" (with "<path>.part.meta" holding the URL and the ETag/Last-Modified validator),
 * moved to `path` once complete. With COURIER_DOWNLOAD_RESUME an existing part is continued when
 * the server answers 206 to Range + If-Range, and started over on 200. The response then has an
 * empty body and courier_response_file gives the path; a download completed by a resume ends with
 * status 206 (the file is whole: test success by the 2xx class or courier_response_file, not by
 * 200). A download that fails or is cancelled leaves "<path>.part" and its ".meta" in place (to
 * resume from; without the flag the next send starts over): remove both to discard it. The engine's maximum response size does
 * not apply to downloads. Errors at send: COURIER_E_STORE (os_error) when the part file cannot be
 * written. NULL path clears it. */
COURIER_API int courier_request_set_download_file(courier_request *request, const char *path, unsigned flags);
/* The file a download was written to, or NULL. Borrowed until the response is freed. */
COURIER_API const char *courier_response_file(const courier_response *response);

/* Progress of one request: bytes so far and expected (0 when unknown), down and up. For a resumed
 * download the counts include the part already on disk. Runs on the worker thread, at most every
 * 100 ms and once more at the end of each attempt; must not block. */
typedef void (*courier_progress_fn)(uint64_t request_id, int64_t down_now, int64_t down_total, int64_t up_now,
                                    int64_t up_total, void *user);
/* Registers a progress callback (NULL removes it). user_free as for validators. */
COURIER_API int courier_request_set_progress(courier_request *request, courier_progress_fn fn, void *user,
                                             courier_user_free_fn user_free);

/* ========================================================================================== */
/* JSON documents                                                                              */
/* ========================================================================================== */

/* A JSON value. A document is a tree of values; every value inside it is borrowed from the
 * document's owner: a response (valid until the response is freed) or the caller (a value
 * returned as new by courier_json_parse, courier_json_new_*, courier_json_copy,
 * courier_mapping_apply: release it with courier_json_free). Values reachable from a response are
 * immutable and may be read from any thread at once; a value the caller builds is used by one
 * thread at a time. No function here allocates to read. */
typedef struct courier_json courier_json;
/* A position in an object's members (courier_json_iter_*). Borrowed like the object. */
typedef struct courier_json_iter courier_json_iter;

typedef enum courier_json_type {
    COURIER_JSON_NONE = 0,    /* no value: a NULL handle, an absent key or index */
    COURIER_JSON_OBJECT = 1,
    COURIER_JSON_ARRAY = 2,
    COURIER_JSON_STRING = 3,
    COURIER_JSON_INTEGER = 4, /* a number without fraction or exponent that fits int64_t */
    COURIER_JSON_REAL = 5,    /* any other number: a double, or (beyond int64 and double) its text */
    COURIER_JSON_BOOL = 6,
    COURIER_JSON_NULL = 7,
    COURIER_JSON_NUMBER = 8,  /* only as a mapping's expected type: integer or real */
    COURIER_JSON_ANY = 9      /* only as a mapping's expected type: any value, null included */
} courier_json_type;

/* Static English name of a courier_json_type ("string", "nothing"...). Never NULL. Any thread. */
COURIER_API const char *courier_json_type_name(int type);

/* Parse options. Set `size`, initialize with courier_json_options_init, then change fields:
 *   courier_json_options o = {sizeof o}; courier_json_options_init(&o); o.max_depth = 64;
 * The struct only grows at its end; the fields beyond a caller's size are read as their defaults. */
#define COURIER_JSON_ALLOW_DUPLICATE_KEYS 0x1u /* the last of duplicate keys wins (default: an error) */
#define COURIER_JSON_ALLOW_NUL 0x2u            /* allow \u0000 in strings (read them with lengths) */
typedef struct courier_json_options {
    size_t size;       /* sizeof(courier_json_options), set by the caller */
    int max_depth;     /* deepest nesting of arrays and objects, 1..2048 (default 512) */
    int64_t max_bytes; /* largest text accepted (default 64 MiB) */
    unsigned flags;    /* COURIER_JSON_ALLOW_* (default 0) */
    /* With max_threads other than 1, a top-level array of at least parallel_min_bytes (default
     * 256 KiB; 0: never) is parsed in parts on up to max_threads threads (0: one per processor, at
     * most 4), started and joined inside the call; the document is the same. Default 1 (one
     * thread): splitting pays only when processors are idle. */
    int max_threads;
    int64_t parallel_min_bytes;
} courier_json_options;
/* Fills *options with the defaults, writing only the fields that end within options->size (which
 * it keeps). Errors: COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the first version's). */
COURIER_API int courier_json_options_init(courier_json_options *options);

/* Parses JSON text (UTF-8, any value at the top, as RFC 8259; a UTF-8 byte order mark before it is
 * ignored). `options` may be NULL (defaults). *out is new: release it with courier_json_free. Any
 * thread; a large top-level array may be parsed with helper threads that end before this returns
 * (see max_threads).
 * Numbers: every number RFC 8259 allows is accepted. An integer (no fraction, no exponent) that
 * fits int64_t is an INTEGER; any other number is a REAL: a double, or, when it fits neither
 * int64_t nor a double (18446744073709551615, -9223372036854775809, 1e400), its text, kept exactly
 * (courier_json_number_text; courier_json_read_uint64 / _read_double read it, and say
 * COURIER_E_NUMBER_RANGE when it does not fit). Reals below a double's range read as 0; digits
 * beyond a double's precision are rounded (only out-of-range numbers keep their text).
 * Errors: COURIER_E_JSON (malformed text, invalid UTF-8, nesting deeper than max_depth, a
 * duplicate key, \u0000 without ALLOW_NUL; the message names line, column and the byte offset of
 * the offending byte, the same as courier_json_tape_parse's for the same text), COURIER_E_TOO_LARGE
 * (more than max_bytes), COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. Never crashes on any input. */
COURIER_API int courier_json_parse(courier_json **out, const void *data, size_t len,
                                   const courier_json_options *options, courier_error *err);
/* Releases a value the caller owns (see courier_json). Accepts NULL. Never call it on a value
 * borrowed from a response or from inside another value. */
COURIER_API void courier_json_free(courier_json *value);

/* The value's courier_json_type; COURIER_JSON_NONE for NULL. */
COURIER_API int courier_json_typeof(const courier_json *value);
/* Number of elements of an array or members of an object; 0 for anything else. */
COURIER_API size_t courier_json_size(const courier_json *value);
/* The index-th element of an array; NULL when out of range or not an array. Borrowed. */
COURIER_API const courier_json *courier_json_at(const courier_json *array, size_t index);
/* The member named key (NUL-terminated, or key_len bytes) of an object; NULL when absent or not an
 * object. Borrowed. */
COURIER_API const courier_json *courier_json_get(const courier_json *object, const char *key);
COURIER_API const courier_json *courier_json_getn(const courier_json *object, const char *key, size_t key_len);
/* The member named key, looked up first at *hint: a position in this object's members (NULL, or
 * one given by courier_json_iter_first/_next or an earlier call on the same object). When the key
 * is there, *hint moves to the next member, so reading members in document order costs one
 * comparison each and no hashing; otherwise this is courier_json_getn and *hint stays. Borrowed. */
COURIER_API const courier_json *courier_json_get_hinted(const courier_json *object, const char *key, size_t key_len,
                                                        const courier_json_iter **hint);
/* The value at a key path: components separated by '.', each an object key or, in an array, a
 * decimal index: "data", "data.items", "data.items.0.name". NULL or "" is the value itself. NULL
 * when any component is absent. Keys that contain '.' cannot be named. Borrowed. */
COURIER_API const courier_json *courier_json_path(const courier_json *value, const char *key_path);
/* A string's bytes (UTF-8, NUL-terminated; *len, may be NULL, counts them without the NUL). NULL
 * (and *len 0) when not a string. Borrowed. */
COURIER_API const char *courier_json_string(const courier_json *value, size_t *len);
/* An integer's value; 0 when not an integer. */
COURIER_API int64_t courier_json_integer(const courier_json *value);
/* A number's value as a double (integers converted; a number kept as text: its nearest double,
 * +-HUGE_VAL beyond a double's range); 0 when not a number. */
COURIER_API double courier_json_real(const courier_json *value);
/* The text of a number kept as text (one that fits neither int64_t nor a double: see
 * courier_json_parse), exactly as the document wrote it, and its length in *len (may be NULL); not
 * NUL-terminated. NULL (and *len 0) for any other value, numbers that fit included. Borrowed. */
COURIER_API const char *courier_json_number_text(const courier_json *value, size_t *len);
/* A number read as int64_t, uint64_t or double, with the range checked: an INTEGER as it is, a
 * REAL without fraction into the integer types when it fits, a number kept as text from its digits
 * (exactly: 18446744073709551615 reads as a uint64_t). Any thread. Errors: COURIER_E_NUMBER_RANGE
 * (beyond the type's range, a fraction read as an integer, a number beyond a double read as one;
 * *out unchanged, except that _read_double leaves +-HUGE_VAL), COURIER_E_INVALID_ARGUMENT (NULL out,
 * not a number). */
COURIER_API int courier_json_read_int64(int64_t *out, const courier_json *value);
COURIER_API int courier_json_read_uint64(uint64_t *out, const courier_json *value);
COURIER_API int courier_json_read_double(double *out, const courier_json *value);
/* 1 for true; 0 for false and anything else. */
COURIER_API int courier_json_bool(const courier_json *value);
/* 1 when both are equal JSON (objects regardless of member order), or both NULL. */
COURIER_API int courier_json_equal(const courier_json *a, const courier_json *b);

/* Iterates an object's members in document order:
 *   for (const courier_json_iter *it = courier_json_iter_first(o); it; it = courier_json_iter_next(o, it))
 * NULL when the object is empty or not an object. Borrowed like the object. */
COURIER_API const courier_json_iter *courier_json_iter_first(const courier_json *object);
COURIER_API const courier_json_iter *courier_json_iter_next(const courier_json *object, const courier_json_iter *it);
/* The member's key (NUL-terminated; *len may be NULL) and value. Borrowed. */
COURIER_API const char *courier_json_iter_key(const courier_json_iter *it, size_t *len);
COURIER_API const courier_json *courier_json_iter_value(const courier_json_iter *it);

/* Building values. Each *out is new (courier_json_free) until handed to a function that takes it.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY; strings and keys must be UTF-8
 * (COURIER_E_INVALID_ENCODING; embedded NULs are allowed in strings), reals finite. */
COURIER_API int courier_json_new_object(courier_json **out);
COURIER_API int courier_json_new_array(courier_json **out);
COURIER_API int courier_json_new_string(courier_json **out, const char *s, size_t len);
COURIER_API int courier_json_new_integer(courier_json **out, int64_t value);
COURIER_API int courier_json_new_real(courier_json **out, double value);
COURIER_API int courier_json_new_bool(courier_json **out, int value);
COURIER_API int courier_json_new_null(courier_json **out);
/* Sets object[key] (replacing a member of that name; new keys go last). Takes `value`, also when it
 * fails. The object must be one the caller built (not borrowed from a response). */
COURIER_API int courier_json_object_set(courier_json *object, const char *key, size_t key_len, courier_json *value);
/* Appends to an array. Takes `value`, also when it fails. */
COURIER_API int courier_json_array_append(courier_json *array, courier_json *value);
/* A deep copy that the caller owns and may change. *out new. */
COURIER_API int courier_json_copy(courier_json **out, const courier_json *value);

/* Serializing. Flags: */
#define COURIER_JSON_DUMP_INDENT 0x1u       /* two-space indentation and newlines (default: compact) */
#define COURIER_JSON_DUMP_SORT_KEYS 0x2u    /* members sorted by key (default: document order) */
#define COURIER_JSON_DUMP_ASCII 0x4u        /* \uXXXX for every non-ASCII character */
#define COURIER_JSON_DUMP_ESCAPE_SLASH 0x8u /* "\/" for '/' */
/* Writes a value as JSON text: UTF-8, reals in the shortest form that reads back the same (always
 * with '.' or an exponent). *out is new: release it with courier_free; *out_len (may be NULL) gets its
 * length; the text is NUL-terminated. Any thread. Errors: COURIER_E_INVALID_ARGUMENT,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_json_dump(char **out, size_t *out_len, const courier_json *value, unsigned flags,
                                  courier_error *err);
/* Releases memory the library returned as new bytes (courier_json_dump). Accepts NULL. */
COURIER_API void courier_free(void *ptr);

/* JSON tapes: a document as one flat, read-only array of entries, for decoders that read a value
 * once in document order (Swift's ModelDecoder). Parsing builds no objects and no hash tables:
 * one array of 16-byte entries and one copy of the text, in which strings are unescaped in place.
 * Layout: a value is one entry; an array is its entry then its elements' entries; an object is its
 * entry then, per member, the key (a STRING entry) and the value's entries. The root is entry 0.
 * The entries and the text are immutable and may be read from any thread at once; they are
 * borrowed from the tape (valid until courier_json_tape_free). */
typedef struct courier_json_tape courier_json_tape;
#define COURIER_JSON_TAPE_TRUE 0x1u /* flags: a BOOL entry that is true */
#define COURIER_JSON_TAPE_DEAD 0x2u /* flags: a member key shadowed by a later duplicate (only with
                                       COURIER_JSON_ALLOW_DUPLICATE_KEYS; the last wins) */
#define COURIER_JSON_TAPE_NUMBER_TEXT 0x4u /* flags: a REAL kept as its text (it fits neither int64_t
                                              nor a double): payload is its nearest double (+-infinity
                                              beyond a double's range), length the offset of its text
                                              in courier_json_tape_text (read it with
                                              courier_json_tape_number_text) */
typedef struct courier_json_tape_entry {
    uint8_t type;     /* courier_json_type (OBJECT..NULL); object keys are STRING entries */
    uint8_t flags;    /* COURIER_JSON_TAPE_* */
    uint16_t reserved;
    uint32_t length;  /* STRING: bytes; ARRAY: elements; OBJECT: members (DEAD ones not counted) */
    uint64_t payload; /* STRING: offset of its bytes in courier_json_tape_text (NUL-terminated);
                         ARRAY, OBJECT: the index just past the last entry of the contents;
                         INTEGER: the int64_t's bits; REAL: the double's bits (the nearest one
                         with COURIER_JSON_TAPE_NUMBER_TEXT); otherwise 0 */
} courier_json_tape_entry;
/* Parses JSON text into a tape with the same rules, limits and error codes as courier_json_parse
 * (max_threads is ignored: one thread). `data` is borrowed for the call; `options` may be NULL (the
 * defaults). *out is new: release it with courier_json_tape_free. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL data with a length, NULL out), COURIER_E_JSON (as
 * courier_json_parse; err says line, column and byte), COURIER_E_TOO_LARGE (more than max_bytes,
 * or than 4 GiB - 1), COURIER_E_NO_MEMORY. Never crashes on any input. */
COURIER_API int courier_json_tape_parse(courier_json_tape **out, const void *data, size_t len,
                                        const courier_json_options *options, courier_error *err);
/* A tape of a value (borrowed for the call; its strings are copied). *out is new
 * (courier_json_tape_free). Any thread that may read the value.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL), COURIER_E_TOO_LARGE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_json_tape_from_value(courier_json_tape **out, const courier_json *value, courier_error *err);
/* Releases a tape and everything borrowed from it. Accepts NULL. Any thread, once no other thread
 * reads it. */
COURIER_API void courier_json_tape_free(courier_json_tape *tape);
/* The entries (borrowed) and, in *count (may be NULL), how many. NULL for a NULL tape. Any thread. */
COURIER_API const courier_json_tape_entry *courier_json_tape_entries(const courier_json_tape *tape, size_t *count);
/* The base of STRING entries' offsets (borrowed). NULL for a NULL tape. Any thread. */
COURIER_API const uint8_t *courier_json_tape_text(const courier_json_tape *tape);
/* courier_json_number_text on a tape: the text of the number at `index` when it is kept as text
 * (COURIER_JSON_TAPE_NUMBER_TEXT), borrowed from the tape, not NUL-terminated, *len (may be NULL)
 * its length; NULL (and *len 0) otherwise, or for an index beyond the tape. Any thread. */
COURIER_API const char *courier_json_tape_number_text(const courier_json_tape *tape, size_t index, size_t *len);
/* courier_json_read_int64/_uint64/_double on a tape: the number at `index`, with the same rules and
 * errors (COURIER_E_INVALID_ARGUMENT also for an index beyond the tape). Any thread. */
COURIER_API int courier_json_tape_read_int64(int64_t *out, const courier_json_tape *tape, size_t index);
COURIER_API int courier_json_tape_read_uint64(uint64_t *out, const courier_json_tape *tape, size_t index);
COURIER_API int courier_json_tape_read_double(double *out, const courier_json_tape *tape, size_t index);
/* The index just past the value at `index` (its next sibling's). `index` must be below the count
 * (no error is reported: the tape is not checked). Any thread. */
COURIER_API size_t courier_json_tape_skip(const courier_json_tape *tape, size_t index);
/* The index of the value of member `key` of the object at `index`, or 0 when there is none (or the
 * entry is not an object). `hint` (may be NULL) is 0 or what an earlier call on the same object
 * left in it: the search starts there (members read in document order cost one comparison each)
 * and wraps around; on success *hint is set past the member found. Any thread. */
COURIER_API size_t courier_json_tape_get(const courier_json_tape *tape, size_t index, const char *key, size_t key_len,
                                         size_t *hint);
/* Writes the tape's value at `index` as JSON text, as courier_json_dump writes the same value
 * (COURIER_JSON_DUMP_* flags; members in the tape's order, DEAD ones left out). The tape is
 * borrowed for the call. *out is new: release it with courier_free; *out_len (may be NULL) gets
 * its length; the text is NUL-terminated. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL tape or
 * out, index beyond the tape), COURIER_E_NO_MEMORY. */
COURIER_API int courier_json_tape_dump(char **out, size_t *out_len, const courier_json_tape *tape, size_t index,
                                       unsigned flags, courier_error *err);
/* Finds the value at a key path below the value at `index` (as courier_json_path: dotted object
 * keys and array indexes; "" or NULL is the value itself): 1 with its index in *out, or 0 when
 * there is none. Any thread. */
COURIER_API int courier_json_tape_path(size_t *out, const courier_json_tape *tape, size_t index, const char *key_path);

/* ========================================================================================== */
/* Mapping (the seeds' RestKit mappings)                                                       */
/* ========================================================================================== */

/* A mapping describes how an object in a document becomes a normalized object: which members
 * (attributes) to take, from which key path, under which name, of which type, with which
 * coercions; and which members are objects or arrays of objects mapped by other mappings
 * (relationships). Members it does not name are left out. Applied to an array, it maps each
 * element. Built on one thread; once attached to a request, an envelope, a configuration or
 * another mapping it is sealed (setters return COURIER_E_INVALID_ARGUMENT) and may be used from
 * any thread. References are counted: courier_mapping_free releases the caller's, and whatever it
 * was attached to keeps its own. */
typedef struct courier_mapping courier_mapping;

/* Attribute flags. */
#define COURIER_MAP_REQUIRED 0x1u            /* absent (or null) is a mapping error, unless a default */
#define COURIER_MAP_NUMBER_FROM_STRING 0x2u  /* "42" -> 42, "1.5" -> 1.5 for integer, real, number */
#define COURIER_MAP_STRING_FROM_NUMBER 0x4u  /* 42 -> "42", 1.5 -> "1.5" for string */
#define COURIER_MAP_BOOL_FROM_NUMBER 0x8u    /* 0 -> false, 1 -> true for bool (other numbers fail) */
#define COURIER_MAP_NULL_AS_ABSENT 0x10u     /* null is treated as absent: default, or left out */
#define COURIER_MAP_ALL_COERCIONS 0x1Eu

/* Where and why applying a mapping failed. */
typedef struct courier_mapping_error {
    char path[256]; /* key path of the offending value in the document ("data.items.3.price"); "" = root */
    int expected;   /* courier_json_type the mapping expected */
    int found;      /* courier_json_type found; COURIER_JSON_NONE when absent */
    int reserved[6];
} courier_mapping_error;

/* *out is new: release with courier_mapping_free. Errors: COURIER_E_INVALID_ARGUMENT, _NO_MEMORY. */
COURIER_API int courier_mapping_new(courier_mapping **out);
/* Releases the caller's reference. Accepts NULL. Any thread. */
COURIER_API void courier_mapping_free(courier_mapping *mapping);
/* Coercions (COURIER_MAP_* except REQUIRED) applied to every attribute of this mapping, on top of
 * each attribute's own. */
COURIER_API int courier_mapping_set_coercions(courier_mapping *mapping, unsigned flags);
/* Adds an attribute: the value at `source` (a key path relative to the mapped object) becomes the
 * member `dest` (NULL: the last component of source) of the output. `type` is what it must be
 * (courier_json_type; COURIER_JSON_ANY takes anything; an integer is accepted for real and
 * converted; a real without fraction is accepted for integer). An absent value is left out unless
 * a default is set or COURIER_MAP_REQUIRED; an optional null stays null. Strings are copied.
 * Errors: COURIER_E_INVALID_ARGUMENT (sealed, bad path, duplicate dest, bad type or flags). */
COURIER_API int courier_mapping_add_attribute(courier_mapping *mapping, const char *source, const char *dest,
                                              courier_json_type type, unsigned flags);
/* Adds a relationship: the value at `source` is an object (to_many 0) or an array of objects
 * (to_many 1), each mapped by `child` (retained and sealed; it may be `mapping` itself, for trees;
 * other cycles are refused). Flags as for attributes (REQUIRED). */
COURIER_API int courier_mapping_add_relationship(courier_mapping *mapping, const char *source, const char *dest,
                                                 const courier_mapping *child, int to_many, unsigned flags);
/* The value used when the attribute named `dest` is absent (copied). Errors: COURIER_E_NOT_FOUND
 * (no such attribute), COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_mapping_set_default(courier_mapping *mapping, const char *dest, const courier_json *value);
/* Number of attributes and relationships. */
COURIER_API size_t courier_mapping_attribute_count(const courier_mapping *mapping);
/* Applies a mapping to `input` (borrowed). *out is new (courier_json_free); it may share values
 * with the input (even be the input itself, when nothing changes), so treat it as read-only, or
 * courier_json_copy it first. `where` (may be NULL) receives the failure's path and types. Any
 * thread. Errors: COURIER_E_MAPPING (message: "mapping failed at 'items.3.price': expected
 * integer, found string"), COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_mapping_apply(courier_json **out, courier_mapping_error *where,
                                      const courier_mapping *mapping, const courier_json *input, courier_error *err);
/* The same mapping read from a tape: applied to the value at `index` of `input` (borrowed for the
 * call; 0 is the root), with the same rules, results and errors as courier_mapping_apply, without
 * building a jansson document (several times faster: parse with courier_json_tape_parse, map here).
 * *out is a new tape holding only the output (courier_json_tape_free); its objects list members in
 * the mapping's order (an object kept as it is, in the input's, as courier_mapping_apply returns it). `where` (may be NULL) as for courier_mapping_apply. Any thread.
 * Errors: COURIER_E_MAPPING, COURIER_E_INVALID_ARGUMENT (NULL, index beyond the tape),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_mapping_apply_tape(courier_json_tape **out, courier_mapping_error *where,
                                           const courier_mapping *mapping, const courier_json_tape *input,
                                           size_t index, courier_error *err);

/* ========================================================================================== */
/* Envelopes (the seeds' global errorResponseDescriptor and validResultBlock)                  */
/* ========================================================================================== */

/* An envelope describes the frame every JSON response of an engine shares, such as
 * {"code": 200, "message": "...", "data": ...}: where the code, message and data are, and which
 * codes are success. A response whose code is not a success fails with COURIER_E_API, the message
 * in the error and the response attached (courier_response_envelope gives code and message).
 * Applied to responses with a status below 400 whose content type has a decoder. Sealed and
 * reference counted like mappings. */
typedef struct courier_envelope courier_envelope;

/* Decides success instead of the codes: `document` is the whole parsed body (borrowed for the
 * call); has_code tells whether `code` was found; message may be NULL. Return nonzero for success.
 * Runs on the engine's worker thread. */
typedef int (*courier_envelope_check_fn)(const courier_json *document, int has_code, int64_t code,
                                         const char *message, void *user);

COURIER_API int courier_envelope_new(courier_envelope **out);
/* Releases the caller's reference. Accepts NULL. */
COURIER_API void courier_envelope_free(courier_envelope *envelope);
/* Key path of the code (an integer, or a string of digits). required: a body without it fails
 * with COURIER_E_MAPPING; otherwise a body without a code passes. NULL: no code. */
COURIER_API int courier_envelope_set_code_path(courier_envelope *envelope, const char *key_path, int required);
/* Key path of the message (a string). NULL: none. */
COURIER_API int courier_envelope_set_message_path(courier_envelope *envelope, const char *key_path);
/* Key path of the business data: a request's default result when it names no key path. */
COURIER_API int courier_envelope_set_data_path(courier_envelope *envelope, const char *key_path);
/* Success codes: each added code, and the range if set. With neither, 200..299 are success. */
COURIER_API int courier_envelope_add_success_code(courier_envelope *envelope, int64_t code);
COURIER_API int courier_envelope_set_success_range(courier_envelope *envelope, int64_t lo, int64_t hi);
/* A mapping the whole body must satisfy first (retained; NULL removes). Its output is not kept. */
COURIER_API int courier_envelope_set_mapping(courier_envelope *envelope, const courier_mapping *mapping);
/* The check callback (NULL removes). user_free as for validators. */
COURIER_API int courier_envelope_set_check(courier_envelope *envelope, courier_envelope_check_fn fn, void *user,
                                           courier_user_free_fn user_free);
/* The envelope of every request of engines opened with this configuration (retained; NULL: none). */
COURIER_API int courier_config_set_envelope(courier_config *config, const courier_envelope *envelope);
/* This request's envelope, replacing the engine's (retained); NULL: this request uses none. */
COURIER_API int courier_request_set_envelope(courier_request *request, const courier_envelope *envelope);

/* ========================================================================================== */
/* A request's JSON: key paths, mappings, named results                                        */
/* ========================================================================================== */

/* The key path of the request's business data (the seeds' keyPath), from the document's root;
 * NULL or "" clears it (then the envelope's data path, else the whole document). Copied. A
 * response without a value there fails the request with COURIER_E_MAPPING. */
COURIER_API int courier_request_set_key_path(courier_request *request, const char *key_path);
/* The mapping applied to the value at the key path (retained and sealed; NULL removes). */
COURIER_API int courier_request_set_mapping(courier_request *request, const courier_mapping *mapping);
/* Result flags. */
#define COURIER_RESULT_OPTIONAL 0x1u /* an absent value gives no result instead of failing */
/* A named result (the seeds' responseDescriptors): the value at key_path (NULL: as the default
 * result), mapped by `mapping` (retained; may be NULL), read with courier_response_result.
 * Errors: COURIER_E_INVALID_ARGUMENT (empty or repeated name, bad path or flags). */
COURIER_API int courier_request_add_result(courier_request *request, const char *name, const char *key_path,
                                           const courier_mapping *mapping, unsigned flags);

/* When a request has a key path, mapping or results, or its engine an envelope, the body of a
 * response with a status below 400 is parsed once on the worker thread before the validator runs,
 * and the envelope, key paths and mappings are applied: failures complete the request with
 * COURIER_E_JSON (body not decodable), COURIER_E_API (envelope) or COURIER_E_MAPPING, response
 * attached. Otherwise the body is parsed on first use. */

/* The parsed body: decoded by the decoder of its content type (JSON for application/json,
 * +json and types registered as JSON; a custom decoder; no Content-Type is read as JSON). Parsed
 * at most once, by the first caller (any thread). Borrowed: valid until the response is freed.
 * NULL when it cannot be decoded; courier_response_parse_json says why (COURIER_E_JSON,
 * COURIER_E_TOO_LARGE, COURIER_E_NO_MEMORY). */
COURIER_API const courier_json *courier_response_json(const courier_response *response);
COURIER_API int courier_response_parse_json(const courier_json **out, const courier_response *response,
                                            courier_error *err);
/* The default result: the value at the request's key path after its mapping; without key path or
 * mapping, the envelope's data; without envelope either, the whole document. NULL when absent.
 * Borrowed until the response is freed. */
COURIER_API const courier_json *courier_response_data(const courier_response *response);
/* A named result; NULL when absent or unknown. Borrowed until the response is freed. */
COURIER_API const courier_json *courier_response_result(const courier_response *response, const char *name);
/* The same results read on the tape, with no jansson document made: the result named `name` (NULL:
 * the default result, as courier_response_data: without key path, mapping or envelope data, the
 * whole body, parsed into a tape on first use by any thread) as *out_tape, the tape holding it,
 * and *out_index, its entry. The response's key path, envelope and mappings are applied on the tape when the
 * answer comes, so this reads what was computed then. *out_tape is borrowed until the response is freed
 * (read it with courier_json_tape_entries and the other tape readers, from any thread). Any thread.
 * Errors: COURIER_E_NOT_FOUND (absent, or no such result), COURIER_E_JSON (the body cannot be
 * decoded; err says why), COURIER_E_TOO_LARGE, COURIER_E_INVALID_ARGUMENT (NULL response, out_tape or
 * out_index), COURIER_E_NO_MEMORY. */
COURIER_API int courier_response_result_tape(const courier_json_tape **out_tape, size_t *out_index,
                                             const courier_response *response, const char *name, courier_error *err);
/* The envelope's code and message (borrowed until freed; NULL when absent). Errors:
 * COURIER_E_NOT_FOUND (no code: no envelope applied, or none in the body). */
COURIER_API int courier_response_envelope(int64_t *out_code, const char **out_message,
                                          const courier_response *response);
/* Where mapping failed, after COURIER_E_MAPPING. Errors: COURIER_E_NOT_FOUND (no mapping error). */
COURIER_API int courier_response_mapping_error(courier_mapping_error *out, const courier_response *response);

/* ========================================================================================== */
/* Accepted statuses, routes, response descriptors (HTHttp / RestKit, YTKNetwork)               */
/* ========================================================================================== */

/* Adds lo..hi (inclusive, 100..599) to the statuses this request accepts (YTKNetwork's
 * statusCodeValidator). Without any range a status below 400 is a success; with ranges, a status
 * inside one is a success (a 404 can be) and any other fails with COURIER_E_HTTP_STATUS, response
 * attached (a 200 can). At most 8 ranges. Frozen requests replayed later are judged by the default.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, lo > hi, out of range, a ninth range). */
COURIER_API int courier_request_add_status_codes(courier_request *request, int lo, int hi);

/* A path pattern (RestKit's, "/users/:id/photos") names its parameters with ':' followed by letters,
 * digits, '_' and '.' (a key path into the object: ":user.id"); a backslash makes the next
 * character literal ("/humans/:id\\.json"). */

/* Fills the request's path, a pattern, from `object` (a JSON object, borrowed: copied as needed):
 * each ":name" becomes the value at that key path, percent-encoded (strings as they are, numbers
 * in JSON's form, booleans as true/false). The members not used by the pattern are sent as
 * parameters: in the query string for GET, HEAD and DELETE or when the request has a raw body
 * (nested objects as name[key], arrays as name[]); else in the body, in the request's (else the
 * engine's) body encoding: a JSON body keeps their types, a form body is flattened the same way.
 * Call it once, after the raw body if any. Not thread-safe (the request's thread).
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, not an object, called twice), COURIER_E_ROUTE_PARAMETER
 * (a parameter missing, or an object, array or null; err names it), COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_set_object(courier_request *request, const courier_json *object,
                                           courier_error *err);

/* Routes (RestKit's RKRoute), registered on an engine: a pattern per name, or per object type and
 * method (a class route; method NULL: any method). Copied. A second route of the same name, or of
 * the same type and method, replaces the first. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine or pattern, neither name nor type, a method that
 * is not a token, a pattern that does not parse), COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_add_route(courier_engine *engine, const char *name, const char *object_type,
                                         const char *method, const char *path_pattern, courier_error *err);
/* A new request from the route of that name (its method; GET for a class-less route without
 * one) with its path filled from `object` (may be NULL when the pattern has no parameters), as
 * courier_request_set_object. *out new (courier_request_free). Any thread.
 * Errors: COURIER_E_UNKNOWN_NAME, COURIER_E_ROUTE_PARAMETER, COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_request_new_route(courier_request **out, courier_engine *engine, const char *name,
                                          const courier_json *object, courier_error *err);
/* The same from the route of object_type and method (a route of that type for any method when
 * none for the method). Errors: as courier_request_new_route (COURIER_E_UNKNOWN_NAME: no route). */
COURIER_API int courier_request_new_object(courier_request **out, courier_engine *engine, const char *method,
                                           const char *object_type, const courier_json *object,
                                           courier_error *err);

/* A response descriptor (RestKit's RKResponseDescriptor): which key path and mapping apply to a
 * response, chosen by the request's method (NULL: any), its path (path_pattern, matched against
 * the request's path as given, before the base URL and API version are joined, without the query;
 * NULL: any path) and the response's status (lo..hi inclusive; 0, 0: 200..299, RestKit's default).
 * For each send, the descriptors whose method and pattern match are kept, in registration order;
 * when the answer comes, the first whose statuses hold its status applies:
 * - to a success, when the request has no key path or mapping of its own: as if the request had
 *   this key path (NULL: the root) and mapping (retained; NULL: the value as it is), failing with
 *   COURIER_E_MAPPING when the value is absent or does not fit;
 * - to an error (a status the request does not accept, e.g. a 4xx JSON body): the body is parsed
 *   and mapped into the error model, read with courier_response_data on the response delivered
 *   with COURIER_E_HTTP_STATUS; a body that does not parse or fit leaves no error model (the
 *   failure stays COURIER_E_HTTP_STATUS).
 * Descriptors added later apply to sends made later. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine, bad method, pattern, key path or range),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_add_response_descriptor(courier_engine *engine, const char *method,
                                                       const char *path_pattern, int status_lo, int status_hi,
                                                       const char *key_path, const courier_mapping *mapping,
                                                       courier_error *err);

/* ========================================================================================== */
/* The API catalogue and API version (HLNetworking's HLAPICenter and apiVersion)                */
/* ========================================================================================== */

/* The API version segment (HLNetworking's apiVersion): `version` ("v5"; NULL or "" none) is
 * inserted between the base URL and every relative path ("https://h/base" + "/s" sends
 * "https://h/base/v5/s"), followed by "r" when `review` is nonzero (the review build's "v5r").
 * Absolute URLs are left alone. Up to 63 bytes of URL path characters, '/' allowed inside ("api/v2");
 * no '?', '#', spaces or control bytes. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_api_version(courier_config *config, const char *version, int review);
/* This request's version segment instead of the engine's (the engine's review suffix still
 * applies): NULL returns to the engine's, "" sends this request without one. Errors: as above. */
COURIER_API int courier_request_set_api_version(courier_request *request, const char *version);

/* The API catalogue: requests declared once, by module, and used by name ("home.feed"). A
 * declaration is a JSON object in the header's words (docs/DESIGN.md, "The API catalogue"):
 *   {"method": "GET", "path": "/feed/:kind", "params": {"page": 1}, "headers": {"X-A": "b"},
 *    "base_url": "...", "use_default_params": true, "body_encoding": "json", "timeout_ms": 5000,
 *    "api_version": "v6", "status_codes": [[200, 299], 404], "priority": "high",
 *    "cache_policy": "cache_first", "cache_expiry": 60, "cache_key_filter": ["ts"],
 *    "freeze": {"policy": "auto", "expiry_ms": 86400000, "unordered": false, "on_ambiguous": false},
 *    "key_path": "data"}
 * "path" is required; "method" defaults to GET; params values are strings, numbers, booleans or
 * arrays of them; cache_expiry is in seconds (courier_request_set_cache_expiry_ms x 1000); cache_policy
 * and freeze name a courier_cache_policy / courier_freeze_policy in lower case (or give its number);
 * "freeze" may be just the policy's name. */

/* Declares (or replaces) the API `name` (letters, digits, '_', '-', '.'; dots separate modules).
 * The declaration is checked now and copied. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, a bad name), COURIER_E_CATALOG (the declaration's
 * shape; err names the field), COURIER_E_INVALID_URL, COURIER_E_INVALID_HEADER, COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_add_api(courier_engine *engine, const char *name, const courier_json *declaration,
                                       courier_error *err);
/* Loads a catalogue document: {"apis": {"home": {"feed": {...}, "detail": {...}}, "ping": {...}}}.
 * A member whose value has "path" is an API; any other object is a module whose members are named
 * "module.member" (modules nest). All or nothing: nothing is declared when any API is bad.
 * *out_count (may be NULL) receives the number of APIs declared. Any thread.
 * Errors: COURIER_E_JSON (not JSON), COURIER_E_CATALOG (the document's or a declaration's shape),
 * and those of courier_engine_add_api. */
COURIER_API int courier_engine_load_apis(size_t *out_count, courier_engine *engine, const void *json, size_t len,
                                         courier_error *err);
/* The same from a file. Errors: also COURIER_E_NOT_FOUND (no such file; err->os_error),
 * COURIER_E_INVALID_ARGUMENT (unreadable), COURIER_E_TOO_LARGE (over 64 MiB). */
COURIER_API int courier_engine_load_api_file(size_t *out_count, courier_engine *engine, const char *path,
                                             courier_error *err);
/* A new request made from the declaration of `name`, to which the caller adds what this use
 * needs (parameters, courier_request_set_object for a path with parameters, ...) before sending
 * it on this engine. A path with parameters ("/items/:id") must be filled by
 * courier_request_set_object: sent without an object, the send fails with
 * COURIER_E_ROUTE_PARAMETER (err names the parameter) and nothing is sent. A path without
 * parameters has its backslash escapes removed here, as a route's. *out new (courier_request_free).
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_UNKNOWN_NAME, COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_new_api(courier_request **out, courier_engine *engine, const char *name,
                                        courier_error *err);
/* The declared names, sorted, as one JSON array of strings (*out new: courier_free; *out_len may be
 * NULL). Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_api_names(char **out, size_t *out_len, const courier_engine *engine);

/* ========================================================================================== */
/* Serializers by MIME type (the seeds' RKMIMETypeSerialization)                               */
/* ========================================================================================== */

/* Decodes a body into a document: set *out (new; build it with courier_json_parse or the
 * courier_json_new_* functions) and return COURIER_OK, or return a negative code (err, never NULL,
 * may carry a message). `body` and `content_type` are borrowed for the call. Runs on the engine's
 * worker thread, or on the thread that first asks for the response's JSON. */
typedef int (*courier_decoder_fn)(const uint8_t *body, size_t len, const char *content_type, courier_json **out,
                                  courier_error *err, void *user);
/* Decodes this MIME type ("text/html"; "text/ *" without the space for a whole type) as JSON.
 * Later registrations win over earlier ones and over the built-in JSON types. Errors:
 * COURIER_E_INVALID_ARGUMENT (not type/subtype). */
COURIER_API int courier_config_add_json_type(courier_config *config, const char *mime_type);
/* Decodes this MIME type with a callback. user_free as for validators. */
COURIER_API int courier_config_set_decoder(courier_config *config, const char *mime_type, courier_decoder_fn fn,
                                           void *user, courier_user_free_fn user_free);
/* Parse limits for response bodies (copied; NULL restores the defaults). */
COURIER_API int courier_config_set_json_options(courier_config *config, const courier_json_options *options);

/* A JSON body (serialized now with courier_json_dump's flags; Content-Type application/json).
 * Like courier_request_set_body, parameters then go in the query string. */
COURIER_API int courier_request_set_json_body(courier_request *request, const courier_json *value, unsigned flags);
/* A form body (application/x-www-form-urlencoded) from an object: name=value for each member,
 * nested objects as name[key]=..., arrays as name[]=..., booleans as true/false, null as empty. */
COURIER_API int courier_request_set_form_body(courier_request *request, const courier_json *object);

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
                                      stored. docs/DESIGN.md lists every rule with its test. */
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
 * that names it; policies, keys, the HTTP rules and the manager work the same. On Redis each
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
 * hiredis). */
COURIER_API int courier_config_set_cache_store(courier_config *config, const char *store);

/* The most the cache may hold, in bytes of keys and values (>= 65536; default 256 MiB). Over it,
 * writes evict entries past their expiry first, then the least recently written, to just under
 * it, in small transactions (at most 64 entries each), whose freed pages the next commits reuse.
 * It bounds the disk too: the pages of the store's trees are kept under 3 x the limit (evicting
 * further if they would pass it), so data.mdb stays under 3.5 x the limit + 1 MiB (LMDB's pages
 * are 40-60% full under random inserts and removals: about 2.4 x the limit with 1 KiB values).
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

/* ========================================================================================== */
/* Groups: batches and chains of requests (group.c)                                            */
/* ========================================================================================== */

/* A group runs several requests on one engine and completes once, when they are all done
 * (HLNetworking's request groups with maxRequestCount, YTKNetwork's batch and chain requests,
 * HTNetworking's batch and ifRequestSucceed:then:else:). Each member is sent with courier_send and
 * cancelled with courier_cancel, so it is an ordinary request with its own id: retry, cache,
 * mock, logging and event monitors apply to it unchanged.
 *
 * Batch: members start in index order, at most max_in_flight at once (0, the default: all at
 * once); the group completes when every member has finished. With fail-fast, the first failure
 * of a member not marked COURIER_GROUP_CONTINUE_ON_FAILURE cancels the members on the wire, and
 * the ones not yet started are never sent.
 * Chain: members run one after another in index order (max_in_flight does not apply). A member
 * added with a build callback makes its request when its turn comes, from the result of the
 * member before it. A failure stops the chain (the rest are never sent) unless the failed member
 * is marked COURIER_GROUP_CONTINUE_ON_FAILURE.
 *
 * Every member gets exactly one result: its completion's code and response; or the code of a
 * send that failed (courier_send's code, or its build callback's); or COURIER_OK without a
 * response when its build callback skipped it; or COURIER_E_CANCELLED ("not sent") when the group
 * stopped before its turn.
 *
 * Threads: build a group on one thread. courier_group_start, courier_group_cancel,
 * courier_group_result, courier_group_take_response, courier_group_count and courier_group_free
 * may then be called from any thread. The group's callbacks (build, member, done) run on the
 * thread that moves the group on: mostly the engine's worker thread (as members complete), but
 * also the thread calling courier_group_start (the first members' builds, and everything when no
 * member reaches the network), courier_group_cancel or courier_group_free. They must not block
 * for long and must not close the engine.
 *
 * Engine: a group keeps a borrowed pointer to its engine. courier_engine_close completes a running
 * group (its members complete with COURIER_E_CANCELLED, later sends fail with COURIER_E_CLOSED);
 * after the engine is closed only courier_group_result, courier_group_take_response,
 * courier_group_count and courier_group_free may be called. */
typedef struct courier_group courier_group;

typedef enum courier_group_mode {
    COURIER_GROUP_BATCH = 0, /* all members run (concurrently, up to max_in_flight) */
    COURIER_GROUP_CHAIN = 1  /* members run in order, one at a time */
} courier_group_mode;

/* Member flags (courier_group_add, courier_group_add_built). */
typedef enum courier_group_flag {
    /* A failure of this member does not stop a chain or trigger fail-fast, and does not make the
     * group's code a failure. */
    COURIER_GROUP_CONTINUE_ON_FAILURE = 1
} courier_group_flag;

/* Builds a member's request when its turn comes (the seeds' flattenMap: a request made from the
 * previous response). In a chain, prev_code and prev_response are the result of the member just
 * before (COURIER_OK and NULL for the first member, or when that member was skipped); in a batch
 * they are always COURIER_OK and NULL. prev_response is borrowed for the call (the group keeps it;
 * courier_group_result may read any earlier member). Set *out_request to a new request (the group
 * takes it) and return COURIER_OK to send it; leave it NULL and return COURIER_OK to skip this
 * member; or return a negative code to fail this member with it (a request left in *out_request
 * is freed). Runs on the thread that moves the group (see above). */
typedef int (*courier_group_build_fn)(courier_group *group, size_t index, int prev_code,
                                      const courier_response *prev_response, courier_request **out_request,
                                      void *user);
/* Told each member's result as it is set (exactly once per member, before the group completes).
 * `response` is borrowed for the call (the group keeps it). May call courier_group_add. */
typedef void (*courier_group_member_fn)(courier_group *group, size_t index, int code, const courier_response *response,
                                        void *user);
/* Called exactly once when the group completes, after every member callback. code: COURIER_OK
 * when no member failed (members marked COURIER_GROUP_CONTINUE_ON_FAILURE are not counted);
 * COURIER_E_CANCELLED when courier_group_cancel (or courier_group_free) stopped it; otherwise the
 * code of the failure that stopped a chain or a fail-fast batch, or in a plain batch the failed
 * member with the lowest index. failed_index: that member's index, or -1. `group` is borrowed: the
 * callback may read and take results, and may call courier_group_free. */
typedef void (*courier_group_done_fn)(courier_group *group, int code, int64_t failed_index, void *user);

/* A new, empty group on `engine` (borrowed: see "Engine" above). *out is new: release it with
 * courier_group_free. Errors: COURIER_E_INVALID_ARGUMENT (NULL, unknown mode), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_new(courier_group **out, courier_engine *engine, courier_group_mode mode);
/* Cancels the group if it is running (as courier_group_cancel) and releases the caller's hold on
 * it: the memory, the responses not taken and the callbacks' users (user_free) are released when
 * its run has ended. Accepts NULL. Any thread, including the group's own callbacks. */
COURIER_API void courier_group_free(courier_group *group);

/* Batch only: nonzero makes the first counted failure cancel the rest. Before start.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, or already started). */
COURIER_API int courier_group_set_fail_fast(courier_group *group, int fail_fast);
/* Batch only: at most `max` members on the wire at once (HLNetworking's maxRequestCount); 0 (the
 * default) means no limit of the group's own (the engine's connection limits still hold). Before
 * start. Errors: COURIER_E_INVALID_ARGUMENT (NULL, max < 0, or already started). */
COURIER_API int courier_group_set_max_in_flight(courier_group *group, int max);
/* A callback told each member's result (NULL removes it). user_free (may be NULL) runs once,
 * when the group is released, or at once if this fails. Before start.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, or already started), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_set_member_callback(courier_group *group, courier_group_member_fn fn, void *user,
                                                  courier_user_free_fn user_free);

/* Appends a member that sends `request`. The group TAKES the request in every case, success or
 * failure: do not use or free it afterwards. flags: courier_group_flag bits. *out_index (may be
 * NULL) receives the member's index (0, 1, ...). Allowed until the group completes; while it runs,
 * adding is dependable from the group's own callbacks (a build or member callback), which run
 * before it can complete. Errors: COURIER_E_INVALID_ARGUMENT (NULL, unknown flags, or the group
 * has completed), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_add(size_t *out_index, courier_group *group, courier_request *request, unsigned flags);
/* Appends a member whose request is made by `build` when its turn comes. user_free (may be NULL)
 * runs once, when the group is released, or at once if this fails. Errors as courier_group_add. */
COURIER_API int courier_group_add_built(size_t *out_index, courier_group *group, courier_group_build_fn build,
                                        void *user, courier_user_free_fn user_free, unsigned flags);
/* From inside member `index`'s build callback only: sends `request` (borrowed for the call;
 * courier_send copies it) as that member's request, for callers whose requests live in a scope
 * (Swift's, Python's context managers) and cannot hand one over. The build callback's return
 * value and *out_request are then ignored (a request left there is freed). Returns the send's
 * code: on failure the member fails with it (err, may be NULL, says why). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, or not inside that member's build callback, or called twice),
 * COURIER_E_CANCELLED (the group stopped meanwhile: nothing is sent), or courier_send's codes. */
COURIER_API int courier_group_submit(courier_group *group, size_t index, const courier_request *request,
                                     courier_error *err);

/* Starts the group. `done` (may be NULL) is called exactly once when it completes — on this thread
 * before this returns when nothing needs the network (an empty group, a group cancelled before
 * start, members that all fail to send). user_free (may be NULL) runs once, after `done` has
 * returned, or at once if this fails. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or already
 * started), COURIER_E_NO_MEMORY. */
COURIER_API int courier_group_start(courier_group *group, courier_group_done_fn done, void *user,
                                    courier_user_free_fn user_free);
/* Cancels the whole group: members on the wire are cancelled (they complete with
 * COURIER_E_CANCELLED unless they finish first), members not started are never sent, and the group
 * completes with COURIER_E_CANCELLED (unless a failure had already stopped it). Before start, the
 * cancel is remembered and start completes the group at once. Any thread. Returns COURIER_OK, or
 * COURIER_E_NOT_FOUND when the group has already completed (or is completing). */
COURIER_API int courier_group_cancel(courier_group *group);

/* The number of members. Any thread. */
COURIER_API size_t courier_group_count(const courier_group *group);
/* A member's result, once it has one (from its member callback on, and always once the group has
 * completed). *out_code: its code; *out_response: borrowed, valid until courier_group_take_response takes
 * it or the group is released (NULL when none); *out_request_id: its id (0 when it was never sent;
 * also written when there is no result yet); *error: its detail (cleared when code is
 * COURIER_OK). Every out-parameter may be NULL. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL group), COURIER_E_NOT_FOUND (index out of range, or
 * the member has no result yet). */
COURIER_API int courier_group_result(int *out_code, const courier_response **out_response, uint64_t *out_request_id,
                                     const courier_group *group, size_t index, courier_error *error);
/* Takes a member's response once the group has completed (in or after its done callback): new,
 * release it with courier_response_free; the group no longer has it. NULL when there is none, it
 * was taken already, or the group has not completed. Any thread. */
COURIER_API courier_response *courier_group_take_response(courier_group *group, size_t index);
/* The group's engine (borrowed). */
COURIER_API courier_engine *courier_group_engine(const courier_group *group);

/* ========================================================================================== */
/* Logging and event monitors (log.c)                                                          */
/* ========================================================================================== */

/* Each engine logs on its own: a level, sinks, fields added to every line. A line is one complete
 * JSON object (no newline inside), for example
 *   {"time":"2025-01-02T03:04:05.678Z","level":"info","event":"finished","message":"GET
 *    http://h/items?token=*** -> 200","request_id":7,"method":"GET","url":"http://h/items?token=***",
 *    "status":200,"code":0,"duration_ms":12.5,"app":"demo"}
 * Keys: time (UTC, milliseconds), level, event, message, then as they apply request_id, method,
 * url (redacted: see courier_log_set_redaction), status, code (a courier_code), error (its text),
 * cache (finished and from_cache: courier_cache_reason_name of the response's reason, when a cache
 * policy looked at it; the message ends with " cache: <name>" too), duration_ms (since the send), attempt, delay_ms, bytes_received, bytes_expected, bytes_sent,
 * bytes_to_send, component (see courier_log_component), and the decision lines' freeze_id, policy,
 * reason, decision, stored, attempts, final, cache_policy, then the engine's fields
 * (courier_log_set_field).
 * Which request events log at which level: will_send, did_send and from_cache at debug; progress
 * at trace; retried and frozen at warning; finished at info when it succeeded or was cancelled, at
 * warning when a response came back (an HTTP status >= 400, a rejected result), else at error.
 * With no sink, nothing is formatted. Every function here may be called from any thread. */
typedef enum courier_log_level {
    COURIER_LOG_OFF = 0,
    COURIER_LOG_ERROR = 1,
    COURIER_LOG_WARNING = 2,
    COURIER_LOG_INFO = 3, /* the engine's default */
    COURIER_LOG_DEBUG = 4,
    COURIER_LOG_TRACE = 5
} courier_log_level;

/* "off", "error", "warning", "info", "debug", "trace"; "unknown" otherwise. Static storage. */
COURIER_API const char *courier_log_level_name(int level);

/* The engine's level: lines above it are not made, whatever the sinks ask. Default
 * COURIER_LOG_INFO. Errors: COURIER_E_INVALID_ARGUMENT (NULL, level out of range). */
COURIER_API int courier_log_set_level(courier_engine *engine, courier_log_level level);
/* The engine's level (COURIER_LOG_OFF for NULL). */
COURIER_API int courier_log_get_level(const courier_engine *engine);

/* Components: each line of the engine's own comes from one, named in its "component" key, and each
 * component has a level of its own (HTNetworking's per-module log levels):
 *   transport   will_send, did_send, progress, finished (a request's trip);
 *   cache       from_cache and the cache's decisions: "cache_lookup" (what a policy found and why:
 *               "reason" a courier_cache_reason_name, "decision" "from_cache" or "network"),
 *               "cache_store" ("reason", "stored" true or false), "cache_stale_if_error"; and
 *               the store's own: "cache_store_opened" (warning: moved aside or upgraded at open),
 *               "cache_store_failed" (error: it cannot be opened), "cache_store_broken" (error:
 *               damaged while open; moved aside at the next open);
 *   journal     frozen and the journal's decisions: "journal_frozen" (why: "reason" offline,
 *               network_failure or ambiguous_failure), "journal_replay" (a resend went out: "reason"
 *               due, replay_now or resend), "journal_resent" ("reason" succeeded, failed_final or
 *               retry_later), "journal_expired", "journal_policy" ("decision" keep, hold or delete,
 *               "reason" not_registered, not_online, not_since_start, can_send_false or can_delete;
 *               a keep or hold of an ordered request adds "host" and "waiting", the later ordered
 *               frozen requests of that host waiting behind it, counted up to 10,000);
 *               each with "freeze_id", "policy" (the resend policy's id) and "request_id" when a
 *               send had one;
 *   mapping     finished lines of requests that failed in JSON, mapping, envelope or validation;
 *   scheduling  retried, and finished lines of requests the frequency guard refused.
 * All of these are at debug but finished (see above), retried and frozen (warning), journal_frozen,
 * journal_replay, journal_resent and journal_expired (info), journal_policy keep (warning) and a
 * journal_policy hold that keeps others waiting (info). Lines
 * written with courier_log_write and the engine's notices follow the engine's level alone. */
typedef enum courier_log_component {
    COURIER_LOG_TRANSPORT = 0,
    COURIER_LOG_CACHE = 1,
    COURIER_LOG_JOURNAL = 2,
    COURIER_LOG_MAPPING = 3,
    COURIER_LOG_SCHEDULING = 4
} courier_log_component;

/* A component's level: its lines above it are not made. courier_log_set_level sets every
 * component's level too; this changes one, at any time while the engine runs (the next line sees
 * it). Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL engine, component or level out of
 * range), COURIER_E_NO_MEMORY. */
COURIER_API int courier_log_set_component_level(courier_engine *engine, courier_log_component component,
                                                courier_log_level level, courier_error *err);
/* *out_level receives the component's level. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL out_level or engine, component out of range). */
COURIER_API int courier_log_get_component_level(courier_log_level *out_level, const courier_engine *engine,
                                                courier_log_component component, courier_error *err);

/* A field added to every line of this engine (HLNetworking's channel, app name, version): a JSON
 * string member `name`. Copied. value NULL removes it; setting a name again replaces its value.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, empty name, or one of the keys listed above),
 * COURIER_E_INVALID_ENCODING (not UTF-8), COURIER_E_NO_MEMORY. */
COURIER_API int courier_log_set_field(courier_engine *engine, const char *name, const char *value);

/* How URLs are written in log lines (monitors always get the full URL). User information
 * ("user:password@") is always replaced by "***". */
typedef enum courier_log_redaction {
    /* The default: query values whose names look secret are written as "***": names containing
     * token, secret, passw, pwd, key, auth, signature, session or credential, names equal to sig,
     * code, sid or otp (case-insensitive), and the names given to courier_log_redact_param. */
    COURIER_LOG_REDACT_SECRETS = 0,
    COURIER_LOG_REDACT_QUERY = 1, /* every query value */
    COURIER_LOG_REDACT_NONE = 2   /* only user information */
} courier_log_redaction;
COURIER_API int courier_log_set_redaction(courier_engine *engine, courier_log_redaction mode);
/* One more query parameter name (exact, case-insensitive) whose value is redacted under
 * COURIER_LOG_REDACT_SECRETS. Copied. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_log_redact_param(courier_engine *engine, const char *name);

/* A log sink callback: `line` is one JSON object without a newline, `len` its length, both
 * borrowed for the call. Runs on the thread where the line was made (the engine's worker thread
 * for most request events; the sending thread for will_send; the caller's for courier_log_write),
 * possibly on several threads at once. Must not block for long and must not close the engine. */
typedef void (*courier_log_fn)(courier_log_level level, const char *line, size_t len, void *user);

/* Adds a sink that receives the lines at or below min_level (and at or below the engine's level).
 * *out_sink (may be NULL) receives its id, never 0, for courier_log_remove_sink. */
/* A callback sink. user_free (may be NULL) runs once, after the last call has returned, when the
 * sink is removed or the engine closes (or at once if this fails). */
COURIER_API int courier_log_add_callback(uint64_t *out_sink, courier_engine *engine, courier_log_level min_level,
                                         courier_log_fn fn, void *user, courier_user_free_fn user_free);
/* Standard error: one write per line, with a newline. */
COURIER_API int courier_log_add_stderr(uint64_t *out_sink, courier_engine *engine, courier_log_level min_level);
/* A file, appended to (created with mode 0600 if absent), one line per record. When a line would
 * take the file past max_bytes (> 0; 0: never rotate), the files are rotated first: PATH.N-2 ->
 * PATH.N-1, ..., PATH -> PATH.1 with N = max_files (>= 1; PATH.N-1 is deleted, and N = 1 truncates
 * PATH), so at most max_files files exist, each at most max_bytes long unless a single line is
 * longer. A failed write drops the line. `path` is copied.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, max_bytes < 0, max_files < 1; err->message starts with
 * the argument's name, "max_files: ..."), COURIER_E_STORE (the file cannot be opened;
 * err->os_error set), COURIER_E_NO_MEMORY. */
COURIER_API int courier_log_add_file(uint64_t *out_sink, courier_engine *engine, courier_log_level min_level,
                                     const char *path, int64_t max_bytes, int max_files, courier_error *err);
/* When a file sink starts a new file besides size. */
typedef enum courier_log_rotation {
    COURIER_LOG_ROTATE_SIZE = 0, /* only when a line would pass max_bytes (courier_log_add_file) */
    COURIER_LOG_ROTATE_DAILY = 1 /* also when a line is written on another day (UTC, on the engine's
                                    clock, courier_config_set_clock) than the file's first line */
} courier_log_rotation;
/* A file sink like courier_log_add_file (same rotation of PATH -> PATH.1 ..., at most max_files
 * files; max_bytes 0: no size limit) that also rotates by day with COURIER_LOG_ROTATE_DAILY. An
 * existing non-empty file is taken as written on the day of its last change. *out_sink (may be
 * NULL) receives the sink's id, never 0. `path` is copied.
 * Errors: as courier_log_add_file; COURIER_E_INVALID_ARGUMENT for a rotation out of range. */
COURIER_API int courier_log_add_rotating_file(uint64_t *out_sink, courier_engine *engine, courier_log_level min_level,
                                              const char *path, int64_t max_bytes, int max_files,
                                              courier_log_rotation rotation, courier_error *err);
/* Removes a sink. A line being written on another thread may still reach it. The file is closed
 * when its last line is written. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. */
COURIER_API int courier_log_remove_sink(courier_engine *engine, uint64_t sink);

/* Writes one line of the caller's own to the engine's sinks (HLNetworking's custom log info):
 * event (NULL: "app") and message are copied into the line. Errors: COURIER_E_INVALID_ARGUMENT
 * (NULL engine or message, level OFF or out of range). */
COURIER_API int courier_log_write(courier_engine *engine, courier_log_level level, const char *event,
                                  const char *message);

/* Request lifecycle events (HLNetworking's requestWillBeSent / requestDidSent, Alamofire's
 * EventMonitor, OkHttp's EventListener). */
typedef enum courier_event_kind {
    COURIER_EVENT_WILL_SEND = 1,  /* courier_send accepted the request (on the sending thread) */
    COURIER_EVENT_DID_SEND = 2,   /* its transfer started on the wire */
    COURIER_EVENT_PROGRESS = 3,   /* bytes moved (upload or download) */
    COURIER_EVENT_FINISHED = 4,   /* it completed: just before its completion callback runs */
    COURIER_EVENT_FROM_CACHE = 5, /* its answer comes from the cache, not the network */
    COURIER_EVENT_RETRIED = 6,    /* an attempt failed and another is scheduled */
    COURIER_EVENT_FROZEN = 7      /* it was written to the journal, to be sent when online */
} courier_event_kind;

/* "will_send", "did_send", "progress", "finished", "from_cache", "retried", "frozen";
 * "unknown" otherwise. Static storage. */
COURIER_API const char *courier_event_kind_name(int kind);

/* One event, borrowed for the duration of the monitor call (copy what you keep). Fields that do
 * not apply to the kind are 0 / NULL. The struct only grows at the end: `size` is its size as the
 * library knows it, so read only fields that end within it. Every WILL_SEND of an id is followed
 * by exactly one FINISHED of that id. */
typedef struct courier_event {
    size_t size;                      /* set by the library */
    courier_event_kind kind;
    uint64_t request_id;
    const char *method;               /* may be NULL */
    const char *url;                  /* the full URL, query included (not redacted); may be NULL */
    int code;                         /* FINISHED: the result; RETRIED: the failed attempt's code */
    int http_status;                  /* FINISHED, FROM_CACHE, RETRIED: the status of the response, if any */
    int attempt;                      /* RETRIED: the attempt about to start (2 for the first retry) */
    int64_t delay_ms;                 /* RETRIED: the wait before it */
    double duration_s;                /* FINISHED: seconds since WILL_SEND (0 when unknown) */
    int64_t bytes_received;           /* PROGRESS: body bytes received so far */
    int64_t bytes_expected;           /* PROGRESS: expected body bytes, -1 when unknown */
    int64_t bytes_sent;               /* PROGRESS: body bytes sent so far */
    int64_t bytes_to_send;            /* PROGRESS: body bytes to send, -1 when unknown */
    const courier_response *response; /* FINISHED, FROM_CACHE: the response, if any */
    const courier_error *error;       /* FINISHED with a failure: the detail */
} courier_event;

/* A monitor. Runs on the thread where the event happens (the sending thread for WILL_SEND, the
 * engine's worker thread for the others, unless another feature documents otherwise), possibly on
 * several threads at once; monitors run in the order they were added, before the event's log line
 * is written. Must not block for long and must not close the engine; may send requests. */
typedef void (*courier_monitor_fn)(const courier_event *event, void *user);

/* Adds a monitor for the kinds in `kinds`, a mask of (1u << COURIER_EVENT_...) bits; 0 means
 * every kind. *out_id (may be NULL) receives its id, never 0. user_free (may be NULL) runs once,
 * after the last call has returned, when it is removed or the engine closes (or at once if this
 * fails). Errors: COURIER_E_INVALID_ARGUMENT (NULL engine or fn), COURIER_E_NO_MEMORY. */
COURIER_API int courier_monitor_add(uint64_t *out_id, courier_engine *engine, unsigned kinds, courier_monitor_fn fn,
                                    void *user, courier_user_free_fn user_free);
/* Removes a monitor; a call in progress on another thread may still finish after this returns.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. */
COURIER_API int courier_monitor_remove(courier_engine *engine, uint64_t id);

/* ========================================================================================== */
/* Frozen requests: a durable offline journal, replay, events                                  */
/* ========================================================================================== */

/* A request whose freeze policy allows it, sent while the network monitor says offline or failing
 * with a network-level error, is written to the engine's journal (<store>/journal, an LMDB
 * environment of its own whose commits are synced) and its completion runs once with
 * COURIER_E_FROZEN, only after the commit is on disk. It is sent again later, by this process or
 * any other that opens the same store: when the monitor says online, at the next engine open, and
 * on its own backoff timer. The journal keeps everything needed to send it in any process and any
 * language (method, effective URL, headers, body, timeout, cache policy and expiry, retry rule,
 * priority, JSON key path and result names; not callbacks: validators, customize callbacks and
 * mapping objects live in memory only), plus an idempotency key generated once, at freeze time,
 * and sent as "Idempotency-Key" with every resend (a request that carries its own Idempotency-Key
 * keeps it), so a server that honours the header applies a replayed POST once.
 *
 * Replay: oldest first; the requests to one host ("scheme://host:port") go one at a time, a later
 * one never before an earlier one has a final answer, unless frozen with COURIER_FREEZE_UNORDERED
 * (such a request neither waits nor is waited for); at most `concurrency` replays in flight per
 * engine; a failed attempt waits base * 2^(attempts-1) ms (capped, with jitter) before the next,
 * kept in the journal across restarts. A final answer (a response, including an HTTP status below
 * 500 other than 408, 425 and 429, or a non-retryable failure) removes the request in the same
 * transaction that records the outcome (courier_frozen_last_outcome). A retryable failure (network
 * errors, timeouts, 408, 425, 429, 5xx) keeps it for the next attempt. Replays go through
 * courier_send, so the engine's retry rule, cache and mapping apply to them as to any request.
 * Answers are recorded in groups: one synced commit records the answers of the replays that
 * finished since the last one (the journal waits at most 2 ms for more while replays are on the
 * wire), and their RESENT_* events are delivered after that commit.
 * At least once: a crash at any point, including between an answer and the commit that records
 * it, sends a request again (with the same idempotency key), and never loses one.
 * Expired requests are removed and reported (COURIER_FROZEN_EVENT_EXPIRED), never sent.
 * Several processes (and engines) on one store: a request is claimed in a transaction with a lease
 * before it is sent, so one replayer sends it; a claim whose process died (or whose engine closed,
 * or whose lease ended) is taken over. */

/* Freeze policies. */
typedef enum courier_freeze_policy {
    COURIER_FREEZE_NEVER = 0,  /* the default: a failure is the caller's */
    COURIER_FREEZE_AUTO = 1,   /* frozen when offline or on a network failure; resent automatically */
    COURIER_FREEZE_MANUAL = 2  /* frozen likewise; kept until the app resends it (courier_frozen_resend,
                                  courier_frozen_replay with COURIER_REPLAY_MANUAL) or removes it */
} courier_freeze_policy;

/* Freeze flags. */
#define COURIER_FREEZE_UNORDERED 0x1u    /* not kept in its host's order */
#define COURIER_FREEZE_ON_AMBIGUOUS 0x2u /* also freeze on a timeout, reset or partial response: the
                                            request may have reached the server (by default only
                                            cannot-resolve, cannot-connect and offline freeze) */
/* Longest freeze id, in bytes. Ids are 1..128 of A-Z a-z 0-9 and "-._~:@+=". */
#define COURIER_FROZEN_ID_MAX 128

/* The request's freeze policy (a courier_freeze_policy), expiry in ms after freezing (0: the
 * engine's default, 24 hours unless configured) and flags (COURIER_FREEZE_*).
 * Errors: COURIER_E_INVALID_ARGUMENT (unknown policy or flags, negative expiry). */
COURIER_API int courier_request_set_freeze(courier_request *request, courier_freeze_policy policy, int64_t expiry_ms,
                                           unsigned flags);
/* The freeze id to find the request again (copied). NULL (the default) generates one (32 hex
 * digits) at freeze time. Freezing a request whose id is already in the journal replaces the older
 * request (the newer description of one action wins; it takes the newer place in the order).
 * Errors: COURIER_E_INVALID_ARGUMENT (not 1..COURIER_FROZEN_ID_MAX allowed characters). */
COURIER_API int courier_request_set_freeze_id(courier_request *request, const char *id);
/* Nonzero: send even while the network monitor says offline ("try anyway"). Default 0: such a
 * send fails at once with COURIER_E_OFFLINE (its completion runs with it, from the worker thread,
 * without waiting for a timeout) or, when its policy allows, is frozen. */
COURIER_API int courier_request_set_ignore_offline(courier_request *request, int ignore);
/* The completion of a send that ends frozen runs on the engine's journal thread (one per engine),
 * after the commit, not on the worker thread: it must not wait for another send
 * (courier_send_sync) there. */
/* The freeze id of a COURIER_E_FROZEN error, or NULL for any other. Borrowed from *err. */
COURIER_API const char *courier_error_freeze_id(const courier_error *err);

/* Replay settings of engines opened with this configuration: replays in flight at most
 * (`concurrency` > 0; 0: 4), and the backoff between failed attempts of one request: base_ms
 * * 2^(attempts-1), at most max_ms, with jitter (a random wait between half and all of it); 0:
 * 1 000 ms and 300 000 ms. Errors: COURIER_E_INVALID_ARGUMENT (negative, max < base). */
COURIER_API int courier_config_set_frozen_replay(courier_config *config, int concurrency, int64_t backoff_base_ms,
                                                 int64_t backoff_max_ms);
/* The expiry of frozen requests that name none, in ms (0: 24 hours). */
COURIER_API int courier_config_set_frozen_expiry_ms(courier_config *config, int64_t expiry_ms);
/* How long a claim holds when its owner stays alive but silent, in ms (0: 300 000). A claim whose
 * owner died, or whose lease ended, is taken over at the engine's next look for work others left:
 * when it opens, on courier_frozen_replay, and every poll interval (courier_config_set_frozen_poll_ms).
 * Keep it longer than a request's timeout times its attempts. */
COURIER_API int courier_config_set_frozen_lease_ms(courier_config *config, int64_t lease_ms);
/* How often the engine looks for work that others left (requests frozen by other processes,
 * claims of the dead and claims whose lease ended), in ms (0: 10 000). */
COURIER_API int courier_config_set_frozen_poll_ms(courier_config *config, int64_t poll_ms);
/* Where the journal of frozen requests lives, apart from the cache: NULL or "" (the default) the
 * engine's store directory (LMDB, in "<dir>/journal"); another directory (LMDB there); or a Redis
 * URL, "redis://[:password@]host:port[/db]", when the library was built with Redis stores: the
 * requests then live on a Redis stream with a consumer group, shared by every engine, process and
 * machine that names the same Redis (docs/DESIGN.md, "The journal on Redis"); the store directory
 * still keeps the cookie jar. Copied. Checked at engine open: a malformed Redis URL fails it with
 * COURIER_E_INVALID_ARGUMENT, a build without Redis with COURIER_E_REDIS_UNSUPPORTED; Redis is
 * not asked then, so an engine opens while Redis is down. Until Redis answers, the courier_frozen_*
 * calls fail with COURIER_E_REDIS and a send that would be frozen ends with its own error (not
 * frozen); once it answers (a restart too) the same engine freezes and replays again. A setting
 * that looks like a URL of another scheme or a mistyped one ("redis//h", "redis:/h") is refused
 * here, as by courier_config_set_cache_store. Not thread-safe: the configuration's thread, before
 * the engine opens (as every setter here).
 * Errors: COURIER_E_INVALID_ARGUMENT (1024 bytes or longer, a mistyped URL). */
COURIER_API int courier_config_set_frozen_store(courier_config *config, const char *location);
/* Nonzero: the engine opens with automatic replay paused (courier_frozen_resume starts it), e.g.
 * to add event listeners first, or for tools that only look at the journal. */
COURIER_API int courier_config_set_frozen_paused(courier_config *config, int paused);

/* Pauses or resumes automatic replay (at open, when the network comes back, on backoff timers): a
 * paused engine sends no frozen request of its own accord. Explicit replays (courier_frozen_replay,
 * courier_frozen_resend) run either way. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_frozen_pause(courier_engine *engine);
COURIER_API int courier_frozen_resume(courier_engine *engine);

/* Replay flags. */
#define COURIER_REPLAY_MANUAL 0x1u /* include COURIER_FREEZE_MANUAL requests */
/* Replays now: every request not tried since this call is due at once, whatever its backoff (per-
 * host order and the concurrency bound still hold), sent even while the monitor says offline.
 * Returns at once; answers arrive as events. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_JOURNAL_CORRUPT. */
COURIER_API int courier_frozen_replay(courier_engine *engine, unsigned flags, courier_error *err);
/* Sends one frozen request now, whatever its policy, order or backoff (unless another replayer
 * holds it). Returns at once; the answer arrives as an event. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND, COURIER_E_STORE. */
COURIER_API int courier_frozen_resend(courier_engine *engine, const char *id, courier_error *err);
/* Waits until this engine's journal has nothing in flight, nothing queued and nothing it would
 * send now (requests waiting for a later backoff time, held by other replayers, or not sent
 * because replay is paused or the monitor says offline do not count). Any thread except the
 * engine's worker and journal threads (never from a callback). Returns COURIER_OK, or
 * COURIER_E_TIMEOUT after timeout_ms. */
COURIER_API int courier_frozen_wait_idle(courier_engine *engine, int64_t timeout_ms);

/* One frozen request as it was read (a snapshot): immutable, any thread. */
typedef struct courier_frozen courier_frozen;
typedef struct courier_frozen_list courier_frozen_list;

/* Numbers of a frozen request. */
typedef struct courier_frozen_info {
    size_t size;             /* sizeof(courier_frozen_info), set by the caller */
    courier_freeze_policy policy;
    unsigned flags;          /* COURIER_FREEZE_* */
    int64_t timeout_ms;
    int attempts;            /* resends started */
    int last_code;           /* the last attempt's code (0 before any); COURIER_E_JOURNAL_CORRUPT for
                                a record that does not decode (listed so it can be removed) */
    int last_status;         /* the last attempt's HTTP status, 0 if none */
    int claimed;             /* nonzero while a replayer holds it */
    int64_t created_ms;      /* when it was frozen (ms since the Unix epoch, engine clock) */
    int64_t expires_ms;      /* removed, never sent, from then on */
    int64_t next_attempt_ms; /* not resent automatically before (0: at once) */
    int64_t last_attempt_ms; /* 0 before any */
} courier_frozen_info;

/* Every frozen request of the engine's store, oldest first. *out new: courier_frozen_list_free.
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE, COURIER_E_JOURNAL_CORRUPT,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_frozen_list_requests(courier_frozen_list **out, courier_engine *engine, courier_error *err);
COURIER_API size_t courier_frozen_list_count(const courier_frozen_list *list);
/* The i-th (0-based) or NULL. Borrowed until the list is freed. */
COURIER_API const courier_frozen *courier_frozen_list_at(const courier_frozen_list *list, size_t index);
/* Accepts NULL. */
COURIER_API void courier_frozen_list_free(courier_frozen_list *list);
/* The frozen request with this id. *out new: courier_frozen_free.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND, COURIER_E_STORE, COURIER_E_JOURNAL_CORRUPT. */
COURIER_API int courier_frozen_get(courier_frozen **out, courier_engine *engine, const char *id, courier_error *err);
/* Accepts NULL. */
COURIER_API void courier_frozen_free(courier_frozen *frozen);
/* Removes one (if a replay of it is on the wire, its answer is still reported, then forgotten).
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND, COURIER_E_STORE. */
COURIER_API int courier_frozen_remove(courier_engine *engine, const char *id, courier_error *err);
/* Removes every frozen request; *out_removed (may be NULL) receives how many. */
COURIER_API int courier_frozen_remove_all(int64_t *out_removed, courier_engine *engine, courier_error *err);
/* How many frozen requests the store holds. */
COURIER_API int courier_frozen_count(int64_t *out_count, courier_engine *engine, courier_error *err);
/* The recorded final answer of a request that left the journal (the last 1 000 are kept): its
 * code, HTTP status (0 if none) and time. Each out pointer may be NULL.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. */
COURIER_API int courier_frozen_last_outcome(int *out_code, int *out_http_status, int64_t *out_at_ms,
                                            courier_engine *engine, const char *id, courier_error *err);

/* Fields of a snapshot, borrowed until it is freed. Never NULL for a valid snapshot. */
COURIER_API const char *courier_frozen_id(const courier_frozen *frozen);
COURIER_API const char *courier_frozen_method(const courier_frozen *frozen);
COURIER_API const char *courier_frozen_url(const courier_frozen *frozen);
/* "scheme://host:port", the unit of per-host order. */
COURIER_API const char *courier_frozen_host(const courier_frozen *frozen);
COURIER_API const char *courier_frozen_idempotency_key(const courier_frozen *frozen);
/* The stored record with its replay state, as one JSON object (the journal's own format, see
 * docs/DESIGN.md). */
COURIER_API const char *courier_frozen_json(const courier_frozen *frozen);
/* The body, or NULL when the request has none; *len (may be NULL) receives its length. */
COURIER_API const uint8_t *courier_frozen_body(const courier_frozen *frozen, size_t *len);
/* The headers that are sent (Idempotency-Key included), in order. Errors: COURIER_E_NOT_FOUND. */
COURIER_API size_t courier_frozen_header_count(const courier_frozen *frozen);
COURIER_API int courier_frozen_header_at(const char **out_name, const char **out_value, const courier_frozen *frozen,
                                         size_t index);
/* Copies the numbers (the fields within out->size, set by the caller). */
COURIER_API int courier_frozen_get_info(courier_frozen_info *out, const courier_frozen *frozen);

/* Events of frozen requests. */
typedef enum courier_frozen_event_kind {
    COURIER_FROZEN_EVENT_FROZEN = 1,           /* written to the journal (after the commit) */
    COURIER_FROZEN_EVENT_RESENT_SUCCEEDED = 2, /* a resend got a final, successful answer; removed */
    COURIER_FROZEN_EVENT_RESENT_FAILED = 3,    /* a resend failed: `final` says whether it was removed
                                                  (a non-retryable answer) or will be tried again */
    COURIER_FROZEN_EVENT_EXPIRED = 4,          /* its expiry passed: removed, never sent again */
    COURIER_FROZEN_EVENT_POLICY_UNKNOWN = 5,   /* its resend policy is not registered in this engine:
                                                  kept, never sent or deleted by it; once per request
                                                  and engine */
    COURIER_FROZEN_EVENT_DELETED = 6           /* its resend policy's can_delete said yes: removed, never
                                                  sent again (outcome COURIER_E_DELETED_BY_POLICY) */
} courier_frozen_event_kind;

/* One event, borrowed for the duration of the call (copy what you keep). The struct only grows at
 * the end: `size` is its size as the library knows it. */
typedef struct courier_frozen_event {
    size_t size;                      /* set by the library */
    courier_frozen_event_kind kind;
    const char *freeze_id;
    const courier_frozen *frozen;     /* the request (as claimed, for resends) */
    uint64_t request_id;              /* FROZEN: the original send's id; RESENT_*: the resend's id */
    int code;                         /* RESENT_*: the resend's result */
    int final;                        /* RESENT_FAILED: 1 when removed; RESENT_SUCCEEDED, EXPIRED: 1 */
    int attempts;                     /* resends started so far */
    const courier_response *response; /* RESENT_*: the response when one arrived, else NULL */
    const courier_error *error;       /* RESENT_FAILED: the detail */
    const char *reason;               /* POLICY_UNKNOWN "not_registered", DELETED "can_delete", EXPIRED
                                         "expired"; NULL otherwise (static storage) */
} courier_frozen_event;

/* Runs on the engine's journal thread, one event at a time, in the order things happened there.
 * Events reach only the listeners of the engine where they happen: the engine that froze the
 * request (FROZEN), the engine that replayed or removed it (RESENT_*, EXPIRED). Other processes
 * sharing the store do not see them (they see the journal itself: list, count, last outcome).
 * Must not block for long and must not close the engine; may send requests and use the journal. */
typedef void (*courier_frozen_event_fn)(const courier_frozen_event *event, void *user);

/* Adds a listener; *out_token (may be NULL) receives its token, never 0. user_free (may be NULL)
 * runs once when it is removed or the engine closes (or at once if this fails). Listeners added
 * after open miss events of replays already started: open with courier_config_set_frozen_paused
 * and resume after adding them. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_frozen_add_listener(uint64_t *out_token, courier_engine *engine, courier_frozen_event_fn fn,
                                            void *user, courier_user_free_fn user_free);
/* Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. A call in progress may still finish. */
COURIER_API int courier_frozen_remove_listener(courier_engine *engine, uint64_t token);

/* ========================================================================================== */
/* Network reachability (the network monitor)                                                  */
/* ========================================================================================== */

/* The engine's view of the network. UNKNOWN (before any evidence) behaves as online. */
typedef enum courier_reachability {
    COURIER_REACHABILITY_UNKNOWN = 0,
    COURIER_REACHABILITY_OFFLINE = 1,
    COURIER_REACHABILITY_ONLINE = 2
} courier_reachability;

/* Where the engine's view comes from. Any response (any status) means online. With from_errors
 * nonzero, a request that cannot resolve its host or cannot connect means offline (default 0: a
 * server being down does not make the engine offline). While offline (detected, not set by the
 * app), a probe runs every interval_ms (0: 5 000): `probe` is an http(s) URL (a HEAD through the
 * engine; any response means online) or "host:port" / "tcp://host:port" (a TCP connect); NULL or
 * "" probes the host:port that failed. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_INVALID_URL. */
COURIER_API int courier_config_set_reachability(courier_config *config, int from_errors, const char *probe,
                                                int64_t interval_ms);
/* The current courier_reachability. Any thread. */
COURIER_API int courier_reachability_status(const courier_engine *engine);
/* The app's word (a phone knows better): holds until the app says otherwise or gives detection
 * back with courier_reachability_set_automatic. A change to online starts a replay of the due
 * frozen requests, whatever their backoff: an automatic replay, so while replay is paused
 * (courier_frozen_pause, courier_config_set_frozen_paused) it waits for courier_frozen_resume, and
 * a change back to offline first voids it. Any thread. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_reachability_set_online(courier_engine *engine);
COURIER_API int courier_reachability_set_offline(courier_engine *engine);
COURIER_API int courier_reachability_set_automatic(courier_engine *engine);

/* A reachability listener: runs on the engine's journal thread with the new courier_reachability,
 * once per change (quick flaps may be collapsed into the latest state). Must not block for long
 * and must not close the engine. */
typedef void (*courier_reachability_fn)(courier_reachability status, void *user);
/* Adds one; *out_token (may be NULL) receives its token, never 0. user_free as for frozen-request
 * listeners. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_reachability_add_listener(uint64_t *out_token, courier_engine *engine,
                                                  courier_reachability_fn fn, void *user,
                                                  courier_user_free_fn user_free);
/* Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. */
COURIER_API int courier_reachability_remove_listener(courier_engine *engine, uint64_t token);

/* Network kinds (HLNetworking's WWAN / WiFi status; the network-layer design's limits per kind).
 * The monitor knows the kind of the path and whether it is expensive from a source: the operating
 * system (courier_config_set_network_watch) or the app (courier_reachability_report). */
typedef enum courier_network_kind {
    COURIER_NETWORK_UNKNOWN = 0,  /* no source said, or no path */
    COURIER_NETWORK_WIRED = 1,    /* Ethernet */
    COURIER_NETWORK_WIFI = 2,     /* Wi-Fi (the kernel's wireless or phy80211 links) */
    COURIER_NETWORK_CELLULAR = 3, /* a cellular modem (wwan links); expensive */
    COURIER_NETWORK_OTHER = 4     /* loopback, tunnels, anything else */
} courier_network_kind;

/* Nonzero: the engine watches the operating system's network path from open to close: on Linux
 * a NETLINK_ROUTE socket (links and routes); the interface of the default route gives the kind
 * (its ARPHRD type and /sys/class/net: wireless or phy80211 is Wi-Fi, DEVTYPE=wwan or raw IP is
 * cellular and expensive, Ethernet is wired); no default route (or its link down) is offline. On
 * Darwin Network.framework's path monitor. Its reports go where courier_reachability_report's go.
 * Default 0 (the kind stays UNKNOWN unless the app reports one). Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_network_watch(courier_config *config, int watch);
/* Limits that hold while the path is of `kind`: requests in flight per host and in all (as
 * courier_config_set_max_connections_per_host / _max_connections), and frozen requests replayed at
 * once (as courier_config_set_frozen_replay's concurrency); 0 keeps the engine's own value. A change
 * of kind applies the new kind's limits at once: queued requests start (or keep waiting) under
 * them, replays follow them. Errors: COURIER_E_INVALID_ARGUMENT (an unknown kind, negative values). */
COURIER_API int courier_config_set_network_limits(courier_config *config, courier_network_kind kind,
                                                  int max_per_host, int max_total, int replay_concurrency);
/* 0: this request must not go over a cellular path (YTKNetwork's allowsCellularAccess = NO): while
 * the kind is CELLULAR it fails with COURIER_E_CELLULAR, at send or, if queued, as soon as the kind
 * becomes cellular. Default 1. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_request_set_allow_cellular(courier_request *request, int allow);
/* A source's report, as the OS watch makes them (tests, and apps with a source of their own):
 * status ONLINE or OFFLINE sets what the monitor detected (the app's word from
 * courier_reachability_set_online/_offline still wins; UNKNOWN leaves it as it is), kind and
 * expensive describe the path. Any thread. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_reachability_report(courier_engine *engine, courier_reachability status,
                                            courier_network_kind kind, int expensive);
/* The path's kind and whether it is expensive (*out_expensive may be NULL). Online or offline is
 * courier_reachability_status. Any thread. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_reachability_path(courier_network_kind *out_kind, int *out_expensive,
                                          const courier_engine *engine);
/* The kind of a network interface by name ("lo", "eth0", "wlan0"), read from the kernel through
 * netlink (RTM_GETLINK) and /sys/class/net as the OS watch reads them. Linux only. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, too long, or not Linux), COURIER_E_NOT_FOUND (no such
 * interface), COURIER_E_INTERNAL (netlink failed; os_error set). */
COURIER_API int courier_network_link_kind(courier_network_kind *out_kind, int *out_expensive, const char *interface,
                                          courier_error *err);

/* ========================================================================================== */
/* Resend policies: which frozen requests are sent or deleted, and when                        */
/* ========================================================================================== */

/* A frozen request names a resend policy by id (courier_request_set_resend_policy); the id is
 * written in its journal record ("resend_policy"), so every process that replays the store finds
 * it. Before each automatic replay (at open, when the network comes back, on backoff timers, and
 * courier_frozen_replay) the replaying engine asks the policy registered under that id in that
 * engine: can_delete first (yes: removed, never sent, COURIER_FROZEN_EVENT_DELETED), then can_send
 * (no: kept, asked again at the next poll, network change or replay). courier_frozen_resend (one
 * request by id) and courier_frozen_remove are the app's word and skip the policy. A request whose
 * id no policy of the replaying engine has is kept there, never sent or deleted (its expiry
 * included), and reported once per request and engine (COURIER_FROZEN_EVENT_POLICY_UNKNOWN and a
 * journal_policy log line); a process that knows the id replays it.
 *
 * Built-in policies, registered in every engine under reserved ids (ids starting "courier." are
 * reserved); every known policy's request is also removed once its expiry passes:
 *   "courier.auto"    sent whenever due (the default of COURIER_FREEZE_AUTO)
 *   "courier.manual"  only when the app resends or replays with COURIER_REPLAY_MANUAL (the default
 *                     of COURIER_FREEZE_MANUAL)
 *   "courier.online"  sent only while the monitor says online (UNKNOWN is not enough): "send when
 *                     the network is back"
 *   "courier.expire"  sent whenever due and dropped when the freeze has expired, nothing more (the
 *                     design's rule; it decides as courier.auto does)
 *   "courier.start"   sent only by a replay of an engine opened after it was frozen and last tried:
 *                     "resend at the next start" (at most one automatic attempt per engine open) */
#define COURIER_RESEND_POLICY_ID_MAX 64

/* A policy's question about one frozen request: `frozen` is a read-only snapshot (its id, method,
 * URL, headers, body, courier_frozen_get_info's attempts, last code and status, created and expires
 * times, courier_frozen_resend_policy), `age_ms` the time since it was frozen (engine clock), and
 * `reachability` the engine's current courier_reachability. Nonzero means yes. Runs on the engine's
 * journal or worker thread, outside any journal transaction; must not block for long or close the
 * engine. */
typedef int (*courier_resend_policy_fn)(const courier_frozen *frozen, int64_t age_ms,
                                        courier_reachability reachability, void *user);

/* Registers a policy under `id` (1..COURIER_RESEND_POLICY_ID_MAX of A-Z a-z 0-9 and "-._~:@+=", not
 * starting "courier."), replacing one registered under it before. can_send NULL: always yes;
 * can_delete NULL: never. user_free (may be NULL) runs once, after the last call, when the policy
 * is removed or replaced or the engine closes (or at once if this fails). Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine, bad or reserved id), COURIER_E_CLOSED,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_resend_policy_add(courier_engine *engine, const char *id, courier_resend_policy_fn can_send,
                                          courier_resend_policy_fn can_delete, void *user,
                                          courier_user_free_fn user_free, courier_error *err);
/* Removes the policy registered under `id`; this engine's requests that name it are then kept
 * (reported as unknown). A call in progress may still finish. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, a reserved id), COURIER_E_NOT_FOUND. */
COURIER_API int courier_resend_policy_remove(courier_engine *engine, const char *id, courier_error *err);
/* The request's resend policy (copied); NULL restores the freeze policy's default ("courier.auto" or
 * "courier.manual"). "courier.manual" keeps it out of automatic replay like COURIER_FREEZE_MANUAL.
 * A freezable send naming an id its engine has no policy for fails with
 * COURIER_E_RESEND_POLICY_UNKNOWN. Errors: COURIER_E_INVALID_ARGUMENT (NULL request, bad id). */
COURIER_API int courier_request_set_resend_policy(courier_request *request, const char *id, courier_error *err);
/* The id of a frozen request's resend policy ("courier.auto" or "courier.manual" when it named
 * none). Borrowed until the snapshot is freed; NULL for NULL. */
COURIER_API const char *courier_frozen_resend_policy(const courier_frozen *frozen);

/* ========================================================================================== */
/* Cookies, authentication, proxies                                                            */
/* ========================================================================================== */

/* Cookies (RFC 6265). Every engine has a cookie jar, on by default: cookies a response sets are
 * sent with later requests (and every hop of a redirect chain) by libcurl's own cookie engine,
 * which applies the rules: domain and path matching, host-only versus Domain cookies, Secure
 * (sent over https, or to localhost; a Secure cookie set over plain http to another host is
 * refused), HttpOnly (kept, and sent like any other: there is no script here), Max-Age/Expires,
 * the __Secure- and __Host- prefixes, and public suffixes (a cookie for "com" or "co.uk" is
 * refused) through libpsl. SameSite is ignored: it governs which site a browser's request comes
 * from, and every request of an engine is its own caller's. The jar lives in the store (the
 * journal's environment, synced): it is read at open; a response that changed it is written
 * before its completion runs; and before a request goes on the wire the engine re-reads what
 * another engine or process wrote since (an engine on a private temporary store,
 * courier_config_set_temporary_store, keeps its jar in memory only). Session cookies (no expiry) are kept in the store too:
 * the store is the session; courier_cookies_clear ends it. A frozen request is replayed with the
 * jar as it is when it is sent again. 0 turns the jar off for the engine (no Cookie header is
 * ever added, Set-Cookie is ignored, the store's jar is left as it is). Errors: COURIER_E_INVALID_ARGUMENT
 * (NULL config). */
COURIER_API int courier_config_set_cookies(courier_config *config, int enabled);

/* One cookie, as the jar holds it. Strings are borrowed (see where each is taken or given). */
typedef struct courier_cookie {
    size_t size;            /* sizeof(courier_cookie), set by the caller */
    const char *domain;     /* the host (lowercase, no leading dot) */
    const char *path;       /* "/" when the cookie gave none or NULL in courier_cookies_set */
    const char *name;
    const char *value;
    int64_t expires;        /* seconds since 1970-01-01 UTC; 0: a session cookie */
    int include_subdomains; /* nonzero: a Domain cookie, sent to subdomains too; 0: host-only */
    int secure;             /* nonzero: sent over https (and to localhost) only */
    int http_only;          /* nonzero: HttpOnly was given */
} courier_cookie;
/* Fills *cookie with zeros, keeping its size (set by the caller). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the first version's). */
COURIER_API int courier_cookie_init(courier_cookie *cookie);

typedef struct courier_cookie_list courier_cookie_list;
/* The engine's jar as the store has it now (re-read when another engine or process changed it),
 * expired cookies left out, sorted by domain, path, name. *out new: release with
 * courier_cookie_list_free. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or the jar is
 * off), COURIER_E_STORE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_cookies_list(courier_cookie_list **out, courier_engine *engine, courier_error *err);
COURIER_API size_t courier_cookie_list_count(const courier_cookie_list *list);
/* Copies cookie `index` into *out (the fields within its `size`, set by the caller); its
 * strings are borrowed from the list until courier_cookie_list_free. Errors: COURIER_E_NOT_FOUND
 * (index out of range), COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_cookie_list_at(courier_cookie *out, const courier_cookie_list *list, size_t index);
/* Accepts NULL. */
COURIER_API void courier_cookie_list_free(courier_cookie_list *list);
/* Adds a cookie to the jar, replacing the one with the same domain, path and name, and writes it
 * to the store before returning. `cookie` is borrowed for the call (strings copied). An expiry in
 * the past removes the cookie. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL, the jar is
 * off, a size smaller than the first version's, an empty domain or name, a path not starting with '/'),
 * COURIER_E_INVALID_HEADER (a tab, CR, LF, ';' or a control byte in a field, or '=' in the name),
 * COURIER_E_STORE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_cookies_set(courier_engine *engine, const courier_cookie *cookie, courier_error *err);
/* Removes the cookie with this domain, path (NULL: "/") and name, from the jar and the store.
 * Any thread. Errors: COURIER_E_NOT_FOUND, COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE. */
COURIER_API int courier_cookies_remove(courier_engine *engine, const char *domain, const char *path,
                                       const char *name, courier_error *err);
/* Empties the jar and the store's jar. *out_removed (may be NULL) receives how many cookies went.
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE. */
COURIER_API int courier_cookies_clear(int64_t *out_removed, courier_engine *engine, courier_error *err);

/* Authentication schemes answered to a challenge (401 WWW-Authenticate, 407 Proxy-Authenticate),
 * a bit set. With BASIC alone the credentials go with the first request; with any other set the
 * first request goes without, and the strongest scheme the server's challenge offers among those
 * allowed answers it (RFC 7616 Digest with MD5 or SHA-256, Negotiate/SPNEGO, NTLM). */
typedef enum courier_auth_scheme {
    COURIER_AUTH_BASIC = 1,
    COURIER_AUTH_DIGEST = 2,
    COURIER_AUTH_NEGOTIATE = 4, /* when this libcurl has it: see courier_auth_available */
    COURIER_AUTH_NTLM = 8       /* likewise */
} courier_auth_scheme;
/* Every scheme but Basic (which sends the password in clear): the strongest the server offers. */
#define COURIER_AUTH_ANY_SAFE (COURIER_AUTH_DIGEST | COURIER_AUTH_NEGOTIATE | COURIER_AUTH_NTLM)
#define COURIER_AUTH_ANY (COURIER_AUTH_BASIC | COURIER_AUTH_ANY_SAFE)
/* The schemes this build can answer (a courier_auth_scheme bit set). Any thread. */
COURIER_API unsigned courier_auth_available(void);

/* Credentials for every request of the engine that has none of its own. user NULL removes them.
 * Strings copied. They are sent to the origin of the request's URL only, never to another host a
 * redirect leads to. Errors: COURIER_E_INVALID_ARGUMENT (schemes 0, unknown bits, or only schemes
 * this build lacks; a ':' in the user with BASIC), COURIER_E_INVALID_HEADER (CR, LF or NUL),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_credentials(courier_config *config, const char *user, const char *password,
                                               unsigned schemes);
/* Credentials for this request, replacing the engine's. Errors as above. */
COURIER_API int courier_request_set_credentials(courier_request *request, const char *user, const char *password,
                                                unsigned schemes);

/* A 401 or 407 that a challenge handler may answer: the request waits, off the wire, until
 * courier_challenge_answer is called once (from any thread, at any time). */
typedef struct courier_challenge courier_challenge;
/* Called at most once per request, on the engine's worker thread, when its answer is 401 from the
 * origin of the request's own URL (never for another origin a redirect reached) or 407 from its
 * proxy. It must not block: answer now or later, from any thread. */
typedef void (*courier_challenge_fn)(courier_challenge *challenge, void *user);
/* Registers the engine's handler (NULL removes it). user_free as for validators. Errors:
 * COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_challenge_handler(courier_config *config, courier_challenge_fn fn, void *user,
                                                     courier_user_free_fn user_free);
/* This request's handler, replacing the engine's (fn NULL: the engine's). */
COURIER_API int courier_request_set_challenge_handler(courier_request *request, courier_challenge_fn fn,
                                                      void *user, courier_user_free_fn user_free);
/* 401 or 407. */
COURIER_API int courier_challenge_status(const courier_challenge *challenge);
/* The URL that answered 401 (for 407: the request's URL). Borrowed until the challenge is answered. */
COURIER_API const char *courier_challenge_url(const courier_challenge *challenge);
/* The WWW-Authenticate (401) or Proxy-Authenticate (407) values, joined by ", " ("" when none).
 * Borrowed until the challenge is answered. */
COURIER_API const char *courier_challenge_header(const courier_challenge *challenge);
/* The request's id (as courier_send returned it). The accessors above read a challenge from any
 * thread until it is answered; none fails (a NULL challenge gives 0 or ""). */
COURIER_API uint64_t courier_challenge_request_id(const courier_challenge *challenge);
/* Answers the challenge and releases it (it must not be used after): with credentials the request
 * is sent again with them (for a 407, as the proxy's); user NULL declines, and the request
 * completes with the 401 or 407 response (COURIER_E_HTTP_STATUS, or COURIER_E_PROXY for a tunnel).
 * A request cancelled or an engine closed meanwhile makes the answer a no-op. Must be called
 * exactly once per challenge. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL challenge, bad
 * schemes or credentials: the challenge is then declined and released all the same). */
COURIER_API int courier_challenge_answer(courier_challenge *challenge, const char *user, const char *password,
                                         unsigned schemes);

/* Proxies. A proxy URL is "http://host:port", "https://host:port", "socks5://host:port" (names
 * resolved here) or "socks5h://host:port" (names resolved by the proxy); "" means no proxy at all
 * (direct, whatever the environment says). With none set (NULL) the environment is read as
 * libcurl reads it (http_proxy, https_proxy, all_proxy, no_proxy). `no_proxy` is a comma-separated
 * list of host names (a name matches itself and its subdomains), IP addresses and CIDR ranges that
 * go direct; "*" sends everything direct. Strings copied.
 * Errors: COURIER_E_INVALID_URL (not one of those schemes, or no host), COURIER_E_INVALID_HEADER
 * (CR, LF or NUL), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_proxy(courier_config *config, const char *proxy_url, const char *no_proxy);
/* The proxy of this request, replacing the engine's (proxy_url NULL: the engine's). */
COURIER_API int courier_request_set_proxy(courier_request *request, const char *proxy_url, const char *no_proxy);
/* Credentials sent to the proxy (Proxy-Authorization; for SOCKS5 the username/password method).
 * user NULL removes them. Errors as for courier_config_set_credentials. */
COURIER_API int courier_config_set_proxy_credentials(courier_config *config, const char *user, const char *password,
                                                     unsigned schemes);
COURIER_API int courier_request_set_proxy_credentials(courier_request *request, const char *user,
                                                      const char *password, unsigned schemes);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_H */
