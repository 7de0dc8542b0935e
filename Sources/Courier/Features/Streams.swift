// Streams.swift — responses read as they arrive (the C core's courier_stream): the head first,
// then the body as an AsyncSequence of bytes, of `Data` chunks or of lines. The C core holds the
// bounded buffer and pauses the transfer when the reader falls behind; this file only waits for its
// notify callback and reads.

internal import CCore
import Foundation

extension Engine {
    /// Sends a request and returns as soon as the response's head arrives, with its body to read
    /// as it arrives (as `URLSession.bytes(for:)` does).
    ///
    /// ```swift
    /// let (bytes, response) = try await engine.bytes(for: .get("bytes/100000"))
    /// print(response.status)
    /// for try await chunk in bytes.chunks { print(chunk.count) }
    /// ```
    ///
    /// What the engine does for a request applies until the body starts (base URL, interceptors'
    /// `adapt`, credentials, cookies, redirects, retries before the first byte of the body); the
    /// cache is not used, and a request that may be frozen or downloads to a file is refused.
    /// The head carries any status: the reader decides. The engine keeps at most
    /// ``Configuration/streamBufferBytes`` of unread body and pauses the transfer until the reader
    /// catches up. Cancelling the task that waits or iterates cancels the transfer; so does
    /// dropping the ``ResponseBytes`` before the end.
    /// - Parameter request: The request.
    /// - Returns: The body to read, and the head (status, headers, metrics so far; an empty body).
    /// - Throws: ``CourierError`` when the request fails before its head (or an error a closure of
    ///   the request threw); ``CourierError/Code/invalidArgument`` for a request that may be frozen
    ///   or downloads to a file.
    public func bytes(for request: Request) async throws -> (ResponseBytes, Response) {
        let (pointer, signal) = try openSignalled(request) { handle, creq, user, out, error in
            courier_stream_open(&out, handle, creq, streamNotify, user, releaseStreamSignal, &error)
        }
        let stream = StreamBox(pointer: pointer, signal: signal, engine: self)
        let head = try await stream.head()
        return (ResponseBytes(stream: stream), head)
    }

    /// Opens a C stream, event source or WebSocket (`courier_stream_open`, `courier_sse_open`,
    /// `courier_ws_open`: the same shape) for a request, with a ``StreamSignal`` as its notify
    /// target (which the C core releases through the user_free `open` passes, also on failure).
    func openSignalled(
        _ request: Request,
        _ open: (OpaquePointer, OpaquePointer, UnsafeMutableRawPointer, inout OpaquePointer?, inout courier_error) -> Int32
    ) throws -> (OpaquePointer, StreamSignal) {
        let signal = StreamSignal()
        let user = Unmanaged.passRetained(signal).toOpaque()
        let pointer: OpaquePointer = try request.withCRequest(on: self) { creq, _ in
            guard enter() else {
                Unmanaged<StreamSignal>.fromOpaque(user).release()
                throw CourierError(.closed, message: "the engine is closed")
            }
            defer { leave() }
            var out: OpaquePointer?
            var error = courier_error()
            let rc = open(handle, creq, user, &out, &error)
            guard rc == COURIER_OK.rawValue, let out else {
                defer { courier_error_clear(&error) }
                if let thrown = thrownError(&error) { throw thrown }
                throw CourierError(code: rc, detail: &error)
            }
            return out
        }
        return (pointer, signal)
    }

    /// Sends the request a ``Requestable`` describes as a stream: ``bytes(for:)-(Request)``.
    /// - Parameter request: The request description.
    /// - Returns: The body to read, and the head.
    /// - Throws: As ``bytes(for:)-(Request)``.
    public func bytes<R: Requestable>(for request: R) async throws -> (ResponseBytes, Response) {
        try await bytes(for: request.makeRequest())
    }
}

/// The body of a streamed response, read as it arrives: an `AsyncSequence` of its bytes, with
/// ``chunks`` (`Data` as it arrived, for throughput) and ``lines`` (text lines). Single pass: the
/// bytes are read once, by one iteration at a time.
public struct ResponseBytes: AsyncSequence, Sendable {
    /// What the sequence yields.
    public typealias Element = UInt8
    let stream: StreamBox

