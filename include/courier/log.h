/*
 * courier/log.h — logging and event monitors.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_LOG_H
#define COURIER_INC_LOG_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * Which request events log at which level: will_send, did_send, redirected and from_cache at debug; progress
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
 *   transport   will_send, did_send, progress, redirected, finished (a request's trip);
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
    COURIER_EVENT_WILL_SEND = 1,  /* the engine took up a request courier_send accepted (see below) */
    COURIER_EVENT_DID_SEND = 2,   /* its transfer started on the wire */
    COURIER_EVENT_PROGRESS = 3,   /* bytes moved (upload or download) */
    COURIER_EVENT_FINISHED = 4,   /* it completed: just before its completion callback runs; or
                                     courier_send refused it after its interceptors (see below) */
    COURIER_EVENT_FROM_CACHE = 5, /* its answer comes from the cache, not the network */
    COURIER_EVENT_RETRIED = 6,    /* an attempt failed and another is scheduled */
    COURIER_EVENT_FROZEN = 7,     /* it was written to the journal, to be sent when online */
    COURIER_EVENT_REDIRECTED = 8  /* a 3xx is followed: the next hop is about to start */
} courier_event_kind;

/* Spans (OpenTelemetry's HTTP client spans, docs/design/tracing.md) are built from these events:
 * WILL_SEND starts one (a before-send interceptor, which runs on the sending thread before
 * it with the same request id, is where a tracer injects its context), RETRIED and REDIRECTED are
 * its events, FINISHED ends it with http_status, resend_count and error_type; traceparent and
 * tracestate carry the trace context the request goes out with. */

/* "will_send", "did_send", "progress", "finished", "from_cache", "retried", "frozen", "redirected";
 * "unknown" otherwise. Static storage. */
COURIER_API const char *courier_event_kind_name(int kind);

/* One event, borrowed for the duration of the monitor call (copy what you keep). Fields that do
 * not apply to the kind are 0 / NULL. The struct only grows at the end: `size` is its size as the
 * library knows it, so read only fields that end within it. A send has at most one WILL_SEND, and
 * every WILL_SEND of an id is followed by exactly one FINISHED of that id (a WebSocket's opening
 * handshake is a send: its FINISHED comes when the handshake ends, with the 101 as the response
 * when it opened; stream.h, courier_ws_open). A send courier_send (or courier_ws_open) refuses once its
 * before-send interceptors' turn came has one FINISHED and no WILL_SEND: code and error_type say
 * why (COURIER_E_NOT_FOUND, "not_found", for a transport not registered), no response, duration 0. */
typedef struct courier_event {
    size_t size;                      /* set by the library */
    courier_event_kind kind;
    uint64_t request_id;
    const char *method;               /* may be NULL */
    const char *url;                  /* the full URL, query included (not redacted); may be NULL;
                                         REDIRECTED: the next hop's */
    int code;                         /* FINISHED: the result; RETRIED: the failed attempt's code */
    int http_status;                  /* FINISHED, FROM_CACHE, RETRIED: the status of the response, if
                                         any; REDIRECTED: the 3xx followed */
    int attempt;                      /* RETRIED: the attempt about to start (2 for the first retry);
                                         REDIRECTED: the redirect's number (1 for the first) */
    int64_t delay_ms;                 /* RETRIED: the wait before it */
    double duration_s;                /* FINISHED: seconds since WILL_SEND (0 when unknown) */
    int64_t bytes_received;           /* PROGRESS: body bytes received so far */
    int64_t bytes_expected;           /* PROGRESS: expected body bytes, -1 when unknown */
    int64_t bytes_sent;               /* PROGRESS: body bytes sent so far */
    int64_t bytes_to_send;            /* PROGRESS: body bytes to send, -1 when unknown */
    const courier_response *response; /* FINISHED, FROM_CACHE: the response, if any */
    const courier_error *error;       /* FINISHED with a failure: the detail */
    /* Added in 0.2.1 (read them only when `size` covers them): */
    const char *traceparent;          /* the request's "traceparent" header (as it goes out, after the
                                         interceptors), or NULL; every kind but FROZEN */
    const char *tracestate;           /* its "tracestate" header, or NULL */
    int resend_count;                 /* FINISHED: retries of the final hop plus redirects followed
                                         (OpenTelemetry's http.request.resend_count); 0 for none */
    const char *error_type;           /* FINISHED with a failure: the status as decimal text ("503")
                                         when an HTTP status failed it, else courier_code_name(code)
                                         ("timeout"); NULL on success */
} courier_event;

/* A monitor. Runs on the thread where the event happens: the engine's worker thread, for every
 * kind and for sync and async sends alike (WILL_SEND when the worker takes the request up, before
 * the cache is asked), except WILL_SEND and FROZEN of a request frozen at once because the network
 * is offline (when the journal cannot keep it, a file body, the send goes on to the worker with no
 * second WILL_SEND), and FINISHED of a send refused after its interceptors, which run on the sending
 * thread inside courier_send (or courier_ws_open); possibly on
 * several threads at once; monitors run in the order they were added, before the event's log line
 * is written. Must not block for long and must not close the engine; may send requests. A
 * WebSocket handshake's FINISHED may come while the worker holds that WebSocket's I/O: do not call
 * courier_ws_take_reads, _return_reads or _read_socket of that WebSocket from it. */
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

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_LOG_H */
