// WebSockets.swift — WebSocket clients (the C core's courier_ws, RFC 6455). The connection, the
// handshake, the framing, pings, the closing handshake and every check of what the server sends
// are the C core's, driven by the engine's worker thread; this file converts messages and errors,
// and waits for the notify callback instead of blocking a thread.

internal import CCore
import Foundation

/// How a ``WebSocket`` is opened.
public struct WebSocketOptions: Sendable, Hashable {
    /// Subprotocols offered, in order of preference (none by default).
    public var subprotocols: [String] = []
    /// The largest message received, all fragments together; a larger one fails the connection
    /// with 1009 and ``CourierError/Code/tooLarge``. Nil: 1 MiB.
    public var maxMessageBytes: Int?
    /// Keepalive: a ping after this long without a byte from the server (nil: none).
    public var pingInterval: TimeInterval?
    /// A ping's pong not back within this fails the connection with
    /// ``CourierError/Code/timeout`` (nil: the ping interval).
    public var pingTimeout: TimeInterval?
    /// After a close frame is sent, how long to wait for the server's (nil: 10 s).
    public var closeTimeout: TimeInterval?
    /// Connecting and the opening handshake together (nil: the request's timeout, else 30 s).
    public var handshakeTimeout: TimeInterval?
    /// Offers permessage-deflate (RFC 7692): when the server agrees (``WebSocket/extensions``),
    /// messages of 1 KiB or more go compressed and compressed messages are inflated. Off by default.
    public var compression = false
    /// Messages received and not yet read, at most (nil: 16 MiB): past it the socket is left unread
    /// until the reader catches up, holding the server back instead of growing memory.
    public var maxReceiveQueueBytes: Int?

    /// The defaults.
    public init() {}
}

extension Engine {
    /// Opens a WebSocket (`ws://`, `wss://`, or a path joined with the base URL) and returns once
    /// its opening handshake ended.
    ///
    /// ```swift
    /// let ws = try await engine.webSocket(.get("ws://127.0.0.1:8765/chat"))
    /// try await ws.send("hello")
    /// for try await message in ws { print(message) }   // ends when the closing handshake ends
    /// ```
    ///
    /// The request's headers, credentials (Basic), security policy and the engine's cookies go into
    /// the handshake; the engine's TLS policy and proxies make the connection.
    /// - Parameters:
    ///   - request: A GET of the URL (no body; not freezable).
    ///   - options: Subprotocols, sizes and times.
    /// - Returns: The open WebSocket.
    /// - Throws: ``CourierError/Code/wsHandshake`` (no 101: `httpStatus`; a wrong
    ///   `Sec-WebSocket-Accept`; a subprotocol or extension not offered), the connection's failure
    ///   (``CourierError/Code/cannotConnect``, ``CourierError/Code/tls``...),
    ///   ``CourierError/Code/invalidArgument`` for a request with a body or a bad subprotocol.
    public func webSocket(_ request: Request, options: WebSocketOptions = WebSocketOptions()) async throws -> WebSocket {
        var o = courier_ws_options()
        o.size = MemoryLayout<courier_ws_options>.size
        courier_ws_options_init(&o)
        func ms(_ t: TimeInterval?) -> Int64 { t.map { max(1, Int64(($0 * 1000).rounded())) } ?? 0 }
        if let max = options.maxMessageBytes { o.max_message_bytes = Int64(max) }
        o.ping_interval_ms = ms(options.pingInterval)
        o.ping_timeout_ms = ms(options.pingTimeout)
        if options.closeTimeout != nil { o.close_timeout_ms = ms(options.closeTimeout) }
        o.handshake_timeout_ms = ms(options.handshakeTimeout)
        o.compression = options.compression ? 1 : 0
        if let max = options.maxReceiveQueueBytes { o.max_receive_queue_bytes = Int64(max) }
        let protocols = options.subprotocols.joined(separator: ", ")
        let (pointer, signal) = try openSignalled(request) { handle, creq, user, out, error in
            protocols.withCString { p -> Int32 in
                o.subprotocols = protocols.isEmpty ? nil : p
                return courier_ws_open(&out, handle, creq, &o, webSocketNotify, user, releaseWebSocketSignal, &error)
            }
        }
        let ws = WebSocket(pointer: pointer, signal: signal, engine: self)
        try await ws.waitOpen()
        return ws
    }
}