    /// The body's bytes, one at a time.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: StreamBox
        var chunk = Data()
        var index = 0

        /// The next byte, or nil at the end.
        /// - Returns: The byte.
        /// - Throws: ``CourierError`` when the stream failed (a cut connection is
        ///   ``CourierError/Code/partialResponse``, a cancel ``CourierError/Code/cancelled``).
        public mutating func next() async throws -> UInt8? {
            while index >= chunk.count {
                guard let next = try await stream.nextChunk() else { return nil }
                chunk = next
                index = chunk.startIndex
            }
            defer { index += 1 }
            return chunk[index]
        }
    }

    /// An iterator over the bytes.
    /// - Returns: The iterator.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }

    /// The body as `Data` chunks as they arrived (each at most what one network read handed over).
    public var chunks: Chunks { Chunks(stream: stream) }

    /// The body as lines of UTF-8 text: split at LF, a CR before it dropped, the last line given
    /// even without a line end (invalid UTF-8 becomes U+FFFD).
    public var lines: Lines { Lines(stream: stream) }

    /// Cancels the transfer: the iteration ends with ``CourierError/Code/cancelled`` once the bytes
    /// already held are read. Any thread.
    public func cancel() { stream.cancel() }

    /// Body bytes the engine holds for this stream, not yet read.
    public var buffered: Int64 { courier_stream_buffered(stream.pointer) }

    /// The whole response once the body was read to its end: status, headers, the final metrics
    /// and the redirects (an empty body). nil before the end or after a failure.
    public var response: Response? {
        guard let pointer = courier_stream_response(stream.pointer) else { return nil }
        return Response(taking: courier_response_retain(pointer)!)
    }

    /// The request id of the stream's send.
    public var requestID: RequestID { RequestID(rawValue: courier_stream_id(stream.pointer)) }

    /// The body as `Data` chunks.
    public struct Chunks: AsyncSequence, Sendable {
        /// What the sequence yields.
        public typealias Element = Data
        let stream: StreamBox

        /// The chunks' iterator.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let stream: StreamBox
            /// The next chunk, or nil at the end.
            /// - Returns: The chunk.
            /// - Throws: As ``ResponseBytes/AsyncIterator/next()``.
            public mutating func next() async throws -> Data? { try await stream.nextChunk() }
        }

        /// An iterator over the chunks.
        /// - Returns: The iterator.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }
    }

    /// The body as text lines.
    public struct Lines: AsyncSequence, Sendable {
        /// What the sequence yields.
        public typealias Element = String
        let stream: StreamBox

        /// The lines' iterator (the C core splits them: courier_stream_next_line).
        public struct AsyncIterator: AsyncIteratorProtocol {
            let stream: StreamBox

            /// The next line, or nil at the end.
            /// - Returns: The line, without its line end.
            /// - Throws: As ``ResponseBytes/AsyncIterator/next()``; ``CourierError/Code/tooLarge``
            ///   for a line over the engine's maximum response size.
            public mutating func next() async throws -> String? { try await stream.nextLine() }
        }

        /// An iterator over the lines.
        /// - Returns: The iterator.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }
    }
}

/// What the C core's notify callback wakes: a task waiting for the stream to become readable.
final class StreamSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var signaled = false
    private var waiter: CheckedContinuation<Void, Never>?

    /// The stream may have become readable (any thread).
    func fire() {
        lock.lock()
        if let waiter {
            self.waiter = nil
            lock.unlock()
            waiter.resume()
        } else {
            signaled = true
            lock.unlock()
        }
    }

    /// Forgets a signal before a read (a notification after it wakes the next wait).
    func reset() {
        lock.lock()
        signaled = false
        lock.unlock()
    }

    /// Waits until fired (at once when it was fired since the last reset).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            if signaled {
                signaled = false
                lock.unlock()
                continuation.resume()
            } else {
                waiter = continuation
                lock.unlock()
            }
        }
    }
}

private let streamNotify: courier_stream_notify_fn = { _, user in
    guard let user else { return }
    Unmanaged<StreamSignal>.fromOpaque(user).takeUnretainedValue().fire()
}

private let releaseStreamSignal: courier_user_free_fn = { user in
    guard let user else { return }
    Unmanaged<StreamSignal>.fromOpaque(user).release()
}

