// Session.swift — adapters, retriers and an authenticator through the facade (include/courier/hooks.h,
// "Sessions"; docs/design/session.md). When each runs, the order, the single-flight refresh, the
// loop guard and what the journal stores are the C core's (CCore/engine/session.c); this file
// converts values and runs the async protocol methods in tasks, which answer the C core from
// whatever thread they end on, so the engine's worker is never held.

internal import CCore
import Foundation

// MARK: - Adapters

/// One attempt's request as an ``Adapter`` sees and changes it: method, URL, headers and body.
public struct AdaptableRequest: Sendable, Equatable {
    /// The method ("GET", "POST", ...).
    public var method: String
    /// The absolute URL, parameters applied.
    public var url: String
    /// Every header line, in order.
    public var headers: HTTPHeaders
    /// The body in memory, or nil (none, a file body or a multipart body).
    public var body: Data?
    /// The path of a file body, or nil. Setting one replaces ``body``.
    public var bodyFile: String?
    /// The attempt: 1 for the first, 2 for the first retry or resend...
    public let attempt: Int

    /// - Parameters:
    ///   - method: The method.
    ///   - url: The URL.
    ///   - headers: The header lines.
    ///   - body: The body in memory.
    ///   - bodyFile: The path of a file body.
    ///   - attempt: The attempt number.
    public init(method: String, url: String, headers: HTTPHeaders = [], body: Data? = nil, bodyFile: String? = nil,
                attempt: Int = 1) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bodyFile = bodyFile
        self.attempt = attempt
    }
}

/// Adapts each attempt of a request before it goes out (Alamofire's `RequestAdapter`): signs it,
/// adds headers, rewrites or encrypts the body. Runs in a task of its own; the attempt waits off
/// the wire until it returns, without holding the engine's worker thread. Adapters run in order
/// (the engine's, then the request's). A thrown error fails the request with that very error.
public protocol Adapter: Sendable {
    /// Returns the attempt's request as it should go.
    /// - Parameter request: The attempt's request (before this adapter, after the earlier ones).
    /// - Returns: The changed request.
    /// - Throws: Any error: the request fails with it and nothing is sent.
    func adapt(_ request: AdaptableRequest) async throws -> AdaptableRequest
}

/// An ``Adapter`` made of a closure.
public struct AnyAdapter: Adapter {
    let body: @Sendable (AdaptableRequest) async throws -> AdaptableRequest
    /// - Parameter adapt: The closure that adapts.
    public init(_ adapt: @escaping @Sendable (AdaptableRequest) async throws -> AdaptableRequest) { body = adapt }
    /// Calls the closure.
    /// - Parameter request: The attempt's request.
    /// - Returns: The changed request.
    /// - Throws: What the closure throws.
    public func adapt(_ request: AdaptableRequest) async throws -> AdaptableRequest { try await body(request) }
}

final class AdapterBox: @unchecked Sendable { // immutable after init
    let adapter: any Adapter
    init(_ adapter: any Adapter) { self.adapter = adapter }
}

/// A C handle answered exactly once, from the task that owns it.
private struct PendingPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

private func readRequest(_ outgoing: OpaquePointer, attempt: Int) -> AdaptableRequest {
    let headers = HTTPHeaders(count: courier_outgoing_header_count(outgoing)) {
        courier_outgoing_header_at(&$1, &$2, outgoing, $0)
    }
    var bytes: UnsafePointer<UInt8>?
    var length = 0
    var body: Data?
    if courier_outgoing_body(&bytes, &length, outgoing) == COURIER_OK.rawValue, let bytes {
        body = Data(bytes: bytes, count: length)
    }
    let file = courier_outgoing_body_file(outgoing)
    return AdaptableRequest(method: String(borrowedCString: courier_outgoing_method(outgoing)),
                            url: String(borrowedCString: courier_outgoing_url(outgoing)), headers: headers, body: body,
                            bodyFile: file.map { String(cString: $0) }, attempt: attempt)
}

