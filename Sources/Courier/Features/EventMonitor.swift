// EventMonitor.swift — the request lifecycle as events (Alamofire's EventMonitor, HLNetworking's
// requestWillBeSent / requestDidSent, OkHttp's EventListener), fed by the C core's monitors
// (log.c): a protocol with one method per event, a closure form, and an AsyncStream.

import Foundation
internal import CCore

// MARK: - Events

/// One moment in the life of a request.
public struct RequestEvent: Sendable {
    /// What happened.
    public enum Kind: Int32, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// The engine accepted the request (it is queued).
        case willSend = 1
        /// An attempt started on the wire.
        case didSend = 2
        /// Bytes moved.
        case progress = 3
        /// The request completed: just before its completion (or `await`) gets the result. Also a
        /// send the engine refused after the interceptors ran (a transport not registered, the
        /// frequent-request guard): on the sending thread, before the send throws, with no
        /// ``willSend`` before it and ``RequestEvent/errorType`` the refusal's name.
        case finished = 4
        /// Its answer comes from the cache, not the network.
        case fromCache = 5
        /// An attempt failed and another is scheduled.
        case retried = 6
        /// It was written to the journal, to be sent when the network returns.
        case frozen = 7
        /// A redirect is followed: the next hop is about to start (``RequestEvent/url`` is its URL,
        /// ``RequestEvent/status`` the 3xx, ``RequestEvent/attempt`` the redirect's number).
        case redirected = 8

        /// "will_send", "did_send", ..., as in the JSON log lines.
        public var description: String { String(cString: courier_event_kind_name(rawValue)) }
    }

    /// Bytes moved so far (``Kind/progress``).
    public struct Progress: Sendable, Hashable {
        /// Body bytes received.
        public let received: Int64
        /// Body bytes expected, if known.
        public let expected: Int64?
        /// Body bytes sent.
        public let sent: Int64
        /// Body bytes to send, if known.
        public let toSend: Int64?
    }

    /// What happened.
    public let kind: Kind
    /// The request's id.
    public let requestID: RequestID
    /// The method, if known.
    public let method: String?
    /// The full URL, query included (log lines redact it; events do not).
    public let url: String?
    /// ``Kind/finished``: the error when the request failed. ``Kind/retried``: the failed attempt's.
    public let error: CourierError?
    /// ``Kind/finished``, ``Kind/fromCache``, ``Kind/retried``: the HTTP status, if a response came.
    public let status: Int?
    /// ``Kind/finished``, ``Kind/fromCache``: the response, if any (the engine's, with its cache
    /// reason and status).
    public let response: Response?
    /// ``Kind/retried``: the attempt about to start (2 for the first retry).
    public let attempt: Int?
    /// ``Kind/retried``: the wait before it, in seconds.
    public let retryDelay: Double?
    /// ``Kind/finished``: seconds since ``Kind/willSend``, if known.
    public let duration: Double?
    /// ``Kind/progress``: the byte counts.
    public let progress: Progress?
    /// The request's W3C `traceparent` header as it goes out (after the interceptors), if any;
    /// nil for ``Kind/frozen``.
    public let traceParent: String?
    /// Its `tracestate` header, if any.
    public let traceState: String?
    /// ``Kind/finished``: retries of the final hop plus redirects followed (OpenTelemetry's
    /// `http.request.resend_count`).
    public let resendCount: Int?
    /// ``Kind/finished`` with a failure: a low-cardinality name of it (OpenTelemetry's
    /// `error.type`): the status as text ("503") when an HTTP status failed it, else the C core's
    /// name of the code ("timeout", "cannot_connect").
    public let errorType: String?

    /// Reads a C event (borrowed for the call).
    init(_ event: UnsafePointer<courier_event>) {
        let e = event.pointee
        kind = Kind(rawValue: Int32(e.kind.rawValue)) ?? .finished
        requestID = RequestID(rawValue: e.request_id)
        method = e.method.map { String(cString: $0) }
        url = e.url.map { String(cString: $0) }
        let hasResponse = kind == .finished || kind == .fromCache
        // A reference of its own (not a copy of the bytes): the response keeps what the C core
        // knows of it, its cache reason and status among them.
        let response = hasResponse ? e.response.flatMap { courier_response_retain($0) }.map { Response(taking: $0) } : nil
        self.response = response
        status = e.http_status != 0 ? Int(e.http_status) : nil
        if (kind == .finished || kind == .retried) && e.code != COURIER_OK.rawValue {
            error = CourierError(code: e.code, detail: e.error, response: response)
        } else {
            error = nil
        }
        attempt = kind == .retried || kind == .redirected ? Int(e.attempt) : nil
        retryDelay = kind == .retried ? Double(e.delay_ms) / 1000 : nil
        duration = kind == .finished && e.duration_s > 0 ? e.duration_s : nil
        progress = kind == .progress
            ? Progress(received: e.bytes_received, expected: e.bytes_expected >= 0 ? e.bytes_expected : nil,
                       sent: e.bytes_sent, toSend: e.bytes_to_send >= 0 ? e.bytes_to_send : nil)
            : nil
        // Fields added later: read only when the library's struct has them.
        let hasTraceFields = e.size >= MemoryLayout<courier_event>.offset(of: \courier_event.error_type)!
            + MemoryLayout<UnsafePointer<CChar>?>.size
        traceParent = hasTraceFields ? e.traceparent.map { String(cString: $0) } : nil
        traceState = hasTraceFields ? e.tracestate.map { String(cString: $0) } : nil
        resendCount = hasTraceFields && kind == .finished ? Int(e.resend_count) : nil
        errorType = hasTraceFields ? e.error_type.map { String(cString: $0) } : nil
    }
}

