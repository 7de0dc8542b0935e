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
 *   - memory the library allocates is released by the library's own free functions;
 *   - no curl, LMDB or jansson type appears here; no variadic functions; no static inline.
 *
 * Threads: an engine is thread-safe. A request object is used by one thread at a time until it is
 * sent (sending copies it, so it may be reused or freed right after). A response is immutable and
 * may be read from any thread. Completion callbacks run on the engine's worker thread.
 */
#ifndef COURIER_H
#define COURIER_H

#include <stddef.h>
#include <stdint.h>

#define COURIER_VERSION_MAJOR 0
#define COURIER_VERSION_MINOR 1
#define COURIER_VERSION_PATCH 0
/* 0xMMmmpp: major, minor, patch, one byte each. */
#define COURIER_VERSION_NUM ((COURIER_VERSION_MAJOR << 16) | (COURIER_VERSION_MINOR << 8) | COURIER_VERSION_PATCH)
#define COURIER_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#  define COURIER_API __declspec(dllexport)
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
    COURIER_E_HTTP_STATUS = -9,       /* the server answered with status >= 400; response attached */
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
    COURIER_E_NOT_FOUND = -20         /* no such item (request id, entry) */
} courier_code;

/* Static English text for a code ("unknown error" for an unknown code). Never NULL. Any thread. */
COURIER_API const char *courier_strerror(int code);

/* The detail of an error, filled by functions that take a courier_error * (NULL is allowed
 * everywhere one is taken). Caller-allocated; the library writes every field. */
typedef struct courier_error {
    int code;          /* the courier_code, also returned by the function */
    int http_status;   /* the HTTP status when one was received, else 0 */
    int curl_code;     /* the underlying CURLcode, else 0 */
    int os_error;      /* the underlying errno, else 0 */
    int store_error;   /* the underlying storage (LMDB) error, else 0 */
    int reserved[7];   /* zero; room to grow without changing the size */
    char message[256]; /* NUL-terminated English detail, possibly truncated; "" when none */
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
 * "Courier/<version>"; 6 connections per host, 64 in all; form body encoding; TLS verification on
 * with the system's CA store; maximum response body 64 MiB; a private temporary store directory
 * that is removed when the engine closes.
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
/* Default timeout of a request, whole transfer, in milliseconds (> 0). */
COURIER_API int courier_config_set_timeout_ms(courier_config *config, long timeout_ms);
/* The User-Agent header. NULL restores the default. Errors: COURIER_E_INVALID_HEADER. */
COURIER_API int courier_config_set_user_agent(courier_config *config, const char *user_agent);
/* Connection limits (>= 1). Requests over the limit wait in the engine's queue. */
COURIER_API int courier_config_set_max_connections_per_host(courier_config *config, long n);
COURIER_API int courier_config_set_max_connections(courier_config *config, long n);
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
/* For development only: nonzero turns certificate and host name verification OFF. */
COURIER_API int courier_config_set_insecure(courier_config *config, int insecure);
/* The directory the engine keeps its store in (cache, journal). It is created (with parents,
 * mode 0700) at open. NULL restores the default: a private temporary directory removed at close. */
COURIER_API int courier_config_set_store_dir(courier_config *config, const char *path);
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
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE (os_error set), COURIER_E_NO_MEMORY,
 * COURIER_E_INTERNAL (libcurl or the thread could not start). */
COURIER_API int courier_engine_open(courier_engine **out, const courier_config *config, courier_error *err);

/* Closes an engine: every request still queued or in flight completes with COURIER_E_CANCELLED,
 * exactly once, on the worker thread, before this returns; then the worker stops and all memory is
 * released. Accepts NULL. Call it from any thread except the engine's worker thread (that is,
 * never from inside one of its callbacks). */
COURIER_API void courier_engine_close(courier_engine *engine);

/* The engine's store directory. Borrowed: valid until the engine closes. Any thread. */
COURIER_API const char *courier_engine_store_dir(const courier_engine *engine);

/* Counts of requests the engine currently holds: waiting to start, and on the wire. Any thread. */
COURIER_API int courier_engine_pending(const courier_engine *engine, long *queued, long *active);

/* ========================================================================================== */
/* Requests                                                                                    */
/* ========================================================================================== */

/* A new request. `method` is an HTTP token ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", or
 * any other token). `target` is a path joined to the base URL (the request's own, else the
 * engine's), or an absolute http/https URL. Joining puts exactly one '/' between base and path:
 * base "http://h/api" or "http://h/api/" with "v1/items" or "/v1/items" gives
 * "http://h/api/v1/items". Both strings are copied. *out is new: release it with
 * courier_request_free. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or a method that is not a token),
 * COURIER_E_NO_MEMORY. A bad URL is reported when the request is sent (COURIER_E_INVALID_URL). */
COURIER_API int courier_request_new(courier_request **out, const char *method, const char *target);
/* Accepts NULL. */
COURIER_API void courier_request_free(courier_request *request);

/* A base URL for this request alone, replacing the engine's. NULL clears it. */
COURIER_API int courier_request_set_base_url(courier_request *request, const char *base_url);
/* Adds a parameter. For GET, HEAD and DELETE parameters go in the query string; for other
 * methods in the body, encoded as configured (unless a raw body is set, then in the query).
 * Percent-encoded per RFC 3986. Errors: COURIER_E_INVALID_ENCODING (not UTF-8). */
COURIER_API int courier_request_add_param(courier_request *request, const char *name, const char *value);
/* The same with explicit lengths, so embedded NUL bytes are seen (and refused with
 * COURIER_E_INVALID_ENCODING) rather than silently truncating. */
COURIER_API int courier_request_add_param_n(courier_request *request, const char *name, size_t name_len,
                                            const char *value, size_t value_len);
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
COURIER_API int courier_request_set_timeout_ms(courier_request *request, long timeout_ms);
/* Authorization: Basic base64(user ":" password). Errors: COURIER_E_INVALID_HEADER (CR/LF). */
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
COURIER_API int courier_outgoing_header_at(const courier_outgoing *outgoing, size_t index, const char **name,
                                           const char **value);

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
 * COURIER_E_INVALID_ENCODING, COURIER_E_CLOSED, COURIER_E_NO_MEMORY, or a customize callback's
 * code). Any thread. */