private func writeRequest(_ request: AdaptableRequest, was: AdaptableRequest, to outgoing: OpaquePointer) throws {
    if request.method != was.method {
        try CourierError.check(courier_outgoing_set_method(outgoing, request.method), "method '\(request.method)'")
    }
    if request.url != was.url { try CourierError.check(courier_outgoing_set_url(outgoing, request.url), "URL '\(request.url)'") }
    if request.headers != was.headers {
        var names: [String] = []
        for line in was.headers where !names.contains(where: { $0.caseInsensitiveCompare(line.name) == .orderedSame }) {
            names.append(line.name)
        }
        for name in names where request.headers.first(named: name) == nil {
            try CourierError.check(courier_outgoing_set_header(outgoing, name, nil), "header '\(name)'")
        }
        var done: [String] = []
        for line in request.headers where !done.contains(where: { $0.caseInsensitiveCompare(line.name) == .orderedSame }) {
            done.append(line.name)
            let value = request.headers.values(named: line.name).joined(separator: ", ")
            try CourierError.check(courier_outgoing_set_header(outgoing, line.name, value), "header '\(line.name)'")
        }
    }
    if request.bodyFile != was.bodyFile, let file = request.bodyFile {
        try CourierError.check(courier_outgoing_set_body_file(outgoing, file), "body file '\(file)'")
    } else if request.body != was.body, let body = request.body {
        try body.withUnsafeBytes { raw in
            try CourierError.check(courier_outgoing_set_body(outgoing, raw.baseAddress, raw.count), "body")
        }
    }
}

/// `courier_adapter_fn`: reads the attempt on the worker, adapts it in a task, completes from there.
private let adapterTrampoline: courier_adapter_fn = { adaptation, user in
    guard let adaptation, let user, let outgoing = courier_adaptation_outgoing(adaptation) else {
        _ = courier_adaptation_complete(adaptation, COURIER_OK, nil)
        return
    }
    let box = Unmanaged<AdapterBox>.fromOpaque(user).takeUnretainedValue()
    let before = readRequest(outgoing, attempt: Int(courier_adaptation_attempt(adaptation)))
    let pending = PendingPointer(pointer: adaptation)
    Task.detached {
        do {
            let after = try await box.adapter.adapt(before)
            if let outgoing = courier_adaptation_outgoing(pending.pointer) {
                try writeRequest(after, was: before, to: outgoing)
            }
            _ = courier_adaptation_complete(pending.pointer, COURIER_OK, nil)
        } catch {
            let code = thrownCode(error, otherwise: COURIER_E_USER.rawValue)
            _ = courier_adaptation_raise(pending.pointer, courier_code(rawValue: code), String(describing: error),
                                         Unmanaged.passRetained(ThrownBox(error)).toOpaque(), releaseBox)
        }
    }
}

// MARK: - Retriers

/// What a ``Retrier`` answers.
public enum RetryDecision: Sendable, Equatable {
    /// Do not retry: the next retrier is asked, and after the last the failure goes to the caller.
    case doNotRetry
    /// Retry now.
    case retry
    /// Retry after this many seconds.
    case retryAfter(TimeInterval)
}

/// A failed attempt a ``Retrier`` is asked about.
public struct RetryFailure: Sendable {
    /// The error the request would fail with (``CourierError/Code/httpStatus`` for a refused status).
    public let error: CourierError
    /// The response, if one came.
    public let response: Response?
    /// Attempts made so far (1 after the first).
    public let attempt: Int
    /// The request's id.
    public let requestID: UInt64
    /// The attempt's method.
    public let method: String
    /// The attempt's URL (before adapters).
    public let url: String
}

/// Decides after a failure whether to try again (Alamofire's `RequestRetrier`). Asked only when the
/// fixed retry rule (``Configuration/retry``) did not retry; never after a cancel. Retriers are
/// asked in order (the engine's, then the request's) until one retries; a thrown error counts as
/// ``RetryDecision/doNotRetry``. Asked for frozen requests' resends too.
public protocol Retrier: Sendable {
    /// Decides.
    /// - Parameter failure: The failed attempt.
    /// - Returns: The decision.
    /// - Throws: Any error: taken as ``RetryDecision/doNotRetry``.
    func retry(_ failure: RetryFailure) async throws -> RetryDecision
}