/// A WebSocket (RFC 6455): ``send(_:)-(String)`` text or data, and its messages as an
/// `AsyncSequence` (one iteration at a time) or with ``receive()``. The iteration ends when the
/// closing handshake ends (``closeCode`` and ``closeReason`` tell how); other ends throw:
/// ``CourierError/Code/wsProtocolError`` (the server broke the protocol; ``closeCodeSent`` is
/// 1002 or 1007), ``CourierError/Code/tooLarge`` (1009), ``CourierError/Code/network`` (dropped
/// without a close frame: 1006), ``CourierError/Code/timeout``, ``CourierError/Code/closed``
/// (the engine closed). Dropping the last reference cuts the connection without a close frame:
/// ``close(code:reason:)`` first for a clean end.
///
/// The engine's worker thread reads the socket. A task on the global executor that waits for a
/// message is resumed on a thread of the pool, woken for it. For a loop that answers each message
/// at once (a request-reply protocol, a game's ticks), run it on the engine's executor instead,
/// where messages arrive: the worker reads a message, runs the task and writes its reply before it
/// polls again, with no thread woken in between (an event loop's pace; the figures are in
/// Benchmarks/README.md). Keep what runs there short (see ``EngineTaskExecutor``):
///
/// ```swift
/// try await withTaskExecutorPreference(engine.taskExecutor) {
///     let ws = try await engine.webSocket(.get("ws://127.0.0.1:8765/game"))
///     for try await message in ws {
///         if case .text(let tick) = message { try await ws.send("ack \(tick)") }
///     }
/// }
/// ```
// @unchecked Sendable: the C WebSocket is thread-safe for sends, getters and close; reads are one
// at a time, as the C core asks (documented on the iteration).
public final class WebSocket: AsyncSequence, @unchecked Sendable {
    /// A message.
    public enum Message: Sendable, Hashable {
        /// A text message.
        case text(String)
        /// A binary message.
        case data(Data)
    }

    /// The connection's state (the browser's readyState).
    public enum State: Sendable, Hashable {
        /// Connecting, or in the opening handshake.
        case connecting
        /// Messages flow both ways.
        case open
        /// A close frame was sent or received; the closing handshake is not over.
        case closing
        /// Ended.
        case closed
    }

    /// What the sequence yields.

    public typealias Element = Message

    let pointer: OpaquePointer
    private let signal: StreamSignal
    private let engine: Engine
    private var first: Message? // read while waiting for the handshake's end (by the one reader)

    init(pointer: OpaquePointer, signal: StreamSignal, engine: Engine) {
        self.pointer = pointer
        self.signal = signal
        self.engine = engine
    }

    // Safe against a close of the engine at the same time: courier_ws_free touches the engine only
    // while the WebSocket is not closed, and the close ends every WebSocket before it frees it.
    deinit { courier_ws_free(pointer) }

    /// The state now.
    public var state: State {
        switch courier_ws_get_state(pointer) {
        case COURIER_WS_OPEN: return .open
        case COURIER_WS_CLOSING: return .closing
        case COURIER_WS_CLOSED: return .closed
        default: return .connecting
        }
    }

    /// The subprotocol the server chose, or nil.
    public var subprotocol: String? {
        let p = String(cString: courier_ws_protocol(pointer))
        return p.isEmpty ? nil : p
    }

    /// The extension the server agreed to (`"permessage-deflate; ..."`), "" for none.
    public var extensions: String { String(cString: courier_ws_extensions(pointer)) }

    /// Bytes of messages received and not yet read (bounded by
    /// ``WebSocketOptions/maxReceiveQueueBytes``).
    public var unreadBytes: Int { Int(courier_ws_unread_bytes(pointer)) }

    /// The server's close code (1005: its close frame had none; 1006: no close frame); nil while open.
    public var closeCode: Int? {
        let c = Int(courier_ws_close_code(pointer))
        return c == 0 ? nil : c
    }

    /// The reason the server gave with its close code ("" none).
    public var closeReason: String { String(cString: courier_ws_close_reason(pointer)) }

    /// The close code sent (yours, an echo of the server's, or the one the connection was failed
    /// with); nil when none was.
    public var closeCodeSent: Int? {
        let c = Int(courier_ws_close_code_sent(pointer))
        return c == 0 ? nil : c
    }

    /// Sends a message: queued to the engine's worker, which writes it when the socket takes it;
    /// returns once it is queued (waiting while the send queue is full), not when the server has it.
    /// - Parameter message: The message.
    /// - Throws: ``CourierError/Code/wsClosed`` once closing or closed.
    public func send(_ message: Message) async throws {
        while true {
            var error = courier_error()
            let rc: Int32
            switch message {
            case .text(let text):
                var text = text
                rc = text.withUTF8 { courier_ws_send(pointer, COURIER_WS_TEXT, $0.baseAddress, $0.count, &error) }
            case .data(let data):
                rc = data.withUnsafeBytes { courier_ws_send(pointer, COURIER_WS_BINARY, $0.baseAddress, $0.count, &error) }
            }
            if rc == COURIER_OK.rawValue { return }
            defer { courier_error_clear(&error) }
            if rc != COURIER_E_AGAIN.rawValue { throw CourierError(code: rc, detail: &error) }
            try await Task.sleep(nanoseconds: 5_000_000) // the queue is full: the worker is writing
        }
    }