/// Owns a `courier_stream *` (freed, and so cancelled when unfinished, with the last reference)
/// and reads it without blocking a thread: a read that finds nothing waits for the notify callback.
/// One reader at a time, as the C core asks.
final class StreamBox: @unchecked Sendable {
    let pointer: OpaquePointer
    private let signal: StreamSignal
    private let engine: Engine

    init(pointer: OpaquePointer, signal: StreamSignal, engine: Engine) {
        self.pointer = pointer
        self.signal = signal
        self.engine = engine
    }

    // Safe against a close of the engine at the same time: the C core cancels a stream only
    // before its end, and the close ends every stream before it frees the engine.
    deinit { courier_stream_free(pointer) }

    /// Cancels the transfer.
    func cancel() { courier_stream_cancel(pointer) }

    /// Waits for the stream to become readable; a cancelled task cancels the transfer.
    private func waitReadable() async {
        await withTaskCancellationHandler {
            await signal.wait()
        } onCancel: {
            cancel()
            signal.fire()
        }
    }

    private func failure(_ rc: Int32, _ error: inout courier_error) -> any Error {
        defer { courier_error_clear(&error) }
        if let thrown = thrownError(&error) { return thrown }
        return CourierError(code: rc, detail: &error)
    }

    /// The head, waited for.
    func head() async throws -> Response {
        while true {
            signal.reset()
            var head: OpaquePointer?
            var error = courier_error()
            let rc = courier_stream_head(&head, pointer, 0, &error)
            if rc == COURIER_OK.rawValue, let head { return Response(taking: courier_response_retain(head)!) }
            if rc != COURIER_E_AGAIN.rawValue { throw failure(rc, &error) }
            if Task.isCancelled { cancel() }
            await waitReadable()
        }
    }

    /// The next line (decoded, invalid UTF-8 as U+FFFD), nil at the end.
    func nextLine() async throws -> String? {
        while true {
            signal.reset()
            var line: UnsafePointer<CChar>?
            var length = 0
            var error = courier_error()
            let rc = courier_stream_next_line(&line, &length, pointer, 0, &error)
            if rc == COURIER_OK.rawValue {
                guard let line else { return nil }
                return String(decoding: UnsafeRawBufferPointer(start: line, count: length), as: UTF8.self)
            }
            if rc != COURIER_E_AGAIN.rawValue { throw failure(rc, &error) }
            if Task.isCancelled { cancel() }
            await waitReadable()
        }
    }

    /// The next chunk (a copy), nil at the end.
    func nextChunk() async throws -> Data? {
        while true {
            signal.reset()
            var data: UnsafeRawPointer?
            var length = 0
            var error = courier_error()
            let rc = courier_stream_next(&data, &length, pointer, 0, &error)
            if rc == COURIER_OK.rawValue {
                guard length > 0, let data else { return nil }
                return Data(bytes: data, count: length)
            }
            if rc != COURIER_E_AGAIN.rawValue { throw failure(rc, &error) }
            if Task.isCancelled { cancel() }
            await waitReadable()
        }
    }
}

// MARK: - Server-sent events

/// One server-sent event.
public struct ServerSentEvent: Sendable, Hashable {
    /// The event's type: its `event` field, or "message".
    public let type: String
    /// Its data: the `data` lines joined by LF.
    public let data: String
    /// The source's last event ID when it was dispatched ("" when none was set).
    public let lastEventID: String
}

extension Engine {
    /// An event source (`text/event-stream`): the events of `request` as an `AsyncSequence`,
    /// parsed by the WHATWG HTML rules and reconnected as EventSource does (after a drop or a clean
    /// end, wait the server's `retry` time, else 3 s, and connect again with `Last-Event-ID`).
    ///
    /// ```swift
    /// for try await event in engine.events(for: .get("sse").parameter("total", "3")) {
    ///     print(event.type, event.data)
    /// }
    /// ```
    ///
    /// The sequence ends with an error when the source ends for good: a 204 or another status than
    /// 200 (``CourierError/Code/httpStatus``), a type other than `text/event-stream`
    /// (``CourierError/Code/invalidResult``); cancelling the iterating task, or ``EventSource/close()``,
    /// ends it with ``CourierError/Code/cancelled``.
    /// - Parameter request: A GET (no body; not freezable).
    /// - Returns: The source, already connecting.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidArgument`` for a body or a freeze policy).
    public func events(for request: Request) throws -> EventSource {
        let (pointer, signal) = try openSignalled(request) { handle, creq, user, out, error in
            courier_sse_open(&out, handle, creq, sseNotify, user, releaseStreamSignal, &error)
        }
        return EventSource(box: EventSourceBox(pointer: pointer, signal: signal, engine: self))
    }
}