/// A ``Retrier`` made of a closure.
public struct AnyRetrier: Retrier {
    let body: @Sendable (RetryFailure) async throws -> RetryDecision
    /// - Parameter retry: The closure that decides.
    public init(_ retry: @escaping @Sendable (RetryFailure) async throws -> RetryDecision) { body = retry }
    /// Calls the closure.
    /// - Parameter failure: The failed attempt.
    /// - Returns: The decision.
    /// - Throws: What the closure throws.
    public func retry(_ failure: RetryFailure) async throws -> RetryDecision { try await body(failure) }
}

final class RetrierBox: @unchecked Sendable { // immutable after init
    let retrier: any Retrier
    init(_ retrier: any Retrier) { self.retrier = retrier }
}

private let retrierTrampoline: courier_retrier_fn = { question, user in
    guard let question, let user else {
        _ = courier_retry_question_answer(question, -1)
        return
    }
    let box = Unmanaged<RetrierBox>.fromOpaque(user).takeUnretainedValue()
    var code = courier_retry_question_code(question)
    let response = courier_retry_question_response(question).flatMap { courier_response_retain($0) }
        .map { Response(taking: $0) }
    if code == COURIER_OK.rawValue { code = COURIER_E_HTTP_STATUS.rawValue }
    let failure = RetryFailure(error: CourierError(code: code, detail: nil, response: response), response: response,
                               attempt: Int(courier_retry_question_attempt(question)),
                               requestID: courier_retry_question_request_id(question),
                               method: String(borrowedCString: courier_retry_question_method(question)),
                               url: String(borrowedCString: courier_retry_question_url(question)))
    let pending = PendingPointer(pointer: question)
    Task.detached {
        let decision = (try? await box.retrier.retry(failure)) ?? .doNotRetry
        let ms: Int64
        switch decision {
        case .doNotRetry: ms = -1
        case .retry: ms = 0
        case .retryAfter(let seconds): ms = seconds < 0 ? -1 : Int64((seconds * 1000).rounded())
        }
        _ = courier_retry_question_answer(pending.pointer, ms)
    }
}

// MARK: - The authenticator

/// A credential and its expiry, as an ``Authenticator``'s refresh returns it.
public struct AuthCredential: Sendable, Equatable {
    /// The credential: a bearer token, or anything the authenticator's ``Authenticator/apply`` puts
    /// on a request.
    public var value: String
    /// When it expires (nil: never); a request sent after that waits for a refresh first.
    public var expiresAt: Date?

    /// - Parameters:
    ///   - value: The credential.
    ///   - expiresAt: Its expiry.
    public init(_ value: String, expiresAt: Date? = nil) {
        self.value = value
        self.expiresAt = expiresAt
    }
}

/// Owns the engine's credential (Alamofire's `AuthenticationInterceptor` and `Authenticator`): the
/// C core applies it to each request of its origin (never another origin, a redirect's included),
/// and when a request is refused (a 401 by default) runs one ``refresh(_:)`` however many requests
/// wait for it; they are then sent again with the new credential. A request refused again after a
/// refresh fails with ``CourierError/Code/credentialRefused``; a refresh that throws fails every
/// waiting request with that error. A request ``refresh(_:)`` sends to the same origin must say
/// ``Request/authenticated(_:)`` false.
public protocol Authenticator: Sendable {
    /// Gets a new credential (off the engine's worker thread).
    /// - Parameter credential: The credential being replaced, or nil.
    /// - Returns: The new credential.
    /// - Throws: Any error: every waiting request fails with it.
    func refresh(_ credential: String?) async throws -> AuthCredential
    /// Puts the credential on an attempt; nil (the default): "Authorization: Bearer <credential>".
    var apply: (@Sendable (String, inout OutgoingRequest) throws -> Void)? { get }
    /// Whether a failure means the credential was refused; nil (the default): a 401.
    var isRefused: (@Sendable (CourierError?, Response?) -> Bool)? { get }
}

