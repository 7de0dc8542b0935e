// Request.swift — the chainable request description (HLNetworking's HLAPI builder, as a value):
// `Request.post("/items").parameter("name", "x").header("X-Trace", id).timeout(5)`.
// It only records what the caller asked for; the C core joins URLs, encodes parameters, merges
// headers and checks every value when the request is sent.

import Foundation
internal import CCore

// MARK: - Request

/// A description of one HTTP request, built by chaining: every method returns a changed copy.
/// Nothing is checked until the request is sent; a bad value (a header with CR/LF, a parameter
/// that is not UTF-8, a method that is not a token, ...) then fails the send with the C core's code.
public struct Request: Sendable {
    /// The HTTP method, e.g. "GET".
    public let method: String
    /// The path joined to the base URL (the request's, else the engine's), or an absolute URL.
    public let path: String

    var parameterList: [(name: String, value: String)] = []
    var headerList: [(name: String, value: String)] = []
    var rawBody: (data: Data, contentType: String?)?
    var timeoutSeconds: Double?
    var base: String?
    var encoding: BodyEncoding?
    var usesDefaultParameters = true
    var authorization: Authorization?
    var validate: (@Sendable (Response) -> Bool)?
    var customizers: [@Sendable (inout OutgoingRequest) throws -> Void] = []
    /// Settings that feature extensions (cache policy, freezing, mapping, ...) apply to the C
    /// request, in order, after the ones above.
    var options: [any RequestOption] = []
    /// Where the C request comes from when the engine makes it: a declared API or a route
    /// (Features/Catalog.swift); nil: `method` and `path`.
    var origin: RequestOrigin?

    enum Authorization: Sendable {
        case basic(user: String, password: String)
        case token(scheme: String?, token: String)
    }

    // MARK: Starting a request

    /// A request with any method token.
    /// - Parameters:
    ///   - method: An HTTP method token ("GET", "PROPFIND", ...).
    ///   - path: A path joined to the base URL, or an absolute http/https URL.
    /// - Returns: The request.
    public static func method(_ method: String, _ path: String) -> Request { Request(method: method, path: path) }

    /// A GET request. Parameters go in the query string.
    /// - Parameter path: A path joined to the base URL, or an absolute URL.
    /// - Returns: The request.
    public static func get(_ path: String) -> Request { Request(method: "GET", path: path) }

    /// A POST request. Parameters go in the body unless a raw body is set.
    /// - Parameter path: A path joined to the base URL, or an absolute URL.
    /// - Returns: The request.
    public static func post(_ path: String) -> Request { Request(method: "POST", path: path) }

    /// A PUT request. Parameters go in the body unless a raw body is set.
    /// - Parameter path: A path joined to the base URL, or an absolute URL.
    /// - Returns: The request.
    public static func put(_ path: String) -> Request { Request(method: "PUT", path: path) }

    /// A DELETE request. Parameters go in the query string.
    /// - Parameter path: A path joined to the base URL, or an absolute URL.
    /// - Returns: The request.
    public static func delete(_ path: String) -> Request { Request(method: "DELETE", path: path) }

    /// A PATCH request. Parameters go in the body unless a raw body is set.
    /// - Parameter path: A path joined to the base URL, or an absolute URL.
    /// - Returns: The request.
    public static func patch(_ path: String) -> Request { Request(method: "PATCH", path: path) }

    /// A HEAD request. Parameters go in the query string; the response has no body.
    /// - Parameter path: A path joined to the base URL, or an absolute URL.
    /// - Returns: The request.
    public static func head(_ path: String) -> Request { Request(method: "HEAD", path: path) }

    /// A request with any method token.
    /// - Parameters:
    ///   - method: An HTTP method token.
    ///   - path: A path joined to the base URL, or an absolute URL.
    public init(method: String, path: String) {
        self.method = method
        self.path = path
    }

    /// The request a ``Requestable`` describes.
    /// - Parameter requestable: A type that describes a request.
    public init<R: Requestable>(_ requestable: R) { self = requestable.makeRequest() }

    // MARK: Parameters

    /// Adds a parameter. GET, HEAD and DELETE put parameters in the query string; other methods
    /// in the body (encoded per ``bodyEncoding(_:)``), or in the query when a raw body is set.
    /// - Parameters:
    ///   - name: The name (UTF-8; percent-encoded by the engine).
    ///   - value: The value.
    /// - Returns: The changed request.
    public func parameter(_ name: String, _ value: String) -> Request {
        var copy = self
        copy.parameterList.append((name: name, value: value))
        return copy
    }

