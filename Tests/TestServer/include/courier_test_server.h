/*
 * courier_test_server.h — a small, real HTTP/1.1 server used by Courier's tests
 * (C, Swift and Python) and by the `courier demo` / `courier serve` commands.
 *
 * The server listens on one TCP socket and runs one thread per connection.
 * Connections are persistent by default (HTTP/1.1 keep-alive), requests may be
 * pipelined, and request bodies may use Content-Length or chunked transfer
 * coding. It has no global state: several servers can run in one process.
 *
 * Limits: at most 64 KiB of request line + header bytes (else 431 and close),
 * at most 64 MiB of request body (else 413 and close). A malformed request gets
 * 400 and the connection is closed. Responses are HTTP/1.1 with a Content-Length
 * except where noted; "Connection: close" is sent when the server closes after
 * the response. HEAD requests get the same headers as GET and no body. Idle
 * keep-alive connections never time out (they are closed by the client or by stop).
 *
 * Endpoints (the path is matched without its query string; any method):
 *   /session/token         issues a new bearer token "tok-<n>" (n from 1): 200 {"token":...};
 *                          from then on the only one /session/protected accepts.
 *   /session/protected     200 {"ok":true,"token":T} with "Authorization: Bearer T" (the last
 *                          token issued), else 401 (WWW-Authenticate: Bearer) {"ok":false}.
 *   /echo, /echo/...       200 JSON {"method","path","query","headers":[[name,value],...],
 *                          "body","body_length","connection"}. Strings are byte strings:
 *                          control bytes and every byte >= 0x80 appear as \u00XX, so each
 *                          JSON character stands for exactly one byte received. "path" and
 *                          "query" are as received (not percent-decoded; query is "" if
 *                          absent); "connection" is the request's number on its connection
 *                          (1 for the first).
 *   /problem/{code}        that status with {"error":{"code":<code>01,"message":"problem <code>"}}
 *                          (an error document, for response descriptors)
 *   /status/{code}         that status (200..599) with body {"status":code}; 204 and 304
 *                          have neither body nor Content-Length.
 *   /delay/{ms}            waits ms milliseconds (cut short by stop), then {"delayed":ms}.
 *   /bytes/{n}             n bytes of application/octet-stream, byte i = i % 251;
 *                          with ?chunked=1 sent chunked in 16 KiB chunks (no Content-Length).
 *                          ETag "bytes-{n}"; honours Range: bytes=A- / bytes=A-B (206 with
 *                          Content-Range; 416 past the end) unless If-Range names another tag;
 *                          ?rate=B sends about B bytes a second (a chunk every 100 ms).
 *   /close-mid-body        200 with Content-Length: 1000, sends 100 bytes (i % 251), then
 *                          closes (FIN; no "Connection: close" header, to look like a crash).
 *   /hang                  reads the request and never answers (until stop or client close).
 *   /reset                 closes with SO_LINGER {1,0}: the client sees a TCP reset.
 *   /headers?N=V&N2=V2     200 {} and each query pair (percent-decoded, '+' = space) as a
 *                          response header, in order. A pair named Content-Type replaces the
 *                          default one. 400 if a name is not an HTTP token or a value holds
 *                          CR, LF or NUL.
 *   /redirect?to=X         302 with "Location: X" (percent-decoded), empty body.
 *                          Optional &status=301|302|303|307|308 picks the status.
 *   /redirect-chain/{n}    302 to /redirect-chain/{n-1}; /redirect-chain/0 is 200 {"chain":0}.
 *   /etag/{tag}            ETag: "{tag}", Cache-Control: max-age=0; 304 without body if
 *                          If-None-Match contains "{tag}" (or is *), else 200 {"etag":"{tag}"}.
 *   /cache?max_age=N&etag=T&last_modified=D&vary=H&body=B
 *                          200 with Cache-Control: max-age=N, ETag: "T", Last-Modified: D,
 *                          Vary: H (each only if given). 304 when If-None-Match contains
 *                          "T"; or, with no If-None-Match, when If-Modified-Since equals D.
 *                          Body: B (text/plain) if given, else JSON {"n":<path count of /cache,
 *                          this request included>,"vary":"<request header named H, or empty>"}.
 *   /origin/{name}?N=V&... an origin for the HTTP caching tests (count it by its path): each
 *                          pair is a response header, in order, except pairs whose name starts
 *                          with '_': _status=S (default 200), _body=B (text/plain; default
 *                          "n=<path count, this request included>"), _gzip=1 (the body is the
 *                          gzip of "decoded body"; set Content-Encoding yourself), "_304.N=V"
 *                          and "_head.N=V" (header N only on a 304 / a HEAD answer, replacing a
 *                          plain N). 304 without body when If-None-Match lists the ETag pair's
 *                          value, or, with no If-None-Match, If-Modified-Since equals the
 *                          Last-Modified pair. No Date header unless a pair sets one.
 *   /count                 {"requests":N,"connections":M} (this request included).
 *   /json                  a fixed small JSON document.
 *   /slow-body/{ms}        Content-Length: 100; sends 50 bytes, waits ms, sends 50 more.
 *                          Body byte i = 'a' + i % 26 (text/plain).
 *   /sse?per=P&total=T&retry=MS&gap=MS
 *                          server-sent events (text/event-stream, Connection: close): an
 *                          optional "retry: MS" field, then P events (default 3), each
 *                          "id: N", "event: tick", "data: event N", "data: line two", numbered
 *                          from the request's Last-Event-ID + 1, GAP ms apart; then a clean
 *                          close. With T, no event past id T, and 204 once Last-Event-ID >= T.
 *                          With no gap, events go out in 16 KiB writes as fast as the client
 *                          reads (per up to 1000000: the benchmarks' rate-unlimited mode).
 *   /ws/echo               a WebSocket (RFC 6455) echo server: a GET with Upgrade: websocket,
 *                          Connection: Upgrade, a 24-character Sec-WebSocket-Key and
 *                          Sec-WebSocket-Version: 13 gets 101 with Sec-WebSocket-Accept (no
 *                          subprotocol, no extension; else 400, or 426 for another version). Then
 *                          each data frame comes back as it came (opcode and FIN kept, so a
 *                          fragmented message is echoed frame by frame), unmasked; 7-, 16- and
 *                          64-bit lengths, frames up to 64 MiB (else close 1009). A ping gets a
 *                          pong with its payload, a pong is ignored, a close gets a close with the
 *                          peer's code (no reason) and the server closes. A protocol error (an
 *                          unmasked frame, RSV bits, an unknown opcode, a control frame over 125
 *                          bytes or fragmented, a continuation out of place, a 1-byte close) gets
 *                          a close with 1002 and the server closes.
 *   /text?type=T&hex=H     200 with the bytes H (hex digits) as its body and Content-Type T
 *                          (none without type): text in other charsets.
 *   /raw/{name}            raw bytes that break HTTP, then close (framing tests):
 *                          unterminated-headers (status line + "Cache-Control: max-age=600",
 *                          no blank line), status-only, two-content-length (5 and 7),
 *                          same-content-length (5 and 5, body "hello"), icy ("ICY 200 OK"),
 *                          binary, negative-status ("-200"), long-status (20 digits),
 *                          bad-gzip (Content-Encoding: gzip over plain bytes), empty (nothing),
 *                          big-header/{n} (a 200 with one header line of n value bytes).
 *   /cookies/set?N=V&...   302 to /cookies with "Set-Cookie: N=V; Path=/" per pair.
 *   /cookies/delete?N&...  302 to /cookies with "Set-Cookie: N=; Max-Age=0; Path=/" per name.
 *   /cookies               200 {"cookie":"<the request's Cookie header, or empty>"}.
 *   /basic-auth/{u}/{p}    200 {"authenticated":true,"user":U,"scheme":"Basic"} when Authorization
 *                          is Basic for u:p, else 401 with WWW-Authenticate: Basic realm="courier".
 *   /digest-auth/{u}/{p}   the same for Digest (RFC 7616, MD5, qop=auth, or RFC 2069 without qop):
 *                          the answer is checked (username, realm, nonce, uri = this request's
 *                          target, response); "scheme":"Digest".
 *   /any-auth/{u}/{p}      offers Digest and Basic (two challenges), accepts either.
 *   /ntlm-start            offers NTLM; 200 {"ntlm_negotiate":true} once an NTLM
 *                          negotiate message (type 1) comes, else 401.
 *   As a forward proxy: a request in absolute-form ("GET http://host/path") is served by its path;
 *                          /echo adds "proxy_target" (the absolute target). A host starting with
 *                          "proxy-auth." needs Proxy-Authorization: Basic for proxyuser:proxypass,
 *                          else 407 with Proxy-Authenticate: Basic realm="proxy".
 *   As a SOCKS5 proxy: a connection that starts with a SOCKS5 greeting (no authentication, or
 *                          username/password) gets "connected" to the server itself and then served
 *                          HTTP; /echo adds "socks" ("host:port" asked for) and "socks_user"
 *                          ("user:pass", or ""). A host starting with "refuse." is answered
 *                          "connection refused" (reply 5) and the connection closed.
 *   anything else          404 {"error":"not found"}.
 * A malformed number in a path ("/delay/x") gets 400 {"error":"bad parameter"}.
 */