extension Authenticator {
    /// The C core's: "Authorization: Bearer <credential>".
    public var apply: (@Sendable (String, inout OutgoingRequest) throws -> Void)? { nil }
    /// The C core's: a 401.
    public var isRefused: (@Sendable (CourierError?, Response?) -> Bool)? { nil }
}

final class AuthenticatorBox: @unchecked Sendable { // immutable after init
    let authenticator: any Authenticator
    let apply: (@Sendable (String, inout OutgoingRequest) throws -> Void)?
    let isRefused: (@Sendable (CourierError?, Response?) -> Bool)?
    init(_ authenticator: any Authenticator) {
        self.authenticator = authenticator
        apply = authenticator.apply
        isRefused = authenticator.isRefused
    }
}

private func milliseconds(_ date: Date?) -> Int64 {
    guard let date else { return 0 }
    return max(1, Int64((date.timeIntervalSince1970 * 1000).rounded()))
}

/// `courier_user_retain_fn` for ``ThrownBox``es: one more reference, for one more failure.
private let retainBox: courier_user_retain_fn = { user in
    guard let user else { return nil }
    _ = Unmanaged<AnyObject>.fromOpaque(user).retain()
    return user
}

private let refreshTrampoline: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { refresh, user in
    guard let refresh, let user else { return }
    let box = Unmanaged<AuthenticatorBox>.fromOpaque(user).takeUnretainedValue()
    let old = courier_refresh_credential(refresh).map { String(cString: $0) }
    let pending = PendingPointer(pointer: refresh)
    Task.detached {
        do {
            let credential = try await box.authenticator.refresh(old)
            _ = courier_refresh_complete(pending.pointer, credential.value, milliseconds(credential.expiresAt))
        } catch {
            let code = thrownCode(error, otherwise: COURIER_E_USER.rawValue)
            _ = courier_refresh_fail(pending.pointer, courier_code(rawValue: code), String(describing: error),
                                     Unmanaged.passRetained(ThrownBox(error)).toOpaque(), releaseBox, retainBox)
        }
    }
}

private let applyTrampoline: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Int32 = {
    outgoing, credential, user in
    guard let outgoing, let user else { return COURIER_OK.rawValue }
    let box = Unmanaged<AuthenticatorBox>.fromOpaque(user).takeUnretainedValue()
    let handle = OutgoingHandle(outgoing)
    defer { handle.pointer = nil }
    var view = OutgoingRequest(handle: handle)
    do {
        try box.apply?(String(borrowedCString: credential), &view)
        return COURIER_OK.rawValue
    } catch {
        return raiseInSend(error, otherwise: COURIER_E_INVALID_ARGUMENT.rawValue)
    }
}

private let refusedTrampoline: @convention(c) (Int32, OpaquePointer?, UnsafeMutableRawPointer?) -> Int32 = {
    code, response, user in
    guard let user else { return 0 }
    let box = Unmanaged<AuthenticatorBox>.fromOpaque(user).takeUnretainedValue()
    let resp = response.flatMap { courier_response_retain($0) }.map { Response(taking: $0) }
    let error = code == COURIER_OK.rawValue ? nil : CourierError(code: code, detail: nil, response: resp)
    return box.isRefused?(error, resp) == true ? 1 : 0
}

// MARK: - Configuration and requests

enum _SessionOption: ConfigurationOption {
    case adapter(AdapterBox)
    case retrier(RetrierBox)
    case authenticator(AuthenticatorBox, origin: String, credential: AuthCredential?)

    func apply(to config: OpaquePointer) throws {
        switch self {
        case .adapter(let box):
            try CourierError.check(courier_config_add_adapter(config, adapterTrampoline,
                                                              Unmanaged.passRetained(box).toOpaque(), releaseBox), "adapter")
        case .retrier(let box):
            try CourierError.check(courier_config_add_retrier(config, retrierTrampoline,
                                                              Unmanaged.passRetained(box).toOpaque(), releaseBox), "retrier")
        case .authenticator(let box, let origin, let credential):
            var fns = courier_authenticator()
            fns.size = MemoryLayout<courier_authenticator>.size
            fns.apply = box.apply == nil ? nil : applyTrampoline
            fns.refused = box.isRefused == nil ? nil : refusedTrampoline
            fns.refresh = refreshTrampoline
            try CourierError.check(courier_config_set_authenticator(config, origin, &fns,
                                                                    Unmanaged.passRetained(box).toOpaque(), releaseBox),
                                   "authenticator origin '\(origin)'")
            if let credential {
                try CourierError.check(courier_config_set_credential(config, credential.value,
                                                                     milliseconds(credential.expiresAt)), "credential")
            }
        }
    }
}