    /// Sends a text message, as `send(.text(text))`.
    /// - Parameter text: The text.
    /// - Throws: As `send(_ message: Message)`: ``CourierError/Code/wsClosed`` once closing or closed.
    public func send(_ text: String) async throws { try await send(.text(text)) }

    /// Sends a binary message, as `send(.data(data))`.
    /// - Parameter data: The bytes.
    /// - Throws: As `send(_ message: Message)`: ``CourierError/Code/wsClosed`` once closing or closed.
    public func send(_ data: Data) async throws { try await send(.data(data)) }

    /// Starts the closing handshake: a close frame with `code` (1000, 1001, 1002, 1003, 1007-1011,
    /// 3000-4999) and `reason` (at most 123 bytes of UTF-8), after the messages already sent. Keep
    /// reading: the iteration ends once the server's close came (or after the close timeout).
    /// - Parameters:
    ///   - code: The close code.
    ///   - reason: The reason.
    /// - Throws: ``CourierError/Code/invalidArgument`` for a code that may not be sent or a reason
    ///   too long; nothing when it was closing or closed already.
    public func close(code: Int = 1000, reason: String = "") throws {
        let rc = reason.isEmpty ? courier_ws_close(pointer, Int32(code), nil)
            : reason.withCString { courier_ws_close(pointer, Int32(code), $0) }
        if rc == COURIER_E_INVALID_ARGUMENT.rawValue {
            throw CourierError(.invalidArgument, message: "close code \(code) or its reason may not be sent")
        }
    }

    /// The next message.
    /// - Returns: The message.
    /// - Throws: ``CourierError/Code/wsClosed`` once the closing handshake ended, or the end's
    ///   failure (see the type).
    public func receive() async throws -> Message {
        if let message = first {
            first = nil
            return message
        }
        while true {
            signal.reset()
            if let message = try next() { return message }
            await withTaskCancellationHandler {
                await signal.wait()
            } onCancel: { [signal] in
                signal.fire()
            }
            try Task.checkCancellation()
        }
    }

    /// The next message without waiting: nil when none yet; throws the end.
    private func next() throws -> Message? {
        var m = courier_ws_message()
        m.size = MemoryLayout<courier_ws_message>.size
        var error = courier_error()
        let rc = courier_ws_next(&m, pointer, 0, &error)
        if rc == COURIER_OK.rawValue {
            let bytes = UnsafeRawBufferPointer(start: m.data, count: m.len)
            return m.type == COURIER_WS_TEXT ? .text(String(decoding: bytes, as: UTF8.self)) : .data(Data(bytes))
        }
        if rc == COURIER_E_AGAIN.rawValue { return nil }
        defer { courier_error_clear(&error) }
        throw CourierError(code: rc, detail: &error)
    }

    /// Waits until the opening handshake ended; throws its failure when it ended the WebSocket
    /// before any message (one that came first is kept for ``receive()``).
    func waitOpen() async throws {
        while true {
            signal.reset()
            switch state {
            case .connecting:
                await signal.wait()
            case .closed:
                do {
                    first = try next()
                } catch let error as CourierError where [.wsClosed, .tooLarge, .wsProtocolError].contains(error.code) {
                    // Opened, then ended at once (closed by the server, or a first message over
                    // the maximum or breaking the protocol): the iteration says how (the C core
                    // gives the same end again).
                }
                return
            default:
                return
            }
        }
    }

    /// The messages' iterator: nil once the closing handshake ended.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let ws: WebSocket
        /// The next message.
        /// - Returns: The message, or nil once the closing handshake ended.
        /// - Throws: The end's failure (see ``WebSocket``).
        public mutating func next() async throws -> Message? {
            do {
                return try await ws.receive()
            } catch let error as CourierError where error.code == .wsClosed {
                return nil
            }
        }
    }

    /// An iterator over the messages (one iteration at a time).
    /// - Returns: The iterator.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(ws: self) }
}

private let webSocketNotify: courier_ws_notify_fn = { _, user in
    guard let user else { return }
    Unmanaged<StreamSignal>.fromOpaque(user).takeUnretainedValue().fire()
}

private let releaseWebSocketSignal: courier_user_free_fn = { user in
    guard let user else { return }
    Unmanaged<StreamSignal>.fromOpaque(user).release()
}
