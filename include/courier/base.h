/*
 * courier/base.h — base and errors: the version at run time, COURIER_API, result codes and
 * courier_error, setting defaults, courier_free, and the handles and callback types every part
 * shares.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_BASE_H
#define COURIER_INC_BASE_H

#include <stddef.h>
#include <stdint.h>

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
    COURIER_E_HTTP_VERSION = -63,     /* the HTTP version required cannot be had: the server answered
                                         over another (courier_http_version's _2_ONLY), or this
                                         libcurl was built without it (HTTP/3) */
    COURIER_E_NO_STUB = -64,          /* the engine answers from stubs (COURIER_STUBS_ONLY) and no stub
                                         matched the request; nothing was sent */
    COURIER_E_CREDENTIAL_REFUSED = -65, /* the authenticator's credential was refused again right after
                                         a refresh (the loop guard): the refusing response (a 401)
                                         is attached */
    COURIER_E_REPLICAS_UNCONFIRMED = -66 /* a freeze was written to the Redis journal's master but fewer
                                         replicas than courier_config_set_frozen_replicas asks for
                                         confirmed it in time (WAIT): not acknowledged as frozen (it
                                         may still be replayed: it is in the journal) */
} courier_code;

/* Static English text for a code ("unknown error" for an unknown code). Never NULL. Any thread. */
COURIER_API const char *courier_strerror(int code);
/* A code's stable name: its enum name without the prefix, lowercase ("timeout" for
 * COURIER_E_TIMEOUT, "cannot_connect", "ok" for COURIER_OK; "unknown" for an unknown code), for
 * telemetry's low-cardinality error types (OpenTelemetry's error.type). Static storage; never
 * NULL; never changes for a code. Any thread. */
COURIER_API const char *courier_code_name(int code);

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

/* Releases memory the library returned as new bytes (courier_json_dump). Accepts NULL. */
COURIER_API void courier_free(void *ptr);

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

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_BASE_H */
