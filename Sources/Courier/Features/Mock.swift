// Mock.swift — the C core's mock answers (HTNetworking's enableMockTest), in Swift: the engine's
// switch (`Configuration.mockEnabled`, `engine.mockEnabled`) and request settings for a mocked
// status, headers and body (bytes, a string or a file), an error, a delay, or a closure that builds
// the answer. A mocked answer never reaches the network and is then judged exactly like a real one
// (status, validator, mapping, cache): the C core does all of that; this file only translates.
// It also holds `Response.makeCResponse()`, which interceptors and custom transports share.

import Foundation
internal import CCore

// MARK: - The switch

extension Configuration {
    /// Whether requests' mocks are used (HTNetworking's enableMockTest). Off by default: a request
    /// with a mock is then sent to the network as if it had none. ``Engine/mockEnabled`` changes
    /// it at run time.
    public var mockEnabled: Bool {
        get { options.lazy.compactMap { $0 as? MockSwitchOption }.last?.enabled ?? false }
        set {
            options.removeAll { $0 is MockSwitchOption }
            options.append(MockSwitchOption(enabled: newValue))
        }
    }

    /// Deprecated: set ``mockEnabled`` (`configuration.mockEnabled = true`).
    /// - Parameter enabled: Whether mocks are used.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.mockEnabled = enabled")
    public func mocking(_ enabled: Bool) -> Configuration {
        var copy = self
        copy.mockEnabled = enabled
        return copy
    }
}

struct MockSwitchOption: ConfigurationOption {
    let enabled: Bool
    func apply(to config: OpaquePointer) throws {
        try CourierError.check(courier_config_set_mock_enabled(config, enabled ? 1 : 0), "mockEnabled")
    }
}

extension Engine {
    /// Whether this engine uses requests' mocks: starts as ``Configuration/mockEnabled`` and may be
    /// changed at any time, from any thread; a change applies to requests sent afterwards.
    public var mockEnabled: Bool {
        get {
            guard enter() else { return false }
            defer { leave() }
            return courier_engine_mock_enabled(handle) != 0
        }
        set {
            guard enter() else { return }
            defer { leave() }
            _ = courier_engine_set_mock_enabled(handle, newValue ? 1 : 0)
        }
    }
}

// MARK: - What a mock closure sees

/// The final request as a mock closure (``Request/mock(_:)``) sees it: method, URL with the
/// parameters applied, and every header line that would have been sent. A copy: it may be kept.
public struct MockRequest: Sendable {
    /// The method.
    public let method: String
    /// The final URL, query included.
    public let url: String
    /// Every header line, in the order it would have been sent.
    public let headers: HTTPHeaders

    /// Creates the view (for tests of mock closures).
    /// - Parameters:
    ///   - method: The method.
    ///   - url: The URL.
    ///   - headers: The header lines.
    public init(method: String, url: String, headers: HTTPHeaders = []) {
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// The value of the first header line with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func header(_ name: String) -> String? { headers.first(named: name) }

    /// Reads a borrowed `courier_outgoing *`.
    init(outgoing pointer: OpaquePointer) {
        method = String(borrowedCString: courier_outgoing_method(pointer))
        url = String(borrowedCString: courier_outgoing_url(pointer))
        headers = HTTPHeaders(count: courier_outgoing_header_count(pointer)) {
            courier_outgoing_header_at(&$1, &$2, pointer, $0)
        }
    }
}

// MARK: - Request settings

extension Request {
    /// The mock answer: a status, a body and headers. Used only while the engine's mock switch is
    /// on; the answer then goes through the same judging as a real one (a status >= 400 fails with
    /// ``CourierError/Code/httpStatus``, the validator, mapping and the cache policy apply). Its
    /// URL and method are the request's. Replaces any earlier mock body, file, error or closure;
    /// headers add up.
    /// - Parameters:
    ///   - status: The HTTP status (100...999). Default 200.
    ///   - body: The body.
    ///   - contentType: The Content-Type header, or nil for none.
    ///   - headers: More header lines of the answer.
    /// - Returns: The changed request.
    public func mock(status: Int = 200, body: Data, contentType: String? = nil, headers: HTTPHeaders = []) -> Request {
        adding(MockOption.response(status: status, body: body, contentType: contentType)).addingMockHeaders(headers)
    }

    /// The mock answer with a text body (UTF-8). See ``mock(status:body:contentType:headers:)-(_,Data,_,_)``.
    /// - Parameters:
    ///   - status: The HTTP status (100...999). Default 200.
    ///   - body: The body text.
    ///   - contentType: The Content-Type header, or nil for none.
    ///   - headers: More header lines of the answer.
    /// - Returns: The changed request.
    public func mock(status: Int = 200, body: String, contentType: String? = nil, headers: HTTPHeaders = []) -> Request {
        mock(status: status, body: Data(body.utf8), contentType: contentType, headers: headers)
    }

    /// The mock answer's body is read from a file when the request is sent (HTNetworking's mock
    /// JSON files); a `.json` file gets `Content-Type: application/json`. A missing file fails the
    /// request with ``CourierError/Code/notFound``.
    /// - Parameters:
    ///   - path: The file's path.
    ///   - status: The HTTP status (100...999). Default 200.
    ///   - headers: More header lines of the answer.
    /// - Returns: The changed request.
    public func mockFile(_ path: String, status: Int = 200, headers: HTTPHeaders = []) -> Request {
        adding(MockOption.file(path: path, status: status)).addingMockHeaders(headers)
    }

    /// The mock fails the request with this code and no response (e.g. ``CourierError/Code/timeout``
    /// or ``CourierError/Code/cannotConnect``); a retry rule applies to it as to a real failure.
    /// - Parameter code: A failure code.
    /// - Returns: The changed request.
    public func mockError(_ code: CourierError.Code) -> Request { adding(MockOption.error(code)) }