struct _SessionRequestOption: RequestOption {
    enum Kind: Sendable {
        case adapter(AdapterBox)
        case retrier(RetrierBox)
        case authenticated(Bool)
    }
    let kind: Kind

    func apply(to request: OpaquePointer) throws {
        switch kind {
        case .adapter(let box):
            try CourierError.check(courier_request_add_adapter(request, adapterTrampoline,
                                                               Unmanaged.passRetained(box).toOpaque(), releaseBox), "adapter")
        case .retrier(let box):
            try CourierError.check(courier_request_add_retrier(request, retrierTrampoline,
                                                               Unmanaged.passRetained(box).toOpaque(), releaseBox), "retrier")
        case .authenticated(let on):
            try CourierError.check(courier_request_set_authenticated(request, on ? 1 : 0), "authenticated")
        }
    }
}

extension Configuration {
    /// Adds an adapter run before each attempt of every request (after those added before).
    /// - Parameter adapter: The adapter.
    /// - Returns: The changed configuration.
    public func adapter(_ adapter: some Adapter) -> Configuration { adding(_SessionOption.adapter(AdapterBox(adapter))) }

    /// Adds a retrier asked after a failure the fixed retry rule did not retry (after those added before).
    /// - Parameter retrier: The retrier.
    /// - Returns: The changed configuration.
    public func retrier(_ retrier: some Retrier) -> Configuration { adding(_SessionOption.retrier(RetrierBox(retrier))) }

    /// The engine's authenticator, for one origin.
    /// - Parameters:
    ///   - authenticator: The authenticator.
    ///   - origin: "https://host[:port]" (or any URL of it): the only origin the credential goes to.
    ///   - credential: The credential the engine starts with (nil: the first request refreshes).
    /// - Returns: The changed configuration.
    public func authenticator(_ authenticator: some Authenticator, origin: String,
                              credential: AuthCredential? = nil) -> Configuration {
        adding(_SessionOption.authenticator(AuthenticatorBox(authenticator), origin: origin, credential: credential))
    }
}

extension Request {
    /// Adds an adapter for this request (run after the engine's).
    /// - Parameter adapter: The adapter.
    /// - Returns: The changed request.
    public func adapter(_ adapter: some Adapter) -> Request {
        adding(_SessionRequestOption(kind: .adapter(AdapterBox(adapter))))
    }

    /// Adds a retrier for this request (asked after the engine's).
    /// - Parameter retrier: The retrier.
    /// - Returns: The changed request.
    public func retrier(_ retrier: some Retrier) -> Request {
        adding(_SessionRequestOption(kind: .retrier(RetrierBox(retrier))))
    }

    /// Whether the engine's authenticator applies to this request (true, the default); false for
    /// the request a refresh sends to the same origin.
    /// - Parameter authenticated: false: the authenticator leaves this request alone.
    /// - Returns: The changed request.
    public func authenticated(_ authenticated: Bool) -> Request {
        adding(_SessionRequestOption(kind: .authenticated(authenticated)))
    }
}

extension Engine {
    /// Replaces the authenticator's credential (after a login; nil after a logout) for the attempts
    /// that start afterwards.
    /// - Parameter credential: The credential, or nil.
    /// - Throws: ``CourierError`` with ``CourierError/Code/invalidArgument`` without an authenticator.
    public func setCredential(_ credential: AuthCredential?) throws {
        try CourierError.check(courier_engine_set_credential(handle, credential?.value,
                                                             milliseconds(credential?.expiresAt)), "credential")
    }
}
