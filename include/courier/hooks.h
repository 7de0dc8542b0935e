/*
 * courier/hooks.h — user code in the send path: mock answers, engine-wide stubs and HAR record
 * and replay, interceptors, custom transports, errors raised by user code.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_HOOKS_H
#define COURIER_INC_HOOKS_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* Stubs for the app's own tests, HAR record and replay                                        */
/* ========================================================================================== */

/* Engine-wide stubs (URLProtocol's and MockWebServer's use): while the engine's stub mode is not
 * OFF, each send is offered to its stubs. A stub matches a request by method, URL pattern, header
 * lines and a predicate (all that it sets must hold); its answers are mock answers (a status,
 * headers, a body as bytes or from a file, a delay, or a failure code), made and judged as
 * courier_request_set_mock_* answers are: validation, status check, mapping, cache, events and
 * retry apply to them unchanged, nothing goes on the wire.
 * Where: matching runs on the sending thread inside courier_send, after the customize callback and
 * the before-send interceptors (the request as it would go out); the answer is made on the
 * engine's worker thread. A request's own mock (mock switch on) and a request sent through a
 * custom transport (courier_request_set_transport) are not offered to the stubs; a cache hit
 * answers before them, as it does before the network.
 * Order: the stub added last that matches answers (a test can override a fixture's stub).
 * Sequences: a stub's answers are given in the order they were added, one per attempt (a retry
 * takes the next one); after the last, the last answers again.
 * Record: every attempt of a request offered to the stubs (matched or not) is recorded, in order,
 * for the test's assertions (courier_engine_stub_request_at). */

/* What happens to a request no stub matches. */
typedef enum courier_stub_mode {
    COURIER_STUBS_OFF = 0,         /* the default: stubs are not consulted, nothing is recorded */
    COURIER_STUBS_ONLY = 1,        /* an unmatched request fails with COURIER_E_NO_STUB (nothing is sent) */
    COURIER_STUBS_PASS_THROUGH = 2 /* an unmatched request goes to the network as usual */
} courier_stub_mode;

/* How a stub's URL pattern is compared. A pattern that starts with "/" (or, a regular expression,
 * with "^/") is compared with the URL's path and query ("/users/1?full=1"; the fragment is never
 * part of a sent URL); any other with the whole URL ("http://127.0.0.1:8080/users/1"). */
typedef enum courier_url_match {
    COURIER_URL_EXACT = 0,  /* byte for byte */
    COURIER_URL_PREFIX = 1, /* the URL starts with the pattern */
    COURIER_URL_GLOB = 2,   /* fnmatch(3) without flags: "*" matches any run (slashes included),
                               "?" one character, "[...]" a set */
    COURIER_URL_REGEX = 3   /* a POSIX extended regular expression searched in the URL (anchor it
                               with ^ and $ to match the whole) */
} courier_url_match;

/* A stub being described: used by one thread at a time, like a request; adding it copies it, so
 * it may be changed, added again or freed afterwards. */
typedef struct courier_stub courier_stub;
/* A request the stubs saw: immutable, readable from any thread. */
typedef struct courier_stub_request courier_stub_request;

/* A new stub, *out new (free with courier_stub_free). method: matched exactly ("GET"; NULL: any).
 * url_pattern: NULL or "" matches any URL. Both copied. Errors: COURIER_E_INVALID_ARGUMENT (NULL
 * out, an unknown match kind, a regular expression that does not compile: err says why),
 * COURIER_E_NO_MEMORY. Any thread. */
COURIER_API int courier_stub_new(courier_stub **out, const char *method, const char *url_pattern,
                                 courier_url_match match, courier_error *err);
/* NULL is allowed. */
COURIER_API void courier_stub_free(courier_stub *stub);
/* The request must carry a header of this name (case-insensitive) whose value is `value` exactly;
 * value NULL: any value. Several calls: all must hold. Copied. Errors: COURIER_E_INVALID_ARGUMENT,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_stub_match_header(courier_stub *stub, const char *name, const char *value);
/* A predicate: nonzero when the stub matches the request (borrowed for the call). Asked last, only
 * when method, URL and headers match; runs on the sending thread inside courier_send, with no lock
 * of the engine held (it may send requests). Must not close the engine. */
typedef int (*courier_stub_predicate_fn)(const courier_stub_request *request, void *user);
/* Sets the predicate (NULL removes it). user_free (may be NULL) runs once when the last stub and
 * engine copy holding it is freed (or at once if this fails). */
COURIER_API int courier_stub_set_predicate(courier_stub *stub, courier_stub_predicate_fn fn, void *user,
                                           courier_user_free_fn user_free);
/* Appends an answer: a status (100..999) and a body (copied; NULL with len 0 for none) with its
 * content type (NULL: none). */
COURIER_API int courier_stub_add_response(courier_stub *stub, int status, const void *body, size_t len,
                                          const char *content_type);
/* Appends an answer whose body is read from a file when it answers (as courier_request_set_mock_file:
 * .json gives application/json; a missing file fails the request with COURIER_E_NOT_FOUND). */
COURIER_API int courier_stub_add_file(courier_stub *stub, int status, const char *path);
/* Appends an answer that fails the request with `code` (negative, e.g. COURIER_E_TIMEOUT) and no
 * response. */
COURIER_API int courier_stub_add_error(courier_stub *stub, courier_code code);
/* Adds a header line to the last answer appended. Errors: COURIER_E_INVALID_ARGUMENT (no answer
 * yet), as courier_request_add_header otherwise. */