    /// The mock answers after this delay, without blocking the engine or other requests; a
    /// cancel during the delay cancels the request.
    /// - Parameter seconds: The delay (>= 0).
    /// - Returns: The changed request.
    public func mockDelay(_ seconds: Double) -> Request { adding(MockOption.delay(seconds)) }

    /// The mock answer is built by a closure from the final request. Its status, headers and body
    /// are used (URL, method and metrics are the engine's). It runs on the engine's worker
    /// thread: keep it quick, and never close the engine from it. Throwing a ``CourierError``
    /// fails the request with its code (with the C core's message); any other error fails it with
    /// ``CourierError/Code/internal``. `send` and `sendSync` rethrow the error thrown itself.
    /// - Parameter build: Makes the answer.
    /// - Returns: The changed request.
    public func mock(_ build: @escaping @Sendable (MockRequest) throws -> Response) -> Request {
        adding(MockOption.closure(MockClosureBox(build)))
    }

    private func addingMockHeaders(_ headers: HTTPHeaders) -> Request {
        headers.reduce(self) { $0.adding(MockOption.header(name: $1.name, value: $1.value)) }
    }
}

enum MockOption: RequestOption {
    case response(status: Int, body: Data, contentType: String?)
    case file(path: String, status: Int)
    case header(name: String, value: String)
    case error(CourierError.Code)
    case delay(Double)
    case closure(MockClosureBox)

    func apply(to request: OpaquePointer) throws {
        switch self {
        case .response(let status, let body, let contentType):
            try body.withUnsafeBytes { bytes in
                try withOptionalCString(contentType) { type in
                    try CourierError.check(courier_request_set_mock_response(request, Int32(clamping: status), bytes.baseAddress,
                                                                             bytes.count, type),
                                           "mock status \(status)")
                }
            }
        case .file(let path, let status):
            try CourierError.check(courier_request_set_mock_file(request, path), "mockFile '\(path)'")
            try CourierError.check(courier_request_set_mock_status(request, Int32(clamping: status)), "mockFile status \(status)")
        case .header(let name, let value):
            try Response.checkNoNUL(name, value)
            try CourierError.check(courier_request_add_mock_header(request, name, value), "mock header '\(name)'")
        case .error(let code):
            try CourierError.check(courier_request_set_mock_error(request, courier_code(rawValue: code.rawValue)), "mockError \(code.name)")
        case .delay(let seconds):
            try CourierError.check(courier_request_set_mock_delay_ms(request, RetryPolicy.milliseconds(seconds)),
                                   "mockDelay \(seconds)")
        case .closure(let box):
            // On failure the C core has already released the box through user_free.
            try CourierError.check(courier_request_set_mock_callback(request, mockTrampoline,
                                                                     Unmanaged.passRetained(box).toOpaque(), releaseBox),
                                   "mock closure")
        }
    }
}

/// A mock closure (`user` of `courier_request_set_mock_callback`). Immutable.
final class MockClosureBox: @unchecked Sendable {
    let build: @Sendable (MockRequest) throws -> Response
    init(_ build: @escaping @Sendable (MockRequest) throws -> Response) { self.build = build }
}

/// `courier_mock_fn`: runs on the worker thread with the borrowed final request.
private let mockTrampoline: courier_mock_fn = { outgoing, out, user in
    guard let outgoing, let out, let user else { return COURIER_E_INVALID_ARGUMENT.rawValue }
    let box = Unmanaged<MockClosureBox>.fromOpaque(user).takeUnretainedValue()
    do {
        out.pointee = try box.build(MockRequest(outgoing: outgoing)).makeCResponse()
        return COURIER_OK.rawValue
    } catch {
        return raiseInSend(error, otherwise: COURIER_E_INTERNAL.rawValue) // rethrown by the send
    }
}

// MARK: - Building C responses

extension Response {
    /// A new C response with this response's status, header lines and body (URL, method and
    /// metrics are left to the engine). Shared by mock closures, interceptors and transports.
    /// - Returns: A new `courier_response *`; the caller hands it to a C function that takes it,
    ///   or frees it.
    /// - Throws: ``CourierError``: ``CourierError/Code/invalidArgument`` for a status outside
    ///   100...999, ``CourierError/Code/invalidHeader`` or ``CourierError/Code/invalidEncoding``
    ///   for a bad header line.
    func makeCResponse() throws -> OpaquePointer {
        var created: OpaquePointer?
        try CourierError.check(courier_response_new(&created, Int32(clamping: status)), "response status \(status)")
        guard let response = created else { throw CourierError(.noMemory) }
        do {
            for line in headers {
                try Response.checkNoNUL(line.name, line.value)
                try CourierError.check(courier_response_add_header(response, line.name, line.value),
                                       "response header '\(line.name)'")
            }
            try body.withUnsafeBytes { bytes in
                var empty: UInt8 = 0
                let rc = bytes.baseAddress.map { courier_response_set_body(response, $0, bytes.count) }
                    ?? courier_response_set_body(response, &empty, 0)
                try CourierError.check(rc, "response body")
            }
            return response
        } catch {
            courier_response_free(response)
            throw error
        }
    }

    /// Refuses a header line with an embedded NUL, which a C string would silently cut short.
    /// - Throws: ``CourierError/Code/invalidHeader``.
    static func checkNoNUL(_ name: String, _ value: String) throws {
        if name.utf8.contains(0) || value.utf8.contains(0) {
            throw CourierError(.invalidHeader, message: "header '\(name)': a NUL byte in a header line")
        }
    }
}