// MARK: - The monitor protocol

/// Receives the lifecycle events of every request of an engine it is added to
/// (``Engine/addEventMonitor(_:)``). Every method has an empty default: implement the ones you
/// need. The engine keeps the monitor until it is removed or the engine closes.
///
/// The methods run on the thread where the event happens — the engine's worker thread, for sync
/// and async sends alike (but for ``RequestEvent/Kind/willSend`` and ``RequestEvent/Kind/frozen``
/// of a request frozen at once because the network is offline, and ``RequestEvent/Kind/finished``
/// of a send refused after the interceptors ran: the sending thread) — possibly on several threads at once,
/// in the order monitors were added. Keep them quick; never close the engine from them.
public protocol EventMonitor: Sendable {
    /// The kinds this monitor wants (the others are never delivered to it). Default: all.
    var monitoredEvents: Set<RequestEvent.Kind> { get }
    /// The engine accepted a request.
    func requestWillSend(_ event: RequestEvent)
    /// An attempt started on the wire.
    func requestDidSend(_ event: RequestEvent)
    /// Bytes moved.
    func requestDidProgress(_ event: RequestEvent)
    /// A request completed (``RequestEvent/error`` says whether it failed).
    func requestDidFinish(_ event: RequestEvent)
    /// A request's answer comes from the cache.
    func requestDidLoadFromCache(_ event: RequestEvent)
    /// An attempt failed and another is scheduled.
    func requestWillRetry(_ event: RequestEvent)
    /// A request was frozen until the network returns.
    func requestWasFrozen(_ event: RequestEvent)
    /// A redirect of a request is followed.
    func requestWasRedirected(_ event: RequestEvent)
}

