// Interceptors.swift — the C core's interceptors (Alamofire's RequestInterceptor, OkHttp's
// interceptors) as a Swift protocol: `adapt` changes every request of an engine before it is sent,
// `inspect` sees every response a transport produced before it is judged, and may replace it or
// fail the request. The C core runs them, in the order they were added, for HTTP, mocked and
// custom-transport answers alike; this file only turns Swift values and errors into C ones.
//
// A Swift error an interceptor throws is raised into its send's slot in the C core
// (`courier_raise`, Callbacks.swift) and comes back with the send's failure, so `send` and
// `sendSync` rethrow that very error; nothing is kept on the Swift side. Elsewhere (completion
// handlers, delegates, groups) the failure is the C core's code with a ``CourierError``.

import Foundation
internal import CCore

// MARK: - The protocol

/// Sees every request of an engine before it is sent and every response before it is judged.
/// Add interceptors to a configuration (``Configuration/interceptor(_:)``); they run in the order
/// added. Both methods have defaults that do nothing: implement the ones you need.
///
/// ```swift
/// struct Auth: Interceptor {
///     let token: String
///     func adapt(_ request: inout OutgoingRequest) throws {
///         try request.setHeader("Authorization", "Bearer \(token)")
///     }
/// }
/// var configuration = Configuration(baseURL: url)
/// configuration.interceptors.append(Auth(token: t))
/// let engine = try Engine(configuration: configuration)
/// ```
public protocol Interceptor: Sendable {
    /// Adapts the final request (URL with parameters, every header line) just before it is
    /// sent, after the request's own ``Request/customize(_:)`` hooks. Runs on the sending thread,
    /// inside the send. Throwing refuses the send: nothing is sent, and the send throws this error
    /// (a ``CourierError`` keeps its code; another error reaches the C core as
    /// ``CourierError/Code/invalidArgument``).
    /// - Parameter request: The outgoing request, valid only during the call.
    /// - Throws: Any error, to refuse the send.
    func adapt(_ request: inout OutgoingRequest) throws

    /// Inspects a response a transport produced (HTTP, a mock, a custom transport), before the
    /// engine judges it (status, validator, mapping, cache write). Runs on the engine's worker
    /// thread: keep it quick, and never close the engine from it.
    /// - Parameters:
    ///   - response: The response.
    ///   - id: The id of the send it answers.
    /// - Returns: A replacement, judged instead of `response` (its status, header lines and body
    ///   are used), or nil to keep `response`.
    /// - Throws: Any error, to fail the request: a ``CourierError`` with its code, another error
    ///   with ``CourierError/Code/invalidResult``; the response stays attached. `send` and
    ///   `sendSync` rethrow the error thrown (a ``CourierError`` thrown without a response gets
    ///   the attached one).
    func inspect(_ response: Response, id: RequestID) throws -> Response?
}

extension Interceptor {
    /// Leaves the request as it is.
    /// - Parameter request: The outgoing request.
    public func adapt(_ request: inout OutgoingRequest) throws {}

    /// Keeps the response.
    /// - Parameters:
    ///   - response: The response.
    ///   - id: The id of the send.
    /// - Returns: nil.
    public func inspect(_ response: Response, id: RequestID) throws -> Response? { nil }
}

/// An interceptor made of closures.
public struct ClosureInterceptor: Interceptor {
    private let adaptRequest: (@Sendable (inout OutgoingRequest) throws -> Void)?
    private let inspectResponse: (@Sendable (Response, RequestID) throws -> Response?)?

    /// An interceptor that calls the closures given (either may be nil).
    /// - Parameters:
    ///   - adapt: Adapts each request (see ``Interceptor/adapt(_:)``).
    ///   - inspect: Inspects each response (see ``Interceptor/inspect(_:id:)``).
    public init(adapt: (@Sendable (inout OutgoingRequest) throws -> Void)? = nil,
                inspect: (@Sendable (Response, RequestID) throws -> Response?)? = nil) {
        self.adaptRequest = adapt
        self.inspectResponse = inspect
    }