    /// Adds parameters, sorted by name so the result is deterministic (HLAPI's `addParams`).
    /// - Parameter params: Names and values.
    /// - Returns: The changed request.
    public func parameters(_ params: [String: String]) -> Request {
        var copy = self
        copy.parameterList.append(contentsOf: params.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) })
        return copy
    }

    /// Adds parameters in the given order.
    /// - Parameter params: Name/value pairs.
    /// - Returns: The changed request.
    public func parameters(_ params: [(name: String, value: String)]) -> Request {
        var copy = self
        copy.parameterList.append(contentsOf: params)
        return copy
    }

    /// Whether the engine's default parameters are added (the default) or left out.
    /// - Parameter use: false to leave them out.
    /// - Returns: The changed request.
    public func useDefaultParameters(_ use: Bool) -> Request {
        var copy = self
        copy.usesDefaultParameters = use
        return copy
    }

    /// How this request's body parameters are encoded, overriding the engine's setting.
    /// - Parameter encoding: Form or JSON.
    /// - Returns: The changed request.
    public func bodyEncoding(_ encoding: BodyEncoding) -> Request {
        var copy = self
        copy.encoding = encoding
        return copy
    }

    // MARK: Headers and authorization

    /// Adds a header line. A request header replaces every default header of the same name.
    /// - Parameters:
    ///   - name: A header name (an HTTP token).
    ///   - value: The value (no CR, LF or NUL).
    /// - Returns: The changed request.
    public func header(_ name: String, _ value: String) -> Request {
        var copy = self
        copy.headerList.append((name: name, value: value))
        return copy
    }

    /// Adds header lines, sorted by name so the result is deterministic.
    /// - Parameter headers: Names and values.
    /// - Returns: The changed request.
    public func headers(_ headers: [String: String]) -> Request {
        var copy = self
        copy.headerList.append(contentsOf: headers.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) })
        return copy
    }

    /// Authorization: Basic with these credentials. Replaces any Authorization header.
    /// - Parameters:
    ///   - user: The user id (no colon).
    ///   - password: The password.
    /// - Returns: The changed request.
    public func basicAuth(user: String, password: String) -> Request {
        var copy = self
        copy.authorization = .basic(user: user, password: password)
        return copy
    }

    /// Authorization: Bearer with this token. Replaces any Authorization header.
    /// - Parameter token: The token.
    /// - Returns: The changed request.
    public func bearer(_ token: String) -> Request { authToken(scheme: "Bearer", token: token) }

    /// Authorization: `<scheme> <token>`. Replaces any Authorization header.
    /// - Parameters:
    ///   - scheme: The scheme token, e.g. "Token"; nil means "Bearer".
    ///   - token: The token.
    /// - Returns: The changed request.
    public func authToken(scheme: String? = nil, token: String) -> Request {
        var copy = self
        copy.authorization = .token(scheme: scheme, token: token)
        return copy
    }

    // MARK: Body

    /// A raw body. Parameters then go in the query string.
    /// - Parameters:
    ///   - data: The bytes (may be empty).
    ///   - contentType: The Content-Type; nil means `application/octet-stream`.
    /// - Returns: The changed request.
    public func body(_ data: Data, contentType: String?) -> Request {
        var copy = self
        copy.rawBody = (data: data, contentType: contentType)
        return copy
    }

    /// A raw JSON body (`application/json`), sent as given.
    /// - Parameter text: The JSON text.
    /// - Returns: The changed request.
    public func json(_ text: String) -> Request { body(Data(text.utf8), contentType: "application/json") }

    // MARK: Timing, base URL, validation, customization

    /// The timeout of this request, whole transfer, overriding the engine's.
    /// - Parameter seconds: Seconds (> 0).
    /// - Returns: The changed request.
    public func timeout(_ seconds: Double) -> Request {
        var copy = self
        copy.timeoutSeconds = seconds
        return copy
    }

    /// A base URL for this request alone, replacing the engine's.
    /// - Parameter url: An http/https URL, possibly with a path.
    /// - Returns: The changed request.
    public func baseURL(_ url: String) -> Request {
        var copy = self
        copy.base = url
        return copy
    }

    /// A validator for this request alone, replacing the engine's: returning false fails the
    /// request with ``CourierError/Code/invalidResult`` (the response attached). It runs on the
    /// engine's worker thread: keep it quick, and never close the engine from it.
    /// - Parameter validator: Says whether a response is a valid result.
    /// - Returns: The changed request.
    public func validator(_ validator: @escaping @Sendable (Response) -> Bool) -> Request {
        var copy = self
        copy.validate = validator
        return copy
    }

    /// Changes the final request just before it is sent (the seeds' `customRequest:`): its URL
    /// and headers, after parameters, defaults and authorization are applied. Several calls run
    /// in order. The closure runs on the sending thread, inside the send; throwing fails the send
    /// with that error (a ``CourierError`` keeps its code).
    /// - Parameter customize: Receives the outgoing request, valid only during the call.
    /// - Returns: The changed request.
    public func customize(_ customize: @escaping @Sendable (inout OutgoingRequest) throws -> Void) -> Request {
        var copy = self
        copy.customizers.append(customize)
        return copy
    }
}

// MARK: - Extension points

/// A setting a feature applies to the C request (`courier_request *`) when it is sent. Features
/// in `Features/` add builder methods to ``Request`` that append one of these.
protocol RequestOption: Sendable {
    /// Applies the setting.
    /// - Parameter request: The `courier_request *` being built.
    /// - Throws: ``CourierError`` if the C core refuses it.
    func apply(to request: OpaquePointer) throws
}

extension Request {
    /// A copy with one more feature setting.
    /// - Parameter option: The setting.
    /// - Returns: The changed request.
    func adding(_ option: any RequestOption) -> Request {
        var copy = self
        copy.options.append(option)
        return copy
    }
}
