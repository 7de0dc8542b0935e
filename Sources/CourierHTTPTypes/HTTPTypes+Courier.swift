// HTTPTypes+Courier.swift — Apple's HTTPTypes (HTTPRequest, HTTPResponse) as Courier's currency:
// `engine.data(for: HTTPRequest)` as HTTPTypesFoundation's URLSession.data(for:) does. Only a
// translation: the engine sends the request as it sends any other (base URL, default headers,
// interceptors, cache, cookies, redirects, retries), and the C core accepts every status
// (`Request.statusCodes(100...599)`, courier_request_add_status_codes) so that a 404 is an answer,
// not an error, as URLSession's is (docs/design/openapi.md).
#if HTTPTypes

import Courier
import Foundation
import HTTPTypes

// MARK: - HTTPRequest to Request

/// A Courier request made from HTTPTypes' `HTTPRequest`.
extension Request {
    /// A Courier request from an `HTTPRequest` and its body.
    ///
    /// A request with a scheme and an authority goes to that absolute URL; one without (as
    /// `HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items")` makes) is joined to
    /// the engine's base URL. Every header field is sent as it is, in order; a `Content-Type` field
    /// becomes the body's content type. The status is judged as by any Courier request (below 400
    /// succeeds); ``Courier/Engine/data(for:)-(HTTPRequest)`` accepts every status.
    /// - Parameters:
    ///   - request: The request: method, target, header fields.
    ///   - body: The body, or nil for none.
    public init(_ request: HTTPRequest, body: Data? = nil) {
        self.init(request, body: body, baseURL: nil)
    }

    /// The request relative to `baseURL` (the OpenAPI transport's: the operation's path and query
    /// are appended to the base URL's path), else as ``init(_:body:)`` makes it.
    package init(_ request: HTTPRequest, body: Data?, baseURL: URL?) {
        let path = request.path ?? "/"
        let target: String
        if let scheme = request.scheme, let authority = request.authority {
            target = "\(scheme)://\(authority)\(path)"
        } else if let baseURL {
            target = Request.join(baseURL, path)
        } else {
            target = path
        }
        var made = Request.method(request.method.rawValue, target)
        var contentType: String?
        for field in request.headerFields {
            if field.name == .contentType, body != nil, contentType == nil {
                contentType = field.value
            } else {
                made = made.header(field.name.rawName, field.value)
            }
        }
        if let body { made = made.body(body, contentType: contentType) }
        self = made
    }

    /// `base` with `pathAndQuery` appended to its path (as swift-openapi-urlsession and
    /// swift-openapi-async-http-client do): "http://h/api" + "/items?x=1" is "http://h/api/items?x=1".
    package static func join(_ base: URL, _ pathAndQuery: String) -> String {
        var text = base.absoluteString
        if let query = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = String(text[..<query]) }
        if text.hasSuffix("/") && pathAndQuery.hasPrefix("/") { text.removeLast() }
        return text + pathAndQuery
    }
}

// MARK: - Response to HTTPResponse

/// HTTPTypes' `HTTPResponse` made from a Courier response.
extension HTTPResponse {
    /// The status and header fields of a Courier response (its body is `response.body`).
    /// A header line whose name is not a valid field name is left out (the engine does not
    /// deliver such lines).
    /// - Parameter response: The response.
    public init(_ response: Response) {
        var fields = HTTPFields()
        fields.reserveCapacity(response.headers.count)
        for line in response.headers {
            guard let name = HTTPField.Name(line.name) else { continue }
            fields.append(HTTPField(name: name, value: line.value))
        }
        self.init(status: .init(code: response.status), headerFields: fields)
    }
}

// MARK: - Sending

/// Sending HTTPTypes' `HTTPRequest` through the engine.
extension Engine {
    /// Sends an `HTTPRequest` and returns the body and the response, with any status (as
    /// `URLSession.data(for:)` does): a 404 returns, it does not throw.
    ///
    /// ```swift
    /// let (data, response) = try await engine.data(for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/json"))
    /// print(response.status.code, data.count)
    /// ```
    ///
    /// The engine does for it what it does for any request: base URL (for a request without an
    /// authority), default headers and parameters, interceptors, cache, cookies, redirects, retries.
    /// - Parameter request: The request (see ``Courier/Request/init(_:body:)``).
    /// - Returns: The body and the response.
    /// - Throws: `CourierError` when no response arrived (`CourierError.timeout`,
    ///   `CourierError.cancelled`, `CourierError.cannotConnect`...), or when the
    ///   engine's validator refused it (`CourierError.invalidResult`).
    public func data(for request: HTTPRequest) async throws -> (Data, HTTPResponse) {
        try await send(request, body: nil)
    }

    /// Sends an `HTTPRequest` with a body and returns the response's body and the response, with
    /// any status (as `URLSession.upload(for:from:)` does).
    /// - Parameters:
    ///   - request: The request; its `Content-Type` field, if any, is the body's type.
    ///   - body: The body to send.
    /// - Returns: The body and the response.
    /// - Throws: As ``data(for:)-(HTTPRequest)``.
    public func upload(for request: HTTPRequest, from body: Data) async throws -> (Data, HTTPResponse) {
        try await send(request, body: body)
    }

    private func send(_ request: HTTPRequest, body: Data?) async throws -> (Data, HTTPResponse) {
        let response = try await send(Request(request, body: body).statusCodes(100...599))
        return (response.body, HTTPResponse(response))
    }
}
#endif