COURIER_API int courier_stub_add_header(courier_stub *stub, const char *name, const char *value);
/* The last answer appended is given after this delay (ms >= 0), on a timer of the worker: nothing
 * blocks. Errors: COURIER_E_INVALID_ARGUMENT (no answer yet, a negative delay). */
COURIER_API int courier_stub_set_delay_ms(courier_stub *stub, int64_t delay_ms);

/* Adds a copy of a stub (it must have an answer) to the configuration: every engine opened from it
 * starts with its own copy (and its own place in the answers). Errors: COURIER_E_INVALID_ARGUMENT
 * (NULL, no answer), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_add_stub(courier_config *config, const courier_stub *stub);
/* The engine's stub mode (default COURIER_STUBS_OFF). Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_stub_mode(courier_config *config, courier_stub_mode mode);
/* Changes the stub mode of a running engine; sends made afterwards see it. Any thread. */
COURIER_API int courier_engine_set_stub_mode(courier_engine *engine, courier_stub_mode mode);
/* The engine's stub mode. Any thread. */
COURIER_API courier_stub_mode courier_engine_stub_mode(const courier_engine *engine);
/* Adds a copy of a stub to a running engine; *out_id (may be NULL) receives its id, never 0 (the
 * configuration's stubs have ids 1, 2, ... in the order they were added). Any thread. Errors as
 * courier_config_add_stub. */
COURIER_API int courier_engine_add_stub(uint64_t *out_id, courier_engine *engine, const courier_stub *stub);
/* Removes a stub by id (a send that already matched it keeps its answer). Errors:
 * COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. Any thread. */
COURIER_API int courier_engine_remove_stub(courier_engine *engine, uint64_t id);
/* Removes every stub (the record stays). Any thread. */
COURIER_API int courier_engine_clear_stubs(courier_engine *engine);

/* The record. A request is recorded at each attempt the stubs answer or pass through (on the
 * worker, after the cache lookup: a cache hit is not recorded), in the order the attempts start. */
/* The number of requests recorded. Any thread. */
COURIER_API size_t courier_engine_stub_request_count(const courier_engine *engine);
/* The index-th (0-based) request recorded: *out is new (free with courier_stub_request_free; it
 * stays valid after the record is cleared or the engine closed). Errors: COURIER_E_INVALID_ARGUMENT,
 * COURIER_E_NOT_FOUND (index past the end). Any thread. */
COURIER_API int courier_engine_stub_request_at(courier_stub_request **out, const courier_engine *engine, size_t index);
/* Empties the record. Any thread. */
COURIER_API int courier_engine_clear_stub_requests(courier_engine *engine);
/* NULL is allowed. */
COURIER_API void courier_stub_request_free(courier_stub_request *request);
/* The method and the full URL of the request. Borrowed while the request is alive. */
COURIER_API const char *courier_stub_request_method(const courier_stub_request *request);
COURIER_API const char *courier_stub_request_url(const courier_stub_request *request);
/* The value of a header (first line of that name, case-insensitive), or NULL. Borrowed. */
COURIER_API const char *courier_stub_request_header(const courier_stub_request *request, const char *name);
/* Number of header lines, and the i-th (0-based) in order (the lines the engine sets; not curl's
 * own Host, Content-Length or Accept-Encoding). Borrowed. */
COURIER_API size_t courier_stub_request_header_count(const courier_stub_request *request);
COURIER_API int courier_stub_request_header_at(const char **out_name, const char **out_value,
                                               const courier_stub_request *request, size_t index);
/* The body (borrowed; NULL for none, and for a body streamed from a file or a multipart body, which
 * are not read), its length in *out_len (may be NULL; 0 for none). */
COURIER_API const void *courier_stub_request_body(const courier_stub_request *request, size_t *out_len);
/* The id of the stub that answered, or 0 when none matched. */
COURIER_API uint64_t courier_stub_request_stub_id(const courier_stub_request *request);

/* HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/), the format browsers' developer tools
 * and Charles read. */
/* Records every exchange the engine has from now on into a HAR file at `path` (created or
 * replaced at once, holding an empty log): after each attempt that received a response (from the
 * network or a stub; not a cache hit, not a failure without a response), on the worker thread, the
 * entry is added and the whole file is written again (to a temporary file renamed over it), so the
 * file is a complete HAR at every moment. Bodies are written as text when they are UTF-8, else in
 * base64 (content.encoding "base64"); a body downloaded to a file or read by a stream is not
 * written (content.size -1). path NULL stops recording (the file keeps what it has). Starting again
 * starts a new file. Errors: COURIER_E_INVALID_ARGUMENT (NULL engine; the file cannot be written:
 * err->os_error), COURIER_E_NO_MEMORY. Any thread. */
COURIER_API int courier_engine_record_har(courier_engine *engine, const char *path, courier_error *err);
/* Adds the entries of a HAR file as stubs of the engine: one stub per method and URL (matched
 * exactly, COURIER_URL_EXACT on the whole URL), whose answers are that method and URL's responses
 * in the file's order (status, headers except Content-Length, Content-Encoding and
 * Transfer-Encoding, and the body: content.text, decoded when content.encoding is "base64"). The
 * stub mode is not changed. *out_count (may be NULL) receives the number of stubs added. Errors:
 * COURIER_E_NOT_FOUND (no such file), COURIER_E_JSON (not JSON, or not a HAR: no log.entries, an
 * entry without request.method, request.url or response.status), COURIER_E_NO_MEMORY. Any thread. */
COURIER_API int courier_engine_replay_har(size_t *out_count, courier_engine *engine, const char *path,
                                          courier_error *err);

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

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_HOOKS_H */
