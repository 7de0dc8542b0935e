/*
 * courier/hooks.h — user code in the send path: mock answers, interceptors, custom transports,
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