/// An event source's events, as they arrive (single pass). Reading reconnects as needed.
public struct EventSource: AsyncSequence, Sendable {
    /// What the sequence yields.
    public typealias Element = ServerSentEvent
    let box: EventSourceBox

    /// The connection's state.
    public enum State: Sendable, Hashable {
        /// Connecting, or waiting to reconnect.
        case connecting
        /// Reading a 200 `text/event-stream`.
        case open
        /// Ended for good.
        case closed
    }

    /// The events' iterator.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let box: EventSourceBox
        /// The next event.
        /// - Returns: The event (never nil: the source ends with an error).
        /// - Throws: ``CourierError`` when the source ended for good.
        public mutating func next() async throws -> ServerSentEvent? { try await box.next() }
    }

    /// An iterator over the events.
    /// - Returns: The iterator.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(box: box) }

    /// The state now (EventSource's readyState).
    public var state: State {
        switch courier_sse_get_state(box.pointer) {
        case COURIER_SSE_OPEN: return .open
        case COURIER_SSE_CLOSED: return .closed
        default: return .connecting
        }
    }

    /// The reconnection time in force, in seconds (the server's last `retry`, else 3).
    public var retry: TimeInterval { Double(courier_sse_retry_ms(box.pointer)) / 1000 }

    /// Stops the source (any thread): no more connections; the iteration ends with
    /// ``CourierError/Code/cancelled``.
    public func close() { box.close() }
}

private let sseNotify: courier_sse_notify_fn = { _, user in
    guard let user else { return }
    Unmanaged<StreamSignal>.fromOpaque(user).takeUnretainedValue().fire()
}

/// Owns a `courier_sse *` and reads it without blocking a thread: a read that finds nothing waits
/// for the notify callback, or for the reconnection time.
final class EventSourceBox: @unchecked Sendable {
    let pointer: OpaquePointer
    private let signal: StreamSignal
    private let engine: Engine

    init(pointer: OpaquePointer, signal: StreamSignal, engine: Engine) {
        self.pointer = pointer
        self.signal = signal
        self.engine = engine
    }

    deinit { courier_sse_free(pointer) } // as StreamBox's: safe against a close at the same time

    /// Stops the source.
    func close() { courier_sse_close(pointer) }

    func next() async throws -> ServerSentEvent? {
        while true {
            signal.reset()
            var event = courier_sse_event()
            event.size = MemoryLayout<courier_sse_event>.size
            var error = courier_error()
            // The engine stays open during the call (a reconnection sends on it).
            guard engine.enter() else {
                close()
                throw CourierError(.closed, message: "the engine is closed")
            }
            let rc = courier_sse_next(&event, pointer, 0, &error)
            engine.leave()
            if rc == COURIER_OK.rawValue {
                return ServerSentEvent(
                    type: String(cString: event.type),
                    data: String(decoding: UnsafeRawBufferPointer(start: event.data, count: event.data_len), as: UTF8.self),
                    lastEventID: String(cString: event.last_event_id))
            }
            if rc != COURIER_E_AGAIN.rawValue {
                defer { courier_error_clear(&error) }
                if let thrown = thrownError(&error) { throw thrown }
                throw CourierError(code: rc, detail: &error)
            }
            let retryIn = courier_sse_retry_in_ms(pointer)
            if retryIn >= 0 {
                // Waiting to reconnect: look again when it is due (or when closed).
                let signal = self.signal
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(retryIn) + 1)) { signal.fire() }
            }
            if Task.isCancelled { close() }
            await withTaskCancellationHandler {
                await signal.wait()
            } onCancel: {
                self.close()
            }
        }
    }
}
