// Transports.swift — custom transports (HTNetworking's request types, `registerClass`) in Swift:
// a `Transport` protocol with one async method, registered under a name on a configuration, and
// `Request.transport(_:)` to send a request through it. The C core routes the request, applies
// retry, the cache, interceptors, validation and mapping to what the transport answers, and asks
// it to cancel; this file turns each C call into a Swift task and its outcome back into a C one.

import Foundation
internal import CCore

// MARK: - The call

/// One request handed to a custom ``Transport``: the final request after parameters, defaults,
/// customize hooks and interceptors. A copy: it may be kept after the call ends.
public struct TransportCall: Sendable {
    /// The id of the send.
    public let requestID: RequestID
    /// The method.
    public let method: String
    /// The final URL, query included.
    public let url: String
    /// Every header line, in order.
    public let headers: HTTPHeaders
    /// The body (empty when there is none).
    public let body: Data
    /// The request's timeout, in seconds; the transport should give up (throw
    /// ``CourierError/Code/timeout``) once it has passed.
    public let timeout: Double

    /// Creates a call (for tests of transports; the engine makes real ones).
    /// - Parameters:
    ///   - requestID: The id of the send.
    ///   - method: The method.
    ///   - url: The URL.
    ///   - headers: The header lines.
    ///   - body: The body.
    ///   - timeout: The timeout, in seconds.
    public init(requestID: RequestID = .invalid, method: String, url: String, headers: HTTPHeaders = [],
                body: Data = Data(), timeout: Double = Configuration.defaultTimeout) {
        self.requestID = requestID
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }

    /// The value of the first header line with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func header(_ name: String) -> String? { headers.first(named: name) }

    /// Copies a borrowed `courier_call *`.
    init(call: OpaquePointer) {
        requestID = RequestID(rawValue: courier_call_request_id(call))
        method = String(borrowedCString: courier_call_method(call))
        url = String(borrowedCString: courier_call_url(call))
        headers = HTTPHeaders(count: courier_call_header_count(call)) { courier_call_header_at(&$1, &$2, call, $0) }
        var length = 0
        let bytes = courier_call_body(call, &length)
        body = bytes.map { Data(bytes: $0, count: length) } ?? Data()
        timeout = Double(courier_call_timeout_ms(call)) / 1000
    }
}

// MARK: - The protocol

/// Sends requests some other way than the engine's HTTP (a private TCP protocol, an in-process
/// service, a test double): HTNetworking's request types. Register it under a name
/// (``Configuration/transport(_:_:)``) and send requests through it with ``Request/transport(_:)``;
/// retry, the cache, interceptors, the validator and mapping apply to its answers unchanged.
///
/// Each call runs in its own task. Cancelling the request (by id, task cancellation, the engine
/// closing) cancels that task: check `Task.isCancelled` or use cancellable waits, and throw
/// `CancellationError` (or ``CourierError/Code/cancelled``). Closing an engine waits until every
/// call it started has returned.
public protocol Transport: Sendable {
    /// Sends one request and returns its answer.
    /// - Parameter call: The request.
    /// - Returns: The answer: its status (100...999), header lines and body are used; the URL and
    ///   method are the request's unless the response names its own.
    /// - Throws: A ``CourierError`` to fail the request with its code (its message and any
    ///   attached response are kept); `CancellationError` for ``CourierError/Code/cancelled``; any
    ///   other error fails it with ``CourierError/Code/network`` (retried as one) and the error's
    ///   description as the message. `send` and `sendSync` rethrow the error thrown itself.
    func send(_ call: TransportCall) async throws -> Response
}

/// A transport made of one closure.
public struct ClosureTransport: Transport {
    private let body: @Sendable (TransportCall) async throws -> Response

    /// A transport that answers each call with `send`.
    /// - Parameter send: Sends one request (see ``Transport/send(_:)``).
    public init(_ send: @escaping @Sendable (TransportCall) async throws -> Response) { self.body = send }

    /// Calls the closure.
    /// - Parameter call: The request.
    /// - Returns: The closure's answer.
    /// - Throws: What the closure throws.
    public func send(_ call: TransportCall) async throws -> Response { try await body(call) }
}

// MARK: - Registration

extension Configuration {
    /// Transports registered by name, which requests choose with ``Request/transport(_:)``
    /// (a closure works too: `configuration.transports["mem"] = ClosureTransport { call in ... }`).
    /// Opening an engine fails with ``CourierError/Code/invalidArgument`` for an empty name or
    /// "http" (the built-in one). Default none.
    public var transports: [String: any Transport] {
        get {
            var all: [String: any Transport] = [:]
            for case let option as TransportOption in options { all[option.name] = option.transport }
            return all
        }
        set {
            options.removeAll { $0 is TransportOption }
            for name in newValue.keys.sorted() {
                options.append(TransportOption(name: name, transport: newValue[name]!))
            }
        }
    }

    /// Deprecated: set an entry of ``transports`` (`configuration.transports[name] = transport`).
    /// - Parameters:
    ///   - name: The name requests use (``Request/transport(_:)``).
    ///   - transport: The transport.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.transports[name] = transport")
    public func transport(_ name: String, _ transport: any Transport) -> Configuration {
        with { $0.transports[name] = transport }
    }