#ifndef COURIER_TEST_SERVER_H
#define COURIER_TEST_SERVER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque server handle. */
typedef struct cts_server cts_server;

/*
 * Starts a server listening on `host` (a numeric address or a name; NULL means
 * "127.0.0.1") and `port` (0 = a free port chosen by the OS). The server starts
 * accepting immediately on its own thread.
 *
 * Returns 0 and stores a new server in *out, which the caller owns and must
 * release with cts_server_stop(). On failure returns a negative errno value
 * (-EINVAL for bad arguments or an unresolvable host, -EADDRINUSE, ...) and sets
 * *out to NULL (if out is not NULL).
 */
int cts_server_start(cts_server **out, const char *host, int port);

/* The TCP port the server listens on (useful after starting with port 0).
   Never changes; safe from any thread. */
int cts_server_port(const cts_server *s);

/* Number of requests fully parsed (request line, headers and body) since start
   or the last reset. Atomic; safe from any thread. */
long cts_server_request_count(cts_server *s);

/* Number of connections accepted since start or the last reset. Atomic; safe from
   any thread. */
long cts_server_connection_count(cts_server *s);

/* The most requests the server was answering at once (parsed, response not yet
   sent: a /delay parked counts) since start or the last reset, which sets it to
   the number in flight then. Atomic; safe from any thread. Lets a test prove a
   client never had more than N requests on the wire without sleeping. */
long cts_server_max_in_flight(cts_server *s);

/* The requests the server is answering now (parsed, response not yet sent). */
long cts_server_in_flight(cts_server *s);

/* Number of fully parsed requests whose path (without the query string, as
   received) equals `path` exactly, since start or the last reset. Returns 0 for a
   NULL path. Safe from any thread; `path` is only read during the call. */
long cts_server_path_count(cts_server *s, const char *path);

/* Sets the request, connection and per-path counters to zero. Does not affect
   the per-connection request numbers reported by /echo. Safe from any thread. */
void cts_server_reset_counts(cts_server *s);

/*
 * Stops the server: closes the listener, wakes and shuts down every open
 * connection (including ones parked in /hang, /delay or /slow-body, or idle
 * between keep-alive requests), joins every thread and frees everything.
 * Returns promptly (it does not wait for delays to elapse). Accepts NULL.
 * Must be called exactly once per server, and not concurrently with any other
 * call on the same server; `s` is invalid afterwards.
 */
void cts_server_stop(cts_server *s);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_TEST_SERVER_H */
