/*
 * courier/hooks.h — user code in the send path: mock answers, engine-wide stubs and HAR record
 * and replay, interceptors, sessions (adapters, retriers, the authenticator), custom transports,
 * errors raised by user code.
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
 * cancel or the engine's close ends it as usual (a later answer is then a no-op). A send that has
 * adapters or retriers, or that the authenticator applies to, is never coalesced with another
 * (courier_request_set_coalesce): its attempts are its own. */

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
 * and every send of it are done. Errors as above. */
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

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_HOOKS_H */
