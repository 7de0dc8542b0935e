/*
 * courier/request.h — building a request, the final request (courier_outgoing), sending and
 * cancelling.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_REQUEST_H
#define COURIER_INC_REQUEST_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* The request's W3C trace context (https://www.w3.org/TR/trace-context/): sets its "traceparent"
 * header line to traceparent and its "tracestate" line to tracestate, replacing any lines of those
 * names (tracestate NULL or "": none). Being header lines of the request, they go out on every
 * attempt of every send of it (retries, redirect hops, resends of a frozen request: the journal
 * stores them with the request's other header lines), and events carry them
 * (courier_event.traceparent). A before-send interceptor may still replace them (a tracer's client
 * span). Both copied. traceparent must be version 00's form, "00-<32 hex>-<16 hex>-<2 hex>" in
 * lowercase, with neither id all zeros; tracestate at most 512 characters of visible ASCII, spaces
 * and commas. Errors: COURIER_E_INVALID_ARGUMENT (NULL request or traceparent, either malformed:
 * the request is unchanged), COURIER_E_NO_MEMORY. One thread at a time, like the request. */
COURIER_API int courier_request_set_trace_context(courier_request *request, const char *traceparent,
                                                  const char *tracestate);
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
/* The id of the send: the id its events, log lines and response carry, in customize, before-send,
 * mock and redirect callbacks alike (a tracer starts a span in a before-send interceptor and ends
 * it at the send's COURIER_EVENT_FINISHED, which a send refused from the before-send interceptors on
 * has too: courier_send). A send refused after its callbacks ran (by a callback, or a later check)
 * never sends under its id; ids are unique per engine but may have gaps. (Libraries
 * up to 0.2.1 gave 0 in customize and before-send callbacks.) */
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
 * callback's code). A send refused once its before-send interceptors' turn came (by an interceptor,
 * a transport not registered, a resend or cache policy not registered, the frequent-request guard,
 * the engine closing...) has one COURIER_EVENT_FINISHED with that code, on the calling thread before
 * this returns (log.h), so what an interceptor began for it (a tracer's span) ends. Any thread. */
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

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_REQUEST_H */