    /// Deprecated: set an entry of ``transports`` with a ``ClosureTransport``
    /// (`configuration.transports[name] = ClosureTransport { call in ... }`).
    /// - Parameters:
    ///   - name: The name requests use.
    ///   - send: Sends one request.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.transports[name] = ClosureTransport { ... }")
    public func transport(_ name: String,
                          send: @escaping @Sendable (TransportCall) async throws -> Response) -> Configuration {
        with { $0.transports[name] = ClosureTransport(send) }
    }
}

extension Request {
    /// Sends this request through the transport registered under `name` instead of HTTP. An
    /// unknown name fails the send with ``CourierError/Code/notFound``.
    /// - Parameter name: A registered transport's name, or nil for the built-in HTTP transport.
    /// - Returns: The changed request.
    public func transport(_ name: String?) -> Request { adding(TransportRequestOption(name: name)) }
}

struct TransportRequestOption: RequestOption {
    let name: String?
    func apply(to request: OpaquePointer) throws {
        try withOptionalCString(name) {
            try CourierError.check(courier_request_set_transport(request, $0), "transport '\(name ?? "http")'")
        }
    }
}

struct TransportOption: ConfigurationOption {
    let name: String
    let transport: any Transport
    func apply(to config: OpaquePointer) throws {
        var table = courier_transport(size: MemoryLayout<courier_transport>.size, start: transportStart, cancel: transportCancel)
        let user = Unmanaged.passRetained(TransportBox(transport)).toOpaque()
        // On failure the C core has already released the box through user_free.
        try CourierError.check(courier_config_register_transport(config, name, &table, user,
                                                                 releaseBox),
                               "transport '\(name)'")
    }
}

// MARK: - Calls in flight

/// A registered transport (`user` of `courier_config_register_transport`) and the tasks of its
/// calls in flight, by call address, so `cancel` reaches the right task. A call leaves the table
/// before it is completed (after which the C core may reuse its address).
/// `@unchecked Sendable`: the table is guarded by the lock.
final class TransportBox: @unchecked Sendable {
    let transport: any Transport
    private let lock = NSLock()
    private var calls: [UInt: CallTask] = [:]

    init(_ transport: any Transport) { self.transport = transport }

    func register(_ call: OpaquePointer, _ task: CallTask) { lock.withLock { calls[UInt(bitPattern: call)] = task } }
    func unregister(_ call: OpaquePointer) { _ = lock.withLock { calls.removeValue(forKey: UInt(bitPattern: call)) } }
    func task(for call: OpaquePointer) -> CallTask? { lock.withLock { calls[UInt(bitPattern: call)] } }
}

/// The Swift task of one call; a cancel that comes before the task is known is remembered.
/// `@unchecked Sendable`: guarded by the lock.
final class CallTask: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<Void, Never>?
    private var cancelled = false

    func set(_ task: Task<Void, Never>) {
        let cancel = lock.withLock { () -> Bool in
            self.task = task
            return cancelled
        }
        if cancel { task.cancel() }
    }

    func cancel() {
        let task = lock.withLock { () -> Task<Void, Never>? in
            cancelled = true
            return self.task
        }
        task?.cancel()
    }
}

/// A `courier_call *`, borrowed from start until completed. `@unchecked Sendable`: the C core
/// allows completing a call from any thread, once.
struct CallPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// `start`: copies the call, starts its task, returns at once.
private let transportStart: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Int32 = { call, user in
    guard let call, let user else { return COURIER_E_INVALID_ARGUMENT.rawValue }
    let box = Unmanaged<TransportBox>.fromOpaque(user).takeUnretainedValue()
    let request = TransportCall(call: call)
    let handle = CallPointer(pointer: call)
    let callTask = CallTask()
    box.register(call, callTask)
    callTask.set(Task.detached {
        let outcome: Result<Response, any Error>
        do {
            outcome = .success(try await box.transport.send(request))
        } catch {
            outcome = .failure(error)
        }
        box.unregister(handle.pointer)
        complete(handle.pointer, with: outcome)
    })
    return COURIER_OK.rawValue
}

/// `cancel`: runs on the worker thread, between start and completion.
private let transportCancel: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { call, user in
    guard let call, let user else { return }
    Unmanaged<TransportBox>.fromOpaque(user).takeUnretainedValue().task(for: call)?.cancel()
}

/// Ends a call with a transport's outcome (`courier_call_complete`, exactly once).
private func complete(_ call: OpaquePointer, with outcome: Result<Response, any Error>) {
    switch outcome {
    case .success(let response):
        do {
            _ = courier_call_complete(call, COURIER_OK, try response.makeCResponse(), nil)
        } catch {
            complete(call, with: .failure(error))
        }
    case .failure(let error) where error is CancellationError:
        _ = courier_call_complete(call, COURIER_E_CANCELLED, nil, "the transport's task was cancelled")
    case .failure(let error):
        // The send rethrows this very error (`courier_call_raise`); a CourierError keeps its code
        // and response, another error fails the request as a network failure would.
        let courierError = error as? CourierError
        let code = thrownCode(error, otherwise: courierError == nil ? COURIER_E_NETWORK.rawValue : COURIER_E_INTERNAL.rawValue)
        let attached = try? courierError?.response?.makeCResponse()
        let message = courierError?.message ?? "transport error: \(error)"
        _ = courier_call_raise(call, courier_code(rawValue: code), attached, message,
                               Unmanaged.passRetained(ThrownBox(error)).toOpaque(), releaseBox)
    }
}