    /// Calls the `adapt` closure, if any.
    /// - Parameter request: The outgoing request.
    /// - Throws: What the closure throws.
    public func adapt(_ request: inout OutgoingRequest) throws { try adaptRequest?(&request) }

    /// Calls the `inspect` closure, if any.
    /// - Parameters:
    ///   - response: The response.
    ///   - id: The id of the send.
    /// - Returns: What the closure returns, or nil.
    /// - Throws: What the closure throws.
    public func inspect(_ response: Response, id: RequestID) throws -> Response? {
        try inspectResponse?(response, id)
    }
}

// MARK: - Configuration

extension Configuration {
    /// Deprecated: add to ``interceptors`` (`configuration.interceptors.append(interceptor)`).
    /// - Parameter interceptor: The interceptor; every engine opened with the configuration uses it.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "add to the property: configuration.interceptors.append(interceptor)")
    public func interceptor(_ interceptor: any Interceptor) -> Configuration {
        adding(InterceptorOption(interceptor: interceptor))
    }

    /// The interceptors, in the order they run. Setting replaces them all.
    public var interceptors: [any Interceptor] {
        get { options.compactMap { ($0 as? InterceptorOption)?.interceptor } }
        set {
            options.removeAll { $0 is InterceptorOption }
            options.append(contentsOf: newValue.map { InterceptorOption(interceptor: $0) as any ConfigurationOption })
        }
    }
}

struct InterceptorOption: ConfigurationOption {
    let interceptor: any Interceptor
    func apply(to config: OpaquePointer) throws {
        let box = Unmanaged.passRetained(InterceptorBox(interceptor)).toOpaque()
        // On failure the C core has already released the box through user_free.
        try CourierError.check(courier_config_add_interceptor(config, beforeSendTrampoline, afterReceiveTrampoline, box,
                                                              releaseBox),
                               "interceptor")
    }
}

/// An interceptor registered with `courier_config_add_interceptor`. Immutable.
final class InterceptorBox: @unchecked Sendable {
    let interceptor: any Interceptor
    init(_ interceptor: any Interceptor) { self.interceptor = interceptor }
}

/// `courier_before_send_fn`: runs on the sending thread inside `courier_send`.
private let beforeSendTrampoline: courier_before_send_fn = { outgoing, user in
    guard let outgoing, let user else { return COURIER_E_INVALID_ARGUMENT.rawValue }
    let box = Unmanaged<InterceptorBox>.fromOpaque(user).takeUnretainedValue()
    let handle = OutgoingHandle(outgoing)
    defer { handle.pointer = nil }
    var request = OutgoingRequest(handle: handle)
    do {
        try box.interceptor.adapt(&request)
        return COURIER_OK.rawValue
    } catch {
        return raiseInSend(error, otherwise: COURIER_E_INVALID_ARGUMENT.rawValue) // rethrown by the send
    }
}

/// `courier_after_receive_fn`: runs on the worker thread; may replace `*response`.
private let afterReceiveTrampoline: courier_after_receive_fn = { id, slot, user in
    guard let slot, let current = slot.pointee, let user else { return COURIER_OK.rawValue }
    let box = Unmanaged<InterceptorBox>.fromOpaque(user).takeUnretainedValue()
    // A reference of its own, so the Swift value may outlive the call without copying the body.
    let response = Response(taking: courier_response_retain(current)!)
    do {
        guard let replacement = try box.interceptor.inspect(response, id: RequestID(rawValue: id)),
              replacement.storage?.pointer != current else { return COURIER_OK.rawValue }
        let built = try replacement.makeCResponse()
        courier_response_free(current)
        slot.pointee = built
        return COURIER_OK.rawValue
    } catch {
        return raiseInSend(error, otherwise: COURIER_E_INVALID_RESULT.rawValue) // rethrown by the send
    }
}
