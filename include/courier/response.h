/*
 * courier/response.h — reading a response, its metrics, redirects and timeouts, building
 * responses.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_RESPONSE_H
#define COURIER_INC_RESPONSE_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* Added after 0.2.0 (written when size reaches them): */
    char remote_ip[46];    /* the address the connection reached ("" for a Unix socket, a mock,
                              a cache hit or a failure before connecting); IPv6 without brackets */
    int remote_port;       /* its port (0 when remote_ip is "") */
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

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_RESPONSE_H */
