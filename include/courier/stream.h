/*
 * courier/stream.h — streamed responses, server-sent events and WebSocket.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_STREAM_H
#define COURIER_INC_STREAM_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * be NULL) is called as above, and user_free (may be NULL) once, after the last notify, when the
 * stream is released: by courier_stream_free, or just after it on the worker when the send was
 * still finishing (its end already delivered) as the stream was freed.
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
/* The next line of the body, waiting at most timeout_ms for it (0, -1 as above). COURIER_OK with
 * *out_line set: the line without its line end (split at LF; a CR before the LF dropped; never at a
 * lone CR or U+2028), *out_len its bytes, NUL-terminated, borrowed until the next read or
 * courier_stream_free; the last line is given even without a line end. COURIER_OK with *out_line NULL:
 * the body ended. COURIER_E_AGAIN: no whole line yet (what came is kept for the next call).
 * COURIER_E_TOO_LARGE: a line longer than the engine's maximum response size
 * (courier_config_set_max_response_bytes). Other codes as courier_stream_next (a partial last line
 * before a failure is not given). Bytes gathered for a line are read by line reads only: do not mix
 * them with courier_stream_next or _read on one stream. */
COURIER_API int courier_stream_next_line(const char **out_line, size_t *out_len, courier_stream *stream,
                                         int64_t timeout_ms, courier_error *err);
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
 * and the reader gets the error after the messages that came before it. One extension may be
 * offered, permessage-deflate (RFC 7692), by an option (`compression`): when the server accepts it,
 * messages of 1 KiB or more are sent compressed and compressed messages are inflated (at most
 * max_message_bytes out: a larger one fails with 1009; data that does not inflate with 1007).
 * Received messages wait for the reader in a bounded queue (max_receive_queue_bytes): past it the
 * engine leaves the socket unread until the reader catches up, so a slow reader holds the server
 * back (TCP's flow control) instead of growing memory.
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
 * sends; sends are queued to the worker, which writes them when the socket takes them, except that
 * on a ws:// connection with no proxy, when nothing of the WebSocket waits to be written, a message
 * of 64 KiB or less is written by the sending thread itself (one non-blocking send(2); the rest,
 * if the socket took only part, goes to the worker). */
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
    int64_t max_receive_queue_bytes; /* messages received and not yet read: when they reach this the
                                        socket is left unread until they fall to half (default 16 MiB;
                                        one message may pass it) */
    int compression;            /* 1: offer permessage-deflate (RFC 7692, "client_max_window_bits");
                                   courier_ws_extensions says what the server agreed. 0 (default):
                                   no extension offered */
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
 * COURIER_E_WS_HANDSHAKE. The opening handshake is a send to the engine's monitors and log sinks
 * (log.h): the before-send interceptors run for it here (its id is the events'), a refusal here
 * once they ran has a COURIER_EVENT_FINISHED as courier_send's has; else WILL_SEND and DID_SEND on
 * the worker, and exactly one FINISHED there when the handshake ends, before the WebSocket is
 * seen open or ended: COURIER_OK with the 101 as its response (http_status 101), or the code the
 * WebSocket ends with (COURIER_E_CANCELLED when closed or freed before it opened,
 * COURIER_E_CLOSED when the engine closed; http_status the refusing status, no response). Its
 * method and URL are the request's as prepared (ws:// as http://). Messages and the closing
 * handshake have no events. Any thread; on failure user_free (if any) has been called. */
COURIER_API int courier_ws_open(courier_ws **out, courier_engine *engine, const courier_request *request,
                                const courier_ws_options *options, courier_ws_notify_fn notify, void *user,
                                courier_user_free_fn user_free, courier_error *err);
/* Queues a message (data copied; len 0 allowed), or writes it on the calling thread (see above):
 * never waits for the socket. Returns when it is queued or written, not when the server has it:
 * messages go out in the order sent. Any thread. Errors: COURIER_E_INVALID_ARGUMENT
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
 * call returns COURIER_E_INVALID_ARGUMENT on the engine's worker thread. On ws:// with no proxy a waiting
 * call reads the socket on the calling thread (the reads become the caller's, as with
 * courier_ws_take_reads, and stay so: the worker still reads once a second, answering pings). */
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
/* The extension the server agreed to ("permessage-deflate" with its parameters as the server gave
 * them; "" none), once the handshake ended ("" before). Borrowed until courier_ws_free. Any thread. */
COURIER_API const char *courier_ws_extensions(const courier_ws *ws);
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
/* Bytes of messages received and not yet read (bounded by max_receive_queue_bytes and one message).
 * Any thread. */
COURIER_API int64_t courier_ws_unread_bytes(const courier_ws *ws);
/* Reading on the caller's event loop (docs/design/ws-reads.md). By default the engine's worker reads
 * the socket and the notify tells the reader; an event loop (asyncio's add_reader, epoll, kqueue)
 * can instead read it on its own thread as soon as it is readable, with no thread in between:
 *
 *   courier_ws_take_reads: the reads become the caller's, and *out_fd (set to -1 on failure) is a
 *     descriptor of the connection's socket to watch for readability only (never read, write or
 *     close it; it is the WebSocket's, closed by courier_ws_free: stop watching it before). The
 *     worker then no longer watches the socket for reading; keep acting on the notify too: what
 *     the worker read before it saw the reads taken (it may be waiting on the socket then) comes
 *     through it, as do the ends the worker finds (timeouts). COURIER_OK, or COURIER_E_AGAIN when
 *     the reads cannot be the caller's now: not open yet, closing or ended, or a connection whose
 *     frames do not reach the socket as they are (wss://, through a proxy); the notify and
 *     courier_ws_next work as before then. COURIER_E_INVALID_ARGUMENT for NULL, COURIER_E_INTERNAL
 *     when the descriptor could not be made.
 *   courier_ws_read_socket: call it when the descriptor is readable: reads what the socket holds on
 *     this thread, queueing the messages for courier_ws_next (timeout 0) without a notify. Pings
 *     are answered and the closing handshake carried on by the worker, as before. COURIER_OK: keep
 *     watching. COURIER_E_AGAIN: the reads went back to the worker (the connection is ending or
 *     failed, or the receive queue is at max_receive_queue_bytes, or they were given back): stop
 *     watching, read the messages queued, and wait for the notify as without the reads.
 *   courier_ws_return_reads: the reads go back to the worker, which reads from then on (call it
 *     when the loop stops watching: while nobody reads the socket, pings wait unanswered and the
 *     server's messages unread). COURIER_OK (also when they were not the caller's). A
 *     courier_ws_next that waits (timeout not 0) returns them by itself first.
 *
 * One thread at a time (the loop's); not from the notify, which runs on the engine's worker. */
COURIER_API int courier_ws_take_reads(int *out_fd, courier_ws *ws);
COURIER_API int courier_ws_read_socket(courier_ws *ws);
COURIER_API int courier_ws_return_reads(courier_ws *ws);
/* Releases the WebSocket. One still open is dropped at once, without a close frame (close first
 * and read until COURIER_E_WS_CLOSED for a clean end). Not while another thread reads it. Accepts
 * NULL. Call it before courier_engine_close, or after (the close ends every WebSocket with
 * COURIER_E_CLOSED; it stays readable). Any thread. */
COURIER_API void courier_ws_free(courier_ws *ws);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_STREAM_H */