COURIER_API int courier_send(courier_engine *engine, const courier_request *request, courier_completion_fn done,
                             void *user, uint64_t *out_id, courier_error *err);

/* Sends a request and waits for its completion. *out_response receives the response (new,
 * release with courier_response_free) whenever one exists, including on COURIER_E_HTTP_STATUS and
 * COURIER_E_INVALID_RESULT; otherwise NULL. Returns the completion's code. Any thread except the
 * engine's worker thread (calling it from a completion callback returns COURIER_E_INVALID_ARGUMENT). */
COURIER_API int courier_send_sync(courier_engine *engine, const courier_request *request,
                                  courier_response **out_response, courier_error *err);

/* Cancels a request by id: it completes with COURIER_E_CANCELLED (unless it completes otherwise
 * first). Any thread. Returns COURIER_OK when the id is known and not yet completed, else
 * COURIER_E_NOT_FOUND. Completion may run before or after this returns. */
COURIER_API int courier_cancel(courier_engine *engine, uint64_t request_id);
/* Cancels every request the engine holds. Any thread. */
COURIER_API int courier_cancel_all(courier_engine *engine);

/* ========================================================================================== */
/* Responses                                                                                   */
/* ========================================================================================== */

/* Accepts NULL. Any thread. */
COURIER_API void courier_response_free(courier_response *response);
/* The HTTP status code (0 if none). */
COURIER_API int courier_response_status(const courier_response *response);
/* The body. Borrowed until the response is freed; *len (may be NULL) receives its length. The
 * bytes are followed by a NUL that is not counted, so text bodies may be read as C strings.
 * Never NULL: an empty body is "". */
COURIER_API const uint8_t *courier_response_body(const courier_response *response, size_t *len);
/* The first value of a header, case-insensitive; NULL if absent. Borrowed until freed. */
COURIER_API const char *courier_response_header(const courier_response *response, const char *name);
/* Number of header lines of the final response, and the i-th in received order.
 * Errors: COURIER_E_NOT_FOUND (index out of range). Borrowed until freed. */
COURIER_API size_t courier_response_header_count(const courier_response *response);
COURIER_API int courier_response_header_at(const courier_response *response, size_t index, const char **name,
                                           const char **value);
/* The URL that answered, after redirects. Borrowed until freed. */
COURIER_API const char *courier_response_url(const courier_response *response);
/* The method that was sent. Borrowed until freed. */
COURIER_API const char *courier_response_method(const courier_response *response);
/* The id of the send that produced it. */
COURIER_API uint64_t courier_response_request_id(const courier_response *response);

/* Timing and size of one transfer. Times are seconds from the start of the transfer (0 if the
 * phase did not happen, e.g. DNS and connect on a reused connection). */
typedef struct courier_metrics {
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
/* Copies the metrics into *out. `size` is sizeof(courier_metrics) as the caller knows it, so the
 * struct can grow: only that many bytes are written. */
COURIER_API int courier_response_metrics(const courier_response *response, courier_metrics *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_H */
