// Requestable.swift — requests as types that describe themselves (HTNetworking's HTBaseRequest
// subclasses): `struct UserRequest: Requestable { var path: String { "/users/\(id)" } ... }`.

import Foundation

// MARK: - Requestable

/// A type that describes one request: override what differs from the defaults (GET, no
/// parameters, no headers, the engine's timeout and base URL), then send it with
/// `engine.send(_:)`. For anything the properties do not cover, implement
/// ``makeRequest()`` and chain builder calls on the default: `defaultRequest().bearer(token)`.
public protocol Requestable: Sendable {
    /// The HTTP method token. Default "GET".
    var method: String { get }
    /// A path joined to the base URL, or an absolute URL.
    var path: String { get }
    /// Parameters (sent sorted by name). Default none.
    var parameters: [String: String] { get }
    /// Headers (sent sorted by name). Default none.
    var headers: [String: String] { get }
    /// The timeout in seconds; nil means the engine's. Default nil.
    var timeout: Double? { get }
    /// A base URL for this request; nil means the engine's. Default nil.
    var baseURL: String? { get }
    /// Whether the engine's default parameters are added. Default true.
    var useDefaultParameters: Bool { get }
    /// How body parameters are encoded; nil means the engine's setting. Default nil.
    var bodyEncoding: BodyEncoding? { get }
    /// A raw body and its content type; parameters then go in the query. Default nil.
    var body: (data: Data, contentType: String)? { get }
    /// A validator for this request (HTBaseRequest's `validResultBlock`). Default nil.
    var validator: (@Sendable (Response) -> Bool)? { get }
    /// A hook that changes the final request (HTBaseRequest's `customRequest:`). Default nil.
    var customizer: (@Sendable (inout OutgoingRequest) throws -> Void)? { get }

    /// The request to send. The default builds it from the properties above.
    /// - Returns: The request.
    func makeRequest() -> Request
}

// MARK: - Defaults

extension Requestable {
    /// "GET".
    public var method: String { "GET" }
    /// None.
    public var parameters: [String: String] { [:] }
    /// None.
    public var headers: [String: String] { [:] }
    /// nil: the engine's timeout.
    public var timeout: Double? { nil }
    /// nil: the engine's base URL.
    public var baseURL: String? { nil }
    /// true.
    public var useDefaultParameters: Bool { true }
    /// nil: the engine's encoding.
    public var bodyEncoding: BodyEncoding? { nil }
    /// nil: no raw body.
    public var body: (data: Data, contentType: String)? { nil }
    /// nil: the engine's validator, if any.
    public var validator: (@Sendable (Response) -> Bool)? { nil }
    /// nil: no customization.
    public var customizer: (@Sendable (inout OutgoingRequest) throws -> Void)? { nil }

    /// The request described by the properties.
    /// - Returns: The request.
    public func makeRequest() -> Request { defaultRequest() }

    /// The request described by the properties, for implementations of ``makeRequest()`` that
    /// chain more builder calls on it.
    /// - Returns: The request.
    public func defaultRequest() -> Request {
        var request = Request.method(method, path).parameters(parameters).headers(headers)
            .useDefaultParameters(useDefaultParameters)
        if let timeout { request = request.timeout(timeout) }
        if let baseURL { request = request.baseURL(baseURL) }
        if let bodyEncoding { request = request.bodyEncoding(bodyEncoding) }
        if let body { request = request.body(body.data, contentType: body.contentType) }
        if let validator { request = request.validator(validator) }
        if let customizer { request = request.customize(customizer) }
        return request
    }
}