extension EventMonitor {
    /// All kinds.
    public var monitoredEvents: Set<RequestEvent.Kind> { Set(RequestEvent.Kind.allCases) }
    /// Does nothing.
    public func requestWillSend(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestDidSend(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestDidProgress(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestDidFinish(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestDidLoadFromCache(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestWillRetry(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestWasFrozen(_ event: RequestEvent) {}
    /// Does nothing.
    public func requestWasRedirected(_ event: RequestEvent) {}

    /// Calls the method for the event's kind.
    /// - Parameter event: The event.
    func deliver(_ event: RequestEvent) {
        switch event.kind {
        case .willSend: requestWillSend(event)
        case .didSend: requestDidSend(event)
        case .progress: requestDidProgress(event)
        case .finished: requestDidFinish(event)
        case .fromCache: requestDidLoadFromCache(event)
        case .retried: requestWillRetry(event)
        case .frozen: requestWasFrozen(event)
        case .redirected: requestWasRedirected(event)
        }
    }
}

/// A monitor made of one closure (Alamofire's ClosureEventMonitor).
public struct ClosureEventMonitor: EventMonitor {
    /// The kinds delivered.
    public let monitoredEvents: Set<RequestEvent.Kind>
    private let handler: @Sendable (RequestEvent) -> Void

    /// A monitor that gives every event of these kinds to `handler`.
    /// - Parameters:
    ///   - kinds: The kinds wanted.
    ///   - handler: Receives each event (see ``EventMonitor`` for threads).
    public init(kinds: Set<RequestEvent.Kind> = Set(RequestEvent.Kind.allCases),
                _ handler: @escaping @Sendable (RequestEvent) -> Void) {
        self.monitoredEvents = kinds
        self.handler = handler
    }

    /// Gives the event to the closure.
    public func requestWillSend(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestDidSend(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestDidProgress(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestDidFinish(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestDidLoadFromCache(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestWillRetry(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestWasFrozen(_ event: RequestEvent) { handler(event) }
    /// Gives the event to the closure.
    public func requestWasRedirected(_ event: RequestEvent) { handler(event) }
}

// MARK: - Registration

/// A monitor added to an engine, for ``Engine/removeEventMonitor(_:)``.
public struct EventMonitorToken: Hashable, Sendable {
    /// The C core's id.
    public let rawValue: UInt64
}

/// A registered monitor (`user` of `courier_monitor_add`); `onRelease` runs when the C core lets
/// it go (removed, or the engine closed). Immutable.
final class MonitorBox: @unchecked Sendable {
    let monitor: any EventMonitor
    let onRelease: (@Sendable () -> Void)?
    init(_ monitor: any EventMonitor, onRelease: (@Sendable () -> Void)? = nil) {
        self.monitor = monitor
        self.onRelease = onRelease
    }
    deinit { onRelease?() }
}

/// `courier_monitor_fn`.
private let monitorTrampoline: courier_monitor_fn = { event, user in
    guard let event, let user else { return }
    let box = Unmanaged<MonitorBox>.fromOpaque(user).takeUnretainedValue()
    box.monitor.deliver(RequestEvent(event))
}

extension Engine {
    /// Adds a monitor of every request of this engine.
    /// - Parameter monitor: The monitor; the engine keeps it until it is removed or the engine closes.
    /// - Returns: A token for ``removeEventMonitor(_:)``.
    /// - Throws: ``CourierError/Code/closed``, ``CourierError/Code/noMemory``.
    @discardableResult
    public func addEventMonitor(_ monitor: any EventMonitor) throws -> EventMonitorToken {
        try addMonitor(MonitorBox(monitor))
    }

    /// Adds a closure monitor (see ``ClosureEventMonitor``).
    /// - Parameters:
    ///   - kinds: The kinds wanted.
    ///   - handler: Receives each event.
    /// - Returns: A token for ``removeEventMonitor(_:)``.
    /// - Throws: As ``addEventMonitor(_:)-(EventMonitor)``.
    @discardableResult
    public func addEventMonitor(kinds: Set<RequestEvent.Kind> = Set(RequestEvent.Kind.allCases),
                                _ handler: @escaping @Sendable (RequestEvent) -> Void) throws -> EventMonitorToken {
        try addEventMonitor(ClosureEventMonitor(kinds: kinds, handler))
    }

    /// Removes a monitor. A call in progress on another thread may still finish after this returns.
    /// - Parameter token: The token an add returned.
    /// - Returns: Whether it was there.
    @discardableResult
    public func removeEventMonitor(_ token: EventMonitorToken) -> Bool {
        guard enter() else { return false }
        defer { leave() }
        return courier_monitor_remove(handle, token.rawValue) == COURIER_OK.rawValue
    }

    /// The engine's events as a stream, from now until the stream is dropped or the engine
    /// closes (the stream then finishes). Events are buffered without limit: consume them.
    /// - Parameter kinds: The kinds wanted.
    /// - Returns: The stream.
    public func events(_ kinds: Set<RequestEvent.Kind> = Set(RequestEvent.Kind.allCases)) -> AsyncStream<RequestEvent> {
        let (stream, continuation) = AsyncStream<RequestEvent>.makeStream()
        let monitor = ClosureEventMonitor(kinds: kinds) { continuation.yield($0) }
        do {
            let token = try addMonitor(MonitorBox(monitor, onRelease: { continuation.finish() }))
            continuation.onTermination = { [weak self] _ in self?.removeEventMonitor(token) }
        } catch {
            continuation.finish()
        }
        return stream
    }

    private func addMonitor(_ box: MonitorBox) throws -> EventMonitorToken {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        var mask: UInt32 = 0
        for kind in box.monitor.monitoredEvents { mask |= 1 << UInt32(kind.rawValue) }
        if mask == 0 { mask = 1 << 31 } // no kind: an id, but nothing delivered
        var id: UInt64 = 0
        let user = Unmanaged.passRetained(box).toOpaque()
        // On failure the C core has already released the box through user_free.
        try CourierError.check(courier_monitor_add(&id, handle, mask, monitorTrampoline, user, releaseBox), "event monitor")
        return EventMonitorToken(rawValue: id)
    }
}
